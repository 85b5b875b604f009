"""ofcctl against a real daemon: every command in its output forms, the exit codes, host lists,
tokens, redirects, an unreachable daemon, where the URL and token come from, --watch, and the
bash completion in a real bash."""
import contextlib
import http.server
import json
import os
import re
import signal
import socket
import sqlite3
import stat
import subprocess
import threading
import time

import pytest
import yaml

from conftest import (ADMIN, READER, Daemon, LoopbackServer, free_port, open_connections,
                      wait_for)

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
    assert info["missing"] == "none" and info["topology"] == "full-mesh" and "shape" not in info
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
    assert rows(p.stdout) == [["NAME", "STATE", "REVISION", "CIRCUITS", "MISSING", "TOPOLOGY", "SERVERS"],
                              ["job-a", "applied", "1", "6", "0", "full-mesh", "srv[0-2,4]"],
                              ["job-b", "applied", "1", "3", "0", "full-mesh", "srv[5-7]"]]
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
    p = ctl("plan", "--servers", 8, "--devices", 6, "--topology", "full-mesh")
    assert (p.returncode, p.stderr) == (1, "ofcctl: 422 infeasible: 8 servers need 7 devices per server, each has 6\n")
    assert ctl("server", "get", "nosuch").returncode == 1
    assert ctl("ocs", "cross-connects", "nosuch").returncode == 1
    assert ctl("device", "fail", "srv0", 99).returncode == 1


def test_wait_outcomes_exit_3(ctl, demo):
    # Switching takes 4 s: a half-second wait answers with the state of the moment, and the
    # second short wait below still comes before the end however slowly ofcctl starts.
    for unit in ("ocs0", "ocs1"):
        assert demo.post(f"/v1/ocs/{unit}/faults", {"kind": "delay", "count": 4000}).status_code == 200
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
    # Its servers' ports are still joined to each other until the units drop the circuits.
    p = ctl("server", "get", "srv1", "--wait", "0.2")
    assert p.returncode == 3 and re.search(r"\njoined: device \d+ port 0: OCS unit ocs\d still "
                                           r"joins port \d+ to port \d+ \(a circuit of fabric "
                                           r"slow\)\n", p.stdout), p.stdout
    assert re.fullmatch(r"ofcctl: server srv1: \d+ ports? still joined to another server after "
                        r"0\.2 s\n", p.stderr), p.stderr
    assert ctl("server", "get", "srv1").returncode == 0  # reported, not judged
    p = ctl("server", "list", "--joined")
    assert p.returncode == 0 and rows(p.stdout)[0][0] == "NAME", p.stdout
    assert "srv1" in [r[0] for r in rows(p.stdout)] and "\njoined: srv1 device " in p.stdout
    p = ctl("server", "list", "--joined", "-w")
    assert p.returncode == 2 and "--joined and --watch exclude each other" in p.stderr
    for unit in ("ocs0", "ocs1"):
        demo.post(f"/v1/ocs/{unit}/faults", {"kind": "delay", "count": 0})
    p = ctl("server", "get", "srv1", "--wait", "20")
    assert p.returncode == 0 and "joined:" not in p.stdout, (p.stdout, p.stderr)
    p = ctl("server", "get", "srv1", "--wait", "2", "-w")
    assert p.returncode == 2 and "--wait and --watch exclude each other" in p.stderr

    # Degraded: every pair not joined is not what a job asked for. The servers of slow are
    # free once the units dropped its circuits (409 in_use until then).
    deadline = time.time() + 20
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
    (["-o", "xml", "health"], "-o takes table, wide, json or yaml, got \"xml\""),
    (["plan", "--servers", "3"], "plan needs --servers and --devices"),
    (["plan", "--servers", "x", "--devices", "3"], "--servers needs a whole number"),
    (["device", "fail", "srv0", "1.5"], "device index must be a whole number"),
    (["device", "fail", "srv0", "one"], "device index must be a whole number"),
    (["topology", "put", "/nonexistent/topo.json"], "No such file"),
    (["--bogus", "health"], "unrecognized option \"--bogus\""),
    (["fabric", "list", "-x"], "unrecognized option \"-x\""),
    (["health", "--wait"], "option --wait needs a value"),
    (["fabric", "list", "--force"], "fabric list does not take --force"),
    (["switch", "list", "-w"], "switch list does not take --watch"),
    (["fabric", "get", "a", "-w", "--wait", "1"], "--wait and --watch exclude each other"),
    (["fabric", "list", "-w", "--consistent"], "--consistent and --watch exclude each other"),
    (["fabric", "delete", "a", "--if-match", ""], "--if-match takes a tag"),
    (["ocs", "create", "o", "--ports", "many"], "--ports needs a whole number, got \"many\""),
    (["ocs", "create", "o", "-f", "/nonexistent.json"], "No such file"),
    (["topology", "put", "-", "--force", "--if-match", "1"], "--force and --if-match exclude each other"),
    (["apply", "/nonexistent.json"], "No such file"),
    (["cluster", "snapshot", "save", "/nonexistent/dir/x.db"], "No such file"),
    (["cluster", "snapshot"], "unknown command \"cluster snapshot\""),
    (["completion", "zsh"], "no script for shell \"zsh\""),
    (["fabric", "create", "a", "srv0", "--shape", "4x"], "--shape takes the grid's sizes joined by x"),
    (["fabric", "list", "--topology", "torus"], "fabric list does not take --topology"),
    (["fabric", "get", "a", "--traffic", "mixed"], "fabric get does not take --traffic"),
    (["cost"], "\"cost\" needs a command"),
    (["cost", "calibrate", "x", "/dev/null", "--servers", "4"],
     "/dev/null is not JSON, so it is read as nccl-tests output, which needs --collective, "
     "--algorithm, --servers and --devices (missing --collective, --algorithm, --devices), "
     "or a line \"# ofcd: collective=C algorithm=A servers=N devices=D\""),
    (["cost", "calibrate", "x", "-", "--in-place"],
     "standard input is JSON: --in-place is for a file of nccl-tests output"),
    (["cost", "calibrate", "x", "-", "--fit", "alpha_us,,launch_us"],
     "--fit takes term names joined by commas, got \"alpha_us,,launch_us\""),
    (["cost", "calibrate", "x"], "cost calibrate needs a FILE of runs, or --collected"),
    (["cost", "runs", "--fit", "alpha_us"], "cost runs does not take --fit"),
    (["cost", "params", "a", "b"], "cost params: wrong number of arguments"),
    (["cost", "activate", "a", "--activate"], "cost activate does not take --activate"),
    (["cost", "delete", "a", "--fit", "alpha_us"], "cost delete does not take --fit"),
])
def test_usage_exit_2(ctl, demo, args, why):
    p = ctl(*args, stdin="{}")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert why in p.stderr
    # Messages name the program as ofcctl, not as it was called (build/ofcctl).
    assert p.stderr.startswith(("ofcctl: ", "usage: ofcctl")) and "build/" not in p.stderr
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
    # The version to give --if-match follows: the topology's ETag.
    assert kv(blocks[-1]) == {"wiring": "rule plane-per-ocs", "version": demo.get("/v1/topology").headers["ETag"]}
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
    assert wait_for(lambda: open_connections(demo) == 1)  # its own alone: no earlier probe left
    table = subprocess.Popen(argv + ["events"], stdout=subprocess.PIPE, text=True, env=ctl.env())
    js = subprocess.Popen(argv + ["-o", "json", "events", "--fabric", "e"], stdout=subprocess.PIPE,
                          text=True, env=ctl.env())
    try:
        # Both subscribed: their connections taken (the daemon subscribes a stream as it reads
        # its request, sent with the connection), counted over demo's own connection.
        assert wait_for(lambda: open_connections(demo) >= 3), open_connections(demo)
        assert ctl("fabric", "create", "other", "srv[6-7]", "--wait", "10").returncode == 0
        assert ctl("fabric", "create", "e", "srv[0-1]", "--wait", "10").returncode == 0
        lines = read_until(table, lambda l: "fabric_state fabric=e state=applied" in l)
        assert any(" operation " in l and "fabrics=other" in l for l in lines)
        assert all(l.split()[0].endswith("Z") for l in lines)
        lines = read_until(js, lambda l: json.loads(l)["data"].get("state") == "applied")
        events = [json.loads(l) for l in lines]
        assert {e["event"] for e in events} <= {"fabric", "operation", "fabric_state"}
        assert events[0]["event"] == "fabric" and events[0]["data"]["change"] == "created"
        assert all(e["data"].get("fabric", "e") == "e" and "other" not in e["data"].get("fabrics", []) for e in events)
        # Ids are INSTANCE-N: the daemon's run, then the event's number in it.
        assert len({e["id"].rsplit("-", 1)[0] for e in events}) == 1
        assert all(int(e["id"].rsplit("-", 1)[1]) > 0 for e in events)
        # Stopped by the reader (^C, or its service manager): exit 0, as at the stream's end.
        table.send_signal(signal.SIGINT)
        assert table.wait(timeout=10) == 0
        # The stream ends with the daemon: exit 0.
        demo.stop()
        assert js.wait(timeout=10) == 0
    finally:
        for p in (table, js):
            if p.poll() is None:
                p.kill()
                p.wait()


