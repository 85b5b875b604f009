"""The host agent (`ofcd-agent`) against a real controller: recorded inventories and event
scripts, device failures re-planned, controller restarts, staleness, bad inventories, agent
token scoping, the real libibverbs source on this machine, and the measured runs it collects
from its runs_dir."""
import datetime
import hashlib
import http.server
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import ADMIN, OFCD_AGENT_BIN, READER, Daemon, LoopbackServer, error_of, wait_for
from ha_lab import ETCD_BIN, Etcd, make_members, put_on_leader, wait_leader

AGENT0 = "agent0-secret-0123456789"
AGENT1 = "agent1-secret-0123456789"
AGENT_TOKENS = f"[auth]\ntoken.agent0 = agent:srv0:{AGENT0}\ntoken.agent1 = agent:srv1:{AGENT1}\n"


def port_json(num=1, state="active", phys="link_up"):
    return {"port": num, "state": state, "phys_state": phys, "mtu": 4096, "speed": "HDR",
            "lane_gbps": 50.0, "width": "4x", "rate_gbps": 200.0, "link_layer": "infiniband",
            "gids": [{"index": 0, "gid": "fe80:0000:0000:0000:0c42:a103:0065:7a%02x" % num}]}


def inventory(n=4):
    """A host with n single-port ConnectX-6 devices mlx5_0..n-1, every link up."""
    return {"rdma": True, "reason": None, "devices": [
        {"name": f"mlx5_{i}", "pci": "0000:%02x:00.0" % (0x10 + i), "fw_ver": "20.31.1014",
         "node_guid": "0c42:a103:0065:%04x" % i, "vendor_id": 713, "vendor_part_id": 4123,
         "phys_port_cnt": 1, "fatal": False, "error": None, "ports": [port_json()]}
        for i in range(n)]}


def report(n=4, interval=10):
    """The same inventory as an agent reports it: port i of mlx5_i serves device i."""
    inv = inventory(n)
    for i, dev in enumerate(inv["devices"]):
        dev["ports"][0]["index"] = i
    inv["interval"] = interval
    return inv


