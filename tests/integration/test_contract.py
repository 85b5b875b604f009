"""The REST contract schedulers build on: retry-safe PUTs, entity tags and If-Match,
Location, asynchronous DELETE, HEAD and OPTIONS, roles of the what-if routes, the audit
trail read back."""
import datetime
import re
import sqlite3
import subprocess
import time

import requests

from conftest import ADMIN, OFCD_BIN, READER, error_of
from test_topology import make_cluster


def test_fabric_put_creates_confirms_refuses(daemon):
    make_cluster(daemon)
    body = {"servers": ["srv0", "srv1", "srv2"]}
    r = daemon.put("/v1/fabrics/job", body)
    assert r.status_code == 201, r.text
    assert r.headers["Location"] == "/v1/fabrics/job"
    assert r.headers["ETag"] == '"1"' and r.json()["revision"] == 1
    # The retry of a create whose reply was lost: confirmed, nothing changes.
    r = daemon.put("/v1/fabrics/job?wait=10", body)
    assert r.status_code == 200 and r.json()["state"] == "applied"
    assert r.headers["ETag"] == '"1"' and "Location" not in r.headers
    # Another fabric of the same name: other servers, or the same in another order.
    for servers in (["srv0", "srv1"], ["srv1", "srv0", "srv2"], ["srv0", "srv1", "srv3"]):
        r = daemon.put("/v1/fabrics/job", {"servers": servers})
        assert r.status_code == 409, r.text
        e = error_of(r)
        assert e["code"] == "conflict" and e["field"] == "servers"
        assert e["details"] == {"servers": ["srv0", "srv1", "srv2"]}
    # The body's name must be the path's.
    r = daemon.put("/v1/fabrics/job", {"name": "other", "servers": body["servers"]})
    assert r.status_code == 400 and error_of(r)["field"] == "name"
    assert daemon.put("/v1/fabrics/job", dict(body, name="job")).status_code == 200
    # A name in the path is checked like one in the body.
    for bad in ("a%20b", "%FF", "srv1%00x", "x" * 65):
        r = daemon.put(f"/v1/fabrics/{bad}", {"servers": ["srv3"]}, validate=False)
        assert r.status_code == 400 and error_of(r)["field"] == "name", (bad, r.text)
    assert [f["name"] for f in daemon.get("/v1/fabrics").json()["fabrics"]] == ["job"]
    # POST stays a create: its retry is 409, which is why clients should PUT.
    r = daemon.post("/v1/fabrics", dict(body, name="job"))
    assert r.status_code == 409 and error_of(r)["code"] == "conflict"
    assert daemon.get("/v1/fabrics").json()["fabrics"][0]["servers"] == body["servers"]
    r = daemon.post("/v1/fabrics", {"name": "job2", "servers": ["srv3", "srv4"]})
    assert r.status_code == 201 and r.headers["Location"] == "/v1/fabrics/job2"


def test_fabric_etag_follows_revision(daemon):
    make_cluster(daemon)
    daemon.put("/v1/fabrics/job?wait=10", {"servers": ["srv0", "srv1", "srv2", "srv3"]})
    r = daemon.get("/v1/fabrics/job")
    assert r.headers["ETag"] == '"1"'
    r = daemon.put("/v1/servers/srv1/devices/0", {"state": "failed"})
    assert r.status_code == 200 and r.json()["fabrics"][0]["revision"] == 2
    r = daemon.get("/v1/fabrics/job?wait=10")
    assert r.headers["ETag"] == '"2"' and r.json()["revision"] == 2


def test_if_match(daemon):
    make_cluster(daemon)
    body = {"servers": ["srv0", "srv1"]}
    # If-Match on an object that does not exist: nothing to match, not even "*".
    for tag in ("*", '"1"'):
        r = daemon.put("/v1/fabrics/job", body, headers={"If-Match": tag})
        assert r.status_code == 412, r.text
        assert error_of(r)["code"] == "precondition_failed" and "ETag" not in r.headers
    assert daemon.get("/v1/fabrics/job").status_code == 404
    assert daemon.put("/v1/fabrics/job", body).status_code == 201
    for tag, status in (('"1"', 200), ("*", 200), ('"7", "1"', 200), ('W/"1"', 412),
                        ('"2"', 412)):
        r = daemon.put("/v1/fabrics/job", body, headers={"If-Match": tag})
        assert r.status_code == status, (tag, r.text)
        assert r.headers["ETag"] == '"1"'  # a 412 tells the current tag
    r = daemon.put("/v1/fabrics/job", body, headers={"If-Match": "1"})
    assert r.status_code == 400 and error_of(r)["field"] == "If-Match"
    # DELETE of another version is refused and deletes nothing.
    r = daemon.delete("/v1/fabrics/job", headers={"If-Match": '"9"'})
    assert r.status_code == 412 and daemon.get("/v1/fabrics/job").status_code == 200
    r = daemon.delete("/v1/fabrics/job?wait=10", headers={"If-Match": '"1"'})
    assert r.status_code == 200 and r.json() == {"deleted": "job", "state": "removed"}
    # Without the object a DELETE is 404 whatever If-Match says.
    assert daemon.delete("/v1/fabrics/job", headers={"If-Match": '"1"'}).status_code == 404


