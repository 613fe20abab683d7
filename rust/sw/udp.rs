// SPDX-License-Identifier: GPL-2.0

//! RoCE v2's UDP tunnel sockets: one for IPv4 and one for IPv6 on port 4791 in each
//! network namespace where a device lives.
//!
//! C headers: [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h),
//! [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h)
//!
//! [`Tunnels<T>`] registers per-namespace storage with the network stack
//! (`pernet_operations`). A namespace gets its sockets when the first device is added on
//! one of its netdevs ([`Tunnels::open`]) and keeps them until the namespace goes away
//! or the registration is dropped (at module unload); each packet they receive goes to [`Receiver::receive`], in
//! softirq context. Dropping [`Tunnels`] releases every socket and waits for receive
//! calls in progress to end, so no packet reaches the driver afterwards.

use super::skb::Skb;
use crate::ib::{bindings, netdev::NetDevice};
use core::{cell::UnsafeCell, marker::PhantomData, mem::size_of, ptr};
use kernel::{
    error::{from_err_ptr, to_result},
    ffi::c_int,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Relaxed, Release},
    types::Opaque,
};

kernel::sync::global_lock! {
    // SAFETY: Initialised once, by the first `Tunnels::register`, before any use.
    unsafe(uninit) static OPEN_LOCK: Mutex<bool> = false;
}

/// Whether the first registration took on initialising `OPEN_LOCK`.
static LOCK_CLAIMED: Atomic<bool> = Atomic::new(false);
/// Whether `OPEN_LOCK` is initialised.
static LOCK_READY: Atomic<bool> = Atomic::new(false);

/// The UDP port of RoCE v2.
const ROCE_V2_PORT: u16 = bindings::RXE_RS_ROCE_V2_UDP_DPORT;

/// What the tunnels' packets go to.
pub(crate) trait Receiver: 'static {
    /// A packet arrived on port 4791; its data starts at its UDP header. Runs in softirq
    /// context; dropping `skb` frees it.
    fn receive(skb: Skb);
}

/// The sockets of one namespace, in storage the network stack allocates (zeroed) for
/// each namespace and frees after `exit`.
struct PerNet {
    v4: *mut bindings::socket,
    v6: *mut bindings::socket,
}

/// The network stack's id of our per-namespace storage, set when registering.
struct PernetId(UnsafeCell<u32>);

// SAFETY: The id is written by `register_pernet_subsys()` once, before any reader, and
// only read afterwards.
unsafe impl Sync for PernetId {}

static PERNET_ID: PernetId = PernetId(UnsafeCell::new(0));

/// The storage of `net`.
///
/// # Safety
///
/// `net` must be a live namespace and the storage registered (by [`Tunnels::register`]).
unsafe fn per_net(net: *const bindings::net) -> *mut PerNet {
    // SAFETY: Per the caller; the id was written at registration.
    unsafe { bindings::rxe_rs_net_generic(net, *PERNET_ID.0.get()).cast() }
}

/// Releases a namespace's sockets: the namespace is going away, or the module is.
///
/// # Safety
///
/// Only for the network stack, as `pernet_operations.exit`.
unsafe extern "C" fn exit(net: *mut bindings::net) {
    // SAFETY: The namespace is live until its storage is freed after this returns.
    let pn = unsafe { per_net(net) };
    // SAFETY: The storage is ours. `open` does not run on it concurrently: a dying
    // namespace has no netdev left to add a device on, and at module unload `drop` holds
    // `open`'s lock.
    unsafe {
        for sock in [ptr::addr_of_mut!((*pn).v4), ptr::addr_of_mut!((*pn).v6)] {
            if !(*sock).is_null() {
                bindings::rxe_rs_udp_tunnel_close(*sock);
                *sock = ptr::null_mut();
            }
        }
    }
}

/// The per-namespace tunnel sockets of a driver. One may exist at a time.
///
/// `OPEN_LOCK` serialises [`Tunnels::open`] and says whether the registration exists.
#[pin_data(PinnedDrop)]
pub(crate) struct Tunnels<T: Receiver> {
    #[pin]
    ops: Opaque<bindings::pernet_operations>,
    _p: PhantomData<T>,
}

// SAFETY: The registration is used from any thread; the network stack serialises its
// own use of `ops`.
unsafe impl<T: Receiver> Send for Tunnels<T> {}
// SAFETY: As above.
unsafe impl<T: Receiver> Sync for Tunnels<T> {}

