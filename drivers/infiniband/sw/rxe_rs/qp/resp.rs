// SPDX-License-Identifier: GPL-2.0

//! The responder: request packets that arrive for a QP.
//!
//! It runs under the QP's lock, in the context the packet arrived in (softirq, or the
//! sender's for the device's own packets). A packet is taken only if the QP is in a
//! state that receives (RTR, RTS, SQD or SQE) and the opcode is its transport's;
//! anything else is dropped and counted, and leaves the QP as it was.
//!
//! Datagrams (UD, and the GSI QP's MADs) are done: the Q_Key must be the QP's, the
//! receive WQE comes from the QP's ring or its SRQ, and the buffer gets the 40-byte GRH
//! (for IPv4, 20 zero bytes then the IPv4 header, as rxe writes it) followed by the
//! payload. A datagram with no receive WQE posted is dropped, as the transport says.
//!
//! Connected QPs take SENDs (with immediate data or an rkey to invalidate) and RDMA
//! WRITEs (with immediate data) in PSN order; RC QPs also RDMA READs, atomics, ATOMIC
//! WRITEs and FLUSHes, each kept as a responder resource whose answer (READ responses,
//! an atomic acknowledgement with the original value) waits in PSN order for
//! [`RxeQp::run_responder`] and is sent again when the request comes again. On RC a
//! packet ahead of the expected PSN is answered once with a sequence NAK (the requester
//! goes back), a duplicate is acknowledged or answered again and otherwise ignored, a
//! SEND with no receive WQE posted gets an RNR NAK, a bad R_Key or range a remote access
//! NAK and an opcode out of sequence or one the QP's access flags do not allow an
//! invalid request NAK (both move the QP to the error state); every packet that asks
//! for it is acknowledged with the MSN. On UC a message that loses a packet, or finds no
//! receive WQE, is dropped whole.

use super::odp::OdpWait;
use super::{Arrival, QpInner, QpShared, RxeQp, GSI_QKEY};
use crate::ib::netdev::NetDevice;
use crate::ib::task::{Task, Workqueue};
use crate::ib::verbs::{AccessFlags, FlushLevel, FlushPlacement, WcFlag, WcOpcode, WcStatus};
use crate::ib::{
    device::Device,
    qp::{QpEvent, QpState, QpType},
};
use crate::loopback::LOOP_BACKLOG;
use crate::mr::{self, need, AccessError, Fault};
use crate::param::{self, PORT};
use crate::roce::{
    frame::Ext,
    headers::{syndrome, Aeth, Bth},
    opcode::{flag, Transport},
    packet::Packet,
    psn::{self, PSN_MASK},
};
use crate::stats::Counter;
use crate::wc::Completion;
use crate::wqe::{for_each_piece, Malformed, RecvWqe, MAX_RECV_WQE};
use crate::xmit::{self, BuildError, Outgoing};
use crate::RxeRs;
use kernel::{prelude::*, sync::Arc};

/// The syndrome of a plain ACK: the credit field says "no credits counted" (as rxe).
const ACK_CREDITS: u8 = syndrome::ACK | 0x1f;

/// Opcodes of the responses without payload: ACK, atomic ACK, and the empty READ
/// response that answers an ATOMIC WRITE or a FLUSH.
const ACK: u8 = 0x11;
const ATOMIC_ACK: u8 = 0x12;
const READ_RESPONSE_ONLY: u8 = 0x10;

/// The message a connected QP is in the middle of receiving.
// The receive WQE is kept by value: the state lives inside the QP and a WQE is moved
// only as a message starts and ends.
#[allow(clippy::large_enum_variant)]
enum Msg {
    /// A SEND into a receive WQE; bytes received so far.
    Send(RecvWqe, u32),
    /// An RDMA WRITE: its rkey (`None` for length 0), where the next byte goes, what
    /// is left of the length the RETH announced, and that length. The key is looked
    /// up again for every packet: the responder keeps no reference to an MR outside
    /// the RCU read-side section a packet is handled in (see `mr::local`).
    Write(Option<u32>, u64, u32, u32),
    /// A UC message being dropped to its end.
    Discard,
}

/// What an RDMA READ or atomic request was answered with, kept to answer it again if
/// the request comes again (its response was lost).
#[derive(Clone, Copy)]
pub(crate) enum Answer {
    /// READ responses from `va`, `len` bytes, through the rkey (none for length 0),
    /// looked up again for every response.
    Read(Option<u32>, u64, u32),
    /// The original value an atomic found.
    Atomic(u64),
    /// An ATOMIC WRITE or a FLUSH, done: answered with an empty READ response.
    Done,
}

/// A responder resource: one READ or atomic request and its PSNs.
pub(crate) struct Resource {
    first_psn: u32,
    last_psn: u32,
    answer: Answer,
    /// The PSN of the next response still to be sent of the answer (the first, or a
    /// later one when the requester asks again for what it lost); `None` once sent.
    todo: Option<u32>,
}

/// The responder's state of a connected QP.
pub(crate) struct RespState {
    /// The PSN expected next.
    pub(crate) psn: u32,
    /// Messages completed (24 bits), reported in acknowledgements.
    pub(crate) msn: u32,
    msg: Option<Msg>,
    /// A receive WQE taken for a message whose first packet could not be placed yet
    /// (pages of an on-demand MR were missing): the next message takes it first.
    pub(crate) held: Option<RecvWqe>,
    /// A sequence NAK was sent for the expected PSN and not answered yet.
    nak_sent: bool,
    /// The acknowledgement owed for the packets taken (its PSN and MSN), not sent yet:
    /// see [`owed`].
    ack_owed: Option<(u32, u32)>,
    /// The QP's number is on the device's list of QPs owing an acknowledgement.
    pub(crate) ack_listed: bool,
    /// The QP took a packet since it left RESET (communication is established).
    established: bool,
    /// The last READ and atomic requests, oldest replaced first.
    res: KVec<Resource>,
    res_next: usize,
    /// The resource whose answer is being sent: of those with something to send, the
    /// one with the lowest PSN. Answers leave in PSN order, one resource after the
    /// other, however many runs a long READ takes (see [`RespState::answer`]).
    cur: Option<usize>,
    /// An acknowledgement or NAK for a later PSN, made while answers were still to be
    /// sent: it follows them (a newer one replaces it).
    later: Reply,
    /// Someone is sending responses; `again` asks it to look once more.
    pub(crate) busy: bool,
    pub(crate) again: bool,
}

impl RespState {
    /// The state of a QP that keeps up to `resources` READ and atomic requests.
    pub(crate) fn new(resources: usize) -> Result<Self> {
        Ok(Self {
            psn: 0,
            msn: 0,
            msg: None,
            held: None,
            nak_sent: false,
            ack_owed: None,
            ack_listed: false,
            established: false,
            res: KVec::with_capacity(resources, GFP_KERNEL_ACCOUNT)?,
            res_next: 0,
            cur: None,
            later: None,
            busy: false,
            again: false,
        })
    }

    /// Starts over at `psn` (a move to RTR, or RESET).
    pub(crate) fn reset(&mut self, psn: u32) {
        self.psn = psn;
        self.msn = 0;
        self.msg = None;
        self.held = None;
        self.nak_sent = false;
        self.ack_owed = None;
        self.established = false;
        self.res.clear();
        self.res_next = 0;
        self.stop();
    }

    /// Nothing more is answered (the QP left the states that respond).
    pub(crate) fn stop(&mut self) {
        for r in self.res.iter_mut() {
            r.todo = None;
        }
        self.cur = None;
        self.later = None;
    }

    /// Takes the receive WQEs taken from the ring and not completed yet: the one a
    /// message was being placed into, and one held for a message that could not start
    /// yet. Both come before those still in the ring.
    pub(crate) fn take_unfinished(&mut self) -> [Option<RecvWqe>; 2] {
        let in_progress = match self.msg.take() {
            Some(Msg::Send(wqe, _)) => Some(wqe),
            _ => None,
        };
        [in_progress, self.held.take()]
    }

