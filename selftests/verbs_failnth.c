// SPDX-License-Identifier: GPL-2.0
/*
 * Systematic allocation failures in the verbs that create something (needs the debug
 * kernel's failslab, with ignore-gfp-wait off: guest-tests.sh sets it).
 *
 *   verbs_failnth DEVICE
 *
 * For each verb, the Nth failable slab allocation of the calling thread fails
 * (/proc/self/task/TID/fail-nth), for N = 1, 2, ... until the call gets through
 * without reaching an Nth allocation. Every call the fault hit must fail cleanly (or
 * succeed, if what failed was optional) and leave nothing behind; one the fault did not
 * hit must succeed. After each verb the device must still create objects, and at the end
 * move data (RC SEND and RDMA READ between two QPs, checked). Leaks are the caller's to
 * judge (kmemleak, slab, module reference counts). One line per verb: how many N were
 * tried, how many calls failed, how many succeeded with a fault injected.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "verbs_common.h"

#define MAX_N 2000

static int nth_fd = -1;

static void set_nth(int n)
{
	char b[16];
	int l = snprintf(b, sizeof(b), "%d", n);

	if (pwrite(nth_fd, b, l, 0) != l)
		fprintf(stderr, "fail-nth: %s\n", strerror(errno));
}

/* 0 once the fault was injected, else how many failable calls it still waits for. */
static int get_nth(void)
{
	char b[16] = {};

	if (pread(nth_fd, b, sizeof(b) - 1, 0) <= 0)
		return -1;
	return atoi(b);
}

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_comp_channel *ch;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	struct ibv_qp *qp, *ud;
	int gidx, odp;
	union ibv_gid gid;
	uint8_t *buf;
	/* What the call made. */
	void *obj;
};

static struct ibv_qp *new_qp(struct env *e, enum ibv_qp_type t, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a = { .send_cq = e->cq, .recv_cq = e->cq, .srq = srq, .qp_type = t,
				      .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
					       .max_recv_sge = 2, .max_inline_data = 64 } };

	return ibv_create_qp(e->pd, &a);
}

static int to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x1234,
				 .qp_access_flags = 15 };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     (qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
}

static int to_rtr(struct env *e, struct ibv_qp *qp, uint32_t dqpn)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
				 .dest_qp_num = dqpn, .rq_psn = 7, .max_dest_rd_atomic = 4,
				 .min_rnr_timer = 1,
				 .ah_attr = { .is_global = 1, .port_num = 1,
					      .grh = { .dgid = e->gid, .sgid_index = e->gidx,
						       .hop_limit = 64 } } };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = 7, .timeout = 14, .retry_cnt = 7,
				 .rnr_retry = 7, .max_rd_atomic = 4 };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* ---- the verbs: call (under the fault) and undo (after it, ok says whether it made something) ---- */

#define OBJ(call) ((e->obj = (call)) ? 0 : -1)

