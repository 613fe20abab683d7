// SPDX-License-Identifier: GPL-2.0

//! The objects a driver keeps behind ib_core's structs, and their consumers' callbacks.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates each verbs object (a context, PD, CQ, QP, SRQ, AH or MW) as one
//! zeroed block of the size the driver's ops table gives (`size_ib_pd`, ...), sets its
//! device and the objects it refers to, and calls the driver's create. [`Object`] is that
//! block for every kind of object: the C struct first, then the consumer's callbacks
//! ([`Events`], for the kinds that have them) and the driver's data. A [`Kind`] names the
//! C struct and what follows it; `Cq<T>`, `Qp<T>` and the others are `Object`s of one
//! kind each, and their files hold what is particular to them: create, the callbacks in
//! the ops table (the trampolines) and the accessors.
//!
//! ```text
//!   ib_core allocates ──► create: Object::init (data, then events) ──► live
//!        │                     │ fails: nothing initialised, ib_core frees the block
//!        ▼
//!   live ──► destroy: Object::drop_in_place (events revoked, waiting for a call in
//!            progress; data dropped; events dropped) ──► ib_core frees the block
//! ```
//!
//! MRs are the exception: the driver allocates them (`KBox`) and frees them itself once
//! their deregistration succeeds ([`Object::new_boxed`], [`Object::free_boxed`]).

use super::{
    bindings,
    device::{Device, Driver},
};
use core::{ffi::c_void, marker::PhantomData, ptr};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    types::Opaque,
};

/// ib_core's C struct of a verbs object.
///
/// # Safety
///
/// The struct has a `device` field that ib_core sets before the driver's create.
pub(crate) unsafe trait RawObject {
    /// The device of the object `this`.
    ///
    /// # Safety
    ///
    /// `this` must point to a live object of this struct.
    unsafe fn device(this: *mut Self) -> *mut bindings::ib_device;
}

macro_rules! raw_object {
    ($($c:ident),*) => {$(
        // SAFETY: The struct's `device` field is set by ib_core before the driver's create.
        unsafe impl RawObject for bindings::$c {
            unsafe fn device(this: *mut Self) -> *mut bindings::ib_device {
                // SAFETY: Live, per the caller.
                unsafe { (*this).device }
            }
        }
    )*};
}
raw_object! { ib_ucontext, ib_pd, ib_cq, ib_qp, ib_srq, ib_ah, ib_mr, ib_mw }

/// One kind of verbs object of driver `T`: its C struct and what follows it.
pub(crate) trait Kind<T: Driver> {
    /// ib_core's struct (`ib_pd`, `ib_cq`, ...).
    type Raw: RawObject;
    /// The consumer's callbacks: an [`Arc<Events>`] or `()`.
    type Events: Callbacks;
    /// The driver's part.
    type Data;
}

/// The consumer's callbacks of an object, stopped before the object goes.
pub(crate) trait Callbacks {
    /// Stops all further calls, waiting for one in progress.
    fn revoke(&self);
}

impl Callbacks for () {
    fn revoke(&self) {}
}

/// A verbs object of driver `T`: ib_core's struct, then the callbacks and the driver's data.
///
/// # Invariants
///
/// `events` and `data` are initialised between a successful [`Object::init`] (or
/// [`Object::new_boxed`]) and [`Object::drop_in_place`] (or [`Object::free_boxed`]);
/// the block does not move meanwhile, and the C struct's `device` is a `Device<T>`.
#[repr(C)]
pub(crate) struct Object<T: Driver, K: Kind<T>> {
    ib: Opaque<K::Raw>,
    events: K::Events,
    data: K::Data,
    _kind: PhantomData<(T, K)>,
}

impl<T: Driver, K: Kind<T>> core::ops::Deref for Object<T, K> {
    type Target = K::Data;

    fn deref(&self) -> &K::Data {
        &self.data
    }
}

