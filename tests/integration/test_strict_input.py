"""Input that means nothing precise is refused, never guessed at."""
import pytest

from conftest import Daemon, error_of


@pytest.fixture
def demo(tmp_path):
    d = Daemon(tmp_path, args=["--demo"]).start()
    yield d
    d.stop()


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_names_are_refused(demo, name):
    r = demo.post("/v1/fabrics", {"name": name, "servers": ["srv0", "srv1"]})
    assert r.status_code == 400 and error_of(r)["field"] == "name", r.text
    r = demo.post("/v1/ocs", {"name": name, "ports": 8})
    assert r.status_code == 400, r.text
    r = demo.post("/v1/fabrics", {"name": "f", "servers": ["srv0", name]})
    assert r.status_code == 400 and error_of(r)["field"] == "servers[1]", r.text


@pytest.mark.parametrize("wait", ["0x10", " 5", "5 ", "+5", "-1", "1e1", "inf", "nan", "", ".", "61"])
def test_wait_takes_plain_seconds_only(demo, wait):
    r = demo.get("/v1/fabrics/none?wait=" + wait.replace(" ", "%20"))
    assert r.status_code == 400 and error_of(r)["field"] == "wait", (wait, r.text)


def test_wait_without_a_value_is_refused(demo):
    # "?wait" is given, not absent: a PUT that would not wait must not pass for one that does.
    r = demo.put("/v1/fabrics/y?wait", {"servers": ["srv0", "srv1"]})
    assert r.status_code == 400 and error_of(r)["field"] == "wait", r.text
    assert demo.get("/v1/fabrics/y").status_code == 404


def test_wait_accepts_plain_decimals(demo):
    demo.post("/v1/fabrics", {"name": "f", "servers": ["srv0", "srv1"]})
    for wait in ("0", "2", "0.5", "10."):
        assert demo.get("/v1/fabrics/f?wait=" + wait).status_code == 200, wait


def test_repeated_query_parameter_is_refused(demo):
    demo.post("/v1/fabrics", {"name": "f", "servers": ["srv0", "srv1"]})
    r = demo.get("/v1/fabrics/f?wait=1&wait=60")
    assert r.status_code == 400 and error_of(r)["field"] == "wait", r.text
    assert "more than once" in error_of(r)["message"]


@pytest.mark.parametrize("index", ["01", "+1", "00", "1x", " 1"])
def test_device_index_has_one_spelling(demo, index):
    r = demo.put("/v1/servers/srv0/devices/" + index.replace(" ", "%20"), {"state": "failed"})
    assert r.status_code == 404 and error_of(r)["field"] == "index", (index, r.text)
    assert demo.put("/v1/servers/srv0/devices/0", {"state": "ok"}).status_code == 200


@pytest.mark.parametrize("query, field", [
    ("limit=+5", "limit"), ("limit=%205", "limit"), ("limit=05", "limit"),
    ("before=99999999999999999999", "before"), ("before=-1", "before"), ("before=0x10", "before"),
])
def test_numbers_in_queries_have_one_spelling(demo, query, field):
    r = demo.get("/v1/operations?" + query)
    assert r.status_code == 400 and error_of(r)["field"] == field, (query, r.text)


@pytest.mark.parametrize("op", ["01", "+1", "1x", "99999999999999999999"])
def test_operation_id_has_one_spelling(demo, op):
    r = demo.get("/v1/operations/" + op)
    assert r.status_code == 404 and error_of(r)["field"] == "id", (op, r.text)


def test_null_is_not_absent(demo):
    r = demo.post("/v1/ocs", {"name": "x", "ports": 8, "driver": None})
    assert r.status_code == 400 and error_of(r)["field"] == "driver", r.text
    r = demo.post("/v1/servers", {"name": "x", "devices": 8, "p2p": None})
    assert r.status_code == 400 and error_of(r)["field"] == "p2p", r.text
    # Where a reply shows null as "none", it is taken back.
    assert demo.post("/v1/servers", {"name": "y", "devices": 8, "switch": None}).status_code == 201
    topo = demo.get("/v1/topology").json()
    assert demo.put("/v1/topology", topo).status_code == 200
