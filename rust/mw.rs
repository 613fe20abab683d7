// SPDX-License-Identifier: GPL-2.0

//! Memory windows (`struct ib_mw`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates a MW (`size_ib_mw` bytes, zeroed) with its device, PD and type set,
//! calls `alloc_mw`, which sets the rkey, and frees the block after `dealloc_mw`.
//! [`Mw<T>`] is the block.

use super::{
    bindings,
    cq::UserCall,
    device::{Device, Driver},
    pd::PdId,
};
use core::ptr;
use kernel::{prelude::*, types::Opaque};

/// A memory window of driver `T`.
///
/// # Invariants
///
/// `data` is initialised between a successful `alloc_mw` and `dealloc_mw`.
#[repr(C)]
pub(crate) struct Mw<T: Driver> {
    ib: Opaque<bindings::ib_mw>,
    data: T::Mw,
}

impl<T: Driver> Mw<T> {
    /// Allocates the driver's part of a new MW.
    ///
    /// # Safety
    ///
    /// `mw` must be a zeroed block of `size_of::<Self>()` bytes made by ib_core for a
    /// `Device<T>`, with its type set; `udata` null or the driver udata of the call.
    pub(super) unsafe fn alloc(mw: *mut bindings::ib_mw, udata: *mut bindings::ib_udata) -> Result {
        // SAFETY: Per the caller.
        let ib = unsafe { &mut *mw };
        // SAFETY: ib_core set the device before calling the driver.
        let dev = unsafe { Device::<T>::from_raw(ib.device) };
        let type2 = match ib.type_ {
            bindings::ib_mw_type_IB_MW_TYPE_1 => false,
            bindings::ib_mw_type_IB_MW_TYPE_2 => true,
            _ => return Err(EINVAL),
        };
        // SAFETY: Per the caller.
        let user = unsafe { UserCall::<T>::from_udata(udata) };
        let (data, rkey) = T::alloc_mw(dev, PdId::of(ib.pd), type2, user.as_ref())?;
        ib.rkey = rkey;
        let this = mw.cast::<Self>();
        // SAFETY: `this` has room for `Self`; `data` is not initialised yet.
        unsafe { ptr::addr_of_mut!((*this).data).write(data) };
        Ok(())
    }

    /// Drops the driver's part of a MW that is going away.
    ///
    /// # Safety
    ///
    /// `mw` must have been allocated by [`Self::alloc`] and not dropped yet.
    pub(super) unsafe fn drop_in_place(mw: *mut bindings::ib_mw) {
        let this = mw.cast::<Self>();
        // SAFETY: Initialised and not dropped, per the caller.
        unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*this).data)) };
    }
}
