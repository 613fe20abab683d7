// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`): received packets, and packets the driver builds
//! and sends.
//!
//! C headers: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h),
//! [`include/net/ip.h`](srctree/include/net/ip.h)
//!
//! An [`Skb`] owns one buffer and frees it when dropped. Its bytes are read only after
//! [`Skb::linearize`] has put them in one piece, and only within the buffer: the
//! network header up to the end of the data.
//!
//! A packet to send is made with [`Skb::new_ip`]: one linear buffer, written whole by
//! the driver from the IP header on ([`OutSkb::ip_bytes_mut`]), then either routed out
//! through the IP stack ([`OutSkb::send_ip`]) or turned into a received packet
//! ([`OutSkb::into_received`]) for a destination on the same device. A sender keeps the
//! route of its last packet in a [`RouteCache`] for its next ones. [`SkbList`] queues
//! buffers under a lock its owner provides.

use crate::ib::{
    bindings,
    netdev::NetDevice,
    sync::{new_spinlock_irq, SpinLockIrq},
};
use core::ptr::NonNull;
use kernel::{
    error::from_err_ptr,
    prelude::*,
    sync::{
        aref::{ARef, AlwaysRefCounted},
        rcu,
    },
    types::Opaque,
};

/// An owned socket buffer.
///
/// # Invariants
///
/// `ptr` is a valid `sk_buff` that this value owns (one reference), freed when dropped.
/// `linear` is true only once the data is in the buffer's linear part.
pub(crate) struct Skb {
    ptr: NonNull<bindings::sk_buff>,
    linear: bool,
}

/// A buffer being built for sending.
///
/// # Invariants
///
/// `skb` owns a linear buffer whose data is exactly the `len` bytes at `data`, starting
/// at its network header.
pub(crate) struct OutSkb {
    skb: Skb,
    data: NonNull<u8>,
    len: usize,
}

// SAFETY: As for `Skb`; `data` points into the buffer it owns.
unsafe impl Send for OutSkb {}

impl OutSkb {
    /// The packet's bytes, to be written from the IP header on.
    pub(crate) fn ip_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: By the type invariant, `len` bytes at `data` belong to the buffer,
        // which this value owns exclusively.
        unsafe { core::slice::from_raw_parts_mut(self.data.as_ptr(), self.len) }
    }

    /// Routes the packet from `saddr` to `daddr` (both 4 bytes for IPv4, 16 for IPv6)
    /// out of the netdev numbered `oif`, which must be `ndev` or a VLAN device on it
    /// (else the packet is not sent), with the route `routes` kept from an earlier
    /// packet to the same place if it is still valid, and hands it to the IP stack.
    /// Fails if it found no route or the packet was dropped below (a full queue). Must
    /// not be called with interrupts disabled.
    pub(crate) fn send_ip(
        self,
        ndev: &NetDevice,
        routes: &RouteCache,
        oif: i32,
        saddr: &[u8],
        daddr: &[u8],
    ) -> Result {
        let route = routes.route(ndev, oif, saddr, daddr)?;
        let raw = self.skb.ptr.as_ptr();
        core::mem::forget(self.skb);
        let (dst, ipv6) = (ARef::into_raw(route.dst).cast().as_ptr(), route.ipv6);
        // SAFETY: The buffer and the route are ours, and their references are handed
        // over (the helper consumes both in every case); the buffer's netdev is
        // `ndev`, in whose namespace the route was looked up; the IP stack's output
        // moves the buffer to the route's netdev (`ndev` or a VLAN device on it).
        kernel::error::to_result(unsafe { bindings::rxe_rs_skb_xmit_dst(raw, dst, ipv6) })
    }

    /// The packet as it would be received: data from its UDP header (after `ip_len`
    /// bytes of IP header) on, linear.
    pub(crate) fn into_received(self, ip_len: usize) -> Result<Skb> {
        if ip_len > self.len {
            return Err(EINVAL);
        }
        let mut skb = self.skb;
        // SAFETY: The buffer is ours and holds at least `ip_len` bytes of data.
        unsafe { bindings::rxe_rs_skb_loop(skb.ptr.as_ptr(), ip_len as u32) };
        skb.linear = true;
        Ok(skb)
    }
}

