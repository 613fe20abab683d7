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
    device::{Device, Driver},
    object::{device_of, Absent, Kind, Object},
    pd::PdId,
    qp::AddressVector,
    ucontext::UserCall,
};
use kernel::{error::from_result, ffi::c_int, prelude::*};

/// The verbs of an address handle: what a driver's AH data (`T::Ah`) implements. A
/// driver without `create_ah` has no address handles.
#[vtable]
pub(crate) trait AhOps<T: Driver>: Sized + Send + Sync {
    /// An address handle is created in PD `pd`; `may_sleep` is false for a kernel
    /// consumer in atomic context.
    fn create_ah(
        _dev: &Device<T>,
        _pd: PdId,
        _av: &AddressVector,
        _may_sleep: bool,
        _user: Option<&UserCall<'_, T>>,
    ) -> Result<Self> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The address an AH stands for.
    fn query_ah(_ah: &Ah<T>) -> AddressVector {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

#[vtable]
impl<T: Driver> AhOps<T> for Absent {}

/// The kind of an address handle.
pub(crate) enum AhKind {}

impl<T: Driver> Kind<T> for AhKind {
    type Raw = bindings::ib_ah;
    type Events = ();
    type Data = T::Ah;
}

/// An address handle of driver `T`.
pub(crate) type Ah<T> = Object<T, AhKind>;

/// Fills in the AH verbs of an ops table.
pub(super) fn set_ops<T: Driver>(ops: &mut bindings::ib_device_ops) {
    if !T::Ah::HAS_CREATE_AH {
        return;
    }
    ops.size_ib_ah = Ah::<T>::block_size();
    ops.create_ah = Some(create_ah::<T>);
    ops.create_user_ah = Some(create_ah::<T>);
    if T::Ah::HAS_QUERY_AH {
        ops.query_ah = Some(query_ah::<T>);
    }
    ops.destroy_ah = Some(destroy_ah::<T>);
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn create_ah<T: Driver>(
    ah: *mut bindings::ib_ah,
    init: *mut bindings::rdma_ah_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core allocated `ah` with `size_ib_ah` bytes for our device, with its
        // device and PD set; `init` (with its GID attribute) is valid for the call.
        let (ib, a) = unsafe { (&*ah, &*init) };
        if a.ah_attr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: As above.
        let dev = unsafe { device_of::<T, _>(ah) };
        // SAFETY: The attribute and its GID attribute are valid for the call.
        let av = unsafe { AddressVector::from_raw(&*a.ah_attr) };
        let sleepable = a.flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
        // SAFETY: `udata` is null for a kernel consumer, else the driver udata of the
        // uverbs call.
        let user = unsafe { UserCall::<T>::from_udata(udata) };
        // The PD lives as long as the AH.
        let pd = PdId::of(ib.pd);
        let data = T::Ah::create_ah(dev, pd, &av, sleepable || user.is_some(), user.as_ref())?;
        // SAFETY: Nothing of the block is initialised yet.
        unsafe { Ah::<T>::init(ah, (), Ok(data))? };
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn query_ah<T: Driver>(
    ah: *mut bindings::ib_ah,
    attr: *mut bindings::rdma_ah_attr,
) -> c_int {
    // SAFETY: ib_core calls this on a live AH of our device.
    let ah = unsafe { Ah::<T>::from_raw(ah) };
    // SAFETY: `attr` is valid for writes for the call.
    T::Ah::query_ah(ah).write_to(unsafe { &mut *attr });
    0
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn destroy_ah<T: Driver>(ah: *mut bindings::ib_ah, _flags: u32) -> c_int {
    // SAFETY: ib_core calls this once, on a live AH of our device.
    unsafe { Ah::<T>::drop_in_place(ah) };
    0
}
