// SPDX-License-Identifier: GPL-2.0

//! User memory mapped on demand (`struct ib_umem_odp`).
//!
//! C headers: [`include/rdma/ib_umem_odp.h`](srctree/include/rdma/ib_umem_odp.h),
//! [`include/linux/mmu_notifier.h`](srctree/include/linux/mmu_notifier.h)
//!
//! An on-demand-paging MR pins nothing: ib_core watches the process's address range with
//! an MMU interval notifier, and the device maps pages when it needs them (a *fault*,
//! `ib_umem_odp_map_dma_and_lock()`, which may sleep) and must stop using them when the
//! notifier says they go (`invalidate`, which unmaps them).
//!
//! The data path runs in softirq context and under spinlocks, where it can neither
//! fault nor take the umem's mutex. So [`OdpUmem`] keeps a mirror of which pages are
//! mapped, under an interrupt-safe spinlock: a fault fills in the pages it mapped, the
//! notifier clears them before they are unmapped, and a copy to or from the region
//! runs under the spinlock and only if every page it touches is in the mirror. A copy
//! that finds a page missing fails with [`OdpError::Absent`] and changes nothing; its
//! caller has the range faulted in from process context and tries again.
//!
//! A fault may sleep for as long as the process's memory makes it: a page of a file whose
//! filesystem never answers keeps it asleep for good, and nothing can wake it. So the data
//! path's faults run in work items of their own, on the module's [`FaultQueue`], that no
//! destroy waits for: [`OdpUmem::fault_async`].

use crate::ib::{
    bindings,
    device::{Device, Driver},
    sync::{new_spinlock_irq, SpinLockIrq},
    task::Workqueue,
    verbs::AccessFlags,
};
use core::ptr::{null_mut, NonNull};
use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::{
    c_str,
    error::from_err_ptr,
    impl_has_work, new_work,
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        rcu, Arc,
    },
    workqueue::{Queue, Work, WorkItem},
};

/// Why a copy to or from an on-demand region did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OdpError {
    /// Outside the region.
    Range,
    /// A page it touches is not mapped (for writing, if it writes) now.
    Absent,
}

/// A mirror entry: a page's address with [`WRITABLE`] set if mapped for writing; 0 for
/// a page not mapped.
const WRITABLE: usize = 1;

#[pin_data]
struct Mirror {
    /// One entry per page of the umem, from `ib_umem_start()` on.
    #[pin]
    pages: SpinLockIrq<KVVec<usize>>,
    /// Set once the region is being deregistered: from then on no fault starts.
    dying: Atomic<bool>,
}

/// A process's memory registered for on-demand paging.
///
/// # Invariants
///
/// `ptr` is an `ib_umem_odp` from `ib_umem_odp_get()` with [`ODP_OPS`], released when
/// this value is dropped; its `private` is null or points to `mirror`, which outlives
/// it. `start` is `ib_umem_start()` of it; the region is `len` bytes at the user
/// address `addr`, inside the umem. We hold a reference to the memory of `ibdev`, the
/// umem's device, until after the umem is released (which reads the device).
pub(crate) struct OdpUmem {
    ptr: NonNull<bindings::ib_umem_odp>,
    ibdev: NonNull<bindings::ib_device>,
    mirror: Pin<KBox<Mirror>>,
    addr: u64,
    len: usize,
    start: u64,
}

// SAFETY: The umem is usable from any thread; the mirror is under its locks.
unsafe impl Send for OdpUmem {}
// SAFETY: `&OdpUmem` reads the mirror under its lock. Faults may run at the same time,
// as `ib_umem_odp_map_dma_and_lock()` allows (it serialises its own updates of the
// umem); the mirror is changed only under the umem's mutex and the mirror's lock.
unsafe impl Sync for OdpUmem {}

