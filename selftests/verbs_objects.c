// SPDX-License-Identifier: GPL-2.0
/*
 * Verbs objects and their destroy semantics, through stock libibverbs and librxe.
 *
 *   verbs_objects DEVICE CHECK   (see verbs_common.h)
 *
 * Every check is bounded in count and time.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include "verbs_common.h"

/* A CQ holds at least what was asked for, and not absurdly more; a new CQ is empty. */
static int check_cq_sizes(struct ibv_context *ctx)
{
	static const int sizes[] = { 1, 2, 3, 15, 16, 17, 255, 1000, 32767 };
	struct ibv_wc wc;

	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct ibv_cq *cq = ibv_create_cq(ctx, sizes[i], NULL, NULL, 0);

		if (!cq)
			FAIL("ibv_create_cq(%d): %s", sizes[i], strerror(errno));
		fprintf(stderr, "cqe %d -> %d\n", sizes[i], cq->cqe);
		if (cq->cqe < sizes[i] || cq->cqe > 2 * sizes[i] + 1)
			FAIL("ibv_create_cq(%d) holds %d", sizes[i], cq->cqe);
		if (ibv_poll_cq(cq, 1, &wc) != 0)
			FAIL("a new CQ is not empty");
		if (ibv_destroy_cq(cq))
			FAIL("ibv_destroy_cq: %s", strerror(errno));
	}
	return 0;
}

/* Sizes and vectors out of range fail with EINVAL and create nothing. */
static int check_cq_bad(struct ibv_context *ctx)
{
	struct ibv_device_attr da;
	struct ibv_cq *cq;

	if (ibv_query_device(ctx, &da))
		FAIL("ibv_query_device: %s", strerror(errno));
	errno = 0;
	if ((cq = ibv_create_cq(ctx, da.max_cqe + 1, NULL, NULL, 0)))
		FAIL("a CQ of max_cqe + 1 = %d entries was created", da.max_cqe + 1);
	if (errno != EINVAL)
		FAIL("max_cqe + 1: %s, want EINVAL", strerror(errno));
	errno = 0;
	if ((cq = ibv_create_cq(ctx, 0, NULL, NULL, 0)))
		FAIL("a CQ of 0 entries was created");
	if (errno != EINVAL)
		FAIL("0 entries: %s, want EINVAL", strerror(errno));
	errno = 0;
	if ((cq = ibv_create_cq(ctx, 4, NULL, NULL, ctx->num_comp_vectors)))
		FAIL("a CQ on vector %d of %d was created", ctx->num_comp_vectors,
		     ctx->num_comp_vectors);
	if (errno != EINVAL)
		FAIL("bad vector: %s, want EINVAL", strerror(errno));
	/* The largest CQ still works. */
	if (!(cq = ibv_create_cq(ctx, da.max_cqe, NULL, NULL, 0)))
		FAIL("ibv_create_cq(max_cqe %d): %s", da.max_cqe, strerror(errno));
	return ibv_destroy_cq(cq) ? 1 : 0;
}

static int check_cq_resize(struct ibv_context *ctx)
{
	static const int sizes[] = { 100, 4, 1000, 1, 32767 };
	struct ibv_device_attr da;
	struct ibv_cq *cq;
	struct ibv_wc wc;

	if (ibv_query_device(ctx, &da))
		FAIL("ibv_query_device: %s", strerror(errno));
	if (!(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		FAIL("ibv_create_cq: %s", strerror(errno));
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int ret = ibv_resize_cq(cq, sizes[i]);

		if (ret)
			FAIL("ibv_resize_cq(%d): %s", sizes[i], strerror(ret));
		fprintf(stderr, "resize %d -> %d\n", sizes[i], cq->cqe);
		if (cq->cqe < sizes[i])
			FAIL("resized to %d, holds %d", sizes[i], cq->cqe);
		if (ibv_poll_cq(cq, 1, &wc) != 0)
			FAIL("a resized empty CQ is not empty");
	}
	if (!ibv_resize_cq(cq, da.max_cqe + 1))
		FAIL("resize to max_cqe + 1 succeeded");
	if (ibv_poll_cq(cq, 1, &wc) != 0)
		FAIL("the CQ is not usable after a failed resize");
	return ibv_destroy_cq(cq) ? 1 : 0;
}

/* Arming works in both modes; a CQ armed with no event yet is destroyed at once. */
static int check_cq_notify(struct ibv_context *ctx)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq, *ev_cq;
	void *ev_ctx;

	if (!ch)
		FAIL("ibv_create_comp_channel: %s", strerror(errno));
	if (!(cq = ibv_create_cq(ctx, 16, (void *)0x1234, ch, 0)))
		FAIL("ibv_create_cq with a channel: %s", strerror(errno));
	if (ibv_req_notify_cq(cq, 0))
		FAIL("ibv_req_notify_cq(next): %s", strerror(errno));
	if (ibv_req_notify_cq(cq, 1))
		FAIL("ibv_req_notify_cq(solicited): %s", strerror(errno));
	if (fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK))
		FAIL("fcntl: %s", strerror(errno));
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0)
		FAIL("an event without a completion");
	if (errno != EAGAIN)
		FAIL("ibv_get_cq_event: %s, want EAGAIN", strerror(errno));
	if (ibv_destroy_cq(cq))
		FAIL("ibv_destroy_cq of an armed CQ: %s", strerror(errno));
	if (ibv_destroy_comp_channel(ch))
		FAIL("ibv_destroy_comp_channel: %s", strerror(errno));
	return 0;
}

/* The count the environment variable `name` gives, within 1..max; `max` if it is unset. */
static int env_count(const char *name, int max)
{
	const char *v = getenv(name);
	int n = v ? atoi(v) : max;

	return n < 1 ? 1 : n > max ? max : n;
}

/*
 * CQs created and destroyed in three rounds: CQ_MANY (1000 unless told; the debug
 * kernel's run sets fewer) of sizes 1 to 64 each round.
 */
static int check_cq_many(struct ibv_context *ctx)
{
	enum { MAX = 1000 };
	static struct ibv_cq *cqs[MAX];
	int N = env_count("CQ_MANY", MAX);

	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++)
			if (!(cqs[i] = ibv_create_cq(ctx, 1 + (i % 64), NULL, NULL, 0)))
				FAIL("round %d: ibv_create_cq %d: %s", round, i, strerror(errno));
		for (int i = N - 1; i >= 0; i--)
			if (ibv_destroy_cq(cqs[i]))
				FAIL("round %d: ibv_destroy_cq %d: %s", round, i, strerror(errno));
	}
	return 0;
}

/* Closing the device with CQs (and a channel) left frees them. */
static int check_cq_close(void)
{
	for (int round = 0; round < 16; round++) {
		struct ibv_context *ctx = open_dev();
		struct ibv_comp_channel *ch;

		if (!ctx)
			FAIL("open: %s", strerror(errno));
		if (!(ch = ibv_create_comp_channel(ctx)))
			FAIL("ibv_create_comp_channel: %s", strerror(errno));
		for (int i = 0; i < 16; i++) {
			struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, i % 2 ? ch : NULL, 0);

			if (!cq)
				FAIL("ibv_create_cq: %s", strerror(errno));
			if (i % 2 && ibv_req_notify_cq(cq, 0))
				FAIL("ibv_req_notify_cq: %s", strerror(errno));
		}
		if (ibv_close_device(ctx))
			FAIL("ibv_close_device: %s", strerror(errno));
	}
	return 0;
}

/*
 * Runs `rounds` children that each set up objects with `setup` (on a context of their
 * own), say so, and wait; each is killed with SIGKILL once ready.
 */
static int kill_children(int rounds, void (*setup)(struct ibv_context *ctx))
{
	for (int round = 0; round < rounds; round++) {
		int pfd[2];
		pid_t pid;
		char c;

		if (pipe(pfd))
			FAIL("pipe: %s", strerror(errno));
		pid = fork();
		if (pid < 0)
			FAIL("fork: %s", strerror(errno));
		if (pid == 0) {
			struct ibv_context *ctx = open_dev();

			if (ctx)
				setup(ctx);
			if (write(pfd[1], "r", 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
		close(pfd[1]);
		if (read(pfd[0], &c, 1) != 1)
			FAIL("child did not get ready");
		close(pfd[0]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	return 0;
}

static void make_cqs(struct ibv_context *ctx)
{
	for (int i = 0; i < 64; i++)
		ibv_create_cq(ctx, 256, NULL, NULL, 0);
}

/* Children holding CQs (rings mapped) are killed with SIGKILL; the device stays usable. */
static int check_cq_killed(void)
{
	struct ibv_context *ctx;
	struct ibv_cq *cq;

	if (kill_children(8, make_cqs))
		return 1;
	ctx = open_dev();
	if (!ctx || !(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		FAIL("device unusable after killed users: %s", strerror(errno));
	ibv_destroy_cq(cq);
	ibv_close_device(ctx);
	return 0;
}

/* The start and page offset of this process's mapping of the device file, newest first. */
static int find_ring(void **addr, size_t *len, off_t *off)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int found = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long start, end, pgoff;

		if (!strstr(line, "/dev/infiniband/uverbs"))
			continue;
		if (sscanf(line, "%lx-%lx %*s %lx", &start, &end, &pgoff) != 3)
			continue;
		*addr = (void *)start;
		*len = end - start;
		*off = pgoff;
		found = 1;
	}
	fclose(f);
	return found;
}

/*
 * A process keeps a CQ's ring mapped past the destroy: its mapping stays readable
 * memory (no crash, no kernel access after free), and the offset is withdrawn.
 */
static int check_cq_ring_after_destroy(struct ibv_context *ctx)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 100, NULL, NULL, 0);
	void *addr, *mine;
	size_t len;
	off_t off;

	if (!cq)
		FAIL("ibv_create_cq: %s", strerror(errno));
	if (!find_ring(&addr, &len, &off))
		FAIL("no mapping of the device file after ibv_create_cq");
	mine = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->cmd_fd, off);
	if (mine == MAP_FAILED) {
		ibv_destroy_cq(cq);
		SKIP("this driver maps a ring only once (%s)", strerror(errno));
	}
	if (ibv_destroy_cq(cq))
		FAIL("ibv_destroy_cq: %s", strerror(errno));
	/* The header as the device left it: 64-byte slots at least, mask = slots - 1. */
	uint32_t log2 = ((volatile uint32_t *)mine)[0], mask = ((volatile uint32_t *)mine)[1];

	fprintf(stderr, "after destroy: log2_elem_size %u index_mask %u\n", log2, mask);
	if (log2 < 6 || mask < 100)
		FAIL("ring header not readable as left");
	memset(mine, 0x5a, len);
	if (mmap(NULL, len, PROT_READ, MAP_SHARED, ctx->cmd_fd, off) != MAP_FAILED)
		FAIL("the ring of a destroyed CQ can still be mapped");
	if (munmap(mine, len))
		FAIL("munmap: %s", strerror(errno));
	return 0;
}

/*
 * Holds a CQ (ring mapped) and a PD while the device is deleted. Prints "ready", then
 * waits up to 8 s for IBV_EVENT_DEVICE_FATAL and prints "fatal" when it comes.
 */
static int check_hold_until_fatal(struct ibv_context *ctx)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_async_event ev;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_wc wc;

	if (!cq || !pd)
		FAIL("setup: %s", strerror(errno));
	printf("ready\n");
	fflush(stdout);
	if (poll(&p, 1, 30000) != 1)
		FAIL("no async event within 30 s");
	if (ibv_get_async_event(ctx, &ev))
		FAIL("ibv_get_async_event: %s", strerror(errno));
	if (ev.event_type != IBV_EVENT_DEVICE_FATAL)
		FAIL("async event %d, want DEVICE_FATAL", ev.event_type);
	ibv_ack_async_event(&ev);
	/* The ring is still mapped: polling it is harmless and finds nothing. */
	if (ibv_poll_cq(cq, 1, &wc) != 0)
		FAIL("completions appeared after the device went away");
	printf("fatal\n");
	fflush(stdout);
	/*
	 * Still holding the ring mapped, for a minute: the test sees the delete return while
	 * this process runs, and then ends it.
	 */
	sleep(60);
	return 0;
}

/* ---- Queue pairs ---- */

/* The index of the RoCE v2 GID of eth0's IPv4 address (::ffff:10.0.2.15), or -1. */
static int roce_v2_gid_index(struct ibv_context *ctx, union ibv_gid *gid)
{
	static const uint8_t want[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 2, 15 };

	return roce_v2_gid_like(ctx, want, sizeof(want), gid);
}

struct qp_env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_comp_channel *ch;
	union ibv_gid gid;
	int gid_index;
};

static int env_open(struct ibv_context *ctx, struct qp_env *e, int with_channel)
{
	memset(e, 0, sizeof(*e));
	e->ctx = ctx;
	e->gid_index = roce_v2_gid_index(ctx, &e->gid);
	if (e->gid_index < 0)
		FAIL("no RoCE v2 GID for 10.0.2.15");
	if (with_channel && !(e->ch = ibv_create_comp_channel(ctx)))
		FAIL("ibv_create_comp_channel: %s", strerror(errno));
	e->pd = ibv_alloc_pd(ctx);
	e->scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	e->rcq = ibv_create_cq(ctx, 64, NULL, e->ch, 0);
	if (!e->pd || !e->scq || !e->rcq)
		FAIL("env: %s", strerror(errno));
	return 0;
}

static int env_close(struct qp_env *e)
{
	if (ibv_destroy_cq(e->scq) || ibv_destroy_cq(e->rcq))
		FAIL("ibv_destroy_cq: %s", strerror(errno));
	if (ibv_dealloc_pd(e->pd))
		FAIL("ibv_dealloc_pd: %s", strerror(errno));
	if (e->ch && ibv_destroy_comp_channel(e->ch))
		FAIL("ibv_destroy_comp_channel: %s", strerror(errno));
	return 0;
}

static struct ibv_qp *make_qp(struct qp_env *e, enum ibv_qp_type type, int wr, int sge)
{
	struct ibv_qp_init_attr a = {
		.send_cq = e->scq,
		.recv_cq = e->rcq,
		.qp_type = type,
		.cap = { .max_send_wr = wr, .max_recv_wr = wr, .max_send_sge = sge,
			 .max_recv_sge = sge },
	};

	return ibv_create_qp(e->pd, &a);
}

static int to_state(struct qp_env *e, struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };
	int mask = IBV_QP_STATE;

	switch (s) {
	case IBV_QPS_INIT:
		a.pkey_index = 0;
		a.port_num = 1;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (qp->qp_type == IBV_QPT_UD) {
			a.qkey = 0x11111111;
			mask |= IBV_QP_QKEY;
		} else {
			a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
			mask |= IBV_QP_ACCESS_FLAGS;
		}
		break;
	case IBV_QPS_RTR:
		if (qp->qp_type == IBV_QPT_UD)
			break;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qp->qp_num;
		a.rq_psn = 0x123456;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = e->gid;
		a.ah_attr.grh.sgid_index = e->gid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (qp->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 3;
			a.min_rnr_timer = 12;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		break;
	case IBV_QPS_RTS:
		a.sq_psn = 0x654321;
		mask |= IBV_QP_SQ_PSN;
		if (qp->qp_type == IBV_QPT_RC) {
			a.timeout = 14;
			a.retry_cnt = 7;
			a.rnr_retry = 7;
			a.max_rd_atomic = 3;
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC;
		}
		break;
	default:
		break;
	}
	return ibv_modify_qp(qp, &a, mask);
}

/* Walks a QP from RESET to `last` along the normal path; SQD goes through RTS. */
static int walk_to(struct qp_env *e, struct ibv_qp *qp, enum ibv_qp_state last)
{
	static const enum ibv_qp_state path[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
						  IBV_QPS_SQD };

	if (last == IBV_QPS_RESET)
		return 0;
	if (last == IBV_QPS_ERR)
		return to_state(e, qp, IBV_QPS_ERR);
	for (unsigned int i = 0; i < sizeof(path) / sizeof(path[0]); i++) {
		int ret = to_state(e, qp, path[i]);

		if (ret)
			FAIL("to state %d: %s", path[i], strerror(ret));
		if (qp_state(qp) != path[i])
			FAIL("query says state %d after a move to %d", qp_state(qp), path[i]);
		if (path[i] == last)
			return 0;
	}
	return 0;
}

/* Each type with assorted capacities: what is reported is at least what was asked. */
static int check_qp_create(struct ibv_context *ctx)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	static const struct ibv_qp_cap caps[] = {
		{ 1, 1, 1, 1, 0 }, { 16, 16, 2, 2, 64 }, { 100, 3, 32, 32, 0 },
		{ 1000, 1000, 4, 1, 512 }, { 0, 8, 1, 1, 0 },
	};
	struct qp_env e;

	if (env_open(ctx, &e, 0))
		return 1;
	for (unsigned int t = 0; t < 3; t++) {
		for (unsigned int c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
			struct ibv_qp_init_attr a = {
				.send_cq = e.scq, .recv_cq = e.rcq, .qp_type = types[t],
				.cap = caps[c],
			}, qa;
			struct ibv_qp_attr q;
			struct ibv_qp *qp = ibv_create_qp(e.pd, &a);

			if (!qp)
				FAIL("type %d cap %u: %s", types[t], c, strerror(errno));
			if (a.cap.max_send_wr < caps[c].max_send_wr ||
			    a.cap.max_recv_wr < caps[c].max_recv_wr ||
			    a.cap.max_send_sge < caps[c].max_send_sge ||
			    a.cap.max_recv_sge < caps[c].max_recv_sge ||
			    a.cap.max_inline_data < caps[c].max_inline_data)
				FAIL("type %d cap %u: got %u/%u/%u/%u/%u", types[t], c,
				     a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge,
				     a.cap.max_recv_sge, a.cap.max_inline_data);
			if (ibv_query_qp(qp, &q, IBV_QP_CAP | IBV_QP_STATE, &qa))
				FAIL("ibv_query_qp: %s", strerror(errno));
			if (q.qp_state != IBV_QPS_RESET || q.cap.max_send_wr != a.cap.max_send_wr ||
			    q.cap.max_recv_wr != a.cap.max_recv_wr)
				FAIL("query: state %d send_wr %u recv_wr %u", q.qp_state,
				     q.cap.max_send_wr, q.cap.max_recv_wr);
			if (qp->qp_num < 2)
				FAIL("QP number %u", qp->qp_num);
			if (ibv_destroy_qp(qp))
				FAIL("ibv_destroy_qp: %s", strerror(errno));
		}
	}
	return env_close(&e);
}

