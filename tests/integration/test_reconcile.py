"""Reconciler with sim OCS units: apply, operations, faults, drift, isolation, events, waits."""
import http.client
import json
import sqlite3
import threading
import time

import pytest
import requests

from conftest import Daemon, error_of, open_connections, wait_for

FAULTS = "[debug]\nfaults = true\n[reconcile]\naudit_interval = 1\n"
# An OpenFlow unit nobody answers for: what it holds is unknown until it is read back.
FAR = {"name": "far", "driver": "openflow", "endpoint": "tcp:127.0.0.1:1"}


@pytest.fixture
def sim(tmp_path):
    d = Daemon(tmp_path, extra=FAULTS).start()
    try:  # stopped even when the set-up fails
        for u in range(2):
            r = d.post("/v1/ocs", {"name": f"ocs{u}", "driver": "sim", "ports": 64})
            assert r.status_code == 201, r.text
        for s in range(8):
            assert d.post("/v1/servers", {"name": f"srv{s}", "devices": 8}).status_code == 201
        assert d.put("/v1/wiring", {"rule": "plane-per-ocs"}).status_code == 200
        yield d
    finally:
        d.stop()


def fault(d, unit, **body):
    r = d.post(f"/v1/ocs/{unit}/faults", body)
    assert r.status_code == 200, r.text


def in_sync(d, unit):
    return d.get(f"/v1/ocs/{unit}/cross-connects").json()["in_sync"]


def test_apply_and_read_back(sim):
    r = sim.post("/v1/fabrics?wait=10", {"name": "a", "servers": ["srv0", "srv1", "srv2", "srv3", "srv4"]})
    assert r.status_code == 201 and r.json()["state"] == "applied"
    for unit in ("ocs0", "ocs1"):
        x = sim.get(f"/v1/ocs/{unit}/cross-connects").json()
        assert x["desired"] == x["actual"] and x["in_sync"] is True and x["foreign"] == []
        o = sim.get(f"/v1/ocs/{unit}").json()
        assert o["connection"]["state"] == "connected" and o["connection"]["last_error"] is None
    ops = sim.get("/v1/operations?fabric=a").json()["operations"]
    assert ops and all(op["status"] == "succeeded" and op["fabrics"] == ["a"] for op in ops)
    assert all(op["trigger"] == "change" for op in ops)  # the units were in sync after connecting
    assert sum(op["nadds"] for op in ops) == 10
    one = sim.get(f"/v1/operations/{ops[0]['id']}").json()
    assert len(one["adds"]) == one["nadds"] and one["deletes"] == [] and one["ended"]
    assert sim.get("/v1/operations/999999").status_code == 404
    assert sim.get("/v1/operations/abc").status_code == 404
    assert sim.get("/v1/operations?limit=0").status_code == 400
    assert sim.get("/v1/operations?fabric=a/b").status_code == 400
    # Delete with wait: every unit ends holding nothing.
    r = sim.delete("/v1/fabrics/a?wait=10")
    assert r.status_code == 200 and r.json() == {"deleted": "a", "state": "removed"}
    for unit in ("ocs0", "ocs1"):
        x = sim.get(f"/v1/ocs/{unit}/cross-connects").json()
        assert x["desired"] == [] and x["actual"] == []
    # The batches that tore the fabric down are still its own in the history.
    ops = sim.get("/v1/operations?fabric=a").json()["operations"]
    removals = [op for op in ops if op["ndeletes"]]
    assert sum(op["ndeletes"] for op in removals) == 10 and sum(op["nadds"] for op in removals) == 0
    assert all(op["fabrics"] == ["a"] and op["status"] == "succeeded" for op in removals)
    one = sim.get(f"/v1/operations/{removals[0]['id']}").json()
    assert len(one["deletes"]) == one["ndeletes"] and one["adds"] == []
    # Once DELETE ?wait said removed, the servers can be reused at once.
    r = sim.post("/v1/fabrics", {"name": "again", "servers": ["srv3", "srv4"]})
    assert r.status_code == 201, r.text


def test_replan_attributes_removals(sim):
    """A re-plan that moves circuits: its removals and additions are the fabric's."""
    r = sim.post("/v1/fabrics?wait=10", {"name": "r", "servers": ["srv0", "srv1", "srv2"]})
    assert r.json()["state"] == "applied"
    before = max(op["id"] for op in sim.get("/v1/operations?fabric=r").json()["operations"])
    held = {u: {tuple(x) for x in sim.get(f"/v1/ocs/{u}/cross-connects").json()["actual"]}
            for u in ("ocs0", "ocs1")}
    assert sim.put("/v1/servers/srv1/devices/0", {"state": "failed"}).status_code == 200
    assert wait_for(lambda: sim.get("/v1/fabrics/r").json()["state"] in ("applied", "degraded"))
    now = {u: {tuple(x) for x in sim.get(f"/v1/ocs/{u}/cross-connects").json()["actual"]}
           for u in ("ocs0", "ocs1")}
    assert now != held
    ops = [op for op in sim.get("/v1/operations?fabric=r").json()["operations"] if op["id"] > before]
    assert sum(op["ndeletes"] for op in ops) == sum(len(held[u] - now[u]) for u in held) > 0
    assert all(op["fabrics"] == ["r"] for op in ops)


