"""High availability (issue 15, docs/ha.md): failover time, and the cost of a replicated write.

Everything runs on loopback with private ports and directories, through the helpers of the
HA integration tests (tests/integration/ha_lab.py): one three-member etcd (3.4, heartbeat
50 ms, election timeout 500 ms; etcd grants a lease of at least about 1.5 x its election
timeout, so with these settings a lease of 1 s is granted as asked) and three ofcd on it.

1. Failover: the leader is killed with SIGKILL; a client then tries a write (POST /v1/ocs of a
   new sim unit) every 10 ms against the surviving members in turn, following 307s, until one
   is accepted (2xx). The time from the kill to that acceptance, with lease_ttl = 1 and 2,
   REPS times each (the killed member is restarted and rejoins as a follower between
   repetitions; the kill falls at a random moment of the lease's renewal period).
2. Write cost: a 2-server fabric (1 circuit; 64 servers x 2 devices, plane-per-ocs, 2 sim
   units) created then deleted without ?wait=, on one keep-alive connection, in cluster mode
   (the three members, requests sent to the leader) and in single-node mode (one ofcd without
   [cluster]), in the same run, in alternating blocks so that the machine's load falls on both:
   p50 and p99 of the create, and sequential throughput (BURST creates back to back, timed).
   The same with 50 ms of quiet before each request (the reconciler's state updates then go
   to the log in an entry of their own instead of riding along with the next write), and
   with the two followers' ofcd paused (SIGSTOP), so that they do not apply the log beside
   the leader on this machine's cores. Also printed, to explain the difference: etcd's WAL
   fsync time (its /metrics), etcd revisions per create+delete, a bare etcd put and a
   guarded txn like an append through the JSON gateway with the CPU time the three etcd
   members spend on it, and an fsync on the disk the stores are on.
3. A large change: a topology PUT of BIG_SERVERS servers (8 devices x 8 ports, 16 sim units),
   about 12 MB of changeset, which the log takes in parts of 1.1 MB: the time to the 2xx
   in single-node and in cluster mode (lease_ttl BIG_TTL, so that the leader's loop, held
   by the handler, keeps its lease), the number of log entries, the time until every member
   has it, and the longest the leader's loop was held (its busy-loop warning).

Usage: python3 bench/ha.py BUILD_DIR   (build/ofcd must exist)
"""
import http.client
import json
import os
import pathlib
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import urllib.parse

BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
os.environ["OFCD_BIN"] = os.path.abspath(os.path.join(BUILD, "ofcd"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))

from benchlib import Client, fsync_cost_ms  # noqa: E402
from conftest import Daemon  # noqa: E402
from ha_lab import Etcd, ETCD_BIN, make_members, topology, wait_for, wait_leader  # noqa: E402

REPS = 5              # failovers per lease_ttl
TTLS = (1, 2)
SERVERS = 64
BLOCKS = 4            # alternating single / cluster blocks
PAIRS = 50            # create+delete pairs per block
WARMUP = 10
BURST = 32            # disjoint 2-server fabrics created back to back
ROUNDS = 3
IDLE = 50             # create+delete pairs with a quiet gap before each request
GAP = 0.05
READS = 200           # plain and consistent reads of the fabric list, alternating
BIG_SERVERS = 4096
BIG_TTL = 15


