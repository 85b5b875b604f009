"""High availability (docs/ha.md): three ofcd on a three-member etcd, on loopback.

One leader takes writes and drives the units; followers redirect writes and
apply the replicated log; a killed leader is replaced with nothing
acknowledged lost; without an etcd quorum writes are refused and reads go on.
"""
import base64
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import threading
import time

import pytest
import requests

from conftest import ADMIN, Daemon, error_of, free_port
from ha_lab import (Etcd, HoldingProxy, assert_same_tables, make_members, put_on_leader,
                    running_members, topology, wait_for, wait_leader, ETCD_BIN)

OFCCTL_BIN = os.environ.get("OFCCTL_BIN", os.path.join(os.path.dirname(__file__), "../../build/ofcctl"))

pytestmark = pytest.mark.skipif(not os.access(ETCD_BIN, os.X_OK), reason="etcd not installed")


@pytest.fixture
def etcd():
    e = Etcd().start()
    yield e
    e.stop()


@pytest.fixture
def cluster(tmp_path, etcd):
    with running_members(tmp_path, etcd) as members:
        yield members


@pytest.fixture
def steady_cluster(tmp_path, etcd):
    """For the tests about replication, not failover, which name who leads across several
    steps: a leader steps down after a stall of 2.7 s (lease_ttl = 4, as test_cluster.c's),
    not of 0.67 s, which a busy machine's etcd fsync makes now and then."""
    with running_members(tmp_path, etcd, ttl=4) as members:
        yield members


# A step-down that only a lease not renewed in time explains (a late renewal on a busy
# machine): the one reason a test lets the leadership move where nothing else should move it.
LEASE_LAPSE = "stepping down: the lease could not be renewed in time"


def followers(members, leader):
    return [m for m in members if m is not leader and m.proc.poll() is None]


def names(m, what="fabrics"):
    return sorted(x["name"] for x in m.get(f"/v1/{what}").json()[what])


def test_cluster_section_checked(tmp_path):
    d = Daemon(tmp_path, extra="[cluster]\netcd = http://127.0.0.1:2379\n")
    d.start(wait=False)
    assert d.proc.wait(timeout=10) != 0
    assert "[cluster] etcd needs [cluster] name and advertise" in d.log()


def test_standalone_cluster_view(daemon):
    assert daemon.get("/v1/cluster").json() == {
        "self": None, "role": "standalone", "leader": None, "leader_advertise": None,
        "generation": 0, "members": [],
        "revision": 0,
        "applied_revision": 0, "etcd_reachable": False}


def follow_events(member, got, opened):
    """Appends (event, data) of member's stream to got until the member stops."""
    try:
        with requests.get(member.url("/v1/events"), stream=True, timeout=30) as r:
            opened.set()
            kind = None
            for line in r.iter_lines(decode_unicode=True):
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    got.append((kind, json.loads(line[6:])))
    except requests.RequestException:
        pass  # the fixture stops the members


def test_one_leader_and_writes_through_a_follower(steady_cluster):
    cluster = steady_cluster
    leader = wait_leader(cluster)
    view = leader.cluster()
    assert view["self"] == leader.name and view["role"] == "leader" and view["etcd_reachable"]
    f = followers(cluster, leader)[0]
    events, opened = [], threading.Event()
    threading.Thread(target=follow_events, args=(f, events, opened), daemon=True).start()
    assert opened.wait(10)
    # A follower sends writes to the leader, query included: curl -L and ofcctl follow.
    r = f.put("/v1/topology", topology(8))
    assert r.status_code == 200, r.text
    r = requests.post(f.url("/v1/fabrics?wait=10"), json={"name": "job", "servers": ["s0", "s1"]},
                      allow_redirects=False, timeout=10)
    assert r.status_code == 307
    assert r.headers["Location"] == leader.url("/v1/fabrics?wait=10")
    assert r.json()["leader"] == leader.url("")
    r = f.post("/v1/fabrics?wait=10", {"name": "job", "servers": ["s0", "s1"]})
    assert r.status_code == 201 and r.json()["state"] == "applied", r.text
    # A URL too long to redirect whole is not cut short (that would be another request).
    r = requests.delete(f.url("/v1/fabrics/" + "%FF" * 300), allow_redirects=False, timeout=10)
    assert r.status_code == 503 and error_of(r)["code"] == "not_leader", r.text
    assert leader.url("") in error_of(r)["message"]
    # So does a read that waits for the reconciler, which only the leader runs.
    r = requests.get(f.url("/v1/fabrics/job?wait=5"), allow_redirects=False, timeout=10)
    assert r.status_code == 307 and r.headers["Location"] == leader.url("/v1/fabrics/job?wait=5")
    assert f.get("/v1/fabrics/job?wait=5").json()["state"] == "applied"
    # Which of a server's ports a unit may still join only the leader knows.
    r = requests.get(f.url("/v1/servers/s0?wait=5"), allow_redirects=False, timeout=10)
    assert r.status_code == 307 and r.headers["Location"] == leader.url("/v1/servers/s0?wait=5")
    assert f.get("/v1/servers/s0?wait=5").json()["joined"] == []
    r = requests.get(f.url("/v1/servers?joined=true"), allow_redirects=False, timeout=10)
    assert r.status_code == 307 and r.headers["Location"] == leader.url("/v1/servers?joined=true")
    wait_for(lambda: f.get("/v1/servers/s0").status_code == 200)
    assert "joined" not in f.get("/v1/servers/s0").json()
    # A read that must not lag what was acknowledged is the leader's (?consistent=true).
    for path in ("/v1/fabrics?consistent=true", "/v1/fabrics/job?view=summary&consistent=true"):
        r = requests.get(f.url(path), allow_redirects=False, timeout=10)
        assert r.status_code == 307 and r.headers["Location"] == leader.url(path), r.text
        assert leader.get(path).status_code == 200
    r = f.get("/v1/fabrics?consistent=yes")
    assert r.status_code == 400 and error_of(r)["field"] == "consistent", r.text
    p = subprocess.run([OFCCTL_BIN, "--url", f.url(""), "-o", "json", "fabric", "list",
                        "--consistent"], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "HOME": str(f.dir)})
    assert p.returncode == 0 and [x["name"] for x in json.loads(p.stdout)["fabrics"]] == ["job"]
    # Reads are served by each member from its own store, once the log reached it.
    for m in cluster:
        wait_for(lambda: names(m) == ["job"])
        assert len(m.get("/v1/servers").json()["servers"]) == 8
    # The reconciler's fabric states travel too.
    for m in followers(cluster, leader):
        wait_for(lambda: m.get("/v1/fabrics/job").json()["state"] == "applied")
    # Every member knows every other and how far it has applied the log.
    def converged():
        views = [m.cluster() for m in cluster]
        revs = {m["name"]: m["applied_revision"] for m in views[0]["members"]}
        return len(revs) == 3 and len(set(revs.values())) == 1 and all(
            v["leader"] == leader.name for v in views)
    wait_for(converged, timeout=10)
    roles = sorted(m["role"] for m in leader.cluster()["members"])
    assert roles == ["follower", "follower", "leader"]
    # ofcctl sent to a follower follows the redirect, body and all.
    p = subprocess.run([OFCCTL_BIN, "--url", f.url(""), "fabric", "create", "job2", "s[4-5]",
                        "--wait", "10"], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "HOME": str(f.dir)})
    assert p.returncode == 0, p.stderr
    assert "applied" in p.stdout
    assert leader.delete("/v1/fabrics/job2?wait=10").status_code == 200
    # A refusal on the leader changes nothing anywhere.
    r = f.post("/v1/fabrics", {"name": "job", "servers": ["s2", "s3"]})
    assert r.status_code == 409
    time.sleep(0.3)
    for m in cluster:
        assert names(m) == ["job"]
    # A follower's stream tells every change the leader made, as the leader's does.
    changes = [("topology", "topology", "updated"), ("fabric", "job", "created"),
               ("fabric", "job2", "created"), ("fabric", "job2", "deleted")]
    wait_for(lambda: [(k, e.get("fabric", e.get("resource")), e["change"])
                      for k, e in list(events) if k in ("fabric", "topology")] == changes)


def log_metrics(m):
    """This member's appends by kind, and how often the fabric states rode along."""
    text = m.get("/metrics").text
    got = {}
    for line in text.splitlines():
        if line.startswith("ofcd_cluster_log_entries_total{kind="):
            got[line.split('"')[1]] = int(float(line.split()[-1]))
        elif line.startswith("ofcd_cluster_states_along_total "):
            got["along"] = int(float(line.split()[-1]))
        elif line.startswith("ofcd_cluster_role_changes_total "):
            got["roles"] = int(float(line.split()[-1]))
    return got


def log_metrics_all(members):
    """log_metrics() summed over the members: whoever leads appends, and on a loaded machine
    leadership may move during a test."""
    got = {}
    for m in members:
        for k, v in log_metrics(m).items():
            got[k] = got.get(k, 0) + v
    return got


