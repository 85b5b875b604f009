"""A randomized workload against a three-member cluster while faults are injected.

    ha_jepsen.run(tmp_path, seed, faults, say=print)  -> stats

tests/integration/test_ha_jepsen.py runs a few faults in `make test`, bench/ha_jepsen.py a
hundred and more. Everything random comes from one random.Random(seed), printed first, so a
failure replays with the same seed (thread timing aside).

Clients (WORKERS threads) send a seeded mix to random members, following their 307s to the
leader: fabrics created and deleted with and without ?wait=, created again by an idempotent
PUT, devices failed and repaired, drift made by hand on the leader's units, and consistent
reads of their own fabrics, each of which must find a state the writes before it allow. A topology actor
adds and removes servers and PUTs the whole topology again. Each actor owns its keys, so what
a key may hold follows from that actor's requests alone: an acknowledged write is the state,
a refused one changes nothing, one without a certain answer (cut by a fault, 504
outcome_unknown) may or may not have happened.

Meanwhile one fault after another: the leader killed (-9) and restarted, the leader frozen
past its lease and thawed, an etcd member killed and restarted, etcd's quorum lost and
restored, a follower stopped while the log moves on and is trimmed and compacted, then
restarted (it copies a snapshot), an etcd member hung (SIGSTOP: it answers nothing but keeps
its connections) and woken, the leader key deleted by hand (`etcdctl del`).

At the end, with every fault healed: every member is alive and has applied the same log,
every key is in an allowed state on the leader (every acknowledged write present, nothing
refused present), every member's replicated tables equal the leader's row by row, no member
counted an invariant broken or a change that did not apply, and the units converge.
"""
import collections
import random
import signal
import threading
import time

import requests

from crashloop import Key
from ha_lab import Etcd, assert_same_tables, make_members, put_on_leader, wait_for, wait_leader

WORKERS = 3
SERVERS_PER_WORKER = 6
DEVICES = 4
UNITS = 2
TTL = 1
REQUEST_TIMEOUT = 6
FAULTS = ("kill_leader", "freeze_leader", "kill_etcd", "lose_quorum", "follower_behind",
          "hang_etcd", "delete_leader_key")


def topology(extra=()):
    servers = [{"name": f"w{k}s{i}", "devices": DEVICES, "ports_per_device": 1, "p2p": False,
                "intra": "full-mesh"} for k in range(WORKERS) for i in range(SERVERS_PER_WORKER)]
    return {
        "ocs": [{"name": f"u{u}", "driver": "sim", "ports": 64, "endpoint": ""}
                for u in range(UNITS)],
        "servers": servers,
        "wiring": {"rule": "plane-per-ocs"},
    }


class Actor(threading.Thread):
    """Random writes to random members until told to stop; the outcome of each is kept."""

    def __init__(self, members, rng, stop):
        super().__init__(daemon=True)
        self.members = members
        self.rng = rng
        self.stop = stop
        self.session = requests.Session()
        self.counts = collections.Counter()
        self.errors = []  # answers nothing explains

    def call(self, method, path, body=None, timeout=REQUEST_TIMEOUT):
        """'acked', 'refused' or 'unknown'."""
        running = [m for m in self.members if m.proc and m.proc.poll() is None]
        if not running:
            self.counts["refused"] += 1
            return "refused"
        m = self.rng.choice(running)
        try:
            r = self.session.request(method, m.url(path), json=body, timeout=timeout)
        except requests.RequestException:
            self.counts["unknown"] += 1
            return "unknown"
        code = (r.json().get("error") or {}).get("code") if r.status_code >= 400 else None
        if r.status_code < 300:
            outcome = "acked"
        elif r.status_code == 504 or (r.status_code == 500 and code == "internal"):
            # outcome_unknown; or in the log but not applied on the member that asked
            outcome = "unknown"
        elif r.status_code in (409, 412, 422, 400, 404, 503):
            outcome = "refused"
        else:
            self.errors.append(f"{method} {path}: {r.status_code} {r.text[:200]}")
            outcome = "unknown"
        self.counts[outcome] += 1
        return outcome

    def run(self):
        while not self.stop.is_set():
            self.step()


