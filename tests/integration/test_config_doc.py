"""The configuration reference in docs/operations.md is what the programs print from their
configuration tables (regenerate it with `make config-doc`)."""
import os
import sys

import pytest

from conftest import OFCD_AGENT_BIN, OFCD_BIN

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import config_doc  # noqa: E402


@pytest.mark.parametrize("program, binary", [("ofcd", OFCD_BIN), ("ofcd-agent", OFCD_AGENT_BIN)])
def test_reference_is_generated(program, binary):
    with open(config_doc.DOC, encoding="utf-8") as f:
        text = f.read()
    documented = config_doc.section(text, program)
    assert documented is not None, f"docs/operations.md has no config-table:{program} markers"
    assert documented == config_doc.generated(binary), \
        f"docs/operations.md's {program} table is stale: run make config-doc"


@pytest.mark.parametrize("binary", [OFCD_BIN, OFCD_AGENT_BIN])
def test_every_row_is_documented(binary):
    rows = [l for l in config_doc.generated(binary).splitlines()[2:]]
    assert rows and all(l.startswith("| ") and l.endswith(" |") for l in rows)
    # Seven columns each, with a non-empty meaning: no stray '|' inside a cell.
    assert all(l.count(" | ") == 6 and l.split(" | ")[6].strip(" |") for l in rows)
