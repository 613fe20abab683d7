#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make run: bootstrap what is missing, build the module, boot a guest that loads rxe_rs,
# creates a device on the guest's NIC, shows it and moves data over it: an RC
# ping-pong with its data checked and one perftest bandwidth figure, each between two
# processes on the device (its loopback), with their result lines.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

prepare_base
stage_start "module"
"$TOOLS_DIR/build-module.sh" test >/dev/null
stage_end

share=$TOP_DIR/build/share-run
mkdir -p "$share"
cp "$TOP_DIR/build/test/rxe_rs.ko" "$share/"
cat > "$share/run.sh" <<'GUEST'
set -e
modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel
insmod /mnt/host/rxe_rs.ko
rdma link add rxe_rs0 type rxe_rs netdev eth0
echo "--- rdma link"; rdma link
echo "--- ibv_devices"; ibv_devices
echo "--- ibv_devinfo -v"; ibv_devinfo -v -d rxe_rs0
# The RoCE v2 GID of eth0's address, once ib_core has added it.
gid() {
	ibv_devinfo -v -d rxe_rs0 |
		sed -n 's/.*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:10\.0\.2\.15, RoCE v2$/\1/p' | head -n 1
}
i=0; while [ -z "$(gid)" ] && [ $i -lt 50 ]; do i=$((i + 1)); sleep 0.1; done
g=$(gid)
# server CMD, then client CMD 127.0.0.1 once the server listens on TCP port 18515.
pair() {
	$1 > /tmp/server.out 2>&1 &
	i=0; while [ -z "$(ss -Htln 'sport = :18515')" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
	$1 127.0.0.1
	wait $! || { echo "server failed:"; cat /tmp/server.out; return 1; }
}
echo "--- ibv_rc_pingpong: RC SEND/RECV, 4 KiB, 200 round trips, data checked (client side)"
pair "ibv_rc_pingpong -d rxe_rs0 -g $g -n 200 -s 4096 -c"
echo "--- ib_write_bw: RDMA WRITE bandwidth, 64 KiB messages (client side)"
pair "ib_write_bw -d rxe_rs0 -x $g -F -s 65536 -n 1000"
rdma link delete rxe_rs0
rmmod rxe_rs
GUEST
stage_start "guest: rxe_rs on eth0"
"$TOOLS_DIR/vm-run.sh" --kernel test --share "$share" --timeout 300 "$share/run.sh"
stage_end
