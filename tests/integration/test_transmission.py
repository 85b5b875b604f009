"""Transmission-method selection (issue 5): POST /v1/transmission/select, POST
/v1/fabrics/{name}/pipeline over the stored circuits, and the [cost] section."""
import json
import signal
import subprocess
import threading
import time

import pytest
import requests

from conftest import OFCD_BIN, READER, error_of, wait_for

MIB16 = 16 * 1024 * 1024
METHODS = ["intra-server", "send-broadcast", "p2p-relay", "allgather-send-scatter", "switch-relay"]
DEFAULTS = {"inter_gbps": 400, "inter_latency_us": 3, "intra_gbps": 512, "intra_latency_us": 2,
            "bridge_gbps": 504, "p2p_read_us": 2, "p2p_write_us": 1}
ADJOINT = {"send": "send", "broadcast": "reduce", "reduce": "broadcast", "scatter": "gather",
           "gather": "scatter", "allgather": "reduce-scatter", "reduce-scatter": "allgather",
           "p2p-recv": "p2p-send", "p2p-send": "p2p-recv"}


def server(devices=8, p2p=False, intra="full-mesh", circuit_device=None):
    s = {"devices": devices, "p2p": p2p, "intra": intra}
    if circuit_device is not None:
        s["circuit_device"] = circuit_device
    return s


def select(d, **body):
    r = d.post("/v1/transmission/select", body)
    assert r.status_code == 200, r.text
    return r.json()


def costs(sel):
    return [c["predicted_us"] for c in sel["candidates"]]


def check_shape(sel):
    """Every reply is internally consistent: chosen = its candidate, operators mirror."""
    assert [c["method"] for c in sel["candidates"]] == METHODS
    assert [c["method_id"] for c in sel["candidates"]] == list(range(5))
    chosen = sel["candidates"][sel["method_id"]]
    assert chosen["method"] == sel["method"] and chosen["eligible"]
    assert chosen["predicted_us"] == sel["predicted_us"]
    assert sel["operators"] == [f'{s["operator"]}@{s["scope"]}' for s in chosen["steps"]]
    rev = [f'{ADJOINT[o.split("@")[0]]}@{o.split("@")[1]}' for o in reversed(sel["operators"])]
    assert sel["reverse_operators"] == rev
    for c in sel["candidates"]:
        if c["predicted_us"] is None:
            assert c["steps"] == [] and not c["eligible"]
        else:
            assert c["predicted_us"] == pytest.approx(sum(s["us"] for s in c["steps"]), rel=1e-12)
        assert isinstance(c["reason"], str) and c["reason"]


# ---- POST /v1/transmission/select ---------------------------------------------------------


def test_select_methods_full_mesh(daemon):
    src, dst = server(circuit_device=1), server(circuit_device=6)
    # docs/cost-model.md, examples with the defaults (worked by hand there).
    want = [None, 602.68832, 2688.35456, 3215.64256, 6361.37056]
    sel = select(daemon, aggregation="allreduce", bytes=MIB16, source=src, target=dst)
    check_shape(sel)
    assert (sel["method"], sel["method_id"], sel["policy"]) == ("send-broadcast", 1, "min-cost")
    assert sel["operators"] == ["send@inter", "broadcast@target"]
    assert sel["reverse_operators"] == ["reduce@target", "send@inter"]
    assert costs(sel)[1:] == pytest.approx(want[1:], rel=1e-9) and costs(sel)[0] is None
    assert [c["eligible"] for c in sel["candidates"]] == [False, True, False, True, True]
    assert sel["candidates"][2]["reason"] == "neither server has P2P"
    assert sel["params"] == DEFAULTS
    # allgather also means identical data on every source device.
    assert select(daemon, aggregation="allgather", bytes=MIB16, source=src, target=dst)["method"] == "send-broadcast"
    # Distinct data: method 1 is priced but not eligible.
    sel = select(daemon, aggregation="none", bytes=MIB16, source=src, target=dst)
    check_shape(sel)
    assert sel["method"] == "allgather-send-scatter" and sel["method_id"] == 3
    assert sel["operators"] == ["allgather@source", "send@inter", "scatter@target"]
    assert sel["reverse_operators"] == ["gather@target", "send@inter", "reduce-scatter@source"]
    assert costs(sel)[1:] == pytest.approx(want[1:], rel=1e-9)
    assert [c["eligible"] for c in sel["candidates"]] == [False, False, False, True, True]
    assert "different data" in sel["candidates"][1]["reason"]
    steps = sel["candidates"][3]["steps"]
    assert [(s["scope"], s["operator"], s["bytes"]) for s in steps] == [
        ("source", "allgather", 7 * MIB16), ("inter", "send", 8 * MIB16), ("target", "scatter", 7 * MIB16)]
    # P2P on both sides: p2p-relay; on one side only: not eligible, and it says which.
    sel = select(daemon, aggregation="none", bytes=MIB16, source=server(p2p=True), target=server(p2p=True))
    check_shape(sel)
    assert sel["method"] == "p2p-relay" and sel["operators"] == ["p2p-recv@source", "send@inter", "p2p-send@target"]
    assert sel["reverse_operators"] == ["p2p-recv@target", "send@inter", "p2p-send@source"]
    sel = select(daemon, aggregation="none", bytes=MIB16, source=server(p2p=True), target=server())
    assert sel["method"] == "allgather-send-scatter"
    assert sel["candidates"][2]["reason"] == "target server lacks P2P" and not sel["candidates"][2]["eligible"]
    sel = select(daemon, aggregation="none", bytes=MIB16, source=server(), target=server(p2p=True))
    assert sel["candidates"][2]["reason"] == "source server lacks P2P"
    # One device on each side: no in-server step at all.
    sel = select(daemon, aggregation="none", bytes=1000, source=server(devices=1), target=server(devices=1))
    check_shape(sel)
    assert sel["operators"] == ["send@inter"]


