#!/usr/bin/env python3
"""Layering check (make check-deps).

Reads who uses whom in two ways and holds both against one USES table:
  - links: module A uses module B when A's object references a symbol B's
    object defines (`nm`);
  - includes: a source or header of A includes a project header of B
    (`#include "room/header.h"`, or a header of its own folder).
A module's place is its layer (planner, ocs_drivers, common, agent, cli,
daemon) and, inside daemon/, its room (daemon/api, daemon/domain, ...;
daemon/main.c and daemon/ofcd.c are the composition root). It fails on
  - a use the USES table does not allow (naming the rule, the file and the
    symbol or header);
  - SQL outside daemon/domain/ and daemon/state/: a file that includes
    sqlite3.h, directly or through a project header;
  - a link cycle between modules.
Usage: check_deps.py OBJDIR [SRCROOT]   (SRCROOT: where the sources are, default .)
"""
import os
import re
import subprocess
import sys

# Which places each place may use (its own is always allowed). Arrows point down:
# net -> api -> domain -> state -> base; reconcile -> domain, state, drivers;
# cluster -> state. The API reads the reconciler's live state (units,
# sync, passes for ?wait=, fault injection) but the domain never calls up.
USES = {
    "planner": set(),
    "ocs_drivers": set(),
    "common": set(),
    "agent": {"common"},
    "cli": {"common"},
    "daemon/root": {"daemon/net", "daemon/api", "daemon/domain", "daemon/state",
                    "daemon/reconcile", "daemon/cluster", "daemon/base",
                    "common", "planner", "ocs_drivers"},
    "daemon/net": {"daemon/api", "daemon/base", "common"},
    "daemon/api": {"daemon/domain", "daemon/state", "daemon/reconcile", "daemon/base",
                   "common", "planner", "ocs_drivers"},
    "daemon/reconcile": {"daemon/domain", "daemon/state", "daemon/base", "common", "planner",
                         "ocs_drivers"},
    "daemon/domain": {"daemon/state", "daemon/base", "common", "planner", "ocs_drivers"},
    "daemon/cluster": {"daemon/state", "daemon/base", "common"},
    "daemon/state": {"daemon/base", "common", "planner"},
    "daemon/base": {"common", "planner"},
}

# Where SQL may be written.
SQL_PLACES = {"daemon/domain", "daemon/state"}

# The folders a bare #include "x.h" is looked up in, beside the includer's own.
LAYER_DIRS = ("common", "planner", "ocs_drivers")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def place_of(rel):
    """The layer or room of a path relative to the source root, or None."""
    parts = rel.split("/")
    if parts[0] == "daemon":
        return "daemon/" + parts[1] if len(parts) > 2 else "daemon/root"
    return parts[0] if parts[0] in USES else None


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind in "TDBRCGSV" and kind.isupper():
            defined.add(name)
    return defined, undefined


def tarjan(graph):
    index, low, stack, on, sccs = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sccs


def resolve(src, inc, rel):
    """The project file (relative to src) that `#include "inc"` in file rel names, or None."""
    for base in (os.path.dirname(rel), "daemon") + LAYER_DIRS + ("agent", "cli"):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.exists(os.path.join(src, cand)):
            return cand
    return None


def project_files(src):
    for top in sorted({p.split("/")[0] for p in USES}):
        for root, _, files in os.walk(os.path.join(src, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(root, f), src)


def includes(src, rel):
    with open(os.path.join(src, rel), encoding="utf-8") as f:
        return INCLUDE.findall(f.read())


def reaches_sqlite(src, rel, memo, seen=None):
    """The chain of includes from rel to sqlite3.h, or None."""
    if rel in memo:
        return memo[rel]
    seen = seen if seen is not None else set()
    if rel in seen:
        return None
    seen.add(rel)
    with open(os.path.join(src, rel), encoding="utf-8") as f:
        text = f.read()
    if re.search(r'#\s*include\s+<sqlite3\.h>', text):
        memo[rel] = [rel, "sqlite3.h"]
        return memo[rel]
    for inc in INCLUDE.findall(text):
        target = resolve(src, inc, rel)
        chain = target and reaches_sqlite(src, target, memo, seen)
        if chain:
            memo[rel] = [rel] + chain
            return memo[rel]
    memo[rel] = None
    return None


def allowed(a, b):
    return a == b or b in USES.get(a, set())


def check(objdir, src="."):
    """The list of problems found (empty: all is well) and a summary line."""
    failures = []
    objs = []
    for d, _, files in os.walk(objdir):
        rel = os.path.relpath(d, objdir)
        for f in files:
            # Objects of deleted or moved sources linger in the build tree: skip them.
            if f.endswith(".o") and place_of(os.path.join(rel, f)) and \
                    os.path.exists(os.path.join(src, rel, f[:-2] + ".c")):
                objs.append(os.path.join(d, f))
    defs, refs, owner = {}, {}, {}
    for o in sorted(objs):
        m = os.path.relpath(o, objdir)[:-2]
        defs[m], refs[m] = symbols(o)
        for s in defs[m]:
            owner.setdefault(s, m)
    graph = {m: set() for m in defs}
    for m, us in sorted(refs.items()):
        for s in sorted(us):
            t = owner.get(s)
            if not t or t == m:
                continue
            graph[m].add(t)
            a, b = place_of(m), place_of(t)
            if not allowed(a, b):
                failures.append(f"rule {a} -> {b}: {m}.c calls {s}() of {t}.c "
                                f"({a} may use: {', '.join(sorted(USES[a])) or 'nothing'})")
    for comp in tarjan(graph):
        failures.append("link cycle: " + " <-> ".join(comp))
    files = sorted(project_files(src))
    for rel in files:
        a = place_of(rel)
        for inc in includes(src, rel):
            target = resolve(src, inc, rel)
            b = place_of(target) if target else None
            if b and not allowed(a, b):
                failures.append(f"rule {a} -> {b}: {rel} includes \"{inc}\" "
                                f"({a} may use: {', '.join(sorted(USES[a])) or 'nothing'})")
    memo = {}
    for rel in files:
        if place_of(rel) in SQL_PLACES or not rel.startswith("daemon/"):
            continue
        chain = reaches_sqlite(src, rel, memo)
        if chain:
            failures.append("rule SQL only in daemon/domain and daemon/state: " +
                            " -> ".join(chain))
    summary = (f"check-deps: {len(graph)} modules, {sum(len(v) for v in graph.values())} "
               f"link edges, {len(files)} files, {len(failures)} problem(s)")
    return failures, summary


def main():
    objdir = sys.argv[1] if len(sys.argv) > 1 else "build/obj"
    src = sys.argv[2] if len(sys.argv) > 2 else "."
    failures, summary = check(objdir, src)
    for line in failures:
        print("check-deps: " + line)
    print(summary)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
