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
echo "== bench_lua (LuaJIT binding)"
TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so} luajit tests/bench/bench_lua.lua
echo "== bench_td (TensorDict; Python tensordict side by side where TD_PYTHON has it)"
TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so} luajit tests/bench/bench_td.lua
echo "== bench_memmap (memmap; writes ~2 GiB under TD_BENCH_DIR, default /tmp)"
TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so} luajit tests/bench/bench_memmap.lua
echo "== bench_vs_torch (PyTorch side by side, where installed)"
TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so} luajit tests/bench/bench_vs_torch.lua
echo "== bench_flow (pipeline nodes: flow.run's cost per node per batch)"
TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so} luajit tests/bench/bench_flow.lua
echo "== bench_pipeline (source -> Normalize -> Filter -> Map x2 -> Rebatch -> MemmapSink; Python tensordict side by side where TD_PYTHON has it)"
TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so} luajit tests/bench/bench_pipeline.lua
echo "== bench_flow_memmap (MemmapSink, ReplayBuffer; writes ~1.4 GiB under TD_BENCH_DIR)"
TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so} luajit tests/bench/bench_flow_memmap.lua
echo "== bench_flow_map (Map: 2 workers vs 1, and shipping a 4 MiB batch vs memcpy twice)"
TENSORDICT_LIB=${TENSORDICT_LIB:-$PWD/$BUILD/libtensordict.so} luajit tests/bench/bench_flow_map.lua
