#!/usr/bin/env python3
"""Fidelity of ofcd's collective cost model against SimGrid, without a barrier per round.

fidelity.py replays a schedule round by round: every participant waits for every other at the
end of each round, the convention the model's "sum of the rounds" shares. Real collective
libraries have no global barrier: a participant goes on as soon as what it depends on has
arrived. This test replays the same schedules (the schedule route's transfers, between the
devices it names, on the platform simnet.py builds from the stored circuits) as one DAG per
candidate (Net.add_dag), with these dependencies, per participant (a server for the
server-level collectives, a device for all-to-all):

  - a transfer of round r that leaves participant p starts when
      * every transfer of an earlier round that arrived at p is through, and, where the
        schedule's op is "reduce", p has reduced it;
      * p's own transfers of its previous sending round are through (a participant issues its
        rounds in order: its links are busy until then);
    and then, as in fidelity.py, its route's latency later;
  - p reduces the transfers of round r that bring it a "reduce" once they have all arrived and
    its reduction of its previous round is done (one reducer per participant), at gamma per
    byte of them: a node of the DAG that moves nothing (a message of 0 bytes from p's device
    to itself, delayed by the reduction's time; simnet runs it without SimGrid, which never
    completes an empty message). Where a round's reduction writes a chunk that p sends in the
    same round, it waits for that send too (the schedule reads a round's sources as they were
    at the round's start);
  - what arrives at p lands in a receive buffer: a transfer into p never waits for p.

The job ends when the last transfer or reduction is through. ofcd prices each candidate twice:
with "sync": "pairwise" (params of the selection), which it prices for all-to-all by replaying
the schedule as flows sharing links max-min fairly with these dependencies, against this
replay; and with the default barrier, against the same schedules replayed with the barrier
(Net.add_rounds, as fidelity.py does), so the report shows both conventions and what removing
the barrier changes.

The fabrics are full meshes of 2, 3, 4, 7, 8, 13, 16 and 31 servers, once with one port per
device and once with two (8, 16 or 32 devices per server with one port, half as many with
two: the fewest powers of two, and at least 8 ports, that hold the full interconnection), and
two fabrics re-planned around a failed device (PUT /v1/servers/NAME/devices/INDEX): 8 servers
of 8 devices, whose broken circuit moves to the spare plane (its devices are no longer the
plan's), and 7 servers of 7 devices, which have no spare plane: the pair is missing and the
fabric degraded, so only the candidates that avoid it are eligible. Every collective at 8 B,
1 KiB, 64 KiB, 1 MiB, 16 MiB, 256 MiB and 4 GiB (on 13 servers and more at 8 B, 1 MiB and
4 GiB only: THIN below), every eligible candidate (all-to-all past the schedule route's 64
participants is not served, so not simulated).

Both replays run from simnet's event queue (add_dag and add_rounds with queued=True): the plain
runners' times (checked once: the barrier replay both ways on every case at three sizes agreed
to 10⁻¹³, the DAGs of 60 cases to 10⁻¹⁴) without scanning every message at every event, which
a whole schedule as one DAG (up to 4,650 messages here) would make quadratic. The run takes
1.5 to 3 minutes on a 2-CPU virtual machine, depending on its host's load; most of it in
SimGrid.

Fails (exit 1) when, under either convention, fewer than 95 % of the cases are within 5 % of
their replay, or a pick is not its replay's fastest (times within 10⁻⁶ count as equal).
    fidelity_free.py [--table FILE] [--verbose]
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "integration"))

from conftest import Daemon  # noqa: E402
from exchanges import schedule_rounds  # noqa: E402
from fidelity import REQUIRED, TIE, WITHIN, close, ok  # noqa: E402
from simnet import Net  # noqa: E402

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30
SIZES = (8, KB, 64 * KB, MB, 16 * MB, 256 * MB, 4 * GB)
# Fabrics of 13 servers and more are past all-to-all's 64 participants: their candidates are
# server-level, and at all seven sizes every one was within 0.01 % with and without the
# barrier. They run at three sizes (latency-bound, mixed, bandwidth-bound), which keeps the
# run under 3 minutes: they are most of SimGrid's work (a round of 930 messages on 31).
THIN, THIN_SIZES = 13, (8, MB, 4 * GB)
SERVERS = (2, 3, 4, 7, 8, 13, 16, 31)
PORTS = (1, 2)
COLLECTIVES = ("allreduce", "allgather", "broadcast", "alltoall")
# Re-planned around a failed device: (fabric, servers, devices, failed server index, device).
FAILED = (("r8", 8, 8, 3, 2), ("m7", 7, 7, 3, 2))
OCS_UNITS, OCS_PORTS = 32, 256


def planes(m):
    """Planes (ports per server) the full interconnection of m servers needs."""
    return m if m % 2 else m - 1


def devices(m, ports):
    d = 8
    while d < planes(m):
        d *= 2
    return d // ports


def fabrics():
    """(fabric, servers, devices, ports per device, failed (server index, device) or None)."""
    out = [(f"k{m}p{p}", m, devices(m, p), p, None) for p in PORTS for m in SERVERS]
    out += [(name, m, n, 1, (s, d)) for name, m, n, s, d in FAILED]
    return out


def topology():
    servers = [{"name": f"{f}s{i}", "devices": n, "ports_per_device": p, "intra": "full-mesh"}
               for f, m, n, p, _ in fabrics() for i in range(m)]
    return {"ocs": [{"name": f"ocs{u:02d}", "driver": "sim", "ports": OCS_PORTS, "endpoint": ""}
                    for u in range(OCS_UNITS)],
            "servers": servers, "wiring": {"rule": "plane-per-ocs"}}


def free_flows(sch, host, gamma_ns_per_byte):
    """The schedule's transfers as one DAG of Net.add_dag() flows, dependencies as in the
    module's docstring; host(server, device) gives the SimGrid host."""
    per_device = sch["collective"] == "alltoall"
    gamma = gamma_ns_per_byte * 1e-9
    flows = []
    frontier = {}  # participant -> flows its next round's transfers wait for
    reducer = {}   # participant -> its last reduction
    for rnd in sch["rounds"]:
        sent, got, reduced = {}, {}, {}
        for t in rnd["transfers"]:
            (a, src), (b, dst) = ends(t, per_device, host)
            flows.append((src, dst, t["bytes"], list(frontier.get(a, ()))))
            sent.setdefault(a, []).append((len(flows) - 1, t))
            (reduced if t["op"] == "reduce" else got).setdefault(b, []).append(
                (len(flows) - 1, t, dst))
        for p, out in sent.items():
            frontier[p] = [i for i, _ in out]
        for p, arrived in got.items():
            frontier.setdefault(p, []).extend(i for i, _, _ in arrived)
        for p, arrived in reduced.items():
            writes = {c for _, t, _ in arrived for c in t["chunks"]}
            deps = [i for i, _, _ in arrived] + ([reducer[p]] if p in reducer else []) + \
                [i for i, t in sent.get(p, ()) if writes.intersection(t["chunks"])]
            nbytes = sum(t["bytes"] for _, t, _ in arrived)
            where = arrived[0][2]
            flows.append((where, where, 0, deps, nbytes * gamma))
            reducer[p] = len(flows) - 1
            frontier.setdefault(p, []).append(reducer[p])
    return flows


