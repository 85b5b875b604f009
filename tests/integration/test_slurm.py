"""Slurm jobs get their fabric: a real slurmctld, eight slurmd (srv0..srv7, one port each, all on
loopback), munged with a private key and socket, and ofcd on the demo topology, with
packaging/slurm/ofcd-prolog as PrologSlurmctld and ofcd-slurm's collector and health pass run
as a site's timer and service would."""
import contextlib
import fcntl
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest
import requests

from conftest import Daemon, LoopbackServer, free_port

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
# Heterogeneous jobs need the backfill scheduler.
SchedulerType=sched/backfill
# Heterogeneous jobs start only in backfill passes: every second, not every 30.
SchedulerParameters=batch_sched_delay=0,bf_interval=1
JobSubmitPlugins=lua
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

        self.start_ofcd()

        # The programs as installed: with their settings next to them.
        for s in ("ofcd-prolog", "ofcd-slurm"):
            shutil.copy(os.path.join(SCRIPTS, s), d / "scripts" / s)
        (d / "scripts" / "ofcd-slurm.conf").write_text(
            f"OFCCTL={OFCCTL_BIN}\nOFCCTL_URL={self.url}\nSLURM_CONF={d}/slurm.conf\n"
            f"OFCD_CREATE_WAIT=20\nOFCD_DELETE_WAIT=20\nOFCD_STATE_DIR={d}/ofcd-slurm\n")
        # job_submit.lua next to slurm.conf, reading the settings above.
        lua = open(os.path.join(SCRIPTS, "job_submit.lua")).read()
        (d / "job_submit.lua").write_text(lua.replace("@SYSCONFDIR@/ofcd/slurm", f"{d}/scripts"))
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

    def start_ofcd(self):
        """ofcd on the demo topology: self.ofcd, and the URL the scripts are given."""
        self.ofcd = Daemon(self.d / "ofcd", extra="[debug]\nfaults = true\n",
                           args=("--demo",)).start()
        self.url = self.ofcd.url("")

    @contextlib.contextmanager
    def settings(self, **settings):
        """The scripts' settings file says settings (KEY=value) instead, for a while."""
        conf = self.d / "scripts" / "ofcd-slurm.conf"
        saved = conf.read_text()
        text = saved
        for key, value in settings.items():
            line = f"{key}={value}"
            text, n = re.subn(rf"^{key}=.*$", line, text, flags=re.M)
            text += "" if n else line + "\n"
        conf.write_text(text)
        try:
            yield
        finally:
            conf.write_text(saved)

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

    def slurm_tool(self, command):
        """ofcd-slurm COMMAND as its timer or service runs it."""
        p = self.run(str(self.d / "scripts" / "ofcd-slurm"), command, env=self.env)
        assert p.returncode == 0, p.stderr
        return p

    def wait_fabric_gone(self, *jobs):
        """The collector deletes finished jobs' fabrics (there is no epilog)."""
        for job in jobs:
            assert self.ofcd.get(f"/v1/fabrics/slurm-{job}").status_code == 200
        self.slurm_tool("gc")
        for job in jobs:
            assert self.ofcd.get(f"/v1/fabrics/slurm-{job}").status_code == 404

    def units_take_batches(self, take):
        """Whether the OCS units take the reconciler's batches (one that takes none keeps the
        cross-connects it has); true when both said yes."""
        faults = {"kind": "fail_batches", "count": 0 if take else 100000}
        return all([self.ofcd.post(f"/v1/ocs/{u}/faults", faults).status_code == 200
                    for u in ("ocs0", "ocs1")])

    def fabric_names(self):
        return {f["name"] for f in self.ofcd.get("/v1/fabrics").json()["fabrics"]}

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


@contextlib.contextmanager
def started(cluster):
    """cluster started, and stopped on the way out, also when it could not start."""
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with started(Cluster(tmp_path_factory.mktemp("slurm"))) as c:
        yield c


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
        assert cluster.fabric_names() == {f"slurm-{a}", f"slurm-{b}"}
    finally:
        hold.touch()
    for j in (a, b):
        assert cluster.wait_job(j) == "COMPLETED"
    cluster.wait_fabric_gone(a, b)


