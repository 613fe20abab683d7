// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues.
//!
//! An SRQ is one receive ring (rxe's `struct rxe_recv_wqe` slots) that librxe, or for a
//! kernel consumer `post_srq_recv`, produces into and that any QP attached to it
//! consumes from. Its limit, once armed, raises `IB_EVENT_SRQ_LIMIT_REACHED` (from the
//! device's workqueue) when a receive taken leaves fewer posted than the limit, and is
//! disarmed by it.
//!
//! Resizing follows rxe's user ABI, quirk included: the new ring's `struct mminfo` is
//! written to a user address that the command carries (`struct rxe_modify_srq_cmd`),
//! not into the response. The posted receives move to the start of the new ring; librxe
//! holds its own lock across the resize, so it posts nothing meanwhile.

use crate::ib::object::{Charge, Quota};
use crate::ib::{
    device::Device,
    pd::PdId,
    srq::{Srq, SrqAttr, SrqEvents, SrqModify, SrqOps},
    sync::{new_spinlock_irq, SpinLockIrq},
    task::{Task, TaskRun, Workqueue},
    ucontext::UserCall,
    wr::RecvWr,
};
use crate::param;
use crate::queue::WqeRing;
use crate::sw::rxe_abi::{create_srq_resp, modify_srq_cmd, RECV_WQE_HDR, SGE_LEN};
use crate::wqe::{put_at, u64_at, Malformed, RecvWqe, MAX_RECV_WQE};
use crate::RxeRs;
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
    uaccess::{UserPtr, UserSlice},
};

/// SRQ numbers (reported to librxe, used by nothing else for a basic SRQ) start here,
/// as rxe's do, and wrap below 2^20.
const FIRST_SRQN: u32 = 0x2_0001;
const SRQN_LIMIT: u32 = 1 << 20;

/// The driver's part of a shared receive queue.
pub(crate) struct RxeSrq {
    shared: SrqHandle,
    max_sge: u32,
    _charge: Charge,
}

/// A QP's reference to the SRQ it takes receives from.
#[derive(Clone)]
pub(crate) struct SrqHandle(Arc<Task<SrqShared>>);

#[pin_data]
pub(crate) struct SrqShared {
    events: Arc<SrqEvents>,
    /// The SRQ's protection domain: the keys of its receive WQEs are checked against it
    /// (not against the PD of the QP that takes them).
    pd: PdId,
    /// SGEs per receive WQE.
    max_sge: u32,
    #[pin]
    inner: SpinLockIrq<SrqInner>,
}

struct SrqInner {
    ring: WqeRing,
    /// The armed limit (0: not armed).
    limit: u32,
    /// The limit was reached: the task is to tell the consumer.
    tell_limit: bool,
}

impl TaskRun for SrqShared {
    fn run(task: &Arc<Task<Self>>) {
        let tell = core::mem::replace(&mut task.inner.lock().tell_limit, false);
        if tell {
            task.events.limit_reached();
        }
    }
}

impl Drop for RxeSrq {
    fn drop(&mut self) {
        // The SRQ is being destroyed, so no QP takes from it any more (ib_core refuses
        // to destroy an SRQ in use): once its task is off the workqueue, nothing of it
        // runs.
        Task::cancel(&self.shared.0);
    }
}

/// The device's source of SRQ numbers.
pub(crate) struct SrqNumbers(Atomic<u32>);

impl SrqNumbers {
    pub(crate) fn new() -> Self {
        Self(Atomic::new(0))
    }

    fn next(&self) -> u32 {
        FIRST_SRQN + self.0.fetch_add(1, Relaxed) % (SRQN_LIMIT - FIRST_SRQN)
    }
}

fn slot_len(max_sge: u32) -> usize {
    RECV_WQE_HDR + max_sge as usize * SGE_LEN
}

fn check_max_wr(max_wr: u32) -> Result {
    if max_wr == 0 || max_wr > param::MAX_SRQ_WR {
        return Err(EINVAL);
    }
    Ok(())
}

impl RxeSrq {
    pub(crate) fn create(
        srqs: &Arc<Quota>,
        numbers: &SrqNumbers,
        pd: PdId,
        attr: &SrqAttr,
        user: Option<&UserCall<'_, RxeRs>>,
        events: &Arc<SrqEvents>,
    ) -> Result<(Self, SrqAttr)> {
        check_max_wr(attr.max_wr)?;
        if attr.max_sge > param::MAX_SRQ_SGE {
            return Err(EINVAL);
        }
        let max_sge = attr.max_sge.max(1);
        let charge = Quota::charge(srqs)?;
        let ring = WqeRing::new(attr.max_wr, slot_len(max_sge), user)?;
        let srq_num = numbers.next();
        if let Some(user) = user {
            // `struct rxe_create_srq_resp`: the ring, the SRQ number, a reserved word.
            let mut resp = [0u8; create_srq_resp::LEN];
            put_at(&mut resp, create_srq_resp::MI, &ring.mminfo());
            put_at(&mut resp, create_srq_resp::SRQ_NUM, &srq_num.to_ne_bytes());
            user.udata.respond(&resp)?;
        }
        let out = SrqAttr {
            max_wr: ring.capacity(),
            max_sge,
            srq_limit: attr.srq_limit,
        };
        let shared = Task::new(try_pin_init!(SrqShared {
            events: events.clone(),
            pd,
            max_sge,
            inner <- new_spinlock_irq!(SrqInner {
                ring,
                limit: attr.srq_limit,
                tell_limit: false,
            }),
        }))?;
        Ok((
            Self {
                shared: SrqHandle(shared),
                max_sge,
                _charge: charge,
            },
            out,
        ))
    }

