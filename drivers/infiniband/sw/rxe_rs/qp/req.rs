// SPDX-License-Identifier: GPL-2.0

//! The requester: turns the send queue's work requests into packets.
//!
//! It runs when a process rings the doorbell, under the QP's lock one packet at a time
//! (`RxeQp::run_requester` sends each packet once the lock is released). Each WQE is
//! copied out of the ring and checked before anything of it is used ([`SendWqe`]);
//! payload is gathered from the inline data or through the SGEs' local keys, which
//! must belong to the QP's PD.
//!
//! Datagram (UD) sends are one packet per WQE, completed as soon as the packet is built.
//! Connected QPs (RC, UC) send SENDs (with immediate data or an rkey to invalidate) and
//! RDMA WRITEs (with immediate data), cut into packets of the path MTU; RC QPs also RDMA
//! READs, atomics (compare-and-swap, fetch-and-add), ATOMIC WRITEs and FLUSHes, whose
//! responses the completer places (see `comp`). Local operations (LOCAL_INV, REG_MR,
//! BIND_MW) are carried out in the run that reaches them, with no packet.
//!
//! What is decided about a WQE when it is started (its opcode, length and PSN range) is
//! kept in the QP's own memory ([`SentWqe`]); the ring slot is read again, and checked
//! again against that record, for every packet, so a WQE can be sent again from its
//! start when the responder asks for it (go-back-N) and a process that rewrites a slot
//! in flight only garbles its own data. A UC WQE
//! completes when its last packet is built; an RC WQE stays in the ring until the
//! responder acknowledges its last PSN (see `comp`).
//!
//! A WQE the QP cannot carry out ends in an error completion and moves the QP to the
//! error state, which flushes the rest.

use super::odp::OdpWait;
use super::{QpInner, QpShared, RxeQp, GSI_QKEY};
use crate::ib::task::Task;
use crate::ib::verbs::{SendFlag, SendFlags, WcOpcode, WcStatus, WrOpcode};
use crate::ib::{
    device::Device,
    netdev::NetDevice,
    qp::{AddressVector, QpState, QpType},
};
use crate::loopback::LOOP_BACKLOG;
use crate::mr::{self, Fault};
use crate::param;
use crate::roce::{
    frame::Ext,
    headers::{AtomicEth, Bth, Deth, Feth, Reth},
    psn,
};
use crate::stats::Counter;
use crate::wc::Completion;
use crate::wqe::{for_each_piece, SendWqe, MAX_SEND_WQE};
use crate::xmit::{self, BuildError, Outgoing};
use crate::RxeRs;
use core::ops::ControlFlow;
use kernel::{
    cpu::CpuId,
    prelude::*,
    sync::{atomic::Relaxed, Arc},
};

/// How many PSNs may be sent and not yet acknowledged (rxe allows as many). With 256,
/// bursts overran a link between two guests: a tenth of the packets were lost.
const WINDOW: u32 = 128;
/// An acknowledgement is asked for at least every this many packets.
const ACK_EVERY: u32 = 32;

/// What was decided about a connected QP's WQE when it was started.
#[derive(Clone, Copy, Default)]
pub(crate) struct SentWqe {
    pub(crate) wr_id: u64,
    pub(crate) opcode: WrOpcode,
    pub(crate) flags: SendFlags,
    pub(crate) length: u32,
    pub(crate) first_psn: u32,
    pub(crate) last_psn: u32,
    /// A local operation (REG_MR, LOCAL_INV, BIND_MW), carried out when it was started:
    /// it is not carried out again if the WQEs before it are sent again.
    pub(crate) local: bool,
}

/// The requester's state of a connected QP.
pub(crate) struct ReqState {
    /// The ring index of the next WQE to start.
    pub(crate) next: u32,
    /// The WQE being sent, and how many of its bytes are sent.
    pub(crate) cur: Option<(u32, u32)>,
    /// Packets sent since the last one that asked for an acknowledgement.
    since_ack: u32,
    /// Per ring slot: the record of the WQE started in it.
    pub(crate) sent: KVVec<SentWqe>,
    /// RDMA READs and atomics started and not completed.
    pub(crate) rd_pending: u32,
    /// Response packets of the oldest WQE (a READ) received so far.
    pub(crate) read_got: u32,
    /// The PSN of a lost READ response that was asked for again at once (once per
    /// PSN; a second loss there waits for the acknowledgement timeout).
    pub(crate) read_retry: Option<u32>,
    /// Someone is running the requester; `again` asks it to look once more.
    pub(crate) busy: bool,
    pub(crate) again: bool,
}

