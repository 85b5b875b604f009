"""A follower catches up from a snapshot of a large store (issue 31): N servers (default
32,770) of 8 devices x 8 ports on 64 sim units, plane-per-ocs, all but two carved into
64-server fabrics (bench/rest_scale.py's cluster).

A topology that large is a changeset of about 100 MB, more than a cluster's log takes in one
change (docs/ha.md), so the store is built as an operator moving from one node to a cluster
builds it (docs/ha.md, "Moving from one node to a cluster"): one ofcd alone makes it, and two
members start from copies of it. A few small writes go through the cluster with log_keep = 4,
so that the log no longer reaches back to an empty store, and etcd compacts its history. Then
the third member starts with an empty store: it finds the log does not reach back, copies the
leader's snapshot (GET /v1/cluster/snapshot), restores it and follows. Measured: from its
start to its applied revision equal to the leader's with every fabric there, the snapshot's
size, and the longest GET /v1/health on the leader meanwhile (the loop held by the snapshot).

Usage: python3 bench/ha_catchup.py BUILD_DIR [SERVERS]
"""
import os
import pathlib
import shutil
import signal
import sqlite3
import sys
import tempfile
import time

import requests

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 32770
os.environ["OFCD_BIN"] = os.path.abspath(os.path.join(BUILD, "ofcd"))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from benchlib import Client, Ofcd  # noqa: E402
from ha_lab import ETCD_BIN, Etcd, make_members, wait_for, wait_leader  # noqa: E402
from rest_scale import (FABRIC, Probes, busy_between, fabric_body, loop_busy,  # noqa: E402
                        topology, wait_all)

PREFIX = "/ofcd/catchup"


def build_store(path):
    """The N-server store, made by one ofcd alone, copied whole to path."""
    d = Ofcd(os.environ["OFCD_BIN"], parent=str(path.parent))
    c = Client(d.port, timeout=600)
    try:
        c.call("PUT", "/v1/topology", topology(N))
        for f in range((N - 2) // FABRIC):
            c.call("POST", "/v1/fabrics?view=summary", fabric_body(f"job{f:04d}", f * FABRIC,
                                                                    FABRIC))
        wait_all(c, "applied")
        nfab = len(c.json("GET", "/v1/fabrics?view=summary")["fabrics"])
        c.close()
        # A consistent single file, whatever the daemon's WAL still holds.
        src = sqlite3.connect(os.path.join(d.dir.name, "ofcd.db"))
        dst = sqlite3.connect(str(path))
        src.backup(dst)
        src.close()
        dst.close()
    finally:
        d.stop()
    return nfab


def caught_up(m, rev):
    """m answers, and has applied the log up to rev."""
    try:
        return m.cluster().get("applied_revision", 0) >= rev
    except requests.RequestException:
        return False


def main():
    if not os.access(ETCD_BIN, os.X_OK):
        print(f"ha_catchup: skipped, {ETCD_BIN} not installed")
        return
    root = pathlib.Path(tempfile.mkdtemp(prefix="ofcd-bench-catchup-"))
    etcd = Etcd(args=["--max-request-bytes", str(8 << 20), "--quota-backend-bytes",
                      str(8 << 30)])
    members = []
    try:
        t0 = time.perf_counter()
        store = root / "built.db"
        nfab = build_store(store)
        built_s = time.perf_counter() - t0
        etcd.start()
        members = make_members(root, etcd, ttl=10, prefix=PREFIX, extra="log_keep = 4\n")
        first, late = members[:2], members[2]
        for m in first:
            shutil.copyfile(store, m.store)
        for m in first:
            m.start(wait=False)
        for m in first:
            m.wait_ready(timeout=120)
        leader = wait_leader(first, timeout=120)
        c = Client(leader.port)
        wait_all(c, "applied")
        # Writes past log_keep: the log no longer reaches back to an empty store.
        spare = fabric_body("small", N - 2, 2)
        for _ in range(6):
            c.json("POST", "/v1/fabrics?wait=30&view=summary", spare)
            c.json("DELETE", "/v1/fabrics/small?wait=30", ok=(200, 202))
        wait_for(lambda: f"{PREFIX}/log_floor" in etcd.keys(f"{PREFIX}/log_"), timeout=30)
        assert etcd.compact(etcd.revision()).status_code == 200
        rev = leader.cluster()["applied_revision"]
        busy0 = loop_busy(c)
        with Probes(leader.port) as probes:
            t0 = time.perf_counter()
            late.start(wait=False)
            wait_for(lambda: caught_up(late, rev), timeout=600, step=0.1)
            caught_s = time.perf_counter() - t0
        busy1 = loop_busy(c)
        over, worst = busy_between(busy0, busy1)
        # Which kinds of callback ran over 100 ms meanwhile, and how often.
        slow = {k: (busy1[(k, float("inf"))] - busy1.get((k, 0.1), 0)) -
                (busy0.get((k, float("inf")), 0) - busy0.get((k, 0.1), 0))
                for k, _ in busy1}
        got = len(Client(late.port).json("GET", "/v1/fabrics?view=summary")["fabrics"])
        assert got == nfab, (got, nfab)
        # The restored store, with what its write-ahead log still holds.
        size = sum(os.path.getsize(p) for p in (late.store, late.store + "-wal")
                   if os.path.exists(p))
        log = late.log()
        assert "restored a snapshot" in log, log[-2000:]
        print(f"ha_catchup_{N}: a follower from an empty store caught up through a snapshot in "
              f"{caught_s:.1f} s (target <= 30): {size / 2**20:.1f} MiB "
              f"store, {nfab} fabrics; the leader's GET /v1/health meanwhile at most "
              f"{max(probes.lat) * 1e3:.0f} ms ({over} of its callbacks over 10 ms, the longest "
              f"under {worst * 1e3:.0f} ms); the store built alone in {built_s:.0f} s",
              flush=True)
        print(f"ha_catchup_{N}: the leader's callbacks over 100 ms by kind: "
              f"{ {k: v for k, v in slow.items() if v} }", flush=True)
    finally:
        for m in members:
            if m.proc and m.proc.poll() is None:
                m.stop(sig=signal.SIGKILL)
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