def test_nodes_held_by_another_fabric_fail_the_prolog(cluster):
    """A fabric Slurm did not make is an operator's: the prolog refuses its nodes and keeps
    the site's own AdminComment beside its reason."""
    ofcctl = [OFCCTL_BIN, "--url", cluster.url]
    assert cluster.run(*ofcctl, "fabric", "create", "by-hand", "srv[0-7]", "--wait", "10").returncode == 0
    try:
        job, _ = cluster.sbatch("-N", "2", "--no-requeue", "--hold", wait=False)
        assert cluster.run("scontrol", "update", f"JobId={job}", "AdminComment=site: rack 4").returncode == 0
        assert cluster.run("scontrol", "release", str(job)).returncode == 0
        state = cluster.wait_job(job)
        info = cluster.job(job)
        assert state == "CANCELLED"
        # The job never ran: no output from its script, not even the file Slurm opens for it.
        assert not (cluster.out / f"{job}.json").exists() and not (cluster.out / f"{job}.log").exists()
        reason = "ofcd-prolog: node srv0 is in fabric by-hand, which Slurm did not make"
        assert info["AdminComment"] == f"site: rack 4; {reason}"
        assert f"setting admin_comment to site: rack 4; {reason}" in cluster.ctld_log()
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
    """Servers of four devices cannot join five in a full mesh: the job gets a five-server
    ring instead. Servers of one device join at most two: a job of three is cancelled (not
    requeued to fail again), the planner's reason in the slurmctld log and on the job."""
    topo = cluster.ofcd.get("/v1/topology").json()

    def devices(n):
        t = json.loads(json.dumps(topo))
        for s in t["servers"]:
            s["devices"] = n
        assert cluster.ofcd.put("/v1/topology", t).status_code == 200

    try:
        devices(4)
        cluster.slurm_tool("gc")
        job, state = cluster.sbatch("-N", "5")
        fabric, nodes = cluster.fabric(job)
        assert state == "COMPLETED" and fabric["state"] == "applied", fabric
        assert (fabric["topology"], fabric["shape"], fabric["degree"]) == ("torus", [5], 2)
        assert fabric["servers"] == nodes and len(nodes) == 5
        cluster.wait_fabric_gone(job)

        devices(1)
        # Before the collector has noted the new limit: the prolog refuses it.
        job, state = cluster.sbatch("-N", "3")  # requeueing allowed: the prolog turns it off
        info = cluster.job(job)
        assert state == "CANCELLED" and info["Restarts"] == "0" and info["Requeue"] == "0"
        msg = "422 infeasible: no topology of 3 servers fits 1 planes per server"
        assert msg in info["AdminComment"], info["AdminComment"]
        assert "2 would fit" in info["AdminComment"]
        assert f"setting admin_comment to ofcd-prolog: {msg}" in cluster.ctld_log()
        assert not (cluster.out / f"{job}.json").exists()
        # After: job_submit.lua refuses it at once, saying why; ofcd=off still goes in.
        cluster.slurm_tool("gc")
        p = cluster.run("sbatch", "--parsable", "-N", "3", str(cluster.d / "job.sh"))
        assert p.returncode != 0 and p.stdout == ""
        assert "ofcd: no fabric joins 3 nodes on this cluster (at most 2" in p.stderr
        off, state = cluster.sbatch("-N", "3", "--comment", "ofcd=off")
        assert state == "COMPLETED" and not cluster.fabric_names()
        # A word of its own, as the prolog reads it: ofcd=offline is not ofcd=off.
        p = cluster.run("sbatch", "--parsable", "-N", "3", "--comment", "ofcd=offline",
                        str(cluster.d / "job.sh"))
        assert p.returncode != 0 and "ofcd: no fabric joins 3 nodes" in p.stderr
        # A site whose jobs get no fabric unless they ask (OFCD_JOBS=none) runs it too.
        conf = cluster.d / "scripts" / "ofcd-slurm.conf"
        kept = conf.read_text()
        try:
            conf.write_text(kept + "OFCD_JOBS=none\n")
            none, state = cluster.sbatch("-N", "3")
            assert state == "COMPLETED" and not cluster.fabric_names(), cluster.job(none)
            p = cluster.run("sbatch", "--parsable", "-N", "3", "--comment", "ofcd=on",
                            str(cluster.d / "job.sh"))
            assert p.returncode != 0 and "ofcd: no fabric joins 3 nodes" in p.stderr
        finally:
            conf.write_text(kept)
        # A smaller job still fits the same servers.
        job, state = cluster.sbatch("-N", "2")
        assert state == "COMPLETED" and cluster.fabric(job)[0]["state"] == "applied"
        cluster.wait_fabric_gone(job)
    finally:
        assert cluster.ofcd.put("/v1/topology", topo).status_code == 200
        cluster.slurm_tool("gc")


def test_job_that_ends_while_ofcd_is_away_blocks_nothing(cluster):
    """ofcd restarts while a job ends: its fabric stays, the next job on its nodes takes them
    over at once (its prolog deletes the ended job's fabric), and the collector removes the
    rest."""
    hold = cluster.d / "release-away"
    a, _ = cluster.sbatch("-N", "4", wait=False, hold=hold)
    cluster.wait_for(lambda: (cluster.out / f"{a}.json").exists(), "job a running")
    cluster.ofcd.stop()
    try:
        hold.touch()
        assert cluster.wait_job(a) == "COMPLETED"
    finally:
        cluster.ofcd.start()
    assert f"slurm-{a}" in cluster.fabric_names()
    b, state = cluster.sbatch("-N", "8")
    assert state == "COMPLETED", cluster.job(b).get("AdminComment")
    fabric, nodes = cluster.fabric(b)
    assert fabric["state"] == "applied" and len(nodes) == 8
    assert f"slurm-{a}" not in cluster.fabric_names()
    cluster.wait_fabric_gone(b)