/* Capacities above the device's limits fail with EINVAL. */
static int check_qp_create_bad(struct ibv_context *ctx)
{
	struct ibv_device_attr da;
	struct qp_env e;
	struct ibv_qp_init_attr a;
	const struct { const char *what; struct ibv_qp_cap cap; } bad[] = {
		{ "max_send_wr", { .max_send_wr = 0, .max_recv_wr = 1 } },
		{ "max_send_sge", { .max_send_wr = 1, .max_send_sge = 0 } },
		{ "max_inline_data 4096", { .max_send_wr = 1, .max_inline_data = 4096 } },
	};

	if (ibv_query_device(ctx, &da))
		FAIL("ibv_query_device: %s", strerror(errno));
	if (env_open(ctx, &e, 0))
		return 1;
	for (unsigned int i = 0; i < 3; i++) {
		struct ibv_qp *qp;

		memset(&a, 0, sizeof(a));
		a.send_cq = e.scq;
		a.recv_cq = e.rcq;
		a.qp_type = IBV_QPT_RC;
		a.cap = bad[i].cap;
		if (i == 0)
			a.cap.max_send_wr = da.max_qp_wr + 1;
		if (i == 1)
			a.cap.max_send_sge = da.max_sge + 1;
		errno = 0;
		if ((qp = ibv_create_qp(e.pd, &a))) {
			ibv_destroy_qp(qp);
			FAIL("%s above the limit: QP created", bad[i].what);
		}
		if (errno != EINVAL)
			FAIL("%s above the limit: %s, want EINVAL", bad[i].what, strerror(errno));
	}
	return env_close(&e);
}

/* The normal path for each type, then SQD -> RTS, ERR, RESET, and INIT again. */
static int check_qp_states(struct ibv_context *ctx)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	struct qp_env e;

	if (env_open(ctx, &e, 0))
		return 1;
	for (unsigned int t = 0; t < 3; t++) {
		struct ibv_qp *qp = make_qp(&e, types[t], 4, 1);

		if (!qp)
			FAIL("create: %s", strerror(errno));
		if (walk_to(&e, qp, IBV_QPS_SQD))
			FAIL("type %d: normal path", types[t]);
		/* SQD -> RTS; wait for the drain to finish as the verbs require. */
		for (int i = 0; i < 100; i++) {
			struct ibv_qp_attr q;
			struct ibv_qp_init_attr qi;

			if (ibv_query_qp(qp, &q, IBV_QP_STATE, &qi))
				FAIL("query: %s", strerror(errno));
			if (!q.sq_draining)
				break;
			usleep(10000);
		}
		struct ibv_qp_attr back = { .qp_state = IBV_QPS_RTS };

		if (ibv_modify_qp(qp, &back, IBV_QP_STATE) || qp_state(qp) != IBV_QPS_RTS)
			FAIL("type %d: SQD -> RTS", types[t]);
		if (to_state(&e, qp, IBV_QPS_ERR) || qp_state(qp) != IBV_QPS_ERR)
			FAIL("type %d: RTS -> ERR", types[t]);
		if (to_state(&e, qp, IBV_QPS_RESET) || qp_state(qp) != IBV_QPS_RESET)
			FAIL("type %d: ERR -> RESET", types[t]);
		if (to_state(&e, qp, IBV_QPS_INIT) || qp_state(qp) != IBV_QPS_INIT)
			FAIL("type %d: RESET -> INIT again", types[t]);
		if (ibv_destroy_qp(qp))
			FAIL("ibv_destroy_qp: %s", strerror(errno));
	}
	return env_close(&e);
}

/*
 * Transitions the state machine forbids, or with required attributes missing or
 * attributes out of range, fail with EINVAL and change nothing.
 */
static int check_qp_bad_modify(struct ibv_context *ctx)
{
	struct qp_env e;
	struct ibv_qp *qp, *ud;
	struct ibv_qp_attr a;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(qp = make_qp(&e, IBV_QPT_RC, 4, 1)) || !(ud = make_qp(&e, IBV_QPT_UD, 4, 1)))
		FAIL("create: %s", strerror(errno));
	if (to_state(&e, qp, IBV_QPS_RTR) != EINVAL || qp_state(qp) != IBV_QPS_RESET)
		FAIL("RESET -> RTR was not refused");
	if (to_state(&e, qp, IBV_QPS_RTS) != EINVAL || qp_state(qp) != IBV_QPS_RESET)
		FAIL("RESET -> RTS was not refused");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE) != EINVAL || qp_state(qp) != IBV_QPS_RESET)
		FAIL("RESET -> INIT without its required attributes was not refused");
	if (to_state(&e, qp, IBV_QPS_INIT))
		FAIL("RESET -> INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE) != EINVAL || qp_state(qp) != IBV_QPS_INIT)
		FAIL("INIT -> RTR without its required attributes was not refused");
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 2;
	if (!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT))
		FAIL("port 2 accepted");
	a.port_num = 1;
	a.pkey_index = 1;
	if (!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX))
		FAIL("pkey index 1 accepted");
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (to_state(&e, ud, IBV_QPS_INIT))
		FAIL("UD RESET -> INIT");
	a.qp_state = IBV_QPS_INIT;
	if (!ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS))
		FAIL("access flags accepted on a UD QP");
	if (ibv_destroy_qp(qp) || ibv_destroy_qp(ud))
		FAIL("ibv_destroy_qp: %s", strerror(errno));
	return env_close(&e);
}

/* What a modify sets is what a query reports. */
static int check_qp_query(struct ibv_context *ctx)
{
	struct qp_env e;
	struct ibv_qp *qp;
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(qp = make_qp(&e, IBV_QPT_RC, 8, 2)))
		FAIL("create: %s", strerror(errno));
	if (walk_to(&e, qp, IBV_QPS_RTS))
		return 1;
	/* Every standard attribute (IBV_QP_STATE up to IBV_QP_DEST_QPN). */
	if (ibv_query_qp(qp, &q, (1 << 21) - 1, &qi))
		FAIL("ibv_query_qp: %s", strerror(errno));
	fprintf(stderr, "state %d mtu %d rq_psn %#x sq_psn %#x dest %u timeout %u retry %u "
		"rnr %u min_rnr %u rd_atomic %u dest_rd_atomic %u access %#x port %u "
		"sgid_index %u hop_limit %u sig_all %d\n",
		q.qp_state, q.path_mtu, q.rq_psn, q.sq_psn, q.dest_qp_num, q.timeout,
		q.retry_cnt, q.rnr_retry, q.min_rnr_timer, q.max_rd_atomic,
		q.max_dest_rd_atomic, q.qp_access_flags, q.port_num,
		q.ah_attr.grh.sgid_index, q.ah_attr.grh.hop_limit, qi.sq_sig_all);
	if (q.qp_state != IBV_QPS_RTS || q.path_mtu != IBV_MTU_1024 || q.rq_psn != 0x123456 ||
	    q.sq_psn != 0x654321 || q.dest_qp_num != qp->qp_num || q.timeout != 14 ||
	    q.retry_cnt != 7 || q.rnr_retry != 7 || q.min_rnr_timer != 12 ||
	    q.max_rd_atomic < 3 || q.max_dest_rd_atomic < 3 ||
	    q.qp_access_flags != (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) ||
	    q.ah_attr.grh.sgid_index != e.gid_index || q.ah_attr.grh.hop_limit != 64 ||
	    memcmp(q.ah_attr.grh.dgid.raw, e.gid.raw, 16))
		FAIL("query does not report what was set");
	if (ibv_destroy_qp(qp))
		FAIL("ibv_destroy_qp: %s", strerror(errno));
	return env_close(&e);
}

static int post_recvs(struct ibv_qp *qp, int n, uint64_t first_id)
{
	static char buf[64];
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(buf), .lkey = 0 };

	for (int i = 0; i < n; i++) {
		struct ibv_recv_wr wr = { .wr_id = first_id + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		int ret = ibv_post_recv(qp, &wr, &bad);

		if (ret)
			FAIL("ibv_post_recv %d: %s", i, strerror(ret));
	}
	return 0;
}

/* Completions found within `ms` milliseconds, up to `max`. */
static int drain_cq(struct ibv_cq *cq, struct ibv_wc *wc, int max, int ms)
{
	int n = 0;

	for (int t = 0; t <= ms && n < max; t++) {
		int got = ibv_poll_cq(cq, max - n, wc + n);

		if (got < 0)
			return -1;
		n += got;
		if (n < max)
			usleep(1000);
	}
	return n;
}

/*
 * Moving to ERR flushes every posted receive with WR_FLUSH_ERR, in order, and the armed
 * CQ's channel gets an event.
 */
static int check_qp_err_flush(struct ibv_context *ctx)
{
	struct qp_env e;
	struct ibv_qp *qp;
	struct ibv_wc wc[16];
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	struct pollfd p;
	int n;

	if (env_open(ctx, &e, 1))
		return 1;
	if (!(qp = make_qp(&e, IBV_QPT_RC, 16, 1)))
		FAIL("create: %s", strerror(errno));
	if (walk_to(&e, qp, IBV_QPS_INIT) || post_recvs(qp, 8, 100))
		return 1;
	if (ibv_req_notify_cq(e.rcq, 0))
		FAIL("ibv_req_notify_cq: %s", strerror(errno));
	if (to_state(&e, qp, IBV_QPS_ERR))
		FAIL("to ERR: %s", strerror(errno));
	n = drain_cq(e.rcq, wc, 16, 2000);
	if (n != 8)
		FAIL("%d flush completions, want 8", n);
	for (int i = 0; i < 8; i++)
		if (wc[i].status != IBV_WC_WR_FLUSH_ERR || wc[i].wr_id != 100 + (uint64_t)i ||
		    wc[i].qp_num != qp->qp_num)
			FAIL("completion %d: status %d wr_id %llu qp %u", i, wc[i].status,
			     (unsigned long long)wc[i].wr_id, wc[i].qp_num);
	p = (struct pollfd){ .fd = e.ch->fd, .events = POLLIN };
	if (poll(&p, 1, 2000) != 1)
		FAIL("no completion event on the armed CQ");
	if (ibv_get_cq_event(e.ch, &ev_cq, &ev_ctx) || ev_cq != e.rcq)
		FAIL("ibv_get_cq_event: %s", strerror(errno));
	ibv_ack_cq_events(ev_cq, 1);
	if (ibv_destroy_qp(qp))
		FAIL("ibv_destroy_qp: %s", strerror(errno));
	return env_close(&e);
}

/* Seconds on the monotonic clock. */
static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Completions that arrive on `cq` within `ms` milliseconds. */
static int count_for(struct ibv_cq *cq, int ms)
{
	struct ibv_wc wc[64];
	int n = 0, got;

	for (double end = now() + ms / 1000.0; now() < end;) {
		got = ibv_poll_cq(cq, 64, wc);
		if (got < 0)
			return -1;
		n += got;
		if (!got)
			usleep(1000);
	}
	return n;
}

/*
 * In the error state the device flushes a send ring up to where the process's producer
 * index was at its last doorbell, not further. The process moves the index on by 300
 * (more than one run's budget of 256, so that the QP's work item flushes the rest) and
 * rings the doorbell, then at once moves it on by 100 more without one: 300 flush
 * completions come, not 400; its next doorbell brings the other 100.
 */
static int check_err_flush_recorded_producer(struct ibv_context *ctx)
{
	const uint64_t magic = 0xe1e1000000000000ull;
	static char buf[16];
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 512, .max_recv_wr = 1,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(buf) };
	struct ibv_send_wr wr = { .wr_id = magic, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct qp_env e;
	struct sq_ring sq;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint32_t prod;
	int first, second;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(cq = ibv_create_cq(ctx, 2048, NULL, NULL, 0)))
		FAIL("ibv_create_cq: %s", strerror(errno));
	a.send_cq = cq;
	a.recv_cq = e.rcq;
	if (!(qp = ibv_create_qp(e.pd, &a)))
		FAIL("ibv_create_qp: %s", strerror(errno));
	if (walk_to(&e, qp, IBV_QPS_INIT) || to_state(&e, qp, IBV_QPS_ERR))
		FAIL("to ERR: %s", strerror(errno));
	/* A send posted in ERR is flushed; its WQE shows where the ring is. */
	if (ibv_post_send(qp, &wr, &bad) || count_for(cq, 1000) != 1)
		FAIL("the send posted in ERR was not flushed once");
	if (!find_sq(&sq, magic))
		FAIL("the send ring is not in a mapping");
	if (sq.mask < 511)
		FAIL("a send ring of %u slots, want 512 or more", sq.mask + 1);
	prod = atomic_load(sq.prod);
	for (uint32_t i = 0; i < 400; i++) {
		struct rxe_send_wqe *w = sq_slot(&sq, prod + i);

		memcpy(w, sq_slot(&sq, prod - 1), (size_t)1 << sq.log2);
		w->wr.wr_id = magic + 1 + i;
	}
	atomic_store_explicit(sq.prod, (prod + 300) & sq.mask, memory_order_release);
	if (raw_doorbell(qp))
		FAIL("doorbell: %s", strerror(errno));
	atomic_store_explicit(sq.prod, (prod + 400) & sq.mask, memory_order_release);
	first = count_for(cq, 3000);
	if (raw_doorbell(qp))
		FAIL("doorbell: %s", strerror(errno));
	second = count_for(cq, 2000);
	fprintf(stderr, "flushed: %d after the doorbell at +300 (then +100 without one), %d after the next doorbell\n",
		first, second);
	if (first != 300 || second != 100)
		FAIL("want 300, then 100");
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

/*
 * A QP is destroyed in each state reachable by modify, with receives outstanding
 * (except in RESET, where none can be posted): the destroy succeeds and nothing of it
 * ever completes.
 */
static int check_qp_destroy_states(struct ibv_context *ctx)
{
	static const enum ibv_qp_state states[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
						    IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_ERR };
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	struct qp_env e;
	struct ibv_wc wc[32];

	if (env_open(ctx, &e, 0))
		return 1;
	for (unsigned int t = 0; t < 3; t++) {
		for (unsigned int s = 0; s < 6; s++) {
			struct ibv_qp *qp = make_qp(&e, types[t], 16, 1);
			int n;

			if (!qp)
				FAIL("create: %s", strerror(errno));
			if (states[s] == IBV_QPS_ERR) {
				/* Outstanding receives, then ERR: they are flushed... */
				if (walk_to(&e, qp, IBV_QPS_INIT) || post_recvs(qp, 8, 1))
					return 1;
			}
			if (walk_to(&e, qp, states[s]))
				return 1;
			if (states[s] != IBV_QPS_RESET && states[s] != IBV_QPS_ERR &&
			    post_recvs(qp, 8, 1))
				return 1;
			/* ...and their flush completions may still sit in the CQ. */
			drain_cq(e.rcq, wc, 32, 100);
			if (ibv_destroy_qp(qp))
				FAIL("type %d state %d: ibv_destroy_qp: %s", types[t], states[s],
				     strerror(errno));
			n = drain_cq(e.rcq, wc, 32, 100) + drain_cq(e.scq, wc, 32, 10);
			if (n)
				FAIL("type %d state %d: %d completions after destroy", types[t],
				     states[s], n);
		}
	}
	return env_close(&e);
}

/* A CQ in use by a QP, or a PD with a QP, cannot go (ib_core's EBUSY) and keeps working. */
static int check_busy(struct ibv_context *ctx)
{
	struct qp_env e;
	struct ibv_qp *qp;
	struct ibv_wc wc[8];
	int ret;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(qp = make_qp(&e, IBV_QPT_RC, 8, 1)))
		FAIL("create: %s", strerror(errno));
	if ((ret = ibv_destroy_cq(e.scq)) != EBUSY)
		FAIL("destroy of the send CQ of a QP: %s, want EBUSY", strerror(ret));
	if ((ret = ibv_destroy_cq(e.rcq)) != EBUSY)
		FAIL("destroy of the receive CQ of a QP: %s, want EBUSY", strerror(ret));
	if ((ret = ibv_dealloc_pd(e.pd)) != EBUSY)
		FAIL("dealloc of the PD of a QP: %s, want EBUSY", strerror(ret));
	/* All still work: the QP flushes into the CQ. */
	if (walk_to(&e, qp, IBV_QPS_INIT) || post_recvs(qp, 4, 7) ||
	    to_state(&e, qp, IBV_QPS_ERR))
		FAIL("QP unusable after the refused destroys");
	if (drain_cq(e.rcq, wc, 4, 2000) != 4)
		FAIL("CQ unusable after the refused destroy");
	if (ibv_destroy_qp(qp))
		FAIL("ibv_destroy_qp: %s", strerror(errno));
	return env_close(&e);
}

/* A CQ with completions nobody polled is destroyed without fuss. */
static int check_cq_destroy_unpolled(struct ibv_context *ctx)
{
	struct qp_env e;
	struct ibv_qp *qp;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(qp = make_qp(&e, IBV_QPT_UD, 16, 1)))
		FAIL("create: %s", strerror(errno));
	if (walk_to(&e, qp, IBV_QPS_INIT) || post_recvs(qp, 16, 1) ||
	    to_state(&e, qp, IBV_QPS_ERR))
		return 1;
	usleep(100000);
	if (ibv_destroy_qp(qp))
		FAIL("ibv_destroy_qp: %s", strerror(errno));
	return env_close(&e);
}

static int acked;

static void *ack_later(void *arg)
{
	usleep(1000 * 1000);
	acked = 1;
	ibv_ack_async_event(arg);
	return NULL;
}

/*
 * The send queue drain event is raised on the QP; a destroy of that QP while the event
 * is read but not acknowledged waits (in libibverbs) until a thread acknowledges it.
 */
