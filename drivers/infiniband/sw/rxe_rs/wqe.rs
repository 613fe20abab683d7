// SPDX-License-Identifier: GPL-2.0

//! Work queue entries as the device reads them: copied out of a ring, then checked.
//!
//! A process writes its send and receive WQEs in rxe's layouts (`struct rxe_send_wqe`,
//! `struct rxe_recv_wqe`, see `include/uapi/rdma/rdma_user_rxe.h`) and may rewrite them
//! at any time. The device copies a WQE into its own memory once, when it takes it, and
//! from then on uses only the copy; every count and length in it is checked against the
//! QP's limits before use. Nothing is ever written back into a WQE.

use crate::ib::verbs::{SendFlag, SendFlags, WcStatus, WrOpcode};
use crate::ib::wr::RegWr;
pub(crate) use crate::ib::wr::Sge;
use crate::mr::Bind;
use crate::param;
use crate::sw::rxe_abi::{recv, send as at, sge, RECV_WQE_HDR, SEND_WQE_HDR, SGE_LEN};

/// The largest send WQE: header plus the larger of the SGE list and the inline data.
pub(crate) const MAX_SEND_WQE: usize = SEND_WQE_HDR + param::MAX_INLINE_DATA as usize;
/// The largest receive WQE.
pub(crate) const MAX_RECV_WQE: usize = RECV_WQE_HDR + param::MAX_SGE as usize * SGE_LEN;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The `u64` at byte `at` of a copied slot or command.
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32_at(b, at)) | (u64::from(u32_at(b, at + 4)) << 32)
}

/// Writes `bytes` at byte `at` of a slot being built (a WQE or a completion).
pub(crate) fn put_at(b: &mut [u8], at: usize, bytes: &[u8]) {
    b[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Walks the buffers `sges` describe, as one message: calls `f` with the local key and
/// the address of each piece of the `len` bytes from byte `at` of the message on, and
/// the range of those bytes the piece holds. `Err(WcStatus::LocLenErr)` if the buffers end
/// first, `Err(WcStatus::LocProtErr)` if a piece's address would pass 2^64 (an SGE's address
/// is the process's to choose); `f`'s error ends the walk.
pub(crate) fn for_each_piece(
    sges: impl Iterator<Item = Sge>,
    at: usize,
    len: usize,
    mut f: impl FnMut(u32, u64, core::ops::Range<usize>) -> Result<(), WcStatus>,
) -> Result<(), WcStatus> {
    let mut skip = at;
    let mut done = 0;
    for sge in sges {
        if done == len {
            break;
        }
        let room = sge.length as usize;
        if skip >= room {
            skip -= room;
            continue;
        }
        let n = (room - skip).min(len - done);
        let addr = crate::mr::iova_add(sge.addr, skip as u64).map_err(|_| WcStatus::LocProtErr)?;
        f(sge.lkey, addr, done..done + n)?;
        done += n;
        skip = 0;
    }
    if done != len {
        return Err(WcStatus::LocLenErr);
    }
    Ok(())
}

/// A WQE that was refused: more SGEs than the queue allows, inline data beyond its
/// room, or a total length that overflows or passes the largest message
/// (`LocLenErr`), or an opcode the device does not know or inline data on a READ or an
/// atomic (`LocQpOpErr`). It still completes (in error, with `status`), with the
/// `wr_id` its first 8 bytes hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Malformed {
    pub(crate) wr_id: u64,
    pub(crate) status: WcStatus,
}

impl Malformed {
    /// A WQE whose lengths are wrong.
    fn length(wr_id: u64) -> Self {
        Self {
            wr_id,
            status: WcStatus::LocLenErr,
        }
    }
}

/// Whether the operation brings data back into its SGEs (an RDMA READ or an atomic):
/// it can carry no inline data, which is a payload to send.
pub(crate) fn returns_data(opcode: WrOpcode) -> bool {
    matches!(
        opcode,
        WrOpcode::RdmaRead
            | WrOpcode::RdmaReadWithInv
            | WrOpcode::AtomicCmpAndSwp
            | WrOpcode::AtomicFetchAndAdd
    )
}

/// A send WQE, copied and checked: its fields, and the copy it was parsed from (which
/// the caller keeps, so that the WQE's bytes are not moved around with it).
pub(crate) struct SendWqe<'a> {
    pub(crate) wr_id: u64,
    pub(crate) opcode: WrOpcode,
    pub(crate) flags: SendFlags,
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
    bytes: &'a [u8; MAX_SEND_WQE],
}

