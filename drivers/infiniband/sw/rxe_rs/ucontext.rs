// SPDX-License-Identifier: GPL-2.0

//! Per-process contexts.
//!
//! A process that opens the device gets a context; later its rings are mapped through it.
//! Each context counts against the device's limit of contexts.

use crate::ib::object::{Charge, Quota};
use crate::ib::{
    device::Device,
    ucontext::{Ucontext, UcontextOps},
    udata::Udata,
};
use crate::RxeRs;
use kernel::prelude::*;

/// The driver's part of a process's context.
pub(crate) struct RxeUcontext {
    _charge: Charge,
}

#[vtable]
impl UcontextOps<RxeRs> for RxeUcontext {
    fn alloc_ucontext(dev: &Device<RxeRs>, _udata: Option<&Udata>) -> Result<Self> {
        // librxe sends no driver data with this command and expects none back.
        Ok(Self {
            _charge: Quota::charge(&dev.ucontexts)?,
        })
    }

    fn disassociate_ucontext(_ctx: &Ucontext<RxeRs>) {
        // Nothing runs on a process's behalf outside its objects, which ib_core has
        // destroyed; the ring pages of their mappings went with the last unmapping.
    }
}
