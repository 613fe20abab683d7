// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates a CQ (`size_ib_cq` bytes, zeroed), fills in the device, the consumer's
//! completion and event handlers and their context, and calls `create_cq` (a kernel
//! consumer) or `create_user_cq` (a process, through uverbs). After a successful
//! `destroy_cq` it frees the block. [`Cq<T>`] is the block: the C struct first, the
//! consumer's handlers ([`CqEvents`]), then the driver's data, which the driver builds as a
//! value (anything that must be pinned or outlive the CQ lives behind an
//! [`Arc`](kernel::sync::Arc) inside it).
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
    object::{device_of, Events, Kind, Object},
    ucontext::UserCall,
    wr::WcOut,
};
use kernel::{error::from_result, ffi::c_int, prelude::*, sync::Arc};

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

/// What `req_notify_cq` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notify {
    /// The next completion of any kind.
    NextComp,
    /// The next solicited completion (or error completion).
    Solicited,
}

/// The verbs of a completion queue: what a driver's CQ data (`T::Cq`) implements.
///
/// # Examples
///
/// The CQ of a device with no data path, for kernel consumers only: it holds nothing
/// and never completes anything.
///
/// ```ignore
/// struct MyCq;
///
/// #[vtable]
/// impl CqOps<MyDriver> for MyCq {
///     fn create_cq(
///         _dev: &Device<MyDriver>,
///         attr: &CqInit,
///         user: Option<&UserCall<'_, MyDriver>>,
///         _events: &Arc<CqEvents>,
///     ) -> Result<(Self, u32)> {
///         if user.is_some() || attr.flags != 0 {
///             return Err(eopnotsupp());
///         }
///         Ok((MyCq, attr.cqe))
///     }
///
///     fn poll_cq(_cq: &Cq<MyDriver>, _out: &mut WcOut<'_>) {}
///
///     fn req_notify_cq(_cq: &Cq<MyDriver>, _how: Notify, _report_missed: bool) -> bool {
///         false
///     }
///
///     // No resize_cq: ib_core answers EOPNOTSUPP for it.
/// }
/// ```
#[vtable]
pub(crate) trait CqOps<T: Driver>: Sized + Send + Sync {
    /// A completion queue is created, for a process (`user`) or a kernel consumer.
    ///
    /// Returns the CQ's data and the number of completions it holds (at least
    /// `attr.cqe`), which the consumer is told. `events` reaches the consumer's handlers
    /// until the CQ is destroyed.
    fn create_cq(
        dev: &Device<T>,
        attr: &CqInit,
        user: Option<&UserCall<'_, T>>,
        events: &Arc<CqEvents>,
    ) -> Result<(Self, u32)>;

