# SPDX-License-Identifier: GPL-2.0
# Sourced by guest-tests.sh (HOOK=/mnt/host/cover-hook.sh) in a guest that runs under
# the counting plugin (tools/qemu-tbcount.c with req=/mnt/host/cover/$COVER_REQ,
# out=/mnt/host/cover/$COVER_PREFIX, delta=1 and seq=1): after each test, a snapshot of
# the code blocks that ran since the one before, written by the plugin, and a marker
# cover/module.ADDRESS-BUILDID for each rxe_rs module seen loaded meanwhile (looked
# for twice a second while the test runs, so that a module loaded and unloaded within a
# test, the KUnit build, is seen too). cover/index says which snapshot is which test's
# and which modules it saw; tools/coverage.py names the source files each test ran.
# Sourced again by the poller's bash (run_hook), which needs only the functions.
[ -d "$HOST/cover" ] || mkdir -p "$HOST/cover"
[ -p /tmp/cover-tick ] || mkfifo /tmp/cover-tick
cover_n=0

# cover_look: the rxe_rs loaded now, if any, into /tmp/cover-seen. /proc/modules is read
# with shell builtins alone (a process costs seconds on the debug kernel); only a module
# not seen before costs two processes: its .text address (the section files of sysfs
# cannot be read a byte at a time, as read does) and its build ID.
cover_last=
cover_look() {
	local name size refs deps state addr text id
	while read -r name size refs deps state addr; do
		[ "$name" = rxe_rs ] || continue
		if [ "$addr-$size" != "$cover_last" ]; then
			text=$(cat /sys/module/rxe_rs/sections/.text 2>/dev/null) || return 0
			id=$(od -An -tx1 /sys/module/rxe_rs/notes/.note.gnu.build-id | tr -d ' \n')
			# The note's header (sizes, type, "GNU\0") is 16 bytes.
			cover_marker=module.$text-${id#????????????????????????????????}
			[ -e "$HOST/cover/$cover_marker" ] || true > "$HOST/cover/$cover_marker"
			cover_last=$addr-$size
		fi
		echo "$cover_marker" >> /tmp/cover-seen
	done < /proc/modules
}

run_hook() {
	local i=0
	if [ "$1" = start ]; then
		cover_look
		# Twice a second without a process each time (a `sleep` is one, and costs about
		# 160 ms of the guest's CPU on the debug kernel): one bash that waits in a read
		# with a timeout on a FIFO that no one writes.
		HOST=$HOST bash -c '. "$0"; exec 3<> /tmp/cover-tick
			while :; do read -r -t 0.5 -u 3 _; cover_look; done' "$HOOK" &
		cover_poller=$!
		return 0
	fi
	kill "$cover_poller" 2>/dev/null
	wait "$cover_poller" 2>/dev/null
	cover_look
	# Snapshot N: asked for by cover/$COVER_REQ.N, there once cover/$COVER_PREFIX.N is
	# (qemu-tbcount.c with seq=1; both names are the boot's own, so a new boot after a
	# hung test finds no request of the last one). Not `:`, whose failed redirection
	# would end the shell.
	if ! true > "$HOST/cover/$COVER_REQ.$cover_n"; then
		echo "# cover: no snapshot after $2"
		return 0
	fi
	while [ ! -e "$HOST/cover/$COVER_PREFIX.$cover_n" ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	echo "$COVER_PREFIX.$cover_n $2 $(sort -u /tmp/cover-seen 2>/dev/null | tr '\n' ' ')" \
		>> "$HOST/cover/index"
	cover_n=$((cover_n + 1))
	: > /tmp/cover-seen
	# A module still loaded runs in the next snapshot too (the cleanup after this test).
	cover_look
}
