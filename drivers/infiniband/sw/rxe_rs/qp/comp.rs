// SPDX-License-Identifier: GPL-2.0

//! The completer: acknowledgements that come back to an RC QP's requester.
//!
//! An ACK for PSN `p` completes, oldest first, every WQE whose last PSN is `p` or
//! before, up to the first RDMA READ or atomic: those complete only with their own
//! responses, whose data (or original value) goes into the WQE's buffers, in order. A
//! sequence NAK for `p` completes what is before `p` and sends the rest again from the
//! WQE holding `p` (go-back-N). An RNR NAK does the same once the responder
//! had time to post receives, while `rnr_retry` allows; the other NAKs end the oldest
//! WQE with the error they name and move the QP to the error state. Responses for PSNs
//! that were never sent, and anything that arrives outside RTS, SQD and SQE, are
//! dropped.

use super::odp::OdpWait;
use super::req::{
    complete_head, fail, is_atomic, is_read, is_read_or_atomic, scatter_local, SentWqe,
};
use super::{QpInner, QpShared, RxeQp};
use crate::ib::verbs::{WcStatus, WrOpcode};
use crate::ib::{
    device::Device,
    qp::{QpState, QpType},
    task::Task,
};
use crate::mr::{self, Fault};
use crate::roce::{headers::syndrome, opcode::flag, packet::Packet, psn};
use crate::stats::Counter;
use crate::wqe::{SendWqe, MAX_SEND_WQE};
use crate::RxeRs;
use kernel::sync::Arc;

/// What the completer made of a response packet, and what the requester does next.
pub(crate) enum Response {
    /// Taken.
    Taken(After),
    /// Not taken (the QP counts it dropped).
    Dropped(After),
}

/// What the requester should do after a response.
pub(crate) enum After {
    /// Nothing more.
    Nothing,
    /// Run: the window opened or WQEs are to be sent again.
    Send,
}

/// Completes every WQE fully sent whose last PSN is `p` or before.
fn complete_through(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    p: u32,
) {
    loop {
        let head = inner.sq.consumer();
        // Only WQEs whose last packet went out (those before `req.next`).
        if head == inner.req.next || inner.req.cur.is_some_and(|(i, _)| i == head) {
            return;
        }
        let rec = inner.req.record(head);
        if psn::diff(rec.last_psn, p) > 0 || is_read_or_atomic(rec.opcode) {
            return;
        }
        complete_head(dev, shared, inner, rec);
    }
}

/// Whether `p` answers something the QP sent: it lies between the first PSN of the
/// oldest WQE not completed (`slack` PSNs before it are taken too) and the last PSN
/// sent. Nothing else a response says is believed: a late duplicate or a forged
/// response completes nothing.
fn answers_sent(inner: &QpInner, p: u32, slack: i32) -> bool {
    let head = inner.sq.consumer();
    if head == inner.req.next && inner.req.cur.is_none() {
        return false;
    }
    let oldest = inner.req.record(head).first_psn;
    psn::diff(p, oldest) >= -slack && psn::diff(p, inner.req_psn) < 0
}

