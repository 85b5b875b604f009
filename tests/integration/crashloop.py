"""Crash loops: ofcd, and the host agent, killed with SIGKILL at random moments, restarted, checked.

    crashloop.controller(tmp_path, iterations, seed, say=print)  -> stats
    crashloop.agent(tmp_path, iterations, seed, say=print)       -> stats

tests/integration/test_crashloop.py runs a few dozen iterations in `make test`, bench/crashloop.py
a few hundred. Everything random comes from one random.Random(seed), printed first, so a failure
replays with the same seed (thread timing aside). Every loop is bounded in count and time, and
every process is stopped by its pid.

The controller loop: WORKERS threads churn fabrics (create with new names, delete their own),
fail and restore devices, add and remove servers, inject faults into the sim units and re-cable
(PUT /v1/wiring) while the main thread kills ofcd after a random delay. Each worker owns its keys
(its fabrics, its servers, one device index on every base server), so the state a key must be
in after the crash follows from that worker's requests alone: an acknowledged write is the
state, a refused one changes nothing, one without an answer (cut by the kill) may or may not
have happened. After each kill:
  - the store as the crash left it (the database and its WAL, copied) passes
    PRAGMA integrity_check and foreign_key_check, and holds an audit row for every
    acknowledged write;
  - ofcd restarts and every key is in one of its allowed states (every acknowledged write
    present, nothing refused or deleted present);
  - the units converge: every fabric applied, or degraded with pairs reported missing, and
    every unit in sync (GET /v1/ocs/{name}/cross-connects: desired == actual).

The agent loop: ofcd-agent reads a recorded inventory (rewritten each iteration with a new
firmware marker) and plays an event script that takes ports down and up every few tens of
milliseconds, so it reports all the time; it is killed at a random moment, restarted on the
same files, and once the restarted agent has played its script the controller's view must
converge to what the agent then holds: the same inventory, the ports left down shown down,
their devices failed, the others ok.
"""
import collections
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import threading
import time

import requests

from conftest import OFCD_AGENT_BIN, Daemon

WORKERS = 3
BASE_SERVERS = 12
DEVICES = 8
UNITS = 2
UNIT_PORTS = 64
REQUEST_TIMEOUT = 5
CONVERGE_S = 20


# ---- the controller ---------------------------------------------------------

class Key:
    """One key of the model: the states it may be in, given what was asked and answered."""

    def __init__(self, state):
        self.allowed = {state}

    def acked(self, state):
        self.allowed = {state}

    def unknown(self, state):
        self.allowed.add(state)

    def known(self):
        return next(iter(self.allowed)) if len(self.allowed) == 1 else None


class Owner:
    """What one worker owns, kept across iterations."""

    def __init__(self, k):
        self.k = k
        self.fabrics = {}  # name -> Key of None (absent) or frozenset of servers
        self.servers = {}  # name -> Key of bool (present)
        self.devices = {f"srv{s}": Key("ok") for s in range(BASE_SERVERS)}  # device index k
        self.next_fabric = 0
        self.next_server = 0