static int check_qp_event_ack(struct ibv_context *ctx)
{
	struct qp_env e;
	struct ibv_qp *qp;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD, .en_sqd_async_notify = 1 };
	struct ibv_async_event ev;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	pthread_t th;
	double t0;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(qp = make_qp(&e, IBV_QPT_RC, 8, 1)))
		FAIL("create: %s", strerror(errno));
	if (walk_to(&e, qp, IBV_QPS_RTS))
		return 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY))
		FAIL("to SQD: %s", strerror(errno));
	if (poll(&p, 1, 3000) != 1)
		FAIL("no async event after SQD with notification");
	if (ibv_get_async_event(ctx, &ev))
		FAIL("ibv_get_async_event: %s", strerror(errno));
	if (ev.event_type != IBV_EVENT_SQ_DRAINED || ev.element.qp != qp)
		FAIL("event %d on %p, want SQ_DRAINED on the QP", ev.event_type, ev.element.qp);
	pthread_create(&th, NULL, ack_later, &ev);
	t0 = now();
	if (ibv_destroy_qp(qp))
		FAIL("ibv_destroy_qp: %s", strerror(errno));
	fprintf(stderr, "destroy returned after %.2f s, acked %d\n", now() - t0, acked);
	pthread_join(th, NULL);
	if (!acked || now() - t0 < 0.9)
		FAIL("the destroy did not wait for the acknowledgement");
	return env_close(&e);
}

/* QP_MANY QPs (300 unless told) of every type, created and destroyed in three rounds. */
static int check_qp_many(struct ibv_context *ctx)
{
	enum { MAX = 300 };
	static struct ibv_qp *qps[MAX];
	int N = env_count("QP_MANY", MAX);
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	struct qp_env e;

	if (env_open(ctx, &e, 0))
		return 1;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++)
			if (!(qps[i] = make_qp(&e, types[i % 3], 1 + i % 32, 1 + i % 4)))
				FAIL("round %d: create %d: %s", round, i, strerror(errno));
		for (int i = 0; i < N; i++)
			if (ibv_destroy_qp(qps[i]))
				FAIL("round %d: destroy %d: %s", round, i, strerror(errno));
	}
	return env_close(&e);
}

static void make_qps(struct ibv_context *ctx)
{
	struct qp_env e;

	if (env_open(ctx, &e, 1))
		return;
	for (int i = 0; i < 24; i++) {
		struct ibv_qp *qp = make_qp(&e, IBV_QPT_RC + i % 3, 16, 1);

		if (qp && walk_to(&e, qp, i % 2 ? IBV_QPS_INIT : IBV_QPS_RTS) == 0)
			post_recvs(qp, 4, 1);
	}
}

/* Children holding QPs in several states are killed with SIGKILL; the device stays usable. */
static int check_qp_killed(void)
{
	struct ibv_context *ctx;
	struct qp_env e;
	struct ibv_qp *qp;

	if (kill_children(8, make_qps))
		return 1;
	ctx = open_dev();
	if (!ctx || env_open(ctx, &e, 0))
		FAIL("device unusable after killed users");
	qp = make_qp(&e, IBV_QPT_RC, 4, 1);
	if (!qp || ibv_destroy_qp(qp))
		FAIL("QP create/destroy after killed users: %s", strerror(errno));
	env_close(&e);
	ibv_close_device(ctx);
	return 0;
}

/* ---- Shared receive queues ---- */

static struct ibv_srq *make_srq(struct ibv_pd *pd, int wr, int sge, int limit)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = wr, .max_sge = sge,
						 .srq_limit = limit } };

	return ibv_create_srq(pd, &a);
}

static int post_srq_recvs(struct ibv_srq *srq, int n)
{
	static char buf[64];
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = sizeof(buf) };

	for (int i = 0; i < n; i++) {
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
		int ret = ibv_post_srq_recv(srq, &wr, &bad);

		if (ret)
			FAIL("ibv_post_srq_recv %d: %s", i, strerror(ret));
	}
	return 0;
}

/* Create, arm the limit, resize with receives posted, query what was set. */
static int check_srq_modify(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_srq *srq;
	struct ibv_srq_attr a;
	int ret;

	if (!pd || !(srq = make_srq(pd, 16, 2, 0)))
		FAIL("setup: %s", strerror(errno));
	if (ibv_query_srq(srq, &a) || a.max_wr < 16 || a.max_sge < 2 || a.srq_limit != 0)
		FAIL("query after create: max_wr %u max_sge %u limit %u", a.max_wr, a.max_sge,
		     a.srq_limit);
	a.srq_limit = 4;
	if ((ret = ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT)))
		FAIL("arm the limit: %s", strerror(ret));
	if (post_srq_recvs(srq, 10))
		return 1;
	a.max_wr = 100;
	if ((ret = ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR)))
		FAIL("resize to 100: %s", strerror(ret));
	/* The resized ring takes more work. */
	if (post_srq_recvs(srq, 80))
		return 1;
	if (ibv_query_srq(srq, &a) || a.max_wr < 100 || a.srq_limit != 4)
		FAIL("query after resize: max_wr %u limit %u", a.max_wr, a.srq_limit);
	if (ibv_destroy_srq(srq) || ibv_dealloc_pd(pd))
		FAIL("teardown: %s", strerror(errno));
	return 0;
}

/* Sizes and limits out of range fail with EINVAL. */
static int check_srq_bad(struct ibv_context *ctx)
{
	struct ibv_device_attr da;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_srq *srq;
	struct ibv_srq_attr a;

	if (!pd || ibv_query_device(ctx, &da))
		FAIL("setup: %s", strerror(errno));
	if ((srq = make_srq(pd, da.max_srq_wr + 1, 1, 0)) || errno != EINVAL)
		FAIL("max_srq_wr + 1: %s", srq ? "created" : strerror(errno));
	if ((srq = make_srq(pd, 16, da.max_srq_sge + 1, 0)) || errno != EINVAL)
		FAIL("max_srq_sge + 1: %s", srq ? "created" : strerror(errno));
	if (!(srq = make_srq(pd, 16, 1, 0)))
		FAIL("create: %s", strerror(errno));
	a.srq_limit = 1000;
	if (ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT) != EINVAL)
		FAIL("a limit above the size was accepted");
	if (ibv_destroy_srq(srq) || ibv_dealloc_pd(pd))
		FAIL("teardown: %s", strerror(errno));
	return 0;
}

/*
 * An SRQ used by a QP cannot go (ib_core's EBUSY) and keeps working; with its limit
 * armed and receives outstanding it is destroyed once the QP is gone.
 */
static int check_srq_busy(struct ibv_context *ctx)
{
	struct qp_env e;
	struct ibv_srq *srq;
	struct ibv_srq_attr a;
	struct ibv_qp *qp;
	int ret;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(srq = make_srq(e.pd, 32, 1, 8)))
		FAIL("create: %s", strerror(errno));
	struct ibv_qp_init_attr qa = { .send_cq = e.scq, .recv_cq = e.rcq, .srq = srq,
				       .qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 4,
								       .max_send_sge = 1 } };
	if (!(qp = ibv_create_qp(e.pd, &qa)))
		FAIL("create QP on the SRQ: %s", strerror(errno));
	if ((ret = ibv_destroy_srq(srq)) != EBUSY)
		FAIL("destroy of an SRQ in use: %s, want EBUSY", strerror(ret));
	if (post_srq_recvs(srq, 20) || ibv_query_srq(srq, &a))
		FAIL("SRQ unusable after the refused destroy");
	if (ibv_destroy_qp(qp))
		FAIL("ibv_destroy_qp: %s", strerror(errno));
	if ((ret = ibv_destroy_srq(srq)))
		FAIL("destroy with receives outstanding and the limit armed: %s", strerror(ret));
	return env_close(&e);
}

/*
 * The documented sequence for a QP on an SRQ: move it to ERR, wait for
 * IBV_EVENT_QP_LAST_WQE_REACHED, drain the CQ, destroy the QP.
 */
static int check_srq_last_wqe(struct ibv_context *ctx)
{
	struct qp_env e;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_async_event ev;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_wc wc[8];

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(srq = make_srq(e.pd, 32, 1, 0)) || post_srq_recvs(srq, 8))
		FAIL("SRQ: %s", strerror(errno));
	struct ibv_qp_init_attr qa = { .send_cq = e.scq, .recv_cq = e.rcq, .srq = srq,
				       .qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 4,
								       .max_send_sge = 1 } };
	if (!(qp = ibv_create_qp(e.pd, &qa)))
		FAIL("create QP on the SRQ: %s", strerror(errno));
	if (walk_to(&e, qp, IBV_QPS_RTS) || to_state(&e, qp, IBV_QPS_ERR))
		FAIL("to ERR");
	if (poll(&p, 1, 3000) != 1)
		FAIL("no async event after ERR");
	if (ibv_get_async_event(ctx, &ev))
		FAIL("ibv_get_async_event: %s", strerror(errno));
	if (ev.event_type != IBV_EVENT_QP_LAST_WQE_REACHED || ev.element.qp != qp)
		FAIL("event %d, want QP_LAST_WQE_REACHED on the QP", ev.event_type);
	ibv_ack_async_event(&ev);
	drain_cq(e.rcq, wc, 8, 100);
	if (ibv_destroy_qp(qp) || ibv_destroy_srq(srq))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

static struct ibv_ah *make_ah(struct qp_env *e, int sgid_index);

/*
 * Datagrams from one UD QP to another on the same device, received from an SRQ with its
 * limit armed: each receive gets the 40-byte GRH and the payload intact, the limit fires
 * IBV_EVENT_SRQ_LIMIT_REACHED once when fewer receives than the limit are left, and is
 * disarmed by it. The event, read and not acknowledged, makes the SRQ's destroy wait
 * (in libibverbs) until a thread acknowledges it.
 */
static int check_srq_limit_event(struct ibv_context *ctx)
{
	enum { POSTED = 8, LIMIT = 4, SENT = 5, LEN = 100 };
	static char rbuf[POSTED][40 + LEN], sbuf[LEN];
	struct qp_env e;
	struct ibv_srq *srq;
	struct ibv_qp *tx, *rx;
	struct ibv_mr *rmr, *smr;
	struct ibv_ah *ah;
	struct ibv_srq_attr sa = { .srq_limit = LIMIT };
	struct ibv_async_event ev;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_wc wc[POSTED];
	pthread_t th;
	double t0;
	int got = 0;

	if (env_open(ctx, &e, 0))
		return 1;
	rmr = ibv_reg_mr(e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	smr = ibv_reg_mr(e.pd, sbuf, sizeof(sbuf), 0);
	if (!rmr || !smr || !(srq = make_srq(e.pd, 16, 1, 0)))
		FAIL("setup: %s", strerror(errno));
	for (int i = 0; i < POSTED; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)rbuf[i], .length = sizeof(rbuf[i]),
				       .lkey = rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_srq_recv(srq, &wr, &bad))
			FAIL("ibv_post_srq_recv: %s", strerror(errno));
	}
	if (ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT))
		FAIL("arm the limit: %s", strerror(errno));
	struct ibv_qp_init_attr ta = { .send_cq = e.scq, .recv_cq = e.scq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 8, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp_init_attr ra = { .send_cq = e.rcq, .recv_cq = e.rcq, .srq = srq,
				       .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 1, .max_send_sge = 1 } };
	if (!(tx = ibv_create_qp(e.pd, &ta)) || !(rx = ibv_create_qp(e.pd, &ra)))
		FAIL("create QPs: %s", strerror(errno));
	if (walk_to(&e, tx, IBV_QPS_RTS) || walk_to(&e, rx, IBV_QPS_RTS))
		return 1;
	if (!(ah = make_ah(&e, e.gid_index)))
		FAIL("ibv_create_ah: %s", strerror(errno));
	for (int i = 0; i < SENT; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)sbuf, .length = LEN, .lkey = smr->lkey };
		struct ibv_send_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
					  .wr = { .ud = { .ah = ah, .remote_qpn = rx->qp_num,
							  .remote_qkey = 0x11111111 } } }, *bad;

		memset(sbuf, 'a' + i, LEN);
		if (ibv_post_send(tx, &wr, &bad))
			FAIL("ibv_post_send %d: %s", i, strerror(errno));
		/* One at a time, so each datagram carries its own letter. */
		if (drain_cq(e.scq, wc, 1, 3000) != 1 || wc[0].status != IBV_WC_SUCCESS)
			FAIL("send %d did not complete", i);
	}
	for (int tries = 0; got < SENT && tries < 300; tries++) {
		int n = ibv_poll_cq(e.rcq, POSTED - got, wc + got);

		if (n < 0)
			FAIL("ibv_poll_cq");
		got += n;
		if (got < SENT)
			usleep(10000);
	}
	if (got != SENT)
		FAIL("%d of %d datagrams received", got, SENT);
	for (int i = 0; i < SENT; i++) {
		char *b = rbuf[wc[i].wr_id];

		if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RECV ||
		    wc[i].byte_len != 40 + LEN || !(wc[i].wc_flags & IBV_WC_GRH) ||
		    wc[i].src_qp != tx->qp_num || wc[i].wr_id != (uint64_t)i)
			FAIL("receive %d: status %d opcode %d len %u flags %#x src %u wr_id %llu", i,
			     wc[i].status, wc[i].opcode, wc[i].byte_len, wc[i].wc_flags,
			     wc[i].src_qp, (unsigned long long)wc[i].wr_id);
		/* The IPv4 form of the GRH: 20 zero bytes, then the IPv4 header. */
		for (int j = 0; j < 20; j++)
			if (b[j])
				FAIL("receive %d: GRH byte %d is %d", i, j, b[j]);
		if ((b[20] & 0xf0) != 0x40)
			FAIL("receive %d: no IPv4 header in the GRH", i);
		for (int j = 0; j < LEN; j++)
			if (b[40 + j] != 'a' + i)
				FAIL("receive %d: payload byte %d is %d", i, j, b[40 + j]);
	}
	if (poll(&p, 1, 3000) != 1)
		FAIL("no async event with %d of %d receives left (limit %d)", POSTED - SENT,
		     POSTED, LIMIT);
	if (ibv_get_async_event(ctx, &ev))
		FAIL("ibv_get_async_event: %s", strerror(errno));
	if (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED || ev.element.srq != srq)
		FAIL("event %d, want SRQ_LIMIT_REACHED on the SRQ", ev.event_type);
	/* Left unacknowledged: the SRQ's destroy must wait for it (below). */
	if (poll(&p, 1, 200) != 0)
		FAIL("a second event");
	if (ibv_query_srq(srq, &sa) || sa.srq_limit != 0)
		FAIL("limit %u after the event, want 0 (disarmed)", sa.srq_limit);
	if (ibv_destroy_qp(tx) || ibv_destroy_qp(rx) || ibv_destroy_ah(ah))
		FAIL("teardown: %s", strerror(errno));
	acked = 0;
	pthread_create(&th, NULL, ack_later, &ev);
	t0 = now();
	if (ibv_destroy_srq(srq))
		FAIL("ibv_destroy_srq: %s", strerror(errno));
	fprintf(stderr, "SRQ destroy returned after %.2f s, acked %d\n", now() - t0, acked);
	pthread_join(th, NULL);
	if (!acked || now() - t0 < 0.9)
		FAIL("the SRQ's destroy did not wait for the acknowledgement of its event");
	if (ibv_dereg_mr(rmr) || ibv_dereg_mr(smr))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

/*
 * A UD QP whose receive CQ holds one completion takes three datagrams: the second
 * completion finds the CQ full. The CQ's consumer gets IBV_EVENT_CQ_ERR and the QP,
 * which could not report its work (a local work queue catastrophic error), enters the
 * error state with IBV_EVENT_QP_FATAL.
 */
static int check_qp_fatal_cq_overrun(struct ibv_context *ctx)
{
	enum { LEN = 64 };
	static char rbuf[4][40 + LEN], sbuf[LEN];
	struct qp_env e;
	struct ibv_cq *small;
	struct ibv_qp *tx, *rx;
	struct ibv_mr *rmr, *smr;
	struct ibv_ah *ah;
	struct ibv_async_event ev;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_wc wc[4];
	int cq_err = 0, fatal = 0;

	if (env_open(ctx, &e, 0))
		return 1;
	rmr = ibv_reg_mr(e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	smr = ibv_reg_mr(e.pd, sbuf, sizeof(sbuf), 0);
	small = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	if (!rmr || !smr || !small)
		FAIL("setup: %s", strerror(errno));
	struct ibv_qp_init_attr ta = { .send_cq = e.scq, .recv_cq = e.scq, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 1,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp_init_attr ra = { .send_cq = e.scq, .recv_cq = small, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	if (!(tx = ibv_create_qp(e.pd, &ta)) || !(rx = ibv_create_qp(e.pd, &ra)))
		FAIL("create QPs: %s", strerror(errno));
	if (walk_to(&e, tx, IBV_QPS_RTS) || walk_to(&e, rx, IBV_QPS_RTS))
		return 1;
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)rbuf[i], .length = sizeof(rbuf[i]),
				       .lkey = rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(rx, &wr, &bad))
			FAIL("ibv_post_recv: %s", strerror(errno));
	}
	fprintf(stderr, "receive CQ holds %d\n", small->cqe);
	if (!(ah = make_ah(&e, e.gid_index)))
		FAIL("ibv_create_ah: %s", strerror(errno));
	for (int i = 0; i < small->cqe + 2; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)sbuf, .length = LEN, .lkey = smr->lkey };
		struct ibv_send_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
					  .wr = { .ud = { .ah = ah, .remote_qpn = rx->qp_num,
							  .remote_qkey = 0x11111111 } } }, *bad;

		if (ibv_post_send(tx, &wr, &bad))
			FAIL("ibv_post_send %d: %s", i, strerror(errno));
		if (drain_cq(e.scq, wc, 1, 3000) != 1 || wc[0].status != IBV_WC_SUCCESS)
			FAIL("send %d did not complete", i);
	}
	/* Both events, in either order, within a few seconds. */
	for (int tries = 0; (!cq_err || !fatal) && tries < 2; tries++) {
		if (poll(&p, 1, 3000) != 1)
			break;
		if (ibv_get_async_event(ctx, &ev))
			FAIL("ibv_get_async_event: %s", strerror(errno));
		if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == small)
			cq_err++;
		else if (ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == rx)
			fatal++;
		else
			FAIL("unexpected event %d", ev.event_type);
		ibv_ack_async_event(&ev);
	}
	fprintf(stderr, "CQ_ERR %d, QP_FATAL %d, QP state %d\n", cq_err, fatal, qp_state(rx));
	if (!cq_err || !fatal)
		FAIL("want IBV_EVENT_CQ_ERR on the CQ and IBV_EVENT_QP_FATAL on the QP");
	if (qp_state(rx) != IBV_QPS_ERR)
		FAIL("the QP is in state %d, not ERR", qp_state(rx));
	/* The completion that fitted is the oldest one. */
	if (ibv_poll_cq(small, 4, wc) < 1 || wc[0].wr_id != 0 || wc[0].status != IBV_WC_SUCCESS)
		FAIL("the first receive did not complete");
	if (ibv_destroy_qp(tx) || ibv_destroy_qp(rx) || ibv_destroy_ah(ah) ||
	    ibv_destroy_cq(small) || ibv_dereg_mr(rmr) || ibv_dereg_mr(smr))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

