// SPDX-License-Identifier: GPL-2.0
/*
 * C shim of rxe_rs: see helpers.h. Nothing here keeps state or takes decisions.
 */
#include <linux/cpumask.h>
#include <linux/etherdevice.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <net/addrconf.h>
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
