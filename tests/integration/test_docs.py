"""The documentation runs: every example of README.md and docs/*.md, in order, against
one daemon started as `make run` starts it (build/ofcd --demo, on a fresh store and a
free port), printing what the documents show.

An example is a code block (indented or fenced) holding `$ curl ...` commands, each
followed by the output it shows, or bare `curl ...` lines whose output is not shown
(they must then succeed and answer no error). `localhost:8470` is rewritten to the test
daemon; commands run with bash in a scratch directory holding a link to docs/, so
`docs/examples/...` files are found and files the examples write stay out of the tree, and
`build/ofcctl` (OFCCTL_BIN), which finds the test daemon in OFCCTL_URL. A command's output
is what it writes to standard output and standard error, in order.

Outputs compare up to what changes from run to run: times, uptimes, the Date header.
In a JSON output `...` stands for more members or elements, and "..." for any value;
in text, a line `...` for any lines. A header output (`curl -si`, `curl -sI`) shows the
status line and the headers that matter, which must all be there.

A block that cannot run here (installing, systemd, a stream that never ends, another
host) is preceded by `<!-- norun: why -->`; a block of shell commands left unmarked
fails the test, so nothing is silently skipped.

Run with OFCD_DOCS_DUMP=1 to print every command's actual output (to update a doc).
"""
import json
import os
import re
import shlex
import subprocess

import pytest

from conftest import OFCD_BIN, Daemon

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
OFCCTL_BIN = os.environ.get("OFCCTL_BIN", os.path.join(ROOT, "build/ofcctl"))
# The reader's path: the README, then the reference, then the rest; one daemon throughout.
DOCS = ["README.md", "docs/api.md", "docs/operations.md", "docs/architecture.md",
        "docs/cost-model.md"]
# The documents whose examples need more than one daemon (a cluster, Slurm): their commands
# are marked norun, their configuration examples are checked (test_config_examples_check).
ALL_DOCS = DOCS + ["docs/ha.md", "docs/slurm.md", "docs/drivers.md"]
# Words that start a shell command: a block with one must run, or say why not.
COMMANDS = {"curl", "build/ofcctl", "ofcctl", "make", "sudo", "sudoedit", "systemctl", "journalctl", "ovs-vsctl",
            "ovs-ofctl", "ofcd", "ofcd-agent", "sqlite3", "ibv_devinfo", "openssl",
            "promtool", "rm", "install", "^C", "sbatch", "srun", "scontrol", "cp", "etcdctl"}
# Members whose values change from run to run: only their type is compared.
VOLATILE = {"time", "created", "updated", "started", "ended", "heartbeat", "uptime_s", "at"}
MORE = "\u0001more"  # stands for `...`: more members or elements
ANY = "\u0001any"    # stands for a value `...`


class Block:
    def __init__(self, doc, line, lines, norun):
        self.doc, self.line, self.lines, self.norun = doc, line, lines, norun

    def where(self):
        return f"{self.doc}:{self.line}"


def blocks(doc):
    """The code blocks of a markdown file: fenced, or indented after a blank line."""
    text = open(os.path.join(ROOT, doc), encoding="utf-8").read().splitlines()
    out, i, norun, prev_blank = [], 0, None, True
    while i < len(text):
        line = text[i]
        m = re.match(r"\s*<!--\s*norun(?::\s*(.*?))?\s*-->", line)
        if m:
            norun = m.group(1) or "marked norun"
            i += 1
            continue
        if line.startswith("```"):
            start, body = i + 1, []
            i += 1
            while i < len(text) and not text[i].startswith("```"):
                body.append(text[i])
                i += 1
            out.append(Block(doc, start + 1, body, norun))
            norun, prev_blank = None, False
            i += 1
            continue
        if prev_blank and line.startswith("    ") and line.strip():
            start, body = i, []
            while i < len(text) and (text[i].startswith("    ") or not text[i].strip()):
                body.append(text[i][4:])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            out.append(Block(doc, start + 1, body, norun))
            norun, prev_blank = None, True
            continue
        if line.strip():
            norun = None if not line.lstrip().startswith("<!--") else norun
        prev_blank = not line.strip()
        i += 1
    return out


def complete(cmd):
    """True when cmd is a whole shell command: no trailing backslash, no open quote."""
    if cmd.endswith("\\"):
        return False
    try:
        shlex.split(cmd, comments=True)
        return True
    except ValueError:
        return False


def examples(block):
    """[(command, shown output or None)] of a block."""
    out, i, lines = [], 0, block.lines
    while i < len(lines):
        line = lines[i]
        prompt = line.startswith("$ ")
        if not (prompt or line.startswith("curl ")):
            i += 1
            continue
        cmd = line[2:] if prompt else line
        i += 1
        while not complete(cmd) and i < len(lines):
            nxt = lines[i].strip()
            if cmd.endswith("\\"):
                cmd = cmd[:-1].rstrip() + " " + nxt
            else:  # a quote still open: a JSON body over several lines
                cmd += "\n" + nxt
            i += 1
        shown = None
        if prompt:
            shown = []
            while i < len(lines) and not lines[i].startswith("$ "):
                shown.append(lines[i])
                i += 1
            while shown and not shown[-1].strip():
                shown.pop()
        out.append((cmd, shown))
    return out


