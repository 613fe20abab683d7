// SPDX-License-Identifier: GPL-2.0

//! Protection domains.
//!
//! A PD holds nothing but its charge against the device's `max_pd`: it is the scope
//! objects are created in, which each check that what they name shares theirs, and
//! ib_core counts its users and refuses to free it while there are any.

use crate::ib::object::{Charge, Quota};
use crate::ib::{device::Device, pd::PdOps, udata::Udata};
use crate::RxeRs;
use kernel::prelude::*;

/// The driver's part of a protection domain.
pub(crate) struct RxePd {
    _charge: Charge,
}

#[vtable]
impl PdOps<RxeRs> for RxePd {
    fn alloc_pd(dev: &Device<RxeRs>, _udata: Option<&Udata>) -> impl PinInit<Self, Error> {
        Quota::charge(&dev.pds).map(|charge| Self { _charge: charge })
    }
}
