// SPDX-License-Identifier: GPL-2.0

//! Per-port counters that `rdma statistic` shows (`struct rdma_hw_stats`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A driver names its counters once, in a static array of [`StatDesc`]; ib_core
//! allocates the values for each port and asks the driver to fill them in when someone
//! reads them.

use super::bindings;
use kernel::str::{as_char_ptr_in_const_context, CStr};

/// The name of one counter.
#[repr(transparent)]
pub(crate) struct StatDesc(bindings::rdma_stat_desc);

// SAFETY: The description only points to a static string; nothing writes it.
unsafe impl Sync for StatDesc {}

impl StatDesc {
    /// A counter named `name`.
    pub(crate) const fn new(name: &'static CStr) -> Self {
        Self(bindings::rdma_stat_desc {
            name: as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }

    /// The array as ib_core takes it.
    pub(super) fn as_raw(descs: &'static [StatDesc]) -> *const bindings::rdma_stat_desc {
        descs.as_ptr().cast()
    }
}
