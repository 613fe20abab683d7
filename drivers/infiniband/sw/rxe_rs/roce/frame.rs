// SPDX-License-Identifier: GPL-2.0

//! Building RoCE v2 packets: IP header, UDP header, transport headers, payload, pad and
//! ICRC, in one buffer.
//!
//! The caller asks for a [`Layout`], allocates a buffer of its length, lets
//! [`write_headers`] fill everything but the payload, copies the payload into
//! [`Layout::payload`], and ends with [`seal`], which writes the ICRC. IPv4 packets
//! carry "don't fragment" and an identification of 0 (RFC 6864 allows it for datagrams
//! that are never fragmented); the UDP checksum is 0, as RoCE v2 allows.
//!
//! The other way, [`ip_gids`] reads a received packet's IP addresses as GIDs.

use super::headers::{Aeth, AtomicEth, Bth, Deth, Feth, Reth};
use super::icrc::{self, IPV4_LEN, IPV6_LEN, UDP_LEN};
use super::opcode::{self, flag};
use super::packet::ICRC_LEN;
use super::ROCE_V2_PORT;

/// Where a packet goes, and its IP header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip {
    /// IPv4.
    V4 {
        /// Source address.
        src: [u8; 4],
        /// Destination address.
        dst: [u8; 4],
        /// Type of service.
        tos: u8,
        /// Time to live.
        ttl: u8,
    },
    /// IPv6.
    V6 {
        /// Source address.
        src: [u8; 16],
        /// Destination address.
        dst: [u8; 16],
        /// Traffic class.
        tclass: u8,
        /// Flow label (20 bits).
        flow_label: u32,
        /// Hop limit.
        hop_limit: u8,
    },
}

impl Ip {
    /// The IP header's length.
    pub fn header_len(&self) -> usize {
        match self {
            Ip::V4 { .. } => IPV4_LEN,
            Ip::V6 { .. } => IPV6_LEN,
        }
    }
}

/// The extension headers of a packet; which of them are written is the opcode's call.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ext {
    /// RDMA extended transport header.
    pub reth: Reth,
    /// Datagram extended transport header.
    pub deth: Deth,
    /// ACK extended transport header.
    pub aeth: Aeth,
    /// Atomic extended transport header.
    pub atomic: AtomicEth,
    /// Atomic acknowledge: the original remote data.
    pub atomic_ack: u64,
    /// Immediate data, in wire order.
    pub imm: [u8; 4],
    /// The rkey to invalidate.
    pub ieth: u32,
    /// Flush extended transport header.
    pub feth: Feth,
}

/// Where the parts of a packet go in its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    ip_len: usize,
    flags: u32,
    payload_len: usize,
    pad: usize,
}

/// Why a packet cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// An opcode this device does not send.
    UnknownOpcode,
    /// A payload on an opcode that carries none, or one too long for an IP packet.
    BadPayload,
    /// The buffer is not the layout's length.
    BadBuffer,
}

impl Layout {
    /// The layout of a packet with `opcode` and `payload_len` bytes of payload.
    pub fn new(ip: &Ip, opcode: u8, payload_len: usize) -> Result<Self, BuildError> {
        let info = opcode::info(opcode).ok_or(BuildError::UnknownOpcode)?;
        if (info.flags & flag::PAYLOAD == 0 && payload_len != 0) || payload_len > 0x1_0000 {
            return Err(BuildError::BadPayload);
        }
        Ok(Self {
            ip_len: ip.header_len(),
            flags: info.flags,
            payload_len,
            pad: (4 - payload_len % 4) % 4,
        })
    }

    /// The whole packet's length, IP header to ICRC.
    pub fn total_len(&self) -> usize {
        self.transport_offset()
            + opcode::header_len(self.flags)
            + self.payload_len
            + self.pad
            + ICRC_LEN
    }

    /// Where the UDP payload (the BTH) starts.
    pub fn transport_offset(&self) -> usize {
        self.ip_len + UDP_LEN
    }

    /// The payload's range in the buffer.
    pub fn payload(&self) -> core::ops::Range<usize> {
        let start = self.transport_offset() + opcode::header_len(self.flags);
        start..start + self.payload_len
    }
}

