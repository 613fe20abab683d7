// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel-consumer checks of an RDMA device: the verbs a kernel ULP uses (ib_core's
 * kernel API), run once when the module is loaded, on the device named by the `dev`
 * parameter. Each check logs "kverbs_test: ok NAME" or "kverbs_test: not ok NAME: why";
 * loading fails with EIO if any check failed and with ENODEV if the device was not
 * found. A module that loaded holds nothing and is removed with rmmod.
 *
 * Only what needs no peer is checked: work posted before RTS, the flush of the error
 * state (in order, naming the QP), posts in the error state, ib_drain_qp(), SRQs, the
 * CQ overflow event, destroys with work outstanding, fast-registration MRs.
 */
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <rdma/ib_verbs.h>

static char *devname = "tdev0";
module_param_named(dev, devname, charp, 0444);
MODULE_PARM_DESC(dev, "name of the RDMA device to check");

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

static int kverbs_add(struct ib_device *dev)
{
	struct ib_pd *pd;

	if (strcmp(dev_name(&dev->dev), devname))
		return -EOPNOTSUPP;
	found = 1;
	pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(pd)) {
		CHECK(0, "alloc_pd", "ib_alloc_pd: %ld", PTR_ERR(pd));
		return -EOPNOTSUPP;
	}
	check_flush(pd);
	check_overflow(pd);
	check_drain(pd);
	check_srq(pd);
	check_frmr(pd);
	ib_dealloc_pd(pd);
	/* Not a client of the device from here on. */
	return -EOPNOTSUPP;
}

static void kverbs_remove(struct ib_device *dev, void *data)
{
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
	ib_unregister_client(&kverbs_client);
	if (!found)
		return -ENODEV;
	pr_info("kverbs_test: %d failed\n", failed);
	return failed ? -EIO : 0;
}

static void __exit kverbs_exit(void)
{
}

module_init(kverbs_init);
module_exit(kverbs_exit);
MODULE_DESCRIPTION("Kernel-consumer checks of an RDMA device's verbs");
MODULE_LICENSE("GPL");
