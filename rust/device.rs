// SPDX-License-Identifier: GPL-2.0

//! RDMA devices: allocation, registration, attributes and the ops table.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates a device with `_ib_alloc_device()` as one block that starts with the
//! `struct ib_device` and continues with whatever the driver asked room for. Here that
//! block is a [`Device<T>`]: the C struct first, then the driver's [`Driver::Data`],
//! pin-initialised in place. The block belongs to ib_core from allocation on:
//!
//! ```text
//!  register() ──► _ib_alloc_device ──► init Data ──► set ops, netdev ──► ib_register_device
//!                       │ fails             │ fails          │ fails              │ ok
//!                       ▼                   ▼                ▼                    ▼
//!                    ENOMEM       ib_dealloc_device   ib_dealloc_device      registered
//!                                 (no ops yet: Data   (dealloc_driver
//!                                  was never made)     drops Data)
//!
//!  registered ──(rdma link delete | netdev unregister | module exit)──► ib_core unregisters,
//!     then calls dealloc_driver (Data is dropped here) and frees the block itself.
//! ```
//!
//! The driver never frees a device: it asks ib_core to unregister it and is told, through
//! `dealloc_driver`, when its data must go. Every callback in the ops table runs in process
//! context and may sleep, except the data-path ones (`req_notify_cq`, `poll_cq` and the post
//! calls), which may be called in atomic context.
//!
//! ib_core offers a device to kernel consumers only if it has every verb
//! `ib_device_check_mandatory()` lists; [`Driver`] and the object traits require those of
//! the device, PDs and CQs, and those of QPs and MRs with the kinds (a driver without
//! QPs or MRs is for processes only). The optional verbs go into the ops table only if
//! the driver implements them (`#[vtable]`'s `HAS_*`), each object's file filling in its
//! own.

use super::{
    ah::{self, AhOps},
    bindings,
    cq::{self, CqOps},
    mad::{self, PmaCounters},
    mr::{self, MrOps},
    mw::{self, MwOps},
    netdev::{NetDevice, NetDeviceRef},
    pd::{self, PdOps},
    qp::{self, OwnGid, QpOps},
    srq::{self, SrqOps},
    stats::StatDesc,
    ucontext::{self, UcontextOps},
    udata::Udata,
};
use core::{
    any::TypeId,
    marker::PhantomData,
    mem::{align_of, offset_of, size_of},
    ptr,
    ptr::NonNull,
};
use kernel::{
    error::{from_result, to_result},
    ffi::{c_int, c_ulong},
    prelude::*,
    str::CStr,
    sync::aref::{ARef, AlwaysRefCounted},
    types::Opaque,
    ThisModule,
};

/// `EOPNOTSUPP`, which the kernel crate does not define (its `ENOTSUPP` is another number).
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(bindings::EOPNOTSUPP as c_int))
}

/// The number of CPUs that can ever be online: one completion vector each.
pub(crate) fn num_possible_cpus() -> u32 {
    // SAFETY: Reads a global bitmap weight; safe at any time.
    unsafe { bindings::rxe_rs_num_possible_cpus() }
}

/// The state of a port (`enum ib_port_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PortState {
    /// No link.
    Down,
    /// Link up, not yet configured.
    Init,
    /// Configured, not yet active.
    Armed,
    /// Active: traffic flows.
    Active,
    /// Active, with deferred errors.
    ActiveDefer,
}

impl PortState {
    /// The state a C value stands for (an unknown one is `Down`).
    pub(crate) fn from_raw(raw: u32) -> Self {
        match raw {
            bindings::ib_port_state_IB_PORT_INIT => Self::Init,
            bindings::ib_port_state_IB_PORT_ARMED => Self::Armed,
            bindings::ib_port_state_IB_PORT_ACTIVE => Self::Active,
            bindings::ib_port_state_IB_PORT_ACTIVE_DEFER => Self::ActiveDefer,
            _ => Self::Down,
        }
    }

    fn to_raw(self) -> u32 {
        match self {
            Self::Down => bindings::ib_port_state_IB_PORT_DOWN,
            Self::Init => bindings::ib_port_state_IB_PORT_INIT,
            Self::Armed => bindings::ib_port_state_IB_PORT_ARMED,
            Self::Active => bindings::ib_port_state_IB_PORT_ACTIVE,
            Self::ActiveDefer => bindings::ib_port_state_IB_PORT_ACTIVE_DEFER,
        }
    }
}

/// The physical state of a port (`enum ib_port_phys_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum PhysState {
    /// Administratively down.
    Disabled,
    /// Up, looking for a link.
    Polling,
    /// Link up.
    LinkUp,
}

impl PhysState {
    fn to_raw(self) -> u8 {
        (match self {
            Self::Disabled => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED,
            Self::Polling => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING,
            Self::LinkUp => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP,
        }) as u8
    }
}

/// A path MTU (`enum ib_mtu`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Mtu {
    /// 256 bytes.
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes.
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes.
    Mtu4096,
}

impl Mtu {
    /// The MTU in bytes.
    pub(crate) fn bytes(self) -> u32 {
        256 << (self as u32)
    }

    /// The largest path MTU whose packets fit in `bytes`, if any.
    pub(crate) fn fitting(bytes: u32) -> Option<Self> {
        Some(match bytes {
            0..=255 => return None,
            256..=511 => Self::Mtu256,
            512..=1023 => Self::Mtu512,
            1024..=2047 => Self::Mtu1024,
            2048..=4095 => Self::Mtu2048,
            _ => Self::Mtu4096,
        })
    }

