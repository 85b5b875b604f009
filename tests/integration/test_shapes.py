"""Fabrics larger than a full mesh: HyperX and torus layouts through the REST API, stored,
applied on the units, re-planned around a failed device, and refused clearly."""
import itertools

from conftest import error_of
from test_topology import make_cluster

SIXTEEN = [f"srv{i}" for i in range(16)]


def coords(i, k):
    out = []
    for size in k:
        out.append(i % size)
        i //= size
    return out


def joined(a, b, topology, k):
    """Whether the shape joins positions a and b (docs/architecture.md)."""
    ca, cb = coords(a, k), coords(b, k)
    diff = [d for d in range(len(k)) if ca[d] != cb[d]]
    if len(diff) != 1:
        return False
    if topology == "hyperx":
        return True
    d = diff[0]
    return (ca[d] - cb[d]) % k[d] in (1, k[d] - 1)


def check_layout(f, topology, k):
    """Every circuit joins two servers the shape joins, each such pair once, on one unit."""
    pos = {n: i for i, n in enumerate(f["servers"])}
    pairs = [tuple(sorted((pos[l["a"]["server"]], pos[l["b"]["server"]]))) for l in f["links"]]
    assert len(pairs) == len(set(pairs))
    assert all(joined(a, b, topology, k) for a, b in pairs)
    want = {(a, b) for a, b in itertools.combinations(range(len(pos)), 2) if joined(a, b, topology, k)}
    missing = {tuple(sorted((pos[a], pos[b]))) for a, b in f["missing"]}
    assert set(pairs) | missing == want and not set(pairs) & missing
    assert all(l["a"]["ocs"] == l["b"]["ocs"] for l in f["links"])


def test_past_the_full_mesh(daemon):
    # 16 servers of 8 planes: a full mesh needs 15.
    make_cluster(daemon, servers=16, devices=8, units=8)
    r = daemon.post("/v1/fabrics", {"name": "big", "servers": SIXTEEN, "topology": "full-mesh"})
    assert r.status_code == 422, r.text
    assert error_of(r)["code"] == "infeasible" and error_of(r)["field"] == "devices"
    # Auto, the default.
    r = daemon.post("/v1/fabrics?wait=10", {"name": "big", "servers": SIXTEEN})
    assert r.status_code == 201, r.text
    f = r.json()
    assert (f["topology"], f["shape"], f["diameter"], f["degree"]) == ("hyperx", [4, 4], 2, 6)
    assert f["state"] == "applied" and f["formula"] == "per-line"
    assert len(f["links"]) == 16 * 6 // 2 and f["missing"] == []
    check_layout(f, "hyperx", [4, 4])
    choice = f["choice"]
    assert choice["candidates"][0]["shape"] == "4x4" and choice["candidates"][0]["fits"]
    assert all("predicted_us" in c for c in choice["candidates"] if c["fits"])
    assert "full mesh" in choice["reason"]
    # The units hold exactly the plan.
    held = sum(len(daemon.get(f"/v1/ocs/ocs{u}/cross-connects").json()["actual"]) for u in range(8))
    assert held == len(f["links"])
    # The summary and the list say the layout too.
    s = daemon.get("/v1/fabrics/big?view=summary").json()
    assert (s["topology"], s["shape"], s["circuits"]) == ("hyperx", [4, 4], 48)
    # A re-plan around a failed device keeps the shape and every circuit not on it.
    before = {(l["a"]["server"], l["b"]["server"]): l for l in f["links"]}
    assert daemon.put("/v1/servers/srv5/devices/2", {"state": "failed"}).status_code == 200
    g = daemon.get("/v1/fabrics/big?wait=10").json()
    assert g["revision"] == 2 and g["topology"] == "hyperx" and g["shape"] == [4, 4]
    check_layout(g, "hyperx", [4, 4])
    for l in g["links"]:
        if "srv5" not in (l["a"]["server"], l["b"]["server"]):
            assert before[(l["a"]["server"], l["b"]["server"])] == l
    # PUT confirms the same layout, refuses another.
    assert daemon.put("/v1/fabrics/big", {"servers": SIXTEEN, "topology": "auto"}).status_code == 200
    assert daemon.put("/v1/fabrics/big", {"servers": SIXTEEN}).status_code == 200
    r = daemon.put("/v1/fabrics/big", {"servers": SIXTEEN, "topology": "torus"})
    assert r.status_code == 409 and error_of(r)["field"] == "topology", r.text
    assert daemon.delete("/v1/fabrics/big?wait=10").json()["state"] == "removed"


