// SPDX-License-Identifier: GPL-2.0

//! Where the fields of librxe's ring slots are: send and receive WQEs and their SGEs
//! (`struct rxe_send_wqe`, `struct rxe_recv_wqe`, `struct rxe_sge`) and user completions
//! (`struct ib_uverbs_wc`); and of what the driver answers in `udata` (a ring's
//! `struct mminfo`, the `rxe_create_*_resp` structs) or reads from it
//! (`struct rxe_modify_srq_cmd`).
//!
//! C headers: [`include/uapi/rdma/rdma_user_rxe.h`](srctree/include/uapi/rdma/rdma_user_rxe.h),
//! [`include/uapi/rdma/ib_user_verbs.h`](srctree/include/uapi/rdma/ib_user_verbs.h)
//!
//! Every offset and size here is taken by the compiler from the headers' structs, as
//! bindgen translated them: none is a number written by hand, so a layout that changed
//! with the kernel would move them all with it. A slot is read and written as bytes
//! (a process may be writing it at the same time; see [`super::queue::Ring`]), at
//! these offsets.
//!
//! The kernel's own REG_MR work request (`wr.reg`, not part of the user ABI) carries the
//! MR's local key where C rxe keeps the `ib_mr` pointer.

use crate::ib::bindings::{
    ib_uverbs_wc, mminfo as rxe_mminfo, rxe_create_ah_resp, rxe_create_cq_resp, rxe_create_qp_resp,
    rxe_create_srq_resp, rxe_dma_info, rxe_modify_srq_cmd, rxe_recv_wqe, rxe_resize_cq_resp,
    rxe_send_wqe, rxe_sge,
};
use crate::ib::mmap::UserMap;
use core::mem::{offset_of, size_of};

/// Bytes of one SGE.
pub(crate) const SGE_LEN: usize = size_of::<rxe_sge>();

/// Bytes of a send WQE before its SGEs, its inline data or an ATOMIC WRITE's 8 bytes
/// (the flexible tail of its `dma`).
pub(crate) const SEND_WQE_HDR: usize = size_of::<rxe_send_wqe>();

/// Bytes of a receive WQE before its SGEs.
pub(crate) const RECV_WQE_HDR: usize = size_of::<rxe_recv_wqe>();

/// Bytes of a user completion.
pub(crate) const UVERBS_WC_LEN: usize = size_of::<ib_uverbs_wc>();

/// Fields of a send WQE, per operation (`wr.wr` is a union of their layouts).
pub(crate) mod send {
    use super::*;

