#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make check: the test suite CI runs; make check-full (TIER=full): everything, at length;
# make rxe-baseline (TIER=baseline): rxe's outcomes recorded anew, where they are stale.
#
# The run is a set of stages with dependencies, run three at a time on two cores as soon
# as what they need is there (tools/stages.sh). One budget bounds it all:
# RXE_RS_CHECK_BUDGET_S seconds from the start (75 minutes; CI stops a run at 90).
# Every guest gets as timeout what is left of the budget less the time the stages that
# must follow it need (deadline below), so that a hung guest costs its stage, never the
# run's verdicts: the run always ends with its stage table, its failures and one line
# `N passed, N failed, N skipped` (tests on rxe_rs; rxe's outcomes are the comparison),
# and exits non-zero on any failure.
#
# rxe's side of the side-by-side comparisons comes from its recorded outcomes
# (selftests/rxe-baseline/, tools/baseline.py): a test whose inputs changed since they
# were recorded runs on rxe in this run, and the run says so; `make rxe-baseline`
# records them anew. make check-full runs rxe live instead.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# One collation for every sort and join, the recorded files' included.
export LC_ALL=C
TIER=${TIER:-check}
case $TIER in check | full | baseline) ;; *) die "TIER is check, full or baseline" ;; esac
out=$TOP_DIR/build/check
# The guests' shares of the last run too: nothing of it may count in this one.
rm -rf "$out" "$TOP_DIR"/build/share-run-*
mkdir -p "$out"
# The tests' outcomes, rxe's recorded ones among them, are of guests whose vCPUs take
# turns on one host thread (tools/vm-run.sh).
unset RXE_RS_TCG_THREAD
T0=$(date +%s)
budget=${RXE_RS_CHECK_BUDGET_S:-4500}
[ "$TIER" != full ] || budget=${RXE_RS_CHECK_BUDGET_S:-14400}
# make check-full's debug kernel has the storage and file-system consumers, which its
# debug stages run too; make check's leaves them out (tools/build-kernel.sh).
[ "$TIER" != full ] || export RXE_RS_DEBUG_KERNEL=full
check_end=$((T0 + budget))
# The in-guest fuzzers run shorter in make check than their defaults: the verbs fuzzer
# 20 s instead of 60, the packet mutation fuzzer 30 s instead of 75 (as on the debug
# kernel); make check-full runs them at length, and the verbs fuzzer for 20 minutes more.
fuzz_env=
[ "$TIER" != check ] || fuzz_env="FUZZ_SECONDS=20 PKTFUZZ_SECONDS=30"
. "$TOOLS_DIR/stages.sh"
# The scripts the stages run (interop.sh, rdma-core-suite.sh) build nothing: the stages
# they depend on have.
export RXE_RS_BUILT=1

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
trap 'stages_kill; keep_logs || true' EXIT

# What every stage needs first: host packages and the toolchain tree (both cached; a
# fresh machine builds the tree here, before anything can run in it).
stage_start "host packages and toolchain tree"
"$TOOLS_DIR/install-host.sh"
rootfs_cached=cached
[ -f "$(rootfs_dir)/.complete" ] || rootfs_cached=built
"$TOOLS_DIR/bootstrap-rootfs.sh"
stage_end
stage_record prepare 0 "$(($(date +%s) - T0))" 0 0 "toolchain tree $rootfs_cached" 0

# deadline STAGE_TAIL: the seconds a guest started now may run, leaving STAGE_TAIL
# seconds of the budget for what must follow it in its stage (at least 60): the
# verdicts, two minutes, or the stage's next guests. Stages that run beside it need no
# share of it, and none runs after the guests but the side-by-side table.
deadline() {
	local d=$((check_end - $(date +%s) - $1))
	[ $d -ge 60 ] || d=60
	echo $d
}

# ---------------------------------------------------------------------------------------
# Host stages: no guest.

