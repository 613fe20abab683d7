// SPDX-License-Identifier: GPL-2.0

//! `create_qp`: the checks of the request, the QP's rings and their capacities, its
//! shared state, and its publication under a number.

use super::odp::{FaultLink, OdpWait};
use super::req::ReqState;
use super::resp::RespState;
use super::{QpInner, QpShared, RxeQp, GSI_QPN, NO_CPU};
use crate::ib::object::Quota;
use crate::ib::{
    device::{eopnotsupp, Device},
    qp::{QpAttrs, QpCap, QpCreated, QpEvents, QpInit, QpState, QpType},
    sync::new_spinlock_irq,
    task::Task,
    ucontext::UserCall,
};
use crate::param;
use crate::queue::WqeRing;
use crate::sw::{
    rxe_abi::{create_qp_resp, RECV_WQE_HDR, SEND_WQE_HDR, SGE_LEN},
    skb::RouteCache,
};
use crate::table::Number;
use crate::wqe::put_at;
use crate::RxeRs;
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{atomic::Atomic, Arc},
};

/// Checks a `create_qp` request before anything is allocated.
fn check_init(init: &QpInit<'_, RxeRs>, user: Option<&UserCall<'_, RxeRs>>) -> Result {
    // The transports of RoCE this device carries, and ib_mad's QP1.
    if init.create_flags != 0
        || !matches!(
            init.qp_type,
            QpType::Rc | QpType::Uc | QpType::Ud | QpType::Gsi
        )
    {
        return Err(eopnotsupp());
    }
    match user {
        // QP1 is ib_mad's, never a process's.
        Some(_) if init.qp_type == QpType::Gsi => return Err(EINVAL),
        Some(user) => user.udata.require_empty_input()?,
        None => {}
    }
    check_cap(&init.cap, init.srq.is_some())
}

fn check_cap(cap: &QpCap, has_srq: bool) -> Result {
    if cap.max_send_wr > param::MAX_QP_WR
        || cap.max_send_sge > param::MAX_SGE
        || cap.max_inline_data > param::MAX_INLINE_DATA
    {
        return Err(EINVAL);
    }
    if !has_srq && (cap.max_recv_wr > param::MAX_QP_WR || cap.max_recv_sge > param::MAX_SGE) {
        return Err(EINVAL);
    }
    Ok(())
}

/// The QP's send ring and its receive ring (none with an SRQ), and the capacities they
/// give, which may be more than asked for.
fn rings(
    init: &QpInit<'_, RxeRs>,
    user: Option<&UserCall<'_, RxeRs>>,
) -> Result<(WqeRing, Option<WqeRing>, QpCap)> {
    // A send WQE holds either its SGEs or its inline data: room for the larger.
    // (The capacities were checked against the device's limits: nothing here wraps.)
    let wqe_room =
        (init.cap.max_send_sge as usize * SGE_LEN).max(init.cap.max_inline_data as usize);
    let sq = WqeRing::new(init.cap.max_send_wr, SEND_WQE_HDR + wqe_room, user)?;
    // With an SRQ there is no receive ring (and librxe maps none).
    let rq = match init.srq {
        Some(_) => None,
        None => Some(WqeRing::new(
            init.cap.max_recv_wr,
            RECV_WQE_HDR + init.cap.max_recv_sge as usize * SGE_LEN,
            user,
        )?),
    };
    let cap = QpCap {
        max_send_wr: sq.capacity(),
        max_send_sge: u32::try_from(wqe_room / SGE_LEN)?,
        max_inline_data: u32::try_from(wqe_room)?,
        max_recv_wr: rq.as_ref().map_or(0, WqeRing::capacity),
        max_recv_sge: if rq.is_some() {
            init.cap.max_recv_sge
        } else {
            0
        },
    };
    Ok((sq, rq, cap))
}

/// `struct rxe_create_qp_resp`: where the receive ring is mapped, then the send ring.
fn ring_resp(sq: &WqeRing, rq: Option<&WqeRing>) -> [u8; create_qp_resp::LEN] {
    let mut resp = [0u8; create_qp_resp::LEN];
    if let Some(rq) = rq {
        put_at(&mut resp, create_qp_resp::RQ_MI, &rq.mminfo());
    }
    put_at(&mut resp, create_qp_resp::SQ_MI, &sq.mminfo());
    resp
}

