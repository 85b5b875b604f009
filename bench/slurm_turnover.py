"""Job turnover with ofcd's Slurm programs against without them, in one run on one cluster
(tests/integration/test_slurm.py's: a real slurmctld, eight slurmd, ofcd on its demo topology).

- makespan: 20 mixed jobs (1 to 8 nodes, 0.5 to 2 s each, seeded), submitted at once, from
  the first submission to the last job's end;
- gap: an 8-node job queued behind another 8-node job, from the first's end to the second's
  start (both as the jobs' own scripts saw them), three times.

Phases alternate by reconfiguring slurmctld (PrologSlurmctld set or not). Usage:
slurm_turnover.py BUILD_DIR (as root).
"""
import os
import random
import statistics
import sys
import tempfile
import time
import pathlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ.setdefault("OFCD_BIN", os.path.join(build, "ofcd"))
os.environ.setdefault("OFCCTL_BIN", os.path.join(build, "ofcctl"))

import test_slurm  # noqa: E402

# The job's own clock: when its script started and ended.
STAMPED = 'date +%s.%N > "{out}/$SLURM_JOB_ID.start"; sleep {secs}; date +%s.%N > "{out}/$SLURM_JOB_ID.end"'


class Bench:
    def __init__(self, cluster):
        self.c = cluster
        self.conf = cluster.d / "slurm.conf"
        self.base = self.conf.read_text()

    def phase(self, prolog):
        text = self.base if prolog else self.base.replace("PrologSlurmctld=", "#PrologSlurmctld=")
        self.conf.write_text(text)
        p = self.c.run("scontrol", "reconfigure", env=self.c.env)
        assert p.returncode == 0, p.stderr
        self.c.wait_for(lambda: self.c.node_states() == ["idle"] * 8, "eight idle nodes", timeout=120)

    def submit(self, nodes, secs):
        p = self.c.run("sbatch", "--parsable", "-N", str(nodes), "-o", "/dev/null", "--wrap",
                       STAMPED.format(out=self.c.out, secs=secs), env=self.c.env)
        assert p.returncode == 0, p.stderr
        return p.stdout.strip()

    def stamp(self, job, which):
        path = self.c.out / f"{job}.{which}"
        self.c.wait_for(lambda: path.exists() and path.read_text().strip(), f"job {job} {which}",
                        timeout=300)
        return float(path.read_text())

    def makespan(self, seed):
        rnd = random.Random(seed)
        jobs = [(rnd.choice((1, 2, 3, 4, 5, 8)), rnd.choice((0.5, 1, 1.5, 2))) for _ in range(20)]
        t0 = time.time()
        ids = [self.submit(n, s) for n, s in jobs]
        return max(self.stamp(j, "end") for j in ids) - t0

    def gap(self):
        a = self.submit(8, 1)
        b = self.submit(8, 0)
        return self.stamp(b, "start") - self.stamp(a, "end")


def main():
    d = pathlib.Path(tempfile.mkdtemp(prefix="slurm-bench-"))
    c = test_slurm.Cluster(d)
    try:
        c.start()
        b = Bench(c)
        spans = {True: [], False: []}
        gaps = {True: [], False: []}
        for rnd in range(2):
            for prolog in (False, True):
                b.phase(prolog)
                spans[prolog].append(b.makespan(seed=rnd))
                gaps[prolog] += [b.gap() for _ in range(3 if rnd == 0 else 0)]
        b.phase(True)
        c.slurm_tool("gc")
        for prolog in (False, True):
            what = "with ofcd" if prolog else "without"
            print(f"slurm makespan of 20 mixed jobs {what}: "
                  f"{', '.join(f'{s:.1f}' for s in spans[prolog])} s")
            print(f"slurm gap end-to-start of a queued job {what}: "
                  f"{', '.join(f'{g:.2f}' for g in gaps[prolog])} s")
        ratio = statistics.median(spans[True]) / statistics.median(spans[False])
        extra = statistics.median(gaps[True]) - statistics.median(gaps[False])
        print(f"slurm makespan ratio with/without: {ratio:.2f} (target <= 1.2)")
        print(f"slurm gap added by ofcd: {extra:.2f} s (target <= 2)")
    finally:
        c.stop()


if __name__ == "__main__":
    main()
