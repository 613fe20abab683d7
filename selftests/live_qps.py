#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Live QPs for hostile packets to aim at, checked afterwards (pyverbs).

    live_qps.py DEV ADDR GO_FILE

On DEV, through the RoCE v2 GID of the IPv4 address ADDR: an RC QP pair connected to
each other (A is the one to attack, B its peer) and a UD QP, all ready, with receives
posted. One SEND each way and one datagram check the setup; then it prints

    ready rc=<A's QPN> rcpsn=<A's expected receive PSN> ud=<UD QPN> rkey=<R_Key> va=<VA>

(R_Key and VA of a remotely writable buffer of A's, filled with a canary) and waits for
GO_FILE to exist (60 s at most). Then nothing may have happened meanwhile: no
completion on any CQ, every QP still in RTS, the canary intact. And everything must
still work: SENDs and RDMA WRITEs both ways on the RC pair (sizes up to 4 KiB, data
checked, A's receive PSNs crossing the 24-bit wrap), and datagrams from the UD QP to
itself (GRH and data checked). Every wait is bounded; any failure exits 1."""
import ipaddress
import os
import random
import sys
import time

from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.libibverbs_enums import (ibv_access_flags, ibv_gid_type_sysfs, ibv_mtu,
                                      ibv_qp_attr_mask, ibv_qp_state, ibv_qp_type,
                                      ibv_send_flags, ibv_wc_opcode, ibv_wc_status,
                                      ibv_wr_opcode)
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

PORT = 1
QKEY = 0x11111111
# A's initial receive PSN: the traffic after the attack takes it across 0xffffff -> 0.
PSN_A = 0xFFFFFA
PSN_B = 0x123456
GRH = 40
SLOT = 4096          # RC receive slot, and the largest RC message
NSLOTS = 16          # receives posted on each RC QP
UD_SLOT = GRH + 1024
UD_NSLOTS = 8
CANARY = b"\x5a"
POLL_TIMEOUT = 15    # seconds per completion
GO_TIMEOUT = 60
RC_SIZES = [1, 64, 1000, 1024, 1025, 2500, 4096, 4000]
UD_SIZES = [1, 64, 512, 1000, 1024]

LW = ibv_access_flags.IBV_ACCESS_LOCAL_WRITE
RW = ibv_access_flags.IBV_ACCESS_REMOTE_WRITE


class Failed(Exception):
    pass


def log(*a):
    print(*a, flush=True)


def pattern(seed, n):
    return random.Random(seed).randbytes(n)


def poll(cq, what, n=1):
    """n successful completions of cq within POLL_TIMEOUT, else Failed."""
    wcs = []
    end = time.monotonic() + POLL_TIMEOUT
    while len(wcs) < n:
        got, batch = cq.poll(n - len(wcs))
        for wc in batch[:got]:
            if wc.status != ibv_wc_status.IBV_WC_SUCCESS:
                raise Failed(f"{what}: completion status {wc.status} (wr_id {wc.wr_id}, "
                             f"opcode {wc.opcode}, vendor_err {wc.vendor_err})")
            wcs.append(wc)
        if len(wcs) < n:
            if time.monotonic() > end:
                raise Failed(f"{what}: {len(wcs)} of {n} completions in {POLL_TIMEOUT} s")
            time.sleep(0.001)
    return wcs


def gid_index(ctx, addr):
    """The index of addr's RoCE v2 GID, waiting up to 20 s for the table to have it."""
    h = ipaddress.IPv6Address("::ffff:" + addr).packed.hex()
    want = ":".join(h[i:i + 4] for i in range(0, 32, 4))
    end = time.monotonic() + 20
    while True:
        seen = []
        for idx in range(ctx.query_port(PORT).gid_tbl_len):
            try:
                gid = ctx.query_gid(PORT, idx).gid
                if gid != want:
                    if gid.strip("0:"):
                        seen.append(f"{idx}: {gid}")
                    continue
                gtype = ctx.query_gid_type(PORT, idx)
            except Exception as e:  # an empty entry
                seen.append(f"{idx}: {e}")
                continue
            if gtype == ibv_gid_type_sysfs.IBV_GID_TYPE_SYSFS_ROCE_V2:
                return idx
            seen.append(f"{idx}: {gid} type {gtype}")
        if time.monotonic() > end:
            raise Failed(f"no RoCE v2 GID {want} for {addr}; " + "; ".join(seen))
        time.sleep(0.2)


class Side:
    """One RC QP with its CQs and buffers: sbuf (source), rbuf (receive slots), wbuf
    (RDMA WRITE target)."""

    def __init__(self, name, ctx, pd):
        self.name = name
        self.scq = CQ(ctx, 64, None, None, 0)
        self.rcq = CQ(ctx, 64, None, None, 0)
        self.sbuf = MR(pd, SLOT, LW)
        self.rbuf = MR(pd, SLOT * NSLOTS, LW)
        self.wbuf = MR(pd, SLOT, LW | RW)
        cap = QPCap(max_send_wr=16, max_recv_wr=NSLOTS, max_send_sge=1, max_recv_sge=1)
        init = QPInitAttr(qp_type=ibv_qp_type.IBV_QPT_RC, scq=self.scq, rcq=self.rcq,
                          cap=cap, sq_sig_all=1)
        attr = QPAttr(port_num=PORT)
        attr.qp_access_flags = LW | RW
        self.qp = QP(pd, init, attr)
        self.qpn = self.qp.qp_num

    def post_recv(self, slot):
        sge = SGE(self.rbuf.buf + slot * SLOT, SLOT, self.rbuf.lkey)
        self.qp.post_recv(RecvWR(wr_id=slot, num_sge=1, sg=[sge]), None)

    def connect(self, ctx, gidx, peer, rq_psn, sq_psn):
        attr = QPAttr(port_num=PORT)
        attr.qp_access_flags = LW | RW
        attr.path_mtu = ibv_mtu.IBV_MTU_1024
        attr.dest_qp_num = peer.qpn
        attr.rq_psn = rq_psn
        attr.sq_psn = sq_psn
        attr.max_dest_rd_atomic = 1
        attr.max_rd_atomic = 1
        attr.min_rnr_timer = 12
        attr.timeout = 14
        attr.retry_cnt = 7
        attr.rnr_retry = 7
        gr = GlobalRoute(dgid=ctx.query_gid(PORT, gidx), sgid_index=gidx)
        attr.ah_attr = AHAttr(port_num=PORT, is_global=1, gr=gr, dlid=0)
        self.qp.to_rts(attr)


def rc_send(src, dst, size, seed):
    data = pattern(seed, size)
    src.sbuf.write(data, size, 0)
    wr = SendWR(wr_id=seed, opcode=ibv_wr_opcode.IBV_WR_SEND, num_sge=1,
                sg=[SGE(src.sbuf.buf, size, src.sbuf.lkey)],
                send_flags=ibv_send_flags.IBV_SEND_SIGNALED)
    src.qp.post_send(wr, None)
    what = f"SEND {src.name}->{dst.name} {size} B"
    poll(src.scq, what + " (send)")
    wc = poll(dst.rcq, what + " (receive)")[0]
    slot = wc.wr_id
    if wc.opcode != ibv_wc_opcode.IBV_WC_RECV or wc.byte_len != size:
        raise Failed(f"{what}: receive opcode {wc.opcode} byte_len {wc.byte_len}")
    if not 0 <= slot < NSLOTS:
        raise Failed(f"{what}: receive wr_id {slot}")
    got = dst.rbuf.read(size, slot * SLOT)
    if got != data:
        raise Failed(f"{what}: data differs")
    dst.post_recv(slot)


def rc_write(src, dst, size, seed):
    data = pattern(seed, size)
    src.sbuf.write(data, size, 0)
    wr = SendWR(wr_id=seed, opcode=ibv_wr_opcode.IBV_WR_RDMA_WRITE, num_sge=1,
                sg=[SGE(src.sbuf.buf, size, src.sbuf.lkey)],
                send_flags=ibv_send_flags.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(dst.wbuf.rkey, dst.wbuf.buf)
    src.qp.post_send(wr, None)
    what = f"RDMA WRITE {src.name}->{dst.name} {size} B"
    poll(src.scq, what)
    if dst.wbuf.read(size, 0) != data:
        raise Failed(f"{what}: data differs")


class Ud:
    def __init__(self, ctx, pd, gidx):
        self.scq = CQ(ctx, 64, None, None, 0)
        self.rcq = CQ(ctx, 64, None, None, 0)
        self.sbuf = MR(pd, UD_SLOT, LW)
        self.rbuf = MR(pd, UD_SLOT * UD_NSLOTS, LW)
        cap = QPCap(max_send_wr=16, max_recv_wr=UD_NSLOTS, max_send_sge=1, max_recv_sge=1)
        init = QPInitAttr(qp_type=ibv_qp_type.IBV_QPT_UD, scq=self.scq, rcq=self.rcq,
                          cap=cap, sq_sig_all=1)
        attr = QPAttr(port_num=PORT)
        attr.qkey = QKEY
        attr.pkey_index = 0
        self.qp = QP(pd, init, attr)  # a UD QP with attributes ends in RTS
        self.qpn = self.qp.qp_num
        gr = GlobalRoute(dgid=ctx.query_gid(PORT, gidx), sgid_index=gidx)
        self.ah = AH(pd, attr=AHAttr(port_num=PORT, is_global=1, gr=gr, dlid=0))

    def post_recv(self, slot):
        sge = SGE(self.rbuf.buf + slot * UD_SLOT, UD_SLOT, self.rbuf.lkey)
        self.qp.post_recv(RecvWR(wr_id=slot, num_sge=1, sg=[sge]), None)

    def send_self(self, size, seed, addr):
        data = pattern(seed, size)
        self.sbuf.write(data, size, 0)
        wr = SendWR(wr_id=seed, opcode=ibv_wr_opcode.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(self.sbuf.buf, size, self.sbuf.lkey)],
                    send_flags=ibv_send_flags.IBV_SEND_SIGNALED)
        wr.set_wr_ud(self.ah, self.qpn, QKEY)
        self.qp.post_send(wr, None)
        what = f"UD SEND to itself {size} B"
        poll(self.scq, what + " (send)")
        wc = poll(self.rcq, what + " (receive)")[0]
        slot = wc.wr_id
        if (wc.opcode != ibv_wc_opcode.IBV_WC_RECV or wc.byte_len != GRH + size or
                wc.src_qp != self.qpn or not 0 <= slot < UD_NSLOTS):
            raise Failed(f"{what}: opcode {wc.opcode} byte_len {wc.byte_len} "
                         f"src_qp {wc.src_qp} wr_id {slot}")
        got = self.rbuf.read(GRH + size, slot * UD_SLOT)
        # For IPv4 the GRH is 20 unused bytes and the IPv4 header: its source and
        # destination are both addr.
        ip = bytes(ipaddress.IPv4Address(addr).packed)
        if got[20] >> 4 != 4 or got[32:36] != ip or got[36:40] != ip:
            raise Failed(f"{what}: GRH {got[:GRH].hex()}")
        if got[GRH:] != data:
            raise Failed(f"{what}: data differs")
        self.post_recv(slot)


def nothing_happened(a, b, ud):
    """No completion anywhere, every QP in RTS, A's canary intact."""
    for name, cq in (("A send", a.scq), ("A recv", a.rcq), ("B send", b.scq),
                     ("B recv", b.rcq), ("UD send", ud.scq), ("UD recv", ud.rcq)):
        got, wcs = cq.poll(16)
        if got:
            raise Failed(f"{name} CQ has {got} unexpected completion(s): " +
                         ", ".join(f"status {w.status} opcode {w.opcode} byte_len "
                                   f"{w.byte_len} src_qp {w.src_qp}" for w in wcs[:got]))
    for name, qp in (("A", a.qp), ("B", b.qp), ("UD", ud.qp)):
        state = qp.query(ibv_qp_attr_mask.IBV_QP_STATE)[0].qp_state
        if state != ibv_qp_state.IBV_QPS_RTS:
            raise Failed(f"QP {name} in state {state}, not RTS")
    if a.wbuf.read(SLOT, 0) != CANARY * SLOT:
        raise Failed("A's remotely writable buffer was written")
    log("after the attack: no completions, QPs in RTS, canary intact")


def main():
    dev, addr, go = sys.argv[1], sys.argv[2], sys.argv[3]
    ctx = Context(name=dev)
    gidx = gid_index(ctx, addr)
    pd = PD(ctx)
    a = Side("A", ctx, pd)
    b = Side("B", ctx, pd)
    a.connect(ctx, gidx, b, rq_psn=PSN_A, sq_psn=PSN_B)
    b.connect(ctx, gidx, a, rq_psn=PSN_B, sq_psn=PSN_A)
    ud = Ud(ctx, pd, gidx)
    for s in range(NSLOTS):
        a.post_recv(s)
        b.post_recv(s)
    for s in range(UD_NSLOTS):
        ud.post_recv(s)
    a.wbuf.write(CANARY * SLOT, SLOT, 0)
    log(f"{dev}: GID index {gidx}; RC A {a.qpn} (rq_psn {PSN_A:#x}) <-> B {b.qpn} "
        f"(rq_psn {PSN_B:#x}); UD {ud.qpn} (Q_Key {QKEY:#x})")
    # The setup works: one single-packet SEND each way, one datagram.
    rc_send(b, a, 64, 1)
    rc_send(a, b, 64, 2)
    ud.send_self(64, 3, addr)
    log("before the attack: SEND both ways and UD to itself ok")
    viol0 = ctx.query_port(PORT).qkey_viol_cntr
    log(f"ready rc={a.qpn} rcpsn={(PSN_A + 1) & 0xFFFFFF} ud={ud.qpn} "
        f"rkey={a.wbuf.rkey} va={a.wbuf.buf}")
    end = time.monotonic() + GO_TIMEOUT
    while not os.path.exists(go):
        if time.monotonic() > end:
            raise Failed(f"{go} did not appear in {GO_TIMEOUT} s")
        time.sleep(0.1)
    # rxe counts Q_Key violations in the port attributes.
    log(f"port qkey_viol_cntr {viol0} -> {ctx.query_port(PORT).qkey_viol_cntr}")
    nothing_happened(a, b, ud)
    seed = 100
    for size in RC_SIZES:
        for src, dst in ((b, a), (a, b)):
            rc_send(src, dst, size, seed)
            rc_write(src, dst, size, seed + 1)
            seed += 2
    log(f"after the attack: {len(RC_SIZES)} SENDs and RDMA WRITEs each way ok "
        f"(sizes {RC_SIZES})")
    for size in UD_SIZES:
        ud.send_self(size, seed, addr)
        seed += 1
    log(f"after the attack: {len(UD_SIZES)} datagrams to itself ok (sizes {UD_SIZES})")


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
