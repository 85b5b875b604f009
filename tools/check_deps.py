#!/usr/bin/env python3
"""Layering check (make check-deps).

Builds the link-level graph of the object files (module A -> module B when A
references a symbol B defines, from `nm`), and fails when
  - the graph has a cycle between modules that is not listed as allowed,
  - a file under daemon/api*.c includes sqlite3.h (directly or via store.h),
  - a layer uses one it may not (USES below: planner and ocs_drivers use
    nothing else, common nothing else, the agent and the CLI only common).
Usage: check_deps.py OBJDIR
"""
import os
import re
import subprocess
import sys

# Which layers each layer may use (its own included).
USES = {
    "planner": {"planner"},
    "ocs_drivers": {"ocs_drivers"},
    "common": {"common"},
    "daemon": {"daemon", "common", "planner", "ocs_drivers"},
    "agent": {"agent", "common"},
    "cli": {"cli", "common"},
}


def module_of(obj, root):
    rel = os.path.relpath(obj, root)
    return rel[:-2] if rel.endswith(".o") else rel


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


def includes_sqlite(path, seen=None):
    """True when path includes sqlite3.h, directly or through a project header."""
    seen = seen if seen is not None else set()
    if path in seen or not os.path.exists(path):
        return False
    seen.add(path)
    with open(path, encoding="utf-8") as f:
        for m in re.finditer(r'#include\s+[<"]([^>"]+)[>"]', f.read()):
            inc = m.group(1)
            if inc == "sqlite3.h":
                return True
            for d in ("daemon", "common", "planner", "ocs_drivers", "agent", os.path.dirname(path)):
                cand = os.path.join(d, inc)
                if os.path.exists(cand) and includes_sqlite(cand, seen):
                    return True
    return False


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "build/obj"
    objs = []
    for d, _, files in os.walk(root):
        for f in files:
            rel = os.path.relpath(d, root)
            # Objects of deleted or moved sources linger in the build tree: skip them.
            if f.endswith(".o") and not rel.startswith(("tests", "bench", "gen")) and \
                    os.path.exists(os.path.join(rel, f[:-2] + ".c")):
                objs.append(os.path.join(d, f))
    defs, refs = {}, {}
    owner = {}
    for o in sorted(objs):
        m = module_of(o, root)
        defs[m], refs[m] = symbols(o)
        for s in defs[m]:
            owner[s] = m
    graph = {m: set() for m in defs}
    for m, us in refs.items():
        for s in us:
            t = owner.get(s)
            if t and t != m:
                graph[m].add(t)
    failures = []
    for comp in tarjan(graph):
        failures.append("link cycle: " + " <-> ".join(comp))
    for m, targets in sorted(graph.items()):
        allowed = USES.get(m.split("/")[0])
        for t in sorted(targets):
            if allowed is not None and t.split("/")[0] not in allowed:
                failures.append(f"layer: {m} uses {t}")
    for f in sorted(os.listdir("daemon/api")):
        if f.endswith(".c") and includes_sqlite(os.path.join("daemon/api", f)):
            failures.append(f"SQL in the API layer: daemon/api/{f} includes sqlite3.h")
    for line in failures:
        print("check-deps: " + line)
    print(f"check-deps: {len(graph)} modules, {sum(len(v) for v in graph.values())} edges, "
          f"{len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