def scripts_with(cluster, tmp_path, **settings):
    """A copy of the installed programs whose settings file says settings instead."""
    scripts = tmp_path / "scripts"
    shutil.copytree(cluster.d / "scripts", scripts)
    conf = scripts / "ofcd-slurm.conf"
    text = conf.read_text()
    for key, value in settings.items():
        text = re.sub(rf"{key}=.*", f"{key}={value}", text)
    conf.write_text(text)
    return scripts


def test_a_job_does_not_start_joined_by_a_deleted_fabrics_circuits(cluster):
    """The units keep an ended job's circuits past the delete's wait (they take no batch):
    a one-node job given one of its nodes must not start joined to the other. It starts once
    the units take the removal, and the registry forgets each node found free."""
    conf = cluster.d / "scripts" / "ofcd-slurm.conf"
    saved = conf.read_text()
    registry = cluster.d / "ofcd-slurm" / "fabrics.json"
    hold = cluster.d / "release-joined"
    a, _ = cluster.sbatch("-N", "2", "-w", "srv[4-5]", wait=False, hold=hold)
    try:
        cluster.wait_for(lambda: (cluster.out / f"{a}.json").exists(), "job a running")
        assert cluster.units_take_batches(False)
        hold.touch()
        assert cluster.wait_job(a) == "COMPLETED"
        conf.write_text(re.sub(r"OFCD_CREATE_WAIT=.*", "OFCD_CREATE_WAIT=2",
                               re.sub(r"OFCD_DELETE_WAIT=.*", "OFCD_DELETE_WAIT=1", saved)))
        b, state = cluster.sbatch("-N", "1", "-w", "srv4", "--no-requeue")
        assert state == "CANCELLED", cluster.job(b)
        assert not (cluster.out / f"{b}.log").exists()
        assert ("ofcd-prolog: node srv4 is still joined to another server: OCS unit ocs"
                in cluster.job(b)["AdminComment"]), cluster.job(b)
        assert f"slurm-{a}" not in cluster.fabric_names()
        assert json.loads(registry.read_text())[f"slurm-{a} (deleted)"] == ["srv4", "srv5"]
        # The collector keeps the nodes still joined.
        cluster.slurm_tool("gc")
        assert json.loads(registry.read_text())[f"slurm-{a} (deleted)"] == ["srv4", "srv5"]
        # The list lost (a rebuilt controller host): ofcd says which nodes are still joined.
        registry.unlink()
        b, state = cluster.sbatch("-N", "1", "-w", "srv5", "--no-requeue")
        assert state == "CANCELLED", cluster.job(b)
        assert "node srv5 is still joined to another server" in cluster.job(b)["AdminComment"]
        assert json.loads(registry.read_text()) == {"unknown (deleted)": ["srv4", "srv5"]}
    finally:
        conf.write_text(saved)
        cluster.units_take_batches(True)
        hold.touch()
    c, state = cluster.sbatch("-N", "1", "-w", "srv4")
    assert state == "COMPLETED", cluster.job(c).get("AdminComment")
    assert json.loads(registry.read_text()) == {"unknown (deleted)": ["srv5"]}
    cluster.slurm_tool("gc")
    assert not [f for f in json.loads(registry.read_text()) if f.endswith(" (deleted)")]


def test_a_fabric_deleted_behind_the_scripts_back_keeps_its_nodes(cluster):
    """A job's fabric deleted by someone else (by hand, or by a prolog whose wait ran out)
    while the units keep its circuits: the collector keeps its nodes as a deleted fabric's,
    so a one-node job given one of them does not start joined to the other (the code before
    dropped the entry, and the job started without asking ofcd)."""
    registry = cluster.d / "ofcd-slurm" / "fabrics.json"
    hold = cluster.d / "release-by-hand"
    ofcctl = [OFCCTL_BIN, "--url", cluster.url]
    a, _ = cluster.sbatch("-N", "2", "-w", "srv[4-5]", wait=False, hold=hold)
    try:
        cluster.wait_for(lambda: (cluster.out / f"{a}.json").exists(), "job a running")
        assert cluster.units_take_batches(False)
        assert cluster.run(*ofcctl, "fabric", "delete", f"slurm-{a}").returncode == 0
        cluster.slurm_tool("gc")
        assert json.loads(registry.read_text())[f"slurm-{a} (deleted)"] == ["srv4", "srv5"]
        hold.touch()
        assert cluster.wait_job(a) == "COMPLETED"
        with cluster.settings(OFCD_CREATE_WAIT=2):
            b, state = cluster.sbatch("-N", "1", "-w", "srv4", "--no-requeue")
        assert state == "CANCELLED", cluster.job(b)
        assert "node srv4 is still joined to another server" in cluster.job(b)["AdminComment"]
    finally:
        cluster.units_take_batches(True)
        hold.touch()
    # The units took the removal: the next pass finds the nodes free.
    cluster.wait_for(lambda: not cluster.ofcd.get("/v1/servers?joined=true").json()["servers"],
                     "the circuits off")
    cluster.slurm_tool("gc")
    assert f"slurm-{a} (deleted)" not in json.loads(registry.read_text())