def test_select_two_groups_and_switch_relay(daemon):
    tg = server(intra="two-groups", circuit_device=1)
    sel = select(daemon, aggregation="allreduce", bytes=MIB16, source=tg, target=dict(tg, circuit_device=6))
    check_shape(sel)
    assert sel["method"] == "send-broadcast"
    assert costs(sel)[1:] == pytest.approx([871.0, 2688.4, 4821.8, 6419.6], abs=0.05)
    sel = select(daemon, aggregation="none", bytes=MIB16, source=tg, target=tg)
    assert sel["method"] == "allgather-send-scatter"
    # A fast bridge makes switch-relay the cheapest (the method 3 / method 4 crossover).
    sel = select(daemon, aggregation="none", bytes=MIB16, source=tg, target=tg, params={"bridge_gbps": 4000})
    check_shape(sel)
    assert sel["method"] == "switch-relay" and sel["method_id"] == 4
    assert sel["operators"] == ["send@source", "send@inter", "send@target"]
    assert costs(sel)[3:] == pytest.approx([3215.6, 3161.1], abs=0.05)
    assert sel["params"] == dict(DEFAULTS, bridge_gbps=4000)
    # Crossover for intra 16 Gb/s, N = 8: bridge 112 Gb/s; just below method 3 wins, above method 4.
    p = {"intra_gbps": 16}
    below = select(daemon, aggregation="none", bytes=MIB16, source=tg, target=tg, params=dict(p, bridge_gbps=110))
    above = select(daemon, aggregation="none", bytes=MIB16, source=tg, target=tg, params=dict(p, bridge_gbps=114))
    assert (below["method"], above["method"]) == ("allgather-send-scatter", "switch-relay")


def test_select_same_server(daemon):
    sel = select(daemon, aggregation="none", bytes=MIB16, source=server(), same_server=True)
    check_shape(sel)
    assert (sel["method"], sel["method_id"]) == ("intra-server", 0)
    assert sel["operators"] == ["broadcast@source"] and sel["reverse_operators"] == ["reduce@source"]
    assert costs(sel)[1:] == [None] * 4
    assert all(c["reason"] == "both stages on one server: no circuit between them" for c in sel["candidates"][1:])
    assert sel["rule"] == "second processing manner: both stages on one server"
    # A target may be given and is ignored.
    again = select(daemon, aggregation="none", bytes=MIB16, source=server(), target=server(devices=2), same_server=True)
    assert again["predicted_us"] == sel["predicted_us"]
    # Identical data cross the bridge of a two-groups server once, distinct data once per device.
    tg = server(intra="two-groups")
    ident = select(daemon, aggregation="allreduce", bytes=MIB16, source=tg, same_server=True)
    dist = select(daemon, aggregation="none", bytes=MIB16, source=tg, same_server=True)
    assert ident["predicted_us"] < dist["predicted_us"]
    assert ident["candidates"][0]["steps"][0]["bytes"] == MIB16
    assert dist["candidates"][0]["steps"][0]["bytes"] == 8 * MIB16
    # same_server false is the default: the target is then required.
    r = daemon.post("/v1/transmission/select", {"aggregation": "none", "bytes": 1, "source": server(),
                                                 "same_server": False})
    assert r.status_code == 400 and error_of(r)["field"] == "target"


