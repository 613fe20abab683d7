#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In-guest tests of one driver, TAP on stdout.
#
#   DRIVER=rxe|rxe_rs sh guest-tests.sh
#
# Expects the share at /mnt/host with rxe_rs.ko, rxe_rs_kunit.ko, kverbs_test.ko,
# bin/verbs_basic, bin/verbs_objects, bin/destroy_traffic, bin/hostile_iova,
# bin/isolation, bin/hostile_budget, bin/verbs_fuzz and bin/verbs_failnth. After each test, `run`
# deletes whatever devices and test netdevs are left and brings eth0 back up.
#
# HOST and BIN say where else these are (the kselftest entries rxe.sh and rxe_rs.sh set
# both to their own directory); rxe_rs.ko not found there is loaded as installed. The
# exit status is 1 if a test failed.
DRIVER=${DRIVER:?DRIVER=rxe|rxe_rs}
HOST=${HOST:-/mnt/host}
BIN=${BIN:-$HOST/bin}
VB=$BIN/verbs_basic
VO=$BIN/verbs_objects
DT=$BIN/destroy_traffic
HI=$BIN/hostile_iova
IS=$BIN/isolation
HB=$BIN/hostile_budget
DEV=tdev0
tap_n=0

KVER=$(uname -r)
case $DRIVER in
rxe)
	MOD=rdma_rxe
	KO=$(modinfo -n rdma_rxe)
	load() { modprobe rdma_rxe; }
	unload() { modprobe -r rdma_rxe; }
	;;
rxe_rs)
	MOD=rxe_rs
	KO=$HOST/rxe_rs.ko
	[ -f "$KO" ] || KO=$(modinfo -n rxe_rs 2>/dev/null)
	load() { insmod "$KO"; }
	unload() { rmmod rxe_rs; }
	;;
*) echo "Bail out! unknown driver $DRIVER"; exit 1 ;;
esac

devices() { rdma link show 2>/dev/null | awk '{print $2}' | cut -d/ -f1; }
add() { rdma link add "$1" type "$DRIVER" netdev "$2"; }
# Deletes every RDMA device, with no process started when there is none: on the debug
# kernel each process costs seconds, and `run` calls this after every test.
del_all() {
	for d in /sys/class/infiniband/*; do
		[ -e "$d" ] && rdma link delete "${d##*/}"
	done
}
# Seconds since boot in hundredths into $run_now, from shell builtins alone (/proc/uptime
# has two decimals).
uptime_cs() { read -r run_now _ < /proc/uptime; run_now=${run_now%.*}${run_now#*.}; }
# Waits until a command succeeds, for at most WAIT_S seconds (20; the debug kernel's run
# sets more). Bounded in time, not in tries: where starting a process takes seconds,
# fifty tries of a command took ten minutes, and kept the CPU from the process waited for.
WAIT_S=${WAIT_S:-20}
wait_for() {
	local end
	uptime_cs; end=$((run_now + WAIT_S * 100))
	while ! "$@" >/dev/null 2>&1; do
		uptime_cs; [ "$run_now" -ge $end ] && return 1
		sleep 0.2
	done
}
# port_state PORT_ACTIVE|PORT_DOWN: the port of $DEV is in that state, read from sysfs
# ("4: ACTIVE"), without a process.
port_state() {
	local st
	read -r st < "/sys/class/infiniband/$DEV/ports/1/state" && [ "${st#*: }" = "${1#PORT_}" ]
}
port_active() { port_state PORT_ACTIVE; }
# deadline_in S sets $deadline S seconds from now; in_time holds until it has passed.
deadline_in() { uptime_cs; deadline=$((run_now + $1 * 100)); }
in_time() { uptime_cs; [ "$run_now" -lt "$deadline" ]; }
no_device() { [ -z "$(devices)" ]; }

# ONLY=regex runs just the matching tests (for working on one or at length); EXCEPT=regex
# leaves the matching ones out. Both are applied here, once, to this script's own list.
selected=$(awk '$1 == "run" { print $2 }' "$0" | grep -E "${ONLY:-.}" | grep -vE "${EXCEPT:-^$}" |
	tr '\n' ' ')

# HOOK=FILE (a file of the share) may define run_hook, which `run` calls with `start
# NAME` before each test and `end NAME` after it (selftests/cover-hook.sh: snapshots of
# the code each test ran, on make check's debug kernel).
run_hook() { :; }
[ -z "${HOOK:-}" ] || . "$HOOK"

# run NAME FUNCTION: one TAP line; exit status 4 of the function means skip.
run() {
	local before_after=
	# AFTER=NAME leaves out the tests up to NAME and NAME itself, numbering them still
	# (make check's new boot after a test hung the guest), whether NAME is selected or not.
	if [ -n "${AFTER:-}" ]; then
		[ "$1" = "$AFTER" ] && AFTER=
		before_after=1
	fi
	case " $selected " in *" $1 "*) ;; *) return ;; esac
	tap_n=$((tap_n + 1))
	[ -z "$before_after" ] || return
	uptime_cs; run_t0=$run_now
	# Which test was running, should the guest hang or die in it.
	echo "# start $tap_n $1"
	run_hook start "$1"
	"$2" > /tmp/test.log 2>&1
	rc=$?
	run_hook end "$1"
	# How long it took, for finding where a slow guest's time goes.
	uptime_cs; run_t0=$((run_now - run_t0))
	echo "# time $tap_n $1 $((run_t0 / 100)).$((run_t0 / 10 % 10)) s"
	if [ $rc = 0 ]; then
		echo "ok $tap_n $1"
		# VERBOSE=1 shows what passing tests printed too.
		if [ -n "${VERBOSE:-}" ]; then sed 's/^/#   /' /tmp/test.log; fi
	elif [ $rc = 4 ]; then
		echo "ok $tap_n $1 # SKIP $(tail -n 1 /tmp/test.log)"
	else
		echo "not ok $tap_n $1"
		tap_failed=1
		sed 's/^/#   /' /tmp/test.log
	fi
	# What a test may leave behind, each looked for first (see del_all).
	del_all >/dev/null 2>&1
	[ -e /sys/class/net/tveth0 ] && ip link del tveth0 >/dev/null 2>&1
	[ -e /var/run/netns/tpeer ] && ip netns del tpeer >/dev/null 2>&1
	[ -e /var/run/netns/tns ] && ip netns del tns >/dev/null 2>&1
	[ -e /var/run/netns/tinit ] && ip netns delete tinit >/dev/null 2>&1
	[ -e /sys/class/net/tbond0 ] && ip link del tbond0 >/dev/null 2>&1
	# Back to shared namespaces (t_netns_exclusive), once the test's are gone.
	[ -e /tmp/netns_exclusive ] && wait_for rdma system set netns shared && rm /tmp/netns_exclusive
	read -r fl 2>/dev/null < /sys/class/net/eth0/flags
	[ $((fl & 1)) = 1 ] || ip link set eth0 up
}

with_dev() { add "$DEV" eth0 || return 1; wait_for port_active || { echo "port not active"; return 1; }; }