def percentile(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def post_following(url, path, body, timeout=1.0, hops=3):
    """POST on a fresh connection, following 307s; (status, body text, where answered)."""
    for _ in range(hops):
        u = urllib.parse.urlsplit(url)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        try:
            c.request("POST", path, body=json.dumps(body).encode(),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            text = r.read().decode(errors="replace")
            if r.status == 307:
                loc = urllib.parse.urlsplit(r.getheader("Location"))
                url, path = f"{loc.scheme}://{loc.netloc}", loc.path + (
                    "?" + loc.query if loc.query else "")
                continue
            return r.status, text, url
        finally:
            c.close()
    return 0, "too many redirects", url


def rm_members(members):
    for m in members:
        if m.proc is not None and m.proc.poll() is None:
            m.stop(sig=signal.SIGKILL)


def settled(members, leader):
    """Every member runs, agrees on the leader and has applied the same revision."""
    views = [m.cluster() for m in members]
    revs = {x["name"]: x["applied_revision"] for x in views[0]["members"]}
    return (len(revs) == len(members) and len(set(revs.values())) == 1
            and all(v["leader"] == leader.name for v in views))


def failover(etcd, root, ttl):
    members = make_members(root / f"fo{ttl}", etcd, ttl=ttl, prefix=f"/ofcd/bench-fo{ttl}")
    times, notes = [], []
    try:
        for m in members:
            m.start()
        leader = wait_leader(members, timeout=30)
        r = leader.put("/v1/topology", topology(8), validate=False)
        assert r.status_code == 200, r.text
        for rep in range(REPS):
            leader = wait_leader(members, timeout=30)
            wait_for(lambda: settled(members, leader), timeout=30)
            # a random moment of the renewal period (every ttl/3)
            time.sleep(0.3 + random.uniform(0, ttl / 3))
            survivors = [m for m in members if m is not leader]
            name = f"fo{ttl}-{rep}"
            body = {"name": name, "driver": "sim", "ports": 4}
            seen = {}
            t0 = time.perf_counter()
            leader.kill9()
            i = 0
            while True:
                m = survivors[i % len(survivors)]
                i += 1
                try:
                    status, text, where = post_following(m.url(""), "/v1/ocs", body)
                except (OSError, http.client.HTTPException) as e:
                    status, text = -1, type(e).__name__
                if 200 <= status < 300 or status == 409:
                    dt = time.perf_counter() - t0
                    break
                if status < 0:
                    key = f"no answer ({text})"  # mostly a 307 to the killed leader
                else:
                    try:
                        err = json.loads(text)["error"]
                        key = f"{status} {err['code']}: {err['message']}"
                    except (ValueError, KeyError, TypeError):
                        key = f"{status} {text[:80]}"
                seen[key] = seen.get(key, 0) + 1
                if time.perf_counter() - t0 > 30:
                    raise RuntimeError(f"no write accepted 30 s after the kill: {seen}")
                time.sleep(0.01)
            new = next((m.name for m in survivors if m.url("") == where), where)
            times.append(dt)
            notes.append(f"{dt * 1e3:.0f} ms ({'409, an earlier try got in' if status == 409 else new}; "
                         f"before: {', '.join(f'{k} x{v}' for k, v in sorted(seen.items()))})")
            print(f"  ttl {ttl} rep {rep}: killed {leader.name}, write accepted after {notes[-1]}",
                  flush=True)
            leader.start()
            wait_for(lambda: leader.cluster()["role"] == "follower", timeout=30)
        return times
    finally:
        rm_members(members)


def etcd_metric(etcd, names):
    """Sum over the etcd members of each named sample in their /metrics."""
    out = dict.fromkeys(names, 0.0)
    for c in etcd.client:
        u = urllib.parse.urlsplit(c)
        h = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
        h.request("GET", "/metrics")
        for line in h.getresponse().read().decode().splitlines():
            k = line.split(" ")[0]
            if k in out:
                out[k] += float(line.split()[1])
        h.close()
    return out


def etcd_put_ms(etcd, n=200):
    u = urllib.parse.urlsplit(etcd.client[0])
    c = Client(u.port)
    lat = []
    for i in range(n):
        t0 = time.perf_counter()
        c.call("POST", "/v3/kv/put", {"key": Etcd.b64("/bench/put"), "value": Etcd.b64(str(i))})
        lat.append(time.perf_counter() - t0)
    # A txn like a leader's append: guarded by the create revision of a key, putting ~1.2 KB.
    _, text = c.call("POST", "/v3/kv/put", {"key": Etcd.b64("/bench/leader"),
                                           "value": Etcd.b64("x")})
    rev = json.loads(text)["header"]["revision"]
    txn = []
    cpu0 = etcd_cpu_s(etcd)
    for i in range(n):
        body = {"compare": [{"key": Etcd.b64("/bench/leader"), "target": "CREATE",
                             "result": "EQUAL", "create_revision": rev}],
                "success": [{"request_put": {"key": Etcd.b64(f"/bench/log/{i:08d}"),
                                             "value": Etcd.b64("x" * 1200)}}]}
        t0 = time.perf_counter()
        _, text = c.call("POST", "/v3/kv/txn", body)
        txn.append(time.perf_counter() - t0)
        assert json.loads(text).get("succeeded"), text
    cpu = (etcd_cpu_s(etcd) - cpu0) / n
    c.close()
    return (statistics.median(lat) * 1e3, percentile(lat, 99) * 1e3,
            statistics.median(txn) * 1e3, percentile(txn, 99) * 1e3, cpu * 1e3)


def etcd_cpu_s(etcd):
    """CPU time (user + system) the etcd members have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in etcd.procs:
        with open(f"/proc/{p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def pairs(c, label, n, lat, gap=0.0):
    for i in range(n):
        k = i % (SERVERS // 2)
        name = f"{label}-{i}"
        time.sleep(gap)
        t0 = time.perf_counter()
        c.call("POST", "/v1/fabrics", {"name": name, "servers": [f"s{2 * k}", f"s{2 * k + 1}"]})
        lat.append(time.perf_counter() - t0)
        time.sleep(gap)
        c.call("DELETE", f"/v1/fabrics/{name}")


def burst(c, label):
    t0 = time.perf_counter()
    for k in range(BURST):
        c.call("POST", "/v1/fabrics", {"name": f"{label}-{k}",
                                        "servers": [f"s{2 * k}", f"s{2 * k + 1}"]})
    dt = time.perf_counter() - t0
    for k in range(BURST):
        c.call("DELETE", f"/v1/fabrics/{label}-{k}")
    return dt


def write_cost(etcd, root):
    (root / "single").mkdir()
    single = Daemon(root / "single")
    members = make_members(root / "lat", etcd, ttl=2, prefix="/ofcd/bench-lat")
    try:
        single.start()
        for m in members:
            m.start()
        leader = wait_leader(members, timeout=30)
        for d in (single, leader):
            r = d.put("/v1/topology", topology(SERVERS), validate=False)
            assert r.status_code == 200, r.text
        clients = {"single": Client(single.port), "cluster": Client(leader.port)}
        lat = {"single": [], "cluster": []}
        for mode, c in clients.items():
            pairs(c, f"warm-{mode}", WARMUP, [])
        wal = ("etcd_disk_wal_fsync_duration_seconds_sum", "etcd_disk_wal_fsync_duration_seconds_count")
        cluster_s, ms0, rev_pairs = 0.0, etcd_metric(etcd, wal), 0
        for b in range(BLOCKS):
            for mode, c in clients.items():
                if mode == "cluster":
                    rev0, t0 = etcd.revision(), time.perf_counter()
                pairs(c, f"b{b}", PAIRS, lat[mode])
                if mode == "cluster":
                    cluster_s += time.perf_counter() - t0
                    rev_pairs += etcd.revision() - rev0
        ms1 = etcd_metric(etcd, wal)
        idle = {"single": [], "cluster": []}
        for mode, c in clients.items():
            pairs(c, f"idle-{mode}", IDLE, idle[mode], gap=GAP)
        tput = {"single": [], "cluster": []}
        for r in range(ROUNDS):
            for mode, c in clients.items():
                tput[mode].append(BURST / burst(c, f"r{r}"))
        # The leader's fabric list from its store, and confirmed by etcd first (?consistent).
        reads = {"plain": [], "consistent": []}
        for i in range(2 * READS):
            mode = ("plain", "consistent")[i % 2]
            t0 = time.perf_counter()
            clients["cluster"].call("GET", "/v1/fabrics" + ("?consistent=true" if i % 2 else ""))
            reads[mode].append(time.perf_counter() - t0)
        for c in clients.values():
            c.close()
        n_pairs = BLOCKS * PAIRS
        fsyncs = ms1[wal[1]] - ms0[wal[1]]
        fsync_ms = (ms1[wal[0]] - ms0[wal[0]]) / fsyncs * 1e3 if fsyncs else 0.0
        # The same creates with the followers' ofcd paused (SIGSTOP): etcd still replicates to
        # its three members, but no follower applies the log beside the leader on this machine.
        paused = []
        followers = [m for m in members if m is not leader]
        for m in followers:
            m.proc.send_signal(signal.SIGSTOP)
        try:
            pairs(clients["cluster"], "paused", 2 * PAIRS, paused)
        finally:
            for m in followers:
                m.proc.send_signal(signal.SIGCONT)
        return lat, tput, idle, {
            "paused_p50": statistics.median(paused) * 1e3,
            "read_p50": {m: statistics.median(v) * 1e3 for m, v in reads.items()},
            "etcd_rev_per_pair": rev_pairs / n_pairs,
            "etcd_wal_fsyncs_per_pair": fsyncs / n_pairs,
            "etcd_wal_fsync_ms": fsync_ms,
            "cluster_pairs_s": cluster_s,
            "leader_alive": all(m.proc.poll() is None for m in members),
        }
    finally:
        single.stop()
        rm_members(members)


def large_change(etcd, root):
    body = topology(BIG_SERVERS, 8, 8, 16)
    (root / "big-single").mkdir()
    single = Daemon(root / "big-single")
    single.start()
    try:
        t0 = time.perf_counter()
        r = single.put("/v1/topology", body, validate=False)
        single_s = time.perf_counter() - t0
        assert r.status_code == 200, r.text[:200]
    finally:
        single.stop()
    members = make_members(root / "big", etcd, ttl=BIG_TTL, prefix="/ofcd/bench-big")
    try:
        for m in members:
            m.start()
        leader = wait_leader(members, timeout=30)
        before = len(etcd.keys("/ofcd/bench-big/log/"))
        t0 = time.perf_counter()
        r = leader.put("/v1/topology", body, validate=False)
        cluster_s = time.perf_counter() - t0
        assert r.status_code == 200, r.text[:200]
        for m in members:
            wait_for(lambda: len(m.get("/v1/servers").json()["servers"]) == BIG_SERVERS,
                     timeout=120, step=0.1)
        everywhere_s = time.perf_counter() - t0
        entries = len(etcd.keys("/ofcd/bench-big/log/")) - before
        held = [int(w.split("busy ")[1].split(" ms")[0]) for w in leader.log().splitlines()
                if "the loop was busy" in w]
        return single_s, cluster_s, everywhere_s, entries, max(held, default=0)
    finally:
        rm_members(members)


def main():
    if not os.access(ETCD_BIN, os.X_OK):
        print(f"ha: skipped, {ETCD_BIN} not installed")
        return
    random.seed()
    root = pathlib.Path(tempfile.mkdtemp(prefix="ofcd-bench-ha-"))
    etcd = Etcd()
    try:
        etcd.start()
        put50, put99, txn50, txn99, txn_cpu = etcd_put_ms(etcd)
        print(f"etcd_put_json_gateway: p50 {put50:.2f} ms, p99 {put99:.2f} ms; a guarded txn "
              f"putting 1.2 KB (like an append): p50 {txn50:.2f} ms, p99 {txn99:.2f} ms, "
              f"{txn_cpu:.2f} ms of CPU over the etcd members "
              f"(one keep-alive connection, 3 members on loopback, {os.cpu_count()} CPUs)")
        print(f"fsync_cost_disk: {fsync_cost_ms(str(root)):.2f} ms (4 KiB write + fdatasync in the "
              "stores' directory)")
        lat, tput, idle, x = write_cost(etcd, root)
        p50 = {m: statistics.median(v) * 1e3 for m, v in lat.items()}
        for mode in ("single", "cluster"):
            v = lat[mode]
            print(f"fabric_create_{mode}: p50 {p50[mode]:.2f} ms, p99 {percentile(v, 99) * 1e3:.2f} ms, "
                  f"max {max(v) * 1e3:.2f} ms ({len(v)} creates of a 2-server fabric, no ?wait=); "
                  f"sequential {statistics.median(tput[mode]):.0f} creates/s "
                  f"(median of {ROUNDS} bursts of {BURST}: "
                  f"{', '.join(f'{t:.0f}' for t in tput[mode])})")
        i50 = {m: statistics.median(v) * 1e3 for m, v in idle.items()}
        print(f"fabric_create_idle: single p50 {i50['single']:.2f} ms, cluster p50 {i50['cluster']:.2f} ms, "
              f"ratio {i50['cluster'] / i50['single']:.2f} ({IDLE} creates each, {GAP * 1e3:.0f} ms "
              "of quiet before each create and delete: nothing else queued for etcd)")
        print(f"fabric_create_ratio: cluster p50 / single p50 = {p50['cluster'] / p50['single']:.2f} "
              "(target <= 3)")
        print(f"fabric_create_cluster_followers_paused: p50 {x['paused_p50']:.2f} ms "
              f"({2 * PAIRS} creates, the two followers' ofcd stopped with SIGSTOP; etcd unchanged)")
        r50 = x["read_p50"]
        print(f"fabric_list_on_leader: plain p50 {r50['plain']:.2f} ms, ?consistent=true p50 "
              f"{r50['consistent']:.2f} ms ({READS} each, alternating; the consistent one waits "
              "for etcd's linearizable read of the leader key)")
        print(f"etcd_per_create_delete: {x['etcd_rev_per_pair']:.1f} revisions, "
              f"{x['etcd_wal_fsyncs_per_pair']:.1f} WAL fsyncs over the 3 members, "
              f"{x['etcd_wal_fsync_ms']:.2f} ms per WAL fsync (mean)")
        single_s, cluster_s, everywhere_s, entries, held = large_change(etcd, root)
        print(f"large_change: topology PUT of {BIG_SERVERS} servers (8 x 8 ports): single "
              f"{single_s:.2f} s; cluster {cluster_s:.2f} s to the 2xx in {entries} log entries, "
              f"{everywhere_s:.2f} s until every member has it; the leader's loop held at most "
              f"{held} ms at a time (lease_ttl {BIG_TTL})", flush=True)
        for ttl in TTLS:
            t = failover(etcd, root, ttl)
            print(f"failover_ttl{ttl}: median {statistics.median(t):.2f} s, max {max(t):.2f} s, "
                  f"min {min(t):.2f} s over {len(t)} kills -9 of the leader"
                  + (" (target < 2 s)" if ttl == 1 else ""), flush=True)
    finally:
        etcd.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
