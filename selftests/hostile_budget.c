// SPDX-License-Identifier: GPL-2.0
/*
 * Bounded work per context: nothing a process or a peer sends may keep a CPU in a system
 * call, a bottom half or an RCU read-side section for an unbounded time.
 *
 *   hostile_budget DEVICE CHECK   (see verbs_common.h)
 *
 * feed_ud, feed_uc, feed_rc_local: two threads post to one QP without pause for
 * BUDGET_FEED_S seconds (default 5): 64-byte UD SENDs to the QP itself, 64-byte UC RDMA
 * WRITEs into its own MR, or RC local operations (a type 2 memory window bound and
 * invalidated again, a BIND_MW and a LOCAL_INV per call; they take no send window).
 * librxe writes a thread's WQEs into the ring under the QP's lock and rings the doorbell
 * (a write to the device file) after releasing it, so while one thread's doorbell is in
 * the kernel the other thread's WQEs keep appearing in the ring: a requester without a
 * budget that looks at the ring's producer index again after each WQE keeps that one
 * call in the kernel for as long as the other thread posts. Every WR is signaled, and
 * a thread posts only while fewer than the ring's depth are posted and not polled, so
 * neither the ring nor the CQ can fill; both threads poll the CQ.
 * Asserts: the longest ibv_post_send call returns within BUDGET_CALL_MS (500; the 99th
 * percentile is printed too), every WR completes, successfully, and no CPU was
 * unavailable to a thread for longer than BUDGET_GAP_MS (see the tickers below).
 *
 * big_read: one RDMA READ of BUDGET_READ_MB MiB (256) through an RC QP connected to
 * itself, the data checked against the pattern it was read from, while another RC QP
 * of the device ping-pongs 64-byte SENDs with itself. Asserts: the READ completes within
 * BUDGET_READ_S (300) with the data right, every ping-pong round trip takes at most
 * BUDGET_RTT_MS (2000), and no CPU stalls longer than BUDGET_GAP_MS.
 *
 * Tickers: a thread pinned to each CPU, SCHED_FIFO when allowed, wakes every 10 ms and
 * records the longest time between two wakeups. Only a CPU in a context that cannot be
 * preempted (a bottom half, a section with preemption off) keeps it from running.
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
		_exit(1);
	_exit(1);
}

static void arm_alarm(double seconds)
{
	signal(SIGALRM, on_alarm);
	alarm((unsigned int)seconds + 1);
}

/* ---- Durations ---- */

struct samples {
	float *v;
	size_t n, cap;
	double max;
};

static void sample_add(struct samples *s, double sec)
{
	if (sec > s->max)
		s->max = sec;
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
	double max_gap;
};

static struct ticker tickers[MAX_CPUS];
static int n_tickers;
static atomic_int tick_stop;

static void *tick_run(void *arg)
{
	struct ticker *t = arg;
	struct sched_param sp = { .sched_priority = 50 };
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
		double t1;

		nanosleep(&ts, NULL);
		t1 = now();
		if (t1 - last > t->max_gap)
			t->max_gap = t1 - last;
		last = t1;
	}
	return NULL;
}

static void tickers_start(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	atomic_store(&tick_stop, 0);
	n_tickers = 0;
	for (int c = 0; c < cpus && c < MAX_CPUS; c++) {
		tickers[n_tickers] = (struct ticker){ .cpu = c };
		if (!pthread_create(&tickers[n_tickers].th, NULL, tick_run, &tickers[n_tickers]))
			n_tickers++;
	}
}

