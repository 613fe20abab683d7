#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build one of the two test kernels from the tree's linux-source:
#   tools/build-kernel.sh test    GCC, Rust, RDMA, rxe and siw as modules
#   tools/build-kernel.sh debug   the same plus KASAN, kmemleak, lockdep, debugobjects,
#                                 failslab; built with LLVM=1
# The result (bzImage, .config, modules installed under mod/, and the build tree that
# out-of-tree modules build against) is cached under $RXE_RS_CACHE, keyed by the kernel
# version, the fragments, the toolchain tree and the recipe version (tools/lib.sh). Prints the build dir.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavor=${1:?usage: build-kernel.sh test|debug}
frags=("$TOP_DIR/kernel/configs/rxe_rs-test.config")
llvm=
case $flavor in
test) ;;
debug)
	frags+=("$TOP_DIR/kernel/configs/rxe_rs-debug.config")
	llvm=1
	;;
*) die "unknown kernel flavor $flavor" ;;
esac

kernel_dir() {
	local key
	key=$(printf '%s %s %s %s\n' "$KVER" "$flavor" "$(rootfs_key)" "$KERNEL_RECIPE" |
		cache_key - "${frags[@]}")
	printf '%s/kernel-%s-%s\n' "$RXE_RS_CACHE" "$flavor" "$key"
}

out=$(kernel_dir)
# One build per flavor at a time; a second caller waits for the first one's result.
mkdir -p "$RXE_RS_CACHE"
exec 9>"$RXE_RS_CACHE/kernel-$flavor.lock"
flock 9
if [ -f "$out/.complete" ]; then
	echo "$out"
	exit 0
fi

stage_start "$flavor kernel $KVER (20 to 50 minutes at -j2 on a cold cache, the debug one the longer)"
name=$(basename "$out")
rm -rf "$out"
mkdir -p "$out"
# Paths as seen inside the toolchain tree.
src=/usr/src/linux-source-$KSERIES
obj=/cache/$name
inner_frags=()
for f in "${frags[@]}"; do
	inner_frags+=("/src/${f#"$TOP_DIR"/}")
done

in_rootfs /bin/sh -ec '
	src=$1; obj=$2; llvm=$3; jobs=$4; shift 4
	mk() { make -C "$src" O="$obj" ${llvm:+LLVM=1} "$@"; }
	mk -s x86_64_defconfig
	cd "$obj"
	"$src"/scripts/kconfig/merge_config.sh -m -O "$obj" "$obj/.config" \
		"$src/kernel/configs/kvm_guest.config" "$@" >/dev/null
	mk -s olddefconfig
	# Kconfig drops what it cannot satisfy without a word: check every line asked for.
	missing=0
	for f in "$@"; do
		for want in $(grep -E "^CONFIG_[A-Za-z0-9_]+=" "$f"); do
			if ! grep -qxF -- "$want" .config; then
				echo "missing from the final .config: $want (asked by $f)" >&2
				missing=1
			fi
		done
	done
	[ $missing = 0 ] || exit 1
	mk -s rustavailable
	mk -s -j"$jobs" bzImage modules
	mk -s INSTALL_MOD_PATH="$obj/mod" INSTALL_MOD_STRIP=1 modules_install
' build "$src" "$obj" "$llvm" "$(nproc)" "${inner_frags[@]}" >&2

touch "$out/.complete"
for old in "$RXE_RS_CACHE"/kernel-"$flavor"-*; do
	[ "$old" = "$out" ] || rm -rf "$old" 2>/dev/null ||
		echo "note: cannot remove $old" >&2
done
stage_end
echo "$out"
