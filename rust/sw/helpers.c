// SPDX-License-Identifier: GPL-2.0
/*
 * C shim of rxe_rs's software-RoCE part: see helpers.h. Nothing here keeps state or
 * takes decisions.
 */
#include <linux/cred.h>
#include <linux/hmm.h>
#include <linux/if_vlan.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/route.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_umem_odp.h>
#include <rdma/ib_verbs.h>

#include "helpers.h"

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

/* Receive: the VLAN ID noted on a buffer by rxe_rs_skb_set_vlan_id(), or -1. */
int rxe_rs_skb_vlan_id(struct sk_buff *skb)
{
	return skb_vlan_tag_present(skb) ? skb_vlan_tag_get_id(skb) : -1;
}

/* Notes VLAN ID vid on a buffer, or that it has none (vid < 0). */
void rxe_rs_skb_set_vlan_id(struct sk_buff *skb, int vid)
{
	if (vid < 0)
		__vlan_hwaccel_clear_tag(skb);
	else
		__vlan_hwaccel_put_tag(skb, htons(ETH_P_8021Q), vid);
}

/*
 * Transmit: a buffer for a whole IP packet, which the caller writes from the IP header,
 * with room in front for ndev's link-layer header and a VLAN tag (for a packet that
 * leaves through a VLAN device on ndev).
 */
struct sk_buff *rxe_rs_skb_alloc_ip(struct net_device *ndev, unsigned int len, u8 **data)
{
	unsigned int head = LL_RESERVED_SPACE_EXTRA(ndev, VLAN_HLEN);
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
 * Whether the netdev numbered oif in ndev's namespace is ndev or a VLAN device on it
 * (vlan_dev_real_dev() goes down through stacked VLAN devices). Called under
 * rcu_read_lock().
 */
static bool rxe_rs_oif_of(struct net_device *ndev, int oif)
{
	struct net_device *out;

	if (oif == ndev->ifindex)
		return true;
	out = dev_get_by_index_rcu(dev_net(ndev), oif);
	return out && is_vlan_dev(out) && vlan_dev_real_dev(out) == ndev;
}

/*
 * Looks up the route from saddr to daddr (both 4 bytes for IPv4, 16 for IPv6) out of
 * the netdev numbered oif, which must be ndev or a VLAN device on it, in ndev's
 * namespace. Returns it with a reference for the caller, or an ERR_PTR(); *cookie is
 * what rxe_rs_dst_check() later checks it against (IPv6).
 */
struct dst_entry *rxe_rs_route_lookup(struct net_device *ndev, int oif, bool ipv6,
				      const u8 *saddr, const u8 *daddr, u32 *cookie)
{
	struct net *net = dev_net(ndev);
	struct dst_entry *dst;

	*cookie = 0;
	/* The check and the lookup in one section: oif cannot name another netdev between. */
	rcu_read_lock();
	if (!rxe_rs_oif_of(ndev, oif)) {
		dst = ERR_PTR(-ENETUNREACH);
	} else if (!ipv6) {
		struct flowi4 fl = {};
		struct rtable *rt;

		fl.flowi4_oif = oif;
		fl.flowi4_proto = IPPROTO_UDP;
		memcpy(&fl.saddr, saddr, 4);
		memcpy(&fl.daddr, daddr, 4);
		rt = ip_route_output_key(net, &fl);
		dst = IS_ERR(rt) ? ERR_CAST(rt) : &rt->dst;
	} else {
#if IS_ENABLED(CONFIG_IPV6)
		struct flowi6 fl6 = {};

		fl6.flowi6_oif = oif;
		fl6.flowi6_proto = IPPROTO_UDP;
		memcpy(&fl6.saddr, saddr, 16);
		memcpy(&fl6.daddr, daddr, 16);
		dst = ip6_dst_lookup_flow(net, NULL, &fl6, NULL);
		if (!IS_ERR(dst))
			*cookie = rt6_get_cookie(dst_rt6_info(dst));
#else
		dst = ERR_PTR(-EAFNOSUPPORT);
#endif
	}
	rcu_read_unlock();
	return dst;
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

bool rxe_rs_net_get_live(struct net *net)
{
	return maybe_get_net(net) != NULL;
}

void rxe_rs_net_put(struct net *net)
{
	put_net(net);
}
