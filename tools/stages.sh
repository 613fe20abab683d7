# SPDX-License-Identifier: GPL-2.0
# The stages of make check (tools/check.sh), sourced by it after lib.sh: a stage is a
# command with the stages it needs; stages_run runs them, RXE_RS_CHECK_SLOTS at a time
# (one more than the cores: a test kernel's guest keeps its core busy two thirds of the
# time, and with one stage per core 15 % of the CPU stood idle over a run), each as soon
# as those it needs have ended well, in the order they were
# declared where several are ready, and stops what still runs at the budget's end
# ($check_end). Each stage's output goes to $out/stage-NAME.log and is printed whole
# when it ends; its wall and CPU time (its processes and all they waited for, guests
# included) go to the stage table.
#
# Results: pass, fail and skip (or record PASS|FAIL|SKIP TEXT) append a line to
# $out/results from any stage; stages_summary counts them.

set -m # each stage in a process group of its own, which stages_kill can stop whole

declare -A st_cmd st_needs st_state st_pid st_start
st_order=()
st_running=0
slots=${RXE_RS_CHECK_SLOTS:-$(($(nproc) + 1))}

record() {
	printf '%s %s\n' "$1" "$2" >> "$out/results"
	printf '%s %s\n' "$1" "$2"
}
pass() { record PASS "$1"; }
fail() { record FAIL "$1"; }
skip() { record SKIP "$1"; }

# stage_note TEXT: what the stage table says of the running stage (a cache hit, say).
stage_note() { printf '%s\n' "$*" >> "$out/stage-$STAGE.note"; }

# stage NAME "NEEDS..." COMMAND...: NEEDS are stages that must have ended well, or
# ~STAGE for one that must have ended, well or not.
stage() {
	local name=$1 needs=$2
	shift 2
	st_cmd[$name]=$(printf '%q ' "$@")
	st_needs[$name]=$needs
	st_state[$name]=waiting
	st_order+=("$name")
}

# stage_record NAME START END USER SYS NOTE RC: one row of the stage table.
stage_record() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$out/stages.tsv"
}

