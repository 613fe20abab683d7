// SPDX-License-Identifier: GPL-2.0

//! A received RoCE v2 packet (a UDP payload), checked before anything is read from it.
//!
//! [`Packet::parse`] accepts a packet only if its opcode is one this device speaks, its
//! transport version is 0, it is long enough for the headers the opcode calls for plus
//! the ICRC, and a payload and its pad are where the opcode allows them. The ICRC itself
//! needs the IP and UDP headers: see [`crate::icrc`].

use super::headers::{Aeth, AtomicEth, Bth, Deth, Feth, Reth};
use super::opcode::{self, flag, OpInfo, BTH_LEN};

/// Bytes of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// Why a packet was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than its headers and ICRC.
    TooShort,
    /// An opcode this device does not speak.
    UnknownOpcode,
    /// A transport header version other than 0.
    BadVersion,
    /// A payload (or pad) on an opcode that carries none.
    UnexpectedPayload,
    /// More pad bytes than payload bytes.
    BadPad,
}

/// A parsed packet, borrowing the received bytes.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    /// The base transport header.
    pub bth: Bth,
    /// What the opcode is.
    pub info: OpInfo,
    bytes: &'a [u8],
    hdr_len: usize,
}

impl<'a> Packet<'a> {
    /// Checks `bytes` (a UDP payload: BTH to ICRC) and parses its BTH.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ParseError> {
        let bth: &[u8; BTH_LEN] = bytes
            .get(..BTH_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(ParseError::TooShort)?;
        let bth = Bth::read(bth);
        let info = opcode::info(bth.opcode).ok_or(ParseError::UnknownOpcode)?;
        if bth.tver != 0 {
            return Err(ParseError::BadVersion);
        }
        let hdr_len = opcode::header_len(info.flags);
        let room = bytes
            .len()
            .checked_sub(hdr_len + ICRC_LEN)
            .ok_or(ParseError::TooShort)?;
        if info.flags & flag::PAYLOAD == 0 && (room != 0 || bth.pad != 0) {
            return Err(ParseError::UnexpectedPayload);
        }
        if usize::from(bth.pad) > room {
            return Err(ParseError::BadPad);
        }
        Ok(Self {
            bth,
            info,
            bytes,
            hdr_len,
        })
    }