def test_select_patent_vs_min_cost(daemon):
    # docs/cost-model.md: two-groups, allreduce, P2P, 4 KiB: S1802 takes method 1, method 2 is cheaper.
    tg = server(intra="two-groups", p2p=True, circuit_device=1)
    body = dict(aggregation="allreduce", bytes=4096, source=tg, target=dict(tg, circuit_device=6))
    mc = select(daemon, **body)
    pa = select(daemon, **body, policy="patent")
    check_shape(mc)
    check_shape(pa)
    assert (mc["method"], mc["policy"], mc["rule"]) == ("p2p-relay", "min-cost", "cheapest eligible method")
    assert (pa["method"], pa["policy"]) == ("send-broadcast", "patent") and pa["rule"].startswith("S1801")
    assert mc["candidates"] == pa["candidates"]
    assert mc["predicted_us"] < pa["predicted_us"]
    # Every branch of S1801-S1807; min-cost is never slower than patent.
    cases = [
        (dict(aggregation="allreduce", bytes=MIB16, source=server(), target=server()), "send-broadcast", "S1802"),
        (dict(aggregation="none", bytes=MIB16, source=server(p2p=True), target=server(p2p=True)), "p2p-relay", "S1804"),
        (dict(aggregation="none", bytes=MIB16, source=server(), target=server()), "allgather-send-scatter", "S1807"),
        (dict(aggregation="none", bytes=MIB16, source=server(intra="two-groups"), target=server(intra="two-groups"),
              params={"bridge_gbps": 4000}), "switch-relay", "S1806"),
    ]
    for body, method, step in cases:
        pa = select(daemon, **body, policy="patent")
        mc = select(daemon, **body, policy="min-cost")
        assert pa["method"] == method and step in pa["rule"], (body, pa["rule"])
        assert mc["predicted_us"] <= pa["predicted_us"]


def test_select_params_override(daemon):
    base = dict(aggregation="none", bytes=MIB16, source=server(), target=server())
    d = select(daemon, **base)
    fast = select(daemon, **base, params={"inter_gbps": 800, "inter_latency_us": 0})
    send = lambda s: s["candidates"][3]["steps"][1]["us"]  # noqa: E731
    assert send(fast) == pytest.approx((send(d) - 3) / 2, rel=1e-12)
    assert fast["params"] == dict(DEFAULTS, inter_gbps=800, inter_latency_us=0)
    # Every key can be overridden, integers or reals.
    allp = {"inter_gbps": 100.5, "inter_latency_us": 1, "intra_gbps": 64, "intra_latency_us": 0.5,
            "bridge_gbps": 32, "p2p_read_us": 0, "p2p_write_us": 1e9}
    got = select(daemon, **base, params=allp)
    assert got["params"] == allp
    # Slow P2P: min-cost leaves p2p-relay for method 3, patent keeps it.
    p2p = dict(base, source=server(p2p=True), target=server(p2p=True))
    assert select(daemon, **p2p)["method"] == "p2p-relay"
    slow = select(daemon, **p2p, params={"p2p_read_us": 5000})
    assert slow["method"] == "allgather-send-scatter"
    assert select(daemon, **p2p, params={"p2p_read_us": 5000}, policy="patent")["method"] == "p2p-relay"
    # An empty params object changes nothing; null is not a way to say "none".
    assert select(daemon, **base, params={})["predicted_us"] == d["predicted_us"]
    r = daemon.post("/v1/transmission/select", dict(base, params=None))
    assert r.status_code == 400 and r.json()["error"]["field"] == "params", r.text
    # Costs grow with bytes.
    prev = -1
    for b in (0, 1, 4096, MIB16, 2**40, 2**50):
        p = select(daemon, **dict(base, bytes=b))["predicted_us"]
        assert p > prev
        prev = p


