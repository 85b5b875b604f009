"""ofcctl against a real daemon: every command in both output forms, the exit codes, host lists,
tokens, redirects, an unreachable daemon, and where the URL and token come from."""
import http.server
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import ADMIN, READER, Daemon, free_port

OFCCTL_BIN = os.environ.get("OFCCTL_BIN", os.path.join(os.path.dirname(__file__), "../../build/ofcctl"))


class Ctl:
    """Runs build/ofcctl with a clean environment: its own HOME, no OFCCTL_* variables."""

    def __init__(self, tmp_path, url=None):
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.url = url

    def env(self, extra=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("OFCCTL_") and k != "XDG_CONFIG_HOME"}
        env["HOME"] = str(self.home)
        env.update(extra or {})
        return env

    def __call__(self, *args, env=None, stdin=None, url=True, timeout=30):
        argv = [OFCCTL_BIN]
        if url and self.url:
            argv += ["--url", self.url]
        p = subprocess.run(argv + [str(a) for a in args], env=self.env(env), input=stdin,
                           capture_output=True, text=True, timeout=timeout)
        return p


@pytest.fixture
def demo(tmp_path):
    d = Daemon(tmp_path, extra="[debug]\nfaults = true\n", args=("--demo",)).start()
    yield d
    d.stop()


@pytest.fixture
def ctl(tmp_path, demo):
    return Ctl(tmp_path, demo.url(""))


def rows(text):
    """A table's lines split into cells (the header first)."""
    return [line.split() for line in text.splitlines() if line.strip()]


def kv(text):
    """The "key: value" lines of a block."""
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith(" "):
            k, v = line.split(":", 1)
            if " " not in k:
                out[k] = v.strip()
    return out


def test_version_help_health(ctl, demo):
    p = ctl("--version")
    assert p.returncode == 0 and p.stdout.startswith("ofcctl ")
    p = ctl("--help")
    assert p.returncode == 0 and "fabric create NAME HOSTLIST..." in p.stdout
    p = ctl("health")
    assert p.returncode == 0, p.stderr
    assert kv(p.stdout)["status"] == "ok" and kv(p.stdout)["version"] == demo.get("/v1/health").json()["version"]
    p = ctl("-o", "json", "health")
    assert json.loads(p.stdout)["status"] == "ok"


def test_fabric_lifecycle(ctl, demo):
    p = ctl("fabric", "create", "job-a", "srv[0-2],srv4", "--wait", "10")
    assert p.returncode == 0, p.stderr
    info = kv(p.stdout)
    assert info["state"] == "applied" and info["servers"] == "srv[0-2,4] (4)"
    assert info["missing"] == "none"
    links = rows(p.stdout.split("\n\n", 1)[1])
    assert links[0] == ["PLANE", "OCS", "A", "DEVICE", "PORT", "OCS_PORT", "B", "DEVICE", "PORT", "OCS_PORT"]
    assert len(links) - 1 == 6  # four servers: six pairs
    assert demo.get("/v1/fabrics/job-a").json()["servers"] == ["srv0", "srv1", "srv2", "srv4"]

    # Separate names as several arguments; options after the arguments; JSON unchanged.
    p = ctl("-o", "json", "fabric", "create", "job-b", "srv5", "srv[6-7]", "--wait=10")
    assert p.returncode == 0, p.stderr
    body = json.loads(p.stdout)
    assert body["state"] == "applied" and body["servers"] == ["srv5", "srv6", "srv7"]

    p = ctl("fabric", "list")
    assert p.returncode == 0
    assert rows(p.stdout) == [["NAME", "STATE", "REVISION", "CIRCUITS", "MISSING", "SERVERS"],
                              ["job-a", "applied", "1", "6", "0", "srv[0-2,4]"],
                              ["job-b", "applied", "1", "3", "0", "srv[5-7]"]]
    p = ctl("-o", "json", "fabric", "list")
    assert p.stdout == demo.get("/v1/fabrics").text
    p = ctl("-o", "json", "fabric", "get", "job-b")
    assert p.stdout == demo.get("/v1/fabrics/job-b").text
    p = ctl("fabric", "get", "job-b", "--wait", "5")
    assert p.returncode == 0 and kv(p.stdout)["state"] == "applied"

    p = ctl("fabric", "delete", "job-a", "--wait", "10")
    assert (p.returncode, p.stdout) == (0, "fabric job-a: removed\n"), p.stderr
    p = ctl("-o", "json", "fabric", "delete", "job-b")
    assert p.returncode == 0 and json.loads(p.stdout) == {"deleted": "job-b", "state": "removing"}
    # Gone: the daemon's refusal, exit 1; with -o json its body on stdout as well.
    p = ctl("fabric", "delete", "job-a")
    assert (p.returncode, p.stderr) == (1, "ofcctl: 404 not_found: no fabric job-a\n")
    p = ctl("-o", "json", "fabric", "get", "job-a")
    assert p.returncode == 1 and json.loads(p.stdout)["error"]["code"] == "not_found"