class Agent:
    """One `ofcd-agent` process with its own configuration and recorded files."""

    def __init__(self, tmp_path, daemon, server="srv0", token=AGENT0, heartbeat=1, events="",
                 source="recorded", devices=4, name="agent", mapping=None, runs_dir=None,
                 controller=None):
        self.dir = tmp_path
        self.config = tmp_path / f"{name}.ini"
        self.log_path = tmp_path / f"{name}.log"
        inv = tmp_path / f"{name}-inventory.json"
        ev = tmp_path / f"{name}-events.txt"
        inv.write_text(json.dumps(inventory(devices), indent=1))
        ev.write_text(events)
        controller = controller or f"http://127.0.0.1:{daemon.port}"
        text = (f"[agent]\ncontroller = {controller}\nserver = {server}\n"
                f"token = {token}\nheartbeat = {heartbeat}\nsource = {source}\n")
        if source == "recorded":
            text += f"recorded_inventory = {inv}\nrecorded_events = {ev}\n"
        for line in mapping or [f"device.{i} = mlx5_{i}:1" for i in range(devices)]:
            text += line + "\n"
        if runs_dir is not None:
            text += f"runs_dir = {runs_dir}\n"
        text += "[log]\nlevel = debug\n"
        self.config.write_text(text)
        self.config.chmod(0o600)  # it holds the agent's token (the agent warns otherwise)
        self.proc = None

    def start(self):
        self.logf = open(self.log_path, "a")
        self.started = time.monotonic()
        self.proc = subprocess.Popen([OFCD_AGENT_BIN, "-c", str(self.config)],
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        return self

    def log(self):
        if not self.logf.closed:
            self.logf.flush()
        return self.log_path.read_text()

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.logf.close()
        return rc


@pytest.fixture
def ctl(tmp_path):
    d = Daemon(tmp_path, tokens=True, extra=AGENT_TOKENS).start()
    yield d
    d.stop(sig=signal.SIGKILL)


@pytest.fixture
def agents(tmp_path):
    made = []

    def make(daemon, **kw):
        a = Agent(tmp_path, daemon, name=f"agent{len(made)}", **kw)
        made.append(a)
        return a

    yield make
    for a in made:
        a.stop(sig=signal.SIGKILL)


def cluster(d, servers=4, devices=4):
    """One OCS unit with room for everyone; devices beyond the policy's planes are spares."""
    assert d.post("/v1/ocs", {"name": "ocs0", "driver": "sim", "ports": 64}).status_code == 201
    for s in range(servers):
        r = d.post("/v1/servers", {"name": f"srv{s}", "devices": devices})
        assert r.status_code == 201, r.text
    assert d.put("/v1/wiring", {"rule": "plane-per-ocs"}).status_code == 200


def make_fabric(d, servers=4):
    r = d.post("/v1/fabrics?wait=10", {"name": "job", "servers": [f"srv{i}" for i in range(servers)]})
    assert r.status_code == 201 and r.json()["state"] == "applied", r.text
    return r.json()


def device_state(d, server, index):
    return d.get(f"/v1/servers/{server}").json()["device_info"][index]["state"]


def epoch(stamp):
    """Seconds since the epoch of a UTC time as the controller writes it (ms, "Z")."""
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def link_key(link):
    return (link["a"]["server"], link["b"]["server"])


def test_inventory_stored_and_shown(ctl, agents):
    cluster(ctl)
    assert ctl.get("/v1/servers/srv0").json()["inventory"] is None
    a = agents(ctl).start()
    srv = wait_for(lambda: (lambda s: s if s["inventory"] else None)(ctl.get("/v1/servers/srv0").json()))
    inv = srv["inventory"]
    assert inv["rdma"] is True and inv["reason"] is None and srv["stale"] is False
    assert inv["interval"] == 1 and inv["heartbeat"].endswith("Z")
    assert [dev["name"] for dev in inv["devices"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    port = inv["devices"][2]["ports"][0]
    assert port == {**port_json(), "index": 2}
    assert inv["devices"][0]["node_guid"] == "0c42:a103:0065:0000"
    assert all(dev["state"] == "ok" for dev in srv["device_info"])
    # Heartbeats keep coming and change nothing else.
    first = inv["heartbeat"]
    wait_for(lambda: ctl.get("/v1/servers/srv0").json()["inventory"]["heartbeat"] != first, timeout=5)
    assert ctl.get("/v1/servers/srv1").json()["inventory"] is None
    assert a.stop() == 0
    assert "inventory (start): 4 devices, 4 mapped ports, 4 of them up" in a.log()


def test_port_events_fail_and_restore(ctl, agents):
    cluster(ctl)
    before = make_fabric(ctl)
    # Heartbeats 5 s apart: only the event's own report can bring the failure in time.
    a = agents(ctl, heartbeat=5,
               events="2500 mlx5_0 1 port_err\n6500 mlx5_0 1 port_active\n").start()
    wait_for(lambda: ctl.get("/v1/servers/srv0").json()["inventory"])
    assert device_state(ctl, "srv0", 0) == "ok"
    wait_for(lambda: device_state(ctl, "srv0", 0) == "failed", timeout=6, step=0.02)
    # Port error at 2.5 s after the agent's start, seen by the controller at once: before the
    # first heartbeat (5 s), with room for a busy machine's process start and scheduling.
    assert time.monotonic() - a.started < 2.5 + 2.0
    after = ctl.get("/v1/fabrics/job?wait=10").json()
    assert after["revision"] == 2 and after["state"] == "applied" and after["missing"] == []
    old = {link_key(l): l for l in before["links"]}
    new = {link_key(l): l for l in after["links"]}
    moved = [k for k in old if old[k] != new[k]]
    assert len(moved) == 1
    ends = {e["server"]: e for e in (new[moved[0]]["a"], new[moved[0]]["b"])}
    assert ends["srv0"]["device"] == 3  # the spare
    assert old[moved[0]]["a" if old[moved[0]]["a"]["server"] == "srv0" else "b"]["device"] == 0
    inv = wait_for(lambda: (lambda i: i if i["devices"][0]["ports"][0]["state"] == "down" else None)(
        ctl.get("/v1/servers/srv0").json()["inventory"]))
    assert inv["devices"][0]["ports"][0]["phys_state"] == "polling"
    # Port active restores the device; working circuits stay where they are.
    wait_for(lambda: device_state(ctl, "srv0", 0) == "ok", timeout=8)
    back = ctl.get("/v1/fabrics/job?wait=10").json()
    assert back["revision"] == 3 and back["state"] == "applied"
    assert {link_key(l): l for l in back["links"]} == new
    # The agent logs a delivery when it reads the answer: after the controller shows it.
    wait_for(lambda: "device 0 reported ok" in a.log(), timeout=10)
    log = a.log()
    assert "mlx5_0 port 1 port_err: device 0 failed" in log
    assert "device 0 reported failed" in log and "device 0 reported ok" in log
    assert a.stop() == 0


def test_a_stalled_controller_gets_only_the_latest_state(ctl, agents):
    """A port that flaps while the controller is stalled queues nothing but its last word:
    the PUT in flight, then the newest state, not every flap in turn."""
    cluster(ctl)
    flaps = "".join(f"{6000 + 100 * i} mlx5_0 1 {'port_err' if i % 2 == 0 else 'port_active'}\n"
                    for i in range(5))
    a = agents(ctl, heartbeat=30, events=flaps).start()
    wait_for(lambda: ctl.get("/v1/servers/srv0").json()["inventory"])
    assert time.monotonic() - a.started < 5.5, "the agent started too slowly for the flaps"
    ctl.send_signal(signal.SIGSTOP)
    try:
        time.sleep(max(0.0, a.started + 8 - time.monotonic()))  # the flaps at 6.0-6.4 s
    finally:
        ctl.send_signal(signal.SIGCONT)
    wait_for(lambda: device_state(ctl, "srv0", 0) == "failed", timeout=15)
    wait_for(lambda: a.log().count("device 0 reported") >= 2, timeout=15)
    time.sleep(1)  # anything else queued would have come by now
    puts = [e for e in ctl.get("/v1/audit?limit=1000").json()["audit"]
            if e["method"] == "PUT" and e["path"] == "/v1/servers/srv0/devices/0"]
    assert len(puts) == 2, puts
    assert a.stop() == 0


def test_controller_restart_loses_nothing(ctl, agents):
    cluster(ctl)
    make_fabric(ctl)
    a = agents(ctl, events="3000 mlx5_1 1 port_err\n").start()
    wait_for(lambda: ctl.get("/v1/servers/srv0").json()["inventory"])
    assert ctl.stop() == 0
    # The port fails while the controller is down: the device PUT is lost, the agent retries.
    time.sleep(4.0)
    assert a.proc.poll() is None
    ctl.start()
    srv = ctl.get("/v1/servers/srv0").json()
    assert srv["inventory"]["rdma"] is True  # the stored report survived the restart
    wait_for(lambda: device_state(ctl, "srv0", 1) == "failed", timeout=10)
    f = ctl.get("/v1/fabrics/job?wait=10").json()
    assert f["revision"] == 2 and f["state"] == "applied" and f["missing"] == []
    port = ctl.get("/v1/servers/srv0").json()["inventory"]["devices"][1]["ports"][0]
    assert port["state"] == "down"
    # Logged when the agent reads the controller's answer, which may come after the
    # controller already shows the state.
    wait_for(lambda: "reachable again" in a.log(), timeout=10)
    assert "resending the inventory with backoff" in a.log()
    assert a.stop() == 0


def test_stale_after_missed_heartbeats(ctl, agents):
    cluster(ctl)
    a = agents(ctl, heartbeat=1).start()
    wait_for(lambda: ctl.get("/v1/servers/srv0").json()["inventory"])
    assert ctl.get("/v1/servers/srv0").json()["stale"] is False
    assert a.stop() == 0
    # Timed from the last heartbeat the controller stored (the agent may have sent one while
    # it was being stopped), not from this process's stop, which a busy machine may delay.
    last = epoch(ctl.get("/v1/servers/srv0").json()["inventory"]["heartbeat"])

    def stale():
        s = ctl.get("/v1/servers/srv0").json()
        if s["stale"]:
            # Three heartbeats (3 s) missed, not fewer: polled every 50 ms, an early flag
            # would be seen well before then.
            assert time.time() - last > 3.0, (time.time() - last, s["inventory"]["heartbeat"])
            return s
        return None
    srv = wait_for(stale, timeout=10)
    # Stale is a flag, not a failure: the devices are as the last report left them.
    assert all(dev["state"] == "ok" for dev in srv["device_info"])
    assert srv["inventory"]["rdma"] is True
    # The list says it too, for that server only.
    listed = {s["name"]: s["stale"] for s in ctl.get("/v1/servers").json()["servers"]}
    assert listed["srv0"] is True and not any(v for k, v in listed.items() if k != "srv0")


def test_bad_inventories_change_nothing(ctl):
    cluster(ctl)
    make_fabric(ctl)
    assert ctl.put("/v1/servers/srv0/inventory", report()).status_code == 200

    def state():
        return (ctl.get("/v1/servers/srv0").json(), ctl.get("/v1/fabrics/job").json())

    before = state()

    def bad(body=None, want=400, field=None, server="srv0", raw=None, headers=None):
        r = ctl.put(f"/v1/servers/{server}/inventory", body, raw=raw, headers=headers)
        assert r.status_code == want, r.text
        if field is not None:
            assert error_of(r)["field"] == field, r.text
        assert state() == before

    body = report()
    body["rdma"] = "yes"
    bad(body, 400, "rdma")
    body = report()
    body["extra"] = 1
    bad(body, 400, "extra")
    body = report()
    body["devices"][1]["ports"][0]["mtu"] = "4096"
    bad(body, 400, "devices[1].ports[0].mtu")
    body = report()
    body["devices"][0]["ports"][0]["index"] = "0"
    bad(body, 400, "devices[0].ports[0].index")
    body = report()
    body["interval"] = 0
    bad(body, 400, "interval")
    bad(report(), 404, "name", server="nope")
    body = report()
    body["devices"][3]["ports"][0]["index"] = 4  # srv0 has devices 0..3
    bad(body, 422, "devices[3].ports[0].index")
    body = report()
    body["devices"][3]["ports"][0]["index"] = 0
    bad(body, 400, "devices[3].ports[0].index")
    body = report()
    body["devices"] = [dict(body["devices"][0], name=f"d{i}", ports=[]) for i in range(1025)]
    bad(body, 400, "devices")
    body = report()
    body["devices"][0]["ports"][0]["gids"] = [
        {"index": i, "gid": "fe80:0000:0000:0000:0000:0000:0000:%04x" % (i + 1)} for i in range(65)]
    bad(body, 400, "devices[0].ports[0].gids")
    bad(raw=json.dumps(report()) + " " * (1024 * 1024), want=413)
    bad(raw="{\"rdma\": tru", want=400)
    bad(raw=json.dumps(report()), want=415, headers={"Content-Type": "text/plain"})
    bad([], 400)
    # A down port is accepted (200) and does change things: the control case.
    body = report()
    body["devices"][2]["ports"][0]["state"] = "down"
    r = ctl.put("/v1/servers/srv0/inventory", body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["failed"] == [{"device": 2, "reason": "mlx5_2:1 is down (physical state link_up)"}]
    assert out["changes"] == [{"device": 2, "state": "failed", "changed": True}]
    assert out["fabrics"][0]["revision"] == 2
    # Resending the same report changes nothing more.
    r = ctl.put("/v1/servers/srv0/inventory", body)
    assert r.json()["changes"] == [] and r.json()["fabrics"] == []
    # A report with fewer devices than declared fails the missing ones; a full one restores all.
    r = ctl.put("/v1/servers/srv0/inventory", report(n=3))
    assert [c["device"] for c in r.json()["changes"]] == [2, 3]
    assert [c["state"] for c in r.json()["changes"]] == ["ok", "failed"]
    assert r.json()["failed"] == [{"device": 3, "reason": "no RDMA port is mapped to it"}]
    r = ctl.put("/v1/servers/srv0/inventory", report())
    assert r.json()["changes"] == [{"device": 3, "state": "ok", "changed": True}]
    assert [d["state"] for d in ctl.get("/v1/servers/srv0").json()["device_info"]] == ["ok"] * 4


def test_agent_token_scope(ctl, agents):
    cluster(ctl)
    assert ctl.put("/v1/servers/srv1/inventory", report(), token=AGENT0).status_code == 403
    e = error_of(ctl.put("/v1/servers/srv1/devices/0", {"state": "failed"}, token=AGENT0))
    assert e["code"] == "forbidden" and "agent token of server srv0, not of srv1" in e["message"]
    assert ctl.get("/v1/servers/srv1").json()["inventory"] is None
    assert device_state(ctl, "srv1", 0) == "ok"
    assert ctl.put("/v1/servers/srv0/inventory", report(), token=AGENT0).status_code == 200
    assert ctl.put("/v1/servers/srv0/devices/1", {"state": "failed"}, token=AGENT0).status_code == 200
    assert ctl.put("/v1/servers/srv1/inventory", report(), token=AGENT1).status_code == 200
    # Agents read like read tokens, and write nothing else.
    assert ctl.get("/v1/servers", token=AGENT0).status_code == 200
    assert ctl.get("/v1/rdma/devices", token=AGENT0).status_code == 200
    assert ctl.post("/v1/servers", {"name": "x", "devices": 1}, token=AGENT0).status_code == 403
    assert ctl.delete("/v1/servers/srv0", token=AGENT0).status_code == 403
    assert ctl.put("/v1/wiring", {"rule": "plane-per-ocs"}, token=AGENT0).status_code == 403
    assert ctl.put("/v1/servers/srv0/inventory", report(), token=READER).status_code == 403
    assert ctl.put("/v1/servers/srv0/inventory", report(), token="no-such-secret-0123").status_code == 401
    # An agent configured with another server's token is refused and says so.
    a = agents(ctl, server="srv2", token=AGENT0).start()
    wait_for(lambda: "controller refused the inventory of srv2: HTTP 403" in a.log(), timeout=5)
    assert ctl.get("/v1/servers/srv2").json()["inventory"] is None
    assert a.stop() == 0


def test_verbs_source_on_this_host(ctl, agents):
    """The real libibverbs source: whatever this host has, agent and controller agree."""
    assert ctl.post("/v1/servers", {"name": "host0", "devices": 1}).status_code == 201
    host = ctl.get("/v1/rdma/devices").json()
    assert set(host) == {"rdma", "reason", "devices"}
    if not os.path.exists("/sys/class/infiniband"):
        assert host["rdma"] is False and host["devices"] == []
    if not host["rdma"]:
        assert host["reason"].startswith(("no RDMA device found", "ibv_get_device_list failed: "))
    a = agents(ctl, server="host0", token=ADMIN, source="verbs", devices=1).start()
    inv = wait_for(lambda: ctl.get("/v1/servers/host0").json()["inventory"])
    assert inv["rdma"] == host["rdma"] and inv["reason"] == host["reason"]
    if not host["rdma"]:
        assert inv["devices"] == []
        # The declared device is not there: failed, with the reason.
        assert device_state(ctl, "host0", 0) == "failed"
        assert f"inventory (start): no RDMA: {host['reason']}" in a.log()
    assert a.stop() == 0
    # The inventory goes with its server.
    assert ctl.delete("/v1/servers/host0").status_code == 200
    assert ctl.post("/v1/servers", {"name": "host0", "devices": 1}).status_code == 201
    assert ctl.get("/v1/servers/host0").json()["inventory"] is None


def test_agent_command_line(tmp_path, ctl):
    bad = tmp_path / "bad.ini"
    bad.write_text("[agent]\nbogus = 1\n")
    r = subprocess.run([OFCD_AGENT_BIN, "-c", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and f"{bad}:2: [agent] bogus: unknown key" in r.stderr
    r = subprocess.run([OFCD_AGENT_BIN], capture_output=True, text=True)
    assert r.returncode == 2 and "-c FILE is required" in r.stderr
    a = Agent(tmp_path, ctl)
    r = subprocess.run([OFCD_AGENT_BIN, "-c", str(a.config), "--check-config"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "configuration is valid" in r.stdout
    assert r.stderr == "", r.stderr
    # Its token readable by any user of the machine: valid, with a warning.
    a.config.chmod(0o644)
    r = subprocess.run([OFCD_AGENT_BIN, "-c", str(a.config), "--check-config"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (f"{a.config} holds the agent's token and any user of this machine can read it "
            f"(mode 0644): chmod o-rwx {a.config}") in r.stderr
    a.config.chmod(0o600)
    # Several addresses: one scheme for all, at most eight.
    good = a.config.read_text()
    for controller, ok in (("http://127.0.0.1:1, http://[::1]:2,http://h.example:3", True),
                           ("http://127.0.0.1:1, https://127.0.0.1:2", False),
                           (", ".join(f"http://127.0.0.1:{p}" for p in range(1, 10)), False),
                           ("http://127.0.0.1:1,, ,", True), (" , ", False)):
        a.config.write_text(re.sub(r"controller = .*", f"controller = {controller}", good))
        r = subprocess.run([OFCD_AGENT_BIN, "-c", str(a.config), "--check-config"],
                           capture_output=True, text=True)
        assert (r.returncode == 0) == ok, (controller, r.stderr)
        if not ok:
            assert "[agent] controller" in r.stderr, r.stderr
    a.config.write_text(good)
    # A missing recorded file stops the start with its name.
    a.config.write_text(a.config.read_text().replace("agent-inventory.json", "missing.json"))
    r = subprocess.run([OFCD_AGENT_BIN, "-c", str(a.config)], capture_output=True, text=True)
    assert r.returncode == 1 and "missing.json" in r.stderr
    # SIGINT also ends the agent with status 0.
    b = Agent(tmp_path, ctl, name="b").start()
    # Once it has said it runs (its signals are taken before that line).
    wait_for(lambda: ": server srv0, controller " in b.log())
    assert b.stop(sig=signal.SIGINT) == 0


# ---- measured runs (runs_dir) ----------------------------------------------------------------

NCCL_EXAMPLE = os.path.join(os.path.dirname(__file__), "../../docs/examples/all_reduce_perf.txt")
NCCL_SIZES = [8 * 8 ** k for k in range(10)]  # the example's sizes, 8 B to 1 GiB
OFCD_LINE = "# ofcd: fabric=job collective=allreduce algorithm=ring servers=4 devices=4"


def run_json(**kw):
    return {"collective": "allreduce", "algorithm": "ring", "servers": 4, "devices": 4,
            "bytes": 4096, "measured_us": 50.0, **kw}


def drop(runs, name, data, age=None):
    """A runs file written as a job writes one: under a dot name, then renamed into place;
    age seconds old when given."""
    tmp = runs / f".{name}.part"
    tmp.write_bytes(data if isinstance(data, bytes) else data.encode())
    if age is not None:
        t = time.time() - age
        os.utime(tmp, (t, t))
    os.rename(tmp, runs / name)


def nccl_file():
    with open(NCCL_EXAMPLE) as f:
        return OFCD_LINE + "\n" + f.read()


def listing(path):
    return set(os.listdir(path)) if os.path.isdir(path) else set()


def collected(ctl):
    return ctl.get("/v1/cost/runs?collector=srv0").json()["runs"]


def test_runs_collected_from_runs_dir(ctl, agents, tmp_path):
    cluster(ctl)
    make_fabric(ctl)
    runs = tmp_path / "runs"
    runs.mkdir()
    done, rejected = runs / "done", runs / "rejected"
    # Before the agent starts, oldest first: a, b, c, then what is refused without a request.
    drop(runs, "a.nccl", nccl_file(), age=50)
    two = [run_json(), run_json(bytes=1 << 20, measured_us=400.0)]
    drop(runs, "b.json", json.dumps({"runs": two, "fabric": "job"}), age=40)
    drop(runs, "c.json", json.dumps({"runs": [run_json(collective="scan")]}), age=30)
    drop(runs, "bad.nccl", OFCD_LINE.encode() + b"\n\xff\xfe 8 2 float\n", age=20)
    with open(runs / "big.json", "wb") as f:
        f.truncate(16 * 1024 * 1024 + 1)
    # Not the agent's: other endings, dot names (a file being written), subdirectories.
    ignored = {"d.json.tmp": "{}", ".d.json": json.dumps({"runs": [run_json()]}),
               "notes.txt": "x", "sub/e.json": json.dumps({"runs": [run_json()]})}
    (runs / "sub").mkdir()
    for name, text in ignored.items():
        (runs / name).write_text(text)
    a = agents(ctl, runs_dir=runs).start()
    wait_for(lambda: listing(done) == {"a.nccl", "b.json"} and listing(rejected) == {
        "c.json", "c.json.error", "bad.nccl", "bad.nccl.error", "big.json", "big.json.error"})
    got = collected(ctl)
    # Oldest first: the nccl-tests lines (their out-of-place times), then the JSON runs.
    assert [r["bytes"] for r in got] == NCCL_SIZES + [4096, 1 << 20]
    assert got[0]["measured_us"] == 184.55 and got[-1]["measured_us"] == 400.0
    assert all(r["collector"] == "srv0" and r["fabric"] == "job" and r["servers"] == 4 and
               r["devices"] == 4 and r["collective"] == "allreduce" and r["algorithm"] == "ring"
               for r in got)
    assert [r["id"] for r in got] == sorted(r["id"] for r in got)
    # Sent as they were: the file moved, not rewritten.
    assert (done / "a.nccl").read_text() == nccl_file()
    # Refused by the controller: the status and its reply, naming the field.
    err = (rejected / "c.json.error").read_text()
    assert err.startswith("HTTP 400 {") and err.endswith("}\n") and err.count("\n") == 1
    assert json.loads(err[len("HTTP 400 "):])["error"]["field"] == "runs[0].collective"
    # Refused by the agent itself, without a request.
    assert (rejected / "bad.nccl.error").read_text() == \
        f"agent: not UTF-8 text (byte {len(OFCD_LINE) + 1})\n"
    assert (rejected / "big.json.error").read_text() == \
        "agent: 16777217 bytes, larger than 16777216\n"
    for name, text in ignored.items():
        assert (runs / name).read_text() == text
    assert listing(runs) == {"done", "rejected", "sub", "d.json.tmp", ".d.json", "notes.txt"}
    log = a.log()
    assert "runs file a.nccl sent: 10 runs added" in log
    assert "runs file b.json sent: 2 runs added" in log
    assert "runs file c.json rejected: HTTP 400: runs[0].collective: " in log
    assert "runs file big.json rejected without sending it: 16777217 bytes" in log
    assert log.index("runs file a.nccl sent") < log.index("runs file b.json sent") < \
        log.index("runs file c.json rejected")
    # A file dropped later goes at a heartbeat; one of a name sent before replaces it in done/.
    drop(runs, "b.json", json.dumps({"runs": [run_json(bytes=64, measured_us=20.0)]}))
    wait_for(lambda: "b.json" not in listing(runs) and len(collected(ctl)) == 13)
    assert json.loads((done / "b.json").read_text())["runs"][0]["bytes"] == 64
    assert collected(ctl)[-1]["fabric"] is None
    assert log.count("runs file a.nccl sent") == 1 == a.log().count("runs file a.nccl sent")
    # Each post was named by its body's hash: the same file again, as a retry after a lost
    # answer, adds nothing.
    body = json.dumps({"nccl_tests": {"text": nccl_file()}}, separators=(",", ":"))
    r = ctl.post("/v1/servers/srv0/runs?batch=sha256-" +
                 hashlib.sha256(body.encode()).hexdigest(), raw=body.encode())
    assert r.status_code == 200 and r.json()["repeated"] and r.json()["added"] == 0, r.text
    assert len(collected(ctl)) == 13
    assert a.stop() == 0


def test_runs_wait_for_the_controller(ctl, agents, tmp_path):
    cluster(ctl)
    make_fabric(ctl)
    runs = tmp_path / "runs"
    runs.mkdir()
    a = agents(ctl, runs_dir=runs).start()
    wait_for(lambda: ctl.get("/v1/servers/srv0").json()["inventory"])
    assert ctl.stop() == 0
    drop(runs, "down.json", json.dumps({"runs": [run_json()], "fabric": "job"}))
    drop(runs, "down2.nccl", nccl_file())
    # Tried at every heartbeat while the controller is away, warned about once a minute.
    wait_for(lambda: a.log().count("runs file down.json not sent (") >= 3, timeout=15)
    log = a.log()
    assert log.count("warn agent: runs file down.json not sent") == 1
    assert listing(runs / "done") == set() and listing(runs / "rejected") == set()
    assert listing(runs) == {"done", "rejected", "down.json", "down2.nccl"}
    ctl.start()
    wait_for(lambda: listing(runs / "done") == {"down.json", "down2.nccl"}, timeout=15)
    got = collected(ctl)
    assert [r["bytes"] for r in got] == [4096] + NCCL_SIZES
    assert listing(runs / "rejected") == set()
    assert a.stop() == 0


def test_runs_of_another_server_stay(ctl, agents, tmp_path):
    """An agent token of another server is a token problem, not the file's: it stays."""
    cluster(ctl)
    runs = tmp_path / "runs"
    runs.mkdir()
    drop(runs, "r.json", json.dumps({"runs": [run_json()]}))
    a = agents(ctl, server="srv1", token=AGENT0, runs_dir=runs).start()
    wait_for(lambda: a.log().count("runs file r.json not sent (HTTP 403") >= 2, timeout=10)
    assert listing(runs) == {"done", "rejected", "r.json"}
    assert ctl.get("/v1/cost/runs").json()["total"] == 0
    assert a.stop() == 0


def test_runs_wait_for_their_server_and_keep_a_gone_fabric(ctl, agents, tmp_path):
    """A server not declared yet is no fault of the file: it stays, and goes once the server is
    there; runs of a fabric gone meanwhile (its job ended) are kept with its name."""
    runs = tmp_path / "runs"
    runs.mkdir()
    drop(runs, "r.json", json.dumps({"runs": [run_json()], "fabric": "ended-job"}))
    a = agents(ctl, runs_dir=runs).start()
    wait_for(lambda: "runs file r.json not sent (HTTP 404" in a.log(), timeout=10)
    assert listing(runs) == {"done", "rejected", "r.json"}
    cluster(ctl)
    wait_for(lambda: listing(runs / "done") == {"r.json"})
    got = collected(ctl)
    assert [(r["fabric"], r["ports_per_device"]) for r in got] == [("ended-job", None)]
    assert a.stop() == 0


def test_runs_dir_must_be_usable(tmp_path, ctl):
    a = Agent(tmp_path, ctl, runs_dir=tmp_path / "missing")
    r = subprocess.run([OFCD_AGENT_BIN, "-c", str(a.config)], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 1 and f"[agent] runs_dir {tmp_path}/missing: " in r.stderr, r.stderr
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "done").write_text("not a directory")
    a = Agent(tmp_path, ctl, runs_dir=runs, name="b")
    r = subprocess.run([OFCD_AGENT_BIN, "-c", str(a.config)], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 1 and "cannot use done/ in it: Not a directory" in r.stderr, r.stderr
    a.config.write_text(a.config.read_text().replace(f"runs_dir = {runs}", "runs_dir = runs"))
    r = subprocess.run([OFCD_AGENT_BIN, "-c", str(a.config), "--check-config"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "[agent] runs_dir: expected an absolute directory path" in r.stderr
    # Both made at start when missing.
    (runs / "done").unlink()
    a = Agent(tmp_path, ctl, runs_dir=runs, name="c").start()
    wait_for(lambda: listing(runs) == {"done", "rejected"})
    # Its signals are handled from its start on: a stop as soon as they are made ends it well.
    assert a.stop() == 0


@pytest.mark.skipif(not os.access(ETCD_BIN, os.X_OK), reason="etcd not installed")
def test_an_agent_follows_the_leader_of_a_cluster(tmp_path, agents):
    """An agent given every member of an HA cluster reports to the leader: a follower's 307 is
    followed, and a leader that dies is left for the next member, which leads or redirects."""
    etcd = Etcd().start()
    members = make_members(tmp_path, etcd, ttl=2)
    try:
        for m in members:
            m.tokens = True
            m.write_config(tokens=True, extra=f"token.agent0 = agent:srv0:{AGENT0}\n" +
                           m.cluster_text + f"token = {ADMIN}\n")
            m.start()
        leader = wait_leader(members)
        topo = {"ocs": [{"name": "ocs0", "driver": "sim", "ports": 64}],
                "servers": [{"name": f"srv{i}", "devices": 4} for i in range(4)],
                "wiring": {"rule": "plane-per-ocs"}}
        assert put_on_leader(members, "/v1/topology", topo).status_code == 200
        # Followers first: the agent starts on one that does not lead.
        order = [m for m in members if m is not leader] + [leader]
        a = agents(members[0], heartbeat=1, events="3000 mlx5_0 1 port_err\n",
                   controller=", ".join(f"http://127.0.0.1:{m.port}" for m in order)).start()
        wait_for(lambda: device_state(leader, "srv0", 0) == "failed", timeout=20)
        assert f"http://127.0.0.1:{order[0].port} does not lead: following it to " \
               f"http://127.0.0.1:{leader.port}" in a.log()
        assert "not one of [agent] controller" not in a.log()
        # The leader dies: the agent's heartbeats reach the next one.
        leader.kill9()
        killed = time.time()
        after = wait_leader(members, timeout=30, exclude=[leader])
        wait_for(lambda: epoch(after.get("/v1/servers/srv0").json()["inventory"]["heartbeat"])
                 > killed + 0.5, timeout=30)
        assert device_state(after, "srv0", 0) == "failed"
        assert a.stop() == 0
    finally:
        for m in members:
            if m.proc and m.proc.poll() is None:
                m.stop(sig=signal.SIGKILL)
        etcd.stop()


def test_an_agent_does_not_follow_a_redirect_elsewhere(tmp_path, agents):
    """A 307 to an address not in [agent] controller is not followed: the token stays."""
    (tmp_path / "elsewhere").mkdir()
    target = Daemon(tmp_path / "elsewhere", tokens=True, extra=AGENT_TOKENS).start()
    try:
        class Redirect(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):
                self.send_response(307)
                self.send_header("Location", f"http://127.0.0.1:{target.port}{self.path}")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        srv = LoopbackServer(Redirect)
        a = agents(target, controller=srv.url()).start()
        wait_for(lambda: "not one of [agent] controller" in a.log(), timeout=15)
        assert target.get("/v1/audit").json()["audit"] == []
        assert a.stop() == 0
        srv.shutdown()
    finally:
        target.stop()
