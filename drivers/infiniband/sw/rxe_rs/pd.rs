// SPDX-License-Identifier: GPL-2.0

//! Protection domains.
//!
//! A PD holds nothing but its charge against the device's `max_pd`: it is the scope
//! objects are created in, which each check that what they name shares theirs, and
//! ib_core counts its users and refuses to free it while there are any.

use crate::param::Charge;

/// The driver's part of a protection domain.
pub(crate) struct RxePd {
    _charge: Charge,
}

impl RxePd {
    pub(crate) fn new(charge: Charge) -> Self {
        Self { _charge: charge }
    }
}
