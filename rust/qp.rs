// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates a QP (`size_ib_qp` bytes, zeroed), fills in the device, PD, CQs,
//! SRQ, type and the consumer's event handler, and calls `create_qp`; after a
//! successful `destroy_qp` it frees the block. [`Qp<T>`] is the block: the C struct,
//! the consumer's event callback ([`QpEvents`]), then the driver's data, built as a value.
//!
//! ib_core refuses to destroy a QP that is still attached to a multicast group, and
//! holds the CQs, SRQ and PD of a QP (their `usecnt`) until its destroy returned. The
//! attribute structures of `modify_qp` and `query_qp` are translated here into
//! [`QpAttr`] (what a modify sets, one `Option` per mask bit) and [`QpQuery`] (what a
//! query reports: the state, the capacities and the [`QpAttrs`] a QP keeps).
//!
//! `post_send` and `post_recv` may be called in atomic context; the other callbacks run
//! in process context.

use super::{
    bindings,
    cq::Cq,
    device::{Device, Driver, Mtu},
    object::{device_of, Absent, Events, Kind, Object},
    pd::PdId,
    srq::Srq,
    ucontext::UserCall,
    verbs::AccessFlags,
    wr::{RecvWr, SendWr, WcQp},
};
use kernel::{error::from_result, ffi::c_int, prelude::*, sync::Arc};

/// The transport service of a QP (`enum ib_qp_type`, the types ib_core hands to drivers).
///
/// A driver refuses at create the types it does not carry, with `EOPNOTSUPP`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// The whole of the C enum; each driver carries its own subset.
#[allow(dead_code)]
pub(crate) enum QpType {
    /// QP0, the subnet management QP of an InfiniBand port (kernel consumers only).
    Smi,
    /// QP1, the general services QP of a port (kernel consumers only).
    Gsi,
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// Raw IPv6 datagrams.
    RawIpv6,
    /// Raw datagrams of one Ethertype.
    RawEthertype,
    /// Raw Ethernet packets.
    RawPacket,
    /// XRC initiator.
    XrcIni,
    /// XRC target.
    XrcTgt,
    /// A type of the driver's own (`IB_QPT_DRIVER`).
    Driver,
}

impl QpType {
    fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            bindings::ib_qp_type_IB_QPT_SMI => Self::Smi,
            bindings::ib_qp_type_IB_QPT_GSI => Self::Gsi,
            bindings::ib_qp_type_IB_QPT_RC => Self::Rc,
            bindings::ib_qp_type_IB_QPT_UC => Self::Uc,
            bindings::ib_qp_type_IB_QPT_UD => Self::Ud,
            bindings::ib_qp_type_IB_QPT_RAW_IPV6 => Self::RawIpv6,
            bindings::ib_qp_type_IB_QPT_RAW_ETHERTYPE => Self::RawEthertype,
            bindings::ib_qp_type_IB_QPT_RAW_PACKET => Self::RawPacket,
            bindings::ib_qp_type_IB_QPT_XRC_INI => Self::XrcIni,
            bindings::ib_qp_type_IB_QPT_XRC_TGT => Self::XrcTgt,
            bindings::ib_qp_type_IB_QPT_DRIVER => Self::Driver,
            _ => return None,
        })
    }

    fn to_raw(self) -> u32 {
        match self {
            Self::Smi => bindings::ib_qp_type_IB_QPT_SMI,
            Self::Gsi => bindings::ib_qp_type_IB_QPT_GSI,
            Self::Rc => bindings::ib_qp_type_IB_QPT_RC,
            Self::Uc => bindings::ib_qp_type_IB_QPT_UC,
            Self::Ud => bindings::ib_qp_type_IB_QPT_UD,
            Self::RawIpv6 => bindings::ib_qp_type_IB_QPT_RAW_IPV6,
            Self::RawEthertype => bindings::ib_qp_type_IB_QPT_RAW_ETHERTYPE,
            Self::RawPacket => bindings::ib_qp_type_IB_QPT_RAW_PACKET,
            Self::XrcIni => bindings::ib_qp_type_IB_QPT_XRC_INI,
            Self::XrcTgt => bindings::ib_qp_type_IB_QPT_XRC_TGT,
            Self::Driver => bindings::ib_qp_type_IB_QPT_DRIVER,
        }
    }
}

/// The state of a QP (`enum ib_qp_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum QpState {
    /// Just created or reset: nothing is processed.
    Reset,
    /// Receives may be posted.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drain: no new send is started.
    Sqd,
    /// Send queue error (unreliable QPs).
    Sqe,
    /// Error: everything outstanding is flushed.
    Err,
}

