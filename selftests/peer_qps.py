#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""QPs connected to a raw-socket peer, for roce_send.py to speak to (pyverbs).

    peer_qps.py MODE DEV ADDR PEER DIR [GO_TIMEOUT]

On DEV, through the RoCE v2 GID of the IPv4 address ADDR, connected QPs whose peer is
the IPv4 address PEER (where roce_send.py sends from, in another namespace, and takes
what the QPs send on its UDP port 4791: nothing else answers there). It prints

    ready KEY=VALUE...

then waits for DIR/listen (roce_send.py is listening), does what MODE does first, prints
`posted`, waits for DIR/go (the packets were sent; GO_TIMEOUT seconds at most, 60 by
default), checks, and prints `ok` or `FAIL: why` (exit 1). Every wait is bounded.

Modes (roce_send.py has the matching sender modes):

forged  Two RC QPs with sent-but-unacknowledged work that nobody answers (a long
        acknowledgement timeout keeps it outstanding for the test): F1 has 4 SENDs and 4
        RDMA WRITEs out (PSNs crossing 0xffffff -> 0), F2 an RDMA READ of 4 KiB, an
        atomic FETCH_ADD and a SEND. After the forged responses (PSNs never sent): no
        completion at all on either QP, both still in RTS, the READ's and the atomic's
        local buffers unwritten; then both are moved to the error state and every WQE
        must complete flushed, none successfully.
reth    Six RC QPs, each to get one RDMA WRITE FIRST, WRITE ONLY or READ request whose
        RETH DMA length is above 2^31, all aimed at one remotely readable and writable
        buffer filled with a canary: afterwards the canary is intact and no CQ has a
        completion (each QP's state is printed: a NAK moves it to the error state).
storm   One RC QP with remote read access to a 16 MiB buffer (STORM_MB MiB if set);
        roce_send.py asks it one READ of all of it, then sends a storm of duplicates
        of that READ. Afterwards no completion, the QP still in RTS.
pkey    An RC QP with receives posted and a remotely writable canary, and a UD QP with
        receives posted. roce_send.py sends SENDs and WRITEs with P_Keys that do not
        match the port's (0xffff), then control packets: one RC SEND with P_Key 0xffff,
        datagrams with 0x7fff (a limited member of the default partition, which matches
        a full member) and 0xffff. Afterwards exactly the control packets were received,
        with their data, and the canary is intact.
mutate  Live QPs of the three transports for roce_send.py --mutate (see class Mutate):
        two RC QPs with receives posted and RDMA READ, atomic, SEND and WRITE work
        outstanding towards the peer, a UC and a UD QP with receives posted, a remote
        key opening 8 KiB (read, write, atomic, flush) between pages no key opens, and
        memory that no key of the peer opens for writing. While the packets come they
        are kept alive: completions are checked as they come, receives posted again,
        work posted again, and a QP in the error state is taken back to RTS (the
        sender learns of it through DIR/epochs). Afterwards nothing was written outside
        what the key opens, no receive took a packet that had to be dropped (its tag is
        in DIR/forbidden), and two fresh RC QPs move data through the device."""
import ipaddress
import json
import os
import random
import struct
import sys
import time

from pyverbs.addr import GID, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.libibverbs_enums import (ibv_access_flags, ibv_mtu, ibv_qp_attr_mask,
                                      ibv_qp_state, ibv_qp_type, ibv_send_flags,
                                      ibv_wc_opcode, ibv_wc_status, ibv_wr_opcode)
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

from live_qps import GRH, PORT, QKEY, Failed, Ud, gid_index, log
from roce_send import EXT_FMT, LAYOUT, TAG_LEN, tag_serial
from live_qps import poll as poll_ok

LW = ibv_access_flags.IBV_ACCESS_LOCAL_WRITE
RW = ibv_access_flags.IBV_ACCESS_REMOTE_WRITE
RR = ibv_access_flags.IBV_ACCESS_REMOTE_READ
RA = ibv_access_flags.IBV_ACCESS_REMOTE_ATOMIC
CANARY = 0x5A
BUF = 4096
FLUSH_TIMEOUT = 15
# Payloads of roce_send.py's control packets in mode pkey.
CONTROL_RC = b"control RC SEND, P_Key 0xffff...."
CONTROL_UD = {0x7FFF: b"control UD SEND, P_Key 0x7fff....",
              0xFFFF: b"control UD SEND, P_Key 0xffff...."}
# The storm's buffer: 16 MiB, or STORM_MB MiB.
STORM_LEN = int(os.environ.get("STORM_MB") or "16") << 20


def gid_of(addr):
    h = ipaddress.IPv6Address("::ffff:" + addr).packed.hex()
    return GID(":".join(h[i:i + 4] for i in range(0, 32, 4)))


class Rc:
    """An RC QP with its CQs, connected to PEER's QP number `dest`."""

    def __init__(self, ctx, pd, gidx, peer, dest, sq_psn, rq_psn, access, nrecv=0,
                 max_rd=1, timeout=24):
        self.scq = CQ(ctx, 64, None, None, 0)
        self.rcq = CQ(ctx, 64, None, None, 0)
        cap = QPCap(max_send_wr=16, max_recv_wr=max(nrecv, 1), max_send_sge=1,
                    max_recv_sge=1)
        init = QPInitAttr(qp_type=ibv_qp_type.IBV_QPT_RC, scq=self.scq, rcq=self.rcq,
                          cap=cap, sq_sig_all=1)
        attr = QPAttr(port_num=PORT)
        attr.qp_access_flags = access
        self.qp = QP(pd, init, attr)
        self.qpn = self.qp.qp_num
        attr = QPAttr(port_num=PORT)
        attr.qp_access_flags = access
        attr.path_mtu = ibv_mtu.IBV_MTU_1024
        attr.dest_qp_num = dest
        attr.rq_psn = rq_psn
        attr.sq_psn = sq_psn
        attr.max_dest_rd_atomic = 4
        attr.max_rd_atomic = max_rd
        attr.min_rnr_timer = 12
        # 4.096 us * 2^24, about 69 s: nothing times out while a test runs.
        attr.timeout = timeout
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        gr = GlobalRoute(dgid=peer, sgid_index=gidx)
        attr.ah_attr = AHAttr(port_num=PORT, is_global=1, gr=gr, dlid=0)
        self.qp.to_rts(attr)

    def state(self):
        return self.qp.query(ibv_qp_attr_mask.IBV_QP_STATE)[0].qp_state

    def to_err(self):
        attr = QPAttr()
        attr.qp_state = ibv_qp_state.IBV_QPS_ERR
        self.qp.modify(attr, ibv_qp_attr_mask.IBV_QP_STATE)


def drain(cq, n=64):
    got, wcs = cq.poll(n)
    return list(wcs[:got])


def describe(wcs):
    return ", ".join(f"wr_id {w.wr_id} status {w.status} opcode {w.opcode} "
                     f"byte_len {w.byte_len}" for w in wcs)


def wait_file(path, timeout):
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise Failed(f"{path} did not appear in {timeout} s")
        time.sleep(0.1)


def post(qp, wr_id, opcode, mr, size, offset=0, rdma=None, atomic=None):
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1,
                sg=[SGE(mr.buf + offset, size, mr.lkey)],
                send_flags=ibv_send_flags.IBV_SEND_SIGNALED)
    if rdma:
        wr.set_wr_rdma(*rdma)
    if atomic:
        wr.set_wr_atomic(*atomic)
    qp.post_send(wr, None)


