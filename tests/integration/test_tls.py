"""HTTPS: the daemon serves TLS with a certificate made here (openssl), the host agent
reports over it (its measured runs too) and checks the certificate, and bearer tokens never
cross a non-loopback plain-HTTP listener unless the configuration says so, at start and on
reload."""
import json
import os
import re
import signal
import subprocess
import time

import pytest
import requests

from conftest import ADMIN, OFCD_AGENT_BIN, OFCD_BIN, Daemon
from test_agent import AGENT_TOKENS, Agent, cluster, device_state, run_json, wait_for

OFCCTL_BIN = os.path.abspath(os.environ.get(
    "OFCCTL_BIN", os.path.join(os.path.dirname(__file__), "../../build/ofcctl")))


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a server certificate it signs for 127.0.0.1 and localhost, and another CA."""
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                f"/CN=ofcd test {ca}", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout",
            "server.key", "-out", "server.csr", cwd=d)
    (d / "san.ext").write_text("subjectAltName = IP:127.0.0.1, DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.pem", cwd=d)
    return d


def tls_lines(pki):
    return f"tls_cert = {pki / 'server.pem'}\ntls_key = {pki / 'server.key'}\n"


def with_http(d, lines):
    d.config.write_text(d.config.read_text().replace("[http]\n", "[http]\n" + lines))
    return d


class TlsDaemon(Daemon):
    """The fixtures' daemon, spoken to over HTTPS and checked against the test CA."""

    def __init__(self, tmp_path, pki, **kw):
        super().__init__(tmp_path, **kw)
        with_http(self, tls_lines(pki))
        self.ca = str(pki / "ca.pem")
        self.trust_ca()

    def trust_ca(self):
        # Only the test CA: REQUESTS_CA_BUNDLE in the environment would win otherwise.
        self.session.trust_env = False
        self.session.verify = self.ca

    def url(self, path):
        return f"https://127.0.0.1:{self.port}{path}"

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ofcd exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if requests.get(self.url("/v1/health"), verify=self.ca, timeout=5).ok:
                    return
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.02)
        raise RuntimeError("ofcd did not become ready:\n" + self.log())

    def stop(self, sig=signal.SIGTERM, timeout=15):
        rc = super().stop(sig, timeout)
        self.trust_ca()
        return rc


def test_https(tmp_path, pki):
    d = TlsDaemon(tmp_path, pki, tokens=True).start()
    try:
        assert "(HTTPS)" in d.log()
        r = d.get("/v1/health")
        assert r.status_code == 200 and r.json()["status"] == "ok"
        assert d.post("/v1/ocs", {"name": "u", "ports": 4}).status_code == 201
        # Checked against the CA that signed it, by name or address.
        r = requests.get(f"https://localhost:{d.port}/v1/ocs/u", verify=d.ca,
                         headers={"Authorization": f"Bearer {ADMIN}"})
        assert r.status_code == 200 and r.headers["ETag"] == '"1"'
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(d.url("/v1/health"), verify=str(pki / "other-ca.pem"))
        # Plain HTTP gets no answer on the TLS port.
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{d.port}/v1/health", timeout=3)
        # A reload cannot take a new certificate: it says a restart is needed.
        (pki / "server.pem").touch()
        time.sleep(1.1)
        (pki / "server.pem").touch()
        d.send_signal(signal.SIGHUP)
        wait_for(lambda: "restart it to serve the new one" in d.log(), timeout=5)
        assert d.get("/v1/health").status_code == 200
    finally:
        assert d.stop() == 0


def test_bad_certificate_files_stop_the_start(tmp_path, pki):
    d = Daemon(tmp_path)
    with_http(d, f"tls_cert = {tmp_path / 'missing.pem'}\ntls_key = {pki / 'server.key'}\n")
    p = subprocess.run([OFCD_BIN, "-c", str(d.config)], capture_output=True, text=True, timeout=10)
    assert p.returncode == 1 and "tls_cert" in p.stderr and "missing.pem" in p.stderr
    # A key that is not the certificate's.
    d.write_config()
    with_http(d, f"tls_cert = {pki / 'server.pem'}\ntls_key = {pki / 'ca.key'}\n")
    p = subprocess.run([OFCD_BIN, "-c", str(d.config)], capture_output=True, text=True, timeout=10)
    assert p.returncode == 1 and "tls_cert and tls_key" in p.stderr
    # One without the other.
    d.write_config()
    with_http(d, f"tls_cert = {pki / 'server.pem'}\n")
    p = subprocess.run([OFCD_BIN, "-c", str(d.config), "--check-config"], capture_output=True,
                       text=True)
    assert p.returncode == 1 and "tls_cert is set without tls_key" in p.stderr


