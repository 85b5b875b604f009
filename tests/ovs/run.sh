#!/bin/sh
# The openflow driver against a real Open vSwitch.
#
# Starts ovsdb-server and ovs-vswitchd in a temp dir (their own rundir, db and
# logs; nothing of a system OVS is touched), makes five bridges with the
# userspace datapath, fail_mode=secure (never forwards on its own) and
# OpenFlow 1.3 only, builds tests/ovs/ovs_driver_check.c with cc and runs it
# (see its header for the scenario), then stops what it started by pid and
# deletes the devices it made. Logs stay in the temp dir when a step fails.
#
#   sh tests/ovs/run.sh        (as root: OVS makes tap and veth devices)
#   CHECK_CFLAGS="-O1 -g -fsanitize=address,undefined" sh tests/ovs/run.sh
#                              (the same with the driver under the sanitizers)
#
# Exit status: 0 pass, 1 fail, 77 skipped (not root or OVS not installed).
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SCHEMA=/usr/share/openvswitch/vswitch.ovsschema

if [ "$(id -u)" -ne 0 ]; then
	echo "skip: needs root"
	exit 77
fi
for c in ovsdb-tool ovsdb-server ovs-vswitchd ovs-vsctl ovs-ofctl ip cc; do
	if ! command -v "$c" >/dev/null; then
		echo "skip: $c not installed"
		exit 77
	fi
done

T=$(mktemp -d /tmp/ofcd-ovs.XXXXXX)
export OVS_RUNDIR="$T" OVS_DBDIR="$T" OVS_LOGDIR="$T" OVS_SYSCONFDIR="$T"
export OVS_PKGDATADIR=/usr/share/openvswitch

# Bridges and ports are host network devices and the TCP ports are host-wide:
# derive both from our pid so that parallel runs do not collide.
N="oc$(($$ % 100000))"
BR_PTCP="${N}a"  # ofcd listens, OVS connects
BR_TCP="${N}b"   # OVS listens, ofcd connects
BR_BENCH="${N}c" # ofcd pushes 4032 flows
BR_OFCTL="${N}d" # ovs-ofctl --bundle pushes the same flows
BR_FENCE="${N}e" # OVS listens, several ofcd connect with master generations
VETH="${N}v5"    # OVS port 5 of BR_PTCP ...
PEER="${N}w5"    # ... and its veth peer, whose link state the check toggles
P=$((20000 + ($$ % 10000) * 4))
PORT_PTCP=$P
PORT_TCP=$((P + 1))
PORT_BENCH=$((P + 2))
PORT_FENCE=$((P + 3))
CHECK_PID=

# Waits up to 5 s for a pid to end (a zombie counts as ended).
wait_gone() {
	i=0
	while [ -d "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; do
		i=$((i + 1))
		[ "$i" -lt 50 ] || return 1
		sleep 0.1
	done
}

stop_pidfile() {
	[ -f "$1" ] || return 0
	pid=$(cat "$1")
	kill -CONT "$pid" 2>/dev/null || true
	kill -TERM "$pid" 2>/dev/null || true
	wait_gone "$pid" || kill -KILL "$pid" 2>/dev/null || true
	rm -f "$1"
}

cleanup() {
	rc=$?
	trap - EXIT
	if [ -n "$CHECK_PID" ]; then
		kill -TERM "$CHECK_PID" 2>/dev/null || true
	fi
	stop_pidfile "$T/ovs-vswitchd.pid"
	stop_pidfile "$T/ovsdb-server.pid"
	# the userspace datapath leaves its tap devices behind
	for dev in "$BR_PTCP" "$BR_TCP" "$BR_BENCH" "$BR_OFCTL" "$BR_FENCE" \
		"${BR_PTCP}1" "${BR_PTCP}2" "${BR_PTCP}3" "${BR_PTCP}4" \
		"${BR_PTCP}6" "${BR_PTCP}7" "${BR_PTCP}8" "$VETH"; do
		ip link del "$dev" 2>/dev/null || true
	done
	if [ "$rc" -eq 0 ]; then
		rm -rf "$T"
	else
		echo "# failed; logs in $T"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The check freezes, kills and restarts ovs-vswitchd through this script.
cat >"$T/vswitchd.sh" <<EOF
#!/bin/sh
set -eu
case "\$1" in
start)
	ovs-vswitchd unix:$T/db.sock --pidfile=$T/ovs-vswitchd.pid --detach \\
		--log-file=$T/ovs-vswitchd.log -vconsole:off 2>>$T/ovs-vswitchd.stderr
	;;
stop)
	kill -STOP "\$(cat $T/ovs-vswitchd.pid)"
	;;
