"""The randomized HA workload at length (issue 24): the engine of
tests/integration/ha_jepsen.py with a hundred faults and more, the checks the same.

Usage: python3 bench/ha_jepsen.py BUILD_DIR [FAULTS] [SEED]
"""
import os
import pathlib
import random
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
faults = int(sys.argv[2]) if len(sys.argv) > 2 else 120
seed = int(sys.argv[3]) if len(sys.argv) > 3 else random.SystemRandom().randrange(1 << 32)
os.environ["OFCD_BIN"] = os.path.join(build, "ofcd")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import ha_jepsen  # noqa: E402 (needs OFCD_BIN first)
from ha_lab import ETCD_BIN  # noqa: E402


def main():
    if not os.access(ETCD_BIN, os.X_OK):
        print(f"ha_jepsen: skipped, {ETCD_BIN} not installed")
        return
    print(f"ha_jepsen_seed: {seed} (a failure replays with: bench/ha_jepsen.py BUILD {faults} "
          f"{seed})", flush=True)
    with tempfile.TemporaryDirectory(prefix="ofcd-jepsen-") as tmp:
        t = time.monotonic()
        s = ha_jepsen.run(pathlib.Path(tmp), seed, faults, say=lambda m: None)
    kinds = ", ".join(f"{k[6:]} {v}" for k, v in sorted(s.items()) if k.startswith("fault_"))
    print(f"ha_jepsen_faults: {s['faults']} in {time.monotonic() - t:.0f} s ({kinds})")
    print(f"ha_jepsen_writes: {s.get('acked', 0)} acknowledged, {s.get('refused', 0)} refused, "
          f"{s.get('unknown', 0)} without a certain answer; every acknowledged write present, "
          "nothing refused present, every member's tables equal, no invariant broken")
    print(f"ha_jepsen_consistent_reads: {s.get('reads', 0)} answered, each a state the writes "
          f"before it allow; {s.get('reads_refused', 0)} refused (503: no leader confirmed), "
          f"{s.get('reads_unanswered', 0)} unanswered")


if __name__ == "__main__":
    main()