/// The notifier callbacks of every on-demand umem of rxe_rs.
static ODP_OPS: bindings::mmu_interval_notifier_ops = bindings::mmu_interval_notifier_ops {
    invalidate: Some(invalidate),
    invalidate_start: None,
    invalidate_finish: None,
};

/// The MMU notifier: pages of the range go away. Clears them from the mirror, under its
/// spinlock (so that no copy uses them from then on), then unmaps them.
///
/// # Safety
///
/// Called by the MMU notifier for a umem made by [`OdpUmem::get`].
unsafe extern "C" fn invalidate(
    mni: *mut bindings::mmu_interval_notifier,
    range: *const bindings::mmu_notifier_range,
    seq: c_ulong,
) -> bool {
    let (mut from, mut to) = (0, 0);
    // SAFETY: `range` is the notifier's, valid for the call.
    if !unsafe { bindings::rxe_rs_odp_range(range, &mut from, &mut to) } {
        // Taking the umem's mutex may sleep, which the caller does not allow now.
        return false;
    }
    // SAFETY: The notifier is the one embedded in an `ib_umem_odp`.
    let odp = unsafe { bindings::rxe_rs_odp_of(mni) };
    // SAFETY: A live umem (the notifier is removed before it is freed).
    let (start, end) = unsafe {
        bindings::rxe_rs_odp_lock(odp);
        bindings::rxe_rs_odp_set_seq(mni, seq);
        (
            bindings::rxe_rs_odp_start(odp),
            bindings::rxe_rs_odp_end(odp),
        )
    };
    let (from, to) = (from.max(start), to.min(end));
    if from < to {
        // SAFETY: Under the umem's mutex, under which `private` is set.
        let mirror = unsafe { bindings::rxe_rs_odp_private(odp) }.cast::<Mirror>();
        // SAFETY: By the type invariant of `OdpUmem`, a non-null `private` is its mirror,
        // which lives until after the umem (and with it the notifier) is released.
        if let Some(m) = unsafe { mirror.as_ref() } {
            let mut pages = m.pages.lock();
            let first = (from - start) >> PAGE_SHIFT;
            let last = (to - start).div_ceil(PAGE_SIZE);
            for p in pages.iter_mut().take(last).skip(first) {
                *p = 0;
            }
        }
        // SAFETY: The umem's mutex is held, as the function requires.
        unsafe { bindings::ib_umem_odp_unmap_dma_pages(odp, from as u64, to as u64) };
    }
    // SAFETY: Locked above.
    unsafe { bindings::rxe_rs_odp_unlock(odp) };
    true
}

impl OdpUmem {
    /// Registers `len` bytes at the user address `addr` of the calling process for
    /// `dev`, writable by the device if `access` says so, and maps what is present
    /// already (without faulting anything in).
    pub(crate) fn get<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<Self> {
        let uaddr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let ulen = usize::try_from(len).map_err(|_| EINVAL)?;
        if ulen == 0 {
            return Err(EINVAL);
        }
        let mirror = KBox::pin_init(
            pin_init!(Mirror {
                pages <- new_spinlock_irq!(KVVec::new()),
                dying: Atomic::new(false),
            }),
            GFP_KERNEL,
        )?;
        let ibdev = NonNull::new(dev.as_raw()).ok_or(EINVAL)?;
        // SAFETY: The device is live; this runs in the calling process's context.
        let raw = from_err_ptr(unsafe {
            bindings::ib_umem_odp_get(dev.as_raw(), uaddr, ulen, access.bits() as c_int, &ODP_OPS)
        })?;
        let ptr = NonNull::new(raw).ok_or(EINVAL)?;
        // SAFETY: A live umem.
        let (start, end) = unsafe {
            (
                bindings::rxe_rs_odp_start(raw) as u64,
                bindings::rxe_rs_odp_end(raw) as u64,
            )
        };
        // SAFETY: The device is live; the reference is put when `this` is dropped.
        unsafe { bindings::rxe_rs_device_memory_get(ibdev.as_ptr()) };
        // INVARIANT: `private` is still null; from here on dropping `this` releases the
        // umem, then the device's memory.
        let this = Self {
            ptr,
            ibdev,
            mirror,
            addr,
            len: ulen,
            start,
        };
        let count = usize::try_from((end - start) >> PAGE_SHIFT).map_err(|_| EINVAL)?;
        let mut pages = KVVec::new();
        pages.extend_with(count, 0, GFP_KERNEL_ACCOUNT)?;
        // The old list is empty: nothing is freed under the lock.
        *this.mirror.pages.lock() = pages;
        let private: *const Mirror = &*this.mirror;
        // SAFETY: A live umem; `private` is set under its mutex, as the notifier reads it.
        // INVARIANT: It points to the mirror, which is dropped after the umem.
        unsafe {
            bindings::rxe_rs_odp_lock(raw);
            bindings::rxe_rs_odp_set_private(raw, private.cast_mut().cast::<c_void>());
            bindings::rxe_rs_odp_unlock(raw);
        }
        this.map(0, ulen, false, false)?;
        Ok(this)
    }