    /// The MTU a C value stands for, if it is one.
    pub(super) fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            bindings::ib_mtu_IB_MTU_256 => Self::Mtu256,
            bindings::ib_mtu_IB_MTU_512 => Self::Mtu512,
            bindings::ib_mtu_IB_MTU_1024 => Self::Mtu1024,
            bindings::ib_mtu_IB_MTU_2048 => Self::Mtu2048,
            bindings::ib_mtu_IB_MTU_4096 => Self::Mtu4096,
            _ => return None,
        })
    }

    /// The C value.
    pub(super) fn to_raw(self) -> u32 {
        match self {
            Self::Mtu256 => bindings::ib_mtu_IB_MTU_256,
            Self::Mtu512 => bindings::ib_mtu_IB_MTU_512,
            Self::Mtu1024 => bindings::ib_mtu_IB_MTU_1024,
            Self::Mtu2048 => bindings::ib_mtu_IB_MTU_2048,
            Self::Mtu4096 => bindings::ib_mtu_IB_MTU_4096,
        }
    }
}

/// Device capability flags (`enum ib_device_cap_flags`) a driver may advertise.
pub(crate) mod cap {
    use super::bindings;

    /// The device raises port state change events.
    pub(crate) const PORT_ACTIVE_EVENT: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64;
    /// `sys_image_guid` is meaningful.
    pub(crate) const SYS_IMAGE_GUID: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64;
    /// SRQs can be resized.
    pub(crate) const SRQ_RESIZE: u64 = bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64;
    /// RC responders send RNR NAKs.
    pub(crate) const RC_RNR_NAK_GEN: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64;
    /// Fast registration (REG_MR), LOCAL_INV and SEND with invalidate.
    pub(crate) const MEM_MGT_EXTENSIONS: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
    /// Memory windows, type 1 ...
    pub(crate) const MEM_WINDOW: u64 = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64;
    /// ... and type 2B.
    pub(crate) const MEM_WINDOW_TYPE_2B: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64;
    /// FLUSH with global visibility ...
    pub(crate) const FLUSH_GLOBAL: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64;
    /// ... and persistence (MRs may ask for it; none gets it without persistent memory).
    pub(crate) const FLUSH_PERSISTENT: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT as u64;
    /// ATOMIC WRITE.
    pub(crate) const ATOMIC_WRITE: u64 =
        bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64;
}

/// Port capability bits (`enum ib_port_capability_mask_bits`).
pub(crate) mod port_cap {
    use super::bindings;

    /// The port supports connection management (it has a working QP1).
    pub(crate) const CM_SUP: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
}

/// Atomic operation support (`enum ib_atomic_cap`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
// The whole of the C enum; each driver uses its own.
#[allow(dead_code)]
pub(crate) enum AtomicCap {
    /// No atomic operations.
    #[default]
    None,
    /// Atomic with respect to this device.
    Hca,
    /// Atomic with respect to this device and every other agent on the host.
    Global,
}

impl AtomicCap {
    fn to_raw(self) -> u32 {
        match self {
            Self::None => bindings::ib_atomic_cap_IB_ATOMIC_NONE,
            Self::Hca => bindings::ib_atomic_cap_IB_ATOMIC_HCA,
            Self::Global => bindings::ib_atomic_cap_IB_ATOMIC_GLOB,
        }
    }
}

/// What `ibv_advise_mr()` asks of an on-demand MR's pages.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Advice {
    /// Map them for reading, faulting them in.
    Prefetch,
    /// Map them for writing, faulting them in.
    PrefetchWrite,
    /// Map those present, without faulting anything in.
    NoFault,
}

/// A scatter/gather element a verb names: `length` bytes at `addr` of the MR `lkey`.
pub(crate) use super::wr::Sge;

/// Device attributes, as `ibv_query_device()` reports them.
///
/// What the drivers of this layer have to say so far; everything else is reported as zero.
/// The default is a device that offers nothing: no limits, no capabilities.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeviceAttr {
    pub(crate) sys_image_guid: [u8; 8],
    pub(crate) max_mr_size: u64,
    pub(crate) page_size_cap: u64,
    pub(crate) vendor_id: u32,
    pub(crate) max_qp: u32,
    pub(crate) max_qp_wr: u32,
    pub(crate) device_cap_flags: u64,
    pub(crate) allow_user_unregister: bool,
    /// On-demand paging of user MRs (explicit ones, not implicit), for the operations
    /// of RC and UD that [`DeviceAttr::write_to`] lists.
    pub(crate) on_demand_paging: bool,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_sge_rd: u32,
    pub(crate) max_cq: u32,
    pub(crate) max_cqe: u32,
    pub(crate) max_mr: u32,
    pub(crate) max_pd: u32,
    pub(crate) max_qp_rd_atom: u32,
    pub(crate) max_res_rd_atom: u32,
    pub(crate) max_qp_init_rd_atom: u32,
    pub(crate) atomic_cap: AtomicCap,
    pub(crate) max_mw: u32,
    pub(crate) max_mcast_grp: u32,
    pub(crate) max_mcast_qp_attach: u32,
    pub(crate) max_total_mcast_qp_attach: u32,
    pub(crate) max_ah: u32,
    pub(crate) max_srq: u32,
    pub(crate) max_srq_wr: u32,
    pub(crate) max_srq_sge: u32,
    pub(crate) max_fast_reg_page_list_len: u32,
    pub(crate) max_pkeys: u16,
    pub(crate) local_ca_ack_delay: u8,
}