def test_select_bad_input(daemon):
    ok = {"aggregation": "none", "bytes": 1024, "source": server(), "target": server()}
    bad = [
        (dict(ok, bytes=-1), "bytes"),
        (dict(ok, bytes=2**51), "bytes"),
        (dict(ok, bytes=1e300), "bytes"),
        (dict(ok, bytes="1024"), "bytes"),
        (dict(ok, bytes=True), "bytes"),
        ({k: v for k, v in ok.items() if k != "bytes"}, "bytes"),
        (dict(ok, aggregation="sum"), "aggregation"),
        (dict(ok, aggregation=1), "aggregation"),
        ({k: v for k, v in ok.items() if k != "aggregation"}, "aggregation"),
        (dict(ok, policy="fastest"), "policy"),
        (dict(ok, same_server="yes"), "same_server"),
        (dict(ok, bogus=1), "bogus"),
        ({k: v for k, v in ok.items() if k != "source"}, "source"),
        ({k: v for k, v in ok.items() if k != "target"}, "target"),
        (dict(ok, source=8), "source"),
        (dict(ok, source=dict(server(), bogus=1)), "source.bogus"),
        (dict(ok, target=dict(server(), circuit=1)), "target.circuit"),
        (dict(ok, source={"p2p": True}), "source.devices"),
        (dict(ok, source=server(devices=0)), "source.devices"),
        (dict(ok, source=server(devices=1025)), "source.devices"),
        (dict(ok, source=server(devices=8.5)), "source.devices"),
        (dict(ok, source=server(devices=7, intra="two-groups")), "source.devices"),
        (dict(ok, target=server(devices=7, intra="two-groups")), "target.devices"),
        (dict(ok, source=server(p2p=1)), "source.p2p"),
        (dict(ok, source=server(intra="ring")), "source.intra"),
        (dict(ok, source=server(circuit_device=8)), "source.circuit_device"),
        (dict(ok, target=server(devices=4, circuit_device=4)), "target.circuit_device"),
        (dict(ok, target=server(circuit_device=-1)), "target.circuit_device"),
        (dict(ok, params=[1]), "params"),
        (dict(ok, params="fast"), "params"),
        (dict(ok, params={"foo": 1}), "params.foo"),
        (dict(ok, params={"inter_gbps": "400"}), "params.inter_gbps"),
        (dict(ok, params={"inter_gbps": 0}), "params.inter_gbps"),
        (dict(ok, params={"bridge_gbps": 2e9}), "params.bridge_gbps"),
        (dict(ok, params={"intra_latency_us": -1}), "params.intra_latency_us"),
        (dict(ok, params={"p2p_write_us": 1e10}), "params.p2p_write_us"),
    ]
    for body, field in bad:
        r = daemon.post("/v1/transmission/select", body)
        assert r.status_code == 400, (body, r.text)
        e = error_of(r)
        assert (e["code"], e["field"]) == ("invalid_field", field), (body, r.text)
        assert field in e["message"], e
    e = error_of(daemon.post("/v1/transmission/select", dict(ok, params={"inter_gbps": 0})))
    assert e["message"] == "params.inter_gbps must be a bandwidth in Gb/s from 1e-06 to 1e+09, got 0"
    e = error_of(daemon.post("/v1/transmission/select", dict(ok, source=server(devices=7, intra="two-groups"))))
    assert "even" in e["message"]
    r = daemon.post("/v1/transmission/select", [ok])
    assert r.status_code == 400 and error_of(r)["code"] == "invalid_field"
    r = daemon.post("/v1/transmission/select", raw="{")
    assert r.status_code == 400 and error_of(r)["code"] == "invalid_json"
    r = daemon.post("/v1/transmission/select")
    assert r.status_code == 400 and error_of(r)["code"] == "invalid_json"
    assert daemon.get("/v1/transmission/select").status_code == 405
    # Edge values are accepted.
    for body in (dict(ok, bytes=0), dict(ok, bytes=2**50), dict(ok, bytes=0.5),
                 dict(ok, source=server(devices=1024, circuit_device=1023)),
                 dict(ok, params={"bridge_gbps": 1e-6, "inter_latency_us": 1e9})):
        assert daemon.post("/v1/transmission/select", body).status_code == 200, body


def test_select_is_open_to_readers(auth_daemon):
    # A what-if stores nothing: a read token may ask, a request without one may not.
    body = {"aggregation": "none", "bytes": 1, "source": server(), "target": server()}
    assert auth_daemon.post("/v1/transmission/select", body, token=READER).status_code == 200
    assert auth_daemon.post("/v1/transmission/select", body, token="").status_code == 401
    assert auth_daemon.post("/v1/transmission/select", body).status_code == 200
    r = auth_daemon.post("/v1/fabrics/x/pipeline", {"stages": ["a", "b"], "bytes": 1,
                                                    "aggregation": "none"}, token=READER)
    assert r.status_code == 404 and error_of(r)["code"] == "not_found"


