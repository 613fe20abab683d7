// SPDX-License-Identifier: GPL-2.0
/*
 * Bounded work per context: nothing a process or a peer sends may keep a CPU in a system
 * call, a bottom half or an RCU read-side section for an unbounded time.
 *
 *   hostile_budget DEVICE CHECK   (see verbs_common.h)
 *
 * feed_ud, feed_uc, feed_rc_local: two threads post to one QP without pause for
 * BUDGET_FEED_S seconds (default 5): 1 KiB UD SENDs to the QP itself, 16 KiB UC RDMA
 * WRITEs into its own MR, or RC local operations (a type 2 memory window bound and
 * invalidated again; they take no send window), in lists of 128 WRs of which the last
 * is signaled. The ring is filled up before the QP is moved to RTS (its doorbell fails
 * until then; requeue_refused puts back what the driver dropped), so that the first
 * doorbell finds it full. librxe writes a thread's WQEs
 * into the ring under the QP's lock and rings the doorbell (a write to the device file)
 * after releasing it, so while one thread's doorbell is in the kernel the other
 * thread's WQEs keep appearing in the ring: a requester without a budget that looks at
 * the ring's producer index again after each WQE keeps that one call in the kernel for
 * as long as the other thread posts. Both threads poll the CQ; neither the ring nor the
 * CQ can fill (see BATCH). RC local operations cost the requester so little that
 * librxe's posting does not keep up with it: there one thread writes the WQEs straight
 * into the mapped ring, without a doorbell, and the other only rings the doorbell (the
 * command librxe sends), each call timed.
 * Asserts: the longest ibv_post_send call, less the times the whole guest was stopped
 * meanwhile (see note_tick), returns within BUDGET_CALL_MS (3000, well below the 5 s
 * the posting lasts, which an unbounded requester keeps one call for: a call on rxe
 * was seen to take 0.75 s on a busy host, and one on rxe_rs 1.8 s, preempted by the
 * work item that went on with its QP's work at nice -20; the 99th percentile is printed
 * too), every signaled WR completes (within BUDGET_DRAIN_S, 60, after the posting), in
 * order and successfully, and no CPU was held for longer than BUDGET_GAP_MS (1000)
 * while another ran (see the tickers).
 *
 * big_read: one RDMA READ of BUDGET_READ_MB MiB (256) through an RC QP connected to
 * itself, the data checked against the pattern it was read from, while another RC QP
 * of the device ping-pongs 64-byte SENDs with itself, from the READ's post to 3 s after
 * its completion (work left behind, such as responses to a retried request, must not
 * starve it either). Asserts: the READ completes within BUDGET_READ_S (300) with the
 * data right, every ping-pong round trip takes at most BUDGET_RTT_MS (2000; less the
 * guest's stops, as above), and no CPU was held longer than BUDGET_GAP_MS while another
 * ran. The guest has 2 GiB: the two buffers of 256 MiB fit, pinned, with room for the
 * packets in flight.
 *
 * Tickers: a thread pinned to each CPU, SCHED_FIFO when allowed, wakes every 10 ms and
 * records the longest time between two wakeups, and the longest such gap during which
 * another CPU's ticker went on ticking (what is asserted: a pause of the whole machine,
 * a busy host under TCG, is no stall of one CPU). Only a CPU in a context that cannot be
 * preempted (a bottom half, a section with preemption off) keeps its ticker from running.
 *
 * local_ops_behind_send: window binds behind a SEND nobody answers (see its function).
 *
 * The stall detectors' verdict (kernel log) is checked by guest-tests.sh around each
 * run. Every loop here is bounded in count and time; an alarm ends the process if a
 * call never returns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>
#include "verbs_common.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double env_num(const char *name, double dflt)
{
	const char *v = getenv(name);

	return v && *v ? atof(v) : dflt;
}

static void on_alarm(int sig)
{
	static const char msg[] = "alarm: a call did not return in time\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(1);
}

static void arm_alarm(double seconds)
{
	signal(SIGALRM, on_alarm);
	alarm((unsigned int)seconds + 1);
}

/* ---- Durations ---- */

/* A call or round trip longer than PAUSE_MS, kept to take the guest's stops out. */
struct slow {
	double t0, t1;
};

/* Longer than the 100 ms turns TCG gives each CPU of the guest. */
enum { PAUSE_MS = 250, MAX_SLOW = 256 };

struct samples {
	float *v;
	size_t n, cap;
	/* The longest of all, of those up to PAUSE_MS, and of the longer ones not kept. */
	double max, max_short, max_unkept;
	struct slow slow[MAX_SLOW];
	int n_slow;
};

