"""OCS push benchmarks (issue 4).

1. A fabric of 64 servers (2016 circuits, 4032 flows) pushed by ofcd into one Open vSwitch
   bridge through the openflow driver: the time from `POST /v1/fabrics?wait=60` to its
   reply with state "applied" (planning, store, reconcile, the batch up to its BARRIER,
   the read-back that confirms it, the reply), against `ovs-ofctl -O OpenFlow13 --bundle
   add-flows` of the same 4032 flows into a fresh bridge (the whole command), in the same
   run, rounds interleaved. Target: ofcd <= 1.25 x ovs-ofctl.
2. The controller's own work per reconfiguration: the same fabric on a `sim` unit with zero
   switching delay (POST ?wait=60 -> applied, DELETE ?wait=60 -> removed), with the store
   on the disk and on tmpfs, and how many fsyncs one reconfiguration costs.

The OCS unit has 4032 ports and 64 servers x 63 devices x 1 port are cabled to ports
1..4032 explicitly; the bridge has no ports (flows with in_port matches install anyway).
OVS runs in a lab network namespace (tests/integration/ovs.py), and so does this process's
main thread with the ofcd it starts, so nothing collides with other OVS or test runs.

Usage: python3 bench/rest_ovs.py BUILD_DIR     (root; OVS parts are skipped otherwise)
"""
import datetime
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import ovs  # noqa: E402
from benchlib import Ofcd, fsync_cost_ms  # noqa: E402

SERVERS = 64
DEVICES = SERVERS - 1
PORTS = SERVERS * DEVICES
CIRCUITS = SERVERS * (SERVERS - 1) // 2
ROUNDS = 5
SIM_ROUNDS = 30
TARGET = 1.25
NAMES = [f"srv{s:02d}" for s in range(SERVERS)]


def topology(driver, endpoint=""):
    links = [{"server": n, "device": d, "port": 0, "ocs": "ocs0", "ocs_port": s * DEVICES + d + 1}
             for s, n in enumerate(NAMES) for d in range(DEVICES)]
    return {"ocs": [{"name": "ocs0", "driver": driver, "ports": PORTS, "endpoint": endpoint}],
            "servers": [{"name": n, "devices": DEVICES, "ports_per_device": 1} for n in NAMES],
            "wiring": {"links": links}}


