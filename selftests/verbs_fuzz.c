// SPDX-License-Identifier: GPL-2.0
/*
 * A verbs fuzzer: several processes run random, bounded sequences of verbs on one
 * device (or on two, alternately: DEVICE,DEVICE2) through stock libibverbs and librxe,
 * and between the calls write into their own mapped rings.
 *
 *   verbs_fuzz DEVICE[,DEVICE2] [SEED]
 *
 * The seed is printed first; the same seed replays the same sequence of operations in
 * every process (what the kernel answers, and so what follows, can still differ). The
 * environment bounds and shapes a run:
 *
 *   FUZZ_SECONDS   wall-clock time of the random sequences (60)
 *   FUZZ_OPS       operations per process at most (1000000)
 *   FUZZ_PROCS     processes (3, at most 8)
 *   FUZZ_RINGS     1: write random and mutated contents, indices and headers into the
 *                  CQ, SQ, RQ and SRQ rings, and ring the doorbell by hand (1)
 *   FUZZ_HOSTILE   1: send opcodes outside the verbs' enum (1)
 *   FUZZ_KILL      1: SIGKILL one process midway, as the seed decides (1)
 *   FUZZ_RACER     1: a second thread in each process rings doorbells and moves QPs
 *                  to the error, reset or drain states by handle, racing the first (1)
 *   FUZZ_STALL     seconds after which one verb call counts as a stall (10)
 *   FUZZ_GRACE     seconds the processes have to end after the run (60 + 2 stalls)
 *   FUZZ_UNPLUG    seconds: then `rdma link delete` removes the second device under
 *                  the processes using it (0: never). They must see their verbs fail
 *                  and still end; the delete must return within FUZZ_GRACE.
 *   FUZZ_TRACE     file: every operation is appended to it before it runs (for a
 *                  crash: the last lines name what the kernel was given)
 *   FUZZ_ONLY      comma-separated operation names: only these run (to narrow a
 *                  finding down; the names are those of the summary lines)
 *   FUZZ_EXCEPT    comma-separated operation names that do not run
 *   FUZZ_MAX_QUEUES 1: ask for queues of the device's largest size too (0: at most
 *                  64 Ki entries). Off by default: queue memory is charged to the
 *                  process's memory cgroup, which has no limit in the test guest, and
 *                  two UD QPs of 2^20 entries take 1.3 GB, after which the OOM killer
 *                  kills other processes.
 *   FUZZ_MCAST_LIDS 1: attach to multicast groups with random LIDs too (0: LID 0
 *                  only) (1). rxe refuses the second detach of a QP attached to one
 *                  group under two LIDs, and the QP then outlives its process, WARNs in
 *                  uverbs_destroy_ufile_hw() and leaves `rdma link delete` and rmmod
 *                  waiting forever (the fuzzer does not run on rxe).
 *
 * What it asserts: every process ends (exit or the planned SIGKILL) within the run's
 * time plus a grace period, no verb call stalls, memory that no key opens for writing
 * never changes (a read-only MR shared with everyone, a page mapped read-only, the
 * guard pages between the buffers the MRs cover), and afterwards the device still moves
 * data (RC SEND, RDMA WRITE and READ between two fresh QPs, checked). The kernel log is
 * the caller's to check. Exit 0 when all held, 1 otherwise.
 *
 * Every process owns up to 2 contexts, 4 PDs, 6 CQs, 8 QPs, 3 SRQs, 8 MRs, 4 MWs,
 * 4 AHs and 4 multicast attachments; it tells the others (a pipe each) its MR keys and
 * addresses, its MW keys and its QP numbers, and uses theirs as well as its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <execinfo.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>
/* Its checks take DEVICE CHECK; this program takes a seed instead, and has no run_check. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "verbs_common.h"
#pragma GCC diagnostic pop

#define MAXP 8
#define NSLOT 8
#define SLOT (16 << 10)
#define GUARD 4096
#define ARENA (GUARD + NSLOT * (SLOT + GUARD))
#define MAXSGE 16
#define QKEY 0x11223344u
#define NMGID 4

#define N_PD 4
#define N_CQ 6
#define N_QP 8
#define N_SRQ 3
#define N_MR 8
#define N_MW 4
#define N_AH 4
#define N_MC 4
#define N_FOREIGN 64

static struct {
	double seconds, stall;
	long ops;
	int procs, rings, hostile, kill, racer, max_queues;
	double unplug;
	const char *trace, *only, *except;
	int mcast_lids;
	uint64_t seed;
} cfg;

/* The devices and their RoCE v2 GIDs (IPv4 and, if there is one, IPv6 link-local). */
static int ndev;
static char *devs[2];
static union ibv_gid dev_gid[2], dev_ll[2];
static int dev_gidx[2], dev_llidx[2];
static int pipes[MAXP][2];

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- one process's state ---- */

struct o_pd { struct ibv_pd *pd; int c; };
struct o_cq { struct ibv_cq *cq; struct ibv_cq_ex *cqx; int c, dirty; };
struct o_qp {
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	uint64_t ops;
	int c, srq, sq_dirty, rq_dirty;
	enum ibv_qp_type type;
	struct ibv_qp_cap cap;
};
struct o_srq { struct ibv_srq *srq; int c, dirty; uint32_t max_sge; };
struct o_mr { struct ibv_mr *mr; int c, canary; uint64_t iova, len; };
struct o_mw { struct ibv_mw *mw; int c; };
struct o_ah { struct ibv_ah *ah; int c; };
struct o_mc { int used, qp; union ibv_gid gid; uint16_t lid; };

/* What another process told: kind 1 MR (key lkey, key2 rkey), 2 QP (key type), 3 MW. */
struct frec { uint32_t kind, from, key, key2, qpn, len; uint64_t addr; };

enum ring_kind { R_CQ, R_SQ, R_RQ, R_SRQ };
struct ring { uint8_t *base; uint32_t size; };

static struct st {
	int id, dev;
	uint64_t rng;
	struct ibv_context *ctx[2];
	struct ibv_comp_channel *ch[2];
	struct ibv_device_attr_ex da;
	int odp;
	struct o_pd pd[N_PD];
	struct o_cq cq[N_CQ];
	struct o_qp qp[N_QP];
	struct o_srq srq[N_SRQ];
	struct o_mr mr[N_MR];
	struct o_mw mw[N_MW];
	struct o_ah ah[N_AH];
	struct o_mc mc[N_MC];
	struct frec foreign[N_FOREIGN];
	int nforeign;
	uint8_t *arena, *ro, *none;
	int trace_fd;
	long n;
	int stalls, canary_bad, big;
	double slowest;
	const char *slowest_op;
	long wc_status[24], wc_total, async_events, cq_events, raw_posts;
} S;

static uint64_t r64(void) { return splitmix(&S.rng); }
static uint32_t rnd(uint32_t n) { return n ? (uint32_t)(r64() % n) : 0; }
static int chance(int pct) { return rnd(100) < (uint32_t)pct; }

/* A 32-bit value that is often at a boundary. */
static uint32_t any32(void)
{
	static const uint32_t v[] = { 0, 1, 2, 3, 7, 8, 63, 64, 255, 256, 1023, 1024, 4095, 4096,
				      4097, 65535, 65536, 0x7fffffff, 0x80000000, 0xfffffffe,
				      0xffffffff, 0xffffff, 0x1000000 };

	return chance(60) ? v[rnd(sizeof(v) / sizeof(v[0]))] : (uint32_t)r64();
}

static uint64_t any64(void)
{
	static const uint64_t v[] = { 0, 1, 8, 4096, 0x7fffffffffffffffull, 0x8000000000000000ull,
				      0xfffffffffffff000ull, 0xfffffffffffffff8ull, ~0ull };

	return chance(50) ? v[rnd(sizeof(v) / sizeof(v[0]))] : r64();
}

static uint8_t *slot(int i) { return S.arena + GUARD + (size_t)i * (SLOT + GUARD); }

/* ---- picking objects ---- */

#define PICK(tab, n, cond)                                                        \
	({                                                                        \
		int _s = rnd(n), _r = -1;                                         \
		for (int _k = 0; _k < (n); _k++) {                                \
			int i = (_s + _k) % (n);                                  \
			if ((cond)) { _r = i; break; }                            \
		}                                                                 \
		_r;                                                               \
	})
#define FREE(tab, n, field) PICK(tab, n, !S.tab[i].field)

/* An object of context c (any context if c < 0). */
static int pick_pd(int c) { return PICK(pd, N_PD, S.pd[i].pd && (c < 0 || S.pd[i].c == c)); }
static int pick_cq(int c) { return PICK(cq, N_CQ, S.cq[i].cq && (c < 0 || S.cq[i].c == c)); }
static int pick_qp(void) { return PICK(qp, N_QP, S.qp[i].qp != NULL); }
static int pick_srq(int c) { return PICK(srq, N_SRQ, S.srq[i].srq && (c < 0 || S.srq[i].c == c)); }
static int pick_mr(void) { return PICK(mr, N_MR, S.mr[i].mr != NULL); }
static int pick_mw(void) { return PICK(mw, N_MW, S.mw[i].mw != NULL); }
static int pick_ah(void) { return PICK(ah, N_AH, S.ah[i].ah != NULL); }
static int pick_ctx(void) { return S.ctx[1] && chance(25) ? 1 : 0; }

static struct frec *pick_foreign(uint32_t kind)
{
	int k = PICK(foreign, N_FOREIGN, i < S.nforeign && S.foreign[i].kind == kind);

	return k < 0 ? NULL : &S.foreign[k];
}

/* ---- memory that must never change ---- */

static void fill_canaries(void)
{
	for (int i = 0; i <= NSLOT; i++)
		memset(S.arena + (size_t)i * (SLOT + GUARD), 0xa5, GUARD);
	for (int i = 0; i < SLOT; i++)
		slot(0)[i] = (uint8_t)(i * 7 + 3);
}

static int check_canaries(const char *when)
{
	for (int g = 0; g <= NSLOT; g++) {
		const uint8_t *p = S.arena + (size_t)g * (SLOT + GUARD);

		for (int i = 0; i < GUARD; i++)
			if (p[i] != 0xa5) {
				fprintf(stderr, "proc %d: %s: guard page %d changed at byte %d (0x%02x)\n",
					S.id, when, g, i, p[i]);
				return 1;
			}
	}
	for (int i = 0; i < SLOT; i++)
		if (slot(0)[i] != (uint8_t)(i * 7 + 3)) {
			fprintf(stderr, "proc %d: %s: the read-only MR changed at byte %d\n", S.id, when, i);
			return 1;
		}
	for (int i = 0; i < 4096; i++)
		if (S.ro[i] != 0x5a) {
			fprintf(stderr, "proc %d: %s: the read-only page changed at byte %d\n", S.id, when, i);
			return 1;
		}
	return 0;
}

/* ---- the rings librxe mapped ---- */

/*
 * librxe keeps, in its CQ, QP and SRQ structures after the verbs object, each ring's
 * struct mminfo (mmap offset and size) followed by the pointer to the ring's mapping.
 * Scanning for that pattern, checked against /proc/self/maps (the pointer must lie in a
 * mapping of the uverbs device at exactly that file offset), finds the rings without
 * depending on the rest of the provider's layout. Returns how many were found, in the
 * order of the structure (for a QP: RQ, then SQ).
 */
static int find_rings(const void *obj, size_t from, struct ring *out, int max)
{
	struct { unsigned long start, end, off; } maps[256];
	int nmaps = 0, n = 0;
	char line[512];
	/* librxe allocates each structure with malloc: never read past it. */
	size_t limit = malloc_usable_size((void *)obj);
	FILE *f;

	if (limit > from + 512)
		limit = from + 512;
	f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f) && nmaps < 256) {
		if (!strstr(line, "/dev/infiniband/uverbs"))
			continue;
		if (sscanf(line, "%lx-%lx %*s %lx", &maps[nmaps].start, &maps[nmaps].end,
			   &maps[nmaps].off) == 3)
			nmaps++;
	}
	fclose(f);
	for (size_t at = from; at + 24 <= limit && n < max; at += 8) {
		const uint8_t *p = (const uint8_t *)obj + at;
		struct mminfo mi;
		unsigned long ptr;

		memcpy(&mi, p, sizeof(mi));
		memcpy(&ptr, p + sizeof(mi), sizeof(ptr));
		if (!mi.size || !ptr || mi.size < 384)
			continue;
		for (int m = 0; m < nmaps; m++)
			if (ptr >= maps[m].start && ptr < maps[m].end &&
			    maps[m].off + (ptr - maps[m].start) == mi.offset &&
			    mi.size <= maps[m].end - ptr) {
				out[n].base = (uint8_t *)ptr;
				out[n].size = mi.size;
				n++;
				at += sizeof(mi);
				break;
			}
	}
	return n;
}

