#!/usr/bin/env bash
# run-mpi-tests.sh: runs tests/mpi/*_spec.lua under mpirun (scripts/mpirun.sh) with 2 and
# 3 ranks (TD_MPI_RANKS), against the libraries in $BUILD. Rank 0 of each run prints TAP
# (tests/mpi/harness.lua). Ends with one line "mpi: N passed, N failed, N skipped"; when
# mpirun or libtensordict_mpi.so is missing, every test is counted as skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so}
export TENSORDICT_MPI_LIB=${TENSORDICT_MPI_LIB:-$PWD/$BUILD/libtensordict_mpi.so}
export LUA_PATH="$PWD/lua/?.lua;$PWD/lua/?/init.lua;$PWD/tests/mpi/?.lua;$PWD/tests/spec/?.lua;;"
ranks=${TD_MPI_RANKS:-2 3}
export TD_MPI_RECOVERY=1 # kill_spec.lua: the survivors must live to report
passed=0 failed=0 skipped=0
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

reason=""
if ! command -v mpirun >/dev/null 2>&1; then reason="mpirun not found (openmpi-bin)"
elif [[ ! -f "$TENSORDICT_MPI_LIB" ]]; then reason="$TENSORDICT_MPI_LIB not built (libopenmpi-dev)"
fi

# Each file with each rank count, then once more on 3 ranks with MPI calls cut into
# 4 KiB pieces (TD_MPI_CHUNK_BYTES): the paths buffers past 1 GiB take.
runs=()
for f in tests/mpi/*_spec.lua; do
  for n in $ranks; do runs+=("$f $n"); done
done
for f in tests/mpi/p2p_spec.lua tests/mpi/collectives_spec.lua tests/mpi/malformed_spec.lua; do runs+=("$f 3 4096"); done

for run in "${runs[@]}"; do
  read -r f n chunk <<<"$run"
  if [[ -n "$reason" ]]; then
    count=$(TD_MPI_TEST_LIST=1 ${TD_PRELOAD:+env LD_PRELOAD=$TD_PRELOAD} luajit "$f")
    skipped=$((skipped + count))
    continue
  fi
  # The whole file gets 5 minutes: a hang is a failure, not a stuck suite.
  TD_MPI_CHUNK_BYTES=${chunk:-} ${TD_PRELOAD:+env LD_PRELOAD=$TD_PRELOAD} \
    timeout 300 scripts/mpirun.sh -n "$n" luajit "$f" >"$out" 2>"$err"
  rc=$?
  plan=$(grep -E '^1\.\.[0-9]+$' "$out" | head -n 1 | cut -c4-)
  p=$(grep -cE '^ok [0-9]+ - ' "$out")
  q=$(grep -cE '^not ok [0-9]+ - ' "$out")
  if [[ -z "$plan" ]]; then
    echo "FAIL $f (-n $n): no test plan (mpirun exited $rc)"; cat "$out" "$err"
    failed=$((failed + 1)); continue
  fi
  missing=$((plan - p - q))
  [[ $missing -gt 0 ]] && q=$((q + missing)) # tests that never reported (a crash, a hang)
  passed=$((passed + p)); failed=$((failed + q))
  echo "$(basename "$f") -n $n${chunk:+ (pieces of $chunk bytes)}: $p passed, $q failed"
  if [[ $q -gt 0 ]]; then
    grep -E '^not ok' "$out"
    grep -v 'PMIX ERROR: BAD-PARAM' "$err" # --enable-recovery's notice at exit is noise
  fi
done
[[ -n "$reason" ]] && echo "mpi tests skipped: $reason"
echo "mpi: $passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
