# SPDX-License-Identifier: GPL-2.0
# Shared settings of the rxe_rs tools: the cache layout and the pinned versions.
# Sourced by the other scripts, never run on its own.

# The one place that names the kernel the project is written for.
KVER=7.2.13
KSERIES=7.2
KDEB_VERSION=7.2.13-1

TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP_DIR=$(cd "$TOOLS_DIR/.." && pwd)

# Filters for pipelines under `set -o pipefail`. Both read all of their input: `head`
# and `grep -q` stop early, and the writer then dies of SIGPIPE, which pipefail turns
# into the pipeline's status (exit 141 of a whole check, or a match reported missing).
# take N: the first N lines of standard input.
take() { awk -v n="$1" 'NR <= n'; }
# matches ERE: whether a line of standard input matches the extended regular expression.
matches() { re=$1 awk '$0 ~ ENVIRON["re"] { found = 1 } END { exit !found }'; }

# Every heavy artefact lives here, outside the checkout.
RXE_RS_CACHE=${RXE_RS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rxe_rs}
export RXE_RS_CACHE

# The Debian archive the host's own apt uses (its sources), for the sid tree and for
# source packages: the first whose Release file says Label: Debian, or, before the host
# ever ran apt-get update, the first source whose suite is not a security or updates
# suite. DEBIAN_MIRROR overrides it. The snapshot it serves may have an expired Release
# file (the tree's apt options allow it).
debian_mirror() {
	local uri
	if [ -n "${DEBIAN_MIRROR:-}" ]; then
		echo "$DEBIAN_MIRROR"
		return
	fi
	uri=$(apt-get indextargets --format '$(LABEL) $(TARGET_OF) $(REPO_URI)' 2>/dev/null |
		awk '$1 == "Debian" && $2 == "deb" { print $3; exit }')
	[ -n "$uri" ] || uri=$(apt-get indextargets --no-release-info \
		--format '$(TARGET_OF) $(SUITE) $(REPO_URI)' 2>/dev/null |
		awk '$1 == "deb" && $2 !~ /-(security|updates|backports)$/ { print $3; exit }')
	[ -n "$uri" ] || die "no Debian archive in the host's apt sources (set DEBIAN_MIRROR)"
	echo "${uri%/}"
}

stage_start() {
	STAGE_NAME=$1
	STAGE_T0=$(date +%s)
	printf '==> %s\n' "$STAGE_NAME" >&2
}

stage_end() {
	printf '==> %s: done in %ss\n' "$STAGE_NAME" "$(($(date +%s) - STAGE_T0))" >&2
}

# The stages every entry point starts with: host packages, toolchain tree, test kernel.
prepare_base() {
	stage_start "host packages"
	"$TOOLS_DIR/install-host.sh"
	stage_end
	stage_start "toolchain tree"
	"$TOOLS_DIR/bootstrap-rootfs.sh"
	stage_end
	stage_start "test kernel"
	"$TOOLS_DIR/build-kernel.sh" test >/dev/null
	stage_end
}

# The debug kernel's builds of the module carry line tables (no other debug data): the
# debug guests' coverage (tools/coverage.py) names the source line of each instruction
# that ran. The code is the same as without them.
DEBUG_LINES=(KRUSTFLAGS=-Cdebuginfo=line-tables-only KCFLAGS=-gline-tables-only)

