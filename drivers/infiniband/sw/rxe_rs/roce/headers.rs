// SPDX-License-Identifier: GPL-2.0

//! The transport headers' fields, read from and written to big-endian wire bytes.

/// Reads a big-endian `u32` at `off` (the caller has checked the length).
fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// Reads a big-endian `u64` at `off` (the caller has checked the length).
fn be64(b: &[u8], off: usize) -> u64 {
    (u64::from(be32(b, off)) << 32) | u64::from(be32(b, off + 4))
}

/// The base transport header (12 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bth {
    /// The operation (see [`super::opcode`]).
    pub opcode: u8,
    /// Solicited event.
    pub se: bool,
    /// Migration state.
    pub mig: bool,
    /// Pad bytes after the payload (0 to 3).
    pub pad: u8,
    /// Transport header version (0).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward congestion notification (not covered by the ICRC).
    pub fecn: bool,
    /// Backward congestion notification (not covered by the ICRC).
    pub becn: bool,
    /// Destination QP number (24 bits).
    pub dest_qp: u32,
    /// The requester asks for an acknowledgement.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Bth {
    /// Reads a BTH from its 12 wire bytes.
    pub fn read(b: &[u8; 12]) -> Self {
        Self {
            opcode: b[0],
            se: b[1] & 0x80 != 0,
            mig: b[1] & 0x40 != 0,
            pad: (b[1] >> 4) & 3,
            tver: b[1] & 0x0f,
            pkey: u16::from_be_bytes([b[2], b[3]]),
            fecn: b[4] & 0x80 != 0,
            becn: b[4] & 0x40 != 0,
            dest_qp: be32(b, 4) & 0x00ff_ffff,
            ack_req: b[8] & 0x80 != 0,
            psn: be32(b, 8) & 0x00ff_ffff,
        }
    }

    /// The header's 12 wire bytes (reserved bits zero).
    pub fn to_bytes(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        b[0] = self.opcode;
        b[1] = (u8::from(self.se) << 7)
            | (u8::from(self.mig) << 6)
            | ((self.pad & 3) << 4)
            | (self.tver & 0x0f);
        b[2..4].copy_from_slice(&self.pkey.to_be_bytes());
        b[4..8].copy_from_slice(&(self.dest_qp & 0x00ff_ffff).to_be_bytes());
        b[4] = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6);
        b[8..12].copy_from_slice(&(self.psn & 0x00ff_ffff).to_be_bytes());
        b[8] = u8::from(self.ack_req) << 7;
        b
    }
}

/// The RDMA extended transport header (16 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole operation in bytes.
    pub len: u32,
}

impl Reth {
    /// Reads the header from its 16 wire bytes.
    pub fn read(b: &[u8; 16]) -> Self {
        Self {
            va: be64(b, 0),
            rkey: be32(b, 8),
            len: be32(b, 12),
        }
    }

    /// The header's 16 wire bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&self.va.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..16].copy_from_slice(&self.len.to_be_bytes());
        b
    }
}

/// The ACK extended transport header (4 bytes): a syndrome and a message sequence
/// number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Aeth {
    /// ACK, RNR NAK or NAK, with credits, timer or reason (see [`syndrome`]).
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Aeth {
    /// Reads the header from its 4 wire bytes.
    pub fn read(b: &[u8; 4]) -> Self {
        Self {
            syndrome: b[0],
            msn: be32(b, 0) & 0x00ff_ffff,
        }
    }

    /// The header's 4 wire bytes.
    pub fn to_bytes(&self) -> [u8; 4] {
        let mut b = (self.msn & 0x00ff_ffff).to_be_bytes();
        b[0] = self.syndrome;
        b
    }
}

/// The datagram extended transport header (8 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP number (24 bits).
    pub src_qp: u32,
}

impl Deth {
    /// Reads the header from its 8 wire bytes.
    pub fn read(b: &[u8; 8]) -> Self {
        Self {
            qkey: be32(b, 0),
            src_qp: be32(b, 4) & 0x00ff_ffff,
        }
    }

    /// The header's 8 wire bytes.
    pub fn to_bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0..4].copy_from_slice(&self.qkey.to_be_bytes());
        b[4..8].copy_from_slice(&(self.src_qp & 0x00ff_ffff).to_be_bytes());
        b
    }
}

