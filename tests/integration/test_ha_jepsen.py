"""The randomized HA workload with faults injected (ha_jepsen.py): a short run. The seed is
printed; OFCD_JEPSEN_SEED replays one, bench/ha_jepsen.py runs a hundred faults and more."""
import os
import time

import pytest

import ha_jepsen
from ha_lab import ETCD_BIN

pytestmark = pytest.mark.skipif(not os.access(ETCD_BIN, os.X_OK), reason="etcd not installed")


def test_workload_with_faults_loses_nothing_and_members_agree(tmp_path):
    seed = int(os.environ.get("OFCD_JEPSEN_SEED", time.time_ns() % 1000000))
    faults = int(os.environ.get("OFCD_JEPSEN_FAULTS", "6"))
    stats = ha_jepsen.run(tmp_path, seed, faults)
    assert stats["faults"] == faults
    assert stats["acked"] > 0
