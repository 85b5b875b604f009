"""Daemon core against the real binary: health, metrics, errors, auth, config, signals, store."""
import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time

import requests

from conftest import ADMIN, OFCD_BIN, READER, Daemon, error_of, wait_for


def test_health(daemon):
    r = daemon.get("/v1/health")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    body = r.json()
    assert body["status"] == "ok"
    assert body["version"]
    assert isinstance(body["uptime_s"], int) and body["uptime_s"] >= 0


def test_metrics(daemon):
    daemon.get("/v1/health")
    daemon.get("/v1/nowhere")
    daemon.post("/v1/ocs", {"name": "m0", "ports": 8})
    r = daemon.get("/metrics")
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain")
    text = r.text
    # wait_ready() polled health too, so counts start at 1 or more.
    assert 'ofcd_http_requests_total{route="/v1/health",method="GET",status="200"} ' in text
    assert 'ofcd_http_requests_total{route="unmatched",method="GET",status="404"} 1\n' in text
    assert 'ofcd_http_requests_total{route="/v1/ocs",method="POST",status="201"} 1\n' in text
    assert 'ofcd_http_request_duration_seconds_bucket{route="/v1/health",le="+Inf"} ' in text
    assert "ofcd_store_commit_duration_seconds_count " in text
    assert 'ofcd_loop_busy_seconds_bucket{callback="http",le="+Inf"} ' in text
    assert "ofcd_http_open_connections 1" in text
    assert "ofcd_cluster_write_stage_seconds" not in text  # a cluster leader's only
    rss = [l for l in text.splitlines() if l.startswith("ofcd_resident_memory_bytes ")]
    assert rss and int(rss[0].split()[1]) > 1024 * 1024


def test_invalid_json(daemon):
    r = daemon.post("/v1/plan", raw='{"servers": 4,\n "devices": }')
    assert r.status_code == 400
    e = error_of(r)
    assert e["code"] == "invalid_json"
    assert "line 2" in e["message"] and "column" in e["message"]
    assert error_of(daemon.post("/v1/plan", raw='{"servers": 4} trailing'))["code"] == "invalid_json"
    assert error_of(daemon.post("/v1/plan", raw='{"a": 1, "a": 2}'))["code"] == "invalid_json"
    assert error_of(daemon.post("/v1/plan", raw=""))["code"] == "invalid_json"


def test_invalid_field(daemon):
    cases = [
        ({"devices": 4}, "servers"),
        ({"servers": "4", "devices": 4}, "servers"),
        ({"servers": 0, "devices": 4}, "servers"),
        ({"servers": 65537, "devices": 4}, "servers"),  # past the largest grid
        ({"servers": 513, "devices": 4, "links": False}, "servers"),  # past a full mesh
        ({"servers": 4, "devices": 4.5}, "devices"),
        ({"servers": 4, "devices": -1}, "devices"),
        ({"servers": 4, "devices": 4, "ports_per_device": 1025}, "ports_per_device"),
        ({"servers": 4, "devices": 4, "formula": "2"}, "formula"),
        ({"servers": 5, "devices": 5, "formula": "3"}, "formula"),
        ({"servers": 4, "devices": 4, "colour": "red"}, "colour"),
        ([1, 2], None),
    ]
    for body, field in cases:
        r = daemon.post("/v1/plan", body)
        assert r.status_code == 400, (body, r.text)
        e = error_of(r)
        assert e["code"] == "invalid_field"
        if field:
            assert e["field"] == field and field in e["message"], (body, e)


def test_not_found_and_method(daemon):
    r = daemon.get("/v1/nothing")
    assert r.status_code == 404 and error_of(r)["code"] == "not_found"
    r = daemon.delete("/v1/health")
    assert r.status_code == 405
    assert error_of(r)["code"] == "method_not_allowed"
    assert r.headers["Allow"] == "GET, HEAD, OPTIONS"
    r = daemon.req("PATCH", "/v1/ocs")
    assert r.status_code == 405
    assert set(r.headers["Allow"].split(", ")) == {"GET", "HEAD", "POST", "OPTIONS"}


