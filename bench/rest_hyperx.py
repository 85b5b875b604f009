"""Fabrics of any size (issue 28): a 1,024-server HyperX and the whole cluster as one fabric,
through REST, on 8,194 servers (8 devices x 8 ports), 64 sim OCS units, plane-per-ocs.

In one daemon:
1. a 64-server full mesh (2,016 circuits) created and deleted REPEATS times: the create's
   reply time (planning, verifying and storing: the handler's work) per circuit, the reference;
2. five 1,024-server fabrics, topology auto (32 x 32 HyperX, 31,744 circuits each), on servers
   of their own, created one after the other: the reply time per circuit against the
   reference (target <= 1.5x), the time until applied, and the longest loop callback
   meanwhile (ofcd_loop_busy_seconds: target: none over 20 ms, while GET /v1/health is asked
   every 2 ms on a connection of its own); a device of each failing and coming back (a
   re-plan each: its reply time and longest callback); then the same of their deletes;
3. the 8,192 servers but two as one fabric, auto (a diameter-3 HyperX): planned, verified,
   stored and applied, with its reply time and time to applied.

Usage: python3 bench/rest_hyperx.py BUILD_DIR
"""
import multiprocessing
import os
import statistics
import sys
import time

from benchlib import Client, Ofcd
from rest_scale import busy_between, loop_busy, percentile, probe, server

N = 8194
UNITS = 64
REPEATS = 5


def created(c, name, first, count, topology="auto"):
    """POST the fabric; (reply ms, circuits) once its reply came (not yet applied)."""
    body = {"name": name, "servers": [server(s) for s in range(first, first + count)],
            "topology": topology}
    t0 = time.perf_counter()
    r = c.json("POST", "/v1/fabrics?view=summary", body)
    return (time.perf_counter() - t0) * 1e3, r


def wait_state(c, name, states, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = c.json("GET", f"/v1/fabrics/{name}?view=summary")
        if r["state"] in states:
            return r
        time.sleep(0.05)
    raise RuntimeError(f"{name} did not reach {states}")


def start_probe(port):
    """GET /v1/health every 2 ms from a process of its own, until stop_probe()."""
    stop = multiprocessing.Event()
    q = multiprocessing.Queue()
    p = multiprocessing.Process(target=probe, args=(port, stop, q))
    p.start()
    time.sleep(0.2)
    return stop, q, p


def stop_probe(stop, q, p):
    """The probe's latencies (seconds)."""
    stop.set()
    lat = q.get(timeout=60)
    p.join()
    return lat


def delete(c, name):
    r = c.json("DELETE", f"/v1/fabrics/{name}?wait=60", ok=(200, 202))
    assert r["state"] == "removed", r


def main():
    build = sys.argv[1]
    d = Ofcd(f"{build}/ofcd")
    c = Client(d.port, timeout=600)
    out = {}
    try:
        topo = {
            "ocs": [{"name": f"ocs{u:02d}", "driver": "sim", "ports": N} for u in range(UNITS)],
            "servers": [{"name": server(s), "devices": 8, "ports_per_device": 8}
                        for s in range(N)],
            "wiring": {"rule": "plane-per-ocs"},
        }
        c.call("PUT", "/v1/topology", topo)
        mesh = []
        for i in range(REPEATS):
            ms, r = created(c, "mesh", 0, 64, topology="full-mesh")
            mesh.append(ms / r["circuits"])
            wait_state(c, "mesh", ("applied",))
            delete(c, "mesh")
        out["mesh64_reply_us_per_circuit"] = statistics.median(mesh) * 1e3

        # Five 1,024-server fabrics on servers of their own, created one after the other
        # while the probe runs, then deleted while it runs again: each measured apart.
        hx, applied = [], []
        busy0 = loop_busy(c)
        stop, q, p = start_probe(d.port)
        for i in range(REPEATS):
            t0 = time.perf_counter()
            ms, r = created(c, f"hx{i}", i * 1024, 1024)
            hx.append(ms / r["circuits"])
            f = wait_state(c, f"hx{i}", ("applied", "degraded"))
            applied.append((time.perf_counter() - t0) * 1e3)
        lat = stop_probe(stop, q, p)
        over, worst = busy_between(busy0, loop_busy(c))
        # A device of each failing, and coming back: each a re-plan of 1,024 servers.
        replan = []
        busy0 = loop_busy(c)
        for i in range(REPEATS):
            for state in ("failed", "ok"):
                t0 = time.perf_counter()
                c.json("PUT", f"/v1/servers/{server(i * 1024 + 5)}/devices/3", {"state": state})
                replan.append((time.perf_counter() - t0) * 1e3)
        re_over, re_worst = busy_between(busy0, loop_busy(c))
        busy0 = loop_busy(c)
        stop, q, p = start_probe(d.port)
        for i in range(REPEATS):
            delete(c, f"hx{i}")
        del_lat = stop_probe(stop, q, p)
        del_over, del_worst = busy_between(busy0, loop_busy(c))
        out["hx1024_layout"] = f"{f['topology']} {f.get('shape')} circuits {f['circuits']} " \
                               f"missing {f['missing']}"
        out["hx1024_reply_us_per_circuit"] = statistics.median(hx) * 1e3
        out["hx1024_ratio_vs_mesh64"] = statistics.median(hx) / statistics.median(mesh)
        out["hx1024_applied_ms"] = statistics.median(applied)
        out["hx1024_create_callbacks_over_10ms"] = over
        out["hx1024_create_longest_callback_under_ms"] = worst * 1e3
        out["hx1024_create_health_p99_ms"] = percentile(lat, 99) * 1e3
        out["hx1024_create_health_max_ms"] = max(lat) * 1e3
        out["hx1024_replan_reply_ms"] = statistics.median(replan)
        out["hx1024_replan_longest_callback_under_ms"] = re_worst * 1e3
        out["hx1024_delete_callbacks_over_10ms"] = del_over
        out["hx1024_delete_longest_callback_under_ms"] = del_worst * 1e3
        out["hx1024_delete_health_p99_ms"] = percentile(del_lat, 99) * 1e3
        out["hx1024_delete_health_max_ms"] = max(del_lat) * 1e3

        t0 = time.perf_counter()
        ms, r = created(c, "all", 0, N - 2)
        f = wait_state(c, "all", ("applied", "degraded"))
        out["all8192_layout"] = f"{f['topology']} {f.get('shape')} diameter " \
                                f"{f.get('diameter')} circuits {f['circuits']} missing {f['missing']}"
        out["all8192_reply_ms"] = ms
        out["all8192_applied_ms"] = (time.perf_counter() - t0) * 1e3
        out["rss_mib"] = d.rss_mib()
    finally:
        d.stop()
    for k, v in out.items():
        print(f"hyperx_{k}: {v:.2f}" if isinstance(v, float) else f"hyperx_{k}: {v}")
    print(f"hyperx_load_average: {os.getloadavg()[0]:.1f} (2 cores, shared)")


if __name__ == "__main__":
    main()
