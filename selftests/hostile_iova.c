// SPDX-License-Identifier: GPL-2.0
/*
 * Addresses at the top of the 64-bit I/O virtual address space: no address a driver
 * computes from a ring, a receive WQE or a packet may wrap past 2^64.
 *
 *   hostile_iova DEVICE CHECK   (see verbs_common.h)
 *
 * CHECK is "mr_reg" or one case of the table below. Every case runs on a pair of RC QPs
 * of the device connected to each other (path MTU 1024, so that its messages are
 * several packets), fresh for the case, against two MRs of one mapping laid out as
 *
 *   guard page | TOP (16 KiB) | guard page | LOW (16 KiB) | guard page
 *
 * TOP is registered with an iova that ends exactly at 2^64 (2^64 - 16 KiB), LOW at its
 * own address. A case posts one work request, waits (bounded) for its completions and
 * checks their status; then, with both QPs destroyed, that no byte of the mapping
 * changed outside what the request may write (the guard pages are never registered),
 * and for the cases that must succeed that the data arrived. After a case that ends in
 * error, a fresh pair of QPs moves data once more (the device still works).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "verbs_common.h"

#define PAGE 4096u
#define MTU 1024u
#define TOP_LEN (16u * 1024)
#define LOW_LEN (16u * 1024)
/* Offsets in the mapping. */
#define TOP_OFF PAGE
#define LOW_OFF (TOP_OFF + TOP_LEN + PAGE)
#define MAP_LEN (LOW_OFF + LOW_LEN + PAGE)
/* The first address of TOP: it ends at 2^64. */
#define TOP_IOVA ((uint64_t)0 - TOP_LEN)
/* How long a completion may take. */
#define WAIT_MS 5000
#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define QP_ACCESS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		   IBV_ACCESS_REMOTE_ATOMIC)

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* ---- Registration ---- */

/*
 * An MR whose iova range ends exactly at 2^64 is accepted (a whole one, and one byte
 * long at 2^64 - 1); one whose range passes 2^64, by a byte or by pages, is refused.
 * The address and the iova keep the same offset in the page, as ib_core requires.
 */
static int check_mr_reg(struct ibv_context *ctx)
{
	static const struct {
		const char *what;
		uint32_t addr_off;	/* in the mapping, from TOP */
		uint32_t len;
		uint64_t iova;
		int ok;
	} regs[] = {
		{ "16 KiB ending at 2^64", 0, TOP_LEN, (uint64_t)0 - TOP_LEN, 1 },
		{ "16 KiB - 1 ending at 2^64", 1, TOP_LEN - 1, (uint64_t)0 - (TOP_LEN - 1), 1 },
		{ "1 byte at 2^64 - 1", PAGE - 1, 1, (uint64_t)0 - 1, 1 },
		{ "16 KiB passing 2^64 by 1 byte", 1, TOP_LEN, (uint64_t)0 - (TOP_LEN - 1), 0 },
		{ "16 KiB passing 2^64 by 1 page", 0, TOP_LEN, (uint64_t)0 - (TOP_LEN - PAGE), 0 },
		{ "16 KiB at 2^64 - 4 KiB", 0, TOP_LEN, (uint64_t)0 - PAGE, 0 },
		{ "2 bytes at 2^64 - 1", PAGE - 1, 2, (uint64_t)0 - 1, 0 },
	};
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	uint8_t *mem = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
	int bad = 0;

	if (!pd || mem == MAP_FAILED)
		FAIL("setup: %s", strerror(errno));
	memset(mem, 0xee, MAP_LEN);
	for (unsigned int i = 0; i < sizeof(regs) / sizeof(regs[0]); i++) {
		struct ibv_mr *mr = ibv_reg_mr_iova(pd, mem + TOP_OFF + regs[i].addr_off,
						    regs[i].len, regs[i].iova, MR_ACCESS);
		int err = errno;

		fprintf(stderr, "%s (iova %#" PRIx64 ", length %u): %s\n", regs[i].what,
			regs[i].iova, regs[i].len, mr ? "registered" : strerror(err));
		if (!mr != !regs[i].ok) {
			fprintf(stderr, "  want it %s\n", regs[i].ok ? "registered" : "refused");
			bad = 1;
		}
		if (mr && ibv_dereg_mr(mr))
			FAIL("ibv_dereg_mr: %s", strerror(errno));
	}
	if (ibv_dealloc_pd(pd))
		FAIL("ibv_dealloc_pd: %s", strerror(errno));
	munmap(mem, MAP_LEN);
	return bad;
}