def secret(path, text):
    """Writes a token file as it should be: readable by its owner only."""
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_tokens(tmp_path):
    d = Daemon(tmp_path, tokens=True, args=("--demo",)).start()
    try:
        ctl = Ctl(tmp_path, d.url(""))
        admin, reader, bad = tmp_path / "admin.token", tmp_path / "reader.token", tmp_path / "bad.token"
        secret(admin, ADMIN + "\n")
        secret(reader, f"  {READER}  \n")
        secret(bad, "not-the-secret-at-all\n")
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
        # A secret any user of the machine can read still works, but ofcctl says so.
        reader.chmod(0o644)
        p = ctl("--token-file", reader, "fabric", "list")
        assert p.returncode == 0, p.stderr
        assert p.stderr == (f"ofcctl: warning: {reader} holds a bearer token and any user of "
                            f"this machine can read it (mode 0644): chmod o-rwx {reader}\n")
        reader.chmod(0o640)
        p = ctl("--token-file", reader, "fabric", "list")
        assert p.returncode == 0 and p.stderr == "", p.stderr
    finally:
        d.stop()


class Redirector(LoopbackServer):
    """Answers every request with 307 to the same path on target (a list: its targets in
    turn, the last for good), or with status 500; with health, answers its own health
    probes as an ofcd follower does, health seconds late."""

    def __init__(self, target=None, health=None):
        outer = self
        targets = target if isinstance(target, list) else [target]

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                if health is not None and self.path == "/v1/health":
                    time.sleep(health)
                    self.send_response(200)
                    self.send_header("Content-Length", "15")
                    self.end_headers()
                    self.wfile.write(b'{"status":"ok"}')
                    return
                outer.seen.append(self.headers.get("Authorization"))
                outer.target = targets.pop(0) if len(targets) > 1 else targets[0]
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

        self.target = None
        self.seen = []
        super().__init__(Handler)


def test_redirects_and_server_errors(tmp_path):
    (tmp_path / "open").mkdir()
    (tmp_path / "auth").mkdir()
    d = Daemon(tmp_path / "open", args=("--demo",)).start()
    a = Daemon(tmp_path / "auth", tokens=True, args=("--demo",)).start()
    token = secret(tmp_path / "t", ADMIN)
    servers = []
    try:
        # A 307 keeps the method and the body.
        r = Redirector(d.url(""))
        servers.append(r)
        ctl = Ctl(tmp_path, r.url())
        p = ctl("fabric", "create", "via", "srv[0-1]", "--wait", "10")
        assert p.returncode == 0, p.stderr
        assert d.get("/v1/fabrics/via").json()["state"] == "applied"
        # The token goes to the host and port it was given for, not to where a redirect points
        # (after the 401 ofcctl asks the given host whether the other is its cluster's
        # leader or a member: a host that is not ofcd's cluster cannot say so).
        r = Redirector(a.url(""))
        servers.append(r)
        p = ctl("--url", r.url(), "--token-file", token, "fabric", "list")
        assert p.returncode == 1 and "401 unauthorized" in p.stderr
        assert r.seen and set(r.seen) == {f"Bearer {ADMIN}"}
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