impl ReqState {
    /// The state of a QP whose send ring has `slots` slots (0 for UD, which keeps none).
    pub(crate) fn new(slots: usize) -> Result<Self> {
        let mut sent = KVVec::new();
        // As large as the process asked the ring to be: charged to its memory cgroup.
        sent.extend_with(slots, SentWqe::default(), GFP_KERNEL_ACCOUNT)?;
        Ok(Self {
            next: 0,
            cur: None,
            since_ack: 0,
            rd_pending: 0,
            read_got: 0,
            read_retry: None,
            sent,
            busy: false,
            again: false,
        })
    }

    /// Back to the empty ring of RESET.
    pub(crate) fn reset(&mut self) {
        for r in self.sent.iter_mut() {
            r.local = false;
        }
        self.next = 0;
        self.cur = None;
        self.since_ack = 0;
        self.rd_pending = 0;
        self.read_got = 0;
        self.read_retry = None;
    }

    /// The record of the WQE in slot `index`.
    pub(crate) fn record(&self, index: u32) -> SentWqe {
        self.sent.get(index as usize).copied().unwrap_or_default()
    }
}

/// What the requester did with one step.
pub(crate) enum Step {
    /// A packet to send.
    Packet(Outgoing),
    /// A WQE ended (in error) without a packet; look again.
    Again,
    /// Nothing to do.
    Idle,
    /// A packet is to go to the device's own loopback queue, which holds as many as
    /// the requesters may add (or the run spent its budget): the rest waits for the
    /// QP's work item.
    Backlog,
}

impl RxeQp {
    /// Runs the requester on the CPU the QP's doorbell last rang on: at once if that is
    /// this CPU (or none rang), else as the QP's work item there. Called from a bottom
    /// half, in an RCU read-side section.
    pub(crate) fn kick_requester(dev: &Device<RxeRs>, shared: &Arc<Task<QpShared>>) {
        match CpuId::from_u32(shared.tx_cpu.load(Relaxed)) {
            Some(cpu) if cpu != CpuId::current() => {
                {
                    let mut inner = shared.inner.lock();
                    // Nothing queues a dead QP's work item (see `destroy`).
                    if inner.dead {
                        return;
                    }
                    inner.kick = true;
                }
                dev.wq.run_on(shared, cpu);
            }
            _ => Self::run_requester(dev, shared),
        }
    }

    /// Runs the requester until the send queue has nothing more to send now, or for
    /// [`param::RUN_BUDGET`] steps: then the QP's work item runs it again.
    ///
    /// Packets are built under the QP's lock and sent after it is released, in an RCU
    /// read-side section (see `destroy`). One caller at a time runs it, so packets leave
    /// in PSN order; a caller that finds it running asks the runner to look again.
    pub(crate) fn run_requester(dev: &Device<RxeRs>, shared: &Arc<Task<QpShared>>) {
        let ndev = &dev.ndev;
        {
            let mut inner = shared.inner.lock();
            if inner.req.busy {
                inner.req.again = true;
                return;
            }
            inner.req.busy = true;
        }
        let _rcu = kernel::sync::rcu::read_lock();
        let mut timeout = None;
        let mut budget = param::RUN_BUDGET;
        loop {
            let step = {
                let mut inner = shared.inner.lock();
                let go = !inner.dead && inner.state == QpState::Rts && !inner.rnr_wait;
                let spent = budget == 0;
                let step = match go {
                    true if spent => Step::Backlog,
                    true => step(dev, ndev, shared, &mut inner),
                    false => Step::Idle,
                };
                budget = budget.saturating_sub(1);
                match step {
                    Step::Backlog => {
                        // The process may keep posting for ever, or the device's own
                        // packets wait to be received: the rest is the work item's,
                        // now or once the loopback queue has room (nothing queues a
                        // dead QP's, see `destroy`).
                        inner.req.busy = false;
                        inner.req.again = false;
                        inner.kick = true;
                        drop(inner);
                        if spent {
                            dev.bulk_wq.run(shared);
                        } else if !dev.lo.wait(shared.qp_num()) {
                            dev.wq.run(shared);
                        }
                        break;
                    }
                    Step::Idle if go && inner.req.again => {
                        inner.req.again = false;
                        Step::Again
                    }
                    Step::Idle => {
                        inner.req.busy = false;
                        inner.req.again = false;
                        Step::Idle
                    }
                    Step::Packet(_) if shared.qp_type == QpType::Rc => {
                        timeout = timeout_ms(inner.attrs.timeout);
                        step
                    }
                    other => other,
                }
            };
            match step {
                Step::Packet(out) => crate::xmit::send(dev, ndev, &shared.routes, out),
                Step::Again => continue,
                Step::Idle | Step::Backlog => break,
            }
        }
        // Packets await acknowledgement: check on them when the timeout runs out. Not
        // for a dead QP: its destroy may have stopped the timer already (from the QP's
        // work item, a run goes on while the destroy cancels the timer).
        if let Some(ms) = timeout {
            let inner = shared.inner.lock();
            if !inner.dead {
                dev.wq.run_after(shared, ms);
            }
        }
    }
}

