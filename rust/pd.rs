// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates a PD (`size_ib_pd` bytes, zeroed), calls `alloc_pd`, and frees the
//! block after `dealloc_pd`. ib_core refuses the dealloc with `EBUSY` while any object
//! counts on the PD (`usecnt`), so `dealloc_pd` here cannot fail. [`Pd<T>`] is the block:
//! the C struct first, then the driver's data.

use super::{
    bindings,
    device::{Device, Driver},
    udata::Udata,
};
use core::ptr;
use kernel::{prelude::*, types::Opaque};

/// Which PD an object was made in, for the data path's checks (an MR serves a QP only
/// if both are in the same PD). The PD's address: ib_core keeps a PD alive, at one
/// address, for as long as any object counts on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PdId(usize);

impl PdId {
    /// The id of a live PD.
    pub(super) fn of(pd: *const bindings::ib_pd) -> Self {
        Self(pd as usize)
    }
}

/// A protection domain of driver `T`.
///
/// # Invariants
///
/// `data` is initialised between a successful `alloc_pd` and `dealloc_pd`, and
/// `ib.device` is a `Device<T>` for the whole time.
#[repr(C)]
pub(crate) struct Pd<T: Driver> {
    ib: Opaque<bindings::ib_pd>,
    data: T::Pd,
}

impl<T: Driver> Pd<T> {
    /// Initialises the driver's part of a new PD.
    ///
    /// # Safety
    ///
    /// `pd` must be a zeroed block of `size_of::<Self>()` bytes made by ib_core for a
    /// `Device<T>`; `udata` must be null or valid for the call.
    pub(super) unsafe fn init(pd: *mut bindings::ib_pd, udata: *mut bindings::ib_udata) -> Result {
        // SAFETY: ib_core set `device` before calling the driver.
        let dev = unsafe { Device::<T>::from_raw((*pd).device) };
        // SAFETY: Valid per the caller.
        let udata = unsafe { Udata::from_raw(udata) };
        let init = T::alloc_pd(dev, udata);
        let this = pd.cast::<Self>();
        // SAFETY: `this` has room for `Self`; the block does not move until it is freed.
        unsafe { init.__pinned_init(ptr::addr_of_mut!((*this).data)) }
    }

    /// Drops the driver's part of a PD that is going away.
    ///
    /// # Safety
    ///
    /// `pd` must have been initialised by [`Self::init`] and not dropped yet.
    pub(super) unsafe fn drop_in_place(pd: *mut bindings::ib_pd) {
        let this = pd.cast::<Self>();
        // SAFETY: Initialised and not dropped, per the caller.
        unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*this).data)) };
    }
}
