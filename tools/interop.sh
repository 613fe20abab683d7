#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make interop: wire interop between C rxe and rxe_rs. Two guests of the test kernel
# boot side by side, joined by a second NIC each whose frames go as UDP datagrams over
# the host's loopback (127.0.0.1 only); one loads rdma_rxe, the other rxe_rs, and they
# run selftests/interop.sh against each other (each test once served by either side),
# capture the RoCE v2 frames and check them. Results in build/interop/. ONLY=REGEX
# runs only the tests whose names match. GUEST_TIMEOUT bounds the whole (the first
# pair of guests and the second that runs failed tests again: 2100 s each by default).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=$TOP_DIR/build/interop
end=$(($(date +%s) + ${GUEST_TIMEOUT:-4200}))
rm -rf "$out"
mkdir -p "$out"
# make check has built the module already, and may be building elsewhere meanwhile.
if [ -z "${RXE_RS_BUILT:-}" ]; then
	prepare_base
	"$TOOLS_DIR/build-module.sh" test >/dev/null
fi
# The link's two UDP ports on 127.0.0.1: the first free pair from 47011 (or
# RXE_RS_LINK_PORT) on.
read -r port_a port_b < <(link_ports "${RXE_RS_LINK_PORT:-47011}")
echo "link: 127.0.0.1 ports $port_a (rxe) and $port_b (rxe_rs)"

