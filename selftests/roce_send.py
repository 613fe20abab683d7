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
the QPs' peer, and the answers they get, which come back to SRC_IP's port 4791.

The modes --forged, --reth, --storm, --pkey and --mutate speak to peer_qps.py's QPs
(see below); --mutate is the packet mutation fuzzer (see mutate()). --pma speaks to the
device's performance management agent (see pma())."""
import json
import os
import random
import socket
import struct
import sys
import time
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
    if len(bth) > 4:  # a truncated one (--mutate) may end before
        bth[4] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + ip + udp + bytes(bth))
    return struct.pack("<I", crc)


def bth(opcode, qpn, psn, pad=0, ack=False, pkey=0xFFFF):
    return struct.pack("!BBHII", opcode, pad << 4, pkey, qpn & 0xFFFFFF,
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
        # On the wire FETH comes before RETH.
        put(bth(0x1C, q, psn, ack=True) + feth + reth(va, key, 64))
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


# Modes that speak to peer_qps.py's QPs, which are connected to the address this runs
# on: what they send in answer comes to this address's UDP port 4791, where a socket of
# ours takes it (and so nothing answers them with an ICMP port unreachable).
ROCE_PORT = 4791
# Opcodes of RC responses, and those of them with an AETH.
RESPONSES = {0x0D: "READ RESPONSE FIRST", 0x0E: "READ RESPONSE MIDDLE",
             0x0F: "READ RESPONSE LAST", 0x10: "READ RESPONSE ONLY",
             0x11: "ACKNOWLEDGE", 0x12: "ATOMIC ACKNOWLEDGE"}
WITH_AETH = (0x0D, 0x0F, 0x10, 0x11, 0x12)
SYNDROMES = {0x60: "NAK PSN sequence error", 0x61: "NAK invalid request",
             0x62: "NAK remote access error", 0x63: "NAK remote operational error",
             0x64: "NAK invalid RD request"}
MTU = 1024


def aeth(syndrome, msn=0):
    return struct.pack("!I", (syndrome << 24) | (msn & 0xFFFFFF))


def syndrome_name(s):
    if s >> 5 == 0:
        return "ACK"
    if s >> 5 == 1:
        return f"RNR NAK (timer {s & 0x1f})"
    return SYNDROMES.get(s, f"syndrome {s:#x}")


class Pkt:
    """A received RoCE v2 datagram (UDP payload, ICRC at its end)."""

    def __init__(self, data):
        self.opcode, _, self.pkey, self.qpn, p = struct.unpack("!BBHII", data[:12])
        self.qpn &= 0xFFFFFF
        self.psn = p & 0xFFFFFF
        self.syndrome = data[12] if self.opcode in WITH_AETH and len(data) >= 16 else None
        self.length = len(data)
        self.data = data

    def __str__(self):
        s = f"opcode {self.opcode:#04x} ({RESPONSES.get(self.opcode, 'request')}) " \
            f"to QPN {self.qpn:#x} PSN {self.psn:#x}"
        if self.syndrome is not None:
            s += f" AETH {syndrome_name(self.syndrome)}"
        return s


class Peer:
    """Sends from SRC (port SPORT, DF) to DST:4791; takes what comes to SRC:4791."""

    def __init__(self, src, dst):
        self.src, self.dst = src, dst
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.tx.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER: DF
        self.tx.bind((src, SPORT))
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.rx.bind((src, ROCE_PORT))
        self.sent = 0

    def put(self, transport):
        self.tx.sendto(transport + icrc(self.src, self.dst, transport), (self.dst, DPORT))
        self.sent += 1

    def take(self, seconds, until=None):
        """What arrives within `seconds` (or until `until(pkts)` says enough)."""
        pkts = []
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.rx.settimeout(left)
            try:
                data = self.rx.recv(65536)
            except socket.timeout:
                break
            if len(data) >= 12:
                pkts.append(Pkt(data))
            if until and until(pkts):
                break
        return pkts


def touch(path):
    with open(path, "w"):
        pass


def summary(pkts):
    kinds = {}
    for p in pkts:
        k = RESPONSES.get(p.opcode, f"request {p.opcode:#04x}")
        if p.syndrome is not None and p.opcode == 0x11:
            k += " " + syndrome_name(p.syndrome)
        kinds[k] = kinds.get(k, 0) + 1
    return ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) or "nothing"


def forged(args):
    """Forged responses, to QPs with sent work outstanding, for PSNs never sent.

        --forged SRC DST LISTEN_FILE N SPEC...    SPEC = QPN:FIRST:SPAN:PKTS:DEST

    A QP QPN (whose peer is SRC, its QP number DEST) sends PKTS request packets here
    with PSNs in FIRST..FIRST+SPAN-1: once they are all seen (30 s at most), N of each
    forged response goes to it for each PSN class: half the PSN space ahead of FIRST
    (and one less), just past the last PSN sent, one before FIRST, and 2^22 behind.
    The responses: ACK, RNR NAK, the four other NAKs, ATOMIC ACKNOWLEDGE and the four
    READ RESPONSEs (FIRST and MIDDLE a full 1 KiB MTU, LAST and ONLY 64 bytes).
    Exits 1 if the QPs' own packets did not come, or if they send anything again
    (before their acknowledgement timeout, over a minute: only a forged response taken
    for a real one can make them)."""
    src, dst, listen, n = args[0], args[1], args[2], int(args[3])
    specs = []
    for s in args[4:]:
        qpn, first, span, pkts, dest = (int(x, 0) for x in s.split(":"))
        specs.append((qpn, first, span, pkts, dest))
    peer = Peer(src, dst)
    touch(listen)

    def seen_all(pkts):
        return all(len({p.psn for p in pkts if p.qpn == d}) >= k for _, _, _, k, d in specs)

    pkts = peer.take(30, seen_all)
    ok = True
    for qpn, first, span, k, dest in specs:
        psns = sorted({p.psn for p in pkts if p.qpn == dest})
        outside = [x for x in psns if (x - first) % PSN_MOD >= span]
        print(f"QP {qpn:#x} sent {len(psns)} PSNs {[hex(x) for x in psns]} "
              f"(want {k} within {first:#x}+{span})")
        if len(psns) < k or outside:
            ok = False
    if not ok:
        print("FAIL: the QPs' requests did not all come")
        sys.exit(1)
    kinds = [(0x11, 0x1F), (0x11, 0x20 | 14), (0x11, 0x60), (0x11, 0x61), (0x11, 0x62),
             (0x11, 0x63), (0x12, 0x1F), (0x0D, 0x1F), (0x0E, None), (0x0F, 0x1F),
             (0x10, 0x1F)]
    # Nothing the QPs sent may be answered before their acknowledgement timeout (over a
    # minute): a request sent again answers a forged response. After each PSN class, the
    # QPs' packets of the 0.5 s after it say which one made them send again.
    again = []
    for qpn, first, span, _, dest in specs:
        last = (first + span - 1) % PSN_MOD
        classes = {"half ahead": first + (1 << 23), "half ahead - 1": first + (1 << 23) - 1,
                   "just past the last sent": last + 1, "one before the first": first - 1,
                   "2^22 behind": first - (1 << 22)}
        for cname, p in classes.items():
            for i in range(n):
                for opcode, syn in kinds:
                    t = bth(opcode, qpn, p % PSN_MOD)
                    if syn is not None:
                        t += aeth(syn, i)
                    if opcode == 0x12:
                        t += struct.pack("!Q", 0xF00DF00DF00DF00D)
                    elif opcode in (0x0D, 0x0E):
                        t += b"\xee" * MTU
                    elif opcode in (0x0F, 0x10):
                        t += b"\xee" * 64
                    peer.put(t)
            sent = peer.take(0.5)
            if sent:
                again.append(f"QP {qpn:#x} after {cname} ({p % PSN_MOD:#x}): {summary(sent)}")
        print(f"to QP {qpn:#x}: {n} x {len(kinds)} forged responses x {len(classes)} PSN "
              f"classes: " + ", ".join(f"{c} {p % PSN_MOD:#x}" for c, p in classes.items()))
    again += [f"in the 2 s after: {summary(x)}" for x in [peer.take(2)] if x]
    print(f"forged={peer.sent}; the QPs sent again: " + ("; ".join(again) or "nothing"))
    if again:
        print("FAIL: forged responses for PSNs never sent made a QP send again")
        sys.exit(1)


