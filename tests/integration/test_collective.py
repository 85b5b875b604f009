"""Collectives (documents 001-004) against the real daemon: switches and server capabilities in
the topology, POST /v1/collective/select and GET /v1/fabrics/{name}/schedule."""
import pytest

from conftest import READER, error_of


def server(i, devices=8, **extra):
    s = {"name": f"srv{i}", "devices": devices, "ports_per_device": 1, "p2p": False,
         "intra": "full-mesh", "offload": False, "switch": None}
    s.update(extra)
    return s


def topology(servers, switches=(), units=2, unit_ports=64):
    return {
        "ocs": [{"name": f"ocs{u}", "driver": "sim", "ports": unit_ports, "endpoint": ""}
                for u in range(units)],
        "switches": list(switches),
        "servers": list(servers),
        "wiring": {"rule": "plane-per-ocs"},
    }


def put_topology(d, topo):
    r = d.put("/v1/topology", topo)
    assert r.status_code == 200, r.text
    return r.json()


def make_fabric(d, name, count, first=0):
    r = d.post("/v1/fabrics", {"name": name, "servers": [f"srv{i}" for i in range(first, first + count)]})
    assert r.status_code == 201, r.text
    return r.json()


def select(d, body, status=200):
    r = d.post("/v1/collective/select", body)
    assert r.status_code == status, r.text
    return r.json()


def candidates(sel):
    return {c["algorithm"]: c for c in sel["candidates"]}


def schedule(d, fabric, status=200, **query):
    q = "&".join(f"{k}={v}" for k, v in query.items())
    r = d.get(f"/v1/fabrics/{fabric}/schedule?{q}")
    assert r.status_code == status, r.text
    return r.json()


AGG = {"name": "agg", "aggregating": True, "offload": False, "buffer": 16, "window": 8}


# ---- switches and server capabilities ---------------------------------------------------------

def test_switch_crud(daemon):
    r = daemon.post("/v1/switches", AGG)
    assert r.status_code == 201, r.text
    assert r.json() == dict(AGG, servers=[])
    r = daemon.post("/v1/switches", {"name": "tor", "offload": True})
    assert r.json() == {"name": "tor", "aggregating": False, "offload": True, "buffer": None,
                        "window": None, "servers": []}
    assert daemon.post("/v1/switches", {"name": "agg"}).status_code == 409
    assert [s["name"] for s in daemon.get("/v1/switches").json()["switches"]] == ["agg", "tor"]
    assert daemon.get("/v1/switches/agg").json()["buffer"] == 16
    assert daemon.get("/v1/switches/nope").status_code == 404
    # W <= B: refused naming both, nothing stored.
    r = daemon.post("/v1/switches", {"name": "small", "aggregating": True, "buffer": 4, "window": 8})
    e = error_of(r)
    assert r.status_code == 422 and e["code"] == "unprocessable" and e["field"] == "window"
    assert e["details"] == {"window": 8, "buffer": 4}
    assert "W=8" in e["message"] and "B=4" in e["message"]
    assert daemon.get("/v1/switches/small").status_code == 404
    bad = [
        ({}, "name"),
        ({"name": "a b"}, "name"),
        ({"name": "s", "aggregating": 1}, "aggregating"),
        ({"name": "s", "offload": "yes"}, "offload"),
        ({"name": "s", "buffer": 0}, "buffer"),
        ({"name": "s", "buffer": 1048577}, "buffer"),
        ({"name": "s", "window": 0}, "window"),
        ({"name": "s", "window": 2.5}, "window"),
        ({"name": "s", "aggregating": True, "window": 4}, "buffer"),
        ({"name": "s", "aggregating": True, "buffer": 4}, "window"),
        ({"name": "s", "extra": 1}, "extra"),
    ]
    for body, field in bad:
        r = daemon.post("/v1/switches", body)
        assert r.status_code == 400 and error_of(r)["field"] == field, (body, r.text)
    # Servers: offload and switch, shown in every view; an unknown switch is named.
    r = daemon.post("/v1/servers", {"name": "srv0", "devices": 4, "offload": True, "switch": "agg"})
    assert r.status_code == 201, r.text
    assert (r.json()["offload"], r.json()["switch"]) == (True, "agg")
    s = daemon.post("/v1/servers", {"name": "srv1", "devices": 4}).json()
    assert (s["offload"], s["switch"]) == (False, None)
    assert daemon.post("/v1/servers", {"name": "srv2", "devices": 4, "switch": None}).status_code == 201
    r = daemon.post("/v1/servers", {"name": "srv3", "devices": 4, "switch": "nope"})
    assert r.status_code == 422 and error_of(r)["field"] == "switch", r.text
    for body, field in (({"name": "srv3", "devices": 4, "offload": 1}, "offload"),
                        ({"name": "srv3", "devices": 4, "switch": 7}, "switch")):
        r = daemon.post("/v1/servers", body)
        assert r.status_code == 400 and error_of(r)["field"] == field, r.text
    assert daemon.get("/v1/servers/srv3").status_code == 404
    listed = {s["name"]: (s["offload"], s["switch"]) for s in daemon.get("/v1/servers").json()["servers"]}
    assert listed == {"srv0": (True, "agg"), "srv1": (False, None), "srv2": (False, None)}
    assert daemon.get("/v1/servers/srv0").json()["switch"] == "agg"
    assert daemon.get("/v1/switches/agg").json()["servers"] == ["srv0"]
    # In use while a server reaches it.
    r = daemon.delete("/v1/switches/agg")
    e = error_of(r)
    assert r.status_code == 409 and e["code"] == "in_use" and e["details"] == {"servers": ["srv0"]}
    assert daemon.delete("/v1/switches/tor").status_code == 200
    assert daemon.delete("/v1/switches/tor").status_code == 404
    assert daemon.delete("/v1/servers/srv0").status_code == 200
    assert daemon.delete("/v1/switches/agg").status_code == 200
    assert daemon.get("/v1/switches").json() == {"switches": []}


