#!/usr/bin/env bash
# cuda-check.sh: the one script for a machine with a GPU (issue 15): builds what is
# missing, then runs the CUDA specs and the C load test against the device, and the
# four figures of tests/bench/bench_cuda.cu (ratios against raw CUDA in the same run),
# each step under a hard timeout so that a hung kernel cannot eat the device time.
#   scripts/cuda-check.sh [BUILD]      (default build/h; TD_CUDA_TIMEOUT seconds per step)
# It needs the NVIDIA driver and cuBLAS (libcublas.so.13) on the machine; nvcc only to
# build. Exit status: non-zero when a step failed or timed out.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/h}
LIMIT=${TD_CUDA_TIMEOUT:-240}
status=0

step() { # step NAME COMMAND...: runs it under the time limit, reports, keeps going
  local name=$1; shift
  echo "== $name"
  timeout --kill-after=10 "$LIMIT" "$@"
  local rc=$?
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then echo "== $name: TIMED OUT after ${LIMIT}s"; status=1
  elif [[ $rc -ne 0 ]]; then echo "== $name: failed (exit $rc)"; status=1
  else echo "== $name: ok"; fi
}

if [[ ! -f $BUILD/libtensordict_cuda.so || ! -x $BUILD/bench/bench_cuda || ! -x $BUILD/tests/test_cuda_storage ]]; then
  step build make -j"$(nproc)" BUILD="$BUILD" all cuda-bench "$BUILD"/tests/test_cuda_storage
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
export TENSORDICT_LIB=$PWD/$BUILD/libtensordict.so
step "C load test" "$BUILD"/tests/test_cuda_storage
step "CUDA specs" busted --lua=luajit tests/spec/cuda_spec.lua
step "figures" "$BUILD"/bench/bench_cuda
exit $status
