// SPDX-License-Identifier: GPL-2.0

//! Memory regions and memory windows: registration, keys, deregistration.
//!
//! A user MR pins the process's pages for as long as it exists; a DMA MR (a kernel PD's
//! `local_dma_lkey`) covers all of kernel memory; a fast-registration MR holds the page
//! list a kernel consumer maps into it (`ib_map_mr_sg()`). Keys are `index << 8 | key`: MR indices
//! run from 1 to 2^19, MW indices above, so one key names one object; the low byte is
//! random for every registration, so that a stale key of a freed object is rarely taken
//! for the next one with the same index and no key can be guessed from another.
//!
//! The data path finds memory by key ([`local`], [`remote`]): the entry holds what a
//! packet or a work request needs (key, the memory) and, under its lock, what the key
//! opens now and to which PD (valid or not, access rights, address range, for a window
//! the MR it is bound to). A lookup hands out a [`Region`] holding a reference to the
//! MR, so memory stays pinned while a copy to or from it runs even if the MR is
//! deregistered meanwhile.
//!
//! Fast-registration MRs open nothing until a REG_MR work request registers the pages
//! mapped into them, and again nothing after LOCAL_INV (or a SEND with invalidate).
//! Memory windows open part of an MR once bound by a BIND_MW work request: a type 1
//! window (bound through `ibv_bind_mw()`, which librxe turns into such a request) to
//! any QP of its PD, a type 2 one only to the QP it was bound through, until it is
//! invalidated. An MR with windows bound to it cannot be invalidated or deregistered.

use crate::fault::{FaultSlot, FaultSlots, FaultWaiter};
use crate::ib::object::{Charge, Quota};
use crate::ib::{
    device::{eopnotsupp, Device},
    device::{Advice, Sge},
    mr::{KernelMemory, Mr, MrCreated, MrOps, PageList, Umem},
    mw::MwOps,
    pd::PdId,
    sync::SpinLockIrq,
    ucontext::UserCall,
    verbs::{Access, AccessFlags, WcStatus},
    wr::RegWr,
};
use crate::param;
use crate::sw::odp::{OdpError, OdpUmem};
use crate::table::{IdTable, Number, Numbered};
use crate::RxeRs;
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// MR indices are 1..=2^19; MW indices 2^19+1..=2^20.
const FIRST_MR_INDEX: u32 = 1;
const MR_INDEX_LIMIT: u32 = (1 << 19) + 1;
const MW_INDEX_LIMIT: u32 = (1 << 20) + 1;

/// Access flags a user MR may ask for.
const MR_ACCESS: AccessFlags = AccessFlags::of(&[
    Access::LocalWrite,
    Access::RemoteWrite,
    Access::RemoteRead,
    Access::RemoteAtomic,
    Access::MwBind,
    Access::FlushGlobal,
    Access::FlushPersistent,
    Access::OnDemand,
    Access::Optional,
]);

/// Access flags a bind may name (what counts for a window is its remote rights, and
/// whether it is zero-based: a type 2 window may be, as by rxe).
const MW_ACCESS: AccessFlags = AccessFlags::of(&[
    Access::LocalWrite,
    Access::RemoteWrite,
    Access::RemoteRead,
    Access::RemoteAtomic,
    Access::MwBind,
    Access::FlushGlobal,
    Access::FlushPersistent,
    Access::ZeroBased,
    Access::Optional,
]);

/// The memory behind a key.
enum Memory {
    /// A process's pinned pages.
    User(Umem),
    /// A process's pages, mapped on demand (a fault in progress holds them too), and
    /// the slots for faults of the user that registered them.
    Odp(Arc<OdpUmem>, Arc<FaultSlots>),
    /// A kernel consumer's DMA MR: its mapped memory, by kernel virtual address.
    Dma(KernelMemory),
    /// A fast-registration MR: the pages its consumer mapped, once a REG_MR work
    /// request registered them.
    Fast(Arc<PageList>),
    /// A memory window (of type 2 if `type2`): the memory of the MR it is bound to.
    Window { type2: bool },
}

/// What a key opens now, and to which PD. User and DMA MRs keep what they were
/// registered with (but for a user MR's PD and rights, which `ibv_rereg_mr()` may
/// change); a fast-registration MR changes with REG_MR and invalidation, a window with
/// binding and invalidation.
#[derive(Clone, Default)]
struct Binding {
    /// The PD of the QPs the key serves.
    pd: PdId,
    /// Whether the key may be used at all (an MR registered, a window bound or of
    /// type 1).
    valid: bool,
    access: AccessFlags,
    /// The first address the key opens, and how many bytes.
    iova: u64,
    length: u64,
    /// A registered fast-registration MR: the mapping of its page list it registered.
    mapping: u32,
    /// A bound window: the MR whose memory it opens.
    mr: Option<Arc<KeyEntry>>,
    /// A bound window of type 2: the QP it was bound through, the only one that may use
    /// it.
    qpn: u32,
    /// An MR: how many windows are bound to it.
    windows: u32,
    /// An MR being deregistered: nothing may bind to it any more.
    dying: bool,
}

