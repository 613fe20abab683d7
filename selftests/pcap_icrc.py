#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks the ICRC of every RoCE v2 frame (IPv4, UDP port 4791) in a pcap file.

Written from the RoCE v2 rules (RoCE Annex A17), independently of either driver: the
CRC-32 of eight 0xff bytes, the IP header with TOS, TTL and checksum set to ones, the
UDP header with its checksum set to ones, the BTH with its FECN/BECN byte set to ones,
and the rest of the packet up to the ICRC, sent least significant byte first.

    pcap_icrc.py FILE   prints a count per source address; exits 0 when there is at
                        least one frame and every ICRC is good
"""

import socket
import struct
import sys
import zlib


def frames(path):
    with open(path, "rb") as f:
        head = f.read(24)
        magic = struct.unpack("<I", head[:4])[0]
        endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
        linktype = struct.unpack(endian + "I", head[20:24])[0]
        if linktype != 1:
            sys.exit(f"link type {linktype}, want Ethernet")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            incl = struct.unpack(endian + "IIII", rec)[2]
            yield f.read(incl)


def check(frame):
    """Returns (source address, ICRC good) for a RoCE v2 frame, None for others."""
    if len(frame) < 14 + 20 + 8 + 12 + 4 or frame[12:14] != b"\x08\x00":
        return None
    ip = bytearray(frame[14:34])
    if ip[0] != 0x45 or ip[9] != 17:
        return None
    total = struct.unpack("!H", ip[2:4])[0]
    pkt = frame[14:14 + total]
    udp = bytearray(pkt[20:28])
    if struct.unpack("!H", udp[2:4])[0] != 4791:
        return None
    src = socket.inet_ntoa(bytes(ip[12:16]))
    ip[1] = 0xFF
    ip[8] = 0xFF
    ip[10:12] = b"\xff\xff"
    udp[6:8] = b"\xff\xff"
    transport = bytearray(pkt[28:-4])
    transport[4] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(transport))
    return src, struct.pack("<I", crc) == pkt[-4:]


def main():
    seen = {}
    for frame in frames(sys.argv[1]):
        r = check(frame)
        if r is None:
            continue
        good, bad = seen.get(r[0], (0, 0))
        seen[r[0]] = (good + r[1], bad + (not r[1]))
    for src, (good, bad) in sorted(seen.items()):
        print(f"{src}: {good} frames with a good ICRC, {bad} bad")
    ok = seen and all(bad == 0 for _, bad in seen.values())
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