static void sample_add(struct samples *s, double t0, double t1)
{
	double sec = t1 - t0;

	if (sec > s->max)
		s->max = sec;
	if (sec <= PAUSE_MS / 1e3 && sec > s->max_short)
		s->max_short = sec;
	else if (sec > PAUSE_MS / 1e3 && s->n_slow < MAX_SLOW)
		s->slow[s->n_slow++] = (struct slow){ t0, t1 };
	else if (sec > s->max_unkept)
		s->max_unkept = sec;
	if (!s->v && !(s->v = malloc((s->cap = 1 << 20) * sizeof(*s->v))))
		s->cap = 0;
	if (s->n < s->cap)
		s->v[s->n++] = (float)sec;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* The p-quantile (0..1) of `n` sorted values. */
static double quantile(const float *v, size_t n, double p)
{
	size_t i = (size_t)(p * (double)n);

	return n ? v[i < n ? i : n - 1] : 0;
}

/* Merges and sorts two sample sets; prints count, p50, p99 and max in ms. */
static void report(const char *what, struct samples *a, struct samples *b)
{
	size_t n = a->n + (b ? b->n : 0);
	float *all = malloc((n ? n : 1) * sizeof(*all));
	double max = b && b->max > a->max ? b->max : a->max;

	if (!all) {
		fprintf(stderr, "%s: %zu, max %.1f ms\n", what, n, max * 1e3);
		return;
	}
	if (a->n)
		memcpy(all, a->v, a->n * sizeof(*all));
	if (b && b->n)
		memcpy(all + a->n, b->v, b->n * sizeof(*all));
	qsort(all, n, sizeof(*all), cmp_float);
	fprintf(stderr, "%s: %zu, p50 %.3f ms, p99 %.3f ms, max %.1f ms\n", what, n,
		quantile(all, n, 0.5) * 1e3, quantile(all, n, 0.99) * 1e3, max * 1e3);
	free(all);
}

/* ---- Tickers: one thread per CPU ---- */

enum { MAX_CPUS = 16, TICK_MS = 10 };

struct ticker {
	pthread_t th;
	int cpu, pinned, fifo;
	/* The longest gap between two ticks, and the longest while another CPU ticked. */
	double max_gap, max_alone;
};

static struct ticker tickers[MAX_CPUS];
static int n_tickers;
static atomic_int tick_stop;
static atomic_long ticks[MAX_CPUS];

/*
 * Stops of the whole guest: times longer than PAUSE_MS in which no CPU ticked. Under
 * TCG a busy host stops the guest for seconds at times (every CPU's ticker gaps at
 * once, up to 19 s seen); a call or round trip that spans such a stop is judged on its
 * duration without it. Both CPUs held in a bottom half at once would look the same:
 * the RCU stall detector and the held-CPU bound are there for that.
 */
enum { MAX_PAUSES = 4096 };
static struct slow pauses[MAX_PAUSES];
static int n_pauses;
static double last_tick;
static pthread_mutex_t pause_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_tick(double t1)
{
	pthread_mutex_lock(&pause_lock);
	if (last_tick && t1 - last_tick > PAUSE_MS / 1e3 && n_pauses < MAX_PAUSES)
		pauses[n_pauses++] = (struct slow){ last_tick, t1 };
	if (t1 > last_tick)
		last_tick = t1;
	pthread_mutex_unlock(&pause_lock);
}

/* How much of [t0, t1] the guest was stopped. */
static double stopped_in(double t0, double t1)
{
	double sum = 0;

	pthread_mutex_lock(&pause_lock);
	for (int i = 0; i < n_pauses; i++) {
		double a = pauses[i].t0 > t0 ? pauses[i].t0 : t0;
		double b = pauses[i].t1 < t1 ? pauses[i].t1 : t1;

		if (b > a)
			sum += b - a;
	}
	pthread_mutex_unlock(&pause_lock);
	return sum;
}

/* The longest of `s` with the guest's stops taken out. */
static double longest_running(const struct samples *s)
{
	double worst = s->max_short > s->max_unkept ? s->max_short : s->max_unkept;

	for (int i = 0; i < s->n_slow; i++) {
		double d = s->slow[i].t1 - s->slow[i].t0 -
			   stopped_in(s->slow[i].t0, s->slow[i].t1);

		if (d > worst)
			worst = d;
	}
	return worst;
}

static double guest_stopped(void)
{
	double sum = 0;

	pthread_mutex_lock(&pause_lock);
	for (int i = 0; i < n_pauses; i++)
		sum += pauses[i].t1 - pauses[i].t0;
	pthread_mutex_unlock(&pause_lock);
	return sum;
}

/*
 * A gap of one CPU's ticker during which another CPU's ticker ticked n times is a time
 * of at least (n - 1) ticks that this CPU alone could not run its ticker: the machine as
 * a whole was not paused (under TCG, by a busy host) but this CPU was held.
 */
static void *tick_run(void *arg)
{
	struct ticker *t = arg;
	struct sched_param sp = { .sched_priority = 50 };
	long seen[MAX_CPUS];
	cpu_set_t set;
	double last, end;

	CPU_ZERO(&set);
	CPU_SET(t->cpu, &set);
	t->pinned = !pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	t->fifo = !pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	last = now();
	end = last + 3600;
	while (!atomic_load(&tick_stop) && last < end) {
		struct timespec ts = { 0, TICK_MS * 1000 * 1000 };
		long most = 0;
		double t1;

		for (int i = 0; i < n_tickers; i++)
			seen[i] = atomic_load(&ticks[i]);
		nanosleep(&ts, NULL);
		t1 = now();
		note_tick(t1);
		atomic_fetch_add(&ticks[t - tickers], 1);
		for (int i = 0; i < n_tickers; i++)
			if (&tickers[i] != t && atomic_load(&ticks[i]) - seen[i] > most)
				most = atomic_load(&ticks[i]) - seen[i];
		if (t1 - last > t->max_gap)
			t->max_gap = t1 - last;
		if (most > 1 && (most - 1) * TICK_MS / 1e3 > t->max_alone)
			t->max_alone = (most - 1) * TICK_MS / 1e3;
		last = t1;
	}
	return NULL;
}

static void tickers_start(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	atomic_store(&tick_stop, 0);
	n_pauses = 0;
	last_tick = 0;
	n_tickers = cpus < MAX_CPUS ? cpus : MAX_CPUS;
	for (int c = 0; c < n_tickers; c++) {
		tickers[c] = (struct ticker){ .cpu = c };
		atomic_store(&ticks[c], 0);
	}
	for (int c = 0; c < n_tickers; c++)
		if (pthread_create(&tickers[c].th, NULL, tick_run, &tickers[c])) {
			fprintf(stderr, "no ticker for cpu %d\n", c);
			tickers[c].th = 0;
		}
}

/*
 * Stops the tickers, prints their longest gaps; returns the longest time a CPU was held
 * while another ran.
 */
static double tickers_stop(void)
{
	double worst = 0;

	atomic_store(&tick_stop, 1);
	for (int i = 0; i < n_tickers; i++) {
		if (!tickers[i].th)
			continue;
		pthread_join(tickers[i].th, NULL);
		fprintf(stderr, "cpu %d: longest gap between %d ms ticks %.1f ms, "
			"while another CPU ticked %.0f ms%s%s\n",
			tickers[i].cpu, TICK_MS, tickers[i].max_gap * 1e3, tickers[i].max_alone * 1e3,
			tickers[i].pinned ? "" : " (not pinned)",
			tickers[i].fifo ? " (SCHED_FIFO)" : " (SCHED_OTHER)");
		if (tickers[i].max_alone > worst)
			worst = tickers[i].max_alone;
	}
	fprintf(stderr, "the whole guest stopped %d times, %.1f s in all\n", n_pauses,
		guest_stopped());
	return worst;
}

/* ---- QPs ---- */

static const uint32_t QKEY = 0x11111111;

/* The RoCE v2 GID of eth0's IPv4 address (::ffff:10.0.2.15) and its index, or -1. */
static int own_gid(struct ibv_context *ctx, union ibv_gid *gid)
{
	static const uint8_t want[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 2, 15 };

	return roce_v2_gid_like(ctx, want, sizeof(want), gid);
}

/* RTR to RTS. */
static int qp_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = 0x1000 };
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;

	if (qp->qp_type == IBV_QPT_RC) {
		/*
		 * About 1.07 s per acknowledgement timeout, 7 retries: a slow guest (the
		 * debug kernel's) delays a ping-pong behind the big READ's responses,
		 * which the bound on its round trips judges, not its retries.
		 */
		a.timeout = 18;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(qp, &a, mask) ? -1 : 0;
}

