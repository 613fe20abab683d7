// SPDX-License-Identifier: GPL-2.0

//! Address handles.
//!
//! An AH is an address vector with a number: librxe puts the number (`ah_num`) in each
//! UD work request, and the device looks the address up by it when it sends. Numbers
//! are 1 to 32767, never 0 (librxe takes 0 to mean "no number": it would then copy the
//! whole address into every work request). Kernel consumers may create and destroy AHs
//! in atomic context, so nothing here sleeps on that path.
//!
//! [`check_av`] checks an address vector, an AH's and a QP's alike.

use crate::ib::object::{Charge, Quota};
use crate::ib::{
    ah::{Ah, AhOps},
    device::Device,
    pd::PdId,
    qp::{AddressVector, NetworkType},
    ucontext::UserCall,
};
use crate::param;
use crate::sw::rxe_abi::create_ah_resp;
use crate::table::{IdTable, Number, Numbered};
use crate::wqe::put_at;
use crate::RxeRs;
use kernel::{alloc::Flags, prelude::*, sync::Arc};

/// The lowest and one above the highest AH number.
const FIRST_AH_NUM: u32 = 1;
const AH_NUM_LIMIT: u32 = 1 << 15;

/// The device's table of AH numbers.
pub(crate) type AhTable = IdTable<AhShared>;

/// A new AH table.
pub(crate) fn ah_table() -> impl PinInit<AhTable, Error> {
    IdTable::new(FIRST_AH_NUM, AH_NUM_LIMIT)
}

/// What the device looks up by number when it sends.
pub(crate) struct AhShared {
    num: Number,
    /// The AH's PD: a work request may name it only from a QP of the same PD (the
    /// number is the process's to write, and names any AH of the device).
    pd: PdId,
    av: AddressVector,
}

impl AhShared {
    /// The address, for a QP of PD `pd`: `None` for another PD's AH.
    pub(crate) fn av_for(&self, pd: PdId) -> Option<&AddressVector> {
        (self.pd == pd).then_some(&self.av)
    }
}

impl Numbered for AhShared {
    // A UD send copies the address vector out under the table's lock.
    const WAITED_FOR: bool = false;

    fn number(&self) -> &Number {
        &self.num
    }
}

/// The driver's part of an address handle.
pub(crate) struct RxeAh {
    shared: Arc<AhShared>,
    table: Arc<AhTable>,
    _charge: Charge,
}

/// Checks an address vector (of a QP or an AH): RoCE needs a GRH with a RoCE v2 source
/// GID.
pub(crate) fn check_av(av: &AddressVector) -> Result {
    if !av.has_grh
        || u32::from(av.sgid_index) >= param::PORT_GID_TBL_LEN
        || !matches!(av.network, Some(NetworkType::Ipv4 | NetworkType::Ipv6))
        || av.port_num != crate::param::PORT
    {
        return Err(EINVAL);
    }
    Ok(())
}

/// `av` with its destination noted if that is one of the device's own GIDs: packets to
/// it go through the device's loopback queue whatever the source GID (two addresses of
/// one netdev, a netdev's and its VLAN's), as on the destination's VLAN (see `xmit`).
/// The IP stack would hand them to the loopback netdev, which no device receives on.
pub(crate) fn with_own_dest(dev: &Device<RxeRs>, av: &AddressVector) -> AddressVector {
    AddressVector {
        dgid_own: dev.own_gid(&av.dgid),
        ..*av
    }
}

impl RxeAh {
    pub(crate) fn create(
        ahs: &Arc<Quota>,
        table: &Arc<AhTable>,
        (pd, av): (PdId, &AddressVector),
        may_sleep: bool,
        user: Option<&UserCall<'_, RxeRs>>,
    ) -> Result<Self> {
        check_av(av)?;
        let gfp: Flags = if may_sleep { GFP_KERNEL } else { GFP_ATOMIC };
        let charge = Quota::charge(ahs)?;
        let shared = Arc::new(
            AhShared {
                num: Number::new(),
                pd,
                av: *av,
            },
            gfp,
        )?;
        let num = table.insert(&shared, gfp)?;
        let ah = Self {
            shared,
            table: table.clone(),
            _charge: charge,
        };
        if let Some(user) = user {
            // `struct rxe_create_ah_resp`, for a provider that left room for it.
            if user.udata.out_len() >= create_ah_resp::LEN {
                let mut resp = [0u8; create_ah_resp::LEN];
                put_at(&mut resp, create_ah_resp::AH_NUM, &num.to_ne_bytes());
                user.udata.respond(&resp)?;
            }
        }
        Ok(ah)
    }

    pub(crate) fn av(&self) -> AddressVector {
        self.shared.av
    }

    /// The AH's number, as work requests name it.
    pub(crate) fn num(&self) -> u32 {
        self.shared.num.get()
    }
}

impl Drop for RxeAh {
    fn drop(&mut self) {
        self.table.remove(self.shared.num.get());
    }
}

#[vtable]
impl AhOps<RxeRs> for RxeAh {
    fn create_ah(
        dev: &Device<RxeRs>,
        pd: PdId,
        av: &AddressVector,
        may_sleep: bool,
        user: Option<&UserCall<'_, RxeRs>>,
    ) -> Result<Self> {
        let av = with_own_dest(dev, av);
        Self::create(&dev.ahs, &dev.ah_table, (pd, &av), may_sleep, user)
    }

    fn query_ah(ah: &Ah<RxeRs>) -> AddressVector {
        ah.av()
    }
}