class Hangup(threading.Thread):
    """Answers health probes, and reads every other request's headers, then closes the
    connection without an answer: a daemon killed while it handled the request, and at once
    back (it still takes connections, so a request sent again would be seen). With answer,
    the first other request gets a 200 on a connection kept open."""

    def __init__(self, answer=False):
        super().__init__(daemon=True)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.answer = answer
        self.requests = []  # the methods of the requests other than health probes
        self.start()

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        with c:
            while True:
                data = b""
                while b"\r\n\r\n" not in data and (chunk := c.recv(4096)):
                    data += chunk
                if not data:
                    return
                method, path = data.split(b" ", 2)[:2]
                if path == b"/v1/health":
                    c.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n'
                              b'Content-Length: 15\r\n\r\n{"status":"ok"}')
                    continue
                self.requests.append(method.decode())
                if not self.answer or len(self.requests) > 1:
                    return
                c.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n'
                          b'ETag: "v1"\r\nContent-Length: 2\r\n\r\n{}')

    def url(self):
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def test_members_in_turn_and_retry(tmp_path):
    """--url lists a cluster's members: a request none took goes to the next, then round
    again for --retry seconds; a write that may have been applied is not sent again."""
    for sub in ("d", "later"):
        (tmp_path / sub).mkdir()
    d = Daemon(tmp_path / "d", args=("--demo",)).start()
    later = Daemon(tmp_path / "later", args=("--demo",))
    hangup, answering = Hangup(), Hangup(answer=True)
    try:
        ctl = Ctl(tmp_path)
        dead = f"http://127.0.0.1:{free_port()}"
        p = ctl("--url", f"{dead},{d.url('')}", "fabric", "list")
        assert p.returncode == 0 and p.stderr == "", p.stderr
        # No member answers: one round, then rounds for the time given, noted once.
        p = ctl("--url", f"{dead},{dead}/", "health")
        assert p.returncode == 4 and "trying again" not in p.stderr, p.stderr
        started = time.monotonic()
        p = ctl("--url", dead, "health", env={"OFCCTL_RETRY": "1"})
        assert time.monotonic() - started >= 0.9
        assert p.returncode == 4 and p.stderr.count("trying again for up to") == 1, p.stderr
        # A member that takes connections and answers nothing (a paused machine) fails its
        # health probe: the write goes to the next member instead of waiting there for
        # nothing, its outcome unknown.
        with socket.create_server(("127.0.0.1", 0)) as frozen:
            p = ctl("--url", f"http://127.0.0.1:{frozen.getsockname()[1]},{d.url('')}",
                    "fabric", "create", "thawed", "srv[4-5]")
        assert p.returncode == 0, p.stderr
        assert d.get("/v1/fabrics/thawed").status_code == 200
        # A daemon that comes up while ofcctl waits takes the request.
        notes = tmp_path / "notes"
        with open(notes, "w") as err:
            waiting = subprocess.Popen([OFCCTL_BIN, "--url", later.url(""), "--retry", "120",
                                        "fabric", "create", "late", "srv[0-1]"], env=ctl.env(),
                                       stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            wait_for(lambda: "trying again" in notes.read_text(), timeout=30)
            later.start()
            assert waiting.wait(timeout=120) == 0, notes.read_text()
        finally:
            waiting.kill()
        assert later.get("/v1/fabrics/late").status_code == 200
        # A member that redirects to a leader that is frozen (a member given too): the
        # leader is probed before anything goes there, and the write waits for the next
        # leader, to which the member then redirects.
        with socket.create_server(("127.0.0.1", 0)) as frozen:
            leader = f"http://127.0.0.1:{frozen.getsockname()[1]}"
            follower = Redirector([leader, d.url("")], health=0)
            try:
                p = ctl("--url", f"{follower.url()},{leader}", "--retry", "30", "fabric",
                        "create", "led", "srv[6-7]")
            finally:
                follower.shutdown()
                follower.server_close()
            assert p.returncode == 0, p.stderr
            assert d.get("/v1/fabrics/led").status_code == 200
            assert follower.seen == [None, None]  # the write, redirected twice
            frozen.settimeout(1)
            sent = []
            with contextlib.suppress(TimeoutError):
                while True:
                    with frozen.accept()[0] as probe:
                        sent.append(b"")
                        while chunk := probe.recv(4096):
                            sent[-1] += chunk
            assert sent and all(x.startswith(b"GET /v1/health ") for x in sent), sent
        # A frozen member first in the list costs no probe's timeout (2 s) per call: the
        # members are asked together, and the first that answers takes the request.
        with socket.create_server(("127.0.0.1", 0)) as frozen:
            members = f"http://127.0.0.1:{frozen.getsockname()[1]},{d.url('')}"
            started = time.monotonic()
            for _ in range(4):
                assert ctl("--url", members, "fabric", "list").returncode == 0
            assert time.monotonic() - started < 4
        # Cut off after it was sent: a read goes on to the next member (here one slower to
        # answer its probe than the survey waits, asked again before the read goes there),
        # a write does not.
        slow = Redirector(d.url(""), health=1)
        try:
            p = ctl("--url", f"{hangup.url()},{slow.url()}", "fabric", "list")
        finally:
            slow.shutdown()
            slow.server_close()
        assert p.returncode == 0 and hangup.requests == ["GET"] and slow.seen, p.stderr
        p = ctl("--url", f"{hangup.url()},{dead}", "--retry", "30", "fabric", "create", "cut",
                "srv[2-3]")
        assert p.returncode == 4 and "trying again" not in p.stderr, p.stderr
        assert hangup.requests == ["GET", "POST"]
        # The PUT after the GET that read the version, cut off too, is sent once: not again
        # by ofcctl, nor by libcurl, which does so itself when a kept connection (the GET's)
        # drops a request.
        topo = tmp_path / "topology.json"
        topo.write_text(json.dumps(d.get("/v1/topology").json()))
        p = ctl("--url", f"{answering.url()},{dead}", "--retry", "30", "topology", "put", topo)
        assert p.returncode == 4 and "trying again" not in p.stderr, p.stderr
        assert answering.requests == ["GET", "PUT"]
        # Settings that are not numbers of seconds, or lists with a hole, are usage errors.
        for args, env, why in (
                (("--retry", "-1"), {}, '--retry: seconds from 0 to 3600, got "-1"'),
                ((), {"OFCCTL_RETRY": "soon"}, 'OFCCTL_RETRY: seconds from 0 to 3600, got "soon"'),
                (("--url", f"{dead},,{dead}"), {}, "has an empty member")):
            p = ctl(*args, "health", env=env)
            assert p.returncode == 2 and why in p.stderr, p.stderr
        cfg = ctl.home / ".config"
        cfg.mkdir()
        (cfg / "ofcctl.ini").write_text(f"[ofcctl]\nurl = {dead}, {d.url('')}\nretry = 1h\n")
        p = ctl("health")
        assert p.returncode == 2 and ":3: [ofcctl] retry: seconds from 0 to 3600" in p.stderr
        (cfg / "ofcctl.ini").write_text(f"[ofcctl]\nurl = {dead}, {d.url('')}\nretry = 2.5\n")
        assert ctl("health").returncode == 0
    finally:
        hangup.close()
        answering.close()
        later.stop()
        d.stop()


def test_url_and_token_sources(tmp_path):
    d = Daemon(tmp_path, tokens=True, args=("--demo",)).start()
    try:
        ctl = Ctl(tmp_path)  # no --url
        dead = f"http://127.0.0.1:{free_port()}"
        admin, reader = tmp_path / "admin.token", tmp_path / "reader.token"
        secret(admin, ADMIN)
        secret(reader, READER)
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


# ---- output forms -------------------------------------------------------------------------

def test_yaml_is_the_json(ctl, demo):
    """-o yaml prints the daemon's JSON as YAML: a YAML reader gets the same document."""
    assert ctl("fabric", "create", "y", "srv[0-2]", "--wait", "10").returncode == 0
    demo.put("/v1/servers/srv1/devices/2", {"state": "failed"})
    for args in (["fabric", "list"], ["fabric", "get", "y"], ["topology", "get"], ["wiring", "get"],
                 ["server", "list"], ["server", "get", "srv1"], ["ocs", "get", "ocs0"],
                 ["ocs", "cross-connects", "ocs0"], ["operations"], ["cluster", "status"],
                 ["plan", "--servers", 3, "--devices", 3], ["switch", "list"]):
        js, ya = ctl("-o", "json", *args), ctl("-o", "yaml", *args)
        assert js.returncode == ya.returncode == 0, (args, ya.stderr)
        assert yaml.safe_load(ya.stdout) == json.loads(js.stdout), args
    # A refusal's body goes to stdout in the form asked, the message to stderr.
    p = ctl("-o", "yaml", "fabric", "get", "nosuch")
    assert p.returncode == 1 and yaml.safe_load(p.stdout)["error"]["code"] == "not_found"
    assert p.stderr == "ofcctl: 404 not_found: no fabric nosuch\n"


class Canned(LoopbackServer):
    """Answers every GET with one canned JSON body."""

    def __init__(self, body):
        data = json.dumps(body).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        super().__init__(Handler)


def test_yaml_quotes_what_needs_it(tmp_path):
    """Strings a YAML reader would take for something else come back as the same strings."""
    strings = ["yes", "No", "on", "null", "~", "", " lead", "trail ", "a: b", "#x", "- x", "1.5", "0x10",
               "1e3", "2026-11-21", "12:30", ".inf", "y", "-", "*ref", "&a", "!tag", "%d", "@", "`",
               "{}", "[a]", "a,b", "'q'", '"dq"', "back\\slash", "tab\there", "line\nbreak", "cr\r",
               "nel\u0085", "ls\u2028", "bom\ufeff", "del\x7f", "bell\x07", "é", "漢字", "😀",
               "plain", "/v1/fabrics", "srv-0.a_b"]
    body = {"strings": strings, "keys": {s: i for i, s in enumerate(strings)},
            "numbers": [0, -7, 2 ** 53, 0.1, 1e20, -2.5e-10, 3.0, 1e-300, 123456789.125], "flags": [True, False, None],
            "empty": {"o": {}, "a": []}, "nested": [[1, [2, []]], [{"a": [{}]}], {"k": [[]]}]}
    srv = Canned(body)
    try:
        p = Ctl(tmp_path, srv.url())("-o", "yaml", "health")
        assert p.returncode == 0, p.stderr
        assert yaml.safe_load(p.stdout) == body, p.stdout
    finally:
        srv.shutdown()
        srv.server_close()


def test_wide_adds_columns(ctl, demo):
    assert ctl("fabric", "create", "w", "srv[0-1]", "--wait", "10").returncode == 0
    demo.put("/v1/servers/srv3/devices/4", {"state": "failed"})
    t = rows(ctl("-o", "wide", "fabric", "list").stdout)
    assert t == [["NAME", "STATE", "REVISION", "CIRCUITS", "MISSING", "MIN_DEVICES", "TOPOLOGY", "DIAMETER",
                  "DEGREE", "ERROR", "SERVERS"],
                 ["w", "applied", "1", "1", "0", "1", "full-mesh", "-", "-", "-", "srv[0-1]"]]
    t = rows(ctl("-o", "wide", "server", "list").stdout)
    assert t[0][-1] == "FAILED" and t[4] == ["srv3", "8", "1", "no", "full-mesh", "no", "-", "-", "no", "4"]
    assert rows(ctl("server", "list").stdout)[0][-1] == "STALE"
    demo.post("/v1/switches", {"name": "sw", "offload": True})
    assert rows(ctl("-o", "wide", "switch", "list").stdout) == [
        ["NAME", "AGGREGATING", "OFFLOAD", "BUFFER", "WINDOW", "SERVERS"], ["sw", "no", "yes", "-", "-", "-"]]
    # Where the reply has nothing more, wide is the table.
    assert ctl("-o", "wide", "ocs", "list").stdout == ctl("ocs", "list").stdout


# ---- version, cluster, audit -----------------------------------------------------------------

def test_version(ctl, demo, tmp_path):
    server = demo.get("/v1/health").json()["version"]
    client = ctl("--version").stdout.split()[1]
    p = ctl("version")
    assert p.returncode == 0 and kv(p.stdout) == {"client": client, "server": server}
    p = ctl("-o", "json", "version")
    assert json.loads(p.stdout) == {"client": client, "server": server}
    # No daemon: the client's version all the same, exit 4.
    dead = f"http://127.0.0.1:{free_port()}"
    p = ctl("--url", dead, "version")
    assert p.returncode == 4 and kv(p.stdout) == {"client": client, "server": "-"}
    assert p.stderr.startswith("ofcctl: cannot reach the daemon: ")
    p = ctl("--url", dead, "-o", "json", "version")
    assert p.returncode == 4 and json.loads(p.stdout) == {"client": client, "server": None}


def test_cluster_and_snapshot(ctl, demo, tmp_path):
    p = ctl("cluster", "status")
    assert p.returncode == 0
    assert kv(p.stdout) == {"self": "-", "role": "standalone", "leader": "-", "generation": "0",
                            "revision": "0", "applied_revision": "0", "etcd_reachable": "no",
                            "members": "0"}
    assert ctl("-o", "json", "cluster", "status").stdout == demo.get("/v1/cluster").text
    p = ctl("cluster", "members")
    assert p.returncode == 0 and rows(p.stdout) == [["NAME", "ROLE", "APPLIED_REVISION", "ADVERTISE"]]
    assert json.loads(ctl("-o", "json", "cluster", "members").stdout) == {"members": []}

    assert ctl("fabric", "create", "keep", "srv[0-1]", "--wait", "10").returncode == 0
    f = tmp_path / "backup.db"
    f.write_text("an older backup")
    p = ctl("cluster", "snapshot", "save", f)
    assert p.returncode == 0, p.stderr
    size = f.stat().st_size
    assert p.stdout == f"snapshot saved to {f} ({size} bytes)\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and not (tmp_path / "backup.db.tmp").exists()
    db = sqlite3.connect(f)
    try:
        assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)
        assert db.execute("SELECT name FROM fabric").fetchall() == [("keep",)]
    finally:
        db.close()
    p = ctl("-o", "json", "cluster", "snapshot", "save", tmp_path / "b2.db")
    assert json.loads(p.stdout) == {"file": str(tmp_path / "b2.db"), "bytes": (tmp_path / "b2.db").stat().st_size}


def test_snapshot_needs_admin(tmp_path):
    d = Daemon(tmp_path, tokens=True, args=("--demo",)).start()
    try:
        reader = secret(tmp_path / "reader.token", READER)
        f = tmp_path / "s.db"
        p = Ctl(tmp_path, d.url(""))("--token-file", reader, "cluster", "snapshot", "save", f)
        assert p.returncode == 1 and p.stderr.startswith("ofcctl: 403 forbidden: ")
        assert not f.exists() and not (tmp_path / "s.db.tmp").exists()
    finally:
        d.stop()


