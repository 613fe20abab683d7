// SPDX-License-Identifier: GPL-2.0

//! The rxe_rs device: creation on top of a netdev, attributes and ports ([`RxeRs`]'s
//! [`Driver`] impl). The verbs of each object are implemented in its file (`CqOps` for
//! [`RxeCq`] in `cq.rs`, `QpOps` for [`RxeQp`] in `qp/mod.rs`, and so on).
//!
//! A device has one port, bound to the netdev it was created on. It presents itself as
//! rxe does (driver id `RDMA_DRIVER_RXE`, uverbs ABI 2), which is what librxe binds to.
//! Its GIDs are filled by ib_core from the netdev's IP addresses; its port state is read
//! from the netdev on every query.

use crate::ib::object::Quota;
use crate::ib::{
    device::{
        cap, port_cap, AtomicCap, Device, DeviceAttr, DeviceInfo, DeviceModify, Driver, DriverId,
        LinkLayer, Mtu, PhysState, PortAttr, PortImmutable, PortProtocol, PortState, WriteCmds,
    },
    link::LinkDriver,
    mad::PmaCounters,
    netdev::{NetDevice, NetDeviceRef},
    stats::StatDesc,
    sync::{new_spinlock_irq, SpinLockIrq},
    task::Workqueue,
};
use crate::param::{self, PORT};
use crate::recv::{Recv, Source};
use crate::stats::{Counter, Counters};
use crate::sw::{
    skb::Skb,
    udp::{TunnelUse, Tunnels},
};
use crate::{
    ah::{ah_table, AhTable, RxeAh},
    cq::RxeCq,
    fault::FaultUsers,
    loopback::{LoopSink, Loopback},
    mcast::McastTable,
    mr::{mr_table, mw_table, AccessError, KeyTable, Region, RxeMr, RxeMw},
    pd::RxePd,
    qp::{owed::OwedWork, qp_table, QpTable, RxeQp},
    srq::{RxeSrq, SrqNumbers},
    ucontext::RxeUcontext,
    RxeRs,
};
use kernel::{
    c_str,
    prelude::*,
    str::CStr,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
    ThisModule,
};

/// Per-device state.
#[pin_data]
pub(crate) struct RxeDev {
    /// The GUID of the node (EUI-64 of the netdev's MAC), network order.
    guid: [u8; 8],
    /// The GUID of the system image, network order as `u64::from_ne_bytes`: the node's
    /// until a kernel caller sets another (`modify_device`).
    sys_image_guid: Atomic<u64>,
    /// The netdev, held for the device's lifetime: the data path sends through it
    /// without asking ib_core (whose lookup takes a lock that is not softirq-safe).
    pub(crate) ndev: NetDeviceRef,
    /// The active path MTU, as `Mtu as u32`; follows the netdev's MTU.
    active_mtu: Atomic<u32>,
    /// Whether the port was down at the netdev's last state event (changed under the
    /// RTNL only, by the netdev notifier).
    port_down: Atomic<bool>,
    pub(crate) ucontexts: Arc<Quota>,
    pub(crate) pds: Arc<Quota>,
    pub(crate) cqs: Arc<Quota>,
    pub(crate) qps: Arc<Quota>,
    pub(crate) srqs: Arc<Quota>,
    pub(crate) srq_numbers: SrqNumbers,
    pub(crate) ahs: Arc<Quota>,
    pub(crate) ah_table: Arc<AhTable>,
    pub(crate) mrs: Arc<Quota>,
    pub(crate) mws: Arc<Quota>,
    pub(crate) mr_table: Arc<KeyTable>,
    pub(crate) mw_table: Arc<KeyTable>,
    #[pin]
    pub(crate) mcast: McastTable,
    /// The slots for faults of on-demand MRs, per user.
    #[pin]
    pub(crate) fault_users: FaultUsers,
    /// The numbers of the device's QPs.
    #[pin]
    pub(crate) qp_table: QpTable,
    /// What `rdma statistic` shows.
    pub(crate) counters: Counters,
    /// The packets the device sends itself.
    pub(crate) lo: Loopback<RxeRs>,
    pub(crate) owed: OwedWork,
    /// Serialises atomic operations on registered memory, device-wide.
    #[pin]
    atomic_lock: SpinLockIrq<()>,
    /// Where a QP's requester and responder go on once a run spent its budget: of
    /// ordinary priority, so that a process (or a peer) that keeps its QP busy gets no
    /// more of a CPU than other processes do. Dropped before `wq`, waiting for what is
    /// still queued.
    pub(crate) bulk_wq: Workqueue,
    /// Where completions and events are delivered from; dropped last of the device's
    /// state, after every object is gone, waiting for what is still queued.
    pub(crate) wq: Workqueue,
    /// The device's use of its namespace's RoCE v2 sockets: the last device there to go
    /// closes them.
    _tunnel: TunnelUse,
}