    pub(crate) const WR_ID: usize = offset_of!(rxe_send_wqe, wr.wr_id);
    pub(crate) const OPCODE: usize = offset_of!(rxe_send_wqe, wr.opcode);
    pub(crate) const FLAGS: usize = offset_of!(rxe_send_wqe, wr.send_flags);
    /// Immediate data, or the rkey to invalidate.
    pub(crate) const EX: usize = offset_of!(rxe_send_wqe, wr.ex);
    pub(crate) const REMOTE_ADDR: usize = offset_of!(rxe_send_wqe, wr.wr.rdma.remote_addr);
    pub(crate) const RKEY: usize = offset_of!(rxe_send_wqe, wr.wr.rdma.rkey);
    pub(crate) const COMPARE_ADD: usize = offset_of!(rxe_send_wqe, wr.wr.atomic.compare_add);
    pub(crate) const SWAP: usize = offset_of!(rxe_send_wqe, wr.wr.atomic.swap);
    pub(crate) const ATOMIC_RKEY: usize = offset_of!(rxe_send_wqe, wr.wr.atomic.rkey);
    pub(crate) const REMOTE_QPN: usize = offset_of!(rxe_send_wqe, wr.wr.ud.remote_qpn);
    pub(crate) const REMOTE_QKEY: usize = offset_of!(rxe_send_wqe, wr.wr.ud.remote_qkey);
    pub(crate) const AH_NUM: usize = offset_of!(rxe_send_wqe, wr.wr.ud.ah_num);
    pub(crate) const MW_ADDR: usize = offset_of!(rxe_send_wqe, wr.wr.mw.addr);
    pub(crate) const MW_LENGTH: usize = offset_of!(rxe_send_wqe, wr.wr.mw.length);
    pub(crate) const MW_MR_LKEY: usize = offset_of!(rxe_send_wqe, wr.wr.mw.mr_lkey);
    pub(crate) const MW_RKEY: usize = offset_of!(rxe_send_wqe, wr.wr.mw.mw_rkey);
    pub(crate) const MW_NEW_RKEY: usize = offset_of!(rxe_send_wqe, wr.wr.mw.rkey);
    pub(crate) const MW_ACCESS: usize = offset_of!(rxe_send_wqe, wr.wr.mw.access);
    /// A kernel REG_MR's local key, in the place of C rxe's `ib_mr` pointer.
    pub(crate) const REG_LKEY: usize = offset_of!(rxe_send_wqe, wr.wr.reg);
    pub(crate) const REG_KEY: usize = offset_of!(rxe_send_wqe, wr.wr.reg.key);
    pub(crate) const REG_ACCESS: usize = offset_of!(rxe_send_wqe, wr.wr.reg.access);
    /// A kernel REG_MR's first address, in the WQE's `iova` (which C rxe keeps for the
    /// remote address of RDMA operations).
    pub(crate) const REG_IOVA: usize = offset_of!(rxe_send_wqe, iova);
    pub(crate) const FLUSH_RKEY: usize = offset_of!(rxe_send_wqe, wr.wr.flush.rkey);
    pub(crate) const FLUSH_TYPE: usize = offset_of!(rxe_send_wqe, wr.wr.flush.type_);
    pub(crate) const FLUSH_LEVEL: usize = offset_of!(rxe_send_wqe, wr.wr.flush.level);
    /// An ATOMIC WRITE's 8 bytes, where the SGEs would be.
    pub(crate) const ATOMIC_WRITE_DATA: usize = SEND_WQE_HDR;
    /// The DMA state: the total length, what remains of it, the SGE count.
    pub(crate) const DMA_LENGTH: usize = offset_of!(rxe_send_wqe, dma.length);
    pub(crate) const DMA_RESID: usize = offset_of!(rxe_send_wqe, dma.resid);
    pub(crate) const DMA_NUM_SGE: usize = offset_of!(rxe_send_wqe, dma.num_sge);
}

/// Fields of a receive WQE.
pub(crate) mod recv {
    use super::*;

    pub(crate) const WR_ID: usize = offset_of!(rxe_recv_wqe, wr_id);
    pub(crate) const DMA_LENGTH: usize = offset_of!(rxe_recv_wqe, dma.length);
    pub(crate) const DMA_RESID: usize = offset_of!(rxe_recv_wqe, dma.resid);
    pub(crate) const DMA_NUM_SGE: usize = offset_of!(rxe_recv_wqe, dma.num_sge);
}

/// Fields of an SGE.
pub(crate) mod sge {
    use super::*;

    pub(crate) const ADDR: usize = offset_of!(rxe_sge, addr);
    pub(crate) const LENGTH: usize = offset_of!(rxe_sge, length);
    pub(crate) const LKEY: usize = offset_of!(rxe_sge, lkey);
}

/// Fields of a user completion.
pub(crate) mod wc {
    use super::*;

    pub(crate) const WR_ID: usize = offset_of!(ib_uverbs_wc, wr_id);
    pub(crate) const STATUS: usize = offset_of!(ib_uverbs_wc, status);
    pub(crate) const OPCODE: usize = offset_of!(ib_uverbs_wc, opcode);
    pub(crate) const BYTE_LEN: usize = offset_of!(ib_uverbs_wc, byte_len);
    pub(crate) const EX: usize = offset_of!(ib_uverbs_wc, ex);
    pub(crate) const QP_NUM: usize = offset_of!(ib_uverbs_wc, qp_num);
    pub(crate) const SRC_QP: usize = offset_of!(ib_uverbs_wc, src_qp);
    pub(crate) const WC_FLAGS: usize = offset_of!(ib_uverbs_wc, wc_flags);
    pub(crate) const PORT_NUM: usize = offset_of!(ib_uverbs_wc, port_num);
}