    /// Keeps a new resource (replacing the oldest when `limit` are kept); returns its
    /// index.
    ///
    /// The slots stay in the order the resources were kept, from the oldest (see
    /// [`RespState::oldest`]) around to the newest; as requests are taken in sequence,
    /// that is PSN order, which lets [`RespState::next_answer`] walk forward from the
    /// answer just sent instead of looking at every slot.
    fn keep(&mut self, r: Resource, limit: usize) -> usize {
        let limit = limit.min(self.res.capacity()).max(1);
        let len = self.res.len();
        if len < limit {
            if self.res_next != 0 {
                // The limit grew (SQD to SQD) after slots were replaced: the oldest goes
                // to slot 0 so that the new slot at the end is the newest.
                let k = self.res_next.min(len);
                self.res.rotate_left(k);
                self.cur = self.cur.map(|c| if c >= k { c - k } else { c + (len - k) });
                self.res_next = 0;
            }
            if self.res.push_within_capacity(r).is_ok() {
                return len;
            }
            return 0;
        }
        let i = self.oldest();
        let Some(slot) = self.res.get_mut(i) else {
            // No slot at all (a QP with no room for resources).
            return 0;
        };
        *slot = r;
        self.res_next = i + 1;
        if self.cur == Some(i) {
            // The answer it replaced is not sent on (only a requester beyond its limit
            // of outstanding requests gets here); the oldest answer still to send is
            // next.
            self.cur = self.first_todo(0);
        }
        i
    }

    /// The slot of the oldest resource: the one after the slot replaced last, or slot
    /// 0 (before any was replaced, and after the last slot). `res_next` is at most the
    /// length. (No `%`: a division the compiler cannot prove nonzero calls a panic that
    /// objtool does not know as one.)
    fn oldest(&self) -> usize {
        if self.res_next < self.res.len() {
            self.res_next
        } else {
            0
        }
    }

    /// The slot of the `age`th oldest resource (`age` below the length).
    fn slot_of_age(&self, age: usize) -> usize {
        let len = self.res.len();
        // `oldest < len` and `age < len`: below 2 * len, no wrap.
        let i = self.oldest() + age;
        if i >= len {
            i - len
        } else {
            i
        }
    }

    /// How many resources are older than the one in slot `i` (below the length).
    ///
    /// The slots hold the resources in the order their requests came, so this, not
    /// their PSNs, orders them: PSNs compare only within half their space, and one READ
    /// may span that much.
    fn age(&self, i: usize) -> usize {
        let oldest = self.oldest();
        // Both below the length: no wrap.
        if i >= oldest {
            i - oldest
        } else {
            i + (self.res.len() - oldest)
        }
    }

    /// The first resource with an answer to send, from the `age`th oldest on.
    fn first_todo(&self, age: usize) -> Option<usize> {
        (age..self.res.len())
            .map(|a| self.slot_of_age(a))
            .find(|&i| self.res[i].todo.is_some())
    }

    /// Resource `i` is to be answered from PSN `p`: after the answers of the resources
    /// before it (in the order their requests came), which are sent first. A request
    /// that came again for a resource before the one being answered goes back: what was
    /// queued after it is dropped (the requester asks again for that too, as it sends
    /// everything after a loss again). One that asks for what is on its way already is ignored, so however
    /// often a request comes again, the QP sends one stream of answers at a time.
    fn answer(&mut self, i: usize, p: u32) {
        let Some(r) = self.res.get(i) else {
            return;
        };
        if r.todo.is_some_and(|next| psn::diff(p, next) >= 0) {
            // On its way from `p` or before.
            return;
        }
        let age = self.age(i);
        match self.cur {
            Some(c) if age <= self.age(c) => {
                for a in age + 1..self.res.len() {
                    let j = self.slot_of_age(a);
                    self.res[j].todo = None;
                }
                self.cur = Some(i);
            }
            Some(_) => {}
            None => self.cur = Some(i),
        }
        self.res[i].todo = Some(p);
    }

    /// The answer of the current resource is sent: the next one (in the order the
    /// requests came) follows.
    ///
    /// Only resources after the current one can have answers to send ([`answer`]
    /// drops those after a resource it goes back to), so the walk starts after it: in
    /// the usual case, the current one is the newest and nothing is walked.
    ///
    /// [`answer`]: RespState::answer
    fn next_answer(&mut self) {
        let age = match self.cur {
            Some(c) if c < self.res.len() => {
                self.res[c].todo = None;
                // At most the length.
                self.age(c) + 1
            }
            _ => 0,
        };
        self.cur = self.first_todo(age);
    }

    /// The newest resource whose PSNs hold `p`: an older one may hold the same PSNs of
    /// an earlier turn of the PSN space.
    fn find(&self, p: u32) -> Option<usize> {
        (0..self.res.len())
            .rev()
            .map(|a| self.slot_of_age(a))
            .find(|&i| {
                let r = &self.res[i];
                psn::diff(p, r.first_psn) >= 0 && psn::diff(p, r.last_psn) <= 0
            })
    }

    /// Whether answers (READ responses, atomic acknowledgements) wait to be sent.
    pub(crate) fn has_responses(&self) -> bool {
        self.cur.is_some()
    }

    /// The acknowledgement or NAK `reply` is for a PSN after the answers that wait: it
    /// is sent after them.
    pub(crate) fn defer(&mut self, reply: Reply) {
        if reply.is_some() {
            self.later = reply;
        }
    }

    /// Whether an acknowledgement is owed and the QP's number is not listed for it yet
    /// (the caller lists it).
    pub(crate) fn ack_to_list(&mut self) -> bool {
        let list = self.ack_owed.is_some() && !self.ack_listed;
        self.ack_listed |= list;
        list
    }
}

/// The acknowledgement the QP owes, taken from its state, built.
///
/// An in-sequence packet that asks for an acknowledgement is not answered at once: the
/// acknowledgement is owed, and sent after the receive batch that took the packet, so
/// that one acknowledgement answers every such packet of the batch (an acknowledgement
/// covers every PSN up to its own). A response of any other kind (a NAK, an atomic
/// acknowledgement, READ responses) is sent after the owed acknowledgement, which it
/// follows in PSN order.
pub(crate) fn owed(ndev: &NetDevice, shared: &Arc<Task<QpShared>>, inner: &mut QpInner) -> Reply {
    let (psn, msn) = inner.resp.ack_owed.take()?;
    let aeth = Aeth {
        syndrome: ACK_CREDITS,
        msn,
    };
    reply(ndev, shared, inner, ACK, psn, aeth, 0)
}

/// What follows the answers once they are sent: the acknowledgement owed, then a NAK
/// or acknowledgement made while they were being sent (see [`RespState::defer`]).
pub(crate) fn after_answers(
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
) -> [Reply; 2] {
    [owed(ndev, shared, inner), inner.resp.later.take()]
}

