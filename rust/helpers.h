/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shim of rxe_rs: out-of-line versions of the static inline functions and macros of
 * ib_core, uverbs, netdev, skb and UDP tunnel code that the Rust side needs. Each is a
 * thin wrapper (the tunnel one also fills in the C configuration structs).
 */
#ifndef RXE_RS_HELPERS_H
#define RXE_RS_HELPERS_H

#include <linux/types.h>
#include <linux/spinlock_types.h>

struct ib_device;
struct ib_udata;
struct net_device;
struct module;
struct notifier_block;
struct vm_area_struct;
struct ib_ucontext;
struct uverbs_attr_bundle;
struct workqueue_struct;
struct ib_gid_attr;
struct ib_umem;
struct net;
struct sk_buff;
struct sock;
struct socket;
struct sk_buff_head;
struct page;

int rxe_rs_udata_in_is_empty(struct ib_udata *udata);
int rxe_rs_respond_empty_udata(struct ib_udata *udata);
int rxe_rs_curr_port_state(struct net_device *ndev);
unsigned int rxe_rs_netdev_flags(struct net_device *ndev);
unsigned int rxe_rs_netdev_mtu(struct net_device *ndev);
void rxe_rs_netdev_put(struct net_device *ndev);
struct net_device *rxe_rs_notifier_info_to_dev(void *ptr);
int rxe_rs_netdev_eui48(struct net_device *ndev, u8 *eui64);
unsigned int rxe_rs_num_possible_cpus(void);
struct module *rxe_rs_device_owner(struct ib_device *dev);
struct ib_device *rxe_rs_alloc_device(size_t size);
void *rxe_rs_vmalloc_user(size_t size);
void rxe_rs_shared_copy(void *dst, const void *src, size_t len);
struct ib_ucontext *rxe_rs_bundle_context(struct uverbs_attr_bundle *attrs);
struct ib_udata *rxe_rs_bundle_udata(struct uverbs_attr_bundle *attrs);
struct ib_ucontext *rxe_rs_udata_context(struct ib_udata *udata);
struct workqueue_struct *rxe_rs_alloc_workqueue(const char *name, bool highpri);
struct workqueue_struct *rxe_rs_alloc_unbound_workqueue(const char *name);
u64 rxe_rs_current_owner(void);
bool rxe_rs_module_get(struct module *module);
void rxe_rs_module_put(struct module *module);
void rxe_rs_device_memory_get(struct ib_device *dev);
void rxe_rs_device_memory_put(struct ib_device *dev);
bool rxe_rs_queue_work_on(struct workqueue_struct *wq, unsigned int cpu,
			  struct work_struct *work);
unsigned int rxe_rs_gid_attr_network_type(const struct ib_gid_attr *attr);
struct ib_umem *rxe_rs_umem_get(struct ib_device *dev, unsigned long addr, size_t size,
				int access);

struct socket *rxe_rs_udp_tunnel_open(struct net *net, bool ipv6, u16 port,
				      int (*rcv)(struct sock *sk, struct sk_buff *skb));
void rxe_rs_udp_tunnel_close(struct socket *sock);
void *rxe_rs_net_generic(const struct net *net, unsigned int id);
struct net *rxe_rs_netdev_net(struct net_device *ndev);
struct net_device *rxe_rs_skb_dev(struct sk_buff *skb);
int rxe_rs_skb_linearize(struct sk_buff *skb);
const u8 *rxe_rs_skb_network_header(struct sk_buff *skb);
const u8 *rxe_rs_skb_data(struct sk_buff *skb);
unsigned int rxe_rs_skb_len(struct sk_buff *skb);
void rxe_rs_kfree_skb(struct sk_buff *skb);
unsigned long rxe_rs_spin_lock_irqsave(spinlock_t *lock);
void rxe_rs_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags);
int rxe_rs_spin_trylock_irqsave(spinlock_t *lock, unsigned long *flags);

struct sk_buff *rxe_rs_skb_alloc_ip(struct net_device *ndev, unsigned int len, u8 **data);
struct dst_entry *rxe_rs_route_lookup(struct net_device *ndev, bool ipv6, const u8 *saddr,
				      const u8 *daddr, u32 *cookie);
bool rxe_rs_dst_check(struct dst_entry *dst, u32 cookie);
void rxe_rs_dst_hold(struct dst_entry *dst);
int rxe_rs_skb_xmit_dst(struct sk_buff *skb, struct dst_entry *dst, bool ipv6);
void rxe_rs_skb_loop(struct sk_buff *skb, unsigned int ip_len);
void rxe_rs_skb_list_init(struct sk_buff_head *list);
void rxe_rs_skb_list_push(struct sk_buff_head *list, struct sk_buff *skb);
struct sk_buff *rxe_rs_skb_list_pop(struct sk_buff_head *list);
void rxe_rs_skb_list_purge(struct sk_buff_head *list);

size_t rxe_rs_umem_pages(struct ib_umem *umem, struct page **out, size_t max);
size_t rxe_rs_umem_offset(struct ib_umem *umem);
size_t rxe_rs_umem_length(struct ib_umem *umem);
void rxe_rs_page_write(struct page *page, size_t off, const void *src, size_t len);
void rxe_rs_page_read(struct page *page, size_t off, void *dst, size_t len);

struct ib_umem_odp;
struct mmu_interval_notifier;
struct mmu_notifier_range;
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

unsigned long rxe_rs_rcu_cookie(void);
void rxe_rs_rcu_wait_since(unsigned long cookie);
void rxe_rs_local_bh_disable(void);
void rxe_rs_local_bh_enable(void);

bool rxe_rs_device_try_get(struct ib_device *dev);
bool rxe_rs_virt_addr_valid(unsigned long addr);
void rxe_rs_netdev_hold(struct net_device *ndev);

#endif /* RXE_RS_HELPERS_H */
