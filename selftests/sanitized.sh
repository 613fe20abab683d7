#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs guest-tests.sh for rxe_rs on the debug kernel with its sanitizers watching:
# kmemleak cleared before, the RDMA modules unloaded after, then a kmemleak scan into
# /mnt/host/kmemleak.txt and lockdep's verdict into /mnt/host/lockdep.txt. The
# environment (ONLY, EXCEPT, WAIT_S, TOOL_S, STRESS_ROUNDS, PP_ITERS, PF_ITERS,
# NETEM_ITERS, DESTROY_TRAFFIC_*, STORM_*, STALL_S, BUDGET_*, PKTFUZZ_*) passes
# through to the tests; traffic runs fewer iterations here than on the test kernel (KASAN
# under TCG is slow).
# The IPv6 ping-pongs and the latency tests repeat what their neighbours exercise.
export PP_ITERS=${PP_ITERS:-10} PF_ITERS=${PF_ITERS:-20} PP_SIZES=${PP_SIZES:-1024} NETEM_ITERS=${NETEM_ITERS:-5}
# Four rounds: each destroy variant once (RTS, ERR, SQD, RTR; on an SRQ RTS and ERR twice).
export DESTROY_TRAFFIC_ROUNDS=${DESTROY_TRAFFIC_ROUNDS:-4}
# Three seconds (not one) for the peer to see the destroy, break its connection, connect
# again and send at the dead QP: on a host whose cores the other guest and builds share,
# the peer's restart took longer than one second here once.
export DESTROY_TRAFFIC_WINDOW_MS=${DESTROY_TRAFFIC_WINDOW_MS:-3000}
# Five of pyverbs' ODP tests, one per path that meets page faults: the responder
# (SEND, READ, atomic), the requester (UD send) and prefetching.
o=test_odp.OdpTestCase
export ODP_TESTS=${ODP_TESTS:-"$o.test_odp_rc_traffic $o.test_odp_rc_rdma_read $o.test_odp_rc_atomic_fetch_and_add $o.test_odp_ud_traffic $o.test_odp_async_prefetch_rc_traffic"}
export ODP_MIN=${ODP_MIN:-5}
# The duplicate-READ storm: a 1 MiB READ, 200 duplicates, and time for the sending (a
# 16 MiB READ alone takes over a minute here, and the storm's sender slows with it).
export STORM_MB=${STORM_MB:-1} STORM_N=${STORM_N:-200} STORM_MAX=${STORM_MAX:-120}
# The stall detectors keep the kernel's timeouts here (RCU: 21 s): kmemleak's scanner
# holds an RCU read-side section for seconds under KASAN, which a 3 s timeout reports
# as a stall of its own. The budget tests still time every system call and tick.
export STALL_S=${STALL_S:-0}
# The budget tests with room for KASAN, which makes everything tens of times slower
# here (a 256 MiB READ took 280 s, 16 KiB UC WRITEs went at 24 a second): a 16 MiB
# READ, feeders posting for 2 s, five minutes for what they left in the ring, looser
# bounds.
export BUDGET_READ_MB=${BUDGET_READ_MB:-16} BUDGET_DRAIN_S=${BUDGET_DRAIN_S:-300} BUDGET_FEED_S=${BUDGET_FEED_S:-2}
export BUDGET_CALL_MS=${BUDGET_CALL_MS:-5000} BUDGET_GAP_MS=${BUDGET_GAP_MS:-3000}
export BUDGET_RTT_MS=${BUDGET_RTT_MS:-10000}
# The IPIs a loop of destroys sends: only counted here, since this kernel sends many of
# its own (about 0.4 per MR and 2.8 per QP created and destroyed), and for 200 objects of
# each kind (2000 QPs took 257 s).
export IPI_FIGURES_ONLY=${IPI_FIGURES_ONLY:-1} LOOP_OBJECTS=${LOOP_OBJECTS:-200}
# The packet mutation fuzzer for 30 s here (its sender is slower under KASAN, and so
# sends fewer packets in that time).
export PKTFUZZ_SECONDS=${PKTFUZZ_SECONDS:-30}
# The NFS, iSER and SRP tests with an eighth of their data (ULP_KB): 3.25 MiB through
# fio with verification, and 1 MiB read back after the page cache was dropped.
export ULP_KB=${ULP_KB:-1024}
# Left out here, as the test kernel runs them all, so that the guests of make check
# end within its time on a slow host (measured on one: a process takes seconds to
# start, a test 10 to 500 s): the address test (deleting and adding an address takes
# seconds on this kernel, longer than the RC retries of the stream under it last); the
# stock tools whose traffic takes paths other tests take with the same sanitizers
# watching (ping-pongs: RC, UC, UD and SRQ SENDs; perftest; ucmatose, udaddy and rping:
# rdma_cm over the verbs the other tests use); and the tests that count or time rather
# than exercise code that other tests here do not (the IPI counts of loops that cq_many,
# qp_many and every_object_loop_sigkill_no_leak run, the carrier's port events, the
# lossy link). The VLAN and bonding tests too: ping-pongs and rping over veth links,
# which the hostile-packet tests already drive through the same transmit and receive
# code (the debug guests' time is short: the delete and unload tests after them were
# left unstarted in one run). EXCEPT= runs all.
export EXCEPT=${EXCEPT-'_ipv6$|_lat$|^rc_address_readded|_pingpong_ipv4$|^perftest_|^ucmatose_rc$|^udaddy_ud$|^rping_validate$|^destroy_loop_no_ipi_storm$|^port_follows_carrier$|^rc_over_netem|^vlan_|_on_vlan_|^bond_|^two_gids_'}
# Waits and stock tools get more time here, where starting a process takes seconds
# (python3 took over 40 s to start stall9p.py with the host's cores shared by three
# guests and a build). A wait ends as soon as what it waits for holds.
export WAIT_S=${WAIT_S:-180} TOOL_S=${TOOL_S:-90}
# The delete and rmmod beside a fault that sleeps must end before it does: within two
# minutes here.
export ODP_STUCK_S=${ODP_STUCK_S:-120}
# Fewer objects in the loops of objects (1000 CQs, 300 QPs, 60 rounds of every object
# on the test kernel).
export CQ_MANY=${CQ_MANY:-200} QP_MANY=${QP_MANY:-60} STRESS_ROUNDS=${STRESS_ROUNDS:-15}
# Fewer destroys right after a receive (200 of each kind on the test kernel); this
# kernel is where the acknowledgement was seen lost.
export ACK_ROUNDS=${ACK_ROUNDS:-40}
# at WHAT: the uptime at WHAT, on the console: where the guest's time went besides the
# tests (guest-tests.sh prints theirs).
at() { read -r up _ < /proc/uptime; echo "# uptime ${up%.*} s: $1"; }
kml=/sys/kernel/debug/kmemleak
[ -w $kml ] && echo "sanitizer: kmemleak on" || echo "sanitizer: kmemleak missing"
dmesg | grep -q 'KernelAddressSanitizer initialized' && echo "sanitizer: KASAN on"
echo clear > $kml
# No scan every ten minutes during the tests (minutes of CPU under KASAN): the scans at the
# end find what leaked.
echo scan=off > $kml
at "the tests start"
cd /mnt/host && DRIVER=rxe_rs sh guest-tests.sh
at "the tests ended"
# Every RDMA module out, whichever test ran last.
rmmod rxe_rs 2>/dev/null
modprobe -r ib_uverbs
# Objects freed by RCU need a grace period before they count as freed.
sleep 5; echo scan > $kml; sleep 5
# A kmemleak that disabled itself refuses the scan: then its silence means nothing.
echo scan > $kml && echo "sanitizer: kmemleak scanned"
at "kmemleak scanned"
cat $kml > /mnt/host/kmemleak.txt
grep debug_locks: /proc/lockdep_stats > /mnt/host/lockdep.txt
exit 0