def test_delete_is_asynchronous(daemon):
    make_cluster(daemon)
    daemon.put("/v1/fabrics/job?wait=10", {"servers": ["srv0", "srv1", "srv2"]})
    r = daemon.delete("/v1/fabrics/job")
    assert r.status_code == 202 and r.json() == {"deleted": "job", "state": "removing"}
    # Once the units are slow, a wait that runs out is still 202 and removing. The servers
    # are in_use (409) until the circuits of the first are off the units: on a loaded
    # machine that is after the next request, so ask again until they are free.
    deadline = time.time() + 30
    while daemon.put("/v1/fabrics/job?wait=10",
                     {"servers": ["srv0", "srv1", "srv2"]}).status_code == 409:
        assert time.time() < deadline, "the deleted fabric's circuits never came off"
        time.sleep(0.1)
    r = daemon.delete("/v1/fabrics/job?wait=0.001")
    assert r.status_code in (200, 202)
    assert r.json()["state"] == ("removed" if r.status_code == 200 else "removing")
    # The audit records what was accepted: 202.
    rows = daemon.get("/v1/audit").json()["audit"]
    assert [row["status"] for row in rows if row["method"] == "DELETE"] == [202, 202]


def test_topology_objects_put(daemon):
    ocs = {"driver": "sim", "ports": 16}
    r = daemon.put("/v1/ocs/u0", ocs)
    assert r.status_code == 201 and r.headers["Location"] == "/v1/ocs/u0"
    assert r.headers["ETag"] == '"1"'
    assert daemon.put("/v1/ocs/u0", dict(ocs, name="u0")).status_code == 200
    r = daemon.put("/v1/ocs/u0", dict(ocs, ports=32))
    assert r.status_code == 409 and error_of(r)["field"] == "ports"
    assert error_of(r)["details"]["ocs"]["ports"] == 16
    assert daemon.put("/v1/ocs/u0", {"ports": 16, "name": "u1"}).status_code == 400

    srv = {"devices": 4, "p2p": True}
    r = daemon.put("/v1/servers/s0", srv)
    assert r.status_code == 201 and r.headers["Location"] == "/v1/servers/s0"
    assert daemon.put("/v1/servers/s0", srv).status_code == 200
    for change, field in (({"devices": 8}, "devices"), ({"p2p": False}, "p2p"),
                          ({"intra": "two-groups"}, "intra")):
        r = daemon.put("/v1/servers/s0", dict(srv, **change))
        assert r.status_code == 409 and error_of(r)["field"] == field, r.text
    # Left out is the default, not "whatever is stored": p2p false differs.
    assert daemon.put("/v1/servers/s0", {"devices": 4}).status_code == 409

    sw = {"aggregating": True, "buffer": 64, "window": 32}
    r = daemon.put("/v1/switches/agg", sw)
    assert r.status_code == 201 and r.headers["Location"] == "/v1/switches/agg"
    assert daemon.put("/v1/switches/agg", sw).status_code == 200
    r = daemon.put("/v1/switches/agg", dict(sw, window=16))
    assert r.status_code == 409 and error_of(r)["field"] == "window"
    # The POST forms give Location and ETag too.
    r = daemon.post("/v1/switches", {"name": "plain"})
    assert r.status_code == 201 and r.headers["Location"] == "/v1/switches/plain"
    assert r.headers["ETag"] == '"1"'


