#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make rdma-core-tests: rdma-core's own test suite (python3-pyverbs' run_tests.py) on
# rdma_rxe and on rxe_rs, one boot each, with per-test results and their difference in
# build/rdma-core-tests/. make check judges parity from them (tools/check.sh), and runs
# it on rxe_rs alone (DRIVERS=rxe_rs) when rxe's outcomes are recorded. GUEST_TIMEOUT
# bounds all the guests together (1200 s each by default): each gets an equal share of
# what is left when it starts.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=$TOP_DIR/build/rdma-core-tests
share=$TOP_DIR/build/share-suite
mkdir -p "$out" "$share"
# A run judges only what it produced itself.
rm -f "$out"/*.results "$out"/*.summary "$out/difference.txt" "$share"/suite-*.log
# make check has built the module already, and may be building elsewhere meanwhile.
if [ -z "${RXE_RS_BUILT:-}" ]; then
	prepare_base
	"$TOOLS_DIR/build-module.sh" test >/dev/null
fi
cp "$TOP_DIR/build/test/rxe_rs.ko" "$share/"

drivers=${DRIVERS:-rxe rxe_rs}
read -ra left <<< "$drivers"
end=$(($(date +%s) + ${GUEST_TIMEOUT:-$((1200 * ${#left[@]}))}))
for drv in $drivers; do
	guest_timeout=$(((end - $(date +%s)) / ${#left[@]}))
	left=("${left[@]:1}")
	((guest_timeout >= 60)) || guest_timeout=60
	# The suite gets the guest's time less two minutes for the boot and the log.
	suite_timeout=$((guest_timeout > 360 ? guest_timeout - 120 : guest_timeout * 2 / 3))
	stage_start "rdma-core tests on $drv"
	if [ $drv = rxe ]; then load="modprobe rdma_rxe"; else load="modprobe -a udp_tunnel ip6_udp_tunnel; insmod /mnt/host/rxe_rs.ko"; fi
	cat > "$share/suite.sh" <<GUEST
modprobe ib_uverbs
$load
rdma link add dev0 type $drv netdev eth0
cp -r /usr/share/doc/rdma-core/tests /tmp/t
cd /tmp/t && find . -name '*.gz' -exec gunzip -f {} +
timeout $suite_timeout python3 run_tests.py --dev dev0 -v > /mnt/host/suite-$drv.log 2>&1
echo "run_tests.py exited \$?"
exit 0
GUEST
	"$TOOLS_DIR/vm-run.sh" --kernel test --share "$share" --timeout "$guest_timeout" "$share/suite.sh" \
		> "$out/$drv.console" 2>&1 || echo "guest run on $drv failed: see $out/$drv.console"
	# unittest -v: "test_x (module.Class.test_x)", then (perhaps after a docstring line)
	# " ... " and the outcome: ok, skipped '...', FAIL, ERROR or expected failure. When
	# the test printed something first, the outcome starts a later line of its own.
	tr -d '\r' < "$share/suite-$drv.log" | awk '
		function record(line) {
			if (match(line, /^(ok|skipped|FAIL|ERROR|expected failure)( |$)/)) {
				r = substr(line, RSTART, RLENGTH); sub(/ $/, "", r); sub(/ .*/, "", r)
				print id, r; id = ""
			}
		}
		match($0, /^test[^ ]* \(([^)]*)\)/) {
			id = substr($0, RSTART, RLENGTH); sub(/^[^(]*\(/, "", id); sub(/\)$/, "", id)
			if (match($0, / \.\.\. /)) record(substr($0, RSTART + 5))
			next
		}
		id != "" { if (match($0, / \.\.\. /)) record(substr($0, RSTART + 5)); else record($0) }' | sort > "$out/$drv.results"
	cp "$share/suite-$drv.log" "$out/$drv.log"
	printf '%s: %s tests, %s ok, %s skipped, %s failed, %s errors\n' "$drv" \
		"$(wc -l < "$out/$drv.results")" "$(grep -c ' ok$' "$out/$drv.results" || true)" \
		"$(grep -c ' skipped$' "$out/$drv.results" || true)" \
		"$(grep -c ' FAIL$' "$out/$drv.results" || true)" \
		"$(grep -c ' ERROR$' "$out/$drv.results" || true)" | tee "$out/$drv.summary"
	stage_end
done
[ "$drivers" = "rxe rxe_rs" ] || exit 0
join -a1 -a2 -e - -o 0,1.2,2.2 "$out/rxe.results" "$out/rxe_rs.results" |
	awk '$2 != $3' > "$out/difference.txt"
echo "tests whose outcome differs (test rxe rxe_rs): $(wc -l < "$out/difference.txt"), in $out/difference.txt"