class Worker(Actor):
    """Fabrics over its own servers, its own device index on them, drift."""

    def __init__(self, k, members, rng, stop):
        super().__init__(members, rng, stop)
        self.k = k
        self.servers = [f"w{k}s{i}" for i in range(SERVERS_PER_WORKER)]
        self.fabrics = {}  # name -> Key of None or frozenset of servers
        self.devices = {s: Key("ok") for s in self.servers}  # its device index k % DEVICES
        self.next = 0

    def present(self):
        return [n for n, key in self.fabrics.items() if key.known() is not None]

    def free_servers(self):
        used = set()
        for key in self.fabrics.values():
            for state in key.allowed:
                used |= state or set()
        return [s for s in self.servers if s not in used]

    def step(self):
        op = self.rng.choices([self.create, self.delete, self.put_again, self.device, self.drift,
                               self.read],
                              [30, 25, 10, 25, 5, 15])[0]
        op()

    def read(self):
        """A consistent read of one of its fabrics from a random member (a follower redirects
        it to the leader): what it finds must be a state the writes so far may have left."""
        running = [m for m in self.members if m.proc and m.proc.poll() is None]
        if not self.fabrics or not running:
            return
        name = self.rng.choice(sorted(self.fabrics))
        allowed = set(self.fabrics[name].allowed)
        try:
            r = self.session.get(self.rng.choice(running).url(f"/v1/fabrics/{name}"
                                                              "?consistent=true"),
                                 timeout=REQUEST_TIMEOUT)
        except requests.RequestException:
            self.counts["reads_unanswered"] += 1
            return
        if r.status_code not in (200, 404):
            self.counts["reads_refused"] += 1
            return
        self.counts["reads"] += 1
        got = frozenset(r.json()["servers"]) if r.status_code == 200 else None
        if got not in allowed:
            self.errors.append(f"consistent read of {name}: {got} not in {allowed}")

    def create(self):
        free = self.free_servers()
        if len(free) < 2:
            return self.delete()
        servers = self.rng.sample(free, self.rng.randint(2, min(3, len(free))))
        name = f"w{self.k}f{self.next}"
        self.next += 1
        key = self.fabrics[name] = Key(None)
        wait = self.rng.choice(["", "?wait=5"])
        body = {"name": name, "servers": servers}
        if self.rng.random() < 0.5:
            outcome = self.call("POST", "/v1/fabrics" + wait, body)
        else:
            outcome = self.call("PUT", f"/v1/fabrics/{name}{wait}", {"servers": servers})
        if outcome == "acked":
            key.acked(frozenset(servers))
        elif outcome == "unknown":
            key.unknown(frozenset(servers))

    def put_again(self):
        mine = [n for n in self.present() if self.fabrics[n].known()]
        if not mine:
            return
        name = self.rng.choice(mine)
        servers = sorted(self.fabrics[name].known())
        # Another order is another fabric: the stored order comes back from GET.
        got = self.call("PUT", f"/v1/fabrics/{name}", {"servers": servers})
        del got  # 200 when it is the same, 409 when the order differs: neither changes it

    def delete(self):
        mine = self.present()
        if not mine:
            return
        name = self.rng.choice(mine)
        key = self.fabrics[name]
        outcome = self.call("DELETE", f"/v1/fabrics/{name}" + self.rng.choice(["", "?wait=5"]))
        if outcome == "acked":
            key.acked(None)
        elif outcome == "unknown":
            key.unknown(None)

    def device(self):
        server = self.rng.choice(self.servers)
        key = self.devices[server]
        want = "ok" if key.known() == "failed" else "failed"
        outcome = self.call("PUT", f"/v1/servers/{server}/devices/{self.k % DEVICES}",
                            {"state": want})
        if outcome == "acked":
            key.acked(want)
        elif outcome == "unknown":
            key.unknown(want)

    def drift(self):
        # A cross-connect made by hand on one of the leader's units: the audit removes it.
        a = self.rng.randrange(1, 63)
        self.call("POST", f"/v1/ocs/u{self.rng.randrange(UNITS)}/faults",
                  {"kind": "set_xc", "a": a, "b": a + 1})


