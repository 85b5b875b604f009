"""Memory held for stalled event streams: 250 clients open GET /v1/events and never read
(a 4 KiB receive buffer), while device failures and repairs publish events until the daemon
has dropped them all; the daemon's RSS before, at its peak, and once they are dropped.
Usage: sse_memory.py BUILD_DIR."""
import os
import socket
import sys
import tempfile
import pathlib
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build"))
os.environ.setdefault("OFCD_BIN", os.path.join(build, "ofcd"))

from conftest import Daemon  # noqa: E402

STREAMS = 250


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def stalled_stream(port, i):
    """The i-th stream, from 127.0.0.(2 + i / 50): within [http] max_connections_per_ip."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind((f"127.0.0.{2 + i // 50}", 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
    return s


def drops(d):
    """Streams the daemon dropped for a slow client (each one warning)."""
    for line in d.get("/metrics").text.splitlines():
        if line.startswith("ofcd_http_warnings_total "):
            return int(float(line.split()[1]))
    return 0


def main():
    d = Daemon(pathlib.Path(tempfile.mkdtemp(prefix="sse-mem-")), args=("--demo",)).start()
    try:
        before = rss_mib(d.proc.pid)
        socks = [stalled_stream(d.port, i) for i in range(STREAMS)]
        time.sleep(1)
        peak, puts, state, n = before, 0, "failed", 0
        t0 = time.time()
        while time.time() - t0 < 120:
            for _ in range(200):
                d.put("/v1/servers/srv0/devices/1", {"state": state})
                state = "ok" if state == "failed" else "failed"
                puts += 1
            peak = max(peak, rss_mib(d.proc.pid))
            n = drops(d)
            if n >= STREAMS:
                break
        time.sleep(1)
        after = rss_mib(d.proc.pid)
        for s in socks:
            s.close()
        print(f"sse stalled streams: {STREAMS}, dropped {n} after {puts} device changes")
        print(f"sse rss: before {before:.0f} MiB, peak {peak:.0f} MiB, after the drops "
              f"{after:.0f} MiB (kept {after - before:.0f} MiB)")
    finally:
        d.stop()


if __name__ == "__main__":
    main()