def canary_ok(mr, size, offset=0):
    return mr.read(size, offset) == bytes([CANARY]) * size


# F1's first PSN: its 8 packets take PSNs 0xfffffc..0x000003. F2's: its READ of 4 KiB
# takes 4 PSNs, the atomic and the SEND one each.
F1_PSN = 0xFFFFFC
F2_PSN = 0x7FFFFE
F1_DEST = 0x000101
F2_DEST = 0x000102


class Forged:
    def __init__(self, ctx, pd, gidx, peer):
        self.f1 = Rc(ctx, pd, gidx, peer, F1_DEST, F1_PSN, 0x10, LW)
        self.f2 = Rc(ctx, pd, gidx, peer, F2_DEST, F2_PSN, 0x20, LW, max_rd=4)
        self.src = MR(pd, BUF, LW)
        self.rd = MR(pd, BUF, LW)     # the READ's local buffer
        self.at = MR(pd, 8, LW)       # the atomic's original value goes here
        self.rd.write(bytes([CANARY]) * BUF, BUF, 0)
        self.at.write(bytes([CANARY]) * 8, 8, 0)
        self.src.write(b"\x11" * BUF, BUF, 0)

    def ready(self):
        return (f"f1={self.f1.qpn} f1psn={F1_PSN} f1span=8 f1pkts=8 f1dst={F1_DEST} "
                f"f2={self.f2.qpn} f2psn={F2_PSN} f2span=6 f2pkts=3 f2dst={F2_DEST}")

    def start(self):
        op = ibv_wr_opcode
        for i in range(4):
            post(self.f1.qp, 10 + 2 * i, op.IBV_WR_SEND, self.src, 64)
            post(self.f1.qp, 11 + 2 * i, op.IBV_WR_RDMA_WRITE, self.src, 64,
                 rdma=(0x1234, 0x10000))
        post(self.f2.qp, 20, op.IBV_WR_RDMA_READ, self.rd, BUF, rdma=(0x5678, 0x20000))
        post(self.f2.qp, 21, op.IBV_WR_ATOMIC_FETCH_AND_ADD, self.at, 8,
             atomic=(0x5678, 0x30000, 1, 0))
        post(self.f2.qp, 22, op.IBV_WR_SEND, self.src, 64)

    def check(self):
        bad = []
        for name, rc in (("F1", self.f1), ("F2", self.f2)):
            wcs = drain(rc.scq) + drain(rc.rcq)
            ok = [w for w in wcs if w.status == ibv_wc_status.IBV_WC_SUCCESS]
            if ok:
                bad.append(f"{name}: {len(ok)} WQE(s) completed SUCCESSFULLY on forged "
                           f"responses for PSNs never sent (silent data loss): "
                           + describe(ok))
            errs = [w for w in wcs if w.status != ibv_wc_status.IBV_WC_SUCCESS]
            if errs:
                bad.append(f"{name}: error completions while forged responses arrived: "
                           + describe(errs))
            st = rc.state()
            log(f"{name} (QPN {rc.qpn}) state after the forged responses: {st}")
            if st != ibv_qp_state.IBV_QPS_RTS:
                bad.append(f"{name} in state {st}, not RTS")
        if not canary_ok(self.rd, BUF):
            bad.append("F2's READ buffer was written by a forged READ response")
        if not canary_ok(self.at, 8):
            bad.append("F2's atomic buffer was written by a forged atomic ACK")
        # Still outstanding: the error state flushes every one, none successfully.
        want = {"F1": 8, "F2": 3}
        for name, rc in (("F1", self.f1), ("F2", self.f2)):
            rc.to_err()
            wcs = []
            end = time.monotonic() + FLUSH_TIMEOUT
            while len(wcs) < want[name] and time.monotonic() < end:
                wcs += drain(rc.scq)
                time.sleep(0.01)
            ok = [w for w in wcs if w.status == ibv_wc_status.IBV_WC_SUCCESS]
            log(f"{name} moved to the error state: {len(wcs)} completion(s), "
                f"statuses {sorted(set(int(w.status) for w in wcs))}")
            if ok:
                bad.append(f"{name}: flushed WQEs completed successfully: " + describe(ok))
            if len(wcs) != want[name] and not any(b.startswith(name) for b in bad):
                bad.append(f"{name}: {len(wcs)} completions after the error state, "
                           f"want {want[name]} (each outstanding WQE, flushed)")
        if bad:
            raise Failed("; ".join(bad))
        log("forged responses: no completion, QPs in RTS, buffers unwritten; "
            "all 11 WQEs flushed in error")


