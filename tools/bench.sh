#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make bench: perftest bandwidth, message rate and latency on rdma_rxe and on rxe_rs, in
# two placements, the drivers booted in turn (rxe, rxe_rs, rxe, ...: BENCH_ROUNDS boots
# of each) on the test kernel, with each vCPU a host thread of its own (TCG
# thread=multi), so that the host's cores run the guest's CPUs at once, as a real
# machine's do:
#  - one: server and client in one guest, on the one device (its loopback queue);
#  - two: server and client in two guests, each with its own device on a second NIC,
#    the frames going between the guests as UDP datagrams over the host's 127.0.0.1
#    (vm-run.sh --link), so the packets cross both drivers' transmit and receive paths.
# Prints a table per placement with each figure for rxe, for rxe_rs and their ratio; the
# tables are also in build/bench/report.txt, the raw outputs in
# build/bench/<placement>-<driver>/round-<R>/ with the guests' consoles (guest*.log). It
# reports; a failed test shows "failed" and the run goes on. Not part of make check.
#
#   BENCH_ITERS=SCALE    multiplies every iteration count (default 1; e.g. 0.01 to try it)
#   BENCH_ROUNDS=N       boots of each driver, alternating (default 5)
#   BENCH_REPEAT=N       runs of each test in each boot (default 1); the table shows the
#                        median of all runs of all rounds, with the lowest and highest
#   BENCH_TCG=multi|single  a host thread per vCPU (default), or one for both, where the
#                        vCPUs take turns (what every figure before issue 30 measured)
#   BENCH_TIMEOUT=SECS   limit of each perftest tool run (default 120)
#   BENCH_PLACEMENTS="one two"   which placements to run (default both)
#   BENCH_DRIVERS="rxe rxe_rs"   which drivers to run (default both; the other's
#                        figures show "failed")
#   BENCH_ONLY=REGEX     only the tests whose name matches (e.g. 'read_bw')
#   RXE_RS_LINK_PORT=PORT  where the search for the guests' link's two free UDP ports
#                        on 127.0.0.1 starts (default 47021)
#
# The guests run under QEMU TCG, so the figures compare the two drivers on the same
# (slow, emulated) machine, and only when nothing else loads the host: with
# thread=multi, a guest's two vCPUs take both of a 2-core host's cores.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