/*
 * An RC QP whose peer does not exist runs out of retries: each of its WQEs completes
 * exactly once and in order, the oldest with RETRY_EXC_ERR, the others with
 * WR_FLUSH_ERR, and nothing more arrives.
 */
static int check_qp_retry_exceeded_once(struct ibv_context *ctx)
{
	enum { N = 3, LEN = 64 };
	static char buf[LEN];
	struct qp_env e;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc[8];
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	int got = 0;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(mr = ibv_reg_mr(e.pd, buf, sizeof(buf), 0)) || !(qp = make_qp(&e, IBV_QPT_RC, 8, 1)) ||
	    walk_to(&e, qp, IBV_QPS_INIT))
		FAIL("setup: %s", strerror(errno));
	/* A peer QP number no QP has: nothing ever answers. */
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = (qp->qp_num + 0x7000) & 0xffffff;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = e.gid;
	a.ah_attr.grh.sgid_index = e.gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("RTR: %s", strerror(errno));
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = 8, .retry_cnt = 1,
				  .rnr_retry = 1, .max_rd_atomic = 1 };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("RTS: %s", strerror(errno));
	for (int i = 0; i < N; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = LEN, .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 10 + i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		if (ibv_post_send(qp, &wr, &bad))
			FAIL("ibv_post_send: %s", strerror(errno));
	}
	got = drain_cq(e.scq, wc, 8, 5000);
	/* Anything completing twice would come by now. */
	usleep(300000);
	if (got >= 0 && got < 8)
		got += ibv_poll_cq(e.scq, 8 - got, wc + got);
	for (int i = 0; i < got; i++)
		fprintf(stderr, "completion %d: wr_id %llu status %s\n", i,
			(unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
	if (got != N)
		FAIL("%d completions, want %d (one for each WQE)", got, N);
	if (wc[0].wr_id != 10 || wc[0].status != IBV_WC_RETRY_EXC_ERR)
		FAIL("the oldest WQE did not end with RETRY_EXC_ERR");
	for (int i = 1; i < N; i++)
		if (wc[i].wr_id != 10u + i || wc[i].status != IBV_WC_WR_FLUSH_ERR)
			FAIL("completion %d is not WQE %d flushed", i, 10 + i);
	if (qp_state(qp) != IBV_QPS_ERR)
		FAIL("the QP is not in the error state");
	if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

/* ---- Address handles, memory regions and windows, multicast ---- */

static struct ibv_ah *make_ah(struct qp_env *e, int sgid_index)
{
	struct ibv_ah_attr a = {
		.is_global = 1,
		.grh = { .dgid = e->gid, .sgid_index = sgid_index, .hop_limit = 64 },
		.port_num = 1,
	};

	return ibv_create_ah(e->pd, &a);
}

/* AHs for our own GID, many times over; an empty source GID entry fails. */
static int check_ah(struct ibv_context *ctx)
{
	enum { N = 200 };
	static struct ibv_ah *ahs[N];
	struct qp_env e;
	struct ibv_ah *ah;
	int ret;

	if (env_open(ctx, &e, 0))
		return 1;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++)
			if (!(ahs[i] = make_ah(&e, e.gid_index)))
				FAIL("round %d: ibv_create_ah %d: %s", round, i, strerror(errno));
		if ((ret = ibv_dealloc_pd(e.pd)) != EBUSY)
			FAIL("dealloc of a PD with AHs: %s, want EBUSY", strerror(ret));
		for (int i = 0; i < N; i++)
			if (ibv_destroy_ah(ahs[i]))
				FAIL("round %d: ibv_destroy_ah %d: %s", round, i, strerror(errno));
	}
	/* Entry 200 of the GID table is empty (eth0 has a handful of addresses). */
	if ((ah = make_ah(&e, 200))) {
		ibv_destroy_ah(ah);
		FAIL("an AH with an empty source GID entry was created");
	}
	return env_close(&e);
}

/* MRs of several sizes and access flags: distinct keys; refused flags; PD busy. */
static int check_mr(struct ibv_context *ctx)
{
	enum { N = 256 };
	static struct ibv_mr *mrs[N];
	static const int access[] = {
		IBV_ACCESS_LOCAL_WRITE,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
		0,
	};
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	size_t len = 1 << 20;
	char *buf = malloc(len);
	struct ibv_mr *mr;
	int ret;

	if (!pd || !buf)
		FAIL("setup: %s", strerror(errno));
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++) {
			size_t l = 1 + (size_t)i * 4093 % len;

			if (!(mrs[i] = ibv_reg_mr(pd, buf, l, access[i % 4])))
				FAIL("round %d: ibv_reg_mr %d: %s", round, i, strerror(errno));
			for (int j = 0; j < i; j++)
				if (mrs[j]->lkey == mrs[i]->lkey)
					FAIL("two MRs with lkey %#x", mrs[i]->lkey);
		}
		if ((ret = ibv_dealloc_pd(pd)) != EBUSY)
			FAIL("dealloc of a PD with MRs: %s, want EBUSY", strerror(ret));
		for (int i = 0; i < N; i++)
			if (ibv_dereg_mr(mrs[i]))
				FAIL("round %d: ibv_dereg_mr %d: %s", round, i, strerror(errno));
	}
	/* Remote write without local write is refused (ib_core's rule). */
	if ((mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE))) {
		ibv_dereg_mr(mr);
		FAIL("remote write without local write was registered");
	}
	/* Memory that is not mapped cannot be pinned. */
	if ((mr = ibv_reg_mr(pd, (void *)8192, 4096, IBV_ACCESS_LOCAL_WRITE))) {
		ibv_dereg_mr(mr);
		FAIL("unmapped memory was registered");
	}
	free(buf);
	return ibv_dealloc_pd(pd) ? 1 : 0;
}

/* Memory windows of both types: allocated with an rkey, deallocated; PD busy meanwhile. */
static int check_mw(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mw *mw1, *mw2;
	int ret;

	if (!pd)
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	if (!(mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1)) || !(mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2)))
		FAIL("ibv_alloc_mw: %s", strerror(errno));
	if (mw1->rkey == mw2->rkey)
		FAIL("two MWs with rkey %#x", mw1->rkey);
	if ((ret = ibv_dealloc_pd(pd)) != EBUSY)
		FAIL("dealloc of a PD with MWs: %s, want EBUSY", strerror(ret));
	if (ibv_dealloc_mw(mw1) || ibv_dealloc_mw(mw2))
		FAIL("ibv_dealloc_mw: %s", strerror(errno));
	return ibv_dealloc_pd(pd) ? 1 : 0;
}

/* ---- Conformance: where the verbs decide, as a NIC behaves ---- */

/* The one completion of `cq` within 3 s, or a failure naming `what`. */
static int one_completion(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	int n = drain_cq(cq, wc, 1, 3000);

	if (n != 1)
		FAIL("%s: %d completions, want 1", what, n);
	return 0;
}

/*
 * An RC QP connected to itself that moves data: as walk_to(RTS), but sending from the
 * PSN it expects (to_state's two PSNs differ, which query checks tell apart).
 */
static struct ibv_qp *rc_loop(struct qp_env *e)
{
	struct ibv_qp *qp = make_qp(e, IBV_QPT_RC, 8, 1);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = 0x123456, .timeout = 14,
				 .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 3 };

	if (!qp || walk_to(e, qp, IBV_QPS_RTR) ||
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		return NULL;
	return qp;
}

/*
 * Inline data is a payload to send: an RDMA READ or an atomic posted with
 * IBV_SEND_INLINE has nowhere for what it brings back, and completes with
 * LOC_QP_OP_ERR or LOC_PROT_ERR (not a length error), its own wr_id, and no effect.
 */
static int check_inline_not_for_read(struct ibv_context *ctx)
{
	static uint64_t buf[4];
	const enum ibv_wr_opcode ops[] = { IBV_WR_RDMA_READ, IBV_WR_ATOMIC_FETCH_AND_ADD };
	struct qp_env e;
	struct ibv_mr *mr;
	struct ibv_wc wc;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(mr = ibv_reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
		FAIL("ibv_reg_mr: %s", strerror(errno));
	for (unsigned int i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct ibv_qp *qp = rc_loop(&e);
		struct ibv_sge sge = { .addr = (uintptr_t)&buf[0], .length = 8, .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 40 + i, .sg_list = &sge, .num_sge = 1,
					  .opcode = ops[i],
					  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE }, *bad;
		int ret;

		buf[0] = 0x1111;
		buf[2] = 0x2222;
		if (ops[i] == IBV_WR_RDMA_READ)
			wr.wr.rdma = (typeof(wr.wr.rdma)){ .remote_addr = (uintptr_t)&buf[2],
							   .rkey = mr->rkey };
		else
			wr.wr.atomic = (typeof(wr.wr.atomic)){ .remote_addr = (uintptr_t)&buf[2],
							       .compare_add = 1, .rkey = mr->rkey };
		if (!qp)
			FAIL("QP: %s", strerror(errno));
		if ((ret = ibv_post_send(qp, &wr, &bad))) {
			fprintf(stderr, "opcode %d with inline refused at post: %s\n", ops[i],
				strerror(ret));
		} else {
			if (one_completion(e.scq, &wc, "inline READ or atomic"))
				return 1;
			fprintf(stderr, "opcode %d with inline: status %s\n", ops[i],
				ibv_wc_status_str(wc.status));
			if (wc.wr_id != 40 + i || (wc.status != IBV_WC_LOC_QP_OP_ERR &&
						   wc.status != IBV_WC_LOC_PROT_ERR))
				FAIL("wr_id %llu status %s, want %u and LOC_QP_OP_ERR or LOC_PROT_ERR",
				     (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
				     40 + i);
		}
		if (buf[0] != 0x1111 || buf[2] != 0x2222)
			FAIL("memory changed: %#llx %#llx", (unsigned long long)buf[0],
			     (unsigned long long)buf[2]);
		if (ibv_destroy_qp(qp))
			FAIL("ibv_destroy_qp: %s", strerror(errno));
	}
	if (ibv_dereg_mr(mr))
		FAIL("ibv_dereg_mr: %s", strerror(errno));
	return env_close(&e);
}

/* Connects RC QP `qp`, in INIT, to `peer` on the same device, and moves it to RTS. */
static int rc_connect(struct qp_env *e, struct ibv_qp *qp, struct ibv_qp *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = peer->qp_num, .rq_psn = 0x2000,
				 .max_dest_rd_atomic = 3, .min_rnr_timer = 12,
				 .ah_attr = { .is_global = 1, .port_num = 1,
					      .grh = { .dgid = e->gid, .sgid_index = e->gid_index,
						       .hop_limit = 64 } } };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 0x2000, .timeout = 14,
				  .retry_cnt = 2, .rnr_retry = 7, .max_rd_atomic = 3 };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Two new RC QPs connected to each other, in RTS: 0, or -1. */
static int rc_pair(struct qp_env *e, struct ibv_qp **qp, struct ibv_qp **peer)
{
	*qp = make_qp(e, IBV_QPT_RC, 4, 1);
	*peer = make_qp(e, IBV_QPT_RC, 4, 1);
	if (!*qp || !*peer || to_state(e, *qp, IBV_QPS_INIT) || to_state(e, *peer, IBV_QPS_INIT) ||
	    rc_connect(e, *qp, *peer) || rc_connect(e, *peer, *qp))
		return -1;
	return 0;
}

/*
 * The status of an RDMA READ of 8 bytes at `addr` through `rkey` into `into`, by a new
 * RC QP connected to another new one, which answers (a responder that refuses the key
 * moves its QP to the error state, as the requester's once the NAK arrives); -1 if it
 * could not run.
 */
static int read_status(struct qp_env *e, struct ibv_mr *into, uint64_t addr, uint32_t rkey)
{
	struct ibv_qp *qp, *peer;
	struct ibv_sge sge = { .addr = (uintptr_t)into->addr, .length = 8, .lkey = into->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = addr, .rkey = rkey } }, *bad;
	struct ibv_wc wc;

	if (rc_pair(e, &qp, &peer) || ibv_post_send(qp, &wr, &bad) ||
	    one_completion(e->scq, &wc, "READ") || ibv_destroy_qp(qp) || ibv_destroy_qp(peer))
		return -1;
	return wc.status;
}

/*
 * Reregisters `mr` with `flags` (IBV_REREG_MR_CHANGE_*, which have the kernel's values)
 * over its own memory: 0, with the keys the kernel answered in `mr`, or the errno.
 * Through the command itself: librxe offers no ibv_rereg_mr() (ENOSYS), though rxe
 * implements the verb.
 */
static int rereg(struct ibv_mr *mr, uint32_t flags, struct ibv_pd *pd, uint32_t access)
{
	struct ib_uverbs_rereg_mr_resp resp = { 0 };
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_rereg_mr cmd;
	} c = {
		.hdr = { .command = IB_USER_VERBS_CMD_REREG_MR, .in_words = sizeof(c) / 4,
			 .out_words = sizeof(resp) / 4 },
		.cmd = { .response = (uintptr_t)&resp, .mr_handle = mr->handle, .flags = flags,
			 .start = (uintptr_t)mr->addr, .length = mr->length,
			 .hca_va = (uintptr_t)mr->addr, .pd_handle = pd ? pd->handle : 0,
			 .access_flags = access },
	};

	if (write(mr->context->cmd_fd, &c, sizeof(c)) != sizeof(c))
		return errno;
	mr->lkey = resp.lkey;
	mr->rkey = resp.rkey;
	return 0;
}

/*
 * Reregistration of an MR's PD and rights, in place. An MR of another PD than the
 * reading QP's is refused a READ; moved to the QP's PD it serves one (with the data,
 * through the key the call returned), and its old PD can go though the MR stays; with
 * remote read taken away it refuses the READ again, given back it serves it. An MR
 * registered without local write (its pages pinned read-only) is refused writing
 * rights with EACCES, and a new translation is refused with EOPNOTSUPP (neither driver
 * offers it).
 */
static int check_mr_rereg(struct ibv_context *ctx)
{
	static uint64_t src[512] __attribute__((aligned(4096))), dst[512];
	const int rd = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *mr, *into, *ro;
	struct ibv_pd *other;
	struct qp_env e;
	int st, ret;

	if (env_open(ctx, &e, 0))
		return 1;
	src[0] = 0x5eed5eed5eed5eedull;
	if (!(other = ibv_alloc_pd(ctx)) || !(mr = ibv_reg_mr(other, src, sizeof(src), rd)) ||
	    !(into = ibv_reg_mr(e.pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(ro = ibv_reg_mr(e.pd, src, sizeof(src), IBV_ACCESS_REMOTE_READ)))
		FAIL("setup: %s", strerror(errno));
	if ((st = read_status(&e, into, (uintptr_t)src, mr->rkey)) != IBV_WC_REM_ACCESS_ERR)
		FAIL("READ through another PD's MR: %d, want REM_ACCESS_ERR", st);
	if ((ret = rereg(mr, IBV_REREG_MR_CHANGE_PD, e.pd, 0)))
		FAIL("rereg to the QP's PD: %s", strerror(ret));
	if ((st = read_status(&e, into, (uintptr_t)src, mr->rkey)) != IBV_WC_SUCCESS ||
	    dst[0] != src[0])
		FAIL("READ after the move: %d, data %#llx", st, (unsigned long long)dst[0]);
	if (ibv_dealloc_pd(other))
		FAIL("the MR's old PD did not go: %s", strerror(errno));
	if ((ret = rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, IBV_ACCESS_LOCAL_WRITE)))
		FAIL("rereg to local write only: %s", strerror(ret));
	if ((st = read_status(&e, into, (uintptr_t)src, mr->rkey)) != IBV_WC_REM_ACCESS_ERR)
		FAIL("READ without remote read: %d, want REM_ACCESS_ERR", st);
	if ((ret = rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, rd)))
		FAIL("rereg back to remote read: %s", strerror(ret));
	dst[0] = 0;
	if ((st = read_status(&e, into, (uintptr_t)src, mr->rkey)) != IBV_WC_SUCCESS ||
	    dst[0] != src[0])
		FAIL("READ with remote read again: %d, data %#llx", st,
		     (unsigned long long)dst[0]);
	if ((ret = rereg(ro, IBV_REREG_MR_CHANGE_ACCESS, NULL, rd)) != EACCES)
		FAIL("local write for read-only pages: %s, want EACCES", strerror(ret));
	if ((ret = rereg(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, 0)) != EOPNOTSUPP)
		FAIL("a new translation: %s, want EOPNOTSUPP", strerror(ret));
	if (ibv_dereg_mr(mr) || ibv_dereg_mr(into) || ibv_dereg_mr(ro))
		FAIL("ibv_dereg_mr: %s", strerror(errno));
	return env_close(&e);
}

/*
 * An MR with a window bound to it keeps its PD and rights: the window was bound within
 * that PD, to those rights, and a move would let a window of one PD open memory of
 * another. Reregistration is refused with EBUSY, and the window still serves a READ;
 * once the window is gone, the same call succeeds.
 */
