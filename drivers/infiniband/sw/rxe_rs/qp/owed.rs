// SPDX-License-Identifier: GPL-2.0

//! The device's list of QPs that owe work after a receive batch (an acknowledgement to
//! the peer, a run of the requester), and the bottom half that does it for them once the
//! batch is received.

use super::RxeQp;
use crate::ib::{
    device::{Device, DeviceRef},
    sync::{new_spinlock_irq, SpinLockIrq},
    task::{Task, TaskRun},
};
use crate::RxeRs;
use kernel::{prelude::*, sync::Arc};

/// How many QPs may owe work at once, device-wide; a QP that finds the list full does
/// its work at once.
const OWED_BATCH: usize = 32;

/// What a QP owes after a receive batch.
#[derive(Clone, Copy)]
pub(crate) enum Owed {
    /// An acknowledgement to its peer.
    Ack = 1,
    /// A run of its requester: responses opened the window or completed WQEs.
    Send = 2,
}

/// The QPs (by number) that owe work after the receive batch, with what they owe (a
/// mask of [`Owed`]).
struct OwedQueue {
    qpns: [(u32, u8); OWED_BATCH],
    len: usize,
    /// The device, held for the sender queued next (taken by it while it runs); the
    /// sender is queued while this is `Some`.
    dev: Option<DeviceRef<RxeRs>>,
}

/// The sender of owed acknowledgements and requester runs: a task that runs in a
/// bottom half, after the one that received the packets (see [`owe`]).
#[pin_data]
struct OwedTx {
    #[pin]
    q: SpinLockIrq<OwedQueue>,
}

impl TaskRun for OwedTx {
    const BH: bool = true;

    /// Does what each listed QP owes, finding the QPs by number (a QP destroyed
    /// meanwhile is not found, or found dead): its acknowledgement, then its requester
    /// run.
    fn run(task: &Arc<Task<Self>>) {
        let (dev, qpns, len) = {
            let mut q = task.q.lock();
            let Some(dev) = q.dev.take() else {
                return;
            };
            let len = core::mem::take(&mut q.len);
            (dev, q.qpns, len)
        };
        let _rcu = kernel::sync::rcu::read_lock();
        for &(qpn, owed) in &qpns[..len] {
            let Some(qp) = dev.qp_table.get(qpn) else {
                continue;
            };
            if owed & Owed::Ack as u8 != 0 {
                RxeQp::send_owed_ack(&dev, &qp);
            }
            if owed & Owed::Send as u8 != 0 {
                RxeQp::kick_requester(&dev, &qp);
            }
        }
    }
}

/// The list of owed work (acknowledgements, requester runs) and its sender; dropping it
/// waits for a run in progress.
pub(crate) struct OwedWork(Arc<Task<OwedTx>>);

impl OwedWork {
    /// An empty list.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self(Task::new(try_pin_init!(OwedTx {
            q <- new_spinlock_irq!(OwedQueue {
                qpns: [(0, 0); OWED_BATCH],
                len: 0,
                dev: None,
            }),
        }))?))
    }
}

impl Drop for OwedWork {
    fn drop(&mut self) {
        Task::cancel(&self.0);
    }
}

/// Notes that QP `qpn` owes `what` (an acknowledgement to its peer, a run of its
/// requester), to be done in a bottom half that runs after the current one: every
/// packet received in the meantime (a network receive softirq's batch, a run of
/// the loopback queue's receiver) that asks for it is then served by that one
/// acknowledgement (it covers every PSN before its own) or that one run. Returns
/// `false` when the QP is to do it itself (the list is full, or the device is
/// being unregistered). Called from a bottom half.
pub(crate) fn owe(dev: &Device<RxeRs>, qpn: u32, what: Owed) -> bool {
    let queue = {
        let mut q = dev.owed.0.q.lock();
        let len = q.len;
        if let Some(e) = q.qpns[..len].iter_mut().find(|e| e.0 == qpn) {
            e.1 |= what as u8;
            return true;
        }
        if len == OWED_BATCH {
            return false;
        }
        let queue = q.dev.is_none();
        if queue {
            let Some(held) = dev.get_ref() else {
                return false;
            };
            q.dev = Some(held);
        }
        q.qpns[len] = (qpn, what as u8);
        q.len += 1;
        queue
    };
    if queue {
        Task::run_bh(&dev.owed.0);
    }
    true
}
