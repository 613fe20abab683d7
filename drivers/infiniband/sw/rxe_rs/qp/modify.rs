// SPDX-License-Identifier: GPL-2.0

//! `modify_qp`: the checks of the whole request, the attributes it sets, and what
//! entering each state does.

use super::{QpInner, RxeQp};
use crate::ah::{check_av, with_own_dest};
use crate::ib::{
    device::eopnotsupp,
    qp::{transition_ok, Qp, QpAttr, QpAttrs, QpEvent, QpState, QpType},
    verbs::{Access, AccessFlags, QPN_MASK},
};
use crate::param;
use crate::roce::psn::PSN_MASK;
use crate::RxeRs;
use kernel::prelude::*;

/// Access flags a QP may grant to remote peers and itself.
const SUPPORTED_ACCESS: AccessFlags = AccessFlags::of(&[
    Access::LocalWrite,
    Access::RemoteWrite,
    Access::RemoteRead,
    Access::RemoteAtomic,
    Access::MwBind,
    Access::OnDemand,
    Access::FlushGlobal,
    Access::FlushPersistent,
    Access::Optional,
]);

/// Rounds a count of outstanding RDMA READs and atomics up to a power of two, as rxe.
fn round_rd_atomic(n: u8) -> u8 {
    match n {
        0 => 0,
        n => u8::try_from(u32::from(n).next_power_of_two()).unwrap_or(u8::MAX),
    }
}

impl RxeQp {
    pub(crate) fn modify(qp: &Qp<RxeRs>, a: &QpAttr) -> Result {
        check_attr(qp.shared.qp_type, a)?;
        let mut a = a.clone();
        if let Some(av) = a.av.as_mut() {
            *av = with_own_dest(qp.device(), av);
        }
        let a = &a;
        let mut inner = qp.shared.inner.lock();
        let cur = a.cur_state.unwrap_or(inner.state);
        let new = a.state.unwrap_or(cur);
        if !transition_ok(cur, new, qp.shared.qp_type, a.mask) {
            return Err(EINVAL);
        }
        // Room for the events this change may raise, before anything changes.
        inner.pending.reserve(2, GFP_ATOMIC)?;
        inner.apply(a);
        // The acknowledgement owed for messages already completed goes out before the
        // QP stops answering.
        let ack = match new {
            QpState::Err | QpState::Reset => {
                Self::take_owed_ack(&qp.device().ndev, &qp.shared, &mut inner)
            }
            _ => None,
        };
        let wake = match a.state {
            Some(state) => Self::enter(qp, &mut inner, cur, state),
            None => Ok(false),
        };
        drop(inner);
        Self::send_final_ack(qp.device(), &qp.shared, ack);
        if wake? {
            qp.device().wq.run(&qp.shared);
        }
        Ok(())
    }

    /// Enters `state` from `cur`. Returns whether the QP's work item is to run: an
    /// event to report, or work to send.
    fn enter(qp: &Qp<RxeRs>, inner: &mut QpInner, cur: QpState, state: QpState) -> Result<bool> {
        inner.state = state;
        match state {
            QpState::Reset => inner.reset(),
            QpState::Rtr if cur != QpState::Rtr => {
                let psn = inner.attrs.rq_psn;
                inner.resp.reset(psn);
            }
            QpState::Rts if cur != QpState::Rts => {
                inner.rnr_left = inner.attrs.rnr_retry;
                inner.retry_left = inner.attrs.retry_cnt;
                // Back from SQD: what a run left to the work item (its budget
                // spent) is sent now.
                if cur == QpState::Sqd {
                    inner.kick = true;
                    return Ok(true);
                }
            }
            QpState::Err => {
                Self::flush(&qp.shared, inner, &qp.device().wq);
                // An SRQ-attached QP in error takes no more receives from the SRQ
                // (none is ever in progress: each message is taken whole): say so,
                // once per entry into ERR.
                if qp.shared.srq.is_some() && cur != QpState::Err {
                    inner.pending.push(QpEvent::LastWqeReached, GFP_ATOMIC)?;
                    return Ok(true);
                }
            }
            QpState::Sqd => {
                // Reported drained at once, although sent WQEs may still wait for
                // their acknowledgements (an open finding, see Documentation).
                if inner.attrs.en_sqd_async_notify {
                    inner.pending.push(QpEvent::SqDrained, GFP_ATOMIC)?;
                    return Ok(true);
                }
            }
            _ => {}
        }
        Ok(false)
    }
}