static int check_mr_rereg_window(struct ibv_context *ctx)
{
	static uint64_t src[512] __attribute__((aligned(4096))), dst[512];
	const int rd = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;
	struct ibv_mw_bind bind = { .send_flags = IBV_SEND_SIGNALED,
				    .bind_info = { .addr = (uintptr_t)src, .length = sizeof(src),
						   .mw_access_flags = IBV_ACCESS_REMOTE_READ } };
	struct ibv_mr *mr, *into;
	struct ibv_pd *other;
	struct ibv_qp *qp;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	struct qp_env e;
	int st, ret;

	if (env_open(ctx, &e, 0))
		return 1;
	src[0] = 0x600d600d600d600dull;
	if (!(other = ibv_alloc_pd(ctx)) || !(mr = ibv_reg_mr(e.pd, src, sizeof(src), rd)) ||
	    !(into = ibv_reg_mr(e.pd, dst, sizeof(dst), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1)) || !(qp = rc_loop(&e)))
		FAIL("setup: %s", strerror(errno));
	bind.bind_info.mr = mr;
	if (ibv_bind_mw(qp, mw, &bind) || one_completion(e.scq, &wc, "bind") ||
	    wc.status != IBV_WC_SUCCESS)
		FAIL("ibv_bind_mw: %s", errno ? strerror(errno) : ibv_wc_status_str(wc.status));
	if ((ret = rereg(mr, IBV_REREG_MR_CHANGE_PD, other, 0)) != EBUSY)
		FAIL("rereg of the PD with a window bound: %s, want EBUSY", strerror(ret));
	if ((ret = rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, IBV_ACCESS_LOCAL_WRITE)) != EBUSY)
		FAIL("rereg of the rights with a window bound: %s, want EBUSY", strerror(ret));
	if ((st = read_status(&e, into, (uintptr_t)src, mw->rkey)) != IBV_WC_SUCCESS ||
	    dst[0] != src[0])
		FAIL("READ through the window: %d, data %#llx", st, (unsigned long long)dst[0]);
	if (ibv_destroy_qp(qp) || ibv_dealloc_mw(mw))
		FAIL("teardown of the window: %s", strerror(errno));
	if ((ret = rereg(mr, IBV_REREG_MR_CHANGE_PD, other, 0)))
		FAIL("rereg of the PD without a window: %s", strerror(ret));
	if (ibv_dereg_mr(mr) || ibv_dereg_mr(into) || ibv_dealloc_pd(other))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

/*
 * A receiver that destroys its QP (or moves it to ERR) as soon as it has polled a
 * message's receive completion has received that message: the sender's SEND completes
 * successfully, not with RETRY_EXC_ERR after retries the receiver no longer answers.
 * rc_pingpong's last iteration is this. The receiver polls without a pause, to meet the
 * acknowledgement while it may still be on its way; ACK_ROUNDS rounds (200 unless told)
 * of each kind.
 */
static int check_acked_before_destroy(struct ibv_context *ctx)
{
	static char sbuf[4096], rbuf[4096];
	int rounds = 2 * env_count("ACK_ROUNDS", 200);
	struct qp_env e;
	struct ibv_mr *smr, *rmr;
	int failed = 0;

	if (env_open(ctx, &e, 0))
		return 1;
	smr = ibv_reg_mr(e.pd, sbuf, sizeof(sbuf), 0);
	rmr = ibv_reg_mr(e.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	if (!smr || !rmr)
		FAIL("ibv_reg_mr: %s", strerror(errno));
	for (int i = 0; i < rounds; i++) {
		int to_err = i & 1;
		struct ibv_qp *tx, *rx;
		struct ibv_sge ssge = { .addr = (uintptr_t)sbuf, .length = sizeof(sbuf),
					.lkey = smr->lkey };
		struct ibv_sge rsge = { .addr = (uintptr_t)rbuf, .length = sizeof(rbuf),
					.lkey = rmr->lkey };
		struct ibv_send_wr swr = { .wr_id = 1, .sg_list = &ssge, .num_sge = 1,
					   .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED },
				   *sbad;
		struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &rsge, .num_sge = 1 }, *rbad;
		struct ibv_wc wc;
		int n = 0;

		if (rc_pair(&e, &tx, &rx))
			FAIL("round %d: RC pair: %s", i, strerror(errno));
		if (ibv_post_recv(rx, &rwr, &rbad) || ibv_post_send(tx, &swr, &sbad))
			FAIL("round %d: post: %s", i, strerror(errno));
		for (double end = now() + 5; !n && now() < end;)
			n = ibv_poll_cq(e.rcq, 1, &wc);
		if (n != 1 || wc.status != IBV_WC_SUCCESS)
			FAIL("round %d: receive: %d completions, status %s", i, n,
			     n == 1 ? ibv_wc_status_str(wc.status) : "-");
		if (to_err ? to_state(&e, rx, IBV_QPS_ERR) : ibv_destroy_qp(rx))
			FAIL("round %d: %s the receiver: %s", i, to_err ? "ERR" : "destroy",
			     strerror(errno));
		if (one_completion(e.scq, &wc, "SEND"))
			return 1;
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "round %d (receiver %s): SEND completed with %s\n", i,
				to_err ? "moved to ERR" : "destroyed", ibv_wc_status_str(wc.status));
			failed++;
		}
		if (ibv_destroy_qp(tx) || (to_err && ibv_destroy_qp(rx)))
			FAIL("round %d: ibv_destroy_qp: %s", i, strerror(errno));
		/* The receiver's flushed receive completions, if any. */
		while (ibv_poll_cq(e.rcq, 1, &wc) > 0)
			;
	}
	if (failed)
		FAIL("%d of %d SENDs received and not acknowledged", failed, rounds);
	if (ibv_dereg_mr(smr) || ibv_dereg_mr(rmr))
		FAIL("ibv_dereg_mr: %s", strerror(errno));
	return env_close(&e);
}

/*
 * Two UD QPs in RTS on one env, the receiver's buffer registered for local writes and
 * the sender's for sending, and an AH to the receiver's address.
 */
struct ud_env {
	struct qp_env e;
	struct ibv_srq *srq;	/* the receiver's, if ud_open was asked for one */
	struct ibv_qp *tx, *rx;
	struct ibv_ah *ah;
	struct ibv_mr *rmr, *smr;
	struct ibv_sge rsge, ssge;
};

static int ud_open(struct ibv_context *ctx, struct ud_env *u, void *rbuf, uint32_t rlen,
		   void *sbuf, uint32_t slen, int with_srq)
{
	memset(u, 0, sizeof(*u));
	if (env_open(ctx, &u->e, 0))
		return 1;
	if (with_srq && !(u->srq = make_srq(u->e.pd, 8, 1, 0)))
		FAIL("ibv_create_srq: %s", strerror(errno));
	struct ibv_qp_init_attr ra = { .send_cq = u->e.rcq, .recv_cq = u->e.rcq, .srq = u->srq,
				       .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 1, .max_recv_wr = 8, .max_send_sge = 1,
						.max_recv_sge = 1 } };
	if (!(u->tx = make_qp(&u->e, IBV_QPT_UD, 8, 1)) || !(u->rx = ibv_create_qp(u->e.pd, &ra)))
		FAIL("UD QPs: %s", strerror(errno));
	if (walk_to(&u->e, u->tx, IBV_QPS_RTS) || walk_to(&u->e, u->rx, IBV_QPS_RTS))
		return 1;
	u->ah = make_ah(&u->e, u->e.gid_index);
	u->rmr = ibv_reg_mr(u->e.pd, rbuf, rlen, IBV_ACCESS_LOCAL_WRITE);
	u->smr = ibv_reg_mr(u->e.pd, sbuf, slen, 0);
	if (!u->ah || !u->rmr || !u->smr)
		FAIL("AH and MRs: %s", strerror(errno));
	u->rsge = (struct ibv_sge){ .addr = (uintptr_t)rbuf, .length = rlen, .lkey = u->rmr->lkey };
	u->ssge = (struct ibv_sge){ .addr = (uintptr_t)sbuf, .length = slen, .lkey = u->smr->lkey };
	return 0;
}

static int ud_close(struct ud_env *u)
{
	if (ibv_destroy_qp(u->tx) || ibv_destroy_qp(u->rx) || ibv_destroy_ah(u->ah) ||
	    ibv_dereg_mr(u->rmr) || ibv_dereg_mr(u->smr) || (u->srq && ibv_destroy_srq(u->srq)))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&u->e);
}

/* A receive of the whole receive buffer, posted to the receiving QP. */
static int ud_recv(struct ud_env *u, uint64_t wr_id)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &u->rsge, .num_sge = 1 }, *bad;

	return u->srq ? ibv_post_srq_recv(u->srq, &wr, &bad) : ibv_post_recv(u->rx, &wr, &bad);
}

/* A datagram of the first `len` bytes of the send buffer, sent and completed. */
static int ud_send(struct ud_env *u, uint32_t len, struct ibv_wc *wc)
{
	struct ibv_sge sge = u->ssge;
	struct ibv_send_wr wr = { .wr_id = len, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
				  .wr = { .ud = { .ah = u->ah, .remote_qpn = u->rx->qp_num,
						  .remote_qkey = 0x11111111 } } }, *bad;

	sge.length = len;
	if (ibv_post_send(u->tx, &wr, &bad))
		FAIL("ibv_post_send: %s", strerror(errno));
	if (one_completion(u->e.scq, wc, "send"))
		return 1;
	if (wc->status != IBV_WC_SUCCESS)
		FAIL("a datagram of %u bytes: %s, want success", len, ibv_wc_status_str(wc->status));
	return 0;
}

/*
 * A datagram longer than the receive WQE's buffers (C9-92), the sender's work request
 * completing successfully all the same. With its own receive queue the QP drops it (class
 * D, as a NIC): no receive completion, the WQE stays for the next datagram that fits.
 * With an SRQ, whose WQEs the QP must not keep from the others, the WQE completes with
 * REM_INV_REQ_ERR (class E) and the next one takes the next datagram.
 */
static int ud_too_long(struct ibv_context *ctx, int with_srq)
{
	static char rbuf[40 + 16], sbuf[100];
	struct ud_env u;
	struct ibv_wc wc;

	if (ud_open(ctx, &u, rbuf, sizeof(rbuf), sbuf, sizeof(sbuf), with_srq))
		return 1;
	if (ud_recv(&u, 7) || (with_srq && ud_recv(&u, 7)))
		FAIL("post a receive: %s", strerror(errno));
	memset(sbuf, 'L', sizeof(sbuf));
	if (ud_send(&u, sizeof(sbuf), &wc))
		return 1;
	if (!with_srq && drain_cq(u.e.rcq, &wc, 1, 500) != 0)
		FAIL("a receive completion (status %s, wr_id %llu) for a datagram longer than its buffer",
		     ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
	if (with_srq) {
		if (one_completion(u.e.rcq, &wc, "the SRQ WQE of the long datagram"))
			return 1;
		if (wc.status != IBV_WC_REM_INV_REQ_ERR || wc.wr_id != 7)
			FAIL("SRQ WQE of the long datagram: status %s wr_id %llu, want REM_INV_REQ_ERR 7",
			     ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
	}
	memset(sbuf, 'S', 16);
	if (ud_send(&u, 16, &wc) || one_completion(u.e.rcq, &wc, "the receive of the short datagram"))
		return 1;
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 7 || wc.byte_len != 40 + 16 ||
	    memcmp(rbuf + 40, "SSSSSSSSSSSSSSSS", 16))
		FAIL("receive: status %s wr_id %llu len %u", ibv_wc_status_str(wc.status),
		     (unsigned long long)wc.wr_id, wc.byte_len);
	return ud_close(&u);
}

static int check_ud_too_long_dropped(struct ibv_context *c) { return ud_too_long(c, 0); }
static int check_ud_too_long_srq(struct ibv_context *c) { return ud_too_long(c, 1); }

/*
 * A receive a process posts to a QP already in the error state completes with
 * WR_FLUSH_ERR. librxe posts receives without a system call: the device learns of it
 * when a packet reaches the QP (here a datagram from another QP).
 */
static int check_recv_in_err_flushed(struct ibv_context *ctx)
{
	static char rbuf[64], sbuf[16];
	struct ud_env u;
	struct ibv_wc wc;

	if (ud_open(ctx, &u, rbuf, sizeof(rbuf), sbuf, sizeof(sbuf), 0))
		return 1;
	if (to_state(&u.e, u.rx, IBV_QPS_ERR))
		FAIL("to ERR: %s", strerror(errno));
	if (ud_recv(&u, 9))
		FAIL("ibv_post_recv in ERR: %s", strerror(errno));
	if (ud_send(&u, sizeof(sbuf), &wc) || one_completion(u.e.rcq, &wc, "the receive posted in ERR"))
		return 1;
	if (wc.status != IBV_WC_WR_FLUSH_ERR || wc.wr_id != 9 || wc.qp_num != u.rx->qp_num)
		FAIL("receive: status %s wr_id %llu qp %u, want WR_FLUSH_ERR 9 %u",
		     ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id, wc.qp_num,
		     u.rx->qp_num);
	return ud_close(&u);
}

/*
 * A send posted before RTS fails at once (the verbs' immediate error) and is never
 * carried out: posted in RESET, INIT and RTR, none of the three WRITEs lands or
 * completes once the QP is in RTS, and the WRITE posted then completes alone.
 */
static int check_send_before_rts_refused(struct ibv_context *ctx)
{
	static char buf[64];
	const enum ibv_qp_state states[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR };
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .sq_psn = 0x123456, .timeout = 14,
				   .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 3 };
	struct ibv_send_wr wr, *bad;
	struct qp_env e;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc[4];
	struct ibv_sge sge;

	if (env_open(ctx, &e, 0))
		return 1;
	mr = ibv_reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr || !(qp = make_qp(&e, IBV_QPT_RC, 8, 1)))
		FAIL("setup: %s", strerror(errno));
	memset(buf, '.', sizeof(buf));
	memcpy(buf, "0123456789abcdef", 16);
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey };
	for (int i = 0; i < 3; i++) {
		if (i > 0 && to_state(&e, qp, states[i]))
			FAIL("to state %d: %s", states[i], strerror(errno));
		wr = (struct ibv_send_wr){ .wr_id = 1 + i, .sg_list = &sge, .num_sge = 1,
					   .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
					   .wr = { .rdma = { .remote_addr = (uintptr_t)buf + 16 * (i + 1),
							     .rkey = mr->rkey } } };
		if (!ibv_post_send(qp, &wr, &bad))
			FAIL("a WRITE posted in state %d was taken", states[i]);
	}
	if (ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("to RTS: %s", strerror(errno));
	wr.wr_id = 4;
	if (ibv_post_send(qp, &wr, &bad))
		FAIL("WRITE in RTS: %s", strerror(errno));
	int n = drain_cq(e.scq, wc, 4, 1000);
	if (n != 1 || wc[0].wr_id != 4 || wc[0].status != IBV_WC_SUCCESS)
		FAIL("%d completions, the first wr_id %llu status %s; want only wr_id 4, SUCCESS", n,
		     (unsigned long long)wc[0].wr_id, ibv_wc_status_str(wc[0].status));
	/* Only the last WRITE (to bytes 48..63) landed. */
	if (memcmp(buf + 48, "0123456789abcdef", 16) || buf[16] != '.' || buf[32] != '.')
		FAIL("memory: %.64s", buf);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	return env_close(&e);
}

/* Posts `wr` on `qp` and waits for its one completion: its status, or -1. */
static int post_status(struct qp_env *e, struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	if (ibv_post_send(qp, wr, &bad) || one_completion(e->scq, &wc, "work request"))
		return -1;
	return wc.status;
}

/*
 * An RC SEND longer than the receive WQE's buffer is a length error, which the
 * responder answers with a NAK invalid request, as a NIC does: the sender completes
 * with REM_INV_REQ_ERR, the receive with LOC_LEN_ERR, and nothing lands past the
 * buffer. Two QPs (a QP connected to itself would be in the error state before the NAK
 * reached its requester).
 */