/// What a key stands for, found by its index.
#[pin_data]
pub(crate) struct KeyEntry {
    index: Number,
    /// The whole key, set once the index is known and changed (its low byte) by REG_MR
    /// and binding, under `state`'s lock.
    key: Atomic<u32>,
    memory: Memory,
    /// Order: a window's lock before its MR's.
    #[pin]
    state: SpinLockIrq<Binding>,
}

/// Why an access through a key was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccessError {
    /// No such key, another PD's or QP's, one not valid now, or rights it does not
    /// grant.
    Key,
    /// Outside the range the key covers.
    Range,
    /// Pages of an on-demand MR that are not mapped now: nothing was copied; the
    /// access can be made again once [`Region::fault`]'s request is resolved.
    Fault,
}

/// The address `off` bytes past `addr`: `Range` if it would be at or past 2^64.
///
/// Addresses come from rings and packets, and so do the offsets added to them, so their
/// sum may pass the top of the address space (an MR may end exactly at 2^64). Every
/// address the data path computes is computed here, never with `+`: an access that
/// would wrap fails as one outside its key's range (a local or remote access error),
/// where a wrapping sum would panic (`CONFIG_RUST_OVERFLOW_CHECKS`) or reach memory
/// the key does not open.
pub(crate) fn iova_add(addr: u64, off: u64) -> Result<u64, AccessError> {
    addr.checked_add(off).ok_or(AccessError::Range)
}

/// Pages of an on-demand MR that an access found missing: `len` bytes from byte `at` of
/// the MR whose key is `key`, for writing if `write`. It names the MR by key and holds
/// no reference, so it may be dropped anywhere; [`resolve`] finds the MR again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fault {
    key: u32,
    at: usize,
    len: usize,
    write: bool,
}

/// Copies local memory at `addr` through `lkey` into `out`, for a QP of `pd`. Fails with
/// `LOC_PROT_ERR`, the status of a bad key or range; if the failure was pages of an
/// on-demand MR that are missing, the pages to map are in `fault` (the caller has them
/// faulted in and tries again, or, if that cannot be done, fails with the status).
pub(crate) fn read_local(
    dev: &Device<RxeRs>,
    (lkey, pd, addr): (u32, PdId, u64),
    out: &mut [u8],
    fault: &mut Option<Fault>,
) -> Result<(), WcStatus> {
    let m = local(dev, lkey, pd, need::LOCAL_READ).map_err(|_| WcStatus::LocProtErr)?;
    let len = out.len();
    m.read(addr, out)
        .map_err(|e| m.local_error(e, (addr, len, false), fault))
}

/// Copies `data` to local memory at `addr` through `lkey`, for a QP of `pd`; fails as
/// [`read_local`].
pub(crate) fn write_local(
    dev: &Device<RxeRs>,
    (lkey, pd, addr): (u32, PdId, u64),
    data: &[u8],
    fault: &mut Option<Fault>,
) -> Result<(), WcStatus> {
    let m = local(dev, lkey, pd, need::LOCAL_WRITE).map_err(|_| WcStatus::LocProtErr)?;
    m.write(addr, data)
        .map_err(|e| m.local_error(e, (addr, data.len(), true), fault))
}

/// How a request to map the pages of a [`Fault`] went.
pub(crate) enum Resolving {
    /// Nothing is to be mapped: the key's memory is pinned now.
    Mapped,
    /// The fault runs in a work item of its own, which calls back when it ends.
    Started,
    /// The MR's user has [`crate::fault::FAULTS_PER_USER`] faults in progress: the
    /// waiter is in line, and runs again when a slot is handed to it.
    Waiting,
}