# ---- POST /v1/fabrics/{name}/pipeline -----------------------------------------------------

KINDS = {  # name: (p2p, intra)
    "srv0": (True, "full-mesh"), "srv1": (True, "full-mesh"), "srv2": (False, "full-mesh"),
    "srv3": (True, "two-groups"), "srv4": (False, "two-groups"), "srv5": (True, "full-mesh"),
    "srv6": (False, "full-mesh"), "srv7": (True, "two-groups"),
}


def make_fabric(d, name="job", servers=8, devices=8, units=2):
    for u in range(units):
        assert d.post("/v1/ocs", {"name": f"ocs{u}", "ports": 64}).status_code == 201
    for s in range(servers):
        p2p, intra = KINDS[f"srv{s}"]
        r = d.post("/v1/servers", {"name": f"srv{s}", "devices": devices, "p2p": p2p, "intra": intra})
        assert r.status_code == 201, r.text
    assert d.put("/v1/wiring", {"rule": "plane-per-ocs"}).status_code == 200
    r = d.post("/v1/fabrics", {"name": name, "servers": [f"srv{i}" for i in range(servers)]})
    assert r.status_code == 201, r.text
    return r.json()


def pipeline(d, stages, name="job", **kw):
    body = {"stages": stages, "bytes": kw.pop("bytes", MIB16), "aggregation": kw.pop("aggregation", "none")}
    body.update(kw)
    r = d.post(f"/v1/fabrics/{name}/pipeline", body)
    assert r.status_code == 200, r.text
    return r.json()


def link_between(fabric, x, y):
    found = [l for l in fabric["links"] if {l["a"]["server"], l["b"]["server"]} == {x, y}]
    assert len(found) <= 1
    if not found:
        return None
    l = found[0]
    return (l["a"], l["b"]) if l["a"]["server"] == x else (l["b"], l["a"])


def check_pipeline(d, fabric, stages, reply, **kw):
    """Every pair uses the stored circuit and is priced like select on the same description."""
    assert reply["fabric"] == fabric["name"] and reply["revision"] == fabric["revision"]
    assert len(reply["pairs"]) == len(stages) - 1
    total, complete = 0.0, True
    for k, p in enumerate(reply["pairs"]):
        a, b = stages[k], stages[k + 1]
        assert (p["stage"], p["source"], p["target"]) == (k, a, b)
        ends = link_between(fabric, a, b) if a != b else None
        circuit = ("src_device", "src_port", "dst_device", "dst_port", "ocs", "src_ocs_port", "dst_ocs_port")
        if a == b or ends is None:
            assert all(p[c] is None for c in circuit), p
        else:
            src, dst = ends
            assert (p["src_device"], p["src_port"], p["src_ocs_port"], p["ocs"]) == \
                (src["device"], src["port"], src["ocs_port"], src["ocs"])
            assert (p["dst_device"], p["dst_port"], p["dst_ocs_port"], p["ocs"]) == \
                (dst["device"], dst["port"], dst["ocs_port"], dst["ocs"])
        if a != b and ends is None:
            complete = False
            assert p["error"]["code"] == "no_circuit" and a in p["error"]["message"]
            assert "method" not in p and "candidates" not in p
            continue
        assert "error" not in p
        body = {"aggregation": kw.get("aggregation", "none"), "bytes": kw.get("bytes", MIB16),
                "policy": kw.get("policy", "min-cost"), "params": kw.get("params", {})}
        sa = server(8, *KINDS[a], circuit_device=p["src_device"] if a != b else 0)
        if a == b:
            sel = select(d, **body, source=sa, same_server=True)
        else:
            sel = select(d, **body, source=sa, target=server(8, *KINDS[b], circuit_device=p["dst_device"]))
        for key in ("method", "method_id", "predicted_us", "rule", "operators", "reverse_operators", "candidates"):
            assert p[key] == sel[key], (k, key)
        total += p["predicted_us"]
    assert reply["total_us"] == pytest.approx(total, rel=1e-12)
    assert reply["complete"] is complete
    return reply