class Worker(threading.Thread):
    """Random writes until the daemon stops answering (or the time bound)."""

    def __init__(self, owner, port, rng, stop_at):
        super().__init__(daemon=True)
        self.o = owner
        self.base = f"http://127.0.0.1:{port}"
        self.rng = rng
        self.stop_at = stop_at
        self.session = requests.Session()
        self.acked = collections.Counter()  # (method, path, status) of acknowledged writes
        self.counts = collections.Counter()  # acked, refused, unknown
        self.errors = []  # 5xx answers: never expected

    def call(self, method, path, body=None):
        """The answer's status, or None when there was none (the daemon died meanwhile)."""
        try:
            r = self.session.request(method, self.base + path, json=body, timeout=REQUEST_TIMEOUT)
        except requests.RequestException:
            self.counts["unknown"] += 1
            return None
        if r.status_code >= 500:
            self.errors.append(f"{method} {path}: {r.status_code} {r.text[:200]}")
        if r.status_code < 300:
            self.counts["acked"] += 1
            self.acked[(method, path.split("?")[0], r.status_code)] += 1
        else:
            self.counts["refused"] += 1
        return r.status_code

    def run(self):
        ops = [(self.create_fabric, 30), (self.delete_fabric, 20), (self.toggle_device, 20),
               (self.add_server, 8), (self.remove_server, 8), (self.fault, 7), (self.rewire, 3)]
        fns, weights = zip(*ops)
        while time.monotonic() < self.stop_at:
            if self.rng.choices(fns, weights)[0]() is False:
                return

    def present(self, keys):
        return [n for n, key in keys.items() if key.known() not in (None, False)]

    def create_fabric(self):
        pool = [f"srv{s}" for s in range(BASE_SERVERS)] + self.present(self.o.servers)
        servers = self.rng.sample(pool, self.rng.randint(2, 5))
        name = f"w{self.o.k}f{self.o.next_fabric}"
        self.o.next_fabric += 1
        key = self.o.fabrics[name] = Key(None)
        status = self.call("POST", "/v1/fabrics", {"name": name, "servers": servers})
        if status is None:
            key.unknown(frozenset(servers))
            return False
        if status < 300:
            key.acked(frozenset(servers))

    def delete_fabric(self):
        mine = self.present(self.o.fabrics)
        if not mine:
            return True
        name = self.rng.choice(mine)
        key = self.o.fabrics[name]
        status = self.call("DELETE", f"/v1/fabrics/{name}")
        if status is None:
            key.unknown(None)
            return False
        if status < 300:
            key.acked(None)

    def toggle_device(self):
        server = self.rng.choice(sorted(self.o.devices))
        key = self.o.devices[server]
        want = "ok" if key.known() == "failed" else "failed"
        status = self.call("PUT", f"/v1/servers/{server}/devices/{self.o.k}", {"state": want})
        if status is None:
            key.unknown(want)
            return False
        if status < 300:
            key.acked(want)

    def add_server(self):
        name = f"w{self.o.k}x{self.o.next_server}"
        self.o.next_server += 1
        key = self.o.servers[name] = Key(False)
        status = self.call("POST", "/v1/servers", {"name": name, "devices": 4})
        if status is None:
            key.unknown(True)
            return False
        if status < 300:
            key.acked(True)

    def remove_server(self):
        mine = self.present(self.o.servers)
        if not mine:
            return True
        name = self.rng.choice(mine)
        status = self.call("DELETE", f"/v1/servers/{name}")
        if status is None:
            self.o.servers[name].unknown(False)
            return False
        if status < 300:
            self.o.servers[name].acked(False)

    def fault(self):
        kind = self.rng.choice(["fail_batches", "disconnect", "delay"])
        body = {"kind": kind, "count": self.rng.randint(1, 3) if kind != "delay" else 20}
        return self.call("POST", f"/v1/ocs/ocs{self.rng.randrange(UNITS)}/faults", body) is not None

    def rewire(self):
        return self.call("PUT", "/v1/wiring", {"rule": "plane-per-ocs"}) is not None


def store_check(db, acked):
    """The store as the crash left it, on a copy: integrity, foreign keys, audit rows."""
    copy = db + ".check"
    for suffix in ("", "-wal"):
        if os.path.exists(copy + suffix):
            os.remove(copy + suffix)
        if os.path.exists(db + suffix):
            shutil.copyfile(db + suffix, copy + suffix)
    con = sqlite3.connect(copy)
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        audit = collections.Counter(con.execute("SELECT method, path, status FROM audit"))
    finally:
        con.close()
    missing = acked - audit
    assert not missing, f"acknowledged writes without an audit row: {dict(missing)}"


def check_model(d, owners):
    """Every key is in an allowed state; then the model learns which."""
    fabrics = {f["name"]: frozenset(f["servers"]) for f in d.get("/v1/fabrics").json()["fabrics"]}
    servers = {s["name"] for s in d.get("/v1/servers").json()["servers"]}
    devices = {f"srv{s}": [x["state"] for x in d.get(f"/v1/servers/srv{s}").json()["device_info"]]
               for s in range(BASE_SERVERS)}
    for o in owners:
        for name, key in o.fabrics.items():
            got = fabrics.get(name)
            assert got in key.allowed, f"fabric {name}: {got} not in {key.allowed}"
            key.acked(got)
        for name, key in o.servers.items():
            got = name in servers
            assert got in key.allowed, f"server {name}: present={got} not in {key.allowed}"
            key.acked(got)
        for server, key in o.devices.items():
            got = devices[server][o.k]
            assert got in key.allowed, f"{server} device {o.k}: {got} not in {key.allowed}"
            key.acked(got)
    mine = {n for o in owners for n in o.fabrics}
    assert set(fabrics) <= mine, f"fabrics nobody made: {set(fabrics) - mine}"