def test_wait_validation(sim):
    for bad in ("abc", "61", "-1", ""):
        r = sim.get(f"/v1/fabrics?wait={bad}")  # list ignores wait; the fabric routes check it
        r = sim.post(f"/v1/fabrics?wait={bad}", {"name": "w", "servers": ["srv0"]})
        assert r.status_code == 400 and error_of(r)["field"] == "wait", bad
    assert sim.get("/v1/fabrics/w").status_code == 404


def test_states_progress_with_delay(sim):
    # Applying for 1.5 s: long enough to be seen by polling on a busy machine.
    fault(sim, "ocs0", kind="delay", count=1500)
    fault(sim, "ocs1", kind="delay", count=1500)
    r = sim.post("/v1/fabrics", {"name": "slow", "servers": ["srv0", "srv1", "srv2", "srv3"]})
    assert r.json()["state"] == "pending"
    assert wait_for(lambda: sim.get("/v1/fabrics/slow").json()["state"] == "applying", timeout=3)
    t0 = time.time()
    f = sim.get("/v1/fabrics/slow?wait=10").json()
    assert f["state"] == "applied" and time.time() - t0 < 5
    # A wait that runs out answers with the state of that moment.
    fault(sim, "ocs0", kind="delay", count=3000)
    fault(sim, "ocs1", kind="delay", count=3000)
    sim.put("/v1/servers/srv0/devices/0", {"state": "failed"})
    t0 = time.time()
    f = sim.get("/v1/fabrics/slow?wait=0.5").json()
    assert 0.4 < time.time() - t0 < 2.5
    assert f["state"] in ("pending", "applying")


def test_failed_batches_then_recovery(sim):
    fault(sim, "ocs0", kind="fail_batches", count=3)
    f = sim.post("/v1/fabrics?wait=20", {"name": "f", "servers": ["srv0", "srv1", "srv2"]}).json()
    assert f["state"] == "applied", f
    ops = sim.get("/v1/operations?ocs=ocs0").json()["operations"]
    statuses = [op["status"] for op in reversed(ops)]
    assert statuses[:3] == ["failed"] * 3 and statuses[-1] == "succeeded"
    assert all(op["error"] for op in ops if op["status"] == "failed")
    assert [op["trigger"] for op in reversed(ops)][1:3] == ["retry", "retry"]


def test_persistent_failure_is_honest(sim):
    fault(sim, "ocs1", kind="fail_batches", count=6)
    f = sim.post("/v1/fabrics?wait=15", {"name": "f", "servers": ["srv0", "srv1", "srv2", "srv3"]}).json()
    assert f["state"] == "failed" and "ocs1" in f["error"]
    # Once the unit recovers the retries bring it to applied, and the error goes.
    f = wait_for(lambda: (lambda x: x if x["state"] == "applied" else None)(sim.get("/v1/fabrics/f").json()), timeout=40)
    assert f and "error" not in f


def test_partial_batch(sim):
    fault(sim, "ocs0", kind="partial", count=2)
    f = sim.post("/v1/fabrics?wait=10", {"name": "p", "servers": [f"srv{i}" for i in range(6)]}).json()
    assert f["state"] == "applied"
    assert in_sync(sim, "ocs0")


def test_disconnect(sim):
    sim.post("/v1/fabrics?wait=10", {"name": "d", "servers": ["srv0", "srv1", "srv2"]})
    fault(sim, "ocs0", kind="disconnect")
    assert wait_for(lambda: sim.get("/v1/ocs/ocs0").json()["connection"]["state"] == "connected", 5)
    assert sim.get("/v1/fabrics/d?wait=5").json()["state"] == "applied"
    # A disconnect in the middle of a batch.
    fault(sim, "ocs1", kind="delay", count=300)
    sim.post("/v1/fabrics", {"name": "e", "servers": ["srv3", "srv4", "srv5", "srv6"]})
    time.sleep(0.1)
    fault(sim, "ocs1", kind="disconnect")
    assert sim.get("/v1/fabrics/e?wait=10").json()["state"] == "applied"
    assert in_sync(sim, "ocs1")