static int check_rc_send_too_long(struct ibv_context *ctx)
{
	static char buf[128];
	struct ibv_qp *qp, *peer;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge rsge, sge;
	struct ibv_wc wc;
	struct qp_env e;
	struct ibv_mr *mr;

	if (env_open(ctx, &e, 0))
		return 1;
	mr = ibv_reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr || rc_pair(&e, &qp, &peer))
		FAIL("setup: %s", strerror(errno));
	memset(buf, 'S', 64);
	memset(buf + 64, '.', 64);
	rsge = (struct ibv_sge){ .addr = (uintptr_t)buf + 64, .length = 16, .lkey = mr->lkey };
	rwr = (struct ibv_recv_wr){ .wr_id = 5, .sg_list = &rsge, .num_sge = 1 };
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	wr = (struct ibv_send_wr){ .wr_id = 6, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED };
	if (ibv_post_recv(peer, &rwr, &rbad) || ibv_post_send(qp, &wr, &bad))
		FAIL("post: %s", strerror(errno));
	if (one_completion(e.scq, &wc, "the SEND"))
		return 1;
	fprintf(stderr, "sender: %s, ", ibv_wc_status_str(wc.status));
	if (wc.wr_id != 6 || wc.status != IBV_WC_REM_INV_REQ_ERR)
		FAIL("SEND: wr_id %llu status %s, want 6 REM_INV_REQ_ERR",
		     (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	if (one_completion(e.rcq, &wc, "the receive"))
		return 1;
	fprintf(stderr, "receiver: %s\n", ibv_wc_status_str(wc.status));
	if (wc.wr_id != 5 || wc.status != IBV_WC_LOC_LEN_ERR)
		FAIL("receive: wr_id %llu status %s, want 5 LOC_LEN_ERR",
		     (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	if (qp_state(qp) != IBV_QPS_ERR || qp_state(peer) != IBV_QPS_ERR)
		FAIL("QP states %d and %d, want both in ERR", qp_state(qp), qp_state(peer));
	for (int i = 64 + 16; i < 128; i++)
		if (buf[i] != '.')
			FAIL("byte %d past the receive buffer written", i - 64);
	if (ibv_destroy_qp(qp) || ibv_destroy_qp(peer) || ibv_dereg_mr(mr))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

/*
 * An atomic's local buffer is its 8-byte operand: a FETCH_ADD with one of 8 bytes works
 * (100 becomes 101, and 100 comes back), one with a buffer of 16 bytes (which librxe
 * lets through; it refuses fewer than 8) completes with LOC_LEN_ERR, as the verbs
 * define the status, and leaves the remote operand as it was.
 */
static int check_atomic_not_8_bytes(struct ibv_context *ctx)
{
	static uint64_t buf[4];
	struct ibv_qp_attr atomic = { .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC };
	struct ibv_qp *qp, *peer;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct qp_env e;
	struct ibv_mr *mr;
	int st;

	if (env_open(ctx, &e, 0))
		return 1;
	mr = ibv_reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr || rc_pair(&e, &qp, &peer) || ibv_modify_qp(peer, &atomic, IBV_QP_ACCESS_FLAGS))
		FAIL("setup: %s", strerror(errno));
	buf[3] = 100;
	for (int len = 8; len <= 16; len += 8) {
		buf[0] = 0;
		sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey };
		wr = (struct ibv_send_wr){ .wr_id = len, .sg_list = &sge, .num_sge = 1,
					   .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					   .send_flags = IBV_SEND_SIGNALED,
					   .wr.atomic = { .remote_addr = (uintptr_t)&buf[3],
							  .compare_add = 1, .rkey = mr->rkey } };
		st = post_status(&e, qp, &wr);
		fprintf(stderr, "FETCH_ADD into %d bytes: status %d, operand %llu, returned %llu\n",
			len, st, (unsigned long long)buf[3], (unsigned long long)buf[0]);
		if (len == 8 && (st != IBV_WC_SUCCESS || buf[3] != 101 || buf[0] != 100))
			FAIL("8 bytes: want SUCCESS, operand 101, 100 returned");
		if (len == 16 && (st != IBV_WC_LOC_LEN_ERR || buf[3] != 101))
			FAIL("16 bytes: want LOC_LEN_ERR (%d), the operand unchanged",
			     IBV_WC_LOC_LEN_ERR);
	}
	if (ibv_destroy_qp(qp) || ibv_destroy_qp(peer) || ibv_dereg_mr(mr))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

/*
 * The keys of a receive WQE posted to an SRQ are checked against the SRQ's PD, not
 * against the PD of the QP that takes the WQE (a UD QP in another PD here): a WQE
 * whose buffer is an MR of the SRQ's PD takes the datagram; one whose MR is of the
 * QP's PD only completes with LOC_PROT_ERR and nothing lands.
 */
static int check_srq_keys_of_srq_pd(struct ibv_context *ctx)
{
	static char rbuf[64], sbuf[16];
	struct ibv_qp *own, *rx;
	struct ibv_pd *pd_b;
	struct ibv_srq *srq;
	struct ibv_mr *mr_b;
	struct ud_env u;
	struct ibv_wc wc;

	if (ud_open(ctx, &u, rbuf, sizeof(rbuf), sbuf, sizeof(sbuf), 0))
		return 1;
	if (!(pd_b = ibv_alloc_pd(ctx)) || !(srq = make_srq(pd_b, 8, 1, 0)) ||
	    !(mr_b = ibv_reg_mr(pd_b, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE)))
		FAIL("the SRQ's PD, SRQ and MR: %s", strerror(errno));
	struct ibv_qp_init_attr ra = { .send_cq = u.e.rcq, .recv_cq = u.e.rcq, .srq = srq,
				       .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 1, .max_send_sge = 1 } };
	if (!(rx = ibv_create_qp(u.e.pd, &ra)) || walk_to(&u.e, rx, IBV_QPS_RTS))
		FAIL("the SRQ's QP: %s", strerror(errno));
	own = u.rx;
	u.rx = rx;
	for (int i = 0; i < 2; i++) {
		struct ibv_sge sge = u.rsge;
		struct ibv_recv_wr wr = { .wr_id = 1 + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		enum ibv_wc_status want = i == 0 ? IBV_WC_SUCCESS : IBV_WC_LOC_PROT_ERR;

		/* First the MR of the SRQ's PD, then the one of the QP's PD. */
		sge.lkey = i == 0 ? mr_b->lkey : u.rmr->lkey;
		memset(rbuf, '.', sizeof(rbuf));
		memset(sbuf, 'A' + i, sizeof(sbuf));
		if (ibv_post_srq_recv(srq, &wr, &bad))
			FAIL("ibv_post_srq_recv: %s", strerror(errno));
		if (ud_send(&u, sizeof(sbuf), &wc) ||
		    one_completion(u.e.rcq, &wc, i == 0 ? "receive into the SRQ's PD" :
							   "receive into the QP's PD"))
			return 1;
		if (wc.wr_id != 1 + (uint64_t)i || wc.status != want)
			FAIL("receive %d: wr_id %llu status %s, want %s", 1 + i,
			     (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
			     ibv_wc_status_str(want));
		if (i == 0 && memcmp(rbuf + 40, "AAAAAAAAAAAAAAAA", 16))
			FAIL("the datagram did not land: %.16s", rbuf + 40);
		if (i == 1 && rbuf[40] != '.')
			FAIL("a receive into an MR of another PD wrote memory");
	}
	u.rx = own;
	if (ibv_destroy_qp(rx) || ibv_destroy_srq(srq) || ibv_dereg_mr(mr_b) || ibv_dealloc_pd(pd_b))
		FAIL("teardown: %s", strerror(errno));
	return ud_close(&u);
}

/* Page-aligned: an MR at iova 0 keeps its memory's offset in the page. */
static char mw_buf[256] __attribute__((aligned(4096))), mw_local[16];

/*
 * Binds a type 2 window of 128 bytes at `addr` of `mr` (which covers mw_buf) through a
 * fresh RC QP, zero-based if `zb`, and accesses it through that QP at the addresses
 * `origin` + offset: a WRITE of 16 bytes at offset 16 lands at mw_buf + 80, a READ at
 * offset 0 reads mw_buf + 64, and a WRITE crossing the window's end fails (the QP ends
 * in the error state) and writes nothing.
 */
static int mw_through(struct qp_env *e, struct ibv_mr *mr, uint64_t addr, int zb, uint64_t origin,
		      struct ibv_mr *lmr)
{
	struct ibv_qp *qp;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t rkey;

	if (!(mw = ibv_alloc_mw(e->pd, IBV_MW_TYPE_2)) || !(qp = rc_loop(e)))
		FAIL("setup: %s", strerror(errno));
	rkey = ibv_inc_rkey(mw->rkey);
	struct ibv_send_wr bind = {
		.wr_id = 1, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
		.bind_mw = { .mw = mw, .rkey = rkey,
			     .bind_info = { .mr = mr, .addr = addr, .length = 128,
					    .mw_access_flags = IBV_ACCESS_REMOTE_READ |
						IBV_ACCESS_REMOTE_WRITE |
						(zb ? IBV_ACCESS_ZERO_BASED : 0) } },
	}, *bad;
	if (ibv_post_send(qp, &bind, &bad) || one_completion(e->scq, &wc, "bind"))
		FAIL("bind not posted: %s", strerror(errno));
	if (wc.status != IBV_WC_SUCCESS)
		FAIL("bind: %s", ibv_wc_status_str(wc.status));
	memset(mw_buf, '.', sizeof(mw_buf));
	memcpy(mw_local, "WRITTENTHROUGHMW", 16);
	struct ibv_sge sge = { .addr = (uintptr_t)mw_local, .length = 16, .lkey = lmr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				  .wr = { .rdma = { .remote_addr = origin + 16, .rkey = rkey } } };
	if (ibv_post_send(qp, &wr, &bad) || one_completion(e->scq, &wc, "WRITE"))
		FAIL("WRITE not posted: %s", strerror(errno));
	if (wc.status != IBV_WC_SUCCESS || memcmp(mw_buf + 80, "WRITTENTHROUGHMW", 16) ||
	    mw_buf[79] != '.' || mw_buf[96] != '.')
		FAIL("WRITE at offset 16: %s, memory at +80: %.16s", ibv_wc_status_str(wc.status),
		     mw_buf + 80);
	memcpy(mw_buf + 64, "READTHROUGHTHEMW", 16);
	wr = (struct ibv_send_wr){ .wr_id = 3, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
				   .wr = { .rdma = { .remote_addr = origin, .rkey = rkey } } };
	if (ibv_post_send(qp, &wr, &bad) || one_completion(e->scq, &wc, "READ"))
		FAIL("READ not posted: %s", strerror(errno));
	if (wc.status != IBV_WC_SUCCESS || memcmp(mw_local, "READTHROUGHTHEMW", 16))
		FAIL("READ at offset 0: %s, read %.16s", ibv_wc_status_str(wc.status), mw_local);
	wr = (struct ibv_send_wr){ .wr_id = 4, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				   .wr = { .rdma = { .remote_addr = origin + 120, .rkey = rkey } } };
	if (ibv_post_send(qp, &wr, &bad) || one_completion(e->scq, &wc, "WRITE past the end"))
		FAIL("WRITE not posted: %s", strerror(errno));
	/*
	 * The QP is its own responder: the access error moves it to the error state, which
	 * may flush the WRITE before the NAK reaches it.
	 */
	if ((wc.status != IBV_WC_REM_ACCESS_ERR && wc.status != IBV_WC_WR_FLUSH_ERR) ||
	    qp_state(qp) != IBV_QPS_ERR || mw_buf[64 + 128] != '.' || mw_buf[64 + 120] != '.')
		FAIL("WRITE crossing the window's end: %s, QP state %d, want REM_ACCESS_ERR",
		     ibv_wc_status_str(wc.status), qp_state(qp));
	if (ibv_destroy_qp(qp) || ibv_dealloc_mw(mw))
		FAIL("teardown: %s", strerror(errno));
	return 0;
}

/* A READ of 16 bytes at the start of the window through `rkey`, by `qp`. */
static int mw_read(struct qp_env *e, struct ibv_qp *qp, struct ibv_mr *lmr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mw_local, .length = 16, .lkey = lmr->lkey };
	struct ibv_send_wr wr = { .wr_id = 3, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = (uintptr_t)mw_buf, .rkey = rkey } };

	return post_status(e, qp, &wr);
}

/* Binds `mw` (type 2) with `rkey` over the first 128 bytes of `mr`, through `qp`. */
static int mw_bind(struct qp_env *e, struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr,
		   uint32_t rkey)
{
	struct ibv_send_wr wr = {
		.wr_id = 1, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
		.bind_mw = { .mw = mw, .rkey = rkey,
			     .bind_info = { .mr = mr, .addr = (uintptr_t)mw_buf, .length = 128,
					    .mw_access_flags = IBV_ACCESS_REMOTE_READ } },
	};

	return post_status(e, qp, &wr);
}

/*
 * A type 2 window's life, between two RC QPs (one binds, the other reads through it):
 * a READ through a bound window works; the MR cannot be deregistered while the window
 * is bound, and the window still works after the attempt; a LOCAL_INV frees it, and a
 * new bind with another key makes it work again under that key alone (a READ under the
 * old key fails with REM_ACCESS_ERR). A bind of a window that is bound already fails
 * with MW_BIND_ERR. Then the window, the MR and the QPs go. A bind names its window by
 * the window's current key, which librxe takes from mw->rkey: the test keeps it there
 * after each bind, as ibv_bind_mw() does for a type 1 window (both drivers refuse a
 * bind that names the window by an older key).
 */
static int check_mw_type2_life(struct ibv_context *ctx)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;
	struct ibv_qp *qp, *peer, *qp2;
	struct ibv_mr *mr, *lmr;
	uint32_t k1, k2;
	struct qp_env e;
	struct ibv_mw *mw, *mw2;
	int st;

	if (env_open(ctx, &e, 0))
		return 1;
	mr = ibv_reg_mr(e.pd, mw_buf, sizeof(mw_buf), access);
	lmr = ibv_reg_mr(e.pd, mw_local, sizeof(mw_local), IBV_ACCESS_LOCAL_WRITE);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	mw2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	if (!mr || !lmr || !mw || !mw2 || rc_pair(&e, &qp, &peer))
		FAIL("setup: %s", strerror(errno));
	memcpy(mw_buf, "READTHROUGHTHEMW", 16);
	k1 = ibv_inc_rkey(mw->rkey);
	if ((st = mw_bind(&e, qp, mw, mr, k1)) != IBV_WC_SUCCESS)
		FAIL("bind: status %d", st);
	/* librxe names the window of a bind by mw->rkey, which only ibv_bind_mw() updates. */
	mw->rkey = k1;
	if ((st = mw_read(&e, peer, lmr, k1)) != IBV_WC_SUCCESS || memcmp(mw_local, mw_buf, 16))
		FAIL("READ through the window: status %d", st);
	if (!ibv_dereg_mr(mr))
		FAIL("the MR was deregistered under a bound window");
	fprintf(stderr, "dereg_mr under a bound window: %s\n", strerror(errno));
	if ((st = mw_read(&e, peer, lmr, k1)) != IBV_WC_SUCCESS)
		FAIL("READ after the refused dereg: status %d", st);
	struct ibv_send_wr inv = { .wr_id = 4, .opcode = IBV_WR_LOCAL_INV,
				   .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = k1 };
	if ((st = post_status(&e, qp, &inv)) != IBV_WC_SUCCESS)
		FAIL("LOCAL_INV: status %d", st);
	k2 = ibv_inc_rkey(k1);
	if ((st = mw_bind(&e, qp, mw, mr, k2)) != IBV_WC_SUCCESS)
		FAIL("bind again with another key: status %d", st);
	mw->rkey = k2;
	memset(mw_local, 0, sizeof(mw_local));
	if ((st = mw_read(&e, peer, lmr, k2)) != IBV_WC_SUCCESS || memcmp(mw_local, mw_buf, 16))
		FAIL("READ under the new key: status %d", st);
	if ((st = mw_read(&e, peer, lmr, k1)) != IBV_WC_REM_ACCESS_ERR)
		FAIL("READ under the old key: status %d, want REM_ACCESS_ERR", st);
	/* A bound window bound again, on a QP of its own (the pair is in ERR now). */
	if (!(qp2 = rc_loop(&e)) || (st = mw_bind(&e, qp2, mw2, mr, ibv_inc_rkey(mw2->rkey))))
		FAIL("bind of the second window: status %d: %s", st, strerror(errno));
	mw2->rkey = ibv_inc_rkey(mw2->rkey);
	if ((st = mw_bind(&e, qp2, mw2, mr, ibv_inc_rkey(mw2->rkey))) != IBV_WC_MW_BIND_ERR)
		FAIL("bind of a bound window: status %d, want MW_BIND_ERR", st);
	if (ibv_destroy_qp(qp) || ibv_destroy_qp(peer) || ibv_destroy_qp(qp2) ||
	    ibv_dealloc_mw(mw) || ibv_dealloc_mw(mw2) || ibv_dereg_mr(mr) || ibv_dereg_mr(lmr))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

/*
 * A SEND with invalidate that carries no data (an empty SGL) is a message like any
 * other: it takes a receive WQE, which completes successfully with byte_len 0,
 * IBV_WC_WITH_INV and the key it invalidated, a type 2 window bound to the receiving
 * QP, through which a READ then fails with REM_ACCESS_ERR.
 */
static int check_send_inv_empty(struct ibv_context *ctx)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND;
	struct ibv_recv_wr rwr = { .wr_id = 9 }, *rbad;
	struct ibv_qp *qp, *peer;
	struct ibv_mr *mr, *lmr;
	struct ibv_wc wc;
	struct qp_env e;
	struct ibv_mw *mw;
	uint32_t k;
	int st;

	if (env_open(ctx, &e, 0))
		return 1;
	mr = ibv_reg_mr(e.pd, mw_buf, sizeof(mw_buf), access);
	lmr = ibv_reg_mr(e.pd, mw_local, sizeof(mw_local), IBV_ACCESS_LOCAL_WRITE);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	if (!mr || !lmr || !mw || rc_pair(&e, &qp, &peer))
		FAIL("setup: %s", strerror(errno));
	k = ibv_inc_rkey(mw->rkey);
	if ((st = mw_bind(&e, qp, mw, mr, k)) != IBV_WC_SUCCESS)
		FAIL("bind: status %d", st);
	struct ibv_send_wr inv = { .wr_id = 8, .opcode = IBV_WR_SEND_WITH_INV,
				   .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = k };
	if (ibv_post_recv(qp, &rwr, &rbad))
		FAIL("ibv_post_recv: %s", strerror(errno));
	if ((st = post_status(&e, peer, &inv)) != IBV_WC_SUCCESS)
		FAIL("SEND with invalidate: status %d", st);
	if (one_completion(e.rcq, &wc, "the receive"))
		return 1;
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 9 || wc.byte_len != 0 ||
	    !(wc.wc_flags & IBV_WC_WITH_INV) || wc.invalidated_rkey != k)
		FAIL("receive: status %s wr_id %llu byte_len %u flags %#x key %#x, want SUCCESS 9 0 "
		     "WITH_INV %#x", ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id,
		     wc.byte_len, wc.wc_flags, wc.invalidated_rkey, k);
	if ((st = mw_read(&e, peer, lmr, k)) != IBV_WC_REM_ACCESS_ERR)
		FAIL("READ through the invalidated window: status %d, want REM_ACCESS_ERR", st);
	if (ibv_destroy_qp(qp) || ibv_destroy_qp(peer) || ibv_dealloc_mw(mw) || ibv_dereg_mr(mr) ||
	    ibv_dereg_mr(lmr))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

/*
 * Type 2 windows whose addresses start at 0: one bound over an MR registered at iova 0
 * (a zero-based MR), one bound zero-based (IBV_ACCESS_ZERO_BASED) over an MR at its
 * virtual address, each at byte 64 of the MR's memory.
 */
static int check_mw_zero_based(struct ibv_context *ctx)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND;
	struct qp_env e;
	struct ibv_mr *zmr, *mr, *lmr;

	if (env_open(ctx, &e, 0))
		return 1;
	zmr = ibv_reg_mr_iova(e.pd, mw_buf, sizeof(mw_buf), 0, access);
	mr = ibv_reg_mr(e.pd, mw_buf, sizeof(mw_buf), access);
	lmr = ibv_reg_mr(e.pd, mw_local, sizeof(mw_local), IBV_ACCESS_LOCAL_WRITE);
	if (!zmr || !mr || !lmr)
		FAIL("ibv_reg_mr: %s", strerror(errno));
	fprintf(stderr, "a window at 64 of an MR at iova 0\n");
	if (mw_through(&e, zmr, 64, 0, 64, lmr))
		return 1;
	fprintf(stderr, "a zero-based window at 64 of an MR at its address\n");
	if (mw_through(&e, mr, (uintptr_t)mw_buf + 64, 1, 0, lmr))
		return 1;
	if (ibv_dereg_mr(zmr) || ibv_dereg_mr(mr) || ibv_dereg_mr(lmr))
		FAIL("teardown: %s", strerror(errno));
	return env_close(&e);
}

/*
 * Every queue limit ibv_query_device() advertises can be created at its value: an SRQ
 * of max_srq_wr WQEs of max_srq_sge SGEs, QPs of max_qp_wr send or receive WQEs and of
 * max_sge SGEs, a CQ of max_cqe entries.
 */
/* The device's count of `what` (qp, cq, ...) in `rdma resource show`, or -1. */
static long res_count(struct ibv_context *ctx, const char *what)
{
	char cmd[128], line[512], key[32];
	long n = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "rdma resource show %s 2>/dev/null",
		 ibv_get_device_name(ctx->device));
	snprintf(key, sizeof(key), " %s ", what);
	if (!(f = popen(cmd, "r")))
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *at = strstr(line, key);

		if (at)
			n = strtol(at + strlen(key), NULL, 10);
	}
	pclose(f);
	return n;
}

