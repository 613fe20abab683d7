#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make check's DKMS stage: dkms.conf as shipped, with the toolchain tree's dkms, builds
# rxe_rs against the test kernel's build tree, and skips a kernel without Rust support
# with DKMS's reason. DKMS's trees are under build/dkms/ (--dkmstree, --sourcetree):
# nothing is written into the cached tree. The source is the checkout without build/
# and .git, as a user's copy in /usr/src would be.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kdir=$("$TOOLS_DIR/build-kernel.sh" test)
rm -rf "$TOP_DIR/build/dkms"
mkdir -p "$TOP_DIR/build/dkms"

in_rootfs /bin/bash -ec '
	kdir=$1 w=/src/build/dkms
	ver=$(sed -n "s/^PACKAGE_VERSION=\"\(.*\)\"$/\1/p" /src/dkms.conf)
	mkdir -p "$w/tree" "$w/src/rxe_rs-$ver"
	tar -C /src --exclude=./build --exclude=./.git -cf - . | tar -C "$w/src/rxe_rs-$ver" -xf -
	kver=$(make -s -C "$kdir" kernelrelease)
	dk() { dkms "$@" --dkmstree "$w/tree" --sourcetree "$w/src" -m rxe_rs -v "$ver"; }
	dk add
	dk build -k "$kver" --kernelsourcedir "$kdir"
	ls "$w/tree/rxe_rs/$ver/$kver/"*/module/rxe_rs.ko*
	# A kernel without Rust: skipped, with the reason.
	mkdir -p "$w/norust"
	grep -v "^CONFIG_RUST=" "$kdir/.config" > "$w/norust/.config"
	if dk build -k "$kver-norust" --kernelsourcedir "$w/norust" > "$w/norust.log" 2>&1; then
		echo "dkms built rxe_rs for a kernel without CONFIG_RUST" >&2
		exit 1
	fi
	cat "$w/norust.log"
	grep -q "BUILD_EXCLUSIVE" "$w/norust.log"
' dkms "/cache/$(basename "$kdir")"
