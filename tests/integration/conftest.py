"""Fixtures that run the real build/ofcd (and build/ofcd-agent) on a free loopback port with a temp config and store."""
import http.server
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time

import pytest
import requests

import openapi_check

OFCD_BIN = os.environ.get("OFCD_BIN", os.path.join(os.path.dirname(__file__), "../../build/ofcd"))
# The host agent is built beside the controller.
OFCD_AGENT_BIN = os.environ.get("OFCD_AGENT_BIN",
                                os.path.join(os.path.dirname(OFCD_BIN), "ofcd-agent"))
ADMIN = "admin-secret-0123456789"
READER = "reader-secret-0123456789"


def _port_share():
    """This process's ports: outside the kernel's ephemeral range, where connect() and bind(0)
    take theirs (so a port a test lets go for a while, a daemon or an etcd member it restarts,
    stays its own), one share of them per pytest-xdist worker."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        first, last = (int(v) for v in f.read().split())
    # The larger gap: below the range (Debian's 32768-60999) or above it.
    lo, hi = max([(10000, first), (last + 1, 65536)], key=lambda g: g[1] - g[0])
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
    size = (hi - lo) // workers
    start = lo + worker * size
    # From a random point, in turn: a port handed out is not handed again before its daemon binds it.
    first = random.randrange(size)
    return (start + (first + i) % size for i in itertools.count())


_ports = _port_share()


def free_port():
    """A loopback port no other test of this run takes, free when handed out."""
    while True:
        port = next(_ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


class Daemon:
    """One ofcd process. Keeps its store between restarts, so tests can check persistence."""

    def __init__(self, tmp_path, tokens=False, extra="", listen_host="127.0.0.1", args=()):
        self.dir = tmp_path
        self.port = free_port()
        self.store = str(tmp_path / "ofcd.db")
        self.config = tmp_path / "ofcd.ini"
        self.log_path = tmp_path / "ofcd.log"
        self.args = list(args)
        self.tokens = tokens
        self.proc = None
        self.write_config(tokens=tokens, extra=extra, listen_host=listen_host)
        self.session = requests.Session()

    def write_config(self, tokens=False, extra="", listen_host="127.0.0.1", level="info"):
        text = f"[http]\nlisten = {listen_host}:{self.port}\n[store]\npath = {self.store}\n[log]\nlevel = {level}\n"
        if tokens:
            text += f"[auth]\ntoken.ops = admin:{ADMIN}\ntoken.mon = read:{READER}\n"
        text += extra
        self.config.write_text(text)
        self.config.chmod(0o600)  # it may hold secrets (ofcd warns otherwise)

    def start(self, wait=True):
        self.logf = open(self.log_path, "a")
        self.proc = subprocess.Popen([OFCD_BIN, "-c", str(self.config), *self.args],
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=30):
        # Generous: a start on a large store, on a busy machine, takes seconds; a probe that
        # the listening but still busy daemon has not answered yet is asked again.
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ofcd exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if requests.get(self.url("/v1/health"), timeout=5).status_code == 200:
                    return
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.02)
        raise RuntimeError("ofcd did not become ready:\n" + self.log())

    def log(self):
        if not self.logf.closed:
            self.logf.flush()
        return self.log_path.read_text()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def headers(self, token):
        h = {}
        if token is None and self.tokens:
            token = ADMIN
        if token:
            h["Authorization"] = f"Bearer {token}"
        return h

    def req(self, method, path, body=None, token=None, raw=None, headers=None, timeout=30,
            validate=True):
        """One request; unless validate is False, the exchange is checked against
        docs/openapi.yaml (status, content type, bodies; openapi_check.py)."""
        h = self.headers(token)
        data = raw
        if body is not None:
            data = json.dumps(body)
        if data is not None or method in ("POST", "PUT"):
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        r = self.session.request(method, self.url(path), data=data, headers=h, timeout=timeout)
        if validate:
            openapi_check.check(r)
        return r

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.req("POST", path, body=body, **kw)

    def put(self, path, body=None, **kw):
        return self.req("PUT", path, body=body, **kw)

    def delete(self, path, **kw):
        return self.req("DELETE", path, **kw)

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.logf.close()
        self.session.close()
        self.session = requests.Session()
        return rc

    def restart(self):
        assert self.stop() == 0
        return self.start()


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path).start()
    yield d
    d.stop()


@pytest.fixture
def auth_daemon(tmp_path):
    d = Daemon(tmp_path, tokens=True).start()
    yield d
    d.stop()


@pytest.fixture
def make_daemon(tmp_path):
    made = []

    def make(**kw):
        d = Daemon(tmp_path, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        d.stop(sig=signal.SIGKILL)


def error_of(resp):
    body = resp.json()
    assert set(body) == {"error"}, body
    return body["error"]


def open_connections(d):
    """d's ofcd_http_open_connections, asked over d's own keep-alive connection (counted)."""
    for line in d.get("/metrics").text.splitlines():
        if line.startswith("ofcd_http_open_connections "):
            return int(line.split()[1])
    raise AssertionError("no ofcd_http_open_connections")


class LoopbackServer(http.server.ThreadingHTTPServer):
    """An HTTP server of a test's own on a free loopback port, serving from a thread; the
    test shuts it down (shutdown(), server_close())."""

    def __init__(self, handler):
        super().__init__(("127.0.0.1", 0), handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


def wait_for(cond, timeout=10, step=0.05):
    """cond()'s first true value, polled every step seconds; AssertionError after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(step)
