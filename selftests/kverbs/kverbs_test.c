// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel-consumer checks of an RDMA device: the verbs a kernel ULP uses (ib_core's
 * kernel API), run once when the module is loaded, on the device named by the `dev`
 * parameter. Each check logs "kverbs_test: ok NAME" or "kverbs_test: not ok NAME: why";
 * loading fails with EIO if any check failed and with ENODEV if the device was not
 * found. A module that loaded holds nothing and is removed with rmmod.
 *
 * Without `traffic`, only what needs no peer is checked: work posted before RTS, the
 * flush of the error state (in order, naming the QP), posts in the error state,
 * ib_drain_qp(), SRQs, the CQ overflow event, destroys with work outstanding,
 * fast-registration MRs. With `traffic=1`, two RC QPs of the device are connected to
 * each other instead and move data: REG_MR (the source's at an address its consumer
 * set after mapping it), then an RDMA READ with invalidate, after which the key it
 * invalidated must open nothing. With `remap=1`, a fast-registration MR is mapped again
 * (ib_map_mr_sg) after its REG_MR and before the next one, as iSER does before the
 * LOCAL_INV ahead of the next REG_MR: a peer's READ through its key must not reach the
 * new pages (it gets the registered ones' data, or fails). With `hold_ah=1`, it checks nothing: it keeps a PD and
 * an address handle to the device's RoCE v2 IPv4 GID until it is unloaded, for a process
 * to try to send with (isolation.c's ud_kernel_ah).
 */
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <net/ipv6.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *devname = "tdev0";
module_param_named(dev, devname, charp, 0444);
MODULE_PARM_DESC(dev, "name of the RDMA device to check");
static bool traffic;
module_param(traffic, bool, 0444);
MODULE_PARM_DESC(traffic, "run the checks that move data between two QPs instead");

static bool modify;
module_param(modify, bool, 0444);
MODULE_PARM_DESC(modify, "set the device's system image GUID to 0123:4567:89ab:cdef instead");

static bool remap;
module_param(remap, bool, 0444);
MODULE_PARM_DESC(remap, "check that a fast-registration MR mapped again keeps its registered pages instead");

static bool hold_ah;
module_param(hold_ah, bool, 0444);
MODULE_PARM_DESC(hold_ah, "keep a PD and an address handle until unloaded instead");

/* What hold_ah keeps, as the client's data of the device. */
struct held {
	struct ib_pd *pd;
	struct ib_ah *ah;
};

static int found, failed;
/* The checks run one at a time: their larger arrays live here, not on the stack. */
static struct ib_wc wc[16];
static struct ib_recv_wr recv_wrs[16];

#define CHECK(cond, name, fmt, ...)                                                \
	do {                                                                       \
		if (cond) {                                                        \
			pr_info("kverbs_test: ok %s\n", name);                      \
		} else {                                                           \
			pr_err("kverbs_test: not ok %s: " fmt "\n", name,           \
			       ##__VA_ARGS__);                                      \
			failed++;                                                  \
		}                                                                  \
	} while (0)

struct events {
	atomic_t cq_err;
	atomic_t comp;
};

static void comp_handler(struct ib_cq *cq, void *ctx)
{
	struct events *ev = ctx;

	atomic_inc(&ev->comp);
}

static void cq_event(struct ib_event *e, void *ctx)
{
	struct events *ev = ctx;

	if (e->event == IB_EVENT_CQ_ERR)
		atomic_inc(&ev->cq_err);
}

static struct ib_qp *make_qp(struct ib_pd *pd, struct ib_cq *scq, struct ib_cq *rcq,
			     struct ib_srq *srq)
{
	struct ib_qp_init_attr init = {
		.send_cq = scq,
		.recv_cq = rcq,
		.srq = srq,
		.cap = { .max_send_wr = 16, .max_recv_wr = srq ? 0 : 16,
			 .max_send_sge = 2, .max_recv_sge = srq ? 0 : 2 },
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.qp_type = IB_QPT_RC,
	};

	return ib_create_qp(pd, &init);
}

static int to_init(struct ib_qp *qp)
{
	struct ib_qp_attr a = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IB_ACCESS_REMOTE_WRITE,
	};

	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
					IB_QP_ACCESS_FLAGS);
}

static int to_err(struct ib_qp *qp)
{
	struct ib_qp_attr a = { .qp_state = IB_QPS_ERR };

	return ib_modify_qp(qp, &a, IB_QP_STATE);
}

/* Polls until `want` completions arrived or a second passed. */
static int poll_n(struct ib_cq *cq, struct ib_wc *out, int want)
{
	int n = 0;

	for (int t = 0; t < 100 && n < want; t++) {
		int got = ib_poll_cq(cq, want - n, out + n);

		if (got < 0)
			return got;
		n += got;
		if (n < want)
			msleep(10);
	}
	return n;
}

static int post_recvs(struct ib_qp *qp, struct ib_srq *srq, int n, u64 first,
		      const struct ib_recv_wr **bad)
{
	struct ib_recv_wr *wr = recv_wrs;
	struct ib_sge sge = { .addr = 0, .length = 0, .lkey = qp ? qp->pd->local_dma_lkey :
							  srq->pd->local_dma_lkey };

	memset(recv_wrs, 0, sizeof(recv_wrs));
	for (int i = 0; i < n; i++) {
		wr[i].wr_id = first + i;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	return qp ? ib_post_recv(qp, wr, bad) : ib_post_srq_recv(srq, wr, bad);
}

/* Receives and sends of a QP that is not ready, then the error state's flush. */
static void check_flush(struct ib_pd *pd)
{
	struct ib_cq_init_attr ca = { .cqe = 64 };
	struct events ev = {};
	const struct ib_recv_wr *rbad = NULL;
	const struct ib_send_wr *sbad = NULL;
	struct ib_send_wr swr = { .wr_id = 900, .opcode = IB_WR_SEND };
	struct ib_recv_wr big = { .wr_id = 1, .num_sge = 3 };
	struct ib_qp_attr reset = { .qp_state = IB_QPS_RESET };
	struct ib_sge sges[3] = {};
	struct ib_cq *cq;
	struct ib_qp *qp;
	int n, ok;

	cq = ib_create_cq(pd->device, comp_handler, cq_event, &ev, &ca);
	if (IS_ERR(cq)) {
		CHECK(0, "flush_setup", "ib_create_cq: %ld", PTR_ERR(cq));
		return;
	}
	qp = make_qp(pd, cq, cq, NULL);
	if (IS_ERR(qp)) {
		CHECK(0, "flush_setup", "ib_create_qp: %ld", PTR_ERR(qp));
		goto out_cq;
	}
	CHECK(post_recvs(qp, NULL, 1, 1, &rbad) == -EINVAL, "recv_in_reset_refused",
	      "posting a receive in RESET did not fail with EINVAL");
	CHECK(to_init(qp) == 0, "modify_to_init", "INIT refused");
	CHECK(ib_post_send(qp, &swr, &sbad) == -EINVAL && sbad == &swr,
	      "send_before_rts_refused", "a send in INIT was not refused with EINVAL");
	big.sg_list = sges;
	rbad = NULL;
	CHECK(ib_post_recv(qp, &big, &rbad) && rbad == &big, "recv_too_many_sges_refused",
	      "3 SGEs on a QP with max_recv_sge 2 were taken");
	CHECK(post_recvs(qp, NULL, 8, 100, &rbad) == 0, "recv_in_init", "posting failed");
	CHECK(ib_poll_cq(cq, 16, wc) == 0, "nothing_completes_before_err",
	      "a completion appeared");
	ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
	CHECK(to_err(qp) == 0, "modify_to_err", "ERR refused");
	n = poll_n(cq, wc, 8);
	ok = n == 8;
	for (int i = 0; ok && i < 8; i++)
		ok = wc[i].status == IB_WC_WR_FLUSH_ERR && wc[i].wr_id == 100 + i &&
		     wc[i].qp == qp;
	CHECK(ok, "err_flushes_receives_in_order", "%d completions, first status %d wr_id %llu",
	      n, n ? wc[0].status : -1, n ? wc[0].wr_id : 0);
	for (int t = 0; t < 100 && !atomic_read(&ev.comp); t++)
		msleep(10);
	CHECK(atomic_read(&ev.comp) == 1, "armed_cq_handler_called_once", "called %d times",
	      atomic_read(&ev.comp));
	CHECK(post_recvs(qp, NULL, 2, 200, &rbad) == 0 && poll_n(cq, wc, 2) == 2 &&
		      wc[0].wr_id == 200 && wc[1].wr_id == 201 &&
		      wc[1].status == IB_WC_WR_FLUSH_ERR,
	      "recv_in_err_flushed", "receives posted in ERR did not complete flushed");
	CHECK(ib_post_send(qp, &swr, &sbad) == 0 && poll_n(cq, wc, 1) == 1 &&
		      wc[0].wr_id == 900 && wc[0].status == IB_WC_WR_FLUSH_ERR && wc[0].qp == qp,
	      "send_in_err_flushed", "a send posted in ERR did not complete flushed");
	CHECK(ib_poll_cq(cq, 16, wc) == 0, "nothing_else_completes", "extra completions");
	/* Work outstanding at destroy never completes. */
	CHECK(ib_modify_qp(qp, &reset, IB_QP_STATE) == 0 && to_init(qp) == 0 &&
		      post_recvs(qp, NULL, 4, 300, &rbad) == 0,
	      "reset_and_reuse", "RESET, INIT and posting again failed");
	CHECK(ib_destroy_qp(qp) == 0, "destroy_with_outstanding_receives", "destroy failed");
	msleep(50);
	CHECK(ib_poll_cq(cq, 16, wc) == 0, "destroyed_qp_never_completes",
	      "%d completions after destroy", ib_poll_cq(cq, 16, wc));
out_cq:
	ib_destroy_cq(cq);
}

/* A CQ that overflows tells its consumer with IB_EVENT_CQ_ERR. */
static void check_overflow(struct ib_pd *pd)
{
	struct ib_cq_init_attr ca = { .cqe = 4 };
	struct events ev = {};
	const struct ib_recv_wr *rbad;
	struct ib_cq *cq;
	struct ib_qp *qp;
	int n;

	cq = ib_create_cq(pd->device, comp_handler, cq_event, &ev, &ca);
	if (IS_ERR(cq)) {
		CHECK(0, "overflow_setup", "ib_create_cq: %ld", PTR_ERR(cq));
		return;
	}
	qp = make_qp(pd, cq, cq, NULL);
	if (IS_ERR(qp)) {
		CHECK(0, "overflow_setup", "ib_create_qp: %ld", PTR_ERR(qp));
		goto out_cq;
	}
	if (to_init(qp) || post_recvs(qp, NULL, min(cq->cqe + 2, 16), 1, &rbad) || to_err(qp))
		CHECK(0, "overflow_setup", "INIT, posting or ERR failed");
	for (int t = 0; t < 100 && !atomic_read(&ev.cq_err); t++)
		msleep(10);
	CHECK(atomic_read(&ev.cq_err) >= 1, "overflow_raises_cq_err", "no IB_EVENT_CQ_ERR");
	n = ib_poll_cq(cq, 16, wc);
	CHECK(n > 0 && n <= cq->cqe && wc[0].wr_id == 1, "overflow_keeps_the_oldest",
	      "%d completions, first wr_id %llu", n, n > 0 ? wc[0].wr_id : 0);
	ib_destroy_qp(qp);
out_cq:
	ib_destroy_cq(cq);
}

static atomic_t drained_recvs;

static void recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	if (wc->status == IB_WC_WR_FLUSH_ERR)
		atomic_inc(&drained_recvs);
}

/*
 * ib_drain_qp() on a CQ that ib_core polls from its workqueue (where every request
 * carries an ib_cqe, not a wr_id).
 */
static void check_drain(struct ib_pd *pd)
{
	struct ib_cqe cqe = { .done = recv_done };
	struct ib_sge sge = { .lkey = pd->local_dma_lkey };
	struct ib_recv_wr wr[4] = {};
	const struct ib_recv_wr *rbad;
	struct ib_cq *cq;
	struct ib_qp *qp;

	cq = ib_alloc_cq(pd->device, NULL, 64, 0, IB_POLL_WORKQUEUE);
	if (IS_ERR(cq)) {
		CHECK(0, "drain_setup", "ib_alloc_cq: %ld", PTR_ERR(cq));
		return;
	}
	qp = make_qp(pd, cq, cq, NULL);
	if (IS_ERR(qp)) {
		CHECK(0, "drain_setup", "ib_create_qp: %ld", PTR_ERR(qp));
		goto out_cq;
	}
	for (int i = 0; i < 4; i++) {
		wr[i].wr_cqe = &cqe;
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].next = i < 3 ? &wr[i + 1] : NULL;
	}
	CHECK(to_init(qp) == 0 && ib_post_recv(qp, wr, &rbad) == 0, "drain_setup",
	      "INIT or posting failed");
	/*
	 * Returns once both queues' marker requests completed (it would wait forever
	 * else); the receives before the marker have completed by then.
	 */
	ib_drain_qp(qp);
	CHECK(atomic_read(&drained_recvs) == 4, "drain_qp_flushes_and_returns",
	      "%d receives flushed", atomic_read(&drained_recvs));
	ib_destroy_qp(qp);
out_cq:
	ib_free_cq(cq);
}

