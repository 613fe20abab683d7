// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`) as the receive path gets them.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)
//!
//! An [`Skb`] owns one buffer and frees it when dropped. Its bytes are read only after
//! [`Skb::linearize`] has put them in one piece, and only within the buffer: the
//! network header up to the end of the data.

use super::{bindings, netdev::NetDevice};
use core::ptr::NonNull;
use kernel::prelude::*;

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

// SAFETY: An skb the caller owns may be handed to and freed from any thread.
unsafe impl Send for Skb {}

impl Skb {
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