// SAFETY: An skb the caller owns may be handed to and freed from any thread.
unsafe impl Send for Skb {}

impl Skb {
    /// A new buffer for a packet of `len` bytes from the IP header on, to leave through
    /// `ndev` (allocated atomically).
    pub(crate) fn new_ip(ndev: &NetDevice, len: usize) -> Result<OutSkb> {
        let len32 = u32::try_from(len).map_err(|_| EINVAL)?;
        let mut data: *mut u8 = core::ptr::null_mut();
        // SAFETY: `ndev` is live; `data` is a valid out-parameter.
        let raw = unsafe { bindings::rxe_rs_skb_alloc_ip(ndev.as_raw(), len32, &mut data) };
        let ptr = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: A fresh buffer whose data is the `len` bytes at `data`.
        Ok(OutSkb {
            skb: Skb { ptr, linear: true },
            data: NonNull::new(data).ok_or(ENOMEM)?,
            len,
        })
    }

    /// Takes ownership of `skb`.
    ///
    /// # Safety
    ///
    /// `skb` must be a valid buffer whose reference the caller gives up.
    pub(super) unsafe fn from_raw(skb: *mut bindings::sk_buff) -> Option<Self> {
        // INVARIANT: Per the caller; not known to be linear yet.
        Some(Self {
            ptr: NonNull::new(skb)?,
            linear: false,
        })
    }

    /// The netdev it arrived on, for as long as the caller's RCU read-side section.
    pub(crate) fn netdev<'a>(&'a self, _rcu: &'a rcu::Guard) -> Option<&'a NetDevice> {
        // SAFETY: The buffer is valid; `dev` is set on receive.
        let ndev = unsafe { bindings::rxe_rs_skb_dev(self.ptr.as_ptr()) };
        // SAFETY: The netdev a buffer names (the one it arrived on, or for a buffer of
        // ours the netdev it was made for, which its device holds) is freed only after
        // an RCU grace period once unregistered (`synchronize_net()`), and the reference
        // lives no longer than the caller's read-side section.
        (!ndev.is_null()).then(|| unsafe { NetDevice::from_raw(ndev) })
    }

    /// The VLAN the packet arrived on, as [`Skb::set_vlan_id`] noted it.
    pub(crate) fn vlan_id(&self) -> Option<u16> {
        // SAFETY: The buffer is valid.
        let id = unsafe { bindings::rxe_rs_skb_vlan_id(self.ptr.as_ptr()) };
        u16::try_from(id).ok()
    }

    /// Notes the VLAN the packet arrived on (`None`: none). A VLAN device removes the
    /// tag of what it receives and passes the packet on in its own name: the driver
    /// notes its ID here, in the buffer's VLAN tag field.
    pub(crate) fn set_vlan_id(&mut self, vid: Option<u16>) {
        let vid = vid.map_or(-1, i32::from);
        // SAFETY: The buffer is valid and ours.
        unsafe { bindings::rxe_rs_skb_set_vlan_id(self.ptr.as_ptr(), vid) };
    }

    /// Puts the data in one piece (may allocate, atomically).
    pub(crate) fn linearize(&mut self) -> Result {
        // SAFETY: The buffer is valid and ours.
        kernel::error::to_result(unsafe { bindings::rxe_rs_skb_linearize(self.ptr.as_ptr()) })?;
        self.linear = true;
        Ok(())
    }