impl QpState {
    fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            bindings::ib_qp_state_IB_QPS_RESET => Self::Reset,
            bindings::ib_qp_state_IB_QPS_INIT => Self::Init,
            bindings::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            bindings::ib_qp_state_IB_QPS_RTS => Self::Rts,
            bindings::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            bindings::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            bindings::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return None,
        })
    }

    fn to_raw(self) -> u32 {
        match self {
            Self::Reset => bindings::ib_qp_state_IB_QPS_RESET,
            Self::Init => bindings::ib_qp_state_IB_QPS_INIT,
            Self::Rtr => bindings::ib_qp_state_IB_QPS_RTR,
            Self::Rts => bindings::ib_qp_state_IB_QPS_RTS,
            Self::Sqd => bindings::ib_qp_state_IB_QPS_SQD,
            Self::Sqe => bindings::ib_qp_state_IB_QPS_SQE,
            Self::Err => bindings::ib_qp_state_IB_QPS_ERR,
        }
    }
}

/// Whether the IB state machine allows `cur` to `next` for `qp_type` with exactly the
/// attributes in `mask` (required ones present, nothing outside the optional ones).
pub(crate) fn transition_ok(cur: QpState, next: QpState, qp_type: QpType, mask: AttrMask) -> bool {
    // SAFETY: A pure function of its arguments.
    unsafe { bindings::ib_modify_qp_is_ok(cur.to_raw(), next.to_raw(), qp_type.to_raw(), mask.0) }
}

/// The work request and scatter/gather capacities of a QP.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QpCap {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
}

impl QpCap {
    fn from_raw(c: &bindings::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    fn write_to(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// What a QP is created with.
pub(crate) struct QpInit<'a, T: Driver> {
    pub(crate) qp_type: QpType,
    /// The capacities asked for.
    pub(crate) cap: QpCap,
    /// Every send completes (`IB_SIGNAL_ALL_WR`), not only signaled ones.
    pub(crate) sq_sig_all: bool,
    pub(crate) send_cq: &'a Cq<T>,
    pub(crate) recv_cq: &'a Cq<T>,
    /// The shared receive queue receives come from, if any.
    pub(crate) srq: Option<&'a Srq<T>>,
    /// `IB_QP_CREATE_*` flags; a driver that knows none refuses any.
    pub(crate) create_flags: u32,
    /// How the QP's completions name it to a kernel consumer.
    pub(crate) wc_qp: WcQp,
    /// The PD the QP was made in.
    pub(crate) pd: PdId,
}

/// What a created QP reports back: its number and its actual capacities.
pub(crate) struct QpCreated<D> {
    pub(crate) data: D,
    pub(crate) qp_num: u32,
    pub(crate) cap: QpCap,
}

/// The network a RoCE address vector's GIDs belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NetworkType {
    /// IPv4 (the GIDs are IPv4-mapped IPv6 addresses).
    Ipv4,
    /// IPv6.
    Ipv6,
}

/// A GID of the device itself, as [`AddressVector::dgid_own`] notes the destination.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OwnGid {
    /// The VLAN ID of the GID's netdev, if that is a VLAN device.
    pub(crate) vlan_id: Option<u16>,
}

/// A RoCE v2 address vector: where a QP's (or an AH's) packets go.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AddressVector {
    pub(crate) port_num: u32,
    pub(crate) sl: u8,
    pub(crate) static_rate: u8,
    pub(crate) dgid: [u8; 16],
    /// The source GID (the entry `sgid_index` names, as it was when the vector was set).
    pub(crate) sgid: [u8; 16],
    pub(crate) flow_label: u32,
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) dmac: [u8; 6],
    /// `None` when the source GID is not a RoCE v2 one.
    pub(crate) network: Option<NetworkType>,
    /// The ifindex of the netdev the source GID belongs to (the device's own, or an
    /// upper device of it such as a VLAN), as it was when the vector was set; 0 for
    /// none; -1 for a VLAN device in another namespace than its real netdev, which no
    /// packet may leave by.
    pub(crate) sgid_ifindex: i32,
    /// The VLAN ID of that netdev, if it is a VLAN device.
    pub(crate) sgid_vlan: Option<u16>,
    /// Set by the driver when the destination GID is one of the device's own (see
    /// `Device::own_gid`); `None` as read.
    pub(crate) dgid_own: Option<OwnGid>,
    /// Whether the attribute carried a GRH at all (RoCE requires one).
    pub(crate) has_grh: bool,
}