/// Has the pages `f` names faulted in, in a work item of their own that nothing waits
/// for (the fault may sleep for good, see [`OdpUmem::fault_async`]); `done` is called
/// there with the outcome. The fault holds a slot of the MR's user: `granted` if it is
/// one of theirs, else one taken now, else `waiter` waits in line for one. Process
/// context only, no lock held. Fails at once, and `done` is not called, if the MR is
/// gone or being deregistered or the fault cannot be started.
pub(crate) fn resolve(
    dev: &Device<RxeRs>,
    f: &Fault,
    (waiter, granted): (&Arc<dyn FaultWaiter>, &mut Option<FaultSlot>),
    done: impl FnOnce(Result) + Send + 'static,
) -> Result<Resolving> {
    // The reference taken here may be the MR's last, if it is deregistered meanwhile:
    // then it is released here, in process context.
    let e = dev.mr_table.hold(f.key >> 8).ok_or(EFAULT)?;
    if e.key.load(Relaxed) != f.key {
        return Err(EFAULT);
    }
    match &e.memory {
        Memory::Odp(o, slots) => {
            // A slot handed over of another user's (an MR of another UID in the QP's
            // PD) stays for a later fault of that user's, or goes at the end of the run.
            let slot = match granted.take_if(|s| s.of(slots)) {
                Some(s) => s,
                None => match FaultSlots::take(slots, waiter)? {
                    Some(s) => s,
                    None => return Ok(Resolving::Waiting),
                },
            };
            // The slot goes (to the next in line) as soon as the fault ended.
            OdpUmem::fault_async(o, (f.at, f.len, f.write), move |r| {
                drop(slot);
                done(r);
            })?;
            Ok(Resolving::Started)
        }
        _ => Ok(Resolving::Mapped),
    }
}

/// Access rights an operation needs.
pub(crate) mod need {
    use crate::ib::verbs::{Access, AccessFlags};

    /// Reading local memory: every MR allows it.
    pub(crate) const LOCAL_READ: AccessFlags = AccessFlags::empty();
    pub(crate) const LOCAL_WRITE: AccessFlags = AccessFlags::of(&[Access::LocalWrite]);
    pub(crate) const REMOTE_WRITE: AccessFlags = AccessFlags::of(&[Access::RemoteWrite]);
    pub(crate) const REMOTE_READ: AccessFlags = AccessFlags::of(&[Access::RemoteRead]);
    pub(crate) const REMOTE_ATOMIC: AccessFlags = AccessFlags::of(&[Access::RemoteAtomic]);
}

/// Memory a key opens, as it was when the key was looked up: the MR that holds the
/// memory, and the addresses the key opens of it.
pub(crate) struct Region {
    mr: Arc<KeyEntry>,
    /// The MR's own first address (the start of its memory).
    base: u64,
    /// What the key opens, in the MR's addresses: all of the MR, or a window's part of
    /// it.
    start: u64,
    length: u64,
    /// The address the key's users give the first byte at `start`: `start` itself, or 0
    /// through a zero-based window.
    origin: u64,
    /// A fast-registration MR's: the mapping of its page list it was registered with.
    mapping: u32,
}

/// Whether each of `length` bytes from `iova` on has an address: a range may end
/// exactly at 2^64, not past it.
fn addressable(iova: u64, length: u64) -> bool {
    length
        .checked_sub(1)
        .is_none_or(|last| iova.checked_add(last).is_some())
}

/// Whether `len` bytes at `addr` lie inside the `length` bytes at `start`. Computed from
/// offsets, never from end addresses: a range may end exactly at 2^64.
fn within(start: u64, length: u64, addr: u64, len: u64) -> bool {
    addr.checked_sub(start)
        .is_some_and(|off| off <= length && len <= length - off)
}

impl Region {
    /// Checks that `len` bytes at `iova` are inside the region; returns the offset of
    /// `iova` in the MR's memory.
    fn offset(&self, iova: u64, len: usize) -> Result<usize, AccessError> {
        if !within(self.origin, self.length, iova, len as u64) {
            return Err(AccessError::Range);
        }
        // A window lies inside its MR: `start` is at or after `base`.
        let off = iova
            .checked_sub(self.origin)
            .and_then(|rel| rel.checked_add(self.start.checked_sub(self.base)?))
            .ok_or(AccessError::Range)?;
        usize::try_from(off).map_err(|_| AccessError::Range)
    }

    /// Whether `len` bytes at `iova` are inside the region.
    pub(crate) fn covers(&self, iova: u64, len: usize) -> bool {
        self.offset(iova, len).is_ok()
    }

    /// The request to map what an access of `len` bytes at `iova` (a write if
    /// `write`) found missing.
    pub(crate) fn fault(&self, iova: u64, len: usize, write: bool) -> Fault {
        Fault {
            key: self.mr.key.load(Relaxed),
            at: self.offset(iova, len).unwrap_or(0),
            len,
            write,
        }
    }

    /// The completion status of a local access of `len` bytes at `iova` (a write if
    /// `write`) that failed with `e`, recording in `fault` what to map if that was a
    /// fault.
    fn local_error(
        &self,
        e: AccessError,
        (iova, len, write): (u64, usize, bool),
        fault: &mut Option<Fault>,
    ) -> WcStatus {
        if e == AccessError::Fault {
            *fault = Some(self.fault(iova, len, write));
        }
        WcStatus::LocProtErr
    }