impl RxeQp {
    /// Sends the answers that wait (READ responses, atomic acknowledgements), one
    /// packet at a time, in PSN order (one caller at a time, as the requester), then
    /// the acknowledgement and the NAK that follow them. A run sends at most
    /// [`param::RUN_BUDGET`] packets, and stops while the loopback queue it would add to
    /// is full: the QP's work item goes on (a peer may ask for 2 GiB in one request).
    pub(super) fn run_responder(
        dev: &Device<RxeRs>,
        ndev: &NetDevice,
        shared: &Arc<Task<QpShared>>,
    ) {
        {
            let mut inner = shared.inner.lock();
            if inner.resp.busy {
                inner.resp.again = true;
                return;
            }
            inner.resp.busy = true;
        }
        // Keys are looked up, and packets of the QP handed on, in an RCU read-side
        // section, as on every path of the data path (see `destroy`).
        let _rcu = kernel::sync::rcu::read_lock();
        let mut budget = param::RUN_BUDGET;
        loop {
            let out = {
                let mut inner = shared.inner.lock();
                let live = !inner.dead && inner.responds();
                let local = inner.attrs.av.own_dest().is_some();
                let backlog = local && dev.lo.backlog() >= LOOP_BACKLOG;
                if live && inner.resp.has_responses() && (budget == 0 || backlog) {
                    // The rest is the work item's, now or once the loopback queue has
                    // room (nothing queues a dead QP's).
                    inner.resp.busy = false;
                    inner.resp.again = false;
                    inner.respond = true;
                    drop(inner);
                    if budget == 0 {
                        dev.bulk_wq.run(shared);
                    } else if !dev.lo.wait(shared.qp_num()) {
                        dev.wq.run(shared);
                    }
                    break;
                }
                budget = budget.saturating_sub(1);
                let next = if live {
                    next_response(dev, ndev, shared, &mut inner)
                } else {
                    Next::Idle
                };
                match next {
                    Next::Packet(o) => Some(o),
                    Next::Lost => None,
                    Next::Idle if live && inner.resp.again => {
                        inner.resp.again = false;
                        None
                    }
                    Next::Idle => {
                        inner.resp.busy = false;
                        inner.resp.again = false;
                        // The acknowledgement owed for requests after the ones answered,
                        // and a NAK made meanwhile, follow the answers.
                        let tail = if live && !inner.resp.has_responses() {
                            after_answers(ndev, shared, &mut inner)
                        } else {
                            [None, None]
                        };
                        drop(inner);
                        for o in tail.into_iter().flatten() {
                            crate::xmit::send(dev, ndev, &shared.routes, o);
                        }
                        break;
                    }
                }
            };
            if let Some(o) = out {
                crate::xmit::send(dev, ndev, &shared.routes, o);
            }
        }
    }

    /// Sends the acknowledgement the QP owes (see [`owed`]), unless READ
    /// responses are still to go first (their sender sends it after them).
    pub(crate) fn send_owed_ack(dev: &Device<RxeRs>, qp: &Arc<Task<QpShared>>) {
        let out = {
            let mut inner = qp.inner.lock();
            inner.resp.ack_listed = false;
            Self::take_owed_ack(&dev.ndev, qp, &mut inner)
        };
        if let Some(o) = out {
            crate::xmit::send(dev, &dev.ndev, &qp.routes, o);
        }
    }

    /// The acknowledgement the QP owes, built, if it is live, answers requests and no
    /// READ responses are to go first.
    pub(super) fn take_owed_ack(
        ndev: &NetDevice,
        qp: &Arc<Task<QpShared>>,
        inner: &mut QpInner,
    ) -> Reply {
        if inner.dead || !inner.responds() || inner.resp.has_responses() {
            return None;
        }
        owed(ndev, qp, inner)
    }

    /// Sends `ack`, the acknowledgement a QP owed as it stopped answering (its destroy,
    /// a move to ERR or RESET). The messages it acknowledges were completed to the
    /// consumer, who may destroy the QP as soon as it has seen them: without it, the
    /// peer would send them again to a QP that no longer answers, and fail them.
    pub(super) fn send_final_ack(dev: &Device<RxeRs>, qp: &Arc<Task<QpShared>>, ack: Reply) {
        if let Some(o) = ack {
            // As on the data path (see `destroy`).
            let _rcu = kernel::sync::rcu::read_lock();
            crate::xmit::send(dev, &dev.ndev, &qp.routes, o);
        }
    }
}

/// What the responder's next step gave.
pub(crate) enum Next {
    /// A packet to send.
    Packet(Outgoing),
    /// A response that could not be built (no memory): lost, as on a wire; the
    /// requester asks again. The next one follows.
    Lost,
    /// Nothing to send now: every answer is sent, or the pages of an on-demand MR that
    /// the next READ response needs are being faulted in.
    Idle,
}

/// Builds the next packet of the answers that wait (see [`RespState::answer`]).
pub(crate) fn next_response(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
) -> Next {
    let Some(i) = inner.resp.cur else {
        return Next::Idle;
    };
    let Some((p, first_psn, last_psn, answer)) = inner
        .resp
        .res
        .get(i)
        .and_then(|r| Some((r.todo?, r.first_psn, r.last_psn, r.answer)))
    else {
        inner.resp.next_answer();
        return Next::Lost;
    };
    let (rkey, va, len) = match answer {
        Answer::Read(rkey, va, len) => (rkey, va, len),
        Answer::Atomic(orig) => {
            inner.resp.next_answer();
            let ack = answer_packet(ndev, shared, inner, ATOMIC_ACK, first_psn, orig);
            return ack.map_or(Next::Lost, Next::Packet);
        }
        Answer::Done => {
            inner.resp.next_answer();
            let ack = answer_packet(ndev, shared, inner, READ_RESPONSE_ONLY, first_psn, 0);
            return ack.map_or(Next::Lost, Next::Packet);
        }
    };
    let mtu = inner.mtu_bytes();
    let k = p.wrapping_sub(first_psn) & PSN_MASK;
    let at = u64::from(k) * u64::from(mtu);
    let payload = (u64::from(len) - at.min(u64::from(len))).min(u64::from(mtu)) as usize;
    // The responses to one request go FIRST, MIDDLE..., LAST, or ONLY. An answer asked
    // for again from a later PSN (after a lost response) goes on from there with MIDDLE
    // and LAST, as rxe's does: its requester, which asks again from the PSN it lost,
    // takes nothing else there.
    let opcode = match (p == first_psn, p == last_psn) {
        (true, true) => 0x10,
        (true, false) => 0x0d,
        (false, true) => 0x0f,
        (false, false) => 0x0e,
    };
    let bth = Bth {
        opcode,
        pkey: crate::param::DEFAULT_PKEY,
        dest_qp: inner.attrs.dest_qp_num,
        psn: p,
        ..Default::default()
    };
    let ext = Ext {
        aeth: aeth(inner, ACK_CREDITS),
        ..Default::default()
    };
    let last = p == last_psn;
    let mut fault = None;
    let built = xmit::build(
        ndev,
        &inner.attrs.av,
        shared.qp_num(),
        &bth,
        &ext,
        payload,
        |out| match rkey {
            Some(k) if !out.is_empty() => {
                let m = mr::remote(dev, k, shared.pd, shared.qp_num(), need::REMOTE_READ)?;
                let addr = mr::iova_add(va, at)?;
                m.read(addr, out).inspect_err(|e| {
                    if *e == AccessError::Fault {
                        fault = Some(m.fault(addr, out.len(), false));
                    }
                })
            }
            _ => Ok(()),
        },
    );
    if let Some(f) = fault {
        // The same response is sent once the pages are in.
        if RxeQp::fault(dev, shared, inner, f, OdpWait::ReadResponse) {
            return Next::Idle;
        }
    }
    if let Err(BuildError::Payload(_)) = built {
        // The key stopped opening the memory since the request was taken (the MR was
        // deregistered, a window invalidated or bound elsewhere), or the pages of an
        // on-demand MR are gone: the READ ends with a NAK, as if its key had been bad,
        // and the QP with it.
        let nak = refuse(dev, ndev, shared, inner, p, Refusal::Access);
        return nak.map_or(Next::Lost, Next::Packet);
    }
    if last {
        inner.resp.next_answer();
    } else if let Some(r) = inner.resp.res.get_mut(i) {
        r.todo = Some(psn::add(p, 1));
    }
    built.map_or(Next::Lost, Next::Packet)
}

/// An acknowledgement (or NAK) to send once the QP's lock is released.
pub(crate) type Reply = Option<Outgoing>;

/// Bytes of the GRH in front of a datagram.
const GRH_LEN: usize = 40;

/// Takes the next receive WQE of a QP (its own ring or its SRQ); `None` when none is
/// posted, `Some(Err)` for one that fails its checks (taken: it completes in error).
fn take_recv(
    wq: &Workqueue,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
) -> Option<Result<RecvWqe, Malformed>> {
    if let Some(w) = inner.resp.held.take() {
        return Some(Ok(w));
    }
    match (&shared.srq, &mut inner.rq) {
        (Some(srq), _) => srq.take(wq),
        (None, Some(rq)) => rq
            .take::<MAX_RECV_WQE>()
            .map(|b| RecvWqe::parse(b, shared.cap.max_recv_sge)),
        (None, None) => None,
    }
}

