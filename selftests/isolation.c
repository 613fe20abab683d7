// SPDX-License-Identifier: GPL-2.0
/*
 * Isolation between processes and QPs, and receive WQEs that never disappear without
 * a completion (issue 14, items 4 and 5), and an on-demand MR's page fault that sleeps
 * forever holding up no destroy (item 8), through stock libibverbs and librxe.
 *
 *   isolation DEVICE CHECK   (see verbs_common.h)
 *
 * The two-process checks fork before either side opens the device: each process has
 * its own context and PD, and they tell each other numbers (keys, QP and AH numbers)
 * through pipes. The attacker writes the victim's numbers where librxe would put its
 * own (a fake verbs object, or the slot of its own mapped send ring). Every wait is
 * bounded in count and time.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "verbs_common.h"

#define QKEY 0x11111111u
/* Both ends of a connection start at this PSN. */
#define RQ_PSN 0x100
#define SQ_PSN RQ_PSN

static const uint8_t eth0_v4[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 2, 15 };

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	union ibv_gid gid;
	int gidx;
};

static int env_init(struct env *e, struct ibv_context *ctx, const uint8_t *ip16)
{
	memset(e, 0, sizeof(*e));
	e->ctx = ctx;
	if ((e->gidx = roce_v2_gid_like(ctx, ip16, 16, &e->gid)) < 0)
		FAIL("no RoCE v2 GID for the address");
	e->pd = ibv_alloc_pd(ctx);
	e->scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	e->rcq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!e->pd || !e->scq || !e->rcq)
		FAIL("env: %s", strerror(errno));
	return 0;
}

static struct ibv_qp *qp_new(struct env *e, enum ibv_qp_type t, struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = e->scq, .recv_cq = rcq ? rcq : e->rcq, .qp_type = t,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp(e->pd, &a);
}

static int qp_init(struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return ibv_modify_qp(qp, &a, mask);
}

/* INIT (if in RESET) to RTS; a connected QP goes to QP `dqpn` at `dgid`. */
static int qp_up(struct env *e, struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *dgid,
		 int access)
{
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	int mask = IBV_QP_STATE, ret;

	if (ibv_query_qp(qp, &q, IBV_QP_STATE, &qi))
		FAIL("ibv_query_qp: %s", strerror(errno));
	if (q.qp_state == IBV_QPS_RESET && (ret = qp_init(qp, access)))
		FAIL("to INIT: %s", strerror(ret));
	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = dqpn;
		a.rq_psn = RQ_PSN;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = *dgid;
		a.ah_attr.grh.sgid_index = e->gidx;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (qp->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 4;
			a.min_rnr_timer = 12;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	if ((ret = ibv_modify_qp(qp, &a, mask)))
		FAIL("to RTR: %s", strerror(ret));
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = SQ_PSN };
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 4;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if ((ret = ibv_modify_qp(qp, &a, mask)))
		FAIL("to RTS: %s", strerror(ret));
	return 0;
}

#define ALL_REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* An RC QP connected to itself, in RTS. */
static struct ibv_qp *rc_self(struct env *e)
{
	struct ibv_qp *qp = qp_new(e, IBV_QPT_RC, NULL);

	if (!qp || qp_up(e, qp, qp->qp_num, &e->gid, ALL_REMOTE))
		return NULL;
	return qp;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Up to `max` completions of `cq` within `ms` milliseconds. */
static int poll_for(struct ibv_cq *cq, struct ibv_wc *wc, int max, int ms)
{
	double end = now() + ms / 1000.0;
	int n = 0;

	while (n < max) {
		int got = ibv_poll_cq(cq, max - n, wc + n);

		if (got < 0)
			return -1;
		n += got;
		if (n < max) {
			if (now() > end)
				break;
			usleep(1000);
		}
	}
	return n;
}

/* ---- Two processes ---- */

struct peer {
	pid_t pid;
	int rd, wr;	/* from and to the other process */
};

/* Reads exactly n bytes within `ms` milliseconds. */
static int get(struct peer *p, void *buf, size_t n, int ms)
{
	struct pollfd pf = { .fd = p->rd, .events = POLLIN };
	size_t done = 0;
	double end = now() + ms / 1000.0;

	while (done < n) {
		int left = (int)((end - now()) * 1000);
		ssize_t r;

		if (left <= 0 || poll(&pf, 1, left) != 1)
			return -1;
		r = read(p->rd, (char *)buf + done, n - done);
		if (r <= 0)
			return -1;
		done += r;
	}
	return 0;
}

static int put(struct peer *p, const void *buf, size_t n)
{
	return write(p->wr, buf, n) == (ssize_t)n ? 0 : -1;
}

/* Forks `victim`, which gets its own end of two pipes; the caller keeps the others. */
static int spawn(struct peer *me, int (*victim)(struct peer *))
{
	int a[2], b[2];

	if (pipe(a) || pipe(b))
		return -1;
	fflush(NULL);
	me->pid = fork();
	if (me->pid < 0)
		return -1;
	if (me->pid == 0) {
		struct peer v = { .pid = 0, .rd = a[0], .wr = b[1] };

		close(a[1]);
		close(b[0]);
		alarm(120);
		_exit(victim(&v));
	}
	close(a[0]);
	close(b[1]);
	me->rd = b[0];
	me->wr = a[1];
	return 0;
}

/* The victim's exit status (0 when it found itself untouched), waiting at most 30 s. */
static int reap(struct peer *p)
{
	int st;

	for (int i = 0; i < 300; i++) {
		if (waitpid(p->pid, &st, WNOHANG) == p->pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
		usleep(100000);
	}
	kill(p->pid, SIGKILL);
	waitpid(p->pid, &st, 0);
	fprintf(stderr, "victim did not finish\n");
	return 1;
}

static struct ibv_context *own_ctx(void)
{
	struct ibv_context *ctx = open_dev();

	if (!ctx)
		fprintf(stderr, "cannot open %s: %s\n", dev_name, strerror(errno));
	return ctx;
}

#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | \
		   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND)

static int bind2(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr, void *buf,
		 uint64_t wr_id)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
		.bind_mw = { .mw = mw, .rkey = ibv_inc_rkey(mw->rkey),
			     .bind_info = { .mr = mr, .addr = (uintptr_t)buf, .length = 4096,
					    .mw_access_flags = IBV_ACCESS_REMOTE_READ } },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

static int bind1(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr, void *buf,
		 uint64_t wr_id)
{
	struct ibv_mw_bind b = {
		.wr_id = wr_id, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = (uintptr_t)buf, .length = 4096,
			       .mw_access_flags = IBV_ACCESS_REMOTE_READ },
	};

	return ibv_bind_mw(qp, mw, &b);
}

/* One bind through a fresh QP: 0 if it succeeded, 1 if it failed, -1 if it never ended. */
static int bind_outcome(struct env *e, int type, struct ibv_mw *mw, struct ibv_mr *mr, void *buf)
{
	struct ibv_qp *qp = rc_self(e);
	struct ibv_wc wc;
	uint32_t rkey = mw->rkey;
	int ret, n;

	if (!qp)
		return -1;
	ret = type == 1 ? bind1(qp, mw, mr, buf, 77) : bind2(qp, mw, mr, buf, 77);
	if (ret) {
		fprintf(stderr, "  type %d bind refused at post: %s\n", type, strerror(ret));
		ibv_destroy_qp(qp);
		return 1;
	}
	n = poll_for(e->scq, &wc, 1, 3000);
	fprintf(stderr, "  type %d bind: %d completion(s), status %s, QP state %d\n", type, n,
		n == 1 ? ibv_wc_status_str(wc.status) : "-", qp_state(qp));
	if (n != 1)
		ret = qp_state(qp) == IBV_QPS_ERR ? 1 : -1;
	else
		ret = wc.status != IBV_WC_SUCCESS;
	/* librxe moved a type 1 window's key on: a failed bind leaves it as it was. */
	if (ret)
		mw->rkey = rkey;
	/* Whatever else the error flushed. */
	poll_for(e->scq, &wc, 1, 100);
	ibv_destroy_qp(qp);
	return ret;
}

/*
 * (4a) The victim has an MR and a window of each type; the attacker, through QPs of its
 * own PD, binds the victim's windows to its own MR and its own windows to the victim's
 * MR. Every bind fails; its own binds succeed; the victim's windows still bind (free,
 * with the keys the victim knows) through the victim's QPs afterwards.
 */
static char mw_buf[4096];