def test_object_etags_count_changes(daemon):
    make_cluster(daemon, servers=3)
    tags = lambda: {p: daemon.get(p).headers["ETag"]
                    for p in ("/v1/ocs/ocs0", "/v1/servers/srv0", "/v1/servers/srv1",
                              "/v1/topology", "/v1/wiring")}
    before = tags()
    # The same topology put again changes nothing, so no tag moves.
    topo = daemon.get("/v1/topology").json()
    assert daemon.put("/v1/topology", topo).status_code == 200
    assert daemon.put("/v1/wiring", {"rule": "plane-per-ocs"}).status_code == 200
    assert tags() == before
    # A server's device, its fabric: its tag moves, the topology's does not.
    daemon.put("/v1/servers/srv0/devices/3", {"state": "failed"})
    after = tags()
    assert after["/v1/servers/srv0"] != before["/v1/servers/srv0"]
    assert after["/v1/topology"] == before["/v1/topology"]
    r = daemon.put("/v1/fabrics/f", {"servers": ["srv1", "srv2"]})
    assert daemon.get("/v1/servers/srv1").headers["ETag"] != after["/v1/servers/srv1"]
    # A unit changed through the topology (not the one the fabric uses): its tag and
    # the topology's move.
    assert topo["ocs"][1]["name"] == "ocs1"
    topo["ocs"][1]["endpoint"] = "sim:delay_ms=1"
    r = daemon.put("/v1/topology", topo)
    assert r.status_code == 200, r.text
    assert r.headers["ETag"] != before["/v1/topology"]
    assert daemon.get("/v1/ocs/ocs1").headers["ETag"] == '"2"'
    assert daemon.get("/v1/ocs/ocs0").headers["ETag"] == '"1"'


def test_topology_if_match_two_operators(daemon):
    make_cluster(daemon, servers=2)
    r = daemon.get("/v1/topology")
    tag, topo = r.headers["ETag"], r.json()
    # Both operators read the same version; the first write wins, the second is told.
    one = dict(topo, ocs=topo["ocs"] + [{"name": "extra", "driver": "sim", "ports": 8,
                                          "endpoint": ""}])
    two = dict(topo, servers=topo["servers"][:1])
    r = daemon.put("/v1/topology", one, headers={"If-Match": tag})
    assert r.status_code == 200 and r.headers["ETag"] != tag
    r = daemon.put("/v1/topology", two, headers={"If-Match": tag})
    assert r.status_code == 412 and error_of(r)["code"] == "precondition_failed"
    got = daemon.get("/v1/topology")
    assert len(got.json()["servers"]) == 2 and len(got.json()["ocs"]) == 3
    assert r.headers["ETag"] == got.headers["ETag"]
    w = daemon.get("/v1/wiring").headers["ETag"]
    r = daemon.put("/v1/wiring", {"rule": "plane-per-ocs"}, headers={"If-Match": '"x"'})
    assert r.status_code == 412 and r.headers["ETag"] == w


def test_head_and_options(daemon):
    make_cluster(daemon, servers=2)
    for path in ("/v1/health", "/v1/ocs/ocs0", "/v1/topology", "/metrics", "/v1/ocs"):
        g, h = daemon.get(path), daemon.req("HEAD", path)
        assert h.status_code == 200 and h.content == b""
        assert h.headers["Content-Type"] == g.headers["Content-Type"]
        assert h.headers.get("ETag") == g.headers.get("ETag")
    assert daemon.req("HEAD", "/v1/ocs/nope").status_code == 404
    # A stream's HEAD: its headers, and no stream left open.
    h = daemon.req("HEAD", "/v1/events", timeout=5)
    assert h.status_code == 200 and h.headers["Content-Type"] == "text/event-stream"
    for path, allow in (("/v1/fabrics/x", "GET, HEAD, PUT, DELETE, OPTIONS"),
                        ("/v1/fabrics", "POST, GET, HEAD, OPTIONS"),
                        ("/v1/plan", "POST, OPTIONS"),
                        ("/metrics", "GET, HEAD, OPTIONS")):
        r = daemon.req("OPTIONS", path)
        assert r.status_code == 204 and r.content == b"", path
        assert set(r.headers["Allow"].split(", ")) == set(allow.split(", ")), path
    assert daemon.req("OPTIONS", "/v1/nowhere").status_code == 404
    # Reads, HEAD and OPTIONS leave no audit row.
    assert [row["method"] for row in daemon.get("/v1/audit").json()["audit"]
            if row["method"] in ("HEAD", "OPTIONS", "GET")] == []


def test_roles_of_the_new_routes(auth_daemon):
    d = auth_daemon
    # What-if computations store nothing: a read token may ask.
    assert d.post("/v1/plan", {"servers": 4, "devices": 3}, token=READER).status_code == 200
    # PUT writes: admin only.
    r = d.put("/v1/ocs/u", {"ports": 4}, token=READER)
    assert r.status_code == 403 and d.get("/v1/ocs/u").status_code == 404
    # The audit trail is for admins; OPTIONS needs no token.
    assert d.get("/v1/audit", token=READER).status_code == 403
    assert d.get("/v1/audit", token="").status_code == 401
    assert d.req("OPTIONS", "/v1/audit", token="").status_code == 204
    rows = d.get("/v1/audit", token=ADMIN).json()["audit"]
    assert [(x["token"], x["method"], x["status"]) for x in rows] == [("mon", "PUT", 403)]


