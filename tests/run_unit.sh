#!/bin/sh
# Runs the cmocka test binaries given, UNIT_JOBS (2) at a time: several of them
# mostly wait (on etcd, on timers). Prints each one's own cmocka output in the
# order given, then a closing total; exits non-zero when any binary fails.
jobs=${UNIT_JOBS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
for t in "$@"; do
	i=$((i + 1))
	echo "$i $t"
done | xargs -P "$jobs" -L 1 sh -c '"$2" >"$0/$1.log" 2>&1; echo $? >"$0/$1.rc"' "$tmp"
passed=0
failed=0
i=0
for t in "$@"; do
	i=$((i + 1))
	echo "== $t"
	cat "$tmp/$i.log"
	if [ "$(cat "$tmp/$i.rc" 2>/dev/null)" = 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "== $t FAILED"
	fi
done
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