class Topologist(Actor):
    """Servers of its own beside the base, and the whole topology PUT again."""

    def __init__(self, members, rng, stop):
        super().__init__(members, rng, stop)
        self.servers = {}  # name -> Key of bool
        self.next = 0

    def step(self):
        op = self.rng.choices([self.add, self.remove, self.put_topology], [40, 40, 20])[0]
        op()
        time.sleep(self.rng.uniform(0.05, 0.2))

    def add(self):
        name = f"t{self.next}"
        self.next += 1
        key = self.servers[name] = Key(False)
        outcome = self.call("POST", "/v1/servers", {"name": name, "devices": 2})
        if outcome == "acked":
            key.acked(True)
        elif outcome == "unknown":
            key.unknown(True)

    def remove(self):
        mine = [n for n, k in self.servers.items() if k.known() is not False]
        if not mine:
            return
        name = self.rng.choice(mine)
        outcome = self.call("DELETE", f"/v1/servers/{name}")
        if outcome == "acked":
            self.servers[name].acked(False)
        elif outcome == "unknown":
            self.servers[name].unknown(False)

    def put_topology(self):
        # The base topology again: its servers and units stay, the ones added here go.
        outcome = self.call("PUT", "/v1/topology", topology(), timeout=REQUEST_TIMEOUT * 2)
        for key in self.servers.values():
            if outcome == "acked":
                key.acked(False)
            elif outcome == "unknown":
                key.unknown(False)


class Faults:
    """One fault at a time, each healed before the next."""

    def __init__(self, members, etcd, rng, say):
        self.members = members
        self.etcd = etcd
        self.rng = rng
        self.say = say
        self.done = collections.Counter()

    def running(self):
        return [m for m in self.members if m.proc and m.proc.poll() is None]

    def leader(self):
        return wait_leader(self.running(), timeout=30)

    def inject(self, kind):
        getattr(self, kind)()
        self.done[kind] += 1
        self.leader()  # healed: one leader, every member agreeing

    def kill_leader(self):
        old = self.leader()
        old.kill9()
        self.leader_elsewhere(old)
        time.sleep(self.rng.uniform(0.2, 1.0))
        old.start()

    def leader_elsewhere(self, old):
        wait_for(lambda: any(m.cluster()["role"] == "leader"
                             for m in self.running() if m is not old), timeout=30)

    def freeze_leader(self):
        old = self.leader()
        old.proc.send_signal(signal.SIGSTOP)
        time.sleep(TTL * self.rng.uniform(1.2, 2.0))
        old.proc.send_signal(signal.SIGCONT)

    def kill_etcd(self):
        i = self.rng.randrange(len(self.etcd.procs))
        self.etcd.kill(i)
        time.sleep(self.rng.uniform(0.5, 1.5))
        self.etcd.start_member(i, state="existing")

    def hang_etcd(self):
        """A member that answers nothing but keeps its connections (a stalled disk)."""
        p = self.etcd.procs[self.rng.randrange(len(self.etcd.procs))]
        p.send_signal(signal.SIGSTOP)
        try:
            time.sleep(self.rng.uniform(1.0, 3.0))
        finally:
            p.send_signal(signal.SIGCONT)

    def delete_leader_key(self):
        """An operator's `etcdctl del PREFIX/leader` to move the leadership."""
        self.leader()
        self.etcd._any("/v3/kv/deleterange", {"key": self.etcd.b64("/ofcd/test/leader")})

    def lose_quorum(self):
        down = self.rng.sample(range(len(self.etcd.procs)), 2)
        for i in down:
            self.etcd.kill(i)
        time.sleep(self.rng.uniform(1.0, 2.0))
        for i in down:
            self.etcd.start_member(i, state="existing")
        wait_for(lambda: self.etcd_answers(), timeout=30)

    def etcd_answers(self):
        try:
            return self.etcd.put("/probe", "x").status_code == 200
        except requests.RequestException:
            return False

    def follower_behind(self):
        leader = self.leader()
        late = self.rng.choice([m for m in self.running() if m is not leader])
        late.stop()
        time.sleep(self.rng.uniform(1.0, 2.5))  # the log moves on, and is trimmed
        wait_for(self.etcd_answers, timeout=30)
        self.etcd.compact(self.etcd.revision())
        late.start()


