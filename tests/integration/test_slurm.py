"""Slurm jobs get their fabric: a real slurmctld, eight slurmd (srv0..srv7, one port each, all on
loopback), munged with a private key and socket, and ofcd on the demo topology, with
packaging/slurm/ofcd-prolog and ofcd-epilog as PrologSlurmctld and EpilogSlurmctld."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import Daemon, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
OFCCTL_BIN = os.path.abspath(os.environ.get("OFCCTL_BIN", os.path.join(HERE, "../../build/ofcctl")))
SCRIPTS = os.path.join(HERE, "../../packaging/slurm")
NODES = [f"srv{i}" for i in range(8)]

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="slurmd starts job steps as root"),
    pytest.mark.skipif(not all(shutil.which(b) for b in ("munged", "slurmctld", "slurmd", "sbatch")),
                       reason="Slurm or munge is not installed (packaging/deps.sh installs them)"),
]

# Every job runs this on its first node: what ofcd says of the job's fabric, the job's node
# list as Slurm expands it, then (with HOLD set) a pause until the test releases it.
JOB = """#!/bin/sh
"$OFCCTL" -o json fabric get "slurm-$SLURM_JOB_ID" > "$OUT/$SLURM_JOB_ID.tmp"
scontrol show hostnames "$SLURM_JOB_NODELIST" > "$OUT/$SLURM_JOB_ID.nodes"
mv "$OUT/$SLURM_JOB_ID.tmp" "$OUT/$SLURM_JOB_ID.json"
i=0
while [ -n "$HOLD" ] && [ ! -e "$HOLD" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
"""

SLURM_CONF = """ClusterName=ofcdtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge/munge.sock
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/spool/slurmd.%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.%n.log
# Nothing listens beyond loopback; jobs start as soon as they are submitted.
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
# Whole nodes per job: every job gets a fabric of its own servers.
SelectType=select/linear
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
InactiveLimit=0
KillWait=2
SlurmctldDebug=info
SlurmdDebug=info
PrologSlurmctld={d}/scripts/ofcd-prolog
EpilogSlurmctld={d}/scripts/ofcd-epilog
NodeName=srv[0-7] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[{ports}] CPUs=1 State=UNKNOWN
PartitionName=all Nodes=srv[0-7] Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    """munged, ofcd, slurmctld and eight slurmd, each a child process of the test."""

    def __init__(self, d):
        self.d = d
        self.procs = []
        self.ofcd = None
        self.out = d / "out"
        for sub in ("munge", "state", "spool", "log", "scripts", "out", "ofcd"):
            (d / sub).mkdir(mode=0o755)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "OFCCTL"))}
        self.env["SLURM_CONF"] = str(d / "slurm.conf")

    def spawn(self, argv, log):
        f = open(self.d / "log" / log, "w")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=self.env)
        f.close()
        self.procs.append(p)
        return p

    def start(self):
        d = self.d
        # A private key and socket. munged runs as root because slurmd must (it starts job
        # steps as their users) and both share the socket; --force lets it accept a temporary
        # directory its permission checks were written against (they expect /etc/munge and
        # /run/munge); the key is the test's own.
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.spawn(["munged", "--foreground", "--force", f"--socket={d}/munge/munge.sock",
                    f"--key-file={key}", f"--pid-file={d}/munge/munged.pid",
                    f"--seed-file={d}/munge/munged.seed", f"--log-file={d}/munge/munged.log"],
                   "munged.out")

        self.ofcd = Daemon(d / "ofcd", args=("--demo",)).start()
        self.url = self.ofcd.url("")

        # The prolog and epilog as installed: the scripts with their settings next to them.
        for s in ("ofcd-prolog", "ofcd-epilog"):
            shutil.copy(os.path.join(SCRIPTS, s), d / "scripts" / s)
        (d / "scripts" / "ofcd-slurm.conf").write_text(
            f"OFCCTL={OFCCTL_BIN}\nOFCCTL_URL={self.url}\nSLURM_CONF={d}/slurm.conf\n"
            "OFCD_CREATE_WAIT=20\nOFCD_DELETE_WAIT=20\n")
        (d / "job.sh").write_text(JOB)
        (d / "job.sh").chmod(0o755)

        ports = ",".join(str(free_port()) for _ in NODES)
        (d / "slurm.conf").write_text(SLURM_CONF.format(d=d, ctld_port=free_port(), ports=ports))
        self.wait_for(lambda: (d / "munge" / "munge.sock").exists(), "munged's socket")
        self.spawn(["slurmctld", "-D", "-i", "-f", f"{d}/slurm.conf"], "slurmctld.out")
        # slurmd's start-up is the slow part: all eight at once.
        for n in NODES:
            self.spawn(["slurmd", "-D", "-N", n, "-f", f"{d}/slurm.conf"], f"slurmd.{n}.out")
        self.wait_for(lambda: self.node_states() == ["idle"] * 8, "eight idle nodes", timeout=60)
        self.job_env = dict(self.env, OFCCTL=OFCCTL_BIN, OFCCTL_URL=self.url, OUT=str(self.out))

    def node_states(self):
        p = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, capture_output=True, text=True)
        return [s.strip("*~#") for s in p.stdout.split()] if p.returncode == 0 else []

    def wait_for(self, pred, what, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}:\n{self.logs()}")
            time.sleep(0.1)
        raise AssertionError(f"no {what} after {timeout} s:\n{self.logs()}")

    def logs(self):
        return "\n".join(f"== {f.name}\n{f.read_text()[-3000:]}" for f in sorted((self.d / "log").iterdir()))

    def ctld_log(self):
        return (self.d / "log" / "slurmctld.log").read_text()

    def run(self, *argv, timeout=60, **kw):
        return subprocess.run(list(argv), env=kw.pop("env", self.job_env), capture_output=True,
                              text=True, timeout=timeout, **kw)

    def sbatch(self, *args, wait=True, hold=None):
        """Submits job.sh; with wait, returns once the job ended, with its final state.
        (Polled here: sbatch --wait checks far less often.)"""
        env = dict(self.job_env, HOLD=str(hold) if hold else "")
        p = self.run("sbatch", "--parsable", "-o", f"{self.out}/%j.log", *args,
                     str(self.d / "job.sh"), env=env)
        job = p.stdout.strip().split(";")[0]
        assert job.isdigit(), (p.stdout, p.stderr)
        return int(job), self.wait_job(int(job)) if wait else None

    def wait_job(self, job):
        """Waits until the job has ended; its state."""
        ended = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY")
        self.wait_for(lambda: self.job(job).get("JobState") in ended, f"the end of job {job}")
        return self.job(job)["JobState"]

    def job(self, job):
        """The job as `scontrol show job` prints it, as a dict (AdminComment holds spaces and
        has a line of its own)."""
        p = self.run("scontrol", "show", "job", str(job))
        fields = {}
        for line in p.stdout.splitlines():
            line = line.strip()
            if line.startswith("AdminComment="):
                fields["AdminComment"] = line.split("=", 1)[1]
            else:
                fields.update(f.split("=", 1) for f in line.split() if "=" in f)
        return fields

    def fabric(self, job):
        """What the job itself recorded of its fabric, and its node list."""
        got = json.loads((self.out / f"{job}.json").read_text())
        return got, (self.out / f"{job}.nodes").read_text().split()

    def wait_fabric_gone(self, job):
        self.wait_for(lambda: self.ofcd.get(f"/v1/fabrics/slurm-{job}").status_code == 404,
                      f"removal of slurm-{job}", timeout=20)

    def stop(self):
        # Nothing may outlive the test: any job left is cancelled first.
        subprocess.run(["scancel", "--full", "--user=root"], env=self.env, capture_output=True)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.ofcd:
            self.ofcd.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_batch_job_gets_exactly_its_nodes(cluster):
    job, state = cluster.sbatch("-N", "5")
    assert state == "COMPLETED", cluster.logs()
    fabric, nodes = cluster.fabric(job)
    assert len(nodes) == 5
    assert fabric["name"] == f"slurm-{job}" and fabric["state"] == "applied"
    assert fabric["servers"] == nodes and fabric["missing"] == []
    assert len(fabric["links"]) == 10
    cluster.wait_fabric_gone(job)


