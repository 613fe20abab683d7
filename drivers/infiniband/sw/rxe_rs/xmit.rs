// SPDX-License-Identifier: GPL-2.0

//! The transmit path: RoCE v2 packets built in one buffer and sent through the kernel's
//! IP stack, or handed straight to the receive path when they are addressed to the
//! device itself.
//!
//! A packet is built while the QP it belongs to is locked ([`build`]), since what goes
//! into it is the QP's state, and sent once the lock is released ([`send`]): the IP
//! stack must not be entered with interrupts off, and a packet to the device itself is
//! received at once, which takes QP locks of its own.
//!
//! The route a packet leaves by is looked up from its addresses, or taken from its QP's
//! [`RouteCache`] when its last packet went to the same place and the route is still
//! valid.
//!
//! Packets whose destination GID is one of the device's own (their source GID, another
//! address of its netdev, one of a VLAN on it: see `ah::with_own_dest`) never leave the
//! device: they go through the device's loopback queue into the same receive checks and
//! counters as a packet from the network (see `loopback`), as arrived on the
//! destination GID's VLAN. rxe does the same (it compares the destination MAC with its
//! netdev's); traffic between two devices on one host goes through the IP stack.

use crate::ib::{
    device::Device,
    netdev::NetDevice,
    qp::{AddressVector, NetworkType},
};
use crate::loopback::Loopback;
use crate::roce::{
    frame::{self, Ext, Ip, Layout},
    headers::Bth,
};
use crate::stats::Counter;
use crate::sw::skb::{OutSkb, RouteCache, Skb};
use crate::RxeRs;
use kernel::prelude::*;

/// Where a built packet goes.
enum Route {
    /// To the device itself, received as arrived on the destination GID's VLAN, if any.
    Local { vlan_id: Option<u16> },
    /// Out of the netdev numbered `oif`: the device's own, or a VLAN device on it
    /// whose GID is the source.
    V4 {
        oif: i32,
        src: [u8; 4],
        dst: [u8; 4],
    },
    V6 {
        oif: i32,
        src: [u8; 16],
        dst: [u8; 16],
    },
}

/// A packet ready to leave.
pub(crate) struct Outgoing {
    skb: OutSkb,
    /// The length of its IP header.
    ip_len: usize,
    /// Its length from the IP header through the ICRC.
    len: usize,
    route: Route,
}

/// Why a packet could not be built.
pub(crate) enum BuildError<E> {
    /// The address vector is not one packets can be sent to.
    Address,
    /// No buffer, or the opcode and length do not make a packet.
    Packet,
    /// Filling in the payload failed.
    Payload(E),
}

/// The IP header fields for an address vector.
fn ip_of(av: &AddressVector) -> Option<Ip> {
    // A hop limit of 0 would be dropped by the first router: use the IP default.
    let hops = if av.hop_limit == 0 { 64 } else { av.hop_limit };
    match av.network? {
        NetworkType::Ipv4 => Some(Ip::V4 {
            src: av.sgid[12..16].try_into().ok()?,
            dst: av.dgid[12..16].try_into().ok()?,
            tos: av.traffic_class,
            ttl: hops,
        }),
        NetworkType::Ipv6 => Some(Ip::V6 {
            src: av.sgid,
            dst: av.dgid,
            tclass: av.traffic_class,
            flow_label: av.flow_label,
            hop_limit: hops,
        }),
    }
}

/// Builds a packet from the QP numbered `src_qpn` to `av`, with `payload_len` bytes of
/// payload that `fill` writes.
pub(crate) fn build<E>(
    ndev: &NetDevice,
    av: &AddressVector,
    src_qpn: u32,
    bth: &Bth,
    ext: &Ext,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
) -> Result<Outgoing, BuildError<E>> {
    let ip = ip_of(av).ok_or(BuildError::Address)?;
    let layout = Layout::new(&ip, bth.opcode, payload_len).map_err(|_| BuildError::Packet)?;
    let mut skb = Skb::new_ip(ndev, layout.total_len()).map_err(|_| BuildError::Packet)?;
    let bytes = skb.ip_bytes_mut();
    frame::write_headers(bytes, &layout, &ip, frame::source_port(src_qpn), bth, ext)
        .map_err(|_| BuildError::Packet)?;
    fill(&mut bytes[layout.payload()]).map_err(BuildError::Payload)?;
    let route = if let Some(own) = av.own_dest() {
        // It goes to the device's own loopback queue, whose receiver does not check
        // the ICRC (`recv::Source::Loopback`): no one could ever see it.
        frame::seal_unchecked(bytes, &layout).map_err(|_| BuildError::Packet)?;
        Route::Local {
            vlan_id: own.vlan_id,
        }
    } else {
        frame::seal(bytes, &layout).map_err(|_| BuildError::Packet)?;
        // The source GID's netdev: a GID of a VLAN device sends tagged, through it.
        let oif = match av.sgid_ifindex {
            0 => ndev.ifindex(),
            i => i,
        };
        match ip {
            Ip::V4 { src, dst, .. } => Route::V4 { oif, src, dst },
            Ip::V6 { src, dst, .. } => Route::V6 { oif, src, dst },
        }
    };
    Ok(Outgoing {
        skb,
        ip_len: ip.header_len(),
        len: layout.total_len(),
        route,
    })
}

/// Sends a built packet of a QP whose kept route is `routes`. Must be called with no QP
/// lock held.
pub(crate) fn send(dev: &Device<RxeRs>, ndev: &NetDevice, routes: &RouteCache, out: Outgoing) {
    dev.counters.inc(Counter::Sent);
    dev.counters.add(Counter::SentBytes, out.len as u64);
    let sent = match out.route {
        Route::Local { vlan_id } => match out.skb.into_received(out.ip_len) {
            Ok(mut skb) => {
                skb.set_vlan_id(vlan_id);
                match Loopback::send(dev, skb) {
                    // The device is being unregistered, its QPs all destroyed: no one is
                    // there to receive the packet.
                    Err(e) if e == ENODEV => {
                        dev.counters.inc(Counter::Dropped);
                        return;
                    }
                    sent => sent,
                }
            }
            Err(e) => Err(e),
        },
        Route::V4 { oif, src, dst } => out.skb.send_ip(ndev, routes, oif, &src, &dst),
        Route::V6 { oif, src, dst } => out.skb.send_ip(ndev, routes, oif, &src, &dst),
    };
    if sent.is_err() {
        dev.counters.inc(Counter::SendError);
    }
}
