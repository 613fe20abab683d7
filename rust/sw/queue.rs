// SPDX-License-Identifier: GPL-2.0

//! Hardware queues: rings of fixed-size slots in memory the device shares with a process.
//!
//! C header: [`include/uapi/rdma/rdma_user_rxe.h`](srctree/include/uapi/rdma/rdma_user_rxe.h)
//! (`struct rxe_queue_buf`)
//!
//! A soft RDMA device has no hardware; its queues (send, receive, shared receive and
//! completion queues) live in host memory that the device and the process both map. The
//! layout is the one librxe expects:
//!
//! ```text
//!  offset 0     log2_elem_size   written once by the device, never read back
//!  offset 4     index_mask       written once by the device, never read back
//!  offset 128   producer_index   masked slot index, stored with release ordering
//!  offset 256   consumer_index   masked slot index, stored with release ordering
//!  offset 384   slot 0, slot 1, ... (2^log2_elem_size bytes each, a power-of-two count)
//! ```
//!
//! One slot always stays empty, so a ring of `n` slots holds `n - 1` elements. The process
//! may write anything anywhere in this memory at any time: the device keeps its own copy
//! of the geometry ([`Geometry`]) and of the index it owns, masks every index it reads,
//! and copies a slot out before looking at it.
//!
//! The memory is the generic layer's [`UserMem`]: zeroed, charged to the process's
//! memory cgroup, offered to the process through an mmap entry, and freed with its last
//! user, kernel or mapping. Every access here goes through its bounds-checked copies and
//! atomic words, so this file has no `unsafe` code.

use crate::ib::{bindings, mmap::UserMem};
use core::mem::offset_of;
use kernel::{
    prelude::*,
    sync::{
        atomic::{Acquire, Release},
        Arc,
    },
};

// Where librxe finds the fields of a ring's header (`struct rxe_queue_buf` of the uapi).
/// Bytes before the first slot.
pub(crate) const HEADER_LEN: usize = offset_of!(bindings::rxe_queue_buf, data);
const LOG2_ELEM_OFF: usize = offset_of!(bindings::rxe_queue_buf, log2_elem_size);
const INDEX_MASK_OFF: usize = offset_of!(bindings::rxe_queue_buf, index_mask);
const PRODUCER_OFF: usize = offset_of!(bindings::rxe_queue_buf, producer_index);
const CONSUMER_OFF: usize = offset_of!(bindings::rxe_queue_buf, consumer_index);

/// The shape of a ring, as the device decided it; the copy in shared memory is never read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    log2_elem: u32,
    slots: u32,
}

impl Geometry {
    /// A ring holding at least `entries` elements of at least `elem_size` bytes each.
    ///
    /// Slots are a power of two of at least 64 bytes (a cache line); the slot count is the
    /// next power of two above `entries`. Fails with `EINVAL` when that does not fit the
    /// 32-bit indices or the memory size limit.
    pub(crate) fn new(entries: u32, elem_size: usize) -> Result<Self> {
        let elem = elem_size
            .max(64)
            .checked_next_power_of_two()
            .ok_or(EINVAL)?;
        let slots = entries
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .ok_or(EINVAL)?;
        let geo = Self {
            log2_elem: elem.trailing_zeros(),
            slots,
        };
        // Refuse what could not be allocated anyway (and keeps offsets in range).
        if geo.mem_len() > MAX_QUEUE_BYTES {
            return Err(EINVAL);
        }
        Ok(geo)
    }

    /// The number of elements the ring holds.
    pub(crate) fn capacity(&self) -> u32 {
        self.slots - 1
    }

    /// The mask that turns a running count into a slot index.
    pub(crate) fn mask(&self) -> u32 {
        self.slots - 1
    }

    /// The size of one slot in bytes.
    pub(crate) fn elem_size(&self) -> usize {
        1 << self.log2_elem
    }

    fn mem_len(&self) -> usize {
        HEADER_LEN + (self.slots as usize) * self.elem_size()
    }
}

/// The largest ring the device makes: the header and 1 GiB of slots (2^20 of the
/// largest send WQE).
const MAX_QUEUE_BYTES: usize = HEADER_LEN + (1 << 30);