# run_pair DIR [ONLY [EXCEPT]]: both guests, their consoles and TAP in DIR, the frames of
# failed tests (NAME.pcap) too; ONLY and EXCEPT as in selftests/interop.sh.
run_pair() {
	local dir=$1 only=${2:-} except=${3:-} side share env link p rc=0 pids=() timeout watcher
	timeout=$((end - $(date +%s)))
	[ $timeout -le 2100 ] || timeout=2100
	[ $timeout -ge 60 ] || timeout=60
	mkdir -p "$dir"
	for side in a b; do
		share=$TOP_DIR/build/share-interop-$side
		rm -rf "$share"
		mkdir -p "$share/bin"
		cp "$TOP_DIR/build/test/rxe_rs.ko" "$TOP_DIR/selftests/interop.sh" \
			"$TOP_DIR/selftests/pcap_icrc.py" "$TOP_DIR/selftests/peer_up.py" "$share/"
		in_rootfs gcc -O2 -Wall -Werror -o "/src/build/share-interop-$side/bin/read_big" \
			/src/selftests/read_big.c -libverbs
		if [ $side = a ]; then
			env="ROLE=a DRIVER=rxe ME=192.168.77.1 PEER=192.168.77.2"
			link="$port_a:$port_b:52:54:00:77:00:01"
		else
			env="ROLE=b DRIVER=rxe_rs ME=192.168.77.2 PEER=192.168.77.1"
			link="$port_b:$port_a:52:54:00:77:00:02"
		fi
		# Which sides serve the big READ (selftests/interop.sh).
		env="$env READ_BIG_SERVERS='${READ_BIG_SERVERS:-b}' READ_BIG='${READ_BIG:-268435456}'"
		env="$env ONLY='$only' EXCEPT='$except'"
		printf 'cd /mnt/host && %s sh interop.sh\n' "$env" > "$dir/cmd-$side.sh"
		"$TOOLS_DIR/vm-run.sh" --kernel test --share "$share" --timeout "$timeout" --link "$link" \
			"$dir/cmd-$side.sh" > "$dir/$side.console" 2>&1 &
		pids+=($!)
	done
	watch_nics "$dir" &
	watcher=$!
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	kill "$watcher" 2>/dev/null || true
	[ $rc = 0 ] || echo "a guest run failed (see $dir/*.console)"
	for side in a b; do
		tr -d '\r' < "$dir/$side.console" | grep -E '^(ok|not ok|#|1\.\.|Bail out!)' > "$dir/$side.tap" || true
		for p in "$TOP_DIR/build/share-interop-$side"/*.pcap; do
			if [ -e "$p" ]; then mv "$p" "$dir/$side-$(basename "$p")"; fi
		done
	done
}
# watch_nics DIR: stops both guests of DIR as soon as either's NIC watchdog fires. A
# virtio-net transmit queue that stopped under TCG on a loaded host never restarts
# (seen once: the watchdog fired every 5 s until the test's bound, 20 minutes later);
# the tests that had not ended run again alone (below).
watch_nics() {
	local dir=$1 side line
	while sleep 5; do
		for side in a b; do
			line=$(tr -d '\r' < "$dir/$side.console" 2>/dev/null | grep -m 1 'NETDEV WATCHDOG' || true)
			[ -n "$line" ] || continue
			echo "link: side $side's NIC stopped sending ($line): both guests stopped"
			for side in a b; do
				kill "$(cat "$TOP_DIR/build/share-interop-$side/.qemu.pid" 2>/dev/null)" 2>/dev/null || true
			done
			return
		done
	done
}
# result DIR SIDE TEST: ok, FAIL or - (not run) for TEST on SIDE.
result() {
	awk -v t="$3" '($1 == "ok" && $3 == t) { r = "ok"; exit } ($1 == "not" && $4 == t) { r = "FAIL"; exit }
		END { print r ? r : "-" }' "$1/$2.tap"
}

stage_start "interop: rxe (a) and rxe_rs (b), two guests"
run_pair "$out" "${ONLY:-}"
stage_end
tests=$(awk '$1 == "ok" { print $3 } $1 == "not" { print $4 }' "$out/a.tap" "$out/b.tap" | awk '!seen[$0]++')
# A pair stopped before its end (a NIC that stopped sending, or the time given) runs
# again all that did not pass on both sides: the tests it did not reach too.
cut=
for side in a b; do
	grep -q '^1\.\.' "$out/$side.tap" || cut=1
done
if [ -z "$tests" ] && [ -z "$cut" ]; then
	echo "no results; what the guests said:"
	for side in a b; do tail -n 12 "$out/$side.tap" | sed "s/^/$side: /"; done
	exit 1
fi
# A test that failed on either side runs once more, alone, in two fresh guests: over
# this link (frames as UDP datagrams between two emulated machines) a rare failure is
# not always the drivers'. It then counts as flaky, not passed: the report says so,
# with the first run's output and frames kept in DIR. (Seen once: during the big READ,
# with a third guest sharing the two host CPUs, the serving guest's virtio-net transmit
# queue stopped for good, its NETDEV WATCHDOG firing every 5 s; alone, the READ passed.)
again=
for t in $tests; do
	case $t in kernel_log_clean | capture_*) continue ;; esac
	if [ "$(result "$out" a "$t")" != ok ] || [ "$(result "$out" b "$t")" != ok ]; then
		again="${again:+$again|}$t"
	fi
done
if [ -n "$cut" ]; then
	passed=
	for t in $tests; do
		case $t in kernel_log_clean | capture_*) continue ;; esac
		[ "$(result "$out" a "$t")" != ok ] || [ "$(result "$out" b "$t")" != ok ] ||
			passed="${passed:+$passed|}$t"
	done
	stage_start "interop: the run was cut short: all but what passed on both sides once more"
	run_pair "$out/again" "" "${passed:+^($passed)\$}"
	stage_end
	tests=$(awk '$1 == "ok" { print $3 } $1 == "not" { print $4 }' "$out/a.tap" "$out/b.tap" \
		"$out/again/a.tap" "$out/again/b.tap" | awk '!seen[$0]++')
elif [ -n "$again" ]; then
	stage_start "interop: the failed tests once more ($again)"
	run_pair "$out/again" "^($again)\$"
	stage_end
fi
[ -n "$tests" ] || { echo "no results"; exit 1; }
# report.txt: test, rxe's result, rxe_rs's result, and for a test run again the
# verdict of the second run ("flaky" if both sides passed it then, "FAIL" if not).
echo "test                                  rxe(a)  rxe_rs(b)"
for t in $tests; do
	ra=$(result "$out" a "$t")
	rb=$(result "$out" b "$t")
	verdict=
	if [ "$ra" != ok ] || [ "$rb" != ok ]; then
		verdict=FAIL
		if [ -d "$out/again" ] && [ "$(result "$out/again" a "$t")" = ok ] &&
			[ "$(result "$out/again" b "$t")" = ok ]; then
			verdict=flaky
		fi
	fi
	printf '%-37s %-7s %-7s %s\n' "$t" "$ra" "$rb" "$verdict"
done | tee "$out/report.txt"
grep '^#' "$out/b.tap" | grep -E 'frames|good' || true
failed=$(awk '$4 == "FAIL"' "$out/report.txt" | wc -l)
flaky=$(awk '$4 == "flaky"' "$out/report.txt" | wc -l)
echo "interop: $failed test(s) failed, $flaky flaky (failed, then passed on both sides alone)"
[ "$failed" = 0 ]
