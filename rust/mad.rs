// SPDX-License-Identifier: GPL-2.0

//! Management datagrams a device answers itself (`process_mad`): the performance
//! management agent (PMA, IBA 16.1) of its ports, whose counters ib_core shows under
//! `ports/N/counters/` in sysfs and tools such as perfquery read.
//!
//! ib_core asks with MADs it made (sysfs), and the MAD layer with every MAD that arrives
//! on a port's GSI QP, from anyone on the network (the counters are readable from there,
//! as a PMA's are). The request is copied out once and only its header and port select
//! are read. Only a GET or a SET of the PMA's class (version 1) gets an answer: a GET of
//! the class's description or of the port counters gets them, anything else a response
//! with a status that says why (clearing the counters with a SET is not offered; another
//! class version, port or attribute is refused). Every other MAD, responses above all
//! (two agents must never answer each other), goes on to the MAD layer's agents
//! unanswered.
//!
//! C header: [`include/rdma/ib_pma.h`](srctree/include/rdma/ib_pma.h)

use super::bindings;
use super::device::{Device, Driver};
use core::mem::size_of;
use kernel::{ffi::c_int, transmute::AsBytes};

/// The version of the PMA's class this agent speaks (IBA 16.1.1).
const PMA_CLASS_VERSION: u8 = 1;

/// A port's counters as its PMA reports them: totals since the device was made. Each is
/// reported as wide as its field is, stopping at all ones instead of wrapping (IBA
/// 16.1.3.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PmaCounters {
    /// Times the port's link went down.
    pub(crate) link_downed: u64,
    /// Bytes sent (reported in 4-byte words, as the counters count).
    pub(crate) xmit_bytes: u64,
    /// Bytes received (reported in 4-byte words).
    pub(crate) rcv_bytes: u64,
    /// Packets sent.
    pub(crate) xmit_packets: u64,
    /// Packets received.
    pub(crate) rcv_packets: u64,
}

/// What the answer to a MAD is.
enum Answer {
    /// Not for the PMA: the MAD layer goes on with it.
    Pass,
    /// For the PMA of a port the device does not have.
    Fail,
    /// A response is sent: the PMA's answer, or one with a status.
    Reply,
}

// SAFETY: `__packed`: no padding, no interior mutability.
unsafe impl AsBytes for bindings::ib_pma_portcounters {}
// SAFETY: As above.
unsafe impl AsBytes for bindings::ib_pma_portcounters_ext {}
// SAFETY: Its fields follow each other at their natural alignment (its size, checked
// below, is the sum of theirs): no padding; no interior mutability.
unsafe impl AsBytes for bindings::ib_class_port_info {}

/// Bytes of a PMA MAD's data, where its attribute is.
const DATA_LEN: usize =
    size_of::<bindings::ib_pma_mad>() - core::mem::offset_of!(bindings::ib_pma_mad, data);

const _: () = {
    assert!(size_of::<bindings::ib_class_port_info>() == 72);
    // ib_core hands a MAD in a `struct ib_mad`: a PMA MAD is the same size.
    assert!(size_of::<bindings::ib_pma_mad>() == size_of::<bindings::ib_mad>());
};

/// Makes `out` a response to `req` with status `status` (network order) and no data.
fn respond(out: &mut bindings::ib_pma_mad, req: &bindings::ib_pma_mad, status: u16) -> Answer {
    *out = bindings::ib_pma_mad {
        mad_hdr: req.mad_hdr,
        ..Default::default()
    };
    out.mad_hdr.method = bindings::RXE_RS_MGMT_METHOD_GET_RESP;
    out.mad_hdr.status = status;
    Answer::Reply
}

/// Makes `out` a response to `req` with `attr` as its data.
fn respond_with<A: AsBytes>(
    out: &mut bindings::ib_pma_mad,
    req: &bindings::ib_pma_mad,
    attr: A,
) -> Answer {
    respond(out, req, 0);
    let bytes = attr.as_bytes();
    // The attributes answered with fit (a build error otherwise).
    const { assert!(size_of::<A>() <= DATA_LEN) };
    out.data[..bytes.len()].copy_from_slice(bytes);
    Answer::Reply
}

