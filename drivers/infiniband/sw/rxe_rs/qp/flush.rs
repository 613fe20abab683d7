// SPDX-License-Identifier: GPL-2.0

//! The flush of a QP's work: entry into the error state from the data path, and the
//! `WR_FLUSH_ERR` completions of everything outstanding in both queues.

use super::{QpInner, QpShared, RxeQp};
use crate::ib::{
    device::Device,
    qp::{QpEvent, QpState},
    task::{Task, Workqueue},
};
use crate::wc::{Completion, WC_WR_FLUSH_ERR};
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
    /// was being placed into, which comes before those still in the ring.
    pub(super) fn flush(shared: &QpShared, inner: &mut QpInner, wq: &Workqueue) {
        inner
            .sq
            .flush(&shared.send_cq, wq, shared.qp_num.get(), shared.wc_qp);
        // Nothing more is answered either.
        inner.resp.stop();
        inner.req.cur = None;
        inner.req.next = inner.sq.consumer();
        inner.rnr_wait = false;
        for wqe in inner.resp.take_unfinished().into_iter().flatten() {
            let c = Completion {
                wr_id: wqe.wr_id,
                status: WC_WR_FLUSH_ERR,
                qp_num: shared.qp_num.get(),
                wc_qp: shared.wc_qp,
                ..Default::default()
            };
            shared.recv_cq.post(wq, &c, false);
        }
        if let Some(rq) = &mut inner.rq {
            rq.flush(&shared.recv_cq, wq, shared.qp_num.get(), shared.wc_qp);
        }
    }
}
