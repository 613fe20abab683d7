// SPDX-License-Identifier: GPL-2.0

//! Posting: a kernel consumer's send and receive work requests, written into the QP's
//! rings in rxe's WQE layouts, and the doorbell a process rings after writing its send
//! ring itself.

use super::{QpShared, RxeQp};
use crate::ib::{
    device::eopnotsupp,
    qp::{Qp, QpState, QpType},
    verbs::{SendFlag, WrOpcode},
    wr::{RecvWr, SendWr},
};
use crate::sw::rxe_abi::{send as at, SEND_WQE_HDR, SGE_LEN};
use crate::wqe::{put_at, put_sge, returns_data, MAX_SEND_WQE};
use crate::RxeRs;
use kernel::{cpu::CpuId, prelude::*, sync::atomic::Relaxed};

impl RxeQp {
    /// A kernel consumer's send work request, in rxe's WQE layout (the requester reads
    /// kernel and user send rings alike).
    fn kernel_wqe(shared: &QpShared, wr: &SendWr<'_>) -> Result<([u8; MAX_SEND_WQE], usize)> {
        let mut b = [0u8; MAX_SEND_WQE];
        let opcode = wr.opcode().ok_or_else(eopnotsupp)?;
        let flags = wr.send_flags();
        let connected = matches!(shared.qp_type, QpType::Rc | QpType::Uc);
        match opcode {
            WrOpcode::Send
            | WrOpcode::SendWithImm
            | WrOpcode::RdmaWrite
            | WrOpcode::RdmaWriteWithImm => {}
            WrOpcode::LocalInv | WrOpcode::RegMr if connected => {}
            // The answer goes to the SGEs, which inline data would take the place of.
            op if returns_data(op) && flags.contains(SendFlag::Inline) => return Err(EINVAL),
            WrOpcode::RdmaRead
            | WrOpcode::RdmaReadWithInv
            | WrOpcode::AtomicCmpAndSwp
            | WrOpcode::AtomicFetchAndAdd
            | WrOpcode::SendWithInv
                if shared.qp_type == QpType::Rc => {}
            _ => return Err(eopnotsupp()),
        }
        let put32 = |b: &mut [u8; MAX_SEND_WQE], at: usize, v: u32| put_at(b, at, &v.to_ne_bytes());
        let put64 = |b: &mut [u8; MAX_SEND_WQE], at: usize, v: u64| put_at(b, at, &v.to_ne_bytes());
        put64(&mut b, at::WR_ID, wr.wr_id());
        put32(&mut b, at::OPCODE, opcode as u32);
        put32(&mut b, at::FLAGS, flags.into());
        put_at(&mut b, at::EX, &wr.ex());
        if let Some(ud) = wr.ud::<RxeRs>() {
            put32(&mut b, at::REMOTE_QPN, ud.remote_qpn);
            put32(&mut b, at::REMOTE_QKEY, ud.remote_qkey);
            put32(&mut b, at::AH_NUM, ud.ah.num());
        } else if !connected {
            return Err(EINVAL);
        }
        if let Some((addr, rkey)) = wr.rdma() {
            put64(&mut b, at::REMOTE_ADDR, addr);
            put32(&mut b, at::RKEY, rkey);
        }
        if let Some((addr, compare_add, swap, rkey)) = wr.atomic() {
            put64(&mut b, at::REMOTE_ADDR, addr);
            put64(&mut b, at::COMPARE_ADD, compare_add);
            put64(&mut b, at::SWAP, swap);
            put32(&mut b, at::ATOMIC_RKEY, rkey);
        }
        if opcode == WrOpcode::RegMr {
            let reg = wr.reg().ok_or(EINVAL)?;
            put32(&mut b, at::REG_LKEY, reg.lkey);
            put32(&mut b, at::REG_KEY, reg.key);
            put32(&mut b, at::REG_ACCESS, reg.access);
            put64(&mut b, at::REG_IOVA, reg.iova);
            // A registration carries no data.
            return Ok((b, SEND_WQE_HDR));
        }
        let n = wr.num_sge();
        if n > shared.cap.max_send_sge as usize {
            return Err(EINVAL);
        }
        let mut length = 0u32;
        let mut end = SEND_WQE_HDR;
        for i in 0..n {
            let sge = wr.sge(i);
            length = length.checked_add(sge.length).ok_or(EINVAL)?;
            if flags.contains(SendFlag::Inline) {
                // Inline data is copied now, from the consumer's (kernel) memory.
                let len = sge.length as usize;
                if length > shared.cap.max_inline_data || end + len > MAX_SEND_WQE {
                    return Err(EINVAL);
                }
                wr.read_inline(i, &mut b[end..end + len])?;
                end += len;
            } else {
                put_sge(&mut b, end, &sge);
                end += SGE_LEN;
            }
        }
        put32(&mut b, at::DMA_LENGTH, length);
        put32(&mut b, at::DMA_RESID, length);
        put32(&mut b, at::DMA_NUM_SGE, n as u32);
        Ok((b, end))
    }