impl DeviceAttr {
    fn write_to(&self, out: &mut bindings::ib_device_attr) {
        *out = pin_init::zeroed();
        out.sys_image_guid = u64::from_ne_bytes(self.sys_image_guid);
        out.max_mr_size = self.max_mr_size;
        out.page_size_cap = self.page_size_cap;
        out.vendor_id = self.vendor_id;
        out.max_qp = self.max_qp as c_int;
        out.max_qp_wr = self.max_qp_wr as c_int;
        out.device_cap_flags = self.device_cap_flags;
        out.kernel_cap_flags = if self.allow_user_unregister {
            u64::from(bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG)
        } else {
            0
        };
        if self.on_demand_paging {
            out.kernel_cap_flags |= u64::from(bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING);
            out.odp_caps.general_caps = u64::from(bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT);
            let both = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV;
            out.odp_caps.per_transport_caps.ud_odp_caps = both;
            out.odp_caps.per_transport_caps.rc_odp_caps = both
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_FLUSH
                | bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC_WRITE;
        }
        out.max_send_sge = self.max_send_sge as c_int;
        out.max_recv_sge = self.max_recv_sge as c_int;
        out.max_sge_rd = self.max_sge_rd as c_int;
        out.max_cq = self.max_cq as c_int;
        out.max_cqe = self.max_cqe as c_int;
        out.max_mr = self.max_mr as c_int;
        out.max_pd = self.max_pd as c_int;
        out.max_qp_rd_atom = self.max_qp_rd_atom as c_int;
        out.max_res_rd_atom = self.max_res_rd_atom as c_int;
        out.max_qp_init_rd_atom = self.max_qp_init_rd_atom as c_int;
        out.atomic_cap = self.atomic_cap.to_raw();
        out.max_mw = self.max_mw as c_int;
        out.max_mcast_grp = self.max_mcast_grp as c_int;
        out.max_mcast_qp_attach = self.max_mcast_qp_attach as c_int;
        out.max_total_mcast_qp_attach = self.max_total_mcast_qp_attach as c_int;
        out.max_ah = self.max_ah as c_int;
        out.max_srq = self.max_srq as c_int;
        out.max_srq_wr = self.max_srq_wr as c_int;
        out.max_srq_sge = self.max_srq_sge as c_int;
        out.max_fast_reg_page_list_len = self.max_fast_reg_page_list_len;
        out.max_pkeys = self.max_pkeys;
        out.local_ca_ack_delay = self.local_ca_ack_delay;
    }
}

/// Port attributes, as `ibv_query_port()` reports them.
#[derive(Clone, Debug)]
pub(crate) struct PortAttr {
    pub(crate) state: PortState,
    pub(crate) phys_state: PhysState,
    pub(crate) max_mtu: Mtu,
    pub(crate) active_mtu: Mtu,
    pub(crate) gid_tbl_len: u32,
    pub(crate) port_cap_flags: u32,
    pub(crate) max_msg_sz: u32,
    pub(crate) pkey_tbl_len: u16,
    pub(crate) max_vl_num: u8,
    pub(crate) active_width: u8,
    pub(crate) active_speed: u16,
    /// Datagrams dropped for a wrong Q_Key.
    pub(crate) qkey_viol_cntr: u32,
    /// Packets dropped for a P_Key not in the port's table.
    pub(crate) bad_pkey_cntr: u32,
}

impl PortAttr {
    fn write_to(&self, out: &mut bindings::ib_port_attr) {
        *out = pin_init::zeroed();
        out.state = self.state.to_raw();
        out.phys_state = self.phys_state.to_raw();
        out.max_mtu = self.max_mtu.to_raw();
        out.active_mtu = self.active_mtu.to_raw();
        out.gid_tbl_len = self.gid_tbl_len as c_int;
        out.port_cap_flags = self.port_cap_flags;
        out.max_msg_sz = self.max_msg_sz;
        out.pkey_tbl_len = self.pkey_tbl_len;
        out.max_vl_num = self.max_vl_num;
        out.active_width = self.active_width;
        out.active_speed = self.active_speed;
        out.qkey_viol_cntr = self.qkey_viol_cntr;
        out.bad_pkey_cntr = self.bad_pkey_cntr;
    }
}

/// What a port of an RDMA device is, fixed for the device's life.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PortImmutable {
    /// The length of the P_Key table.
    pub(crate) pkey_tbl_len: u32,
    /// The length of the GID table.
    pub(crate) gid_tbl_len: u32,
    /// The protocol the port speaks, which says which of ib_core's services (MADs,
    /// connection managers, GID management) it gets.
    pub(crate) protocol: PortProtocol,
}

/// The protocol of a port: one of the combinations of capabilities `RDMA_CORE_PORT_*`
/// that ib_core defines, and the size of the management datagrams it exchanges.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
// The whole of what ib_core defines; each driver uses its own.
#[allow(dead_code)]
pub(crate) enum PortProtocol {
    /// None that ib_core manages: no MADs, no connection manager, no GIDs. For a
    /// device with no data path, such as `samples/rdma_minimal`.
    None,
    /// InfiniBand (`RDMA_CORE_PORT_IBA_IB`).
    Infiniband,
    /// RoCE v1 (`RDMA_CORE_PORT_IBA_ROCE`).
    Roce,
    /// RoCE v2, over UDP (`RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP`).
    RoceV2,
    /// iWARP (`RDMA_CORE_PORT_IWARP`).
    Iwarp,
    /// Omni-Path (`RDMA_CORE_PORT_INTEL_OPA`).
    Opa,
    /// Raw Ethernet packets (`RDMA_CORE_PORT_RAW_PACKET`).
    RawPacket,
    /// usNIC (`RDMA_CORE_PORT_USNIC`).
    Usnic,
}

