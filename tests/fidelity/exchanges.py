"""The message exchanges of ofcd's candidates, as SimGrid jobs.

Collectives come from the schedule route (GET /v1/fabrics/{name}/schedule): every transfer of
every round, between the devices the route names. A server-level transfer leaves and reaches
the devices of the circuit it rides (the data of a server is where its circuits end: the
documented convention of the server-level formulas); an all-to-all transfer joins the two
devices it names and hops inside each server as the platform routes it.

Transmission methods between pipeline stages have no schedule route; their exchanges are the
steps of docs/cost-model.md, each in-server step a set of messages on the paths the server has,
one step starting when the previous one is through, except p2p-relay, which streams.
"""


def schedule_rounds(sch, host, reduce=True):
    """Rounds of (src_host, dst_host, bytes, reducer) from a schedule reply; host(server,
    device) gives the SimGrid host; reducer is the participant that reduces what the transfer
    brings (its destination server for a server-level schedule, whichever of its devices
    received it), or None for a copy. reduce=False replays reductions as free (the NICs of
    nic-offload reduce at line rate)."""
    per_device = sch["collective"] == "alltoall"
    rounds = []
    for rnd in sch["rounds"]:
        out = []
        for t in rnd["transfers"]:
            if per_device:
                src, dst = host(t["src"], t["src_device"]), host(t["dst"], t["dst_device"])
            else:
                c = t["circuit"]
                src, dst = host(t["src"], c["src_device"]), host(t["dst"], c["dst_device"])
            reducer = t["dst"] if reduce and t["op"] == "reduce" else None
            out.append((src, dst, t["bytes"], reducer))
        rounds.append(out)
    return rounds


class Side:
    """One server of a stage pair as the transmission methods see it."""

    def __init__(self, server, devices, intra, circuit_device, host):
        self.server, self.n, self.intra, self.c = server, devices, intra, circuit_device
        self.host = host  # host(server, device, kind)

    def h(self, d, kind=""):
        return self.host(self.server, d, kind)

    def group(self, d):
        return 0 if self.intra != "two-groups" or d < self.n // 2 else 1

    def others(self, d):
        return [e for e in range(self.n) if e != d]

    def far_root(self, d):
        """The device of the other group that receives what crosses the bridge once."""
        return self.n // 2 if self.group(d) == 0 else 0


class Dag:
    def __init__(self):
        self.flows = []

    def add(self, src, dst, nbytes, deps=()):
        self.flows.append((src, dst, nbytes, list(deps)))
        return len(self.flows) - 1


def bcast(dag, side, root, x, deps):
    """One copy from root to every device: the local group over the mesh; the far group gets
    one copy across the bridge, which its first device rebroadcasts."""
    out = []
    for e in side.others(root):
        if side.group(e) == side.group(root):
            out.append(dag.add(side.h(root), side.h(e), x, deps))
    if side.intra == "two-groups":
        f = side.far_root(root)
        cross = dag.add(side.h(root), side.h(f), x, deps)
        out.append(cross)
        for e in side.others(f):
            if side.group(e) == side.group(f):
                out.append(dag.add(side.h(f), side.h(e), x, [cross]))
    return out


def allbcast(dag, side, x):
    """Every device's x to every other device: over the mesh inside a group; each group's
    chunks cross the bridge once, to the other group's first device, which rebroadcasts them
    together."""
    for d in range(side.n):
        for e in side.others(d):
            if side.group(d) == side.group(e):
                dag.add(side.h(d), side.h(e), x)
    if side.intra != "two-groups":
        return
    half = side.n // 2
    for g, members in ((0, range(half)), (1, range(half, side.n))):
        r = side.far_root(members[0])
        crossed = [dag.add(side.h(d), side.h(r), x) for d in members]
        for e in side.others(r):
            if side.group(e) == side.group(r):
                dag.add(side.h(r), side.h(e), x * len(members), crossed)


def method_flows(method, aggregation, src, dst, x):
    """The DAG of one transmission method; x is D, the bytes each source device holds."""
    dag = Dag()
    if method == "intra-server":
        if aggregation != "none":
            bcast(dag, src, src.c, x, [])
        else:
            allbcast(dag, src, x)
        return dag.flows
    total = src.n * x  # methods 2-4 carry every device's x
    share = total // dst.n
    if method == "send-broadcast":
        send = dag.add(src.h(src.c), dst.h(dst.c), x)
        bcast(dag, dst, dst.c, x, [send])
    elif method == "p2p-relay":
        # Every device's data streams from its memory through the circuit into its target's.
        if src.n == dst.n:
            for d in range(src.n):
                dag.add(src.h(d, "p"), dst.h(d, "p"), x)
        else:
            for d in range(src.n):
                for e in range(dst.n):
                    dag.add(src.h(d, "p"), dst.h(e, "p"), x // dst.n)
    elif method == "allgather-send-scatter":
        gather = [dag.add(src.h(d), src.h(src.c), x) for d in src.others(src.c)]
        send = dag.add(src.h(src.c), dst.h(dst.c), total, gather)
        for e in dst.others(dst.c):
            dag.add(dst.h(dst.c), dst.h(e), share, [send])
    elif method == "switch-relay":
        gather = [dag.add(src.h(d, "s"), src.h(src.c, "s"), x) for d in src.others(src.c)]
        send = dag.add(src.h(src.c), dst.h(dst.c), total, gather)
        for e in dst.others(dst.c):
            dag.add(dst.h(dst.c, "s"), dst.h(e, "s"), share, [send])
    else:
        raise ValueError(method)
    return dag.flows
