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
        with their data, and the canary is intact."""
import ipaddress
import os
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


MODES = {"forged": Forged, "reth": Reth, "storm": Storm, "pkey": Pkey}


def main():
    mode, dev, addr, peer, d = sys.argv[1:6]
    go_timeout = float(sys.argv[6]) if len(sys.argv) > 6 else 60
    ctx = Context(name=dev)
    gidx = gid_index(ctx, addr)
    pd = PD(ctx)
    t = MODES[mode](ctx, pd, gidx, gid_of(peer))
    log(f"ready {t.ready()}")
    wait_file(os.path.join(d, "listen"), 60)
    t.start()
    log("posted")
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
