"""GET /v1/cluster/snapshot left by its client: closed before the copy is whole, reset, or
read in part. The copy (the whole store, in memory) and its read transaction must go with the
request, and nothing else may notice: the daemon goes on writing, a later snapshot is whole
and current, and no socket or copy is left behind."""
import os
import socket
import sqlite3
import struct

from conftest import wait_for

SERVERS = 4096  # a store of about 10 MB: the copy takes two parts (8 MiB a turn)


def topology():
    return {"ocs": [{"name": f"ocs{u:02d}", "driver": "sim", "ports": SERVERS} for u in range(64)],
            "servers": [{"name": f"s{i:05d}", "devices": 8, "ports_per_device": 8}
                        for i in range(SERVERS)],
            "wiring": {"rule": "plane-per-ocs"}}


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def held(d):
    """ofcd_snapshot_bytes_held: the memory copies of the store hold now."""
    for line in d.get("/metrics").text.splitlines():
        if line.startswith("ofcd_snapshot_bytes_held "):
            return float(line.split()[1])
    raise AssertionError("no ofcd_snapshot_bytes_held in /metrics")


def abandon(d, how):
    """Asks for a snapshot and leaves: 'close' at once, 'reset' at once, or 'part' after 64 KiB."""
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(b"GET /v1/cluster/snapshot HTTP/1.1\r\nHost: x\r\n\r\n")
    if how == "part":
        got = b""
        while len(got) < 65536:
            chunk = s.recv(65536)
            assert chunk, "the daemon closed before sending 64 KiB"
            got += chunk
        assert got.startswith(b"HTTP/1.1 200")
    if how == "reset":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def test_snapshot_left_by_its_client(daemon, tmp_path):
    r = daemon.put("/v1/topology", topology(), timeout=120)
    assert r.status_code in (200, 202), r.text
    wait_for(lambda: "partial" not in daemon.get("/v1/wiring").json(), timeout=60)
    pid = daemon.proc.pid
    assert held(daemon) == 0
    whole = daemon.get("/v1/cluster/snapshot")
    assert whole.status_code == 200 and len(whole.content) > 8 << 20
    base_fds = fds(pid)

    # A client that does not read holds its copy (the whole store) until it goes.
    idle = socket.create_connection(("127.0.0.1", daemon.port))
    idle.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    idle.sendall(b"GET /v1/cluster/snapshot HTTP/1.1\r\nHost: x\r\n\r\n")
    wait_for(lambda: held(daemon) >= len(whole.content), timeout=30)
    idle.close()

    for i in range(24):
        abandon(daemon, ("close", "reset", "part")[i % 3])
        # Writes go on while copies are made and dropped.
        r = daemon.post("/v1/fabrics", {"name": f"f{i}", "servers": [f"s{2 * i:05d}", f"s{2 * i + 1:05d}"]})
        assert r.status_code == 201, r.text
    assert daemon.get("/v1/health").status_code == 200
    # Every abandoned request's socket is closed and its copy freed.
    wait_for(lambda: fds(pid) <= base_fds and held(daemon) == 0, timeout=30)

    # A snapshot now is whole and holds every write made meanwhile.
    r = daemon.get("/v1/cluster/snapshot")
    assert r.status_code == 200
    f = tmp_path / "after.db"
    f.write_bytes(r.content)
    db = sqlite3.connect(f)
    try:
        assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)
        names = {n for (n,) in db.execute("SELECT name FROM fabric")}
        assert names == {f"f{i}" for i in range(24)}
        assert db.execute("SELECT count(*) FROM cable").fetchone() == (SERVERS * 64,)
    finally:
        db.close()
    # The daemon's own store is still its own: a write after all of it is kept.
    assert daemon.delete("/v1/fabrics/f0?wait=10").status_code == 200
    assert daemon.stop() == 0
