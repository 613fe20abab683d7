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
}
