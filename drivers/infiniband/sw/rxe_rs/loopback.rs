// SPDX-License-Identifier: GPL-2.0

//! The device's loopback queue: packets the device sends to itself (see `xmit`), queued
//! and received in a bottom half as packets from the network are, and the QPs whose
//! requester or responder waits for room in it.
//!
//! The queue knows the driver only through [`LoopSink`]: it hands packets up and
//! resumes waiting QPs by number, so that nothing below the QPs calls back into them
//! by name.

use crate::ib::{
    device::{Device, DeviceRef, Driver},
    sync::{new_spinlock_irq, SpinLockIrq},
    task::{Task, TaskRun},
};
use crate::sw::skb::{Skb, SkbList};
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// The driver above a loopback queue.
pub(crate) trait LoopSink: Driver {
    /// The device's loopback queue.
    fn loopback(dev: &Device<Self>) -> &Loopback<Self>;

    /// Receives a packet the device sent to itself; called in an RCU read-side section.
    fn deliver(dev: &Device<Self>, skb: Skb);

    /// Resumes QP `qpn`, which waited for room in the queue; called in an RCU read-side
    /// section.
    fn resume(dev: &Device<Self>, qpn: u32);
}

/// Packets the device sent to itself, waiting to be received.
#[pin_data]
struct LoopQueue<T: LoopSink> {
    #[pin]
    list: SkbList,
    /// A receiver is queued or running; the queue is empty when it is not.
    busy: bool,
    /// The device, held for the receiver queued next (taken by it while it runs).
    dev: Option<DeviceRef<T>>,
    /// QPs (by number) whose requester or responder stopped at the backlog: the
    /// receiver resumes them once the queue has room again.
    waiting: [u32; LOOP_WAITERS],
    nwaiting: usize,
}

/// How many QPs may wait for room in the loopback queue; one more resumes from its
/// work item at once instead.
const LOOP_WAITERS: usize = 32;

/// The loopback queue's receiver: a task that runs in a bottom half.
#[pin_data]
struct LoopRx<T: LoopSink> {
    #[pin]
    q: SpinLockIrq<LoopQueue<T>>,
    /// How many packets the queue holds: changed under its lock, read without it.
    len: Atomic<usize>,
}

/// How many packets the loopback queue's receiver takes in one run (one RCU read-side
/// section) before it queues itself again behind other bottom-half work.
const LOOP_BATCH: usize = 64;

impl<T: LoopSink> TaskRun for LoopRx<T> {
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
                    Some(skb) => T::deliver(&dev, skb),
                    None => {
                        drained = true;
                        break;
                    }
                }
            }
        }
        // QPs that stopped at the backlog go on once the queue has room again (their
        // list is copied only if there are some: a run is per packet batch).
        let resume = {
            let mut q = task.q.lock();
            let q = q.as_mut().project();
            let room = task.len.load(Relaxed) < LOOP_BACKLOG / 2;
            (room && *q.nwaiting > 0).then(|| (*q.waiting, core::mem::take(q.nwaiting)))
        };
        if let Some((waiting, n)) = resume {
            let _rcu = kernel::sync::rcu::read_lock();
            for &qpn in &waiting[..n] {
                T::resume(&dev, qpn);
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
pub(crate) struct Loopback<T: LoopSink>(Arc<Task<LoopRx<T>>>);

impl<T: LoopSink> Drop for Loopback<T> {
    fn drop(&mut self) {
        Task::cancel(&self.0);
    }
}

impl<T: LoopSink> Loopback<T> {
    /// An empty queue.
    pub(crate) fn new() -> Result<Self> {
        Ok(Self(Task::new(try_pin_init!(LoopRx {
            q <- new_spinlock_irq!(pin_init!(LoopQueue {
                list <- SkbList::new(),
                busy: false,
                dev: None,
                waiting: [0; LOOP_WAITERS],
                nwaiting: 0,
            })),
            len: Atomic::new(0),
        }))?))
    }

    /// Receives a packet the device sent to itself.
    ///
    /// The packet is queued and received in a bottom half, as a packet from the network
    /// is, and in order with every other packet the device sends itself; what receiving
    /// it sends (an acknowledgement, the next packet of a message) is queued behind it
    /// rather than received by recursion. Called from process context, the queue's
    /// receiver runs before this returns when the queue was idle. Must not be called
    /// with interrupts disabled.
    ///
    /// `ENOSPC` when the queue is full; `ENODEV` when the device is being unregistered
    /// (its QPs are all destroyed, so there is no one to receive the packet).
    pub(crate) fn send(dev: &Device<T>, skb: Skb) -> Result {
        let lo = &T::loopback(dev).0;
        {
            let mut q = lo.q.lock();
            let q = q.as_mut().project();
            if lo.len.load(Relaxed) >= LOOP_LIMIT {
                return Err(ENOSPC);
            }
            if *q.busy {
                // A receiver is queued or running and will find the packet.
                q.list.push(skb).map_err(|_| EINVAL)?;
                lo.len.fetch_add(1, Relaxed);
                return Ok(());
            }
            let held = dev.get_ref().ok_or(ENODEV)?;
            q.list.push(skb).map_err(|_| EINVAL)?;
            lo.len.fetch_add(1, Relaxed);
            *q.busy = true;
            *q.dev = Some(held);
        }
        Task::run_bh(lo);
        Ok(())
    }

    /// How many packets the queue holds.
    pub(crate) fn backlog(&self) -> usize {
        self.0.len.load(Relaxed)
    }

    /// QP `qpn` stopped at the queue's backlog: it is to be resumed once the queue has
    /// room again (see `LoopRx::run`). Returns `false` when the caller is to resume it
    /// itself: the queue has room already (it may have drained since the caller
    /// looked), or too many QPs wait.
    pub(crate) fn wait(&self, qpn: u32) -> bool {
        let mut q = self.0.q.lock();
        let q = q.as_mut().project();
        if self.0.len.load(Relaxed) < LOOP_BACKLOG {
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
