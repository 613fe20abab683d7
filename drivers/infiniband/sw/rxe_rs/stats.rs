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
    /// for a datagram, or one too small for it.
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
    /// Bytes of the packets counted in [`Counter::Sent`], from the IP header through the
    /// ICRC (rxe's `sent_bytes`).
    SentBytes,
    /// Bytes of the received packets that passed the device's checks (well-formed, ICRC
    /// and P_Key), from the IP header through the ICRC (rxe's `rcvd_bytes`).
    RcvdBytes,
    /// SEND work requests (with immediate or invalidate too) that completed
    /// successfully, signaled or not (rxe's `rdma_sends`).
    RdmaSends,
    /// Receive work requests that completed successfully (rxe's `rdma_recvs`).
    RdmaRecvs,
    /// Times the port went down with its netdev (rxe's `link_downed`).
    LinkDowned,
    /// Response packets (acknowledgements, READ and atomic responses) an RC requester
    /// took to process (rxe's `ack_deferred`, which counts the same packets as rxe
    /// queues them to its completer).
    AckDeferred,
    /// Times an RC requester went back to send its unacknowledged packets again for an
    /// acknowledgement timeout or a sequence NAK, RNR NAKs left out (rxe's
    /// `completer_retry_err`).
    CompleterRetry,
    /// Received unicast datagrams dropped because their destination address is not a
    /// GID of the netdev they arrived on (an address of another VLAN or netdev, which
    /// the IP stack delivers to any local address).
    NotOurGid,
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
    StatDesc::new(c"sent_bytes"),
    StatDesc::new(c"rcvd_bytes"),
    StatDesc::new(c"rdma_sends"),
    StatDesc::new(c"rdma_recvs"),
    StatDesc::new(c"link_downed"),
    StatDesc::new(c"ack_deferred"),
    StatDesc::new(c"completer_retry_err"),
    StatDesc::new(c"rcvd_not_our_gid"),
];

/// How many counters there are.
const N: usize = 27;
const _: () = assert!(Counter::NotOurGid as usize + 1 == N && NAMES.len() == N);

/// The device's counters.
pub(crate) struct Counters([Atomic<u64>; N]);

impl Counters {
    pub(crate) fn new() -> Self {
        Self([const { Atomic::new(0) }; N])
    }

    /// Counts one `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// Counts `n` of `c` (a counter wraps at 2^64, as the kernel's do).
    pub(crate) fn add(&self, c: Counter, n: u64) {
        self.0[c as usize].fetch_add(n, Relaxed);
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
