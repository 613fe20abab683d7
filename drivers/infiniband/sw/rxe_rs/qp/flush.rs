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
    /// producer index, and this runs in softirq too): the QP's task flushes the rest
    /// (see [`Self::flush_rest`]).
    pub(super) fn flush(shared: &Arc<Task<QpShared>>, inner: &mut QpInner, wq: &Workqueue) {
        let mut left = shared.flush_some(&mut inner.sq, param::RUN_BUDGET, &shared.send_cq, wq);
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
            left |= shared.flush_some(rq, param::RUN_BUDGET, &shared.recv_cq, wq);
        }
        if left {
            wq.run(shared);
        }
    }

    /// From the QP's task, in the error state: what [`Self::flush`] left, and receives
    /// a process posted since (see `resp::request`), a run's budget of each ring at a
    /// time; the task runs again while some are left.
    pub(super) fn flush_rest(task: &Arc<Task<QpShared>>, inner: &mut QpInner) {
        let wq = &task.dev.wq;
        let mut left = task.flush_some(&mut inner.sq, param::RUN_BUDGET, &task.send_cq, wq);
        if let Some(rq) = &mut inner.rq {
            left |= task.flush_some(rq, param::RUN_BUDGET, &task.recv_cq, wq);
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

    /// Completes at most `budget` of the work requests of `ring` as [`Self::flush_ring`];
    /// whether some are left.
    pub(super) fn flush_some(
        &self,
        ring: &mut WqeRing,
        budget: u32,
        cq: &CqHandle,
        wq: &Workqueue,
    ) -> bool {
        if ring.count() <= budget {
            self.flush_ring(ring, None, cq, wq);
            return false;
        }
        let end = ring.index_after(ring.consumer(), budget);
        self.flush_ring(ring, Some(end), cq, wq);
        true
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