static int ring_of(enum ring_kind k, int i, struct ring *r)
{
	struct ring rs[2];
	int n;

	switch (k) {
	case R_CQ:
		return find_rings(S.cq[i].cq, sizeof(struct ibv_cq), r, 1) == 1;
	case R_SRQ:
		return find_rings(S.srq[i].srq, sizeof(struct ibv_srq), r, 1) == 1;
	default:
		/* Stops at the last ring expected: never reads past librxe's structure. */
		n = find_rings(S.qp[i].qp, sizeof(struct ibv_qp), rs, S.qp[i].srq >= 0 ? 1 : 2);
		if (S.qp[i].srq >= 0) {
			if (k != R_SQ || n != 1)
				return 0;
			*r = rs[0];
			return 1;
		}
		if (n != 2)
			return 0;
		*r = rs[k == R_RQ ? 0 : 1];
		return 1;
	}
}

#define PROD(r) ((volatile uint32_t *)((r)->base + 128))
#define CONS(r) ((volatile uint32_t *)((r)->base + 256))
#define LOG2(r) ((volatile uint32_t *)((r)->base))
#define MASK(r) ((volatile uint32_t *)((r)->base + 4))

/* A ring header as the kernel wrote it; 0 if it does not describe the mapping. */
static int ring_sane(const struct ring *r)
{
	uint32_t l = *LOG2(r), m = *MASK(r);

	return l >= 4 && l <= 16 && m < (1u << 20) && !(m & (m + 1)) &&
	       384 + ((uint64_t)(m + 1) << l) <= r->size;
}

/*
 * librxe uses the index it owns (a work queue's producer, a CQ's consumer) without
 * masking it: bring it back in range before librxe touches a ring written into.
 */
static void fix_ring(enum ring_kind k, int i, int *dirty)
{
	struct ring r;

	if (!*dirty)
		return;
	*dirty = 0;
	if (!ring_of(k, i, &r) || !ring_sane(&r))
		return;
	if (k == R_CQ)
		*CONS(&r) &= *MASK(&r);
	else
		*PROD(&r) &= *MASK(&r);
}

/* ---- raw uverbs write commands: the doorbell, and posts through ib_uverbs ---- */

static int raw_post(struct ibv_context *ctx, uint32_t cmd_id, uint32_t handle, int nwr,
		    int nsge, int garbage)
{
	union { uint8_t b[2048]; uint64_t align; } m;
	struct ib_uverbs_cmd_hdr *hdr = (void *)m.b;
	struct ib_uverbs_post_send *ps = (void *)(m.b + sizeof(*hdr));
	struct ib_uverbs_post_send_resp resp;
	uint32_t wsz = cmd_id == IB_USER_VERBS_CMD_POST_SEND ? sizeof(struct ib_uverbs_send_wr) :
							       sizeof(struct ib_uverbs_recv_wr);
	size_t len;

	memset(&m, 0, sizeof(m));
	if (garbage && chance(20))
		wsz = any32();
	hdr->command = cmd_id;
	/* post_send, post_recv and post_srq_recv share this layout. */
	ps->response = (uintptr_t)&resp;
	ps->qp_handle = handle;
	ps->wr_count = nwr;
	ps->sge_count = nsge;
	ps->wqe_size = wsz;
	len = sizeof(*hdr) + sizeof(*ps);
	if (nwr && wsz <= 256)
		len += (size_t)nwr * wsz;
	len += (size_t)nsge * sizeof(struct ib_uverbs_sge);
	if (len > sizeof(m.b))
		len = sizeof(m.b);
	if (garbage)
		for (size_t o = sizeof(*hdr) + sizeof(*ps); o + 4 <= len; o += 4) {
			uint32_t v = chance(50) ? rnd(16) : any32();

			memcpy(m.b + o, &v, 4);
		}
	if (garbage && chance(10))
		ps->wr_count = any32();
	hdr->in_words = len / 4;
	hdr->out_words = sizeof(resp) / 4;
	S.raw_posts++;
	return write(ctx->cmd_fd, m.b, len) == (ssize_t)len ? 0 : errno;
}

static void doorbell(int q)
{
	raw_post(S.qp[q].qp->context, IB_USER_VERBS_CMD_POST_SEND, S.qp[q].qp->handle, 0, 0, 0);
}

/* ---- values ---- */

static void dgid_of(union ibv_gid *g)
{
	switch (rnd(10)) {
	case 0: case 1: case 2: case 3:
		*g = dev_gid[S.dev];
		break;
	case 4: case 5:
		*g = dev_gid[rnd(ndev)];
		break;
	case 6:
		*g = dev_ll[rnd(ndev)];
		break;
	case 7:
		memset(g, 0, sizeof(*g));
		g->raw[0] = 0xff;
		g->raw[1] = 0x0e;
		g->raw[15] = rnd(NMGID);
		break;
	case 8:
		/* An IPv4 address no route leads to. */
		memset(g, 0, sizeof(*g));
		g->raw[10] = g->raw[11] = 0xff;
		g->raw[12] = 192;
		g->raw[13] = 0;
		g->raw[14] = 2;
		g->raw[15] = rnd(256);
		break;
	default:
		for (int i = 0; i < 16; i++)
			g->raw[i] = r64();
	}
}

static void ah_attr_of(struct ibv_ah_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->is_global = chance(95);
	dgid_of(&a->grh.dgid);
	a->grh.sgid_index = chance(85) ? dev_gidx[S.dev] : chance(50) ? dev_llidx[S.dev] : rnd(20);
	a->grh.hop_limit = chance(80) ? 64 : rnd(256);
	a->grh.traffic_class = chance(80) ? 0 : rnd(256);
	a->grh.flow_label = chance(80) ? 0 : r64() & 0xfffff;
	a->dlid = chance(90) ? 0 : rnd(65536);
	a->sl = chance(90) ? 0 : rnd(16);
	a->src_path_bits = chance(95) ? 0 : rnd(256);
	a->static_rate = chance(95) ? 0 : rnd(20);
	a->port_num = chance(95) ? 1 : rnd(3);
}

