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
    object::{device_of, Kind, Object},
    udata::Udata,
};
use kernel::{error::from_result, ffi::c_int, prelude::*};

/// The verbs of a protection domain: what a driver's PD data (`T::Pd`) implements.
#[vtable]
pub(crate) trait PdOps<T: Driver>: Sized + Send + Sync {
    /// A protection domain is allocated, for a process (`udata`) or a kernel consumer.
    fn alloc_pd(dev: &Device<T>, udata: Option<&Udata>) -> impl PinInit<Self, Error>;
}

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

/// The kind of a protection domain.
pub(crate) enum PdKind {}

impl<T: Driver> Kind<T> for PdKind {
    type Raw = bindings::ib_pd;
    type Events = ();
    type Data = T::Pd;
}

/// A protection domain of driver `T`.
pub(crate) type Pd<T> = Object<T, PdKind>;

/// Fills in the PD verbs of an ops table.
pub(super) fn set_ops<T: Driver>(ops: &mut bindings::ib_device_ops) {
    ops.size_ib_pd = Pd::<T>::block_size();
    ops.alloc_pd = Some(alloc_pd::<T>);
    ops.dealloc_pd = Some(dealloc_pd::<T>);
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn alloc_pd<T: Driver>(
    pd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core allocated `pd` with `size_ib_pd` bytes for our device and set
        // its device.
        let dev = unsafe { device_of::<T, _>(pd) };
        // SAFETY: `udata` is null or valid for the call.
        let udata = unsafe { Udata::from_raw(udata) };
        // SAFETY: As above; nothing of the block is initialised yet.
        unsafe { Pd::<T>::init(pd, (), T::Pd::alloc_pd(dev, udata))? };
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn dealloc_pd<T: Driver>(
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: ib_core calls this once, on a PD whose `alloc_pd` succeeded and that no
    // object uses any more (it checked `usecnt`).
    unsafe { Pd::<T>::drop_in_place(pd) };
    0
}
