// SPDX-License-Identifier: GPL-2.0

//! The device's counters, shown per port by `rdma statistic`.

use crate::ib::stats::StatDesc;
use kernel::sync::atomic::{Atomic, Relaxed};

/// What the device counts.
#[derive(Clone, Copy)]
pub(crate) enum Counter {
    /// RoCE v2 packets received on the device's netdev.
    Received,
    /// Received packets that were dropped, for whatever reason.
    Dropped,
    /// Received packets that were not well-formed RoCE v2 (headers, lengths, opcode).
    Malformed,
    /// Received packets whose ICRC did not match.
    IcrcError,
    /// Well-formed packets that no QP could take.
    NoQp,
    /// Packets sent (to the network or to the device itself).
    Sent,
    /// Packets that could not be sent (no route, no buffer).
    SendError,
    /// Received packets a QP dropped: wrong state, Q_Key or opcode, or no receive WQE
    /// for a datagram.
    QpDropped,
    /// Times an RC requester went back to send unacknowledged packets again, for
    /// whatever reason (an acknowledgement timeout, a sequence NAK, an RNR NAK).
    Retransmit,
    /// Datagrams dropped for a Q_Key that is not the QP's (also the port's
    /// `qkey_viol_cntr`).
    QkeyViolation,
    /// Acknowledgement timeouts of RC requesters that had packets outstanding.
    AckTimeout,
    /// Sequence NAKs an RC requester received.
    RcvdSeqNak,
    /// RNR NAKs an RC requester received.
    RcvdRnrNak,
    /// RNR NAKs an RC responder sent (no receive WQE, or pages being faulted in).
    SentRnrNak,
    /// Requests an RC responder received again (answered again, never placed twice).
    DuplicateRequest,
    /// Requests an RC responder received ahead of the PSN it expected.
    OutOfSeqRequest,
    /// WQEs that completed with `RETRY_EXC_ERR`.
    RetryExceeded,
    /// WQEs that completed with `RNR_RETRY_EXC_ERR`.
    RnrRetryExceeded,
    /// Received packets dropped for a P_Key that is not the port's (also the port's
    /// `bad_pkey_cntr`).
    BadPkey,
}

/// The counters' names, in [`Counter`] order.
pub(crate) static NAMES: [StatDesc; N] = [
    StatDesc::new(c"rcvd_pkts"),
    StatDesc::new(c"rcvd_dropped"),
    StatDesc::new(c"rcvd_malformed"),
    StatDesc::new(c"rcvd_icrc_err"),
    StatDesc::new(c"rcvd_no_qp"),
    StatDesc::new(c"sent_pkts"),
    StatDesc::new(c"send_err"),
    StatDesc::new(c"rcvd_qp_dropped"),
    StatDesc::new(c"retransmits"),
    StatDesc::new(c"rcvd_qkey_viol"),
    StatDesc::new(c"ack_timeouts"),
    StatDesc::new(c"rcvd_seq_err"),
    StatDesc::new(c"rcvd_rnr_err"),
    StatDesc::new(c"send_rnr_err"),
    StatDesc::new(c"duplicate_request"),
    StatDesc::new(c"out_of_seq_request"),
    StatDesc::new(c"retry_exceeded_err"),
    StatDesc::new(c"retry_rnr_exceeded_err"),
    StatDesc::new(c"rcvd_bad_pkey"),
];

/// How many counters there are.
const N: usize = 19;

/// The device's counters.
pub(crate) struct Counters([Atomic<u64>; N]);

impl Counters {
    pub(crate) fn new() -> Self {
        Self([const { Atomic::new(0) }; N])
    }

    /// Counts one `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.0[c as usize].fetch_add(1, Relaxed);
    }

    /// The value of `c`.
    pub(crate) fn get(&self, c: Counter) -> u64 {
        self.0[c as usize].load(Relaxed)
    }

    /// Copies the counters out, as many as `out` holds.
    pub(crate) fn read(&self, out: &mut [u64]) {
        for (o, c) in out.iter_mut().zip(self.0.iter()) {
            *o = c.load(Relaxed);
        }
    }
}