impl PortProtocol {
    /// The `core_cap_flags` of a port of this protocol.
    fn core_cap_flags(self) -> u32 {
        match self {
            Self::None => 0,
            Self::Infiniband => bindings::RXE_RS_CORE_PORT_IBA_IB,
            Self::Roce => bindings::RXE_RS_CORE_PORT_IBA_ROCE,
            Self::RoceV2 => bindings::RXE_RS_CORE_PORT_IBA_ROCE_UDP_ENCAP,
            Self::Iwarp => bindings::RXE_RS_CORE_PORT_IWARP,
            Self::Opa => bindings::RXE_RS_CORE_PORT_INTEL_OPA,
            Self::RawPacket => bindings::RXE_RS_CORE_PORT_RAW_PACKET,
            Self::Usnic => bindings::RXE_RS_CORE_PORT_USNIC,
        }
    }

    /// The largest MAD the port handles: none unless it speaks InfiniBand's management
    /// protocol (ib_core refuses a MAD size on a port without it).
    fn max_mad_size(self) -> u32 {
        match self {
            Self::Infiniband | Self::Roce | Self::RoceV2 => bindings::RXE_RS_MGMT_MAD_SIZE,
            Self::Opa => bindings::RXE_RS_OPA_MGMT_MAD_SIZE,
            Self::None | Self::Iwarp | Self::RawPacket | Self::Usnic => 0,
        }
    }
}

/// The link layer of a port (`enum rdma_link_layer`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum LinkLayer {
    /// Not said (ib_core reports it as unknown).
    #[expect(dead_code, reason = "the whole of the C enum; rxe_rs is Ethernet")]
    Unspecified,
    /// InfiniBand.
    #[expect(dead_code, reason = "the whole of the C enum; rxe_rs is Ethernet")]
    Infiniband,
    /// Ethernet (RoCE, iWARP).
    Ethernet,
}

impl LinkLayer {
    fn to_raw(self) -> u32 {
        match self {
            Self::Unspecified => bindings::rdma_link_layer_IB_LINK_LAYER_UNSPECIFIED,
            Self::Infiniband => bindings::rdma_link_layer_IB_LINK_LAYER_INFINIBAND,
            Self::Ethernet => bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
        }
    }
}

/// Which driver's user ABI a device speaks (`enum rdma_driver_id`): its userspace
/// provider stamps the id into every command and binds to devices that carry it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct DriverId(u32);

impl DriverId {
    /// Soft-RoCE (`RDMA_DRIVER_RXE`), librxe's. The other ids of the enum are added as
    /// drivers need them.
    pub(crate) const RXE: Self = Self(bindings::rdma_driver_id_RDMA_DRIVER_RXE);
}

/// uverbs' legacy `write()` commands beyond the set ib_core enables for every device
/// (`enum ib_uverbs_write_cmds`), which a driver's userspace provider may use.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct WriteCmds(u64);

impl WriteCmds {
    /// None.
    pub(crate) const NONE: Self = Self(0);
    /// `IB_USER_VERBS_CMD_POST_SEND`: a process's post, which reaches
    /// [`QpOps::doorbell`] (the driver's work requests are in its rings; uverbs' own
    /// are refused). The other legacy posts are not offered: they would hand process-made
    /// work requests to verbs written for kernel consumers.
    pub(crate) const POST_SEND: Self =
        Self(1 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND);
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`: arming a CQ through the kernel.
    pub(crate) const REQ_NOTIFY_CQ: Self =
        Self(1 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);

    /// These commands and those of `other`.
    pub(crate) const fn and(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// The static description of a device, handed over at registration.
pub(crate) struct DeviceInfo<'a> {
    /// The device name (`rdma link add NAME ...`).
    pub(crate) name: &'a CStr,
    /// The node description (up to 63 bytes are kept).
    pub(crate) node_desc: &'a CStr,
    /// The node GUID, network order.
    pub(crate) node_guid: [u8; 8],
    /// The number of completion vectors offered to CQs.
    pub(crate) num_comp_vectors: u32,
}

/// What `ib_modify_device()` changes (`struct ib_device_modify`, as its mask selects):
/// the system image GUID, which only kernel callers set, and the node description,
/// which root writes through sysfs (`node_desc`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeviceModify<'a> {
    /// The new system image GUID, network order (the caller passes it in CPU order).
    pub(crate) sys_image_guid: Option<[u8; 8]>,
    /// The new node description: up to 64 bytes, not necessarily NUL-terminated.
    pub(crate) node_desc: Option<&'a [u8; 64]>,
}

/// An RDMA driver: the verbs of its devices, and the types of its objects, each of which
/// implements its object's verbs ([`UcontextOps`], [`PdOps`], [`CqOps`], [`QpOps`],
/// [`SrqOps`], [`AhOps`], [`MrOps`], [`MwOps`]).
///
/// Every method runs in process context and may sleep unless its documentation says
/// otherwise. The `Device<Self>` handed to a method is registered (or being registered
/// or unregistered) for the whole call. Optional verbs (a default body here and in the
/// object traits) a driver does not implement are left out of the ops table, so that
/// ib_core answers for them as it does for any driver without them (`EOPNOTSUPP` for
/// the verbs that can be absent); an object kind whose create is not implemented is
/// left out whole.
///
/// # Examples
///
/// A driver's type names its data and object types and answers for the device; each
/// object type implements its trait beside it (see [`CqOps`] for one):
///
/// ```ignore
/// struct MyDriver;
///
/// #[vtable]
/// impl Driver for MyDriver {
///     type Data = MyDevice;
///     type Ucontext = MyContext;
///     type Pd = MyPd;
///     type Cq = MyCq;
///     type Qp = MyQp;
///     type Srq = MySrq;
///     type Ah = MyAh;
///     type Mr = MyMr;
///     type Mw = MyMw;
///
///     const MODULE: &'static ThisModule = &crate::THIS_MODULE;
///     const DRIVER_ID: DriverId = DriverId::RXE;
///     const UVERBS_ABI_VER: u32 = 2;
///
///     fn query_device(_dev: &Device<Self>) -> Result<DeviceAttr> {
///         // A `const DeviceAttr` of the device's limits and capabilities.
///         Ok(MY_ATTRS.clone())
///     }
///
///     // query_port, port_immutable, query_pkey, link_layer ...
/// }
///
/// // Registration, from a link type's `newlink`:
/// Device::<MyDriver>::register(&info, ndev, MyDevice::new(ndev))?;
/// ```
#[vtable]
pub(crate) trait Driver: Sized + Send + Sync + 'static {
    /// Per-device data, pin-initialised inside ib_core's device allocation.
    type Data: Send + Sync;
    /// Per-process (`ib_ucontext`) data.
    type Ucontext: UcontextOps<Self>;
    /// Per-protection-domain data.
    type Pd: PdOps<Self>;
    /// Per-completion-queue data.
    type Cq: CqOps<Self>;
    /// Per-queue-pair data.
    type Qp: QpOps<Self>;
    /// Per-shared-receive-queue data.
    type Srq: SrqOps<Self>;
    /// Per-address-handle data.
    type Ah: AhOps<Self>;
    /// Per-memory-region data.
    type Mr: MrOps<Self>;
    /// Per-memory-window data.
    type Mw: MwOps<Self>;

