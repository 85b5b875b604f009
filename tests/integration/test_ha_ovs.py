"""Fencing at the switch (docs/ha.md): three ofcd on etcd driving one real Open vSwitch bridge.

Each leader connects to the bridge as OpenFlow MASTER with its generation (the leader
key's create revision). A leader frozen long enough to lose its lease is replaced; the
new leader connects with a higher generation, the switch demotes the old one, and the
bridge ends up holding exactly what the new leader wants, whatever the old one still
believes when it wakes up. (tests/ovs/run.sh shows the switch refusing an old master's
flow-mods one by one.)
"""
import os
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import ovs  # noqa: E402
from conftest import OFCD_BIN  # noqa: E402
from ha_lab import ETCD_BIN, Etcd, make_members, wait_for, wait_leader  # noqa: E402

ENDPOINT, TARGET = "tcp:127.0.0.1:6654", "ptcp:6654:127.0.0.1"  # the bridge listens


def flows(lab):
    return sorted((i, o) for i, o, *_ in lab.circuit_flows("ocs0"))


def circuits(member, name):
    f = member.get(f"/v1/fabrics/{name}").json()
    pairs = set()
    for link in f["links"]:
        a, b = link["a"]["ocs_port"], link["b"]["ocs_port"]
        pairs |= {(a, b), (b, a)}
    return pairs


def test_new_leader_fences_the_old_one_at_the_switch(tmp_path):
    reason = ovs.unavailable()
    if reason:
        pytest.skip(reason)
    if not os.access(ETCD_BIN, os.X_OK) or not os.access(OFCD_BIN, os.X_OK):
        pytest.skip("etcd or ofcd missing")
    lab = ovs.Lab()
    etcd = members = None
    try:
        lab.start()
        lab.add_bridge("ocs0", controller=TARGET)
        lab.enter()  # etcd, ofcd and the bridge's controller port on the lab's loopback
        etcd = Etcd().start()
        members = make_members(tmp_path, etcd, ttl=1)
        for m in members:
            m.start()
        old = wait_leader(members)
        first = old.cluster()["generation"]
        topo = {
            "ocs": [{"name": "ocs0", "driver": "openflow", "ports": 32, "endpoint": ENDPOINT}],
            "servers": [{"name": f"s{i}", "devices": 3, "ports_per_device": 1, "p2p": False,
                         "intra": "full-mesh"} for i in range(6)],
            "wiring": {"rule": "plane-per-ocs"},
        }
        assert old.put("/v1/topology", topo).status_code == 200
        r = old.post("/v1/fabrics?wait=20", {"name": "fa", "servers": ["s0", "s1", "s2"]})
        assert r.status_code == 201 and r.json()["state"] == "applied", r.text
        assert set(flows(lab)) == circuits(old, "fa")

        # The leader freezes (a stalled VM, a long pause): it cannot renew its lease.
        old.proc.send_signal(signal.SIGSTOP)
        new = wait_leader(members, exclude=(old,))
        assert new.cluster()["generation"] > first  # what the switch compares
        wait_for(lambda: new.get("/v1/ocs/ocs0").json().get("connection", {}).get("state")
                 == "connected", timeout=10)
        # The new leader changes the bridge while the old one is frozen.
        assert new.delete("/v1/fabrics/fa?wait=20").status_code == 200
        r = new.post("/v1/fabrics?wait=20", {"name": "fb", "servers": ["s3", "s4", "s5"]})
        assert r.status_code == 201 and r.json()["state"] == "applied", r.text
        want = circuits(new, "fb")
        assert set(flows(lab)) == want

        # The old leader wakes up still holding fa in its store: the switch has demoted it.
        old.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: old.cluster()["role"] == "follower", timeout=10)
        time.sleep(1.5)  # a reconciler pass and an audit of the new leader
        assert set(flows(lab)) == want
        assert wait_leader(members) is new
        # It follows the new leader's log like any follower.
        wait_for(lambda: [f["name"] for f in old.get("/v1/fabrics").json()["fabrics"]] == ["fb"])
    finally:
        if members:
            for m in members:
                if m.proc and m.proc.poll() is None:
                    m.proc.send_signal(signal.SIGCONT)
                m.stop(sig=signal.SIGKILL)
        if etcd:
            etcd.stop()
        lab.close()