# The device is listed, and names its netdev in sysfs (`parent`, which scripts read).
t_link_add() {
	with_dev && rdma link show "$DEV/1" && [ "$(devices)" = "$DEV" ] || return 1
	[ "$(cat "/sys/class/infiniband/$DEV/parent")" = eth0 ] ||
		{ echo "parent: $(cat "/sys/class/infiniband/$DEV/parent")"; return 1; }
}
t_ibv_devices() { with_dev && ibv_devices | grep -qw "$DEV"; }
t_devinfo_port() {
	with_dev && ibv_devinfo -v -d "$DEV" > /tmp/devinfo &&
		grep -q 'state:.*PORT_ACTIVE' /tmp/devinfo &&
		grep -q 'link_layer:.*Ethernet' /tmp/devinfo &&
		grep -q '::ffff:10.0.2.15, RoCE v2' /tmp/devinfo ||
		{ cat /tmp/devinfo; return 1; }
}
t_open_query() { with_dev && "$VB" "$DEV" open_query; }
t_gid_roce_v2() { with_dev && "$VB" "$DEV" gid; }
t_alloc_pd() { with_dev && "$VB" "$DEV" pd; }
t_alloc_pd_many() { with_dev && "$VB" "$DEV" pd_many; }
t_close_with_pd() { with_dev && "$VB" "$DEV" close_with_pd && "$VB" "$DEV" pd; }
t_create_cq() { with_dev && "$VB" "$DEV" create_cq; }
# Completion queues (verbs_objects.c says what each check asserts).
vo() { with_dev && "$VO" "$DEV" "$1"; }
t_cq_sizes() { vo cq_sizes; }
t_cq_bad() { vo cq_bad; }
t_cq_resize() { vo cq_resize; }
t_cq_notify() { vo cq_notify; }
t_cq_many() { vo cq_many; }
t_cq_close() { vo cq_close; }
t_cq_killed() { vo cq_killed; }
t_cq_ring_after_destroy() { vo cq_ring_after_destroy; }
# Queue pairs and destroy semantics.
t_qp_create() { vo qp_create; }
t_qp_create_bad() { vo qp_create_bad; }
t_qp_states() { vo qp_states; }
t_qp_bad_modify() { vo qp_bad_modify; }
t_qp_query() { vo qp_query; }
t_qp_err_flush() { vo qp_err_flush; }
t_qp_destroy_states() { vo qp_destroy_states; }
# rxe_rs also counts what happened: two acknowledgement timeouts (retry_cnt 1), one
# retransmission, one WQE out of retries.
t_qp_retry_once() {
	local t e r
	with_dev || return 1
	t=$(counter ack_timeouts); e=$(counter retry_exceeded_err); r=$(counter retransmits)
	"$VO" "$DEV" qp_retry_exceeded_once || return 1
	[ "$DRIVER" = rxe_rs ] || return 0
	t=$(($(counter ack_timeouts) - t)); e=$(($(counter retry_exceeded_err) - e))
	r=$(($(counter retransmits) - r))
	echo "ack_timeouts +$t, retransmits +$r, retry_exceeded_err +$e"
	[ "$t" = 2 ] && [ "$r" = 1 ] && [ "$e" = 1 ]
}
t_qp_fatal() { vo qp_fatal_cq_overrun; }
# The destroys again with a peer process streaming SEND, WRITE and READ at the QP being
# destroyed (destroy_traffic.c says what each round checks): in RTS, ERR, SQD and RTR in
# turn, and on an SRQ destroyed after it (RTS and ERR). DESTROY_TRAFFIC_ROUNDS rounds
# each (the debug kernel's run sets fewer). The device's counters follow, for the log.
export DESTROY_TRAFFIC_ROUNDS=${DESTROY_TRAFFIC_ROUNDS:-20}
dt() {
	local drc
	with_dev || return 1
	"$DT" "$DEV" "$1"; drc=$?
	rdma statistic show link "$DEV/1"
	return $drc
}
t_destroy_traffic() { dt qp; }
t_destroy_traffic_srq() { dt srq; }
t_busy() { vo busy; }
t_cq_destroy_unpolled() { vo cq_destroy_unpolled; }
t_qp_event_ack() { vo qp_event_ack; }
t_qp_many() { vo qp_many; }
t_qp_killed() { vo qp_killed; }
t_srq_modify() { vo srq_modify; }
t_srq_bad() { vo srq_bad; }
t_srq_busy() { vo srq_busy; }
t_srq_last_wqe() { vo srq_last_wqe; }
t_srq_limit_event() { vo srq_limit_event; }
t_ah() { vo ah; }
t_mr() { vo mr; }
t_mw() { vo mw; }
t_mcast_busy() { vo mcast_busy; }
# Conformance where the verbs decide (issue 16, item 7; verbs_objects.c says what each
# check asserts).
t_inline_not_for_read() { vo inline_not_for_read; }
t_acked_before_destroy() { vo acked_before_destroy; }
t_create_qp_response_fault() { vo create_qp_response_fault; }
t_err_flush_recorded_producer() { vo err_flush_recorded_producer; }
t_ud_too_long() { vo ud_too_long_dropped; }
t_ud_too_long_srq() { vo ud_too_long_srq; }
t_recv_in_err() { vo recv_in_err_flushed; }
t_mw_zero_based() { vo mw_zero_based; }
t_mr_rereg() { vo mr_rereg; }
t_mr_rereg_window() { vo mr_rereg_window; }
t_limits_creatable() { vo limits_creatable; }
t_send_before_rts() { vo send_before_rts_refused; }
t_rc_send_too_long() { vo rc_send_too_long; }
t_atomic_not_8_bytes() { vo atomic_not_8_bytes; }
t_mw_type2_life() { vo mw_type2_life; }
t_send_inv_empty() { vo send_inv_empty; }
t_srq_keys_pd() { vo srq_keys_of_srq_pd; }
t_destroy_ipis() { vo destroy_no_ipi_storm; }
t_mcast_lids() {
	if [ "$DRIVER" = rxe ]; then echo "rxe: the second detach fails and the QP outlives its process"; return 4; fi
	vo mcast_lids
}
t_close_with_all() { vo close_with_all; }
t_cq_overflow() { vo cq_overflow; }
# C rxe cannot take it: each destroy of a QP whose send ring holds garbage times out
# after about 53 s ("cleanup failed, err = -110"), 16 of them in this test.
t_hostile_rings() {
	if [ "$DRIVER" = rxe ]; then echo "rxe: destroy of a QP with a garbage send ring hangs"; return 4; fi
	vo hostile_rings
}
# Hostile send WQEs, one class each: every one ends in an error completion (or a failed
# doorbell) and the device keeps working. C rxe oopses on three of them, so they do not
# run there: an opcode beyond its table (it indexes the table with it: a page fault in
# rxe_requester), the kernel-only REG_MR opcode, and inline data that claims 1 GiB (its
# requester trusts both).
t_hostile_wqes() {
	with_dev || return 1
	for c in opcode kernel_opcode inline sge_count sge_overflow lkey; do
		if [ "$DRIVER" = rxe ] && { [ $c = opcode ] || [ $c = kernel_opcode ] || [ $c = inline ]; }; then
			echo "$c: not run on rxe"; continue
		fi
		"$VO" "$DEV" "hostile_wqe_$c" || { echo "class $c failed"; return 1; }
	done
}
# Addresses at the top of the 64-bit iova space (hostile_iova.c says what each case
# does): an MR may end exactly at 2^64 but not pass it; SGEs and remote ranges that
# start in such an MR and pass 2^64 end in error completions (and write nothing outside
# what they may), and what ends exactly at 2^64 works. Every case runs on its own (one
# that exits 4 skips and says why) and all of them run on rxe too: none crashes it. The
# errors differ where only "an error" is asserted: a receive that cannot be placed ends
# in LOC_QP_OP_ERR on rxe, LOC_PROT_ERR on rxe_rs, and the sender gets REM_OP_ERR on
# both (on rxe_rs a message longer than the receive WQE ends it in LOC_LEN_ERR and the
# sender gets REM_INV_REQ_ERR);
# a SEND or WRITE whose own SGE passes 2^64 completes with WR_FLUSH_ERR on rxe (its
# requester fails the WQE and moves the QP to ERR, and its completer then flushes that
# WQE with the rest), LOC_PROT_ERR on rxe_rs.
iova_cases() {
	local c r rc=0
	with_dev || return 1
	for c in "$@"; do
		"$HI" "$DEV" "$c"; r=$?
		[ $r = 0 ] || [ $r = 4 ] || { echo "case $c failed"; rc=1; }
	done
	return $rc
}
t_iova_mr_reg() { iova_cases mr_reg; }
t_iova_last() {
	iova_cases fetch_add_last cmp_swap_last write_last read_last send_from_last \
		recv_into_last read_into_last send_last_then_low recv_last_then_low flush_last
}
t_iova_recv() { iova_cases recv_cross recv_at recv_end_at_top; }
t_iova_remote() { iova_cases write_cross write_at read_cross read_at; }
t_iova_local() { iova_cases gather_cross gather_at write_gather_cross scatter_cross scatter_at; }
# Isolation (isolation.c says what each check asserts): a memory window bind across
# PDs of two processes, a UD work request naming another process's AH, invalidation
# of a type 2 window through a QP it is not bound to, random key bytes; receive WQEs
# that end with a completion: a malformed one (RC, UD), a READ whose MR is deregistered
# while its responses go.
# veth_link: a veth pair into a new peer namespace tpeer, 10.9.0.1 on tveth0 here and
# 10.9.0.2 on tveth1 there, both up.
veth_link() {
	ip netns add tpeer && ip link add tveth0 type veth peer name tveth1 netns tpeer || return 1
	ip addr add 10.9.0.1/24 dev tveth0 && ip link set tveth0 up || return 1
	ip -n tpeer addr add 10.9.0.2/24 dev tveth1 && ip -n tpeer link set tveth1 up
}
is() { with_dev && "$IS" "$DEV" "$1"; }
t_isol_mw_bind() { is mw_bind_other_pd; }
t_isol_ud_ah() { is ud_other_ah; }
# A kernel consumer's AH (kverbs_test hold_ah=1 keeps one) and every other AH number but
# the process's own: no UD SEND of the process goes out with one.
t_isol_ud_kernel_ah() {
	local rc
	with_dev || return 1
	insmod "$HOST/kverbs_test.ko" dev="$DEV" hold_ah=1 || return 1
	dmesg | grep -o 'kverbs_test: holding.*' | tail -n 1
	"$IS" "$DEV" ud_kernel_ah; rc=$?
	rmmod kverbs_test || return 1
	return $rc
}
# C rxe oopses (a NULL pointer in rxe_invalidate_mw, from rxe_receiver) on the SEND with
# invalidate of a window bound to another QP: never run there.
t_isol_inv() {
	if [ "$DRIVER" = rxe ]; then echo "rxe: invalidating a window bound to another QP oopses rxe"; return 4; fi
	is inv_other_qp
}
t_isol_keys() { is keys_random; }
t_isol_recv_rc() { is recv_malformed_rc; }
t_isol_recv_ud() { is recv_malformed_ud; }
t_isol_read_dereg() { is read_dereg; }
# Raw packets from a peer namespace at live QPs of isolation.c's "live" check (see
# roce_send.py --isol): a FLUSH naming placement type 0 (RC), two UC FIRST packets, MIDDLE
# packets shorter than the MTU (RC and UC). The program checks what arrived; rxe_rs must
# also answer the short RC MIDDLE with a NAK (invalid request) and both FLUSH probes,
# whatever their key, with the same NAK.
isol_field() { sed -n "s/^ready.* $1=\([0-9]*\).*/\1/p" /tmp/isol.out; }
t_isol_live() {
	rm -f /tmp/isol_go
	veth_link || return 1
	add "$DEV" tveth0 && wait_for port_state PORT_ACTIVE || return 1
	ISOL_GO=/tmp/isol_go timeout 120 "$IS" "$DEV" live > /tmp/isol.out 2>&1 &
	ipid=$!
	i=0
	while ! grep -q '^ready ' /tmp/isol.out; do
		i=$((i + 1))
		if [ $i -gt 150 ] || ! kill -0 $ipid 2>/dev/null; then
			echo "isolation live not ready:"; kill $ipid 2>/dev/null; wait $ipid; cat /tmp/isol.out; return 1
		fi
		sleep 0.2
	done
	ip netns exec tpeer timeout 60 python3 "$HOST/roce_send.py" --isol 10.9.0.2 10.9.0.1 0x100 \
		"$(isol_field r1)" "$(isol_field r2)" "$(isol_field r3)" "$(isol_field u1)" \
		"$(isol_field u2)" "$(isol_field rkey)" "$(isol_field va)" > /tmp/isol.sent 2>&1
	src=$?
	touch /tmp/isol_go
	wait $ipid
	irc=$?
	cat /tmp/isol.sent
	echo "isolation live exited $irc:"; sed 's/^/  /' /tmp/isol.out
	[ $src = 0 ] && [ $irc = 0 ] || return 1
	ans=$(grep '^answers ' /tmp/isol.sent)
	r1=$(echo "$ans" | sed -n 's/.* r1=\([^ ]*\).*/\1/p')
	r2=$(echo "$ans" | sed -n 's/.* r2=\([^ ]*\).*/\1/p')
	r3=$(echo "$ans" | sed -n 's/.* r3=\([^ ]*\).*/\1/p')
	case "$r2,$r3" in *ACK*|*RESP*) echo "a FLUSH of placement type 0 was carried out"; return 1 ;; esac
	[ "$r2" = "$r3" ] || { echo "the FLUSH probes' answers tell the keys apart: $r2 / $r3"; return 1; }
	[ "$DRIVER" = rxe_rs ] || return 0
	case "$r1" in *NAK61*) ;; *) echo "r1: want a NAK invalid request for the short MIDDLE"; return 1 ;; esac
	[ "$r2" = NAK61 ] || { echo "FLUSH: want one NAK invalid request, got $r2"; return 1; }
}
# alive PID: process PID exists and is not a zombie.
alive() {
	local st
	read -r st 2>/dev/null < "/proc/$1/stat" || return 1
	st=${st##*) }
	[ "${st%% *}" != Z ]
}
# ends_within SECONDS PID: the exit status of background process PID of this shell once
# it ended, or 124 if it still runs after SECONDS (it is left running).
ends_within() {
	local end
	uptime_cs; end=$((run_now + $1 * 100))
	while alive "$2"; do
		uptime_cs; [ "$run_now" -ge $end ] && return 124
		sleep 0.2
	done
	wait "$2"
}
# The tasks asleep uninterruptibly, each with the top of its kernel stack.
blocked_tasks() {
	local t
	for t in /proc/[0-9]*; do
		[ "$(sed 's/.*) //' "$t/stat" 2>/dev/null | cut -d' ' -f1)" = D ] || continue
		echo "  ${t#/proc/} $(cat "$t/comm" 2>/dev/null):"
		head -n 12 "$t/stack" 2>/dev/null | sed 's/^/    /'
	done
}
# An on-demand MR's page fault that sleeps forever (issue 14, item 8): the MR maps a file
# of stall9p.py's 9p mount, whose server holds every read until told to answer. While
# the driver's fault sleeps in such a read, isolation.c's odp_stuck_fault check destroys
# the QP, the MR, the CQs and the PD and closes the device, each within 5 s; then
# `rdma link delete` must end before the fault does, within ODP_STUCK_S seconds (20; the
# debug kernel's run gives more: a delete took 24 s there with the host's cores shared by
# three guests), and rmmod too (refusing, since a fault is pending, or unloading). Then
# the server answers, the module must be gone (unloaded or unloadable) within WAIT_S,
# comes back, and the kernel logged no report.
# Every wait is bounded without waiting for the process itself (`ends_within`): a task
# asleep in the kernel ignores even SIGKILL, and `wait` for it would hang the guest.
# C rxe faults the pages in inside its QP task and its destroy waits for that task:
# there the check would hang the guest until the end, so it skips. ODP_STUCK_IN_OWNER=1
# has the MR's owner run the verbs itself (see isolation.c).
STALL_MNT=/tmp/stall9p
# odp_stall_start: the start of the stalling-file tests: skips on rxe (exit status 4;
# its QP task faults the pages in and its destroy waits for that task: the guest would
# hang), notes the kernel log's length in $n0, mounts stall9p.py's file system at
# $STALL_MNT (its marker file $mark), the server's pid in $spid and its timeout(1)'s in
# $tpid, then adds the device.
odp_stall_start() {
	if [ "$DRIVER" = rxe ]; then
		echo "rxe: its QP task faults the pages in and its destroy waits for that task: the guest would hang"
		return 4
	fi
	n0=$(dmesg | wc -l)
	umount -l "$STALL_MNT" 2>/dev/null
	mkdir -p "$STALL_MNT" && rm -f "$mark" || return 1
	timeout 600 python3 "$HOST/stall9p.py" "$STALL_MNT" --marker "$mark" > /tmp/stall9p.out 2>&1 &
	tpid=$!
	if ! wait_for grep -q '^mounted ' /tmp/stall9p.out; then
		echo "stall9p.py did not mount:"; cat /tmp/stall9p.out; kill $tpid 2>/dev/null; return 1
	fi
	spid=$(sed -n 's/^mounted .* pid \([0-9]*\)$/\1/p' /tmp/stall9p.out)
	with_dev || { odp_stall_end "$spid"; return 1; }
}
t_odp_stuck_fault() {
	local n0 spid tpid cpid vpid dpid rpid crc drc rrc t p lines rc=0 mark=/tmp/stall9p.read
	odp_stall_start || return $?
	ODP_STUCK_FILE=$STALL_MNT/f ODP_STUCK_MARKER=$mark \
		timeout -k 5 60 "$IS" "$DEV" odp_stuck_fault > /tmp/odp_stuck.out 2>&1 &
	cpid=$!
	ends_within 70 $cpid; crc=$?
	lines=$(wc -l < /tmp/odp_stuck.out)
	cat /tmp/odp_stuck.out
	vpid=$(sed -n 's/^verbs in .*, pid \([0-9]*\) .*/\1/p' /tmp/odp_stuck.out)
	case $crc in
	0) ;;
	4) odp_stall_end "$spid"; return 4 ;;
	124) echo "the check did not end within 70 s"; rc=1 ;;
	*) echo "the check failed ($crc)"; rc=1 ;;
	esac
	grep -q '^read pending' /tmp/stall9p.out && echo "tasks asleep uninterruptibly while the fault sleeps:" &&
		blocked_tasks
	# Not under timeout(1): it cannot end a task asleep in the kernel either, and its
	# SIGKILL to its process group ends itself, leaving the task to no one's wait.
	t=$(date +%s)
	rdma link delete "$DEV" &
	dpid=$!
	ends_within "${ODP_STUCK_S:-20}" $dpid; drc=$?
	echo "rdma link delete: exit $drc after $(($(date +%s) - t)) s$([ $drc = 124 ] && echo ' (still running)')"
	[ $drc = 0 ] || rc=1
	t=$(date +%s)
	rmmod "$MOD" > /tmp/odp_rmmod.out 2>&1 &
	rpid=$!
	ends_within "${ODP_STUCK_S:-20}" $rpid; rrc=$?
	echo "rmmod while the fault sleeps: exit $rrc after $(($(date +%s) - t)) s$([ $rrc = 124 ] && echo ' (still running)') $(cat /tmp/odp_rmmod.out)"
	# Refused (1) or done (0), but within the bound.
	[ $rrc -le 1 ] || rc=1
	[ $drc = 0 ] && [ $rrc -le 1 ] || { echo "tasks asleep uninterruptibly:"; blocked_tasks; }
	kill -USR1 "$spid"
	wait_for grep -q '^released' /tmp/stall9p.out || { echo "stall9p.py did not release the reads"; rc=1; }
	# What was left running must end now that the fault can.
	t=$(date +%s)
	[ $crc = 124 ] && { ends_within 60 $cpid; echo "the check: exit $? after the release"; }
	[ $drc = 124 ] && { ends_within 60 $dpid; echo "rdma link delete: exit $? after the release"; }
	[ $rrc = 124 ] && { ends_within 60 $rpid; echo "rmmod: exit $? after the release"; }
	# The verbs process is not this shell's child: wait for it to go.
	deadline_in 60
	while [ -n "$vpid" ] && alive "$vpid" && in_time; do sleep 0.2; done
	for p in $cpid $dpid $rpid $vpid; do
		alive "$p" && { echo "$(cat "/proc/$p/comm") ($p) still runs 60 s after the release"; rc=1; }
	done
	echo "all ended within $(($(date +%s) - t)) s of the release"
	[ "$(wc -l < /tmp/odp_stuck.out)" -gt "$lines" ] &&
		{ echo "the check's output after the release:"; tail -n +$((lines + 1)) /tmp/odp_stuck.out; }
	wait_for module_gone || { echo "$MOD still loaded $WAIT_S s after the release"; rc=1; }
	if ! grep -q "^$MOD " /proc/modules; then load || { echo "cannot load $MOD again"; rc=1; }; fi
	odp_stall_finish || rc=1
	return $rc
}
# The driver unloaded, or unloads now.
# Faults that sleep for good are bounded per user (issue 14, item 8): with the same
# stalling mount, isolation.c's odp_stuck_many check creates, sends from the stalling
# file and destroys 40 QPs, every verb within 5 s. Then at least one and at most 16
# (FAULTS_PER_USER) tasks may be asleep in a fault; rxe_rs before the bound left one per
# QP. A process of another user (euid 65534) still has its own faults served (a SEND
# from fresh on-demand memory completes), while one of root's waits for a slot. After
# the release everything ends, the module unloads, and the kernel logged no report.
# Skips on rxe for the reason t_odp_stuck_fault does.
# A fault that ends after its QP was reset (issue 14, item 8): isolation.c's
# odp_reset_stale check makes a fault sleep on the stalling file, resets its QP and
# brings it back to RTS; then the 9p server is stopped (the stale fault fails with EIO)
# and a SEND that needs a fault of its own must complete with its data. Skips on rxe
# for the reason t_odp_stuck_fault does.
t_odp_reset_stale() {
	local n0 spid tpid cpid crc i rc=0 mark=/tmp/stall9p.read rel=/tmp/odp_released
	rm -f "$rel"
	odp_stall_start || return $?
	ODP_STUCK_FILE=$STALL_MNT/f ODP_STUCK_MARKER=$mark ODP_RELEASED=$rel \
		timeout -k 5 120 "$IS" "$DEV" odp_reset_stale > /tmp/odp_reset.out 2>&1 &
	cpid=$!
	i=0
	while ! grep -q '^reset done' /tmp/odp_reset.out && alive $cpid && [ $i -lt 150 ]; do
		i=$((i + 1)); sleep 0.2
	done
	# The server goes: the pending read, and with it the stale fault, fails.
	kill -TERM "$spid"
	touch "$rel"
	ends_within 60 $cpid; crc=$?
	cat /tmp/odp_reset.out
	[ $crc = 0 ] || { echo "the check failed ($crc)"; rc=1; }
	odp_stall_finish || rc=1
	return $rc
}
odp_faulting() { grep -l ib_umem_odp_map_dma /proc/[0-9]*/stack 2>/dev/null | wc -l; }
t_odp_stuck_many() {
	local n0 spid tpid cpid crc n t rc=0 mark=/tmp/stall9p.read
	odp_stall_start || return $?
	ODP_STUCK_FILE=$STALL_MNT/f ODP_STUCK_MARKER=$mark \
		timeout -k 5 500 "$IS" "$DEV" odp_stuck_many > /tmp/odp_many.out 2>&1 &
	cpid=$!
	ends_within 510 $cpid; crc=$?
	cat /tmp/odp_many.out
	case $crc in
	0) ;;
	4) odp_stall_end "$spid"; return 4 ;;
	*) echo "the check failed ($crc)"; rc=1 ;;
	esac
	sleep 2
	n=$(odp_faulting)
	echo "tasks asleep in a fault of an on-demand MR: $n (at most 16)"
	[ "$n" -ge 1 ] && [ "$n" -le 16 ] || { rc=1; blocked_tasks | head -n 60; }
	chmod 666 /dev/infiniband/uverbs* || rc=1
	setpriv --reuid 65534 --regid 65534 --clear-groups "$IS" "$DEV" odp_fresh 2>&1 || rc=1
	ODP_FRESH_EXPECT=stall "$IS" "$DEV" odp_fresh 2>&1 || rc=1
	kill -USR1 "$spid"
	wait_for grep -q '^released' /tmp/stall9p.out || { echo "stall9p.py did not release the reads"; rc=1; }
	t=$(date +%s)
	[ $crc = 124 ] && { ends_within 60 $cpid; echo "the check: exit $? after the release"; }
	deadline_in 60
	while [ "$(odp_faulting)" -gt 0 ] && in_time; do sleep 0.2; done
	echo "faults asleep $(($(date +%s) - t)) s after the release: $(odp_faulting)"
	[ "$(odp_faulting)" = 0 ] || rc=1
	del_all
	wait_for module_gone || { echo "$MOD still loaded $WAIT_S s after the release"; rc=1; }
	if ! grep -q "^$MOD " /proc/modules; then load || { echo "cannot load $MOD again"; rc=1; }; fi
	odp_stall_finish || rc=1
	return $rc
}
module_gone() { ! grep -q "^$MOD " /proc/modules || unload; }
# odp_stall_finish: the end of the stalling-file tests (see odp_stall_start): stops the
# server and shows what it did, then fails if the kernel logged a report since $n0
# (shown with what follows it).
odp_stall_finish() {
	odp_stall_end "$spid"
	ends_within 10 $tpid >/dev/null
	echo "stall9p.py:"; sed 's/^/  /' /tmp/stall9p.out
	dmesg | tail -n +$((n0 + 1)) > /tmp/odp_stall.dmesg
	if kernel_reports < /tmp/odp_stall.dmesg > /tmp/odp_stall.reports; then
		echo "kernel reports:"; head -n 10 /tmp/odp_stall.reports
		grep -m 1 -A 40 -F "$(head -n 1 /tmp/odp_stall.reports)" /tmp/odp_stall.dmesg
		return 1
	fi
}
# odp_stall_end PID: unmounts the 9p mount (lazily if it is busy) and stops its server.
odp_stall_end() {
	local u
	deadline_in 10
	umount "$STALL_MNT" 2>/dev/null &
	u=$!
	ends_within 20 $u || umount -l "$STALL_MNT" 2>/dev/null
	kill "$1" 2>/dev/null
	while alive "$1" && in_time; do sleep 0.2; done
}
# Bounded work per context (hostile_budget.c says what each check asserts): two threads
# post to one QP without pause (UD sends, UC writes, RC memory window binds and
# invalidations) and no ibv_post_send call stays long in the kernel; window binds behind
# a SEND that is never answered start at most a run's budget ahead; one 256 MiB RDMA
# READ completes with its data while a ping-pong on the device goes on and no CPU
# stalls. Around each run, the kernel log must show no stall detector firing (see
# stall_short). The feeders fill the ring before RTS, and rxe logs "qp not ready to
# send" for each of those calls (some 130).
# Stall detectors, made able to fire within a budget test's run: the RCU CPU stall
# timeout (STALL_S, 3 s: its floor) and, where the kernel has them, the soft lockup
# watchdog (fires at twice watchdog_thresh) and the hung task detector, set before the
# run and put back after it (the rest of the suite runs under the kernel's settings).
# The test kernels have all three (kernel/configs/rxe_rs-base.config). STALL_S=0 leaves
# them.
STALL_S=${STALL_S:-3}
STALL_KNOBS='/sys/module/rcupdate/parameters/rcu_cpu_stall_timeout
/proc/sys/kernel/watchdog_thresh /proc/sys/kernel/hung_task_timeout_secs'
stall_short() {
	local f
	: > /tmp/stall.saved
	[ "$STALL_S" = 0 ] && return
	for f in $STALL_KNOBS; do [ -w "$f" ] && echo "$f $(cat "$f")" >> /tmp/stall.saved; done
	while read -r f _; do
		case $f in
		*rcu_cpu_stall_timeout) echo "$STALL_S" > "$f" ;;
		*watchdog_thresh) echo $(((STALL_S + 1) / 2)) > "$f" ;;
		*hung_task_timeout_secs) echo $((STALL_S * 10)) > "$f" ;;
		esac
	done < /tmp/stall.saved
	while read -r f v; do echo "stall detector: $f $v -> $(cat "$f")"; done < /tmp/stall.saved
}
stall_restore() {
	local f v
	while read -r f v; do echo "$v" > "$f"; done < /tmp/stall.saved
}
STALLS='detected stall|soft lockup|hard LOCKUP|blocked for more than|workqueue lockup'
# stall_reports FILE: splits the kernel's messages in FILE into stall reports (each
# from its first line to the next one's) in /tmp/hb.stalls, but for those that say
# RCU's grace-period kthread was starved or its timer late and name no task blocked in
# a read-side section: under TCG a busy host stops the whole guest for seconds at times
# (the tickers see every CPU stop at once, up to 19 s), and RCU then finds a grace
# period older than its timeout; those go to /tmp/hb.paused. A stall of the code under
# test leaves that kthread running on the other CPU, or names the task.
stall_reports() {
	: > /tmp/hb.stalls; : > /tmp/hb.paused
	awk -v re="$STALLS" '
	function flush(  i, f) {
		f = starved && !blocked ? "/tmp/hb.paused" : "/tmp/hb.stalls"
		for (i = 1; i <= n && i <= 40; i++) print b[i] > f
		n = 0; starved = 0; blocked = 0
	}
	$0 ~ re { flush(); on = 1 }
	on { b[++n] = $0 }
	on && /kthread starved for|kthread timer wakeup didn.t happen/ { starved = 1 }
	on && /Tasks blocked on/ { blocked = 1 }
	END { flush() }' "$1"
}
hb() {
	local mark rc
	with_dev || return 1
	stall_short
	mark="hostile_budget $1 $$ $(date +%s%N)"
	echo "$mark" > /dev/kmsg
	"$HB" "$DEV" "$1"; rc=$?
	# A stall is reported once it has lasted the timeout: give one in progress time.
	sleep $((STALL_S + 1))
	stall_restore
	dmesg | sed -n "/$mark/,\$p" > /tmp/hb.dmesg
	stall_reports /tmp/hb.dmesg
	if [ -s /tmp/hb.paused ]; then
		echo "RCU stall reports of a stopped guest (not counted):"; head -n 8 /tmp/hb.paused
	fi
	if [ -s /tmp/hb.stalls ]; then
		head -n 120 /tmp/hb.stalls
		echo "a stall detector fired (above)"; rc=1
	fi
	return $rc
}
t_budget_feed_ud() { hb feed_ud; }
t_budget_feed_uc() { hb feed_uc; }
t_budget_feed_rc_local() { hb feed_rc_local; }
t_budget_local_ops_behind_send() { hb local_ops_behind_send; }
t_budget_big_read() { hb big_read; }
# The verbs fuzzer (verbs_fuzz.c says what it drives and asserts): FUZZ_PROCS processes
# (3) run random verbs for FUZZ_SECONDS (60) on a device on each end of a veth pair into
# a peer namespace, alternately, and write into their mapped rings; all must end in
# time, memory no key opens for writing must not change, and afterwards both devices
# move data, an RC ping-pong runs, and the kernel logged no BUG, WARNING, KASAN, lockdep,
# soft lockup, RCU stall, hung task or OOM kill. FUZZ_SEED replays a run (the log's
# first line).
# C rxe oopses within seconds even with the rings left alone and the opcodes within the
# verbs' enum (a NULL pointer dereference in rxe_invalidate_mw() from its requester), so
# it does not run there; FUZZ_ON_RXE=1 runs it anyway, in that reduced form.
VF=$BIN/verbs_fuzz
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
# The kernel's reports in a log on standard input (not the names of lockdep's functions
# in stack traces, which an allocation failure's warning shows).
kernel_reports() {
	grep -E 'BUG:|WARNING:|KASAN:|Oops|general protection|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|lockdep: |DEBUG_LOCKS_WARN|soft lockup|hard LOCKUP|rcu.*(stall|detected stalls)|hung_task|blocked for more than|ODEBUG|cleanup failed|Out of memory'
}
t_verbs_fuzz() {
	local n0 rc rings=1 hostile=1 stall
	if [ "$DRIVER" = rxe ]; then
		if [ -z "${FUZZ_ON_RXE:-}" ]; then
			echo "rxe oopses under it (rxe_invalidate_mw: NULL pointer dereference)"
			return 4
		fi
		rings=0 hostile=0
	fi
	veth_pair || return 1
	n0=$(dmesg | wc -l)
	# A verb slower than FUZZ_STALL seconds fails the run: 10, or 60 under KASAN (a
	# queue of the largest size took 20 s to allocate there).
	stall=10
	dmesg | grep -q 'KernelAddressSanitizer initialized' && stall=60
	FUZZ_RINGS=$rings FUZZ_HOSTILE=$hostile FUZZ_SECONDS=$FUZZ_SECONDS FUZZ_STALL=${FUZZ_STALL:-$stall} \
		timeout -k 10 $((FUZZ_SECONDS + 300)) "$VF" "$DEV,tdevp" ${FUZZ_SEED:-}
	rc=$?
	[ $rc = 124 ] && echo "verbs_fuzz itself did not end (timeout)"
	dmesg | tail -n +$((n0 + 1)) > /tmp/fuzz.dmesg
	if kernel_reports < /tmp/fuzz.dmesg > /tmp/fuzz.reports; then
		echo "kernel reports during the run ($(wc -l < /tmp/fuzz.reports)), the first with what follows it:"
		head -n 10 /tmp/fuzz.reports
		grep -m 1 -A 40 -F "$(head -n 1 /tmp/fuzz.reports)" /tmp/fuzz.dmesg
		return 1
	fi
	[ $rc = 0 ] || return 1
	rdma statistic show link "$DEV/1"
	pair 18515 "ibv_rc_pingpong -d $DEV -g $i0 -n 20 -s 4096 -c" \
		"ibv_rc_pingpong -d $DEV -g $i0 -n 20 -s 4096 -c 127.0.0.1" || return 1
	pp_ok 20
}
# Fault injection (the debug kernel's failslab; skipped elsewhere): verbs_failnth.c
# fails the Nth slab allocation of each create verb (PD, CQ, QP of each type, SRQ, MR,
# MW, AH and a few that change objects) for N = 1, 2, ... until the call gets through;
# every failure must be clean and the device must keep working. Afterwards the module
# reference counts are as before and unreclaimable slab is back within 1 MiB (kmemleak's
# scan at the end of sanitized.sh looks for the leaks themselves).
t_failslab() {
	local fs=/sys/kernel/debug/failslab gw vb rc before after slab0 slab1
	[ -d $fs ] || { echo "no $fs (only the debug kernel has failslab)"; return 4; }
	with_dev || return 1
	settle
	before=$(refcnts); slab0=$(slab_kb)
	n0=$(dmesg | wc -l)
	gw=$(cat $fs/ignore-gfp-wait); vb=$(cat $fs/verbose)
	# GFP_KERNEL allocations may fail too; one line per injected fault would flood the
	# console.
	echo N > $fs/ignore-gfp-wait; echo 0 > $fs/verbose
	timeout -k 10 900 "$BIN/verbs_failnth" "$DEV" all
	rc=$?
	echo "$gw" > $fs/ignore-gfp-wait; echo "$vb" > $fs/verbose
	dmesg | tail -n +$((n0 + 1)) > /tmp/failslab.dmesg
	if kernel_reports < /tmp/failslab.dmesg > /tmp/failslab.reports; then
		echo "kernel reports:"; head -n 10 /tmp/failslab.reports
		grep -m 1 -A 40 -F "$(head -n 1 /tmp/failslab.reports)" /tmp/failslab.dmesg
		return 1
	fi
	[ $rc = 0 ] || return 1
	sleep 1; settle
	after=$(refcnts); slab1=$(slab_kb)
	echo "refcnt before: $before after: $after; SUnreclaim ${slab0} kB -> ${slab1} kB"
	[ "$before" = "$after" ] && [ $((slab1 - slab0)) -lt 1024 ]
}
# ib_mad's GSI QP (QP1) exists and is ready once the device is registered.
t_gsi_qp1() {
	with_dev || return 1
	rdma res show qp link "$DEV/1" | tee /tmp/qps
	grep -q 'lqpn 1 type GSI state RTS' /tmp/qps
}
# Kernel consumers' verbs (selftests/kverbs): the module runs its checks when loaded and
# fails to load if one failed; its log lines say which.
# kverbs [PARAM=VALUE...]: loads kverbs_test on $DEV with PARAMs, which runs its checks
# as it loads; shows its log lines but the passed checks, and unloads it.
kverbs() {
	dmesg -C
	insmod "$HOST/kverbs_test.ko" dev="$DEV" "$@"; rc=$?
	dmesg | grep -o 'kverbs_test: .*' | grep -v ': ok '
	[ $rc = 0 ] || return 1
	rmmod kverbs_test
}
t_kernel_verbs() { with_dev && kverbs; }
# modify_device: root writes the node description through sysfs and reads it back; a
# kernel caller (kverbs_test modify=1) sets the system image GUID, which processes then
# see (ibv_devinfo).
t_modify_device() {
	local f=/sys/class/infiniband/$DEV/node_desc
	with_dev || return 1
	printf 'node of %s' "$DRIVER" > "$f" || return 1
	[ "$(cat "$f")" = "node of $DRIVER" ] || { echo "node_desc reads back '$(cat "$f")'"; return 1; }
	kverbs modify=1 || return 1
	ibv_devinfo -v -d "$DEV" | grep sys_image_guid
	ibv_devinfo -v -d "$DEV" | grep -q 'sys_image_guid:[[:space:]]*0123:4567:89ab:cdef'
}
# rdma-core's own on-demand paging tests (pyverbs' test_odp): page faults met by the
# requester, the responder and the completer, and prefetches, with the MRs' pages dropped
# (madvise) before every message. On the debug kernel they run under the sanitizers.
# At least the 15 that pass on both drivers must pass (implicit and XRC ones skip on
# both), and on rxe_rs the 3 in huge pages too (the run sets aside HUGE_PAGES 2 MiB
# pages, 16, for them; rxe refuses such MRs with EOPNOTSUPP, so they skip there).
# ODP_TESTS and ODP_MIN name fewer (the debug kernel's run).
t_odp_pyverbs() {
	local huge=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages was
	with_dev || return 1
	was=$(cat "$huge") && echo "${HUGE_PAGES:-16}" > "$huge" || return 1
	echo "2 MiB huge pages: $(cat "$huge")"
	rm -rf /tmp/rct && cp -r /usr/share/doc/rdma-core/tests /tmp/rct &&
		(cd /tmp/rct && find . -name '*.gz' -exec gunzip -f {} +) || return 1
	# shellcheck disable=SC2086 # ODP_TESTS is a list of test names
	(cd /tmp/rct && timeout 1200 python3 run_tests.py --dev "$DEV" -v ${ODP_TESTS:-test_odp}) \
		> /tmp/odp.log 2>&1
	rc=$?
	echo "$was" > "$huge"
	grep -E '^Ran |^OK|^FAILED|(FAIL|ERROR)$|huge' /tmp/odp.log
	n=$(grep -c ' ok$' /tmp/odp.log)
	h=$(grep -c 'huge.* ok$' /tmp/odp.log)
	echo "$n ODP tests ok, $h of them in huge pages"
	[ $rc = 0 ] && [ "$n" -ge "${ODP_MIN:-15}" ] &&
		{ [ "$DRIVER" != rxe_rs ] || [ -n "$ODP_TESTS" ] || [ "$h" -ge 3 ]; }
}
# The same module with traffic=1: two RC QPs of the device connected to each other, REG_MR
# (the source MR's address changed after ib_map_mr_sg(), as NFS over RDMA does) and an
# RDMA READ with invalidate, after which the invalidated key must open nothing.
t_kernel_read_inv() { with_dev && kverbs traffic=1; }
# The same module with remap=1: a fast-registration MR mapped again after its REG_MR
# (iSER does so before the LOCAL_INV ahead of the next REG_MR) still opens only the page
# it was registered with to a peer's READ through its key.
t_kernel_remap() { with_dev && kverbs remap=1; }
# Unreclaimable slab in kB, and the reference counts of the RDMA modules.
slab_kb() { awk '/^SUnreclaim:/ { print $2 }' /proc/meminfo; }
# Frees what can be freed before slab is measured: caches, and each slab cache's empty
# slabs. Shrinking a cache also takes its objects out of KASAN's quarantine, where freed
# objects otherwise stay counted for a while on the debug kernel.
settle() {
	sync; echo 2 > /proc/sys/vm/drop_caches
	for f in /sys/kernel/slab/*/shrink; do echo 1 > "$f"; done 2>/dev/null
}
refcnts() { for m in "$MOD" ib_uverbs ib_core; do printf '%s=%s ' "$m" "$(cat /sys/module/$m/refcnt)"; done; }
# Every object type in a loop, four processes, two killed midway: afterwards the module
# reference counts are as before and unreclaimable slab is back within 1 MiB of where
# it started (other kernel activity moves it a little).
t_stress() {
	with_dev || return 1
	settle
	before=$(refcnts); slab0=$(slab_kb)
	"$VO" "$DEV" stress || return 1
	sleep 1; settle
	after=$(refcnts); slab1=$(slab_kb)
	echo "refcnt before: $before after: $after; SUnreclaim ${slab0} kB -> ${slab1} kB"
	[ "$before" = "$after" ] && [ $((slab1 - slab0)) -lt 1024 ]
}
t_unsupported_fails() { with_dev && "$VB" "$DEV" unsupported_fails; }
# Data traffic: stock tools, server and client in this guest on the one device (the
# packets loop back through it). Every tool runs under `timeout`; servers never outlive
# their test: TOOL_S seconds (30; the debug kernel's run sets more).
TO=${TOOL_S:-30}
# Iterations of each ping-pong run and of each perftest run (TCG is slow; the debug
# kernel's run sets fewer).
PP_ITERS=${PP_ITERS:-50}
PF_ITERS=${PF_ITERS:-100}
# The index of the device's RoCE v2 GID for eth0's IPv4 address (v4) or for its IPv6
# link-local address (v6), as ibv_devinfo shows them; empty if none.
gid_line() {
	case $1 in
	v4) pat='::ffff:10\.0\.2\.15' ;;
	v6) pat=$(ip -6 -o addr show dev eth0 scope link | awk '{ sub("/.*", "", $4); print $4; exit }') ;;
	esac
	[ -n "$pat" ] || return 0
	ibv_devinfo -v -d "$DEV" | sed -n "s/.*GID\[ *\([0-9]*\)\]:[[:space:]]*$pat, RoCE v2\$/\1/p" | head -n 1
}
has_gid() { [ -n "$(gid_line "$1")" ]; }
# gid_index v4|v6: that index, waiting a while for it (the GID table follows address
# changes asynchronously).
gid_index() {
	wait_for has_gid "$1" || { echo "no RoCE v2 $1 GID on $DEV:" >&2; ibv_devinfo -v -d "$DEV" | grep GID >&2; return 1; }
	gid_line "$1"
}
# listening PORT [cm]: a TCP socket listens on PORT (the tools' out-of-band exchange),
# read from /proc/net/tcp{,6} by the shell alone; with cm, an RDMA CM ID does
# (rdmacm-utils).
listening() {
	local hex addr st f
	if [ "${2:-}" = cm ]; then
		rdma res show cm_id 2>/dev/null | grep -Eq "state LISTEN .*src-addr [^ ]*:$1( |\$)"
		return
	fi
	hex=$(printf '%04X' "$1")
	for f in /proc/net/tcp /proc/net/tcp6; do
		[ -r $f ] || continue
		while read -r _ addr _ st _; do
			[ "$st" = 0A ] && [ "${addr##*:}" = "$hex" ] && return 0
		done < $f
	done
	return 1
}
# serving PORT PID [cm]: PORT is listened on, or PID has ended (so waiting is over).
serving() { listening "$1" "${3:-}" || ! alive "$2"; }
# await_server PORT PID [cm]: waits until server PID listens on PORT or has ended;
# succeeds if it listens.
await_server() { wait_for serving "$@"; listening "$1" "${3:-}"; }
# pair PORT SERVER CLIENT: starts the server command in the background, waits until it
# listens on PORT, runs the client command, then waits for the server (both under
# timeout; the server is stopped at once if the client failed). Fails if either failed.
# Their output is in /tmp/server.out and /tmp/client.out, and in the log.
pair() {
	local cm=
	case $2 in rping* | ucmatose* | udaddy*) cm=cm ;; esac
	timeout "$TO" $2 > /tmp/server.out 2>&1 &
	spid=$!
	if ! await_server "$1" "$spid" $cm; then
		echo "server not listening on $1: $2"; kill "$spid" 2>/dev/null; wait "$spid"
		echo "server exit $?:"; cat /tmp/server.out; return 1
	fi
	timeout "$TO" $3 > /tmp/client.out 2>&1
	crc=$?
	[ $crc = 0 ] || kill "$spid" 2>/dev/null
	wait "$spid"
	src=$?
	echo "server ($src): $2"; sed 's/^/  /' /tmp/server.out
	echo "client ($crc): $3"; sed 's/^/  /' /tmp/client.out
	[ $src = 0 ] && [ $crc = 0 ]
}
# pp_ok ITERS: the ping-pong whose two sides' output is in /tmp/server.out and
# /tmp/client.out moved its data intact (with -c the server prints "invalid data" on a
# mismatch, and its exit status stays 0) and both sides report ITERS iterations.
pp_ok() {
	if grep -q 'invalid data' /tmp/server.out /tmp/client.out; then echo "data check failed"; return 1; fi
	grep -q "^$1 iters in" /tmp/server.out && grep -q "^$1 iters in" /tmp/client.out ||
		{ echo "no iteration report"; return 1; }
}
# pingpong rc|uc|ud|srq v4|v6 SIZES: ibv_*_pingpong at each size, polling and with -e
# (sleeping on CQ events), each with its data checked (pp_ok).
pingpong() {
	with_dev || return 1
	idx=$(gid_index "$2") || return 1
	# PP_SIZES, when set, replaces each test's sizes (the debug kernel's run; at
	# most 1024, which UD allows).
	for size in ${PP_SIZES:-$3}; do
		for ev in "" -e; do
			cmd="ibv_$1_pingpong -d $DEV -g $idx -n $PP_ITERS -s $size -c${ev:+ $ev}"
			pair 18515 "$cmd" "$cmd 127.0.0.1" || return 1
			pp_ok "$PP_ITERS" || return 1
		done
	done
}
# rxe's counters, read as tools read them (rdma statistic), against an RC ping-pong of
# N messages of 4 KiB each way on the device to itself: every SEND and every receive is
# counted once, every byte and packet sent is received, and RC acknowledgements reach
# the requester (ack_deferred). The port counters of the performance management agent,
# as sysfs shows them (the kernel's kselftest rxe_sent_rcvd_bytes reads them), count the
# same bytes (in 4-byte words) and packets.
pma_counter() { cat "/sys/class/infiniband/$DEV/ports/1/counters/$1"; }
t_counters_traffic() {
	local n=40 c v d= p= sends recvs sent rcvd spkts rpkts acks xd rd xp rp
	with_dev || return 1
	idx=$(gid_index v4) || return 1
	for c in rdma_sends rdma_recvs sent_bytes rcvd_bytes sent_pkts rcvd_pkts ack_deferred; do
		v=$(counter $c); [ -n "$v" ] || { echo "no counter $c"; rdma statistic show link "$DEV/1"; return 1; }
		d="$d $v"
	done
	for c in port_xmit_data port_rcv_data port_xmit_packets port_rcv_packets; do
		v=$(pma_counter $c) || { ls "/sys/class/infiniband/$DEV/ports/1/"; return 1; }
		p="$p $v"
	done
	cmd="ibv_rc_pingpong -d $DEV -g $idx -n $n -s 4096"
	pair 18515 "$cmd" "$cmd 127.0.0.1" && pp_ok $n || return 1
	# The responder's last acknowledgements may still be on their way.
	sleep 1
	set -- $d
	sends=$(($(counter rdma_sends) - $1)) recvs=$(($(counter rdma_recvs) - $2))
	sent=$(($(counter sent_bytes) - $3)) rcvd=$(($(counter rcvd_bytes) - $4))
	spkts=$(($(counter sent_pkts) - $5)) rpkts=$(($(counter rcvd_pkts) - $6))
	acks=$(($(counter ack_deferred) - $7))
	set -- $p
	xd=$(($(pma_counter port_xmit_data) - $1)) rd=$(($(pma_counter port_rcv_data) - $2))
	xp=$(($(pma_counter port_xmit_packets) - $3)) rp=$(($(pma_counter port_rcv_packets) - $4))
	echo "rdma_sends +$sends rdma_recvs +$recvs sent_bytes +$sent rcvd_bytes +$rcvd sent_pkts +$spkts rcvd_pkts +$rpkts ack_deferred +$acks"
	echo "port_xmit_data +$xd port_rcv_data +$rd port_xmit_packets +$xp port_rcv_packets +$rp"
	[ $sends = $((2 * n)) ] && [ $recvs = $((2 * n)) ] || { echo "want $((2 * n)) sends and receives"; return 1; }
	[ $sent = $rcvd ] && [ $spkts = $rpkts ] || { echo "sent and received differ"; return 1; }
	[ $sent -ge $((2 * n * 4096)) ] || { echo "fewer bytes than the payload"; return 1; }
	[ $acks -gt 0 ] || { echo "no acknowledgement counted"; return 1; }
	[ $xd = $rd ] && [ $xp = $rp ] || { echo "PMA: sent and received differ"; return 1; }
	# Words of whole totals: the difference of two floors is within one word.
	[ $((4 * xd - sent)) -gt -4 ] && [ $((4 * xd - sent)) -lt 4 ] && [ $xp = $spkts ] ||
		{ echo "PMA counters do not count what the device's counters do"; return 1; }
}
# The performance management agent asked from the network: roce_send.py --pma says
# what it asks and what must come back.
t_pma_mads() {
	peer_net || return 1
	ip netns exec tpeer timeout 60 python3 "$HOST/roce_send.py" --pma 10.9.0.2 10.9.0.1
}
t_rc_pingpong_v4() { pingpong rc v4 "1 4096 65536"; }
t_rc_pingpong_v6() { pingpong rc v6 "1 4096 65536"; }
t_uc_pingpong_v4() { pingpong uc v4 "1 4096 65536"; }
t_uc_pingpong_v6() { pingpong uc v6 "1 4096 65536"; }
# UD messages must fit the path MTU (1024 on eth0's 1500).
t_ud_pingpong_v4() { pingpong ud v4 "1 1024"; }
t_ud_pingpong_v6() { pingpong ud v6 "1 1024"; }
# 16 QPs sharing one SRQ on each side.
t_srq_pingpong_v4() { pingpong srq v4 "1 4096 65536"; }
t_srq_pingpong_v6() { pingpong srq v6 "1 4096 65536"; }
# The RDMA CM (librdmacm) resolves 10.0.2.15 to the device.
cm() { with_dev && modprobe -a rdma_cm rdma_ucm; }
# rping: 10 RDMA read/write round trips; the client compares what came back (-V) and
# fails on a mismatch; the server shows each ping (-v).
t_rping() {
	cm || return 1
	pair 7174 "rping -s -a 10.0.2.15 -v -V -C 10" "rping -c -a 10.0.2.15 -v -V -C 10" || return 1
	[ "$(grep -c 'server ping data: rdma-ping-' /tmp/server.out)" = 10 ] || { echo "want 10 pings on the server"; return 1; }
}
# ucmatose: 2 RC connections, 10 sends each way on each.
t_ucmatose() {
	cm || return 1
	pair 7471 "ucmatose -b 10.0.2.15 -c 2 -C 10" "ucmatose -s 10.0.2.15 -c 2 -C 10" &&
		grep -q 'return status 0' /tmp/server.out && grep -q 'return status 0' /tmp/client.out
}
# udaddy: 2 UD endpoints, 10 datagrams each way on each.
t_udaddy() {
	cm || return 1
	pair 7174 "udaddy -b 10.0.2.15 -c 2 -C 10" "udaddy -s 10.0.2.15 -c 2 -C 10" &&
		grep -q 'return status 0' /tmp/server.out && grep -q 'return status 0' /tmp/client.out
}
# ---- Kernel consumers: NVMe, NFS, iSER over the device ----
# kc_run NAME: what every kernel-consumer test shares. With the device up, NAME_body
# sets up and runs the consumer; NAME_cleanup then undoes whatever of the setup exists
# (bounded; it fails if something stays), the modules the test loaded are unloaded, and
# afterwards the module reference counts and the device's resource counts are as
# before, the device can be deleted in bounded time and the kernel logged no warning.
# NAME_diag prints what helps when something failed.
kc_mods() { awk '{ print $1 }' /proc/modules | sort; }
# The device's resource counts (pd, qp, cm_id, mr, ...) but CQs: ib_core's shared CQ
# pool (ib_cq_pool_get, which nvme-rdma, nvmet-rdma and sunrpc use) keeps its CQs until
# the device is unregistered.
kc_res() { rdma res show "$DEV" | cut -d: -f3- | sed 's/ cq [0-9]*//'; }
same_res() { [ "$(kc_res)" = "$1" ]; }
same_refcnts() { [ "$(refcnts)" = "$1" ]; }
# The kernel log since the test started.
kc_dmesg() { dmesg | tail -n +$((KC_D0 + 1)); }
kc_dmesg_tail() { echo "dmesg (new lines, last 60):"; kc_dmesg | tail -n 60 | sed 's/^/  /'; }
# Unloads the modules loaded since kc_run started, each once nothing holds it.
kc_unload() {
	kc_mods | comm -13 /tmp/kc.mods0 - > /tmp/kc.new
	for round in 1 2 3 4 5 6; do
		for m in $(cat /tmp/kc.new); do
			[ -e "/sys/module/$m" ] || continue
			[ "$(cat "/sys/module/$m/refcnt")" = 0 ] && timeout 60 rmmod "$m"
		done
	done
	left=$(kc_mods | comm -13 /tmp/kc.mods0 - | tr '\n' ' ')
	[ -z "$left" ] || { echo "modules left loaded: $left"; return 1; }
}
kc_run() {
	with_dev || return 1
	KC_D0=$(dmesg | wc -l)
	kc_mods > /tmp/kc.mods0
	settle
	before=$(refcnts); res0=$(kc_res)
	"$1_body"; rc=$?
	[ $rc = 0 ] || "$1_diag"
	{ "$1_cleanup" && kc_unload; } || { echo "cleanup failed"; "$1_diag"; rc=1; }
	[ $rc = 0 ] || return $rc
	settle
	wait_for same_refcnts "$before"
	after=$(refcnts)
	echo "refcnt before: $before after: $after"
	[ "$before" = "$after" ] || { echo "module reference counts changed"; return 1; }
	wait_for same_res "$res0"
	res1=$(kc_res)
	echo "$DEV resources before:$res0 after:$res1"
	[ "$res0" = "$res1" ] || { echo "kernel consumers left objects on $DEV"; return 1; }
	# In the background: a delete that waits forever on a leftover kernel consumer
	# cannot be killed, but the test can still report it.
	rdma link delete "$DEV" & dpid=$!
	j=0
	while kill -0 $dpid 2>/dev/null; do
		j=$((j + 1))
		if [ $j -gt 300 ]; then
			echo "rdma link delete hangs:"; cat "/proc/$dpid/stack" 2>/dev/null; "$1_diag"
			return 1
		fi
		sleep 0.2
	done
	wait $dpid || { echo "rdma link delete failed"; "$1_diag"; return 1; }
	no_device || return 1
	if kc_dmesg | grep -Eq 'WARNING:|BUG:|Oops|general protection|refcount_t:'; then
		echo "kernel warnings:"; "$1_diag"; return 1
	fi
}
# kc_needs MODULE...: skip (4) unless every module exists.
kc_needs() {
	for m in "$@"; do
		modinfo -n "$m" > /dev/null 2>&1 || { echo "no module $m"; return 4; }
	done
}
# kc_tools COMMAND...: skip (4) unless every command is there.
kc_tools() {
	for c in "$@"; do
		command -v "$c" > /dev/null || { echo "no $c"; return 4; }
	done
}
# kc_not_loaded MODULE...: skip (4) if one is loaded already (its unload afterwards
# would not be the test's).
kc_not_loaded() {
	for m in "$@"; do
		[ -e "/sys/module/$m" ] && { echo "$m already loaded"; return 4; }
	done
	return 0
}
configfs() {
	grep -qs ' /sys/kernel/config configfs ' /proc/mounts ||
		mount -t configfs configfs /sys/kernel/config || { echo "cannot mount configfs"; return 4; }
}
mounted_at() { grep -qs " $1 " /proc/mounts; }
eth0_v4() { ip -4 -o addr show dev eth0 | awk '{ sub("/.*", "", $4); print $4; exit }'; }

# The data the NFS, iSER and SRP tests write and verify is a multiple of ULP_KB (8 MiB;
# a multiple of 1 MiB, the block of their largest writes; the debug kernel's run sets
# less).
ULP_KB=${ULP_KB:-8192}
# NVMe over RDMA, target and host in this guest on the one device: nvmet exports a
# memory-backed null_blk namespace on an RDMA port at eth0's IPv4 address, nvme-rdma
# connects to it, and 8 MiB of random data written with O_DIRECT at 1 MiB, 64 KiB and
# 4 KiB blocks (fast-registration MRs of up to 256 pages, in-capsule data) reads back
# the same; then kc_run's checks.
NV_NQN=nqn.2014-08.org.rxe-rs:nvme-rdma-test
NV_CFS=/sys/kernel/config/nvmet
NV_PORT=$NV_CFS/ports/4420
NV_SUB=$NV_CFS/subsystems/$NV_NQN
# The controllers connected to the test's subsystem (nvme0 ...).
nv_ctrls() {
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$NV_NQN" ] && echo "${c##*/}"
	done
}
# The namespace block device of the test's controller, once it exists.
nv_blk() {
	for c in $(nv_ctrls); do
		for b in /sys/class/nvme/"$c"/nvme*n*; do
			[ -e "$b" ] && [ -b "/dev/${b##*/}" ] && { echo "/dev/${b##*/}"; return 0; }
		done
	done
	return 1
}
has_nv_blk() { nv_blk > /dev/null; }
no_nv_ctrl() { [ -z "$(nv_ctrls)" ]; }
# Host first: disconnect (or delete the controller), unlink the port, the namespace,
# the subsystem.
nv_cleanup() {
	crc=0
	if [ -n "$(nv_ctrls)" ]; then
		timeout 60 nvme disconnect -n "$NV_NQN" || echo "nvme disconnect failed"
		for c in $(nv_ctrls); do echo 1 > "/sys/class/nvme/$c/delete_controller"; done 2>/dev/null
		wait_for no_nv_ctrl || { echo "controller left: $(nv_ctrls)"; crc=1; }
	fi
	rm -f "$NV_PORT/subsystems/$NV_NQN"
	[ -d "$NV_PORT" ] && { rmdir "$NV_PORT" || crc=1; }
	if [ -d "$NV_SUB/namespaces/1" ]; then
		echo 0 > "$NV_SUB/namespaces/1/enable"
		rmdir "$NV_SUB/namespaces/1" || crc=1
	fi
	[ -d "$NV_SUB" ] && { rmdir "$NV_SUB" || crc=1; }
	return $crc
}
nv_diag() {
	echo "nvme list:"; timeout 20 nvme list 2>&1 | sed 's/^/  /'
	echo "nvme list-subsys:"; timeout 20 nvme list-subsys 2>&1 | sed 's/^/  /'
	kc_dmesg_tail
}
nv_body() {
	addr=$(eth0_v4)
	[ -n "$addr" ] || { echo "no IPv4 address on eth0"; return 1; }
	modprobe null_blk nr_devices=1 gb=1 memory_backed=1 || return 1
	wait_for test -b /dev/nullb0 || { echo "no /dev/nullb0"; return 1; }
	modprobe -a nvmet nvmet_rdma || return 1
	[ -d "$NV_CFS" ] || { echo "no $NV_CFS"; return 1; }
	mkdir "$NV_SUB" && echo 1 > "$NV_SUB/attr_allow_any_host" || return 1
	mkdir "$NV_SUB/namespaces/1" && echo /dev/nullb0 > "$NV_SUB/namespaces/1/device_path" &&
		echo 1 > "$NV_SUB/namespaces/1/enable" || return 1
	mkdir "$NV_PORT" || return 1
	echo rdma > "$NV_PORT/addr_trtype" && echo ipv4 > "$NV_PORT/addr_adrfam" &&
		echo "$addr" > "$NV_PORT/addr_traddr" && echo 4420 > "$NV_PORT/addr_trsvcid" || return 1
	ln -s "$NV_SUB" "$NV_PORT/subsystems/$NV_NQN" || { echo "port $addr:4420 not enabled"; return 1; }
	modprobe nvme_rdma || return 1
	# A short controller-loss timeout: a broken connection gives up within seconds
	# instead of reconnecting for 10 minutes.
	t0=$(date +%s)
	timeout 120 nvme connect -t rdma -a "$addr" -s 4420 -n "$NV_NQN" -l 10 -c 2 ||
		{ echo "nvme connect failed"; return 1; }
	wait_for has_nv_blk || { echo "no namespace block device after connect"; return 1; }
	blk=$(nv_blk)
	echo "connected in $(($(date +%s) - t0)) s: $(nv_ctrls) $blk ($(cat /sys/class/block/${blk#/dev/}/size) sectors)"
	for f in max_hw_sectors_kb max_segments; do echo "  $f: $(cat /sys/class/block/${blk#/dev/}/queue/$f)"; done
	echo "  kernel MRs on $DEV: $(rdma res show mr dev "$DEV" 2>/dev/null | wc -l)"
	head -c 8M /dev/urandom > /tmp/nv.data || return 1
	t0=$(date +%s)
	# 0-4 MiB in 1 MiB writes, 4-6 MiB in 64 KiB, 6-7 MiB in 4 KiB, 7-8 MiB in 1 MiB.
	timeout 120 dd if=/tmp/nv.data of="$blk" bs=1M count=4 oflag=direct status=none &&
		timeout 120 dd if=/tmp/nv.data of="$blk" bs=64k skip=64 seek=64 count=32 oflag=direct status=none &&
		timeout 120 dd if=/tmp/nv.data of="$blk" bs=4k skip=1536 seek=1536 count=256 oflag=direct status=none &&
		timeout 120 dd if=/tmp/nv.data of="$blk" bs=1M skip=7 seek=7 count=1 oflag=direct status=none ||
		{ echo "write failed"; return 1; }
	echo "written in $(($(date +%s) - t0)) s"
	t0=$(date +%s)
	# Read back whole in 1 MiB reads, and the first 2 MiB again in 4 KiB and 64 KiB reads.
	timeout 120 dd if="$blk" of=/tmp/nv.back bs=1M count=8 iflag=direct status=none &&
		timeout 120 dd if="$blk" of=/tmp/nv.back4k bs=4k count=256 iflag=direct status=none &&
		timeout 120 dd if="$blk" of=/tmp/nv.back64k bs=64k skip=16 count=16 iflag=direct status=none ||
		{ echo "read failed"; return 1; }
	echo "read in $(($(date +%s) - t0)) s"
	head -c 2M /tmp/nv.data > /tmp/nv.want
	cat /tmp/nv.back4k /tmp/nv.back64k > /tmp/nv.got
	s0=$(sha256sum < /tmp/nv.data); s1=$(sha256sum < /tmp/nv.back)
	echo "sha256 written ${s0%% *}, read ${s1%% *}"
	[ "$s0" = "$s1" ] || { echo "data read back differs:"; cmp /tmp/nv.data /tmp/nv.back | head -n 1; return 1; }
	cmp /tmp/nv.want /tmp/nv.got || { echo "4 KiB/64 KiB reads differ"; return 1; }
	timeout 60 nvme disconnect -n "$NV_NQN" || { echo "nvme disconnect failed"; return 1; }
	wait_for no_nv_ctrl || { echo "controller still there after disconnect: $(nv_ctrls)"; return 1; }
}
t_nvme_rdma() {
	kc_needs null_blk nvmet nvmet_rdma nvme_rdma || return
	kc_tools nvme || return
	configfs || return
	kc_not_loaded null_blk nvmet || return
	kc_run nv
}
# NFS over RDMA, server and client in this guest on the one device: nfsd (NFSv4 only,
# started by nfs-kernel-server's rpc.nfsd with an RDMA listener on port 20049) exports a
# tmpfs, the client mounts it with proto=rdma (mountstats must name the RDMA transport),
# fio writes files in 1 MiB, 64 KiB and 4 KiB blocks, direct and buffered, and verifies
# them (crc32c), and ULP_KB of random data copied in reads back the same over the wire
# after the client's page cache is dropped, and the same as the server's copy; then the
# unmount, nfsd stopped, kc_run's checks. Nothing is written into the guest tree:
# nfs-utils' state lives on a tmpfs.
NFS_EXP=/tmp/nfs-export
NFS_MNT=/tmp/nfs-mnt
nfs_body() {
	addr=$(eth0_v4)
	[ -n "$addr" ] || { echo "no IPv4 address on eth0"; return 1; }
	modprobe -a nfsd rpcrdma nfsv4 || return 1
	mkdir -p "$NFS_EXP" "$NFS_MNT" || return 1
	mount -t tmpfs -o size=96m tmpfs "$NFS_EXP" && mount -t tmpfs tmpfs /var/lib/nfs || return 1
	mkdir -p /var/lib/nfs/v4recovery /run/rpcbind && touch /var/lib/nfs/etab /var/lib/nfs/rmtab ||
		return 1
	mounted_at /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || return 1
	# The shortest lease and grace period: the first OPEN waits out the grace period.
	echo 10 > /proc/fs/nfsd/nfsv4leasetime && echo 10 > /proc/fs/nfsd/nfsv4gracetime || return 1
	rpcbind -w || return 1
	exportfs -o rw,no_root_squash,no_subtree_check,insecure,fsid=0 "*:$NFS_EXP" || return 1
	rpc.mountd -N 2 -N 3 || return 1
	timeout 60 rpc.nfsd -N 3 --rdma=20049 4 || { echo "rpc.nfsd failed"; return 1; }
	echo "nfsd listeners: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
	grep -q '^rdma 20049' /proc/fs/nfsd/portlist || { echo "no RDMA listener"; return 1; }
	t0=$(date +%s)
	timeout 120 mount -t nfs4 -o proto=rdma,port=20049 "$addr:/" "$NFS_MNT" ||
		{ echo "mount over RDMA failed"; return 1; }
	echo "mounted in $(($(date +%s) - t0)) s: $(grep " $NFS_MNT " /proc/mounts)"
	xprt=$(awk -v m="$NFS_MNT" '$1 == "device" { on = $5 == m } on && $1 == "xprt:" { print $2; exit }' \
		/proc/self/mountstats)
	[ "$xprt" = rdma ] || { echo "mountstats name the transport '$xprt', not rdma"; return 1; }
	t0=$(date +%s)
	timeout 300 fio --directory="$NFS_MNT" --ioengine=psync --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
		--size="${ULP_KB}k" --output=/tmp/nfs.fio \
		--name=direct1m --bs=1m --rw=write --direct=1 \
		--name=direct64k --bs=64k --rw=randwrite --direct=1 \
		--name=direct4k --bs=4k --rw=randwrite --direct=1 --size="$((ULP_KB / 4))k" \
		--name=buffered --bs=64k --rw=randwrite --direct=0 ||
		{ echo "fio failed:"; tail -n 20 /tmp/nfs.fio | sed 's/^/  /'; return 1; }
	grep -E '^ +(WRITE|READ):' /tmp/nfs.fio | sed 's/^ */  /'
	echo "fio with verification in $(($(date +%s) - t0)) s"
	head -c "${ULP_KB}K" /dev/urandom > /tmp/nfs.data && cp /tmp/nfs.data "$NFS_MNT/data" && sync ||
		{ echo "copy in failed"; return 1; }
	echo 3 > /proc/sys/vm/drop_caches
	s0=$(sha256sum < /tmp/nfs.data); s1=$(timeout 120 sha256sum < "$NFS_MNT/data")
	s2=$(sha256sum < "$NFS_EXP/data")
	echo "sha256 written ${s0%% *}, read over NFS ${s1%% *}, on the server ${s2%% *}"
	[ "$s0" = "$s1" ] && [ "$s0" = "$s2" ] || { echo "data differs"; return 1; }
	timeout 60 umount "$NFS_MNT" || { echo "umount failed"; return 1; }
}
nfs_cleanup() {
	crc=0
	if mounted_at "$NFS_MNT"; then
		timeout 60 umount -f "$NFS_MNT" || { echo "cannot unmount $NFS_MNT"; crc=1; }
	fi
	if [ -e /proc/fs/nfsd/threads ]; then
		timeout 60 rpc.nfsd 0 || { echo "rpc.nfsd 0 failed"; crc=1; }
		exportfs -ua
	fi
	for p in rpc.mountd rpcbind; do pkill -x "$p"; done
	wait_for sh -c '! pgrep -x "rpc.mountd|rpcbind"' || { echo "nfs-utils daemons left"; crc=1; }
	for m in /proc/fs/nfsd /var/lib/nfs "$NFS_EXP"; do
		mounted_at "$m" && { umount "$m" || crc=1; }
	done
	return $crc
}
nfs_diag() {
	echo "mounts:"; grep -E 'nfs|rpc' /proc/mounts | sed 's/^/  /'
	[ -e /proc/fs/nfsd/portlist ] && echo "nfsd listeners: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
	kc_dmesg_tail
}
t_nfs_rdma() {
	kc_needs nfsd nfsv4 rpcrdma || return
	kc_tools rpc.nfsd rpc.mountd exportfs rpcbind mount.nfs4 fio || return
	kc_not_loaded nfsd nfs sunrpc || return
	kc_run nfs
}
# LIO targets made with targetcli-fb (kernel_iser). targetcli saves to
# /etc/rtslib-fb-target and its preferences under $HOME, and asks the system bus for
# tcmu-runner's backstores (there are none) before anything else: tcli_up gives it a
# tmpfs, a home in /tmp and a bus of its own (the guest tree has no system bus
# configuration), so that nothing is written into the guest tree; tcli_down clears the
# target and undoes that. Given no command, targetcli runs the lines of its standard
# input as its shell would, all in one process (one start of Python and rtslib, which
# takes tens of seconds on the debug kernel); an error there does not change its exit
# status, so the caller checks what the commands made.
tcli() { HOME=/tmp/tcli timeout 120 targetcli "$@"; }
tcli_up() {
	mkdir -p /tmp/tcli /run/dbus && mount -t tmpfs tmpfs /etc/rtslib-fb-target || return 1
	printf '%s\n' '<busconfig><type>system</type>' \
		'<listen>unix:path=/run/dbus/system_bus_socket</listen>' \
		'<pidfile>/run/dbus/pid</pidfile><auth>EXTERNAL</auth>' \
		'<policy context="default"><allow user="*"/><allow own="*"/>' \
		'<allow send_destination="*"/><allow send_type="method_call"/>' \
		'<allow send_requested_reply="true" send_type="method_return"/>' \
		'<allow send_requested_reply="true" send_type="error"/>' \
		'<allow receive_type="method_call"/><allow receive_type="method_return"/>' \
		'<allow receive_type="error"/><allow receive_type="signal"/>' \
		'</policy></busconfig>' > /tmp/dbus.conf &&
		dbus-daemon --config-file=/tmp/dbus.conf --fork || { echo "no system bus"; return 1; }
}
tcli_down() {
	trc=0
	if [ -s /run/dbus/pid ]; then
		tcli clearconfig confirm=True > /dev/null || { echo "targetcli clearconfig failed"; trc=1; }
		kill "$(cat /run/dbus/pid)" && rm -f /run/dbus/pid
	fi
	# Each fabric's directory holds its module (and they, target_core_mod).
	for f in /sys/kernel/config/target/*/; do
		f=${f%/}
		case ${f##*/} in core | '*') ;; *) rmdir "$f" || { echo "cannot remove $f"; trc=1; } ;; esac
	done
	mounted_at /etc/rtslib-fb-target && { umount /etc/rtslib-fb-target || trc=1; }
	return $trc
}
# blk_verify DISK TAG: fio writes DISK in 1 MiB, 64 KiB and 4 KiB blocks with O_DIRECT
# and verifies it (crc32c), 3.25 times ULP_KB in all, and ULP_KB of random data read
# back through the page cache after it was dropped are the same (the disk has at least
# 5 times ULP_KB).
blk_verify() {
	t0=$(date +%s)
	timeout 300 fio --filename="$1" --ioengine=psync --direct=1 --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
		--output="/tmp/$2.fio" \
		--name=b1m --bs=1m --rw=write --offset=0 --size="$((ULP_KB * 2))k" \
		--name=b64k --bs=64k --rw=randwrite --offset="$((ULP_KB * 2))k" --size="${ULP_KB}k" \
		--name=b4k --bs=4k --rw=randwrite --offset="$((ULP_KB * 3))k" --size="$((ULP_KB / 4))k" ||
		{ echo "fio failed:"; tail -n 20 "/tmp/$2.fio" | sed 's/^/  /'; return 1; }
	grep -E '^ +(WRITE|READ):' "/tmp/$2.fio" | sed 's/^ */  /'
	echo "fio with verification in $(($(date +%s) - t0)) s"
	head -c "${ULP_KB}K" /dev/urandom > "/tmp/$2.data" &&
		timeout 120 dd if="/tmp/$2.data" of="$1" bs=64k seek="$((ULP_KB / 16))" oflag=direct status=none ||
		{ echo "write failed"; return 1; }
	echo 3 > /proc/sys/vm/drop_caches
	s0=$(sha256sum < "/tmp/$2.data")
	s1=$(timeout 120 dd if="$1" bs=64k skip="$((ULP_KB / 16))" count="$((ULP_KB / 64))" status=none | sha256sum)
	echo "sha256 written ${s0%% *}, read ${s1%% *}"
	[ "$s0" = "$s1" ] || { echo "data read back differs"; return 1; }
}

