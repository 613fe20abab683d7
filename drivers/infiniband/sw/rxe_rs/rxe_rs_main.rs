// SPDX-License-Identifier: GPL-2.0

//! rxe_rs: a Soft-RoCE RDMA device driver.
//!
//! rxe_rs turns any Ethernet netdev into an RDMA device that speaks RoCE v2 on the wire
//! and the user ABI of the kernel's own Soft-RoCE driver (rxe), so that stock rdma-core
//! and its rxe provider run unchanged on it. Devices are made with
//! `rdma link add NAME type rxe_rs netdev DEV`, and with the parameter `link_type_rxe=1`
//! (which `make install` sets) with rdma_rxe's `type rxe` too, in rdma_rxe's place.
//!
//! This crate root holds the module and the driver's type ([`RxeRs`], whose device
//! verbs `device.rs` implements, each object's verbs its file); the concept files beside
//! it are the driver. `rust/` (loaded as [`ib`]) is the generic abstraction layer over
//! ib_core and `rust/sw/` (loaded as [`sw`]) the software-RoCE part beside it: the only
//! places with `unsafe` code.

#![deny(unsafe_code)]

// Out of tree the layer is at the checkout's top; a kernel tree has it beside the driver.
#[allow(unsafe_code)]
#[cfg_attr(not(rxe_rs_in_tree), path = "../../../../rust/lib.rs")]
#[cfg_attr(rxe_rs_in_tree, path = "rust/lib.rs")]
mod ib;
#[allow(unsafe_code)]
#[cfg_attr(not(rxe_rs_in_tree), path = "../../../../rust/sw/mod.rs")]
#[cfg_attr(rxe_rs_in_tree, path = "rust/sw/mod.rs")]
mod sw;

mod ah;
mod cq;
mod device;
mod fault;
mod loopback;
mod mcast;
mod mr;
mod net;
mod param;
mod pd;
mod qp;
mod queue;
mod recv;
#[path = "roce/lib.rs"]
pub mod roce;
mod srq;
mod stats;
mod table;
mod ucontext;
mod wc;
mod wqe;
mod xmit;

use kernel::prelude::*;

module! {
    type: RxeRsModule,
    name: "rxe_rs",
    authors: ["The rxe_rs developers"],
    description: "Soft-RoCE RDMA driver in Rust, rxe user ABI, RoCE v2",
    license: "GPL",
    alias: ["rdma-link-rxe_rs"],
    params: {
        link_type_rxe: u8 {
            default: 0,
            description: "1: register rdma_rxe's link type rxe too (in its place: rdma_rxe cannot load meanwhile, nor may it be loaded)",
        },
    },
}

/// The driver: the verbs of an rxe_rs device.
pub(crate) struct RxeRs;

/// The loaded module: the link type, the claim on all devices, the netdev notifier and
/// the RoCE v2 sockets.
///
/// Fields are dropped in declaration order, which is the teardown order: the link type
/// goes first (waiting for a running `newlink`), so no device can appear; then every
/// device is unregistered; then the notifier, which must outlive the devices so that one
/// whose netdev disappears is always removed; last the UDP sockets of every namespace,
/// after which no packet reaches the driver.
#[pin_data]
struct RxeRsModule {
    /// rdma_rxe's link type, with `link_type_rxe=1`.
    rxe_link: Option<Pin<KBox<ib::link::StandIn<device::RxeTypeLink>>>>,
    #[pin]
    link: ib::link::Registration<device::RxeLink>,
    devices: ib::device::AllDevices<RxeRs>,
    #[pin]
    notifier: ib::netdev::Notifier<net::NetEvents>,
    #[pin]
    tunnels: sw::udp::Tunnels<recv::Recv>,
    /// Dropped last: its work items may outlive every device.
    faults: sw::odp::FaultQueue,
}

impl kernel::InPlaceModule for RxeRsModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        // Set up in reverse teardown order; on failure the fields already made are dropped.
        try_pin_init!(Self {
            faults: sw::odp::FaultQueue::new()?,
            tunnels <- sw::udp::Tunnels::register(),
            notifier <- ib::netdev::Notifier::register(),
            devices: ib::device::AllDevices::new(),
            link <- ib::link::Registration::new(),
            rxe_link: rxe_link(module)?,
        })
    }
}

/// rdma_rxe's link type in its place, if the module parameter asks for it.
#[allow(clippy::type_complexity)]
fn rxe_link(
    module: &'static ThisModule,
) -> Result<Option<Pin<KBox<ib::link::StandIn<device::RxeTypeLink>>>>> {
    if *module_parameters::link_type_rxe.value() == 0 {
        return Ok(None);
    }
    KBox::pin_init(ib::link::StandIn::new(module, c"rdma_rxe"), GFP_KERNEL)
        .inspect_err(|_| pr_err!("link_type_rxe=1, but rdma_rxe is loaded\n"))
        .map(Some)
}
