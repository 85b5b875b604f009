"""REST collective benchmarks (issue 6).

A 64-server fabric (64 devices x 1 port per server, 8 OCS units, plane-per-ocs cabling, 2016
circuits), then, client-side over keep-alive:
1. POST /v1/collective/select for allreduce on the stored fabric (loads its members,
   capabilities and circuits, prices the 8 candidates);
2. the same as a what-if ({"servers": 64}, no store access), for the share the store takes;
3. the same on the fabric degraded by one missing pair, where every eligible scheduled
   candidate is also generated and mapped onto the stored circuits;
4. GET /v1/fabrics/{name}/schedule for the 64-server ring (126 rounds, checked and mapped).
GET /v1/health with the same client gives the floor that the HTTP client and server add.

Usage: python3 bench/rest_collective.py BUILD_DIR
"""
import sys
import time

from benchlib import Ofcd

SERVERS = 64


def setup(d):
    units = 8
    topo = {
        "ocs": [{"name": f"ocs{u}", "driver": "sim", "ports": SERVERS * SERVERS // units}
                for u in range(units)],
        "servers": [{"name": f"srv{s:02d}", "devices": SERVERS, "offload": True} for s in range(SERVERS)],
        "wiring": {"rule": "plane-per-ocs"},
    }
    d.call("PUT", "/v1/topology", topo)
    r = d.call("POST", "/v1/fabrics", {"name": "job", "servers": [f"srv{s:02d}" for s in range(SERVERS)]})
    assert len(r.json()["links"]) == SERVERS * (SERVERS - 1) // 2


def mean_us(d, method, path, body, n):
    for _ in range(20):
        d.call(method, path, body)
    t0 = time.perf_counter()
    for _ in range(n):
        r = d.call(method, path, body)
    return (time.perf_counter() - t0) / n * 1e6, r


def main():
    d = Ofcd(f"{sys.argv[1]}/ofcd")
    try:
        setup(d)
        us, _ = mean_us(d, "GET", "/v1/health", None, 500)
        print(f"collective_client_floor: {us:.0f} us/request (GET /v1/health, same client)")
        body = {"collective": "allreduce", "bytes": 64 << 20, "fabric": "job"}
        us, r = mean_us(d, "POST", "/v1/collective/select", body, 500)
        sel = r.json()
        assert sel["servers"] == SERVERS and sel["params"]["ports_per_server"] == SERVERS - 1
        print(f"collective_select_fabric_m64: {us:.0f} us/request (chose {sel['algorithm']}, "
              f"{len(r.content)} bytes)")
        what_if = {"collective": "allreduce", "bytes": 64 << 20, "servers": SERVERS}
        us, r = mean_us(d, "POST", "/v1/collective/select", what_if, 500)
        print(f"collective_select_whatif_m64: {us:.0f} us/request")

        d.call("PUT", "/v1/servers/srv04/devices/0", {"state": "failed"})
        d.call("PUT", "/v1/servers/srv04/devices/1", {"state": "failed"})
        missing = d.call("GET", "/v1/fabrics/job").json()["missing"]
        us, r = mean_us(d, "POST", "/v1/collective/select", body, 200)
        print(f"collective_select_degraded_m64: {us:.0f} us/request ({len(missing)} pair missing, "
              f"chose {r.json()['algorithm']})")
        d.call("PUT", "/v1/servers/srv04/devices/1", {"state": "ok"})
        d.call("PUT", "/v1/servers/srv04/devices/0", {"state": "ok"})

        # The whole schedule in one page (the default page is 4096 transfers).
        path = (f"/v1/fabrics/job/schedule?collective=allreduce&algorithm=ring&bytes={64 << 20}"
                "&limit=65536")
        us, r = mean_us(d, "GET", path, None, 50)
        sch = r.json()
        assert sch["check"] == {"valid": True} and len(sch["rounds"]) == 2 * (SERVERS - 1)
        print(f"collective_schedule_ring_m64: {us / 1000:.2f} ms/request "
              f"({sch['stats']['transfers']} transfers, {len(r.content)} bytes)")
        print(f"collective_rss: {d.rss_mib():.1f} MiB")
    finally:
        d.stop()


if __name__ == "__main__":
    main()
