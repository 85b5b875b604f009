"""The SimGrid side of the fidelity test: platforms built from ofcd's fabrics, and the replay of
message exchanges on them.

The network model is CM02 with latency and bandwidth factors 1, no cross traffic (no
acknowledgement flow) and no TCP window bound: a message of b bytes alone on a route takes the
route's summed latency plus b over its slowest link, and concurrent messages share every link
max-min fairly. That is the alpha-beta model ofcd prices with, so whatever differs is how the
messages of a candidate share the links, overlap and wait for each other.

One correction: CM02 weighs each message's share of a link by the inverse of its route's
latency (TCP's round-trip unfairness), so a message that hops inside a server would get less of
a circuit than one that does not. RDMA over a circuit has no such bias and the comparison is
with max-min sharing, so the links here have no latency in SimGrid: the driver starts each
message its route's latency (kept beside the platform, summed over the route SimGrid gives)
after it could start, and SimGrid shares the links between messages of equal weight. A message
alone still takes latency plus bytes over bandwidth, as in CM02.

A fabric becomes one zone with one sub-zone per server:
  - a host per device ("inst/server/d"), plus, where a transmission method needs them, a
    peer-to-peer endpoint ("inst/server/p<d>": reading or writing that device's memory from
    another device) and an in-server switch endpoint ("inst/server/s<d>");
  - in-server links of zero latency: a full mesh of one link per ordered device pair, or for
    "two-groups" a mesh per group and one bridge link each way between the groups; one switch
    port link each way per device;
  - latency-only links (no bandwidth limit) carrying the fixed cost of an in-server message
    (intra alpha), of a P2P read and of a P2P write, added to the routes that pay them;
  - one link per direction of every stored circuit, with the inter-server latency and
    bandwidth, between the two server zones; its two end devices are the zones' gateways, so
    a message from any other device hops inside its server to the circuit's device and on the
    far side from the circuit's device to its destination, exactly as on the real fabric.
"""
import heapq

import simgrid as sg

LATENCY_ONLY = 1e15  # bytes/s: a link that only adds latency


def bytes_per_s(gbps):
    return gbps * 125e6


