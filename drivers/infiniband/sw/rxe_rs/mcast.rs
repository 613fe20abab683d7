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
//!
//! ib_core attaches a QP once per (GID, LID) pair, while on RoCE the LID means nothing
//! and a group is its GID alone: a QP attached under several LIDs is one member of the
//! group, counted once per attach, and leaves it with its last detach. (Counting it
//! once would refuse the second detach; ib_core would then keep the attachment, and the
//! QP could never be destroyed.)
//!
//! The receive path finds a group by its GID in a tree, under a spinlock, for each
//! datagram; nothing is allocated under that lock: a group's node is allocated before
//! it, and a group has room for all its members.

use crate::ib::{
    netdev::NetDevice,
    sync::{new_spinlock_irq, SpinLockIrq},
};
use crate::param;
use kernel::{
    new_mutex,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::Mutex,
};

/// The destination QP number of multicast datagrams.
pub(crate) const MULTICAST_QPN: u32 = crate::ib::verbs::MULTICAST_QPN;

/// The most members a group has, and so the most QPs one datagram goes to.
pub(crate) const MAX_MEMBERS: usize = param::MAX_MCAST_QP_ATTACH as usize;

/// A QP in a group, and how many of its attachments (one per LID) name the group.
#[derive(Clone, Copy, Default)]
struct Member {
    qpn: u32,
    attached: u32,
}

/// A group's members, in the order they joined.
struct Group {
    members: [Member; MAX_MEMBERS],
    len: usize,
}

impl Group {
    fn with(qpn: u32) -> Self {
        let mut members = [Member::default(); MAX_MEMBERS];
        members[0] = Member { qpn, attached: 1 };
        Self { members, len: 1 }
    }

    fn members(&self) -> &[Member] {
        &self.members[..self.len]
    }

    fn find(&self, qpn: u32) -> Option<usize> {
        self.members().iter().position(|m| m.qpn == qpn)
    }
}

/// The groups, and the memberships of all of them together.
struct Groups {
    tree: RBTree<[u8; 16], Group>,
    count: usize,
    memberships: usize,
}

/// What an attach finds.
enum Join {
    /// The QP is a member already, or has become one of an existing group.
    Done,
    /// The group does not exist: it is made with the QP as its first member.
    NewGroup,
}

/// The device's multicast groups.
#[pin_data]
pub(crate) struct McastTable {
    /// Taken by attach and detach, which program the netdev's filter in the order they
    /// change the groups; only they change `groups`.
    #[pin]
    changes: Mutex<()>,
    /// The groups, read by the receive path.
    #[pin]
    groups: SpinLockIrq<Groups>,
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
            groups <- new_spinlock_irq!(Groups {
                tree: RBTree::new(),
                count: 0,
                memberships: 0,
            }),
        })
    }

    /// QP `qpn` joins group `gid`, or counts one more attachment to it; the netdev
    /// receives the group's frames from its first member on.
    pub(crate) fn attach(&self, ndev: &NetDevice, gid: &[u8; 16], qpn: u32) -> Result {
        let _changes = self.changes.lock();
        match self.join(gid, qpn)? {
            Join::Done => Ok(()),
            Join::NewGroup => {
                // Charged to the process, allocated before the lock the receive path takes.
                let node = RBTreeNodeReservation::new(GFP_KERNEL_ACCOUNT)?;
                // Without the filter the group would never receive: nothing is made.
                ndev.mc_add(&mac_of(gid))?;
                let mut groups = self.groups.lock();
                // `join` checked the limits, and `changes` kept the groups as they were.
                groups.tree.insert(node.into_node(*gid, Group::with(qpn)));
                groups.count += 1;
                groups.memberships += 1;
                Ok(())
            }
        }
    }

    /// Adds the attachment to an existing group, or says that a group must be made.
    fn join(&self, gid: &[u8; 16], qpn: u32) -> Result<Join> {
        let mut guard = self.groups.lock();
        let groups = &mut *guard;
        let all_full = groups.memberships >= param::MAX_TOTAL_MCAST_QP_ATTACH as usize;
        let Some(group) = groups.tree.get_mut(gid) else {
            if all_full || groups.count >= param::MAX_MCAST_GRP as usize {
                return Err(ENOMEM);
            }
            return Ok(Join::NewGroup);
        };
        if let Some(i) = group.find(qpn) {
            // At most one attachment per LID, 2^16 of them: the count cannot reach the
            // limit, and a wrong caller gets an error, not a wrapped count.
            let m = &mut group.members[i];
            m.attached = m.attached.checked_add(1).ok_or(ENOMEM)?;
            return Ok(Join::Done);
        }
        if group.len >= MAX_MEMBERS || all_full {
            return Err(ENOMEM);
        }
        group.members[group.len] = Member { qpn, attached: 1 };
        group.len += 1;
        groups.memberships += 1;
        Ok(Join::Done)
    }

    /// QP `qpn` takes back one attachment to group `gid`, and leaves the group with its
    /// last; `EINVAL` if it is not a member.
    pub(crate) fn detach(&self, ndev: &NetDevice, gid: &[u8; 16], qpn: u32) -> Result {
        let _changes = self.changes.lock();
        let emptied = {
            let mut guard = self.groups.lock();
            let groups = &mut *guard;
            let group = groups.tree.get_mut(gid).ok_or(EINVAL)?;
            let i = group.find(qpn).ok_or(EINVAL)?;
            let m = &mut group.members[i];
            // A member has at least one attachment: this is its last or not.
            if m.attached > 1 {
                m.attached -= 1;
                return Ok(());
            }
            group.members.copy_within(i + 1..group.len, i);
            group.len -= 1;
            groups.memberships -= 1;
            if group.len > 0 {
                None
            } else {
                groups.count -= 1;
                groups.tree.remove_node(gid)
            }
        };
        // The group's node is freed here, out of the lock.
        if emptied.is_some() {
            ndev.mc_del(&mac_of(gid));
        }
        Ok(())
    }

    /// Copies the members of group `gid` into `out`; returns how many there are.
    pub(crate) fn members(&self, gid: &[u8; 16], out: &mut [u32; MAX_MEMBERS]) -> usize {
        let groups = self.groups.lock();
        let Some(group) = groups.tree.get(gid) else {
            return 0;
        };
        for (o, m) in out.iter_mut().zip(group.members()) {
            *o = m.qpn;
        }
        group.len
    }
}
