/*
 * bench_copy.c: copy_ throughput against memcpy of the same bytes, measured in the same
 * run: a contiguous copy, a transpose to contiguous, and a float32 -> float64 cast.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tensordict.h"

enum { REPS = 5 };

typedef struct job {
  td_tensor *dst;
  const td_tensor *src;
  void *mdst;
  const void *msrc;
  size_t nbytes;
} job;

static void run_copy(void *ctx) {
  job *j = ctx;
  if (td_tensor_copy_(j->dst, j->src) != 0) {
    fprintf(stderr, "bench_copy: %s\n", td_last_error());
    exit(1);
  }
}

static void run_memcpy(void *ctx) {
  job *j = ctx;
  memcpy(j->mdst, j->msrc, j->nbytes);
  bench_clobber(j->mdst);
}

static td_tensor *make(int32_t ndim, const int64_t *shape, int32_t dtype) {
  td_tensor *t = td_tensor_full(ndim, shape, dtype, 1.0); /* touches every page */
  if (!t) {
    fprintf(stderr, "bench_copy: %s\n", td_last_error());
    exit(1);
  }
  return t;
}

/* Times copy_(dst, src) against memcpy of nbytes between two buffers from the same
 * allocator (64-byte aligned tensors), alternating the two; prints one line. */
static void figure(const char *label, td_tensor *dst, const td_tensor *src, size_t nbytes,
                   double target) {
  const int64_t n = (int64_t)nbytes;
  td_tensor *a = make(1, &n, TD_UINT8), *b = make(1, &n, TD_UINT8);
  job j = {dst, src, td_tensor_data_borrow(b), td_tensor_data_borrow(a), nbytes};
  run_copy(&j); /* warm: first touches of caches and TLB */
  run_memcpy(&j);
  double t_copy, t_mem;
  bench_pair(REPS, run_copy, &j, run_memcpy, &j, &t_copy, &t_mem);
  printf("%s: %.1f GB/s, memcpy %.1f GB/s, ratio %.2f (target >= %.1f)\n", label,
         bench_gbps((double)nbytes, t_copy), bench_gbps((double)nbytes, t_mem),
         t_mem / t_copy, target);
  fflush(stdout);
  td_tensor_release(a);
  td_tensor_release(b);
}

int main(void) {
  const int64_t n = 16 << 20; /* 16M elements: 64 MiB of float32 */
  {
    td_tensor *src = make(1, &n, TD_FLOAT32), *dst = make(1, &n, TD_FLOAT32);
    figure("copy 64MiB f32 contiguous", dst, src, (size_t)n * 4, 0.9);
    td_tensor_release(src);
    td_tensor_release(dst);
  }
  {
    const int64_t shape[2] = {4096, 4096};
    td_tensor *src = make(2, shape, TD_FLOAT32), *dst = make(2, shape, TD_FLOAT32);
    td_tensor srct; /* a caller-owned view: src must outlive it */
    if (td_tensor_transpose(src, 0, 1, &srct) != 0) {
      fprintf(stderr, "bench_copy: %s\n", td_last_error());
      exit(1);
    }
    figure("copy 4096x4096 f32 transpose to contiguous", dst, &srct, (size_t)n * 4, 0.4);
    td_tensor_release(src);
    td_tensor_release(dst);
  }
  {
    td_tensor *src = make(1, &n, TD_FLOAT32), *dst = make(1, &n, TD_FLOAT64);
    figure("cast 16M f32->f64 (vs memcpy of the 128MiB output)", dst, src, (size_t)n * 8, 0.6);
    td_tensor_release(src);
    td_tensor_release(dst);
  }
  return 0;
}
