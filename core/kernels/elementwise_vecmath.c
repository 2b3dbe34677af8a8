/*
 * elementwise_vecmath.c: exp, log, log1p, expm1, sin, cos, tanh, sigmoid and the other
 * transcendentals (tan, asin .. cosh, atanh, log2, log10, exp2, erf, erfc, lgamma) of
 * float32 and float64 tensors through SLEEF's vector functions (at most 1 ulp from the
 * exact result, erfc 1.5, within the specs' tolerance like the libm calls they replace),
 * and erfinv: core/include/special_math.h's method on vectors (vecmath_impl.h).
 * asinh and acosh keep libm's scalar calls: SLEEF's give inf past |x| ~ 1.8e19 (float32)
 * and ~ 1.3e154 (float64), where the result is still ~ log(2|x|) (test_elementwise).
 *
 * glibc's scalar tanhf costs ~20 ns an element and expf ~4 ns, where pipeline steps
 * spend their time. The loops (vecmath_impl.h) are compiled for SSE2 here, and for
 * AVX2 and AVX-512 in elementwise_vecmath_avx2.c / _avx512.c (built with those flags);
 * the widest the CPU runs is chosen once. float16 and bfloat16 keep the scalar loops of
 * elementwise_unary.c.
 */
#include <emmintrin.h>
#include <sleef.h>
#include <stdbool.h>
#include <string.h>

#include "elementwise.h"
#include "special_math.h"

#define VM_TABLE td_vecmath_sse2
#define VF __m128
#define VD __m128d
#define WF 4
#define WD 2
#define LDF _mm_loadu_ps
#define STF _mm_storeu_ps
#define LDD _mm_loadu_pd
#define STD _mm_storeu_pd
#define SLF(f) Sleef_##f##f4_u10
#define SLD(f) Sleef_##f##d2_u10
#define SLF15(f) Sleef_##f##f4_u15
#define SLD15(f) Sleef_##f##d2_u15
#define F_ONE _mm_set1_ps(1.0f)
#define F_ZERO _mm_setzero_ps()
#define F_ADD _mm_add_ps
#define F_SUB _mm_sub_ps
#define F_DIV _mm_div_ps
#define D_ONE _mm_set1_pd(1.0)
#define D_ZERO _mm_setzero_pd()
#define D_ADD _mm_add_pd
#define D_SUB _mm_sub_pd
#define D_DIV _mm_div_pd
#include "vecmath_impl.h"

td_inner_loop td_vecmath_avx2(int32_t op, int32_t dtype);
td_inner_loop td_vecmath_avx512(int32_t op, int32_t dtype);

typedef td_inner_loop (*vecmath_table)(int32_t op, int32_t dtype);

static vecmath_table choose(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return td_vecmath_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return td_vecmath_avx2;
  return td_vecmath_sse2;
}

td_inner_loop td_ew_vecmath_loop(int32_t op, int32_t dtype) {
  static vecmath_table table; /* a race here writes the same value twice */
  if (!table) table = choose();
  return table(op, dtype);
}
