"""The cost model fitted to the cluster (issue 30): POST /v1/cost/calibrate from JSON runs and
from nccl-tests' result lines, the named parameter sets, the active one in every selection, and
refusals that name the field and store nothing.

The "measured" runs here come from the daemon's own what-if with hidden terms set, so the fit
must find those terms again; tests/fidelity/calibration.py does the same against SimGrid."""
import threading
import time

import requests

from conftest import error_of

HIDDEN = {"alpha_us": 7.0, "launch_us": 12.0, "overhead_us": 1.5, "link_efficiency": 0.85,
          "device_link_gbps": 500.0, "ports_per_device": 2, "relay": "store-and-forward"}
CASES = [("allreduce", "ring"), ("allreduce", "recursive-halving-doubling"),
         ("allreduce", "full-mesh-direct"), ("allgather", "ring"),
         ("broadcast", "binomial-tree"), ("broadcast", "scatter-allgather")]
SIZES = (8, 65536, 16 << 20, 1 << 30)


def predicted(d, coll, alg, servers, devices, nbytes, params=None, param_set=None):
    body = {"collective": coll, "bytes": nbytes, "servers": servers, "devices": devices}
    if params:
        body["params"] = params
    if param_set:
        body["param_set"] = param_set
    r = d.post("/v1/collective/select", body)
    assert r.status_code == 200, r.text
    return next(c for c in r.json()["candidates"] if c["algorithm"] == alg)["predicted_us"]


def measured_runs(d):
    runs = []
    for coll, alg in CASES:
        for servers in (4, 8):
            for q in SIZES:
                runs.append({"collective": coll, "algorithm": alg, "servers": servers,
                             "devices": 8, "bytes": q,
                             "measured_us": predicted(d, coll, alg, servers, 8, q, HIDDEN)})
    return runs


def test_calibrate_finds_the_hidden_terms_and_activates_on_request(daemon):
    d = daemon
    runs = measured_runs(d)
    before = predicted(d, "allreduce", "ring", 6, 8, 1 << 20)
    r = d.post("/v1/cost/calibrate", {"name": "lab", "runs": runs,
                                      "params": {"ports_per_device": 2},
                                      "provenance": {"cluster": "lab", "tool": "test"}})
    assert r.status_code == 201, r.text
    assert r.headers["Location"] == "/v1/cost/params/lab"
    s = r.json()
    assert s["name"] == "lab" and s["active"] is False
    fit = s["fit"]
    assert fit["runs"] == len(runs) and fit["rms"] < 1e-4 and fit["within_5"] == len(runs)
    assert fit["start_rms"] > 0.2
    assert fit["relay"] == "store-and-forward" and fit["relay_determined"]
    for term in ("alpha_us", "launch_us", "overhead_us", "device_link_gbps"):
        assert abs(s["params"][term] - HIDDEN[term]) < 1e-3 * HIDDEN[term], term
    assert abs(s["params"]["link_efficiency"] - 0.85) < 1e-3
    assert fit["terms"]["switch_alpha_us"] == "no run depends on it"
    assert "switch_alpha_us" in fit["undetermined"]
    assert len(fit["residuals"]) == len(runs)
    assert s["provenance"] == {"source": "runs", "runs": len(runs),
                               "facts": {"link_gbps": 400.0, "intra_gbps": 512.0,
                                         "ports_per_device": 2},
                               "note": {"cluster": "lab", "tool": "test"}}
    # Stored, not active: selections are as they were until it is made active.
    assert predicted(d, "allreduce", "ring", 6, 8, 1 << 20) == before
    view = d.get("/v1/cost/params").json()
    assert view["active"] is None and view["fit"] is None
    assert [x["name"] for x in view["sets"]] == ["lab"]
    assert "residuals" not in view["sets"][0]["fit"]
    assert len(d.get("/v1/cost/params/lab").json()["fit"]["residuals"]) == len(runs)
    # A what-if can name the set; the active one prices every selection.
    hidden = predicted(d, "allreduce", "ring", 6, 8, 1 << 20, HIDDEN)
    assert abs(predicted(d, "allreduce", "ring", 6, 8, 1 << 20, {"ports_per_device": 2},
                         param_set="lab") - hidden) < 1e-3 * hidden
    r = d.put("/v1/cost/active", {"name": "lab"})
    assert r.status_code == 200 and r.json() == {"active": "lab"}
    assert abs(predicted(d, "allreduce", "ring", 6, 8, 1 << 20, {"ports_per_device": 2}) -
               hidden) < 1e-3 * hidden
    view = d.get("/v1/cost/params").json()
    assert view["active"] == "lab" and view["fit"]["rms"] < 1e-4
    assert view["params"]["relay"] == "store-and-forward"
    # Stage transfers price the same links with the same step latency and efficiency.
    tx = d.post("/v1/transmission/select", {"aggregation": "none", "bytes": 1 << 20,
                                            "source": {"devices": 8, "circuit_device": 1},
                                            "target": {"devices": 8, "circuit_device": 6}})
    assert tx.status_code == 200, tx.text
    assert abs(tx.json()["params"]["inter_latency_us"] - view["params"]["alpha_us"]) < 1e-9
    assert abs(tx.json()["params"]["inter_gbps"] - 400 * view["params"]["link_efficiency"]) < 1e-6
    # The active set cannot be deleted; with none active it can.
    r = d.delete("/v1/cost/params/lab")
    assert r.status_code == 409 and error_of(r)["code"] == "in_use"
    assert d.put("/v1/cost/active", {"name": None}).json() == {"active": None}
    assert predicted(d, "allreduce", "ring", 6, 8, 1 << 20) == before
    assert d.delete("/v1/cost/params/lab").status_code == 200
    assert d.get("/v1/cost/params/lab").status_code == 404


