#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the Debian sid tree that serves as the toolchain (entered with chroot) and as
# the QEMU guest's root file system (over virtio-9p). Cached under $RXE_RS_CACHE, keyed
# by the package lists (rootfs-packages.txt, guest-packages.txt) and this script;
# downloaded .debs are kept between builds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

root=$(rootfs_dir)
if [ -f "$root/.complete" ]; then
	echo "toolchain tree: $root (cached)" >&2
	exit 0
fi

command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: run tools/install-host.sh"

stage_start "toolchain and guest tree (mmdebstrap, Debian sid)"
debs=$RXE_RS_CACHE/debs
mkdir -p "$debs"
rm -rf "$root" "$root.tmp"

pkgs=$(cat "$TOOLS_DIR/rootfs-packages.txt" "$TOOLS_DIR/guest-packages.txt" | grep -v '^#' |
	tr '\n' ',' | sed 's/,*$//')

mmdebstrap --variant=apt --mode=root \
	--aptopt='Acquire::Check-Valid-Until "false"' \
	--aptopt='Acquire::Check-Date "false"' \
	--aptopt='APT::Install-Recommends "false"' \
	--include="$pkgs" \
	--setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
	--setup-hook="sync-in $debs /var/cache/apt/archives" \
	--customize-hook="sync-out /var/cache/apt/archives $debs" \
	--customize-hook='echo rxe-guest > "$1/etc/hostname"' \
	--customize-hook='printf "127.0.0.1 localhost rxe-guest\n" > "$1/etc/hosts"' \
	sid "$root.tmp" "deb $(debian_mirror) sid main"

# The kernel source, unpacked once for every kernel build.
tar -C "$root.tmp/usr/src" -xJf "$root.tmp/usr/src/linux-source-$KSERIES.tar.xz"
rm -f "$root.tmp/usr/src/linux-source-$KSERIES.tar.xz"
rm -f "$root.tmp/var/cache/apt/archives/"*.deb

touch "$root.tmp/.complete"
mv "$root.tmp" "$root"
# Older trees (other keys) are not needed any more. One that an interrupted
# mmdebstrap left with file systems mounted in it cannot go: say so and go on.
for old in "$RXE_RS_CACHE"/rootfs-*; do
	[ "$old" = "$root" ] || rm -rf "$old" 2>/dev/null ||
		echo "note: cannot remove $old (mounts left by an interrupted run?)" >&2
done
stage_end
