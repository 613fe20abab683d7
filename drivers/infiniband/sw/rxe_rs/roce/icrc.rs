// SPDX-License-Identifier: GPL-2.0

//! The invariant CRC (ICRC) that ends every RoCE v2 packet.
//!
//! It is the CRC-32 of IEEE 802.3 (reflected, polynomial 0xEDB88320) over: eight bytes of
//! ones standing in for InfiniBand's local route header, the IP header, the UDP header
//! and the BTH with every field a router may change set to ones (IPv4 type of service,
//! TTL and header checksum; IPv6 traffic class, flow label and hop limit; the UDP
//! checksum; the BTH byte with FECN and BECN), then the rest of the packet up to the
//! ICRC. The ICRC is the complement of the CRC, sent least significant byte first.

/// The CRC-32 table of [`crc32_table`], built at compile time.
const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// A running CRC-32 (the register, not yet complemented).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crc(u32);

impl Crc {
    /// The register after the eight bytes of ones that start every ICRC.
    pub fn start() -> Self {
        Self(!0).update(&[0xff; 8])
    }

    /// The register after `bytes` more.
    #[must_use]
    pub fn update(self, bytes: &[u8]) -> Self {
        Self(crc32(self.0, bytes))
    }

    /// The ICRC as it goes on the wire.
    pub fn finish(self) -> [u8; 4] {
        (!self.0).to_le_bytes()
    }
}

/// The CRC-32 register `c` after `bytes`, a byte at a time through a table: the host
/// build's CRC, and the reference for the kernel's.
pub fn crc32_table(mut c: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        c = TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    c
}

// Inside rxe_rs.ko the CRC is the kernel's `crc32_le()`, which is accelerated (rxe's
// too); the host build, which cargo tests and fuzzes, uses the table.
#[cfg(CONFIG_RUST)]
use crate::sw::crc::crc32_le as crc32;
#[cfg(not(CONFIG_RUST))]
use crc32_table as crc32;

/// Bytes of an IPv4 header without options.
pub const IPV4_LEN: usize = 20;
/// Bytes of an IPv6 header.
pub const IPV6_LEN: usize = 40;
/// Bytes of a UDP header.
pub const UDP_LEN: usize = 8;

/// The ICRC of a RoCE v2 packet over IPv4.
///
/// `ip` and `udp` are the headers as sent or received, `transport` the UDP payload up
/// to (not including) the ICRC; it starts with the BTH, so it is at least 12 bytes.
pub fn icrc_ipv4(ip: &[u8; IPV4_LEN], udp: &[u8; UDP_LEN], transport: &[u8]) -> [u8; 4] {
    let mut ip = *ip;
    ip[1] = 0xff; // type of service
    ip[8] = 0xff; // time to live
    ip[10] = 0xff; // header checksum
    ip[11] = 0xff;
    finish(Crc::start().update(&ip), udp, transport)
}

/// The ICRC of a RoCE v2 packet over IPv6, as [`icrc_ipv4`].
pub fn icrc_ipv6(ip: &[u8; IPV6_LEN], udp: &[u8; UDP_LEN], transport: &[u8]) -> [u8; 4] {
    let mut ip = *ip;
    // Version stays; traffic class and flow label become ones.
    ip[0] |= 0x0f;
    ip[1] = 0xff;
    ip[2] = 0xff;
    ip[3] = 0xff;
    ip[7] = 0xff; // hop limit
    finish(Crc::start().update(&ip), udp, transport)
}

fn finish(crc: Crc, udp: &[u8; UDP_LEN], transport: &[u8]) -> [u8; 4] {
    let mut udp = *udp;
    udp[6] = 0xff; // checksum
    udp[7] = 0xff;
    let mut crc = crc.update(&udp);
    if transport.len() >= 5 {
        let mut bth4 = [0u8; 5];
        bth4.copy_from_slice(&transport[..5]);
        bth4[4] = 0xff; // FECN, BECN and the reserved bits
        crc = crc.update(&bth4).update(&transport[5..]);
    } else {
        crc = crc.update(transport);
    }
    crc.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> ([u8; 64], usize) {
        let mut out = [0u8; 64];
        let digits: &[u8] = s.as_bytes();
        let mut n = 0;
        let mut i = 0;
        while i < digits.len() {
            if digits[i] == b' ' {
                i += 1;
                continue;
            }
            let v = |c: u8| (c as char).to_digit(16).unwrap() as u8;
            out[n] = (v(digits[i]) << 4) | v(digits[i + 1]);
            n += 1;
            i += 2;
        }
        (out, n)
    }

    #[test]
    fn crc32_known_answer() {
        // The CRC-32 check value of "123456789".
        assert_eq!(!Crc(!0).update(b"123456789").0, 0xcbf4_3926);
        // The register after the eight bytes of ones: rxe's seed.
        assert_eq!(Crc::start().0, 0xdebb_20e3);
    }

    #[test]
    fn ipv4_rdma_write_only() {
        // IPv4 192.168.1.1 -> 192.168.1.2, UDP 0xc123 -> 4791, RC RDMA WRITE ONLY to QP
        // 0x11 with AckReq, PSN 1, RETH (VA 0x7f0000001000, rkey 0x203, 8 bytes), payload
        // 0..7: the vector the rxe algorithm gives.
        let (p, n) = hex("45000044123440004011a521c0a80101c0a80102 c12312b700300000 \
             0a00ffff00000011 80000001 00007f0000001000 00000203 00000008 \
             0001020304050607");
        assert_eq!(n, 20 + 8 + 12 + 16 + 8);
        let ip: [u8; 20] = p[..20].try_into().unwrap();
        let udp: [u8; 8] = p[20..28].try_into().unwrap();
        assert_eq!(icrc_ipv4(&ip, &udp, &p[28..n]), [0x64, 0xda, 0x62, 0x9f]);
        // Fields routers change do not change it.
        let mut ip2 = ip;
        ip2[1] = 0x2e;
        ip2[8] = 0x01;
        ip2[10] = 0;
        let mut t = [0u8; 64];
        t[..n - 28].copy_from_slice(&p[28..n]);
        t[4] |= 0xc0;
        assert_eq!(
            icrc_ipv4(&ip2, &udp, &t[..n - 28]),
            [0x64, 0xda, 0x62, 0x9f]
        );
        // Anything else does.
        t[n - 29] ^= 1;
        assert_ne!(
            icrc_ipv4(&ip2, &udp, &t[..n - 28]),
            [0x64, 0xda, 0x62, 0x9f]
        );
    }
}
