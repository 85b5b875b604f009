#!/bin/sh
# Runs each cmocka test binary given, prints cmocka's own summaries and a
# closing total; exits non-zero when any binary fails.
passed=0
failed=0
for t in "$@"; do
	echo "== $t"
	if "$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
