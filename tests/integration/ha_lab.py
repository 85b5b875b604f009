"""A three-member etcd and ofcd cluster members on loopback, for the HA tests and benchmark.

Everything runs with private ports and directories and is stopped by pid.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time

import requests

from conftest import Daemon, free_port, wait_for  # noqa: F401 (the HA tests take it from here)

ETCD_BIN = "/usr/bin/etcd"

# The tables the log carries; every member's copy must equal the leader's row by row.
REPLICATED = ("ocs", "server", "cable", "device_fault", "fabric", "fabric_server", "circuit",
              "missing_pair", "id_seq")


class Etcd:
    """Three etcd members. Short heartbeats let etcd grant one-second leases."""

    def __init__(self, n=3, args=(), member_args=None):
        self.args = list(args)
        self.member_args = member_args or {}  # member index -> more arguments of its own
        self.dir = tempfile.mkdtemp(prefix="ofcd-etcd-")
        self.client = [f"http://127.0.0.1:{free_port()}" for _ in range(n)]
        self.peer = [f"http://127.0.0.1:{free_port()}" for _ in range(n)]
        self.procs = [None] * n

    def start_member(self, i, state="new"):
        initial = ",".join(f"e{j}={p}" for j, p in enumerate(self.peer))
        log = open(os.path.join(self.dir, f"e{i}.log"), "a")
        self.procs[i] = subprocess.Popen(
            [ETCD_BIN, "--name", f"e{i}", "--data-dir", os.path.join(self.dir, f"e{i}"),
             "--listen-client-urls", self.client[i], "--advertise-client-urls", self.client[i],
             "--listen-peer-urls", self.peer[i], "--initial-advertise-peer-urls", self.peer[i],
             "--initial-cluster", initial, "--initial-cluster-state", state,
             "--heartbeat-interval", "50", "--election-timeout", "500",
             "--auto-compaction-mode", "revision", "--auto-compaction-retention", "0",
             *self.args, *self.member_args.get(i, ())],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def start(self):
        for i in range(len(self.client)):
            self.start_member(i)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if self.put("/probe", "x").status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise RuntimeError("etcd did not start")

    def kill(self, i, sig=signal.SIGKILL):
        p = self.procs[i]
        if p and p.poll() is None:
            p.send_signal(sig)
            p.wait(timeout=10)

    def stop(self):
        for i in range(len(self.procs)):
            self.kill(i, signal.SIGTERM)
        shutil.rmtree(self.dir, ignore_errors=True)

    def endpoints(self):
        return ",".join(self.client)

    def _any(self, path, body):
        last = None
        for i, c in enumerate(self.client):
            if self.procs[i] is None or self.procs[i].poll() is not None:
                continue
            try:
                return requests.post(c + path, json=body, timeout=3)
            except requests.RequestException as e:
                last = e
        raise last or RuntimeError("no etcd member runs")

    @staticmethod
    def b64(text):
        import base64
        return base64.b64encode(text.encode()).decode()

    def put(self, key, value):
        return self._any("/v3/kv/put", {"key": self.b64(key), "value": self.b64(value)})

    def keys(self, prefix):
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        r = self._any("/v3/kv/range", {"key": self.b64(prefix), "range_end": self.b64(end),
                                       "keys_only": True})
        import base64
        return [base64.b64decode(kv["key"]).decode() for kv in r.json().get("kvs", [])]

    def values(self, prefix):
        """{key: value bytes} of the keys under prefix."""
        import base64
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        r = self._any("/v3/kv/range", {"key": self.b64(prefix), "range_end": self.b64(end)})
        return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", ""))
                for kv in r.json().get("kvs", [])}

    def parts(self, prefix):
        """The keys under prefix whose entries are parts of a large change (log_part.h)."""
        return sorted(k for k, v in self.values(prefix).items() if v.startswith(b"OFCDPART"))

    def revision(self):
        r = self._any("/v3/kv/range", {"key": self.b64("/probe")})
        return int(r.json()["header"]["revision"])

    def status(self, i):
        return requests.post(self.client[i] + "/v3/maintenance/status", json={}, timeout=3).json()

    def move_leader_off(self, i):
        """Makes another member etcd's Raft leader, if member i leads (MoveLeader)."""
        st = self.status(i)
        if st.get("leader") != st["header"]["member_id"]:
            return
        target = self.status((i + 1) % len(self.client))["header"]["member_id"]
        r = requests.post(self.client[i] + "/v3/maintenance/transfer-leadership",
                          json={"targetID": target}, timeout=10)
        r.raise_for_status()
        deadline = time.time() + 10
        while self.status(i).get("leader") == st["header"]["member_id"]:
            if time.time() > deadline:
                raise RuntimeError("etcd leadership did not move")
            time.sleep(0.05)

    def compact(self, revision):
        return self._any("/v3/kv/compaction", {"revision": str(revision), "physical": True})


