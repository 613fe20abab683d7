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
//!   ib_core allocates ──► create (Object::create_with_events for CQs, QPs, SRQs: the
//!        │                 record, the driver's create, Object::init; else Object::init)
//!        │                 │ fails: events revoked (a clone the driver kept calls
//!        │                 │ nothing), nothing initialised, ib_core frees the block
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
use core::{
    ffi::c_void,
    marker::PhantomData,
    mem::{align_of, size_of, MaybeUninit},
    ptr,
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
    types::Opaque,
};

/// ib_core's C struct of a verbs object.
///
/// # Safety
///
/// The struct has a `device` field, which ib_core sets before it passes the object to
/// any callback but the create of an MR (it sets an MR's after `reg_user_mr`,
/// `get_dma_mr` or `alloc_mr` returns).
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
        // SAFETY: The struct has a `device` field, set by ib_core as the trait says.
        unsafe impl RawObject for bindings::$c {
            unsafe fn device(this: *mut Self) -> *mut bindings::ib_device {
                // SAFETY: Live, per the caller.
                unsafe { (*this).device }
            }
        }
    )*};
}
raw_object! { ib_ucontext, ib_pd, ib_cq, ib_qp, ib_srq, ib_ah, ib_mr, ib_mw }

/// The device of an object ib_core passes to a callback of driver `T`.
///
/// # Safety
///
/// `raw` must be live, of a `Device<T>`, with its device set (every object ib_core
/// hands to a callback, an MR's create aside), for `'a`.
pub(super) unsafe fn device_of<'a, T: Driver, C: RawObject>(raw: *mut C) -> &'a Device<T> {
    // SAFETY: Per the caller; the device outlives its objects.
    unsafe { Device::from_raw(C::device(raw)) }
}

/// One kind of verbs object of driver `T`: its C struct and what follows it.
pub(crate) trait Kind<T: Driver> {
    /// ib_core's struct (`ib_pd`, `ib_cq`, ...).
    type Raw: RawObject;
    /// The consumer's callbacks: an [`Arc<Events>`] or `()`.
    type Events: Callbacks;
    /// The driver's part.
    type Data;
}

/// The data type of a kind of object a driver does not have: QPs, SRQs, AHs, MRs or MWs
/// (`type Qp = Absent;` in its [`Driver`] impl).
///
/// It implements the kind's verbs trait with none of its verbs, so the kind is left
/// out of the ops table and ib_core answers `EOPNOTSUPP` when one is asked for. No value
/// of it can exist.
// rxe_rs has every kind of object; samples/rdma_minimal uses it.
#[allow(dead_code)]
pub(crate) enum Absent {}

/// A count of live objects of one kind, bounded by a device limit.
///
/// ib_core does not hold a device to the limits it reports (`max_pd`, `max_cq`, ...);
/// a driver keeps one `Quota` per kind and a [`Charge`] in each object.
pub(crate) struct Quota {
    live: Atomic<u32>,
    max: u32,
}

impl Quota {
    /// A quota of `max` objects.
    pub(crate) fn new(max: u32) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Self {
                live: Atomic::new(0),
                max,
            },
            GFP_KERNEL,
        )?)
    }

    /// Reserves room for one more object, or fails with `ENOMEM` at the limit.
    pub(crate) fn charge(this: &Arc<Self>) -> Result<Charge> {
        let mut cur = this.live.load(Relaxed);
        loop {
            if cur >= this.max {
                return Err(ENOMEM);
            }
            match this.live.cmpxchg(cur, cur + 1, Relaxed) {
                Ok(_) => break,
                Err(seen) => cur = seen,
            }
        }
        Ok(Charge(this.clone()))
    }
}

/// One object's share of a [`Quota`], given back when dropped.
pub(crate) struct Charge(Arc<Quota>);

