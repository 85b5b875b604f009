"""The reconciler's own work per reconfiguration (issue 4): a 64-server fabric (2016 circuits)
on a sim unit at zero switching delay, created and deleted many times. The daemon counts the
time its reconciler spends on diffs, batches, records and checks in
ofcd_reconcile_work_seconds_total; the difference per create (or delete) is its overhead,
without the REST request, the planning and the reply, and without waiting for the unit.

Usage: python3 bench/rest_reconcile.py BUILD_DIR
"""
import statistics
import sys
import time

from benchlib import Ofcd

SERVERS = 64


def work_seconds(d):
    for line in d.call("GET", "/metrics").text.splitlines():
        if line.startswith("ofcd_reconcile_work_seconds_total "):
            return float(line.split()[1])
    return 0.0


def settle(d, name, want):
    deadline = time.time() + 30
    while time.time() < deadline:
        states = {f["name"]: f["state"] for f in d.call("GET", "/v1/fabrics").json()["fabrics"]}
        if states.get(name) == want or (want is None and name not in states):
            if want is not None or all(x["in_sync"] for x in [d.call("GET", "/v1/ocs/ocs0/cross-connects").json()]):
                return
        time.sleep(0.002)
    raise RuntimeError(f"{name} did not reach {want}")


def main():
    d = Ofcd(f"{sys.argv[1]}/ofcd")
    try:
        d.call("POST", "/v1/ocs", {"name": "ocs0", "driver": "sim", "ports": SERVERS * (SERVERS - 1)})
        for s in range(SERVERS):
            d.call("POST", "/v1/servers", {"name": f"srv{s:02d}", "devices": SERVERS - 1})
        d.call("PUT", "/v1/wiring", {"rule": "plane-per-ocs"})
        names = [f"srv{s:02d}" for s in range(SERVERS)]
        create, delete = [], []
        for i in range(20):
            w0 = work_seconds(d)
            d.call("POST", "/v1/fabrics", {"name": "job", "servers": names})
            settle(d, "job", "applied")
            w1 = work_seconds(d)
            d.call("DELETE", "/v1/fabrics/job")
            settle(d, "job", None)
            w2 = work_seconds(d)
            if i >= 2:  # warm caches and prepared statements first
                create.append((w1 - w0) * 1e3)
                delete.append((w2 - w1) * 1e3)
        print(f"reconcile_work_create_64: {statistics.median(create):.2f} ms per reconfiguration "
              f"(2016 circuits added, median of {len(create)}; min {min(create):.2f}; target < 1 ms)")
        print(f"reconcile_work_delete_64: {statistics.median(delete):.2f} ms per reconfiguration "
              f"(2016 circuits removed, median of {len(delete)}; min {min(delete):.2f})")
    finally:
        d.stop()


if __name__ == "__main__":
    main()