def test_topology_switches(daemon):
    topo = topology([server(i, devices=4, offload=i % 2 == 0, switch="agg" if i < 2 else None)
                     for i in range(4)], switches=[AGG, {"name": "tor", "aggregating": False,
                                                         "offload": True, "buffer": None,
                                                         "window": None}])
    got = put_topology(daemon, topo)
    assert got["switches"] == topo["switches"] and got["servers"] == topo["servers"]
    assert daemon.get("/v1/topology").json() == got
    # The topology writes its servers as text: as GET /v1/servers shows them, less their state.
    listed = daemon.get("/v1/servers").json()["servers"]
    assert got["servers"] == [{k: v for k, v in s.items() if k not in ("fabric", "failed_devices", "stale")}
                              for s in listed]
    before = daemon.get("/v1/topology").json()
    # Bad switches and references name the field; nothing changes.
    cases = [
        (dict(topo, switches=[dict(AGG, window=17)]), 422, "switches[0].window"),
        (dict(topo, switches=[AGG, AGG]), 400, "switches[1]"),
        (dict(topo, switches=[{"name": "x", "speed": 1}]), 400, "switches[0].speed"),
        (dict(topo, switches="agg"), 400, "switches"),
        (dict(topo, switches=[topo["switches"][1]]), 422, "servers[0].switch"),
        (dict(topo, servers=[server(0, devices=4, switch="nope")]), 422, "servers[0].switch"),
    ]
    for change, status, field in cases:
        r = daemon.put("/v1/topology", change)
        assert r.status_code == status and error_of(r)["field"] == field, (field, r.text)
        assert daemon.get("/v1/topology").json() == before
    # Switches not given are dropped with the servers' references (like the wiring).
    plain = dict(topo, servers=[server(i, devices=4) for i in range(4)])
    del plain["switches"]
    got = put_topology(daemon, plain)
    assert got["switches"] == [] and all(s["switch"] is None for s in got["servers"])
    # Persisted across a restart.
    put_topology(daemon, topo)
    daemon.restart()
    assert daemon.get("/v1/topology").json() == before


# ---- POST /v1/collective/select -----------------------------------------------------------

