// SPDX-License-Identifier: GPL-2.0

//! Work requests and completions of kernel consumers (`struct ib_send_wr`,
//! `struct ib_recv_wr`, `struct ib_wc`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! Processes hand work to the device through their rings; kernel consumers call
//! `post_send`, `post_recv` and `post_srq_recv` with chains of work requests and take
//! completions with `poll_cq`. This layer walks a chain one request at a time, gives the
//! driver a view of each ([`SendWr`], [`RecvWr`]), and stops at the first one the driver
//! refuses, which it reports back as the bad one. Completions are written into the
//! consumer's array through [`WcOut`].

use super::{
    ah::Ah,
    bindings,
    device::Driver,
    mr::KernelMemory,
    verbs::{SendFlags, WcFlags, WcOpcode, WcStatus, WrOpcode},
};
use core::marker::PhantomData;
use kernel::prelude::*;

/// One scatter/gather element of a work request.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

/// Walks a chain of work requests linked by `next`.
///
/// # Safety
///
/// `first` must be null or the head of a chain of valid requests that outlives `'a`.
unsafe fn walk<'a, W: 'a>(first: *const W, next: fn(&W) -> *mut W) -> impl Iterator<Item = &'a W> {
    let mut cur = first;
    core::iter::from_fn(move || {
        // SAFETY: Per the caller, `cur` is null or a valid request living for `'a`.
        let w = unsafe { cur.as_ref() }?;
        cur = next(w);
        Some(w)
    })
}

/// A kernel consumer's receive work request, for the duration of the post call.
pub(crate) struct RecvWr<'a> {
    raw: &'a bindings::ib_recv_wr,
}

impl<'a> RecvWr<'a> {
    /// The chain starting at `wr`.
    ///
    /// # Safety
    ///
    /// `wr` must be null or the head of a chain of valid work requests (with valid SGE
    /// lists) that outlives `'a`, as ib_core's post calls guarantee.
    pub(super) unsafe fn chain(wr: *const bindings::ib_recv_wr) -> impl Iterator<Item = Self> {
        // SAFETY: Per the caller.
        unsafe { walk(wr, |w| w.next) }.map(|raw| Self { raw })
    }

    /// Posts the chain starting at `wr` with `post`, one request at a time, until one
    /// fails: `*bad` then names it, and its error is returned, as an errno (0 if none).
    ///
    /// # Safety
    ///
    /// As [`Self::chain`]; `bad` must be valid for writes for the call.
    pub(super) unsafe fn post_chain(
        wr: *const bindings::ib_recv_wr,
        bad: *mut *const bindings::ib_recv_wr,
        mut post: impl FnMut(&RecvWr<'_>) -> Result,
    ) -> kernel::ffi::c_int {
        // SAFETY: Per the caller.
        for w in unsafe { Self::chain(wr) } {
            if let Err(e) = post(&w) {
                // SAFETY: Per the caller.
                unsafe { *bad = w.raw };
                return e.to_errno();
            }
        }
        0
    }

    /// The consumer's identifier (or its `ib_cqe` pointer), returned in the completion.
    pub(crate) fn wr_id(&self) -> u64 {
        // SAFETY: Both union members are plain 64-bit values; reading the bits is fine.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }

    /// The number of SGEs (a negative count reads as `usize::MAX`, which any limit
    /// refuses).
    pub(crate) fn num_sge(&self) -> usize {
        usize::try_from(self.raw.num_sge).unwrap_or(usize::MAX)
    }

    /// SGE `i`, `i` below [`Self::num_sge`].
    pub(crate) fn sge(&self, i: usize) -> Sge {
        assert!(i < self.num_sge());
        // SAFETY: Per `chain`'s caller the list holds `num_sge` elements, and `i` is
        // below that.
        let s = unsafe { &*self.raw.sg_list.add(i) };
        Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    }
}

/// A kernel consumer's send work request, for the duration of the post call.
///
/// The request is the first member of a larger struct that its opcode (and, for
/// datagrams, the QP's type) selects: `struct ib_rdma_wr`, `struct ib_atomic_wr` or
/// `struct ib_ud_wr`. The views below read that struct only when the opcode or QP type
/// says it is there.
pub(crate) struct SendWr<'a> {
    raw: &'a bindings::ib_send_wr,
    /// Posted to a UD or GSI QP: the request is an `ib_ud_wr`.
    ud: bool,
}

/// A fast registration as its consumer posted it (see [`SendWr::reg`]).
pub(crate) struct RegWr {
    pub(crate) lkey: u32,
    pub(crate) key: u32,
    pub(crate) access: u32,
    /// The MR's `iova` when the request was posted: consumers may change it after
    /// `ib_map_mr_sg()` (NFS over RDMA puts the RPC's XID in its upper half).
    pub(crate) iova: u64,
}

/// The datagram part of a send work request.
pub(crate) struct UdWr<'a, T: Driver> {
    pub(crate) ah: &'a Ah<T>,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_qkey: u32,
}