scale=${BENCH_ITERS:-1}
tool_timeout=${BENCH_TIMEOUT:-120}
placements=${BENCH_PLACEMENTS:-one two}
drivers=${BENCH_DRIVERS:-rxe rxe_rs}
rounds=${BENCH_ROUNDS:-5}
repeat=${BENCH_REPEAT:-1}
tcg=${BENCH_TCG:-multi}
read -r port_a port_b < <(link_ports "${RXE_RS_LINK_PORT:-47021}")
[[ $scale =~ ^[0-9]*\.?[0-9]+$ ]] || die "BENCH_ITERS must be a number (a scale of the iteration counts), not '$scale'"
[[ $tool_timeout =~ ^[0-9]+$ ]] || die "BENCH_TIMEOUT must be a number of seconds, not '$tool_timeout'"
[[ $repeat =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT must be a number of runs, not '$repeat'"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "BENCH_ROUNDS must be a number of boots, not '$rounds'"
[[ $tcg = multi || $tcg = single ]] || die "BENCH_TCG is multi or single, not '$tcg'"
export RXE_RS_TCG_THREAD=$tcg
for p in $placements; do
	[[ $p = one || $p = two ]] || die "BENCH_PLACEMENTS takes one and two, not '$p'"
done
for d in $drivers; do
	[[ $d = rxe || $d = rxe_rs ]] || die "BENCH_DRIVERS takes rxe and rxe_rs, not '$d'"
done

out=$TOP_DIR/build/bench
share=$TOP_DIR/build/share-bench

# iters BASE: BASE scaled by BENCH_ITERS, at least 5.
iters() { awk -v b="$1" -v s="$scale" 'BEGIN { n = int(b * s + 0.5); if (n < 5) n = 5; print n }'; }

# The tests, one a line: name, tool, message size ("-": the tool's own), iterations (of
# each QP), the kind of figure (bw: BW average in MiB/s, rate: MsgRate in Mpps, lat:
# t_typical in usec), and the tool's other arguments: QPs (-q; their iterations add up
# to about those of the one-QP test of that size), the transport (-c UD), outstanding
# READs and atomics (-o).
tests="send_bw_4k ib_send_bw 4096 $(iters 2000) bw
send_bw_64k ib_send_bw 65536 $(iters 500) bw
write_bw_4k ib_write_bw 4096 $(iters 2000) bw
write_bw_64k ib_write_bw 65536 $(iters 500) bw
read_bw_4k ib_read_bw 4096 $(iters 2000) bw
read_bw_64k ib_read_bw 65536 $(iters 500) bw
atomic_bw ib_atomic_bw - $(iters 2000) rate
send_lat ib_send_lat 64 $(iters 1000) lat
write_lat ib_write_lat 64 $(iters 1000) lat
read_lat ib_read_lat 64 $(iters 1000) lat
send_rate_64 ib_send_bw 64 $(iters 5000) rate
write_rate_64 ib_write_bw 64 $(iters 5000) rate
send_bw_4k_q8 ib_send_bw 4096 $(iters 250) bw -q 8
send_bw_4k_q32 ib_send_bw 4096 $(iters 63) bw -q 32
send_bw_64k_q8 ib_send_bw 65536 $(iters 63) bw -q 8
send_bw_64k_q32 ib_send_bw 65536 $(iters 16) bw -q 32
write_bw_4k_q8 ib_write_bw 4096 $(iters 250) bw -q 8
write_bw_4k_q32 ib_write_bw 4096 $(iters 63) bw -q 32
write_bw_64k_q8 ib_write_bw 65536 $(iters 63) bw -q 8
write_bw_64k_q32 ib_write_bw 65536 $(iters 16) bw -q 32
ud_send_bw ib_send_bw 1024 $(iters 2000) bw -c UD
read_bw_4k_o16 ib_read_bw 4096 $(iters 2000) bw -o 16
atomic_bw_o16 ib_atomic_bw - $(iters 2000) rate -o 16"
if [ -n "${BENCH_ONLY:-}" ]; then
	tests=$(awk -v re="$BENCH_ONLY" '$1 ~ re' <<< "$tests")
	[ -n "$tests" ] || die "BENCH_ONLY='$BENCH_ONLY' matches no test"
fi
ntests=$(wc -l <<< "$tests")
# Each run takes at most the wait for its server (30 s) and the timeout; add the boot.
vm_timeout=$((ntests * repeat * (tool_timeout + 40) + 300))

rm -rf "$out"
mkdir -p "$out" "$share"
prepare_base
stage_start "module"
"$TOOLS_DIR/build-module.sh" test >/dev/null
cp "$TOP_DIR/build/test/rxe_rs.ko" "$share/"
stage_end

# The guest's payload (POSIX sh: the guest's sh is dash) for driver DRV in role ROLE:
# "one" runs server and client of every test on its one device; "server" and "client"
# are the two guests of the two-guest placement, on eth1 (server 192.168.77.1, client
# .2), running the tests in the same order, the client retrying each until the server
# listens. Each test runs REPEAT times in a row, run K named NAME.K. Results go to
# /mnt/host/out-$DRV-$ROLE: NAME.K.server and/or NAME.K.client (the tools' output) and a
# line per run in status (NAME.K, server and client exit status, "-" for the side this
# guest does not run, seconds).
guest_script() {
	local drv=$1 role=$2 load
	if [ "$drv" = rxe ]; then load="modprobe rdma_rxe"; else load="insmod /mnt/host/rxe_rs.ko"; fi
	cat <<GUEST
DRV=$drv
ROLE=$role
TO=$tool_timeout
REPEAT=$repeat
TESTS='$tests'
modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel
$load || exit 1
GUEST
	cat <<'GUEST'
DEV=bench0
OUT=/mnt/host/out-$DRV-$ROLE
mkdir -p "$OUT"
: > "$OUT/status"
wait_for() { i=0; while ! "$@" >/dev/null 2>&1; do i=$((i + 1)); [ $i -gt 100 ] && return 1; sleep 0.2; done; }
port_active() { timeout 10 ibv_devinfo -d "$DEV" | grep -q 'state:.*PORT_ACTIVE'; }
gid_line() {
	timeout 10 ibv_devinfo -v -d "$DEV" |
		sed -n "s/.*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:$ME, RoCE v2\$/\1/p" | head -n 1
}
has_gid() { [ -n "$(gid_line)" ]; }
listening() { [ -n "$(ss -Htln "sport = :$PORT")" ]; }
now() { date +%s.%N; }

case $ROLE in
one) NDEV=eth0 ME=10.0.2.15 SERVER=127.0.0.1 ;;
server) NDEV=eth1 ME=192.168.77.1 PEER=192.168.77.2 ;;
client) NDEV=eth1 ME=192.168.77.2 PEER=192.168.77.1 SERVER=192.168.77.1 ;;
esac
if [ "$ROLE" != one ]; then
	ip link set eth1 up
	ip addr add "$ME/24" dev eth1
