"""The listener under pressure: it must keep accepting whatever clients do."""
import os
import socket
import time

import pytest

import requests

from conftest import Daemon, free_port, wait_for


def with_http(d, lines):
    d.config.write_text(d.config.read_text().replace("[http]\n", "[http]\n" + lines))
    return d


def health_ok(port, timeout=2):
    try:
        return requests.get(f"http://127.0.0.1:{port}/v1/health", timeout=timeout).status_code == 200
    except requests.RequestException:
        return False


def open_connections(d):
    for line in requests.get(d.url("/metrics"), timeout=10).text.splitlines():
        if line.startswith("ofcd_http_open_connections "):
            return int(line.split()[1])
    raise AssertionError("no ofcd_http_open_connections")


def test_listener_comes_back_after_the_connection_limit(tmp_path):
    # At the limit MHD stops watching the listening socket; once the connections
    # close it must watch it again, or no new client is ever served. 8 + the 8
    # kept for probes: 18 clients go past it.
    d = with_http(Daemon(tmp_path), "max_connections = 8\n").start()
    try:
        for _ in range(3):
            socks = []
            for _ in range(18):
                s = socket.create_connection(("127.0.0.1", d.port))
                s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
                socks.append(s)
            time.sleep(0.3)
            for s in socks:
                s.close()
            # Served once the daemon has seen them close (never, if it stopped watching the
            # listening socket for good); on a busy machine that may take a moment.
            assert wait_for(lambda: health_ok(d.port, timeout=5), 15), d.log()
    finally:
        d.stop()


def test_oversized_body_sent_unasked_gets_its_413(daemon):
    # The client writes the whole body before reading: the reply must not be lost
    # in a reset while it still writes.
    import http.client
    body = b"x" * (2 << 20)
    for _ in range(20):
        c = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
        c.request("POST", "/v1/ocs", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 413 and b'"body_too_large"' in r.read()
        assert r.getheader("Connection") == "close"
        c.close()
    assert health_ok(daemon.port)


def raw(port, data, timeout=3):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        pass
    s.close()
    return out


def read_events(d, headers=None, until=None, timeout=3, then=None):
    """The SSE text of a stream until `until` appears (or timeout); then() runs once it is open."""
    r = requests.get(d.url("/v1/events"), headers=headers or {}, stream=True, timeout=timeout)
    if then:
        then()
    text = ""
    deadline = time.time() + timeout
    try:
        for chunk in r.iter_content(chunk_size=None, decode_unicode=True):
            text += chunk
            if (until and until in text) or time.time() > deadline:
                break
    except requests.RequestException:
        pass
    r.close()
    return text


def test_events_resume_with_last_event_id_and_reset_after_restart(tmp_path):
    d = Daemon(tmp_path, args=["--demo"]).start()
    try:
        first = read_events(d, until="applied",
                            then=lambda: d.post("/v1/fabrics", {"name": "a", "servers": ["srv0", "srv1"]}))
        assert "event: " in first, first
        seen = [l[4:] for l in first.splitlines() if l.startswith("id: ")]
        assert seen and "-" in seen[0]
        # Everything after the first id again, and no reset.
        again = read_events(d, {"Last-Event-ID": seen[0]}, until="event:", timeout=5)
        assert "event: reset" not in again
        d.delete("/v1/fabrics/a?wait=10")
        more = read_events(d, {"Last-Event-ID": seen[-1]}, until="deleted", timeout=5)
        assert "fabric_state" in more or "operation" in more, more
        d.stop()
        d.start()
        after = read_events(d, {"Last-Event-ID": seen[-1]}, until="reset", timeout=5)
        assert 'event: reset\ndata: {"reason":"restart"}' in after, after
    finally:
        d.stop()


def test_an_event_a_request_makes_reaches_streams_while_its_connection_stays_open(tmp_path):
    """The event is published while the HTTP library serves the request: the stream it wakes
    was left parked until some connection did something (seconds, or the 15 s comment)."""
    daemon = Daemon(tmp_path, args=["--demo"]).start()
    session = requests.Session()
    try:
        session.get(daemon.url("/v1/health"))  # the connection the write will use, kept open
        seen = read_events(daemon, until="device_state", timeout=10, then=lambda: session.put(
            daemon.url("/v1/servers/srv1/devices/0"), json={"state": "failed"}))
        assert "event: device_state" in seen, seen
    finally:
        session.close()
        daemon.stop()


def test_probe_reserve_beyond_max_connections(tmp_path):
    d = with_http(Daemon(tmp_path), "max_connections = 4\n").start()
    try:
        socks = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(4)]
        assert wait_for(lambda: open_connections(d) >= 5, 10)  # the 4 and this probe
        r = requests.get(d.url("/v1/fabrics"), timeout=10)
        assert r.status_code == 503 and r.json()["error"]["code"] == "overloaded", r.text
        assert health_ok(d.port)
        for s in socks:
            s.close()
        # Before request_timeout (10 s) would close the four anyway.
        assert wait_for(lambda: requests.get(d.url("/v1/fabrics"), timeout=5).status_code == 200, 5)
    finally:
        d.stop()