/// The acknowledgement timeout of a QP's `timeout` attribute (4.096 us * 2^timeout),
/// in milliseconds; `None` for 0, which means "wait for ever".
pub(super) fn timeout_ms(timeout: u8) -> Option<u32> {
    if timeout == 0 {
        return None;
    }
    let ns = 4096u64 << timeout.min(31);
    Some(ns.div_ceil(1_000_000).min(u64::from(u32::MAX)) as u32)
}

/// Whether a packet to `av` would go to the device's loopback queue while it is full.
fn backlogged(dev: &Device<RxeRs>, av: &AddressVector) -> bool {
    av.own_dest().is_some() && dev.lo.backlog() >= LOOP_BACKLOG
}

/// Takes the next step of the requester of a QP in RTS.
pub(crate) fn step(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
) -> Step {
    if matches!(shared.qp_type, QpType::Rc | QpType::Uc) {
        return connected(dev, ndev, shared, inner);
    }
    // The WQE stays at the head until it is sent or fails: a datagram whose payload
    // waits for pages of an on-demand MR is sent from it once they are mapped.
    let head = inner.sq.consumer();
    if head == inner.sq.producer() {
        return Step::Idle;
    }
    let mut bytes = [0u8; MAX_SEND_WQE];
    inner.sq.read_into(head, &mut bytes);
    let wqe = match SendWqe::parse(&bytes, shared.cap.max_send_sge, shared.cap.max_inline_data) {
        Ok(w) => w,
        Err(m) => {
            fail(dev, shared, inner, head, m.wr_id, m.status);
            return Step::Again;
        }
    };
    ud(dev, ndev, shared, inner, head, &wqe)
}

/// The opcode of a connected QP's packet: `base` for the transport, the WQE's opcode
/// (a SEND or an RDMA WRITE, with or without immediate data or invalidation: checked
/// before) and the packet's place in the message.
fn packet_opcode(base: u8, wr_opcode: WrOpcode, first: bool, last: bool) -> u8 {
    let send = matches!(
        wr_opcode,
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv
    );
    let op = match (send, first, last) {
        (true, true, false) => 0x00,
        (true, false, false) => 0x01,
        (true, false, true) => match wr_opcode {
            WrOpcode::SendWithImm => 0x03,
            WrOpcode::SendWithInv => 0x16,
            _ => 0x02,
        },
        (true, true, true) => match wr_opcode {
            WrOpcode::SendWithImm => 0x05,
            WrOpcode::SendWithInv => 0x17,
            _ => 0x04,
        },
        (false, true, false) => 0x06,
        (false, false, false) => 0x07,
        (false, false, true) if wr_opcode == WrOpcode::RdmaWrite => 0x08,
        (false, false, true) => 0x09,
        (false, true, true) if wr_opcode == WrOpcode::RdmaWrite => 0x0a,
        (false, true, true) => 0x0b,
    };
    base | op
}

/// Whether a WQE opcode is a local operation (no packet: it acts on the device's keys).
pub(crate) fn is_local(opcode: WrOpcode) -> bool {
    matches!(
        opcode,
        WrOpcode::LocalInv | WrOpcode::BindMw | WrOpcode::RegMr
    )
}

/// Carries out a local operation of the QP; `Err` holds the completion status.
fn local_op(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    wqe: &SendWqe<'_>,
) -> Result<(), WcStatus> {
    match wqe.opcode {
        WrOpcode::LocalInv => {
            let (rkey, qpn) = (wqe.invalidate_rkey(), shared.qp_num());
            mr::invalidate(dev, rkey, shared.pd, qpn).map_err(|_| WcStatus::LocQpOpErr)
        }
        WrOpcode::RegMr => {
            mr::register(dev, &wqe.reg(), shared.pd).map_err(|_| WcStatus::LocQpOpErr)
        }
        _ => mr::bind(dev, &wqe.bind(), shared.pd, shared.qp_num())
            .map(|_| ())
            .map_err(|_| WcStatus::MwBindErr),
    }
}

/// The next packet of a connected QP.
fn connected(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
) -> Step {
    if has_unsent(inner) && backlogged(dev, &inner.attrs.av) {
        return Step::Backlog;
    }
    if inner.req.cur.is_none() && inner.req.next == inner.sq.producer() {
        return Step::Idle;
    }
    // The WQE's copy, which `wqe` borrows.
    let mut buf = [0u8; MAX_SEND_WQE];
    let (index, offset, rec, wqe) = match inner.req.cur {
        Some((index, offset)) => {
            let Some((rec, wqe)) = current(dev, shared, inner, index, &mut buf) else {
                return Step::Again;
            };
            (index, offset, rec, wqe)
        }
        None => match start(dev, shared, inner, &mut buf) {
            ControlFlow::Continue((index, wqe)) => (index, 0, inner.req.record(index), wqe),
            ControlFlow::Break(step) => return step,
        },
    };
    if is_read_or_atomic(rec.opcode) {
        read_or_atomic(dev, ndev, shared, inner, (index, offset), rec, &wqe)
    } else {
        send_or_write(dev, ndev, shared, inner, (index, offset), rec, &wqe)
    }
}

