// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates a CQ (`size_ib_cq` bytes, zeroed), fills in the device, the consumer's
//! completion and event handlers and their context, and calls `create_cq` (a kernel
//! consumer) or `create_user_cq` (a process, through uverbs). After a successful
//! `destroy_cq` it frees the block. [`Cq<T>`] is the block: the C struct first, then the
//! driver's data, which the driver builds as a value (anything that must be pinned or
//! outlive the CQ lives behind an [`Arc`](kernel::sync::Arc) inside it).
//!
//! ib_core refuses to destroy a CQ that a QP or SRQ still uses (`usecnt`), so
//! `destroy_cq` cannot fail here. Process-context callbacks: create, resize, destroy.
//! `req_notify_cq` and `poll_cq` may be called in atomic context.
//!
//! `poll_cq` serves kernel consumers only (processes poll their ring themselves): the
//! driver hands out its completions through the consumer's array of `struct ib_wc`
//! ([`WcOut`](super::wr::WcOut)).

use super::{
    bindings,
    device::{Device, Driver},
    ucontext::Ucontext,
    udata::Udata,
};
use core::ptr;
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    types::Opaque,
};

/// What a CQ is created with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqInit {
    /// The number of completions it must hold at least.
    pub(crate) cqe: u32,
    /// The completion vector (below the device's `num_comp_vectors`).
    pub(crate) comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*`; a driver that knows none refuses any.
    pub(crate) flags: u32,
}

/// The process side of a create call: its context and its driver-specific buffers.
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
}

/// What `req_notify_cq` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notify {
    /// The next completion of any kind.
    NextComp,
    /// The next solicited completion (or error completion).
    Solicited,
}

/// The consumer's callbacks of one CQ: its completion handler and its event handler.
///
/// The driver keeps this (in an [`Arc`]) wherever completions are produced; the calls
/// work until the CQ is destroyed and do nothing afterwards, and `destroy_cq` waits for a
/// call in progress. Calls sleep: make them from a workqueue, never from the call chain
/// of a verb (the consumer may call verbs from its handler).
#[pin_data]
pub(crate) struct CqEvents {
    /// The CQ while it exists.
    #[pin]
    cq: Mutex<Option<RawCq>>,
}

/// A CQ that ib_core has not freed yet.
///
/// # Invariants
///
/// Points to a live `ib_cq`; only held inside [`CqEvents`] until the CQ's destroy.
struct RawCq(*mut bindings::ib_cq);

// SAFETY: The pointer is only used under the `CqEvents` lock, from any thread.
unsafe impl Send for RawCq {}

impl CqEvents {
    fn new(cq: *mut bindings::ib_cq) -> Result<Arc<Self>> {
        // INVARIANT: `cq` is being created and lives until destroy revokes it.
        Arc::pin_init(
            pin_init!(Self {
                cq <- new_mutex!(Some(RawCq(cq))),
            }),
            GFP_KERNEL,
        )
    }

    /// Tells the consumer that the CQ has new completions (its completion handler).
    pub(crate) fn completion(&self) {
        let guard = self.cq.lock();
        if let Some(RawCq(cq)) = *guard {
            // SAFETY: By the `RawCq` invariant the CQ is live while we hold the lock;
            // ib_core set the handler and its context before the CQ was created.
            unsafe {
                if let Some(handler) = (*cq).comp_handler {
                    handler(cq, (*cq).cq_context);
                }
            }
        }
    }

    /// Tells the consumer that a completion was lost for want of room (`IB_EVENT_CQ_ERR`).
    pub(crate) fn overflow(&self) {
        let guard = self.cq.lock();
        if let Some(RawCq(cq)) = *guard {
            // SAFETY: As in `completion`; the event only lives for the call.
            unsafe {
                if let Some(handler) = (*cq).event_handler {
                    let mut ev: bindings::ib_event = pin_init::zeroed();
                    ev.device = (*cq).device;
                    ev.element.cq = cq;
                    ev.event = bindings::ib_event_type_IB_EVENT_CQ_ERR;
                    handler(&mut ev, (*cq).cq_context);
                }
            }
        }
    }

    /// Stops all further calls, waiting for one in progress.
    fn revoke(&self) {
        *self.cq.lock() = None;
    }
}

/// A completion queue of driver `T`.
///
/// # Invariants
///
/// `events` and `data` are initialised between a successful create and `destroy_cq`;
/// `ib.device` is a `Device<T>` for the whole time.
#[repr(C)]
pub(crate) struct Cq<T: Driver> {
    ib: Opaque<bindings::ib_cq>,
    events: Arc<CqEvents>,
    data: T::Cq,
}

impl<T: Driver> core::ops::Deref for Cq<T> {
    type Target = T::Cq;

    fn deref(&self) -> &T::Cq {
        &self.data
    }
}

impl<T: Driver> Cq<T> {
    /// Creates the driver's part of a new CQ.
    ///
    /// # Safety
    ///
    /// `cq` must be a zeroed block of `size_of::<Self>()` bytes made by ib_core for a
    /// `Device<T>` (device and handlers set); `attr` must be valid for the call; `user`
    /// must be null for a kernel consumer, else the call's bundle.
    pub(super) unsafe fn create(
        cq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        user: *mut bindings::uverbs_attr_bundle,
    ) -> Result {
        // SAFETY: ib_core set `device` before calling the driver.
        let dev = unsafe { Device::<T>::from_raw((*cq).device) };
        // SAFETY: `attr` is valid for the call.
        let a = unsafe { &*attr };
        let init = CqInit {
            cqe: a.cqe,
            comp_vector: a.comp_vector,
            flags: a.flags,
        };
        let events = CqEvents::new(cq)?;
        let (data, cqe) = if user.is_null() {
            T::create_cq(dev, &init, None, &events)?
        } else {
            // SAFETY: A bundle's context and udata are valid for the call, and the
            // context is one of our device's.
            let call = unsafe {
                UserCall {
                    ctx: Ucontext::<T>::from_raw(bindings::rxe_rs_bundle_context(user)),
                    udata: Udata::from_raw(bindings::rxe_rs_bundle_udata(user)).ok_or(EINVAL)?,
                }
            };
            T::create_cq(dev, &init, Some(&call), &events)?
        };
        let this = cq.cast::<Self>();
        // SAFETY: `this` has room for `Self`; `events` and `data` are not initialised
        // yet. `cqe` is a plain field ib_core reads after we return.
        unsafe {
            ptr::addr_of_mut!((*this).events).write(events);
            ptr::addr_of_mut!((*this).data).write(data);
            (*cq).cqe = cqe as i32;
        }
        Ok(())
    }

    /// Drops the driver's part of a CQ that is going away.
    ///
    /// # Safety
    ///
    /// `cq` must have been created by [`Self::create`] and not dropped yet.
    pub(super) unsafe fn drop_in_place(cq: *mut bindings::ib_cq) {
        let this = cq.cast::<Self>();
        // SAFETY: Initialised and not dropped, per the caller. No callback runs once
        // `revoke` returns, so the block can go as soon as we return.
        unsafe {
            (*this).events.revoke();
            ptr::drop_in_place(ptr::addr_of_mut!((*this).data));
            ptr::drop_in_place(ptr::addr_of_mut!((*this).events));
        }
    }

    /// Borrows a live CQ.
    ///
    /// # Safety
    ///
    /// `cq` must have been created by [`Self::create`] and stay alive for `'a`.
    pub(super) unsafe fn from_raw<'a>(cq: *mut bindings::ib_cq) -> &'a Self {
        // SAFETY: Per the caller; `ib` is the first field of a `repr(C)` struct.
        unsafe { &*cq.cast::<Self>() }
    }

    /// Records the number of completions the CQ holds after a resize.
    pub(super) fn set_cqe(&self, cqe: u32) {
        // SAFETY: `cqe` is a plain field, written only from create and resize, which
        // uverbs serialises against each other.
        unsafe { (*self.ib.get()).cqe = cqe as i32 };
    }
}