RETH_DEST = 0x000200
RETH_PSN = 0x000123
RETH_CASES = 6


class Reth:
    def __init__(self, ctx, pd, gidx, peer):
        acc = LW | RW | RR
        self.qps = [Rc(ctx, pd, gidx, peer, RETH_DEST + i, 0x40, RETH_PSN, acc)
                    for i in range(RETH_CASES)]
        self.buf = MR(pd, BUF, acc)
        self.buf.write(bytes([CANARY]) * BUF, BUF, 0)

    def ready(self):
        qps = ",".join(f"{r.qpn}:{RETH_DEST + i}" for i, r in enumerate(self.qps))
        return (f"qps={qps} rqpsn={RETH_PSN} "
                f"rkey={self.buf.rkey} va={self.buf.buf}")

    def start(self):
        pass

    def check(self):
        bad = []
        for i, rc in enumerate(self.qps):
            wcs = drain(rc.scq) + drain(rc.rcq)
            log(f"case {i} (QPN {rc.qpn}): state {rc.state()}, {len(wcs)} completion(s)")
            if wcs:
                bad.append(f"case {i}: completions: " + describe(wcs))
        if not canary_ok(self.buf, BUF):
            bad.append("the buffer was written by a request with a RETH length above 2^31")
        if bad:
            raise Failed("; ".join(bad))
        log("RETH length above 2^31: canary intact, no completions")


STORM_DEST = 0x000301
STORM_PSN = 0x000777


class Storm:
    def __init__(self, ctx, pd, gidx, peer):
        self.rc = Rc(ctx, pd, gidx, peer, STORM_DEST, 0x50, STORM_PSN, LW | RR)
        self.buf = MR(pd, STORM_LEN, LW | RR)

    def ready(self):
        return (f"qp={self.rc.qpn} rqpsn={STORM_PSN} rkey={self.buf.rkey} "
                f"va={self.buf.buf} len={STORM_LEN}")

    def start(self):
        pass

    def check(self):
        wcs = drain(self.rc.scq) + drain(self.rc.rcq)
        st = self.rc.state()
        log(f"storm QP (QPN {self.rc.qpn}): state {st}, {len(wcs)} completion(s)")
        if wcs:
            raise Failed("completions: " + describe(wcs))
        if st != ibv_qp_state.IBV_QPS_RTS:
            raise Failed(f"QP in state {st}, not RTS")


PKEY_DEST = 0x000401
PKEY_PSN = 0x000abc
NRECV = 8


class Pkey:
    def __init__(self, ctx, pd, gidx, peer):
        self.ctx = ctx
        self.rc = Rc(ctx, pd, gidx, peer, PKEY_DEST, 0x60, PKEY_PSN, LW | RW, nrecv=NRECV)
        self.rbuf = MR(pd, BUF * NRECV, LW)
        self.wbuf = MR(pd, BUF, LW | RW)
        self.wbuf.write(bytes([CANARY]) * BUF, BUF, 0)
        for s in range(NRECV):
            sge = SGE(self.rbuf.buf + s * BUF, BUF, self.rbuf.lkey)
            self.rc.qp.post_recv(RecvWR(wr_id=s, num_sge=1, sg=[sge]), None)
        self.ud = Ud(ctx, pd, gidx)
        for s in range(8):
            self.ud.post_recv(s)
        self.viol0 = ctx.query_port(PORT).bad_pkey_cntr

    def ready(self):
        return (f"rc={self.rc.qpn} rcpsn={PKEY_PSN} ud={self.ud.qpn} qkey={QKEY} "
                f"rkey={self.wbuf.rkey} va={self.wbuf.buf}")

    def start(self):
        pass

    def check(self):
        from live_qps import UD_SLOT
        bad = []
        log(f"port bad_pkey_cntr {self.viol0} -> {self.ctx.query_port(PORT).bad_pkey_cntr}")
        rc = drain(self.rc.rcq)
        got = []
        for w in rc:
            data = (self.rbuf.read(w.byte_len, w.wr_id * BUF)
                    if w.status == ibv_wc_status.IBV_WC_SUCCESS and 0 <= w.wr_id < NRECV
                    and w.byte_len <= BUF else b"")
            got.append(data)
        log(f"RC receives: {len(rc)}: {[d[:24] for d in got]}")
        if len(rc) != 1 or got[0] != CONTROL_RC or rc[0].opcode != ibv_wc_opcode.IBV_WC_RECV:
            bad.append("RC: want exactly the control SEND received: " + describe(rc))
        ud = drain(self.ud.rcq)
        got = []
        for w in ud:
            ok = (w.status == ibv_wc_status.IBV_WC_SUCCESS and 0 <= w.wr_id < 8 and
                  GRH <= w.byte_len <= UD_SLOT)
            got.append(self.ud.rbuf.read(w.byte_len, w.wr_id * UD_SLOT)[GRH:] if ok else b"")
        log(f"UD receives: {len(ud)}: {[d[:24] for d in got]}")
        if sorted(got) != sorted(CONTROL_UD.values()):
            missing = [hex(k) for k, v in CONTROL_UD.items() if v not in got]
            bad.append("UD: want exactly the two control datagrams (P_Keys 0x7fff and "
                       f"0xffff, both match the port's 0xffff); missing {missing}; "
                       + describe(ud))
        for name, cq in (("RC send", self.rc.scq), ("UD send", self.ud.scq)):
            wcs = drain(cq)
            if wcs:
                bad.append(f"{name} CQ: " + describe(wcs))
        if not canary_ok(self.wbuf, BUF):
            bad.append("an RDMA WRITE with a foreign P_Key was placed")
        st = self.rc.state()
        if st != ibv_qp_state.IBV_QPS_RTS:
            bad.append(f"RC QP in state {st}, not RTS")
        if bad:
            raise Failed("; ".join(bad))
        log("P_Key: only the control packets were received, canary intact")


