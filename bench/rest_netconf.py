"""A 64-server fabric (2,016 circuits) pushed through the netconf driver to a real netconfd
(behind sshd, tests/integration/netconf_lab.py), against the same <edit-config> sent by
python3-ncclient in the same run.

ofcd: POST /v1/fabrics?wait=60 of the 64 servers, timed from the request to the answer
`applied` (planning, the store, the batch as one edit-config, and the read-back that
confirms it). ncclient: an open session sends the edit-config of the same 2,016 pairs
(merge, rollback-on-error), timed from the call to the <ok/>. Both start from an empty
unit and both sessions are open before the clock starts; one untimed round of each
first. Which goes first alternates from round to round; medians.
Meanwhile a thread probes ofcd's GET /v1/health every 2 ms: its worst answer bounds how
long anything held the loop. The same create on a sim unit (same topology, same daemon
build, same run) is the reference: what the netconf rounds add to it is the driver's
(building and sending the batch, reading and parsing the replies on the loop).

    /usr/bin/python3 bench/rest_netconf.py build [ROUNDS]
"""
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import netconf_lab  # noqa: E402
from benchlib import Ofcd  # noqa: E402

SERVERS = 64
PLANES = SERVERS - 1  # full mesh of an even count: M - 1 planes, one device each
NC_BASE = "urn:ietf:params:xml:ns:netconf:base:1.0"


class Prober(threading.Thread):
    """GET /v1/health every 2 ms; keeps the slowest answer."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.d = d
        self.worst = 0.0
        self.on = threading.Event()
        self.stop = threading.Event()

    def run(self):
        import requests
        s = requests.Session()
        while not self.stop.is_set():
            t0 = time.perf_counter()
            s.get(self.d.url("/v1/health"), timeout=10)
            dt = time.perf_counter() - t0
            if self.on.is_set():
                self.worst = max(self.worst, dt)
            time.sleep(0.002)


def edit_xml(pairs, op=None):
    attr = f' xmlns:nc="{NC_BASE}" nc:operation="{op}"' if op else ""
    body = "".join(f"<pair{attr}><ingress>{a}</ingress>" + (f"<egress>{b}</egress>" if not op else "")
                   + "</pair>" for a, b in pairs)
    return (f'<config xmlns="{NC_BASE}"><cross-connects xmlns="{netconf_lab.NS}">{body}'
            "</cross-connects></config>")


def topology(driver, endpoint):
    return {
        "ocs": [{"name": "nc0", "driver": driver, "ports": SERVERS * PLANES, "endpoint": endpoint}],
        "servers": [{"name": f"s{i:02d}", "devices": PLANES, "ports_per_device": 1,
                     "p2p": False, "intra": "full-mesh"} for i in range(SERVERS)],
        "wiring": {"rule": "plane-per-ocs"}}


def sim_reference(build, rounds):
    """Health's worst answer while the same fabric is created on a sim unit."""
    d = Ofcd(os.path.join(build, "ofcd"))
    try:
        d.call("PUT", "/v1/topology", topology("sim", ""))
        probe = Prober(d)
        probe.start()
        worst = []
        servers = [f"s{i:02d}" for i in range(SERVERS)]
        for _ in range(rounds):
            probe.worst = 0.0
            probe.on.set()
            d.call("POST", "/v1/fabrics?wait=60", {"name": "big", "servers": servers})
            probe.on.clear()
            worst.append(probe.worst)
            d.call("DELETE", "/v1/fabrics/big?wait=60")
        probe.stop.set()
        return statistics.median(worst)
    finally:
        d.stop()


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    reason = netconf_lab.unavailable()
    if reason:
        print(f"netconf: skipped ({reason})")
        return
    import tempfile
    tmp = tempfile.TemporaryDirectory(prefix="ofcd-bench-nc-")
    server = netconf_lab.Server(os.path.join(tmp.name, "netconf")).start()
    d = None
    try:
        d = Ofcd(os.path.join(build, "ofcd"),
                 extra=f"[netconf]\nkey = {server.client_key}\nknown_hosts = {server.known_hosts}\n"
                       f"yang_dir = {server.yang_dir}\n")
        d.call("PUT", "/v1/topology", topology("netconf", server.endpoint))
        deadline = time.time() + 60
        while d.call("GET", "/v1/ocs/nc0").json()["connection"]["state"] != "connected":
            if time.time() > deadline:
                raise RuntimeError("nc0 did not connect")
            time.sleep(0.1)
        servers = [f"s{i:02d}" for i in range(SERVERS)]
        probe = Prober(d)
        probe.start()
        m = server.connect()
        t_ofcd, t_nc, worst = [], [], []

        def run_ofcd():
            probe.worst = 0.0
            probe.on.set()
            t0 = time.perf_counter()
            f = d.call("POST", "/v1/fabrics?wait=60", {"name": "big", "servers": servers}).json()
            dt = time.perf_counter() - t0
            probe.on.clear()
            if f["state"] != "applied":
                raise RuntimeError(f"{f['state']}: {f.get('error')}\n" +
                                   open(os.path.join(d.dir.name, "ofcd.log")).read()[-3000:])
            held = server.pairs(m)
            assert len(held) == SERVERS * (SERVERS - 1) // 2, len(held)
            d.call("DELETE", "/v1/fabrics/big?wait=60")
            assert server.pairs(m) == {}
            return dt, probe.worst, sorted(held.items())

        def run_ncclient(pairs):
            t0 = time.perf_counter()
            m.edit_config(target="running", config=edit_xml(pairs), error_option="rollback-on-error")
            dt = time.perf_counter() - t0
            assert sorted(server.pairs(m).items()) == pairs
            m.edit_config(target="running", config=edit_xml(pairs, op="remove"))
            return dt

        _, _, pairs = run_ofcd()  # warm-up: the pairs ncclient sends, and both paths hot
        run_ncclient(pairs)
        for r in range(rounds):
            # who goes first alternates, so that neither always meets the unit after the other
            if r % 2:
                t_nc.append(run_ncclient(pairs))
            dt, w, got = run_ofcd()
            assert got == pairs
            t_ofcd.append(dt)
            worst.append(w)
            if not r % 2:
                t_nc.append(run_ncclient(pairs))
            print(f"round {r}: ofcd {t_ofcd[-1] * 1e3:.0f} ms, ncclient {t_nc[-1] * 1e3:.0f} ms, "
                  f"health worst {worst[-1] * 1e3:.1f} ms", flush=True)
        probe.stop.set()
        m.close_session()
        sim = sim_reference(build, rounds)
        a, b = statistics.median(t_ofcd), statistics.median(t_nc)
        print(f"netconf 64-server fabric ({len(pairs)} circuits) to applied: ofcd {a * 1e3:.0f} ms, "
              f"ncclient edit-config {b * 1e3:.0f} ms, ratio {a / b:.2f} (median of {rounds}); "
              f"health worst during ofcd's push {statistics.median(worst) * 1e3:.1f} ms median, "
              f"{max(worst) * 1e3:.1f} ms max; on a sim unit {sim * 1e3:.1f} ms median")
    finally:
        if d:
            d.stop()
        server.close()
        tmp.cleanup()


if __name__ == "__main__":
    main()