def test_one_address_cannot_take_every_slot(tmp_path):
    # 2,000 half-open connections from 127.0.0.2: the daemon keeps serving 127.0.0.1.
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 8192), hard), hard))
    d = Daemon(tmp_path).start()
    socks = []
    try:
        for i in range(2000):
            s = socket.socket()
            s.setblocking(False)
            s.bind(("127.0.0.2", 0))
            s.connect_ex(("127.0.0.1", d.port))
            socks.append(s)
            if i % 200 == 199:
                # Held, it would not answer within the second; 0.5 s still tells that apart
                # and leaves a busy machine room to schedule the probe and the daemon.
                t0 = time.time()
                assert health_ok(d.port, timeout=1) and time.time() - t0 < 0.5, i
        for s in socks:
            try:
                s.send(b"POST /v1/ocs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")
            except OSError:
                pass
        t0 = time.time()
        assert health_ok(d.port, timeout=1) and time.time() - t0 < 0.5
        assert open_connections(d) <= 64 + 2
    finally:
        for s in socks:
            s.close()
        d.stop()


@pytest.mark.parametrize("partial", [
    b"GET /v1/health HTTP/1.1\r\nHost:",                                    # half the headers
    b"POST /v1/ocs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n",                                            # headers only
    b"POST /v1/ocs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{\"na",                                        # half the body
])
def test_abandoned_requests_free_their_slot_at_once(daemon, partial):
    # Data and FIN in one go: the close must still be seen, not waited out.
    socks = []
    for _ in range(50):
        s = socket.create_connection(("127.0.0.1", daemon.port))
        s.sendall(partial)
        socks.append(s)
    time.sleep(0.2)
    for s in socks:
        s.close()
    # Seen at once, not waited out: well before header_timeout and request_timeout (10 s).
    assert wait_for(lambda: open_connections(daemon) <= 1, 5), open_connections(daemon)
    assert health_ok(daemon.port)


def test_slow_requests_time_out_sooner_than_idle_keepalive(tmp_path):
    d = with_http(Daemon(tmp_path), "request_timeout = 3\nidle_timeout = 30\n").start()
    try:
        half = socket.create_connection(("127.0.0.1", d.port))
        half.sendall(b"POST /v1/ocs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 10\r\n\r\n{")
        assert wait_for(lambda: open_connections(d) == 2, 2)  # it and this probe
        idle = socket.create_connection(("127.0.0.1", d.port))
        idle.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        idle.recv(4096)
        # Cut after request_timeout, long before idle_timeout, and before body_min_rate's
        # check (header_timeout, 10 s, after the header) would cut it anyway.
        assert wait_for(lambda: open_connections(d) <= 2, 6)  # the idle one and the probe
        half.settimeout(1)
        assert half.recv(4096) == b""  # closed by the daemon
        idle.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert idle.recv(4096).startswith(b"HTTP/1.1 200")
        half.close()
        idle.close()
    finally:
        d.stop()


