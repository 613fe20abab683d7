// SPDX-License-Identifier: GPL-2.0

//! Completion queues.
//!
//! A CQ is a hardware queue the device produces into and the consumer drains. For a
//! process it is a ring shared with librxe, which polls it without a system call: the
//! device owns the producer index (its private copy is the truth, the shared one only a
//! publication) and only reads the consumer index, masked, to know how much room is left.
//! Slots hold a `struct ib_uverbs_wc` (48 bytes) in 64-byte slots.
//!
//! A kernel consumer's CQ is a queue of completions in kernel memory that `poll_cq`
//! drains; its completions name their QP the way ib_core's consumers expect (the
//! `ib_qp`), and carry the kernel's values of the completion flags.
//!
//! Producers (QPs) hold a [`CqHandle`]. A completion is written into the ring at once;
//! the consumer is told (its completion handler, or `IB_EVENT_CQ_ERR` when a completion
//! found no room) from the device's workqueue, never from the call chain of a verb.
//! After the CQ is destroyed those calls do nothing (see `ib::cq::CqEvents`).
//!
//! Resizing makes a new ring, copies the waiting completions to its start and offers it
//! at a new offset; librxe unmaps the old ring and maps the new one while it holds its own
//! CQ lock, so it consumes nothing meanwhile. The old ring's pages stay valid for as long
//! as the process keeps them mapped.

use crate::ib::{
    cq::{Cq, CqEvents, CqInit, CqOps, Notify},
    device::Device,
    mmap::UserMap,
    object::{Charge, Quota},
    sync::{new_spinlock_irq, SpinLockIrq},
    task::{Task, TaskRun, Workqueue},
    ucontext::UserCall,
    verbs::WcStatus,
    wr::WcOut,
};
use crate::sw::{
    queue::{Geometry, Ring},
    rxe_abi::UVERBS_WC_LEN,
};
use crate::{param, wc::Completion, RxeRs};
use kernel::{prelude::*, sync::Arc};

/// The driver's part of a completion queue.
pub(crate) struct RxeCq {
    shared: CqHandle,
    _charge: Charge,
}

impl Drop for RxeCq {
    fn drop(&mut self) {
        // The CQ is being destroyed, so no QP produces into it any more (ib_core refuses
        // to destroy a CQ in use) and nothing queues its task again: once the task is off
        // the workqueue, nothing of the CQ runs.
        Task::cancel(&self.shared.0);
    }
}

/// A producer's reference to a CQ.
#[derive(Clone)]
pub(crate) struct CqHandle(Arc<Task<CqShared>>);

/// What a CQ's producers and its consumer share.
#[pin_data]
pub(crate) struct CqShared {
    #[pin]
    inner: SpinLockIrq<CqInner>,
    events: Arc<CqEvents>,
}

struct CqInner {
    queue: CqQueue,
    /// The kind of completion that raises the next completion event, if armed.
    armed: Option<Notify>,
    /// The consumer is to be told of new completions.
    tell_completion: bool,
    /// The consumer is to be told that completions were lost.
    tell_overflow: bool,
}

impl TaskRun for CqShared {
    fn run(task: &Arc<Task<Self>>) {
        let (completion, overflow) = {
            let mut inner = task.inner.lock();
            let told = (inner.tell_completion, inner.tell_overflow);
            inner.tell_completion = false;
            inner.tell_overflow = false;
            told
        };
        if overflow {
            task.events.overflow();
        }
        if completion {
            task.events.completion();
        }
    }
}

impl CqHandle {
    /// Adds a completion; `solicited` for one the sender marked so.
    ///
    /// Returns `false` when the CQ has no room: the completion is lost and the consumer
    /// is told (`IB_EVENT_CQ_ERR`).
    pub(crate) fn post(&self, wq: &Workqueue, c: &Completion, solicited: bool) -> bool {
        let mut inner = self.0.inner.lock();
        let stored = match &mut inner.queue {
            CqQueue::User(q) => q.push(c),
            CqQueue::Kernel(q) => q.push(c),
        };
        let wake = if stored {
            // An armed CQ fires on its next completion, or for a solicited-only request
            // on a solicited or unsuccessful one; then it is disarmed.
            let fire = match inner.armed {
                Some(Notify::NextComp) => true,
                Some(Notify::Solicited) => solicited || c.status != WcStatus::Success,
                None => false,
            };
            if fire {
                inner.armed = None;
                inner.tell_completion = true;
            }
            fire
        } else {
            inner.tell_overflow = true;
            true
        };
        drop(inner);
        if wake {
            wq.run(&self.0);
        }
        stored
    }
}