/// Starts the next WQE of a connected QP (one is posted), copied into `buf`:
/// `Continue` with its index and the WQE once its record is made and its first packet
/// may be built, or `Break` with what the requester does instead (the window or a
/// fence holds it, or it was completed without a packet: failed, or a local operation).
fn start<'b>(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    buf: &'b mut [u8; MAX_SEND_WQE],
) -> ControlFlow<Step, (u32, SendWqe<'b>)> {
    let index = inner.req.next;
    // Sending again after a NAK or a timeout: a local operation was carried out
    // already. It completes here if the WQEs before it were acknowledged meanwhile:
    // no acknowledgement will come for it.
    let rec = inner.req.record(index);
    if rec.local {
        inner.req.next = inner.sq.next_index(index);
        if index == inner.sq.consumer() {
            complete_head(dev, shared, inner, rec);
        }
        return ControlFlow::Break(Step::Again);
    }
    // Stop while the window of unacknowledged PSNs is full, or while a run's budget
    // of WQEs is started and not complete: local operations take no PSN, and without
    // a bound a process could start a ring's worth of them behind one unanswered SEND,
    // all of which `fail` then completes at once under the QP's lock.
    if index != inner.sq.consumer() {
        let oldest = inner.req.record(inner.sq.consumer()).first_psn;
        // Unsigned: a READ may span half the PSN space or more, past which a signed
        // distance reads as negative.
        if psn::ahead(inner.req_psn, oldest) >= WINDOW
            || inner.sq.past_consumer(index) >= param::RUN_BUDGET
        {
            return ControlFlow::Break(Step::Idle);
        }
    }
    inner.sq.read_into(index, buf);
    let wqe = match SendWqe::parse(buf, shared.cap.max_send_sge, shared.cap.max_inline_data) {
        Ok(w) => w,
        Err(m) => {
            fail(dev, shared, inner, index, m.wr_id, m.status);
            return ControlFlow::Break(Step::Again);
        }
    };
    if !allowed(shared.qp_type, inner.sq.is_user(), wqe.opcode) {
        fail(dev, shared, inner, index, wqe.wr_id, WcStatus::LocQpOpErr);
        return ControlFlow::Break(Step::Again);
    }
    if is_local(wqe.opcode) {
        return ControlFlow::Break(start_local(dev, shared, inner, index, &wqe));
    }
    may_start(dev, shared, inner, index, &wqe)?;
    record_start(inner, index, &wqe);
    ControlFlow::Continue((index, wqe))
}

/// Whether a QP of type `qp_type` may carry a WQE of `opcode` (`is_user`: posted by a
/// process).
fn allowed(qp_type: QpType, is_user: bool, opcode: WrOpcode) -> bool {
    let rc = qp_type == QpType::Rc;
    match opcode {
        WrOpcode::Send
        | WrOpcode::SendWithImm
        | WrOpcode::RdmaWrite
        | WrOpcode::RdmaWriteWithImm => true,
        WrOpcode::LocalInv | WrOpcode::BindMw => true,
        WrOpcode::RdmaRead
        | WrOpcode::AtomicCmpAndSwp
        | WrOpcode::AtomicFetchAndAdd
        | WrOpcode::SendWithInv
        | WrOpcode::Flush
        | WrOpcode::AtomicWrite => rc,
        // Only a kernel consumer registers (the request names its MR), and
        // only kernel consumers have READ with invalidate.
        WrOpcode::RegMr => !is_user,
        WrOpcode::RdmaReadWithInv => rc && !is_user,
    }
}

/// Starts a local operation at `index`: carries it out, and completes it with the
/// WQE before it (at once if there is none waiting).
fn start_local(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    index: u32,
    wqe: &SendWqe<'_>,
) -> Step {
    // A fenced one waits for the READs and atomics before it.
    if wqe.flags.contains(SendFlag::Fence) && inner.req.rd_pending > 0 {
        return Step::Idle;
    }
    if let Err(status) = local_op(dev, shared, wqe) {
        fail(dev, shared, inner, index, wqe.wr_id, status);
        return Step::Again;
    }
    // It takes no PSN, and completes with the WQE before it (at once if
    // there is none waiting).
    let rec = SentWqe {
        wr_id: wqe.wr_id,
        opcode: wqe.opcode,
        flags: wqe.flags,
        length: 0,
        first_psn: inner.req_psn,
        last_psn: psn::add(inner.req_psn, psn::PSN_MASK),
        local: true,
    };
    if let Some(slot) = inner.req.sent.get_mut(index as usize) {
        *slot = rec;
    }
    inner.req.next = inner.sq.next_index(index);
    if index == inner.sq.consumer() {
        complete_head(dev, shared, inner, rec);
    }
    Step::Again
}

