// SPDX-License-Identifier: GPL-2.0
/*
 * QPs destroyed while a peer streams traffic at them, through stock libibverbs and librxe.
 *
 *   destroy_traffic DEVICE qp|srq   (see verbs_common.h)
 *
 * Each round connects a "victim" RC QP, its CQ and an MR of its own in this process, to
 * a "peer" RC QP in a second process (this program run again as `DEVICE peer`, on a
 * context of its own; both QPs are on the one device, whose loopback carries the
 * packets). The peer streams SEND, RDMA WRITE and RDMA READ at the victim, and the
 * victim streams RDMA WRITE and READ back at the peer; once traffic has been seen doing
 * all of that (the victim's receives completed with the peer's data, the peer's WRITEs
 * changed the victim's memory, the peer's READs returned it), the victim QP is destroyed
 * with the streams running. Right after ibv_destroy_qp returns:
 *
 *  - what the CQ holds then is drained (allowed: it completed before the destroy
 *    returned); for a second more, while the peer keeps sending at the dead QP number
 *    (its old connection retrying, then fresh connections), no completion may appear in
 *    the victim's CQ (it is the destroyed QP's alone);
 *  - the memory the peer READs is overwritten with a poison byte and then the victim's
 *    whole MR is snapshot: nothing in it may change afterwards (no WRITE, SEND or READ
 *    response lands), and no READ the peer completes may carry the poison (the destroyed
 *    QP's responder read memory after the destroy returned);
 *  - no work the peer posts after it learnt of the destroy may complete successfully
 *    (only the destroyed QP could have acknowledged it);
 *  - a fresh pair of QPs on the device still moves a SEND with its data intact.
 *
 * `qp` rounds take turns destroying the victim in RTS, in ERR (moved there under
 * traffic), in SQD (moved there under traffic, so likely still draining) and in RTR (it
 * never sent; the peer's requests still reach its responder). `srq` rounds put the
 * victim on an SRQ whose receives the SENDs consume, destroy it in RTS or ERR, then the
 * SRQ, and check the memory again after that.
 *
 * DESTROY_TRAFFIC_ROUNDS sets the rounds (20 unless told), DESTROY_TRAFFIC_WINDOW_MS the
 * time watched after each destroy (1000), DESTROY_TRAFFIC_READY_MS how long the traffic
 * may take to start in every direction (20000), DESTROY_TRAFFIC_TIMEOUT the connections'
 * ACK timeout exponent (14: 67 ms). Every loop is bounded in count and time; the
 * whole program in time by an alarm. A round takes about 1.5 s on the test kernel
 * under TCG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "verbs_common.h"

/* Buffer slots: one message each. LEN spans two packets at the path MTU of 1024. */
enum { SLOT = 2048, LEN = 1500 };
/* The victim's MR: receive buffers, the peer's WRITE and READ targets, its own READs'
 * landing slots and its WRITE source. */
enum { NRECV = 64, NWRITE = 16, NREAD = 16, NLAND = 8 };
enum {
	OFF_RECV = 0,
	OFF_WRITE = OFF_RECV + NRECV * SLOT,
	OFF_READ = OFF_WRITE + NWRITE * SLOT,
	OFF_LAND = OFF_READ + NREAD * SLOT,
	OFF_SRC = OFF_LAND + NLAND * SLOT,
	VBUF = OFF_SRC + SLOT,
};
/* The peer's MR: its send sources, its READs' landing slots, the victim's target. */
enum { PWIN = 16, NTARGET = 8 };
enum { P_SRC = 0, P_LAND = PWIN * SLOT, P_TARGET = 2 * PWIN * SLOT, PBUF = P_TARGET + NTARGET * SLOT };
/* Work in flight: the peer's window, the victim's own; RDMA READs at once each way. */
enum { VWIN = 8, RD_ATOMIC = 4 };
/* Successes of each kind seen before the destroy: the proof traffic ran. */
enum { ENOUGH = 6 };
/* The destroyed QP's bytes for the peer's READs once it is gone. Never in the pattern. */
enum { POISON = 0xee };
/* Bounds: waiting for traffic, the peer's own life, its restarts. */
enum { PEER_LIFE_S = 90, PEER_RESTARTS = 400 };
/* How long traffic may take to start (DESTROY_TRAFFIC_READY_MS overrides). */
static int ready_ms = 20000;
/* The connections' ACK timeout exponent (DESTROY_TRAFFIC_TIMEOUT overrides). */
static int qp_timeout = 14;

static int window_ms = 1000;
static const char *self_exe = "/proc/self/exe";

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The READ targets' contents: a function of the offset in the region, below 0x80. */
static uint8_t pattern(size_t off)
{
	return (off * 13 + 7) & 0x7f;
}

/* The words of a SEND or WRITE the peer makes: all one stamp, never zero. */
static uint32_t stamp(uint32_t round, uint64_t seq)
{
	return 0x80000000u | (round & 0x7ff) << 20 | (seq & 0xfffff);
}

static void fill_stamp(uint8_t *p, uint32_t s)
{
	for (int i = 0; i < LEN / 4; i++)
		memcpy(p + 4 * i, &s, 4);
}

/* 0 if the LEN bytes at p are one stamp throughout. */
static int check_stamp(const uint8_t *p)
{
	uint32_t s, w;

	memcpy(&s, p, 4);
	if (!(s & 0x80000000u))
		return -1;
	for (int i = 1; i < LEN / 4; i++) {
		memcpy(&w, p + 4 * i, 4);
		if (w != s)
			return -1;
	}
	return 0;
}