/// `v`, or all ones if it does not fit in 32 bits.
fn sat32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The PMA's answer to `req` on port `port`, with `counters` of that port (`None` if
/// the device has no such port); a response is made in `out`.
fn answer(
    req: &bindings::ib_pma_mad,
    port: u32,
    counters: impl FnOnce() -> Option<PmaCounters>,
    out: &mut bindings::ib_pma_mad,
) -> Answer {
    let unsupported = bindings::RXE_RS_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB;
    let h = req.mad_hdr;
    if h.mgmt_class != bindings::RXE_RS_MGMT_CLASS_PERF_MGMT
        || (h.method != bindings::RXE_RS_MGMT_METHOD_GET
            && h.method != bindings::RXE_RS_MGMT_METHOD_SET)
    {
        return Answer::Pass;
    }
    let Some(c) = counters() else {
        return Answer::Fail;
    };
    if h.class_version != PMA_CLASS_VERSION {
        return respond(out, req, bindings::RXE_RS_MGMT_MAD_STATUS_BAD_VERSION);
    }
    if h.method == bindings::RXE_RS_MGMT_METHOD_SET {
        return respond(out, req, unsupported);
    }
    // The port the counters' request selects (0: the port it came in on, or that
    // ib_core asked about), echoed; all ports at once (0xff) is not offered.
    let port_select = req.data[1];
    let other_port = port_select != 0 && u32::from(port_select) != port;
    match h.attr_id {
        bindings::RXE_RS_PMA_CLASS_PORT_INFO => respond_with(
            out,
            req,
            bindings::ib_class_port_info {
                base_version: bindings::RXE_RS_MGMT_BASE_VERSION,
                class_version: PMA_CLASS_VERSION,
                capability_mask: bindings::RXE_RS_PMA_CLASS_CAP_EXT_WIDTH,
                ..Default::default()
            },
        ),
        bindings::RXE_RS_PMA_PORT_COUNTERS | bindings::RXE_RS_PMA_PORT_COUNTERS_EXT
            if other_port =>
        {
            respond(
                out,
                req,
                bindings::RXE_RS_MGMT_MAD_STATUS_INVALID_ATTRIB_VALUE,
            )
        }
        bindings::RXE_RS_PMA_PORT_COUNTERS => respond_with(
            out,
            req,
            bindings::ib_pma_portcounters {
                port_select,
                link_downed_counter: u8::try_from(c.link_downed).unwrap_or(u8::MAX),
                port_xmit_data: sat32(c.xmit_bytes / 4).to_be(),
                port_rcv_data: sat32(c.rcv_bytes / 4).to_be(),
                port_xmit_packets: sat32(c.xmit_packets).to_be(),
                port_rcv_packets: sat32(c.rcv_packets).to_be(),
                ..Default::default()
            },
        ),
        bindings::RXE_RS_PMA_PORT_COUNTERS_EXT => respond_with(
            out,
            req,
            bindings::ib_pma_portcounters_ext {
                port_select,
                port_xmit_data: (c.xmit_bytes / 4).to_be(),
                port_rcv_data: (c.rcv_bytes / 4).to_be(),
                port_xmit_packets: c.xmit_packets.to_be(),
                port_rcv_packets: c.rcv_packets.to_be(),
                ..Default::default()
            },
        ),
        _ => respond(out, req, unsupported),
    }
}

/// Fills in the ops table's `process_mad` for a driver that reports PMA counters.
pub(super) fn set_ops<T: Driver>(ops: &mut bindings::ib_device_ops) {
    if T::HAS_PMA_COUNTERS {
        ops.process_mad = Some(process_mad::<T>);
    }
}

/// # Safety
///
/// Only for ib_core, through `struct ib_device_ops`, with the arguments that callback
/// documents.
unsafe extern "C" fn process_mad<T: Driver>(
    ib: *mut bindings::ib_device,
    _flags: c_int,
    port: u32,
    _in_wc: *const bindings::ib_wc,
    _in_grh: *const bindings::ib_grh,
    in_mad: *const bindings::ib_mad,
    out_mad: *mut bindings::ib_mad,
    out_mad_size: *mut usize,
    _out_mad_pkey_index: *mut u16,
) -> c_int {
    const SUCCESS: c_int = bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS as c_int;
    const REPLY: c_int = bindings::ib_mad_result_IB_MAD_RESULT_REPLY as c_int;
    const FAILURE: c_int = bindings::ib_mad_result_IB_MAD_RESULT_FAILURE as c_int;
    // SAFETY: ib_core calls this on a device of `T` (the ops are set after its data is
    // initialised; sysfs asks while the device is being registered).
    let dev = unsafe { Device::<T>::from_raw(ib) };
    // SAFETY: Every caller hands a whole, initialised MAD buffer of at least a `struct
    // ib_mad` (as large as a PMA MAD, checked above): sysfs a zeroed `struct ib_mad`, the
    // receive path a zeroed buffer of the port's MAD size, the local path for
    // directed-route SMPs a send buffer of that size. It is not written during the call;
    // copied out once, with no alignment assumed.
    let req = unsafe { in_mad.cast::<bindings::ib_pma_mad>().read_unaligned() };
    let mut out = bindings::ib_pma_mad::default();
    match answer(&req, port, || T::pma_counters(dev, port), &mut out) {
        Answer::Pass => SUCCESS,
        Answer::Fail => FAILURE,
        Answer::Reply => {
            // SAFETY: `out_mad_size` is valid for the call and says how large
            // `out_mad` is.
            if unsafe { *out_mad_size } < size_of::<bindings::ib_pma_mad>() {
                return FAILURE;
            }
            // SAFETY: `out_mad` is writable for at least that many bytes (just checked),
            // with no alignment assumed.
            unsafe { out_mad.cast::<bindings::ib_pma_mad>().write_unaligned(out) };
            SUCCESS | REPLY
        }
    }
}