impl AddressVector {
    /// Reads an `rdma_ah_attr`.
    ///
    /// # Safety
    ///
    /// `a.grh.sgid_attr` must be null or valid for the call.
    pub(super) unsafe fn from_raw(a: &bindings::rdma_ah_attr) -> Self {
        let has_grh = u32::from(a.ah_flags) & bindings::ib_ah_flags_IB_AH_GRH != 0;
        let g = &a.grh;
        let (network, sgid_ifindex, sgid_vlan) = if g.sgid_attr.is_null() {
            (None, 0, None)
        } else {
            // SAFETY: Valid per the caller.
            let network = match unsafe { bindings::rxe_rs_gid_attr_network_type(g.sgid_attr) } {
                bindings::rdma_network_type_RDMA_NETWORK_IPV4 => Some(NetworkType::Ipv4),
                bindings::rdma_network_type_RDMA_NETWORK_IPV6 => Some(NetworkType::Ipv6),
                _ => None,
            };
            let mut vlan = -1;
            // SAFETY: Valid per the caller; `vlan` is a valid out-parameter.
            let ifindex = unsafe { bindings::rxe_rs_gid_attr_ndev(g.sgid_attr, &mut vlan) };
            (network, ifindex, u16::try_from(vlan).ok())
        };
        Self {
            port_num: a.port_num,
            sl: a.sl,
            static_rate: a.static_rate,
            // SAFETY: The GID is plain bytes in either view of the union.
            dgid: unsafe { g.dgid.raw },
            sgid: if g.sgid_attr.is_null() {
                [0; 16]
            } else {
                // SAFETY: Valid per the caller; the GID is plain bytes.
                unsafe { (*g.sgid_attr).gid.raw }
            },
            flow_label: g.flow_label,
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
            // SAFETY: Plain bytes; for a RoCE attribute ib_core resolved them.
            dmac: unsafe { a.__bindgen_anon_1.roce.dmac },
            network,
            sgid_ifindex,
            sgid_vlan,
            dgid_own: None,
            has_grh,
        }
    }

    /// Where the destination is on the device itself, if packets to the vector go to
    /// the device itself: the destination GID is the source GID, or one of the device's
    /// own that the driver noted.
    pub(crate) fn own_dest(&self) -> Option<OwnGid> {
        self.dgid_own.or_else(|| {
            (self.sgid == self.dgid).then_some(OwnGid {
                vlan_id: self.sgid_vlan,
            })
        })
    }

    /// Writes the address into a query's answer (a RoCE address vector).
    pub(super) fn write_to(&self, a: &mut bindings::rdma_ah_attr) {
        *a = pin_init::zeroed();
        a.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        a.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        a.port_num = self.port_num;
        a.sl = self.sl;
        a.static_rate = self.static_rate;
        a.grh.dgid.raw = self.dgid;
        a.grh.flow_label = self.flow_label;
        a.grh.sgid_index = self.sgid_index;
        a.grh.hop_limit = self.hop_limit;
        a.grh.traffic_class = self.traffic_class;
        a.__bindgen_anon_1.roce.dmac = self.dmac;
    }
}

/// The attribute mask of a modify (`enum ib_qp_attr_mask`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AttrMask(u32);

impl AttrMask {
    /// Whether bits outside the standard attributes are set.
    pub(crate) fn has_unknown_bits(self) -> bool {
        self.0 & !bindings::ib_qp_attr_mask_IB_QP_ATTR_STANDARD_BITS != 0
    }

    fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }
}

/// What a `modify_qp` sets: `None` for each attribute outside the mask (the default is
/// a modify that sets nothing).
#[derive(Clone, Debug, Default)]
pub(crate) struct QpAttr {
    pub(crate) mask: AttrMask,
    pub(crate) state: Option<QpState>,
    pub(crate) cur_state: Option<QpState>,
    pub(crate) en_sqd_async_notify: Option<bool>,
    pub(crate) access_flags: Option<AccessFlags>,
    pub(crate) pkey_index: Option<u16>,
    pub(crate) port_num: Option<u32>,
    pub(crate) qkey: Option<u32>,
    pub(crate) av: Option<AddressVector>,
    pub(crate) path_mtu: Option<Mtu>,
    pub(crate) timeout: Option<u8>,
    pub(crate) retry_cnt: Option<u8>,
    pub(crate) rnr_retry: Option<u8>,
    pub(crate) rq_psn: Option<u32>,
    pub(crate) max_rd_atomic: Option<u8>,
    /// The alternate path: its address vector, port, P_Key index and timeout.
    pub(crate) alt_path: Option<(AddressVector, u32, u16, u8)>,
    pub(crate) min_rnr_timer: Option<u8>,
    pub(crate) sq_psn: Option<u32>,
    pub(crate) max_dest_rd_atomic: Option<u8>,
    pub(crate) path_mig_state: Option<u32>,
    /// A capacity change; no transition allows one, so it is refused.
    pub(crate) cap: Option<QpCap>,
    pub(crate) dest_qp_num: Option<u32>,
    /// A rate limit (raw packet QPs only).
    pub(crate) rate_limit: Option<u32>,
}

