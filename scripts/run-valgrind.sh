#!/usr/bin/env bash
# run-valgrind.sh: valgrind memcheck over the C tests and a subset of the specs (make
# valgrind). Passes when every run exits 0: memcheck exits 99 on any error or any block
# definitely lost, so the last line "valgrind: N runs, 0 with errors or leaks" means 0
# errors and 0 bytes definitely lost. ("Possibly lost" blocks are the thread stacks of
# OpenBLAS's pool, alive at exit: not counted.) No suppressions are needed: LuaJIT, built
# without its valgrind mode, gives memcheck nothing to report on these runs.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
command -v valgrind >/dev/null || { echo "valgrind is not installed: apt-get install valgrind" >&2; exit 1; }
export TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so}
export TD_VALGRIND=1 # test_cuda_storage leaves out its dlopen of the CUDA runtime
VG=(valgrind -q --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite
  --error-exitcode=99)

# Left out of the C tests: test_reduce, since valgrind computes long double (x87, 80 bits)
# in 64 bits, so its extended-precision checks fail under it (and it takes 3 minutes).
# test_embed runs 10 Lua states instead of 100: resident memory means nothing under
# valgrind, and each state takes a second.
SKIP_C="test_reduce"
# The specs: containers and their memory, the disk formats (memmap, consolidate, the
# flow's sink and source), JSON, the loader and the misuse fuzzer (freed handles, hostile
# arguments). About 4 minutes together; the rest of the specs exercise the same C paths.
SPECS="td_core td_ops td_memory memory json loader misuse td_memmap flow_memmap"

runs=0 bad=0
run() { # name, command...
  local name=$1 log rc start=$SECONDS
  shift
  log=$(mktemp)
  "${VG[@]}" "$@" >"$log" 2>&1
  rc=$?
  runs=$((runs + 1))
  if [[ $rc -ne 0 ]]; then
    bad=$((bad + 1))
    echo "FAIL $name (exit $rc$([[ $rc -eq 99 ]] && echo ': memcheck errors or leaks'))"
    cat "$log"
  else
    echo "$name: clean ($((SECONDS - start)) s)"
  fi
  rm -f "$log"
}

for t in "$BUILD"/tests/test_*; do
  name=$(basename "$t")
  [[ -x "$t" && " $SKIP_C " != *" $name "* ]] || continue
  TD_EMBED_CYCLES=10 run "$name" "$t"
done
# --ignore-lua: busted would re-exec itself under .busted's "luajit", outside valgrind
for s in $SPECS; do
  run "${s}_spec" luajit "$(command -v busted)" --ignore-lua "tests/spec/${s}_spec.lua"
done
echo "valgrind: $runs runs, $bad with errors or leaks"
[[ $bad -eq 0 ]]