impl<'a> SendWqe<'a> {
    /// Parses a copied send WQE of a queue with room for `max_sge` SGEs and
    /// `max_inline` bytes of inline data.
    pub(crate) fn parse(
        bytes: &'a [u8; MAX_SEND_WQE],
        max_sge: u32,
        max_inline: u32,
    ) -> Result<Self, Malformed> {
        let b = bytes;
        let wr_id = u64_at(b, at::WR_ID);
        let flags = SendFlags::from_raw(u32_at(b, at::FLAGS));
        let opcode = WrOpcode::from_raw(u32_at(b, at::OPCODE));
        let dma_length = u32_at(b, at::DMA_LENGTH);
        let num_sge = u32_at(b, at::DMA_NUM_SGE);
        let no_sges = matches!(opcode, Some(WrOpcode::Flush | WrOpcode::AtomicWrite));
        if opcode.is_some_and(returns_data) && flags.contains(SendFlag::Inline) {
            // librxe wrote the inline data where the SGEs would be.
            return Err(Malformed {
                wr_id,
                status: WcStatus::LocQpOpErr,
            });
        }
        let length = if opcode == Some(WrOpcode::Flush) {
            // No data: the length is that of the range to flush.
            dma_length
        } else if opcode == Some(WrOpcode::AtomicWrite) {
            // Its 8 bytes are in the WQE.
            8
        } else if flags.contains(SendFlag::Inline) {
            if dma_length > max_inline || dma_length as usize > MAX_SEND_WQE - SEND_WQE_HDR {
                return Err(Malformed::length(wr_id));
            }
            dma_length
        } else {
            if num_sge > max_sge || num_sge > param::MAX_SGE {
                return Err(Malformed::length(wr_id));
            }
            // The length is the SGEs' sum, whatever the WQE says it is.
            let mut total = 0u32;
            for i in 0..num_sge as usize {
                let len = u32_at(b, SEND_WQE_HDR + i * SGE_LEN + sge::LENGTH);
                total = total.checked_add(len).ok_or(Malformed::length(wr_id))?;
            }
            total
        };
        if length > param::PORT_MAX_MSG_SZ {
            return Err(Malformed::length(wr_id));
        }
        // Its lengths checked first, as the kind of operation they are for: an unknown
        // opcode takes them as a SEND's.
        let opcode = opcode.ok_or(Malformed {
            wr_id,
            status: WcStatus::LocQpOpErr,
        })?;
        let mut ex = [0u8; 4];
        ex.copy_from_slice(&b[at::EX..at::EX + 4]);
        Ok(Self {
            wr_id,
            opcode,
            flags,
            ex,
            remote_addr: u64_at(b, at::REMOTE_ADDR),
            rkey: u32_at(b, at::RKEY),
            compare_add: u64_at(b, at::COMPARE_ADD),
            swap: u64_at(b, at::SWAP),
            atomic_rkey: u32_at(b, at::ATOMIC_RKEY),
            remote_qpn: u32_at(b, at::REMOTE_QPN),
            remote_qkey: u32_at(b, at::REMOTE_QKEY),
            ah_num: u32_at(b, at::AH_NUM),
            length,
            num_sge: if no_sges || flags.contains(SendFlag::Inline) {
                0
            } else {
                num_sge as usize
            },
            bytes,
        })
    }

    /// The rkey a SEND with invalidate or a LOCAL_INV names.
    pub(crate) fn invalidate_rkey(&self) -> u32 {
        u32::from_ne_bytes(self.ex)
    }

