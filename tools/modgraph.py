#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The driver's import graph, and the check that it has no cycle but a module's with
its own ancestors and descendants.

A file of drivers/infiniband/sw/rxe_rs/ depends on another when it names it: in a `use`
(`crate::x`, `super::x`, `self::x`, nested groups too) or in a path in code
(`crate::x::f()`), comments and strings left out. `roce/` (the no_std protocol crate,
which names nothing of the driver) and the `ib` and `sw` layers (rust/ and rust/sw/,
pulled in by the crate root) are leaves and are not drawn. A parent module and its children (qp/mod.rs and
qp/req.rs) may name each other; any other cycle is a layering fault.

    tools/modgraph.py [--edges]    prints the cycles (and with --edges every edge);
                                   exits 1 if there is one
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                    "drivers", "infiniband", "sw", "rxe_rs")
LEAVES = {"roce", "ib", "sw"}


def modules():
    """Maps each module path ("qp::req") to its file."""
    mods = {}
    for dirpath, dirnames, files in os.walk(ROOT):
        rel = os.path.relpath(dirpath, ROOT)
        if rel.split(os.sep)[0] == "roce":
            continue
        parts = [] if rel == "." else rel.split(os.sep)
        for f in files:
            if not f.endswith(".rs"):
                continue
            stem = f[:-3]
            if stem == "rxe_rs_main" and not parts:
                name = []
            elif stem == "mod":
                name = parts
            else:
                name = parts + [stem]
            mods["::".join(name)] = os.path.join(dirpath, f)
    return mods


def strip(text):
    """The text without comments, strings and character literals."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\])'", "''", text)


def resolve(mod, path, mods):
    """The module of `mods` that `path` (as written in module `mod`) names: the longest
    module prefix of the absolute path."""
    here = mod.split("::") if mod else []
    # A file that is not a mod.rs is a leaf module: `super` is its parent.
    segs = path.split("::")
    if segs[0] == "crate":
        absolute = segs[1:]
    elif segs[0] in ("super", "self"):
        absolute = list(here)
        while segs and segs[0] in ("super", "self"):
            if segs.pop(0) == "super":
                absolute = absolute[:-1]
        absolute += segs
    else:
        return None
    for n in range(len(absolute), 0, -1):
        name = "::".join(absolute[:n])
        if name in mods:
            return name
    return None


def use_paths(tree, prefix=""):
    """The paths of a `use` tree: `a::{b, c::{d}}` gives a::b and a::c::d."""
    out, depth, start = [], 0, 0
    parts = []
    for i, ch in enumerate(tree):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(tree[start:i])
            start = i + 1
    parts.append(tree[start:])
    for part in (p.strip() for p in parts):
        if not part:
            continue
        m = re.match(r"^([\w:]*?)(::)?\{(.*)\}$", part, re.S)
        if m:
            head = m.group(1)
            out += use_paths(m.group(3), prefix + head + ("::" if head else ""))
        else:
            out.append(prefix + re.split(r"\s+as\s+", part)[0].strip())
    return out


def edges(mods):
    """Maps each module to the set of modules it names."""
    graph = {m: set() for m in mods}
    for mod, path in mods.items():
        text = strip(open(path, encoding="utf-8").read())
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            paths += use_paths(re.sub(r"\s+", " ", m.group(1)))
        paths += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", text)
        for p in paths:
            target = resolve(mod, p, mods)
            if target is None or target == mod or target.split("::")[0] in LEAVES:
                continue
            graph[mod].add(target)
    return graph


def related(a, b):
    """Whether one of the modules is the other's ancestor (the root is everyone's)."""
    pa, pb = a.split("::") if a else [], b.split("::") if b else []
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def cycles(graph):
    """The strongly connected components (more than one module) of the graph without
    the edges between a module and its ancestors."""
    g = {a: {b for b in bs if not related(a, b)} for a, bs in graph.items()}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out, g


def main():
    mods = modules()
    graph = edges(mods)
    sccs, g = cycles(graph)
    if "--edges" in sys.argv[1:]:
        for a in sorted(graph):
            for b in sorted(graph[a]):
                print(f"{a or '(root)'} -> {b or '(root)'}")
    for comp in sccs:
        members = set(comp)
        inner = [f"{a} -> {b}" for a in comp for b in sorted(g[a] & members)]
        print(f"cycle among {', '.join(comp)}: {'; '.join(inner)}")
    n = sum(len(v) for v in graph.values())
    print(f"modgraph: {len(mods)} modules, {n} edges, {len(sccs)} cycles")
    return 1 if sccs else 0


if __name__ == "__main__":
    sys.exit(main())
