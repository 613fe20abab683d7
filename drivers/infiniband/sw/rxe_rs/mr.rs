// SPDX-License-Identifier: GPL-2.0

//! Memory regions and memory windows: registration, keys, deregistration.
//!
//! A user MR pins the process's pages for as long as it exists; a DMA MR (a kernel PD's
//! `local_dma_lkey`) covers all of kernel memory; a fast-registration MR holds the page
//! list a kernel consumer maps into it (`ib_map_mr_sg()`). Keys are `index << 8 | key`: MR indices
//! run from 1 to 2^19, MW indices above, so one key names one object; the low byte
//! changes with every registration so that a stale key of a freed object is not taken
//! for the next one with the same index.
//!
//! The data path finds an MR by key ([`lookup`]): the entry holds everything a packet or
//! a work request needs (key, PD, access rights, address range, the pinned pages), and
//! a lookup hands out a reference to it, so memory stays pinned while a copy to or from
//! it runs even if the MR is deregistered meanwhile. User MRs and the DMA MR of kernel
//! consumers carry data; a fast-registration MR refuses access until REG_MR work
//! requests exist.

use crate::device::RxeRs;
use crate::ib::{
    cq::UserCall,
    device::{eopnotsupp, Device},
    mr::{KernelMemory, MrCreated, PageList, Umem},
    pd::PdId,
};
use crate::param::{self, Charge, Quota};
use crate::table::{IdTable, Number, Numbered};
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

/// Access flags (`IB_ACCESS_*`) a user MR may ask for.
const MR_ACCESS: u32 = (1 << 0) // LOCAL_WRITE
    | (1 << 1) // REMOTE_WRITE
    | (1 << 2) // REMOTE_READ
    | (1 << 3) // REMOTE_ATOMIC
    | (1 << 4) // MW_BIND
    | (1 << 8) // FLUSH_GLOBAL
    | (1 << 9) // FLUSH_PERSISTENT
    | OPTIONAL_ACCESS;

/// `IB_ACCESS_OPTIONAL`: hints (relaxed ordering and the like) a device may ignore.
pub(crate) const OPTIONAL_ACCESS: u32 = 0x3ff0_0000;

/// `IB_ACCESS_ON_DEMAND`: on-demand paging, not offered (the device does not say it is).
const ON_DEMAND: u32 = 1 << 6;

/// The memory behind a key.
enum Memory {
    /// A process's pinned pages.
    User(Umem),
    /// A kernel consumer's DMA MR: its mapped memory, by kernel virtual address.
    Dma,
    /// A fast-registration MR: nothing until a REG_MR work request registers pages.
    Fast,
    /// A memory window, not bound to anything.
    Window,
}

/// What a key stands for, found by its index.
pub(crate) struct KeyEntry {
    index: Number,
    /// The whole key, set once the index is known.
    key: Atomic<u32>,
    pd: PdId,
    access: u32,
    /// The first address the key covers, and how many bytes.
    iova: u64,
    length: u64,
    memory: Memory,
}

/// Why an access through a key was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccessError {
    /// No such key, another PD's, or rights it does not grant.
    Key,
    /// Outside the range the key covers.
    Range,
}

/// Access rights (`IB_ACCESS_*`) an operation needs.
pub(crate) mod need {
    /// Reading local memory: every MR allows it.
    pub(crate) const LOCAL_READ: u32 = 0;
    pub(crate) const LOCAL_WRITE: u32 = 1 << 0;
    pub(crate) const REMOTE_WRITE: u32 = 1 << 1;
    pub(crate) const REMOTE_READ: u32 = 1 << 2;
    pub(crate) const REMOTE_ATOMIC: u32 = 1 << 3;
}

impl KeyEntry {
    /// Checks that `len` bytes at `iova` are inside the key's range; returns the offset
    /// of `iova` in it.
    fn offset(&self, iova: u64, len: usize) -> Result<usize, AccessError> {
        let off = iova.checked_sub(self.iova).ok_or(AccessError::Range)?;
        let end = off.checked_add(len as u64).ok_or(AccessError::Range)?;
        if end > self.length {
            return Err(AccessError::Range);
        }
        usize::try_from(off).map_err(|_| AccessError::Range)
    }

    /// Whether `len` bytes at `iova` are inside the key's range.
    pub(crate) fn covers(&self, iova: u64, len: usize) -> bool {
        self.offset(iova, len).is_ok()
    }

    /// Copies `data` into the memory at `iova`.
    pub(crate) fn write(&self, iova: u64, data: &[u8]) -> Result<(), AccessError> {
        let off = self.offset(iova, data.len())?;
        match &self.memory {
            Memory::User(u) => u.write(off, data).map_err(|_| AccessError::Range),
            Memory::Dma => KernelMemory::write(iova, data).map_err(|_| AccessError::Range),
            Memory::Fast | Memory::Window => Err(AccessError::Key),
        }
    }