class Net:
    """One SimGrid engine holding every platform of the run; cases run one after another."""

    def __init__(self):
        self.engine = sg.Engine(["fidelity", "--log=root.thres:critical",
                                 "--cfg=network/model:CM02",
                                 "--cfg=network/latency-factor:1",
                                 "--cfg=network/bandwidth-factor:1",
                                 "--cfg=network/crosstraffic:0", "--cfg=network/TCP-gamma:0",
                                 "--cfg=network/weight-S:0",
                                 # SimGrid 3.32's lazy max-min update (seen with TCP-gamma 0)
                                 # gave a message sharing a link with others held back
                                 # elsewhere that link's whole rate (Net.calibrate() catches
                                 # it): solve the system in full at every event.
                                 "--cfg=network/optim:Full", "--cfg=surf/precision:1e-13",
                                 "--cfg=maxmin/precision:1e-9"])
        self.root = sg.NetZone.create_full_zone("root")
        self.hosts = {}
        self.latency = {}  # link name -> seconds
        self.routes = {}   # (src, dst) host names -> route latency, seconds
        self.jobs = []

    def host(self, inst, server, device, kind=""):
        return self.hosts[(inst, server, kind, device)]

    def add_fabric(self, inst, servers, circuits, prm, endpoints=False, host_gbps=None):
        """servers: [(name, devices, intra)]; circuits: [(a, a_device, b, b_device)];
        prm: alpha_us, link_gbps, intra_alpha_us, intra_gbps, and with endpoints bridge_gbps,
        read_us, write_us. host_gbps: each device's circuits leave and arrive through one host
        link per direction of that rate (PCIe behind a device's optical ports), shared by
        every circuit of the device; None for none."""
        fz = sg.NetZone.create_full_zone(inst)
        fz.set_parent(self.root)
        zones = {}
        for name, n, intra in servers:
            zones[name] = self._server(fz, inst, name, n, intra, prm, endpoints)
        host_link = {}

        def host(x, dx, way):
            if (x, dx, way) not in host_link:
                host_link[x, dx, way] = fz.create_link(f"{inst}/h/{x}/{dx}{way}",
                                                       bytes_per_s(host_gbps))
            return sg.LinkInRoute(host_link[x, dx, way])

        for a, da, b, db in circuits:
            for (x, dx, y, dy) in ((a, da, b, db), (b, db, a, da)):
                link = fz.create_link(f"{inst}/c/{x}>{y}", bytes_per_s(prm["link_gbps"]))
                self.latency[link.name] = prm["alpha_us"] * 1e-6
                route = [sg.LinkInRoute(link)]
                if host_gbps:
                    route = [host(x, dx, "up")] + route + [host(y, dy, "down")]
                fz.add_route(zones[x].netpoint, zones[y].netpoint,
                             self.host(inst, x, dx).netpoint, self.host(inst, y, dy).netpoint,
                             route, False)
        fz.seal()

    def add_star(self, inst, members, gbps):
        """A switch host ("inst/sw") joined to each of `members` hosts ("inst/m<i>") by one link
        each way of `gbps` and no latency: a job adds the latency itself (add_dag's delays),
        so that a link's messages queue one after another and each then travels. Returns
        (member hosts, switch host)."""
        z = sg.NetZone.create_full_zone(inst)
        z.set_parent(self.root)
        sw = z.create_host(f"{inst}/sw", 1e9)
        self.hosts[(inst, "sw", "", 0)] = sw
        hosts = []
        for i in range(members):
            h = z.create_host(f"{inst}/m{i}", 1e9)
            up = z.create_link(f"{inst}/up{i}", bytes_per_s(gbps))
            down = z.create_link(f"{inst}/down{i}", bytes_per_s(gbps))
            z.add_route(h.netpoint, sw.netpoint, None, None, [sg.LinkInRoute(up)], False)
            z.add_route(sw.netpoint, h.netpoint, None, None, [sg.LinkInRoute(down)], False)
            hosts.append(h)
        z.seal()
        return hosts, sw

    def _server(self, fz, inst, name, n, intra, prm, endpoints):
        z = sg.NetZone.create_full_zone(f"{inst}/{name}")
        z.set_parent(fz)
        pre = f"{inst}/{name}"
        kinds = ("", "p", "s") if endpoints else ("",)
        for kind in kinds:
            for d in range(n):
                self.hosts[(inst, name, kind, d)] = z.create_host(f"{pre}/{kind}{d}", 1e9)

        def latency(tag, us):
            link = z.create_link(f"{pre}/{tag}", LATENCY_ONLY)
            self.latency[link.name] = us * 1e-6
            return sg.LinkInRoute(link)

        hop = latency("alpha_i", prm["intra_alpha_us"])
        intra_bw = bytes_per_s(prm["intra_gbps"])
        half = n // 2
        group = (lambda d: 0 if d < half else 1) if intra == "two-groups" else (lambda d: 0)
        path = {}
        bridge = {}
        if intra == "two-groups":
            for g in (0, 1):
                bridge[g] = z.create_link(f"{pre}/bridge{g}>{1 - g}",
                                          bytes_per_s(prm["bridge_gbps"]))
        for d in range(n):
            for e in range(n):
                if d == e:
                    continue
                if group(d) == group(e):
                    path[d, e] = z.create_link(f"{pre}/mesh{d}>{e}", intra_bw)
                else:
                    path[d, e] = bridge[group(d)]
        dev = lambda d: self.hosts[(inst, name, "", d)].netpoint
        for (d, e), link in path.items():
            z.add_route(dev(d), dev(e), None, None, [hop, sg.LinkInRoute(link)], False)
        if endpoints:
            self._endpoints(z, inst, name, n, intra, prm, path, latency, dev)
        z.seal()
        return z

    def _endpoints(self, z, inst, name, n, intra, prm, path, latency, dev):
        pre = f"{inst}/{name}"
        read, write = latency("read", prm["read_us"]), latency("write", prm["write_us"])
        nil = latency("nil", 0)
        ep = lambda kind, d: self.hosts[(inst, name, kind, d)].netpoint
        # P2P: the circuit device streams a peer's memory (read) or into it (write).
        for c in range(n):
            for d in range(n):
                to = [read, sg.LinkInRoute(path[d, c])] if d != c else [nil]
                z.add_route(ep("p", d), dev(c), None, None, to, False)
                back = [write, sg.LinkInRoute(path[c, d])] if d != c else [nil]
                z.add_route(dev(c), ep("p", d), None, None, back, False)
        # The in-server switch: every device has one port each way (method 4). A full mesh has
        # no bridge, so its switch path runs at the link rate (docs/cost-model.md).
        sw_bw = bytes_per_s(prm["bridge_gbps"] if intra == "two-groups" else prm["intra_gbps"])
        up = [z.create_link(f"{pre}/swup{d}", sw_bw) for d in range(n)]
        down = [z.create_link(f"{pre}/swdown{d}", sw_bw) for d in range(n)]
        hop = latency("alpha_i_sw", prm["intra_alpha_us"])
        for d in range(n):
            for e in range(n):
                if d != e:
                    z.add_route(ep("s", d), ep("s", e), None, None,
                                [hop, sg.LinkInRoute(up[d]), sg.LinkInRoute(down[e])], False)

    def calibrate(self):
        """Jobs whose times are known in closed form, to catch a solver that shares links
        wrongly: one message; one with hops; messages held back by different links that share
        one that does not hold them back; a bridge shared by some of them; two messages of
        different route latencies sharing a circuit equally. Returns [(job, expected µs)]."""
        prm = {"alpha_us": 3, "link_gbps": 400, "intra_alpha_us": 2, "intra_gbps": 512,
               "bridge_gbps": 504, "read_us": 2, "write_us": 1}
        self.add_fabric("cal", [("a", 8, "two-groups"), ("b", 8, "full-mesh")],
                        [("a", 2, "b", 5)], prm)
        h = lambda s, d: self.host("cal", s, d)
        q = 1 << 30
        us = lambda gbps: q / bytes_per_s(gbps) * 1e6
        link, mesh, bridge = us(400), us(512), us(504)
        return [
            (self.add_dag([(h("a", 2), h("b", 5), q, [])]), 3 + link),
            (self.add_dag([(h("a", 0), h("b", 1), q, [])]), 2 + 3 + 2 + link),
            (self.add_dag([(h("b", 0), h("b", e), q, []) for e in (1, 2, 3)]), 2 + mesh),
            (self.add_dag([(h("a", d), h("a", 2), q, []) for d in (0, 1, 3, 4, 5, 6, 7)]),
             2 + 4 * bridge),
            (self.add_dag([(h("a", 2), h("b", 5), q, []), (h("a", 0), h("b", 1), q, [])]),
             3 + 2 * link),
        ]

    # ---- jobs: run one after another by one driver actor -------------------------------

    def add_rounds(self, rounds, gamma_ns_per_byte, queued=False):
        """rounds: [[(src_host, dst_host, bytes, reducer)]]. A round's messages start together;
        a participant (reducer: any key, None for a copy) reduces what it received once its
        own messages are in, at gamma per byte, and the next round starts when every
        participant is done (the schedule's rounds are bulk-synchronous: a transfer reads its
        source as it was at the start of the round). queued=True runs the same rounds as one
        DAG (rounds_dag()) from the event queue of add_dag(queued=True): the same times, for
        rounds of hundreds of messages."""
        if queued:
            return self.add_dag(rounds_dag(rounds, gamma_ns_per_byte * 1e-9), queued=True)
        self.jobs.append(("rounds", rounds, gamma_ns_per_byte * 1e-9))
        return len(self.jobs) - 1

    def add_dag(self, flows, queued=False):
        """flows: [(src_host, dst_host, bytes, [indexes of flows it waits for])], each with an
        optional fifth member, a delay in seconds added to its start. queued=True runs the same
        DAG from an event queue (_queued_flows()): the same times, for DAGs of thousands of
        flows, where scanning every flow at every event grows as their square."""
        self.jobs.append(("queued" if queued else "flows", flows, 0))
        return len(self.jobs) - 1

    def add_hw_rounds(self, rounds, gamma_ns_per_byte, overhead_us=0.0, launch_us=0.0):
        """Rounds as add_rounds(), on hardware the formulas do not describe: each round
        transfer is (src_host, dst_host, bytes, reducer, sender, hop_from); a sender's messages
        of one round leave one after another, overhead_us apart, the first overhead_us after
        the round starts (the cost of issuing each, paid by one proxy per sender); a transfer
        with hop_from first moves its bytes from that host to src_host inside the server and
        only then leaves (store and forward), once for all its transfers that leave src_host in
        the round; the collective starts launch_us late."""
        self.jobs.append(("hw", (rounds, overhead_us * 1e-6, launch_us * 1e-6),
                          gamma_ns_per_byte * 1e-9))
        return len(self.jobs) - 1

    def run(self):
        """Runs every job; returns each one's simulated time in µs, in order."""
        out = [None] * len(self.jobs)

        def driver():
            for i, (kind, what, gamma) in enumerate(self.jobs):
                t0 = self.engine.clock
                if kind == "rounds":
                    self._rounds(what, gamma)
                elif kind == "hw":
                    self._hw_rounds(what, gamma)
                elif kind == "queued":
                    self._queued_flows(what)
                else:
                    self._flows(what)
                out[i] = (self.engine.clock - t0) * 1e6

        first = next(iter(self.hosts.values()))
        sg.Actor.create("driver", first, driver)
        self.engine.run()
        return out

    def _route_latency(self, src, dst):
        key = (src.name, dst.name)
        if key not in self.routes:
            links, _ = src.route_to(dst)
            self.routes[key] = sum(self.latency.get(link.name, 0.0) for link in links)
        return self.routes[key]

    def _flows(self, flows):
        """Runs flows [(src, dst, bytes, deps)], each starting its route's latency after the
        flows it waits for are through; returns each one's finish time."""
        n = len(flows)
        finish, start = [None] * n, [None] * n
        live, which = [], []
        t0 = self.engine.clock
        left = n
        while left:
            now = self.engine.clock
            for i, (src, dst, _, deps, *delay) in enumerate(flows):
                if start[i] is None and all(finish[j] is not None for j in deps):
                    start[i] = max([t0] + [finish[j] for j in deps]) + \
                        self._route_latency(src, dst) + (delay[0] if delay else 0.0)
            empty = False
            for i, (src, dst, nbytes, *_) in enumerate(flows):
                if start[i] is not None and start[i] <= now + 1e-15 and finish[i] is None and \
                        i not in which:
                    if int(nbytes) <= 0:  # SimGrid never completes an empty message
                        finish[i], empty = now, True
                        left -= 1
                        continue
                    live.append(sg.Comm.sendto_async(src, dst, int(nbytes)))
                    which.append(i)
            if empty:
                continue
            later = [start[i] for i in range(n)
                     if start[i] is not None and start[i] > now + 1e-15]
            if not live:
                sg.this_actor.sleep_until(min(later))
                continue
            k = sg.Comm.wait_any_for(live, min(later) - now) if later else \
                sg.Comm.wait_any(live)
            if k >= 0:
                finish[which[k]] = self.engine.clock
                left -= 1
                del live[k], which[k]
        return finish

    def _queued_flows(self, flows):
        """_flows() for large DAGs: a flow's start (the same: its route's latency and its delay
        after the latest of the flows it waits for, or after the job's start) is computed once,
        when the last of them is through, and kept in a heap; returns each one's finish time."""
        n = len(flows)
        finish = [None] * n
        waits = [len(f[3]) for f in flows]
        after = [[] for _ in range(n)]
        for i, f in enumerate(flows):
            for j in f[3]:
                after[j].append(i)
        t0 = self.engine.clock
        ready = []  # (start, flow)

        def release(i):
            src, dst, _, deps, *delay = flows[i]
            start = max([t0] + [finish[j] for j in deps]) + self._route_latency(src, dst) + \
                (delay[0] if delay else 0.0)
            heapq.heappush(ready, (start, i))

        def done(i, t):
            finish[i] = t
            for k in after[i]:
                waits[k] -= 1
                if not waits[k]:
                    release(k)

        for i in range(n):
            if not waits[i]:
                release(i)
        live, which = [], []
        left = n
        while left:
            now = self.engine.clock
            while ready and ready[0][0] <= now + 1e-15:
                _, i = heapq.heappop(ready)
                src, dst, nbytes = flows[i][:3]
                if int(nbytes) <= 0:  # SimGrid never completes an empty message
                    done(i, now)
                    left -= 1
                    continue
                live.append(sg.Comm.sendto_async(src, dst, int(nbytes)))
                which.append(i)
            if not left:
                break
            if not live:
                sg.this_actor.sleep_until(ready[0][0])
                continue
            k = sg.Comm.wait_any_for(live, ready[0][0] - now) if ready else \
                sg.Comm.wait_any(live)
            if k >= 0:
                i = which[k]
                del live[k], which[k]
                left -= 1
                done(i, self.engine.clock)
        return finish

    def _hw_rounds(self, what, gamma):
        rounds, overhead, launch = what
        sg.this_actor.sleep_for(launch)
        for rnd in rounds:
            flows, last, issued, hops = [], [], {}, {}
            for src, dst, b, _, sender, hop_from in rnd:
                issued[sender] = issued.get(sender, 0) + 1
                delay = issued[sender] * overhead
                deps = []
                if hop_from is not None and hop_from != src:
                    # What leaves one device for several peers moves to it once.
                    if (hop_from, src) not in hops:
                        hops[hop_from, src] = len(flows)
                        flows.append([hop_from, src, b, [], delay])
                    hop = flows[hops[hop_from, src]]
                    hop[2] = max(hop[2], b)
                    deps, delay = [hops[hop_from, src]], 0.0
                flows.append([src, dst, b, deps, delay])
                last.append(len(flows) - 1)
            finish = self._queued_flows([tuple(f) for f in flows])
            self._reduce(rnd, [finish[i] for i in last], gamma)

    def _rounds(self, rounds, gamma):
        for rnd in rounds:
            finish = self._flows([(s, d, b, []) for s, d, b, _ in rnd])
            self._reduce(rnd, finish, gamma)

    def _reduce(self, rnd, finish, gamma):
        """Ends a round once every participant has reduced what it received."""
        end = self.engine.clock
        arrived, reduced = {}, {}
        for t, (_, _, b, who, *_) in zip(finish, rnd):
            if who is not None:
                arrived[who] = max(arrived.get(who, 0.0), t)
                reduced[who] = reduced.get(who, 0) + b
        for who, b in reduced.items():
            end = max(end, arrived[who] + b * gamma)
        if end > self.engine.clock:
            sg.this_actor.sleep_until(end)


def rounds_dag(rounds, gamma):
    """Net.add_rounds()'s rounds (gamma in seconds per byte) as add_dag() flows: each round's
    messages wait for the barrier of the round before, a node that moves nothing (0 bytes from
    a host to itself) and waits for every message of its round and for every reduction; a
    participant's reduction is such a node too, after its round's last message into it,
    delayed by gamma times the bytes it reduces."""
    flows, barrier = [], []
    for rnd in rounds:
        if not rnd:
            continue
        first = len(flows)
        into = {}
        for i, (src, dst, nbytes, who) in enumerate(rnd):
            flows.append((src, dst, nbytes, list(barrier)))
            if who is not None:
                into.setdefault(who, []).append(first + i)
        ends = list(range(first, len(flows)))
        for idx in into.values():
            where = flows[idx[0]][1]
            flows.append((where, where, 0, idx, sum(flows[i][2] for i in idx) * gamma))
            ends.append(len(flows) - 1)
        flows.append((rnd[0][0], rnd[0][0], 0, ends))
        barrier = [len(flows) - 1]
    return flows