def reth_cases():
    """(name, opcode, RETH length, payload length) of mode --reth, one per QP."""
    return [("WRITE FIRST, length 0x80000001", 0x06, 0x80000001, MTU),
            ("WRITE FIRST, length 0xffffffff", 0x06, 0xFFFFFFFF, MTU),
            ("WRITE ONLY, length 0x80000001", 0x0A, 0x80000001, 32),
            ("WRITE ONLY, length 0xffffffff", 0x0A, 0xFFFFFFFF, 32),
            ("READ REQUEST, length 0x80000001", 0x0C, 0x80000001, 0),
            ("READ REQUEST, length 0xffffffff", 0x0C, 0xFFFFFFFF, 0)]


def reth_long(args):
    """RDMA requests whose RETH DMA length is above 2^31 (invalid, IB spec C9-94).

        --reth SRC DST LISTEN_FILE QPN:DEST,... PSN RKEY VA

    One case of reth_cases() to each QP, at its expected PSN, aimed at RKEY/VA; what
    comes back in 2 s is printed. Each may be dropped or answered with one NAK invalid
    request for its PSN, nothing else (no READ response, no ACK, no other NAK): exits
    1 otherwise."""
    src, dst, listen = args[0], args[1], args[2]
    qps = [tuple(int(x, 0) for x in q.split(":")) for q in args[3].split(",")]
    p, rkey, va = int(args[4], 0), int(args[5], 0), int(args[6], 0)
    peer = Peer(src, dst)
    touch(listen)
    cases = reth_cases()
    for (name, opcode, length, payload), (qpn, _) in zip(cases, qps):
        peer.put(bth(opcode, qpn, p, ack=True) + reth(va, rkey, length) + b"\xee" * payload)
    pkts = peer.take(2)
    ok = True
    for (name, *_), (qpn, dest) in zip(cases, qps):
        got = [x for x in pkts if x.qpn == dest]
        fine = not got or (len(got) == 1 and got[0].opcode == 0x11 and
                           got[0].syndrome == 0x61 and got[0].psn == p)
        verdict = ("dropped" if not got else "NAK invalid request" if fine else "BAD")
        print(f"{name} to QP {qpn:#x}: {verdict}: " +
              ("; ".join(str(x) for x in got) or "no answer"))
        ok &= fine
    other = [x for x in pkts if x.qpn not in {d for _, d in qps}]
    if other:
        print("other answers: " + "; ".join(str(x) for x in other))
    if not ok:
        print("FAIL: want no answer or one NAK invalid request per request")
        sys.exit(1)


def netdev_counter(dev, name):
    with open(f"/sys/class/net/{dev}/statistics/{name}") as f:
        return int(f.read())


