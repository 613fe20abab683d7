// SPDX-License-Identifier: GPL-2.0
/*
 * kprof: where the CPUs spend their time, by kernel function, for a guest that has no
 * perf tool (the test kernels have CONFIG_PERF_EVENTS, the rootfs has no linux-perf).
 *
 *   kprof [-p PERIOD_US] [-c NAME]... SECONDS
 *
 * Samples every online CPU with the software cpu-clock event every PERIOD_US (default
 * 100) microseconds for SECONDS, then prints the functions (symbols of /proc/kallsyms,
 * modules' included) with their share of the samples, most first; samples in user
 * space count as "[user]". Runs as root (kallsyms addresses are hidden otherwise).
 * Under QEMU TCG the cpu-clock is the guest's clock, so the shares compare code paths
 * of one run, not absolute times.
 *
 * The clock's interrupt cannot land while interrupts are off: the time of a section
 * with interrupts off is counted where they come back on (_raw_spin_unlock_irqrestore
 * and the like). A second table therefore names, for the samples in such a function,
 * the function that called it (from the sample's call chain): the owner of the
 * section. -c NAME adds the functions whose name contains NAME to that table (e.g.
 * -c memcpy_orig: who copies).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 64
#define RING_PAGES 64 /* data pages of each CPU's ring, a power of two */

struct sym {
	uint64_t addr;
	char name[128];
	uint64_t hits;
};

static struct sym *syms;
static size_t nsyms;
static uint64_t user_hits, unknown_hits, lost, total;

/* Samples in a function that turns interrupts back on, by its caller. */
struct pair {
	struct sym *where, *caller;
	uint64_t hits;
};

#define MAX_PAIRS 4096
static struct pair pairs[MAX_PAIRS];
static size_t npairs;

static int by_addr(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int by_hits(const void *a, const void *b)
{
	const struct sym *x = *(struct sym *const *)a, *y = *(struct sym *const *)b;

	return x->hits > y->hits ? -1 : x->hits < y->hits;
}

/*
 * A readable form of a Rust v0 symbol (_RNvNtCs<hash>_6rxe_rs2qp3run -> rxe_rs::qp::run):
 * its identifiers, each a decimal length and that many bytes, joined; crate hashes
 * (Cs..._), disambiguators (s..._) and back references (B..._) skipped. Other names
 * are kept as they are.
 */
/* Copies as much of s as fits in out (cap > 0). */
static void copy_cut(char *out, size_t cap, const char *s)
{
	size_t n = strlen(s);

	if (n >= cap)
		n = cap - 1;
	memcpy(out, s, n);
	out[n] = 0;
}

static void readable(const char *s, char *out, size_t cap)
{
	size_t len = strlen(s), i = 2, o = 0;

	if (strncmp(s, "_R", 2) != 0) {
		copy_cut(out, cap, s);
		return;
	}
	out[0] = 0;
	while (i < len) {
		if ((s[i] >= 'A' && s[i] <= 'Z' && i + 1 < len && s[i + 1] == 's') || s[i] == 'B') {
			const char *u = strchr(s + i, '_');

			i = u ? (size_t)(u - s) + 1 : len;
		} else if (s[i] >= '1' && s[i] <= '9') {
			size_t n = 0;

			while (i < len && s[i] >= '0' && s[i] <= '9')
				n = n * 10 + (s[i++] - '0');
			if (i < len && s[i] == '_')
				i++;
			if (n > len - i)
				break;
			if (o + n + 3 < cap) {
				if (o) {
					out[o++] = ':';
					out[o++] = ':';
				}
				memcpy(out + o, s + i, n);
				o += n;
				out[o] = 0;
			}
			i += n;
		} else {
			i++;
		}
	}
	if (!o)
		copy_cut(out, cap, s);
}

static void load_kallsyms(void)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[1024];
	size_t cap = 0;

	if (!f) {
		perror("/proc/kallsyms");
		exit(1);
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long long addr;
		char type, name[512], mod[64] = "", nice[100];

		if (sscanf(line, "%llx %c %511s %63s", &addr, &type, name, mod) < 3)
			continue;
		if (type != 't' && type != 'T')
			continue;
		if (nsyms == cap) {
			cap = cap ? cap * 2 : 65536;
			syms = realloc(syms, cap * sizeof(*syms));
			if (!syms) {
				perror("realloc");
				exit(1);
			}
		}
		syms[nsyms].addr = addr;
		syms[nsyms].hits = 0;
		readable(name, nice, sizeof(nice));
		snprintf(syms[nsyms].name, sizeof(syms[nsyms].name), "%s%s%s", nice,
			 mod[0] ? " " : "", mod);
		nsyms++;
	}
	fclose(f);
	if (nsyms == 0 || syms[0].addr == 0) {
		fprintf(stderr, "kprof: no kernel addresses in /proc/kallsyms (run as root)\n");
		exit(1);
	}
	qsort(syms, nsyms, sizeof(*syms), by_addr);
}