def test_a_jobs_next_start_keeps_its_earlier_fabrics_nodes(cluster):
    """A job whose fabric was deleted by someone else starts again before the collector
    came: on other nodes, its new fabric takes the name, and the earlier one's nodes stay
    listed as deleted until they are found free (the code before forgot them); on the same
    nodes, ofcd found them free, and only the new fabric lists them."""
    registry = cluster.d / "ofcd-slurm" / "fabrics.json"
    hold = cluster.d / "release-next-start"
    ofcctl = [OFCCTL_BIN, "--url", cluster.url]
    a, _ = cluster.sbatch("-N", "2", "-w", "srv[4-5]", wait=False, hold=hold)

    def start_again(nodelist):
        """Its prolog, as slurmctld would run it for a start on nodelist."""
        assert cluster.run(*ofcctl, "fabric", "delete", f"slurm-{a}", "--wait",
                           "30").returncode == 0
        env = dict(cluster.env, SLURM_JOB_ID=str(a), SLURM_JOB_NODELIST=nodelist,
                   SLURM_JOB_NUM_NODES="2")
        p = cluster.run(str(cluster.d / "scripts" / "ofcd-prolog"), env=env, timeout=120)
        assert p.returncode == 0, (p.stdout, p.stderr)
        return json.loads(registry.read_text())

    try:
        cluster.wait_for(lambda: (cluster.out / f"{a}.json").exists(), "job a running")
        listed = start_again("srv[4-5]")
        assert listed[f"slurm-{a}"] == ["srv4", "srv5"] and f"slurm-{a} (deleted)" not in listed
        listed = start_again("srv[6-7]")
        assert listed[f"slurm-{a}"] == ["srv6", "srv7"]
        assert listed[f"slurm-{a} (deleted)"] == ["srv4", "srv5"]
        cluster.slurm_tool("gc")
        listed = json.loads(registry.read_text())
        assert listed[f"slurm-{a}"] == ["srv6", "srv7"] and f"slurm-{a} (deleted)" not in listed
    finally:
        hold.touch()
    assert cluster.wait_job(a) == "COMPLETED"
    cluster.wait_fabric_gone(a)


def test_a_prolog_that_cannot_read_the_node_list_fails(cluster, tmp_path):
    """scontrol failing (a slurm.conf being rewritten, an Include it cannot read) must not
    make a five-node job look like one that needs no fabric and start it unfenced."""
    empty = tmp_path / "slurm.conf"
    empty.write_text("")
    scripts = scripts_with(cluster, tmp_path, SLURM_CONF=empty)
    env = dict(cluster.env, SLURM_JOB_ID="999999", SLURM_JOB_NODELIST="srv[0-4]",
               SLURM_JOB_NUM_NODES="5")
    p = cluster.run(str(scripts / "ofcd-prolog"), env=env, timeout=120)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "scontrol" in p.stderr, p.stderr
    assert "slurm-999999" not in cluster.fabric_names()


def test_a_requeued_jobs_old_fabric_does_not_block_its_old_nodes(cluster):
    """A job requeued and started again elsewhere leaves the fabric of its earlier start on
    its old nodes until its own prolog deletes it: a job given those nodes first takes them
    (the job is alive, but not on them)."""
    hold = cluster.d / "release-requeued"
    ofcctl = [OFCCTL_BIN, "--url", cluster.url]
    a, _ = cluster.sbatch("-N", "1", "-w", "srv0", wait=False, hold=hold)
    try:
        cluster.wait_for(lambda: (cluster.out / f"{a}.json").exists(), "job a running")
        # The fabric of a's earlier start, on nodes a no longer has.
        assert cluster.run(*ofcctl, "fabric", "create", f"slurm-{a}", "srv[6-7]").returncode == 0
        b, state = cluster.sbatch("-N", "2", "-w", "srv[6-7]")
        assert state == "COMPLETED", cluster.job(b)
        assert f"slurm-{a}" not in cluster.fabric_names()
    finally:
        hold.touch()
    assert cluster.wait_job(a) == "COMPLETED"
    cluster.wait_fabric_gone(b)


