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
//! the driver from the IP header on ([`Skb::ip_bytes_mut`]), then either routed out
//! through the IP stack ([`Skb::send_ip`]) or turned into a received packet
//! ([`Skb::into_received`]) for a destination on the same device. [`SkbList`] queues
//! buffers under a lock its owner provides.

use super::{bindings, netdev::NetDevice};
use core::ptr::NonNull;
use kernel::{prelude::*, types::Opaque};

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
    /// out of `ndev`'s namespace and hands it to the IP stack. Must not be called with
    /// interrupts disabled.
    pub(crate) fn send_ip(self, ndev: &NetDevice, saddr: &[u8], daddr: &[u8]) -> Result {
        let ipv6 = match (saddr.len(), daddr.len()) {
            (4, 4) => false,
            (16, 16) => true,
            _ => return Err(EINVAL),
        };
        let raw = self.skb.ptr.as_ptr();
        core::mem::forget(self.skb);
        // SAFETY: The buffer is ours and its reference is handed over (the helper
        // consumes it in every case); the addresses are as long as `ipv6` says.
        let rc = unsafe {
            bindings::rxe_rs_skb_xmit_ip(raw, ndev.as_raw(), ipv6, saddr.as_ptr(), daddr.as_ptr())
        };
        // Positive values are congestion notices of a packet that was taken.
        kernel::error::to_result(rc.min(0))
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

    /// The netdev it arrived on.
    pub(crate) fn netdev(&self) -> Option<&NetDevice> {
        // SAFETY: The buffer is valid; `dev` is set on receive and lives while the
        // buffer is being received (under RCU, in softirq context).
        let ndev = unsafe { bindings::rxe_rs_skb_dev(self.ptr.as_ptr()) };
        // SAFETY: As above, for the lifetime of `&self`.
        (!ndev.is_null()).then(|| unsafe { NetDevice::from_raw(ndev) })
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

/// A queue of buffers, without a lock of its own: the owner keeps it under one.
///
/// # Invariants
///
/// `head` is an initialised `sk_buff_head` whose buffers this value owns.
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

    /// Adds a buffer at the tail.
    pub(crate) fn push(self: Pin<&mut Self>, skb: Skb) {
        let raw = skb.ptr.as_ptr();
        core::mem::forget(skb);
        // SAFETY: The list is initialised and exclusively ours (`&mut`); the buffer's
        // reference moves into it.
        unsafe { bindings::rxe_rs_skb_list_push(self.head.get(), raw) };
    }

    /// Takes the buffer at the head.
    pub(crate) fn pop(self: Pin<&mut Self>) -> Option<Skb> {
        // SAFETY: The list is initialised and exclusively ours.
        let raw = unsafe { bindings::rxe_rs_skb_list_pop(self.head.get()) };
        // SAFETY: A buffer the list owned; its reference moves to the caller. Buffers
        // on the list are the linear ones `OutSkb::into_received` made or received ones
        // that were linearized before being queued.
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