def test_audit(ctl, demo):
    assert ctl("fabric", "create", "a1", "srv0").returncode == 0
    assert ctl("fabric", "create", "a1", "srv1").returncode == 1
    p = ctl("audit")
    t = rows(p.stdout)
    assert t[0] == ["ID", "AT", "TOKEN", "CLIENT", "METHOD", "PATH", "STATUS"]
    assert [r[4:] for r in t[-2:]] == [["POST", "/v1/fabrics", "201"], ["POST", "/v1/fabrics", "409"]]
    last = t[-2][0]
    p = ctl("-o", "json", "audit", "--since", last, "--limit", 5)
    assert p.stdout == demo.get(f"/v1/audit?since={last}&limit=5").text
    assert [a["status"] for a in json.loads(p.stdout)["audit"]] == [409]
    p = ctl("audit", "--since", "yesterday")
    assert p.returncode == 1 and "400 invalid_field" in p.stderr


# ---- OCS units, servers, switches, apply ---------------------------------------------------------

def test_create_and_delete(ctl, demo, tmp_path):
    p = ctl("ocs", "create", "ocs2", "--ports", 16)
    assert (p.returncode, p.stdout) == (0, "ocs ocs2 created\n"), p.stderr
    assert demo.get("/v1/ocs/ocs2").json()["ports"] == 16
    f = tmp_path / "ocs3.json"
    f.write_text(json.dumps({"driver": "sim", "ports": 8, "endpoint": "sim"}))
    p = ctl("-o", "json", "ocs", "create", "ocs3", "-f", f, "--ports", 12)
    assert p.returncode == 0 and json.loads(p.stdout) == {"name": "ocs3", "driver": "sim", "ports": 12, "endpoint": "sim"}
    p = ctl("ocs", "create", "ocs3", "--ports", 12)
    assert p.returncode == 1 and p.stderr.startswith("ofcctl: 409 conflict: ")
    p = ctl("ocs", "create", "ocs4", "-f", "-", stdin='{"name": "other", "ports": 4}')
    assert p.returncode == 2 and "its name is not the one given" in p.stderr

    p = ctl("switch", "create", "agg", "--aggregating", "--buffer", 64, "--window", 32)
    assert (p.returncode, p.stdout) == (0, "switch agg created\n"), p.stderr
    p = ctl("switch", "create", "bad", "--aggregating", "--buffer", 8, "--window", 32)
    assert p.returncode == 1 and "422 unprocessable" in p.stderr
    p = ctl("server", "create", "srv8", "--devices", 4, "--ports-per-device", 2, "--p2p", "--intra",
            "two-groups", "--offload", "--switch", "agg")
    assert p.returncode == 0, p.stderr
    assert {k: v for k, v in demo.get("/v1/servers/srv8").json().items()
            if k in ("devices", "ports_per_device", "p2p", "intra", "offload", "switch")} == {
        "devices": 4, "ports_per_device": 2, "p2p": True, "intra": "two-groups", "offload": True, "switch": "agg"}
    p = ctl("switch", "get", "agg")
    assert kv(p.stdout) == {"name": "agg", "aggregating": "yes", "offload": "no", "buffer": "64",
                            "window": "32", "servers": "srv8"}
    assert ctl("-o", "json", "switch", "get", "agg").stdout == demo.get("/v1/switches/agg").text
    assert rows(ctl("switch", "list").stdout)[1] == ["agg", "yes", "no", "64", "32"]
    assert ctl("-o", "json", "switch", "list").stdout == demo.get("/v1/switches").text

    # A switch servers reach: refused, exit 1; then in order.
    p = ctl("switch", "delete", "agg")
    assert p.returncode == 1 and "409 in_use" in p.stderr
    # --if-match: only the version named; a bare revision is quoted as the daemon's tags are.
    rev = demo.get("/v1/servers/srv8").headers["ETag"].strip('"')
    p = ctl("server", "delete", "srv8", "--if-match", int(rev) + 1)
    assert p.returncode == 1
    assert p.stderr == (f'ofcctl: 412 precondition_failed: If-Match "{int(rev) + 1}" does not match the '
                        f'current version "{rev}": read it again\n')
    p = ctl("server", "delete", "srv8", "--if-match", rev)
    assert (p.returncode, p.stdout) == (0, "server srv8 deleted\n"), p.stderr
    p = ctl("-o", "json", "switch", "delete", "agg", "--if-match", "*")
    assert p.returncode == 0 and json.loads(p.stdout) == {"deleted": "agg"}
    assert ctl("ocs", "delete", "ocs2").stdout == "ocs ocs2 deleted\n"
    assert ctl("ocs", "delete", "ocs3", "--force").returncode == 0

    # Gone: 404 is exit 1, unless --ignore-not-found (silently 0).
    for kind, name in (("ocs", "ocs2"), ("server", "srv8"), ("switch", "agg"), ("fabric", "none")):
        p = ctl(kind, "delete", name)
        assert p.returncode == 1 and "404 not_found" in p.stderr
        for form in ("table", "json"):
            p = ctl("-o", form, kind, "delete", name, "--ignore-not-found")
            assert (p.returncode, p.stdout, p.stderr) == (0, "", ""), (kind, form)
    # Not any refusal: a server in a fabric stays, exit 1.
    assert ctl("fabric", "create", "f", "srv0", "--wait", "10").returncode == 0
    p = ctl("server", "delete", "srv0", "--ignore-not-found")
    assert p.returncode == 1 and "409 in_use" in p.stderr
    p = ctl("fabric", "delete", "f", "--if-match", 7)
    assert p.returncode == 1 and "412 precondition_failed" in p.stderr
    assert ctl("fabric", "delete", "f", "--if-match", 1, "--wait", "10").returncode == 0


def test_apply(ctl, demo, tmp_path):
    docs = [{"kind": "ocs", "name": "ocs5", "ports": 32},
            {"kind": "server", "name": "srv9", "devices": 2},
            {"kind": "switch", "name": "sw1", "offload": True},
            {"kind": "fabric", "name": "fa", "servers": ["srv0", "srv1"]}]
    f = tmp_path / "all.json"
    f.write_text(json.dumps(docs))
    p = ctl("apply", f)
    assert (p.returncode, p.stdout) == (0, "ocs/ocs5 created\nserver/srv9 created\nswitch/sw1 created\n"
                                           "fabric/fa created\n"), p.stderr
    # Again: the same state, exit 0.
    p = ctl("apply", f)
    assert (p.returncode, p.stdout) == (0, "ocs/ocs5 unchanged\nserver/srv9 unchanged\nswitch/sw1 unchanged\n"
                                           "fabric/fa unchanged\n"), p.stderr
    p = ctl("-o", "json", "apply", "-", stdin=json.dumps(docs[1]))
    assert p.returncode == 0 and json.loads(p.stdout) == {"kind": "server", "name": "srv9", "result": "unchanged"}
    p = ctl("-o", "yaml", "apply", f)
    assert list(yaml.safe_load_all(p.stdout))[3] == {"kind": "fabric", "name": "fa", "result": "unchanged"}
    assert demo.get("/v1/fabrics/fa").json()["servers"] == ["srv0", "srv1"]
    # A fabric's layout members go through as the PUT takes them.
    grid = {"kind": "fabric", "name": "fg", "servers": ["srv2", "srv3", "srv4", "srv5"], "topology": "torus",
            "shape": [2, 2]}
    p = ctl("apply", "-", stdin=json.dumps(grid))
    assert (p.returncode, p.stdout) == (0, "fabric/fg created\n"), p.stderr
    assert (demo.get("/v1/fabrics/fg").json()["topology"], demo.get("/v1/fabrics/fg").json()["shape"]) == \
        ("torus", [2, 2])
    assert ctl("apply", "-", stdin=json.dumps(grid)).stdout == "fabric/fg unchanged\n"
    p = ctl("apply", "-", stdin=json.dumps({**grid, "topology": "hyperx"}))
    assert p.returncode == 1 and p.stderr.startswith("ofcctl: 409 conflict: "), p.stderr
    # Other values than stored: the daemon's conflict, exit 1, nothing changed; the first failure stops.
    p = ctl("apply", "-", stdin=json.dumps([{"kind": "ocs", "name": "ocs5", "ports": 64}, docs[1]]))
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.startswith("ofcctl: 409 conflict: OCS unit ocs5 exists with ports 32, not 64")
    assert demo.get("/v1/ocs/ocs5").json()["ports"] == 32
    for doc, why in (({"name": "x"}, "kind must be fabric, ocs, server or switch"),
                     ({"kind": "rack", "name": "x"}, "kind must be"),
                     ({"kind": "ocs", "ports": 4}, "name must be a string"),
                     ([1], "[0]: not a JSON object"),
                     ("{", "standard input:1:1: ")):
        p = ctl("apply", "-", stdin=doc if isinstance(doc, str) else json.dumps(doc))
        assert p.returncode == 2 and why in p.stderr, (doc, p.stderr)