/* ---- Traffic ---- */

enum region { NONE, TOP, LOW };

/*
 * A piece of memory: `at` bytes below 2^64 in TOP, or `at` bytes into LOW; `len` bytes
 * long (it may pass 2^64: that is the point).
 */
struct seg {
	enum region mr;
	uint32_t at;
	uint32_t len;
};

enum op { SEND, WRITE, READ, FETCH_ADD, CMP_SWAP, FLUSH };

/* What a completion must be: success, any error, or one error exactly. */
enum want { ST_NONE, ST_OK, ST_ERR, ST_ANY, ST_REM_ACCESS, ST_LOC_PROT };

struct tcase {
	const char *name;
	enum op op;
	/* The requester's SGEs: what a SEND or WRITE sends, where a READ or atomic lands. */
	struct seg local[2];
	/* The target of a WRITE, READ, atomic or FLUSH (its length is the message's). */
	struct seg remote;
	/* The receive WQE of a SEND. */
	struct seg recv[2];
	/* The requester's completion, and the responder's receive completion. */
	enum want want, rwant;
};

static const struct tcase cases[] = {
	/*
	 * A SEND of several packets into a receive SGE at the top of TOP that is longer
	 * than what is left below 2^64: the first packet lands, the second crosses 2^64
	 * (recv_cross) or starts exactly at it (recv_at). Then an SGE that ends exactly
	 * at 2^64 with a longer message (recv_end_at_top): the message does not fit.
	 * The receive ends in error and the sender learns it from a NAK.
	 */
	{ "recv_cross", SEND, { { LOW, 0, 3072 } }, { NONE }, { { TOP, 1536, 4096 } }, ST_ERR, ST_ERR },
	{ "recv_at", SEND, { { LOW, 0, 2048 } }, { NONE }, { { TOP, 1024, 4096 } }, ST_ERR, ST_ERR },
	{ "recv_end_at_top", SEND, { { LOW, 0, 2048 } }, { NONE }, { { TOP, 1024, 1024 } }, ST_ERR, ST_ERR },
	/* RDMA WRITE and READ whose remote range starts in TOP and passes 2^64. */
	{ "write_cross", WRITE, { { LOW, 0, 3072 } }, { TOP, 1536 }, { { NONE } }, ST_REM_ACCESS, ST_NONE },
	{ "write_at", WRITE, { { LOW, 0, 2048 } }, { TOP, 1024 }, { { NONE } }, ST_REM_ACCESS, ST_NONE },
	{ "read_cross", READ, { { LOW, 0, 3072 } }, { TOP, 1536 }, { { NONE } }, ST_REM_ACCESS, ST_NONE },
	{ "read_at", READ, { { LOW, 0, 2048 } }, { TOP, 1024 }, { { NONE } }, ST_REM_ACCESS, ST_NONE },
	/*
	 * The requester's own SGE starts in TOP and passes 2^64: the gather of a SEND or
	 * WRITE (the first packet goes out; what the receiver got of it does not
	 * complete), and the scatter of a READ's responses.
	 */
	{ "gather_cross", SEND, { { TOP, 1536, 3072 } }, { NONE }, { { LOW, 0, 4096 } }, ST_ERR, ST_ANY },
	{ "gather_at", SEND, { { TOP, 1024, 2048 } }, { NONE }, { { LOW, 0, 4096 } }, ST_ERR, ST_ANY },
	{ "write_gather_cross", WRITE, { { TOP, 1536, 3072 } }, { LOW, 4096 }, { { NONE } }, ST_ERR, ST_NONE },
	{ "scatter_cross", READ, { { TOP, 1536, 3072 } }, { LOW, 4096 }, { { NONE } }, ST_LOC_PROT, ST_NONE },
	{ "scatter_at", READ, { { TOP, 1024, 2048 } }, { LOW, 4096 }, { { NONE } }, ST_LOC_PROT, ST_NONE },
	/*
	 * What ends exactly at 2^64 works: atomics on the last 8 bytes, RDMA WRITE and
	 * READ of the last 2 KiB, a SEND gathered from and one scattered to the last
	 * 2 KiB, SGE lists whose first SGE ends at 2^64, FLUSH of the last 2 KiB.
	 */
	{ "fetch_add_last", FETCH_ADD, { { LOW, 64, 8 } }, { TOP, 8 }, { { NONE } }, ST_OK, ST_NONE },
	{ "cmp_swap_last", CMP_SWAP, { { LOW, 64, 8 } }, { TOP, 8 }, { { NONE } }, ST_OK, ST_NONE },
	{ "write_last", WRITE, { { LOW, 0, 2048 } }, { TOP, 2048 }, { { NONE } }, ST_OK, ST_NONE },
	{ "read_last", READ, { { LOW, 4096, 2048 } }, { TOP, 2048 }, { { NONE } }, ST_OK, ST_NONE },
	{ "send_from_last", SEND, { { TOP, 2048, 2048 } }, { NONE }, { { LOW, 0, 4096 } }, ST_OK, ST_OK },
	{ "recv_into_last", SEND, { { LOW, 0, 2048 } }, { NONE }, { { TOP, 2048, 2048 } }, ST_OK, ST_OK },
	{ "read_into_last", READ, { { TOP, 2048, 2048 } }, { LOW, 0 }, { { NONE } }, ST_OK, ST_NONE },
	{ "send_last_then_low", SEND, { { TOP, 1024, 1024 }, { LOW, 0, 1024 } }, { NONE },
	  { { LOW, 4096, 4096 } }, ST_OK, ST_OK },
	{ "recv_last_then_low", SEND, { { LOW, 0, 2048 } }, { NONE },
	  { { TOP, 1024, 1024 }, { LOW, 8192, 1024 } }, ST_OK, ST_OK },
	{ "flush_last", FLUSH, { { NONE } }, { TOP, 2048, 2048 }, { { NONE } }, ST_OK, ST_NONE },
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t *mem;
	struct ibv_mr *top, *low;
	union ibv_gid gid;
	int gid_index;
};

