#!/bin/sh
# GET /v1/health on ofcd against nginx (one worker) serving a static file with
# the same body, both on loopback in the same run, measured with
# wrk -t2 -c64 -d10s. Prints requests/s, p50/p99 latency and the ratio.
# Usage: bench/health_vs_nginx.sh BUILD_DIR [DURATION]
set -eu
build=$1
dur=${2:-10s}
tmp=$(mktemp -d)
ofcd_pid=""
nginx_pid=""
cleanup() {
	[ -n "$ofcd_pid" ] && kill "$ofcd_pid" 2>/dev/null && wait "$ofcd_pid" 2>/dev/null
	[ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

oport=$(free_port)
printf '[http]\nlisten = 127.0.0.1:%s\n[store]\npath = %s/ofcd.db\n[log]\nlevel = warn\n' \
	"$oport" "$tmp" > "$tmp/ofcd.ini"
"$build/ofcd" -c "$tmp/ofcd.ini" 2>"$tmp/ofcd.log" &
ofcd_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$oport/v1/health" >/dev/null && break; sleep 0.05; done

# nginx serves the same bytes ofcd answers with, as application/json.
curl -s "http://127.0.0.1:$oport/v1/health" > "$tmp/health"
nport=$(free_port)
mkdir -p "$tmp/www/v1"
cp "$tmp/health" "$tmp/www/v1/health"
cat > "$tmp/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $tmp/nginx.pid;
error_log $tmp/nginx.err warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $tmp;
    proxy_temp_path $tmp;
    fastcgi_temp_path $tmp;
    uwsgi_temp_path $tmp;
    scgi_temp_path $tmp;
    default_type application/json;
    server {
        listen 127.0.0.1:$nport;
        root $tmp/www;
        keepalive_requests 100000;
    }
}
CONF
/usr/sbin/nginx -c "$tmp/nginx.conf" &
nginx_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$nport/v1/health" >/dev/null && break; sleep 0.05; done

run_wrk() {
	wrk -t2 -c64 -d"$dur" --latency "$1" > "$tmp/wrk.out"
	rps=$(awk '/^Requests\/sec:/ {print $2}' "$tmp/wrk.out")
	p50=$(awk '$1 == "50%" {print $2}' "$tmp/wrk.out")
	p99=$(awk '$1 == "99%" {print $2}' "$tmp/wrk.out")
	echo "$rps $p50 $p99"
}
set -- $(run_wrk "http://127.0.0.1:$oport/v1/health")
o_rps=$1 o_p50=$2 o_p99=$3
set -- $(run_wrk "http://127.0.0.1:$nport/v1/health")
n_rps=$1 n_p50=$2 n_p99=$3
echo "health_ofcd: $o_rps requests/s (p50 $o_p50, p99 $o_p99)"
echo "health_nginx: $n_rps requests/s (p50 $n_p50, p99 $n_p99)"
awk -v o="$o_rps" -v n="$n_rps" 'BEGIN { printf "health_ratio: %.2f ofcd/nginx (target >= 0.5)\n", o / n }'