    /// The region's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the region may be mapped for writing (as [`Umem::writable`]).
    ///
    /// [`Umem::writable`]: crate::ib::mr::Umem::writable
    pub(crate) fn writable(&self) -> bool {
        // SAFETY: By the type invariant a live umem.
        unsafe { bindings::rxe_rs_odp_writable(self.ptr.as_ptr()) }
    }

    /// Maps the pages of `len` bytes from byte `at` of the region (for writing if
    /// `write` and the region is writable); with `fault`, faulting them in. May sleep.
    pub(crate) fn map(&self, at: usize, len: usize, write: bool, fault: bool) -> Result {
        if len == 0 {
            return Ok(());
        }
        let end = at.checked_add(len).ok_or(EFAULT)?;
        if end > self.len {
            return Err(EFAULT);
        }
        if self.mirror.dying.load(Relaxed) {
            return Err(EFAULT);
        }
        let va = self.addr + at as u64;
        let pages = self.page_span(va, len);
        let raw = self.ptr.as_ptr();
        // SAFETY: By the type invariant a live umem; the range is inside it.
        let n = unsafe {
            let write = write && bindings::rxe_rs_odp_writable(raw);
            bindings::rxe_rs_odp_map_and_lock(raw, va, len as u64, write, fault)
        };
        kernel::error::to_result(n.min(0))?;
        // The umem's mutex is held: its page list is stable.
        {
            let mut mirror = self.mirror.pages.lock();
            let n = mirror.len();
            for i in pages.filter(|&i| i < n) {
                let mut w = false;
                // SAFETY: `i` indexes the umem's pages; its mutex is held.
                let page = unsafe { bindings::rxe_rs_odp_page(raw, i, &mut w) };
                mirror[i] = if page.is_null() {
                    0
                } else {
                    page as usize | if w { WRITABLE } else { 0 }
                };
            }
        }
        // SAFETY: `rxe_rs_odp_map_and_lock()` succeeded, so the mutex is ours.
        unsafe { bindings::rxe_rs_odp_unlock(raw) };
        Ok(())
    }

