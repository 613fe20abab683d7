#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""rxe's recorded outcomes of the in-guest selftests, and when they are stale.

The side-by-side verdict of make check compares rxe_rs's outcome of each test with
rxe's. rxe's outcome depends on the test and on what it runs on, never on rxe_rs, so it
is recorded (selftests/rxe-baseline/selftests.txt, committed) with a key per test: a
hash of everything the test's rxe outcome can depend on. A test whose key changed is
stale, and make check runs it on rxe again.

A test's key covers:
  - ENV, given by the caller: the test kernel's and the guest tree's cache keys and the
    guest's harness (tools/check.sh hashes these);
  - guest-tests.sh's code (comment lines left out) outside the tests: every line
    outside a function, but the `run` lines, and the functions that code and `run`
    call; and where among those lines the test's `run` line is;
  - the test's own function and every function of guest-tests.sh that it calls, at any
    depth;
  - the files of selftests/ that these name (a program, a Python script, the kernel
    consumer module), through the variables that name them; a C program brings
    verbs_common.h and the Makefile with it, a Python script the scripts it imports, a
    module built from a directory of selftests/ the whole directory;
  - the sources of what a test loads from outside selftests/ (OUTSIDE).

Usage:
  baseline.py keys --env ENV                  TEST KEY, for every test
  baseline.py stale --env ENV FILE            the tests whose recorded key is not theirs
  baseline.py outcomes --env ENV FILE         TEST OUTCOME for the tests that are not
                                              stale: ok, skip, FAIL, hung, or flaky when
                                              the recorded runs disagree
  baseline.py record --env ENV FILE TAP...    the outcomes of TEST in the TAP files (one
                                              file per run) recorded with its key;
                                              tests gone from guest-tests.sh dropped
