"""A real NETCONF server for the netconf driver's tests: yuma123's netconfd behind OpenSSH's sshd.

Each Server is private: its own directory (keys, known_hosts, sshd_config, netconfd's
HOME and log), its own loopback port, and its own netconfd socket (netconfd's
--ncxserver-sockname and netconf-subsystem's PORT@PATH form of it), so several run
side by side and none touches /tmp/ncxserver.sock. netconfd loads ofcd's YANG module
(ocs_drivers/yang/ofcd-optical-switch.yang) with --target=running and --no-startup:
a restart comes back empty, as a unit that lost its configuration would.
Processes are stopped by their pid. OFCD_NETCONFD_LOG=debug makes netconfd log every message.

yang_dir is the driver's [netconf] yang_dir, seeded with the modules netconfd ships (as an
operator installs a vendor's modules): netconfd 2.13 answers a second <get-schema> of
ietf-netconf with an error and aborts on the third, so the client must not fetch what it
can read (libnetconf2 also caches there what it does fetch).
"""
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time

from conftest import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
YANG = os.path.join(HERE, "../../ocs_drivers/yang/ofcd-optical-switch.yang")
NS = "urn:ofcd:yang:optical-switch"
SSHD = "/usr/sbin/sshd"
NETCONFD = "/usr/sbin/netconfd"
SUBSYSTEM = "/usr/sbin/netconf-subsystem"
PYTHON = "/usr/bin/python3"  # the Debian python that has python3-ncclient


def unavailable():
    """Why these tests cannot run here, or None."""
    for path in (SSHD, NETCONFD, SUBSYSTEM, "/usr/bin/ssh-keygen"):
        if not os.access(path, os.X_OK):
            return f"{path} missing (packaging/deps.sh installs openssh-server and netconfd)"
    if importlib.util.find_spec("ncclient") is None:
        return "python3-ncclient missing"
    if os.geteuid() != 0:
        return "sshd's privilege separation needs root"
    return None


def keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