impl QpAttr {
    /// Reads the attributes selected by `mask`; `EINVAL` for a state or MTU that does
    /// not exist.
    ///
    /// # Safety
    ///
    /// `a`'s address vectors must carry valid (or null) GID attributes when selected.
    unsafe fn from_raw(a: &bindings::ib_qp_attr, mask: u32) -> Result<Self> {
        use bindings::*;
        let m = AttrMask(mask);
        let pick = |bit: u32| m.has(bit);
        let state = |raw: u32| QpState::from_raw(raw).ok_or(EINVAL);
        Ok(Self {
            mask: m,
            state: pick(ib_qp_attr_mask_IB_QP_STATE)
                .then(|| state(a.qp_state))
                .transpose()?,
            cur_state: pick(ib_qp_attr_mask_IB_QP_CUR_STATE)
                .then(|| state(a.cur_qp_state))
                .transpose()?,
            en_sqd_async_notify: pick(ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY)
                .then_some(a.en_sqd_async_notify != 0),
            access_flags: pick(ib_qp_attr_mask_IB_QP_ACCESS_FLAGS)
                .then(|| AccessFlags::from_raw(a.qp_access_flags as u32).ok_or(EINVAL))
                .transpose()?,
            pkey_index: pick(ib_qp_attr_mask_IB_QP_PKEY_INDEX).then_some(a.pkey_index),
            port_num: pick(ib_qp_attr_mask_IB_QP_PORT).then_some(a.port_num),
            qkey: pick(ib_qp_attr_mask_IB_QP_QKEY).then_some(a.qkey),
            // SAFETY: Valid per the caller.
            av: pick(ib_qp_attr_mask_IB_QP_AV)
                .then(|| unsafe { AddressVector::from_raw(&a.ah_attr) }),
            path_mtu: pick(ib_qp_attr_mask_IB_QP_PATH_MTU)
                .then(|| Mtu::from_raw(a.path_mtu).ok_or(EINVAL))
                .transpose()?,
            timeout: pick(ib_qp_attr_mask_IB_QP_TIMEOUT).then_some(a.timeout),
            retry_cnt: pick(ib_qp_attr_mask_IB_QP_RETRY_CNT).then_some(a.retry_cnt),
            rnr_retry: pick(ib_qp_attr_mask_IB_QP_RNR_RETRY).then_some(a.rnr_retry),
            rq_psn: pick(ib_qp_attr_mask_IB_QP_RQ_PSN).then_some(a.rq_psn),
            max_rd_atomic: pick(ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC).then_some(a.max_rd_atomic),
            alt_path: pick(ib_qp_attr_mask_IB_QP_ALT_PATH).then(|| {
                (
                    // SAFETY: Valid per the caller.
                    unsafe { AddressVector::from_raw(&a.alt_ah_attr) },
                    a.alt_port_num,
                    a.alt_pkey_index,
                    a.alt_timeout,
                )
            }),
            min_rnr_timer: pick(ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER).then_some(a.min_rnr_timer),
            sq_psn: pick(ib_qp_attr_mask_IB_QP_SQ_PSN).then_some(a.sq_psn),
            max_dest_rd_atomic: pick(ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC)
                .then_some(a.max_dest_rd_atomic),
            path_mig_state: pick(ib_qp_attr_mask_IB_QP_PATH_MIG_STATE).then_some(a.path_mig_state),
            cap: pick(ib_qp_attr_mask_IB_QP_CAP).then(|| QpCap::from_raw(&a.cap)),
            dest_qp_num: pick(ib_qp_attr_mask_IB_QP_DEST_QPN).then_some(a.dest_qp_num),
            rate_limit: pick(ib_qp_attr_mask_IB_QP_RATE_LIMIT).then_some(a.rate_limit),
        })
    }
}

/// The attributes a QP keeps: what `modify_qp` sets (through a [`QpAttr`]) and
/// `query_qp` reports.
#[derive(Clone, Debug, Default)]
pub(crate) struct QpAttrs {
    pub(crate) path_mtu: Option<Mtu>,
    pub(crate) path_mig_state: u32,
    pub(crate) qkey: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) dest_qp_num: u32,
    pub(crate) access_flags: AccessFlags,
    pub(crate) av: AddressVector,
    pub(crate) alt_av: AddressVector,
    pub(crate) pkey_index: u16,
    pub(crate) alt_pkey_index: u16,
    pub(crate) en_sqd_async_notify: bool,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) port_num: u32,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) alt_port_num: u32,
    pub(crate) alt_timeout: u8,
}

/// Everything a `query_qp` reports.
#[derive(Clone, Debug)]
pub(crate) struct QpQuery {
    pub(crate) state: QpState,
    /// The capacities of the QP's queues.
    pub(crate) cap: QpCap,
    pub(crate) sq_draining: bool,
    /// Part of the init attributes a query reports.
    pub(crate) sq_sig_all: bool,
    pub(crate) attrs: QpAttrs,
}

