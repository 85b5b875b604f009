"""What operators alert on, from /metrics: units connected and in sync, fabrics per
state, build info, process metrics, counters from 0, streams outside the latency
histogram; the output passes promtool check metrics."""
import os
import re
import subprocess
import time

import requests

from test_topology import make_cluster


def samples(d):
    """{(name, labels): value} of every sample line."""
    out = {}
    for line in d.get("/metrics").text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})? (\S+)", line)
        assert m, line
        out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def test_promtool_accepts_the_metrics(daemon):
    make_cluster(daemon, servers=3)
    daemon.put("/v1/fabrics/f?wait=10", {"servers": ["srv0", "srv1", "srv2"]})
    text = daemon.get("/metrics").text
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_counters_from_zero_and_process_metrics(daemon):
    s = samples(daemon)
    # Every counter api.md names is there from the start (but a cluster member's own, and
    # the per-unit ones of a daemon with no unit yet).
    with open(os.path.join(os.path.dirname(__file__), "../../docs/api.md")) as f:
        documented = set(re.findall(r"ofcd_[a-z_]+_total", f.read()))
    shown = {name for name, _ in s}
    assert not {c for c in documented - shown if not c.startswith(("ofcd_cluster_", "ofcd_ocs_"))}
    for key in (("ofcd_drift_repairs_total", ""), ("ofcd_isolation_violations_total", ""),
                ("ofcd_reconcile_audit_mismatches_total", ""), ("ofcd_http_warnings_total", ""),
                ("ofcd_http_deadline_cuts_total", 'phase="header"'),
                ("ofcd_reconcile_batches_total", 'result="succeeded"'),
                ("ofcd_reconcile_batches_total", 'result="failed"')):
        assert s[key] == 0, key
    version = daemon.get("/v1/health").json()["version"]
    assert s[("ofcd_build_info", f'version="{version}"')] == 1
    assert abs(s[("process_start_time_seconds", "")] - time.time()) < 120
    assert s[("process_cpu_seconds_total", "")] >= 0
    assert s[("process_resident_memory_bytes", "")] > 1 << 20
    assert s[("process_virtual_memory_bytes", "")] >= s[("process_resident_memory_bytes", "")]
    assert 3 < s[("process_open_fds", "")] < s[("process_max_fds", "")]
    for state in ("pending", "applying", "applied", "degraded", "failed"):
        assert s[("ofcd_fabrics", f'state="{state}"')] == 0


def test_units_and_fabrics(daemon):
    make_cluster(daemon, servers=4)
    # A unit nobody answers for: never connected, never in sync.
    assert daemon.put("/v1/ocs/far", {"driver": "openflow", "ports": 8,
                                      "endpoint": "tcp:127.0.0.1:9"}).status_code == 201
    daemon.put("/v1/fabrics/a?wait=10", {"servers": ["srv0", "srv1"]})
    daemon.put("/v1/fabrics/b?wait=10", {"servers": ["srv2", "srv3"]})
    s = samples(daemon)
    assert s[("ofcd_ocs_connected", 'ocs="ocs0"')] == 1
    assert s[("ofcd_ocs_in_sync", 'ocs="ocs0"')] == 1
    assert s[("ofcd_ocs_connected", 'ocs="far"')] == 0
    assert s[("ofcd_ocs_in_sync", 'ocs="far"')] == 0
    assert s[("ofcd_ocs_connection_downs_total", 'ocs="ocs0",reason="other"')] == 0
    assert sum(v for (name, label), v in s.items()
               if name == "ofcd_ocs_connection_downs_total" and 'ocs="far"' in label) >= 1
    assert s[("ofcd_fabrics", 'state="applied"')] == 2
    assert s[("ofcd_reconcile_batches_total", 'result="succeeded"')] >= 1
    # A deleted unit leaves the gauges.
    assert daemon.delete("/v1/ocs/far?force=true").status_code == 200
    s = samples(daemon)
    assert ("ofcd_ocs_connected", 'ocs="far"') not in s
    daemon.delete("/v1/fabrics/a?wait=10")
    assert samples(daemon)[("ofcd_fabrics", 'state="applied"')] == 1


def test_streams_stay_out_of_the_latency_histogram(daemon):
    with requests.get(daemon.url("/v1/events"), stream=True, timeout=5) as r:
        assert r.status_code == 200
        next(r.iter_lines())
    # The daemon notices the client left when its writes fail: give it events.
    done = 'ofcd_http_requests_total{route="/v1/events",method="GET",status="200"} 1'
    for i in range(50):
        daemon.put(f"/v1/ocs/u{i}", {"ports": 4})
        text = daemon.get("/metrics").text
        if done in text:
            break
        time.sleep(0.05)
    assert done in text
    assert 'ofcd_http_request_duration_seconds_count{route="/v1/events"}' not in text
    assert 'ofcd_http_request_duration_seconds_count{route="/v1/health"}' in text


def test_alert_rules_check(tmp_path):
    # Also in make check-alerts; here so a run of the integration tests alone sees it.
    root = __file__.rsplit("/tests/", 1)[0]
    r = subprocess.run(["promtool", "check", "rules",
                        f"{root}/packaging/prometheus/ofcd-alerts.yml"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(["promtool", "test", "rules", "ofcd-alerts.test.yml"],
                       cwd=f"{root}/tests/prometheus", capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