def test_drift_repaired_by_audit(sim):
    sim.post("/v1/fabrics?wait=10", {"name": "a", "servers": ["srv0", "srv1", "srv2", "srv3"]})
    x, y = sim.get("/v1/ocs/ocs0/cross-connects").json()["desired"][0]
    drift = lambda n: f"ofcd_drift_repairs_total {n}\n" in sim.get("/metrics").text
    fault(sim, "ocs0", kind="clear_xc", a=x, b=y)
    # The next audit (every second here) finds it and puts it back.
    assert wait_for(lambda: drift(1) and in_sync(sim, "ocs0"), timeout=15)
    assert [x, y] in sim.get("/v1/ocs/ocs0/cross-connects").json()["actual"]
    # A cross-connect added by hand between two free ports is removed.
    fault(sim, "ocs0", kind="set_xc", a=60, b=61)
    assert wait_for(lambda: drift(2) and in_sync(sim, "ocs0"), timeout=15)
    assert [60, 61] not in sim.get("/v1/ocs/ocs0/cross-connects").json()["actual"]
    audits = [op for op in sim.get("/v1/operations?ocs=ocs0").json()["operations"] if op["trigger"] == "audit"]
    assert len(audits) == 2
    # Each audit also recomputed the reconciler's bookkeeping from scratch: it never differed.
    time.sleep(1.5)
    assert "\nofcd_reconcile_audit_mismatches_total 0\n" in sim.get("/metrics").text
    assert "ofcd_reconcile_work_cpu_seconds_total" in sim.get("/metrics").text


def test_isolation_violation_removed(sim):
    a = sim.post("/v1/fabrics?wait=10", {"name": "a", "servers": ["srv0", "srv1"]}).json()
    b = sim.post("/v1/fabrics?wait=10", {"name": "b", "servers": ["srv2", "srv3"]}).json()
    # Join a port of fabric a to a port of fabric b behind the controller's back.
    pa = next(l["a"]["ocs_port"] for l in a["links"] if l["a"]["ocs"] == "ocs0")
    pb = next(l["a"]["ocs_port"] for l in b["links"] if l["a"]["ocs"] == "ocs0")
    events = []
    stop = threading.Event()
    opened = threading.Event()

    def listen():
        with requests.get(sim.url("/v1/events"), stream=True, timeout=10) as r:
            opened.set()  # the daemon subscribes the stream before it answers
            for line in r.iter_lines():
                if line.startswith(b"data: "):
                    events.append(json.loads(line[6:]))
                if stop.is_set():
                    return
    t = threading.Thread(target=listen, daemon=True)
    t.start()
    assert opened.wait(10)
    fault(sim, "ocs0", kind="set_xc", a=pa, b=pb)
    assert wait_for(lambda: any(e.get("cross_connect") == sorted([pa, pb]) for e in events), timeout=5)
    v = next(e for e in events if e.get("cross_connect"))
    assert sorted(v["fabrics"]) == ["a", "b"] and v["ocs"] == "ocs0"
    assert wait_for(lambda: sim.get("/v1/fabrics/a?wait=5").json()["state"] == "applied"
                    and sim.get("/v1/fabrics/b").json()["state"] == "applied"
                    and in_sync(sim, "ocs0"), timeout=5)
    assert sorted([pa, pb]) not in sim.get("/v1/ocs/ocs0/cross-connects").json()["actual"]
    assert "ofcd_isolation_violations_total 1" in sim.get("/metrics").text
    stop.set()


def test_event_stream(sim):
    events = []
    opened = threading.Semaphore(0)

    def listen(path):
        with requests.get(sim.url(path), stream=True, timeout=10) as r:
            opened.release()  # the daemon subscribes the stream before it answers
            assert r.headers["Content-Type"] == "text/event-stream"
            kind = None
            for line in r.iter_lines():
                if line.startswith(b"event: "):
                    kind = line[7:].decode()
                elif line.startswith(b"data: "):
                    events.append((path, kind, json.loads(line[6:])))
    for path in ("/v1/events", "/v1/events?fabric=other"):
        threading.Thread(target=listen, args=(path,), daemon=True).start()
    assert opened.acquire(timeout=10) and opened.acquire(timeout=10)
    # A switching delay, as MEMS mirrors have, makes the applying state last long enough to see.
    fault(sim, "ocs0", kind="delay", count=200)
    fault(sim, "ocs1", kind="delay", count=200)
    sim.post("/v1/fabrics?wait=10", {"name": "ev", "servers": ["srv0", "srv1", "srv2"]})
    assert wait_for(lambda: any(k == "fabric_state" and e["state"] == "applied" for _, k, e in events), 5)
    kinds = [k for p, k, _ in events if p == "/v1/events"]
    assert "operation" in kinds and "fabric_state" in kinds
    states = [e["state"] for p, k, e in events if k == "fabric_state" and p == "/v1/events"]
    assert states[-1] == "applied" and "applying" in states
    # The filtered stream saw none of it.
    assert not [e for p, _, e in events if p == "/v1/events?fabric=other"]
    assert sim.get("/v1/events?fabric=a/b").status_code == 400


def test_faults_disabled(daemon):
    daemon.post("/v1/ocs", {"name": "u", "ports": 8})
    r = daemon.post("/v1/ocs/u/faults", {"kind": "disconnect"})
    assert r.status_code == 404 and "faults = true" in error_of(r)["message"]


