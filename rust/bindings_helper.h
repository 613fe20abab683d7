/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Headers whose declarations rxe_rs binds with bindgen (see rust/bindgen_parameters for the
 * allow-list). Constants that bindgen cannot see through macros are exported as typed
 * constants here.
 */
#include <linux/crc32.h>
#include <linux/netdevice.h>
#include <linux/vmalloc.h>
#include <linux/etherdevice.h>
#include <linux/if_ether.h>
#include <net/addrconf.h>
#include <net/dst.h>
#include <net/net_namespace.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <linux/mmu_notifier.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_pma.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/ib_user_verbs.h>
#include <uapi/rdma/rdma_user_rxe.h>
#include <uapi/rdma/ib_user_ioctl_verbs.h>

#include "helpers.h"
#include "sw/helpers.h"

const u64 RXE_RS_DEFAULT_PKEY_FULL = IB_DEFAULT_PKEY_FULL;
const u32 RXE_RS_MGMT_MAD_SIZE = IB_MGMT_MAD_SIZE;
const u32 RXE_RS_OPA_MGMT_MAD_SIZE = OPA_MGMT_MAD_SIZE;
const u32 RXE_RS_CORE_PORT_IBA_IB = RDMA_CORE_PORT_IBA_IB;
const u32 RXE_RS_CORE_PORT_IBA_ROCE = RDMA_CORE_PORT_IBA_ROCE;
const u32 RXE_RS_CORE_PORT_IBA_ROCE_UDP_ENCAP = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
const u32 RXE_RS_CORE_PORT_IWARP = RDMA_CORE_PORT_IWARP;
const u32 RXE_RS_CORE_PORT_INTEL_OPA = RDMA_CORE_PORT_INTEL_OPA;
const u32 RXE_RS_CORE_PORT_RAW_PACKET = RDMA_CORE_PORT_RAW_PACKET;
const u32 RXE_RS_CORE_PORT_USNIC = RDMA_CORE_PORT_USNIC;
const unsigned long RXE_RS_NETDEV_UNREGISTER = NETDEV_UNREGISTER;
const unsigned long RXE_RS_NETDEV_CHANGEMTU = NETDEV_CHANGEMTU;
const unsigned long RXE_RS_NETDEV_UP = NETDEV_UP;
const unsigned long RXE_RS_NETDEV_DOWN = NETDEV_DOWN;
const unsigned long RXE_RS_NETDEV_CHANGE = NETDEV_CHANGE;
const int RXE_RS_NOTIFY_DONE = NOTIFY_DONE;
const unsigned int RXE_RS_IFF_UP = IFF_UP;
const u8 RXE_RS_NODE_IB_CA = RDMA_NODE_IB_CA;
const u32 RXE_RS_QP1_QKEY = IB_QP1_QKEY;
const u32 RXE_RS_QPN_MASK = IB_QPN_MASK;
const u32 RXE_RS_MULTICAST_QPN = IB_MULTICAST_QPN;
const u16 RXE_RS_ROCE_V2_UDP_DPORT = ROCE_V2_UDP_DPORT;
/* MAD header values; those of the PMA's attributes in network order, as the MADs carry them. */
const u8 RXE_RS_MGMT_BASE_VERSION = IB_MGMT_BASE_VERSION;
const u8 RXE_RS_MGMT_CLASS_PERF_MGMT = IB_MGMT_CLASS_PERF_MGMT;
const u8 RXE_RS_MGMT_METHOD_GET = IB_MGMT_METHOD_GET;
const u8 RXE_RS_MGMT_METHOD_SET = IB_MGMT_METHOD_SET;
const u8 RXE_RS_MGMT_METHOD_GET_RESP = IB_MGMT_METHOD_GET_RESP;
const __be16 RXE_RS_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB =
	cpu_to_be16(IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB);
const __be16 RXE_RS_MGMT_MAD_STATUS_BAD_VERSION = cpu_to_be16(IB_MGMT_MAD_STATUS_BAD_VERSION);
const __be16 RXE_RS_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE =
	cpu_to_be16(IB_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE);
const __be16 RXE_RS_PMA_CLASS_PORT_INFO = IB_PMA_CLASS_PORT_INFO;
const __be16 RXE_RS_PMA_PORT_COUNTERS = IB_PMA_PORT_COUNTERS;
const __be16 RXE_RS_PMA_PORT_COUNTERS_EXT = IB_PMA_PORT_COUNTERS_EXT;
const __be16 RXE_RS_PMA_CLASS_CAP_EXT_WIDTH = IB_PMA_CLASS_CAP_EXT_WIDTH;