    /// The module the driver is in: it owns the devices, and stays loaded while one is
    /// in use.
    const MODULE: &'static ThisModule;

    /// The user ABI the driver speaks, which its userspace provider binds to.
    const DRIVER_ID: DriverId;

    /// The version of the driver's user ABI (`uverbs_abi_ver`), which its userspace
    /// provider checks.
    const UVERBS_ABI_VER: u32;

    /// The legacy uverbs commands its userspace provider uses beyond ib_core's default.
    const WRITE_CMDS: WriteCmds = WriteCmds::NONE;

    /// Whether the device shows the name of its port's netdev in sysfs as `parent`, as
    /// rxe's do (scripts find the netdev there).
    const SYSFS_PARENT: bool = false;

    /// `ibv_query_device()`.
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr>;

    /// `ibv_query_port()`.
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// Port properties that never change.
    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// The P_Key at `index` of the port's table.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;

    /// The link layer of the port. (Without it ib_core would go by the node type, and
    /// the devices this layer registers are channel adapters: InfiniBand.)
    fn link_layer(dev: &Device<Self>, port: u32) -> LinkLayer;

    /// A kernel caller or root (through sysfs) changes the device's system image GUID
    /// or node description. On success the layer stores the node description in the
    /// device (where ib_core reads it); the GUID is the driver's to report from then on.
    /// Without it, ib_core refuses both.
    fn modify_device(_dev: &Device<Self>, _m: &DeviceModify<'_>) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The counters of `port` that its performance management agent reports (`None` if
    /// the device has no such port). With it the device answers the PMA's MADs itself
    /// ([`super::mad`]), and ib_core shows the counters in sysfs.
    fn pma_counters(_dev: &Device<Self>, _port: u32) -> Option<PmaCounters> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The names of the per-port counters that `rdma statistic` shows.
    const PORT_STATS: &'static [StatDesc] = &[];

    /// Fills in the counters of `port`, in [`Driver::PORT_STATS`] order.
    fn port_stats(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

/// An RDMA device of driver `T`: ib_core's `struct ib_device` followed by `T::Data`.
///
/// # Invariants
///
/// `driver` is `TypeId::of::<T>()` from the allocation on. `data` is initialised from
/// the moment `ib.ops.dealloc_driver` is set until `dealloc_driver` runs; every
/// `&Device<T>` handed out is within that window.
#[repr(C)]
pub(crate) struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    /// The driver type that made the device, at the same offset in every `Device<_>`
    /// (right after the C struct): [`Device::find_by_netdev`] checks it.
    driver: TypeId,
    data: T::Data,
}

// SAFETY: ib_core's device is shared between threads by design; `T::Data` is `Sync`.
unsafe impl<T: Driver> Sync for Device<T> {}
// SAFETY: As above; `T::Data` is `Send`.
unsafe impl<T: Driver> Send for Device<T> {}

impl<T: Driver> core::ops::Deref for Device<T> {
    type Target = T::Data;

    fn deref(&self) -> &T::Data {
        &self.data
    }
}

impl<T: Driver> Device<T> {
    /// Borrows the device behind an `ib_device` of driver `T`.
    ///
    /// # Safety
    ///
    /// `ptr` must be the `ib_device` of a `Device<T>` whose data is initialised, and stay
    /// so for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // CAST: `ib` is the first field of a `repr(C)` struct.
        // SAFETY: Guaranteed by the caller.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The C device, for ib_core calls (of this layer and of the software-RoCE part).
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// The network device bound to `port`, if it is still there.
    pub(crate) fn netdev(&self, port: u32) -> Option<NetDeviceRef> {
        // SAFETY: The device is valid by the type invariant.
        let ndev = NonNull::new(unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) })?;
        // SAFETY: `ib_device_get_netdev()` returned a held reference.
        Some(unsafe { NetDevice::from_raw_owned(ndev) })
    }

    /// The active speed and width of an Ethernet port, derived from its link speed.
    pub(crate) fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let mut speed = 0u16;
        let mut width = 0u8;
        // SAFETY: The device is valid; the out pointers are valid for writes.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// Whether `gid` is a RoCE v2 GID of `port` whose netdev is `ndev`. Any context.
    pub(crate) fn has_gid(&self, port: u32, gid: &[u8; 16], ndev: &NetDevice) -> bool {
        // SAFETY: The device and `ndev` are valid; `gid` holds the 16 bytes read.
        unsafe { bindings::rxe_rs_gid_of_netdev(self.as_raw(), port, gid.as_ptr(), ndev.as_raw()) }
    }

