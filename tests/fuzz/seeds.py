#!/usr/bin/env python3
"""Writes the seed inputs of the fuzzers into tests/fuzz/corpus/NAME/seed-*.

The seeds come from the unit tests' vectors: the OpenFlow messages of
tests/unit/test_of13.c (read from its byte arrays), the configuration texts of
tests/unit/test_config.c and test_rdma.c, the inventory of test_rdma.c and the
etcd gateway replies of test_etcd_proto.c (read from their string literals),
requests in the shape of test_dispatch.c and the integration tests, and the
log's framing (log_part.h, log_bundle.h). The replica's seeds are real
changesets, which only the daemon's code can make: fuzz_replica writes them
(OFCD_FUZZ_SEEDS=tests/fuzz/corpus/replica build/fuzz/fuzz_replica). Inputs of past crashes (crash-*) sit beside the seeds
and are left alone. Run it again after changing those tests:
    python3 tests/fuzz/seeds.py
"""
import json
import os
import re
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def source(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def c_arrays(text):
    """The byte arrays `static const uint8_t NAME[] = { ... };` of a C file, by name."""
    out = {}
    for m in re.finditer(r"static const uint8_t (\w+)\[\] = \{(.*?)\};", text, re.S):
        body = re.sub(r"/\*.*?\*/", "", m.group(2), flags=re.S)
        data = bytearray()
        for tok in re.findall(r"0x[0-9a-fA-F]+|'.'", body):
            data.append(ord(tok[1]) if tok.startswith("'") else int(tok, 16))
        out[m.group(1)] = bytes(data)
    return out


def c_strings(text):
    """Every run of adjacent C string literals, concatenated and unescaped."""
    lit = r'"(?:[^"\\\n]|\\.)*"'
    out = []
    for m in re.finditer(rf"{lit}(?:\s*{lit})*", text):
        parts = re.findall(lit, m.group(0))
        raw = "".join(p[1:-1] for p in parts)
        out.append(raw.encode("latin-1").decode("unicode_escape"))
    return out


def write(name, files):
    d = os.path.join(CORPUS, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed-"):
            os.remove(os.path.join(d, f))
    for i, data in enumerate(files):
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(d, f"seed-{i:03d}"), "wb") as f:
            f.write(data)
    print(f"{name}: {len(files)} seeds", file=sys.stderr)


# ---- OpenFlow ---------------------------------------------------------------

COOKIE_TAG = 0x0FCD000000000000


def of_msg(type_, xid, body=b""):
    return struct.pack("!BBHI", 4, type_, 8 + len(body), xid) + body


def flow_entry(in_port, outputs, cookie=None, table=0, priority=1000, other_match=False):
    oxm = struct.pack("!II", 0x80000004, in_port)
    if other_match:
        oxm += struct.pack("!IH", 0x80000A02, 0x0800)  # eth_type
    mlen = 4 + len(oxm)
    match = struct.pack("!HH", 1, mlen) + oxm
    match += b"\0" * ((8 - len(match) % 8) % 8)
    actions = b"".join(struct.pack("!HHIH6x", 0, 16, p, 0xFFFF) for p in outputs)
    instr = struct.pack("!HH4x", 4, 8 + len(actions)) + actions if outputs else b""
    if cookie is None:
        a, b = sorted((in_port, outputs[0]))
        cookie = COOKIE_TAG | a << 24 | b
    fixed = struct.pack("!HBxIIHHHH4xQQQ", 48 + len(match) + len(instr), table, 0, 0, priority,
                        0, 0, 0, cookie, 0, 0)
    return fixed + match + instr


def flow_reply(xid, entries, more=False):
    return of_msg(19, xid, struct.pack("!HH4x", 1, 1 if more else 0) + b"".join(entries))


def circuit(a, b):
    return [flow_entry(a, [b]), flow_entry(b, [a])]


def port_status(port, reason=2, config=0, state=0):
    body = struct.pack("!B7xI4x6s2x16sIIIIIIII", reason, port, b"\x02\0\0\0\0\x05",
                       b"p%d" % port, config, state, 0, 0, 0, 0, 0, 0)
    return of_msg(12, 0, body)


def of13_seeds():
    vectors = c_arrays(source("tests/unit/test_of13.c"))
    seeds = list(vectors.values())
    seeds.append(flow_reply(9, circuit(3, 7) + [flow_entry(5, [1, 2, 3], cookie=0)]))
    return seeds


def framed(*msgs):
    """The harness's framed form (flags bit 5): each message after its size."""
    return b"".join(struct.pack("<H", len(m)) + m for m in msgs)


def openflow_seeds():
    v = c_arrays(source("tests/unit/test_of13.c"))
    up, read, apply_mixed, apply_adds, then_read = 1, 1 << 1, 2 << 1, 3 << 1, 1 << 3
    frame = 1 << 5
    fenced = 1 << 6
    foreign = [flow_entry(9, [0xFFFFFFFD], cookie=0, table=2, priority=0),
               flow_entry(11, [12, 13], cookie=0), flow_entry(20, [21], other_match=True)]
    seeds = [
        # a read-back: one circuit, one half alone, foreign entries; port changes
        bytes([up | read, 0]) + flow_reply(3, circuit(3, 7) + [flow_entry(9, [10])] + foreign)
        + port_status(5, config=1) + port_status(6, reason=1),
        # the same reply in two parts, written a few bytes at a time
        bytes([up | read, 7]) + flow_reply(3, circuit(1, 2), more=True) + flow_reply(3, circuit(4, 5)),
        # a batch with removals and additions committed, then read back
        bytes([up | apply_mixed | then_read, 0]) + of_msg(21, 7) + of_msg(21, 12)
        + flow_reply(13, circuit(3, 4) + circuit(7, 64)),
        # a batch of additions refused by one flow mod (error data: the failed request)
        bytes([up | apply_adds, 0]) + of_msg(1, 4, struct.pack("!HH", 5, 1) + v["flow_add"][:16])
        + of_msg(21, 7),
        # a refused read
        bytes([up | read, 0]) + of_msg(1, 3, struct.pack("!HH", 1, 2)),
        # the handshake from the input, keep-alives, an unknown message
        bytes([read, 0]) + v["hello"] + v["features_reply"] + of_msg(2, 99, b"ping")
        + of_msg(3, 1) + v["port_status"] + of_msg(10, 5, b"\0" * 16) + flow_reply(3, []),
        # version negotiation
        bytes([0, 0]) + v["hello_bitmap"] + v["features_reply"],
        bytes([0, 3]) + v["hello_plain"],
        bytes([0, 0]) + of_msg(0, 1, struct.pack("!HHI", 1, 8, 1 << 1)),
        bytes([0, 0]) + v["hello_bad"],
        bytes([0, 0]) + v["error_msg"],
        # framed: read-backs and a batch whose replies a mutation may grow or shrink
        bytes([up | read | frame, 0]) + framed(flow_reply(3, circuit(3, 7) + foreign)),
        bytes([up | read | frame, 0]) + framed(flow_reply(3, circuit(1, 2), more=True),
                                               flow_reply(3, [flow_entry(4, [5])])),
        bytes([up | apply_mixed | then_read | frame, 0]) + framed(
            of_msg(1, 5, struct.pack("!HH", 5, 1)), of_msg(21, 12), flow_reply(13, circuit(3, 4))),
        # fencing (master generation 5): demoted by a ROLE_STATUS in the middle of a batch,
        bytes([up | apply_adds | then_read | fenced, 0]) + v["role_status"],
        # a SLAVE's flow mod refused (OFPBRC_IS_SLAVE), and a read refused the same way
        bytes([up | apply_mixed | fenced, 0]) + of_msg(1, 4, struct.pack("!HH", 1, 10)),
        bytes([up | read | fenced, 0]) + of_msg(1, 4, struct.pack("!HH", 1, 10)),
        # a stale generation refused at connect, and a ROLE_REPLY granting SLAVE
        bytes([read | fenced, 0]) + v["hello"] + v["features_reply"]
        + of_msg(1, 3, struct.pack("!HH", 11, 0)),
        bytes([read | fenced, 0]) + v["hello"] + v["features_reply"]
        + of_msg(25, 3, struct.pack("!I4xQ", 3, 6)),
        # granted MASTER from the input, then a read-back
        bytes([read | fenced, 0]) + v["hello"] + v["features_reply"]
        + of_msg(25, 3, struct.pack("!I4xQ", 2, 5)) + flow_reply(4, circuit(3, 7)),
    ]
    return seeds


# ---- REST -------------------------------------------------------------------

def request(method, path, body=None, headers=()):
    text = f"{method} {path}\n" + "".join(f"{h}\n" for h in headers) + "\n"
    if body is not None:
        text += body if isinstance(body, str) else json.dumps(body)
    return text


def rest_seeds():
    topo = {"ocs": [{"name": "ocs0", "driver": "sim", "ports": 16, "endpoint": ""}],
            "switches": [{"name": "tor", "offload": True}],
            "servers": [{"name": f"s{i}", "devices": 2, "ports_per_device": 1, "p2p": False,
                         "intra": "full-mesh", "offload": False, "switch": "tor" if i else None}
                        for i in range(4)],
            "wiring": {"rule": "plane-per-ocs"}}
    inv = json.loads(next(s for s in c_strings(source("tests/unit/test_rdma.c"))
                          if s.startswith('{"rdma": true')))
    for i, dev in enumerate(inv["devices"]):
        for p in dev["ports"]:
            p["index"] = i
    inv["interval"] = 5
    srv = lambda n: [f"srv{i}" for i in range(n)]
    seq = "\n%%\n".join
    seeds = [
        # test_dispatch.c
        request("POST", "/v1/servers", {"name": "extra", "devices": 4}),
        request("POST", "/v1/servers", {"name": "srv0", "devices": 4}),
        request("PUT", "/v1/topology", {"ocs": [], "servers": [{"name": "a", "devices": 2}],
                                        "wiring": {"rule": "plane-per-ocs"}}),
        request("GET", "/v1/servers/srv3"),
        request("GET", "/v1/events", headers=["Last-Event-ID: 0-1"]),
        # fabrics: create, wait, read, delete
        seq([request("POST", "/v1/fabrics?wait=5", {"name": "a", "servers": srv(3)}),
             request("GET", "/v1/fabrics/a"), request("GET", "/v1/ocs/ocs0/cross-connects"),
             request("DELETE", "/v1/fabrics/a?wait=5"), request("GET", "/v1/operations?fabric=a")]),
        seq([request("GET", "/v1/events?fabric=b"),
             request("POST", "/v1/fabrics", {"name": "b", "servers": srv(8)}),
             request("PUT", "/v1/servers/srv3/devices/1", {"state": "failed"}),
             request("GET", "/v1/fabrics/b?wait=1"),
             request("PUT", "/v1/servers/srv3/devices/1", {"state": "ok"})]),
        request("POST", "/v1/fabrics", {"name": "job-b", "servers": ["srv5", "srv5"]}),
        request("POST", "/v1/fabrics?wait=0x10", {"name": "w", "servers": ["srv0"]}),
        # topology, wiring, units, switches
        seq([request("PUT", "/v1/topology", topo), request("GET", "/v1/topology"),
             request("POST", "/v1/fabrics", {"name": "f", "servers": ["s0", "s1", "s2", "s3"]}),
             request("DELETE", "/v1/ocs/ocs0?force=true")]),
        seq([request("POST", "/v1/ocs", {"name": "keep", "driver": "sim", "ports": 32,
                                         "endpoint": "sim:delay_ms=5"}),
             request("PUT", "/v1/wiring", {"links": [{"server": "srv0", "device": 0, "port": 0,
                                                      "ocs": "keep", "ocs_port": 1}]}),
             request("GET", "/v1/wiring"), request("DELETE", "/v1/ocs/keep")]),
        request("PUT", "/v1/wiring", {"rule": "plane-per-ocs", "links": []}),
        seq([request("POST", "/v1/switches", {"name": "small", "aggregating": True, "buffer": 4,
                                              "window": 8}),
             request("POST", "/v1/servers", {"name": "x0", "devices": 4, "offload": True,
                                             "switch": "small"}),
             request("GET", "/v1/switches/small"), request("DELETE", "/v1/switches/small")]),
        seq([request("POST", "/v1/ocs/ocs0/faults", {"kind": "set_xc", "a": 60, "b": 61}),
             request("POST", "/v1/ocs/ocs1/faults", {"kind": "fail_batches", "count": 2}),
             request("POST", "/v1/fabrics", {"name": "x", "servers": ["srv2", "srv0"]}),
             request("GET", "/v1/ocs/ocs0")]),
        # the agent's routes, with and without its token
        request("PUT", "/v1/servers/srv0/inventory", inv, headers=["Agent: srv0"]),
        request("PUT", "/v1/servers/srv1/inventory", inv, headers=["Agent: srv0"]),
        request("PUT", "/v1/servers/srv0/devices/0", {"state": "failed"}, headers=["Agent: srv0"]),
        request("PUT", "/v1/servers/srv3/devices/x", {"state": "failed"}),
        # computations
        request("POST", "/v1/plan", {"servers": 8, "devices": 8, "formula": "1"}),
        request("POST", "/v1/plan", {"servers": 65, "devices": 9, "ports_per_device": 8}),
        seq([request("POST", "/v1/fabrics", {"name": "job", "servers": srv(8)}),
             request("POST", "/v1/fabrics/job/pipeline", {"stages": ["srv2", "srv0"],
                                                          "bytes": 16 << 20, "aggregation": "none"}),
             request("GET", "/v1/fabrics/job/schedule?collective=allreduce&algorithm=ring&bytes=8"),
             request("POST", "/v1/collective/select", {"collective": "allreduce", "bytes": 4096,
                                                       "fabric": "job"})]),
        request("POST", "/v1/transmission/select", {"aggregation": "none", "bytes": 1,
                                                    "source": {"server": "srv0", "device": 0},
                                                    "destination": {"server": "srv1", "device": 0}}),
        request("POST", "/v1/collective/select", {"collective": "allreduce", "bytes": 4096,
                                                  "servers": 6}),
        # reads and odd requests
        request("GET", "/metrics"), request("GET", "/v1/health"),
        request("GET", "/v1/operations?limit=5&ocs=ocs0"), request("GET", "/v1/operations/abc"),
        request("DELETE", "/v1/health"), request("GET", "/v1/%FF"),
        request("DELETE", "/v1/servers/nulx\0garbage"),
        request("POST", "/v1/servers", "{\"name\": \"a\", \"name\": \"b\"}"),
    ]
    return seeds


# ---- inventory and configuration --------------------------------------------

def inventory_seeds():
    texts = [s for s in c_strings(source("tests/unit/test_rdma.c")) if s.startswith("{")]
    inv = json.loads(next(s for s in texts if s.startswith('{"rdma": true')))
    report = json.loads(json.dumps(inv))
    for i, dev in enumerate(report["devices"]):
        for p in dev["ports"]:
            p["index"] = i
    report["interval"] = 10
    script = "# at ms, device, port, event\n100 mlx5_0 1 port_err\n200 mlx5_0 1 port_active\n" \
             "300 mlx5_1 0 device_fatal\n"
    return texts + [json.dumps(report), json.dumps(inv) + "\0" + script,
                    json.dumps({"rdma": False, "reason": "no RDMA device found", "devices": []})]


def config_seeds():
    texts = c_strings(source("tests/unit/test_config.c")) + \
        c_strings(source("tests/unit/test_rdma.c"))
    seeds = [t for t in texts if re.search(r"\[(http|store|log|auth|debug|reconcile|cost|agent)\]", t)]
    with open(os.path.join(ROOT, "packaging", "ofcd.ini"), encoding="utf-8") as f:
        seeds.append(f.read())
    with open(os.path.join(ROOT, "packaging", "agent.ini"), encoding="utf-8") as f:
        seeds.append(f.read())
    return sorted(set(seeds))


def etcd_seeds():
    """The gateway replies of test_etcd_proto.c, and a watch stream of three lines."""
    replies = [t for t in c_strings(source("tests/unit/test_etcd_proto.c"))
               if t.lstrip().startswith("{")]
    stream = "\0".join(r for r in replies if '"result"' in r)
    return sorted(set(replies)) + ([stream] if stream else [])


def bundle(*items):
    """A change of the log (log_bundle.h): (kind, bytes) changesets."""
    out = b"OFCDBNDL" + struct.pack(">I", len(items))
    for kind, data in items:
        out += bytes([kind]) + struct.pack(">I", len(data)) + data
    return out


def part(index, count, data):
    return b"OFCDPART" + struct.pack(">II", index, count) + data


def entries(*values):
    """The fuzz_log input: each entry as a 2-byte length and its bytes."""
    return b"".join(struct.pack(">H", len(v)) + v for v in values)


def log_seeds():
    write_ = bundle((1, b"T\x02\x00\x01circuit\x00" + bytes(20)))
    both = bundle((2, b"T\x01fabric\x00" + bytes(12)), (3, b'[{"kind":"operation"}]'),
                  (1, b"T" + bytes(30)))
    return [entries(write_), entries(both), entries(part(0, 2, both[:20]), part(1, 2, both[20:])),
            entries(part(0, 3, both[:10]), part(1, 3, both[10:30]), write_),
            entries(part(1, 2, b"late"), b"T" + bytes(8))]


def netconf_seeds():
    """The rpc-reply texts of test_netconf_msg.c (captured from netconfd)."""
    # the texts are macros: their literals are joined across line continuations
    text = source("tests/unit/test_netconf_msg.c").replace("\\\n", "\n")
    return sorted({t for t in c_strings(text) if t.startswith("<rpc-reply")})


def main():
    write("etcd", etcd_seeds())
    write("netconf", netconf_seeds())
    write("log", log_seeds())
    write("of13", of13_seeds())
    write("openflow", openflow_seeds())
    write("rest", rest_seeds())
    write("inventory", inventory_seeds())
    write("config", config_seeds())


if __name__ == "__main__":
    main()