def test_pipeline_uses_stored_circuits(daemon):
    f = make_fabric(daemon)
    stages = ["srv3", "srv0", "srv0", "srv5", "srv7", "srv3", "srv6", "srv1", "srv2", "srv4"]
    r = check_pipeline(daemon, f, stages, pipeline(daemon, stages))
    assert r["complete"] is True and r["policy"] == "min-cost" and r["params"] == DEFAULTS
    methods = [p["method"] for p in r["pairs"]]
    assert methods[1] == "intra-server"                      # srv0 -> srv0
    assert methods[0] == methods[2] == "p2p-relay"            # both ends have P2P
    assert methods[6] == "allgather-send-scatter"             # srv6 has no P2P
    # Every stage pair of the whole fabric, both directions, with other settings.
    names = [f"srv{i}" for i in range(8)]
    tour = [x for i in names for j in names if i != j for x in (i, j)]
    for kw in ({}, {"aggregation": "allreduce"}, {"policy": "patent", "bytes": 4096},
               {"params": {"bridge_gbps": 4000, "p2p_read_us": 1000}}):
        check_pipeline(daemon, f, tour, pipeline(daemon, tour, **kw), **kw)
    # A pure route changes nothing (the reconciler may move the state meanwhile).
    g = daemon.get("/v1/fabrics/job").json()
    assert (g["revision"], g["links"], g["missing"]) == (f["revision"], f["links"], f["missing"])


def test_pipeline_follows_replan_and_degraded(daemon):
    f = make_fabric(daemon)
    stages = ["srv3", "srv0", "srv5", "srv3"]
    before = check_pipeline(daemon, f, stages, pipeline(daemon, stages))
    # Fail the srv3 device carrying the srv3 -> srv0 circuit: the re-plan moves that circuit.
    dev = before["pairs"][0]["src_device"]
    r = daemon.put(f"/v1/servers/srv3/devices/{dev}", {"state": "failed"})
    assert r.status_code == 200 and r.json()["changed"] is True
    g = daemon.get("/v1/fabrics/job").json()
    assert g["revision"] == 2 and g["missing"] == []
    after = check_pipeline(daemon, g, stages, pipeline(daemon, stages))
    assert after["revision"] == 2
    moved = after["pairs"][0]
    assert moved["src_device"] != dev
    assert (moved["src_device"], moved["src_ocs_port"]) != (before["pairs"][0]["src_device"],
                                                          before["pairs"][0]["src_ocs_port"])
    assert after["pairs"][1] == before["pairs"][1]               # srv0 -> srv5 kept its circuit
    # A second failure leaves a pair of srv3 without a circuit: reported, not guessed.
    spare = after["pairs"][0]["src_device"]
    daemon.put(f"/v1/servers/srv3/devices/{spare}", {"state": "failed"})
    h = daemon.get("/v1/fabrics/job").json()
    assert len(h["missing"]) == 1
    x, y = h["missing"][0]
    z = next(s for s in ("srv1", "srv2", "srv4", "srv6") if s not in (x, y))
    stages = [z, x, y, x, x, z]
    r = check_pipeline(daemon, h, stages, pipeline(daemon, stages))
    assert r["complete"] is False
    errs = [p for p in r["pairs"] if "error" in p]
    assert [p["stage"] for p in errs] == [1, 2]
    assert errs[0]["error"]["message"] == (f"no circuit between {x} and {y} in fabric job: "
                                           "the pair is missing from its plan")
    assert r["total_us"] == pytest.approx(sum(p["predicted_us"] for p in r["pairs"] if "error" not in p))
    # Recovery restores a complete pipeline.
    daemon.put(f"/v1/servers/srv3/devices/{spare}", {"state": "ok"})
    k = daemon.get("/v1/fabrics/job").json()
    assert check_pipeline(daemon, k, stages, pipeline(daemon, stages))["complete"] is True


