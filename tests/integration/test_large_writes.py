"""Writes too large for one loop turn: a fabric of 1,024 servers (a 32 x 32 HyperX, 31,744
circuits) is loaded, planned and stored a part per turn while other clients go on, and deleted
the same way. A create is made whole or not at all, a delete is carried through, whatever
happens meanwhile: a refusal found late, a client that leaves, SIGTERM, SIGKILL. None of these
tests depends on when a part runs: each accepts every outcome the daemon may honestly give
and refuses only a fabric left half-made."""
import json
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time

import pytest
import requests

from conftest import Daemon, error_of, wait_for

N = 1024
SERVERS = [f"s{i}" for i in range(N)]
CIRCUITS = 32 * 32 * (31 + 31) // 2


def topology():
    """N + 2 servers of 8 devices x 8 ports on 64 sim units, one plane each."""
    return {"ocs": [{"name": f"u{u:02d}", "driver": "sim", "ports": N + 2} for u in range(64)],
            "servers": [{"name": f"s{i}", "devices": 8, "ports_per_device": 8}
                        for i in range(N + 2)],
            "wiring": {"rule": "plane-per-ocs"}}


@pytest.fixture
def big(daemon):
    assert daemon.put("/v1/topology", topology(), timeout=120).status_code == 200
    return daemon


def post_async(d, body, path="/v1/fabrics", timeout=120, method="POST"):
    """Sends on a thread of its own; the result: {"reply": Response} or {"error": exception}."""
    out = {}

    def run():
        try:
            out["reply"] = requests.request(
                method, d.url(path), data=json.dumps(body) if body else None, timeout=timeout,
                headers={"Content-Type": "application/json"})
        except requests.RequestException as e:
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


def whole_or_absent(d, name):
    """The fabric is absent, or has every circuit of its plan: never half-made. True if whole."""
    r = d.get(f"/v1/fabrics/{name}?view=summary")
    if r.status_code == 404:
        return False
    assert r.status_code == 200, r.text
    f = r.json()
    assert (f["circuits"], f["missing"], f["server_count"]) == (CIRCUITS, 0, N), f
    return True


def units_hold(d):
    return sum(len(d.get(f"/v1/ocs/u{u:02d}/cross-connects").json()["actual"]) for u in range(64))


def stored_rows(path):
    """What the store holds, read past the daemon: fabrics left marked partial, and circuits."""
    db = sqlite3.connect(path)
    try:
        return (db.execute("SELECT count(*) FROM fabric WHERE partial").fetchone()[0],
                db.execute("SELECT count(*) FROM circuit").fetchone()[0])
    finally:
        db.close()


def test_large_create_while_others_go_on(big):
    t, out = post_async(big, {"name": "big", "servers": SERVERS}, path="/v1/fabrics?wait=60")
    # Reads are answered and writes wait their turn, whenever they come.
    assert big.get("/v1/health").status_code == 200
    small = big.post("/v1/fabrics", {"name": "small", "servers": [f"s{N}", f"s{N + 1}"]})
    assert small.status_code == 201, small.text
    t.join()
    r = out["reply"]
    assert r.status_code == 201, r.text
    f = r.json()
    assert (f["state"], f["topology"], f["shape"]) == ("applied", "hyperx", [32, 32])
    assert len(f["links"]) == CIRCUITS and f["missing"] == []
    assert r.headers["Location"] == "/v1/fabrics/big" and r.headers["ETag"] == '"1"'
    assert big.get("/v1/fabrics/small?wait=10").json()["state"] == "applied"
    wait_for(lambda: units_hold(big) == CIRCUITS + 1, timeout=30)
    # One audit row for it, with the reply its client got.
    rows = [a for a in big.get("/v1/audit?limit=1000").json()["audit"]
            if a["method"] == "POST" and a["path"] == "/v1/fabrics"]
    assert sorted(a["status"] for a in rows) == [201, 201]
    # Deleted as any other.
    assert big.delete("/v1/fabrics/big?wait=30").json()["state"] == "removed"
    assert units_hold(big) == 1


