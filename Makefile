# SPDX-License-Identifier: GPL-2.0
# User-facing targets of rxe_rs. Kbuild (not this file) is what the kernel's build
# reads for `make -C $KDIR M=$PWD`.
#
#   make run              bootstrap what is missing, build, boot a guest, create a device
#   make check            the test suite that CI runs
#   make check-full       everything make check runs, rxe live beside rxe_rs, every test on
#                         the debug kernel, stress and fuzz at length (tools/check.sh)
#   make rxe-baseline     rxe's outcomes of the side-by-side tests, recorded where their
#                         inputs changed (ALL=1: every test) in selftests/rxe-baseline/
#   make KDIR=/path       build rxe_rs.ko against your own Rust-enabled 7.2 build tree
#   make module           build rxe_rs.ko against the cached test kernel (build/test/)
#   make bootstrap        toolchain/guest tree and both test kernels, nothing else
#   make rdma-core-tests  rdma-core's own test suite on rxe and on rxe_rs, with the difference
#   make stress           the every-object loop at length (ROUNDS=2000) on the debug kernel
#   make fuzz             the verbs fuzzer (FUZZ_SECONDS=1200) and failslab on the debug
#                         kernel, the packet parser (FUZZ_PACKET_SECONDS=1200) alongside
#   make bench            perftest bandwidth and latency on rxe and on rxe_rs, in one guest
#                         and across two (BENCH_ITERS=scale, BENCH_ROUNDS=boots,
#                         BENCH_REPEAT=runs a boot, BENCH_TCG=multi|single,
#                         BENCH_PLACEMENTS="one two", BENCH_ONLY=regex)
#   make interop          wire interop: a guest with C rxe against one with rxe_rs
#   make profile TOOL="ib_atomic_bw -D 8"
#                         where the kernel spends a perftest run's time, on rxe and on
#                         rxe_rs (one guest, sampled by tools/kprof.c; CALLERS="fn..."
#                         also tables the samples in those functions by caller)
#   make ab REVS="4b61d89^ 4b61d89 work"
#                         rxe_rs's speed at those commits (work: this checkout), side by
#                         side in one guest, rounds interleaved (ROUNDS=3)
#   make graft KSRC=/path/to/linux
#                         put the driver into a kernel source tree (tools/graft.sh):
#                         CONFIG_RDMA_RXE_RS then builds it as any in-tree driver
#   make install [KVER=...] [KO=file]
#                         rxe_rs in rdma_rxe's place for the running kernel (or KVER):
#                         the module (KO, or built against /lib/modules/KVER/build),
#                         depmod, and dist/rxe_rs.conf in /etc/modprobe.d (tools/install.sh)
#   make uninstall [KVER=...]
#                         rdma_rxe the stock driver again
#   make clean            remove build/ (the cache under $RXE_RS_CACHE stays)

ifneq ($(KDIR),)
default:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(if $(MO),MO=$(MO))
else
default: module
endif

module:
	tools/build-module.sh test

bootstrap:
	tools/install-host.sh
	tools/bootstrap-rootfs.sh
	tools/build-kernel.sh test
	tools/build-kernel.sh debug

run:
	tools/run.sh

check:
	tools/check.sh

check-full:
	TIER=full tools/check.sh

rxe-baseline:
	TIER=baseline tools/check.sh

rdma-core-tests:
	tools/rdma-core-suite.sh

stress:
	tools/stress.sh

fuzz:
	tools/fuzz.sh

bench:
	tools/bench.sh

interop:
	tools/interop.sh

profile:
	tools/profile.sh $(if $(CALLERS),--callers "$(CALLERS)") $(TOOL)

ab:
	tools/ab.sh $(if $(COUNT),--count) $(if $(ROUNDS),--rounds $(ROUNDS)) $(REVS)

graft:
	tools/graft.sh $(KSRC)

install:
	tools/install.sh $(if $(KO),--ko $(KO)) $(KVER)

uninstall:
	tools/install.sh --remove $(KVER)

clean:
	rm -rf build

.PHONY: default module bootstrap run check check-full rxe-baseline rdma-core-tests stress fuzz bench interop profile ab \
	graft install uninstall clean
