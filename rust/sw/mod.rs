// SPDX-License-Identifier: GPL-2.0

//! What a software RoCE device needs beyond the generic layer (`crate::ib`, `rust/`):
//! librxe's user ABI ([`rxe_abi`]) and ring layout ([`queue`]), RoCE v2's UDP tunnel
//! sockets ([`udp`]) and the packets they carry ([`skb`]), the ICRC's CRC ([`crc`]),
//! key randomness ([`random`]), and the CPU's mirror of on-demand-paged user memory
//! ([`odp`]).
//!
//! It builds on the generic layer and is never named by it. Like it, it is loaded with
//! `#[path]` and may use `unsafe`; the driver may not.

pub(crate) mod crc;
pub(crate) mod odp;
pub(crate) mod queue;
pub(crate) mod random;
pub(crate) mod rxe_abi;
pub(crate) mod skb;
pub(crate) mod udp;