impl<'a> SendWr<'a> {
    /// The chain starting at `wr`.
    ///
    /// # Safety
    ///
    /// As [`RecvWr::chain`].
    /// `ud` says whether the QP is a UD or GSI one (its requests are `ib_ud_wr`).
    pub(super) unsafe fn chain(
        wr: *const bindings::ib_send_wr,
        ud: bool,
    ) -> impl Iterator<Item = Self> {
        // SAFETY: Per the caller.
        unsafe { walk(wr, |w| w.next) }.map(move |raw| Self { raw, ud })
    }

    /// The opcode, if the device carries it out.
    pub(crate) fn opcode(&self) -> Option<WrOpcode> {
        WrOpcode::from_raw(self.raw.opcode)
    }

    /// The flags.
    pub(crate) fn send_flags(&self) -> SendFlags {
        SendFlags::from_raw(self.raw.send_flags as u32)
    }

    /// The immediate data (in wire order) or the rkey to invalidate, as 4 bytes.
    pub(crate) fn ex(&self) -> [u8; 4] {
        // SAFETY: Both union members are plain 32-bit values.
        unsafe { self.raw.ex.imm_data }.to_ne_bytes()
    }

    /// The number of SGEs (a negative count reads as `usize::MAX`, which any limit
    /// refuses).
    pub(crate) fn num_sge(&self) -> usize {
        usize::try_from(self.raw.num_sge).unwrap_or(usize::MAX)
    }

    /// SGE `i`, `i` below [`Self::num_sge`].
    pub(crate) fn sge(&self, i: usize) -> Sge {
        assert!(i < self.num_sge());
        // SAFETY: Per `chain`'s caller the list holds `num_sge` elements.
        let s = unsafe { &*self.raw.sg_list.add(i) };
        Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    }

    /// Copies the data of SGE `i` (the consumer's kernel memory, for inline data) into
    /// `out`, which must be as long as the SGE. A `SendWr` is only ever made for a
    /// kernel consumer's QP (see `Device::post_send`).
    pub(crate) fn read_inline(&self, i: usize, out: &mut [u8]) -> Result {
        let sge = self.sge(i);
        if out.len() != sge.length as usize {
            return Err(EINVAL);
        }
        // A kernel consumer's work request names memory it mapped for the device.
        KernelMemory::new().read(sge.addr, out)
    }

    /// The remote address and rkey of an RDMA WRITE or READ.
    pub(crate) fn rdma(&self) -> Option<(u64, u32)> {
        if self.ud
            || !matches!(
                self.opcode(),
                Some(
                    WrOpcode::RdmaWrite
                        | WrOpcode::RdmaWriteWithImm
                        | WrOpcode::RdmaRead
                        | WrOpcode::RdmaReadWithInv
                )
            )
        {
            return None;
        }
        // SAFETY: Per ib_core's contract, an RDMA request is the `wr` member (the first)
        // of a `struct ib_rdma_wr`.
        let w = unsafe { &*core::ptr::from_ref(self.raw).cast::<bindings::ib_rdma_wr>() };
        Some((w.remote_addr, w.rkey))
    }

    /// The remote address, compare/add and swap operands and rkey of an atomic.
    pub(crate) fn atomic(&self) -> Option<(u64, u64, u64, u32)> {
        if self.ud
            || !matches!(
                self.opcode(),
                Some(WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd)
            )
        {
            return None;
        }
        // SAFETY: Per ib_core's contract, an atomic request is the `wr` member (the
        // first) of a `struct ib_atomic_wr`.
        let w = unsafe { &*core::ptr::from_ref(self.raw).cast::<bindings::ib_atomic_wr>() };
        Some((w.remote_addr, w.compare_add, w.swap, w.rkey))
    }

    /// A fast registration: the MR's current lkey, the key it is to have (its low byte
    /// counts), the access rights (`IB_ACCESS_*`) it grants and the address of its first
    /// byte.
    pub(crate) fn reg(&self) -> Option<RegWr> {
        if self.ud || self.opcode() != Some(WrOpcode::RegMr) {
            return None;
        }
        // SAFETY: Per ib_core's contract, a registration request is the `wr` member (the
        // first) of a `struct ib_reg_wr`.
        let w = unsafe { &*core::ptr::from_ref(self.raw).cast::<bindings::ib_reg_wr>() };
        if w.mr.is_null() {
            return None;
        }
        // SAFETY: The consumer's MR, live for the call; only its key and address are
        // read.
        let (lkey, iova) = unsafe { ((*w.mr).lkey, (*w.mr).iova) };
        Some(RegWr {
            lkey,
            key: w.key,
            access: w.access as u32,
            iova,
        })
    }

