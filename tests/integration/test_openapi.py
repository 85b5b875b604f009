"""The OpenAPI document against the code: every route of daemon/api/routes.c is described
(method, path, query parameters, who may call it), the daemon serves the document, and
the event stream's data match it. Every other test checks its responses through
conftest.Daemon.req()."""
import json
import re
import threading
import time
import xml.etree.ElementTree as ET

import requests

import openapi_check
from conftest import READER

FIVE = ["srv0", "srv1", "srv2", "srv3", "srv4"]


def operations():
    ops = {}
    for path, item in openapi_check.DOC["paths"].items():
        for method in openapi_check.METHODS:
            if method in item:
                ops[(method.upper(), path)] = (item, item[method])
    return ops


def test_every_route_is_described():
    ops = operations()
    table = openapi_check.routes()
    assert len(table) > 30
    routes = {(m, p) for m, p, *_ in table}
    assert routes - set(ops) == set(), "routes without a description in docs/openapi.yaml"
    assert set(ops) - routes == set(), "described operations that daemon/api/routes.c lacks"
    for method, pattern, role, _flags, query in table:
        item, op = ops[(method, pattern)]
        params = [openapi_check.deref(p) for p in item.get("parameters", []) + op.get("parameters", [])]
        where = f"{method} {pattern}"
        assert sorted(p["name"] for p in params if p["in"] == "query") == sorted(query), where
        assert sorted(p["name"] for p in params if p["in"] == "path") == \
            sorted(re.findall(r"\{([^}]+)\}", pattern)), where
        statuses = set(op["responses"])
        if role == "AUTH_NONE":
            assert op.get("security") == [], f"{where} needs no token"
            assert "401" not in statuses, where
        else:
            assert "security" not in op, f"{where} takes the document's bearer token"
            assert "401" in statuses, where
        assert ("403" in statuses) == (role in ("AUTH_ADMIN", "AUTH_AGENT")), where
        assert "400" in statuses and "500" in statuses, where
        if method in ("POST", "PUT"):
            assert op.get("requestBody", {}).get("required"), where
            assert {"413", "415"} <= statuses, where
        if method != "GET" or pattern == "/v1/events":
            assert "503" in statuses, where


def test_served_document_is_the_yaml(auth_daemon):
    # No token: clients fetch it to generate code before they have one.
    r = auth_daemon.get("/v1/openapi.json", token="")
    assert r.status_code == 200
    assert r.json() == openapi_check.load_doc()


def test_console_files_need_no_token(auth_daemon):
    page = auth_daemon.get("/", token="")
    assert page.status_code == 200 and "<title>ofcd console</title>" in page.text
    for src in re.findall(r'(?:src|href)="(console/[^"]+)"', page.text):
        r = auth_daemon.get("/" + src, token="")
        assert r.status_code == 200, src
    assert auth_daemon.get("/console/nothing.js", token="").status_code == 404
    # The data stays behind the token.
    assert auth_daemon.get("/v1/fabrics", token="").status_code == 401
    assert auth_daemon.get("/v1/fabrics", token=READER).status_code == 200


def test_fabric_picture(make_daemon):
    d = make_daemon(args=["--demo"]).start()
    assert d.post("/v1/fabrics?wait=10", {"name": "job-a", "servers": FIVE}).status_code == 201
    assert d.put("/v1/servers/srv3/devices/1", {"state": "failed"}).status_code == 200
    fabric = d.get("/v1/fabrics/job-a?wait=10").json()
    r = d.get("/v1/fabrics/job-a/picture.svg")
    svg = ET.fromstring(r.text)
    ns = {"s": "http://www.w3.org/2000/svg"}
    circuits = svg.findall(".//s:g[@id='circuits']//s:line", ns)
    assert len(circuits) == len(fabric["links"]) == 10
    titles = sorted(line.find("s:title", ns).text for line in circuits)
    l0 = fabric["links"][0]
    assert any(t.startswith(f"{l0['a']['ocs']}: {l0['a']['server']} device {l0['a']['device']} ")
               for t in titles)
    dots = svg.findall(".//s:g[@id='servers']/s:circle", ns)
    assert [c.find("s:title", ns).text for c in dots] == \
        ["srv0", "srv1", "srv2", "srv3: failed device 1", "srv4"]
    assert "revision 2" in "".join(svg.itertext())
    assert d.get("/v1/fabrics/nope/picture.svg").status_code == 404