/* SRQs: posting, EBUSY while used, destroy with receives outstanding. */
static void check_srq(struct ib_pd *pd)
{
	struct ib_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ib_cq_init_attr ca = { .cqe = 16 };
	struct events ev = {};
	const struct ib_recv_wr *rbad;
	struct ib_srq_attr q;
	struct ib_srq *srq;
	struct ib_cq *cq;
	struct ib_qp *qp;

	cq = ib_create_cq(pd->device, comp_handler, cq_event, &ev, &ca);
	if (IS_ERR(cq)) {
		CHECK(0, "srq_setup", "ib_create_cq: %ld", PTR_ERR(cq));
		return;
	}
	srq = ib_create_srq(pd, &sa);
	if (IS_ERR(srq)) {
		CHECK(0, "srq_create", "ib_create_srq: %ld", PTR_ERR(srq));
		goto out_cq;
	}
	CHECK(sa.attr.max_wr >= 16 && ib_query_srq(srq, &q) == 0 && q.max_wr >= 16,
	      "srq_create", "max_wr %u", sa.attr.max_wr);
	CHECK(post_recvs(NULL, srq, 8, 1, &rbad) == 0, "srq_post", "posting failed");
	qp = make_qp(pd, cq, cq, srq);
	if (IS_ERR(qp)) {
		CHECK(0, "srq_qp", "ib_create_qp: %ld", PTR_ERR(qp));
		goto out_srq;
	}
	CHECK(post_recvs(qp, NULL, 1, 1, &rbad) == -EINVAL, "qp_recv_with_srq_refused",
	      "a receive posted to an SRQ-attached QP was taken");
	CHECK(ib_destroy_srq_user(srq, NULL) == -EBUSY, "srq_destroy_busy (ib_core)",
	      "destroying an SRQ in use did not fail with EBUSY");
	CHECK(post_recvs(NULL, srq, 2, 50, &rbad) == 0, "srq_usable_after_busy",
	      "posting failed after the refused destroy");
	ib_destroy_qp(qp);
out_srq:
	CHECK(ib_destroy_srq_user(srq, NULL) == 0, "srq_destroy_with_outstanding", "destroy failed");
out_cq:
	ib_destroy_cq(cq);
}

