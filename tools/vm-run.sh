#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Boot a test kernel under QEMU TCG with the toolchain tree as root (virtio-9p) and run a
# script in it as the guest's payload.
#
#   tools/vm-run.sh --kernel test|debug --share DIR [--timeout SECONDS]
#                   [--idle SECONDS] [--link LPORT:RPORT:MAC] [--plugin SPEC] SCRIPT
#   tools/vm-run.sh --kernel test|debug --describe
#
# --describe prints the guest's machine (QEMU's arguments, the kernel's command line
# among them, with DIR as SHARE) and boots nothing: rxe's recorded outcomes are keyed by
# it.
#
# The test kernel's guests have the toolchain tree as their root over virtio-9p; the
# debug kernel's boot from an ext4 image of it on virtio-blk (tools/lib.sh,
# rootfs_image), each with its writes in a snapshot of its own. Measured in one guest
# of each kernel: the image starts a process a third sooner on the debug kernel
# (/bin/true 164 ms against 242, python3 1.06 s against 1.52) and boots 12 s sooner,
# and makes no difference on the test kernel (/bin/true 96 ms either way).
#
# DIR is shared with the guest at /mnt/host; SCRIPT is copied there as cmd.sh, together
# with the kernel's modules. The console goes to stdout and DIR/console.log. The exit
# status is the script's; a guest that crashes, hangs or never reports fails.
# --idle stops a guest whose tests made no progress (no `# start` or TAP result line on
# the console) for that long: a test that hung the guest costs that, not the whole
# --timeout.
# --link gives the guest a second NIC (eth1, MAC as given) whose frames travel as UDP
# datagrams between 127.0.0.1:LPORT and 127.0.0.1:RPORT: two guests with mirrored ports
# share an Ethernet link, and nothing leaves the host's loopback.
# --plugin loads a TCG plugin into QEMU (-plugin SPEC: the library, then its arguments).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

flavor=test share= timeout=600 idle= link= plugin= describe=
while [ $# -gt 1 ] || [ "${1:-}" = --describe ]; do
	case $1 in
	--describe) describe=1; shift ;;
	--kernel) flavor=$2; shift 2 ;;
	--share) share=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--idle) idle=$2; shift 2 ;;
	--link) link=$2; shift 2 ;;
	--plugin) plugin=$2; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
[ -n "$describe" ] || script=${1:?usage: vm-run.sh --kernel test|debug --share DIR [--timeout S] SCRIPT}
[ -n "$share$describe" ] || die "--share DIR is required"

kdir=$("$TOOLS_DIR/build-kernel.sh" "$flavor")
root=$(rootfs_dir)
if [ -n "$describe" ]; then
	share=SHARE
else
	mkdir -p "$share"
	share=$(cd "$share" && pwd)
	cp "$script" "$share/cmd.sh"
	rm -f "$share/exit-status" "$share/.qemu.pid"
	# The modules as installed by the kernel build, refreshed when the kernel changed.
	if [ "$(cat "$share/modules/.kernel" 2>/dev/null)" != "$kdir" ]; then
		rm -rf "$share/modules"
		cp -a "$kdir/mod/lib/modules" "$share/modules"
		echo "$kdir" > "$share/modules/.kernel"
	fi
fi
# Guests may boot concurrently from the same tree: replace the init only when it
# changed, and by an atomic rename, so that no boot sees a missing or partial file.
# The init mounts the modules on /lib/modules, which a fresh tree does not have: made
# here, before any guest boots (a guest that made it would race another through 9p).
mkdir -p "$root/lib/modules"
if [ -z "$describe" ] && ! cmp -s "$TOOLS_DIR/guest-init.sh" "$root/sbin/rxe-rs-guest-init"; then
	install -m 0755 "$TOOLS_DIR/guest-init.sh" "$root/sbin/.rxe-rs-guest-init.$$"
	mv -f "$root/sbin/.rxe-rs-guest-init.$$" "$root/sbin/rxe-rs-guest-init"
fi

qemu_args=()
[ -z "$plugin" ] || qemu_args+=(-plugin "$plugin")
if [ -n "$link" ]; then
	IFS=: read -r lport rport mac <<< "$link"
	qemu_args+=(-netdev "socket,id=n1,udp=127.0.0.1:$rport,localaddr=127.0.0.1:$lport"
		-device "virtio-net-pci,netdev=n1,mac=$mac")
fi

if [ "$flavor" = debug ]; then
	append="console=ttyS0 panic=-1 root=/dev/vda rootfstype=ext4 rw"
	rootdev=(-drive "file=$(rootfs_image),if=virtio,format=raw,snapshot=on,cache=unsafe")
