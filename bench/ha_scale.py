"""A replicated write costs what it changes (issue 24): cluster create p50 at 130, 2,050 and
8,194 servers, against the cluster's own figure at 130 and a bare guarded etcd txn of the same
size in the same run; the CPU a follower spends applying a 1-circuit change.

For each N: three ofcd on one three-member etcd (tests/integration/ha_lab.py), a topology of N
servers of 8 devices x 8 ports on 16 sim units (plane-per-ocs), all but two servers carved into
64-server fabrics, then PAIRS creates of a 2-server fabric (1 circuit) and deletes without
?wait=, on one keep-alive connection to the leader: p50 and p99 of the create. Beside them, in
the same run, PAIRS bare txns through etcd's JSON gateway like an append of the same size (a
put guarded by the create revision of a key, value as large as the create's log entry), then
as many again while two watches on the other etcd members follow them, as the followers
follow the log. Each follower's CPU time (/proc/PID/stat, utime + stime) over those pairs,
divided by the changes it applied, is its apply cost per change. The leader's
ofcd_cluster_write_stage_seconds over the same pairs says where a write's time goes: its handler,
the log's round trip through etcd, the apply.

Usage: python3 bench/ha_scale.py BUILD_DIR [N ...]   (default 130 2050 8194)
"""
import base64
import json
import os
import pathlib
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

import requests

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
SIZES = [int(a) for a in sys.argv[2:]] or [130, 2050, 8194]
os.environ["OFCD_BIN"] = os.path.abspath(os.path.join(BUILD, "ofcd"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))

from benchlib import Client  # noqa: E402
from ha_lab import ETCD_BIN, Etcd, make_members, topology, wait_for, wait_leader  # noqa: E402

PAIRS = 200
WARMUP = 20
CARVE = 64