/* Stops the tickers, prints their longest gaps; returns the longest of all. */
static double tickers_stop(void)
{
	double worst = 0;

	atomic_store(&tick_stop, 1);
	for (int i = 0; i < n_tickers; i++) {
		pthread_join(tickers[i].th, NULL);
		fprintf(stderr, "cpu %d: longest gap between %d ms ticks %.1f ms%s%s\n",
			tickers[i].cpu, TICK_MS, tickers[i].max_gap * 1e3,
			tickers[i].pinned ? "" : " (not pinned)",
			tickers[i].fifo ? " (SCHED_FIFO)" : " (SCHED_OTHER)");
		if (tickers[i].max_gap > worst)
			worst = tickers[i].max_gap;
	}
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

/* RESET to RTS; an RC or UC QP is connected to itself. */
static int qp_up(struct ibv_qp *qp, const union ibv_gid *gid, int gid_index)
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
	if (ibv_modify_qp(qp, &a, mask))
		return -1;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	mask = IBV_QP_STATE;
	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qp->qp_num;
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
	if (ibv_modify_qp(qp, &a, mask))
		return -1;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 0x1000 };
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC) {
		/* About 0.27 s per acknowledgement timeout, 7 retries. */
		a.timeout = 16;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(qp, &a, mask) ? -1 : 0;
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
/* Ring depth asked for, WRs per call (UD, UC), bytes per message. */
enum { DEPTH = 256, BATCH = 16, MSG = 64, BUF = 8192 };

struct feed {
	enum feed_kind kind;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	char *buf;
	double stop;
	atomic_long posted, polled;
	atomic_int failed;
	pthread_mutex_t lock;
	char why[256];
};

struct poster {
	struct feed *f;
	pthread_t th;
	struct ibv_mw *mw;
	struct samples calls;
	unsigned long wrs;
	uint64_t next_id;
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

static void reap(struct feed *f)
{
	struct ibv_wc wc[64];
	int n = ibv_poll_cq(f->cq, 64, wc);

	if (n < 0) {
		feed_fail(f, "ibv_poll_cq: %d", n);
		return;
	}
	for (int i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS)
			feed_fail(f, "completion of wr_id %#llx (opcode %d): %s, vendor_err %#x",
				  (unsigned long long)wc[i].wr_id, wc[i].opcode,
				  ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
	atomic_fetch_add(&f->polled, n);
}

/* Fills `wr` with this call's WRs and returns how many. */
static int build(struct poster *p, struct ibv_send_wr *wr, struct ibv_sge *sge, uint32_t *new_key)
{
	struct feed *f = p->f;

	if (f->kind == FEED_RC_LOCAL) {
		*new_key = ibv_inc_rkey(p->mw->rkey);
		wr[0] = (struct ibv_send_wr){
			.wr_id = p->next_id++, .opcode = IBV_WR_BIND_MW,
			.send_flags = IBV_SEND_SIGNALED, .next = &wr[1],
			.bind_mw = { .mw = p->mw, .rkey = *new_key,
				     .bind_info = { .mr = f->mr, .addr = (uintptr_t)f->buf,
						    .length = BUF,
						    .mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
								       IBV_ACCESS_REMOTE_READ } },
		};
		wr[1] = (struct ibv_send_wr){
			.wr_id = p->next_id++, .opcode = IBV_WR_LOCAL_INV,
			.send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = *new_key,
		};
		return 2;
	}
	for (int i = 0; i < BATCH; i++) {
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)f->buf, .length = MSG,
					   .lkey = f->mr->lkey };
		wr[i] = (struct ibv_send_wr){
			.wr_id = p->next_id++, .sg_list = &sge[i], .num_sge = 1,
			.send_flags = IBV_SEND_SIGNALED, .next = i + 1 < BATCH ? &wr[i + 1] : NULL,
		};
		if (f->kind == FEED_UD) {
			wr[i].opcode = IBV_WR_SEND;
			wr[i].wr.ud.ah = f->ah;
			wr[i].wr.ud.remote_qpn = f->qp->qp_num;
			wr[i].wr.ud.remote_qkey = QKEY;
		} else {
			wr[i].opcode = IBV_WR_RDMA_WRITE;
			wr[i].wr.rdma.remote_addr = (uintptr_t)f->buf + BUF / 2;
			wr[i].wr.rdma.rkey = f->mr->rkey;
		}
	}
	return BATCH;
}

static void *poster_run(void *arg)
{
	struct poster *p = arg;
	struct feed *f = p->f;
	struct ibv_send_wr wr[BATCH], *bad;
	struct ibv_sge sge[BATCH];

	while (!atomic_load(&f->failed) && now() < f->stop) {
		int n = f->kind == FEED_RC_LOCAL ? 2 : BATCH, ret;
		uint32_t new_key = 0;
		double t0;

		reap(f);
		/* Room for n more in the ring and in the CQ, counting the other thread's. */
		if (atomic_fetch_add(&f->posted, n) + n - atomic_load(&f->polled) > DEPTH) {
			atomic_fetch_sub(&f->posted, n);
			sched_yield();
			continue;
		}
		n = build(p, wr, sge, &new_key);
		t0 = now();
		ret = ibv_post_send(f->qp, wr, &bad);
		sample_add(&p->calls, now() - t0);
		if (ret) {
			feed_fail(f, "ibv_post_send: %s", strerror(abs(ret)));
			break;
		}
		/* The window's key as the kernel now knows it (librxe passes it on). */
		if (f->kind == FEED_RC_LOCAL)
			p->mw->rkey = new_key;
		p->wrs += n;
	}
	return NULL;
}

static int feed(struct ibv_context *ctx, enum feed_kind kind)
{
	static const char *const names[] = { "UD SEND", "UC RDMA WRITE", "RC BIND_MW+LOCAL_INV" };
	double feed_s = env_num("BUDGET_FEED_S", 5), call_ms = env_num("BUDGET_CALL_MS", 500);
	double gap_ms = env_num("BUDGET_GAP_MS", 1000), t0, gap;
	enum ibv_qp_type type = kind == FEED_UD ? IBV_QPT_UD :
				kind == FEED_UC ? IBV_QPT_UC : IBV_QPT_RC;
	struct poster p[2] = { 0 };
	struct feed f = { .kind = kind };
	union ibv_gid gid;
	int gid_index = own_gid(ctx, &gid), access, ret = 0;

	arm_alarm(feed_s + 180);
	pthread_mutex_init(&f.lock, NULL);
	if (gid_index < 0)
		FAIL("no RoCE v2 GID for 10.0.2.15");
	access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (kind == FEED_RC_LOCAL)
		access |= IBV_ACCESS_MW_BIND;
	if (posix_memalign((void **)&f.buf, 4096, BUF))
		FAIL("no memory");
	memset(f.buf, 0x5a, BUF);
	if (!(f.pd = ibv_alloc_pd(ctx)) || !(f.cq = ibv_create_cq(ctx, 2 * DEPTH, NULL, NULL, 0)) ||
	    !(f.mr = ibv_reg_mr(f.pd, f.buf, BUF, access)) ||
	    !(f.qp = make_qp(f.pd, f.cq, f.cq, type, DEPTH, 1)) || qp_up(f.qp, &gid, gid_index))
		FAIL("setup: %s", strerror(errno));
	if (kind == FEED_UD) {
		struct ibv_ah_attr a = { .is_global = 1, .port_num = 1,
					 .grh = { .dgid = gid, .sgid_index = gid_index, .hop_limit = 64 } };

		if (!(f.ah = ibv_create_ah(f.pd, &a)))
			FAIL("ibv_create_ah: %s", strerror(errno));
	}
	for (int i = 0; i < 2; i++) {
		p[i].f = &f;
		p[i].next_id = (uint64_t)(i + 1) << 40;
		if (kind == FEED_RC_LOCAL && !(p[i].mw = ibv_alloc_mw(f.pd, IBV_MW_TYPE_2)))
			FAIL("ibv_alloc_mw: %s", strerror(errno));
	}
	fprintf(stderr, "%s: two threads post for %.0f s, %d WRs per call, ring depth %d\n",
		names[kind], feed_s, kind == FEED_RC_LOCAL ? 2 : BATCH, DEPTH);
	tickers_start();
	t0 = now();
	f.stop = t0 + feed_s;
	for (int i = 0; i < 2; i++)
		if (pthread_create(&p[i].th, NULL, poster_run, &p[i]))
			FAIL("pthread_create");
	for (int i = 0; i < 2; i++)
		pthread_join(p[i].th, NULL);
	fprintf(stderr, "posting ended after %.2f s\n", now() - t0);
	/* Whatever is still in the ring completes (bounded). */
	for (double end = now() + 60; atomic_load(&f.polled) < atomic_load(&f.posted) &&
				      !atomic_load(&f.failed) && now() < end;)
		reap(&f);
	gap = tickers_stop();
	for (int i = 0; i < 2; i++)
		fprintf(stderr, "thread %d: %lu WRs in %zu calls, longest call %.1f ms\n", i,
			p[i].wrs, p[i].calls.n, p[i].calls.max * 1e3);
	report("ibv_post_send calls", &p[0].calls, &p[1].calls);
	fprintf(stderr, "WRs posted %ld, completions %ld, %.0f WRs/s\n", atomic_load(&f.posted),
		atomic_load(&f.polled), atomic_load(&f.posted) / (now() - t0));
	if (atomic_load(&f.failed)) {
		fprintf(stderr, "%s\n", f.why);
		ret = 1;
	}
	if (atomic_load(&f.polled) != atomic_load(&f.posted)) {
		fprintf(stderr, "%ld of %ld WRs did not complete\n",
			atomic_load(&f.posted) - atomic_load(&f.polled), atomic_load(&f.posted));
		ret = 1;
	}
	for (int i = 0; i < 2; i++)
		if (p[i].calls.max * 1e3 > call_ms) {
			fprintf(stderr, "an ibv_post_send call took %.1f ms (bound %.0f ms)\n",
				p[i].calls.max * 1e3, call_ms);
			ret = 1;
		}
	if (gap * 1e3 > gap_ms) {
		fprintf(stderr, "a CPU stalled for %.1f ms (bound %.0f ms)\n", gap * 1e3, gap_ms);
		ret = 1;
	}
	for (int i = 0; i < 2; i++)
		if (p[i].mw && ibv_dealloc_mw(p[i].mw))
			FAIL("ibv_dealloc_mw: %s", strerror(errno));
	if (ibv_destroy_qp(f.qp) || (f.ah && ibv_destroy_ah(f.ah)) || ibv_dereg_mr(f.mr) ||
	    ibv_destroy_cq(f.cq) || ibv_dealloc_pd(f.pd))
		FAIL("teardown: %s", strerror(errno));
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
	struct ibv_sge sge = { .addr = (uintptr_t)pp->buf, .length = MSG, .lkey = pp->mr->lkey };
	struct ibv_sge rsge = { .addr = (uintptr_t)pp->buf + 2048, .length = MSG,
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
		sample_add(&pp->rtt, now() - t0);
		usleep(1000);
	}
	return NULL;
}

static int check_big_read(struct ibv_context *ctx)
{
	size_t mb = (size_t)env_num("BUDGET_READ_MB", 256), len = mb << 20, words = len / 8;
	double read_s = env_num("BUDGET_READ_S", 300), gap_ms = env_num("BUDGET_GAP_MS", 1000);
	double rtt_ms = env_num("BUDGET_RTT_MS", 2000), t0, took, gap;
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

	arm_alarm(read_s + 120);
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
	atomic_store(&pp.stop, 1);
	pthread_join(th, NULL);
	gap = tickers_stop();
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
	if (pp.rtt.max * 1e3 > rtt_ms) {
		fprintf(stderr, "a ping-pong round trip took %.1f ms (bound %.0f ms)\n",
			pp.rtt.max * 1e3, rtt_ms);
		ret = 1;
	}
	if (gap * 1e3 > gap_ms) {
		fprintf(stderr, "a CPU stalled for %.1f ms (bound %.0f ms)\n", gap * 1e3, gap_ms);
		ret = 1;
	}
	if (ibv_destroy_qp(qp) || ibv_destroy_qp(pp.qp) || ibv_dereg_mr(src_mr) ||
	    ibv_dereg_mr(dst_mr) || ibv_dereg_mr(pp.mr) || ibv_destroy_cq(cq) ||
	    ibv_destroy_cq(pcq) || ibv_destroy_cq(prcq) || ibv_dealloc_pd(pd))
		FAIL("teardown: %s", strerror(errno));
	munmap(src, len);
	munmap(dst, len);
	free(pp.buf);
	free(pp.rtt.v);
	return ret;
}

static const struct check checks[] = {
	{ "feed_ud", check_feed_ud },
	{ "feed_uc", check_feed_uc },
	{ "feed_rc_local", check_feed_rc_local },
	{ "big_read", check_big_read },
	{ NULL }
};

int main(int argc, char **argv)
{
	return run_check(argc, argv, checks);
}
