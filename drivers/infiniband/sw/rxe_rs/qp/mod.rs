// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: create, modify, query and destroy, posting, and the runs of the data path.
//!
//! A process's QP has a send ring and, unless it takes receives from an SRQ, a receive
//! ring, both produced into by librxe and consumed by the device, in rxe's slot formats
//! (`struct rxe_send_wqe` plus room for the SGEs or inline data; `struct rxe_recv_wqe`
//! plus its SGEs). Capacities are reported exactly as the rings hold them.
//!
//! `modify_qp` checks the whole request before it changes anything: ib_core's table of
//! the IB state machine (`ib_modify_qp_is_ok()`, required and allowed attributes per
//! transition and QP type), then each attribute's range. Entering the error state
//! flushes every outstanding work request with a `WR_FLUSH_ERR` completion; so does a
//! doorbell in the error state, for work posted after it.
//!
//! The data path runs under the QP's lock one step at a time and sends each packet once
//! the lock is released, in three places: the requester ([`RxeQp::run_requester`], steps
//! in [`req`]) when the process rings the doorbell or a kernel consumer posts; the
//! responder and the completer ([`RxeQp::receive`], [`resp`] and [`comp`]) in the
//! context a packet arrives in; and the QP's work item (the `TaskRun` of [`QpShared`],
//! see [`task`]), which goes on with what a run left at its budget
//! ([`crate::param::RUN_BUDGET`]) or at a full loopback queue, sends the READ responses
//! and atomic acknowledgements that wait ([`RxeQp::run_responder`]), runs the retry and
//! RNR timers, and resumes work that waited for the pages of an on-demand MR.
//!
//! Destroy marks the QP dead under its lock, unpublishes its number, and drops its rings
//! and references: outstanding work is never processed and never completes, and events
//! not yet delivered are dropped (see `ib::qp::QpEvents`).
//!
//! Where each part is (the verbs, listed in `RxeQp`'s `QpOps` impl at the end of this
//! file, and the runners are methods of [`RxeQp`] in whichever file holds them):
//!
//! | part                                                          | where      |
//! |---------------------------------------------------------------|------------|
//! | the QP: [`RxeQp`], [`QpShared`], [`QpInner`], [`QpTable`]     | this file  |
//! | completions and events for every phase (`complete`, `raise`)  | this file  |
//! | `create_qp`                                                   | [`create`] |
//! | `modify_qp`: checks, attributes, state entries                | [`modify`] |
//! | `query_qp`, `destroy_qp`, `attach_mcast`, `detach_mcast`      | this file  |
//! | `post_send`, `post_recv`, the doorbell                        | [`post`]   |
//! | the flush; entry into the error state from the data path      | [`flush`]  |
//! | a packet in ([`RxeQp::receive`]): requests, responses         | this file  |
//! | the requester (send queue to packets), its runner             | [`req`]    |
//! | the responder (requests, READ and atomic answers), its runner | [`resp`]   |
//! | the completer (responses to the requester, go-back-N)         | [`comp`]   |
//! | the work item, the retry and RNR timers                       | [`task`]   |
//! | waits for the pages of on-demand MRs                          | [`odp`]    |
//! | acknowledgements and requester runs owed after a batch        | [`owed`]   |

mod comp;
mod create;
mod flush;
mod modify;
mod odp;
pub(crate) mod owed;
mod post;
mod req;
mod resp;
mod task;

use crate::cq::CqHandle;
use crate::ib::{
    device::{Device, DeviceRef},
    object::Charge,
    pd::PdId,
    qp::{
        Qp, QpAttr, QpAttrs, QpCap, QpCreated, QpEvent, QpEvents, QpInit, QpOps, QpQuery, QpState,
        QpType,
    },
    sync::SpinLockIrq,
    task::Task,
    ucontext::UserCall,
    verbs::WcStatus,
    wr::WcQp,
    wr::{RecvWr, SendWr},
};
use crate::mr::Fault;
use crate::queue::WqeRing;
use crate::roce::{opcode::flag, packet::Packet};
use crate::srq::SrqHandle;
use crate::stats::Counter;
use crate::sw::skb::RouteCache;
use crate::table::{IdTable, Number, Numbered};
use crate::wc::Completion;
use crate::RxeRs;
use comp::{After, Response};
use kernel::{
    prelude::*,
    sync::{atomic::Atomic, Arc},
};
use odp::{FaultLink, OdpWait};
use owed::{owe, Owed};
use req::ReqState;
use resp::{Request, RespState};

/// The doorbell of the QP never rang.
const NO_CPU: u32 = u32::MAX;