    /// Copies `data` into the memory at `iova`.
    pub(crate) fn write(&self, iova: u64, data: &[u8]) -> Result<(), AccessError> {
        let off = self.offset(iova, data.len())?;
        match &self.mr.memory {
            Memory::Odp(o, _) => return o.write(off, data).map_err(odp_error),
            Memory::User(u) => u.write(off, data),
            Memory::Dma(k) => k.write(iova, data),
            Memory::Fast(p) => p.write(self.mapping, off, data),
            Memory::Window { .. } => return Err(AccessError::Key),
        }
        .map_err(|_| AccessError::Range)
    }

    /// Copies the memory at `iova` into `out`.
    pub(crate) fn read(&self, iova: u64, out: &mut [u8]) -> Result<(), AccessError> {
        let off = self.offset(iova, out.len())?;
        match &self.mr.memory {
            Memory::Odp(o, _) => return o.read(off, out).map_err(odp_error),
            Memory::User(u) => u.read(off, out),
            Memory::Dma(k) => k.read(iova, out),
            Memory::Fast(p) => p.read(self.mapping, off, out),
            Memory::Window { .. } => return Err(AccessError::Key),
        }
        .map_err(|_| AccessError::Range)
    }
}

fn odp_error(e: OdpError) -> AccessError {
    match e {
        OdpError::Range => AccessError::Range,
        OdpError::Absent => AccessError::Fault,
    }
}

impl KeyEntry {
    /// The region an MR's key opens to a QP of `pd` needing `need`.
    fn mr_region(
        self: Arc<Self>,
        key: u32,
        pd: PdId,
        need: AccessFlags,
    ) -> Result<Region, AccessError> {
        let (base, length, mapping) = {
            let b = self.state.lock();
            if self.key.load(Relaxed) != key
                || b.pd != pd
                || !b.valid
                || b.dying
                || !b.access.contains_all(need)
            {
                return Err(AccessError::Key);
            }
            (b.iova, b.length, b.mapping)
        };
        Ok(Region {
            mr: self,
            base,
            start: base,
            length,
            origin: base,
            mapping,
        })
    }
}

/// Finds the memory the local key `lkey` opens to a QP of PD `pd`, for an access that
/// needs the rights `need`.
///
/// Only in an RCU read-side section, and the region must go before the section ends:
/// deregistration waits until the sections that found the MR have ended and then
/// releases the pinned pages, which must happen in process context, so no one else may
/// hold the MR by then.
pub(crate) fn local(
    dev: &Device<RxeRs>,
    lkey: u32,
    pd: PdId,
    need: AccessFlags,
) -> Result<Region, AccessError> {
    let e = dev.mr_table.get(lkey >> 8).ok_or(AccessError::Key)?;
    e.mr_region(lkey, pd, need)
}

/// Finds the memory the remote key `rkey` (an MR's or a window's) opens to the QP
/// `qpn` of PD `pd`, for an access that needs the rights `need`. As [`local`].
pub(crate) fn remote(
    dev: &Device<RxeRs>,
    rkey: u32,
    pd: PdId,
    qpn: u32,
    need: AccessFlags,
) -> Result<Region, AccessError> {
    if rkey >> 8 < MR_INDEX_LIMIT {
        return local(dev, rkey, pd, need);
    }
    let w = dev.mw_table.get(rkey >> 8).ok_or(AccessError::Key)?;
    let (mr, start, length, origin) = {
        let b = w.state.lock();
        let type2 = matches!(w.memory, Memory::Window { type2: true });
        if w.key.load(Relaxed) != rkey
            || b.pd != pd
            || !b.valid
            || (type2 && b.qpn != qpn)
            || !b.access.contains_all(need)
        {
            return Err(AccessError::Key);
        }
        let mr = b.mr.clone().ok_or(AccessError::Key)?;
        // Found through the window, not its table: marked here, while the window is
        // bound (which keeps the MR from being deregistered).
        dev.mr_table.mark(&mr);
        let origin = if b.access.contains(Access::ZeroBased) {
            0
        } else {
            b.iova
        };
        (mr, b.iova, b.length, origin)
    };
    // A bound MR cannot be invalidated, deregistered or moved to another PD: its
    // range is as it was bound (its PD is checked all the same).
    let (base, mapping) = {
        let b = mr.state.lock();
        if b.pd != pd {
            return Err(AccessError::Key);
        }
        (b.iova, b.mapping)
    };
    Ok(Region {
        mr,
        base,
        start,
        length,
        origin,
        mapping,
    })
}

/// Why a memory operation of a work request (REG_MR, LOCAL_INV, BIND_MW, or a remote
/// invalidation) was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpError;

