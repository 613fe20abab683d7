// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`) and pinned user memory (`struct ib_umem`).
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)
//!
//! Unlike the other verbs objects, an MR is allocated by the driver: `reg_user_mr`,
//! `get_dma_mr` and `alloc_mr` return a `struct ib_mr` that ib_core then fills in
//! (device, PD, type, user object) and hands back to `dereg_mr`, which frees it.
//! [`Mr<T>`] is that allocation, a [`KBox`] whose first field is the C struct. [`Umem`]
//! is user memory pinned with `ib_umem_get()`, released when dropped.
//!
//! A fast-registration MR (`alloc_mr`) holds a [`PageList`] that `map_mr_sg` fills
//! from a kernel consumer's DMA-mapped scatterlist, through ib_core's
//! `ib_sg_to_pages()`, one page of the MR's page size at a time, and the range of
//! addresses they stand for; a REG_MR work request then makes the MR cover them.

use super::sync::{new_spinlock_irq, SpinLockIrq};
use super::{
    bindings,
    device::{eopnotsupp, Advice, Device, Driver},
    object::{device_of, Absent, Kind, Object},
    pd::PdId,
    ucontext::UserCall,
    verbs::AccessFlags,
    wr::Sge,
};
use core::ptr::NonNull;
use kernel::ffi::{c_int, c_uint};
use kernel::{
    error::{from_err_ptr, from_result},
    page::{PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::Arc,
};

/// User memory pinned for a device, with its pages at hand for the data path.
///
/// # Invariants
///
/// `ptr` is an `ib_umem` from `ib_umem_get*()`, released when this value is dropped.
/// `pages` are its pages in order, pinned for as long as it is; byte `i` of the region
/// is at byte `(offset + i) % PAGE_SIZE` of page `(offset + i) / PAGE_SIZE`, for `i`
/// below `len`.
pub(crate) struct Umem {
    ptr: NonNull<bindings::ib_umem>,
    pages: KVVec<*mut bindings::page>,
    offset: usize,
    len: usize,
}

// SAFETY: A umem is a description of pinned pages, usable from any thread; the page
// pointers stay valid while it is held.
unsafe impl Send for Umem {}
// SAFETY: `&Umem` only reads the description; page contents are copied with the
// kernel's own helpers, which tolerate concurrent access.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes at the user address `addr` of the calling process for `dev`,
    /// writable by the device if `access` says so.
    pub(crate) fn get<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<Self> {
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: The device is live; this runs in the calling process's context.
        let raw = from_err_ptr(unsafe {
            bindings::rxe_rs_umem_get(dev.as_raw(), addr, len, access.bits() as i32)
        })?;
        let ptr = NonNull::new(raw).ok_or(EINVAL)?;
        // From here on, dropping `umem` releases the pin.
        let mut umem = Self {
            ptr,
            pages: KVVec::new(),
            offset: 0,
            len: 0,
        };
        // SAFETY: A live umem.
        let (offset, length) = unsafe {
            (
                bindings::rxe_rs_umem_offset(raw),
                bindings::rxe_rs_umem_length(raw),
            )
        };
        let count = (offset + length).div_ceil(PAGE_SIZE);
        umem.pages
            .extend_with(count, core::ptr::null_mut(), GFP_KERNEL_ACCOUNT)?;
        // SAFETY: A live umem; `pages` has room for `count` entries.
        let got = unsafe { bindings::rxe_rs_umem_pages(raw, umem.pages.as_mut_ptr(), count) };
        if got != count {
            return Err(EFAULT);
        }
        // INVARIANT: All `count` pages of the pinned region, in order.
        umem.offset = offset;
        umem.len = length;
        Ok(umem)
    }

    /// The region's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the pages were pinned for writing: rights that write (see
    /// [`AccessFlags::writes`]) need that.
    pub(crate) fn writable(&self) -> bool {
        // SAFETY: By the type invariant a live umem.
        unsafe { bindings::rxe_rs_umem_writable(self.ptr.as_ptr()) }
    }

    /// Calls `f` with (page, offset in it, range of the caller's buffer) for each piece
    /// of `len` bytes from byte `at` of the region; `EFAULT` if they are not all in it.
    fn pieces(
        &self,
        at: usize,
        len: usize,
        mut f: impl FnMut(*mut bindings::page, usize, core::ops::Range<usize>),
    ) -> Result {
        let end = at.checked_add(len).ok_or(EFAULT)?;
        if end > self.len {
            return Err(EFAULT);
        }
        let mut done = 0;
        while done < len {
            let pos = self.offset + at + done;
            let (page, off) = (pos / PAGE_SIZE, pos % PAGE_SIZE);
            let n = (PAGE_SIZE - off).min(len - done);
            f(self.pages[page], off, done..done + n);
            done += n;
        }
        Ok(())
    }

    /// Copies `data` to byte `at` of the region.
    pub(crate) fn write(&self, at: usize, data: &[u8]) -> Result {
        self.pieces(at, data.len(), |page, off, r| {
            // SAFETY: By the type invariant `page` is a pinned page of the region and
            // `off..off + r.len()` lies inside it; the source is a slice of `data`.
            unsafe {
                bindings::rxe_rs_page_write(page, off, data[r.clone()].as_ptr().cast(), r.len())
            }
        })
    }

    /// Copies byte `at` of the region on into `out`.
    pub(crate) fn read(&self, at: usize, out: &mut [u8]) -> Result {
        let ptr = out.as_mut_ptr();
        self.pieces(at, out.len(), |page, off, r| {
            // SAFETY: As in `write`; the destination is `r` of `out`, which `pieces`
            // keeps inside it.
            unsafe { bindings::rxe_rs_page_read(page, off, ptr.add(r.start).cast(), r.len()) }
        })
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the umem.
        unsafe { bindings::ib_umem_release(self.ptr.as_ptr()) };
    }
}

