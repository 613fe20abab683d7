// SPDX-License-Identifier: GPL-2.0

//! The QP's work item: what the data path's runs leave to it (events to raise, faults
//! of on-demand MRs to start, a requester or responder run to go on with, receives
//! posted to a QP in the error state), and the acknowledgement timeout and RNR timers.

use super::odp::OdpWait;
use super::req::timeout_ms;
use super::{comp, req, QpShared, RxeQp};
use crate::fault::FaultWaiter;
use crate::ib::verbs::WcStatus;
use crate::ib::{
    device::Device,
    qp::QpState,
    task::{Task, TaskRun},
};
use crate::mr::Resolving;
use crate::stats::Counter;
use crate::RxeRs;
use kernel::sync::Arc;

impl TaskRun for QpShared {
    fn run(task: &Arc<Task<Self>>) {
        let mut faults = [None; OdpWait::COUNT];
        let (pending, mut kick, mut respond, mut ended, epoch) = {
            let mut inner = task.inner.lock();
            if inner.dead {
                return;
            }
            if inner.state == QpState::Err {
                RxeQp::flush_rest(task, &mut inner);
            }
            let kick = core::mem::take(&mut inner.kick);
            let respond = core::mem::take(&mut inner.respond);
            let ended = core::mem::take(&mut inner.odp_ended);
            for (i, fault) in faults.iter_mut().enumerate() {
                if ended[i] {
                    // The waiter runs again and asks anew if pages are still missing.
                    inner.odp[i] = None;
                }
                if !inner.odp_busy[i] {
                    *fault = inner.odp[i].take();
                    inner.odp_busy[i] = fault.is_some();
                }
            }
            let pending = core::mem::take(&mut inner.pending);
            (pending, kick, respond, ended, inner.odp_epoch)
        };
        for ev in pending {
            task.events.raise(ev);
        }
        let dev = &task.dev;
        // A slot handed over in the QP's turn: the first fault to start uses it; if none
        // does, it goes on to the next in line at the end of the loop.
        let mut granted = task.link.granted.lock().take();
        let waiter: Arc<dyn FaultWaiter> = task.link.clone();
        for (wait, fault) in OdpWait::ALL.into_iter().zip(faults.iter()) {
            let Some(fault) = fault else {
                continue;
            };
            let link = task.link.clone();
            let r = crate::mr::resolve(dev, fault, (&waiter, &mut granted), move |r| {
                link.ended(wait, epoch, r)
            });
            let r = match r {
                Ok(Resolving::Started) => continue,
                Ok(Resolving::Waiting) => {
                    // Asked for again when a slot is handed over (the task runs after
                    // this run then), unless the QP was reset meanwhile or its waiter
                    // asked for other pages since.
                    let mut inner = task.inner.lock();
                    inner.odp_busy[wait as usize] = false;
                    if inner.odp_epoch == epoch && inner.odp[wait as usize].is_none() {
                        inner.odp[wait as usize] = Some(*fault);
                    }
                    continue;
                }
                Ok(Resolving::Mapped) => Ok(()),
                Err(e) => Err(e),
            };
            if task.inner.lock().fault_ended(wait, epoch, r) {
                ended[wait as usize] = true;
            } else {
                // Reset meanwhile: a request that waited for this one is taken next run.
                dev.wq.run(task);
            }
        }
        drop(granted);
        let mut go_back = false;
        for wait in OdpWait::ALL.into_iter().filter(|w| ended[*w as usize]) {
            match wait {
                OdpWait::Requester => kick = true,
                OdpWait::Completer => go_back = true,
                OdpWait::ReadResponse => respond = true,
                OdpWait::Request => {}
            }
        }
        if go_back {
            let mut inner = task.inner.lock();
            if !inner.dead && inner.state == QpState::Rts {
                comp::go_back(dev, &mut inner);
                kick = true;
            }
        }
        if respond {
            RxeQp::run_responder(dev, &dev.ndev, task);
        }
        if kick {
            RxeQp::run_requester(dev, task);
        }
    }

    /// The RNR timer ran out, or the acknowledgement timeout.
    fn timer(task: &Arc<Task<Self>>) {
        let dev = &task.dev;
        {
            let mut inner = task.inner.lock();
            if inner.dead || inner.state != QpState::Rts {
                return;
            }
            if inner.rnr_wait {
                inner.rnr_wait = false;
            } else {
                let head = inner.sq.consumer();
                let unacked = head != inner.req.next || inner.req.cur.is_some();
                if !unacked {
                    return;
                }
                if inner.progress {
                    // Acknowledgements are coming: look again one timeout later.
                    inner.progress = false;
                    if let Some(ms) = timeout_ms(inner.attrs.timeout) {
                        dev.wq.run_after(task, ms);
                    }
                    return;
                }
                dev.counters.inc(Counter::AckTimeout);
                if inner.retry_left == 0 {
                    dev.counters.inc(Counter::RetryExceeded);
                    let rec = inner.req.record(head);
                    req::fail(
                        dev,
                        task,
                        &mut inner,
                        head,
                        rec.wr_id,
                        WcStatus::RetryExcErr,
                    );
                    return;
                }
                inner.retry_left -= 1;
                comp::retry_lost(dev, &mut inner);
            }
        }
        RxeQp::run_requester(dev, task);
    }
}

impl RxeQp {
    /// Queues the QP's work item, unless the QP is dead: what its runs left (their
    /// `kick` and `respond`) goes on there. For a QP that waited for room in the
    /// loopback queue; called in an RCU read-side section.
    pub(crate) fn resume(dev: &Device<RxeRs>, shared: &Arc<Task<QpShared>>) {
        if !shared.inner.lock().dead {
            dev.wq.run(shared);
        }
    }
}