def test_ofcctl_takes_its_token_to_the_leader(tmp_path, etcd):
    # With tokens, a write sent to a follower reaches the leader through a 307 that libcurl
    # follows without the token (a careful client's rule): ofcctl then asks the follower
    # who its members are and, the leader being one, sends the write there with it.
    members = make_members(tmp_path, etcd, ttl=4)
    try:
        for m in members:
            m.tokens = True
            m.write_config(tokens=True, extra=m.cluster_text + f"token = {ADMIN}\n")
            m.start()
        leader = wait_leader(members)
        assert leader.put("/v1/topology", topology(8)).status_code == 200
        f = followers(members, leader)[0]
        wait_for(lambda: server_count(f) == 8)
        token = tmp_path / "token"
        token.write_text(ADMIN)
        token.chmod(0o600)
        p = subprocess.run([OFCCTL_BIN, "--url", f.url(""), "--token-file", str(token),
                            "fabric", "create", "job", "s[0-1]", "--wait", "10"],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "HOME": str(tmp_path)})
        assert p.returncode == 0, p.stderr
        assert "applied" in p.stdout
    finally:
        for m in members:
            m.stop(sig=9)


def test_ofcctl_passes_over_a_frozen_leader(steady_cluster, tmp_path):
    # A follower redirects writes to its leader until that leader's lease lapses (up to
    # lease_ttl, 4 s here). With the leader frozen (a paused machine), ofcctl probes it
    # before sending the write there, finds no answer, and waits for the next leader: the
    # code before sent the write into the frozen leader and waited out its 30 s timeout,
    # the outcome unknown (exit 4).
    leader = wait_leader(steady_cluster)
    assert leader.put("/v1/topology", topology(8)).status_code == 200
    rest = followers(steady_cluster, leader)
    for m in rest:
        wait_for(lambda m=m: server_count(m) == 8)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OFCCTL_") and k != "XDG_CONFIG_HOME"}
    env["HOME"] = str(tmp_path)
    urls = ",".join(m.url("") for m in rest + [leader])
    leader.proc.send_signal(signal.SIGSTOP)
    try:
        p = subprocess.run([OFCCTL_BIN, "--url", urls, "--retry", "60", "fabric", "create",
                            "job", "s[0-1]"], capture_output=True, text=True, timeout=120,
                           env=env)
    finally:
        leader.proc.send_signal(signal.SIGCONT)
    assert p.returncode == 0, p.stderr
    assert wait_leader(steady_cluster) is not leader
    for m in steady_cluster:
        wait_for(lambda m=m: names(m) == ["job"])


def test_writes_take_fabric_states_along(cluster, etcd):
    assert put_on_leader(cluster, "/v1/topology", topology(40)).status_code == 200

    # An entry is counted when it is sent, and is a key once etcd took it: on a busy machine
    # one still on its way (the topology's trailing states) is in one count and not the
    # other. Read both once they have stood still.
    def still():
        a = (len(etcd.keys("/ofcd/test/log/")), log_metrics_all(cluster))
        time.sleep(0.5)
        b = (len(etcd.keys("/ofcd/test/log/")), log_metrics_all(cluster))
        return a if a == b else None

    before, m0 = wait_for(still)
    # Each create's fabric states are committed while the next create waits its turn: they
    # share its entry instead of taking a Raft round of their own. The creates come at once,
    # so that one always waits, however slowly this machine's client sends them.
    def create(i):
        return put_on_leader(cluster, f"/v1/fabrics/j{i:02}",
                             {"servers": [f"s{2 * i}", f"s{2 * i + 1}"]})

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        for r in pool.map(create, range(20)):
            assert r.status_code in (200, 201), r.text
    for m in cluster:
        wait_for(lambda: [f["state"] for f in m.get("/v1/fabrics").json()["fabrics"]] ==
                 ["applied"] * 20)
    # Every entry in the log is counted, as a write or as states: read both until a states
    # entry still on its way (the last ones ride 20 ms behind) has landed, on a busy machine.
    def counted():
        m1 = log_metrics_all(cluster)
        d = {k: m1[k] - m0.get(k, 0) for k in m1}
        entries = len(etcd.keys("/ofcd/test/log/")) - before
        # Leadership moved: an entry whose leader was fenced out is missing, or in the log
        # twice (sent again under the next generation); the counts no longer add up.
        return d if d["roles"] or entries == d["write"] + d["states"] else None

    d = wait_for(counted)
    assert d["part"] == 0 and (d["write"] == 20 or d["roles"] and d["write"] > 20), d
    assert d["along"] >= 10, d  # apart: 0, and a states entry after most writes
    # The leader timed each write's handler, each entry's round trip and each apply.
    stages = {}
    for m in cluster:
        for line in m.get("/metrics").text.splitlines():
            if line.startswith("ofcd_cluster_write_stage_seconds_count{stage="):
                k = line.split('"')[1]
                stages[k] = stages.get(k, 0) + int(line.split()[-1])
    assert min(stages.get(k, 0) for k in ("handler", "log", "apply")) >= 21, stages


def test_follower_reloads_its_configuration(steady_cluster):
    cluster = steady_cluster
    leader = wait_leader(cluster)
    f = followers(cluster, leader)[0]
    # A follower runs no reconciler: a new audit interval waits for it to lead.
    f.write_config(extra=f.cluster_text + "[reconcile]\naudit_interval = 7\n")
    f.send_signal(signal.SIGHUP)
    wait_for(lambda: "configuration reloaded" in f.log(), timeout=5)
    assert f.proc.poll() is None and f.cluster()["role"] == "follower"


def test_role_changes_are_events_and_metrics(cluster):
    leader = wait_leader(cluster)
    text = leader.get("/metrics").text
    assert "ofcd_cluster_leader 1" in text and "ofcd_cluster_etcd_reachable 1" in text
    fs = followers(cluster, leader)
    assert "ofcd_cluster_leader 0" in fs[0].get("/metrics").text
    # A follower's event stream shows it taking over when the leader goes. Every member is
    # listened to: on a busy machine the leadership may move before the kill.
    got = {m.name: [] for m in cluster}

    def listen(f):
        try:
            stream(f)
        except requests.RequestException:
            pass  # the fixture stops the members

    def stream(f):
        with requests.get(f.url("/v1/events"), stream=True, timeout=20) as r:
            kind = None
            for line in r.iter_lines():
                if line.startswith(b"event:"):
                    kind = line.split(b":", 1)[1].strip()
                elif line.startswith(b"data:") and kind == b"cluster_role":
                    got[f.name].append(json.loads(line.split(b":", 1)[1]))
                    if got[f.name][-1]["role"] == "leader":
                        return

    threads = {m.name: threading.Thread(target=listen, args=(m,), daemon=True) for m in cluster}
    for t in threads.values():
        t.start()
    time.sleep(0.3)
    leader = wait_leader(cluster)  # the one that leads now is the one killed
    leader.kill9()
    new = wait_leader(cluster, exclude=(leader,))
    threads[new.name].join(timeout=10)
    seen = got[new.name]
    assert [g["role"] for g in seen][-2:] == ["candidate", "leader"], seen
    assert seen[-1]["self"] == new.name and seen[-1]["generation"] > 0
    assert "ofcd_cluster_leader 1" in new.get("/metrics").text


def test_a_new_leader_keeps_a_deleted_fabrics_servers_until_it_reads_the_unit(cluster):
    # A unit that does not answer (a closed port) may hold a fabric's circuits; the leader
    # that deleted the fabric dies. The next leader never read the unit and has no read-back
    # of its own: what the log told its mirror (the deleted circuits) must keep the servers
    # out of a new fabric, or it would join them to the old one's. (The code before: 201.)
    leader = wait_leader(cluster)
    topo = topology(4)
    topo["ocs"] = [{"name": "dark", "driver": "openflow", "ports": 16,
                    "endpoint": f"tcp:127.0.0.1:{free_port()}"}]
    assert leader.put("/v1/topology", topo).status_code == 200
    assert leader.post("/v1/fabrics", {"name": "a", "servers": ["s0", "s1"]}).status_code == 201
    assert leader.delete("/v1/fabrics/a").status_code == 202
    for m in followers(cluster, leader):
        wait_for(lambda m=m: names(m) == [])
    leader.kill9()
    new = wait_leader(cluster, exclude=(leader,))
    r = new.post("/v1/fabrics", {"name": "b", "servers": ["s1", "s2"]})
    assert r.status_code == 409, r.text
    assert "may still join" in error_of(r)["message"]
    assert "a circuit of fabric a; the unit has not been read back yet" in error_of(r)["message"]
    assert [s["name"] for s in new.get("/v1/servers?joined=true").json()["servers"]] == \
        ["s0", "s1"]
    # Servers no former circuit touched are free.
    assert new.post("/v1/fabrics", {"name": "c", "servers": ["s2", "s3"]}).status_code == 201