def is_command_block(block):
    for line in block.lines:
        words = line.split()
        if words and (words[0] == "$" or words[0] in COMMANDS):
            return True
    return False


# ---- comparing outputs -------------------------------------------------------------

def pattern(text):
    """The shown JSON with `...` turned into markers, parsed."""
    out, stack, last, i, in_str = [], [], "", 0, False
    while i < len(text):
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str, last = False, '"'
            i += 1
            continue
        if text.startswith("...", i):
            if stack and stack[-1] == "{" and last in ("{", ","):
                out.append(json.dumps(MORE) + ": null")
            elif stack and stack[-1] == "{":
                out.append(json.dumps(ANY))
            else:
                out.append(json.dumps(MORE if stack else ANY))
            last = "v"
            i += 3
            continue
        if c == '"':
            in_str = True
        elif c in "{[":
            stack.append(c)
        elif c in "}]":
            stack.pop()
        if not c.isspace():
            last = c
        out.append(c)
        i += 1
    return json.loads("".join(out))


def match(want, got, path="$"):
    """None when got fits the pattern want, else where and why not."""
    if want == ANY or want == "...":
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return f"{path}: expected an object, got {json.dumps(got)[:80]}"
        more = MORE in want
        for k, v in want.items():
            if k == MORE:
                continue
            if k not in got:
                return f"{path}: no member {k!r}"
            if k in VOLATILE and type(v) is type(got[k]):
                continue
            why = match(v, got[k], f"{path}.{k}")
            if why:
                return why
        extra = set(got) - set(want)
        if extra and not more:
            return f"{path}: members not shown: {sorted(extra)}"
        return None
    if isinstance(want, list):
        if not isinstance(got, list):
            return f"{path}: expected an array, got {json.dumps(got)[:80]}"
        more = bool(want) and want[-1] == MORE
        items = want[:-1] if more else want
        if len(got) < len(items) or (not more and len(got) != len(items)):
            return f"{path}: {len(got)} elements, the doc shows {len(items)}{'+' if more else ''}"
        for n, (w, g) in enumerate(zip(items, got)):
            why = match(w, g, f"{path}[{n}]")
            if why:
                return why
        return None
    if type(want) is not type(got) and not (isinstance(want, (int, float)) and
                                            isinstance(got, (int, float))
                                            and not isinstance(got, bool)):
        return f"{path}: {json.dumps(got)} where the doc shows {json.dumps(want)}"
    if want != got:
        return f"{path}: {json.dumps(got)} where the doc shows {json.dumps(want)}"
    return None


def mask(line):
    line = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "TIME", line)
    return line


def match_text(shown, got):
    """Line by line; a shown `...` line stands for any lines."""
    got = [mask(l) for l in got]
    shown = [mask(l) for l in shown]

    def fit(s, g):
        if not s:
            return None if not g else f"lines not shown: {g[:3]}"
        if s[0].strip() == "...":
            for k in range(len(g) + 1):
                if fit(s[1:], g[k:]) is None:
                    return None
            return f"nothing after `...` fits: {s[1:3]}"
        if not g:
            return f"missing line: {s[0]!r}"
        if s[0] != g[0]:
            return f"{g[0]!r} where the doc shows {s[0]!r}"
        return fit(s[1:], g[1:])
    return fit(shown, got)


def match_body(shown, got):
    text = "\n".join(shown).strip()
    if text.startswith(("{", "[")):
        try:
            value = json.loads(got)
        except ValueError:
            return f"not JSON: {got[:200]!r}"
        joined = " ".join(l.strip() for l in shown)
        return match(pattern(joined), value)
    return match_text(shown, got.splitlines())


def match_output(shown, got):
    got = got.replace("\r\n", "\n")
    if not shown or not shown[0].startswith("HTTP/"):
        return match_body(shown, got)
    head, _, body = got.partition("\n\n")
    head = head.split("\n")
    i = 0
    while i < len(shown) and shown[i].strip() and not shown[i].startswith(("{", "[")):
        i += 1
    if shown[0] != head[0]:
        return f"status {head[0]!r} where the doc shows {shown[0]!r}"
    have = {h.split(":", 1)[0].lower(): h.split(":", 1)[1].strip() for h in head[1:] if ":" in h}
    for h in shown[1:i]:
        if h.strip() == "...":
            continue
        name, _, value = h.partition(":")
        if have.get(name.lower()) != value.strip():
            return f"header {name}: {have.get(name.lower())!r} where the doc shows {value.strip()!r}"
    rest = [l for l in shown[i:] if l.strip()]
    if not rest:
        return None if not body.strip() else f"a body the doc does not show: {body[:100]!r}"
    return match_body(rest, body)


