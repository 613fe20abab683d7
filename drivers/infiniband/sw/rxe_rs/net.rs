// SPDX-License-Identifier: GPL-2.0

//! Reactions to events of the netdevs our devices sit on.
//!
//! Port state changes (carrier, up/down) need little from us: ib_core dispatches them and
//! `query_port` reads the state from the netdev; we count the times the port went down
//! (`link_downed`). What is ours too: a netdev that goes away takes its RDMA device with
//! it, and a new MTU changes the active path MTU.

use crate::device::RxeDev;
use crate::ib::{
    device::Device,
    netdev::{NetDevice, NetdevEvent, NetdevEvents},
};
use crate::RxeRs;

/// The handler of netdev events.
pub(crate) struct NetEvents;

impl NetdevEvents for NetEvents {
    fn event(event: NetdevEvent, ndev: &NetDevice) {
        if event == NetdevEvent::Other {
            return;
        }
        let Some(dev) = Device::<RxeRs>::find_by_netdev(ndev) else {
            return;
        };
        match event {
            // The notifier runs under the RTNL; unregistering waits for users of the
            // device, so it must happen on ib_core's workqueue.
            NetdevEvent::Unregister => dev.unregister_queued(),
            NetdevEvent::ChangeMtu => RxeDev::set_mtu(&dev, ndev.mtu()),
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                dev.port_changed(ndev.port_state());
            }
            NetdevEvent::Other => {}
        }
    }
}