def test_select_what_if_vectors(daemon):
    # Document 001: 8 servers with 3 circuits each: ring 14, cube-300 8, cube-400 6 rounds.
    sel = select(daemon, {"collective": "allreduce", "bytes": 1 << 20, "servers": 8,
                          "params": {"ports_per_server": 3}})
    c = candidates(sel)
    assert (c["ring"]["rounds"], c["cube-300"]["rounds"], c["cube-400"]["rounds"]) == (14, 8, 6)
    assert sel["algorithm"] == "cube-400" and sel["predicted_us"] == c["cube-400"]["predicted_us"]
    assert not c["full-mesh-direct"]["eligible"] and c["full-mesh-direct"]["predicted_us"] is None
    assert "7 circuits" in c["full-mesh-direct"]["reason"]
    # Without devices, the servers have what the full interconnection of 8 needs: 7.
    assert (sel["servers"], sel["devices"], sel["params"]["ports_per_server"]) == (8, 7, 3)
    assert "fabric" not in sel
    assert list(c) == ["ring", "bidirectional-ring", "recursive-halving-doubling",
                       "full-mesh-direct", "cube-300", "cube-400", "nic-offload",
                       "in-network-aggregation"]
    # The cube needs exactly 8 servers; nic-offload and INA need their capabilities.
    c = candidates(select(daemon, {"collective": "allreduce", "bytes": 4096, "servers": 6}))
    assert not c["cube-400"]["eligible"] and "8 servers" in c["cube-400"]["reason"]
    assert not c["recursive-halving-doubling"]["eligible"]
    assert not c["nic-offload"]["eligible"] and "offload" in c["nic-offload"]["reason"]
    assert not c["in-network-aggregation"]["eligible"]
    c = candidates(select(daemon, {"collective": "allreduce", "bytes": 4096, "servers": 6,
                                   "params": {"offload": True, "aggregating_switch": True}}))
    assert c["nic-offload"]["eligible"] and c["in-network-aggregation"]["eligible"]
    # Document 002: FIG. 4 message counts, and 8 servers of 7 devices (FIG. 5's 8 x 4 is not a
    # shape document 000 can fully interconnect).
    for servers, devices, direct, relayed, intra in ((2, 4, 32, 8, 24), (8, 7, 2744, 392, 336)):
        sel = select(daemon, {"collective": "alltoall", "bytes": 1 << 16, "servers": servers,
                              "devices": devices})
        c = candidates(sel)
        assert (c["direct"]["inter_messages"], c["plane-relayed"]["inter_messages"]) == (direct, relayed)
        assert c["plane-relayed"]["intra_messages"] == intra
        assert c["direct"]["circuits"] == servers - 1
        assert sel["devices"] == devices
    # A what-if of a full mesh never prices circuits it could not build: /v1/plan's 422 for
    # the full mesh.
    for coll in ("alltoall", "allreduce"):
        r = daemon.post("/v1/collective/select", {"collective": coll, "bytes": 1 << 16,
                                                   "servers": 8, "devices": 4})
        e = error_of(r)
        assert r.status_code == 422 and (e["code"], e["field"]) == ("infeasible", "devices"), r.text
        assert e["details"] == {"min_devices": 7, "devices": 4}
        assert e == error_of(daemon.post("/v1/plan", {"servers": 8, "devices": 4,
                                                      "topology": "full-mesh"}))
    # Fewer ports than a full interconnection say which circuits exist: priced as such.
    sel = select(daemon, {"collective": "allreduce", "bytes": 1 << 20, "servers": 8, "devices": 4,
                          "params": {"ports_per_server": 3}})
    assert sel["algorithm"] == "cube-400" and sel["devices"] == 4
    # Allgather and broadcast choose among their own candidates.
    assert list(candidates(select(daemon, {"collective": "allgather", "bytes": 4096, "servers": 4}))) == \
        ["ring", "recursive-doubling", "full-mesh-direct"]
    sel = select(daemon, {"collective": "broadcast", "bytes": 4096, "servers": 4, "params": {"root": 3}})
    assert list(candidates(sel)) == ["binomial-tree", "full-mesh-direct", "scatter-allgather"]
    assert sel["params"]["root"] == 3


def test_select_window_and_no_candidate(daemon):
    # W > B names both, whether the switch is aggregating or the request says so.
    for params in ({"aggregating_switch": True, "window": 80, "switch_buffer": 64},
                   {"window": 80}):
        r = daemon.post("/v1/collective/select", {"collective": "allreduce", "bytes": 4096,
                                                   "servers": 4, "params": params})
        e = error_of(r)
        assert r.status_code == 422 and e["field"] == "window", r.text
        assert e["details"] == {"window": 80, "switch_buffer": 64}
        assert "window" in e["message"] and "switch_buffer" in e["message"]
    assert select(daemon, {"collective": "allreduce", "bytes": 4096, "servers": 4,
                           "params": {"window": 64, "switch_buffer": 64}})["params"]["window"] == 64
    # Nothing eligible: 422 with every candidate in the details.
    r = daemon.post("/v1/collective/select", {"collective": "allreduce", "bytes": 4096, "servers": 6,
                                               "params": {"ports_per_server": 1}})
    e = error_of(r)
    assert r.status_code == 422 and e["code"] == "infeasible", r.text
    assert len(e["details"]["candidates"]) == 8
    assert not any(c["eligible"] for c in e["details"]["candidates"])


