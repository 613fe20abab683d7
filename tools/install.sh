#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make install, make uninstall: rxe_rs in rdma_rxe's place, for one kernel.
#
#   tools/install.sh [--remove] [--ko FILE] [KVER]
#
# Installs rxe_rs.ko as /lib/modules/KVER/updates/rxe_rs.ko (KVER: the running kernel's
# by default), runs depmod, and installs dist/rxe_rs.conf as
# /etc/modprobe.d/rxe_rs.conf, which puts rxe_rs in rdma_rxe's place (see that file).
# The module is FILE if given, else built here against /lib/modules/KVER/build (a
# Rust-enabled build tree of that kernel) into build/install-KVER/. --remove takes both
# files away again and runs depmod: rdma_rxe is the stock one again. A loaded module is
# left alone: unload it (modprobe -r rdma_rxe) before installing or removing.
# DESTDIR=DIR puts every file under DIR (for packaging; depmod then runs with -b DIR).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

remove= ko=
while [ $# -gt 0 ]; do
	case $1 in
	--remove) remove=1; shift ;;
	--ko) ko=$2; shift 2 ;;
	-*) echo "usage: install.sh [--remove] [--ko FILE] [KVER]" >&2; exit 2 ;;
	*) break ;;
	esac
done
kver=${1:-$(uname -r)}
dest=${DESTDIR:-}
moddir=$dest/lib/modules/$kver
conf=$dest/etc/modprobe.d/rxe_rs.conf

depmod_all() {
	if [ -n "$dest" ]; then depmod -b "$dest" "$kver"; else depmod "$kver"; fi
}

if [ -n "$remove" ]; then
	rm -f "$moddir/updates/rxe_rs.ko" "$conf"
	depmod_all
	echo "rxe_rs removed for $kver; rdma_rxe is the stock driver again"
	exit 0
fi

if [ -z "$ko" ]; then
	kdir=/lib/modules/$kver/build
	[ -f "$kdir/Makefile" ] || { echo "no build tree of $kver at $kdir: pass --ko FILE or install the kernel's headers" >&2; exit 1; }
	grep -q '^CONFIG_RUST=y' "$kdir/.config" 2>/dev/null ||
		{ echo "$kver is not built with Rust support (CONFIG_RUST): rxe_rs cannot be built for it" >&2; exit 1; }
	mkdir -p "$top/build/install-$kver"
	make -C "$kdir" M="$top" MO="$top/build/install-$kver"
	ko=$top/build/install-$kver/rxe_rs.ko
fi
[ -f "$ko" ] || { echo "no module at $ko" >&2; exit 1; }
install -D -m 644 "$ko" "$moddir/updates/rxe_rs.ko"
install -D -m 644 "$top/dist/rxe_rs.conf" "$conf"
depmod_all
echo "rxe_rs installed for $kver in rdma_rxe's place: modprobe rdma_rxe loads it"