enum CqQueue {
    /// Shared with a process.
    User(UserQueue),
    /// A kernel consumer's.
    Kernel(KernelQueue),
}

/// A kernel consumer's completions, oldest first, in a fixed-size circular buffer.
struct KernelQueue {
    slots: KVVec<Completion>,
    /// The oldest completion's slot.
    head: usize,
    count: usize,
}

impl KernelQueue {
    /// Room for `cqe` completions, allocated now so that posting never allocates.
    fn new(cqe: u32) -> Result<Self> {
        let mut slots = KVVec::with_capacity(cqe as usize, GFP_KERNEL)?;
        slots.extend_with(cqe as usize, Completion::default(), GFP_KERNEL)?;
        Ok(Self {
            slots,
            head: 0,
            count: 0,
        })
    }

    /// The slot `n` places after the oldest, for `n` at most the length: `head` is below
    /// it, so one subtraction wraps the sum. (No `%`: a division the compiler cannot
    /// prove nonzero calls a panic that objtool does not know as one.)
    fn slot_after_head(&self, n: usize) -> usize {
        let i = self.head + n;
        i.checked_sub(self.slots.len()).unwrap_or(i)
    }

    fn push(&mut self, c: &Completion) -> bool {
        if self.count >= self.slots.len() {
            return false;
        }
        let i = self.slot_after_head(self.count);
        self.slots[i] = *c;
        self.count += 1;
        true
    }

    fn pop(&mut self) -> Option<Completion> {
        if self.count == 0 {
            return None;
        }
        let c = self.slots[self.head];
        self.head = self.slot_after_head(1);
        self.count -= 1;
        Some(c)
    }
}

struct UserQueue {
    ring: Ring,
    /// The offer of the ring to the process; dropping it withdraws the offset.
    map: UserMap,
    /// The device's producer index (masked), the truth the shared copy publishes.
    producer: u32,
}

impl UserQueue {
    /// A ring with room for `cqe` completions, offered to the caller's process.
    fn new(cqe: u32, user: &UserCall<'_, RxeRs>) -> Result<Self> {
        let ring = Ring::new(Geometry::new(cqe, UVERBS_WC_LEN)?)?;
        let map = UserMap::new(user.ctx, ring.mem())?;
        Ok(Self {
            ring,
            map,
            producer: 0,
        })
    }

    /// Completions written and not yet consumed.
    fn count(&self) -> u32 {
        self.producer.wrapping_sub(self.ring.consumer()) & self.ring.geometry().mask()
    }

    /// librxe's `struct mminfo`: where to map the ring and how much of it.
    fn mminfo(&self) -> [u8; 16] {
        crate::sw::rxe_abi::mminfo_of(&self.map)
    }

    /// Writes one completion, unless the ring is full.
    fn push(&mut self, c: &Completion) -> bool {
        if self.count() == self.ring.geometry().capacity() {
            return false;
        }
        self.ring.write_slot(self.producer, &c.to_uverbs());
        self.producer = self.producer.wrapping_add(1) & self.ring.geometry().mask();
        self.ring.set_producer(self.producer);
        true
    }

    /// Moves the `count` waiting completions of `old` to the start of this empty ring.
    fn take_from(&mut self, old: &UserQueue, count: u32) {
        crate::queue::copy_slots(&old.ring, old.ring.consumer(), &self.ring, count);
        self.producer = count;
        self.ring.set_producer(count);
    }
}

impl CqInner {
    fn count(&self) -> u32 {
        match &self.queue {
            CqQueue::User(q) => q.count(),
            // At most the CQ's size, which is a `u32`.
            CqQueue::Kernel(q) => q.count as u32,
        }
    }
}

fn check_cqe(cqe: u32) -> Result {
    if cqe == 0 || cqe > param::MAX_CQE {
        return Err(EINVAL);
    }
    Ok(())
}

