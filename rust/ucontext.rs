// SPDX-License-Identifier: GPL-2.0

//! Per-process contexts (`struct ib_ucontext`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! uverbs allocates a context (`size_ib_ucontext` bytes, zeroed) when a process opens the
//! device, calls `alloc_ucontext`, and after `dealloc_ucontext` frees the block itself.
//! [`Ucontext<T>`] is that block: the C struct first, then the driver's data. On a failed
//! `alloc_ucontext` the block is freed without `dealloc_ucontext`, so the data must not be
//! left initialised then (pin-init guarantees it).

use super::{
    bindings,
    device::{Device, Driver},
    udata::Udata,
};
use core::ptr;
use kernel::{prelude::*, types::Opaque};

/// A process's context on a device of driver `T`.
///
/// # Invariants
///
/// `data` is initialised between a successful `alloc_ucontext` and `dealloc_ucontext`, and
/// `ib.device` is a `Device<T>` for the whole time.
#[repr(C)]
pub(crate) struct Ucontext<T: Driver> {
    ib: Opaque<bindings::ib_ucontext>,
    data: T::Ucontext,
}

impl<T: Driver> Ucontext<T> {
    /// Initialises the driver's part of a new context.
    ///
    /// # Safety
    ///
    /// `ctx` must be a zeroed block of `size_of::<Self>()` bytes made by ib_core for a
    /// `Device<T>`; `udata` must be null or valid for the call.
    pub(super) unsafe fn init(
        ctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> Result {
        // SAFETY: ib_core set `device` before calling the driver.
        let dev = unsafe { Device::<T>::from_raw((*ctx).device) };
        // SAFETY: Valid per the caller.
        let udata = unsafe { Udata::from_raw(udata) };
        let init = T::alloc_ucontext(dev, udata);
        let this = ctx.cast::<Self>();
        // SAFETY: `this` has room for `Self`; the block does not move until it is freed.
        unsafe { init.__pinned_init(ptr::addr_of_mut!((*this).data)) }
    }

    /// Drops the driver's part of a context that is going away.
    ///
    /// # Safety
    ///
    /// `ctx` must have been initialised by [`Self::init`] and not dropped yet.
    pub(super) unsafe fn drop_in_place(ctx: *mut bindings::ib_ucontext) {
        let this = ctx.cast::<Self>();
        // SAFETY: Initialised and not dropped, per the caller.
        unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*this).data)) };
    }

    /// Borrows a live context.
    ///
    /// # Safety
    ///
    /// `ctx` must have been initialised by [`Self::init`] and stay alive for `'a`.
    pub(super) unsafe fn from_raw<'a>(ctx: *mut bindings::ib_ucontext) -> &'a Self {
        // SAFETY: Per the caller; `ib` is the first field of a `repr(C)` struct.
        unsafe { &*ctx.cast::<Self>() }
    }

    /// The C context, for ib_core calls made on the process's behalf.
    pub(super) fn as_raw(&self) -> *mut bindings::ib_ucontext {
        self.ib.get()
    }
}
