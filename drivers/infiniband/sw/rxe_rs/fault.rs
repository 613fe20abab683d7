// SPDX-License-Identifier: GPL-2.0

//! Faults of on-demand MRs in progress: at most [`FAULTS_PER_USER`] of one user's at a
//! time, on a device.
//!
//! A fault runs in a work item that nothing waits for, and it may sleep for good (see
//! `ib::odp`): a process whose MR maps a file that nobody serves keeps one asleep for
//! every fault it starts there. Unbounded, a process could leave one asleep per QP it
//! creates and destroys, each a kernel thread, until the module's fault workqueue had
//! no room left for anybody's faults. So each user (`sw::odp::current_owner` when the
//! MR was registered) has [`FaultSlots`] on the device: a fault holds a [`FaultSlot`]
//! from its start to its end. A QP whose fault finds none free waits in line; a slot
//! that is freed goes to the first QP in line (which runs again and uses it, or, if it
//! needs it no more, lets it go to the next), so waking costs one run per slot, and
//! the line is served in order. A user's faults that never end stall only that user's
//! own QPs.

use crate::sw::odp::current_owner;
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, Mutex},
};

/// How many faults of one user's MRs may be in progress at once on a device.
pub(crate) const FAULTS_PER_USER: usize = 16;

/// What waits in line for a slot: a QP whose fault found none.
pub(crate) trait FaultWaiter: Send + Sync {
    /// Hands `slot` over: the waiter is to run again and use it (or drop it, which
    /// hands it on). Gives it back if the waiter is gone (its QP is destroyed).
    /// Process context, no lock held.
    fn grant(&self, slot: FaultSlot) -> Result<(), FaultSlot>;
    /// Whether the waiter is gone.
    fn gone(&self) -> bool;
    /// Notes that the waiter is in line `line` (a [`FaultSlots`]' address); `false` if
    /// it is there already, so that it is there once.
    fn join(&self, line: usize) -> bool;
    /// Notes that the waiter left line `line`.
    fn leave(&self, line: usize);
}

/// The slots of one user on a device, and the line of waiters. Used from process
/// context only.
#[pin_data]
pub(crate) struct FaultSlots {
    #[pin]
    inner: Mutex<Slots>,
}

struct Slots {
    /// How many slots are held; at most [`FAULTS_PER_USER`], and below it only while
    /// nobody waits.
    held: usize,
    /// The line: waiters from `head` on, in order.
    line: KVec<Arc<dyn FaultWaiter>>,
    head: usize,
    /// The line's length at which gone waiters are taken out (they are skipped when
    /// their turn comes, but the line must not grow with QPs destroyed while it stands
    /// still): twice its length after the last time, so the work is linear overall.
    prune_at: usize,
}

/// A slot of [`FaultSlots`], held by a fault in progress (or handed to a waiter);
/// dropping it frees it, or hands it to the first waiter in line.
pub(crate) struct FaultSlot(Option<Arc<FaultSlots>>);

impl FaultSlot {
    /// Whether this is a slot of `slots`.
    pub(crate) fn of(&self, slots: &Arc<FaultSlots>) -> bool {
        self.0.as_ref().is_some_and(|s| Arc::ptr_eq(s, slots))
    }
}

impl Drop for FaultSlot {
    fn drop(&mut self) {
        if let Some(slots) = self.0.take() {
            FaultSlots::release(slots);
        }
    }
}

impl FaultSlots {
    /// A slot for a fault; `None` if all are held, and then `waiter` is in line (once)
    /// and gets one handed over in its turn ([`FaultWaiter::grant`]).
    pub(crate) fn take(
        this: &Arc<Self>,
        waiter: &Arc<dyn FaultWaiter>,
    ) -> Result<Option<FaultSlot>> {
        let mut s = this.inner.lock();
        if s.held < FAULTS_PER_USER {
            s.held += 1;
            return Ok(Some(FaultSlot(Some(this.clone()))));
        }
        let line = Arc::as_ptr(this) as usize;
        if !waiter.join(line) {
            return Ok(None);
        }
        if s.line.len() >= s.prune_at {
            let head = s.head;
            let mut i = 0;
            s.line.retain(|w| {
                i += 1;
                i > head && !w.gone()
            });
            s.head = 0;
            s.prune_at = (2 * s.line.len()).max(64);
        }
        if let Err(e) = s.line.push(waiter.clone(), GFP_KERNEL_ACCOUNT) {
            waiter.leave(line);
            return Err(e.into());
        }
        Ok(None)
    }

    /// A slot is let go: it goes to the first waiter in line that is not gone, or is
    /// free if there is none.
    fn release(this: Arc<Self>) {
        loop {
            let next = {
                let mut s = this.inner.lock();
                let head = s.head;
                match s.line.get(head).cloned() {
                    Some(w) => {
                        s.head = head + 1;
                        w
                    }
                    None => {
                        s.line.clear();
                        s.head = 0;
                        // Counted, since this slot was held.
                        kernel::warn_on!(s.held == 0);
                        s.held = s.held.saturating_sub(1);
                        return;
                    }
                }
            };
            next.leave(Arc::as_ptr(&this) as usize);
            // Not under the lock: the waiter's lock is taken, and its task queued.
            match next.grant(FaultSlot(Some(this.clone()))) {
                Ok(()) => return,
                // Gone: the slot goes on to the next one, without being dropped here.
                Err(mut back) => drop(back.0.take()),
            }
        }
    }
}

/// The [`FaultSlots`] of each user that registered an on-demand MR on the device. An
/// entry stays until the device goes (a few dozen bytes per user).
#[pin_data]
pub(crate) struct FaultUsers {
    #[pin]
    users: Mutex<RBTree<u64, Arc<FaultSlots>>>,
}

impl FaultUsers {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            users <- new_mutex!(RBTree::new()),
        })
    }

    /// The slots of the user the calling process acts for. Process context.
    pub(crate) fn current(&self) -> Result<Arc<FaultSlots>> {
        let user = current_owner();
        if let Some(s) = self.users.lock().get(&user) {
            return Ok(s.clone());
        }
        // Charged to the process, allocated before the lock.
        let slots = Arc::pin_init(
            pin_init!(FaultSlots {
                inner <- new_mutex!(Slots {
                    held: 0,
                    line: KVec::new(),
                    head: 0,
                    prune_at: 64,
                }),
            }),
            GFP_KERNEL_ACCOUNT,
        )?;
        let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
        let mut users = self.users.lock();
        // Another thread of the user may have been first.
        if let Some(s) = users.get(&user) {
            return Ok(s.clone());
        }
        users.insert(node.into_node(user, slots.clone()));
        Ok(slots)
    }
}