def test_calibrate_survives_a_restart(daemon):
    d = daemon
    r = d.post("/v1/cost/calibrate", {"name": "kept", "runs": measured_runs(d)[:12],
                                      "activate": True})
    assert r.status_code == 201, r.text
    alpha = r.json()["params"]["alpha_us"]
    d.restart()
    view = d.get("/v1/cost/params").json()
    assert view["active"] == "kept" and view["params"]["alpha_us"] == alpha


def test_a_set_keeps_its_sync_mode(daemon):
    """"sync": "pairwise" (no barrier between rounds) rides in a set as the relay mode does: the
    set keeps it across a restart and prices all-to-all without the barrier (on 8 servers of 8
    devices at 16 MiB that changes the pick, and "dataflow" changes it back); all-to-all runs
    are not fitted under it."""
    d = daemon
    r = d.post("/v1/cost/calibrate", {"name": "pw", "runs": measured_runs(d)[:12],
                                      "params": {"sync": "pairwise"}, "activate": True})
    assert r.status_code == 201, r.text
    assert r.json()["params"]["sync"] == "pairwise"
    d.restart()
    assert d.get("/v1/cost/params").json()["params"]["sync"] == "pairwise"
    body = {"collective": "alltoall", "bytes": 16 << 20, "servers": 8, "devices": 8,
            "params": {"alpha_us": 3, "link_gbps": 400, "intra_alpha_us": 2, "intra_gbps": 512}}
    free = d.post("/v1/collective/select", body).json()
    barrier = d.post("/v1/collective/select",
                     dict(body, params=dict(body["params"], sync="barrier"))).json()
    assert free["params"]["sync"] == "pairwise" and barrier["params"]["sync"] == "barrier"
    assert (free["algorithm"], barrier["algorithm"]) == ("direct", "plane-relayed")
    # A library that posts every send at once: plane-relayed again, by less than either.
    dataflow = d.post("/v1/collective/select",
                      dict(body, params=dict(body["params"], sync="dataflow"))).json()
    assert dataflow["params"]["sync"] == "dataflow" and dataflow["algorithm"] == "plane-relayed"
    prices = {s: {c["algorithm"]: c["predicted_us"] for c in x["candidates"]}
              for s, x in (("free", free), ("dataflow", dataflow))}
    assert prices["dataflow"]["plane-relayed"] < prices["free"]["plane-relayed"]
    run = {"collective": "alltoall", "algorithm": "direct", "servers": 4, "devices": 8,
           "bytes": 1 << 20, "measured_us": 500.0}
    r = d.post("/v1/cost/calibrate", {"name": "a2a", "runs": [run],
                                      "params": {"sync": "pairwise"}})
    assert r.status_code == 422 and error_of(r)["field"] == "params.sync", r.text
    r = d.post("/v1/collective/select", dict(body, params={"sync": "free"}))
    assert r.status_code == 400 and error_of(r)["field"] == "params.sync", r.text
    assert [x["name"] for x in d.get("/v1/cost/params").json()["sets"]] == ["pw"]