static int any_access(void)
{
	static const int bits[] = { IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE,
				    IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_ATOMIC,
				    IBV_ACCESS_MW_BIND, IBV_ACCESS_ZERO_BASED,
				    IBV_ACCESS_FLUSH_GLOBAL, IBV_ACCESS_FLUSH_PERSISTENT,
				    IBV_ACCESS_RELAXED_ORDERING };
	int a = 0;

	if (chance(50))
		return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC | (chance(50) ? IBV_ACCESS_MW_BIND : 0);
	for (unsigned int i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
		if (chance(40))
			a |= bits[i];
	return a;
}

/* A local SGE: own MR (often), another MR, a foreign or a random key. */
static void local_sge(struct ibv_sge *s)
{
	int m = pick_mr();
	struct frec *f;

	s->addr = (uintptr_t)slot(1 + rnd(NSLOT - 1)) + rnd(SLOT);
	s->length = chance(60) ? rnd(256) : chance(50) ? rnd(SLOT) : any32();
	s->lkey = any32();
	if (m >= 0 && chance(75)) {
		s->lkey = S.mr[m].mr->lkey;
		s->addr = S.mr[m].iova + rnd(S.mr[m].len + 16);
		if (chance(10))
			s->addr -= rnd(64);
		if (chance(60) && S.mr[m].len)
			s->length = 1 + rnd(S.mr[m].len);
	} else if (chance(50) && (f = pick_foreign(1))) {
		s->lkey = chance(50) ? f->key : f->key2;
		s->addr = f->addr + rnd(f->len + 1);
	}
	if (chance(3))
		s->addr = any64();
}

/* A remote address and key: own MR or MW, a foreign one, a random one. */
static void remote_of(uint64_t *addr, uint32_t *rkey)
{
	int m = pick_mr(), w = pick_mw();
	struct frec *f;

	*addr = any64();
	*rkey = any32();
	switch (rnd(6)) {
	case 0: case 1:
		if (m >= 0) {
			*rkey = S.mr[m].mr->rkey;
			*addr = S.mr[m].iova + rnd(S.mr[m].len + 8);
		}
		break;
	case 2: case 3:
		if ((f = pick_foreign(1))) {
			*rkey = f->key2;
			*addr = f->addr + rnd(f->len + 8);
		}
		break;
	case 4:
		if (w >= 0)
			*rkey = S.mw[w].mw->rkey;
		else if ((f = pick_foreign(3)))
			*rkey = f->key;
		if (m >= 0)
			*addr = S.mr[m].iova + rnd(S.mr[m].len + 8);
		break;
	}
	if (chance(50))
		*addr &= ~7ull;
}

/* A QP number to send to or connect with: own, foreign, special or random. */
static uint32_t qpn_of(enum ibv_qp_type t, int *dev)
{
	int q = PICK(qp, N_QP, S.qp[i].qp && S.qp[i].type == t);
	struct frec *f;

	*dev = S.dev;
	switch (rnd(8)) {
	case 0: case 1: case 2:
		if (q >= 0)
			return S.qp[q].qp->qp_num;
		break;
	case 3: case 4:
		for (int k = 0; k < 4; k++)
			if ((f = pick_foreign(2)) && f->key == (uint32_t)t) {
				*dev = f->from % ndev;
				return f->qpn;
			}
		break;
	case 5:
		return chance(50) ? 1 : 0xffffff;
	}
	return chance(50) ? r64() & 0xffffff : any32();
}

/* ---- telling the others ---- */

static void tell(uint32_t kind, uint32_t key, uint32_t key2, uint32_t qpn, uint64_t addr,
		 uint32_t len)
{
	struct frec r = { kind, S.id, key, key2, qpn, len, addr };

	/* Non-blocking: a full pipe loses the record. */
	for (int p = 0; p < cfg.procs; p++)
		if (p != S.id && write(pipes[p][1], &r, sizeof(r)) < 0)
			continue;
}

static void op_learn(void)
{
	struct frec r;

	for (int k = 0; k < 16 && read(pipes[S.id][0], &r, sizeof(r)) == sizeof(r); k++)
		S.foreign[S.nforeign < N_FOREIGN ? S.nforeign++ : (int)rnd(N_FOREIGN)] = r;
}

/* ---- contexts, PDs ---- */

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static struct ibv_context *open_ctx(void)
{
	struct ibv_context *ctx;

	dev_name = devs[S.dev];
	ctx = open_dev();
	if (ctx)
		set_nonblock(ctx->async_fd);
	return ctx;
}

static void op_ctx_open(void)
{
	if (S.ctx[1])
		return;
	S.ctx[1] = open_ctx();
	if (S.ctx[1] && (S.ch[1] = ibv_create_comp_channel(S.ctx[1])))
		set_nonblock(S.ch[1]->fd);
}

/* Closes context c with whatever it still holds: the kernel cleans up. */
static void drop_ctx(int c)
{
	for (int i = 0; i < N_PD; i++) if (S.pd[i].c == c) S.pd[i].pd = NULL;
	for (int i = 0; i < N_CQ; i++) if (S.cq[i].c == c) S.cq[i].cq = NULL;
	for (int i = 0; i < N_QP; i++) if (S.qp[i].c == c) S.qp[i].qp = NULL;
	for (int i = 0; i < N_SRQ; i++) if (S.srq[i].c == c) S.srq[i].srq = NULL;
	for (int i = 0; i < N_MR; i++) if (S.mr[i].c == c) S.mr[i].mr = NULL;
	for (int i = 0; i < N_MW; i++) if (S.mw[i].c == c) S.mw[i].mw = NULL;
	for (int i = 0; i < N_AH; i++) if (S.ah[i].c == c) S.ah[i].ah = NULL;
	for (int i = 0; i < N_MC; i++) if (S.mc[i].used && !S.qp[S.mc[i].qp].qp) S.mc[i].used = 0;
	/*
	 * A completion channel still used by a CQ cannot be destroyed; its file would keep
	 * the context alive, so it is closed behind libibverbs' back.
	 */
	if (S.ch[c] && ibv_destroy_comp_channel(S.ch[c]))
		close(S.ch[c]->fd);
	S.ch[c] = NULL;
	ibv_close_device(S.ctx[c]);
	S.ctx[c] = NULL;
}

static void op_ctx_close(void)
{
	if (S.ctx[1])
		drop_ctx(1);
}

static int op_pd_alloc(void)
{
	int i = FREE(pd, N_PD, pd), c = pick_ctx();

	if (i < 0)
		return -1;
	S.pd[i].pd = ibv_alloc_pd(S.ctx[c]);
	S.pd[i].c = c;
	return S.pd[i].pd ? 0 : -1;
}

static int op_pd_dealloc(void)
{
	/* PD 0 holds the read-only MR: it stays. */
	int i = PICK(pd, N_PD, i > 0 && S.pd[i].pd);

	if (i < 0 || ibv_dealloc_pd(S.pd[i].pd))
		return -1;
	S.pd[i].pd = NULL;
	return 0;
}

/* ---- CQs ---- */

static int cqe_count(void)
{
	int max = S.da.orig_attr.max_cqe;

	switch (rnd(10)) {
	case 0: return 0;
	case 1: return chance(50) ? max : max + 1;
	case 2: return -1 - (int)rnd(4);
	case 3: return 1 + rnd(max < 4096 ? max : 4096);
	default: return 1 + rnd(64);
	}
}

static int op_cq_create(void)
{
	int i = FREE(cq, N_CQ, cq), c = pick_ctx();
	struct ibv_comp_channel *ch = chance(50) ? S.ch[c] : NULL;
	int vec = chance(95) ? 0 : rnd(4);

	if (i < 0)
		return -1;
	S.cq[i].c = c;
	S.cq[i].dirty = 0;
	S.cq[i].cqx = NULL;
	if (chance(30)) {
		struct ibv_cq_init_attr_ex a = {
			.cqe = cqe_count(), .channel = ch, .comp_vector = vec,
			.wc_flags = chance(50) ? IBV_WC_EX_WITH_BYTE_LEN : 0,
		};

		if (chance(10))
			a.wc_flags |= 1u << rnd(12);
		if (chance(5))
			a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS, a.flags = rnd(4);
		S.cq[i].cqx = ibv_create_cq_ex(S.ctx[c], &a);
		S.cq[i].cq = S.cq[i].cqx ? ibv_cq_ex_to_cq(S.cq[i].cqx) : NULL;
	} else {
		S.cq[i].cq = ibv_create_cq(S.ctx[c], cqe_count(), NULL, ch, vec);
	}
	if (S.cq[i].cq && chance(50))
		ibv_req_notify_cq(S.cq[i].cq, rnd(2));
	return S.cq[i].cq ? 0 : -1;
}

static int op_cq_resize(void)
{
	int i = pick_cq(-1);

	if (i < 0)
		return -1;
	fix_ring(R_CQ, i, &S.cq[i].dirty);
	return ibv_resize_cq(S.cq[i].cq, cqe_count()) ? -1 : 0;
}

static int op_cq_destroy(void)
{
	int i = pick_cq(-1);

	if (i < 0 || ibv_destroy_cq(S.cq[i].cq))
		return -1;
	S.cq[i].cq = NULL;
	return 0;
}

static int op_cq_notify(void)
{
	int i = pick_cq(-1);

	return i < 0 || ibv_req_notify_cq(S.cq[i].cq, rnd(2)) ? -1 : 0;
}

static void count_wc(uint32_t status)
{
	S.wc_total++;
	S.wc_status[status < 23 ? status : 23]++;
}

static int op_cq_poll(void)
{
	int i = pick_cq(-1), n;
	struct ibv_wc wc[16];

	if (i < 0)
		return -1;
	fix_ring(R_CQ, i, &S.cq[i].dirty);
	if (S.cq[i].cqx && chance(50)) {
		struct ibv_poll_cq_attr pa = {};
		struct ibv_cq_ex *x = S.cq[i].cqx;

		if (ibv_start_poll(x, &pa))
			return 0;
		n = 0;
		do {
			count_wc(x->status);
			if (x->read_opcode)
				(void)ibv_wc_read_opcode(x);
		} while (++n < 16 && !ibv_next_poll(x));
		ibv_end_poll(x);
		return 0;
	}
	n = ibv_poll_cq(S.cq[i].cq, 1 + rnd(16), wc);
	for (int k = 0; k < n; k++)
		count_wc(wc[k].status);
	return n < 0 ? -1 : 0;
}

/* Completion and async events: read without waiting, acknowledged at once. */
static int op_events(void)
{
	for (int c = 0; c < 2; c++) {
		struct ibv_async_event ev;
		struct pollfd p;

		if (!S.ctx[c])
			continue;
		for (int k = 0; k < 8 && !ibv_get_async_event(S.ctx[c], &ev); k++) {
			S.async_events++;
			ibv_ack_async_event(&ev);
		}
		if (!S.ch[c])
			continue;
		p = (struct pollfd){ .fd = S.ch[c]->fd, .events = POLLIN };
		for (int k = 0; k < 8 && poll(&p, 1, 0) == 1; k++) {
			struct ibv_cq *cq;
			void *cq_ctx;

			if (ibv_get_cq_event(S.ch[c], &cq, &cq_ctx))
				break;
			S.cq_events++;
			ibv_ack_cq_events(cq, 1);
			if (chance(50))
				ibv_req_notify_cq(cq, rnd(2));
		}
	}
	return 0;
}

/* ---- SRQs ---- */

/*
 * A queue's size: mostly small, at times up to 1024, beyond the limit (refused), or the
 * limit itself, rarely: a ring of the largest size is MiBs of vmalloc that the kernel
 * clears page by page (seconds under TCG, 20 s under KASAN).
 */
static uint32_t wr_count(uint32_t max)
{
	switch (rnd(12)) {
	case 0: return 0;
	case 1: return max + 1 + rnd(2) * 1000000;
	case 2:
		/*
		 * At most two of the largest per process: each takes seconds to clear. The
		 * largest is 64 Ki unless FUZZ_MAX_QUEUES: a few of the device's own largest
		 * (2^20) take the guest's memory, and the OOM killer then kills processes
		 * that made none of it.
		 */
		if (chance(5) && S.big < 2) {
			S.big++;
			return cfg.max_queues || max < 65536 ? max : 65536;
		}
		return 1 + rnd(max < 1024 ? max : 1024);
	default: return 1 + rnd(32);
	}
}

static uint32_t sge_count(uint32_t max)
{
	switch (rnd(10)) {
	case 0: return 0;
	case 1: return max + 1;
	case 2: return max;
	default: return 1 + rnd(4);
	}
}

static int op_srq_create(void)
{
	int i = FREE(srq, N_SRQ, srq), p = pick_pd(-1);
	struct ibv_srq_init_attr a = {};

	if (i < 0 || p < 0)
		return -1;
	a.attr.max_wr = wr_count(S.da.orig_attr.max_srq_wr);
	a.attr.max_sge = a.attr.max_wr > 1024 ? 1 : sge_count(S.da.orig_attr.max_srq_sge);
	a.attr.srq_limit = chance(70) ? 0 : chance(50) ? rnd(a.attr.max_wr + 2) : any32();
	S.srq[i].srq = ibv_create_srq(S.pd[p].pd, &a);
	S.srq[i].c = S.pd[p].c;
	S.srq[i].dirty = 0;
	S.srq[i].max_sge = a.attr.max_sge;
	return S.srq[i].srq ? 0 : -1;
}

static int op_srq_modify(void)
{
	int i = pick_srq(-1);
	struct ibv_srq_attr a = {};
	int mask = 0;

	if (i < 0)
		return -1;
	if (chance(40))
		mask |= IBV_SRQ_MAX_WR;
	if (chance(70))
		mask |= IBV_SRQ_LIMIT;
	if (chance(5))
		mask |= 1 << rnd(8);
	a.max_wr = wr_count(S.da.orig_attr.max_srq_wr);
	a.srq_limit = chance(80) ? rnd(64) : any32();
	fix_ring(R_SRQ, i, &S.srq[i].dirty);
	return ibv_modify_srq(S.srq[i].srq, &a, mask) ? -1 : 0;
}

static int op_srq_query(void)
{
	int i = pick_srq(-1);
	struct ibv_srq_attr a;

	return i < 0 || ibv_query_srq(S.srq[i].srq, &a) ? -1 : 0;
}

static int op_srq_destroy(void)
{
	int i = pick_srq(-1);

	if (i < 0 || ibv_destroy_srq(S.srq[i].srq))
		return -1;
	S.srq[i].srq = NULL;
	return 0;
}

static void recv_wrs(struct ibv_recv_wr *w, struct ibv_sge (*sg)[MAXSGE], uint32_t max_sge, int n)
{
	for (int k = 0; k < n; k++) {
		w[k] = (struct ibv_recv_wr){ .wr_id = r64(), .sg_list = sg[k],
					     .next = k + 1 < n ? &w[k + 1] : NULL };
		w[k].num_sge = sge_count(max_sge);
		if (w[k].num_sge > MAXSGE)
			w[k].num_sge = MAXSGE;
		for (int s = 0; s < MAXSGE; s++)
			local_sge(&sg[k][s]);
	}
}

static int op_post_srq_recv(void)
{
	int i = pick_srq(-1), n = 1 + rnd(4);
	struct ibv_recv_wr w[4], *bad;
	struct ibv_sge sg[4][MAXSGE];

	if (i < 0)
		return -1;
	recv_wrs(w, sg, S.srq[i].max_sge, n);
	fix_ring(R_SRQ, i, &S.srq[i].dirty);
	return ibv_post_srq_recv(S.srq[i].srq, w, &bad) ? -1 : 0;
}

/* ---- QPs ---- */

static const uint64_t send_ops[] = {
	IBV_QP_EX_WITH_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_SEND,
	IBV_QP_EX_WITH_SEND_WITH_IMM, IBV_QP_EX_WITH_RDMA_READ, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
	IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_LOCAL_INV, IBV_QP_EX_WITH_BIND_MW,
	IBV_QP_EX_WITH_SEND_WITH_INV, IBV_QP_EX_WITH_FLUSH, IBV_QP_EX_WITH_ATOMIC_WRITE,
};
#define N_SEND_OPS (int)(sizeof(send_ops) / sizeof(send_ops[0]))

static int op_qp_create(void)
{
	int i = FREE(qp, N_QP, qp), p = pick_pd(-1), c, s, r, q;
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	struct ibv_qp_init_attr_ex a = {};

	if (i < 0 || p < 0)
		return -1;
	c = S.pd[p].c;
	s = pick_cq(chance(5) ? -1 : c);
	r = chance(30) ? s : pick_cq(chance(5) ? -1 : c);
	if (s < 0 || r < 0)
		return -1;
	a.qp_type = chance(97) ? types[rnd(3)] : chance(50) ? IBV_QPT_RAW_PACKET : any32();
	a.send_cq = S.cq[s].cq;
	a.recv_cq = S.cq[r].cq;
	a.cap.max_send_wr = wr_count(S.da.orig_attr.max_qp_wr);
	a.cap.max_recv_wr = wr_count(S.da.orig_attr.max_qp_wr);
	a.cap.max_send_sge = sge_count(S.da.orig_attr.max_sge);
	a.cap.max_recv_sge = sge_count(S.da.orig_attr.max_sge);
	a.cap.max_inline_data = chance(60) ? rnd(256) : chance(50) ? rnd(4096) : any32();
	/* The largest queues with small WQEs only. */
	if (a.cap.max_send_wr > 1024 && a.cap.max_send_wr <= S.da.orig_attr.max_qp_wr) {
		a.cap.max_send_sge = 1;
		a.cap.max_inline_data = 0;
	}
	if (a.cap.max_recv_wr > 1024 && a.cap.max_recv_wr <= S.da.orig_attr.max_qp_wr)
		a.cap.max_recv_sge = 1;
	a.sq_sig_all = rnd(2);
	q = chance(25) ? pick_srq(c) : -1;
	if (q >= 0)
		a.srq = S.srq[q].srq;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = S.pd[p].pd;
	if (chance(40)) {
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		for (int k = 0; k < N_SEND_OPS; k++)
			if (chance(60))
				a.send_ops_flags |= send_ops[k];
		if (chance(5))
			a.send_ops_flags |= 1ull << rnd(20);
	}
	S.qp[i].qp = ibv_create_qp_ex(S.ctx[c], &a);
	if (!S.qp[i].qp)
		return -1;
	S.qp[i].qpx = ibv_qp_to_qp_ex(S.qp[i].qp);
	S.qp[i].ops = a.send_ops_flags;
	S.qp[i].c = c;
	S.qp[i].srq = q;
	S.qp[i].type = a.qp_type;
	S.qp[i].cap = a.cap;
	S.qp[i].sq_dirty = S.qp[i].rq_dirty = 0;
	tell(2, a.qp_type, 0, S.qp[i].qp->qp_num, 0, 0);
	return 0;
}

struct conn {
	uint32_t dqpn, rq_psn, sq_psn, access;
	union ibv_gid dgid;
	int timeout, retry, rnr, mtu;
};

/* One step along the legal path: attributes each state needs for the type. */
static int qp_to(struct ibv_qp *qp, enum ibv_qp_state s, const struct conn *k)
{
	struct ibv_qp_attr a = { .qp_state = s };
	int mask = IBV_QP_STATE;
	int rc = qp->qp_type == IBV_QPT_RC, ud = qp->qp_type == IBV_QPT_UD;

	switch (s) {
	case IBV_QPS_INIT:
		a.port_num = 1;
		a.pkey_index = 0;
		a.qkey = QKEY;
		a.qp_access_flags = k->access;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		break;
	case IBV_QPS_RTR:
		if (ud)
			break;
		a.path_mtu = k->mtu;
		a.dest_qp_num = k->dqpn;
		a.rq_psn = k->rq_psn;
		a.ah_attr = (struct ibv_ah_attr){ .is_global = 1, .port_num = 1,
			.grh = { .dgid = k->dgid, .sgid_index = dev_gidx[S.dev], .hop_limit = 64 } };
		a.max_dest_rd_atomic = 4;
		a.min_rnr_timer = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (rc)
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		break;
	case IBV_QPS_RTS:
		a.sq_psn = k->sq_psn;
		a.timeout = k->timeout;
		a.retry_cnt = k->retry;
		a.rnr_retry = k->rnr;
		a.max_rd_atomic = 4;
		mask |= IBV_QP_SQ_PSN;
		if (rc)
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	default:
		break;
	}
	return ibv_modify_qp(qp, &a, mask);
}

static int qp_connect(struct ibv_qp *qp, const struct conn *k)
{
	return qp_to(qp, IBV_QPS_RESET, k) || qp_to(qp, IBV_QPS_INIT, k) ||
	       qp_to(qp, IBV_QPS_RTR, k) || qp_to(qp, IBV_QPS_RTS, k);
}

/* Connects a QP (and often its peer, when that is one of ours) through RTS. */
static int op_connect(void)
{
	int a = pick_qp(), b, dev;
	struct conn k = { .access = chance(80) ? 15 : any_access(), .mtu = chance(80) ? IBV_MTU_1024 : 1 + rnd(5),
			  .timeout = chance(80) ? 8 + rnd(8) : rnd(32), .retry = rnd(8), .rnr = rnd(8) };

	if (a < 0)
		return -1;
	k.dqpn = qpn_of(S.qp[a].type, &dev);
	k.dgid = dev_gid[dev];
	if (chance(5))
		dgid_of(&k.dgid);
	k.rq_psn = r64() & 0xffffff;
	k.sq_psn = r64() & 0xffffff;
	b = PICK(qp, N_QP, S.qp[i].qp && S.qp[i].qp->qp_num == k.dqpn);
	if (qp_connect(S.qp[a].qp, &k))
		return -1;
	if (b >= 0 && b != a && chance(80)) {
		struct conn kb = k;

		kb.dqpn = S.qp[a].qp->qp_num;
		kb.rq_psn = k.sq_psn;
		kb.sq_psn = k.rq_psn;
		return qp_connect(S.qp[b].qp, &kb) ? -1 : 0;
	}
	return 0;
}

static const int qp_masks[] = {
	IBV_QP_STATE, IBV_QP_CUR_STATE, IBV_QP_EN_SQD_ASYNC_NOTIFY, IBV_QP_ACCESS_FLAGS,
	IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_QKEY, IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_TIMEOUT,
	IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY, IBV_QP_RQ_PSN, IBV_QP_MAX_QP_RD_ATOMIC,
	IBV_QP_ALT_PATH, IBV_QP_MIN_RNR_TIMER, IBV_QP_SQ_PSN, IBV_QP_MAX_DEST_RD_ATOMIC,
	IBV_QP_PATH_MIG_STATE, IBV_QP_CAP, IBV_QP_DEST_QPN, IBV_QP_RATE_LIMIT,
};

/*
 * A modify with random attributes: mostly a legal transition from the state the QP is
 * in with the attributes it needs (values mostly in range), else any state and any
 * subset of the attribute mask.
 */
static int op_qp_modify(void)
{
	int q = pick_qp(), mask, dev;
	struct ibv_qp_attr a = {};
	struct ibv_qp_init_attr ia;
	enum ibv_qp_state cur = IBV_QPS_RESET;
	static const enum ibv_qp_state next[7][4] = {
		[IBV_QPS_RESET] = { IBV_QPS_INIT, IBV_QPS_INIT, IBV_QPS_RESET, IBV_QPS_ERR },
		[IBV_QPS_INIT] = { IBV_QPS_RTR, IBV_QPS_INIT, IBV_QPS_RESET, IBV_QPS_ERR },
		[IBV_QPS_RTR] = { IBV_QPS_RTS, IBV_QPS_RTS, IBV_QPS_RESET, IBV_QPS_ERR },
		[IBV_QPS_RTS] = { IBV_QPS_SQD, IBV_QPS_RTS, IBV_QPS_RESET, IBV_QPS_ERR },
		[IBV_QPS_SQD] = { IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_RESET, IBV_QPS_ERR },
		[IBV_QPS_SQE] = { IBV_QPS_RTS, IBV_QPS_RTS, IBV_QPS_RESET, IBV_QPS_ERR },
		[IBV_QPS_ERR] = { IBV_QPS_RESET, IBV_QPS_ERR, IBV_QPS_RESET, IBV_QPS_ERR },
	};

	if (q < 0)
		return -1;
	if (!ibv_query_qp(S.qp[q].qp, &a, IBV_QP_STATE, &ia) && a.qp_state <= IBV_QPS_ERR)
		cur = a.qp_state;
	memset(&a, 0, sizeof(a));
	a.path_mtu = chance(80) ? IBV_MTU_1024 : rnd(8);
	a.path_mig_state = rnd(3);
	a.qkey = chance(80) ? QKEY : any32();
	a.rq_psn = chance(90) ? r64() & 0xffffff : any32();
	a.sq_psn = chance(90) ? r64() & 0xffffff : any32();
	a.dest_qp_num = qpn_of(S.qp[q].type, &dev);
	a.qp_access_flags = chance(80) ? rnd(16) : any_access();
	a.cap = (struct ibv_qp_cap){ any32(), any32(), rnd(8), rnd(8), any32() };
	ah_attr_of(&a.ah_attr);
	if (chance(80))
		a.ah_attr.grh.dgid = dev_gid[dev];
	ah_attr_of(&a.alt_ah_attr);
	a.pkey_index = chance(90) ? 0 : any32();
	a.alt_pkey_index = rnd(4);
	a.en_sqd_async_notify = rnd(2);
	a.max_rd_atomic = chance(80) ? rnd(17) : rnd(256);
	a.max_dest_rd_atomic = chance(80) ? rnd(17) : rnd(256);
	a.min_rnr_timer = rnd(32);
	a.port_num = chance(90) ? 1 : rnd(4);
	a.timeout = chance(80) ? 8 + rnd(8) : rnd(32);
	a.retry_cnt = rnd(8);
	a.rnr_retry = rnd(8);
	a.alt_port_num = rnd(3);
	a.alt_timeout = rnd(32);
	a.rate_limit = chance(90) ? 0 : any32();
	if (chance(70)) {
		int ud = S.qp[q].type == IBV_QPT_UD, rc = S.qp[q].type == IBV_QPT_RC;

		a.qp_state = next[cur][rnd(4)];
		mask = IBV_QP_STATE;
		if (cur == IBV_QPS_RESET && a.qp_state == IBV_QPS_INIT)
			mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		if (cur == IBV_QPS_INIT && a.qp_state == IBV_QPS_RTR && !ud)
			mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				(rc ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0);
		if (cur == IBV_QPS_RTR && a.qp_state == IBV_QPS_RTS)
			mask |= IBV_QP_SQ_PSN | (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC : 0);
		if (a.qp_state == IBV_QPS_SQD)
			mask |= chance(50) ? IBV_QP_EN_SQD_ASYNC_NOTIFY : 0;
		/* Optional attributes now and then, legal or not for the transition. */
		if (chance(20))
			mask |= qp_masks[rnd(sizeof(qp_masks) / sizeof(qp_masks[0]))];
	} else {
		a.qp_state = chance(90) ? rnd(7) : any32();
		a.cur_qp_state = rnd(8);
		mask = chance(80) ? IBV_QP_STATE : 0;
		for (unsigned int k = 0; k < sizeof(qp_masks) / sizeof(qp_masks[0]); k++)
			if (chance(25))
				mask |= qp_masks[k];
		if (chance(3))
			mask |= 1 << rnd(31);
	}
	return ibv_modify_qp(S.qp[q].qp, &a, mask) ? -1 : 0;
}

static int op_qp_query(void)
{
	int q = pick_qp();
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	return q < 0 || ibv_query_qp(S.qp[q].qp, &a, chance(80) ? 0x1fffff : any32(), &ia) ? -1 : 0;
}

static int op_qp_destroy(void)
{
	int q = pick_qp();

	if (q < 0 || ibv_destroy_qp(S.qp[q].qp))
		return -1;
	S.qp[q].qp = NULL;
	for (int i = 0; i < N_MC; i++)
		if (S.mc[i].used && S.mc[i].qp == q)
			S.mc[i].used = 0;
	return 0;
}

static int op_post_recv(void)
{
	int q = PICK(qp, N_QP, S.qp[i].qp && S.qp[i].srq < 0), n = 1 + rnd(4);
	struct ibv_recv_wr w[4], *bad;
	struct ibv_sge sg[4][MAXSGE];

	if (q < 0)
		return -1;
	recv_wrs(w, sg, S.qp[q].cap.max_recv_sge, n);
	fix_ring(R_RQ, q, &S.qp[q].rq_dirty);
	return ibv_post_recv(S.qp[q].qp, w, &bad) ? -1 : 0;
}

/* Inline data must be readable memory of the process: small pieces of the arena. */
static void inline_sges(struct ibv_sge *sg, int n, uint32_t max_inline)
{
	for (int s = 0; s < n; s++) {
		sg[s].length = rnd(max_inline / (n ? n : 1) + 2);
		sg[s].addr = (uintptr_t)slot(rnd(NSLOT)) + rnd(SLOT - 512);
		sg[s].lkey = any32();
	}
}

static int op_post_send(void)
{
	static const enum ibv_wr_opcode rc_ops[] = {
		IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
		IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_WR_LOCAL_INV, IBV_WR_BIND_MW, IBV_WR_SEND_WITH_INV, IBV_WR_TSO, IBV_WR_DRIVER1,
		IBV_WR_FLUSH, IBV_WR_ATOMIC_WRITE,
	};
	int q = pick_qp(), n = 1 + rnd(4), dev;
	struct ibv_send_wr w[4], *bad;
	struct ibv_sge sg[4][MAXSGE];
	struct o_qp *o;

	if (q < 0)
		return -1;
	o = &S.qp[q];
	for (int k = 0; k < n; k++) {
		struct ibv_send_wr *x = &w[k];
		int a = pick_ah(), m, mw;

		memset(x, 0, sizeof(*x));
		x->wr_id = r64();
		x->next = k + 1 < n ? &w[k + 1] : NULL;
		x->sg_list = sg[k];
		if (o->type == IBV_QPT_RC || chance(15))
			x->opcode = rc_ops[rnd(sizeof(rc_ops) / sizeof(rc_ops[0]))];
		else if (o->type == IBV_QPT_UC)
			x->opcode = (enum ibv_wr_opcode[]){ IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
				IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM }[rnd(4)];
		else
			x->opcode = chance(70) ? IBV_WR_SEND : IBV_WR_SEND_WITH_IMM;
		if (cfg.hostile && chance(2))
			x->opcode = chance(50) ? 16 + rnd(48) : any32();
		x->send_flags = (chance(70) ? IBV_SEND_SIGNALED : 0) | (chance(10) ? IBV_SEND_SOLICITED : 0) |
				(chance(10) ? IBV_SEND_FENCE : 0) | (chance(3) ? IBV_SEND_IP_CSUM : 0);
		x->num_sge = sge_count(o->cap.max_send_sge);
		if (x->num_sge > MAXSGE)
			x->num_sge = MAXSGE;
		for (int s = 0; s < MAXSGE; s++)
			local_sge(&sg[k][s]);
		if (chance(15)) {
			x->send_flags |= IBV_SEND_INLINE;
			inline_sges(sg[k], x->num_sge, o->cap.max_inline_data);
		}
		x->imm_data = r64();
		remote_of(&x->wr.rdma.remote_addr, &x->wr.rdma.rkey);
		switch ((int)x->opcode) {
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			remote_of(&x->wr.atomic.remote_addr, &x->wr.atomic.rkey);
			x->wr.atomic.compare_add = r64();
			x->wr.atomic.swap = r64();
			if (chance(80) && x->num_sge && !(x->send_flags & IBV_SEND_INLINE))
				sg[k][0].length = 8;
			break;
		case IBV_WR_LOCAL_INV:
		case IBV_WR_SEND_WITH_INV:
			remote_of(&x->wr.rdma.remote_addr, &x->invalidate_rkey);
			break;
		case IBV_WR_BIND_MW:
			mw = pick_mw();
			m = pick_mr();
			if (mw < 0 || m < 0) {
				x->opcode = IBV_WR_SEND;
				break;
			}
			x->num_sge = 0;
			x->send_flags &= ~IBV_SEND_INLINE;
			x->imm_data = 0;
			x->bind_mw.mw = S.mw[mw].mw;
			x->bind_mw.rkey = chance(80) ? ibv_inc_rkey(S.mw[mw].mw->rkey) : any32();
			x->bind_mw.bind_info.mr = S.mr[m].mr;
			x->bind_mw.bind_info.addr = S.mr[m].iova + (chance(70) ? 0 : rnd(S.mr[m].len + 64));
			x->bind_mw.bind_info.length = chance(60) ? S.mr[m].len : chance(50) ? rnd(S.mr[m].len + 64) : any64();
			x->bind_mw.bind_info.mw_access_flags = chance(70) ? rnd(16) : any_access();
			break;
		}
		if (o->type == IBV_QPT_UD) {
			if (a < 0)
				return -1;
			x->wr.ud.ah = S.ah[a].ah;
			x->wr.ud.remote_qpn = qpn_of(IBV_QPT_UD, &dev);
			x->wr.ud.remote_qkey = chance(80) ? QKEY : chance(50) ? 0x80010000 : any32();
		}
	}
	fix_ring(R_SQ, q, &o->sq_dirty);
	return ibv_post_send(o->qp, w, &bad) ? -1 : 0;
}

/* The same through the extended work request API (QPs created with send_ops_flags). */
static int op_post_wr_ex(void)
{
	int q = PICK(qp, N_QP, S.qp[i].qp && S.qp[i].qpx && S.qp[i].ops), n = 1 + rnd(4), dev;
	struct ibv_qp_ex *x;
	struct o_qp *o;

	if (q < 0)
		return -1;
	o = &S.qp[q];
	x = o->qpx;
	fix_ring(R_SQ, q, &o->sq_dirty);
	ibv_wr_start(x);
	for (int k = 0; k < n; k++) {
		uint64_t op, raddr, cmp = r64(), swp = r64();
		uint32_t rkey;
		int data = 1, mw = pick_mw(), m = pick_mr(), a = pick_ah();

		do
			op = send_ops[rnd(N_SEND_OPS)];
		while (!(o->ops & op));
		remote_of(&raddr, &rkey);
		x->wr_id = r64();
		x->wr_flags = (chance(70) ? IBV_SEND_SIGNALED : 0) | (chance(10) ? IBV_SEND_SOLICITED : 0) |
			      (chance(10) ? IBV_SEND_FENCE : 0);
		/* A provider leaves out what it cannot do: such an operation is not called. */
		switch (op) {
		case IBV_QP_EX_WITH_RDMA_WRITE:
			if (x->wr_rdma_write) ibv_wr_rdma_write(x, rkey, raddr);
			break;
		case IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM:
			if (x->wr_rdma_write_imm) ibv_wr_rdma_write_imm(x, rkey, raddr, r64());
			break;
		case IBV_QP_EX_WITH_SEND:
			if (x->wr_send) ibv_wr_send(x);
			break;
		case IBV_QP_EX_WITH_SEND_WITH_IMM:
			if (x->wr_send_imm) ibv_wr_send_imm(x, r64());
			break;
		case IBV_QP_EX_WITH_SEND_WITH_INV:
			if (x->wr_send_inv) ibv_wr_send_inv(x, rkey);
			break;
		case IBV_QP_EX_WITH_RDMA_READ:
			if (x->wr_rdma_read) ibv_wr_rdma_read(x, rkey, raddr);
			break;
		case IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP:
			if (x->wr_atomic_cmp_swp) ibv_wr_atomic_cmp_swp(x, rkey, raddr, cmp, swp);
			break;
		case IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD:
			if (x->wr_atomic_fetch_add) ibv_wr_atomic_fetch_add(x, rkey, raddr, cmp);
			break;
		case IBV_QP_EX_WITH_LOCAL_INV:
			if (x->wr_local_inv) ibv_wr_local_inv(x, rkey);
			data = 0;
			break;
		case IBV_QP_EX_WITH_FLUSH:
			if (x->wr_flush)
				ibv_wr_flush(x, rkey, raddr, chance(70) ? rnd(SLOT) : any32(),
					     chance(80) ? 1 + rnd(3) : rnd(256), chance(80) ? rnd(2) : rnd(256));
			data = 0;
			break;
		case IBV_QP_EX_WITH_ATOMIC_WRITE:
			if (x->wr_atomic_write) ibv_wr_atomic_write(x, rkey, raddr, &swp);
			data = 0;
			break;
		case IBV_QP_EX_WITH_BIND_MW:
			data = 0;
			if (mw >= 0 && m >= 0 && x->wr_bind_mw) {
				struct ibv_mw_bind_info bi = {
					.mr = S.mr[m].mr, .addr = S.mr[m].iova + (chance(70) ? 0 : rnd(S.mr[m].len + 64)),
					.length = chance(60) ? S.mr[m].len : rnd(S.mr[m].len + 64),
					.mw_access_flags = rnd(16) };

				ibv_wr_bind_mw(x, S.mw[mw].mw, ibv_inc_rkey(S.mw[mw].mw->rkey), &bi);
			}
			break;
		}
		if (o->type == IBV_QPT_UD && x->wr_set_ud_addr) {
			if (a < 0) {
				ibv_wr_abort(x);
				return -1;
			}
			ibv_wr_set_ud_addr(x, S.ah[a].ah, qpn_of(IBV_QPT_UD, &dev), chance(80) ? QKEY : any32());
		}
		if (!data)
			continue;
		if (chance(20) && o->cap.max_inline_data && x->wr_set_inline_data) {
			ibv_wr_set_inline_data(x, slot(rnd(NSLOT)) + rnd(SLOT - 512),
					       rnd(o->cap.max_inline_data < 512 ? o->cap.max_inline_data : 512));
		} else if (!o->cap.max_send_sge || !x->wr_set_sge || !x->wr_set_sge_list) {
			continue;
		} else if (chance(50)) {
			struct ibv_sge s;

			local_sge(&s);
			ibv_wr_set_sge(x, s.lkey, s.addr, s.length);
		} else {
			struct ibv_sge sg[MAXSGE];
			size_t ns = 1 + rnd(o->cap.max_send_sge < MAXSGE ? o->cap.max_send_sge : MAXSGE);

			for (size_t s = 0; s < ns; s++)
				local_sge(&sg[s]);
			ibv_wr_set_sge_list(x, ns, sg);
		}
	}
	if (chance(10)) {
		ibv_wr_abort(x);
		return 0;
	}
	return ibv_wr_complete(x) ? -1 : 0;
}

/* Posts through ib_uverbs' own WR parsing (a process's QP must refuse them). */
static int op_raw_post(void)
{
	int q = pick_qp(), s = pick_srq(-1), c = pick_ctx();
	uint32_t cmd = (uint32_t[]){ IB_USER_VERBS_CMD_POST_SEND, IB_USER_VERBS_CMD_POST_RECV,
				     IB_USER_VERBS_CMD_POST_SRQ_RECV }[rnd(3)];
	uint32_t h = chance(10) ? rnd(64) : cmd == IB_USER_VERBS_CMD_POST_SRQ_RECV ?
		(s >= 0 ? S.srq[s].srq->handle : 0) : (q >= 0 ? S.qp[q].qp->handle : 0);

	if (q >= 0 && chance(90))
		c = S.qp[q].c;
	return raw_post(S.ctx[c], cmd, h, rnd(4), rnd(6), 1) ? -1 : 0;
}

/* ---- MRs, MWs, AHs, multicast ---- */

static int op_mr_reg(void)
{
	int i = FREE(mr, N_MR, mr), p = pick_pd(-1), access = any_access();
	uint8_t *buf = slot(1 + rnd(NSLOT - 1));
	size_t off = chance(50) ? 0 : rnd(SLOT), len = SLOT - off;
	uint64_t iova;
	struct ibv_mr *mr = NULL;

	if (i < 0 || p < 0)
		return -1;
	if (chance(60) && len)
		len = 1 + rnd(len);
	if (S.odp && chance(10))
		access |= IBV_ACCESS_ON_DEMAND;
	iova = (uintptr_t)buf + off;
	switch (rnd(12)) {
	case 0: case 1: {
		/* Near the top of the address space: ending at 2^64, or across it. */
		uint64_t pg = ((uintptr_t)buf + off) & 4095, span = (len + pg + 4095) & ~4095ull;

		iova = (0 - span) + pg;
		if (chance(30))
			iova += 4096 * (1 + rnd(4));
		if (chance(10))
			iova = any64();
		mr = ibv_reg_mr_iova(S.pd[p].pd, buf + off, len, iova, access);
		break;
	}
	case 2:
		iova = r64() & ~4095ull;
		iova += ((uintptr_t)buf + off) & 4095;
		mr = ibv_reg_mr_iova(S.pd[p].pd, buf + off, len, iova, access);
		break;
	case 3:
		/* The read-only page: fine without write access, refused with. */
		buf = S.ro;
		off = 0;
		len = 1 + rnd(4096);
		iova = (uintptr_t)buf;
		access = chance(50) ? IBV_ACCESS_REMOTE_READ : any_access();
		mr = ibv_reg_mr(S.pd[p].pd, buf, len, access);
		break;
	case 4:
		/* Memory that cannot be registered. */
		switch (rnd(4)) {
		case 0: mr = ibv_reg_mr(S.pd[p].pd, S.none, 4096, access); break;
		case 1: mr = ibv_reg_mr(S.pd[p].pd, NULL, 4096, access); break;
		case 2: mr = ibv_reg_mr(S.pd[p].pd, (void *)0xffff888000000000ull, 4096, access); break;
		default: mr = ibv_reg_mr(S.pd[p].pd, buf, (size_t)1 << 40, access); break;
		}
		iova = 0;
		break;
	default:
		mr = ibv_reg_mr(S.pd[p].pd, buf + off, len, access);
		break;
	}
	if (!mr)
		return -1;
	if (access & IBV_ACCESS_ZERO_BASED)
		iova = 0;
	S.mr[i] = (struct o_mr){ .mr = mr, .c = S.pd[p].c, .iova = iova, .len = mr->length };
	tell(1, mr->lkey, mr->rkey, 0, iova, mr->length);
	return 0;
}

static int op_mr_rereg(void)
{
	int i = PICK(mr, N_MR, S.mr[i].mr && !S.mr[i].canary), p = pick_pd(-1), flags = 0, access = any_access();
	uint8_t *buf = slot(1 + rnd(NSLOT - 1));
	size_t off = rnd(SLOT / 2), len = 1 + rnd(SLOT - off);
	int ret;

	if (i < 0 || p < 0)
		return -1;
	if (chance(50))
		flags |= IBV_REREG_MR_CHANGE_TRANSLATION;
	if (chance(50))
		flags |= IBV_REREG_MR_CHANGE_PD;
	if (chance(60))
		flags |= IBV_REREG_MR_CHANGE_ACCESS;
	if (chance(5))
		flags = any32();
	ret = ibv_rereg_mr(S.mr[i].mr, flags, S.pd[p].pd, buf + off, len, access);
	if (ret)
		return -1;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		S.mr[i].iova = (uintptr_t)buf + off;
		S.mr[i].len = len;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		S.mr[i].c = S.pd[p].c;
	tell(1, S.mr[i].mr->lkey, S.mr[i].mr->rkey, 0, S.mr[i].iova, S.mr[i].len);
	return 0;
}

static int op_mr_dereg(void)
{
	int i = PICK(mr, N_MR, S.mr[i].mr && !S.mr[i].canary);

	if (i < 0 || ibv_dereg_mr(S.mr[i].mr))
		return -1;
	S.mr[i].mr = NULL;
	return 0;
}

/* Pages of the buffers dropped: on-demand MRs fault them in again. */
static int op_madvise(void)
{
	return madvise(slot(1 + rnd(NSLOT - 1)), SLOT, MADV_DONTNEED) ? -1 : 0;
}

static int op_mw_alloc(void)
{
	int i = FREE(mw, N_MW, mw), p = pick_pd(-1);

	if (i < 0 || p < 0)
		return -1;
	S.mw[i].mw = ibv_alloc_mw(S.pd[p].pd, chance(95) ? IBV_MW_TYPE_1 + rnd(2) : any32());
	S.mw[i].c = S.pd[p].c;
	if (S.mw[i].mw)
		tell(3, S.mw[i].mw->rkey, 0, 0, 0, 0);
	return S.mw[i].mw ? 0 : -1;
}

static int op_mw_bind(void)
{
	int w = pick_mw(), m = pick_mr(), q = PICK(qp, N_QP, S.qp[i].qp && S.qp[i].type != IBV_QPT_UD);
	struct ibv_mw_bind b = {};
	int ret;

	if (w < 0 || m < 0 || q < 0)
		return -1;
	b.wr_id = r64();
	b.send_flags = chance(70) ? IBV_SEND_SIGNALED : 0;
	b.bind_info.mr = S.mr[m].mr;
	b.bind_info.addr = S.mr[m].iova + (chance(70) ? 0 : rnd(S.mr[m].len + 64));
	b.bind_info.length = chance(60) ? S.mr[m].len : chance(50) ? rnd(S.mr[m].len + 64) : any64();
	b.bind_info.mw_access_flags = chance(70) ? rnd(16) : any_access();
	if (chance(10))
		b.bind_info.length = 0;
	fix_ring(R_SQ, q, &S.qp[q].sq_dirty);
	ret = ibv_bind_mw(S.qp[q].qp, S.mw[w].mw, &b);
	if (!ret)
		tell(3, S.mw[w].mw->rkey, 0, 0, 0, 0);
	return ret ? -1 : 0;
}

static int op_mw_dealloc(void)
{
	int i = pick_mw();

	if (i < 0 || ibv_dealloc_mw(S.mw[i].mw))
		return -1;
	S.mw[i].mw = NULL;
	return 0;
}

static int op_ah_create(void)
{
	int i = FREE(ah, N_AH, ah), p = pick_pd(-1);
	struct ibv_ah_attr a;

	if (i < 0 || p < 0)
		return -1;
	ah_attr_of(&a);
	S.ah[i].ah = ibv_create_ah(S.pd[p].pd, &a);
	S.ah[i].c = S.pd[p].c;
	return S.ah[i].ah ? 0 : -1;
}

static int op_ah_destroy(void)
{
	int i = pick_ah();

	if (i < 0 || ibv_destroy_ah(S.ah[i].ah))
		return -1;
	S.ah[i].ah = NULL;
	return 0;
}

static int op_mc_attach(void)
{
	int i = FREE(mc, N_MC, used), q = PICK(qp, N_QP, S.qp[i].qp && (S.qp[i].type == IBV_QPT_UD || chance(10)));
	union ibv_gid g = {};
	uint16_t lid = !cfg.mcast_lids || chance(80) ? 0 : rnd(65536);

	if (i < 0 || q < 0)
		return -1;
	g.raw[0] = 0xff;
	g.raw[1] = 0x0e;
	g.raw[15] = rnd(NMGID);
	if (chance(10))
		dgid_of(&g);
	if (ibv_attach_mcast(S.qp[q].qp, &g, lid))
		return -1;
	S.mc[i] = (struct o_mc){ .used = 1, .qp = q, .gid = g, .lid = lid };
	return 0;
}

static int op_mc_detach(void)
{
	int i = PICK(mc, N_MC, S.mc[i].used), q = pick_qp();
	union ibv_gid g;

	if (i >= 0 && S.qp[S.mc[i].qp].qp && chance(80)) {
		if (ibv_detach_mcast(S.qp[S.mc[i].qp].qp, &S.mc[i].gid, S.mc[i].lid))
			return -1;
		S.mc[i].used = 0;
		return 0;
	}
	if (q < 0)
		return -1;
	dgid_of(&g);
	return ibv_detach_mcast(S.qp[q].qp, &g, rnd(65536)) ? -1 : 0;
}

static int op_query(void)
{
	struct ibv_port_attr pa;
	struct ibv_device_attr da;
	union ibv_gid g;
	int c = pick_ctx();

	switch (rnd(3)) {
	case 0: return ibv_query_port(S.ctx[c], chance(90) ? 1 : rnd(256), &pa) ? -1 : 0;
	case 1: return ibv_query_gid(S.ctx[c], 1, rnd(20), &g) ? -1 : 0;
	default: return ibv_query_device(S.ctx[c], &da) ? -1 : 0;
	}
}

static int op_share(void)
{
	int m = pick_mr(), q = pick_qp();

	if (m >= 0)
		tell(1, S.mr[m].mr->lkey, S.mr[m].mr->rkey, 0, S.mr[m].iova, S.mr[m].len);
	if (q >= 0)
		tell(2, S.qp[q].type, 0, S.qp[q].qp->qp_num, 0, 0);
	return 0;
}

/* ---- writing into the rings ---- */

struct field { uint16_t off, size; };
#define F(t, m) { offsetof(struct t, m), sizeof(((struct t *)0)->m) }
static const struct field send_fields[] = {
	F(rxe_send_wqe, wr.opcode), F(rxe_send_wqe, wr.send_flags), F(rxe_send_wqe, wr.ex.imm_data),
	F(rxe_send_wqe, wr.wr.rdma.remote_addr), F(rxe_send_wqe, wr.wr.rdma.rkey),
	F(rxe_send_wqe, wr.wr.atomic.compare_add), F(rxe_send_wqe, wr.wr.atomic.swap),
	F(rxe_send_wqe, wr.wr.atomic.rkey), F(rxe_send_wqe, wr.wr.ud.remote_qpn),
	F(rxe_send_wqe, wr.wr.ud.remote_qkey), F(rxe_send_wqe, wr.wr.ud.pkey_index),
	F(rxe_send_wqe, wr.wr.ud.ah_num), F(rxe_send_wqe, wr.wr.ud.av.port_num),
	F(rxe_send_wqe, wr.wr.ud.av.network_type), F(rxe_send_wqe, wr.wr.ud.av.grh.sgid_index),
	F(rxe_send_wqe, wr.wr.ud.av.grh.dgid.global.interface_id),
	F(rxe_send_wqe, wr.wr.ud.av.dgid_addr._sockaddr_in.sin_family),
	F(rxe_send_wqe, wr.wr.ud.av.dgid_addr._sockaddr_in.sin_addr),
	F(rxe_send_wqe, wr.wr.mw.addr), F(rxe_send_wqe, wr.wr.mw.length),
	F(rxe_send_wqe, wr.wr.mw.mr_lkey), F(rxe_send_wqe, wr.wr.mw.mw_rkey),
	F(rxe_send_wqe, wr.wr.mw.rkey), F(rxe_send_wqe, wr.wr.mw.access),
	F(rxe_send_wqe, wr.wr.flush.length), F(rxe_send_wqe, wr.wr.flush.type),
	F(rxe_send_wqe, wr.wr.flush.level), F(rxe_send_wqe, status), F(rxe_send_wqe, state),
	F(rxe_send_wqe, iova), F(rxe_send_wqe, mask), F(rxe_send_wqe, first_psn),
	F(rxe_send_wqe, last_psn), F(rxe_send_wqe, ssn), F(rxe_send_wqe, has_rd_atomic),
	F(rxe_send_wqe, dma.length), F(rxe_send_wqe, dma.resid), F(rxe_send_wqe, dma.cur_sge),
	F(rxe_send_wqe, dma.num_sge), F(rxe_send_wqe, dma.sge_offset),
	{ offsetof(struct rxe_send_wqe, dma.sge), 8 }, { offsetof(struct rxe_send_wqe, dma.sge) + 8, 4 },
	{ offsetof(struct rxe_send_wqe, dma.sge) + 12, 4 }, { offsetof(struct rxe_send_wqe, dma.sge) + 24, 4 },
};
static const struct field recv_fields[] = {
	F(rxe_recv_wqe, wr_id), F(rxe_recv_wqe, dma.length), F(rxe_recv_wqe, dma.resid),
	F(rxe_recv_wqe, dma.cur_sge), F(rxe_recv_wqe, dma.num_sge), F(rxe_recv_wqe, dma.sge_offset),
	{ offsetof(struct rxe_recv_wqe, dma.sge), 8 }, { offsetof(struct rxe_recv_wqe, dma.sge) + 8, 4 },
	{ offsetof(struct rxe_recv_wqe, dma.sge) + 12, 4 }, { offsetof(struct rxe_recv_wqe, dma.sge) + 24, 4 },
};

static void mutate(uint8_t *e, uint32_t esize, const struct field *f, int nf)
{
	for (int k = 1 + rnd(3); k > 0; k--) {
		const struct field *x = &f[rnd(nf)];
		uint64_t v;

		if (x->off + x->size > esize)
			continue;
		memcpy(&v, e + x->off, 8 < x->size ? 8 : x->size);
		switch (rnd(4)) {
		case 0: v ^= 1ull << rnd(x->size * 8); break;
		case 1: v += rnd(2) ? 1 : -1; break;
		default: v = x->size == 8 ? any64() : any32(); break;
		}
		memcpy(e + x->off, &v, x->size);
	}
}

static int op_ring(void)
{
	enum ring_kind k = rnd(4);
	int i, *dirty, qp = -1;
	struct ring r;
	uint32_t mask, esize;
	uint8_t *data;

	switch (k) {
	case R_CQ:
		i = pick_cq(-1);
		dirty = i >= 0 ? &S.cq[i].dirty : NULL;
		break;
	case R_SRQ:
		i = pick_srq(-1);
		dirty = i >= 0 ? &S.srq[i].dirty : NULL;
		break;
	default:
		i = PICK(qp, N_QP, S.qp[i].qp && (k == R_SQ || S.qp[i].srq < 0));
		qp = i;
		dirty = i < 0 ? NULL : k == R_SQ ? &S.qp[i].sq_dirty : &S.qp[i].rq_dirty;
	}
	if (i < 0 || !ring_of(k, i, &r) || !ring_sane(&r))
		return -1;
	mask = *MASK(&r);
	esize = 1u << *LOG2(&r);
	data = r.base + 384;
	switch (rnd(5)) {
	case 0:
		/* Random words anywhere after the header fields librxe reads. */
		for (int n = 1 + rnd(16); n > 0; n--)
			((volatile uint32_t *)data)[rnd((r.size - 384) / 4)] = any32();
		break;
	case 1:
	case 2: {
		/* Mutated copies of earlier slots at the producer, handed to the kernel. */
		uint32_t p = *PROD(&r) & mask;

		for (int n = 1 + rnd(4); n > 0; n--) {
			uint8_t *e = data + (size_t)p * esize;

			if (chance(70))
				memmove(e, data + (size_t)rnd(mask + 1) * esize, esize);
			if (k == R_SQ)
				mutate(e, esize, send_fields, sizeof(send_fields) / sizeof(send_fields[0]));
			else if (k != R_CQ)
				mutate(e, esize, recv_fields, sizeof(recv_fields) / sizeof(recv_fields[0]));
			else
				for (int w = 1 + rnd(4); w > 0; w--)
					((volatile uint32_t *)e)[rnd(esize / 4)] = any32();
			p = (p + 1) & mask;
		}
		/* For a CQ that is the kernel's index: librxe then polls the garbage. */
		*PROD(&r) = p;
		if (k == R_SQ && chance(80))
			doorbell(qp);
		break;
	}
	case 3:
		/* An index out of range or out of step, the kernel's or librxe's. */
		if (chance(50))
			*PROD(&r) = chance(50) ? any32() : (*PROD(&r) + rnd(mask + 3)) & (chance(50) ? mask : ~0u);
		else
			*CONS(&r) = chance(50) ? any32() : (*CONS(&r) + rnd(mask + 3)) & (chance(50) ? mask : ~0u);
		*dirty = 1;
		if (k == R_SQ && chance(80))
			doorbell(qp);
		break;
	default: {
		/* The header librxe reads, garbage for a moment, then put back. */
		uint32_t l = *LOG2(&r), m = *MASK(&r);

		*LOG2(&r) = any32();
		*MASK(&r) = any32();
		if (k == R_SQ)
			doorbell(qp);
		else
			usleep(200);
		*LOG2(&r) = l;
		*MASK(&r) = m;
		break;
	}
	}
	return 0;
}

/* ---- the racer ---- */

static volatile int racer_stop;
static long racer_calls;

/*
 * The second thread: doorbells, raw posts and state changes on QP handles 0 to 23
 * (the first thread's QPs and SRQs, whatever they are doing: being created, modified,
 * posted to, destroyed), through the context that stays open to the end. It draws from
 * a generator of its own, so the first thread's sequence stays the seed's.
 */
static void *racer(void *arg)
{
	uint64_t r = cfg.seed * 7919 + S.id;
	int fd = S.ctx[0]->cmd_fd;

	(void)arg;
	while (!racer_stop) {
		uint64_t x = splitmix(&r);
		uint32_t h = x % 24;
		struct { struct ib_uverbs_cmd_hdr hdr; struct ib_uverbs_modify_qp m; } mq = {};
		static const uint8_t states[] = { IBV_QPS_ERR, IBV_QPS_ERR, IBV_QPS_RESET, IBV_QPS_SQD,
						  IBV_QPS_RTS };

		switch ((x >> 8) % 8) {
		case 5:
		case 6:
			mq.hdr.command = IB_USER_VERBS_CMD_MODIFY_QP;
			mq.hdr.in_words = sizeof(mq) / 4;
			mq.m.qp_handle = h;
			mq.m.attr_mask = IBV_QP_STATE;
			mq.m.qp_state = states[(x >> 16) % sizeof(states)];
			if (write(fd, &mq, sizeof(mq)) < 0)
				break;
			break;
		case 7:
			raw_post(S.ctx[0], (x >> 16) & 1 ? IB_USER_VERBS_CMD_POST_RECV :
				 IB_USER_VERBS_CMD_POST_SRQ_RECV, h, 0, 0, 0);
			break;
		default:
			raw_post(S.ctx[0], IB_USER_VERBS_CMD_POST_SEND, h, 0, 0, 0);
		}
		racer_calls++;
		usleep(100 + (x >> 32) % 2000);
	}
	return NULL;
}

/* ---- the loop ---- */

struct op {
	const char *name;
	int (*fn)(void);
	int weight, ring;
	long calls, fails;
};

static int op_ctx_open_(void) { op_ctx_open(); return S.ctx[1] ? 0 : -1; }
static int op_ctx_close_(void) { op_ctx_close(); return 0; }
static int op_learn_(void) { op_learn(); return 0; }

static struct op ops[] = {
	{ "ctx_open", op_ctx_open_, 1 }, { "ctx_close", op_ctx_close_, 1 },
	{ "pd_alloc", op_pd_alloc, 3 }, { "pd_dealloc", op_pd_dealloc, 1 },
	{ "cq_create", op_cq_create, 4 }, { "cq_resize", op_cq_resize, 2 },
	{ "cq_destroy", op_cq_destroy, 2 }, { "cq_notify", op_cq_notify, 3 },
	{ "cq_poll", op_cq_poll, 12 }, { "events", op_events, 4 },
	{ "qp_create", op_qp_create, 6 }, { "qp_modify", op_qp_modify, 10 },
	{ "qp_connect", op_connect, 5 }, { "qp_query", op_qp_query, 2 },
	{ "qp_destroy", op_qp_destroy, 3 }, { "post_send", op_post_send, 16 },
	{ "post_wr_ex", op_post_wr_ex, 6 }, { "post_recv", op_post_recv, 8 },
	{ "raw_post", op_raw_post, 2 }, { "srq_create", op_srq_create, 2 },
	{ "srq_modify", op_srq_modify, 2 }, { "srq_query", op_srq_query, 1 },
	{ "srq_destroy", op_srq_destroy, 1 }, { "post_srq_recv", op_post_srq_recv, 5 },
	{ "mr_reg", op_mr_reg, 5 }, { "mr_rereg", op_mr_rereg, 2 }, { "mr_dereg", op_mr_dereg, 3 },
	{ "madvise", op_madvise, 1 }, { "mw_alloc", op_mw_alloc, 2 }, { "mw_bind", op_mw_bind, 3 },
	{ "mw_dealloc", op_mw_dealloc, 1 }, { "ah_create", op_ah_create, 3 },
	{ "ah_destroy", op_ah_destroy, 1 }, { "mc_attach", op_mc_attach, 2 },
	{ "mc_detach", op_mc_detach, 1 }, { "query", op_query, 1 }, { "share", op_share, 1 },
	{ "learn", op_learn_, 3 }, { "ring", op_ring, 10, 1 },
};
#define N_OPS (int)(sizeof(ops) / sizeof(ops[0]))

/* Whether a comma-separated list names an operation. */
static int listed(const char *p, const char *name)
{
	size_t n = strlen(name);

	for (; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

/* Whether an operation is in the run (FUZZ_RINGS, FUZZ_ONLY, FUZZ_EXCEPT). */
static int enabled(const struct op *o)
{
	if (o->ring && !cfg.rings)
		return 0;
	if (cfg.only && *cfg.only && !listed(cfg.only, o->name))
		return 0;
	return !listed(cfg.except, o->name);
}

static const char *volatile current_op = "setup";
/* When the operation under way started (0: none), and a count of operations. */
static volatile double op_start;
static volatile long op_seq;
static volatile int fuzz_done;
static pid_t main_tid;
/*
 * Seconds the whole guest stood still, as the watchdog saw them: its own 200 ms sleeps
 * that took more than a second longer. On an overloaded host a TCG guest gets no CPU
 * for seconds at a time; a verb is not stalled for the time nothing ran at all.
 */
static volatile double frozen;

static void show_file(const char *what, const char *path)
{
	char buf[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = 0;
		fprintf(stderr, "%s:\n%s%s", what, buf, buf[n - 1] == '\n' ? "" : "\n");
	}
}

/*
 * Watches the process's verb calls: one that takes longer than half the stall limit
 * has its kernel stack shown, once, while it still waits.
 */
static void *watchdog(void *arg)
{
	long shown = -1;
	char path[64], wchan[64];

	(void)arg;
	snprintf(path, sizeof(path), "/proc/self/task/%d/stack", main_tid);
	snprintf(wchan, sizeof(wchan), "/proc/self/task/%d/wchan", main_tid);
	while (!fuzz_done) {
		double t = op_start, f = frozen, before;
		long seq = op_seq;

		if (t > 0 && now() - t - (frozen - f) > cfg.stall / 2 && seq != shown) {
			shown = seq;
			fprintf(stderr, "proc %d: op %ld (%s) still running after %.1f s; kernel stack:\n",
				S.id, seq, current_op, now() - t);
			/* A task running on a CPU shows no stack: then its wait channel is 0. */
			show_file("stack", path);
			show_file("wchan", wchan);
		}
		before = now();
		usleep(200000);
		if (now() - before > 1.2)
			frozen += now() - before - 0.2;
	}
	return NULL;
}

/* The fuzzer's own crash (a librxe or fuzzer bug, not the kernel's): say where. */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
	void *bt[32];
	char m[160];
	int n = snprintf(m, sizeof(m), "proc %d: signal %d at %p during op %ld (%s); backtrace:\n",
			 S.id, sig, si->si_addr, S.n, current_op);

	(void)uc;
	if (write(2, m, n) < 0)
		_exit(7);
	backtrace_symbols_fd(bt, backtrace(bt, 32), 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void run_op(struct op *o)
{
	double t0 = now(), f0 = frozen, dt;

	current_op = o->name;
	op_seq = S.n;
	op_start = t0;
	if (S.trace_fd >= 0)
		dprintf(S.trace_fd, "%d %ld %s\n", S.id, S.n, o->name);
	o->calls++;
	if (o->fn())
		o->fails++;
	op_start = 0;
	/* What the guest stood still for does not count. */
	dt = now() - t0 - (frozen - f0);
	if (dt > S.slowest) {
		S.slowest = dt;
		S.slowest_op = o->name;
	}
	if (dt > cfg.stall) {
		S.stalls++;
		fprintf(stderr, "proc %d: STALL: op %ld (%s) took %.1f s (%.1f s more with the guest standing still)\n",
			S.id, S.n, o->name, dt, frozen - f0);
	}
}

static struct op *op_named(const char *name)
{
	for (int i = 0; i < N_OPS; i++)
		if (!strcmp(ops[i].name, name))
			return &ops[i];
	return NULL;
}

/* The end: everything destroyed in order, or the context closed as is, or just exit. */
static void teardown(void)
{
	double t0 = now(), f0 = frozen;
	int how = rnd(3);

	if (how == 0) {
		for (int i = 0; i < N_MC; i++)
			if (S.mc[i].used && S.qp[S.mc[i].qp].qp)
				ibv_detach_mcast(S.qp[S.mc[i].qp].qp, &S.mc[i].gid, S.mc[i].lid);
		for (int i = 0; i < N_QP; i++) if (S.qp[i].qp) ibv_destroy_qp(S.qp[i].qp);
		for (int i = 0; i < N_SRQ; i++) if (S.srq[i].srq) ibv_destroy_srq(S.srq[i].srq);
		for (int i = 0; i < N_MW; i++) if (S.mw[i].mw) ibv_dealloc_mw(S.mw[i].mw);
		for (int i = 0; i < N_AH; i++) if (S.ah[i].ah) ibv_destroy_ah(S.ah[i].ah);
		for (int i = 0; i < N_MR; i++) if (S.mr[i].mr) ibv_dereg_mr(S.mr[i].mr);
		op_events();
		for (int i = 0; i < N_CQ; i++) if (S.cq[i].cq) ibv_destroy_cq(S.cq[i].cq);
		for (int i = 0; i < N_PD; i++) if (S.pd[i].pd) ibv_dealloc_pd(S.pd[i].pd);
	}
	if (how <= 1)
		for (int c = 1; c >= 0; c--)
			if (S.ctx[c])
				drop_ctx(c);
	if (now() - t0 - (frozen - f0) > cfg.stall) {
		S.stalls++;
		fprintf(stderr, "proc %d: STALL: teardown (%d) took %.1f s\n", S.id, how,
			now() - t0 - (frozen - f0));
	}
}

static int child(int id)
{
	double end = now() + cfg.seconds;
	int total = 0, rc = 0;

	struct sigaction sa = { .sa_sigaction = on_fault, .sa_flags = SA_SIGINFO };
	pthread_t wd, rc_thread;

	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	memset(&S, 0, sizeof(S));
	S.id = id;
	S.dev = id % ndev;
	S.rng = cfg.seed * 1000003 + id;
	S.trace_fd = cfg.trace ? open(cfg.trace, O_WRONLY | O_APPEND | O_CREAT, 0644) : -1;
	main_tid = gettid();
	if (pthread_create(&wd, NULL, watchdog, NULL))
		return 6;
	for (int p = 0; p < cfg.procs; p++)
		if (p != id)
			close(pipes[p][0]);
	S.arena = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	S.ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	S.none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (S.arena == MAP_FAILED || S.ro == MAP_FAILED || S.none == MAP_FAILED)
		return 6;
	memset(S.ro, 0x5a, 4096);
	mprotect(S.ro, 4096, PROT_READ);
	fill_canaries();
	S.ctx[0] = open_ctx();
	if (!S.ctx[0] || !(S.ch[0] = ibv_create_comp_channel(S.ctx[0]))) {
		fprintf(stderr, "proc %d: cannot open %s: %s\n", id, devs[S.dev], strerror(errno));
		return 6;
	}
	set_nonblock(S.ch[0]->fd);
	if (ibv_query_device_ex(S.ctx[0], NULL, &S.da))
		return 6;
	S.odp = !!(S.da.odp_caps.general_caps & IBV_ODP_SUPPORT);
	/* PD 0 and the read-only MR over slot 0 stay to the end; everyone learns its keys. */
	S.pd[0].pd = ibv_alloc_pd(S.ctx[0]);
	if (!S.pd[0].pd)
		return 6;
	S.mr[0].mr = ibv_reg_mr(S.pd[0].pd, slot(0), SLOT, IBV_ACCESS_REMOTE_READ);
	if (!S.mr[0].mr)
		return 6;
	S.mr[0].canary = 1;
	S.mr[0].iova = (uintptr_t)slot(0);
	S.mr[0].len = SLOT;
	tell(1, S.mr[0].mr->lkey, S.mr[0].mr->rkey, 0, S.mr[0].iova, SLOT);
	if (cfg.racer && pthread_create(&rc_thread, NULL, racer, NULL))
		return 6;
	for (int i = 0; i < N_OPS; i++)
		if (enabled(&ops[i]))
			total += ops[i].weight;
	if (!total)
		return 6;
	/* A few objects first, so that the random operations find something to work on. */
	for (int k = 0; k < 2; k++) {
		run_op(op_named("cq_create"));
		run_op(op_named("qp_create"));
		run_op(op_named("mr_reg"));
		run_op(op_named("ah_create"));
	}
	for (S.n = 0; S.n < cfg.ops && now() < end; S.n++) {
		int w = rnd(total), i;

		for (i = 0; i < N_OPS; i++) {
			if (!enabled(&ops[i]))
				continue;
			if (w < ops[i].weight)
				break;
			w -= ops[i].weight;
		}
		run_op(&ops[i]);
		if (!(S.n % 256) && check_canaries("during the run"))
			S.canary_bad = 1;
	}
	current_op = "teardown";
	op_seq = -1;
	op_start = now();
	racer_stop = 1;
	if (cfg.racer)
		pthread_join(rc_thread, NULL);
	op_learn();
	if (check_canaries("at the end"))
		S.canary_bad = 1;
	teardown();
	op_start = 0;
	fuzz_done = 1;
	pthread_join(wd, NULL);
	fprintf(stderr, "proc %d (%s): %ld ops, slowest %.2f s (%s); completions %ld", id,
		devs[S.dev], S.n, S.slowest, S.slowest_op ? S.slowest_op : "-", S.wc_total);
	for (int s = 0; s < 24; s++)
		if (S.wc_status[s])
			fprintf(stderr, " [%s%d]=%ld", s == 23 ? ">" : "", s, S.wc_status[s]);
	fprintf(stderr, "; async events %ld, CQ events %ld, raw posts %ld, racer calls %ld; the guest stood still %.0f s\n",
		S.async_events, S.cq_events, S.raw_posts, racer_calls, frozen);
	fprintf(stderr, "proc %d calls/failed:", id);
	for (int i = 0; i < N_OPS; i++)
		if (ops[i].calls)
			fprintf(stderr, " %s %ld/%ld", ops[i].name, ops[i].calls, ops[i].fails);
	fputc('\n', stderr);
	if (S.canary_bad)
		rc = 3;
	else if (S.stalls)
		rc = 5;
	return rc;
}

/* ---- afterwards: the device still moves data ---- */

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, double secs)
{
	double end = now() + secs;

	while (now() < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		usleep(1000);
	}
	return 0;
}

static int selfcheck(int d)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *a, *b;
	struct ibv_qp_init_attr qa = {};
	struct ibv_wc wc;
	static uint8_t buf[3][4096];
	struct ibv_sge sge;
	struct ibv_send_wr sw = {}, *bs;
	struct ibv_recv_wr rw = {}, *br;
	struct conn k = { .access = 15, .mtu = IBV_MTU_1024, .timeout = 14, .retry = 7, .rnr = 7 };

	dev_name = devs[d];
	S.dev = d;
	if (!(ctx = open_dev()) || !(pd = ibv_alloc_pd(ctx)) ||
	    !(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)) ||
	    !(mr = ibv_reg_mr(pd, buf, sizeof(buf), 15)))
		FAIL("%s: setup after the run: %s", devs[d], strerror(errno));
	qa = (struct ibv_qp_init_attr){ .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
						 .max_recv_sge = 1 } };
	if (!(a = ibv_create_qp(pd, &qa)) || !(b = ibv_create_qp(pd, &qa)))
		FAIL("%s: create QP after the run: %s", devs[d], strerror(errno));
	k.dgid = dev_gid[d];
	k.dqpn = b->qp_num;
	k.sq_psn = 100;
	k.rq_psn = 200;
	if (qp_connect(a, &k))
		FAIL("%s: connect: %s", devs[d], strerror(errno));
	k.dqpn = a->qp_num;
	k.sq_psn = 200;
	k.rq_psn = 100;
	if (qp_connect(b, &k))
		FAIL("%s: connect: %s", devs[d], strerror(errno));
	for (int i = 0; i < 4096; i++)
		buf[0][i] = (uint8_t)(i * 13 + d);
	memset(buf[1], 0, 4096);
	memset(buf[2], 0, 4096);
	/* SEND a -> b into buf[1]. */
	sge = (struct ibv_sge){ (uintptr_t)buf[1], 4096, mr->lkey };
	rw = (struct ibv_recv_wr){ .wr_id = 1, .sg_list = &sge, .num_sge = 1 };
	if (ibv_post_recv(b, &rw, &br))
		FAIL("post_recv: %s", strerror(errno));
	struct ibv_sge ss = { (uintptr_t)buf[0], 4096, mr->lkey };
	sw = (struct ibv_send_wr){ .wr_id = 2, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED };
	if (ibv_post_send(a, &sw, &bs))
		FAIL("post_send: %s", strerror(errno));
	for (int n = 0; n < 2; n++)
		if (!poll_one(cq, &wc, 10) || wc.status != IBV_WC_SUCCESS)
			FAIL("%s: SEND after the run: %s", devs[d], wc.status ? ibv_wc_status_str(wc.status) : "no completion");
	if (memcmp(buf[0], buf[1], 4096))
		FAIL("%s: SEND after the run: data differs", devs[d]);
	/* RDMA WRITE buf[0] -> buf[2] through b, then READ it back into buf[1]. */
	memset(buf[1], 0, 4096);
	sw.opcode = IBV_WR_RDMA_WRITE;
	sw.wr.rdma.remote_addr = (uintptr_t)buf[2];
	sw.wr.rdma.rkey = mr->rkey;
	if (ibv_post_send(a, &sw, &bs) || !poll_one(cq, &wc, 10) || wc.status != IBV_WC_SUCCESS)
		FAIL("%s: RDMA WRITE after the run failed", devs[d]);
	ss.addr = (uintptr_t)buf[1];
	sw.opcode = IBV_WR_RDMA_READ;
	if (ibv_post_send(a, &sw, &bs) || !poll_one(cq, &wc, 10) || wc.status != IBV_WC_SUCCESS)
		FAIL("%s: RDMA READ after the run failed", devs[d]);
	if (memcmp(buf[0], buf[2], 4096) || memcmp(buf[0], buf[1], 4096))
		FAIL("%s: RDMA WRITE/READ after the run: data differs", devs[d]);
	if (ibv_destroy_qp(a) || ibv_destroy_qp(b) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		FAIL("%s: teardown after the run: %s", devs[d], strerror(errno));
	fprintf(stderr, "%s: SEND, RDMA WRITE and READ after the run: ok\n", devs[d]);
	return 0;
}

static double env_num(const char *name, double def)
{
	const char *v = getenv(name);

	return v && *v ? strtod(v, NULL) : def;
}

/* What a process that did not end is doing, for the log. */
static void show_stuck(pid_t pid)
{
	char path[64], buf[4096];
	const char *files[] = { "wchan", "stack" };

	for (int f = 0; f < 2; f++) {
		int fd;
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/%s", pid, files[f]);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			fprintf(stderr, "pid %d %s:\n%s\n", pid, files[f], buf);
		}
	}
}

