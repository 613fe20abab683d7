// SPDX-License-Identifier: GPL-2.0

//! The kernel's random numbers.
//!
//! C header: [`include/linux/random.h`](srctree/include/linux/random.h)

/// A random number from the kernel's CRNG (`get_random_u32()`): what a process or a
/// peer cannot predict from the numbers it saw before.
pub(crate) fn random_u32() -> u32 {
    // SAFETY: `get_random_u32()` takes no arguments and may be called in any context.
    unsafe { kernel::bindings::get_random_u32() }
}