def test_topology_and_wiring_if_match(ctl, demo, tmp_path):
    p = ctl("wiring", "get")
    assert p.returncode == 0
    head, links = p.stdout.split("\n\n")
    wiring = demo.get("/v1/wiring")
    assert kv(head) == {"rule": "plane-per-ocs", "links": str(len(wiring.json()["links"]))}
    assert rows(links)[0] == ["SERVER", "DEVICE", "PORT", "OCS", "OCS_PORT"]
    assert rows(links)[1] == ["srv0", "0", "0", "ocs0", "1"] and len(rows(links)) == 1 + 64 + 1
    assert kv(links.splitlines()[-1]) == {"version": wiring.headers["ETag"]}
    assert ctl("-o", "json", "wiring", "get").stdout == wiring.text
    f = tmp_path / "w.json"
    f.write_text(json.dumps({"rule": "plane-per-ocs"}))
    p = ctl("wiring", "put", f)
    assert (p.returncode, p.stdout) == (0, "wiring: 64 links, rule plane-per-ocs\n"), p.stderr
    p = ctl("wiring", "put", f, "--if-match", '"0123"')
    assert p.returncode == 1 and "412 precondition_failed" in p.stderr
    assert "ofcctl: the wiring changed since it was read: read it again\n" in p.stderr
    assert ctl("wiring", "put", f, "--if-match", wiring.headers["ETag"]).returncode == 0
    assert ctl("wiring", "put", f, "--force").returncode == 0

    topo = demo.get("/v1/topology")
    (tmp_path / "t.json").write_text(topo.text)
    p = ctl("topology", "put", tmp_path / "t.json", "--if-match", "1")
    assert p.returncode == 1 and p.stderr.startswith('ofcctl: 412 precondition_failed: If-Match "1" does not match')
    assert ctl("topology", "put", tmp_path / "t.json", "--if-match", topo.headers["ETag"]).returncode == 0
    assert ctl("topology", "put", tmp_path / "t.json", "--force").returncode == 0


def test_topology_put_sends_the_version_it_read(tmp_path):
    """Without --if-match, topology put sends the ETag of a GET made just before."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self, status, body, etag):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.answer(200, {"ocs": [], "servers": [], "switches": [], "wiring": {"rule": "plane-per-ocs"}},
                        '"abc"')

        def do_PUT(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers.get("If-Match"))
            self.answer(200, {"ocs": [], "servers": [], "switches": []}, '"abc"')

        def log_message(self, *a):
            pass

    srv = LoopbackServer(Handler)
    try:
        ctl = Ctl(tmp_path, srv.url())
        assert ctl("topology", "put", "-", stdin="{}").returncode == 0
        assert ctl("topology", "put", "-", "--force", stdin="{}").returncode == 0
        assert ctl("wiring", "put", "-", "--if-match", "7", stdin="{}").returncode == 0
        assert seen == ['"abc"', None, '"7"']
    finally:
        srv.shutdown()
        srv.server_close()


# ---- --watch --------------------------------------------------------------------------------

class Watch:
    """An ofcctl --watch running in the background, its output read line by line."""

    def __init__(self, ctl, *args):
        self.p = subprocess.Popen([OFCCTL_BIN, "--url", ctl.url, *map(str, args)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=ctl.env())
        self.lines = []
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            with self.lock:
                self.lines.append(line)

    def wait_for(self, pred, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if any(pred(l) for l in self.lines):
                    return list(self.lines)
            time.sleep(0.05)
        raise AssertionError(f"not seen in {self.lines}")

    def wait_text(self, pred, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if pred("".join(self.lines)):
                    return
            time.sleep(0.05)
        raise AssertionError(f"not seen in {self.lines}")

    def end(self, sig=signal.SIGINT):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        rc = self.p.wait(timeout=10)
        return rc, "".join(self.lines), self.p.stderr.read()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def test_watch_fabrics(ctl, demo):
    # Not there: a refusal ends the watch at once, exit 1.
    p = ctl("fabric", "get", "wf", "--watch")
    assert (p.returncode, p.stderr) == (1, "ofcctl: 404 not_found: no fabric wf\n")
    table = Watch(ctl, "fabric", "list", "-w")
    js = None
    try:
        table.wait_for(lambda l: l.startswith("NAME"))
        assert ctl("fabric", "create", "wf", "srv[0-2]", "--wait", "10").returncode == 0
        table.wait_for(lambda l: re.match(r"wf\s+applied\s+1\s+3\s+0\s+full-mesh\s+srv\[0-2\]", l))
        js = Watch(ctl, "-o", "json", "fabric", "get", "wf", "--watch")
        js.wait_for(lambda l: json.loads(l)["revision"] == 1)
        demo.put("/v1/servers/srv1/devices/0", {"state": "failed"})
        js.wait_for(lambda l: json.loads(l)["revision"] == 2 and json.loads(l)["state"] == "applied")
        table.wait_for(lambda l: re.match(r"wf\s+applied\s+2\s", l))
        # Deleted: the watch of the fabric says so and ends by itself, exit 0.
        assert ctl("fabric", "delete", "wf").returncode == 0
        assert js.p.wait(timeout=10) == 0
        rc, out, err = js.end()
        docs = [json.loads(l) for l in out.splitlines()]
        assert err == "ofcctl: fabric wf deleted\n"
        assert all(d["name"] == "wf" for d in docs) and docs[-1]["revision"] == 2
        table.wait_text(lambda t: "wf" not in t.split("\n\n")[-1])
        rc, out, err = table.end()
        assert rc == 0 and err == ""
        # The list printed again at each change (the last without wf), never twice the same in a row.
        prints = out.split("\n\n")
        assert all(p.startswith("NAME") for p in prints) and all(a != b for a, b in zip(prints, prints[1:]))
        assert "wf" not in prints[-1]
    finally:
        table.kill()
        if js:
            js.kill()


def test_watch_resumes_after_restart(ctl, demo):
    """A dropped stream is resumed; a daemon that restarted says reset: the answer is read again."""
    w = Watch(ctl, "-o", "yaml", "server", "get", "srv2", "-w")
    sigterm = Watch(ctl, "ocs", "list", "-w")
    try:
        w.wait_for(lambda l: l.startswith("failed_devices: []"))
        sigterm.wait_for(lambda l: l.startswith("ocs1"))
        demo.restart()
        demo.put("/v1/servers/srv2/devices/5", {"state": "failed"})
        w.wait_for(lambda l: l.startswith("failed_devices:") and "[]" not in l or l.strip() == "- 5")
        rc, out, err = w.end()
        assert rc == 0 and "ofcctl: lost the event stream" in err and "reconnecting" in err
        docs = list(yaml.safe_load_all(out))
        assert docs[0]["failed_devices"] == [] and docs[-1]["failed_devices"] == [5]
        assert sigterm.end(signal.SIGTERM)[0] == 0
    finally:
        w.kill()
        sigterm.kill()


# ---- layouts: HyperX and torus fabrics, the plan's what-if --------------------------------------

@pytest.fixture
def grid(tmp_path):
    """16 servers of 8 devices on 8 sim units of 64 ports, wired plane per unit (made with ofcctl):
    a full mesh of them would need 15 planes."""
    d = Daemon(tmp_path).start()
    ctl = Ctl(tmp_path, d.url(""))
    try:
        for u in range(8):
            assert ctl("ocs", "create", f"ocs{u}", "--ports", 64, "--driver", "sim").returncode == 0
        for s in range(16):
            assert ctl("server", "create", f"srv{s}", "--devices", 8).returncode == 0
        assert ctl("wiring", "put", "-", "--force", stdin='{"rule": "plane-per-ocs"}').returncode == 0
        yield d, ctl
    finally:
        d.stop()


def test_fabric_layouts(grid):
    d, ctl = grid
    # A full mesh of 16 needs 15 planes: the daemon's refusal, exit 1.
    p = ctl("fabric", "create", "big", "srv[0-15]", "--topology", "full-mesh")
    assert p.returncode == 1 and p.stderr.startswith("ofcctl: 422 infeasible: "), p.stderr
    # Without --topology: auto.
    p = ctl("fabric", "create", "big", "srv[0-15]", "--wait", 10)
    assert p.returncode == 0, p.stderr
    info, candidates, links = p.stdout.split("\n\n")
    f = kv(info)
    assert (f["state"], f["topology"], f["shape"], f["diameter"], f["degree"], f["formula"]) == \
        ("applied", "hyperx", "4x4", "2", "6", "per-line")
    assert "full mesh" in f["choice"] and f["traffic"] == "mixed (none declared)"
    t = rows(candidates)
    assert t[0] == ["SHAPE", "TOPOLOGY", "DIAMETER", "DEGREE", "PLANES", "FITS", "PREDICTED_US"]
    assert t[1][:6] == ["4x4", "hyperx", "2", "6", "6", "yes"] and float(t[1][6]) > 0
    assert len(t) - 1 == len(d.get("/v1/fabrics/big").json()["choice"]["candidates"])
    assert len(rows(links)) - 1 == 16 * 6 // 2
    # The list shows the layout (read from the summary: the full list has none); JSON is the daemon's.
    assert rows(ctl("fabric", "list").stdout) == [
        ["NAME", "STATE", "REVISION", "CIRCUITS", "MISSING", "TOPOLOGY", "SERVERS"],
        ["big", "applied", "1", "48", "0", "hyperx", "4x4", "srv[0-9],srv[10-15]"]]
    assert rows(ctl("-o", "wide", "fabric", "list").stdout)[1] == \
        ["big", "applied", "1", "48", "0", "6", "hyperx", "4x4", "2", "6", "-", "srv[0-9],srv[10-15]"]
    assert ctl("-o", "json", "fabric", "list").stdout == d.get("/v1/fabrics").text
    assert ctl("-o", "json", "fabric", "get", "big").stdout == d.get("/v1/fabrics/big").text
    wide = rows(ctl("-o", "wide", "fabric", "get", "big").stdout.split("\n\n")[1])
    assert wide[0][-3:] == ["BISECTION", "ALLREDUCE_US", "ALLTOALL_US"] and wide[1][7] == "16"
    assert ctl("fabric", "delete", "big", "--wait", 10).returncode == 0

    # A torus of the shape asked: no choice to show.
    p = ctl("fabric", "create", "t", "srv[0-15]", "--shape", "4x4", "--topology", "torus", "--wait", 10)
    assert p.returncode == 0, p.stderr
    info, links = p.stdout.split("\n\n")
    f = kv(info)
    assert (f["topology"], f["shape"], f["diameter"], f["degree"]) == ("torus", "4x4", "4", "4")
    assert "choice" not in f and len(rows(links)) - 1 == 16 * 4 // 2
    body = d.get("/v1/fabrics/t").json()
    assert (body["topology"], body["shape"]) == ("torus", [4, 4])
    assert rows(ctl("fabric", "list").stdout)[1][5:7] == ["torus", "4x4"]
    assert ctl("fabric", "delete", "t", "--wait", 10).returncode == 0
    # A shape alone is a HyperX; the traffic declared picks the fastest.
    p = ctl("-o", "json", "fabric", "create", "h", "srv[0-15]", "--shape", "8X2")
    assert p.returncode == 0 and (json.loads(p.stdout)["topology"], json.loads(p.stdout)["shape"]) == ("hyperx", [8, 2])
    assert ctl("fabric", "delete", "h", "--wait", 10).returncode == 0
    p = ctl("fabric", "create", "a", "srv[0-15]", "--topology", "auto", "--traffic", "alltoall")
    assert p.returncode == 0 and kv(p.stdout)["traffic"] == "alltoall" and "alltoall" in kv(p.stdout)["choice"]


def test_layout_refusals(grid):
    d, ctl = grid
    # Not a shape: exit 2 before anything is sent.
    for shape in ("4x", "x4", "4xx4", "4,4", "0x16", "", "four", "4x-4", "99999999999x1"):
        for args in (["fabric", "create", "x", "srv[0-15]"], ["plan", "--servers", 16, "--devices", 8]):
            p = ctl(*args, "--shape", shape)
            assert p.returncode == 2 and p.stdout == "", (shape, p.stderr)
            assert p.stderr.startswith("ofcctl: --shape takes the grid's sizes joined by x"), p.stderr
    # The daemon's refusals (400 a layout it does not know or that does not make the servers,
    # 422 nothing fits): exit 1 with its message; -o json prints its body.
    for extra, status, field in ((["--topology", "ring"], 400, "topology"),
                                 (["--shape", "3x5"], 400, "shape"),
                                 (["--topology", "hyperx", "--traffic", "alltoall"], 400, "traffic"),
                                 (["--topology", "auto", "--traffic", "gossip"], 400, "traffic")):
        p = ctl("fabric", "create", "x", "srv[0-15]", *extra)
        assert p.returncode == 1 and p.stderr.startswith(f"ofcctl: {status} "), (extra, p.stderr)
        p = ctl("-o", "json", "fabric", "create", "x", "srv[0-15]", *extra)
        assert p.returncode == 1 and json.loads(p.stdout)["error"]["field"] == field, (extra, p.stdout)
    p = ctl("plan", "--servers", 5001, "--devices", 2, "--topology", "auto")
    assert p.returncode == 1 and p.stderr.startswith("ofcctl: 422 infeasible: ") and "5000 would fit" in p.stderr
    p = ctl("plan", "--servers", 1024, "--devices", 8, "--topology", "hyperx", "--formula", "3")
    assert p.returncode == 1 and "400 invalid_field" in p.stderr
    assert d.get("/v1/fabrics").json()["fabrics"] == []


def test_plan_layouts(ctl, demo):
    args = ["plan", "--servers", 1024, "--devices", 8, "--ports-per-device", 8, "--topology", "auto"]
    p = ctl(*args)
    assert p.returncode == 0, p.stderr
    info, candidates = p.stdout.split("\n\n")
    f = kv(info)
    assert (f["topology"], f["shape"], f["diameter"], f["degree"], f["planes"], f["feasible"]) == \
        ("hyperx", "32x32", "2", "62", "62", "yes")
    assert not any(l.startswith("PLANE ") for l in p.stdout.splitlines())  # no links: a fabric lists its circuits
    t = rows(candidates)
    assert t[0] == ["SHAPE", "TOPOLOGY", "DIAMETER", "DEGREE", "PLANES", "FITS", "PREDICTED_US"]
    assert t[1][:6] == ["32x32", "hyperx", "2", "62", "62", "yes"]
    body = demo.post("/v1/plan", {"servers": 1024, "devices": 8, "ports_per_device": 8, "topology": "auto"}).json()
    assert len(t) - 1 == len(body["choice"]["candidates"])
    assert json.loads(ctl("-o", "json", *args).stdout) == body
    assert yaml.safe_load(ctl("-o", "yaml", *args).stdout) == body
    assert rows(ctl("-o", "wide", *args).stdout.split("\n\n")[1])[0][-3:] == \
        ["BISECTION", "ALLREDUCE_US", "ALLTOALL_US"]
    # An explicit grid: its layout, no candidates.
    p = ctl("plan", "--servers", 1024, "--devices", 8, "--ports-per-device", 8, "--shape", "16x8x8",
            "--topology", "torus")
    assert p.returncode == 0 and "\n\n" not in p.stdout, p.stderr
    assert (kv(p.stdout)["topology"], kv(p.stdout)["shape"], kv(p.stdout)["degree"]) == ("torus", "16x8x8", "6")
    # Where a full mesh fits, auto is one; full-mesh asked is the policy with its links, as before.
    p = ctl("plan", "--servers", 60, "--devices", 8, "--ports-per-device", 8, "--topology", "auto")
    assert p.returncode == 0 and (kv(p.stdout)["topology"], kv(p.stdout)["degree"]) == ("full-mesh", "59")
    p = ctl("plan", "--servers", 4, "--devices", 3, "--topology", "full-mesh")
    assert p.returncode == 0 and len(rows(p.stdout.split("\n\n", 1)[1])) == 1 + 6


# ---- cost: calibration and parameter sets -----------------------------------------------------

# The terms hidden in the "measured" runs, which the fit must find again.
HIDDEN = {"alpha_us": 7.0, "link_efficiency": 0.85}
FIT = "alpha_us,link_efficiency"
SIZES = (8, 65536, 16 << 20, 1 << 30)


def predicted(d, coll, alg, servers, devices, nbytes, params):
    """What the daemon's model predicts with params: a run as the hidden terms would measure it."""
    r = d.post("/v1/collective/select", {"collective": coll, "bytes": nbytes, "servers": servers,
                                         "devices": devices, "params": params})
    assert r.status_code == 200, r.text
    return next(c for c in r.json()["candidates"] if c["algorithm"] == alg)["predicted_us"]


