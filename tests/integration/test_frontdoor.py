"""The listener under pressure: it must keep accepting whatever clients do."""
import socket
import time

import requests

from conftest import Daemon


def with_http(d, lines):
    d.config.write_text(d.config.read_text().replace("[http]\n", "[http]\n" + lines))
    return d


def health_ok(port, timeout=2):
    try:
        return requests.get(f"http://127.0.0.1:{port}/v1/health", timeout=timeout).status_code == 200
    except requests.RequestException:
        return False


def test_listener_comes_back_after_the_connection_limit(tmp_path):
    # At the limit MHD stops watching the listening socket; once the connections
    # close it must watch it again, or no new client is ever served.
    d = with_http(Daemon(tmp_path), "max_connections = 8\n").start()
    try:
        for _ in range(3):
            socks = []
            for _ in range(10):
                s = socket.create_connection(("127.0.0.1", d.port))
                s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
                socks.append(s)
            time.sleep(0.3)
            for s in socks:
                s.close()
            time.sleep(0.2)
            assert health_ok(d.port), d.log()
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
        again = read_events(d, {"Last-Event-ID": seen[0]}, until="event:", timeout=1)
        assert "event: reset" not in again
        d.delete("/v1/fabrics/a?wait=10")
        more = read_events(d, {"Last-Event-ID": seen[-1]}, until="deleted", timeout=1)
        assert "fabric_state" in more or "operation" in more, more
        d.stop()
        d.start()
        after = read_events(d, {"Last-Event-ID": seen[-1]}, until="reset", timeout=2)
        assert 'event: reset\ndata: {"reason":"restart"}' in after, after
    finally:
        d.stop()