/* Fast-registration MRs: allocation and mapping a scatterlist into the page list. */
static void check_frmr(struct ib_pd *pd)
{
	struct ib_device *dev = pd->device;
	struct scatterlist sg[2];
	struct ib_mr *mr, *small;
	struct page *pages;
	int nents, n;

	mr = ib_alloc_mr(pd, IB_MR_TYPE_SG_GAPS, 4);
	CHECK(IS_ERR(mr), "frmr_sg_gaps_refused", "an SG_GAPS MR was allocated");
	if (!IS_ERR(mr))
		ib_dereg_mr(mr);
	pages = alloc_pages(GFP_KERNEL, 2);
	if (!pages) {
		CHECK(0, "frmr_setup", "no pages");
		return;
	}
	/* Two entries of two pages each. */
	sg_init_table(sg, 2);
	sg_set_page(&sg[0], pages, 2 * PAGE_SIZE, 0);
	sg_set_page(&sg[1], pages + 2, 2 * PAGE_SIZE, 0);
	nents = ib_dma_map_sg(dev, sg, 2, DMA_BIDIRECTIONAL);
	mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 8);
	CHECK(!IS_ERR(mr) && mr->lkey && mr->rkey, "frmr_alloc", "ib_alloc_mr: %ld",
	      IS_ERR(mr) ? PTR_ERR(mr) : 0);
	if (IS_ERR(mr))
		goto out_unmap;
	n = ib_map_mr_sg(mr, sg, nents, NULL, PAGE_SIZE);
	CHECK(n == nents && mr->length == 4 * PAGE_SIZE &&
		      mr->iova == sg_dma_address(&sg[0]) && mr->page_size == PAGE_SIZE,
	      "frmr_map_sg", "mapped %d of %d, length %llu", n, nents, mr->length);
	/* A list of two pages takes the first entry only. */
	small = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 2);
	if (!IS_ERR(small)) {
		n = ib_map_mr_sg(small, sg, nents, NULL, PAGE_SIZE);
		CHECK(nents == 1 || (n == 1 && small->length == 2 * PAGE_SIZE),
		      "frmr_map_sg_stops_when_full", "mapped %d, length %llu", n, small->length);
		ib_dereg_mr(small);
	} else {
		CHECK(0, "frmr_map_sg_stops_when_full", "ib_alloc_mr: %ld", PTR_ERR(small));
	}
	CHECK(ib_dereg_mr(mr) == 0, "frmr_dereg", "dereg failed");
