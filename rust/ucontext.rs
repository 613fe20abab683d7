// SPDX-License-Identifier: GPL-2.0

//! Per-process contexts (`struct ib_ucontext`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! uverbs allocates a context (`size_ib_ucontext` bytes, zeroed) when a process opens the
//! device, calls `alloc_ucontext`, and after `dealloc_ucontext` frees the block itself.
//! [`Ucontext<T>`] is that block: the C struct first, then the driver's data. On a failed
//! `alloc_ucontext` the block is freed without `dealloc_ucontext`, so the data must not be
//! left initialised then ([`Object::init`] initialises nothing on failure).

use super::{
    bindings,
    device::{Device, Driver},
    mmap,
    object::{device_of, Kind, Object},
    udata::Udata,
};
use kernel::{error::from_result, ffi::c_int, prelude::*};

/// The process side of a verb's call: its context and its driver-specific buffers.
pub(crate) struct UserCall<'a, T: Driver> {
    /// The process's context, where rings are offered for mapping.
    pub(crate) ctx: &'a Ucontext<T>,
    /// The driver-specific command and response.
    pub(crate) udata: &'a Udata,
}

impl<T: Driver> UserCall<'_, T> {
    /// The process side of a call that passed `udata`, or `None` for a kernel caller.
    ///
    /// # Safety
    ///
    /// `udata` must be null or the driver udata of a uverbs call on a `Device<T>`, valid
    /// for the returned lifetime.
    pub(super) unsafe fn from_udata<'a>(udata: *mut bindings::ib_udata) -> Option<UserCall<'a, T>> {
        // SAFETY: Per the caller.
        let udata = unsafe { Udata::from_raw(udata) }?;
        // SAFETY: A uverbs call's udata is embedded in its bundle, whose context is a live
        // context of the device, so of `T`.
        let ctx =
            unsafe { Ucontext::<T>::from_raw(bindings::rxe_rs_udata_context(udata.as_raw())) };
        Some(UserCall { ctx, udata })
    }

    /// The process side of a call that passed a bundle (`create_user_cq`).
    ///
    /// # Safety
    ///
    /// `bundle` must be the attribute bundle of a uverbs call on a `Device<T>`, valid for
    /// the returned lifetime.
    pub(super) unsafe fn from_bundle<'a>(
        bundle: *mut bindings::uverbs_attr_bundle,
    ) -> Result<UserCall<'a, T>> {
        // SAFETY: A bundle's context and udata are valid for the call, and the context is
        // one of the device's, so of `T`.
        unsafe {
            Ok(UserCall {
                ctx: Ucontext::<T>::from_raw(bindings::rxe_rs_bundle_context(bundle)),
                udata: Udata::from_raw(bindings::rxe_rs_bundle_udata(bundle)).ok_or(EINVAL)?,
            })
        }
    }
}

/// The verbs of a process's context: what a driver's context data (`T::Ucontext`)
/// implements. Both are optional; a driver without `alloc_ucontext` cannot be opened
/// by processes (uverbs offers no device file for it).
#[vtable]
pub(crate) trait UcontextOps<T: Driver>: Sized + Send + Sync {
    /// A process opened the device.
    fn alloc_ucontext(_dev: &Device<T>, _udata: Option<&Udata>) -> Result<Self> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The device is going away while a process still has it open: ib_core has
    /// destroyed every object of the context (through the usual destroy verbs, which
    /// must not fail) and zapped the process's mappings of the device, and calls
    /// `dealloc_ucontext` right after. Hardware drivers give back what the process could
    /// still reach. With it, ib_core unregisters a device without waiting for its
    /// processes to close it.
    fn disassociate_ucontext(_ctx: &Ucontext<T>) {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// The kind of a process's context.
pub(crate) enum UcontextKind {}

impl<T: Driver> Kind<T> for UcontextKind {
    type Raw = bindings::ib_ucontext;
    type Events = ();
    type Data = T::Ucontext;
}

/// A process's context on a device of driver `T`.
pub(crate) type Ucontext<T> = Object<T, UcontextKind>;

/// Fills in the context verbs of an ops table (the mappings of its rings among them).
pub(super) fn set_ops<T: Driver>(ops: &mut bindings::ib_device_ops) {
    if !T::Ucontext::HAS_ALLOC_UCONTEXT {
        return;
    }
    ops.size_ib_ucontext = Ucontext::<T>::block_size();
    ops.alloc_ucontext = Some(alloc_ucontext::<T>);
    ops.dealloc_ucontext = Some(dealloc_ucontext::<T>);
    ops.mmap = Some(mmap_ring);
    ops.mmap_free = Some(mmap::mmap_free);
    if T::Ucontext::HAS_DISASSOCIATE_UCONTEXT {
        ops.disassociate_ucontext = Some(disassociate_ucontext::<T>);
    }
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn alloc_ucontext<T: Driver>(
    ctx: *mut bindings::ib_ucontext,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: uverbs allocated `ctx` with `size_ib_ucontext` bytes for our device and
        // set its device.
        let dev = unsafe { device_of::<T, _>(ctx) };
        // SAFETY: `udata` is null or valid for the call.
        let udata = unsafe { Udata::from_raw(udata) };
        // SAFETY: As above; nothing of the block is initialised yet.
        unsafe { Ucontext::<T>::init(ctx, (), T::Ucontext::alloc_ucontext(dev, udata))? };
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn dealloc_ucontext<T: Driver>(ctx: *mut bindings::ib_ucontext) {
    // SAFETY: ib_core calls this once, on a context whose `alloc_ucontext` succeeded.
    unsafe { Ucontext::<T>::drop_in_place(ctx) };
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn mmap_ring(
    ctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: ib_core calls this on a live context of our device, with the VMA being
    // set up for its device file.
    from_result(|| unsafe { mmap::map(ctx, vma) }.map(|()| 0))
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn disassociate_ucontext<T: Driver>(ctx: *mut bindings::ib_ucontext) {
    // SAFETY: ib_core calls this on a live context of our device.
    T::Ucontext::disassociate_ucontext(unsafe { Ucontext::<T>::from_raw(ctx) });
}
