// SPDX-License-Identifier: GPL-2.0

//! The device's loopback queue: packets the device sends to itself (see `xmit`), queued
//! and received in a bottom half as packets from the network are, and the QPs whose
//! requester or responder waits for room in it.

use crate::device::RxeDev;
use crate::ib::{
    device::{Device, DeviceRef},
    skb::{Skb, SkbList},
    sync::SpinLockIrq,
    task::{Task, TaskRun},
};
use crate::qp::RxeQp;
use crate::recv::Source;
use crate::stats::Counter;
use crate::RxeRs;
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// Packets the device sent to itself, waiting to be received.
#[pin_data]
pub(crate) struct LoopQueue {
    #[pin]
    pub(crate) list: SkbList,
    /// A receiver is queued or running; the queue is empty when it is not.
    pub(crate) busy: bool,
    /// The device, held for the receiver queued next (taken by it while it runs).
    pub(crate) dev: Option<DeviceRef<RxeRs>>,
    /// QPs (by number) whose requester or responder stopped at the backlog: the
    /// receiver resumes them once the queue has room again.
    pub(crate) waiting: [u32; LOOP_WAITERS],
    pub(crate) nwaiting: usize,
}

/// How many QPs may wait for room in the loopback queue; one more resumes from its
/// work item at once instead.
pub(crate) const LOOP_WAITERS: usize = 32;

/// The loopback queue's receiver: a task that runs in a bottom half.
#[pin_data]
pub(crate) struct LoopRx {
    #[pin]
    pub(crate) q: SpinLockIrq<LoopQueue>,
    /// How many packets the queue holds: changed under its lock, read without it.
    pub(crate) len: Atomic<usize>,
}

/// How many packets the loopback queue's receiver takes in one run (one RCU read-side
/// section) before it queues itself again behind other bottom-half work.
const LOOP_BATCH: usize = 64;

impl TaskRun for LoopRx {
    const BH: bool = true;

    /// Receives up to [`LOOP_BATCH`] packets, in an RCU read-side section as packets
    /// from the network are (so a `destroy_qp` or `dereg_mr` waiting for a grace period
    /// waits for one batch, not for the whole queue); queues itself again if the
    /// batch was full.
    fn run(task: &Arc<Task<Self>>) {
        let Some(dev) = task.q.lock().as_mut().project().dev.take() else {
            return;
        };
        let mut drained = false;
        {
            let _rcu = kernel::sync::rcu::read_lock();
            for _ in 0..LOOP_BATCH {
                let next = {
                    let mut q = task.q.lock();
                    let q = q.as_mut().project();
                    let next = q.list.pop();
                    match next {
                        Some(_) => {
                            task.len.fetch_sub(1, Relaxed);
                        }
                        None => *q.busy = false,
                    }
                    next
                };
                match next {
                    Some(skb) => crate::recv::deliver(&dev, skb, Source::Loopback),
                    None => {
                        drained = true;
                        break;
                    }
                }
            }
        }
        // QPs that stopped at the backlog go on once the queue has room again.
        let (waiting, n) = {
            let mut q = task.q.lock();
            let q = q.as_mut().project();
            let room = task.len.load(Relaxed) < LOOP_BACKLOG / 2;
            let n = if room { core::mem::take(q.nwaiting) } else { 0 };
            (*q.waiting, n)
        };
        if n > 0 {
            let _rcu = kernel::sync::rcu::read_lock();
            for &qpn in &waiting[..n] {
                if let Some(qp) = dev.qp_table.get(qpn) {
                    RxeQp::resume(&dev, &qp);
                }
            }
        }
        if !drained {
            *task.q.lock().as_mut().project().dev = Some(dev);
            Task::run_bh(task);
        }
    }
}

/// Packets the loopback queue holds before the requesters and responders of the
/// device's QPs stop adding to it: each waits for the queue's receiver to make room,
/// which then resumes it from its QP's work item.
pub(crate) const LOOP_BACKLOG: usize = 1024;

/// Packets the loopback queue holds at most: a packet beyond is dropped and counted in
/// `send_err`, as a full transmit queue drops (only acknowledgements and READ
/// responses, which do not wait, can find the queue that full). The memory a process
/// or a peer can make the device hold here is bounded.
const LOOP_LIMIT: usize = 4 * LOOP_BACKLOG;

/// The loopback queue and its receiver; dropping it waits for a run in progress.
pub(crate) struct Loopback(pub(crate) Arc<Task<LoopRx>>);

impl Drop for Loopback {
    fn drop(&mut self) {
        Task::cancel(&self.0);
    }
}

/// Receives a packet the device sent to itself.
///
/// The packet is queued and received in a bottom half, as a packet from the network
/// is, and in order with every other packet the device sends itself; what receiving
/// it sends (an acknowledgement, the next packet of a message) is queued behind it
/// rather than received by recursion. Called from process context, the queue's
/// receiver runs before this returns when the queue was idle. Must not be called
/// with interrupts disabled.
pub(crate) fn loopback(dev: &Device<RxeRs>, skb: Skb) -> Result {
    {
        let len = &dev.lo.0.len;
        let mut q = dev.lo.0.q.lock();
        let q = q.as_mut().project();
        if len.load(Relaxed) >= LOOP_LIMIT {
            return Err(ENOSPC);
        }
        if *q.busy {
            // A receiver is queued or running and will find the packet.
            q.list.push(skb).map_err(|_| EINVAL)?;
            len.fetch_add(1, Relaxed);
            return Ok(());
        }
        let Some(held) = dev.get_ref() else {
            // Only a device being unregistered refuses: its QPs are all destroyed,
            // so there is no one to receive the packet.
            dev.counters.inc(Counter::Dropped);
            return Ok(());
        };
        q.list.push(skb).map_err(|_| EINVAL)?;
        len.fetch_add(1, Relaxed);
        *q.busy = true;
        *q.dev = Some(held);
    }
    Task::run_bh(&dev.lo.0);
    Ok(())
}

impl RxeDev {
    /// How many packets the loopback queue holds.
    pub(crate) fn loop_backlog(&self) -> usize {
        self.lo.0.len.load(Relaxed)
    }

    /// QP `qpn` stopped at the loopback queue's backlog: its work item is to run once
    /// the queue has room again (see `LoopRx::run`). Returns `false` when the caller is
    /// to queue it itself: the queue has room already (it may have drained since the
    /// caller looked), or too many QPs wait.
    pub(crate) fn wait_for_loopback(&self, qpn: u32) -> bool {
        let mut q = self.lo.0.q.lock();
        let q = q.as_mut().project();
        if self.lo.0.len.load(Relaxed) < LOOP_BACKLOG {
            return false;
        }
        let n = *q.nwaiting;
        if q.waiting[..n].contains(&qpn) {
            return true;
        }
        if n == LOOP_WAITERS {
            return false;
        }
        q.waiting[n] = qpn;
        *q.nwaiting = n + 1;
        true
    }
}
