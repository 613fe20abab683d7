// SPDX-License-Identifier: GPL-2.0

//! Values of the verbs: the status, opcode and flags of a work completion, and the
//! opcode and flags of a send work request.
//!
//! Each type is built from the kernel's own definitions (`enum ib_wc_status`,
//! `ib_wc_opcode`, `ib_wc_flags`, `ib_wr_opcode` and `ib_send_flags` of `ib_verbs.h`),
//! so that a kernel that renumbers one renumbers it here too; two variants that came to
//! share a value would not compile. The values user space reads in a `struct
//! ib_uverbs_wc` or writes in a send WQE are checked against the uapi header at build
//! time where it defines them (the opcodes), and are translated where the two differ
//! (the completion flags, see [`WcFlags::to_user`]).

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
        /// The datagram arrived on a VLAN, whose ID the completion carries (kernel
        /// consumers only: `struct ib_uverbs_wc` has no field for it).
        WithVlan = bindings::ib_wc_flags_IB_WC_WITH_VLAN,
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

/// What a send work request asks for (`enum ib_wr_opcode`).
///
/// A process writes the values of `enum ib_uverbs_wr_opcode` into its send ring
/// (checked equal below); `RegMr` has no user value, and only kernel consumers may post
/// it or `RdmaReadWithInv`. The opcodes the device does not carry out (LSO, the masked
/// atomics, integrity registration) have no variant.
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum WrOpcode {
    RdmaWrite = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
    RdmaWriteWithImm = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM,
    /// Also what an unused record of a sent WQE holds.
    #[default]
    Send = bindings::ib_wr_opcode_IB_WR_SEND,
    SendWithImm = bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM,
    RdmaRead = bindings::ib_wr_opcode_IB_WR_RDMA_READ,
    AtomicCmpAndSwp = bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
    AtomicFetchAndAdd = bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD,
    LocalInv = bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
    BindMw = bindings::ib_wr_opcode_IB_WR_BIND_MW,
    SendWithInv = bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV,
    RdmaReadWithInv = bindings::ib_wr_opcode_IB_WR_RDMA_READ_WITH_INV,
    Flush = bindings::ib_wr_opcode_IB_WR_FLUSH,
    AtomicWrite = bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE,
    RegMr = bindings::ib_wr_opcode_IB_WR_REG_MR,
}

impl WrOpcode {
    /// The opcode of value `v`, if the device carries it out.
    pub(crate) fn from_raw(v: u32) -> Option<Self> {
        const ALL: [WrOpcode; 14] = [
            WrOpcode::RdmaWrite,
            WrOpcode::RdmaWriteWithImm,
            WrOpcode::Send,
            WrOpcode::SendWithImm,
            WrOpcode::RdmaRead,
            WrOpcode::AtomicCmpAndSwp,
            WrOpcode::AtomicFetchAndAdd,
            WrOpcode::LocalInv,
            WrOpcode::BindMw,
            WrOpcode::SendWithInv,
            WrOpcode::RdmaReadWithInv,
            WrOpcode::Flush,
            WrOpcode::AtomicWrite,
            WrOpcode::RegMr,
        ];
        ALL.into_iter().find(|&op| op as u32 == v)
    }
}

// The opcodes a process writes are the uapi's.
const _: () = {
    use bindings::*;
    assert!(WrOpcode::RdmaWrite as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE);
    assert!(
        WrOpcode::RdmaWriteWithImm as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_WRITE_WITH_IMM
    );
    assert!(WrOpcode::Send as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND);
    assert!(WrOpcode::SendWithImm as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_IMM);
    assert!(WrOpcode::RdmaRead as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ);
    assert!(
        WrOpcode::AtomicCmpAndSwp as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_CMP_AND_SWP
    );
    assert!(
        WrOpcode::AtomicFetchAndAdd as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD
    );
    assert!(WrOpcode::LocalInv as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_LOCAL_INV);
    assert!(WrOpcode::BindMw as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_BIND_MW);
    assert!(WrOpcode::SendWithInv as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_SEND_WITH_INV);
    assert!(
        WrOpcode::RdmaReadWithInv as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_RDMA_READ_WITH_INV
    );
    assert!(WrOpcode::Flush as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_FLUSH);
    assert!(WrOpcode::AtomicWrite as u32 == ib_uverbs_wr_opcode_IB_UVERBS_WR_ATOMIC_WRITE);
};

kernel::impl_flags!(
    /// Flags of a send work request (`enum ib_send_flags`; a process writes the same
    /// values). Bits the device does not know are kept (a WQE read again must compare
    /// equal) and ignored.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub(crate) struct SendFlags(u32);

    /// One flag of a send work request.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum SendFlag {
        /// Waits for the READs and atomics before it.
        Fence = bindings::ib_send_flags_IB_SEND_FENCE as u32,
        /// Completes with a completion even if the QP signals only when asked.
        Signaled = bindings::ib_send_flags_IB_SEND_SIGNALED as u32,
        /// Asks the peer for a solicited event.
        Solicited = bindings::ib_send_flags_IB_SEND_SOLICITED as u32,
        /// The data is in the work request itself.
        Inline = bindings::ib_send_flags_IB_SEND_INLINE as u32,
    }
);

impl SendFlags {
    /// The flags of value `v`, all bits kept.
    pub(crate) fn from_raw(v: u32) -> Self {
        Self(v)
    }
}

