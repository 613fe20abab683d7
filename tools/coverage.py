#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Which of the driver's source files the tests ran, from the counting plugin's snapshots.

  coverage.py [--json OUT] COVER_DIR... MODULE.ko...

A COVER_DIR is what selftests/cover-hook.sh and tools/qemu-tbcount.c (delta=1) left in
a guest's share (make check's debug guests have one each): `index` (a line per test: its
snapshot, the test, the rxe_rs modules seen loaded), the snapshots (the code blocks that ran: address, instructions, executions)
and `module.ADDRESS-BUILDID`, one per rxe_rs module seen loaded: where its .text was.
The MODULE.ko files are the builds the guest loaded (found by their build ID), built
with line tables (tools/build-module.sh debug).

Each instruction of a block that ran is the source line the module's line table gives
it: the innermost one, so code inlined from a file counts for that file. Prints, per
file of the driver and of rust/, how many of its instructions in the module ran and in
how many tests; the files with no instruction in the module (types, constants, module
declarations); and exits 1 if a file with instructions in the module ran none.
--json writes the files each test ran, for choosing the debug kernel's shard.
"""

import bisect
import collections
import glob
import json
import os
import subprocess
import sys

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DRV = "drivers/infiniband/sw/rxe_rs"
# Source files that are not part of the module: the roce crate's host build.
NOT_IN_MODULE = {DRV + "/roce/host.rs"}


def source_files():
    files = []
    for pattern in (DRV + "/*.rs", DRV + "/*/*.rs", "rust/*.rs", "rust/sw/*.rs",
                    "rust/*.c", "rust/sw/*.c"):
        files += [os.path.relpath(p, TOP) for p in glob.glob(os.path.join(TOP, pattern))]
    return sorted(set(files) - NOT_IN_MODULE)


def run(cmd, data=None):
    return subprocess.run(cmd, input=data, capture_output=True, text=True, check=True).stdout


class Module:
    """A build of rxe_rs: its .text's instructions and the source file of each."""

    def __init__(self, ko):
        self.ko = ko
        note = subprocess.run(["objcopy", "-O", "binary", "--only-section=.note.gnu.build-id",
                               ko, "/dev/stdout"], capture_output=True, check=True).stdout
        # The note's header (sizes, type, "GNU\0") is 16 bytes.
        self.build_id = note[16:].hex()
        self.insns = []
        for line in run(["objdump", "-d", "--no-show-raw-insn", "-j", ".text", ko]).splitlines():
            head = line.split(":", 1)[0].strip()
            if ":" in line and head and all(c in "0123456789abcdef" for c in head):
                self.insns.append(int(head, 16))
        self.size = (self.insns[-1] + 16) if self.insns else 0
        self.files = {}
        lines = run(["addr2line", "-e", ko, "-j", ".text"],
                    "\n".join(hex(a) for a in self.insns) + "\n").splitlines()
        for a, l in zip(self.insns, lines):
            path = os.path.normpath(l.rsplit(":", 1)[0])
            if path.startswith("/src/"):
                self.files[a] = path[len("/src/"):]


def read_cover(cover, modules, ran, tests_of, per_test):
    """Adds what one guest's snapshots ran; returns its blocks outside rxe_rs."""
    loaded = {}
    for p in glob.glob(os.path.join(cover, "module.*")):
        base, build_id = os.path.basename(p)[len("module."):].split("-", 1)
        if build_id in modules:
            loaded[os.path.basename(p)] = (int(base, 16), modules[build_id])
    outside = 0
    with open(os.path.join(cover, "index")) as f:
        for line in f:
            p = line.split()
            if len(p) < 2:
                continue
            snap, test, seen = p[0], p[1], [loaded[s] for s in p[2:] if s in loaded]
            path = os.path.join(cover, snap)
            if not os.path.exists(path):
                continue
            here = set()
            with open(path) as c:
                for bl in c:
                    va, n = bl.split()[:2]
                    va, n = int(va, 16), int(n)
                    for base, m in seen:
                        if base <= va < base + m.size:
                            off = va - base
                            i = bisect.bisect_left(m.insns, off)
                            for a in m.insns[i:i + n]:
                                fl = m.files.get(a)
                                if fl:
                                    ran[fl].add((m.build_id, a))
                                    here.add(fl)
                            break
                    else:
                        outside += 1
            for fl in here:
                tests_of[fl].add(test)
            per_test[test] = sorted(here)
    return outside


def main():
    args = sys.argv[1:]
    out_json = None
    if args[:1] == ["--json"]:
        out_json = args[1]
        args = args[2:]
    covers = [a for a in args if not a.endswith(".ko")]
    kos = [a for a in args if a.endswith(".ko")]
    if not covers or not kos:
        sys.exit(__doc__)
    for cover in covers:
        if not os.path.exists(os.path.join(cover, "index")):
            sys.exit("no snapshot index in %s: its guest took none" % cover)
    modules = {m.build_id: m for m in map(Module, kos)}

    files = source_files()
    insns_of = collections.Counter()
    for m in modules.values():
        for f in set(m.files.values()):
            insns_of[f] = max(insns_of[f], sum(1 for v in m.files.values() if v == f))
    ran = collections.defaultdict(set)  # file -> (build ID, offset) of instructions run
    tests_of = collections.defaultdict(set)
    per_test = {}
    outside = 0
    for cover in covers:
        outside += read_cover(cover, modules, ran, tests_of, per_test)

    idle, none = [], []
    print("%-44s %13s %6s" % ("file", "instructions", "tests"))
    for fl in files:
        if not insns_of[fl]:
            none.append(fl)
            continue
        # Of the builds seen (the KUnit one has other offsets), the one that ran most.
        by_build = collections.Counter(src for src, _ in ran[fl])
        n = max(by_build.values(), default=0)
        print("%-44s %6d/%-6d %6d" % (fl, n, insns_of[fl], len(tests_of[fl])))
        if not ran[fl]:
            idle.append(fl)
    print("%d tests; %d blocks of other modules"
          % (len(per_test), outside))
    print("no instruction in the module (types, constants, module declarations): "
          + (", ".join(none) or "none"))
    if out_json:
        with open(out_json, "w") as f:
            json.dump(per_test, f, indent=1, sort_keys=True)
    if idle:
        print("files none of whose instructions ran: " + ", ".join(idle))
        sys.exit(1)
    print("every file with instructions in the module ran some of them")


if __name__ == "__main__":
    main()
