"""Crash loops at length (issue 16): ofcd killed with SIGKILL during concurrent churn, 200 times,
and the host agent killed during its reports, 200 times; the checks of each iteration are those
of tests/integration/crashloop.py (the same engine as `make test`'s 20 iterations).

Usage: python3 bench/crashloop.py BUILD_DIR [ITERATIONS] [SEED]
"""
import os
import pathlib
import random
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 200
seed = int(sys.argv[3]) if len(sys.argv) > 3 else random.SystemRandom().randrange(1 << 32)
os.environ["OFCD_BIN"] = os.path.join(build, "ofcd")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import crashloop  # noqa: E402 (needs OFCD_BIN first)


def main():
    with tempfile.TemporaryDirectory(prefix="ofcd-crashloop-") as tmp:
        for d in ("controller", "agent"):
            os.mkdir(os.path.join(tmp, d))
        t = time.monotonic()
        c = crashloop.controller(pathlib.Path(tmp, "controller"), iterations, seed,
                                 max_seconds=3600)
        c_s = time.monotonic() - t
        t = time.monotonic()
        a = crashloop.agent(pathlib.Path(tmp, "agent"), iterations, seed, max_seconds=3600)
        a_s = time.monotonic() - t
    print(f"crashloop_seed: {seed}")
    print(f"crashloop_controller_iterations: {c['iterations']} kills ({c_s:.0f} s)")
    print(f"crashloop_controller_writes: {c['acked']} acknowledged, {c['refused']} refused, "
          f"{c['unknown']} cut by a kill")
    print(f"crashloop_controller_fabrics: {c['fabrics_made']} create attempts")
    print(f"crashloop_controller_restart: median {c['recovery_median_s'] * 1e3:.0f} ms, "
          f"max {c['recovery_max_s'] * 1e3:.0f} ms to healthy")
    print(f"crashloop_agent_iterations: {a['iterations']} ({a['kills']} kills, {a_s:.0f} s)")
    print(f"crashloop_agent_converge: median {a['converge_median_s'] * 1e3:.0f} ms, "
          f"max {a['converge_max_s'] * 1e3:.0f} ms after its script")
    if c["iterations"] < iterations or a["iterations"] < iterations:
        sys.exit("crashloop: ran out of time before the iterations were done")


if __name__ == "__main__":
    main()