/* A pair: the requester A and the responder B, each with one CQ for both queues. */
struct pair {
	struct ibv_cq *cq[2];
	struct ibv_qp *qp[2];
};

static int nsegs(const struct seg *s)
{
	return (s[0].mr != NONE) + (s[0].mr != NONE && s[1].mr != NONE);
}

static uint32_t seg_total(const struct seg *s)
{
	uint32_t n = 0;

	for (int i = 0; i < nsegs(s); i++)
		n += s[i].len;
	return n;
}

static uint64_t seg_addr(const struct env *e, const struct seg *s)
{
	return s->mr == TOP ? (uint64_t)0 - s->at : (uintptr_t)(e->mem + LOW_OFF + s->at);
}

/* Offset of the segment in the mapping, and how much of it lies in its region. */
static uint32_t seg_off(const struct seg *s)
{
	return s->mr == TOP ? TOP_OFF + TOP_LEN - s->at : LOW_OFF + s->at;
}

static uint32_t seg_inside(const struct seg *s, uint32_t len)
{
	uint32_t room = s->mr == TOP ? s->at : LOW_LEN - s->at;

	return len < room ? len : room;
}

static struct ibv_mr *seg_mr(const struct env *e, const struct seg *s)
{
	return s->mr == TOP ? e->top : e->low;
}

static int env_open(struct ibv_context *ctx, struct env *e, int flush)
{
	static const uint8_t v4[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 2, 15 };

	memset(e, 0, sizeof(*e));
	e->ctx = ctx;
	e->gid_index = roce_v2_gid_like(ctx, v4, sizeof(v4), &e->gid);
	if (e->gid_index < 0)
		FAIL("no RoCE v2 GID for 10.0.2.15");
	e->mem = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->mem == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	memset(e->mem, 0xee, MAP_LEN);
	if (!(e->pd = ibv_alloc_pd(ctx)))
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	/* FLUSH needs the access for it, which a device without FLUSH refuses. */
	e->top = ibv_reg_mr_iova(e->pd, e->mem + TOP_OFF, TOP_LEN, TOP_IOVA,
				 MR_ACCESS | (flush ? IBV_ACCESS_FLUSH_GLOBAL : 0));
	if (!e->top && flush)
		SKIP("flush: MR with FLUSH_GLOBAL refused: %s", strerror(errno));
	if (!e->top)
		FAIL("MR of 16 KiB ending at 2^64 refused: %s", strerror(errno));
	e->low = ibv_reg_mr(e->pd, e->mem + LOW_OFF, LOW_LEN, MR_ACCESS);
	if (!e->low)
		FAIL("ibv_reg_mr: %s", strerror(errno));
	return 0;
}

