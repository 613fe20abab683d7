#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Grafts rxe_rs into a kernel source tree, so that it is configured and built there like
# any in-tree driver (CONFIG_RDMA_RXE_RS in "make menuconfig", Device Drivers ->
# InfiniBand support, below rdma_rxe):
#
#   tools/graft.sh /path/to/linux
#
# drivers/infiniband/sw/rxe_rs/ gets the driver, its Kconfig and Kbuild, and the
# abstraction layer in rust/ beside it; drivers/infiniband/Kconfig and
# drivers/infiniband/sw/Makefile get one line each; the selftests go to
# tools/testing/selftests/drivers/infiniband/rxe_rs/. Running it again replaces the
# driver's files with the checkout's and adds nothing twice. The edited files are
# written anew, never changed in place, so a tree of hard links to another stays
# intact. make check grafts into the test kernel's source and builds the result.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
ksrc=${1:?usage: graft.sh KERNEL_SOURCE_TREE}
[ -f "$ksrc/drivers/infiniband/Kconfig" ] && [ -f "$ksrc/drivers/infiniband/sw/Makefile" ] ||
	{ echo "graft.sh: $ksrc is not a kernel source tree with drivers/infiniband" >&2; exit 1; }

dst=$ksrc/drivers/infiniband/sw/rxe_rs
rm -rf "$dst"
mkdir -p "$dst/rust/sw"
cp "$top/Kconfig" "$top/Kbuild" "$dst/"
# The driver's Rust files; the wire crate's host-only parts (cargo, its build output,
# fuzzing) stay behind.
(cd "$top/drivers/infiniband/sw/rxe_rs" &&
	find . -name '*.rs' -not -path './roce/fuzz/*' -not -path './roce/target/*' \
		-not -path './roce/host.rs' -print0 |
	xargs -0 cp --parents -t "$dst")
# The layer's sources, not what an in-place build may have left (its bindings): the
# generic part and the software-RoCE part below it.
find "$top/rust" -maxdepth 1 -type f \( -name '*.rs' -o -name '*.[ch]' \
	-o -name bindgen_parameters \) -not -name bindings_generated.rs -exec cp -t "$dst/rust" {} +
cp "$top"/rust/sw/*.rs "$top"/rust/sw/*.[ch] "$dst/rust/sw/"
# The selftests' sources, where the kselftest build finds them
# (TARGETS=drivers/infiniband/rxe_rs), and the kernel-consumer test module's.
tests=$ksrc/tools/testing/selftests/drivers/infiniband/rxe_rs
rm -rf "$tests"
mkdir -p "$tests/kverbs"
find "$top/selftests" -maxdepth 1 -type f \( -name '*.[ch]' -o -name '*.sh' -o -name '*.py' \
	-o -name Makefile -o -name config -o -name settings -o -name '*.txt' \) \
	-exec cp -t "$tests" {} +
cp "$top/selftests/kverbs/Kbuild" "$top/selftests/kverbs/kverbs_test.c" "$tests/kverbs/"

# add_after FILE ANCHOR LINE: LINE after the line ANCHOR of FILE, unless FILE has it.
add_after() {
	local file=$1 anchor=$2 line=$3
	grep -qxF -- "$line" "$file" && return
	grep -qxF -- "$anchor" "$file" ||
		{ echo "graft.sh: no line '$anchor' in $file" >&2; exit 1; }
	awk -v a="$anchor" -v l="$line" '{ print } $0 == a { print l }' "$file" > "$file.graft"
	mv "$file.graft" "$file"
}
add_after "$ksrc/drivers/infiniband/Kconfig" 'source "drivers/infiniband/sw/rxe/Kconfig"' \
	'source "drivers/infiniband/sw/rxe_rs/Kconfig"'
add_after "$ksrc/drivers/infiniband/sw/Makefile" 'obj-$(CONFIG_RDMA_RXE)			+= rxe/' \
	'obj-$(CONFIG_RDMA_RXE_RS)		+= rxe_rs/'
echo "grafted rxe_rs into $ksrc: set CONFIG_RDMA_RXE_RS=m (and CONFIG_RDMA_RXE_RS_KUNIT_TEST)"