def percentile(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def carve(c, n):
    """All but two servers in 64-server fabrics (the last one smaller)."""
    names = [f"s{i}" for i in range(2, n)]
    for k in range(0, len(names), CARVE):
        part = names[k:k + CARVE]
        if len(part) < 2:
            break
        status, text = c.call("POST", "/v1/fabrics", {"name": f"bulk{k // CARVE}", "servers": part})
        assert status == 201, text[:200]


def creates(c, label, n, lat):
    for i in range(n):
        t0 = time.perf_counter()
        status, text = c.call("POST", "/v1/fabrics",
                              {"name": f"{label}{i}", "servers": ["s0", "s1"]})
        lat.append(time.perf_counter() - t0)
        assert status == 201, text[:200]
        status, text = c.call("DELETE", f"/v1/fabrics/{label}{i}")
        assert status in (200, 202), text[:200]


def stages(member):
    """{stage: (sum seconds, count)} of the member's ofcd_cluster_write_stage_seconds."""
    out = {}
    for line in member.get("/metrics").text.splitlines():
        for part in ("_sum", "_count"):
            head = f"ofcd_cluster_write_stage_seconds{part}{{stage=\""
            if line.startswith(head):
                stage = line[len(head):line.index('"', len(head))]
                s, n = out.get(stage, (0.0, 0))
                v = float(line.split()[-1])
                out[stage] = (s + v, n) if part == "_sum" else (s, n + int(v))
    return out


def etcd_cpu_s(etcd):
    return sum(cpu_s(p.pid) for p in etcd.procs if p and p.poll() is None)


def last_entry_len(etcd, prefix):
    """Bytes of the newest entry of the log (the value of its last key)."""
    keys = etcd.keys(prefix)
    v = etcd.values(prefix)
    return len(v[keys[-1]]) if keys else 0


class Watcher(threading.Thread):
    """A watch on a prefix through another member's gateway, read to its end, as a follower's."""

    def __init__(self, url, prefix):
        super().__init__(daemon=True)
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        self.r = requests.post(url + "/v3/watch", stream=True, timeout=60,
                               json={"create_request": {"key": Etcd.b64(prefix),
                                                        "range_end": Etcd.b64(end)}})
        self.events = 0

    def run(self):
        try:
            for line in self.r.iter_lines():
                self.events += line.count(b'"kv"')
        except (requests.RequestException, AttributeError):
            pass  # closed at the end

    def close(self):
        self.r.close()


def bare_txns(etcd, n, size, lat, label, watched=False):
    """Guarded puts like an append, through the same gateway, on one keep-alive connection;
    watched: while two watches (on the other members) follow them, as the followers do."""
    import urllib.parse
    u = urllib.parse.urlsplit(etcd.client[0])
    c = Client(u.port)
    # Created here, once per call: the put's revision is its create revision.
    guard = f"/bench/leader{label}{'w' if watched else ''}"
    status, text = c.call("POST", "/v3/kv/put", {"key": Etcd.b64(guard), "value": Etcd.b64("x")})
    rev = json.loads(text)["header"]["revision"]
    value = base64.b64encode(b"x" * size).decode()
    log = f"/bench/log{label}{'w' if watched else ''}/"
    watchers = [Watcher(url, log) for url in etcd.client[1:3]] if watched else []
    for w in watchers:
        w.start()
    for i in range(n):
        body = {"compare": [{"key": Etcd.b64(guard), "target": "CREATE",
                             "result": "EQUAL", "create_revision": rev}],
                "success": [{"request_put": {"key": Etcd.b64(f"{log}{i:08d}"),
                                             "value": value}}]}
        t0 = time.perf_counter()
        status, text = c.call("POST", "/v3/kv/txn", body)
        lat.append(time.perf_counter() - t0)
        assert json.loads(text).get("succeeded"), text
    c.close()
    if watchers:
        wait_for(lambda: all(w.events >= n for w in watchers), timeout=30)
    for w in watchers:
        w.close()


def one_size(etcd, root, n):
    prefix = f"/ofcd/scale{n}"
    # The topology PUT holds the leader's loop (about 8 s at 8,192 servers): the lease must
    # outlast it three times over (docs/ha.md).
    members = make_members(root / f"m{n}", etcd, ttl=10 if n < 4000 else 40, prefix=prefix)
    try:
        for m in members:
            m.start()
        leader = wait_leader(members, timeout=30)
        r = leader.put("/v1/topology", topology(n, 8, 8, 16), validate=False, timeout=600)
        assert r.status_code == 200, r.text[:200]
        c = Client(leader.port)
        carve(c, n)
        rev = leader.cluster()["applied_revision"]
        for m in members:
            wait_for(lambda m=m: m.cluster()["applied_revision"] >= rev, timeout=600, step=0.2)
        creates(c, "warm", WARMUP, [])
        followers = [m for m in members if m is not leader]
        cpu0 = {m.name: cpu_s(m.proc.pid) for m in members}
        etcd0 = etcd_cpu_s(etcd)
        rev0 = etcd.revision()
        lat = []
        st0 = stages(leader)
        creates(c, "p", PAIRS, lat)
        st1 = stages(leader)
        # Mean per write (creates and deletes alike), ms: where the leader's time goes.
        stage_ms = {k: (st1[k][0] - st0.get(k, (0, 0))[0]) /
                    max(st1[k][1] - st0.get(k, (0, 0))[1], 1) * 1e3 for k in st1}
        rev = leader.cluster()["applied_revision"]
        for m in followers:
            wait_for(lambda m=m: m.cluster()["applied_revision"] >= rev, timeout=60)
        changes = max(etcd.revision() - rev0, 1)
        etcd_ms = (etcd_cpu_s(etcd) - etcd0) / changes * 1e3
        apply_ms = [(cpu_s(m.proc.pid) - cpu0[m.name]) / changes * 1e3 for m in followers]
        leader_ms = (cpu_s(leader.proc.pid) - cpu0[leader.name]) / changes * 1e3
        size = last_entry_len(etcd, prefix + "/log/")
        bare, watched = [], []
        etcd0 = etcd_cpu_s(etcd)
        bare_txns(etcd, PAIRS, size, bare, n)
        bare_etcd_ms = (etcd_cpu_s(etcd) - etcd0) / PAIRS * 1e3
        bare_txns(etcd, PAIRS, size, watched, n, watched=True)
        c.close()
        return {
            "p50": statistics.median(lat) * 1e3, "p99": percentile(lat, 99) * 1e3,
            "bare50": statistics.median(bare) * 1e3, "bare_mean": statistics.mean(bare) * 1e3, "entry": size, "changes": changes,
            "watched50": statistics.median(watched) * 1e3,
            "apply_ms": max(apply_ms), "leader_ms": leader_ms, "etcd_ms": etcd_ms,
            "bare_etcd_ms": bare_etcd_ms, "stage_ms": stage_ms,
            "reloads": sum(float(line.split()[-1]) for m in members
                           for line in m.get("/metrics").text.splitlines()
                           if line.startswith("ofcd_desired_reloads_total")),
        }
    finally:
        for m in members:
            if m.proc and m.proc.poll() is None:
                m.stop(sig=signal.SIGKILL)


def main():
    if not os.access(ETCD_BIN, os.X_OK):
        print(f"ha_scale: skipped, {ETCD_BIN} not installed")
        return
    root = pathlib.Path(tempfile.mkdtemp(prefix="ofcd-bench-hascale-"))
    etcd = Etcd(args=["--max-request-bytes", str(8 << 20), "--quota-backend-bytes",
                      str(8 << 30)])
    try:
        etcd.start()
        base = None
        for n in SIZES:
            x = one_size(etcd, root, n)
            base = base or x["p50"]
            print(f"ha_scale_{n}: cluster create p50 {x['p50']:.2f} ms, p99 {x['p99']:.2f} ms "
                  f"({x['p50'] / base:.2f} x the first size's); bare guarded etcd txn of "
                  f"{x['entry']} bytes p50 {x['bare50']:.2f} ms (create / bare "
                  f"{x['p50'] / x['bare50']:.2f}; watched by two, p50 {x['watched50']:.2f} ms, "
                  f"create / watched {x['p50'] / x['watched50']:.2f}); follower apply "
                  f"{x['apply_ms']:.3f} ms of CPU per change ({x['changes']} etcd revisions); "
                  f"desired reloads {x['reloads']:.0f} ({PAIRS} creates of a 2-server fabric)",
                  flush=True)
            print(f"ha_scale_{n}_cpu: per change, leader {x['leader_ms']:.2f} ms, each follower "
                  f"{x['apply_ms']:.2f} ms, the three etcd {x['etcd_ms']:.2f} ms (a bare txn: "
                  f"{x['bare_etcd_ms']:.2f} ms), on {os.cpu_count()} CPUs", flush=True)
            st = x["stage_ms"]
            print(f"ha_scale_{n}_stages: the leader's write, mean ms per write: handler "
                  f"{st.get('handler', 0):.2f}, log round trip {st.get('log', 0):.2f} (a bare "
                  f"txn's mean {x['bare_mean']:.2f}), apply {st.get('apply', 0):.2f}", flush=True)
    finally:
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