def test_select_stored_fabric(daemon):
    put_topology(daemon, topology([server(i) for i in range(8)]))
    make_fabric(daemon, "job", 8)
    sel = select(daemon, {"collective": "allreduce", "bytes": 1 << 20, "fabric": "job"})
    assert (sel["fabric"], sel["servers"], sel["devices"]) == ("job", 8, 8)
    p = sel["params"]
    assert (p["ports_per_server"], p["offload"], p["aggregating_switch"], p["offload_switch"]) == (7, False, False, False)
    c = candidates(sel)
    assert c["full-mesh-direct"]["eligible"] and c["cube-400"]["eligible"]
    assert not c["nic-offload"]["eligible"] and not c["in-network-aggregation"]["eligible"]
    assert sel["algorithm"] == min((x for x in c.values() if x["eligible"]),
                                   key=lambda x: x["predicted_us"])["algorithm"]
    # Request params override what the fabric gives.
    sel = select(daemon, {"collective": "allreduce", "bytes": 1 << 20, "fabric": "job",
                          "params": {"ports_per_server": 3}})
    assert sel["algorithm"] == "cube-400" and sel["params"]["ports_per_server"] == 3
    # Offload on every member, and one aggregating switch reaching all of them.
    put_topology(daemon, topology([server(i, offload=True, switch="agg") for i in range(8)], [AGG]))
    sel = select(daemon, {"collective": "allreduce", "bytes": 1 << 20, "fabric": "job"})
    p, c = sel["params"], candidates(sel)
    assert (p["offload"], p["aggregating_switch"], p["switch_buffer"], p["window"]) == (True, True, 16, 8)
    assert c["nic-offload"]["eligible"] and c["in-network-aggregation"]["eligible"]
    assert "window 8 of switch buffer 16" in c["in-network-aggregation"]["reason"]
    assert "ring among the offload NICs" in c["nic-offload"]["reason"]
    # The window may not outgrow the fabric's switch buffer.
    r = daemon.post("/v1/collective/select", {"collective": "allreduce", "bytes": 4096, "fabric": "job",
                                               "params": {"window": 32}})
    assert r.status_code == 422 and error_of(r)["details"] == {"window": 32, "switch_buffer": 16}
    # An offload switch reaching all gives the tree.
    tor = {"name": "agg", "aggregating": False, "offload": True, "buffer": None, "window": None}
    put_topology(daemon, topology([server(i, offload=True, switch="agg") for i in range(8)], [tor]))
    c = candidates(select(daemon, {"collective": "allreduce", "bytes": 4096, "fabric": "job"}))
    assert "tree at the offload-capable switch" in c["nic-offload"]["reason"]
    assert not c["in-network-aggregation"]["eligible"]
    # One member without offload, another on a different switch: both capabilities go.
    servers = [server(i, offload=i != 5, switch="agg" if i != 2 else "other") for i in range(8)]
    put_topology(daemon, topology(servers, [AGG, dict(AGG, name="other")]))
    c = candidates(select(daemon, {"collective": "allreduce", "bytes": 4096, "fabric": "job"}))
    assert not c["nic-offload"]["eligible"] and not c["in-network-aggregation"]["eligible"]
    # All-to-all on the fabric uses its devices.
    sel = select(daemon, {"collective": "alltoall", "bytes": 1 << 16, "fabric": "job"})
    assert candidates(sel)["plane-relayed"]["inter_messages"] == 8 * 8 * 7


