/*
 * dtype.c: dtype names, sizes and ranges (from the table in dtype_table.h), and the IEEE
 * half / bfloat16 conversions.
 *
 * The conversions work on bit patterns rather than a compiler _Float16 so they behave
 * the same with every compiler and target, and so rounding is exactly IEEE
 * round-to-nearest-even whatever the FPU mode.
 */
#include <string.h>

#include "dtype_table.h"
#include "internal.h"

#define ROW_COUNT(_, ...) +1
_Static_assert(0 TD_DTYPES_ALL(ROW_COUNT, _) == TD_NUM_DTYPES,
               "dtype_table.h has one row per code of enum td_dtype");

#define ITEMSIZE(_, DN, DT, ...) [TD_##DN] = sizeof(DT),
const int64_t td_itemsizes[TD_NUM_DTYPES] = {TD_DTYPES_ALL(ITEMSIZE, _)};

/* The table's name columns, by code: canonical, torch's alias ("" for none) and torch's
 * cast method. */
#define NAMES(_, DN, DT, DK, CT, FAM, NAME, ALIAS, METHOD, ...) [TD_##DN] = {NAME, ALIAS, METHOD},
static const struct {
  const char *name, *alias, *method;
} names[TD_NUM_DTYPES] = {TD_DTYPES_ALL(NAMES, _)};

/* ", bool, uint8, ..., float64": the messages quote them from their third character on. */
static const char listed_names[] = TD_DTYPES_ALL(TD_DTYPE_LISTED, _);
static const char floating_names[] = TD_DTYPES_FLOAT(TD_DTYPE_LISTED, _);

const char *td_dtype_floating_names(void) { return floating_names + 2; }

/* The finite range and the digits of exact integers, as doubles (int64's max rounds up to
 * 2^63, which callers wanting max + 1 rely on). */
#define RANGE(_, DN, DT, DK, CT, FAM, NAME, ALIAS, METHOD, LOWEST, MAX, DIGITS) \
  [TD_##DN] = {(double)(LOWEST), (double)(MAX), DIGITS},
static const struct {
  double lowest, max;
  int32_t digits;
} ranges[TD_NUM_DTYPES] = {TD_DTYPES_ALL(RANGE, _)};

/* The integral rows' ranges exactly (int64's max is no double). */
#define INT_RANGE(_, DN, DT, DK, CT, FAM, NAME, ALIAS, METHOD, LOWEST, MAX, ...) \
  [TD_##DN] = {LOWEST, MAX},
static const struct {
  int64_t lo, hi;
} int_ranges[TD_NUM_DTYPES] = {TD_DTYPES_INTEGRAL(INT_RANGE, _)};

double td_dtype_lowest(int32_t dtype) { return ranges[dtype].lowest; }
TD_EXPORT double td_dtype_max(int32_t dtype) {
  return dtype >= 0 && dtype < TD_NUM_DTYPES ? ranges[dtype].max : 0; /* exported: Lua asks */
}

void td_dtype_exact_range(int32_t dtype, int64_t *lo, int64_t *hi) {
  if (td_dtype_is_floating(dtype)) {
    *hi = INT64_C(1) << ranges[dtype].digits;
    *lo = -*hi;
  } else {
    *lo = int_ranges[dtype].lo;
    *hi = int_ranges[dtype].hi;
  }
}

TD_EXPORT int32_t td_dtype_from_name(const char *name) {
  if (!name) return td_fail(TD_EINVAL, "dtype_from_name: name is NULL");
  const char *bare = strncmp(name, "torch.", 6) == 0 ? name + 6 : name;
  for (int32_t d = 0; d < TD_NUM_DTYPES; d++)
    if (strcmp(bare, names[d].name) == 0) return d;
  for (int32_t d = 0; d < TD_NUM_DTYPES; d++) /* torch.float is float32, and so on */
    if (names[d].alias[0] && strcmp(bare, names[d].alias) == 0) return d;
  return td_fail(TD_EDTYPE, "unknown dtype '%.200s' (expected one of %s)", name,
                 listed_names + 2);
}

TD_EXPORT const char *td_dtype_name(int32_t dtype) {
  return dtype >= 0 && dtype < TD_NUM_DTYPES ? names[dtype].name : NULL;
}

TD_EXPORT const char *td_dtype_method_name(int32_t dtype) {
  return dtype >= 0 && dtype < TD_NUM_DTYPES ? names[dtype].method : NULL;
}

TD_EXPORT int64_t td_dtype_itemsize(int32_t dtype) {
  return dtype >= 0 && dtype < TD_NUM_DTYPES ? td_itemsizes[dtype] : 0;
}

#define FLOAT_CASE(_, DN, ...) case TD_##DN:
TD_EXPORT int32_t td_dtype_is_floating(int32_t dtype) {
  switch (dtype) {
    TD_DTYPES_FLOAT(FLOAT_CASE, _) return 1;
    default: return 0;
  }
}

static inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Float layout: sign 1, exponent 8 (bias 127), mantissa 23.
 * Half layout:  sign 1, exponent 5 (bias 15),  mantissa 10. */
TD_EXPORT uint16_t td_float_to_half(float value) {
  uint32_t x = float_bits(value);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) /* NaN: keep the top payload bits, force the quiet bit */
    return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  /* 65520 is the midpoint between 65504 (max half, odd mantissa) and 2^16: ties go
   * to the even side, which is Inf; so is everything above, Inf included. */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) { /* normal half (>= 2^-14): rebias, round away 13 bits */
    uint32_t odd = (a >> 13) & 1u;
    a += 0xfffu + odd; /* a carry out of the mantissa correctly bumps the exponent */
    return (uint16_t)(sign | ((a - (112u << 23)) >> 13));
  }
  /* Subnormal half: m * 2^-24. Below 2^-25 (the midpoint of 0 and 2^-24, itself a
   * tie to 0) everything rounds to zero; float subnormals land there too. */
  uint32_t e = a >> 23;
  if (e < 102) return sign;
  uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - e; /* 14..24 */
  uint32_t m = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (m & 1u))) m++; /* m may reach 0x400: fine */
  return (uint16_t)(sign | m);
}

TD_EXPORT float td_half_to_float(uint16_t bits) {
  uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
  uint32_t e = (bits >> 10) & 0x1fu;
  uint32_t m = bits & 0x3ffu;
  if (e == 0x1f) /* Inf, or NaN made quiet (as hardware converters do) */
    return bits_float(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
  if (e != 0) return bits_float(sign | ((e + 112) << 23) | (m << 13));
  if (m == 0) return bits_float(sign);
  /* Subnormal half: normalise so the leading 1 sits at bit 10. */
  int lead = 31 - __builtin_clz(m); /* 0..9 */
  uint32_t shift = 10u - (uint32_t)lead;
  return bits_float(sign | ((113u - shift) << 23) | (((m << shift) & 0x3ffu) << 13));
}

/* bfloat16 is the top half of a float, so only the rounding needs care. */
TD_EXPORT uint16_t td_float_to_bfloat16(float value) {
  uint32_t x = float_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u); /* overflow past the max rounds into Inf */
  return (uint16_t)(x >> 16);
}

TD_EXPORT float td_bfloat16_to_float(uint16_t bits) {
  uint32_t x = (uint32_t)bits << 16;
  if ((x & 0x7fffffffu) > 0x7f800000u) x |= 0x400000u;
  return bits_float(x);
}