int main(int argc, char **argv)
{
	pid_t pids[MAXP];
	int status[MAXP], done[MAXP] = {}, bad = 0, victim = -1;
	double t0, kill_at = 0, deadline, grace, unplug_t = 0;
	pid_t unplug_pid = 0;
	int ust;
	char *list;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s DEVICE[,DEVICE2] [SEED]\n", argv[0]);
		return 2;
	}
	cfg.seed = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
	/* First, always: what replays this run. */
	printf("seed %llu\n", (unsigned long long)cfg.seed);
	fflush(stdout);
	cfg.seconds = env_num("FUZZ_SECONDS", 60);
	cfg.ops = env_num("FUZZ_OPS", 1000000);
	cfg.procs = env_num("FUZZ_PROCS", 3);
	cfg.rings = env_num("FUZZ_RINGS", 1);
	cfg.hostile = env_num("FUZZ_HOSTILE", 1);
	cfg.kill = env_num("FUZZ_KILL", 1);
	cfg.racer = env_num("FUZZ_RACER", 1);
	cfg.max_queues = env_num("FUZZ_MAX_QUEUES", 0);
	cfg.unplug = env_num("FUZZ_UNPLUG", 0);
	cfg.stall = env_num("FUZZ_STALL", 10);
	cfg.trace = getenv("FUZZ_TRACE");
	cfg.only = getenv("FUZZ_ONLY");
	cfg.except = getenv("FUZZ_EXCEPT");
	cfg.mcast_lids = env_num("FUZZ_MCAST_LIDS", 1);
	if (cfg.procs < 1 || cfg.procs > MAXP)
		cfg.procs = 3;
	list = strdup(argv[1]);
	for (char *t = strtok(list, ","); t && ndev < 2; t = strtok(NULL, ","))
		devs[ndev++] = t;
	for (int d = 0; d < ndev; d++) {
		static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff }, ll[2] = { 0xfe, 0x80 };
		struct ibv_context *ctx;

		dev_name = devs[d];
		if (!(ctx = open_dev())) {
			fprintf(stderr, "cannot open %s: %s\n", devs[d], strerror(errno));
			return 1;
		}
		dev_gidx[d] = roce_v2_gid_like(ctx, v4, sizeof(v4), &dev_gid[d]);
		dev_llidx[d] = roce_v2_gid_like(ctx, ll, sizeof(ll), &dev_ll[d]);
		ibv_close_device(ctx);
		if (dev_gidx[d] < 0) {
			fprintf(stderr, "%s has no RoCE v2 IPv4 GID\n", devs[d]);
			return 1;
		}
		if (dev_llidx[d] < 0) {
			dev_llidx[d] = dev_gidx[d];
			dev_ll[d] = dev_gid[d];
		}
	}
	fprintf(stderr, "verbs_fuzz: seed %llu, %d processes on %s, %.0f s, at most %ld ops each, rings %d, hostile %d\n",
		(unsigned long long)cfg.seed, cfg.procs, argv[1], cfg.seconds, cfg.ops, cfg.rings, cfg.hostile);
	signal(SIGPIPE, SIG_IGN);
	for (int p = 0; p < cfg.procs; p++)
		if (pipe2(pipes[p], O_NONBLOCK))
			FAIL("pipe: %s", strerror(errno));
	/* The seed decides whether, whom and when a process is killed midway. */
	S.rng = cfg.seed ^ 0x5eed;
	if (cfg.kill && cfg.procs > 1 && chance(50)) {
		victim = rnd(cfg.procs);
		kill_at = cfg.seconds * (0.2 + rnd(60) / 100.0);
	}
	fflush(stderr);
	t0 = now();
	for (int p = 0; p < cfg.procs; p++) {
		pids[p] = fork();
		if (pids[p] < 0)
			FAIL("fork: %s", strerror(errno));
		if (!pids[p])
			_exit(child(p));
	}
	/* The grace: the last operation and the teardown, each of which may be slow. */
	grace = env_num("FUZZ_GRACE", 60 + 2 * cfg.stall);
	deadline = t0 + cfg.seconds + grace;
	for (int left = cfg.procs; (left > 0 || unplug_pid > 0) && now() < deadline;) {
		for (int p = 0; p < cfg.procs; p++)
			if (!done[p] && waitpid(pids[p], &status[p], WNOHANG) == pids[p]) {
				done[p] = 1;
				left--;
			}
		if (cfg.unplug > 0 && ndev > 1 && !unplug_pid && now() - t0 > cfg.unplug) {
			fprintf(stderr, "deleting %s after %.0f s\n", devs[1], now() - t0);
			unplug_t = now();
			unplug_pid = fork();
			if (!unplug_pid) {
				execlp("rdma", "rdma", "link", "delete", devs[1], (char *)NULL);
				_exit(127);
			}
		}
		if (unplug_pid > 0 && waitpid(unplug_pid, &ust, WNOHANG) == unplug_pid) {
			fprintf(stderr, "rdma link delete %s: exit %d after %.1f s\n", devs[1],
				WIFEXITED(ust) ? WEXITSTATUS(ust) : -1, now() - unplug_t);
			if (!WIFEXITED(ust) || WEXITSTATUS(ust))
				bad = 1;
			unplug_pid = -1;
		}
		if (victim >= 0 && now() - t0 > kill_at) {
			if (!done[victim]) {
				fprintf(stderr, "killing process %d after %.0f s\n", victim, now() - t0);
				kill(pids[victim], SIGKILL);
			}
			kill_at = 1e9;
		}
		usleep(50000);
	}
	for (int p = 0; p < cfg.procs; p++) {
		if (!done[p]) {
			fprintf(stderr, "HANG: process %d did not end within %.0f s of the run's end\n", p,
				grace);
			show_stuck(pids[p]);
			kill(pids[p], SIGKILL);
			for (int k = 0; k < 100 && waitpid(pids[p], &status[p], WNOHANG) != pids[p]; k++)
				usleep(100000);
			bad = 1;
			continue;
		}
		if (WIFSIGNALED(status[p]) && WTERMSIG(status[p]) == SIGKILL && p == victim)
			continue;
		if (WIFSIGNALED(status[p])) {
			fprintf(stderr, "process %d died of signal %d\n", p, WTERMSIG(status[p]));
			bad = 1;
		} else if (WEXITSTATUS(status[p])) {
			fprintf(stderr, "process %d exited %d (%s)\n", p, WEXITSTATUS(status[p]),
				WEXITSTATUS(status[p]) == 3 ? "memory no key opens for writing changed" :
				WEXITSTATUS(status[p]) == 5 ? "a verb stalled" : "setup failed");
			bad = 1;
		}
	}
	if (unplug_pid > 0) {
		fprintf(stderr, "HANG: rdma link delete %s did not return in %.0f s\n", devs[1],
			now() - unplug_t);
		show_stuck(unplug_pid);
		bad = 1;
	}
	fprintf(stderr, "all processes ended %.1f s after the start\n", now() - t0);
	for (int d = 0; d < (unplug_pid ? 1 : ndev); d++)
		if (selfcheck(d))
			bad = 1;
	fprintf(stderr, "verbs_fuzz: seed %llu: %s\n", (unsigned long long)cfg.seed, bad ? "FAILED" : "ok");
	return bad;
}