/// Writes `parts`, one after the other, into the buffers of `wqe` from byte `at` on.
/// Fails as [`mr::write_local`].
fn scatter(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    wqe: &RecvWqe,
    at: u32,
    parts: &[&[u8]],
    fault: &mut Option<Fault>,
) -> Result<(), WcStatus> {
    let mut at = at as usize;
    // The keys of an SRQ's WQE are the SRQ's PD's.
    let pd = shared.srq.as_ref().map_or(shared.pd, |srq| srq.pd());
    for part in parts {
        for_each_piece(wqe.sges(), at, part.len(), |lkey, addr, r| {
            mr::write_local(dev, (lkey, pd, addr), &part[r], fault)
        })?;
        at += part.len();
    }
    Ok(())
}

/// What the responder made of a request packet.
pub(crate) enum Request {
    /// Taken; with the acknowledgement or NAK to send, if one was made.
    Taken(Reply),
    /// Not taken (the QP counts it dropped); with the NAK to send, if one was made (the
    /// sequence NAK of a packet ahead of the PSN expected).
    Dropped(Reply),
}

impl Request {
    /// Taken or dropped as `taken` says, with nothing to answer.
    fn taken_if(taken: bool) -> Self {
        if taken {
            Self::Taken(None)
        } else {
            Self::Dropped(None)
        }
    }
}

/// Takes a request packet.
pub(crate) fn request(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
    from: &Arrival<'_>,
) -> Request {
    if inner.state == QpState::Err {
        RxeQp::flush_posted_receives(dev, shared, inner);
    }
    if !inner.responds() {
        return Request::Dropped(None);
    }
    let rtr = inner.state == QpState::Rtr;
    let request = match (shared.qp_type, pkt.info.transport) {
        (QpType::Ud | QpType::Gsi, Transport::Ud) => {
            Request::taken_if(datagram(dev, shared, inner, pkt, from))
        }
        (QpType::Rc, Transport::Rc) => rc(dev, ndev, shared, inner, pkt),
        (QpType::Uc, Transport::Uc) => Request::taken_if(uc(dev, shared, inner, pkt)),
        _ => Request::Dropped(None),
    };
    // The first packet a connected QP in RTR takes establishes communication (the
    // consumer may not have seen the last connection message, and learns it so).
    let connected = matches!(shared.qp_type, QpType::Rc | QpType::Uc);
    if matches!(request, Request::Taken(_)) && rtr && connected && !inner.resp.established {
        inner.resp.established = true;
        super::RxeQp::raise(dev, shared, inner, QpEvent::CommEst);
    }
    request
}

/// An acknowledgement of `psn` with `syndrome` to the QP's peer.
fn ack(
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &QpInner,
    psn: u32,
    syndrome: u8,
) -> Reply {
    reply(ndev, shared, inner, ACK, psn, aeth(inner, syndrome), 0)
}

/// Why the responder refuses a request: the NAK it answers with, and the status the
/// receive in progress completes with.
#[derive(Clone, Copy)]
enum Refusal {
    /// Malformed, or an operation the QP does not accept (NAK invalid request).
    Invalid,
    /// A key that does not open the memory named (NAK remote access error).
    Access,
    /// The operation failed at the responder (NAK remote operational error).
    Operation(WcStatus),
    /// A SEND longer than its receive WQE's buffers: a length error, which the IB
    /// spec's responder classes with invalid requests (NAK invalid request, as a NIC
    /// answers it); the receive completes with LOC_LEN_ERR.
    Length,
}

/// Refuses the request at `psn` for the reason `why`: the QP enters the error state,
/// and the NAK is the reply.
fn refuse(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    psn: u32,
    why: Refusal,
) -> Reply {
    let (syndrome, status) = match why {
        Refusal::Invalid => (syndrome::NAK_INVALID_REQUEST, WcStatus::RemInvReqErr),
        Refusal::Access => (syndrome::NAK_REMOTE_ACCESS, WcStatus::RemAccessErr),
        Refusal::Operation(status) => (syndrome::NAK_REMOTE_OP, status),
        Refusal::Length => (syndrome::NAK_INVALID_REQUEST, WcStatus::LocLenErr),
    };
    let reply = ack(ndev, shared, inner, psn, syndrome);
    responder_error(dev, shared, inner, status);
    reply
}

/// A successful response without payload (an atomic acknowledgement with the original
/// value `orig`, or an empty READ response) of `opcode` for `psn`.
fn answer_packet(
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &QpInner,
    opcode: u8,
    psn: u32,
    orig: u64,
) -> Reply {
    let aeth = aeth(inner, ACK_CREDITS);
    reply(ndev, shared, inner, opcode, psn, aeth, orig)
}

/// An AETH with `syndrome` and the QP's MSN.
fn aeth(inner: &QpInner, syndrome: u8) -> Aeth {
    Aeth {
        syndrome,
        msn: inner.resp.msn,
    }
}

/// An RNR NAK of `psn` with the QP's minimum RNR timer: the peer is to send the request
/// again once that time passed.
fn rnr_nak(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &QpInner,
    psn: u32,
) -> Reply {
    dev.counters.inc(Counter::SentRnrNak);
    let timer = inner.attrs.min_rnr_timer & 0x1f;
    ack(ndev, shared, inner, psn, syndrome::RNR_NAK | timer)
}

/// A response without payload: `opcode` (an ACK, an atomic ACK with the original value
/// `orig`, or an empty READ response) for `psn`, with `aeth`.
fn reply(
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &QpInner,
    opcode: u8,
    psn: u32,
    aeth: Aeth,
    orig: u64,
) -> Reply {
    let bth = Bth {
        opcode,
        pkey: crate::param::DEFAULT_PKEY,
        dest_qp: inner.attrs.dest_qp_num,
        psn,
        ..Default::default()
    };
    let ext = Ext {
        aeth,
        atomic_ack: orig,
        ..Default::default()
    };
    xmit::build(
        ndev,
        &inner.attrs.av,
        shared.qp_num(),
        &bth,
        &ext,
        0,
        |_| Ok::<(), ()>(()),
    )
    .ok()
}

/// What placing one packet of a message gave.
enum Placed {
    /// Taken; where it left its message.
    Done(Progress),
    /// A SEND (or WRITE with immediate data) found no receive WQE.
    NoWqe,
    /// Out of sequence for the message in progress, or malformed (not cut at the path
    /// MTU, or a RETH length beyond 2^31): an invalid request.
    Sequence,
    /// A bad R_Key, or outside its range.
    Access,
    /// Longer than the receive WQE's buffers (the WQE is the message's, to complete
    /// in error).
    TooLong,
    /// Local trouble: a malformed receive WQE, or its buffers cannot be written.
    Local(WcStatus),
    /// Pages of an on-demand MR are missing: nothing changed, and the task faults them
    /// in; the packet is to come again.
    Fault,
}

/// Where a placed packet left its message.
// A receive completion is kept by value: it is moved once, to the CQ.
#[allow(clippy::large_enum_variant)]
enum Progress {
    /// The message goes on.
    More,
    /// It ended a message that completes nothing (an RDMA WRITE without immediate
    /// data).
    Ended,
    /// It ended a message with this receive completion.
    Completed(Completion),
}

/// The longest message a RETH may announce (IBA C9-94): a longer one is an invalid
/// request.
const MAX_DMA_LEN: u32 = 1 << 31;

/// Whether the payload of a SEND or RDMA WRITE packet fits its place in the message:
/// FIRST and MIDDLE packets are full (the path MTU), a LAST one carries 1 byte to a
/// full MTU, an ONLY one up to the MTU (rxe checks the same).
fn payload_fits(inner: &QpInner, pkt: &Packet<'_>) -> bool {
    let n = pkt.payload().len();
    let mtu = inner.mtu_bytes() as usize;
    let f = pkt.info.flags;
    match (f & flag::FIRST != 0, f & flag::LAST != 0) {
        (true, true) => n <= mtu,
        (false, true) => (1..=mtu).contains(&n),
        _ => n == mtu,
    }
}

