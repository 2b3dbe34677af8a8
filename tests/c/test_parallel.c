/*
 * test_parallel.c: the thread pool (core/src/parallel.c) through the kernels that use
 * it: the same bits for 1, 2, 3 and 5 threads at sizes just above one chunk, where the
 * elementwise grain depends on the thread count (td_parallel_even_grain) and rows of odd
 * length end inside chunks; back-to-back jobs (workers caught spinning), jobs after a
 * pause (workers asleep on their futex), resizing and shutting the pool down between
 * jobs, and a forked child that starts its own pool while the parent's spins.
 */
#include <sys/wait.h>
#include <time.h>

#include "tensors.h"

/* Inputs with fractions (exp and sigmoid of them fill every bit of the result). */
static td_tensor *fractions(int32_t ndim, const int64_t *shape, int layout, int seed) {
  td_tensor *ints = make(ndim, shape, TD_FLOAT32, layout, seed);
  td_tensor *f = td_binary_scalar(TD_BINARY_MUL, ints, 0.37, TD_SCALAR_FLOAT, 0);
  td_tensor_release(ints);
  return f;
}

/* The ops under test, each a new contiguous result from x and y (same shape). */
static td_tensor *run_op(int op, const td_tensor *x, const td_tensor *y) {
  switch (op) {
    case 0: return td_unary(TD_UNARY_EXP, x);
    case 1: return td_unary(TD_UNARY_SIGMOID, x);
    case 2: return td_binary(TD_BINARY_ADD, x, y);
    case 3: { /* in place, on a copy */
      td_tensor *r = td_tensor_contiguous(x);
      td_tensor *c = td_tensor_clone(r);
      td_tensor_release(r);
      td_binary_(TD_BINARY_MUL, c, y);
      return c;
    }
    case 4: return td_reduce(TD_RED_SUM, x, NULL, 0, 0, 0);
    case 5: {
      const int32_t dim = 0;
      return td_reduce(TD_RED_SUM, x, &dim, 1, 0, 0);
    }
    default: return td_tensor_contiguous(x); /* a copy of a strided view */
  }
}
enum { NUM_OPS = 7 };

/* Sizes around one and a few chunks of TD_GRAIN (32768) elements, in rows of odd
 * lengths so that chunk boundaries fall inside rows, in three layouts. */
static void test_same_bits(void) {
  const int64_t shapes[][2] = {{1, 32769}, {7, 5813}, {31, 3229}, {100003, 1}, {257, 1031}};
  const int threads[] = {2, 3, 5};
  const int layouts[] = {CONTIGUOUS, TRANSPOSED, SLICED};
  int bad = 0, cases = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
      td_tensor *x = fractions(2, shapes[s], layouts[l], 1 + (int)s);
      td_tensor *y = fractions(2, shapes[s], layouts[l], 5 + (int)s);
      for (int op = 0; op < NUM_OPS; op++) {
        td_set_num_threads(1);
        td_tensor *one = run_op(op, x, y);
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
          td_set_num_threads(threads[t]);
          td_tensor *many = run_op(op, x, y);
          cases++;
          if (!same_bytes(one, many)) {
            fprintf(stderr, "same_bits: shape [%lld, %lld] layout %d op %d differs with %d threads\n",
                    (long long)shapes[s][0], (long long)shapes[s][1], layouts[l], op, threads[t]);
            bad++;
          }
          td_tensor_release(many);
        }
        td_tensor_release(one);
      }
      td_tensor_release(x);
      td_tensor_release(y);
    }
  }
  CHECK_EQ_I(cases, 5 * 3 * NUM_OPS * 3);
  CHECK_EQ_I(bad, 0);
}

static void pause_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

/* Many jobs in a row, then jobs after pauses longer than the workers spin, with the
 * pool resized and shut down in between: every result equals the 1-thread one. */
static int stress(const td_tensor *x, const td_tensor *y, const td_tensor *want) {
  int bad = 0;
  for (int round = 0; round < 6; round++) {
    td_set_num_threads(2 + round % 3);
    if (round == 4) td_shutdown(); /* the pool restarts on the next job */
    for (int k = 0; k < 300; k++) {
      td_tensor *r = td_binary(TD_BINARY_ADD, x, y);
      bad += !same_bytes(r, want);
      td_tensor_release(r);
      if (k % 60 == 59) pause_us(300); /* the workers fall asleep */
    }
  }
  return bad;
}

static void test_pool_lifecycle(void) {
  const int64_t shape[2] = {100, 1001};
  td_tensor *x = fractions(2, shape, CONTIGUOUS, 3), *y = fractions(2, shape, SLICED, 4);
  td_set_num_threads(1);
  td_tensor *want = td_binary(TD_BINARY_ADD, x, y);
  CHECK_EQ_I(stress(x, y, want), 0);

  /* A child forked while the parent's workers spin has no pool threads: it starts its
   * own on its first job, and the parent's keeps working. */
  td_set_num_threads(2);
  td_tensor *warm = td_binary(TD_BINARY_ADD, x, y);
  td_tensor_release(warm);
  pid_t pid = fork();
  if (pid == 0) _exit(stress(x, y, want) == 0 ? 0 : 1);
  CHECK(pid > 0);
  int parent_bad = stress(x, y, want), status = -1;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_EQ_I(parent_bad, 0);

  td_tensor_release(want);
  td_tensor_release(x);
  td_tensor_release(y);
}

int main(void) {
  const int32_t saved = td_get_num_threads();
  test_same_bits();
  test_pool_lifecycle();
  td_set_num_threads(saved);
  CHECK_SUMMARY();
}