    /// The address handle, QP number and Q_Key of a datagram.
    pub(crate) fn ud<T: Driver>(&self) -> Option<UdWr<'a, T>> {
        if !self.ud {
            return None;
        }
        // SAFETY: Per ib_core's contract, a request to a UD or GSI QP is the `wr` member
        // (the first) of a `struct ib_ud_wr`.
        let w = unsafe { &*core::ptr::from_ref(self.raw).cast::<bindings::ib_ud_wr>() };
        if w.ah.is_null() {
            return None;
        }
        Some(UdWr {
            // SAFETY: The consumer's AH, made on the QP's device (a `Device<T>`), live
            // for the call.
            ah: unsafe { Ah::<T>::from_raw(w.ah) },
            remote_qpn: w.remote_qpn,
            remote_qkey: w.remote_qkey,
        })
    }

    /// The request as ib_core knows it, to report it as the bad one.
    pub(super) fn as_ptr(&self) -> *const bindings::ib_send_wr {
        self.raw
    }

    /// The consumer's identifier (or its `ib_cqe` pointer), returned in the completion.
    pub(crate) fn wr_id(&self) -> u64 {
        // SAFETY: Both union members are plain 64-bit values; reading the bits is fine.
        unsafe { self.raw.__bindgen_anon_1.wr_id }
    }
}

/// The QP a kernel completion names (`ib_wc.qp`): an address the consumer compares or
/// follows, never followed here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WcQp(usize);

impl WcQp {
    /// The identity of `qp`.
    pub(super) fn new(qp: *mut bindings::ib_qp) -> Self {
        Self(qp as usize)
    }
}

/// A completion for a kernel consumer.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Wc {
    pub(crate) wr_id: u64,
    pub(crate) status: WcStatus,
    pub(crate) opcode: WcOpcode,
    pub(crate) byte_len: u32,
    pub(crate) qp: WcQp,
    /// Immediate data (network order) or the invalidated rkey.
    pub(crate) ex: u32,
    pub(crate) src_qp: u32,
    pub(crate) wc_flags: WcFlags,
    pub(crate) pkey_index: u16,
    pub(crate) port_num: u32,
    /// Meaningful with `WcFlag::WithVlan`.
    pub(crate) vlan_id: u16,
}

/// The consumer's array of completions that `poll_cq` fills.
pub(crate) struct WcOut<'a> {
    next: *mut bindings::ib_wc,
    room: usize,
    filled: usize,
    _p: PhantomData<&'a mut bindings::ib_wc>,
}

impl WcOut<'_> {
    /// An array of `n` completions at `wc`.
    ///
    /// # Safety
    ///
    /// `wc` must be valid for writes of `n` elements for the lifetime of the value.
    pub(super) unsafe fn new(wc: *mut bindings::ib_wc, n: usize) -> Self {
        Self {
            next: wc,
            room: n,
            filled: 0,
            _p: PhantomData,
        }
    }

    /// Room for more.
    pub(crate) fn has_room(&self) -> bool {
        self.room > 0
    }

    /// Completions written.
    pub(super) fn filled(&self) -> usize {
        self.filled
    }

    /// Writes `c` into the next element; `false` (and nothing written) when full.
    pub(crate) fn push(&mut self, c: &Wc) -> bool {
        if self.room == 0 {
            return false;
        }
        let mut w: bindings::ib_wc = pin_init::zeroed();
        w.__bindgen_anon_1.wr_id = c.wr_id;
        w.status = c.status as bindings::ib_wc_status;
        w.opcode = c.opcode as bindings::ib_wc_opcode;
        w.byte_len = c.byte_len;
        w.qp = c.qp.0 as *mut bindings::ib_qp;
        w.ex.invalidate_rkey = c.ex;
        w.src_qp = c.src_qp;
        w.wc_flags = u32::from(c.wc_flags) as i32;
        w.pkey_index = c.pkey_index;
        w.port_num = c.port_num;
        w.vlan_id = c.vlan_id;
        // SAFETY: `next` has room for one more element per `new`'s caller.
        unsafe {
            self.next.write(w);
            self.next = self.next.add(1);
        }
        self.room -= 1;
        self.filled += 1;
        true
    }
}
