#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make profile: where the kernel spends a perftest run's time, on rdma_rxe and on
# rxe_rs. A guest of the test kernel runs server and client of one perftest tool on one
# device (its loopback, as bench.sh's "one" placement) and samples every CPU with
# tools/kprof.c meanwhile; the functions with their share of the samples are printed and
# kept in build/profile/DRIVER.txt.
#
#   tools/profile.sh [--drivers "rxe rxe_rs"] [--seconds S] [--callers "NAME..."] TOOL [ARGS...]
#   e.g. tools/profile.sh ib_atomic_bw -D 8
#        tools/profile.sh ib_read_lat -s 64 -n 300000
#        tools/profile.sh --callers "memcpy_orig xa_load" ib_read_lat -n 300000
#
# ARGS go to both sides (add -D or -n so that the run lasts longer than the sampling,
# which starts a second after the client and lasts S seconds, default 5). The shares
# compare code paths; the guest runs under TCG, so absolute times say little. --callers
# also tables the samples in the functions whose names contain those words by caller
# (kprof -c), as those where interrupts came back on are.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

drivers="rxe rxe_rs" seconds=5 callers=
while [ $# -gt 0 ]; do
	case $1 in
	--drivers) drivers=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--callers) callers=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || die "usage: profile.sh [--drivers D] [--seconds S] [--callers \"NAME...\"] TOOL [ARGS...]"
[[ $seconds =~ ^[1-9][0-9]*$ ]] || die "--seconds takes a whole number of seconds"
[[ $1 =~ ^ib_[a-z_]+$ ]] || die "TOOL is a perftest tool (ib_send_bw, ib_read_lat, ...), not '$1'"
cmd=$(printf '%q ' "$@")
kprof_c=
for name in $callers; do
	[[ $name =~ ^[A-Za-z0-9_:]+$ ]] || die "--callers takes symbol names (letters, digits, _ and :), not '$name'"
	kprof_c+=" -c $name"
done

out=$TOP_DIR/build/profile
share=$TOP_DIR/build/share-profile
rm -rf "$out"
mkdir -p "$out" "$share"
prepare_base
"$TOOLS_DIR/build-module.sh" test >/dev/null
cp "$TOP_DIR/build/test/rxe_rs.ko" "$share/"
in_rootfs gcc -O2 -Wall -Werror -o /src/build/share-profile/kprof /src/tools/kprof.c

for drv in $drivers; do
	[[ $drv = rxe || $drv = rxe_rs ]] || die "--drivers takes rxe and rxe_rs, not '$drv'"
	if [ "$drv" = rxe ]; then load="modprobe rdma_rxe"; else load="insmod /mnt/host/rxe_rs.ko"; fi
	cat > "$out/cmd-$drv.sh" <<GUEST
modprobe -a ib_uverbs udp_tunnel ip6_udp_tunnel
$load || exit 1
rdma link add prof0 type $drv netdev eth0 || exit 1
i=0
while ! timeout 10 ibv_devinfo -d prof0 | grep -q PORT_ACTIVE && [ \$i -lt 100 ]; do i=\$((i + 1)); sleep 0.2; done
idx=\$(timeout 10 ibv_devinfo -v -d prof0 | sed -n 's/.*GID\[ *\([0-9]*\)\]:.*::ffff:10.0.2.15, RoCE v2\$/\1/p' | head -n 1)
[ -n "\$idx" ] || { echo "profile: no RoCE v2 GID"; exit 1; }
timeout 120 $cmd -d prof0 -x "\$idx" -F -p 18515 > /tmp/server.out 2>&1 &
i=0
while [ -z "\$(ss -Htln 'sport = :18515')" ] && [ \$i -lt 100 ]; do i=\$((i + 1)); sleep 0.2; done
timeout 120 $cmd -d prof0 -x "\$idx" -F -p 18515 127.0.0.1 > /tmp/client.out 2>&1 &
sleep 1
/mnt/host/kprof$kprof_c $seconds > /mnt/host/prof-$drv.txt
wait
tail -n 4 /tmp/client.out
GUEST
	stage_start "profile on $drv: $cmd"
	rm -f "$share/prof-$drv.txt"
	"$TOOLS_DIR/vm-run.sh" --kernel test --share "$share" --timeout 600 "$out/cmd-$drv.sh" \
		> "$out/$drv.console" 2>&1 || echo "the guest run on $drv failed (see $out/$drv.console)"
	if [ -s "$share/prof-$drv.txt" ]; then
		cp "$share/prof-$drv.txt" "$out/$drv.txt"
		tr -d '\r' < "$out/$drv.console" | grep -A3 -E '^ *#bytes' | head -n 4 || true
		head -n 40 "$out/$drv.txt"
		grep -A 15 "by caller" "$out/$drv.txt"
	fi
	stage_end
done