/// Places the payload of an in-sequence packet of a connected QP.
fn place(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Placed {
    let f = pkt.info.flags;
    let first = f & flag::FIRST != 0;
    let last = f & flag::LAST != 0;
    // A message starts with its first packet and only then; its packets are cut at
    // the path MTU.
    if first != inner.resp.msg.is_none() || !payload_fits(inner, pkt) {
        return Placed::Sequence;
    }
    if f & flag::SEND != 0 {
        place_send(dev, shared, inner, pkt, last)
    } else {
        place_write(dev, shared, inner, pkt, first, last)
    }
}

/// Places a packet of a SEND into its receive WQE (taken from the ring with the first
/// packet).
fn place_send(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
    last: bool,
) -> Placed {
    let payload = pkt.payload();
    let (wqe, at) = match inner.resp.msg.take() {
        Some(Msg::Send(w, at)) => (w, at),
        Some(other) => {
            inner.resp.msg = Some(other);
            return Placed::Sequence;
        }
        None => match take_recv(&dev.wq, shared, inner) {
            None => return Placed::NoWqe,
            Some(Err(m)) => return recv_error(inner, RecvWqe::malformed(m), m.status),
            Some(Ok(w)) => (w, 0),
        },
    };
    // SGE lengths whose sum overflows 32 bits have room for any message.
    let end = match (at.checked_add(payload.len() as u32), wqe.room()) {
        (Some(e), None) => e,
        (Some(e), Some(room)) if e <= room => e,
        _ => {
            inner.resp.msg = Some(Msg::Send(wqe, 0));
            return Placed::TooLong;
        }
    };
    let mut fault = None;
    if let Err(s) = scatter(dev, shared, &wqe, at, &[payload], &mut fault) {
        if let Some(f) = fault {
            if RxeQp::fault(dev, shared, inner, f, OdpWait::Request) {
                // As it was before the packet: it comes again.
                if at == 0 {
                    inner.resp.held = Some(wqe);
                } else {
                    inner.resp.msg = Some(Msg::Send(wqe, at));
                }
                return Placed::Fault;
            }
        }
        return recv_error(inner, wqe, s);
    }
    if !last {
        inner.resp.msg = Some(Msg::Send(wqe, end));
        return Placed::Done(Progress::More);
    }
    send_completion(dev, shared, inner, wqe, end, pkt)
}

/// The completion of a SEND whose last packet, `pkt`, was placed into `wqe` (`len`
/// bytes in all), with its immediate data, or the key it invalidates.
fn send_completion(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    wqe: RecvWqe,
    len: u32,
    pkt: &Packet<'_>,
) -> Placed {
    let mut c = recv_completion(shared, &wqe, WcOpcode::Recv, len);
    if let Some(imm) = pkt.imm() {
        c.ex = u32::from_ne_bytes(imm);
        c.wc_flags |= WcFlag::WithImm;
    }
    if let Some(rkey) = pkt.ieth() {
        // The sender asks that its peer's key stop opening memory, as a LOCAL_INV
        // of this QP would.
        if mr::invalidate(dev, rkey, shared.pd, shared.qp_num()).is_err() {
            return recv_error(inner, wqe, WcStatus::LocQpOpErr);
        }
        c.ex = rkey;
        c.wc_flags |= WcFlag::WithInv;
    }
    Placed::Done(Progress::Completed(c))
}

/// Places a packet of an RDMA WRITE.
fn place_write(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
    first: bool,
    last: bool,
) -> Placed {
    let payload = pkt.payload();
    let imm = pkt.imm();
    let (rkey, va, left, total) = match write_state(dev, shared, inner, pkt) {
        Ok(state) => state,
        Err(placed) => return placed,
    };
    let n = payload.len() as u32;
    // Every packet but the last is full, and the message is as long as announced.
    if n > left || (last && n != left) {
        return Placed::Sequence;
    }
    // WRITE with immediate data consumes a receive WQE (which gets no data): make sure
    // there is one before placing anything, so that the packet can simply come again.
    let imm_wqe = match (last, imm) {
        (true, Some(_)) => match take_recv(&dev.wq, shared, inner) {
            None => {
                if !first {
                    inner.resp.msg = Some(Msg::Write(rkey, va, left, total));
                }
                return Placed::NoWqe;
            }
            Some(Err(m)) => return recv_error(inner, RecvWqe::malformed(m), m.status),
            Some(Ok(w)) => Some(w),
        },
        _ => None,
    };
    let mut fault = None;
    let written = rkey.is_some_and(|k| write_payload(dev, shared, k, va, payload, &mut fault));
    if let Some(f) = fault {
        if RxeQp::fault(dev, shared, inner, f, OdpWait::Request) {
            // As it was before the packet: it comes again.
            if !first {
                inner.resp.msg = Some(Msg::Write(rkey, va, left, total));
            }
            if let Some(w) = imm_wqe {
                inner.resp.held = Some(w);
            }
            return Placed::Fault;
        }
    }
    if n != 0 && !written {
        // The WQE taken for the immediate data completes in error with the QP.
        if let Some(w) = imm_wqe {
            inner.resp.msg = Some(Msg::Send(w, 0));
        }
        return Placed::Access;
    }
    if !last {
        // Only a zero-length WRITE has no key, and it is one packet.
        if rkey.is_none() {
            return Placed::Sequence;
        }
        let Ok(next) = mr::iova_add(va, u64::from(n)) else {
            return Placed::Access;
        };
        inner.resp.msg = Some(Msg::Write(rkey, next, left - n, total));
        return Placed::Done(Progress::More);
    }
    let (Some(imm), Some(wqe)) = (imm, imm_wqe) else {
        return Placed::Done(Progress::Ended);
    };
    let mut c = recv_completion(shared, &wqe, WcOpcode::RecvRdmaWithImm, total);
    c.ex = u32::from_ne_bytes(imm);
    c.wc_flags |= WcFlag::WithImm;
    Placed::Done(Progress::Completed(c))
}

/// Where a packet of an RDMA WRITE goes: the key (`None` for a zero-length WRITE), the
/// address of the packet's first byte, the bytes left and the message's length; taken
/// from the RETH of a first packet (which must name memory the key opens for remote
/// writes), and from the message in progress for the others.
fn write_state(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Result<(Option<u32>, u64, u32, u32), Placed> {
    match inner.resp.msg.take() {
        Some(Msg::Write(k, va, left, total)) => Ok((k, va, left, total)),
        Some(other) => {
            inner.resp.msg = Some(other);
            Err(Placed::Sequence)
        }
        None => {
            let Some(reth) = pkt.reth().filter(|r| r.len <= MAX_DMA_LEN) else {
                return Err(Placed::Sequence);
            };
            // A zero-length WRITE touches no memory and checks no key.
            let rkey = if reth.len == 0 {
                None
            } else {
                let qpn = shared.qp_num();
                match mr::remote(dev, reth.rkey, shared.pd, qpn, need::REMOTE_WRITE) {
                    Ok(e) if e.covers(reth.va, reth.len as usize) => Some(reth.rkey),
                    _ => return Err(Placed::Access),
                }
            };
            Ok((rkey, reth.va, reth.len, reth.len))
        }
    }
}

/// Writes `payload` at `va` of the memory `rkey` opens for remote writes; whether it
/// was written. A page of an on-demand MR that is not present leaves its fault in
/// `fault`.
fn write_payload(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    rkey: u32,
    va: u64,
    payload: &[u8],
    fault: &mut Option<Fault>,
) -> bool {
    mr::remote(dev, rkey, shared.pd, shared.qp_num(), need::REMOTE_WRITE).is_ok_and(|e| {
        match e.write(va, payload) {
            Ok(()) => true,
            Err(AccessError::Fault) => {
                *fault = Some(e.fault(va, payload.len(), true));
                false
            }
            Err(_) => false,
        }
    })
}

/// A successful receive completion of `wqe`.
fn recv_completion(
    shared: &Arc<Task<QpShared>>,
    wqe: &RecvWqe,
    opcode: WcOpcode,
    len: u32,
) -> Completion {
    Completion {
        wr_id: wqe.wr_id,
        status: WcStatus::Success,
        opcode,
        byte_len: len,
        qp_num: shared.qp_num(),
        wc_qp: shared.wc_qp,
        port_num: PORT as u8,
        ..Default::default()
    }
}

/// A receive WQE ends in error `status` (completed by `responder_error`).
fn recv_error(inner: &mut QpInner, wqe: RecvWqe, status: WcStatus) -> Placed {
    inner.resp.msg = Some(Msg::Send(wqe, 0));
    Placed::Local(status)
}

/// A request packet of an RC QP.
fn rc(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Request {
    let p = pkt.bth.psn;
    let d = psn::diff(p, inner.resp.psn);
    let f = pkt.info.flags;
    if d == 0 && !op_allowed(inner, pkt) {
        // An operation the QP does not accept from its peer (its access flags).
        return Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Invalid));
    }
    if d <= 0 && f & (flag::READ | flag::ATOMIC | flag::FLUSH | flag::ATOMIC_WRITE) != 0 {
        return read_or_atomic(dev, ndev, shared, inner, pkt, d == 0);
    }
    if d < 0 {
        // A duplicate: already placed. Say again how far we are, if asked.
        dev.counters.inc(Counter::DuplicateRequest);
        let reply = if pkt.bth.ack_req {
            ack(
                ndev,
                shared,
                inner,
                psn::add(inner.resp.psn, PSN_MASK),
                ACK_CREDITS,
            )
        } else {
            None
        };
        return Request::Taken(reply);
    }
    if d > 0 {
        // Packets were lost: ask for them, once.
        dev.counters.inc(Counter::OutOfSeqRequest);
        if inner.resp.nak_sent {
            return Request::Dropped(None);
        }
        inner.resp.nak_sent = true;
        let reply = ack(ndev, shared, inner, inner.resp.psn, syndrome::NAK_PSN_SEQ);
        return Request::Dropped(reply);
    }
    inner.resp.nak_sent = false;
    match place(dev, shared, inner, pkt) {
        Placed::Done(progress) => {
            inner.resp.psn = psn::add(p, 1);
            if !matches!(progress, Progress::More) {
                inner.resp.msn = psn::add(inner.resp.msn, 1);
            }
            if let Progress::Completed(c) = progress {
                RxeQp::complete(dev, shared, inner, true, &c, pkt.bth.se);
            }
            if pkt.bth.ack_req {
                inner.resp.ack_owed = Some((p, inner.resp.msn));
            }
            Request::Taken(None)
        }
        // Missing pages are being faulted in: the requester waits as for a receive
        // WQE (as RoCE NICs with on-demand paging do).
        Placed::NoWqe | Placed::Fault => Request::Taken(rnr_nak(dev, ndev, shared, inner, p)),
        Placed::Sequence => Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Invalid)),
        Placed::Access => Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Access)),
        Placed::TooLong => Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Length)),
        Placed::Local(status) => Request::Taken(refuse(
            dev,
            ndev,
            shared,
            inner,
            p,
            Refusal::Operation(status),
        )),
    }
}

