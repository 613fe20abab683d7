// SPDX-License-Identifier: GPL-2.0

//! Hardware queues as the device uses them: rings of work requests that librxe produces
//! into and the device consumes (send, receive and shared receive queues), and what all
//! rings share (their offer to the process, copying between rings on a resize).
//!
//! The device owns the consumer index of a work ring: its private copy is the truth and
//! the shared one only a publication. The producer index is read masked and each slot
//! is copied out before it is looked at, since librxe's memory is the process's to
//! scribble on.

use crate::cq::{Completion, CqHandle, WC_WR_FLUSH_ERR};
use crate::device::RxeRs;
use crate::ib::{
    cq::UserCall,
    mmap::UserMap,
    queue::{Geometry, Ring},
    task::Workqueue,
};
use kernel::prelude::*;

/// librxe's `struct mminfo` for a ring offered to it: where to map it and how much.
pub(crate) fn mminfo(map: &UserMap) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&map.offset().to_ne_bytes());
    // A ring is at most `queue::MAX_QUEUE_BYTES` long, so the length fits.
    b[8..12].copy_from_slice(&(map.len() as u32).to_ne_bytes());
    b
}

/// Copies `count` slots of `from`, starting at `start`, to the start of `to`.
pub(crate) fn copy_slots(from: &Ring, start: u32, to: &Ring, count: u32) {
    for i in 0..count {
        from.copy_slot(start.wrapping_add(i), to, i);
    }
}

/// A ring librxe produces work requests into: a send, receive or shared receive queue.
pub(crate) struct WqeRing {
    ring: Ring,
    /// The offer of the ring to the process.
    map: UserMap,
    /// The device's consumer index (masked), the truth the shared copy publishes.
    consumer: u32,
}

impl WqeRing {
    pub(crate) fn new(entries: u32, slot: usize, user: &UserCall<'_, RxeRs>) -> Result<Self> {
        let ring = Ring::new(Geometry::new(entries, slot)?)?;
        let map = UserMap::new(user.ctx, ring.mem())?;
        Ok(Self {
            ring,
            map,
            consumer: 0,
        })
    }

    pub(crate) fn capacity(&self) -> u32 {
        self.ring.geometry().capacity()
    }

    /// librxe's `struct mminfo` for the ring.
    pub(crate) fn mminfo(&self) -> [u8; 16] {
        mminfo(&self.map)
    }

    /// Work requests posted and not yet consumed.
    pub(crate) fn count(&self) -> u32 {
        self.ring.producer().wrapping_sub(self.consumer) & self.ring.geometry().mask()
    }

    /// Moves the `count` posted work requests of `old` to the start of this empty ring.
    pub(crate) fn take_from(&mut self, old: &WqeRing, count: u32) {
        copy_slots(&old.ring, old.consumer, &self.ring, count);
        self.consumer = 0;
        self.ring.set_consumer(0);
        self.ring.set_producer(count);
    }

    /// Completes every posted work request with a flush error, in order.
    ///
    /// The `wr_id` (the first 8 bytes of both WQE formats) is all that is read of each.
    pub(crate) fn flush(&mut self, cq: &CqHandle, wq: &Workqueue, qp_num: u32) {
        let producer = self.ring.producer();
        let mut lost = false;
        while self.consumer != producer {
            let mut id = [0u8; 8];
            self.ring.read_slot(self.consumer, &mut id);
            let c = Completion {
                wr_id: u64::from_ne_bytes(id),
                status: WC_WR_FLUSH_ERR,
                qp_num,
                ..Default::default()
            };
            // Once the CQ overflowed, the rest is consumed without completions.
            if !lost && !cq.post(wq, &c, false) {
                lost = true;
            }
            self.consumer = self.consumer.wrapping_add(1) & self.ring.geometry().mask();
        }
        self.ring.set_consumer(self.consumer);
    }

    /// Back to empty, as librxe does with its side on a move to RESET.
    pub(crate) fn reset(&mut self) {
        self.consumer = 0;
        self.ring.set_consumer(0);
        self.ring.set_producer(0);
    }
}