def test_followers_forget_former_circuits_the_leader_found_gone(cluster):
    # Followers read no unit back: each circuit a deletion removed stayed in their mirrors
    # as a former entry for as long as they followed (memory, and work on every later
    # deletion, growing with the cluster's history). The leader's read-backs now tell them
    # which went; those of a unit it cannot read stay (see the test above).
    leader = wait_leader(cluster)
    assert leader.put("/v1/topology", topology(8)).status_code == 200
    for i in range(4):
        body = {"name": f"f{i}", "servers": [f"s{2 * i}", f"s{2 * i + 1}"]}
        assert leader.post("/v1/fabrics?wait=10", body).status_code == 201
        assert leader.delete(f"/v1/fabrics/f{i}").status_code in (200, 202)
    for m in cluster:
        wait_for(lambda m=m: names(m) == [])
        wait_for(lambda m=m: m.metric("ofcd_desired_former_entries") == 0, timeout=20)


PER_ROUND = 60  # fabrics created per round: the kill comes in the middle of them


def test_kill_leader_during_burst_loses_nothing(cluster):
    leader = wait_leader(cluster)
    assert leader.put("/v1/topology", topology(400)).status_code == 200
    acked, refused, unknown = set(), set(), set()

    def burst(first, worker):
        s = requests.Session()
        for i in range(first + worker, first + PER_ROUND, 2):
            name = f"f{i}"
            body = {"name": name, "servers": [f"s{2 * i}", f"s{2 * i + 1}"]}
            for _ in range(60):  # every member in turn, until one answers
                m = cluster[(i + _) % 3]
                try:
                    r = s.post(m.url("/v1/fabrics"), json=body, timeout=10)
                except requests.RequestException:
                    unknown.add(name)
                    continue
                if r.status_code == 201:
                    acked.add(name)
                    break
                if r.status_code == 409:
                    break  # an earlier try without an answer got in
                if r.status_code == 504:
                    unknown.add(name)  # outcome_unknown: read it back
                    continue
                if r.status_code == 503:
                    refused.add(name)
                    time.sleep(0.05)
                    continue
                raise AssertionError(r.text)

    # Three leaders in turn are killed in the middle of a burst of creations.
    for rnd in range(3):
        threads = [threading.Thread(target=burst, args=(PER_ROUND * rnd, w)) for w in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.1)
        leader = wait_leader(cluster)  # on a busy machine the leadership may have moved
        leader.kill9()
        for t in threads:
            t.join(timeout=60)
        new = wait_leader(cluster, exclude=(leader,))
        mark = len(new.log())
        assert new is not leader
        have = set(names(new))
        # The kill came while fabrics were still being created.
        assert len(acked) < PER_ROUND * (rnd + 1) or unknown or refused, "burst ended before"
        assert acked <= have, f"acknowledged but lost: {acked - have}"
        # A name refused and never acknowledged nor cut off is nowhere.
        assert not ((refused - acked - unknown) & have)
        for m in followers(cluster, new):
            wait_for(lambda: set(names(m)) == have)
        # The old leader rejoins as a follower and catches up. It takes nothing from a leader
        # in good standing: only a renewal of new's that came too late moves the leadership.
        leader.start()
        wait_for(lambda: set(names(leader)) == have and leader.cluster()["role"] != "candidate")
        now = wait_leader(cluster)
        assert now is new or LEASE_LAPSE in new.log()[mark:], now.name
        assert leader.cluster()["role"] == "follower" or LEASE_LAPSE in new.log()[mark:]
        leader = now
    # Writes through a follower reach the leader, and come back through the log.
    f = followers(cluster, leader)[0]
    r = f.post("/v1/fabrics?wait=10", {"name": "after", "servers": ["s398", "s399"]})
    assert r.status_code == 201 and r.json()["state"] == "applied", r.text
    wait_for(lambda: "after" in names(f))


@contextlib.contextmanager
def e0_about_to_fail(tmp_path, etcd, ttl):
    """Members with a topology, led by one, e0 (the endpoint every member tries first) not
    etcd's Raft leader: losing etcd's own leader makes etcd elect another (about a second
    here) and stalls renewals meanwhile, which a lease this short does not outlast (safely,
    docs/ha.md). Yields (members, leader)."""
    etcd.move_leader_off(0)
    with running_members(tmp_path, etcd, ttl=ttl) as members:
        leader = wait_leader(members)
        assert leader.put("/v1/topology", topology(8)).status_code == 200
        etcd.move_leader_off(0)  # again: a loaded etcd may have elected e0 since
        yield members, leader


@contextlib.contextmanager
def hung(etcd, i):
    """etcd member i answers nothing but keeps its connections (a stalled disk)."""
    etcd.procs[i].send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        etcd.procs[i].send_signal(signal.SIGCONT)


def test_etcd_member_lost_changes_nothing(tmp_path, etcd):
    with e0_about_to_fail(tmp_path, etcd, ttl=2) as (members, leader):
        etcd.kill(0)
        r = leader.post("/v1/fabrics?wait=10", {"name": "a", "servers": ["s0", "s1"]})
        assert r.status_code == 201, r.text
        time.sleep(3)  # more than a lease TTL: renewals go to the other members
        assert wait_leader(members) is leader
        assert leader.cluster()["etcd_reachable"] is True
        for m in members:
            wait_for(lambda: names(m) == ["a"])


def test_deleting_the_leader_key_moves_the_leadership(tmp_path, etcd):
    # An operator's `etcdctl del PREFIX/leader` while the leader's lease lives on: the
    # leader must stop leading at once, or two members lead (and drive units) together.
    with running_members(tmp_path, etcd, ttl=4) as members:
        leader = wait_leader(members)
        assert leader.put("/v1/topology", topology(8)).status_code == 200
        before = leader.cluster()["generation"]
        r = etcd._any("/v3/kv/deleterange", {"key": Etcd.b64("/ofcd/test/leader")})
        assert r.status_code == 200, r.text

        def one_new_leader():
            views = [m.cluster() for m in members]
            leading = [v for v in views if v["role"] == "leader"]
            return (len(leading) == 1 and leading[0]["generation"] > before and
                    all(v["generation"] == leading[0]["generation"] for v in views))
        wait_for(one_new_leader, timeout=30)
        assert sum(m.metric("ofcd_cluster_leader") for m in members) == 1
        assert "stepping down: the leader key was deleted" in leader.log()
        r = wait_leader(members).post("/v1/fabrics?wait=10", {"name": "a", "servers": ["s0", "s1"]})
        assert r.status_code == 201, r.text
        for m in members:
            wait_for(lambda: names(m) == ["a"])


def test_a_hung_etcd_member_costs_no_leadership(tmp_path, etcd):
    # A renewal sent to a member that hangs is answered by no one until the call times
    # out (1 s, past the 2/3 s a TTL of 2 leaves): a second renewal to the next member
    # keeps the lease, as a lost member does (test_etcd_member_lost_changes_nothing).
    with e0_about_to_fail(tmp_path, etcd, ttl=2) as (members, leader):
        mark = len(leader.log())
        with hung(etcd, 0):
            time.sleep(4)  # two TTLs: six renewals
            assert "stepping down" not in leader.log()[mark:]
            assert wait_leader(members) is leader


def test_a_hung_etcd_member_holds_a_write_a_second_not_the_call_timeout(tmp_path, etcd):
    # The leader's append goes to e0, which answers nothing: a second try goes to the next
    # member after a second, its answer counts, and the writes after it go there at once.
    # Without it every write waits out the call's 10 s timeout first; a write answered
    # within 8 s (on however busy a machine) is one that did not.
    with e0_about_to_fail(tmp_path, etcd, ttl=4) as (members, leader), hung(etcd, 0):
        mark = len(leader.log())
        r = leader.post("/v1/fabrics", {"name": "a", "servers": ["s0", "s1"]}, timeout=8)
        assert r.status_code == 201, r.text
        assert wait_leader(members) is leader
        assert leader.metric("ofcd_cluster_append_hedges_total") >= 1
        assert "sent again to the next etcd member" in leader.log()[mark:]
        hedged = leader.metric("ofcd_cluster_append_hedges_total")
        r = leader.post("/v1/fabrics", {"name": "b", "servers": ["s2", "s3"]}, timeout=8)
        assert r.status_code == 201, r.text
        assert leader.metric("ofcd_cluster_append_hedges_total") == hedged
        for m in members:
            wait_for(lambda m=m: names(m) == ["a", "b"], timeout=60)


def test_a_hung_etcd_member_holds_a_consistent_read_a_second_not_the_call_timeout(tmp_path, etcd):
    # A prolog's wait for its fabric reads with ?consistent=true. Its confirmation goes to
    # e0, which answers nothing: the same read goes to the next member after a second, and
    # the reads after it go there at once. Without it each waits out the 10 s call timeout
    # first; one answered within 8 s (on however busy a machine) is one that did not.
    with e0_about_to_fail(tmp_path, etcd, ttl=4) as (members, leader):
        r = leader.post("/v1/fabrics?wait=10", {"name": "a", "servers": ["s0", "s1"]})
        assert r.status_code == 201, r.text
        mark = len(leader.log())
        with hung(etcd, 0):
            r = leader.get("/v1/fabrics/a?consistent=true", timeout=8)
            assert r.status_code == 200, r.text
            assert "asked the next etcd member too" in leader.log()[mark:]
            t0 = time.monotonic()
            r = leader.get("/v1/fabrics?consistent=true", timeout=8)
            assert r.status_code == 200 and [f["name"] for f in r.json()["fabrics"]] == ["a"], r.text
            assert time.monotonic() - t0 < 0.9 * 8
            assert leader.log()[mark:].count("asked the next etcd member too") == 1


