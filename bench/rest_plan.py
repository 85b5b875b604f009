"""REST planning benchmarks (issue 3).

1. POST /v1/plan for M = 65, P = 8: mean request latency, and the share of it spent
   planning (the in-process policy time that build/bench/bench_plan measures).
2. A 1024-server cluster (8 devices x 8 ports, 64 OCS units, plane-per-ocs cabling)
   carved into 16 fabrics of 64 servers through the REST API: total time and the
   daemon's resident memory afterwards (target <= 64 MiB).

Usage: python3 bench/rest_plan.py BUILD_DIR
"""
import subprocess
import sys
import time

from benchlib import Ofcd


def policy_us(build):
    out = subprocess.run([f"{build}/bench/bench_plan"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("policy_m65_p8:"):
            return float(line.split()[1])
    raise RuntimeError("bench_plan printed no policy_m65_p8")


def bench_plan_route(d, planning_us, n=300):
    body = {"servers": 65, "devices": 9, "ports_per_device": 8}
    for _ in range(20):
        d.call("POST", "/v1/plan", body)
    t0 = time.perf_counter()
    for _ in range(n):
        r = d.call("POST", "/v1/plan", body)
    mean_us = (time.perf_counter() - t0) / n * 1e6
    assert len(r.json()["links"]) == 65 * 64 // 2
    print(f"plan_route_m65_p8: {mean_us:.0f} us/request (client-side, keep-alive, {len(r.content)} bytes)")
    print(f"plan_route_planning: {planning_us:.1f} us in-process")
    print(f"plan_route_planning_share: {planning_us / mean_us * 100:.1f} % (target <= 5%)")


def bench_cluster(d):
    units, servers = 64, 1024
    topo = {
        "ocs": [{"name": f"ocs{u:02d}", "driver": "sim", "ports": servers} for u in range(units)],
        "servers": [{"name": f"srv{s:04d}", "devices": 8, "ports_per_device": 8} for s in range(servers)],
        "wiring": {"rule": "plane-per-ocs"},
    }
    t0 = time.perf_counter()
    d.call("PUT", "/v1/topology", topo)
    t1 = time.perf_counter()
    circuits = 0
    for f in range(16):
        names = [f"srv{s:04d}" for s in range(f * 64, (f + 1) * 64)]
        r = d.call("POST", "/v1/fabrics", {"name": f"job{f:02d}", "servers": names})
        circuits += len(r.json()["links"])
    t2 = time.perf_counter()
    assert circuits == 16 * 64 * 63 // 2
    print(f"cluster_topology_put: {(t1 - t0) * 1e3:.0f} ms (64 units, 1024 servers, 65536 cables)")
    print(f"cluster_16_fabrics: {(t2 - t1) * 1e3:.0f} ms ({circuits} circuits)")
    print(f"cluster_total: {(t2 - t0) * 1e3:.0f} ms")
    print(f"cluster_rss: {d.rss_mib():.1f} MiB (target <= 64 MiB)")


def main():
    build = sys.argv[1]
    d = Ofcd(f"{build}/ofcd")
    try:
        bench_plan_route(d, policy_us(build))
    finally:
        d.stop()
    d = Ofcd(f"{build}/ofcd")
    try:
        bench_cluster(d)
    finally:
        d.stop()


if __name__ == "__main__":
    main()
