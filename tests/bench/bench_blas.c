/*
 * bench_blas.c: td_matmul against the raw cblas call on the same buffers, measured in
 * the same run: a contiguous 2048 x 2048 float32 gemm (where matmul must add nothing
 * but the output allocation), a transposed operand (passed as CblasTrans, not copied),
 * a batch of 64 128 x 128 products, and a matrix-vector product.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "tensordict.h"

enum { REPS = 7 };

typedef struct job {
  const td_tensor *a, *b; /* td_matmul(a, b) */
  const float *ra, *rb;   /* the reference's operands: the same memory */
  float *rc;              /* the reference's output, preallocated */
  int m, n, k, batch;
  int trans_a;            /* reference: a is stored as its transpose [k, m] */
  int mv;                 /* reference: sgemv instead of sgemm */
} job;

static void die(const char *what) {
  fprintf(stderr, "bench_blas: %s: %s\n", what, td_last_error());
  exit(1);
}

static void run_td(void *ctx) {
  job *j = ctx;
  td_tensor *r = td_matmul(j->a, j->b);
  if (!r) die("matmul");
  bench_clobber(td_tensor_data_borrow(r));
  td_tensor_release(r);
}

static void run_ref(void *ctx) {
  job *j = ctx;
  if (j->mv) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, j->m, j->k, 1.0f, j->ra, j->k, j->rb, 1, 0.0f,
                j->rc, 1);
  } else {
    const long sa = (long)j->m * j->k, sb = (long)j->k * j->n, sc = (long)j->m * j->n;
    for (int i = 0; i < j->batch; i++)
      cblas_sgemm(CblasRowMajor, j->trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, j->m,
                  j->n, j->k, 1.0f, j->ra + i * sa, j->trans_a ? j->m : j->k, j->rb + i * sb,
                  j->n, 0.0f, j->rc + i * sc, j->n);
  }
  bench_clobber(j->rc);
}

static td_tensor *make(int32_t ndim, const int64_t *shape) {
  td_tensor *t = td_tensor_empty(ndim, shape, TD_FLOAT32);
  if (!t) die("empty");
  td_generator *g = td_generator_new(1);
  if (td_uniform_(t, -1.0, 1.0, g) != 0) die("uniform_"); /* touches every page */
  td_generator_release(g);
  return t;
}

/* Times td_matmul against the reference (alternating) and prints one line. */
static void figure(const char *label, job *j, double target) {
  const size_t out = (size_t)j->batch * (size_t)j->m * (size_t)(j->mv ? 1 : j->n);
  j->rc = malloc(out * sizeof(float));
  if (!j->rc) die("malloc");
  bench_touch(j->rc, out * sizeof(float));
  run_td(j); /* warm: OpenBLAS's threads and buffers, caches */
  run_ref(j);
  double t_td, t_ref;
  bench_pair(REPS, run_td, j, run_ref, j, &t_td, &t_ref);
  const double flops = 2.0 * j->batch * j->m * (double)j->k * (j->mv ? 1 : j->n);
  printf("%s: %.1f GFLOP/s, %s %.1f GFLOP/s, ratio %.2f (target >= %.2f)\n", label,
         flops / t_td * 1e-9, j->mv ? "cblas_sgemv" : "cblas_sgemm", flops / t_ref * 1e-9,
         t_ref / t_td, target);
  fflush(stdout);
  free(j->rc);
}

int main(void) {
  printf("threads: %d\n", td_get_num_threads());
  {
    const int64_t s[2] = {2048, 2048};
    td_tensor *a = make(2, s), *b = make(2, s);
    job j = {a, b, td_tensor_data_borrow(a), td_tensor_data_borrow(b), NULL, 2048, 2048, 2048,
             1, 0, 0};
    figure("matmul 2048x2048 f32 contiguous", &j, 0.95);
    td_tensor at; /* a's transpose: a column-major view, passed as CblasTrans */
    if (td_tensor_transpose(a, 0, 1, &at) != 0) die("transpose");
    job jt = j;
    jt.a = &at;
    jt.trans_a = 1;
    figure("matmul 2048x2048 f32, left operand transposed (no copy)", &jt, 0.95);
    td_tensor_release(a);
    td_tensor_release(b);
  }
  {
    const int64_t s[3] = {64, 128, 128};
    td_tensor *a = make(3, s), *b = make(3, s);
    job j = {a, b, td_tensor_data_borrow(a), td_tensor_data_borrow(b), NULL, 128, 128, 128,
             64, 0, 0};
    figure("matmul [64,128,128] @ [64,128,128] f32 (one gemm per batch)", &j, 0.9);
    td_tensor_release(a);
    td_tensor_release(b);
  }
  {
    const int64_t s[2] = {4096, 4096}, v[1] = {4096};
    td_tensor *a = make(2, s), *x = make(1, v);
    job j = {a, x, td_tensor_data_borrow(a), td_tensor_data_borrow(x), NULL, 4096, 1, 4096,
             1, 0, 1};
    figure("matmul [4096,4096] @ [4096] f32 (gemv)", &j, 0.9);
    td_tensor_release(a);
    td_tensor_release(x);
  }
  return 0;
}
