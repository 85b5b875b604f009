"""Shared by the REST benchmarks: start a real ofcd on a free loopback port with a temp store."""
import http.client
import json
import os
import socket
import subprocess
import tempfile
import time

import requests


class Ofcd:
    def __init__(self, binary, extra="", parent=None):
        # parent: where the temp dir (store, config, log) goes; default the system temp dir
        self.dir = tempfile.TemporaryDirectory(prefix="ofcd-bench-", dir=parent)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        cfg = os.path.join(self.dir.name, "ofcd.ini")
        with open(cfg, "w") as f:
            f.write(f"[http]\nlisten = 127.0.0.1:{self.port}\nmax_body = 67108864\n"
                    f"[store]\npath = {self.dir.name}/ofcd.db\n[log]\nlevel = warn\n{extra}")
        self.binary, self.cfg = binary, cfg
        self.log = open(os.path.join(self.dir.name, "ofcd.log"), "w")
        self.session = requests.Session()
        self.start()

    def start(self, timeout=60):
        """Starts the daemon on its configuration and waits for its health: seconds it took."""
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([self.binary, "-c", self.cfg], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        while time.perf_counter() - t0 < timeout:
            try:
                if self.session.get(self.url("/v1/health"), timeout=1).ok:
                    return time.perf_counter() - t0
            except requests.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("ofcd did not start")

    def restart(self):
        """Stops the daemon (SIGTERM) and starts it again on the same store: seconds to health."""
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.session.close()
        self.session = requests.Session()
        return self.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def call(self, method, path, body=None, ok=(200, 201)):
        r = self.session.request(method, self.url(path), json=body)
        if r.status_code not in ok:
            raise RuntimeError(f"{method} {path}: {r.status_code} {r.text[:300]}")
        return r

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.log.close()
        self.dir.cleanup()


class Client:
    """One keep-alive connection through http.client: it sends a request's headers and body in
    one segment (requests sends two, and Nagle's algorithm then holds the second back)."""

    def __init__(self, port, timeout=120):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method, path, body=None, ok=(200, 201, 202, 204)):
        data = json.dumps(body).encode() if body is not None else None
        self.c.request(method, path, body=data,
                       headers={"Content-Type": "application/json"} if data else {})
        r = self.c.getresponse()
        text = r.read()
        if r.status not in ok:
            raise RuntimeError(f"{method} {path}: {r.status} {text[:300]!r}")
        return r.status, text

    def json(self, method, path, body=None, ok=(200, 201)):
        return json.loads(self.call(method, path, body, ok)[1])

    def close(self):
        self.c.close()


def fsync_cost_ms(parent, n=50):
    """What a 4 KiB write and its fdatasync cost in directory parent, in ms (mean of n)."""
    path = os.path.join(parent, f".fsync-probe-{os.getpid()}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            os.write(fd, b"x" * 4096)
            os.fdatasync(fd)
        return (time.perf_counter() - t0) * 1e3 / n
    finally:
        os.close(fd)
        os.unlink(path)