def test_gc_that_does_not_wait_for_removal_deletes(cluster, tmp_path):
    """OFCD_DELETE_WAIT=0: ofcctl answers "removing" (exit 3) at once, which is a delete."""
    ofcctl = [OFCCTL_BIN, "--url", cluster.url]
    assert cluster.run(*ofcctl, "fabric", "create", "slurm-999998", "srv6").returncode == 0
    scripts = scripts_with(cluster, tmp_path, OFCD_DELETE_WAIT=0)
    p = cluster.run(str(scripts / "ofcd-slurm"), "gc", env=cluster.env)
    assert p.returncode == 0, p.stderr
    assert "slurm-999998" not in cluster.fabric_names()


def test_first_gc_on_a_new_node_makes_its_state_directory(cluster, tmp_path):
    """The timer's first pass may come before any prolog made the state directory."""
    fresh = tmp_path / "state"
    scripts = scripts_with(cluster, tmp_path, OFCD_STATE_DIR=fresh)
    p = cluster.run(str(scripts / "ofcd-slurm"), "gc", env=cluster.env)
    assert p.returncode == 0, p.stderr
    assert int((fresh / "max_nodes").read_text()) >= 2
    assert sorted(f.name for f in fresh.iterdir()) == ["fabrics.json", "lock", "max_nodes"]


def test_a_lost_registry_is_rebuilt_from_ofcd(cluster):
    """fabrics.json gone or damaged (a new or rebuilt controller host): a job that needs no
    fabric must not take it for "no fabric anywhere" and start on a node a fabric holds."""
    ofcctl = [OFCCTL_BIN, "--url", cluster.url]
    registry = cluster.d / "ofcd-slurm" / "fabrics.json"
    cluster.slurm_tool("gc")  # the state directory, whichever test comes first
    assert cluster.run(*ofcctl, "fabric", "create", "by-hand", "srv7").returncode == 0
    try:
        for damage in ("{not json", None):
            if damage is None:
                registry.unlink()
            else:
                registry.write_text(damage)
            job, state = cluster.sbatch("-N", "1", "-w", "srv7", "--no-requeue")
            assert state == "CANCELLED", cluster.job(job)
            assert "node srv7 is in fabric by-hand, which Slurm did not make" in \
                cluster.job(job)["AdminComment"]
            assert json.loads(registry.read_text())["by-hand"] == ["srv7"]
    finally:
        cluster.run(*ofcctl, "fabric", "delete", "by-hand")
    cluster.slurm_tool("gc")
    one, state = cluster.sbatch("-N", "1", "-w", "srv7")
    assert state == "COMPLETED", cluster.job(one).get("AdminComment")


def test_slurm_commands_not_in_path_fail_with_a_message(cluster, tmp_path):
    """Slurm installed elsewhere (/opt/slurm/bin) and PATH not set in ofcd-slurm.conf: the
    prolog fails saying so, not with a traceback slurmctld throws away; PATH there fixes it."""
    scripts = scripts_with(cluster, tmp_path)
    conf = scripts / "ofcd-slurm.conf"
    conf.write_text(conf.read_text() + f"PATH={tmp_path / 'nowhere'}\n")
    env = dict(cluster.env, SLURM_JOB_ID="999997", SLURM_JOB_NODELIST="srv0",
               SLURM_JOB_NUM_NODES="1")
    p = cluster.run(str(scripts / "ofcd-prolog"), env=env, timeout=120)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "cannot run scontrol: No such file or directory" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    slurm_bin = os.path.dirname(shutil.which("scontrol", path=cluster.env.get("PATH")))
    conf.write_text(conf.read_text() + f"PATH={slurm_bin}:/usr/bin:/bin\n")
    p = cluster.run(str(scripts / "ofcd-slurm"), "gc", env=cluster.env)
    assert p.returncode == 0, p.stderr


def test_gc_removes_a_leaked_fabric_and_spares_running_jobs(cluster):
    """A fabric whose job was cancelled or is gone leaks until the collector runs; a running
    job's fabric, and fabrics Slurm did not make, are left alone."""
    hold = cluster.d / "release-gc"
    ofcctl = [OFCCTL_BIN, "--url", cluster.url]
    a, _ = cluster.sbatch("-N", "2", wait=False, hold=hold)
    try:
        cluster.wait_for(lambda: (cluster.out / f"{a}.json").exists(), "job a running")
        # A job cancelled while its prolog ran (slurmctld kills it: the fabric it made stays),
        # a job id Slurm never had, and a fabric an operator made.
        cancelled, _ = cluster.sbatch("-N", "2", "--hold", wait=False)
        assert cluster.run("scancel", str(cancelled)).returncode == 0
        assert cluster.wait_job(cancelled) == "CANCELLED"
        assert cluster.run(*ofcctl, "fabric", "create", f"slurm-{cancelled}", "srv[4-5]").returncode == 0
        assert cluster.run(*ofcctl, "fabric", "create", "slurm-999999", "srv6").returncode == 0
        assert cluster.run(*ofcctl, "fabric", "create", "by-hand", "srv7").returncode == 0
        cluster.slurm_tool("gc")
        assert cluster.fabric_names() == {f"slurm-{a}", "by-hand"}
    finally:
        hold.touch()
        cluster.run(*ofcctl, "fabric", "delete", "by-hand")
    assert cluster.wait_job(a) == "COMPLETED"
    cluster.wait_fabric_gone(a)