# iSER, target and initiator in this guest on the one device: an LIO target made with
# targetcli-fb exports a 64 MiB ramdisk LUN on a portal at eth0's IPv4 address with
# iSER enabled (ib_isert), open-iscsi's iscsid and iscsiadm log in through its iface
# iser (ib_iser), and blk_verify checks the disk; then the logout,
# the target cleared, kc_run's checks. open-iscsi's node database lives on a tmpfs.
IS_IQN=iqn.2003-01.org.rxe-rs:iser-test
is_disk() {
	for b in /sys/class/iscsi_session/session*/device/target*/*/block/*; do
		[ -e "$b" ] && [ -b "/dev/${b##*/}" ] && { echo "/dev/${b##*/}"; return 0; }
	done
	return 1
}
has_is_disk() { is_disk > /dev/null; }
no_is_session() { ! ls /sys/class/iscsi_session/ 2>/dev/null | grep -q .; }
is_body() {
	addr=$(eth0_v4)
	[ -n "$addr" ] || { echo "no IPv4 address on eth0"; return 1; }
	cp /etc/iscsi/initiatorname.iscsi /etc/iscsi/iscsid.conf /tmp/ &&
		mount -t tmpfs tmpfs /etc/iscsi && cp /tmp/initiatorname.iscsi /etc/iscsi/ || return 1
	# iscsid runs already (no systemd); a lost connection gives up within seconds.
	sed -e 's|^iscsid.startup = .*|iscsid.startup = /bin/true|' \
		-e 's|^node.session.timeo.replacement_timeout = .*|node.session.timeo.replacement_timeout = 10|' \
		/tmp/iscsid.conf > /etc/iscsi/iscsid.conf || return 1
	tcli_up || return 1
	tpg=/iscsi/$IS_IQN/tpg1
	printf '%s\n' "set global auto_save_on_exit=false auto_add_default_portal=false" \
		"/backstores/ramdisk create name=rd0 size=64M" "/iscsi create $IS_IQN" \
		"$tpg/luns create /backstores/ramdisk/rd0" \
		"$tpg set attribute authentication=0 demo_mode_write_protect=0 generate_node_acls=1 cache_dynamic_acls=1" \
		"$tpg/portals create $addr 3260" "$tpg/portals/$addr:3260 enable_iser true" |
		tcli > /tmp/is.tcli 2>&1
	lio=/sys/kernel/config/target/iscsi/$IS_IQN/tpgt_1
	[ "$(cat "$lio/enable" 2>/dev/null)" = 1 ] && [ -d "$lio/lun/lun_0" ] &&
		[ "$(cat "$lio/np/$addr:3260/iser" 2>/dev/null)" = 1 ] ||
		{ echo "target setup failed:"; cat /tmp/is.tcli; return 1; }
	mkdir -p /run/lock/iscsi && iscsid || { echo "iscsid failed"; return 1; }
	# open-iscsi's built-in iface "iser" has the iser transport.
	iscsiadm -m node -o new -T "$IS_IQN" -p "$addr:3260" -I iser > /dev/null ||
		{ echo "iscsiadm: no node record"; return 1; }
	t0=$(date +%s)
	timeout 120 iscsiadm -m node -T "$IS_IQN" -p "$addr:3260" -I iser --login ||
		{ echo "login over iSER failed"; return 1; }
	wait_for has_is_disk || { echo "no disk after login"; return 1; }
	disk=$(is_disk)
	echo "logged in in $(($(date +%s) - t0)) s: $disk ($(cat /sys/class/block/${disk#/dev/}/size) sectors)," \
		"iSCSI transports: $(ls /sys/class/iscsi_transport | tr '\n' ' ')"
	ls /sys/class/iscsi_transport | grep -qx iser || { echo "no iser transport"; return 1; }
	blk_verify "$disk" is || return 1
	timeout 60 iscsiadm -m node -T "$IS_IQN" -p "$addr:3260" -I iser --logout ||
		{ echo "logout failed"; return 1; }
	wait_for no_is_session || { echo "session left after logout"; return 1; }
}
is_cleanup() {
	crc=0
	if ! no_is_session; then
		timeout 60 iscsiadm -m node --logoutall=all
		wait_for no_is_session || { echo "iSCSI session left"; crc=1; }
	fi
	if pgrep -x iscsid > /dev/null; then
		timeout 30 iscsiadm -k 0 2>/dev/null || pkill -x iscsid
		wait_for sh -c '! pgrep -x iscsid' || { echo "iscsid left"; crc=1; }
	fi
	tcli_down || crc=1
	mounted_at /etc/iscsi && { umount /etc/iscsi || crc=1; }
	return $crc
}
is_diag() {
	echo "iscsiadm -m session:"; timeout 20 iscsiadm -m session 2>&1 | sed 's/^/  /'
	echo "targetcli ls:"; tcli ls 2>&1 | sed 's/^/  /'
	kc_dmesg_tail
}
t_iser() {
	kc_needs ib_iser ib_isert target_core_mod iscsi_target_mod || return
	kc_tools targetcli dbus-daemon iscsid iscsiadm fio || return
	configfs || return
	kc_not_loaded target_core_mod libiscsi || return
	kc_run is
}