out_unmap:
	ib_dma_unmap_sg(dev, sg, 2, DMA_BIDIRECTIONAL);
	__free_pages(pages, 2);
}

/* The index of a RoCE v2 GID of port 1 with an IPv4 address, or -1. */
static int roce_v2_gid(struct ib_device *dev)
{
	for (int i = 0; i < dev->port_data[1].immutable.gid_tbl_len; i++) {
		const struct ib_gid_attr *a = rdma_get_gid_attr(dev, 1, i);
		bool v4;

		if (IS_ERR(a))
			continue;
		v4 = a->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP &&
		     ipv6_addr_v4mapped((struct in6_addr *)a->gid.raw);
		rdma_put_gid_attr(a);
		if (v4)
			return i;
	}
	return -1;
}

/* Moves `qp` to RTS, connected to `dest` through the GID at `gid_index`. */
static int connect_rc(struct ib_qp *qp, struct ib_qp *dest, int gid_index)
{
	struct ib_qp_attr a = {
		.qp_state = IB_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE,
	};
	union ib_gid gid;
	int err;

	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
					IB_QP_ACCESS_FLAGS);
	if (err)
		return err;
	err = rdma_query_gid(qp->device, 1, gid_index, &gid);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = dest->qp_num;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&a.ah_attr, 1);
	rdma_ah_set_grh(&a.ah_attr, &gid, 0, gid_index, 1, 0);
	err = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN |
					IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |
					IB_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 100;
	a.max_rd_atomic = 1;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
					IB_QP_RNR_RETRY | IB_QP_SQ_PSN | IB_QP_MAX_QP_RD_ATOMIC);
}