# The share a guest sees at /mnt/host: test binaries, scripts, the kernel-consumer
# module and rxe_rs with its KUnit suites (not rxe_rs.ko itself: share_module). Its three
# builds run side by side, each mostly one compiler process (for the test kernel: 39 s
# one after the other, 32 s side by side beside the module's and the debug kernel's
# builds). Returns non-zero if any failed.
make_share() {
	local flavor=$1 share=$TOP_DIR/build/share-$1 kdir llvm=() pids=() pid rc=0
	kdir=$("$TOOLS_DIR/build-kernel.sh" "$flavor") || return
	[ "$flavor" = debug ] && llvm=(LLVM=1 "${DEBUG_LINES[@]}")
	mkdir -p "$share/bin"
	# What make install needs, as shipped (make_install_takes_rdma_rxe_place).
	mkdir -p "$share/src/tools" "$share/src/dist"
	cp "$TOP_DIR/Makefile" "$share/src/"
	cp "$TOP_DIR/tools/install.sh" "$share/src/tools/"
	cp "$TOP_DIR/dist/rxe_rs.conf" "$share/src/dist/"
	cp "$TOP_DIR/selftests/guest-tests.sh" "$TOP_DIR/selftests/sanitized.sh" \
		"$TOP_DIR/selftests/roce_send.py" "$TOP_DIR/selftests/live_qps.py" \
		"$TOP_DIR/selftests/peer_qps.py" "$TOP_DIR/selftests/stall9p.py" \
		"$TOP_DIR/selftests/cover-hook.sh" "$share/"
	# The test programs, by the selftests' kselftest Makefile with the kernel's lib.mk.
	in_rootfs make -s -C /src/selftests KSFT="/usr/src/linux-source-$KSERIES/tools/testing/selftests" \
		OUTPUT="/src/build/share-$flavor/bin" >/dev/null &
	pids+=($!)
	# The kernel-consumer checks are a module of their own, built like rxe_rs.
	in_rootfs make -C "/cache/$(basename "$kdir")" M=/src/selftests/kverbs \
		MO="/src/build/kverbs-$flavor" W=1 "${llvm[@]}" >/dev/null &
	pids+=($!)
	# And rxe_rs with its KUnit suites built in (guest-tests.sh's kunit_suites).
	in_rootfs make -C "/cache/$(basename "$kdir")" M=/src MO="/src/build/kunit-$flavor" \
		RXE_RS_KUNIT=1 "${llvm[@]}" >/dev/null &
	pids+=($!)
	for pid in "${pids[@]}"; do
		wait "$pid" || rc=1
	done
	[ $rc = 0 ] || return 1
	cp "$TOP_DIR/build/kverbs-$flavor/kverbs_test.ko" "$share/"
	cp "$TOP_DIR/build/kunit-$flavor/rxe_rs.ko" "$share/rxe_rs_kunit.ko"
}

# share_module FLAVOR: rxe_rs and the minimal sample driver as built by build-module.sh,
# into FLAVOR's share.
share_module() {
	mkdir -p "$TOP_DIR/build/share-$1"
	cp "$TOP_DIR/build/$1/rxe_rs.ko" "$TOP_DIR/build/$1/rdma_minimal.ko" "$TOP_DIR/build/share-$1/"
}

# The debug kernel, rxe_rs built for it and the debug guest's share, as one stage (make
# fuzz, make stress).
prepare_debug() {
	stage_start "debug kernel and module"
	"$TOOLS_DIR/build-kernel.sh" debug >/dev/null
	"$TOOLS_DIR/build-module.sh" debug >/dev/null
	share_module debug
	make_share debug
	stage_end
}

