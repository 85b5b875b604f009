"""High availability (docs/ha.md): what of it exists today, tested against the real daemon."""

from conftest import Daemon


def test_cluster_section_refused_until_clustering_exists(tmp_path):
    # A member that ran alone would split the fabric's state: it must not start.
    d = Daemon(tmp_path, extra="[cluster]\netcd = http://127.0.0.1:2379\nname = a\n"
                               "advertise = http://127.0.0.1:8470\n")
    d.start(wait=False)
    assert d.proc.wait(timeout=10) != 0
    assert "clustering is not available" in d.log()


def test_cluster_section_checked(tmp_path):
    d = Daemon(tmp_path, extra="[cluster]\netcd = http://127.0.0.1:2379\n")
    d.start(wait=False)
    assert d.proc.wait(timeout=10) != 0
    assert "[cluster] etcd needs [cluster] name and advertise" in d.log()
