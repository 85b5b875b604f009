#!/usr/bin/env python3
"""Fidelity of ofcd's collective cost model against SimGrid, without a barrier per round.

fidelity.py replays a schedule round by round: every participant waits for every other at the
end of each round, the convention the model's "sum of the rounds" shares. Real collective
libraries have no global barrier: a participant goes on as soon as what it depends on has
arrived. This test replays the same schedules (the schedule route's transfers, between the
devices it names, on the platform simnet.py builds from the stored circuits) as one DAG per
candidate (Net.add_dag), twice, with these dependencies, per participant (a server for the
server-level collectives, a device for all-to-all):

  - a transfer of round r that leaves participant p starts when p's own transfers of its
    previous sending round are through (a participant issues its rounds in order: its links
    are busy until then), and
      * pairwise (MPI's pairwise exchange): every transfer of an earlier round that arrived at
        p is through, and, where the schedule's op is "reduce", p has reduced it;
      * dataflow (a library that posts every send at once, NCCL): what last wrote each chunk
        it carries at p is through (the transfer that brought it, or p's reduction of it);
    and then, as in fidelity.py, its route's latency later;
  - p reduces the transfers of round r that bring it a "reduce" once they have all arrived and
    its reduction of its previous round is done (one reducer per participant), at gamma per
    byte of them: a node of the DAG that moves nothing (a message of 0 bytes from p's device
    to itself, delayed by the reduction's time; simnet runs it without SimGrid, which never
    completes an empty message). Where a round's reduction writes a chunk that p sends in the
    same round, it waits for that send too (the schedule reads a round's sources as they were
    at the round's start);
  - what arrives at p lands in a receive buffer: a transfer into p never waits for p.

The job ends when the last transfer or reduction is through. ofcd prices each candidate three
times: with "sync": "pairwise" and "dataflow" (params of the selection), which it prices for
all-to-all by replaying the schedule as flows sharing links max-min fairly with these
dependencies, each against its replay; and with the default barrier, against the same schedules
replayed with the barrier (Net.add_rounds, as fidelity.py does), so the report shows every
convention and what removing the barrier changes.

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
about 70 s on a 2-CPU virtual machine, depending on its host's load; most of it in SimGrid.

Fails (exit 1) when, under any of the three conventions, fewer than 95 % of the cases are
within 5 % of their replay, or a pick is not its replay's fastest (times within 10⁻⁶ count as
equal).
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


def free_flows(sch, host, gamma_ns_per_byte, dataflow=False):
    """The schedule's transfers as one DAG of Net.add_dag() flows, dependencies as in the
    module's docstring; host(server, device) gives the SimGrid host. dataflow: a transfer waits
    for its sender's previous sending round and for what wrote the chunks it carries at the
    sender (the transfer that brought one, the reduction that reduced one), not for everything
    that arrived before."""
    per_device = sch["collective"] == "alltoall"
    gamma = gamma_ns_per_byte * 1e-9
    flows = []
    frontier = {}  # participant -> flows its next round's transfers wait for
    reducer = {}   # participant -> its last reduction
    last_sent = {}  # participant -> its transfers of its last sending round
    writer = {}    # (participant, chunk) -> the flow that put the chunk there last
    for rnd in sch["rounds"]:
        sent, got, reduced = {}, {}, {}
        for t in rnd["transfers"]:
            (a, src), (b, dst) = ends(t, per_device, host)
            if dataflow:
                deps = set(last_sent.get(a, ())) | {writer[a, c] for c in t["chunks"]
                                                     if (a, c) in writer}
            else:
                deps = frontier.get(a, ())
            flows.append((src, dst, t["bytes"], sorted(deps)))
            sent.setdefault(a, []).append((len(flows) - 1, t))
            (reduced if t["op"] == "reduce" else got).setdefault(b, []).append(
                (len(flows) - 1, t, dst))
        for p, out in sent.items():
            frontier[p] = [i for i, _ in out]
            last_sent[p] = [i for i, _ in out]
        for p, arrived in got.items():
            frontier.setdefault(p, []).extend(i for i, _, _ in arrived)
            for i, t, _ in arrived:
                for c in t["chunks"]:
                    writer[p, c] = i
        for p, arrived in reduced.items():
            writes = {c for _, t, _ in arrived for c in t["chunks"]}
            deps = [i for i, _, _ in arrived] + ([reducer[p]] if p in reducer else []) + \
                [i for i, t in sent.get(p, ()) if writes.intersection(t["chunks"])]
            nbytes = sum(t["bytes"] for _, t, _ in arrived)
            where = arrived[0][2]
            flows.append((where, where, 0, deps, nbytes * gamma))
            reducer[p] = len(flows) - 1
            frontier.setdefault(p, []).append(reducer[p])
            for c in writes:
                writer[p, c] = reducer[p]
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


# ofcd's sync modes, each judged against the replay of its convention.
SYNCS = ("barrier", "pairwise", "dataflow")


class Run:
    def __init__(self, daemon):
        self.d = daemon
        self.net = Net()
        # Every candidate replayed under each convention: "price"[sync] is ofcd's price with
        # that sync, "job"[sync] the SimGrid job of that replay.
        self.cases = []
        self.selections = []  # (label, {sync: ofcd's pick}, [case indexes])
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
                r = self.d.post("/v1/collective/select", ask)
                if r.status_code == 422 and r.json()["error"]["code"] == "infeasible":
                    self.skip("no eligible candidate (the missing pair)")
                    continue
                sel = {"barrier": ok(r)}
                for sync in SYNCS[1:]:
                    sel[sync] = ok(self.d.post("/v1/collective/select",
                                               dict(ask, params={"sync": sync})))
                price = {sync: {c["algorithm"]: c["predicted_us"] for c in x["candidates"]}
                         for sync, x in sel.items()}
                p = sel["barrier"]["params"]
                self.platform(fab, n, p)
                label = f"{coll} {fab} {size_name(q)}"
                idx = []
                for c in sel["barrier"]["candidates"]:
                    if not c["eligible"]:
                        continue
                    alg = c["algorithm"]
                    sch = self.schedule(fab, coll, alg, q)
                    if sch is None:
                        self.skip("all-to-all past the schedule route's 64 participants")
                        continue
                    g = p["gamma_ns_per_byte"]
                    job = {"barrier": self.net.add_rounds(schedule_rounds(sch, host), g,
                                                          queued=True),
                           "pairwise": self.net.add_dag(free_flows(sch, host, g), queued=True),
                           "dataflow": self.net.add_dag(free_flows(sch, host, g, True),
                                                        queued=True)}
                    self.cases.append({"family": f"{coll} {alg}", "label": label, "what": alg,
                                       "job": job,
                                       "price": {sync: price[sync][alg] for sync in SYNCS}})
                    idx.append(len(self.cases) - 1)
                self.selections.append(
                    (label, {sync: sel[sync]["algorithm"] for sync in SYNCS}, idx))

    def skip(self, why):
        self.skipped[why] = self.skipped.get(why, 0) + 1


def picks_of(run, sync):
    """(agreeing picks, judged selections, [(label, pick, its time, fastest, its time)]) of
    ofcd's picks with @sync against the replay of that convention."""
    picks = judged = 0
    wrong = []
    for label, pick_of, idx in run.selections:
        if not idx:
            continue
        pick = pick_of[sync]
        judged += 1
        best = min(run.cases[i]["sim"][sync] for i in idx)
        mine = [run.cases[i] for i in idx if run.cases[i]["what"] == pick]
        if mine and mine[0]["sim"][sync] <= best * (1 + TIE):
            picks += 1
        else:
            fastest = min((run.cases[i] for i in idx), key=lambda c: c["sim"][sync])
            wrong.append((label, pick, mine[0]["sim"][sync] if mine else None,
                          fastest["what"], fastest["sim"][sync]))
    return picks, judged, wrong