/// Memory a kernel consumer gives the device through its DMA MR (`local_dma_lkey`).
///
/// The device does its DMA "virtually" (`ib_uses_virt_dma()`: it registers no DMA
/// device), so the DMA addresses ib_core hands kernel consumers, and that they put in
/// their work requests, are kernel virtual addresses of memory they mapped for the
/// device, valid until they unmap it, which they may do only once the work request
/// completed. Each range is checked to be in the kernel's direct map before use.
///
/// A value is the capability to copy to and from such addresses: only this layer makes
/// one, for a DMA MR (which ib_core asks for on behalf of a kernel PD, so only kernel
/// consumers' work requests name it) and for the inline data of a kernel consumer's
/// work request ([`super::wr::SendWr::read_inline`]). No address a process writes
/// reaches it.
pub(crate) struct KernelMemory {
    _private: (),
}

impl KernelMemory {
    /// The capability, for the callbacks above.
    pub(super) fn new() -> Self {
        Self { _private: () }
    }

    /// The range `addr..addr + len` as a pointer, if it is in the direct map.
    fn range(addr: u64, len: usize) -> Result<*mut u8> {
        let start = usize::try_from(addr).map_err(|_| EFAULT)?;
        let last = start.checked_add(len.max(1) - 1).ok_or(EFAULT)?;
        // SAFETY: Only compares the addresses with the direct map's bounds.
        let valid = unsafe {
            bindings::rxe_rs_virt_addr_valid(start) && bindings::rxe_rs_virt_addr_valid(last)
        };
        if !valid {
            return Err(EFAULT);
        }
        Ok(start as *mut u8)
    }

    /// Copies `data` to the kernel consumer's memory at `addr`.
    pub(crate) fn write(&self, addr: u64, data: &[u8]) -> Result {
        let dst = Self::range(addr, data.len())?;
        // SAFETY: Per the type's documentation the consumer mapped this memory for the
        // device until the work request completes, and it is in the direct map.
        unsafe { bindings::rxe_rs_shared_copy(dst.cast(), data.as_ptr().cast(), data.len()) };
        Ok(())
    }

    /// Copies the kernel consumer's memory at `addr` into `out`.
    pub(crate) fn read(&self, addr: u64, out: &mut [u8]) -> Result {
        let src = Self::range(addr, out.len())?;
        // SAFETY: As in `write`.
        unsafe { bindings::rxe_rs_shared_copy(out.as_mut_ptr().cast(), src.cast(), out.len()) };
        Ok(())
    }
}