fi
rdma link add "$DEV" type "$DRV" netdev "$NDEV" || exit 1
wait_for port_active || { echo "bench: port not active"; exit 1; }
wait_for has_gid || { echo "bench: no RoCE v2 GID for $ME"; timeout 10 ibv_devinfo -v -d "$DEV"; exit 1; }
idx=$(gid_line)
if [ "$ROLE" != one ]; then
	# The peer must answer on the link before the first test.
	python3 /mnt/host/peer_up.py "$PEER" 600 || { echo "bench: $PEER does not answer on eth1"; exit 1; }
fi
echo "bench: $DRV ($ROLE), device $DEV on $NDEV, GID index $idx, kernel $(uname -r)"
timeout 10 ib_send_bw --version 2>&1 | head -n 1 | sed 's/^/bench: perftest /'

# client NAME CMD: the client side, retried while nothing listens yet. Each run has a
# port of its own, so a client never reaches the server of another run; it waits for
# its server as long as a server's run can last (and 30 s), so that the side that fell
# behind (a run hung until its timeout on one side only) is waited for. A server that
# never listened in all that time (its last tool stuck in the kernel, as a driver's
# hung destroy leaves it) fails the rest of the runs at once.
client() {
	if [ -f /tmp/server-gone ]; then
		echo "not run: the server did not listen for an earlier run" > "$OUT/$1.client"
		return 1
	fi
	t=$(date +%s)
	while :; do
		timeout "$TO" $2 "$SERVER" > "$OUT/$1.client" 2>&1 < /dev/null
		rc=$?
		[ $rc = 0 ] && return 0
		grep -q "Couldn't connect" "$OUT/$1.client" || return $rc
		if [ $(($(date +%s) - t)) -gt $((TO + 30)) ]; then
			: > /tmp/server-gone
			return $rc
		fi
		sleep 0.5
	done
}

echo "$TESTS" | while read -r test tool size iters kind args; do
	for k in $(seq "$REPEAT"); do echo "$test.$k $tool $size $iters $kind $args"; done
