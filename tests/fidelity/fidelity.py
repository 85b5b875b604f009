#!/usr/bin/env python3
"""Fidelity of ofcd's cost model, against SimGrid.

Starts the real daemon (build/ofcd, or $OFCD_BIN) on a free loopback port with a temporary
store, gives it a topology, creates fabrics from it, and asks it what it predicts: the
collective selection of every collective on every fabric and message size, the schedule of
every eligible candidate, and the transmission methods of the stage pairs of pipelines laid on
fabrics of servers of both in-server layouts. Every candidate's message exchanges (the
schedule route's transfers where there is one) are then replayed in SimGrid on a platform
built from the same fabric (simnet.py), and the simulated time is compared with ofcd's
predicted_us.

The real daemon rather than a small C driver: the exchanges simulated are then exactly what
ofcd serves (the schedule route's JSON, mapped onto the stored circuits and their devices),
priced with the parameters the daemon derives from its topology and configuration, so the test
covers the whole path a client sees, not a copy of it.

Fails (exit 1) when fewer than 95 % of the cases are within 5 % of SimGrid, when any pick is
not SimGrid's fastest, or when a schedule route's price differs from the selection's.
    fidelity.py [--table FILE] [--verbose]
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
from exchanges import Side, method_flows, schedule_rounds  # noqa: E402
from simnet import Net  # noqa: E402

WITHIN = 0.05     # a case is faithful within 5 %
REQUIRED = 0.95   # of the cases
TIE = 1e-6        # relative: SimGrid times this close are the same time

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30
SIZES = (KB, 64 * KB, 4 * MB, 64 * MB, GB)

# Collective fabrics: (name, servers, devices, server extras). 4 x 4 and 8 x 8 have offload
# NICs (nic-offload: a ring among the NICs); 5 x 5 reaches an aggregating switch and 6 x 5 an
# offload-capable one, whose candidates SimGrid's flow model cannot express.
COLL_FABRICS = (
    ("c2", 2, 4, {}),
    ("c3", 3, 4, {}),
    ("c4", 4, 4, {"offload": True}),
    ("c5", 5, 5, {"switch": "agg"}),
    ("c6", 6, 5, {"offload": True, "switch": "tor"}),
    ("c8", 8, 8, {"offload": True}),
    ("c16", 16, 16, {}),
)
SWITCHES = (
    {"name": "agg", "aggregating": True, "offload": False, "buffer": 64, "window": 32},
    {"name": "tor", "aggregating": False, "offload": True, "buffer": None, "window": None},
)
COLLECTIVES = ("allreduce", "allgather", "broadcast", "alltoall")
# A second set of parameters where the in-server links are slower than the circuits, so that
# the in-server hops of all-to-all and the in-server steps of the methods decide.
SLOW_INTRA = {"intra_gbps": 200.0, "intra_alpha_us": 1.0}

# Transmission: one fabric of 8-device servers in both layouts, with and without P2P, and a
# pipeline over it that crosses every combination once and stays on one server once.
TX_SERVERS = (("tA", "full-mesh", True), ("tB", "two-groups", True), ("tC", "full-mesh", False),
              ("tD", "two-groups", False))
TX_STAGES = ("tA", "tB", "tB", "tC", "tD", "tA", "tC")
TX_PARAMS = (None, {"bridge_gbps": 100.0, "p2p_read_us": 5.0})
# What-if pairs (POST /v1/transmission/select) whose circuit ends on different devices.
TX_WHATIF = (
    ({"devices": 8, "p2p": True, "circuit_device": 1},
     {"devices": 8, "p2p": True, "circuit_device": 6}),
    ({"devices": 8, "p2p": True, "intra": "two-groups", "circuit_device": 2},
     {"devices": 8, "p2p": True, "intra": "two-groups", "circuit_device": 5}),
    ({"devices": 4, "p2p": True, "circuit_device": 0},
     {"devices": 8, "p2p": True, "circuit_device": 3}),
)

NOT_SIMULATED = {
    "in-network-aggregation": "the switch aggregates the members' segments (document 004)",
    "nic-offload tree": "the offload-capable switch reduces the NICs' segments (document 003)",
}


def server(name, devices, intra="full-mesh", p2p=False, offload=False, switch=None):
    return {"name": name, "devices": devices, "ports_per_device": 1, "p2p": p2p,
            "intra": intra, "offload": offload, "switch": switch}


def topology():
    servers = []
    for name, m, n, extra in COLL_FABRICS:
        servers += [server(f"{name}s{i}", n, **extra) for i in range(m)]
    servers += [server(name, 8, intra, p2p) for name, intra, p2p in TX_SERVERS]
    return {"ocs": [{"name": f"ocs{u:02d}", "driver": "sim", "ports": 128, "endpoint": ""}
                    for u in range(16)],
            "switches": list(SWITCHES), "servers": servers,
            "wiring": {"rule": "plane-per-ocs"}}


def ok(r, status=200):
    if r.status_code != status:
        raise RuntimeError(f"{r.request.method} {r.request.url}: {r.status_code} {r.text}")
    return r.json()


class Run:
    def __init__(self, daemon):
        self.d = daemon
        self.net = Net()
        self.cases = []       # every priced candidate compared with SimGrid
        self.selections = []  # (label, ofcd's pick, [case indexes], unjudged note)
        self.notes = []       # candidates SimGrid cannot express
        self.mismatch = []    # schedule route prices that differ from the selection's
        self.fabrics = {}

    # ---- the platform of a fabric -----------------------------------------------------

    def fabric(self, name):
        if name not in self.fabrics:
            self.fabrics[name] = ok(self.d.get(f"/v1/fabrics/{name}"))
        return self.fabrics[name]

    def platform(self, inst, fabric, prm, endpoints=False):
        if (inst, "built") in self.fabrics:
            return
        f = self.fabric(fabric)
        servers = {s["name"]: s for s in ok(self.d.get("/v1/servers"))["servers"]}
        members = [(n, servers[n]["devices"], servers[n]["intra"]) for n in f["servers"]]
        circuits = [(l["a"]["server"], l["a"]["device"], l["b"]["server"], l["b"]["device"])
                    for l in f["links"]]
        self.net.add_fabric(inst, members, circuits, prm, endpoints)
        self.fabrics[(inst, "built")] = True

    def case(self, **kw):
        self.cases.append(kw)
        return len(self.cases) - 1

    # ---- collectives -------------------------------------------------------------------

    def collectives(self, fab, params, tag):
        inst = f"{fab}{tag}"
        for coll in COLLECTIVES:
            for q in SIZES:
                body = {"collective": coll, "bytes": q, "fabric": fab}
                if params:
                    body["params"] = params
                r = self.d.post("/v1/collective/select", body)
                if r.status_code == 422 and r.json()["error"]["code"] == "infeasible":
                    continue
                sel = ok(r)
                p = sel["params"]
                prm = {"alpha_us": p["alpha_us"], "link_gbps": p["link_gbps"],
                       "intra_alpha_us": p["intra_alpha_us"], "intra_gbps": p["intra_gbps"]}
                self.platform(inst, fab, prm)
                host = lambda s, d, inst=inst: self.net.host(inst, s, d)
                label = f"{coll} {fab}{tag} {size_name(q)}"
                idx, unjudged = [], None
                for c in sel["candidates"]:
                    if not c["eligible"]:
                        continue
                    alg = c["algorithm"]
                    what = alg + (" tree" if alg == "nic-offload" and p["offload_switch"] else "")
                    if what in NOT_SIMULATED:
                        self.notes.append((label, what, c["predicted_us"]))
                        if alg == sel["algorithm"]:
                            unjudged = what
                        continue
                    sch_alg = "ring" if alg == "nic-offload" else alg
                    r = self.d.get(f"/v1/fabrics/{fab}/schedule?collective={coll}"
                                   f"&algorithm={sch_alg}&bytes={q}")
                    if r.status_code == 422:  # all-to-all past the schedule size limit
                        continue
                    sch = ok(r)
                    if not params and alg != "nic-offload" and \
                            not close(sch["predicted_us"], c["predicted_us"], 1e-4):
                        self.mismatch.append((label, alg, c["predicted_us"],
                                              sch["predicted_us"]))
                    rounds = schedule_rounds(sch, host, reduce=alg != "nic-offload")
                    job = self.net.add_rounds(rounds, p["gamma_ns_per_byte"])
                    idx.append(self.case(family=f"{coll} {alg}", label=label, what=alg,
                                         fabric=f"{fab}{tag}", bytes=q, job=job,
                                         predicted=c["predicted_us"]))
                self.selections.append((label, sel["algorithm"], idx, unjudged))

    # ---- transmission methods ----------------------------------------------------------

    def pipeline(self, fab, params, tag):
        inst = f"{fab}{tag}"
        servers = {s["name"]: s for s in ok(self.d.get("/v1/servers"))["servers"]}
        for agg in ("allreduce", "none"):
            for q in SIZES:
                body = {"stages": list(TX_STAGES), "bytes": q, "aggregation": agg}
                if params:
                    body["params"] = params
                rep = ok(self.d.post(f"/v1/fabrics/{fab}/pipeline", body))
                p = rep["params"]
                self.platform(inst, fab, tx_platform(p), endpoints=True)
                for pair in rep["pairs"]:
                    a, b = servers[pair["source"]], servers[pair["target"]]
                    same = a["name"] == b["name"]
                    host = lambda s, d, kind="", inst=inst: self.net.host(inst, s, d, kind)
                    src = Side(a["name"], a["devices"], a["intra"],
                               0 if same else pair["src_device"], host)
                    dst = Side(b["name"], b["devices"], b["intra"],
                               0 if same else pair["dst_device"], host)
                    label = (f"{agg} {a['name']}>{b['name']}{tag} {size_name(q)}")
                    self.methods(label, pair, agg, src, dst, q, f"{fab}{tag}")

    def whatif(self):
        for i, (s, t) in enumerate(TX_WHATIF):
            inst = f"w{i}"
            for agg in ("allreduce", "none"):
                for q in SIZES:
                    rep = ok(self.d.post("/v1/transmission/select",
                                         {"aggregation": agg, "bytes": q, "source": s,
                                          "target": t}))
                    if (inst, "built") not in self.fabrics:
                        members = [("S", s["devices"], s.get("intra", "full-mesh")),
                                   ("T", t["devices"], t.get("intra", "full-mesh"))]
                        self.net.add_fabric(inst, members,
                                            [("S", s["circuit_device"], "T",
                                              t["circuit_device"])],
                                            tx_platform(rep["params"]), True)
                        self.fabrics[(inst, "built")] = True
                    host = lambda sv, d, kind="", inst=inst: self.net.host(inst, sv, d, kind)
                    src = Side("S", s["devices"], s.get("intra", "full-mesh"),
                               s["circuit_device"], host)
                    dst = Side("T", t["devices"], t.get("intra", "full-mesh"),
                               t["circuit_device"], host)
                    self.methods(f"{agg} what-if {i} {size_name(q)}", rep, agg, src, dst, q,
                                 f"what-if {i}")

    def methods(self, label, sel, agg, src, dst, q, fabric):
        idx = []
        for c in sel["candidates"]:
            if c["predicted_us"] is None:
                continue
            job = self.net.add_dag(method_flows(c["method"], agg, src, dst, q))
            i = self.case(family=f"method {c['method']}", label=label, what=c["method"],
                          fabric=fabric, bytes=q, job=job, predicted=c["predicted_us"])
            if c["eligible"]:
                idx.append(i)
        self.selections.append((label, sel["method"], idx, None))


def tx_platform(p):
    return {"alpha_us": p["inter_latency_us"], "link_gbps": p["inter_gbps"],
            "intra_alpha_us": p["intra_latency_us"], "intra_gbps": p["intra_gbps"],
            "bridge_gbps": p["bridge_gbps"], "read_us": p["p2p_read_us"],
            "write_us": p["p2p_write_us"]}


def size_name(q):
    for unit, name in ((GB, "GB"), (MB, "MB"), (KB, "KB")):
        if q >= unit and q % unit == 0:
            return f"{q // unit} {name}"
    return f"{q} B"


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def report(run, sim, args):
    bad = []
    for c in run.cases:
        c["sim"] = sim[c["job"]]
        c["dev"] = (c["predicted"] - c["sim"]) / c["sim"]
        if abs(c["dev"]) > WITHIN:
            bad.append(c)
    picks = judged = 0
    wrong, unjudged_by = [], {}
    for label, pick, idx, unjudged in run.selections:
        if unjudged or not idx:
            why = unjudged or "no candidate simulated"
            unjudged_by[why] = unjudged_by.get(why, 0) + 1
            continue
        judged += 1
        best = min(run.cases[i]["sim"] for i in idx)
        mine = [run.cases[i] for i in idx if run.cases[i]["what"] == pick]
        if mine and mine[0]["sim"] <= best * (1 + TIE):
            picks += 1
        else:
            fastest = min((run.cases[i] for i in idx), key=lambda c: c["sim"])
            wrong.append((label, pick, mine[0]["sim"] if mine else None, fastest["what"],
                          fastest["sim"]))
    n = len(run.cases)
    good = n - len(bad)
    share = good / n if n else 0
    if args.verbose:
        for c in sorted(run.cases, key=lambda c: -abs(c["dev"])):
            print(f"  {c['dev'] * 100:+7.2f} %  {c['label']:<34} {c['what']:<26} "
                  f"ofcd {c['predicted']:.6g}  simgrid {c['sim']:.6g}")
    for c in bad:
        print(f"fidelity: off by {c['dev'] * 100:+.1f} %: {c['label']} {c['what']} "
              f"(ofcd {c['predicted']:.6g} µs, SimGrid {c['sim']:.6g} µs)")
    for label, pick, t, fastest, ft in wrong:
        print(f"fidelity: wrong pick: {label}: ofcd picks {pick} ({t} µs in SimGrid), "
              f"SimGrid's fastest is {fastest} ({ft:.6g} µs)")
    for label, alg, sel_us, sch_us in run.mismatch:
        print(f"fidelity: {label} {alg}: the selection prices {sel_us} µs, "
              f"its schedule {sch_us} µs")
    if args.table:
        write_table(run, args.table, n, good, picks, judged, unjudged_by)
    print(f"fidelity: {n} cases, {good} within 5 % ({share * 100:.1f} %), "
          f"picks {picks}/{judged}")
    if unjudged_by:
        print("fidelity: selections not judged: " +
              ", ".join(f"{k} {v}" for k, v in sorted(unjudged_by.items())))
    return share >= REQUIRED and picks == judged and not run.mismatch


def write_table(run, path, n, good, picks, judged, unjudged_by):
    fam = {}
    for c in run.cases:
        f = fam.setdefault(c["family"], [0, 0, 0.0, 0.0])
        f[0] += 1
        f[1] += abs(c["dev"]) <= WITHIN
        f[2] = max(f[2], abs(c["dev"]))
        f[3] += abs(c["dev"])
    lines = [f"{n} cases, {good} within 5 % ({good / n * 100:.1f} %), picks {picks}/{judged}",
             "", "| candidate | cases | within 5 % | mean abs. deviation | worst |",
             "| --- | --- | --- | --- | --- |"]
    for name in sorted(fam):
        f = fam[name]
        lines.append(f"| {name} | {f[0]} | {f[1]} | {f[3] / f[0] * 100:.2f} % | "
                     f"{f[2] * 100:.2f} % |")
    seen = {}
    for _, what, _ in run.notes:
        seen[what] = seen.get(what, 0) + 1
    for what, count in sorted(seen.items()):
        lines.append(f"| {what} | {count}, not simulated | — | — | {NOT_SIMULATED[what]}: "
                     f"derivation in docs/cost-model.md; ofcd's pick in "
                     f"{unjudged_by.get(what, 0)} selections, not judged |")
    if "no candidate simulated" in unjudged_by:
        lines.append(f"| all-to-all on 16 × 16 | not simulated | — | — | 256 participants, "
                     f"past the schedule route's 64; {unjudged_by['no candidate simulated']}"
                     f" selections not judged |")
    Path(path).write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", help="write the per-candidate summary (markdown) here")
    ap.add_argument("--verbose", action="store_true", help="print every case")
    args = ap.parse_args()
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="ofcd-fidelity-") as tmp:
        d = Daemon(Path(tmp)).start()
        try:
            ok(d.put("/v1/topology", topology()))
            for name, m, _, _ in COLL_FABRICS:
                ok(d.post("/v1/fabrics", {"name": name,
                                          "servers": [f"{name}s{i}" for i in range(m)]}), 201)
            ok(d.post("/v1/fabrics", {"name": "tx", "servers": [s[0] for s in TX_SERVERS]}),
               201)
            run = Run(d)
            calibration = run.net.calibrate()
            for name, _, _, _ in COLL_FABRICS:
                run.collectives(name, None, "")
            for name in ("c2", "c4", "c8"):
                run.collectives(name, SLOW_INTRA, "/slow")
            for i, params in enumerate(TX_PARAMS):
                run.pipeline("tx", params, f"/p{i}" if params else "")
            run.whatif()
        finally:
            d.stop()
    t1 = time.time()
    sim = run.net.run()
    for job, want in calibration:
        if not close(sim[job], want, 1e-9):
            print(f"fidelity: SimGrid is not sharing links as max-min does: calibration job "
                  f"{job} takes {sim[job]} µs, not {want} µs")
            return 1
    passed = report(run, sim, args)
    print(f"fidelity: {time.time() - t0:.1f} s ({t1 - t0:.1f} s asking ofcd, "
          f"{time.time() - t1:.1f} s in SimGrid)", file=sys.stderr)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