else
	append="console=ttyS0 panic=-1 root=rootfs rootfstype=9p"
	append+=" rootflags=trans=virtio,version=9p2000.L,msize=262144,cache=loose rw"
	rootdev=(-virtfs "local,path=$root,mount_tag=rootfs,security_model=passthrough,multidevs=remap")
fi
append+=" init=/sbin/rxe-rs-guest-init loglevel=4"
# Of the KUnit suites, only rxe_rs's run (as its KUnit build loads): not the kernel's own.
append+=" kunit.filter_glob=rxe_rs*"
# pci=noacpi: the interrupt routing from the BIOS's table; ACPI's _PRT ran into ACPICA's
# 30 s loop timeout once per PCI device on the debug kernel (the devices use MSI-X).
[ "$flavor" = debug ] && append+=" no5lvl kasan_multi_shot pci=noacpi"
# The vCPUs take turns on one host thread under the host's QEMU, unless
# RXE_RS_TCG_THREAD=multi gives each a thread of its own under QEMU 10 (tools/lib.sh,
# qemu_tree), so that the host's cores run them at once (make bench). The tests'
# outcomes, rxe's recorded ones among them, are of guests with one thread.
qemu_bin=qemu-system-x86_64 accel=(-accel tcg,thread=single)
case ${RXE_RS_TCG_THREAD:-single} in
single) ;;
multi)
	qemu_dir=$(qemu_tree)
	qemu_bin=$qemu_dir/usr/bin/qemu-system-x86_64
	accel=(-L "$qemu_dir/usr/share/qemu" -L "$qemu_dir/usr/share/seabios" -accel tcg,thread=multi)
	;;
*) die "RXE_RS_TCG_THREAD is single or multi, not $RXE_RS_TCG_THREAD" ;;
esac
machine=("${accel[@]}" -cpu max -smp 2 -m 2G
	-nographic -no-reboot -nodefaults -serial stdio
	-kernel "$kdir/arch/x86/boot/bzImage" -append "$append"
	"${rootdev[@]}"
	-virtfs "local,path=$share,mount_tag=host,security_model=passthrough,multidevs=remap"
	-netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0
	"${qemu_args[@]}")
if [ -n "$describe" ]; then
	printf '%s\n' "${machine[@]}" | sed "s|$RXE_RS_CACHE/||g"
	exit 0
fi

# Stops the guest once no test started or ended for $idle seconds.
watch_progress() {
	local seen=-1 n since=$SECONDS
	while sleep 10; do
		n=$(tr -d '\r' < "$share/console.log" 2>/dev/null | grep -cE '^(not )?ok [0-9]+ |^# start ' || true)
		if [ "$n" != "$seen" ]; then
			seen=$n since=$SECONDS
		elif [ $((SECONDS - since)) -ge "$idle" ]; then
			echo "vm-run: no test started or ended for ${idle}s: stopping the guest" >&2
			kill "$(cat "$share/.qemu.pid")" 2>/dev/null
			return
		fi
	done
}

boot() {
	local watcher=
	[ -z "$idle" ] || { watch_progress & watcher=$!; }
	set +e
	timeout --foreground -k 5 "$timeout" "$qemu_bin" -pidfile "$share/.qemu.pid" \
		"${machine[@]}" </dev/null 2>&1 | tee "$share/console.log"
	qemu=${PIPESTATUS[0]}
	set -e
	[ -z "$watcher" ] || kill "$watcher" 2>/dev/null || true
}
boot
# Under QEMU 7.2 with a thread per vCPU, code the kernel patched while another vCPU ran
# it (static keys, at boot) was seen to hit a stale int3 and oops (fixed in QEMU 8.1),
# and under QEMU 10 with one thread once too, on the debug kernel. Should a guest die
# before its init ran, that boot says nothing about the code under test: boot once
# more. A guest that got as far as running its payload is never retried.
if [ ! -s "$share/exit-status" ] && ! grep -q 'guest: up' "$share/console.log"; then
	echo "vm-run: the guest died before its init ran; booting once more" >&2
	mv "$share/console.log" "$share/console-first-boot.log"
	boot
fi
[ "$qemu" = 124 ] && echo "vm-run: guest timed out after ${timeout}s" >&2
if [ ! -s "$share/exit-status" ]; then
	echo "vm-run: the guest did not report an exit status (crash or timeout)" >&2
	exit 125
fi
exit "$(cat "$share/exit-status")"
