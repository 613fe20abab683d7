// SPDX-License-Identifier: GPL-2.0

//! The kernel's CRC-32.
//!
//! C header: [`include/linux/crc32.h`](srctree/include/linux/crc32.h)

use crate::ib::bindings;

/// The CRC-32 of IEEE 802.3 (reflected, polynomial 0xEDB88320) register `crc` after
/// `bytes`, without inverting it before or after: the kernel's `crc32_le()`, which uses
/// the CPU's carry-less multiplication or CRC instructions where it has them.
pub(crate) fn crc32_le(crc: u32, bytes: &[u8]) -> u32 {
    // SAFETY: `bytes` is valid for reading `bytes.len()` bytes for the call.
    unsafe { bindings::crc32_le(crc, bytes.as_ptr().cast(), bytes.len()) }
}