def test_a_hung_etcd_member_leaves_no_follower_behind(tmp_path, etcd):
    # A member that stops answering yet keeps its sockets open (a stalled disk; here
    # SIGSTOP) leaves the watches on it silent, not ended: a member whose call to it goes
    # unanswered must end its watches there too and follow from another member.
    with e0_about_to_fail(tmp_path, etcd, ttl=4) as (members, leader), hung(etcd, 0):
        deadline = time.time() + 90
        while True:
            # The leader's append goes elsewhere after a second without an answer.
            try:
                r = wait_leader(members, timeout=30).post(
                    "/v1/fabrics", {"name": "a", "servers": ["s0", "s1"]}, timeout=60)
                if r.status_code == 201 or (r.status_code == 409 and
                                            error_of(r)["code"] == "conflict"):
                    break
            except requests.RequestException:
                pass
            assert time.time() < deadline, "the write never got through"
            time.sleep(0.5)
        for m in members:
            wait_for(lambda m=m: names(m) == ["a"], timeout=60)


def test_a_consistent_read_waits_for_etcd_to_name_the_leader(steady_cluster, etcd):
    # etcd's quorum lost: the leader's lease still looks live on its own clock for up to
    # two thirds of lease_ttl (2.7 s here), but etcd can no longer say that it leads, so it
    # answers no consistent read (the code before answered them on its clock alone, as a
    # paused machine's stopped clock would). Plain reads go on from its store.
    leader = wait_leader(steady_cluster)
    assert leader.put("/v1/topology", topology(4)).status_code == 200
    assert leader.post("/v1/fabrics", {"name": "a", "servers": ["s0", "s1"]}).status_code == 201
    # Reads that come together share the confirmations; a ?wait= holds after its own.
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(
            lambda _: leader.get("/v1/fabrics?consistent=true").status_code, range(64)))
    assert codes == [200] * 64
    r = leader.get("/v1/fabrics/a?consistent=true&wait=10")
    assert r.status_code == 200 and r.json()["state"] == "applied", r.text
    etcd.kill(1)
    etcd.kill(2)
    # A client that gives up while its read waits for etcd leaves nothing behind.
    with contextlib.suppress(requests.exceptions.Timeout):
        leader.get("/v1/fabrics?consistent=true", timeout=0.2)
    r = leader.get("/v1/fabrics?consistent=true", timeout=60)
    assert r.status_code == 503 and error_of(r)["code"] in ("store_unavailable",
                                                            "not_leader"), r.text
    assert leader.get("/v1/fabrics").status_code == 200
    # Quorum back: a leader's consistent reads are answered again.
    etcd.start_member(1)
    etcd.start_member(2)

    def answered():
        try:
            return wait_leader(steady_cluster, timeout=1).get(
                "/v1/fabrics/a?consistent=true").status_code == 200
        except AssertionError:
            return False
    wait_for(answered, timeout=60)
    assert all(m.proc.poll() is None for m in steady_cluster)