/* RESET to INIT. */
static int qp_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return ibv_modify_qp(qp, &a, mask) ? -1 : 0;
}

/* INIT to RTR; an RC or UC QP is connected to the QP numbered dest. */
static int qp_connect(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid, int gid_index)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	int mask = IBV_QP_STATE;

	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = dest;
		a.rq_psn = 0x1000;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = *gid;
		a.ah_attr.grh.sgid_index = gid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	}
	if (qp->qp_type == IBV_QPT_RC) {
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	return ibv_modify_qp(qp, &a, mask) ? -1 : 0;
}

/* RESET to RTR; an RC or UC QP is connected to itself. */
static int qp_rtr(struct ibv_qp *qp, const union ibv_gid *gid, int gid_index)
{
	return qp_init(qp) || qp_connect(qp, qp->qp_num, gid, gid_index) ? -1 : 0;
}

static int qp_up(struct ibv_qp *qp, const union ibv_gid *gid, int gid_index)
{
	return qp_rtr(qp, gid, gid_index) || qp_rts(qp) ? -1 : 0;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
			      enum ibv_qp_type type, int send_wr, int recv_wr)
{
	struct ibv_qp_init_attr a = {
		.send_cq = scq,
		.recv_cq = rcq,
		.qp_type = type,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &a);
}

/* ---- Feeders ---- */

enum feed_kind { FEED_UD, FEED_UC, FEED_RC_LOCAL };
/*
 * WRs per call: a call posts a list of BATCH WRs, and only the list's last WR is
 * signaled. The two threads together keep at most the ring's depth less 4 lists posted
 * and not known complete, so the ring never fills and the CQ holds at most a few
 * hundred completions.
 *
 * Under TCG (one host thread runs the guest's CPUs in turn) a posting thread keeps the
 * ring from running empty only if the ring holds more work than the requester does
 * while the poster's CPU waits for its turn (up to 100 ms): hence long lists (one
 * system call per list), few completions, and a ring as deep as about a third of a
 * second of the requester's work on rxe_rs or more (DEPTH_OF): bounded, so that what
 * is left in it when the posting stops is done within a few seconds on rxe too.
 */
enum { BATCH = 128, MWS = BATCH / 2, SETS = 16 };
enum { UD_MSG = 1024, UC_MSG = 16384, BUF = 2 * UC_MSG };
/*
 * UD: about 45,000 WRs/s on rxe_rs, UC: 2,000 (16 packets each), RC: 190,000, faster
 * than librxe posts them: that ring is as deep as a second and a half of its work, so
 * that the requester needs longer than the posting lasts to catch up. One less than a
 * power of two: rxe's ring has a free slot more than asked for, rounded up.
 */
static const int DEPTH_OF[] = { 16383, 2047, 262143 };

struct feed {
	enum feed_kind kind;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	char *buf;
	double stop;
	/* Per thread: lists posted, lists completed (their signaled WR polled). */
	atomic_long posted[2], done[2];
	/* WRs posted and not known complete, and their bound. */
	atomic_long out;
	long limit;
	atomic_int failed;
	pthread_mutex_t lock, reaping;
	char why[256];
	/* The send ring as mapped; RC: two WQEs librxe wrote, a window of the writer's. */
	struct sq_ring ring;
	uint8_t bind_wqe[sizeof(struct rxe_send_wqe)], inv_wqe[sizeof(struct rxe_send_wqe)];
	struct ibv_mw *raw_mw;
};

struct poster {
	struct feed *f;
	pthread_t th;
	int id;
	/* RC: list j binds and invalidates the windows of set j % SETS. */
	struct ibv_mw *mw[SETS][MWS];
	struct samples calls;
};

static void feed_fail(struct feed *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void feed_fail(struct feed *f, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&f->lock);
	if (!atomic_load(&f->failed)) {
		va_start(ap, fmt);
		vsnprintf(f->why, sizeof(f->why), fmt, ap);
		va_end(ap);
		atomic_store(&f->failed, 1);
	}
	pthread_mutex_unlock(&f->lock);
}

/* A list's signaled WR has wr_id (thread << 32 | list number). */
static void reap(struct feed *f)
{
	struct ibv_wc wc[16];
	int n;

	/* One thread at a time, so that completions are counted in the CQ's order. */
	if (pthread_mutex_trylock(&f->reaping))
		return;
	n = ibv_poll_cq(f->cq, 16, wc);
	if (n < 0)
		feed_fail(f, "ibv_poll_cq: %d", n);
	for (int i = 0; i < n; i++) {
		unsigned int t = wc[i].wr_id >> 32;

		if (wc[i].status != IBV_WC_SUCCESS)
			feed_fail(f, "completion of wr_id %#llx (opcode %d): %s, vendor_err %#x",
				  (unsigned long long)wc[i].wr_id, wc[i].opcode,
				  ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
		else if (t > 1 || (uint32_t)wc[i].wr_id != atomic_load(&f->done[t]))
			feed_fail(f, "completion of wr_id %#llx, want thread %u's list %ld",
				  (unsigned long long)wc[i].wr_id, t & 1, atomic_load(&f->done[t & 1]));
		else {
			atomic_fetch_add(&f->done[t], 1);
			atomic_fetch_sub(&f->out, BATCH);
		}
	}
	pthread_mutex_unlock(&f->reaping);
}

/*
 * Fills `wr` with list `list` of thread `p`. For RC, each window of the list's set is
 * bound with its next key and invalidated again; `new_key` gets the keys.
 */
static void build(struct poster *p, long list, struct ibv_send_wr *wr, struct ibv_sge *sge,
		  uint32_t *new_key)
{
	struct feed *f = p->f;
	struct ibv_mw **mw = p->mw[list % SETS];

	for (int i = 0; i < BATCH; i++) {
		struct ibv_send_wr *w = &wr[i];

		*w = (struct ibv_send_wr){ .wr_id = (uint64_t)p->id << 32 | (uint32_t)list };
		if (i + 1 < BATCH)
			w->next = &wr[i + 1];
		else
			w->send_flags = IBV_SEND_SIGNALED;
		if (f->kind == FEED_RC_LOCAL && i % 2 == 0) {
			new_key[i / 2] = ibv_inc_rkey(mw[i / 2]->rkey);
			w->opcode = IBV_WR_BIND_MW;
			w->bind_mw.mw = mw[i / 2];
			w->bind_mw.rkey = new_key[i / 2];
			w->bind_mw.bind_info = (struct ibv_mw_bind_info){
				.mr = f->mr, .addr = (uintptr_t)f->buf, .length = BUF,
				.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
			continue;
		}
		if (f->kind == FEED_RC_LOCAL) {
			w->opcode = IBV_WR_LOCAL_INV;
			w->invalidate_rkey = new_key[i / 2];
			continue;
		}
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)f->buf,
					   .length = f->kind == FEED_UD ? UD_MSG : UC_MSG,
					   .lkey = f->mr->lkey };
		w->sg_list = &sge[i];
		w->num_sge = 1;
		if (f->kind == FEED_UD) {
			w->opcode = IBV_WR_SEND;
			w->wr.ud.ah = f->ah;
			w->wr.ud.remote_qpn = f->qp->qp_num;
			w->wr.ud.remote_qkey = QKEY;
		} else {
			w->opcode = IBV_WR_RDMA_WRITE;
			w->wr.rdma.remote_addr = (uintptr_t)f->buf + UC_MSG;
			w->wr.rdma.rkey = f->mr->rkey;
		}
	}
}

