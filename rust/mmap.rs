// SPDX-License-Identifier: GPL-2.0

//! Offering queue memory to a process: `rdma_user_mmap_entry` and the device's `mmap`.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! When an object with a ring is created for a process, the ring's memory is registered
//! with the process's context as an mmap entry ([`UserMap`]); ib_core picks a free offset
//! in the context's mmap space, which the driver returns to the process (librxe's
//! `struct mminfo`). The process then maps the device file at that offset and ib_core
//! calls the device's `mmap`, which looks the entry up ([`map`]) and maps the pages.
//!
//! ```text
//!  create ─► UserMap::new ─► rdma_user_mmap_entry_insert      entry: 1 ref (the object's)
//!  mmap   ─► rdma_user_mmap_entry_get ─► remap_vmalloc_range ─► put     (ref only meanwhile)
//!  destroy ─► UserMap drop ─► rdma_user_mmap_entry_remove (no new mmap) ─► put
//!             ─► last ref: ib_core calls mmap_free ─► the entry and its Arc<QueueMem> go
//! ```
//!
//! Mappings do not hold the entry: the pages they map hold themselves (see
//! [`super::queue`]), so a process that keeps a ring mapped after destroying its object,
//! or after its device went away, keeps valid memory that the device no longer uses.

use super::{bindings, device::Driver, queue::QueueMem, ucontext::Ucontext};
use core::ptr::{self, NonNull};
use kernel::{error::to_result, prelude::*, sync::Arc, types::Opaque};

/// An mmap entry and the memory it offers.
///
/// # Invariants
///
/// Allocated with [`KBox`]; `ib` is inserted in one context's mmap space from
/// [`UserMap::new`] until ib_core calls `mmap_free` on it.
#[repr(C)]
struct Entry {
    ib: Opaque<bindings::rdma_user_mmap_entry>,
    mem: Arc<QueueMem>,
}

/// Memory offered to one process at one offset of its device file.
///
/// Dropping it withdraws the offer; mappings already made stay valid.
///
/// # Invariants
///
/// `entry` is an [`Entry`] inserted in a context's mmap space, on which this value holds
/// the reference taken by the insertion.
pub(crate) struct UserMap {
    entry: NonNull<Entry>,
    offset: u64,
    len: u64,
}

// SAFETY: The entry is only used through ib_core's functions, which lock as needed.
unsafe impl Send for UserMap {}
// SAFETY: `&UserMap` only reads plain fields.
unsafe impl Sync for UserMap {}

impl UserMap {
    /// Offers `mem` to the process owning `ctx`.
    pub(crate) fn new<T: Driver>(ctx: &Ucontext<T>, mem: &Arc<QueueMem>) -> Result<Self> {
        let len = mem.len();
        let entry = KBox::new(
            Entry {
                ib: Opaque::zeroed(),
                mem: mem.clone(),
            },
            GFP_KERNEL,
        )?;
        let raw = KBox::into_raw(entry);
        // SAFETY: `raw` is a valid, zeroed entry; the context is live for the call.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert(
                ctx.as_raw(),
                ptr::addr_of_mut!((*raw).ib).cast(),
                len,
            )
        };
        if let Err(e) = to_result(ret) {
            // SAFETY: The insertion failed, so ib_core holds no pointer to the entry.
            drop(unsafe { KBox::from_raw(raw) });
            return Err(e);
        }
        // SAFETY: Inserted above; `start_pgoff` is fixed from now on.
        let pgoff = unsafe { (*(*raw).ib.get()).start_pgoff } as u64;
        // INVARIANT: Inserted, with the insertion's reference owned by the new value.
        Ok(Self {
            // SAFETY: `raw` came from `KBox::into_raw`, so it is not null.
            entry: unsafe { NonNull::new_unchecked(raw) },
            offset: pgoff << kernel::page::PAGE_SHIFT,
            len: len as u64,
        })
    }

    /// The offset to give to `mmap()`.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The length to give to `mmap()`.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for UserMap {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the entry is inserted and we own one reference,
        // which this gives up; ib_core calls `mmap_free` once no reference is left.
        unsafe { bindings::rdma_user_mmap_entry_remove(self.entry.as_ptr().cast()) };
    }
}

/// Maps the memory offered at the VMA's offset into it.
///
/// Fails with `EINVAL` when nothing is offered there (any more) or the VMA does not have
/// exactly the offered length or is not shared.
///
/// # Safety
///
/// `ctx` must be the live context of the device file being mapped and `vma` the VMA
/// ib_core hands to the device's `mmap`.
pub(super) unsafe fn map(
    ctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> Result {
    // SAFETY: Valid per the caller; this checks VM_SHARED and the length.
    let ib = unsafe { bindings::rdma_user_mmap_entry_get(ctx, vma) };
    if ib.is_null() {
        return Err(EINVAL);
    }
    // CAST: Every entry of our contexts is the first field of an `Entry`.
    let entry = ib.cast::<Entry>();
    // SAFETY: The reference from `rdma_user_mmap_entry_get()` keeps the entry, and with it
    // the memory, alive until the put below; the VMA is as long as the memory.
    let ret = unsafe { bindings::remap_vmalloc_range(vma, (*entry).mem.as_ptr().cast(), 0) };
    // SAFETY: Gives back the reference taken above.
    unsafe { bindings::rdma_user_mmap_entry_put(ib) };
    to_result(ret)
}

/// ib_core's `mmap_free`: the last reference to an entry is gone.
///
/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
pub(super) unsafe extern "C" fn mmap_free(ib: *mut bindings::rdma_user_mmap_entry) {
    // CAST: Every entry of our contexts is the first field of an `Entry`.
    // SAFETY: By the `Entry` invariant it came from `KBox::into_raw`; ib_core no longer
    // refers to it.
    drop(unsafe { KBox::from_raw(ib.cast::<Entry>()) });
}
