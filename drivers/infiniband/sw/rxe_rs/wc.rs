// SPDX-License-Identifier: GPL-2.0

//! Completions as values: what the device reports of a work request that ended (its
//! status, opcode and flags, typed in `ib::verbs`), and the two forms a CQ holds it in:
//! the `struct ib_uverbs_wc` of a process's ring and the `Wc` a kernel consumer polls.
//! Producers make a [`Completion`] and post it to a CQ (see `cq`).

use crate::ib::{
    verbs::{WcFlags, WcOpcode, WcStatus},
    wr::{Wc, WcQp},
};
use crate::sw::rxe_abi::{wc as at, UVERBS_WC_LEN};
use crate::wqe::put_at;

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
    /// The VLAN a datagram arrived on, with `WcFlag::WithVlan` (for a kernel consumer,
    /// whose CM finds the GID it was sent to by it).
    pub(crate) vlan_id: u16,
    /// The QP as a kernel consumer knows it (unused for a process's CQ).
    pub(crate) wc_qp: WcQp,
}

impl Completion {
    /// The completion as a `struct ib_uverbs_wc`, which librxe copies out whole.
    pub(crate) fn to_uverbs(self) -> [u8; UVERBS_WC_LEN] {
        let mut b = [0u8; UVERBS_WC_LEN];
        put_at(&mut b, at::WR_ID, &self.wr_id.to_ne_bytes());
        put_at(&mut b, at::STATUS, &(self.status as u32).to_ne_bytes());
        put_at(&mut b, at::OPCODE, &(self.opcode as u32).to_ne_bytes());
        put_at(&mut b, at::BYTE_LEN, &self.byte_len.to_ne_bytes());
        put_at(&mut b, at::EX, &self.ex.to_ne_bytes());
        put_at(&mut b, at::QP_NUM, &self.qp_num.to_ne_bytes());
        put_at(&mut b, at::SRC_QP, &self.src_qp.to_ne_bytes());
        put_at(&mut b, at::WC_FLAGS, &self.wc_flags.to_user().to_ne_bytes());
        put_at(&mut b, at::PORT_NUM, &[self.port_num]);
        // vendor_err, pkey_index, slid, sl and dlid_path_bits stay 0.
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
            vlan_id: self.vlan_id,
        }
    }
}
