"""POST /v1/fabrics/{name}/pipeline benchmark (issue 5).

A 64-server fabric (64 devices x 1 port per server, 32 OCS units of 128 ports,
plane-per-ocs cabling) on a daemon of its own; a 64-stage pipeline visiting
every server once (63 stage pairs, each over a stored circuit) is priced many
times over one keep-alive connection. The share of the request spent selecting
is estimated as 63 x the per-selection time that build/bench/bench_cost
measures in-process, over the mean request time (target <= 5%): the API has no
timing field, and the rest of the request is HTTP, JSON and the store.

Usage: python3 bench/rest_pipeline.py OFCD_BINARY [BENCH_COST_BINARY]
(a build directory is accepted for OFCD_BINARY: its ofcd is used). Prints one
`name: value unit` line per measurement.
"""
import os
import random
import re
import subprocess
import sys
import time

from benchlib import Ofcd

SERVERS, DEVICES, UNITS, UNIT_PORTS = 64, 64, 32, 128
STAGES = 64
SECONDS = 5.0
MIN_REQUESTS = 200
TARGET_SHARE = 5.0


def selection_ns(bench_cost):
    out = subprocess.run([bench_cost, "2"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"([0-9.]+) ns each", out)
    if not m:
        raise RuntimeError(f"{bench_cost} printed no per-selection time:\n{out}")
    return float(m.group(1))


def build_fabric(d):
    topo = {
        "ocs": [{"name": f"ocs{u:02d}", "driver": "sim", "ports": UNIT_PORTS} for u in range(UNITS)],
        "servers": [{"name": f"srv{s:02d}", "devices": DEVICES, "ports_per_device": 1,
                     "p2p": s % 2 == 0, "intra": "two-groups" if s % 4 >= 2 else "full-mesh"}
                    for s in range(SERVERS)],
        "wiring": {"rule": "plane-per-ocs"},
    }
    d.call("PUT", "/v1/topology", topo)
    names = [f"srv{s:02d}" for s in range(SERVERS)]
    r = d.call("POST", "/v1/fabrics", {"name": "job", "servers": names})
    assert len(r.json()["links"]) == SERVERS * (SERVERS - 1) // 2 and not r.json()["missing"]
    return names


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: rest_pipeline.py OFCD_BINARY [BENCH_COST_BINARY]")
    binary = sys.argv[1]
    if os.path.isdir(binary):
        binary = os.path.join(binary, "ofcd")
    bench_cost = sys.argv[2] if len(sys.argv) > 2 else \
        os.path.join(os.path.dirname(os.path.abspath(binary)), "bench", "bench_cost")
    per_select_ns = selection_ns(bench_cost)

    d = Ofcd(binary)
    try:
        names = build_fabric(d)
        stages = names[:]
        random.Random(5).shuffle(stages)
        body = {"stages": stages, "bytes": 16 * 1024 * 1024, "aggregation": "none"}
        path = "/v1/fabrics/job/pipeline"
        for _ in range(20):
            r = d.call("POST", path, body)
        reply = r.json()
        assert reply["complete"] and len(reply["pairs"]) == STAGES - 1
        assert all(p["src_device"] is not None for p in reply["pairs"])
        n = 0
        t0 = time.perf_counter()
        while n < MIN_REQUESTS or time.perf_counter() - t0 < SECONDS:
            d.call("POST", path, body)
            n += 1
        mean_us = (time.perf_counter() - t0) / n * 1e6
    finally:
        d.stop()

    select_us = (STAGES - 1) * per_select_ns / 1e3
    share = select_us / mean_us * 100
    methods = sorted({p["method"] for p in reply["pairs"]})
    print(f"pipeline_m{SERVERS}_s{STAGES}: {mean_us:.0f} us/request (client-side, keep-alive, "
          f"{n} requests, {len(r.content)} bytes, methods {', '.join(methods)})")
    print(f"pipeline_select_per_pair: {per_select_ns:.1f} ns in-process (bench_cost)")
    print(f"pipeline_select_total: {select_us:.2f} us for {STAGES - 1} pairs")
    print(f"pipeline_select_share: {share:.2f} % (target <= {TARGET_SHARE:.0f}%: "
          f"{'met' if share <= TARGET_SHARE else 'NOT met'})")


if __name__ == "__main__":
    main()