def measured_runs(d):
    return [{"collective": "allreduce", "algorithm": alg, "servers": servers, "devices": 8,
             "bytes": q, "measured_us": predicted(d, "allreduce", alg, servers, 8, q, HIDDEN)}
            for alg in ("ring", "recursive-halving-doubling") for servers in (4, 8) for q in SIZES]


def nccl_tests_output(d):
    """An nccl-tests binary's output for allreduce over 8 servers of 8: the in-place time 1 % over."""
    lines = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 64(factor) warmup iters: 5",
             "#",
             "#       size         count      type   redop    root     time   algbw   busbw #wrong"
             "     time   algbw   busbw #wrong",
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
             "            (us)  (GB/s)  (GB/s)"]
    for q in SIZES:
        us = predicted(d, "allreduce", "ring", 8, 8, q, HIDDEN)
        lines.append(f"{q:>12} {q // 4:>13}     float     sum      -1 {us:>8.2f}   0.00   0.00"
                     f"      0 {us * 1.01:>8.2f}   0.00   0.00      0")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 123.4", "#"]
    return "\n".join(lines) + "\n"


def summary(text):
    """A calibration summary's "key: value" lines, keys with spaces included ("within 10%")."""
    out = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        k, v = line.split(":", 1)
        out[k] = v.strip()
    return out


def fitted(line):
    """The summary's fitted line ("alpha_us 7, link_efficiency 0.85") as a dict."""
    return {k: float(v) for k, v in (part.split() for part in line.split(", "))}