impl Drop for Charge {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Relaxed);
    }
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
/// the block does not move meanwhile. While a reference to the object exists, ib_core
/// has set the C struct's `device`, to a `Device<T>` (references are only made by
/// [`Object::from_raw`], for objects ib_core hands to a callback).
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
    /// The `size_ib_*` of the ops table: the size of the block ib_core allocates.
    ///
    /// ib_core allocates it with `kzalloc()`, which aligns to `ARCH_KMALLOC_MINALIGN`
    /// only; a driver whose data needs more fails to build.
    pub(super) const fn block_size() -> usize {
        const {
            assert!(
                align_of::<Self>() <= kernel::bindings::ARCH_KMALLOC_MINALIGN,
                "the object's data needs more alignment than ib_core's allocation gives"
            )
        };
        size_of::<Self>()
    }

    /// Initialises a new object in ib_core's block: the driver's data, then the callbacks.
    /// On failure nothing is initialised, and `events` is revoked and dropped.
    ///
    /// # Safety
    ///
    /// `raw` must be a block of [`Self::block_size()`] bytes that ib_core made for an
    /// object of this kind of a `Device<T>`, not initialised yet.
    pub(super) unsafe fn init(
        raw: *mut K::Raw,
        events: K::Events,
        data: impl PinInit<K::Data, Error>,
    ) -> Result {
        let this = raw.cast::<Self>();
        // SAFETY: `this` has room for `Self`, aligned (`block_size`), and does not move
        // until ib_core frees it; neither field is initialised yet.
        if let Err(e) = unsafe { data.__pinned_init(ptr::addr_of_mut!((*this).data)) } {
            events.revoke();
            return Err(e);
        }
        // INVARIANT: Both fields are initialised from here on; ib_core set `device`.
        // SAFETY: As above.
        unsafe { ptr::addr_of_mut!((*this).events).write(events) };
        Ok(())
    }

    /// Creates a new object whose consumer takes events: makes the record of its
    /// callbacks, has the driver's `create` build the data with it (returning the data
    /// and what the caller reports to ib_core), and initialises the block. If anything
    /// fails the record is revoked, so that a clone the driver kept calls nothing once
    /// ib_core frees the block.
    ///
    /// # Safety
    ///
    /// As [`Self::init`]; ib_core has set the object's handlers.
    pub(super) unsafe fn create_with_events<C: EventSource, R>(
        raw: *mut C,
        create: impl FnOnce(&Arc<Events<C>>) -> Result<(K::Data, R)>,
    ) -> Result<R>
    where
        K: Kind<T, Raw = C, Events = Arc<Events<C>>>,
    {
        // SAFETY: ib_core is creating `raw`, with its handlers set; it lives until its
        // destroy revokes the record, or the revocation below (or in `init`) on failure.
        let events = unsafe { Events::new(raw)? };
        let (data, out) = create(&events).inspect_err(|_| events.revoke())?;
        // SAFETY: Per the caller.
        unsafe { Self::init(raw, events, Ok(data))? };
        Ok(out)
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
        // SAFETY: By the type invariant the object is live and its device, set, a
        // `Device<T>`.
        unsafe { device_of(self.as_raw()) }
    }

    /// Allocates an object the driver owns (an MR), with a zeroed C struct for the
    /// caller and ib_core to fill in.
    pub(super) fn new_boxed(events: K::Events, data: K::Data) -> Result<*mut K::Raw> {
        // INVARIANT: Both fields are initialised; no reference is made before ib_core
        // hands the object to a callback, with `device` set.
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

    /// Frees an object made by [`Self::new_boxed`], dropping it as
    /// [`Self::drop_in_place`] does.
    ///
    /// # Safety
    ///
    /// `raw` must come from [`Self::new_boxed`] and not be used afterwards.
    pub(super) unsafe fn free_boxed(raw: *mut K::Raw) {
        // SAFETY: Per the caller, initialised and not dropped.
        unsafe { Self::drop_in_place(raw) };
        // SAFETY: The allocation of `new_boxed`, whose contents were just dropped.
        drop(unsafe { KBox::from_raw(raw.cast::<MaybeUninit<Self>>()) });
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

// SAFETY: The pointer is only used under the `Events` lock, from any thread; ib_core's
// objects may be used from any thread.
unsafe impl<C: EventSource> Send for Live<C> {}

impl<C: EventSource> Events<C> {
    /// The callbacks of `obj`, which is being created.
    ///
    /// # Safety
    ///
    /// `obj` must be an object ib_core is creating, with its handlers set, that lives
    /// until the record is revoked: by its destroy ([`Object::drop_in_place`]), or when
    /// its create fails ([`Object::create_with_events`]).
    unsafe fn new(obj: *mut C) -> Result<Arc<Self>> {
        // INVARIANT: `obj` lives until the record is revoked, per the caller.
        Arc::pin_init(
            pin_init!(Self {
                obj <- new_mutex!(Some(Live(obj))),
            }),
            GFP_KERNEL,
        )
    }

    /// Calls `f` with the object, if it still exists, holding off its destroy meanwhile:
    /// the pointer is valid for the call.
    pub(super) fn with(&self, f: impl FnOnce(*mut C)) {
        let guard = self.obj.lock();
        if let Some(Live(obj)) = *guard {
            f(obj);
        }
    }

    /// Calls the consumer's event handler with an event of kind `kind` on the object, if
    /// it still exists.
    pub(super) fn raise_raw(&self, kind: bindings::ib_event_type) {
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