    /// A process (`user`) or a kernel consumer asks for room for `cqe` completions;
    /// returns the new number held.
    fn resize_cq(_cq: &Cq<T>, _cqe: u32, _user: Option<&UserCall<'_, T>>) -> Result<u32> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A kernel consumer takes completions, as many as `out` has room for. May be called
    /// in atomic context.
    fn poll_cq(cq: &Cq<T>, out: &mut WcOut<'_>);

    /// The consumer asks for a completion event on the next completion of kind `how`.
    ///
    /// With `report_missed`, returns whether completions are already waiting (which
    /// the consumer would otherwise never hear about). May be called in atomic context.
    fn req_notify_cq(cq: &Cq<T>, how: Notify, report_missed: bool) -> bool;
}

/// The consumer's callbacks of one CQ: its completion handler and its event handler
/// ([`Events`]).
pub(crate) type CqEvents = Events<bindings::ib_cq>;

impl CqEvents {
    /// Tells the consumer that the CQ has new completions (its completion handler).
    pub(crate) fn completion(&self) {
        self.with(|cq| {
            // SAFETY: The CQ is live for the call; ib_core set the handler and its
            // context before the CQ was created.
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

/// The kind of a completion queue.
pub(crate) enum CqKind {}

impl<T: Driver> Kind<T> for CqKind {
    type Raw = bindings::ib_cq;
    type Events = Arc<CqEvents>;
    type Data = T::Cq;
}

/// A completion queue of driver `T`.
pub(crate) type Cq<T> = Object<T, CqKind>;

impl<T: Driver> Cq<T> {
    /// Records the number of completions the CQ holds after a resize.
    fn set_cqe(&self, cqe: u32) {
        // SAFETY: `cqe` is a plain field, written only from create and resize, which
        // uverbs serialises against each other.
        unsafe { (*self.as_raw()).cqe = cqe as i32 };
    }
}

/// Fills in the CQ verbs of an ops table.
pub(super) fn set_ops<T: Driver>(ops: &mut bindings::ib_device_ops) {
    ops.size_ib_cq = Cq::<T>::block_size();
    ops.create_cq = Some(create_cq::<T>);
    ops.create_user_cq = Some(create_cq::<T>);
    ops.destroy_cq = Some(destroy_cq::<T>);
    if T::Cq::HAS_RESIZE_CQ {
        ops.resize_user_cq = Some(resize_user_cq::<T>);
    }
    ops.req_notify_cq = Some(req_notify_cq::<T>);
    ops.poll_cq = Some(poll_cq::<T>);
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback
/// documents: `cq` a zeroed block of `size_ib_cq` bytes for our device (device and
/// handlers set), `user` null for a kernel consumer, else the call's bundle.
unsafe extern "C" fn create_cq<T: Driver>(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    user: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core set `device` before calling the driver.
        let dev = unsafe { device_of::<T, _>(cq) };
        // SAFETY: `attr` is valid for the call.
        let a = unsafe { &*attr };
        let init = CqInit {
            cqe: a.cqe,
            comp_vector: a.comp_vector,
            flags: a.flags,
        };
        let call = if user.is_null() {
            None
        } else {
            // SAFETY: `user` is the bundle of a uverbs call on our device.
            Some(unsafe { UserCall::<T>::from_bundle(user)? })
        };
        // SAFETY: Nothing of the block is initialised yet; ib_core set the handlers.
        let cqe = unsafe {
            Cq::<T>::create_with_events(cq, |events| {
                T::Cq::create_cq(dev, &init, call.as_ref(), events)
            })?
        };
        // SAFETY: `cqe` is a plain field that ib_core reads after we return.
        unsafe { (*cq).cqe = cqe as i32 };
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn destroy_cq<T: Driver>(
    cq: *mut bindings::ib_cq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: ib_core calls this once, on a CQ whose create succeeded and that no QP or
    // SRQ uses any more (it checked `usecnt`).
    unsafe { Cq::<T>::drop_in_place(cq) };
    0
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn resize_user_cq<T: Driver>(
    cq: *mut bindings::ib_cq,
    cqe: u32,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core calls this on a live CQ of our device.
        let cq = unsafe { Cq::<T>::from_raw(cq) };
        // SAFETY: `udata` is null or valid for the call, and then part of a bundle whose
        // context is one of our device's.
        let user = unsafe { UserCall::from_udata(udata) };
        let n = T::Cq::resize_cq(cq, cqe, user.as_ref())?;
        cq.set_cqe(n);
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn req_notify_cq<T: Driver>(cq: *mut bindings::ib_cq, flags: u32) -> c_int {
    // SAFETY: ib_core calls this on a live CQ of our device.
    let cq = unsafe { Cq::<T>::from_raw(cq) };
    let how = if flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
        == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED
    {
        Notify::Solicited
    } else {
        Notify::NextComp
    };
    let report = flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0;
    c_int::from(T::Cq::req_notify_cq(cq, how, report))
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn poll_cq<T: Driver>(
    cq: *mut bindings::ib_cq,
    n: c_int,
    wc: *mut bindings::ib_wc,
) -> c_int {
    // SAFETY: ib_core calls this on a live CQ of our device.
    let cq = unsafe { Cq::<T>::from_raw(cq) };
    // SAFETY: The consumer's array has room for `n` completions.
    let mut out = unsafe { WcOut::new(wc, usize::try_from(n).unwrap_or(0)) };
    T::Cq::poll_cq(cq, &mut out);
    // At most `n` were written, so this fits.
    out.filled() as c_int
}