    /// Copies the memory at `iova` into `out`.
    pub(crate) fn read(&self, iova: u64, out: &mut [u8]) -> Result<(), AccessError> {
        let off = self.offset(iova, out.len())?;
        match &self.memory {
            Memory::User(u) => u.read(off, out).map_err(|_| AccessError::Range),
            Memory::Dma => KernelMemory::read(iova, out).map_err(|_| AccessError::Range),
            Memory::Fast | Memory::Window => Err(AccessError::Key),
        }
    }
}

/// Finds the MR `key` names for an access that needs the rights `need` from a QP of PD
/// `pd`.
///
/// Only in an RCU read-side section, and the reference must go before the section
/// ends: deregistration waits for a grace period and then releases the pinned pages,
/// which must happen in process context, so no one else may hold the entry by then.
pub(crate) fn lookup(
    table: &KeyTable,
    key: u32,
    pd: PdId,
    need: u32,
) -> Result<Arc<KeyEntry>, AccessError> {
    let e = table.get(key >> 8).ok_or(AccessError::Key)?;
    if e.key.load(Relaxed) != key || e.pd != pd || e.access & need != need {
        return Err(AccessError::Key);
    }
    Ok(e)
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

/// The low byte of the next key.
pub(crate) struct KeyByte(Atomic<u32>);

impl KeyByte {
    pub(crate) fn new() -> Self {
        Self(Atomic::new(0))
    }

    fn key(&self, index: u32) -> u32 {
        (index << 8) | (self.0.fetch_add(1, Relaxed) & 0xff)
    }
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
        key_byte: &KeyByte,
        pd: PdId,
        access: u32,
        (iova, length): (u64, u64),
        memory: Memory,
    ) -> Result<(Self, u32)> {
        let entry = Arc::new(
            KeyEntry {
                index: Number::new(),
                key: Atomic::new(0),
                pd,
                access,
                iova,
                length,
                memory,
            },
            GFP_KERNEL,
        )?;
        let index = table.insert(&entry)?;
        // Until this store no key matches the entry (0 is never a key: indices start at 1).
        let key = key_byte.key(index);
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
        // The data path looks keys up only in RCU read-side sections: after a grace
        // period nobody else holds the entry, so the pages are unpinned here, in process
        // context, when `entry` goes.
        crate::ib::sync::synchronize_rcu();
    }
}

/// The driver's part of a memory region.
pub(crate) struct RxeMr {
    _held: Held,
    /// The pages a fast-registration MR maps (`None` for the other kinds).
    pages: Option<Arc<PageList>>,
    _charge: Charge,
}

impl RxeMr {
    pub(crate) fn reg_user(
        dev: &Device<RxeRs>,
        pd: PdId,
        (start, len, iova): (u64, u64, u64),
        access: u32,
        _user: &UserCall<'_, RxeRs>,
    ) -> Result<MrCreated<Self>> {
        if access & ON_DEMAND != 0 || access & !MR_ACCESS != 0 {
            return Err(eopnotsupp());
        }
        let charge = Quota::charge(&dev.mrs)?;
        let umem = Umem::get(dev, start, len, access)?;
        let range = (iova, umem.len() as u64);
        Self::finish(dev, pd, access, range, Memory::User(umem), None, charge)
    }

    pub(crate) fn dma(dev: &Device<RxeRs>, pd: PdId, access: u32) -> Result<MrCreated<Self>> {
        let charge = Quota::charge(&dev.mrs)?;
        Self::finish(dev, pd, access, (0, u64::MAX), Memory::Dma, None, charge)
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
        Self::finish(dev, pd, 0, (0, 0), Memory::Fast, Some(pages), charge)
    }

    /// The page list of a fast-registration MR.
    pub(crate) fn page_list(&self) -> Option<&PageList> {
        self.pages.as_deref()
    }

    fn finish(
        dev: &Device<RxeRs>,
        pd: PdId,
        access: u32,
        range: (u64, u64),
        memory: Memory,
        pages: Option<Arc<PageList>>,
        charge: Charge,
    ) -> Result<MrCreated<Self>> {
        let (held, key) = Held::take(&dev.mr_table, &dev.key_byte, pd, access, range, memory)?;
        Ok(MrCreated {
            data: Self {
                _held: held,
                pages,
                _charge: charge,
            },
            lkey: key,
            rkey: key,
        })
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
        mws: &Arc<Quota>,
        user: Option<&UserCall<'_, RxeRs>>,
    ) -> Result<(Self, u32)> {
        if let Some(user) = user {
            user.udata.require_empty_input()?;
        }
        let charge = Quota::charge(mws)?;
        let (held, rkey) = Held::take(&dev.mw_table, &dev.key_byte, pd, 0, (0, 0), Memory::Window)?;
        Ok((
            Self {
                _held: held,
                _charge: charge,
            },
            rkey,
        ))
    }
}
