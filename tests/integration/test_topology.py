"""Topology, wiring, stateless plans and fabrics against the real daemon."""
import itertools
import json
import sqlite3

from conftest import error_of


def make_cluster(d, servers=8, devices=8, ports=1, units=2, unit_ports=64):
    for u in range(units):
        assert d.post("/v1/ocs", {"name": f"ocs{u}", "driver": "sim", "ports": unit_ports}).status_code == 201
    for s in range(servers):
        r = d.post("/v1/servers", {"name": f"srv{s}", "devices": devices, "ports_per_device": ports})
        assert r.status_code == 201, r.text
    r = d.put("/v1/wiring", {"rule": "plane-per-ocs"})
    assert r.status_code == 200, r.text


def settle(d):
    """Waits until every fabric reached a final state (applied, degraded, failed)."""
    for f in d.get("/v1/fabrics").json()["fabrics"]:
        assert d.get(f"/v1/fabrics/{f['name']}?wait=10").json()["state"] in ("applied", "degraded")


def snapshot(d):
    settle(d)
    return (d.get("/v1/topology").json(), d.get("/v1/fabrics").json())


def assert_full_mesh(fabric):
    names = fabric["servers"]
    pairs = {tuple(sorted((l["a"]["server"], l["b"]["server"]))) for l in fabric["links"]}
    missing = {tuple(sorted(p)) for p in fabric["missing"]}
    assert len(pairs) == len(fabric["links"])
    assert pairs | missing == {tuple(sorted(p)) for p in itertools.combinations(names, 2)}
    assert not pairs & missing
    ends = [(l[e]["server"], l[e]["device"], l[e]["port"]) for l in fabric["links"] for e in "ab"]
    assert len(ends) == len(set(ends))
    ocs_ports = [(l[e]["ocs"], l[e]["ocs_port"]) for l in fabric["links"] for e in "ab"]
    assert len(ocs_ports) == len(set(ocs_ports))
    for l in fabric["links"]:
        assert l["a"]["ocs"] == l["b"]["ocs"]