NCCL_TESTS = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 64(factor) warmup iters: 5 iters: 20
#
# Using devices
#  Rank  0 Group  0 Pid  12345 on     node01 device  0 [0x1b] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
{lines}
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 123.4
#
"""


def test_calibrate_from_nccl_tests_lines(daemon):
    d = daemon
    lines = []
    for q in SIZES:
        us = predicted(d, "allreduce", "ring", 8, 8, q, HIDDEN)
        lines.append(f"{q:>12} {q // 4:>13}     float     sum      -1 {us:>8.2f}   0.00   0.00"
                     f"      0 {us * 1.01:>8.2f}   0.00   0.00      0")
    text = NCCL_TESTS.format(lines="\n".join(lines))
    body = {"name": "nccl", "nccl_tests": {"text": text, "collective": "allreduce",
                                           "algorithm": "ring", "servers": 8, "devices": 8},
            "fit": ["alpha_us", "link_efficiency"]}
    r = d.post("/v1/cost/calibrate", body)
    assert r.status_code == 201, r.text
    s = r.json()
    assert s["provenance"]["source"] == "nccl-tests" and s["fit"]["runs"] == 4
    assert [x["bytes"] for x in s["fit"]["residuals"]] == list(SIZES)
    # A relay mode among the known facts is taken, not fitted.
    r = d.post("/v1/cost/calibrate", dict(body, name="nccl-relay", fit=["alpha_us", "relay"],
                                          params={"relay": "cut-through"}))
    assert r.status_code == 201, r.text
    assert r.json()["params"]["relay"] == "cut-through" and "relay" not in r.json()["fit"]["undetermined"]
    # Only what was asked is fitted; the relay is not chosen.
    assert set(s["fit"]["terms"]) == {"alpha_us", "link_efficiency"}
    # The in-place column on request: 1 % slower.
    body["name"] = "nccl-in-place"
    body["nccl_tests"]["in_place"] = True
    r = d.post("/v1/cost/calibrate", body)
    assert r.status_code == 201, r.text
    got = [x["measured_us"] for x in r.json()["fit"]["residuals"]]
    want = [x["measured_us"] * 1.01 for x in s["fit"]["residuals"]]
    assert all(abs(a - b) < 0.02 for a, b in zip(got, want))


def test_calibrate_refusals_name_the_field_and_store_nothing(daemon):
    d = daemon
    good = {"collective": "allreduce", "algorithm": "ring", "servers": 4, "devices": 8,
            "bytes": 1024, "measured_us": 30.0}

    def refused(body, status, field):
        r = d.post("/v1/cost/calibrate", body)
        assert r.status_code == status, r.text
        assert error_of(r)["field"] == field, r.text

    refused({"runs": [good]}, 400, "name")
    refused({"name": "x"}, 400, "runs")
    refused({"name": "x", "runs": []}, 400, "runs")
    refused({"name": "x", "runs": [dict(good, algorithm="fastest")]}, 400, "runs[0].algorithm")
    refused({"name": "x", "runs": [good, dict(good, measured_us=0)]}, 400, "runs[1].measured_us")
    refused({"name": "x", "runs": [dict(good, servers=1)]}, 400, "runs[0].servers")
    refused({"name": "x", "runs": [dict(good, speed=1)]}, 400, "runs[0].speed")
    # A cube needs exactly 8 servers: the run cannot be priced.
    refused({"name": "x", "runs": [dict(good, algorithm="cube-300", servers=6)]}, 422,
            "runs[0].algorithm")
    nccl = {"text": "1024 256 float sum -1 30.0 0 0 0\n", "collective": "allreduce",
            "algorithm": "cube-300", "servers": 6, "devices": 8}
    r = d.post("/v1/cost/calibrate", {"name": "x", "nccl_tests": nccl})
    assert r.status_code == 422 and error_of(r)["field"] == "nccl_tests.algorithm", r.text
    assert error_of(r)["message"].startswith("nccl_tests line 1: ")
    refused({"name": "x", "runs": [good], "fit": ["link_gbps"]}, 400, "fit")
    refused({"name": "x", "runs": [good], "relay": "teleport"}, 400, "relay")
    refused({"name": "x", "runs": [good], "params": {"link_efficiency": 2}}, 400,
            "params.link_efficiency")
    refused({"name": "x", "nccl_tests": {"text": "# nothing\n", "collective": "allreduce",
                                         "algorithm": "ring", "servers": 4, "devices": 8}},
            400, "nccl_tests.text")
    refused({"name": "x", "nccl_tests": {"text": "1024 256 float sum -1 abc 0 0 0\n",
                                         "collective": "allreduce", "algorithm": "ring",
                                         "servers": 4, "devices": 8}}, 400, "nccl_tests.text")
    refused({"name": "x", "nccl_tests": {"text": "1024 256 float sum -1 3.0 0 0 0\n",
                                         "collective": "allreduce", "algorithm": "ring",
                                         "servers": 4}}, 400, "nccl_tests.devices")
    # A time as nccl-tests prints it, nothing strtod() would also take; a run whose own
    # check found wrong results is no measurement.
    for line in ("1024 256 float sum -1 0x10 0 0 0", "1024 256 float sum -1 1e3 0 0 0",
                 "1024 256 float sum -1 30.0 0 0 3"):
        refused({"name": "x", "nccl_tests": {"text": line + "\n", "collective": "allreduce",
                                             "algorithm": "ring", "servers": 4, "devices": 8}},
                400, "nccl_tests.text")
    assert d.get("/v1/cost/params").json()["sets"] == []
    assert d.post("/v1/cost/calibrate", {"name": "x", "runs": [good]}).status_code == 201
    refused({"name": "x", "runs": [good]}, 409, "name")
    r = d.put("/v1/cost/active", {"name": "nope"})
    assert r.status_code == 404 and error_of(r)["field"] == "name"
    assert d.put("/v1/cost/active", {}).status_code == 400
    r = d.post("/v1/collective/select", {"collective": "allreduce", "bytes": 8, "servers": 4,
                                         "devices": 8, "param_set": "nope"})
    assert r.status_code == 404 and error_of(r)["field"] == "param_set"
    assert d.get("/v1/cost/params").json()["active"] is None


def test_calibrate_reads_the_time_column_from_the_header_and_bounds_its_work(daemon):
    d = daemon
    # A release without the root column: the header says where the times are.
    text = ("#       size         count      type   redop     time   algbw   busbw  error"
            "     time   algbw   busbw  error\n"
            "        1024           256     float     sum    31.50    0.03    0.06  0e+00"
            "    32.00    0.03    0.06  0e+00\n"
            "     1048576        262144     float     sum   140.25    7.48   14.02  0e+00"
            "   150.00    6.99   13.11  0e+00\n")
    body = {"name": "old", "fit": ["alpha_us"],
            "nccl_tests": {"text": text, "collective": "allreduce", "algorithm": "ring",
                           "servers": 4, "devices": 4, "in_place": True}}
    r = d.post("/v1/cost/calibrate", body)
    assert r.status_code == 201, r.text
    assert [x["measured_us"] for x in r.json()["fit"]["residuals"]] == [32.0, 150.0]
    # All-to-all runs priced round by round are bounded as a whole, before any is priced.
    big = {"collective": "alltoall", "algorithm": "direct", "servers": 16, "devices": 16,
           "bytes": 1 << 20, "measured_us": 1000.0}
    r = d.post("/v1/cost/calibrate", {"name": "big", "runs": [big] * 40})
    assert r.status_code == 422 and error_of(r)["field"] == "runs", r.text
    assert "messages priced round by round" in error_of(r)["message"]
    assert d.get("/v1/cost/params/big").status_code == 404


def test_calibrate_takes_the_facts_of_a_fabric(daemon):
    """A fabric of 2-port devices: its busiest device ends two circuits, which the fit assumes
    share a host link; a fabric that does not exist is refused, naming it."""
    d = daemon
    topo = {"ocs": [{"name": f"ocs{u}", "driver": "sim", "ports": 32, "endpoint": ""}
                    for u in range(8)],
            "servers": [{"name": f"s{i}", "devices": 4, "ports_per_device": 2}
                        for i in range(8)],
            "wiring": {"rule": "plane-per-ocs"}}
    assert d.put("/v1/topology", topo).status_code == 200
    r = d.post("/v1/fabrics", {"name": "job", "servers": [f"s{i}" for i in range(8)]})
    assert r.status_code == 201, r.text
    run = {"collective": "allreduce", "algorithm": "full-mesh-direct", "servers": 8,
           "devices": 4, "bytes": 1 << 24, "measured_us": 900.0}
    r = d.post("/v1/cost/calibrate", {"name": "f", "runs": [run], "fabric": "job",
                                      "fit": ["link_efficiency"]})
    assert r.status_code == 201, r.text
    assert r.json()["provenance"]["facts"]["ports_per_device"] == 2
    r = d.post("/v1/cost/calibrate", {"name": "g", "runs": [run], "fabric": "nope"})
    assert r.status_code == 422 and error_of(r)["field"] == "fabric", r.text


def two_port_fabric(d, name="job", servers=8):
    """servers servers of 4 devices with 2 ports each, all in fabric name: its busiest device
    ends two circuits."""
    topo = {"ocs": [{"name": f"ocs{u}", "driver": "sim", "ports": 32, "endpoint": ""}
                    for u in range(8)],
            "servers": [{"name": f"s{i}", "devices": 4, "ports_per_device": 2}
                        for i in range(servers)],
            "wiring": {"rule": "plane-per-ocs"}}
    assert d.put("/v1/topology", topo).status_code == 200
    r = d.post("/v1/fabrics", {"name": name, "servers": [f"s{i}" for i in range(servers)]})
    assert r.status_code == 201, r.text


def nccl_text(d, coll, alg, servers, devices, header):
    lines = [header] if header else []
    for q in SIZES:
        us = predicted(d, coll, alg, servers, devices, q, HIDDEN)
        lines.append(f"{q:>12} {q // 4:>13}     float     sum      -1 {us:>8.2f}   0.00   0.00"
                     f"      0 {us:>8.2f}   0.00   0.00      0")
    return NCCL_TESTS.format(lines="\n".join(lines))


def test_collected_runs_are_kept_and_calibrate(daemon):
    """What servers' agents send is kept with where it came from; a calibration of the
    collected runs finds the hidden terms, with the host-link fact of the fabric they ran on."""
    d = daemon
    two_port_fabric(d, servers=4)
    runs = []
    for coll, alg in CASES:
        for q in SIZES:
            runs.append({"collective": coll, "algorithm": alg, "servers": 4, "devices": 4,
                         "bytes": q, "measured_us": predicted(d, coll, alg, 4, 4, q, HIDDEN)})
    r = d.post("/v1/servers/s0/runs", {"runs": runs, "fabric": "job"})
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["added"] == len(runs) and got["dropped"] == 0 and got["total"] == len(runs)
    assert got["last_id"] - got["first_id"] == len(runs) - 1
    # nccl-tests' output says what it ran in its "# ofcd:" line.
    text = nccl_text(d, "allreduce", "ring", 4, 4,
                     "# ofcd: fabric=job collective=allreduce algorithm=ring servers=4 devices=4")
    r = d.post("/v1/servers/s1/runs?batch=sha256-x", {"nccl_tests": {"text": text}})
    assert r.status_code == 201, r.text
    added = r.json()
    assert added["added"] == len(SIZES) and added["first_id"] > got["last_id"]
    assert not added["repeated"]
    # The same batch again (its answer lost): nothing added, the same ids.
    r = d.post("/v1/servers/s1/runs?batch=sha256-x", {"nccl_tests": {"text": text}})
    assert r.status_code == 200, r.text
    assert r.json() == dict(added, added=0, repeated=True)
    # Another server's batch of that name is its own.
    r = d.post("/v1/servers/s2/runs?batch=sha256-x", {"runs": runs[:1]})
    assert r.status_code == 201 and r.json()["added"] == 1, r.text
    assert d.delete("/v1/cost/runs?collector=s2").json() == {"deleted": 1}
    listed = d.get("/v1/cost/runs").json()
    assert listed["total"] == len(runs) + len(SIZES) == len(listed["runs"])
    first = listed["runs"][0]
    assert {k: first[k] for k in ("collector", "fabric", "ports_per_device", "collective",
                                  "algorithm", "servers", "devices", "bytes")} == {
        "collector": "s0", "fabric": "job", "ports_per_device": 2, "collective": "allreduce",
        "algorithm": "ring", "servers": 4, "devices": 4, "bytes": SIZES[0]}
    assert [x["collector"] for x in d.get("/v1/cost/runs?collector=s1").json()["runs"]] == \
        ["s1"] * len(SIZES)
    assert len(d.get("/v1/cost/runs?limit=3").json()["runs"]) == 3
    assert len(d.get(f"/v1/cost/runs?since={got['last_id']}").json()["runs"]) == 1 + len(SIZES)
    r = d.post("/v1/cost/calibrate", {"name": "fleet", "collected": True, "activate": True})
    assert r.status_code == 201, r.text
    s = r.json()
    prov = s["provenance"]
    assert prov["source"] == "collected" and prov["runs"] == len(runs) + len(SIZES)
    assert prov["facts"]["ports_per_device"] == 2
    assert prov["collected"]["from"] == {"collectors": ["s0", "s1"], "fabrics": ["job"]}
    assert prov["collected"]["first_id"] == got["first_id"]
    assert s["fit"]["rms"] < 1e-3, s["fit"]
    for term in ("alpha_us", "launch_us", "overhead_us"):
        assert abs(s["params"][term] - HIDDEN[term]) < 1e-2 * HIDDEN[term], term
    # Narrowed to one collector, mixed with runs of the body.
    r = d.post("/v1/cost/calibrate", {"name": "s1-only", "collected": {"collector": "s1"},
                                      "runs": runs[:2], "fit": ["alpha_us"]})
    assert r.status_code == 201, r.text
    assert r.json()["provenance"]["source"] == "runs+collected"
    assert r.json()["provenance"]["runs"] == 2 + len(SIZES)
    # Deleted by what they ran on; kept across a restart until then.
    d.restart()
    assert d.get("/v1/cost/runs").json()["total"] == len(runs) + len(SIZES)
    r = d.delete("/v1/cost/runs?collector=s0")
    assert r.status_code == 200 and r.json() == {"deleted": len(runs)}
    assert d.get("/v1/cost/runs").json()["total"] == len(SIZES)


def test_collected_runs_are_bounded_oldest_first(daemon):
    d = daemon
    two_port_fabric(d)
    run = {"collective": "allreduce", "algorithm": "ring", "servers": 4, "devices": 4,
           "bytes": 4096, "measured_us": 50.0}
    first = None
    for k in range(2):
        r = d.post("/v1/servers/s0/runs", {"runs": [run] * 2000})
        assert r.status_code == 201, r.text
        first = first or r.json()["first_id"]
    r = d.post("/v1/servers/s0/runs", {"runs": [dict(run, measured_us=51.0)] * 10})
    assert r.status_code == 201, r.text
    assert r.json()["dropped"] == 10 and r.json()["total"] == 4000
    kept = d.get("/v1/cost/runs").json()["runs"]
    assert len(kept) == 4000 and kept[0]["id"] == first + 10
    assert [x["measured_us"] for x in kept[-10:]] == [51.0] * 10


def test_collected_runs_refusals_store_nothing(daemon):
    d = daemon
    two_port_fabric(d, servers=4)
    good = {"collective": "allreduce", "algorithm": "ring", "servers": 4, "devices": 4,
            "bytes": 4096, "measured_us": 50.0}
    header = "# ofcd: fabric=job collective=allreduce algorithm=ring servers=4 devices=4"
    cases = [
        ("/v1/servers/nope/runs", {"runs": [good]}, 404, "name"),
        ("/v1/servers/s0/runs", {"runs": [dict(good, collective="scan")]}, 400,
         "runs[0].collective"),
        ("/v1/servers/s0/runs", {"runs": [good], "fabric": "not a name"}, 400, "fabric"),
        ("/v1/servers/s0/runs", {"runs": [good], "fit": ["alpha_us"]}, 400, "fit"),
        ("/v1/servers/s0/runs", {}, 400, "runs"),
        ("/v1/servers/s0/runs?batch=", {"runs": [good]}, 400, "batch"),
        ("/v1/servers/s0/runs?batch=" + "b" * 129, {"runs": [good]}, 400, "batch"),
        ("/v1/servers/s0/runs", {"nccl_tests": {"text": nccl_text(d, "allreduce", "ring", 4, 4,
                                                                  None)}}, 400,
         "nccl_tests.collective"),
        ("/v1/servers/s0/runs",
         {"nccl_tests": {"text": header + "\n" + nccl_text(d, "allreduce", "ring", 4, 4, header)}},
         400, "nccl_tests.text"),
        ("/v1/servers/s0/runs",
         {"nccl_tests": {"text": nccl_text(d, "allreduce", "ring", 4, 4, header + " nodes=4")}},
         400, "nccl_tests.text"),
        ("/v1/servers/s0/runs",
         {"nccl_tests": {"text": nccl_text(d, "allreduce", "ring", 4, 4,
                                           header + " collective=broadcast")}},
         400, "nccl_tests.text"),
        ("/v1/servers/s0/runs",
         {"nccl_tests": {"text": nccl_text(d, "allreduce", "ring", 4, 4, header + " " + "x" * 600)}},
         400, "nccl_tests.text"),
        ("/v1/servers/s0/runs",
         {"nccl_tests": {"text": nccl_text(d, "allreduce", "ring", 4, 4,
                                           header.replace("devices=4", "devices=four"))}},
         400, "nccl_tests.devices"),
        ("/v1/cost/calibrate", {"name": "none", "collected": True}, 422, "collected"),
        ("/v1/cost/calibrate", {"name": "bad", "collected": {"fabric": 7}}, 400,
         "collected.fabric"),
        ("/v1/cost/calibrate", {"name": "bad", "collected": "yes"}, 400, "collected"),
    ]
    for path, body, status, field in cases:
        r = d.post(path, body)
        assert r.status_code == status and error_of(r)["field"] == field, (body, r.text)
    assert d.get("/v1/cost/runs").json() == {"runs": [], "total": 0}
    assert d.get("/v1/cost/params").json()["sets"] == []
    # The second "# ofcd:" line is named with the first.
    text = header + "\n" + nccl_text(d, "allreduce", "ring", 4, 4, header)
    r = d.post("/v1/servers/s0/runs", {"nccl_tests": {"text": text}})
    assert "line 10: a second \"# ofcd:\" line (line 1 was the first)" in error_of(r)["message"]
    for q, field in (("limit=0", "limit"), ("since=x", "since"), ("limit=4001", "limit"),
                     ("since=18446744073709551617", "since"), ("before=0", "before"),
                     ("fabric=a%20b", "fabric"), ("collector=%2F", "collector")):
        for method in ("GET", "DELETE"):
            if method == "DELETE" and field == "limit":
                continue
            r = d.req(method, f"/v1/cost/runs?{q}")
            assert r.status_code == 400 and error_of(r)["field"] == field, (q, r.text)
    # Runs of a fabric that is gone keep its name; they are not refused.
    r = d.post("/v1/servers/s0/runs", {"runs": [good], "fabric": "gone"})
    assert r.status_code == 201, r.text
    assert [(x["fabric"], x["ports_per_device"]) for x in d.get("/v1/cost/runs").json()["runs"]] \
        == [("gone", None)]
    # A calibration takes at most 4,000 runs, collected ones included: refused, not cut.
    r = d.post("/v1/cost/calibrate", {"name": "big", "runs": [good] * 4000, "collected": True})
    assert r.status_code == 422 and error_of(r)["field"] == "collected", r.text
    assert "more than 4000 runs" in error_of(r)["message"]
    assert d.delete("/v1/cost/runs").json() == {"deleted": 1}
    # A run without a fabric carries no host-link fact: the one known is taken.
    assert d.post("/v1/servers/s0/runs", {"runs": [good], "fabric": "job"}).status_code == 201
    assert d.post("/v1/servers/s0/runs", {"runs": [good]}).status_code == 201
    r = d.post("/v1/cost/calibrate", {"name": "one", "collected": True, "fit": ["alpha_us"]})
    assert r.status_code == 201, r.text
    assert r.json()["provenance"]["facts"]["ports_per_device"] == 2


def test_collected_runs_of_different_host_links_are_not_fitted_as_one(daemon):
    d = daemon
    topo = {"ocs": [{"name": f"ocs{u}", "driver": "sim", "ports": 32, "endpoint": ""}
                    for u in range(8)],
            "servers": [{"name": f"a{i}", "devices": 4, "ports_per_device": 2} for i in range(4)]
            + [{"name": f"b{i}", "devices": 4, "ports_per_device": 1} for i in range(4)],
            "wiring": {"rule": "plane-per-ocs"}}
    assert d.put("/v1/topology", topo).status_code == 200
    for name, prefix in (("two", "a"), ("one", "b")):
        r = d.post("/v1/fabrics", {"name": name, "servers": [f"{prefix}{i}" for i in range(4)]})
        assert r.status_code == 201, r.text
        run = {"collective": "allreduce", "algorithm": "ring", "servers": 4, "devices": 4,
               "bytes": 4096, "measured_us": 50.0}
        r = d.post(f"/v1/servers/{prefix}0/runs", {"runs": [run], "fabric": name})
        assert r.status_code == 201, r.text
    ports = {x["fabric"]: x["ports_per_device"] for x in d.get("/v1/cost/runs").json()["runs"]}
    assert ports == {"two": 2, "one": 1}
    r = d.post("/v1/cost/calibrate", {"name": "mixed", "collected": True, "fit": ["alpha_us"]})
    assert r.status_code == 422 and error_of(r)["field"] == "collected", r.text
    for body in ({"collected": {"fabric": "one"}}, {"collected": True, "fabric": "one"},
                 {"collected": True, "params": {"ports_per_device": 1}}):
        r = d.post("/v1/cost/calibrate", dict(body, name=f"n{len(str(body))}", fit=["alpha_us"]))
        assert r.status_code == 201, r.text
        assert r.json()["provenance"]["facts"]["ports_per_device"] == 1


def test_a_long_fit_holds_neither_the_loop_nor_the_other_writes(daemon):
    """A fit over 4,000 runs takes a fifth of a second to most of one: it is made on the
    compute worker before its write (api_compute_first), so a health probe and another
    write sent meanwhile are answered first. Its write then takes its turn, audited; a
    fit refused on the worker is a refused write in the audit trail, and stores nothing."""
    d = daemon
    runs = [{"collective": "allreduce", "algorithm": "ring", "servers": (4, 8, 16, 32)[k % 4],
             "devices": 8, "bytes": 8 << (k % 24),
             "measured_us": 42 + (8 << (k % 24)) / 20000 * (1 + (k * 7 % 11 - 5) / 50)}
            for k in range(4000)]
    done = {}

    def long_one():
        r = requests.post(d.url("/v1/cost/calibrate"), json={"name": "big", "runs": runs},
                          stream=True, timeout=120)
        done["head"] = time.monotonic()
        done["status"] = r.status_code

    t = threading.Thread(target=long_one)
    t.start()
    time.sleep(0.05)  # its request on its way first
    assert requests.get(d.url("/v1/health"), timeout=60).status_code == 200
    health = time.monotonic()
    assert d.post("/v1/ocs", {"name": "o9", "ports": 8}).status_code == 201
    write = time.monotonic()
    t.join()
    assert done["status"] == 201
    assert health < done["head"], "the health probe waited for the fit"
    assert write < done["head"], "the other write waited for the fit"
    assert [s["name"] for s in d.get("/v1/cost/params").json()["sets"]] == ["big"]
    rows = d.get("/v1/audit").json()["audit"]
    mine = [(e["path"], e["status"]) for e in rows if e["method"] == "POST"]
    assert ("/v1/cost/calibrate", 201) in mine and ("/v1/ocs", 201) in mine
    # Refused by the fit itself (on the worker): audited as refused, nothing stored.
    run = {"collective": "alltoall", "algorithm": "direct", "servers": 4, "devices": 8,
           "bytes": 1 << 20, "measured_us": 500.0}
    r = d.post("/v1/cost/calibrate", {"name": "a2a", "runs": [run],
                                      "params": {"sync": "pairwise"}})
    assert r.status_code == 422 and error_of(r)["field"] == "params.sync", r.text
    assert [s["name"] for s in d.get("/v1/cost/params").json()["sets"]] == ["big"]
    last = d.get("/v1/audit").json()["audit"][-1]
    assert (last["path"], last["status"]) == ("/v1/cost/calibrate", 422)