def storm(args):
    """A duplicate-READ storm.

        --storm SRC DST LISTEN_FILE QPN PSN RKEY VA LEN N SECONDS NETDEV [MAX_SECONDS]

    One READ of LEN bytes (QPN's expected PSN PSN, at RKEY/VA), its responses counted
    until they stop; then N duplicates of it paced over SECONDS (half at its first PSN,
    half at one of its other PSNs, each asking for the rest of the READ); then what
    still comes until it stops. Nothing is read from the socket (what does not fit its
    buffer is dropped there): every count is NETDEV's (all that came from the device).
    "Stops" means NETDEV received nothing for 3 s; each wait lasts 120 s at most.
    Prints `storm start` as the storm starts, and the counts. Exits 1 if the storm took
    more than MAX_SECONDS (5 times SECONDS if not given) to send (the machine stalled),
    or if the device was still sending 120 s after it."""
    src, dst, listen = args[0], args[1], args[2]
    qpn, p, rkey, va, length, n = (int(x, 0) for x in args[3:9])
    seconds, netdev = float(args[9]), args[10]
    bound = float(args[11]) if len(args) > 11 else 5 * seconds
    npsn = max(1, -(-length // MTU))
    peer = Peer(src, dst)
    touch(listen)

    def stats():
        return netdev_counter(netdev, "rx_packets"), netdev_counter(netdev, "rx_bytes")

    def settle():
        """(packets, bytes, seconds until the last growth, whether it stopped)."""
        c0, b0 = stats()
        t0 = time.monotonic()
        prev, still, last = c0, 0, t0
        while time.monotonic() - t0 < 120 and still < 6:
            time.sleep(0.5)
            c, _ = stats()
            if c == prev:
                still += 1
            else:
                still, prev, last = 0, c, time.monotonic()
        c1, b1 = stats()
        return c1 - c0, b1 - b0, last - t0, still >= 6

    c0, b0 = stats()
    peer.put(bth(0x0C, qpn, p, ack=True) + reth(va, rkey, length))
    _, _, t, quiet = settle()
    c1, b1 = stats()
    print(f"READ of {length} bytes ({npsn} responses): {c1 - c0} packets ({b1 - b0} bytes) "
          f"came in {t:.1f} s" + ("" if quiet else ", STILL COMING after 120 s") +
          ("" if c1 - c0 >= npsn else f": {npsn - (c1 - c0)} responses never came "
           "(this peer does not ask again)"), flush=True)
    if not quiet:
        print("FAIL: the device kept sending responses")
        sys.exit(1)
    print("storm start", flush=True)
    rng = random.Random(4791)
    t1 = time.monotonic()
    for i in range(n):
        q = p if i % 2 == 0 else (p + rng.randrange(npsn)) % PSN_MOD
        peer.put(bth(0x0C, qpn, q, ack=True) + reth(va, rkey, length))
        ahead = t1 + (i + 1) * seconds / n - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    t2 = time.monotonic()
    c2, b2 = stats()
    print(f"storm: {n} duplicate READs sent in {t2 - t1:.1f} s; meanwhile {c2 - c1} "
          f"packets ({b2 - b1} bytes) came back", flush=True)
    c, b, t, quiet = settle()
    c3, b3 = c2 + c, b2 + b
    print(f"after the storm: {c} packets ({b} bytes) for {t:.1f} s, "
          f"{'then quiet' if quiet else 'STILL COMING after 120 s'}")
    print(f"amplification: {n} duplicate requests -> {c3 - c1} packets, {b3 - b1} bytes "
          f"({(c3 - c1) / n:.1f} packets, {(b3 - b1) / n / 1024:.1f} KiB per request; "
          f"{npsn} packets a whole READ)")
    if t2 - t1 > bound:
        print(f"FAIL: the storm took {t2 - t1:.1f} s to send, want at most {bound:.0f}")
        sys.exit(1)
    if not quiet:
        print("FAIL: the device kept sending responses")
        sys.exit(1)
    if npsn >= 3:
        mid_read(peer, qpn, p, rkey, va, length, npsn)


def mid_read(peer, qpn, p, rkey, va, length, npsn):
    """A requester that lost the last responses of a READ asks for the rest again, from
    the first it lost: the answer goes on at that PSN with MIDDLE... and LAST (what
    rxe's requester takes there), not a new FIRST."""
    peer.rx.setblocking(False)
    try:
        while peer.rx.recv(65536):
            pass
    except BlockingIOError:
        pass
    peer.rx.setblocking(True)
    k = npsn - 3
    q = (p + k) % PSN_MOD
    peer.put(bth(0x0C, qpn, q, ack=True) + reth(va + k * MTU, rkey, length - k * MTU))
    got = [(x.psn, x.opcode) for x in peer.take(10, until=lambda ps: len(ps) >= 3)
           if 0x0D <= x.opcode <= 0x10]
    want = [(q, 0x0E), ((q + 1) % PSN_MOD, 0x0E), ((q + 2) % PSN_MOD, 0x0F)]
    show = ", ".join(f"{RESPONSES.get(o, hex(o))} PSN {n:#x}" for n, o in got) or "nothing"
    print(f"READ asked again from its response {k} of {npsn}: {show}")
    if got != want:
        print("FAIL: want READ RESPONSE MIDDLE, MIDDLE, LAST from the PSN asked for")
        sys.exit(1)


def pkey(args):
    """Packets with P_Keys that do not match the port's.

        --pkey SRC DST LISTEN_FILE N RC_QPN RC_PSN UD_QPN QKEY RKEY VA

    For each P_Key of BAD_PKEYS, N times: an RC SEND ONLY and an RC RDMA WRITE ONLY (to
    RKEY/VA) at the RC QP's expected PSN, and a UD SEND ONLY with the right Q_Key; none
    may be answered in the 2 s after. Then the control packets (peer_qps.py's
    CONTROL_*): an RC SEND ONLY with P_Key 0xffff, which must be acknowledged, and UD
    SEND ONLYs with 0x7fff and 0xffff. Exits 1 if something answered a foreign P_Key's
    packet or the control SEND went unacknowledged."""
    src, dst, listen, n = args[0], args[1], args[2], int(args[3])
    rc, rc_psn, ud, qkey, rkey, va = (int(x, 0) for x in args[4:10])
    peer = Peer(src, dst)
    touch(listen)
    data = b"foreign P_Key!!!" * 2
    for i in range(n):
        for k in BAD_PKEYS:
            peer.put(bth(0x04, rc, rc_psn, ack=True, pkey=k) + data)
            peer.put(bth(0x0A, rc, rc_psn, ack=True, pkey=k) + reth(va, rkey, len(data)) + data)
            peer.put(bth(0x64, ud, i, pkey=k) + deth(qkey, 0x77) + data)
    bad = peer.take(2)
    nbad = peer.sent
    print(f"{nbad} packets with P_Keys {[hex(k) for k in BAD_PKEYS]}; answered with: "
          f"{summary(bad)}" + "".join(f"\n  {x}" for x in bad[:8]))
    # peer_qps.py's CONTROL_RC and CONTROL_UD (that one needs pyverbs, this one not).
    ctl_rc = b"control RC SEND, P_Key 0xffff...."
    ctl_ud = {0x7FFF: b"control UD SEND, P_Key 0x7fff....",
              0xFFFF: b"control UD SEND, P_Key 0xffff...."}
    # Payloads whose length is not a multiple of 4 say so in the pad count.
    pad = -len(ctl_rc) % 4
    peer.put(bth(0x04, rc, rc_psn, pad=pad, ack=True) + ctl_rc + b"\0" * pad)
    for k, d in ctl_ud.items():
        pad = -len(d) % 4
        peer.put(bth(0x64, ud, 1000 + k, pad=pad, pkey=k) + deth(qkey, 0x77) + d + b"\0" * pad)
    ctl = peer.take(2)
    print(f"control packets answered with: {summary(ctl)}" + "".join(f"\n  {x}" for x in ctl))
    acked = any(x.opcode == 0x11 and x.syndrome is not None and x.syndrome >> 5 == 0 and
                x.psn == rc_psn for x in ctl)
    if bad or not acked:
        print("FAIL: " + ("packets with a foreign P_Key were answered" if bad else
                          "the control SEND was not acknowledged"))
        sys.exit(1)


# P_Keys that do not match the port's 0xffff: another partition (low 15 bits other than
# 0x7fff, full or limited member) or the invalid P_Key (low 15 bits 0). 0x7fff is not
# one: a limited member of the default partition matches a full member.
BAD_PKEYS = (0x0001, 0x8001, 0x0000, 0x8000, 0x7FFE, 0xFFFE)


# The performance management class and its methods and attributes (IBA 16.1), and the
# Q_Key of the GSI QP (QP1).
PERF_MGMT, GET, SET, GET_RESP, TRAP = 0x04, 0x01, 0x02, 0x81, 0x05
CLASS_PORT_INFO, PORT_SAMPLES_CONTROL, PORT_COUNTERS, PORT_COUNTERS_EXT = 0x01, 0x10, 0x12, 0x1D
QP1_QKEY = 0x80010000
BAD_VERSION, UNSUPPORTED, INVALID_VALUE = 0x0004, 0x000C, 0x001C


def pma_mad(method, attr, tid, version=1, port=1):
    """A PMA MAD (256 bytes: common header, 40 reserved bytes, data) of class version
    `version` selecting port `port`."""
    hdr = struct.pack("!BBBBHHQHHI", 1, PERF_MGMT, version, method, 0, 0, tid, attr, 0, 0)
    return hdr + bytes(40) + bytes([0, port]) + bytes(190)


def pma(args):
    """PMA MADs to the device's GSI QP, from the network (the MAD layer hands each to
    the device's process_mad first).

        --pma SRC DST

    Each request, one at a time: a GET of ClassPortInfo, PortCounters and
    PortCountersExtended must be answered (GetResp, its TID, status 0; ClassPortInfo
    says the extended counters are there, PortCountersExtended counts packets sent); a
    GET of an attribute not offered (PortSamplesControl) and a SET (clearing the
    counters) must be answered with the status "unsupported method/attribute", a GET of
    class version 2 with "bad version", a GET of another port's counters with "invalid
    attribute value"; a response (GetResp) and a Trap must not be answered at all: an
    agent that answered responses would answer another such agent without end. Exits 1
    on any other outcome."""
    src, dst = args[0], args[1]
    peer = Peer(src, dst)
    cases = [("GET ClassPortInfo", GET, CLASS_PORT_INFO, 0, {}),
             ("GET PortCounters", GET, PORT_COUNTERS, 0, {}),
             ("GET PortCountersExtended", GET, PORT_COUNTERS_EXT, 0, {}),
             ("GET PortSamplesControl", GET, PORT_SAMPLES_CONTROL, UNSUPPORTED, {}),
             ("SET PortCounters", SET, PORT_COUNTERS, UNSUPPORTED, {}),
             ("GET PortCounters, class version 2", GET, PORT_COUNTERS, BAD_VERSION,
              {"version": 2}),
             ("GET PortCountersExtended of port 5", GET, PORT_COUNTERS_EXT, INVALID_VALUE,
              {"port": 5}),
             ("GetResp PortCounters", GET_RESP, PORT_COUNTERS, None, {}),
             ("Trap", TRAP, PORT_COUNTERS, None, {})]
    bad = []
    for i, (name, method, attr, want, kw) in enumerate(cases):
        tid = 0x5A5A0000_00000000 | i
        peer.put(bth(0x64, 1, i) + deth(QP1_QKEY, 1) + pma_mad(method, attr, tid, **kw))
        # A UD SEND ONLY: BTH, DETH, the MAD, ICRC.
        got = [p.data[20:276] for p in peer.take(2) if p.opcode == 0x64 and p.length >= 280]
        seen = []
        for m in got:
            _, cls, _, meth, status, _, t, a, _, _ = struct.unpack("!BBBBHHQHHI", m[:24])
            seen.append(f"class {cls:#x} method {meth:#x} status {status:#x} TID {t:#x} "
                        f"attribute {a:#x}")
        print(f"{name}: " + ("; ".join(seen) or "no answer"))
        ok = len(got) == 0 if want is None else len(got) == 1
        if ok and got:
            m = got[0]
            _, cls, _, meth, status, _, t, a, _, _ = struct.unpack("!BBBBHHQHHI", m[:24])
            ok = (cls, meth, status, t, a) == (PERF_MGMT, GET_RESP, want, tid, attr)
            data = m[64:]
            if ok and want == 0 and attr == CLASS_PORT_INFO:
                # CapabilityMask bit 9: PortCountersExtended offered.
                ok = struct.unpack("!H", data[2:4])[0] & 0x0200 != 0
            if ok and want == 0 and attr == PORT_COUNTERS_EXT:
                # PortSelect echoed; PortXmitPkts (after 4 bytes of selects and 4 reserved,
                # and PortXmitData and PortRcvData) counts at least the answers so far.
                ok = data[1] == 1 and struct.unpack("!Q", data[24:32])[0] >= 2
        if not ok:
            bad.append(name)
    if bad:
        print("FAIL: " + ", ".join(bad))
        sys.exit(1)


# Mode --mutate: valid packets of every opcode, aimed at peer_qps.py mutate's live QPs,
# then mutated.
MUT_TAG = b"MUTF"
# A payload begins with MUT_TAG, the packet's serial and two check bytes of the serial
# with their top bits set: a payload shorter than that, in a buffer filled with a byte
# below 0x80 (peer_qps.py's canary), or placed over the tag of an older one, leaves no
# tag a receiver could take for another packet's.
TAG_LEN = 10


def mut_tag(serial):
    """The first TAG_LEN bytes of the payload of the packet numbered `serial`."""
    h = (serial * 0x9E3779B1) >> 7
    return MUT_TAG + struct.pack("!IBB", serial, 0x80 | (h & 0x7F), 0x80 | (h >> 7 & 0x7F))


def tag_serial(b):
    """The serial whose tag `b` begins with, or None."""
    if len(b) < TAG_LEN or b[:4] != MUT_TAG:
        return None
    serial = struct.unpack("!I", b[4:8])[0]
    return serial if b[:TAG_LEN] == mut_tag(serial) else None


TRANSPORT = {"rc": 0, "uc": 1, "ud": 3}
# Extension headers in wire order, each a struct format of its fields.
EXT_FMT = {"feth": "!I", "deth": "!II", "reth": "!QII", "atomic": "!QIQQ", "aeth": "!I",
           "aack": "!Q", "imm": "!I", "ieth": "!I"}
EXT_ORDER = tuple(EXT_FMT)
# The extension headers of each opcode (the low five bits for RC and UC; UD's by their
# whole opcode).
LAYOUT = {0x00: (), 0x01: (), 0x02: (), 0x03: ("imm",), 0x04: (), 0x05: ("imm",),
          0x06: ("reth",), 0x07: (), 0x08: (), 0x09: ("imm",), 0x0A: ("reth",),
          0x0B: ("reth", "imm"), 0x0C: ("reth",), 0x0D: ("aeth",), 0x0E: (),
          0x0F: ("aeth",), 0x10: ("aeth",), 0x11: ("aeth",), 0x12: ("aeth", "aack"),
          0x13: ("atomic",), 0x14: ("atomic",), 0x16: ("ieth",), 0x17: ("ieth",),
          0x1C: ("feth", "reth"), 0x1D: ("reth",), 0x64: ("deth",), 0x65: ("deth", "imm")}
PSN_DELTAS = (0, 1, -1, 2, -2, 16, -16, (1 << 22), -(1 << 22), (1 << 23) - 1,
              -((1 << 23) - 1), 1 << 23, (1 << 23) + 1, -((1 << 23) + 1))
RETH_LENS = (0, 1, MTU - 1, MTU, MTU + 1, 2 * MTU, 4096, (1 << 31) - 1, 1 << 31,
             (1 << 32) - 1)
PAYLOAD_LENS = (0, 1, 3, 4, 5, 8, MTU - 1, MTU, MTU + 1, MTU + 4, 2 * MTU, 4096)
SYNDROMES_ANY = (0x00, 0x1F, 0x20, 0x2E, 0x3F, 0x40, 0x5F, 0x60, 0x61, 0x62, 0x63, 0x64,
                 0x65, 0x7F, 0x80, 0xFF)


class Raw:
    """A packet under construction: BTH fields, extension headers (name -> fields),
    a payload of `plen` bytes (the packet's tag first, see mut_tag(), then `fill`);
    `pad` None means the pad count the payload needs, and the pad bytes are always
    those the payload needs."""

    def __init__(self, op, qpn, psn, plen=0, ack=True, **hdrs):
        self.op, self.qpn, self.psn, self.plen, self.ack = op, qpn, psn, plen, ack
        self.pkey, self.b1, self.resv = 0xFFFF, 0, 0
        self.hdrs = {k: list(v) for k, v in hdrs.items()}
        self.pad = None
        self.fill = 0x77
        self.cut = None      # bytes of the transport kept (truncation)
        self.flips = ()      # (offset, xor) applied to the transport

    def copy(self):
        c = Raw(self.op, self.qpn, self.psn, self.plen, self.ack, **self.hdrs)
        c.pkey, c.b1, c.resv, c.pad, c.fill = self.pkey, self.b1, self.resv, self.pad, self.fill
        return c

    def header_bytes(self):
        out = b""
        for name in EXT_ORDER:
            if name in self.hdrs:
                fmt = EXT_FMT[name]
                vals = [v & ((1 << (64 if c == "Q" else 32)) - 1)
                        for v, c in zip(self.hdrs[name], fmt[1:])]
                out += struct.pack(fmt, *vals)
        return out

    def boundaries(self):
        """Offsets where a header ends: 0, inside the BTH, after it and after each
        extension header."""
        b = [0, 1, 4, 8, 12]
        at = 12
        for name in EXT_ORDER:
            if name in self.hdrs:
                at += struct.calcsize(EXT_FMT[name])
                b.append(at)
        return b

    def wire(self, serial):
        natural = -self.plen % 4
        pad = natural if self.pad is None else self.pad
        b1 = ((pad & 3) << 4) | self.b1
        t = struct.pack("!BBHII", self.op & 0xFF, b1, self.pkey, (self.resv << 24) |
                        (self.qpn & 0xFFFFFF), (self.psn % PSN_MOD) | (self.ack << 31))
        t += self.header_bytes()
        tag = mut_tag(serial)
        t += (tag + bytes([self.fill]) * max(0, self.plen - 8))[:self.plen] + b"\0" * natural
        if self.flips:
            t = bytearray(t)
            for off, x in self.flips:
                if off < len(t):
                    t[off] ^= x
            t = bytes(t)
        return t if self.cut is None else t[:self.cut]


class Target:
    """One of peer_qps.py's QPs as the sender sees it: where it expects the next
    request (learnt from its answers and its revivals), and the requests it sent."""

    def __init__(self, q):
        self.name, self.kind, self.qpn = q["name"], q["kind"], q["qpn"]
        self.rq_psn, self.sq_psn, self.dest = q["rq_psn"], q["sq_psn"], q["dest"]
        self.expect = self.rq_psn
        self.epoch = 0
        self.reqs = []         # the QP's own requests, the last 16: (opcode, psn, bytes)
        self.sent = 0
        self.answers = {}

    def base(self, low):
        return (TRANSPORT[self.kind] << 5) | low


class Fuzz:
    """The sender of --mutate (see mutate())."""

    def __init__(self, src, dst, d, seed):
        with open(os.path.join(d, "targets")) as f:
            self.t = json.load(f)
        self.d = d
        self.rng = random.Random(seed)
        self.peer = Peer(src, dst)
        self.peer.rx.setblocking(False)
        self.src, self.dst = src, dst
        self.targets = [Target(q) for q in self.t["qps"]]
        self.gentle = next(x for x in self.targets if x.kind == "rc")
        self.by_qpn = {x.qpn: x for x in self.targets}
        self.by_dest = {x.dest: x for x in self.targets}
        self.serial = 0
        self.sent, self.answers, self.drops = {}, {}, {}
        self.forbidden = []
        self.recent = []       # recent unmutated packets (with their ICRC), for dup
        self.unsendable = 0
        self.epoch_t = 0.0
        # PKTFUZZ_CLASSES=a,b,...: only these mutation classes (and "none").
        # PKTFUZZ_NO_RESPONSES=1: nothing whose opcode is a response's (READ responses,
        # ACKs, atomic ACKs) goes out, whatever made it one.
        only = os.environ.get("PKTFUZZ_CLASSES")
        if only:
            keep = set(only.split(",")) | {"none"}
            self.CLASSES = tuple(c for c in self.CLASSES if c[0] in keep)
            self.GENTLE = tuple(c for c in self.GENTLE if c[0] in keep)
        self.no_responses = os.environ.get("PKTFUZZ_NO_RESPONSES") == "1"
        # PKTFUZZ_NO_ZERO_WRITES=1: no RDMA WRITE FIRST or ONLY (RC or UC) whose RETH
        # DMA length is 0, whatever made it one.
        self.no_zero_writes = os.environ.get("PKTFUZZ_NO_ZERO_WRITES") == "1"
        self.held = 0
        trace = os.environ.get("PKTFUZZ_TRACE")
        self.trace = open(trace, "w", buffering=1) if trace else None  # kept on a crash

    # Answers and revivals.
    def take(self):
        while True:
            try:
                b = self.peer.rx.recv(65536)
            except BlockingIOError:
                return
            if len(b) < 16:
                continue
            op, psn = b[0], struct.unpack("!I", b[8:12])[0] & 0xFFFFFF
            t = self.by_dest.get(struct.unpack("!I", b[4:8])[0] & 0xFFFFFF)
            if op in RESPONSES:
                k = RESPONSES[op]
                if op in WITH_AETH:
                    syn = b[12]
                    if op == 0x11:
                        k = syndrome_name(syn)
                    if t and op == 0x11 and syn >> 5 == 0:
                        t.expect = (psn + 1) % PSN_MOD
                    elif t and op == 0x11 and syn == 0x60:
                        t.expect = psn
                    elif t and op in (0x0F, 0x10):
                        t.expect = (psn + 1) % PSN_MOD
            else:
                k = f"request {op:#04x}"
                if t:
                    t.reqs = (t.reqs + [(op, psn, b[:-4])])[-16:]
            self.answers[k] = self.answers.get(k, 0) + 1
            if t:
                t.answers[k] = t.answers.get(k, 0) + 1

    def epochs(self):
        try:
            with open(os.path.join(self.d, "epochs")) as f:
                e = json.load(f)
        except (OSError, ValueError):
            return
        for t in self.targets:
            n = e.get(str(t.qpn), 0)
            if n != t.epoch:
                t.epoch, t.expect, t.reqs = n, t.rq_psn, []

    # Valid messages.
    def va(self, size, align=1):
        off = self.rng.randrange(0, max(1, self.t["len"] - size + 1))
        return self.t["va"] + off - off % align

    def payload_len(self):
        return self.rng.choice((8, 16, 32, 61, 64, 200, 512, MTU - 3, MTU))

    def requests(self, t):
        """A valid message to t at the PSN it expects: (name, packets, PSNs it takes)."""
        r, p, q, mtu, rkey = self.rng, t.expect, t.qpn, MTU, self.t["rkey"]
        if t.kind == "ud":
            qk = [self.t["qkey"], t.dest]
            if r.random() < 0.5:
                return "ud send only", [Raw(0x64, q, p, self.payload_len(), False, deth=qk)], 0
            return "ud send only imm", [Raw(0x65, q, p, self.payload_len(), False, deth=qk,
                                            imm=[r.getrandbits(32)])], 0
        names = ["send only", "send only imm", "send multi", "write only", "write only imm",
                 "write multi"]
        if t.kind == "rc":
            names += ["send only inv", "read", "cmp swap", "fetch add", "atomic write",
                      "captured"]
            if not self.no_responses:
                names += ["response", "response"]
            if self.t["flush"]:
                names.append("flush")
        name = r.choice(names)
        b = t.base
        if name == "send only":
            return name, [Raw(b(0x04), q, p, self.payload_len())], 1
        if name == "send only imm":
            return name, [Raw(b(0x05), q, p, self.payload_len(), imm=[r.getrandbits(32)])], 1
        if name == "send only inv":
            return name, [Raw(0x17, q, p, self.payload_len(), ieth=[rkey])], 1
        if name in ("send multi", "write multi"):
            n = r.randrange(2, 5)
            last = r.randrange(1, mtu + 1)
            total = (n - 1) * mtu + last
            w = name == "write multi"
            first = Raw(b(0x06 if w else 0x00), q, p, mtu,
                        **({"reth": [self.va(total), rkey, total]} if w else {}))
            pk = [first] + [Raw(b(0x07 if w else 0x01), q, p + i, mtu) for i in range(1, n - 1)]
            ends = [0x08, 0x09] if w else [0x02, 0x03] + ([0x16] if t.kind == "rc" else [])
            end = r.choice(ends)
            hd = {}
            if end in (0x03, 0x09):
                hd["imm"] = [r.getrandbits(32)]
            if end == 0x16:
                hd["ieth"] = [rkey]
            pk.append(Raw(b(end), q, p + n - 1, last, **hd))
            return name, pk, n
        if name in ("write only", "write only imm"):
            n = self.payload_len()
            hd = {"reth": [self.va(n), rkey, n]}
            if name.endswith("imm"):
                hd["imm"] = [r.getrandbits(32)]
            return name, [Raw(b(0x0B if "imm" in name else 0x0A), q, p, n, **hd)], 1
        if name == "read":
            n = r.choice((1, 8, 100, MTU, MTU + 1, 3000, 4096))
            return name, [Raw(0x0C, q, p, reth=[self.va(n), rkey, n])], -(-n // mtu)
        if name in ("cmp swap", "fetch add"):
            return name, [Raw(0x13 if name == "cmp swap" else 0x14, q, p,
                              atomic=[self.va(8, 8), rkey, r.getrandbits(64),
                                      r.getrandbits(64)])], 1
        if name == "atomic write":
            return name, [Raw(0x1D, q, p, 8, reth=[self.va(8, 8), rkey, 8])], 1
        if name == "flush":
            n = r.choice((1, 64, MTU, 4096))
            place = (1, 2, 3) if self.t.get("flush_persistent") else (1,)
            return name, [Raw(0x1C, q, p, feth=[r.choice(place)],
                              reth=[self.va(n), rkey, n])], 1
        if name == "captured":
            return self.captured(t)
        return self.response(t)

    def captured(self, t):
        """One of the QP's own requests, sent back to it at the PSN it expects, with
        the target key and an address of its range where it has a RETH or AtomicETH."""
        reqs = [x for x in t.reqs if (x[0] & 0x1F) in LAYOUT and x[0] >> 5 == 0]
        if not reqs:
            return self.requests_plain(t)
        op, _, b = self.rng.choice(reqs)
        lay = LAYOUT[op & 0x1F]
        hd, at = {}, 12
        for name in EXT_ORDER:
            if name in lay:
                n = struct.calcsize(EXT_FMT[name])
                hd[name] = list(struct.unpack(EXT_FMT[name], b[at:at + n]))
                at += n
        plen = max(0, len(b) - at - ((b[1] >> 4) & 3))
        if "reth" in hd:
            hd["reth"][0] = self.va(min(hd["reth"][2], self.t["len"]))
            hd["reth"][1] = self.t["rkey"]
        if "atomic" in hd:
            hd["atomic"][0] = self.va(8, 8)
            hd["atomic"][1] = self.t["rkey"]
        psns = -(-hd["reth"][2] // MTU) if op == 0x0C else 1
        return f"captured {op:#04x}", [Raw(op, t.qpn, t.expect, plen, **hd)], psns

    def requests_plain(self, t):
        return "send only", [Raw(t.base(0x04), t.qpn, t.expect, self.payload_len())], 1

    def response(self, t):
        """Responses to the QP's own requests (READ responses, an atomic ACK, an ACK),
        at their PSNs; at its first send PSN if it sent nothing yet."""
        r, q = self.rng, t.qpn
        reqs = [x for x in t.reqs if x[0] in (0x0C, 0x13, 0x14, 0x02, 0x04, 0x0A, 0x08)]
        msn = r.getrandbits(24)
        if not reqs:
            return "ack", [Raw(0x11, q, t.sq_psn, ack=False, aeth=[0x1F << 24 | msn])], 0
        op, p, b = r.choice(reqs)
        if op == 0x0C:
            n = struct.unpack("!I", b[24:28])[0] if len(b) >= 28 else MTU
            n = min(n, 64 * MTU)
            if n <= MTU:
                return "read response only", [Raw(0x10, q, p, n, False,
                                                  aeth=[0x1F << 24 | msn])], 0
            k = -(-n // MTU)
            pk = [Raw(0x0D, q, p, MTU, False, aeth=[0x1F << 24 | msn])]
            pk += [Raw(0x0E, q, p + i, MTU, False) for i in range(1, k - 1)]
            pk.append(Raw(0x0F, q, p + k - 1, n - (k - 1) * MTU, False,
                          aeth=[0x1F << 24 | msn]))
            return "read response multi", pk, 0
        if op in (0x13, 0x14):
            return "atomic ack", [Raw(0x12, q, p, 0, False, aeth=[0x1F << 24 | msn],
                                      aack=[r.getrandbits(64)])], 0
        return "ack", [Raw(0x11, q, p, 0, False, aeth=[0x1F << 24 | msn])], 0

    # Mutations: each changes one packet of a message, or returns False where it does
    # not apply.
    def key(self):
        r, k = self.rng, self.t["rkey"]
        return r.choice((k ^ r.randrange(1, 256), k ^ r.randrange(1, 256), k ^ 0x100,
                         (k + 0x100) & 0xFFFFFFFF, 0, 0xFFFFFFFF, self.t["rokey"],
                         r.choice(self.t["okeys"] or [0])))

    def edge(self):
        va, n = self.t["va"], self.t["len"]
        top = 1 << 64
        return self.rng.choice((va, va + 1, va + 4, va + n - 1, va + n - 8, va + n,
                                va + n - MTU, va + n - MTU + 1, va - 1, va - 8, va - MTU,
                                0, 1, top - 1, top - 8, top - MTU, top - 4096, 1 << 63))

    def mutate_one(self, cls, p, t):
        r = self.rng
        h = p.hdrs
        if cls == "psn":
            if r.random() < 0.2:
                p.psn = r.choice((0, 0xFFFFFF, 0x800000, 0x7FFFFF))
            else:
                p.psn = (p.psn + r.choice(PSN_DELTAS[1:])) % PSN_MOD
        elif cls == "reth_len":
            if "reth" not in h:
                return False
            h["reth"][2] = r.choice(RETH_LENS)
        elif cls == "va":
            x = [n for n in ("reth", "atomic") if n in h]
            if not x:
                return False
            h[r.choice(x)][0] = self.edge()
        elif cls == "rkey":
            x = [n for n in ("reth", "atomic", "ieth") if n in h]
            if not x:
                return False
            n = r.choice(x)
            h[n][0 if n == "ieth" else 1] = self.key()
        elif cls == "pad":
            if r.random() < 0.3 and p.plen:
                p.plen = r.randrange(0, 3)
            p.pad = r.choice([x for x in range(4) if x != -p.plen % 4])
        elif cls == "length":
            p.plen = r.choice(PAYLOAD_LENS)
        elif cls == "truncate":
            b = p.boundaries()
            body = 12 + len(p.header_bytes())
            p.cut = r.choice(b + [body + r.randrange(0, p.plen + 4)] if p.plen else b)
        elif cls == "opcode":
            o = p.op
            p.op = r.choice((o ^ 1, o + 1, o - 1, o ^ 2, o ^ 4, o ^ 0x20, o ^ 0x40, o ^ 0x60,
                             r.randrange(256))) & 0xFF
        elif cls == "flip":
            n = 12 + len(p.header_bytes())
            p.flips = tuple((r.randrange(n), 1 << r.randrange(8) if r.random() < 0.7
                             else r.randrange(1, 256)) for _ in range(r.randrange(1, 4)))
        elif cls == "qkey":
            if "deth" not in h:
                return False
            if r.random() < 0.7:
                h["deth"][0] = r.choice((h["deth"][0] ^ (1 << r.randrange(32)), 0,
                                         0xFFFFFFFF, 0x80000000 | h["deth"][0]))
            else:
                h["deth"][1] = r.getrandbits(32)
        elif cls == "aeth":
            if "aeth" not in h:
                return False
            h["aeth"][0] = (r.choice(SYNDROMES_ANY) << 24) | r.getrandbits(24)
        elif cls == "qpn":
            others = [x.qpn for x in self.targets if x is not t]
            p.qpn = r.choice(others + [p.qpn ^ 1, p.qpn + 1, 0, 1, 0xFFFFFF])
        elif cls == "pkey":
            p.pkey = r.choice(BAD_PKEYS + (0x7FFF,))
        elif cls == "bth_bits":
            x = r.randrange(4)
            if x == 0:
                p.b1 = r.choice((0x80, 0x40, 0xC0))   # solicited event, MigReq
            elif x == 1:
                p.b1 = r.randrange(1, 16)             # TVer
            elif x == 2:
                p.resv = r.randrange(1, 256)          # the reserved byte before the QPN
            else:
                p.ack = not p.ack
        elif cls == "immediate":
            x = [n for n in ("imm", "ieth") if n in h]
            if not x:
                return False
            h[r.choice(x)][0] = r.getrandbits(32)
        elif cls == "fill":
            p.fill = r.randrange(256)
        return True

    CLASSES = (("none", 12), ("psn", 12), ("reth_len", 8), ("va", 8), ("rkey", 8),
               ("pad", 6), ("length", 8), ("truncate", 8), ("opcode", 8), ("flip", 10),
               ("qkey", 4), ("aeth", 4), ("qpn", 4), ("pkey", 2), ("bth_bits", 3),
               ("immediate", 2), ("dup", 3))

    GENTLE = (("none", 30), ("psn", 25), ("dup", 10), ("bth_bits", 5), ("pkey", 5),
              ("immediate", 5), ("aeth", 5))

    def drop_reason(self, b, bad_icrc):
        """Why the device must drop transport b (before its ICRC), or None."""
        if bad_icrc:
            return "icrc"
        if len(b) < 12:
            return "short"
        if b[1] & 0x0F:
            return "tver"
        if struct.unpack("!H", b[2:4])[0] & 0x7FFF != 0x7FFF:
            return "pkey"
        t = self.by_qpn.get(struct.unpack("!I", b[4:8])[0] & 0xFFFFFF)
        if t is None:
            return None
        if b[0] >> 5 != TRANSPORT[t.kind]:
            return "transport"
        if (t.kind == "ud" and len(b) >= 20 and
                struct.unpack("!I", b[12:16])[0] != self.t["qkey"]):
            return "qkey"
        return None

    def send(self, cls, name, t, transport, bad_icrc):
        if self.no_responses and transport and 0x0D <= transport[0] <= 0x12:
            self.held += 1
            return
        if (self.no_zero_writes and len(transport) >= 28 and transport[0] >> 5 in (0, 1)
                and transport[0] & 0x1F in (0x06, 0x0A, 0x0B) and transport[24:28] == bytes(4)):
            self.held += 1
            return
        self.serial += 1
        crc = icrc(self.src, self.dst, transport)
        if bad_icrc:
            crc = bytes(x ^ 0xFF for x in crc[:1]) + crc[1:]
        try:
            self.peer.tx.sendto(transport + crc, (self.dst, DPORT))
        except OSError:
            self.unsendable += 1
            return
        key = cls + (" +bad_icrc" if bad_icrc else "")
        self.sent[key] = self.sent.get(key, 0) + 1
        t.sent += 1
        why = self.drop_reason(transport, bad_icrc)
        if why:
            self.drops[why] = self.drops.get(why, 0) + 1
            self.forbidden.append(self.serial)
        elif cls == "none":
            self.recent = (self.recent + [transport + crc])[-32:]
        if self.trace:
            self.trace.write(f"{time.monotonic():.3f} {self.serial} {t.name} "
                             f"{cls.replace(' ', '_')} "
                             f"{name.replace(' ', '_')} {int(bad_icrc)} "
                             f"{(transport + crc).hex()}\n")

    def one(self):
        """A message to a random target, one of its packets mutated: the class is
        drawn first, then messages until one has a packet it applies to (20 at most,
        else the last goes out unmutated)."""
        r = self.rng
        rc = [x for x in self.targets if x.kind == "rc"]
        t = r.choice(self.targets + rc)
        # Most mutations move an RC QP to the error state (and a revival starts it
        # afresh): the first RC QP gets mostly those that leave it alone, so that it
        # also meets mutated packets in the middle of messages, after duplicates and
        # with requests outstanding.
        classes = self.GENTLE if t is self.gentle and r.random() < 0.8 else self.CLASSES
        cls = r.choices([c for c, _ in classes], [w for _, w in classes])[0]
        if cls == "dup" and self.recent:
            self.serial += 1
            b = r.choice(self.recent)
            self.peer.tx.sendto(b, (self.dst, DPORT))
            self.sent["dup"] = self.sent.get("dup", 0) + 1
            if self.trace:
                self.trace.write(f"{time.monotonic():.3f} {self.serial} - dup dup 0 {b.hex()}\n")
            return 1
        if cls == "dup":
            cls = "none"
        for _ in range(20):
            name, pkts, psns = self.requests(t)
            i = r.randrange(len(pkts))
            if cls == "none":
                break
            m = pkts[i].copy()
            if self.mutate_one(cls, m, t):
                pkts[i] = m
                break
            t = r.choice(self.targets + rc)
        else:
            cls = "none"
        if cls == "none" and psns:
            t.expect = (t.expect + psns) % PSN_MOD
        for j, p in enumerate(pkts):
            bad = j == i and r.random() < 0.05
            transport = p.wire(self.serial + 1)   # send() takes the next serial
            self.send(cls if j == i else "rest of a mutated message" if cls != "none"
                      else "none", name, t, transport, bad)
        return len(pkts)


def mutate(args):
    """Mutated valid packets at live QPs of the three transports.

        --mutate SRC DST DIR SECONDS MAX RATE [SEED]

    DIR is peer_qps.py mutate's: its targets (QPs, PSNs, keys), its epochs (how often
    each QP was revived: its expected PSN is then the first again). Messages valid at
    the moment they are built (every opcode of RC: SENDs and RDMA WRITEs of one packet
    or several, with immediate data or invalidation, READ and atomic requests, FLUSH,
    ATOMIC WRITE, responses to the RC QPs' own requests, and those requests sent back
    to them; UC's SENDs and WRITEs; UD's SENDs), at the PSNs the QPs expect (learnt
    from their ACKs and NAKs), the target key and addresses of its range; then one
    packet of each is mutated (Fuzz.CLASSES: PSNs near and far from the window's edges,
    RETH lengths at the MTU and 2^31 boundaries, addresses at the range's edges and near
    2^64, keys one bit or byte away or of memory not opened, pad counts that do not fit,
    payload lengths near the MTU, truncation at every header boundary, neighbouring
    opcodes, bit and byte flips in the headers, Q_Keys, AETH syndromes, QPNs, P_Keys,
    BTH bits, duplicates), and one in twenty gets a wrong ICRC. At most RATE packets a
    second, for SECONDS or MAX packets. Every payload starts with MUT_TAG and the
    packet's serial; the serials of the packets the device must drop (wrong ICRC, TVer
    or P_Key, an opcode of another transport, a wrong Q_Key) go to DIR/forbidden.
    Prints the seed first (SEED replays the choices; answers and revivals steer the
    PSNs), then per-class counts and what came back. PKTFUZZ_TRACE=FILE writes every
    packet there."""
    src, dst, d = args[0], args[1], args[2]
    seconds, maxn, rate = float(args[3]), int(args[4]), float(args[5])
    if len(args) > 6 and args[6]:
        seed = int(args[6], 0)
    else:
        seed = random.SystemRandom().getrandbits(32)
    with open("/proc/uptime") as u:
        up = u.read().split()[0]
    print(f"seed {seed} (uptime {up} s)", flush=True)
    f = Fuzz(src, dst, d, seed)
    touch(os.path.join(d, "listen"))
    t0 = time.monotonic()
    next_t, report, n = t0, t0 + 10, 0
    while n < maxn and time.monotonic() - t0 < seconds:
        k = f.one()
        n += k
        f.take()
        now = time.monotonic()
        if now - f.epoch_t > 0.5:
            f.epoch_t = now
            f.epochs()
        if now > report:
            report += 10
            print(f"{now - t0:.0f} s: {n} packets, {sum(f.answers.values())} answers",
                  flush=True)
        next_t = max(next_t + k / rate, now - 1)
        if next_t > now:
            time.sleep(next_t - now)
    took = time.monotonic() - t0
    end = time.monotonic() + 2
    while time.monotonic() < end:
        f.take()
        time.sleep(0.05)
    with open(os.path.join(d, "forbidden"), "w") as out:
        out.write("".join(f"{s}\n" for s in f.forbidden))
    if f.trace:
        f.trace.close()
    print(f"sent {n - f.held} packets in {took:.1f} s ({n / took:.0f}/s), seed {seed}; "
          f"{f.unsendable} too long to send" +
          (f", {f.held} held back (PKTFUZZ_NO_*)" if f.held else ""))
    print("per mutation class: " + ", ".join(f"{k} {v}" for k, v in sorted(f.sent.items())))
    print("must be dropped: " + (", ".join(f"{k} {v}" for k, v in sorted(f.drops.items()))
                                 or "none") + f" ({len(f.forbidden)} in all)")
    print(f"came back ({sum(f.answers.values())}): " +
          (", ".join(f"{v} {k}" for k, v in sorted(f.answers.items())) or "nothing"))
    for t in f.targets:
        print(f"  {t.name} (QPN {t.qpn:#x}): {t.sent} packets, revived {t.epoch} time(s); "
              "from it: " + (", ".join(f"{v} {k}" for k, v in sorted(t.answers.items()))
                             or "nothing"))


MODES = {"--live": live, "--isol": isol, "--forged": forged, "--reth": reth_long,
         "--storm": storm, "--pkey": pkey, "--mutate": mutate, "--pma": pma}


def main():
    if sys.argv[1:2] and sys.argv[1] in MODES:
        MODES[sys.argv[1]](sys.argv[2:])
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
