"""Shared by the REST benchmarks: start a real ofcd on a free loopback port with a temp store."""
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
        self.log = open(os.path.join(self.dir.name, "ofcd.log"), "w")
        self.proc = subprocess.Popen([binary, "-c", cfg], stdout=self.log, stderr=subprocess.STDOUT)
        self.session = requests.Session()
        for _ in range(200):
            try:
                if self.session.get(self.url("/v1/health"), timeout=1).ok:
                    return
            except requests.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("ofcd did not start")

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