    /// Maps `len` bytes from byte `at` of the region as [`OdpUmem::map`] does with
    /// `fault`, in a work item on the module's [`FaultQueue`], and then calls `done` there
    /// with the outcome. Nothing waits for that work item: it may sleep for good (see the
    /// module's documentation), keeping the umem, and with it the device's memory, and
    /// the module loaded (`delete_module()` refuses meanwhile). Fails, and `done` is not
    /// called, if the module is being unloaded or memory is short.
    pub(crate) fn fault_async(
        this: &Arc<Self>,
        (at, len, write): (usize, usize, bool),
        done: impl FnOnce(Result) + Send + 'static,
    ) -> Result {
        let module = ModuleRef::get().ok_or(ENODEV)?;
        let umem = this.clone();
        let work = KBox::pin_init(
            pin_init!(FaultWork {
                work <- new_work!("OdpUmem::fault_async"),
                run: Some(move || {
                    done(umem.map(at, len, write, true));
                    // The umem may go here; the module reference goes last.
                    drop(umem);
                    drop(module);
                }),
            }),
            GFP_KERNEL_ACCOUNT,
        )?;
        let refused = {
            let _rcu = rcu::read_lock();
            let raw = FAULTS.load(Acquire);
            if raw.is_null() {
                Some(work)
            } else {
                // SAFETY: A `FaultQueue` clears `FAULTS` and waits for the RCU read-side
                // sections that may have read it before it destroys its workqueue.
                unsafe { Queue::from_raw(raw.cast_const().cast()) }.enqueue(work);
                None
            }
        };
        // Not in the read-side section: dropping the work may release the umem.
        match refused {
            Some(work) => {
                drop(work);
                Err(ENODEV)
            }
            None => Ok(()),
        }
    }

    /// The indices in the mirror of the pages that `len` bytes (at least one) at the user
    /// address `va` of the region touch.
    fn page_span(&self, va: u64, len: usize) -> core::ops::RangeInclusive<usize> {
        let first = ((va - self.start) >> PAGE_SHIFT) as usize;
        let last = ((va + len as u64 - 1 - self.start) >> PAGE_SHIFT) as usize;
        first..=last
    }

    /// From now on no fault starts. A fault in progress is not waited for: it may sleep
    /// for good; whatever it maps is never read or written, as the region is going.
    pub(crate) fn stop_faults(&self) {
        self.mirror.dying.store(true, Relaxed);
    }

    /// Calls `f` with (page, offset in it, range of the caller's buffer) for each piece
    /// of `len` bytes from byte `at` of the region, under the mirror's lock, if every
    /// page is mapped (for writing, if `write`).
    fn pieces(
        &self,
        at: usize,
        len: usize,
        write: bool,
        mut f: impl FnMut(*mut bindings::page, usize, core::ops::Range<usize>),
    ) -> Result<(), OdpError> {
        let end = at.checked_add(len).ok_or(OdpError::Range)?;
        if end > self.len {
            return Err(OdpError::Range);
        }
        if len == 0 {
            return Ok(());
        }
        let va = self.addr + at as u64;
        let span = self.page_span(va, len);
        let pages = self.mirror.pages.lock();
        let need = if write { WRITABLE } else { 0 };
        let all = pages
            .get(span)
            .is_some_and(|ps| ps.iter().all(|&p| p != 0 && p & need == need));
        if !all {
            return Err(OdpError::Absent);
        }
        let mut done = 0;
        while done < len {
            let pos = va as usize + done;
            let page = (pos - self.start as usize) >> PAGE_SHIFT;
            let off = pos & (PAGE_SIZE - 1);
            let n = (PAGE_SIZE - off).min(len - done);
            f(
                (pages[page] & !WRITABLE) as *mut bindings::page,
                off,
                done..done + n,
            );
            done += n;
        }
        Ok(())
    }

    /// Copies `data` to byte `at` of the region.
    pub(crate) fn write(&self, at: usize, data: &[u8]) -> Result<(), OdpError> {
        self.pieces(at, data.len(), true, |page, off, r| {
            // SAFETY: The page is in the mirror, so mapped for writing until the notifier
            // clears it, which waits for the mirror's lock held here; `off..off +
            // r.len()` lies inside it.
            unsafe {
                bindings::rxe_rs_page_write(page, off, data[r.clone()].as_ptr().cast(), r.len())
            }
        })
    }