static int c_open(struct env *e) { return OBJ(open_dev()); }
static void u_open(struct env *e, int ok) { if (ok) ibv_close_device(e->obj); }
static int c_pd(struct env *e) { return OBJ(ibv_alloc_pd(e->ctx)); }
static void u_pd(struct env *e, int ok) { if (ok) ibv_dealloc_pd(e->obj); }
static int c_cq(struct env *e) { return OBJ(ibv_create_cq(e->ctx, 64, NULL, NULL, 0)); }
static int c_cq_ch(struct env *e) { return OBJ(ibv_create_cq(e->ctx, 64, NULL, e->ch, 0)); }
static void u_cq(struct env *e, int ok) { if (ok) ibv_destroy_cq(e->obj); }
static int c_cq_ex(struct env *e)
{
	struct ibv_cq_init_attr_ex a = { .cqe = 64, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN };
	struct ibv_cq_ex *x = ibv_create_cq_ex(e->ctx, &a);

	return OBJ(x ? ibv_cq_ex_to_cq(x) : NULL);
}
static int c_qp_rc(struct env *e) { return OBJ(new_qp(e, IBV_QPT_RC, NULL)); }
static int c_qp_uc(struct env *e) { return OBJ(new_qp(e, IBV_QPT_UC, NULL)); }
static int c_qp_ud(struct env *e) { return OBJ(new_qp(e, IBV_QPT_UD, NULL)); }
static int c_qp_srq(struct env *e) { return OBJ(new_qp(e, IBV_QPT_RC, e->srq)); }
static int c_qp_ex(struct env *e)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = e->cq, .recv_cq = e->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = e->pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
				  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW,
	};

	return OBJ(ibv_create_qp_ex(e->ctx, &a));
}
static void u_qp(struct env *e, int ok) { if (ok) ibv_destroy_qp(e->obj); }
static int c_srq(struct env *e)
{
	struct ibv_srq_init_attr a = { .attr = { .max_wr = 64, .max_sge = 2 } };

	return OBJ(ibv_create_srq(e->pd, &a));
}
static void u_srq(struct env *e, int ok) { if (ok) ibv_destroy_srq(e->obj); }
static int c_mr(struct env *e) { return OBJ(ibv_reg_mr(e->pd, e->buf, 4 * 4096, 15 | IBV_ACCESS_MW_BIND)); }
static int c_mr_iova(struct env *e) { return OBJ(ibv_reg_mr_iova(e->pd, e->buf, 4 * 4096, -4 * 4096ull, 15)); }
static int c_mr_odp(struct env *e) { return OBJ(ibv_reg_mr(e->pd, e->buf, 4 * 4096, 15 | IBV_ACCESS_ON_DEMAND)); }
static void u_mr(struct env *e, int ok) { if (ok) ibv_dereg_mr(e->obj); }
static int c_mw1(struct env *e) { return OBJ(ibv_alloc_mw(e->pd, IBV_MW_TYPE_1)); }
static int c_mw2(struct env *e) { return OBJ(ibv_alloc_mw(e->pd, IBV_MW_TYPE_2)); }
static void u_mw(struct env *e, int ok) { if (ok) ibv_dealloc_mw(e->obj); }
static int c_ah(struct env *e)
{
	struct ibv_ah_attr a = { .is_global = 1, .port_num = 1,
				 .grh = { .dgid = e->gid, .sgid_index = e->gidx, .hop_limit = 64 } };

	return OBJ(ibv_create_ah(e->pd, &a));
}
static void u_ah(struct env *e, int ok) { if (ok) ibv_destroy_ah(e->obj); }

/* Verbs that change an object made beforehand (not under the fault). */
static int p_cq(struct env *e) { return (e->obj = ibv_create_cq(e->ctx, 16, NULL, NULL, 0)) ? 0 : -1; }
static int c_resize(struct env *e) { return ibv_resize_cq(e->obj, 1000) ? -1 : 0; }
static void u_resize(struct env *e, int ok) { ibv_destroy_cq(e->obj); }
static int p_qp_init(struct env *e) { return (e->obj = new_qp(e, IBV_QPT_RC, NULL)) && !to_init(e->obj) ? 0 : -1; }
static int c_rtr(struct env *e) { return to_rtr(e, e->obj, ((struct ibv_qp *)e->obj)->qp_num) ? -1 : 0; }
static void u_qp_any(struct env *e, int ok) { ibv_destroy_qp(e->obj); }
static int c_attach(struct env *e)
{
	union ibv_gid g = { .raw = { 0xff, 0x0e, [15] = 9 } };

	return ibv_attach_mcast(e->ud, &g, 0) ? -1 : 0;
}
static void u_attach(struct env *e, int ok)
{
	union ibv_gid g = { .raw = { 0xff, 0x0e, [15] = 9 } };

	if (ok)
		ibv_detach_mcast(e->ud, &g, 0);
}
static int p_srq(struct env *e) { return c_srq(e); }
static int c_srq_resize(struct env *e)
{
	struct ibv_srq_attr a = { .max_wr = 500 };

	return ibv_modify_srq(e->obj, &a, IBV_SRQ_MAX_WR) ? -1 : 0;
}
static void u_srq_any(struct env *e, int ok) { ibv_destroy_srq(e->obj); }
static int p_mr(struct env *e) { return c_mr(e); }
/* rxe re-registers access and PD only; rxe_rs the same. */
static int c_rereg(struct env *e)
{
	return ibv_rereg_mr(e->obj, IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_PD, e->pd,
			    NULL, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) ? -1 : 0;
}
static void u_mr_any(struct env *e, int ok) { ibv_dereg_mr(e->obj); }

