/*
 * bench_elementwise.c: elementwise throughput against memcpy moving the same bytes,
 * measured in the same run. An op that reads k inputs and writes one output of N bytes
 * each moves (k + 1) * N bytes; memcpy of (k + 1) * N / 2 bytes moves as many (half read,
 * half written), so the ratio compares like traffic. Best of 5, warm buffers.
 *
 * The main figure is a float32 add of two 16M-element tensors written into a warm
 * tensor (add_, the same traffic as a + b into a reused buffer), on all threads and on
 * one (memcpy uses one). td_binary, which returns a new tensor, is shown too: it also
 * pays for the first touch of the output's fresh pages (64 MiB is mmapped anew by the
 * allocator for every call), which dominates on a virtual machine.
 *
 * Then a size sweep (1e4 to 1e7 elements, 1 and 2 threads) of the ops as a pipeline
 * calls them: a + b and a * 2 into a new tensor released at once (so the block cache
 * hands the same block back, as torch's allocator does), a += b, and exp into a new
 * tensor, each as a batch of calls lasting a few ms, against memcpy batches of the same
 * bytes (memcpy on one thread). A ratio under 1 at 1e4-1e5 is per-call overhead; at 1e6
 * and up, bandwidth.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tensordict.h"

enum { REPS = 5 };

typedef struct job {
  int kind; /* 0 binary_, 1 binary (new tensor), 2 unary_, 3 unary (new tensor), 4 binary
              with the scalar 2 (new tensor) */
  int32_t op;
  td_tensor *a;
  const td_tensor *b;
  void *mdst;
  const void *msrc;
  size_t nbytes;
} job;

static void die(void) {
  fprintf(stderr, "bench_elementwise: %s\n", td_last_error());
  exit(1);
}

static void run_op(void *ctx) {
  job *j = ctx;
  td_tensor *r = NULL;
  int32_t status = 0;
  switch (j->kind) {
    case 0: status = td_binary_(j->op, j->a, j->b); break;
    case 1: r = td_binary(j->op, j->a, j->b); break;
    case 2: status = td_unary_(j->op, j->a); break;
    case 4: r = td_binary_scalar(j->op, j->a, 2, TD_SCALAR_INT, 0); break;
    default: r = td_unary(j->op, j->a); break;
  }
  if (status != 0 || ((j->kind == 1 || j->kind >= 3) && !r)) die();
  td_tensor_release(r);
}

static void run_memcpy(void *ctx) {
  job *j = ctx;
  memcpy(j->mdst, j->msrc, j->nbytes);
  bench_clobber(j->mdst);
}

static td_tensor *make(int32_t ndim, const int64_t *shape, int32_t dtype, double v) {
  td_tensor *t = td_tensor_full(ndim, shape, dtype, v); /* touches every page */
  if (!t) die();
  return t;
}

typedef struct batch {
  job *j;
  int64_t calls;
} batch;

static void run_op_batch(void *ctx) {
  batch *b = ctx;
  for (int64_t i = 0; i < b->calls; i++) run_op(b->j);
}

static void run_memcpy_batch(void *ctx) {
  batch *b = ctx;
  for (int64_t i = 0; i < b->calls; i++) run_memcpy(b->j);
}

/* Best-of-REPS seconds of `calls` calls of j's op and of memcpy moving the same `moved`
 * bytes a call (half read, half written), alternately, after one warm batch each. */
static void against_memcpy(job *j, size_t moved, int64_t calls, double *t_op, double *t_mem) {
  const int64_t half = (int64_t)(moved / 2);
  td_tensor *x = make(1, &half, TD_UINT8, 1), *y = make(1, &half, TD_UINT8, 1);
  j->mdst = td_tensor_data_borrow(y);
  j->msrc = td_tensor_data_borrow(x);
  j->nbytes = (size_t)half;
  batch b = {j, calls};
  run_op_batch(&b); /* warm: the block cache, the pool */
  run_memcpy_batch(&b);
  bench_pair(REPS, run_op_batch, &b, run_memcpy_batch, &b, t_op, t_mem);
  td_tensor_release(x);
  td_tensor_release(y);
}

/* j's op against memcpy moving `moved` bytes in all; prints one line. */
static void figure(const char *label, job *j, size_t moved, double target) {
  double t_op, t_mem;
  against_memcpy(j, moved, 1, &t_op, &t_mem);
  printf("%s: %.1f GB/s moved, memcpy %.1f GB/s, ratio %.2f", label,
         bench_gbps((double)moved, t_op), bench_gbps((double)moved, t_mem), t_mem / t_op);
  if (target > 0) printf(" (target >= %.1f)", target);
  printf("\n");
  fflush(stdout);
}