def test_audit_route(daemon):
    t0 = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    for i in range(5):
        daemon.post("/v1/ocs", {"name": f"u{i}", "ports": 4})
    daemon.post("/v1/ocs", {"name": "u0", "ports": 4})
    rows = daemon.get("/v1/audit").json()["audit"]
    assert len(rows) == 6
    assert set(rows[0]) == {"id", "at", "token", "client", "method", "path", "status"}
    assert rows[0]["client"] == "127.0.0.1" and rows[0]["token"] is None
    assert [r["status"] for r in rows] == [201] * 5 + [409]
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    # Paging by id: since= the last id read.
    page = daemon.get("/v1/audit?limit=2").json()["audit"]
    assert [r["id"] for r in page] == [rows[0]["id"], rows[1]["id"]]
    page = daemon.get(f"/v1/audit?since={page[-1]['id']}&limit=2").json()["audit"]
    assert [r["id"] for r in page] == [rows[2]["id"], rows[3]["id"]]
    # By time: from the start of this test, and nothing from the future.
    assert len(daemon.get(f"/v1/audit?since={t0}Z").json()["audit"]) == 6
    assert len(daemon.get(f"/v1/audit?since={t0[:10]}").json()["audit"]) == 6
    assert daemon.get("/v1/audit?since=2999-01-01T00:00").json()["audit"] == []
    assert daemon.get("/v1/audit?since=2028-02-29").json()["audit"] == []  # a leap day
    for q, field in (("since=yesterday", "since"), ("since=2026-1-1", "since"),
                     ("since=-1", "since"), ("since=2026-13-01", "since"),
                     ("since=2026-02-29", "since"), ("since=2026-00-10", "since"),
                     ("since=2026-11-21T25:00", "since"), ("since=2026-11-27T05:99:00Z", "since"),
                     ("limit=0", "limit"), ("limit=1001", "limit"), ("limit=010", "limit"),
                     ("limit=x", "limit"), ("until=1", "until")):
        r = daemon.get(f"/v1/audit?{q}")
        assert r.status_code == 400 and error_of(r)["field"] == field, q
    # The column is in the table too, for sqlite3 users.
    with sqlite3.connect(daemon.store) as db:
        assert db.execute("SELECT DISTINCT client FROM audit").fetchall() == [("127.0.0.1",)]
    # A path that is not UTF-8 (a probe's %FF), audited as sent: listed, not left out.
    last = rows[-1]["id"]
    assert daemon.req("DELETE", "/v1/fabrics/%C3%28x%FF", validate=False).status_code == 404
    page = daemon.get(f"/v1/audit?since={last}").json()["audit"]
    assert [(r["method"], r["path"], r["status"]) for r in page] == [
        ("DELETE", "/v1/fabrics/?(x?", 404)]


def test_ipv6_client_in_audit(make_daemon):
    d = make_daemon(listen_host="[::1]")
    d.start(wait=False)
    url = f"http://[::1]:{d.port}"
    deadline = time.time() + 30
    while True:
        try:
            requests.get(url + "/v1/health", timeout=5)
            break
        except (requests.ConnectionError, requests.Timeout):
            assert time.time() < deadline and d.proc.poll() is None, d.log()
            time.sleep(0.02)
    requests.post(url + "/v1/ocs", json={"name": "u", "ports": 4})
    rows = requests.get(url + "/v1/audit").json()["audit"]
    assert rows[0]["client"] == "::1"


def test_unit_file_limit_is_above_max_connections():
    root = __file__.rsplit("/tests/", 1)[0]
    unit = open(f"{root}/packaging/ofcd.service").read()
    m = re.search(r"^LimitNOFILE=(\d+)$", unit, re.M)
    # Above the largest [http] max_connections the daemon accepts, with room to spare.
    assert m and int(m.group(1)) >= 65536 + 64, "LimitNOFILE missing or too low"


def test_file_descriptor_limit_at_start(make_daemon):
    d = make_daemon()
    d.config.write_text(d.config.read_text().replace("[http]\n", "[http]\nmax_connections = 2000\n"))
    # The soft limit is raised as far as the hard one allows, and a shortfall is said.
    d.proc = subprocess.Popen(["prlimit", "--nofile=100:1000", OFCD_BIN, "-c", str(d.config)],
                              stdout=open(d.log_path, "a"), stderr=subprocess.STDOUT)
    d.logf = open(d.log_path)
    d.wait_ready()
    log = d.log()
    assert "file descriptor limit raised from 100 to 1000" in log
    assert "file descriptor limit 1000 is below [http] max_connections = 2000" in log
    assert samples_fd_max(d) == 1000
    d.stop()


def samples_fd_max(d):
    line = [l for l in d.get("/metrics").text.splitlines() if l.startswith("process_max_fds ")]
    return int(float(line[0].split()[1]))
