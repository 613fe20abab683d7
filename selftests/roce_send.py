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


MODES = {"--live": live, "--isol": isol, "--forged": forged, "--reth": reth_long,
         "--storm": storm, "--pkey": pkey}


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