impl<T: Driver, K: Kind<T>> Object<T, K> {
    /// Initialises a new object in ib_core's block: the driver's data, then the callbacks.
    /// On failure nothing is initialised (and `events` is dropped).
    ///
    /// # Safety
    ///
    /// `raw` must be a block of `size_of::<Self>()` bytes that ib_core made for an object
    /// of this kind of a `Device<T>`, not initialised yet.
    pub(super) unsafe fn init(
        raw: *mut K::Raw,
        events: K::Events,
        data: impl PinInit<K::Data, Error>,
    ) -> Result {
        let this = raw.cast::<Self>();
        // SAFETY: `this` has room for `Self` and does not move until ib_core frees it;
        // neither field is initialised yet.
        unsafe {
            data.__pinned_init(ptr::addr_of_mut!((*this).data))?;
            ptr::addr_of_mut!((*this).events).write(events);
        }
        Ok(())
    }

    /// Drops the callbacks and the driver's data of an object that is going away; no
    /// callback runs once this returns.
    ///
    /// # Safety
    ///
    /// `raw` must have been initialised by [`Self::init`] and not dropped yet.
    pub(super) unsafe fn drop_in_place(raw: *mut K::Raw) {
        let this = raw.cast::<Self>();
        // SAFETY: Initialised and not dropped, per the caller.
        unsafe {
            (*this).events.revoke();
            ptr::drop_in_place(ptr::addr_of_mut!((*this).data));
            ptr::drop_in_place(ptr::addr_of_mut!((*this).events));
        }
    }

    /// Borrows a live object.
    ///
    /// # Safety
    ///
    /// `raw` must have been initialised by [`Self::init`] (or [`Self::new_boxed`]) and
    /// stay alive for `'a`.
    pub(super) unsafe fn from_raw<'a>(raw: *mut K::Raw) -> &'a Self {
        // SAFETY: Per the caller; `ib` is the first field of a `repr(C)` struct.
        unsafe { &*raw.cast::<Self>() }
    }

    /// The C struct, for ib_core calls and for the fields ib_core reads.
    pub(super) fn as_raw(&self) -> *mut K::Raw {
        self.ib.get()
    }

    /// The device the object belongs to.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant the object is live and its device a `Device<T>`,
        // which outlives it.
        unsafe { Device::from_raw(K::Raw::device(self.as_raw())) }
    }

    /// Allocates an object the driver owns (an MR), with a zeroed C struct for the
    /// caller and ib_core to fill in.
    pub(super) fn new_boxed(events: K::Events, data: K::Data) -> Result<*mut K::Raw> {
        let obj = KBox::new(
            Self {
                ib: Opaque::zeroed(),
                events,
                data,
                _kind: PhantomData,
            },
            GFP_KERNEL,
        )?;
        Ok(KBox::into_raw(obj).cast())
    }

    /// Frees an object made by [`Self::new_boxed`].
    ///
    /// # Safety
    ///
    /// `raw` must come from [`Self::new_boxed`] and not be used afterwards.
    pub(super) unsafe fn free_boxed(raw: *mut K::Raw) {
        // SAFETY: Per the caller; `ib` is the first field of a `repr(C)` struct.
        let obj = unsafe { KBox::from_raw(raw.cast::<Self>()) };
        obj.events.revoke();
        drop(obj);
    }
}

/// A consumer's event handler (`void (*)(struct ib_event *, void *)`).
type EventHandler = Option<unsafe extern "C" fn(*mut bindings::ib_event, *mut c_void)>;

/// ib_core's C struct of an object whose consumer takes events (`ib_cq`, `ib_qp`,
/// `ib_srq`).
///
/// # Safety
///
/// `handler` and `set_element` read and write the fields of that name of a live struct.
pub(crate) unsafe trait EventSource: RawObject {
    /// The consumer's event handler and its context.
    ///
    /// # Safety
    ///
    /// `this` must point to a live object.
    unsafe fn handler(this: *mut Self) -> (EventHandler, *mut c_void);

    /// Names `this` as the object of the event.
    fn set_element(ev: &mut bindings::ib_event, this: *mut Self);
}