/*
 * Posts `n` (at most SETS) lists of thread `p` from its next one, in one call, with
 * room for them in `wr` and `sge`; returns ibv_post_send's verdict.
 */
static int post_lists(struct poster *p, int n, struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	long first = atomic_load(&p->f->posted[p->id]);
	uint32_t new_key[SETS][MWS];
	struct ibv_send_wr *bad = NULL;
	int ret;

	for (int k = 0; k < n; k++) {
		build(p, first + k, wr + k * BATCH, sge + k * BATCH, new_key[k]);
		if (k)
			wr[k * BATCH - 1].next = &wr[k * BATCH];
	}
	ret = ibv_post_send(p->f->qp, wr, &bad);
	/* Before RTS the doorbell fails (EINVAL); see requeue_refused. */
	if (ret && (abs(ret) != EINVAL || bad))
		return ret;
	atomic_fetch_add(&p->f->posted[p->id], n);
	/* The windows' keys as the kernel now knows them (librxe passes them on). */
	for (int k = 0; p->f->kind == FEED_RC_LOCAL && k < n; k++)
		for (int i = 0; i < MWS; i++)
			p->mw[(first + k) % SETS][i]->rkey = new_key[k][i];
	return 0;
}

/*
 * RC: writes lists of BATCH WQEs straight into the send ring (copies of the BIND_MW and
 * LOCAL_INV librxe wrote, of its own window, with the keys going on) and moves the
 * producer index, without a doorbell: as fast as a process can, faster than the
 * requester takes them.
 */
static void *ring_writer_run(void *arg)
{
	struct poster *p = arg;
	struct feed *f = p->f;
	uint32_t key = f->raw_mw->rkey;

	while (!atomic_load(&f->failed) && now() < f->stop) {
		long list = atomic_load(&f->posted[p->id]);
		uint32_t prod = atomic_load_explicit(f->ring.prod, memory_order_relaxed);

		reap(f);
		if (atomic_fetch_add(&f->out, BATCH) + BATCH > f->limit) {
			atomic_fetch_sub(&f->out, BATCH);
			sched_yield();
			continue;
		}
		for (int i = 0; i < BATCH; i += 2) {
			struct rxe_send_wqe *b = sq_slot(&f->ring, prod + i);
			struct rxe_send_wqe *v = sq_slot(&f->ring, prod + i + 1);
			uint32_t next = ibv_inc_rkey(key);

			memcpy(b, f->bind_wqe, sizeof(f->bind_wqe));
			memcpy(v, f->inv_wqe, sizeof(f->inv_wqe));
			b->wr.wr_id = v->wr.wr_id = (uint64_t)p->id << 32 | (uint32_t)list;
			b->wr.send_flags = 0;
			v->wr.send_flags = i + 2 == BATCH ? IBV_SEND_SIGNALED : 0;
			b->wr.wr.mw.mw_rkey = key;
			b->wr.wr.mw.rkey = next;
			v->wr.ex.invalidate_rkey = next;
			key = next;
		}
		atomic_store_explicit(f->ring.prod, (prod + BATCH) & f->ring.mask,
				      memory_order_release);
		atomic_fetch_add(&f->posted[p->id], 1);
	}
	return NULL;
}

/* RC: rings the doorbell again and again, each call timed. */
static void *doorbell_run(void *arg)
{
	struct poster *p = arg;
	struct feed *f = p->f;

	while (!atomic_load(&f->failed) && now() < f->stop) {
		double t0 = now();
		int ret = raw_doorbell(f->qp);

		sample_add(&p->calls, t0, now());
		if (ret) {
			feed_fail(f, "doorbell: %s", strerror(ret));
			break;
		}
		reap(f);
		sched_yield();
	}
	return NULL;
}

static void *poster_run(void *arg)
{
	struct poster *p = arg;
	struct feed *f = p->f;
	struct ibv_send_wr wr[BATCH];
	struct ibv_sge sge[BATCH];

	while (!atomic_load(&f->failed) && now() < f->stop) {
		double t0;
		int ret;

		reap(f);
		if (atomic_fetch_add(&f->out, BATCH) + BATCH > f->limit) {
			atomic_fetch_sub(&f->out, BATCH);
			sched_yield();
			continue;
		}
		t0 = now();
		ret = post_lists(p, 1, wr, sge);
		sample_add(&p->calls, t0, now());
		if (ret) {
			feed_fail(f, "ibv_post_send: %s", strerror(abs(ret)));
			break;
		}
	}
	return NULL;
}

static long lists_posted(struct feed *f)
{
	return atomic_load(&f->posted[0]) + atomic_load(&f->posted[1]);
}

static long lists_done(struct feed *f)
{
	return atomic_load(&f->done[0]) + atomic_load(&f->done[1]);
}