def test_cost_calibrate_from_json(ctl, demo, tmp_path):
    runs = measured_runs(demo)
    f = tmp_path / "runs.json"
    f.write_text(json.dumps(runs))
    # An array is the runs; --note is the provenance, kept beside the source.
    p = ctl("cost", "calibrate", "lab", f, "--fit", FIT, "--note", "from the test")
    assert p.returncode == 0, p.stderr
    s = summary(p.stdout)
    assert (s["name"], s["active"], s["source"], s["note"]) == ("lab", "no", "runs", "from the test")
    assert s["runs"] == str(len(runs)) and s["within 10%"] == f"{len(runs)} of {len(runs)}"
    assert s["rms"].endswith("%") and float(s["rms"][:-1]) < 0.01
    assert float(s["start rms"][:-1]) > 10 and s["undetermined"] == "none"
    got = fitted(s["fitted"])
    assert set(got) == set(HIDDEN)
    assert all(abs(got[k] - v) < 1e-3 * v for k, v in HIDDEN.items()), got
    stored = demo.get("/v1/cost/params/lab").json()
    assert {k: v for k, v in stored["provenance"].items() if k != "facts"} == \
        {"source": "runs", "runs": len(runs), "note": "from the test"}
    assert demo.get("/v1/cost/params").json()["active"] is None

    # An object is the body, the options over its members; -o json prints the reply.
    f.write_text(json.dumps({"runs": runs[:8], "fit": ["alpha_us"], "relay": "cut-through"}))
    p = ctl("-o", "json", "cost", "calibrate", "lab2", f, "--activate", "--fit", FIT)
    assert p.returncode == 0, p.stderr
    body = json.loads(p.stdout)
    assert body["name"] == "lab2" and body["active"] is True and body["fit"]["runs"] == 8
    assert set(body["fit"]["terms"]) == set(HIDDEN) and body["params"]["relay"] == "cut-through"
    assert demo.get("/v1/cost/params").json()["active"] == "lab2"
    # --sync sets params.sync beside the file's params.
    f.write_text(json.dumps({"runs": runs[:8], "fit": ["alpha_us"], "params": {"root": 0}}))
    p = ctl("-o", "json", "cost", "calibrate", "lab-pw", f, "--sync", "pairwise")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["params"]["sync"] == "pairwise"
    assert demo.delete("/v1/cost/params/lab-pw").status_code == 200
    # Its name, if it has one, must be NAME's.
    f.write_text(json.dumps({"name": "other", "runs": runs}))
    p = ctl("cost", "calibrate", "lab3", f)
    assert p.returncode == 2 and "its name is not the one given" in p.stderr
    f.write_text('{"runs": [}')
    p = ctl("cost", "calibrate", "lab3", f)
    assert p.returncode == 2 and p.stderr.startswith(f"ofcctl: {f}:1:")

    # The daemon's refusal names the field its message leaves to the error body.
    f.write_text(json.dumps([dict(runs[0], algorithm="fastest")]))
    p = ctl("cost", "calibrate", "bad", f)
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == 'ofcctl: 400 invalid_field: runs[0].algorithm: unknown algorithm "fastest"\n'
    p = ctl("-o", "json", "cost", "calibrate", "bad", f)
    assert p.returncode == 1 and json.loads(p.stdout)["error"]["field"] == "runs[0].algorithm"
    good = tmp_path / "good.json"
    good.write_text(json.dumps(runs))
    p = ctl("cost", "calibrate", "lab", good)
    assert p.returncode == 1 and p.stderr.startswith("ofcctl: 409 conflict: ")
    assert [x["name"] for x in demo.get("/v1/cost/params").json()["sets"]] == ["lab", "lab2"]


def test_cost_calibrate_from_nccl_tests_output(ctl, demo, tmp_path):
    f = tmp_path / "allreduce.txt"
    f.write_text(nccl_tests_output(demo))
    p = ctl("cost", "calibrate", "nccl", f, "--collective", "allreduce", "--algorithm", "ring",
            "--servers", 8, "--devices", 8, "--fit", FIT)
    assert p.returncode == 0, p.stderr
    s = summary(p.stdout)
    assert (s["source"], s["runs"], s["within 10%"]) == ("nccl-tests", "4", "4 of 4")
    got = fitted(s["fitted"])
    assert all(abs(got[k] - v) < 1e-2 * v for k, v in HIDDEN.items()), got
    out_of_place = [r["measured_us"] for r in demo.get("/v1/cost/params/nccl").json()["fit"]["residuals"]]
    # From standard input, the in-place column: 1 % slower.
    p = ctl("-o", "json", "cost", "calibrate", "nccl-in-place", "-", "--collective", "allreduce",
            "--algorithm", "ring", "--servers", 8, "--devices", 8, "--in-place", "--fit", FIT,
            stdin=f.read_text())
    assert p.returncode == 0, p.stderr
    body = json.loads(p.stdout)
    assert [r["bytes"] for r in body["fit"]["residuals"]] == list(SIZES)
    in_place = [r["measured_us"] for r in body["fit"]["residuals"]]
    assert all(abs(b - a * 1.01) < 0.02 for a, b in zip(out_of_place, in_place))
    # What the text says of itself is checked by the daemon, named by its field.
    p = ctl("cost", "calibrate", "empty", "-", "--collective", "allreduce", "--algorithm", "ring",
            "--servers", 8, "--devices", 8, stdin="# no result here\n")
    assert p.returncode == 1
    assert p.stderr == ("ofcctl: 400 invalid_field: nccl_tests.text: no result line of "
                        "nccl-tests in the text\n")
    p = ctl("cost", "calibrate", "big", f, "--collective", "allreduce", "--algorithm", "ring",
            "--servers", 1, "--devices", 8)
    assert p.returncode == 1 and "nccl_tests.servers" in p.stderr
    # --fabric names the fabric the runs were measured on: it must exist.
    p = ctl("cost", "calibrate", "where", f, "--collective", "allreduce", "--algorithm", "ring",
            "--servers", 8, "--devices", 8, "--fabric", "nowhere")
    assert (p.returncode, p.stderr) == (1, "ofcctl: 422 unprocessable: no fabric nowhere\n")
    assert demo.get("/v1/cost/params/where").status_code == 404


def test_cost_nccl_tests_usage_needs_no_daemon(tmp_path):
    """The options nccl-tests output needs are checked before anything is sent: exit 2, not 4."""
    ctl = Ctl(tmp_path, f"http://127.0.0.1:{free_port()}")
    f = tmp_path / "allreduce.txt"
    f.write_text("#  size count type redop root time algbw busbw #wrong\n"
                 "   1024   256 float   sum   -1 30.0  0.00  0.00      0\n")
    p = ctl("cost", "calibrate", "x", f, "--collective", "allreduce", "--devices", 8)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.startswith(f"ofcctl: {f} is not JSON, so it is read as nccl-tests output, "
                               "which needs --collective, --algorithm, --servers and --devices "
                               "(missing --algorithm, --servers), or a line \"# ofcd: "
                               "collective=C algorithm=A servers=N devices=D\"\n")
    assert "usage: ofcctl cost calibrate NAME [FILE|-]" in p.stderr
    # "#ofcd:" is not the daemon's "# ofcd:" line: the options are still needed.
    g = tmp_path / "glued.txt"
    g.write_text("#ofcd: collective=allreduce algorithm=ring servers=4 devices=8\n" + f.read_text())
    p = ctl("cost", "calibrate", "x", g)
    assert p.returncode == 2 and "is not JSON, so it is read as nccl-tests output" in p.stderr
    g.write_text(" # ofcd:  collective=allreduce algorithm=ring servers=4 devices=8\n" +
                 f.read_text())
    p = ctl("cost", "calibrate", "x", g)
    assert p.returncode == 4 and p.stderr.startswith("ofcctl: cannot reach the daemon: ")
    # With all of them, the same file goes to the daemon, which is not there.
    p = ctl("cost", "calibrate", "x", f, "--collective", "allreduce", "--algorithm", "ring",
            "--servers", 4, "--devices", 8)
    assert p.returncode == 4 and p.stderr.startswith("ofcctl: cannot reach the daemon: ")


def test_cost_runs_and_calibrate_collected(ctl, demo, tmp_path):
    """Runs collected on the servers (by their agents: test_agent.py), listed, fitted and
    deleted; nccl-tests output that says what it ran in its "# ofcd:" line needs no options."""
    runs = measured_runs(demo)
    r = demo.post("/v1/servers/srv0/runs", {"runs": runs})
    assert r.status_code == 201, r.text
    p = ctl("cost", "runs")
    assert p.returncode == 0, p.stderr
    table = rows(p.stdout)
    assert table[0] == ["ID", "COLLECTOR", "FABRIC", "COLLECTIVE", "ALGORITHM", "SERVERS",
                        "DEVICES", "BYTES", "MEASURED_US", "COLLECTED"]
    assert [r[1] for r in table[1:-1]] == ["srv0"] * len(runs)
    assert p.stdout.endswith(f"{len(runs)} of {len(runs)} runs kept\n")
    p = ctl("cost", "runs", "--limit", 2)
    assert p.returncode == 0 and p.stdout.endswith(f"2 of {len(runs)} runs kept\n")
    p = ctl("-o", "json", "cost", "runs")
    assert p.returncode == 0 and json.loads(p.stdout) == demo.get("/v1/cost/runs").json()
    p = ctl("cost", "calibrate", "fleet", "--collected", "--fit", FIT)
    assert p.returncode == 0, p.stderr
    assert summary(p.stdout)["source"] == "collected"
    f = tmp_path / "allreduce.txt"
    f.write_text("# ofcd: collective=allreduce algorithm=ring servers=8 devices=8\n" +
                 nccl_tests_output(demo))
    p = ctl("cost", "calibrate", "both", f, "--collected", "--fit", FIT)
    assert p.returncode == 0, p.stderr
    assert summary(p.stdout)["source"] == "nccl-tests+collected"
    assert summary(p.stdout)["runs"] == str(len(runs) + len(SIZES))
    p = ctl("cost", "runs", "delete", "--fabric", "none-such")
    assert (p.returncode, p.stdout) == (0, "0 collected runs deleted\n")
    p = ctl("cost", "runs", "delete")
    assert (p.returncode, p.stdout) == (0, f"{len(runs)} collected runs deleted\n")
    p = ctl("cost", "calibrate", "again", "--collected")
    assert (p.returncode, p.stderr) == (1, "ofcctl: 422 unprocessable: no collected run matches\n")