def test_tokens_refused_on_plain_public_listener(tmp_path, pki):
    d = Daemon(tmp_path, tokens=True, listen_host="0.0.0.0")
    check = lambda: subprocess.run([OFCD_BIN, "-c", str(d.config), "--check-config"],
                                   capture_output=True, text=True)
    p = check()
    assert p.returncode == 1 and "would cross the network in clear" in p.stderr
    assert "allow_plaintext_tokens" in p.stderr
    with_http(d, tls_lines(pki))
    assert check().returncode == 0
    d.write_config(tokens=True, listen_host="0.0.0.0")
    with_http(d, "allow_plaintext_tokens = true\n")
    assert check().returncode == 0
    # Running so; a reload that drops the permission keeps the running configuration.
    d.start()
    try:
        d.config.write_text(d.config.read_text().replace("allow_plaintext_tokens = true\n", ""))
        d.send_signal(signal.SIGHUP)
        wait_for(lambda: "would cross the network in clear" in d.log(), timeout=5)
        assert "keeping the running configuration" in d.log()
        assert d.get("/v1/ocs").status_code == 200
    finally:
        assert d.stop() == 0


def test_agent_over_https(tmp_path, pki):
    ctl = TlsDaemon(tmp_path, pki, tokens=True, extra=AGENT_TOKENS).start()
    a = None
    try:
        cluster(ctl)
        runs = tmp_path / "runs"
        runs.mkdir()
        (runs / "r.json").write_text(json.dumps({"runs": [run_json()]}))
        a = Agent(tmp_path, ctl, events="3000 mlx5_1 1 port_err\n", runs_dir=runs)
        a.config.write_text(a.config.read_text().replace(
            f"controller = http://127.0.0.1:{ctl.port}",
            f"controller = https://127.0.0.1:{ctl.port}\nca_file = {pki / 'ca.pem'}"))
        a.start()
        wait_for(lambda: ctl.get("/v1/servers/srv0").json()["inventory"])
        # Measured runs go over a TLS connection of their own.
        wait_for(lambda: os.listdir(runs / "done") == ["r.json"])
        assert ctl.get("/v1/cost/runs").json()["total"] == 1
        # A restart of the controller: the agent connects again over a new TLS session.
        assert ctl.stop() == 0
        time.sleep(3.5)
        ctl.start()
        wait_for(lambda: device_state(ctl, "srv0", 1) == "failed", timeout=10)
        # Logged when the agent reads the controller's answer, which may come after the
        # controller already shows the state.
        wait_for(lambda: "reachable again" in a.log(), timeout=10)
        assert a.stop() == 0
    finally:
        if a:
            a.stop(sig=signal.SIGKILL)
        ctl.stop(sig=signal.SIGKILL)


def test_agent_checks_the_certificate(tmp_path, pki):
    ctl = TlsDaemon(tmp_path, pki, tokens=True, extra=AGENT_TOKENS).start()
    a = None
    try:
        cluster(ctl)
        runs = tmp_path / "runs"
        runs.mkdir()
        (runs / "r.json").write_text(json.dumps({"runs": [run_json()]}))
        a = Agent(tmp_path, ctl, runs_dir=runs)
        a.config.write_text(a.config.read_text().replace(
            f"controller = http://127.0.0.1:{ctl.port}",
            f"controller = https://127.0.0.1:{ctl.port}\nca_file = {pki / 'other-ca.pem'}"))
        a.start()
        wait_for(lambda: "runs file r.json not sent (TLS" in a.log(), timeout=5)
        assert "TLS: the controller's certificate" in a.log()
        assert "runs file r.json not sent (TLS: the controller's certificate" in a.log()
        assert ctl.get("/v1/servers/srv0").json()["inventory"] is None
        assert sorted(os.listdir(runs)) == ["done", "r.json", "rejected"]
    finally:
        if a:
            a.stop(sig=signal.SIGKILL)
        ctl.stop(sig=signal.SIGKILL)


