// SPDX-License-Identifier: GPL-2.0
/*
 * C shim of rxe_rs's generic layer: see helpers.h. Nothing here keeps state or takes
 * decisions.
 */
#include <linux/bottom_half.h>
#include <linux/cpumask.h>
#include <linux/etherdevice.h>
#include <linux/highmem.h>
#include <linux/if_vlan.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/notifier.h>
#include <linux/netdevice.h>
#include <linux/rcupdate.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <net/addrconf.h>
#include <rdma/ib_cache.h>
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

int rxe_rs_netdev_ifindex(struct net_device *ndev)
{
	return READ_ONCE(ndev->ifindex);
}

/*
 * The device a VLAN device sits on, at the bottom of stacked ones (each holds the one
 * below), or NULL for another kind.
 */
struct net_device *rxe_rs_vlan_real_dev(struct net_device *ndev)
{
	return is_vlan_dev(ndev) ? vlan_dev_real_dev(ndev) : NULL;
}

/* The VLAN ID of an 802.1Q VLAN device, or -1 for another kind. */
int rxe_rs_vlan_id(struct net_device *ndev)
{
	return is_vlan_dev(ndev) ? vlan_dev_vlan_id(ndev) : -1;
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
/*
 * A device of ndev's network namespace: with ib_core's namespaces exclusive (rdma system
 * set netns exclusive) it is seen and used there only; in the shared mode (the default)
 * ib_core puts every device in the initial namespace, which all see.
 */
struct ib_device *rxe_rs_alloc_device(size_t size, struct net_device *ndev)
{
	struct ib_device *dev = _ib_alloc_device(size, dev_net(ndev));

	if (dev)
		ib_mark_name_assigned_by_user(dev);
	return dev;
}

/*
 * Zeroed memory for a ring a process maps, as vmalloc_user() makes it (VM_USERMAP, for
 * remap_vmalloc_range()), but charged to the calling process's memory cgroup: its pages
 * and their array are allocated with GFP_KERNEL_ACCOUNT and handed to vmap() with
 * VM_MAP_PUT_PAGES, so that vfree() frees them.
 */
void *rxe_rs_vmalloc_user(size_t size)
{
	unsigned long count = DIV_ROUND_UP(size, PAGE_SIZE), i;
	struct page **pages;
	void *addr;

	if (!count || count > UINT_MAX)
		return NULL;
	pages = kvmalloc_array(count, sizeof(*pages), GFP_KERNEL_ACCOUNT);
	if (!pages)
		return NULL;
	for (i = 0; i < count; i++) {
		pages[i] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!pages[i])
			goto free;
	}
	addr = vmap(pages, count, VM_USERMAP | VM_MAP_PUT_PAGES, PAGE_KERNEL);
	if (addr)
		return addr;
free:
	while (i--)
		__free_page(pages[i]);
	kvfree(pages);
	return NULL;
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

/* A per-CPU, high-priority workqueue that can make progress under memory pressure. */
struct workqueue_struct *rxe_rs_alloc_workqueue(const char *name, bool highpri)
{
	return alloc_workqueue("%s", WQ_PERCPU | (highpri ? WQ_HIGHPRI : 0) | WQ_MEM_RECLAIM,
			       0, name);
}

/* For work that may sleep without bound: not per CPU, no rescuer. */
struct workqueue_struct *rxe_rs_alloc_unbound_workqueue(const char *name)
{
	return alloc_workqueue("%s", WQ_UNBOUND, WQ_UNBOUND_MAX_ACTIVE, name);
}

unsigned int rxe_rs_gid_attr_network_type(const struct ib_gid_attr *attr)
{
	return rdma_gid_attr_network_type(attr);
}

/* Whether gid is a RoCE v2 GID of port whose netdev is ndev. Any context. */
bool rxe_rs_gid_of_netdev(struct ib_device *dev, u32 port, const u8 *gid,
			  struct net_device *ndev)
{
	const struct ib_gid_attr *attr;

	attr = rdma_find_gid_by_port(dev, (const union ib_gid *)gid,
				     IB_GID_TYPE_ROCE_UDP_ENCAP, port, ndev);
	if (IS_ERR(attr))
		return false;
	rdma_put_gid_attr(attr);
	return true;
}

/*
 * The ifindex of the netdev a GID entry belongs to, 0 if it has none (any more), -1 if it
 * is a VLAN device in another namespace than its real netdev (whose namespace packets
 * are routed in); in *vlan_id that netdev's VLAN ID if it is an 802.1Q VLAN device,
 * else -1.
 */
int rxe_rs_gid_attr_ndev(const struct ib_gid_attr *attr, int *vlan_id)
{
	struct net_device *ndev;
	int ifindex = 0;

	*vlan_id = -1;
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(attr);
	if (IS_ERR(ndev)) {
		/* No netdev. */
	} else if (is_vlan_dev(ndev) &&
		   !net_eq(dev_net(ndev), dev_net(vlan_dev_real_dev(ndev)))) {
		/* Its index is not one of the real netdev's namespace: none to send by. */
		ifindex = -1;
	} else {
		ifindex = ndev->ifindex;
		*vlan_id = rxe_rs_vlan_id(ndev);
	}
	rcu_read_unlock();
	return ifindex;
}

/*
 * Whether gid is a RoCE v2 GID of the device (of any of its netdevs): -2 if not, else the
 * VLAN ID of its netdev as rxe_rs_gid_attr_ndev() gives it, or -1 for none. Any context.
 */
int rxe_rs_own_gid_vlan(struct ib_device *dev, const u8 *gid)
{
	const struct ib_gid_attr *attr;
	int vlan_id;

	attr = rdma_find_gid(dev, (const union ib_gid *)gid, IB_GID_TYPE_ROCE_UDP_ENCAP, NULL);
	if (IS_ERR(attr))
		return -2;
	rxe_rs_gid_attr_ndev(attr, &vlan_id);
	rdma_put_gid_attr(attr);
	return vlan_id;
}

struct ib_umem *rxe_rs_umem_get(struct ib_device *dev, unsigned long addr, size_t size,
				int access)
{
	return ib_umem_get_va(dev, addr, size, access);
}

unsigned long rxe_rs_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

void rxe_rs_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

int rxe_rs_spin_trylock_irqsave(spinlock_t *lock, unsigned long *flags)
{
	return spin_trylock_irqsave(lock, *flags);
}

/* The pages of a umem, in order; returns how many were written (at most max). */
size_t rxe_rs_umem_pages(struct ib_umem *umem, struct page **out, size_t max)
{
	struct sg_page_iter it;
	size_t n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &it, 0) {
		if (n == max)
			break;
		out[n++] = sg_page_iter_page(&it);
	}
	return n;
}

