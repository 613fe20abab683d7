// SPDX-License-Identifier: GPL-2.0

//! On-demand paging as a QP meets it: who waits for the pages of an on-demand MR
//! ([`OdpWait`]), asking the QP's task to fault them in ([`RxeQp::fault`]), and the way
//! back from a fault that ended to the QP ([`FaultLink`]).

use super::{QpInner, QpShared, RxeQp};
use crate::fault::{FaultSlot, FaultWaiter};
use crate::ib::{device::Device, task::Task};
use crate::mr::Fault;
use crate::RxeRs;
use kernel::{
    prelude::*,
    sync::{Arc, SpinLock},
};

impl QpInner {
    /// A fault for `wait`, asked for in `epoch`, ended with `r` (or could not start).
    /// Returns whether the waiter is to run again: not if the QP was reset since.
    pub(super) fn fault_ended(&mut self, wait: OdpWait, epoch: u32, r: Result) -> bool {
        let i = wait as usize;
        self.odp_busy[i] = false;
        if epoch != self.odp_epoch {
            return false;
        }
        self.odp_failed[i] |= r.is_err();
        true
    }

    /// Forgets the faults of the QP's life before RESET: a fault of it that ends later
    /// is ignored (its epoch is past).
    pub(super) fn reset_odp(&mut self) {
        self.odp = [None; OdpWait::COUNT];
        self.odp_ended = [false; OdpWait::COUNT];
        self.odp_failed = [false; OdpWait::COUNT];
        self.odp_epoch = self.odp_epoch.wrapping_add(1);
    }
}

/// Who waits for pages of an on-demand MR to be faulted in, and is run again once they
/// are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum OdpWait {
    /// The requester, for the payload of its next packet: it resumes with that packet.
    Requester,
    /// The completer, for the data of a READ response or an atomic's original value,
    /// which it dropped: everything not yet acknowledged is sent again.
    Completer,
    /// The responder, for a READ response it is to send: it resumes with that packet.
    ReadResponse,
    /// The responder, for a request it answered with an RNR NAK (RC) or dropped (UC,
    /// UD): the peer sends it again.
    Request,
}

impl OdpWait {
    pub(super) const COUNT: usize = 4;
    pub(super) const ALL: [Self; Self::COUNT] = [
        Self::Requester,
        Self::Completer,
        Self::ReadResponse,
        Self::Request,
    ];
}

/// The way back to a QP from its faults in progress ([`crate::mr::resolve`]), and from
/// the line it waits in for a slot. Destroy cuts it, so that a fault that ends later (one
/// may sleep for good) finds no QP.
#[pin_data]
pub(crate) struct FaultLink {
    #[pin]
    pub(super) qp: SpinLock<Option<Arc<Task<QpShared>>>>,
    /// A slot handed over in the QP's turn: its task's next run uses it or lets it go,
    /// as destroy does. Never dropped under a lock (that hands it on).
    #[pin]
    pub(super) granted: SpinLock<Option<FaultSlot>>,
    /// The lines it is in ([`FaultWaiter::join`]; 0 for none), so that it is in each
    /// once. Its faults name the MRs of one user, or a few; should it wait in more
    /// lines at once than there are entries, it may be in one of them twice, which
    /// costs one more run.
    #[pin]
    pub(super) lines: SpinLock<[usize; OdpWait::COUNT]>,
}

impl FaultLink {
    /// A fault for `wait`, asked for in `epoch`, ended with `r`: the QP's task goes on
    /// from there.
    pub(super) fn ended(&self, wait: OdpWait, epoch: u32, r: Result) {
        let qp = self.qp.lock();
        let Some(task) = qp.as_ref() else {
            return;
        };
        {
            let mut inner = task.inner.lock();
            if inner.fault_ended(wait, epoch, r) {
                inner.odp_ended[wait as usize] = true;
            }
        }
        // A linked QP is not destroyed yet, so neither is its device. The task also
        // takes a request that waited while this fault was in progress.
        task.dev.wq.run(task);
    }
}

impl FaultWaiter for FaultLink {
    fn grant(&self, slot: FaultSlot) -> Result<(), FaultSlot> {
        let qp = self.qp.lock();
        let Some(task) = qp.as_ref() else {
            return Err(slot);
        };
        let mut granted = self.granted.lock();
        if granted.is_some() {
            // One handed over before is still unused: this one goes to the next.
            return Err(slot);
        }
        *granted = Some(slot);
        task.dev.wq.run(task);
        Ok(())
    }

    fn gone(&self) -> bool {
        self.qp.lock().is_none()
    }

    fn join(&self, line: usize) -> bool {
        let mut lines = self.lines.lock();
        if lines.contains(&line) {
            return false;
        }
        if let Some(free) = lines.iter_mut().find(|l| **l == 0) {
            *free = line;
        }
        true
    }

    fn leave(&self, line: usize) {
        if let Some(l) = self.lines.lock().iter_mut().find(|l| **l == line) {
            *l = 0;
        }
    }
}

impl RxeQp {
    /// An access for `wait` found pages of an on-demand MR missing: the task is to fault
    /// them in and run `wait` again. Returns `false` instead if the last fault for
    /// `wait` failed (the process unmapped the memory): then the access fails.
    pub(crate) fn fault(
        dev: &Device<RxeRs>,
        shared: &Arc<Task<QpShared>>,
        inner: &mut QpInner,
        fault: Fault,
        wait: OdpWait,
    ) -> bool {
        let i = wait as usize;
        if core::mem::take(&mut inner.odp_failed[i]) {
            return false;
        }
        inner.odp[i] = Some(fault);
        dev.wq.run(shared);
        true
    }
}
