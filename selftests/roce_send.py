#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Sends hostile RoCE v2 packets to a device's UDP port 4791 (bounded: N of each kind).

    roce_send.py SRC_IP DST_IP N

Kinds, in this order: random bytes; truncated headers; well-formed RC SEND ONLY with a
wrong ICRC; well-formed packets with a correct ICRC to a QP that does not exist. The
socket is not connected and sets DF, so the kernel sends IP ID 0 and the ICRC can be
computed here (the masked fields are TOS, TTL and checksums)."""
import random
import socket
import struct
import sys
import zlib

SPORT = 50000
DPORT = 4791


def icrc(src, dst, transport):
    """RoCE v2 ICRC of a UDP payload (`transport` without its ICRC) as Linux sends it."""
    total = 20 + 8 + len(transport) + 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0xFF, total, 0, 0x4000, 0xFF, 17, 0xFFFF,
                     socket.inet_aton(src), socket.inet_aton(dst))
    udp = struct.pack("!HHHH", SPORT, DPORT, 8 + len(transport) + 4, 0xFFFF)
    bth = bytearray(transport)
    bth[4] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + ip + udp + bytes(bth))
    return struct.pack("<I", crc)


def bth(opcode, qpn, psn, pad=0):
    return struct.pack("!BBHII", opcode, pad << 4, 0xFFFF, qpn & 0xFFFFFF, psn & 0xFFFFFF)


def main():
    src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(4791)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF
    s.bind((src, SPORT))
    for _ in range(n):
        s.sendto(bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 200))), (dst, DPORT))
    for _ in range(n):
        s.sendto(bth(0x04, 0x11, 1)[: rng.randrange(0, 15)], (dst, DPORT))
    for i in range(n):
        s.sendto(bth(0x04, 0x11, i) + b"payload!" + b"\0\0\0\0", (dst, DPORT))
    for i in range(n):
        t = bth(0x04, 0xABCDE, i) + b"payload!"
        s.sendto(t + icrc(src, dst, t), (dst, DPORT))


if __name__ == "__main__":
    main()
