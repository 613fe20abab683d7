#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Wire interop, run in each of two guests joined by eth1 (tools/interop.sh): one guest
# with C rxe, the other with rxe_rs. Both run the same list of tests in the same order;
# in each, one side serves and the other is the client, which retries until the server
# listens. TAP on stdout.
#
#   ROLE=a|b DRIVER=rxe|rxe_rs ME=ADDR PEER=ADDR [ONLY=REGEX] [EXCEPT=REGEX] sh interop.sh
#
# ONLY (an extended regular expression) runs only the tests whose names match it, and
# kernel_log_clean (tools/interop.sh reruns failed tests so); EXCEPT leaves out those
# whose names match it (tools/interop.sh reruns a run cut short so). A failed test prints what
# it printed, the device's counters that moved during it, and, if a side was still
# running at its bound, where its tasks waited and the device's QPs; the frames of its
# time go to /mnt/host/NAME.pcap.
ROLE=${ROLE:?} DRIVER=${DRIVER:?} ME=${ME:?} PEER=${PEER:?} ONLY=${ONLY:-.}
DEV=idev
n=0
: > /tmp/failed

modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel rdma_cm rdma_ucm
case $DRIVER in
rxe) modprobe rdma_rxe ;;
rxe_rs) insmod /mnt/host/rxe_rs.ko ;;
esac
ip link set eth1 up
ip addr add "$ME/24" dev eth1
rdma link add $DEV type "$DRIVER" netdev eth1 || { echo "Bail out! no device"; exit 1; }
# The RoCE v2 GID of our address on eth1.
gid=
for i in $(seq 1 50); do
	gid=$(ibv_devinfo -v -d $DEV | sed -n "s/.*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:$ME, RoCE v2\$/\1/p" | head -n 1)
	[ -n "$gid" ] && break
	sleep 0.2
done
[ -n "$gid" ] || { echo "Bail out! no RoCE v2 GID for $ME"; exit 1; }
# The peer must answer on the link before anything starts: it may boot minutes after
# this guest on a loaded host, and the tests pair up only if both sides start together.
# A link that stays dead ends the run here, with what it saw, rather than in every
# test's retries.
if ! python3 /mnt/host/peer_up.py "$PEER" 600; then
	echo "Bail out! $PEER does not answer ICMP echo on eth1 (10 minutes)"
	{ ip -s link show eth1; ip neigh show dev eth1; } 2>&1 | sed 's/^/# /'
	exit 1
fi

# took NAME: how long the test NAME took since $t0 (uptime in centiseconds, from now()),
# as guest-tests.sh prints it, for the host's list of the slowest.
now() { read -r up _ < /proc/uptime; echo "${up%.*}${up#*.}"; }
took() { up=$(($(now) - t0)); echo "# time $n $1 $((up / 100)).$((up / 10 % 10)) s"; }
# wanted NAME: whether the test NAME runs in this run.
wanted() { echo "$1" | grep -Eq "$ONLY" && ! echo "$1" | grep -Eq "${EXCEPT:-^\$}"; }
counters() {
	for f in /sys/class/infiniband/$DEV/ports/1/hw_counters/*; do
		echo "${f##*/} $(cat "$f")"
	done
}
# bounded SECS CMD...: CMD with line-buffered output, stopped after SECS seconds. One
# still running then is hung: where its tasks wait in the kernel and the device's QPs
# are printed before it is killed (status 124, as timeout(1)).
bounded() {
	secs=$1
	shift
	stdbuf -oL -eL "$@" &
	pid=$!
	ticks=$((secs * 5))
	while [ $ticks -gt 0 ] && kill -0 $pid 2>/dev/null; do
		sleep 0.2
		ticks=$((ticks - 1))
	done
	kill -0 $pid 2>/dev/null || { wait $pid; return; }
	echo "still running after $secs s:"
	for p in $pid $(pgrep -P $pid); do
		for task in /proc/$p/task/*; do
			echo "task ${task##*/} ($(cat "$task/comm")): $(grep '^State' "$task/status"), waits in $(cat "$task/wchan")"
			sed 's/^/  /' "$task/stack" 2>/dev/null
		done
	done
	rdma resource show qp
	pkill -KILL -P $pid
	kill -KILL $pid
	wait $pid
	return 124
}
# client CMD: retries while the server is not up yet (bounded: about 60 s).
client() {
	i=0
	while [ $i -lt 30 ]; do
		bounded 60 "$@" && return 0
		i=$((i + 1))
		sleep 2
	done
	return 1
}
# t NAME SERVER_ROLE SERVER_CMD CLIENT_CMD: the test NAME, served by SERVER_ROLE.
t() {
	wanted "$1" || return 0
	n=$((n + 1))
	counters > /tmp/counters.before
	start=$(date +%s.%N)
	t0=$(now)
	if [ "$ROLE" = "$2" ]; then
		bounded 60 sh -c "$3" > /tmp/out 2>&1
	else
		sleep 1
		client sh -c "$4" > /tmp/out 2>&1
	fi
	rc=$?
	took "$1"
	if [ $rc = 0 ]; then echo "ok $n $1"; return; fi
	echo "not ok $n $1"
	sed 's/^/#   /' /tmp/out | tail -n 40
	echo "#   counters that moved:"
	counters | awk 'NR == FNR { was[$1] = $2; next }
		$2 != was[$1] { printf "#     %s %d\n", $1, $2 - was[$1] }' /tmp/counters.before -
	echo "$1 $start $(date +%s.%N)" >> /tmp/failed
}
# The commands of the next test; each test has its own TCP port, so that a client still
# retrying after its server gave up cannot meet the next test's server.
port() { echo $((18700 + n)); }
pp() { echo "$1 -d $DEV -g $gid -n 20 -c -p $(port) $2"; }
pf() { echo "$1 -d $DEV -x $gid -F -n 200 -p $(port) $2"; }
rp() { echo "rping $1 -a $2 -v -V -C 5 -p $(port)"; }