def test_late_refusal_stores_nothing(big):
    # 300 servers load over several turns before the planner finds that a full mesh of 300
    # needs 299 planes: refused then, as it would be at once.
    before = big.get("/v1/fabrics").json()
    r = big.post("/v1/fabrics", {"name": "wide", "servers": SERVERS[:300],
                                 "topology": "full-mesh"})
    assert r.status_code == 422, r.text
    e = error_of(r)
    assert (e["code"], e["field"]) == ("infeasible", "devices")
    assert e["details"] == {"min_devices": 38, "devices": 8}
    assert big.get("/v1/fabrics/wide").status_code == 404
    assert big.get("/v1/fabrics").json() == before
    rows = [a for a in big.get("/v1/audit?limit=100").json()["audit"]
            if a["path"] == "/v1/fabrics"]
    assert [a["status"] for a in rows] == [422]
    # The next write is served.
    r = big.post("/v1/fabrics", {"name": "wide", "servers": SERVERS[:300]})
    assert r.status_code == 201 and r.json()["topology"] == "hyperx", r.text
    assert stored_rows(big.store)[0] == 0


def test_a_client_that_leaves_gets_nothing_half_made(big):
    # The client gives up long before the fabric can be whole (about 0.3 s of parts).
    t, out = post_async(big, {"name": "big", "servers": SERVERS}, timeout=0.02)
    t.join()
    # Whatever the daemon had done then, the writes go on after it.
    r = big.post("/v1/fabrics", {"name": "small", "servers": [f"s{N}", f"s{N + 1}"]})
    assert r.status_code == 201, r.text
    # Undone as soon as the close was seen (or never begun): audited 499, or not at all.
    assert big.get("/v1/fabrics/big").status_code == 404
    assert stored_rows(big.store)[0] == 0
    rows = [a["status"] for a in big.get("/v1/audit?limit=100").json()["audit"]
            if a["path"] == "/v1/fabrics"]
    assert rows in ([201], [499, 201]), rows
    wait_for(lambda: units_hold(big) == 1, timeout=30)


def lock_store(d, seconds):
    """Another process holds the store's write lock, past the daemon's busy timeout (1 s)."""
    db = sqlite3.connect(d.store, timeout=10)
    try:
        db.execute("BEGIN IMMEDIATE")
        time.sleep(seconds)
        db.rollback()
    finally:
        db.close()


def test_a_create_that_cannot_go_on_leaves_nothing(big):
    t, out = post_async(big, {"name": "big", "servers": SERVERS})
    wait_for(lambda: "fabric big:" in big.log() or "reply" in out, timeout=30)
    lock_store(big, 2.5)
    t.join()
    r = out["reply"]
    assert r.status_code in (201, 503), r.text
    # Whatever a failed part could not undo goes with the next write.
    assert big.post("/v1/fabrics", {"name": "small", "servers": [f"s{N}", f"s{N + 1}"]}) \
        .status_code == 201
    assert whole_or_absent(big, "big") == (r.status_code == 201)
    assert stored_rows(big.store)[0] == 0


def test_a_delete_that_cannot_go_on_is_finished(big):
    assert big.post("/v1/fabrics?wait=60", {"name": "big", "servers": SERVERS}).status_code == 201
    t, out = post_async(big, None, path="/v1/fabrics/big", method="DELETE")
    wait_for(lambda: "fabric big: deleting" in big.log(), timeout=30)
    lock_store(big, 2.5)
    t.join()
    r = out["reply"]
    assert r.status_code == 202 and r.json() == {"deleted": "big", "state": "removing"}, r.text
    assert big.post("/v1/fabrics", {"name": "small", "servers": [f"s{N}", f"s{N + 1}"]}) \
        .status_code == 201
    assert big.get("/v1/fabrics/big").status_code == 404
    assert stored_rows(big.store) == (0, 1)
    wait_for(lambda: units_hold(big) == 1, timeout=30)