macro_rules! event_source {
    ($($c:ident: $element:ident, $context:ident;)*) => {$(
        // SAFETY: The fields named are those of the struct.
        unsafe impl EventSource for bindings::$c {
            unsafe fn handler(this: *mut Self) -> (EventHandler, *mut c_void) {
                // SAFETY: Live, per the caller; ib_core set both before the create.
                unsafe { ((*this).event_handler, (*this).$context) }
            }

            fn set_element(ev: &mut bindings::ib_event, this: *mut Self) {
                ev.element.$element = this;
            }
        }
    )*};
}
event_source! {
    ib_cq: cq, cq_context;
    ib_qp: qp, qp_context;
    ib_srq: srq, srq_context;
}

/// The consumer's callbacks of one object (`C`: `ib_cq`, `ib_qp` or `ib_srq`): they work
/// until the object is destroyed and do nothing afterwards, and the destroy waits for a
/// call in progress.
///
/// The driver keeps this (in an [`Arc`]) wherever completions and events are produced.
/// Calls sleep: make them from a workqueue, never from the call chain of a verb (the
/// consumer may call verbs from its handler).
#[pin_data]
pub(crate) struct Events<C: EventSource> {
    /// The object while it exists.
    #[pin]
    obj: Mutex<Option<Live<C>>>,
}

/// An object that ib_core has not freed yet.
///
/// # Invariants
///
/// Points to a live object; only held inside [`Events`] until the object's destroy.
struct Live<C>(*mut C);

// SAFETY: The pointer is only used under the `Events` lock, from any thread.
unsafe impl<C> Send for Live<C> {}

impl<C: EventSource> Events<C> {
    /// The callbacks of `obj`, which is being created.
    pub(super) fn new(obj: *mut C) -> Result<Arc<Self>> {
        // INVARIANT: `obj` is being created and lives until its destroy revokes this.
        Arc::pin_init(
            pin_init!(Self {
                obj <- new_mutex!(Some(Live(obj))),
            }),
            GFP_KERNEL,
        )
    }

    /// Calls `f` with the object, if it still exists, holding off its destroy meanwhile.
    fn with(&self, f: impl FnOnce(*mut C)) {
        let guard = self.obj.lock();
        if let Some(Live(obj)) = *guard {
            f(obj);
        }
    }

    /// Calls the consumer's event handler with an event of kind `kind` on the object, if
    /// it still exists.
    fn raise_raw(&self, kind: bindings::ib_event_type) {
        self.with(|obj| {
            // SAFETY: By the `Live` invariant the object is live while the lock is held.
            let (handler, context) = unsafe { C::handler(obj) };
            let Some(handler) = handler else { return };
            let mut ev: bindings::ib_event = pin_init::zeroed();
            // SAFETY: As above.
            ev.device = unsafe { C::device(obj) };
            ev.event = kind;
            C::set_element(&mut ev, obj);
            // SAFETY: ib_core set the handler and its context before the create; the
            // event only lives for the call.
            unsafe { handler(&mut ev, context) };
        });
    }
}

impl<C: EventSource> Callbacks for Arc<Events<C>> {
    fn revoke(&self) {
        *self.obj.lock() = None;
    }
}

impl Events<bindings::ib_cq> {
    /// Tells the consumer that the CQ has new completions (its completion handler).
    pub(crate) fn completion(&self) {
        self.with(|cq| {
            // SAFETY: By the `Live` invariant the CQ is live while the lock is held;
            // ib_core set the handler and its context before the CQ was created.
            unsafe {
                if let Some(handler) = (*cq).comp_handler {
                    handler(cq, (*cq).cq_context);
                }
            }
        });
    }

    /// Tells the consumer that a completion was lost for want of room (`IB_EVENT_CQ_ERR`).
    pub(crate) fn overflow(&self) {
        self.raise_raw(bindings::ib_event_type_IB_EVENT_CQ_ERR);
    }
}

impl Events<bindings::ib_qp> {
    /// Raises `event` on the QP, if it still exists.
    pub(crate) fn raise(&self, event: super::qp::QpEvent) {
        self.raise_raw(event.to_raw());
    }
}

impl Events<bindings::ib_srq> {
    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED`, if the SRQ still exists.
    pub(crate) fn limit_reached(&self) {
        self.raise_raw(bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED);
    }
}
