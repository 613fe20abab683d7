// SPDX-License-Identifier: GPL-2.0

//! rdma_minimal: the smallest RDMA driver on rxe_rs's generic layer.
//!
//! A device on top of an Ethernet netdev (`rdma link add NAME type minimal netdev DEV`)
//! with no data path: processes open it, query it and its port, and allocate protection
//! domains and completion queues. It has no QPs, SRQs, AHs, MRs or MWs (`Absent`), so
//! ib_core answers `EOPNOTSUPP` for them, and without QPs and MRs ib_core does not offer
//! it to kernel consumers. Its port speaks no protocol that ib_core manages
//! ([`PortProtocol::None`]): no MADs, no connection manager, no GIDs.
//!
//! It is written against `rust/` (loaded as [`ib`]), which names no driver, and takes
//! two files of the software-RoCE part, librxe's ring layout (`rust/sw/queue.rs`) and
//! its ABI's offsets (`rust/sw/rxe_abi.rs`): it says it speaks rdma-core's rxe ABI (driver id `RXE`,
//! version 2), so that librxe, the provider that binds to that id, opens it; librxe's
//! CQs are rings it maps, which this device never writes. Like rxe_rs and rdma_rxe,
//! which speak the same ABI, it is not loaded together with either: unloading any of
//! them unregisters every device of that id.

#![deny(unsafe_code)]

// The layer serves drivers with every verb; this one uses a few of them.
#[allow(unsafe_code, dead_code, unused_imports)]
#[path = "../../rust/lib.rs"]
mod ib;

// The two files of the software-RoCE part this driver uses: librxe's ring layout and
// ABI. Neither has `unsafe` code.
#[allow(dead_code)]
#[path = "../../rust/sw/queue.rs"]
mod queue;
#[allow(dead_code)]
#[path = "../../rust/sw/rxe_abi.rs"]
mod rxe_abi;

use ib::{
    cq::{Cq, CqEvents, CqInit, CqOps, Notify},
    device::{
        eopnotsupp, num_possible_cpus, AllDevices, Device, DeviceAttr, DeviceInfo, Driver,
        DriverId, LinkLayer, Mtu, PhysState, PortAttr, PortImmutable, PortProtocol, PortState,
        WriteCmds,
    },
    link::{LinkDriver, Registration},
    mmap::UserMap,
    netdev::{NetDevice, NetdevEvent, NetdevEvents, Notifier},
    object::{Absent, Charge, Quota},
    pd::PdOps,
    ucontext::{UcontextOps, UserCall},
    udata::Udata,
    wr::WcOut,
};
use kernel::{c_str, page::PAGE_SIZE, prelude::*, sync::Arc};
use queue::{Geometry, Ring};

module! {
    type: MinimalModule,
    name: "rdma_minimal",
    authors: ["rxe_rs developers"],
    description: "A minimal RDMA device with no data path, on rxe_rs's generic layer",
    license: "GPL",
}

/// The only port.
const PORT: u32 = 1;
/// How many PDs a device holds at once.
const MAX_PD: u32 = 1024;
/// How many CQs a device holds at once.
const MAX_CQ: u32 = 1024;
/// The most entries a CQ holds.
const MAX_CQE: u32 = 4096;
/// rdma-core's rxe ABI version, which librxe checks.
const RXE_ABI_VERSION: u32 = 2;
/// The length of the P_Key table: the default P_Key only.
const PKEY_TBL_LEN: u16 = 1;
/// The default P_Key, full membership.
const DEFAULT_PKEY: u16 = 0xffff;

/// The loaded module. Fields are dropped in order: the link type first (no device can be
/// added), then every device, then the notifier that removes a device whose netdev goes.
#[pin_data]
struct MinimalModule {
    #[pin]
    link: Registration<Minimal>,
    devices: AllDevices<Minimal>,
    #[pin]
    notifier: Notifier<Minimal>,
}

impl kernel::InPlaceModule for MinimalModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            notifier <- Notifier::register(),
            devices: AllDevices::new(),
            link <- Registration::new(),
        })
    }
}

/// The driver.
struct Minimal;

/// A device's data.
#[pin_data]
struct MinimalDev {
    guid: [u8; 8],
    pds: Arc<Quota>,
    cqs: Arc<Quota>,
}

#[vtable]
impl Driver for Minimal {
    type Data = MinimalDev;
    type Ucontext = MinimalContext;
    type Pd = MinimalPd;
    type Cq = MinimalCq;
    type Qp = Absent;
    type Srq = Absent;
    type Ah = Absent;
    type Mr = Absent;
    type Mw = Absent;

