/*
 * reduce_sum_avx2.c: the float32 sum row kernel with AVX2 intrinsics, for CPUs that
 * have AVX2 (td_reduce_vec_row picks it).
 *
 * A float32 sum accumulates in double, so each 4 elements cost a conversion (two
 * micro-ops, one on the shuffle port) and an add. The generic kernel (reduce_loops.c)
 * is written for every dtype and its compiled loop loads 8 floats, extracts the upper
 * half and converts both: one shuffle more per 8 elements on the port the conversion
 * already saturates. Here each conversion reads its 4 floats straight from memory
 * (~1.2x on rows in L2). The order of the additions is the generic kernel's exactly:
 * 32 lanes (the 8 vectors a[k] hold lanes 4k .. 4k+3) folded into 8 by the same tree,
 * then the 8-lane loop, the lanes joined in order, and the tail; so both give the same
 * bits.
 */
#include <immintrin.h>
#include <stdint.h>

#include "reduce.h"

#if defined(__x86_64__) || defined(__i386__)

enum { LANES = 8, WIDE_LANES = 32 };

__attribute__((target("avx2"))) void td_reduce_sum_f32_avx2(td_reduce_acc *acc, const char *p,
                                                           int64_t s, int64_t n, int64_t pos,
                                                           double prm) {
  (void)pos, (void)prm;
  double r = acc->a;
  int64_t i = 0;
  if (s == (int64_t)sizeof(float) && n >= LANES) {
    const float *x = (const float *)(const void *)p;
    double t[LANES] = {0};
    if (n >= WIDE_LANES) {
      __m256d a[8];
      for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_pd();
      for (; i + WIDE_LANES <= n; i += WIDE_LANES)
        for (int k = 0; k < 8; k++) a[k] = _mm256_add_pd(a[k], _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4 * k)));
      /* lane j of t is (u[j] + u[j+8]) + (u[j+16] + u[j+24]), u[4k + l] = a[k][l] */
      _mm256_storeu_pd(t, _mm256_add_pd(_mm256_add_pd(a[0], a[2]), _mm256_add_pd(a[4], a[6])));
      _mm256_storeu_pd(t + 4, _mm256_add_pd(_mm256_add_pd(a[1], a[3]), _mm256_add_pd(a[5], a[7])));
    }
    for (; i + LANES <= n; i += LANES)
      for (int k = 0; k < LANES; k++) t[k] = t[k] + (double)x[i + k];
    for (int k = 0; k < LANES; k++) r = r + t[k];
  }
  for (; i < n; i++) r = r + (double)*(const float *)(const void *)(p + i * s);
  acc->a = r;
}

#endif
