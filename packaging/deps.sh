#!/bin/sh
# Installs the Debian packages ofcd needs to build, run, test and benchmark,
# when any is missing. Idempotent and quick when everything is present.
set -e
PKGS="build-essential pkg-config libevent-dev libssl-dev openssl libjansson-dev libmicrohttpd-dev libsqlite3-dev
libibverbs-dev ibverbs-providers libsystemd-dev libinih-dev libcmocka-dev python3 python3-pytest
python3-pytest-xdist python3-requests python3-yaml python3-jsonschema python3-simgrid sqlite3 curl iproute2 iputils-ping
openvswitch-switch wrk nginx-light chromium fonts-dejavu-core
libcurl4-openssl-dev slurmctld slurmd slurm-client munge prometheus clang libclang-rt-14-dev
etcd-server etcd-client stress-ng bash-completion
libnetconf2-dev libyang2-dev libssh-dev netconfd openssh-server openssh-client python3-ncclient"
# Node.js and npm run the browser tests and the OpenAPI linter (tests/browser/);
# a machine that already has them from elsewhere keeps its own.
command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
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
# The OVS, nginx, etcd, Slurm, munge and prometheus packages try to start their services;
# ofcd's tests and benchmarks start their own instances (and use only promtool of
# prometheus, to check the alert rules), so keep the system ones from starting.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
	$SUDO chmod 755 /usr/sbin/policy-rc.d
	trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get install -y -qq --no-install-recommends $missing
# These packages enable their services on install; ofcd's tests start their own
# instances, so a machine set up for ofcd does not run them at its next boot.
for s in munge slurmctld slurmd nginx-light:nginx openvswitch-switch prometheus etcd-server:etcd openssh-server:ssh; do
	pkg=${s%%:*}
	unit=${s#*:}
	case " $missing " in *" $pkg "*) $SUDO systemctl disable --quiet "$unit.service" 2>/dev/null || true ;; esac
done