def test_cost_params_activate_delete(ctl, demo, tmp_path):
    f = tmp_path / "runs.json"
    runs = measured_runs(demo)
    f.write_text(json.dumps(runs))
    assert ctl("cost", "calibrate", "lab", f, "--fit", FIT).returncode == 0
    assert ctl("cost", "calibrate", "nccl", "-", "--collective", "allreduce", "--algorithm", "ring",
               "--servers", 8, "--devices", 8, "--fit", FIT,
               stdin=nccl_tests_output(demo)).returncode == 0

    # The list: the active set, the parameters in force, a row per set.
    p = ctl("cost", "params")
    assert p.returncode == 0, p.stderr
    head, params, sets = p.stdout.split("\n\n")
    assert kv(head) == {"active": "-"}
    params = dict(r for r in rows(params)[1:])
    assert params["alpha_us"] == "3" and params["relay"] == "none"
    sets = rows(sets)
    assert sets[0] == ["NAME", "ACTIVE", "SOURCE", "RUNS", "RMS", "WITHIN_10", "CREATED"]
    assert [r[:4] + [r[5]] for r in sets[1:]] == [["lab", "no", "runs", str(len(runs)), str(len(runs))],
                                                  ["nccl", "no", "nccl-tests", "4", "4"]]
    p = ctl("-o", "wide", "cost", "params")
    assert rows(p.stdout.split("\n\n")[2])[0][-2:] == ["START_RMS", "UNDETERMINED"]
    p = ctl("-o", "json", "cost", "params")
    assert p.returncode == 0 and p.stdout == demo.get("/v1/cost/params").text
    # One set: its summary, then every run with what the fit predicts.
    p = ctl("cost", "params", "nccl")
    assert p.returncode == 0, p.stderr
    assert summary(p.stdout)["source"] == "nccl-tests"
    table = rows(p.stdout.split("\n\n")[1])
    assert table[0] == ["COLLECTIVE", "ALGORITHM", "SERVERS", "DEVICES", "BYTES", "MEASURED_US",
                        "PREDICTED_US", "RESIDUAL"]
    assert [int(r[4]) for r in table[1:]] == list(SIZES)
    assert all(abs(float(r[7][:-1])) < 1 for r in table[1:])
    p = ctl("-o", "json", "cost", "params", "nccl")
    assert p.stdout == demo.get("/v1/cost/params/nccl").text
    p = ctl("cost", "params", "nosuch")
    assert (p.returncode, p.stderr) == (1, "ofcctl: 404 not_found: name: no parameter set nosuch\n")

    # Activate: the set prices every selection; the active set cannot be deleted.
    p = ctl("cost", "activate", "lab")
    assert (p.returncode, p.stdout) == (0, "parameter set lab is active\n"), p.stderr
    view = demo.get("/v1/cost/params").json()
    assert view["active"] == "lab" and abs(view["params"]["alpha_us"] - 7) < 1e-2
    assert kv(ctl("cost", "params").stdout.split("\n\n")[0]) == {"active": "lab"}
    p = ctl("cost", "delete", "lab")
    assert p.returncode == 1 and p.stderr.startswith("ofcctl: 409 in_use: name: parameter set lab")
    p = ctl("cost", "activate", "nosuch")
    assert (p.returncode, p.stderr) == (1, "ofcctl: 404 not_found: name: no parameter set nosuch\n")
    assert demo.get("/v1/cost/params").json()["active"] == "lab"
    # none: no set active, as before any calibration.
    p = ctl("cost", "activate", "none")
    assert (p.returncode, p.stdout) == (0, "no parameter set is active\n")
    assert demo.get("/v1/cost/params").json()["active"] is None
    p = ctl("-o", "json", "cost", "activate", "nccl")
    assert p.returncode == 0 and json.loads(p.stdout) == {"active": "nccl"}
    p = ctl("-o", "yaml", "cost", "activate", "none")
    assert p.returncode == 0 and yaml.safe_load(p.stdout) == {"active": None}

    # Delete, then again: 404, or nothing with --ignore-not-found.
    p = ctl("cost", "delete", "lab")
    assert (p.returncode, p.stdout) == (0, "parameter set lab deleted\n"), p.stderr
    p = ctl("-o", "json", "cost", "delete", "nccl")
    assert p.returncode == 0 and json.loads(p.stdout) == {"deleted": "nccl"}
    p = ctl("cost", "delete", "lab")
    assert (p.returncode, p.stderr) == (1, "ofcctl: 404 not_found: name: no parameter set lab\n")
    p = ctl("cost", "delete", "lab", "--ignore-not-found")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert demo.get("/v1/cost/params").json()["sets"] == []


# ---- completion -------------------------------------------------------------------------------

COMPLETION = os.path.join(os.path.dirname(__file__), "../../packaging/ofcctl.bash-completion")


def test_completion_is_the_packaged_script_and_knows_everything(ctl):
    p = ctl("completion", "bash", url=False)
    assert p.returncode == 0 and p.stdout == open(COMPLETION).read()
    script = p.stdout
    # Every command word and option of the usage is in it.
    usage = ctl("--help").stdout
    commands = usage.split("commands:\n", 1)[1].split("\n\n", 1)[0]
    for line in commands.splitlines():
        for word in line.split():
            if re.fullmatch(r"[a-z][a-z-]+", word):
                assert re.search(rf"\b{word}\b", script), word
    for opt in set(re.findall(r"(?<![\w-])--?[a-z][a-z0-9-]*", usage)):
        assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", script), opt


@pytest.mark.parametrize("helpers", [True, False], ids=["bash-completion", "plain-bash"])
def test_completion_in_bash(ctl, demo, tmp_path, helpers):
    """Real bash: the script completes partial command lines, names from the daemon included."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    if not (bindir / "ofcctl").exists():
        (bindir / "ofcctl").symlink_to(os.path.abspath(OFCCTL_BIN))
    assert ctl("fabric", "create", "cf", "srv[0-1]", "--wait", "10").returncode == 0
    lines = [["ofcctl", "fab"], ["ofcctl", "fabric", ""], ["ofcctl", "cl"], ["ofcctl", "ocs", "c"],
             ["ofcctl", "-o", ""], ["ofcctl", "--url", ctl.url, "fabric", "get", ""],
             ["ofcctl", "--url", ctl.url, "ocs", "delete", "oc"],
             ["ofcctl", "server", "delete", "--i"], ["ofcctl", "fabric", "list", "-"],
             ["ofcctl", "cluster", "snapshot", ""], ["ofcctl", "completion", ""],
             ["ofcctl", "server", "create", "x", "--intra", ""],
             ["ofcctl", "fabric", "create", "x", "srv0", "--topology", ""],
             ["ofcctl", "plan", "--shape", "4x4", "--traffic", "all"], ["ofcctl", "plan", "--t"]]
    script = "\n".join([
        "source /usr/share/bash-completion/bash_completion" if helpers else "",
        f"source <({OFCCTL_BIN} completion bash)",
        "try() {",
        '  COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}',
        '  COMPREPLY=(); _ofcctl ofcctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"',
        '  echo "${COMPREPLY[*]}"',
        "}",
        "declare -F _init_completion >/dev/null && echo helpers || echo none",
    ] + ["try " + " ".join(f"'{w}'" for w in line) for line in lines])
    env = ctl.env({"PATH": f"{bindir}:{os.environ['PATH']}"})
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0] == ("helpers" if helpers else "none")
    assert [sorted(o.split()) for o in out[1:]] == [
        ["fabric"], ["create", "delete", "get", "list"], ["cluster"], ["create", "cross-connects"],
        ["json", "table", "wide", "yaml"], ["cf"], ["ocs0", "ocs1"],
        ["--if-match", "--ignore-not-found", "--insecure"],
        sorted("--url --retry --token-file --cacert --insecure -o --output --help --version -w "
               "--watch --consistent".split()),
        ["save"], ["bash"], ["full-mesh", "two-groups"], ["auto", "full-mesh", "hyperx", "torus"],
        ["allreduce", "alltoall"], ["--token-file", "--topology", "--traffic"]]
