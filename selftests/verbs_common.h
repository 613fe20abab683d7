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
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

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