/* One row of the sweep: op j on n elements moving `moved` bytes a call, in batches of
 * enough calls for ~100 MB of traffic. */
static void sweep_row(const char *label, job *j, int64_t n, size_t moved) {
  const int64_t calls = (int64_t)(100e6 / (double)moved) + 1;
  double t_op, t_mem;
  against_memcpy(j, moved, calls, &t_op, &t_mem);
  printf("  %-10s %9lld %d thr: %7.2f us/call, %5.1f GB/s, memcpy %5.1f GB/s, ratio %.2f\n",
         label, (long long)n, (int)td_get_num_threads(), t_op / (double)calls * 1e6,
         bench_gbps((double)moved * (double)calls, t_op),
         bench_gbps((double)moved * (double)calls, t_mem), t_mem / t_op);
  fflush(stdout);
}

static void size_sweep(void) {
  const int32_t threads = td_get_num_threads();
  printf("size sweep (ratio: memcpy time of the same bytes / op time)\n");
  for (int t = 1; t <= 2; t++) {
    td_set_num_threads(t);
    for (int64_t n = 10000; n <= 10000000; n *= 10) {
      td_tensor *a = make(1, &n, TD_FLOAT32, 0.5), *b = make(1, &n, TD_FLOAT32, 0.25);
      const size_t nb = (size_t)n * 4;
      job add = {.kind = 1, .op = TD_BINARY_ADD, .a = a, .b = b};
      sweep_row("add", &add, n, 3 * nb);
      job add_ = {.kind = 0, .op = TD_BINARY_ADD, .a = a, .b = b};
      sweep_row("add_", &add_, n, 3 * nb);
      job mul = {.kind = 4, .op = TD_BINARY_MUL, .a = a};
      sweep_row("mul_scalar", &mul, n, 2 * nb);
      job ex = {.kind = 3, .op = TD_UNARY_EXP, .a = b};
      sweep_row("exp", &ex, n, 2 * nb);
      td_tensor_release(a);
      td_tensor_release(b);
    }
  }
  td_set_num_threads(threads);
}

int main(void) {
  const int64_t n = 16 << 20; /* 16M elements: 64 MiB of float32 */
  const size_t mib64 = (size_t)n * 4;
  printf("threads: %d\n", (int)td_get_num_threads());
  td_tensor *a = make(1, &n, TD_FLOAT32, 1.5), *b = make(1, &n, TD_FLOAT32, 0.25);
  {
    job j = {.kind = 0, .op = TD_BINARY_ADD, .a = a, .b = b};
    figure("add_ 16M f32 (a += b, 3 x 64 MiB)", &j, 3 * mib64, 0.7);
    /* memcpy runs on one thread: the same add on one thread, for a like-for-like ratio */
    const int32_t threads = td_get_num_threads();
    td_set_num_threads(1);
    figure("add_ 16M f32, 1 thread", &j, 3 * mib64, 0.7);
    td_set_num_threads(threads);
    j.kind = 1;
    figure("add 16M f32 (new tensor, 3 x 64 MiB)", &j, 3 * mib64, 0);
    j.kind = 0;
    j.op = TD_BINARY_MUL;
    figure("mul_ 16M f32 (3 x 64 MiB)", &j, 3 * mib64, 0);
  }
  {
    td_tensor *e = make(1, &n, TD_FLOAT32, -0.5);
    job j = {.kind = 3, .op = TD_UNARY_EXP, .a = e};
    figure("exp 16M f32 (new tensor, 2 x 64 MiB)", &j, 2 * mib64, 0);
    j.kind = 2;
    j.op = TD_UNARY_SIGMOID; /* exp_ would overflow after a few rounds; sigmoid stays bounded */
    figure("sigmoid_ 16M f32 (an exp per element, 2 x 64 MiB)", &j, 2 * mib64, 0);
    td_tensor_release(e);
  }
  {
    const int64_t shape[2] = {4096, 4096}, row[1] = {4096};
    td_tensor *m = make(2, shape, TD_FLOAT32, 1), *r = make(1, row, TD_FLOAT32, 0.5);
    job j = {.kind = 0, .op = TD_BINARY_ADD, .a = m, .b = r};
    figure("broadcast add_ [4096,4096] += [4096] f32 (2 x 64 MiB)", &j, 2 * mib64, 0);
    td_tensor_release(m);
    td_tensor_release(r);
  }
  td_tensor_release(a);
  td_tensor_release(b);
  size_sweep();
  return 0;
}
