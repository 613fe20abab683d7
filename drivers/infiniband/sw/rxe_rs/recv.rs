// SPDX-License-Identifier: GPL-2.0

//! The receive path: RoCE v2 packets from the UDP tunnel, checked before anything of
//! them is used.
//!
//! A packet arrives in softirq context. It is dropped (and counted) unless it came in on
//! a netdev one of our devices sits on, its IP header is a plain IPv4 (no options) or
//! IPv6 one, its transport headers are well-formed for its opcode and its ICRC matches.
//! No QP takes packets before the responder and completer exist, so a packet that
//! passes every check is counted as one no QP could take.

use crate::device::RxeRs;
use crate::ib::{device::Device, skb::Skb, udp::Receiver};
use crate::roce::{icrc, packet::Packet};
use crate::stats::Counter;

/// The receiver of the tunnels' packets.
pub(crate) struct Recv;

/// Why a packet was dropped.
enum Refused {
    /// Not well-formed RoCE v2.
    Malformed,
    /// The ICRC did not match.
    Icrc,
}

/// Checks a linear packet: `bytes` from the IP header on, `udp` the UDP header's offset.
fn check(bytes: &[u8], udp: usize) -> Result<(), Refused> {
    let transport = bytes.get(udp + icrc::UDP_LEN..).ok_or(Refused::Malformed)?;
    let udp_hdr: &[u8; icrc::UDP_LEN] = bytes
        .get(udp..udp + icrc::UDP_LEN)
        .and_then(|b| b.try_into().ok())
        .ok_or(Refused::Malformed)?;
    let pkt = Packet::parse(transport).map_err(|_| Refused::Malformed)?;
    let sum = match (bytes.first().map(|b| b >> 4), udp) {
        (Some(4), icrc::IPV4_LEN) => {
            let ip: &[u8; icrc::IPV4_LEN] = bytes[..icrc::IPV4_LEN]
                .try_into()
                .map_err(|_| Refused::Malformed)?;
            icrc::icrc_ipv4(ip, udp_hdr, pkt.covered())
        }
        (Some(6), icrc::IPV6_LEN) => {
            let ip: &[u8; icrc::IPV6_LEN] = bytes[..icrc::IPV6_LEN]
                .try_into()
                .map_err(|_| Refused::Malformed)?;
            icrc::icrc_ipv6(ip, udp_hdr, pkt.covered())
        }
        // IPv4 with options, or something else: not RoCE v2 as we speak it.
        _ => return Err(Refused::Malformed),
    };
    if sum != pkt.icrc() {
        return Err(Refused::Icrc);
    }
    Ok(())
}

impl Receiver for Recv {
    fn receive(mut skb: Skb) {
        let Some(dev) = skb.netdev().and_then(Device::<RxeRs>::find_by_netdev) else {
            // Not on one of our devices' netdevs.
            return;
        };
        let counters = &dev.counters;
        counters.inc(Counter::Received);
        let verdict = match skb.linearize() {
            Err(_) => Err(Refused::Malformed),
            Ok(()) => match skb.network_bytes() {
                Some((bytes, udp)) => check(bytes, udp),
                None => Err(Refused::Malformed),
            },
        };
        counters.inc(match verdict {
            Err(Refused::Malformed) => Counter::Malformed,
            Err(Refused::Icrc) => Counter::IcrcError,
            Ok(()) => Counter::NoQp,
        });
        counters.inc(Counter::Dropped);
    }
}