def ends(t, per_device, host):
    """((participant, host) it leaves, (participant, host) it reaches) of one transfer."""
    if per_device:
        return (((t["src"], t["src_device"]), host(t["src"], t["src_device"])),
                ((t["dst"], t["dst_device"]), host(t["dst"], t["dst_device"])))
    c = t["circuit"]
    return ((t["src"], host(t["src"], c["src_device"])),
            (t["dst"], host(t["dst"], c["dst_device"])))


def size_name(q):
    for unit, name in ((GB, "GiB"), (MB, "MiB"), (KB, "KiB")):
        if q >= unit and q % unit == 0:
            return f"{q // unit} {name}"
    return f"{q} B"


class Run:
    def __init__(self, daemon):
        self.d = daemon
        self.net = Net()
        self.cases = []       # every candidate replayed: with and without the barrier
        # (label, ofcd's pick with sync "pairwise", its pick with the barrier, [case indexes])
        self.selections = []
        self.skipped = {}     # why -> candidates not simulated
        self.built = set()

    def create(self, name, m, failed):
        ok(self.d.post("/v1/fabrics", {"name": name,
                                       "servers": [f"{name}s{i}" for i in range(m)]}), 201)
        if failed:
            s, dev = failed
            ok(self.d.put(f"/v1/servers/{name}s{s}/devices/{dev}", {"state": "failed"}))

    def platform(self, fab, n, p):
        if fab in self.built:
            return
        f = ok(self.d.get(f"/v1/fabrics/{fab}"))
        members = [(s, n, "full-mesh") for s in f["servers"]]
        circuits = [(l["a"]["server"], l["a"]["device"], l["b"]["server"], l["b"]["device"])
                    for l in f["links"]]
        prm = {"alpha_us": p["alpha_us"], "link_gbps": p["link_gbps"],
               "intra_alpha_us": p["intra_alpha_us"], "intra_gbps": p["intra_gbps"]}
        self.net.add_fabric(fab, members, circuits, prm)
        self.built.add(fab)

    def schedule(self, fab, coll, alg, q):
        """The whole schedule (every page), or None past the route's size limit."""
        path = f"/v1/fabrics/{fab}/schedule?collective={coll}&algorithm={alg}&bytes={q}"
        # Not held to the OpenAPI document, as in fidelity_shapes.py: the integration tests
        # check the route's replies, and checking thousands of transfers is slow.
        r = self.d.get(path, validate=False)
        if r.status_code == 422:
            return None
        sch = ok(r)
        while "next_round" in sch:
            page = ok(self.d.get(f"{path}&round={sch.pop('next_round')}", validate=False))
            sch["rounds"] += page["rounds"]
            if "next_round" in page:
                sch["next_round"] = page["next_round"]
        return sch

    def collectives(self, fab, n_servers, n):
        host = lambda s, d, fab=fab: self.net.host(fab, s, d)
        for coll in COLLECTIVES:
            for q in (THIN_SIZES if n_servers >= THIN else SIZES):
                ask = {"collective": coll, "bytes": q, "fabric": fab}
                r = self.d.post("/v1/collective/select", dict(ask, params={"sync": "pairwise"}))
                if r.status_code == 422 and r.json()["error"]["code"] == "infeasible":
                    self.skip("no eligible candidate (the missing pair)")
                    continue
                sel = ok(r)
                barrier = ok(self.d.post("/v1/collective/select", ask))
                price_b = {c["algorithm"]: c["predicted_us"] for c in barrier["candidates"]}
                p = sel["params"]
                self.platform(fab, n, p)
                label = f"{coll} {fab} {size_name(q)}"
                idx = []
                for c in sel["candidates"]:
                    if not c["eligible"]:
                        continue
                    sch = self.schedule(fab, coll, c["algorithm"], q)
                    if sch is None:
                        self.skip("all-to-all past the schedule route's 64 participants")
                        continue
                    g = p["gamma_ns_per_byte"]
                    free = self.net.add_dag(free_flows(sch, host, g), queued=True)
                    rounds = self.net.add_rounds(schedule_rounds(sch, host), g, queued=True)
                    self.cases.append({"family": f"{coll} {c['algorithm']}", "label": label,
                                       "what": c["algorithm"], "job": free, "barrier": rounds,
                                       "predicted": c["predicted_us"],
                                       "predicted_b": price_b[c["algorithm"]]})
                    idx.append(len(self.cases) - 1)
                self.selections.append((label, sel["algorithm"], barrier["algorithm"], idx))

    def skip(self, why):
        self.skipped[why] = self.skipped.get(why, 0) + 1