static int env_close(struct env *e)
{
	if (ibv_dereg_mr(e->top) || ibv_dereg_mr(e->low) || ibv_dealloc_pd(e->pd))
		FAIL("teardown: %s", strerror(errno));
	munmap(e->mem, MAP_LEN);
	return 0;
}

static int modify(struct env *e, struct ibv_qp *qp, uint32_t dest, int access)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = access };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS))
		return 1;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
				  .dest_qp_num = dest, .rq_psn = 0x1000,
				  .max_dest_rd_atomic = 4, .min_rnr_timer = 12 };
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = e->gid;
	a.ah_attr.grh.sgid_index = e->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER))
		return 1;
	/* Bounded retries: a lost or missing answer ends in an error, never a hang. */
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 0x1000, .timeout = 14,
				  .retry_cnt = 3, .rnr_retry = 3, .max_rd_atomic = 4 };
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC) != 0;
}

/*
 * Two RC QPs connected to each other. With `flush`, the requester is made with the
 * extended API offering FLUSH and the responder allows it; returns 4 if the device
 * does not take that.
 */
static int pair_open(struct env *e, struct pair *p, int flush)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 2, .max_recv_sge = 2 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = e->pd,
	};

	memset(p, 0, sizeof(*p));
	for (int i = 0; i < 2; i++) {
		if (!(p->cq[i] = ibv_create_cq(e->ctx, 16, NULL, NULL, 0)))
			FAIL("ibv_create_cq: %s", strerror(errno));
		a.send_cq = a.recv_cq = p->cq[i];
		if (flush && i == 0) {
			a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			a.send_ops_flags = IBV_QP_EX_WITH_FLUSH | IBV_QP_EX_WITH_RDMA_WRITE;
		} else {
			a.comp_mask = IBV_QP_INIT_ATTR_PD;
		}
		if (!(p->qp[i] = ibv_create_qp_ex(e->ctx, &a))) {
			if (flush && i == 0)
				SKIP("flush: no QP with FLUSH in its send operations: %s",
				     strerror(errno));
			FAIL("ibv_create_qp_ex: %s", strerror(errno));
		}
	}
	if (modify(e, p->qp[0], p->qp[1]->qp_num, QP_ACCESS))
		FAIL("connect A: %s", strerror(errno));
	if (modify(e, p->qp[1], p->qp[0]->qp_num,
		   QP_ACCESS | (flush ? IBV_ACCESS_FLUSH_GLOBAL : 0))) {
		if (flush)
			SKIP("flush: QP access with FLUSH_GLOBAL refused: %s", strerror(errno));
		FAIL("connect B: %s", strerror(errno));
	}
	return 0;
}

static int pair_close(struct pair *p)
{
	for (int i = 0; i < 2; i++) {
		if (p->qp[i] && ibv_destroy_qp(p->qp[i]))
			FAIL("ibv_destroy_qp: %s", strerror(errno));
		if (p->cq[i] && ibv_destroy_cq(p->cq[i]))
			FAIL("ibv_destroy_cq: %s", strerror(errno));
	}
	return 0;
}

/* The first completion on `cq` within `ms` milliseconds: 1, 0 if none came, -1. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	double end = now_ms() + ms;

	for (int i = 0; i < 1000000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		if (now_ms() > end)
			return 0;
		usleep(1000);
	}
	return 0;
}

static const char *want_str(enum want w)
{
	switch (w) {
	case ST_OK: return "success";
	case ST_ERR: return "an error";
	case ST_REM_ACCESS: return "REM_ACCESS_ERR";
	case ST_LOC_PROT: return "LOC_PROT_ERR";
	default: return "anything";
	}
}

static int status_is(enum want w, enum ibv_wc_status s)
{
	switch (w) {
	case ST_OK: return s == IBV_WC_SUCCESS;
	case ST_ERR: return s != IBV_WC_SUCCESS;
	case ST_REM_ACCESS: return s == IBV_WC_REM_ACCESS_ERR;
	case ST_LOC_PROT: return s == IBV_WC_LOC_PROT_ERR;
	default: return 1;
	}
}

static uint8_t pattern(uint32_t k)
{
	return (uint8_t)(k * 29 + 101);
}

/* Fills the part of `s` inside its region with the message pattern from byte `k`. */
static uint32_t fill(struct env *e, const struct seg *s, uint32_t k)
{
	uint32_t in = seg_inside(s, s->len);

	for (uint32_t i = 0; i < in; i++)
		e->mem[seg_off(s) + i] = pattern(k + i);
	return k + s->len;
}

