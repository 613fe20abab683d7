// SPDX-License-Identifier: GPL-2.0

//! Base transport opcodes: what each one is and which headers follow its BTH.
//!
//! The top three bits of an opcode name the transport (RC `0x00`, UC `0x20`, RD `0x40`,
//! UD `0x60`), the low five the operation. RD is not offered; nor are opcodes the
//! transport does not define. Headers follow the BTH in a fixed order (FETH, DETH, RETH,
//! AtomicETH, AETH, AtomicAckETH, ImmDt, IETH), each present as the opcode says.

/// The transport an opcode belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

/// Extension headers and properties of an opcode, as bits.
pub mod flag {
    /// RDMA extended transport header (16 bytes).
    pub const RETH: u32 = 1 << 0;
    /// ACK extended transport header (4 bytes).
    pub const AETH: u32 = 1 << 1;
    /// Atomic extended transport header (28 bytes).
    pub const ATOMIC_ETH: u32 = 1 << 2;
    /// Atomic acknowledge extended transport header (8 bytes).
    pub const ATOMIC_ACK_ETH: u32 = 1 << 3;
    /// Datagram extended transport header (8 bytes).
    pub const DETH: u32 = 1 << 4;
    /// Immediate data (4 bytes).
    pub const IMMDT: u32 = 1 << 5;
    /// Invalidate extended transport header (4 bytes).
    pub const IETH: u32 = 1 << 6;
    /// Flush extended transport header (4 bytes).
    pub const FETH: u32 = 1 << 7;
    /// The packet may carry a payload.
    pub const PAYLOAD: u32 = 1 << 8;
    /// A request (sent by a requester), as opposed to a response.
    pub const REQUEST: u32 = 1 << 9;
    /// The first packet of a message.
    pub const FIRST: u32 = 1 << 10;
    /// A packet between the first and the last of a message.
    pub const MIDDLE: u32 = 1 << 11;
    /// The last packet of a message.
    pub const LAST: u32 = 1 << 12;
    /// A SEND.
    pub const SEND: u32 = 1 << 13;
    /// An RDMA WRITE.
    pub const WRITE: u32 = 1 << 14;
    /// An RDMA READ request or response.
    pub const READ: u32 = 1 << 15;
    /// An atomic operation or its acknowledgement.
    pub const ATOMIC: u32 = 1 << 16;
    /// A FLUSH request.
    pub const FLUSH: u32 = 1 << 17;
    /// An ATOMIC WRITE request.
    pub const ATOMIC_WRITE: u32 = 1 << 18;
    /// An acknowledgement (ACK/NAK, or the AETH of a response).
    pub const ACK: u32 = 1 << 19;
}

use flag::*;

/// An opcode's transport and flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// The transport it belongs to.
    pub transport: Transport,
    /// `flag::*` bits.
    pub flags: u32,
}

const ONLY: u32 = FIRST | LAST;

/// Flags of the operations RC, UC and UD share (the low five opcode bits), where the
/// transport defines them.
fn op_flags(op: u8) -> Option<u32> {
    Some(match op {
        0x00 => REQUEST | SEND | PAYLOAD | FIRST,
        0x01 => REQUEST | SEND | PAYLOAD | MIDDLE,
        0x02 => REQUEST | SEND | PAYLOAD | LAST,
        0x03 => REQUEST | SEND | PAYLOAD | LAST | IMMDT,
        0x04 => REQUEST | SEND | PAYLOAD | ONLY,
        0x05 => REQUEST | SEND | PAYLOAD | ONLY | IMMDT,
        0x06 => REQUEST | WRITE | PAYLOAD | FIRST | RETH,
        0x07 => REQUEST | WRITE | PAYLOAD | MIDDLE,
        0x08 => REQUEST | WRITE | PAYLOAD | LAST,
        0x09 => REQUEST | WRITE | PAYLOAD | LAST | IMMDT,
        0x0a => REQUEST | WRITE | PAYLOAD | ONLY | RETH,
        0x0b => REQUEST | WRITE | PAYLOAD | ONLY | RETH | IMMDT,
        0x0c => REQUEST | READ | ONLY | RETH,
        0x0d => READ | PAYLOAD | FIRST | AETH | ACK,
        0x0e => READ | PAYLOAD | MIDDLE,
        0x0f => READ | PAYLOAD | LAST | AETH | ACK,
        0x10 => READ | PAYLOAD | ONLY | AETH | ACK,
        0x11 => ONLY | AETH | ACK,
        0x12 => ATOMIC | ONLY | AETH | ATOMIC_ACK_ETH | ACK,
        0x13 | 0x14 => REQUEST | ATOMIC | ONLY | ATOMIC_ETH,
        0x16 => REQUEST | SEND | PAYLOAD | LAST | IETH,
        0x17 => REQUEST | SEND | PAYLOAD | ONLY | IETH,
        0x1c => REQUEST | FLUSH | ONLY | FETH | RETH,
        0x1d => REQUEST | ATOMIC_WRITE | PAYLOAD | ONLY | RETH,
        _ => return None,
    })
}

