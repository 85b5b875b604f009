#!/bin/sh
# make bench: every benchmark, in one run, printing `name: value unit` lines.
# Results and the commands behind them are recorded in bench/RESULTS.md.
set -eu
cd "$(dirname "$0")/.."
B=build
echo "== planner, cost model and schedules (in-process)"
for b in "$B"/bench/*; do
	[ -x "$b" ] || continue
	echo "-- $b"
	"$b"
done
echo "== REST: GET /v1/health, ofcd vs nginx (wrk -t2 -c64 -d10s)"
sh bench/health_vs_nginx.sh "$B" 10s
echo "== REST: planning"
/usr/bin/python3 bench/rest_plan.py "$B"
for py in bench/rest_*.py; do
	[ "$py" = bench/rest_plan.py ] && continue
	echo "== REST: $py"
	/usr/bin/python3 "$py" "$B"
done
echo "== HA: failover after kill -9 of the leader (lease_ttl 1, 2); fabric create, cluster vs single node"
/usr/bin/python3 bench/ha.py "$B"
echo "== HA: a replicated 1-circuit change at 130, 2,050 and 8,194 servers; follower apply cost"
/usr/bin/python3 bench/ha_scale.py "$B"
echo "== HA: a follower catching up through a snapshot of a 32,770-server store"
/usr/bin/python3 bench/ha_catchup.py "$B"
echo "== HA: the randomized workload with 120 faults injected"
/usr/bin/python3 bench/ha_jepsen.py "$B" 120
echo "== Slurm: job turnover with ofcd's programs vs without (a real slurmctld, eight slurmd)"
/usr/bin/python3 bench/slurm_turnover.py "$B"
echo "== front door: memory held for 250 stalled event streams"
/usr/bin/python3 bench/sse_memory.py "$B"
echo "== front door: health while 1,140 slow connections from 19 addresses hold the listener"
/usr/bin/python3 bench/frontdoor_attack.py "$B"
echo "== crash loops: ofcd and ofcd-agent killed with SIGKILL, 200 times each"
/usr/bin/python3 bench/crashloop.py "$B"