# Mode mutate. The peer's QP numbers (the destinations of the device's QPs), each QP's
# PSNs, and the fake remote key of the work the RC QPs send towards the peer.
MUT_MTU = 1024
MUT_SLOT = 4096              # the SGE of an RC or UC receive
MUT_UD_SLOT = GRH + MUT_MTU  # the SGE of a UD receive
MUT_GUARD = 256              # canary bytes before and after every local buffer
MUT_NRECV = 8
MUT_TARGET = 8192            # bytes the target key opens
MUT_READ = 3000              # the RC QPs' RDMA READ towards the peer: three responses
PAGE = 4096
MUT_QPS = (  # name, transport, peer QPN, rq_psn, sq_psn
    ("rc0", "rc", 0x000601, 0xFFFFF0, 0x3FFFFE),
    ("rc1", "rc", 0x000602, 0x000010, 0xFFFFFD),
    ("uc0", "uc", 0x000603, 0x7FFFF8, 0x000100),
    ("ud0", "ud", 0x000604, 0, 0x000200),
)
PROTECTED = 0xA5
QPT = {"rc": ibv_qp_type.IBV_QPT_RC, "uc": ibv_qp_type.IBV_QPT_UC,
       "ud": ibv_qp_type.IBV_QPT_UD}
M = ibv_qp_attr_mask
FLUSH_ACCESS = (ibv_access_flags.IBV_ACCESS_FLUSH_GLOBAL |
                ibv_access_flags.IBV_ACCESS_FLUSH_PERSISTENT)
SUCCESS = ibv_wc_status.IBV_WC_SUCCESS
FLUSHED = ibv_wc_status.IBV_WC_WR_FLUSH_ERR
STATUS = {int(getattr(ibv_wc_status, n)): n[7:].lower()
          for n in dir(ibv_wc_status) if n.startswith("IBV_WC_")}


# The opcodes whose payload goes to a receive buffer: RC's SENDs, UC's, UD's.
SENDS = frozenset(range(0x00, 0x06)) | {0x16, 0x17} | frozenset(range(0x20, 0x26)) | {0x64, 0x65}


def sent_packets(path, serials):
    """The packets of roce_send.py --mutate's trace whose serials are in `serials`, by
    serial (transport headers to ICRC), or None without a trace."""
    try:
        f = open(path)
    except OSError:
        return None
    out = {}
    with f:
        for line in f:
            w = line.split()
            if len(w) == 7 and w[1].isdigit() and int(w[1]) in serials and w[3] != "dup":
                out[int(w[1])] = bytes.fromhex(w[6])
    return out


def misplaced(sent, serial, placed, whole, qpn):
    """Why `placed` (a receive buffer from where packet `serial`'s payload went, to the
    end of its MTU-sized part) is not what that packet sent to QPN `qpn` carried (all
    of it if `whole`, else as far as either goes), or None."""
    b = sent.get(serial)
    if b is None:
        return "not in the trace"
    if len(b) < 16:
        return "shorter than a BTH and an ICRC"
    op = b[0]
    if op not in SENDS:
        return f"opcode {op:#04x}, which places nothing in a receive buffer"
    lay = LAYOUT[op if op >> 5 == 3 else op & 0x1F]
    to = struct.unpack("!I", b[4:8])[0] & 0xFFFFFF
    if to != qpn:
        return f"sent to QPN {to:#x}"
    start = 12 + sum(struct.calcsize(EXT_FMT[n]) for n in lay)
    payload = b[start:len(b) - 4 - ((b[1] >> 4) & 3)]
    k = len(payload) if whole else min(len(payload), len(placed))
    if placed[:k] != payload[:k] or len(placed) < k:
        return f"{len(payload)} bytes sent, {len(placed)} in the receive, differing"
    return None


class Slots:
    """n local buffers of `size` bytes in one MR of local write access only, each
    between two MUT_GUARD-byte runs of the canary that nothing may write."""

    def __init__(self, pd, n, size):
        self.n, self.size = n, size
        self.stride = MUT_GUARD + size
        total = n * self.stride + MUT_GUARD
        self.mr = MR(pd, total, LW)
        self.mr.write(bytes([CANARY]) * total, total, 0)

    def addr(self, i):
        return self.mr.buf + i * self.stride + MUT_GUARD

    def sge(self, i):
        return SGE(self.addr(i), self.size, self.mr.lkey)

    def clear(self, i):
        self.mr.write(bytes([CANARY]) * self.size, self.size, i * self.stride + MUT_GUARD)

    def read(self, i, n):
        return self.mr.read(n, i * self.stride + MUT_GUARD)

    def bad_guards(self):
        g = bytes([CANARY]) * MUT_GUARD
        return [i for i in range(self.n + 1) if self.mr.read(MUT_GUARD, i * self.stride) != g]


