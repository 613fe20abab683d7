// SPDX-License-Identifier: GPL-2.0

//! Completions as values: what the device reports of a work request that ended (its
//! status, opcode and flags, typed in `ib::verbs`), and the two forms a CQ holds it in:
//! the `struct ib_uverbs_wc` of a process's ring and the `Wc` a kernel consumer polls.
//! Producers make a [`Completion`] and post it to a CQ (see `cq`).

use crate::ib::{
    verbs::{WcFlags, WcOpcode, WcStatus},
    wr::{Wc, WcQp},
};

/// Bytes of a user completion (`struct ib_uverbs_wc`), which librxe copies out whole.
pub(crate) const UVERBS_WC_LEN: usize = 48;

/// One completion, as the device produces it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Completion {
    pub(crate) wr_id: u64,
    pub(crate) status: WcStatus,
    pub(crate) opcode: WcOpcode,
    pub(crate) byte_len: u32,
    /// Immediate data (network order) or the invalidated rkey.
    pub(crate) ex: u32,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
    pub(crate) wc_flags: WcFlags,
    pub(crate) port_num: u8,
    /// The QP as a kernel consumer knows it (unused for a process's CQ).
    pub(crate) wc_qp: WcQp,
}

impl Completion {
    /// The completion as a `struct ib_uverbs_wc`, which librxe copies out whole.
    pub(crate) fn to_uverbs(self) -> [u8; UVERBS_WC_LEN] {
        let mut b = [0u8; UVERBS_WC_LEN];
        b[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        b[8..12].copy_from_slice(&(self.status as u32).to_ne_bytes());
        b[12..16].copy_from_slice(&(self.opcode as u32).to_ne_bytes());
        // vendor_err (16..20) stays 0.
        b[20..24].copy_from_slice(&self.byte_len.to_ne_bytes());
        b[24..28].copy_from_slice(&self.ex.to_ne_bytes());
        b[28..32].copy_from_slice(&self.qp_num.to_ne_bytes());
        b[32..36].copy_from_slice(&self.src_qp.to_ne_bytes());
        b[36..40].copy_from_slice(&self.wc_flags.to_user().to_ne_bytes());
        // pkey_index (40..42), slid (42..44), sl (44) and dlid_path_bits (45) stay 0.
        b[46] = self.port_num;
        b
    }

    /// The completion as a kernel consumer gets it.
    pub(crate) fn to_kernel(self) -> Wc {
        Wc {
            wr_id: self.wr_id,
            status: self.status,
            opcode: self.opcode,
            byte_len: self.byte_len,
            qp: self.wc_qp,
            ex: self.ex,
            src_qp: self.src_qp,
            wc_flags: self.wc_flags,
            pkey_index: 0,
            port_num: self.port_num.into(),
        }
    }
}