/* The RoCE v2 GID of an IPv4 address (::ffff:a.b.c.d) on port 1, or -1. */
static int roce_v2_ipv4_gid(struct ibv_context *ctx, union ibv_gid *gid)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return roce_v2_gid_like(ctx, prefix, sizeof(prefix), gid);
}

struct path {
	union ibv_gid gid;
	int gid_index;
};

/*
 * RESET -> INIT -> RTR (-> RTS unless `rtr_only`): an RC QP connected to `dest` on this
 * device, RDMA READ and WRITE allowed to the peer. Returns 0 or an errno.
 */
static int connect_rc(struct ibv_qp *qp, const struct path *p, uint32_t dest, uint32_t rq_psn,
		      uint32_t sq_psn, int timeout, int retry, int rtr_only)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	int ret;

	if ((ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					      IBV_QP_ACCESS_FLAGS)))
		return ret;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest,
		.rq_psn = rq_psn,
		.max_dest_rd_atomic = RD_ATOMIC,
		/* 0.01 ms: a sender that met an empty receive queue is back at once. */
		.min_rnr_timer = 1,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = p->gid, .sgid_index = p->gid_index, .hop_limit = 64 } },
	};
	if ((ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		return ret;
	if (rtr_only)
		return 0;
	a = (struct ibv_qp_attr){
		.qp_state = IBV_QPS_RTS,
		.sq_psn = sq_psn,
		.timeout = timeout,
		.retry_cnt = retry,
		/* Receivers never run dry here; 7 retries RNR for ever. */
		.rnr_retry = 7,
		.max_rd_atomic = RD_ATOMIC,
	};
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_MAX_QP_RD_ATOMIC);
}

/* A QP's state and PSNs as the device reports them, for diagnostics. */
static void describe_qp(const char *who, struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia))
		fprintf(stderr, "  %s QP %u: query failed\n", who, qp->qp_num);
	else
		fprintf(stderr, "  %s QP %u: state %d, next PSN to send %#x, next PSN expected %#x\n",
			who, qp->qp_num, a.qp_state, a.sq_psn, a.rq_psn);
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* Reads exactly len bytes within ms milliseconds; 0, or -1 (timeout, EOF, error). */
static int read_full(int fd, void *buf, size_t len, int ms)
{
	double end = now() + ms / 1e3;
	size_t got = 0;

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)((end - now()) * 1e3);
		ssize_t n;

		if (left < 0 || poll(&p, 1, left) != 1)
			return -1;
		n = read(fd, (char *)buf + got, len - got);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return -1;
		if (n > 0)
			got += n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	return write(fd, buf, len) == (ssize_t)len ? 0 : -1;
}

/* What the victim tells the peer, and the peer the victim, before the streams start. */
struct victim_hello {
	uint32_t qpn, psn, rkey, round;
	uint64_t write_addr, read_addr;
};

struct peer_hello {
	uint32_t qpn, psn, rkey;
	uint64_t target_addr;
};

/* The victim's commands, one byte each: go, destroyed, stop. The peer's: ready, stats. */
enum { CMD_GO = 'G', CMD_DESTROYED = 'D', CMD_STOP = 'S', MSG_READY = 'R', MSG_STATS = 'T' };

enum { K_SEND, K_WRITE, K_READ };
static const char *const kind_name[] = { "SEND", "WRITE", "READ" };

/* The peer's account, sent when it is told to stop. */
struct peer_stats {
	uint32_t ok[3];		/* successful completions of each kind */
	uint32_t posted, posted_after_d;
	uint32_t ok_after_d;	/* posted after the destroy, yet acknowledged: wrong */
	int32_t first_ok_after_d_kind;
	uint32_t poison_reads;	/* READs that returned the poison: wrong */
	uint32_t bad_reads;	/* READs that returned neither pattern nor poison: wrong */
	uint32_t errors, restarts;
	uint32_t status[32];	/* error completions by status */
	uint32_t stuck;		/* work still outstanding when it gave up waiting */
	uint32_t outstanding_at_d;	/* in flight when it learnt of the destroy */
	/* Completions out of order or for work not outstanding (RC completes each in order,
	 * once): the first few, as (expected wr_id, wr_id, status, seconds since the
	 * destroy if it knew of it, else since its start). */
	uint32_t disorder;
	struct { uint64_t want, got; int32_t status, after_d; double t; } odd[4];
	double d_seen, first_err_after_d;	/* seconds since its start */
	double ready_at;	/* when it had seen enough of each kind */
	/* The longest wait for a completion with work outstanding before the destroy,
	 * when it ended, and how much was outstanding. */
	double gap_max, gap_end;
	uint32_t gap_outstanding;
	double post_max, poll_max;	/* the longest ibv_post_send and ibv_poll_cq calls */
};

/* ---- The peer (a process of its own: fd 3 reads commands, fd 4 writes reports) ---- */

static struct peer {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct path path;
	struct victim_hello vh;
	struct peer_stats st;
	uint64_t seq, done, d_seq;
	int broken, stop;
	double t0, d_time, last_wc;
} P;

