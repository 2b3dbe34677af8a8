#!/usr/bin/env bash
# run-bench.sh: every benchmark of 'make bench'. Each prints its figure next to a
# reference measured in the same run (memcpy bandwidth, a plain Lua call) as a ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
for b in "$BUILD"/bench/bench_*; do
  [[ -x "$b" ]] || continue
  echo "== $(basename "$b")"
  "$b"
done
# The Lua benchmarks: each a file of tests/bench and what it measures.
export TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so}
lua_bench() {
  echo "== $1 ($2)"
  luajit "tests/bench/$1.lua"
}
lua_bench bench_lua "LuaJIT binding"
lua_bench bench_td "TensorDict; Python tensordict side by side where TD_PYTHON has it"
lua_bench bench_memmap "memmap; writes ~2 GiB under TD_BENCH_DIR, default /tmp"
lua_bench bench_memmap_sample "replay-buffer sampling buf[idx] vs memcpy of the rows; ~1.2 GiB under TD_BENCH_DIR"
lua_bench bench_gc "GC and allocation: 1M small ops and td[i], resident memory and time per 100k"
lua_bench bench_vs_torch "PyTorch side by side, where installed"
lua_bench bench_unary_ops "every unary op on 1e6 float32 vs torch (TD_TORCH_PYTHON) and memcpy, 1 and 2 threads"
lua_bench bench_sort "sort and topk(10) of 1e3..1e7 float32; unique, histc, bincount, searchsorted of 1e5 and 1e7; vs torch (TD_TORCH_PYTHON), 1 and 2 threads"
lua_bench bench_fill_scan "cumsum, linspace, tril, cummax, logcumsumexp at 1e5 and 1e7 float32 vs torch (TD_TORCH_PYTHON), 1 and 2 threads"
lua_bench bench_npy "NumPy files: save_npy of 1 GiB vs raw write, load_npy{mmap} (numpy beside where TD_PYTHON has it); ~2 GiB under TD_BENCH_DIR"
lua_bench bench_sweep "size sweep 1e2..1e7 at 1 and 2 threads, ours vs torch; writes tests/bench/results/latest.md and .json"
lua_bench bench_flow "pipeline nodes: flow.run's and tdflow's cost per node per batch"
lua_bench bench_pipeline "source -> Normalize -> Filter -> Map x2 -> Rebatch -> MemmapSink; Python tensordict side by side where TD_PYTHON has it"
lua_bench bench_expr "an expression (flow.expr, Filter{where = \"...\"}) vs the same ops written by hand, 1M rows"
lua_bench bench_csv "CsvSource: rows/s of a clean file plainly and with the messy-file options, gzip vs zcat > /dev/null; ~50 MB under TD_BENCH_DIR"
lua_bench bench_normalize "Normalize's nan policies against the plain update (propagate), updating and with fixed statistics"
lua_bench bench_flow_memmap "MemmapSink, ReplayBuffer; writes ~1.4 GiB under TD_BENCH_DIR"
lua_bench bench_samplers "ReplayBuffer's samplers: sample(256) of a 1M-row ring, prioritized vs uniform; torchrl's buffers where TD_PYTHON has torchrl; ~160 MiB under TD_BENCH_DIR"
lua_bench bench_h5 "H5Source over a 1 GiB HDF5 file (TD_H5_BENCH_MB) vs raw H5Dread of the same hyperslabs and PersistentTensorDict where TD_PYTHON has h5py; ~1 GiB under TD_BENCH_DIR"
lua_bench bench_flow_map "Map: 2 workers vs 1, and shipping a 4 MiB batch vs memcpy twice"
lua_bench bench_checkpoint "resumable runs: checkpoints every 64 MiB of a 1 GiB run vs none, --resume to the first row, the provenance record; ~2.3 GiB under TD_BENCH_DIR"
# tensordict.dist (docs/dist.md): under mpirun where OpenMPI and libtensordict_mpi.so are.
export TENSORDICT_MPI_LIB=${TENSORDICT_MPI_LIB:-$PWD/$BUILD/libtensordict_mpi.so}
if command -v mpirun >/dev/null 2>&1 && [[ -f "$TENSORDICT_MPI_LIB" ]]; then
  echo "== bench_dist (all_reduce and send/recv vs raw MPI calls of the same bytes, 2 ranks)"
  scripts/mpirun.sh -n 2 luajit tests/bench/bench_dist.lua
  echo "== bench_dist_malformed (malformed transfers from a broken peer: 0 accepted is the goal)"
  timeout 600 scripts/mpirun.sh -n 2 luajit tests/bench/bench_dist_malformed.lua
  lua_bench bench_dist_recipe "recipes on 2 ranks vs 1 (CPU-bound, writing), 1 GiB written by 2 ranks vs raw writes"
else
  echo "== bench_dist skipped: mpirun or $TENSORDICT_MPI_LIB missing"
fi
