"""A cluster under a scheduler's ordinary traffic: a job's fabric created, then deleted
without ?wait= (what a Slurm epilog does), on one keep-alive connection, again and
again. Every member stays alive and holds the same tables as the leader."""
import json
import os
import socket
import threading

import pytest
import requests

from ha_lab import ETCD_BIN, Etcd, assert_same_tables, running_members, wait_for, wait_leader

pytestmark = pytest.mark.skipif(not os.access(ETCD_BIN, os.X_OK), reason="etcd not installed")


def topo16():
    return {
        "ocs": [{"name": f"u{i}", "driver": "sim", "ports": 64, "endpoint": ""} for i in range(2)],
        "servers": [{"name": f"s{i}", "devices": 8, "ports_per_device": 1, "p2p": False,
                     "intra": "full-mesh"} for i in range(16)],
        "wiring": {"rule": "plane-per-ocs"},
    }


@pytest.fixture
def etcd():
    e = Etcd().start()
    yield e
    e.stop()


# lease_ttl = 4 in both tests: they write through one leader, once each, and compare with
# it; a busy machine's etcd fsync makes a leader of a 1 s lease step down now and then.


def test_epilog_deletes_without_wait_keep_every_member_alive(tmp_path, etcd):
    with running_members(tmp_path, etcd, ttl=4) as members:
        leader = wait_leader(members)
        assert leader.put("/v1/topology", topo16()).status_code == 200
        s = requests.Session()
        for rnd in range(12):
            a, b = (2 * rnd) % 16, (2 * rnd + 1) % 16
            name = f"slurm-{rnd}"
            r = s.post(leader.url("/v1/fabrics"),
                       json={"name": name, "servers": [f"s{a}", f"s{b}"]}, timeout=10)
            assert r.status_code == 201, r.text
            r = s.delete(leader.url(f"/v1/fabrics/{name}"), timeout=10)
            assert r.status_code in (200, 202), r.text
        # One more that stays, so that the followers have something to show.
        r = s.post(leader.url("/v1/fabrics?wait=10"), json={"name": "kept",
                                                             "servers": ["s0", "s1", "s2"]})
        assert r.status_code == 201 and r.json()["state"] == "applied", r.text
        for m in members:
            assert m.proc.poll() is None, f"{m.name} died: " + m.log()[-2000:]
        assert_same_tables(leader, members, timeout=10)
        for m in members:
            assert "conflicts with this store" not in m.log()
            # Every member followed each change row by row: no store was read whole again.
            assert m.metric("ofcd_cluster_apply_conflicts_total") == 0, m.name
            assert m.metric("ofcd_cluster_invariant_violations_total") == 0, m.name
            assert m.metric('ofcd_desired_reloads_total{what="circuits"}') == 0, m.name
            assert m.metric('ofcd_desired_reloads_total{what="owners"}') == 0, m.name


class Stream:
    """One client of GET /v1/events on a member, read in a thread of its own (a plain
    socket, which close() can stop at once; HTTP/1.0, so the stream comes unchunked)."""

    def __init__(self, member, last=None):
        self.events = []
        self.stop = threading.Event()
        self.opened = threading.Event()  # the reply's headers came: the member subscribed
        self.sock = socket.create_connection(("127.0.0.1", member.port), timeout=5)
        extra = f"Last-Event-ID: {last}\r\n" if last else ""
        self.sock.sendall(f"GET /v1/events HTTP/1.0\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode())
        self.sock.settimeout(0.2)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        buf, cur, body = b"", {}, False
        while not self.stop.is_set():
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                line = raw.decode(errors="replace").rstrip("\r")
                if not body:
                    body = line == ""  # the end of the reply's headers
                    if body:
                        self.opened.set()
                    continue
                if line == "":
                    if cur:
                        self.events.append(cur)
                    cur = {}
                elif ": " in line and not line.startswith(":"):
                    key, _, value = line.partition(": ")
                    cur[key] = value

    def numbered(self):
        """The events with an id: (id, kind, data without its time)."""
        out = []
        for e in list(self.events):
            if "id" in e and "event" in e:
                data = json.loads(e["data"])
                data.pop("time", None)
                out.append((e["id"], e["event"], data))
        return out

    def close(self):
        self.stop.set()
        self.t.join(timeout=5)
        self.sock.close()


def test_every_member_publishes_the_same_events(tmp_path, etcd):
    """Fabric states and operations show on every member's stream under the leader's ids,
    and a client resumes a stream of one member on another with Last-Event-ID."""
    with running_members(tmp_path, etcd, ttl=4) as members:
        leader = wait_leader(members)
        assert leader.put("/v1/topology", topo16()).status_code == 200
        streams = {m.name: Stream(m) for m in members}
        try:
            # Subscribed before the first write: a member that had not yet read the request
            # would start its stream after the first events.
            assert all(s.opened.wait(10) for s in streams.values())
            for i in range(3):
                r = leader.post("/v1/fabrics?wait=10",
                                {"name": f"e{i}", "servers": [f"s{2 * i}", f"s{2 * i + 1}"]})
                assert r.status_code == 201 and r.json()["state"] == "applied", r.text

            def applied_everywhere():
                return all(sum(1 for _, kind, d in s.numbered() if kind == "fabric_state"
                               and d.get("state") == "applied") >= 3 for s in streams.values())
            wait_for(applied_everywhere, timeout=15)
            kinds = ("fabric", "fabric_state", "operation")
            want = [e for e in streams[leader.name].numbered() if e[1] in kinds]
            assert want and all(e[0].startswith("g") for e in want)
            for name, s in streams.items():
                got = [e for e in s.numbered() if e[1] in kinds]
                assert got[:len(want)] == want, name
            # A member's own role changes carry no id: the others do not have them.
            assert all("id" not in e for s in streams.values() for e in s.events
                       if e.get("event") == "cluster_role")
        finally:
            for s in streams.values():
                s.close()
        # Resumed on a follower after the leader's first event: the rest, same ids.
        follower = next(m for m in members if m is not leader)
        resumed = Stream(follower, last=want[0][0])
        try:
            def rest():
                return [e for e in resumed.numbered() if e[1] in kinds]

            wait_for(lambda: len(rest()) >= len(want) - 1, timeout=10)
            assert rest()[:len(want) - 1] == want[1:]
            assert all(e.get("event") != "reset" for e in resumed.events)
        finally:
            resumed.close()
        # An id no member kept: told to read the state again.
        stale = Stream(follower, last="g1-999999")
        try:
            wait_for(lambda: any(e.get("event") == "reset" for e in stale.events), timeout=10)
        finally:
            stale.close()
