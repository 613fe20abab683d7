#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: perftest bandwidth, message rate and latency on rdma_rxe and on rxe_rs, one
# boot of the test kernel each (back to back), server and client in the same guest on
# the one device. Prints a table with each figure for rxe, for rxe_rs and their ratio;
# the table is also in build/bench/report.txt, the raw outputs in build/bench/<driver>/
# and the guests' consoles in build/bench/<driver>.log. It reports; a failed test shows
# "failed" and the run goes on. Not part of make check.
#
#   BENCH_ITERS=SCALE    multiplies every iteration count (default 1; e.g. 0.01 to try it)
#   BENCH_TIMEOUT=SECS   limit of each perftest tool run (default 120)
#
# The guests run under QEMU TCG, so the figures compare the two drivers on the same
# (slow, emulated) machine, and only when nothing else loads the host.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

scale=${BENCH_ITERS:-1}
tool_timeout=${BENCH_TIMEOUT:-120}
[[ $scale =~ ^[0-9]*\.?[0-9]+$ ]] || die "BENCH_ITERS must be a number (a scale of the iteration counts), not '$scale'"
[[ $tool_timeout =~ ^[0-9]+$ ]] || die "BENCH_TIMEOUT must be a number of seconds, not '$tool_timeout'"

out=$TOP_DIR/build/bench
share=$TOP_DIR/build/share-bench

# iters BASE: BASE scaled by BENCH_ITERS, at least 5.
iters() { awk -v b="$1" -v s="$scale" 'BEGIN { n = int(b * s + 0.5); if (n < 5) n = 5; print n }'; }

# The tests, one a line: name, tool, message size, iterations, and the kind of figure
# (bw: BW average in MiB/s, rate: MsgRate in Mpps, lat: t_typical in usec).
tests="send_bw_4k ib_send_bw 4096 $(iters 2000) bw
send_bw_64k ib_send_bw 65536 $(iters 500) bw
write_bw_4k ib_write_bw 4096 $(iters 2000) bw
write_bw_64k ib_write_bw 65536 $(iters 500) bw
read_bw_4k ib_read_bw 4096 $(iters 2000) bw
read_bw_64k ib_read_bw 65536 $(iters 500) bw
atomic_bw ib_atomic_bw 8 $(iters 2000) rate
send_lat ib_send_lat 64 $(iters 1000) lat
write_lat ib_write_lat 64 $(iters 1000) lat
read_lat ib_read_lat 64 $(iters 1000) lat"
ntests=$(wc -l <<< "$tests")
# Each test takes at most the wait for its server (20 s) and the timeout; add the boot.
vm_timeout=$((ntests * (tool_timeout + 30) + 300))

rm -rf "$out"
mkdir -p "$out" "$share"
prepare_base
stage_start "module"
"$TOOLS_DIR/build-module.sh" test >/dev/null
cp "$TOP_DIR/build/test/rxe_rs.ko" "$share/"
stage_end

# The guest's payload (POSIX sh: the guest's sh is dash). Results go to
# /mnt/host/out-$DRV: NAME.server and NAME.client (the tools' output) and a line per test
# in status (name, server and client exit status, seconds).
guest_script() {
	local drv=$1 load
	if [ "$drv" = rxe ]; then load="modprobe rdma_rxe"; else load="insmod /mnt/host/rxe_rs.ko"; fi
	cat <<GUEST
DRV=$drv
TO=$tool_timeout
TESTS='$tests'
modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel
$load || exit 1
GUEST
	cat <<'GUEST'
DEV=bench0
OUT=/mnt/host/out-$DRV
PORT=18515
mkdir -p "$OUT"
: > "$OUT/status"
wait_for() { i=0; while ! "$@" >/dev/null 2>&1; do i=$((i + 1)); [ $i -gt 100 ] && return 1; sleep 0.2; done; }
port_active() { timeout 10 ibv_devinfo -d "$DEV" | grep -q 'state:.*PORT_ACTIVE'; }
gid_line() {
	timeout 10 ibv_devinfo -v -d "$DEV" |
		sed -n 's/.*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:10\.0\.2\.15, RoCE v2$/\1/p' | head -n 1
}
has_gid() { [ -n "$(gid_line)" ]; }
listening() { [ -n "$(ss -Htln "sport = :$PORT")" ]; }
now() { date +%s.%N; }

rdma link add "$DEV" type "$DRV" netdev eth0 || exit 1
wait_for port_active || { echo "bench: port not active"; exit 1; }
wait_for has_gid || { echo "bench: no RoCE v2 GID for 10.0.2.15"; timeout 10 ibv_devinfo -v -d "$DEV"; exit 1; }
idx=$(gid_line)
echo "bench: $DRV, device $DEV, GID index $idx, kernel $(uname -r)"
timeout 10 ib_send_bw --version 2>&1 | head -n 1 | sed 's/^/bench: perftest /'

echo "$TESTS" > /tmp/tests
while read -r name tool size iters kind; do
	case $kind in
	rate) cmd="$tool -d $DEV -x $idx -F -n $iters" ;;
	*) cmd="$tool -d $DEV -x $idx -F -s $size -n $iters" ;;
	esac
	echo "bench: $name: $cmd"
	t0=$(now)
	timeout "$TO" $cmd > "$OUT/$name.server" 2>&1 < /dev/null &
	spid=$!
	if wait_for listening; then
		timeout "$TO" $cmd 127.0.0.1 > "$OUT/$name.client" 2>&1 < /dev/null
		crc=$?
		[ $crc = 0 ] || kill "$spid" 2>/dev/null
	else
		echo "server not listening on $PORT" > "$OUT/$name.client"
		crc=1
		kill "$spid" 2>/dev/null
	fi
	wait "$spid"
	src=$?
	secs=$(echo "$t0 $(now)" | awk '{ printf "%.1f", $2 - $1 }')
	echo "$name $src $crc $secs" >> "$OUT/status"
	echo "bench: $name: server exit $src, client exit $crc, ${secs}s"
	echo "--- server"; cat "$OUT/$name.server"
	echo "--- client"; cat "$OUT/$name.client"