/*
 * Registers `mr` over the mapped `sg` with `access`, through `qp`; the completion. With
 * `iova_hi`, the MR's address gets those upper 32 bits between ib_map_mr_sg() and the
 * work request, as NFS over RDMA does with the RPC's XID: the registration must use
 * the address the MR has when the request is posted.
 */
static int reg_mr(struct ib_qp *qp, struct ib_cq *cq, struct ib_mr *mr,
		  struct scatterlist *sg, int access, u32 iova_hi)
{
	const struct ib_send_wr *bad;
	struct ib_reg_wr r = {
		.wr = { .opcode = IB_WR_REG_MR, .wr_id = 1 },
		.mr = mr,
		.key = mr->rkey,
		.access = access,
	};

	if (ib_map_mr_sg(mr, sg, 1, NULL, PAGE_SIZE) != 1)
		return -EINVAL;
	if (iova_hi)
		mr->iova = (mr->iova & 0xffffffffull) | (u64)iova_hi << 32;
	if (ib_post_send(qp, &r.wr, &bad) || poll_n(cq, wc, 1) != 1)
		return -EIO;
	return wc[0].status == IB_WC_SUCCESS ? 0 : -EIO;
}

/* An RDMA READ of `len` bytes from `src` into `dst`, invalidating `inv` if not 0. */
static int read_into(struct ib_qp *qp, struct ib_cq *cq, struct ib_mr *dst,
		     struct ib_mr *src, u32 len, u32 inv)
{
	const struct ib_send_wr *bad;
	struct ib_sge sge = { .addr = dst->iova, .length = len, .lkey = dst->lkey };
	struct ib_rdma_wr r = {
		.wr = { .opcode = inv ? IB_WR_RDMA_READ_WITH_INV : IB_WR_RDMA_READ,
			.wr_id = 2, .sg_list = &sge, .num_sge = 1,
			.ex.invalidate_rkey = inv },
		.remote_addr = src->iova,
		.rkey = src->rkey,
	};

	if (ib_post_send(qp, &r.wr, &bad) || poll_n(cq, wc, 1) != 1)
		return -1;
	return wc[0].status;
}

/* The traffic checks' two QPs on `cq` and two fast-registration MRs; nonzero if one failed. */
static int pair_up(struct ib_pd *pd, struct ib_cq *cq, struct ib_qp **qa, struct ib_qp **qb,
		   struct ib_mr **src, struct ib_mr **dst)
{
	*qa = make_qp(pd, cq, cq, NULL);
	*qb = make_qp(pd, cq, cq, NULL);
	*src = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 1);
	*dst = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, 1);
	return IS_ERR(*qa) || IS_ERR(*qb) || IS_ERR(*src) || IS_ERR(*dst);
}

