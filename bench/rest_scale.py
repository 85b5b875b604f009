"""Scale (issues 12, 31): a change costs what it changes, measured at 130 and 32,770 servers.

A cluster of N servers (8 devices x 8 ports), 64 sim OCS units at zero switching delay,
plane-per-ocs cabling, all but two servers carved into fabrics of 64 servers (2016 circuits
each). Then, in the same daemon:

1. a 2-server fabric (one circuit) on the spare pair, created with ?wait= until applied and
   deleted with ?wait= until removed, 30 times: the create+delete round trip, and the
   reconciler's own work per create+delete (ofcd_reconcile_work_seconds_total, counted by the
   daemon, so neither the client nor the units' switching time is in it);
2. at the largest size only: 32 fabrics of 64 servers deleted, then created back to back and
   deleted again while another process asks GET /v1/health every 2 ms on its own connection;
   the p99 of those probes shows how long a request can wait behind the loop;
3. PUT /v1/topology (with the health probes running: the longest probe says how long the loop
   was held, and the daemon's ofcd_loop_busy_seconds the bound of its longest callback),
   GET /v1/topology (median of 5), the time to carve the fabrics, and the daemon's
   resident memory;
4. at the largest size only: the periodic audit at its default interval (30 s), idle, over
   two rounds: its own work counter (ofcd_reconcile_audit_work_cpu_seconds_total) and the
   daemon's whole CPU time, as shares of a core; the change work counter must not move;
5. at the largest size only: GET /v1/servers?joined=true while one unit keeps a deleted
   fabric's circuits (its batches failed by [debug] faults), which reads that unit's cables
   in one callback: its median time, and the longest callback meanwhile;
6. the start-up on the store left behind: from exec to health answered, and to every fabric
   applied again, and the resident memory after it.

The machine is shared and has 2 cores: figures are medians, the probes' p99 is over every
probe of the burst (a few hundred), and the ratio between the two sizes is taken within one
run. The daemon's own ofcd_loop_busy_seconds tells how many of its callbacks ran over 10 ms
during the burst, and the bucket of the longest.

Usage: [RUNS=3] python3 bench/rest_scale.py BUILD_DIR [SERVERS ...]   (default: 130 32770;
RUNS: medians of that many runs of each size, default 1)
"""
import http.client
import multiprocessing
import os
import statistics
import sys
import time

from benchlib import Client, Ofcd

UNITS = 64
DEVICES = 8
PORTS = 8
FABRIC = 64
REPEATS = 30
BURST = 32
AUDIT_S = 30  # the default [reconcile] audit_interval