impl QpInner {
    /// The state of a new QP, in RESET.
    fn new(sq: WqeRing, rq: Option<WqeRing>, req: ReqState, resp: RespState) -> Self {
        QpInner {
            state: QpState::Reset,
            attrs: QpAttrs {
                port_num: crate::param::PORT,
                ..Default::default()
            },
            sq,
            rq,
            req_psn: 0,
            req,
            resp,
            rnr_left: 0,
            retry_left: 0,
            rnr_wait: false,
            progress: false,
            kick: false,
            flush_end: (0, 0),
            respond: false,
            dead: false,
            pending: KVec::new(),
            odp: [None; OdpWait::COUNT],
            odp_busy: [false; OdpWait::COUNT],
            odp_ended: [false; OdpWait::COUNT],
            odp_failed: [false; OdpWait::COUNT],
            odp_epoch: 0,
        }
    }
}

impl QpShared {
    /// The shared state of a new QP with the rings `sq` and `rq` (of capacities `cap`),
    /// as its task, not published yet.
    fn new(
        dev: &Device<RxeRs>,
        init: &QpInit<'_, RxeRs>,
        cap: &QpCap,
        sq: WqeRing,
        rq: Option<WqeRing>,
        events: &Arc<QpEvents>,
    ) -> Result<Arc<Task<Self>>> {
        let (send_cq, recv_cq) = (init.send_cq.handle().clone(), init.recv_cq.handle().clone());
        let srq = init.srq.map(|s| s.handle().clone());
        let slots = match init.qp_type {
            QpType::Rc | QpType::Uc => sq.slots(),
            _ => 0,
        };
        let req = ReqState::new(slots)?;
        let responder = RespState::new(if init.qp_type == QpType::Rc {
            param::MAX_QP_RD_ATOM as usize
        } else {
            0
        })?;
        let dev_ref = dev.get_ref().ok_or(ENODEV)?;
        Task::new(try_pin_init!(QpShared {
            wc_qp: init.wc_qp,
            qp_type: init.qp_type,
            pd: init.pd,
            sq_sig_all: init.sq_sig_all,
            cap: *cap,
            qp_num: Number::new(),
            tx_cpu: Atomic::new(NO_CPU),
            inner <- new_spinlock_irq!(QpInner::new(sq, rq, req, responder)),
            routes <- RouteCache::new(),
            send_cq,
            recv_cq,
            srq,
            events: events.clone(),
            link: Arc::pin_init(
                pin_init!(FaultLink {
                    qp <- new_spinlock!(None),
                    granted <- new_spinlock!(None),
                    lines <- new_spinlock!([0; OdpWait::COUNT]),
                }),
                GFP_KERNEL,
            )?,
            dev: dev_ref,
        }))
    }

    /// Publishes the QP under its number (QP1 for the GSI QP, the one port having one),
    /// where packets and faults find it; returns the number.
    fn publish(dev: &Device<RxeRs>, shared: &Arc<Task<Self>>) -> Result<u32> {
        // Once published, a packet may ask for a fault, which must find its way back.
        *shared.link.qp.lock() = Some(shared.clone());
        let published = if shared.qp_type == QpType::Gsi {
            dev.qp_table.insert_at(GSI_QPN, shared).map(|()| GSI_QPN)
        } else {
            dev.qp_table.insert(shared, GFP_KERNEL)
        };
        published.inspect_err(|_| drop(shared.link.qp.lock().take()))
    }
}

impl RxeQp {
    pub(crate) fn create(
        dev: &Device<RxeRs>,
        init: &QpInit<'_, RxeRs>,
        user: Option<&UserCall<'_, RxeRs>>,
        events: &Arc<QpEvents>,
    ) -> Result<QpCreated<Self>> {
        check_init(init, user)?;
        let charge = Quota::charge(&dev.qps)?;
        let (sq, rq, cap) = rings(init, user)?;
        let resp = ring_resp(&sq, rq.as_ref());
        let shared = QpShared::new(dev, init, &cap, sq, rq, events)?;
        // The process learns where its rings are before the QP is published: a failed
        // answer (a bad response pointer) then leaves nothing that a packet could have
        // found, and the QP goes as it came, in process context.
        if let Some(user) = user {
            user.udata.respond(&resp)?;
        }
        let qp_num = QpShared::publish(dev, &shared)?;
        let qp = Self {
            shared,
            _charge: charge,
        };
        Ok(QpCreated {
            data: qp,
            qp_num,
            cap,
        })
    }
}