static int feed(struct ibv_context *ctx, enum feed_kind kind)
{
	static const char *const names[] = { "UD SEND", "UC RDMA WRITE", "RC BIND_MW + LOCAL_INV" };
	double feed_s = env_num("BUDGET_FEED_S", 5), call_ms = env_num("BUDGET_CALL_MS", 3000);
	double gap_ms = env_num("BUDGET_GAP_MS", 1000), drain_s = env_num("BUDGET_DRAIN_S", 60);
	double t0, took, gap;
	enum ibv_qp_type type = kind == FEED_UD ? IBV_QPT_UD :
				kind == FEED_UC ? IBV_QPT_UC : IBV_QPT_RC;
	struct poster p[2] = { 0 };
	struct ibv_send_wr *wr;
	struct ibv_sge *sge;
	struct feed f = { .kind = kind, .limit = DEPTH_OF[kind] - 4 * BATCH };
	union ibv_gid gid;
	int gid_index = own_gid(ctx, &gid), access, ret = 0;

	arm_alarm(feed_s + drain_s + 120);
	pthread_mutex_init(&f.lock, NULL);
	pthread_mutex_init(&f.reaping, NULL);
	if (gid_index < 0)
		FAIL("no RoCE v2 GID for 10.0.2.15");
	access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (kind == FEED_RC_LOCAL)
		access |= IBV_ACCESS_MW_BIND;
	if (posix_memalign((void **)&f.buf, 4096, BUF))
		FAIL("no memory");
	memset(f.buf, 0x5a, BUF);
	if (!(f.pd = ibv_alloc_pd(ctx)) ||
	    !(f.cq = ibv_create_cq(ctx, 2 * DEPTH_OF[kind] / BATCH, NULL, NULL, 0)) ||
	    !(f.mr = ibv_reg_mr(f.pd, f.buf, BUF, access)) ||
	    !(f.qp = make_qp(f.pd, f.cq, f.cq, type, DEPTH_OF[kind], 1)) ||
	    qp_rtr(f.qp, &gid, gid_index))
		FAIL("setup: %s", strerror(errno));
	if (kind == FEED_UD) {
		struct ibv_ah_attr a = { .is_global = 1, .port_num = 1,
					 .grh = { .dgid = gid, .sgid_index = gid_index, .hop_limit = 64 } };

		if (!(f.ah = ibv_create_ah(f.pd, &a)))
			FAIL("ibv_create_ah: %s", strerror(errno));
	}
	for (int i = 0; i < 2; i++) {
		p[i].f = &f;
		p[i].id = i;
		for (int k = 0; kind == FEED_RC_LOCAL && k < SETS * MWS; k++)
			if (!(p[i].mw[k / MWS][k % MWS] = ibv_alloc_mw(f.pd, IBV_MW_TYPE_2)))
				FAIL("ibv_alloc_mw: %s", strerror(errno));
	}
	/*
	 * The ring filled before RTS, but for a list of each thread: the first doorbell
	 * finds all that waiting.
	 */
	if (!(wr = calloc(SETS * BATCH, sizeof(*wr))) || !(sge = calloc(SETS * BATCH, sizeof(*sge))))
		FAIL("no memory");
	for (int n; (n = (f.limit - 2 * BATCH - atomic_load(&f.out)) / BATCH) > 0;) {
		n = n < SETS ? n : SETS;
		if ((errno = post_lists(&p[0], n, wr, sge)))
			FAIL("ibv_post_send in RTR: %s", strerror(abs(errno)));
		atomic_fetch_add(&f.out, n * BATCH);
	}
	free(wr);
	free(sge);
	if (!find_sq(&f.ring, (uint32_t)(atomic_load(&f.posted[0]) - 1)))
		FAIL("the send ring is not among the mappings");
	if (kind == FEED_RC_LOCAL) {
		memcpy(f.bind_wqe, sq_slot(&f.ring, atomic_load(f.ring.prod) - 2), sizeof(f.bind_wqe));
		memcpy(f.inv_wqe, sq_slot(&f.ring, atomic_load(f.ring.prod) - 1), sizeof(f.inv_wqe));
		if (((struct rxe_send_wqe *)f.bind_wqe)->wr.opcode != IBV_WR_BIND_MW ||
		    ((struct rxe_send_wqe *)f.inv_wqe)->wr.opcode != IBV_WR_LOCAL_INV)
			FAIL("the ring's last WQEs are not the BIND_MW and LOCAL_INV posted");
		if (!(f.raw_mw = ibv_alloc_mw(f.pd, IBV_MW_TYPE_2)))
			FAIL("ibv_alloc_mw: %s", strerror(errno));
	}
	if (qp_rts(f.qp) || requeue_refused(&f.ring, (uint32_t)atomic_load(&f.out)))
		FAIL("to RTS: %s", strerror(errno));
	if (kind == FEED_RC_LOCAL)
		fprintf(stderr, "%s: %ld WRs posted before RTS, then for %.0f s one thread writes "
			"lists of %d WQEs (the last signaled) into the ring while the other rings "
			"the doorbell, ring depth %d\n", names[kind], atomic_load(&f.out), feed_s,
			BATCH, DEPTH_OF[kind]);
	else
		fprintf(stderr, "%s: %ld WRs posted before RTS, then two threads post for %.0f s, "
			"lists of %d WRs (the last signaled), ring depth %d\n", names[kind],
			atomic_load(&f.out), feed_s, BATCH, DEPTH_OF[kind]);
	tickers_start();
	t0 = now();
	f.stop = t0 + feed_s;
	for (int i = 0; i < 2; i++)
		if (pthread_create(&p[i].th, NULL,
				   kind != FEED_RC_LOCAL ? poster_run :
				   i ? ring_writer_run : doorbell_run, &p[i]))
			FAIL("pthread_create");
	for (int i = 0; i < 2; i++)
		pthread_join(p[i].th, NULL);
	fprintf(stderr, "posting ended after %.2f s\n", now() - t0);
	/* Whatever is still in the ring completes (bounded). */
	for (double end = now() + drain_s;
	     lists_done(&f) < lists_posted(&f) && !atomic_load(&f.failed) && now() < end;)
		reap(&f);
	took = now() - t0;
	for (int i = 0; i < 2; i++)
		fprintf(stderr, "thread %d: %ld lists in %zu calls, longest call %.1f ms\n", i,
			atomic_load(&f.posted[i]), p[i].calls.n, p[i].calls.max * 1e3);
	report(kind == FEED_RC_LOCAL ? "doorbell calls" : "ibv_post_send calls", &p[0].calls,
	       &p[1].calls);
	fprintf(stderr, "WRs posted %ld, signaled %ld, completions %ld, %.0f WRs/s\n",
		lists_posted(&f) * BATCH, lists_posted(&f), lists_done(&f),
		lists_posted(&f) * BATCH / took);
	if (atomic_load(&f.failed)) {
		fprintf(stderr, "%s\n", f.why);
		ret = 1;
	}
	if (lists_done(&f) != lists_posted(&f)) {
		fprintf(stderr, "%ld of %ld signaled WRs did not complete\n",
			lists_posted(&f) - lists_done(&f), lists_posted(&f));
		ret = 1;
	}
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < SETS * MWS; k++)
			if (p[i].mw[k / MWS][k % MWS] && ibv_dealloc_mw(p[i].mw[k / MWS][k % MWS]))
				FAIL("ibv_dealloc_mw: %s", strerror(errno));
	if (f.raw_mw && ibv_dealloc_mw(f.raw_mw))
		FAIL("ibv_dealloc_mw: %s", strerror(errno));
	if (ibv_destroy_qp(f.qp) || (f.ah && ibv_destroy_ah(f.ah)) || ibv_dereg_mr(f.mr) ||
	    ibv_destroy_cq(f.cq) || ibv_dealloc_pd(f.pd))
		FAIL("teardown: %s", strerror(errno));
	/* The tickers watched the teardown too. */
	gap = tickers_stop();
	if (gap * 1e3 > gap_ms) {
		fprintf(stderr, "a CPU was held for %.0f ms while another ran (bound %.0f ms)\n",
			gap * 1e3, gap_ms);
		ret = 1;
	}
	for (int i = 0; i < 2; i++) {
		double d = longest_running(&p[i].calls);

		fprintf(stderr, "thread %d: longest call while the guest ran %.1f ms\n", i, d * 1e3);
		if (d * 1e3 > call_ms) {
			fprintf(stderr, "a call took %.1f ms (bound %.0f ms)\n", d * 1e3, call_ms);
			ret = 1;
		}
	}
	free(f.buf);
	free(p[0].calls.v);
	free(p[1].calls.v);
	return ret;
}