    /// A kernel consumer's send work request.
    ///
    /// In the error state it completes at once with a flush error (that is how
    /// `ib_drain_sq()` learns the queue is empty); before RTS it is refused, as by rxe.
    /// Otherwise it goes into the send ring, and the QP's task runs the requester:
    /// consumers post from any context, interrupts off included, where no packet may
    /// be sent.
    pub(crate) fn post_send_wr(qp: &Qp<RxeRs>, wr: &SendWr<'_>) -> Result {
        let mut inner = qp.shared.inner.lock();
        if inner.sq.is_user() {
            // A process's work goes through its ring and the doorbell.
            return Err(EINVAL);
        }
        match inner.state {
            QpState::Reset | QpState::Init | QpState::Rtr => Err(EINVAL),
            QpState::Err => {
                // After everything posted before it (`ib_drain_sq()` frees its work
                // requests once this completes): the entry into ERR flushed a run's
                // budget of the ring and left the rest to the QP's task, which is
                // done here first. A kernel consumer's ring holds only what it posted.
                let (shared, wq) = (&qp.shared, &qp.device().wq);
                shared.flush_ring(&mut inner.sq, None, &shared.send_cq, wq);
                shared
                    .send_cq
                    .post(wq, &shared.flush_error(wr.wr_id()), false);
                Ok(())
            }
            QpState::Rts | QpState::Sqd | QpState::Sqe => {
                let (wqe, len) = Self::kernel_wqe(&qp.shared, wr)?;
                inner.sq.push(&wqe[..len])?;
                if inner.state == QpState::Rts {
                    inner.kick = true;
                    drop(inner);
                    qp.device().wq.run(&qp.shared);
                }
                Ok(())
            }
        }
    }

    /// A kernel consumer's receive work request: queued in the receive ring (refused in
    /// RESET, as by rxe), and flushed at once in the error state.
    pub(crate) fn post_recv_wr(qp: &Qp<RxeRs>, wr: &RecvWr<'_>) -> Result {
        let mut inner = qp.shared.inner.lock();
        let state = inner.state;
        let Some(rq) = &mut inner.rq else {
            // Receives come from the SRQ.
            return Err(EINVAL);
        };
        if rq.is_user() || state == QpState::Reset {
            return Err(EINVAL);
        }
        rq.post_recv(wr, qp.shared.cap.max_recv_sge)?;
        if state == QpState::Err {
            let shared = &qp.shared;
            shared.flush_ring(rq, None, &shared.recv_cq, &qp.device().wq);
        }
        Ok(())
    }

    pub(crate) fn ring_doorbell(qp: &Qp<RxeRs>) -> Result {
        let mut inner = qp.shared.inner.lock();
        match inner.state {
            // Before RTS a send is refused at once (an immediate error, as the verbs
            // say). librxe has written it to the ring already: it is dropped, so that
            // it does not go out once the QP is in RTS after its poster was told it was
            // not posted (rxe keeps it). Nothing before it was started in these states.
            QpState::Reset | QpState::Init | QpState::Rtr => {
                inner.sq.discard();
                inner.req.next = inner.sq.consumer();
                Err(EINVAL)
            }
            QpState::Err => {
                Self::flush(&qp.shared, &mut inner, &qp.device().wq);
                Ok(())
            }
            // No new send is started while draining or after a send queue error.
            QpState::Sqd | QpState::Sqe => Ok(()),
            QpState::Rts => {
                qp.shared.tx_cpu.store(CpuId::current().as_u32(), Relaxed);
                drop(inner);
                Self::run_requester(qp.device(), &qp.shared);
                Ok(())
            }
        }
    }
}
