#!/usr/bin/env bash
# run-fuzz.sh BUILD SECONDS: runs every libFuzzer target in BUILD for SECONDS from its
# seed corpus (tests/fuzz/corpus/<target>, read only; new inputs go to a scratch copy)
# and prints one line per target with its executions. A crash stops the run; libFuzzer
# leaves the input that crashed as BUILD/crash-<target>-*, to become a regression seed.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/fuzz} seconds=${2:-60}
status=0 total=0
for bin in "$build"/fuzz/fuzz_*; do
  [[ -x "$bin" ]] || continue
  name=$(basename "$bin")
  work=$(mktemp -d)
  log=$(mktemp)
  "$bin" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$build/crash-$name-" "$work" "tests/fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  echo "$name: ${runs:-0} executions in ${seconds} s, exit $rc"
  if [[ $rc -ne 0 ]]; then tail -n 40 "$log"; status=1; fi
  total=$((total + ${runs:-0}))
  rm -rf "$work" "$log"
done
echo "fuzz-c: $total executions in all"
rm -rf /dev/shm/td-fuzz-*
exit $status
