#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Guest-kernel instructions per operation, from the snapshots of qemu-tbcount.c.

  tcg-count.py SHARE CONSOLE

The guest (tools/ab.sh --count) prints a line "COUNT MODULE WORKLOAD K N1 N2" for each
workload it ran twice, N1 and then N2 iterations, between snapshots K, K+1 and K+2
(SHARE/count.K). The second run's counts minus the first's, over N2 - N1, are one
operation's: what both runs share (connecting, registering, tearing down) cancels
out. Addresses are named from SHARE/kallsyms.MODULE, read in the same boot.

Prints, per workload, each module's instructions and translation blocks per operation
with their ratio to the first module's, then the functions whose instructions per
operation differ most between the first module and the last. Blocks matter as much as
instructions under TCG: each one is a dispatch, and a return or an indirect call a
lookup.
"""
import bisect
import collections
import re
import subprocess
import sys


def snapshot(path):
    insns = collections.Counter()
    blocks = collections.Counter()
    with open(path) as f:
        for line in f:
            va, n, execs = line.split()
            va, n, execs = int(va, 16), int(n), int(execs)
            insns[va] += n * execs
            blocks[va] += execs
    return insns, blocks


def symbols(path):
    syms = []
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 3 and fields[1] in "tTwW":
                syms.append((int(fields[0], 16), fields[2]))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                             text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        out = names
    # Crate hashes and outer modules say nothing here, and a function moved to another
    # module between the builds is still the same one: of a path, only its last module
    # and the item stay.
    return {n: re.sub(r"\b(?:\w+::)+(\w+::\w+)", r"\1", re.sub(r"\[[0-9a-f]{16}\]", "", d))
            for n, d in zip(names, out)}


def per_op(share, module, k, n1, n2):
    """Instructions and blocks per operation, by function."""
    s = [snapshot(f"{share}/count.{k + i}") for i in range(3)]
    addrs, names = symbols(f"{share}/kallsyms.{module}")
    insns = collections.Counter()
    blocks = collections.Counter()
    for va in set(s[2][0]) | set(s[1][0]):
        j = bisect.bisect_right(addrs, va) - 1
        name = names[j] if j >= 0 else "?"
        for out, w in ((insns, 0), (blocks, 1)):
            first = s[1][w][va] - s[0][w][va]
            second = s[2][w][va] - s[1][w][va]
            out[name] += (second - first) / (n2 - n1)
    return insns, blocks


def main():
    share, console = sys.argv[1], sys.argv[2]
    runs = collections.OrderedDict()
    with open(console, errors="replace") as f:
        for line in f:
            m = re.match(r"^COUNT (\S+) (\S+) (\d+) (\d+) (\d+)\s*$", line.replace("\r", ""))
            if m:
                runs.setdefault(m[2], []).append((m[1], int(m[3]), int(m[4]), int(m[5])))
    if not runs:
        sys.exit("tcg-count: no COUNT lines in the console")
    for workload, mods in runs.items():
        results = [(m, per_op(share, m, k, n1, n2)) for m, k, n1, n2 in mods]
        print(f"{workload}: guest kernel per operation (ratio to {results[0][0]})")
        base_i = sum(results[0][1][0].values())
        base_b = sum(results[0][1][1].values())
        for m, (insns, blocks) in results:
            i, b = sum(insns.values()), sum(blocks.values())
            print(f"  {m:14s} {i:9.0f} insns ({i / base_i:.3f}) {b:8.0f} blocks ({b / base_b:.3f})")
        if len(results) > 1:
            (m0, (i0, b0)), (m1, (i1, b1)) = results[0], results[-1]
            names = demangle(sorted(set(i0) | set(i1)))
            # The same function under the name of either build.
            d_i, d_b, a_i, z_i = (collections.Counter() for _ in range(4))
            for raw, nice in names.items():
                d_i[nice] += i1[raw] - i0[raw]
                d_b[nice] += b1[raw] - b0[raw]
                a_i[nice] += i0[raw]
                z_i[nice] += i1[raw]
            print(f"  largest differences, {m1} minus {m0} (insns, blocks; per operation):")
            for nice, d in sorted(d_i.items(), key=lambda kv: -abs(kv[1]))[:15]:
                print(f"    {d:+7.0f} {d_b[nice]:+6.0f}  {a_i[nice]:6.0f} -> {z_i[nice]:6.0f}  {nice[:100]}")
        print()


if __name__ == "__main__":
    main()