def test_sigterm_during_a_large_create(big):
    t, out = post_async(big, {"name": "big", "servers": SERVERS})
    # Planned (the log says so), and then storing or done.
    wait_for(lambda: "fabric big:" in big.log() or "reply" in out, timeout=30)
    big.send_signal(signal.SIGTERM)
    t.join()
    assert big.proc.wait(timeout=30) == 0
    # Its client heard the truth: created, or not made.
    r = out.get("reply")
    assert r is not None, out
    assert r.status_code in (201, 503), r.text
    big.start()
    assert whole_or_absent(big, "big") == (r.status_code == 201)
    assert stored_rows(big.store)[0] == 0


def test_sigkill_during_a_large_create(tmp_path):
    d = Daemon(tmp_path).start()
    try:
        assert d.put("/v1/topology", topology(), timeout=120).status_code == 200
        t, out = post_async(d, {"name": "big", "servers": SERVERS})
        wait_for(lambda: "fabric big:" in d.log() or "reply" in out, timeout=30)
        d.stop(sig=signal.SIGKILL)
        t.join()
        d.start()
        # Never half-made: what was left unfinished went at the start, and off the units.
        whole = whole_or_absent(d, "big")
        assert stored_rows(d.store) == (0, CIRCUITS if whole else 0)
        if not whole:
            assert "reply" not in out or out["reply"].status_code != 201
            wait_for(lambda: units_hold(d) == 0, timeout=30)
    finally:
        d.stop(sig=signal.SIGKILL)


def test_large_delete_is_carried_through(big):
    assert big.post("/v1/fabrics?wait=60", {"name": "big", "servers": SERVERS}).status_code == 201
    t, out = post_async(big, None, path="/v1/fabrics/big", method="DELETE")
    assert big.get("/v1/health").status_code == 200
    t.join()
    r = out["reply"]
    assert r.status_code == 202 and r.json() == {"deleted": "big", "state": "removing"}, r.text
    assert big.get("/v1/fabrics/big").status_code == 404
    assert big.delete("/v1/fabrics/big").status_code == 404
    wait_for(lambda: units_hold(big) == 0, timeout=30)
    assert stored_rows(big.store) == (0, 0)
    # The same servers make a fabric again.
    r = big.post("/v1/fabrics?wait=60", {"name": "again", "servers": SERVERS})
    assert r.status_code == 201 and r.json()["state"] == "applied", r.text


def test_a_delete_goes_on_when_its_client_leaves(big):
    assert big.post("/v1/fabrics?wait=60", {"name": "big", "servers": SERVERS}).status_code == 201
    t, out = post_async(big, None, path="/v1/fabrics/big", method="DELETE", timeout=0.02)
    t.join()
    # Accepted or not yet: it is carried through either way, audited and told.
    wait_for(lambda: big.get("/v1/fabrics/big").status_code == 404, timeout=30)
    assert big.post("/v1/fabrics", {"name": "small", "servers": [f"s{N}", f"s{N + 1}"]}) \
        .status_code == 201
    assert stored_rows(big.store) == (0, 1)
    rows = [a for a in big.get("/v1/audit?limit=100").json()["audit"]
            if a["method"] == "DELETE"]
    assert [a["status"] for a in rows] == [202]
    wait_for(lambda: units_hold(big) == 1, timeout=30)