/* Marks the part of `len` bytes of `s` inside its region as writable by the case. */
static void allow(uint8_t *mask, const struct seg *s, uint32_t len)
{
	memset(mask + seg_off(s), 1, seg_inside(s, len));
}

/* Whether the first `len` bytes of the list `d` hold the message pattern. */
static int arrived(const struct env *e, const struct seg *d, uint32_t len)
{
	uint32_t k = 0;

	for (int i = 0; i < nsegs(d) && k < len; i++)
		for (uint32_t j = 0; j < d[i].len && k < len; j++, k++)
			if (e->mem[seg_off(&d[i]) + j] != pattern(k)) {
				fprintf(stderr, "byte %u of the message is %#x, want %#x\n", k,
					e->mem[seg_off(&d[i]) + j], pattern(k));
				return 0;
			}
	return 1;
}

static void to_sges(const struct env *e, const struct seg *s, struct ibv_sge *sge)
{
	for (int i = 0; i < nsegs(s); i++)
		sge[i] = (struct ibv_sge){ .addr = seg_addr(e, &s[i]), .length = s[i].len,
					   .lkey = seg_mr(e, &s[i])->lkey };
}

#define OLD_VALUE 0x1122334455667788ull
#define ADD_VALUE 0x0101010101010101ull
#define SWAP_VALUE 0x8877665544332211ull

static int post(struct env *e, struct pair *p, const struct tcase *c)
{
	struct ibv_sge sge[2], rsge[2];
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = sge, .num_sge = nsegs(c->local),
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = rsge, .num_sge = nsegs(c->recv) },
			   *rbad;
	int ret;

	to_sges(e, c->local, sge);
	to_sges(e, c->recv, rsge);
	if (rwr.num_sge && (ret = ibv_post_recv(p->qp[1], &rwr, &rbad)))
		FAIL("ibv_post_recv: %s", strerror(ret));
	if (c->op == FLUSH) {
		struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(p->qp[0]);

		ibv_wr_start(qx);
		qx->wr_id = 1;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_flush(qx, seg_mr(e, &c->remote)->rkey, seg_addr(e, &c->remote),
			     c->remote.len, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
		if ((ret = ibv_wr_complete(qx)))
			FAIL("ibv_wr_complete (FLUSH): %s", strerror(ret));
		return 0;
	}
	switch (c->op) {
	case SEND:
		wr.opcode = IBV_WR_SEND;
		break;
	case WRITE:
	case READ:
		wr.opcode = c->op == WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = seg_addr(e, &c->remote);
		wr.wr.rdma.rkey = seg_mr(e, &c->remote)->rkey;
		break;
	default:
		wr.opcode = c->op == FETCH_ADD ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
		wr.wr.atomic.remote_addr = seg_addr(e, &c->remote);
		wr.wr.atomic.rkey = seg_mr(e, &c->remote)->rkey;
		wr.wr.atomic.compare_add = c->op == FETCH_ADD ? ADD_VALUE : OLD_VALUE;
		wr.wr.atomic.swap = SWAP_VALUE;
		break;
	}
	if ((ret = ibv_post_send(p->qp[0], &wr, &bad)))
		FAIL("ibv_post_send: %s", strerror(ret));
	return 0;
}

/* The device still moves data: a fresh pair WRITEs 64 bytes within LOW. */
static int still_works(struct env *e)
{
	struct pair p;
	struct ibv_wc wc;
	struct ibv_sge sge = { .addr = (uintptr_t)(e->mem + LOW_OFF), .length = 64,
			       .lkey = e->low->lkey };
	struct ibv_send_wr wr = { .wr_id = 3, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)(e->mem + LOW_OFF + 8192);
	wr.wr.rdma.rkey = e->low->rkey;
	if (pair_open(e, &p, 0) || ibv_post_send(p.qp[0], &wr, &bad))
		FAIL("after the case: a fresh pair cannot post: %s", strerror(errno));
	if (wait_wc(p.cq[0], &wc, WAIT_MS) != 1 || wc.status != IBV_WC_SUCCESS)
		FAIL("after the case: an RDMA WRITE on a fresh pair did not complete");
	if (memcmp(e->mem + LOW_OFF, e->mem + LOW_OFF + 8192, 64))
		FAIL("after the case: an RDMA WRITE on a fresh pair moved the wrong data");
	return pair_close(&p);
}