/// The access rights a request packet needs of the QP and of the key
/// it names (SENDs need none).
fn needs(pkt: &Packet<'_>) -> AccessFlags {
    let f = pkt.info.flags;
    if f & flag::READ != 0 {
        need::REMOTE_READ
    } else if f & (flag::WRITE | flag::ATOMIC_WRITE) != 0 {
        need::REMOTE_WRITE
    } else if f & flag::ATOMIC != 0 {
        need::REMOTE_ATOMIC
    } else if f & flag::FLUSH != 0 {
        // What a malformed FETH would need does not matter: it is refused before any
        // key is looked up (see `flush_of`).
        flush_of(pkt).map_or(AccessFlags::empty(), |(placement, _)| placement.needs())
    } else {
        AccessFlags::empty()
    }
}

/// The placement type and selectivity level of a FLUSH request, `None` for a FETH
/// that names no placement, an unknown one or an unknown level.
fn flush_of(pkt: &Packet<'_>) -> Option<(FlushPlacement, FlushLevel)> {
    let h = pkt.feth()?;
    Some((
        FlushPlacement::from_raw(u32::from(h.placement))?,
        FlushLevel::from_raw(u32::from(h.selectivity))?,
    ))
}

/// Whether the QP's access flags let its peer carry out the operation of a request
/// packet.
fn op_allowed(inner: &QpInner, pkt: &Packet<'_>) -> bool {
    let need = needs(pkt);
    inner.attrs.access_flags.contains_all(need)
}

/// A request that takes a responder resource (an RDMA READ, an atomic, an ATOMIC WRITE
/// or a FLUSH), new (`fresh`) or one that came again.
fn read_or_atomic(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
    fresh: bool,
) -> Request {
    if !fresh {
        return Request::taken_if(repeat(dev, inner, pkt));
    }
    if pkt.info.flags & (flag::FLUSH | flag::ATOMIC_WRITE) != 0 {
        return flush_or_atomic_write(dev, ndev, shared, inner, pkt);
    }
    inner.resp.nak_sent = false;
    if pkt.info.flags & flag::ATOMIC != 0 {
        new_atomic(dev, ndev, shared, inner, pkt)
    } else {
        new_read(dev, ndev, shared, inner, pkt)
    }
}

/// A request that came again: answered again from its resource, in PSN order after
/// the answers that wait (an atomic is never carried out twice). Returns whether it
/// was taken: not when its resource is gone or was of another kind.
fn repeat(dev: &Device<RxeRs>, inner: &mut QpInner, pkt: &Packet<'_>) -> bool {
    let p = pkt.bth.psn;
    dev.counters.inc(Counter::DuplicateRequest);
    let Some(i) = inner.resp.find(p) else {
        return false;
    };
    let same_kind = match inner.resp.res[i].answer {
        Answer::Atomic(_) => pkt.info.flags & flag::ATOMIC != 0,
        Answer::Read(..) => pkt.info.flags & flag::READ != 0,
        Answer::Done => pkt.info.flags & (flag::FLUSH | flag::ATOMIC_WRITE) != 0,
    };
    if same_kind {
        inner.resp.answer(i, p);
    }
    same_kind
}

/// A new RDMA READ request: its key is checked for the whole range now, and the
/// response is sent by the answers that follow.
fn new_read(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Request {
    let p = pkt.bth.psn;
    let Some(reth) = pkt.reth() else {
        return Request::Dropped(None);
    };
    if reth.len > MAX_DMA_LEN {
        return Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Invalid));
    }
    let rkey = if reth.len == 0 {
        None
    } else {
        let qpn = shared.qp_num();
        match mr::remote(dev, reth.rkey, shared.pd, qpn, need::REMOTE_READ) {
            Ok(e) if e.covers(reth.va, reth.len as usize) => Some(reth.rkey),
            _ => return Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Access)),
        }
    };
    let n = reth.len.div_ceil(inner.mtu_bytes()).max(1);
    let last = psn::add(p, n - 1);
    keep_answer(inner, p, last, Answer::Read(rkey, reth.va, reth.len));
    Request::Taken(None)
}

/// A new atomic request (compare and swap, fetch and add): carried out now, and its
/// original value kept for the answer and for a request that comes again.
fn new_atomic(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Request {
    let p = pkt.bth.psn;
    let Some(a) = pkt.atomic_eth() else {
        return Request::Dropped(None);
    };
    if a.va % 8 != 0 {
        return Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Invalid));
    }
    let qpn = shared.qp_num();
    let orig = match mr::remote(dev, a.rkey, shared.pd, qpn, need::REMOTE_ATOMIC) {
        Ok(e) => {
            let r = dev.atomic(&e, a.va, |old| {
                if pkt.bth.opcode & 0x1f == 0x13 {
                    if old == a.compare {
                        a.swap_add
                    } else {
                        old
                    }
                } else {
                    old.wrapping_add(a.swap_add)
                }
            });
            if r == Err(AccessError::Fault)
                && RxeQp::fault(dev, shared, inner, e.fault(a.va, 8, true), OdpWait::Request)
            {
                // Not carried out: it comes again after the RNR timer.
                return Request::Taken(rnr_nak(dev, ndev, shared, inner, p));
            }
            r.ok()
        }
        Err(_) => None,
    };
    let Some(orig) = orig else {
        return Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Access));
    };
    keep_answer(inner, p, p, Answer::Atomic(orig));
    Request::Taken(None)
}

