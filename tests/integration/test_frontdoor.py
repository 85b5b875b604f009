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