def ts(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def create(d, name="bench"):
    t0 = time.perf_counter()
    r = d.call("POST", "/v1/fabrics?wait=60", {"name": name, "servers": NAMES})
    dt = (time.perf_counter() - t0) * 1e3
    f = r.json()
    if f["state"] != "applied" or len(f["links"]) != CIRCUITS:
        raise RuntimeError(f"fabric {f['state']} with {len(f['links'])} links: {str(f)[:300]}")
    return dt, f, len(r.content)


def delete(d, name="bench"):
    t0 = time.perf_counter()
    r = d.call("DELETE", f"/v1/fabrics/{name}?wait=60")
    dt = (time.perf_counter() - t0) * 1e3
    if r.json().get("state") != "removed":
        raise RuntimeError(f"delete: {r.text[:300]}")
    return dt


def stored_to_applied_ms(f):
    """From the fabric's own timestamps: stored (created) -> applied (updated), ms resolution."""
    return (ts(f["updated"]) - ts(f["created"])) * 1e3


def batch_ms(d, name="bench"):
    """(batch time of the fabric's last add operation from its own timestamps, its ocs)."""
    ops = d.call("GET", f"/v1/operations?fabric={name}&limit=10").json()["operations"]
    add = next(o for o in ops if o["nadds"] and o["status"] == "succeeded")
    return (ts(add["ended"]) - ts(add["started"])) * 1e3


def wait_connected(d, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        c = d.call("GET", "/v1/ocs/ocs0").json()["connection"]
        if c["state"] == "connected":
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"ocs0 not connected: {c}")
        time.sleep(0.05)


def median(xs):
    return statistics.median(xs)


def check_flows(lab, bridge, fabric):
    want = set()
    for l in fabric["links"]:
        x, y = l["a"]["ocs_port"], l["b"]["ocs_port"]
        want |= {(x, y, ovs.cookie_of(x, y)), (y, x, ovs.cookie_of(x, y))}
    got = [(i, o, c) for i, o, c, prio, table in lab.circuit_flows(bridge) if prio == 1000 and table == 0]
    if len(got) != len(want) or set(got) != want:
        raise RuntimeError(f"{bridge}: {len(got)} flows, not the plan's {len(want)}")


def bench_openflow(build):
    reason = ovs.unavailable()
    if reason:
        print(f"ovs_push: skipped ({reason})")
        return
    lab = ovs.Lab().start()
    d = None
    try:
        lab.add_bridge("ofcd", controller="ptcp:6653:127.0.0.1")
        for r in range(ROUNDS):
            lab.add_bridge(f"ofctl{r}")
        lab.enter()
        d = Ofcd(f"{build}/ofcd")
        d.call("PUT", "/v1/topology", topology("openflow", "tcp:127.0.0.1:6653"))
        wait_connected(d)
        ofcd_ms, ofcd_del_ms, batch, ofctl_ms, reconcile = [], [], [], [], []
        flowfile = os.path.join(lab.dir, "flows.txt")
        for r in range(ROUNDS):
            dt, fabric, size = create(d)
            ofcd_ms.append(dt)
            batch.append(batch_ms(d))
            reconcile.append(stored_to_applied_ms(fabric))
            if r == 0:
                check_flows(lab, "ofcd", fabric)
                with open(flowfile, "w") as f:
                    for l in fabric["links"]:
                        x, y = l["a"]["ocs_port"], l["b"]["ocs_port"]
                        c = ovs.cookie_of(x, y)
                        f.write(f"table=0,priority=1000,cookie={c:#x},in_port={x},actions=output:{y}\n")
                        f.write(f"table=0,priority=1000,cookie={c:#x},in_port={y},actions=output:{x}\n")
            ofcd_del_ms.append(delete(d))
            if lab.circuit_flows("ofcd"):
                raise RuntimeError("flows left after DELETE ?wait")
            t0 = time.perf_counter()
            lab.ofctl("--bundle", "add-flows", f"ofctl{r}", flowfile)
            ofctl_ms.append((time.perf_counter() - t0) * 1e3)
            if r == 0:
                check_flows(lab, "ofctl0", fabric)
        o, c = median(ofcd_ms), median(ofctl_ms)
        print(f"ovs_push_ofcd_2016: {o:.1f} ms (POST /v1/fabrics?wait=60 -> applied, {2 * CIRCUITS} flows, "
              f"median of {ROUNDS}; min {min(ofcd_ms):.1f}, max {max(ofcd_ms):.1f}; reply {size} bytes)")
        print(f"ovs_push_ofctl_bundle_2016: {c:.1f} ms (ovs-ofctl --bundle add-flows into a fresh bridge, "
              f"whole command, median of {ROUNDS}; min {min(ofctl_ms):.1f}, max {max(ofctl_ms):.1f})")
        print(f"ovs_push_ratio: {o / c:.2f} (target <= {TARGET:.2f}: {'met' if o / c <= TARGET else 'NOT met'})")
        print(f"ovs_push_ofcd_batch: {median(batch):.1f} ms (the add operation, started -> ended, "
              f"from the daemon's own timestamps: send, BARRIER, read-back)")
        print(f"ovs_push_ofcd_stored_to_applied: {median(reconcile):.1f} ms (fabric created -> updated to "
              f"applied, the daemon's timestamps: the reconcile path incl. the batch)")
        print(f"ovs_delete_ofcd_2016: {median(ofcd_del_ms):.1f} ms (DELETE ?wait=60 -> removed, median of {ROUNDS})")
    finally:
        if d is not None:
            d.stop()
        lab.close()


def fsyncs_per_reconfiguration(d, rounds=5):
    """Counts fsync/fdatasync calls of ofcd over create+delete rounds (strace, if present)."""
    if not shutil_which("strace"):
        return None
    tr = subprocess.Popen(["strace", "-f", "-qq", "-c", "-e", "trace=fsync,fdatasync", "-p", str(d.proc.pid)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    for _ in range(rounds):
        create(d)
        delete(d)
    time.sleep(0.2)
    tr.terminate()
    _, err = tr.communicate(timeout=10)
    n = 0
    for line in err.splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(fsync|fdatasync)$", line)
        if m:
            n += int(m.group(1))
    return n / (2 * rounds)


def shutil_which(name):
    import shutil
    return shutil.which(name)


def bench_sim(build, parent, label):
    d = Ofcd(f"{build}/ofcd", parent=parent)
    try:
        d.call("PUT", "/v1/topology", topology("sim"))
        wait_connected(d)
        for _ in range(3):  # warm-up
            create(d)
            delete(d)
        up, down, batch, reconcile = [], [], [], []
        for _ in range(SIM_ROUNDS):
            dt, f, size = create(d)
            up.append(dt)
            reconcile.append(stored_to_applied_ms(f))
            batch.append(batch_ms(d))
            down.append(delete(d))
        # the same request without ?wait: planning, verification, store, reply; no reconcile
        nowait = []
        for i in range(10):
            t0 = time.perf_counter()
            d.call("POST", "/v1/fabrics", {"name": "bench", "servers": NAMES})
            nowait.append((time.perf_counter() - t0) * 1e3)
            d.call("GET", "/v1/fabrics/bench?wait=60")
            delete(d)
        health = []
        for _ in range(200):
            t0 = time.perf_counter()
            d.call("GET", "/v1/health")
            health.append((time.perf_counter() - t0) * 1e3)
        print(f"sim_reconfig_64_{label}: {median(up):.2f} ms per reconfiguration (POST /v1/fabrics?wait=60 -> "
              f"applied, {CIRCUITS} circuits, sim at zero delay, median of {SIM_ROUNDS}; min {min(up):.2f}; "
              f"the whole REST round trip: the < 1 ms target is the reconciler's part, rest_reconcile.py)")
        print(f"sim_delete_64_{label}: {median(down):.2f} ms (DELETE ?wait=60 -> removed)")
        print(f"sim_post_nowait_64_{label}: {median(nowait):.2f} ms (POST without wait: plan, verify, store, "
              f"{size}-byte reply)")
        print(f"sim_stored_to_applied_64_{label}: {median(reconcile):.2f} ms (fabric created -> applied, "
              f"the daemon's ms timestamps: saving the plan, the reconcile pass and all between)")
        print(f"sim_batch_64_{label}: {median(batch):.2f} ms (the add operation, started -> ended, ms timestamps)")
        print(f"sim_rest_roundtrip_{label}: {median(health):.3f} ms (GET /v1/health, client side)")
        if label == "disk":
            n = fsyncs_per_reconfiguration(d)
            if n is not None:
                print(f"sim_fsyncs_per_reconfiguration: {n:.1f} (strace -c: fsync + fdatasync per create or delete)")
    finally:
        d.stop()


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    bench_openflow(build)
    bench_sim(build, None, "disk")
    print(f"fsync_cost_disk: {fsync_cost_ms(os.environ.get('TMPDIR', '/tmp')):.2f} ms (4 KiB write + fdatasync "
          f"in the store's directory)")
    if os.path.isdir("/dev/shm"):
        bench_sim(build, "/dev/shm", "tmpfs")


if __name__ == "__main__":
    main()