/// Keeps the resource of a new request that takes PSNs `first` to `last`, and queues
/// its answer: the responder expects the PSN after `last`, and the message is counted.
fn keep_answer(inner: &mut QpInner, first: u32, last: u32, answer: Answer) {
    let limit = usize::from(inner.attrs.max_dest_rd_atomic);
    let i = inner.resp.keep(
        Resource {
            first_psn: first,
            last_psn: last,
            answer,
            todo: None,
        },
        limit,
    );
    inner.resp.psn = psn::add(last, 1);
    inner.resp.msn = psn::add(inner.resp.msn, 1);
    inner.resp.answer(i, first);
}

/// A new ATOMIC WRITE (8 bytes placed as one) or FLUSH (the data placed before it is
/// made visible: the device places data with the CPU, so it is once placed; a
/// persistent flush needs memory registered for it, which no MR of this device is).
fn flush_or_atomic_write(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Request {
    let p = pkt.bth.psn;
    let Some(reth) = pkt.reth() else {
        return Request::Dropped(None);
    };
    // A FLUSH names what it makes visible (global, persistent, or both) and how much
    // (a range or the whole MR): anything else is no FLUSH, and would otherwise need no
    // access right to tell whether a key opens a range.
    let flush = flush_of(pkt);
    if reth.len > MAX_DMA_LEN || (pkt.feth().is_some() && flush.is_none()) {
        return Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Invalid));
    }
    let qpn = shared.qp_num();
    let region = mr::remote(dev, reth.rkey, shared.pd, qpn, needs(pkt));
    let ok = if pkt.info.flags & flag::ATOMIC_WRITE != 0 {
        let Ok(value) = <[u8; 8]>::try_from(pkt.payload()) else {
            return Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Invalid));
        };
        if reth.len != 8 || reth.va % 8 != 0 {
            return Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Invalid));
        }
        let Ok(r) = region else {
            return Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Access));
        };
        let done = dev.atomic(&r, reth.va, |_| u64::from_ne_bytes(value));
        if done == Err(AccessError::Fault)
            && RxeQp::fault(
                dev,
                shared,
                inner,
                r.fault(reth.va, 8, true),
                OdpWait::Request,
            )
        {
            // Not carried out: it comes again after the RNR timer.
            return Request::Taken(rnr_nak(dev, ndev, shared, inner, p));
        }
        done.is_ok()
    } else {
        // A FLUSH of the whole MR: the range does not matter.
        let whole = flush.is_some_and(|(_, level)| level == FlushLevel::Mr);
        let ok = region.is_ok_and(|r| whole || r.covers(reth.va, reth.len as usize));
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        ok
    };
    if !ok {
        return Request::Taken(refuse(dev, ndev, shared, inner, p, Refusal::Access));
    }
    inner.resp.nak_sent = false;
    keep_answer(inner, p, p, Answer::Done);
    Request::Taken(None)
}

/// The responder hit an error it cannot go on from: the receive in progress (if any)
/// completes with `status` and the QP enters the error state.
fn responder_error(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    status: WcStatus,
) {
    if let Some(Msg::Send(wqe, _)) = inner.resp.msg.take() {
        let c = shared.error_completion(wqe.wr_id, status);
        RxeQp::complete(dev, shared, inner, true, &c, false);
    }
    let event = match status {
        WcStatus::RemAccessErr => Some(QpEvent::AccessErr),
        WcStatus::RemInvReqErr => Some(QpEvent::ReqErr),
        _ => None,
    };
    super::RxeQp::enter_err(dev, shared, inner);
    // A responder error of an RC QP is affiliated with it (as the IB spec's "invalid
    // request" and "access violation" local work queue errors).
    if let Some(ev) = event.filter(|_| shared.qp_type == QpType::Rc) {
        super::RxeQp::raise(dev, shared, inner, ev);
    }
}

/// The UC message in progress is dropped (a packet of it was lost or refused), and with
/// it the rest of its packets if `rest`. A receive WQE it had taken was not completed:
/// it serves the next message, as if never taken (a peer that starts messages and
/// never ends them uses up no receive WQE).
fn drop_message(inner: &mut QpInner, rest: bool) {
    if let Some(Msg::Send(w, _)) = inner.resp.msg.take() {
        // A message in progress took its WQE from `held` or after it: nothing else is
        // held now.
        inner.resp.held.get_or_insert(w);
    }
    if rest {
        inner.resp.msg = Some(Msg::Discard);
    }
}