def test_fault_input(sim):
    assert sim.post("/v1/ocs/ocs0/faults", {"kind": "melt"}).status_code == 400
    assert sim.post("/v1/ocs/ocs0/faults", {"kind": "set_xc", "a": 1}).status_code == 400
    assert sim.post("/v1/ocs/nope/faults", {"kind": "disconnect"}).status_code == 404
    # What the unit refuses names the port that is wrong.
    for body, field in (({"kind": "set_xc", "a": 1, "b": 60000}, "b"),
                        ({"kind": "set_xc", "a": 60000, "b": 2}, "a"),
                        ({"kind": "set_xc", "a": 3, "b": 3}, "b"),
                        ({"kind": "clear_xc", "a": 3, "b": 4}, "a")):
        r = sim.post("/v1/ocs/ocs0/faults", body)
        assert r.status_code == 422 and error_of(r)["field"] == field, (body, r.text)


def test_restart_reapplies(sim):
    sim.post("/v1/fabrics?wait=10", {"name": "r", "servers": [f"srv{i}" for i in range(8)]})
    before = {u: sim.get(f"/v1/ocs/{u}/cross-connects").json()["desired"] for u in ("ocs0", "ocs1")}
    sim.restart()
    # sim units live in the daemon: after a restart they start empty and are filled again.
    assert sim.get("/v1/fabrics/r?wait=10").json()["state"] == "applied"
    for u in ("ocs0", "ocs1"):
        x = sim.get(f"/v1/ocs/{u}/cross-connects").json()
        assert x["desired"] == before[u] == x["actual"]


def test_wait_on_fabric_deleted_meanwhile(sim):
    for u in ("ocs0", "ocs1"):
        fault(sim, u, kind="delay", count=3000)
    sim.post("/v1/fabrics", {"name": "gone", "servers": ["srv0", "srv1", "srv2"]})
    # The wait sent on a connection of its own, its answer read after the delete.
    waiter = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=30)
    waiter.request("GET", "/v1/fabrics/gone?wait=10")
    # Taken by the daemon (counted over sim's own connection: one more than it), and a moment
    # for its request, already sent, to be read before the delete comes.
    assert wait_for(lambda: open_connections(sim) >= 2)
    time.sleep(0.3)
    assert sim.delete("/v1/fabrics/gone").status_code == 202
    r = waiter.getresponse()
    body = json.loads(r.read())
    waiter.close()
    assert r.status == 404 and "deleted while waiting" in body["error"]["message"], body


def test_faults_are_audited(sim):
    fault(sim, "ocs0", kind="set_xc", a=60, b=61)
    sim.stop()
    rows = sqlite3.connect(sim.store).execute(
        "SELECT method, path, status FROM audit WHERE path LIKE '%faults'").fetchall()
    assert ("POST", "/v1/ocs/ocs0/faults", 200) in rows


def test_servers_not_reused_while_old_circuits_remain(sim):
    # A's batch is in flight when A is deleted: A's circuits land after the delete. Until they
    # are gone again, its servers may not join new fabrics, or a circuit could join B and C.
    for u in ("ocs0", "ocs1"):
        fault(sim, u, kind="delay", count=3000)
    sim.post("/v1/fabrics", {"name": "a", "servers": ["srv0", "srv1", "srv2", "srv3"]})
    # Deleted once its batches are sent (applying), while they take their 3 s.
    assert wait_for(lambda: sim.get("/v1/fabrics/a").json()["state"] == "applying")
    assert sim.delete("/v1/fabrics/a").status_code == 202
    r = sim.post("/v1/fabrics", {"name": "b", "servers": ["srv0", "srv1"]})
    e = error_of(r)
    assert r.status_code == 409 and e["code"] == "in_use" and e["field"] == "servers[0]", r.text
    assert "is joining port" in e["message"] and "fabric a" in e["message"], e
    assert sim.get("/v1/fabrics/b").status_code == 404
    # Once the units are read back empty, the servers are free again.
    assert wait_for(lambda: all(sim.get(f"/v1/ocs/{u}/cross-connects").json()["actual"] == []
                                and in_sync(sim, u) for u in ("ocs0", "ocs1")), timeout=30)
    for u in ("ocs0", "ocs1"):
        fault(sim, u, kind="delay", count=0)
    for name, servers in (("b", ["srv0", "srv1"]), ("c", ["srv2", "srv3"])):
        r = sim.post("/v1/fabrics?wait=10", {"name": name, "servers": servers})
        assert r.status_code == 201 and r.json()["state"] == "applied", r.text
    for u in ("ocs0", "ocs1"):
        x = sim.get(f"/v1/ocs/{u}/cross-connects").json()
        assert x["actual"] == x["desired"], (u, x)