/*
 * Whether `qp` is in the error state within `ms` milliseconds (a driver may complete
 * the failed WQE just before it moves the QP).
 */
static int reaches_err(struct ibv_qp *qp, int ms)
{
	double end = now_ms() + ms;

	for (int i = 0; i < 100000; i++) {
		if (qp_state(qp) == IBV_QPS_ERR)
			return 1;
		if (now_ms() > end)
			return 0;
		usleep(1000);
	}
	return 0;
}

static int run_case(struct ibv_context *ctx, const struct tcase *c)
{
	static uint8_t before[MAP_LEN], mask[MAP_LEN];
	struct env e;
	struct pair p;
	struct ibv_wc wc, rwc;
	uint32_t len = c->op == FLUSH ? c->remote.len :
		       c->op == FETCH_ADD || c->op == CMP_SWAP ? 8 : seg_total(c->local);
	int got, rgot = 0, ret, bad = 0;

	if ((ret = env_open(ctx, &e, c->op == FLUSH)))
		return ret;
	if ((ret = pair_open(&e, &p, c->op == FLUSH))) {
		pair_close(&p);
		env_close(&e);
		return ret;
	}
	/* The data: the message pattern where it comes from; 0xee everywhere else. */
	memset(mask, 0, sizeof(mask));
	switch (c->op) {
	case SEND:
		for (uint32_t i = 0, k = 0; i < (uint32_t)nsegs(c->local); i++)
			k = fill(&e, &c->local[i], k);
		for (int i = 0; i < nsegs(c->recv); i++)
			allow(mask, &c->recv[i], c->recv[i].len);
		break;
	case WRITE:
		for (uint32_t i = 0, k = 0; i < (uint32_t)nsegs(c->local); i++)
			k = fill(&e, &c->local[i], k);
		allow(mask, &c->remote, len);
		break;
	case READ:
		fill(&e, &(struct seg){ c->remote.mr, c->remote.at, len }, 0);
		for (int i = 0; i < nsegs(c->local); i++)
			allow(mask, &c->local[i], c->local[i].len);
		break;
	case FETCH_ADD:
	case CMP_SWAP:
		memcpy(e.mem + seg_off(&c->remote), &(uint64_t){ OLD_VALUE }, 8);
		allow(mask, &c->remote, 8);
		allow(mask, &c->local[0], 8);
		break;
	case FLUSH:
		fill(&e, &c->remote, 0);
		break;
	}
	memcpy(before, e.mem, MAP_LEN);
	if (post(&e, &p, c)) {
		pair_close(&p);
		env_close(&e);
		return 1;
	}
	got = wait_wc(p.cq[0], &wc, WAIT_MS);
	if (got < 0)
		FAIL("ibv_poll_cq");
	if (c->rwant != ST_NONE)
		rgot = wait_wc(p.cq[1], &rwc, c->rwant == ST_ANY ? 300 : WAIT_MS);
	fprintf(stderr, "%s: requester %s", c->name,
		got ? ibv_wc_status_str(wc.status) : "no completion");
	if (c->rwant != ST_NONE)
		fprintf(stderr, ", receiver %s", rgot ? ibv_wc_status_str(rwc.status) : "no completion");
	fprintf(stderr, "\n");
	if (!got) {
		fprintf(stderr, "  no requester completion in %d ms (want %s)\n", WAIT_MS,
			want_str(c->want));
		bad = 1;
	} else if (!status_is(c->want, wc.status) || wc.wr_id != 1) {
		fprintf(stderr, "  requester: want %s (wr_id %llu)\n", want_str(c->want),
			(unsigned long long)wc.wr_id);
		bad = 1;
	} else if (c->want != ST_OK && !reaches_err(p.qp[0], 2000)) {
		fprintf(stderr, "  requester QP in state %d after an error, not ERR\n",
			qp_state(p.qp[0]));
		bad = 1;
	}
	if (c->rwant == ST_OK || c->rwant == ST_ERR) {
		if (!rgot) {
			fprintf(stderr, "  no receive completion in %d ms (want %s)\n", WAIT_MS,
				want_str(c->rwant));
			bad = 1;
		} else if (!status_is(c->rwant, rwc.status) || rwc.wr_id != 2) {
			fprintf(stderr, "  receiver: want %s\n", want_str(c->rwant));
			bad = 1;
		} else if (c->rwant == ST_OK && rwc.byte_len != len) {
			fprintf(stderr, "  receiver: %u bytes, want %u\n", rwc.byte_len, len);
			bad = 1;
		}
	}
	/* Nothing is written once both QPs are gone. */
	if (pair_close(&p))
		return 1;
	for (uint32_t i = 0; i < MAP_LEN; i++)
		if (!mask[i] && e.mem[i] != before[i]) {
			fprintf(stderr, "  byte %u of the mapping (%s) changed: %#x, was %#x\n", i,
				i < TOP_OFF || (i >= TOP_OFF + TOP_LEN && i < LOW_OFF) ||
						i >= LOW_OFF + LOW_LEN ? "a guard page" :
				i < LOW_OFF ? "TOP" : "LOW",
				e.mem[i], before[i]);
			bad = 1;
			break;
		}
	if (!bad && c->want == ST_OK) {
		uint64_t mem, res;

		switch (c->op) {
		case SEND:
			bad = !arrived(&e, c->recv, len);
			break;
		case WRITE:
			bad = !arrived(&e, (struct seg[2]){ { c->remote.mr, c->remote.at, len } }, len);
			break;
		case READ:
			bad = !arrived(&e, c->local, len);
			break;
		case FETCH_ADD:
		case CMP_SWAP:
			memcpy(&mem, e.mem + seg_off(&c->remote), 8);
			memcpy(&res, e.mem + seg_off(&c->local[0]), 8);
			fprintf(stderr, "  at 2^64 - 8: %#" PRIx64 ", returned %#" PRIx64 "\n",
				mem, res);
			if (res != OLD_VALUE ||
			    mem != (c->op == FETCH_ADD ? OLD_VALUE + ADD_VALUE : SWAP_VALUE)) {
				fprintf(stderr, "  want %#" PRIx64 ", returned %#" PRIx64 "\n",
					(uint64_t)(c->op == FETCH_ADD ? OLD_VALUE + ADD_VALUE :
									SWAP_VALUE),
					(uint64_t)OLD_VALUE);
				bad = 1;
			}
			break;
		case FLUSH:
			break;
		}
	}
	if (c->want != ST_OK && still_works(&e))
		bad = 1;
	if (env_close(&e))
		return 1;
	return bad;
}