impl RxeDev {
    fn new(ndev: &NetDevice, guid: [u8; 8], tunnel: TunnelUse) -> impl PinInit<Self, Error> + '_ {
        try_pin_init!(Self {
            sys_image_guid: Atomic::new(u64::from_ne_bytes(guid)),
            guid,
            ndev: ndev.hold(),
            active_mtu: Atomic::new(path_mtu(ndev.mtu()) as u32),
            port_down: Atomic::new(ndev.port_state() == PortState::Down),
            ucontexts: Quota::new(param::MAX_UCONTEXT)?,
            pds: Quota::new(param::MAX_PD)?,
            cqs: Quota::new(param::MAX_CQ)?,
            qps: Quota::new(param::MAX_QP)?,
            srqs: Quota::new(param::MAX_SRQ)?,
            srq_numbers: SrqNumbers::new(),
            ahs: Quota::new(param::MAX_AH)?,
            ah_table: Arc::pin_init(ah_table(), GFP_KERNEL)?,
            mrs: Quota::new(param::MAX_MR)?,
            mws: Quota::new(param::MAX_MW)?,
            mr_table: Arc::pin_init(mr_table(), GFP_KERNEL)?,
            mw_table: Arc::pin_init(mw_table(), GFP_KERNEL)?,
            mcast <- McastTable::new(),
            fault_users <- FaultUsers::new(),
            qp_table <- qp_table(),
            counters: Counters::new(),
            lo: Loopback::new()?,
            owed: OwedWork::new()?,
            atomic_lock <- new_spinlock_irq!(()),
            bulk_wq: Workqueue::new(c_str!("rxe_rs_bulk"), false)?,
            wq: Workqueue::new(c_str!("rxe_rs"), true)?,
            _tunnel: tunnel,
        })
    }

    /// Applies an atomic operation to the 8 bytes at `va` of `mr`: `op` makes the new
    /// value from the old one. Returns the old value, or why the bytes cannot be
    /// reached (then nothing was written). Atomic against every other atomic of the
    /// device (the memory of a process is not locked against the process itself, as on
    /// any device).
    pub(crate) fn atomic(
        &self,
        mr: &Region,
        va: u64,
        op: impl FnOnce(u64) -> u64,
    ) -> Result<u64, AccessError> {
        let _guard = self.atomic_lock.lock();
        let mut b = [0u8; 8];
        mr.read(va, &mut b)?;
        let old = u64::from_ne_bytes(b);
        mr.write(va, &op(old).to_ne_bytes())?;
        Ok(old)
    }

    /// The active path MTU in bytes.
    pub(crate) fn mtu_bytes(&self) -> u32 {
        self.active_mtu().bytes()
    }

    /// Follows a change of the netdev's MTU.
    /// The netdev's state may have changed: the port is now in `state`. A port that
    /// goes down is counted in `link_downed`.
    pub(crate) fn port_changed(&self, state: PortState) {
        let down = state == PortState::Down;
        if self.port_down.xchg(down, Relaxed) != down && down {
            self.counters.inc(Counter::LinkDowned);
        }
    }

    pub(crate) fn set_mtu(dev: &Device<RxeRs>, ndev_mtu: u32) {
        dev.active_mtu.store(path_mtu(ndev_mtu) as u32, Relaxed);
    }

    fn active_mtu(&self) -> Mtu {
        match self.active_mtu.load(Relaxed) {
            0 => Mtu::Mtu256,
            1 => Mtu::Mtu512,
            2 => Mtu::Mtu1024,
            3 => Mtu::Mtu2048,
            _ => Mtu::Mtu4096,
        }
    }
}

/// The path MTU a netdev MTU allows once RoCE's headers are taken off (256 at least).
fn path_mtu(ndev_mtu: u32) -> Mtu {
    Mtu::fitting(ndev_mtu.saturating_sub(param::MAX_HDR_LENGTH)).unwrap_or(Mtu::Mtu256)
}