/// A ring offered to the process: where to map it, and how many bytes.
pub(crate) mod mminfo {
    use super::*;

    pub(crate) const OFFSET: usize = offset_of!(rxe_mminfo, offset);
    pub(crate) const SIZE: usize = offset_of!(rxe_mminfo, size);
    pub(crate) const LEN: usize = size_of::<rxe_mminfo>();
}

/// librxe's `struct mminfo` for memory offered to the process: where to map it and how
/// much of it.
pub(crate) fn mminfo_of(map: &UserMap) -> [u8; mminfo::LEN] {
    const { assert!(mminfo::OFFSET + 8 <= mminfo::LEN && mminfo::SIZE + 4 <= mminfo::LEN) };
    let mut b = [0u8; mminfo::LEN];
    b[mminfo::OFFSET..mminfo::OFFSET + 8].copy_from_slice(&map.offset().to_ne_bytes());
    // The field is 32 bits wide: rings are at most `queue::MAX_QUEUE_BYTES` long, and
    // larger memory is not offered in librxe's layout.
    let size = u32::try_from(map.len()).unwrap_or(u32::MAX);
    b[mminfo::SIZE..mminfo::SIZE + 4].copy_from_slice(&size.to_ne_bytes());
    b
}

/// The answer to `create_cq` and `resize_cq`: the ring's `mminfo`, alone.
pub(crate) mod cq_resp {
    use super::*;

    pub(crate) const LEN: usize = size_of::<rxe_create_cq_resp>();
}

/// The answer to `create_qp`: the receive ring's `mminfo`, then the send ring's.
pub(crate) mod create_qp_resp {
    use super::*;

    pub(crate) const RQ_MI: usize = offset_of!(rxe_create_qp_resp, rq_mi);
    pub(crate) const SQ_MI: usize = offset_of!(rxe_create_qp_resp, sq_mi);
    pub(crate) const LEN: usize = size_of::<rxe_create_qp_resp>();
}

/// The answer to `create_srq`: the ring's `mminfo` and the SRQ's number.
pub(crate) mod create_srq_resp {
    use super::*;

    pub(crate) const MI: usize = offset_of!(rxe_create_srq_resp, mi);
    pub(crate) const SRQ_NUM: usize = offset_of!(rxe_create_srq_resp, srq_num);
    pub(crate) const LEN: usize = size_of::<rxe_create_srq_resp>();
}

/// The answer to `create_ah`: the AH's number.
pub(crate) mod create_ah_resp {
    use super::*;

    pub(crate) const AH_NUM: usize = offset_of!(rxe_create_ah_resp, ah_num);
    pub(crate) const LEN: usize = size_of::<rxe_create_ah_resp>();
}

/// What librxe sends with `modify_srq`: where to write the new ring's `mminfo`.
pub(crate) mod modify_srq_cmd {
    use super::*;

    pub(crate) const MMAP_INFO_ADDR: usize = offset_of!(rxe_modify_srq_cmd, mmap_info_addr);
    pub(crate) const LEN: usize = size_of::<rxe_modify_srq_cmd>();
}

// What the code adds to the headers: the tails (SGEs, inline data) start right after
// the fixed parts, a ring is drained by `wr_id` without knowing its kind, and a CQ's
// answer is its ring's `mminfo`.
const _: () = {
    assert!(SEND_WQE_HDR == offset_of!(rxe_send_wqe, dma) + size_of::<rxe_dma_info>());
    assert!(RECV_WQE_HDR == offset_of!(rxe_recv_wqe, dma) + size_of::<rxe_dma_info>());
    assert!(send::WR_ID == 0 && recv::WR_ID == 0);
    // Both CQ answers are the one `mminfo`.
    assert!(cq_resp::LEN == mminfo::LEN && size_of::<rxe_resize_cq_resp>() == mminfo::LEN);
};
