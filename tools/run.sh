#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make run: bootstrap what is missing, build the module, boot a guest that loads rxe_rs,
# creates a device on the guest's NIC and shows it.
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
rdma link delete rxe_rs0
rmmod rxe_rs
GUEST
stage_start "guest: rxe_rs on eth0"
"$TOOLS_DIR/vm-run.sh" --kernel test --share "$share" --timeout 300 "$share/run.sh"
stage_end