    /// The `N` bytes of the extension header `which`, if the opcode has it.
    fn ext<const N: usize>(&self, which: u32) -> Option<&'a [u8; N]> {
        let off = opcode::header_offset(self.info.flags, which)?;
        self.bytes.get(off..off + N)?.try_into().ok()
    }

    /// The RDMA extended transport header, if the opcode has one.
    pub fn reth(&self) -> Option<Reth> {
        self.ext(flag::RETH).map(Reth::read)
    }

    /// The ACK extended transport header, if the opcode has one.
    pub fn aeth(&self) -> Option<Aeth> {
        self.ext(flag::AETH).map(Aeth::read)
    }

    /// The datagram extended transport header, if the opcode has one.
    pub fn deth(&self) -> Option<Deth> {
        self.ext(flag::DETH).map(Deth::read)
    }

    /// The atomic extended transport header, if the opcode has one.
    pub fn atomic_eth(&self) -> Option<AtomicEth> {
        self.ext(flag::ATOMIC_ETH).map(AtomicEth::read)
    }

    /// The flush extended transport header, if the opcode has one.
    pub fn feth(&self) -> Option<Feth> {
        self.ext(flag::FETH).map(Feth::read)
    }

    /// The original remote data of an atomic acknowledgement.
    pub fn atomic_ack(&self) -> Option<u64> {
        self.ext(flag::ATOMIC_ACK_ETH)
            .map(|b| u64::from_be_bytes(*b))
    }

    /// Immediate data, as the wire carries it (passed through to the consumer as is).
    pub fn imm(&self) -> Option<[u8; 4]> {
        self.ext(flag::IMMDT).copied()
    }

    /// The rkey to invalidate.
    pub fn ieth(&self) -> Option<u32> {
        self.ext(flag::IETH).map(|b| u32::from_be_bytes(*b))
    }

    /// The payload, without its pad.
    pub fn payload(&self) -> &'a [u8] {
        let end = self.bytes.len() - ICRC_LEN - usize::from(self.bth.pad);
        &self.bytes[self.hdr_len..end]
    }

    /// Everything the ICRC covers of the UDP payload: headers, payload and pad.
    pub fn covered(&self) -> &'a [u8] {
        &self.bytes[..self.bytes.len() - ICRC_LEN]
    }

    /// The ICRC as received.
    pub fn icrc(&self) -> [u8; 4] {
        let n = self.bytes.len();
        [
            self.bytes[n - 4],
            self.bytes[n - 3],
            self.bytes[n - 2],
            self.bytes[n - 1],
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::headers::Bth;
    use super::*;

    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// An RDMA WRITE ONLY with immediate data and a 5-byte payload padded to 8.
    fn write_imm() -> ([u8; 64], usize) {
        let mut b = [0u8; 64];
        let bth = Bth {
            opcode: 0x0b,
            pad: 3,
            pkey: 0xffff,
            dest_qp: 0x11,
            ack_req: true,
            psn: 7,
            ..Default::default()
        };
        b[..12].copy_from_slice(&bth.to_bytes());
        let reth = Reth {
            va: 0x1000,
            rkey: 0x203,
            len: 5,
        };
        b[12..28].copy_from_slice(&reth.to_bytes());
        b[28..32].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        b[32..37].copy_from_slice(b"hello");
        // Pad 37..40, ICRC 40..44.
        b[40..44].copy_from_slice(&[1, 2, 3, 4]);
        (b, 44)
    }

    #[test]
    fn parses_a_write_with_immediate() {
        let (b, n) = write_imm();
        let p = Packet::parse(&b[..n]).unwrap();
        assert_eq!(p.bth.psn, 7);
        assert_eq!(p.reth().unwrap().rkey, 0x203);
        assert_eq!(p.imm(), Some([0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(p.payload(), b"hello");
        assert_eq!(p.icrc(), [1, 2, 3, 4]);
        assert_eq!(p.covered().len(), 40);
        assert_eq!(p.aeth(), None);
        assert_eq!(p.deth(), None);
    }

    #[test]
    fn refusals() {
        let (b, n) = write_imm();
        assert_eq!(Packet::parse(&b[..11]).unwrap_err(), ParseError::TooShort);
        assert_eq!(Packet::parse(&b[..31]).unwrap_err(), ParseError::TooShort);
        let mut c = b;
        c[0] = 0x4b; // RD
        assert_eq!(
            Packet::parse(&c[..n]).unwrap_err(),
            ParseError::UnknownOpcode
        );
        let mut c = b;
        c[1] |= 1; // tver 1
        assert_eq!(Packet::parse(&c[..n]).unwrap_err(), ParseError::BadVersion);
        // Pad longer than the payload.
        assert_eq!(Packet::parse(&b[..38]).unwrap_err(), ParseError::BadPad);
        // A READ request with a payload.
        let mut c = [0u8; 40];
        c[..12].copy_from_slice(
            &Bth {
                opcode: 0x0c,
                ..Default::default()
            }
            .to_bytes(),
        );
        assert!(Packet::parse(&c[..32]).is_ok());
        assert_eq!(
            Packet::parse(&c[..33]).unwrap_err(),
            ParseError::UnexpectedPayload
        );
    }

    /// Random bytes and random corruptions of a valid packet never panic, and whatever
    /// parses stays inside the bytes it was given.
    #[test]
    fn hostile_input() {
        let mut s = 0x9e37_79b9_7f4a_7c15;
        let (valid, n) = write_imm();
        let mut buf = [0u8; 96];
        for round in 0..300_000 {
            let len = (xorshift(&mut s) % 97) as usize;
            if round % 2 == 0 {
                for x in buf.iter_mut() {
                    *x = xorshift(&mut s) as u8;
                }
                // Often a known opcode and version 0, to get past the first checks.
                if round % 4 == 0 {
                    buf[0] = (xorshift(&mut s) % 0x20) as u8 | [0, 0x20, 0x60][round % 3];
                    buf[1] &= 0xf0;
                }
            } else {
                buf[..n].copy_from_slice(&valid[..n]);
                let at = (xorshift(&mut s) % n as u64) as usize;
                buf[at] = xorshift(&mut s) as u8;
            }
            let len = if round % 2 == 0 { len } else { n - (len % 8) };
            if let Ok(p) = Packet::parse(&buf[..len]) {
                let _ = (p.reth(), p.aeth(), p.deth(), p.atomic_eth(), p.feth());
                let _ = (p.atomic_ack(), p.imm(), p.ieth(), p.icrc());
                assert!(p.payload().len() + p.covered().len() <= 2 * len);
                assert!(p.covered().len() + ICRC_LEN == len);
            }
        }
    }
}