# ---- running ---------------------------------------------------------------------------

def run(cmd, port, cwd):
    cmd = cmd.replace("localhost:8470", f"127.0.0.1:{port}")
    # ofcctl finds the test daemon, and no settings of the user running the tests.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFCCTL_")}
    env.update(OFCCTL_URL=f"http://127.0.0.1:{port}", HOME=str(cwd), XDG_CONFIG_HOME=str(cwd))
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=cwd, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    return p.returncode, p.stdout


def test_blocks_are_found():
    # The parser sees the examples it should: a check of the test itself.
    found = {doc: [b for b in blocks(doc) if examples(b)] for doc in DOCS}
    assert len(found["README.md"]) >= 2 and len(found["docs/api.md"]) >= 20
    cmds = [c for b in found["docs/api.md"] for c, _ in examples(b)]
    assert any("-d '{\"aggregation\": \"none\"" in c and "\n" in c for c in cmds)
    assert all(complete(c) for c in cmds)
    assert any(c.startswith("build/ofcctl ") for b in found["README.md"] for c, _ in examples(b))


def test_unmarked_command_blocks():
    bad = [b.where() for doc in ALL_DOCS for b in blocks(doc)
           if not b.norun and is_command_block(b) and not (doc in DOCS and examples(b))]
    assert not bad, f"shell commands that neither run nor say why not (<!-- norun: why -->): {bad}"


def test_docs_run(tmp_path):
    d = Daemon(tmp_path, args=("--demo",)).start()
    work = tmp_path / "work"
    work.mkdir()
    (work / "docs").symlink_to(os.path.join(ROOT, "docs"))
    (work / "build").mkdir()
    (work / "build" / "ofcctl").symlink_to(os.path.abspath(OFCCTL_BIN))
    dump = os.environ.get("OFCD_DOCS_DUMP")
    failures = []
    try:
        for doc in DOCS:
            for b in blocks(doc):
                if b.norun:
                    continue
                for cmd, shown in examples(b):
                    rc, out = run(cmd, d.port, work)
                    if dump:
                        print(f"\n=== {b.where()}\n$ {cmd}\n{out}")
                    if rc != 0:
                        failures.append(f"{b.where()}: `{cmd}` exited {rc}: {out.strip()}")
                        continue
                    if shown is None:
                        try:
                            v = json.loads(out) if out.strip().startswith("{") else None
                        except ValueError:
                            v = None
                        if isinstance(v, dict) and set(v) == {"error"}:
                            failures.append(f"{b.where()}: `{cmd}` answered {out.strip()}")
                        continue
                    why = match_output(shown, out)
                    if why:
                        failures.append(f"{b.where()}: `{cmd}`: {why}")
    finally:
        d.stop()
    assert not failures, "examples that do not run as shown:\n" + "\n".join(failures)


@pytest.mark.parametrize("shown,got,ok", [
    ('{"a":1,...}', '{"a":1,"b":2}', True),
    ('{"a":1}', '{"a":1,"b":2}', False),
    ('{"a":[1,...]}', '{"a":[1,2,3]}', True),
    ('{"a":[1]}', '{"a":[1,2]}', False),
    ('{"a":"...","b":...}', '{"a":"x","b":[1]}', True),
    ('{"time":"2026-01-01T00:00:00Z"}', '{"time":"2027-02-02T01:01:01.5Z"}', True),
    ('{"a":2}', '{"a":3}', False),
    ('{"a":{"b":1,...},...}', '{"a":{"b":1,"c":2},"d":4}', True),
])
def test_patterns(shown, got, ok):
    assert (match(pattern(shown), json.loads(got)) is None) == ok

SECRET = "doc-example-secret-0123456789abcdef"


def config_examples():
    """(where, text) of each block that is a piece of ofcd.ini: it names one of its sections."""
    sections = {"http", "store", "auth", "cluster", "reconcile", "log", "planner", "debug",
                "netconf"}
    for doc in ALL_DOCS:
        for b in blocks(doc):
            heads = {m.group(1) for m in (re.match(r"\[([a-z]+)\]\s*$", l) for l in b.lines) if m}
            if heads and heads <= sections:
                yield b.where(), "\n".join(b.lines) + "\n"


def test_config_examples_check(tmp_path):
    """A configuration example is one ofcd takes (a role that did not exist made it exit 1):
    `...` and SECRET-... placeholders stand for the operator's own secrets."""
    found = list(config_examples())
    assert len(found) >= 3, found
    for where, text in found:
        text = re.sub(r"(:|= *)(\.\.\.|SECRET[A-Z0-9-]*)", lambda m: m.group(1) + SECRET, text)
        path = tmp_path / "example.ini"
        path.write_text(text)
        p = subprocess.run([OFCD_BIN, "--check-config", "-c", str(path)], capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 0, f"{where}: {p.stdout}{p.stderr}\n{text}"

