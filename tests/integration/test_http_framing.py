"""Strict HTTP/1.1 framing (RFC 9112): a request whose end is in doubt is refused with the
JSON error `bad_request` and its connection closed; the malformed requests libmicrohttpd
answers itself get an error status and a closed connection (its own HTML body: 0.9.75 has
no way to replace it, docs/operations.md)."""
import json
import socket

import pytest

JSON = "application/json"
POST = b"POST /v1/plan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
GET = b"GET /v1/health HTTP/1.1\r\n"

REFUSED = {
    "Content-Length with Transfer-Encoding":
        POST + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "Content-Length twice, equal": POST + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
    "Content-Length twice, different": POST + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    "Transfer-Encoding gzip, chunked": POST + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "Transfer-Encoding twice":
        POST + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "no Host": GET + b"\r\n",
    "Host twice": GET + b"Host: a\r\nHost: b\r\n\r\n",
    "a space in a header name": GET + b"Host: x\r\nX Bad: 1\r\n\r\n",
    "a space before the colon": GET + b"Host: x\r\nX-Bad : 1\r\n\r\n",
}

# What libmicrohttpd refuses before the daemon sees the request.
LIBRARY = {
    "a bad chunk size": (POST + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400),
    "Content-Length abc": (POST + b"Content-Length: abc\r\n\r\n", 400),
    "Content-Length -1": (POST + b"Content-Length: -1\r\n\r\n", 400),
    "Content-Length 2^64+1": (POST + b"Content-Length: 18446744073709551617\r\n\r\n", 413),
    "a 100 KB header": (GET + b"Host: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n", 431),
    "10,000 headers": (GET + b"Host: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(10000))
                       + b"\r\n", 431),
    "a 100 KB URL": (b"GET /v1/health?" + b"a" * 100000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    "HTTP/0.9": (b"GET /v1/health\r\n\r\n", 400),
    "HTTP/2.0": (b"GET /v1/health HTTP/2.0\r\nHost: x\r\n\r\n", 505),
}


def exchange(port, raw):
    """Sends raw, reads until the daemon closes: the status, the headers, the body."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize("case", REFUSED)
def test_ambiguous_framing_is_refused_and_the_connection_closed(daemon, case):
    status, headers, body = exchange(daemon.port, REFUSED[case])
    assert status == 400 and headers["connection"] == "close"
    assert headers["content-type"] == JSON
    err = json.loads(body)["error"]
    assert err["code"] == "bad_request" and err["message"].startswith("malformed request: ")


@pytest.mark.parametrize("case", LIBRARY)
def test_what_the_library_refuses_is_refused_and_closed(daemon, case):
    raw, expected = LIBRARY[case]
    status, headers, _ = exchange(daemon.port, raw)
    assert status == expected and headers.get("connection") == "close"


def test_an_http_10_request_needs_no_host(daemon):
    status, _, body = exchange(daemon.port, b"GET /v1/health HTTP/1.0\r\n\r\n")
    assert status == 200 and json.loads(body)["status"] == "ok"


def test_a_body_that_will_be_refused_is_not_asked_for(daemon):
    """Expect: 100-continue with a Content-Length over max_body: 413 at once, never
    "100 Continue" first."""
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=10) as s:
        s.sendall(POST + b"Content-Length: 2000000\r\nExpect: 100-continue\r\n\r\n")
        first = s.recv(65536)
    assert first.startswith(b"HTTP/1.1 413 "), first[:80]
    assert b"100 Continue" not in first and b'"body_too_large"' in first


@pytest.mark.parametrize("request_", [
    b"GET /v1/fabrics HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /v1/ocs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
])
def test_a_refusal_keeps_the_connection(auth_daemon, request_):
    """A 401 (and any refusal of a request read whole) leaves the connection open: a client
    that adds its token next pays no new connection, nor a new TLS handshake."""
    with socket.create_connection(("127.0.0.1", auth_daemon.port), timeout=10) as s:
        s.sendall(request_)
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 401 ") and b"Connection: close" not in first
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
