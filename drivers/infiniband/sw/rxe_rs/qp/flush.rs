// SPDX-License-Identifier: GPL-2.0

//! The flush of a QP's work: entry into the error state from the data path, and the
//! `WR_FLUSH_ERR` completions of everything outstanding in both queues.

use super::{QpInner, QpShared, RxeQp};
use crate::cq::CqHandle;
use crate::ib::verbs::WcStatus;
use crate::ib::{
    device::Device,
    qp::{QpEvent, QpState},
    task::{Task, Workqueue},
};
use crate::param;
use crate::queue::WqeRing;
use crate::wc::Completion;
use crate::RxeRs;
use kernel::sync::Arc;

impl RxeQp {
    /// Moves a QP to the error state from the data path (a work request or packet that
    /// failed): everything outstanding is flushed.
    pub(crate) fn enter_err(
        dev: &Device<RxeRs>,
        shared: &Arc<Task<QpShared>>,
        inner: &mut QpInner,
    ) {
        if inner.state == QpState::Err {
            return;
        }
        inner.state = QpState::Err;
        Self::flush(shared, inner, &dev.wq);
        if shared.srq.is_some() {
            Self::raise(dev, shared, inner, QpEvent::LastWqeReached);
        }
    }

    /// Flushes both queues of a QP in the error state, and the receive WQE a message
    /// was being placed into, which comes before those still in the ring. A run's
    /// budget of each ring at a time (a process may claim a full ring by writing its
    /// producer index, and this runs in softirq too): the QP's task flushes the rest,
    /// up to where the rings' producers are now (see [`Self::flush_rest`]).
    pub(super) fn flush(shared: &Arc<Task<QpShared>>, inner: &mut QpInner, wq: &Workqueue) {
        inner.flush_end = (
            inner.sq.producer(),
            inner.rq.as_ref().map_or(0, |rq| rq.producer()),
        );
        let mut left = shared.flush_some(&mut inner.sq, inner.flush_end.0, &shared.send_cq, wq);
        // Nothing more is answered either.
        inner.resp.stop();
        inner.req.cur = None;
        inner.req.next = inner.sq.consumer();
        inner.rnr_wait = false;
        for wqe in inner.resp.take_unfinished().into_iter().flatten() {
            shared
                .recv_cq
                .post(wq, &shared.flush_error(wqe.wr_id), false);
        }
        if let Some(rq) = &mut inner.rq {
            left |= shared.flush_some(rq, inner.flush_end.1, &shared.recv_cq, wq);
        }
        if left {
            wq.run(shared);
        }
    }

    /// A packet for a QP in the error state: the receives a process posted since the
    /// device last heard of the QP (librxe posts them without a system call) are to be
    /// flushed, by the task (as rxe's receiver does on a packet).
    pub(crate) fn flush_posted_receives(
        dev: &Device<RxeRs>,
        shared: &Arc<Task<QpShared>>,
        inner: &mut QpInner,
    ) {
        if let Some(rq) = &inner.rq {
            if rq.count() > 0 {
                inner.flush_end.1 = rq.producer();
                dev.wq.run(shared);
            }
        }
    }

    /// From the QP's task, in the error state: what [`Self::flush`] and
    /// [`Self::flush_posted_receives`] left, a run's budget of each ring at a time; the
    /// task runs again while some are left.
    pub(super) fn flush_rest(task: &Arc<Task<QpShared>>, inner: &mut QpInner) {
        let wq = &task.dev.wq;
        let (sq_end, rq_end) = inner.flush_end;
        let mut left = task.flush_some(&mut inner.sq, sq_end, &task.send_cq, wq);
        if let Some(rq) = &mut inner.rq {
            left |= task.flush_some(rq, rq_end, &task.recv_cq, wq);
        }
        if left {
            wq.run(task);
        }
    }
}

impl QpShared {
    /// The completion of the work request `wr_id` that ended in error with `status`.
    pub(super) fn error_completion(&self, wr_id: u64, status: WcStatus) -> Completion {
        Completion {
            wr_id,
            status,
            qp_num: self.qp_num.get(),
            wc_qp: self.wc_qp,
            ..Default::default()
        }
    }

    /// The `WR_FLUSH_ERR` completion of the work request `wr_id`.
    pub(super) fn flush_error(&self, wr_id: u64) -> Completion {
        self.error_completion(wr_id, WcStatus::WrFlushErr)
    }

    /// Completes the work requests of `ring` before slot `end` as [`Self::flush_ring`], a
    /// run's budget of them at most; whether some are left.
    pub(super) fn flush_some(
        &self,
        ring: &mut WqeRing,
        end: u32,
        cq: &CqHandle,
        wq: &Workqueue,
    ) -> bool {
        let stop = if ring.past_consumer(end) <= param::RUN_BUDGET {
            end
        } else {
            ring.index_after(ring.consumer(), param::RUN_BUDGET)
        };
        self.flush_ring(ring, Some(stop), cq, wq);
        // The producer may have gone back before `end`: nothing is left then.
        ring.consumer() != end && ring.count() > 0
    }

    /// Completes the work requests of `ring` before slot `end` (all of them for `None`)
    /// with a flush error on `cq`, in order. Once the CQ overflowed, the rest are
    /// consumed without completions.
    pub(super) fn flush_ring(
        &self,
        ring: &mut WqeRing,
        end: Option<u32>,
        cq: &CqHandle,
        wq: &Workqueue,
    ) {
        let mut lost = false;
        let each = |wr_id| {
            if !lost && !cq.post(wq, &self.flush_error(wr_id), false) {
                lost = true;
            }
        };
        match end {
            Some(end) => ring.drain_to(end, each),
            None => ring.drain(each),
        }
    }
}
