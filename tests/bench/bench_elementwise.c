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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "tensordict.h"

enum { REPS = 5 };

typedef struct job {
  int kind; /* 0 binary_, 1 binary (new tensor), 2 unary_, 3 unary (new tensor) */
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
    default: r = td_unary(j->op, j->a); break;
  }
  if (status != 0 || ((j->kind == 1 || j->kind == 3) && !r)) die();
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

/* Times j's op against memcpy moving `moved` bytes in all; prints one line. */
static void figure(const char *label, job *j, size_t moved, double target) {
  const int64_t n = (int64_t)(moved / 2);
  td_tensor *x = make(1, &n, TD_UINT8, 1), *y = make(1, &n, TD_UINT8, 1);
  j->mdst = td_tensor_data_borrow(y);
  j->msrc = td_tensor_data_borrow(x);
  j->nbytes = (size_t)n;
  run_op(j); /* warm */
  run_memcpy(j);
  double t_op, t_mem;
  bench_pair(REPS, run_op, j, run_memcpy, j, &t_op, &t_mem);
  printf("%s: %.1f GB/s moved, memcpy %.1f GB/s, ratio %.2f", label,
         bench_gbps((double)moved, t_op), bench_gbps((double)moved, t_mem), t_mem / t_op);
  if (target > 0) printf(" (target >= %.1f)", target);
  printf("\n");
  fflush(stdout);
  td_tensor_release(x);
  td_tensor_release(y);
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
  return 0;
}