/* Destroys what the traffic checks set up: their two QPs and two MRs, those that exist. */
static void pair_down(struct ib_qp *qa, struct ib_qp *qb, struct ib_mr *src, struct ib_mr *dst)
{
	if (!IS_ERR_OR_NULL(qa))
		ib_destroy_qp(qa);
	if (!IS_ERR_OR_NULL(qb))
		ib_destroy_qp(qb);
	if (!IS_ERR_OR_NULL(src))
		ib_dereg_mr(src);
	if (!IS_ERR_OR_NULL(dst))
		ib_dereg_mr(dst);
}

/* RDMA READ with invalidate between two connected QPs of the device. */
static void check_read_inv(struct ib_pd *pd)
{
	struct ib_device *dev = pd->device;
	struct ib_cq_init_attr ca = { .cqe = 64 };
	struct events ev = {};
	struct scatterlist sg_src, sg_dst;
	struct ib_mr *src = NULL, *dst = NULL;
	struct ib_qp *qa = NULL, *qb = NULL;
	struct page *page_src, *page_dst;
	int gid_index, status;
	struct ib_cq *cq;
	u8 *s, *d;

	gid_index = roce_v2_gid(dev);
	page_src = alloc_page(GFP_KERNEL);
	page_dst = alloc_page(GFP_KERNEL);
	if (gid_index < 0 || !page_src || !page_dst) {
		CHECK(0, "read_inv_setup", "no RoCE v2 IPv4 GID (%d) or no pages", gid_index);
		goto out_pages;
	}
	cq = ib_create_cq(dev, comp_handler, cq_event, &ev, &ca);
	if (IS_ERR(cq)) {
		CHECK(0, "read_inv_setup", "ib_create_cq: %ld", PTR_ERR(cq));
		goto out_pages;
	}
	s = page_address(page_src);
	d = page_address(page_dst);
	for (int i = 0; i < PAGE_SIZE; i++) {
		s[i] = i * 7 + 3;
		d[i] = 0;
	}
	sg_init_one(&sg_src, s, PAGE_SIZE);
	sg_init_one(&sg_dst, d, PAGE_SIZE);
	if (ib_dma_map_sg(dev, &sg_src, 1, DMA_BIDIRECTIONAL) != 1 ||
	    ib_dma_map_sg(dev, &sg_dst, 1, DMA_BIDIRECTIONAL) != 1) {
		CHECK(0, "read_inv_setup", "ib_dma_map_sg");
		goto out_cq;
	}
	if (pair_up(pd, cq, &qa, &qb, &src, &dst)) {
		CHECK(0, "read_inv_setup", "QPs or MRs");
		goto out;
	}
	CHECK(connect_rc(qa, qb, gid_index) == 0 && connect_rc(qb, qa, gid_index) == 0,
	      "rc_connect_to_self", "modify_qp failed");
	/* The source is read at an address the consumer chose after mapping it. */
	CHECK(reg_mr(qb, cq, src, &sg_src, IB_ACCESS_REMOTE_READ, 0x5ca1ab1e) == 0 &&
		      reg_mr(qa, cq, dst, &sg_dst, IB_ACCESS_LOCAL_WRITE, 0) == 0,
	      "reg_mr_work_requests", "status %d", wc[0].status);
	status = read_into(qa, cq, dst, src, PAGE_SIZE, dst->lkey);
	CHECK(status == IB_WC_SUCCESS && wc[0].opcode == IB_WC_RDMA_READ &&
		      wc[0].byte_len == PAGE_SIZE && !memcmp(s, d, PAGE_SIZE),
	      "read_with_invalidate_places_data", "status %d opcode %d len %u", status,
	      wc[0].opcode, wc[0].byte_len);
	/* The key it invalidated opens nothing: a READ into it fails locally. */
	status = read_into(qa, cq, dst, src, 64, 0);
	CHECK(status == IB_WC_LOC_PROT_ERR, "read_with_invalidate_kills_the_key",
	      "a READ through the invalidated key ended with status %d", status);
out:
	pair_down(qa, qb, src, dst);
	ib_dma_unmap_sg(dev, &sg_src, 1, DMA_BIDIRECTIONAL);
	ib_dma_unmap_sg(dev, &sg_dst, 1, DMA_BIDIRECTIONAL);
out_cq:
	ib_destroy_cq(cq);
out_pages:
	if (page_src)
		__free_page(page_src);
	if (page_dst)
		__free_page(page_dst);
}

/*
 * remap: an RDMA READ through the key of a fast-registration MR that was mapped again
 * after its REG_MR (no REG_MR since) gets the registered page's data or fails; the new
 * page's data never leaves.
 */