# Seconds of `times` output (0m1.250s) as a whole number.
secs_of() {
	local m=${1%%m*} s=${1#*m}
	s=${s%s}
	echo $((m * 60 + ${s%.*}))
}

# Runs stage NAME in this (sub)shell and exits with its status.
stage_exec() {
	local name=$1 t0 rc u s note
	STAGE=$name
	t0=$(date +%s)
	set +e
	(
		set -e
		eval "${st_cmd[$name]}"
	) > "$out/stage-$name.log" 2>&1
	rc=$?
	# The CPU time of the stage's processes, and of everything they waited for (from this
	# shell: `times` in a pipeline would report a subshell's children).
	times > "$out/stage-$name.times"
	{ read -r _ _ && read -r u s; } < "$out/stage-$name.times"
	note=$(paste -sd ';' "$out/stage-$name.note" 2>/dev/null || true)
	stage_record "$name" "$((t0 - T0))" "$(($(date +%s) - T0))" "$(secs_of "$u")" \
		"$(secs_of "$s")" "$note" "$rc"
	exit $rc
}

# stages_kill: stops every stage still running (the budget's end, or the run's).
stages_kill() {
	local n
	for n in "${st_order[@]}"; do
		[ "${st_state[$n]}" = running ] || continue
		kill -TERM -- "-${st_pid[$n]}" 2>/dev/null || true
	done
}

stages_run() {
	local n d ok pid rc progress alarm
	# A stage of its own that ends at the budget's end, less a minute for the summary.
	sleep $((check_end - $(date +%s) - 60 > 1 ? check_end - $(date +%s) - 60 : 1)) \
		> /dev/null 2>&1 &
	alarm=$!
	while :; do
		progress=1
		while [ $progress = 1 ]; do
			progress=0
			for n in "${st_order[@]}"; do
				[ "${st_state[$n]}" = waiting ] || continue
				ok=1
				for d in ${st_needs[$n]}; do
					# ~NAME: once NAME has ended, well or not.
					if [ "${d#\~}" != "$d" ]; then
						case ${st_state[${d#\~}]} in done | failed | skipped) ;; *) ok=0 ;; esac
						continue
					fi
					case ${st_state[$d]} in
					done) ;;
					failed | skipped)
						st_state[$n]=skipped
						record FAIL "stage $n: not run, as $d did not end well"
						progress=1
						ok=0
						break
						;;
					*) ok=0 ;;
					esac
				done
				[ $ok = 1 ] && [ "$st_running" -lt "$slots" ] || continue
				printf '==> %s: started at %ss\n' "$n" "$(($(date +%s) - T0))"
				stage_exec "$n" &
				st_pid[$n]=$!
				st_start[$n]=$(($(date +%s) - T0))
				st_state[$n]=running
				st_running=$((st_running + 1))
				progress=1
			done
		done
		if [ "$st_running" = 0 ]; then
			# What still waits needs a stage that does not exist, or itself.
			for n in "${st_order[@]}"; do
				[ "${st_state[$n]}" = waiting ] || continue
				record FAIL "stage $n: never ready (needs: ${st_needs[$n]})"
			done
			break
		fi
		set +e
		wait -n -p pid
		rc=$?
		set -e
		if [ "$pid" = "$alarm" ]; then
			for n in "${st_order[@]}"; do
				[ "${st_state[$n]}" = running ] || continue
				record FAIL "stage $n: still running at the end of the budget (${budget}s): stopped"
				printf '%s\n' "--- $n: the last lines of its log:"
				tail -n 20 "$out/stage-$n.log" | sed 's/^/  | /'
				stage_record "$n" "${st_start[$n]}" "$(($(date +%s) - T0))" 0 0 \
					"stopped at the budget's end" 124
			done
			stages_kill
			# (The shell's word on each job it stopped says nothing more.)
			{ wait; } 2>/dev/null
			for n in "${st_order[@]}"; do
				[ "${st_state[$n]}" != running ] || st_state[$n]=failed
				[ "${st_state[$n]}" = waiting ] || continue
				st_state[$n]=skipped
				record FAIL "stage $n: not started before the end of the budget"
			done
			break
		fi
		for n in "${st_order[@]}"; do
			[ "${st_pid[$n]:-}" = "$pid" ] && [ "${st_state[$n]}" = running ] || continue
			st_running=$((st_running - 1))
			if [ $rc = 0 ]; then
				st_state[$n]=done
			else
				st_state[$n]=failed
				# A stage that failed without saying why.
				grep -q "^FAIL " "$out/stage-$n.log" ||
					record FAIL "stage $n: exited with $rc"
			fi
			printf '==> %s: ended at %ss (exit %s)\n' "$n" "$(($(date +%s) - T0))" "$rc"
			sed 's/^/  /' "$out/stage-$n.log"
		done
	done
	kill "$alarm" 2>/dev/null || true
	{ wait "$alarm"; } 2>/dev/null || true
}

# The stage table: start and end (seconds since the run's start), wall and CPU time,
# and the stage's notes (what came from the cache).
stages_table() {
	echo "stage                 start    end   wall    cpu(user+sys)  exit  notes"
	sort -t $'\t' -k2,2n "$out/stages.tsv" | awk -F '\t' '{
		printf "%-20s %6d %6d %6d %8d (%d+%d) %5s  %s\n", $1, $2, $3, $3 - $2, $4 + $5, $4, $5, $7, $6
		cpu += $4 + $5
	} END { printf "CPU time of all stages: %ds\n", cpu }'
}

stages_summary() {
	local p f s
	touch "$out/results"
	p=$(grep -c '^PASS ' "$out/results" || true)
	f=$(grep -c '^FAIL ' "$out/results" || true)
	s=$(grep -c '^SKIP ' "$out/results" || true)
	if [ "$f" != 0 ]; then
		echo "failed:"
		sed -n 's/^FAIL /  /p' "$out/results"
	fi
	if [ -s "$out/flaky" ]; then
		echo "flaky (failed once, passed when run again alone):"
		sed 's/^/  /' "$out/flaky"
	fi
	echo "$p passed, $f failed, $s skipped"
	[ "$f" = 0 ]
}