    /// What a BIND_MW asks.
    pub(crate) fn bind(&self) -> Bind {
        let b = self.bytes;
        Bind {
            addr: u64_at(b, at::MW_ADDR),
            length: u64_at(b, at::MW_LENGTH),
            mr_lkey: u32_at(b, at::MW_MR_LKEY),
            mw_rkey: u32_at(b, at::MW_RKEY),
            rkey: u32_at(b, at::MW_NEW_RKEY),
            access: u32_at(b, at::MW_ACCESS),
        }
    }

    /// What a REG_MR asks.
    pub(crate) fn reg(&self) -> RegWr {
        let b = self.bytes;
        RegWr {
            lkey: u32_at(b, at::REG_LKEY),
            key: u32_at(b, at::REG_KEY),
            access: u32_at(b, at::REG_ACCESS),
            iova: u64_at(b, at::REG_IOVA),
        }
    }

    /// What a FLUSH asks: the rkey, the placement type and the selectivity level.
    pub(crate) fn flush(&self) -> (u32, u8, u8) {
        let b = self.bytes;
        (
            u32_at(b, at::FLUSH_RKEY),
            b[at::FLUSH_TYPE],
            b[at::FLUSH_LEVEL],
        )
    }

    /// The 8 bytes of an ATOMIC WRITE.
    pub(crate) fn atomic_write_data(&self) -> [u8; 8] {
        let mut d = [0u8; 8];
        d.copy_from_slice(&self.bytes[at::ATOMIC_WRITE_DATA..at::ATOMIC_WRITE_DATA + 8]);
        d
    }

    /// Whether the data is in the WQE itself.
    pub(crate) fn is_inline(&self) -> bool {
        self.flags.contains(SendFlag::Inline)
            && !matches!(self.opcode, WrOpcode::Flush | WrOpcode::AtomicWrite)
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
        (0..self.num_sge).map(|i| sge_at(self.bytes, SEND_WQE_HDR + i * SGE_LEN))
    }
}

fn sge_at(b: &[u8], at: usize) -> Sge {
    Sge {
        addr: u64_at(b, at + sge::ADDR),
        length: u32_at(b, at + sge::LENGTH),
        lkey: u32_at(b, at + sge::LKEY),
    }
}

/// Writes `s` at byte `at` of a WQE being built, as [`sge_at`] reads it.
pub(crate) fn put_sge(b: &mut [u8], at: usize, s: &Sge) {
    put_at(b, at + sge::ADDR, &s.addr.to_ne_bytes());
    put_at(b, at + sge::LENGTH, &s.length.to_ne_bytes());
    put_at(b, at + sge::LKEY, &s.lkey.to_ne_bytes());
}

/// A receive WQE, copied and checked.
pub(crate) struct RecvWqe {
    pub(crate) wr_id: u64,
    num_sge: usize,
    bytes: [u8; MAX_RECV_WQE],
}

impl RecvWqe {
    /// Parses a copied receive WQE of a queue with room for `max_sge` SGEs.
    pub(crate) fn parse(bytes: [u8; MAX_RECV_WQE], max_sge: u32) -> Result<Self, Malformed> {
        let wr_id = u64_at(&bytes, recv::WR_ID);
        let num_sge = u32_at(&bytes, recv::DMA_NUM_SGE);
        if num_sge > max_sge || num_sge > param::MAX_SGE {
            return Err(Malformed::length(wr_id));
        }
        Ok(Self {
            wr_id,
            num_sge: num_sge as usize,
            bytes,
        })
    }

    /// A WQE with no buffers that completes `m` in error.
    pub(crate) fn malformed(m: Malformed) -> Self {
        Self {
            wr_id: m.wr_id,
            num_sge: 0,
            bytes: [0; MAX_RECV_WQE],
        }
    }

    /// The SGEs.
    pub(crate) fn sges(&self) -> impl Iterator<Item = Sge> + '_ {
        (0..self.num_sge).map(|i| sge_at(&self.bytes, RECV_WQE_HDR + i * SGE_LEN))
    }

    /// The room the SGEs offer, or `None` if their sum overflows.
    pub(crate) fn room(&self) -> Option<u32> {
        self.sges()
            .try_fold(0u32, |acc, s| acc.checked_add(s.length))
    }
}
