#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds rxe_rs the in-tree way: grafts it (tools/graft.sh) into the test kernel's source,
# configures CONFIG_RDMA_RXE_RS=m and CONFIG_RDMA_RXE_RS_KUNIT_TEST=y in the test
# kernel's build tree, and builds the module with the kernel's own build (no M=); then
# installs the grafted selftests with the kselftest build (TARGETS=...), as a kernel
# tree's user would, with that module beside them, and the kernel's own RDMA selftests
# (tools/testing/selftests/rdma, written for rdma_rxe) beside them.
#
# Neither cached tree is touched: inside the toolchain tree's private mount namespace,
# each is covered by an overlay whose writes land in build/graft/, removed at the end.
# What stays is build/graft/kselftest/ (run_kselftest.sh and the tests, with rxe_rs.ko
# and rxe_rs_kunit.ko, both the in-tree build, and kverbs_test.ko beside them).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kdir=$("$TOOLS_DIR/build-kernel.sh" test)
work=$TOP_DIR/build/graft
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"/*-upper "$work"/*-work "$work/bin"' EXIT

in_rootfs /bin/bash -ec '
	src=$1 obj=$2 w=$3 jobs=$4
	for t in src obj; do
		mkdir -p "$w/$t-upper" "$w/$t-work"
		mount -t overlay overlay \
			-o "lowerdir=${!t},upperdir=$w/$t-upper,workdir=$w/$t-work" "${!t}"
	done
	/src/tools/graft.sh "$src"
	"$src/scripts/config" --file "$obj/.config" -m RDMA_RXE_RS -e RDMA_RXE_RS_KUNIT_TEST
	make -s -C "$src" O="$obj" olddefconfig
	# What menuconfig would offer: the symbols kept, their dependencies met.
	for want in CONFIG_RDMA_RXE_RS=m CONFIG_RDMA_RXE_RS_KUNIT_TEST=y; do
		grep -qxF "$want" "$obj/.config" ||
			{ echo "Kconfig did not keep $want" >&2; exit 1; }
	done
	# The whole modules target, not the single .ko: modpost resolves the symbols of
	# ib_core and the other modules only when it sees them all.
	make -s -C "$src" O="$obj" -j"$jobs" modules
	# kselftest installs with `rsync -a --copy-unsafe-links FILE... DIR/`, which the
	# toolchain tree lacks: for plain files into a directory, cp -a does the same (not
	# for the TEST_INCLUDES of lib.mk, `rsync -aR`, which these tests do not use). rsync
	# joins the packages of the toolchain tree with their next change.
	mkdir -p "$w/bin"
	printf "%s\n" "#!/bin/sh" "while [ \"\${1#-}\" != \"\$1\" ]; do shift; done" \
		"exec cp -a \"\$@\"" > "$w/bin/rsync"
	chmod +x "$w/bin/rsync"
	PATH=$w/bin:$PATH make -C "$src/tools/testing/selftests" \
		TARGETS="drivers/infiniband/rxe_rs rdma" INSTALL_PATH="$w/kselftest" install
	# The modules the tests load, beside them: rxe_rs as the tree built it (with its
	# KUnit suites, so also as rxe_rs_kunit.ko) and the kernel-consumer test module.
	tests=$w/kselftest/drivers/infiniband/rxe_rs
	ko=$obj/drivers/infiniband/sw/rxe_rs/rxe_rs.ko
	cp "$ko" "$tests/rxe_rs.ko"
	cp "$ko" "$tests/rxe_rs_kunit.ko"
	make -s -C "$obj" M="$src/tools/testing/selftests/drivers/infiniband/rxe_rs/kverbs" \
		MO="$w/kverbs"
	cp "$w/kverbs/kverbs_test.ko" "$tests/"
' graft "/usr/src/linux-source-$KSERIES" "/cache/$(basename "$kdir")" /src/build/graft \
	"$(nproc)" >&2

echo "$work/kselftest"
