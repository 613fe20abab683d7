// SPDX-License-Identifier: GPL-2.0

//! Work queue entries as the device reads them: copied out of a ring, then checked.
//!
//! A process writes its send and receive WQEs in rxe's layouts (`struct rxe_send_wqe`,
//! `struct rxe_recv_wqe`, see `include/uapi/rdma/rdma_user_rxe.h`) and may rewrite them
//! at any time. The device copies a WQE into its own memory once, when it takes it, and
//! from then on uses only the copy; every count and length in it is checked against the
//! QP's limits before use. Nothing is ever written back into a WQE.

use crate::param;
use crate::srq::{RECV_WQE_HDR, SGE_LEN};

/// Bytes of a send WQE before its SGEs or inline data.
pub(crate) const SEND_WQE_HDR: usize = 208;
/// The largest send WQE: header plus the larger of the SGE list and the inline data.
pub(crate) const MAX_SEND_WQE: usize = SEND_WQE_HDR + param::MAX_INLINE_DATA as usize;
/// The largest receive WQE.
pub(crate) const MAX_RECV_WQE: usize = RECV_WQE_HDR + (param::MAX_SGE * SGE_LEN) as usize;

/// Send opcodes (`IB_WR_*`, the same values as `IBV_WR_*`).
pub(crate) mod op {
    pub(crate) const RDMA_WRITE: u32 = 0;
    pub(crate) const RDMA_WRITE_WITH_IMM: u32 = 1;
    pub(crate) const SEND: u32 = 2;
    pub(crate) const SEND_WITH_IMM: u32 = 3;
    pub(crate) const RDMA_READ: u32 = 4;
    pub(crate) const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub(crate) const ATOMIC_FETCH_AND_ADD: u32 = 6;
}

/// Send flags (`IB_SEND_*`).
pub(crate) mod send_flag {
    pub(crate) const FENCE: u32 = 1 << 0;
    pub(crate) const SIGNALED: u32 = 1 << 1;
    pub(crate) const SOLICITED: u32 = 1 << 2;
    pub(crate) const INLINE: u32 = 1 << 3;
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32_at(b, at)) | (u64::from(u32_at(b, at + 4)) << 32)
}

/// One scatter/gather element.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

/// Why a WQE was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WqeError {
    /// More SGEs than the queue allows, inline data beyond its room, or a total length
    /// that overflows.
    Length,
}

/// A send WQE, copied and checked.
pub(crate) struct SendWqe {
    pub(crate) wr_id: u64,
    pub(crate) opcode: u32,
    pub(crate) flags: u32,
    /// Immediate data as the consumer wrote it (sent as is), or an rkey to invalidate.
    pub(crate) ex: [u8; 4],
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    /// Atomics: the operands and the rkey (the atomic layout has it after them).
    pub(crate) compare_add: u64,
    pub(crate) swap: u64,
    pub(crate) atomic_rkey: u32,
    /// UD: destination QP, its Q_Key and the address handle's number.
    pub(crate) remote_qpn: u32,
    pub(crate) remote_qkey: u32,
    pub(crate) ah_num: u32,
    /// The message's length.
    pub(crate) length: u32,
    num_sge: usize,
    /// The WQE's bytes (header, then SGEs or inline data).
    bytes: [u8; MAX_SEND_WQE],
}

impl SendWqe {
    /// Parses a copied send WQE of a queue with room for `max_sge` SGEs and
    /// `max_inline` bytes of inline data.
    pub(crate) fn parse(
        bytes: [u8; MAX_SEND_WQE],
        max_sge: u32,
        max_inline: u32,
    ) -> Result<Self, WqeError> {
        let b = &bytes;
        let flags = u32_at(b, 16);
        let dma_length = u32_at(b, 184);
        let num_sge = u32_at(b, 184 + 12);
        let length = if flags & send_flag::INLINE != 0 {
            if dma_length > max_inline || dma_length as usize > MAX_SEND_WQE - SEND_WQE_HDR {
                return Err(WqeError::Length);
            }
            dma_length
        } else {
            if num_sge > max_sge || num_sge > param::MAX_SGE {
                return Err(WqeError::Length);
            }
            // The length is the SGEs' sum, whatever the WQE says it is.
            let mut total = 0u32;
            for i in 0..num_sge as usize {
                let len = u32_at(b, SEND_WQE_HDR + i * SGE_LEN as usize + 8);
                total = total.checked_add(len).ok_or(WqeError::Length)?;
            }
            total
        };
        if length > param::PORT_MAX_MSG_SZ {
            return Err(WqeError::Length);
        }
        let mut ex = [0u8; 4];
        ex.copy_from_slice(&b[20..24]);
        Ok(Self {
            wr_id: u64_at(b, 0),
            opcode: u32_at(b, 12),
            flags,
            ex,
            remote_addr: u64_at(b, 24),
            rkey: u32_at(b, 32),
            compare_add: u64_at(b, 32),
            swap: u64_at(b, 40),
            atomic_rkey: u32_at(b, 48),
            remote_qpn: u32_at(b, 24),
            remote_qkey: u32_at(b, 28),
            ah_num: u32_at(b, 36),
            length,
            num_sge: if flags & send_flag::INLINE != 0 {
                0
            } else {
                num_sge as usize
            },
            bytes,
        })
    }

    /// Whether the data is in the WQE itself.
    pub(crate) fn is_inline(&self) -> bool {
        self.flags & send_flag::INLINE != 0
    }

    /// The inline data.
    pub(crate) fn inline_data(&self) -> &[u8] {
        let n = if self.is_inline() {
            self.length as usize
        } else {
            0
        };
        &self.bytes[SEND_WQE_HDR..SEND_WQE_HDR + n]
    }

    /// The SGEs.
    pub(crate) fn sges(&self) -> impl Iterator<Item = Sge> + '_ {
        (0..self.num_sge).map(|i| sge_at(&self.bytes, SEND_WQE_HDR + i * SGE_LEN as usize))
    }
}

fn sge_at(b: &[u8], at: usize) -> Sge {
    Sge {
        addr: u64_at(b, at),
        length: u32_at(b, at + 8),
        lkey: u32_at(b, at + 12),
    }
}

/// A receive WQE, copied and checked.
pub(crate) struct RecvWqe {
    pub(crate) wr_id: u64,
    num_sge: usize,
    bytes: [u8; MAX_RECV_WQE],
}

impl RecvWqe {
    /// Parses a copied receive WQE of a queue with room for `max_sge` SGEs.
    pub(crate) fn parse(bytes: [u8; MAX_RECV_WQE], max_sge: u32) -> Result<Self, WqeError> {
        let num_sge = u32_at(&bytes, 16 + 12);
        if num_sge > max_sge || num_sge > param::MAX_SGE {
            return Err(WqeError::Length);
        }
        Ok(Self {
            wr_id: u64_at(&bytes, 0),
            num_sge: num_sge as usize,
            bytes,
        })
    }

    /// The SGEs.
    pub(crate) fn sges(&self) -> impl Iterator<Item = Sge> + '_ {
        (0..self.num_sge).map(|i| sge_at(&self.bytes, RECV_WQE_HDR + i * SGE_LEN as usize))
    }

    /// The room the SGEs offer, or `None` if their sum overflows.
    pub(crate) fn room(&self) -> Option<u32> {
        self.sges()
            .try_fold(0u32, |acc, s| acc.checked_add(s.length))
    }
}