tcpdump -i eth1 -U -w /tmp/roce.pcap udp port 4791 > /dev/null 2>&1 &
dump=$!
for s in a b; do
	t "rc_pingpong_served_by_$s" $s "$(pp ibv_rc_pingpong "-s 4096")" "$(pp ibv_rc_pingpong "-s 4096 $PEER")"
	t "rc_pingpong_64k_served_by_$s" $s "$(pp ibv_rc_pingpong "-s 65536")" "$(pp ibv_rc_pingpong "-s 65536 $PEER")"
	t "ud_pingpong_served_by_$s" $s "$(pp ibv_ud_pingpong "-s 512")" "$(pp ibv_ud_pingpong "-s 512 $PEER")"
	t "ib_write_bw_served_by_$s" $s "$(pf ib_write_bw)" "$(pf ib_write_bw "$PEER")"
	t "ib_read_bw_served_by_$s" $s "$(pf ib_read_bw)" "$(pf ib_read_bw "$PEER")"
	t "rping_served_by_$s" $s "$(rp -s "$ME")" "$(rp -c "$PEER")"
done
kill $dump; wait $dump 2>/dev/null
# The frames of each failed test's time, for the host to keep.
while read -r name from to; do
	editcap -A "$from" -B "$to" /tmp/roce.pcap "/mnt/host/$name.pcap" 2>/dev/null
done < /tmp/failed
# One RDMA READ of READ_BIG bytes (256 MiB), served by rxe_rs (b) to C rxe (after the
# capture: it is 262,144 responses): the responder sends it within its budget per run,
# the data arrives intact and the reader's doorbell returns at once (selftests/read_big.c).
# READ_BIG_SERVERS="a b" also has C rxe serve it: rxe_rs's requester then fails it with
# "transport retry counter exceeded" over this lossy link (Documentation: open findings).
big=${READ_BIG:-268435456}
for s in ${READ_BIG_SERVERS:-b}; do
	wanted "read_${big}_bytes_served_by_$s" || continue
	n=$((n + 1))
	t0=$(now)
	if [ "$ROLE" = "$s" ]; then
		timeout -k 10 1320 /mnt/host/bin/read_big serve $DEV "$gid" 18600 "$big" > /tmp/out 2>&1
	else
		timeout -k 10 1320 /mnt/host/bin/read_big get $DEV "$gid" "$PEER" 18600 "$big" > /tmp/out 2>&1
	fi
	rc=$?
	took "read_${big}_bytes_served_by_$s"
	sed 's/^/# /' /tmp/out
	# Whether the link's NIC stopped sending (its transmit watchdog fired).
	[ $rc = 0 ] || dmesg | grep -m 1 'NETDEV WATCHDOG' | sed 's/^/# the link stopped sending: /'
	if [ $rc = 0 ]; then echo "ok $n read_${big}_bytes_served_by_$s"; else echo "not ok $n read_${big}_bytes_served_by_$s"; fi
done
# Every captured frame decodes as RoCE v2 (tshark's InfiniBand dissector on port 4791),
# and every ICRC, both sides' frames, checks out (selftests/pcap_icrc.py).
if wanted capture_decodes_as_roce_v2 || wanted capture_icrc_good_both_directions; then
	n=$((n + 1))
	t0=$(now)
	tshark -r /tmp/roce.pcap -d udp.port==4791,infiniband -T fields -e infiniband.bth.opcode \
		-e _ws.malformed > /tmp/frames 2>/tmp/tshark.err
	total=$(wc -l < /tmp/frames)
	decoded=$(awk -F '\t' '$1 != "" && $2 == ""' /tmp/frames | wc -l)
	took capture_decodes_as_roce_v2
	echo "# tshark: $total frames captured on $DRIVER's side, $decoded decoded as InfiniBand BTH"
	if [ "$total" -gt 0 ] && [ "$decoded" = "$total" ]; then echo "ok $n capture_decodes_as_roce_v2"; else
		echo "not ok $n capture_decodes_as_roce_v2"; head -n 5 /tmp/frames /tmp/tshark.err | sed 's/^/#   /'; fi
	n=$((n + 1))
	t0=$(now)
	if python3 /mnt/host/pcap_icrc.py /tmp/roce.pcap > /tmp/icrc 2>&1; then r=ok; else r="not ok"; fi
	took capture_icrc_good_both_directions
	sed 's/^/# /' /tmp/icrc
	echo "$r $n capture_icrc_good_both_directions"
fi
# Nothing of the above made the kernel complain: no BUG, WARNING, soft lockup, RCU stall
# or hung task.
n=$((n + 1))
if dmesg | grep -E 'BUG|WARNING|soft lockup|rcu_.*(stall|self-detected)|blocked for more than' > /tmp/klog; then
	echo "not ok $n kernel_log_clean"; head -n 20 /tmp/klog | sed 's/^/#   /'
else
	echo "ok $n kernel_log_clean"
fi
echo "1..$n"
rdma link delete $DEV
exit 0
