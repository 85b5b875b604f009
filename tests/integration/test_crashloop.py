"""Crash loops in `make test` (the engine and what it checks: crashloop.py; 200 iterations and
more: bench/crashloop.py). The seed is printed; OFCD_CRASHLOOP_SEED replays one."""
import os
import random

from crashloop import agent, controller

SEED = int(os.environ.get("OFCD_CRASHLOOP_SEED", random.SystemRandom().randrange(1 << 32)))


def test_controller_crash_loop(tmp_path):
    stats = controller(tmp_path, 20, SEED, max_seconds=120)
    assert stats["iterations"] == 20
    assert stats["acked"] > 0


def test_agent_crash_loop(tmp_path):
    stats = agent(tmp_path, 20, SEED, max_seconds=90)
    assert stats["iterations"] == 20