def test_queued_job_starts_when_the_first_ends(cluster):
    """A job queued behind another starts when the first ends: its prolog takes the ended
    job's nodes over, where the earlier epilog's delete made it fail and wait for a requeue."""
    hold = cluster.d / "release-queue"
    a, _ = cluster.sbatch("-N", "8", wait=False, hold=hold)
    cluster.wait_for(lambda: (cluster.out / f"{a}.json").exists(), "job a running")
    b, _ = cluster.sbatch("-N", "8", wait=False)
    assert cluster.job(b)["JobState"] == "PENDING"
    hold.touch()
    assert cluster.wait_job(a) == "COMPLETED" and cluster.wait_job(b) == "COMPLETED"
    ended = time.mktime(time.strptime(cluster.job(a)["EndTime"], "%Y-%m-%dT%H:%M:%S"))
    started = time.mktime(time.strptime(cluster.job(b)["StartTime"], "%Y-%m-%dT%H:%M:%S"))
    # Seconds, as Slurm records them; a requeue would put it minutes later.
    assert started - ended <= 15, (started - ended, cluster.logs())
    assert cluster.fabric(b)[0]["state"] == "applied"
    cluster.wait_fabric_gone(b)


def test_jobs_that_need_no_fabric_run_while_ofcd_is_away(cluster):
    """A one-node job, and one that opts out with --comment ofcd=off, need no fabric: with no
    fabric left on their nodes they start without asking ofcd; ofcd=on asks for one even for
    a single node."""
    cluster.slurm_tool("gc")
    cluster.ofcd.stop()
    try:
        one, state = cluster.sbatch("-N", "1")
        assert state == "COMPLETED", cluster.job(one).get("AdminComment")
        off, state = cluster.sbatch("-N", "3", "--comment", "ofcd=off")
        assert state == "COMPLETED", cluster.job(off).get("AdminComment")
    finally:
        cluster.ofcd.start()
    assert cluster.fabric_names() == set()
    on, state = cluster.sbatch("-N", "1", "--comment", "ofcd=on")
    assert state == "COMPLETED" and cluster.fabric(on)[0]["servers"] == cluster.fabric(on)[1]
    # A fabric left on a node: now even a one-node job needs ofcd to clear it first, and
    # fails once its calls have tried for OFCCTL_RETRY seconds.
    cluster.ofcd.stop()
    try:
        with cluster.settings(OFCCTL_RETRY=1):
            left, state = cluster.sbatch("-N", "1", "-w", cluster.fabric(on)[1][0],
                                         "--no-requeue")
        assert state == "CANCELLED"
        assert "cannot reach the daemon" in cluster.job(left)["AdminComment"]
    finally:
        cluster.ofcd.start()
    cluster.wait_fabric_gone(on)


class LosesAnAnswer(LoopbackServer):
    """Passes requests to ofcd, but drops the connection instead of the answer of the first
    request of method on a path that starts with path: a member that died right after it
    took the write."""

    def __init__(self, upstream, method, path):
        outer = self
        self.lost = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                r = requests.request(self.command, upstream + self.path, data=body,
                                     headers={k: v for k, v in self.headers.items()
                                              if k.lower() not in ("host", "content-length")},
                                     timeout=120)
                if self.command == method and self.path.startswith(path) and not outer.lost:
                    outer.lost.append(r.status_code)
                    self.close_connection = True
                    return
                self.send_response(r.status_code)
                for k in ("Content-Type", "ETag", "Location"):
                    if k in r.headers:
                        self.send_header(k, r.headers[k])
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = do_POST = do_PUT = do_DELETE = answer

            def log_message(self, *a):
                pass

        super().__init__(Handler)


@contextlib.contextmanager
def prolog_through(cluster, proxy):
    """The prolog's calls to ofcd go through proxy."""
    try:
        with cluster.settings(OFCCTL_URL=proxy.url()):
            yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()


def noting_ofcctl(tmp_path):
    """ofcctl as installed, its stderr also copied to a file: (the program, the file)."""
    notes = tmp_path / "ofcctl.err"
    wrapper = tmp_path / "ofcctl"
    wrapper.write_text(f"#!/bin/bash\nexec {OFCCTL_BIN} \"$@\" 2> >(tee -a {notes} >&2)\n")
    wrapper.chmod(0o755)
    return wrapper, notes