impl LoopSink for RxeRs {
    fn loopback(dev: &Device<Self>) -> &Loopback<Self> {
        &dev.lo
    }

    fn deliver(dev: &Device<Self>, skb: Skb) {
        crate::recv::deliver(dev, skb, Source::Loopback);
    }

    fn resume(dev: &Device<Self>, qpn: u32) {
        if let Some(qp) = dev.qp_table.get(qpn) {
            RxeQp::resume(dev, &qp);
        }
    }
}

#[vtable]
impl Driver for RxeRs {
    type Data = RxeDev;
    type Ucontext = RxeUcontext;
    type Pd = RxePd;
    type Cq = RxeCq;
    type Qp = RxeQp;
    type Srq = RxeSrq;
    type Ah = RxeAh;
    type Mr = RxeMr;
    type Mw = RxeMw;

    const MODULE: &'static ThisModule = &crate::THIS_MODULE;

    /// librxe's, which C rxe speaks too.
    const DRIVER_ID: DriverId = DriverId::RXE;

    /// The rxe user ABI version librxe accepts.
    const UVERBS_ABI_VER: u32 = 2;

    /// librxe rings its send doorbell with the legacy post-send command and arms CQs
    /// through the kernel.
    const WRITE_CMDS: WriteCmds = WriteCmds::POST_SEND.and(WriteCmds::REQ_NOTIFY_CQ);

    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr> {
        Ok(DeviceAttr {
            sys_image_guid: dev.sys_image_guid.load(Relaxed).to_ne_bytes(),
            max_mr_size: param::MAX_MR_SIZE,
            page_size_cap: param::PAGE_SIZE_CAP,
            vendor_id: param::VENDOR_ID,
            max_qp: param::MAX_QP,
            max_qp_wr: param::MAX_QP_WR,
            // Only what holds today; the flags grow with the verbs.
            device_cap_flags: cap::PORT_ACTIVE_EVENT
                | cap::SYS_IMAGE_GUID
                | cap::SRQ_RESIZE
                | cap::RC_RNR_NAK_GEN
                | cap::MEM_MGT_EXTENSIONS
                | cap::MEM_WINDOW
                | cap::MEM_WINDOW_TYPE_2B
                | cap::FLUSH_GLOBAL
                | cap::FLUSH_PERSISTENT
                | cap::ATOMIC_WRITE,
            allow_user_unregister: true,
            on_demand_paging: true,
            max_send_sge: param::MAX_SGE,
            max_recv_sge: param::MAX_SGE,
            max_sge_rd: param::MAX_SGE_RD,
            max_cq: param::MAX_CQ,
            max_cqe: param::MAX_CQE,
            max_mr: param::MAX_MR,
            max_pd: param::MAX_PD,
            max_qp_rd_atom: param::MAX_QP_RD_ATOM,
            max_res_rd_atom: param::MAX_RES_RD_ATOM,
            max_qp_init_rd_atom: param::MAX_QP_INIT_RD_ATOM,
            atomic_cap: AtomicCap::Hca,
            max_mw: param::MAX_MW,
            max_mcast_grp: param::MAX_MCAST_GRP,
            max_mcast_qp_attach: param::MAX_MCAST_QP_ATTACH,
            max_total_mcast_qp_attach: param::MAX_TOTAL_MCAST_QP_ATTACH,
            max_ah: param::MAX_AH,
            max_srq: param::MAX_SRQ,
            max_srq_wr: param::MAX_SRQ_WR,
            max_srq_sge: param::MAX_SRQ_SGE,
            max_fast_reg_page_list_len: param::MAX_FAST_REG_PAGE_LIST_LEN,
            max_pkeys: param::MAX_PKEYS,
            local_ca_ack_delay: param::LOCAL_CA_ACK_DELAY,
        })
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr> {
        if port != PORT {
            return Err(EINVAL);
        }
        // The netdev is gone while the device is being taken down.
        let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
        let (active_speed, active_width) = dev.eth_speed(PORT)?;
        let state = ndev.port_state();
        let phys_state = if state == PortState::Active {
            PhysState::LinkUp
        } else if ndev.is_up() {
            PhysState::Polling
        } else {
            PhysState::Disabled
        };
        Ok(PortAttr {
            state,
            phys_state,
            max_mtu: Mtu::Mtu4096,
            active_mtu: dev.active_mtu(),
            gid_tbl_len: param::PORT_GID_TBL_LEN,
            port_cap_flags: port_cap::CM_SUP,
            max_msg_sz: param::PORT_MAX_MSG_SZ,
            pkey_tbl_len: param::PORT_PKEY_TBL_LEN,
            max_vl_num: param::PORT_MAX_VL_NUM,
            active_width,
            active_speed,
            qkey_viol_cntr: u32::try_from(dev.counters.get(Counter::QkeyViolation))
                .unwrap_or(u32::MAX),
            bad_pkey_cntr: u32::try_from(dev.counters.get(Counter::BadPkey)).unwrap_or(u32::MAX),
        })
    }

    fn modify_device(dev: &Device<Self>, m: &DeviceModify<'_>) -> Result {
        // Both are taken as they come, as rxe does; the node description is stored by
        // the layer.
        if let Some(guid) = m.sys_image_guid {
            dev.sys_image_guid.store(u64::from_ne_bytes(guid), Relaxed);
        }
        Ok(())
    }

    fn port_immutable(_dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        if port != PORT {
            return Err(EINVAL);
        }
        Ok(PortImmutable {
            pkey_tbl_len: param::PORT_PKEY_TBL_LEN.into(),
            gid_tbl_len: param::PORT_GID_TBL_LEN,
            protocol: PortProtocol::RoceV2,
        })
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        if port != PORT || index >= param::PORT_PKEY_TBL_LEN {
            return Err(EINVAL);
        }
        Ok(param::DEFAULT_PKEY)
    }

    fn link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }

