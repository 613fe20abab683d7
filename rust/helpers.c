// SPDX-License-Identifier: GPL-2.0
/*
 * C shim of rxe_rs: see helpers.h. Nothing here keeps state or takes decisions.
 */
#include <linux/cpumask.h>
#include <linux/etherdevice.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <net/addrconf.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "helpers.h"

int rxe_rs_udata_in_is_empty(struct ib_udata *udata)
{
	return ib_is_udata_in_empty(udata);
}

int rxe_rs_respond_empty_udata(struct ib_udata *udata)
{
	return ib_respond_empty_udata(udata);
}

int rxe_rs_curr_port_state(struct net_device *ndev)
{
	return ib_get_curr_port_state(ndev);
}

unsigned int rxe_rs_netdev_flags(struct net_device *ndev)
{
	return netif_get_flags(ndev);
}

unsigned int rxe_rs_netdev_mtu(struct net_device *ndev)
{
	return READ_ONCE(ndev->mtu);
}

void rxe_rs_netdev_put(struct net_device *ndev)
{
	dev_put(ndev);
}

struct net_device *rxe_rs_notifier_info_to_dev(void *ptr)
{
	return netdev_notifier_info_to_dev(ptr);
}

/*
 * The EUI-64 of the netdev's MAC address, the node GUID of a RoCE device. A netdev
 * without a hardware address gets a random one, as connection management needs a
 * unique GUID. Returns 1 when the address was random.
 */
int rxe_rs_netdev_eui48(struct net_device *ndev, u8 *eui64)
{
	u8 mac[ETH_ALEN];
	int random = 0;

	if (ndev->addr_len >= ETH_ALEN) {
		memcpy(mac, ndev->dev_addr, ETH_ALEN);
	} else {
		eth_random_addr(mac);
		random = 1;
	}
	addrconf_addr_eui48(eui64, mac);
	return random;
}

unsigned int rxe_rs_num_possible_cpus(void)
{
	return num_possible_cpus();
}

struct module *rxe_rs_device_owner(struct ib_device *dev)
{
	return dev->ops.owner;
}

/* A device of the given size in the initial netns, its name chosen by the user. */
struct ib_device *rxe_rs_alloc_device(size_t size)
{
	struct ib_device *dev = _ib_alloc_device(size, &init_net);

	if (dev)
		ib_mark_name_assigned_by_user(dev);
	return dev;
}

unsigned long rxe_rs_vma_len(struct vm_area_struct *vma)
{
	return vma->vm_end - vma->vm_start;
}

void *rxe_rs_vmalloc_user(size_t size)
{
	return vmalloc_user(size);
}

/*
 * A copy from or to memory a process maps and may write at the same time (a ring): done
 * in C, where such a racy copy is the kernel's ordinary way of reading user-shared memory.
 */
void rxe_rs_shared_copy(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}

struct ib_ucontext *rxe_rs_bundle_context(struct uverbs_attr_bundle *attrs)
{
	return attrs->context;
}

struct ib_udata *rxe_rs_bundle_udata(struct uverbs_attr_bundle *attrs)
{
	return &attrs->driver_udata;
}

/* The context of the uverbs call that passed this udata. */
struct ib_ucontext *rxe_rs_udata_context(struct ib_udata *udata)
{
	return rdma_udata_to_uverbs_attr_bundle(udata)->context;
}

/* An unbound workqueue that can make progress under memory pressure. */
struct workqueue_struct *rxe_rs_alloc_workqueue(const char *name)
{
	return alloc_workqueue("%s", WQ_UNBOUND | WQ_MEM_RECLAIM, 0, name);
}

unsigned int rxe_rs_gid_attr_network_type(const struct ib_gid_attr *attr)
{
	return rdma_gid_attr_network_type(attr);
}

struct ib_umem *rxe_rs_umem_get(struct ib_device *dev, unsigned long addr, size_t size,
				int access)
{
	return ib_umem_get_va(dev, addr, size, access);
}
