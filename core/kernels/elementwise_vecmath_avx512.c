/* elementwise_vecmath_avx512.c: the SLEEF loops for AVX-512 (built with -mavx512f;
 * run only where the CPU has it, see elementwise_vecmath.c). */
#include <immintrin.h>
#include <sleef.h>
#include <stdbool.h>
#include <string.h>

#include "elementwise.h"
#include "special_math.h"

#define VM_TABLE td_vecmath_avx512
#define VF __m512
#define VD __m512d
#define WF 16
#define WD 8
#define LDF _mm512_loadu_ps
#define STF _mm512_storeu_ps
#define LDD _mm512_loadu_pd
#define STD _mm512_storeu_pd
#define SLF(f) Sleef_##f##f16_u10
#define SLD(f) Sleef_##f##d8_u10
#define SLF15(f) Sleef_##f##f16_u15
#define SLD15(f) Sleef_##f##d8_u15
#define F_ONE _mm512_set1_ps(1.0f)
#define F_ZERO _mm512_setzero_ps()
#define F_ADD _mm512_add_ps
#define F_SUB _mm512_sub_ps
#define F_DIV _mm512_div_ps
#define D_ONE _mm512_set1_pd(1.0)
#define D_ZERO _mm512_setzero_pd()
#define D_ADD _mm512_add_pd
#define D_SUB _mm512_sub_pd
#define D_DIV _mm512_div_pd
#include "vecmath_impl.h"