    /// The bytes from the network header to the end of the data, and where the data
    /// starts among them, or `None` before [`Self::linearize`] or if the network header
    /// is not before the data.
    pub(crate) fn network_bytes(&self) -> Option<(&[u8], usize)> {
        if !self.linear {
            return None;
        }
        let skb = self.ptr.as_ptr();
        // SAFETY: The buffer is valid; these read its fields.
        let (nh, data, len) = unsafe {
            (
                bindings::rxe_rs_skb_network_header(skb),
                bindings::rxe_rs_skb_data(skb),
                bindings::rxe_rs_skb_len(skb),
            )
        };
        let off = (data as usize).checked_sub(nh as usize)?;
        // Both headers are in the linear part, which holds all of the data once
        // linearized, so `nh..data + len` is one allocation.
        // SAFETY: As above; the bytes are not written while we hold the buffer.
        let bytes = unsafe { core::slice::from_raw_parts(nh, off + len as usize) };
        Some((bytes, off))
    }
}

impl Drop for Skb {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own one reference.
        unsafe { bindings::rxe_rs_kfree_skb(self.ptr.as_ptr()) };
    }
}

/// A queue of linear buffers, without a lock of its own: the owner keeps it under one.
///
/// # Invariants
///
/// `head` is an initialised `sk_buff_head` whose buffers this value owns, each of them
/// linear.
#[pin_data(PinnedDrop)]
pub(crate) struct SkbList {
    #[pin]
    head: Opaque<bindings::sk_buff_head>,
}

// SAFETY: The list and its buffers may be used from any thread (under the owner's lock).
unsafe impl Send for SkbList {}

impl SkbList {
    /// An empty queue.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: The head is pinned in place; the helper initialises it.
            head <- Opaque::ffi_init(|h| unsafe { bindings::rxe_rs_skb_list_init(h) }),
        })
    }

    /// Adds a linear buffer at the tail; gives back one that is not known to be linear.
    pub(crate) fn push(self: Pin<&mut Self>, skb: Skb) -> Result<(), Skb> {
        if !skb.linear {
            return Err(skb);
        }
        let raw = skb.ptr.as_ptr();
        core::mem::forget(skb);
        // SAFETY: The list is initialised and exclusively ours (`&mut`); the buffer's
        // reference moves into it.
        // INVARIANT: The buffer is linear.
        unsafe { bindings::rxe_rs_skb_list_push(self.head.get(), raw) };
        Ok(())
    }

    /// Takes the buffer at the head.
    pub(crate) fn pop(self: Pin<&mut Self>) -> Option<Skb> {
        // SAFETY: The list is initialised and exclusively ours.
        let raw = unsafe { bindings::rxe_rs_skb_list_pop(self.head.get()) };
        // SAFETY: A buffer the list owned; its reference moves to the caller. By the type
        // invariant it is linear.
        unsafe { Skb::from_raw(raw) }.map(|mut s| {
            s.linear = true;
            s
        })
    }
}

#[pinned_drop]
impl PinnedDrop for SkbList {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: The list is initialised and ours; this frees what is left on it.
        unsafe { bindings::rxe_rs_skb_list_purge(self.head.get()) };
    }
}

/// A route out of a netdev (`struct dst_entry`), reference-counted by the kernel.
///
/// # Invariants
///
/// A `&Dst` is a valid route on which a reference is held for the borrow's life.
#[repr(transparent)]
struct Dst(Opaque<bindings::dst_entry>);

// SAFETY: A route may be used and its references taken and released from any thread;
// what is read of it here (`dst_check()`) tolerates concurrent use.
unsafe impl Send for Dst {}
// SAFETY: As for `Send`.
unsafe impl Sync for Dst {}