/* The symbol ip is in: the last one that starts at or before it. */
static struct sym *lookup(uint64_t ip)
{
	size_t lo = 0, hi = nsyms;

	if (ip < syms[0].addr)
		return NULL;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (syms[mid].addr <= ip)
			lo = mid;
		else
			hi = mid;
	}
	return &syms[lo];
}

#define MAX_CALLEES 16
static const char *callees[MAX_CALLEES]; /* -c: more functions tabled by caller */
static int ncallees;

/*
 * Whether samples in the function are tabled by caller: it ends a section with
 * interrupts off, or -c named it.
 */
static int by_caller(const struct sym *s)
{
	int i;

	for (i = 0; i < ncallees; i++)
		if (strstr(s->name, callees[i]))
			return 1;
	return strstr(s->name, "unlock_irq") || strstr(s->name, "irq_restore") ||
	       strstr(s->name, "local_bh_enable") || strstr(s->name, "rxe_rs_spin_unlock");
}

static void count(uint64_t ip, const uint64_t *chain, uint64_t n)
{
	struct sym *s = lookup(ip), *caller = NULL;
	uint64_t i;
	size_t k;

	total++;
	if (!s) {
		if ((int64_t)ip >= 0)
			user_hits++;
		else
			unknown_hits++;
		return;
	}
	s->hits++;
	if (!by_caller(s))
		return;
	/* The first frame of the chain outside such functions (context markers skipped). */
	for (i = 0; i < n && !caller; i++) {
		struct sym *c;

		if (chain[i] >= (uint64_t)PERF_CONTEXT_MAX)
			continue;
		c = lookup(chain[i]);
		if (c && !by_caller(c))
			caller = c;
	}
	for (k = 0; k < npairs; k++) {
		if (pairs[k].where == s && pairs[k].caller == caller) {
			pairs[k].hits++;
			return;
		}
	}
	if (npairs < MAX_PAIRS)
		pairs[npairs++] = (struct pair){ s, caller, 1 };
}

static int pair_hits(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	return x->hits > y->hits ? -1 : x->hits < y->hits;
}

struct ring {
	int fd;
	struct perf_event_mmap_page *meta;
	char *data;
	uint64_t size;
};

