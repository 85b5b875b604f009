"""tools/check_deps.py on small trees of its own: each rule fires, naming the rule and the
symbol or header, and a tree that keeps the rules passes."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../tools"))
import check_deps  # noqa: E402


def tree(tmp_path, files):
    """Writes files {path: text} under tmp_path/src and compiles every .c into tmp_path/obj."""
    src, obj = tmp_path / "src", tmp_path / "obj"
    for rel, text in files.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for rel in files:
        if rel.endswith(".c"):
            o = obj / (rel[:-2] + ".o")
            o.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cc", "-c", "-I", str(src / "daemon"), "-I", str(src / "common"),
                            "-o", str(o), str(src / rel)], check=True)
    return check_deps.check(str(obj), str(src))


CLEAN = {
    "common/log.h": "void log_line(const char *s);\n",
    "common/log.c": '#include "log.h"\nvoid log_line(const char *s) { (void)s; }\n',
    "daemon/state/store.h": "int store_begin(void);\n",
    "daemon/state/store.c": '#include "store.h"\n#include "log.h"\n'
                            'int store_begin(void) { log_line("b"); return 0; }\n',
    "daemon/domain/topo.h": "int topo_get(void);\n",
    "daemon/domain/topo.c": '#include "topo.h"\n#include "state/store.h"\n'
                            "int topo_get(void) { return store_begin(); }\n",
    "daemon/api/api.h": "int api_query(void);\n",
    "daemon/api/api.c": '#include "api.h"\n#include "domain/topo.h"\n'
                        "int api_query(void) { return topo_get(); }\n",
}


def test_a_tree_that_keeps_the_rules_passes(tmp_path):
    failures, summary = tree(tmp_path, CLEAN)
    assert failures == []
    assert "0 problem(s)" in summary


def test_a_call_up_a_room_is_named_with_its_symbol(tmp_path):
    files = dict(CLEAN)
    files["daemon/domain/topo.c"] = ('#include "topo.h"\n#include "api/api.h"\n'
                                     "int topo_get(void) { return 0; }\n"
                                     "int topo_peek(void) { return api_query(); }\n")
    failures, _ = tree(tmp_path, files)
    calls = [f for f in failures if "calls" in f]
    assert calls == ["rule daemon/domain -> daemon/api: daemon/domain/topo.c calls api_query() "
                     "of daemon/api/api.c (daemon/domain may use: common, daemon/base, "
                     "daemon/state, ocs_drivers, planner)"]
    # The include that let it compile is named too.
    assert any('daemon/domain/topo.c includes "api/api.h"' in f for f in failures)


def test_an_include_against_the_rules_fails_without_a_call(tmp_path):
    files = dict(CLEAN)
    files["daemon/cluster/ha.h"] = '#include "api/api.h"\nint ha_gate(void);\n'
    failures, _ = tree(tmp_path, files)
    assert failures == ['rule daemon/cluster -> daemon/api: daemon/cluster/ha.h includes '
                        '"api/api.h" (daemon/cluster may use: common, daemon/base, daemon/state)']


def test_sql_outside_domain_and_state_is_found_through_headers(tmp_path):
    files = dict(CLEAN)
    files["daemon/state/store_sql.h"] = "#include <sqlite3.h>\n"
    files["daemon/reconcile/rows.c"] = ('#include "state/store_sql.h"\n'
                                        "int reconcile_rows(void) { return 0; }\n")
    failures, _ = tree(tmp_path, files)
    assert failures == ["rule SQL only in daemon/domain and daemon/state: "
                        "daemon/reconcile/rows.c -> daemon/state/store_sql.h -> sqlite3.h"]


def test_a_link_cycle_inside_a_room_fails(tmp_path):
    files = dict(CLEAN)
    files["daemon/state/a.c"] = "int b_fn(void);\nint a_fn(void) { return b_fn(); }\n"
    files["daemon/state/b.c"] = "int a_fn(void);\nint b_fn(void) { return a_fn(); }\n"
    failures, _ = tree(tmp_path, files)
    assert failures == ["link cycle: daemon/state/a <-> daemon/state/b"]