/*
 * ib_uverbs' create_qp command (the write() interface, which librxe no longer uses but
 * the kernel keeps), asking for an RC QP of `e` with its response at `resp` of `len`
 * bytes. Returns 0 or the errno.
 */
static int raw_create_qp(struct qp_env *e, void *resp, size_t len)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_qp cmd;
	} c = { .hdr = { .command = IB_USER_VERBS_CMD_CREATE_QP } };

	c.hdr.in_words = sizeof(c) / 4;
	c.hdr.out_words = len / 4;
	c.cmd.response = (uintptr_t)resp;
	c.cmd.pd_handle = e->pd->handle;
	c.cmd.send_cq_handle = e->scq->handle;
	c.cmd.recv_cq_handle = e->rcq->handle;
	c.cmd.max_send_wr = 4;
	c.cmd.max_recv_wr = 4;
	c.cmd.max_send_sge = 1;
	c.cmd.max_recv_sge = 1;
	c.cmd.qp_type = IBV_QPT_RC;
	return write(e->ctx->cmd_fd, &c, sizeof(c)) == sizeof(c) ? 0 : errno;
}

/*
 * A create_qp whose response cannot be written fails with EFAULT and leaves no QP: when
 * the driver's part of the response (the rings' mmap offsets) is what fails, and when
 * only ib_uverbs' own part does, after the driver has created the QP and written its
 * part (ib_uverbs then destroys the QP it published, as destroy_qp would). 50 of each;
 * then the device's QP count is what it was, and a QP moves data as before.
 */
static int check_create_qp_response_fault(struct ibv_context *ctx)
{
	const size_t core = sizeof(struct ib_uverbs_create_qp_resp);
	const size_t len = core + sizeof(struct rxe_create_qp_resp);
	long page = sysconf(_SC_PAGESIZE), before, after;
	struct qp_env e;
	uint8_t *map;

	if (env_open(ctx, &e, 0))
		return 1;
	/* A page that cannot be written, then one that can. */
	map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED || mprotect(map, page, PROT_READ))
		FAIL("mmap: %s", strerror(errno));
	before = res_count(ctx, "qp");
	for (int i = 0; i < 100; i++) {
		/* Even rounds: all of it read-only; odd: only ib_uverbs' part. */
		uint8_t *resp = i & 1 ? map + page - core : map;
		int ret = raw_create_qp(&e, resp, len);

		if (ret != EFAULT)
			FAIL("round %d (%s unwritable): create_qp gave %s, want EFAULT", i,
			     i & 1 ? "ib_uverbs' part" : "all", ret ? strerror(ret) : "success");
	}
	after = res_count(ctx, "qp");
	fprintf(stderr, "QPs of the device: %ld before, %ld after 100 faulted creates\n", before,
		after);
	if (before < 0 || after != before)
		FAIL("the QP count changed: %ld before, %ld after", before, after);
	{
		struct ibv_qp *qp = rc_loop(&e);
		static char buf[64];
		struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 32,
				       .lkey = mr ? mr->lkey : 0 };
		struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *rbad;
		struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
					   .opcode = IBV_WR_SEND,
					   .send_flags = IBV_SEND_SIGNALED }, *sbad;
		struct ibv_wc wc;

		if (!qp || !mr || ibv_post_recv(qp, &rwr, &rbad) || ibv_post_send(qp, &swr, &sbad))
			FAIL("a QP after the faulted creates: %s", strerror(errno));
		if (one_completion(e.scq, &wc, "SEND") || wc.status != IBV_WC_SUCCESS ||
		    one_completion(e.rcq, &wc, "receive") || wc.status != IBV_WC_SUCCESS)
			FAIL("a SEND after the faulted creates did not complete");
		if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr))
			FAIL("teardown: %s", strerror(errno));
	}
	munmap(map, 2 * page);
	return env_close(&e);
}

static int check_limits_creatable(struct ibv_context *ctx)
{
	struct ibv_device_attr da;
	struct qp_env e;
	struct ibv_srq *srq;
	struct ibv_cq *cq;

	if (ibv_query_device(ctx, &da))
		FAIL("ibv_query_device: %s", strerror(errno));
	if (env_open(ctx, &e, 0))
		return 1;
	fprintf(stderr, "max_qp_wr %d max_sge %d max_srq_wr %d max_srq_sge %d max_cqe %d\n",
		da.max_qp_wr, da.max_sge, da.max_srq_wr, da.max_srq_sge, da.max_cqe);
	if (!(srq = make_srq(e.pd, da.max_srq_wr, da.max_srq_sge, 0)))
		FAIL("SRQ of max_srq_wr %d and max_srq_sge %d: %s", da.max_srq_wr,
		     da.max_srq_sge, strerror(errno));
	if (ibv_destroy_srq(srq))
		FAIL("ibv_destroy_srq: %s", strerror(errno));
	const struct ibv_qp_cap caps[] = {
		{ .max_send_wr = da.max_qp_wr, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		{ .max_send_wr = 1, .max_recv_wr = da.max_qp_wr, .max_send_sge = 1, .max_recv_sge = 1 },
		{ .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = da.max_sge,
		  .max_recv_sge = da.max_sge },
	};
	for (unsigned int i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct ibv_qp_init_attr a = { .send_cq = e.scq, .recv_cq = e.rcq,
					      .qp_type = IBV_QPT_RC, .cap = caps[i] };
		struct ibv_qp *qp = ibv_create_qp(e.pd, &a);

		if (!qp)
			FAIL("QP of send %u/%u and receive %u/%u WQEs/SGEs: %s",
			     caps[i].max_send_wr, caps[i].max_send_sge, caps[i].max_recv_wr,
			     caps[i].max_recv_sge, strerror(errno));
		if (ibv_destroy_qp(qp))
			FAIL("ibv_destroy_qp: %s", strerror(errno));
	}
	if (!(cq = ibv_create_cq(ctx, da.max_cqe, NULL, NULL, 0)))
		FAIL("CQ of max_cqe %d: %s", da.max_cqe, strerror(errno));
	if (ibv_destroy_cq(cq))
		FAIL("ibv_destroy_cq: %s", strerror(errno));
	return env_close(&e);
}

/* The function-call IPIs CPU `cpu` has taken (x86's CAL line of /proc/interrupts). */
static long call_ipis(int cpu)
{
	FILE *f = fopen("/proc/interrupts", "r");
	char line[4096];
	long n = -1;

	while (f && fgets(line, sizeof(line), f)) {
		char *p = line, *end;

		while (*p == ' ')
			p++;
		if (strncmp(p, "CAL:", 4))
			continue;
		p += 4;
		for (int c = 0; c <= cpu; c++, p = end) {
			n = strtol(p, &end, 10);
			if (end == p) {
				n = -1;
				break;
			}
		}
		break;
	}
	if (f)
		fclose(f);
	return n;
}

/* RCU's kthreads moved off the spinner's CPU, and their affinities as they were. */
struct rcu_kthreads {
	int n;
	pid_t pid[64];
	cpu_set_t was[64];
};

/*
 * Moves RCU's kthreads (rcu_preempt, rcu_exp_gp_kthread_worker and the like: children
 * of kthreadd named "rcu...") to the CPUs of `to`, noting where they were allowed to run.
 * While a loop frees objects, RCU runs its normal grace periods back to back and wakes
 * its grace-period kthread several times for each; when the scheduler had left that
 * kthread on the spinner's CPU, each wakeup was a function-call IPI there (525 of the
 * 560 IPIs of one failing run), a cost of where the kernel placed its kthread that says
 * nothing of the driver. A system that keeps a CPU for one busy task moves them alike.
 * Per-CPU kthreads refuse the move; they stay.
 */
static void rcu_kthreads_move(struct rcu_kthreads *k, const cpu_set_t *to)
{
	DIR *proc = opendir("/proc");
	struct dirent *d;

	k->n = 0;
	while (proc && (d = readdir(proc)) && k->n < 64) {
		char path[64], stat[256], *p;
		pid_t pid = atoi(d->d_name), ppid;
		FILE *f;

		if (pid <= 2)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		if (!(f = fopen(path, "r")))
			continue;
		p = fgets(stat, sizeof(stat), f);
		fclose(f);
		/* "pid (comm) state ppid ...": comm may hold spaces, so from its last ')'. */
		if (!p || strncmp(strchr(stat, '(') ?: "", "(rcu", 4) ||
		    !(p = strrchr(stat, ')')) || sscanf(p, ") %*c %d", &ppid) != 1 || ppid != 2)
			continue;
		if (sched_getaffinity(pid, sizeof(cpu_set_t), &k->was[k->n]) ||
		    sched_setaffinity(pid, sizeof(cpu_set_t), to))
			continue;
		k->pid[k->n++] = pid;
	}
	if (proc)
		closedir(proc);
}

static void rcu_kthreads_restore(const struct rcu_kthreads *k)
{
	for (int i = 0; i < k->n; i++)
		sched_setaffinity(k->pid[i], sizeof(cpu_set_t), &k->was[i]);
}

/*
 * Registering and deregistering MRs, and creating and destroying QPs, in a loop with no
 * traffic must not interrupt the other CPUs for each object: an expedited RCU grace
 * period per destroy sends a function-call IPI to every CPU that is not idle. A spinner
 * keeps CPU 1 busy in user space while CPU 0 runs LOOP_OBJECTS (2000) MR reg/dereg
 * pairs, then as many QP create/destroy pairs, with RCU's kthreads moved to CPU 0 too
 * (see rcu_kthreads_move()); CPU 1 must take fewer than one IPI per 20 objects in each
 * loop (freeing a QP's vmalloc'ed rings flushes the kernel's TLBs now and then, in
 * batches, and the tick asks CPU 1 for things now and then). Skips with one CPU, or
 * without the CAL line (not x86), and after printing the figures with IPI_FIGURES_ONLY
 * set (the debug kernel sends function-call IPIs of its own: 776 for 2000 MRs, 5538 for
 * 2000 QPs).
 */
static int check_destroy_no_ipi_storm(struct ibv_context *ctx)
{
	const char *env = getenv("LOOP_OBJECTS");
	int loops = env ? atoi(env) : 2000;
	static char buf[4096] __attribute__((aligned(4096)));
	long ipis[2] = { 0, 0 };
	double secs[2] = { 0, 0 };
	struct rcu_kthreads rcu;
	struct qp_env e;
	cpu_set_t set;
	pid_t spinner;
	int bad = 0;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || call_ipis(1) < 0)
		SKIP("needs two CPUs and /proc/interrupts' CAL line");
	if (env_open(ctx, &e, 0))
		return 1;
	CPU_ZERO(&set);
	CPU_SET(1, &set);
	if ((spinner = fork()) == 0) {
		sched_setaffinity(0, sizeof(set), &set);
		alarm(300);
		for (;;)
			__asm__ volatile("" ::: "memory");
	}
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	sched_setaffinity(0, sizeof(set), &set);
	rcu_kthreads_move(&rcu, &set);
	usleep(200 * 1000);
	for (int kind = 0; kind < 2 && !bad; kind++) {
		long before = call_ipis(1);
		double t0 = now();

		for (int i = 0; i < loops && !bad; i++) {
			if (kind == 0) {
				struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, sizeof(buf),
							       IBV_ACCESS_LOCAL_WRITE);

				bad = !mr || ibv_dereg_mr(mr);
			} else {
				struct ibv_qp *qp = make_qp(&e, IBV_QPT_RC, 4, 1);

				bad = !qp || ibv_destroy_qp(qp);
			}
			if (bad)
				fprintf(stderr, "%s round %d: %s\n", kind ? "QP" : "MR", i,
					strerror(errno));
		}
		ipis[kind] = call_ipis(1) - before;
		secs[kind] = now() - t0;
	}
	rcu_kthreads_restore(&rcu);
	kill(spinner, SIGKILL);
	waitpid(spinner, NULL, 0);
	printf("# %d RCU kthreads kept on CPU 0\n", rcu.n);
	printf("# %d MR reg/dereg pairs in %.2f s, CPU 1 took %ld function-call IPIs\n", loops,
	       secs[0], ipis[0]);
	printf("# %d QP create/destroy pairs in %.2f s, CPU 1 took %ld function-call IPIs\n",
	       loops, secs[1], ipis[1]);
	if (bad)
		return 1;
	if (getenv("IPI_FIGURES_ONLY")) {
		env_close(&e);
		SKIP("figures only (IPI_FIGURES_ONLY): this kernel interrupts CPUs for more");
	}
	for (int kind = 0; kind < 2; kind++)
		if (ipis[kind] * 20 >= loops)
			FAIL("%ld IPIs for %d %s destroys of unused objects", ipis[kind], loops,
			     kind ? "QP" : "MR");
	return env_close(&e);
}

/*
 * A UD QP attached to a multicast group cannot be destroyed (EBUSY, ib_core's check)
 * and stays attached: detaching it afterwards succeeds, and only then can it go.
 */
static int check_mcast_busy(struct ibv_context *ctx)
{
	static const union ibv_gid mgid = { .raw = { 0xff, 0x0e, [15] = 0x42 } };
	struct qp_env e;
	struct ibv_qp *qp;
	int ret;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(qp = make_qp(&e, IBV_QPT_UD, 8, 1)) || walk_to(&e, qp, IBV_QPS_RTS))
		FAIL("UD QP: %s", strerror(errno));
	if ((ret = ibv_attach_mcast(qp, &mgid, 0)))
		FAIL("ibv_attach_mcast: %s", strerror(ret));
	if ((ret = ibv_destroy_qp(qp)) != EBUSY)
		FAIL("destroy of an attached QP: %s, want EBUSY", strerror(ret));
	if (qp_state(qp) != IBV_QPS_RTS)
		FAIL("the QP changed after the refused destroy");
	if ((ret = ibv_detach_mcast(qp, &mgid, 0)))
		FAIL("ibv_detach_mcast after the refused destroy: %s", strerror(ret));
	if (ibv_detach_mcast(qp, &mgid, 0) == 0)
		FAIL("a second detach succeeded");
	if (ibv_destroy_qp(qp))
		FAIL("ibv_destroy_qp after detach: %s", strerror(errno));
	return env_close(&e);
}

/*
 * ib_core attaches a QP once per (GID, LID) pair; on RoCE the LID means nothing, so a
 * QP attached to one group under three LIDs is one member of it: each of its three
 * detaches succeeds, a fourth fails with EINVAL, and the QP can then be destroyed. A
 * second QP in the group keeps it alive across the first one's detaches. (A driver that
 * counts the member once refuses the second detach; ib_core then keeps the attachment
 * and the QP can never be destroyed, not even by closing the device.)
 */
static int check_mcast_lids(struct ibv_context *ctx)
{
	static const union ibv_gid mgid = { .raw = { 0xff, 0x0e, [15] = 0x45 } };
	static const uint16_t lids[] = { 0, 0x1234, 0xc001 };
	struct qp_env e;
	struct ibv_qp *qp, *other;
	int ret;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(qp = make_qp(&e, IBV_QPT_UD, 8, 1)) || walk_to(&e, qp, IBV_QPS_RTS) ||
	    !(other = make_qp(&e, IBV_QPT_UD, 8, 1)) || walk_to(&e, other, IBV_QPS_RTS))
		FAIL("UD QPs: %s", strerror(errno));
	if ((ret = ibv_attach_mcast(other, &mgid, 0)))
		FAIL("ibv_attach_mcast of the second QP: %s", strerror(ret));
	for (unsigned int i = 0; i < 3; i++)
		if ((ret = ibv_attach_mcast(qp, &mgid, lids[i])))
			FAIL("ibv_attach_mcast LID %#x: %s", lids[i], strerror(ret));
	for (unsigned int i = 0; i < 3; i++) {
		if ((ret = ibv_destroy_qp(qp)) != EBUSY)
			FAIL("destroy with %u attachments: %s, want EBUSY", 3 - i, strerror(ret));
		if ((ret = ibv_detach_mcast(qp, &mgid, lids[i])))
			FAIL("ibv_detach_mcast LID %#x: %s", lids[i], strerror(ret));
	}
	if ((ret = ibv_detach_mcast(qp, &mgid, 0)) != EINVAL)
		FAIL("a fourth detach: %s, want EINVAL", strerror(ret));
	if (ibv_destroy_qp(qp))
		FAIL("ibv_destroy_qp after the last detach: %s", strerror(errno));
	if ((ret = ibv_detach_mcast(other, &mgid, 0)))
		FAIL("ibv_detach_mcast of the second QP: %s", strerror(ret));
	if (ibv_destroy_qp(other))
		FAIL("ibv_destroy_qp of the second QP: %s", strerror(errno));
	return env_close(&e);
}

/* A process with attached QPs, MRs, MWs and AHs closes the device: all goes. */
static int check_close_with_all(void)
{
	static const union ibv_gid mgid = { .raw = { 0xff, 0x0e, [15] = 0x43 } };
	static char buf[65536];

	for (int round = 0; round < 8; round++) {
		struct ibv_context *ctx = open_dev();
		struct qp_env e;
		struct ibv_qp *qp;

		if (!ctx || env_open(ctx, &e, 1))
			FAIL("setup: %s", strerror(errno));
		if (!(qp = make_qp(&e, IBV_QPT_UD, 8, 1)) || walk_to(&e, qp, IBV_QPS_RTS) ||
		    ibv_attach_mcast(qp, &mgid, 0))
			FAIL("UD QP: %s", strerror(errno));
		if (!ibv_reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) ||
		    !ibv_alloc_mw(e.pd, IBV_MW_TYPE_2) || !make_ah(&e, e.gid_index))
			FAIL("MR, MW or AH: %s", strerror(errno));
		if (ibv_close_device(ctx))
			FAIL("ibv_close_device: %s", strerror(errno));
	}
	return 0;
}

/* ---- Every object type in a loop, several processes, some killed midway ---- */