def test_servers_held_by_a_stray_are_refused(sim):
    # A cross-connect made by hand on free servers' ports: once a read-back has seen it, and
    # until its removal is read back, neither server may join a fabric.
    mine = {p["ocs"]: p["ocs_port"] for p in sim.get("/v1/servers/srv4").json()["device_info"][0]["ports"]}
    peer = sim.get("/v1/servers/srv5").json()["device_info"][0]["ports"][0]
    unit, pair = peer["ocs"], sorted([mine[peer["ocs"]], peer["ocs_port"]])
    fault(sim, unit, kind="delay", count=4000)  # the repair takes 4 s
    fault(sim, unit, kind="set_xc", a=pair[0], b=pair[1])
    assert wait_for(lambda: pair in sim.get(f"/v1/ocs/{unit}/cross-connects").json()["actual"])
    r = sim.post("/v1/fabrics", {"name": "s", "servers": ["srv4", "srv6"]})
    assert r.status_code == 409 and error_of(r)["field"] == "servers[0]", r.text
    assert f"still joins port {mine[unit]} to port {peer['ocs_port']}" in error_of(r)["message"]
    assert sim.get("/v1/fabrics/s").status_code == 404
    assert wait_for(lambda: pair not in sim.get(f"/v1/ocs/{unit}/cross-connects").json()["actual"]
                    and in_sync(sim, unit), timeout=20)
    fault(sim, unit, kind="delay", count=0)
    r = sim.post("/v1/fabrics?wait=10", {"name": "s", "servers": ["srv4", "srv6"]})
    assert r.status_code == 201 and r.json()["state"] == "applied", r.text


def test_removal_waits_for_the_units_that_held_the_fabric_alone(sim):
    # A unit that never answers (down for maintenance) holds none of the fabric's circuits:
    # a DELETE ?wait= answers "removed" as soon as they are off ocs0 and ocs1, not at the end
    # of its wait (what a Slurm epilog or gc pass would spend on every delete).
    assert sim.post("/v1/ocs", dict(FAR, ports=8)).status_code == 201
    r = sim.post("/v1/fabrics?wait=10", {"name": "a", "servers": ["srv0", "srv1", "srv2"]})
    assert r.status_code == 201 and r.json()["state"] == "applied", r.text
    t0 = time.monotonic()
    r = sim.delete("/v1/fabrics/a?wait=30")
    assert r.status_code == 200 and r.json() == {"deleted": "a", "state": "removed"}, r.text
    assert time.monotonic() - t0 < 15
    for unit in ("ocs0", "ocs1"):
        assert sim.get(f"/v1/ocs/{unit}/cross-connects").json()["actual"] == []
    # Deleted while its batches are still on their way: "removed" only once the circuits
    # that landed after the delete are read back gone.
    for u in ("ocs0", "ocs1"):
        fault(sim, u, kind="delay", count=1500)
    assert sim.post("/v1/fabrics", {"name": "b", "servers": ["srv3", "srv4"]}).status_code == 201
    assert wait_for(lambda: sim.get("/v1/fabrics/b").json()["state"] == "applying")
    r = sim.delete("/v1/fabrics/b?wait=30")
    assert r.status_code == 200 and r.json()["state"] == "removed", r.text
    for unit in ("ocs0", "ocs1"):
        assert sim.get(f"/v1/ocs/{unit}/cross-connects").json()["actual"] == []
    for u in ("ocs0", "ocs1"):
        fault(sim, u, kind="delay", count=0)
    # A removal batch that applied only one of its operations: removed once the retry is.
    r = sim.post("/v1/fabrics?wait=10", {"name": "d", "servers": ["srv0", "srv1", "srv2",
                                                                   "srv3"]})
    assert r.status_code == 201 and r.json()["state"] == "applied", r.text
    for u in ("ocs0", "ocs1"):
        fault(sim, u, kind="partial", count=1)
    r = sim.delete("/v1/fabrics/d?wait=20")
    assert r.status_code == 200 and r.json()["state"] == "removed", r.text
    for u in ("ocs0", "ocs1"):
        x = sim.get(f"/v1/ocs/{u}/cross-connects").json()
        held = {p for xc in x["actual"] + x["partial"] for p in xc}
        mine = {p["ocs_port"] for s in ("srv0", "srv1", "srv2", "srv3")
                for d in sim.get(f"/v1/servers/{s}").json()["device_info"]
                for p in d["ports"] if p["ocs"] == u}
        assert not held & mine, (u, x)
    # A unit that held the fabric's circuits and stops answering holds the removal up.
    r = sim.post("/v1/fabrics?wait=10", {"name": "c", "servers": ["srv5", "srv6"]})
    assert r.status_code == 201 and r.json()["state"] == "applied", r.text
    fault(sim, "ocs0", kind="fail_batches", count=1000)
    r = sim.delete("/v1/fabrics/c?wait=3")
    assert r.status_code == 202 and r.json() == {"deleted": "c", "state": "removing"}, r.text
    assert sim.get("/v1/ocs/ocs0/cross-connects").json()["actual"] != []