static void check_remap(struct ib_pd *pd)
{
	struct ib_device *dev = pd->device;
	struct ib_cq_init_attr ca = { .cqe = 64 };
	struct events ev = {};
	struct scatterlist sg_a, sg_b, sg_dst;
	struct ib_mr *src = NULL, *dst = NULL;
	struct ib_qp *qa = NULL, *qb = NULL;
	struct page *pa, *pb, *pd_;
	const struct ib_send_wr *bad;
	struct ib_sge sge;
	struct ib_rdma_wr r = {};
	int gid_index, status = -1;
	struct ib_cq *cq;
	u64 iova_a;
	u8 *a, *b, *d;

	gid_index = roce_v2_gid(dev);
	pa = alloc_page(GFP_KERNEL);
	pb = alloc_page(GFP_KERNEL);
	pd_ = alloc_page(GFP_KERNEL);
	if (gid_index < 0 || !pa || !pb || !pd_) {
		CHECK(0, "remap_setup", "no RoCE v2 IPv4 GID (%d) or no pages", gid_index);
		goto out_pages;
	}
	cq = ib_create_cq(dev, comp_handler, cq_event, &ev, &ca);
	if (IS_ERR(cq)) {
		CHECK(0, "remap_setup", "ib_create_cq: %ld", PTR_ERR(cq));
		goto out_pages;
	}
	a = page_address(pa);
	b = page_address(pb);
	d = page_address(pd_);
	memset(a, 0x5a, PAGE_SIZE);
	memset(b, 0xee, PAGE_SIZE);
	memset(d, 0, PAGE_SIZE);
	sg_init_one(&sg_a, a, PAGE_SIZE);
	sg_init_one(&sg_b, b, PAGE_SIZE);
	sg_init_one(&sg_dst, d, PAGE_SIZE);
	if (ib_dma_map_sg(dev, &sg_a, 1, DMA_BIDIRECTIONAL) != 1 ||
	    ib_dma_map_sg(dev, &sg_b, 1, DMA_BIDIRECTIONAL) != 1 ||
	    ib_dma_map_sg(dev, &sg_dst, 1, DMA_BIDIRECTIONAL) != 1) {
		CHECK(0, "remap_setup", "ib_dma_map_sg");
		goto out_cq;
	}
	if (pair_up(pd, cq, &qa, &qb, &src, &dst)) {
		CHECK(0, "remap_setup", "QPs or MRs");
		goto out;
	}
	if (connect_rc(qa, qb, gid_index) || connect_rc(qb, qa, gid_index) ||
	    reg_mr(qb, cq, src, &sg_a, IB_ACCESS_REMOTE_READ, 0) ||
	    reg_mr(qa, cq, dst, &sg_dst, IB_ACCESS_LOCAL_WRITE, 0)) {
		CHECK(0, "remap_setup", "connect or REG_MR failed");
		goto out;
	}
	iova_a = src->iova;
	/* Mapped again, onto the other page; no REG_MR follows. */
	if (ib_map_mr_sg(src, &sg_b, 1, NULL, PAGE_SIZE) != 1) {
		CHECK(0, "remap_setup", "ib_map_mr_sg again");
		goto out;
	}
	sge = (struct ib_sge){ .addr = dst->iova, .length = 64, .lkey = dst->lkey };
	r.wr = (struct ib_send_wr){ .opcode = IB_WR_RDMA_READ, .wr_id = 3, .sg_list = &sge,
				    .num_sge = 1 };
	r.remote_addr = iova_a;
	r.rkey = src->rkey;
	if (!ib_post_send(qa, &r.wr, &bad) && poll_n(cq, wc, 1) == 1)
		status = wc[0].status;
	pr_info("kverbs_test: READ through the key after the new mapping: status %d, data %#x\n",
		status, d[0]);
	CHECK(d[0] != 0xee && (status != IB_WC_SUCCESS || !memcmp(d, a, 64)),
	      "remap_keeps_registered_pages",
	      "the READ through the old key ended with status %d and brought %#x (registered page %#x, new page %#x)",
	      status, d[0], a[0], b[0]);
out:
	pair_down(qa, qb, src, dst);
	ib_dma_unmap_sg(dev, &sg_a, 1, DMA_BIDIRECTIONAL);
	ib_dma_unmap_sg(dev, &sg_b, 1, DMA_BIDIRECTIONAL);
	ib_dma_unmap_sg(dev, &sg_dst, 1, DMA_BIDIRECTIONAL);
out_cq:
	ib_destroy_cq(cq);
out_pages:
	if (pa)
		__free_page(pa);
	if (pb)
		__free_page(pb);
	if (pd_)
		__free_page(pd_);
}

