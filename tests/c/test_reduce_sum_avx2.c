/* test_reduce_sum_avx2.c: the float32 sum's AVX2 row kernel (core/kernels/
 * reduce_sum_avx2.c, compiled into this test, as the library's copy is internal) gives
 * the generic kernel's bits. The generic kernel folds float64 rows in the same order
 * with the same double additions, so its float64 sum of the float32 values widened is
 * the double the AVX2 kernel must hold, bit for bit: for every row length up to a
 * piece (longer rows are cut and merged by the engine, not the kernel), at offsets that
 * leave the loads unaligned, and with a starting state that is not zero. On a CPU
 * without AVX2 the library never calls the kernel, and the test says so. */
#include <stdint.h>

#include "check.h"
#include "rng.h"
#include "../../core/kernels/reduce_sum_avx2.c"

enum { MAX_N = 32768, OFFSETS = 3 };
static float xf[MAX_N + OFFSETS];

/* The library's float64 sum of xf[off .. off+n) widened (1 thread, one piece). */
static double generic_sum(int64_t off, int64_t n) {
  td_tensor *t = td_tensor_empty(1, &n, TD_FLOAT64);
  double *d = td_tensor_data_borrow(t);
  for (int64_t i = 0; i < n; i++) d[i] = xf[off + i];
  td_tensor *s = td_reduce(TD_RED_SUM, t, NULL, 0, 0, 0);
  const double r = s ? *(const double *)td_tensor_data_borrow(s) : NAN;
  td_tensor_release(s);
  td_tensor_release(t);
  return r;
}

int main(void) {
  rng_state = 0x853C49E6748FEA9Bull; /* this test's own sequence */
  if (!__builtin_cpu_supports("avx2")) {
    printf("test_reduce_sum_avx2: this CPU has no AVX2; the kernel is never used here\n");
    CHECK(1);
    CHECK_SUMMARY();
  }
  td_set_num_threads(1);
  for (int64_t i = 0; i < MAX_N + OFFSETS; i++) /* mixed signs, magnitudes 2^-20 .. 2^20 */
    xf[i] = (float)ldexp((double)(rnd() >> 11) * 0x1p-53 * 2 - 1, (int)(rnd() % 41) - 20);
  int differ = 0, cases = 0;
  for (int64_t n = 0; n <= MAX_N; n += n < 300 ? 1 : n < 4096 ? 61 : 1021) {
    for (int64_t off = 0; off < OFFSETS; off++) {
      td_reduce_acc acc = {0, 0, 0, -1};
      td_reduce_sum_f32_avx2(&acc, (const char *)(xf + off), (int64_t)sizeof(float), n, 0, 0);
      const double want = generic_sum(off, n);
      differ += memcmp(&acc.a, &want, sizeof want) != 0;
      cases++;
    }
  }
  CHECK(cases > 900);
  CHECK_EQ_I(differ, 0);
  /* Folding into a state that holds earlier pieces: the chain starts from it... */
  td_reduce_acc acc = {0.1, 0, 0, -1};
  td_reduce_sum_f32_avx2(&acc, (const char *)xf, (int64_t)sizeof(float), 1000, 0, 0);
  td_reduce_acc fresh = {0, 0, 0, -1};
  td_reduce_sum_f32_avx2(&fresh, (const char *)xf, (int64_t)sizeof(float), 1000, 0, 0);
  CHECK(acc.a != fresh.a && fabs(acc.a - fresh.a - 0.1) < 1e-9);
  /* ...and a strided row takes the scalar loop: every other element of xf. */
  td_reduce_acc strided = {0, 0, 0, -1};
  td_reduce_sum_f32_avx2(&strided, (const char *)xf, 2 * (int64_t)sizeof(float), 500, 0, 0);
  double want = 0;
  for (int64_t i = 0; i < 500; i++) want = want + (double)xf[2 * i];
  CHECK(strided.a == want);
  CHECK_SUMMARY();
}
