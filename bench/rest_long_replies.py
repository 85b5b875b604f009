"""Long requests made off the loop: the health probes and the loop's longest callback while
a burst of the longest requests runs, from threads of their own: 4 pipelines of 4,096
stages (7 MB replies), 4 plans of 65,536 servers (auto: the candidate grids weighed),
4 schedule pages of a ring on 64 servers (8,064 transfers each) and 2 calibrations of
4,000 runs; one refused 503 overloaded (past the 8 the worker takes in hand) is sent again
50 ms later. GET /v1/health is asked every 2 ms from another process throughout, and for
3 s before the burst as the reference (the ratio of the p99s).

Usage: python3 bench/rest_long_replies.py BUILD_DIR
"""
import statistics
import sys
import threading
import time

from benchlib import Client, Ofcd
from rest_scale import Probes, busy_between, loop_busy, percentile

SERVERS = 64


def topology():
    return {
        "ocs": [{"name": f"ocs{u}", "driver": "sim", "ports": 4 * SERVERS} for u in range(16)],
        "servers": [{"name": f"s{i}", "devices": 8, "ports_per_device": 8}
                    for i in range(SERVERS)],
        "wiring": {"rule": "plane-per-ocs"},
    }


def runs():
    return [{"collective": "allreduce", "algorithm": "ring", "servers": (4, 8, 16, 32)[k % 4],
             "devices": 8, "bytes": 8 << (k % 24),
             "measured_us": 42 + (8 << (k % 24)) / 20000 * (1 + (k * 7 % 11 - 5) / 50)}
            for k in range(4000)]


def burst(port):
    """The requests, each on a connection of its own, all at once: {kind: [ms]}."""
    stages = [f"s{i % SERVERS}" for i in range(4096)]
    jobs = [("pipeline", "POST", "/v1/fabrics/f/pipeline",
             {"stages": stages, "bytes": 1 << 20, "aggregation": "none"})] * 4
    jobs += [("plan", "POST", "/v1/plan",
              {"servers": 65536, "devices": 16, "ports_per_device": 8, "topology": "auto"})] * 4
    jobs += [("schedule", "GET", "/v1/fabrics/f/schedule?collective=allreduce&algorithm=ring"
              "&bytes=1048576&limit=65536", None)] * 4
    body = runs()
    jobs += [("calibrate", "POST", "/v1/cost/calibrate", {"name": f"c{k}", "runs": body})
             for k in range(2)]
    took = {}
    lock = threading.Lock()

    def one(kind, method, path, b):
        c = Client(port, timeout=600)
        t0 = time.perf_counter()
        # Past the 8 the worker takes in hand: 503 overloaded, and again shortly.
        while c.call(method, path, b, ok=(200, 201, 503))[0] == 503:
            with lock:
                took["retries"] = took.get("retries", 0) + 1
            time.sleep(0.05)
        ms = (time.perf_counter() - t0) * 1e3
        c.close()
        with lock:
            took.setdefault(kind, []).append(ms)

    threads = [threading.Thread(target=one, args=j) for j in jobs]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return took, (time.perf_counter() - t0) * 1e3


def main():
    build = sys.argv[1]
    d = Ofcd(f"{build}/ofcd")
    c = Client(d.port, timeout=600)
    try:
        c.call("PUT", "/v1/topology", topology())
        c.call("POST", "/v1/fabrics?wait=60", {"name": "f", "servers": [f"s{i}" for i in
                                                                     range(SERVERS)]})
        with Probes(d.port) as idle:
            time.sleep(3)
        busy0 = loop_busy(c)
        with Probes(d.port) as during:
            took, wall = burst(d.port)
        over, worst = busy_between(busy0, loop_busy(c))
        ref, lat = idle.lat, during.lat
        retries = took.pop("retries", 0)
        for kind, ms in sorted(took.items()):
            print(f"long_replies_{kind}_ms: {statistics.median(ms):.1f} (median of {len(ms)})")
        print(f"long_replies_overloaded_retries: {retries}")
        print(f"long_replies_burst_ms: {wall:.0f}")
        print(f"long_replies_health_idle_p99_ms: {percentile(ref, 99) * 1e3:.2f}")
        print(f"long_replies_health_p50_ms: {statistics.median(lat) * 1e3:.2f}")
        print(f"long_replies_health_p99_ms: {percentile(lat, 99) * 1e3:.2f}")
        print(f"long_replies_health_max_ms: {max(lat) * 1e3:.2f}")
        print(f"long_replies_health_p99_ratio: {percentile(lat, 99) / percentile(ref, 99):.2f}")
        print(f"long_replies_callbacks_over_10ms: {over}")
        print(f"long_replies_longest_callback_under_ms: {worst * 1e3:.0f}")
    finally:
        c.close()
        d.stop()


if __name__ == "__main__":
    main()