def test_agent_tls_configuration(tmp_path):
    cfg = tmp_path / "a.ini"
    base = "[agent]\nserver = srv0\ndevice.0 = mlx5_0:1\n"
    cfg.write_text(base + "controller = http://127.0.0.1:1\nca_file = /etc/ssl/x.pem\n")
    r = subprocess.run([OFCD_AGENT_BIN, "-c", str(cfg), "--check-config"], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "ca_file needs an https:// controller" in r.stderr
    cfg.write_text(base + "controller = https://[::1]:8470\n")
    r = subprocess.run([OFCD_AGENT_BIN, "-c", str(cfg), "--check-config"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    cfg.write_text(base + "controller = ftp://h:1\n")
    r = subprocess.run([OFCD_AGENT_BIN, "-c", str(cfg), "--check-config"], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "https://HOST:PORT" in r.stderr


def negotiated(port, *args):
    """The cipher suite openssl s_client agrees on with the daemon, or None. The client
    offers everything (security level 0), so a refusal is the server's."""
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", *args],
                       input="", capture_output=True, text=True, timeout=20)
    m = re.search(r"Cipher is (\S+)", p.stdout)
    return None if not m or m.group(1) == "(NONE)" else m.group(1)


OLD = ("-cipher", "DEFAULT@SECLEVEL=0")
CBC = ("-tls1_2", "-cipher", "ECDHE-RSA-AES128-SHA256:ECDHE-RSA-AES128-SHA:AES128-SHA@SECLEVEL=0")


def test_tls_12_and_aead_only_by_default(tmp_path, pki):
    for sub in ("default", "normal"):
        (tmp_path / sub).mkdir()
    d = TlsDaemon(tmp_path / "default", pki).start()
    try:
        assert negotiated(d.port, "-tls1", *OLD) is None
        assert negotiated(d.port, "-tls1_1", *OLD) is None
        assert negotiated(d.port, *CBC) is None
        assert "GCM" in negotiated(d.port, "-tls1_2")
        assert negotiated(d.port, "-tls1_3") in ("TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256",
                                                 "TLS_CHACHA20_POLY1305_SHA256")
        assert d.get("/v1/health").status_code == 200
    finally:
        assert d.stop() == 0
    # The same client gets TLS 1.0 and CBC where the priorities allow them: the refusals
    # above are the server's.
    old = with_http(TlsDaemon(tmp_path / "normal", pki), "tls_priorities = NORMAL\n").start()
    try:
        assert negotiated(old.port, "-tls1", *OLD) is not None
        assert negotiated(old.port, *CBC) is not None
    finally:
        assert old.stop() == 0


def test_bad_tls_priorities_stop_the_start(tmp_path, pki):
    d = with_http(TlsDaemon(tmp_path, pki), "tls_priorities = NORMAL:+NO-SUCH-THING\n")
    d.start(wait=False)
    assert d.proc.wait(timeout=10) != 0
    assert "tls_priorities a GnuTLS priority string" in d.log()


def test_ofcctl_checks_the_daemon_against_the_ca_it_is_given(tmp_path, pki):
    """ofcctl trusts the system's CAs unless told another (--cacert, OFCCTL_CACERT, curl's
    CURL_CA_BUNDLE and SSL_CERT_FILE, cacert in its file); --insecure checks nothing."""
    (tmp_path / "d").mkdir()
    d = TlsDaemon(tmp_path / "d", pki).start()
    ca, other = str(pki / "ca.pem"), str(pki / "other-ca.pem")
    home = tmp_path / "home"
    home.mkdir()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("OFCCTL") and k not in ("SSL_CERT_FILE", "CURL_CA_BUNDLE")}
    base.update(HOME=str(home), XDG_CONFIG_HOME=str(home))

    def health(*args, **env):
        return subprocess.run([OFCCTL_BIN, "--url", d.url(""), *args, "health"],
                              env=dict(base, **env), capture_output=True, text=True, timeout=20)

    try:
        p = health()
        assert p.returncode == 4 and "certificate" in p.stderr, p.stderr
        assert health("--cacert", ca).returncode == 0
        assert health("--cacert", other).returncode == 4
        assert health(OFCCTL_CACERT=ca).returncode == 0
        assert health(CURL_CA_BUNDLE=ca).returncode == 0
        assert health(SSL_CERT_FILE=ca).returncode == 0
        # The option wins over the environment.
        assert health("--cacert", ca, OFCCTL_CACERT=other).returncode == 0
        assert health("--insecure").returncode == 0 and health("-k").returncode == 0
        assert health(OFCCTL_INSECURE="1").returncode == 0
        (home / "ofcctl.ini").write_text(f"[ofcctl]\ncacert = {ca}\n")
        assert health().returncode == 0
        (home / "ofcctl.ini").write_text("[ofcctl]\ninsecure = maybe\n")
        p = health()
        assert p.returncode == 2 and "insecure: true or false" in p.stderr
    finally:
        assert d.stop() == 0
