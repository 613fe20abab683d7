// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin for `make ab COUNT=1` (tools/ab.sh --count) and for make check's
 * coverage of the debug guests (tools/coverage.py): counts how often each
 * translation block of the guest kernel runs, and so how many guest instructions.
 * Counts do not depend on how busy the host is, which timings under TCG do.
 *
 * Arguments: req=FILE,out=PREFIX. Whenever FILE appears (the guest creates it through
 * the 9p share), the counts so far are written to PREFIX.N (N = 0, 1, ...), one line per
 * block: "VADDR INSNS EXECS" (hex, decimal, decimal), and FILE is removed. The guest
 * brackets a workload with two such snapshots and the difference is the workload's.
 *
 * min=HEX counts only the blocks at or above that address (the modules' area, for
 * make check's coverage of the debug guest), and delta=1 writes in each snapshot only
 * the blocks that ran since the last one, with what they ran since (selftests/
 * cover-hook.sh takes one after each test). With seq=1, snapshot N is asked for by
 * FILE.N and written as PREFIX.N.tmp, then renamed to PREFIX.N, which tells the guest
 * it is there; no file is removed. (A FILE of one name that the host removes and the
 * guest creates again was seen refused by the 9p share, for seconds at a time: "No such
 * file or directory".)
 *
 * Only kernel addresses are counted. The vCPUs run in one thread (vm-run.sh uses
 * thread=single), so the inline counters are not raced by another vCPU; the snapshot
 * thread reads them while they run, which skews a snapshot by a few blocks at most.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define KERNEL_START 0xffff800000000000ull

struct block {
	uint64_t vaddr;
	uint64_t insns;
	uint64_t execs;
	uint64_t last;
	struct block *next;
};

static struct block *blocks;
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static char req_path[4096], out_prefix[4000];
static uint64_t min_vaddr = KERNEL_START;
static int delta, seq;

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	struct block *b;

	if (va < min_vaddr)
		return;
	b = calloc(1, sizeof(*b));
	if (!b)
		return;
	b->vaddr = va;
	b->insns = qemu_plugin_tb_n_insns(tb);
	pthread_mutex_lock(&blocks_lock);
	b->next = blocks;
	blocks = b;
	pthread_mutex_unlock(&blocks_lock);
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->execs, 1);
}

static void snapshot(int n)
{
	char path[4096 + 16], tmp[4096 + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s.%d", out_prefix, n);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(seq ? tmp : path, "w");
	if (!f)
		return;
	pthread_mutex_lock(&blocks_lock);
	for (struct block *b = blocks; b; b = b->next) {
		uint64_t execs = b->execs, ran = delta ? execs - b->last : execs;

		if (ran)
			fprintf(f, "%llx %llu %llu\n", (unsigned long long)b->vaddr,
				(unsigned long long)b->insns, (unsigned long long)ran);
		b->last = execs;
	}
	pthread_mutex_unlock(&blocks_lock);
	fclose(f);
	if (seq)
		rename(tmp, path);
}

static void *watch(void *unused)
{
	char path[4096 + 16];

	for (int n = 0;; ) {
		usleep(20000);
		snprintf(path, sizeof(path), seq ? "%s.%d" : "%s", req_path, n);
		if (access(path, F_OK))
			continue;
		snapshot(n++);
		if (!seq)
			unlink(req_path);
	}
	return NULL;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	pthread_t thread;

	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "req=", 4))
			snprintf(req_path, sizeof(req_path), "%s", argv[i] + 4);
		else if (!strncmp(argv[i], "out=", 4))
			snprintf(out_prefix, sizeof(out_prefix), "%s", argv[i] + 4);
		else if (!strncmp(argv[i], "min=", 4))
			min_vaddr = strtoull(argv[i] + 4, NULL, 16);
		else if (!strcmp(argv[i], "delta=1"))
			delta = 1;
		else if (!strcmp(argv[i], "seq=1"))
			seq = 1;
	}
	if (!req_path[0] || !out_prefix[0]) {
		fprintf(stderr, "qemu-tbcount: req=FILE,out=PREFIX are required\n");
		return -1;
	}
	if (pthread_create(&thread, NULL, watch, NULL))
		return -1;
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	return 0;
}