/// The GSI QP's Q_Key.
pub(crate) const GSI_QKEY: u32 = crate::ib::verbs::QP1_QKEY;

/// The lowest QP number handed out; below are the special QPs.
const FIRST_QPN: u32 = 16;
/// The general services QP's number.
const GSI_QPN: u32 = 1;
/// One above the highest QP number handed out (as rxe: QPNs are 20 bits).
const QPN_LIMIT: u32 = 1 << 20;

/// The device's table of QP numbers.
pub(crate) type QpTable = IdTable<Task<QpShared>>;

/// A new QP table.
pub(crate) fn qp_table() -> impl PinInit<QpTable, Error> {
    IdTable::new(FIRST_QPN, QPN_LIMIT)
}

pub(crate) struct QpInner {
    pub(crate) state: QpState,
    pub(crate) attrs: QpAttrs,
    pub(crate) sq: WqeRing,
    /// `None` when receives come from an SRQ.
    pub(crate) rq: Option<WqeRing>,
    /// The PSN of the requester's next packet.
    pub(crate) req_psn: u32,
    pub(crate) req: ReqState,
    pub(crate) resp: RespState,
    /// RNR NAKs and timeouts the oldest WQE may still meet (7 RNR: no limit).
    pub(crate) rnr_left: u8,
    pub(crate) retry_left: u8,
    /// Sending waits for the RNR timer.
    pub(crate) rnr_wait: bool,
    /// An acknowledgement made progress since the timeout timer was set.
    pub(crate) progress: bool,
    /// The task is to run the requester (a kernel consumer posted, responses opened
    /// the window on another CPU, or a run used up its budget).
    kick: bool,
    /// The task is to send the responder's answers (a run used up its budget, or
    /// stopped at the full loopback queue).
    respond: bool,
    /// Set by destroy: nothing is processed any more.
    dead: bool,
    /// In the error state: the slots of the send and receive rings up to which the
    /// task is to flush (the producer indices when the device last heard of the QP: a
    /// process that keeps writing them gets no more flushed without a doorbell or a
    /// packet).
    flush_end: (u32, u32),
    /// Events to deliver from the workqueue.
    pending: KVec<QpEvent>,
    /// Pages of on-demand MRs for the task to fault in, one request per [`OdpWait`]
    /// kind; per kind whether a fault is in progress (at most one: a reset does not
    /// clear this, so destroy-free loops cannot pile faults up), whether one ended since
    /// the task last ran, and whether the last one failed.
    odp: [Option<Fault>; OdpWait::COUNT],
    odp_busy: [bool; OdpWait::COUNT],
    odp_ended: [bool; OdpWait::COUNT],
    odp_failed: [bool; OdpWait::COUNT],
    /// Counts resets: a fault asked for before the last one ends as stale, clearing
    /// only its `odp_busy`.
    odp_epoch: u32,
}

impl QpInner {
    /// The path MTU in bytes (256 until `modify_qp` sets one).
    pub(crate) fn mtu_bytes(&self) -> u32 {
        self.attrs.path_mtu.map_or(256, |m| m.bytes())
    }

    /// Whether the responder answers requests (RTR and the states after it, before
    /// an error).
    pub(crate) fn responds(&self) -> bool {
        matches!(
            self.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        )
    }
}

/// How a packet arrived, as the QP that takes it sees it.
pub(crate) struct Arrival<'a> {
    /// Its IP header.
    pub(crate) ip: &'a [u8],
    /// The VLAN it arrived on (`recv::Recv::receive` notes it), for a datagram's
    /// completion.
    pub(crate) vlan_id: Option<u16>,
}

/// What a QP's verbs and its deferred work share.
#[pin_data]
pub(crate) struct QpShared {
    qp_num: Number,
    /// How completions name the QP to a kernel consumer.
    pub(crate) wc_qp: WcQp,
    pub(crate) qp_type: QpType,
    pub(crate) pd: PdId,
    pub(crate) sq_sig_all: bool,
    /// The queues' capacities as reported at create (the rings never resize): WQEs,
    /// SGEs and inline bytes per send WQE, SGEs per receive WQE (none with an SRQ).
    pub(crate) cap: QpCap,
    #[pin]
    inner: SpinLockIrq<QpInner>,
    /// The route of the QP's last packet, for the next ones.
    #[pin]
    routes: RouteCache,
    /// The CPU the QP's doorbell last rang on ([`NO_CPU`] before the first): where
    /// the requester runs when responses let it send (see [`RxeQp::kick_requester`]).
    tx_cpu: Atomic<u32>,
    pub(crate) send_cq: CqHandle,
    pub(crate) recv_cq: CqHandle,
    /// The SRQ receives come from, kept alive while the QP is.
    pub(crate) srq: Option<SrqHandle>,
    events: Arc<QpEvents>,
    /// Linked to the QP from its publication to its destroy.
    link: Arc<FaultLink>,
    /// The device, for the QP's timer; ib_core destroys every QP before it waits for
    /// the device's references to go.
    dev: DeviceRef<RxeRs>,
}

