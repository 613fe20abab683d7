// SPDX-License-Identifier: GPL-2.0

//! Multicast groups: which UD QPs receive what is sent to a multicast GID.
//!
//! ib_core checks that the QP is UD and the GID a multicast one, keeps each process's
//! attachments, refuses to destroy an attached QP (`EBUSY`) and detaches a process's QPs
//! when it closes the device. The device keeps the groups, within its limits (groups,
//! QPs per group, attachments in all), and has its netdev receive each group's
//! link-layer address while the group has members. A datagram to the multicast QP
//! number (0xffffff) is delivered to every member of the group its destination address
//! names (see `recv`).

use crate::ib::{
    netdev::NetDevice,
    sync::{new_spinlock_irq, SpinLockIrq},
};
use crate::param;
use kernel::{new_mutex, prelude::*, sync::Mutex};

/// The destination QP number of multicast datagrams.
pub(crate) const MULTICAST_QPN: u32 = 0xff_ffff;

/// The most members a group has, and so the most QPs one datagram goes to.
pub(crate) const MAX_MEMBERS: usize = param::MAX_MCAST_QP_ATTACH as usize;

struct Group {
    gid: [u8; 16],
    qpns: KVec<u32>,
}

/// The device's multicast groups.
#[pin_data]
pub(crate) struct McastTable {
    /// Taken by attach and detach, which program the netdev's filter in the order they
    /// change the groups.
    #[pin]
    changes: Mutex<()>,
    /// The groups, read by the receive path.
    #[pin]
    groups: SpinLockIrq<KVec<Group>>,
}

/// The Ethernet multicast address frames to the multicast GID `gid` go to (IPv4-mapped
/// or IPv6 multicast, the two kinds ib_core lets attach).
fn mac_of(gid: &[u8; 16]) -> [u8; 6] {
    if gid[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
        [0x01, 0x00, 0x5e, gid[13] & 0x7f, gid[14], gid[15]]
    } else {
        [0x33, 0x33, gid[12], gid[13], gid[14], gid[15]]
    }
}

impl McastTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            changes <- new_mutex!(()),
            groups <- new_spinlock_irq!(KVec::new()),
        })
    }

    /// QP `qpn` joins group `gid` (again: nothing changes); the netdev receives the
    /// group's frames from its first member on.
    pub(crate) fn attach(&self, ndev: &NetDevice, gid: &[u8; 16], qpn: u32) -> Result {
        let _changes = self.changes.lock();
        let created = {
            let mut groups = self.groups.lock();
            let total: usize = groups.iter().map(|g| g.qpns.len()).sum();
            let (i, created) = match groups.iter().position(|g| g.gid == *gid) {
                Some(i) => (i, false),
                None => {
                    if groups.len() >= param::MAX_MCAST_GRP as usize {
                        return Err(ENOMEM);
                    }
                    // Under a spinlock: allocations here may not sleep.
                    groups.push(
                        Group {
                            gid: *gid,
                            qpns: KVec::new(),
                        },
                        GFP_ATOMIC,
                    )?;
                    (groups.len() - 1, true)
                }
            };
            let g = &mut groups[i];
            if g.qpns.contains(&qpn) {
                return Ok(());
            }
            let full =
                g.qpns.len() >= MAX_MEMBERS || total >= param::MAX_TOTAL_MCAST_QP_ATTACH as usize;
            let res = if full {
                Err(ENOMEM)
            } else {
                g.qpns.push(qpn, GFP_ATOMIC).map_err(Error::from)
            };
            if let Err(e) = res {
                if groups[i].qpns.is_empty() {
                    groups.remove(i)?;
                }
                return Err(e);
            }
            created
        };
        if created {
            if let Err(e) = ndev.mc_add(&mac_of(gid)) {
                // Without the filter the group would never receive: undo.
                let mut groups = self.groups.lock();
                if let Some(i) = groups.iter().position(|g| g.gid == *gid) {
                    groups.remove(i)?;
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// QP `qpn` leaves group `gid`; `EINVAL` if it is not a member.
    pub(crate) fn detach(&self, ndev: &NetDevice, gid: &[u8; 16], qpn: u32) -> Result {
        let _changes = self.changes.lock();
        let emptied = {
            let mut groups = self.groups.lock();
            let i = groups.iter().position(|g| g.gid == *gid).ok_or(EINVAL)?;
            let g = &mut groups[i];
            let j = g.qpns.iter().position(|&q| q == qpn).ok_or(EINVAL)?;
            g.qpns.remove(j)?;
            if g.qpns.is_empty() {
                groups.remove(i)?;
                true
            } else {
                false
            }
        };
        if emptied {
            ndev.mc_del(&mac_of(gid));
        }
        Ok(())
    }

    /// Copies the members of group `gid` into `out`; returns how many there are.
    pub(crate) fn members(&self, gid: &[u8; 16], out: &mut [u32; MAX_MEMBERS]) -> usize {
        let groups = self.groups.lock();
        let Some(g) = groups.iter().find(|g| g.gid == *gid) else {
            return 0;
        };
        let n = g.qpns.len().min(MAX_MEMBERS);
        out[..n].copy_from_slice(&g.qpns[..n]);
        n
    }
}