/* One round: one of every object, the QPs walked through their states, then all freed. */
static int one_of_each(struct ibv_context *ctx, int round)
{
	static const union ibv_gid mgid = { .raw = { 0xff, 0x0e, [15] = 0x44 } };
	static char buf[16384];
	struct qp_env e;
	struct ibv_srq *srq;
	struct ibv_qp *qps[3], *sqp;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct ibv_ah *ah;
	int ret;

	if (env_open(ctx, &e, round % 2))
		return 1;
	if (!(srq = make_srq(e.pd, 16, 1, round % 8)) || post_srq_recvs(srq, 4))
		FAIL("SRQ: %s", strerror(errno));
	for (int t = 0; t < 3; t++)
		if (!(qps[t] = make_qp(&e, IBV_QPT_RC + t, 8, 1)))
			FAIL("QP: %s", strerror(errno));
	struct ibv_qp_init_attr qa = { .send_cq = e.scq, .recv_cq = e.rcq, .srq = srq,
				       .qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 2,
								       .max_send_sge = 1 } };
	if (!(sqp = ibv_create_qp(e.pd, &qa)))
		FAIL("QP on SRQ: %s", strerror(errno));
	if (!(mr = ibv_reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2)) || !(ah = make_ah(&e, e.gid_index)))
		FAIL("MR, MW or AH: %s", strerror(errno));
	for (int t = 0; t < 3; t++) {
		if (walk_to(&e, qps[t], round % 3 ? IBV_QPS_RTS : IBV_QPS_INIT) ||
		    post_recvs(qps[t], 4, round))
			return 1;
		if (round % 4 == 0 && to_state(&e, qps[t], IBV_QPS_ERR))
			FAIL("to ERR: %s", strerror(errno));
	}
	if ((ret = ibv_attach_mcast(qps[2], &mgid, 0)))
		FAIL("round %d: ibv_attach_mcast: %s", round, strerror(ret));
	if ((ret = ibv_detach_mcast(qps[2], &mgid, 0)))
		FAIL("round %d: ibv_detach_mcast: %s", round, strerror(ret));
	if (ibv_resize_cq(e.rcq, 32 + round % 64))
		FAIL("ibv_resize_cq: %s", strerror(errno));
	if (ibv_destroy_ah(ah) || ibv_dealloc_mw(mw) || ibv_dereg_mr(mr) ||
	    ibv_destroy_qp(sqp) || ibv_destroy_srq(srq))
		FAIL("teardown: %s", strerror(errno));
	for (int t = 0; t < 3; t++)
		if (ibv_destroy_qp(qps[t]))
			FAIL("ibv_destroy_qp: %s", strerror(errno));
	return env_close(&e);
}

static int stress_child(int rounds)
{
	struct ibv_context *ctx = open_dev();

	if (!ctx)
		FAIL("open: %s", strerror(errno));
	for (int r = 0; r < rounds; r++)
		if (one_of_each(ctx, r))
			return 1;
	return ibv_close_device(ctx) ? 1 : 0;
}

/*
 * Four processes create and destroy every object type, round after round; two of them
 * are killed with SIGKILL midway. The survivors must finish cleanly. (guest-tests.sh
 * compares slab usage and module reference counts before and after.) STRESS_ROUNDS sets
 * the survivors' rounds: 60 unless told (`make stress` runs thousands).
 */
static int check_stress(void)
{
	enum { PROCS = 4 };
	const char *env = getenv("STRESS_ROUNDS");
	int rounds = env ? atoi(env) : 60;
	pid_t pids[PROCS];
	int bad = 0;
	double t0 = now();

	if (rounds < 1)
		FAIL("STRESS_ROUNDS=%s", env);

	for (int i = 0; i < PROCS; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			FAIL("fork: %s", strerror(errno));
		if (pids[i] == 0)
			_exit(stress_child(i % 2 ? INT_MAX : rounds));
	}
	/* The odd children would run for long: they are the ones killed, mid-round. */
	usleep(1500 * 1000);
	for (int i = 1; i < PROCS; i += 2)
		kill(pids[i], SIGKILL);
	for (int i = 0; i < PROCS; i++) {
		int st;

		waitpid(pids[i], &st, 0);
		if (i % 2 == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			fprintf(stderr, "child %d failed (status %#x)\n", i, st);
			bad = 1;
		}
		if (i % 2 == 1 && !(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) {
			fprintf(stderr, "child %d was not killed midway (status %#x)\n", i, st);
			bad = 1;
		}
	}
	fprintf(stderr, "%d rounds in each of 2 survivors, 2 killed, %.1f s\n", rounds, now() - t0);
	return bad;
}

/* ---- CQ overflow and hostile rings ---- */

/*
 * A CQ with room for fewer completions than a flush produces overflows: its consumer
 * gets IBV_EVENT_CQ_ERR. Read and not yet acknowledged, that event makes the CQ's
 * destroy wait (in libibverbs) until a thread acknowledges it.
 */
static int check_cq_overflow(struct ibv_context *ctx)
{
	struct qp_env e;
	struct ibv_cq *small;
	struct ibv_qp *qp;
	struct ibv_async_event ev;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_qp_init_attr qa;
	pthread_t th;
	double t0;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(small = ibv_create_cq(ctx, 1, NULL, NULL, 0)))
		FAIL("ibv_create_cq: %s", strerror(errno));
	qa = (struct ibv_qp_init_attr){ .send_cq = e.scq, .recv_cq = small, .qp_type = IBV_QPT_UD,
					 .cap = { .max_send_wr = 4, .max_recv_wr = 16,
						  .max_send_sge = 1, .max_recv_sge = 1 } };
	if (!(qp = ibv_create_qp(e.pd, &qa)))
		FAIL("ibv_create_qp: %s", strerror(errno));
	fprintf(stderr, "CQ holds %d\n", small->cqe);
	if (walk_to(&e, qp, IBV_QPS_INIT) || post_recvs(qp, small->cqe + 8, 1) ||
	    to_state(&e, qp, IBV_QPS_ERR))
		FAIL("setup: %s", strerror(errno));
	if (poll(&p, 1, 3000) != 1)
		FAIL("no async event after the overflow");
	if (ibv_get_async_event(ctx, &ev))
		FAIL("ibv_get_async_event: %s", strerror(errno));
	if (ev.event_type != IBV_EVENT_CQ_ERR || ev.element.cq != small)
		FAIL("event %d, want CQ_ERR on the small CQ", ev.event_type);
	if (ibv_destroy_qp(qp))
		FAIL("ibv_destroy_qp: %s", strerror(errno));
	acked = 0;
	pthread_create(&th, NULL, ack_later, &ev);
	t0 = now();
	if (ibv_destroy_cq(small))
		FAIL("ibv_destroy_cq: %s", strerror(errno));
	fprintf(stderr, "destroy returned after %.2f s, acked %d\n", now() - t0, acked);
	pthread_join(th, NULL);
	if (!acked || now() - t0 < 0.9)
		FAIL("the destroy did not wait for the acknowledgement");
	return env_close(&e);
}

/*
 * The process scribbles over its rings (indices and slots) before the QP is flushed:
 * the device takes no more than the rings hold, nothing crashes, and the QP, its CQ
 * and the device stay usable. The QP's rings are the two newest mappings.
 */
static int check_hostile_rings(struct ibv_context *ctx)
{
	struct qp_env e;
	struct ibv_qp *qp;
	struct ibv_wc wc[256];
	unsigned long start[16], end;
	char line[512];
	int n = 0;

	if (env_open(ctx, &e, 0))
		return 1;
	for (int round = 0; round < 16; round++) {
		int maps = 0;
		FILE *f;

		if (!(qp = make_qp(&e, IBV_QPT_RC + round % 3, 8, 1)) || walk_to(&e, qp, IBV_QPS_INIT))
			FAIL("QP: %s", strerror(errno));
		f = fopen("/proc/self/maps", "r");
		if (!f)
			FAIL("maps: %s", strerror(errno));
		srand(round);
		while (fgets(line, sizeof(line), f) && maps < 16) {
			if (!strstr(line, "/dev/infiniband/uverbs") ||
			    sscanf(line, "%lx-%lx", &start[maps], &end) != 2)
				continue;
			/*
			 * Every mapping of the device file, CQ rings too, all but the
			 * element size and index mask at the start, which only librxe reads.
			 */
			for (unsigned long a = start[maps] + 8; a < end; a += 4)
				*(volatile uint32_t *)a = round % 2 ? (uint32_t)rand() : 0xffffffff;
			maps++;
		}
		fclose(f);
		/* The device flushes the QP's garbage into the garbage CQs. */
		to_state(&e, qp, IBV_QPS_ERR);
		/*
		 * librxe uses its consumer index without masking it (it is librxe's own):
		 * bring it back in range, or the poll below reads outside the CQ ring.
		 */
		for (int i = 0; i < maps; i++)
			*(volatile uint32_t *)(start[i] + 256) &= *(volatile uint32_t *)(start[i] + 4);
		/* What comes back is bounded; garbage CQ contents are not looked at. */
		n = drain_cq(e.rcq, wc, 256, 50) + drain_cq(e.scq, wc, 256, 50);
		if (ibv_destroy_qp(qp))
			FAIL("round %d: ibv_destroy_qp: %s", round, strerror(errno));
	}
	fprintf(stderr, "last round polled %d entries\n", n);
	/* The CQs' shared state is garbage now: make fresh ones and check the device. */
	if (ibv_destroy_cq(e.scq) || ibv_destroy_cq(e.rcq))
		FAIL("ibv_destroy_cq: %s", strerror(errno));
	e.scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	e.rcq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!e.scq || !e.rcq || !(qp = make_qp(&e, IBV_QPT_RC, 8, 1)) ||
	    walk_to(&e, qp, IBV_QPS_INIT) || post_recvs(qp, 3, 9) || to_state(&e, qp, IBV_QPS_ERR))
		FAIL("device unusable after hostile rings: %s", strerror(errno));
	if (drain_cq(e.rcq, wc, 3, 2000) != 3)
		FAIL("flush after hostile rings did not complete");
	if (ibv_destroy_qp(qp))
		FAIL("ibv_destroy_qp: %s", strerror(errno));
	return env_close(&e);
}

/*
 * Hostile send WQEs: a valid WQE is posted while the QP is in INIT (the doorbell fails),
 * found in the mapped send ring by its wr_id, rewritten into one class of garbage, put
 * back ahead of the producer where the driver dropped it (requeue_refused), and sent
 * once the QP (RC, connected to itself) is in RTS, by the doorbell of a valid WQE
 * posted behind it. Each must end in an error completion (or a failed doorbell) and
 * leave the device working.
 */
enum hostile_class { H_OPCODE, H_KERNEL_OPCODE, H_INLINE, H_SGE_COUNT, H_SGE_OVERFLOW, H_LKEY };

static int hostile_wqe(struct ibv_context *ctx, enum hostile_class what)
{
	const uint64_t magic = 0x5ca1ab1e00000000ull | what;
	static char buf[64];
	struct sq_ring sq;
	struct qp_env e;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc[8];
	uint8_t *wqe;
	int n, ret;

	if (env_open(ctx, &e, 0))
		return 1;
	if (!(mr = ibv_reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(qp = make_qp(&e, IBV_QPT_RC, 8, 2)) || walk_to(&e, qp, IBV_QPS_INIT))
		FAIL("setup: %s", strerror(errno));
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = magic, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	/* In INIT the doorbell fails; librxe has written the WQE into the ring. */
	ibv_post_send(qp, &wr, &bad);
	if (!find_sq(&sq, magic))
		FAIL("the posted WQE is not in any ring mapping");
	wqe = (uint8_t *)sq_slot(&sq, atomic_load(sq.prod) - 1);
	/* Offsets of struct rxe_send_wqe (include/uapi/rdma/rdma_user_rxe.h). */
	uint32_t *opcode = (uint32_t *)(wqe + 12), *flags = (uint32_t *)(wqe + 16);
	uint32_t *dma_len = (uint32_t *)(wqe + 184), *num_sge = (uint32_t *)(wqe + 196);
	uint32_t *sge0_len = (uint32_t *)(wqe + 208 + 8), *sge0_lkey = (uint32_t *)(wqe + 208 + 12);
	uint32_t *sge1_len = (uint32_t *)(wqe + 224 + 8);
	switch (what) {
	case H_OPCODE: *opcode = 0x1234567; break;
	case H_KERNEL_OPCODE: *opcode = 0x20; break; /* IB_WR_REG_MR */
	case H_INLINE: *flags |= IBV_SEND_INLINE; *dma_len = 1u << 30; break;
	case H_SGE_COUNT: *num_sge = 100000; break;
	case H_SGE_OVERFLOW: *num_sge = 2; *sge0_len = 0xffffffff; *sge1_len = 0xffffffff; break;
	case H_LKEY: *sge0_lkey ^= 0x5a5a5a00; break;
	}
	if (walk_to(&e, qp, IBV_QPS_RTS))
		return 1;
	if (requeue_refused(&sq, 1))
		FAIL("the send ring holds neither the WQE nor nothing");
	/* A valid WQE rings the doorbell; the hostile one is ahead of it. */
	wr.wr_id = magic + 0x100;
	ret = ibv_post_send(qp, &wr, &bad);
	n = drain_cq(e.scq, wc, 2, 2000);
	fprintf(stderr, "class %d: doorbell %d, %d completion(s), status %d\n", what, ret, n,
		n > 0 ? (int)wc[0].status : -1);
	if (!ret && n < 1)
		FAIL("no completion for the hostile WQE");
	if (n >= 1 && (wc[0].status == IBV_WC_SUCCESS || wc[0].wr_id != magic))
		FAIL("completion status %d wr_id %#llx: want an error for the hostile WQE",
		     wc[0].status, (unsigned long long)wc[0].wr_id);
	if (ibv_destroy_qp(qp) || ibv_dereg_mr(mr))
		FAIL("teardown: %s", strerror(errno));
	/* Still working: a fresh QP flushes its receives. */
	if (!(qp = make_qp(&e, IBV_QPT_RC, 8, 1)) || walk_to(&e, qp, IBV_QPS_INIT) ||
	    post_recvs(qp, 3, 9) || to_state(&e, qp, IBV_QPS_ERR) || drain_cq(e.rcq, wc, 3, 2000) != 3 ||
	    ibv_destroy_qp(qp))
		FAIL("device unusable after a hostile WQE: %s", strerror(errno));
	return env_close(&e);
}

static int check_hostile_wqe_opcode(struct ibv_context *c) { return hostile_wqe(c, H_OPCODE); }
static int check_hostile_wqe_kernel_opcode(struct ibv_context *c) { return hostile_wqe(c, H_KERNEL_OPCODE); }
static int check_hostile_wqe_inline(struct ibv_context *c) { return hostile_wqe(c, H_INLINE); }
static int check_hostile_wqe_sge_count(struct ibv_context *c) { return hostile_wqe(c, H_SGE_COUNT); }
static int check_hostile_wqe_sge_overflow(struct ibv_context *c) { return hostile_wqe(c, H_SGE_OVERFLOW); }
static int check_hostile_wqe_lkey(struct ibv_context *c) { return hostile_wqe(c, H_LKEY); }

static const struct check checks[] = {
	{ "cq_sizes", check_cq_sizes },
	{ "cq_bad", check_cq_bad },
	{ "cq_resize", check_cq_resize },
	{ "cq_notify", check_cq_notify },
	{ "cq_many", check_cq_many },
	{ "cq_close", NULL, check_cq_close },
	{ "cq_killed", NULL, check_cq_killed },
	{ "cq_ring_after_destroy", check_cq_ring_after_destroy },
	{ "hold_until_fatal", check_hold_until_fatal },
	{ "qp_create", check_qp_create },
	{ "qp_create_bad", check_qp_create_bad },
	{ "qp_states", check_qp_states },
	{ "qp_bad_modify", check_qp_bad_modify },
	{ "qp_query", check_qp_query },
	{ "qp_err_flush", check_qp_err_flush },
	{ "qp_destroy_states", check_qp_destroy_states },
	{ "busy", check_busy },
	{ "cq_destroy_unpolled", check_cq_destroy_unpolled },
	{ "qp_event_ack", check_qp_event_ack },
	{ "qp_many", check_qp_many },
	{ "qp_killed", NULL, check_qp_killed },
	{ "srq_modify", check_srq_modify },
	{ "srq_bad", check_srq_bad },
	{ "srq_busy", check_srq_busy },
	{ "srq_last_wqe", check_srq_last_wqe },
	{ "srq_limit_event", check_srq_limit_event },
	{ "qp_fatal_cq_overrun", check_qp_fatal_cq_overrun },
	{ "qp_retry_exceeded_once", check_qp_retry_exceeded_once },
	{ "ah", check_ah },
	{ "mr", check_mr },
	{ "mw", check_mw },
	{ "mcast_busy", check_mcast_busy },
	{ "mcast_lids", check_mcast_lids },
	{ "destroy_no_ipi_storm", check_destroy_no_ipi_storm },
	{ "close_with_all", NULL, check_close_with_all },
	{ "stress", NULL, check_stress },
	{ "cq_overflow", check_cq_overflow },
	{ "hostile_rings", check_hostile_rings },
	{ "hostile_wqe_opcode", check_hostile_wqe_opcode },
	{ "hostile_wqe_kernel_opcode", check_hostile_wqe_kernel_opcode },
	{ "hostile_wqe_inline", check_hostile_wqe_inline },
	{ "hostile_wqe_sge_count", check_hostile_wqe_sge_count },
	{ "hostile_wqe_sge_overflow", check_hostile_wqe_sge_overflow },
	{ "hostile_wqe_lkey", check_hostile_wqe_lkey },
	{ "inline_not_for_read", check_inline_not_for_read },
	{ "ud_too_long_dropped", check_ud_too_long_dropped },
	{ "ud_too_long_srq", check_ud_too_long_srq },
	{ "recv_in_err_flushed", check_recv_in_err_flushed },
	{ "mw_zero_based", check_mw_zero_based },
	{ "mr_rereg", check_mr_rereg },
	{ "mr_rereg_window", check_mr_rereg_window },
	{ "limits_creatable", check_limits_creatable },
	{ "send_before_rts_refused", check_send_before_rts_refused },
	{ "rc_send_too_long", check_rc_send_too_long },
	{ "atomic_not_8_bytes", check_atomic_not_8_bytes },
	{ "mw_type2_life", check_mw_type2_life },
	{ "send_inv_empty", check_send_inv_empty },
	{ "srq_keys_of_srq_pd", check_srq_keys_of_srq_pd },
	{ "acked_before_destroy", check_acked_before_destroy },
	{ "create_qp_response_fault", check_create_qp_response_fault },
	{ "err_flush_recorded_producer", check_err_flush_recorded_producer },
	{ NULL }
};

int main(int argc, char **argv)
{
	return run_check(argc, argv, checks);
}
