#!/bin/sh
# Runs the cmocka test binaries given, UNIT_JOBS (default 2, at least 1) at a
# time: several of them mostly wait (on etcd, on timers). Prints each one's own
# cmocka output in the order given, then a closing total; exits non-zero when
# any binary fails.
jobs=${UNIT_JOBS:-2}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
i=0
for t in "$@"; do
	i=$((i + 1))
	printf '%s\0%s\0' "$i" "$t"
done | xargs -0 -r -n 2 -P "$jobs" sh -c '"$2" >"$0/$1.log" 2>&1; echo $? >"$0/$1.rc"' "$tmp"
passed=0
failed=0
i=0
for t in "$@"; do
	i=$((i + 1))
	echo "== $t"
	cat "$tmp/$i.log" 2>/dev/null
	if [ "$(cat "$tmp/$i.rc" 2>/dev/null)" = 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "== $t FAILED"
	fi
done
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
