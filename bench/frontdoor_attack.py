"""Health under a slow-connection attack: 19 loopback addresses open 60 connections each
(1,140: past [http] max_connections, 1,024, and the 8 kept for probes), reopening any the
daemon closes, for 30 s, first sending nothing, then trickling one header byte a second.
Meanwhile a fresh client asks GET /v1/health every 0.5 s, on [http] listen and on
[http] admin_listen. Prints the answer times (a probe unanswered in 5 s counts as 5 s).
Usage: frontdoor_attack.py BUILD_DIR."""
import os
import pathlib
import resource
import selectors
import socket
import statistics
import sys
import tempfile
import threading
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ.setdefault("OFCD_BIN", os.path.join(build, "ofcd"))

from conftest import Daemon, free_port  # noqa: E402

ADDRESSES, PER_ADDRESS, SECONDS = 19, 60, 30
HEADER = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4096


class Attack:
    """The attackers' connections, kept open (and reopened) by one thread."""

    def __init__(self, port, trickle):
        self.port, self.trickle = port, trickle
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open(self, a):
        s = socket.socket()
        s.setblocking(False)
        s.bind((f"127.0.0.{10 + a}", 0))
        try:
            s.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        return s

    def run(self):
        sel = selectors.DefaultSelector()  # epoll: past select()'s 1,024 descriptors
        sent = {}
        for a in range(ADDRESSES):
            for _ in range(PER_ADDRESS):
                s = self.open(a)
                sel.register(s, selectors.EVENT_READ, a)
                sent[s] = 0
        next_byte = time.time()
        while not self.stop.is_set():
            for key, _ in sel.select(0.1):
                s = key.fileobj
                try:
                    if s.recv(4096):
                        continue
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    pass
                # Closed by the daemon: open another from the same address.
                sel.unregister(s)
                del sent[s]
                s.close()
                t = self.open(key.data)
                sel.register(t, selectors.EVENT_READ, key.data)
                sent[t] = 0
            if self.trickle and time.time() >= next_byte:
                next_byte += 1
                for s in sent:
                    try:
                        s.send(HEADER[sent[s]:sent[s] + 1])
                        sent[s] = (sent[s] + 1) % len(HEADER)
                    except OSError:
                        pass
        for s in sent:
            s.close()


def probe(url):
    t = time.perf_counter()
    try:
        ok = requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:
        ok = False
    return (time.perf_counter() - t) * 1000 if ok else 5000.0


def summary(ms):
    ms = sorted(ms)
    return (f"p50 {statistics.median(ms):.1f} ms, p99 {ms[int(0.99 * (len(ms) - 1))]:.1f} ms, "
            f"max {ms[-1]:.1f} ms, unanswered {sum(1 for m in ms if m >= 5000)} of {len(ms)}")


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 8192), max(hard, 8192)))
    admin = free_port()
    d = Daemon(pathlib.Path(tempfile.mkdtemp(prefix="attack-")))
    d.config.write_text(d.config.read_text().replace(
        "[http]\n", f"[http]\nadmin_listen = 127.0.0.1:{admin}\n"))
    d.start()
    try:
        for trickle in (False, True):
            attack = Attack(d.port, trickle)
            attack.thread.start()
            time.sleep(3)
            main_ms, admin_ms = [], []
            end = time.time() + SECONDS
            while time.time() < end:
                main_ms.append(probe(f"http://127.0.0.1:{d.port}/v1/health"))
                admin_ms.append(probe(f"http://127.0.0.1:{admin}/v1/health"))
                time.sleep(0.5)
            attack.stop.set()
            attack.thread.join()
            what = "trickling a header byte a second" if trickle else "sending nothing"
            print(f"attack {ADDRESSES}x{PER_ADDRESS} connections {what}: health on listen: "
                  f"{summary(main_ms)}")
            print(f"attack {ADDRESSES}x{PER_ADDRESS} connections {what}: health on "
                  f"admin_listen: {summary(admin_ms)}")
            time.sleep(12)  # the attack's connections go: the next one starts afresh
    finally:
        d.stop()


if __name__ == "__main__":
    main()