    /// Whether `gid` is one of the device's RoCE v2 GIDs (of any of its netdevs): if it
    /// is, the GID's place on the device. Any context.
    pub(crate) fn own_gid(&self, gid: &[u8; 16]) -> Option<OwnGid> {
        // SAFETY: The device is valid; `gid` holds the 16 bytes read.
        let vlan = unsafe { bindings::rxe_rs_own_gid_vlan(self.as_raw(), gid.as_ptr()) };
        (vlan != -2).then(|| OwnGid {
            vlan_id: u16::try_from(vlan).ok(),
        })
    }

    /// Allocates a device with ib_core, initialises its data, binds `ndev` to port 1 and
    /// registers the device under `info.name`.
    ///
    /// On failure nothing is left behind. On success ib_core owns the device: it lives
    /// until it is unregistered ([`HeldDevice::unregister_queued`], `rdma link delete`,
    /// dropping [`AllDevices`]).
    pub(crate) fn register(
        info: &DeviceInfo<'_>,
        ndev: &NetDevice,
        data: impl PinInit<T::Data, Error>,
    ) -> Result {
        const {
            assert!(
                align_of::<Self>() <= kernel::bindings::ARCH_KMALLOC_MINALIGN,
                "the device's data needs more alignment than ib_core's allocation gives"
            )
        };
        // SAFETY: Allocates a zeroed block of the given size (aligned as checked above), at
        // least as large as an `ib_device`, with the `ib_device` at its start, in the
        // namespace of `ndev`, which is valid.
        let raw = unsafe { bindings::rxe_rs_alloc_device(size_of::<Self>(), ndev.as_raw()) };
        if raw.is_null() {
            return Err(ENOMEM);
        }
        let this = raw.cast::<Self>();
        // INVARIANT: The tag is set before anyone can find the device.
        // SAFETY: `this` points to an allocation of `Self`.
        unsafe { ptr::addr_of_mut!((*this).driver).write(TypeId::of::<T>()) };

        // SAFETY: `this` points to an allocation of `Self`; `data` is not initialised yet
        // and never moves (ib_core does not move devices).
        if let Err(e) = unsafe { data.__pinned_init(ptr::addr_of_mut!((*this).data)) } {
            // SAFETY: No ops are set, so this frees the block without touching `data`.
            unsafe { bindings::ib_dealloc_device(raw) };
            return Err(e);
        }

        let ops = Self::ops_table();
        // SAFETY: `raw` is a valid, not yet registered device that only we reference.
        unsafe {
            let ib = &mut *raw;
            ib.node_type = bindings::RXE_RS_NODE_IB_CA;
            ib.phys_port_cnt = 1;
            ib.num_comp_vectors = info.num_comp_vectors as c_int;
            ib.local_dma_lkey = 0;
            ib.node_guid = u64::from_ne_bytes(info.node_guid);
            let desc = info.node_desc.to_bytes();
            let n = desc.len().min(ib.node_desc.len() - 1);
            for (d, s) in ib.node_desc.iter_mut().zip(&desc[..n]) {
                *d = *s;
            }
            ib.uverbs_cmd_mask |= T::WRITE_CMDS.0;
            // INVARIANT: From here on `dealloc_driver` is set and drops `data`.
            bindings::ib_set_device_ops(raw, &ops);
        }

        // SAFETY: `raw` is valid and `ndev` is a live net_device; ib_core takes its own
        // reference.
        let ret = unsafe { bindings::ib_device_set_netdev(raw, ndev.as_raw(), 1) };
        let ret = if ret == 0 {
            // SAFETY: `raw` is a fully set up device; `name` is NUL-terminated. A null DMA
            // device makes ib_core use virtual DMA, as a software device must.
            unsafe { bindings::ib_register_device(raw, info.name.as_char_ptr(), ptr::null_mut()) }
        } else {
            ret
        };
        if ret != 0 {
            // SAFETY: After a failed registration the caller frees the device; this calls
            // `dealloc_driver`, which drops `data`.
            unsafe { bindings::ib_dealloc_device(raw) };
        }
        to_result(ret)
    }

    /// Finds the device of driver `T` bound to `ndev`, if any.
    ///
    /// Devices of other modules that share the driver id (C rxe for rxe_rs) are never
    /// returned.
    pub(crate) fn find_by_netdev(ndev: &NetDevice) -> Option<DeviceRef<T>> {
        // SAFETY: `ndev` is valid; a non-null result carries a device reference.
        let raw = unsafe { bindings::ib_device_get_by_netdev(ndev.as_raw(), T::DRIVER_ID.0) };
        if raw.is_null() {
            return None;
        }
        // SAFETY: `raw` is a registered device on which we hold a reference.
        let owner = unsafe { bindings::rxe_rs_device_owner(raw) };
        // A device of our module is a `Device<_>` of this layer (a null owner, built-in
        // code, could be anyone's), whose tag says which driver type made it.
        let ours = !owner.is_null()
            && owner == T::MODULE.as_ptr().cast()
            // SAFETY: A `Device<_>`, so the tag is at this offset, initialised.
            && unsafe {
                raw.cast::<u8>()
                    .add(offset_of!(Self, driver))
                    .cast::<TypeId>()
                    .read()
            } == TypeId::of::<T>();
        if !ours {
            // SAFETY: The reference taken above, not kept.
            unsafe { bindings::ib_device_put(raw) };
            return None;
        }
        // SAFETY: A `Device<T>`, by its tag, valid while the reference taken above is
        // held; that reference is handed to the `ARef`.
        Some(unsafe { ARef::from_raw(NonNull::from(Device::<T>::from_raw(raw)).cast()) })
    }