def test_plan_vectors(daemon):
    r = daemon.post("/v1/plan", {"servers": 8, "devices": 8})
    assert r.status_code == 200
    p = r.json()
    assert (p["planes"], p["min_devices"], p["formula"], p["feasible"]) == (7, 7, "3", True)
    assert len(p["links"]) == 28
    # FIG. 12: on plane 0 server 7 joins server 4, server 0 joins server 1.
    plane0 = {(l["a"]["server"], l["b"]["server"]) for l in p["links"] if l["plane"] == 0}
    assert (4, 7) in plane0 and (0, 1) in plane0
    assert all(l["a"]["device"] == l["b"]["device"] == l["plane"] for l in p["links"])
    keys = [(l["plane"], l["a"]["server"]) for l in p["links"]]
    assert keys == sorted(keys) and all(l["a"]["server"] < l["b"]["server"] for l in p["links"])
    # FIG. 10: M = 7, formula 1, server 0 idles on plane 0.
    p = daemon.post("/v1/plan", {"servers": 7, "devices": 7}).json()
    assert p["formula"] == "1" and p["min_devices"] == 7
    assert not any(0 in (l["a"]["server"], l["b"]["server"]) for l in p["links"] if l["plane"] == 0)
    # FIG. 11: M = 8 with formula 1: 8 planes; server 7 meets server 1 on plane 0.
    p = daemon.post("/v1/plan", {"servers": 8, "devices": 8, "formula": "1"}).json()
    assert p["planes"] == 8 and (1, 7) in {(l["a"]["server"], l["b"]["server"]) for l in p["links"] if l["plane"] == 0}
    # Several ports per device: 65 servers, 8 ports -> 9 devices.
    p = daemon.post("/v1/plan", {"servers": 65, "devices": 9, "ports_per_device": 8}).json()
    assert (p["planes"], p["min_devices"], len(p["links"])) == (65, 9, 65 * 64 // 2)
    assert daemon.post("/v1/plan", {"servers": 1, "devices": 1}).json()["links"] == []


def test_plan_infeasible(daemon):
    r = daemon.post("/v1/plan", {"servers": 8, "devices": 6, "topology": "full-mesh"})
    assert r.status_code == 422
    e = error_of(r)
    assert e["code"] == "infeasible"
    assert e["message"] == "8 servers need 7 devices per server, each has 6"
    assert e["details"] == {"min_devices": 7, "devices": 6}
    # A formula or links asks for the full mesh too.
    for extra in ({"formula": "1"}, {"links": False}):
        r = daemon.post("/v1/plan", {"servers": 8, "devices": 6, **extra})
        assert r.status_code == 422 and error_of(r)["field"] == "devices", extra
    # Auto (no topology): the full mesh where it fits, as before; else a grid.
    p = daemon.post("/v1/plan", {"servers": 8, "devices": 7}).json()
    assert p["formula"] == "3" and len(p["links"]) == 28 and "topology" not in p
    p = daemon.post("/v1/plan", {"servers": 8, "devices": 6}).json()
    assert (p["topology"], p["shape"], p["diameter"]) == ("hyperx", [4, 2], 2), p
    assert "full mesh of 8 servers needs 7 planes" in p["choice"]["reason"]
    # Nothing fits one plane past two servers: the refusal names the largest that would.
    r = daemon.post("/v1/plan", {"servers": 8, "devices": 1})
    e = error_of(r)
    assert r.status_code == 422 and (e["code"], e["field"]) == ("infeasible", "servers"), r.text
    assert "2 would fit" in e["message"], e


def test_ocs_crud(daemon):
    r = daemon.post("/v1/ocs", {"name": "ocs0", "driver": "sim", "ports": 320, "endpoint": ""})
    assert r.status_code == 201
    assert r.json() == {"name": "ocs0", "driver": "sim", "ports": 320, "endpoint": ""}
    assert daemon.post("/v1/ocs", {"name": "ocs1", "ports": 8}).json()["driver"] == "sim"
    assert [o["name"] for o in daemon.get("/v1/ocs").json()["ocs"]] == ["ocs0", "ocs1"]
    assert daemon.get("/v1/ocs/ocs0").json()["ports"] == 320
    r = daemon.post("/v1/ocs", {"name": "ocs0", "ports": 8})
    assert r.status_code == 409 and error_of(r)["code"] == "conflict"
    bad = [
        ({"ports": 8}, "name"),
        ({"name": "", "ports": 8}, "name"),
        ({"name": "x" * 65, "ports": 8}, "name"),
        ({"name": "a b", "ports": 8}, "name"),
        ({"name": "a", "ports": 0}, "ports"),
        ({"name": "a", "ports": 65537}, "ports"),
        ({"name": "a", "ports": "8"}, "ports"),
        ({"name": "a", "ports": 8, "driver": "nope"}, "driver"),
        ({"name": "a", "ports": 8, "driver": 3}, "driver"),
        ({"name": "a", "ports": 8, "endpoint": 3}, "endpoint"),
        ({"name": "a", "ports": 8, "extra": 1}, "extra"),
    ]
    for body, field in bad:
        r = daemon.post("/v1/ocs", body)
        assert r.status_code == 400, (body, r.text)
        assert error_of(r)["field"] == field, (body, r.text)
    assert len(daemon.get("/v1/ocs").json()["ocs"]) == 2
    assert daemon.get("/v1/ocs/nope").status_code == 404
    assert daemon.delete("/v1/ocs/nope").status_code == 404
    assert daemon.delete("/v1/ocs/ocs1").status_code == 200
    assert daemon.get("/v1/ocs/ocs1").status_code == 404


def test_server_crud(daemon):
    r = daemon.post("/v1/servers", {"name": "srv0", "devices": 8, "ports_per_device": 2, "p2p": True,
                                    "intra": "two-groups"})
    assert r.status_code == 201
    s = r.json()
    assert (s["devices"], s["ports_per_device"], s["p2p"], s["intra"], s["fabric"]) == (8, 2, True, "two-groups", None)
    assert len(s["device_info"]) == 8 and s["device_info"][3] == {"index": 3, "state": "ok", "ports": []}
    s = daemon.post("/v1/servers", {"name": "srv1", "devices": 4}).json()
    assert (s["ports_per_device"], s["p2p"], s["intra"]) == (1, False, "full-mesh")
    assert daemon.post("/v1/servers", {"name": "srv1", "devices": 4}).status_code == 409
    bad = [
        ({"name": "s", "devices": 0}, "devices"),
        ({"name": "s", "devices": 1025}, "devices"),
        ({"name": "s"}, "devices"),
        ({"name": "s", "devices": 2, "ports_per_device": 0}, "ports_per_device"),
        ({"name": "s", "devices": 2, "p2p": "yes"}, "p2p"),
        ({"name": "s", "devices": 2, "intra": "ring"}, "intra"),
        ({"name": "s/1", "devices": 2}, "name"),
    ]
    for body, field in bad:
        r = daemon.post("/v1/servers", body)
        assert r.status_code == 400 and error_of(r)["field"] == field, (body, r.text)
    assert [s["name"] for s in daemon.get("/v1/servers").json()["servers"]] == ["srv0", "srv1"]
    assert daemon.delete("/v1/servers/srv1").status_code == 200
    assert daemon.get("/v1/servers/srv1").status_code == 404


def test_server_list_is_each_server_view(daemon):
    """GET /v1/servers (written as text) lists each server as GET /v1/servers/NAME shows it,
    less its device, port and inventory detail: fabric, failed devices in order, stale."""
    make_cluster(daemon, servers=4, devices=8, ports=1)
    assert daemon.post("/v1/fabrics", {"name": "f", "servers": ["srv0", "srv1"]}).status_code == 201
    for dev in (5, 1, 3):
        r = daemon.put(f"/v1/servers/srv2/devices/{dev}", {"state": "failed"})
        assert r.status_code == 200, r.text
    listed = daemon.get("/v1/servers").json()["servers"]
    assert [v["name"] for v in listed] == [f"srv{i}" for i in range(4)]
    for v in listed:
        one = daemon.get(f"/v1/servers/{v['name']}").json()
        assert v == {k: x for k, x in one.items()
                     if k not in ("device_info", "joined", "inventory")}, v
    assert [v["fabric"] for v in listed] == ["f", "f", None, None]
    assert listed[2]["failed_devices"] == [1, 3, 5] and listed[3]["failed_devices"] == []
    assert not any(v["stale"] for v in listed)


def test_wiring(daemon):
    make_cluster(daemon, servers=4, devices=4, units=2, unit_ports=8)
    w = daemon.get("/v1/wiring").json()
    assert w["rule"] == "plane-per-ocs" and len(w["links"]) == 16
    # Slot k of every server on unit k mod 2, ports handed out in server order.
    first = {(l["server"], l["device"]): (l["ocs"], l["ocs_port"]) for l in w["links"]}
    assert first[("srv0", 0)] == ("ocs0", 1) and first[("srv0", 1)] == ("ocs1", 1)
    assert first[("srv0", 2)] == ("ocs0", 2) and first[("srv1", 0)] == ("ocs0", 3)
    server = daemon.get("/v1/servers/srv1").json()
    assert server["device_info"][0]["ports"] == [{"port": 0, "ocs": "ocs0", "ocs_port": 3}]

    before = daemon.get("/v1/wiring").json()
    links = [{"server": "srv0", "device": 0, "port": 0, "ocs": "ocs0", "ocs_port": 1},
             {"server": "srv1", "device": 0, "port": 0, "ocs": "ocs0", "ocs_port": 2}]
    bad = [
        (links + [dict(links[0], ocs_port=3)], 422, "links[2]", "cabled twice"),
        (links + [dict(links[1], server="srv2")], 422, "links[2]", "ocs0 port 2 is cabled twice"),
        (links + [dict(links[0], server="srv9")], 422, "links[2]", "no server srv9"),
        (links + [dict(links[0], ocs="ocs9")], 422, "links[2]", "no OCS unit ocs9"),
        (links + [dict(links[0], ocs_port=9)], 422, "links[2]", "ports 1..8"),
        (links + [dict(links[0], device=4, ocs_port=5)], 422, "links[2]", "devices 0..3"),
        (links + [dict(links[0], ocs_port=0)], 400, "links[2].ocs_port", None),
        (links + [dict(links[0], device="0")], 400, "links[2].device", None),
        ([{"server": "srv0"}], 400, "links[0].device", None),
    ]
    for body, status, field, text in bad:
        r = daemon.put("/v1/wiring", {"links": body})
        assert r.status_code == status, (body, r.text)
        assert error_of(r)["field"] == field, r.text
        if text:
            assert text in error_of(r)["message"]
    assert daemon.put("/v1/wiring", {"rule": "plane-per-ocs", "links": []}).status_code == 400
    assert daemon.put("/v1/wiring", {}).status_code == 400
    assert daemon.put("/v1/wiring", {"rule": "ring"}).status_code == 400
    assert daemon.get("/v1/wiring").json() == before
    # A rule that does not fit the port counts.
    daemon.post("/v1/servers", {"name": "big", "devices": 16})
    r = daemon.put("/v1/wiring", {"rule": "plane-per-ocs"})
    assert r.status_code == 422 and "needs 16 ports on OCS unit ocs0, it has 8" in error_of(r)["message"]
    assert daemon.get("/v1/wiring").json() == before
    r = daemon.put("/v1/wiring", {"links": links})
    assert r.status_code == 200 and r.json()["rule"] is None and len(r.json()["links"]) == 2


def test_wiring_rule_in_parts(daemon):
    """PUT /v1/wiring of a rule that adds more than 8,192 cables goes in parts (4,096 a turn),
    and a rule that no longer fits is still refused whole, before the first part."""
    for u in range(64):
        assert daemon.post("/v1/ocs", {"name": f"u{u:02d}", "driver": "sim", "ports": 130}) \
            .status_code == 201
    for i in range(130):
        assert daemon.post("/v1/servers", {"name": f"s{i}", "devices": 8, "ports_per_device": 8}) \
            .status_code == 201
    r = daemon.put("/v1/wiring", {"rule": "plane-per-ocs"})
    assert r.status_code == 200, r.text
    w = r.json()
    assert w["rule"] == "plane-per-ocs" and "partial" not in w and len(w["links"]) == 130 * 64
    assert len({(l["ocs"], l["ocs_port"]) for l in w["links"]}) == 130 * 64
    assert daemon.get("/v1/wiring").json() == w
    daemon.post("/v1/servers", {"name": "extra", "devices": 8, "ports_per_device": 8})
    r = daemon.put("/v1/wiring", {"rule": "plane-per-ocs"})
    assert r.status_code == 422 and "needs 131 ports" in error_of(r)["message"]
    assert daemon.get("/v1/wiring").json() == w


def test_wiring_rule_past_32_bits_of_ports_is_refused(daemon):
    # 4,096 servers of 2^20 ports each need 2^32 ports of the one unit: a count that wraps
    # at 32 bits read 0, and the rule went on to store cables for hours.
    body = {"ocs": [{"name": "o", "ports": 65536}],
            "servers": [{"name": f"s{i}", "devices": 1024, "ports_per_device": 1024}
                        for i in range(4096)],
            "wiring": {"rule": "plane-per-ocs"}}
    r = daemon.put("/v1/topology", body, timeout=20)
    assert r.status_code == 422 and error_of(r)["field"] == "wiring.rule", r.text
    assert "needs 4294967296 ports on OCS unit o, it has 65536" in error_of(r)["message"]
    assert daemon.get("/v1/servers").json()["servers"] == []


def test_fabric_lifecycle(daemon):
    make_cluster(daemon)
    r = daemon.post("/v1/fabrics?wait=10", {"name": "job-a", "servers": [f"srv{i}" for i in range(5)]})
    assert r.status_code == 201, r.text
    f = r.json()
    assert (f["state"], f["min_devices"], f["planes"], f["revision"]) == ("applied", 5, 5, 1)
    assert len(f["links"]) == 10 and f["missing"] == []
    assert_full_mesh(f)
    assert daemon.get("/v1/fabrics/job-a").json() == f
    # Overlap, duplicates and unknown names.
    r = daemon.post("/v1/fabrics", {"name": "job-b", "servers": ["srv5", "srv4"]})
    assert r.status_code == 409 and error_of(r)["code"] == "in_use" and error_of(r)["field"] == "servers[1]"
    assert daemon.post("/v1/fabrics", {"name": "job-a", "servers": ["srv5"]}).status_code == 409
    assert daemon.post("/v1/fabrics", {"name": "job-b", "servers": ["srv5", "srv5"]}).status_code == 400
    assert daemon.post("/v1/fabrics", {"name": "job-b", "servers": ["srvX"]}).status_code == 422
    assert daemon.post("/v1/fabrics", {"name": "job-b", "servers": []}).status_code == 400
    assert daemon.post("/v1/fabrics", {"name": "job-b", "servers": "srv5"}).status_code == 400
    assert daemon.post("/v1/fabrics", {"name": "job-b", "servers": [5]}).status_code == 400
    assert [x["name"] for x in daemon.get("/v1/fabrics").json()["fabrics"]] == ["job-a"]
    # A second, disjoint fabric; the two never share an OCS port.
    r = daemon.post("/v1/fabrics", {"name": "job-b", "servers": ["srv5", "srv6", "srv7"]})
    assert r.status_code == 201
    b = r.json()
    assert_full_mesh(b)
    used_a = {(l[e]["ocs"], l[e]["ocs_port"]) for l in f["links"] for e in "ab"}
    used_b = {(l[e]["ocs"], l[e]["ocs_port"]) for l in b["links"] for e in "ab"}
    assert not used_a & used_b
    desired = daemon.get("/v1/ocs/ocs0/cross-connects").json()["desired"]
    assert desired == sorted(desired) and all(x < y for x, y in desired)
    assert len(desired) == sum(1 for l in f["links"] + b["links"] if l["a"]["ocs"] == "ocs0")
    # In use: servers, OCS units and cabling of a fabric.
    assert error_of(daemon.delete("/v1/servers/srv0"))["code"] == "in_use"
    assert error_of(daemon.delete("/v1/ocs/ocs0"))["code"] == "in_use"
    r = daemon.put("/v1/wiring", {"links": []})
    assert r.status_code == 409 and error_of(r)["code"] == "in_use"
    assert daemon.get("/v1/servers/srv0").json()["fabric"] == "job-a"
    # Delete: accepted (202, removing); the circuits come off the units afterwards.
    r = daemon.delete("/v1/fabrics/job-a")
    assert r.status_code == 202 and r.json() == {"deleted": "job-a", "state": "removing"}
    assert daemon.get("/v1/fabrics/job-a").status_code == 404
    assert daemon.delete("/v1/fabrics/job-a").status_code == 404
    assert daemon.delete("/v1/servers/srv0").status_code == 200


def test_fabric_infeasible_stores_nothing(daemon):
    make_cluster(daemon, servers=8, devices=6, units=2)
    before = snapshot(daemon)
    r = daemon.post("/v1/fabrics", {"name": "big", "servers": [f"srv{i}" for i in range(8)],
                                    "topology": "full-mesh"})
    assert r.status_code == 422
    e = error_of(r)
    assert e["code"] == "infeasible" and e["details"] == {"min_devices": 7, "devices": 6}
    assert snapshot(daemon) == before
    assert daemon.get("/v1/fabrics/big").status_code == 404
    # Auto, the default, lays the same servers out as a 4 x 2 HyperX instead.
    f = daemon.post("/v1/fabrics", {"name": "big", "servers": [f"srv{i}" for i in range(8)]})
    assert f.status_code == 201 and (f.json()["topology"], f.json()["shape"]) == ("hyperx", [4, 2])


def test_failure_and_recovery(daemon):
    make_cluster(daemon, servers=8, devices=8)
    f = daemon.post("/v1/fabrics", {"name": "job", "servers": [f"srv{i}" for i in range(8)]}).json()
    assert len(f["links"]) == 28 and f["min_devices"] == 7
    r = daemon.put("/v1/servers/srv3/devices/0", {"state": "failed"})
    assert r.status_code == 200 and r.json()["changed"] is True
    g = daemon.get("/v1/fabrics/job?wait=10").json()
    assert g["revision"] == 2 and g["state"] == "applied" and g["missing"] == []
    assert_full_mesh(g)
    # Only the circuit that used srv3 device 0 moved, to the spare device 7.
    def key(l):
        return (l["a"]["server"], l["b"]["server"])
    old = {key(l): l for l in f["links"]}
    new = {key(l): l for l in g["links"]}
    moved = [k for k in old if old[k] != new[k]]
    assert len(moved) == 1
    m = new[moved[0]]
    ends = {m["a"]["server"]: m["a"], m["b"]["server"]: m["b"]}
    assert ends["srv3"]["device"] == 7
    assert daemon.get("/v1/servers/srv3").json()["device_info"][0]["state"] == "failed"
    # Same state again changes nothing.
    assert daemon.put("/v1/servers/srv3/devices/0", {"state": "failed"}).json()["changed"] is False
    assert daemon.get("/v1/fabrics/job").json()["revision"] == 2
    # A second failure on the same server: device 7 is taken, the pair goes missing.
    daemon.put("/v1/servers/srv3/devices/1", {"state": "failed"})
    h = daemon.get("/v1/fabrics/job?wait=10").json()
    assert h["state"] == "degraded" and len(h["missing"]) == 1 and "srv3" in h["missing"][0]
    assert_full_mesh(h)
    # Recovery fills the missing pair without moving working circuits.
    daemon.put("/v1/servers/srv3/devices/1", {"state": "ok"})
    k = daemon.get("/v1/fabrics/job?wait=10").json()
    assert k["state"] == "applied" and k["missing"] == [] and k["revision"] == 4
    kept = {key(l): l for l in h["links"]}
    now = {key(l): l for l in k["links"]}
    assert all(now[p] == kept[p] for p in kept)
    # Bad device requests.
    assert daemon.put("/v1/servers/srv3/devices/8", {"state": "failed"}).status_code == 404
    assert daemon.put("/v1/servers/srv3/devices/x", {"state": "failed"}).status_code == 404
    assert daemon.put("/v1/servers/srv3/devices/-1", {"state": "failed"}).status_code == 404
    assert daemon.put("/v1/servers/nope/devices/0", {"state": "failed"}).status_code == 404
    assert daemon.put("/v1/servers/srv3/devices/0", {"state": "broken"}).status_code == 400
    assert daemon.put("/v1/servers/srv3/devices/0", {}).status_code == 400


def test_topology_put_get(daemon):
    topo = {
        "ocs": [{"name": "a", "driver": "sim", "ports": 32, "endpoint": ""}],
        "servers": [{"name": f"s{i}", "devices": 4, "ports_per_device": 1, "p2p": False,
                     "intra": "full-mesh"} for i in range(4)],
        "wiring": {"rule": "plane-per-ocs"},
    }
    r = daemon.put("/v1/topology", topo)
    assert r.status_code == 200, r.text
    got = daemon.get("/v1/topology").json()
    assert got["ocs"] == topo["ocs"] and [s["name"] for s in got["servers"]] == ["s0", "s1", "s2", "s3"]
    assert got["wiring"] == {"rule": "plane-per-ocs"}
    assert daemon.post("/v1/fabrics", {"name": "f", "servers": ["s0", "s1", "s2", "s3"]}).status_code == 201
    fabric_before = daemon.get("/v1/fabrics/f?wait=10").json()
    before = snapshot(daemon)
    # Dropping or changing what the fabric uses is refused, whole.
    for change in (
        dict(topo, servers=topo["servers"][:3]),
        dict(topo, servers=[dict(topo["servers"][0], devices=2)] + topo["servers"][1:]),
        dict(topo, ocs=[]),
        dict(topo, wiring={"links": []}),
    ):
        r = daemon.put("/v1/topology", change)
        assert r.status_code == 409 and error_of(r)["code"] == "in_use", r.text
        assert snapshot(daemon) == before
    # Bad entries name the field; nothing changes.
    r = daemon.put("/v1/topology", dict(topo, servers=topo["servers"] + [{"name": "s0", "devices": 4}]))
    assert r.status_code == 400 and error_of(r)["field"] == "servers[4]"
    r = daemon.put("/v1/topology", dict(topo, ocs=[{"name": "a", "ports": "x"}]))
    assert r.status_code == 400 and error_of(r)["field"] == "ocs[0].ports"
    assert snapshot(daemon) == before
    # Adding a server keeps everything the fabric uses (creation order keeps its ports).
    more = dict(topo, servers=topo["servers"] + [{"name": "s4", "devices": 4}])
    assert daemon.put("/v1/topology", more).status_code == 200
    after = daemon.get("/v1/fabrics/f?wait=10").json()
    assert after["links"] == fabric_before["links"] and after["revision"] == fabric_before["revision"]
    assert [s["name"] for s in daemon.get("/v1/servers").json()["servers"]][-1] == "s4"


def test_plans_survive_restart(daemon):
    make_cluster(daemon)
    daemon.post("/v1/fabrics", {"name": "a", "servers": ["srv0", "srv1", "srv2", "srv3", "srv4"]})
    daemon.post("/v1/fabrics", {"name": "b", "servers": ["srv5", "srv6", "srv7"]})
    daemon.put("/v1/servers/srv1/devices/2", {"state": "failed"})
    settle(daemon)
    before = {p: daemon.get(p).content for p in ("/v1/fabrics/a", "/v1/fabrics/b", "/v1/fabrics",
                                                 "/v1/topology", "/v1/servers/srv1",
                                                 "/v1/ocs/ocs0/cross-connects", "/v1/wiring")}
    daemon.restart()
    settle(daemon)
    after = {p: daemon.get(p).content for p in before}
    # The plans are the same byte for byte; only the update time may move with the state.
    for p in before:
        if p.startswith("/v1/fabrics/"):
            x, y = json.loads(before[p]), json.loads(after[p])
            x.pop("updated"), y.pop("updated")
            assert x == y, p
        elif p == "/v1/fabrics":
            assert json.loads(before[p]) == json.loads(after[p])
        else:
            assert after[p] == before[p], p


def test_topology_round_trip_with_fabric(daemon):
    make_cluster(daemon, servers=4, devices=4)
    assert daemon.post("/v1/fabrics?wait=10", {"name": "f", "servers": ["srv0", "srv1", "srv2"]}).status_code == 201
    before = snapshot(daemon)
    r = daemon.put("/v1/topology", daemon.get("/v1/topology").json())
    assert r.status_code == 200, r.text
    assert snapshot(daemon) == before


def test_views_of_a_store_edited_by_hand(daemon):
    """The topology's and the wiring's views are written as text from the rows: names the API
    would refuse, put in by hand (a quote, a backslash, control characters, a byte that is not
    UTF-8), still come out as JSON, and the views match the rows."""
    make_cluster(daemon, servers=4, devices=2, ports=1, units=2, unit_ports=8)
    assert daemon.stop() == 0
    odd = 'a"b\\c\nd\x01é'
    db = sqlite3.connect(daemon.store)
    with db:
        db.execute("UPDATE server SET name = ? WHERE name = 'srv1'", (odd,))
        db.execute("UPDATE server SET name = CAST(X'61ff62' AS TEXT) WHERE name = 'srv3'")
        db.execute("UPDATE ocs SET name = ? WHERE name = 'ocs1'", ("u\t1",))
    db.text_factory = lambda b: b.decode("utf-8", "replace")  # what the view makes of it
    rows = db.execute("SELECT sv.name, c.device, c.port, o.name, c.ocs_port FROM cable c JOIN "
                      "server sv ON sv.id = c.server_id JOIN ocs o ON o.id = c.ocs_id "
                      "ORDER BY sv.id, c.device, c.port").fetchall()
    db.close()
    daemon.start()
    topo = daemon.get("/v1/topology", validate=False).json()
    assert [s["name"] for s in topo["servers"]] == ["srv0", odd, "srv2", "a\ufffdb"]
    links = daemon.get("/v1/wiring", validate=False).json()["links"]
    assert [(l["server"], l["device"], l["port"], l["ocs"], l["ocs_port"]) for l in links] == rows
    assert {l["ocs"] for l in links} == {"ocs0", "u\t1"} and len(rows) == 8
