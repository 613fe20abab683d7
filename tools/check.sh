#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make check: the test suite CI runs. Stages print their wall time; the run ends with
# one line `N passed, N failed, N skipped` (tests on rxe_rs; rxe's outcomes are the
# comparison) and exits non-zero on any failure.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

out=$TOP_DIR/build/check
rm -rf "$out"
mkdir -p "$out"
passed=0 failed=0 skipped=0
pass() { passed=$((passed + 1)); printf 'PASS %s\n' "$1"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$1"; printf '%s\n' "$1" >> "$out/failures"; }
skip() { skipped=$((skipped + 1)); printf 'SKIP %s\n' "$1"; }
T0=$(date +%s)

# The run's logs outlive the checkout (CI clones afresh and keeps only the tail of the
# output): build/check, the interop and pyverbs results and the guests' consoles are
# copied to the cache, the last five runs kept.
keep_logs() {
	local logs
	logs=$RXE_RS_CACHE/check-logs/$(date -u +%Y%m%dT%H%M%SZ)-$(git -C "$TOP_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)
	mkdir -p "$logs"
	cp -r "$out" "$logs/check" 2>/dev/null || true
	for d in interop rdma-core-tests; do
		[ -d "$TOP_DIR/build/$d" ] || continue
		mkdir -p "$logs/$d"
		find "$TOP_DIR/build/$d" -maxdepth 1 -type f \
			\( -name '*.txt' -o -name '*.tap' -o -name '*.log' -o -name '*.results' -o -name '*.console' \
			-o -name '*.pcap' \) -exec cp -t "$logs/$d" {} + 2>/dev/null
		[ ! -d "$TOP_DIR/build/$d/again" ] || cp -r "$TOP_DIR/build/$d/again" "$logs/$d/"
	done
	ls -1d "$RXE_RS_CACHE"/check-logs/*/ | head -n -5 | xargs -r rm -rf
	echo "logs of this run: $logs"
}
# (Never the run's verdict: errexit does not apply inside a `||` list.)
trap 'keep_logs || true' EXIT

prepare_base

stage_start "host tests (cargo)"
crates=$(find "$TOP_DIR" -name Cargo.toml -not -path "$TOP_DIR/build/*" -not -path '*/fuzz/*' -not -path '*/target/*' | sort)
if [ -z "$crates" ]; then
	echo "no host crate yet"
else
	for c in $crates; do
		if (cd "$(dirname "$c")" && cargo test --quiet > "$out/cargo-test.log" 2>&1); then pass "cargo test $(dirname "${c#"$TOP_DIR"/}")"; else cat "$out/cargo-test.log"; fail "cargo test $(dirname "${c#"$TOP_DIR"/}")"; fi
	done
fi
stage_end

# The packet parser under libFuzzer for a bounded time. cargo-fuzz comes from crates.io
# into ~/.cargo (outside the checkout, so a warm run has it); stable rustc takes the
# nightly-only sanitizer flags with RUSTC_BOOTSTRAP=1. The corpus stays in build/.
stage_start "fuzz: roce packet parser, ${RXE_RS_FUZZ_SECONDS:-60} s"
fuzz_dir=$TOP_DIR/drivers/infiniband/sw/rxe_rs/roce/fuzz
mkdir -p "$TOP_DIR/build/fuzz/corpus" "$TOP_DIR/build/fuzz/artifacts"
if ! command -v cargo-fuzz >/dev/null && ! cargo install --quiet --locked cargo-fuzz --version 0.13.2; then
	fail "fuzz: cargo-fuzz could not be installed"
elif (cd "$fuzz_dir" && RUSTC_BOOTSTRAP=1 cargo fuzz run packet "$TOP_DIR/build/fuzz/corpus" -- \
	-max_total_time="${RXE_RS_FUZZ_SECONDS:-60}" -artifact_prefix="$TOP_DIR/build/fuzz/artifacts/" \
	> "$out/fuzz.log" 2>&1); then
	pass "fuzz: $(grep -o 'Done [0-9]* runs' "$out/fuzz.log" | tail -n 1), no crash"
else
	tail -n 30 "$out/fuzz.log"
	fail "fuzz: the packet parser crashed or the fuzzer failed (see build/check/fuzz.log)"
fi
stage_end

stage_start "module build, CLIPPY=1, warnings are errors"
if "$TOOLS_DIR/build-module.sh" test CLIPPY=1 > "$out/build.log" 2>&1; then
	pass "module build with clippy"
else
	cat "$out/build.log"
	fail "module build with clippy"
	echo "$passed passed, $failed failed, $skipped skipped"
	exit 1
fi
# objtool (7.2) knows core's panics by name but not those of a division by zero (their
# mangled names are a character shorter than its pattern): after a call to one it
# believes the function goes on, and warns, or builds wrong unwind data. The driver
# divides only where the compiler sees the divisor is not zero.
if in_rootfs objdump -dr /src/build/test/rxe_rs.ko /src/build/test/rdma_minimal.ko |
	grep -E "panic_const_(div|rem)_by_zero" > "$out/divisions.txt"; then
	cat "$out/divisions.txt"
	fail "no division that objtool cannot follow (a call to a by-zero panic)"
elif grep "objtool" "$out/build.log"; then
	fail "module build: objtool warnings"
else
	pass "no objtool warning, no division by a divisor that may be zero"
fi
stage_end

stage_start "rustfmt --check"
if in_rootfs sh -c 'cd /src && rustfmt --check --edition 2021 \
	--config-path /usr/src/linux-source-'"$KSERIES"'/.rustfmt.toml \
	drivers/infiniband/sw/rxe_rs/rxe_rs_main.rs drivers/infiniband/sw/rxe_rs/roce/lib.rs \
	samples/rdma_minimal/rdma_minimal.rs'; then
	pass "rustfmt"
else
	fail "rustfmt"
fi
stage_end

# The driver's files may name each other in one direction only, but for a module and its
# own children (tools/modgraph.py prints the cycles it finds).
stage_start "module graph: no import cycle"
if python3 "$TOOLS_DIR/modgraph.py"; then
	pass "module graph"
else
	fail "module graph: an import cycle between the driver's files"
fi
stage_end

# The in-tree build: the driver grafted into the test kernel's source (tools/graft.sh),
# configured through its Kconfig and built by the kernel's own build, not M=; the
# selftests installed by the kselftest build beside that module (run further down).
stage_start "in-tree build: tools/graft.sh, CONFIG_RDMA_RXE_RS=m, kselftest install"
kselftest=
if kselftest=$("$TOOLS_DIR/graft-build.sh" 2> "$out/graft.log"); then
	if grep "objtool" "$out/graft.log"; then
		fail "in-tree build: objtool warnings"
	else
		pass "in-tree build"
	fi
else
	tail -n 40 "$out/graft.log"
	fail "in-tree build"
fi
stage_end

# DKMS: dkms.conf as shipped builds the module against the test kernel's build tree, and
# DKMS skips a kernel without Rust saying why (tools/dkms-check.sh).
stage_start "DKMS: dkms.conf builds rxe_rs for the test kernel, skips one without Rust"
if "$TOOLS_DIR/dkms-check.sh" > "$out/dkms.log" 2>&1; then
	pass "dkms build"
else
	tail -n 40 "$out/dkms.log"
	fail "dkms build"
fi
stage_end

stage_start "selftests build"
make_share test
stage_end

# The debug kernel's guests (rxe_rs alone under KASAN, kmemleak and lockdep) are the
# longest stage: over an hour of tests on a slow host, in three boots. The first runs
# the tests up to $debug_split on the second core while the test kernel's stages run on
# the first; the second runs those after it up to $debug_split2, the third the rest,
# each on whichever core is free first: the first guest's, once it has ended, or the
# stages', once they have (so that both cores run guests at the end). All three are
# judged in one stage at the end.
# make check is to end within RXE_RS_CHECK_BUDGET_S seconds (80 minutes) of its start
# even on a host slower than expected: each guest gets as DEADLINE (seconds after its
# boot, after which it starts no test) what is left of that budget when it boots, less
# a tail for the test then running and the sanitizers' verdicts (15 minutes for the
# first guest, whose longest test took 8; 7 for the others, whose longest took 4); the
# tests not started are named as skipped.
debug_split=kernel_nvme_over_rdma debug_split2=reth_length_above_2g
debug_pids= debug_t0=
check_end=$((T0 + ${RXE_RS_CHECK_BUDGET_S:-4800}))
# Runs debug guest PART (1, 2 or 3) in the foreground: sanitized.sh with the environment
# ENV, in a share of its own, its DEADLINE leaving TAIL seconds of the budget; its exit
# status goes to debug-PART.rc, the seconds at which it started and ended (since make
# check's start) to debug-PART.times.
run_debug() {
	local part=$1 env=$2 debug_tail=$3 share=$TOP_DIR/build/share-debug-$1 t deadline
	t=$(date +%s)
	deadline=$((check_end - t - debug_tail))
	[ $deadline -gt 0 ] || deadline=1
	rm -rf "$share"
	cp -a "$TOP_DIR/build/share-debug" "$share"
	rm -f "$share/kmemleak.txt" "$share/lockdep.txt"
	echo "cd /mnt/host && $env DEADLINE=$deadline sh sanitized.sh" > "$out/cmd-debug-$part.sh"
	"$TOOLS_DIR/vm-run.sh" --kernel debug --share "$share" --timeout $((deadline + debug_tail)) \
		"$out/cmd-debug-$part.sh" > "$out/debug-$part.console" 2>&1
	echo $? > "$out/debug-$part.rc"
	echo "$((t - T0)) $(($(date +%s) - T0))" > "$out/debug-$part.times"
}
# Runs the debug guests after the first that nobody has claimed yet, each claimed by
# whoever gets to it first: the first guest's job when that guest has ended, or the
# debug stage when the test kernel's stages have.
run_debug_rest() {
	if mkdir "$out/debug-2.claimed" 2>/dev/null; then
		run_debug 2 "AFTER=$debug_split UNTIL=$debug_split2" 420
	fi
	if mkdir "$out/debug-3.claimed" 2>/dev/null; then
		run_debug 3 "AFTER=$debug_split2" 420
	fi
}
stage_start "debug kernel: build, then boot alongside the next stages"
if [ -n "${RXE_RS_SKIP_DEBUG:-}" ]; then
	echo "not started: RXE_RS_SKIP_DEBUG is set"
elif "$TOOLS_DIR/build-kernel.sh" debug >/dev/null &&
	"$TOOLS_DIR/build-module.sh" debug > "$out/build-debug.log" 2>&1 &&
	make_share debug >> "$out/build-debug.log" 2>&1; then
	debug_t0=$(date +%s)
	(
		set +e
		run_debug 1 "UNTIL=$debug_split" 900
		run_debug_rest
	) &
	debug_pids=$!
fi
stage_end

# The TAP result lines of a guest's console (the serial console ends lines with CR).
tap_of() {
	tr -d '\r' < "$1" | grep -E '^(not )?ok [0-9]+ |^Bail out!' || true
}

# The five tests that took longest in a guest's console (guest-tests.sh's `# time` lines),
# on one line: where a guest's time goes when it comes near its timeout.
slowest() {
	tr -d '\r' < "$1" | awk '$1 == "#" && $2 == "time" { print $5, $4 }' | sort -rn |
		take 5 | awk '{ printf "%s%s %s s", (NR > 1 ? ", " : "slowest tests: "), $2, $1 } END { if (NR) print "" }'
}

# Boots the guest per driver and collects TAP. A test that hangs or kills the guest is
# recorded as `not ok N NAME # HUNG`, and the run goes on after it in a new boot (three
# boots at most); the consoles of all boots end up in build/check/DRIVER.console.
for drv in rxe rxe_rs; do
	stage_start "selftests on $drv"
	: > "$out/$drv.tap"
	: > "$out/$drv.console"
	after= boots=0
	while :; do
		boots=$((boots + 1))
		printf 'cd /mnt/host && DRIVER=%s AFTER=%s sh guest-tests.sh\n' "$drv" "$after" > "$out/cmd-$drv.sh"
		set +e
		"$TOOLS_DIR/vm-run.sh" --kernel test --share "$TOP_DIR/build/share-test" --timeout 1500 \
			--idle 600 "$out/cmd-$drv.sh" > "$out/$drv.boot" 2>&1
		rc=$?
		set -e
		cat "$out/$drv.boot" >> "$out/$drv.console"
		tap_of "$out/$drv.boot" >> "$out/$drv.tap"
		# The plan line `1..N` ends a run that went through.
		tr -d '\r' < "$out/$drv.boot" | matches '^1\.\.[0-9]+$' && break
		echo "guest run $boots on $drv ended early (exit $rc); its last lines:"
		tr -d '\r' < "$out/$drv.boot" | tail -n 30
		# The test that was running: the last one started that has no result line.
		hung=$(tr -d '\r' < "$out/$drv.boot" | awk '
			$1 == "#" && $2 == "start" { n = $3; t = $4 }
			($1 == "ok" && $3 == t) || ($1 == "not" && $4 == t) { t = "" }
			END { if (t != "") print n, t }')
		[ -n "$hung" ] || break
		echo "not ok $hung # HUNG: the guest hung or died in this test (boot $boots)" >> "$out/$drv.tap"
		[ $boots -lt 3 ] || break
		after=${hung#* }
	done
	rm -f "$out/$drv.boot"
	slowest "$out/$drv.console"
	[ -s "$out/$drv.tap" ] || { tail -n 40 "$out/$drv.console"; fail "guest run on $drv produced no results"; }
	stage_end
done

# outcome FILE TEST -> ok | FAIL | hung | skip | -
outcome() {
	awk -v t="$2" '
		$1 == "ok" && $3 == t { print ($0 ~ /# SKIP/) ? "skip" : "ok"; found = 1; exit }
		$1 == "not" && $4 == t { print ($0 ~ /# HUNG/) ? "hung" : "FAIL"; found = 1; exit }
		END { if (!found) print "-" }' "$1"
}
listed() { grep -qE "^$1[[:space:]]" "$TOP_DIR/selftests/differences.txt"; }

stage_start "side-by-side report"
tests=$(awk '$1 == "ok" { print $3 } $1 == "not" { print $4 }' "$out/rxe_rs.tap" "$out/rxe.tap" | awk '!seen[$0]++')
printf '%-36s %-6s %-6s %s\n' test rxe rxe_rs verdict
for t in $tests; do
	a=$(outcome "$out/rxe.tap" "$t")
	b=$(outcome "$out/rxe_rs.tap" "$t")
	verdict=pass
	# A failure on rxe_rs is one, listed or not: the listed differences are tests that
	# rxe fails or skips.
	# A test that hung rxe's guest says nothing against the test: no process may hang a
	# kernel. On rxe_rs it is a failure like any other.
	if [ "$b" = FAIL ] || [ "$b" = hung ]; then
		verdict="FAIL"
	elif [ "$a" = hung ]; then
		verdict="pass (rxe hung)"
	elif [ "$a" != "$b" ]; then
		if listed "$t"; then verdict="pass (listed difference)"; else verdict="FAIL (differs from rxe)"; fi
	fi
	[ "$b" = skip ] && [ "$verdict" = pass ] && verdict=skip
	[ "$b" = - ] && verdict="FAIL (did not run)"
	printf '%-36s %-6s %-6s %s\n' "$t" "$a" "$b" "$verdict"
	echo "${verdict%% *}" >> "$out/verdicts"
	case $verdict in FAIL*) echo "side by side: $t: $verdict (rxe $a, rxe_rs $b)" >> "$out/failures" ;; esac
done | tee "$out/report.txt"
touch "$out/verdicts"
passed=$((passed + $(grep -c '^pass$' "$out/verdicts" || true)))
skipped=$((skipped + $(grep -c '^skip$' "$out/verdicts" || true)))
failed=$((failed + $(grep -c '^FAIL$' "$out/verdicts" || true)))
if grep -q '^FAIL$' "$out/verdicts"; then
	echo "--- details of failures on rxe_rs:"
	awk '/^not ok/ { p = 1; print; next } /^(ok|not ok) / { p = 0 } p && /^#/' "$out/rxe_rs.console" | take 60
fi
stage_end

# Wire interop: a guest with C rxe and one with rxe_rs on one link (tools/interop.sh);
# every test must pass on both sides.
stage_start "wire interop: C rxe and rxe_rs, two guests"
# The big READ at 64 MiB here (over this lossy link it goes at under 1 MB/s, and the
# stage shares the CPUs with the debug guest); `make interop` reads 256 MiB.
READ_BIG=$((64 << 20)) "$TOOLS_DIR/interop.sh" > "$out/interop.log" 2>&1 || true
report=$TOP_DIR/build/interop/report.txt
if [ -s "$report" ]; then
	while read -r t a b verdict; do
		case $verdict in
		"") pass "interop: $t" ;;
		flaky)
			pass "interop: $t (flaky: rxe $a, rxe_rs $b, then ok on both sides alone)"
			echo "interop: $t" >> "$out/flaky"
			;;
		*) fail "interop: $t (rxe $a, rxe_rs $b, alone again: not ok)" ;;
		esac
	done < "$report"
	grep -E '^# .*(frames|ICRC)' "$TOP_DIR/build/interop/b.tap" || true
	# The first failure of each side, with what its test printed.
	if awk '$4 != "" { found = 1 } END { exit !found }' "$report"; then
		grep -E '^link:' "$out/interop.log" || true
		for side in a b; do
			grep -m 1 -A 30 '^not ok' "$TOP_DIR/build/interop/$side.tap" | sed "s/^/$side: /" || true
		done
	fi
else
	tail -n 20 "$out/interop.log"
	fail "interop: no results"
fi
stage_end

# The kernel's kselftest runner over the installed tree of the in-tree build, in one
# boot: a few tests through each entry (rxe.sh, then rxe_rs.sh with the in-tree module),
# the KUnit suites of that module among them. Each entry must pass.
stage_start "kselftest runner: the in-tree module, a few tests on each driver"
if [ -z "$kselftest" ]; then
	fail "kselftest runner: no in-tree build to run"
else
	ks_share=$TOP_DIR/build/share-kselftest
	rm -rf "$ks_share"
	mkdir -p "$ks_share"
	cp -a "$kselftest" "$ks_share/kselftest"
	echo "cd /mnt/host/kselftest && ONLY='^(link_add|alloc_dealloc_pd|create_cq|kernel_consumer_verbs|kunit_suites)\$' ./run_kselftest.sh" \
		> "$out/cmd-kselftest.sh"
	"$TOOLS_DIR/vm-run.sh" --kernel test --share "$ks_share" --timeout 900 \
		"$out/cmd-kselftest.sh" > "$out/kselftest.console" 2>&1 || true
	tr -d '\r' < "$out/kselftest.console" > "$out/kselftest.txt"
	for entry in rxe.sh rxe_rs.sh; do
		if grep -qE "^ok [0-9]+ selftests: drivers/infiniband/rxe_rs: $entry\$" "$out/kselftest.txt"; then
			pass "kselftest runner: $entry"
		else
			tail -n 40 "$out/kselftest.txt"
			fail "kselftest runner: $entry"
		fi
	done
fi
stage_end

# The kernel's own RDMA selftests (tools/testing/selftests/rdma, written for rdma_rxe),
# as shipped, through the kselftest runner of the in-tree build's install: one boot with
# rdma_rxe, one with rxe_rs installed in its place by make install as shipped (in copies
# of /lib/modules and /etc/modprobe.d: the guest tree is the cached one). Every test that
# passes on rxe must pass on rxe_rs.
stage_start "the kernel's rdma kselftests: rdma_rxe, and rxe_rs in its place"
if [ -z "$kselftest" ]; then
	fail "rdma kselftests: no kselftest install to run"
else
	for drv in rxe rxe_rs; do
		ks_share=$TOP_DIR/build/share-ksrdma-$drv
		rm -rf "$ks_share"
		mkdir -p "$ks_share/src/tools" "$ks_share/src/dist"
		cp -a "$kselftest" "$ks_share/kselftest"
		cp "$TOP_DIR/build/test/rxe_rs.ko" "$ks_share/"
		cp "$TOP_DIR/Makefile" "$ks_share/src/"
		cp "$TOP_DIR/tools/install.sh" "$ks_share/src/tools/"
		cp "$TOP_DIR/dist/rxe_rs.conf" "$ks_share/src/dist/"
		{
			if [ $drv = rxe_rs ]; then
				echo 'k=/lib/modules/$(uname -r)'
				echo 'cp -a $k /tmp/modules && mount --bind /tmp/modules $k'
				echo 'mkdir /tmp/modprobe.d && cp -a /etc/modprobe.d/. /tmp/modprobe.d/'
				echo 'mount --bind /tmp/modprobe.d /etc/modprobe.d'
				echo 'make -s -C /mnt/host/src install KO=/mnt/host/rxe_rs.ko'
			fi
			# What rdma-core's udev rules load on a real machine when an RDMA device
			# appears (the guest has no udev): rping needs /dev/infiniband/rdma_cm.
			echo 'modprobe -a rdma_cm rdma_ucm'
			echo 'cd /mnt/host/kselftest && ./run_kselftest.sh -c rdma'
		} > "$out/cmd-ksrdma-$drv.sh"
		"$TOOLS_DIR/vm-run.sh" --kernel test --share "$ks_share" --timeout 900 \
			"$out/cmd-ksrdma-$drv.sh" > "$out/ksrdma-$drv.console" 2>&1 || true
		tr -d '\r' < "$out/ksrdma-$drv.console" > "$out/ksrdma-$drv.txt"
	done
	# ksrdma DRIVER TEST: the runner's verdict line of TEST on DRIVER: ok, skip or fail.
	ksrdma() {
		local line
		line=$(grep -E "^(not )?ok [0-9]+ selftests: rdma: $2( |\$)" "$out/ksrdma-$1.txt" || true)
		case $line in
		"not ok"*) echo fail ;;
		*"# SKIP"*) echo skip ;;
		ok*) echo ok ;;
		*) echo fail ;;
		esac
	}
	for t in $(sed -n 's/^rdma://p' "$kselftest/kselftest-list.txt"); do
		r=$(ksrdma rxe "$t") rs=$(ksrdma rxe_rs "$t")
		if [ "$rs" = ok ]; then
			pass "rdma kselftest $t: rxe $r, rxe_rs $rs"
		elif [ "$r" != ok ]; then
			skip "rdma kselftest $t: rxe $r, rxe_rs $rs (does not pass on rxe either)"
		else
			grep -A 20 "selftests: rdma: $t" "$out/ksrdma-rxe_rs.txt" | take 30
			fail "rdma kselftest $t: rxe $r, rxe_rs $rs"
		fi
	done
fi
stage_end

# rdma-core's own suite (pyverbs) on both drivers, one boot each: parity by test ID.
# Every test that passes on rxe in this run must pass on rxe_rs (a skip there counts as
# a failure), and no test may fail or err on rxe_rs.
stage_start "rdma-core's test suite on rxe and rxe_rs (parity by test ID)"
suite=$TOP_DIR/build/rdma-core-tests
if "$TOOLS_DIR/rdma-core-suite.sh" > "$out/rdma-core-suite.log" 2>&1 &&
	[ -s "$suite/rxe.results" ] && [ -s "$suite/rxe_rs.results" ]; then
	grep -E '^(rxe|rxe_rs): |^tests whose outcome differs' "$out/rdma-core-suite.log" |
		sed "s|$TOP_DIR/||"
	bad=$(join -a1 -e - -o 0,1.2,2.2 "$suite/rxe.results" "$suite/rxe_rs.results" |
		awk '$2 == "ok" && $3 != "ok" { print $1 " (rxe ok, rxe_rs " $3 ")" }
			$3 == "FAIL" || $3 == "ERROR" { print $1 " (rxe " $2 ", rxe_rs " $3 ")" }' | sort -u)
	n_rxe=$(grep -c ' ok$' "$suite/rxe.results" || true)
	if [ -z "$bad" ]; then
		pass "pyverbs parity: all $n_rxe tests that pass on rxe pass on rxe_rs; none fails on rxe_rs"
	else
		echo "$bad" | while read -r t; do echo "pyverbs: $t"; done
		fail "pyverbs parity: $(echo "$bad" | wc -l) tests (see above and build/rdma-core-tests/)"
	fi
else
	tail -n 20 "$out/rdma-core-suite.log"
	fail "pyverbs: the suite could not be run on both drivers"
fi
stage_end

stage_start "debug kernel (KASAN, kmemleak, lockdep): rxe_rs alone"
if [ -n "${RXE_RS_SKIP_DEBUG:-}" ]; then
	# For quick local runs only; CI never sets it.
	skip "debug stage (RXE_RS_SKIP_DEBUG is set)"
elif [ -n "$debug_pids" ]; then
	# This core is free now: it runs the guests after the first that the first guest's
	# job has not started.
	(
		set +e
		run_debug_rest
	) &
	debug_pids="$debug_pids $!"
	wait $debug_pids || true
	echo "the debug guests ran for $(($(date +%s) - debug_t0))s (the first alongside the stages above, the others on whichever core was free)"
	for part in 1 2 3; do
		[ -r "$out/debug-$part.times" ] && read -r b e < "$out/debug-$part.times" &&
			echo "debug $part: started ${b}s and ended ${e}s after make check started"
	done
	: > "$out/debug.tap"
	for part in 1 2 3; do
		console=$out/debug-$part.console share=$TOP_DIR/build/share-debug-$part
		rc=$(cat "$out/debug-$part.rc" 2>/dev/null || echo 125)
		tap_of "$console" | tee -a "$out/debug.tap" > "$out/debug-$part.tap"
		slowest "$console"
		[ $rc = 0 ] && pass "debug $part: guest ran to completion" ||
			fail "debug $part: guest exited with $rc"
		n_ok=$(grep '^ok' "$out/debug-$part.tap" | grep -vc '# SKIP' || true)
		echo "debug $part: selftests on rxe_rs: $n_ok ok"
		for t in $(awk '/# SKIP not started: DEADLINE/ { print $3 }' "$out/debug-$part.tap"); do
			skip "debug $part: $t not started before the guest's DEADLINE (make check's time budget)"
		done
		[ "$n_ok" -gt 0 ] || fail "debug $part: no selftest passed"
		if grep -q '^sanitizer: kmemleak scanned' "$console" &&
			grep -q 'debug_locks:.*1' "$share/lockdep.txt" 2>/dev/null &&
			grep -q '^sanitizer: KASAN on' "$console"; then
			pass "debug $part: sanitizers active (KASAN, kmemleak, lockdep debug_locks=1)"
		else
			fail "debug $part: sanitizers not all active (lockdep: $(cat "$share/lockdep.txt" 2>/dev/null))"
		fi
		reports=$(grep -E 'BUG:|WARNING:|KASAN:|Oops|general protection|possible circular locking|inconsistent lock state|lockdep|ODEBUG' "$console" || true)
		if [ -z "$reports" ]; then
			pass "debug $part: no KASAN/lockdep/WARN/BUG report"
		else
			echo "$reports" | take 40
			fail "debug $part: kernel reports"
		fi
		if [ -s "$share/kmemleak.txt" ]; then
			head -n 60 "$share/kmemleak.txt"
			fail "debug $part: kmemleak reports leaks"
		else
			pass "debug $part: kmemleak clean"
		fi
	done
	# A test that fails on the debug kernel fails the run. (The listed differences are
	# where rxe fails or skips; rxe_rs passes every one of them.)
	for t in $(awk '$1 == "not" { print $4 }' "$out/debug.tap"); do
		fail "debug: selftest $t"
	done
else
	# The log is missing when the kernel build, not the module build, failed.
	cat "$out/build-debug.log" 2>/dev/null || true
	fail "debug: kernel, module or selftests build (clang-built kernel)"
fi
stage_end

echo "total wall time: $(($(date +%s) - T0))s"
if [ -s "$out/failures" ]; then
	echo "failed:"
	sed 's/^/  /' "$out/failures"
fi
if [ -s "$out/flaky" ]; then
	echo "flaky (failed once, passed when run again alone):"
	sed 's/^/  /' "$out/flaky"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