struct verb {
	const char *name;
	int (*prep)(struct env *);
	int (*call)(struct env *);
	void (*undo)(struct env *, int ok);
	int odp;
};

static const struct verb verbs[] = {
	{ "open_device", NULL, c_open, u_open },
	{ "alloc_pd", NULL, c_pd, u_pd },
	{ "create_cq", NULL, c_cq, u_cq },
	{ "create_cq_channel", NULL, c_cq_ch, u_cq },
	{ "create_cq_ex", NULL, c_cq_ex, u_cq },
	{ "create_qp_rc", NULL, c_qp_rc, u_qp },
	{ "create_qp_uc", NULL, c_qp_uc, u_qp },
	{ "create_qp_ud", NULL, c_qp_ud, u_qp },
	{ "create_qp_rc_srq", NULL, c_qp_srq, u_qp },
	{ "create_qp_ex", NULL, c_qp_ex, u_qp },
	{ "create_srq", NULL, c_srq, u_srq },
	{ "reg_mr", NULL, c_mr, u_mr },
	{ "reg_mr_iova_top", NULL, c_mr_iova, u_mr },
	{ "reg_mr_odp", NULL, c_mr_odp, u_mr, 1 },
	{ "alloc_mw_type1", NULL, c_mw1, u_mw },
	{ "alloc_mw_type2", NULL, c_mw2, u_mw },
	{ "create_ah", NULL, c_ah, u_ah },
	{ "resize_cq", p_cq, c_resize, u_resize },
	{ "modify_qp_rtr", p_qp_init, c_rtr, u_qp_any },
	{ "attach_mcast", NULL, c_attach, u_attach },
	{ "modify_srq_max_wr", p_srq, c_srq_resize, u_srq_any },
	{ "rereg_mr", p_mr, c_rereg, u_mr_any },
	{ NULL }
};

/* The device still makes objects: a PD, a CQ, an RC QP. */
static int still_works(struct env *e, const char *after)
{
	struct ibv_pd *pd = ibv_alloc_pd(e->ctx);
	struct ibv_cq *cq = ibv_create_cq(e->ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = { 4, 4, 1, 1 } };
	struct ibv_qp *qp = pd && cq ? ibv_create_qp(pd, &a) : NULL;

	if (!qp)
		FAIL("after %s: the device cannot make a PD, CQ and QP: %s", after, strerror(errno));
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd))
		FAIL("after %s: teardown: %s", after, strerror(errno));
	return 0;
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 10);
	return 0;
}