impl QpShared {
    /// The QP's number.
    pub(crate) fn qp_num(&self) -> u32 {
        self.qp_num.get()
    }
}

impl Numbered for Task<QpShared> {
    fn number(&self) -> &Number {
        &self.qp_num
    }
}

/// The driver's part of a queue pair.
pub(crate) struct RxeQp {
    shared: Arc<Task<QpShared>>,
    /// Released when ib_core destroys the QP, not when its work last lets go of it.
    _charge: Charge,
}

impl RxeQp {
    /// Posts a completion of the QP's work to its send CQ, or its receive CQ if `recv`.
    ///
    /// A completion the CQ has no room for is lost (the CQ's consumer gets
    /// `IB_EVENT_CQ_ERR`): the QP could not report its work, which is a local work
    /// queue catastrophic error, so it enters the error state and raises
    /// `IB_EVENT_QP_FATAL`. The flush of the error state posts directly: nothing more
    /// is lost by it than the CQ cannot hold.
    pub(crate) fn complete(
        dev: &Device<RxeRs>,
        shared: &Arc<Task<QpShared>>,
        inner: &mut QpInner,
        recv: bool,
        c: &Completion,
        solicited: bool,
    ) {
        let cq = if recv {
            if c.status == WcStatus::Success {
                dev.counters.inc(Counter::RdmaRecvs);
            }
            &shared.recv_cq
        } else {
            &shared.send_cq
        };
        if !cq.post(&dev.wq, c, solicited) && inner.state != QpState::Err {
            Self::raise(dev, shared, inner, QpEvent::Fatal);
            Self::enter_err(dev, shared, inner);
        }
    }

    /// Queues an asynchronous event of the QP; its task raises it, never the chain
    /// that caused it. Room may be lacking (allocated atomically): the event is then
    /// lost, as an event beyond a hardware queue's room would be.
    pub(crate) fn raise(
        dev: &Device<RxeRs>,
        shared: &Arc<Task<QpShared>>,
        inner: &mut QpInner,
        event: QpEvent,
    ) {
        if inner.pending.push(event, GFP_ATOMIC).is_ok() {
            dev.wq.run(shared);
        }
    }

    /// A packet for the QP `qp`, arrived as `from` says; returns whether the QP took
    /// it.
    pub(crate) fn receive(
        dev: &Device<RxeRs>,
        qp: &Arc<Task<QpShared>>,
        pkt: &Packet<'_>,
        from: &Arrival<'_>,
    ) -> bool {
        let ndev = &dev.ndev;
        let mut inner = qp.inner.lock();
        if inner.dead {
            return false;
        }
        // A connected QP takes packets from its peer only, to the address it is
        // connected from, on that address's VLAN.
        if matches!(qp.qp_type, QpType::Rc | QpType::Uc) {
            let av = &inner.attrs.av;
            let peer = from.vlan_id == av.sgid_vlan
                && crate::roce::frame::ip_gids(from.ip)
                    .is_some_and(|(src, dst)| src == av.dgid && dst == av.sgid);
            if !peer {
                return false;
            }
        }
        if pkt.info.flags & flag::REQUEST != 0 {
            // Answers still to send from before this packet come first: whoever sends
            // them (a run in progress, or the work item) sends what this packet adds.
            let waiting = inner.resp.has_responses();
            let (taken, mut reply) = match resp::request(dev, ndev, qp, &mut inner, pkt, from) {
                Request::Taken(reply) => (true, reply),
                Request::Dropped(reply) => (false, reply),
            };
            let responses = !waiting && inner.resp.has_responses();
            let owed = if waiting {
                inner.resp.defer(reply.take());
                None
            } else if reply.is_some() || responses {
                // Any other response goes after the acknowledgement owed so far.
                resp::owed(ndev, qp, &mut inner)
            } else {
                None
            };
            let list = inner.resp.ack_to_list();
            drop(inner);
            for out in [owed, reply].into_iter().flatten() {
                crate::xmit::send(dev, ndev, &qp.routes, out);
            }
            if responses {
                Self::run_responder(dev, ndev, qp);
            }
            if list && !owe(dev, qp.qp_num(), Owed::Ack) {
                Self::send_owed_ack(dev, qp);
            }
            return taken;
        }
        let (taken, after) = match comp::response(dev, qp, &mut inner, pkt) {
            Response::Taken(after) => (true, after),
            Response::Dropped(after) => (false, after),
        };
        // Only a requester with WQEs left to send has anything to do (an ACK for the
        // last one sent only completes).
        let send = matches!(after, After::Send) && req::has_unsent(&inner);
        drop(inner);
        // What the responses of the batch let the requester send goes after the
        // batch, in one run, on the CPU of the QP's process.
        if send {
            if !owe(dev, qp.qp_num(), Owed::Send) {
                Self::kick_requester(dev, qp);
            }
        }
        taken
    }

