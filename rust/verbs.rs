// SPDX-License-Identifier: GPL-2.0

//! Values of the verbs: the status, opcode and flags of a work completion.
//!
//! Each type is built from the kernel's own definitions (`enum ib_wc_status`,
//! `enum ib_wc_opcode`, `enum ib_wc_flags` of `ib_verbs.h`), so that a kernel that
//! renumbers one renumbers it here too; two variants that came to share a value would
//! not compile. The values user space reads in a `struct ib_uverbs_wc` are checked
//! against the uapi header at build time where it defines them (the opcodes), and are
//! translated where the two differ (the flags, see [`WcFlags::to_user`]).

use super::bindings;

/// How a work request ended (`enum ib_wc_status`; user space reads the same values).
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum WcStatus {
    /// Done.
    #[default]
    Success = bindings::ib_wc_status_IB_WC_SUCCESS,
    /// A length beyond what the work request allows.
    LocLenErr = bindings::ib_wc_status_IB_WC_LOC_LEN_ERR,
    /// A work request the QP cannot carry out.
    LocQpOpErr = bindings::ib_wc_status_IB_WC_LOC_QP_OP_ERR,
    /// A local key or address that does not allow the access.
    LocProtErr = bindings::ib_wc_status_IB_WC_LOC_PROT_ERR,
    /// Flushed by the error state.
    WrFlushErr = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR,
    /// A memory window could not be bound.
    MwBindErr = bindings::ib_wc_status_IB_WC_MW_BIND_ERR,
    /// The responder found the request invalid.
    RemInvReqErr = bindings::ib_wc_status_IB_WC_REM_INV_REQ_ERR,
    /// The responder refused the access.
    RemAccessErr = bindings::ib_wc_status_IB_WC_REM_ACCESS_ERR,
    /// The responder could not carry the request out.
    RemOpErr = bindings::ib_wc_status_IB_WC_REM_OP_ERR,
    /// No acknowledgement came, retries included.
    RetryExcErr = bindings::ib_wc_status_IB_WC_RETRY_EXC_ERR,
    /// The responder kept having no receive WQE.
    RnrRetryExcErr = bindings::ib_wc_status_IB_WC_RNR_RETRY_EXC_ERR,
}

/// What a completed work request was (`enum ib_wc_opcode`).
///
/// User space reads the same values: those of `enum ib_uverbs_wc_opcode` (checked
/// below) and the receive opcodes, which no uapi header defines (rdma-core's
/// `IBV_WC_RECV` and `IBV_WC_RECV_RDMA_WITH_IMM` have the kernel's values). `RegMr`
/// completes only on a kernel consumer's QP.
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum WcOpcode {
    #[default]
    Send = bindings::ib_wc_opcode_IB_WC_SEND,
    RdmaWrite = bindings::ib_wc_opcode_IB_WC_RDMA_WRITE,
    RdmaRead = bindings::ib_wc_opcode_IB_WC_RDMA_READ,
    CompSwap = bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
    FetchAdd = bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
    BindMw = bindings::ib_wc_opcode_IB_WC_BIND_MW,
    LocalInv = bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
    Flush = bindings::ib_wc_opcode_IB_WC_FLUSH,
    AtomicWrite = bindings::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
    RegMr = bindings::ib_wc_opcode_IB_WC_REG_MR,
    Recv = bindings::ib_wc_opcode_IB_WC_RECV,
    RecvRdmaWithImm = bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM,
}

// The opcodes user space shares with the kernel are the uapi's.
const _: () = {
    assert!(WcOpcode::Send as u32 == bindings::ib_uverbs_wc_opcode_IB_UVERBS_WC_SEND);
    assert!(WcOpcode::RdmaWrite as u32 == bindings::ib_uverbs_wc_opcode_IB_UVERBS_WC_RDMA_WRITE);
    assert!(WcOpcode::RdmaRead as u32 == bindings::ib_uverbs_wc_opcode_IB_UVERBS_WC_RDMA_READ);
    assert!(WcOpcode::CompSwap as u32 == bindings::ib_uverbs_wc_opcode_IB_UVERBS_WC_COMP_SWAP);
    assert!(WcOpcode::FetchAdd as u32 == bindings::ib_uverbs_wc_opcode_IB_UVERBS_WC_FETCH_ADD);
    assert!(WcOpcode::BindMw as u32 == bindings::ib_uverbs_wc_opcode_IB_UVERBS_WC_BIND_MW);
    assert!(WcOpcode::LocalInv as u32 == bindings::ib_uverbs_wc_opcode_IB_UVERBS_WC_LOCAL_INV);
    assert!(WcOpcode::Flush as u32 == bindings::ib_uverbs_wc_opcode_IB_UVERBS_WC_FLUSH);
    assert!(
        WcOpcode::AtomicWrite as u32 == bindings::ib_uverbs_wc_opcode_IB_UVERBS_WC_ATOMIC_WRITE
    );
};

kernel::impl_flags!(
    /// Flags of a work completion (`enum ib_wc_flags`), the kernel's values.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub(crate) struct WcFlags(u32);

    /// One flag of a work completion.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum WcFlag {
        /// The receive buffer starts with the packet's GRH.
        Grh = bindings::ib_wc_flags_IB_WC_GRH,
        /// The completion carries immediate data.
        WithImm = bindings::ib_wc_flags_IB_WC_WITH_IMM,
        /// The completion carries the rkey a SEND with invalidate invalidated.
        WithInv = bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE,
    }
);

impl WcFlags {
    /// The flags as user space reads them in a `struct ib_uverbs_wc`: rdma-core's
    /// `IBV_WC_*` values, which no uapi header defines and which differ from the
    /// kernel's from the third bit on (`IBV_WC_IP_CSUM_OK` is bit 2, `IBV_WC_WITH_INV`
    /// bit 3).
    pub(crate) fn to_user(self) -> u32 {
        const USER: [(WcFlag, u32); 3] = [
            (WcFlag::Grh, 1 << 0),
            (WcFlag::WithImm, 1 << 1),
            (WcFlag::WithInv, 1 << 3),
        ];
        USER.iter()
            .filter(|(flag, _)| self.contains(*flag))
            .fold(0, |acc, (_, user)| acc | user)
    }
}
