// SPDX-License-Identifier: GPL-2.0

//! Hardware queues as the device uses them: rings of work requests that librxe (or, for a
//! kernel consumer's queues, the post calls) produce into and the device consumes (send,
//! receive and shared receive queues), and what all rings share (their offer to the
//! process, copying between rings on a resize).
//!
//! A kernel consumer's ring has the same layout as a process's and is never mapped: the
//! device consumes both kinds the same way.
//!
//! The device owns the consumer index of a work ring: its private copy is the truth and
//! the shared one only a publication. The producer index is read masked and each slot
//! is copied out before it is looked at, since librxe's memory is the process's to
//! scribble on.

use crate::ib::{mmap::UserMap, ucontext::UserCall, wr::RecvWr};
use crate::param;
use crate::sw::{
    queue::{Geometry, Ring},
    rxe_abi::{mminfo, mminfo_of, recv, RECV_WQE_HDR, SGE_LEN},
};
use crate::wqe::{put_at, put_sge, MAX_RECV_WQE};
use crate::RxeRs;
use kernel::prelude::*;

/// Copies `count` slots of `from`, starting at `start`, to the start of `to`.
pub(crate) fn copy_slots(from: &Ring, start: u32, to: &Ring, count: u32) {
    for i in 0..count {
        from.copy_slot(start.wrapping_add(i), to, i);
    }
}

/// A ring librxe produces work requests into: a send, receive or shared receive queue.
pub(crate) struct WqeRing {
    ring: Ring,
    /// The offer of the ring to the process; `None` for a kernel consumer's ring.
    map: Option<UserMap>,
    /// The device's consumer index (masked), the truth the shared copy publishes.
    consumer: u32,
}

impl WqeRing {
    /// A ring for the caller's process, or for a kernel consumer when `user` is `None`.
    pub(crate) fn new(
        entries: u32,
        slot: usize,
        user: Option<&UserCall<'_, RxeRs>>,
    ) -> Result<Self> {
        let ring = Ring::new(Geometry::new(entries, slot)?)?;
        let map = match user {
            Some(user) => Some(UserMap::new(user.ctx, ring.mem())?),
            None => None,
        };
        Ok(Self {
            ring,
            map,
            consumer: 0,
        })
    }

    /// Whether the ring is a process's (mapped, produced into by librxe).
    pub(crate) fn is_user(&self) -> bool {
        self.map.is_some()
    }

    pub(crate) fn capacity(&self) -> u32 {
        self.ring.geometry().capacity()
    }

    /// librxe's `struct mminfo` for the ring (zero for a kernel consumer's ring, which
    /// is never offered).
    pub(crate) fn mminfo(&self) -> [u8; mminfo::LEN] {
        self.map.as_ref().map_or([0; mminfo::LEN], mminfo_of)
    }

    /// How many slots `index` is past the consumer's.
    pub(crate) fn past_consumer(&self, index: u32) -> u32 {
        index.wrapping_sub(self.consumer) & self.ring.geometry().mask()
    }

    /// Work requests posted and not yet consumed.
    pub(crate) fn count(&self) -> u32 {
        self.past_consumer(self.ring.producer())
    }

    /// Moves the `count` posted work requests of `old` to the start of this empty ring.
    pub(crate) fn take_from(&mut self, old: &WqeRing, count: u32) {
        copy_slots(&old.ring, old.consumer, &self.ring, count);
        self.consumer = 0;
        self.ring.set_consumer(0);
        self.ring.set_producer(count);
    }

    /// Consumes every posted work request, in order, handing each one's `wr_id` to
    /// `each`.
    ///
    /// The `wr_id` (the first 8 bytes of both WQE formats) is all that is read of each.
    pub(crate) fn drain(&mut self, each: impl FnMut(u64)) {
        let producer = self.ring.producer();
        self.drain_to(producer, each);
    }

    /// Consumes the posted work requests before slot `end` as [`WqeRing::drain`]; all
    /// of them if `end` is not one they reach.
    pub(crate) fn drain_to(&mut self, end: u32, mut each: impl FnMut(u64)) {
        let producer = self.ring.producer();
        while self.consumer != producer && self.consumer != end {
            let mut id = [0u8; 8];
            self.ring.read_slot(self.consumer, &mut id);
            each(u64::from_ne_bytes(id));
            self.consumer = self.consumer.wrapping_add(1) & self.ring.geometry().mask();
        }
        self.ring.set_consumer(self.consumer);
    }

