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
//!
//! A type name is registered once: ib_core warns and ignores a second registration of a
//! name, by any module. A driver that registers another driver's link type in its place
//! ([`StandIn`]) keeps that driver's module from loading meanwhile.

use super::{bindings, netdev::NetDevice};
use core::marker::PhantomData;
use kernel::{
    error::from_result,
    ffi::{c_char, c_int, c_ulong, c_void},
    prelude::*,
    str::CStr,
    sync::atomic::{Acquire, Atomic, Release},
    types::Opaque,
    ThisModule,
};

kernel::sync::global_lock! {
    // SAFETY: Initialised in `Registration::new` before its link type is registered, so
    // before a `newlink` can run; see `LOCK_STATE`.
    unsafe(uninit) static NEWLINK_LOCK: Mutex<()> = ();
}

/// Whether `NEWLINK_LOCK` is initialised: [`LOCK_UNINIT`], then [`LOCK_INITIALISING`]
/// while the first registration of the module load initialises it, then [`LOCK_READY`].
static LOCK_STATE: Atomic<u32> = Atomic::new(LOCK_UNINIT);
const LOCK_UNINIT: u32 = 0;
const LOCK_INITIALISING: u32 = 1;
const LOCK_READY: u32 = 2;

/// Initialises `NEWLINK_LOCK` once per module load; a caller that comes while another
/// initialises it waits (a few instructions) until it is done.
fn lock_ready() {
    if LOCK_STATE
        .cmpxchg(LOCK_UNINIT, LOCK_INITIALISING, Acquire)
        .is_ok()
    {
        // SAFETY: The first call of this module load: no link type of this layer was
        // registered yet, so no `newlink` has used the lock, and no other call gets here.
        unsafe { NEWLINK_LOCK.init() };
        LOCK_STATE.store(LOCK_READY, Release);
    } else {
        while LOCK_STATE.load(Acquire) != LOCK_READY {
            core::hint::spin_loop();
        }
    }
}

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
    /// Registers link type `T::TYPE`, which must not be registered yet (by any module).
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
            lock_ready();
            // SAFETY: Per this closure's caller, `slot` is valid for initialising a
            // pinned `Self`.
            unsafe { register.__pinned_init(slot) }
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
    }
}

/// While it lives, the module named `name` cannot load: its loading fails with `EBUSY`
/// (a module notifier refuses it as it comes). It cannot be made while that module is
/// loaded.
///
/// # Invariants
///
/// `nb` is on the kernel's chain of module notifiers for as long as the object lives.
#[pin_data(PinnedDrop)]
pub(crate) struct ModuleBlock {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    name: &'static CStr,
}

// SAFETY: The notifier is only read by the kernel's chain; `name` is a static string.
unsafe impl Send for ModuleBlock {}
// SAFETY: There are no methods taking `&self`.
unsafe impl Sync for ModuleBlock {}

impl ModuleBlock {
    /// Keeps module `name` from loading; fails with `EBUSY` if it is loaded (or built
    /// in) already. `this` is the calling module.
    pub(crate) fn new(this: &'static ThisModule, name: &'static CStr) -> impl PinInit<Self, Error> {
        let block = move |slot: *mut Self| {
            // SAFETY: Per this closure's caller, `slot` is valid and pinned; the fields
            // are written before the notifier is registered.
            unsafe {
                (&raw mut (*slot).name).write(name);
                let nb = Opaque::cast_into(&raw const (*slot).nb);
                nb.write(bindings::notifier_block {
                    notifier_call: Some(Self::coming),
                    ..pin_init::zeroed()
                });
                bindings::register_module_notifier(nb);
                // After the registration: a module not found here has its kobject
                // added later, before its notifiers run, which refuse it.
                if bindings::rxe_rs_module_present(this.as_ptr().cast(), name.as_char_ptr()) {
                    bindings::unregister_module_notifier(nb);
                    return Err(EBUSY);
                }
            }
            Ok(())
        };
        // SAFETY: On success the closure initialised every field; on failure it left
        // nothing registered.
        unsafe { pin_init::pin_init_from_closure(block) }
    }

    /// # Safety
    ///
    /// Only for the kernel's module notifier chain, with the arguments it passes.
    unsafe extern "C" fn coming(
        nb: *mut bindings::notifier_block,
        action: c_ulong,
        module: *mut c_void,
    ) -> c_int {
        if u32::try_from(action) != Ok(bindings::module_state_MODULE_STATE_COMING) {
            return bindings::RXE_RS_NOTIFY_DONE;
        }
        // SAFETY: `nb` is the `nb` field of a live `ModuleBlock` (the notifier is
        // unregistered before the block goes).
        let this = unsafe { &*kernel::container_of!(Opaque::cast_from(nb).cast_mut(), Self, nb) };
        // SAFETY: The chain passes the module being loaded, live for the call.
        if !unsafe { bindings::rxe_rs_module_is(module, this.name.as_char_ptr()) } {
            return bindings::RXE_RS_NOTIFY_DONE;
        }
        pr_warn!(
            "{} cannot load: another module stands in for it\n",
            this.name
        );
        // SAFETY: No preconditions.
        unsafe { bindings::rxe_rs_notify_busy() }
    }
}

#[pinned_drop]
impl PinnedDrop for ModuleBlock {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: Registered, by the type invariant; the chain's lock waits for a
        // running call.
        unsafe { bindings::unregister_module_notifier(self.nb.get()) };
    }
}

/// Link type `T::TYPE` registered in the place of another module's, which cannot load
/// meanwhile (and which must not be loaded when this is made).
#[pin_data]
pub(crate) struct StandIn<T: LinkDriver> {
    // Dropped first: the link type goes before the other module may load and register it.
    #[pin]
    link: Registration<T>,
    #[pin]
    block: ModuleBlock,
}

impl<T: LinkDriver> StandIn<T> {
    /// Registers `T::TYPE` in the place of module `other`'s; fails with `EBUSY` if
    /// `other` is loaded. `this` is the calling module.
    pub(crate) fn new(
        this: &'static ThisModule,
        other: &'static CStr,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            block <- ModuleBlock::new(this, other),
            link <- Registration::new(),
        })
    }
}