def test_pipeline_bad_input(daemon):
    make_fabric(daemon, servers=4, devices=8)
    daemon.post("/v1/servers", {"name": "loose", "devices": 8})
    ok = {"stages": ["srv0", "srv1"], "bytes": 1024, "aggregation": "none"}
    bad = [
        (dict(ok, stages=["srv0"]), 400, "stages"),
        (dict(ok, stages=[]), 400, "stages"),
        (dict(ok, stages="srv0,srv1"), 400, "stages"),
        (dict(ok, stages=["srv0", "srv1"] * 2048 + ["srv0"]), 400, "stages"),
        ({k: v for k, v in ok.items() if k != "stages"}, 400, "stages"),
        (dict(ok, stages=["srv0", 1]), 400, "stages[1]"),
        (dict(ok, stages=["srv0", "a b"]), 400, "stages[1]"),
        (dict(ok, stages=["srv0", ""]), 400, "stages[1]"),
        (dict(ok, bytes=-5), 400, "bytes"),
        (dict(ok, bytes=2**51), 400, "bytes"),
        (dict(ok, aggregation="max"), 400, "aggregation"),
        (dict(ok, policy="cheap"), 400, "policy"),
        (dict(ok, params={"foo": 1}), 400, "params.foo"),
        (dict(ok, params={"inter_gbps": -1}), 400, "params.inter_gbps"),
        (dict(ok, source={"devices": 8}), 400, "source"),
        (dict(ok, stages=["srv0", "srv1", "loose"]), 422, "stages[2]"),
        (dict(ok, stages=["nobody", "srv1"]), 422, "stages[0]"),
    ]
    for body, status, field in bad:
        r = daemon.post("/v1/fabrics/job/pipeline", body)
        assert r.status_code == status, (body, r.text)
        e = error_of(r)
        assert e["field"] == field, (body, r.text)
        assert e["code"] == ("invalid_field" if status == 400 else "unprocessable")
    e = error_of(daemon.post("/v1/fabrics/job/pipeline", dict(ok, stages=["srv0", "srv1", "loose"])))
    assert e["message"] == "stages[2]: server loose is not in fabric job"
    e = error_of(daemon.post("/v1/fabrics/job/pipeline", dict(ok, stages=["nobody", "srv1"])))
    assert e["message"] == "stages[0]: no server nobody"
    r = daemon.post("/v1/fabrics/nope/pipeline", ok)
    assert r.status_code == 404 and error_of(r)["code"] == "not_found"
    assert daemon.get("/v1/fabrics/job/pipeline").status_code == 405
    # 4096 stages is the limit, and fine.
    r = daemon.post("/v1/fabrics/job/pipeline", dict(ok, stages=["srv0", "srv1"] * 2048))
    assert r.status_code == 200 and len(r.json()["pairs"]) == 4095


def test_a_long_pipeline_holds_no_other_client(daemon):
    """4,096 stages are 7 MB of JSON and a fifth of a second of work or more: made off the
    loop (api_offload), they leave the daemon answering everyone else meanwhile, a leader's
    lease renewals and its units too. A health probe sent while one is being made is
    answered before it."""
    make_fabric(daemon, servers=8)
    body = json.dumps({"stages": [f"srv{i % 8}" for i in range(4096)], "bytes": 1024,
                       "aggregation": "none"})
    done = {}

    def long_one():
        r = requests.post(daemon.url("/v1/fabrics/job/pipeline"), data=body, stream=True,
                          headers={"Content-Type": "application/json"}, timeout=120)
        done["head"] = time.monotonic()
        done["status"], done["pairs"] = r.status_code, len(r.json()["pairs"])

    t = threading.Thread(target=long_one)
    t.start()
    time.sleep(0.02)  # its request on its way first
    assert requests.get(daemon.url("/v1/health"), timeout=60).status_code == 200
    answered = time.monotonic()
    t.join()
    assert (done["status"], done["pairs"]) == (200, 4095)
    assert answered < done["head"], "the health probe waited for the pipeline"
    assert "ofcd_http_offloaded_total 1" in daemon.get("/metrics").text.splitlines()


def test_sigterm_lets_long_replies_finish(daemon):
    """Pipelines whose replies are being made off the loop when SIGTERM comes are in flight
    like any other request: the drain lets them finish, whole."""
    make_fabric(daemon, servers=8)
    body = json.dumps({"stages": [f"srv{i % 8}" for i in range(4096)], "bytes": 1024,
                       "aggregation": "none"})
    got = []

    def long_one():
        r = requests.post(daemon.url("/v1/fabrics/job/pipeline"), data=body,
                          headers={"Content-Type": "application/json"}, timeout=120)
        got.append((r.status_code, len(r.json().get("pairs", []))))

    threads = [threading.Thread(target=long_one) for _ in range(4)]
    for t in threads:
        t.start()

    def offloaded():
        for line in daemon.get("/metrics").text.splitlines():
            if line.startswith("ofcd_http_offloaded_total "):
                return float(line.split()[1]) >= 4
        return False
    assert wait_for(offloaded, timeout=30)
    daemon.send_signal(signal.SIGTERM)
    for t in threads:
        t.join()
    assert got == [(200, 4095)] * 4
    assert daemon.proc.wait(timeout=30) == 0


