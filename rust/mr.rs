// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`) and pinned user memory (`struct ib_umem`).
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)
//!
//! Unlike the other verbs objects, an MR is allocated by the driver: `reg_user_mr` and
//! `get_dma_mr` return a `struct ib_mr` that ib_core then fills in (device, PD, type,
//! user object) and hands back to `dereg_mr`, which frees it. [`Mr<T>`] is that
//! allocation, a [`KBox`] whose first field is the C struct. [`Umem`] is user memory
//! pinned with `ib_umem_get()`, released when dropped.

use super::{
    bindings,
    device::{Device, Driver},
};
use core::ptr::NonNull;
use kernel::{error::from_err_ptr, prelude::*, types::Opaque};

/// User memory pinned for a device.
///
/// # Invariants
///
/// `ptr` is an `ib_umem` from `ib_umem_get*()`, released when this value is dropped.
pub(crate) struct Umem {
    ptr: NonNull<bindings::ib_umem>,
}

// SAFETY: A umem is a description of pinned pages, usable from any thread.
unsafe impl Send for Umem {}
// SAFETY: `&Umem` only reads it.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes at the user address `addr` of the calling process for `dev`,
    /// writable by the device if `access` says so.
    pub(crate) fn get<T: Driver>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: u32,
    ) -> Result<Self> {
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: The device is live; this runs in the calling process's context.
        let raw = from_err_ptr(unsafe {
            bindings::rxe_rs_umem_get(dev.as_raw(), addr, len, access as i32)
        })?;
        // INVARIANT: A successful `ib_umem_get*()`.
        Ok(Self {
            ptr: NonNull::new(raw).ok_or(EINVAL)?,
        })
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the umem.
        unsafe { bindings::ib_umem_release(self.ptr.as_ptr()) };
    }
}

/// What a new MR reports: its keys.
pub(crate) struct MrCreated<D> {
    pub(crate) data: D,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// A memory region of driver `T`.
#[repr(C)]
pub(crate) struct Mr<T: Driver> {
    ib: Opaque<bindings::ib_mr>,
    data: T::Mr,
}

impl<T: Driver> core::ops::Deref for Mr<T> {
    type Target = T::Mr;

    fn deref(&self) -> &T::Mr {
        &self.data
    }
}

impl<T: Driver> Mr<T> {
    /// Allocates an MR around `made`, for ib_core to fill in.
    pub(super) fn into_raw(
        made: MrCreated<T::Mr>,
        iova: u64,
        length: u64,
    ) -> Result<*mut bindings::ib_mr> {
        let mr = KBox::new(
            Self {
                ib: Opaque::zeroed(),
                data: made.data,
            },
            GFP_KERNEL,
        )?;
        let raw = KBox::into_raw(mr);
        // SAFETY: Just allocated and not shared yet.
        unsafe {
            let ib = &mut *(*raw).ib.get();
            ib.lkey = made.lkey;
            ib.rkey = made.rkey;
            ib.iova = iova;
            ib.length = length;
            ib.page_size = kernel::page::PAGE_SIZE as u32;
        }
        Ok(raw.cast())
    }

    /// Frees an MR that ib_core deregisters.
    ///
    /// # Safety
    ///
    /// `mr` must come from [`Self::into_raw`] and not be used afterwards.
    pub(super) unsafe fn free(mr: *mut bindings::ib_mr) {
        // SAFETY: Per the caller; `ib` is the first field of a `repr(C)` struct.
        drop(unsafe { KBox::from_raw(mr.cast::<Self>()) });
    }
}