def test_a_create_whose_answer_is_lost_is_read_back(cluster):
    """ofcd takes the prolog's create but its answer never comes (the member died with it):
    the prolog reads the fabric back, finds it made, and the job runs, not requeued."""
    with prolog_through(cluster, LosesAnAnswer(cluster.url, "POST", "/v1/fabrics")) as proxy:
        job, state = cluster.sbatch("-N", "2")
    assert proxy.lost == [201]
    assert state == "COMPLETED", cluster.job(job).get("AdminComment")
    assert cluster.job(job)["Restarts"] == "0"
    fabric, nodes = cluster.fabric(job)
    assert fabric["state"] == "applied" and len(nodes) == 2
    cluster.wait_fabric_gone(job)


def test_a_delete_whose_answer_is_lost_is_sent_again(cluster):
    """The prolog's delete of an ended job's fabric is taken but its answer never comes: sent
    again, its 404 says the first got in, and the next job runs on the nodes, not requeued."""
    a, state = cluster.sbatch("-N", "2", "-w", "srv[6-7]")
    assert state == "COMPLETED" and f"slurm-{a}" in cluster.fabric_names()
    with prolog_through(cluster, LosesAnAnswer(cluster.url, "DELETE", f"/v1/fabrics/slurm-{a}")) \
            as proxy:
        b, state = cluster.sbatch("-N", "2", "-w", "srv[6-7]")
    assert proxy.lost == [200]
    assert state == "COMPLETED", cluster.job(b).get("AdminComment")
    assert cluster.job(b)["Restarts"] == "0"
    assert f"slurm-{a}" not in cluster.fabric_names()
    cluster.wait_fabric_gone(b)


def test_a_job_that_starts_while_ofcd_restarts_waits_for_it(cluster, tmp_path):
    """ofcd is away (a restart, a failover) when a job that needs a fabric starts: its prolog's
    calls keep trying for OFCCTL_RETRY seconds, and the job gets its fabric and runs once ofcd
    is back, not requeued."""
    wrapper, notes = noting_ofcctl(tmp_path)
    cluster.slurm_tool("gc")
    cluster.ofcd.stop()
    try:
        with cluster.settings(OFCCTL=wrapper, OFCCTL_RETRY=120):
            job, _ = cluster.sbatch("-N", "2", wait=False)
            cluster.wait_for(lambda: notes.exists() and "trying again" in notes.read_text(),
                             "the prolog trying ofcd again", timeout=60)
            assert cluster.job(job)["JobState"] in ("PENDING", "CONFIGURING", "RUNNING")
    finally:
        cluster.ofcd.start()
    assert cluster.wait_job(job) == "COMPLETED", cluster.job(job).get("AdminComment")
    assert cluster.job(job)["Restarts"] == "0"
    fabric, nodes = cluster.fabric(job)
    assert fabric["state"] == "applied" and len(nodes) == 2
    cluster.wait_fabric_gone(job)


def test_failed_devices_drain_the_node_and_repair_resumes_it(cluster):
    """The health pass drains a node whose device failed, with the device in the reason, and
    resumes it once repaired; a node an admin drained stays drained."""
    ofcctl = [OFCCTL_BIN, "--url", cluster.url]

    def node(n):
        state, reason = cluster.run("sinfo", "-h", "-n", n, "-o", "%T|%E",
                                    env=cluster.env).stdout.strip().split("|")
        return f"{state.rstrip('*~#')}|{reason}"

    assert cluster.run(*ofcctl, "device", "fail", "srv5", "2").returncode == 0
    assert cluster.run(*ofcctl, "device", "fail", "srv5", "6").returncode == 0
    assert cluster.run("scontrol", "update", "NodeName=srv6", "State=DRAIN",
                       "Reason=maintenance", env=cluster.env).returncode == 0
    # An admin took srv7 down, and its device failed too: the admin's state and reason stay.
    assert cluster.run("scontrol", "update", "NodeName=srv7", "State=DOWN",
                       "Reason=NIC swap", env=cluster.env).returncode == 0
    assert cluster.run(*ofcctl, "device", "fail", "srv7", "1").returncode == 0
    try:
        cluster.slurm_tool("health-once")
        assert node("srv5") == "drained|ofcd: devices 2,6 of srv5 failed"
        assert node("srv6") == "drained|maintenance"
        assert node("srv7") == "down|NIC swap"
        assert cluster.run(*ofcctl, "device", "ok", "srv7", "1").returncode == 0
        cluster.slurm_tool("health-once")
        assert node("srv7") == "down|NIC swap"
        # Drained: a job of all eight nodes waits rather than failing on a broken node.
        assert cluster.run(*ofcctl, "device", "ok", "srv5", "2").returncode == 0
        cluster.slurm_tool("health-once")
        assert node("srv5") == "drained|ofcd: device 6 of srv5 failed"
        assert cluster.run(*ofcctl, "device", "ok", "srv5", "6").returncode == 0
        cluster.slurm_tool("health-once")
        assert node("srv5") == "idle|none"
        assert node("srv6") == "drained|maintenance"
    finally:
        cluster.run(*ofcctl, "device", "ok", "srv5", "2")
        cluster.run(*ofcctl, "device", "ok", "srv5", "6")
        cluster.run(*ofcctl, "device", "ok", "srv7", "1")
        for n in ("srv5", "srv6", "srv7"):  # one at a time: an idle one refuses RESUME
            cluster.run("scontrol", "update", f"NodeName={n}", "State=RESUME", env=cluster.env)
        cluster.wait_for(lambda: cluster.node_states() == ["idle"] * 8, "eight idle nodes")