    /// Adds a work request the device built itself (a kernel consumer's send, in
    /// rxe's `struct rxe_send_wqe` layout); `ENOMEM` when the ring is full.
    pub(crate) fn push(&mut self, wqe: &[u8]) -> Result {
        let producer = self.ring.producer();
        let geo = self.ring.geometry();
        if producer.wrapping_sub(self.consumer) & geo.mask() == geo.capacity() {
            return Err(ENOMEM);
        }
        self.ring.write_slot(producer, wqe);
        self.ring.set_producer(producer.wrapping_add(1));
        Ok(())
    }

    /// Adds a kernel consumer's receive request in rxe's `struct rxe_recv_wqe` layout.
    ///
    /// Fails with `EINVAL` for more SGEs than `max_sge` or a total length beyond 32 bits,
    /// and with `ENOMEM` when the ring is full (as rxe).
    pub(crate) fn post_recv(&mut self, wr: &RecvWr<'_>, max_sge: u32) -> Result {
        let n = wr.num_sge();
        if n > max_sge as usize || n > param::MAX_SGE as usize {
            return Err(EINVAL);
        }
        // One read of the index: the free slot and the fullness test agree on it.
        let producer = self.ring.producer();
        let geo = self.ring.geometry();
        if producer.wrapping_sub(self.consumer) & geo.mask() == geo.capacity() {
            return Err(ENOMEM);
        }
        let mut wqe = [0u8; MAX_RECV_WQE];
        let mut length = 0u32;
        for i in 0..n {
            let sge = wr.sge(i);
            length = length.checked_add(sge.length).ok_or(EINVAL)?;
            put_sge(&mut wqe, RECV_WQE_HDR + i * SGE_LEN, &sge);
        }
        put_at(&mut wqe, recv::WR_ID, &wr.wr_id().to_ne_bytes());
        // The DMA state: total length, what remains of it, the SGE count.
        put_at(&mut wqe, recv::DMA_LENGTH, &length.to_ne_bytes());
        put_at(&mut wqe, recv::DMA_RESID, &length.to_ne_bytes());
        put_at(&mut wqe, recv::DMA_NUM_SGE, &(n as u32).to_ne_bytes());
        self.ring
            .write_slot(producer, &wqe[..RECV_WQE_HDR + n * SGE_LEN]);
        self.ring.set_producer(producer.wrapping_add(1));
        Ok(())
    }

    /// The device's consumer index (masked).
    pub(crate) fn consumer(&self) -> u32 {
        self.consumer
    }

    /// The producer index as last published (masked).
    pub(crate) fn producer(&self) -> u32 {
        self.ring.producer()
    }

    /// The index after `index`.
    pub(crate) fn next_index(&self, index: u32) -> u32 {
        self.index_after(index, 1)
    }

    /// The index `n` slots after `index`.
    pub(crate) fn index_after(&self, index: u32, n: u32) -> u32 {
        index.wrapping_add(n) & self.ring.geometry().mask()
    }

    /// The number of slots (capacity plus the one that stays empty).
    pub(crate) fn slots(&self) -> usize {
        self.ring.geometry().mask() as usize + 1
    }

    /// Copies the start of the work request in slot `index` (consumed or not) into
    /// `out`.
    pub(crate) fn read_into(&self, index: u32, out: &mut [u8]) {
        self.ring.read_slot(index, out);
    }

    /// Consumes the oldest work request (its slot is the producer's again).
    pub(crate) fn advance(&mut self) {
        self.consumer = self.next_index(self.consumer);
        self.ring.set_consumer(self.consumer);
    }

    /// Consumes every posted work request without looking at it.
    pub(crate) fn discard(&mut self) {
        self.consumer = self.ring.producer();
        self.ring.set_consumer(self.consumer);
    }

    /// Copies out the oldest posted work request and consumes it.
    pub(crate) fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        if self.consumer == self.ring.producer() {
            return None;
        }
        let mut b = [0u8; N];
        self.ring.read_slot(self.consumer, &mut b);
        self.consumer = self.consumer.wrapping_add(1) & self.ring.geometry().mask();
        self.ring.set_consumer(self.consumer);
        Some(b)
    }

    /// Back to empty, as librxe does with its side on a move to RESET.
    pub(crate) fn reset(&mut self) {
        self.consumer = 0;
        self.ring.set_consumer(0);
        self.ring.set_producer(0);
    }
}

#[cfg(CONFIG_RDMA_RXE_RS_KUNIT_TEST)]
#[kernel::macros::kunit_tests(rxe_rs_wqe_ring)]
mod tests {
    use super::*;

