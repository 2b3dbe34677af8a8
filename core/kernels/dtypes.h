/*
 * dtypes.h: what every kernel needs to treat the ten dtypes alike: the X-macro lists
 * of (enum suffix, stored C type, kind), loading a stored element as its natural C
 * type, and converting any natural value into a stored type with the project's rules.
 * copy.c's casts are built from these; other kernels use them for their typed loops.
 */
#ifndef TD_KERNEL_DTYPES_H
#define TD_KERNEL_DTYPES_H

#include <stdint.h>

#include "iter.h"

/* ---- element conversions ----------------------------------------------------------
 * Float to integer truncates toward zero; NaN gives 0 and out-of-range values saturate,
 * so no conversion is undefined behaviour. Integer to narrower integer wraps (modulo
 * 2^n, which gcc and clang define). half and bfloat16 travel through float. */

/* Where the bounds are exact in the source's float type, clamping first is exact and
 * branch-free (min/max instructions, which vectorise); hence one set per source type. */
#define DEF_SAT(NAME, T, F, LO, HI)                                                \
  static inline T NAME(F x) {                                                      \
    x = x != x ? 0 : x;                                                            \
    x = x < (F)(LO) ? (F)(LO) : x;                                                 \
    x = x > (F)(HI) ? (F)(HI) : x;                                                 \
    return (T)x;                                                                   \
  }
DEF_SAT(sat_UINT8, uint8_t, double, 0, UINT8_MAX)
DEF_SAT(sat_INT8, int8_t, double, INT8_MIN, INT8_MAX)
DEF_SAT(sat_INT16, int16_t, double, INT16_MIN, INT16_MAX)
DEF_SAT(sat_INT32, int32_t, double, INT32_MIN, INT32_MAX)
DEF_SAT(satf_UINT8, uint8_t, float, 0, UINT8_MAX)
DEF_SAT(satf_INT8, int8_t, float, INT8_MIN, INT8_MAX)
DEF_SAT(satf_INT16, int16_t, float, INT16_MIN, INT16_MAX)

/* INT32_MAX is not a float and INT64_MAX not a double (both round up to a power of
 * two that is out of range), so values at or past it are picked out separately. */
static inline int32_t satf_INT32(float x) {
  float c = x < -0x1p31f ? -0x1p31f : x < 0x1p31f ? x : 0.0f; /* NaN -> 0 */
  int32_t r = (int32_t)c;
  return x >= 0x1p31f ? INT32_MAX : r;
}
static inline int64_t sat_INT64(double x) {
  if (x != x) return 0;
  if (x <= -0x1p63) return INT64_MIN;
  if (x >= 0x1p63) return INT64_MAX;
  return (int64_t)x;
}
static inline int64_t satf_INT64(float x) { return sat_INT64(x); }

/* LOAD_<kind>: a stored element as a value of its natural C type. */
#define LOAD_B(x) ((x) != 0)
#define LOAD_I(x) (x)
#define LOAD_H(x) td_half_to_float(x)
#define LOAD_BF(x) td_bfloat16_to_float(x)
#define LOAD_F(x) (x)

/* CONV_<kind>: a value of any natural type as the destination's stored type. */
#define CONV_B(DN, DT, v) ((uint8_t)((v) != 0))
#define CONV_I(DN, DT, v) \
  _Generic((v), float: satf_##DN((float)(v)), double: sat_##DN((double)(v)), default: (DT)(v))
#define CONV_H(DN, DT, v) td_float_to_half((float)(v))
#define CONV_BF(DN, DT, v) td_float_to_bfloat16((float)(v))
#define CONV_F(DN, DT, v) ((DT)(v))

/* (enum suffix, stored C type, kind), in enum order. Two copies of the list because
 * a macro cannot expand itself: one drives destinations, the other sources. */
#define DST_DTYPES(X)                                                              \
  X(BOOL, uint8_t, B) X(UINT8, uint8_t, I) X(INT8, int8_t, I) X(INT16, int16_t, I) \
  X(INT32, int32_t, I) X(INT64, int64_t, I) X(FLOAT16, uint16_t, H)                \
  X(BFLOAT16, uint16_t, BF) X(FLOAT32, float, F) X(FLOAT64, double, F)
#define SRC_DTYPES(X, DN, DT, DK)                                                  \
  X(DN, DT, DK, BOOL, uint8_t, B) X(DN, DT, DK, UINT8, uint8_t, I)                 \
  X(DN, DT, DK, INT8, int8_t, I) X(DN, DT, DK, INT16, int16_t, I)                  \
  X(DN, DT, DK, INT32, int32_t, I) X(DN, DT, DK, INT64, int64_t, I)                \
  X(DN, DT, DK, FLOAT16, uint16_t, H) X(DN, DT, DK, BFLOAT16, uint16_t, BF)        \
  X(DN, DT, DK, FLOAT32, float, F) X(DN, DT, DK, FLOAT64, double, F)

/* The typed inner loop casting operand 1 (src dtype) into operand 0 (dst dtype). */
td_inner_loop td_cast_loop(int32_t dst_dtype, int32_t src_dtype);

#endif