def check(leader, members, workers, topologist):
    fabrics = {f["name"]: frozenset(f["servers"])
               for f in leader.get("/v1/fabrics").json()["fabrics"]}
    servers = {s["name"] for s in leader.get("/v1/servers").json()["servers"]}
    for w in workers:
        for name, key in w.fabrics.items():
            got = fabrics.get(name)
            assert got in key.allowed, f"fabric {name}: {got} not in {key.allowed}"
        for server, key in w.devices.items():
            got = leader.get(f"/v1/servers/{server}").json()["device_info"][w.k % DEVICES]["state"]
            assert got in key.allowed, \
                f"{server} device {w.k % DEVICES}: {got} not in {key.allowed}"
    for name, key in topologist.servers.items():
        assert (name in servers) in key.allowed, f"server {name} not in {key.allowed}"
    mine = {n for w in workers for n in w.fabrics}
    assert set(fabrics) <= mine, f"fabrics nobody made: {set(fabrics) - mine}"
    assert_same_tables(leader, members)
    for m in members:
        assert m.proc.poll() is None, f"{m.name} died"
        assert m.metric("ofcd_cluster_invariant_violations_total") == 0, m.name
        assert m.metric("ofcd_cluster_apply_conflicts_total") == 0, m.name


def converged(leader):
    for f in leader.get("/v1/fabrics").json()["fabrics"]:
        full = leader.get(f"/v1/fabrics/{f['name']}").json()
        if full["state"] not in ("applied", "degraded"):
            return False
    return all(leader.get(f"/v1/ocs/u{u}/cross-connects").json()["in_sync"] for u in range(UNITS))


def run(tmp_path, seed, faults, say=print):
    rng = random.Random(seed)
    say(f"ha_jepsen: seed {seed}, {faults} faults, {WORKERS} workers")
    etcd = Etcd().start()
    extra = "log_keep = 30\n[reconcile]\naudit_interval = 2\n[debug]\nfaults = true\n"
    members = make_members(tmp_path, etcd, ttl=TTL, extra=extra)
    stop = threading.Event()
    actors = []
    started = time.monotonic()
    try:
        for m in members:
            m.start()
        assert put_on_leader(members, "/v1/topology", topology()).status_code == 200
        workers = [Worker(k, members, random.Random(rng.random()), stop) for k in range(WORKERS)]
        topologist = Topologist(members, random.Random(rng.random()), stop)
        actors = workers + [topologist]
        for a in actors:
            a.start()
        f = Faults(members, etcd, rng, say)
        for i in range(faults):
            time.sleep(rng.uniform(0.3, 1.0))
            kind = rng.choice(FAULTS)
            say(f"ha_jepsen: fault {i + 1}: {kind}")
            f.inject(kind)
        time.sleep(1.0)
        stop.set()
        for a in actors:
            a.join(timeout=REQUEST_TIMEOUT * 3)
            assert not a.is_alive(), "an actor did not stop"
            assert not a.errors, a.errors
        leader = wait_leader(members, timeout=30)
        check(leader, members, workers, topologist)
        # Only the leader drives the units (a follower's cross-connects are never in sync):
        # whoever leads now, since on a busy machine the leadership may have moved.
        wait_for(lambda: converged(wait_leader(members, timeout=30)), timeout=30)
        totals = sum((a.counts for a in actors), collections.Counter())
        stats = dict(totals, faults=sum(f.done.values()), seconds=round(time.monotonic() - started),
                     **{f"fault_{k}": v for k, v in sorted(f.done.items())})
        say(f"ha_jepsen: seed {seed}: {stats}")
        return stats
    except BaseException:
        # What each member said last: a failure here is rare, and its logs go with tmp_path.
        for m in members:
            say(f"--- {m.name}: the end of its log")
            say("\n".join(m.log().splitlines()[-30:]))
        raise
    finally:
        stop.set()
        for m in members:
            if m.proc and m.proc.poll() is None:
                m.proc.send_signal(signal.SIGCONT)
            m.stop(sig=signal.SIGKILL)
        etcd.stop()
