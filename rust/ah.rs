// SPDX-License-Identifier: GPL-2.0

//! Address handles (`struct ib_ah`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates an AH (`size_ib_ah` bytes, zeroed), fills in the device and PD,
//! resolves the destination MAC of a RoCE address, and calls `create_ah` (kernel) or
//! `create_user_ah` (a process); after `destroy_ah` it frees the block. A kernel
//! consumer may create and destroy AHs in atomic context (without
//! `RDMA_CREATE_AH_SLEEPABLE`): the driver must then not sleep. [`Ah<T>`] is the block.

use super::{
    bindings,
    cq::UserCall,
    device::{Device, Driver},
    pd::PdId,
    qp::AddressVector,
};
use core::ptr;
use kernel::{prelude::*, types::Opaque};

/// An address handle of driver `T`.
///
/// # Invariants
///
/// `data` is initialised between a successful create and `destroy_ah`; `ib.device` is a
/// `Device<T>` for the whole time.
#[repr(C)]
pub(crate) struct Ah<T: Driver> {
    ib: Opaque<bindings::ib_ah>,
    data: T::Ah,
}

impl<T: Driver> core::ops::Deref for Ah<T> {
    type Target = T::Ah;

    fn deref(&self) -> &T::Ah {
        &self.data
    }
}

impl<T: Driver> Ah<T> {
    /// Creates the driver's part of a new AH.
    ///
    /// # Safety
    ///
    /// `ah` must be a zeroed block of `size_of::<Self>()` bytes made by ib_core for a
    /// `Device<T>`; `init` valid for the call, its GID attribute too; `udata` null for
    /// a kernel consumer, else the driver udata of the uverbs call.
    pub(super) unsafe fn create(
        ah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> Result {
        // SAFETY: Per the caller.
        let (ib, a) = unsafe { (&*ah, &*init) };
        if a.ah_attr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: ib_core set the device before calling the driver.
        let dev = unsafe { Device::<T>::from_raw(ib.device) };
        // SAFETY: The attribute and its GID attribute are valid for the call.
        let av = unsafe { AddressVector::from_raw(&*a.ah_attr) };
        let sleepable = a.flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
        // SAFETY: Per the caller.
        let user = unsafe { UserCall::<T>::from_udata(udata) };
        // ib_core set the PD before calling the driver; it lives as long as the AH.
        let pd = PdId::of(ib.pd);
        let data = T::create_ah(dev, pd, &av, sleepable || user.is_some(), user.as_ref())?;
        let this = ah.cast::<Self>();
        // SAFETY: `this` has room for `Self`; `data` is not initialised yet.
        unsafe { ptr::addr_of_mut!((*this).data).write(data) };
        Ok(())
    }

    /// Drops the driver's part of an AH that is going away.
    ///
    /// # Safety
    ///
    /// `ah` must have been created by [`Self::create`] and not dropped yet.
    pub(super) unsafe fn drop_in_place(ah: *mut bindings::ib_ah) {
        let this = ah.cast::<Self>();
        // SAFETY: Initialised and not dropped, per the caller.
        unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*this).data)) };
    }

    /// Borrows a live AH.
    ///
    /// # Safety
    ///
    /// `ah` must have been created by [`Self::create`] and stay alive for `'a`.
    pub(super) unsafe fn from_raw<'a>(ah: *mut bindings::ib_ah) -> &'a Self {
        // SAFETY: Per the caller; `ib` is the first field of a `repr(C)` struct.
        unsafe { &*ah.cast::<Self>() }
    }
}

/// Writes a query's answer.
///
/// # Safety
///
/// `attr` must be valid for writes for the call.
pub(super) unsafe fn write_av(av: &AddressVector, attr: *mut bindings::rdma_ah_attr) {
    // SAFETY: Per the caller.
    av.write_to(unsafe { &mut *attr })
}