    /// The attached QPs' reference.
    pub(crate) fn handle(&self) -> &SrqHandle {
        &self.shared
    }

    pub(crate) fn modify(
        srq: &Srq<RxeRs>,
        m: &SrqModify,
        user: Option<&UserCall<'_, RxeRs>>,
    ) -> Result {
        let (capacity, limit) = {
            let inner = srq.shared.0.inner.lock();
            (inner.ring.capacity(), inner.limit)
        };
        if let Some(l) = m.srq_limit {
            // Checked against the size the SRQ has after this modify.
            let size = m.max_wr.unwrap_or(capacity);
            if l > param::MAX_SRQ_WR || l > size {
                return Err(EINVAL);
            }
        }
        if let Some(max_wr) = m.max_wr {
            check_max_wr(max_wr)?;
            if limit != 0 && max_wr < limit {
                return Err(EINVAL);
            }
            let mut new = WqeRing::new(max_wr, slot_len(srq.max_sge), user)?;
            if let Some(user) = user {
                // `struct rxe_modify_srq_cmd`: where to write the new ring's
                // `struct mminfo`.
                let mut cmd = [0u8; modify_srq_cmd::LEN];
                user.udata.copy_in(&mut cmd, modify_srq_cmd::LEN)?;
                let addr = u64_at(&cmd, modify_srq_cmd::MMAP_INFO_ADDR);
                let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
                let info = new.mminfo();
                UserSlice::new(UserPtr::from_addr(addr), info.len())
                    .writer()
                    .write_slice(&info)?;
            }
            let mut inner = srq.shared.0.inner.lock();
            let count = inner.ring.count();
            // A process's SRQ stays a process's, a kernel consumer's a kernel one's.
            if count > new.capacity() || inner.ring.is_user() != new.is_user() {
                return Err(EINVAL);
            }
            new.take_from(&inner.ring, count);
            let old = core::mem::replace(&mut inner.ring, new);
            drop(inner);
            drop(old);
        }
        if let Some(l) = m.srq_limit {
            srq.shared.0.inner.lock().limit = l;
        }
        Ok(())
    }

    /// A kernel consumer's receive work request (refused for a process's SRQ, whose
    /// requests go through its ring).
    pub(crate) fn post_recv(&self, wr: &RecvWr<'_>) -> Result {
        let mut inner = self.shared.0.inner.lock();
        if inner.ring.is_user() {
            return Err(EINVAL);
        }
        inner.ring.post_recv(wr, self.max_sge)
    }

    pub(crate) fn query(&self) -> SrqAttr {
        let inner = self.shared.0.inner.lock();
        SrqAttr {
            max_wr: inner.ring.capacity(),
            max_sge: self.max_sge,
            srq_limit: inner.limit,
        }
    }
}

impl SrqHandle {
    /// The SRQ's protection domain.
    pub(crate) fn pd(&self) -> PdId {
        self.0.pd
    }

    /// Takes the oldest posted receive for an arriving message; when that leaves fewer
    /// posted than the armed limit, the limit is disarmed and the consumer told.
    pub(crate) fn take(&self, wq: &Workqueue) -> Option<Result<RecvWqe, Malformed>> {
        let mut inner = self.0.inner.lock();
        let bytes = inner.ring.take::<MAX_RECV_WQE>()?;
        if inner.limit != 0 && inner.ring.count() < inner.limit {
            inner.limit = 0;
            inner.tell_limit = true;
            drop(inner);
            wq.run(&self.0);
        }
        Some(RecvWqe::parse(bytes, self.0.max_sge))
    }
}

#[vtable]
impl SrqOps<RxeRs> for RxeSrq {
    fn create_srq(
        dev: &Device<RxeRs>,
        pd: PdId,
        attr: &SrqAttr,
        user: Option<&UserCall<'_, RxeRs>>,
        events: &Arc<SrqEvents>,
    ) -> Result<(Self, SrqAttr)> {
        Self::create(&dev.srqs, &dev.srq_numbers, pd, attr, user, events)
    }

    fn modify_srq(srq: &Srq<RxeRs>, m: &SrqModify, user: Option<&UserCall<'_, RxeRs>>) -> Result {
        Self::modify(srq, m, user)
    }

    fn query_srq(srq: &Srq<RxeRs>) -> SrqAttr {
        srq.query()
    }

    fn post_srq_recv(srq: &Srq<RxeRs>, wr: &RecvWr<'_>) -> Result {
        srq.post_recv(wr)
    }
}