REPLAY = {"barrier": "with the barrier (fidelity.py's replay)",
          "pairwise": "without it, pairwise", "dataflow": "without it, dataflow"}


def report(run, sim, args):
    for c in run.cases:
        c["sim"] = {sync: sim[c["job"][sync]] for sync in SYNCS}
        c["dev"] = {sync: (c["price"][sync] - c["sim"][sync]) / c["sim"][sync]
                    for sync in SYNCS}
    n = len(run.cases)
    passed = True
    if args.verbose:
        for c in sorted(run.cases, key=lambda c: -max(abs(d) for d in c["dev"].values())):
            print("  " + "  ".join(f"{sync} {c['dev'][sync] * 100:+7.2f} %" for sync in SYNCS) +
                  f"  {c['label']:<30} {c['what']:<27} " +
                  "  ".join(f"{sync} ofcd {c['price'][sync]:.6g} simgrid {c['sim'][sync]:.6g}"
                            for sync in SYNCS))
    summary = {}
    for sync in SYNCS:
        good = sum(abs(c["dev"][sync]) <= WITHIN for c in run.cases)
        picks, judged, wrong = picks_of(run, sync)
        summary[sync] = (good, picks, judged)
        for c in run.cases:
            if abs(c["dev"][sync]) > WITHIN:
                print(f"fidelity-free: sync {sync}: off by {c['dev'][sync] * 100:+.1f} %: "
                      f"{c['label']} {c['what']} (ofcd {c['price'][sync]:.6g} µs, SimGrid "
                      f"{c['sim'][sync]:.6g} µs)")
        for label, pick, t, fastest, ft in wrong:
            print(f"fidelity-free: sync {sync}: wrong pick: {label}: ofcd picks {pick} "
                  f"({t:.6g} µs in SimGrid), SimGrid's fastest is {fastest} ({ft:.6g} µs)")
        share = good / n if n else 0
        print(f"fidelity-free: {n} cases priced with sync {sync} against the replay "
              f"{REPLAY[sync]}: {good} within 5 % ({share * 100:.1f} %), picks {picks}/{judged}")
        passed = passed and share >= REQUIRED and picks == judged
    if args.table:
        write_table(run, args.table, summary)
    if run.skipped:
        print("fidelity-free: not simulated: " +
              ", ".join(f"{k} {v}" for k, v in sorted(run.skipped.items())))
    return passed


def write_table(run, path, summary):
    fam = {}
    for c in run.cases:
        fam.setdefault(c["family"], []).append(c)
    n = len(run.cases)
    lines = [f"sync {sync}: {n} cases, {good} within 5 %, picks {picks}/{judged}"
             for sync, (good, picks, judged) in summary.items()]
    lines += ["", "| candidate | cases | " +
              " | ".join(f"{sync}: within 5 % | {sync}: worst" for sync in SYNCS) + " |",
              "| --- | --- |" + " --- | --- |" * len(SYNCS)]
    for name in sorted(fam):
        cs = fam[name]
        cells = []
        for sync in SYNCS:
            worst = max(cs, key=lambda c: abs(c["dev"][sync]))
            cells += [str(sum(abs(c["dev"][sync]) <= WITHIN for c in cs)),
                      f"{worst['dev'][sync] * 100:+.2f} % ({worst['label']})"]
        lines.append(f"| {name} | {len(cs)} | " + " | ".join(cells) + " |")
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
