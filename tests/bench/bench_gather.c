/*
 * bench_gather.c: row gathering and joining against memcpy of the result's bytes,
 * measured in the same run: index_select of 1M random rows of 64 float32 along dim 0,
 * mask_rows with a random half of those rows (masked selection of whole rows), and
 * stack of 8 x [1024, 256] float32. Each op allocates its result, as callers see it;
 * the reference copies into a buffer that is already mapped. A second reference,
 * memcpy into a fresh allocation, shows how much of the gap is the kernel's page faults
 * on new memory (large on virtual machines, where a fault costs microseconds).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tensordict.h"

enum { REPS = 7 };

typedef struct job {
  int kind; /* 0 index_select, 1 mask_rows, 2 stack */
  const td_tensor *a, *index, *const *list;
  int32_t n;
  void *mdst;
  const void *msrc;
  size_t nbytes;
} job;

static void die(void) {
  fprintf(stderr, "bench_gather: %s\n", td_last_error());
  exit(1);
}

static void run_op(void *ctx) {
  job *j = ctx;
  td_tensor *out = j->kind == 0   ? td_index_select(j->a, 0, j->index)
                   : j->kind == 1 ? td_mask_rows(j->a, j->index)
                                  : td_stack(j->list, j->n, 0);
  if (!out) die();
  td_tensor_release(out);
}

static void run_memcpy(void *ctx) {
  job *j = ctx;
  memcpy(j->mdst, j->msrc, j->nbytes);
  bench_clobber(j->mdst);
}

static void run_fresh_memcpy(void *ctx) {
  job *j = ctx;
  void *p = NULL;
  if (posix_memalign(&p, 64, j->nbytes) != 0) exit(1);
  memcpy(p, j->msrc, j->nbytes);
  bench_clobber(p);
  free(p);
}

static td_tensor *make(int32_t ndim, const int64_t *shape, int32_t dtype) {
  td_tensor *t = td_tensor_full(ndim, shape, dtype, 1.0); /* touches every page */
  if (!t) die();
  return t;
}

/* Times the op against memcpy of the result's nbytes, alternating; prints one line. */
static void figure(const char *label, job *j, double target) {
  const int64_t n = (int64_t)j->nbytes;
  td_tensor *a = make(1, &n, TD_UINT8), *b = make(1, &n, TD_UINT8);
  j->mdst = td_tensor_data_borrow(b);
  j->msrc = td_tensor_data_borrow(a);
  run_op(j); /* warm: first touches of caches, TLB and the allocator */
  run_memcpy(j);
  double t_op, t_mem, t_op2, t_fresh;
  bench_pair(REPS, run_op, j, run_memcpy, j, &t_op, &t_mem);
  bench_pair(REPS, run_op, j, run_fresh_memcpy, j, &t_op2, &t_fresh);
  if (t_op2 < t_op) t_op = t_op2;
  printf("%s: %.1f GB/s, memcpy %.1f GB/s, ratio %.2f (target >= %.1f); "
         "memcpy into fresh pages %.1f GB/s, ratio %.2f\n", label,
         bench_gbps((double)j->nbytes, t_op), bench_gbps((double)j->nbytes, t_mem),
         t_mem / t_op, target, bench_gbps((double)j->nbytes, t_fresh), t_fresh / t_op);
  fflush(stdout);
  td_tensor_release(a);
  td_tensor_release(b);
}

/* A small deterministic generator, so every run picks the same rows. */
static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

int main(void) {
  const int64_t rows = 1 << 20, shape[2] = {rows, 64};
  td_tensor *a = make(2, shape, TD_FLOAT32);
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  {
    td_tensor *index = make(1, &rows, TD_INT64);
    int64_t *ix = td_tensor_data_borrow(index);
    for (int64_t i = 0; i < rows; i++) ix[i] = (int64_t)(next_random(&seed) % (uint64_t)rows);
    job j = {.kind = 0, .a = a, .index = index, .nbytes = (size_t)rows * 64 * 4};
    figure("index_select 1M random rows x 64 f32, dim 0", &j, 0.5);
    td_tensor_release(index);
  }
  {
    td_tensor *mask = make(1, &rows, TD_BOOL);
    uint8_t *m = td_tensor_data_borrow(mask);
    int64_t count = 0;
    for (int64_t i = 0; i < rows; i++) count += m[i] = (uint8_t)(next_random(&seed) & 1);
    job j = {.kind = 1, .a = a, .index = mask, .nbytes = (size_t)count * 64 * 4};
    figure("masked rows (mask_rows) 1M x 64 f32, half the rows", &j, 0.5);
    td_tensor_release(mask);
  }
  {
    const int64_t s[2] = {1024, 256};
    td_tensor *parts[8];
    for (int k = 0; k < 8; k++) parts[k] = make(2, s, TD_FLOAT32);
    job j = {.kind = 2, .list = (const td_tensor *const *)parts, .n = 8,
             .nbytes = (size_t)8 * 1024 * 256 * 4};
    figure("stack 8 x [1024, 256] f32, dim 0", &j, 0.8);
    for (int k = 0; k < 8; k++) td_tensor_release(parts[k]);
  }
  td_tensor_release(a);
  return 0;
}
