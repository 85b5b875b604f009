"""The cost model fitted to the cluster (issue 30): POST /v1/cost/calibrate from JSON runs and
from nccl-tests' result lines, the named parameter sets, the active one in every selection, and
refusals that name the field and store nothing.

The "measured" runs here come from the daemon's own what-if with hidden terms set, so the fit
must find those terms again; tests/fidelity/calibration.py does the same against SimGrid."""
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
