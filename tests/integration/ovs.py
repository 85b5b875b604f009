"""A real Open vSwitch lab for integration tests and benchmarks.

    lab = Lab().start()                      # ovsdb-server + ovs-vswitchd in a lab netns
    lab.add_bridge("ocs0", controller="tcp:127.0.0.1:6653")
    hosts = lab.add_hosts([("s0d0", "ocs0", 1), ("s1d0", "ocs0", 2)])
    lab.enter()                              # this thread (and what it starts) joins the lab
    ...                                      # start ofcd, talk to it on 127.0.0.1
    lab.reachability([(a, b) ...])           # ping matrix, in parallel
    lab.close()                              # everything above, by pid and by name

Everything lives in network namespaces this module creates, none in the host's:

- the *lab* namespace `ofcdlab<pid>x<n>` holds ovsdb-server and ovs-vswitchd (the
  userspace `netdev` datapath, so no kernel module is needed), the tap devices OVS makes
  for its bridges (including the datapath's `ovs-netdev`, a fixed name: two netdev
  datapaths in one namespace collide on it, so without the lab namespace two test runs
  could not share a machine), the OCS-side ends of the hosts' veths, and its own
  loopback. The controller connection runs on that loopback: a test enters the lab
  namespace (`enter()`: setns of the calling thread) before it starts ofcd, so ofcd, its
  REST port and OVS's controller ports never clash with anything else on the machine.
- one namespace per *host* (a server's device) `<lab>-<host>`, with `eth0`, the peer of
  a veth whose other end is an OCS port of a bridge with an explicit `ofport_request`,
  and an address from 198.18.0.0/16 (RFC 2544's benchmarking range; the traffic never
  leaves the lab's namespaces).

Bridges: datapath_type=netdev, fail_mode=secure (no flows, no forwarding, even without a
controller), protocols=OpenFlow13, in-band control off. ovs-vsctl and ovs-ofctl reach the
daemons through unix sockets in the lab's temp dir (OVS_RUNDIR), never a system OVS.

close() stops the daemons by pidfile, kills what is left in the lab's namespaces by pid
and deletes the namespaces, which destroys every device made in them; it runs from
atexit too. Labs left by a process that died (SIGKILL) are removed by the next start().
"""
import atexit
import collections
import json
import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
TOOLS = ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl", "ip", "ping", "nsenter")
PREFIX = "ofcdlab"
NETNS_DIR = "/run/netns"
COOKIE_TAG = 0x0FCD000000000000
COOKIE_MASK = 0xFFFF000000000000
CLONE_NEWNET = 0x40000000
HOST_NET = "198.18.0.0"  # hosts get 198.18.x.y/16

_libc = ctypes.CDLL(None, use_errno=True)
_count = 0