/// REG_MR: the fast-registration MR `r.lkey` names (by its index: consumers update
/// the key byte in their `struct ib_mr` before they post) registers the pages its
/// consumer mapped, addressed from `r.iova` (the MR's address when the request was
/// posted, not necessarily the one `ib_map_mr_sg()` gave it), with the key `r.key` (of
/// the same index) and the access rights `r.access` (as the work request has them),
/// for a QP of PD `pd`. The MR must be free (not registered) and of that PD.
pub(crate) fn register(dev: &Device<RxeRs>, r: &RegWr, pd: PdId) -> Result<(), OpError> {
    let RegWr {
        lkey: mr_key,
        key,
        access: raw_access,
        iova,
    } = *r;
    if key >> 8 != mr_key >> 8 {
        return Err(OpError);
    }
    let e = dev.mr_table.get(key >> 8).ok_or(OpError)?;
    let Memory::Fast(pages) = &e.memory else {
        return Err(OpError);
    };
    let access = AccessFlags::from_raw(raw_access)
        .filter(|a| a.within(MR_ACCESS) && !a.contains(Access::OnDemand))
        .ok_or(OpError)?;
    let (mapping, length) = pages.mapping();
    if !addressable(iova, length) {
        return Err(OpError);
    }
    let mut b = e.state.lock();
    if b.pd != pd || b.valid || b.dying {
        return Err(OpError);
    }
    e.key.store(key, Relaxed);
    b.valid = true;
    b.access = access;
    b.iova = iova;
    b.length = length;
    b.mapping = mapping;
    Ok(())
}

/// LOCAL_INV, or a SEND with invalidate that arrived: `key` (a fast-registration MR's
/// or a type 2 window's) stops opening anything. The QP that asks is `qpn`, of PD `pd`:
/// a window only the QP it is bound to may invalidate.
pub(crate) fn invalidate(dev: &Device<RxeRs>, key: u32, pd: PdId, qpn: u32) -> Result<(), OpError> {
    if key >> 8 >= MR_INDEX_LIMIT {
        let w = dev.mw_table.get(key >> 8).ok_or(OpError)?;
        let mr = {
            let mut b = w.state.lock();
            if w.key.load(Relaxed) != key
                || b.pd != pd
                || !b.valid
                || b.qpn != qpn
                || !matches!(w.memory, Memory::Window { type2: true })
            {
                return Err(OpError);
            }
            let mr = b.mr.take();
            *b = Binding {
                pd,
                ..Default::default()
            };
            if let Some(mr) = &mr {
                // From here on the MR may be deregistered, while this reference is
                // still held: its deregistration waits for this section.
                dev.mr_table.mark(mr);
                mr.state.lock().windows -= 1;
            }
            mr
        };
        // Within the section the deregistration waits for: not the last reference.
        drop(mr);
        return Ok(());
    }
    let e = dev.mr_table.get(key >> 8).ok_or(OpError)?;
    let mut b = e.state.lock();
    if e.key.load(Relaxed) != key
        || b.pd != pd
        || !matches!(e.memory, Memory::Fast(_))
        || b.windows != 0
    {
        return Err(OpError);
    }
    b.valid = false;
    Ok(())
}

/// A BIND_MW work request, as read from the send queue.
pub(crate) struct Bind {
    pub(crate) addr: u64,
    pub(crate) length: u64,
    pub(crate) mr_lkey: u32,
    pub(crate) mw_rkey: u32,
    /// The window's new rkey (its low byte counts).
    pub(crate) rkey: u32,
    pub(crate) access: u32,
}

/// BIND_MW through the QP `qpn` of PD `pd`: the window `b.mw_rkey` opens `b.length`
/// bytes at `b.addr` of the MR `b.mr_lkey` with `b.access` (a type 1 window bound with
/// length 0 opens nothing). Returns the window's new rkey.
pub(crate) fn bind(dev: &Device<RxeRs>, b: &Bind, pd: PdId, qpn: u32) -> Result<u32, OpError> {
    let w = dev.mw_table.get(b.mw_rkey >> 8).ok_or(OpError)?;
    let Memory::Window { type2 } = w.memory else {
        return Err(OpError);
    };
    let mr = if b.length != 0 {
        let mr = dev.mr_table.get(b.mr_lkey >> 8).ok_or(OpError)?;
        if mr.key.load(Relaxed) != b.mr_lkey {
            return Err(OpError);
        }
        Some(mr)
    } else {
        None
    };
    // Only a type 2 window may be zero-based (o10-36.2.2), and only over a process's
    // memory (the DMA and fast-registration MRs of kernel consumers are read and
    // written at their own addresses, see `Region::write`).
    let over_user = mr
        .as_ref()
        .is_some_and(|m| matches!(m.memory, Memory::User(_) | Memory::Odp(..)));
    let access = AccessFlags::from_raw(b.access)
        .filter(|a| a.within(MW_ACCESS) && (!a.contains(Access::ZeroBased) || (type2 && over_user)))
        .ok_or(OpError)?;
    let mut st = w.state.lock();
    // Window, MR and the QP binding are of one PD, whatever the window's type: the
    // keys are the process's to write, and name any object of the device.
    if w.key.load(Relaxed) != b.mw_rkey || st.pd != pd {
        return Err(OpError);
    }
    if type2 && (st.valid || mr.is_none()) {
        // A type 2 window binds when free, to an MR.
        return Err(OpError);
    }
    if let Some(mr) = &mr {
        let mut m = mr.state.lock();
        let writes = access.contains_any(Access::RemoteWrite | Access::RemoteAtomic);
        if m.pd != pd
            || !m.valid
            || m.dying
            || !m.access.contains(Access::MwBind)
            || (writes && !m.access.contains(Access::LocalWrite))
            || !within(m.iova, m.length, b.addr, b.length)
        {
            return Err(OpError);
        }
        m.windows += 1;
    }
    let old = st.mr.take();
    if let Some(old) = &old {
        // As in `invalidate`: its deregistration may start now, and waits for this.
        dev.mr_table.mark(old);
        old.state.lock().windows -= 1;
    }
    let rkey = (b.mw_rkey & !0xff) | (b.rkey & 0xff);
    w.key.store(rkey, Relaxed);
    *st = Binding {
        pd,
        valid: true,
        access,
        iova: b.addr,
        length: b.length,
        mr,
        qpn: if type2 { qpn } else { 0 },
        ..Default::default()
    };
    drop(st);
    // Within the section the MR's deregistration waits for: not the last reference.
    drop(old);
    Ok(rkey)
}