def test_a_server_says_which_ports_a_unit_may_still_join_and_waits_for_them(sim):
    # A deleted fabric's circuits stay on units that do not take batches: its servers' ports
    # are listed as "joined", a ?wait= holds until they are not, and a free server has none.
    r = sim.post("/v1/fabrics?wait=10", {"name": "a", "servers": ["srv0", "srv1"]})
    assert r.status_code == 201 and r.json()["state"] == "applied", r.text
    assert sim.get("/v1/servers/srv0").json()["joined"] == []
    for u in ("ocs0", "ocs1"):
        fault(sim, u, kind="fail_batches", count=100000)
    assert sim.delete("/v1/fabrics/a?wait=1").json()["state"] == "removing"
    # Two servers: one circuit, on device 0's port.
    j = sim.get("/v1/servers/srv0").json()
    port = j["device_info"][0]["ports"][0]
    assert j["joined"] == [{"device": 0, "port": 0, "ocs": port["ocs"],
                            "ocs_port": port["ocs_port"], "why": j["joined"][0]["why"]}], j
    assert "a circuit of fabric a" in j["joined"][0]["why"], j
    assert sim.get("/v1/servers/srv5").json()["joined"] == []
    # The servers that have such ports, each as listed plus its joined.
    listed = sim.get("/v1/servers?joined=true").json()["servers"]
    assert [s["name"] for s in listed] == ["srv0", "srv1"], listed
    assert listed[0]["joined"] == j["joined"] and listed[0]["fabric"] is None, listed
    assert listed[0]["stale"] is False
    r = sim.get("/v1/servers?joined=yes")
    assert r.status_code == 400 and error_of(r)["field"] == "joined", r.text
    t0 = time.monotonic()
    r = sim.get("/v1/servers/srv1?wait=1.5")
    assert r.status_code == 200 and len(r.json()["joined"]) == 1, r.text
    assert time.monotonic() - t0 >= 1.4
    r = sim.get("/v1/servers/srv1?wait=-1")
    assert r.status_code == 400 and error_of(r)["field"] == "wait", r.text
    assert sim.get("/v1/servers/nope?wait=1").status_code == 404
    # The units take batches again while a wait is held: it ends once the circuits are gone.
    done = {}
    waiter = threading.Thread(target=lambda: done.update(r=sim.get("/v1/servers/srv0?wait=30")))
    waiter.start()
    time.sleep(0.5)
    for u in ("ocs0", "ocs1"):
        fault(sim, u, kind="fail_batches", count=0)
    waiter.join(40)
    r = done["r"]
    assert r.status_code == 200 and r.json()["joined"] == [], r.text
    assert sim.get("/v1/servers?joined=true").json() == {"servers": []}
    for u in ("ocs0", "ocs1"):
        assert sim.get(f"/v1/ocs/{u}/cross-connects").json()["actual"] == []


def test_unit_holding_circuits_is_not_forgotten(tmp_path):
    d = Daemon(tmp_path).start()
    try:
        assert d.post("/v1/ocs", dict(FAR, ports=8)).status_code == 201
        r = d.delete("/v1/ocs/far")
        assert r.status_code == 409 and error_of(r)["code"] == "in_use"
        assert "not been read back" in error_of(r)["message"]
        r = d.put("/v1/topology", {"ocs": [], "servers": []})
        assert r.status_code == 409 and error_of(r)["field"] == "ocs"
        assert d.delete("/v1/ocs/far?force=yes").status_code == 400
        assert d.delete("/v1/ocs/far?force=true").status_code == 200
        # sim units live in the daemon: they can always go.
        d.post("/v1/ocs", {"name": "near", "ports": 8})
        assert d.delete("/v1/ocs/near").status_code == 200
    finally:
        d.stop()


def far_cluster(d, ports=16, servers=4):
    """Unit far (FAR) and servers of one device cabled to it by rule; each server's OCS
    port."""
    assert d.post("/v1/ocs", dict(FAR, ports=ports)).status_code == 201
    for s in range(servers):
        assert d.post("/v1/servers", {"name": f"srv{s}", "devices": 1}).status_code == 201
    assert d.put("/v1/wiring", {"rule": "plane-per-ocs"}).status_code == 200
    return {l["server"]: l["ocs_port"] for l in d.get("/v1/wiring").json()["links"]}


def restart_holding(d, a, b):
    """Restarts d with its last read-back of unit far holding cross-connect a-b: a deleted
    fabric's circuit left on a unit that has not answered since."""
    d.stop()
    db = sqlite3.connect(d.store)
    ocs_id = db.execute("SELECT id FROM ocs WHERE name = 'far'").fetchone()[0]
    db.execute("INSERT INTO actual_xc(ocs_id, a, b) VALUES (?, ?, ?)", (ocs_id, min(a, b), max(a, b)))
    db.commit()
    db.close()
    d.start()


def test_unreachable_unit_leftovers_hold_servers_after_restart(tmp_path):
    # A unit that held a deleted fabric's circuit is unreachable after a restart: what it
    # holds is unknown until it is read back, so the last stored read-back is trusted for the
    # reservation and the servers it joined stay out of new fabrics.
    d = Daemon(tmp_path).start()
    try:
        port = far_cluster(d)
        restart_holding(d, port["srv0"], port["srv1"])
        r = d.post("/v1/fabrics", {"name": "x", "servers": ["srv2", "srv0"]})
        assert r.status_code == 409 and error_of(r)["field"] == "servers[1]", r.text
        a, b = sorted([port["srv0"], port["srv1"]])
        assert f"far still joins port {a} to port {b}" in error_of(r)["message"]
        listed = d.get("/v1/servers?joined=true").json()["servers"]
        assert [(s["name"], [(j["ocs"], j["ocs_port"]) for j in s["joined"]]) for s in listed] == \
            [("srv0", [("far", port["srv0"])]), ("srv1", [("far", port["srv1"])])], listed
        # Servers the unit was not known to join are free.
        assert d.post("/v1/fabrics", {"name": "y", "servers": ["srv2", "srv3"]}).status_code == 201
    finally:
        d.stop()


