/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the selftest programs share: failure reporting, opening the device by name and
 * dispatching to a named check.
 *
 *   PROGRAM DEVICE CHECK
 *
 * A check returns 0 when it holds, 1 when it does not, 4 when it cannot be run here (a
 * TAP skip); it says on stderr what it saw.
 */
#ifndef RXE_RS_VERBS_COMMON_H
#define RXE_RS_VERBS_COMMON_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); return 1; } while (0)
#define SKIP(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); return 4; } while (0)

/* The device under test, as named on the command line. */
static const char *dev_name;

static struct ibv_context *open_dev(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

/* A check runs either on a context opened for it or on its own (it opens what it needs). */
struct check {
	const char *name;
	int (*on_ctx)(struct ibv_context *ctx);
	int (*alone)(void);
};

/*
 * The index of the first RoCE v2 GID of port 1 whose first `n` bytes are `want` (its
 * value in `gid`), or -1.
 */
static inline int roce_v2_gid_like(struct ibv_context *ctx, const uint8_t *want, size_t n,
				   union ibv_gid *gid)
{
	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, 1, &pa))
		return -1;
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid_ex(ctx, 1, i, &e, 0))
			continue;
		if (!memcmp(e.gid.raw, want, n) && e.gid_type == IBV_GID_TYPE_ROCE_V2) {
			*gid = e.gid;
			return i;
		}
	}
	return -1;
}

/* The QP's state, or -1 if it cannot be queried. */
static inline enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &i) ? (enum ibv_qp_state)-1 : a.qp_state;
}

/*
 * The 8-byte aligned word `magic` in one of this process's mappings of the device file
 * (past librxe's 384-byte ring header), or NULL: how a check finds a WQE it posted in
 * the ring it means to write into.
 */
static inline uint8_t *find_in_rings(uint64_t magic)
{
	char line[512];
	uint8_t *at = NULL;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return NULL;
	while (!at && fgets(line, sizeof(line), f)) {
		unsigned long start, end;

		if (!strstr(line, "/dev/infiniband/uverbs") ||
		    sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		for (unsigned long a = start + 384; a + 8 <= end; a += 8)
			if (*(volatile uint64_t *)a == magic) {
				at = (uint8_t *)a;
				break;
			}
	}
	fclose(f);
	return at;
}

/*
 * A send ring as this process maps it (struct rxe_queue_buf): element size and index
 * mask first, the producer index at byte 128, the consumer's at 256, the slots from 384
 * on; indices are slot numbers, masked.
 */
struct sq_ring {
	_Atomic uint32_t *prod, *cons;
	uint32_t mask, log2;
	uint8_t *data;
};

static inline struct rxe_send_wqe *sq_slot(const struct sq_ring *r, uint32_t i)
{
	return (struct rxe_send_wqe *)(r->data + ((size_t)(i & r->mask) << r->log2));
}

/*
 * Finds a send ring among this process's mappings of the device file: the one whose
 * newest WQE (librxe's producer side) has `wr_id`. Returns 1 if found.
 */
static inline int find_sq(struct sq_ring *r, uint64_t wr_id)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long start, end;
		struct sq_ring c;
		uint8_t *b;

		if (!strstr(line, "/dev/infiniband/uverbs") ||
		    sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		b = (uint8_t *)start;
		c = (struct sq_ring){ .prod = (_Atomic uint32_t *)(b + 128),
				      .cons = (_Atomic uint32_t *)(b + 256),
				      .log2 = *(volatile uint32_t *)b,
				      .mask = *(volatile uint32_t *)(b + 4), .data = b + 384 };
		if (c.log2 < 6 || c.log2 > 16 || c.mask >= 1u << 24 ||
		    384 + (((unsigned long)c.mask + 1) << c.log2) > end - start)
			continue;
		if (sq_slot(&c, atomic_load(c.prod) - 1)->wr.wr_id != wr_id)
			continue;
		*r = c;
		found = 1;
	}
	fclose(f);
	return found;
}

/* The doorbell librxe rings after writing WQEs: a POST_SEND command with no WR in it. */
static inline int raw_doorbell(struct ibv_qp *qp)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
	} c = { .hdr = { .command = IB_USER_VERBS_CMD_POST_SEND } };
	struct ib_uverbs_post_send_resp resp;

	c.hdr.in_words = sizeof(c) / 4;
	c.hdr.out_words = sizeof(resp) / 4;
	c.cmd.response = (uintptr_t)&resp;
	c.cmd.qp_handle = qp->handle;
	c.cmd.wqe_size = sizeof(struct ib_uverbs_send_wr);
	return write(qp->context->cmd_fd, &c, sizeof(c)) == sizeof(c) ? 0 : errno;
}

/*
 * A send posted before RTS fails at the doorbell on both drivers, but what becomes of
 * the WQE librxe wrote into the ring differs: rxe leaves it there, to go out at the
 * first doorbell in RTS; rxe_rs drops it, as the failed call said it was not posted
 * (differences.txt). Checks that post before RTS to fill a ring, or to find a WQE in it
 * and rewrite it, call this in RTS, before the doorbell that is to carry them out: if
 * the driver dropped the `n` newest WQEs, their bytes are still in their slots, and
 * they are written again on the producer's side, in order, as a process posting them
 * now would. Returns 0, or -1 if the ring holds neither those `n` nor nothing.
 */
static inline int requeue_refused(struct sq_ring *r, uint32_t n)
{
	uint32_t prod = atomic_load(r->prod), cons = atomic_load(r->cons);

	if (((prod - cons) & r->mask) == n)
		return 0;
	if (cons != prod || n > r->mask)
		return -1;
	/* Oldest first: a slot read again later was not yet written over. */
	for (uint32_t i = 0; i < n; i++)
		memcpy(sq_slot(r, prod + i), sq_slot(r, prod - n + i), (size_t)1 << r->log2);
	atomic_store_explicit(r->prod, (prod + n) & r->mask, memory_order_release);
	return 0;
}

static int run_check(int argc, char **argv, const struct check *checks)
{
	struct ibv_context *ctx;
	int ret;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEVICE CHECK\n", argv[0]);
		return 2;
	}
	dev_name = argv[1];
	for (; checks->name; checks++) {
		if (strcmp(checks->name, argv[2]))
			continue;
		if (checks->alone)
			return checks->alone();
		ctx = open_dev();
		if (!ctx) {
			fprintf(stderr, "cannot open %s: %s\n", dev_name, strerror(errno));
			return 1;
		}
		ret = checks->on_ctx(ctx);
		ibv_close_device(ctx);
		return ret;
	}
	fprintf(stderr, "unknown check %s\n", argv[2]);
	return 2;
}

#endif /* RXE_RS_VERBS_COMMON_H */