class Server:
    """sshd + netconfd on 127.0.0.1:port, the netconf subsystem reaching this netconfd alone."""

    def __init__(self, root, user="root", target="running", subsystem=None):
        self.dir = root
        # the netconf subsystem sshd runs: netconfd's, unless a test brings its own server
        self.subsystem = subsystem
        self.target = target  # netconfd's --target: running, or candidate (edits need a commit)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.user = user
        self.sock = os.path.join(self.dir, "ncx.sock")
        self.hostkey = os.path.join(self.dir, "hostkey")
        self.client_key = os.path.join(self.dir, "client_key")
        self.known_hosts = os.path.join(self.dir, "known_hosts")
        self.yang_dir = os.path.join(self.dir, "yang")
        os.makedirs(self.yang_dir, exist_ok=True)
        for top, _, files in os.walk("/usr/share/yuma/modules"):
            for f in files:
                if f.endswith(".yang"):
                    shutil.copy(os.path.join(top, f), self.yang_dir)
        shutil.copy(YANG, self.yang_dir)
        keygen(self.hostkey)
        keygen(self.client_key)
        with open(os.path.join(self.dir, "authorized_keys"), "w") as f:
            f.write(open(self.client_key + ".pub").read())
        os.chmod(os.path.join(self.dir, "authorized_keys"), 0o600)
        pub = open(self.hostkey + ".pub").read().split()
        with open(self.known_hosts, "w") as f:
            f.write(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        self.sshd = None
        self.netconfd = None

    @property
    def endpoint(self):
        return f"netconf://{self.user}@127.0.0.1:{self.port}"

    def start(self):
        if not self.subsystem:
            self.start_netconfd()
        self.start_sshd()
        return self

    def start_sshd(self):
        os.makedirs("/run/sshd", exist_ok=True)
        conf = os.path.join(self.dir, "sshd_config")
        with open(conf, "w") as f:
            f.write(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.hostkey}
PidFile {self.dir}/sshd.pid
AuthorizedKeysFile {self.dir}/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
MaxStartups 50
Subsystem netconf {self.subsystem or f"{SUBSYSTEM} --ncxserver-sockname={self.port}@{self.sock}"}
""")
        # -D: stays in the foreground, so its pid is ours to stop
        self.sshd = subprocess.Popen([SSHD, "-D", "-f", conf, "-E", os.path.join(self.dir, "sshd.log")])
        self._wait(lambda: self._accepts(), "sshd")

    def start_netconfd(self):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        home = os.path.join(self.dir, "home")
        os.makedirs(home, exist_ok=True)
        env = dict(os.environ, HOME=home)
        self.netconfd = subprocess.Popen(
            [NETCONFD, f"--module={YANG}", f"--target={self.target}", f"--port={self.port}",
             "--no-startup",
             f"--ncxserver-sockname={self.sock}", f"--superuser={self.user}",
             f"--log={self.dir}/netconfd.log",
             f"--log-level={os.environ.get('OFCD_NETCONFD_LOG', 'warn')}"],
            # in candidate mode it writes backup-cfg.xml into its working directory
            env=env, cwd=self.dir, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, "netconfd.err"), "ab"))
        self._wait(lambda: os.path.exists(self.sock), "netconfd")

    def _accepts(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def _wait(self, cond, what, timeout=15):
        deadline = time.monotonic() + timeout
        while not cond():
            for p in (self.sshd, self.netconfd):
                if p is not None and p.poll() is not None:
                    raise RuntimeError(f"{what} exited with {p.returncode}; see {self.dir}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start within {timeout} s; see {self.dir}")
            time.sleep(0.05)

    @staticmethod
    def _stop(p, sig=signal.SIGTERM):
        if p is None or p.poll() is not None:
            return
        p.send_signal(sig)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def kill_netconfd(self):
        self._stop(self.netconfd, signal.SIGKILL)
        self.netconfd = None

    def stop(self):
        self._stop(self.sshd)
        self._stop(self.netconfd)
        self.sshd = self.netconfd = None

    def close(self, keep=False):
        self.stop()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- a second client, as an operator's session would be ---------------------------

    def connect(self):
        from ncclient import manager
        return manager.connect(host="127.0.0.1", port=self.port, username=self.user,
                               key_filename=self.client_key, hostkey_verify=False,
                               allow_agent=False, look_for_keys=False, timeout=30)

    def pairs(self, m=None):
        """{ingress: egress} of the running datastore, read with get-config."""
        from lxml import etree
        own = m is None
        m = m or self.connect()
        try:
            reply = m.get_config("running", filter=("subtree", f'<cross-connects xmlns="{NS}"/>'))
            root = etree.fromstring(reply.data_xml.encode())
            out = {}
            for p in root.iter(f"{{{NS}}}pair"):
                out[int(p.findtext(f"{{{NS}}}ingress"))] = int(p.findtext(f"{{{NS}}}egress"))
            return out
        finally:
            if own:
                m.close_session()

    def edit(self, xml, m=None):
        own = m is None
        m = m or self.connect()
        config = f'<config xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">{xml}</config>'
        try:
            if self.target == "running":
                return m.edit_config(target="running", config=config)
            # as a careful operator: the candidate locked, edited, committed, unlocked; a lock
            # someone else holds for a moment is tried again
            from ncclient.operations.rpc import RPCError
            deadline = time.monotonic() + 30
            while True:
                try:
                    m.lock("candidate")
                    break
                except RPCError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            try:
                m.edit_config(target="candidate", config=config)
                return m.commit()
            except RPCError:
                m.discard_changes()
                raise
            finally:
                m.unlock("candidate")
        finally:
            if own:
                m.close_session()

    def add_pair(self, ingress, egress, m=None):
        return self.edit(f'<cross-connects xmlns="{NS}"><pair><ingress>{ingress}</ingress>'
                  f'<egress>{egress}</egress></pair></cross-connects>', m=m)

    def sessions(self, m):
        """How many NETCONF sessions the server has open (ietf-netconf-monitoring)."""
        from lxml import etree
        mon = "urn:ietf:params:xml:ns:yang:ietf-netconf-monitoring"
        reply = m.get(filter=("subtree", f'<netconf-state xmlns="{mon}"><sessions/></netconf-state>'))
        return len(list(etree.fromstring(reply.data_xml.encode()).iter(f"{{{mon}}}session")))

    def remove_pair(self, ingress):
        return self.edit(f'<cross-connects xmlns="{NS}" xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0">'
                  f'<pair nc:operation="remove"><ingress>{ingress}</ingress></pair></cross-connects>')

    def set_ports(self, ports, status):
        self.edit(f'<ports xmlns="{NS}">' + "".join(
            f'<port><port-id>{p}</port-id><admin-status>{status}</admin-status></port>'
            for p in ports) + '</ports>')
