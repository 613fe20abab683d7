// SPDX-License-Identifier: GPL-2.0
/*
 * One RDMA READ of a large buffer between two hosts (issue 14, item 2: the responder
 * builds the whole response stream within a budget per run, continuing from its work
 * item; the transfer completes and nothing stalls).
 *
 *   read_big serve DEVICE GID_INDEX TCP_PORT BYTES
 *   read_big get DEVICE GID_INDEX PEER_ADDR TCP_PORT BYTES
 *
 * The server registers BYTES filled with a pattern (each 8-byte word its own index)
 * for remote reading; the client reads all of it with one RC RDMA READ and checks every
 * word. The QPs' numbers, PSNs, GIDs and the buffer's address and key go over a TCP
 * connection, which the client retries for up to 60 s while the server is not up yet.
 * The client prints how long ibv_post_send() took and the transfer's time and rate.
 * Every wait is bounded: 60 s for the peer, 1200 s for the completion (345 s alone on
 * a TCG host, more when other guests share its CPUs).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); return 1; } while (0)

struct wire {
	uint32_t qpn, psn;
	uint8_t gid[16];
	uint64_t va;
	uint32_t rkey, pad;
};

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Exactly n bytes from or to fd within `secs` seconds; 0 on success. */
static int xfer(int fd, void *buf, size_t n, int out, int secs)
{
	double end = now() + secs;

	while (n) {
		struct pollfd pf = { .fd = fd, .events = out ? POLLOUT : POLLIN };
		ssize_t r;

		if (now() > end || poll(&pf, 1, 1000) < 0)
			return -1;
		if (!pf.revents)
			continue;
		r = out ? write(fd, buf, n) : read(fd, buf, n);
		if (r <= 0)
			return -1;
		buf = (char *)buf + r;
		n -= r;
	}
	return 0;
}

static int listen_once(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0), c;
	struct pollfd pf;

	if (s < 0)
		return -1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 1))
		return -1;
	pf.fd = s;
	pf.events = POLLIN;
	if (poll(&pf, 1, 60000) != 1)
		return -1;
	c = accept(s, NULL, NULL);
	close(s);
	return c;
}

static int connect_retry(const char *addr, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
		return -1;
	for (int i = 0; i < 120; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);

		if (s >= 0 && !connect(s, (struct sockaddr *)&a, sizeof(a)))
			return s;
		if (s >= 0)
			close(s);
		usleep(500000);
	}
	return -1;
}

static int qp_connect(struct ibv_qp *qp, int gidx, const struct wire *peer, uint32_t psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_READ,
	};
	int ret;

	if ((ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				 IBV_QP_ACCESS_FLAGS)))
		FAIL("to INIT: %s", strerror(ret));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.hop_limit = 64;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	if ((ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				 IBV_QP_MIN_RNR_TIMER)))
		FAIL("to RTR: %s", strerror(ret));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if ((ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)))
		FAIL("to RTS: %s", strerror(ret));
	return 0;
}

int main(int argc, char **argv)
{
	int serve = argc == 6 && !strcmp(argv[1], "serve");
	int get = argc == 7 && !strcmp(argv[1], "get");
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct wire me = { 0 }, peer;
	union ibv_gid gid;
	uint64_t *buf, bytes, bad = 0;
	int gidx, fd, ret;
	char sync;

	if (!serve && !get) {
		fprintf(stderr, "usage: %s serve DEVICE GID_INDEX TCP_PORT BYTES\n"
			"       %s get DEVICE GID_INDEX PEER_ADDR TCP_PORT BYTES\n", argv[0], argv[0]);
		return 2;
	}
	gidx = atoi(argv[3]);
	bytes = strtoull(argv[argc - 1], NULL, 0) & ~7ULL;
	if (!bytes || bytes > (1ULL << 31))
		FAIL("BYTES must be 8 to 2^31");
	list = ibv_get_device_list(NULL);
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[2]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		FAIL("cannot open %s", argv[2]);
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		FAIL("query_gid: %s", strerror(errno));
	buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		FAIL("mmap %" PRIu64 " bytes: %s", bytes, strerror(errno));
	if (serve)
		for (uint64_t i = 0; i < bytes / 8; i++)
			buf[i] = i;
	else
		memset(buf, 0xee, bytes);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!pd || !cq)
		FAIL("pd/cq: %s", strerror(errno));
	mr = ibv_reg_mr(pd, buf, bytes, serve ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		FAIL("reg_mr %" PRIu64 " bytes: %s", bytes, strerror(errno));
	qp = ibv_create_qp(pd, &(struct ibv_qp_init_attr){
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	});
	if (!qp)
		FAIL("create_qp: %s", strerror(errno));
	me.qpn = qp->qp_num;
	me.psn = serve ? 0x1000 : 0x2000;
	memcpy(me.gid, gid.raw, 16);
	me.va = (uintptr_t)buf;
	me.rkey = mr->rkey;

	fd = serve ? listen_once(atoi(argv[4])) : connect_retry(argv[4], atoi(argv[5]));
	if (fd < 0)
		FAIL("no peer on the TCP port");
	if (xfer(fd, &me, sizeof(me), 1, 60) || xfer(fd, &peer, sizeof(peer), 0, 60))
		FAIL("exchange with the peer failed");
	if (qp_connect(qp, gidx, &peer, me.psn))
		return 1;
	/* Both QPs are ready before the READ goes out. */
	if (xfer(fd, "r", 1, 1, 60) || xfer(fd, &sync, 1, 0, 60))
		FAIL("the peer did not get ready");

	if (serve) {
		/* The client says when it is done; its buffer must outlive the READ. */
		if (xfer(fd, &sync, 1, 0, 1260))
			FAIL("the client did not say it was done");
		printf("served %" PRIu64 " bytes\n", bytes);
		return 0;
	} else {
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = bytes, .lkey = mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = peer.va, .rkey = peer.rkey },
		}, *badwr;
		struct ibv_wc wc;
		double t0, t1, t2;
		int n = 0;

		t0 = now();
		ret = ibv_post_send(qp, &wr, &badwr);
		t1 = now();
		if (ret)
			FAIL("post_send: %s", strerror(ret));
		while (!n && now() - t0 < 1200) {
			n = ibv_poll_cq(cq, 1, &wc);
			if (!n)
				usleep(1000);
		}
		t2 = now();
		xfer(fd, "d", 1, 1, 60);
		if (n != 1)
			FAIL("no completion in %.0f s", t2 - t0);
		if (wc.status != IBV_WC_SUCCESS)
			FAIL("completion: %s", ibv_wc_status_str(wc.status));
		for (uint64_t i = 0; i < bytes / 8; i++)
			bad += buf[i] != i;
		printf("READ of %" PRIu64 " bytes: post_send %.3f ms, completed in %.1f s (%.1f MB/s), "
		       "%" PRIu64 " words wrong\n", bytes, (t1 - t0) * 1e3, t2 - t0,
		       bytes / (t2 - t0) / 1e6, bad);
		if (t1 - t0 > 1.0)
			FAIL("post_send took more than 1 s");
		return bad ? 1 : 0;
	}
}