st_host_tests() {
	local crates c
	crates=$(find "$TOP_DIR" -name Cargo.toml -not -path "$TOP_DIR/build/*" -not -path '*/fuzz/*' -not -path '*/target/*' | sort)
	for c in $crates; do
		if (cd "$(dirname "$c")" && cargo test --quiet > "$out/cargo-test.log" 2>&1); then
			pass "cargo test $(dirname "${c#"$TOP_DIR"/}")"
		else
			cat "$out/cargo-test.log"
			fail "cargo test $(dirname "${c#"$TOP_DIR"/}")"
		fi
	done
	# The tools' own tests (tools/test_*.py: which changes make rxe's recorded outcomes
	# stale).
	if python3 -m unittest discover -s "$TOOLS_DIR" -p 'test_*.py' > "$out/tools-test.log" 2>&1; then
		pass "tools' tests ($(grep -o 'Ran [0-9]* tests' "$out/tools-test.log"))"
	else
		cat "$out/tools-test.log"
		fail "tools' tests"
	fi
	# rustfmt with the kernel's configuration.
	if in_rootfs sh -c 'cd /src && rustfmt --check --edition 2021 \
		--config-path /usr/src/linux-source-'"$KSERIES"'/.rustfmt.toml \
		drivers/infiniband/sw/rxe_rs/rxe_rs_main.rs drivers/infiniband/sw/rxe_rs/roce/lib.rs \
		samples/rdma_minimal/rdma_minimal.rs'; then
		pass "rustfmt"
	else
		fail "rustfmt"
	fi
	# The driver's files may name each other in one direction only, but for a module and
	# its own children (tools/modgraph.py prints the cycles it finds).
	if python3 "$TOOLS_DIR/modgraph.py"; then
		pass "module graph"
	else
		fail "module graph: an import cycle between the driver's files"
	fi
}

# The packet parser under libFuzzer for a bounded time. cargo-fuzz comes from crates.io
# into ~/.cargo (outside the checkout, so a warm run has it); stable rustc takes the
# nightly-only sanitizer flags with RUSTC_BOOTSTRAP=1. The corpus stays in build/, the
# build in the cache (cargo rebuilds what changed; a fresh clone's build took a minute).
st_fuzz() {
	local fuzz_dir=$TOP_DIR/drivers/infiniband/sw/rxe_rs/roce/fuzz secs=$1
	mkdir -p "$TOP_DIR/build/fuzz/corpus" "$TOP_DIR/build/fuzz/artifacts"
	if ! command -v cargo-fuzz >/dev/null && ! cargo install --quiet --locked cargo-fuzz --version 0.13.2; then
		fail "fuzz: cargo-fuzz could not be installed"
	# --foreground: in the stage's process group, which the end of the budget stops; it
	# signals cargo alone, so an input that hangs ends the fuzzer by itself (-timeout).
	elif (cd "$fuzz_dir" && RUSTC_BOOTSTRAP=1 timeout --foreground $((secs + 600)) cargo fuzz run \
		--target-dir "$RXE_RS_CACHE/cargo-fuzz-target" packet \
		"$TOP_DIR/build/fuzz/corpus" -- -max_total_time="$secs" -timeout=60 \
		-artifact_prefix="$TOP_DIR/build/fuzz/artifacts/" > "$out/fuzz.log" 2>&1); then
		pass "fuzz: packet parser, $(grep -o 'Done [0-9]* runs' "$out/fuzz.log" | tail -n 1) in $secs s, no crash"
	else
		tail -n 30 "$out/fuzz.log"
		fail "fuzz: the packet parser crashed or the fuzzer failed (see build/check/fuzz.log)"
	fi
}

# A kernel, from the cache or built (tools/build-kernel.sh).
# On an empty cache both are built side by side, at one priority: with the test kernel
# at nice 10, the debug kernel was built by 1218 s and its shard had ended by 2019 s,
# while the test kernel took until 2229 s and its selftests ran on alone after it.
st_kernel() {
	local flavor=$1
	"$TOOLS_DIR/build-kernel.sh" "$flavor" > /dev/null 2> "$out/kernel-$flavor.log" || {
		tail -n 40 "$out/kernel-$flavor.log"
		fail "$flavor kernel build"
		return 1
	}
	if grep -q "$flavor kernel $KVER" "$out/kernel-$flavor.log"; then
		stage_note "built"
		grep 'objects compiled' "$out/kernel-$flavor.log"
	else
		stage_note "cached"
	fi
}

# The module against the test kernel with CLIPPY=1 (warnings are errors). This build is
# the rxe_rs.ko every test-kernel guest loads.
st_module() {
	if ! "$TOOLS_DIR/build-module.sh" test CLIPPY=1 > "$out/build.log" 2>&1; then
		cat "$out/build.log"
		fail "module build with clippy"
		return 1
	fi
	pass "module build with clippy"
	share_module test
	# objtool (7.2) knows core's panics by name but not those of a division by zero
	# (their mangled names are a character shorter than its pattern): after a call to
	# one it believes the function goes on, and warns, or builds wrong unwind data. The
	# driver divides only where the compiler sees the divisor is not zero.
	if in_rootfs objdump -dr /src/build/test/rxe_rs.ko /src/build/test/rdma_minimal.ko |
		grep -E "panic_const_(div|rem)_by_zero" > "$out/divisions.txt"; then
		cat "$out/divisions.txt"
		fail "no division that objtool cannot follow (a call to a by-zero panic)"
	elif grep "objtool" "$out/build.log"; then
		fail "module build: objtool warnings"
	else
		pass "no objtool warning, no division by a divisor that may be zero"
	fi
}

# The test programs, the kernel-consumer module and rxe_rs with its KUnit suites, into
# the test guests' share.
st_share_test() {
	make_share test > "$out/share-test.log" 2>&1 || {
		cat "$out/share-test.log"
		fail "selftests build"
		return 1
	}
	pass "selftests build"
}

# The in-tree build: the driver grafted into the test kernel's source (tools/graft.sh),
# configured through its Kconfig and built by the kernel's own build, not M=; the
# selftests installed by the kselftest build beside that module (run by st_suites).
st_in_tree() {
	if "$TOOLS_DIR/graft-build.sh" > "$out/graft.path" 2> "$out/graft.log"; then
		if grep "objtool" "$out/graft.log"; then
			fail "in-tree build: objtool warnings"
		else
			pass "in-tree build"
		fi
	else
		tail -n 40 "$out/graft.log"
		fail "in-tree build"
		return 1
	fi
}

# DKMS: dkms.conf as shipped builds the module against the test kernel's build tree, and
# DKMS skips a kernel without Rust saying why (tools/dkms-check.sh).
st_dkms() {
	if "$TOOLS_DIR/dkms-check.sh" > "$out/dkms.log" 2>&1; then
		pass "dkms build"
	else
		tail -n 40 "$out/dkms.log"
		fail "dkms build"
	fi
}

st_debug_build() {
	local module
	"$TOOLS_DIR/build-module.sh" debug > "$out/build-debug.log" 2>&1 &
	module=$!
	make_share debug > "$out/share-debug.log" 2>&1 || {
		cat "$out/share-debug.log"
		fail "debug kernel: KUnit module and selftests build (clang)"
		wait "$module" || tail -n 40 "$out/build-debug.log"
		return 1
	}
	if wait "$module"; then
		share_module debug
		pass "debug kernel: module, KUnit module and selftests build (clang)"
	else
		tail -n 40 "$out/build-debug.log"
		fail "debug kernel: module build (clang)"
		return 1
	fi
}

# ---------------------------------------------------------------------------------------
# Guests.

# The TAP result lines of a guest's console (the serial console ends lines with CR).
tap_of() {
	tr -d '\r' < "$1" | grep -E '^(not )?ok [0-9]+ |^Bail out!' || true
}

# The five tests that took longest in a guest's console (guest-tests.sh's `# time`
# lines), on one line: where a guest's time goes when it comes near its timeout.
slowest() {
	tr -d '\r' < "$1" | awk '$1 == "#" && $2 == "time" { print $5, $4 }' | sort -rn |
		take 5 | awk '{ printf "%s%s %s s", (NR > 1 ? ", " : "slowest tests: "), $2, $1 } END { if (NR) print "" }'
}

# only_tests: guest-tests.sh's ONLY= for the test names on standard input, one a line.
only_tests() { echo "ONLY='^($(paste -sd '|'))\$'"; }

# half_of_tests HALF: every other test of guest-tests.sh in their order (as its
# `selected` finds them), the first one's half for HALF 1, so that slow neighbours
# spread over both halves; one a line.
half_of_tests() {
	awk -v h="$1" '$1 == "run" && ++n % 2 == h % 2 { print $2 }' "$TOP_DIR/selftests/guest-tests.sh"
}

# guest_tests NAME KERNEL SHARE TAIL ENV: guest-tests.sh (ENV in its environment) in
# guests of KERNEL until it went through, into $out/NAME.tap and $out/NAME.console; the
# guests see a copy of SHARE of their own, build/share-run-NAME (guests may run side by
# side, and each writes its command, console and status into its share). A test that
# hangs or kills the guest is recorded as `not ok N TEST # HUNG`, with the console's
# tail, and the run goes on after it in a new boot (three boots at most). Each boot may
# take what is left of the budget less TAIL seconds; a guest that made no progress (no
# test started or ended) for 10 minutes is stopped as hung. COVER=1 runs the guests
# under the counting plugin, with selftests/cover-hook.sh taking a snapshot of the
# module's code that ran after each test, into the share's cover/.
guest_tests() {
	local name=$1 kernel=$2 share=$TOP_DIR/build/share-run-$1 tail=$4 env=$5 after= boots=0 rc hung
	local plugin=() cover= n
	rm -rf "$share"
	cp -a "$3" "$share"
	rm -rf "$share/kmemleak.txt" "$share/lockdep.txt" "$share/cover"
	: > "$out/$name.tap"
	: > "$out/$name.console"
	while :; do
		boots=$((boots + 1))
		if [ -n "${COVER:-}" ]; then
			mkdir -p "$share/cover"
			plugin=(--plugin "$(tbcount_plugin),req=$share/cover/count-req.b$boots,out=$share/cover/count.b$boots,min=ffffffffa0000000,delta=1,seq=1")
			cover="HOOK=/mnt/host/cover-hook.sh COVER_PREFIX=count.b$boots COVER_REQ=count-req.b$boots"
		fi
		printf 'cd /mnt/host && %s %s AFTER=%s sh %s\n' "$cover" "$env" "$after" \
			"${GUEST_SCRIPT:-guest-tests.sh}" > "$out/cmd-$name.sh"
		set +e
		"$TOOLS_DIR/vm-run.sh" --kernel "$kernel" --share "$share" "${plugin[@]}" \
			--timeout "$(deadline "$tail")" --idle 600 "$out/cmd-$name.sh" > "$out/$name.boot" 2>&1
		rc=$?
		set -e
		cat "$out/$name.boot" >> "$out/$name.console"
		tap_of "$out/$name.boot" >> "$out/$name.tap"
		# The plan line `1..N` ends a run that went through.
		tr -d '\r' < "$out/$name.boot" | matches '^1\.\.[0-9]+$' && break
		echo "guest $name, boot $boots, ended early (exit $rc); the console's last lines:"
		tr -d '\r' < "$out/$name.boot" | tail -n 30 | sed 's/^/  | /'
		# The test that was running: the last one started that has no result line.
		hung=$(tr -d '\r' < "$out/$name.boot" | awk '
			$1 == "#" && $2 == "start" { n = $3; t = $4 }
			($1 == "ok" && $3 == t) || ($1 == "not" && $4 == t) { t = "" }
			END { if (t != "") print n, t }')
		[ -n "$hung" ] || break
		echo "not ok $hung # HUNG: the guest hung or died in this test (boot $boots)" >> "$out/$name.tap"
		[ $boots -lt 3 ] && [ "$(deadline "$tail")" -gt 60 ] || break
		after=${hung#* }
	done
	rm -f "$out/$name.boot"
	slowest "$out/$name.console"
	n=$(grep -c '^ok' "$out/$name.tap" || true)
	stage_note "$n ok in $boots boot(s)"
}

# The key of what rxe's outcomes depend on besides the tests: the test kernel's guest as
# vm-run.sh describes it (QEMU's arguments, with the kernel's and the toolchain tree's
# cache keys in their paths: the kernel's version and configuration, the tree's package
# list), the guest tree's packages at their versions, and the guest's init.
# Computed once a run (the stages that need it run side by side: the file is renamed in
# place whole).
rxe_env_key() {
	local tmp=$out/rxe-env.key.$BASHPID
	if [ ! -s "$out/rxe-env.key" ]; then
		{
			"$TOOLS_DIR/vm-run.sh" --kernel test --describe
			dpkg-query --admindir="$(rootfs_dir)/var/lib/dpkg" -W
		} | cache_key - "$TOOLS_DIR/guest-init.sh" > "$tmp" && mv "$tmp" "$out/rxe-env.key" ||
			{ rm -f "$tmp"; return 1; }
	fi
	cat "$out/rxe-env.key"
}
baseline_dir=$TOP_DIR/selftests/rxe-baseline

# Every test on rxe_rs, in two guests side by side (two stages): half HALF (1 or 2) of
# the tests, every other one in their order, so that the slow ones spread (515 and 534 s
# of tests in one run); one guest for all of them was the run's longest chain, about
# 1100 s, and alone at its end with a core idle.
st_selftests_rxe_rs() {
	local half=$1 only
	only=$(half_of_tests "$half" | only_tests)
	guest_tests "rxe_rs-$half" test "$TOP_DIR/build/share-test" 120 "DRIVER=rxe_rs $fuzz_env $only"
	[ -s "$out/rxe_rs-$half.tap" ] ||
		{ tail -n 40 "$out/rxe_rs-$half.console"; fail "guest run on rxe_rs ($half) produced no results"; }
}

# rxe's outcomes: recorded, but for the tests whose key changed (all of them in make
# check-full), which run on rxe here. $out/rxe.outcomes has TEST OUTCOME for every test.
st_selftests_rxe() {
	local env stale n_stale n_all
	env=$(rxe_env_key)
	python3 "$TOOLS_DIR/baseline.py" keys --env "$env" > "$out/rxe.keys"
	n_all=$(wc -l < "$out/rxe.keys")
	if [ "$TIER" = full ]; then
		stale=$(awk '{ print $1 }' "$out/rxe.keys")
	else
		stale=$(python3 "$TOOLS_DIR/baseline.py" stale --env "$env" "$baseline_dir/selftests.txt")
		python3 "$TOOLS_DIR/baseline.py" outcomes --env "$env" "$baseline_dir/selftests.txt" \
			> "$out/rxe.outcomes"
	fi
	n_stale=$(printf '%s' "$stale" | grep -c . || true)
	if [ "$n_stale" = 0 ]; then
		echo "rxe: all $n_all tests' outcomes from selftests/rxe-baseline/selftests.txt"
		stage_note "rxe: $n_all of $n_all recorded"
		return 0
	fi
	echo "rxe: $n_stale of $n_all tests run here (their inputs changed since rxe's outcomes were recorded):"
	echo "$stale" | tr '\n' ' ' | fold -s -w 88 | sed 's/^/  /'
	echo
	guest_tests rxe test "$TOP_DIR/build/share-test" 120 \
		"DRIVER=rxe $(echo "$stale" | only_tests)"
	# This run's outcomes beside the recorded ones, and a baseline file with them (one
	# run: make rxe-baseline records two).
	cp "$baseline_dir/selftests.txt" "$out/rxe-baseline.txt"
	python3 "$TOOLS_DIR/baseline.py" record --env "$env" "$out/rxe-baseline.txt" "$out/rxe.tap"
	python3 "$TOOLS_DIR/baseline.py" outcomes --env "$env" "$out/rxe-baseline.txt" > "$out/rxe.outcomes"
	[ "$TIER" = full ] || echo "note: \`make rxe-baseline\` records rxe's outcomes of these tests (twice) in selftests/rxe-baseline/; commit them"
	stage_note "rxe: $((n_all - n_stale)) of $n_all recorded, $n_stale run"
}

# outcome FILE TEST -> ok | FAIL | hung | skip | -
outcome() {
	awk -v t="$2" '
		$1 == "ok" && $3 == t { print ($0 ~ /# SKIP/) ? "skip" : "ok"; found = 1; exit }
		$1 == "not" && $4 == t { print ($0 ~ /# HUNG/) ? "hung" : "FAIL"; found = 1; exit }
		END { if (!found) print "-" }' "$1"
}
listed() { grep -qE "^$1[[:space:]]" "$TOP_DIR/selftests/differences.txt"; }

# Every rxe_rs test against rxe's outcome. A failure on rxe_rs is one, listed or not: the
# listed differences (selftests/differences.txt) are tests that rxe fails or skips. A
# test that hung rxe's guest says nothing against the test: no process may hang a
# kernel. An rxe outcome that differed between its recorded runs (flaky) decides
# nothing: the verdict is rxe_rs's own.
st_side_by_side() {
	local t a b verdict
	cat "$out/rxe_rs-1.tap" "$out/rxe_rs-2.tap" > "$out/rxe_rs.tap"
	cat "$out/rxe_rs-1.console" "$out/rxe_rs-2.console" > "$out/rxe_rs.console"
	printf '%-44s %-6s %-6s %s\n' test rxe rxe_rs verdict
	for t in $(awk '{ print $1 }' "$out/rxe.keys"); do
		a=$(awk -v t="$t" '$1 == t { print $2 }' "$out/rxe.outcomes")
		a=${a:--}
		b=$(outcome "$out/rxe_rs.tap" "$t")
		verdict=pass
		if [ "$b" = FAIL ] || [ "$b" = hung ]; then
			verdict="FAIL"
		elif [ "$a" = hung ]; then
			verdict="pass (rxe hung)"
		elif [ "$a" = flaky ]; then
			verdict="pass (rxe flaky)"
		elif [ "$a" != "$b" ]; then
			if listed "$t"; then verdict="pass (listed difference)"; else verdict="FAIL (differs from rxe)"; fi
		fi
		[ "$b" = skip ] && [ "${verdict%% *}" = pass ] && verdict=skip
		[ "$b" = - ] && verdict="FAIL (did not run)"
		printf '%-44s %-6s %-6s %s\n' "$t" "$a" "$b" "$verdict"
		case $verdict in
		FAIL*) record FAIL "side by side: $t: $verdict (rxe $a, rxe_rs $b)" ;;
		skip) record SKIP "side by side: $t" ;;
		*) record PASS "side by side: $t" ;;
		esac
	done | tee "$out/report.txt"
	if awk '$4 ~ /^FAIL/ { found = 1 } END { exit !found }' "$out/report.txt"; then
		echo "--- details of failures on rxe_rs:"
		awk '/^not ok/ { p = 1; print; next } /^(ok|not ok) / { p = 0 } p && /^#/' "$out/rxe_rs.console" | take 60
	fi
}

# Wire interop: a guest with C rxe and one with rxe_rs on one link (tools/interop.sh);
# every test must pass on both sides.
st_interop() {
	local report=$TOP_DIR/build/interop/report.txt t a b verdict
	# The big READ at 16 MiB in make check, 256 MiB (as `make interop`) in make
	# check-full: over this lossy link it goes at under 1 MB/s (64 MiB took 312 s beside
	# two other guests); 16 MiB is 16384 responses of 1 KiB, 64 of the responder's runs of
	# 256 packets (param::RUN_BUDGET).
	local big=$((16 << 20))
	[ "$TIER" != full ] || big=$((256 << 20))
	READ_BIG=$big GUEST_TIMEOUT=$(deadline 120) "$TOOLS_DIR/interop.sh" \
		> "$out/interop.log" 2>&1 || true
	if [ ! -s "$report" ]; then
		tail -n 20 "$out/interop.log"
		fail "interop: no results"
		return
	fi
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
	grep -E '^link:|NETDEV WATCHDOG|stopped' "$out/interop.log" || true
	slowest "$TOP_DIR/build/interop/b.tap"
	# The first failure of each side, with what its test printed.
	if awk '$4 != "" { found = 1 } END { exit !found }' "$report"; then
		for side in a b; do
			grep -m 1 -A 30 '^not ok' "$TOP_DIR/build/interop/$side.tap" | sed "s/^/$side: /" || true
		done
	fi
}

# The commands of a guest that runs the kernel's rdma kselftests on DRIVER: rdma_rxe, or
# rxe_rs installed in its place by make install as shipped (in copies of /lib/modules
# and /etc/modprobe.d: the guest tree is the cached one).
ksrdma_cmd() {
	if [ "$1" = rxe_rs ]; then
		echo 'k=/lib/modules/$(uname -r)'
		echo 'cp -a $k /tmp/modules && mount --bind /tmp/modules $k'
		echo 'mkdir /tmp/modprobe.d && cp -a /etc/modprobe.d/. /tmp/modprobe.d/'
		echo 'mount --bind /tmp/modprobe.d /etc/modprobe.d'
		echo 'make -s -C /mnt/host/src install KO=/mnt/host/rxe_rs.ko'
	fi
	# What rdma-core's udev rules load on a real machine when an RDMA device appears
	# (the guest has no udev): rping needs /dev/infiniband/rdma_cm.
	echo 'modprobe -a rdma_cm rdma_ucm'
	echo 'cd /mnt/host/kselftest && ./run_kselftest.sh -c rdma'
}

# The kernel's own RDMA selftests (tools/testing/selftests/rdma, written for rdma_rxe)
# on DRIVER, through the kselftest runner of the in-tree build's install, into
# $out/ksrdma-DRIVER.txt.
ksrdma_run() {
	local drv=$1 kselftest=$2 ks_share=$TOP_DIR/build/share-ksrdma-$1
	rm -rf "$ks_share"
	mkdir -p "$ks_share/src/tools" "$ks_share/src/dist"
	cp -a "$kselftest" "$ks_share/kselftest"
	cp "$TOP_DIR/build/test/rxe_rs.ko" "$ks_share/"
	cp "$TOP_DIR/Makefile" "$ks_share/src/"
	cp "$TOP_DIR/tools/install.sh" "$ks_share/src/tools/"
	cp "$TOP_DIR/dist/rxe_rs.conf" "$ks_share/src/dist/"
	ksrdma_cmd "$drv" > "$out/cmd-ksrdma-$drv.sh"
	"$TOOLS_DIR/vm-run.sh" --kernel test --share "$ks_share" --timeout "$(deadline 300)" \
		"$out/cmd-ksrdma-$drv.sh" > "$out/ksrdma-$drv.console" 2>&1 || true
	tr -d '\r' < "$out/ksrdma-$drv.console" > "$out/ksrdma-$drv.txt"
}

# ksrdma_results DRIVER: TEST OUTCOME (ok, skip, fail, or - when the runner printed no
# verdict) for every test the runner lists.
ksrdma_results() {
	local t line
	for t in $(sed -n 's/^rdma://p' "$(cat "$out/graft.path")/kselftest-list.txt"); do
		line=$(grep -E "^(not )?ok [0-9]+ selftests: rdma: $t( |\$)" "$out/ksrdma-$1.txt" || true)
		case $line in
		"not ok"*) echo "$t fail" ;;
		*"# SKIP"*) echo "$t skip" ;;
		ok*) echo "$t ok" ;;
		*) echo "$t -" ;;
		esac
	done
}

# The keys of rxe's recorded outcomes of the kernel's rdma kselftests and of pyverbs,
# from rxe_env_key's ENV: what else their outcomes depend on (make check and make
# rxe-baseline must agree on them).
ksrdma_key() { ksrdma_cmd rxe | cache_key - "$TOOLS_DIR/graft-build.sh" <(echo "$1"); }
pyverbs_key() { cache_key "$TOOLS_DIR/rdma-core-suite.sh" <(echo "$1"); }

# suite_baseline NAME KEY: whether rxe's recorded outcomes of suite NAME have key KEY
# (then they are in $out/NAME-rxe.results, TEST OUTCOME, the outcome `flaky` where the
# recorded runs differ).
# recorded_key NAME: the key of rxe's recorded outcomes of suite NAME.
recorded_key() { sed -n 's/^# key //p' "$baseline_dir/$1.txt" 2>/dev/null; }
suite_baseline() {
	local f=$baseline_dir/$1.txt
	[ "$(recorded_key "$1")" = "$2" ] || return 1
	awk '!/^#/ && NF >= 2 { o = $2; for (i = 3; i <= NF; i++) if ($i != o) o = "flaky"; print $1, o }' \
		"$f" > "$out/$1-rxe.results"
}

# The suites of the in-tree build and of rdma-core, in guests of the test kernel: the
# kselftest runner over the in-tree module's install (a few tests through each entry,
# the KUnit suites among them), the kernel's rdma kselftests on rxe_rs in rdma_rxe's
# place, and rdma-core's pyverbs suite on rxe_rs. Every test that passes on rxe must
# pass on rxe_rs; rxe's outcomes are recorded (selftests/rxe-baseline/) or, when their
# key changed, measured here.
st_suites() {
	local kselftest ks_share entry env key r rs t bad n_rxe rec=
	kselftest=$(cat "$out/graft.path")
	env=$(rxe_env_key)

	ks_share=$TOP_DIR/build/share-kselftest
	rm -rf "$ks_share"
	mkdir -p "$ks_share"
	cp -a "$kselftest" "$ks_share/kselftest"
	echo "cd /mnt/host/kselftest && ONLY='^(link_add|alloc_dealloc_pd|create_cq|kernel_consumer_verbs|kunit_suites)\$' ./run_kselftest.sh" \
		> "$out/cmd-kselftest.sh"
	"$TOOLS_DIR/vm-run.sh" --kernel test --share "$ks_share" --timeout "$(deadline 400)" \
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

	# The kernel's rdma kselftests.
	key=$(ksrdma_key "$env")
	ksrdma_run rxe_rs "$kselftest"
	ksrdma_results rxe_rs > "$out/ksrdma-rxe_rs.results"
	if [ "$TIER" = check ] && suite_baseline ksrdma "$key"; then
		rec="ksrdma recorded"
	else
		ksrdma_run rxe "$kselftest"
		ksrdma_results rxe > "$out/ksrdma-rxe.results"
		{ echo "# key $key"; cat "$out/ksrdma-rxe.results"; } > "$out/ksrdma.txt"
		cp "$out/ksrdma-rxe.results" "$out/ksrdma-rxe.results.live"
		echo "rxe: the kernel's rdma kselftests run here (their inputs changed since rxe's outcomes were recorded)"
		rec="ksrdma run"
	fi
	while read -r t rs; do
		r=$(awk -v t="$t" '$1 == t { print $2 }' "$out/ksrdma-rxe.results")
		# A test rxe does not pass either is named as skipped, unless rxe's runs differed
		# (flaky) or gave no verdict: then rxe_rs's outcome alone decides.
		if [ "$rs" = ok ]; then
			pass "rdma kselftest $t: rxe ${r:--}, rxe_rs $rs"
		elif [ "$r" = fail ] || [ "$r" = skip ]; then
			skip "rdma kselftest $t: rxe ${r:--}, rxe_rs $rs (does not pass on rxe either)"
		else
			grep -A 20 "selftests: rdma: $t" "$out/ksrdma-rxe_rs.txt" | take 30 || true
			fail "rdma kselftest $t: rxe $r, rxe_rs $rs"
		fi
	done < "$out/ksrdma-rxe_rs.results"

	# rdma-core's own suite (pyverbs): parity by test ID. Every test that passes on rxe
	# must pass on rxe_rs (a skip there counts as a failure), and no test may fail or err
	# on rxe_rs.
	local suite=$TOP_DIR/build/rdma-core-tests drivers=rxe_rs
	key=$(pyverbs_key "$env")
	if [ "$TIER" = check ] && suite_baseline pyverbs "$key"; then
		rec="$rec, pyverbs recorded"
	else
		drivers="rxe rxe_rs"
		rec="$rec, pyverbs run"
	fi
	if DRIVERS=$drivers GUEST_TIMEOUT=$(deadline 120) "$TOOLS_DIR/rdma-core-suite.sh" \
		> "$out/rdma-core-suite.log" 2>&1 && [ -s "$suite/rxe_rs.results" ]; then
		if [ "$drivers" != rxe_rs ]; then
			{ echo "# key $key"; cat "$suite/rxe.results"; } > "$out/pyverbs.txt"
			cp "$suite/rxe.results" "$out/pyverbs-rxe.results"
			echo "rxe: pyverbs run here (its inputs changed since rxe's outcomes were recorded)"
		fi
		grep -E '^(rxe|rxe_rs): ' "$out/rdma-core-suite.log" | sed "s|$TOP_DIR/||"
		bad=$(join -a1 -e - -o 0,1.2,2.2 "$out/pyverbs-rxe.results" "$suite/rxe_rs.results" |
			awk '$2 == "ok" && $3 != "ok" { print $1 " (rxe ok, rxe_rs " $3 ")" }
				$3 == "FAIL" || $3 == "ERROR" { print $1 " (rxe " $2 ", rxe_rs " $3 ")" }' | sort -u)
		bad=$bad$(join -v2 "$out/pyverbs-rxe.results" "$suite/rxe_rs.results" |
			awk '$2 == "FAIL" || $2 == "ERROR" { print "\n" $1 " (rxe -, rxe_rs " $2 ")" }')
		n_rxe=$(grep -c ' ok$' "$out/pyverbs-rxe.results" || true)
		if [ -z "$bad" ]; then
			pass "pyverbs parity: all $n_rxe tests that pass on rxe pass on rxe_rs; none fails on rxe_rs"
		else
			echo "$bad" | sed '/^$/d; s/^/pyverbs: /'
			fail "pyverbs parity: $(echo "$bad" | sed '/^$/d' | wc -l) tests (see above and build/rdma-core-tests/)"
		fi
	else
		tail -n 20 "$out/rdma-core-suite.log"
		fail "pyverbs: the suite could not be run on rxe_rs"
	fi
	stage_note "$rec"
}

# The debug kernel (KASAN, kmemleak, lockdep), rxe_rs alone (selftests/sanitized.sh), in
# two guests side by side (two stages): in make check half HALF (1 or 2) of its shard
# (selftests/debug-shard.txt), split by the seconds each test took there so that the
# halves take about as long; in make check-full every other test of all (sanitized.sh
# leaves some out). One guest for the whole shard took 682 s, the run's longest chain
# warm, and alone on a core at the end of a cold run for 330 s.
st_debug() {
	local half=$1 name=debug-$1 share console reports n_ok only
	share=$TOP_DIR/build/share-run-$name
	if [ "$TIER" = check ]; then
		# Longest first, each to the half with the fewest seconds so far.
		only=$(grep -v '^#' "$TOP_DIR/selftests/debug-shard.txt" |
			awk 'NF { print $1, ($2 ~ /^[0-9]+$/ ? $2 : 10) }' | sort -k2,2rn -k1,1 |
			awk -v h="$half" '{ i = t[1] <= t[2] ? 1 : 2; t[i] += $2; if (i == h) print $1 }' |
			only_tests)
	else
		only=$(half_of_tests "$half" | only_tests)
	fi
	COVER=1 GUEST_SCRIPT=sanitized.sh guest_tests "$name" debug "$TOP_DIR/build/share-debug" 120 \
		"$fuzz_env $only"
	console=$out/$name.console
	n_ok=$(grep '^ok' "$out/$name.tap" | grep -vc '# SKIP' || true)
	echo "$name: selftests on rxe_rs: $n_ok ok"
	[ "$n_ok" -gt 0 ] || fail "$name: no selftest passed"
	for t in $(awk '$1 == "not" { print $4 }' "$out/$name.tap"); do
		fail "debug: selftest $t"
	done
	for t in $(awk '$1 == "ok" && /# SKIP/ { print $3 }' "$out/$name.tap"); do
		skip "debug: selftest $t"
	done
	if grep -q '^sanitizer: kmemleak scanned' "$console" &&
		grep -q 'debug_locks:.*1' "$share/lockdep.txt" 2>/dev/null &&
		grep -q '^sanitizer: KASAN on' "$console"; then
		pass "$name: sanitizers active (KASAN, kmemleak, lockdep debug_locks=1)"
	else
		fail "$name: sanitizers not all active (lockdep: $(cat "$share/lockdep.txt" 2>/dev/null))"
	fi
	reports=$(grep -E 'BUG:|WARNING:|KASAN:|Oops|general protection|possible circular locking|inconsistent lock state|lockdep|ODEBUG' "$console" || true)
	if [ -z "$reports" ]; then
		pass "$name: no KASAN/lockdep/WARN/BUG report"
	else
		echo "$reports" | take 40
		fail "$name: kernel reports"
	fi
	if [ -s "$share/kmemleak.txt" ]; then
		take 60 < "$share/kmemleak.txt"
		fail "$name: kmemleak reports leaks"
	else
		pass "$name: kmemleak clean"
	fi
}

# What of the driver and of rust/ ran under the sanitizers, in both debug guests
# (tools/coverage.py).
st_debug_coverage() {
	if python3 "$TOOLS_DIR/coverage.py" --json "$out/debug-coverage.json" \
		"$TOP_DIR/build/share-run-debug-1/cover" "$TOP_DIR/build/share-run-debug-2/cover" \
		"$TOP_DIR/build/debug/rxe_rs.ko" "$TOP_DIR/build/kunit-debug/rxe_rs.ko" \
		> "$out/debug-coverage.txt" 2>&1; then
		pass "debug: every file of the driver and of rust/ with code in the module ran under the sanitizers"
	else
		fail "debug: $(tail -n 1 "$out/debug-coverage.txt")"
	fi
	cat "$out/debug-coverage.txt"
}

# make rxe-baseline (TIER=baseline): rxe's outcomes recorded anew, of the tests whose key
# changed (ALL=1: of every test), from two runs on two guests side by side; the kernel's
# rdma kselftests and pyverbs twice on rxe, where their keys changed (or ALL=1).
st_baseline_selftests_rxe() {
	local run=$1 env stale
	env=$(rxe_env_key)
	if [ -n "${ALL:-}" ]; then
		stale=$(python3 "$TOOLS_DIR/baseline.py" keys --env "$env" | awk '{ print $1 }')
	else
		stale=$(python3 "$TOOLS_DIR/baseline.py" stale --env "$env" "$baseline_dir/selftests.txt")
	fi
	if [ -z "$stale" ]; then
		echo "rxe: every test's recorded outcomes are its own"
		return 0
	fi
	echo "rxe: run $run of $(echo "$stale" | wc -l) tests"
	guest_tests "rxe-$run" test "$TOP_DIR/build/share-test" 120 \
		"DRIVER=rxe $(echo "$stale" | only_tests)"
}
st_baseline_suites_rxe() {
	local kselftest env key run
	kselftest=$(cat "$out/graft.path")
	env=$(rxe_env_key)
	key=$(ksrdma_key "$env")
	if [ -n "${ALL:-}" ] || [ "$(recorded_key ksrdma)" != "$key" ]; then
		for run in 1 2; do
			ksrdma_run rxe "$kselftest"
			ksrdma_results rxe | sort > "$out/ksrdma-rxe-$run.results"
			if awk '$2 == "-" { found = 1 } END { exit !found }' "$out/ksrdma-rxe-$run.results"; then
				tail -n 40 "$out/ksrdma-rxe.txt"
				fail "rxe: the kernel's rdma kselftests, run $run: a test without a verdict"
				return 1
			fi
		done
		{
			echo "# rxe's outcomes of the kernel's rdma kselftests (make rxe-baseline), two runs"
			echo "# key $key"
			join "$out/ksrdma-rxe-1.results" "$out/ksrdma-rxe-2.results"
		} > "$baseline_dir/ksrdma.txt"
		echo "rxe: the kernel's rdma kselftests recorded"
	fi
	key=$(pyverbs_key "$env")
	if [ -n "${ALL:-}" ] || [ "$(recorded_key pyverbs)" != "$key" ]; then
		for run in 1 2; do
			DRIVERS=rxe "$TOOLS_DIR/rdma-core-suite.sh" > "$out/rdma-core-suite-$run.log" 2>&1
			cp "$TOP_DIR/build/rdma-core-tests/rxe.results" "$out/pyverbs-rxe-$run.results"
			grep '^rxe: ' "$out/rdma-core-suite-$run.log"
		done
		{
			echo "# rxe's outcomes of rdma-core's test suite (make rxe-baseline), two runs"
			echo "# key $key"
			join -a1 -a2 -e - -o 0,1.2,2.2 "$out/pyverbs-rxe-1.results" "$out/pyverbs-rxe-2.results"
		} > "$baseline_dir/pyverbs.txt"
		echo "rxe: pyverbs recorded"
	fi
}
st_baseline_record() {
	local env run
	env=$(rxe_env_key)
	[ -n "$(python3 "$TOOLS_DIR/baseline.py" stale --env "$env" "$baseline_dir/selftests.txt")" ] ||
		[ -n "${ALL:-}" ] || return 0
	for run in 1 2; do
		[ -s "$out/rxe-$run.tap" ] || { fail "rxe: run $run gave no results"; return 1; }
	done
	python3 "$TOOLS_DIR/baseline.py" record --env "$env" "$baseline_dir/selftests.txt" \
		"$out/rxe-1.tap" "$out/rxe-2.tap"
	echo "rxe: outcomes recorded in selftests/rxe-baseline/selftests.txt; differing runs:"
	python3 "$TOOLS_DIR/baseline.py" outcomes --env "$env" "$baseline_dir/selftests.txt" |
		awk '$2 == "flaky"' | sed 's/^/  /'
}

# ---------------------------------------------------------------------------------------
# The stages, in the order they are preferred when two are ready; a stage starts once
# those it names have ended well.
stage kernel-test "" st_kernel test
stage module "kernel-test" st_module
stage share-test "kernel-test" st_share_test
if [ "$TIER" = baseline ]; then
	mkdir -p "$baseline_dir"
	stage rxe-1 "module share-test" st_baseline_selftests_rxe 1
	stage rxe-2 "module share-test" st_baseline_selftests_rxe 2
	stage in-tree "kernel-test" st_in_tree
	stage suites-rxe "in-tree" st_baseline_suites_rxe
	stage record "rxe-1 rxe-2" st_baseline_record
	stages_run
	stages_table | tee "$out/stages.txt"
	stages_summary
	exit
fi
stage selftests-rxe_rs-1 "module share-test" st_selftests_rxe_rs 1
stage selftests-rxe_rs-2 "module share-test" st_selftests_rxe_rs 2
stage kernel-debug "" st_kernel debug
stage debug-build "kernel-debug" st_debug_build
stage debug-1 "debug-build" st_debug 1
stage debug-2 "debug-build" st_debug 2
stage debug-coverage "debug-build ~debug-1 ~debug-2" st_debug_coverage
stage in-tree "kernel-test" st_in_tree
stage selftests-rxe "module share-test" st_selftests_rxe
# Early in the order, so that the verdicts take the first free slot (last, they waited
# behind the fuzzer in a run whose budget ran out, and were stopped unprinted).
stage side-by-side "selftests-rxe_rs-1 selftests-rxe_rs-2 selftests-rxe" st_side_by_side
stage interop "module" st_interop
stage suites "in-tree module" st_suites
stage dkms "kernel-test" st_dkms
stage host-tests "" st_host_tests
# (make check-full runs the parser at length in tools/fuzz.sh.)
stage fuzz "" st_fuzz "${RXE_RS_FUZZ_SECONDS:-60}"
if [ "$TIER" = full ]; then
	# Both use the debug guests' share, after the debug stages.
	stage stress "debug-build ~debug-1 ~debug-2" "$TOOLS_DIR/stress.sh"
	stage fuzz-verbs "debug-build ~stress" "$TOOLS_DIR/fuzz.sh"
fi
stages_run

echo "total wall time: $(($(date +%s) - T0))s (budget ${budget}s)"
stages_table | tee "$out/stages.txt"
set +e
stages_summary | tee "$out/summary.txt"
rc=${PIPESTATUS[0]}
set -e
# make check-full's last result, where a closing note can cite it (commit it).
if [ "$TIER" = full ]; then
	{
		echo "make check-full at $(git -C "$TOP_DIR" rev-parse --short HEAD 2>/dev/null)$(
			git -C "$TOP_DIR" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)'),"
		echo "ended $(date -u +%Y-%m-%dT%H:%MZ) after $(($(date +%s) - T0)) s: $(tail -n 1 "$out/summary.txt")"
		echo
		cat "$out/stages.txt"
		echo
		grep -E '^(FAIL|SKIP) ' "$out/results" || true
		echo
		cat "$out/debug-coverage.txt" 2>/dev/null || true
	} > "$TOP_DIR/Documentation/check-full-last.txt"
fi
exit "$rc"