def test_closed_wait_is_noticed_and_does_not_hold_the_stop(tmp_path):
    d = Daemon(tmp_path, args=["--demo"]).start()
    try:
        d.post("/v1/ocs", {"name": "slow", "driver": "openflow", "ports": 8,
                           "endpoint": "tcp:127.0.0.1:9"})
        d.put("/v1/wiring", {"rule": "plane-per-ocs"})
        # The fabric cannot be applied (a unit never answers): the wait is held.
        socks = []
        for i in range(5):
            s = socket.create_connection(("127.0.0.1", d.port))
            body = b'{"name": "w%d", "servers": ["srv%d", "srv%d"]}' % (i, 2 * i % 8, (2 * i + 1) % 8)
            s.sendall(b"POST /v1/fabrics?wait=60 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            socks.append(s)
        assert wait_for(lambda: open_connections(d) >= 6, 10)
        time.sleep(0.3)  # their requests read and held
        for s in socks:
            s.close()
        # Left: the metrics probe and the keep-alive connection of d's session.
        assert wait_for(lambda: open_connections(d) <= 2, 5), open_connections(d)
        t0 = time.time()
        assert d.stop() == 0
        assert time.time() - t0 < 6  # a held wait would hold it for the drain's 10 s
    finally:
        if d.proc.poll() is None:
            d.stop()


def test_one_plan_request_cannot_hold_the_loop(daemon):
    body = {"servers": 512, "devices": 1024}
    r = daemon.post("/v1/plan", body)
    assert r.status_code == 422 and r.json()["error"]["field"] == "links", r.text
    r = daemon.post("/v1/plan", dict(body, links=False))
    assert r.status_code == 200 and r.json()["nlinks"] == 512 * 511 // 2 and "links" not in r.json()
    r = daemon.post("/v1/plan", {"servers": 181, "devices": 181})
    assert r.status_code == 200 and len(r.json()["links"]) == r.json()["nlinks"] == 181 * 180 // 2
    assert r.json()["links"][0] == {"plane": 0, "a": {"server": 1, "device": 0, "port": 0},
                                    "b": {"server": 180, "device": 0, "port": 0}}


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_closed_event_streams_are_noticed(daemon):
    # Closed with unread data (a reset) or cleanly: both are seen, and seeing
    # them costs nothing afterwards (no busy loop on the closed sockets).
    for rep in range(4):
        socks = []
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", daemon.port))
            s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
            if rep % 2:
                s.recv(4096)
            socks.append(s)
        assert wait_for(lambda: open_connections(daemon) >= 6, 10)
        cpu = cpu_seconds(daemon.proc.pid)
        for s in socks:
            s.close()
        # Before the 15 s keep-alive comment would find them gone.
        assert wait_for(lambda: open_connections(daemon) <= 1, 5), open_connections(daemon)
        time.sleep(0.5)
        assert cpu_seconds(daemon.proc.pid) - cpu < 0.2
    # A reader leaving its stream is no warning (it was one per stream, in every log).
    assert " warn " not in daemon.log(), daemon.log()
    assert "ofcd_http_warnings_total 0" in daemon.get("/metrics").text


def closed_by_peer(s):
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_refused_connections_cannot_flood_the_log(tmp_path):
    """Every connection refused at the per-address limit is a warning of the HTTP library:
    all are counted, ten are logged per ten seconds."""
    d = with_http(Daemon(tmp_path), "max_connections_per_ip = 4\n").start()
    try:
        socks = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(60)]
        try:
            # The daemon closes the 56 it refuses; the four it kept wait for a request.
            wait_for(lambda: sum(map(closed_by_peer, socks)) >= 56)
        finally:
            for s in socks:
                s.close()
        def metrics_text():
            try:  # refused too until the daemon has seen the four close
                return requests.get(d.url("/metrics"), timeout=2).text
            except requests.ConnectionError:
                return None

        metrics = wait_for(metrics_text)
        warnings = [l for l in metrics.splitlines() if l.startswith("ofcd_http_warnings_total ")]
        assert warnings and float(warnings[0].split()[1]) >= 56, warnings
        logged = d.log().count("warn http: Server reached connection limit")
        assert 1 <= logged <= 10, logged
    finally:
        d.stop()