def test_recabling_onto_a_leftover_port_is_refused(tmp_path):
    # A unit that does not answer still joins two ports of a deleted fabric: a wiring that
    # cables another server onto one of them would join that server to the other end (a
    # server of another tenant perhaps), so it is refused; a free OCS port takes the cable.
    d = Daemon(tmp_path).start()
    try:
        port = far_cluster(d)
        links = d.get("/v1/wiring").json()["links"]
        restart_holding(d, port["srv0"], port["srv1"])
        before = d.get("/v1/wiring").json()
        # srv0's cable comes off its port and srv3's goes onto it.
        moved = [dict(l, ocs_port=port["srv0"]) if l["server"] == "srv3" else l
                 for l in links if l["server"] != "srv0"]
        for put in (lambda: d.put("/v1/wiring", {"links": moved}),
                    lambda: d.put("/v1/topology", dict(d.get("/v1/topology").json(),
                                                       wiring={"links": moved}))):
            r = put()
            assert r.status_code == 409 and error_of(r)["code"] == "in_use", r.text
            assert error_of(r)["field"] in ("links", "wiring"), r.text
            msg = error_of(r)["message"]
            assert "server srv3 device 0 port 0" in msg and f"far still joins port {port['srv0']}" in msg, msg
            assert d.get("/v1/wiring").json() == before
        free = max(port.values()) + 1
        # Nor may srv0's cable leave the port: the record may change before the fibre moves,
        # and srv0, free on paper, would still be joined to srv1. (The code before took it.)
        moved = [dict(l, ocs_port=free) if l["server"] == "srv3" else l
                 for l in links if l["server"] != "srv0"]
        r = d.put("/v1/wiring", {"links": moved})
        assert r.status_code == 409 and error_of(r)["code"] == "in_use", r.text
        assert (f"takes server srv0 device 0 port 0 off a port that OCS unit far still joins "
                f"port {port['srv0']}") in error_of(r)["message"], r.text
        moved = [dict(l, ocs_port=free) if l["server"] == "srv3" else l for l in links]
        assert d.put("/v1/wiring", {"links": moved}).status_code == 200
        assert {l["server"]: l["ocs_port"] for l in d.get("/v1/wiring").json()["links"]}["srv3"] == free
    finally:
        d.stop()


def test_a_rule_in_parts_onto_a_leftover_port_is_refused(tmp_path):
    # The same for a rule's cabling of more than 8,192 cables into an empty table, made a part
    # at a time: the ports the rule would hand out are checked before the first part.
    d = Daemon(tmp_path).start()
    try:
        assert d.post("/v1/ocs", dict(FAR, ports=10000)).status_code == 201
        restart_holding(d, 9001, 9500)
        for s in range(2):
            assert d.post("/v1/servers", {"name": f"srv{s}", "devices": 64,
                                          "ports_per_device": 72}).status_code == 201
        r = d.put("/v1/wiring", {"rule": "plane-per-ocs"})
        assert r.status_code == 409 and error_of(r)["code"] == "in_use", r.text
        assert "far still joins port 9001 to port 9500" in error_of(r)["message"], r.text
        w = d.get("/v1/wiring").json()
        assert w["links"] == [] and not w.get("partial"), w
        # Fewer servers, fewer ports: the rule stops short of the leftover.
        assert d.delete("/v1/servers/srv1").status_code == 200
        assert d.put("/v1/wiring", {"rule": "plane-per-ocs"}).status_code == 200
        assert len(d.get("/v1/wiring").json()["links"]) == 64 * 72
    finally:
        d.stop()


def test_summary_view(sim):
    """?view=summary: a fabric without the lists of its plan, wherever a fabric is replied."""
    servers = [f"srv{i}" for i in range(6)]
    r = sim.post("/v1/fabrics?wait=10&view=summary", {"name": "a", "servers": servers})
    assert r.status_code == 201
    a = r.json()
    assert a["state"] == "applied" and "links" not in a and "servers" not in a
    assert (a["server_count"], a["circuits"], a["missing"]) == (6, 15, 0)
    full = sim.get("/v1/fabrics/a").json()
    assert len(full["links"]) == 15 and full["servers"] == servers
    for k in ("name", "state", "revision", "formula", "planes", "min_devices", "created"):
        assert a[k] == full[k]
    assert sim.get("/v1/fabrics/a?view=summary").json() == sim.get("/v1/fabrics/a?view=summary&wait=1").json()
    # Without waiting, the reply counts the circuits the request just stored.
    b = sim.post("/v1/fabrics?view=summary", {"name": "b", "servers": ["srv6", "srv7"]}).json()
    assert (b["server_count"], b["circuits"]) == (2, 1)
    listed = sim.get("/v1/fabrics?view=summary").json()["fabrics"]
    assert [f["name"] for f in listed] == ["a", "b"] and all("servers" not in f for f in listed)
    assert listed[0]["circuits"] == 15
    assert sim.get("/v1/fabrics").json()["fabrics"][0]["servers"] == servers
    assert sim.get("/v1/fabrics?view=full").status_code == 200
    r = sim.get("/v1/fabrics/a?view=links")
    assert r.status_code == 400 and error_of(r)["field"] == "view"