def test_two_jobs_at_once_get_disjoint_fabrics(cluster):
    hold = cluster.d / "release"
    a, _ = cluster.sbatch("-N", "3", wait=False, hold=hold)
    b, _ = cluster.sbatch("-N", "4", wait=False, hold=hold)
    try:
        cluster.wait_for(lambda: all((cluster.out / f"{j}.json").exists() for j in (a, b)),
                         "both jobs running")
        (fa, na), (fb, nb) = cluster.fabric(a), cluster.fabric(b)
        assert fa["state"] == fb["state"] == "applied"
        assert fa["servers"] == na and fb["servers"] == nb
        assert (len(na), len(nb)) == (3, 4) and not set(na) & set(nb)
        names = {f["name"] for f in cluster.ofcd.get("/v1/fabrics").json()["fabrics"]}
        assert names == {f"slurm-{a}", f"slurm-{b}"}
    finally:
        hold.touch()
    for j in (a, b):
        assert cluster.wait_job(j) == "COMPLETED"
        cluster.wait_fabric_gone(j)


def test_nodes_held_by_another_fabric_fail_the_prolog(cluster):
    ofcctl = [OFCCTL_BIN, "--url", cluster.url]
    assert cluster.run(*ofcctl, "fabric", "create", "by-hand", "srv[0-7]", "--wait", "10").returncode == 0
    try:
        job, state = cluster.sbatch("-N", "2", "--no-requeue")
        info = cluster.job(job)
        assert state == "CANCELLED"
        # The job never ran: no output from its script, not even the file Slurm opens for it.
        assert not (cluster.out / f"{job}.json").exists() and not (cluster.out / f"{job}.log").exists()
        assert "409 in_use: " in info["AdminComment"] and "already in fabric by-hand" in info["AdminComment"]
        assert "setting admin_comment to ofcd-prolog: 409 in_use: " in cluster.ctld_log()
        assert cluster.ofcd.get(f"/v1/fabrics/slurm-{job}").status_code == 404
    finally:
        assert cluster.run(*ofcctl, "fabric", "delete", "by-hand", "--wait", "10").returncode == 0


