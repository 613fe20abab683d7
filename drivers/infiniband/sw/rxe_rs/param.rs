// SPDX-License-Identifier: GPL-2.0

//! Device limits; objects are counted against them with the generic layer's `Quota`.
//!
//! The limits are those rxe advertises, so that programs sizing themselves from
//! `ibv_query_device()` see the same device on both drivers, but for the queue depths:
//! a ring keeps one slot empty (librxe's rule) and has a power of two of them, so the
//! deepest queue that fits `DEFAULT_MAX` slots is one less. Every limit can be created
//! at its value (the queue's KUnit tests check the rings).

/// Default maximum of most object counts and queue depths.
const DEFAULT_MAX: u32 = 1 << 20;

pub(crate) const VENDOR_ID: u32 = 0xff_ffff;
pub(crate) const MAX_MR_SIZE: u64 = u64::MAX;
pub(crate) const PAGE_SIZE_CAP: u64 = 0xffff_f000;
pub(crate) const MAX_QP: u32 = DEFAULT_MAX - 16;
pub(crate) const MAX_QP_WR: u32 = DEFAULT_MAX - 1;
pub(crate) const MAX_SGE: u32 = 32;
pub(crate) const MAX_SGE_RD: u32 = 32;
/// Inline bytes a send WQE may carry: as much as its SGEs would take.
pub(crate) const MAX_INLINE_DATA: u32 = MAX_SGE * 16;
pub(crate) const MAX_CQ: u32 = DEFAULT_MAX;
pub(crate) const MAX_CQE: u32 = (1 << 15) - 1;
pub(crate) const MAX_MR: u32 = (DEFAULT_MAX >> 1) - 1;
pub(crate) const MAX_MW: u32 = DEFAULT_MAX - (DEFAULT_MAX >> 1) - 1;
pub(crate) const MAX_PD: u32 = DEFAULT_MAX;
pub(crate) const MAX_QP_RD_ATOM: u32 = 128;
pub(crate) const MAX_RES_RD_ATOM: u32 = 0x3f000;
pub(crate) const MAX_QP_INIT_RD_ATOM: u32 = 128;
pub(crate) const MAX_MCAST_GRP: u32 = 8192;
pub(crate) const MAX_MCAST_QP_ATTACH: u32 = 56;
pub(crate) const MAX_TOTAL_MCAST_QP_ATTACH: u32 = 0x70000;
pub(crate) const MAX_AH: u32 = (1 << 15) - 1;
pub(crate) const MAX_SRQ: u32 = DEFAULT_MAX - 0x0002_0001;
pub(crate) const MAX_SRQ_WR: u32 = DEFAULT_MAX - 1;
pub(crate) const MAX_SRQ_SGE: u32 = 27;
pub(crate) const MAX_FAST_REG_PAGE_LIST_LEN: u32 = 512;
pub(crate) const MAX_PKEYS: u16 = 64;
pub(crate) const LOCAL_CA_ACK_DELAY: u8 = 15;
pub(crate) const MAX_UCONTEXT: u32 = DEFAULT_MAX;

/// The one port of a device.
pub(crate) const PORT: u32 = 1;
pub(crate) const PORT_GID_TBL_LEN: u32 = 1024;
pub(crate) const PORT_PKEY_TBL_LEN: u16 = 1;
pub(crate) const PORT_MAX_MSG_SZ: u32 = 1 << 31;
pub(crate) const PORT_MAX_VL_NUM: u8 = 1;

/// How many steps (packets built, WQEs ended) one run of a QP's requester or of its
/// READ responder takes before it stops and leaves the rest to the QP's work item. A
/// process feeds the requester and a peer the responder, without end if they like:
/// no system call, bottom half or RCU read-side section may run for as long as they
/// go on (rxe bounds its tasks the same way).
pub(crate) const RUN_BUDGET: u32 = 256;

/// The only P_Key: the default, full membership.
pub(crate) const DEFAULT_PKEY: u16 = 0xffff;

/// Bytes of headers a RoCE v2 packet carries on top of its payload (IP, UDP, BTH and the
/// largest extension headers, ICRC), as rxe counts them.
pub(crate) const MAX_HDR_LENGTH: u32 = 80;
