#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Sends hostile RoCE v2 packets to a device's UDP port 4791 (bounded: N of each kind).

    roce_send.py SRC_IP DST_IP N
    roce_send.py --live SRC_IP DST_IP N RC_QPN RC_PSN UD_QPN [RKEY VA]
    roce_send.py --isol SRC_IP DST_IP PSN R1 R2 R3 U1 U2 RKEY VA

Kinds, in this order: random bytes; truncated headers; well-formed RC SEND ONLY with a
wrong ICRC; well-formed packets with a correct ICRC to a QP that does not exist. The
socket is not connected and sets DF, so the kernel sends IP ID 0 and the ICRC can be
computed here (the masked fields are TOS, TTL and checksums).

With --live, well-formed packets with a correct ICRC aimed at QPs that exist (an RC QP
expecting RC_PSN next, a UD QP with Q_Key LIVE_QKEY; RKEY and VA name a buffer of the
RC QP's PD that takes remote writes): each must be dropped without effect (see live()
for the classes). The last line printed says how many went out of each class.

With --isol, the packets of isolation.c's live check (see isol()), from the address of
the QPs' peer, and the answers they get, which come back to SRC_IP's port 4791."""
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


def bth(opcode, qpn, psn, pad=0, ack=False):
    return struct.pack("!BBHII", opcode, pad << 4, 0xFFFF, qpn & 0xFFFFFF,
                       (psn & 0xFFFFFF) | (ack << 31))


# The Q_Key of live_qps.py's UD QP.
LIVE_QKEY = 0x11111111
PSN_MOD = 1 << 24


def reth(va, rkey, length):
    return struct.pack("!QII", va, rkey, length)


def deth(qkey, src_qp):
    return struct.pack("!II", qkey, src_qp & 0xFFFFFF)


def live(args):
    """N of each packet of five classes, each a message a QP must refuse:
    1. RC SEND ONLY and RDMA WRITE ONLY to the RC QP, PSN 2^22 ahead of and 2^22
       behind the expected one (a sequence NAK, a repeated ACK or a drop, but no data);
    2. RC SEND ONLY and RC RDMA WRITE ONLY to the UD QP (opcodes of another transport);
    3. UD SEND ONLY (Q_Key and source QPN in a DETH) to the RC QP;
    4. UC SEND ONLY and UC RDMA WRITE ONLY to the RC QP, at its expected PSN;
    5. UD SEND ONLY to the UD QP with a wrong Q_Key.
    Payloads are 32 bytes (no pad); the writes aim at RKEY/VA with a matching length."""
    src, dst, n = args[0], args[1], int(args[2])
    rc_qpn, rc_psn, ud_qpn = int(args[3], 0), int(args[4], 0), int(args[5], 0)
    rkey, va = (int(args[6], 0), int(args[7], 0)) if len(args) >= 8 else (0, 0)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF
    s.bind((src, SPORT))
    data = b"hostile!" * 4
    sent = {}

    def put(cls, transport):
        s.sendto(transport + icrc(src, dst, transport), (dst, DPORT))
        sent[cls] = sent.get(cls, 0) + 1

    ahead = (rc_psn + (1 << 22)) % PSN_MOD
    behind = (rc_psn - (1 << 22)) % PSN_MOD
    for i in range(n):
        for p in (ahead, behind):
            put(1, bth(0x04, rc_qpn, (p + i) % PSN_MOD, ack=True) + data)
            put(1, bth(0x0A, rc_qpn, (p + i) % PSN_MOD, ack=True) +
                reth(va, rkey, len(data)) + data)
    for i in range(n):
        put(2, bth(0x04, ud_qpn, i, ack=True) + data)
        put(2, bth(0x0A, ud_qpn, i, ack=True) + reth(va, rkey, len(data)) + data)
    for i in range(n):
        put(3, bth(0x64, rc_qpn, rc_psn) + deth(LIVE_QKEY, ud_qpn) + data)
    for i in range(n):
        put(4, bth(0x24, rc_qpn, rc_psn) + data)
        put(4, bth(0x2A, rc_qpn, rc_psn) + reth(va, rkey, len(data)) + data)
    for i in range(n):
        bad = LIVE_QKEY ^ (1 << (i % 31))  # never the right one, never privileged
        put(5, bth(0x64, ud_qpn, i) + deth(bad, ud_qpn) + data)
    print(" ".join(f"class{c}={sent[c]}" for c in sorted(sent)) +
          f" must_drop={sum(sent[c] for c in (2, 3, 4, 5))} total={sum(sent.values())}")


# The peer QP numbers isolation.c's live QPs are connected to: 0x1001 for R1 and on.
ISOL_PEER = 0x1001


def isol(args):
    """Raw packets at isolation.c's live QPs, each QP at its expected PSN:
    R1 (RC): SEND FIRST (a full 1024-byte MTU of 'A'), then SEND MIDDLE of 100 bytes
       ('B'), which must be refused (a NAK, invalid request);
    R2, R3 (RC): FLUSH (AckReq) naming placement type 0 and selectivity 0, for 64 bytes
       at VA, with RKEY and with a wrong key: the same answer for both, and no ACK;
    U1 (UC): SEND FIRST, SEND FIRST again, then SEND ONLY of 32 bytes (the real SEND);
    U2 (UC): SEND FIRST, a 100-byte MIDDLE ('B'), a LAST ('C'), then the real SEND.
    Prints each answer and, last, "answers r1=.. r2=.. r3=..": per RC QP the answers'
    kinds (ACK, NAK<syndrome>, RESP<opcode>) or "none"."""
    src, dst, psn = args[0], args[1], int(args[2], 0)
    qpn = [int(a, 0) for a in args[3:8]]
    rkey, va = int(args[8], 0), int(args[9], 0)
    r1, r2, r3, u1, u2 = qpn
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF
    s.bind((src, SPORT))
    r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    r.bind((src, DPORT))
    r.settimeout(0.2)

    def put(transport):
        s.sendto(transport + icrc(src, dst, transport), (dst, DPORT))

    mtu, real = 1024, b"REALSEND" * 4
    put(bth(0x00, r1, psn) + b"A" * mtu)
    put(bth(0x01, r1, psn + 1, ack=True) + b"B" * 100)
    for q, key in ((r2, rkey), (r3, rkey ^ 0x00ABCD00)):
        feth = struct.pack("!I", 0)  # selectivity 0, placement type 0
        put(bth(0x1C, q, psn, ack=True) + reth(va, key, 64) + feth)
    put(bth(0x20, u1, psn) + b"A" * mtu)
    put(bth(0x20, u1, psn + 1) + b"A" * mtu)
    put(bth(0x24, u1, psn + 2) + real)
    put(bth(0x20, u2, psn) + b"A" * mtu)
    put(bth(0x21, u2, psn + 1) + b"B" * 100)
    put(bth(0x22, u2, psn + 2) + b"C" * 100)
    put(bth(0x24, u2, psn + 3) + real)
    kinds = {ISOL_PEER: [], ISOL_PEER + 1: [], ISOL_PEER + 2: []}
    for _ in range(25):  # 5 s at most
        try:
            pkt = r.recv(4096)
        except socket.timeout:
            continue
        if len(pkt) < 12:
            continue
        op, dqp, p = pkt[0], struct.unpack("!I", pkt[4:8])[0] & 0xFFFFFF, \
            struct.unpack("!I", pkt[8:12])[0] & 0xFFFFFF
        syn = pkt[12] if op in (0x0D, 0x0F, 0x10, 0x11, 0x12) and len(pkt) > 12 else None
        if op == 0x11 and syn is not None and syn & 0x60 == 0x60:
            kind = f"NAK{syn:02x}"
        elif op == 0x11:
            kind = "ACK"
        else:
            kind = f"RESP{op:02x}"
        print(f"answer to {dqp:#x}: opcode {op:#04x} psn {p:#x} {kind}")
        kinds.setdefault(dqp, []).append(kind)
    print("answers " + " ".join(f"r{i + 1}=" + (",".join(kinds[ISOL_PEER + i]) or "none")
                                for i in range(3)))


def main():
    if sys.argv[1:2] == ["--live"]:
        live(sys.argv[2:])
        return
    if sys.argv[1:2] == ["--isol"]:
        isol(sys.argv[2:])
        return
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