def converged(d):
    """None when every fabric is final and honest and every unit in sync, else what is not."""
    for f in d.get("/v1/fabrics").json()["fabrics"]:
        full = d.get(f"/v1/fabrics/{f['name']}").json()
        ok = (full["state"] == "applied" and not full["missing"]) or \
             (full["state"] == "degraded" and full["missing"])
        if not ok:
            return f"fabric {f['name']} {full['state']} (missing {len(full['missing'])})"
    for u in range(UNITS):
        x = d.get(f"/v1/ocs/ocs{u}/cross-connects").json()
        if not x["in_sync"] or x["desired"] != x["actual"]:
            return f"ocs{u} not in sync"
    return None


def wait_converged(d, timeout=CONVERGE_S):
    deadline = time.monotonic() + timeout
    while True:
        why = converged(d)
        if why is None:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not converged after {timeout} s: {why}")
        time.sleep(0.05)


def controller(tmp_path, iterations, seed, say=print, max_seconds=None):
    rng = random.Random(seed)
    say(f"crashloop controller: seed {seed}, {iterations} iterations, {WORKERS} workers")
    d = Daemon(tmp_path, extra="[debug]\nfaults = true\n").start()
    for u in range(UNITS):
        assert d.post("/v1/ocs", {"name": f"ocs{u}", "driver": "sim",
                                  "ports": UNIT_PORTS}).status_code == 201
    for s in range(BASE_SERVERS):
        assert d.post("/v1/servers", {"name": f"srv{s}", "devices": DEVICES}).status_code == 201
    assert d.put("/v1/wiring", {"rule": "plane-per-ocs"}).status_code == 200
    owners = [Owner(k) for k in range(WORKERS)]
    acked = collections.Counter()
    totals = collections.Counter()
    recovery = []
    started = time.monotonic()
    try:
        for i in range(iterations):
            if max_seconds and time.monotonic() - started > max_seconds:
                break
            stop_at = time.monotonic() + 10
            workers = [Worker(o, d.port, random.Random(rng.random()), stop_at) for o in owners]
            for w in workers:
                w.start()
            time.sleep(rng.uniform(0.02, 0.5))
            d.stop(sig=signal.SIGKILL)
            for w in workers:
                w.join(timeout=REQUEST_TIMEOUT + 5)
                assert not w.is_alive(), "a worker did not stop"
                assert not w.errors, w.errors
                acked += w.acked
                totals += w.counts
            store_check(d.store, acked)
            t = time.monotonic()
            d.start()
            recovery.append(time.monotonic() - t)
            check_model(d, owners)
            wait_converged(d)
            totals["iterations"] += 1
    finally:
        d.stop(sig=signal.SIGKILL)
    stats = dict(totals, recovery_max_s=max(recovery, default=0.0),
                 recovery_median_s=sorted(recovery)[len(recovery) // 2] if recovery else 0.0,
                 fabrics_made=sum(o.next_fabric for o in owners))
    say(f"crashloop controller: {stats}")
    return stats


# ---- the agent --------------------------------------------------------------

AGENT_SECRET = "agent0-secret-0123456789"
AGENT_DEVICES = 4


def agent_inventory(marker):
    port = {"port": 1, "state": "active", "phys_state": "link_up", "mtu": 4096, "speed": "HDR",
            "lane_gbps": 50.0, "width": "4x", "rate_gbps": 200.0, "link_layer": "infiniband",
            "gids": [{"index": 0, "gid": "fe80:0000:0000:0000:0c42:a103:0065:7a01"}]}
    return {"rdma": True, "reason": None, "devices": [
        {"name": f"mlx5_{i}", "pci": "0000:%02x:00.0" % (0x10 + i), "fw_ver": marker,
         "node_guid": "0c42:a103:0065:%04x" % i, "vendor_id": 713, "vendor_part_id": 4123,
         "phys_port_cnt": 1, "fatal": False, "error": None, "ports": [dict(port)]}
        for i in range(AGENT_DEVICES)]}


def agent_script(rng, down_at_end):
    """Ports flapping every few ms for up to a quarter second, ending with down_at_end down."""
    lines, t, state = [], 0, [True] * AGENT_DEVICES
    for _ in range(rng.randint(4, 8)):
        t += rng.randint(5, 30)
        dev = rng.randrange(AGENT_DEVICES)
        state[dev] = not state[dev]
        lines.append(f"{t} mlx5_{dev} 1 {'port_active' if state[dev] else 'port_err'}")
    for dev in range(AGENT_DEVICES):
        t += 5
        up = dev not in down_at_end
        lines.append(f"{t} mlx5_{dev} 1 {'port_active' if up else 'port_err'}")
    return "\n".join(lines) + "\n", t


def agent_expected(marker, down_at_end):
    inv = agent_inventory(marker)
    for i, dev in enumerate(inv["devices"]):
        p = dev["ports"][0]
        p["index"] = i
        if i in down_at_end:
            p["state"], p["phys_state"] = "down", "polling"
    return inv["devices"]


def agent_view(d):
    srv = d.get("/v1/servers/srv0").json()
    inv = srv["inventory"]
    return (inv["devices"] if inv else None), [x["state"] for x in srv["device_info"]]


def agent(tmp_path, iterations, seed, say=print, max_seconds=None):
    rng = random.Random(seed)
    say(f"crashloop agent: seed {seed}, {iterations} iterations")
    d = Daemon(tmp_path, tokens=True,
               extra=f"token.agent0 = agent:srv0:{AGENT_SECRET}\n").start()
    assert d.post("/v1/ocs", {"name": "ocs0", "driver": "sim", "ports": 64}).status_code == 201
    for s in range(2):
        assert d.post("/v1/servers", {"name": f"srv{s}", "devices": AGENT_DEVICES}).status_code == 201
    assert d.put("/v1/wiring", {"rule": "plane-per-ocs"}).status_code == 200
    inv_path, ev_path = tmp_path / "agent-inventory.json", tmp_path / "agent-events.txt"
    config = tmp_path / "agent.ini"
    config.write_text(
        f"[agent]\ncontroller = http://127.0.0.1:{d.port}\nserver = srv0\ntoken = {AGENT_SECRET}\n"
        f"heartbeat = 1\nsource = recorded\nrecorded_inventory = {inv_path}\n"
        f"recorded_events = {ev_path}\n"
        + "".join(f"device.{i} = mlx5_{i}:1\n" for i in range(AGENT_DEVICES)))
    log = open(tmp_path / "agent.log", "a")
    proc = None
    converge = []
    kills = 0
    started = time.monotonic()

    def start():
        return subprocess.Popen([OFCD_AGENT_BIN, "-c", str(config)], stdout=log,
                                stderr=subprocess.STDOUT)

    def kill(p):
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)

    try:
        for i in range(iterations):
            if max_seconds and time.monotonic() - started > max_seconds:
                break
            marker = f"fw-{seed}-{i}"
            down = set(rng.sample(range(AGENT_DEVICES), rng.randint(0, 2)))
            script, length_ms = agent_script(rng, down)
            inv_path.write_text(json.dumps(agent_inventory(marker)))
            ev_path.write_text(script)
            # Killed while it reports (start, every event, heartbeats), then restarted.
            proc = start()
            time.sleep(rng.uniform(0, length_ms / 1000 + 0.1))
            kill(proc)
            kills += 1
            proc = start()
            want = (agent_expected(marker, down),
                    ["failed" if i in down else "ok" for i in range(AGENT_DEVICES)])
            # Judged once the restarted agent has played its whole script.
            time.sleep(length_ms / 1000)
            t = time.monotonic()
            deadline = t + CONVERGE_S
            while agent_view(d) != want:
                assert proc.poll() is None, f"the agent exited with {proc.returncode}"
                assert time.monotonic() < deadline, \
                    f"iteration {i}: no convergence: {agent_view(d)} != {want}"
                time.sleep(0.02)
            converge.append(time.monotonic() - t)
            kill(proc)
            kills += 1
            proc = None
    finally:
        if proc is not None and proc.poll() is None:
            kill(proc)
        log.close()
        d.stop(sig=signal.SIGKILL)
    stats = {"iterations": len(converge), "kills": kills,
             "converge_median_s": sorted(converge)[len(converge) // 2] if converge else 0.0,
             "converge_max_s": max(converge, default=0.0)}
    say(f"crashloop agent: {stats}")
    return stats
