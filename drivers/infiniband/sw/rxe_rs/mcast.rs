// SPDX-License-Identifier: GPL-2.0

//! Multicast groups: which UD QPs receive what is sent to a multicast GID.
//!
//! ib_core checks that the QP is UD and the GID a multicast one, keeps each process's
//! attachments, refuses to destroy an attached QP (`EBUSY`) and detaches a process's QPs
//! when it closes the device. The device keeps the groups, within its limits (groups,
//! QPs per group, attachments in all). Delivery to the members comes with the data path.

use crate::param;
use kernel::{new_mutex, prelude::*, sync::Mutex};

struct Group {
    gid: [u8; 16],
    qpns: KVec<u32>,
}

/// The device's multicast groups.
#[pin_data]
pub(crate) struct McastTable {
    #[pin]
    groups: Mutex<KVec<Group>>,
}

impl McastTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            groups <- new_mutex!(KVec::new()),
        })
    }

    /// QP `qpn` joins group `gid` (again: nothing changes).
    pub(crate) fn attach(&self, gid: &[u8; 16], qpn: u32) -> Result {
        let mut groups = self.groups.lock();
        let total: usize = groups.iter().map(|g| g.qpns.len()).sum();
        let i = match groups.iter().position(|g| g.gid == *gid) {
            Some(i) => i,
            None => {
                if groups.len() >= param::MAX_MCAST_GRP as usize {
                    return Err(ENOMEM);
                }
                groups.push(
                    Group {
                        gid: *gid,
                        qpns: KVec::new(),
                    },
                    GFP_KERNEL,
                )?;
                groups.len() - 1
            }
        };
        let g = &mut groups[i];
        if g.qpns.contains(&qpn) {
            return Ok(());
        }
        let full = g.qpns.len() >= param::MAX_MCAST_QP_ATTACH as usize
            || total >= param::MAX_TOTAL_MCAST_QP_ATTACH as usize;
        let res = if full {
            Err(ENOMEM)
        } else {
            g.qpns.push(qpn, GFP_KERNEL).map_err(Error::from)
        };
        if groups[i].qpns.is_empty() {
            groups.remove(i)?;
        }
        res
    }

    /// QP `qpn` leaves group `gid`; `EINVAL` if it is not a member.
    pub(crate) fn detach(&self, gid: &[u8; 16], qpn: u32) -> Result {
        let mut groups = self.groups.lock();
        let i = groups.iter().position(|g| g.gid == *gid).ok_or(EINVAL)?;
        let g = &mut groups[i];
        let j = g.qpns.iter().position(|&q| q == qpn).ok_or(EINVAL)?;
        g.qpns.remove(j)?;
        if g.qpns.is_empty() {
            groups.remove(i)?;
        }
        Ok(())
    }
}