size_t rxe_rs_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

size_t rxe_rs_umem_length(struct ib_umem *umem)
{
	return umem->length;
}

bool rxe_rs_umem_writable(struct ib_umem *umem)
{
	return umem->writable;
}

void rxe_rs_page_write(struct page *page, size_t off, const void *src, size_t len)
{
	memcpy_to_page(page, off, src, len);
}

void rxe_rs_page_read(struct page *page, size_t off, void *dst, size_t len)
{
	memcpy_from_page(dst, page, off, len);
}

bool rxe_rs_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

bool rxe_rs_virt_addr_valid(unsigned long addr)
{
	return virt_addr_valid((void *)addr);
}

void rxe_rs_netdev_hold(struct net_device *ndev)
{
	dev_hold(ndev);
}

/*
 * Where RCU's grace periods stand now, and a wait (expedited) until a full grace period
 * has passed since @cookie, none if one has: the polled grace-period API, which is
 * partly inline with TINY_RCU.
 */
unsigned long rxe_rs_rcu_cookie(void)
{
	return get_state_synchronize_rcu();
}

void rxe_rs_rcu_wait_since(unsigned long cookie)
{
	cond_synchronize_rcu_expedited(cookie);
}

/* Bottom halves off and on again; turning them on runs what became pending. */
void rxe_rs_local_bh_disable(void)
{
	local_bh_disable();
}

void rxe_rs_local_bh_enable(void)
{
	local_bh_enable();
}

/* Queues @work on @wq (a per-CPU workqueue) on @cpu, or on this CPU if @cpu is offline. */
bool rxe_rs_queue_work_on(struct workqueue_struct *wq, unsigned int cpu,
			  struct work_struct *work)
{
	if (cpu >= nr_cpu_ids || !cpu_online(cpu))
		return queue_work(wq, work);
	return queue_work_on(cpu, wq, work);
}

/*
 * The `parent` attribute of a device (the name of its port's netdev, as rxe shows it):
 * the static tables sysfs's macros build; the show callback is Rust's (rust/device.rs).
 */
ssize_t rxe_rs_parent_show(struct device *device, struct device_attribute *attr, char *buf);
static struct device_attribute dev_attr_parent = __ATTR(parent, 0444, rxe_rs_parent_show, NULL);
static struct attribute *rxe_rs_parent_attrs[] = { &dev_attr_parent.attr, NULL };
static const struct attribute_group parent_group = { .attrs = rxe_rs_parent_attrs };

const struct attribute_group *rxe_rs_parent_group(void)
{
	return &parent_group;
}

struct ib_device *rxe_rs_device_to_ibdev(struct device *device)
{
	return rdma_device_to_ibdev(device);
}

ssize_t rxe_rs_sysfs_emit_netdev_name(char *buf, struct net_device *ndev)
{
	return sysfs_emit(buf, "%s\n", netdev_name(ndev));
}

/*
 * Whether module `name` is loaded (or built in with parameters): whether it has its
 * directory in /sys/module, the kset every module's kobject is in, our own's included.
 */
bool rxe_rs_module_present(struct module *self, const char *name)
{
	struct kobject *kobj = kset_find_obj(self->mkobj.kobj.kset, name);

	kobject_put(kobj);
	return kobj;
}

/* Whether the module a module notifier was called for is `name`. */
bool rxe_rs_module_is(const void *mod, const char *name)
{
	return !strcmp(((const struct module *)mod)->name, name);
}

/* What a module notifier returns to make a module's loading fail with EBUSY. */
int rxe_rs_notify_busy(void)
{
	return notifier_from_errno(-EBUSY);
}
