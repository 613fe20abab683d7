// SPDX-License-Identifier: GPL-2.0

//! Any bytes as a received UDP payload: parsing never panics, and whatever parses reads
//! only inside the bytes it was given. The ICRC is computed over every parsed packet as
//! the receive path would.

#![no_main]

use libfuzzer_sys::fuzz_target;
use roce::{icrc, packet::Packet};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::parse(data) {
        let _ = (p.reth(), p.aeth(), p.deth(), p.atomic_eth(), p.feth());
        let _ = (p.atomic_ack(), p.imm(), p.ieth());
        assert!(p.payload().len() <= data.len());
        assert_eq!(p.covered().len() + 4, data.len());
        let ip = [0x45u8; icrc::IPV4_LEN];
        let udp = [0u8; icrc::UDP_LEN];
        let _ = icrc::icrc_ipv4(&ip, &udp, p.covered()) == p.icrc();
    }
});