def test_quorum_lost_refuses_writes_and_serves_reads(cluster, etcd, tmp_path):
    leader = wait_leader(cluster)
    assert leader.put("/v1/topology", topology(8)).status_code == 200
    assert leader.post("/v1/fabrics?wait=10", {"name": "a", "servers": ["s0", "s1"]}).status_code == 201
    for m in cluster:
        wait_for(lambda: names(m) == ["a"])
    # Read from the logs, not from who led before: on a busy machine the leadership may
    # have moved since, and the member leading at the kill steps down instead.
    marks = {m: len(m.log()) for m in cluster}
    etcd.kill(1)
    etcd.kill(2)
    # Within a lease TTL (plus the second or so the surviving etcd member takes to notice
    # it lost its quorum) no member leads, so none drives the units, and each knows it.
    wait_for(lambda: all(m.cluster()["role"] != "leader" and not m.cluster()["etcd_reachable"]
                         for m in cluster), timeout=8)
    # The followers' log watches on the member left alone end (etcd's require-leader, after
    # three of its election timeouts) instead of going silent.
    def since(m):
        return m.log()[marks[m]:]
    for m in cluster:
        wait_for(lambda: "the log watch ended" in since(m) or "stepping down" in since(m),
                 timeout=10)
    assert sum("stepping down" in since(m) for m in cluster) <= 1
    for m in cluster:
        r = m.post("/v1/fabrics", {"name": "b", "servers": ["s2", "s3"]})
        assert r.status_code == 503 and error_of(r)["code"] == "store_unavailable", r.text
        assert m.get("/v1/fabrics/a").status_code == 200
        # Nobody drives the units: whether a server's ports are free is not known, nor
        # whether this member's fabrics are all that was acknowledged.
        assert "joined" not in m.get("/v1/servers/s0").json()
        r = m.get("/v1/fabrics?consistent=true")
        assert r.status_code == 503 and error_of(r)["code"] in ("not_leader",
                                                                "store_unavailable"), r.text
        for path in ("/v1/servers/s0?wait=1", "/v1/servers?joined=true"):
            r = m.get(path)
            assert r.status_code == 503 and error_of(r)["code"] == "not_leader", r.text
    # ofcctl given the members (one of them gone for good) keeps asking while none takes
    # the write, and is answered once quorum is back; given no time to retry, it fails.
    urls = ",".join([f"http://127.0.0.1:{free_port()}"] + [m.url("") for m in cluster])
    create = [OFCCTL_BIN, "--url", urls, "fabric", "create", "c", "s[4-5]"]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OFCCTL_") and k != "XDG_CONFIG_HOME"}
    env["HOME"] = str(tmp_path)
    p = subprocess.run(create, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 4 and "503 store_unavailable" in p.stderr, p.stderr
    notes = tmp_path / "ofcctl.err"
    with open(notes, "w") as err:
        waiting = subprocess.Popen(create + ["--retry", "120"], stdout=subprocess.PIPE,
                                   stderr=err, text=True, env=env)
    try:
        wait_for(lambda: "trying again for up to" in notes.read_text(), timeout=30)
        assert waiting.poll() is None
        # Quorum back: a leader again, and writes.
        etcd.start_member(1)
        etcd.start_member(2)
        out, _ = waiting.communicate(timeout=180)
    finally:
        waiting.kill()
    # A leader elected while etcd catches up may step down with the write in flight: 504.
    unknown = "504 outcome_unknown" in notes.read_text()
    assert waiting.returncode == 0 or unknown, (out, notes.read_text())
    wait_leader(cluster, timeout=30)
    # PUT on whoever leads, for that same reason.
    r = put_on_leader(cluster, "/v1/fabrics/b", {"servers": ["s2", "s3"]})
    assert r.status_code in (200, 201), r.text  # 200: an earlier try without an answer got in
    if unknown:
        assert put_on_leader(cluster, "/v1/fabrics/c", {"servers": ["s4", "s5"]}).ok
    for m in cluster:
        wait_for(lambda: names(m) == ["a", "b", "c"])


def test_members_without_etcd_ask_for_the_log_less_and_less_often(tmp_path):
    """etcd gone altogether (every one of its members down): each ofcd asks for the log again
    200 ms after a failure, twice as long after each failure in a row, at most every 2 s, and
    logs each failure. Five lines a second would fill the disk of a cluster whose etcd is
    down for a night."""
    etcd = Etcd().start()
    try:
        with running_members(tmp_path, etcd, ttl=2) as members:
            leader = wait_leader(members)
            assert leader.put("/v1/topology", topology(8)).status_code == 200
            marks = {m: len(m.log()) for m in members}
            for i in range(3):
                etcd.kill(i)
            time.sleep(8)
            for m in members:
                tries = m.log()[marks[m]:].count("cannot read the replication log")
                assert 1 <= tries <= 8, (m.name, tries)
            for i in range(3):
                etcd.start_member(i)
            wait_leader(members, timeout=30)
            r = put_on_leader(members, "/v1/fabrics/a", {"servers": ["s0", "s1"]})
            assert r.status_code in (200, 201), r.text
            for m in members:
                wait_for(lambda: names(m) == ["a"])
    finally:
        etcd.stop()


def test_member_behind_a_trimmed_log_copies_a_snapshot(tmp_path, etcd):
    # lease_ttl = 4: one leadership must append the 8 fabrics for the trim to come (a
    # leader trims what it appended itself), and each post is made once.
    with running_members(tmp_path, etcd, ttl=4, extra="log_keep = 4\n") as members:
        leader = wait_leader(members)
        late = followers(members, leader)[0]
        assert leader.put("/v1/topology", topology(24)).status_code == 200
        wait_for(lambda: len(late.get("/v1/servers").json()["servers"]) == 24)
        late.stop()
        for i in range(8):
            body = {"name": f"f{i}", "servers": [f"s{2 * i}", f"s{2 * i + 1}"]}
            assert leader.post("/v1/fabrics?wait=10", body).status_code == 201
        # The leader keeps the last four entries: the log no longer reaches back.
        wait_for(lambda: "/ofcd/test/log_floor" in etcd.keys("/ofcd/test/log_"), timeout=5)
        wait_for(lambda: len(etcd.keys("/ofcd/test/log/")) <= 6, timeout=5)
        # And etcd compacted its history: nothing of the old entries is left anywhere.
        assert etcd.compact(etcd.revision()).status_code == 200
        late.start()
        want = names(leader)
        wait_for(lambda: names(late) == want, timeout=15)
        # Through the state machine's states, each transition logged and counted.
        assert "following -> resyncing (the log does not reach back" in late.log()
        assert "resyncing -> following (restored a snapshot" in late.log()
        assert ('ofcd_cluster_transitions_total{from="resyncing",to="following"} 1'
                in late.get("/metrics").text)
        assert late.cluster()["role"] == "follower"
        # And it follows the log from there.
        assert leader.post("/v1/fabrics", {"name": "g", "servers": ["s20", "s21"]}).status_code == 201
        wait_for(lambda: "g" in names(late))
        # The snapshot is for administrators: a daemon with tokens refuses readers.
        assert leader.get("/v1/cluster/snapshot").headers["Content-Type"] == "application/vnd.sqlite3"


def test_the_log_is_never_trimmed_past_every_other_member(tmp_path, etcd):
    # Both followers are up but behind (another process holds their stores: they cannot
    # apply), and the leader takes more writes than the log keeps. Were it to trim past
    # them both and then die, no member could lead: each would need a snapshot, and only
    # a leader gives one. (The code before trimmed by its own store alone, and the cluster
    # stayed without a leader for good.)
    with running_members(tmp_path, etcd, ttl=4, extra="log_keep = 4\n") as members:
        leader = wait_leader(members)
        assert leader.put("/v1/topology", topology(24)).status_code == 200
        behind = followers(members, leader)
        for m in behind:
            wait_for(lambda m=m: len(m.get("/v1/servers").json()["servers"]) == 24)
        # The leader knows them (their member keys, published each third of lease_ttl).
        wait_for(lambda: len(leader.cluster()["members"]) == 3, timeout=10)
        held = [sqlite3.connect(m.store, timeout=10) for m in behind]
        try:
            for db in held:
                db.execute("BEGIN IMMEDIATE")
            for i in range(10):
                body = {"name": f"f{i}", "servers": [f"s{2 * i}", f"s{2 * i + 1}"]}
                assert leader.post("/v1/fabrics", body).status_code == 201
            time.sleep(4)  # three ticks: trims, and the followers' progress published
            leader.kill9()  # while both are behind
            time.sleep(3)  # nothing it sent them can still land
        finally:
            for db in held:
                db.rollback()
                db.close()
        now = wait_leader(members, timeout=30, exclude=(leader,))
        wait_for(lambda: len(names(now)) == 10, timeout=20)
        for m in behind:
            wait_for(lambda m=m: len(names(m)) == 10, timeout=20)


@contextlib.contextmanager
def store_held(m):
    """Another process holds member m's store in a write transaction (a backup, a shell)."""
    db = sqlite3.connect(m.store, timeout=10)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
    finally:
        db.rollback()
        db.close()


def test_a_candidate_that_cannot_read_the_log_lets_another_lead(tmp_path, etcd):
    # The member elected after the leader died cannot apply the rest of the log (another
    # process holds its store; a full disk alike) while the third member can. Holding the
    # leader key meanwhile, it left the cluster without a leader for as long as that
    # lasted: now it lets the other lead after a lease TTL of failures.
    with running_members(tmp_path, etcd, ttl=2) as members:
        leader = wait_leader(members)
        assert leader.put("/v1/topology", topology(8)).status_code == 200
        stuck, other = followers(members, leader)
        wait_for(lambda: len(stuck.get("/v1/servers").json()["servers"]) == 8)
        with store_held(stuck):
            r = leader.post("/v1/fabrics", {"name": "a", "servers": ["s0", "s1"]})
            assert r.status_code == 201, r.text
            wait_for(lambda: names(other) == ["a"])
            other.proc.send_signal(signal.SIGSTOP)  # so that the stuck one is elected
            try:
                leader.kill9()
                wait_for(lambda: stuck.cluster()["role"] == "candidate", timeout=20)
            finally:
                other.proc.send_signal(signal.SIGCONT)
            assert wait_leader(members, timeout=30, exclude=(leader,)) is other
            assert "hands the leadership over: it could not read the rest of the log" in \
                stuck.log()
            r = other.post("/v1/fabrics", {"name": "b", "servers": ["s2", "s3"]})
            assert r.status_code == 201, r.text
        wait_for(lambda: names(stuck) == ["a", "b"], timeout=20)


def test_a_follower_whose_store_is_held_answers_at_once(tmp_path, etcd):
    # Another process holds a follower's store (a backup, an operator's sqlite3 shell):
    # each try to apply the log waited a second for the lock, and the follower's loop
    # with it, probes and reads alike. Now a try fails fast and is made again later.
    with running_members(tmp_path, etcd, ttl=4) as members:
        leader = wait_leader(members)
        assert leader.put("/v1/topology", topology(8)).status_code == 200
        f = followers(members, leader)[0]
        wait_for(lambda: len(f.get("/v1/servers").json()["servers"]) == 8)
        with store_held(f):
            r = leader.post("/v1/fabrics", {"name": "a", "servers": ["s0", "s1"]})
            assert r.status_code == 201, r.text
            slow, deadline = [], time.monotonic() + 6
            while time.monotonic() < deadline:
                t0 = time.monotonic()
                f.get("/v1/health", timeout=10)
                if time.monotonic() - t0 > 0.5:
                    slow.append(round(time.monotonic() - t0, 2))
                time.sleep(0.05)
            assert len(slow) <= 2, slow  # a busy machine's stalls; the code before: 4 or 5
            assert names(f) == []
        wait_for(lambda: names(f) == ["a"], timeout=20)


def test_a_store_the_log_no_longer_holds_copies_a_snapshot(steady_cluster, etcd):
    # A follower stopped; meanwhile the log loses the change its store applied last and the
    # next one, a device failed (deleted by hand here; etcd restored or rebuilt, the log
    # deleted). Started again, it must not apply what follows on top of a store that lacks
    # them: it copies the leader's snapshot. (The code before applied the rest of the log on
    # top of its store, which then said the device works, for good: nothing conflicted.)
    leader = wait_leader(steady_cluster)
    assert leader.put("/v1/topology", topology(8)).status_code == 200
    assert leader.post("/v1/fabrics?wait=10",
                       {"name": "a", "servers": ["s0", "s1"]}).status_code == 201
    assert_same_tables(leader, steady_cluster)
    late = followers(steady_cluster, leader)[0]
    late.stop()
    assert leader.put("/v1/servers/s7/devices/0", {"state": "failed"}).status_code == 200
    log = "/ofcd/test/log/"
    assert etcd._any("/v3/kv/deleterange", {"key": etcd.b64(log),
                                            "range_end": etcd.b64(log[:-1] + "0")}).ok
    assert leader.post("/v1/fabrics", {"name": "c", "servers": ["s4", "s5"]}).status_code == 201
    late.start()
    wait_for(lambda: names(late) == ["a", "c"], timeout=20)
    assert_same_tables(leader, steady_cluster)
    assert late.get("/v1/servers/s7").json()["device_info"][0]["state"] == "failed"
    assert "the log lacks the change this store applied last" in late.log()
    assert "following -> resyncing (the log lacks the change its store applied at" in late.log()


def append_of(fabric, log="/ofcd/test/log/"):
    """For HoldingProxy: a request that appends fabric's creation to the replication log (not
    the entries of events and fabric states the leader ships on its own meanwhile)."""
    def match(path, body):
        put = (json.loads(body).get("success") or [{}])[0].get("request_put") \
            if path == "/v3/kv/txn" else None
        return (bool(put) and base64.b64decode(put["key"]).decode().startswith(log)
                and fabric.encode() in base64.b64decode(put["value"]))
    return match


@contextlib.contextmanager
def behind_proxy(tmp_path, etcd, servers=8, **kw):
    """Members whose first etcd endpoint is a HoldingProxy in front of etcd's first member, with
    a topology of servers: (proxy, members, leader). lease_ttl = 3 keeps one leadership on a
    busy machine through an append held for its call's 10 s (renewals go their own way)."""
    proxy = HoldingProxy(etcd.client[0])
    endpoints = ",".join([proxy.url] + etcd.client[1:])
    try:
        with running_members(tmp_path, etcd, ttl=3, endpoints=endpoints, **kw) as members:
            leader = wait_leader(members)
            assert leader.put("/v1/topology", topology(servers)).status_code == 200
            yield proxy, members, leader
    finally:
        proxy.close()


def post_held_a(leader, line, release):
    """POSTs fabric held-a to leader; once line is in its log (after now), release(); the
    reply."""
    mark = len(leader.log())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        posted = pool.submit(leader.post, "/v1/fabrics",
                             {"name": "held-a", "servers": ["s0", "s1"]}, timeout=60)
        try:
            wait_for(lambda: line in leader.log()[mark:], timeout=30)
        finally:
            release()
        return posted.result()


def test_append_whose_answer_was_lost_is_acknowledged(tmp_path, etcd):
    """etcd's client sends a call on to the next member when the first gives no answer; the
    first may have appended all the same (a member that died right after). The retry then
    meets its own entry: the write is in the log, and its client hears so."""
    with behind_proxy(tmp_path, etcd) as (proxy, members, leader):
        proxy.lose_answer(append_of("held-a"))
        r = leader.post("/v1/fabrics", {"name": "held-a", "servers": ["s0", "s1"]})
        assert proxy.held
        assert r.status_code == 201, r.text
        assert leader.cluster()["role"] == "leader"
        assert leader.post("/v1/fabrics", {"name": "b", "servers": ["s2", "s3"]}).ok
        for m in members:
            wait_for(lambda m=m: names(m) == ["b", "held-a"])
        assert_same_tables(leader, members)


def test_append_refused_after_a_lost_answer_hands_over(tmp_path):
    """The first try of an append gets in but its answer is lost; the retry on the next etcd
    member is refused (there: too large). The change may be in the log, so the leader must
    not go on applying later changes to a store that may lack it: it hands over, and the log
    decides, on every member alike."""
    # The second member refuses anything larger than a lease or an election.
    e = Etcd(member_args={1: ["--max-request-bytes", "300"]}).start()
    try:
        with behind_proxy(tmp_path, e) as (proxy, members, leader):
            proxy.lose_answer(append_of("held-a"))
            r = leader.post("/v1/fabrics", {"name": "held-a", "servers": ["s0", "s1"]})
            assert proxy.held
            assert r.status_code == 504, r.text
            # It is in the log: every member has it, the one that appended it too.
            for m in members:
                wait_for(lambda m=m: names(m) == ["held-a"], timeout=20)
            assert put_on_leader(members, "/v1/fabrics/b", {"servers": ["s2", "s3"]}).ok
            assert_same_tables(wait_leader(members, timeout=30), members)
            assert "the outcome of a change it appended is unknown" in leader.log()
    finally:
        e.stop()


def test_a_refusal_after_a_resent_try_is_no_proof_the_change_is_out(tmp_path):
    """The hedge of an append goes to a member that takes it and dies before answering;
    etcd's client sends it on to the next, which refuses it (too large). Then the first try
    is refused too. The change is in the log all the same: the client must not hear
    "nothing changed" (the code before said so, and the leader went on without the change
    that every other member applied)."""
    e = Etcd(member_args={2: ["--max-request-bytes", "300"]}).start()
    first, second = HoldingProxy(e.client[0]), HoldingProxy(e.client[1])
    try:
        endpoints = ",".join([first.url, second.url, e.client[2]])
        with running_members(tmp_path, e, ttl=3, endpoints=endpoints) as members:
            leader = wait_leader(members)
            assert leader.put("/v1/topology", topology(8)).status_code == 200
            mark = len(leader.log())
            first.refuse_late(append_of("held-a"))
            second.lose_answer(append_of("held-a"))
            r = post_held_a(leader, "waiting for the other", first.forward.set)
            assert second.held and first.held
            assert r.status_code == 504, r.text
            assert "the outcome of a change it appended is unknown" in leader.log()[mark:]
            for m in members:
                wait_for(lambda m=m: names(m) == ["held-a"], timeout=20)
            assert_same_tables(wait_leader(members, timeout=30), members)
    finally:
        first.close()
        second.close()
        e.stop()


def states_only(log="/ofcd/test/log/"):
    """For HoldingProxy: an append of the leader's own entry, fabric states and events that
    rode along with no client's write (a bundle without a changeset of kind 1)."""
    def match(path, body):
        put = (json.loads(body).get("success") or [{}])[0].get("request_put") \
            if path == "/v3/kv/txn" else None
        if not put or not base64.b64decode(put["key"]).decode().startswith(log):
            return False
        value = base64.b64decode(put["value"])
        if not value.startswith(b"OFCDBNDL"):
            return False
        at, kinds = 12, []
        for _ in range(int.from_bytes(value[8:12], "big")):
            kinds.append(value[at])
            at += 5 + int.from_bytes(value[at + 1:at + 5], "big")
        return 1 not in kinds
    return match


def test_an_entry_of_unknown_outcome_never_lands_behind_a_later_one(tmp_path):
    """The leader's own entry of fabric states goes unanswered, and etcd refuses its retry
    (there: too large): it may still land. A leader that went on appending would let it land
    after a later write, with a smaller key and a larger revision; a member that read the log
    from before both applied it first and then skipped the write, whose revision was now
    below its own. The leader hands over instead: its later generation's entries are the
    only ones that can follow, and the held try, released, cannot get in."""
    e = Etcd(member_args={1: ["--max-request-bytes", "300"]}).start()
    try:
        with behind_proxy(tmp_path, e) as (proxy, members, leader):
            late = followers(members, leader)[0]
            late.stop()
            mark = len(leader.log())
            proxy.late(states_only())
            assert leader.post("/v1/fabrics", {"name": "a", "servers": ["s0", "s1"]}).ok
            # Unanswered for the call's 10 s, its hedge and its retry refused.
            wait_for(lambda: "its outcome is unknown" in leader.log()[mark:], timeout=40)
            # The member that refused keeps refusing: the next write goes elsewhere.
            e.kill(1)
            assert put_on_leader(members, "/v1/fabrics/b", {"servers": ["s2", "s3"]}).ok
            proxy.forward.set()
            proxy.answer.set()
            assert proxy.sent.wait(timeout=15)
            late.start()
            now = wait_leader(members, timeout=30)
            # The code before: ["a"], silently.
            wait_for(lambda: names(late) == ["a", "b"], timeout=20)
            assert_same_tables(now, members)
            assert "the outcome of a change it appended is unknown" in leader.log()[mark:]
    finally:
        e.stop()


def test_fabric_states_refused_by_etcd_go_again(tmp_path, etcd):
    """etcd refuses the leader's entry of fabric states and events (too many requests, no
    space): they are not in the log, and must go again with the next, or the followers show
    the fabric's earlier state, and miss its events, until its state changes again. (The
    code before dropped them: the followers kept "pending".)"""
    with behind_proxy(tmp_path, etcd) as (proxy, members, leader):
        mark = len(leader.log())
        proxy.refuse(states_only())
        r = leader.post("/v1/fabrics?wait=10", {"name": "a", "servers": ["s0", "s1"]})
        assert r.json()["state"] == "applied", r.text
        wait_for(lambda: "etcd refused it" in leader.log()[mark:], timeout=10)
        assert proxy.held
        for m in followers(members, leader):
            wait_for(lambda m=m: m.get("/v1/fabrics/a").json()["state"] == "applied",
                     timeout=10)
        assert leader.cluster()["role"] == "leader"


def test_a_hedge_refused_waits_for_the_try_still_out(tmp_path):
    """An append unanswered for a second is sent to the next etcd member too, which refuses
    it (there: too large). The first try is still out and may land: the leader must wait for
    its answer, not tell the client nothing changed. It lands, and the write is acknowledged
    and on every member."""
    e = Etcd(member_args={1: ["--max-request-bytes", "300"]}).start()
    try:
        with behind_proxy(tmp_path, e) as (proxy, members, leader):
            mark = len(leader.log())
            proxy.late(append_of("held-a"))

            def release():
                proxy.forward.set()
                proxy.answer.set()
            r = post_held_a(leader, "etcd refused", release)
            assert r.status_code == 201, r.text
            assert "waiting for the other" in leader.log()[mark:]
            assert leader.metric("ofcd_cluster_append_hedges_total") >= 1
            for m in members:
                wait_for(lambda m=m: names(m) == ["held-a"], timeout=20)
            assert_same_tables(wait_leader(members), members)
    finally:
        e.stop()


def test_append_of_an_earlier_leadership_leaves_the_new_one_alone(tmp_path, etcd):
    """A member re-elected while an append of its earlier leadership still waits for etcd:
    that append cannot get in any more (its leader key is gone), and its failure is no
    reason to give up the leadership the member holds now."""
    with behind_proxy(tmp_path, etcd, n=1) as (proxy, members, m):
        generation = m.cluster()["generation"]
        proxy.hold(append_of("held-a"))
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            posted = pool.submit(m.post, "/v1/fabrics", {"name": "held-a", "servers": ["s0", "s1"]})
            wait_for(lambda: proxy.held)
            # etcdctl del of the leader key: the member steps down and, alone, leads again.
            etcd._any("/v3/kv/deleterange", {"key": Etcd.b64("/ofcd/test/leader")})
            wait_for(lambda: (lambda c: c["role"] == "leader"
                              and c["generation"] != generation)(m.cluster()), timeout=20)
            r = posted.result(timeout=30)
        assert r.status_code == 503, r.text  # not in the log, and never will be
        assert m.cluster()["role"] == "leader"
        assert "hands the leadership over" not in m.log()
        assert m.post("/v1/fabrics", {"name": "b", "servers": ["s2", "s3"]}).status_code == 201
        assert names(m) == ["b"]


def delete_of(key):
    """For HoldingProxy: a guarded delete of key (a leader's step-down deletes its key so)."""
    def match(path, body):
        ops = (json.loads(body).get("success") or [{}]) if path == "/v3/kv/txn" else [{}]
        rng = ops[0].get("request_delete_range")
        return bool(rng) and base64.b64decode(rng["key"]).decode() == key
    return match


def generations_led(member):
    """The generations member led under, in order, from its log."""
    return [int(g) for g in
            re.findall(r"-> leading \(caught up at revision \d+, generation (\d+)\)", member.log())]


def test_a_member_never_leads_twice_under_one_generation(tmp_path, etcd):
    """A leader hands over and etcd does not take its delete of the leader key: the key lives
    on with the member's lease. Leading under it again once the hold-off ends would let an
    append of the earlier leadership, still on its way, land after the new one caught up with
    the log (its generation still matches): every follower would apply it, this member not.
    The member deletes the key first and leads under a new generation."""
    prefix = "/ofcd/test"
    with behind_proxy(tmp_path, etcd, n=1) as (proxy, members, m):
        first = m.cluster()["generation"]
        proxy.refuse(delete_of(f"{prefix}/leader"))
        # A floor past every key: the next append finds the log trimmed past it, and the member
        # hands over.
        etcd._any("/v3/kv/put", {"key": Etcd.b64(f"{prefix}/log_floor"),
                                 "value": Etcd.b64(f"0 {prefix}/log/g")})
        r = m.post("/v1/fabrics", {"name": "a", "servers": ["s0", "s1"]})
        assert r.status_code >= 500, r.text
        wait_for(lambda: proxy.held)  # the step-down's delete, refused
        assert "hands the leadership over" in m.log()
        assert etcd.keys(f"{prefix}/leader") == [f"{prefix}/leader"]  # on the lease still
        etcd._any("/v3/kv/deleterange", {"key": Etcd.b64(f"{prefix}/log_floor")})
        wait_for(lambda: len(generations_led(m)) == 2, timeout=40)
        assert generations_led(m)[0] == first
        assert generations_led(m)[1] != first
        assert "deleting it before it campaigns again" in m.log()
        assert m.post("/v1/fabrics", {"name": "b", "servers": ["s2", "s3"]}).status_code == 201
        assert names(m) == ["b"]


def test_late_append_after_a_trim_stays_out(tmp_path, etcd):
    """An append's first try that reaches etcd only after its retry got in and a trim took
    the entry out again (a slow network, an etcd member that hung with it) does not put the
    entry back: every follower would apply the change twice, the leader once."""
    log = "/ofcd/test/log/"
    with behind_proxy(tmp_path, etcd, servers=24, extra="log_keep = 2\n") as cluster:
        proxy, members, leader = cluster
        proxy.hold(append_of("held-a"))
        r = leader.post("/v1/fabrics", {"name": "held-a", "servers": ["s0", "s1"]})
        assert r.status_code == 201, r.text  # its append went on to the next member
        held = json.loads(proxy.held[1])["success"][0]["request_put"]["key"]
        key = base64.b64decode(held).decode()
        assert key in etcd.keys(log)
        for i in range(1, 7):
            body = {"name": f"f{i}", "servers": [f"s{2 * i}", f"s{2 * i + 1}"]}
            assert leader.post("/v1/fabrics", body).status_code == 201
        # The leader keeps the last two entries: the trim took the held one out.
        wait_for(lambda: key not in etcd.keys(log), timeout=15)
        late = proxy.release()
        assert not late.get("succeeded"), late
        assert key not in etcd.keys(log)
        assert leader.post("/v1/fabrics", {"name": "g", "servers": ["s20", "s21"]}).ok
        assert_same_tables(leader, members)
        for m in members:
            assert not m.metric("ofcd_cluster_apply_conflicts_total"), m.name
            assert "cannot apply" not in m.log(), m.name


def test_follower_whose_store_is_locked_awhile_goes_on_without_a_snapshot(tmp_path, etcd):
    """An operator's sqlite3 shell holds a write transaction on a follower's store for longer
    than the store waits for its lock: the follower cannot apply the log for now, and reads it
    again once the lock is gone, rather than copy a whole snapshot as if it had diverged."""
    with running_members(tmp_path, etcd, ttl=3) as members:
        leader = wait_leader(members)
        assert leader.put("/v1/topology", topology(8)).status_code == 200
        late = followers(members, leader)[0]
        wait_for(lambda: len(late.get("/v1/servers").json()["servers"]) == 8)
        shell = sqlite3.connect(late.store, isolation_level=None, timeout=10)
        try:
            shell.execute("BEGIN EXCLUSIVE")
            assert leader.post("/v1/fabrics", {"name": "a", "servers": ["s0", "s1"]}).ok
            wait_for(lambda: "cannot apply log entry" in late.log(), timeout=15)
        finally:
            shell.rollback()
            shell.close()
        wait_for(lambda: names(late) == ["a"], timeout=15)
        assert not late.metric('ofcd_cluster_transitions_total{from="following",to="resyncing"}')
        assert not late.metric("ofcd_cluster_apply_conflicts_total")
        assert_same_tables(leader, members)


def big_topology(servers):
    """8 devices x 8 ports per server: a changeset of about 3 kB per server."""
    return topology(servers, 8, 8, 16)


def server_count(m):
    return len(m.get("/v1/servers").json()["servers"])


def test_large_change_travels_in_parts(tmp_path, etcd):
    members = make_members(tmp_path, etcd, ttl=2)
    late = members[2]
    try:
        for m in members[:2]:
            m.start()
        before = len(etcd.keys("/ofcd/test/log/"))
        r = put_on_leader(members[:2], "/v1/topology", big_topology(1024), deadline_s=180,
                          validate=False, timeout=120)
        assert r.status_code == 200, r.text[:300]
        assert len(etcd.keys("/ofcd/test/log/")) - before >= 3  # 2.4 MB: three parts
        for m in members[:2]:
            wait_for(lambda: server_count(m) == 1024, timeout=20)
        # A member that starts now reads the parts back from the log and applies them whole.
        late.start()
        wait_for(lambda: server_count(late) == 1024, timeout=20)
        assert put_on_leader(members, "/v1/fabrics/a", {"servers": ["s0", "s1"]}).ok
        for m in members:
            wait_for(lambda: names(m) == ["a"])
        assert not [m.name for m in members if "cannot apply" in m.log()]
    finally:
        for m in members:
            m.stop(sig=9)


def test_change_cut_short_between_its_parts_is_dropped(tmp_path, etcd):
    # The leader's loop is busy with the handler for about a second, several on a busy
    # machine: the lease outlasts it (docs/ha.md asks for three times the longest write).
    with running_members(tmp_path, etcd, ttl=15) as members:
        leader = wait_leader(members)
        assert leader.put("/v1/topology", topology(8)).status_code == 200
        for m in members:
            wait_for(lambda: server_count(m) == 8)
        body = big_topology(2048)  # about 6 MB: six parts
        answer = {}

        def put():
            answer["r"] = requests.put(leader.url("/v1/topology"), json=body,
                                       allow_redirects=False, timeout=60)

        t = threading.Thread(target=put, daemon=True)
        t.start()
        # Freeze the leader once its first part is in the log (other entries, its fabric
        # states and events, do not count): the rest never comes from it.
        wait_for(lambda: etcd.parts("/ofcd/test/log/"), timeout=30, step=0.002)
        leader.proc.send_signal(signal.SIGSTOP)
        sent = len(etcd.parts("/ofcd/test/log/"))
        assert 1 <= sent < 6, sent
        others = [m for m in members if m is not leader]
        new = wait_leader(others, timeout=40)
        # The cut change is in nobody's store, and the log goes on.
        assert new.post("/v1/fabrics", {"name": "a", "servers": ["s0", "s1"]}).status_code == 201
        for m in others:
            wait_for(lambda: names(m) == ["a"])
            assert server_count(m) == 8
        leader.proc.send_signal(signal.SIGCONT)
        t.join(timeout=30)
        r = answer["r"]
        # The old leader learns it was replaced: its client hears where to go, nothing changed.
        assert r.status_code in (307, 503), r.text[:300]
        wait_for(lambda: leader.cluster()["role"] == "follower", timeout=15)
        wait_for(lambda: names(leader) == ["a"], timeout=15)
        assert server_count(leader) == 8
        assert any("it is dropped" in m.log() for m in others)


def test_append_etcd_refuses_is_answered(tmp_path):
    # etcd takes requests of 64 kB at most here: a larger change is refused by etcd itself.
    e = Etcd(args=["--max-request-bytes", "65536"]).start()
    try:
        with running_members(tmp_path, e, ttl=2) as members:
            leader = wait_leader(members)
            r = leader.put("/v1/topology", topology(400))
            assert r.status_code == 503 and error_of(r)["code"] == "store_unavailable", r.text
            assert any("etcd refused it" in m.log() for m in members)
            # Nothing changed anywhere, and the writes behind it go on.
            assert leader.put("/v1/topology", topology(8)).status_code == 200
            for m in members:
                wait_for(lambda: server_count(m) == 8)
            # A refusal is no reason to step down; a renewal too late on a busy machine is.
            assert wait_leader(members) is leader or LEASE_LAPSE in leader.log()
    finally:
        e.stop()



def test_a_hyperx_fabric_is_the_same_on_every_member(cluster):
    """A fabric's layout travels with it: every member shows the grid the leader chose."""
    assert put_on_leader(cluster, "/v1/topology", topology(16, 8, 1, 8)).status_code == 200
    r = put_on_leader(cluster, "/v1/fabrics/hx?wait=10",
                      {"servers": [f"s{i}" for i in range(16)], "topology": "auto"})
    # 200: an earlier try, cut by a move of the leadership, got in.
    assert r.status_code in (200, 201) and r.json()["state"] == "applied", r.text
    want = r.json()
    assert (want["topology"], want["shape"]) == ("hyperx", [4, 4])
    for m in cluster:
        wait_for(lambda: m.get("/v1/fabrics/hx").json().get("links") == want["links"])
        got = m.get("/v1/fabrics/hx").json()
        assert {k: got[k] for k in ("topology", "shape", "diameter", "degree", "choice")} == \
            {k: want[k] for k in ("topology", "shape", "diameter", "degree", "choice")}


def test_cost_parameter_sets_are_the_same_on_every_member(steady_cluster):
    """A calibrated set, and which one is active, replicate: moving the active mark from one
    set to another (two rows in one change) applies on every follower without a conflict."""
    cluster = steady_cluster
    run = {"collective": "allreduce", "algorithm": "ring", "servers": 8, "devices": 8}
    leader = wait_leader(cluster)
    for name, alpha_us in (("a", 100.0), ("b", 200.0)):
        runs = [dict(run, bytes=q, measured_us=14 * alpha_us + q / 20000) for q in (8, 1 << 26)]
        r = leader.post("/v1/cost/calibrate", {"name": name, "runs": runs, "activate": True,
                                               "fit": ["alpha_us", "link_efficiency"]})
        assert r.status_code == 201, r.text
    # Collected runs, the oldest dropped in the same change as the newest come.
    assert leader.put("/v1/topology", topology(2)).status_code == 200
    runs = [dict(run, bytes=4096, measured_us=50.0 + k) for k in range(2000)]
    for k in range(3):
        r = leader.post("/v1/servers/s0/runs", {"runs": runs})
        assert r.status_code == 201, r.text
    assert r.json()["dropped"] == 2000 and r.json()["total"] == 4000
    kept = leader.get("/v1/cost/runs").json()
    want = leader.get("/v1/cost/params").json()
    assert want["active"] == "b" and [s["active"] for s in want["sets"]] == [False, True]
    body = {"collective": "allreduce", "bytes": 8, "servers": 8, "devices": 8}
    price = leader.post("/v1/collective/select", body).json()["predicted_us"]
    for m in followers(cluster, leader):
        wait_for(lambda: m.get("/v1/cost/params").json() == want)
        wait_for(lambda: m.get("/v1/cost/runs").json() == kept)
        assert m.post("/v1/collective/select", body).json()["predicted_us"] == price
        metrics = m.get("/metrics").text
        assert not [l for l in metrics.splitlines()
                    if l.startswith("ofcd_cluster_apply_conflicts_total") and
                    not l.endswith(" 0")], metrics


def test_an_etcd_restored_behind_the_stores_is_neither_led_nor_followed(tmp_path, etcd):
    # etcd restored from a backup (etcdctl snapshot save / restore): its revision is behind
    # what the stores applied. Its new entries would get revisions the stores count as
    # applied: followers would skip them and a leader would acknowledge writes no store
    # holds. No member may lead it; an operator restarts the cluster from one member's store
    # (docs/ha.md, "etcd restored").
    backup = str(tmp_path / "etcd.db")
    with running_members(tmp_path, etcd, ttl=2) as members:
        assert put_on_leader(members, "/v1/topology", topology(8)).status_code == 200
        r = wait_leader(members).post("/v1/fabrics?wait=10", {"name": "a", "servers": ["s0", "s1"]})
        assert r.status_code == 201, r.text
        subprocess.run(["etcdctl", "--endpoints", etcd.client[0], "snapshot", "save", backup],
                       check=True, capture_output=True, env={**os.environ, "ETCDCTL_API": "3"})
        # A busy cluster's revision, far past what the restored etcd reaches in this test,
        # and a change the backup lacks.
        s = requests.Session()
        for i in range(1500):
            assert s.post(etcd.client[i % 3] + "/v3/kv/put",
                          json={"key": Etcd.b64(f"/other/{i}"), "value": Etcd.b64("x")}).ok
        s.close()
        r = put_on_leader(members, "/v1/fabrics/late", {"servers": ["s4", "s5"]})
        assert r.status_code == 201, r.text
        for m in members:
            wait_for(lambda m=m: names(m) == ["a", "late"])
        applied = wait_leader(members).cluster()["applied_revision"]
        marks = {m: len(m.log()) for m in members}
        initial = ",".join(f"e{j}={p}" for j, p in enumerate(etcd.peer))
        for i in range(3):
            etcd.kill(i)
            shutil.rmtree(os.path.join(etcd.dir, f"e{i}"))
            subprocess.run(["etcdctl", "snapshot", "restore", backup, "--name", f"e{i}",
                            "--initial-cluster", initial, "--initial-advertise-peer-urls",
                            etcd.peer[i], "--data-dir", os.path.join(etcd.dir, f"e{i}")],
                           check=True, capture_output=True, env={**os.environ, "ETCDCTL_API": "3"})
        etcd.start()
        assert etcd.revision() < applied - 1000
        for _ in range(40):
            for m in members:
                try:
                    # A 307 is followed: no member takes it.
                    r = m.post("/v1/fabrics", {"name": "b", "servers": ["s2", "s3"]}, timeout=5)
                    assert r.status_code >= 300, f"{m.name}: {r.status_code} {r.text}"
                except requests.RequestException:
                    pass
            assert all(m.cluster()["role"] != "leader" for m in members)
            time.sleep(0.25)
        for m in members:
            assert names(m) == ["a", "late"]
            assert m.proc.poll() is None
            assert "is behind this store's" in m.log()[marks[m]:]
        # The way back: one member's store, its log position forgotten, on every member, and
        # the old log out of etcd.
        for m in members:
            m.stop()
        db = sqlite3.connect(members[0].store)
        db.execute("DELETE FROM replica_state")
        db.commit()
        db.close()
        for m in members[1:]:
            for suffix in ("-wal", "-shm"):
                if os.path.exists(m.store + suffix):
                    os.unlink(m.store + suffix)
            shutil.copyfile(members[0].store, m.store)
        subprocess.run(["etcdctl", "--endpoints", etcd.endpoints(), "del", "--prefix",
                        "/ofcd/test/"], check=True, capture_output=True,
                       env={**os.environ, "ETCDCTL_API": "3"})
        for m in members:
            m.start()
        r = put_on_leader(members, "/v1/fabrics/b", {"servers": ["s2", "s3"]})
        assert r.status_code == 201, r.text
        for m in members:
            wait_for(lambda m=m: names(m) == ["a", "b", "late"])
        assert_same_tables(wait_leader(members), members)


def vote_of(name, key="/ofcd/test/leader"):
    """For HoldingProxy: member name's campaign for the leader key."""
    def match(path, body):
        put = (json.loads(body).get("success") or [{}])[0].get("request_put") \
            if path == "/v3/kv/txn" else None
        return (bool(put) and base64.b64decode(put["key"]).decode() == key
                and f'"{name}"'.encode() in base64.b64decode(put["value"]))
    return match


def test_a_vote_answered_after_the_key_was_deleted_again_names_no_leader(tmp_path, etcd):
    """A member's vote reaches etcd while another member holds the leader key, and its answer
    comes only after the member's watch told it that key was deleted too (the vote went to a
    slower etcd member): the answer's leader leads no more. Taking it for the leader would
    send writes and snapshot copies to it until the next leader's key went in turn."""
    proxy = HoldingProxy(etcd.client[0])
    endpoints = ",".join([proxy.url] + etcd.client[1:])
    key = "/ofcd/test/leader"
    try:
        # A TTL of 9: the member waits 3 s for its vote's answer before asking elsewhere.
        with running_members(tmp_path, etcd, ttl=9, endpoints=endpoints) as members:
            first = wait_leader(members)
            late = next(m for m in members if m is not first)
            proxy.late(vote_of(late.name))
            assert etcd._any("/v3/kv/deleterange", {"key": Etcd.b64(key)}).status_code == 200
            wait_for(lambda: proxy.held, timeout=5, step=0.01)
            # Another member leads under a new key; then the late vote reaches etcd, which
            # names that member; then that key is deleted too, before the answer comes.
            wait_for(lambda: etcd.keys(key) == [key], timeout=5, step=0.01)
            proxy.forward.set()
            time.sleep(0.3)
            assert etcd._any("/v3/kv/deleterange", {"key": Etcd.b64(key)}).status_code == 200
            time.sleep(0.3)  # the member's watch tells it
            proxy.answer.set()
            wait_leader(members, timeout=30)
            views = [m.cluster() for m in members]
            assert all(v["generation"] == views[0]["generation"] for v in views), views
    finally:
        proxy.close()