/// The pages a fast-registration MR maps: DMA addresses of pages of the MR's page
/// size, at most as many as the MR was allocated for, and where in them the mapping
/// the last `ib_map_mr_sg()` made starts and how long it is. Its bytes are addressed by
/// their offset from its first: the address its consumer registers it at is the REG_MR
/// work request's business.
#[pin_data]
pub(crate) struct PageList {
    #[pin]
    inner: SpinLockIrq<Pages>,
}

struct Pages {
    addrs: KVec<u64>,
    /// Which mapping the list holds: each `ib_map_mr_sg()` starts a new one.
    generation: u32,
    /// The offset of the mapping's first byte in the first page.
    first: u64,
    length: u64,
    /// log2 of the page size.
    shift: u32,
}

impl PageList {
    /// An empty list with room for `max` pages, allocated now (mapping never allocates).
    pub(crate) fn new(max: u32) -> Result<Arc<Self>> {
        let addrs = KVec::with_capacity(max as usize, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                inner <- new_spinlock_irq!(Pages {
                    addrs,
                    generation: 0,
                    first: 0,
                    length: 0,
                    shift: PAGE_SHIFT as u32,
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// The last mapping: which one it is (see [`PageList::write`]) and how many bytes
    /// it covers.
    pub(crate) fn mapping(&self) -> (u32, u64) {
        let p = self.inner.lock();
        (p.generation, p.length)
    }

    fn start(&self, page_size: u32) {
        let mut p = self.inner.lock();
        p.generation = p.generation.wrapping_add(1);
        p.addrs.clear();
        p.shift = page_size.trailing_zeros();
    }

    fn finish(&self, iova: u64, length: u64) {
        let mut p = self.inner.lock();
        p.first = iova & ((1u64 << p.shift) - 1);
        p.length = length;
    }

    /// Adds a page; `ENOMEM` when the list is full, which stops the mapping there.
    fn push(&self, addr: u64) -> Result {
        self.inner
            .lock()
            .addrs
            .push_within_capacity(addr)
            .map_err(|_| ENOMEM)
    }

    /// Calls `f` with (kernel address, range of the caller's buffer) for each piece of
    /// the `len` bytes `off` bytes into mapping `generation`, split at the MR's page
    /// boundaries; `EFAULT` if a piece is not on a mapped page or the list holds
    /// another mapping now.
    fn pieces(
        &self,
        (generation, off): (u32, usize),
        len: usize,
        mut f: impl FnMut(u64, core::ops::Range<usize>) -> Result,
    ) -> Result {
        let p = self.inner.lock();
        if p.generation != generation {
            return Err(EFAULT);
        }
        let size = 1u64 << p.shift;
        let mut done = 0;
        while done < len {
            // From the start of the first page: at most its size plus a `usize` sum.
            let at = off
                .checked_add(done)
                .and_then(|o| (o as u64).checked_add(p.first))
                .ok_or(EFAULT)?;
            let page = usize::try_from(at >> p.shift)
                .ok()
                .and_then(|i| p.addrs.get(i))
                .ok_or(EFAULT)?;
            let in_page = at & (size - 1);
            let n = ((size - in_page) as usize).min(len - done);
            f(page + in_page, done..done + n)?;
            done += n;
        }
        Ok(())
    }

    /// Copies `data` to the mapped memory `off` bytes into mapping `generation` (the
    /// one a registration took: a consumer may map the MR again before it invalidates
    /// it, and the pages of the new mapping are not the registration's).
    pub(crate) fn write(&self, generation: u32, off: usize, data: &[u8]) -> Result {
        self.pieces((generation, off), data.len(), |addr, r| {
            KernelMemory::new().write(addr, &data[r])
        })
    }

    /// Copies the mapped memory `off` bytes into mapping `generation` into `out`.
    pub(crate) fn read(&self, generation: u32, off: usize, out: &mut [u8]) -> Result {
        self.pieces((generation, off), out.len(), |addr, r| {
            KernelMemory::new().read(addr, &mut out[r])
        })
    }
}

/// What a new MR reports: its keys.
pub(crate) struct MrCreated<D> {
    pub(crate) data: D,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// The verbs of a memory region: what a driver's MR data (`T::Mr`) implements.
#[vtable]
pub(crate) trait MrOps<T: Driver>: Sized + Send + Sync {
    /// A process registers `len` bytes of its memory at `start`, addressed from `iova`.
    fn reg_user_mr(
        _dev: &Device<T>,
        _pd: PdId,
        _start: u64,
        _len: u64,
        _iova: u64,
        _access: AccessFlags,
        _user: &UserCall<'_, T>,
    ) -> Result<MrCreated<Self>> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A process moves its MR `mr` to the PD `pd` and/or gives it the rights `access`
    /// (`ibv_rereg_mr()`), in place: the MR keeps its memory and keys. A new
    /// translation (other memory) would need a new MR, which this abstraction does not
    /// make: such a call fails with `EOPNOTSUPP` before it gets here.
    fn rereg_user_mr(
        _mr: &Mr<T>,
        _pd: Option<PdId>,
        _access: Option<AccessFlags>,
        _user: &UserCall<'_, T>,
    ) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A process advises the device to map the pages of on-demand MRs (`ibv_advise_mr()`)
    /// now; with `flush`, before the call returns.
    fn advise_mr(
        _dev: &Device<T>,
        _pd: PdId,
        _advice: Advice,
        _flush: bool,
        _sges: &[Sge],
    ) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A kernel consumer asks for an MR covering all of memory (its PD's DMA lkey),
    /// which `mem` opens.
    fn get_dma_mr(
        _dev: &Device<T>,
        _pd: PdId,
        _access: AccessFlags,
        _mem: KernelMemory,
    ) -> Result<MrCreated<Self>> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// A kernel consumer asks for a fast-registration MR of up to `max_pages` pages.
    /// Goes with [`MrOps::mr_page_list`].
    fn alloc_mr(_dev: &Device<T>, _pd: PdId, _max_pages: u32) -> Result<MrCreated<Self>> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// An MR is to be deregistered: refuse, and it stays as it is; succeed, and it is
    /// dropped.
    fn dereg_mr(_mr: &Mr<T>) -> Result {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }

    /// The page list `map_mr_sg` fills, for an MR made by [`MrOps::alloc_mr`].
    fn mr_page_list(_mr: &Mr<T>) -> Option<&PageList> {
        build_error!(kernel::error::VTABLE_DEFAULT_ERROR)
    }
}

#[vtable]
impl<T: Driver> MrOps<T> for Absent {}

/// The kind of a memory region.
pub(crate) enum MrKind {}

impl<T: Driver> Kind<T> for MrKind {
    type Raw = bindings::ib_mr;
    type Events = ();
    type Data = T::Mr;
}

/// A memory region of driver `T`: a [`KBox`] the driver allocates and frees.
pub(crate) type Mr<T> = Object<T, MrKind>;

impl<T: Driver> Mr<T> {
    /// Allocates an MR around `made`, for ib_core to fill in.
    fn into_raw(made: MrCreated<T::Mr>, iova: u64, length: u64) -> Result<*mut bindings::ib_mr> {
        let raw = Self::new_boxed((), made.data)?;
        // SAFETY: Just allocated and not shared yet.
        unsafe {
            let ib = &mut *raw;
            ib.lkey = made.lkey;
            ib.rkey = made.rkey;
            ib.iova = iova;
            ib.length = length;
            ib.page_size = kernel::page::PAGE_SIZE as u32;
        }
        Ok(raw)
    }

    /// Maps the first `nents` entries of a DMA-mapped scatterlist (from `*offset` bytes
    /// into the first, if `offset` is not null) into the MR's page list; returns how many
    /// entries were mapped, as `ib_map_mr_sg()` documents.
    ///
    /// # Safety
    ///
    /// `sg`, `nents` and `offset` must be as ib_core's `map_mr_sg` callback receives them
    /// for this MR.
    unsafe fn map_sg(
        &self,
        sg: *mut bindings::scatterlist,
        nents: c_int,
        offset: *mut c_uint,
    ) -> Result<c_int> {
        let list = T::Mr::mr_page_list(self).ok_or(EINVAL)?;
        let mr = self.as_raw();
        // SAFETY: ib_core set the page size for this mapping before calling.
        let page_size = unsafe { (*mr).page_size };
        // The IB minimum is 512 bytes; addresses are split by shifts, so a power of two.
        if page_size < 512 || !page_size.is_power_of_two() {
            return Err(EINVAL);
        }
        list.start(page_size);
        // SAFETY: Arguments as ib_core gave them; `set_page` only runs during the call.
        let n = unsafe { bindings::ib_sg_to_pages(mr, sg, nents, offset, Some(set_page::<T>)) };
        kernel::error::to_result(n.min(0))?;
        // SAFETY: `ib_sg_to_pages()` set the MR's address and length for this mapping.
        let (iova, length) = unsafe { ((*mr).iova, (*mr).length) };
        list.finish(iova, length);
        Ok(n)
    }
}

/// `ib_sg_to_pages()`'s callback: one more page for the MR.
///
/// # Safety
///
/// Only for `ib_sg_to_pages()` called from [`Mr::map_sg`].
unsafe extern "C" fn set_page<T: Driver>(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
    // SAFETY: The MR is the one `map_sg` maps, live for the call.
    let this = unsafe { Mr::<T>::from_raw(mr) };
    match T::Mr::mr_page_list(this).map(|l| l.push(addr)) {
        Some(Ok(())) => 0,
        Some(Err(e)) => e.to_errno(),
        None => EINVAL.to_errno(),
    }
}

/// Fills in the MR verbs of an ops table.
pub(super) fn set_ops<T: Driver>(ops: &mut bindings::ib_device_ops) {
    let makes_mrs = T::Mr::HAS_REG_USER_MR || T::Mr::HAS_GET_DMA_MR || T::Mr::HAS_ALLOC_MR;
    const {
        assert!(
            !(T::Mr::HAS_REG_USER_MR || T::Mr::HAS_GET_DMA_MR || T::Mr::HAS_ALLOC_MR)
                || (T::Mr::HAS_DEREG_MR && T::Mr::HAS_REG_USER_MR),
            // uverbs offers MRs to processes whenever `dereg_mr` is there, and its ioctl
            // path calls `reg_user_mr` without a NULL check: a driver with MRs for kernel
            // consumers only implements it to refuse (EOPNOTSUPP).
            "an MR kind needs dereg_mr and reg_user_mr"
        )
    };
    if !makes_mrs {
        return;
    }
    if T::Mr::HAS_GET_DMA_MR {
        ops.get_dma_mr = Some(get_dma_mr::<T>);
    }
    if T::Mr::HAS_REG_USER_MR {
        ops.reg_user_mr = Some(reg_user_mr::<T>);
    }
    if T::Mr::HAS_REREG_USER_MR {
        ops.rereg_user_mr = Some(rereg_user_mr::<T>);
    }
    ops.dereg_mr = Some(dereg_mr::<T>);
    if T::Mr::HAS_ADVISE_MR {
        ops.advise_mr = Some(advise_mr::<T>);
    }
    const {
        assert!(
            T::Mr::HAS_ALLOC_MR == T::Mr::HAS_MR_PAGE_LIST,
            "alloc_mr and mr_page_list go together"
        )
    };
    if T::Mr::HAS_ALLOC_MR {
        ops.alloc_mr = Some(alloc_mr::<T>);
        ops.map_mr_sg = Some(map_mr_sg::<T>);
    }
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn reg_user_mr<T: Driver>(
    pd: *mut bindings::ib_pd,
    start: u64,
    len: u64,
    iova: u64,
    access: c_int,
    dmah: *mut bindings::ib_dmah,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    let res = (|| {
        if !dmah.is_null() {
            return Err(eopnotsupp());
        }
        // SAFETY: ib_core calls this with a live PD of our device.
        let dev = unsafe { device_of::<T, _>(pd) };
        // SAFETY: `udata` is null or the driver udata of a uverbs call on our device.
        let user = unsafe { UserCall::from_udata(udata) }.ok_or(EINVAL)?;
        let access = AccessFlags::from_raw(access as u32).ok_or(EINVAL)?;
        let made = T::Mr::reg_user_mr(dev, PdId::of(pd), start, len, iova, access, &user)?;
        Mr::<T>::into_raw(made, iova, len)
    })();
    res.unwrap_or_else(|e| e.to_ptr())
}

/// Returns null (the MR was changed in place) or an error.
///
/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn rereg_user_mr<T: Driver>(
    mr: *mut bindings::ib_mr,
    flags: c_int,
    _start: u64,
    _len: u64,
    _iova: u64,
    access: c_int,
    pd: *mut bindings::ib_pd,
    udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    let res = (|| {
        let flags = flags as u32;
        let (by_pd, by_access) = (
            bindings::ib_mr_rereg_flags_IB_MR_REREG_PD,
            bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS,
        );
        if flags & !(by_pd | by_access) != 0 {
            return Err(eopnotsupp());
        }
        // SAFETY: `udata` is null or the driver udata of a uverbs call on our device.
        let user = unsafe { UserCall::from_udata(udata) }.ok_or(EINVAL)?;
        let access = if flags & by_access != 0 {
            Some(AccessFlags::from_raw(access as u32).ok_or(EINVAL)?)
        } else {
            None
        };
        // ib_core passes the MR's own PD when the PD does not change (and takes that
        // flag back when it is the same one).
        let pd = (flags & by_pd != 0).then(|| PdId::of(pd));
        // SAFETY: ib_core calls this on a live MR of our device, with no other verb on it
        // running (it holds the MR's object for writing).
        T::Mr::rereg_user_mr(unsafe { Mr::<T>::from_raw(mr) }, pd, access, &user)?;
        Ok(core::ptr::null_mut())
    })();
    res.unwrap_or_else(|e| e.to_ptr())
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn advise_mr<T: Driver>(
    pd: *mut bindings::ib_pd,
    advice: bindings::ib_uverbs_advise_mr_advice,
    flags: u32,
    sg_list: *mut bindings::ib_sge,
    num_sge: u32,
    _attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        let advice = match advice {
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH => {
                Advice::Prefetch
            }
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE => {
                Advice::PrefetchWrite
            }
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT => {
                Advice::NoFault
            }
            _ => return Err(eopnotsupp()),
        };
        let flush = flags & bindings::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0;
        let mut sges = KVec::with_capacity(num_sge as usize, GFP_KERNEL)?;
        for i in 0..num_sge as usize {
            // SAFETY: uverbs passes `num_sge` entries it copied from the process.
            let s = unsafe { &*sg_list.add(i) };
            sges.push(
                Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                },
                GFP_KERNEL,
            )?;
        }
        // SAFETY: ib_core calls this with a live PD of our device.
        let dev = unsafe { device_of::<T, _>(pd) };
        T::Mr::advise_mr(dev, PdId::of(pd), advice, flush, &sges)?;
        Ok(0)
    })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn alloc_mr<T: Driver>(
    pd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    // Fast registration is the only kind offered (as rxe).
    if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return EINVAL.to_ptr();
    }
    // SAFETY: ib_core calls this with a live PD of our device.
    let dev = unsafe { device_of::<T, _>(pd) };
    T::Mr::alloc_mr(dev, PdId::of(pd), max_num_sg)
        .and_then(|made| Mr::<T>::into_raw(made, 0, 0))
        .unwrap_or_else(|e| e.to_ptr())
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn map_mr_sg<T: Driver>(
    mr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    nents: c_int,
    offset: *mut c_uint,
) -> c_int {
    // SAFETY: ib_core calls this on a live MR of our device, with its arguments.
    from_result(|| unsafe { Mr::<T>::from_raw(mr).map_sg(sg, nents, offset) })
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn get_dma_mr<T: Driver>(
    pd: *mut bindings::ib_pd,
    access: c_int,
) -> *mut bindings::ib_mr {
    // SAFETY: ib_core calls this with a live PD of our device.
    let dev = unsafe { device_of::<T, _>(pd) };
    // Only kernel consumers have a DMA MR: ib_core makes one for a kernel PD.
    AccessFlags::from_raw(access as u32)
        .ok_or(EINVAL)
        .and_then(|access| T::Mr::get_dma_mr(dev, PdId::of(pd), access, KernelMemory::new()))
        .and_then(|made| Mr::<T>::into_raw(made, 0, u64::MAX))
        .unwrap_or_else(|e| e.to_ptr())
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback documents.
unsafe extern "C" fn dereg_mr<T: Driver>(
    mr: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: ib_core calls this on a live MR this driver made.
    if let Err(e) = T::Mr::dereg_mr(unsafe { Mr::<T>::from_raw(mr) }) {
        return e.to_errno();
    }
    // SAFETY: The driver let it go; ib_core forgets it when this returns 0.
    unsafe { Mr::<T>::free_boxed(mr) };
    0
}
