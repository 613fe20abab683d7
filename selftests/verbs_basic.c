// SPDX-License-Identifier: GPL-2.0
/*
 * Basic verbs checks of an rxe/rxe_rs device through stock libibverbs.
 *
 *   verbs_basic DEVICE CHECK
 *
 * Exits 0 when the check holds, 1 when it does not, 4 when it cannot be run here
 * (a TAP skip). Each check says on stderr what it saw.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); return 1; } while (0)

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

static int check_open_query(struct ibv_context *ctx)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;

	if (ibv_query_device(ctx, &da))
		FAIL("ibv_query_device: %s", strerror(errno));
	if (da.phys_port_cnt != 1)
		FAIL("phys_port_cnt %u, want 1", da.phys_port_cnt);
	if (da.max_pd <= 0 || da.max_qp <= 0 || da.max_cqe <= 0)
		FAIL("limits: max_pd %d max_qp %d max_cqe %d", da.max_pd, da.max_qp, da.max_cqe);
	if (da.vendor_id != 0xffffff)
		FAIL("vendor_id %#x", da.vendor_id);
	if (ibv_query_port(ctx, 1, &pa))
		FAIL("ibv_query_port: %s", strerror(errno));
	if (pa.state != IBV_PORT_ACTIVE)
		FAIL("port state %d, want ACTIVE", pa.state);
	if (pa.link_layer != IBV_LINK_LAYER_ETHERNET)
		FAIL("link layer %d, want Ethernet", pa.link_layer);
	if (pa.gid_tbl_len <= 0 || pa.pkey_tbl_len != 1)
		FAIL("gid_tbl_len %d pkey_tbl_len %d", pa.gid_tbl_len, pa.pkey_tbl_len);
	if (pa.active_mtu < IBV_MTU_256 || pa.active_mtu > pa.max_mtu)
		FAIL("active_mtu %d max_mtu %d", pa.active_mtu, pa.max_mtu);
	if (ibv_query_port(ctx, 2, &pa) == 0)
		FAIL("query of port 2 succeeded");
	return 0;
}

/* The IPv4 address of eth0 (10.0.2.15) has a RoCE v2 GID. */
static int check_gid(struct ibv_context *ctx)
{
	static const uint8_t want[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 2, 15 };
	struct ibv_port_attr pa;

	if (ibv_query_port(ctx, 1, &pa))
		FAIL("ibv_query_port: %s", strerror(errno));
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid_ex(ctx, 1, i, &e, 0))
			continue;
		if (!memcmp(e.gid.raw, want, 16)) {
			if (e.gid_type != IBV_GID_TYPE_ROCE_V2)
				FAIL("GID %d has type %u, want RoCE v2", i, e.gid_type);
			return 0;
		}
	}
	FAIL("no GID ::ffff:10.0.2.15");
}

static int check_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	if (!pd)
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	if (ibv_dealloc_pd(pd))
		FAIL("ibv_dealloc_pd: %s", strerror(errno));
	return 0;
}

static int check_pd_many(struct ibv_context *ctx)
{
	enum { N = 512 };
	static struct ibv_pd *pds[N];

	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < N; i++)
			if (!(pds[i] = ibv_alloc_pd(ctx)))
				FAIL("round %d: ibv_alloc_pd %d: %s", round, i, strerror(errno));
		for (int i = 0; i < N; i++)
			if (ibv_dealloc_pd(pds[i]))
				FAIL("round %d: ibv_dealloc_pd %d: %s", round, i, strerror(errno));
	}
	return 0;
}

/* Closing the device with PDs still allocated frees them (no leak, no error). */
static int check_close_with_pd(const char *name)
{
	for (int round = 0; round < 16; round++) {
		struct ibv_context *ctx = open_dev(name);

		if (!ctx)
			FAIL("open: %s", strerror(errno));
		for (int i = 0; i < 8; i++)
			if (!ibv_alloc_pd(ctx))
				FAIL("ibv_alloc_pd: %s", strerror(errno));
		if (ibv_close_device(ctx))
			FAIL("ibv_close_device: %s", strerror(errno));
	}
	return 0;
}

static int check_create_cq(struct ibv_context *ctx)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);

	if (!cq)
		FAIL("ibv_create_cq: %s", strerror(errno));
	if (ibv_destroy_cq(cq))
		FAIL("ibv_destroy_cq: %s", strerror(errno));
	return 0;
}

/* A verb the driver does not offer fails with an error, never a fake success. */
static int check_unsupported_fails(struct ibv_context *ctx)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);

	if (cq) {
		ibv_destroy_cq(cq);
		fprintf(stderr, "CQs are implemented: nothing to check\n");
		return 4;
	}
	if (errno != EOPNOTSUPP)
		FAIL("ibv_create_cq failed with %s, want EOPNOTSUPP", strerror(errno));
	return 0;
}

/*
 * Holds the device open with a PD for a few seconds, then closes it. Without
 * disassociate_ucontext, ib_core's unregistration waits for this process to let go.
 */
static int check_hold(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	if (!pd)
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	printf("ready\n");
	fflush(stdout);
	sleep(3);
	return 0;
}

int main(int argc, char **argv)
{
	struct ibv_context *ctx;
	const char *check;
	int ret;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DEVICE CHECK\n", argv[0]);
		return 2;
	}
	check = argv[2];
	if (!strcmp(check, "close_with_pd"))
		return check_close_with_pd(argv[1]);
	ctx = open_dev(argv[1]);
	if (!ctx) {
		fprintf(stderr, "cannot open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (!strcmp(check, "open_query"))
		ret = check_open_query(ctx);
	else if (!strcmp(check, "gid"))
		ret = check_gid(ctx);
	else if (!strcmp(check, "pd"))
		ret = check_pd(ctx);
	else if (!strcmp(check, "pd_many"))
		ret = check_pd_many(ctx);
	else if (!strcmp(check, "hold"))
		ret = check_hold(ctx);
	else if (!strcmp(check, "create_cq"))
		ret = check_create_cq(ctx);
	else if (!strcmp(check, "unsupported_fails"))
		ret = check_unsupported_fails(ctx);
	else {
		fprintf(stderr, "unknown check %s\n", check);
		ret = 2;
	}
	ibv_close_device(ctx);
	return ret;
}
