#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Init (PID 1) of an rxe_rs test guest. tools/vm-run.sh copies it into the guest tree.
# Mounts what the tests need, runs /mnt/host/cmd.sh, leaves its exit status in
# /mnt/host/exit-status and powers off.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
# What udev would add and devtmpfs has not: kselftest's runner writes to /dev/stdout.
ln -s /proc/self/fd /dev/fd
ln -s fd/0 /dev/stdin
ln -s fd/1 /dev/stdout
ln -s fd/2 /dev/stderr
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /dev/shm
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /mnt/host
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 host /mnt/host
# The kernel's modules, from the share, without writing into the guest tree.
kver=$(uname -r)
if mount -t tmpfs tmpfs /lib/modules; then
	mkdir -p "/lib/modules/$kver"
	mount --bind "/mnt/host/modules/$kver" "/lib/modules/$kver"
else
	echo "guest: no /lib/modules in the tree (vm-run.sh makes it): no modules" >&2
fi
ulimit -l unlimited
hostname rxe-guest
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
echo "guest: up, kernel $kver"
cd /tmp
sh /mnt/host/cmd.sh
echo $? > /mnt/host/exit-status
sync
echo o > /proc/sysrq-trigger
# Wait for the power-off with shell builtins only: the root file system (9p) may be gone
# already, and an init that cannot run a program exits and panics the kernel.
while :; do :; done
