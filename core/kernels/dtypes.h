/*
 * dtypes.h: what every kernel needs to treat the dtypes alike: the dtype table
 * (core/include/dtype_table.h) and, per kind, loading a stored element as its compute
 * type, storing a compute value back, and converting any natural value into a stored
 * type with the project's rules. copy.c's casts are built from these; other kernels use them
 * for their typed loops.
 */
#ifndef TD_KERNEL_DTYPES_H
#define TD_KERNEL_DTYPES_H

#include <stdint.h>

#include "dtype_table.h"
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

/* LOAD_<kind>: a stored element as its compute type. A bool byte other than 0 or 1
 * (from a mapped file, say) still loads as true. */
#define LOAD_B(x) ((x) != 0)
#define LOAD_I(x) (x)
#define LOAD_H(x) td_half_to_float(x)
#define LOAD_BF(x) td_bfloat16_to_float(x)
#define LOAD_F(x) (x)

/* STORE_<kind>: a value of the compute type as the stored type. */
#define STORE_B(v) (v)
#define STORE_I(v) (v)
#define STORE_H(v) td_float_to_half(v)
#define STORE_BF(v) td_float_to_bfloat16(v)
#define STORE_F(v) (v)

/* CONV_<kind>: a value of any natural type as the destination's stored type. */
#define CONV_B(DN, DT, v) ((uint8_t)((v) != 0))
#define CONV_I(DN, DT, v) \
  _Generic((v), float: satf_##DN((float)(v)), double: sat_##DN((double)(v)), default: (DT)(v))
#define CONV_H(DN, DT, v) td_float_to_half((float)(v))
#define CONV_BF(DN, DT, v) td_float_to_bfloat16((float)(v))
#define CONV_F(DN, DT, v) ((DT)(v))

/* ---- pairs of dtypes ------------------------------------------------------------------
 * TD_DTYPE_PAIRS(OUTER, X) calls X(DN, DT, DK, SN, ST, SK, ...) for every row D of the
 * subset OUTER and every row S of the whole table (the rest of S's columns follow):
 * a destination and a source, for copy.c's casts and stats.c's normalisation.
 *
 * A macro cannot expand inside its own expansion, so the inner walk is only named while
 * the outer one runs (TD_DTYPE_LATER: the name, then an empty macro, so no call is seen
 * yet) and expanded by one more scan (TD_DTYPE_EXPAND) once the outer walk is done. */
#define TD_DTYPE_EMPTY()
#define TD_DTYPE_LATER(m) m TD_DTYPE_EMPTY()
#define TD_DTYPE_EXPAND(...) __VA_ARGS__
#define TD_DTYPES_ALL_AGAIN() TD_DTYPES_ALL
#define TD_DTYPE_PAIR_ROW(X, DN, DT, DK, ...) TD_DTYPE_LATER(TD_DTYPES_ALL_AGAIN)()(X, DN, DT, DK)
#define TD_DTYPE_PAIRS(OUTER, X) TD_DTYPE_EXPAND(OUTER(TD_DTYPE_PAIR_ROW, X))

/* The typed inner loop casting operand 1 (src dtype) into operand 0 (dst dtype). */
td_inner_loop td_cast_loop(int32_t dst_dtype, int32_t src_dtype);

#endif