impl<T: Receiver> Tunnels<T> {
    /// Registers the per-namespace storage.
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        if LOCK_CLAIMED.cmpxchg(false, true, Relaxed).is_ok() {
            // SAFETY: Only the first registration gets here, and nothing uses the lock
            // before `LOCK_READY` says it may.
            unsafe { OPEN_LOCK.init() };
            // ORDERING: Release pairs with the Acquire loads: whoever sees `true` sees
            // the initialised lock.
            LOCK_READY.store(true, Release);
        }
        try_pin_init!(Self {
            ops <- Opaque::try_ffi_init(|ops: *mut bindings::pernet_operations| {
                // ORDERING: See above.
                if !LOCK_READY.load(Acquire) {
                    return Err(EBUSY);
                }
                let mut registered = OPEN_LOCK.lock();
                if *registered {
                    return Err(EBUSY);
                }
                // SAFETY: `ops` is ours to initialise and stays pinned until `drop`
                // unregisters it; the id it points to is static.
                unsafe {
                    ops.write(pin_init::zeroed());
                    (*ops).id = PERNET_ID.0.get();
                    (*ops).size = size_of::<PerNet>();
                    (*ops).exit = Some(exit);
                    to_result(bindings::register_pernet_subsys(ops))?;
                }
                *registered = true;
                Ok(())
            }),
            _p: PhantomData,
        })
    }

    /// Makes sure the namespace of `ndev` has its sockets (IPv6 only where the kernel
    /// has IPv6). Fails with `ENODEV` when no [`Tunnels`] is registered.
    pub(crate) fn open(ndev: &NetDevice) -> Result {
        // ORDERING: See `register`.
        if !LOCK_READY.load(Acquire) {
            return Err(ENODEV);
        }
        let registered = OPEN_LOCK.lock();
        if !*registered {
            return Err(ENODEV);
        }
        // SAFETY: The netdev is live, so its namespace is.
        let net = unsafe { bindings::rxe_rs_netdev_net(ndev.as_raw()) };
        // SAFETY: The namespace is live and the storage registered.
        let pn = unsafe { per_net(net) };
        for (ipv6, sock) in [
            // SAFETY: `pn` is valid storage of a live namespace.
            (false, unsafe { ptr::addr_of_mut!((*pn).v4) }),
            // SAFETY: As above.
            (true, unsafe { ptr::addr_of_mut!((*pn).v6) }),
        ] {
            // SAFETY: Only `open` (under the lock, while registered) and `exit` (not
            // concurrently, see there) touch the storage.
            if unsafe { !(*sock).is_null() } {
                continue;
            }
            // SAFETY: The namespace is live; `rcv` may be called until the socket is
            // released, which happens before the module's code can go.
            let made = from_err_ptr(unsafe {
                bindings::rxe_rs_udp_tunnel_open(net, ipv6, ROCE_V2_PORT, Some(Self::rcv))
            });
            match made {
                // SAFETY: As above.
                Ok(s) => unsafe { *sock = s },
                // A kernel without IPv6 speaks RoCE v2 over IPv4 only.
                Err(e) if ipv6 && e.to_errno() == -(kernel::bindings::EAFNOSUPPORT as i32) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The sockets' `encap_rcv`: every packet is the driver's (0: consumed).
    ///
    /// # Safety
    ///
    /// Only for the UDP stack, with a buffer whose ownership it hands over.
    unsafe extern "C" fn rcv(_sk: *mut bindings::sock, skb: *mut bindings::sk_buff) -> c_int {
        // SAFETY: Per the caller, the buffer is ours now.
        if let Some(skb) = unsafe { Skb::from_raw(skb) } {
            T::receive(skb);
        }
        0
    }
}

#[pinned_drop]
impl<T: Receiver> PinnedDrop for Tunnels<T> {
    fn drop(self: Pin<&mut Self>) {
        let mut registered = OPEN_LOCK.lock();
        *registered = false;
        // SAFETY: Registered in `register`; this runs `exit` for every namespace, which
        // releases all sockets. `open` cannot run meanwhile: we hold its lock.
        unsafe { bindings::unregister_pernet_subsys(self.ops.get()) };
        drop(registered);
        // Receive calls run under RCU: once a grace period passed, none is left.
        // SAFETY: Called in process context.
        unsafe { bindings::synchronize_rcu() };
    }
}