static int check_feed_ud(struct ibv_context *ctx) { return feed(ctx, FEED_UD); }
static int check_feed_uc(struct ibv_context *ctx) { return feed(ctx, FEED_UC); }
static int check_feed_rc_local(struct ibv_context *ctx) { return feed(ctx, FEED_RC_LOCAL); }

/* ---- One big READ ---- */

struct pingpong {
	struct ibv_qp *qp;
	struct ibv_cq *scq, *rcq;
	struct ibv_mr *mr;
	char *buf;
	atomic_int stop;
	double end;
	struct samples rtt;
	int err;
	char why[160];
};

/*
 * Completions of `cq` until `want` arrived or the deadline, looking every `us`
 * microseconds; returns how many.
 */
static int wait_cq(struct ibv_cq *cq, int want, double end, struct ibv_wc *wc, int us)
{
	int got = 0;

	while (got < want && now() < end) {
		int n = ibv_poll_cq(cq, want - got, wc + got);

		if (n < 0)
			return -1;
		got += n;
		if (got < want)
			usleep(us);
	}
	return got;
}

static void *pingpong_run(void *arg)
{
	struct pingpong *pp = arg;
	struct ibv_sge sge = { .addr = (uintptr_t)pp->buf, .length = 64, .lkey = pp->mr->lkey };
	struct ibv_sge rsge = { .addr = (uintptr_t)pp->buf + 2048, .length = 64,
				.lkey = pp->mr->lkey };

	for (uint64_t i = 0; !atomic_load(&pp->stop) && now() < pp->end; i++) {
		struct ibv_recv_wr rwr = { .wr_id = i, .sg_list = &rsge, .num_sge = 1 }, *rbad;
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		struct ibv_wc wc = { .status = IBV_WC_GENERAL_ERR };
		double t0 = now();

		if (ibv_post_recv(pp->qp, &rwr, &rbad) || ibv_post_send(pp->qp, &wr, &bad)) {
			snprintf(pp->why, sizeof(pp->why), "ping-pong %llu: post failed",
				 (unsigned long long)i);
			pp->err = 1;
			break;
		}
		for (int k = 0; k < 2; k++) {
			struct ibv_cq *cq = k ? pp->rcq : pp->scq;

			if (wait_cq(cq, 1, pp->end, &wc, 100) != 1 || wc.status != IBV_WC_SUCCESS) {
				snprintf(pp->why, sizeof(pp->why),
					 "ping-pong %llu: no %s completion (%s)", (unsigned long long)i,
					 k ? "receive" : "send", ibv_wc_status_str(wc.status));
				pp->err = 1;
				return NULL;
			}
		}
		sample_add(&pp->rtt, t0, now());
		usleep(1000);
	}
	return NULL;
}