impl Numbered for KeyEntry {
    fn number(&self) -> &Number {
        &self.index
    }
}

/// The device's table of MR or MW indices.
pub(crate) type KeyTable = IdTable<KeyEntry>;

/// The device's tables of MR and MW indices.
pub(crate) fn mr_table() -> impl PinInit<KeyTable, Error> {
    IdTable::new(FIRST_MR_INDEX, MR_INDEX_LIMIT)
}

pub(crate) fn mw_table() -> impl PinInit<KeyTable, Error> {
    IdTable::new(MR_INDEX_LIMIT, MW_INDEX_LIMIT)
}

/// A new key for `index`: its low byte is random, so that a process or a peer cannot
/// guess the keys of another's MRs and windows from its own (which a counter would let
/// it do).
fn new_key(index: u32) -> u32 {
    (index << 8) | (crate::sw::random::random_u32() & 0xff)
}

/// An index held in a key table, given back when dropped.
struct Held {
    entry: Arc<KeyEntry>,
    table: Arc<KeyTable>,
}

impl Held {
    /// Publishes an entry for `memory` under a free index and gives it its key.
    fn take(
        table: &Arc<KeyTable>,
        pd: PdId,
        binding: Binding,
        memory: Memory,
    ) -> Result<(Self, u32)> {
        let binding = Binding { pd, ..binding };
        // A window's lock is taken before its MR's: two lock classes, so that lockdep
        // tells the nesting from a recursion.
        let (name, class) = if matches!(memory, Memory::Window { .. }) {
            (c"KeyEntry::state (MW)", kernel::static_lock_class!())
        } else {
            (c"KeyEntry::state (MR)", kernel::static_lock_class!())
        };
        let entry = Arc::pin_init(
            pin_init!(KeyEntry {
                index: Number::new(),
                key: Atomic::new(0),
                memory,
                state <- SpinLockIrq::new(binding, name, class),
            }),
            GFP_KERNEL,
        )?;
        let index = table.insert(&entry, GFP_KERNEL)?;
        // Until this store no key matches the entry (0 is never a key: indices start at 1).
        let key = new_key(index);
        entry.key.store(key, Relaxed);
        Ok((
            Self {
                entry,
                table: table.clone(),
            },
            key,
        ))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.table.remove(self.entry.index.get());
        // The data path looks keys up only in RCU read-side sections: once none that
        // found this entry is still running, nobody else holds it, so the pages are
        // unpinned here, in process context, when `entry` goes. An entry no packet
        // used since a grace period ended goes at once.
        crate::ib::sync::synchronize_rcu_since(self.entry.index.last_use());
        // A window lets go of the MR it is bound to.
        let mr = self.entry.state.lock().mr.take();
        if let Some(mr) = mr {
            mr.state.lock().windows -= 1;
        }
    }
}

/// The driver's part of a memory region.
pub(crate) struct RxeMr {
    held: Held,
    _charge: Charge,
}