def test_two_groups_needs_even_devices(daemon):
    # Two equal groups joined by a bridge: an odd count cannot be stored, so never priced.
    r = daemon.post("/v1/servers", {"name": "odd", "devices": 7, "intra": "two-groups"})
    assert r.status_code == 400 and error_of(r)["field"] == "devices"
    assert "even device count" in error_of(r)["message"]
    r = daemon.put("/v1/topology", {"ocs": [], "servers": [{"name": "odd", "devices": 3, "intra": "two-groups"}]})
    assert r.status_code == 400 and error_of(r)["field"] == "servers[0].devices"
    assert daemon.get("/v1/servers").json()["servers"] == []


# ---- [cost] configuration ------------------------------------------------------------------


SELECT = {"aggregation": "none", "bytes": MIB16, "source": server(), "target": server()}


def test_cost_config_and_sighup(make_daemon):
    d = make_daemon(extra="[cost]\ninter_gbps = 800\nintra_latency_us = 0\n").start()
    sel = d.post("/v1/transmission/select", SELECT).json()
    assert sel["params"] == dict(DEFAULTS, inter_gbps=800, intra_latency_us=0)
    # 16 MiB x 8 devices over 800 Gb/s, plus the 3 us send; in-server steps lose their 2 us.
    assert sel["candidates"][3]["steps"][1]["us"] == pytest.approx(3 + 8 * MIB16 * 8 / 800e3, rel=1e-12)
    assert sel["predicted_us"] == pytest.approx(3215.64256 - 4 - 2684.35456 / 2, rel=1e-9)
    # A request still overrides the configured value.
    assert d.post("/v1/transmission/select", dict(SELECT, params={"inter_gbps": 400})).json()["params"][
        "inter_gbps"] == 400
    # SIGHUP applies a new [cost] at once.
    d.config.write_text(d.config.read_text().replace("inter_gbps = 800", "inter_gbps = 100"))
    d.send_signal(signal.SIGHUP)
    deadline = time.time() + 5
    while d.post("/v1/transmission/select", SELECT).json()["params"]["inter_gbps"] != 100:
        assert time.time() < deadline, d.log()
        time.sleep(0.05)
    slow = d.post("/v1/transmission/select", SELECT).json()
    assert slow["predicted_us"] > sel["predicted_us"]
    # A bad [cost] value on SIGHUP keeps the running values and names file, line and key.
    d.config.write_text(d.config.read_text().replace("inter_gbps = 100", "inter_gbps = 0"))
    d.send_signal(signal.SIGHUP)
    deadline = time.time() + 5
    while "keeping the running configuration" not in d.log():
        assert time.time() < deadline, d.log()
        time.sleep(0.05)
    assert "[cost] inter_gbps: expected a bandwidth in Gb/s from 1e-06 to 1e+09" in d.log()
    assert d.post("/v1/transmission/select", SELECT).json()["params"]["inter_gbps"] == 100
    # Removing the section returns to the defaults.
    text = d.config.read_text()
    d.config.write_text(text[:text.index("[cost]")])
    d.send_signal(signal.SIGHUP)
    deadline = time.time() + 5
    while d.post("/v1/transmission/select", SELECT).json()["params"] != DEFAULTS:
        assert time.time() < deadline, d.log()
        time.sleep(0.05)
    assert d.stop() == 0


def test_cost_config_pipeline(make_daemon):
    d = make_daemon(extra="[cost]\ninter_gbps = 100\n").start()
    make_fabric(d, servers=3, devices=4)
    r = d.post("/v1/fabrics/job/pipeline", {"stages": ["srv2", "srv0"], "bytes": MIB16, "aggregation": "none"})
    assert r.status_code == 200 and r.json()["params"]["inter_gbps"] == 100
    send = [s for s in r.json()["pairs"][0]["candidates"][3]["steps"] if s["scope"] == "inter"][0]
    assert send["us"] == pytest.approx(3 + 4 * MIB16 * 8 / 100e3, rel=1e-12)


def test_cost_check_config(tmp_path):
    bad = tmp_path / "bad.ini"
    bad.write_text("[log]\nlevel = info\n\n[cost]\nbridge_gbps = -3\n")
    p = subprocess.run([OFCD_BIN, "-c", str(bad), "--check-config"], capture_output=True, text=True)
    assert p.returncode == 1
    assert f'{bad}:5: [cost] bridge_gbps: expected a bandwidth in Gb/s from 1e-06 to 1e+09, got "-3"' in p.stderr
    good = tmp_path / "good.ini"
    good.write_text("[cost]\n" + "".join(f"{k} = {v}\n" for k, v in DEFAULTS.items()))
    p = subprocess.run([OFCD_BIN, "-c", str(good), "--check-config"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