/* Takes every record the kernel has written to the ring. */
static void drain(struct ring *r)
{
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;

	while (tail < head) {
		struct perf_event_header h;
		uint64_t off = tail % r->size;
		char rec[2048];
		size_t i;

		for (i = 0; i < sizeof(h); i++)
			((char *)&h)[i] = r->data[(off + i) % r->size];
		if (h.size < sizeof(h) || h.size > sizeof(rec))
			break;
		for (i = 0; i < h.size; i++)
			rec[i] = r->data[(off + i) % r->size];
		if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof(h) + 16) {
			uint64_t ip, n, chain[sizeof(rec) / 8];

			memcpy(&ip, rec + sizeof(h), sizeof(ip));
			memcpy(&n, rec + sizeof(h) + 8, sizeof(n));
			if (n > (h.size - sizeof(h) - 16) / 8)
				n = (h.size - sizeof(h) - 16) / 8;
			memcpy(chain, rec + sizeof(h) + 16, n * 8);
			count(ip, chain, n);
		} else if (h.type == PERF_RECORD_LOST) {
			uint64_t n;

			memcpy(&n, rec + sizeof(h) + sizeof(uint64_t), sizeof(n));
			lost += n;
		}
		tail += h.size;
	}
	__atomic_store_n(&r->meta->data_tail, head, __ATOMIC_RELEASE);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct ring rings[MAX_CPUS];
	struct pollfd pfd[MAX_CPUS];
	long page = sysconf(_SC_PAGESIZE);
	unsigned long period_us = 100;
	double seconds, end;
	struct sym **order;
	int opt, c, shown;
	size_t i;

	while ((opt = getopt(argc, argv, "p:c:")) != -1) {
		if (opt == 'p')
			period_us = strtoul(optarg, NULL, 10);
		else if (opt == 'c' && ncallees < MAX_CALLEES && *optarg)
			callees[ncallees++] = optarg;
		else
			goto usage;
	}
	if (optind + 1 != argc || period_us == 0)
		goto usage;
	seconds = atof(argv[optind]);
	if (seconds <= 0)
		goto usage;
	if (ncpu > MAX_CPUS)
		ncpu = MAX_CPUS;
	load_kallsyms();

	for (c = 0; c < ncpu; c++) {
		struct perf_event_attr a = {
			.size = sizeof(a),
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.sample_period = period_us * 1000,
			.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN,
			.exclude_callchain_user = 1,
			.disabled = 1,
			.wakeup_watermark = RING_PAGES * page / 4,
			.watermark = 1,
		};
		struct ring *r = &rings[c];
		void *m;

		r->fd = syscall(SYS_perf_event_open, &a, -1, c, -1, 0);
		if (r->fd < 0) {
			fprintf(stderr, "kprof: perf_event_open on cpu %d: %s\n", c, strerror(errno));
			return 1;
		}
		m = mmap(NULL, (RING_PAGES + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		if (m == MAP_FAILED) {
			perror("kprof: mmap");
			return 1;
		}
		r->meta = m;
		r->data = (char *)m + page;
		r->size = RING_PAGES * page;
		pfd[c] = (struct pollfd){ .fd = r->fd, .events = POLLIN };
	}
	for (c = 0; c < ncpu; c++)
		ioctl(rings[c].fd, PERF_EVENT_IOC_ENABLE, 0);
	end = now() + seconds;
	while (now() < end) {
		poll(pfd, ncpu, 100);
		for (c = 0; c < ncpu; c++)
			drain(&rings[c]);
	}
	for (c = 0; c < ncpu; c++) {
		ioctl(rings[c].fd, PERF_EVENT_IOC_DISABLE, 0);
		drain(&rings[c]);
	}

	printf("kprof: %llu samples on %ld CPUs in %.1f s (%llu lost)\n",
	       (unsigned long long)total, ncpu, seconds, (unsigned long long)lost);
	if (total == 0)
		return 0;
	printf("%6.2f%%  [user]\n", 100.0 * user_hits / total);
	if (unknown_hits)
		printf("%6.2f%%  [unknown]\n", 100.0 * unknown_hits / total);
	/* By hits through pointers: the pairs point into syms. */
	order = malloc(nsyms * sizeof(*order));
	if (!order) {
		perror("malloc");
		return 1;
	}
	for (i = 0; i < nsyms; i++)
		order[i] = &syms[i];
	qsort(order, nsyms, sizeof(*order), by_hits);
	for (i = 0, shown = 0; i < nsyms && shown < 60 && order[i]->hits; i++, shown++)
		printf("%6.2f%%  %s\n", 100.0 * order[i]->hits / total, order[i]->name);
	qsort(pairs, npairs, sizeof(*pairs), pair_hits);
	printf("kprof: samples where interrupts came back on%s, by caller:\n",
	       ncallees ? " (and in the functions -c named)" : "");
	for (i = 0; i < npairs && i < 30; i++)
		printf("%6.2f%%  %s <- %s\n", 100.0 * pairs[i].hits / total, pairs[i].where->name,
		       pairs[i].caller ? pairs[i].caller->name : "?");
	return 0;

usage:
	fprintf(stderr, "usage: kprof [-p PERIOD_US] [-c NAME]... SECONDS (-c at most %d times)\n",
		MAX_CALLEES);
	return 2;
}
