#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Install what the host needs: mmdebstrap and QEMU, from the host's own (bookworm) suite.
# Never adds other suites to the host's apt sources.
set -euo pipefail
need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v unshare >/dev/null || need+=(util-linux)
[ ${#need[@]} = 0 ] && exit 0
echo "==> host packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