impl QpQuery {
    fn write_to(&self, a: &mut bindings::ib_qp_attr, init: &mut bindings::ib_qp_init_attr) {
        *a = pin_init::zeroed();
        let state = self.state.to_raw();
        a.qp_state = state;
        a.cur_qp_state = state;
        a.sq_draining = self.sq_draining.into();
        self.cap.write_to(&mut a.cap);
        // The rest of the init attributes (CQs, SRQ, type) ib_core fills in itself.
        self.cap.write_to(&mut init.cap);
        init.sq_sig_type = if self.sq_sig_all {
            bindings::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            bindings::ib_sig_type_IB_SIGNAL_REQ_WR
        };
        self.attrs.write_to(a);
    }
}

impl QpAttrs {
    fn write_to(&self, a: &mut bindings::ib_qp_attr) {
        a.path_mtu = self.path_mtu.unwrap_or(Mtu::Mtu256).to_raw();
        a.path_mig_state = self.path_mig_state;
        a.qkey = self.qkey;
        a.rq_psn = self.rq_psn;
        a.sq_psn = self.sq_psn;
        a.dest_qp_num = self.dest_qp_num;
        a.qp_access_flags = self.access_flags.bits() as i32;
        self.av.write_to(&mut a.ah_attr);
        self.alt_av.write_to(&mut a.alt_ah_attr);
        a.pkey_index = self.pkey_index;
        a.alt_pkey_index = self.alt_pkey_index;
        a.en_sqd_async_notify = self.en_sqd_async_notify.into();
        a.max_rd_atomic = self.max_rd_atomic;
        a.max_dest_rd_atomic = self.max_dest_rd_atomic;
        a.min_rnr_timer = self.min_rnr_timer;
        a.port_num = self.port_num;
        a.timeout = self.timeout;
        a.retry_cnt = self.retry_cnt;
        a.rnr_retry = self.rnr_retry;
        a.alt_port_num = self.alt_port_num;
        a.alt_timeout = self.alt_timeout;
    }
}

/// Asynchronous events of a QP (`enum ib_event_type`, the QP-affiliated ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpEvent {
    /// The send queue drained after a move to SQD with notification asked for.
    SqDrained,
    /// An SRQ-attached QP in the error state will take no more receives from the SRQ.
    LastWqeReached,
    /// A QP in RTR received its first packet (`IB_EVENT_COMM_EST`).
    CommEst,
    /// The responder found a request invalid, and the QP is in the error state
    /// (`IB_EVENT_QP_REQ_ERR`).
    ReqErr,
    /// The responder refused a remote access, and the QP is in the error state
    /// (`IB_EVENT_QP_ACCESS_ERR`).
    AccessErr,
    /// The QP could not report a completion (its CQ overflowed) and is in the error
    /// state: a local work queue catastrophic error (`IB_EVENT_QP_FATAL`).
    Fatal,
}

impl QpEvent {
    /// The C event type.
    fn to_raw(self) -> bindings::ib_event_type {
        match self {
            Self::SqDrained => bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
            Self::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
            Self::CommEst => bindings::ib_event_type_IB_EVENT_COMM_EST,
            Self::ReqErr => bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
            Self::AccessErr => bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            Self::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
        }
    }
}

