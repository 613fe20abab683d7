#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Waits until a peer answers ICMP echo: python3 is in the guest tree, ping is not.

    peer_up.py ADDR SECONDS

Sends an echo request to ADDR every second and exits 0 at the first echo reply from
it, 1 once SECONDS have passed without one. Used by the two-guest runs (interop,
bench), whose sides must start their tests together.
"""
import os
import socket
import struct
import sys
import time


def checksum(data):
    """The Internet checksum (RFC 1071) of data, of even length."""
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def main():
    addr, seconds = sys.argv[1], float(sys.argv[2])
    ident = os.getpid() & 0xFFFF
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    end = time.monotonic() + seconds
    seq = 0
    while time.monotonic() < end:
        seq = (seq + 1) & 0xFFFF
        body = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"rxe_rs peer_up.."
        request = body[:2] + struct.pack("!H", checksum(body)) + body[4:]
        try:
            sock.sendto(request, (addr, 0))
        except OSError:
            # No route or neighbour yet (the link is still coming up).
            time.sleep(1)
            continue
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                packet, (src, _) = sock.recvfrom(1500)
            except OSError:
                break
            header = (packet[0] & 0x0F) * 4
            kind, _, _, rid, _ = struct.unpack("!BBHHH", packet[header:header + 8])
            if src == addr and kind == 0 and rid == ident:
                return 0
        # A reply may have come early; keep the pace of one request a second.
        time.sleep(max(deadline - time.monotonic(), 0))
    return 1


if __name__ == "__main__":
    sys.exit(main())
