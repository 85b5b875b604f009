#!/bin/sh
# Runs each libFuzzer harness given for SECONDS after its committed corpus
# (tests/fuzz/corpus/NAME: seeds and the inputs of past crashes, read only).
# New inputs go to build/fuzz/corpus/NAME (FUZZ_OUT/NAME when FUZZ_OUT is set:
# the smoke run starts from the committed corpus alone), a crash to build/fuzz/crashes/
# (keep it in tests/fuzz/corpus/NAME once its bug is fixed), the log to
# build/fuzz/NAME.log. Prints one line per harness: executions, coverage
# (libFuzzer's cov and ft), corpus size; exits 1 when one of them failed.
#   sh tests/fuzz/run.sh SECONDS build/fuzz/fuzz_NAME...
set -u
secs=$1
shift
out=build/fuzz
corpus=${FUZZ_OUT:-$out/corpus}
mkdir -p "$out/crashes"
failed=0
for bin in "$@"; do
	name=$(basename "$bin")
	name=${name#fuzz_}
	mkdir -p "$corpus/$name"
	dict=""
	[ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
	log="$out/$name.log"
	# An input that runs for a minute is a hang, and a failure like a crash.
	if "$bin" -max_total_time="$secs" -timeout=60 -print_final_stats=1 \
		-artifact_prefix="$out/crashes/$name-" $dict \
		"$corpus/$name" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|INITED|pulse|NEW|REDUCE)' "$log" | tail -n 1)
		cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\) corp: \([^ ]*\).*/cov \1, ft \2, corpus \3/p')
		echo "fuzz $name: ok, $runs runs in ${secs} s, $cov"
	else
		failed=1
		echo "fuzz $name: FAILED (log: $log)"
		grep -E 'ERROR|SUMMARY|fuzz_[a-z0-9]+:|Test unit written|#[0-9]+ in ' "$log" | head -n 30
	fi
done
exit $failed
