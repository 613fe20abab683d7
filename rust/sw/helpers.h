/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shim of rxe_rs's software-RoCE part: out-of-line versions of the static inline
 * functions and macros of skb, routing, UDP tunnel, ODP and module code that rust/sw/
 * needs. Each is a thin wrapper (the tunnel one also fills in the C configuration
 * structs).
 */
#ifndef RXE_RS_SW_HELPERS_H
#define RXE_RS_SW_HELPERS_H

#include <linux/types.h>

struct dst_entry;
struct ib_device;
struct ib_umem_odp;
struct mmu_interval_notifier;
struct mmu_notifier_range;
struct module;
struct net;
struct net_device;
struct page;
struct sk_buff;
struct sk_buff_head;
struct sock;
struct socket;

u64 rxe_rs_current_owner(void);
bool rxe_rs_module_get(struct module *module);
void rxe_rs_module_put(struct module *module);
void rxe_rs_device_memory_get(struct ib_device *dev);
void rxe_rs_device_memory_put(struct ib_device *dev);
struct socket *rxe_rs_udp_tunnel_open(struct net *net, bool ipv6, u16 port,
				      int (*rcv)(struct sock *sk, struct sk_buff *skb));
void rxe_rs_udp_tunnel_close(struct socket *sock);
struct net *rxe_rs_netdev_net(struct net_device *ndev);
bool rxe_rs_net_get_live(struct net *net);
void rxe_rs_net_put(struct net *net);
struct net_device *rxe_rs_skb_dev(struct sk_buff *skb);
int rxe_rs_skb_linearize(struct sk_buff *skb);
const u8 *rxe_rs_skb_network_header(struct sk_buff *skb);
const u8 *rxe_rs_skb_data(struct sk_buff *skb);
unsigned int rxe_rs_skb_len(struct sk_buff *skb);
void rxe_rs_kfree_skb(struct sk_buff *skb);
int rxe_rs_skb_vlan_id(struct sk_buff *skb);
void rxe_rs_skb_set_vlan_id(struct sk_buff *skb, int vid);
struct sk_buff *rxe_rs_skb_alloc_ip(struct net_device *ndev, unsigned int len, u8 **data);
struct dst_entry *rxe_rs_route_lookup(struct net_device *ndev, int oif, bool ipv6,
				      const u8 *saddr, const u8 *daddr, u32 *cookie);
bool rxe_rs_dst_check(struct dst_entry *dst, u32 cookie);
void rxe_rs_dst_hold(struct dst_entry *dst);
int rxe_rs_skb_xmit_dst(struct sk_buff *skb, struct dst_entry *dst, bool ipv6);
void rxe_rs_skb_loop(struct sk_buff *skb, unsigned int ip_len);
void rxe_rs_skb_list_init(struct sk_buff_head *list);
void rxe_rs_skb_list_push(struct sk_buff_head *list, struct sk_buff *skb);
struct sk_buff *rxe_rs_skb_list_pop(struct sk_buff_head *list);
void rxe_rs_skb_list_purge(struct sk_buff_head *list);
struct ib_umem_odp *rxe_rs_odp_of(struct mmu_interval_notifier *mni);
bool rxe_rs_odp_range(const struct mmu_notifier_range *range, unsigned long *start,
		      unsigned long *end);
void rxe_rs_odp_set_seq(struct mmu_interval_notifier *mni, unsigned long seq);
void rxe_rs_odp_lock(struct ib_umem_odp *odp);
void rxe_rs_odp_unlock(struct ib_umem_odp *odp);
unsigned long rxe_rs_odp_start(struct ib_umem_odp *odp);
unsigned long rxe_rs_odp_end(struct ib_umem_odp *odp);
bool rxe_rs_odp_writable(struct ib_umem_odp *odp);
void *rxe_rs_odp_private(struct ib_umem_odp *odp);
void rxe_rs_odp_set_private(struct ib_umem_odp *odp, void *private);
int rxe_rs_odp_map_and_lock(struct ib_umem_odp *odp, u64 va, u64 len, bool write, bool fault);
struct page *rxe_rs_odp_page(struct ib_umem_odp *odp, size_t index, bool *writable);

#endif /* RXE_RS_SW_HELPERS_H */