def test_sigkill_during_a_large_delete(tmp_path):
    d = Daemon(tmp_path).start()
    try:
        assert d.put("/v1/topology", topology(), timeout=120).status_code == 200
        assert d.post("/v1/fabrics?wait=60", {"name": "big", "servers": SERVERS}).status_code == 201
        t, out = post_async(d, None, path="/v1/fabrics/big", method="DELETE")
        wait_for(lambda: "fabric big: deleting" in d.log(), timeout=30)
        d.stop(sig=signal.SIGKILL)
        t.join()
        d.start()
        # Begun, it is finished at the start; not begun, the fabric is whole.
        if d.get("/v1/fabrics/big").status_code == 404:
            assert stored_rows(d.store) == (0, 0)
        else:
            assert whole_or_absent(d, "big") and stored_rows(d.store) == (0, CIRCUITS)
            assert "reply" not in out
    finally:
        d.stop(sig=signal.SIGKILL)


# ---- a topology whose rule makes more cables than a turn holds ------------------------------

BIG = 4098  # servers: 262,272 cables, inserted 256 servers (16,384 cables) a part


def big_topology():
    t = topology()
    t["ocs"] = [dict(o, ports=BIG) for o in t["ocs"]]
    t["servers"] = [{"name": f"s{i}", "devices": 8, "ports_per_device": 8} for i in range(BIG)]
    return t


def cables(path):
    db = sqlite3.connect(path)
    try:
        return (db.execute("SELECT count(*) FROM cable").fetchone()[0],
                db.execute("SELECT partial FROM wiring").fetchone()[0])
    finally:
        db.close()


def stored_cabling(path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT sv.name, c.device, c.port, o.name, c.ocs_port FROM cable c "
                          "JOIN server sv ON sv.id = c.server_id JOIN ocs o ON o.id = c.ocs_id "
                          "ORDER BY sv.id, c.device, c.port").fetchall()
    finally:
        db.close()


def revisions(path):
    """The servers' revisions, as a set."""
    db = sqlite3.connect(path)
    try:
        return {r for (r,) in db.execute("SELECT revision FROM server")}
    finally:
        db.close()


