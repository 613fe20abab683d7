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
    device::{Device, Driver},
    object::{device_of, Absent, Kind, Object},
    pd::PdId,
    ucontext::UserCall,
};
use kernel::{error::from_result, ffi::c_int, prelude::*};

/// The verbs of a memory window: what a driver's MW data (`T::Mw`) implements. A
/// driver without `alloc_mw` has no memory windows.
#[vtable]
pub(crate) trait MwOps<T: Driver>: Sized + Send + Sync {
    /// A memory window of type 1 or 2 (`type2`) is allocated in PD `pd`; returns it and
    /// its rkey.
    fn alloc_mw(
        _dev: &Device<T>,
        _pd: PdId,
        _type2: bool,
        _user: Option<&UserCall<'_, T>>,
    ) -> Result<(Self, u32)> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

#[vtable]
impl<T: Driver> MwOps<T> for Absent {}

/// The kind of a memory window.
pub(crate) enum MwKind {}

impl<T: Driver> Kind<T> for MwKind {
    type Raw = bindings::ib_mw;
    type Events = ();
    type Data = T::Mw;
}

/// A memory window of driver `T`.
pub(crate) type Mw<T> = Object<T, MwKind>;

/// Fills in the MW verbs of an ops table.
pub(super) fn set_ops<T: Driver>(ops: &mut bindings::ib_device_ops) {
    if !T::Mw::HAS_ALLOC_MW {
        return;
    }
    ops.size_ib_mw = Mw::<T>::block_size();
    ops.alloc_mw = Some(alloc_mw::<T>);
    ops.dealloc_mw = Some(dealloc_mw::<T>);
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn alloc_mw<T: Driver>(
    mw: *mut bindings::ib_mw,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core allocated `mw` with `size_ib_mw` bytes for our device, with its
        // device, PD and type set.
        let dev = unsafe { device_of::<T, _>(mw) };
        // SAFETY: As above; nothing else refers to the block during the call.
        let ib = unsafe { &mut *mw };
        let type2 = match ib.type_ {
            bindings::ib_mw_type_IB_MW_TYPE_1 => false,
            bindings::ib_mw_type_IB_MW_TYPE_2 => true,
            _ => return Err(EINVAL),
        };
        // SAFETY: `udata` is null or the driver udata of a uverbs call on our device.
        let user = unsafe { UserCall::<T>::from_udata(udata) };
        let (data, rkey) = T::Mw::alloc_mw(dev, PdId::of(ib.pd), type2, user.as_ref())?;
        ib.rkey = rkey;
        // SAFETY: Nothing of the block is initialised yet.
        unsafe { Mw::<T>::init(mw, (), Ok(data))? };
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn dealloc_mw<T: Driver>(mw: *mut bindings::ib_mw) -> c_int {
    // SAFETY: ib_core calls this once, on a live MW of our device.
    unsafe { Mw::<T>::drop_in_place(mw) };
    0
}