    fn ops_table() -> bindings::ib_device_ops {
        let mut ops = bindings::ib_device_ops {
            owner: T::MODULE.as_ptr().cast(),
            driver_id: T::DRIVER_ID.0,
            uverbs_abi_ver: T::UVERBS_ABI_VER,
            query_device: Some(Self::query_device),
            query_port: Some(Self::query_port),
            get_port_immutable: Some(Self::get_port_immutable),
            query_pkey: Some(Self::query_pkey),
            get_link_layer: Some(Self::get_link_layer),
            dealloc_driver: Some(Self::dealloc_driver),
            ..pin_init::zeroed()
        };
        if T::HAS_MODIFY_DEVICE {
            ops.modify_device = Some(Self::modify_device);
        }
        if T::SYSFS_PARENT {
            // SAFETY: Returns the address of a static group; no preconditions.
            ops.device_group = unsafe { bindings::rxe_rs_parent_group() };
        }
        if T::HAS_PORT_STATS {
            ops.alloc_hw_port_stats = Some(Self::alloc_hw_port_stats);
            ops.get_hw_stats = Some(Self::get_hw_stats);
        }
        mad::set_ops::<T>(&mut ops);
        ucontext::set_ops::<T>(&mut ops);
        pd::set_ops::<T>(&mut ops);
        cq::set_ops::<T>(&mut ops);
        qp::set_ops::<T>(&mut ops);
        srq::set_ops::<T>(&mut ops);
        ah::set_ops::<T>(&mut ops);
        mr::set_ops::<T>(&mut ops);
        mw::set_ops::<T>(&mut ops);
        ops
    }