def test_explicit_shapes_and_torus(daemon):
    make_cluster(daemon, servers=16, devices=8, units=8)
    r = daemon.post("/v1/fabrics?wait=10", {"name": "t", "servers": SIXTEEN, "topology": "torus",
                                            "shape": [4, 4]})
    assert r.status_code == 201, r.text
    f = r.json()
    assert (f["topology"], f["shape"], f["diameter"], f["degree"]) == ("torus", [4, 4], 4, 4)
    assert "choice" not in f and f["state"] == "applied"
    check_layout(f, "torus", [4, 4])
    assert daemon.delete("/v1/fabrics/t?wait=10").status_code == 200
    # A grid alone is a HyperX.
    r = daemon.post("/v1/fabrics?wait=10", {"name": "h", "servers": SIXTEEN, "shape": [8, 2]})
    assert r.status_code == 201 and (r.json()["topology"], r.json()["shape"]) == ("hyperx", [8, 2])
    check_layout(r.json(), "hyperx", [8, 2])
    assert daemon.delete("/v1/fabrics/h?wait=10").status_code == 200
    # A declared traffic picks among the shapes that fit by their predicted time.
    r = daemon.post("/v1/fabrics", {"name": "a", "servers": SIXTEEN, "topology": "auto",
                                    "traffic": "alltoall"})
    assert r.status_code == 201, r.text
    assert r.json()["choice"]["traffic"] == "alltoall" and r.json()["choice"]["traffic_declared"]
    assert "alltoall" in r.json()["choice"]["reason"]


def test_bad_layouts_are_refused_and_change_nothing(daemon):
    make_cluster(daemon, servers=16, devices=8, units=8)
    cases = [
        ({"topology": "ring"}, "topology"),
        ({"shape": [3, 5]}, "shape"),          # 15 servers, not 16
        ({"shape": [16, 1, 1, 1, 1]}, "shape"),  # more dimensions than the planner takes
        ({"shape": "4x4"}, "shape"),
        ({"shape": [4, 0]}, "shape"),
        ({"topology": "hyperx", "traffic": "alltoall"}, "traffic"),
        ({"traffic": "gossip", "topology": "auto"}, "traffic"),
        ({"topology": "full-mesh", "shape": [16]}, "shape"),  # 15 planes on 8
        ({"shape": [16]}, "shape"),            # a one-dimensional HyperX is a full mesh
        ({"topology": None}, "topology"),      # null is no way to leave a member out
        ({"shape": None}, "shape"),
        ({"traffic": None}, "traffic"),
    ]
    for extra, field in cases:
        r = daemon.post("/v1/fabrics", {"name": "x", "servers": SIXTEEN, **extra})
        assert r.status_code in (400, 422), (extra, r.text)
        assert error_of(r)["field"] == field, (extra, r.text)
    assert daemon.get("/v1/fabrics").json()["fabrics"] == []
    for extra, field in cases[-3:]:
        r = daemon.post("/v1/plan", {"servers": 16, "devices": 8, "ports_per_device": 1, **extra})
        assert r.status_code == 400 and error_of(r)["field"] == field, (extra, r.text)
    # Nothing fits 1 plane: the refusal says what would.
    r = daemon.post("/v1/servers", {"name": "thin0", "devices": 1})
    assert r.status_code == 201
    r = daemon.post("/v1/servers", {"name": "thin1", "devices": 1})
    r = daemon.post("/v1/fabrics", {"name": "x", "servers": ["thin0", "thin1", "srv0"],
                                    "topology": "auto"})
    assert r.status_code == 422 and error_of(r)["code"] == "infeasible", r.text
    assert "fit" in error_of(r)["message"]


