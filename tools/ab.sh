#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make ab: rxe_rs's speed at several commits, side by side in one guest. The module of
# each commit is built (in a git worktree under build/ab/, with this checkout's tools
# and kernel configuration fragments, so that they share the cached kernel), and one
# guest loads them in turn, round after round (the order reversed every other round,
# so that a drift of the machine spreads over all), running on one device's loopback:
#   READ latency   ib_read_lat -s 64, typical (us)
#   atomics        ib_atomic_bw (Mpps)
#   SEND 4 KiB     ib_send_bw -s 4096 (MiB/s)
# It prints every round's figures, then each module's median and its ratio to the
# first module's. One guest and interleaved rounds make differences of a few percent
# visible that separate bench.sh runs (run-to-run spread about 5%) hide.
#
#   tools/ab.sh [--rounds N] [--iters N] REV...
#   e.g. tools/ab.sh 4b61d89^ 4b61d89 HEAD
#        tools/ab.sh HEAD work           (work: this checkout, uncommitted changes too)
#
# With --count, the guest counts instead of timing: a QEMU plugin (qemu-tbcount.c) counts
# the guest kernel's instructions and translation blocks, and each workload runs twice
# (--iters and four times as many) so that one operation's counts come out exactly,
# whatever else the host is doing; tcg-count.py prints them per module and the functions
# whose counts differ most between the first module and the last. The plugin is built
# against the API header of the host's QEMU, taken from Debian's source of it (fetched
# once, cached).
#
#   tools/ab.sh --count [--iters N] REV...
#
# Not part of make check; nothing it prints is a pass or a fail.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

rounds=3 iters= count=
while [ $# -gt 0 ]; do
	case $1 in
	--count) count=1; shift ;;
	--rounds) rounds=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || die "usage: ab.sh [--count] [--rounds N] [--iters N] REV... (a commit, or work)"
iters=${iters:-$([ -n "$count" ] && echo 1000 || echo 20000)}
[[ $rounds =~ ^[1-9][0-9]?$ ]] || die "--rounds takes 1 to 99"
[[ $iters =~ ^[1-9][0-9]*$ ]] || die "--iters takes a whole number"

out=$TOP_DIR/build/ab
share=$TOP_DIR/build/share-ab
rm -rf "$share"
mkdir -p "$out" "$share"
prepare_base

names=()
for rev in "$@"; do
	if [ "$rev" = work ]; then
		name=work
		stage_start "module of this checkout"
		"$TOOLS_DIR/build-module.sh" test >/dev/null
		cp "$TOP_DIR/build/test/rxe_rs.ko" "$share/$name.ko"
		stage_end
	else
		sha=$(git -C "$TOP_DIR" rev-parse --short=12 --verify "$rev^{commit}") ||
			die "not a commit: $rev"
		name=$sha
		wt=$out/wt-$sha
		stage_start "module of $rev ($sha)"
		if [ ! -d "$wt" ]; then
			git -C "$TOP_DIR" worktree add --detach -f "$wt" "$sha" >/dev/null
		fi
		# This checkout's tools and kernel configuration fragments (the kernels'
		# cache keys), so that every module is built against the cached kernel.
		rm -rf "$wt/tools" "$wt/kernel/configs"
		cp -a "$TOOLS_DIR" "$wt/tools"
		mkdir -p "$wt/kernel"
		cp -a "$TOP_DIR/kernel/configs" "$wt/kernel/configs"
		"$wt/tools/build-module.sh" test > "$out/build-$sha.log" 2>&1 ||
			die "the module of $rev does not build (see $out/build-$sha.log)"
		cp "$wt/build/test/rxe_rs.ko" "$share/$name.ko"
		stage_end
	fi
	for n in "${names[@]}"; do
		[ "$n" != "$name" ] || die "$rev is named twice"
	done
	names+=("$name")
done


cat > "$out/cmd.sh" <<GUEST
MODS="${names[*]}"
ROUNDS=$rounds
ITERS=$iters
GUEST
cat >> "$out/cmd.sh" <<'GUEST'
modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel
wait_for() { i=0; while ! "$@" >/dev/null 2>&1; do i=$((i + 1)); [ $i -gt 100 ] && return 1; sleep 0.2; done; }
port_active() { timeout 10 ibv_devinfo -d ab0 | grep -q 'state:.*PORT_ACTIVE'; }
gid_line() {
	timeout 10 ibv_devinfo -v -d ab0 |
		sed -n 's/.*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:10.0.2.15, RoCE v2$/\1/p' | head -n 1
}
has_gid() { [ -n "$(gid_line)" ]; }
listening() { [ -n "$(ss -Htln 'sport = :18515')" ]; }
# one TOOL ARGS: one perftest run, server and client on the device; its output.
one() {
	timeout 600 "$@" -d ab0 -x "$idx" -F -p 18515 > /tmp/server.out 2>&1 &
	wait_for listening
	timeout 600 "$@" -d ab0 -x "$idx" -F -p 18515 127.0.0.1 > /tmp/client.out 2>&1
	wait
	cat /tmp/client.out
}
# load MODULE: the module loaded, its device up; idx is the RoCE v2 GID's index.
load() {
	insmod "/mnt/host/$1.ko" || { echo "ab: $1: insmod failed"; exit 1; }
	rdma link add ab0 type rxe_rs netdev eth0 || exit 1
	wait_for port_active && wait_for has_gid || { echo "ab: $1: no active port with a RoCE v2 GID"; exit 1; }
	idx=$(gid_line)
}
unload() { rdma link del ab0; rmmod rxe_rs; }
GUEST