/// Checks every attribute of a `modify_qp` request to a QP of type `qp_type`, before
/// anything is locked or changed.
fn check_attr(qp_type: QpType, a: &QpAttr) -> Result {
    if a.mask.has_unknown_bits() || a.rate_limit.is_some() {
        return Err(eopnotsupp());
    }
    if a.cap.is_some() {
        return Err(EINVAL);
    }
    if a.port_num.is_some_and(|p| p != crate::param::PORT)
        || a.pkey_index.is_some_and(|i| i >= param::PORT_PKEY_TBL_LEN)
        || a.timeout.is_some_and(|t| t > 31)
        || a.retry_cnt.is_some_and(|r| r > 7)
        || a.rnr_retry.is_some_and(|r| r > 7)
        || a.min_rnr_timer.is_some_and(|t| t > 31)
        || a.max_rd_atomic
            .is_some_and(|n| u32::from(n) > param::MAX_QP_RD_ATOM)
        || a.max_dest_rd_atomic
            .is_some_and(|n| u32::from(n) > param::MAX_QP_RD_ATOM)
    {
        return Err(EINVAL);
    }
    if let Some(f) = a.access_flags {
        if !matches!(qp_type, QpType::Rc | QpType::Uc) || !f.within(SUPPORTED_ACCESS) {
            return Err(EINVAL);
        }
    }
    if let Some(av) = &a.av {
        check_av(av)?;
    }
    if let Some((av, port, pkey, timeout)) = &a.alt_path {
        check_av(av)?;
        if *port != crate::param::PORT || *pkey >= param::PORT_PKEY_TBL_LEN || *timeout > 31 {
            return Err(EINVAL);
        }
    }
    Ok(())
}

/// Sets the attributes of `a` in `at`: PSNs and the destination QP number cut to their
/// widths, the counts of outstanding READs and atomics rounded up to a power of two.
fn set_attrs(at: &mut QpAttrs, a: &QpAttr) {
    if let Some(v) = a.en_sqd_async_notify {
        at.en_sqd_async_notify = v;
    }
    if let Some(v) = a.access_flags {
        at.access_flags = v;
    }
    if let Some(v) = a.pkey_index {
        at.pkey_index = v;
    }
    if let Some(v) = a.port_num {
        at.port_num = v;
    }
    if let Some(v) = a.qkey {
        at.qkey = v;
    }
    if let Some(v) = a.av {
        at.av = v;
    }
    if let Some((av, port, pkey, timeout)) = a.alt_path {
        at.alt_av = av;
        at.alt_port_num = port;
        at.alt_pkey_index = pkey;
        at.alt_timeout = timeout;
    }
    if let Some(v) = a.path_mtu {
        at.path_mtu = Some(v);
    }
    if let Some(v) = a.timeout {
        at.timeout = v;
    }
    if let Some(v) = a.retry_cnt {
        at.retry_cnt = v;
    }
    if let Some(v) = a.rnr_retry {
        at.rnr_retry = v;
    }
    if let Some(v) = a.rq_psn {
        at.rq_psn = v & PSN_MASK;
    }
    if let Some(v) = a.sq_psn {
        at.sq_psn = v & PSN_MASK;
    }
    if let Some(v) = a.max_rd_atomic {
        at.max_rd_atomic = round_rd_atomic(v);
    }
    if let Some(v) = a.max_dest_rd_atomic {
        at.max_dest_rd_atomic = round_rd_atomic(v);
    }
    if let Some(v) = a.min_rnr_timer {
        at.min_rnr_timer = v;
    }
    if let Some(v) = a.path_mig_state {
        at.path_mig_state = v;
    }
    if let Some(v) = a.dest_qp_num {
        at.dest_qp_num = v & QPN_MASK;
    }
}

impl QpInner {
    /// Sets the attributes of a `modify_qp` request that [`check_attr`] accepted, and
    /// the PSNs each side starts from.
    fn apply(&mut self, a: &QpAttr) {
        set_attrs(&mut self.attrs, a);
        if a.sq_psn.is_some() {
            self.req_psn = self.attrs.sq_psn;
        }
        if a.rq_psn.is_some() {
            self.resp.psn = self.attrs.rq_psn;
        }
    }

    /// What entering RESET clears: both queues, the requester's and the responder's
    /// state, and the on-demand faults.
    fn reset(&mut self) {
        self.sq.reset();
        if let Some(rq) = &mut self.rq {
            rq.reset();
        }
        self.req.reset();
        self.resp.reset(0);
        self.req_psn = 0;
        self.rnr_wait = false;
        self.reset_odp();
    }
}

