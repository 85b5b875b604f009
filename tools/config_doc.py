#!/usr/bin/env python3
"""The configuration reference in docs/operations.md (make config-doc).

Each program prints its configuration table with --dump-config-doc; the
document carries that output verbatim between the marker comments
<!-- config-table:PROGRAM begin --> and <!-- config-table:PROGRAM end -->.
tests/integration/test_config_doc.py fails when the two differ.
Usage: config_doc.py BINDIR    rewrites the tables in docs/operations.md
"""
import os
import re
import subprocess
import sys

PROGRAMS = ("ofcd", "ofcd-agent")
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "operations.md")


def pattern(program):
    return re.compile(rf"(<!-- config-table:{re.escape(program)} begin -->\n)(.*?)"
                      rf"(<!-- config-table:{re.escape(program)} end -->)", re.S)


def section(text, program):
    """The table the document carries for program, or None without markers."""
    m = pattern(program).search(text)
    return m.group(2) if m else None


def generated(binary):
    return subprocess.run([binary, "--dump-config-doc"], capture_output=True, text=True,
                          check=True).stdout


def main():
    bindir = sys.argv[1] if len(sys.argv) > 1 else "build"
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    for program in PROGRAMS:
        if section(text, program) is None:
            sys.exit(f"config_doc: {DOC} has no config-table:{program} markers")
        table = generated(os.path.join(bindir, program))
        text = pattern(program).sub(lambda m: m.group(1) + table + m.group(3), text)
    with open(DOC, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
