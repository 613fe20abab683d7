// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates an SRQ (`size_ib_srq` bytes, zeroed), fills in the device, PD, type
//! and the consumer's event handler, and calls `create_srq`; after a successful
//! `destroy_srq` it frees the block. [`Srq<T>`] is the block: the C struct, then the
//! driver's data, built as a value. ib_core refuses to destroy an SRQ that a QP still
//! uses (`usecnt`), so `destroy_srq` cannot fail here.

use super::{
    bindings,
    cq::UserCall,
    device::{Device, Driver},
};
use core::ptr;
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    types::Opaque,
};

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

/// The consumer's event callback of one SRQ (`IB_EVENT_SRQ_LIMIT_REACHED`), callable
/// until the SRQ is destroyed. As [`super::qp::QpEvents`]: the call sleeps and must
/// come from a workqueue.
#[pin_data]
pub(crate) struct SrqEvents {
    #[pin]
    srq: Mutex<Option<RawSrq>>,
}

/// # Invariants
///
/// Points to a live `ib_srq`; only held inside [`SrqEvents`] until the SRQ's destroy.
struct RawSrq(*mut bindings::ib_srq);

// SAFETY: The pointer is only used under the `SrqEvents` lock, from any thread.
unsafe impl Send for RawSrq {}

impl SrqEvents {
    fn new(srq: *mut bindings::ib_srq) -> Result<Arc<Self>> {
        // INVARIANT: `srq` is being created and lives until destroy revokes it.
        Arc::pin_init(
            pin_init!(Self {
                srq <- new_mutex!(Some(RawSrq(srq))),
            }),
            GFP_KERNEL,
        )
    }

    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED`, if the SRQ still exists.
    pub(crate) fn limit_reached(&self) {
        let guard = self.srq.lock();
        if let Some(RawSrq(srq)) = *guard {
            // SAFETY: By the `RawSrq` invariant the SRQ is live while we hold the lock;
            // the event only lives for the call.
            unsafe {
                if let Some(handler) = (*srq).event_handler {
                    let mut ev: bindings::ib_event = pin_init::zeroed();
                    ev.device = (*srq).device;
                    ev.element.srq = srq;
                    ev.event = bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED;
                    handler(&mut ev, (*srq).srq_context);
                }
            }
        }
    }

    fn revoke(&self) {
        *self.srq.lock() = None;
    }
}

/// A shared receive queue of driver `T`.
///
/// # Invariants
///
/// `events` and `data` are initialised between a successful create and `destroy_srq`;
/// `ib.device` is a `Device<T>` for the whole time.
#[repr(C)]
pub(crate) struct Srq<T: Driver> {
    ib: Opaque<bindings::ib_srq>,
    events: Arc<SrqEvents>,
    data: T::Srq,
}

impl<T: Driver> core::ops::Deref for Srq<T> {
    type Target = T::Srq;

    fn deref(&self) -> &T::Srq {
        &self.data
    }
}

impl<T: Driver> Srq<T> {
    /// Creates the driver's part of a new SRQ.
    ///
    /// # Safety
    ///
    /// `srq` must be a zeroed block of `size_of::<Self>()` bytes made by ib_core for a
    /// `Device<T>`; `init` must be valid for the call; `udata` null for a kernel
    /// consumer, else the driver udata of the uverbs call.
    pub(super) unsafe fn create(
        srq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> Result {
        // SAFETY: Per the caller.
        let (ib, a) = unsafe { (&*srq, &mut *init) };
        if a.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
            return Err(super::device::eopnotsupp());
        }
        // SAFETY: ib_core set the device before calling the driver.
        let dev = unsafe { Device::<T>::from_raw(ib.device) };
        // SAFETY: Per the caller.
        let user = unsafe { UserCall::<T>::from_udata(udata) };
        let events = SrqEvents::new(srq)?;
        let (data, attr) = T::create_srq(dev, &SrqAttr::from_raw(&a.attr), user.as_ref(), &events)?;
        attr.write_to(&mut a.attr);
        let this = srq.cast::<Self>();
        // SAFETY: `this` has room for `Self`; `events` and `data` are not initialised yet.
        unsafe {
            ptr::addr_of_mut!((*this).events).write(events);
            ptr::addr_of_mut!((*this).data).write(data);
        }
        Ok(())
    }

    /// Drops the driver's part of an SRQ that is going away.
    ///
    /// # Safety
    ///
    /// `srq` must have been created by [`Self::create`] and not dropped yet.
    pub(super) unsafe fn drop_in_place(srq: *mut bindings::ib_srq) {
        let this = srq.cast::<Self>();
        // SAFETY: Initialised and not dropped, per the caller. The callback record is
        // revoked first (waiting for a call in progress), so no event is raised on the
        // SRQ once its destroy returns; then the data goes.
        unsafe {
            (*this).events.revoke();
            ptr::drop_in_place(ptr::addr_of_mut!((*this).events));
            ptr::drop_in_place(ptr::addr_of_mut!((*this).data));
        }
    }

    /// Borrows a live SRQ.
    ///
    /// # Safety
    ///
    /// `srq` must have been created by [`Self::create`] and stay alive for `'a`.
    pub(super) unsafe fn from_raw<'a>(srq: *mut bindings::ib_srq) -> &'a Self {
        // SAFETY: Per the caller; `ib` is the first field of a `repr(C)` struct.
        unsafe { &*srq.cast::<Self>() }
    }
}

/// Translates a modify's attributes.
///
/// # Safety
///
/// `attr` must be valid for the call.
pub(super) unsafe fn read_modify(attr: *const bindings::ib_srq_attr, mask: u32) -> SrqModify {
    // SAFETY: Per the caller.
    let a = unsafe { &*attr };
    SrqModify {
        max_wr: (mask & bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0).then_some(a.max_wr),
        srq_limit: (mask & bindings::ib_srq_attr_mask_IB_SRQ_LIMIT != 0).then_some(a.srq_limit),
    }
}

/// Writes a query's answer.
///
/// # Safety
///
/// `attr` must be valid for writes for the call.
pub(super) unsafe fn write_attr(a: &SrqAttr, attr: *mut bindings::ib_srq_attr) {
    // SAFETY: Per the caller.
    a.write_to(unsafe { &mut *attr })
}
