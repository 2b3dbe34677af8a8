/*
 * float_below.h: the largest value of a floating dtype below a bound, which uniform_
 * draws clamp to so that they never reach high (not ABI: no FFI declarations, not
 * installed). The CPU fills (core/kernels/random.c) and the CUDA backend's
 * (core/cuda/random.cu, host code) share it, so both clamp alike. Include tensordict.h
 * first (the 16-bit conversions).
 */
#ifndef TD_FLOAT_BELOW_H
#define TD_FLOAT_BELOW_H

#include <math.h>
#include <stdint.h>

#include "dtype_table.h"

/* The next 16-bit float (half or bfloat16, both sign-magnitude) towards -inf. */
static inline uint16_t td_step_down16(uint16_t bits) {
  if ((bits & 0x7FFF) == 0) return 0x8001; /* +-0 -> the smallest negative subnormal */
  return bits & 0x8000 ? (uint16_t)(bits + 1) : (uint16_t)(bits - 1);
}

/* Per kind: high rounded into the dtype, stepped down when it did not land below. */
#define TD_BELOW_16(TO, FROM)                    \
  {                                              \
    uint16_t h = TO((float)high);                \
    if (FROM(h) >= high) h = td_step_down16(h);  \
    return FROM(h);                              \
  }
#define TD_BELOW_H(DT) TD_BELOW_16(td_float_to_half, td_half_to_float)
#define TD_BELOW_BF(DT) TD_BELOW_16(td_float_to_bfloat16, td_bfloat16_to_float)
/* float or double: the next value down in the stored type itself */
#define TD_BELOW_F(DT)                                                                \
  {                                                                                   \
    const DT h = (DT)high;                                                            \
    if ((double)h < high) return h;                                                   \
    return sizeof(DT) == sizeof(float) ? (double)nextafterf((float)h, -INFINITY)      \
                                       : nextafter((double)h, -INFINITY);             \
  }
#define TD_BELOW_CASE(_, DN, DT, DK, ...) case TD_##DN: TD_BELOW_##DK(DT)

/* The largest value of a floating dtype below high (finite, within the dtype's range). */
static inline double td_float_below(int32_t dtype, double high) {
  switch (dtype) {
    TD_DTYPES_FLOAT(TD_BELOW_CASE, _)
    default: return high;
  }
}

#endif