static int peer_post(void)
{
	uint64_t seq = P.seq;
	int kind = seq % 3, slot = seq % PWIN;
	struct ibv_sge sge = { .length = LEN, .lkey = P.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = seq, .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	switch (kind) {
	case K_SEND:
	case K_WRITE:
		sge.addr = (uintptr_t)(P.buf + P_SRC + slot * SLOT);
		fill_stamp(P.buf + P_SRC + slot * SLOT, stamp(P.vh.round, seq));
		wr.opcode = kind == K_SEND ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = P.vh.write_addr + (seq % NWRITE) * SLOT;
		wr.wr.rdma.rkey = P.vh.rkey;
		break;
	default:
		sge.addr = (uintptr_t)(P.buf + P_LAND + slot * SLOT);
		memset(P.buf + P_LAND + slot * SLOT, 0, LEN);
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = P.vh.read_addr + (seq % NREAD) * SLOT;
		wr.wr.rdma.rkey = P.vh.rkey;
		break;
	}
	double t = now();
	int ret = ibv_post_send(P.qp, &wr, &bad);

	if (now() - t > P.st.post_max)
		P.st.post_max = now() - t;
	if (ret)
		return -1;
	P.seq++;
	P.st.posted++;
	if (P.seq > P.d_seq)
		P.st.posted_after_d++;
	return 0;
}

static void peer_complete(const struct ibv_wc *wc)
{
	uint64_t seq = wc->wr_id;
	int kind = seq % 3;

	if (!P.d_time) {
		double t = now();

		if (t - P.last_wc > P.st.gap_max) {
			P.st.gap_max = t - P.last_wc;
			P.st.gap_end = t - P.t0;
			P.st.gap_outstanding = P.seq - P.done;
		}
		P.last_wc = t;
	}
	if (seq != P.done) {
		if (P.st.disorder < 4) {
			P.st.odd[P.st.disorder].want = P.done;
			P.st.odd[P.st.disorder].got = seq;
			P.st.odd[P.st.disorder].status = wc->status;
			P.st.odd[P.st.disorder].after_d = P.d_time > 0;
			P.st.odd[P.st.disorder].t = now() - (P.d_time ? P.d_time : P.t0);
		}
		P.st.disorder++;
		/* Not outstanding: account for nothing, or the window would run wrong. */
		if (seq < P.done || seq >= P.seq)
			return;
	}
	P.done++;
	if (wc->status != IBV_WC_SUCCESS) {
		P.st.errors++;
		P.st.status[wc->status < 32 ? wc->status : 31]++;
		if (P.d_time && !P.st.first_err_after_d)
			P.st.first_err_after_d = now() - P.t0;
		P.broken = 1;
		return;
	}
	P.st.ok[kind]++;
	if (seq >= P.d_seq && P.st.ok_after_d++ == 0)
		P.st.first_ok_after_d_kind = kind;
	if (kind == K_READ) {
		const uint8_t *got = P.buf + P_LAND + (seq % PWIN) * SLOT;
		size_t base = (seq % NREAD) * SLOT;
		int poison = 0, bad = 0;

		for (int i = 0; i < LEN; i++) {
			if (got[i] == POISON)
				poison = 1;
			else if (got[i] != pattern(base + i))
				bad = 1;
		}
		P.st.poison_reads += poison;
		P.st.bad_reads += bad && !poison;
	}
}

/* Commands from the victim, without waiting. EOF means stop. */
static void peer_commands(void)
{
	char c;
	ssize_t n;

	while ((n = read(3, &c, 1)) == 1) {
		if (c == CMD_DESTROYED && !P.d_time) {
			P.d_time = now();
			P.d_seq = P.seq;
			P.st.d_seen = P.d_time - P.t0;
			P.st.outstanding_at_d = P.seq - P.done;
		} else if (c == CMD_STOP) {
			P.stop = 1;
		}
	}
	if (n == 0)
		P.stop = 1;
}

/*
 * After an error everything outstanding has been flushed: the QP goes back through
 * RESET and streams again at the same QP number, from where its PSNs were, with a
 * short timeout and one retry, so it gives up and comes back quickly.
 */
static int peer_restart(void)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	uint32_t sq_psn = 0, rq_psn = 0;

	if (!ibv_query_qp(P.qp, &a, IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia)) {
		sq_psn = a.sq_psn;
		rq_psn = a.rq_psn;
	}
	if (to_state(P.qp, IBV_QPS_RESET) ||
	    connect_rc(P.qp, &P.path, P.vh.qpn, rq_psn, sq_psn, 10, 1, 0))
		return -1;
	P.broken = 0;
	P.st.restarts++;
	return 0;
}