class MutQp:
    """One QP that roce_send.py --mutate aims at: its CQs, receive slots, the work it
    posted that has not completed yet, and what its completions showed."""

    def __init__(self, ctx, pd, gidx, peer, name, kind, dest, rq_psn, sq_psn, access):
        self.name, self.kind, self.dest = name, kind, dest
        self.rq_psn, self.sq_psn, self.access = rq_psn, sq_psn, access
        self.gidx, self.peer = gidx, peer
        self.scq = CQ(ctx, 64, None, None, 0)
        self.rcq = CQ(ctx, 64, None, None, 0)
        cap = QPCap(max_send_wr=16, max_recv_wr=MUT_NRECV, max_send_sge=1, max_recv_sge=1)
        init = QPInitAttr(qp_type=QPT[kind], scq=self.scq, rcq=self.rcq, cap=cap,
                          sq_sig_all=1)
        self.qp = QP(pd, init)
        self.qpn = self.qp.qp_num
        self.slots = Slots(pd, MUT_NRECV, MUT_UD_SLOT if kind == "ud" else MUT_SLOT)
        self.free = set(range(MUT_NRECV))
        self.recv_out, self.send_out = {}, {}
        self.seen = set()
        self.next_id = 1
        self.epoch = 0
        self.tags, self.bad, self.stats = [], [], {}
        self.retried = 0      # revivals that found the QP in the error state again
        self.late = 0         # WQEs posted after the QP was last seen in RTS, lost
        self.rts_at = 0.0     # when a query that found the QP in RTS began
        self.posted_at = 0.0
        if kind == "rc":
            self.src = MR(pd, MUT_SLOT, LW)
            self.src.write(b"\x33" * MUT_SLOT, MUT_SLOT, 0)
            self.rd = Slots(pd, 1, MUT_READ)   # the READ's local buffer
            self.at = Slots(pd, 1, 8)          # the atomic's original value
        if dest is not None:
            self.connect()
            self.post_free()

    def modify(self, mask, **kw):
        attr = QPAttr(port_num=PORT)
        for k, v in kw.items():
            setattr(attr, k, v)
        self.qp.modify(attr, mask)

    def connect(self):
        """From RESET to RTS, with the QP's PSNs and its peer."""
        st = ibv_qp_state
        if self.kind == "ud":
            self.modify(M.IBV_QP_STATE | M.IBV_QP_PKEY_INDEX | M.IBV_QP_PORT | M.IBV_QP_QKEY,
                        qp_state=st.IBV_QPS_INIT, pkey_index=0, qkey=QKEY)
            self.modify(M.IBV_QP_STATE, qp_state=st.IBV_QPS_RTR)
            self.modify(M.IBV_QP_STATE | M.IBV_QP_SQ_PSN, qp_state=st.IBV_QPS_RTS,
                        sq_psn=self.sq_psn)
            return
        self.modify(M.IBV_QP_STATE | M.IBV_QP_PKEY_INDEX | M.IBV_QP_PORT |
                    M.IBV_QP_ACCESS_FLAGS, qp_state=st.IBV_QPS_INIT, pkey_index=0,
                    qp_access_flags=self.access)
        gr = GlobalRoute(dgid=self.peer, sgid_index=self.gidx)
        av = AHAttr(port_num=PORT, is_global=1, gr=gr, dlid=0)
        rtr = dict(qp_state=st.IBV_QPS_RTR, ah_attr=av, path_mtu=ibv_mtu.IBV_MTU_1024,
                   dest_qp_num=self.dest, rq_psn=self.rq_psn)
        mask = (M.IBV_QP_STATE | M.IBV_QP_AV | M.IBV_QP_PATH_MTU | M.IBV_QP_DEST_QPN |
                M.IBV_QP_RQ_PSN)
        if self.kind == "rc":
            rtr.update(max_dest_rd_atomic=4, min_rnr_timer=12)
            mask |= M.IBV_QP_MAX_DEST_RD_ATOMIC | M.IBV_QP_MIN_RNR_TIMER
        self.modify(mask, **rtr)
        rts = dict(qp_state=st.IBV_QPS_RTS, sq_psn=self.sq_psn)
        mask = M.IBV_QP_STATE | M.IBV_QP_SQ_PSN
        if self.kind == "rc":
            # 4.096 us * 2^18, about 1 s: an unanswered request goes out again (the
            # peer sees more of them), and after 7 retries the QP fails and is revived.
            rts.update(timeout=18, retry_cnt=7, rnr_retry=7, max_rd_atomic=4)
            mask |= (M.IBV_QP_TIMEOUT | M.IBV_QP_RETRY_CNT | M.IBV_QP_RNR_RETRY |
                     M.IBV_QP_MAX_QP_RD_ATOMIC)
        self.modify(mask, **rts)

    def state(self):
        t = time.monotonic()
        st = self.qp.query(M.IBV_QP_STATE)[0].qp_state
        if st == ibv_qp_state.IBV_QPS_RTS:
            self.rts_at = t
        return st

    def new_id(self):
        self.next_id += 1
        return self.next_id

    def post_free(self):
        for s in sorted(self.free):
            self.slots.clear(s)
            wr_id = self.new_id()
            self.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[self.slots.sge(s)]), None)
            self.recv_out[wr_id] = (s, time.monotonic())
        self.free.clear()

    def post_work(self):
        """An RC QP's work towards the peer: a READ, a FETCH_ADD, a SEND of two packets
        and a WRITE, all at a key and address of the peer's that mean nothing."""
        op = ibv_wr_opcode
        works = ((op.IBV_WR_RDMA_READ, SGE(self.rd.addr(0), MUT_READ, self.rd.mr.lkey),
                  (0x1234, 0x10000), None),
                 (op.IBV_WR_ATOMIC_FETCH_AND_ADD, SGE(self.at.addr(0), 8, self.at.mr.lkey),
                  None, (0x1234, 0x20000, 1, 0)),
                 (op.IBV_WR_SEND, SGE(self.src.buf, 1500, self.src.lkey), None, None),
                 (op.IBV_WR_RDMA_WRITE, SGE(self.src.buf, 200, self.src.lkey),
                  (0x1234, 0x30000), None))
        for opcode, sge, rdma, atomic in works:
            wr_id = self.new_id()
            wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge],
                        send_flags=ibv_send_flags.IBV_SEND_SIGNALED)
            if rdma:
                wr.set_wr_rdma(*rdma)
            if atomic:
                wr.set_wr_atomic(*atomic)
            self.qp.post_send(wr, None)
            self.send_out[wr_id] = (opcode, time.monotonic())
        self.posted_at = time.monotonic()

    def poll(self):
        for kind, cq in (("send", self.scq), ("recv", self.rcq)):
            while True:
                got, wcs = cq.poll(16)
                if not got:
                    break
                for w in wcs[:got]:
                    self.completed(kind, w)

    def completed(self, kind, w):
        wr_id, status = w.wr_id, int(w.status)
        key = f"{kind} {STATUS.get(status, status)}"
        self.stats[key] = self.stats.get(key, 0) + 1
        if wr_id in self.seen:
            self.bad.append(f"{self.name}: {kind} wr_id {wr_id} completed twice")
            return
        self.seen.add(wr_id)
        out = self.recv_out if kind == "recv" else self.send_out
        if wr_id not in out:
            self.bad.append(f"{self.name}: a {kind} completion for wr_id {wr_id}, "
                            "never posted")
            return
        what = out.pop(wr_id)
        if kind == "send":
            return
        slot = what[0]
        if status == SUCCESS and w.byte_len > self.slots.size:
            self.bad.append(f"{self.name}: a receive of {w.byte_len} bytes into a "
                            f"{self.slots.size}-byte buffer")
        # The slot was filled with the canary when it was posted: every tag in it now
        # is a packet placed into this WQE. Each packet places its payload, which
        # begins with its tag, at a multiple of the MTU (after the GRH on UD). Below
        # byte_len of a successful SEND is what the message received, whole; above it,
        # and in a WQE that completed otherwise, what messages begun and given up (UC,
        # or RC before a retry) or failed placed, in part. Each such payload is
        # compared with the packet in the trace.
        data = self.slots.read(slot, self.slots.size)
        n = (min(w.byte_len, self.slots.size)
             if status == SUCCESS and w.opcode == ibv_wc_opcode.IBV_WC_RECV else 0)
        at = (GRH,) if self.kind == "ud" else range(0, self.slots.size, MUT_MTU)
        # (serial, the bytes from its place to the end of its part, whether whole)
        parts = [(tag_serial(data[a:]), data[a:min(a + MUT_MTU, n)], True)
                 if a + TAG_LEN <= n else
                 (tag_serial(data[a:]), data[a:a + MUT_MTU], False) for a in at]
        parts = [x for x in parts if x[0] is not None]
        if parts:
            self.tags.append((parts, f"slot {slot}, wr_id {wr_id}, "
                              f"{STATUS.get(status, status)}, {w.byte_len} bytes, "
                              f"opcode {w.opcode}, wc_flags {w.wc_flags:#x}, epoch "
                              f"{self.epoch}, at {time.monotonic():.3f}"))
        # The receive goes back while the QP is in RTS (else when it is revived).
        self.free.add(slot)
        if status != FLUSHED and self.state() == ibv_qp_state.IBV_QPS_RTS:
            self.post_free()

    def revive(self):
        """From the error state back to RTS: first every WQE posted while the QP was
        in RTS must complete (flushed), then RESET, the same PSNs, receives posted
        again. (What was posted after it left RTS may wait: a process posts receives
        into the ring without a system call, and nothing flushes them until the device
        next looks at the queue; RESET drops them.)"""
        end = time.monotonic() + 2
        while (self.recv_out or self.send_out) and time.monotonic() < end:
            self.poll()
            time.sleep(0.01)
        left = list(self.recv_out.values()) + list(self.send_out.values())
        early = [x for x in left if x[1] < self.rts_at]
        self.late += len(left) - len(early)
        if early:
            self.bad.append(f"{self.name}: {len(early)} WQE(s) posted while it was in RTS "
                            "did not complete within 2 s of the error state")
        self.free.update(s for s, _ in self.recv_out.values())
        self.recv_out.clear()
        self.send_out.clear()
        # A packet may move the QP to the error state again while it is in RTR, and
        # the move to RTS then fails: from RESET again, a few times.
        for i in range(5):
            self.modify(M.IBV_QP_STATE, qp_state=ibv_qp_state.IBV_QPS_RESET)
            try:
                self.connect()
                break
            except Exception:
                self.retried += 1
                if i == 4:
                    raise
        self.epoch += 1
        self.post_free()