def picks_of(run, key):
    """(agreeing picks, judged selections, [(label, pick, its time, fastest, its time)]):
    key "sim" judges the pairwise picks by the replay without the barrier, "sim_b" the
    barrier picks by the replay with it."""
    picks = judged = 0
    wrong = []
    for label, pick_free, pick_barrier, idx in run.selections:
        if not idx:
            continue
        pick = pick_free if key == "sim" else pick_barrier
        judged += 1
        best = min(run.cases[i][key] for i in idx)
        mine = [run.cases[i] for i in idx if run.cases[i]["what"] == pick]
        if mine and mine[0][key] <= best * (1 + TIE):
            picks += 1
        else:
            fastest = min((run.cases[i] for i in idx), key=lambda c: c[key])
            wrong.append((label, pick, mine[0][key] if mine else None, fastest["what"],
                          fastest[key]))
    return picks, judged, wrong


def report(run, sim, args):
    for c in run.cases:
        c["sim"], c["sim_b"] = sim[c["job"]], sim[c["barrier"]]
        c["dev"] = (c["predicted"] - c["sim"]) / c["sim"]
        c["dev_b"] = (c["predicted_b"] - c["sim_b"]) / c["sim_b"]
    n = len(run.cases)
    bad = [c for c in run.cases if abs(c["dev"]) > WITHIN]
    good, good_b = n - len(bad), sum(abs(c["dev_b"]) <= WITHIN for c in run.cases)
    picks, judged, wrong = picks_of(run, "sim")
    picks_b, _, wrong_b = picks_of(run, "sim_b")
    if args.verbose:
        for c in sorted(run.cases, key=lambda c: -abs(c["dev"])):
            print(f"  {c['dev'] * 100:+7.2f} %  (barrier {c['dev_b'] * 100:+7.2f} %)  "
                  f"{c['label']:<30} {c['what']:<27} ofcd {c['predicted']:.6g}  "
                  f"simgrid {c['sim']:.6g}  with the barrier {c['sim_b']:.6g}")
    for c in bad:
        print(f"fidelity-free: off by {c['dev'] * 100:+.1f} %: {c['label']} {c['what']} "
              f"(ofcd {c['predicted']:.6g} µs, SimGrid {c['sim']:.6g} µs)")
    for c in run.cases:
        if abs(c["dev_b"]) > WITHIN:
            print(f"fidelity-free: with the barrier, off by {c['dev_b'] * 100:+.1f} %: "
                  f"{c['label']} {c['what']} (ofcd {c['predicted_b']:.6g} µs, SimGrid "
                  f"{c['sim_b']:.6g} µs)")
    for how, miss in (("", wrong), ("with the barrier, ", wrong_b)):
        for label, pick, t, fastest, ft in miss:
            print(f"fidelity-free: {how}wrong pick: {label}: ofcd picks {pick} ({t:.6g} µs in "
                  f"SimGrid), SimGrid's fastest is {fastest} ({ft:.6g} µs)")
    if args.table:
        write_table(run, args.table, n, good, picks, judged)
    share = good / n if n else 0
    share_b = good_b / n if n else 0
    print(f"fidelity-free: {n} cases, priced with sync pairwise against the replay without the "
          f"barrier: {good} within 5 % ({share * 100:.1f} %), picks {picks}/{judged}")
    print(f"fidelity-free: the same cases priced with the barrier against fidelity.py's replay: "
          f"{good_b} within 5 % ({share_b * 100:.1f} %), picks {picks_b}/{judged}")
    if run.skipped:
        print("fidelity-free: not simulated: " +
              ", ".join(f"{k} {v}" for k, v in sorted(run.skipped.items())))
    return share >= REQUIRED and share_b >= REQUIRED and picks == judged and picks_b == judged