def test_collectives_follow_the_shape(daemon):
    """The cost model prices what a HyperX fabric has: its lines, with the algorithms made for
    them; those that need a pair the grid does not join say which."""
    make_cluster(daemon, servers=16, devices=8, units=8)
    r = daemon.post("/v1/fabrics?wait=10", {"name": "h", "servers": SIXTEEN, "shape": [4, 4]})
    assert r.status_code == 201, r.text
    picks = {}
    for coll in ("allreduce", "alltoall"):
        r = daemon.post("/v1/collective/select", {"fabric": "h", "collective": coll,
                                                  "bytes": 1 << 20})
        assert r.status_code == 200, r.text
        sel = r.json()
        picks[coll] = sel["algorithm"]
        ring = [c for c in sel["candidates"] if c["algorithm"] in ("ring", "direct")]
        assert ring and not ring[0]["eligible"] and "HyperX does not have" in ring[0]["reason"]
    assert picks == {"allreduce": "hyperx-dim-ordered", "alltoall": "hyperx-dim-ordered-a2a"}
    # The schedule route gives the rounds of the pick, over the fabric's own circuits only.
    r = daemon.get("/v1/fabrics/h/schedule?collective=allreduce&algorithm=hyperx-dim-ordered"
                   "&bytes=1048576")
    assert r.status_code == 200, r.text
    assert r.json()["stats"]["max_degree"] <= 6 and r.json()["stats"]["rounds"] == 4


def test_plan_what_if(daemon):
    """POST /v1/plan says which layout a fabric would get, at any size, storing nothing."""
    r = daemon.post("/v1/plan", {"servers": 1024, "devices": 8, "ports_per_device": 8,
                                 "topology": "auto"})
    assert r.status_code == 200, r.text
    p = r.json()
    assert (p["topology"], p["shape"], p["diameter"], p["degree"], p["planes"]) == \
        ("hyperx", [32, 32], 2, 62, 62)
    assert p["choice"]["candidates"][0]["fits"] and "predicted_us" in p["choice"]["candidates"][0]
    r = daemon.post("/v1/plan", {"servers": 8192, "devices": 8, "ports_per_device": 8,
                                 "topology": "auto", "traffic": "allreduce"})
    assert r.status_code == 200 and r.json()["diameter"] == 3 and r.json()["planes"] <= 64
    # Where the full mesh fits, auto is the full mesh.
    r = daemon.post("/v1/plan", {"servers": 60, "devices": 8, "ports_per_device": 8,
                                 "topology": "auto"})
    assert r.status_code == 200 and r.json()["topology"] == "full-mesh" and "choice" not in r.json()
    r = daemon.post("/v1/plan", {"servers": 5001, "devices": 2, "topology": "auto"})
    assert r.status_code == 422 and "5000 would fit" in error_of(r)["message"], r.text
    r = daemon.post("/v1/plan", {"servers": 1024, "devices": 8, "topology": "hyperx",
                                 "links": True})
    assert r.status_code == 400 and error_of(r)["field"] == "links"
    # Without a topology: auto, and the grid's what-if past the full mesh.
    r = daemon.post("/v1/plan", {"servers": 1024, "devices": 8, "ports_per_device": 8})
    assert r.status_code == 200 and (r.json()["topology"], r.json()["shape"]) == ("hyperx", [32, 32])
    # A formula or links ask for the full mesh, which holds 512 servers.
    r = daemon.post("/v1/plan", {"servers": 1024, "devices": 8, "formula": "auto"})
    assert r.status_code == 400 and error_of(r)["field"] == "servers"
    assert daemon.get("/v1/fabrics").json()["fabrics"] == []



def test_collectives_refuse_fabrics_past_the_view_limit(daemon):
    """Collectives need per-pair tables of the fabric (m x m): past 2,048 servers the request
    is refused, naming the limit, instead of taking gigabytes."""
    n = 2050
    topo = {"ocs": [{"name": f"u{i}", "driver": "sim", "ports": n + 2} for i in range(64)],
            "servers": [{"name": f"s{i}", "devices": 8, "ports_per_device": 8} for i in range(n)],
            "wiring": {"rule": "plane-per-ocs"}}
    assert daemon.put("/v1/topology", topo, validate=False, timeout=120).status_code == 200
    r = daemon.post("/v1/fabrics?view=summary", {"name": "big", "topology": "auto",
                                                 "servers": [f"s{i}" for i in range(n)]},
                    timeout=120)
    assert r.status_code == 201 and r.json()["topology"] == "hyperx", r.text
    r = daemon.post("/v1/collective/select", {"fabric": "big", "collective": "allreduce",
                                              "bytes": 1 << 20})
    assert r.status_code == 422 and "2048" in error_of(r)["message"], r.text
