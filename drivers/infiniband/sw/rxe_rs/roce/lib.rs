// SPDX-License-Identifier: GPL-2.0

//! The RoCE v2 wire protocol as rxe_rs speaks it: InfiniBand transport headers carried in
//! UDP (port 4791), their opcodes, packet sequence number arithmetic and the invariant
//! CRC. Pure functions over byte slices, with no allocation and no kernel dependency, so
//! that the same code is unit-tested and fuzzed on the host and runs in the module.
//!
//! Everything received is untrusted: [`packet::Packet::parse`] checks lengths and the
//! opcode's header layout before anything is read, and never panics.

pub mod frame;
pub mod headers;
pub mod icrc;
pub mod opcode;
pub mod packet;
pub mod psn;

/// The UDP destination port of RoCE v2.
pub const ROCE_V2_PORT: u16 = 4791;