def test_refusals_exit_1(ctl, demo):
    assert ctl("fabric", "create", "a", "srv[0-2]").returncode == 0
    p = ctl("fabric", "create", "b", "srv[1-3]")
    assert p.returncode == 1
    assert p.stderr == "ofcctl: 409 in_use: servers[0]: server srv1 is already in fabric a\n"
    assert p.stdout == ""
    # Zero padding is kept: srv00 is not srv0.
    p = ctl("fabric", "create", "c", "srv[06-07]")
    assert p.returncode == 1 and "422 unprocessable" in p.stderr and "srv06" in p.stderr
    p = ctl("plan", "--servers", 8, "--devices", 6)
    assert (p.returncode, p.stderr) == (1, "ofcctl: 422 infeasible: 8 servers need 7 devices per server, each has 6\n")
    assert ctl("server", "get", "nosuch").returncode == 1
    assert ctl("ocs", "cross-connects", "nosuch").returncode == 1
    assert ctl("device", "fail", "srv0", 99).returncode == 1


def test_wait_outcomes_exit_3(ctl, demo):
    # Switching takes 2 s: a half-second wait answers with the state of the moment.
    for unit in ("ocs0", "ocs1"):
        assert demo.post(f"/v1/ocs/{unit}/faults", {"kind": "delay", "count": 2000}).status_code == 200
    p = ctl("fabric", "create", "slow", "srv[1-3]", "--wait", "0.5")
    assert p.returncode == 3
    assert kv(p.stdout)["state"] in ("pending", "applying")
    assert p.stderr.startswith("ofcctl: fabric slow is still ") and p.stderr.endswith(" after 0.5 s\n")
    p = ctl("fabric", "get", "slow", "--wait", "0.2")
    assert p.returncode == 3
    # Without --wait the state is reported, not judged.
    assert ctl("fabric", "get", "slow").returncode == 0
    assert ctl("fabric", "get", "slow", "--wait", "10").returncode == 0
    p = ctl("fabric", "delete", "slow", "--wait", "0.3")
    assert (p.returncode, p.stdout) == (3, "fabric slow: removing\n")
    assert p.stderr == "ofcctl: fabric slow is still removing after 0.3 s\n"
    for unit in ("ocs0", "ocs1"):
        demo.post(f"/v1/ocs/{unit}/faults", {"kind": "delay", "count": 0})

    # Degraded: every pair not joined is not what a job asked for. The servers of slow are
    # free once the units dropped its circuits (409 in_use until then).
    deadline = time.time() + 10
    while (p := ctl("fabric", "create", "all", "srv[0-7]", "--wait", "10")).returncode == 1:
        assert "409 in_use" in p.stderr and time.time() < deadline
        time.sleep(0.1)
    assert p.returncode == 0, p.stderr
    for d in (0, 6, 7):
        p = ctl("device", "fail", "srv0", d)
        assert p.returncode == 0 and p.stdout.startswith(f"srv0 device {d}: failed (changed)\n")
    p = ctl("fabric", "get", "all", "--wait", "10")
    assert p.returncode == 3 and kv(p.stdout)["state"] == "degraded"
    assert "ofcctl: fabric all is degraded: 2 pairs of servers have no circuit" in p.stderr
    assert kv(p.stdout)["missing"] == "srv0-srv1 srv0-srv7"
    p = ctl("-o", "json", "device", "ok", "srv0", 0)
    assert p.returncode == 0 and json.loads(p.stdout)["changed"] is True
    assert ctl("fabric", "delete", "all", "--wait", "10").returncode == 0

    # Failed: a unit refuses every batch.
    demo.post("/v1/ocs/ocs0/faults", {"kind": "fail_batches", "count": 100})
    p = ctl("fabric", "create", "bad", "srv[1-3]", "--wait", "20")
    assert p.returncode == 3 and kv(p.stdout)["state"] == "failed"
    assert "ofcctl: fabric bad failed: OCS unit ocs0: " in p.stderr