def test_select_degraded_fabric(daemon):
    put_topology(daemon, topology([server(i) for i in range(8)]))
    make_fabric(daemon, "job", 8)
    # Two failed devices on srv4 leave its pair with srv5 without a circuit.
    daemon.put("/v1/servers/srv4/devices/0", {"state": "failed"})
    daemon.put("/v1/servers/srv4/devices/1", {"state": "failed"})
    f = daemon.get("/v1/fabrics/job?wait=10").json()
    assert f["state"] == "degraded" and f["missing"] == [["srv4", "srv5"]]
    # Ring, both cubes and recursive halving all cross srv4-srv5; full-mesh-direct lacks
    # ports: nothing fits, and every candidate says why.
    body = {"collective": "allreduce", "bytes": 1 << 20, "fabric": "job"}
    r = daemon.post("/v1/collective/select", body)
    e = error_of(r)
    assert r.status_code == 422 and e["code"] == "infeasible", r.text
    c = {x["algorithm"]: x for x in e["details"]["candidates"]}
    assert not any(x["eligible"] for x in c.values())
    for name in ("ring", "bidirectional-ring", "recursive-halving-doubling", "cube-300", "cube-400"):
        assert c[name]["reason"] == "needs a circuit between srv4 and srv5, which fabric job lacks"
        assert c[name]["rounds"] is None and c[name]["predicted_us"] is None
    assert c["full-mesh-direct"]["reason"] == "full-mesh-direct needs 7 circuits per server, a server has 6"
    # Offload in the NICs does not need the circuit.
    sel = select(daemon, dict(body, params={"offload": True}))
    assert sel["algorithm"] == "nic-offload" and sel["params"]["ports_per_server"] == 6
    # A binomial tree from srv0 avoids the pair, from srv4 it needs it.
    c = candidates(select(daemon, dict(body, collective="broadcast")))
    assert c["binomial-tree"]["eligible"]
    r = daemon.post("/v1/collective/select", dict(body, collective="broadcast", params={"root": 4}))
    assert r.status_code == 422 and "srv4 and srv5" in error_of(r)["details"]["candidates"][0]["reason"]
    # The schedule route names every pair a schedule needs and the fabric lacks.
    for alg in ("full-mesh-direct", "ring", "cube-400"):
        r = daemon.get(f"/v1/fabrics/job/schedule?collective=allreduce&algorithm={alg}&bytes=4096")
        e = error_of(r)
        assert r.status_code == 422 and e["code"] == "infeasible" and e["details"] == {"missing": f["missing"]}
        assert e["message"].startswith(f"{alg} needs a circuit between srv4 and srv5")
    sch = schedule(daemon, "job", collective="broadcast", algorithm="binomial-tree", bytes=4096)
    assert sch["check"] == {"valid": True}
    # All-to-all sends between every two servers.
    r = daemon.post("/v1/collective/select", {"collective": "alltoall", "bytes": 4096, "fabric": "job"})
    e = error_of(r)
    assert r.status_code == 422 and e["code"] == "infeasible"
    # Its price needs every circuit, and srv4 has 6 of 7.
    assert all(x["reason"].endswith("needs 7 circuits per server, a server has 6")
               for x in e["details"]["candidates"])


# ---- GET /v1/fabrics/{name}/schedule ------------------------------------------------------

def circuit_index(fabric):
    """Stored circuits by unordered server pair, each end by server."""
    idx = {}
    for l in fabric["links"]:
        pair = frozenset((l["a"]["server"], l["b"]["server"]))
        assert pair not in idx
        idx[pair] = (l["plane"], {l["a"]["server"]: l["a"], l["b"]["server"]: l["b"]})
    return idx


def assert_mapped(sch, fabric):
    """Every transfer between two servers rides the stored circuit joining them."""
    idx = circuit_index(fabric)
    inter = 0
    for rnd in sch["rounds"]:
        for t in rnd["transfers"]:
            if t["src"] == t["dst"]:
                assert t["circuit"] is None
                continue
            inter += 1
            plane, ends = idx[frozenset((t["src"], t["dst"]))]
            c, s, d = t["circuit"], ends[t["src"]], ends[t["dst"]]
            assert c["ocs"] == s["ocs"] == d["ocs"] and c["plane"] == plane
            assert (c["src_device"], c["src_port"], c["src_ocs_port"]) == (s["device"], s["port"], s["ocs_port"])
            assert (c["dst_device"], c["dst_port"], c["dst_ocs_port"]) == (d["device"], d["port"], d["ocs_port"])
    assert inter == sch["stats"]["inter_messages"]