static int check_case(struct ibv_context *ctx, const char *name)
{
	for (unsigned int i = 0; i < NCASES; i++)
		if (!strcmp(cases[i].name, name))
			return run_case(ctx, &cases[i]);
	FAIL("no case %s", name);
}

#define CASE(n) static int check_##n(struct ibv_context *c) { return check_case(c, #n); }
CASE(recv_cross)
CASE(recv_at)
CASE(recv_end_at_top)
CASE(write_cross)
CASE(write_at)
CASE(read_cross)
CASE(read_at)
CASE(gather_cross)
CASE(gather_at)
CASE(write_gather_cross)
CASE(scatter_cross)
CASE(scatter_at)
CASE(fetch_add_last)
CASE(cmp_swap_last)
CASE(write_last)
CASE(read_last)
CASE(send_from_last)
CASE(recv_into_last)
CASE(read_into_last)
CASE(send_last_then_low)
CASE(recv_last_then_low)
CASE(flush_last)

#define ENTRY(n) { #n, check_##n }
static const struct check checks[] = {
	{ "mr_reg", check_mr_reg },
	ENTRY(recv_cross),
	ENTRY(recv_at),
	ENTRY(recv_end_at_top),
	ENTRY(write_cross),
	ENTRY(write_at),
	ENTRY(read_cross),
	ENTRY(read_at),
	ENTRY(gather_cross),
	ENTRY(gather_at),
	ENTRY(write_gather_cross),
	ENTRY(scatter_cross),
	ENTRY(scatter_at),
	ENTRY(fetch_add_last),
	ENTRY(cmp_swap_last),
	ENTRY(write_last),
	ENTRY(read_last),
	ENTRY(send_from_last),
	ENTRY(recv_into_last),
	ENTRY(read_into_last),
	ENTRY(send_last_then_low),
	ENTRY(recv_last_then_low),
	ENTRY(flush_last),
	{ NULL }
};

int main(int argc, char **argv)
{
	return run_check(argc, argv, checks);
}
