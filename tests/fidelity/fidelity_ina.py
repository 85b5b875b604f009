#!/usr/bin/env python3
"""In-network aggregation and the offload tree against SimGrid (issue 30): a switch host that
aggregates, replayed message by message.

Document 004's protocol: each of N members sends K messages of one segment each up its own
link to the switch, one after another, message i only once the aggregate of message i - W is
back (window W); the switch sends the aggregate of message i down every member's link once all
N contributions of i have arrived. The offload tree of document 003 is the same with no window
(the NICs stream their segments, the switch reduces and streams the results down). A link
carries its messages one after another at its rate, and each then travels alpha (plus the
switch's latency); the switch reduces at line rate. Each message is one SimGrid flow on a star
of links with no latency (simnet.Net.add_star), and the latencies are delays between the flows,
so that a link's messages queue rather than share it.

ofcd's predicted_us (POST /v1/collective/select, a what-if with an aggregating or an offload
switch) is compared with the replay for members 2, 4 and 8, windows 4, 16 and 32, and 1 to 4W+3
messages. Also printed: what the formula before the correction, (K-1) max(m beta, rtt/W) + rtt,
gave for the same cases.

Fails (exit 1) when a case is off by more than 1 %.
    fidelity_ina.py [--verbose]
"""
import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "integration"))

from conftest import Daemon  # noqa: E402
from simnet import Net  # noqa: E402

WITHIN = 0.01
SEGMENT = 4096
MEMBERS = (2, 4, 8)
WINDOWS = (4, 16, 32)


def messages(w):
    return sorted({1, 2, w // 2, w - 1, w, w + 1, 2 * w, 4 * w + 3})


def ok(r, status=200):
    if r.status_code != status:
        raise RuntimeError(f"{r.request.method} {r.request.url}: {r.status_code} {r.text}")
    return r.json()


def predicted(d, n, k, params, algorithm):
    devices = n if n % 2 else n - 1
    sel = ok(d.post("/v1/collective/select",
                    {"collective": "allreduce", "bytes": k * SEGMENT, "servers": n,
                     "devices": devices, "params": params}))
    c = next(c for c in sel["candidates"] if c["algorithm"] == algorithm)
    assert c["eligible"], c
    return c["predicted_us"], sel["params"]


def protocol(hosts, sw, k, window, seg, hop_s):
    """The flows of one collective: up[m][i], its arrival at the switch, down[m][i] and its
    arrival back, as simnet DAG flows (zero-byte flows mark the arrivals, hop_s later)."""
    flows = []

    def add(src, dst, nbytes, deps, delay=0.0):
        flows.append((src, dst, nbytes, deps, delay))
        return len(flows) - 1

    up = [[None] * k for _ in hosts]
    at_sw = [[None] * k for _ in hosts]
    down = [[None] * k for _ in hosts]
    back = [[None] * k for _ in hosts]
    for i in range(k):
        for m, h in enumerate(hosts):
            deps = [up[m][i - 1]] if i else []
            if window and i >= window:
                deps.append(back[m][i - window])
            up[m][i] = add(h, sw, seg, deps)
            at_sw[m][i] = add(h, sw, 0, [up[m][i]], hop_s)
        for m, h in enumerate(hosts):
            deps = [at_sw[x][i] for x in range(len(hosts))]
            if i:
                deps.append(down[m][i - 1])
            down[m][i] = add(sw, h, seg, deps)
            back[m][i] = add(sw, h, 0, [down[m][i]], hop_s)
    return flows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verbose", action="store_true", help="print every case")
    args = ap.parse_args()
    net = Net()
    cases = []
    with tempfile.TemporaryDirectory(prefix="ofcd-fidelity-ina-") as tmp:
        d = Daemon(Path(tmp)).start()
        try:
            for n in MEMBERS:
                for w in WINDOWS:
                    for k in messages(w):
                        params = {"aggregating_switch": True, "window": w, "switch_buffer": 64,
                                  "mtu": SEGMENT}
                        us, p = predicted(d, n, k, params, "in-network-aggregation")
                        cases.append({"what": "in-network-aggregation", "n": n, "w": w, "k": k,
                                      "ofcd": us, "p": p})
                for k in (1, 8, 64, 131):
                    params = {"offload": True, "offload_switch": True, "mtu": SEGMENT}
                    us, p = predicted(d, n, k, params, "nic-offload")
                    cases.append({"what": "nic-offload tree", "n": n, "w": 0, "k": k,
                                  "ofcd": us, "p": p})
        finally:
            d.stop()
    for i, c in enumerate(cases):
        p = c["p"]
        hosts, sw = net.add_star(f"ina{i}", c["n"], p["link_gbps"])
        hop_s = (p["alpha_us"] + p["switch_alpha_us"]) * 1e-6
        c["job"] = net.add_dag(protocol(hosts, sw, c["k"], c["w"], SEGMENT, hop_s), queued=True)
    sim = net.run()
    bad = []
    for c in cases:
        c["sim"] = sim[c["job"]]
        c["dev"] = (c["ofcd"] - c["sim"]) / c["sim"]
        if c["w"]:
            p = c["p"]
            beta = SEGMENT / (125.0 * p["link_gbps"])
            rtt = 2 * p["alpha_us"] + 2 * beta
            old = (c["k"] - 1) * max(beta, rtt / c["w"]) + rtt
            c["old"] = (old - c["sim"]) / c["sim"]
        if abs(c["dev"]) > WITHIN:
            bad.append(c)
        if args.verbose:
            print(f"  {c['dev'] * 100:+7.3f} %  {c['what']} N={c['n']} W={c['w']} K={c['k']}: "
                  f"ofcd {c['ofcd']:.6g} µs, SimGrid {c['sim']:.6g} µs" +
                  (f" (formula before the correction {c['old'] * 100:+.1f} %)" if "old" in c
                   else ""))
    for c in bad:
        print(f"fidelity-ina: off by {c['dev'] * 100:+.2f} %: {c['what']} N={c['n']} W={c['w']} "
              f"K={c['k']} (ofcd {c['ofcd']:.6g} µs, SimGrid {c['sim']:.6g} µs)")
    olds = [abs(c["old"]) for c in cases if "old" in c]
    print(f"fidelity-ina: {len(cases)} cases, {len(cases) - len(bad)} within 1 %, worst "
          f"{max(abs(c['dev']) for c in cases) * 100:.3f} %; the formula before the correction: "
          f"{sum(o <= WITHIN for o in olds)} of {len(olds)} aggregation cases within 1 %, worst "
          f"{max(olds) * 100:.1f} %")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