impl RxeCq {
    pub(crate) fn create(
        cqs: &Arc<Quota>,
        attr: &CqInit,
        user: Option<&UserCall<'_, RxeRs>>,
        events: &Arc<CqEvents>,
    ) -> Result<(Self, u32)> {
        // Neither completion timestamps nor ignoring overruns is offered.
        if attr.flags != 0 {
            return Err(crate::ib::device::eopnotsupp());
        }
        check_cqe(attr.cqe)?;
        // uverbs checks a process's vector; a kernel consumer's is checked here.
        if attr.comp_vector >= crate::ib::device::num_possible_cpus() {
            return Err(EINVAL);
        }
        let charge = Quota::charge(cqs)?;
        let (queue, cqe) = match user {
            Some(user) => {
                let q = UserQueue::new(attr.cqe, user)?;
                let cqe = q.ring.geometry().capacity();
                user.udata.respond(&q.mminfo())?;
                (CqQueue::User(q), cqe)
            }
            None => (CqQueue::Kernel(KernelQueue::new(attr.cqe)?), attr.cqe),
        };
        let shared = Task::new(try_pin_init!(CqShared {
            inner <- new_spinlock_irq!(CqInner {
                queue,
                armed: None,
                tell_completion: false,
                tell_overflow: false,
            }),
            events: events.clone(),
        }))?;
        Ok((
            Self {
                shared: CqHandle(shared),
                _charge: charge,
            },
            cqe,
        ))
    }

    pub(crate) fn resize(
        cq: &Cq<RxeRs>,
        cqe: u32,
        user: Option<&UserCall<'_, RxeRs>>,
    ) -> Result<u32> {
        check_cqe(cqe)?;
        // ib_core offers resizing to processes only (`resize_user_cq`).
        let user = user.ok_or(EINVAL)?;
        // Allocate (which sleeps) and answer before taking the lock; if the swap then
        // fails the process gets an error and ignores the answer, and the new offer is
        // withdrawn when `new` is dropped.
        let mut new = UserQueue::new(cqe, user)?;
        let capacity = new.ring.geometry().capacity();
        user.udata.respond(&new.mminfo())?;
        let mut inner = cq.shared.0.inner.lock();
        let CqQueue::User(old) = &mut inner.queue else {
            return Err(EINVAL);
        };
        let count = old.count();
        if count > capacity || cqe < count {
            return Err(EINVAL);
        }
        new.take_from(old, count);
        // The old ring and its offer are dropped after the lock is released.
        let old = core::mem::replace(old, new);
        drop(inner);
        drop(old);
        Ok(capacity)
    }

    /// The producers' reference.
    pub(crate) fn handle(&self) -> &CqHandle {
        &self.shared
    }

    /// A kernel consumer takes completions, oldest first.
    pub(crate) fn poll(&self, out: &mut WcOut<'_>) {
        let mut inner = self.shared.0.inner.lock();
        let CqQueue::Kernel(q) = &mut inner.queue else {
            // A process polls its ring itself.
            return;
        };
        while out.has_room() {
            let Some(c) = q.pop() else { break };
            out.push(&c.to_kernel());
        }
    }

    pub(crate) fn req_notify(&self, how: Notify, report_missed: bool) -> bool {
        let mut inner = self.shared.0.inner.lock();
        // A request for any completion is not narrowed by a later one for solicited ones.
        if inner.armed != Some(Notify::NextComp) {
            inner.armed = Some(how);
        }
        report_missed && inner.count() != 0
    }
}

#[vtable]
impl CqOps<RxeRs> for RxeCq {
    fn create_cq(
        dev: &Device<RxeRs>,
        attr: &CqInit,
        user: Option<&UserCall<'_, RxeRs>>,
        events: &Arc<CqEvents>,
    ) -> Result<(Self, u32)> {
        Self::create(&dev.cqs, attr, user, events)
    }

    fn resize_cq(cq: &Cq<RxeRs>, cqe: u32, user: Option<&UserCall<'_, RxeRs>>) -> Result<u32> {
        Self::resize(cq, cqe, user)
    }

    fn poll_cq(cq: &Cq<RxeRs>, out: &mut WcOut<'_>) {
        cq.poll(out);
    }

    fn req_notify_cq(cq: &Cq<RxeRs>, how: Notify, report_missed: bool) -> bool {
        cq.req_notify(how, report_missed)
    }
}