def trickle_until_cut(socks, payload, step=0.3, timeout=15):
    """Sends payload one byte per step on each socket until the daemon cuts it; the sockets
    it cut. A socket still open at timeout is not cut."""
    cut = set()
    deadline = time.monotonic() + timeout
    i = 0
    while len(cut) < len(socks) and time.monotonic() < deadline:
        for k, s in enumerate(socks):
            if k in cut:
                continue
            try:
                s.send(payload[i % len(payload):i % len(payload) + 1])
            except OSError:
                cut.add(k)
                continue
            if closed_by_peer(s):
                cut.add(k)
        i += 1
        time.sleep(step)
    return cut


def cuts(d, phase):
    text = requests.get(d.url("/metrics"), timeout=10).text
    for line in text.splitlines():
        if line.startswith(f'ofcd_http_deadline_cuts_total{{phase="{phase}"}} '):
            return float(line.split()[1])
    return 0.0


def test_a_header_trickled_byte_by_byte_is_cut(tmp_path):
    """Each byte used to restart request_timeout: a client sending one a second held its slot
    for ever. The whole header has header_timeout, bytes or not; a header sent in pieces
    within it is served."""
    d = with_http(Daemon(tmp_path), "header_timeout = 2\nrequest_timeout = 30\n").start()
    try:
        socks = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(5)]
        header = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
        try:
            assert trickle_until_cut(socks, header) == set(range(5))
        finally:
            for s in socks:
                s.close()
        assert cuts(d, "header") == 5
        with socket.create_connection(("127.0.0.1", d.port)) as s:
            for part in (b"GET /v1/health HT", b"TP/1.1\r\nHost: x\r\n", b"\r\n"):
                s.sendall(part)
                time.sleep(0.4)
            assert s.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        d.stop()


def test_a_body_trickled_byte_by_byte_is_cut(tmp_path):
    d = with_http(Daemon(tmp_path), "header_timeout = 1\nbody_min_rate = 100\n").start()
    try:
        s = socket.create_connection(("127.0.0.1", d.port))
        try:
            s.sendall(b"POST /v1/plan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100000\r\n\r\n")
            assert trickle_until_cut([s], b'{"servers": 4, ') == {0}
        finally:
            s.close()
        assert cuts(d, "body") == 1
        assert health_ok(d.port)
    finally:
        d.stop()


def test_probes_answer_on_admin_listen_while_listen_is_full(tmp_path):
    """Idle connections from many addresses take every slot of [http] listen, the 8 kept
    for probes too; health and metrics still answer on [http] admin_listen, which serves
    nothing else."""
    admin = free_port()
    d = with_http(Daemon(tmp_path), "max_connections = 8\nmax_connections_per_ip = 4\n"
                  f"admin_listen = 127.0.0.1:{admin}\n").start()
    socks = []
    try:
        for a in range(2, 7):  # 5 addresses, 4 connections each: 20 > 8 + 8
            for _ in range(4):
                s = socket.socket()
                s.bind((f"127.0.0.{a}", 0))
                s.connect(("127.0.0.1", d.port))
                socks.append(s)
        wait_for(lambda: not health_ok(d.port, timeout=0.5))
        r = requests.get(f"http://127.0.0.1:{admin}/v1/health", timeout=2)
        assert r.status_code == 200 and r.json()["status"] == "ok"
        assert "ofcd_http_open_connections" in requests.get(f"http://127.0.0.1:{admin}/metrics",
                                                            timeout=2).text
        r = requests.get(f"http://127.0.0.1:{admin}/v1/fabrics", timeout=2)
        assert r.status_code == 404 and "admin_listen" in r.json()["error"]["message"]
    finally:
        for s in socks:
            s.close()
        d.stop()
    assert "probes and scrapes also on 127.0.0.1:" in d.log()
