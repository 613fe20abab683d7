#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make stress: the every-object loop at length on the debug kernel (KASAN, kmemleak,
# lockdep): ROUNDS rounds (default 2000) in each of two surviving processes while two
# others are SIGKILLed midway, then slab, module reference counts and the sanitizers'
# verdict. Not part of make check, which runs 60 rounds of the same loop.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

rounds=${ROUNDS:-2000}
out=$TOP_DIR/build/stress
share=$TOP_DIR/build/share-debug
mkdir -p "$out"
prepare_base
prepare_debug

stage_start "every-object loop, $rounds rounds, debug kernel"
echo "cd /mnt/host && STRESS_ROUNDS=$rounds VERBOSE=1 ONLY='^every_object_loop' sh sanitized.sh" > "$out/cmd.sh"
rm -f "$share/kmemleak.txt" "$share/lockdep.txt"
rc=0
"$TOOLS_DIR/vm-run.sh" --kernel debug --share "$share" --timeout 3000 "$out/cmd.sh" \
	> "$out/console.log" 2>&1 || rc=$?
stage_end

bad=0
tr -d '\r' < "$out/console.log" | grep -E '^(not )?ok |^#   (refcnt|[0-9]+ rounds)' || true
tr -d '\r' < "$out/console.log" | matches '^ok [0-9]+ every_object_loop' || bad=1
reports=$(grep -E 'BUG:|WARNING:|KASAN:|Oops|general protection|possible circular locking|inconsistent lock state|ODEBUG' "$out/console.log" || true)
[ -z "$reports" ] || { echo "$reports" | take 40; bad=1; }
if [ -s "$share/kmemleak.txt" ]; then head -n 40 "$share/kmemleak.txt"; bad=1; fi
grep -q '^sanitizer: kmemleak scanned' "$out/console.log" || { echo "kmemleak did not scan"; bad=1; }
grep -q 'debug_locks:.*1' "$share/lockdep.txt" 2>/dev/null || { echo "lockdep turned itself off"; bad=1; }
[ $rc = 0 ] || { echo "the guest exited with $rc"; bad=1; }
if [ $bad = 0 ]; then echo "stress: clean (no KASAN, lockdep, WARN or kmemleak report)"; else echo "stress: FAILED (console: $out/console.log)"; fi
exit $bad