static int check_big_read(struct ibv_context *ctx)
{
	size_t mb = (size_t)env_num("BUDGET_READ_MB", 256), len = mb << 20, words = len / 8;
	double read_s = env_num("BUDGET_READ_S", 300), gap_ms = env_num("BUDGET_GAP_MS", 1000);
	double rtt_ms = env_num("BUDGET_RTT_MS", 2000), tail_s = 3, t0, took, gap;
	struct ibv_cq *cq, *pcq, *prcq;
	struct ibv_mr *src_mr, *dst_mr;
	struct pingpong pp = { 0 };
	struct ibv_qp *qp;
	struct ibv_pd *pd;
	struct ibv_wc wc;
	union ibv_gid gid;
	int gid_index = own_gid(ctx, &gid), ret = 0;
	pthread_t th;
	uint64_t *src, *dst;

	arm_alarm(read_s + tail_s + 120);
	if (gid_index < 0)
		FAIL("no RoCE v2 GID for 10.0.2.15");
	src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (src == MAP_FAILED || dst == MAP_FAILED)
		FAIL("two buffers of %zu MiB: %s", mb, strerror(errno));
	for (size_t i = 0; i < words; i++)
		src[i] = (i + 1) * 0x9e3779b97f4a7c15ull;
	memset(dst, 0, len);
	if (posix_memalign((void **)&pp.buf, 4096, 4096))
		FAIL("no memory");
	if (!(pd = ibv_alloc_pd(ctx)) || !(cq = ibv_create_cq(ctx, 4, NULL, NULL, 0)) ||
	    !(pcq = ibv_create_cq(ctx, 4, NULL, NULL, 0)) ||
	    !(prcq = ibv_create_cq(ctx, 4, NULL, NULL, 0)))
		FAIL("setup: %s", strerror(errno));
	if (!(src_mr = ibv_reg_mr(pd, src, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ)) ||
	    !(dst_mr = ibv_reg_mr(pd, dst, len, IBV_ACCESS_LOCAL_WRITE)))
		FAIL("ibv_reg_mr of %zu MiB: %s", mb, strerror(errno));
	if (!(pp.mr = ibv_reg_mr(pd, pp.buf, 4096, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(qp = make_qp(pd, cq, cq, IBV_QPT_RC, 4, 1)) || qp_up(qp, &gid, gid_index) ||
	    !(pp.qp = make_qp(pd, pcq, prcq, IBV_QPT_RC, 4, 4)) || qp_up(pp.qp, &gid, gid_index))
		FAIL("setup: %s", strerror(errno));
	pp.scq = pcq;
	pp.rcq = prcq;
	struct ibv_sge sge = { .addr = (uintptr_t)dst, .length = (uint32_t)len, .lkey = dst_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = (uintptr_t)src, .rkey = src_mr->rkey } },
			   *bad;

	tickers_start();
	t0 = now();
	pp.end = t0 + read_s;
	if (pthread_create(&th, NULL, pingpong_run, &pp))
		FAIL("pthread_create");
	if (ibv_post_send(qp, &wr, &bad)) {
		fprintf(stderr, "ibv_post_send of the READ: %s\n", strerror(errno));
		ret = 1;
	} else if (wait_cq(cq, 1, t0 + read_s, &wc, 2000) != 1) {
		fprintf(stderr, "the READ did not complete within %.0f s\n", read_s);
		ret = 1;
	} else if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "the READ completed with %s\n", ibv_wc_status_str(wc.status));
		ret = 1;
	}
	took = now() - t0;
	/* What the READ left behind (responses built for a retried request) runs out too. */
	for (double end = now() + tail_s; now() < end && !pp.err;)
		usleep(10000);
	atomic_store(&pp.stop, 1);
	pthread_join(th, NULL);
	fprintf(stderr, "READ of %zu MiB (%zu packets of 1024 bytes): %.2f s, %.1f MiB/s\n", mb,
		len / 1024, took, mb / took);
	report("ping-pong round trips meanwhile", &pp.rtt, NULL);
	if (!ret) {
		for (size_t i = 0; i < words; i++)
			if (dst[i] != src[i]) {
				fprintf(stderr, "data differs at byte %zu: %#llx, want %#llx\n", i * 8,
					(unsigned long long)dst[i], (unsigned long long)src[i]);
				ret = 1;
				break;
			}
	}
	if (pp.err) {
		fprintf(stderr, "%s\n", pp.why);
		ret = 1;
	}
	if (ibv_destroy_qp(qp) || ibv_destroy_qp(pp.qp) || ibv_dereg_mr(src_mr) ||
	    ibv_dereg_mr(dst_mr) || ibv_dereg_mr(pp.mr) || ibv_destroy_cq(cq) ||
	    ibv_destroy_cq(pcq) || ibv_destroy_cq(prcq) || ibv_dealloc_pd(pd))
		FAIL("teardown: %s", strerror(errno));
	gap = tickers_stop();
	if (gap * 1e3 > gap_ms) {
		fprintf(stderr, "a CPU was held for %.0f ms while another ran (bound %.0f ms)\n",
			gap * 1e3, gap_ms);
		ret = 1;
	}
	fprintf(stderr, "longest ping-pong round trip while the guest ran %.1f ms\n",
		longest_running(&pp.rtt) * 1e3);
	if (longest_running(&pp.rtt) * 1e3 > rtt_ms) {
		fprintf(stderr, "a ping-pong round trip took %.1f ms (bound %.0f ms)\n",
			longest_running(&pp.rtt) * 1e3, rtt_ms);
		ret = 1;
	}
	munmap(src, len);
	munmap(dst, len);
	free(pp.buf);
	free(pp.rtt.v);
	return ret;
}

/* ---- Local operations behind an unanswered SEND ---- */

enum { BEHIND = 600, PROBE = 8 };

/*
 * Two RC QPs connected to each other: one READs through a window, the other answers.
 * A responder that refuses a key moves its QP to the error state, and the requester's
 * QP too once the NAK arrives; prober_reset() connects both again.
 */
struct prober {
	struct ibv_qp *qp, *target;
	struct ibv_cq *cq;
	struct ibv_mr *into;
	const union ibv_gid *gid;
	int gid_index;
};

static int prober_reset(struct prober *p)
{
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };

	return ibv_modify_qp(p->qp, &reset, IBV_QP_STATE) ||
	       ibv_modify_qp(p->target, &reset, IBV_QP_STATE) ||
	       qp_init(p->qp) || qp_init(p->target) ||
	       qp_connect(p->qp, p->target->qp_num, p->gid, p->gid_index) ||
	       qp_connect(p->target, p->qp->qp_num, p->gid, p->gid_index) ||
	       qp_rts(p->qp) || qp_rts(p->target) ? -1 : 0;
}

/*
 * Whether a peer may read through window mw now: 1 (PROBE bytes read), 0 (refused with
 * REM_ACCESS_ERR; the pair is connected again), -1 anything else.
 */
