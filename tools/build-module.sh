#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build rxe_rs.ko against one of the cached test kernels, inside the toolchain tree.
#   tools/build-module.sh test|debug [make arguments, e.g. CLIPPY=1]
# The objects go to build/<flavor>/ in the checkout; prints the path of the .ko.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavor=${1:?usage: build-module.sh test|debug [make args]}
shift
kdir=$("$TOOLS_DIR/build-kernel.sh" "$flavor")
llvm=()
[ "$flavor" = debug ] && llvm=(LLVM=1 "${DEBUG_LINES[@]}")
mkdir -p "$TOP_DIR/build/$flavor"
in_rootfs make -C "/cache/$(basename "$kdir")" M=/src MO="/src/build/$flavor" "${llvm[@]}" "$@" >&2
echo "$TOP_DIR/build/$flavor/rxe_rs.ko"
