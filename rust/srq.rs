// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates an SRQ (`size_ib_srq` bytes, zeroed), fills in the device, PD, type
//! and the consumer's event handler, and calls `create_srq`; after a successful
//! `destroy_srq` it frees the block. [`Srq<T>`] is the block: the C struct, the consumer's
//! event handler ([`SrqEvents`]), then the driver's data, built as a value. ib_core refuses to destroy an SRQ that a QP still
//! uses (`usecnt`), so `destroy_srq` cannot fail here.

use super::{
    bindings,
    device::{Device, Driver},
    object::{device_of, Absent, Events, Kind, Object},
    pd::PdId,
    ucontext::UserCall,
    wr::RecvWr,
};
use kernel::{error::from_result, ffi::c_int, prelude::*, sync::Arc};

/// The verbs of a shared receive queue: what a driver's SRQ data (`T::Srq`)
/// implements. A driver without `create_srq` has no SRQs; one with it must have
/// `post_srq_recv` (ib_core calls it without looking).
#[vtable]
pub(crate) trait SrqOps<T: Driver>: Sized + Send + Sync {
    /// A shared receive queue is created in the protection domain `pd` (the one its
    /// receive WQEs' keys belong to); returns its data and its actual attributes.
    fn create_srq(
        _dev: &Device<T>,
        _pd: PdId,
        _attr: &SrqAttr,
        _user: Option<&UserCall<'_, T>>,
        _events: &Arc<SrqEvents>,
    ) -> Result<(Self, SrqAttr)> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The consumer resizes an SRQ or arms its limit.
    fn modify_srq(_srq: &Srq<T>, _m: &SrqModify, _user: Option<&UserCall<'_, T>>) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The consumer asks for an SRQ's attributes.
    fn query_srq(_srq: &Srq<T>) -> SrqAttr {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The kernel posts one receive work request (of a chain: each in turn until one
    /// fails). May be called in atomic context.
    fn post_srq_recv(_srq: &Srq<T>, _wr: &RecvWr<'_>) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

#[vtable]
impl<T: Driver> SrqOps<T> for Absent {}

/// The sizes and limit of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SrqAttr {
    /// Receive work requests it holds.
    pub(crate) max_wr: u32,
    /// Scatter/gather entries per work request.
    pub(crate) max_sge: u32,
    /// The armed limit (0: not armed).
    pub(crate) srq_limit: u32,
}

impl SrqAttr {
    fn from_raw(a: &bindings::ib_srq_attr) -> Self {
        Self {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        }
    }

    fn write_to(&self, a: &mut bindings::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

/// What a `modify_srq` changes: `None` for what its mask leaves alone.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SrqModify {
    /// A new size (`IB_SRQ_MAX_WR`).
    pub(crate) max_wr: Option<u32>,
    /// A new limit to arm (`IB_SRQ_LIMIT`).
    pub(crate) srq_limit: Option<u32>,
}

/// The consumer's event callback of one SRQ (`IB_EVENT_SRQ_LIMIT_REACHED`, [`Events`]).
pub(crate) type SrqEvents = Events<bindings::ib_srq>;

impl SrqEvents {
    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED`, if the SRQ still exists.
    pub(crate) fn limit_reached(&self) {
        self.raise_raw(bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED);
    }
}

/// The kind of a shared receive queue.
pub(crate) enum SrqKind {}

impl<T: Driver> Kind<T> for SrqKind {
    type Raw = bindings::ib_srq;
    type Events = Arc<SrqEvents>;
    type Data = T::Srq;
}

/// A shared receive queue of driver `T`.
pub(crate) type Srq<T> = Object<T, SrqKind>;

/// Fills in the SRQ verbs of an ops table.
pub(super) fn set_ops<T: Driver>(ops: &mut bindings::ib_device_ops) {
    const {
        assert!(
            !T::Srq::HAS_CREATE_SRQ || T::Srq::HAS_POST_SRQ_RECV,
            "an SRQ driver must implement post_srq_recv"
        )
    };
    if !T::Srq::HAS_CREATE_SRQ {
        return;
    }
    ops.size_ib_srq = Srq::<T>::block_size();
    ops.create_srq = Some(create_srq::<T>);
    if T::Srq::HAS_MODIFY_SRQ {
        ops.modify_srq = Some(modify_srq::<T>);
    }
    if T::Srq::HAS_QUERY_SRQ {
        ops.query_srq = Some(query_srq::<T>);
    }
    ops.destroy_srq = Some(destroy_srq::<T>);
    ops.post_srq_recv = Some(post_srq_recv::<T>);
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback
/// documents: `srq` a zeroed block of `size_ib_srq` bytes for our device, `udata` null
/// for a kernel consumer, else the driver udata of the call.
unsafe extern "C" fn create_srq<T: Driver>(
    srq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `init` is valid for the call.
        let a = unsafe { &mut *init };
        if a.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
            return Err(super::device::eopnotsupp());
        }
        // SAFETY: ib_core set the device before calling the driver.
        let dev = unsafe { device_of::<T, _>(srq) };
        // SAFETY: Per the function's contract.
        let user = unsafe { UserCall::<T>::from_udata(udata) };
        let wanted = SrqAttr::from_raw(&a.attr);
        // SAFETY: ib_core set the SRQ's PD, which outlives it, before calling the driver.
        let pd = PdId::of(unsafe { (*srq).pd });
        // SAFETY: Nothing of the block is initialised yet; ib_core set the handler.
        let attr = unsafe {
            Srq::<T>::create_with_events(srq, |events| {
                T::Srq::create_srq(dev, pd, &wanted, user.as_ref(), events)
            })?
        };
        attr.write_to(&mut a.attr);
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn modify_srq<T: Driver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: u32,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core calls this on a live SRQ of our device; `attr` is valid for the
        // call.
        let (srq, a) = unsafe { (Srq::<T>::from_raw(srq), &*attr) };
        let m = SrqModify {
            max_wr: (mask & bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0).then_some(a.max_wr),
            srq_limit: (mask & bindings::ib_srq_attr_mask_IB_SRQ_LIMIT != 0).then_some(a.srq_limit),
        };
        // SAFETY: `udata` is null or the driver udata of a uverbs call on our device.
        let user = unsafe { UserCall::from_udata(udata) };
        T::Srq::modify_srq(srq, &m, user.as_ref())?;
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn query_srq<T: Driver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> c_int {
    // SAFETY: ib_core calls this on a live SRQ of our device; `attr` is valid for writes
    // for the call.
    let (srq, attr) = unsafe { (Srq::<T>::from_raw(srq), &mut *attr) };
    T::Srq::query_srq(srq).write_to(attr);
    0
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn destroy_srq<T: Driver>(
    srq: *mut bindings::ib_srq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: ib_core calls this once, on a live SRQ of our device that no QP uses.
    unsafe { Srq::<T>::drop_in_place(srq) };
    0
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn post_srq_recv<T: Driver>(
    srq: *mut bindings::ib_srq,
    wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: ib_core calls this on a live SRQ of our device.
    let srq = unsafe { Srq::<T>::from_raw(srq) };
    // SAFETY: `wr` heads a chain of valid requests and `bad` is valid for writes, for the
    // call.
    unsafe { RecvWr::post_chain(wr, bad, |w| T::Srq::post_srq_recv(srq, w)) }
}