@pytest.mark.parametrize("args,why", [
    ([], "usage: ofcctl"),
    (["nosuch"], "unknown command \"nosuch\""),
    (["fabric"], "\"fabric\" needs a command"),
    (["fabric", "frob"], "unknown command \"fabric frob\""),
    (["fabric", "create", "a"], "usage: ofcctl fabric create NAME HOSTLIST"),
    (["fabric", "list", "x"], "fabric list takes no arguments"),
    (["fabric", "list", "--wait", "3"], "fabric list does not take --wait"),
    (["fabric", "create", "a", "srv[0-4"], "bad host list: unbalanced \"[\""),
    (["fabric", "create", "a", "srv0-4]"], "bad host list: unbalanced \"]\""),
    (["fabric", "create", "a", "srv[4-0]"], "bad host list: reversed range \"4-0\""),
    (["fabric", "create", "a", "srv0,,srv1"], "bad host list: empty name"),
    (["fabric", "create", "a", "srv0,"], "bad host list: empty name"),
    (["fabric", "create", "a", "srv[]"], "bad host list: bad range"),
    (["fabric", "create", "a", "srv[1,x]"], "bad host list: bad range"),
    (["fabric", "create", "a", "srv0", "--wait", "61"], "--wait must be a number of seconds from 0 to 60"),
    (["fabric", "delete", "a", "--wait", "soon"], "--wait must be"),
    (["-o", "yaml", "health"], "-o takes table or json"),
    (["plan", "--servers", "3"], "plan needs --servers and --devices"),
    (["plan", "--servers", "x", "--devices", "3"], "--servers needs a whole number"),
    (["device", "fail", "srv0", "1.5"], "device index must be a whole number"),
    (["device", "fail", "srv0", "one"], "device index must be a whole number"),
    (["topology", "put", "/nonexistent/topo.json"], "No such file"),
    (["--bogus", "health"], "unrecognized option"),
])
def test_usage_exit_2(ctl, demo, args, why):
    p = ctl(*args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert why in p.stderr
    assert p.stdout == ""
    assert demo.get("/v1/fabrics").json()["fabrics"] == []


def test_hostlist_products_in_order(tmp_path):
    """r[1-2]n[1-3] expands leftmost slowest, through topology put and fabric create."""
    d = Daemon(tmp_path).start()
    try:
        ctl = Ctl(tmp_path, d.url(""))
        names = [f"r{r}n{n}" for r in (1, 2) for n in (1, 2, 3)]
        topo = {"ocs": [{"name": "o", "driver": "sim", "ports": 64}], "switches": [],
                "servers": [{"name": n, "devices": 8} for n in reversed(names)],
                "wiring": {"rule": "plane-per-ocs"}}
        f = tmp_path / "topo.json"
        f.write_text(json.dumps(topo))
        p = ctl("topology", "put", f)
        assert (p.returncode, p.stdout) == (0, "topology: 1 OCS units, 6 servers, 0 switches\n"), p.stderr
        p = ctl("-o", "json", "fabric", "create", "t", "r[1-2]n[1-3]", "--wait", "10")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["servers"] == names
        p = ctl("fabric", "list")
        assert rows(p.stdout)[1][-1] == "r1n[1-3],r2n[1-3]"
    finally:
        d.stop()


def test_topology_ocs_servers(ctl, demo, tmp_path):
    p = ctl("topology", "get")
    assert p.returncode == 0
    blocks = p.stdout.split("\n\n")
    assert rows(blocks[0]) == [["NAME", "DRIVER", "PORTS", "ENDPOINT"], ["ocs0", "sim", "64", "-"], ["ocs1", "sim", "64", "-"]]
    assert len(rows(blocks[1])) == 9 and rows(blocks[1])[1][0] == "srv0"
    assert kv(blocks[-1]) == {"wiring": "rule plane-per-ocs"}
    p = ctl("-o", "json", "topology", "get")
    assert p.stdout == demo.get("/v1/topology").text
    # Round trip: what get prints (-o json), put takes, from a file or standard input.
    f = tmp_path / "t.json"
    f.write_text(p.stdout)
    assert ctl("topology", "put", f).stdout == "topology: 2 OCS units, 8 servers, 0 switches\n"
    p = ctl("-o", "json", "topology", "put", "-", stdin=p.stdout)
    assert p.returncode == 0 and len(json.loads(p.stdout)["servers"]) == 8
    p = ctl("topology", "put", "-", stdin="{not json")
    assert p.returncode == 1 and "400 invalid_json" in p.stderr

    assert ctl("fabric", "create", "x", "srv0", "srv1", "--wait", "10").returncode == 0
    p = ctl("ocs", "list")
    assert rows(p.stdout)[1] == ["ocs0", "sim", "64", "-"]
    assert ctl("-o", "json", "ocs", "list").stdout == demo.get("/v1/ocs").text
    p = ctl("ocs", "get", "ocs0")
    assert kv(p.stdout)["state"] == "connected" and kv(p.stdout)["in_sync"] == "yes"
    assert ctl("-o", "json", "ocs", "get", "ocs0").stdout == demo.get("/v1/ocs/ocs0").text
    xc = demo.get("/v1/ocs/ocs0/cross-connects").json()
    p = ctl("ocs", "cross-connects", "ocs0")
    assert kv(p.stdout)["in_sync"] == "yes"
    table = rows(p.stdout.split("\n\n", 1)[1])
    assert table[0] == ["PORT_A", "PORT_B", "DESIRED", "ACTUAL"]
    assert [[int(r[0]), int(r[1])] for r in table[1:]] == xc["desired"] and len(xc["desired"]) == 1
    assert all(r[2:] == ["yes", "yes"] for r in table[1:])
    p = ctl("-o", "json", "ocs", "cross-connects", "ocs1")
    assert p.stdout == demo.get("/v1/ocs/ocs1/cross-connects").text

    p = ctl("server", "list")
    t = rows(p.stdout)
    assert t[0] == ["NAME", "DEVICES", "PORTS/DEVICE", "P2P", "INTRA", "OFFLOAD", "SWITCH", "FABRIC", "STALE"]
    assert t[1] == ["srv0", "8", "1", "no", "full-mesh", "no", "-", "x", "no"]
    assert t[3][7] == "-"
    assert ctl("-o", "json", "server", "list").stdout == demo.get("/v1/servers").text
    p = ctl("server", "get", "srv0")
    assert kv(p.stdout)["fabric"] == "x"
    devices = rows(p.stdout.split("\n\n", 1)[1])
    assert devices[0] == ["DEVICE", "STATE", "PORTS"] and devices[1] == ["0", "ok", "0:ocs0/1"]
    assert ctl("-o", "json", "server", "get", "srv0").stdout == demo.get("/v1/servers/srv0").text

    p = ctl("device", "fail", "srv1", 3)
    assert p.returncode == 0
    assert rows(p.stdout)[1:] == [["FABRIC", "STATE", "REVISION", "MISSING"], ["x", "pending", "2", "0"]]
    assert demo.get("/v1/servers/srv1").json()["device_info"][3]["state"] == "failed"
    p = ctl("device", "ok", "srv1", 3)
    assert p.stdout.startswith("srv1 device 3: ok (changed)")
    assert ctl("device", "ok", "srv1", 3).stdout.startswith("srv1 device 3: ok (unchanged)")


def test_plan_and_operations(ctl, demo):
    p = ctl("plan", "--servers", 4, "--devices", 3)
    assert p.returncode == 0
    assert kv(p.stdout)["min_devices"] == "3" and kv(p.stdout)["feasible"] == "yes"
    assert len(rows(p.stdout.split("\n\n", 1)[1])) == 1 + 6
    p = ctl("-o", "json", "plan", "--servers", 4, "--devices", 3, "--ports-per-device", 2, "--formula", "1")
    body = json.loads(p.stdout)
    assert (body["ports_per_device"], body["formula"], body["planes"]) == (2, "1", 4)

    assert ctl("fabric", "create", "a", "srv[0-2]", "--wait", "10").returncode == 0
    assert ctl("fabric", "create", "b", "srv[3-4]", "--wait", "10").returncode == 0
    p = ctl("operations")
    t = rows(p.stdout)
    assert t[0] == ["ID", "OCS", "TRIGGER", "ADDS", "DELETES", "STATUS", "STARTED", "ENDED", "FABRICS", "ERROR"]
    assert len(t) - 1 == len(demo.get("/v1/operations").json()["operations"]) >= 2
    p = ctl("-o", "json", "operations", "--fabric", "b", "--ocs", "ocs0", "--limit", 1)
    assert p.stdout == demo.get("/v1/operations?fabric=b&ocs=ocs0&limit=1").text
    assert [o["fabrics"] for o in json.loads(p.stdout)["operations"]] == [["b"]]
    p = ctl("operations", "--limit", 0)
    assert p.returncode == 1 and "400 invalid_field" in p.stderr


def read_until(proc, pred, timeout=10):
    """Lines from proc's stdout until one satisfies pred; all of them."""
    got = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        got.append(line)
        if pred(line):
            return got
    raise AssertionError(f"not seen in {got}")


def test_events(tmp_path, ctl, demo):
    argv = [OFCCTL_BIN, "--url", demo.url("")]
    table = subprocess.Popen(argv + ["events"], stdout=subprocess.PIPE, text=True, env=ctl.env())
    js = subprocess.Popen(argv + ["-o", "json", "events", "--fabric", "e"], stdout=subprocess.PIPE,
                          text=True, env=ctl.env())
    try:
        time.sleep(0.3)  # both subscribed
        assert ctl("fabric", "create", "other", "srv[6-7]", "--wait", "10").returncode == 0
        assert ctl("fabric", "create", "e", "srv[0-1]", "--wait", "10").returncode == 0
        lines = read_until(table, lambda l: "fabric_state fabric=e state=applied" in l)
        assert any(" operation " in l and "fabrics=other" in l for l in lines)
        assert all(l.split()[0].endswith("Z") for l in lines)
        lines = read_until(js, lambda l: json.loads(l)["data"].get("state") == "applied")
        events = [json.loads(l) for l in lines]
        assert {e["event"] for e in events} <= {"operation", "fabric_state"}
        assert all(e["data"].get("fabric", "e") == "e" and "other" not in e["data"].get("fabrics", []) for e in events)
        # Ids are INSTANCE-N: the daemon's run, then the event's number in it.
        assert len({e["id"].rsplit("-", 1)[0] for e in events}) == 1
        assert all(int(e["id"].rsplit("-", 1)[1]) > 0 for e in events)
        # The stream ends with the daemon: exit 0.
        demo.stop()
        assert table.wait(timeout=10) == 0 and js.wait(timeout=10) == 0
    finally:
        for p in (table, js):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_tokens(tmp_path):
    d = Daemon(tmp_path, tokens=True, args=("--demo",)).start()
    try:
        ctl = Ctl(tmp_path, d.url(""))
        admin, reader, bad = tmp_path / "admin.token", tmp_path / "reader.token", tmp_path / "bad.token"
        admin.write_text(ADMIN + "\n")
        reader.write_text(f"  {READER}  \n")
        bad.write_text("not-the-secret-at-all\n")
        p = ctl("fabric", "list")
        assert p.returncode == 1 and p.stderr.startswith("ofcctl: 401 unauthorized: ")
        p = ctl("--token-file", bad, "fabric", "list")
        assert p.returncode == 1 and p.stderr.startswith("ofcctl: 401 unauthorized: ")
        p = ctl("--token-file", reader, "fabric", "list")
        assert p.returncode == 0, p.stderr
        p = ctl("--token-file", reader, "fabric", "create", "a", "srv0")
        assert p.returncode == 1 and p.stderr.startswith("ofcctl: 403 forbidden: ")
        p = ctl("--token-file", admin, "fabric", "create", "a", "srv0", "--wait", "10")
        assert p.returncode == 0, p.stderr
        assert ctl("health").returncode == 0  # open without a token
        # A token file that is missing or empty is a usage error: nothing is sent.
        p = ctl("--token-file", tmp_path / "none", "health")
        assert p.returncode == 2 and "No such file" in p.stderr
        (tmp_path / "empty").write_text("\n")
        p = ctl("--token-file", tmp_path / "empty", "health")
        assert p.returncode == 2 and "is empty" in p.stderr
    finally:
        d.stop()


class Redirector(http.server.ThreadingHTTPServer):
    """Answers every request with 307 to the same path on target, or with status 500."""

    def __init__(self, target=None):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                outer.seen.append(self.headers.get("Authorization"))
                if outer.target:
                    self.send_response(307)
                    self.send_header("Location", outer.target + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    body = b"<html>proxy error</html>\n"
                    self.send_response(500)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = answer

            def log_message(self, *a):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.target = target
        self.seen = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


def test_redirects_and_server_errors(tmp_path):
    (tmp_path / "open").mkdir()
    (tmp_path / "auth").mkdir()
    d = Daemon(tmp_path / "open", args=("--demo",)).start()
    a = Daemon(tmp_path / "auth", tokens=True, args=("--demo",)).start()
    token = tmp_path / "t"
    token.write_text(ADMIN)
    servers = []
    try:
        # A 307 keeps the method and the body.
        r = Redirector(d.url(""))
        servers.append(r)
        ctl = Ctl(tmp_path, r.url())
        p = ctl("fabric", "create", "via", "srv[0-1]", "--wait", "10")
        assert p.returncode == 0, p.stderr
        assert d.get("/v1/fabrics/via").json()["state"] == "applied"
        # The token goes to the host and port it was given for, not to where a redirect points.
        r = Redirector(a.url(""))
        servers.append(r)
        p = ctl("--url", r.url(), "--token-file", token, "fabric", "list")
        assert p.returncode == 1 and "401 unauthorized" in p.stderr
        assert r.seen == [f"Bearer {ADMIN}"]
        # 5xx: exit 4, with the first line of a body that is not ofcd's.
        r = Redirector(None)
        servers.append(r)
        p = ctl("--url", r.url(), "health")
        assert (p.returncode, p.stderr) == (4, "ofcctl: 500: <html>proxy error</html>\n")
    finally:
        for r in servers:
            r.shutdown()
            r.server_close()
        d.stop()
        a.stop()


def test_unreachable_exit_4(tmp_path):
    ctl = Ctl(tmp_path, f"http://127.0.0.1:{free_port()}")
    p = ctl("fabric", "list")
    assert p.returncode == 4 and p.stderr.startswith("ofcctl: cannot reach the daemon: ")
    p = ctl("--url", "http://127.0.0.1:1/", "events")
    assert p.returncode == 4
    p = ctl("--url", "ftp://127.0.0.1/", "health")
    assert p.returncode == 4


def test_url_and_token_sources(tmp_path):
    d = Daemon(tmp_path, tokens=True, args=("--demo",)).start()
    try:
        ctl = Ctl(tmp_path)  # no --url
        dead = f"http://127.0.0.1:{free_port()}"
        admin, reader = tmp_path / "admin.token", tmp_path / "reader.token"
        admin.write_text(ADMIN)
        reader.write_text(READER)
        write = ("fabric", "create", "w", "srv0")

        # Environment.
        env = {"OFCCTL_URL": d.url(""), "OFCCTL_TOKEN_FILE": str(reader)}
        assert ctl("fabric", "list", env=env).returncode == 0
        assert ctl(*write, env=env).returncode == 1  # a read token
        # Flags beat the environment.
        assert ctl("--token-file", admin, *write, env=env).returncode == 0
        assert ctl("--url", dead, "fabric", "list", env=env).returncode == 4

        # The user's file; the environment beats it.
        cfg = ctl.home / ".config"
        cfg.mkdir()
        (cfg / "ofcctl.ini").write_text(f"# ofcctl\n[ofcctl]\nurl = {d.url('')}\ntoken_file = {admin}\n")
        p = ctl("fabric", "get", "w")
        assert p.returncode == 0, p.stderr
        assert ctl("fabric", "delete", "w").returncode == 0
        assert ctl(*write, env={"OFCCTL_TOKEN_FILE": str(reader)}).returncode == 1
        assert ctl("fabric", "list", env={"OFCCTL_URL": dead}).returncode == 4
        # XDG_CONFIG_HOME moves the user's file.
        xdg = tmp_path / "xdg"
        xdg.mkdir()
        (xdg / "ofcctl.ini").write_text(f"[ofcctl]\nurl = {dead}\n")
        assert ctl("fabric", "list", env={"XDG_CONFIG_HOME": str(xdg)}).returncode == 4
        # A broken file is a usage error naming the file and line.
        (cfg / "ofcctl.ini").write_text("[ofcctl]\nurl = x\ntoken = y\n")
        p = ctl("health")
        assert p.returncode == 2
        assert p.stderr == f"ofcctl: {cfg / 'ofcctl.ini'}:3: [ofcctl] token: unknown key\n"
        (cfg / "ofcctl.ini").write_text("[other]\nurl = x\n")
        assert "unknown section [other]" in ctl("health").stderr
    finally:
        d.stop()