done < /tmp/tests
rdma link delete "$DEV"
sync
exit 0
GUEST
}

declare -A wall
for drv in rxe rxe_rs; do
	stage_start "perftest on $drv"
	guest_script "$drv" > "$share/bench-$drv.sh"
	rm -rf "${share:?}/out-$drv"
	t0=$(date +%s)
	rc=0
	"$TOOLS_DIR/vm-run.sh" --kernel test --share "$share" --timeout "$vm_timeout" \
		"$share/bench-$drv.sh" > "$out/$drv.log" 2>&1 || rc=$?
	wall[$drv]=$(($(date +%s) - t0))
	[ $rc = 0 ] || echo "guest run on $drv failed (exit $rc): see $out/$drv.log" >&2
	mkdir -p "$out/$drv"
	[ -d "$share/out-$drv" ] && cp -r "$share/out-$drv/." "$out/$drv/"
	echo "guest run on $drv: wall time ${wall[$drv]}s" >&2
	stage_end
done

# figure DRV NAME KIND: the number from the client's output, or "failed". perftest prints
# a header line that starts with #bytes, its columns named like "BW average[MiB/sec]"
# (names may contain blanks, each ends with "]" or is #bytes/#iterations), then a line of
# numbers.
figure() {
	local dir=$out/$1 name=$2 col v
	case $3 in
	bw) col='BW average[' ;;
	rate) col='MsgRate[' ;;
	lat) col='t_typical[' ;;
	esac
	# Both ends must have exited 0.
	if ! awk -v n="$name" '$1 == n && $2 == 0 && $3 == 0 { ok = 1 } END { exit !ok }' \
		"$dir/status" 2>/dev/null; then
		echo failed; return
	fi
	v=$({ tr -d '\r' < "$dir/$name.client"; } 2>/dev/null | awk -v col="$col" '
		/^ *#bytes/ {
			want = 0; n = 0; c = ""
			for (i = 1; i <= NF; i++) {
				c = c == "" ? $i : c " " $i
				if ($i ~ /^#/ || $i ~ /\]$/) {
					n++
					if (index(c, col) == 1) want = n
					c = ""
				}
			}
			next
		}
		want && $1 ~ /^[0-9]+$/ && NF >= want { print $want; exit }')
	if [[ $v =~ ^[0-9]+\.?[0-9]*$ ]]; then echo "$v"; else echo failed; fi
}

report() {
	printf 'perftest, rdma_rxe and rxe_rs, kernel %s under QEMU TCG, server and client in one guest\n' "$KVER"
	printf 'iterations scaled by BENCH_ITERS=%s; bandwidth: BW average, atomic: MsgRate, latency: t_typical\n' "$scale"
	printf 'speedup: rxe_rs/rxe for bandwidth and message rate, rxe/rxe_rs for latency (>1: rxe_rs is faster)\n\n'
	printf '%-14s %6s %6s %-7s %10s %10s %8s\n' test size iters unit rxe rxe_rs speedup
	local name tool size n kind unit a b s
	while read -r name tool size n kind; do
		case $kind in
		bw) unit=MiB/s ;;
		rate) unit=Mpps ;;
		lat) unit=usec ;;
		esac
		a=$(figure rxe "$name" "$kind")
		b=$(figure rxe_rs "$name" "$kind")
		s=-
		if [ "$a" != failed ] && [ "$b" != failed ]; then
			s=$(awk -v a="$a" -v b="$b" -v k="$kind" 'BEGIN {
				if (k == "lat") { x = a; y = b } else { x = b; y = a }
				if (y == 0) print "-"; else printf "%.2f", x / y }')
		fi
		printf '%-14s %6s %6s %-7s %10s %10s %8s\n' "$tool" "$size" "$n" "$unit" "$a" "$b" "$s"
	done <<< "$tests"
	printf '\nwall time of the guest runs (boot included): rxe %ss, rxe_rs %ss\n' \
		"${wall[rxe]}" "${wall[rxe_rs]}"
	printf 'raw outputs: %s/{rxe,rxe_rs}/, consoles: %s/{rxe,rxe_rs}.log\n' "$out" "$out"
}
report | tee "$out/report.txt"
