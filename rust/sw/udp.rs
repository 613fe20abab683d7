// SPDX-License-Identifier: GPL-2.0

//! RoCE v2's UDP tunnel sockets: one for IPv4 and one for IPv6 on port 4791 in each
//! network namespace where a device lives.
//!
//! C headers: [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h),
//! [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h)
//!
//! A device uses its namespace's sockets from its creation ([`Tunnels::open`], which
//! makes them for the first device there) until its data is dropped (its
//! [`TunnelUse`]): the last device of a namespace to go closes them, so the port is
//! free again once `rdma link delete` returns, as with rxe. A namespace that goes away
//! closes its sockets too, even if the devices on its netdevs are still being removed
//! (ib_core removes them from a workqueue); their uses then name nothing. Each packet
//! the sockets receive goes to [`Receiver::receive`], in softirq context. Dropping
//! [`Tunnels`] (at module unload, after every device) releases what is left and waits
//! for receive calls in progress to end, so no packet reaches the driver afterwards.
//!
//! ```text
//!  newlink ─► Tunnels::open ─► first in its namespace: sockets made, users 1; else users+1
//!  device data dropped ─► TunnelUse drop ─► users-1; at 0 the sockets are closed
//!  namespace exit ─► its sockets closed, its entry gone (later drops find nothing)
//! ```

use super::skb::Skb;
use crate::ib::{bindings, netdev::NetDevice};
use core::{marker::PhantomData, ptr};
use kernel::{
    error::from_err_ptr,
    error::to_result,
    ffi::c_int,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Relaxed, Release},
    types::Opaque,
};

/// The sockets of one namespace and how many devices use them.
struct NetSockets {
    /// The namespace, as an identity only: the entry goes in its `exit`, so the address
    /// is never compared after it could be reused.
    net: *const bindings::net,
    /// What a [`TunnelUse`] names: unique for the module's life, unlike the address.
    id: u64,
    users: usize,
    v4: *mut bindings::socket,
    /// Null where the kernel has no IPv6.
    v6: *mut bindings::socket,
}

// SAFETY: The sockets are plain kernel objects, used from any thread under `STATE`.
unsafe impl Send for NetSockets {}

impl NetSockets {
    /// Releases the sockets; the receive calls in progress end within an RCU grace
    /// period (see `Tunnels::drop`).
    fn close(self) {
        for sock in [self.v4, self.v6] {
            if !sock.is_null() {
                // SAFETY: Made by `rxe_rs_udp_tunnel_open()` and owned by this entry,
                // which is consumed.
                unsafe { bindings::rxe_rs_udp_tunnel_close(sock) };
            }
        }
    }
}

/// The namespaces with sockets, and where the registration of [`Tunnels`] stands.
struct State {
    /// A [`Tunnels`] exists or is being made (there is one at a time).
    claimed: bool,
    /// Its registration for namespace exits is done: sockets may be made.
    registered: bool,
    next_id: u64,
    nets: KVec<NetSockets>,
}

kernel::sync::global_lock! {
    // SAFETY: Initialised once, by the first `Tunnels::register`, before any use.
    unsafe(uninit) static STATE: Mutex<State> = State {
        claimed: false,
        registered: false,
        next_id: 0,
        nets: KVec::new(),
    };
}

/// Whether the first registration took on initialising `STATE`.
static LOCK_CLAIMED: Atomic<bool> = Atomic::new(false);
/// Whether `STATE` is initialised.
static LOCK_READY: Atomic<bool> = Atomic::new(false);

/// The UDP port of RoCE v2.
const ROCE_V2_PORT: u16 = bindings::RXE_RS_ROCE_V2_UDP_DPORT;

/// What the tunnels' packets go to.
pub(crate) trait Receiver: 'static {
    /// A packet arrived on port 4791; its data starts at its UDP header. Runs in softirq
    /// context; dropping `skb` frees it.
    fn receive(skb: Skb);
}

/// Closes a namespace's sockets: the namespace is going away, or the module is.
///
/// # Safety
///
/// Only for the network stack, as `pernet_operations.exit`.
unsafe extern "C" fn exit(net: *mut bindings::net) {
    let mut state = STATE.lock();
    let Some(i) = state.nets.iter().position(|n| ptr::eq(n.net, net)) else {
        return;
    };
    if let Ok(entry) = state.nets.remove(i) {
        entry.close();
    }
}

/// Whether a socket could not be made because the kernel has no IPv6
/// (`udp_sock_create6()` says `EPFNOSUPPORT` without `CONFIG_IPV6`, the socket layer
/// `EAFNOSUPPORT` with IPv6 disabled).
fn no_ipv6(e: Error) -> bool {
    [
        kernel::bindings::EAFNOSUPPORT,
        kernel::bindings::EPFNOSUPPORT,
    ]
    .iter()
    .any(|&n| e.to_errno() == -(n as i32))
}

/// One device's use of its namespace's sockets, given up when dropped.
pub(crate) struct TunnelUse {
    id: u64,
}