impl RxeMr {
    pub(crate) fn reg_user(
        dev: &Device<RxeRs>,
        pd: PdId,
        (start, len, iova): (u64, u64, u64),
        access: AccessFlags,
        _user: &UserCall<'_, RxeRs>,
    ) -> Result<MrCreated<Self>> {
        user_access(access)?;
        // ib_core does not check `iova + len`.
        if !addressable(iova, len) {
            return Err(EINVAL);
        }
        if access.contains(Access::OnDemand) {
            // An implicit MR (all of the address space) is not offered.
            if start == 0 && len == u64::MAX {
                return Err(eopnotsupp());
            }
            let charge = Quota::charge(&dev.mrs)?;
            let slots = dev.fault_users.current()?;
            let odp = Arc::new(OdpUmem::get(dev, start, len, access)?, GFP_KERNEL_ACCOUNT)?;
            let length = odp.len() as u64;
            return Self::finish(
                dev,
                pd,
                fixed(access, iova, length),
                Memory::Odp(odp, slots),
                charge,
            );
        }
        let charge = Quota::charge(&dev.mrs)?;
        let umem = Umem::get(dev, start, len, access)?;
        let length = umem.len() as u64;
        Self::finish(
            dev,
            pd,
            fixed(access, iova, length),
            Memory::User(umem),
            charge,
        )
    }

    pub(crate) fn dma(
        dev: &Device<RxeRs>,
        pd: PdId,
        access: AccessFlags,
        mem: KernelMemory,
    ) -> Result<MrCreated<Self>> {
        let charge = Quota::charge(&dev.mrs)?;
        Self::finish(
            dev,
            pd,
            fixed(access, 0, u64::MAX),
            Memory::Dma(mem),
            charge,
        )
    }

    /// A fast-registration MR for up to `max_pages` pages (at most what the device
    /// advertises).
    pub(crate) fn fast(dev: &Device<RxeRs>, pd: PdId, max_pages: u32) -> Result<MrCreated<Self>> {
        if max_pages > param::MAX_FAST_REG_PAGE_LIST_LEN {
            return Err(EINVAL);
        }
        let charge = Quota::charge(&dev.mrs)?;
        let pages = PageList::new(max_pages)?;
        // No access until a REG_MR work request registers it.
        Self::finish(dev, pd, Binding::default(), Memory::Fast(pages), charge)
    }

    /// The page list of a fast-registration MR.
    pub(crate) fn page_list(&self) -> Option<&PageList> {
        match &self.held.entry.memory {
            Memory::Fast(p) => Some(p),
            _ => None,
        }
    }

    /// `ibv_rereg_mr()` of the PD and the access rights, in place (as rxe; new memory
    /// is refused with `EOPNOTSUPP`): the keys stay. Refused while windows are bound to
    /// the MR (`EBUSY`): they were bound within its PD, to the rights it had. Returns
    /// once no access checked against the old PD and rights is running any more (a
    /// copy of one packet or SGE), as deregistration does.
    pub(crate) fn rereg(&self, pd: Option<PdId>, access: Option<AccessFlags>) -> Result {
        let e = &self.held.entry;
        // Only a process's MRs have a user object to reregister through.
        let (odp, writable) = match &e.memory {
            Memory::User(u) => (false, u.writable()),
            Memory::Odp(o, _) => (true, o.writable()),
            _ => return Err(EINVAL),
        };
        if let Some(access) = access {
            user_access(access)?;
            // The memory stays: pinned or on demand as it was registered, and written
            // only if its pages were taken for writing (as `ib_umem_check_rereg()`).
            if access.contains(Access::OnDemand) != odp {
                return Err(EINVAL);
            }
            if access.writes() && !writable {
                return Err(EACCES);
            }
        }
        let mut b = e.state.lock();
        if b.windows != 0 {
            return Err(EBUSY);
        }
        if let Some(pd) = pd {
            b.pd = pd;
        }
        if let Some(access) = access {
            b.access = access;
        }
        drop(b);
        // Lookups mark the entry before they take its lock.
        crate::ib::sync::synchronize_rcu_since(e.index.last_use());
        Ok(())
    }

    /// Deregistration: refused while windows are bound to the MR (as by rxe); from
    /// then on nothing binds to it, and no fault of an on-demand MR starts. A fault in
    /// progress is not waited for (it may sleep for good): it holds the pages' umem
    /// until it ends, and nothing uses what it maps.
    pub(crate) fn dereg(&self) -> Result {
        {
            let mut b = self.held.entry.state.lock();
            if b.windows != 0 {
                return Err(EINVAL);
            }
            b.dying = true;
        }
        if let Memory::Odp(o, _) = &self.held.entry.memory {
            o.stop_faults();
        }
        Ok(())
    }

