#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Install what the host needs from the host's own (bookworm) suite: mmdebstrap; QEMU,
# whose libraries and option ROMs the guests' QEMU 10 uses (tools/lib.sh, qemu_tree,
# unpacks that into the cache); GLib's headers, which QEMU 10's plugin API header
# includes (tools/qemu-tbcount.c). Never adds other suites to the host's apt sources.
set -euo pipefail
need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v unshare >/dev/null || need+=(util-linux)
[ "$(dpkg-query -W -f='${Status}' libglib2.0-dev 2>/dev/null)" = "install ok installed" ] ||
	need+=(libglib2.0-dev pkg-config)
[ ${#need[@]} = 0 ] && exit 0
echo "==> host packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
