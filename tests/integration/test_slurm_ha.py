"""Slurm in front of an ofcd cluster (three members on a three-member etcd): the scripts are
given every member, and neither a restart of all of them nor a leader killed while a job
starts costs that job a requeue."""
import os

import pytest

from ha_lab import ETCD_BIN, Etcd, kill_members, make_members, put_on_leader, wait_leader
from test_slurm import NODES, Cluster, noting_ofcctl, pytestmark as slurm_marks, started

pytestmark = slurm_marks + [
    pytest.mark.skipif(not os.access(ETCD_BIN, os.X_OK), reason="etcd not installed"),
]

# The demo topology: two sim units of 64 ports, eight servers of 8 devices, a plane per unit.
TOPOLOGY = {
    "ocs": [{"name": f"ocs{i}", "driver": "sim", "ports": 64, "endpoint": ""} for i in range(2)],
    "servers": [{"name": n, "devices": 8, "ports_per_device": 1, "p2p": False,
                 "intra": "full-mesh"} for n in NODES],
    "wiring": {"rule": "plane-per-ocs"},
}


class Leader:
    """What the Slurm tests read ofcd through: the member that leads (a follower may lag)."""

    def __init__(self, etcd, members):
        self.etcd = etcd
        self.members = members

    def get(self, path, **kw):
        return wait_leader(self.members, timeout=30).get(path, **kw)

    def stop(self):
        kill_members(self.members)
        self.etcd.stop()


class HACluster(Cluster):
    def start_ofcd(self):
        self.members = []
        self.ofcd = Leader(Etcd().start(), self.members)
        self.members += make_members(self.d / "ofcd", self.ofcd.etcd, ttl=2)
        for m in self.members:
            m.start()
        assert put_on_leader(self.members, "/v1/topology", TOPOLOGY).status_code == 200
        self.url = ",".join(m.url("") for m in self.members)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with started(HACluster(tmp_path_factory.mktemp("slurm-ha"))) as c:
        yield c


def test_jobs_start_through_a_restart_and_a_leaders_death(cluster, tmp_path):
    """A job starts while every member is stopped (an upgrade): its prolog keeps asking, on
    every member, and the job runs once they are back. The leader is then killed with one
    job running and another starting: the second finds the new leader. The old leader comes
    back as a follower while a third job takes the first one's nodes. No job is requeued."""
    wrapper, notes = noting_ofcctl(tmp_path)
    hold = cluster.d / "release"
    try:
        with cluster.settings(OFCCTL=wrapper, OFCCTL_RETRY=120):
            a, _ = cluster.sbatch("-N", "2", "-w", "srv[0-1]", wait=False, hold=hold)
            cluster.wait_for(lambda: (cluster.out / f"{a}.json").exists(), "job a running")
            for m in cluster.members:
                m.stop()
            b, _ = cluster.sbatch("-N", "2", "-w", "srv[2-3]", wait=False)
            cluster.wait_for(lambda: notes.exists() and "trying again" in notes.read_text(),
                             "the prolog trying ofcd again", timeout=60)
            for m in cluster.members:
                m.start()
            assert cluster.wait_job(b) == "COMPLETED", cluster.job(b).get("AdminComment")

            leader = wait_leader(cluster.members, timeout=30)
            leader.kill9()
            c, _ = cluster.sbatch("-N", "3", "-w", "srv[4-6]", wait=False)
            hold.touch()
            for job in (a, b, c):
                assert cluster.wait_job(job) == "COMPLETED", cluster.job(job).get("AdminComment")
                assert cluster.job(job)["Restarts"] == "0"
            for job in (b, c):
                fabric, nodes = cluster.fabric(job)
                assert fabric["state"] == "applied" and sorted(fabric["servers"]) == nodes
            leader.start()
            d, state = cluster.sbatch("-N", "4", "-w", "srv[0-1,6-7]")
            assert state == "COMPLETED", cluster.job(d).get("AdminComment")
            assert cluster.job(d)["Restarts"] == "0"
            assert f"slurm-{a}" not in cluster.fabric_names()
    finally:
        hold.touch()
    cluster.wait_fabric_gone(b, d)
