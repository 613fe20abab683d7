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
mkdir -p "$dst/rust"
cp "$top/Kconfig" "$top/Kbuild" "$dst/"
# The driver's Rust files; the wire crate's host-only parts (cargo, fuzzing) stay behind.
(cd "$top/drivers/infiniband/sw/rxe_rs" &&
	find . -name '*.rs' -not -path './roce/fuzz/*' -not -path './roce/host.rs' -print0 |
	xargs -0 cp --parents -t "$dst")
cp "$top"/rust/*.rs "$top"/rust/*.c "$top"/rust/*.h "$top/rust/bindgen_parameters" "$dst/rust/"
# The selftests, where the kselftest build finds them (TARGETS=drivers/infiniband/rxe_rs).
tests=$ksrc/tools/testing/selftests/drivers/infiniband/rxe_rs
rm -rf "$tests"
mkdir -p "$tests"
find "$top/selftests" -maxdepth 1 -type f -exec cp -t "$tests" {} +

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