// SAFETY: `dst_hold()` and `dst_release()` count the references to a route, which is not
// freed while one is held, and may be called from any thread and from softirq;
// `dst_hold()` always succeeds on a route a reference is held on, which a `&Dst`
// guarantees (type invariant).
unsafe impl AlwaysRefCounted for Dst {
    fn inc_ref(&self) {
        // SAFETY: The route is valid (type invariant).
        unsafe { bindings::rxe_rs_dst_hold(self.0.get()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller hands over one reference it holds; `Dst` is
        // `repr(transparent)` over the C struct. Releasing it does not sleep.
        unsafe { bindings::dst_release(obj.cast().as_ptr()) };
    }
}

/// A route with what its use needs: the cookie its validity is checked against and its
/// family.
#[derive(Clone)]
struct Route {
    dst: ARef<Dst>,
    cookie: u32,
    ipv6: bool,
}

impl Route {
    /// Looks up the route from `saddr` to `daddr` (both 4 bytes for IPv4, 16 for IPv6)
    /// out of the netdev numbered `oif` (`ndev` or a VLAN device on it), in `ndev`'s
    /// namespace.
    fn lookup(ndev: &NetDevice, oif: i32, saddr: &[u8], daddr: &[u8]) -> Result<Self> {
        let ipv6 = match (saddr.len(), daddr.len()) {
            (4, 4) => false,
            (16, 16) => true,
            _ => return Err(EINVAL),
        };
        let mut cookie = 0;
        // SAFETY: `ndev` is live; the addresses are as long as `ipv6` says; `cookie` is
        // a valid out-parameter.
        let dst = from_err_ptr(unsafe {
            bindings::rxe_rs_route_lookup(
                ndev.as_raw(),
                oif,
                ipv6,
                saddr.as_ptr(),
                daddr.as_ptr(),
                &mut cookie,
            )
        })?;
        let dst = NonNull::new(dst).ok_or(EINVAL)?.cast::<Dst>();
        Ok(Self {
            // SAFETY: The lookup returned a valid route with a reference for us.
            dst: unsafe { ARef::from_raw(dst) },
            cookie,
            ipv6,
        })
    }

    /// Whether the route is still the one to use: no routing change made it obsolete.
    fn valid(&self) -> bool {
        // SAFETY: The route is valid while `dst` holds its reference.
        unsafe { bindings::rxe_rs_dst_check(self.dst.0.get(), self.cookie) }
    }
}

/// The route of a sender's last packet, kept for its next packets to the same place, as
/// a connected socket keeps its route: a QP's packets go to its one peer.
///
/// A kept route is used only for the same source and destination and only while the IP
/// stack says it is valid (`dst_check()`): a routing change makes the next packet look
/// its route up again. Holding a route does not hold its netdev: when a netdev goes
/// away the IP stack moves its routes off it.
#[pin_data]
pub(crate) struct RouteCache {
    #[pin]
    last: SpinLockIrq<Option<KeptRoute>>,
}

/// A kept route and the netdev and addresses it was looked up for.
struct KeptRoute {
    oif: i32,
    saddr: [u8; 16],
    daddr: [u8; 16],
    len: usize,
    route: Route,
}

impl KeptRoute {
    fn is_for(&self, oif: i32, saddr: &[u8], daddr: &[u8]) -> bool {
        oif == self.oif
            && saddr.len() == self.len
            && daddr.len() == self.len
            && self.saddr.get(..self.len) == Some(saddr)
            && self.daddr.get(..self.len) == Some(daddr)
    }
}

impl RouteCache {
    /// A cache that keeps no route yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            last <- new_spinlock_irq!(None, "RouteCache::last"),
        })
    }

    /// The route from `saddr` to `daddr` out of the netdev numbered `oif` (`ndev` or a
    /// VLAN device on it): the kept one if it is still valid, or a new one, which is
    /// kept in its place.
    fn route(&self, ndev: &NetDevice, oif: i32, saddr: &[u8], daddr: &[u8]) -> Result<Route> {
        {
            let last = self.last.lock();
            if let Some(kept) = last.as_ref().filter(|k| k.is_for(oif, saddr, daddr)) {
                if kept.route.valid() {
                    return Ok(kept.route.clone());
                }
            }
        }
        let route = Route::lookup(ndev, oif, saddr, daddr)?;
        let mut kept = KeptRoute {
            oif,
            saddr: [0; 16],
            daddr: [0; 16],
            len: saddr.len(),
            route: route.clone(),
        };
        kept.saddr[..saddr.len()].copy_from_slice(saddr);
        kept.daddr[..daddr.len()].copy_from_slice(daddr);
        // The route it replaces is released once the lock is.
        let _old = self.last.lock().replace(kept);
        Ok(route)
    }
}