/// Whether the WQE at `index` may start now: `Break` when it fails (an atomic whose
/// buffer is not its 8-byte operand: LOC_LEN_ERR) or must wait (the READ and atomic
/// limit, a fence).
fn may_start(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    index: u32,
    wqe: &SendWqe<'_>,
) -> ControlFlow<Step> {
    if is_atomic(wqe.opcode) && wqe.length != 8 {
        fail(dev, shared, inner, index, wqe.wr_id, WcStatus::LocLenErr);
        return ControlFlow::Break(Step::Again);
    }
    if is_read_or_atomic(wqe.opcode) {
        // No more outstanding than the QP may have in flight.
        if inner.req.rd_pending >= u32::from(inner.attrs.max_rd_atomic).max(1) {
            return ControlFlow::Break(Step::Idle);
        }
    }
    // A fenced WQE waits for the READs and atomics before it.
    if wqe.flags.contains(SendFlag::Fence) && inner.req.rd_pending > 0 {
        return ControlFlow::Break(Step::Idle);
    }
    ControlFlow::Continue(())
}

/// Records the start of the WQE at `index`: the PSNs it takes, and one more READ or
/// atomic outstanding.
fn record_start(inner: &mut QpInner, index: u32, wqe: &SendWqe<'_>) {
    // A READ takes one PSN per response packet; the other requests answered
    // with a response (atomics, FLUSH, ATOMIC WRITE) one.
    let packets = if is_read_or_atomic(wqe.opcode) && !is_read(wqe.opcode) {
        1
    } else {
        wqe.length.div_ceil(inner.mtu_bytes()).max(1)
    };
    if is_read_or_atomic(wqe.opcode) {
        inner.req.rd_pending += 1;
    }
    let first_psn = inner.req_psn;
    if let Some(slot) = inner.req.sent.get_mut(index as usize) {
        *slot = SentWqe {
            wr_id: wqe.wr_id,
            opcode: wqe.opcode,
            flags: wqe.flags,
            length: wqe.length,
            first_psn,
            last_psn: psn::add(first_psn, packets - 1),
            local: false,
        };
    }
}

/// The WQE at `index` and its record, read again from the ring into `buf`: it must
/// still be the WQE that was started (its process can rewrite the slot meanwhile). One
/// that changed fails, and `None` is returned.
fn current<'b>(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    index: u32,
    buf: &'b mut [u8; MAX_SEND_WQE],
) -> Option<(SentWqe, SendWqe<'b>)> {
    let rec = inner.req.record(index);
    inner.sq.read_into(index, buf);
    match SendWqe::parse(buf, shared.cap.max_send_sge, shared.cap.max_inline_data) {
        Ok(w) if w.opcode == rec.opcode && w.length == rec.length && w.flags == rec.flags => {
            Some((rec, w))
        }
        _ => {
            fail(dev, shared, inner, index, rec.wr_id, WcStatus::LocQpOpErr);
            None
        }
    }
}

/// The next packet of a SEND or RDMA WRITE of a connected QP: the one at `offset` of
/// the WQE at `index`.
fn send_or_write(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    (index, offset): (u32, u32),
    rec: SentWqe,
    wqe: &SendWqe<'_>,
) -> Step {
    let payload = (rec.length - offset).min(inner.mtu_bytes());
    let first = offset == 0;
    let last = offset + payload == rec.length;
    let rc = shared.qp_type == QpType::Rc;
    let since_ack = inner.req.since_ack;
    inner.req.since_ack += 1;
    let ack_req = rc && (last || inner.req.since_ack >= ACK_EVERY);
    if ack_req {
        inner.req.since_ack = 0;
    }
    let bth = Bth {
        opcode: packet_opcode(if rc { 0x00 } else { 0x20 }, rec.opcode, first, last),
        se: last && rec.flags.contains(SendFlag::Solicited) && rec.opcode != WrOpcode::RdmaWrite,
        pkey: crate::param::DEFAULT_PKEY,
        dest_qp: inner.attrs.dest_qp_num,
        ack_req,
        psn: inner.req_psn,
        ..Default::default()
    };
    let ext = Ext {
        reth: Reth {
            va: wqe.remote_addr,
            rkey: wqe.rkey,
            len: rec.length,
        },
        imm: wqe.ex,
        ieth: wqe.invalidate_rkey(),
        ..Default::default()
    };
    let av = inner.attrs.av;
    let mut fault = None;
    let built = xmit::build(
        ndev,
        &av,
        shared.qp_num(),
        &bth,
        &ext,
        payload as usize,
        |out| gather_at(dev, shared, wqe, offset as usize, out, &mut fault),
    );
    if let Some(f) = fault {
        if RxeQp::fault(dev, shared, inner, f, OdpWait::Requester) {
            // The same packet is built once the pages are in.
            inner.req.cur = Some((index, offset));
            inner.req.since_ack = since_ack;
            return Step::Idle;
        }
    }
    let out = match built {
        Ok(o) => o,
        Err(BuildError::Payload(status)) => {
            fail(dev, shared, inner, index, rec.wr_id, status);
            return Step::Again;
        }
        Err(_) => {
            fail(dev, shared, inner, index, rec.wr_id, WcStatus::LocQpOpErr);
            return Step::Again;
        }
    };
    inner.req_psn = psn::add(inner.req_psn, 1);
    if last {
        inner.req.cur = None;
        inner.req.next = inner.sq.next_index(index);
        if !rc {
            // Nothing acknowledges a UC message: it is done once it is sent.
            complete_head(dev, shared, inner, rec);
        }
    } else {
        inner.req.cur = Some((index, offset + payload));
    }
    Step::Packet(out)
}