/// A request packet of a UC QP.
fn uc(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> bool {
    let p = pkt.bth.psn;
    let first = pkt.info.flags & flag::FIRST != 0;
    let last = pkt.info.flags & flag::LAST != 0;
    if p != inner.resp.psn {
        // A lost packet: the message in progress is lost with it. A new message may
        // start here.
        drop_message(inner, !first);
        if !first {
            inner.resp.psn = psn::add(p, 1);
            return false;
        }
    }
    inner.resp.psn = psn::add(p, 1);
    if matches!(inner.resp.msg, Some(Msg::Discard)) {
        if first {
            inner.resp.msg = None;
        } else {
            if last {
                inner.resp.msg = None;
            }
            return false;
        }
    }
    if !op_allowed(inner, pkt) {
        drop_message(inner, !last);
        return false;
    }
    match place(dev, shared, inner, pkt) {
        Placed::Done(Progress::Completed(c)) => {
            RxeQp::complete(dev, shared, inner, true, &c, pkt.bth.se);
            true
        }
        Placed::Done(_) => true,
        // UC cannot ask for a packet again: the rest of the message is dropped.
        Placed::Fault | Placed::NoWqe | Placed::Sequence | Placed::Access => {
            drop_message(inner, !last);
            false
        }
        Placed::TooLong => {
            responder_error(dev, shared, inner, WcStatus::LocLenErr);
            true
        }
        Placed::Local(status) => {
            responder_error(dev, shared, inner, status);
            true
        }
    }
}

fn datagram(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
    from: &Arrival<'_>,
) -> bool {
    let Some(deth) = pkt.deth() else {
        return false;
    };
    let qkey = if shared.qp_type == QpType::Gsi {
        GSI_QKEY
    } else {
        inner.attrs.qkey
    };
    if deth.qkey != qkey {
        dev.counters.inc(Counter::QkeyViolation);
        return false;
    }
    let mut grh = [0u8; GRH_LEN];
    match from.ip.len() {
        20 => grh[20..].copy_from_slice(from.ip),
        40 => grh.copy_from_slice(from.ip),
        _ => return false,
    }
    let wqe = match take_recv(&dev.wq, shared, inner) {
        None => return false,
        Some(Ok(w)) => w,
        Some(Err(m)) => {
            // A receive WQE that fails its checks: consumed with a length error.
            let c = shared.error_completion(m.wr_id, m.status);
            RxeQp::complete(dev, shared, inner, true, &c, false);
            return true;
        }
    };
    let payload = pkt.payload();
    // GRH_LEN plus a payload of at most one MTU: no overflow.
    let byte_len = (GRH_LEN + payload.len()) as u32;
    if wqe.room().is_some_and(|room| room < byte_len) {
        // Too long for the receive WQE (SGE lengths whose sum overflows 32 bits have
        // room for any datagram). The sender's work request completed when it left.
        if shared.srq.is_none() {
            // C9-92's class D, as on a NIC and in rxe: dropped, and the WQE serves the
            // next datagram.
            inner.resp.held = Some(wqe);
            return false;
        }
        // Class E: a WQE of the shared queue is not kept from the other QPs; it
        // completes in error (as in rxe).
        let c = shared.error_completion(wqe.wr_id, WcStatus::RemInvReqErr);
        RxeQp::complete(dev, shared, inner, true, &c, false);
        return true;
    }
    let imm = pkt.imm();
    let mut fault = None;
    let status = match scatter(dev, shared, &wqe, 0, &[&grh, payload], &mut fault) {
        Ok(()) => WcStatus::Success,
        Err(s) => {
            if let Some(f) = fault {
                if RxeQp::fault(dev, shared, inner, f, OdpWait::Request) {
                    // A datagram cannot come again: it is dropped, and the receive
                    // WQE serves the next one.
                    inner.resp.held = Some(wqe);
                    return false;
                }
            }
            s
        }
    };
    let mut c = Completion {
        wr_id: wqe.wr_id,
        status,
        qp_num: shared.qp_num(),
        wc_qp: shared.wc_qp,
        ..Default::default()
    };
    if status == WcStatus::Success {
        c.opcode = WcOpcode::Recv;
        c.byte_len = byte_len;
        c.src_qp = deth.src_qp;
        c.wc_flags = WcFlag::Grh.into();
        if let Some(imm) = imm {
            c.ex = u32::from_ne_bytes(imm);
            c.wc_flags |= WcFlag::WithImm;
        }
        if let Some(vlan) = from.vlan_id {
            c.vlan_id = vlan;
            c.wc_flags |= WcFlag::WithVlan;
        }
        c.port_num = PORT as u8;
    }
    RxeQp::complete(dev, shared, inner, true, &c, pkt.bth.se);
    true
}

#[cfg(CONFIG_RDMA_RXE_RS_KUNIT_TEST)]
#[kernel::macros::kunit_tests(rxe_rs_read_resources)]
mod tests {
    use super::*;

    fn res(first_psn: u32, last_psn: u32) -> Resource {
        Resource {
            first_psn,
            last_psn,
            answer: Answer::Done,
            todo: None,
        }
    }

    /// Resources 0, 1 and 2 around the wrap of the 24-bit PSN space: 0xfffffe..=1,
    /// 2..=5 and 6.
    fn three() -> Result<RespState> {
        let mut s = RespState::new(4)?;
        for r in [res(0xff_fffe, 1), res(2, 5), res(6, 6)] {
            s.keep(r, 4);
        }
        Ok(s)
    }

    #[test]
    fn find_across_the_wrap() -> Result {
        let s = three()?;
        assert_eq!(s.res.len(), 3);
        for (p, want) in [
            (0xff_fffe, Some(0)),
            (0xff_ffff, Some(0)),
            (0, Some(0)),
            (1, Some(0)),
            (2, Some(1)),
            (5, Some(1)),
            (6, Some(2)),
            (7, None),
            (0xff_fffd, None),
            (0x80_0000, None),
        ] {
            assert_eq!(s.find(p), want);
        }
        Ok(())
    }

    /// Answers leave in PSN order; a request that comes again for an earlier resource
    /// restarts from there and drops what was queued after it; one for what is on its
    /// way already changes nothing.
    #[test]
    fn answers_in_psn_order_once() -> Result {
        let mut s = three()?;
        s.answer(1, 2);
        s.answer(2, 6);
        assert_eq!(s.cur, Some(1));
        s.answer(0, 0);
        assert_eq!(s.cur, Some(0));
        assert_eq!((s.res[1].todo, s.res[2].todo), (None, None));
        // Asked again from a later PSN than the one queued: ignored.
        s.answer(0, 1);
        assert_eq!(s.res[0].todo, Some(0));
        // From an earlier one: the stream goes back.
        s.answer(0, 0xff_ffff);
        assert_eq!(s.res[0].todo, Some(0xff_ffff));
        assert!(s.has_responses());
        s.next_answer();
        assert_eq!(s.cur, None);
        assert!(!s.has_responses());
        // Out of range: nothing.
        s.answer(9, 0);
        assert_eq!(s.cur, None);
        Ok(())
    }

    /// The next answer is the next resource's in PSN order, across the wrap of the PSN
    /// space and of the slots (the oldest replaced).
    #[test]
    fn next_answer_in_psn_order_across_replacements() -> Result {
        let mut s = RespState::new(3)?;
        for r in [
            res(0xff_fff0, 0xff_fff0),
            res(0xff_fff8, 0xff_fff8),
            res(5, 5),
        ] {
            s.keep(r, 3);
        }
        s.answer(0, 0xff_fff0);
        s.answer(1, 0xff_fff8);
        s.answer(2, 5);
        assert_eq!(s.cur, Some(0));
        s.next_answer();
        assert_eq!(s.cur, Some(1));
        // Slot 0 (done) is the oldest: replaced by the newest.
        assert_eq!(s.keep(res(6, 6), 3), 0);
        s.answer(0, 6);
        assert_eq!(s.cur, Some(1));
        s.next_answer();
        assert_eq!(s.cur, Some(2));
        s.next_answer();
        assert_eq!(s.cur, Some(0));
        s.next_answer();
        assert_eq!(s.cur, None);
        Ok(())
    }

    /// A READ that spans half the PSN space (2^31 bytes at an MTU of 256) is answered
    /// before the request that came after it, whose PSNs its own seem to follow.
    #[test]
    fn answers_in_request_order_past_half_the_psn_space() -> Result {
        let mut s = RespState::new(2)?;
        s.keep(res(0, 0x7f_ffff), 2);
        s.keep(res(0x80_0000, 0x80_0000), 2);
        s.answer(0, 0);
        s.answer(1, 0x80_0000);
        assert_eq!(s.cur, Some(0));
        s.next_answer();
        assert_eq!(s.cur, Some(1));
        s.next_answer();
        assert_eq!(s.cur, None);
        Ok(())
    }

    /// A request that came again is matched with the newest resource that holds its
    /// PSN, not with one of an earlier turn of the PSN space.
    #[test]
    fn find_prefers_the_newest_turn() -> Result {
        let mut s = RespState::new(3)?;
        for (p, slot) in [(10, 0), (0x40_0000, 1), (10, 2)] {
            assert_eq!(s.keep(res(p, p), 3), slot);
        }
        assert_eq!(s.find(10), Some(2));
        // Replaced: the oldest (slot 0) is now the newest turn of PSN 10 again.
        assert_eq!(s.keep(res(10, 10), 3), 0);
        assert_eq!(s.find(10), Some(0));
        Ok(())
    }

    /// A limit that grows after slots were replaced keeps the slots in PSN order.
    #[test]
    fn limit_grows_after_replacement() -> Result {
        let mut s = RespState::new(4)?;
        for (p, slot) in [(10, 0), (11, 1), (12, 0)] {
            assert_eq!(s.keep(res(p, p), 2), slot);
        }
        s.answer(1, 11);
        s.answer(0, 12);
        assert_eq!(s.cur, Some(1));
        assert_eq!(s.keep(res(13, 13), 4), 2);
        s.answer(2, 13);
        assert_eq!(
            (s.find(11), s.find(12), s.find(13)),
            (Some(0), Some(1), Some(2))
        );
        assert_eq!(s.cur, Some(0));
        for want in [Some(11), Some(12), Some(13), None] {
            assert_eq!(s.cur.map(|c| s.res[c].first_psn), want);
            s.next_answer();
        }
        Ok(())
    }

    /// Beyond the limit the oldest resource is replaced, and the answer being sent for
    /// it goes with it.
    #[test]
    fn keep_replaces_the_oldest() -> Result {
        let mut s = RespState::new(2)?;
        assert_eq!(s.keep(res(10, 10), 2), 0);
        assert_eq!(s.keep(res(11, 11), 2), 1);
        s.answer(0, 10);
        assert_eq!(s.keep(res(12, 12), 2), 0);
        assert_eq!(s.cur, None);
        assert_eq!(s.keep(res(13, 13), 2), 1);
        assert_eq!(s.keep(res(14, 14), 2), 0);
        assert_eq!(
            (s.find(12), s.find(13), s.find(14)),
            (None, Some(1), Some(0))
        );
        s.reset(0);
        assert_eq!((s.res.len(), s.cur), (0, None));
        Ok(())
    }
}