def rule_cabling(t):
    """plane-per-ocs by hand: slot k = device * P + port of each server to unit k mod K (units
    by name), each unit's ports in server order."""
    units = sorted(o["name"] for o in t["ocs"])
    taken = dict.fromkeys(units, 0)
    out = []
    for s in t["servers"]:
        p = s["ports_per_device"]
        for k in range(s["devices"] * p):
            u = units[k % len(units)]
            taken[u] += 1
            out.append((s["name"], k // p, k % p, u, taken[u]))
    return out


def watch_partial(d, out):
    """GET /v1/topology until the PUT's reply: True if one answered while the cabling was
    partial (the loop served it between two parts)."""
    seen = False
    while "reply" not in out and "error" not in out:
        r = d.get("/v1/topology", timeout=30)
        assert r.status_code == 200, r.text
        seen |= r.json()["wiring"].get("partial", False)
    return seen


def test_large_topology_put_goes_in_parts(daemon):
    t, out = post_async(daemon, big_topology(), path="/v1/topology", method="PUT")
    watch_partial(daemon, out)
    t.join()
    r = out["reply"]
    assert r.status_code == 200, r.text
    assert r.json()["wiring"] == {"rule": "plane-per-ocs"} and len(r.json()["servers"]) == BIG
    assert cables(daemon.store) == (BIG * 64, 0)
    ports = [p for dev in daemon.get(f"/v1/servers/s{BIG - 1}").json()["device_info"]
             for p in dev["ports"]]
    assert len(ports) == 64 and {p["ocs_port"] for p in ports} == {BIG}
    # Into an empty table the rule's cables were made a part at a time: each is the rule's.
    assert stored_cabling(daemon.store) == rule_cabling(big_topology())
    assert "applied again" not in daemon.log()  # the parts' own cables, not a redo at once
    # Each server's revision rose once, with the part of its cables (created at 1).
    assert revisions(daemon.store) == {2}
    # The same topology again changes nothing, at once (the table merged with the rule).
    again = daemon.put("/v1/topology", big_topology(), timeout=120)
    assert again.status_code == 200 and again.headers["ETag"] == r.headers["ETag"]
    assert cables(daemon.store) == (BIG * 64, 0)


def test_a_large_wiring_is_read_in_parts(daemon):
    """GET /v1/wiring of 262,272 links is written 8,192 a turn from a read transaction of its
    own: every link is the rule's, in order, and its tag is the one the view written at once
    has (a PUT's If-Match compares with that one)."""
    t = big_topology()
    assert daemon.put("/v1/topology", t, timeout=120).status_code == 200
    r = daemon.get("/v1/wiring", timeout=120)
    assert r.status_code == 200, r.text
    links = [(x["server"], x["device"], x["port"], x["ocs"], x["ocs_port"])
             for x in r.json()["links"]]
    assert r.json()["rule"] == "plane-per-ocs" and links == rule_cabling(t)
    put = daemon.put("/v1/wiring", {"rule": "plane-per-ocs"}, headers={"If-Match": r.headers["ETag"]},
                     timeout=120)
    assert put.status_code == 200, put.text
    assert put.headers["ETag"] == r.headers["ETag"]
    # Reads in parts while writes go on between them: each whole, each the store at one moment.
    assert daemon.post("/v1/fabrics", {"name": "f", "servers": ["s0", "s1"]}).status_code == 201
    assert daemon.get("/v1/wiring", timeout=120).headers["ETag"] == r.headers["ETag"]


def test_parts_of_uneven_servers(daemon):
    """Servers of 15 and 12 ports on 7 units: a part (whole servers, inserted unit by unit) holds
    some of every unit, and each unit's next port carries from one part to the next."""
    t = {"ocs": [{"name": f"u{k}", "driver": "sim", "ports": 7000} for k in (3, 1, 4, 0, 6, 2, 5)],
         "servers": [{"name": f"m{i}", "devices": 3 if i % 2 else 4,
                      "ports_per_device": 5 if i % 2 else 3} for i in range(2600)],
         "wiring": {"rule": "plane-per-ocs"}}
    r = daemon.put("/v1/topology", t, timeout=120)
    assert r.status_code == 200, r.text
    assert stored_cabling(daemon.store) == rule_cabling(t) and len(rule_cabling(t)) > 2 * 16384
    assert "applied again" not in daemon.log()  # the parts' own cables, not a redo at once
    assert revisions(daemon.store) == {2}


def test_a_large_body_read_off_the_loop_is_refused_as_any(daemon):
    """A topology past 64 KiB is parsed and read on the parser's thread: a bad field deep in
    it, or JSON cut short, is the same 400 naming it, and stores nothing."""
    t = big_topology()
    t["servers"][3000]["devices"] = 0
    r = daemon.put("/v1/topology", t, timeout=120)
    assert r.status_code == 400, r.text
    assert error_of(r)["code"] == "invalid_field"
    assert r.json()["error"]["field"] == "servers[3000].devices"
    t["servers"][3000]["devices"] = 8
    t["servers"][4000]["colour"] = "red"
    r = daemon.put("/v1/topology", t, timeout=120)
    assert r.status_code == 400 and r.json()["error"]["field"] == "servers[4000].colour", r.text
    # A stale If-Match is answered before the contents, as for a small body.
    r = daemon.put("/v1/topology", t, headers={"If-Match": '"0000"'}, timeout=120)
    assert r.status_code == 412, r.text
    text = json.dumps(big_topology())
    assert len(text) > 64 * 1024
    r = daemon.put("/v1/topology", raw=text[:-2], timeout=120)
    assert r.status_code == 400 and error_of(r)["code"] == "invalid_json", r.text
    assert "line 1, column" in r.json()["error"]["message"]
    stored = daemon.get("/v1/topology").json()
    assert stored["servers"] == [] and stored["ocs"] == [], stored
    # And the same body whole is taken.
    assert daemon.put("/v1/topology", raw=text, timeout=120).status_code == 200


def test_clients_that_leave_while_their_body_is_parsed(daemon):
    """Clients that send a large topology and close at once, some while its body is still with
    the parser, some after: the daemon lives on, and the store holds no topology or all of it."""
    text = json.dumps(big_topology()).encode()
    for i in range(6):
        s = socket.create_connection(("127.0.0.1", daemon.port))
        s.sendall(b"PUT /v1/topology HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(text) + text)
        time.sleep(0.002 * i)
        s.close()
        assert daemon.get("/v1/health").status_code == 200
    # Whatever was taken goes on to the end; the store is then whole.
    def settled():
        t = daemon.get("/v1/topology").json()
        return not t["servers"] or ("partial" not in t["wiring"]
                                    and cables(daemon.store) == (BIG * 64, 0))
    assert wait_for(settled, timeout=120)
    assert daemon.put("/v1/topology", raw=text.decode(), timeout=120).status_code == 200
    assert cables(daemon.store) == (BIG * 64, 0)


def test_a_topology_put_goes_on_when_its_client_leaves(daemon):
    t, out = post_async(daemon, big_topology(), path="/v1/topology", method="PUT", timeout=0.5)
    t.join()
    assert wait_for(lambda: "partial" not in daemon.get("/v1/topology").json()["wiring"]
                    and cables(daemon.store) == (BIG * 64, 0), timeout=120)
    assert daemon.post("/v1/fabrics?wait=30", {"name": "f", "servers": ["s0", "s1"]}) \
        .json()["state"] == "applied"


def test_sigkill_during_a_large_topology_put(tmp_path):
    d = Daemon(tmp_path).start()
    try:
        t, out = post_async(d, big_topology(), path="/v1/topology", method="PUT")
        seen = False
        while not seen and "reply" not in out:
            seen = d.get("/v1/topology", timeout=30).json()["wiring"].get("partial", False)
        d.stop(sig=signal.SIGKILL)
        t.join()
        n, partial = cables(d.store)
        d.start()
        # Killed between two parts: the start applied the rule again and made it whole.
        assert cables(d.store) == (BIG * 64, 0)
        if partial:
            assert n < BIG * 64 and "left unfinished" in d.log()
        assert "partial" not in d.get("/v1/topology").json()["wiring"]
    finally:
        d.stop(sig=signal.SIGKILL)


@pytest.fixture
def small_disk(tmp_path):
    """A 96 MiB tmpfs for the store (root only): a test fills it to make the store fail."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(path):
    """Writes path until its file system has no room left."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 512):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def test_a_topology_put_that_cannot_go_on_is_finished(tmp_path, small_disk):
    """A part that cannot be stored (the disk full) leaves the rest to the next write, which
    applies the rule again: every cable is there in the end, none twice."""
    d = Daemon(tmp_path)
    d.store = str(small_disk / "ofcd.db")
    d.write_config()
    d.start()
    filler = small_disk / "filler"
    try:
        t, out = post_async(d, big_topology(), path="/v1/topology", method="PUT")
        seen = False
        while not seen and "reply" not in out:
            seen = d.get("/v1/topology", timeout=30).json()["wiring"].get("partial", False)
        # Every byte left taken: the next part's commit fails, and so does the rest at once.
        fill(filler)
        t.join()
        r = out["reply"]
        # Whole before the disk filled (200), or cut: it said the cabling goes on (202).
        assert r.status_code in (200, 202), r.text
        if r.status_code == 202:
            assert r.json()["state"] == "storing"
            assert "cannot finish it now" in d.log()
        filler.unlink()
        # The next write finishes it (from the rule again) before its own change.
        assert d.post("/v1/ocs", {"name": "extra", "driver": "sim", "ports": 8}).status_code == 201
        assert cables(d.store) == (BIG * 64, 0)
        assert "partial" not in d.get("/v1/topology").json()["wiring"]
    finally:
        d.stop(sig=signal.SIGKILL)
