// SPDX-License-Identifier: GPL-2.0

//! The user buffers of a verbs call.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h) (`struct ib_udata`)
//!
//! uverbs hands a driver the part of a command that belongs to the driver: an input
//! buffer (the driver-specific command) and an output buffer (the driver-specific
//! response), both in user memory. Kernel consumers pass no udata at all.

use super::bindings;
use kernel::{error::to_result, prelude::*, types::Opaque};

/// The driver-specific user buffers of one verbs call.
///
/// # Invariants
///
/// The wrapped `ib_udata` is valid for the lifetime of the borrow.
#[repr(transparent)]
pub(crate) struct Udata(Opaque<bindings::ib_udata>);

impl Udata {
    /// Borrows the udata of a call, or `None` for a kernel caller.
    ///
    /// # Safety
    ///
    /// `ptr` must be null or valid for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_udata) -> Option<&'a Self> {
        // SAFETY: `Udata` is `repr(transparent)`; validity is the caller's promise.
        unsafe { ptr.cast::<Self>().as_ref() }
    }

    /// The C udata.
    pub(super) fn as_raw(&self) -> *mut bindings::ib_udata {
        self.0.get()
    }

    /// The room userspace left for the driver-specific response.
    pub(crate) fn out_len(&self) -> usize {
        // SAFETY: By the type invariant the udata is valid.
        unsafe { (*self.0.get()).outlen }
    }

    /// Fails with `EINVAL` unless the driver-specific input is absent or all zeroes.
    pub(crate) fn require_empty_input(&self) -> Result {
        // SAFETY: By the type invariant the udata is valid.
        to_result(unsafe { bindings::rxe_rs_udata_in_is_empty(self.0.get()) })
    }

    /// Answers with an empty driver-specific response (clears what userspace asked for).
    pub(crate) fn respond_empty(&self) -> Result {
        // SAFETY: By the type invariant the udata is valid.
        to_result(unsafe { bindings::rxe_rs_respond_empty_udata(self.0.get()) })
    }

    /// Answers with `resp`, the driver-specific response.
    ///
    /// Fails with `EINVAL` when userspace left less room than `resp` needs (a truncated
    /// answer would be misread), and with `EFAULT` when the buffer cannot be written.
    /// Room beyond `resp` is cleared.
    pub(crate) fn respond(&self, resp: &[u8]) -> Result {
        // SAFETY: By the type invariant the udata is valid.
        let outlen = unsafe { (*self.0.get()).outlen };
        if outlen < resp.len() {
            return Err(EINVAL);
        }
        // SAFETY: The udata is valid and `resp` is readable for its length.
        to_result(unsafe {
            bindings::_ib_respond_udata(self.0.get(), resp.as_ptr().cast(), resp.len())
        })
    }

    /// Copies the driver-specific command into `req`.
    ///
    /// The command must be at least `min` bytes; beyond `req`'s size it must be zeroes
    /// (a newer command this driver does not know), and what it lacks of `req` is zeroed.
    pub(crate) fn copy_in(&self, req: &mut [u8], min: usize) -> Result {
        // SAFETY: The udata is valid and `req` is writable for its length.
        to_result(unsafe {
            bindings::_ib_copy_validate_udata_in(
                self.0.get(),
                req.as_mut_ptr().cast(),
                req.len(),
                min,
            )
        })
    }
}