def test_schedule_on_fabric(daemon):
    put_topology(daemon, topology([server(i) for i in range(8)]))
    fabric = make_fabric(daemon, "job", 8)
    names = [f"srv{i}" for i in range(8)]
    for alg, rounds, degree in (("ring", 14, 2), ("full-mesh-direct", 2, 7), ("cube-400", 6, 3),
                                ("cube-300", 8, 3), ("recursive-halving-doubling", 6, 3)):
        sch = schedule(daemon, "job", collective="allreduce", algorithm=alg, bytes=1 << 20)
        assert sch["check"] == {"valid": True}
        assert (sch["fabric"], sch["collective"], sch["algorithm"], sch["bytes"]) == ("job", "allreduce", alg, 1 << 20)
        assert sch["servers"] == names and sch["devices"] == 1
        assert len(sch["rounds"]) == rounds == sch["stats"]["rounds"]
        assert [r["round"] for r in sch["rounds"]] == list(range(rounds))
        assert sch["stats"]["max_degree"] == degree
        assert sch["stats"]["max_circuit_load"] == 1
        assert sch["predicted_us"] > 0
        for rnd in sch["rounds"]:
            for t in rnd["transfers"]:
                assert t["op"] in ("copy", "reduce") and t["src"] in names and t["dst"] in names
                assert t["bytes"] == sum(sch["chunks"][i]["bytes"] for i in t["chunks"])
        assert_mapped(sch, fabric)
    # The cube uses 12 of the 28 circuits.
    sch = schedule(daemon, "job", collective="allreduce", algorithm="cube-400", bytes=12 << 10)
    used = {frozenset((t["src"], t["dst"])) for r in sch["rounds"] for t in r["transfers"]}
    assert len(used) == 12
    # All-to-all names devices too; in-server hops have no circuit.
    sch = schedule(daemon, "job", collective="alltoall", algorithm="plane-relayed", bytes=1 << 16)
    assert sch["devices"] == 8 and sch["check"] == {"valid": True}
    assert (sch["stats"]["inter_messages"], sch["stats"]["intra_messages"]) == (8 * 8 * 7, 8 * 8 * 7)
    # 8 relays a server over its 7 circuits: two share one circuit in a round, as priced.
    assert sch["stats"]["max_circuit_load"] == 2
    sel = candidates(select(daemon, {"collective": "alltoall", "bytes": 1 << 16, "fabric": "job"}))
    assert sch["predicted_us"] == pytest.approx(sel["plane-relayed"]["predicted_us"], rel=1e-9)
    t = sch["rounds"][0]["transfers"][0]
    assert {"src_device", "dst_device"} <= set(t)
    assert {"origin_device", "dest_device"} <= set(sch["chunks"][0])
    assert_mapped(sch, fabric)
    # Allgather and a broadcast from a named root.
    sch = schedule(daemon, "job", collective="allgather", algorithm="ring", bytes=8000)
    assert len(sch["rounds"]) == 7
    sch = schedule(daemon, "job", collective="broadcast", algorithm="binomial-tree", bytes=8000, root="srv3")
    assert sch["rounds"][0]["transfers"][0]["src"] == "srv3"
    assert_mapped(sch, fabric)
    # Tiny messages still check.
    assert schedule(daemon, "job", collective="allreduce", algorithm="ring", bytes=1)["check"]["valid"]


def test_schedule_pages(daemon):
    """A big schedule comes in pages of whole rounds, chunks with the first, that add up to it."""
    put_topology(daemon, topology([server(i) for i in range(8)]))
    make_fabric(daemon, "job", 8)
    q = dict(collective="allreduce", algorithm="ring", bytes=1 << 20)
    whole = schedule(daemon, "job", **q)
    assert "next_round" not in whole and len(whole["rounds"]) == 14
    pages, first = [], 0
    while first is not None:
        page = schedule(daemon, "job", limit=20, round=first, **q)
        assert sum(len(r["transfers"]) for r in page["rounds"]) <= 20
        assert ("chunks" in page) == (first == 0)
        assert page["stats"] == whole["stats"]
        pages.append(page)
        first = page.get("next_round")
    assert [r for p in pages for r in p["rounds"]] == whole["rounds"]
    assert len(pages) > 1
    # A round bigger than the limit still comes, alone.
    one = schedule(daemon, "job", limit=1, **q)
    assert len(one["rounds"]) == 1 and one["next_round"] == 1
    for bad in ("round=14", "round=x", "limit=0", "limit=65537"):
        r = daemon.get(f"/v1/fabrics/job/schedule?collective=allreduce&algorithm=ring&bytes=8&{bad}")
        assert r.status_code == 400 and error_of(r)["field"] == bad.split("=")[0]