done > /tmp/tests
run=0
while read -r name tool size iters kind args; do
	PORT=$((18515 + run))
	run=$((run + 1))
	cmd="$tool -d $DEV -x $idx -F -p $PORT -n $iters $args"
	[ "$size" = - ] || cmd="$cmd -s $size"
	echo "bench: $name: $cmd"
	t0=$(now)
	grep '^cpu[0-9]' /proc/stat > /tmp/cpu0
	src=- crc=-
	case $ROLE in
	one)
		timeout "$TO" $cmd > "$OUT/$name.server" 2>&1 < /dev/null &
		spid=$!
		if wait_for listening; then
			client "$name" "$cmd"
			crc=$?
			[ $crc = 0 ] || kill "$spid" 2>/dev/null
		else
			echo "server not listening on $PORT" > "$OUT/$name.client"
			crc=1
			kill "$spid" 2>/dev/null
		fi
		wait "$spid"
		src=$?
		;;
	server)
		timeout "$TO" $cmd > "$OUT/$name.server" 2>&1 < /dev/null
		src=$?
		;;
	client)
		client "$name" "$cmd"
		crc=$?
		;;
	esac
	secs=$(echo "$t0 $(now)" | awk '{ printf "%.1f", $2 - $1 }')
	echo "$name $src $crc $secs" >> "$OUT/status"
	echo "bench: $name: server exit $src, client exit $crc, ${secs}s"
	for f in server client; do
		[ -f "$OUT/$name.$f" ] && { echo "--- $f"; cat "$OUT/$name.$f"; }
	done
	# Where each vCPU's time went during the run, in percent: which side was
	# saturated, and in what context.
	grep '^cpu[0-9]' /proc/stat > /tmp/cpu1
	echo "--- cpu during $name"
	awk 'FNR == NR { for (i = 2; i <= 9; i++) a[$1, i] = $i; next }
		{
			n = 0; for (i = 2; i <= 9; i++) { d[i] = $i - a[$1, i]; n += d[i] }
			if (n == 0) n = 1
			printf "%s: user %.0f%%, system %.0f%%, irq %.0f%%, softirq %.0f%%, idle %.0f%%\n",
				$1, 100 * (d[2] + d[3]) / n, 100 * d[4] / n, 100 * d[7] / n,
				100 * d[8] / n, 100 * (d[5] + d[6]) / n
		}' /tmp/cpu0 /tmp/cpu1
	# The guest's CPU time in the run, in ticks of USER_HZ (100 a second), summed over
	# its vCPUs: user (with nice), system, softirq, irq: what the cost per GiB or per
	# million messages is made of.
	awk 'FNR == NR { for (i = 2; i <= 9; i++) a[$1, i] = $i; next }
		{ for (i = 2; i <= 9; i++) d[i] += $i - a[$1, i] }
		END { print d[2] + d[3], d[4], d[8], d[7] }' /tmp/cpu0 /tmp/cpu1 > "$OUT/$name.cpu.$ROLE"
	# The device's counters so far (retransmissions, NAKs, drops), for the reader.
	echo "--- counters after $name"; rdma statistic show link "$DEV/1"
done < /tmp/tests
rdma link delete "$DEV"
sync
exit 0
GUEST
}

# run_guests PLACEMENT DRV ROUND: boots the guest(s) of one placement for one driver and
# puts their results in $out/PLACEMENT-DRV/round-ROUND/ (status merged from both guests
# for "two").
run_guests() {
	local pl=$1 drv=$2 dir=$out/$1-$2/round-$3 rc=0 t0 side pids=()
	mkdir -p "$dir"
	t0=$(date +%s)
	if [ "$pl" = one ]; then
		guest_script "$drv" one > "$share/bench-$drv-one.sh"
		rm -rf "${share:?}/out-$drv-one"
		"$TOOLS_DIR/vm-run.sh" --kernel test --share "$share" --timeout "$vm_timeout" \
			"$share/bench-$drv-one.sh" > "$dir/guest.log" 2>&1 || rc=$?
		[ -d "$share/out-$drv-one" ] && cp -r "$share/out-$drv-one/." "$dir/"
	else
		for side in server client; do
			local sh=$out/share-$side link
			mkdir -p "$sh"
			cp "$share/rxe_rs.ko" "$TOP_DIR/selftests/peer_up.py" "$sh/"
			guest_script "$drv" $side > "$sh/bench.sh"
			rm -rf "${sh:?}/out-$drv-$side"
			if [ $side = server ]; then
				link="$port_a:$port_b:52:54:00:77:01:01"
			else
				link="$port_b:$port_a:52:54:00:77:01:02"
			fi
			"$TOOLS_DIR/vm-run.sh" --kernel test --share "$sh" --timeout "$vm_timeout" \
				--link "$link" "$sh/bench.sh" > "$dir/guest-$side.log" 2>&1 &
			pids+=($!)
		done
		# The client's guest ends when its runs are done; the server's may be stuck in
		# a tool the driver left hanging: it gets the time of one run more.
		wait "${pids[1]}" || rc=$?
		local waited=0
		while kill -0 "${pids[0]}" 2>/dev/null && [ $waited -lt $((tool_timeout + 30)) ]; do
			sleep 1
			waited=$((waited + 1))
		done
		if kill -0 "${pids[0]}" 2>/dev/null; then
			echo "bench: the server's guest ($drv) did not end after the client's; stopped" >&2
			pkill -f -- "path=$out/share-server," 2>/dev/null || true
		fi
		wait "${pids[0]}" || rc=$?
		for side in server client; do
			[ -d "$out/share-$side/out-$drv-$side" ] &&
				cp -r "$out/share-$side/out-$drv-$side/." "$dir/"
		done
		# status: the server's exit status from the server's guest, the client's from
		# the client's.
		awk 'FNR == NR { s[$1] = $2; next } { print $1, ($1 in s ? s[$1] : "-"), $3, $4 }' \
			"$out/share-server/out-$drv-server/status" \
			"$out/share-client/out-$drv-client/status" > "$dir/status" 2>/dev/null || true
	fi
	t0=$(($(date +%s) - t0))
	wall[$pl-$drv]=$((${wall[$pl-$drv]:-0} + t0))
	[ $rc = 0 ] || echo "guest run ($pl, $drv, round $3) failed (exit $rc): see $dir/guest*.log" >&2
	echo "guest run ($pl, $drv, round $3): wall time ${t0}s" >&2
}