def unavailable():
    """Why a lab cannot run here (a skip reason), or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth and tap devices)"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} not installed (packaging/deps.sh installs openvswitch-switch, iproute2, iputils-ping)"
    if not os.path.exists(SCHEMA):
        return f"{SCHEMA} missing"
    return None


def cookie_of(x, y):
    """The cookie ofcd gives both flows of the circuit x<->y (lower port first)."""
    a, b = min(x, y), max(x, y)
    return COOKIE_TAG | a << 24 | b


def run(cmd, check=True, input=None, env=None, timeout=60):
    r = subprocess.run(cmd, input=input, capture_output=True, text=True, env=env, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)[:300]}: exit {r.returncode}: {r.stderr.strip()[:2000]}")
    return r


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(l.startswith("State:") and "Z" in l.split()[1] for l in f)
    except OSError:
        return False


def _wait_gone(pid, timeout):
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _kill(pid, timeout=5.0):
    """SIGTERM, then SIGKILL if pid is still there after timeout."""
    for sig, t in ((signal.SIGCONT, 0), (signal.SIGTERM, timeout), (signal.SIGKILL, timeout)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if t and _wait_gone(pid, t):
            return


def _netns_pids(ns):
    r = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in r.stdout.split()] if r.returncode == 0 else []


def cleanup_stale():
    """Removes the namespaces (and temp dirs) of labs whose process is gone."""
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return
    stale = []
    for name in names:
        m = re.match(rf"^{PREFIX}(\d+)x\d+(-|$)", name)
        if m and not _alive(int(m.group(1))):
            stale.append(name)
    for name in stale:
        for pid in _netns_pids(name):
            _kill(pid, 2)
    if stale:
        run(["ip", "-force", "-batch", "-"], check=False, input="".join(f"netns del {n}\n" for n in stale))
        for name in stale:
            if "-" not in name:
                for d in os.listdir(tempfile.gettempdir()):
                    if d.startswith(name + "-"):
                        shutil.rmtree(os.path.join(tempfile.gettempdir(), d), ignore_errors=True)


Flow = collections.namedtuple("Flow", "cookie table priority in_port actions line")
Host = collections.namedtuple("Host", "name netns bridge ofport veth ip")


def parse_flows(text):
    """Parses `ovs-ofctl --no-names --no-stats dump-flows` output into Flows."""
    flows = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("OFPST_FLOW") or line.startswith("NXST_FLOW"):
            continue
        match, _, actions = line.partition(" actions=")
        fields = {}
        for part in re.split(r",\s*", match):
            k, _, v = part.partition("=")
            fields[k.strip()] = v
        flows.append(Flow(cookie=int(fields.get("cookie", "0"), 16), table=int(fields.get("table", "0")),
                          priority=int(fields.get("priority", "32768")),
                          in_port=int(fields["in_port"]) if "in_port" in fields else None,
                          actions=actions, line=line))
    return flows


class Lab:
    def __init__(self, workdir=None):
        global _count
        _count += 1
        self.ns = f"{PREFIX}{os.getpid()}x{_count}"
        self.dir = workdir or tempfile.mkdtemp(prefix=self.ns + "-")
        self.env = dict(os.environ, OVS_RUNDIR=self.dir, OVS_DBDIR=self.dir, OVS_LOGDIR=self.dir,
                        OVS_SYSCONFDIR=self.dir, OVS_PKGDATADIR="/usr/share/openvswitch")
        self.bridges = {}
        self.hosts = {}
        self.namespaces = []  # everything close() deletes, the lab's own last
        self._home = None
        self._closed = False
        self._next_ip = 1

    # -- daemons --------------------------------------------------------------------------

    def start(self):
        cleanup_stale()
        atexit.register(self.close)
        run(["ip", "netns", "add", self.ns])
        self.namespaces.append(self.ns)
        run(["ip", "-n", self.ns, "link", "set", "lo", "up"])
        db = os.path.join(self.dir, "conf.db")
        run(["ovsdb-tool", "create", db, SCHEMA], env=self.env)
        self._in_lab(["ovsdb-server", db, f"--remote=punix:{self.dir}/db.sock",
                      f"--pidfile={self.dir}/ovsdb-server.pid", "--detach",
                      f"--log-file={self.dir}/ovsdb-server.log", "-vconsole:off"])
        self.vsctl("--no-wait", "init")
        self.start_vswitchd()
        return self

    def _in_lab(self, cmd, **kw):
        return run(["nsenter", f"--net={NETNS_DIR}/{self.ns}", *cmd], env=self.env, **kw)

    def _pid(self, name):
        try:
            with open(os.path.join(self.dir, f"{name}.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    @property
    def vswitchd_pid(self):
        return self._pid("ovs-vswitchd")

    def start_vswitchd(self):
        """Starts ovs-vswitchd (returns once it has read the database and made its bridges)."""
        self._in_lab(["ovs-vswitchd", f"unix:{self.dir}/db.sock", f"--pidfile={self.dir}/ovs-vswitchd.pid",
                      "--detach", f"--log-file={self.dir}/ovs-vswitchd.log", "-vconsole:off"])
        # --detach returns once the daemon runs; wait until it has configured the database.
        self.vsctl("--timeout=20", "set", "open_vswitch", ".", "other_config:ofcdlab=1")

    def stop_vswitchd(self, sig=signal.SIGTERM):
        """Stops ovs-vswitchd with sig (SIGKILL: a crash) and waits until it is gone."""
        pid = self.vswitchd_pid
        if pid is None:
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        if not _wait_gone(pid, 10):
            _kill(pid)
        try:
            os.unlink(os.path.join(self.dir, "ovs-vswitchd.pid"))
        except FileNotFoundError:
            pass

    def restart_vswitchd(self, sig=signal.SIGTERM):
        self.stop_vswitchd(sig)
        self.start_vswitchd()

    def freeze_vswitchd(self):
        os.kill(self.vswitchd_pid, signal.SIGSTOP)

    def thaw_vswitchd(self):
        os.kill(self.vswitchd_pid, signal.SIGCONT)

    def appctl(self, *args, timeout=30):
        """ovs-appctl to this lab's ovs-vswitchd (vlog/set, ...)."""
        target = os.path.join(self.dir, f"ovs-vswitchd.{self.vswitchd_pid}.ctl")
        return run(["ovs-appctl", "-t", target, *args], env=self.env, timeout=timeout).stdout

    def vswitchd_log(self):
        with open(os.path.join(self.dir, "ovs-vswitchd.log"), errors="replace") as f:
            return f.read()

    def vsctl(self, *args, timeout=60):
        return run(["ovs-vsctl", f"--db=unix:{self.dir}/db.sock", *args], env=self.env, timeout=timeout).stdout

    def ofctl(self, *args, check=True, timeout=60):
        return run(["ovs-ofctl", "-O", "OpenFlow13", *args], env=self.env, check=check, timeout=timeout)

    # -- bridges ----------------------------------------------------------------------------

    def add_bridge(self, name, controller=None):
        """A bridge that forwards nothing until a controller adds flows.

        controller: an OVS controller target, "tcp:127.0.0.1:P" (the controller listens) or
        "ptcp:P:127.0.0.1" (the bridge listens); retried every second at most.
        """
        if len(name) > 10:
            raise ValueError(f"bridge name {name!r}: at most 10 characters (veths are named after it)")
        self.vsctl("--timeout=20", "add-br", name, "--", "set", "bridge", name, "datapath_type=netdev",
                   "fail_mode=secure", "protocols=OpenFlow13", "other-config:disable-in-band=true")
        self.bridges[name] = controller
        if controller:
            self.vsctl("--timeout=20", "--", "--id=@c", "create", "controller", f'target="{controller}"',
                       "max_backoff=1000", "--", "set", "bridge", name, "controller=@c")
        return name

    def controller_status(self, bridge):
        """{"is_connected": "true"|"false", "role": ..., ...} of the bridge's controller."""
        out = self.vsctl("--format=json", "--columns=is_connected,status", "find", "controller",
                         f'target="{self.bridges[bridge]}"')
        rows = json.loads(out)["data"]
        if not rows:
            return {}
        connected, status = rows[0]
        st = dict(status[1]) if status[0] == "map" else {}
        st["is_connected"] = str(connected).lower()
        return st

    def dump_flows(self, bridge):
        return parse_flows(self.ofctl("--no-names", "--no-stats", "dump-flows", bridge).stdout)

    def circuit_flows(self, bridge):
        """The bridge's flows as a list of (in_port, out_port, cookie, priority, table).

        A flow whose actions are anything but a single output: gives out_port None.
        """
        out = []
        for f in self.dump_flows(bridge):
            m = re.fullmatch(r"output:(\d+)", f.actions)
            out.append((f.in_port, int(m.group(1)) if m else None, f.cookie, f.priority, f.table))
        return out

    # -- hosts ----------------------------------------------------------------------------

    def add_hosts(self, specs):
        """Makes one host per (name, bridge, ofport): a namespace whose eth0 is the peer of a
        veth that is port ofport of bridge. Returns their Hosts, in order."""
        made = []
        for name, bridge, ofport in specs:
            if name in self.hosts:
                raise ValueError(f"host {name} exists")
            if not re.fullmatch(r"[A-Za-z0-9_.]{1,32}", name):
                raise ValueError(f"host name {name!r}")
            veth = f"{bridge}p{ofport}"
            if len(veth) > 15:
                raise ValueError(f"{veth}: device name too long")
            n = self._next_ip
            self._next_ip += 1
            if n > 65000:
                raise ValueError("out of host addresses")
            ip = f"198.18.{n >> 8}.{n & 255}"
            h = Host(name=name, netns=f"{self.ns}-{name}", bridge=bridge, ofport=ofport, veth=veth, ip=ip)
            made.append(h)
        if not made:
            return []
        run(["ip", "-batch", "-"], input="".join(f"netns add {h.netns}\n" for h in made))
        for h in made:
            self.namespaces.insert(0, h.netns)
            self.hosts[h.name] = h
        # The lab ends: no IPv6 link-local (its neighbour discovery would leak into the
        # host past OVS on that one veth) and up; OVS reads them through AF_PACKET.
        lines = []
        for h in made:
            lines.append(f"link add {h.veth} type veth peer name eth0 netns {h.netns}\n")
            lines.append(f"link set {h.veth} addrgenmode none\n")
            lines.append(f"link set {h.veth} up\n")
        run(["ip", "-n", self.ns, "-batch", "-"], input="".join(lines))
        for h in made:
            run(["ip", "-n", h.netns, "-batch", "-"],
                input=(f"link set lo up\nlink set eth0 addrgenmode none\n"
                       f"addr add {h.ip}/16 dev eth0\nlink set eth0 up\n"))
        args = ["--timeout=60"]
        for h in made:
            args += ["--", "add-port", h.bridge, h.veth, "--", "set", "interface", h.veth,
                     f"ofport_request={h.ofport}"]
        self.vsctl(*args)
        self.check_ports()
        return made

    def check_ports(self):
        """Raises unless every host's veth is its bridge's port with the requested number."""
        data = json.loads(self.vsctl("--format=json", "--columns=name,ofport,error", "list", "interface"))
        got = {row[0]: (row[1], row[2]) for row in data["data"]}
        for h in self.hosts.values():
            ofport, error = got.get(h.veth, (None, None))
            if ofport != h.ofport:
                raise RuntimeError(f"{h.veth}: ofport {ofport}, want {h.ofport} (error {error})")

    def exec_in(self, host, cmd, **kw):
        return run(["nsenter", f"--net={NETNS_DIR}/{host.netns}", *cmd], **kw)

    def ping(self, src, dst, timeout=1):
        """True when one echo from host src to host dst is answered within timeout seconds."""
        r = self.exec_in(src, ["ping", "-n", "-q", "-c1", f"-W{timeout}", dst.ip], check=False)
        return r.returncode == 0

    def reachability(self, pairs, timeout=1, max_pings=256):
        """{(src, dst): bool} for host-name pairs: one `ping -c1 -W<timeout>` each, all of a
        source's pings in parallel inside one shell in its namespace, at most max_pings in
        flight. Wall time about timeout x (number of waves) when pairs fail."""
        by_src = collections.defaultdict(list)
        for a, b in pairs:
            by_src[a].append(b)
        jobs = []  # (src, [dst...]) chunks of at most max_pings
        for a, dsts in by_src.items():
            for i in range(0, len(dsts), max_pings):
                jobs.append((a, dsts[i:i + max_pings]))
        script = ('for ip in "$@"; do (ping -n -q -c1 -W%d "$ip" >/dev/null 2>&1 && echo "$ip ok" '
                  '|| echo "$ip no") & done; wait' % timeout)
        result = {}
        running = []  # (src, dsts, Popen, n)
        inflight = 0

        def reap(job):
            a, dsts, p = job
            out, err = p.communicate(timeout=timeout + 30)
            ok = {}
            for line in out.splitlines():
                ip, _, word = line.partition(" ")
                ok[ip] = word == "ok"
            for b in dsts:
                ip = self.hosts[b].ip
                if ip not in ok:
                    raise RuntimeError(f"ping {a} -> {b}: no result (stderr: {err.strip()[:300]})")
                result[(a, b)] = ok[ip]

        for a, dsts in jobs:
            while running and inflight + len(dsts) > max_pings:
                job = running.pop(0)
                reap(job)
                inflight -= len(job[1])
            src = self.hosts[a]
            p = subprocess.Popen(["nsenter", f"--net={NETNS_DIR}/{src.netns}", "sh", "-c", script, "sh",
                                  *(self.hosts[b].ip for b in dsts)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            running.append((a, dsts, p))
            inflight += len(dsts)
        for job in running:
            reap(job)
        return result

    # -- the calling thread's network namespace -------------------------------------------

    def enter(self):
        """Moves the calling thread into the lab namespace; processes it starts from now on
        (ofcd) run there, and its sockets reach OVS's on the lab's 127.0.0.1."""
        if self._home is not None:
            return
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(f"{NETNS_DIR}/{self.ns}", os.O_RDONLY)
        try:
            _setns(fd)
        except OSError:
            os.close(home)
            raise
        finally:
            os.close(fd)
        self._home = home

    def leave(self):
        if self._home is None:
            return
        try:
            _setns(self._home)
        finally:
            os.close(self._home)
            self._home = None

    # -- teardown -------------------------------------------------------------------------

    def close(self, keep_dir=False):
        """Stops everything the lab started and deletes its namespaces. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.leave()
        for name in ("ovs-vswitchd", "ovsdb-server"):
            pid = self._pid(name)
            if pid is not None:
                _kill(pid)
        for ns in self.namespaces:
            for pid in _netns_pids(ns):
                _kill(pid, 2)
        if self.namespaces:
            run(["ip", "-force", "-batch", "-"], check=False,
                input="".join(f"netns del {ns}\n" for ns in self.namespaces))
        self.namespaces = []
        if not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        try:
            atexit.unregister(self.close)
        except Exception:
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close(keep_dir=exc[0] is not None)
