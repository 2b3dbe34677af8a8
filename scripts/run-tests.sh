#!/usr/bin/env bash
# run-tests.sh: runs the C tests and the busted specs (under LuaJIT) against the
# library in $BUILD, and ends with one line "N passed, N failed[, N skipped]".
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
passed=0 failed=0 skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# The library the tests load (the embedding test and the specs load it through the FFI).
export TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so}

# C tests print their own "N passed, N failed" line.
for t in "$BUILD"/tests/test_*; do
  [[ -x "$t" ]] || continue
  "$t" >"$log" 2>&1
  rc=$?
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  if [[ -z "$line" ]]; then
    echo "FAIL $(basename "$t"): exited $rc without a summary"; cat "$log"
    failed=$((failed + 1)); continue
  fi
  p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line"); f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
  if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; fi # a crash after the summary still fails
  passed=$((passed + p)); failed=$((failed + f))
  echo "$(basename "$t"): $line"
  [[ $f -gt 0 ]] && cat "$log"
done

# busted specs, TAP output: "ok N", "not ok N", "ok N - # SKIP".
${TD_PRELOAD:+env LD_PRELOAD=$TD_PRELOAD} busted --lua=luajit -o TAP ${BUSTED_ARGS:-} >"$log" 2>&1
rc=$?
p=$(grep -cE '^ok [0-9]+ - ' "$log" | tr -d ' ')
s=$(grep -cE '^ok [0-9]+ - # SKIP' "$log" | tr -d ' ')
f=$(grep -cE '^not ok [0-9]+' "$log" | tr -d ' ')
p=$((p - s))
if [[ $rc -ne 0 && $f -eq 0 ]]; then
  echo "busted exited $rc without a failing test:"; cat "$log"; f=1
fi
grep -vE '^ok [0-9]+ - [^#]' "$log" | grep -vE '^1\.\.[0-9]+$' || true
echo "busted: $p passed, $f failed, $s skipped"
passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))

# tests/mpi under mpirun (2 and 3 ranks); counted as skipped where MPI is absent.
BUILD=$BUILD bash scripts/run-mpi-tests.sh >"$log" 2>&1
rc=$?
line=$(grep -E '^mpi: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
grep -vE '^(mpi: |[a-z_]+_spec\.lua -n [0-9]+: [0-9]+ passed, 0 failed$)' "$log" || true
if [[ -z "$line" ]]; then
  echo "run-mpi-tests.sh exited $rc without a summary"; failed=$((failed + 1))
else
  echo "$line"
  read -r p f s < <(sed -E 's/^mpi: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/' <<<"$line")
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
fi

summary="$passed passed, $failed failed"
[[ $skipped -gt 0 ]] && summary="$summary, $skipped skipped"
echo "$summary"
[[ $failed -eq 0 ]]