/* Data moves: SEND and RDMA READ between two connected RC QPs, checked. */
static int traffic(struct env *e)
{
	struct ibv_qp *a = new_qp(e, IBV_QPT_RC, NULL), *b = new_qp(e, IBV_QPT_RC, NULL);
	struct ibv_sge s0 = { (uintptr_t)e->buf, 4096, e->mr->lkey };
	struct ibv_sge s1 = { (uintptr_t)e->buf + 4096, 4096, e->mr->lkey };
	struct ibv_recv_wr rw = { .sg_list = &s1, .num_sge = 1 }, *br;
	struct ibv_send_wr sw = { .sg_list = &s0, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bs;
	struct ibv_wc wc;

	if (!a || !b || to_init(a) || to_init(b) || to_rtr(e, a, b->qp_num) || to_rtr(e, b, a->qp_num) ||
	    to_rts(a) || to_rts(b))
		FAIL("traffic: connect: %s", strerror(errno));
	for (int i = 0; i < 4096; i++)
		e->buf[i] = (uint8_t)(i * 31 + 1);
	memset(e->buf + 4096, 0, 2 * 4096);
	if (ibv_post_recv(b, &rw, &br) || ibv_post_send(a, &sw, &bs))
		FAIL("traffic: post: %s", strerror(errno));
	for (int n = 0; n < 2; n++)
		if (!poll_one(e->cq, &wc) || wc.status != IBV_WC_SUCCESS)
			FAIL("traffic: SEND did not complete successfully");
	sw.opcode = IBV_WR_RDMA_READ;
	sw.sg_list = &s1;
	s1.addr += 4096;
	sw.wr.rdma.remote_addr = (uintptr_t)e->buf;
	sw.wr.rdma.rkey = e->mr->rkey;
	if (ibv_post_send(a, &sw, &bs) || !poll_one(e->cq, &wc) || wc.status != IBV_WC_SUCCESS)
		FAIL("traffic: RDMA READ did not complete successfully");
	if (memcmp(e->buf, e->buf + 4096, 4096) || memcmp(e->buf, e->buf + 8192, 4096))
		FAIL("traffic: data differs");
	return ibv_destroy_qp(a) || ibv_destroy_qp(b);
}

static int run_all(struct ibv_context *ctx)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };
	struct ibv_device_attr_ex da;
	struct env e = { .ctx = ctx };
	char path[64];
	int bad = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/fail-nth", (long)syscall(SYS_gettid));
	nth_fd = open(path, O_RDWR);
	if (nth_fd < 0)
		SKIP("no %s: the kernel has no fault injection", path);
	if (ibv_query_device_ex(ctx, NULL, &da))
		FAIL("ibv_query_device_ex: %s", strerror(errno));
	e.odp = !!(da.odp_caps.general_caps & IBV_ODP_SUPPORT);
	e.gidx = roce_v2_gid_like(ctx, v4, sizeof(v4), &e.gid);
	e.buf = aligned_alloc(4096, 16 * 4096);
	if (e.gidx < 0 || !e.buf)
		FAIL("no RoCE v2 IPv4 GID");
	memset(e.buf, 0, 16 * 4096);
	e.pd = ibv_alloc_pd(ctx);
	e.ch = ibv_create_comp_channel(ctx);
	e.cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	if (!e.pd || !e.ch || !e.cq)
		FAIL("setup: %s", strerror(errno));
	e.mr = ibv_reg_mr(e.pd, e.buf, 16 * 4096, 15);
	e.srq = ibv_create_srq(e.pd, &(struct ibv_srq_init_attr){ .attr = { .max_wr = 16, .max_sge = 1 } });
	e.ud = new_qp(&e, IBV_QPT_UD, NULL);
	if (!e.mr || !e.srq || !e.ud || to_init(e.ud))
		FAIL("setup: %s", strerror(errno));
	for (const struct verb *v = verbs; v->name; v++) {
		int n, failed = 0, faulted_ok = 0, done = 0;

		if (v->odp && !e.odp) {
			fprintf(stderr, "%-20s skipped: no on-demand paging\n", v->name);
			continue;
		}
		for (n = 1; n <= MAX_N && !done; n++) {
			int ok, err, fired;

			if (v->prep && v->prep(&e))
				FAIL("%s: setup: %s", v->name, strerror(errno));
			set_nth(n);
			errno = 0;
			ok = !v->call(&e);
			err = errno;
			fired = get_nth() == 0;
			set_nth(0);
			v->undo(&e, ok);
			if (!fired) {
				/* The call made fewer than n failable allocations. */
				if (!ok && n == 1 && err == EOPNOTSUPP) {
					fprintf(stderr, "%s: not supported\n", v->name);
				} else if (!ok) {
					fprintf(stderr, "%s: failed without an injected fault (N=%d): %s\n",
						v->name, n, strerror(err));
					bad = 1;
				}
				done = 1;
			} else if (ok) {
				faulted_ok++;
			} else {
				failed++;
			}
		}
		if (!done) {
			fprintf(stderr, "%s: still reaching an Nth allocation at N=%d\n", v->name, MAX_N);
			bad = 1;
		}
		fprintf(stderr, "%-20s N up to %d: %d calls failed, %d succeeded with a fault injected\n",
			v->name, n - 1, failed, faulted_ok);
		if (still_works(&e, v->name))
			return 1;
	}
	if (traffic(&e))
		return 1;
	ibv_destroy_qp(e.ud);
	ibv_destroy_srq(e.srq);
	ibv_dereg_mr(e.mr);
	ibv_destroy_cq(e.cq);
	ibv_destroy_comp_channel(e.ch);
	ibv_dealloc_pd(e.pd);
	fprintf(stderr, "the device works after every verb's faults; SEND and RDMA READ checked\n");
	return bad;
}

static const struct check checks[] = {
	{ "all", run_all },
	{ NULL }
};

int main(int argc, char **argv)
{
	return run_check(argc, argv, checks);
}
