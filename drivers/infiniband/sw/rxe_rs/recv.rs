// SPDX-License-Identifier: GPL-2.0

//! The receive path: RoCE v2 packets from the UDP tunnel, checked before anything of
//! them is used.
//!
//! A packet arrives in softirq context (or from the device itself, see `loopback`). It
//! is dropped (and counted) unless it came in on a netdev one of our devices sits on,
//! its IP header is a plain IPv4 (no options) or IPv6 one, its transport headers are
//! well-formed for its opcode and its ICRC matches. Then the QP its BTH names takes it
//! (see `qp::RxeQp::receive`), under its lock; what the QP sends in answer leaves after
//! the lock is released.

use crate::ib::device::Device;
use crate::mcast::{MAX_MEMBERS, MULTICAST_QPN};
use crate::param;
use crate::qp::{Arrival, RxeQp};
use crate::roce::{frame::ip_gids, icrc, opcode::Transport, packet::Packet};
use crate::stats::Counter;
use crate::sw::{skb::Skb, udp::Receiver};
use crate::RxeRs;

/// The bits of a P_Key that name the partition (the top bit is the membership).
const PKEY_MASK: u16 = 0x7fff;

/// The receiver of the tunnels' packets.
pub(crate) struct Recv;

/// Why a packet was dropped.
enum Refused {
    /// Not well-formed RoCE v2.
    Malformed,
    /// The ICRC did not match.
    Icrc,
}

/// Where a packet comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The network: anything may have been done to it on the way.
    Network,
    /// The device itself, through its loopback queue: built by `xmit::build` and
    /// never out of the driver's hands, it carries no ICRC (see `xmit::build`) and
    /// its ICRC is not checked.
    Loopback,
}

/// Checks a linear packet: `bytes` from the IP header on, `udp` the UDP header's offset.
fn check(bytes: &[u8], udp: usize, from: Source) -> Result<Packet<'_>, Refused> {
    let transport = bytes.get(udp + icrc::UDP_LEN..).ok_or(Refused::Malformed)?;
    let udp_hdr: &[u8; icrc::UDP_LEN] = bytes
        .get(udp..udp + icrc::UDP_LEN)
        .and_then(|b| b.try_into().ok())
        .ok_or(Refused::Malformed)?;
    let pkt = Packet::parse(transport).map_err(|_| Refused::Malformed)?;
    let version = bytes.first().map(|b| b >> 4);
    if from == Source::Loopback {
        return match (version, udp) {
            (Some(4), icrc::IPV4_LEN) | (Some(6), icrc::IPV6_LEN) => Ok(pkt),
            _ => Err(Refused::Malformed),
        };
    }
    let sum = match (version, udp) {
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
    Ok(pkt)
}

/// Receives a linear packet on `dev`.
pub(crate) fn deliver(dev: &Device<RxeRs>, skb: Skb, from: Source) {
    let counters = &dev.counters;
    counters.inc(Counter::Received);
    let vlan_id = skb.vlan_id();
    let Some((bytes, udp)) = skb.network_bytes() else {
        counters.inc(Counter::Malformed);
        counters.inc(Counter::Dropped);
        return;
    };
    let pkt = match check(bytes, udp, from) {
        Ok(p) => p,
        Err(why) => {
            counters.inc(match why {
                Refused::Malformed => Counter::Malformed,
                Refused::Icrc => Counter::IcrcError,
            });
            counters.inc(Counter::Dropped);
            return;
        }
    };
    // The port's one P_Key is the default (full membership): a packet of another
    // partition is for none of its QPs. Membership does not matter when one side is a
    // full member, so the low 15 bits decide.
    if pkt.bth.pkey & PKEY_MASK != param::DEFAULT_PKEY & PKEY_MASK {
        counters.inc(Counter::BadPkey);
        counters.inc(Counter::Dropped);
        return;
    }
    // A datagram is for the device only at a GID of the netdev it arrived on, as rxe
    // checks: the IP stack takes a packet to any local address on any netdev (one of
    // another VLAN included). (A table search per packet: a connected QP instead
    // checks the packet's addresses and VLAN against its own, see `RxeQp::receive`;
    // the device's own packets are addressed by it.)
    if from == Source::Network
        && pkt.info.transport == Transport::Ud
        && pkt.bth.dest_qp != MULTICAST_QPN
    {
        let rcu = kernel::sync::rcu::read_lock();
        let ours = match (skb.netdev(&rcu), ip_gids(&bytes[..udp])) {
            (Some(ndev), Some((_, dst))) => dev.has_gid(param::PORT, &dst, ndev),
            _ => false,
        };
        drop(rcu);
        if !ours {
            counters.inc(Counter::NotOurGid);
            counters.inc(Counter::Dropped);
            return;
        }
    }
    counters.add(Counter::RcvdBytes, bytes.len() as u64);
    let arrival = Arrival {
        ip: &bytes[..udp],
        vlan_id,
    };
    if pkt.bth.dest_qp == MULTICAST_QPN {
        multicast(dev, &pkt, &arrival);
        return;
    }
    let Some(qp) = dev.qp_table.get(pkt.bth.dest_qp) else {
        counters.inc(Counter::NoQp);
        counters.inc(Counter::Dropped);
        return;
    };
    if !RxeQp::receive(dev, &qp, &pkt, &arrival) {
        counters.inc(Counter::QpDropped);
        counters.inc(Counter::Dropped);
    }
}

/// A datagram to the multicast QP number: each member of the group its destination
/// address names takes it as if it were sent to it alone.
fn multicast(dev: &Device<RxeRs>, pkt: &Packet<'_>, from: &Arrival<'_>) {
    let counters = &dev.counters;
    let gid = ip_gids(from.ip).map_or([0; 16], |(_, dst)| dst);
    let mut qpns = [0u32; MAX_MEMBERS];
    let n = dev.mcast.members(&gid, &mut qpns);
    let mut taken = false;
    for &qpn in &qpns[..n] {
        if let Some(qp) = dev.qp_table.get(qpn) {
            taken |= RxeQp::receive(dev, &qp, pkt, from);
        }
    }
    if !taken {
        counters.inc(if n == 0 {
            Counter::NoQp
        } else {
            Counter::QpDropped
        });
        counters.inc(Counter::Dropped);
    }
}

impl Receiver for Recv {
    fn receive(mut skb: Skb) {
        // Softirq, in the network stack's RCU read-side section.
        let rcu = kernel::sync::rcu::read_lock();
        // What arrives on a VLAN device of one of our netdevs (which removed its tag)
        // is for the device on that netdev, as arrived on that VLAN.
        let found = skb
            .netdev(&rcu)
            .and_then(|ndev| match ndev.vlan_real_dev() {
                Some(real) => Device::<RxeRs>::find_by_netdev(real).map(|d| (d, ndev.vlan_id())),
                None => Device::<RxeRs>::find_by_netdev(ndev).map(|d| (d, None)),
            });
        drop(rcu);
        let Some((dev, vlan_id)) = found else {
            // Not on one of our devices' netdevs.
            return;
        };
        skb.set_vlan_id(vlan_id);
        if skb.linearize().is_err() {
            dev.counters.inc(Counter::Received);
            dev.counters.inc(Counter::Malformed);
            dev.counters.inc(Counter::Dropped);
            return;
        }
        deliver(&dev, skb, Source::Network);
    }
}