class Mutate:
    """Targets of roce_send.py --mutate, kept alive while it sends (see until())."""

    def __init__(self, ctx, pd, gidx, peer):
        self.ctx, self.pd, self.gidx = ctx, pd, gidx
        acc = LW | RW | RR | RA
        # The target: MUT_TARGET bytes in the middle of a local-only MR of three pages;
        # the first and last page are the canary no key opens.
        self.back = MR(pd, MUT_TARGET + 2 * PAGE, LW)
        self.back.write(bytes([CANARY]) * (MUT_TARGET + 2 * PAGE), MUT_TARGET + 2 * PAGE, 0)
        # With FLUSH access for both placement types if the driver allows it (rxe
        # allows persistence only on persistent memory), else for global visibility.
        self.target = None
        for extra in (FLUSH_ACCESS, ibv_access_flags.IBV_ACCESS_FLUSH_GLOBAL, 0):
            try:
                self.target = MR(pd, MUT_TARGET, acc | extra, address=self.back.buf + PAGE)
            except Exception:
                continue
            self.flush = extra
            break
        if self.target is None:
            raise Failed("cannot register the target MR")
        self.target.write(b"\x11" * MUT_TARGET, MUT_TARGET, 0)
        # Memory no key of the peer opens for writing: a remotely readable MR of this
        # PD, and a fully open MR of another PD.
        self.ro = MR(pd, PAGE, LW | RR)
        self.pd2 = PD(ctx)
        self.other = MR(self.pd2, PAGE, acc)
        for mr in (self.ro, self.other):
            mr.write(bytes([PROTECTED]) * PAGE, PAGE, 0)
        self.qps = []
        for name, kind, dest, rq, sq in MUT_QPS:
            access = {"rc": acc, "uc": LW | RW, "ud": LW}[kind]
            self.qps.append(MutQp(ctx, pd, gidx, peer, name, kind, dest, rq, sq, access))
        self.dir = None
        self.revived = 0

    def ready(self):
        return (" ".join(f"{q.name}={q.qpn}" for q in self.qps) +
                f" rkey={self.target.rkey} va={self.target.buf} len={MUT_TARGET}")

    def publish(self, d):
        """DIR/targets: what roce_send.py --mutate aims at (JSON)."""
        self.dir = d
        okeys = sorted({self.back.lkey, self.back.rkey, self.ro.lkey, self.other.rkey,
                        self.other.lkey} - {0})
        t = {"mtu": MUT_MTU, "qkey": QKEY, "rkey": self.target.rkey, "va": self.target.buf,
             "len": MUT_TARGET, "rokey": self.ro.rkey, "rova": self.ro.buf,
             "okeys": okeys, "flush": bool(self.flush),
             "flush_persistent": self.flush == FLUSH_ACCESS,
             "qps": [{"name": q.name, "kind": q.kind, "qpn": q.qpn, "rq_psn": q.rq_psn,
                      "sq_psn": q.sq_psn, "dest": q.dest} for q in self.qps]}
        with open(os.path.join(d, "targets"), "w") as f:
            json.dump(t, f)
        self.write_epochs()

    def write_epochs(self):
        tmp = os.path.join(self.dir, "epochs.tmp")
        with open(tmp, "w") as f:
            json.dump({str(q.qpn): q.epoch for q in self.qps}, f)
        os.replace(tmp, os.path.join(self.dir, "epochs"))

    def start(self):
        for q in self.qps:
            if q.kind == "rc":
                q.post_work()

    def until(self, go, timeout):
        """Polls every QP until `go` appears: completions checked, receives posted
        again; ten times a second a QP in the error state is revived, and an RC QP
        whose work all completed gets new work."""
        end = time.monotonic() + timeout
        last = 0.0
        while not os.path.exists(go):
            now = time.monotonic()
            if now > end:
                raise Failed(f"{go} did not appear in {timeout} s")
            for q in self.qps:
                q.poll()
            if now - last >= 0.1:
                last = now
                changed = False
                for q in self.qps:
                    st = q.state()
                    if st == ibv_qp_state.IBV_QPS_ERR:
                        q.revive()
                        self.revived += 1
                        changed = True
                    elif (q.kind == "rc" and not q.send_out and st == ibv_qp_state.IBV_QPS_RTS
                          and now - q.posted_at > 1):
                        q.post_work()
                if changed:
                    self.write_epochs()
            time.sleep(0.02)

    def check(self):
        bad = []
        for q in self.qps:
            q.poll()
        try:
            with open(os.path.join(self.dir, "forbidden")) as f:
                forbidden = {int(x) for x in f.read().split()}
        except OSError:
            forbidden = set()
            bad.append("roce_send.py left no DIR/forbidden")
        sent = sent_packets(os.path.join(self.dir, "trace"),
                            {x for q in self.qps for parts, _ in q.tags for x, *_ in parts})
        if sent is None:
            bad.append("roce_send.py left no DIR/trace")
            sent = {}
        for q in self.qps:
            st = q.state()
            log(f"{q.name} (QPN {q.qpn}): state {st}, revived {q.epoch} time(s) "
                f"({q.retried} begun again: back in the error state before RTS), "
                f"{len(q.tags)} receive(s) holding {sum(len(x) for x, _ in q.tags)} "
                f"packet(s) compared with the trace, {q.late} WQE(s) posted after it left "
                "RTS dropped by RESET; completions: " +
                ", ".join(f"{v} {k}" for k, v in sorted(q.stats.items())))
            if st not in (ibv_qp_state.IBV_QPS_RTS, ibv_qp_state.IBV_QPS_ERR):
                bad.append(f"{q.name} in state {st}, neither RTS nor the error state")
            bad += q.bad
            took, wrong = [], []
            for parts, how in q.tags:
                serials = [x for x, *_ in parts]
                if set(serials) & forbidden:
                    took.append((sorted(set(serials) & forbidden), serials, how))
                for x, placed, whole in parts:
                    why = misplaced(sent, x, placed, whole, q.qpn)
                    if why:
                        wrong.append((x, why, serials, how))
            if took:
                bad.append(f"{q.name} received packets that must be dropped (bad ICRC, "
                           f"P_Key, transport or Q_Key): serials "
                           f"{sorted({x for t in took for x in t[0]})[:20]}")
                for serials, tags, how in took[:5]:
                    log(f"{q.name}: a receive ({how}) holds the packets {tags}, "
                        f"of which {serials} must be dropped")
            if wrong:
                bad.append(f"{q.name} placed {len(wrong)} packet(s) other than they were "
                           f"sent: serials {[x for x, *_ in wrong][:20]}")
                for x, why, tags, how in wrong[:5]:
                    log(f"{q.name}: packet {x} in a receive ({how}) of the packets {tags}: "
                        f"{why}")
            if took or wrong:
                with open(os.path.join(self.dir, "taken"), "a") as f:
                    f.write("".join(f"{q.name} {x}\n" for t in took for x in t[0]))
                    f.write("".join(f"{q.name} {x}\n" for x, *_ in wrong))
            for name, slots in (("receive", q.slots),) + (
                    (("READ", q.rd), ("atomic", q.at)) if q.kind == "rc" else ()):
                g = slots.bad_guards()
                if g:
                    bad.append(f"{q.name}: the canary around its {name} buffer(s) was "
                               f"written (guards {g})")
        canary = bytes([CANARY]) * PAGE
        if (self.back.read(PAGE, 0) != canary or
                self.back.read(PAGE, PAGE + MUT_TARGET) != canary):
            bad.append("the pages around the target key's range were written")
        prot = bytes([PROTECTED]) * PAGE
        if self.ro.read(PAGE, 0) != prot:
            bad.append("the remotely read-only MR was written")
        if self.other.read(PAGE, 0) != prot:
            bad.append("the MR of another PD was written")
        log(f"forbidden packets: {len(forbidden)}; QPs revived {self.revived} time(s); "
            f"target key's FLUSH access flags: {int(self.flush):#x}")
        if bad:
            raise Failed("; ".join(bad))
        self.data_moves()
        log("mutated packets: nothing written outside what the key opens, no dropped "
            "packet received, the device still moves data")

    def data_moves(self):
        """Two fresh RC QPs of the device, connected to each other: a SEND, an RDMA
        WRITE and an RDMA READ back, data checked."""
        me = self.ctx.query_gid(PORT, self.gidx)
        acc = LW | RW | RR
        a = MutQp(self.ctx, self.pd, self.gidx, me, "A", "rc", None, 0x100, 0x200, acc)
        b = MutQp(self.ctx, self.pd, self.gidx, me, "B", "rc", None, 0x200, 0x100, acc)
        for x, y in ((a, b), (b, a)):
            x.dest = y.qpn
            x.connect()
            x.post_free()
        data = bytes(random.Random(7).randrange(256) for _ in range(4000))
        a.src.write(data[:MUT_SLOT], min(len(data), MUT_SLOT), 0)
        win = MR(self.pd, MUT_SLOT, acc)
        op = ibv_wr_opcode
        steps = ((op.IBV_WR_SEND, SGE(a.src.buf, 3000, a.src.lkey), None),
                 (op.IBV_WR_RDMA_WRITE, SGE(a.src.buf, 4000, a.src.lkey), (win.rkey, win.buf)),
                 (op.IBV_WR_RDMA_READ, SGE(a.rd.addr(0), MUT_READ, a.rd.mr.lkey),
                  (win.rkey, win.buf + 500)))
        for i, (opcode, sge, rdma) in enumerate(steps):
            wr = SendWR(wr_id=i, opcode=opcode, num_sge=1, sg=[sge],
                        send_flags=ibv_send_flags.IBV_SEND_SIGNALED)
            if rdma:
                wr.set_wr_rdma(*rdma)
            a.qp.post_send(wr, None)
            poll_ok(a.scq, f"loopback {opcode}")
        wc = poll_ok(b.rcq, "loopback SEND (receive)")[0]
        slot = b.recv_out.get(wc.wr_id, (None,))[0]
        if slot is None or wc.byte_len != 3000 or b.slots.read(slot, 3000) != data[:3000]:
            raise Failed(f"loopback SEND: receive wr_id {wc.wr_id} byte_len {wc.byte_len}, "
                         "data differs")
        if win.read(4000, 0) != data:
            raise Failed("loopback RDMA WRITE: data differs")
        if a.rd.read(0, MUT_READ) != data[500:500 + MUT_READ] or a.rd.bad_guards():
            raise Failed("loopback RDMA READ: data differs or its canary was written")
        log("two fresh RC QPs: SEND 3000 B, RDMA WRITE 4000 B, RDMA READ 3000 B, data ok")


MODES = {"forged": Forged, "reth": Reth, "storm": Storm, "pkey": Pkey,
         "mutate": Mutate}


def main():
    mode, dev, addr, peer, d = sys.argv[1:6]
    go_timeout = float(sys.argv[6]) if len(sys.argv) > 6 else 60
    ctx = Context(name=dev)
    gidx = gid_index(ctx, addr)
    pd = PD(ctx)
    t = MODES[mode](ctx, pd, gidx, gid_of(peer))
    if hasattr(t, "publish"):
        t.publish(d)
    log(f"ready {t.ready()}")
    # The sender's python takes long to start on a slow kernel: at least a minute, and
    # WAIT_S when the guest's waits are longer (the debug kernel's).
    wait_file(os.path.join(d, "listen"), max(60.0, float(os.environ.get("WAIT_S", "60"))))
    t.start()
    log("posted")
    if hasattr(t, "until"):
        t.until(os.path.join(d, "go"), go_timeout)
    else:
        wait_file(os.path.join(d, "go"), go_timeout)
    t.check()


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        log(f"FAIL: {e}")
        sys.exit(1)
    except Exception as e:  # pyverbs errors
        log(f"FAIL: {type(e).__name__}: {e}")
        sys.exit(1)
    log("ok")