static int peer_main(void)
{
	struct ibv_wc wc[32];
	struct peer_hello ph;
	char c;
	int ready = 0, stalls = 0;

	P.t0 = now();
	P.d_seq = UINT64_MAX;
	P.st.first_ok_after_d_kind = -1;
	signal(SIGPIPE, SIG_IGN);
	if (read_full(3, &P.vh, sizeof(P.vh), 10000))
		FAIL("peer: no hello from the victim");
	if (!(P.ctx = open_dev()))
		FAIL("peer: cannot open %s: %s", dev_name, strerror(errno));
	if ((P.path.gid_index = roce_v2_ipv4_gid(P.ctx, &P.path.gid)) < 0)
		FAIL("peer: no RoCE v2 IPv4 GID");
	if (posix_memalign((void **)&P.buf, 4096, PBUF))
		FAIL("peer: no memory");
	memset(P.buf, 0, PBUF);
	P.pd = ibv_alloc_pd(P.ctx);
	P.cq = P.pd ? ibv_create_cq(P.ctx, 256, NULL, NULL, 0) : NULL;
	P.mr = P.cq ? ibv_reg_mr(P.pd, P.buf, PBUF, IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) : NULL;
	struct ibv_qp_init_attr qa = { .send_cq = P.cq, .recv_cq = P.cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = PWIN, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	if (!P.mr || !(P.qp = ibv_create_qp(P.pd, &qa)))
		FAIL("peer: setup: %s", strerror(errno));
	ph = (struct peer_hello){ .qpn = P.qp->qp_num, .psn = 0x2000 + P.vh.round,
				  .rkey = P.mr->rkey,
				  .target_addr = (uintptr_t)(P.buf + P_TARGET) };
	if (write_full(4, &ph, sizeof(ph)))
		FAIL("peer: cannot write its hello");
	if (read_full(3, &c, 1, 10000) || c != CMD_GO)
		FAIL("peer: no go from the victim");
	/* 67 ms and 7 retries: slow guests do not break the first connection. */
	if (connect_rc(P.qp, &P.path, P.vh.qpn, P.vh.psn, ph.psn, qp_timeout, 7, 0))
		FAIL("peer: connect: %s", strerror(errno));
	fcntl(3, F_SETFL, fcntl(3, F_GETFL) | O_NONBLOCK);
	P.last_wc = now();

	while (!P.stop && now() - P.t0 < PEER_LIFE_S) {
		int n, idle = 1;

		peer_commands();
		/*
		 * 200 ms after the destroy the old connection has retried at the dead QP
		 * for a while: break it, so that fresh connections send fresh requests.
		 */
		if (P.d_time && !P.st.restarts && !P.broken && now() - P.d_time > 0.2) {
			to_state(P.qp, IBV_QPS_ERR);
			P.broken = 1;
		}
		while (!P.broken && P.seq - P.done < PWIN && !peer_post())
			idle = 0;
		double t = now();

		n = ibv_poll_cq(P.cq, 32, wc);
		if (now() - t > P.st.poll_max)
			P.st.poll_max = now() - t;
		if (n < 0)
			FAIL("peer: ibv_poll_cq failed");
		for (int i = 0; i < n; i++)
			peer_complete(&wc[i]);
		if (n)
			idle = 0;
		if (P.broken && P.done >= P.seq) {
			if (P.st.restarts >= PEER_RESTARTS)
				usleep(1000);
			else if (peer_restart())
				FAIL("peer: restart: %s", strerror(errno));
		}
		if (!ready && P.st.ok[K_SEND] >= ENOUGH && P.st.ok[K_WRITE] >= ENOUGH &&
		    P.st.ok[K_READ] >= ENOUGH) {
			c = MSG_READY;
			write_full(4, &c, 1);
			ready = 1;
			P.st.ready_at = now() - P.t0;
		}
		/* Work outstanding and nothing back for 2 s: say so (a few times). */
		if (!P.d_time && P.seq != P.done && now() - P.last_wc > 2 * (stalls + 1) &&
		    stalls < 8) {
			stalls++;
			fprintf(stderr, "  peer, %.1f s in: nothing completed for %.1f s; %llu in flight "
				"(first wr_id %llu, a %s); %u SEND %u WRITE %u READ ok\n",
				now() - P.t0, now() - P.last_wc,
				(unsigned long long)(P.seq - P.done), (unsigned long long)P.done,
				kind_name[P.done % 3], P.st.ok[0], P.st.ok[1], P.st.ok[2]);
			describe_qp("peer", P.qp);
		}
		if (!P.d_time && P.seq != P.done && now() - P.last_wc < 2)
			stalls = 0;
		if (idle)
			usleep(200);
	}
	/* Stop: flush what is left and account for it (bounded). */
	to_state(P.qp, IBV_QPS_ERR);
	for (double end = now() + 5; P.done < P.seq && now() < end;) {
		int n = ibv_poll_cq(P.cq, 32, wc);

		for (int i = 0; i < n; i++)
			peer_complete(&wc[i]);
		if (n <= 0)
			usleep(1000);
	}
	P.st.stuck = P.done < P.seq ? P.seq - P.done : 0;
	c = MSG_STATS;
	if (write_full(4, &c, 1) || write_full(4, &P.st, sizeof(P.st)))
		return 1;
	if (ibv_destroy_qp(P.qp) || ibv_dereg_mr(P.mr) || ibv_destroy_cq(P.cq) ||
	    ibv_dealloc_pd(P.pd) || ibv_close_device(P.ctx))
		FAIL("peer: teardown: %s", strerror(errno));
	return 0;
}

/* ---- The victim ---- */

enum variant { V_RTS, V_ERR, V_SQD, V_RTR };
static const char *const variant_name[] = { "RTS", "ERR", "SQD", "RTR" };

static struct victim {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf, *snap;
	struct path path;
	struct peer_hello ph;
	int to_peer, from_peer;
	pid_t pid;
	/* What may be posted now: receives, its own WRITEs and READs. */
	int post_recv, post_own;
	uint64_t own_seq, own_done;
	/* Before the destroy: receives with the peer's data, its own successes, errors. */
	unsigned recvs, bad_recvs, own_ok[2], errors, peer_ready;
} V;

static int post_recv(int slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(V.buf + OFF_RECV + slot * SLOT),
			       .length = SLOT, .lkey = V.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return V.srq ? ibv_post_srq_recv(V.srq, &wr, &bad) : ibv_post_recv(V.qp, &wr, &bad);
}

/* The victim's own work: WRITEs into the peer's target, READs back from it. */
static int post_own(void)
{
	uint64_t seq = V.own_seq;
	struct ibv_sge sge = { .length = LEN, .lkey = V.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1ull << 32 | seq, .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = V.ph.target_addr + (seq % NTARGET) * SLOT;
	wr.wr.rdma.rkey = V.ph.rkey;
	if (seq % 2) {
		wr.opcode = IBV_WR_RDMA_READ;
		sge.addr = (uintptr_t)(V.buf + OFF_LAND + (seq % NLAND) * SLOT);
	} else {
		wr.opcode = IBV_WR_RDMA_WRITE;
		sge.addr = (uintptr_t)(V.buf + OFF_SRC);
	}
	if (ibv_post_send(V.qp, &wr, &bad))
		return -1;
	V.own_seq++;
	return 0;
}

static void victim_complete(const struct ibv_wc *wc)
{
	if (wc->wr_id >> 32) {
		V.own_done++;
		if (wc->status == IBV_WC_SUCCESS)
			V.own_ok[(wc->wr_id & 0xffffffff) % 2]++;
		else
			V.errors++;
		return;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		V.errors++;
		return;
	}
	if (wc->opcode != IBV_WC_RECV || wc->byte_len != LEN ||
	    check_stamp(V.buf + OFF_RECV + wc->wr_id * SLOT))
		V.bad_recvs++;
	else
		V.recvs++;
	/* Clear it, so that a receive landing after the destroy would show. */
	memset(V.buf + OFF_RECV + wc->wr_id * SLOT, 0, SLOT);
	if (V.post_recv)
		post_recv(wc->wr_id);
}

/* The peer's WRITEs have reached the victim's memory. */
static int writes_landed(void)
{
	for (int i = 0; i < NWRITE * SLOT; i++)
		if (V.buf[OFF_WRITE + i])
			return 1;
	return 0;
}

static int traffic_seen(void)
{
	return V.peer_ready && V.recvs >= ENOUGH && writes_landed() &&
	       (!V.post_own || (V.own_ok[0] >= ENOUGH && V.own_ok[1] >= ENOUGH));
}

/*
 * Runs the victim's side for up to `ms` milliseconds: polls its CQ, reposts, keeps its
 * own work going, listens for the peer. With `until_seen`, returns 1 as soon as traffic
 * has been seen in every direction. -1 on a failure.
 */
static int pump(int ms, int until_seen)
{
	double end = now() + ms / 1e3;
	struct ibv_wc wc[32];
	char c;

	while (now() < end) {
		int n, idle = 1;

		while (read(V.from_peer, &c, 1) == 1)
			if (c == MSG_READY)
				V.peer_ready = 1;
		while (V.post_own && V.own_seq - V.own_done < VWIN) {
			if (post_own())
				return -1;
			idle = 0;
		}
		n = ibv_poll_cq(V.cq, 32, wc);
		if (n < 0)
			return -1;
		for (int i = 0; i < n; i++)
			victim_complete(&wc[i]);
		if (n)
			idle = 0;
		if (until_seen && traffic_seen())
			return 1;
		if (idle)
			usleep(200);
	}
	return 0;
}

/* Starts the peer: this program again, fd 3 for commands, fd 4 for its reports. */
static int start_peer(void)
{
	int cmd[2], rep[2];

	if (pipe(cmd) || pipe(rep))
		FAIL("pipe: %s", strerror(errno));
	fflush(stderr);
	V.pid = fork();
	if (V.pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (V.pid == 0) {
		char *argv[] = { "destroy_traffic", (char *)dev_name, "peer", NULL };

		/* Out of the way first: the pipes' own numbers may be 3 or 4. */
		int in = fcntl(cmd[0], F_DUPFD, 10), out = fcntl(rep[1], F_DUPFD, 10);

		if (in < 0 || out < 0 || dup2(in, 3) < 0 || dup2(out, 4) < 0)
			_exit(1);
		/* Nothing of the victim's (device files, rings, pipes) goes along. */
		for (int fd = 5; fd < 1024; fd++)
			close(fd);
		execv(self_exe, argv);
		_exit(127);
	}
	close(cmd[0]);
	close(rep[1]);
	V.to_peer = cmd[1];
	V.from_peer = rep[0];
	return 0;
}

static void stop_peer(void)
{
	if (V.pid > 0) {
		kill(V.pid, SIGKILL);
		waitpid(V.pid, NULL, 0);
	}
	V.pid = 0;
	if (V.to_peer > 0)
		close(V.to_peer);
	if (V.from_peer > 0)
		close(V.from_peer);
	V.to_peer = V.from_peer = -1;
}

/* Where the peer process is (state, system call, kernel stack), for diagnostics. */
static void describe_peer(void)
{
	static const char *const files[] = { "stat", "syscall", "stack" };
	char path[64], line[256];

	for (int f = 0; f < 3; f++) {
		FILE *in;

		snprintf(path, sizeof(path), "/proc/%d/%s", (int)V.pid, files[f]);
		if (!(in = fopen(path, "r")))
			continue;
		for (int n = 0; n < 12 && fgets(line, sizeof(line), in); n++)
			fprintf(stderr, "  peer %s: %s%s", files[f], line,
				strchr(line, '\n') ? "" : "\n");
		fclose(in);
	}
}

/* The peer's account after a stop: its stats, then its exit (its teardown destroys its
 * QP, CQ, MR and PD and closes the device: `exit_s` says how long that took). */
static int peer_account(struct peer_stats *st, double *exit_s)
{
	char c = 0;
	int status;
	double t0;

	fcntl(V.from_peer, F_SETFL, fcntl(V.from_peer, F_GETFL) & ~O_NONBLOCK);
	for (int i = 0; i < 4 && c != MSG_STATS; i++)
		if (read_full(V.from_peer, &c, 1, 15000))
			FAIL("the peer did not report (died or hung)");
	if (c != MSG_STATS || read_full(V.from_peer, st, sizeof(*st), 5000))
		FAIL("the peer's report is garbled");
	t0 = now();
	for (int i = 0; i < 2000; i++) {
		pid_t w = waitpid(V.pid, &status, WNOHANG);

		if (w == V.pid) {
			V.pid = 0;
			*exit_s = now() - t0;
			if (!WIFEXITED(status) || WEXITSTATUS(status))
				FAIL("the peer exited with status %#x", status);
			return 0;
		}
		usleep(10000);
	}
	describe_peer();
	FAIL("the peer did not exit within 20 s of its report (its teardown hangs)");
}

/* Where in the victim's MR an offset is. */
static const char *region(size_t off)
{
	return off < OFF_WRITE ? "receive buffers" : off < OFF_READ ? "WRITE target" :
	       off < OFF_LAND ? "READ source" : off < OFF_SRC ? "own READ landing" : "own WRITE source";
}

/* The first offset where the MR differs from its snapshot, or -1. */
static long changed_at(void)
{
	for (long i = 0; i < VBUF; i++)
		if (V.buf[i] != V.snap[i])
			return i;
	return -1;
}

/* Polls the CQ of the destroyed QP for ms milliseconds: nothing may come. */
static int watch_cq(int ms, uint32_t qpn, const char *when)
{
	double end = now() + ms / 1e3;
	struct ibv_wc wc[16];
	int n, late = 0;

	do {
		n = ibv_poll_cq(V.cq, 16, wc);
		if (n < 0)
			FAIL("ibv_poll_cq failed %s", when);
		for (int i = 0; i < n; i++, late++)
			fprintf(stderr, "  completion %s: qp_num %u (destroyed %u) status %d opcode %d "
				"wr_id %#llx byte_len %u\n", when, wc[i].qp_num, qpn, wc[i].status,
				wc[i].opcode, (unsigned long long)wc[i].wr_id, wc[i].byte_len);
		usleep(1000);
	} while (now() < end && late < 64);
	if (late)
		FAIL("%d completion(s) appeared %s", late, when);
	return 0;
}

/* A fresh pair of QPs on the device moves a SEND with its data intact. */
static int fresh_pair_works(void)
{
	static uint8_t sbuf[LEN], rbuf[SLOT];
	struct ibv_pd *pd = ibv_alloc_pd(V.ctx);
	struct ibv_cq *cq = ibv_create_cq(V.ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 2, .max_recv_wr = 2,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *a = NULL, *b = NULL;
	struct ibv_mr *mr;
	struct ibv_wc wc[2];
	int got = 0;

	if (!pd || !cq || !(mr = ibv_reg_mr(pd, sbuf, sizeof(sbuf), 0)) ||
	    !(a = ibv_create_qp(pd, &qa)) || !(b = ibv_create_qp(pd, &qa)))
		FAIL("fresh pair: setup: %s", strerror(errno));
	struct ibv_mr *rmr = ibv_reg_mr(pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	if (!rmr || connect_rc(a, &V.path, b->qp_num, 1, 1, 14, 7, 0) ||
	    connect_rc(b, &V.path, a->qp_num, 1, 1, 14, 7, 0))
		FAIL("fresh pair: connect: %s", strerror(errno));
	fill_stamp(sbuf, stamp(0x7ff, 0x5a5a5));
	memset(rbuf, 0, sizeof(rbuf));
	struct ibv_sge rs = { .addr = (uintptr_t)rbuf, .length = SLOT, .lkey = rmr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 2, .sg_list = &rs, .num_sge = 1 }, *rbad;
	struct ibv_sge ss = { .addr = (uintptr_t)sbuf, .length = LEN, .lkey = mr->lkey };
	struct ibv_send_wr sw = { .wr_id = 1, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *sbad;
	if (ibv_post_recv(b, &rw, &rbad) || ibv_post_send(a, &sw, &sbad))
		FAIL("fresh pair: post: %s", strerror(errno));
	for (double end = now() + 10; got < 2 && now() < end;) {
		int n = ibv_poll_cq(cq, 2 - got, wc + got);

		if (n < 0)
			FAIL("fresh pair: ibv_poll_cq failed");
		got += n;
		if (got < 2)
			usleep(1000);
	}
	if (got < 2)
		FAIL("fresh pair: %d of 2 completions within 10 s", got);
	for (int i = 0; i < 2; i++)
		if (wc[i].status != IBV_WC_SUCCESS)
			FAIL("fresh pair: completion of wr_id %llu: status %d",
			     (unsigned long long)wc[i].wr_id, wc[i].status);
	if (memcmp(rbuf, sbuf, LEN))
		FAIL("fresh pair: the SEND arrived with other data");
	if (ibv_destroy_qp(a) || ibv_destroy_qp(b) || ibv_dereg_mr(mr) || ibv_dereg_mr(rmr) ||
	    ibv_destroy_cq(cq) || ibv_dealloc_pd(pd))
		FAIL("fresh pair: teardown: %s", strerror(errno));
	return 0;
}

static void print_peer(const struct peer_stats *st)
{
	fprintf(stderr, "  peer: %u SEND, %u WRITE, %u READ ok; posted %u, %u after it learnt of "
		"the destroy (%.2f s in), %u restarts, errors %u:", st->ok[0], st->ok[1],
		st->ok[2], st->posted, st->posted_after_d, st->d_seen, st->restarts, st->errors);
	for (int s = 0; s < 32; s++)
		if (st->status[s])
			fprintf(stderr, " %s %u", ibv_wc_status_str(s), st->status[s]);
	fprintf(stderr, "; first error after the destroy %.2f s in; %u in flight when it learnt "
		"of the destroy\n", st->first_err_after_d, st->outstanding_at_d);
	fprintf(stderr, "  peer: ready %.2f s in; longest wait for a completion before the "
		"destroy %.3f s (ended %.2f s in, %u in flight); longest ibv_post_send %.3f s, "
		"ibv_poll_cq %.3f s\n", st->ready_at, st->gap_max, st->gap_end,
		st->gap_outstanding, st->post_max, st->poll_max);
	for (unsigned int i = 0; i < st->disorder && i < 4; i++)
		fprintf(stderr, "  peer: %s of wr_id %llu (%s) when %llu was the next due, "
			"%.3f s after %s\n",
			st->odd[i].got < st->odd[i].want ? "a second completion" : "a completion",
			(unsigned long long)st->odd[i].got, ibv_wc_status_str(st->odd[i].status),
			(unsigned long long)st->odd[i].want, st->odd[i].t,
			st->odd[i].after_d ? "it learnt of the destroy" : "its start");
}

static double max_destroy_ms;

static int round_body(int round, enum variant var, int use_srq)
{
	struct victim_hello vh;
	struct peer_stats st;
	uint32_t qpn;
	double t0 = now(), t_destroy, t_back, exit_s = 0;
	struct ibv_wc drained[16];
	int at_return = 0, ret;
	long off;
	char c;

	V.recvs = V.bad_recvs = V.own_ok[0] = V.own_ok[1] = V.errors = V.peer_ready = 0;
	V.own_seq = V.own_done = 0;
	V.srq = NULL;
	memset(V.buf, 0, VBUF);
	for (size_t i = 0; i < NREAD * SLOT; i++)
		V.buf[OFF_READ + i] = pattern(i);
	fill_stamp(V.buf + OFF_SRC, stamp(round, 0xfffff));
	if (!(V.pd = ibv_alloc_pd(V.ctx)) || !(V.cq = ibv_create_cq(V.ctx, 256, NULL, NULL, 0)) ||
	    !(V.mr = ibv_reg_mr(V.pd, V.buf, VBUF, IBV_ACCESS_LOCAL_WRITE |
				IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)))
		FAIL("setup: %s", strerror(errno));
	if (use_srq) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = NRECV, .max_sge = 1 } };

		if (!(V.srq = ibv_create_srq(V.pd, &sa)))
			FAIL("ibv_create_srq: %s", strerror(errno));
	}
	struct ibv_qp_init_attr qa = { .send_cq = V.cq, .recv_cq = V.cq, .srq = V.srq,
				       .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = VWIN, .max_recv_wr = use_srq ? 0 : NRECV,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	if (!(V.qp = ibv_create_qp(V.pd, &qa)))
		FAIL("ibv_create_qp: %s", strerror(errno));
	qpn = V.qp->qp_num;

	if (start_peer())
		return 1;
	vh = (struct victim_hello){ .qpn = qpn, .psn = 0x1000 + round, .rkey = V.mr->rkey,
				    .round = round,
				    .write_addr = (uintptr_t)(V.buf + OFF_WRITE),
				    .read_addr = (uintptr_t)(V.buf + OFF_READ) };
	if (write_full(V.to_peer, &vh, sizeof(vh)) ||
	    read_full(V.from_peer, &V.ph, sizeof(V.ph), 30000))
		FAIL("no hello from the peer");
	if ((ret = connect_rc(V.qp, &V.path, V.ph.qpn, V.ph.psn, vh.psn, qp_timeout, 7, var == V_RTR)))
		FAIL("connect: %s", strerror(ret));
	V.post_recv = 1;
	for (int i = 0; i < NRECV; i++)
		if ((ret = post_recv(i)))
			FAIL("post receive %d: %s", i, strerror(ret));
	V.post_own = var != V_RTR;
	c = CMD_GO;
	fcntl(V.from_peer, F_SETFL, fcntl(V.from_peer, F_GETFL) | O_NONBLOCK);
	if (write_full(V.to_peer, &c, 1))
		FAIL("the peer is gone before the streams started");

	/* Until traffic has been seen in every direction; what it has seen every 2 s. */
	for (int waited = 0; (ret = pump(2000, 1)) == 0 && (waited += 2000) < ready_ms;) {
		fprintf(stderr, "  victim, %d s in: %u receives (%u bad), own %u WRITE %u READ ok, "
			"errors %u, WRITEs landed %d, peer ready %u\n", waited / 1000, V.recvs,
			V.bad_recvs, V.own_ok[0], V.own_ok[1], V.errors, writes_landed(),
			V.peer_ready);
		describe_qp("victim", V.qp);
		describe_peer();
	}
	if (ret < 0)
		FAIL("the victim's traffic failed before the destroy");
	if (ret == 0) {
		fprintf(stderr, "  victim: %u receives (%u bad), own %u WRITE %u READ ok, errors %u, "
			"WRITEs landed %d, peer ready %u\n", V.recvs, V.bad_recvs, V.own_ok[0],
			V.own_ok[1], V.errors, writes_landed(), V.peer_ready);
		FAIL("round %d (%s): no traffic in every direction within %d s", round,
		     variant_name[var], ready_ms / 1000);
	}
	/* The variants' last moves, the streams still running. */
	if (var == V_ERR || var == V_SQD) {
		V.post_own = 0;
		V.post_recv = 0;
		if ((ret = to_state(V.qp, var == V_ERR ? IBV_QPS_ERR : IBV_QPS_SQD)))
			FAIL("to %s: %s", variant_name[var], strerror(ret));
		if (pump(50, 0) < 0)
			FAIL("polling in %s failed", variant_name[var]);
	}
	V.post_own = V.post_recv = 0;

	t_destroy = now();
	if ((ret = ibv_destroy_qp(V.qp)))
		FAIL("round %d (%s): ibv_destroy_qp: %s", round, variant_name[var], strerror(ret));
	t_back = now();
	V.qp = NULL;
	/* What the CQ holds as the destroy returns completed before it: drained, allowed. */
	for (int n = 1; n > 0 && at_return < 1024; at_return += n > 0 ? n : 0)
		n = ibv_poll_cq(V.cq, 16, drained);
	memset(V.buf + OFF_READ, POISON, NREAD * SLOT);
	memcpy(V.snap, V.buf, VBUF);
	c = CMD_DESTROYED;
	write_full(V.to_peer, &c, 1);

	ret = watch_cq(window_ms, qpn, "after the destroy returned");
	c = CMD_STOP;
	write_full(V.to_peer, &c, 1);
	if (ret)
		return 1;
	if (peer_account(&st, &exit_s))
		return 1;
	if (V.srq) {
		if ((ret = ibv_destroy_srq(V.srq)))
			FAIL("ibv_destroy_srq after its QP: %s", strerror(ret));
		V.srq = NULL;
		if (watch_cq(200, qpn, "after the SRQ was destroyed"))
			return 1;
	}
	if (t_back - t_destroy > max_destroy_ms / 1e3)
		max_destroy_ms = (t_back - t_destroy) * 1e3;
	fprintf(stderr, "round %d (%s%s): before the destroy %u receives, own %u WRITE %u READ ok, "
		"%u errors; destroy took %.1f ms; %d completions drained as it returned; "
		"peer's teardown %.2f s; round %.2f s\n", round, variant_name[var],
		use_srq ? ", SRQ" : "", V.recvs, V.own_ok[0], V.own_ok[1], V.errors,
		(t_back - t_destroy) * 1e3, at_return, exit_s, now() - t0);
	print_peer(&st);

	if (V.bad_recvs)
		FAIL("%u receives before the destroy did not hold the peer's SEND", V.bad_recvs);
	if ((off = changed_at()) >= 0)
		FAIL("the victim's memory changed after the destroy returned: offset %ld (%s), "
		     "%#x -> %#x", off, region(off), V.snap[off], V.buf[off]);
	if (st.poison_reads)
		FAIL("%u of the peer's READs returned memory written after the destroy",
		     st.poison_reads);
	if (st.bad_reads)
		FAIL("%u of the peer's READs returned data that was never there", st.bad_reads);
	if (st.ok_after_d)
		FAIL("%u of the peer's requests posted after the destroy were acknowledged "
		     "(first a %s)", st.ok_after_d, kind_name[st.first_ok_after_d_kind]);
	if (!st.d_seen || !st.posted_after_d || !st.errors)
		FAIL("the peer did not keep sending at the destroyed QP (learnt of it: %d, "
		     "posted after: %u, errors: %u)", st.d_seen > 0, st.posted_after_d, st.errors);
	if (st.disorder)
		FAIL("the peer's QP (not the destroyed one) completed work twice or out of order "
		     "%u times", st.disorder);
	if (st.stuck)
		FAIL("%u of the peer's requests never completed, not even flushed", st.stuck);

	if (ibv_dereg_mr(V.mr) || ibv_destroy_cq(V.cq) || ibv_dealloc_pd(V.pd))
		FAIL("teardown: %s", strerror(errno));
	V.mr = NULL;
	V.cq = NULL;
	V.pd = NULL;
	stop_peer();
	return fresh_pair_works();
}

static void on_alarm(int sig)
{
	static const char msg[] = "destroy_traffic: out of time\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	if (V.pid > 0)
		kill(V.pid, SIGKILL);
	_exit(1);
}

static int run_rounds(struct ibv_context *ctx, int use_srq)
{
	const char *env = getenv("DESTROY_TRAFFIC_ROUNDS");
	int rounds = env ? atoi(env) : 20;
	double t0 = now();

	if (rounds < 1 || rounds > 10000)
		FAIL("DESTROY_TRAFFIC_ROUNDS=%s", env);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	/*
	 * A backstop for hangs only: rounds take 1.5 s on the test kernel under TCG and 2 to
	 * 20 s on the debug kernel; each wait of a round has its own bound.
	 */
	alarm(60 + 30 * rounds + rounds * window_ms / 1000);
	V.ctx = ctx;
	V.to_peer = V.from_peer = -1;
	if ((V.path.gid_index = roce_v2_ipv4_gid(ctx, &V.path.gid)) < 0)
		SKIP("no RoCE v2 GID of an IPv4 address on port 1");
	if (posix_memalign((void **)&V.buf, 4096, VBUF) || !(V.snap = malloc(VBUF)))
		FAIL("no memory");
	for (int r = 0; r < rounds; r++) {
		enum variant var = use_srq ? (r % 2 ? V_ERR : V_RTS) : (enum variant)(r % 4);

		if (round_body(r, var, use_srq)) {
			fprintf(stderr, "round %d (%s%s) failed\n", r, variant_name[var],
				use_srq ? ", SRQ" : "");
			stop_peer();
			return 1;
		}
	}
	fprintf(stderr, "%d rounds in %.1f s, longest destroy %.1f ms\n", rounds, now() - t0,
		max_destroy_ms);
	return 0;
}

static int check_qp(struct ibv_context *ctx) { return run_rounds(ctx, 0); }
static int check_srq(struct ibv_context *ctx) { return run_rounds(ctx, 1); }

static const struct check checks[] = {
	{ "qp", check_qp },
	{ "srq", check_srq },
	/* The peer process the others start; not a check on its own. */
	{ "peer", NULL, peer_main },
	{ NULL }
};

int main(int argc, char **argv)
{
	const char *w = getenv("DESTROY_TRAFFIC_WINDOW_MS");
	const char *r = getenv("DESTROY_TRAFFIC_READY_MS");
	const char *t = getenv("DESTROY_TRAFFIC_TIMEOUT");

	if (w && atoi(w) > 0)
		window_ms = atoi(w);
	if (r && atoi(r) > 0)
		ready_ms = atoi(r);
	if (t && atoi(t) > 0 && atoi(t) < 32)
		qp_timeout = atoi(t);
	return run_check(argc, argv, checks);
}