/// A ring in shared memory.
///
/// This is the memory access layer only; which side produces and which consumes, and
/// what the slots mean, is up to the driver.
pub(crate) struct Ring {
    mem: Arc<UserMem>,
    geo: Geometry,
}

impl Ring {
    /// Allocates a zeroed ring of shape `geo` and publishes the shape in its header.
    pub(crate) fn new(geo: Geometry) -> Result<Self> {
        let mem = UserMem::new(geo.mem_len())?;
        mem.word::<LOG2_ELEM_OFF>().store(geo.log2_elem, Release);
        mem.word::<INDEX_MASK_OFF>().store(geo.mask(), Release);
        Ok(Self { mem, geo })
    }

    /// The shape of the ring.
    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// The memory, to offer it to a process.
    pub(crate) fn mem(&self) -> &Arc<UserMem> {
        &self.mem
    }

    /// The producer index as last published (masked: the process may store anything).
    pub(crate) fn producer(&self) -> u32 {
        // ORDERING: Acquire pairs with the producer's release, so the slots it filled are
        // visible before they are copied out.
        self.mem.word::<PRODUCER_OFF>().load(Acquire) & self.geo.mask()
    }

    /// The consumer index as last published (masked).
    pub(crate) fn consumer(&self) -> u32 {
        // ORDERING: Acquire pairs with the consumer's release: slots it freed are no
        // longer read by it when they are overwritten.
        self.mem.word::<CONSUMER_OFF>().load(Acquire) & self.geo.mask()
    }

    /// Publishes a new producer index.
    pub(crate) fn set_producer(&self, index: u32) {
        // ORDERING: Release makes the slot contents visible before the index.
        self.mem
            .word::<PRODUCER_OFF>()
            .store(index & self.geo.mask(), Release);
    }

    /// Publishes a new consumer index.
    pub(crate) fn set_consumer(&self, index: u32) {
        // ORDERING: Release: the slots are read before the producer may reuse them.
        self.mem
            .word::<CONSUMER_OFF>()
            .store(index & self.geo.mask(), Release);
    }

    /// The byte offset of slot `index` (masked), inside the memory by `Geometry::mem_len`.
    fn slot_offset(&self, index: u32) -> usize {
        HEADER_LEN + ((index & self.geo.mask()) as usize) * self.geo.elem_size()
    }

    /// Copies the start of slot `index` (masked) into `out`.
    ///
    /// The process may be writing the slot at the same time; `out` then holds some mix of
    /// old and new bytes, which the caller validates like any other input.
    pub(crate) fn read_slot(&self, index: u32, out: &mut [u8]) {
        let len = out.len().min(self.geo.elem_size());
        self.mem.read(self.slot_offset(index), &mut out[..len]);
    }

    /// Copies slot `index` (masked) of this ring to slot `to_index` of `to`, as much of
    /// it as fits. A slot copied onto itself stays as it is.
    pub(crate) fn copy_slot(&self, index: u32, to: &Ring, to_index: u32) {
        let len = self.geo.elem_size().min(to.geo.elem_size());
        self.mem.copy(
            self.slot_offset(index),
            &to.mem,
            to.slot_offset(to_index),
            len,
        );
    }

    /// Copies `data` to the start of slot `index` (masked).
    pub(crate) fn write_slot(&self, index: u32, data: &[u8]) {
        let len = data.len().min(self.geo.elem_size());
        self.mem.write(self.slot_offset(index), &data[..len]);
    }
}

#[cfg(CONFIG_RDMA_RXE_RS_KUNIT_TEST)]
#[kernel::macros::kunit_tests(rxe_rs_ring)]
mod tests {
    use super::*;

    /// Slots are a power of two above the entries asked for, one of them always empty;
    /// slot sizes a power of two of at least a cache line.
    #[test]
    fn geometry_rounds_up() -> Result {
        for (entries, elem, capacity, size) in [
            (0, 1, 0, 64),
            (1, 64, 1, 64),
            (5, 64, 7, 64),
            (7, 100, 7, 128),
            (8, 64, 15, 64),
            (1000, 448, 1023, 512),
        ] {
            let geo = Geometry::new(entries, elem)?;
            assert_eq!(geo.capacity(), capacity);
            assert_eq!(geo.mask(), capacity);
            assert_eq!(geo.elem_size(), size);
        }
        Ok(())
    }

