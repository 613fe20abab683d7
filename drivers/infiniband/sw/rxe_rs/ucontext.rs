// SPDX-License-Identifier: GPL-2.0

//! Per-process contexts.
//!
//! A process that opens the device gets a context; later its rings are mapped through it.
//! Each context counts against the device's limit of contexts.

use crate::param::Charge;

/// The driver's part of a process's context.
pub(crate) struct RxeUcontext {
    _charge: Charge,
}

impl RxeUcontext {
    pub(crate) fn new(charge: Charge) -> Self {
        Self { _charge: charge }
    }
}