def test_schedule_refusals(daemon):
    put_topology(daemon, topology([server(i) for i in range(8)] + [server(i, devices=9) for i in range(8, 16)]
                                  + [server(16)], units=2, unit_ports=128))
    make_fabric(daemon, "six", 6)
    make_fabric(daemon, "wide", 8, first=8)
    make_fabric(daemon, "solo", 1, first=16)
    for alg, why in (("cube-300", "8 servers"), ("cube-400", "8 servers"),
                     ("recursive-halving-doubling", "power-of-two")):
        r = daemon.get(f"/v1/fabrics/six/schedule?collective=allreduce&algorithm={alg}&bytes=4096")
        e = error_of(r)
        assert r.status_code == 422 and e["code"] == "infeasible" and e["field"] == "algorithm", r.text
        assert why in e["message"] and "six" in e["message"]
    for alg in ("nic-offload", "in-network-aggregation"):
        r = daemon.get(f"/v1/fabrics/six/schedule?collective=allreduce&algorithm={alg}&bytes=4096")
        assert r.status_code == 422 and "priced, not scheduled" in error_of(r)["message"]
    # 8 servers x 9 devices is past the all-to-all schedule cap of 64 participants.
    r = daemon.get("/v1/fabrics/wide/schedule?collective=alltoall&algorithm=direct&bytes=4096")
    e = error_of(r)
    assert r.status_code == 422 and "72 participants" in e["message"] and "64" in e["message"], r.text
    assert select(daemon, {"collective": "alltoall", "bytes": 4096, "fabric": "wide"})["devices"] == 9
    # One server has nothing to exchange.
    r = daemon.get("/v1/fabrics/solo/schedule?collective=allreduce&algorithm=ring&bytes=4096")
    assert r.status_code == 422 and "2 servers" in error_of(r)["message"]
    r = daemon.post("/v1/collective/select", {"collective": "allreduce", "bytes": 4096, "fabric": "solo"})
    e = error_of(r)
    assert r.status_code == 422 and e["field"] == "fabric" and "2 servers" in e["message"], r.text