static int readable(struct prober *p, struct ibv_mw *mw, uint64_t addr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)p->into->addr, .length = PROBE,
			       .lkey = p->into->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = addr, .rkey = mw->rkey } }, *bad;
	struct ibv_wc wc;

	if ((errno = ibv_post_send(p->qp, &wr, &bad))) {
		fprintf(stderr, "the prober's ibv_post_send: %s\n", strerror(errno));
		return -1;
	}
	if (wait_cq(p->cq, 1, now() + 10, &wc, 1000) != 1) {
		fprintf(stderr, "the prober's READ did not complete within 10 s\n");
		return -1;
	}
	if (wc.status == IBV_WC_SUCCESS)
		return 1;
	if (wc.status != IBV_WC_REM_ACCESS_ERR) {
		fprintf(stderr, "the prober's READ: %s\n", ibv_wc_status_str(wc.status));
		return -1;
	}
	if (prober_reset(p)) {
		fprintf(stderr, "the prober back to RTS: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * local_ops_behind_send: an RC QP sends one SEND to a QP that stays in INIT (no answer,
 * and its acknowledgement timeout is about 2 s with 7 retries), then BEHIND type 1
 * window binds. Binds take no PSN, so the window of unacknowledged PSNs does not hold
 * them back; the bound on WQEs started and not complete (a run's budget, 256) must. A
 * bind takes effect when the requester starts it: while the SEND waits, a binary
 * search over RDMA READs through the windows (a prefix is bound, the binds start in
 * order) finds how many. Asserts: at least one and at most 256 took effect while the
 * SEND waited; once the peer goes to RTR with a receive posted, the SEND's retry is
 * answered, all BEHIND + 1 complete in order and successfully, and the last window is
 * readable.
 */
static int check_local_ops_behind_send(struct ibv_context *ctx)
{
	struct ibv_qp *sender = NULL, *peer = NULL;
	struct ibv_mw *mw[BEHIND] = { 0 };
	struct ibv_cq *cq = NULL, *rcq = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_qp_attr a;
	struct ibv_wc *wc;
	union ibv_gid gid;
	int gid_index = own_gid(ctx, &gid), lo = 0, hi = BEHIND, ret = 0;
	struct prober p = { .gid = &gid, .gid_index = gid_index };
	static char buf[4096], dst[4096];

	arm_alarm(120);
	if (gid_index < 0)
		FAIL("no RoCE v2 GID for 10.0.2.15");
	if (!(wc = calloc(BEHIND + 1, sizeof(*wc))))
		FAIL("no memory");
	if (!(pd = ibv_alloc_pd(ctx)) ||
	    !(cq = ibv_create_cq(ctx, BEHIND + 8, NULL, NULL, 0)) ||
	    !(p.cq = ibv_create_cq(ctx, 8, NULL, NULL, 0)) ||
	    !(rcq = ibv_create_cq(ctx, 8, NULL, NULL, 0)) ||
	    !(mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND)) ||
	    !(p.into = ibv_reg_mr(pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(sender = make_qp(pd, cq, cq, IBV_QPT_RC, BEHIND + 8, 1)) ||
	    !(peer = make_qp(pd, rcq, rcq, IBV_QPT_RC, 1, 1)) ||
	    !(p.qp = make_qp(pd, p.cq, p.cq, IBV_QPT_RC, 1, 1)) ||
	    !(p.target = make_qp(pd, p.cq, p.cq, IBV_QPT_RC, 1, 1)) ||
	    prober_reset(&p) || qp_init(peer) || qp_init(sender) ||
	    qp_connect(sender, peer->qp_num, &gid, gid_index))
		FAIL("setup: %s", strerror(errno));
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 0x1000, .timeout = 19,
				  .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1 };
	if (ibv_modify_qp(sender, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("sender to RTS: %s", strerror(errno));
	for (int i = 0; i < BEHIND; i++)
		if (!(mw[i] = ibv_alloc_mw(pd, IBV_MW_TYPE_1)))
			FAIL("ibv_alloc_mw: %s", strerror(errno));

	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr send = { .wr_id = BEHIND, .sg_list = &sge, .num_sge = 1,
				    .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (ibv_post_send(sender, &send, &bad))
		FAIL("ibv_post_send SEND: %s", strerror(errno));
	for (int i = 0; i < BEHIND; i++) {
		struct ibv_mw_bind bind = {
			.wr_id = i, .send_flags = IBV_SEND_SIGNALED,
			.bind_info = { .mr = mr, .addr = (uintptr_t)buf, .length = sizeof(buf),
				       .mw_access_flags = IBV_ACCESS_REMOTE_READ },
		};

		if (ibv_bind_mw(sender, mw[i], &bind))
			FAIL("ibv_bind_mw %d: %s", i, strerror(errno));
	}
	/* Time for the requester to start what it will, well within the first timeout. */
	usleep(300 * 1000);
	/* The first window not bound yet: in [lo, hi]. */
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2, r = readable(&p, mw[mid], (uintptr_t)buf);

		if (r < 0)
			FAIL("a READ through window %d failed (above)", mid);
		if (r)
			lo = mid + 1;
		else
			hi = mid;
	}
	fprintf(stderr, "while the SEND waited, %d of %d window binds behind it took effect\n",
		lo, BEHIND);
	if (lo < 1 || lo > 256) {
		fprintf(stderr, "want at least 1 and at most 256 (a run's budget of WQEs started "
			"and not complete)\n");
		ret = 1;
	}
	/* The peer answers the SEND's next retry. */
	struct ibv_recv_wr recv = { .sg_list = &sge, .num_sge = 1 }, *rbad;

	if (ibv_post_recv(peer, &recv, &rbad) ||
	    qp_connect(peer, sender->qp_num, &gid, gid_index))
		FAIL("peer to RTR: %s", strerror(errno));
	int got = wait_cq(cq, BEHIND + 1, now() + 60, wc, 10000);

	if (got != BEHIND + 1)
		FAIL("%d of %d completions within 60 s of the peer's RTR", got, BEHIND + 1);
	for (int i = 0; i <= BEHIND; i++)
		if (wc[i].status != IBV_WC_SUCCESS && wc[i].status != IBV_WC_WR_FLUSH_ERR) {
			fprintf(stderr, "completion %d: wr_id %llu %s, the first error not a flush\n",
				i, (unsigned long long)wc[i].wr_id,
				ibv_wc_status_str(wc[i].status));
			break;
		}
	for (int i = 0; i <= BEHIND; i++) {
		uint64_t want = i ? (uint64_t)i - 1 : BEHIND;

		if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != want)
			FAIL("completion %d: wr_id %llu status %s, want %llu success", i,
			     (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status),
			     (unsigned long long)want);
	}
	if (readable(&p, mw[BEHIND - 1], (uintptr_t)buf) != 1)
		FAIL("the last window is not readable after every bind completed");
	for (int i = 0; i < BEHIND; i++)
		if (ibv_dealloc_mw(mw[i]))
			FAIL("ibv_dealloc_mw: %s", strerror(errno));
	if (ibv_destroy_qp(sender) || ibv_destroy_qp(peer) || ibv_destroy_qp(p.qp) ||
	    ibv_destroy_qp(p.target) || ibv_dereg_mr(mr) || ibv_dereg_mr(p.into) ||
	    ibv_destroy_cq(cq) || ibv_destroy_cq(p.cq) || ibv_destroy_cq(rcq) ||
	    ibv_dealloc_pd(pd))
		FAIL("teardown: %s", strerror(errno));
	free(wc);
	return ret;
}

static const struct check checks[] = {
	{ "feed_ud", check_feed_ud },
	{ "feed_uc", check_feed_uc },
	{ "feed_rc_local", check_feed_rc_local },
	{ "big_read", check_big_read },
	{ "local_ops_behind_send", check_local_ops_behind_send },
	{ NULL }
};

int main(int argc, char **argv)
{
	return run_check(argc, argv, checks);
}