# SRP, target and initiator in this guest on the one device: ib_srpt serves a 64 MiB
# ramdisk LUN through LIO, configured in configfs (targetcli-fb cannot: rtslib lists
# srpt's ports with a glob that does not follow /sys/class/infiniband's links), the
# target port named by the device's port GUID, an ACL for the initiator at eth0's
# address, listening on RDMA/CM port 5555 (RoCE has no subnet manager for srp_daemon's
# discovery); ib_srp logs in with add_target, blk_verify checks the disk; then the
# remote port deleted, the target taken down, kc_run's checks.
SR_CFS=/sys/kernel/config/target
SR_PORT=5555
sr_rport() { for r in /sys/class/srp_remote_ports/port-*; do [ -e "$r" ] && { echo "$r"; return 0; }; done; return 1; }
sr_disk() {
	r=$(sr_rport) || return 1
	h=${r##*port-}; h=${h%%:*}
	for b in /sys/class/scsi_device/"$h":*/device/block/*; do
		[ -e "$b" ] && [ -b "/dev/${b##*/}" ] && { echo "/dev/${b##*/}"; return 0; }
	done
	return 1
}
has_sr_disk() { sr_disk > /dev/null; }
no_sr_rport() { ! sr_rport > /dev/null; }
sr_body() {
	SR_KEEP_TARGET=
	addr=$(eth0_v4)
	[ -n "$addr" ] || { echo "no IPv4 address on eth0"; return 1; }
	# ib_srpt names its ports after the devices there are when it loads: after ours.
	modprobe -a target_core_mod ib_srpt ib_srp || return 1
	gid=$(cat "/sys/class/infiniband/$DEV/ports/1/gids/0")
	guid=${gid#fe80:0000:0000:0000:}
	rd=$SR_CFS/core/rd_mcp_0/rd0 tpg=$SR_CFS/srpt/$guid/$guid
	mkdir -p "$rd" && echo rd_pages=16384 > "$rd/control" && echo 1 > "$rd/enable" &&
		mkdir -p "$SR_CFS/srpt" && echo $SR_PORT > "$SR_CFS/srpt/discovery_auth/rdma_cm_port" &&
		mkdir -p "$tpg/lun/lun_0" && ln -s "$rd" "$tpg/lun/lun_0/rd0" &&
		mkdir -p "$tpg/acls/$addr/lun_0" && ln -s "$tpg/lun/lun_0" "$tpg/acls/$addr/lun_0/lun_0" &&
		echo 1 > "$tpg/enable" || { echo "target setup failed"; return 1; }
	service=$(cat /sys/module/ib_srpt/parameters/srpt_service_guid)
	echo "target port $guid, service GUID $service, RDMA/CM port $(cat "$SR_CFS/srpt/discovery_auth/rdma_cm_port")"
	t0=$(date +%s)
	echo "id_ext=$service,ioc_guid=$service,src=$addr,dest=$addr:$SR_PORT" \
		> "/sys/class/infiniband_srp/srp-$DEV-1/add_target" || { echo "add_target failed"; return 1; }
	wait_for has_sr_disk || { echo "no disk after add_target"; return 1; }
	disk=$(sr_disk)
	echo "logged in in $(($(date +%s) - t0)) s: $disk ($(cat /sys/class/block/${disk#/dev/}/size) sectors), $(sr_rport)"
	blk_verify "$disk" sr || return 1
	sr_delete || return 1
}
# ib_srp's connections on the device (an RDMA/CM ID's owner is the module that made it;
# both ends' QPs are rdma_cm's).
sr_initiator_ids() { rdma res show cm_id link "$DEV/1" 2>/dev/null | grep -c 'comm \[ib_srp\]'; }
no_sr_initiator_id() { [ "$(sr_initiator_ids)" = 0 ]; }
# Deletes the remote port and waits until ib_srp has removed the target whole: the
# port leaves sysfs first, before the SCSI host is removed and the connection closed,
# and the target must not go away while ib_srp removes its SCSI host. In 7.2.13 a
# disconnect from the target then blocks the port, and srp_stop_rport_timers() fails
# its I/O through the tag set that scsi_remove_host() has just freed (a page fault in
# srp_terminate_io, over rxe and rxe_rs alike). ib_srp's connections go after that.
sr_delete() {
	r=$(sr_rport) || return 0
	n=$(sr_initiator_ids)
	echo "deleting $r, ib_srp has $n connections on $DEV"
	# Until ib_srp is seen done, the target stays (sr_cleanup).
	SR_KEEP_TARGET=1
	echo 1 > "$r/delete" || return 1
	wait_for no_sr_rport || { echo "remote port left after delete"; return 1; }
	[ "$n" -gt 0 ] || { echo "no RDMA/CM ID of ib_srp on $DEV:"; rdma res show cm_id link "$DEV/1"; return 1; }
	wait_for no_sr_initiator_id || { echo "ib_srp has $(sr_initiator_ids) connections left after delete"; return 1; }
	SR_KEEP_TARGET=
}
# Initiator first; then the target in the reverse order of its making (each configfs
# directory holds its module).
sr_cleanup() {
	# A target taken down under ib_srp's removal oopses (sr_delete): left as it is then.
	if ! sr_delete || [ -n "${SR_KEEP_TARGET:-}" ]; then echo "SRP target left in place"; return 1; fi
	crc=0
	for t in "$SR_CFS"/srpt/*/*/; do
		t=${t%/}
		[ -e "$t/enable" ] || continue
		echo 0 > "$t/enable"
		for a in "$t"/acls/*/; do
			[ -d "$a" ] || continue
			rm -f "$a"/lun_0/lun_0; rmdir "$a/lun_0" "$a" || crc=1
		done
		rm -f "$t"/lun/lun_0/rd0; rmdir "$t/lun/lun_0" "$t" "${t%/*}" || crc=1
	done
	[ -d "$SR_CFS/srpt" ] && { rmdir "$SR_CFS/srpt" || crc=1; }
	for d in "$SR_CFS"/core/rd_mcp_0/rd0 "$SR_CFS"/core/rd_mcp_0; do
		[ -d "$d" ] && { rmdir "$d" || crc=1; }
	done
	[ $crc = 0 ] || echo "target left: $(find "$SR_CFS" -maxdepth 3 2>/dev/null | tr '\n' ' ')"
	return $crc
}
sr_diag() {
	echo "SRP remote ports: $(ls /sys/class/srp_remote_ports 2>/dev/null | tr '\n' ' ')"
	kc_dmesg_tail
}
t_srp() {
	kc_needs ib_srp ib_srpt target_core_mod || return
	kc_tools fio || return
	configfs || return
	kc_not_loaded target_core_mod ib_srpt ib_srp || return
	kc_run sr
}
# perftest TOOL: server and client on the device, IPv4 GID, few iterations; both exit 0
# and the client prints a result line (numbers under the #bytes header).
perftest() {
	with_dev || return 1
	idx=$(gid_index v4) || return 1
	cmd="$1 -d $DEV -x $idx -F -n $PF_ITERS"
	pair 18515 "$cmd" "$cmd 127.0.0.1" || return 1
	grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' /tmp/client.out || { echo "no result line"; return 1; }
}
t_ib_send_bw() { perftest ib_send_bw; }
t_ib_write_bw() { perftest ib_write_bw; }
t_ib_read_bw() { perftest ib_read_bw; }
t_ib_atomic_bw() { perftest ib_atomic_bw; }
t_ib_send_lat() { perftest ib_send_lat; }
t_ib_write_lat() { perftest ib_write_lat; }
# The port follows eth0 down and up, and link_downed counts the fall (rxe counts each
# netdev event that finds the port down, so at least one; rxe_rs counts the fall once).
t_port_follows_carrier() {
	local before after
	with_dev || return 1
	before=$(counter link_downed)
	ip link set eth0 down
	wait_for port_state PORT_DOWN || { echo "port not DOWN after eth0 down"; return 1; }
	ip link set eth0 up
	wait_for port_state PORT_ACTIVE || { echo "port not ACTIVE after eth0 up"; return 1; }
	after=$(counter link_downed)
	echo "link_downed $before -> $after"
	[ -n "$before" ] && [ "$after" -gt "$before" ] || { echo "link_downed did not count the fall"; return 1; }
	[ "$DRIVER" = rxe ] || [ "$after" = $((before + 1)) ]
}
t_missing_netdev() {
	if add "$DEV" nosuchdev0; then echo "link add on a missing netdev succeeded"; return 1; fi
	no_device
}
t_name_taken() {
	with_dev || return 1
	ip link add tveth0 type veth peer name tveth1 || return 1
	if add "$DEV" tveth0; then echo "second device with the same name"; return 1; fi
	[ "$(devices)" = "$DEV" ] && "$VB" "$DEV" open_query
}
t_same_netdev_twice() {
	with_dev || return 1
	if add tdev1 eth0; then echo "second device on eth0"; return 1; fi
	[ "$(devices)" = "$DEV" ]
}
t_netdev_removed() {
	ip link add tveth0 type veth peer name tveth1 || return 1
	add tdevv tveth0 || return 1
	rdma link show tdevv/1 || return 1
	ip link del tveth0
	wait_for no_device || { echo "device left after its netdev went away:"; rdma link; return 1; }
}
# A peer namespace behind a veth pair sends 20 packets of each hostile kind (see
# roce_send.py) to the device's port 4791; the device and its QPs stay usable. rxe_rs
# also counts each kind where `rdma statistic` shows it.
counter() { rdma statistic show link "${2:-$DEV}/1" | tr ' ' '\n' | awk -v c="$1" 'p { print; exit } $0 == c { p = 1 }'; }
t_hostile_packets() {
	veth_link || return 1
	add "$DEV" tveth0 && wait_for port_state PORT_ACTIVE || return 1
	ip netns exec tpeer python3 "$HOST/roce_send.py" 10.9.0.2 10.9.0.1 20 || return 1
	sleep 1
	rdma statistic show link "$DEV/1"
	"$VB" "$DEV" pd || { echo "device unusable after hostile packets"; return 1; }
	[ "$DRIVER" = rxe_rs ] || return 0
	for c in rcvd_malformed rcvd_icrc_err rcvd_no_qp; do
		[ "$(counter $c)" -ge 20 ] || { echo "$c: $(counter $c), want at least 20"; return 1; }
	done
	[ "$(counter rcvd_pkts)" -ge 80 ] && [ "$(counter rcvd_dropped)" -ge 80 ]
}
# Well-formed, well-checksummed packets aimed at QPs that exist (roce_send.py --live:
# out-of-window PSNs, opcodes of the wrong transport, a wrong Q_Key) change nothing:
# live_qps.py holds an RC pair and a UD QP on the device and afterwards finds no
# completion, its QPs in RTS, and SENDs, RDMA WRITEs and datagrams still moving with
# their data intact. rxe_rs counts every packet of classes 2-5 in rcvd_qp_dropped; it
# answers class 1 (out-of-window PSNs) as RC says, one sequence NAK and an ACK for each
# duplicate, to the QP's peer. rxe drops all of them before its counters (class 1 too:
# their source address is not the QP's peer's); it counts class 5 in the port's
# qkey_viol_cntr, which live_qps.py prints.
# live_stats FILE: the device's counters as "name value" lines.
live_stats() {
	rdma statistic show link "$DEV/1" | tr ' ' '\n' |
		awk 'p ~ /^[a-z_]+$/ && /^[0-9]+$/ { print p, $0 } { p = $0 }' > "$1"
}
# live_delta NAME: how much counter NAME grew during the attack.
live_delta() {
	awk -v c="$1" 'NR == FNR { a[$1] = $2; next } $1 == c { print $2 - a[$1] }' /tmp/live.c0 /tmp/live.c1
}
# live_field KEY: KEY's number in live_qps.py's ready line.
live_field() { sed -n "s/^ready.* $1=\([0-9]*\).*/\1/p" /tmp/live.out; }
t_hostile_live() {
	rm -f /tmp/live_go
	veth_link || return 1
	add "$DEV" tveth0 && wait_for port_state PORT_ACTIVE || return 1
	timeout 180 python3 "$HOST/live_qps.py" "$DEV" 10.9.0.1 /tmp/live_go > /tmp/live.out 2>&1 &
	lpid=$!
	# Python and pyverbs start slowly under TCG: up to 60 s, while the program lives.
	i=0
	while ! grep -q '^ready ' /tmp/live.out; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 $lpid 2>/dev/null; then
			echo "live_qps.py not ready:"; kill $lpid 2>/dev/null; wait $lpid; cat /tmp/live.out; return 1
		fi
		sleep 0.2
	done
	live_stats /tmp/live.c0
	ip netns exec tpeer python3 "$HOST/roce_send.py" --live 10.9.0.2 10.9.0.1 20 "$(live_field rc)" \
		"$(live_field rcpsn)" "$(live_field ud)" "$(live_field rkey)" "$(live_field va)" > /tmp/live.sent
	sent_rc=$?
	cat /tmp/live.sent
	sleep 1
	live_stats /tmp/live.c1
	touch /tmp/live_go
	wait $lpid
	lrc=$?
	echo "live_qps.py exited $lrc:"; sed 's/^/  /' /tmp/live.out
	echo "counters after the attack (growth during it):"
	awk 'NR == FNR { a[$1] = $2; next } { printf "  %s %s (+%d)\n", $1, $2, $2 - a[$1] }' /tmp/live.c0 /tmp/live.c1
	echo "counters at the end:"; rdma statistic show link "$DEV/1"
	[ $sent_rc = 0 ] && [ $lrc = 0 ] || return 1
	[ "$DRIVER" = rxe_rs ] || return 0
	must=$(sed -n 's/.*must_drop=\([0-9]*\).*/\1/p' /tmp/live.sent)
	total=$(sed -n 's/.*total=\([0-9]*\).*/\1/p' /tmp/live.sent)
	c1=$(sed -n 's/.*class1=\([0-9]*\).*/\1/p' /tmp/live.sent)
	echo "class 1: $c1 packets, the RC QP sent $(live_delta sent_pkts) NAKs and ACKs to its peer;" \
		"rcvd_qp_dropped +$(live_delta rcvd_qp_dropped), $must of them classes 2-5"
	[ "$(live_delta rcvd_qp_dropped)" -ge "$must" ] ||
		{ echo "rcvd_qp_dropped +$(live_delta rcvd_qp_dropped), want at least $must"; return 1; }
	[ "$(live_delta rcvd_dropped)" -ge "$must" ] ||
		{ echo "rcvd_dropped +$(live_delta rcvd_dropped), want at least $must"; return 1; }
	[ "$(live_delta rcvd_pkts)" -ge "$total" ] ||
		{ echo "rcvd_pkts +$(live_delta rcvd_pkts), want at least $total"; return 1; }
}
# The tests below speak to QPs of peer_qps.py that are connected to 10.9.0.2, an address
# of the peer namespace where no device sits: roce_send.py there is their peer, so what
# it sends comes from the address the QPs take packets from, and what they send reaches
# its socket on UDP port 4791.
PQ=/tmp/pq
peer_net() {
	veth_link || return 1
	add "$DEV" tveth0 && wait_for port_state PORT_ACTIVE || return 1
}
# peer_start MODE [GO_TIMEOUT [LIFETIME]]: peer_qps.py MODE in the background (killed
# after LIFETIME seconds, 600 by default), until its ready line.
peer_start() {
	rm -rf "$PQ" && mkdir -p "$PQ" || return 1
	timeout "${3:-600}" python3 "$HOST/peer_qps.py" "$1" "$DEV" 10.9.0.1 10.9.0.2 "$PQ" "${2:-60}" \
		> "$PQ/out" 2>&1 &
	ppid=$!
	i=0
	while ! grep -q '^ready ' "$PQ/out"; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 $ppid 2>/dev/null; then
			echo "peer_qps.py not ready:"; kill $ppid 2>/dev/null; wait $ppid; cat "$PQ/out"; return 1
		fi
		sleep 0.2
	done
}
# pf KEY: KEY's value in peer_qps.py's ready line.
pf() { sed -n "s/^ready.* $1=\([0-9x,:]*\).*/\1/p" "$PQ/out"; }
# peer_finish: lets peer_qps.py check and returns its status (its output in the log).
peer_finish() {
	touch "$PQ/go"
	wait $ppid
	prc=$?
	echo "peer_qps.py exited $prc:"; sed 's/^/  /' "$PQ/out"
	return $prc
}
# Forged responses (roce_send.py --forged) of every response opcode and AETH syndrome,
# for PSNs the QPs never sent (half the PSN space ahead, just past the last sent, before
# the first, far behind), to two RC QPs whose sent SENDs, WRITEs, READ and atomic wait
# for an acknowledgement that does not come (peer_qps.py forged): no completion at
# all, no data placed, and each WQE flushed in error when the QP is moved to ERR.
# C rxe takes a response with a PSN past a SEND's or WRITE's last one as their
# acknowledgement, and completes them successfully.
t_forged_responses() {
	peer_net && peer_start forged || return 1
	ip netns exec tpeer timeout 120 python3 "$HOST/roce_send.py" --forged 10.9.0.2 10.9.0.1 \
		"$PQ/listen" 2 "$(pf f1):$(pf f1psn):$(pf f1span):$(pf f1pkts):$(pf f1dst)" \
		"$(pf f2):$(pf f2psn):$(pf f2span):$(pf f2pkts):$(pf f2dst)"
	src=$?
	peer_finish
	prc=$?
	rdma statistic show link "$DEV/1"
	[ $src = 0 ] && [ $prc = 0 ]
}
# RDMA WRITE FIRST, WRITE ONLY and READ requests whose RETH DMA length is above 2^31
# (0x80000001, 0xffffffff), each at its own RC QP's expected PSN (roce_send.py --reth,
# peer_qps.py reth): the IB spec makes them invalid requests. Each is dropped or
# answered with a NAK invalid request (what came back is printed), no data is placed
# and no READ response goes out.
t_reth_long() {
	peer_net && peer_start reth || return 1
	ip netns exec tpeer timeout 60 python3 "$HOST/roce_send.py" --reth 10.9.0.2 10.9.0.1 \
		"$PQ/listen" "$(pf qps)" "$(pf rqpsn)" "$(pf rkey)" "$(pf va)"
	src=$?
	peer_finish
	prc=$?
	[ $src = 0 ] && [ $prc = 0 ]
}
# One legitimate READ of a 16 MiB buffer (16384 responses), then a storm of 2000
# duplicates of it over 4 s (roce_send.py --storm, peer_qps.py storm): the storm's
# sender keeps its pace (it runs in this guest too), a ping-pong between two other QPs
# of the device completes meanwhile, the responses stop within 2 minutes of the storm,
# and the kernel logs no soft lockup, RCU stall or hung task (the test kernel has only
# the RCU stall detector, 21 s; the others are matched should a kernel have them). The
# packets that came back are counted on the peer's veth (the amplification, printed).
# STORM_N duplicates over STORM_S seconds, whose sending may take STORM_MAX seconds at
# most (the debug kernel's run sets fewer, a smaller READ with STORM_MB, and more time).
STORM_N=${STORM_N:-2000}
STORM_S=${STORM_S:-4}
STORM_MAX=${STORM_MAX:-$((STORM_S * 5))}
# stall_msgs N: stall reports among the kernel's messages after its first N lines.
stall_msgs() { dmesg | tail -n +$(($1 + 1)) | grep -E 'soft lockup|rcu.*stall|hung_task|blocked for more than'; }
t_dup_read_storm() {
	local TO=120
	if [ "$DRIVER" = rxe ] && [ -z "${STORM_ON_RXE:-}" ]; then
		echo "rxe: answers every duplicate with the rest of the 16 MiB READ, one after the other: minutes of traffic (STORM_ON_RXE=1 runs it)"
		return 4
	fi
	peer_net && peer_start storm 600 || return 1
	d0=$(dmesg | wc -l)
	: > "$PQ/sent"
	ip netns exec tpeer timeout 500 python3 "$HOST/roce_send.py" --storm 10.9.0.2 10.9.0.1 \
		"$PQ/listen" "$(pf qp)" "$(pf rqpsn)" "$(pf rkey)" "$(pf va)" "$(pf len)" \
		"$STORM_N" "$STORM_S" tveth1 "$STORM_MAX" > "$PQ/sent" 2>&1 &
	spid_s=$!
	i=0
	while ! grep -q '^storm start' "$PQ/sent" && kill -0 $spid_s 2>/dev/null && [ $i -lt 1500 ]; do
		i=$((i + 1)); sleep 0.2
	done
	pprc=1
	if grep -q '^storm start' "$PQ/sent"; then
		i0=$(gid_of "$DEV" '::ffff:10\.9\.0\.1')
		t0=$(date +%s)
		cmd="ibv_rc_pingpong -d $DEV -g $i0 -n 20 -s 4096 -c"
		pair 18515 "$cmd" "$cmd 127.0.0.1" && pp_ok 20
		pprc=$?
		echo "ping-pong during the storm: exit $pprc after $(($(date +%s) - t0)) s"
	fi
	wait $spid_s
	src=$?
	echo "roce_send.py --storm exited $src:"; sed 's/^/  /' "$PQ/sent"
	peer_finish
	prc=$?
	rdma statistic show link "$DEV/1"
	echo "stall detectors in /proc/sys/kernel: $(ls /proc/sys/kernel | grep -E 'watchdog|hung_task_timeout|softlockup' | tr '\n' ' ')(and the RCU stall warning)"
	if stall_msgs "$d0"; then echo "the kernel logged a stall"; return 1; fi
	[ $src = 0 ] && [ $prc = 0 ] && [ $pprc = 0 ]
}
# SENDs, RDMA WRITEs and datagrams whose BTH P_Key does not match the port's (0xffff)
# to a live RC QP (at its expected PSN, from its peer) and a live UD QP (with the right
# Q_Key) are dropped without an answer or an effect; control packets with P_Key 0xffff,
# and datagrams with 0x7fff (a limited member of the default partition matches the
# port's full membership), are taken (roce_send.py --pkey, peer_qps.py pkey).
t_pkey_mismatch() {
	peer_net && peer_start pkey || return 1
	ip netns exec tpeer timeout 60 python3 "$HOST/roce_send.py" --pkey 10.9.0.2 10.9.0.1 \
		"$PQ/listen" 3 "$(pf rc)" "$(pf rcpsn)" "$(pf ud)" "$(pf qkey)" "$(pf rkey)" "$(pf va)"
	src=$?
	peer_finish
	prc=$?
	rdma statistic show link "$DEV/1"
	[ $src = 0 ] && [ $prc = 0 ]
}
# The packet mutation fuzzer (roce_send.py --mutate says what it sends, peer_qps.py
# mutate what it checks): valid packets of every RC, UC and UD opcode, aimed at live QPs
# of the three transports at the PSNs they expect, with a key that opens 8 KiB, are
# mutated one packet a message (PSNs about the window's edges, RETH lengths and
# addresses at their limits, keys a bit away, pads, lengths, truncation at every header
# boundary, neighbouring opcodes, header bit flips, a few wrong ICRCs) and sent at
# PKTFUZZ_RATE packets a second for PKTFUZZ_SECONDS (75) or PKTFUZZ_MAX packets, over
# a veth pair of MTU 9000 (payloads past the path MTU get through). Meanwhile
# peer_qps.py checks each completion, reposts receives and work, and takes a QP in the
# error state back to RTS. Afterwards nothing outside the key's range changed, no
# receive took a packet that had to be dropped, each packet a receive holds is the one
# the sender's trace has (its QP, its bytes), two fresh RC QPs move data, and the
# kernel logged no BUG, WARNING, KASAN, lockdep, stall or Rust panic (an overflow
# check's "attempt to add with overflow" included). The first line of the sender's
# output is its seed: PKTFUZZ_SEED replays its choices (the QPs' answers steer the PSNs),
# PKTFUZZ_TRACE=FILE keeps the trace (every packet sent) in FILE, PKTFUZZ_CLASSES=a,b,... sends
# only those mutation classes. On rxe two kinds of packet do not go out, each of which
# makes rxe WARN: a packet with a response's opcode (a READ RESPONSE LAST whose AETH
# syndrome is a NAK, after the FIRST and MIDDLE of a READ outstanding, makes
# rxe_completer() WARN and complete the READ successfully without its last part), and
# an RC or UC RDMA WRITE whose RETH DMA length is 0 with a payload (rxe_mr_copy() WARNs
# on the NULL MR, once a packet). PKTFUZZ_ALL_ON_RXE=1 sends them there too.
PKTFUZZ_SECONDS=${PKTFUZZ_SECONDS:-75}
PKTFUZZ_MAX=${PKTFUZZ_MAX:-30000}
PKTFUZZ_RATE=${PKTFUZZ_RATE:-200}
t_pktfuzz() {
	local d0 src prc nr=${PKTFUZZ_NO_RESPONSES:-} nz=${PKTFUZZ_NO_ZERO_WRITES:-}
	if [ "$DRIVER" = rxe ] && [ -z "${PKTFUZZ_ALL_ON_RXE:-}" ]; then
		echo "rxe: no packet with a response's opcode and no RDMA WRITE with RETH length 0 is sent (each makes rxe WARN; PKTFUZZ_ALL_ON_RXE=1 sends them)"
		nr=1 nz=1
	fi
	peer_net || return 1
	ip link set tveth0 mtu 9000 && ip -n tpeer link set tveth1 mtu 9000 || return 1
	peer_start mutate $((PKTFUZZ_SECONDS + 240)) $((PKTFUZZ_SECONDS + 600)) || return 1
	d0=$(dmesg | wc -l)
	PKTFUZZ_TRACE=$PQ/trace PKTFUZZ_NO_RESPONSES=$nr PKTFUZZ_NO_ZERO_WRITES=$nz ip netns exec tpeer \
		timeout $((PKTFUZZ_SECONDS + 120)) python3 "$HOST/roce_send.py" --mutate 10.9.0.2 10.9.0.1 \
		"$PQ" "$PKTFUZZ_SECONDS" "$PKTFUZZ_MAX" "$PKTFUZZ_RATE" "${PKTFUZZ_SEED:-}"
	src=$?
	peer_finish
	prc=$?
	[ -n "${PKTFUZZ_TRACE:-}" ] && cp "$PQ/trace" "$PKTFUZZ_TRACE"
	# A receive that took a packet to be dropped, or placed one other than it was
	# sent: the packets sent around it (time, serial, target, class, message, bad
	# ICRC, the first 96 bytes).
	[ -s "$PQ/taken" ] && while read -r q s; do
		echo "packets $((s - 30))..$((s + 5)) around serial $s (in a receive of $q):"
		awk -v a=$((s - 30)) -v b=$((s + 5)) '$2 >= a && $2 <= b { print "  " $1, $2, $3, $4, $5, $6, substr($7, 1, 192) }' \
			"$PQ/trace"
	done < "$PQ/taken" | head -n 400
	rdma statistic show link "$DEV/1"
	dmesg | tail -n +$((d0 + 1)) > /tmp/pktfuzz.dmesg
	{ kernel_reports < /tmp/pktfuzz.dmesg
	  grep -E 'panicked at|attempt to [a-z]+ with overflow' /tmp/pktfuzz.dmesg; } > /tmp/pktfuzz.reports
	if [ -s /tmp/pktfuzz.reports ]; then
		echo "kernel reports during the run ($(wc -l < /tmp/pktfuzz.reports)), the first with what follows it:"
		head -n 10 /tmp/pktfuzz.reports
		grep -m 1 -A 40 -F "$(head -n 1 /tmp/pktfuzz.reports)" /tmp/pktfuzz.dmesg
		return 1
	fi
	[ $src = 0 ] && [ $prc = 0 ]
}
# RC over a lossy, reordering, duplicating link (tc netem on both ends of a veth pair
# into a peer namespace, a device on each end): ibv_rc_pingpong still moves every
# message with its data checked, so does rping (RDMA READ and WRITE), and rxe_rs counts
# the retransmissions that took.
# NETEM_ITERS bounds the run; the pairs get 90 s each (rxe takes about 0.5 s per 64 KiB
# round trip on this link, rxe_rs about 0.1 s).
NETEM_ITERS=${NETEM_ITERS:-30}
gid_of() { gid_in "" "$@"; }
# gid_in NS DEV PATTERN: as gid_of, seen from namespace NS ("": this one).
gid_in() {
	${1:+ip netns exec "$1"} ibv_devinfo -v -d "$2" |
		sed -n "s/.*GID\[ *\([0-9]*\)\]:[[:space:]]*$3, RoCE v2\$/\1/p" | head -n 1
}
has_gid_of() { [ -n "$(gid_of "$1" "$2")" ]; }
# end_race DONE FAILED: DONE's side ran all its iterations, FAILED's ran out of retries.
end_race() { grep -q "^$NETEM_ITERS iters in" "$1" && grep -q 'retry counter exceeded' "$2"; }
# veth_pair: a veth pair into a peer namespace, 10.9.0.1 on tveth0 here and 10.9.0.2
# on tveth1 there, a device on each end ($DEV and tdevp); sets i0 and i1 to their IPv4
# GID indexes.
veth_pair() {
	veth_link || return 1
	add "$DEV" tveth0 || return 1
	ip netns exec tpeer rdma link add tdevp type "$DRIVER" netdev tveth1 || return 1
	wait_for port_state PORT_ACTIVE || return 1
	wait_for has_gid_of tdevp '::ffff:10\.9\.0\.2' || return 1
	i0=$(gid_of "$DEV" '::ffff:10\.9\.0\.1'); i1=$(gid_of tdevp '::ffff:10\.9\.0\.2')
	[ -n "$i0" ] && [ -n "$i1" ] || { echo "no IPv4 GIDs: '$i0' '$i1'"; return 1; }
}
# vlan_pair: veth_pair with VLAN 10 on both ends (10.10.0.1 on tveth0.10 here, 10.10.0.2
# on tveth1.10 there); sets v0 and v1 to the devices' GID indexes of the VLAN addresses.
vlan_pair() {
	veth_pair || return 1
	ip link add link tveth0 name tveth0.10 type vlan id 10 &&
		ip addr add 10.10.0.1/24 dev tveth0.10 && ip link set tveth0.10 up || return 1
	ip -n tpeer link add link tveth1 name tveth1.10 type vlan id 10 &&
		ip -n tpeer addr add 10.10.0.2/24 dev tveth1.10 && ip -n tpeer link set tveth1.10 up || return 1
	wait_for has_gid_of "$DEV" '::ffff:10\.10\.0\.1' && wait_for has_gid_of tdevp '::ffff:10\.10\.0\.2' ||
		{ echo "no GIDs of the VLAN addresses"; ibv_devinfo -v -d "$DEV" | grep GID; return 1; }
	v0=$(gid_of "$DEV" '::ffff:10\.10\.0\.1'); v1=$(gid_of tdevp '::ffff:10\.10\.0\.2')
}
# vlan_rx: the packets tveth0.10 and tveth1.10 received, as "HERE THERE".
vlan_rx() {
	echo "$(cat /sys/class/net/tveth0.10/statistics/rx_packets)" \
		"$(ip netns exec tpeer cat /sys/class/net/tveth1.10/statistics/rx_packets)"
}
# vlan_grew BEFORE_HERE BEFORE_THERE MIN WHAT: each VLAN device received at least MIN
# packets since.
vlan_grew() {
	set -- "$@" $(vlan_rx)
	echo "$4: tveth0.10 received $(($5 - $1)), tveth1.10 $(($6 - $2)) packets (want at least $3 each)"
	[ $(($5 - $1)) -ge "$3" ] && [ $(($6 - $2)) -ge "$3" ]
}
# vlan_rc_rping GID_HERE GID_THERE ADDR_HERE WHAT: 20 RC round trips of 4 KiB between
# the two GIDs (of the VLAN devices' addresses), then rping from the peer to ADDR_HERE
# through rdma_cm, each counted on both VLAN devices.
vlan_rc_rping() {
	local n=20 r
	r=$(vlan_rx)
	cmd="ibv_rc_pingpong -d $DEV -g $1 -n $n -s 4096 -c"
	pair 18515 "$cmd" "ip netns exec tpeer ibv_rc_pingpong -d tdevp -g $2 -n $n -s 4096 -c 10.9.0.1" &&
		pp_ok $n || return 1
	# Four packets of 1 KiB a message, each way.
	vlan_grew $r $((4 * n)) "RC$4" || return 1
	modprobe -a rdma_cm rdma_ucm || return 1
	r=$(vlan_rx)
	pair 7174 "rping -s -a $3 -V -C 10" "ip netns exec tpeer rping -c -a $3 -V -C 10" || return 1
	vlan_grew $r 10 "rping$4"
}
# A GID of a VLAN device on the device's netdev carries RoCE through that VLAN device,
# tagged, both ways: an RC ping-pong between the two ends' VLAN GIDs (their TCP exchange
# of addresses goes untagged, over 10.9.0.x, so that only RoCE counts) and rping through
# rdma_cm to the VLAN address from the peer (connection management and data), then a UD
# ping-pong, and rping from the device to itself (its loopback: a datagram's completion
# carries the VLAN of its destination GID, by which the CM finds the GID it was sent to).
# A packet sent untagged through the base netdev would reach the peer's base netdev, not
# its VLAN device, and the peer's VLAN device counts only what came tagged.
t_vlan_gids() {
	local n=20 r c TO="$TO"
	vlan_pair || return 1
	vlan_rc_rping "$v0" "$v1" 10.10.0.1 "" || return 1
	r=$(vlan_rx)
	cmd="ibv_ud_pingpong -d $DEV -g $v0 -n $n -s 1024 -c"
	pair 18515 "$cmd" "ip netns exec tpeer ibv_ud_pingpong -d tdevp -g $v1 -n $n -s 1024 -c 10.9.0.1" &&
		pp_ok $n || return 1
	vlan_grew $r $n "UD" || return 1
	pair 7174 "rping -s -a 10.10.0.1 -V -C 10" "rping -c -a 10.10.0.1 -V -C 10" || return 1
	# A datagram to the VLAN's address that arrives untagged (sent from the peer's base
	# GID, out of its base netdev) is not the device's: dropped, on both drivers (rxe_rs
	# counts it in rcvd_not_our_gid), and the ping-pong gets no answer.
	[ "$DRIVER" = rxe ] || c=$(counter rcvd_not_our_gid)
	TO=10
	pair 18515 "ibv_ud_pingpong -d $DEV -g $v0 -n 2 -s 64" \
		"ip netns exec tpeer ibv_ud_pingpong -d tdevp -g $i1 -n 2 -s 64 10.9.0.1" &&
		{ echo "a datagram crossed from the untagged network to the VLAN's address"; return 1; }
	[ "$DRIVER" = rxe ] || [ $(($(counter rcvd_not_our_gid) - c)) -ge 1 ] ||
		{ echo "the untagged datagram was not counted in rcvd_not_our_gid"; return 1; }
}
# The same over IPv6: the GIDs of IPv6 addresses of the VLAN devices carry an RC
# ping-pong tagged both ways, and rping through rdma_cm to the peer's IPv6 address on
# the VLAN.
t_vlan_gids_v6() {
	vlan_pair || return 1
	ip addr add fd10::1/64 dev tveth0.10 nodad &&
		ip -n tpeer addr add fd10::2/64 dev tveth1.10 nodad || return 1
	wait_for has_gid_of "$DEV" 'fd10::1' && wait_for has_gid_of tdevp 'fd10::2' ||
		{ echo "no GIDs of the VLAN's IPv6 addresses"; ibv_devinfo -v -d "$DEV" | grep GID; return 1; }
	vlan_rc_rping "$(gid_of "$DEV" 'fd10::1')" "$(gid_of tdevp 'fd10::2')" fd10::1 " over IPv6"
}
# Two addresses of one netdev, two GIDs of one device: RC and UD ping-pongs between them
# go through the device's loopback (the IP stack would hand them to lo, which no device
# receives on). (Between a netdev's GID and its VLAN's, ib_core refuses the path.)
t_two_gids_one_netdev() {
	local n=20 i2
	veth_pair || return 1
	ip addr add 10.9.0.3/24 dev tveth0 || return 1
	wait_for has_gid_of "$DEV" '::ffff:10\.9\.0\.3' || { echo "no GID of 10.9.0.3"; return 1; }
	i2=$(gid_of "$DEV" '::ffff:10\.9\.0\.3')
	for t in rc ud; do
		cmd="ibv_${t}_pingpong -d $DEV -n $n -s 1024 -c"
		pair 18515 "$cmd -g $i0" "$cmd -g $i2 127.0.0.1" && pp_ok $n || return 1
	done
}
# A device on a VLAN device itself is refused, on both drivers (EPERM): ib_core gives the
# VLAN's addresses to the device on its real netdev, and none to one on the VLAN device,
# which would have no GID. Nothing is left of the attempt, and the device on the real
# netdev goes on carrying the VLAN's traffic.
t_vlan_device() {
	local r
	vlan_pair || return 1
	if add tdevv tveth0.10 2>/tmp/err.out; then echo "a device on a VLAN device was added"; return 1; fi
	cat /tmp/err.out
	grep -q 'Operation not permitted' /tmp/err.out || { echo "want EPERM"; return 1; }
	[ -z "$(devices | grep -x tdevv)" ] || { echo "tdevv listed"; return 1; }
	r=$(vlan_rx)
	cmd="ibv_rc_pingpong -d $DEV -g $v0 -n 5 -s 4096 -c"
	pair 18515 "$cmd" "ip netns exec tpeer ibv_rc_pingpong -d tdevp -g $v1 -n 5 -s 4096 -c 10.9.0.1" &&
		pp_ok 5 || return 1
	vlan_grew $r 20 "RC" || return 1
}
# bond_pair MODE...: a bond of two veth links on each side (tbond0 here, on links tva0
# and tvb0; tbond1 in the peer namespace tpeer, on tva1 and tvb1), made with `ip link
# add ... type bond MODE`, 10.11.0.1 and 10.11.0.2 on the bonds, a device on each bond;
# sets b0 and b1 to the devices' GID indexes of those addresses.
bond_pair() {
	ip netns add tpeer || return 1
	ip link add tbond0 type bond "$@" || return 1
	ip -n tpeer link add tbond1 type bond "$@" || return 1
	for l in a b; do
		ip link add tv${l}0 type veth peer name tv${l}1 netns tpeer &&
			ip link set tv${l}0 master tbond0 && ip -n tpeer link set tv${l}1 master tbond1 || return 1
	done
	ip addr add 10.11.0.1/24 dev tbond0 && ip link set tbond0 up || return 1
	ip -n tpeer addr add 10.11.0.2/24 dev tbond1 && ip -n tpeer link set tbond1 up || return 1
	add "$DEV" tbond0 && ip netns exec tpeer rdma link add tdevp type "$DRIVER" netdev tbond1 || return 1
	wait_for port_state PORT_ACTIVE && wait_for has_gid_of tdevp '::ffff:10\.11\.0\.2' ||
		{ echo "no port or GID on the bonds"; return 1; }
	b0=$(gid_of "$DEV" '::ffff:10\.11\.0\.1'); b1=$(gid_of tdevp '::ffff:10\.11\.0\.2')
}
# bond_pingpong_while CMD...: an RC ping-pong of 3000 messages of 4 KiB between the
# devices of bond_pair, CMD run 2 s into it; then the RC retransmissions of both ends.
bond_pingpong_while() {
	local n=3000 TO=120 during
	cmd="ibv_rc_pingpong -d $DEV -g $b0 -n $n -s 4096 -c"
	( sleep 2; "$@" ) &
	during=$!
	pair 18515 "$cmd" "ip netns exec tpeer ibv_rc_pingpong -d tdevp -g $b1 -n $n -s 4096 -c 10.11.0.1" &&
		pp_ok $n || return 1
	# Not a bare `wait`: a hook's job of the harness (cover-hook.sh) runs beside the test.
	wait $during
	echo "retransmits here: $(counter retransmits), there: $(counter retransmits tdevp)"
}
link_down() { ip link set "$1" down; echo "took $1 down"; }
# A device on an active-backup bond: an RC ping-pong between two bonded devices goes on
# across a failover (the active link of each side goes down in the middle of it; the
# RC retries cover what was lost meanwhile) and moves all its data, checked.
t_bond_failover() {
	local active
	bond_pair mode active-backup miimon 50 || return 1
	active=$(cat /sys/class/net/tbond0/bonding/active_slave)
	[ -n "$active" ] || { echo "no active link on tbond0"; return 1; }
	bond_pingpong_while link_down "$active" || return 1
	echo "tbond0 active link: $active before, $(cat /sys/class/net/tbond0/bonding/active_slave) after"
	[ "$(cat /sys/class/net/tbond0/bonding/active_slave)" != "$active" ] ||
		{ echo "no failover happened"; return 1; }
}
tx_of() { cat "/sys/class/net/$1/statistics/tx_packets"; }
# The link of tbond0 that carries the ping-pong goes down: the one whose packet count
# grew by more in half a second, once the two together grew by 20 (within 30 s); the
# other link and its count then go to /tmp/bond.other.
busier_link_down() {
	for i in $(seq 60); do
		ta=$(tx_of tva0) tb=$(tx_of tvb0); sleep 0.5; a=$(($(tx_of tva0) - ta)) b=$(($(tx_of tvb0) - tb))
		[ $((a + b)) -lt 20 ] || break
	done
	echo "tx packets in half a second: tva0 $a, tvb0 $b"
	if [ "$b" -gt "$a" ]; then busy=tvb0 other=tva0; else busy=tva0 other=tvb0; fi
	echo "$other $(tx_of $other)" > /tmp/bond.other
	link_down $busy
}
# The same over a bond that spreads flows by hash (balance-xor, layer3+4, the way a LAG
# spreads them): the link carrying the ping-pong's packets goes down in the middle, and
# the connection goes on over the other one.
t_bond_hash_failover() {
	rm -f /tmp/bond.other
	bond_pair mode balance-xor xmit_hash_policy layer3+4 miimon 50 || return 1
	bond_pingpong_while busier_link_down || return 1
	read -r other before < /tmp/bond.other || { echo "no link went down"; return 1; }
	echo "$other sent $(($(tx_of "$other") - before)) packets after the other link went down"
	[ $(($(tx_of "$other") - before)) -ge 100 ] || { echo "the ping-pong did not move to $other"; return 1; }
}
t_netem_rc() {
	local TO=90
	veth_pair || return 1
	tc qdisc add dev tveth0 root netem delay 1ms reorder 25% 50% loss 1% duplicate 1% || return 1
	ip netns exec tpeer tc qdisc add dev tveth1 root netem delay 1ms reorder 25% 50% loss 1% duplicate 1% || return 1
	for size in 4096 65536; do
		for ev in "" -e; do
			srv="ibv_rc_pingpong -d $DEV -g $i0 -n $NETEM_ITERS -s $size -c${ev:+ $ev}"
			cli="ip netns exec tpeer ibv_rc_pingpong -d tdevp -g $i1 -n $NETEM_ITERS -s $size -c${ev:+ $ev} 10.9.0.1"
			# ibv_rc_pingpong's end race on a lossy link: one side is done and has
			# destroyed its QP when the ACK of the other's last message is lost, so
			# the other's retransmission meets no QP and its retries run out. Only
			# that failure, and only once, makes the pair run again.
			if ! pair 18515 "$srv" "$cli"; then
				end_race /tmp/server.out /tmp/client.out ||
					end_race /tmp/client.out /tmp/server.out || return 1
				echo "end race (one side finished; the other's last ACK was lost): once more"
				pair 18515 "$srv" "$cli" || return 1
			fi
			pp_ok "$NETEM_ITERS" || return 1
		done
	done
	# RDMA READ and WRITE over the same link, data verified: rping's server READs the
	# client's 60000 bytes (59 responses, some of which get lost) and WRITEs them back,
	# and the client compares every ping (-V) and exits 0 only if all came back. The
	# server's exit is not waited for: a lost disconnect request can keep it in the
	# CM's retries for a minute, which says nothing about the data path.
	modprobe -a rdma_cm rdma_ucm || return 1
	timeout "$TO" rping -s -a 10.9.0.1 -V -C "$NETEM_ITERS" -S 60000 > /tmp/server.out 2>&1 &
	spid=$!
	await_server 7174 "$spid" cm || { echo "rping server not listening"; kill "$spid"; return 1; }
	ip netns exec tpeer timeout "$TO" rping -c -a 10.9.0.1 -V -C "$NETEM_ITERS" -S 60000 \
		> /tmp/client.out 2>&1
	crc=$?
	sleep 2; kill "$spid" 2>/dev/null; wait "$spid"
	echo "rping client ($crc), $NETEM_ITERS pings of 60000 bytes:"; sed 's/^/  /' /tmp/client.out
	[ $crc = 0 ] || return 1
	if grep -qi 'mismatch' /tmp/server.out /tmp/client.out; then echo "rping: data mismatch"; return 1; fi
	tc -s qdisc show dev tveth0; ip netns exec tpeer tc -s qdisc show dev tveth1
	rdma statistic show link "$DEV/1"; rdma statistic show link tdevp/1
	[ "$DRIVER" = rxe_rs ] || return 0
	# Losses are made good by sequence NAKs or by acknowledgement timeouts; either way
	# the requester sends again, and counts it.
	r0=$(counter retransmits); r1=$(counter retransmits tdevp)
	echo "retransmits: $DEV $r0, tdevp $r1"
	[ $((r0 + r1)) -gt 0 ] || { echo "no retransmission counted over a lossy link"; return 1; }
	r0=$(($(counter rcvd_seq_err) + $(counter rcvd_seq_err tdevp)))
	r1=$(($(counter ack_timeouts) + $(counter ack_timeouts tdevp)))
	echo "sequence NAKs received $r0, acknowledgement timeouts $r1"
	[ $((r0 + r1)) -gt 0 ] || { echo "retransmissions without a sequence NAK or a timeout"; return 1; }
}
# An RC stream between two devices keeps going when the address it is sent from is
# deleted and added again, three times, under it: each time the IP stack drops the
# routes through that address (a route kept from before then leads nowhere: what is sent
# along it is discarded), the packets sent meanwhile are lost and sent again, and the
# QP's kept route must be looked up anew, or the stream runs out of retries. (Taking
# the link down instead would also stop it for up to a second, until the kernel's link
# watch turns the carrier on again: longer than ibv_rc_pingpong's retries last.)
# 1000 round trips of 4 KiB.
t_rc_addr_readded() {
	local TO=90 n=1000
	veth_pair || return 1
	srv="ibv_rc_pingpong -d $DEV -g $i0 -n $n -s 4096 -c"
	timeout "$TO" $srv > /tmp/server.out 2>&1 &
	spid=$!
	await_server 18515 "$spid" || { echo "server not listening"; kill "$spid"; return 1; }
	ip netns exec tpeer timeout "$TO" ibv_rc_pingpong -d tdevp -g "$i1" -n $n -s 4096 -c \
		10.9.0.1 > /tmp/client.out 2>&1 &
	cpid=$!
	sleep 1
	for k in 1 2 3; do
		t0=$(date +%s%N)
		printf 'address del 10.9.0.1/24 dev tveth0\naddress add 10.9.0.1/24 dev tveth0\n' |
			ip -batch - || { kill "$cpid" "$spid"; return 1; }
		echo "address deleted and added again ($k) in $((($(date +%s%N) - t0) / 1000000)) ms"
		sleep 0.5
	done
	# The first side to fail stops the other (on rxe the server's QP fails at once and
	# the client would wait for its timeout).
	while kill -0 "$cpid" 2>/dev/null && kill -0 "$spid" 2>/dev/null; do sleep 0.2; done
	if ! kill -0 "$cpid" 2>/dev/null; then
		wait "$cpid"; crc=$?
		[ $crc = 0 ] || kill "$spid" 2>/dev/null
		wait "$spid"; src=$?
	else
		wait "$spid"; src=$?
		[ $src = 0 ] || kill "$cpid" 2>/dev/null
		wait "$cpid"; crc=$?
	fi
	echo "server ($src):"; sed 's/^/  /' /tmp/server.out
	echo "client ($crc):"; sed 's/^/  /' /tmp/client.out
	rdma statistic show link "$DEV/1"
	[ $src = 0 ] && [ $crc = 0 ] || return 1
	pp_ok "$n" || return 1
}
# A device on a netdev of another network namespace listens on port 4791 there; deleting
# the namespace removes the device (its netdev goes) and closes the namespace's sockets.
t_netns_device() {
	ip netns add tns && ip link add tveth0 type veth peer name tveth1 netns tns || return 1
	ip -n tns link set tveth1 up && ip netns exec tns rdma link add tdevn type "$DRIVER" netdev tveth1 || return 1
	ip netns exec tns ss -uln | grep -q ':4791 ' || { echo "no UDP socket on 4791 in the namespace"; return 1; }
	ip netns del tns
	wait_for no_device || { echo "device left after its namespace went away:"; rdma link; return 1; }
}
# With ib_core's namespaces exclusive (rdma system set netns exclusive), a device belongs
# to the namespace of its netdev: seen and used there only. An RC ping-pong between a
# device here and one added in a peer namespace; then `rdma dev set DEV netns` moves the
# one here to the peer namespace and back (ib_core disassociates its users and re-adds
# its clients; the device is then used again); deleting the peer namespace removes the
# device whose netdev it took along. rxe puts every device in the initial namespace, so
# the check skips there.
in_ns() { ip netns exec "$1" rdma dev show "$2" >/dev/null 2>&1; }
has_gid_in() { [ -n "$(gid_in "$@")" ]; }
t_netns_exclusive() {
	local n=10
	wait_for rdma system set netns exclusive || { echo "cannot make namespaces exclusive"; return 1; }
	touch /tmp/netns_exclusive
	ip netns attach tinit 1 || return 1
	veth_link || return 1
	add "$DEV" tveth0 && ip netns exec tpeer rdma link add tdevp type "$DRIVER" netdev tveth1 || return 1
	if ! in_ns tpeer tdevp; then
		[ "$DRIVER" = rxe ] && { echo "rxe: a device added in a namespace is in the initial one"; return 4; }
		echo "tdevp not in its netdev's namespace"; return 1
	fi
	! in_ns tinit tdevp && ! in_ns tpeer "$DEV" && in_ns tinit "$DEV" ||
		{ echo "a device is seen outside its namespace"; rdma dev; return 1; }
	wait_for port_state PORT_ACTIVE && wait_for has_gid_in tpeer tdevp '::ffff:10\.9\.0\.2' ||
		{ echo "no GID of 10.9.0.2 on tdevp"; return 1; }
	i0=$(gid_of "$DEV" '::ffff:10\.9\.0\.1'); i1=$(gid_in tpeer tdevp '::ffff:10\.9\.0\.2')
	[ -n "$i0" ] && [ -n "$i1" ] || { echo "no IPv4 GIDs: '$i0' '$i1'"; return 1; }
	cmd="ibv_rc_pingpong -d $DEV -g $i0 -n $n -s 4096 -c"
	pair 18515 "$cmd" "ip netns exec tpeer ibv_rc_pingpong -d tdevp -g $i1 -n $n -s 4096 -c 10.9.0.1" &&
		pp_ok $n || return 1
	rdma dev set "$DEV" netns tpeer || return 1
	in_ns tpeer "$DEV" && ! in_ns tinit "$DEV" || { echo "$DEV did not move to tpeer"; return 1; }
	ip netns exec tpeer rdma dev set "$DEV" netns tinit || return 1
	in_ns tinit "$DEV" && ! in_ns tpeer "$DEV" || { echo "$DEV did not move back"; return 1; }
	wait_for port_state PORT_ACTIVE || return 1
	pair 18515 "$cmd" "ip netns exec tpeer ibv_rc_pingpong -d tdevp -g $i1 -n $n -s 4096 -c 10.9.0.1" &&
		pp_ok $n || return 1
	ip netns del tpeer || return 1
	wait_for not_listed tdevp || { echo "tdevp left after its namespace went away:"; rdma link; return 1; }
}
not_listed() { ! rdma link show "$1/1" >/dev/null 2>&1; }
# Port 4791 is open while a device of its namespace uses it: opened by the first
# device, kept while one is left, closed when the last is deleted, and only in the
# device's namespace (rxe's kselftest rxe_socket_with_netns asks the same). In new
# namespaces, so that what earlier tests left in the initial one does not count (on rxe
# the suite's earlier tests leave 4791 open there with no device left).
udp_4791() { ip netns exec "$1" ss -Huln 'sport = :4791' | grep -c ':4791'; }
t_udp_port_follows_devices() {
	ip netns add tns && ip netns add tpeer || return 1
	ip -n tns link add tveth0 type veth peer name tveth1 || return 1
	ip -n tns link set tveth0 up && ip -n tns link set tveth1 up || return 1
	[ "$(udp_4791 tns)" = 0 ] || { echo "port 4791 open in a new namespace"; return 1; }
	ip netns exec tns rdma link add tdev0 type "$DRIVER" netdev tveth0 || return 1
	[ "$(udp_4791 tns)" -ge 1 ] || { echo "port 4791 not open after the first device"; return 1; }
	ip netns exec tns rdma link add tdev1 type "$DRIVER" netdev tveth1 || return 1
	ip netns exec tns rdma link delete tdev0 || return 1
	[ "$(udp_4791 tns)" -ge 1 ] || { echo "port 4791 closed while tdev1 is left"; return 1; }
	ip netns exec tns rdma link delete tdev1 || return 1
	[ "$(udp_4791 tns)" = 0 ] || { echo "port 4791 still open after the last device"; return 1; }
	ip -n tns link set tveth1 netns tpeer && ip -n tpeer link set tveth1 up || return 1
	ip netns exec tpeer rdma link add tdevn type "$DRIVER" netdev tveth1 || return 1
	[ "$(udp_4791 tpeer)" -ge 1 ] && [ "$(udp_4791 tns)" = 0 ] ||
		{ echo "port 4791 not (only) in the namespace of its device"; return 1; }
	ip netns exec tpeer rdma link delete tdevn || return 1
	[ "$(udp_4791 tpeer)" = 0 ] || { echo "port 4791 still open in the namespace"; return 1; }
}
t_link_delete() {
	with_dev || return 1
	rdma link delete "$DEV" || return 1
	no_device && ! ibv_devices | grep -qw "$DEV"
}
t_link_delete_with_user() {
	with_dev || return 1
	# A process holds the device with a PD while it is deleted: the delete completes
	# (today by waiting for the process to close the device) and leaves nothing.
	"$VB" "$DEV" hold > /tmp/hold.out 2>&1 &
	wait_for grep -q ready /tmp/hold.out || { cat /tmp/hold.out; return 1; }
	rdma link delete "$DEV" || return 1
	wait $! || { echo "holder failed:"; cat /tmp/hold.out; return 1; }
	no_device
}
# A process holds a CQ (ring mapped) and a PD while the device is deleted: the delete
# returns while the process still runs (not waiting for it to close the device), the
# process gets DEVICE_FATAL and can still touch its ring, and nothing is left.
t_link_delete_with_mapped_ring() {
	with_dev || return 1
	"$VO" "$DEV" hold_until_fatal > /tmp/holdf.out 2>&1 &
	pid=$!
	wait_for grep -q ready /tmp/holdf.out || { cat /tmp/holdf.out; return 1; }
	start=$(date +%s)
	rdma link delete "$DEV" || return 1
	took=$(($(date +%s) - start))
	# The holder stays a minute after DEVICE_FATAL: running now means the delete did
	# not wait for it.
	wait_for grep -q fatal /tmp/holdf.out
	alive $pid
	held=$?
	kill $pid 2>/dev/null
	wait $pid 2>/dev/null
	echo "delete took ${took}s; holder running after it: $([ $held = 0 ] && echo yes || echo no):"
	cat /tmp/holdf.out
	[ $held = 0 ] && grep -q fatal /tmp/holdf.out && no_device
}
# Before ib_core is loaded: insmod fails with the kernel's unknown-symbol error.
t_insmod_without_ib_core() {
	if lsmod | grep -q '^ib_core '; then echo "ib_core already loaded"; return 1; fi
	if insmod "$KO"; then echo "insmod succeeded without ib_core"; return 1; fi
	dmesg | grep -q "$MOD: Unknown symbol" || { dmesg | tail -n 5; return 1; }
}
# make install puts rxe_rs in rdma_rxe's place, with the Makefile, tools/install.sh and
# dist/rxe_rs.conf as shipped (the module given with KO=): modprobe rdma_rxe loads
# rxe_rs, `rdma link add ... type rxe` makes an rxe_rs device that carries an RC
# ping-pong, the stock rdma_rxe cannot load beside it, modprobe -r rdma_rxe unloads it.
# make uninstall makes rdma_rxe the stock driver again, and rxe_rs with link_type_rxe=1
# refuses to load beside that. /lib/modules and /etc/modprobe.d are copies in /tmp
# for the test (the guest tree is the cached one).
t_make_install() {
	local stock rc
	[ "$DRIVER" = rxe_rs ] || { echo "installs rxe_rs in rdma_rxe's place"; return 4; }
	unload || return 1
	stock=$(modinfo -n rdma_rxe) || return 1
	cp -a "/lib/modules/$KVER" /tmp/modules && mount --bind /tmp/modules "/lib/modules/$KVER" || return 1
	mkdir -p /tmp/modprobe.d && cp -a /etc/modprobe.d/. /tmp/modprobe.d/ &&
		mount --bind /tmp/modprobe.d /etc/modprobe.d || { umount "/lib/modules/$KVER"; return 1; }
	make_install_checks "$stock"
	rc=$?
	lsmod | grep -q '^rdma_rxe ' && modprobe -r rdma_rxe
	lsmod | grep -q '^rxe_rs ' && rmmod rxe_rs
	umount /etc/modprobe.d; umount "/lib/modules/$KVER"
	# modprobe -r took the dependencies out too.
	modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel && load && return $rc
}
make_install_checks() {
	local DEV=rxe0 idx cmd
	make -s -C "$HOST/src" install KO="$KO" || return 1
	modprobe rdma_rxe || { echo "modprobe rdma_rxe failed"; return 1; }
	lsmod | grep -q '^rxe_rs ' && ! lsmod | grep -q '^rdma_rxe ' ||
		{ echo "modprobe rdma_rxe did not load rxe_rs:"; lsmod; return 1; }
	rdma link add rxe0 type rxe netdev eth0 || { echo "rdma link add ... type rxe failed"; return 1; }
	[ "$(cat /sys/class/infiniband/rxe0/node_desc)" = rxe_rs ] || { echo "rxe0 is not an rxe_rs device"; return 1; }
	wait_for port_active || { echo "port not active"; return 1; }
	idx=$(gid_index v4) || return 1
	cmd="ibv_rc_pingpong -d rxe0 -g $idx -n 20 -s 4096 -c"
	pair 18515 "$cmd" "$cmd 127.0.0.1" && pp_ok 20 || return 1
	if insmod "$stock" 2>/dev/null; then echo "the stock rdma_rxe loaded beside rxe_rs"; return 1; fi
	dmesg | tail -n 20 | grep -q 'rdma_rxe cannot load' || { echo "no word of the refusal"; return 1; }
	rdma link delete rxe0 || return 1
	modprobe -r rdma_rxe || { echo "modprobe -r rdma_rxe failed"; return 1; }
	! lsmod | grep -q '^rxe_rs ' || { echo "modprobe -r rdma_rxe left rxe_rs loaded"; return 1; }
	make -s -C "$HOST/src" uninstall || return 1
	[ ! -e /etc/modprobe.d/rxe_rs.conf ] && [ ! -e "/lib/modules/$KVER/updates/rxe_rs.ko" ] ||
		{ echo "uninstall left files"; return 1; }
	modprobe rdma_rxe && lsmod | grep -q '^rdma_rxe ' || { echo "the stock rdma_rxe did not load after uninstall"; return 1; }
	if insmod "$KO" link_type_rxe=1 2>/dev/null; then echo "rxe_rs with link_type_rxe=1 loaded beside rdma_rxe"; return 1; fi
	modprobe -r rdma_rxe
}
# Installed and indexed by depmod, the module is loaded by `rdma link add ... type`.
t_link_add_autoloads() {
	unload || return 1
	cp -a "/lib/modules/$KVER" /tmp/modules || return 1
	mount --bind /tmp/modules "/lib/modules/$KVER" || return 1
	if [ "$DRIVER" = rxe_rs ]; then
		mkdir -p "/lib/modules/$KVER/extra" && cp "$KO" "/lib/modules/$KVER/extra/" && depmod || return 1
	fi
	add "$DEV" eth0 || { echo "link add did not load $MOD"; return 1; }
	lsmod | grep -q "^$MOD " && rdma link show "$DEV/1"
}
t_module_unload() {
	with_dev || return 1
	unload || { echo "unload failed"; return 1; }
	no_device || return 1
	load
}

# The sample driver on the generic layer alone (samples/rdma_minimal), loaded while
# neither driver is (they share the driver id), so the same on both runs: a device on
# eth0 that ibv_devinfo and librxe see, one per netdev, whose PDs and CQs work within its
# limits and whose other objects are refused; removed with its netdev, and with the
# module, which is unloaded whatever the checks found.
minimal_checks() {
	local DEV=tmin0
	rdma link add tmin0 type minimal netdev eth0 || return 1
	wait_for port_active || { echo "port not active"; return 1; }
	ibv_devinfo -v -d tmin0 > /tmp/devinfo || { cat /tmp/devinfo; return 1; }
	grep -q 'node_guid:' /tmp/devinfo && grep -q 'max_pd:[[:space:]]*1024' /tmp/devinfo &&
		grep -q 'link_layer:[[:space:]]*Ethernet' /tmp/devinfo &&
		! grep -q 'GID\[' /tmp/devinfo || { cat /tmp/devinfo; return 1; }
	grep -E 'hca_id|state:|link_layer|max_pd:|max_cq:|max_cqe:|max_qp:' /tmp/devinfo
	"$VB" tmin0 minimal || return 1
	rdma link add tmin2 type minimal netdev eth0 2>/dev/null && { echo "second device on eth0"; return 1; }
	ip link add tveth0 type veth peer name tveth1 && ip link set tveth0 up || return 1
	rdma link add tmin1 type minimal netdev tveth0 || return 1
	ip link del tveth0 || return 1
	deadline_in 10
	while rdma link show tmin1/1 >/dev/null 2>&1; do in_time || { echo "tmin1 stayed"; return 1; }; sleep 0.1; done
}
t_minimal_sample() {
	local rc
	[ -f "$HOST/rdma_minimal.ko" ] || { echo "no rdma_minimal.ko (built out of tree only)"; return 4; }
	insmod "$HOST/rdma_minimal.ko" || return 1
	minimal_checks; rc=$?
	rmmod rdma_minimal || { echo "rmmod rdma_minimal failed"; return 1; }
	no_device || { rdma link show; return 1; }
	return $rc
}

# The driver's KUnit suites, in a build of the module made with RXE_RS_KUNIT=1 (the
# in-tree CONFIG_RDMA_RXE_RS_KUNIT_TEST): they run as it loads and report in KTAP, which
# the kernel log keeps. Every suite must be there and pass. The guests boot with
# kunit.filter_glob=rxe_rs*, so no other suite runs.
KUNIT_SUITES="rxe_rs_ring rxe_rs_qp_attr rxe_rs_table rxe_rs_wqe_ring rxe_rs_qp_modify
	rxe_rs_read_resources"
t_kunit() {
	local n s log=/tmp/kunit.log rc=0
	[ "$DRIVER" = rxe_rs ] || { echo "rdma_rxe has no KUnit suite"; return 4; }
	n=$(dmesg | wc -l)
	insmod "$HOST/rxe_rs_kunit.ko" || { echo "cannot load the KUnit build"; return 1; }
	dmesg | tail -n +$((n + 1)) | sed 's/^\[[ 0-9.]*\] //' > $log
	grep -E '^ *# rxe_rs_[a-z_]*: pass:' $log
	if grep -qE '^ *not ok ' $log; then
		rc=1
	else
		for s in $KUNIT_SUITES; do
			grep -qE "^ *ok [0-9]+ $s\$" $log || { echo "suite $s did not pass"; rc=1; }
		done
	fi
	[ $rc = 0 ] || cat $log
	rmmod rxe_rs || return 1
	return $rc
}

echo "TAP version 13"
run insmod_without_ib_core_fails t_insmod_without_ib_core
modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel
run kunit_suites t_kunit
run minimal_sample_driver t_minimal_sample
load || { echo "Bail out! cannot load $DRIVER"; exit 1; }
run link_add t_link_add
run ibv_devices_lists_device t_ibv_devices
run devinfo_port_active_roce_v2_gid t_devinfo_port
run open_query_device_port t_open_query
run gid_ipv4_is_roce_v2 t_gid_roce_v2
run alloc_dealloc_pd t_alloc_pd
run alloc_dealloc_pd_many t_alloc_pd_many
run close_device_with_pds t_close_with_pd
run create_cq t_create_cq
run unsupported_verb_fails t_unsupported_fails
run cq_sizes t_cq_sizes
run cq_bad_size_or_vector t_cq_bad
run cq_resize t_cq_resize
run cq_notify_armed_destroy t_cq_notify
run cq_many t_cq_many
run cq_close_device_with_cqs t_cq_close
run cq_sigkill_with_cqs t_cq_killed
run cq_ring_mapped_after_destroy t_cq_ring_after_destroy
run qp_create_rc_uc_ud_caps t_qp_create
run qp_create_over_limits t_qp_create_bad
run qp_state_machine_paths t_qp_states
run qp_modify_refused_changes_nothing t_qp_bad_modify
run qp_query_reports_attributes t_qp_query
run qp_err_flushes_receives t_qp_err_flush
run qp_destroy_in_every_state t_qp_destroy_states
run qp_destroy_under_traffic t_destroy_traffic
run qp_retry_exceeded_completes_once t_qp_retry_once
run qp_fatal_cq_overrun t_qp_fatal
run core_ebusy_cq_and_pd_in_use t_busy
run cq_destroy_with_unpolled t_cq_destroy_unpolled
run qp_destroy_waits_event_ack t_qp_event_ack
run qp_many t_qp_many
run qp_sigkill_with_qps t_qp_killed
run srq_limit_resize_query t_srq_modify
run srq_bad_size_or_limit t_srq_bad
run core_ebusy_srq_in_use t_srq_busy
run srq_qp_err_last_wqe_reached t_srq_last_wqe
run srq_qp_destroy_under_traffic t_destroy_traffic_srq
run srq_limit_event_ud_data t_srq_limit_event
run ah_create_destroy_pd_busy t_ah
run mr_reg_dereg_keys_pd_busy t_mr
run destroy_loop_no_ipi_storm t_destroy_ipis
run mw_alloc_dealloc_pd_busy t_mw
run inline_read_atomic_refused t_inline_not_for_read
run rc_send_too_long_nak_invalid_request t_rc_send_too_long
run atomic_not_8_bytes_loc_len_err t_atomic_not_8_bytes
run acked_before_destroy t_acked_before_destroy
run create_qp_response_fault_leaves_no_qp t_create_qp_response_fault
run err_flush_up_to_recorded_producer t_err_flush_recorded_producer
run ud_longer_than_receive_dropped t_ud_too_long
run ud_longer_than_srq_receive_rem_inv_req t_ud_too_long_srq
run recv_posted_in_err_flushed t_recv_in_err
run mw_type2_zero_based t_mw_zero_based
run mw_type2_life t_mw_type2_life
run send_with_invalidate_empty_sgl t_send_inv_empty
run mr_rereg_pd_and_access t_mr_rereg
run mr_rereg_refused_with_window_bound t_mr_rereg_window
run limits_creatable_at_their_value t_limits_creatable
run send_before_rts_not_carried_out t_send_before_rts
run srq_receive_keys_of_the_srq_pd t_srq_keys_pd
run core_ebusy_qp_attached_to_mcast t_mcast_busy
run mcast_one_group_several_lids t_mcast_lids
run close_device_with_every_object t_close_with_all
run every_object_loop_sigkill_no_leak t_stress
run cq_overflow_cq_err_destroy_waits_ack t_cq_overflow
run hostile_ring_contents t_hostile_rings
run hostile_wqe_classes t_hostile_wqes
run iova_mr_range_ends_at_top t_iova_mr_reg
run iova_last_bytes_below_top t_iova_last
run iova_recv_scatter_past_top t_iova_recv
run iova_remote_range_past_top t_iova_remote
run iova_local_sge_past_top t_iova_local
run isolation_mw_bind_other_pd t_isol_mw_bind
run isolation_ud_other_process_ah t_isol_ud_ah
run isolation_ud_kernel_consumer_ah t_isol_ud_kernel_ah
run isolation_invalidate_other_qp t_isol_inv
run isolation_keys_not_a_counter t_isol_keys
run recv_wqe_malformed_rc_own_wr_id t_isol_recv_rc
run recv_wqe_malformed_ud_own_wr_id t_isol_recv_ud
run read_mr_deregistered_midstream t_isol_read_dereg
run isolation_raw_flush_uc_first_short_middle t_isol_live
run odp_stuck_fault_blocks_no_destroy t_odp_stuck_fault
run odp_stuck_faults_bounded_per_user t_odp_stuck_many
run odp_stale_fault_after_reset t_odp_reset_stale
run budget_feeder_ud_post_send t_budget_feed_ud
run budget_feeder_uc_post_send t_budget_feed_uc
run budget_feeder_rc_local_ops_post_send t_budget_feed_rc_local
run budget_local_ops_behind_unanswered_send t_budget_local_ops_behind_send
run budget_big_read_device_responsive t_budget_big_read
run verbs_fuzz t_verbs_fuzz
run fault_injection_create_verbs t_failslab
run gsi_qp1_ready_after_link_add t_gsi_qp1
run kernel_consumer_verbs t_kernel_verbs
run kernel_read_with_invalidate t_kernel_read_inv
run kernel_fastreg_remap_keeps_registered_pages t_kernel_remap
run modify_device_node_desc_sys_image_guid t_modify_device
run odp_mr_faults_pyverbs t_odp_pyverbs
run counters_match_traffic t_counters_traffic
run rc_pingpong_ipv4 t_rc_pingpong_v4
run rc_pingpong_ipv6 t_rc_pingpong_v6
run uc_pingpong_ipv4 t_uc_pingpong_v4
run uc_pingpong_ipv6 t_uc_pingpong_v6
run ud_pingpong_ipv4 t_ud_pingpong_v4
run ud_pingpong_ipv6 t_ud_pingpong_v6
run srq_pingpong_ipv4 t_srq_pingpong_v4
run srq_pingpong_ipv6 t_srq_pingpong_v6
run rping_validate t_rping
run ucmatose_rc t_ucmatose
run udaddy_ud t_udaddy
run kernel_nvme_over_rdma t_nvme_rdma
run kernel_nfs_over_rdma t_nfs_rdma
run kernel_iser t_iser
run kernel_srp t_srp
run perftest_ib_send_bw t_ib_send_bw
run perftest_ib_write_bw t_ib_write_bw
run perftest_ib_read_bw t_ib_read_bw
run perftest_ib_atomic_bw t_ib_atomic_bw
run perftest_ib_send_lat t_ib_send_lat
run perftest_ib_write_lat t_ib_write_lat
run port_follows_carrier t_port_follows_carrier
run bad_missing_netdev t_missing_netdev
run bad_name_taken t_name_taken
run bad_same_netdev_twice t_same_netdev_twice
run netdev_unregister_removes_device t_netdev_removed
run hostile_packets_dropped_and_counted t_hostile_packets
run hostile_packets_to_live_qps t_hostile_live
run forged_responses_unsent_psns t_forged_responses
run reth_length_above_2g t_reth_long
run duplicate_read_storm t_dup_read_storm
run pkey_mismatch_dropped t_pkey_mismatch
run pma_mads_from_the_network t_pma_mads
run packet_mutation_fuzz t_pktfuzz
run rc_over_netem_loss_reorder_duplicate t_netem_rc
run rc_address_readded_routes_renewed t_rc_addr_readded
run device_in_other_netns t_netns_device
run vlan_gids_carry_tagged_traffic t_vlan_gids
run vlan_ipv6_gids_carry_tagged_traffic t_vlan_gids_v6
run netns_exclusive_device_belongs_to_its_namespace t_netns_exclusive
run bond_active_backup_failover t_bond_failover
run bond_hash_failover t_bond_hash_failover
run device_on_vlan_netdev_refused t_vlan_device
run two_gids_of_one_netdev_loop_back t_two_gids_one_netdev
run udp_port_follows_devices t_udp_port_follows_devices
run link_delete t_link_delete
run link_delete_with_user t_link_delete_with_user
run link_delete_with_mapped_ring t_link_delete_with_mapped_ring
run module_unload t_module_unload
run make_install_takes_rdma_rxe_place t_make_install
run link_add_autoloads_module t_link_add_autoloads
echo "1..$tap_n"
unload
exit ${tap_failed:-0}