declare -A wall
for pl in $placements; do
	for round in $(seq "$rounds"); do
		for drv in $drivers; do
			stage_start "perftest on $drv, placement $pl, round $round of $rounds"
			run_guests "$pl" "$drv" "$round"
			stage_end
		done
	done
done

# run_figure DIR RUN KIND: the number from the client's output of one run, or "failed".
# perftest prints a header line that starts with #bytes, its columns named like
# "BW average[MiB/sec]" (names may contain blanks, each ends with "]" or is
# #bytes/#iterations), then a line of numbers.
run_figure() {
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

# stats: "MEDIAN MIN MAX N" of the N numbers on standard input, one a line (N > 0).
stats() {
	sort -g | awk '{ a[NR] = $1 }
		END {
			m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
			print m, a[1], a[NR], NR
		}'
}

# figure DIR NAME KIND: "MEDIAN MIN MAX K" of the test's runs in every round that gave a
# figure (K of them), or "failed" when none did.
figure() {
	local r k v vals=()
	for r in $(seq "$rounds"); do
		for k in $(seq "$repeat"); do
			v=$(run_figure "$1/round-$r" "$2.$k" "$3")
			[ "$v" = failed ] || vals+=("$v")
		done
	done
	[ ${#vals[@]} = 0 ] && { echo failed; return; }
	printf '%s\n' "${vals[@]}" | stats
}

# cost DIR NAME KIND SIZE MESSAGES: the median over the runs that gave a figure of the
# guests' CPU seconds (user, system, softirq and irq, both guests in placement two) per
# GiB moved (bandwidth: MESSAGES of SIZE bytes) or per million messages (message rate
# and latency), or "-": the work each figure took, the tool's setup and teardown
# included, as the guests' own accounting counts it. Under TCG the guest's clock runs
# with the host's: with more busy vCPUs than host cores (two guests of two), time a
# vCPU waited for a host core counts too.
cost() {
	local r k f ticks vals=()
	for r in $(seq "$rounds"); do
		for k in $(seq "$repeat"); do
			[ "$(run_figure "$1/round-$r" "$2.$k" "$3")" = failed ] && continue
			ticks=0
			for f in "$out/$1/round-$r/$2.$k".cpu.*; do
				[ -s "$f" ] || continue
				ticks=$((ticks + $(awk '{ print $1 + $2 + $3 + $4 }' "$f")))
			done
			vals+=("$(awk -v t="$ticks" -v k="$3" -v s="$4" -v n="$5" 'BEGIN {
				if (k == "bw") printf "%.3f\n", t / 100 / (s * n / 1073741824)
				else printf "%.3f\n", t / 100 / (n / 1e6) }')")
		done
	done
	[ ${#vals[@]} = 0 ] && { echo -; return; }
	printf '%s\n' "${vals[@]}" | stats | awk '{ print $1 }'
}

# shown FIGURE: a figure as the table shows it, "MEDIAN [MIN-MAX]", with "(K/N)" when only
# K of the N runs gave one.
shown() {
	[ "$1" = failed ] && { echo failed; return; }
	local m lo hi k n=$((rounds * repeat))
	read -r m lo hi k <<< "$1"
	printf '%s [%s-%s]' "$m" "$lo" "$hi"
	[ "$k" = "$n" ] || printf '(%s/%s)' "$k" "$n"
	echo
}

report() {
	local pl=$1 where vcpus
	case $pl in
	one) where="server and client in one guest, on one device" ;;
	two) where="server and client in two guests, linked over 127.0.0.1" ;;
	esac
	case $tcg in
	multi) vcpus="each vCPU a host thread of its own (TCG thread=multi): the vCPUs run at once" ;;
	single) vcpus="both vCPUs on one host thread (TCG thread=single): they take turns" ;;
	esac
	printf 'perftest, rdma_rxe and rxe_rs, kernel %s under QEMU TCG, %s\n' "$KVER" "$where"
	printf '%s\n' "$vcpus"
	printf 'iterations scaled by BENCH_ITERS=%s; bandwidth: BW average, atomic: MsgRate, latency: t_typical\n' "$scale"
	printf 'each figure the median of %s runs [lowest-highest], %s alternating boots of each driver; (K/N): only K of the N runs gave one\n' \
		"$((rounds * repeat))" "$rounds"
	printf 'speedup: of the medians, rxe_rs/rxe for bandwidth and message rate, rxe/rxe_rs for latency (>1: rxe_rs is faster)\n\n'
	printf '%-16s %6s %6s %-7s %26s %26s %8s\n' test size iters unit rxe rxe_rs speedup
	local name tool size n kind args unit a b s q
	while read -r name tool size n kind args; do
		case $kind in
		bw) unit=MiB/s ;;
		rate) unit=Mpps ;;
		lat) unit=usec ;;
		esac
		a=$(figure "$pl-rxe" "$name" "$kind")
		b=$(figure "$pl-rxe_rs" "$name" "$kind")
		s=-
		if [ "$a" != failed ] && [ "$b" != failed ]; then
			s=$(awk -v a="${a%% *}" -v b="${b%% *}" -v k="$kind" 'BEGIN {
				if (k == "lat") { x = a; y = b } else { x = b; y = a }
				if (y == 0) print "-"; else printf "%.2f", x / y }')
		fi
		printf '%-16s %6s %6s %-7s %26s %26s %8s\n' "$name" "$size" "$n" "$unit" \
			"$(shown "$a")" "$(shown "$b")" "$s"
	done <<< "$tests"
	printf '\nguest CPU seconds (user, system, softirq, irq; median of the runs) per GiB for\n'
	printf 'bandwidth, per million messages for message rate, per million round trips for\n'
	printf 'latency; ratio rxe/rxe_rs (>1: rxe_rs costs less)\n\n'
	printf '%-16s %6s %-10s %12s %12s %8s\n' test size per rxe rxe_rs ratio
	while read -r name tool size n kind args; do
		# Messages in a run: the iterations of each QP.
		q=$(awk '{ for (i = 1; i < NF; i++) if ($i == "-q") print $(i + 1) }' <<< "$args")
		a=$(cost "$pl-rxe" "$name" "$kind" "$size" "$((n * ${q:-1}))")
		b=$(cost "$pl-rxe_rs" "$name" "$kind" "$size" "$((n * ${q:-1}))")
		s=-
		if [ "$a" != - ] && [ "$b" != - ]; then
			s=$(awk -v a="$a" -v b="$b" 'BEGIN { if (b == 0) print "-"; else printf "%.2f", a / b }')
		fi
		printf '%-16s %6s %-10s %12s %12s %8s\n' "$name" "$size" \
			"$(case $kind in bw) echo GiB ;; rate) echo "M msgs" ;; lat) echo "M iters" ;; esac)" \
			"$a" "$b" "$s"
	done <<< "$tests"
	printf '\nwall time of the guest runs (boots included): rxe %ss, rxe_rs %ss\n' \
		"${wall[$pl-rxe]:--}" "${wall[$pl-rxe_rs]:--}"
	printf 'raw outputs and consoles: %s/%s-{rxe,rxe_rs}/round-*/\n\n' "$out" "$pl"
}
for pl in $placements; do report "$pl"; done | tee "$out/report.txt"