kill)
	pid=\$(cat $T/ovs-vswitchd.pid)
	kill -KILL "\$pid"
	while [ -d "/proc/\$pid" ] && ! grep -q '^State:.*Z' "/proc/\$pid/status" 2>/dev/null; do
		sleep 0.05
	done
	;;
esac
EOF

ovsdb-tool create "$T/conf.db" "$SCHEMA"
ovsdb-server "$T/conf.db" --remote=punix:"$T/db.sock" --pidfile="$T/ovsdb-server.pid" \
	--detach --log-file="$T/ovsdb-server.log" -vconsole:off 2>>"$T/ovsdb-server.stderr"
ovs-vsctl --no-wait init
sh "$T/vswitchd.sh" start

# add_bridge NAME [CONTROLLER-TARGET]
add_bridge() {
	ovs-vsctl --timeout=10 add-br "$1" -- set bridge "$1" datapath_type=netdev \
		fail_mode=secure protocols=OpenFlow13 other-config:disable-in-band=true
	if [ $# -gt 1 ]; then
		# max_backoff 1 s: OVS retries soon once ofcd listens
		ovs-vsctl --timeout=10 -- --id=@c create controller target="\"$2\"" \
			max_backoff=1000 -- set bridge "$1" controller=@c >/dev/null
	fi
}

add_bridge "$BR_PTCP" "tcp:127.0.0.1:$PORT_PTCP"
add_bridge "$BR_TCP" "ptcp:$PORT_TCP:127.0.0.1"
add_bridge "$BR_BENCH" "ptcp:$PORT_BENCH:127.0.0.1"
add_bridge "$BR_OFCTL"
add_bridge "$BR_FENCE" "ptcp:$PORT_FENCE:127.0.0.1"

# OCS ports 1-4 and 6-8 of BR_PTCP are internal ports, 5 a veth with its peer down
for n in 1 2 3 4 6 7 8; do
	ovs-vsctl --timeout=10 add-port "$BR_PTCP" "${BR_PTCP}$n" -- \
		set interface "${BR_PTCP}$n" type=internal ofport_request="$n"
done
ip link add "$VETH" type veth peer name "$PEER"
ip link set "$VETH" up
ovs-vsctl --timeout=10 add-port "$BR_PTCP" "$VETH" -- set interface "$VETH" ofport_request=5

cc -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-D_GNU_SOURCE ${CHECK_CFLAGS:--O2 -g} -I"$ROOT/ocs_drivers" \
	$(pkg-config --cflags libnetconf2 libyang libssh) \
	"$ROOT/tests/ovs/ovs_driver_check.c" "$ROOT"/ocs_drivers/*.c -levent \
	$(pkg-config --libs libnetconf2 libyang libssh) -lpthread \
	-o "$T/ovs_driver_check"

"$T/ovs_driver_check" \
	--ptcp-bridge "$BR_PTCP" --ptcp-port "$PORT_PTCP" \
	--tcp-bridge "$BR_TCP" --tcp-port "$PORT_TCP" \
	--bench-bridge "$BR_BENCH" --bench-port "$PORT_BENCH" \
	--ofctl-bridge "$BR_OFCTL" --fence-bridge "$BR_FENCE" --fence-port "$PORT_FENCE" \
	--veth-peer "$PEER" \
	--vswitchd "sh $T/vswitchd.sh" --workdir "$T" &
CHECK_PID=$!
wait "$CHECK_PID"
CHECK_PID=