/// Whether a connected QP has WQEs (or the rest of one) not sent yet.
pub(crate) fn has_unsent(inner: &QpInner) -> bool {
    inner.req.cur.is_some() || inner.req.next != inner.sq.producer()
}

/// Whether a WQE opcode is an atomic.
pub(crate) fn is_atomic(opcode: WrOpcode) -> bool {
    matches!(
        opcode,
        WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd
    )
}

/// Whether a WQE is completed by a response of its own rather than an ACK: READ and
/// atomics (answered with data), FLUSH and ATOMIC WRITE (answered with an empty READ
/// response). All of them take a responder resource at the peer.
pub(crate) fn is_read_or_atomic(opcode: WrOpcode) -> bool {
    matches!(opcode, WrOpcode::Flush | WrOpcode::AtomicWrite)
        || is_read(opcode)
        || is_atomic(opcode)
}

/// Whether a WQE opcode is an RDMA READ (with or without invalidation).
pub(crate) fn is_read(opcode: WrOpcode) -> bool {
    matches!(opcode, WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv)
}

/// The one request packet of an RDMA READ, an atomic, a FLUSH or an ATOMIC WRITE.
fn read_or_atomic(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    (index, offset): (u32, u32),
    rec: SentWqe,
    wqe: &SendWqe<'_>,
) -> Step {
    // A READ asked for again after lost responses asks for what it still lacks:
    // `offset` bytes (whole responses) were placed already.
    let mtu = inner.mtu_bytes();
    let offset = if is_read(rec.opcode) && offset < rec.length {
        offset
    } else {
        0
    };
    let Some((opcode, ext, data)) = request(&rec, wqe, offset) else {
        fail(dev, shared, inner, index, rec.wr_id, WcStatus::LocQpOpErr);
        return Step::Again;
    };
    inner.req.since_ack = 0;
    let bth = Bth {
        opcode,
        pkey: crate::param::DEFAULT_PKEY,
        dest_qp: inner.attrs.dest_qp_num,
        ack_req: true,
        psn: psn::add(rec.first_psn, offset / mtu),
        ..Default::default()
    };
    let av = inner.attrs.av;
    let len = data.map_or(0, |d| d.len());
    let built = xmit::build(ndev, &av, shared.qp_num(), &bth, &ext, len, |out| {
        if let Some(d) = data {
            out.copy_from_slice(&d);
        }
        Ok::<(), WcStatus>(())
    });
    let Ok(out) = built else {
        fail(dev, shared, inner, index, rec.wr_id, WcStatus::LocQpOpErr);
        return Step::Again;
    };
    // The responses use the PSNs up to the last.
    inner.req_psn = psn::add(rec.last_psn, 1);
    inner.req.cur = None;
    inner.req.next = inner.sq.next_index(index);
    Step::Packet(out)
}

/// The opcode, extended headers and payload (an ATOMIC WRITE's 8 bytes) of the request
/// packet of a READ, atomic, FLUSH or ATOMIC WRITE; a READ asks from byte `offset` on.
/// `None` if the READ's address would pass 2^64.
fn request(rec: &SentWqe, wqe: &SendWqe<'_>, offset: u32) -> Option<(u8, Ext, Option<[u8; 8]>)> {
    Some(match rec.opcode {
        WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv => (0x0c, read_ext(rec, wqe, offset)?, None),
        WrOpcode::Flush => (0x1c, flush_ext(rec, wqe), None),
        WrOpcode::AtomicWrite => (0x1d, atomic_write_ext(wqe), Some(wqe.atomic_write_data())),
        WrOpcode::AtomicCmpAndSwp => (0x13, atomic_ext(wqe, true), None),
        _ => (0x14, atomic_ext(wqe, false), None),
    })
}