/// The verbs of a queue pair: what a driver's QP data (`T::Qp`) implements.
///
/// A driver without `create_qp` has no QPs: the kind is left out of the ops table and
/// ib_core refuses QPs with `EOPNOTSUPP`. One with it implements `modify_qp`,
/// `destroy_qp`, `post_send` and `post_recv` too. Without QPs (or without MRs, see
/// [`super::mr::MrOps`]) ib_core does not offer the device to its kernel clients (MAD,
/// connection managers, ULPs): it is not a kernel-verbs provider.
#[vtable]
pub(crate) trait QpOps<T: Driver>: Sized + Send + Sync {
    /// A queue pair is created, for a process (`user`) or a kernel consumer.
    ///
    /// `events` reaches the consumer's event handler until the QP is destroyed. The
    /// capacities returned are what the QP's queues actually hold.
    fn create_qp(
        _dev: &Device<T>,
        _init: &QpInit<'_, T>,
        _user: Option<&UserCall<'_, T>>,
        _events: &Arc<QpEvents>,
    ) -> Result<QpCreated<Self>> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The consumer changes a QP's state and attributes.
    fn modify_qp(_qp: &Qp<T>, _attr: &QpAttr, _user: Option<&UserCall<'_, T>>) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The consumer asks for a QP's state and attributes.
    fn query_qp(_qp: &Qp<T>) -> QpQuery {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A QP is about to be destroyed: once this returns, nothing of it may run.
    ///
    /// ib_core frees the QP right after; its data is dropped in place just before.
    fn destroy_qp(_qp: &Qp<T>) {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A process rang the send doorbell: new work requests are in the QP's send ring.
    /// May be called in atomic context. Without it, a process's post fails.
    fn doorbell(_qp: &Qp<T>) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The kernel posts one send work request (of a chain: each in turn until one
    /// fails). May be called in atomic context.
    fn post_send(_qp: &Qp<T>, _wr: &SendWr<'_>) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The kernel posts one receive work request, as [`QpOps::post_send`].
    fn post_recv(_qp: &Qp<T>, _wr: &RecvWr<'_>) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A UD QP joins the multicast group `gid`.
    fn attach_mcast(_qp: &Qp<T>, _gid: &[u8; 16]) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A UD QP leaves the multicast group `gid`.
    fn detach_mcast(_qp: &Qp<T>, _gid: &[u8; 16]) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

#[vtable]
impl<T: Driver> QpOps<T> for Absent {}

/// The consumer's event callback of one QP ([`Events`]).
pub(crate) type QpEvents = Events<bindings::ib_qp>;

impl QpEvents {
    /// Raises `event` on the QP, if it still exists.
    pub(crate) fn raise(&self, event: QpEvent) {
        self.raise_raw(event.to_raw());
    }
}

/// The kind of a queue pair.
pub(crate) enum QpKind {}

impl<T: Driver> Kind<T> for QpKind {
    type Raw = bindings::ib_qp;
    type Events = Arc<QpEvents>;
    type Data = T::Qp;
}

/// A queue pair of driver `T`.
pub(crate) type Qp<T> = Object<T, QpKind>;

impl<T: Driver> Qp<T> {
    /// The QP's number.
    pub(crate) fn qp_num(&self) -> u32 {
        // SAFETY: Set at create and never changed.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// The QP's type.
    pub(crate) fn qp_type(&self) -> QpType {
        // SAFETY: Set by ib_core before create, never changed; create checked it.
        QpType::from_raw(unsafe { (*self.as_raw()).qp_type }).unwrap_or(QpType::Rc)
    }
}

/// Fills in the QP verbs of an ops table.
pub(super) fn set_ops<T: Driver>(ops: &mut bindings::ib_device_ops) {
    const {
        assert!(
            !T::Qp::HAS_CREATE_QP
                || (T::Qp::HAS_MODIFY_QP
                    && T::Qp::HAS_DESTROY_QP
                    && T::Qp::HAS_POST_SEND
                    && T::Qp::HAS_POST_RECV),
            "create_qp needs modify_qp, destroy_qp, post_send and post_recv"
        )
    };
    if !T::Qp::HAS_CREATE_QP {
        return;
    }
    ops.size_ib_qp = Qp::<T>::block_size();
    ops.create_qp = Some(create_qp::<T>);
    ops.modify_qp = Some(modify_qp::<T>);
    if T::Qp::HAS_QUERY_QP {
        ops.query_qp = Some(query_qp::<T>);
    }
    ops.destroy_qp = Some(destroy_qp::<T>);
    ops.post_send = Some(post_send::<T>);
    ops.post_recv = Some(post_recv::<T>);
    const {
        assert!(
            T::Qp::HAS_ATTACH_MCAST == T::Qp::HAS_DETACH_MCAST,
            "attach_mcast and detach_mcast go together"
        )
    };
    if T::Qp::HAS_ATTACH_MCAST {
        ops.attach_mcast = Some(attach_mcast::<T>);
        ops.detach_mcast = Some(detach_mcast::<T>);
    }
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback
/// documents: `qp` a zeroed block of `size_ib_qp` bytes for our device (device, PD, CQs,
/// SRQ set), `udata` null for a kernel consumer, else the driver udata of the call.
unsafe extern "C" fn create_qp<T: Driver>(
    qp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: Per the function's contract.
        let (ib, a) = unsafe { (&*qp, &mut *init) };
        if a.send_cq.is_null() || a.recv_cq.is_null() || ib.pd.is_null() {
            return Err(EINVAL);
        }
        let qp_type = QpType::from_raw(a.qp_type).ok_or_else(super::device::eopnotsupp)?;
        // SAFETY: ib_core set these to live objects of our device for the call.
        let (dev, send_cq, recv_cq) = unsafe {
            (
                device_of::<T, _>(qp),
                Cq::<T>::from_raw(a.send_cq),
                Cq::<T>::from_raw(a.recv_cq),
            )
        };
        let qinit = QpInit {
            qp_type,
            cap: QpCap::from_raw(&a.cap),
            sq_sig_all: a.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            send_cq,
            recv_cq,
            // SAFETY: ib_core set `srq` to null or a live SRQ of our device.
            srq: (!a.srq.is_null()).then(|| unsafe { Srq::<T>::from_raw(a.srq) }),
            create_flags: a.create_flags,
            wc_qp: WcQp::new(qp),
            pd: PdId::of(ib.pd),
        };
        // SAFETY: Per the function's contract.
        let user = unsafe { UserCall::<T>::from_udata(udata) };
        // SAFETY: Nothing of the block is initialised yet; ib_core set the handler.
        let (cap, qp_num) = unsafe {
            Qp::<T>::create_with_events(qp, |events| {
                T::Qp::create_qp(dev, &qinit, user.as_ref(), events)
                    .map(|made| (made.data, (made.cap, made.qp_num)))
            })?
        };
        cap.write_to(&mut a.cap);
        // SAFETY: `qp_num` is a plain field that ib_core reads after we return.
        unsafe { (*qp).qp_num = qp_num };
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn modify_qp<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core calls this on a live QP of our device.
        let qp = unsafe { Qp::<T>::from_raw(qp) };
        // SAFETY: `attr` is valid for the call, with its GID attributes resolved by
        // ib_core for the address vectors the mask selects.
        let attr = unsafe { QpAttr::from_raw(&*attr, mask as u32) }?;
        // SAFETY: `udata` is null or the driver udata of a uverbs call on our device.
        let user = unsafe { UserCall::from_udata(udata) };
        T::Qp::modify_qp(qp, &attr, user.as_ref())?;
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn query_qp<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _mask: c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> c_int {
    // SAFETY: ib_core calls this on a live QP of our device.
    let qp = unsafe { Qp::<T>::from_raw(qp) };
    // SAFETY: `attr` and `init` are valid for writes for the call.
    let (attr, init) = unsafe { (&mut *attr, &mut *init) };
    T::Qp::query_qp(qp).write_to(attr, init);
    0
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn destroy_qp<T: Driver>(
    qp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: ib_core calls this once, on a live QP of our device that is attached to no
    // multicast group.
    T::Qp::destroy_qp(unsafe { Qp::<T>::from_raw(qp) });
    // SAFETY: As above; the driver has quiesced the QP.
    unsafe { Qp::<T>::drop_in_place(qp) };
    0
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn post_send<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad: *mut *const bindings::ib_send_wr,
) -> c_int {
    // SAFETY: ib_core calls this on a live QP of our device.
    let user = unsafe { !(*qp).uobject.is_null() };
    // SAFETY: As above.
    let qp = unsafe { Qp::<T>::from_raw(qp) };
    if wr.is_null() {
        // A process's doorbell: its work requests are in its ring.
        if const { !T::Qp::HAS_DOORBELL } {
            return super::device::eopnotsupp().to_errno();
        }
        return from_result(|| T::Qp::doorbell(qp).map(|()| 0));
    }
    if user {
        // A process's work requests go through its ring; uverbs' own post command would
        // hand over addresses the process chose, which a `SendWr` must never carry (its
        // inline data is copied from kernel memory).
        // SAFETY: `bad` is valid for writes for the call.
        unsafe { *bad = wr };
        return EINVAL.to_errno();
    }
    let ud = matches!(qp.qp_type(), QpType::Ud | QpType::Gsi | QpType::Smi);
    // SAFETY: `wr` heads a chain of valid requests for the call, of the kind the QP's type
    // says.
    for w in unsafe { SendWr::chain(wr, ud) } {
        if let Err(e) = T::Qp::post_send(qp, &w) {
            // SAFETY: `bad` is valid for writes for the call.
            unsafe { *bad = w.as_ptr() };
            return e.to_errno();
        }
    }
    0
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn post_recv<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: ib_core calls this on a live QP of our device.
    let qp = unsafe { Qp::<T>::from_raw(qp) };
    // SAFETY: `wr` heads a chain of valid requests and `bad` is valid for writes, for the
    // call.
    unsafe { RecvWr::post_chain(wr, bad, |w| T::Qp::post_recv(qp, w)) }
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn attach_mcast<T: Driver>(
    qp: *mut bindings::ib_qp,
    gid: *mut bindings::ib_gid,
    _lid: u16,
) -> c_int {
    // SAFETY: ib_core calls this on a live QP of our device; `gid` is valid.
    let (qp, gid) = unsafe { (Qp::<T>::from_raw(qp), (*gid).raw) };
    from_result(|| T::Qp::attach_mcast(qp, &gid).map(|()| 0))
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn detach_mcast<T: Driver>(
    qp: *mut bindings::ib_qp,
    gid: *mut bindings::ib_gid,
    _lid: u16,
) -> c_int {
    // SAFETY: ib_core calls this on a live QP of our device; `gid` is valid.
    let (qp, gid) = unsafe { (Qp::<T>::from_raw(qp), (*gid).raw) };
    from_result(|| T::Qp::detach_mcast(qp, &gid).map(|()| 0))
}

#[cfg(CONFIG_RDMA_RXE_RS_KUNIT_TEST)]
#[kernel::macros::kunit_tests(rxe_rs_qp_attr)]
mod tests {
    use super::*;
    use bindings::*;

    /// Reads `a` under `mask`; refuses a mask that selects an address vector (these
    /// tests have none).
    fn read(a: &ib_qp_attr, mask: u32) -> Result<QpAttr> {
        if mask & (ib_qp_attr_mask_IB_QP_AV | ib_qp_attr_mask_IB_QP_ALT_PATH) != 0 {
            return Err(EINVAL);
        }
        // SAFETY: No address vector is selected, so none is read.
        unsafe { QpAttr::from_raw(a, mask) }
    }

    #[test]
    fn only_masked_attributes_are_read() -> Result {
        let a = ib_qp_attr {
            qp_state: ib_qp_state_IB_QPS_INIT,
            timeout: 14,
            rq_psn: 0x12_3456,
            qkey: 7,
            dest_qp_num: 0x11,
            path_mtu: 0,
            ..Default::default()
        };
        let q = read(
            &a,
            ib_qp_attr_mask_IB_QP_STATE | ib_qp_attr_mask_IB_QP_TIMEOUT,
        )?;
        assert_eq!(q.state, Some(QpState::Init));
        assert_eq!(q.timeout, Some(14));
        assert!(q.rq_psn.is_none() && q.qkey.is_none() && q.dest_qp_num.is_none());
        assert!(q.path_mtu.is_none() && q.cur_state.is_none() && q.av.is_none());
        assert!(!q.mask.has_unknown_bits());
        let q = read(
            &a,
            ib_qp_attr_mask_IB_QP_RQ_PSN | ib_qp_attr_mask_IB_QP_QKEY,
        )?;
        assert_eq!(
            (q.rq_psn, q.qkey, q.state),
            (Some(0x12_3456), Some(7), None)
        );
        Ok(())
    }

    /// A state or MTU that does not exist is refused when it is selected.
    #[test]
    fn values_outside_the_enums_are_refused() {
        let a = ib_qp_attr {
            qp_state: 99,
            cur_qp_state: 7,
            path_mtu: 6,
            ..Default::default()
        };
        assert!(read(&a, ib_qp_attr_mask_IB_QP_STATE).is_err_and(|e| e == EINVAL));
        assert!(read(&a, ib_qp_attr_mask_IB_QP_CUR_STATE).is_err_and(|e| e == EINVAL));
        assert!(read(&a, ib_qp_attr_mask_IB_QP_PATH_MTU).is_err_and(|e| e == EINVAL));
        assert!(read(&a, ib_qp_attr_mask_IB_QP_TIMEOUT).is_ok());
        assert!(read(&a, 1 << 31).is_ok_and(|q| q.mask.has_unknown_bits()));
    }

    /// States and types reach ib_core's state machine as the values it knows.
    #[test]
    fn transitions_judged_with_ib_cores_values() {
        // Not a glob import: `Err` would shadow the `Result` variant the asserts use.
        use QpState::{Init, Reset, Rts};
        let all = [
            Reset,
            Init,
            QpState::Rtr,
            Rts,
            QpState::Sqd,
            QpState::Sqe,
            QpState::Err,
        ];
        for s in all {
            assert_eq!(QpState::from_raw(s.to_raw()), Some(s));
        }
        for t in [
            QpType::Smi,
            QpType::Gsi,
            QpType::Rc,
            QpType::Uc,
            QpType::Ud,
            QpType::RawIpv6,
            QpType::RawEthertype,
            QpType::RawPacket,
            QpType::XrcIni,
            QpType::XrcTgt,
            QpType::Driver,
        ] {
            assert_eq!(QpType::from_raw(t.to_raw()), Some(t));
        }
        let m = |bits: u32| AttrMask(ib_qp_attr_mask_IB_QP_STATE | bits);
        let to_init = ib_qp_attr_mask_IB_QP_PKEY_INDEX | ib_qp_attr_mask_IB_QP_PORT;
        let rc_init = to_init | ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
        assert!(transition_ok(Reset, Init, QpType::Rc, m(rc_init)));
        assert!(!transition_ok(Reset, Init, QpType::Rc, m(to_init)));
        assert!(transition_ok(
            Reset,
            Init,
            QpType::Ud,
            m(to_init | ib_qp_attr_mask_IB_QP_QKEY)
        ));
        assert!(!transition_ok(Reset, Init, QpType::Ud, m(rc_init)));
        assert!(!transition_ok(Reset, Rts, QpType::Rc, m(rc_init)));
        // Any state may go to RESET, and any but RESET to ERR.
        for s in all {
            assert!(transition_ok(s, Reset, QpType::Rc, m(0)));
            assert_eq!(transition_ok(s, QpState::Err, QpType::Uc, m(0)), s != Reset);
        }
    }
}
