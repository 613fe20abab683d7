// SPDX-License-Identifier: GPL-2.0
/*
 * C shim of rxe_rs: see helpers.h. Nothing here keeps state or takes decisions.
 */
#include <linux/bottom_half.h>
#include <linux/cpumask.h>
#include <linux/highmem.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/etherdevice.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <linux/rcupdate.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <net/addrconf.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/route.h>
#include <net/netns/generic.h>
#include <net/udp_tunnel.h>
#include <linux/hmm.h>
#include <linux/mmu_notifier.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
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

u64 rxe_rs_current_owner(void)
{
	const struct user_namespace *ns = current_user_ns();

	if (ns == &init_user_ns)
		return __kuid_val(current_euid());
	while (ns->parent != &init_user_ns)
		ns = ns->parent;
	if (!uid_eq(ns->owner, GLOBAL_ROOT_UID))
		return __kuid_val(ns->owner);
	return BIT_ULL(32) | ns->ns.inum;
}

bool rxe_rs_module_get(struct module *module)
{
	return try_module_get(module);
}

void rxe_rs_module_put(struct module *module)
{
	module_put(module);
}

/* The device's memory (not its registration): put_device() frees it after unregister. */
void rxe_rs_device_memory_get(struct ib_device *dev)
{
	get_device(&dev->dev);
}