    pub(crate) fn query(&self) -> QpQuery {
        let inner = self.shared.inner.lock();
        QpQuery {
            state: inner.state,
            cap: self.shared.cap,
            sq_draining: false,
            sq_sig_all: self.shared.sq_sig_all,
            attrs: inner.attrs.clone(),
        }
    }

    /// Stops the QP for good: after this nothing of it runs or completes.
    pub(crate) fn destroy(qp: &Qp<RxeRs>) {
        let dev = qp.device();
        let ack = {
            let mut inner = qp.shared.inner.lock();
            let ack = Self::take_owed_ack(&dev.ndev, &qp.shared, &mut inner);
            inner.dead = true;
            inner.pending.clear();
            ack
        };
        Self::send_final_ack(dev, &qp.shared, ack);
        // No new packet can find it, and no fault that ends from now on.
        dev.qp_table.remove(qp.qp_num());
        let link = qp.shared.link.qp.lock().take();
        drop(link);
        // A slot handed over in the QP's turn goes on to the next in line (none comes
        // from now on).
        let granted = qp.shared.link.granted.lock().take();
        drop(granted);
        // The data path uses a QP only in RCU read-side sections (packets in softirq,
        // the device's own packets, the requester and responder runners, the owed-work
        // sender), and finds it there through its number (which marks it used), except
        // in the verbs called on the QP itself, which its consumer does not call during
        // its destroy (ib_uverbs keeps them apart for processes). Once those sections
        // have ended, none is still at work on this one and every packet it built has
        // been handed on; a QP no packet found since a grace period ended waits for none.
        crate::ib::sync::synchronize_rcu_since(qp.shared.qp_num.last_use());
        // Only those runners set the QP's timer, and only a live QP's; nothing queues a
        // dead QP's work item but a fault that ended before its link was cut above (that
        // run finds the QP dead). Once both are off the workqueue, nothing of the QP
        // runs, and its last references are ours: its rings go here, in process context.
        Task::cancel(&qp.shared);
    }
}

/// The verbs of a QP, each carried out in the file named beside it.
#[vtable]
impl QpOps<RxeRs> for RxeQp {
    // create.rs.
    fn create_qp(
        dev: &Device<RxeRs>,
        init: &QpInit<'_, RxeRs>,
        user: Option<&UserCall<'_, RxeRs>>,
        events: &Arc<QpEvents>,
    ) -> Result<QpCreated<Self>> {
        Self::create(dev, init, user, events)
    }

    // modify.rs.
    fn modify_qp(qp: &Qp<RxeRs>, attr: &QpAttr, _user: Option<&UserCall<'_, RxeRs>>) -> Result {
        Self::modify(qp, attr)
    }

    // This file.
    fn query_qp(qp: &Qp<RxeRs>) -> QpQuery {
        qp.query()
    }

    // This file.
    fn destroy_qp(qp: &Qp<RxeRs>) {
        Self::destroy(qp)
    }

    // post.rs: the requester runs at once or from the work item.
    fn doorbell(qp: &Qp<RxeRs>) -> Result {
        Self::ring_doorbell(qp)
    }

    // post.rs.
    fn post_send(qp: &Qp<RxeRs>, wr: &SendWr<'_>) -> Result {
        Self::post_send_wr(qp, wr)
    }

    // post.rs.
    fn post_recv(qp: &Qp<RxeRs>, wr: &RecvWr<'_>) -> Result {
        Self::post_recv_wr(qp, wr)
    }

    // This file, through the device's multicast table.
    fn attach_mcast(qp: &Qp<RxeRs>, gid: &[u8; 16]) -> Result {
        let dev = qp.device();
        dev.mcast.attach(&dev.ndev, gid, qp.qp_num())
    }

    // As attach_mcast.
    fn detach_mcast(qp: &Qp<RxeRs>, gid: &[u8; 16]) -> Result {
        let dev = qp.device();
        dev.mcast.detach(&dev.ndev, gid, qp.qp_num())
    }
}