/// What `opcode` is, or `None` for one this device does not speak.
pub fn info(opcode: u8) -> Option<OpInfo> {
    let op = opcode & 0x1f;
    let (transport, flags) = match opcode >> 5 {
        0 => (Transport::Rc, op_flags(op)?),
        // UC: SENDs and WRITEs, nothing acknowledged.
        1 if op <= 0x0b && op != 0x0c => (Transport::Uc, op_flags(op)?),
        // UD: SEND ONLY, with or without immediate data, behind a DETH.
        3 if op == 0x04 || op == 0x05 => (Transport::Ud, op_flags(op)? | DETH),
        _ => return None,
    };
    Some(OpInfo { transport, flags })
}

/// The extension headers in wire order, with their lengths.
pub const EXT_HEADERS: [(u32, usize); 8] = [
    (FETH, 4),
    (DETH, 8),
    (RETH, 16),
    (ATOMIC_ETH, 28),
    (AETH, 4),
    (ATOMIC_ACK_ETH, 8),
    (IMMDT, 4),
    (IETH, 4),
];

/// Bytes of the base transport header.
pub const BTH_LEN: usize = 12;

/// Bytes of all the headers of a packet with these flags, BTH included.
pub fn header_len(flags: u32) -> usize {
    EXT_HEADERS
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .map(|(_, len)| len)
        .sum::<usize>()
        + BTH_LEN
}

/// Offset of the extension header `which` (one `flag::*` header bit) in a packet with
/// these flags, or `None` when it has none.
pub fn header_offset(flags: u32, which: u32) -> Option<usize> {
    if flags & which == 0 {
        return None;
    }
    let mut off = BTH_LEN;
    for (f, len) in EXT_HEADERS {
        if f == which {
            return Some(off);
        }
        if flags & f != 0 {
            off += len;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        // RDMA WRITE ONLY with immediate: BTH RETH ImmDt.
        let w = info(0x0b).unwrap();
        assert_eq!(header_len(w.flags), 12 + 16 + 4);
        assert_eq!(header_offset(w.flags, IMMDT), Some(28));
        // UD SEND ONLY with immediate: BTH DETH ImmDt.
        let u = info(0x65).unwrap();
        assert_eq!(u.transport, Transport::Ud);
        assert_eq!(header_offset(u.flags, DETH), Some(12));
        assert_eq!(header_offset(u.flags, IMMDT), Some(20));
        // FLUSH: BTH FETH RETH.
        let f = info(0x1c).unwrap();
        assert_eq!(header_offset(f.flags, RETH), Some(16));
        assert_eq!(header_len(f.flags), 32);
        // ATOMIC ACKNOWLEDGE: BTH AETH AtomicAckETH.
        let a = info(0x12).unwrap();
        assert_eq!(header_len(a.flags), 24);
        // Compare-and-swap: BTH AtomicETH.
        assert_eq!(header_len(info(0x13).unwrap().flags), 40);
        assert_eq!(header_offset(info(0x13).unwrap().flags, RETH), None);
    }

    #[test]
    fn what_is_refused() {
        // RD, reserved RC opcodes, UC reads and atomics, UD beyond SEND ONLY.
        for op in [
            0x40, 0x4a, 0x15, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x31, 0x33, 0x60, 0x66, 0x7f,
        ] {
            assert_eq!(info(op), None, "opcode {op:#x}");
        }
        assert_eq!(info(0x2b).unwrap().transport, Transport::Uc);
    }

    #[test]
    fn every_opcode_is_consistent() {
        for op in 0..=255u8 {
            let Some(i) = info(op) else { continue };
            let f = i.flags;
            // A middle packet, or a first and/or last one.
            assert!((f & MIDDLE != 0) != (f & ONLY != 0), "opcode {op:#x}");
            // A response is never a request; only responses carry an AETH.
            assert!(f & REQUEST == 0 || f & AETH == 0, "opcode {op:#x}");
            // Only UD has a DETH, and all of UD has one.
            assert_eq!(
                f & DETH != 0,
                i.transport == Transport::Ud,
                "opcode {op:#x}"
            );
        }
    }
}