def test_health_service_follows_events(cluster):
    """As its service runs it: a device failure drains the node within moments, through the
    event stream, long before the periodic pass."""
    ofcctl = [OFCCTL_BIN, "--url", cluster.url]
    conf = cluster.d / "scripts" / "ofcd-slurm.conf"
    text = conf.read_text()
    conf.write_text(text + "OFCD_HEALTH_PERIOD=3600\n")
    log = open(cluster.d / "log" / "health.out", "w")

    def connections():
        text = cluster.ofcd.get("/metrics").text
        return int(re.search(r"^ofcd_http_open_connections (\d+)$", text, re.M).group(1))

    before = connections()
    svc = subprocess.Popen([str(cluster.d / "scripts" / "ofcd-slurm"), "health"], env=cluster.env,
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        # Its first pass is done and its event stream open: one connection more, steadily.
        seen = []

        def following():
            seen.append(connections() == before + 1)
            time.sleep(0.2)
            return seen[-3:] == [True] * 3

        cluster.wait_for(following, "the health service following events")
        assert cluster.run(*ofcctl, "device", "fail", "srv3", "1").returncode == 0
        cluster.wait_for(lambda: "ofcd: device 1 of srv3 failed" in cluster.run(
            "sinfo", "-h", "-n", "srv3", "-o", "%E", env=cluster.env).stdout, "srv3 drained")
        assert cluster.run(*ofcctl, "device", "ok", "srv3", "1").returncode == 0
        cluster.wait_for(lambda: cluster.run("sinfo", "-h", "-n", "srv3", "-o", "%T", env=cluster.env)
                         .stdout.strip().rstrip("*~#") == "idle", "srv3 resumed")
    finally:
        svc.terminate()
        svc.wait(timeout=10)
        log.close()
        conf.write_text(text)
        cluster.run(*ofcctl, "device", "ok", "srv3", "1")
        cluster.run("scontrol", "update", "NodeName=srv3", "State=RESUME", env=cluster.env)


def test_heterogeneous_job_gets_one_fabric(cluster):
    """The components of a heterogeneous job share one fabric, of all their nodes, named
    after the job; none of their own."""
    job, state = cluster.sbatch("-N", "2", ":", "-N", "3")
    assert state == "COMPLETED", cluster.logs()
    fabric, first = cluster.fabric(job)
    assert fabric["name"] == f"slurm-{job}" and fabric["state"] == "applied"
    assert len(fabric["servers"]) == 5 and set(first) < set(fabric["servers"])
    assert len(fabric["links"]) == 10
    assert cluster.fabric_names() == {f"slurm-{job}"}
    cluster.wait_fabric_gone(job)
    # The lock held longer than OFCD_CREATE_WAIT (a collector's pass deleting fabrics): the
    # first component waits for it, and so do the others before their time starts.
    conf = cluster.d / "scripts" / "ofcd-slurm.conf"
    kept = conf.read_text()
    lock = open(cluster.d / "ofcd-slurm" / "lock", "a")
    try:
        conf.write_text(kept + "OFCD_CREATE_WAIT=3\n")
        fcntl.flock(lock, fcntl.LOCK_EX)
        held, _ = cluster.sbatch("-N", "2", ":", "-N", "3", wait=False)
        time.sleep(5)
        fcntl.flock(lock, fcntl.LOCK_UN)
        assert cluster.wait_job(held) == "COMPLETED", cluster.job(held).get("AdminComment")
        assert cluster.job(held)["Restarts"] == "0"
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
        conf.write_text(kept)
    cluster.wait_fabric_gone(held)
    # The first component's comment decides (scontrol shows every component's record).
    off, state = cluster.sbatch("--comment", "ofcd=off", "-N", "2", ":", "--comment", "ofcd=on",
                                "-N", "3")
    assert state == "COMPLETED", cluster.job(off).get("AdminComment")
    assert cluster.fabric_names() == set()