/// The RETH of a READ request for the bytes from `offset` on.
fn read_ext(rec: &SentWqe, wqe: &SendWqe<'_>, offset: u32) -> Option<Ext> {
    // The responder took the first request, so the address is below 2^64,
    // unless the process rewrote the slot meanwhile.
    let va = mr::iova_add(wqe.remote_addr, u64::from(offset)).ok()?;
    Some(Ext {
        reth: Reth {
            va,
            rkey: wqe.rkey,
            len: rec.length - offset,
        },
        ..Default::default()
    })
}

/// The RETH and FETH of a FLUSH.
fn flush_ext(rec: &SentWqe, wqe: &SendWqe<'_>) -> Ext {
    let (rkey, placement, selectivity) = wqe.flush();
    Ext {
        reth: Reth {
            va: wqe.remote_addr,
            rkey,
            len: rec.length,
        },
        feth: Feth {
            selectivity,
            placement,
        },
        ..Default::default()
    }
}

/// The RETH of an ATOMIC WRITE (8 bytes).
fn atomic_write_ext(wqe: &SendWqe<'_>) -> Ext {
    Ext {
        reth: Reth {
            va: wqe.remote_addr,
            rkey: wqe.rkey,
            len: 8,
        },
        ..Default::default()
    }
}

/// The atomic ETH of a compare and swap (`cmp`) or a fetch and add.
fn atomic_ext(wqe: &SendWqe<'_>, cmp: bool) -> Ext {
    Ext {
        atomic: AtomicEth {
            va: wqe.remote_addr,
            rkey: wqe.atomic_rkey,
            swap_add: if cmp { wqe.swap } else { wqe.compare_add },
            compare: if cmp { wqe.compare_add } else { 0 },
        },
        ..Default::default()
    }
}

/// Writes `data` into a send WQE's buffers from byte `at` on (the data of a READ
/// response or an atomic's original value). Fails as [`mr::write_local`].
pub(crate) fn scatter_local(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    wqe: &SendWqe<'_>,
    (at, data): (usize, &[u8]),
    fault: &mut Option<Fault>,
) -> Result<(), WcStatus> {
    for_each_piece(wqe.sges(), at, data.len(), |lkey, addr, r| {
        mr::write_local(dev, (lkey, shared.pd, addr), &data[r], fault)
    })
}

/// Whether a work request is a SEND (with immediate or invalidate too).
fn is_send(opcode: WrOpcode) -> bool {
    matches!(
        opcode,
        WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv
    )
}

/// Completes the oldest WQE of the send queue successfully; `rec` is its record.
pub(crate) fn complete_head(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    rec: SentWqe,
) {
    if let Some(slot) = inner.req.sent.get_mut(inner.sq.consumer() as usize) {
        slot.local = false;
    }
    inner.sq.advance();
    if is_read_or_atomic(rec.opcode) {
        inner.req.rd_pending = inner.req.rd_pending.saturating_sub(1);
        inner.req.read_got = 0;
    }
    if is_send(rec.opcode) {
        dev.counters.inc(Counter::RdmaSends);
    }
    if shared.sq_sig_all || rec.flags.contains(SendFlag::Signaled) {
        let c = Completion {
            wr_id: rec.wr_id,
            status: WcStatus::Success,
            opcode: match rec.opcode {
                WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => WcOpcode::RdmaWrite,
                WrOpcode::RdmaRead | WrOpcode::RdmaReadWithInv => WcOpcode::RdmaRead,
                WrOpcode::AtomicCmpAndSwp => WcOpcode::CompSwap,
                WrOpcode::AtomicFetchAndAdd => WcOpcode::FetchAdd,
                WrOpcode::LocalInv => WcOpcode::LocalInv,
                WrOpcode::BindMw => WcOpcode::BindMw,
                WrOpcode::RegMr => WcOpcode::RegMr,
                WrOpcode::Flush => WcOpcode::Flush,
                WrOpcode::AtomicWrite => WcOpcode::AtomicWrite,
                _ => WcOpcode::Send,
            },
            byte_len: if is_atomic(rec.opcode) { 8 } else { rec.length },
            qp_num: shared.qp_num(),
            wc_qp: shared.wc_qp,
            ..Default::default()
        };
        RxeQp::complete(dev, shared, inner, false, &c, false);
    }
}