def metric(c, name):
    for line in c.call("GET", "/metrics")[1].decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def loop_busy(c):
    """The daemon's ofcd_loop_busy_seconds buckets: {(callback kind, le): cumulative count}."""
    counts = {}
    for line in c.call("GET", "/metrics")[1].decode().splitlines():
        if line.startswith("ofcd_loop_busy_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            kind = line.split('callback="')[1].split('"')[0]
            counts[(kind, float("inf") if le == "+Inf" else float(le))] = int(line.split()[1])
    return counts


def busy_between(before, after):
    """Callbacks over 10 ms between two loop_busy() readings, and the bound of the longest."""
    over, worst = 0, 0.0
    for kind in {k for k, _ in after}:
        les = sorted(le for k, le in after if k == kind)
        diff = {le: after[(kind, le)] - before.get((kind, le), 0) for le in les}
        over += diff[float("inf")] - diff.get(0.01, 0)
        longest = [le for le in les if diff[le] == diff[float("inf")]]
        if diff[float("inf")]:
            worst = max(worst, longest[0])
    return over, worst


def cpu_s(pid):
    """The daemon's CPU time so far (user + system), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Probes:
    """GET /v1/health every 2 ms from another process while the block runs; .lat the latencies."""

    def __init__(self, port):
        self.port = port

    def __enter__(self):
        self.stop = multiprocessing.Event()
        self.q = multiprocessing.Queue()
        self.p = multiprocessing.Process(target=probe, args=(self.port, self.stop, self.q))
        self.p.start()
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.lat = self.q.get(timeout=120)
        self.p.join()


def probe(port, stop, out):
    """GET /v1/health every 2 ms on one keep-alive connection until stop is set."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    lat = []
    while not stop.is_set():
        t0 = time.perf_counter()
        c.request("GET", "/v1/health")
        c.getresponse().read()
        lat.append(time.perf_counter() - t0)
        time.sleep(0.002)
    c.close()
    out.put(lat)


def server(s):
    return f"srv{s:05d}"


def topology(n):
    """n servers of DEVICES x PORTS on UNITS sim units, plane-per-ocs."""
    return {
        "ocs": [{"name": f"ocs{u:02d}", "driver": "sim", "ports": n} for u in range(UNITS)],
        "servers": [{"name": server(s), "devices": DEVICES, "ports_per_device": PORTS}
                    for s in range(n)],
        "wiring": {"rule": "plane-per-ocs"},
    }


def fabric_body(name, first, count):
    return {"name": name, "servers": [server(s) for s in range(first, first + count)]}


def wait_all(c, state):
    deadline = time.time() + 120
    while time.time() < deadline:
        fabrics = c.json("GET", "/v1/fabrics?view=summary")["fabrics"]
        if all(f["state"] == state for f in fabrics):
            return
        time.sleep(0.05)
    raise RuntimeError(f"fabrics did not all reach {state}")


def delete_burst(c):
    """Deletes the first BURST fabrics back to back; the last DELETE waits until all are gone."""
    for f in range(BURST):
        r = c.json("DELETE", f"/v1/fabrics/job{f:04d}" + ("?wait=60" if f == BURST - 1 else ""),
                   ok=(200, 202))
    assert r["state"] == "removed", r


def joined_list(c, out):
    """GET /v1/servers?joined=true while one unit keeps a deleted fabric's circuits (it takes
    no batch): the list reads that unit's cables in one callback. The fabric is back after."""
    c.json("POST", "/v1/ocs/ocs00/faults", {"kind": "fail_batches", "count": 100000})
    c.json("DELETE", "/v1/fabrics/job0000", ok=(200, 202))
    deadline = time.time() + 60
    while not c.json("GET", "/v1/servers?joined=true")["servers"]:
        assert time.time() < deadline, "no server listed as joined"
        time.sleep(0.05)
    busy0, times = loop_busy(c), []
    for _ in range(5):
        t0 = time.perf_counter()
        listed = c.json("GET", "/v1/servers?joined=true")["servers"]
        times.append((time.perf_counter() - t0) * 1e3)
    out["joined_list_ms"] = statistics.median(times)
    out["joined_list_servers"] = len(listed)
    out["joined_list_longest_callback_under_ms"] = busy_between(busy0, loop_busy(c))[1] * 1e3
    c.json("POST", "/v1/ocs/ocs00/faults", {"kind": "fail_batches", "count": 0})
    while c.json("GET", "/v1/servers?joined=true")["servers"]:
        assert time.time() < deadline + 60, "the deleted fabric's circuits stayed"
        time.sleep(0.05)
    c.call("POST", "/v1/fabrics?view=summary", fabric_body("job0000", 0, FABRIC))
    wait_all(c, "applied")


def run(build, n):
    d = Ofcd(f"{build}/ofcd", extra="[debug]\nfaults = true\n")
    c = Client(d.port)
    out = {}
    try:
        topo = topology(n)
        with Probes(d.port) as probes:
            before = loop_busy(c)
            t0, c0 = time.perf_counter(), cpu_s(d.proc.pid)
            c.call("PUT", "/v1/topology", topo)
            out["topology_put_ms"] = (time.perf_counter() - t0) * 1e3
            out["topology_put_cpu_ms"] = (cpu_s(d.proc.pid) - c0) * 1e3
            # The daemon's own account: its longest callback meanwhile (a bucket's bound).
            out["topology_put_longest_callback_under_ms"] = busy_between(
                before, loop_busy(c))[1] * 1e3
        out["topology_put_health_max_ms"] = max(probes.lat) * 1e3
        # The topology's view, what the PUT's reply and If-Match build too (one loop callback).
        views = []
        for _ in range(5):
            t0 = time.perf_counter()
            c.call("GET", "/v1/topology")
            views.append((time.perf_counter() - t0) * 1e3)
        out["topology_get_ms"] = statistics.median(views)
        nfab = (n - 2) // FABRIC
        t0, c0 = time.perf_counter(), cpu_s(d.proc.pid)
        for f in range(nfab):
            c.call("POST", "/v1/fabrics?view=summary", fabric_body(f"job{f:04d}", f * FABRIC, FABRIC))
        out["carve_ms"] = (time.perf_counter() - t0) * 1e3
        out["create_64_ms"] = out["carve_ms"] / nfab
        wait_all(c, "applied")
        out["carve_applied_ms"] = (time.perf_counter() - t0) * 1e3
        # The daemon's CPU per 64-server fabric, request and reconciliation together.
        out["create_64_cpu_ms"] = (cpu_s(d.proc.pid) - c0) * 1e3 / nfab
        out["circuits"] = nfab * FABRIC * (FABRIC - 1) // 2

        spare = fabric_body("small", n - 2, 2)
        marks, cpus, rtt = [], [], []
        for i in range(REPEATS + 4):
            # From one start to the next: the work deferred past a reply counts too.
            marks.append(metric(c, "ofcd_reconcile_work_seconds_total"))
            cpus.append(metric(c, "ofcd_reconcile_work_cpu_seconds_total"))
            t0 = time.perf_counter()
            r = c.json("POST", "/v1/fabrics?wait=30&view=summary", spare)
            assert r["state"] == "applied", r
            r = c.json("DELETE", "/v1/fabrics/small?wait=30", ok=(200, 202))
            assert r["state"] == "removed", r
            rtt.append((time.perf_counter() - t0) * 1e3)
        # Prepared statements and caches warm first; a median leaves out a periodic audit.
        work = [(b - a) * 1e3 for a, b in zip(marks[3:], marks[4:])]
        out["work_ms"] = statistics.median(work)
        out["work_cpu_ms"] = statistics.median([(b - a) * 1e3 for a, b in zip(cpus[3:], cpus[4:])])
        out["rtt_p50_ms"] = statistics.median(rtt[3:-1])

        if nfab >= BURST:
            delete_burst(c)  # frees the servers the burst uses
            time.sleep(0.5)
            busy0 = loop_busy(c)
            with Probes(d.port) as probes:
                t0 = time.perf_counter()
                for f in range(BURST):
                    c.call("POST", "/v1/fabrics?view=summary",
                           fabric_body(f"job{f:04d}", f * FABRIC, FABRIC))
                out["burst_create_ms"] = (time.perf_counter() - t0) * 1e3
                wait_all(c, "applied")
                out["burst_applied_ms"] = (time.perf_counter() - t0) * 1e3
                t1 = time.perf_counter()
                delete_burst(c)
                out["burst_removed_ms"] = (time.perf_counter() - t1) * 1e3
            lat = probes.lat
            over, worst = busy_between(busy0, loop_busy(c))
            out["health_n"] = len(lat)
            out["health_p50_ms"] = percentile(lat, 50) * 1e3
            out["health_p99_ms"] = percentile(lat, 99) * 1e3
            out["health_max_ms"] = max(lat) * 1e3
            out["burst_callbacks_over_10ms"] = over
            out["burst_longest_callback_under_ms"] = worst * 1e3
            # The burst's fabrics back, so that the audit and the start-up see the whole cluster.
            for f in range(BURST):
                c.call("POST", "/v1/fabrics?view=summary", fabric_body(f"job{f:04d}", f * FABRIC, FABRIC))
            wait_all(c, "applied")
            time.sleep(AUDIT_S)  # the audit round the burst started, out of the window
            w0 = metric(c, "ofcd_reconcile_work_cpu_seconds_total")
            a0 = metric(c, "ofcd_reconcile_audit_work_cpu_seconds_total")
            c0, t0 = cpu_s(d.proc.pid), time.perf_counter()
            time.sleep(2 * AUDIT_S + 1)
            span = time.perf_counter() - t0
            out["idle_audit_core_pct"] = (
                (metric(c, "ofcd_reconcile_audit_work_cpu_seconds_total") - a0) / span * 100)
            out["idle_daemon_core_pct"] = (cpu_s(d.proc.pid) - c0) / span * 100
            out["idle_change_work_ms"] = (
                (metric(c, "ofcd_reconcile_work_cpu_seconds_total") - w0) * 1e3)
            joined_list(c, out)
        out["rss_mib"] = d.rss_mib()
        c.close()
        out["startup_health_s"] = d.restart()
        c = Client(d.port)
        t0 = time.perf_counter()
        wait_all(c, "applied")
        out["startup_applied_s"] = out["startup_health_s"] + time.perf_counter() - t0
        out["startup_rss_mib"] = d.rss_mib()
    finally:
        d.stop()
    return out


def median_run(build, n, runs):
    """Every figure the median of runs runs (the machine is shared and noisy)."""
    outs = [run(build, n) for _ in range(runs)]
    return {k: statistics.median(o[k] for o in outs) if isinstance(outs[0][k], float)
            else outs[0][k] for k in outs[0]}


def main():
    build = sys.argv[1]
    sizes = [int(a) for a in sys.argv[2:]] or [130, 32770]
    runs = int(os.environ.get("RUNS", "1"))
    res = {n: median_run(build, n, runs) for n in sizes}
    for n, r in res.items():
        for k, v in r.items():
            print(f"scale_{n}_{k}: {v:.2f}" if isinstance(v, float) else f"scale_{n}_{k}: {v}")
    lo, hi = min(sizes), max(sizes)
    if lo != hi:
        for key in ("work_ms", "work_cpu_ms"):
            ratio = res[hi][key] / res[lo][key]
            print(f"scale_{key}_ratio_{hi}_vs_{lo}: {ratio:.2f} (target <= 1.5; "
                  f"{res[hi][key]:.3f} ms at {hi}, target <= 0.3 ms)")
    print(f"scale_load_average: {os.getloadavg()[0]:.1f} (2 cores, shared)")
    big = res[hi]
    print(f"scale_{hi}_summary: rtt p50 {big['rtt_p50_ms']:.2f} ms (target <= 5), "
          f"health p99 {big.get('health_p99_ms', float('nan')):.2f} ms (target <= 20), "
          f"PUT /v1/topology {big['topology_put_ms'] / 1e3:.1f} s (target <= 5), longest "
          f"health probe meanwhile {big['topology_put_health_max_ms']:.0f} ms (target <= 100; "
          f"its longest callback under {big['topology_put_longest_callback_under_ms']:.0f} ms), "
          f"idle audit {big.get('idle_audit_core_pct', float('nan')):.2f}% of a core "
          f"(target <= 1), rss {big['rss_mib']:.1f} MiB (target <= 512), start-up "
          f"{big['startup_applied_s']:.1f} s (target <= 5)")


if __name__ == "__main__":
    main()