"""

import hashlib
import os
import re
import subprocess
import sys

SELFTESTS = os.environ.get("RXE_RS_SELFTESTS") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "selftests")
# Files of selftests/ that no guest-tests.sh test runs on rxe.
NOT_INPUTS = {"guest-tests.sh", "differences.txt", "sanitized.sh", "interop.sh",
              "rxe.sh", "rxe_rs.sh", "settings", "config", "pcap_icrc.py", "peer_up.py",
              "read_big.c"}
# What a test loads that is built from outside selftests/: the word that names it, and
# the directories (from the top of the tree) of its sources.
OUTSIDE = {"rdma_minimal": ("samples/rdma_minimal", "rust", "Kbuild")}
IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)

FUNC = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(\)\s*\{(.*)$")
RUN = re.compile(r"^run\s+(\S+)\s+(\S+)\s*$")
ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse(text):
    """The functions (name -> text), the code outside them and the tests (in order)."""
    funcs, top, tests = {}, [], []
    name = None
    for line in text.splitlines():
        # Comments change no outcome.
        if line.lstrip().startswith("#"):
            continue
        if name is not None:
            funcs[name].append(line)
            if line == "}":
                name = None
            continue
        m = FUNC.match(line)
        if m:
            funcs[m.group(1)] = [line]
            # A function of one line: its braces balance on it.
            if line.count("{") > line.count("}"):
                name = m.group(1)
            continue
        r = RUN.match(line)
        if r:
            # Where the test runs among the top-level statements (before or after the
            # driver is loaded, say).
            tests.append((r.group(1), r.group(2), len(top)))
            continue
        top.append(line)
    return {k: "\n".join(v) for k, v in funcs.items()}, "\n".join(top), tests


def closure(roots, funcs):
    """The text of the functions named in ROOTS (texts), at any depth, sorted by name."""
    seen, todo = set(), list(roots)
    while todo:
        for w in WORD.findall(todo.pop()):
            if w in funcs and w not in seen:
                seen.add(w)
                todo.append(funcs[w])
    return "\n".join(funcs[n] for n in sorted(seen))


def tree(top):
    """The files of TOP (a file, or a directory's files at any depth) that git tracks,
    sorted: what a fresh clone has, not a build's leftovers. Outside a git checkout
    (tools/test_baseline.py's copies), every file."""
    if os.path.isfile(top):
        return [top]
    try:
        names = subprocess.run(["git", "-C", top, "ls-files", "-z", "."], check=True,
                               capture_output=True).stdout.decode().split("\0")
        return sorted(os.path.join(top, n) for n in names if n)
    except (subprocess.CalledProcessError, OSError):
        pass
    out = []
    for dirpath, dirs, names in os.walk(top):
        dirs.sort()
        out += [os.path.join(dirpath, n) for n in sorted(names)]
    return out


def input_files():
    """Files by the word that names them: a file of selftests/ by its stem; a
    directory of selftests/ (a module built from it) by its name and by each of its
    files' stems; OUTSIDE's words."""
    files = {}
    for n in sorted(os.listdir(SELFTESTS)):
        path = os.path.join(SELFTESTS, n)
        if n in NOT_INPUTS or n == "rxe-baseline":
            continue
        if os.path.isdir(path):
            sub = tree(path)
            for word in {n} | {os.path.splitext(os.path.basename(p))[0] for p in sub}:
                files.setdefault(word, []).extend(sub)
        else:
            files.setdefault(os.path.splitext(n)[0], []).append(path)
    top = os.path.join(SELFTESTS, "..")
    for word, dirs in OUTSIDE.items():
        files[word] = [p for d in dirs for p in tree(os.path.join(top, d))]
    return files


def with_imports(paths, files):
    """PATHS and the Python scripts of selftests/ that their scripts import, at any
    depth."""
    out, todo = set(paths), [p for p in paths if p.endswith(".py")]
    while todo:
        with open(todo.pop()) as f:
            for mod in IMPORT.findall(f.read()):
                for p in files.get(mod, []):
                    if p.endswith(".py") and p not in out:
                        out.add(p)
                        todo.append(p)
    return sorted(out)


def keys(env):
    with open(os.path.join(SELFTESTS, "guest-tests.sh")) as f:
        funcs, top, tests = parse(f.read())
    assigns = {}
    for line in top.splitlines():
        m = ASSIGN.match(line.strip())
        if m:
            assigns.setdefault(m.group(1), []).append(m.group(2))
    files = input_files()
    harness = closure([top, funcs.get("run", "")], funcs)
    common_code = top + "\n" + harness
    out = {}
    for test, fn, place in tests:
        code = closure([fn], funcs)
        # What the functions name, the variables they read expanded once.
        words = set(WORD.findall(harness + "\n" + code))
        for v in list(words):
            for value in assigns.get(v, []):
                words.update(WORD.findall(value))
        paths = with_imports({p for w in words for p in files.get(w, [])}, files)
        if any(p.endswith(".c") for p in paths):
            paths = sorted(set(paths) | set(files.get("verbs_common", []))
                           | set(files.get("Makefile", [])))
        h = hashlib.sha256()
        for part in (env, common_code, test, str(place), code):
            h.update(part.encode() + b"\0")
        for p in paths:
            h.update(os.path.relpath(p, SELFTESTS).encode() + b"\0")
            with open(p, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
        out[test] = h.hexdigest()[:16]
    return out


def read_file(path):
    """TEST -> (KEY, [OUTCOME...]) of a baseline file."""
    entries = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                p = line.split()
                if p and not p[0].startswith("#") and len(p) >= 3:
                    entries[p[0]] = (p[1], p[2:])
    return entries


def tap_outcomes(path):
    """TEST -> outcome of one TAP file."""
    res = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[0] == "ok":
                res[p[2]] = "skip" if "# SKIP" in line else "ok"
            elif len(p) >= 4 and p[0] == "not" and p[1] == "ok":
                res[p[3]] = "hung" if "# HUNG" in line else "FAIL"
    return res


HEADER = """\
# rxe's outcomes of the in-guest selftests (selftests/guest-tests.sh), which make
# check compares rxe_rs's with (tools/check.sh, the side-by-side report). Written by
# `make rxe-baseline` (tools/check.sh, TIER=baseline); tools/baseline.py says what a
# test's key covers. A test whose key is no longer its own is stale: make check runs
# it on rxe.
# TEST KEY OUTCOME... (one outcome per recorded run: ok, skip, FAIL or hung)
"""


def main(argv):
    if len(argv) < 4 or argv[2] != "--env":
        sys.exit(__doc__)
    cmd, env, rest = argv[1], argv[3], argv[4:]
    k = keys(env)
    if cmd == "keys":
        for t, key in k.items():
            print(t, key)
    elif cmd == "stale":
        rec = read_file(rest[0])
        for t, key in k.items():
            if rec.get(t, (None,))[0] != key:
                print(t)
    elif cmd == "outcomes":
        rec = read_file(rest[0])
        for t, key in k.items():
            if t in rec and rec[t][0] == key:
                outs = set(rec[t][1])
                print(t, outs.pop() if len(outs) == 1 else "flaky")
    elif cmd == "record":
        rec = read_file(rest[0])
        runs = [tap_outcomes(p) for p in rest[1:]]
        for t in k:
            outs = [r[t] for r in runs if t in r]
            if outs:
                rec[t] = (k[t], outs)
        with open(rest[0] + ".new", "w") as f:
            f.write(HEADER)
            for t in k:
                if t in rec:
                    f.write("%s %s %s\n" % (t, rec[t][0], " ".join(rec[t][1])))
        os.replace(rest[0] + ".new", rest[0])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