kernel::impl_flags!(
    /// Access rights of a memory region, a memory window or a QP (`enum ib_access_flags`,
    /// which the kernel defines as the uapi's `enum ib_uverbs_access_flags`: a process
    /// passes the same values).
    ///
    /// A value has only bits the kernel defines: it is made by [`AccessFlags::from_raw`],
    /// which refuses the others, or from [`Access`] values, so that what `!` and `&`
    /// compute of it (the macro's `!` keeps the defined bits only) is exact.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub(crate) struct AccessFlags(u32);

    /// One access right.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Access {
        /// The device may write the memory for local operations (receives, READ and
        /// atomic results).
        LocalWrite = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
        /// A peer may write it (RDMA WRITE, ATOMIC WRITE).
        RemoteWrite = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE,
        /// A peer may read it (RDMA READ).
        RemoteRead = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ,
        /// A peer may run atomic operations on it.
        RemoteAtomic = bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC,
        /// Memory windows may be bound to the region.
        MwBind = bindings::ib_access_flags_IB_ACCESS_MW_BIND,
        /// A window addressed from 0.
        ZeroBased = bindings::ib_access_flags_IB_ZERO_BASED,
        /// On-demand paging (user MRs only).
        OnDemand = bindings::ib_access_flags_IB_ACCESS_ON_DEMAND,
        /// The region is in huge pages (a hint for on-demand MRs).
        HugeTlb = bindings::ib_access_flags_IB_ACCESS_HUGETLB,
        /// A peer may FLUSH the memory to global visibility ...
        FlushGlobal = bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL,
        /// ... or to persistence.
        FlushPersistent = bindings::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT,
        /// The range of hints (relaxed ordering and the like) a device may ignore: kept
        /// as given, never acted on. Several bits: for masks, not for `contains`.
        Optional = bindings::ib_access_flags_IB_ACCESS_OPTIONAL,
    }
);

// Every right the kernel defines has its variant: a kernel that adds one fails here.
const _: () = assert!(AccessFlags::all_bits() == bindings::ib_access_flags_IB_ACCESS_SUPPORTED);

impl AccessFlags {
    /// The rights of `raw` as ib_core or a process passes them; `None` if it has a bit
    /// the kernel does not define.
    pub(crate) fn from_raw(raw: u32) -> Option<Self> {
        (raw & !Self::all_bits() == 0).then_some(Self(raw))
    }

    /// The rights of `rights` (for constants).
    pub(crate) const fn of(rights: &[Access]) -> Self {
        let mut bits = 0;
        let mut i = 0;
        while i < rights.len() {
            bits |= rights[i] as u32;
            i += 1;
        }
        Self(bits)
    }

    /// Whether every right set is one of `allowed`.
    pub(crate) fn within(self, allowed: Self) -> bool {
        self.0 & !allowed.0 == 0
    }

    /// Whether the rights let the memory be written (`ib_access_writable()`): a window
    /// bound to it may grant remote writes, so binding counts.
    pub(crate) fn writes(self) -> bool {
        self.contains_any(
            Access::LocalWrite | Access::RemoteWrite | Access::RemoteAtomic | Access::MwBind,
        )
    }

    /// The value as the kernel and user space pass it.
    pub(crate) fn bits(self) -> u32 {
        self.0
    }
}

kernel::impl_flags!(
    /// What a FLUSH makes of the data it names: globally visible, persistent, or both
    /// (`enum ib_placement_type`, which has the bits of the FETH's placement type, IBA
    /// A19.4.1.1).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub(crate) struct FlushPlacement(u32);

    /// One placement type.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Placement {
        /// Visible to every reader.
        Global = bindings::ib_placement_type_IB_FLUSH_GLOBAL,
        /// Persistent.
        Persistent = bindings::ib_placement_type_IB_FLUSH_PERSISTENT,
    }
);

impl FlushPlacement {
    /// The placement of `raw` (a FETH's or a work request's); `None` for none at all or
    /// an unknown bit: no FLUSH.
    pub(crate) fn from_raw(raw: u32) -> Option<Self> {
        (raw != 0 && raw & !Self::all_bits() == 0).then_some(Self(raw))
    }

    /// The access rights a FLUSH of this placement needs of the memory it names.
    pub(crate) fn needs(self) -> AccessFlags {
        let mut need = AccessFlags::empty();
        if self.contains(Placement::Global) {
            need |= Access::FlushGlobal;
        }
        if self.contains(Placement::Persistent) {
            need |= Access::FlushPersistent;
        }
        need
    }
}

/// How much a FLUSH covers (`enum ib_selectivity_level`, the FETH's selectivity level,
/// IBA A19.4.1.2).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushLevel {
    /// The range the RETH names.
    Range = bindings::ib_selectivity_level_IB_FLUSH_RANGE,
    /// The whole memory region the rkey opens.
    Mr = bindings::ib_selectivity_level_IB_FLUSH_MR,
}

impl FlushLevel {
    /// The level of `raw`; `None` for one that does not exist.
    pub(crate) fn from_raw(raw: u32) -> Option<Self> {
        [Self::Range, Self::Mr]
            .into_iter()
            .find(|l| *l as u32 == raw)
    }
}

/// The Q_Key of QP1, the GSI QP (`IB_QP1_QKEY`).
pub(crate) const QP1_QKEY: u32 = bindings::RXE_RS_QP1_QKEY;

/// The mask of a QP number: 24 bits (`IB_QPN_MASK`).
pub(crate) const QPN_MASK: u32 = bindings::RXE_RS_QPN_MASK;

/// The destination QP number of a multicast datagram (`IB_MULTICAST_QPN`).
pub(crate) const MULTICAST_QPN: u32 = bindings::RXE_RS_MULTICAST_QPN;