    /// Shapes whose indices or memory would not fit are refused before any allocation.
    #[test]
    fn geometry_refuses_what_cannot_fit() {
        assert!(Geometry::new(u32::MAX, 64).is_err_and(|e| e == EINVAL));
        assert!(Geometry::new(1 << 31, 64).is_err_and(|e| e == EINVAL));
        assert!(Geometry::new(1 << 24, 64).is_err_and(|e| e == EINVAL));
        assert!(Geometry::new(1, usize::MAX).is_err_and(|e| e == EINVAL));
        assert!(Geometry::new(1, MAX_QUEUE_BYTES).is_err_and(|e| e == EINVAL));
        // 1 GiB of slots beside the header, not one slot more.
        assert!(Geometry::new((1 << 22) - 1, 256).is_ok());
        assert!(Geometry::new(1 << 22, 256).is_err_and(|e| e == EINVAL));
    }

    /// The shape goes to the header librxe reads; the device reads its own copy back.
    #[test]
    fn header_publishes_the_shape() -> Result {
        let ring = Ring::new(Geometry::new(5, 100)?)?;
        assert_eq!(ring.mem.word::<LOG2_ELEM_OFF>().load(Acquire), 7);
        assert_eq!(ring.mem.word::<INDEX_MASK_OFF>().load(Acquire), 7);
        assert_eq!(ring.mem.len() % kernel::page::PAGE_SIZE, 0);
        assert!(ring.mem.len() >= HEADER_LEN + 8 * 128);
        Ok(())
    }

    /// Whatever a process stores in the shared header, the indices the device reads are
    /// slots of the ring, and slot accesses stay inside it.
    #[test]
    fn hostile_indices_are_masked() -> Result {
        let ring = Ring::new(Geometry::new(7, 64)?)?;
        for raw in [u32::MAX, 0x8000_0000, 8, 0xdead_beef] {
            ring.mem.word::<PRODUCER_OFF>().store(raw, Release);
            ring.mem.word::<CONSUMER_OFF>().store(raw, Release);
            assert_eq!(ring.producer(), raw & 7);
            assert_eq!(ring.consumer(), raw & 7);
        }
        // Indices the device publishes are masked too.
        ring.set_producer(9);
        assert_eq!(ring.mem.word::<PRODUCER_OFF>().load(Acquire), 1);
        // A slot index past the end names the slot it masks to.
        ring.write_slot(u32::MAX, &[0xa5; 64]);
        let mut back = [0u8; 64];
        ring.read_slot(7, &mut back);
        assert_eq!(back, [0xa5; 64]);
        Ok(())
    }

    /// A copy reads or writes at most one slot, however long the caller's buffer.
    #[test]
    fn slot_copies_stay_in_their_slot() -> Result {
        let ring = Ring::new(Geometry::new(3, 64)?)?;
        ring.write_slot(2, &[0xee; 64]);
        // A longer write fills slot 1 only; a longer read takes slot 1 only.
        ring.write_slot(1, &[1; 100]);
        let mut back = [0xffu8; 100];
        ring.read_slot(1, &mut back);
        assert!(back[..64].iter().all(|&b| b == 1));
        assert!(back[64..].iter().all(|&b| b == 0xff));
        let mut next = [0u8; 64];
        ring.read_slot(2, &mut next);
        assert_eq!(next, [0xee; 64]);

        // Between rings of different slot sizes, as much as fits in the smaller slot.
        let big = Ring::new(Geometry::new(3, 128)?)?;
        big.write_slot(0, &[2; 128]);
        big.copy_slot(0, &ring, 0);
        let mut first = [0u8; 128];
        ring.read_slot(0, &mut first);
        assert!(first[..64].iter().all(|&b| b == 2));
        ring.read_slot(1, &mut next);
        assert_eq!(next, [1; 64]);
        ring.copy_slot(1, &big, 1);
        big.read_slot(1, &mut first);
        assert!(first[..64].iter().all(|&b| b == 1) && first[64..].iter().all(|&b| b == 0));
        Ok(())
    }
}
