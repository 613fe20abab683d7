#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build one of the two test kernels from the tree's linux-source:
#   tools/build-kernel.sh test    GCC, Rust, RDMA, rxe and siw as modules
#   tools/build-kernel.sh debug   the same plus KASAN, kmemleak, lockdep, debugobjects,
#                                 failslab; built with LLVM=1
# Both start from allnoconfig, not from a distribution's defconfig: the fragments in
# kernel/configs/ name what the guests and the tests use, and nothing else is built.
# The result (bzImage, .config, modules installed under mod/, and the build tree that
# out-of-tree modules build against) is cached under $RXE_RS_CACHE, keyed by the kernel
# version, the fragments, the toolchain tree and the recipe version (tools/lib.sh). Prints the build dir.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavor=${1:?usage: build-kernel.sh test|debug}
frags=("$TOP_DIR/kernel/configs/rxe_rs-base.config" "$TOP_DIR/kernel/configs/rxe_rs-test.config")
llvm=
# The cache directory's name: the flavor, and which debug kernel.
name=$flavor
case $flavor in
test) ;;
debug)
	frags+=("$TOP_DIR/kernel/configs/rxe_rs-debug.config")
	llvm=1
	# make check's debug kernel runs the debug shard, which needs none of the storage and
	# file-system consumers: they are a quarter of its build. make check-full's
	# (RXE_RS_DEBUG_KERNEL=full) has them.
	case ${RXE_RS_DEBUG_KERNEL:-shard} in
	shard) frags+=("$TOP_DIR/kernel/configs/rxe_rs-debug-shard.config") ;;
	full) name=debug-full ;;
	*) die "RXE_RS_DEBUG_KERNEL is shard or full, not $RXE_RS_DEBUG_KERNEL" ;;
	esac
	;;
*) die "unknown kernel flavor $flavor" ;;
esac

kernel_dir() {
	local key
	key=$(printf '%s %s %s %s\n' "$KVER" "$flavor" "$(rootfs_key)" "$KERNEL_RECIPE" |
		cache_key - "${frags[@]}")
	printf '%s/kernel-%s-%s\n' "$RXE_RS_CACHE" "$name" "$key"
}

out=$(kernel_dir)
# One build per kernel at a time; a second caller waits for the first one's result.
mkdir -p "$RXE_RS_CACHE"
exec 9>"$RXE_RS_CACHE/kernel-$name.lock"
flock 9
if [ -f "$out/.complete" ]; then
	echo "$out"
	exit 0
fi

stage_start "$flavor kernel $KVER (20 to 50 minutes at -j2 on a cold cache, the debug one the longer)"
dir=$(basename "$out")
rm -rf "$out"
mkdir -p "$out"
# Paths as seen inside the toolchain tree.
src=/usr/src/linux-source-$KSERIES
obj=/cache/$dir
inner_frags=()
for f in "${frags[@]}"; do
	inner_frags+=("/src/${f#"$TOP_DIR"/}")
done

# The object count of the last build of this flavor (2400 before there is one): what
# the progress line counts towards.
objects_file=$RXE_RS_CACHE/kernel-$name.objects
total=$(cat "$objects_file" 2>/dev/null || true)
[[ $total =~ ^[1-9][0-9]*$ ]] || total=2400

# progress: reads kbuild's quiet output ("  TAG     target", a line a step) and counts
# what it compiles (CC, AS, RUSTC) against `total`, on one line refreshed in place on a
# terminal, or a line a minute in a log; the other steps' lines are not shown, anything
# else goes on as it is.
progress() {
	local line n=0 last=$SECONDS shown=0
	while IFS= read -r line; do
		case $line in
		"  CC "* | "  AS "* | "  RUSTC "*) n=$((n + 1)) ;;
		"  "[A-Z]*) continue ;;
		*)
			# On a terminal, over the progress line.
			[ ! -t 1 ] || printf '\r\033[K'
			printf '%s\n' "$line"
			continue
			;;
		esac
		if [ -t 1 ]; then
			((n - shown < 10)) && continue
			printf '\r  %s kernel: %d of about %d objects (%d%%) ' "$flavor" "$n" "$total" \
				$((n * 100 / total))
			shown=$n
		elif ((SECONDS - last >= 60)); then
			printf '  %s kernel: %d of about %d objects (%d%%), %d min\n' "$flavor" "$n" \
				"$total" $((n * 100 / total)) $((SECONDS / 60))
			last=$SECONDS
		fi
	done
	[ ! -t 1 ] || printf '\r\033[K'
	printf '  %s kernel: %d objects compiled\n' "$flavor" "$n"
}

in_rootfs /bin/sh -ec '
	src=$1; obj=$2; llvm=$3; jobs=$4; shift 4
	mk() { make -C "$src" O="$obj" ${llvm:+LLVM=1} "$@"; }
	mk -s allnoconfig
	cd "$obj"
	"$src"/scripts/kconfig/merge_config.sh -m -O "$obj" "$obj/.config" \
		"$src/kernel/configs/kvm_guest.config" "$@" >/dev/null
	mk -s olddefconfig
	# Kconfig drops what it cannot satisfy without a word: check every line asked for,
	# as the last fragment that names the option asks for it.
	awk '"'"'
		FILENAME == ".config" {
			have[$0] = 1
			if (match($0, /^CONFIG_[A-Za-z0-9_]+=/)) set[substr($0, 1, RLENGTH - 1)] = 1
			next
		}
		/^CONFIG_[A-Za-z0-9_]+=/ { o = $0; sub(/=.*/, "", o); want[o] = $0; from[o] = FILENAME }
		/^# CONFIG_[A-Za-z0-9_]+ is not set$/ { want[$2] = ""; from[$2] = FILENAME }
		END {
			for (o in want)
				if ((want[o] != "" && !(want[o] in have)) || (want[o] == "" && (o in set))) {
					print "the final .config does not have " \
						(want[o] == "" ? o " unset" : want[o]) " (asked by " from[o] ")" > "/dev/stderr"
					bad = 1
				}
			exit bad
		}'"'"' "$@" .config
	mk -s rustavailable >&2
	# Quiet (not silent) output: a line per object for the progress line.
	mk -j"$jobs" bzImage modules
	mk -s INSTALL_MOD_PATH="$obj/mod" INSTALL_MOD_STRIP=1 modules_install >&2
' build "$src" "$obj" "$llvm" "$(nproc)" "${inner_frags[@]}" | progress >&2

find "$out" -name '*.o' | wc -l > "$objects_file"
touch "$out/.complete"
for old in "$RXE_RS_CACHE"/kernel-"$name"-????????????????; do
	[ "$old" = "$out" ] || rm -rf "$old" 2>/dev/null ||
		echo "note: cannot remove $old" >&2
done
stage_end
echo "$out"