    /// # Safety
    ///
    /// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
    unsafe extern "C" fn query_device(
        ib: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: ib_core calls this only on our registered device.
            let dev = unsafe { Self::from_raw(ib) };
            // SAFETY: `udata` is null or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            if let Some(u) = udata {
                u.require_empty_input()?;
            }
            let a = T::query_device(dev)?;
            // SAFETY: `attr` is valid for writes for the call.
            a.write_to(unsafe { &mut *attr });
            if let Some(u) = udata {
                u.respond_empty()?;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
    unsafe extern "C" fn query_port(
        ib: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: ib_core calls this only on our device.
            let dev = unsafe { Self::from_raw(ib) };
            let a = T::query_port(dev, port)?;
            // SAFETY: `attr` is valid for writes for the call.
            a.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
    unsafe extern "C" fn get_port_immutable(
        ib: *mut bindings::ib_device,
        port: u32,
        out: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: ib_core calls this only on our device.
            let dev = unsafe { Self::from_raw(ib) };
            let p = T::port_immutable(dev, port)?;
            // SAFETY: `out` is valid for writes for the call.
            let out = unsafe { &mut *out };
            out.pkey_tbl_len = p.pkey_tbl_len as c_int;
            out.gid_tbl_len = p.gid_tbl_len as c_int;
            out.core_cap_flags = p.protocol.core_cap_flags();
            out.max_mad_size = p.protocol.max_mad_size();
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
    unsafe extern "C" fn query_pkey(
        ib: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: ib_core calls this only on our device.
            let dev = unsafe { Self::from_raw(ib) };
            let v = T::query_pkey(dev, port, index)?;
            // SAFETY: `pkey` is valid for writes for the call.
            unsafe { *pkey = v };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
    unsafe extern "C" fn get_link_layer(ib: *mut bindings::ib_device, port: u32) -> u32 {
        // SAFETY: ib_core calls this only on our device.
        let dev = unsafe { Self::from_raw(ib) };
        T::link_layer(dev, port).to_raw()
    }

    /// # Safety
    ///
    /// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
    unsafe extern "C" fn modify_device(
        ib: *mut bindings::ib_device,
        mask: c_int,
        attr: *mut bindings::ib_device_modify,
    ) -> c_int {
        const GUID: c_int =
            bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_SYS_IMAGE_GUID as c_int;
        const DESC: c_int = bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_NODE_DESC as c_int;
        from_result(|| {
            if mask & !(GUID | DESC) != 0 {
                return Err(eopnotsupp());
            }
            // SAFETY: ib_core calls this only on our registered device.
            let dev = unsafe { Self::from_raw(ib) };
            // Only the fields the mask names are read: a caller may leave the others
            // uninitialised.
            // SAFETY: `attr` is valid for the call and not written meanwhile; the field
            // is initialised since the mask names it.
            let guid = (mask & GUID != 0).then(|| unsafe { (*attr).sys_image_guid });
            // SAFETY: As above.
            let desc: Option<[u8; 64]> = (mask & DESC != 0).then(|| unsafe { (*attr).node_desc });
            let m = DeviceModify {
                sys_image_guid: guid.map(u64::to_be_bytes),
                node_desc: desc.as_ref(),
            };
            T::modify_device(dev, &m)?;
            if let Some(desc) = m.node_desc {
                // SAFETY: The device's description is 64 bytes, which sysfs and the MAD
                // layer read at any time; like every driver we overwrite it in place (the
                // C copy tolerates those readers).
                unsafe {
                    bindings::rxe_rs_shared_copy(
                        (*dev.as_raw()).node_desc.as_mut_ptr().cast(),
                        desc.as_ptr().cast(),
                        desc.len(),
                    )
                };
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
    unsafe extern "C" fn alloc_hw_port_stats(
        _ib: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        // The counters are read through `get_hw_stats` at most every 10 ms.
        const LIFESPAN_MS: c_ulong = 10;
        // A driver has a handful of counters.
        let n = T::PORT_STATS.len() as c_int;
        // SAFETY: The descriptions are static, so they outlive the struct, which ib_core
        // frees with the port.
        unsafe {
            bindings::rdma_alloc_hw_stats_struct(StatDesc::as_raw(T::PORT_STATS), n, LIFESPAN_MS)
        }
    }

    /// # Safety
    ///
    /// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
    unsafe extern "C" fn get_hw_stats(
        ib: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        // SAFETY: ib_core calls this on our device with the struct `alloc_hw_port_stats`
        // made for the port, under the struct's lock.
        unsafe {
            let dev = Self::from_raw(ib);
            let n = (*stats).num_counters;
            let values = (*stats).value.as_mut_slice(usize::try_from(n).unwrap_or(0));
            T::port_stats(dev, port, values);
            n
        }
    }

    /// # Safety
    ///
    /// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
    unsafe extern "C" fn dealloc_driver(ib: *mut bindings::ib_device) {
        let this = ib.cast::<Self>();
        // SAFETY: ib_core calls this exactly once, after the device is unregistered (or
        // after a failed registration) and before it frees the block; by the type
        // invariant `data` is initialised until now.
        unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*this).data)) };
    }
}

/// A registered device of driver `T` on which a counted reference is held: reached only
/// through a [`DeviceRef`].
///
/// # Invariants
///
/// While a `&HeldDevice<T>` exists, ib_core's count of the device's references
/// (`ib_device_try_get()`, `ib_device_put()`) is held by the [`DeviceRef`] it came from.
#[repr(transparent)]
pub(crate) struct HeldDevice<T: Driver>(Device<T>);

/// A counted reference to a registered device of driver `T`, put when it is dropped.
pub(crate) type DeviceRef<T> = ARef<HeldDevice<T>>;

// SAFETY: The count is ib_core's, and the device is not freed while it is above zero.
// By the type invariant it is above zero while a `&HeldDevice` exists, so one more
// `ib_device_try_get()` always succeeds.
unsafe impl<T: Driver> AlwaysRefCounted for HeldDevice<T> {
    fn inc_ref(&self) {
        // SAFETY: The device is valid by the type invariant.
        let taken = unsafe { bindings::rxe_rs_device_try_get(self.0.as_raw()) };
        // A count above zero cannot fail to go up.
        debug_assert!(taken);
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller hands over a count it holds, so the device is valid until
        // that count is put.
        unsafe { bindings::ib_device_put(obj.as_ref().0.as_raw()) };
    }
}

impl<T: Driver> Device<T> {
    /// A counted reference to the device, unless it is being unregistered.
    pub(crate) fn get_ref(&self) -> Option<DeviceRef<T>> {
        // SAFETY: The device is valid by the type invariant.
        if !unsafe { bindings::rxe_rs_device_try_get(self.as_raw()) } {
            return None;
        }
        // SAFETY: The count just taken is handed to the `ARef`; `HeldDevice` is
        // `repr(transparent)` over `Device<T>`.
        Some(unsafe { ARef::from_raw(NonNull::from(self).cast()) })
    }
}

impl<T: Driver> HeldDevice<T> {
    /// Asks ib_core to unregister the device from its unregistration workqueue.
    ///
    /// Safe from contexts that must not wait for the device's users, such as a netdev
    /// notifier holding the RTNL.
    pub(crate) fn unregister_queued(&self) {
        // SAFETY: By the type invariant the device is valid.
        unsafe { bindings::ib_unregister_device_queued(self.0.as_raw()) };
    }
}

impl<T: Driver> core::ops::Deref for HeldDevice<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        &self.0
    }
}

/// The module's claim on every device with driver `T`'s id: dropping it unregisters
/// them all and waits until each one's `dealloc_driver` has run.
///
/// Hold it in the module between the link type (dropped before it, so no device is being
/// added) and the netdev notifier (dropped after it). Devices of another module with the
/// same id would go too (C rxe's, for rxe_rs): two such drivers are never loaded together.
pub(crate) struct AllDevices<T: Driver>(PhantomData<T>);

impl<T: Driver> AllDevices<T> {
    /// Takes the claim, at module load.
    pub(crate) fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T: Driver> Drop for AllDevices<T> {
    fn drop(&mut self) {
        // SAFETY: Safe to call from process context at any time.
        unsafe { bindings::ib_unregister_driver(T::DRIVER_ID.0) };
    }
}

/// Shows `parent`: the name of the netdev of port 1. The attribute and its group are
/// static tables of the C shim (`rust/helpers.c`), built with sysfs's macros.
///
/// # Safety
///
/// Only for sysfs, through the shim's `parent` attribute, with the arguments a `show`
/// callback gets.
#[no_mangle]
unsafe extern "C" fn rxe_rs_parent_show(
    dev: *mut bindings::device,
    _attr: *mut bindings::device_attribute,
    buf: *mut kernel::ffi::c_char,
) -> isize {
    // SAFETY: The group is only on registered ib_devices, so `dev` is the `struct device`
    // of one, valid for the call.
    let ib = unsafe { bindings::rxe_rs_device_to_ibdev(dev) };
    // SAFETY: `ib` is valid; a non-null result carries a reference.
    let Some(ndev) = NonNull::new(unsafe { bindings::ib_device_get_netdev(ib, 1) }) else {
        return ENODEV.to_errno() as isize;
    };
    // SAFETY: The reference taken above, put when `ndev` is dropped.
    let ndev = unsafe { NetDevice::from_raw_owned(ndev) };
    // SAFETY: `buf` is the page sysfs gives `show`; the netdev is held.
    unsafe { bindings::rxe_rs_sysfs_emit_netdev_name(buf, ndev.as_raw()) }
}