def test_body_too_large(make_daemon):
    d = make_daemon(extra="")
    d.write_config(extra="")
    d.config.write_text(d.config.read_text().replace("[store]", "max_body = 2048\n[store]"))
    d.start()
    big = '{"servers": 4, "devices": 4, "pad": "' + "x" * 4096 + '"}'
    r = d.post("/v1/plan", raw=big)
    assert r.status_code == 413 and error_of(r)["code"] == "body_too_large"

    # A chunked body has no length up front: it is cut off once over the limit.
    def chunks():
        for _ in range(16):
            yield b"x" * 1024
    r = requests.post(d.url("/v1/ocs"), data=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and error_of(r)["code"] == "body_too_large"
    assert d.get("/v1/ocs").json()["ocs"] == []
    d.stop()


def test_unsupported_media_type(daemon):
    r = daemon.req("POST", "/v1/ocs", raw='{"name": "x", "ports": 4}',
                   headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and error_of(r)["code"] == "unsupported_media_type"
    r = requests.post(daemon.url("/v1/ocs"), data='{"name": "x", "ports": 4}')
    assert r.status_code == 415
    r = daemon.req("POST", "/v1/ocs", raw='{"name": "x", "ports": 4}',
                   headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 201


def test_auth(auth_daemon):
    d = auth_daemon
    # No token: 401 with a challenge, on known and unknown routes alike.
    for path in ("/v1/ocs", "/v1/nothing"):
        r = requests.get(d.url(path))
        assert r.status_code == 401 and error_of(r)["code"] == "unauthorized"
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
    # Health and metrics stay open for probes.
    assert requests.get(d.url("/v1/health")).status_code == 200
    assert requests.get(d.url("/metrics")).status_code == 200
    # Wrong token, wrong scheme.
    assert d.get("/v1/ocs", token="not-a-valid-secret-at-all").status_code == 401
    r = requests.get(d.url("/v1/ocs"), headers={"Authorization": "Basic " + ADMIN})
    assert r.status_code == 401
    assert d.get("/v1/ocs", token=ADMIN[:-1]).status_code == 401
    assert d.get("/v1/ocs", token=ADMIN + "x").status_code == 401
    # Read token: GET yes, writes 403 and nothing changes.
    assert d.get("/v1/ocs", token=READER).status_code == 200
    r = d.post("/v1/ocs", {"name": "o", "ports": 4}, token=READER)
    assert r.status_code == 403 and error_of(r)["code"] == "forbidden"
    assert d.get("/v1/ocs", token=READER).json()["ocs"] == []
    # Admin: everything.
    assert d.post("/v1/ocs", {"name": "o", "ports": 4}, token=ADMIN).status_code == 201
    assert len(d.get("/v1/ocs", token=READER).json()["ocs"]) == 1
    # Secrets never reach the log; token names do reach the audit trail.
    d.stop()
    log = d.log()
    assert ADMIN not in log and READER not in log
    db = sqlite3.connect(d.store)
    rows = db.execute("SELECT token, method, path, status FROM audit ORDER BY id").fetchall()
    assert ("mon", "POST", "/v1/ocs", 403) in rows
    assert ("ops", "POST", "/v1/ocs", 201) in rows


def test_non_loopback_refused(tmp_path):
    d = Daemon(tmp_path, listen_host="0.0.0.0")
    p = subprocess.run([OFCD_BIN, "-c", str(d.config)], capture_output=True, text=True, timeout=10)
    assert p.returncode == 1
    assert "not a loopback address" in p.stderr and "ofcd.ini" in p.stderr
    d.write_config(listen_host="0.0.0.0", extra="[auth]\nallow_unauthenticated = true\n")
    d.start()
    assert d.get("/v1/health").status_code == 200
    assert d.stop() == 0


def test_check_config(tmp_path):
    good = tmp_path / "good.ini"
    good.write_text("[http]\nlisten = 127.0.0.1:9999\n")
    p = subprocess.run([OFCD_BIN, "-c", str(good), "--check-config"], capture_output=True, text=True)
    assert p.returncode == 0
    bad = tmp_path / "bad.ini"
    bad.write_text("[http]\nlisten = 127.0.0.1:9999\n\n[log]\nverbosity = 3\n")
    p = subprocess.run([OFCD_BIN, "-c", str(bad), "--check-config"], capture_output=True, text=True)
    assert p.returncode == 1
    assert f"{bad}:5: [log] verbosity: unknown key" in p.stderr
    example = os.path.join(os.path.dirname(__file__), "../../schema/ofcd.example.ini")
    p = subprocess.run([OFCD_BIN, "-c", example, "--check-config"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    # Token secrets any user of the machine can read: valid, with a warning.
    secrets = tmp_path / "secrets.ini"
    secrets.write_text(f"[http]\nlisten = 127.0.0.1:9999\n[auth]\ntoken.ops = admin:{ADMIN}\n")
    secrets.chmod(0o644)
    p = subprocess.run([OFCD_BIN, "-c", str(secrets), "--check-config"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert (f"{secrets} holds token secrets and any user of this machine can read it (mode "
            f"0644): chmod o-rwx {secrets}") in p.stderr
    secrets.chmod(0o640)
    p = subprocess.run([OFCD_BIN, "-c", str(secrets), "--check-config"], capture_output=True,
                       text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    # Private keys any user can read: each file once, however many units share it.
    for name in ("api.key", "units.key", "spine.key"):
        (tmp_path / name).write_text("not read by --check-config\n")
        (tmp_path / name).chmod(0o644)
    keys = tmp_path / "keys.ini"
    keys.write_text(f"[http]\nlisten = 127.0.0.1:9999\ntls_key = {tmp_path / 'api.key'}\n"
                    f"tls_cert = {tmp_path / 'api.pem'}\n"
                    f"[netconf]\nkey = {tmp_path / 'units.key'}\n"
                    f"key.ocs1 = {tmp_path / 'units.key'}\nkey.ocs2 = {tmp_path / 'spine.key'}\n"
                    f"key.ocs3 = {tmp_path / 'spine.key'}\n")
    p = subprocess.run([OFCD_BIN, "-c", str(keys), "--check-config"], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    for name, what in (("api.key", "the API's TLS private key"),
                       ("units.key", "an SSH private key of the NETCONF units"),
                       ("spine.key", "an SSH private key of the NETCONF units")):
        line = (f"{tmp_path / name} holds {what} and any user of this machine can read it "
                f"(mode 0644): chmod o-rwx {tmp_path / name}")
        assert p.stderr.count(line) == 1, p.stderr
    for name in ("api.key", "units.key", "spine.key"):
        (tmp_path / name).chmod(0o600)
    p = subprocess.run([OFCD_BIN, "-c", str(keys), "--check-config"], capture_output=True,
                       text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_sighup_reload(make_daemon):
    d = make_daemon(tokens=True).start()
    assert d.get("/v1/ocs", token=READER).status_code == 200
    # New token set and log level.
    new = "fresh-secret-0123456789"
    d.config.write_text(d.config.read_text().replace(f"token.mon = read:{READER}", f"token.mon = read:{new}")
                        .replace("level = info", "level = debug"))
    d.send_signal(signal.SIGHUP)
    deadline = time.time() + 5
    while d.get("/v1/ocs", token=new).status_code != 200 and time.time() < deadline:
        time.sleep(0.05)
    assert d.get("/v1/ocs", token=new).status_code == 200
    assert d.get("/v1/ocs", token=READER).status_code == 401
    assert "configuration reloaded" in d.log()
    # A bad file keeps the running configuration and says why.
    d.config.write_text(d.config.read_text() + "[bogus]\nx = 1\n")
    d.send_signal(signal.SIGHUP)
    deadline = time.time() + 5
    while "keeping the running configuration" not in d.log() and time.time() < deadline:
        time.sleep(0.05)
    assert "keeping the running configuration" in d.log() and "[bogus] x: unknown section" in d.log()
    assert d.get("/v1/ocs", token=new).status_code == 200
    assert d.stop() == 0


def test_sigterm_finishes_inflight(daemon):
    # A request whose body is still arriving when SIGTERM comes must be answered.
    body = b'{"name": "late", "ports": 16}'
    s = socket.create_connection(("127.0.0.1", daemon.port))
    s.sendall(b"POST /v1/ocs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:10])
    time.sleep(0.2)
    daemon.send_signal(signal.SIGTERM)

    # New connections are refused while draining: once the daemon has taken the signal,
    # which on a busy machine may be more than a moment.
    def refused():
        try:
            socket.create_connection(("127.0.0.1", daemon.port), timeout=1).close()
            return False
        except OSError:
            return True
    assert wait_for(refused, timeout=5)
    s.sendall(body[10:])
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = s.recv(4096)
        if not chunk:
            break
        reply += chunk
    s.close()
    assert reply.startswith(b"HTTP/1.1 201"), reply
    assert daemon.proc.wait(timeout=15) == 0
    db = sqlite3.connect(daemon.store)
    assert db.execute("SELECT count(*) FROM ocs WHERE name = 'late'").fetchone()[0] == 1


def test_sigterm_under_load(daemon):
    results = []

    def worker(i):
        sess = requests.Session()
        for j in range(50):
            try:
                r = sess.post(daemon.url("/v1/ocs"), json={"name": f"o{i}-{j}", "ports": 4},
                              headers={"Content-Type": "application/json"}, timeout=10)
                results.append((f"o{i}-{j}", r.status_code))
            except requests.ConnectionError:
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    # SIGTERM once writes are being acknowledged (a fixed 0.3 s could pass before the first).
    wait_for(lambda: any(status == 201 for _, status in results), timeout=10)
    daemon.send_signal(signal.SIGTERM)
    for t in threads:
        t.join()
    assert daemon.proc.wait(timeout=15) == 0
    # Every acknowledged creation is in the store.
    db = sqlite3.connect(daemon.store)
    stored = {r[0] for r in db.execute("SELECT name FROM ocs")}
    acked = {name for name, status in results if status == 201}
    assert acked and acked <= stored


def test_store_survives_restart(daemon):
    assert daemon.post("/v1/ocs", {"name": "keep", "ports": 32}).status_code == 201
    daemon.restart()
    assert daemon.get("/v1/ocs/keep").json()["ports"] == 32
    db = sqlite3.connect(daemon.store)
    assert db.execute("PRAGMA user_version").fetchone()[0] >= 2
    assert db.execute("SELECT count(*) FROM audit WHERE path = '/v1/ocs'").fetchone()[0] == 1


def test_newer_schema_refused(tmp_path):
    d = Daemon(tmp_path)
    db = sqlite3.connect(d.store)
    db.execute("PRAGMA user_version = 999")
    db.close()
    p = subprocess.run([OFCD_BIN, "-c", str(d.config)], capture_output=True, text=True, timeout=10)
    assert p.returncode == 1 and "newer than this ofcd" in p.stderr


def test_bad_input_never_5xx(daemon):
    # A sweep of malformed requests: every answer is a 4xx and the daemon lives on.
    bodies = ['', '{', '[]', 'null', '"x"', '1e999', '{"name": null}', '{"name": 5}',
              '{"name": "' + "n" * 65 + '", "ports": 4}', '{"name": "a/b", "ports": 4}',
              '{"name": "ok", "ports": 99999999999999999999}', '{"name": "ok", "ports": true}',
              '\x00\x01', '{"name": "\\u0000x", "ports": 4}']
    for path in ("/v1/ocs", "/v1/servers", "/v1/fabrics", "/v1/plan"):
        for b in bodies:
            r = daemon.post(path, raw=b.encode())
            assert 400 <= r.status_code < 500, (path, b, r.status_code, r.text)
    assert daemon.get("/v1/health").status_code == 200
    assert daemon.get("/v1/ocs").json()["ocs"] == []
    assert daemon.get("/v1/servers").json()["servers"] == []


def test_unknown_query_parameter(daemon):
    r = daemon.get("/v1/ocs?colour=red")
    assert r.status_code == 400 and error_of(r)["field"] == "colour"
    assert "takes none" in error_of(r)["message"]
    r = daemon.get("/v1/fabrics/x?wiat=5")
    assert r.status_code == 400 and error_of(r)["field"] == "wiat" and "wait" in error_of(r)["message"]
    assert daemon.get("/v1/operations?limit=5&ocs=a").status_code == 200


def test_reload_keeps_auth_on_public_socket(make_daemon):
    # Listening on all addresses with a token; a new file without tokens (for a loopback
    # address that only a restart would bind) must not switch authentication off.
    d = make_daemon(tokens=True, listen_host="0.0.0.0")
    d.config.write_text(d.config.read_text().replace(
        "[http]\n", "[http]\nallow_plaintext_tokens = true\n"))
    d.start()
    text = d.config.read_text().replace("0.0.0.0", "127.0.0.1")
    d.config.write_text("\n".join(l for l in text.splitlines() if not l.startswith("token.")) + "\n")
    d.send_signal(signal.SIGHUP)
    deadline = time.time() + 5
    while "keeping the running configuration" not in d.log() and time.time() < deadline:
        time.sleep(0.05)
    assert "not a loopback address" in d.log()
    r = requests.post(d.url("/v1/ocs"), json={"name": "x", "ports": 4})
    assert r.status_code == 401
    assert d.stop() == 0


def test_token_survives_reload_mid_request(auth_daemon):
    # A request authenticated before a SIGHUP finishes after it without touching freed memory.
    d = auth_daemon
    body = b'{"name": "mid", "ports": 8}'
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(b"POST /v1/ocs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Authorization: Bearer {ADMIN}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
              + body[:5])
    time.sleep(0.2)
    d.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    s.sendall(body[5:])
    reply = s.recv(4096)
    s.close()
    assert reply.startswith(b"HTTP/1.1 201")
    d.stop()
    db = sqlite3.connect(d.store)
    assert ("ops", "POST", "/v1/ocs", 201) in db.execute("SELECT token, method, path, status FROM audit").fetchall()


def test_odd_bytes_in_paths(daemon):
    r = daemon.get("/v1/%FF")
    assert r.status_code == 404 and error_of(r)["code"] == "not_found"
    # Overlong forms and surrogates are not UTF-8 either (the body was {}).
    for odd in ("%C0%80", "%ED%A0%80", "%F4%90%80%80"):
        r = daemon.get(f"/v1/{odd}")
        assert r.status_code == 404 and error_of(r)["code"] == "not_found", odd
    r = daemon.get("/v1/ocs?%FF=1")
    assert r.status_code == 400 and error_of(r)["code"] == "invalid_field"
    daemon.post("/v1/servers", {"name": "nulx", "devices": 2})
    # "%00" never cuts a name short.
    r = daemon.delete("/v1/servers/nulx%00garbage")
    assert r.status_code == 404
    assert daemon.get("/v1/servers/nulx").status_code == 200