    /// `ibv_advise_mr()`: maps the pages of on-demand MRs of PD `pd` that `sges` name.
    /// Done before returning whether or not the process asked to wait (`flush`), which
    /// is what an asynchronous prefetch may do too.
    pub(crate) fn advise(
        dev: &Device<RxeRs>,
        pd: PdId,
        advice: Advice,
        _flush: bool,
        sges: &[Sge],
    ) -> Result {
        let write = advice == Advice::PrefetchWrite;
        for s in sges {
            let e = dev.mr_table.hold(s.lkey >> 8).ok_or(EINVAL)?;
            let region = e
                .clone()
                .mr_region(s.lkey, pd, need::LOCAL_READ)
                .map_err(|_| EINVAL)?;
            let Memory::Odp(o, _) = &e.memory else {
                // Pinned memory is always mapped.
                continue;
            };
            if write && !region.mr.state.lock().access.contains(Access::LocalWrite) {
                return Err(EPERM);
            }
            let at = region
                .offset(s.addr, s.length as usize)
                .map_err(|_| EINVAL)?;
            o.map(at, s.length as usize, write, advice != Advice::NoFault)?;
        }
        Ok(())
    }

    fn finish(
        dev: &Device<RxeRs>,
        pd: PdId,
        binding: Binding,
        memory: Memory,
        charge: Charge,
    ) -> Result<MrCreated<Self>> {
        let (held, key) = Held::take(&dev.mr_table, pd, binding, memory)?;
        Ok(MrCreated {
            data: Self {
                held,
                _charge: charge,
            },
            lkey: key,
            rkey: key,
        })
    }
}

/// Checks the rights a process asks for its MR.
fn user_access(access: AccessFlags) -> Result {
    if !access.within(MR_ACCESS | Access::HugeTlb) {
        return Err(eopnotsupp());
    }
    // Persistence needs persistent memory, which a process's pages are not (rxe
    // refuses the same way).
    if access.contains(Access::FlushPersistent) {
        return Err(EINVAL);
    }
    Ok(())
}

/// What the key of a user or DMA MR opens, for good (but for a user MR's PD and
/// rights, which `ibv_rereg_mr()` may change).
fn fixed(access: AccessFlags, iova: u64, length: u64) -> Binding {
    Binding {
        valid: true,
        access,
        iova,
        length,
        ..Default::default()
    }
}

/// The driver's part of a memory window.
pub(crate) struct RxeMw {
    _held: Held,
    _charge: Charge,
}

impl RxeMw {
    pub(crate) fn alloc(
        dev: &Device<RxeRs>,
        pd: PdId,
        type2: bool,
        user: Option<&UserCall<'_, RxeRs>>,
    ) -> Result<(Self, u32)> {
        if let Some(user) = user {
            user.udata.require_empty_input()?;
        }
        let charge = Quota::charge(&dev.mws)?;
        // A type 1 window is valid, bound to nothing, from the start; a type 2 one is
        // free until a BIND_MW work request binds it.
        let binding = Binding {
            valid: !type2,
            ..Default::default()
        };
        let memory = Memory::Window { type2 };
        let (held, rkey) = Held::take(&dev.mw_table, pd, binding, memory)?;
        Ok((
            Self {
                _held: held,
                _charge: charge,
            },
            rkey,
        ))
    }
}

#[vtable]
impl MrOps<RxeRs> for RxeMr {
    fn reg_user_mr(
        dev: &Device<RxeRs>,
        pd: PdId,
        start: u64,
        len: u64,
        iova: u64,
        access: AccessFlags,
        user: &UserCall<'_, RxeRs>,
    ) -> Result<MrCreated<Self>> {
        Self::reg_user(dev, pd, (start, len, iova), access, user)
    }

    fn rereg_user_mr(
        mr: &Mr<RxeRs>,
        pd: Option<PdId>,
        access: Option<AccessFlags>,
        user: &UserCall<'_, RxeRs>,
    ) -> Result {
        user.udata.require_empty_input()?;
        mr.rereg(pd, access)
    }

    fn advise_mr(
        dev: &Device<RxeRs>,
        pd: PdId,
        advice: Advice,
        flush: bool,
        sges: &[Sge],
    ) -> Result {
        Self::advise(dev, pd, advice, flush, sges)
    }

    fn get_dma_mr(
        dev: &Device<RxeRs>,
        pd: PdId,
        access: AccessFlags,
        mem: KernelMemory,
    ) -> Result<MrCreated<Self>> {
        Self::dma(dev, pd, access, mem)
    }

    fn alloc_mr(dev: &Device<RxeRs>, pd: PdId, max_pages: u32) -> Result<MrCreated<Self>> {
        Self::fast(dev, pd, max_pages)
    }

    fn dereg_mr(mr: &Mr<RxeRs>) -> Result {
        mr.dereg()
    }

    fn mr_page_list(mr: &Mr<RxeRs>) -> Option<&PageList> {
        mr.page_list()
    }
}

#[vtable]
impl MwOps<RxeRs> for RxeMw {
    fn alloc_mw(
        dev: &Device<RxeRs>,
        pd: PdId,
        type2: bool,
        user: Option<&UserCall<'_, RxeRs>>,
    ) -> Result<(Self, u32)> {
        Self::alloc(dev, pd, type2, user)
    }
}