class HoldingProxy:
    """A TCP proxy in front of one etcd member that holds one request back, as a slow network
    or a member that hung would: its client gets no answer and tries the next member, and the
    request reaches etcd only when the test releases it. Or that lets one through and loses
    its answer, as a member that dies right after would; or answers one with an error, as
    etcd does a request it does not take. Requests pass whole (evhttp sends a
    Content-Length); answers, watch streams too, pass as bytes."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.lsock.getsockname()[1]}"
        self.lock = threading.Lock()
        self.match = None
        # What happens to the request matched: hold, late, lose (its answer), refuse,
        # refuse_late.
        self.mode = "hold"
        self.socks = []  # both ends of every connection, cut by close()
        self.held = None  # (path, body) of the request held back, or whose answer was lost
        self.forward = threading.Event()  # late: send the held request to etcd
        self.answer = threading.Event()  # late: give its client the answer
        self.sent = threading.Event()  # late: etcd answered the held request
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self, match):
        """Holds back the next request for which match(path, body) is true."""
        with self.lock:
            self.match, self.held, self.mode = match, None, "hold"

    def lose_answer(self, match):
        """Lets the next request for which match(path, body) is true reach etcd, then drops
        its connection before the answer: its client cannot tell it got through."""
        with self.lock:
            self.match, self.held, self.mode = match, None, "lose"

    def refuse(self, match):
        """Answers the next request for which match(path, body) is true with an error of its
        own, as etcd answers a request it does not take: it never reaches etcd."""
        with self.lock:
            self.match, self.held, self.mode = match, None, "refuse"

    def refuse_late(self, match):
        """Holds back the next request for which match(path, body) is true until forward is
        set, then answers it with an error as refuse() does: it never reaches etcd."""
        with self.lock:
            self.match, self.held, self.mode = match, None, "refuse_late"
            self.forward.clear()

    def late(self, match):
        """Holds back the next request for which match(path, body) is true, on its own
        connection: it reaches etcd when forward is set, and its client gets the answer
        when answer is set (an etcd member slow to apply it). Its client gives up on the
        call after its timeout, as from any member that does not answer."""
        with self.lock:
            self.match, self.held, self.mode = match, None, "late"
            self.forward.clear()
            self.answer.clear()
            self.sent.clear()

    def release(self):
        """Sends the held request to etcd now; its answer, parsed."""
        return self._send(*self.held).json()

    def _send(self, path, body):
        return requests.post(self.upstream + path, data=body, timeout=10,
                             headers={"Content-Type": "application/json"})

    def close(self):
        """Stops listening and cuts every connection through it (their threads end)."""
        with self.lock:
            socks, self.socks = [self.lsock] + self.socks, []
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        host, port = self.upstream.rsplit("/", 1)[1].split(":")
        try:
            u = socket.create_connection((host, int(port)))
        except OSError:
            c.close()
            return
        with self.lock:
            self.socks += [c, u]
        threading.Thread(target=self._pipe, args=(u, c), daemon=True).start()
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = c.recv(65536)
                    if not data:
                        return
                    buf += data
                head, rest = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                n = sum(int(v) for k, _, v in (line.partition(":") for line in lines[1:])
                        if k.strip().lower() == "content-length")
                while len(rest) < n:
                    data = c.recv(65536)
                    if not data:
                        return
                    rest += data
                path, body, buf = lines[0].split(" ")[1], rest[:n], rest[n:]
                with self.lock:
                    held = self.match is not None and self.match(path, body)
                    if held:
                        self.match, self.held = None, (path, body)
                if held and self.mode == "refuse_late":
                    self.forward.wait()
                if held and self.mode in ("refuse", "refuse_late"):
                    err = json.dumps({"error": "refused", "code": 9, "message": "refused"})
                    c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n%s" % (len(err), err.encode()))
                    continue
                if held and self.mode == "late":
                    self.forward.wait()
                    r = self._send(path, body)
                    self.sent.set()
                    self.answer.wait()
                    c.sendall(b"HTTP/1.1 %d OK\r\nContent-Type: application/json\r\n"
                              b"Content-Length: %d\r\n\r\n%s" % (r.status_code, len(r.content),
                                                                    r.content))
                    continue
                if held and self.mode == "lose":
                    self._send(path, body)
                    return  # the connection drops: the answer never comes
                if held:
                    while c.recv(65536):
                        pass  # nothing more goes through here: the client gives up
                    return
                u.sendall(head + b"\r\n\r\n" + body)
        except OSError:
            pass
        finally:
            c.close()
            u.close()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)


class Member(Daemon):
    """One ofcd of the cluster."""

    def __init__(self, tmp_path, name, etcd, ttl=1, prefix="/ofcd/test", extra="",
                 endpoints=None):
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.etcd = etcd
        self.cluster_text = ""
        super().__init__(tmp_path)
        self.cluster_text = (f"[cluster]\netcd = {endpoints or etcd.endpoints()}\nname = {name}\n"
                             f"advertise = http://127.0.0.1:{self.port}\nlease_ttl = {ttl}\n"
                             f"prefix = {prefix}\n") + extra
        self.write_config(extra=self.cluster_text)

    def cluster(self):
        return self.get("/v1/cluster").json()

    def metric(self, sample):
        """The value of one sample of /metrics (name with its labels), None when absent."""
        for line in self.get("/metrics").text.splitlines():
            if line.startswith(sample + " "):
                return float(line.split()[-1])
        return None

    def rows(self, table):
        """A table of this member's store, read with sqlite3 beside it, sorted."""
        db = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True, timeout=10)
        try:
            cols = [c[1] for c in db.execute(f"PRAGMA table_info({table})")]
            # The reconciler's columns of fabric reach followers late and are not compared.
            keep = [c for c in cols
                    if not (table == "fabric" and c in ("state", "error", "updated"))]
            if not keep:
                return []  # a table this store does not have
            return sorted(db.execute(f"SELECT {', '.join(keep)} FROM {table}").fetchall())
        finally:
            db.close()

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.logf.close()