void rxe_rs_device_memory_put(struct ib_device *dev)
{
	put_device(&dev->dev);
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

struct socket *rxe_rs_udp_tunnel_open(struct net *net, bool ipv6, u16 port,
				      int (*rcv)(struct sock *sk, struct sk_buff *skb))
{
	struct udp_port_cfg udp_cfg = { .family = ipv6 ? AF_INET6 : AF_INET,
					.ipv6_v6only = ipv6,
					.local_udp_port = htons(port) };
	struct udp_tunnel_sock_cfg tnl_cfg = { .encap_type = 1, .encap_rcv = rcv };
	struct socket *sock;
	int err = udp_sock_create(net, &udp_cfg, &sock);

	if (err < 0)
		return ERR_PTR(err);
	setup_udp_tunnel_sock(net, sock->sk, &tnl_cfg);
	return sock;
}

void rxe_rs_udp_tunnel_close(struct socket *sock)
{
	udp_tunnel_sock_release(sock->sk);
}

void *rxe_rs_net_generic(const struct net *net, unsigned int id)
{
	return net_generic(net, id);
}

struct net *rxe_rs_netdev_net(struct net_device *ndev)
{
	return dev_net(ndev);
}

struct net_device *rxe_rs_skb_dev(struct sk_buff *skb)
{
	return skb->dev;
}

int rxe_rs_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

const u8 *rxe_rs_skb_network_header(struct sk_buff *skb)
{
	return skb_network_header(skb);
}

const u8 *rxe_rs_skb_data(struct sk_buff *skb)
{
	return skb->data;
}

unsigned int rxe_rs_skb_len(struct sk_buff *skb)
{
	return skb->len;
}

void rxe_rs_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
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

/* Transmit: a buffer for a whole IP packet, which the caller writes from the IP header. */
struct sk_buff *rxe_rs_skb_alloc_ip(struct net_device *ndev, unsigned int len, u8 **data)
{
	unsigned int head = LL_RESERVED_SPACE(ndev);
	struct sk_buff *skb;

	skb = alloc_skb(head + len + ndev->needed_tailroom, GFP_ATOMIC);
	if (!skb)
		return NULL;
	skb_reserve(skb, head);
	*data = skb_put(skb, len);
	skb_reset_network_header(skb);
	skb->dev = ndev;
	return skb;
}

/*
 * Looks up the route from saddr to daddr (both 4 bytes for IPv4, 16 for IPv6) out of
 * ndev, in ndev's namespace. Returns it with a reference for the caller, or an
 * ERR_PTR(); *cookie is what rxe_rs_dst_check() later checks it against (IPv6).
 */
struct dst_entry *rxe_rs_route_lookup(struct net_device *ndev, bool ipv6, const u8 *saddr,
				      const u8 *daddr, u32 *cookie)
{
	struct net *net = dev_net(ndev);

	*cookie = 0;
	if (!ipv6) {
		struct flowi4 fl = {};
		struct rtable *rt;

		fl.flowi4_oif = ndev->ifindex;
		fl.flowi4_proto = IPPROTO_UDP;
		memcpy(&fl.saddr, saddr, 4);
		memcpy(&fl.daddr, daddr, 4);
		rt = ip_route_output_key(net, &fl);
		return IS_ERR(rt) ? ERR_CAST(rt) : &rt->dst;
	}
#if IS_ENABLED(CONFIG_IPV6)
	{
		struct flowi6 fl6 = {};
		struct dst_entry *dst;

		fl6.flowi6_oif = ndev->ifindex;
		fl6.flowi6_proto = IPPROTO_UDP;
		memcpy(&fl6.saddr, saddr, 16);
		memcpy(&fl6.daddr, daddr, 16);
		dst = ip6_dst_lookup_flow(net, NULL, &fl6, NULL);
		if (!IS_ERR(dst))
			*cookie = rt6_get_cookie(dst_rt6_info(dst));
		return dst;
	}
#else
	return ERR_PTR(-EAFNOSUPPORT);
#endif
}

/* Whether a route the caller holds is still the one to use (no route change since). */
bool rxe_rs_dst_check(struct dst_entry *dst, u32 cookie)
{
	return dst_check(dst, cookie) != NULL;
}

/* Another reference on a route the caller holds one of. */
void rxe_rs_dst_hold(struct dst_entry *dst)
{
	dst_hold(dst);
}

/*
 * Sends a packet the caller built (IP header first) along dst, which its addresses were
 * routed with. Consumes the buffer and the route's reference in every case. Returns 0
 * if the packet was handed on, a negative error if it was dropped (also by a full queue
 * below us, which the IP stack reports as NET_XMIT_DROP).
 */
int rxe_rs_skb_xmit_dst(struct sk_buff *skb, struct dst_entry *dst, bool ipv6)
{
	struct net *net = dev_net(skb->dev);
	int rc;

	skb_dst_set(skb, dst);
	if (!ipv6) {
		skb_set_transport_header(skb, sizeof(struct iphdr));
		memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
		skb->protocol = htons(ETH_P_IP);
		rc = ip_local_out(net, NULL, skb);
	} else {
#if IS_ENABLED(CONFIG_IPV6)
		skb_set_transport_header(skb, sizeof(struct ipv6hdr));
		memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
		skb->protocol = htons(ETH_P_IPV6);
		rc = ip6_local_out(net, NULL, skb);
#else
		kfree_skb(skb);
		return -EAFNOSUPPORT;
#endif
	}
	/* Congestion notified: the packet was queued. */
	rc = net_xmit_eval(rc);
	return rc > 0 ? -ENOBUFS : rc;
}

/* Turns a built packet into a received one: data from its UDP header on. */
void rxe_rs_skb_loop(struct sk_buff *skb, unsigned int ip_len)
{
	skb_set_transport_header(skb, ip_len);
	__skb_pull(skb, ip_len);
}

void rxe_rs_skb_list_init(struct sk_buff_head *list)
{
	__skb_queue_head_init(list);
}

void rxe_rs_skb_list_push(struct sk_buff_head *list, struct sk_buff *skb)
{
	__skb_queue_tail(list, skb);
}

struct sk_buff *rxe_rs_skb_list_pop(struct sk_buff_head *list)
{
	return __skb_dequeue(list);
}

void rxe_rs_skb_list_purge(struct sk_buff_head *list)
{
	__skb_queue_purge(list);
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

/* On-demand paging: the parts of ib_umem_odp and the MMU notifier that are inline. */
struct ib_umem_odp *rxe_rs_odp_of(struct mmu_interval_notifier *mni)
{
	return container_of(mni, struct ib_umem_odp, notifier);
}

/* Whether the callback may sleep; the range it covers. */
bool rxe_rs_odp_range(const struct mmu_notifier_range *range, unsigned long *start,
		      unsigned long *end)
{
	*start = range->start;
	*end = range->end;
	return mmu_notifier_range_blockable(range);
}

void rxe_rs_odp_set_seq(struct mmu_interval_notifier *mni, unsigned long seq)
{
	mmu_interval_set_seq(mni, seq);
}

void rxe_rs_odp_lock(struct ib_umem_odp *odp)
{
	mutex_lock(&odp->umem_mutex);
}

void rxe_rs_odp_unlock(struct ib_umem_odp *odp)
{
	mutex_unlock(&odp->umem_mutex);
}

unsigned long rxe_rs_odp_start(struct ib_umem_odp *odp)
{
	return ib_umem_start(odp);
}

unsigned long rxe_rs_odp_end(struct ib_umem_odp *odp)
{
	return ib_umem_end(odp);
}

bool rxe_rs_odp_writable(struct ib_umem_odp *odp)
{
	return odp->umem.writable;
}

void *rxe_rs_odp_private(struct ib_umem_odp *odp)
{
	return odp->private;
}

void rxe_rs_odp_set_private(struct ib_umem_odp *odp, void *private)
{
	odp->private = private;
}

/* Maps (and with fault, faults in) a range; on success umem_mutex is held. */
int rxe_rs_odp_map_and_lock(struct ib_umem_odp *odp, u64 va, u64 len, bool write, bool fault)
{
	return ib_umem_odp_map_dma_and_lock(odp, va, len, write ? HMM_PFN_WRITE : 0, fault);
}

/* The page at index of the umem if it is mapped (umem_mutex held), else NULL. */
struct page *rxe_rs_odp_page(struct ib_umem_odp *odp, size_t index, bool *writable)
{
	unsigned long pfn = odp->map.pfn_list[index];

	if (!(pfn & HMM_PFN_VALID))
		return NULL;
	*writable = pfn & HMM_PFN_WRITE;
	return hmm_pfn_to_page(pfn);
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