#[cfg(CONFIG_RDMA_RXE_RS_KUNIT_TEST)]
#[kernel::macros::kunit_tests(rxe_rs_qp_modify)]
mod tests {
    use super::*;

    fn refused(qp_type: QpType, a: QpAttr) -> bool {
        check_attr(qp_type, &a).is_err_and(|e| e == EINVAL)
    }

    #[test]
    fn limits_of_each_attribute() {
        assert!(check_attr(QpType::Rc, &QpAttr::default()).is_ok());
        let ok = QpAttr {
            timeout: Some(31),
            retry_cnt: Some(7),
            rnr_retry: Some(7),
            min_rnr_timer: Some(31),
            port_num: Some(param::PORT),
            pkey_index: Some(param::PORT_PKEY_TBL_LEN - 1),
            max_rd_atomic: Some(param::MAX_QP_RD_ATOM as u8),
            max_dest_rd_atomic: Some(param::MAX_QP_RD_ATOM as u8),
            access_flags: Some(SUPPORTED_ACCESS),
            ..Default::default()
        };
        assert!(check_attr(QpType::Rc, &ok).is_ok());
        // Each attribute one past its range, alone.
        let one_past: [fn(&mut QpAttr); 10] = [
            |a| a.timeout = Some(32),
            |a| a.retry_cnt = Some(8),
            |a| a.rnr_retry = Some(8),
            |a| a.min_rnr_timer = Some(32),
            |a| a.port_num = Some(param::PORT + 1),
            |a| a.port_num = Some(0),
            |a| a.pkey_index = Some(param::PORT_PKEY_TBL_LEN),
            |a| a.max_rd_atomic = Some(param::MAX_QP_RD_ATOM as u8 + 1),
            |a| a.max_dest_rd_atomic = Some(param::MAX_QP_RD_ATOM as u8 + 1),
            |a| a.cap = Some(Default::default()),
        ];
        for set in one_past {
            let mut a = QpAttr::default();
            set(&mut a);
            assert!(refused(QpType::Rc, a));
        }
    }

    /// Access flags are for connected QPs, and only the ones the device knows.
    #[test]
    fn access_flags_by_type() {
        let rights = |f| QpAttr {
            access_flags: Some(f),
            ..Default::default()
        };
        assert!(check_attr(QpType::Uc, &rights(Access::RemoteWrite.into())).is_ok());
        assert!(refused(QpType::Ud, rights(AccessFlags::empty())));
        assert!(refused(QpType::Gsi, rights(Access::RemoteWrite.into())));
        assert!(refused(
            QpType::Rc,
            rights(SUPPORTED_ACCESS | Access::ZeroBased)
        ));
        // A bit the kernel does not define is refused before the driver sees it.
        assert!(AccessFlags::from_raw(SUPPORTED_ACCESS.bits() | 1 << 30).is_none());
        assert!(AccessFlags::from_raw(SUPPORTED_ACCESS.bits()) == Some(SUPPORTED_ACCESS));
    }

    #[test]
    fn rate_limit_not_supported() {
        let a = QpAttr {
            rate_limit: Some(1),
            ..Default::default()
        };
        assert!(check_attr(QpType::Rc, &a).is_err_and(|e| e == eopnotsupp()));
    }

    /// What is set is cut to its field's width; what is not selected stays.
    #[test]
    fn set_attrs_cuts_and_rounds() {
        let mut at = QpAttrs {
            qkey: 5,
            timeout: 9,
            ..Default::default()
        };
        let a = QpAttr {
            rq_psn: Some(u32::MAX),
            sq_psn: Some(0x0100_0001),
            dest_qp_num: Some(0xff12_3456),
            max_rd_atomic: Some(3),
            max_dest_rd_atomic: Some(0),
            retry_cnt: Some(6),
            ..Default::default()
        };
        set_attrs(&mut at, &a);
        assert_eq!((at.rq_psn, at.sq_psn), (PSN_MASK, 1));
        assert_eq!(at.dest_qp_num, 0x12_3456);
        assert_eq!((at.max_rd_atomic, at.max_dest_rd_atomic), (4, 0));
        assert_eq!((at.retry_cnt, at.qkey, at.timeout), (6, 5, 9));
        assert_eq!(round_rd_atomic(128), 128);
    }
}