if [ -n "$count" ]; then
	plugin=$(tbcount_plugin)
	cat >> "$out/cmd.sh" <<'GUEST'
# A snapshot of the counts: the plugin takes it once the file appears on the host (it
# looks every 20 ms) and removes the file.
k=0
snap() {
	touch /mnt/host/count-req
	i=0
	while [ -e /mnt/host/count-req ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
	k=$((k + 1))
}
for m in $MODS; do
	load "$m"
	cat /proc/kallsyms > "/mnt/host/kallsyms.$m"
	for w in "read_lat ib_read_lat -s 64" "atomic ib_atomic_bw" "send4K ib_send_bw -s 4096"; do
		set -- $w
		name=$1
		shift
		one "$@" -n 100 > /dev/null
		first=$k
		snap
		one "$@" -n "$ITERS" > /dev/null
		snap
		one "$@" -n $((ITERS * 4)) > /dev/null
		snap
		echo "COUNT $m $name $first $ITERS $((ITERS * 4))"
	done
	unload
done
GUEST
	rm -f "$share"/count.* "$share"/count-req "$share"/kallsyms.*
	stage_start "guest: counting ${names[*]} ($iters and $((iters * 4)) iterations)"
	"$TOOLS_DIR/vm-run.sh" --kernel test --share "$share" --timeout 3000 \
		--plugin "$plugin,req=$share/count-req,out=$share/count" "$out/cmd.sh" \
		> "$out/console.log" 2>&1 || echo "the guest run failed (see $out/console.log)"
	stage_end
	python3 "$TOOLS_DIR/tcg-count.py" "$share" "$out/console.log"
	exit
fi

cat >> "$out/cmd.sh" <<'GUEST'
REV=$(echo $MODS | tr ' ' '\n' | tac | tr '\n' ' ')
r=1
while [ $r -le $ROUNDS ]; do
	if [ $((r % 2)) = 1 ]; then list=$MODS; else list=$REV; fi
	for m in $list; do
		load "$m"
		lat=$(one ib_read_lat -s 64 -n "$ITERS" | awk '$1 == 64 { print $5 }')
		atomic=$(one ib_atomic_bw -n "$ITERS" | awk '$1 == 8 { print $5 }')
		send=$(one ib_send_bw -s 4096 -n "$ITERS" | awk '$1 == 4096 { print $4 }')
		echo "AB $m $r ${lat:--} ${atomic:--} ${send:--}"
		unload
	done
	r=$((r + 1))
done
GUEST

stage_start "guest: ${names[*]}, $rounds round(s) of $iters iterations"
"$TOOLS_DIR/vm-run.sh" --kernel test --share "$share" --timeout 3000 --idle 600 "$out/cmd.sh" \
	> "$out/console.log" 2>&1 || echo "the guest run failed (see $out/console.log)"
stage_end
tr -d '\r' < "$out/console.log" | grep '^AB ' > "$out/rounds.txt" || true
[ -s "$out/rounds.txt" ] || die "no figures (see $out/console.log)"
echo "module round  READ-lat-us  atomic-Mpps  send4K-MiB/s"
sed 's/^AB //' "$out/rounds.txt" | sort -s -k1,1 | awk '{ printf "%-12s %5s %12s %12s %13s\n", $1, $2, $3, $4, $5 }'
echo
echo "median of each (ratio to ${names[0]}; latency: lower is better)"
awk -v order="${names[*]}" '
function median(list,    a, n, i, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) { t = a[i]; j = i - 1; while (j > 0 && a[j] + 0 > t + 0) { a[j + 1] = a[j]; j-- } a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
# AB MODULE ROUND LATENCY ATOMICS SEND
$4 != "-" { lat[$2] = lat[$2] " " $4 } $5 != "-" { at[$2] = at[$2] " " $5 } $6 != "-" { snd[$2] = snd[$2] " " $6 }
END {
	n = split(order, o, " ")
	for (k = 1; k <= n; k++) {
		m = o[k]; L = median(lat[m]); A = median(at[m]); S = median(snd[m])
		if (k == 1) { L0 = L; A0 = A; S0 = S }
		printf "%-12s %8.2f (%.3f) %9.4f (%.3f) %8.2f (%.3f)\n", m, L, L0 ? L / L0 : 0, A, A0 ? A / A0 : 0, S, S0 ? S / S0 : 0
	}
}' "$out/rounds.txt"
