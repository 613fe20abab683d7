/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C shim of rxe_rs's generic layer: out-of-line versions of the static inline functions
 * and macros of ib_core, uverbs, netdev and the core kernel that rust/ needs. Each is a
 * thin wrapper. The software-RoCE part has its own (sw/helpers.h).
 */
#ifndef RXE_RS_HELPERS_H
#define RXE_RS_HELPERS_H

#include <linux/types.h>
#include <linux/spinlock_types.h>

struct ib_device;
struct module;
struct ib_udata;
struct net_device;
struct notifier_block;
struct vm_area_struct;
struct ib_ucontext;
struct uverbs_attr_bundle;
struct workqueue_struct;
struct ib_gid_attr;
struct ib_umem;
struct page;

int rxe_rs_udata_in_is_empty(struct ib_udata *udata);
int rxe_rs_respond_empty_udata(struct ib_udata *udata);
int rxe_rs_curr_port_state(struct net_device *ndev);
unsigned int rxe_rs_netdev_flags(struct net_device *ndev);
unsigned int rxe_rs_netdev_mtu(struct net_device *ndev);
int rxe_rs_netdev_ifindex(struct net_device *ndev);
struct net_device *rxe_rs_vlan_real_dev(struct net_device *ndev);
int rxe_rs_vlan_id(struct net_device *ndev);
void rxe_rs_netdev_put(struct net_device *ndev);
struct net_device *rxe_rs_notifier_info_to_dev(void *ptr);
int rxe_rs_netdev_eui48(struct net_device *ndev, u8 *eui64);
unsigned int rxe_rs_num_possible_cpus(void);
struct module *rxe_rs_device_owner(struct ib_device *dev);
struct ib_device *rxe_rs_alloc_device(size_t size, struct net_device *ndev);
void *rxe_rs_vmalloc_user(size_t size);
void rxe_rs_shared_copy(void *dst, const void *src, size_t len);
struct ib_ucontext *rxe_rs_bundle_context(struct uverbs_attr_bundle *attrs);
struct ib_udata *rxe_rs_bundle_udata(struct uverbs_attr_bundle *attrs);
struct ib_ucontext *rxe_rs_udata_context(struct ib_udata *udata);
struct workqueue_struct *rxe_rs_alloc_workqueue(const char *name, bool highpri);
struct workqueue_struct *rxe_rs_alloc_unbound_workqueue(const char *name);
bool rxe_rs_queue_work_on(struct workqueue_struct *wq, unsigned int cpu,
			  struct work_struct *work);
unsigned int rxe_rs_gid_attr_network_type(const struct ib_gid_attr *attr);
int rxe_rs_gid_attr_ndev(const struct ib_gid_attr *attr, int *vlan_id);
bool rxe_rs_gid_of_netdev(struct ib_device *dev, u32 port, const u8 *gid,
			  struct net_device *ndev);
int rxe_rs_own_gid_vlan(struct ib_device *dev, const u8 *gid);
struct ib_umem *rxe_rs_umem_get(struct ib_device *dev, unsigned long addr, size_t size,
				int access);

unsigned long rxe_rs_spin_lock_irqsave(spinlock_t *lock);
void rxe_rs_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags);
int rxe_rs_spin_trylock_irqsave(spinlock_t *lock, unsigned long *flags);

size_t rxe_rs_umem_pages(struct ib_umem *umem, struct page **out, size_t max);
size_t rxe_rs_umem_offset(struct ib_umem *umem);
size_t rxe_rs_umem_length(struct ib_umem *umem);
bool rxe_rs_umem_writable(struct ib_umem *umem);
void rxe_rs_page_write(struct page *page, size_t off, const void *src, size_t len);
void rxe_rs_page_read(struct page *page, size_t off, void *dst, size_t len);

unsigned long rxe_rs_rcu_cookie(void);

bool rxe_rs_module_present(struct module *self, const char *name);
bool rxe_rs_module_is(const void *mod, const char *name);
int rxe_rs_notify_busy(void);
void rxe_rs_rcu_wait_since(unsigned long cookie);
void rxe_rs_local_bh_disable(void);
void rxe_rs_local_bh_enable(void);

struct attribute_group;
struct device;
const struct attribute_group *rxe_rs_parent_group(void);
struct ib_device *rxe_rs_device_to_ibdev(struct device *device);
ssize_t rxe_rs_sysfs_emit_netdev_name(char *buf, struct net_device *ndev);

bool rxe_rs_device_try_get(struct ib_device *dev);
bool rxe_rs_virt_addr_valid(unsigned long addr);
void rxe_rs_netdev_hold(struct net_device *ndev);

#endif /* RXE_RS_HELPERS_H */
