// SPDX-License-Identifier: GPL-2.0

//! Completions as values: what the device reports of a work request that ended (its
//! status, opcode and flags, the `IB_WC_*` values), and the two forms a CQ holds it in:
//! the `struct ib_uverbs_wc` of a process's ring and the `Wc` a kernel consumer polls.
//! Producers make a [`Completion`] and post it to a CQ (see `cq`).

use crate::ib::wr::{Wc, WcQp};

/// Bytes of a user completion (`struct ib_uverbs_wc`), which librxe copies out whole.
pub(crate) const UVERBS_WC_LEN: usize = 48;

/// Completion status: success (`IB_WC_SUCCESS`, shared with userspace).
pub(crate) const WC_SUCCESS: u32 = 0;
/// Completion status: a length beyond what the work request allows (`IB_WC_LOC_LEN_ERR`).
pub(crate) const WC_LOC_LEN_ERR: u32 = 1;
/// Completion status: a work request the QP cannot carry out (`IB_WC_LOC_QP_OP_ERR`).
pub(crate) const WC_LOC_QP_OP_ERR: u32 = 2;
/// Completion status: a local key or address that does not allow the access
/// (`IB_WC_LOC_PROT_ERR`).
pub(crate) const WC_LOC_PROT_ERR: u32 = 4;
/// Completion status: flushed by the error state (`IB_WC_WR_FLUSH_ERR`).
pub(crate) const WC_WR_FLUSH_ERR: u32 = 5;
/// Completion status: a memory window could not be bound (`IB_WC_MW_BIND_ERR`).
pub(crate) const WC_MW_BIND_ERR: u32 = 6;
/// Completion status: the responder found the request invalid (`IB_WC_REM_INV_REQ_ERR`).
pub(crate) const WC_REM_INV_REQ_ERR: u32 = 9;
/// Completion status: the responder refused the access (`IB_WC_REM_ACCESS_ERR`).
pub(crate) const WC_REM_ACCESS_ERR: u32 = 10;
/// Completion status: the responder could not carry the request out
/// (`IB_WC_REM_OP_ERR`).
pub(crate) const WC_REM_OP_ERR: u32 = 11;
/// Completion status: no acknowledgement came, retries included (`IB_WC_RETRY_EXC_ERR`).
pub(crate) const WC_RETRY_EXC_ERR: u32 = 12;
/// Completion status: the responder kept having no receive WQE
/// (`IB_WC_RNR_RETRY_EXC_ERR`).
pub(crate) const WC_RNR_RETRY_EXC_ERR: u32 = 13;

/// Completion opcodes (`IB_WC_*`, the same values as `IBV_WC_*`).
pub(crate) mod wc_op {
    pub(crate) const SEND: u32 = 0;
    pub(crate) const RDMA_WRITE: u32 = 1;
    pub(crate) const RDMA_READ: u32 = 2;
    pub(crate) const COMP_SWAP: u32 = 3;
    pub(crate) const FETCH_ADD: u32 = 4;
    pub(crate) const BIND_MW: u32 = 5;
    pub(crate) const LOCAL_INV: u32 = 6;
    pub(crate) const FLUSH: u32 = 8;
    pub(crate) const ATOMIC_WRITE: u32 = 9;
    /// Kernel consumers only.
    pub(crate) const REG_MR: u32 = 10;
    pub(crate) const RECV: u32 = 128;
    pub(crate) const RECV_RDMA_WITH_IMM: u32 = 129;
}

/// Completion flags as userspace defines them (`IBV_WC_*`).
pub(crate) mod wc_flag {
    pub(crate) const GRH: u32 = 1 << 0;
    pub(crate) const WITH_IMM: u32 = 1 << 1;
    pub(crate) const WITH_INV: u32 = 1 << 3;
}

/// One completion, as the device produces it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Completion {
    pub(crate) wr_id: u64,
    /// `enum ib_wc_status`.
    pub(crate) status: u32,
    /// `enum ib_wc_opcode` (the values userspace uses too).
    pub(crate) opcode: u32,
    pub(crate) byte_len: u32,
    /// Immediate data (network order) or the invalidated rkey.
    pub(crate) ex: u32,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
    /// `IBV_WC_*` flags: userspace's values, which differ from the kernel's.
    pub(crate) wc_flags: u32,
    pub(crate) port_num: u8,
    /// The QP as a kernel consumer knows it (unused for a process's CQ).
    pub(crate) wc_qp: WcQp,
}

/// `IBV_WC_*` flags and the kernel's `IB_WC_*` flags for the same facts: the two differ
/// from the third bit on.
const WC_FLAGS: [(u32, u32); 4] = [
    (1 << 0, 1 << 0), // GRH
    (1 << 1, 1 << 1), // WITH_IMM
    (1 << 2, 1 << 3), // IP_CSUM_OK
    (1 << 3, 1 << 2), // WITH_INV
];

impl Completion {
    /// The completion as a `struct ib_uverbs_wc`, which librxe copies out whole.
    pub(crate) fn to_uverbs(self) -> [u8; UVERBS_WC_LEN] {
        let mut b = [0u8; UVERBS_WC_LEN];
        b[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        b[8..12].copy_from_slice(&self.status.to_ne_bytes());
        b[12..16].copy_from_slice(&self.opcode.to_ne_bytes());
        // vendor_err (16..20) stays 0.
        b[20..24].copy_from_slice(&self.byte_len.to_ne_bytes());
        b[24..28].copy_from_slice(&self.ex.to_ne_bytes());
        b[28..32].copy_from_slice(&self.qp_num.to_ne_bytes());
        b[32..36].copy_from_slice(&self.src_qp.to_ne_bytes());
        b[36..40].copy_from_slice(&self.wc_flags.to_ne_bytes());
        // pkey_index (40..42), slid (42..44), sl (44) and dlid_path_bits (45) stay 0.
        b[46] = self.port_num;
        b
    }

    /// The completion as a kernel consumer gets it.
    pub(crate) fn to_kernel(self) -> Wc {
        Wc {
            wr_id: self.wr_id,
            status: self.status,
            opcode: self.opcode,
            byte_len: self.byte_len,
            qp: self.wc_qp,
            ex: self.ex,
            src_qp: self.src_qp,
            wc_flags: WC_FLAGS
                .iter()
                .filter(|(user, _)| self.wc_flags & user != 0)
                .fold(0, |acc, (_, kernel)| acc | kernel),
            pkey_index: 0,
            port_num: self.port_num.into(),
        }
    }
}