def write_table(run, path, n, good, picks, judged):
    fam = {}
    for c in run.cases:
        fam.setdefault(c["family"], []).append(c)
    lines = [f"{n} cases, {good} within 5 % ({good / n * 100:.1f} %), picks {picks}/{judged}",
             "", "| candidate | cases | within 5 % | mean deviation | worst | "
             "within 5 % with the barrier | worst with the barrier |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in sorted(fam):
        cs = fam[name]
        worst = max(cs, key=lambda c: abs(c["dev"]))
        worst_b = max(cs, key=lambda c: abs(c["dev_b"]))
        lines.append(f"| {name} | {len(cs)} | {sum(abs(c['dev']) <= WITHIN for c in cs)} | "
                     f"{sum(c['dev'] for c in cs) / len(cs) * 100:+.2f} % | "
                     f"{worst['dev'] * 100:+.2f} % ({worst['label']}) | "
                     f"{sum(abs(c['dev_b']) <= WITHIN for c in cs)} | "
                     f"{worst_b['dev_b'] * 100:+.2f} % |")
    lines += ["", "Deviation: (ofcd − SimGrid) / SimGrid; positive where ofcd is slower."]
    Path(path).write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", help="write the per-candidate summary (markdown) here")
    ap.add_argument("--verbose", action="store_true", help="print every case")
    args = ap.parse_args()
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="ofcd-fidelity-free-") as tmp:
        d = Daemon(Path(tmp)).start()
        try:
            ok(d.put("/v1/topology", topology()))
            run = Run(d)
            calibration = run.net.calibrate()
            # The calibration jobs again through the event queue the DAGs here run on.
            queued = [(run.net.add_dag(run.net.jobs[job][1], queued=True), want)
                      for job, want in calibration]
            for name, m, _, _, failed in fabrics():
                run.create(name, m, failed)
            for name, m, n, _, _ in fabrics():
                run.collectives(name, m, n)
        finally:
            d.stop()
    t1 = time.time()
    sim = run.net.run()
    for job, want in calibration + queued:
        if not close(sim[job], want, 1e-9):
            print(f"fidelity-free: SimGrid is not sharing links as max-min does: calibration "
                  f"job {job} takes {sim[job]} µs, not {want} µs")
            return 1
    passed = report(run, sim, args)
    print(f"fidelity-free: {time.time() - t0:.1f} s ({t1 - t0:.1f} s asking ofcd, "
          f"{time.time() - t1:.1f} s in SimGrid)", file=sys.stderr)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