/*
 * ib_modify_device(): the system image GUID (which only kernel callers can set; the test
 * reads it back through ibv_devinfo), and a mask bit no driver knows, refused.
 */
static void check_modify_device(struct ib_device *dev)
{
	struct ib_device_modify m = { .sys_image_guid = 0x0123456789abcdefULL };
	int ret;

	ret = ib_modify_device(dev, IB_DEVICE_MODIFY_SYS_IMAGE_GUID, &m);
	CHECK(ret == 0, "modify_device_sys_image_guid", "ib_modify_device: %d", ret);
	ret = ib_modify_device(dev, 1 << 7, &m);
	CHECK(ret == -EOPNOTSUPP, "modify_device_unknown_bit", "ib_modify_device: %d", ret);
}

static struct ib_client kverbs_client;

/* hold_ah: a PD and an AH to the device's own RoCE v2 IPv4 GID, kept as client data. */
static int hold(struct ib_device *dev)
{
	struct rdma_ah_attr a = { .type = RDMA_AH_ATTR_TYPE_ROCE };
	int gid_index = roce_v2_gid(dev);
	struct held *h;
	union ib_gid gid;

	if (gid_index < 0 || rdma_query_gid(dev, 1, gid_index, &gid))
		return -ENODEV;
	h = kzalloc(sizeof(*h), GFP_KERNEL);
	if (!h)
		return -ENOMEM;
	h->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(h->pd)) {
		kfree(h);
		return -ENOMEM;
	}
	rdma_ah_set_port_num(&a, 1);
	rdma_ah_set_grh(&a, &gid, 0, gid_index, 64, 0);
	h->ah = rdma_create_ah(h->pd, &a, RDMA_CREATE_AH_SLEEPABLE);
	if (IS_ERR(h->ah)) {
		pr_err("kverbs_test: rdma_create_ah: %ld\n", PTR_ERR(h->ah));
		ib_dealloc_pd(h->pd);
		kfree(h);
		return -EIO;
	}
	ib_set_client_data(dev, &kverbs_client, h);
	pr_info("kverbs_test: holding an AH to GID index %d\n", gid_index);
	return 0;
}

static int kverbs_add(struct ib_device *dev)
{
	struct ib_pd *pd;

	if (strcmp(dev_name(&dev->dev), devname))
		return -EOPNOTSUPP;
	found = 1;
	if (hold_ah) {
		int err = hold(dev);

		CHECK(err == 0, "hold_ah", "%d", err);
		return err ? -EOPNOTSUPP : 0;
	}
	pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(pd)) {
		CHECK(0, "alloc_pd", "ib_alloc_pd: %ld", PTR_ERR(pd));
		return -EOPNOTSUPP;
	}
	if (modify) {
		check_modify_device(dev);
	} else if (remap) {
		check_remap(pd);
	} else if (traffic) {
		check_read_inv(pd);
	} else {
		check_flush(pd);
		check_overflow(pd);
		check_drain(pd);
		check_srq(pd);
		check_frmr(pd);
	}
	ib_dealloc_pd(pd);
	/* Not a client of the device from here on. */
	return -EOPNOTSUPP;
}

static void kverbs_remove(struct ib_device *dev, void *data)
{
	struct held *h = data;

	if (h) {
		rdma_destroy_ah(h->ah, RDMA_DESTROY_AH_SLEEPABLE);
		ib_dealloc_pd(h->pd);
		kfree(h);
	}
}

static struct ib_client kverbs_client = {
	.name = "kverbs_test",
	.add = kverbs_add,
	.remove = kverbs_remove,
};

static int __init kverbs_init(void)
{
	int err = ib_register_client(&kverbs_client);

	if (err)
		return err;
	/* hold_ah: a client until unloaded, which releases what it holds. */
	if (!hold_ah || !found || failed)
		ib_unregister_client(&kverbs_client);
	if (!found)
		return -ENODEV;
	pr_info("kverbs_test: %d failed\n", failed);
	return failed ? -EIO : 0;
}

static void __exit kverbs_exit(void)
{
	if (hold_ah)
		ib_unregister_client(&kverbs_client);
}

module_init(kverbs_init);
module_exit(kverbs_exit);
MODULE_DESCRIPTION("Kernel-consumer checks of an RDMA device's verbs");
MODULE_LICENSE("GPL");
