// SPDX-License-Identifier: GPL-2.0

//! Memory regions and memory windows: registration, keys, deregistration.
//!
//! A user MR pins the process's pages for as long as it exists; a DMA MR (a kernel PD's
//! `local_dma_lkey`) covers all of kernel memory; a fast-registration MR holds the page
//! list a kernel consumer maps into it (`ib_map_mr_sg()`). Keys are `index << 8 | key`: MR indices
//! run from 1 to 2^19, MW indices above, so one key names one object; the low byte
//! changes with every registration so that a stale key of a freed object is not taken
//! for the next one with the same index. Nothing reads or writes the memory before the
//! data path exists.

use crate::device::RxeRs;
use crate::ib::{
    cq::UserCall,
    device::{eopnotsupp, Device},
    mr::{MrCreated, PageList, Umem},
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

/// What a key stands for, found by its index.
pub(crate) struct KeyEntry {
    index: Number,
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
    fn take(table: &Arc<KeyTable>) -> Result<Self> {
        let entry = Arc::new(
            KeyEntry {
                index: Number::new(),
            },
            GFP_KERNEL,
        )?;
        table.insert(&entry)?;
        Ok(Self {
            entry,
            table: table.clone(),
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.table.remove(self.entry.index.get());
    }
}

/// The driver's part of a memory region.
pub(crate) struct RxeMr {
    _held: Held,
    /// The pinned pages of a user MR (`None` for a DMA or fast-registration MR).
    _umem: Option<Umem>,
    /// The pages a fast-registration MR maps (`None` for the other kinds).
    pages: Option<Arc<PageList>>,
    _charge: Charge,
}

impl RxeMr {
    pub(crate) fn reg_user(
        dev: &Device<RxeRs>,
        start: u64,
        len: u64,
        access: u32,
        _user: &UserCall<'_, RxeRs>,
    ) -> Result<MrCreated<Self>> {
        if access & ON_DEMAND != 0 || access & !MR_ACCESS != 0 {
            return Err(eopnotsupp());
        }
        let charge = Quota::charge(&dev.mrs)?;
        let umem = Umem::get(dev, start, len, access)?;
        Self::finish(dev, Some(umem), None, charge)
    }

    pub(crate) fn dma(dev: &Device<RxeRs>, _access: u32) -> Result<MrCreated<Self>> {
        let charge = Quota::charge(&dev.mrs)?;
        Self::finish(dev, None, None, charge)
    }

    /// A fast-registration MR for up to `max_pages` pages (at most what the device
    /// advertises).
    pub(crate) fn fast(dev: &Device<RxeRs>, max_pages: u32) -> Result<MrCreated<Self>> {
        if max_pages > param::MAX_FAST_REG_PAGE_LIST_LEN {
            return Err(EINVAL);
        }
        let charge = Quota::charge(&dev.mrs)?;
        let pages = PageList::new(max_pages)?;
        Self::finish(dev, None, Some(pages), charge)
    }

    /// The page list of a fast-registration MR.
    pub(crate) fn page_list(&self) -> Option<&PageList> {
        self.pages.as_deref()
    }

    fn finish(
        dev: &Device<RxeRs>,
        umem: Option<Umem>,
        pages: Option<Arc<PageList>>,
        charge: Charge,
    ) -> Result<MrCreated<Self>> {
        let held = Held::take(&dev.mr_table)?;
        let key = dev.key_byte.key(held.entry.index.get());
        Ok(MrCreated {
            data: Self {
                _held: held,
                _umem: umem,
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
        mws: &Arc<Quota>,
        user: Option<&UserCall<'_, RxeRs>>,
    ) -> Result<(Self, u32)> {
        if let Some(user) = user {
            user.udata.require_empty_input()?;
        }
        let charge = Quota::charge(mws)?;
        let held = Held::take(&dev.mw_table)?;
        let rkey = dev.key_byte.key(held.entry.index.get());
        Ok((
            Self {
                _held: held,
                _charge: charge,
            },
            rkey,
        ))
    }
}