/// A response carrying data for the oldest WQE (a READ response, or an atomic's
/// acknowledgement): placed if it is the next one expected, completing the WQE with
/// its last packet.
fn data_response(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Response {
    let (head, rec) = match expected(dev, shared, inner, pkt) {
        Ok(expected) => expected,
        Err(after) => return Response::Dropped(after),
    };
    let mut bytes = [0u8; MAX_SEND_WQE];
    inner.sq.read_into(head, &mut bytes);
    let wqe = match SendWqe::parse(&bytes, shared.cap.max_send_sge, shared.cap.max_inline_data) {
        Ok(w) if w.opcode == rec.opcode && w.length == rec.length => w,
        _ => {
            fail(dev, shared, inner, head, rec.wr_id, WcStatus::LocQpOpErr);
            return Response::Taken(After::Nothing);
        }
    };
    let mut fault = None;
    let (placed, last) =
        match place_response(dev, shared, inner, pkt, (head, rec), &wqe, &mut fault) {
            Ok(placed) => placed,
            Err(answer) => return answer,
        };
    if let Some(f) = fault {
        // Dropped as if lost; once the pages are in, the READ or atomic is asked for
        // again.
        if RxeQp::fault(dev, shared, inner, f, OdpWait::Completer) {
            return Response::Dropped(After::Nothing);
        }
    }
    if let Err(status) = placed {
        fail(dev, shared, inner, head, rec.wr_id, status);
        return Response::Taken(After::Nothing);
    }
    placed_response(dev, shared, inner, (head, rec), &wqe, last)
}

/// The index and record of the oldest WQE if `pkt` is the response it expects next;
/// otherwise what the requester does (`Send` when a READ's lost responses are asked
/// for again).
fn expected(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Result<(u32, SentWqe), After> {
    let p = pkt.bth.psn;
    if !answers_sent(inner, p, 0) {
        return Err(After::Nothing);
    }
    // Whatever came before this request is acknowledged by its response.
    complete_through(dev, shared, inner, psn::add(p, psn::PSN_MASK));
    let head = inner.sq.consumer();
    if head == inner.req.next || inner.req.cur.is_some_and(|(i, _)| i == head) {
        return Err(After::Nothing);
    }
    let rec = inner.req.record(head);
    let atomic = pkt.info.flags & flag::ATOMIC != 0;
    let expected = psn::add(rec.first_psn, inner.req.read_got);
    if p != expected || is_atomic(rec.opcode) != atomic || !is_read_or_atomic(rec.opcode) {
        // A response after a lost one (of this READ, or of a later request when this
        // READ's last responses or its request were lost): responses come in PSN
        // order, so ask again for the rest at once (once per lost PSN; the responses
        // still on their way are dropped). Anything else, a duplicate say, is
        // dropped; the timeout asks again if need be.
        if is_read(rec.opcode)
            && psn::diff(p, expected) > 0
            && psn::diff(p, inner.req_psn) < 0
            && inner.req.read_retry != Some(expected)
        {
            inner.req.read_retry = Some(expected);
            retry_lost(dev, inner);
            return Err(After::Send);
        }
        return Err(After::Nothing);
    }
    Ok((head, rec))
}

/// Places the data of the response `pkt` into `wqe` (at `head`): a READ's payload, an
/// atomic's original value, nothing for a FLUSH or an ATOMIC WRITE. Returns how the
/// placing went and whether it was the last response, or the answer of a response
/// that is refused (the WQE failed, or no atomic acknowledgement).
fn place_response(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
    (head, rec): (u32, SentWqe),
    wqe: &SendWqe<'_>,
    fault: &mut Option<Fault>,
) -> Result<(Result<(), WcStatus>, bool), Response> {
    if is_atomic(rec.opcode) {
        let Some(orig) = pkt.atomic_ack() else {
            return Err(Response::Dropped(After::Nothing));
        };
        return Ok((
            scatter_local(dev, shared, wqe, (0, &orig.to_ne_bytes()), fault),
            true,
        ));
    }
    if !is_read(rec.opcode) {
        // A FLUSH or an ATOMIC WRITE: an empty READ response says it is done.
        if !pkt.payload().is_empty() {
            fail(dev, shared, inner, head, rec.wr_id, WcStatus::LocLenErr);
            return Err(Response::Taken(After::Nothing));
        }
        return Ok((Ok(()), true));
    }
    let mtu = inner.mtu_bytes();
    let at = inner.req.read_got as usize * mtu as usize;
    let data = pkt.payload();
    let last = pkt.bth.psn == rec.last_psn;
    // Every response but the last is full; all of them make the READ's length.
    let fits = if last {
        at + data.len() == rec.length as usize
    } else {
        data.len() == mtu as usize
    };
    if !fits {
        fail(dev, shared, inner, head, rec.wr_id, WcStatus::LocLenErr);
        return Err(Response::Taken(After::Nothing));
    }
    Ok((scatter_local(dev, shared, wqe, (at, data), fault), last))
}

/// The response for the WQE at `head` was placed: the QP made progress, and the WQE
/// completes with its `last` response (a READ with invalidate once its key is
/// invalidated).
fn placed_response(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    (head, rec): (u32, SentWqe),
    wqe: &SendWqe<'_>,
    last: bool,
) -> Response {
    inner.progress = true;
    inner.retry_left = inner.attrs.retry_cnt;
    inner.rnr_left = inner.attrs.rnr_retry;
    // A READ with invalidate: the local key it names stops opening memory once the
    // data is placed, before the READ completes.
    if last
        && rec.opcode == WrOpcode::RdmaReadWithInv
        && mr::invalidate(dev, wqe.invalidate_rkey(), shared.pd, shared.qp_num()).is_err()
    {
        fail(dev, shared, inner, head, rec.wr_id, WcStatus::LocQpOpErr);
        return Response::Taken(After::Nothing);
    }
    if last {
        complete_head(dev, shared, inner, rec);
        // Local operations started after it complete with it.
        complete_through(dev, shared, inner, rec.last_psn);
    } else {
        inner.req.read_got += 1;
    }
    Response::Taken(After::Send)
}

/// Sends everything not yet acknowledged again because a packet was lost (an
/// acknowledgement timeout, a sequence NAK, a gap in READ responses): [`go_back`],
/// counted in `completer_retry_err` too when there is something to send again.
pub(crate) fn retry_lost(dev: &Device<RxeRs>, inner: &mut QpInner) {
    if go_back(dev, inner) {
        dev.counters.inc(Counter::CompleterRetry);
    }
}

/// Sends everything not yet acknowledged again, from the oldest WQE; returns whether
/// there was something to send again (then counted in `retransmits`).
pub(crate) fn go_back(dev: &Device<RxeRs>, inner: &mut QpInner) -> bool {
    let head = inner.sq.consumer();
    if head == inner.req.next && inner.req.cur.is_none() {
        return false;
    }
    dev.counters.inc(Counter::Retransmit);
    let rec = inner.req.record(head);
    inner.req.next = head;
    if is_read(rec.opcode) && inner.req.read_got > 0 {
        // A READ whose first responses were placed asks for the rest only (at the PSN
        // of the first missing response), then everything after it goes again.
        let mtu = inner.mtu_bytes();
        inner.req.cur = Some((head, inner.req.read_got * mtu));
        inner.req_psn = psn::add(rec.first_psn, inner.req.read_got);
        inner.req.rd_pending = 1;
        return true;
    }
    inner.req.cur = None;
    inner.req_psn = rec.first_psn;
    // Everything from the oldest WQE on starts again.
    inner.req.rd_pending = 0;
    inner.req.read_got = 0;
    true
}

/// The RNR NAK timer values of the InfiniBand specification, in microseconds.
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

/// The wait an RNR NAK with timer field `t` asks for, in milliseconds (at least 1).
fn rnr_ms(t: u8) -> u32 {
    RNR_TIMER_US[usize::from(t & 0x1f)].div_ceil(1000).max(1)
}

/// A response packet for an RC QP: returns whether it was taken.
pub(crate) fn response(
    dev: &Device<RxeRs>,
    shared: &Arc<Task<QpShared>>,
    inner: &mut QpInner,
    pkt: &Packet<'_>,
) -> Response {
    if shared.qp_type != QpType::Rc
        || !matches!(inner.state, QpState::Rts | QpState::Sqd | QpState::Sqe)
    {
        return Response::Dropped(After::Nothing);
    }
    dev.counters.inc(Counter::AckDeferred);
    // A READ response's AETH (where it has one) is an ACK; the data decides.
    let acked = pkt
        .aeth()
        .is_none_or(|a| a.syndrome & syndrome::TYPE_MASK == syndrome::ACK);
    if acked && pkt.info.flags & (flag::READ | flag::ATOMIC) != 0 {
        return data_response(dev, shared, inner, pkt);
    }
    let Some(aeth) = pkt.aeth() else {
        return Response::Dropped(After::Nothing);
    };
    let p = pkt.bth.psn;
    // Only PSNs that were sent and are not acknowledged yet mean anything (an ACK of
    // the PSN before the oldest repeats one already taken; a NAK there names nothing
    // outstanding).
    let slack = i32::from(aeth.syndrome & syndrome::TYPE_MASK == syndrome::ACK);
    if !answers_sent(inner, p, slack) {
        return Response::Dropped(After::Nothing);
    }
    match aeth.syndrome & syndrome::TYPE_MASK {
        syndrome::ACK => {
            inner.rnr_left = inner.attrs.rnr_retry;
            inner.retry_left = inner.attrs.retry_cnt;
            inner.progress = true;
            complete_through(dev, shared, inner, p);
            Response::Taken(After::Send)
        }
        syndrome::RNR_NAK => {
            dev.counters.inc(Counter::RcvdRnrNak);
            complete_through(dev, shared, inner, psn::add(p, psn::PSN_MASK));
            // 7 means "retry for ever".
            if inner.rnr_left == 0 {
                dev.counters.inc(Counter::RnrRetryExceeded);
                let head = inner.sq.consumer();
                let rec = inner.req.record(head);
                fail(
                    dev,
                    shared,
                    inner,
                    head,
                    rec.wr_id,
                    WcStatus::RnrRetryExcErr,
                );
                return Response::Taken(After::Nothing);
            }
            if inner.rnr_left != 7 {
                inner.rnr_left -= 1;
            }
            go_back(dev, inner);
            // Send again once the responder had the time it asked for.
            inner.rnr_wait = true;
            // The RNR wait replaces the acknowledgement timeout the timer may be set
            // to (the requester sets that again when it sends).
            let ms = rnr_ms(aeth.syndrome);
            dev.wq.set_timer(shared, ms);
            Response::Taken(After::Nothing)
        }
        _ => {
            let status = match aeth.syndrome {
                syndrome::NAK_PSN_SEQ => {
                    dev.counters.inc(Counter::RcvdSeqNak);
                    complete_through(dev, shared, inner, psn::add(p, psn::PSN_MASK));
                    retry_lost(dev, inner);
                    return Response::Taken(After::Send);
                }
                syndrome::NAK_INVALID_REQUEST => WcStatus::RemInvReqErr,
                syndrome::NAK_REMOTE_ACCESS => WcStatus::RemAccessErr,
                _ => WcStatus::RemOpErr,
            };
            complete_through(dev, shared, inner, psn::add(p, psn::PSN_MASK));
            let head = inner.sq.consumer();
            let rec = inner.req.record(head);
            fail(dev, shared, inner, head, rec.wr_id, status);
            Response::Taken(After::Nothing)
        }
    }
}