impl Drop for TunnelUse {
    fn drop(&mut self) {
        let mut state = STATE.lock();
        // None when the namespace (or the module's registration) went first.
        let Some(i) = state.nets.iter().position(|n| n.id == self.id) else {
            return;
        };
        let entry = &mut state.nets[i];
        entry.users -= 1;
        if entry.users == 0 {
            // Closed under the lock, so that a device added meanwhile finds the port
            // free when it makes the namespace's sockets again.
            if let Ok(entry) = state.nets.remove(i) {
                entry.close();
            }
        }
    }
}

/// The per-namespace tunnel sockets of a driver. One may exist at a time.
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
    /// Registers for namespace exits.
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        if LOCK_CLAIMED.cmpxchg(false, true, Relaxed).is_ok() {
            // SAFETY: Only the first registration gets here, and nothing uses the lock
            // before `LOCK_READY` says it may.
            unsafe { STATE.init() };
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
                let mut state = STATE.lock();
                if state.claimed {
                    return Err(EBUSY);
                }
                state.claimed = true;
                drop(state);
                // SAFETY: `ops` is ours to initialise and stays pinned until `drop`
                // unregisters it. No per-namespace storage: `exit` is all it is for.
                unsafe {
                    ops.write(pin_init::zeroed());
                    (*ops).exit = Some(exit);
                }
                // Not under the lock: a failed registration runs `exit`, which takes it.
                // SAFETY: As above.
                let ret = to_result(unsafe { bindings::register_pernet_subsys(ops) });
                let mut state = STATE.lock();
                // Sockets only once every namespace made from now on will be exited.
                state.registered = ret.is_ok();
                state.claimed = ret.is_ok();
                ret
            }),
            _p: PhantomData,
        })
    }

    /// A use of the sockets of the namespace of `ndev`, made for the first device there
    /// (IPv6 only where the kernel has IPv6). Fails with `ENODEV` when no [`Tunnels`]
    /// is registered.
    pub(crate) fn open(ndev: &NetDevice) -> Result<TunnelUse> {
        // ORDERING: See `register`.
        if !LOCK_READY.load(Acquire) {
            return Err(ENODEV);
        }
        let mut state = STATE.lock();
        if !state.registered {
            return Err(ENODEV);
        }
        // SAFETY: The netdev is live, so its namespace's memory is.
        let net = unsafe { bindings::rxe_rs_netdev_net(ndev.as_raw()) };
        if let Some(entry) = state.nets.iter_mut().find(|n| ptr::eq(n.net, net)) {
            entry.users += 1;
            return Ok(TunnelUse { id: entry.id });
        }
        // A namespace being dismantled (its netdevs moved out or unregistered right
        // after this) may have run its `exit` already: an entry made now would never be
        // removed. A reference refused means that; one taken means `exit` is still to
        // come, after the entry is in the list (`exit` takes the lock).
        // SAFETY: As above.
        if !unsafe { bindings::rxe_rs_net_get_live(net) } {
            return Err(ENODEV);
        }
        let made = Self::make(&mut state, net);
        // SAFETY: The reference taken above; its last put only queues the namespace's
        // dismantling.
        unsafe { bindings::rxe_rs_net_put(net) };
        made
    }

    /// Makes the sockets of `net` and its entry, with one user.
    fn make(state: &mut State, net: *mut bindings::net) -> Result<TunnelUse> {
        // Room for the entry first: once the sockets exist, nothing may fail.
        state.nets.reserve(1, GFP_KERNEL)?;
        let mut entry = NetSockets {
            net,
            id: state.next_id,
            users: 1,
            v4: ptr::null_mut(),
            v6: ptr::null_mut(),
        };
        for ipv6 in [false, true] {
            // SAFETY: The caller holds a reference on the namespace; `rcv` may be called
            // until the socket is closed, which happens before the module's code can go.
            let made = from_err_ptr(unsafe {
                bindings::rxe_rs_udp_tunnel_open(net, ipv6, ROCE_V2_PORT, Some(Self::rcv))
            });
            match made {
                Ok(s) if ipv6 => entry.v6 = s,
                Ok(s) => entry.v4 = s,
                // A kernel without IPv6 speaks RoCE v2 over IPv4 only.
                Err(e) if ipv6 && no_ipv6(e) => {}
                Err(e) => {
                    entry.close();
                    return Err(e);
                }
            }
        }
        let id = entry.id;
        if let Err(e) = state.nets.push_within_capacity(entry) {
            e.0.close();
            return Err(ENOMEM);
        }
        // A u64 counted once per namespace's first device does not wrap.
        state.next_id = id.wrapping_add(1);
        Ok(TunnelUse { id })
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
        // No new sockets from here on; `exit` (which takes the lock) closes those of
        // every namespace as the registration goes.
        STATE.lock().registered = false;
        // SAFETY: Registered in `register`.
        unsafe { bindings::unregister_pernet_subsys(self.ops.get()) };
        // Every device went before (the module drops them first), and every namespace
        // was exited: nothing is left, but be sure.
        let mut state = STATE.lock();
        while let Some(entry) = state.nets.pop() {
            entry.close();
        }
        // The list is a static, never dropped: its buffer goes here, with the module.
        let nets = core::mem::replace(&mut state.nets, KVec::new());
        state.claimed = false;
        drop(state);
        drop(nets);
        // Receive calls run under RCU: once a grace period passed, none is left.
        // SAFETY: Called in process context.
        unsafe { bindings::synchronize_rcu() };
    }
}
