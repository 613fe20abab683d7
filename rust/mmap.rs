// SPDX-License-Identifier: GPL-2.0

//! Memory shared with a process ([`UserMem`]) and offering it to the process:
//! `rdma_user_mmap_entry` and the device's `mmap`.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A device whose queues live in host memory (a software device) allocates them as
//! [`UserMem`]: zeroed vmalloc memory a process may map, as `vmalloc_user()` makes, but
//! charged to the process's memory cgroup (`rxe_rs_vmalloc_user()`). The process may
//! write anything anywhere in it at any time, so the kernel reads and writes it only by
//! copies and atomic words, all bounds-checked.
//!
//! When an object with such memory is created for a process, the memory is registered
//! with the process's context as an mmap entry ([`UserMap`]); ib_core picks a free offset
//! in the context's mmap space, which the driver returns to the process (for librxe in
//! `struct mminfo`). The process then maps the device file at that offset and ib_core
//! calls the device's `mmap`, which looks the entry up ([`map`]) and maps the pages.
//!
//! ```text
//!  create ─► UserMap::new ─► rdma_user_mmap_entry_insert      entry: 1 ref (the object's)
//!  mmap   ─► rdma_user_mmap_entry_get ─► remap_vmalloc_range ─► put     (ref only meanwhile)
//!  destroy ─► UserMap drop ─► rdma_user_mmap_entry_remove (no new mmap) ─► put
//!             ─► last ref: ib_core calls mmap_free ─► the entry and its Arc<UserMem> go
//! ```
//!
//! The memory is reference counted twice: by [`Arc`] for the kernel's users (the object,
//! the mmap offer), and page by page by the mm for the process's mappings. Mappings do
//! not hold the entry: the pages they map hold themselves, so a process that keeps memory
//! mapped after destroying its object, or after its device went away, keeps valid memory
//! that the device no longer uses, and freeing it meanwhile is safe.

use super::{bindings, device::Driver, ucontext::Ucontext};
use core::ptr::{self, NonNull};
use kernel::{
    error::to_result,
    page::PAGE_SIZE,
    prelude::*,
    sync::{atomic::Atomic, Arc},
    types::Opaque,
};

/// Zeroed, page-aligned kernel memory that a process may map, and write at any time.
///
/// # Invariants
///
/// `ptr` is an `rxe_rs_vmalloc_user()` allocation of `len` bytes (a non-zero multiple of
/// the page size), owned by this value and freed with `vfree()` when it is dropped.
pub(crate) struct UserMem {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: The allocation is plain memory, usable from any thread; accesses go through
// atomics or copies that tolerate concurrent writers.
unsafe impl Send for UserMem {}
// SAFETY: As above.
unsafe impl Sync for UserMem {}

impl UserMem {
    /// Allocates `len` bytes, rounded up to whole pages; `EINVAL` for none.
    pub(crate) fn new(len: usize) -> Result<Arc<Self>> {
        if len == 0 {
            return Err(EINVAL);
        }
        let len = len.checked_next_multiple_of(PAGE_SIZE).ok_or(ENOMEM)?;
        // SAFETY: Allocates; no preconditions.
        let raw = unsafe { bindings::rxe_rs_vmalloc_user(len) };
        let ptr = NonNull::new(raw.cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: `ptr` is a fresh `rxe_rs_vmalloc_user()` allocation of `len` bytes,
        // `len` a non-zero multiple of the page size. On failure the value is dropped,
        // which frees the allocation.
        Ok(Arc::new(Self { ptr, len }, GFP_KERNEL)?)
    }

    /// The length in bytes, a non-zero multiple of the page size.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The 32-bit word at byte `OFF` of the first page, which the process may change at
    /// any time: the kernel accesses it only atomically.
    pub(crate) fn word<const OFF: usize>(&self) -> &Atomic<u32> {
        const {
            assert!(
                OFF % 4 == 0 && OFF + 4 <= PAGE_SIZE,
                "a word of the first page"
            )
        };
        // SAFETY: `OFF` is a 4-aligned offset inside the first page of a live allocation
        // of at least one page (type invariant) that outlives `&self`.
        unsafe { Atomic::from_ptr(self.ptr.as_ptr().add(OFF).cast::<u32>()) }
    }

    /// The part `off..off + len` of the memory clamped to its end, as (pointer, length).
    fn span(&self, off: usize, len: usize) -> (*mut u8, usize) {
        let off = off.min(self.len);
        let len = len.min(self.len - off);
        // SAFETY: `off` is at most the length of the allocation: the pointer is inside it
        // or one past its end.
        (unsafe { self.ptr.as_ptr().add(off) }, len)
    }

    /// Copies the bytes at `off` into `out`, as many as the memory has there; returns
    /// how many.
    ///
    /// The process may be writing them at the same time: `out` then holds some mix of
    /// old and new bytes, which the caller validates like any other input.
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) -> usize {
        let (src, len) = self.span(off, out.len());
        // SAFETY: The source is `len` bytes inside the live allocation, the destination
        // `out`; the C copy tolerates a concurrent writer of the source.
        unsafe { bindings::rxe_rs_shared_copy(out.as_mut_ptr().cast(), src.cast(), len) };
        len
    }

    /// Copies `data` to the memory at `off`, as much as fits there; returns how much.
    pub(crate) fn write(&self, off: usize, data: &[u8]) -> usize {
        let (dst, len) = self.span(off, data.len());
        // SAFETY: The destination is `len` bytes inside the live allocation; a process
        // reading it concurrently sees some mix of bytes, harmless to the kernel.
        unsafe { bindings::rxe_rs_shared_copy(dst.cast(), data.as_ptr().cast(), len) };
        len
    }

    /// Copies `len` bytes at `off` to `to` at `to_off`, as many as both have there;
    /// returns how many. Within one memory, a range copied onto itself stays as it is,
    /// and ranges that overlap otherwise are not copied (0).
    pub(crate) fn copy(&self, off: usize, to: &UserMem, to_off: usize, len: usize) -> usize {
        let (src, len) = self.span(off, len);
        let (dst, len) = to.span(to_off, len);
        if ptr::eq(self, to) && off.abs_diff(to_off) < len {
            return if off == to_off { len } else { 0 };
        }
        // SAFETY: Source and destination are `len` bytes inside live allocations, which
        // do not overlap: two allocations, or two ranges of one checked above.
        unsafe { bindings::rxe_rs_shared_copy(dst.cast(), src.cast(), len) };
        len
    }
}

impl Drop for UserMem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the allocation is ours; pages a process still maps
        // stay alive through their own page references.
        unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };
    }
}

/// An mmap entry and the memory it offers.
///
/// # Invariants
///
/// Allocated with [`KBox`]; `ib` is inserted in one context's mmap space from
/// [`UserMap::new`] until ib_core calls `mmap_free` on it.
#[repr(C)]
struct Entry {
    ib: Opaque<bindings::rdma_user_mmap_entry>,
    mem: Arc<UserMem>,
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
    pub(crate) fn new<T: Driver>(ctx: &Ucontext<T>, mem: &Arc<UserMem>) -> Result<Self> {
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
    let ret = unsafe {
        let mem: &UserMem = &(*entry).mem;
        bindings::remap_vmalloc_range(vma, mem.ptr.as_ptr().cast(), 0)
    };
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