    /// Copies byte `at` of the region on into `out`.
    pub(crate) fn read(&self, at: usize, out: &mut [u8]) -> Result<(), OdpError> {
        let ptr = out.as_mut_ptr();
        self.pieces(at, out.len(), false, |page, off, r| {
            // SAFETY: As in `write`; the destination is `r` of `out`, which `pieces`
            // keeps inside it.
            unsafe { bindings::rxe_rs_page_read(page, off, ptr.add(r.start).cast(), r.len()) }
        })
    }
}

impl Drop for OdpUmem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the umem. Releasing it removes the
        // notifier, waiting for a callback in progress; the mirror goes after.
        unsafe { bindings::ib_umem_odp_release(self.ptr.as_ptr()) };
        // SAFETY: Taken in `get`, by the type invariant; the umem no longer reads it.
        unsafe { bindings::rxe_rs_device_memory_put(self.ibdev.as_ptr()) };
    }
}

/// Who the calling process acts for, as a key: its effective UID in the initial user
/// namespace. In a user namespace, the outermost one below the initial one stands for
/// it: the UID of the user who made it (so that the UIDs a user maps in namespaces of
/// its own all count as that user, as the kernel's `ucounts` limits do), or, for one
/// that root made (a container), that namespace itself, above all UIDs.
pub(crate) fn current_owner() -> u64 {
    // SAFETY: Reads the calling task's credentials and their namespaces, which live
    // while it runs.
    unsafe { bindings::rxe_rs_current_owner() }
}

/// A reference to this module: while it is held the module is not unloaded.
struct ModuleRef(());

impl ModuleRef {
    /// A reference, unless the module is being unloaded.
    fn get() -> Option<Self> {
        // SAFETY: Our own module, which is live while its code runs.
        unsafe { bindings::rxe_rs_module_get(crate::THIS_MODULE.as_ptr().cast()) }
            .then_some(Self(()))
    }
}

impl Drop for ModuleRef {
    fn drop(&mut self) {
        // SAFETY: Taken in `get`.
        unsafe { bindings::rxe_rs_module_put(crate::THIS_MODULE.as_ptr().cast()) };
    }
}

/// A fault of [`OdpUmem::fault_async`]: `run`, once.
#[pin_data]
struct FaultWork<F> {
    #[pin]
    work: Work<FaultWork<F>>,
    run: Option<F>,
}

impl_has_work! {
    impl{F} HasWork<Self> for FaultWork<F> { self.work }
}

impl<F: FnOnce() + Send + 'static> WorkItem for FaultWork<F> {
    type Pointer = Pin<KBox<Self>>;

    fn run(mut this: Pin<KBox<Self>>) {
        if let Some(run) = this.as_mut().project().run.take() {
            run();
        }
    }
}

/// The workqueue of the module's [`FaultQueue`]; null while there is none. Read in RCU
/// read-side sections.
static FAULTS: Atomic<*mut bindings::workqueue_struct> = Atomic::new(null_mut());

/// The module's workqueue of on-demand faults ([`OdpUmem::fault_async`]); at most one
/// exists. The module keeps it from its start to its unload: dropping it waits for its
/// work items to return, which at unload is short, since each has let go of its module
/// reference (so of everything it held) before unloading could begin.
pub(crate) struct FaultQueue {
    _wq: Workqueue,
}

impl FaultQueue {
    /// The module's queue of faults; `EBUSY` if there is one already.
    pub(crate) fn new() -> Result<Self> {
        let wq = Workqueue::new_unbound(c_str!("rxe_rs_odp"))?;
        FAULTS
            .cmpxchg(null_mut(), wq.as_raw(), Release)
            .map_err(|_| EBUSY)?;
        Ok(Self { _wq: wq })
    }
}

impl Drop for FaultQueue {
    fn drop(&mut self) {
        FAULTS.store(null_mut(), Relaxed);
        // SAFETY: Process context, no lock held. Afterwards nobody queues work here.
        unsafe { bindings::synchronize_rcu() };
        // Dropping `_wq` next waits for the work queued before.
    }
}