    const MODULE: &'static ThisModule = &THIS_MODULE;
    const DRIVER_ID: DriverId = DriverId::RXE;
    const UVERBS_ABI_VER: u32 = RXE_ABI_VERSION;
    // librxe arms its CQs through the kernel.
    const WRITE_CMDS: WriteCmds = WriteCmds::REQ_NOTIFY_CQ;

    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr> {
        Ok(DeviceAttr {
            sys_image_guid: dev.guid,
            page_size_cap: PAGE_SIZE as u64,
            max_pd: MAX_PD,
            max_cq: MAX_CQ,
            max_cqe: MAX_CQE,
            max_pkeys: PKEY_TBL_LEN,
            ..DeviceAttr::default()
        })
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr> {
        if port != PORT {
            return Err(EINVAL);
        }
        let ndev = dev.netdev(PORT).ok_or(ENODEV)?;
        let (active_speed, active_width) = dev.eth_speed(PORT)?;
        let state = ndev.port_state();
        let phys_state = match (state, ndev.is_up()) {
            (PortState::Active, _) => PhysState::LinkUp,
            (_, true) => PhysState::Polling,
            (_, false) => PhysState::Disabled,
        };
        let mtu = Mtu::fitting(ndev.mtu()).unwrap_or(Mtu::Mtu256);
        Ok(PortAttr {
            state,
            phys_state,
            max_mtu: mtu,
            active_mtu: mtu,
            gid_tbl_len: 0,
            port_cap_flags: 0,
            max_msg_sz: 0,
            pkey_tbl_len: PKEY_TBL_LEN,
            max_vl_num: 1,
            active_width,
            active_speed,
            qkey_viol_cntr: 0,
            bad_pkey_cntr: 0,
        })
    }

    fn port_immutable(_dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        if port != PORT {
            return Err(EINVAL);
        }
        Ok(PortImmutable {
            pkey_tbl_len: PKEY_TBL_LEN.into(),
            gid_tbl_len: 0,
            protocol: PortProtocol::None,
        })
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        if port != PORT || index >= PKEY_TBL_LEN {
            return Err(EINVAL);
        }
        Ok(DEFAULT_PKEY)
    }

    fn link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        LinkLayer::Ethernet
    }
}

impl LinkDriver for Minimal {
    const TYPE: &'static CStr = c_str!("minimal");

    fn newlink(name: &CStr, ndev: &NetDevice) -> Result {
        // One device per netdev, so that the netdev's events name one device.
        if Device::<Minimal>::find_by_netdev(ndev).is_some() {
            return Err(EEXIST);
        }
        let guid = ndev.eui64();
        let info = DeviceInfo {
            name,
            node_desc: c_str!("rdma_minimal"),
            node_guid: guid,
            num_comp_vectors: num_possible_cpus(),
        };
        let data = try_pin_init!(MinimalDev {
            guid,
            pds: Quota::new(MAX_PD)?,
            cqs: Quota::new(MAX_CQ)?,
        });
        Device::<Minimal>::register(&info, ndev, data)
            .inspect_err(|e| pr_err!("rdma_minimal: cannot add {}: {:?}\n", name, e))
    }
}

impl NetdevEvents for Minimal {
    fn event(event: NetdevEvent, ndev: &NetDevice) {
        if event != NetdevEvent::Unregister {
            return;
        }
        // The device holds the netdev: it goes first, from ib_core's workqueue (this runs
        // under the RTNL, which unregistering may need).
        if let Some(dev) = Device::<Minimal>::find_by_netdev(ndev) {
            dev.unregister_queued();
        }
    }
}

/// A process's context: nothing beyond ib_core's.
struct MinimalContext;

#[vtable]
impl UcontextOps<Minimal> for MinimalContext {
    fn alloc_ucontext(_dev: &Device<Minimal>, _udata: Option<&Udata>) -> Result<Self> {
        // librxe sends no driver data with this command and expects none back.
        Ok(Self)
    }
}

/// A protection domain: its place in the device's limit.
struct MinimalPd {
    _charge: Charge,
}

#[vtable]
impl PdOps<Minimal> for MinimalPd {
    fn alloc_pd(dev: &Device<Minimal>, _udata: Option<&Udata>) -> impl PinInit<Self, Error> {
        Quota::charge(&dev.pds).map(|charge| Self { _charge: charge })
    }
}

/// A completion queue. Nothing ever completes on this device, so a process's CQ is a
/// ring in librxe's layout that stays empty, kept (with its offer to the process) until
/// the CQ is destroyed; a kernel consumer never gets one (see the module's header).
struct MinimalCq {
    _ring: Ring,
    _map: UserMap,
    _charge: Charge,
}

#[vtable]
impl CqOps<Minimal> for MinimalCq {
    fn create_cq(
        dev: &Device<Minimal>,
        attr: &CqInit,
        user: Option<&UserCall<'_, Minimal>>,
        _events: &Arc<CqEvents>,
    ) -> Result<(Self, u32)> {
        // Neither completion timestamps nor ignoring overruns is offered.
        if attr.flags != 0 {
            return Err(eopnotsupp());
        }
        let user = user.ok_or_else(eopnotsupp)?;
        if attr.cqe == 0 || attr.cqe > MAX_CQE {
            return Err(EINVAL);
        }
        let charge = Quota::charge(&dev.cqs)?;
        let ring = Ring::new(Geometry::new(attr.cqe, rxe_abi::UVERBS_WC_LEN)?)?;
        let map = UserMap::new(user.ctx, ring.mem())?;
        let cqe = ring.geometry().capacity();
        user.udata.respond(&rxe_abi::mminfo_of(&map))?;
        Ok((
            Self {
                _ring: ring,
                _map: map,
                _charge: charge,
            },
            cqe,
        ))
    }

    fn poll_cq(_cq: &Cq<Minimal>, _out: &mut WcOut<'_>) {
        // Nothing completes.
    }

    fn req_notify_cq(_cq: &Cq<Minimal>, _how: Notify, _report_missed: bool) -> bool {
        // No completion is ever waiting, and none will come to wake the consumer.
        false
    }
}
