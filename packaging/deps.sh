#!/bin/sh
# Installs the Debian packages ofcd needs to build, run, test and benchmark,
# when any is missing. Idempotent and quick when everything is present.
set -e
PKGS="build-essential pkg-config libevent-dev libjansson-dev libmicrohttpd-dev libsqlite3-dev
libibverbs-dev ibverbs-providers libsystemd-dev libinih-dev libcmocka-dev python3 python3-pytest
python3-requests sqlite3 curl iproute2 iputils-ping openvswitch-switch wrk nginx-light
etcd-server etcd-client"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "ofcd: installing missing packages:$missing" >&2
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# The OVS, nginx and etcd packages try to start their services; ofcd's tests and
# benchmarks start their own instances, so keep the system ones from starting.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
	$SUDO chmod 755 /usr/sbin/policy-rc.d
	trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get install -y -qq --no-install-recommends $missing