static int mw_victim(struct peer *p)
{
	struct ibv_context *ctx = own_ctx();
	struct env e;
	struct ibv_mr *mr;
	struct ibv_mw *mw1, *mw2;
	uint32_t keys[3];
	char go;
	int r1, r2;

	if (!ctx || env_init(&e, ctx, eth0_v4))
		return 1;
	if (!(mr = ibv_reg_mr(e.pd, mw_buf, sizeof(mw_buf), MR_ACCESS)) ||
	    !(mw1 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1)) || !(mw2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2)))
		FAIL("victim setup: %s", strerror(errno));
	keys[0] = mr->lkey;
	keys[1] = mw1->rkey;
	keys[2] = mw2->rkey;
	if (put(p, keys, sizeof(keys)) || get(p, &go, 1, 90000))
		FAIL("victim: no word from the attacker");
	fprintf(stderr, "victim: its own binds after the attack\n");
	r1 = bind_outcome(&e, 1, mw1, mr, mw_buf);
	r2 = bind_outcome(&e, 2, mw2, mr, mw_buf);
	if (r1 || r2)
		FAIL("victim: its own windows no longer bind (type 1: %d, type 2: %d)", r1, r2);
	return 0;
}

static int check_mw_bind_other_pd(void)
{
	struct peer v;
	struct ibv_context *ctx;
	struct env e;
	struct ibv_mr *mr;
	struct ibv_mw *mw1, *mw2;
	uint32_t keys[3];
	int bad = 0;

	if (spawn(&v, mw_victim))
		FAIL("fork: %s", strerror(errno));
	if (!(ctx = own_ctx()) || env_init(&e, ctx, eth0_v4))
		return 1;
	if (!(mr = ibv_reg_mr(e.pd, mw_buf, sizeof(mw_buf), MR_ACCESS)) ||
	    !(mw1 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1)) || !(mw2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2)))
		FAIL("setup: %s", strerror(errno));
	if (get(&v, keys, sizeof(keys), 60000))
		FAIL("no keys from the victim");
	fprintf(stderr, "victim's MR lkey %#x, windows %#x (type 1) %#x (type 2)\n", keys[0],
		keys[1], keys[2]);
	/* The victim's objects as this process would name them: its keys in our PD. */
	struct ibv_mw vmw1 = { .context = ctx, .pd = e.pd, .rkey = keys[1], .type = IBV_MW_TYPE_1 };
	struct ibv_mw vmw2 = { .context = ctx, .pd = e.pd, .rkey = keys[2], .type = IBV_MW_TYPE_2 };
	struct ibv_mr vmr = { .context = ctx, .pd = e.pd, .addr = mw_buf, .length = 4096,
			      .lkey = keys[0], .rkey = keys[0] };
	struct { const char *what; int type; struct ibv_mw *mw; struct ibv_mr *mr; } c[] = {
		{ "victim's type 1 window to our MR", 1, &vmw1, mr },
		{ "victim's type 2 window to our MR", 2, &vmw2, mr },
		{ "our type 1 window to the victim's MR", 1, mw1, &vmr },
		{ "our type 2 window to the victim's MR", 2, mw2, &vmr },
	};
	for (unsigned int i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int r;

		fprintf(stderr, "attack: %s\n", c[i].what);
		r = bind_outcome(&e, c[i].type, c[i].mw, c[i].mr, mw_buf);
		if (r != 1) {
			fprintf(stderr, "  NOT refused (%s)\n", r ? "no completion" : "bound");
			bad++;
		}
	}
	/* Our own windows bind through our QPs (the bind path works). */
	fprintf(stderr, "control: our windows to our MR\n");
	if (bind_outcome(&e, 1, mw1, mr, mw_buf) || bind_outcome(&e, 2, mw2, mr, mw_buf))
		bad++;
	if (put(&v, "g", 1))
		FAIL("victim gone");
	if (reap(&v))
		bad++;
	return bad ? 1 : 0;
}

/*
 * (4b) The victim has a UD QP and an AH to it; it learns the AH's number from the WQE
 * librxe writes (a send posted in INIT, refused by the doorbell). The attacker posts a UD SEND
 * to the victim's QP and Q_Key, and rewrites the AH number in its own ring slot to the
 * victim's before the doorbell: the SEND completes in error and the victim receives
 * nothing; a valid SEND behind it (to the attacker's own QP) completes.
 */
#define UD_AH_NUM 36	/* struct rxe_send_wqe: wr.wr.ud.ah_num */
#define UD_LEN 16

static char ud_sbuf[64], ud_rbuf[4][64 + 40];

static struct ibv_ah *ah_to(struct env *e)
{
	struct ibv_ah_attr a = {
		.is_global = 1,
		.grh = { .dgid = e->gid, .sgid_index = e->gidx, .hop_limit = 64 },
		.port_num = 1,
	};

	return ibv_create_ah(e->pd, &a);
}

static int post_ud(struct ibv_qp *qp, struct ibv_ah *ah, struct ibv_mr *mr, uint32_t dqpn,
		   uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)ud_sbuf, .length = UD_LEN, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
				  .wr = { .ud = { .ah = ah, .remote_qpn = dqpn,
						  .remote_qkey = QKEY } } }, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

static int post_ud_recvs(struct ibv_qp *qp, struct ibv_mr *mr, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)ud_rbuf[i], .length = sizeof(ud_rbuf[i]),
				       .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 500 + i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &wr, &bad))
			return -1;
	}
	return 0;
}