def test_operations_pages(sim):
    """GET /v1/operations pages newest first: ?before= the last id of a page gives the next."""
    for i in range(3):
        assert sim.post("/v1/fabrics?wait=10", {"name": f"f{i}", "servers": [f"srv{2 * i}", f"srv{2 * i + 1}"]}).status_code == 201
    every = sim.get("/v1/operations?limit=1000").json()
    assert "next" not in every
    ids = [o["id"] for o in every["operations"]]
    assert len(ids) >= 3 and ids == sorted(ids, reverse=True)
    seen, before = [], None
    while True:
        page = sim.get("/v1/operations?limit=2" + (f"&before={before}" if before else "")).json()
        seen += [o["id"] for o in page["operations"]]
        if "next" not in page:
            break
        before = page["next"]
        assert before == page["operations"][-1]["id"]
    assert seen == ids
    for bad in ("before=0", "before=x"):
        r = sim.get(f"/v1/operations?{bad}")
        assert r.status_code == 400 and error_of(r)["field"] == "before"


def audit_counts(d):
    text = d.get("/metrics").text
    return {k: int(float(text.split(f"\nofcd_reconcile_audit_{k}_total ")[1].split()[0]))
            for k in ("rounds", "units", "cycles", "mismatches")}


def test_audit_recomputes_a_share_of_large_units_per_round(tmp_path):
    """The recomputation's cost per round is bounded: 2,048 ports per second of the interval,
    at least one unit. Three units of 65,536 ports take a round each; every round still reads
    every unit back, so drift on any of them is repaired within one interval."""
    d = Daemon(tmp_path, extra=FAULTS).start()
    try:
        for u in range(3):
            assert d.post("/v1/ocs", {"name": f"big{u}", "driver": "sim",
                                      "ports": 65536}).status_code == 201
        assert d.post("/v1/ocs", {"name": "small", "driver": "sim", "ports": 64}).status_code == 201
        assert wait_for(lambda: audit_counts(d)["rounds"] >= 6, timeout=30)
        c = audit_counts(d)
        # big0, big1, big2, small: ids in that order; a round takes one big unit, or the small
        # one and the next big one (the budget is spent only once a unit crosses it).
        assert c["rounds"] - 1 <= c["units"] <= 2 * c["rounds"] + 2, c
        assert c["units"] >= 4 and c["cycles"] >= 1 and c["cycles"] <= c["units"] // 3, c
        assert c["mismatches"] == 0, c
        # Drift on the unit last recomputed long ago is still found by the next read-back.
        fault(d, "big2", kind="set_xc", a=65000, b=65001)
        assert wait_for(lambda: "ofcd_drift_repairs_total 1\n" in d.get("/metrics").text
                        and in_sync(d, "big2"), timeout=10)
        assert [65000, 65001] not in d.get("/v1/ocs/big2/cross-connects").json()["actual"]
    finally:
        d.stop()


def test_audit_work_is_counted_apart(sim):
    """What a change costs reads without the audit: idle, only the audit's counter moves."""
    def counters():
        text = sim.get("/metrics").text
        return [float(text.split(f"\n{k} ")[1].split()[0]) for k in (
            "ofcd_reconcile_work_cpu_seconds_total", "ofcd_reconcile_audit_work_cpu_seconds_total")]
    assert sim.post("/v1/fabrics?wait=10", {"name": "a", "servers": ["srv0", "srv1"]}).json()["state"] == "applied"
    time.sleep(2.5)  # the read-back after the batch, its copy in the store (1 s later) are done
    # Two audit rounds in which the change's counter stands still; on a busy machine the
    # change's own work may run into the first window, so a few windows are allowed. Audit
    # work counted as the change's would move it in every one.
    deadline = time.monotonic() + 30
    while True:
        r0 = audit_counts(sim)["rounds"]
        change, audit = counters()
        assert wait_for(lambda: audit_counts(sim)["rounds"] >= r0 + 2, timeout=10)
        change2, audit2 = counters()
        assert audit2 > audit
        if change2 == change:
            break
        assert time.monotonic() < deadline, (change, change2)
    assert sim.delete("/v1/fabrics/a?wait=10").status_code == 200
    assert counters()[0] > change2