    const SYSFS_PARENT: bool = true;

    fn pma_counters(dev: &Device<Self>, port: u32) -> Option<PmaCounters> {
        // What rxe reports (its port counters count the same bytes and packets); link
        // error counters are not reported (zero).
        let c = &dev.counters;
        (port == PORT).then(|| PmaCounters {
            link_downed: c.get(Counter::LinkDowned),
            xmit_bytes: c.get(Counter::SentBytes),
            rcv_bytes: c.get(Counter::RcvdBytes),
            xmit_packets: c.get(Counter::Sent),
            rcv_packets: c.get(Counter::Received),
        })
    }

    const PORT_STATS: &'static [StatDesc] = &crate::stats::NAMES;

    fn port_stats(dev: &Device<Self>, _port: u32, values: &mut [u64]) {
        dev.counters.read(values);
    }
}

/// The `rxe_rs` link type.
pub(crate) struct RxeLink;

/// rdma_rxe's link type `rxe`, registered in its place (module parameter
/// `link_type_rxe`): the same devices.
pub(crate) struct RxeTypeLink;

impl LinkDriver for RxeTypeLink {
    const TYPE: &'static CStr = c_str!("rxe");

    fn newlink(name: &CStr, ndev: &NetDevice) -> Result {
        RxeLink::newlink(name, ndev)
    }
}

impl LinkDriver for RxeLink {
    const TYPE: &'static CStr = c_str!("rxe_rs");

    fn newlink(name: &CStr, ndev: &NetDevice) -> Result {
        // One device per netdev: received packets are demultiplexed by netdev.
        if Device::<RxeRs>::find_by_netdev(ndev).is_some() {
            pr_err!("a device already exists on this netdev\n");
            return Err(EEXIST);
        }
        // ib_core gives a VLAN device's addresses to the device on its real netdev, and
        // none to a device on the VLAN device itself, which would have no GID to use.
        if ndev.vlan_real_dev().is_some() {
            pr_err!(
                "{}: not on a VLAN device: the device on its real netdev serves it\n",
                name
            );
            return Err(EPERM);
        }
        // The namespace's RoCE v2 sockets, made if this is its first device.
        let tunnel = Tunnels::<Recv>::open(ndev)
            .inspect_err(|e| pr_err!("no UDP port 4791 for {}: {:?}\n", name, e))?;
        let guid = ndev.eui64();
        let info = DeviceInfo {
            name,
            node_desc: c_str!("rxe_rs"),
            node_guid: guid,
            num_comp_vectors: crate::ib::device::num_possible_cpus(),
        };
        Device::<RxeRs>::register(&info, ndev, RxeDev::new(ndev, guid, tunnel))
            .inspect_err(|e| pr_err!("cannot add {}: {:?}\n", name, e))
    }
}