static int ud_victim(struct peer *p)
{
	const uint64_t magic = 0xa4a4000000000001ull;
	struct ibv_context *ctx = own_ctx();
	struct env e;
	struct ibv_mr *smr, *rmr;
	struct ibv_qp *qp, *tx;
	struct ibv_ah *ah;
	struct ibv_wc wc[4];
	uint32_t nums[2];
	struct sq_ring sq;
	uint8_t *slot;
	char go;
	int n;

	if (!ctx || env_init(&e, ctx, eth0_v4))
		return 1;
	if (!(smr = ibv_reg_mr(e.pd, ud_sbuf, sizeof(ud_sbuf), 0)) ||
	    !(rmr = ibv_reg_mr(e.pd, ud_rbuf, sizeof(ud_rbuf), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(qp = qp_new(&e, IBV_QPT_UD, NULL)) || qp_up(&e, qp, 0, NULL, 0) ||
	    post_ud_recvs(qp, rmr, 4) || !(ah = ah_to(&e)) ||
	    !(tx = qp_new(&e, IBV_QPT_UD, NULL)) || qp_init(tx, 0))
		FAIL("victim setup: %s", strerror(errno));
	/* In INIT the doorbell fails; librxe has written the WQE, AH number and all. */
	post_ud(tx, ah, smr, qp->qp_num, magic);
	if (!find_sq(&sq, magic))
		FAIL("victim: its WQE is not in a ring mapping");
	slot = (uint8_t *)sq_slot(&sq, atomic_load(sq.prod) - 1);
	nums[0] = *(volatile uint32_t *)(slot + UD_AH_NUM);
	nums[1] = qp->qp_num;
	fprintf(stderr, "victim: AH number %u, UD QP %#x\n", nums[0], nums[1]);
	if (!nums[0])
		FAIL("victim: librxe wrote no AH number");
	if (put(p, nums, sizeof(nums)) || get(p, &go, 1, 90000))
		FAIL("victim: no word from the attacker");
	n = poll_for(e.rcq, wc, 4, 500);
	if (n != 0)
		FAIL("victim: %d datagram(s) arrived during the attack (wr_id %llu)", n,
		     (unsigned long long)wc[0].wr_id);
	/* Its own datagrams arrive: the WQE posted in INIT (see requeue_refused) and one more. */
	if (qp_up(&e, tx, 0, NULL, 0) || requeue_refused(&sq, 1) ||
	    post_ud(tx, ah, smr, qp->qp_num, magic + 1))
		FAIL("victim: its own send: %s", strerror(errno));
	n = poll_for(e.rcq, wc, 2, 3000);
	if (n != 2 || wc[0].status || wc[1].status)
		FAIL("victim: %d of its own 2 datagrams arrived", n);
	return 0;
}

static int check_ud_other_ah(void)
{
	const uint64_t magic = 0xa4a4000000000002ull;
	struct peer v;
	struct ibv_context *ctx;
	struct env e;
	struct ibv_mr *smr, *rmr;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_wc wc[4];
	uint32_t nums[2];
	struct sq_ring sq;
	uint8_t *slot;
	int n, bad = 0, ret;

	if (spawn(&v, ud_victim))
		FAIL("fork: %s", strerror(errno));
	if (!(ctx = own_ctx()) || env_init(&e, ctx, eth0_v4))
		return 1;
	if (!(smr = ibv_reg_mr(e.pd, ud_sbuf, sizeof(ud_sbuf), 0)) ||
	    !(rmr = ibv_reg_mr(e.pd, ud_rbuf, sizeof(ud_rbuf), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(qp = qp_new(&e, IBV_QPT_UD, NULL)) || qp_init(qp, 0) || !(ah = ah_to(&e)))
		FAIL("setup: %s", strerror(errno));
	if (get(&v, nums, sizeof(nums), 60000))
		FAIL("no numbers from the victim");
	post_ud(qp, ah, smr, nums[1], magic);
	if (!find_sq(&sq, magic))
		FAIL("our WQE is not in a ring mapping");
	slot = (uint8_t *)sq_slot(&sq, atomic_load(sq.prod) - 1);
	fprintf(stderr, "our AH number %u; the WQE now names the victim's, %u\n",
		*(volatile uint32_t *)(slot + UD_AH_NUM), nums[0]);
	*(volatile uint32_t *)(slot + UD_AH_NUM) = nums[0];
	if (qp_up(&e, qp, 0, NULL, 0) || post_ud_recvs(qp, rmr, 1) || requeue_refused(&sq, 1))
		FAIL("to RTS: %s", strerror(errno));
	/* A valid SEND to ourselves rings the doorbell; the rewritten one is ahead of it. */
	ret = post_ud(qp, ah, smr, qp->qp_num, magic + 1);
	n = poll_for(e.scq, wc, 2, 3000);
	fprintf(stderr, "doorbell %d, %d send completion(s):", ret, n);
	for (int i = 0; i < n; i++)
		fprintf(stderr, " wr_id %#llx %s;", (unsigned long long)wc[i].wr_id,
			ibv_wc_status_str(wc[i].status));
	fputc('\n', stderr);
	if (n < 1 || wc[0].wr_id != magic || wc[0].status == IBV_WC_SUCCESS) {
		fprintf(stderr, "the SEND naming the victim's AH did not complete in error\n");
		bad++;
	}
	if (put(&v, "g", 1))
		FAIL("victim gone");
	if (reap(&v))
		bad++;
	return bad ? 1 : 0;
}

/*
 * (4b) Every AH number but the process's own names an AH it may not send with: a kernel
 * consumer's (kverbs_test hold_ah=1 keeps one while this runs) and any other. For each
 * number up to AH_SCAN (its own left out), the process posts a UD SEND to its own QP on
 * a new QP in INIT (refused by the doorbell, written into the ring), rewrites the AH
 * number in the ring, moves the QP to RTS and rings the doorbell with no work request:
 * the SEND completes in error, and no datagram arrives. Then a SEND with its own AH
 * arrives, as it would have.
 */
#define AH_SCAN 40

static int check_ud_kernel_ah(struct ibv_context *ctx)
{
	const uint64_t magic = 0xa4a4000000000100ull;
	struct env e;
	struct ibv_mr *smr, *rmr;
	struct ibv_qp *rx, *tx;
	struct ibv_ah *ah;
	struct ibv_wc wc[2];
	uint32_t own = 0;
	int bad = 0, n;

	if (env_init(&e, ctx, eth0_v4))
		return 1;
	if (!(smr = ibv_reg_mr(e.pd, ud_sbuf, sizeof(ud_sbuf), 0)) ||
	    !(rmr = ibv_reg_mr(e.pd, ud_rbuf, sizeof(ud_rbuf), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(rx = qp_new(&e, IBV_QPT_UD, NULL)) || qp_up(&e, rx, 0, NULL, 0) ||
	    post_ud_recvs(rx, rmr, 4) || !(ah = ah_to(&e)))
		FAIL("setup: %s", strerror(errno));
	for (uint32_t num = 1; num <= AH_SCAN; num++) {
		struct sq_ring sq;
		uint8_t *slot;

		if (!(tx = qp_new(&e, IBV_QPT_UD, NULL)) || qp_init(tx, 0))
			FAIL("sender: %s", strerror(errno));
		post_ud(tx, ah, smr, rx->qp_num, magic + num);
		if (!find_sq(&sq, magic + num))
			FAIL("the sender's WQE is not in a ring mapping");
		slot = (uint8_t *)sq_slot(&sq, atomic_load(sq.prod) - 1);
		own = *(volatile uint32_t *)(slot + UD_AH_NUM);
		if (num == own) {
			ibv_destroy_qp(tx);
			continue;
		}
		*(volatile uint32_t *)(slot + UD_AH_NUM) = num;
		if (qp_up(&e, tx, 0, NULL, 0) || requeue_refused(&sq, 1) || raw_doorbell(tx))
			FAIL("AH number %u: to RTS: %s", num, strerror(errno));
		n = poll_for(e.scq, wc, 1, 3000);
		/* Refused (rxe flushes it: WR_FLUSH_ERR, its QP moved to ERR). */
		if (n != 1 || wc[0].wr_id != magic + num || wc[0].status == IBV_WC_SUCCESS) {
			fprintf(stderr, "AH number %u: %d completions, %s\n", num, n,
				n ? ibv_wc_status_str(wc[0].status) : "-");
			bad++;
		}
		if (ibv_destroy_qp(tx))
			FAIL("ibv_destroy_qp: %s", strerror(errno));
	}
	n = poll_for(e.rcq, wc, 1, 500);
	fprintf(stderr, "AH numbers 1 to %u but %u (its own): each SEND refused; %d datagrams arrived\n",
		AH_SCAN, own, n);
	if (n)
		bad++;
	/* Its own AH works. */
	if (!(tx = qp_new(&e, IBV_QPT_UD, NULL)) || qp_up(&e, tx, 0, NULL, 0) ||
	    post_ud(tx, ah, smr, rx->qp_num, magic))
		FAIL("its own SEND: %s", strerror(errno));
	n = poll_for(e.rcq, wc, 1, 3000);
	if (n != 1 || wc[0].status != IBV_WC_SUCCESS)
		FAIL("its own SEND did not arrive (%d)", n);
	return bad ? 1 : 0;
}

/*
 * (4c) A type 2 window bound through QP X (connected to X2) cannot be invalidated
 * through another QP Y of the same PD: neither by LOCAL_INV on Y nor by a SEND with
 * invalidate that Y receives from its peer Y2. Each attempt fails, and afterwards X2
 * still reads the memory through the window (and X).
 */
static char inv_buf[4096], inv_dst[64], inv_rbuf[64];

static int read_through(struct env *e, struct ibv_qp *qp, struct ibv_mr *dmr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)inv_dst, .length = 64, .lkey = dmr->lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
				  .wr = { .rdma = { .remote_addr = (uintptr_t)inv_buf + 64,
						    .rkey = rkey } } }, *bad;
	struct ibv_wc wc;

	memset(inv_dst, 0, sizeof(inv_dst));
	if (ibv_post_send(qp, &wr, &bad) || poll_for(e->scq, &wc, 1, 3000) != 1)
		FAIL("READ through the window did not complete");
	if (wc.status != IBV_WC_SUCCESS)
		FAIL("READ through the window: %s", ibv_wc_status_str(wc.status));
	if (memcmp(inv_dst, inv_buf + 64, 64))
		FAIL("READ through the window brought other data");
	return 0;
}

static int pair_up(struct env *e, struct ibv_qp **a, struct ibv_qp **b, struct ibv_cq *rcq)
{
	if (!(*a = qp_new(e, IBV_QPT_RC, rcq)) || !(*b = qp_new(e, IBV_QPT_RC, rcq)))
		return -1;
	if (qp_up(e, *a, (*b)->qp_num, &e->gid, ALL_REMOTE | IBV_ACCESS_MW_BIND) ||
	    qp_up(e, *b, (*a)->qp_num, &e->gid, ALL_REMOTE | IBV_ACCESS_MW_BIND))
		return -1;
	return 0;
}

static int check_inv_other_qp(struct ibv_context *ctx)
{
	struct env e;
	struct ibv_qp *x, *x2, *y, *y2, *z, *z2;
	struct ibv_mr *mr, *dmr;
	struct ibv_mw *mw;
	struct ibv_cq *zcq;
	struct ibv_wc wc[2];
	int n, bad = 0;

	for (unsigned int i = 0; i < sizeof(inv_buf); i++)
		inv_buf[i] = (char)(i * 7 + 3);
	if (env_init(&e, ctx, eth0_v4))
		return 1;
	if (!(zcq = ibv_create_cq(ctx, 16, NULL, NULL, 0)) ||
	    !(mr = ibv_reg_mr(e.pd, inv_buf, sizeof(inv_buf), MR_ACCESS)) ||
	    !(dmr = ibv_reg_mr(e.pd, inv_dst, sizeof(inv_dst), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2)) || pair_up(&e, &x, &x2, NULL) ||
	    pair_up(&e, &y, &y2, NULL) || pair_up(&e, &z, &z2, zcq))
		FAIL("setup: %s", strerror(errno));
	uint32_t key = ibv_inc_rkey(mw->rkey);
	if (bind2(x, mw, mr, inv_buf, 1) || poll_for(e.scq, wc, 1, 3000) != 1 ||
	    wc[0].status != IBV_WC_SUCCESS)
		FAIL("bind through X failed");
	fprintf(stderr, "window %#x bound through X\n", key);
	if (read_through(&e, x2, dmr, key))
		FAIL("the window does not open its memory through X before the attack");
	/* LOCAL_INV through Y. */
	struct ibv_send_wr inv = { .wr_id = 2, .opcode = IBV_WR_LOCAL_INV,
				   .send_flags = IBV_SEND_SIGNALED,
				   .invalidate_rkey = key }, *badwr;
	int ret = ibv_post_send(y, &inv, &badwr);
	n = ret ? 0 : poll_for(e.scq, wc, 1, 3000);
	fprintf(stderr, "LOCAL_INV through Y: post %d, %d completion(s), status %s\n", ret, n,
		n ? ibv_wc_status_str(wc[0].status) : "-");
	if (!ret && (n != 1 || wc[0].status == IBV_WC_SUCCESS)) {
		fprintf(stderr, "LOCAL_INV through another QP was not refused\n");
		bad++;
	}
	if (read_through(&e, x2, dmr, key)) {
		fprintf(stderr, "after LOCAL_INV through Y\n");
		bad++;
	}
	/* A SEND with invalidate that Z receives from Z2. */
	struct ibv_sge rs = { .addr = (uintptr_t)inv_rbuf, .length = 64, .lkey = dmr->lkey };
	struct ibv_mr *rmr = ibv_reg_mr(e.pd, inv_rbuf, sizeof(inv_rbuf), IBV_ACCESS_LOCAL_WRITE);
	if (!rmr)
		FAIL("reg: %s", strerror(errno));
	rs.lkey = rmr->lkey;
	struct ibv_recv_wr rwr = { .wr_id = 3, .sg_list = &rs, .num_sge = 1 }, *badr;
	struct ibv_sge ss = { .addr = (uintptr_t)inv_dst, .length = 8, .lkey = dmr->lkey };
	struct ibv_send_wr swr = { .wr_id = 4, .sg_list = &ss, .num_sge = 1,
				   .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED,
				   .invalidate_rkey = key };
	if (ibv_post_recv(z, &rwr, &badr) || ibv_post_send(z2, &swr, &badwr))
		FAIL("SEND with invalidate: %s", strerror(errno));
	n = poll_for(zcq, wc, 1, 3000);
	fprintf(stderr, "SEND with invalidate received by Z: %d completion(s), status %s, "
		"invalidated %#x\n", n, n ? ibv_wc_status_str(wc[0].status) : "-",
		n && (wc[0].wc_flags & IBV_WC_WITH_INV) ? wc[0].invalidated_rkey : 0);
	if (n == 1 && wc[0].status == IBV_WC_SUCCESS) {
		fprintf(stderr, "SEND with invalidate through another QP was not refused\n");
		bad++;
	}
	poll_for(e.scq, wc, 2, 500);
	if (read_through(&e, x2, dmr, key)) {
		fprintf(stderr, "after SEND with invalidate to Z\n");
		bad++;
	}
	return bad ? 1 : 0;
}

/*
 * (4e) Keys are not a counter: of 32 MRs registered in a row (and 16 type 2 windows),
 * the key bytes (low 8 bits) do not follow one another (a random byte follows the
 * previous one plus one with probability 1/256: more than a third is no chance).
 */
static int consecutive(const uint32_t *k, int n, const char *what)
{
	int c = 0;

	fprintf(stderr, "%s key bytes:", what);
	for (int i = 0; i < n; i++) {
		fprintf(stderr, " %02x", k[i] & 0xff);
		if (i && (k[i] & 0xff) == ((k[i - 1] + 1) & 0xff))
			c++;
	}
	fprintf(stderr, "\n%d of %d follow the previous one\n", c, n - 1);
	return c;
}

static int check_keys_random(struct ibv_context *ctx)
{
	enum { N = 32, W = 16 };
	static char buf[4096];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr[N];
	struct ibv_mw *mw[W];
	uint32_t k[N];
	int bad = 0;

	if (!pd)
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	for (int i = 0; i < N; i++) {
		if (!(mr[i] = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE)))
			FAIL("ibv_reg_mr %d: %s", i, strerror(errno));
		k[i] = mr[i]->lkey;
	}
	if (consecutive(k, N, "MR") > N / 3)
		bad++;
	for (int i = 0; i < W; i++) {
		if (!(mw[i] = ibv_alloc_mw(pd, IBV_MW_TYPE_2)))
			FAIL("ibv_alloc_mw %d: %s", i, strerror(errno));
		k[i] = mw[i]->rkey;
	}
	if (consecutive(k, W, "MW") > W / 3)
		bad++;
	for (int i = 0; i < N; i++)
		ibv_dereg_mr(mr[i]);
	for (int i = 0; i < W; i++)
		ibv_dealloc_mw(mw[i]);
	ibv_dealloc_pd(pd);
	return bad ? 1 : 0;
}

/*
 * (5f) A receive WQE whose num_sge the process rewrote beyond the QP's max_recv_sge
 * completes in error with its own wr_id when a message arrives for it (RC and UD); a
 * valid WQE behind it is not taken in its place.
 */
#define RECV_DMA_NUM_SGE 28	/* struct rxe_recv_wqe: dma.num_sge */

static char rm_sbuf[64], rm_rbuf[2][256];

static int recv_malformed(struct ibv_context *ctx, enum ibv_qp_type type)
{
	const uint64_t magic = 0xf5f5000000000000ull | type;
	struct env e;
	struct ibv_qp *tx, *rx;
	struct ibv_mr *smr, *rmr;
	struct ibv_ah *ah = NULL;
	struct ibv_wc wc[4];
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	uint8_t *slot;
	int n;

	if (env_init(&e, ctx, eth0_v4))
		return 1;
	if (!(smr = ibv_reg_mr(e.pd, rm_sbuf, sizeof(rm_sbuf), 0)) ||
	    !(rmr = ibv_reg_mr(e.pd, rm_rbuf, sizeof(rm_rbuf), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(tx = qp_new(&e, type, NULL)) || !(rx = qp_new(&e, type, NULL)) || qp_init(rx, ALL_REMOTE))
		FAIL("setup: %s", strerror(errno));
	if (ibv_query_qp(rx, &qa, IBV_QP_CAP, &qi))
		FAIL("ibv_query_qp: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)rm_rbuf[i], .length = sizeof(rm_rbuf[i]),
				       .lkey = rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = magic + i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(rx, &wr, &bad))
			FAIL("ibv_post_recv: %s", strerror(errno));
	}
	if (!(slot = find_in_rings(magic)))
		FAIL("the receive WQE is not in a ring mapping");
	fprintf(stderr, "max_recv_sge %u; num_sge in the slot %u, now %u\n", qa.cap.max_recv_sge,
		*(volatile uint32_t *)(slot + RECV_DMA_NUM_SGE), qa.cap.max_recv_sge + 1);
	*(volatile uint32_t *)(slot + RECV_DMA_NUM_SGE) = qa.cap.max_recv_sge + 1;
	if (qp_up(&e, rx, tx->qp_num, &e.gid, ALL_REMOTE) ||
	    qp_up(&e, tx, rx->qp_num, &e.gid, ALL_REMOTE))
		return 1;
	struct ibv_sge sge = { .addr = (uintptr_t)rm_sbuf, .length = 32, .lkey = smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	if (type == IBV_QPT_UD) {
		if (!(ah = ah_to(&e)))
			FAIL("ibv_create_ah: %s", strerror(errno));
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = rx->qp_num;
		wr.wr.ud.remote_qkey = QKEY;
	}
	if (ibv_post_send(tx, &wr, &bad))
		FAIL("ibv_post_send: %s", strerror(errno));
	n = poll_for(e.rcq, wc, 1, 3000);
	fprintf(stderr, "%d receive completion(s): wr_id %#llx status %s\n", n,
		n ? (unsigned long long)wc[0].wr_id : 0ull, n ? ibv_wc_status_str(wc[0].status) : "-");
	poll_for(e.scq, wc + 2, 1, 1000);
	if (n != 1)
		FAIL("the malformed receive WQE did not complete");
	if (wc[0].wr_id != magic)
		FAIL("the completion has wr_id %#llx, not the malformed WQE's %#llx",
		     (unsigned long long)wc[0].wr_id, (unsigned long long)magic);
	if (wc[0].status == IBV_WC_SUCCESS)
		FAIL("the malformed receive WQE completed successfully");
	return 0;
}

static int check_recv_malformed_rc(struct ibv_context *c) { return recv_malformed(c, IBV_QPT_RC); }
static int check_recv_malformed_ud(struct ibv_context *c) { return recv_malformed(c, IBV_QPT_UD); }

/*
 * (5h) A large RDMA READ served by another process, which deregisters the MR while the
 * responses are on their way: the READ ends with REM_ACCESS_ERR, not a hang or success.
 */
#define READ_LEN (64u << 20)

struct read_info {
	uint32_t qpn, rkey;
	uint64_t va;
};

static int read_victim(struct peer *p)
{
	struct ibv_context *ctx = own_ctx();
	struct env e;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct read_info me;
	uint32_t peer_qpn;
	double t;
	char c;
	char *buf = malloc(READ_LEN);

	if (!ctx || !buf || env_init(&e, ctx, eth0_v4))
		return 1;
	memset(buf, 0x3c, READ_LEN);
	if (!(mr = ibv_reg_mr(e.pd, buf, READ_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ)) ||
	    !(qp = qp_new(&e, IBV_QPT_RC, NULL)) || qp_init(qp, ALL_REMOTE))
		FAIL("server setup: %s", strerror(errno));
	me = (struct read_info){ .qpn = qp->qp_num, .rkey = mr->rkey, .va = (uintptr_t)buf };
	if (put(p, &me, sizeof(me)) || get(p, &peer_qpn, 4, 60000))
		FAIL("server: no QP number");
	if (qp_up(&e, qp, peer_qpn, &e.gid, ALL_REMOTE) || put(p, "r", 1))
		return 1;
	/* The READ is posted: let its responses start, then take the MR away. */
	if (get(p, &c, 1, 60000))
		FAIL("server: the READ was not posted");
	usleep(30000);
	t = now();
	if (ibv_dereg_mr(mr))
		FAIL("server: ibv_dereg_mr: %s", strerror(errno));
	fprintf(stderr, "server: MR deregistered in %.3f s\n", now() - t);
	put(p, "d", 1);
	if (get(p, &c, 1, 90000))
		FAIL("server: no end word");
	return 0;
}

static int check_read_dereg(void)
{
	struct peer v;
	struct ibv_context *ctx;
	struct env e;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct read_info srv;
	struct ibv_wc wc;
	double t0;
	char c;
	int n, bad = 0;
	char *buf = malloc(READ_LEN);

	if (!buf || spawn(&v, read_victim))
		FAIL("fork: %s", strerror(errno));
	if (!(ctx = own_ctx()) || env_init(&e, ctx, eth0_v4))
		return 1;
	memset(buf, 0, READ_LEN);
	if (!(mr = ibv_reg_mr(e.pd, buf, READ_LEN, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(qp = qp_new(&e, IBV_QPT_RC, NULL)) || qp_init(qp, ALL_REMOTE))
		FAIL("setup: %s", strerror(errno));
	if (get(&v, &srv, sizeof(srv), 60000) || put(&v, &qp->qp_num, 4))
		FAIL("no server");
	if (qp_up(&e, qp, srv.qpn, &e.gid, ALL_REMOTE) || get(&v, &c, 1, 60000))
		FAIL("connect failed");
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = READ_LEN, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x4ead, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
				  .wr = { .rdma = { .remote_addr = srv.va, .rkey = srv.rkey } } }, *bad_wr;
	t0 = now();
	if (ibv_post_send(qp, &wr, &bad_wr))
		FAIL("ibv_post_send: %s", strerror(errno));
	put(&v, "p", 1);
	n = poll_for(e.scq, &wc, 1, 60000);
	fprintf(stderr, "READ of %u MiB: %d completion(s) after %.2f s, status %s\n",
		READ_LEN >> 20, n, now() - t0, n ? ibv_wc_status_str(wc.status) : "-");
	if (get(&v, &c, 1, 5000))
		fprintf(stderr, "server did not report its dereg\n");
	if (n != 1) {
		fprintf(stderr, "the READ hangs after its MR was deregistered\n");
		bad++;
	} else if (wc.status == IBV_WC_SUCCESS) {
		/* Only if all of it went before the dereg, which TCG makes unlikely. */
		size_t got = 0;

		for (size_t i = 0; i < READ_LEN; i += 4096)
			got += buf[i] == 0x3c;
		fprintf(stderr, "the READ succeeded (%zu of %u pages arrived)\n", got, READ_LEN >> 12);
		bad++;
	} else if (wc.status != IBV_WC_REM_ACCESS_ERR) {
		fprintf(stderr, "want REM_ACCESS_ERR\n");
		bad++;
	}
	put(&v, "e", 1);
	if (reap(&v))
		bad++;
	return bad ? 1 : 0;
}

/*
 * (4d, 5g, 5i) QPs for raw packets from a peer namespace (roce_send.py --isol) to aim at:
 * on the GID of 10.9.0.1, connected to QPs 0x1001... at 10.9.0.2 (which has no device:
 * the packets come from roce_send.py, which also reads the answers), receive PSN RQ_PSN.
 *   r1 RC: SEND FIRST, then a MIDDLE shorter than the MTU: refused, the MIDDLE's bytes
 *      placed nowhere;
 *   r2, r3 RC: FLUSH naming placement type 0, with a valid and with a wrong R_Key;
 *   u1 UC: two FIRST packets, then a SEND ONLY: it lands in the first receive posted;
 *   u2 UC: FIRST, a short MIDDLE, LAST, then a SEND ONLY: the same.
 * Prints "ready r1=.. r2=.. r3=.. u1=.. u2=.. rkey=.. va=..", waits for the file named
 * by $ISOL_GO (60 s at most), then checks what arrived.
 */
enum { L_R1, L_R2, L_R3, L_U1, L_U2, L_N };
#define L_SLOT 4096
static char live_buf[L_N][2][L_SLOT];
static const char real_send[] = "REALSENDREALSENDREALSENDREALSEND";	/* 32 bytes */

static int check_live(void)
{
	static const uint8_t here[16] = { [10] = 0xff, [11] = 0xff, 10, 9, 0, 1 };
	static const uint8_t there[16] = { [10] = 0xff, [11] = 0xff, 10, 9, 0, 2 };
	const char *go = getenv("ISOL_GO");
	struct ibv_context *ctx = own_ctx();
	struct env e;
	struct ibv_mr *mr;
	struct ibv_qp *qp[L_N];
	struct ibv_cq *cq[L_N];
	union ibv_gid dgid;
	struct ibv_wc wc[4];
	struct stat st;
	int bad = 0, n, access = ALL_REMOTE;

	if (!ctx || !go || env_init(&e, ctx, here))
		FAIL("setup (ISOL_GO set?)");
	memcpy(dgid.raw, there, 16);
	memset(live_buf, 0x5a, sizeof(live_buf));
	mr = ibv_reg_mr(e.pd, live_buf, sizeof(live_buf),
			MR_ACCESS | IBV_ACCESS_FLUSH_GLOBAL);
	if (mr)
		access |= IBV_ACCESS_FLUSH_GLOBAL;
	else
		mr = ibv_reg_mr(e.pd, live_buf, sizeof(live_buf), MR_ACCESS);
	if (!mr)
		FAIL("ibv_reg_mr: %s", strerror(errno));
	for (int i = 0; i < L_N; i++) {
		if (!(cq[i] = ibv_create_cq(ctx, 8, NULL, NULL, 0)) ||
		    !(qp[i] = qp_new(&e, i >= L_U1 ? IBV_QPT_UC : IBV_QPT_RC, cq[i])))
			FAIL("QP %d: %s", i, strerror(errno));
		if (qp_up(&e, qp[i], 0x1001 + i, &dgid, access) &&
		    (!(access & IBV_ACCESS_FLUSH_GLOBAL) ||
		     qp_up(&e, qp[i], 0x1001 + i, &dgid, access = ALL_REMOTE)))
			return 1;
		for (int j = 0; j < 2; j++) {
			struct ibv_sge sge = { .addr = (uintptr_t)live_buf[i][j], .length = L_SLOT,
					       .lkey = mr->lkey };
			struct ibv_recv_wr wr = { .wr_id = 0x100 * (i + 1) + j, .sg_list = &sge,
						  .num_sge = 1 }, *bad_wr;

			if (ibv_post_recv(qp[i], &wr, &bad_wr))
				FAIL("ibv_post_recv: %s", strerror(errno));
		}
	}
	printf("ready r1=%u r2=%u r3=%u u1=%u u2=%u rkey=%u va=%llu flush_access=%d\n",
	       qp[L_R1]->qp_num, qp[L_R2]->qp_num, qp[L_R3]->qp_num, qp[L_U1]->qp_num,
	       qp[L_U2]->qp_num, mr->rkey, (unsigned long long)(uintptr_t)live_buf[L_R2][0],
	       !!(access & IBV_ACCESS_FLUSH_GLOBAL));
	fflush(stdout);
	for (int i = 0; stat(go, &st); i++) {
		if (i > 600)
			FAIL("no go file within 60 s");
		usleep(100000);
	}
	usleep(500000);
	for (int i = 0; i < L_N; i++) {
		n = poll_for(cq[i], wc, 4, i == L_R1 ? 1000 : 200);
		printf("qp %d (%u): state %d, %d completion(s)", i, qp[i]->qp_num, qp_state(qp[i]), n);
		for (int j = 0; j < n; j++)
			printf("; wr_id %#llx %s len %u", (unsigned long long)wc[j].wr_id,
			       ibv_wc_status_str(wc[j].status), wc[j].byte_len);
		printf("\n");
		if (i == L_U1 || i == L_U2) {
			/* The real SEND, in the first receive posted, and nothing else. */
			if (n != 1 || wc[0].wr_id != 0x100u * (i + 1) || wc[0].status ||
			    wc[0].byte_len != 32 || memcmp(live_buf[i][0], real_send, 32)) {
				printf("u%d: want one completion, wr_id %#x, 32 bytes of the real SEND\n",
				       i - L_U1 + 1, 0x100 * (i + 1));
				bad++;
			}
		}
		if (i == L_R1 && n > 0 && wc[0].status == IBV_WC_SUCCESS) {
			printf("r1: the message with a short MIDDLE completed\n");
			bad++;
		}
		/* The short MIDDLE's bytes ('B') and LAST's ('C') are placed nowhere. */
		for (int j = 0; j < 2; j++)
			for (int k = 0; k < L_SLOT; k++)
				if (live_buf[i][j][k] == 'B' || live_buf[i][j][k] == 'C') {
					printf("qp %d: byte '%c' of a refused packet placed at %d/%d\n",
					       i, live_buf[i][j][k], j, k);
					bad++;
					k = L_SLOT;
				}
	}
	fflush(stdout);
	return bad ? 1 : 0;
}

/*
 * (issue 14, 8) A page fault of an on-demand MR that sleeps forever in the kernel does
 * not hold up the verbs that take the MR and its QP away. The MR maps a file whose
 * server never answers a read ($ODP_STUCK_FILE, on stall9p.py's 9p mount, mapped
 * read-only and never touched here): a SEND from it makes the driver fault its pages in,
 * and the fault sleeps in the 9p read. Once the server saw the read (it creates
 * $ODP_STUCK_MARKER, 10 s at most) and no completion came, ibv_destroy_qp,
 * ibv_dereg_mr, ibv_destroy_cq, ibv_dealloc_pd and ibv_close_device are timed: each must
 * return within ODP_VERB_S seconds. A verb still running after ODP_WATCH_S seconds is
 * reported with where it sleeps (wchan and kernel stack) and the check fails without
 * waiting for it (a task asleep in the kernel cannot be killed): it ends once the
 * server is released.
 *
 * The fault holds the read side of the faulting process's mmap lock while it sleeps
 * (hmm_range_fault() cannot drop it), so whatever that process does that takes the
 * write side waits for the fault too, whatever the driver does: librxe's munmap() of
 * the rings in ibv_destroy_qp and ibv_destroy_cq, a malloc() that grows the heap, a new
 * thread's stack. So the verbs run in a child forked before the SEND, which shares the
 * device file (the parent then closes its own descriptors of it, so that the child's
 * ibv_close_device is the last close); the parent only watches. ODP_STUCK_IN_OWNER=1
 * runs them in the process that owns the MR instead (the child watches), to show that.
 */
#define ODP_LEN (1u << 20)
#define ODP_SEND (8u << 10)
#define ODP_VERB_S 5
#define ODP_WATCH_S 10
enum { V_QP, V_MR, V_RMR, V_SCQ, V_RCQ, V_PD, V_CLOSE, V_N, V_END = 'E' };
static const char *const odp_verbs[V_N] = {
	"ibv_destroy_qp", "ibv_dereg_mr (ODP)", "ibv_dereg_mr (receive)", "ibv_destroy_cq (send)",
	"ibv_destroy_cq (recv)", "ibv_dealloc_pd", "ibv_close_device",
};
static char odp_rbuf[ODP_SEND];

/* Prints a file of /proc for a task, through a buffer on the stack (no allocation). */
static void show_proc(pid_t pid, const char *what)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	if ((fd = open(path, O_RDONLY)) < 0) {
		fprintf(stderr, "  %s: %s\n", path, strerror(errno));
		return;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	fprintf(stderr, "  %s:%s%s%s", what, strchr(buf, '\n') ? "\n" : " ", buf,
		n > 0 && buf[n - 1] == '\n' ? "" : "\n");
}

/*
 * The verbs, each timed; before each its number goes to `fd`, after the last V_END and
 * the result. A watcher that gave up stops none of them: they all run, and say how long
 * they took, once the fault lets them.
 */
static int odp_verbs_run(struct env *e, struct ibv_qp *qp, struct ibv_mr *mr,
			 struct ibv_mr *rmr, int fd)
{
	int bad = 0;

	signal(SIGPIPE, SIG_IGN);
	for (int v = 0; v < V_N; v++) {
		unsigned char b = v;
		double t;
		int ret;

		if (write(fd, &b, 1) != 1)
			fd = -1;
		t = now();
		switch (v) {
		case V_QP: ret = ibv_destroy_qp(qp); break;
		case V_MR: ret = ibv_dereg_mr(mr); break;
		case V_RMR: ret = ibv_dereg_mr(rmr); break;
		case V_SCQ: ret = ibv_destroy_cq(e->scq); break;
		case V_RCQ: ret = ibv_destroy_cq(e->rcq); break;
		case V_PD: ret = ibv_dealloc_pd(e->pd); break;
		default: ret = ibv_close_device(e->ctx); break;
		}
		t = now() - t;
		fprintf(stderr, "%s: %s in %.3f s\n", odp_verbs[v], ret ? strerror(ret) : "ok", t);
		if (ret || t > ODP_VERB_S)
			bad++;
	}
	unsigned char end[2] = { V_END, bad ? 1 : 0 };

	return write(fd, end, 2) == 2 && !bad ? 0 : 1;
}

/* Follows the verbs process `pid` through `fd`: 0 if all of its verbs were in time. */
static int odp_watch(pid_t pid, int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	int cur = -1;
	double since = now();

	for (;;) {
		unsigned char b[2];

		if (poll(&pf, 1, 200) == 1) {
			if (read(fd, b, 1) != 1) {
				/* Gone before its verbs: it said why. */
				if (cur >= 0)
					fprintf(stderr, "the verbs process died in %s\n",
						odp_verbs[cur]);
				return 1;
			}
			if (b[0] == V_END)
				return read(fd, b + 1, 1) == 1 ? b[1] : 1;
			cur = b[0] < V_N ? b[0] : 0;
			since = now();
			continue;
		}
		if (cur >= 0 && now() - since > ODP_WATCH_S) {
			fprintf(stderr, "%s: still running after %d s (process %d); it sleeps in:\n",
				odp_verbs[cur], ODP_WATCH_S, (int)pid);
			show_proc(pid, "wchan");
			show_proc(pid, "stack");
			return 1;
		}
	}
}

/*
 * The setup of the stalling-file checks: the device (which must offer on-demand paging
 * for RC SEND, else the check skips), an env, and an on-demand MR `*mr` of the first
 * ODP_LEN bytes of $ODP_STUCK_FILE, mapped read-only at `*map` and never touched here.
 * 0, 1 (failed, said why) or 4 (skip).
 */
static int odp_stall_setup(struct env *e, struct ibv_context **ctx, char **map, struct ibv_mr **mr)
{
	const char *file = getenv("ODP_STUCK_FILE");
	struct ibv_device_attr_ex ax;
	int fd;

	if (!file || !getenv("ODP_STUCK_MARKER"))
		FAIL("ODP_STUCK_FILE and ODP_STUCK_MARKER must name the stalling file and the marker");
	if (!(*ctx = own_ctx()))
		return 1;
	memset(&ax, 0, sizeof(ax));
	if (ibv_query_device_ex(*ctx, NULL, &ax))
		FAIL("ibv_query_device_ex: %s", strerror(errno));
	if (!(ax.odp_caps.general_caps & IBV_ODP_SUPPORT) ||
	    !(ax.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_SEND))
		SKIP("%s offers no on-demand paging for RC SEND (ODP caps %#llx, RC %#x)", dev_name,
		     (unsigned long long)ax.odp_caps.general_caps,
		     ax.odp_caps.per_transport_caps.rc_odp_caps);
	if (env_init(e, *ctx, eth0_v4))
		return 1;
	if ((fd = open(file, O_RDONLY)) < 0)
		FAIL("open %s: %s", file, strerror(errno));
	*map = mmap(NULL, ODP_LEN, PROT_READ, MAP_PRIVATE, fd, 0);
	if (*map == MAP_FAILED)
		FAIL("mmap %s: %s", file, strerror(errno));
	close(fd);
	if (!(*mr = ibv_reg_mr(e->pd, *map, ODP_LEN, IBV_ACCESS_ON_DEMAND)))
		FAIL("ibv_reg_mr (on demand, of a read-only mapping): %s", strerror(errno));
	return 0;
}

static int check_odp_stuck_fault(void)
{
	const char *marker = getenv("ODP_STUCK_MARKER"), *owner = getenv("ODP_STUCK_IN_OWNER");
	int in_owner = owner && !strcmp(owner, "1");
	struct ibv_context *ctx;
	struct env e;
	struct ibv_mr *mr, *rmr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct stat st;
	int go[2], prog[2], n, rc, status;
	pid_t child;
	char *map;
	double t0;

	if ((rc = odp_stall_setup(&e, &ctx, &map, &mr)))
		return rc;
	if (!(rmr = ibv_reg_mr(e.pd, odp_rbuf, sizeof(odp_rbuf), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(qp = rc_self(&e)))
		FAIL("setup: %s", strerror(errno));
	struct ibv_sge rsge = { .addr = (uintptr_t)odp_rbuf, .length = sizeof(odp_rbuf),
				.lkey = rmr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 0x4ec, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr;
	struct ibv_sge sge = { .addr = (uintptr_t)map, .length = ODP_SEND, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x5e4d, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_wr;

	if (ibv_post_recv(qp, &rwr, &bad_rwr))
		FAIL("ibv_post_recv: %s", strerror(errno));
	/* What needs the write side of this process's mmap lock happens before the SEND. */
	if (pipe(go) || pipe(prog))
		FAIL("pipe: %s", strerror(errno));
	if ((child = fork()) < 0)
		FAIL("fork: %s", strerror(errno));
	if (child)
		fprintf(stderr, in_owner ? "verbs in the MR's owner, pid %d (watched by pid %d)\n" :
			"verbs in a child, pid %d (the MR's owner, pid %d, watches)\n",
			in_owner ? (int)getpid() : (int)child, in_owner ? (int)child : (int)getpid());
	if (child == 0) {
		char c;

		close(go[1]);
		if (in_owner) {
			/* The watcher holds no descriptor of the device file. */
			close(ctx->cmd_fd);
			close(ctx->async_fd);
			close(prog[1]);
			_exit(odp_watch(getppid(), prog[0]));
		}
		close(prog[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		_exit(odp_verbs_run(&e, qp, mr, rmr, prog[1]));
	}
	close(go[0]);
	close(in_owner ? prog[0] : prog[1]);
	t0 = now();
	if (ibv_post_send(qp, &wr, &bad_wr))
		FAIL("ibv_post_send: %s", strerror(errno));
	while (stat(marker, &st)) {
		if (now() - t0 > 10) {
			n = poll_for(e.scq, &wc, 1, 0);
			FAIL("no 9p read within 10 s of the SEND (%d completion(s)%s%s)", n,
			     n == 1 ? ", " : "", n == 1 ? ibv_wc_status_str(wc.status) : "");
		}
		usleep(10000);
	}
	fprintf(stderr, "the fault's read reached the 9p server %.3f s after the SEND\n",
		now() - t0);
	usleep(500000);
	if ((n = poll_for(e.scq, &wc, 1, 0)) || (n = poll_for(e.rcq, &wc, 1, 0)))
		FAIL("a completion (%s, wr_id %#llx) although the SEND's data cannot be read",
		     n > 0 ? ibv_wc_status_str(wc.status) : "poll failed",
		     (unsigned long long)wc.wr_id);
	fprintf(stderr, "no completion after 0.5 s more: the fault sleeps\n");
	if (in_owner) {
		rc = odp_verbs_run(&e, qp, mr, rmr, prog[1]);
		waitpid(child, &status, 0);
		return rc;
	}
	/* The child's descriptors of the device file are the last ones from now on. */
	close(ctx->cmd_fd);
	close(ctx->async_fd);
	if (write(go[1], "g", 1) != 1)
		FAIL("the verbs process is gone");
	rc = odp_watch(child, prog[0]);
	if (rc == 0 && (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
			WEXITSTATUS(status)))
		rc = 1;
	return rc;
}

/*
 * (issue 14, 8) Faults that sleep for good are bounded per user: the same stalling file
 * as odp_stuck_fault, and ODP_STUCK_QPS (40) QPs, each sent a SEND from the MR's first
 * page. Each QP's fault sleeps until the server answers (the first in the 9p read, the
 * others on the page it reads), or, once FAULTS_PER_USER (16) of the user's faults are
 * asleep, waits for a slot and is never started. Then every QP is destroyed, and the
 * MR, CQs and PD with them, each verb within ODP_VERB_S seconds; guest-tests.sh counts
 * the faults asleep. The faults hold the owner's mmap lock (see odp_stuck_fault), so
 * the QPs (whose rings are mapped) are made before the first SEND, and the destroys
 * run in a child forked after them; the SENDs are posted by the process that opened
 * the device (a forked child may not write to the device file).
 */
static int check_odp_stuck_many(void)
{
	const char *marker = getenv("ODP_STUCK_MARKER"), *nq = getenv("ODP_STUCK_QPS");
	int n = nq ? atoi(nq) : 40, go[2], status, i, rc;
	struct ibv_context *ctx;
	struct ibv_qp *qps[64];
	struct env e;
	struct ibv_mr *mr;
	struct stat st;
	pid_t child;
	char *map, c;
	double t0;

	if (n < 1 || n > 64)
		FAIL("ODP_STUCK_QPS must be 1 to 64");
	if ((rc = odp_stall_setup(&e, &ctx, &map, &mr)))
		return rc;
	for (i = 0; i < n; i++)
		if (!(qps[i] = rc_self(&e)))
			FAIL("QP %d: %s", i, strerror(errno));
	if (pipe(go))
		FAIL("pipe: %s", strerror(errno));
	if ((child = fork()) < 0)
		FAIL("fork: %s", strerror(errno));
	if (child == 0) {
		double worst = 0;

		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		t0 = now();
		for (i = 0; i < n; i++) {
			double t = now();
			int ret = ibv_destroy_qp(qps[i]);

			t = now() - t;
			worst = t > worst ? t : worst;
			if (ret || t > ODP_VERB_S) {
				fprintf(stderr, "ibv_destroy_qp of QP %d: %s in %.3f s\n", i,
					ret ? strerror(ret) : "ok", t);
				_exit(1);
			}
		}
		fprintf(stderr, "%d QPs destroyed in %.3f s (slowest %.3f s)\n", n, now() - t0, worst);
		t0 = now();
		if ((errno = ibv_dereg_mr(mr)) || ibv_destroy_cq(e.scq) || ibv_destroy_cq(e.rcq) ||
		    ibv_dealloc_pd(e.pd) || ibv_close_device(ctx)) {
			fprintf(stderr, "teardown: %s\n", strerror(errno));
			_exit(1);
		}
		fprintf(stderr, "MR, CQs, PD and device closed in %.3f s\n", now() - t0);
		_exit(now() - t0 > ODP_VERB_S);
	}
	close(go[0]);
	struct ibv_sge sge = { .addr = (uintptr_t)map, .length = ODP_SEND, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x5e4d, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_wr;

	t0 = now();
	for (i = 0; i < n; i++) {
		if (ibv_post_send(qps[i], &wr, &bad_wr))
			FAIL("ibv_post_send on QP %d: %s", i, strerror(errno));
		while (i == 0 && stat(marker, &st)) {
			if (now() - t0 > 10)
				FAIL("no 9p read within 10 s of the first SEND");
			usleep(10000);
		}
	}
	/* Time for the faults to start, or to find no slot. */
	usleep(500000);
	fprintf(stderr, "%d SENDs from the stalling file posted in %.3f s\n", n, now() - t0);
	/* Nothing here takes this process's mmap lock for writing from now on. */
	close(ctx->cmd_fd);
	close(ctx->async_fd);
	if (write(go[1], "g", 1) != 1)
		FAIL("the verbs process is gone");
	t0 = now();
	while (waitpid(child, &status, WNOHANG) == 0) {
		if (now() - t0 > (n + 1) * ODP_VERB_S) {
			fprintf(stderr, "the verbs process (pid %d) still runs after %.0f s; it sleeps in:\n",
				(int)child, now() - t0);
			show_proc(child, "wchan");
			show_proc(child, "stack");
			return 1;
		}
		usleep(50000);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/*
 * An RC SEND to itself from an on-demand MR of fresh anonymous memory (pages the process
 * writes after registering them, so not mapped for the device): it needs a fault. With
 * ODP_FRESH_EXPECT=stall the SEND must not complete within 3 s (the user's fault
 * slots are all held by faults that sleep) and the verbs must still return in time;
 * otherwise it must complete, with the data, within 10 s.
 */
static int check_odp_fresh(void)
{
	const char *expect = getenv("ODP_FRESH_EXPECT");
	int stall = expect && !strcmp(expect, "stall"), n, ret;
	struct ibv_context *ctx;
	struct ibv_mr *mr, *rmr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct env e;
	char *buf;

	if (!(ctx = own_ctx()))
		return 1;
	if (env_init(&e, ctx, eth0_v4))
		return 1;
	buf = mmap(NULL, 2 * ODP_SEND, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	if (!(mr = ibv_reg_mr(e.pd, buf, 2 * ODP_SEND, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE)))
		FAIL("ibv_reg_mr (on demand): %s", strerror(errno));
	/* Written after the registration, which maps what is present already. */
	memset(buf, 0x5a, ODP_SEND);
	if (!(rmr = ibv_reg_mr(e.pd, odp_rbuf, sizeof(odp_rbuf), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(qp = rc_self(&e)))
		FAIL("setup: %s", strerror(errno));
	struct ibv_sge rsge = { .addr = (uintptr_t)odp_rbuf, .length = sizeof(odp_rbuf),
				.lkey = rmr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr;
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = ODP_SEND, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_wr;
	double t0 = now();

	if (ibv_post_recv(qp, &rwr, &bad_rwr) || ibv_post_send(qp, &wr, &bad_wr))
		FAIL("post: %s", strerror(errno));
	n = poll_for(e.scq, &wc, 1, stall ? 3000 : 10000);
	if (stall) {
		if (n)
			FAIL("a completion (%s) although the user's fault slots are all held",
			     n > 0 ? ibv_wc_status_str(wc.status) : "poll failed");
		fprintf(stderr, "euid %d: no completion within 3 s: the fault waits for a slot\n",
			(int)geteuid());
	} else {
		if (n != 1 || wc.status != IBV_WC_SUCCESS)
			FAIL("euid %d: the SEND did not complete within 10 s (%d, %s)", (int)geteuid(),
			     n, n == 1 ? ibv_wc_status_str(wc.status) : "none");
		if (poll_for(e.rcq, &wc, 1, 3000) != 1 || wc.status != IBV_WC_SUCCESS ||
		    memchr(odp_rbuf, 0, ODP_SEND))
			FAIL("the receive did not complete with the data");
		fprintf(stderr, "euid %d: the SEND from fresh on-demand memory completed in %.3f s\n",
			(int)geteuid(), now() - t0);
	}
	t0 = now();
	if ((ret = ibv_destroy_qp(qp)) || (ret = ibv_dereg_mr(mr)) || (ret = ibv_dereg_mr(rmr)))
		FAIL("teardown: %s", strerror(ret));
	if (now() - t0 > ODP_VERB_S)
		FAIL("teardown took %.3f s", now() - t0);
	return 0;
}

/*
 * (issue 14, 8) A fault that ends after its QP was reset does not touch the QP's new
 * life. A SEND from the stalling file (as in odp_stuck_fault) makes a fault sleep; the
 * QP goes to RESET and back to RTS, and this process says "reset done" and waits until
 * $ODP_RELEASED exists: by then guest-tests.sh has stopped the 9p server, so the stale
 * fault failed (EIO). Then a SEND from fresh on-demand memory (written after its
 * registration, so it needs a fault of its own) must complete with its data within
 * 10 s: the stale failure must not count against it (rxe_rs once failed it with
 * LOC_PROT_ERR). All verbs here are the MR owner's own: nothing maps memory while the
 * fault sleeps.
 */
static int check_odp_reset_stale(void)
{
	const char *marker = getenv("ODP_STUCK_MARKER"), *released = getenv("ODP_RELEASED");
	struct ibv_context *ctx;
	struct ibv_mr *smr, *fmr, *rmr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	struct stat st;
	struct env e;
	char *map, *buf;
	int n, ret;
	double t0;

	if (!released)
		FAIL("ODP_RELEASED must name the file that says the server is gone");
	if ((ret = odp_stall_setup(&e, &ctx, &map, &smr)))
		return ret;
	buf = mmap(NULL, 2 * ODP_SEND, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	if (!(fmr = ibv_reg_mr(e.pd, buf, 2 * ODP_SEND, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE)) ||
	    !(rmr = ibv_reg_mr(e.pd, odp_rbuf, sizeof(odp_rbuf), IBV_ACCESS_LOCAL_WRITE)) ||
	    !(qp = rc_self(&e)))
		FAIL("setup: %s", strerror(errno));
	struct ibv_sge sge = { .addr = (uintptr_t)map, .length = ODP_SEND, .lkey = smr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad_wr;
	struct ibv_sge rsge = { .addr = (uintptr_t)odp_rbuf, .length = sizeof(odp_rbuf),
				.lkey = rmr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr;

	t0 = now();
	if (ibv_post_send(qp, &wr, &bad_wr))
		FAIL("ibv_post_send: %s", strerror(errno));
	while (stat(marker, &st)) {
		if (now() - t0 > 10)
			FAIL("no 9p read within 10 s of the SEND");
		usleep(10000);
	}
	usleep(500000);
	if ((n = poll_for(e.scq, &wc, 1, 0)))
		FAIL("a completion (%s) although the SEND's data cannot be read",
		     n > 0 ? ibv_wc_status_str(wc.status) : "poll failed");
	if ((ret = ibv_modify_qp(qp, &a, IBV_QP_STATE)))
		FAIL("to RESET: %s", strerror(ret));
	if (qp_up(&e, qp, qp->qp_num, &e.gid, ALL_REMOTE))
		return 1;
	fprintf(stderr, "reset done: the QP is in RTS again while its old fault sleeps\n");
	t0 = now();
	while (stat(released, &st)) {
		if (now() - t0 > 60)
			FAIL("%s did not appear within 60 s", released);
		usleep(50000);
	}
	/* The stale fault fails as soon as the server is gone; give it time to end. */
	usleep(1000000);
	memset(buf, 0x5a, ODP_SEND);
	sge = (struct ibv_sge){ .addr = (uintptr_t)buf, .length = ODP_SEND, .lkey = fmr->lkey };
	wr.wr_id = 3;
	t0 = now();
	if (ibv_post_recv(qp, &rwr, &bad_rwr) || ibv_post_send(qp, &wr, &bad_wr))
		FAIL("post: %s", strerror(errno));
	n = poll_for(e.scq, &wc, 1, 10000);
	if (n != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != 3)
		FAIL("the SEND from fresh memory after the reset: %s (wr_id %llu)",
		     n == 1 ? ibv_wc_status_str(wc.status) : "no completion within 10 s",
		     n == 1 ? (unsigned long long)wc.wr_id : 0ULL);
	if (poll_for(e.rcq, &wc, 1, 3000) != 1 || wc.status != IBV_WC_SUCCESS ||
	    memchr(odp_rbuf, 0, ODP_SEND))
		FAIL("the receive did not complete with the data");
	fprintf(stderr, "the SEND after the reset completed with its data in %.3f s\n", now() - t0);
	if ((ret = ibv_destroy_qp(qp)) || (ret = ibv_dereg_mr(smr)) || (ret = ibv_dereg_mr(fmr)) ||
	    (ret = ibv_dereg_mr(rmr)))
		FAIL("teardown: %s", strerror(ret));
	return 0;
}

static const struct check checks[] = {
	{ "mw_bind_other_pd", NULL, check_mw_bind_other_pd },
	{ "ud_other_ah", NULL, check_ud_other_ah },
	{ "ud_kernel_ah", check_ud_kernel_ah },
	{ "inv_other_qp", check_inv_other_qp, NULL },
	{ "keys_random", check_keys_random, NULL },
	{ "recv_malformed_rc", check_recv_malformed_rc, NULL },
	{ "recv_malformed_ud", check_recv_malformed_ud, NULL },
	{ "read_dereg", NULL, check_read_dereg },
	{ "live", NULL, check_live },
	{ "odp_stuck_fault", NULL, check_odp_stuck_fault },
	{ "odp_stuck_many", NULL, check_odp_stuck_many },
	{ "odp_fresh", NULL, check_odp_fresh },
	{ "odp_reset_stale", NULL, check_odp_reset_stale },
	{ NULL, NULL, NULL },
};

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	return run_check(argc, argv, checks);
}
