#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make interop: wire interop between C rxe and rxe_rs. Two guests of the test kernel
# boot side by side, joined by a second NIC each whose frames go as UDP datagrams over
# the host's loopback (127.0.0.1 only); one loads rdma_rxe, the other rxe_rs, and they
# run selftests/interop.sh against each other (each test once served by either side),
# capture the RoCE v2 frames and check them. Results in build/interop/.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=$TOP_DIR/build/interop
rm -rf "$out"
mkdir -p "$out"
prepare_base
"$TOOLS_DIR/build-module.sh" test >/dev/null
# The link's two UDP ports on 127.0.0.1: the first free pair from 47011 (or
# RXE_RS_LINK_PORT) on.
read -r port_a port_b < <(link_ports "${RXE_RS_LINK_PORT:-47011}")
echo "link: 127.0.0.1 ports $port_a (rxe) and $port_b (rxe_rs)"

stage_start "interop: rxe (a) and rxe_rs (b), two guests"
pids=()
for side in a b; do
	share=$TOP_DIR/build/share-interop-$side
	mkdir -p "$share"
	cp "$TOP_DIR/build/test/rxe_rs.ko" "$TOP_DIR/selftests/interop.sh" \
		"$TOP_DIR/selftests/pcap_icrc.py" "$TOP_DIR/selftests/peer_up.py" "$share/"
	mkdir -p "$share/bin"
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
	printf 'cd /mnt/host && %s sh interop.sh\n' "$env" > "$out/cmd-$side.sh"
	"$TOOLS_DIR/vm-run.sh" --kernel test --share "$share" --timeout 2100 --link "$link" \
		"$out/cmd-$side.sh" > "$out/$side.console" 2>&1 &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
[ $rc = 0 ] || echo "a guest run failed (see $out/*.console)"
stage_end

failed=0
for side in a b; do
	tr -d '\r' < "$out/$side.console" | grep -E '^(ok|not ok|#|1\.\.|Bail out!)' > "$out/$side.tap" || true
done
echo "test                                  rxe(a)  rxe_rs(b)"
tests=$(awk '$1 == "ok" { print $3 } $1 == "not" { print $4 }' "$out/a.tap" "$out/b.tap" | awk '!seen[$0]++')
for t in $tests; do
	ra=$(awk -v t="$t" '($1 == "ok" && $3 == t) { print "ok"; exit } ($1 == "not" && $4 == t) { print "FAIL"; exit }' "$out/a.tap")
	rb=$(awk -v t="$t" '($1 == "ok" && $3 == t) { print "ok"; exit } ($1 == "not" && $4 == t) { print "FAIL"; exit }' "$out/b.tap")
	printf '%-37s %-7s %s\n' "$t" "${ra:--}" "${rb:--}"
	[ "$ra" = ok ] && [ "$rb" = ok ] || failed=$((failed + 1))
done | tee "$out/report.txt"
grep '^#' "$out/b.tap" | grep -E 'frames|good' || true
failed=$(awk '$2 != "ok" || $3 != "ok"' "$out/report.txt" | grep -vc '^test' || true)
if [ ! -s "$out/report.txt" ]; then
	echo "no results; what the guests said:"
	for side in a b; do tail -n 12 "$out/$side.tap" | sed "s/^/$side: /"; done
	exit 1
fi
echo "interop: $failed test(s) not ok on both sides"
[ "$failed" = 0 ]
