#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make fuzz: the fuzzers at length, bounded.
#
#   FUZZ_SECONDS (1200)         the verbs fuzzer (selftests/verbs_fuzz.c) on rxe_rs on the
#                               debug kernel (KASAN, kmemleak, lockdep), then the create
#                               verbs under failslab (verbs_failnth.c)
#   FUZZ_PACKET_SECONDS (1200)  the host's RoCE packet parser under libFuzzer, alongside
#   FUZZ_SEED                   replays a verbs run (its seed is the log's first line)
#   FUZZ_UNPLUG (3/4 of the run) seconds after which the second device is deleted under
#                               the processes using it (0: never)
#
# Not part of make check, which runs the verbs fuzzer for 60 s on both drivers and the
# packet parser for 60 s. Fails on a failed test, any kernel report, a kmemleak report, a
# lockdep that turned itself off, or a crash of the packet parser.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

secs=${FUZZ_SECONDS:-1200}
psecs=${FUZZ_PACKET_SECONDS:-1200}
out=$TOP_DIR/build/fuzz-run
share=$TOP_DIR/build/share-debug
mkdir -p "$out"
prepare_base
prepare_debug

# The guest (one TCG thread) and libFuzzer (one process) take a core each.
stage_start "verbs fuzzer ${secs} s and failslab, debug kernel; packet parser ${psecs} s alongside"
printf 'cd /mnt/host && %sFUZZ_SECONDS=%s FUZZ_UNPLUG=%s VERBOSE=1 ONLY=%s sh sanitized.sh\n' \
	"${FUZZ_SEED:+FUZZ_SEED=$FUZZ_SEED }" "$secs" "${FUZZ_UNPLUG:-$((secs * 3 / 4))}" \
	"'^verbs_fuzz\$|^fault_injection_create_verbs\$'" > "$out/cmd.sh"
rm -f "$share/kmemleak.txt" "$share/lockdep.txt"
(
	set +e
	"$TOOLS_DIR/vm-run.sh" --kernel debug --share "$share" --timeout $((secs + 2400)) \
		"$out/cmd.sh" > "$out/console.log" 2>&1
	echo $? > "$out/guest.rc"
) &
guest=$!

fuzz_dir=$TOP_DIR/drivers/infiniband/sw/rxe_rs/roce/fuzz
mkdir -p "$TOP_DIR/build/fuzz/corpus" "$TOP_DIR/build/fuzz/artifacts"
prc=0
if ! command -v cargo-fuzz >/dev/null && ! cargo install --quiet --locked cargo-fuzz --version 0.13.2; then
	echo "cargo-fuzz could not be installed"
	prc=1
elif ! (cd "$fuzz_dir" && RUSTC_BOOTSTRAP=1 cargo fuzz run packet "$TOP_DIR/build/fuzz/corpus" -- \
	-max_total_time="$psecs" -artifact_prefix="$TOP_DIR/build/fuzz/artifacts/" \
	> "$out/packet.log" 2>&1); then
	tail -n 30 "$out/packet.log"
	prc=1
fi
wait "$guest" || true
stage_end

bad=0
grc=$(cat "$out/guest.rc" 2>/dev/null || echo 125)
tr -d '\r' < "$out/console.log" | grep -E '^(not )?ok |^#   (seed|verbs_fuzz:|proc [0-9]+ \(|all processes|killing|deleting|rdma link delete|HANG|STALL|[a-z_0-9]+ +N up to|refcnt)' || true
for t in verbs_fuzz fault_injection_create_verbs; do
	tr -d '\r' < "$out/console.log" | matches "^ok [0-9]+ $t\$" || { echo "$t: not ok (or skipped)"; bad=1; }
done
reports=$(grep -E 'BUG:|WARNING:|KASAN:|Oops|general protection|possible circular locking|inconsistent lock state|ODEBUG|soft lockup|rcu.*stall|blocked for more than' "$out/console.log" || true)
[ -z "$reports" ] || { echo "$reports" | take 40; bad=1; }
if [ -s "$share/kmemleak.txt" ]; then head -n 40 "$share/kmemleak.txt"; bad=1; fi
grep -q '^sanitizer: kmemleak scanned' "$out/console.log" || { echo "kmemleak did not scan"; bad=1; }
grep -q 'debug_locks:.*1' "$share/lockdep.txt" 2>/dev/null || { echo "lockdep turned itself off"; bad=1; }
[ "$grc" = 0 ] || { echo "the guest exited with $grc"; bad=1; }
if [ $prc = 0 ]; then
	echo "packet parser: $(grep -o 'Done [0-9]* runs' "$out/packet.log" | tail -n 1), no crash"
else
	echo "packet parser: crashed or could not run (build/fuzz-run/packet.log, build/fuzz/artifacts)"
	bad=1
fi
if [ $bad = 0 ]; then echo "fuzz: clean"; else echo "fuzz: FAILED (console: $out/console.log)"; fi
exit $bad
