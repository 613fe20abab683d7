// SPDX-License-Identifier: GPL-2.0

//! RDMA link types: `rdma link add NAME type TYPE netdev DEV`.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)
//!
//! ib_core's netlink code looks the type up in its list of `struct rdma_link_ops`, takes a
//! reference on the named netdev and calls `newlink` in process context. The callback has
//! no context pointer, so the handler is a type ([`LinkDriver`]); this layer serialises
//! `newlink` calls of all link types it registers, so that checking for an existing device
//! and creating one are atomic with respect to each other.

use super::{bindings, netdev::NetDevice};
use core::marker::PhantomData;
use kernel::{
    error::from_result,
    ffi::c_char,
    prelude::*,
    str::CStr,
    sync::atomic::{Acquire, Atomic, Relaxed, Release},
    types::Opaque,
};

kernel::sync::global_lock! {
    // SAFETY: Initialised in `Registration::new` before its link type is registered, so
    // before a `newlink` can run; see `REGISTERED`.
    unsafe(uninit) static NEWLINK_LOCK: Mutex<()> = ();
}

/// Whether a [`Registration`] exists: there is at most one at a time.
static REGISTERED: Atomic<bool> = Atomic::new(false);

/// Whether `NEWLINK_LOCK` was initialised (once per module load, by the first
/// registration).
static LOCK_READY: Atomic<bool> = Atomic::new(false);

/// Handler of `rdma link add` for one link type.
pub(crate) trait LinkDriver: 'static {
    /// The link type users name (`rdma link add ... type TYPE`).
    const TYPE: &'static CStr;

    /// Creates a device called `name` on top of `ndev`. Called with all `newlink` calls of
    /// this module serialised.
    fn newlink(name: &CStr, ndev: &NetDevice) -> Result;
}

/// A registered link type.
///
/// # Invariants
///
/// `ops` is on ib_core's list of link types for as long as the object lives.
#[pin_data(PinnedDrop)]
pub(crate) struct Registration<T: LinkDriver> {
    #[pin]
    ops: Opaque<bindings::rdma_link_ops>,
    _p: PhantomData<T>,
}

// SAFETY: ib_core only reads `ops` under its own lock.
unsafe impl<T: LinkDriver> Send for Registration<T> {}
// SAFETY: There are no methods taking `&self`.
unsafe impl<T: LinkDriver> Sync for Registration<T> {}

impl<T: LinkDriver> Registration<T> {
    /// Registers link type `T::TYPE`. One registration may exist per module at a time:
    /// while one does, making another fails with `EBUSY`.
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        let register = try_pin_init!(Self {
            ops <- Opaque::ffi_init(|slot: *mut bindings::rdma_link_ops| {
                // SAFETY: `slot` is valid and pinned for the object's life; ib_core keeps
                // it on its list until `PinnedDrop` removes it.
                unsafe {
                    slot.write(bindings::rdma_link_ops {
                        type_: T::TYPE.as_char_ptr(),
                        newlink: Some(Self::newlink),
                        ..pin_init::zeroed()
                    });
                    bindings::rdma_link_register(slot);
                }
            }),
            _p: PhantomData,
        });
        let once = |slot: *mut Self| {
            if REGISTERED.cmpxchg(false, true, Acquire).is_err() {
                return Err(EBUSY);
            }
            if LOCK_READY.cmpxchg(false, true, Relaxed).is_ok() {
                // SAFETY: The first registration of this module load: no link type of
                // this layer was ever registered, so no `newlink` has used the lock,
                // and this runs once.
                unsafe { NEWLINK_LOCK.init() };
            }
            // SAFETY: Per this closure's caller, `slot` is valid for initialising a
            // pinned `Self`.
            let made = unsafe { register.__pinned_init(slot) };
            if made.is_err() {
                REGISTERED.store(false, Release);
            }
            made
        };
        // SAFETY: The closure initialises `slot` fully on success and leaves nothing to
        // drop on failure (the inner initialiser's contract).
        unsafe { pin_init::pin_init_from_closure(once) }
    }

    /// # Safety
    ///
    /// Only for ib_core, through `struct rdma_link_ops`, with the arguments that callback documents.
    unsafe extern "C" fn newlink(name: *const c_char, ndev: *mut bindings::net_device) -> i32 {
        from_result(|| {
            // SAFETY: ib_core passes a NUL-terminated name and a netdev it holds a
            // reference on for the length of the call.
            let (name, ndev) = unsafe { (CStr::from_char_ptr(name), NetDevice::from_raw(ndev)) };
            let _guard = NEWLINK_LOCK.lock();
            T::newlink(name, ndev)?;
            Ok(0)
        })
    }
}

#[pinned_drop]
impl<T: LinkDriver> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `ops` is registered. ib_core takes its list lock
        // for writing, which waits for a running `newlink`.
        unsafe { bindings::rdma_link_unregister(self.ops.get()) };
        // No `newlink` of ours runs any more: another registration may be made.
        REGISTERED.store(false, Release);
    }
}