/// The IPv4 header checksum of `h` (with its checksum field zero).
fn ipv4_checksum(h: &[u8; IPV4_LEN]) -> u16 {
    let mut sum = 0u32;
    for pair in h.chunks_exact(2) {
        sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes every part of the packet but the payload and the ICRC into `out`, which must
/// be `layout.total_len()` long. `bth.pad` is set from the layout.
pub fn write_headers(
    out: &mut [u8],
    layout: &Layout,
    ip: &Ip,
    src_port: u16,
    bth: &Bth,
    ext: &Ext,
) -> Result<(), BuildError> {
    let total = layout.total_len();
    if out.len() != total {
        return Err(BuildError::BadBuffer);
    }
    let udp_len = (total - layout.ip_len) as u16;
    match ip {
        Ip::V4 { src, dst, tos, ttl } => {
            let mut h = [0u8; IPV4_LEN];
            h[0] = 0x45;
            h[1] = *tos;
            h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
            // Identification 0; flags: don't fragment.
            h[6] = 0x40;
            h[8] = *ttl;
            h[9] = 17; // UDP
            h[12..16].copy_from_slice(src);
            h[16..20].copy_from_slice(dst);
            let sum = ipv4_checksum(&h);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            out[..IPV4_LEN].copy_from_slice(&h);
        }
        Ip::V6 {
            src,
            dst,
            tclass,
            flow_label,
            hop_limit,
        } => {
            let word = (6u32 << 28) | (u32::from(*tclass) << 20) | (flow_label & 0xf_ffff);
            out[0..4].copy_from_slice(&word.to_be_bytes());
            out[4..6].copy_from_slice(&udp_len.to_be_bytes());
            out[6] = 17; // UDP
            out[7] = *hop_limit;
            out[8..24].copy_from_slice(src);
            out[24..40].copy_from_slice(dst);
        }
    }
    let u = layout.ip_len;
    out[u..u + 2].copy_from_slice(&src_port.to_be_bytes());
    out[u + 2..u + 4].copy_from_slice(&ROCE_V2_PORT.to_be_bytes());
    out[u + 4..u + 6].copy_from_slice(&udp_len.to_be_bytes());
    out[u + 6..u + 8].copy_from_slice(&[0, 0]);

    let t = layout.transport_offset();
    let mut b = *bth;
    b.pad = layout.pad as u8;
    out[t..t + opcode::BTH_LEN].copy_from_slice(&b.to_bytes());
    for (which, _) in opcode::EXT_HEADERS {
        let Some(off) = opcode::header_offset(layout.flags, which) else {
            continue;
        };
        let at = t + off;
        match which {
            flag::FETH => out[at..at + 4].copy_from_slice(&ext.feth.to_bytes()),
            flag::DETH => out[at..at + 8].copy_from_slice(&ext.deth.to_bytes()),
            flag::RETH => out[at..at + 16].copy_from_slice(&ext.reth.to_bytes()),
            flag::ATOMIC_ETH => out[at..at + 28].copy_from_slice(&ext.atomic.to_bytes()),
            flag::AETH => out[at..at + 4].copy_from_slice(&ext.aeth.to_bytes()),
            flag::ATOMIC_ACK_ETH => out[at..at + 8].copy_from_slice(&ext.atomic_ack.to_be_bytes()),
            flag::IMMDT => out[at..at + 4].copy_from_slice(&ext.imm),
            flag::IETH => out[at..at + 4].copy_from_slice(&ext.ieth.to_be_bytes()),
            _ => {}
        }
    }
    let p = layout.payload();
    for x in &mut out[p.end..p.end + layout.pad] {
        *x = 0;
    }
    Ok(())
}

/// Writes the ICRC at the end of a packet whose other parts are all written.
pub fn seal(out: &mut [u8], layout: &Layout) -> Result<(), BuildError> {
    if out.len() != layout.total_len() {
        return Err(BuildError::BadBuffer);
    }
    let n = out.len();
    let t = layout.transport_offset();
    let udp: [u8; UDP_LEN] = out[layout.ip_len..t]
        .try_into()
        .map_err(|_| BuildError::BadBuffer)?;
    let transport = &out[t..n - ICRC_LEN];
    let sum = if layout.ip_len == IPV4_LEN {
        let ip: [u8; IPV4_LEN] = out[..IPV4_LEN]
            .try_into()
            .map_err(|_| BuildError::BadBuffer)?;
        icrc::icrc_ipv4(&ip, &udp, transport)
    } else {
        let ip: [u8; IPV6_LEN] = out[..IPV6_LEN]
            .try_into()
            .map_err(|_| BuildError::BadBuffer)?;
        icrc::icrc_ipv6(&ip, &udp, transport)
    };
    out[n - ICRC_LEN..].copy_from_slice(&sum);
    Ok(())
}

/// Writes zeros where the ICRC goes, for a packet that is never checked (one the device
/// sends itself, which never leaves the driver).
pub fn seal_unchecked(out: &mut [u8], layout: &Layout) -> Result<(), BuildError> {
    if out.len() != layout.total_len() {
        return Err(BuildError::BadBuffer);
    }
    let n = out.len();
    out[n - ICRC_LEN..].fill(0);
    Ok(())
}

/// The UDP source port of a QP's packets: a hash of its number into 0xc000..=0xffff, so
/// that flows spread over paths and receive queues.
pub fn source_port(qpn: u32) -> u16 {
    let h = qpn.wrapping_mul(0x61c8_8647) >> 18;
    0xc000 | (h as u16 & 0x3fff)
}

/// The source and destination GIDs of a checked packet's IP header (`ip`, a plain IPv4
/// or an IPv6 header): IPv4 addresses as IPv4-mapped GIDs.
pub fn ip_gids(ip: &[u8]) -> Option<([u8; 16], [u8; 16])> {
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    match (ip.first().map(|b| b >> 4), ip.len()) {
        (Some(4), icrc::IPV4_LEN) => {
            for (gid, at) in [(&mut src, 12), (&mut dst, 16)] {
                gid[10] = 0xff;
                gid[11] = 0xff;
                gid[12..].copy_from_slice(&ip[at..at + 4]);
            }
        }
        (Some(6), icrc::IPV6_LEN) => {
            src.copy_from_slice(&ip[8..24]);
            dst.copy_from_slice(&ip[24..40]);
        }
        _ => return None,
    }
    Some((src, dst))
}

#[cfg(test)]
mod tests {
    use super::super::packet::Packet;
    use super::*;

    /// The known-answer packet of the ICRC tests, built rather than typed in.
    #[test]
    fn builds_the_known_answer_packet() {
        let ip = Ip::V4 {
            src: [192, 168, 1, 1],
            dst: [192, 168, 1, 2],
            tos: 0,
            ttl: 64,
        };
        let layout = Layout::new(&ip, 0x0a, 8).unwrap();
        assert_eq!(layout.total_len(), 0x44);
        let mut b = [0u8; 0x44];
        let bth = Bth {
            opcode: 0x0a,
            pkey: 0xffff,
            dest_qp: 0x11,
            ack_req: true,
            psn: 1,
            ..Default::default()
        };
        let ext = Ext {
            reth: Reth {
                va: 0x7f00_0000_1000,
                rkey: 0x203,
                len: 8,
            },
            ..Default::default()
        };
        write_headers(&mut b, &layout, &ip, 0xc123, &bth, &ext).unwrap();
        b[layout.payload()].copy_from_slice(&[0, 1, 2, 3, 4, 5, 6, 7]);
        seal(&mut b, &layout).unwrap();
        // The reference packet has identification 0x1234 and a checksum to match; ours
        // has 0, which the ICRC covers, so compare the rest and check our checksum.
        assert_eq!(ipv4_checksum(&b[..20].try_into().unwrap()), 0);
        assert_eq!(
            &b[20..28],
            &[0xc1, 0x23, 0x12, 0xb7, 0x00, 0x30, 0x00, 0x00]
        );
        let p = Packet::parse(&b[28..]).unwrap();
        assert_eq!(p.payload(), &[0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(p.reth().unwrap().rkey, 0x203);
        let mut reference = b;
        reference[4..6].copy_from_slice(&[0x12, 0x34]);
        reference[10..12].copy_from_slice(&[0xa5, 0x21]);
        seal(&mut reference, &layout).unwrap();
        assert_eq!(&reference[0x40..], &[0x64, 0xda, 0x62, 0x9f]);
        // Unchecked, only the ICRC differs: it is zero.
        let mut unchecked = b;
        seal_unchecked(&mut unchecked, &layout).unwrap();
        assert_eq!(&unchecked[..0x40], &b[..0x40]);
        assert_eq!(&unchecked[0x40..], &[0; 4]);
        assert!(seal_unchecked(&mut unchecked[..0x43], &layout).is_err());
    }

    #[test]
    fn pads_and_round_trips_over_ipv6() {
        let ip = Ip::V6 {
            src: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            dst: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
            tclass: 3,
            flow_label: 0x12345,
            hop_limit: 64,
        };
        let layout = Layout::new(&ip, 0x65, 5).unwrap();
        let mut b = [0u8; 128];
        let b = &mut b[..layout.total_len()];
        let ext = Ext {
            deth: Deth {
                qkey: 0x1111_2222,
                src_qp: 0x42,
            },
            imm: [1, 2, 3, 4],
            ..Default::default()
        };
        let bth = Bth {
            opcode: 0x65,
            dest_qp: 7,
            ..Default::default()
        };
        write_headers(b, &layout, &ip, source_port(0x42), &bth, &ext).unwrap();
        b[layout.payload()].copy_from_slice(b"hello");
        seal(b, &layout).unwrap();
        let p = Packet::parse(&b[48..]).unwrap();
        assert_eq!(p.bth.pad, 3);
        assert_eq!(p.payload(), b"hello");
        assert_eq!(p.deth().unwrap().src_qp, 0x42);
        assert_eq!(p.imm(), Some([1, 2, 3, 4]));
        let ip6: [u8; 40] = b[..40].try_into().unwrap();
        let udp: [u8; 8] = b[40..48].try_into().unwrap();
        assert_eq!(icrc::icrc_ipv6(&ip6, &udp, p.covered()), p.icrc());
        assert!(Layout::new(&ip, 0x0c, 1).is_err());
        assert!(Layout::new(&ip, 0x4c, 0).is_err());
    }

    #[test]
    fn source_ports_stay_in_range() {
        for qpn in 0..100_000 {
            assert!(source_port(qpn) >= 0xc000);
        }
    }

    /// The IP header a packet is built with is read back as the GIDs it was sent
    /// between; a header of another length or version is refused.
    #[test]
    fn reads_gids_of_built_headers() {
        let bth = Bth {
            opcode: 0x04,
            ..Default::default()
        };
        let v4 = Ip::V4 {
            src: [192, 168, 1, 1],
            dst: [10, 0, 0, 2],
            tos: 0,
            ttl: 64,
        };
        let layout = Layout::new(&v4, 0x04, 0).unwrap();
        let mut b = [0u8; 128];
        let b = &mut b[..layout.total_len()];
        write_headers(b, &layout, &v4, source_port(1), &bth, &Ext::default()).unwrap();
        let mapped = |a: [u8; 4]| {
            let mut g = [0u8; 16];
            g[10..12].fill(0xff);
            g[12..].copy_from_slice(&a);
            g
        };
        let gids = (mapped([192, 168, 1, 1]), mapped([10, 0, 0, 2]));
        assert_eq!(ip_gids(&b[..IPV4_LEN]), Some(gids));
        // An IPv4 header with options, or cut short, is not one the device takes.
        assert_eq!(ip_gids(&b[..IPV4_LEN + 4]), None);
        assert_eq!(ip_gids(&b[..IPV4_LEN - 1]), None);
        assert_eq!(ip_gids(&[]), None);

        let (src, dst) = ([0xfe; 16], [0x20; 16]);
        let v6 = Ip::V6 {
            src,
            dst,
            tclass: 0,
            flow_label: 0,
            hop_limit: 64,
        };
        let layout = Layout::new(&v6, 0x04, 0).unwrap();
        let mut b = [0u8; 128];
        let b = &mut b[..layout.total_len()];
        write_headers(b, &layout, &v6, source_port(1), &bth, &Ext::default()).unwrap();
        assert_eq!(ip_gids(&b[..IPV6_LEN]), Some((src, dst)));
        // The length of one version with the other's version field.
        assert_eq!(ip_gids(&b[..IPV4_LEN]), None);
    }
}
