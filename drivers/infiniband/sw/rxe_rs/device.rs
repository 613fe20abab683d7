// SPDX-License-Identifier: GPL-2.0

//! The rxe_rs device: creation on top of a netdev, attributes, ports.
//!
//! A device has one port, bound to the netdev it was created on. It presents itself as
//! rxe does (driver id `RDMA_DRIVER_RXE`, uverbs ABI 2), which is what librxe binds to.
//! Its GIDs are filled by ib_core from the netdev's IP addresses; its port state is read
//! from the netdev on every query.

use crate::ib::{
    device::{
        cap, port_cap, AtomicCap, Device, DeviceAttr, DeviceInfo, Driver, LinkLayer, Mtu,
        PhysState, PortAttr, PortImmutable, PortState,
    },
    link::LinkDriver,
    netdev::NetDevice,
    ucontext::Ucontext,
    udata::Udata,
};
use crate::param::{self, Quota};
use crate::{pd::RxePd, ucontext::RxeUcontext};
use kernel::{
    c_str,
    prelude::*,
    str::CStr,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// The one port of a device.
const PORT: u32 = 1;

/// The driver: the verbs of an rxe_rs device.
pub(crate) struct RxeRs;

/// Per-device state.
pub(crate) struct RxeDev {
    /// The GUID of node and system image (EUI-64 of the netdev's MAC), network order.
    guid: [u8; 8],
    /// The active path MTU, as `Mtu as u32`; follows the netdev's MTU.
    active_mtu: Atomic<u32>,
    ucontexts: Arc<Quota>,
    pds: Arc<Quota>,
}

impl RxeDev {
    fn new(ndev: &NetDevice, guid: [u8; 8]) -> Result<Self> {
        Ok(Self {
            guid,
            active_mtu: Atomic::new(path_mtu(ndev.mtu()) as u32),
            ucontexts: Quota::new(param::MAX_UCONTEXT)?,
            pds: Quota::new(param::MAX_PD)?,
        })
    }

    /// Follows a change of the netdev's MTU.
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

impl Driver for RxeRs {
    type Data = RxeDev;
    type Ucontext = RxeUcontext;
    type Pd = RxePd;

    /// The rxe user ABI version librxe accepts.
    const UVERBS_ABI_VER: u32 = 2;

    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr> {
        Ok(DeviceAttr {
            sys_image_guid: dev.guid,
            max_mr_size: param::MAX_MR_SIZE,
            page_size_cap: param::PAGE_SIZE_CAP,
            vendor_id: param::VENDOR_ID,
            max_qp: param::MAX_QP,
            max_qp_wr: param::MAX_QP_WR,
            // Only what holds today; the flags grow with the verbs.
            device_cap_flags: cap::PORT_ACTIVE_EVENT | cap::SYS_IMAGE_GUID,
            allow_user_unregister: true,
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
        })
    }

    fn port_immutable(_dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        if port != PORT {
            return Err(EINVAL);
        }
        Ok(PortImmutable {
            pkey_tbl_len: param::PORT_PKEY_TBL_LEN.into(),
            gid_tbl_len: param::PORT_GID_TBL_LEN,
            roce_v2: true,
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

    fn alloc_ucontext(
        dev: &Device<Self>,
        _udata: Option<&Udata>,
    ) -> impl PinInit<RxeUcontext, Error> {
        // librxe sends no driver data with this command and expects none back.
        Quota::charge(&dev.ucontexts).map(RxeUcontext::new)
    }

    fn mmap(_ctx: &Ucontext<Self>, _offset: u64, _len: u64) -> Result {
        // There is nothing to map until the device has rings.
        Err(EINVAL)
    }

    fn alloc_pd(dev: &Device<Self>, _udata: Option<&Udata>) -> impl PinInit<RxePd, Error> {
        Quota::charge(&dev.pds).map(RxePd::new)
    }
}

/// The `rxe_rs` link type.
pub(crate) struct RxeLink;

impl LinkDriver for RxeLink {
    const TYPE: &'static CStr = c_str!("rxe_rs");

    fn newlink(name: &CStr, ndev: &NetDevice) -> Result {
        // One device per netdev: received packets are demultiplexed by netdev.
        if Device::<RxeRs>::find_by_netdev(ndev).is_some() {
            pr_err!("rxe_rs: a device already exists on this netdev\n");
            return Err(EEXIST);
        }
        let guid = ndev.eui64();
        let info = DeviceInfo {
            name,
            node_desc: c_str!("rxe_rs"),
            node_guid: guid,
            num_comp_vectors: crate::ib::device::num_possible_cpus(),
        };
        Device::<RxeRs>::register(&info, ndev, RxeDev::new(ndev, guid))
            .inspect_err(|e| pr_err!("rxe_rs: cannot add {}: {:?}\n", name, e))
    }
}
