// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over ib_core, uverbs and the netdev pieces an RDMA driver needs:
//! the generic layer, which names no driver.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h),
//! [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)
//!
//! Together with the software-RoCE part beside it (`rust/sw/`: librxe's
//! ring layout, the RoCE v2 UDP sockets and packets, the ODP page mirror), this is the
//! only code of the module that uses `unsafe` and raw bindings; the driver under
//! `drivers/infiniband/sw/rxe_rs/` is `#![deny(unsafe_code)]`. The crate root loads
//! this file as its module `ib` (the software part and the `new_spinlock_irq!` macro
//! name it so) and the software part as `sw`; nothing here names `sw`, so a driver
//! that is not a software RoCE device loads this layer alone (`samples/rdma_minimal`).
//!
//! | Rust | C | who allocates | who frees |
//! |---|---|---|---|
//! | [`device::Device<T>`] | `struct ib_device` + driver data | `_ib_alloc_device()` | ib_core, after `dealloc_driver` |
//! | [`ucontext::Ucontext<T>`] | `struct ib_ucontext` + data | uverbs | uverbs, after `dealloc_ucontext` |
//! | [`pd::Pd<T>`] | `struct ib_pd` + data | ib_core | ib_core, after `dealloc_pd` |
//! | [`cq::Cq<T>`] | `struct ib_cq` + data | ib_core | ib_core, after `destroy_cq` |
//! | [`qp::Qp<T>`] | `struct ib_qp` + data | ib_core | ib_core, after `destroy_qp` |
//! | [`srq::Srq<T>`] | `struct ib_srq` + data | ib_core | ib_core, after `destroy_srq` |
//! | [`ah::Ah<T>`] | `struct ib_ah` + data | ib_core | ib_core, after `destroy_ah` |
//! | [`mw::Mw<T>`] | `struct ib_mw` + data | ib_core | ib_core, after `dealloc_mw` |
//! | [`mr::Mr<T>`] | `struct ib_mr` + data | the driver (`KBox`) | the driver, in `dereg_mr` |
//! | [`mr::Umem`] | `struct ib_umem` | `ib_umem_get()` | `ib_umem_release()` |
//! | [`mmap::UserMap`] | `struct rdma_user_mmap_entry` + memory | the driver | ib_core's `mmap_free` |
//! | [`mmap::UserMem`] | charged `vmap()` of `VM_USERMAP` pages | the driver | last [`Arc`](kernel::sync::Arc), pages at last unmap |
//! | [`link::Registration<T>`] | `struct rdma_link_ops` | the module (pinned) | the module |
//! | [`netdev::Notifier<T>`] | `struct notifier_block` | the module (pinned) | the module |
//!
//! In every case where ib_core allocates, the C struct is the first field of a `repr(C)`
//! container and the driver's data is initialised in place behind it; the data is
//! dropped in place when ib_core says the object is gone, and the memory is never freed
//! here. The verbs objects (all rows from `Ucontext` to `Mr`) are one generic container,
//! [`object::Object`], of one kind each; each object's file has its trampolines and
//! fills in its part of the ops table. Callbacks run in process context unless their
//! documentation says otherwise.
//!
//! This file is loaded with `#[path]`, so the modules below resolve next to it.

pub(crate) mod ah;
pub(crate) mod bindings;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod link;
pub(crate) mod mad;
pub(crate) mod mmap;
pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod netdev;
pub(crate) mod object;
pub(crate) mod pd;
pub(crate) mod qp;
pub(crate) mod srq;
pub(crate) mod stats;
pub(crate) mod sync;
pub(crate) mod task;
pub(crate) mod ucontext;
pub(crate) mod udata;
pub(crate) mod verbs;
pub(crate) mod wr;