/// Copies `out.len()` bytes of a WQE's data, from byte `at` of the message on. Fails as
/// [`mr::read_local`].
fn gather_at(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    wqe: &SendWqe<'_>,
    at: usize,
    out: &mut [u8],
    fault: &mut Option<Fault>,
) -> Result<(), WcStatus> {
    if wqe.is_inline() {
        let data = wqe.inline_data();
        let src = data
            .get(at..)
            .and_then(|d| d.get(..out.len()))
            .ok_or(WcStatus::LocLenErr)?;
        out.copy_from_slice(src);
        return Ok(());
    }
    for_each_piece(wqe.sges(), at, out.len(), |lkey, addr, r| {
        mr::read_local(dev, (lkey, shared.pd, addr), &mut out[r], fault)
    })
}

/// Ends the WQE in send queue slot `index` (whose `wr_id` is given) in error, and the
/// QP with it. The send queue completes in order and each WQE once: the WQEs before it
/// (sent and not acknowledged yet) complete first, with a flush error since the QP is
/// entering the error state, then it with `status`, then the error state flushes the
/// rest.
pub(crate) fn fail(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    index: u32,
    wr_id: u64,
    status: WcStatus,
) {
    shared.flush_ring(&mut inner.sq, Some(index), &shared.send_cq, &dev.wq);
    if inner.sq.consumer() == index && index != inner.sq.producer() {
        inner.sq.advance();
    }
    let c = shared.error_completion(wr_id, status);
    RxeQp::complete(dev, shared, inner, false, &c, false);
    super::RxeQp::enter_err(dev, shared, inner);
}

/// One datagram.
fn ud(
    dev: &Device<RxeRs>,
    ndev: &NetDevice,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    head: u32,
    wqe: &SendWqe<'_>,
) -> Step {
    let imm = match wqe.opcode {
        WrOpcode::Send => false,
        WrOpcode::SendWithImm => true,
        _ => {
            fail(dev, shared, inner, head, wqe.wr_id, WcStatus::LocQpOpErr);
            return Step::Again;
        }
    };
    // A datagram is one packet: at most the path MTU.
    if wqe.length > dev.mtu_bytes() {
        fail(dev, shared, inner, head, wqe.wr_id, WcStatus::LocLenErr);
        return Step::Again;
    }
    // librxe names the address handle by number (it always gets one from the device),
    // which must be one of the QP's PD.
    let ah = dev.ah_table.get(wqe.ah_num);
    let Some(av) = ah.as_ref().and_then(|ah| ah.av_for(shared.pd)) else {
        fail(dev, shared, inner, head, wqe.wr_id, WcStatus::LocQpOpErr);
        return Step::Again;
    };
    if backlogged(dev, av) {
        // The WQE stays at the head.
        return Step::Backlog;
    }
    let qp_num = shared.qp_num();
    // A Q_Key with its top bit set means "the QP's own" (the GSI QP's is fixed).
    let qkey = if wqe.remote_qkey & 0x8000_0000 != 0 {
        if shared.qp_type == QpType::Gsi {
            GSI_QKEY
        } else {
            inner.attrs.qkey
        }
    } else {
        wqe.remote_qkey
    };
    let bth = Bth {
        opcode: if imm { 0x65 } else { 0x64 },
        se: wqe.flags.contains(SendFlag::Solicited),
        pkey: crate::param::DEFAULT_PKEY,
        dest_qp: wqe.remote_qpn & psn::PSN_MASK,
        psn: inner.req_psn,
        ..Default::default()
    };
    let ext = Ext {
        deth: Deth {
            qkey,
            src_qp: qp_num,
        },
        imm: wqe.ex,
        ..Default::default()
    };
    let mut fault = None;
    let built = xmit::build(ndev, av, qp_num, &bth, &ext, wqe.length as usize, |out| {
        gather_at(dev, shared, wqe, 0, out, &mut fault)
    });
    if let Some(f) = fault {
        if RxeQp::fault(dev, shared, inner, f, OdpWait::Requester) {
            // The WQE stays at the head; it is sent once the pages are in.
            return Step::Idle;
        }
    }
    let out = match built {
        Ok(o) => o,
        Err(BuildError::Payload(status)) => {
            fail(dev, shared, inner, head, wqe.wr_id, status);
            return Step::Again;
        }
        Err(_) => {
            fail(dev, shared, inner, head, wqe.wr_id, WcStatus::LocQpOpErr);
            return Step::Again;
        }
    };
    inner.sq.advance();
    inner.req_psn = psn::add(inner.req_psn, 1);
    dev.counters.inc(Counter::RdmaSends);
    if shared.sq_sig_all || wqe.flags.contains(SendFlag::Signaled) {
        let c = Completion {
            wr_id: wqe.wr_id,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            byte_len: wqe.length,
            qp_num,
            wc_qp: shared.wc_qp,
            ..Default::default()
        };
        RxeQp::complete(dev, shared, inner, false, &c, false);
    }
    Step::Packet(out)
}
