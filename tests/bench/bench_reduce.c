/*
 * bench_reduce.c: reductions against the bandwidth of reading the same bytes, measured
 * in the same run.
 *
 * The references, both over the input's bytes (counted once, as bytes read):
 *  - memcpy: memcpy of the whole input into another buffer of the same size, timed and
 *    counted as input bytes / time (it also writes as many bytes, so this is the lower,
 *    classic "memcpy bandwidth" figure); the target ratio is against it;
 *  - read loop: one thread summing the input as uint64 words with 4 accumulators, a
 *    plain loop the compiler vectorises (a pure read stream, no writes).
 * Reductions run on the library's pool (td_get_num_threads() threads); both references
 * are single-threaded, as memcpy is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tensordict.h"

enum { REPS = 7 };

typedef struct job {
  int32_t op;
  const td_tensor *x;
  const int32_t *dims;
  int32_t ndims;
  double param;
  void *mdst;
  const void *msrc;
  size_t nbytes;
  uint64_t sink;
} job;

static void run_reduce(void *ctx) {
  job *j = ctx;
  td_tensor *r = td_reduce(j->op, j->x, j->dims, j->ndims, 0, j->param);
  if (!r) {
    fprintf(stderr, "bench_reduce: %s\n", td_last_error());
    exit(1);
  }
  td_tensor_release(r);
}

static void run_memcpy(void *ctx) {
  job *j = ctx;
  memcpy(j->mdst, j->msrc, j->nbytes);
  bench_clobber(j->mdst);
}

static void run_read(void *ctx) {
  job *j = ctx;
  const uint64_t *p = j->msrc;
  const size_t n = j->nbytes / 8;
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  j->sink += s0 + s1 + s2 + s3;
  bench_clobber(&j->sink);
}

static td_tensor *make(int32_t ndim, const int64_t *shape, int32_t dtype, double value) {
  td_tensor *t = td_tensor_full(ndim, shape, dtype, value); /* touches every page */
  if (!t) {
    fprintf(stderr, "bench_reduce: %s\n", td_last_error());
    exit(1);
  }
  return t;
}

/* Times the reduction against memcpy and the read loop over the input's bytes. */
static void figure(const char *label, int32_t op, const td_tensor *x, const int32_t *dims,
                   int32_t ndims, double param, double target) {
  const int64_t n = td_tensor_numel(x) * x->itemsize;
  td_tensor *dst = make(1, &n, TD_UINT8, 0);
  job j = {op, x, dims, ndims, param, td_tensor_data_borrow(dst), td_tensor_data_borrow(x),
           (size_t)n, 0};
  run_reduce(&j); /* warm: first touches of caches, TLB and the pool */
  run_memcpy(&j);
  run_read(&j);
  double t_red, t_mem, t_red2, t_read;
  bench_pair(REPS, run_reduce, &j, run_memcpy, &j, &t_red, &t_mem);
  bench_pair(REPS, run_reduce, &j, run_read, &j, &t_red2, &t_read);
  if (t_red2 < t_red) t_red = t_red2;
  const double gb = (double)n;
  printf("%s: %.1f GB/s, memcpy %.1f GB/s, ratio %.2f", label, bench_gbps(gb, t_red),
         bench_gbps(gb, t_mem), t_mem / t_red);
  if (target > 0) printf(" (target >= %.1f)", target);
  printf("; read loop %.1f GB/s, ratio %.2f\n", bench_gbps(gb, t_read), t_read / t_red);
  fflush(stdout);
  td_tensor_release(dst);
}

int main(void) {
  const int64_t n = 16 << 20; /* 16M elements: 64 MiB of float32 */
  const int64_t mat[2] = {4096, 4096};
  const int32_t d0[1] = {0}, d1[1] = {1};
  printf("threads: %d\n", (int)td_get_num_threads());
  td_tensor *v = make(1, &n, TD_FLOAT32, 1.0);
  figure("sum 64MiB f32 (all dims)", TD_RED_SUM, v, NULL, 0, 0, 0.8);
  figure("max 64MiB f32", TD_RED_MAX, v, NULL, 0, 0, 0);
  figure("argmax 64MiB f32", TD_RED_ARGMAX, v, NULL, 0, 0, 0);
  figure("mean 64MiB f32", TD_RED_MEAN, v, NULL, 0, 0, 0);
  figure("var 64MiB f32 (two passes per cached piece)", TD_RED_VAR, v, NULL, 0, 1, 0);
  figure("norm 64MiB f32", TD_RED_NORM, v, NULL, 0, 2, 0);
  td_tensor_release(v);
  td_tensor *m = make(2, mat, TD_FLOAT32, 1.0);
  figure("sum 4096x4096 f32 over dim 0 (rows accumulate)", TD_RED_SUM, m, d0, 1, 0, 0);
  figure("sum 4096x4096 f32 over dim 1 (contiguous rows)", TD_RED_SUM, m, d1, 1, 0, 0);
  figure("var 4096x4096 f32 over dim 0", TD_RED_VAR, m, d0, 1, 1, 0);
  td_tensor_release(m);
  td_tensor *iv = make(1, &n, TD_INT32, 1.0);
  figure("sum 64MiB int32 -> int64", TD_RED_SUM, iv, NULL, 0, 0, 0);
  td_tensor_release(iv);
  return 0;
}
