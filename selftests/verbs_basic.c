// SPDX-License-Identifier: GPL-2.0
/*
 * Basic verbs checks of an rxe/rxe_rs device through stock libibverbs.
 *
 *   verbs_basic DEVICE CHECK   (see verbs_common.h)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "verbs_common.h"

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
static int check_close_with_pd(void)
{
	for (int round = 0; round < 16; round++) {
		struct ibv_context *ctx = open_dev();

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

/*
 * What the driver does not offer fails with an error, never a fake success: a send on
 * an RC QP in RTS (to itself) while there is no data path.
 */
static int check_unsupported_fails(struct ibv_context *ctx)
{
	static const uint8_t want[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 2, 15 };
	static char buf[64];
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED }, *bad;
	struct ibv_qp *qp;
	int gid = -1, ret;

	for (int i = 0; i < 16 && gid < 0; i++) {
		struct ibv_gid_entry e;

		if (!ibv_query_gid_ex(ctx, 1, i, &e, 0) && !memcmp(e.gid.raw, want, 16))
			gid = i;
	}
	if (!pd || !cq || gid < 0)
		FAIL("setup: %s", strerror(errno));
	ia.send_cq = ia.recv_cq = cq;
	if (!(qp = ibv_create_qp(pd, &ia)))
		FAIL("ibv_create_qp: %s", strerror(errno));
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		FAIL("to INIT: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, want, 16);
	a.ah_attr.grh.sgid_index = gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("to RTR: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("to RTS: %s", strerror(errno));
	ret = ibv_post_send(qp, &wr, &bad);
	if (ret == 0) {
		fprintf(stderr, "sends are implemented: nothing to check\n");
		ret = 4;
	} else if (ret != EOPNOTSUPP) {
		fprintf(stderr, "ibv_post_send failed with %s, want EOPNOTSUPP\n", strerror(ret));
		ret = 1;
	} else {
		ret = 0;
	}
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	return ret;
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

/*
 * The sample driver (samples/rdma_minimal): its limits hold, PDs and CQs work, and every
 * object it does not have is refused with EOPNOTSUPP.
 */
static int check_minimal(struct ibv_context *ctx)
{
	enum { MAX_PD = 1024, MAX_CQ = 1024, MAX_CQE = 4096 };
	static struct ibv_pd *pds[MAX_PD];
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_wc wc;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	static char buf[4096];
	int i;

	if (ibv_query_device(ctx, &da))
		FAIL("ibv_query_device: %s", strerror(errno));
	if (da.max_pd != MAX_PD || da.max_cq != MAX_CQ || da.max_cqe != MAX_CQE)
		FAIL("limits: max_pd %d max_cq %d max_cqe %d", da.max_pd, da.max_cq, da.max_cqe);
	if (da.max_qp || da.max_mr || da.max_srq || da.max_ah || da.max_mw ||
	    da.atomic_cap != IBV_ATOMIC_NONE)
		FAIL("offers what it has not: max_qp %d max_mr %d max_srq %d max_ah %d max_mw %d atomic %d",
		     da.max_qp, da.max_mr, da.max_srq, da.max_ah, da.max_mw, da.atomic_cap);
	if (ibv_query_port(ctx, 1, &pa))
		FAIL("ibv_query_port: %s", strerror(errno));
	if (pa.state != IBV_PORT_ACTIVE || pa.link_layer != IBV_LINK_LAYER_ETHERNET)
		FAIL("port state %d link layer %d", pa.state, pa.link_layer);
	if (pa.gid_tbl_len != 0 || pa.pkey_tbl_len != 1)
		FAIL("gid_tbl_len %d pkey_tbl_len %d", pa.gid_tbl_len, pa.pkey_tbl_len);

	/* PDs up to the limit, and not one more. */
	for (i = 0; i < MAX_PD; i++)
		if (!(pds[i] = ibv_alloc_pd(ctx)))
			FAIL("ibv_alloc_pd %d: %s", i, strerror(errno));
	if ((pd = ibv_alloc_pd(ctx)))
		FAIL("PD %d beyond max_pd allocated", MAX_PD);
	for (i = 1; i < MAX_PD; i++)
		if (ibv_dealloc_pd(pds[i]))
			FAIL("ibv_dealloc_pd %d: %s", i, strerror(errno));
	pd = pds[0];

	/* A CQ holds what was asked; it stays empty and can be armed. */
	if (ibv_create_cq(ctx, MAX_CQE + 1, NULL, NULL, 0))
		FAIL("CQ of %d entries created", MAX_CQE + 1);
	if (!(cq = ibv_create_cq(ctx, 100, NULL, NULL, 0)))
		FAIL("ibv_create_cq: %s", strerror(errno));
	if (cq->cqe < 100)
		FAIL("cqe %d, asked 100", cq->cqe);
	if (ibv_poll_cq(cq, 1, &wc) != 0)
		FAIL("ibv_poll_cq of an empty CQ");
	if (ibv_req_notify_cq(cq, 0) || ibv_req_notify_cq(cq, 1))
		FAIL("ibv_req_notify_cq: %s", strerror(errno));
	if (ibv_resize_cq(cq, 200) != EOPNOTSUPP)
		FAIL("ibv_resize_cq did not fail with EOPNOTSUPP");

	/* What the device does not have is refused as unsupported. */
	ia.send_cq = ia.recv_cq = cq;
	errno = 0;
	if (ibv_create_qp(pd, &ia) || errno != EOPNOTSUPP)
		FAIL("ibv_create_qp: %s, want EOPNOTSUPP", strerror(errno));
	errno = 0;
	if (ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) || errno != EOPNOTSUPP)
		FAIL("ibv_reg_mr: %s, want EOPNOTSUPP", strerror(errno));
	errno = 0;
	if (ibv_create_srq(pd, &sa) || errno != EOPNOTSUPP)
		FAIL("ibv_create_srq: %s, want EOPNOTSUPP", strerror(errno));
	errno = 0;
	if (ibv_alloc_mw(pd, IBV_MW_TYPE_1) || errno != EOPNOTSUPP)
		FAIL("ibv_alloc_mw: %s, want EOPNOTSUPP", strerror(errno));

	if (ibv_destroy_cq(cq))
		FAIL("ibv_destroy_cq: %s", strerror(errno));
	if (ibv_dealloc_pd(pd))
		FAIL("ibv_dealloc_pd: %s", strerror(errno));
	return 0;
}

static const struct check checks[] = {
	{ "open_query", check_open_query },
	{ "gid", check_gid },
	{ "pd", check_pd },
	{ "pd_many", check_pd_many },
	{ "close_with_pd", NULL, check_close_with_pd },
	{ "hold", check_hold },
	{ "create_cq", check_create_cq },
	{ "unsupported_fails", check_unsupported_fails },
	{ "minimal", check_minimal },
	{ NULL }
};

int main(int argc, char **argv)
{
	return run_check(argc, argv, checks);
}
