/* elementwise_vecmath_avx2.c: the SLEEF loops for AVX2 (built with -mavx2 -mfma; run
 * only where the CPU has them, see elementwise_vecmath.c). */
#include <immintrin.h>
#include <sleef.h>
#include <stdbool.h>
#include <string.h>

#include "elementwise.h"
#include "special_math.h"

#define VM_TABLE td_vecmath_avx2
#define VF __m256
#define VD __m256d
#define WF 8
#define WD 4
#define LDF _mm256_loadu_ps
#define STF _mm256_storeu_ps
#define LDD _mm256_loadu_pd
#define STD _mm256_storeu_pd
#define SLF(f) Sleef_##f##f8_u10
#define SLD(f) Sleef_##f##d4_u10
#define SLF15(f) Sleef_##f##f8_u15
#define SLD15(f) Sleef_##f##d4_u15
#define F_ONE _mm256_set1_ps(1.0f)
#define F_ZERO _mm256_setzero_ps()
#define F_ADD _mm256_add_ps
#define F_SUB _mm256_sub_ps
#define F_DIV _mm256_div_ps
#define D_ONE _mm256_set1_pd(1.0)
#define D_ZERO _mm256_setzero_pd()
#define D_ADD _mm256_add_pd
#define D_SUB _mm256_sub_pd
#define D_DIV _mm256_div_pd
#include "vecmath_impl.h"