def test_bad_inputs(daemon):
    put_topology(daemon, topology([server(i) for i in range(4)]))
    make_fabric(daemon, "job", 4)
    ok = {"collective": "allreduce", "bytes": 4096, "servers": 4}
    bad = [
        ({"bytes": 4096, "servers": 4}, "collective"),
        (dict(ok, collective="reduce"), "collective"),
        (dict(ok, collective=1), "collective"),
        ({"collective": "allreduce", "servers": 4}, "bytes"),
        (dict(ok, bytes=0), "bytes"),
        (dict(ok, bytes=(1 << 50) + 1), "bytes"),
        (dict(ok, bytes="4096"), "bytes"),
        (dict(ok, bytes=1.5), "bytes"),
        ({"collective": "allreduce", "bytes": 4096}, "servers"),
        (dict(ok, servers=0), "servers"),
        (dict(ok, servers=1), "servers"),
        (dict(ok, servers=65537), "servers"),
        (dict(ok, devices=0), "devices"),
        (dict(ok, fabric="job"), "servers"),
        ({"collective": "allreduce", "bytes": 4096, "fabric": "job", "devices": 2}, "devices"),
        (dict(ok, fabric="a b"), "fabric"),
        (dict(ok, extra=1), "extra"),
        (dict(ok, params=[]), "params"),
        (dict(ok, params={"speed": 1}), "params.speed"),
        (dict(ok, params={"link_gbps": 0}), "params.link_gbps"),
        (dict(ok, params={"alpha_us": -1}), "params.alpha_us"),
        (dict(ok, params={"alpha_us": "3"}), "params.alpha_us"),
        (dict(ok, params={"mtu": 100}), "params.mtu"),
        (dict(ok, params={"segment_bytes": 8192}), "params.segment_bytes"),
        (dict(ok, params={"offload": 1}), "params.offload"),
        (dict(ok, params={"window": 0}), "params.window"),
        (dict(ok, params={"ports_per_server": -1}), "params.ports_per_server"),
        (dict(ok, collective="broadcast", params={"root": 4}), "params.root"),
        ({"collective": "alltoall", "bytes": 4096, "servers": 1, "devices": 1}, "devices"),
    ]
    for body, field in bad:
        r = daemon.post("/v1/collective/select", body)
        assert r.status_code == 400, (body, r.text)
        assert error_of(r)["field"] == field, (body, r.text)
    r = daemon.post("/v1/collective/select", raw="")
    assert r.status_code == 400 and error_of(r)["code"] == "invalid_json"
    assert daemon.post("/v1/collective/select", raw="[1]").status_code == 400
    r = daemon.post("/v1/collective/select", {"collective": "allreduce", "bytes": 4096, "fabric": "nope"})
    assert r.status_code == 422 and error_of(r)["field"] == "fabric"
    assert daemon.get("/v1/collective/select").status_code == 405
    # The schedule route's query.
    base = "/v1/fabrics/job/schedule"
    assert daemon.get("/v1/fabrics/nope/schedule?collective=allreduce&algorithm=ring&bytes=1").status_code == 404
    bad = [
        ("algorithm=ring&bytes=4096", "collective"),
        ("collective=&algorithm=ring&bytes=4096", "collective"),
        ("collective=reduce&algorithm=ring&bytes=4096", "collective"),
        ("collective=allreduce&bytes=4096", "algorithm"),
        ("collective=allreduce&algorithm=spiral&bytes=4096", "algorithm"),
        ("collective=allgather&algorithm=cube-400&bytes=4096", "algorithm"),
        ("collective=alltoall&algorithm=ring&bytes=4096", "algorithm"),
        ("collective=allreduce&algorithm=ring", "bytes"),
        ("collective=allreduce&algorithm=ring&bytes=0", "bytes"),
        ("collective=allreduce&algorithm=ring&bytes=-1", "bytes"),
        ("collective=allreduce&algorithm=ring&bytes=%2B1", "bytes"),
        ("collective=allreduce&algorithm=ring&bytes=1.5", "bytes"),
        ("collective=allreduce&algorithm=ring&bytes=abc", "bytes"),
        ("collective=allreduce&algorithm=ring&bytes=%201", "bytes"),
        (f"collective=allreduce&algorithm=ring&bytes={(1 << 50) + 1}", "bytes"),
        ("collective=allreduce&algorithm=ring&bytes=99999999999999999999999", "bytes"),
        ("collective=broadcast&algorithm=binomial-tree&bytes=1&root=srv9", "root"),
    ]
    for query, field in bad:
        r = daemon.get(f"{base}?{query}")
        assert r.status_code == 400, (query, r.text)
        assert error_of(r)["field"] == field, (query, r.text)
    assert daemon.get(f"{base}?collective=allreduce&algorithm=ring&bytes={1 << 50}").status_code == 200


def test_roles(auth_daemon):
    d = auth_daemon
    put_topology(d, topology([server(i) for i in range(4)]))
    make_fabric(d, "job", 4)
    body = {"collective": "allreduce", "bytes": 4096, "fabric": "job"}
    # What-if: it stores nothing, so a read token may ask.
    assert d.post("/v1/collective/select", body, token=READER).status_code == 200
    assert d.post("/v1/collective/select", body).status_code == 200
    assert d.get("/v1/fabrics/job/schedule?collective=allreduce&algorithm=ring&bytes=8",
                 token=READER).status_code == 200
    assert d.get("/v1/switches", token=READER).status_code == 200
    assert d.post("/v1/switches", {"name": "s"}, token=READER).status_code == 403
    assert d.post("/v1/collective/select", body, token="").status_code == 401


@pytest.mark.parametrize("servers", [2, 3, 5, 8, 16])
def test_every_schedule_checks(daemon, servers):
    put_topology(daemon, topology([server(i, devices=max(servers, 2)) for i in range(servers)],
                                  unit_ports=256))
    fabric = make_fabric(daemon, "job", servers)
    sel = {"allreduce": None, "allgather": None, "broadcast": None}
    for coll in sel:
        for c in select(daemon, {"collective": coll, "bytes": 1 << 12, "fabric": "job"})["candidates"]:
            if not c["scheduled"] or not c["eligible"]:
                continue
            sch = schedule(daemon, "job", collective=coll, algorithm=c["algorithm"], bytes=1 << 12)
            assert sch["check"] == {"valid": True} and len(sch["rounds"]) == c["rounds"]
            assert_mapped(sch, fabric)