def test_srun_gets_its_fabric(cluster):
    p = cluster.run("srun", "-N", "3", "sh", "-c",
                    '[ "$SLURM_PROCID" = 0 ] || exit 0; '
                    '"$OFCCTL" -o json fabric get "slurm-$SLURM_JOB_ID"; '
                    'scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd " "; echo "$SLURM_JOB_ID"')
    assert p.returncode == 0, p.stderr + cluster.logs()
    body, nodes, job = p.stdout.splitlines()
    fabric = json.loads(body)
    assert fabric["state"] == "applied" and fabric["name"] == f"slurm-{job}"
    assert fabric["servers"] == nodes.split() and len(fabric["servers"]) == 3
    cluster.wait_fabric_gone(int(job))


def test_infeasible_job_is_cancelled_with_the_planners_message(cluster):
    """Servers of four devices cannot join five: the job is cancelled (not requeued to fail
    again), the planner's reason in the slurmctld log and on the job."""
    topo = cluster.ofcd.get("/v1/topology").json()
    small = json.loads(json.dumps(topo))
    for s in small["servers"]:
        s["devices"] = 4
    assert cluster.ofcd.put("/v1/topology", small).status_code == 200
    try:
        job, state = cluster.sbatch("-N", "5")  # requeueing allowed: the prolog turns it off
        info = cluster.job(job)
        assert state == "CANCELLED" and info["Restarts"] == "0" and info["Requeue"] == "0"
        msg = "422 infeasible: 5 servers need 5 devices per server, each has 4"
        assert msg in info["AdminComment"]
        assert f"setting admin_comment to ofcd-prolog: {msg}" in cluster.ctld_log()
        assert not (cluster.out / f"{job}.json").exists()
        # A smaller job still fits the same servers.
        job, state = cluster.sbatch("-N", "4")
        assert state == "COMPLETED" and cluster.fabric(job)[0]["state"] == "applied"
        cluster.wait_fabric_gone(job)
    finally:
        assert cluster.ofcd.put("/v1/topology", topo).status_code == 200