def test_grid_picture(make_daemon):
    """A HyperX fabric is drawn on its grid: a bus per line, a colour per dimension."""
    d = make_daemon().start()
    for i in range(8):
        assert d.post("/v1/ocs", {"name": f"ocs{i}", "driver": "sim", "ports": 64}).status_code == 201
    sixteen = [f"srv{i}" for i in range(16)]
    for s in sixteen:
        assert d.post("/v1/servers", {"name": s, "devices": 8}).status_code == 201
    assert d.put("/v1/wiring", {"rule": "plane-per-ocs"}).status_code == 200
    made = d.post("/v1/fabrics?wait=10", {"name": "hx", "servers": sixteen, "topology": "auto"})
    assert made.status_code == 201 and made.json()["shape"] == [4, 4]
    svg = ET.fromstring(d.get("/v1/fabrics/hx/picture.svg").text)
    ns = {"s": "http://www.w3.org/2000/svg"}
    colours = set()
    for dim in ("dim0", "dim1"):
        group = svg.find(f".//s:g[@id='{dim}']", ns)
        assert len(group.findall("s:line", ns)) == 4
        colours.add(group.get("stroke"))
    assert len(colours) == 2
    assert svg.find(".//s:g[@id='dim2']", ns) is None
    dots = svg.findall(".//s:g[@id='servers']/s:circle", ns)
    assert [c.find("s:title", ns).text for c in dots][5] == "srv5 (1, 1)"
    # The dots sit on a 4 x 4 grid, dimension 0 across.
    xs = sorted({float(c.get("cx")) for c in dots})
    ys = sorted({float(c.get("cy")) for c in dots})
    assert len(xs) == 4 and len(ys) == 4
    assert [(xs.index(float(c.get("cx"))), ys.index(float(c.get("cy")))) for c in dots] == \
        [(i % 4, i // 4) for i in range(16)]
    assert "HyperX 4 × 4" in "".join(svg.find(".//s:g[@id='legend']", ns).itertext())


def test_event_data_match_the_document(make_daemon):
    d = make_daemon(args=["--demo"],
                    extra="[debug]\nfaults = true\n[reconcile]\naudit_interval = 1\n").start()
    seen = []
    opened = threading.Event()

    def follow():
        try:
            with requests.get(d.url("/v1/events"), stream=True, timeout=10) as r:
                openapi_check.check(r, streamed=True)
                opened.set()
                event = None
                for line in r.iter_lines(decode_unicode=True):
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        seen.append((event, json.loads(line[6:])))
        except requests.RequestException:
            pass  # the daemon stopped

    def wait_for(kind):
        deadline = time.time() + 10
        while time.time() < deadline and kind not in {k for k, _ in seen}:
            time.sleep(0.05)

    threading.Thread(target=follow, daemon=True).start()
    assert opened.wait(5)
    assert d.post("/v1/fabrics?wait=10", {"name": "job-a", "servers": FIVE}).status_code == 201
    assert d.put("/v1/servers/srv1/devices/0", {"state": "failed"}).status_code == 200
    assert d.put("/v1/servers/srv1/devices/5", {"state": "failed"}).status_code == 200
    # Both views name the failed devices; the topology, a document to PUT back, does not.
    servers = {s["name"]: s for s in d.get("/v1/servers").json()["servers"]}
    assert servers["srv1"]["failed_devices"] == [0, 5] and servers["srv2"]["failed_devices"] == []
    assert d.get("/v1/servers/srv1").json()["failed_devices"] == [0, 5]
    assert all("failed_devices" not in s for s in d.get("/v1/topology").json()["servers"])
    assert d.put("/v1/servers/srv1/devices/5", {"state": "ok"}).status_code == 200
    # A replace by what it was changes nothing and says nothing.
    assert d.put("/v1/fabrics/job-a", {"servers": FIVE}).status_code == 200
    assert d.delete("/v1/fabrics/job-a?wait=10").json()["state"] == "removed"
    unit = d.get("/v1/ocs/ocs0").json()
    body = {k: unit[k] for k in ("name", "driver", "ports", "endpoint") if k in unit}
    assert d.put("/v1/ocs/ocs0", body).status_code == 200
    server = {"name": "extra", "devices": 1, "ports_per_device": 1}
    assert d.post("/v1/servers", server).status_code == 201
    assert d.delete("/v1/servers/extra").status_code == 200
    wiring = d.get("/v1/wiring")
    assert d.put("/v1/wiring", {"rule": wiring.json()["rule"]},
                 headers={"If-Match": wiring.headers["ETag"]}).status_code == 200
    d.post("/v1/ocs/ocs0/faults", {"kind": "set_xc", "a": 60, "b": 61})
    wait_for("drift")
    d.post("/v1/ocs/ocs0/faults", {"kind": "disconnect"})
    wait_for("ocs_connection")
    kinds = {k for k, _ in seen}
    assert {"fabric_state", "operation", "ocs_connection", "drift", "device_state"} <= kinds, kinds
    devices = [(e["server"], e["device"], e["state"]) for k, e in seen if k == "device_state"]
    assert devices == [("srv1", 0, "failed"), ("srv1", 5, "failed"), ("srv1", 5, "ok")]
    fabrics = [(e["fabric"], e["change"], e.get("revision")) for k, e in seen if k == "fabric"]
    # Each device change re-planned the fabric; the PUT that confirmed it made no event.
    assert fabrics == [("job-a", "created", 1), ("job-a", "updated", 2), ("job-a", "updated", 3),
                       ("job-a", "updated", 4), ("job-a", "deleted", None)]
    topology = [(e["resource"], e.get("name"), e["change"]) for k, e in seen if k == "topology"]
    assert topology == [("server", "extra", "created"), ("server", "extra", "deleted")]
    events = openapi_check.DOC["components"]["schemas"]["Event"]["properties"]
    for kind, data in list(seen):
        openapi_check.assert_valid(events[kind], data, f"event {kind}")