def assert_same_tables(leader, members, timeout=30):
    """Every member applies up to the leader's revision and then holds the leader's rows."""
    rev = leader.cluster()["applied_revision"]
    for m in members:
        wait_for(lambda m=m: m.cluster()["applied_revision"] >= rev, timeout=timeout)
    for t in REPLICATED:
        want = leader.rows(t)
        for m in members:
            assert m.rows(t) == want, f"{m.name}: table {t} differs from the leader's"


def make_members(tmp_path, etcd, n=3, ttl=1, **kw):
    return [Member(tmp_path / f"m{i}", f"ofcd-{chr(97 + i)}", etcd, ttl=ttl, **kw)
            for i in range(n)]


def kill_members(members):
    """Kills each member still running (woken first if stopped)."""
    for m in members:
        if m.proc and m.proc.poll() is None:
            m.proc.send_signal(signal.SIGCONT)
        m.stop(sig=9)


@contextlib.contextmanager
def running_members(tmp_path, etcd, **kw):
    """make_members(), all started; killed on the way out."""
    members = make_members(tmp_path, etcd, **kw)
    try:
        for m in members:
            m.start()
        yield members
    finally:
        kill_members(members)


def topology(servers, devices=2, ports_per_device=1, units=2):
    """servers on sim units, wired plane-per-ocs; each unit has 4 ports per server."""
    return {
        "ocs": [{"name": f"u{i}", "driver": "sim", "ports": 4 * servers, "endpoint": ""}
                for i in range(units)],
        "servers": [{"name": f"s{i}", "devices": devices, "ports_per_device": ports_per_device,
                     "p2p": False, "intra": "full-mesh"} for i in range(servers)],
        "wiring": {"rule": "plane-per-ocs"},
    }


def put_on_leader(members, path, body, deadline_s=60, **kw):
    """PUT path on the leader, again while leadership moves (307, 503, 504 or a dropped
    connection): a PUT made twice is made once, so the elections of a loaded machine do not
    fail a test that is about something else. kw goes to the request (timeout=...)."""
    deadline = time.time() + deadline_s
    while True:
        r = None
        try:
            r = wait_leader(members, timeout=max(1, deadline - time.time())).put(path, body, **kw)
            if r.status_code not in (307, 503, 504):
                return r
        except requests.RequestException:
            pass
        if time.time() > deadline:
            raise AssertionError(f"PUT {path} not taken: {r.text[:300] if r else 'no answer'}")
        time.sleep(0.2)


def wait_leader(members, timeout=15, exclude=()):
    """The one member that leads, once every running member agrees on it."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        running = [m for m in members if m.proc and m.proc.poll() is None and m not in exclude]
        views = []
        for m in running:
            try:
                views.append(m.cluster())
            except requests.RequestException:
                views.append(None)
        leaders = [m for m, v in zip(running, views) if v and v["role"] == "leader"]
        if len(leaders) == 1 and all(v and v.get("leader") == leaders[0].name for v in views):
            return leaders[0]
        time.sleep(0.05)
    raise AssertionError("no single leader: " + json.dumps(
        [m.cluster() if m.proc.poll() is None else None for m in members]))