/// The atomic extended transport header (28 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtomicEth {
    /// Remote virtual address of the 8-byte operand.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// The value to swap in (compare-and-swap) or to add (fetch-and-add).
    pub swap_add: u64,
    /// The value to compare with (compare-and-swap).
    pub compare: u64,
}

impl AtomicEth {
    /// Reads the header from its 28 wire bytes.
    pub fn read(b: &[u8; 28]) -> Self {
        Self {
            va: be64(b, 0),
            rkey: be32(b, 8),
            swap_add: be64(b, 12),
            compare: be64(b, 20),
        }
    }

    /// The header's 28 wire bytes.
    pub fn to_bytes(&self) -> [u8; 28] {
        let mut b = [0u8; 28];
        b[0..8].copy_from_slice(&self.va.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..20].copy_from_slice(&self.swap_add.to_be_bytes());
        b[20..28].copy_from_slice(&self.compare.to_be_bytes());
        b
    }
}

/// The flush extended transport header (4 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Feth {
    /// Selectivity level (2 bits).
    pub selectivity: u8,
    /// Placement type (4 bits).
    pub placement: u8,
}

impl Feth {
    /// Reads the header from its 4 wire bytes.
    pub fn read(b: &[u8; 4]) -> Self {
        Self {
            selectivity: (b[3] >> 4) & 3,
            placement: b[3] & 0x0f,
        }
    }

    /// The header's 4 wire bytes.
    pub fn to_bytes(&self) -> [u8; 4] {
        [
            0,
            0,
            0,
            ((self.selectivity & 3) << 4) | (self.placement & 0x0f),
        ]
    }
}

/// AETH syndromes.
pub mod syndrome {
    /// An ACK; the low five bits are credits (rxe sends "not limited", 0x1f).
    pub const ACK: u8 = 0x00;
    /// A receiver-not-ready NAK; the low five bits encode the RNR timer.
    pub const RNR_NAK: u8 = 0x20;
    /// NAK: PSN sequence error.
    pub const NAK_PSN_SEQ: u8 = 0x60;
    /// NAK: invalid request.
    pub const NAK_INVALID_REQUEST: u8 = 0x61;
    /// NAK: remote access error.
    pub const NAK_REMOTE_ACCESS: u8 = 0x62;
    /// NAK: remote operational error.
    pub const NAK_REMOTE_OP: u8 = 0x63;
    /// The bits that tell the kind of syndrome.
    pub const TYPE_MASK: u8 = 0x60;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bth_round_trip_and_layout() {
        let h = Bth {
            opcode: 0x0a,
            se: true,
            mig: false,
            pad: 3,
            tver: 0,
            pkey: 0xffff,
            fecn: false,
            becn: true,
            dest_qp: 0x12_3456,
            ack_req: true,
            psn: 0xab_cdef,
        };
        let b = h.to_bytes();
        assert_eq!(
            b,
            [0x0a, 0xb0, 0xff, 0xff, 0x40, 0x12, 0x34, 0x56, 0x80, 0xab, 0xcd, 0xef]
        );
        assert_eq!(Bth::read(&b), h);
    }

    #[test]
    fn ext_round_trips() {
        let r = Reth {
            va: 0x0000_7f00_0000_1000,
            rkey: 0x203,
            len: 8,
        };
        assert_eq!(r.to_bytes()[..8], [0, 0, 0x7f, 0, 0, 0, 0x10, 0]);
        assert_eq!(Reth::read(&r.to_bytes()), r);
        let a = Aeth {
            syndrome: syndrome::RNR_NAK | 0x0e,
            msn: 0x01_0203,
        };
        assert_eq!(a.to_bytes(), [0x2e, 1, 2, 3]);
        assert_eq!(Aeth::read(&a.to_bytes()), a);
        let d = Deth {
            qkey: 0x8001_0000,
            src_qp: 1,
        };
        assert_eq!(Deth::read(&d.to_bytes()), d);
        let x = AtomicEth {
            va: 1,
            rkey: 2,
            swap_add: 3,
            compare: 4,
        };
        assert_eq!(AtomicEth::read(&x.to_bytes()), x);
        let f = Feth {
            selectivity: 1,
            placement: 2,
        };
        assert_eq!(Feth::read(&f.to_bytes()), f);
    }
}