die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# link_ports FIRST: prints "A B", the first pair of UDP ports A, A+1 on 127.0.0.1 from
# FIRST on (in steps of two, at most 50 pairs) that nothing has bound, for the two ends
# of a guests' link (vm-run.sh --link). QEMU binds its end with SO_REUSEADDR, so a
# stale guest still bound to a port would share it and take the new guest's frames; a
# plain bind here fails on any port in use.
link_ports() {
	python3 -c '
import socket, sys
first = int(sys.argv[1])
for a in range(first, first + 100, 2):
    socks = []
    try:
        for port in (a, a + 1):
            socks.append(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
            socks[-1].bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(a, a + 1)
    sys.exit(0)
sys.exit("no free pair of UDP ports on 127.0.0.1 from %d on" % first)
' "$1"
}

# Short hash of the contents of files ("-" is standard input), used as cache keys. Only
# contents count, never paths: a clone elsewhere must find the same cache entries.
cache_key() {
	local f
	for f in "$@"; do
		if [ "$f" = - ]; then cat; else cat "$f"; fi | sha256sum
	done | sha256sum | cut -c1-16
}

# Versions of the recipes that make the cached artefacts: bump one when a change to its
# script changes what the script produces (not for changes of how it runs).
ROOTFS_RECIPE=1
KERNEL_RECIPE=2

# The toolchain's key, which the kernels' keys include: the packages of
# rootfs-packages.txt and the recipe.
rootfs_key() {
	printf 'recipe %s\n' "$ROOTFS_RECIPE" | cache_key - "$TOOLS_DIR/rootfs-packages.txt"
}

# The tree's own key: the toolchain's and the guest-only packages of guest-packages.txt,
# which no build uses (adding one makes a new tree, not new kernels).
rootfs_dir() {
	printf '%s/rootfs-%s\n' "$RXE_RS_CACHE" \
		"$(printf 'toolchain %s\n' "$(rootfs_key)" | cache_key - "$TOOLS_DIR/guest-packages.txt")"
}

# The debug guests' root: an ext4 image of the toolchain tree, without the kernel source
# (which only the builds use) and with the guests' init, tools/guest-init.sh (vm-run.sh
# explains why those guests boot from it). Cached beside the tree, keyed by it and the
# init; made at most once at a time. Prints its path.
rootfs_image() {
	local root img
	root=$(rootfs_dir)
	img=$RXE_RS_CACHE/rootimg-$(printf '%s\n' "$(basename "$root")" |
		cache_key - "$TOOLS_DIR/guest-init.sh").img
	(
		flock 9
		[ -s "$img" ] && exit 0
		rm -f "$RXE_RS_CACHE"/rootimg-*.img
		unshare --mount --propagation private -- /bin/sh -ec '
			root=$1 init=$2 img=$3
			mount -t tmpfs tmpfs "$root/usr/src"
			mkdir -p "$root/lib/modules"
			# The init as it is now, executable, in place of the tree'"'"'s copy.
			mount -t tmpfs tmpfs "$root/tmp"
			install -m 0755 "$init" "$root/tmp/init"
			touch "$root/sbin/rxe-rs-guest-init"
			mount --bind "$root/tmp/init" "$root/sbin/rxe-rs-guest-init"
			umount -l "$root/tmp"
			truncate -s "$(du -sxm "$root" | cut -f1)M" "$img.tmp"
			truncate -s +1G "$img.tmp"
			mke2fs -q -t ext4 -L rxe-root -d "$root" "$img.tmp"
			mv "$img.tmp" "$img"
		' rootfs_image "$root" "$TOOLS_DIR/guest-init.sh" "$img" >&2
	) 9> "$RXE_RS_CACHE/rootimg.lock" || die "cannot make the guests' root image"
	echo "$img"
}

# Run a command inside the toolchain tree, in a private mount namespace so that the
# bind mounts vanish with it and the tree stays bootable. The checkout is at /src and
# the cache at /cache inside.
in_rootfs() {
	local root
	root=$(rootfs_dir)
	[ -f "$root/.complete" ] || die "no toolchain tree at $root: run tools/bootstrap-rootfs.sh"
	unshare --mount --propagation private -- /bin/sh -c '
		set -e
		root=$1; top=$2; cache=$3; shift 3
		mount -t proc proc "$root/proc"
		mount --rbind /sys "$root/sys"
		mount --rbind /dev "$root/dev"
		mkdir -p "$root/src" "$root/cache"
		mount --bind "$top" "$root/src"
		mount --bind "$cache" "$root/cache"
		mount -t tmpfs tmpfs "$root/tmp"
		exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			LANG=C.UTF-8 "$@"
	' in_rootfs "$root" "$TOP_DIR" "$RXE_RS_CACHE" "$@"
}

# The QEMU of guests whose vCPUs run at once (vm-run.sh with RXE_RS_TCG_THREAD=multi,
# make bench): Debian's build of QEMU 10.0 for bookworm (bookworm-backports), unpacked
# into the cache, as the host's own suite has 7.2, whose multi-threaded TCG oopses
# guests on a stale int3 while the kernel patches its code (fixed in QEMU 8.1). The
# host's qemu-system-x86 (install-host.sh) brings the libraries and the option ROMs; the
# host's apt configuration is not touched (a private apt state). Prints the tree's
# directory (usr/bin/qemu-system-x86_64, the firmware under usr/share). A Debian archive
# that no longer has this version fails here: update the pin to what bookworm-backports
# has. The tests' guests stay on the host's 7.2 with one thread: on 10.0 with one
# thread, a debug guest of make check oopsed on a stale int3 at boot (ntp_adjtimex, in
# the timer interrupt) and its next boot hung before printing anything, in one of the
# first four debug boots.
QEMU_DEB_VERSION=1:10.0.2+ds-2+deb13u1~bpo12+1
qemu_tree() {
	local up dir apt opts old mirror
	up=${QEMU_DEB_VERSION#*:} && up=${up%-*}
	dir=$RXE_RS_CACHE/qemu-$up
	if [ ! -f "$dir/.complete" ]; then
		mkdir -p "$RXE_RS_CACHE"
		(
			set -e
			flock 9
			[ ! -f "$dir/.complete" ] || exit 0
			echo "==> QEMU $QEMU_DEB_VERSION (bookworm-backports) into the cache" >&2
			rm -rf "$dir" && mkdir -p "$dir"
			apt=$(mktemp -d)
			mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/dl"
			mirror=$(debian_mirror)
			echo "deb $mirror bookworm-backports main" > "$apt/sources.list"
			opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/none"
				-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
				-o APT::Sandbox::User=root -o Acquire::Check-Valid-Until=false)
			apt-get "${opts[@]}" -qq update || die "apt-get update of bookworm-backports failed"
			(cd "$apt/dl" && apt-get "${opts[@]}" -qq download \
				"qemu-system-x86=$QEMU_DEB_VERSION" "qemu-system-common=$QEMU_DEB_VERSION" \
				"qemu-system-data=$QEMU_DEB_VERSION" seabios) ||
				die "cannot download QEMU $QEMU_DEB_VERSION (update QEMU_DEB_VERSION in tools/lib.sh)"
			for deb in "$apt/dl/"*.deb; do
				dpkg-deb -x "$deb" "$dir" || die "cannot unpack $deb"
			done
			rm -rf "$apt"
			"$dir/usr/bin/qemu-system-x86_64" --version >/dev/null ||
				die "QEMU $up does not run on this host"
			touch "$dir/.complete"
			# Other versions' trees are not needed any more.
			for old in "$RXE_RS_CACHE"/qemu-[0-9]*; do
				[ ! -d "$old" ] || [ "$old" = "$dir" ] || rm -rf "$old"
			done
		) 9> "$RXE_RS_CACHE/qemu.lock" >&2 || exit
	fi
	echo "$dir"
}

# The counting plugin (qemu-tbcount.c, for make ab COUNT=1 and the debug guests'
# coverage), built against the plugin API header of the host's QEMU, from Debian's
# source package of that version (apt-get source, with deb-src entries made of the
# host's own apt sources in a private apt state: the host's configuration is not
# touched). Prints the plugin's path.
tbcount_plugin() {
	local ver up dir so apt tarball
	ver=$(dpkg-query -W -f='${source:Version}' qemu-system-x86) ||
		die "the counting plugin needs Debian's qemu-system-x86"
	up=${ver#*:} && up=${up%-*}
	dir=$RXE_RS_CACHE/qemu-plugin-$up
	if [ ! -s "$dir/qemu-plugin.h" ]; then
		apt=$(mktemp -d)
		mkdir -p "$dir" "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/src"
		apt-get indextargets --format '$(TARGET_OF) $(REPO_URI) $(RELEASE)' |
			awk '$1 == "deb" { print "deb-src", $2, $3, "main" }' | sort -u > "$apt/sources.list"
		local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/none"
			-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root)
		apt-get "${opts[@]}" -qq update &&
			(cd "$apt/src" && apt-get "${opts[@]}" -qq source --download-only "qemu=$ver") ||
			die "cannot get QEMU $ver's source package"
		tarball=$(ls "$apt/src/"qemu_*.orig.tar.*)
		tar -xO --wildcards -f "$tarball" '*/include/qemu/qemu-plugin.h' > "$dir/qemu-plugin.h.$$" ||
			die "no plugin header in QEMU $ver's source"
		mv -f "$dir/qemu-plugin.h.$$" "$dir/qemu-plugin.h"
		rm -rf "$apt"
	fi
	# Guests that start side by side may both fetch the header and build the plugin:
	# each writes its own aside and renames it into place.
	so=$dir/tbcount-$(sha256sum "$TOOLS_DIR/qemu-tbcount.c" | cut -c1-16).so
	if [ ! -s "$so" ]; then
		gcc -O2 -Wall -shared -fPIC -I"$dir" -o "$so.$$" "$TOOLS_DIR/qemu-tbcount.c" \
			-lpthread || die "the counting plugin does not build"
		mv -f "$so.$$" "$so"
	fi
	echo "$so"
}