    /// A kernel consumer's ring of `entries` with 64-byte slots.
    fn ring(entries: u32) -> Result<WqeRing> {
        WqeRing::new(entries, 64, None)
    }

    fn wqe(wr_id: u64) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[..8].copy_from_slice(&wr_id.to_ne_bytes());
        b
    }

    fn take_id(r: &mut WqeRing) -> Option<u64> {
        r.take::<8>().map(u64::from_ne_bytes)
    }

    /// Every queue depth `ibv_query_device()` advertises makes a ring, with the largest
    /// WQEs and completions: the limits are what a process can create.
    #[test]
    fn advertised_limits_fit() {
        use crate::sw::rxe_abi::UVERBS_WC_LEN;
        use crate::wqe::MAX_SEND_WQE;
        assert!(Geometry::new(param::MAX_QP_WR, MAX_SEND_WQE).is_ok());
        assert!(Geometry::new(param::MAX_QP_WR, MAX_RECV_WQE).is_ok());
        let srq_slot = RECV_WQE_HDR + param::MAX_SRQ_SGE as usize * SGE_LEN;
        assert!(Geometry::new(param::MAX_SRQ_WR, srq_slot).is_ok());
        assert!(Geometry::new(param::MAX_CQE, UVERBS_WC_LEN).is_ok());
    }

    #[test]
    fn full_at_capacity_and_fifo() -> Result {
        let mut r = ring(5)?;
        assert!(!r.is_user());
        assert_eq!(r.capacity(), 7);
        assert_eq!(r.mminfo(), [0; mminfo::LEN]);
        for id in 0..7 {
            r.push(&wqe(id))?;
        }
        assert_eq!(r.count(), 7);
        assert!(r.push(&wqe(7)).is_err_and(|e| e == ENOMEM));
        for id in 0..7 {
            assert_eq!(take_id(&mut r), Some(id));
            assert_eq!(u64::from(r.count()), 6 - id);
        }
        assert_eq!(take_id(&mut r), None);
        Ok(())
    }

    /// Indices wrap at the slot count many times over and the order holds.
    #[test]
    fn wraps_around() -> Result {
        let mut r = ring(3)?;
        let mut next = 0u64;
        for round in 0..50u64 {
            for i in 0..3 {
                r.push(&wqe(round * 3 + i))?;
            }
            for _ in 0..3 {
                assert_eq!(take_id(&mut r), Some(next));
                next += 1;
            }
            assert!(r.consumer() < 4 && r.producer() < 4);
            assert_eq!(r.next_index(3), 0);
        }
        Ok(())
    }

    #[test]
    fn drain_to_stops_at_its_end() -> Result {
        let mut r = ring(7)?;
        for id in 10..15 {
            r.push(&wqe(id))?;
        }
        let (mut seen, mut n) = ([0u64; 8], 0);
        let mut record = |id| {
            seen[n] = id;
            n += 1;
        };
        r.drain_to(r.consumer() + 2, &mut record);
        // An end the posted requests never reach: all of them.
        r.drain_to(r.producer() + 1, &mut record);
        assert_eq!(n, 5);
        assert_eq!(seen[..5], [10, 11, 12, 13, 14]);
        assert_eq!(r.count(), 0);
        Ok(())
    }

    /// However far ahead the process puts its producer index (the ring reads it
    /// masked, see `rust/sw/queue.rs`), a drain ends having taken each slot at most once.
    #[test]
    fn drain_bounded_by_the_ring() -> Result {
        let mut r = ring(7)?;
        r.ring.set_producer(u32::MAX);
        assert_eq!(r.count(), 7);
        let mut n = 0;
        r.drain(|_| n += 1);
        assert_eq!(n, 7);
        assert_eq!(r.count(), 0);
        Ok(())
    }

    /// A resize moves the posted requests, oldest first, to the start of the new ring.
    #[test]
    fn take_from_keeps_order() -> Result {
        let mut old = ring(3)?;
        for id in 0..3 {
            old.push(&wqe(id))?;
        }
        take_id(&mut old);
        take_id(&mut old);
        for id in 3..5 {
            old.push(&wqe(id))?;
        }
        // Posted: 2, 3, 4, in slots 2, 3 and 0 (the indices wrapped).
        let mut new = ring(15)?;
        new.take_from(&old, old.count());
        assert_eq!((new.consumer(), new.producer()), (0, 3));
        for id in 2..5 {
            assert_eq!(take_id(&mut new), Some(id));
        }
        Ok(())
    }
}
