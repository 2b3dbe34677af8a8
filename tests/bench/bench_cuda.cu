/*
 * bench_cuda.cu: the CUDA backend's four figures against raw CUDA in the same run
 * (issue 15), each the median of REPS timings (wall clock around a synchronized call):
 *   add       td_cuda_binary(ADD) bandwidth (2 reads + 1 write) / cudaMemcpy D2D's
 *             (1 read + 1 write)                                   target >= 0.8
 *   h2d       td_cuda_to_device from a pinned tensor / cudaMemcpy from cudaHostAlloc
 *                                                                 target >= 0.8
 *   sum       td_cuda_reduce(SUM) over all / a plain read kernel's bandwidth
 *                                                                 target >= 0.7
 *   matmul    td_cuda_matmul (4096^2 float32) / cublasSgemm      target >= 0.95
 * Prints one line per figure and "ratios: ..." last. scripts/cuda-check.sh runs it.
 */
#include <algorithm>
#include <chrono>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "tensordict.h"
#include "tensordict_cuda.h"

static const int REPS = 15;

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F> static double median_seconds(F f) {
  std::vector<double> t;
  f(); /* warm: caches, cuBLAS heuristics */
  cudaDeviceSynchronize();
  for (int i = 0; i < REPS; i++) {
    const double t0 = now();
    f();
    cudaDeviceSynchronize();
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

static void die(const char *what) {
  fprintf(stderr, "bench_cuda: %s failed: %s\n", what, td_last_error());
  exit(1);
}

__global__ void read_kernel(const float4 *x, int64_t n4, float *out) {
  float acc = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    const float4 v = x[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 12345.678f) out[0] = acc; /* keeps the loads */
}

int main() {
  const char *why = NULL;
  if (td_cuda_device_count(&why) < 1) {
    printf("bench_cuda: no CUDA device (%s)\n", why);
    return 2;
  }
  const int64_t n = 64LL << 20; /* 64 Mi float32: 256 MiB per tensor */
  const int64_t bytes = n * 4;
  td_tensor *a = td_cuda_empty(0, 1, &n, TD_FLOAT32), *b = td_cuda_empty(0, 1, &n, TD_FLOAT32);
  if (!a || !b || td_cuda_fill_(a, 1.5) || td_cuda_fill_(b, 2.5)) die("setup");
  void *raw_dst = NULL;
  cudaMalloc(&raw_dst, (size_t)bytes);

  /* 1. add vs device-to-device memcpy */
  const double t_add = median_seconds([&] {
    td_tensor *c = td_cuda_binary(TD_BINARY_ADD, a, b);
    if (!c) die("add");
    td_tensor_release(c);
  });
  const double t_copy = median_seconds([&] {
    cudaMemcpy(raw_dst, td_tensor_data_borrow(a), (size_t)bytes, cudaMemcpyDeviceToDevice);
  });
  const double add_bw = 3.0 * bytes / t_add, copy_bw = 2.0 * bytes / t_copy;
  printf("add: %.1f GB/s, D2D memcpy: %.1f GB/s\n", add_bw / 1e9, copy_bw / 1e9);

  /* 2. H2D from pinned memory vs raw cudaMemcpy */
  td_tensor *host = td_tensor_full(1, &n, TD_FLOAT32, 3.0);
  td_tensor *pinned = host ? td_cuda_pin(host) : NULL;
  if (!pinned) die("pin");
  void *raw_pinned = NULL;
  cudaHostAlloc(&raw_pinned, (size_t)bytes, cudaHostAllocDefault);
  const double t_h2d = median_seconds([&] {
    td_tensor *d = td_cuda_to_device(pinned, 0, 0);
    if (!d) die("to_device");
    td_tensor_release(d);
  });
  const double t_raw_h2d = median_seconds([&] {
    cudaMemcpy(raw_dst, raw_pinned, (size_t)bytes, cudaMemcpyHostToDevice);
  });
  printf("h2d pinned: %.1f GB/s, raw cudaMemcpy: %.1f GB/s\n", bytes / t_h2d / 1e9, bytes / t_raw_h2d / 1e9);

  /* 3. sum vs a read kernel */
  const double t_sum = median_seconds([&] {
    td_tensor *s = td_cuda_reduce(TD_RED_SUM, a, NULL, 0, 0, 0);
    if (!s) die("sum");
    td_tensor_release(s);
  });
  const double t_read = median_seconds([&] {
    read_kernel<<<1024 * 8, 256>>>((const float4 *)td_tensor_data_borrow(a), n / 4, (float *)raw_dst);
  });
  printf("sum: %.1f GB/s, read kernel: %.1f GB/s\n", bytes / t_sum / 1e9, bytes / t_read / 1e9);

  /* 4. matmul vs cublasSgemm */
  const int64_t m = 4096, shape[2] = {m, m};
  td_tensor *x = td_cuda_empty(0, 2, shape, TD_FLOAT32), *y = td_cuda_empty(0, 2, shape, TD_FLOAT32);
  if (!x || !y || td_cuda_fill_(x, 0.5) || td_cuda_fill_(y, 0.25)) die("matmul setup");
  const double t_mm = median_seconds([&] {
    td_tensor *z = td_cuda_matmul(x, y);
    if (!z) die("matmul");
    td_tensor_release(z);
  });
  cublasHandle_t hnd;
  cublasCreate(&hnd);
  const float one = 1, zero = 0;
  const double t_blas = median_seconds([&] {
    cublasSgemm(hnd, CUBLAS_OP_N, CUBLAS_OP_N, (int)m, (int)m, (int)m, &one,
                (const float *)td_tensor_data_borrow(y), (int)m, (const float *)td_tensor_data_borrow(x),
                (int)m, &zero, (float *)raw_dst, (int)m);
  });
  const double flops = 2.0 * m * m * m;
  printf("matmul: %.1f TFLOP/s, cublasSgemm: %.1f TFLOP/s\n", flops / t_mm / 1e12, flops / t_blas / 1e12);

  printf("ratios: add/memcpy %.2f (>= 0.8), h2d/raw %.2f (>= 0.8), sum/read %.2f (>= 0.7), "
         "matmul/cublas %.2f (>= 0.95)\n", add_bw / copy_bw, t_raw_h2d / t_h2d, t_read / t_sum,
         t_blas / t_mm);
  return 0;
}
