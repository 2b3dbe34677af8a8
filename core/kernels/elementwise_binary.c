/*
 * elementwise_binary.c: the typed inner loops of the binary ops.
 *
 * Element functions e_<op>_<family> say what one element is; DEF_BIN wraps one in a
 * loop with a contiguous branch (restrict pointers, which gcc -O3 vectorises; an ivdep
 * twin for in-place calls where the output is an input), branches for either input
 * broadcast (stride 0, loaded once), and a general strided branch. Both inputs arrive
 * in the loop's dtype (the caller casts); the output is that dtype, or bool for
 * comparisons and logical ops.
 *
 * Integer arithmetic wraps like torch's (two's complement): it is done in an unsigned
 * type at least as wide as int, so no signed overflow (undefined behaviour) can occur.
 */
#include <math.h>

#include "elementwise.h"
#include "widest.h"

/* ---- element functions ------------------------------------------------------------------ */

/* bool: + is or, * is and (torch's results for bool tensors); min is and, max is or. */
static inline uint8_t e_add_BOOL(uint8_t x, uint8_t y, int *z) { (void)z; return x | y; }
static inline uint8_t e_mul_BOOL(uint8_t x, uint8_t y, int *z) { (void)z; return x & y; }
static inline uint8_t e_minimum_BOOL(uint8_t x, uint8_t y, int *z) { (void)z; return x & y; }
static inline uint8_t e_maximum_BOOL(uint8_t x, uint8_t y, int *z) { (void)z; return x | y; }
static inline uint8_t e_bitwise_and_BOOL(uint8_t x, uint8_t y, int *z) { (void)z; return x & y; }
static inline uint8_t e_bitwise_or_BOOL(uint8_t x, uint8_t y, int *z) { (void)z; return x | y; }
static inline uint8_t e_bitwise_xor_BOOL(uint8_t x, uint8_t y, int *z) { (void)z; return x ^ y; }

/* Integers, signed or not. UT is the unsigned type the arithmetic wraps in. */
#define DEF_INT_COMMON(FAM, T, UT)                                                        \
  static inline T e_add_##FAM(T x, T y, int *z) { (void)z; return (T)((UT)x + (UT)y); }   \
  static inline T e_sub_##FAM(T x, T y, int *z) { (void)z; return (T)((UT)x - (UT)y); }   \
  static inline T e_mul_##FAM(T x, T y, int *z) { (void)z; return (T)((UT)x * (UT)y); }   \
  static inline T e_minimum_##FAM(T x, T y, int *z) { (void)z; return y < x ? y : x; }   \
  static inline T e_maximum_##FAM(T x, T y, int *z) { (void)z; return x < y ? y : x; }   \
  /* x ** y for y >= 0 by squaring, wrapping like repeated multiplication */             \
  static inline T pow_nonneg_##FAM(T x, T y) {                                            \
    UT r = 1, b = (UT)x;                                                                  \
    for (uint64_t e = (uint64_t)y; e; e >>= 1) {                                          \
      if (e & 1) r *= b;                                                                  \
      b *= b;                                                                             \
    }                                                                                     \
    return (T)r;                                                                          \
  }                                                                                       \
  static inline T e_bitwise_and_##FAM(T x, T y, int *z) { (void)z; return (T)(x & y); }  \
  static inline T e_bitwise_or_##FAM(T x, T y, int *z) { (void)z; return (T)(x | y); }   \
  static inline T e_bitwise_xor_##FAM(T x, T y, int *z) { (void)z; return (T)(x ^ y); }  \
  /* torch's: a count < 0 or >= the width gives 0 (as a uint64, a negative count is */    \
  /* huge, so one compare tests both); the shift is done unsigned, so it wraps */          \
  static inline T e_bitwise_left_shift_##FAM(T x, T y, int *z) {                          \
    (void)z;                                                                              \
    return (uint64_t)(int64_t)y >= 8 * sizeof(T) ? (T)0 : (T)((UT)x << y);                \
  }

/* Unsigned: floor division and remainder are the C ones. A zero divisor gives 0 and
 * raises the flag that turns into torch's ZeroDivisionError once the loop is done. */
#define DEF_UINT_OPS(FAM, T, UT)                                                          \
  DEF_INT_COMMON(FAM, T, UT)                                                              \
  static inline T e_floor_divide_##FAM(T x, T y, int *z) {                                \
    if (y == 0) return (T)(*z = 1, 0);                                                    \
    return (T)(x / y);                                                                    \
  }                                                                                       \
  static inline T e_remainder_##FAM(T x, T y, int *z) {                                   \
    if (y == 0) return (T)(*z = 1, 0);                                                    \
    return (T)(x % y);                                                                    \
  }                                                                                       \
  static inline T e_pow_##FAM(T x, T y, int *z) { (void)z; return pow_nonneg_##FAM(x, y); } \
  static inline T e_fmod_##FAM(T x, T y, int *z) {                                        \
    if (y == 0) return (T)(*z = 1, 0);                                                    \
    return (T)(x % y);                                                                    \
  }                                                                                       \
  static inline T e_bitwise_right_shift_##FAM(T x, T y, int *z) {                         \
    (void)z;                                                                              \
    return y >= 8 * sizeof(T) ? (T)0 : (T)(x >> y);                                       \
  }

/* Signed: Python's floor semantics. y == -1 is taken apart because MIN / -1 overflows
 * (SIGFPE on x86); its wrapped result, MIN, is torch's. Negative exponents follow torch:
 * 1 ** -n = 1, (-1) ** -n = +-1, anything else 0 (the truncated reciprocal). */
#define DEF_SINT_OPS(FAM, T, UT)                                                          \
  DEF_INT_COMMON(FAM, T, UT)                                                              \
  static inline T e_floor_divide_##FAM(T x, T y, int *z) {                                \
    if (y == 0) return (T)(*z = 1, 0);                                                    \
    if (y == -1) return (T)(0 - (UT)x);                                                   \
    T q = (T)(x / y);                                                                     \
    if ((T)(x % y) != 0 && ((x < 0) != (y < 0))) q--;                                     \
    return q;                                                                             \
  }                                                                                       \
  static inline T e_remainder_##FAM(T x, T y, int *z) {                                   \
    if (y == 0) return (T)(*z = 1, 0);                                                    \
    if (y == -1) return 0;                                                                \
    T r = (T)(x % y);                                                                     \
    if (r != 0 && ((r < 0) != (y < 0))) r = (T)(r + y);                                   \
    return r;                                                                             \
  }                                                                                       \
  static inline T e_pow_##FAM(T x, T y, int *z) {                                         \
    (void)z;                                                                              \
    if (y >= 0) return pow_nonneg_##FAM(x, y);                                            \
    if (x == 1) return 1;                                                                 \
    if (x == -1) return (T)((y & 1) ? -1 : 1);                                            \
    return 0;                                                                             \
  }                                                                                       \
  /* C's truncated remainder; MIN % -1 overflows (SIGFPE), its value is 0 */              \
  static inline T e_fmod_##FAM(T x, T y, int *z) {                                        \
    if (y == 0) return (T)(*z = 1, 0);                                                    \
    if (y == -1) return 0;                                                                \
    return (T)(x % y);                                                                    \
  }                                                                                       \
  /* arithmetic (gcc and clang define >> of a negative value so); a count < 0 or >= */   \
  /* the width gives the sign, 0 or -1, as torch */                                       \
  static inline T e_bitwise_right_shift_##FAM(T x, T y, int *z) {                         \
    (void)z;                                                                              \
    return (T)(x >> ((uint64_t)(int64_t)y >= 8 * sizeof(T) ? (int)(8 * sizeof(T) - 1) : (int)y)); \
  }

DEF_UINT_OPS(UINT8, uint8_t, uint32_t)
DEF_SINT_OPS(INT8, int8_t, uint32_t)
DEF_SINT_OPS(INT16, int16_t, uint32_t)
DEF_SINT_OPS(INT32, int32_t, uint32_t)
DEF_SINT_OPS(INT64, int64_t, uint64_t)

/* Floating, in float (FL, also for float16 / bfloat16) or double (DB). floor_divide and
 * remainder are torch's formulas (div_floor_floating, fmod-based remainder), so signed
 * zeros, infinities and rounding at large quotients come out as in torch. minimum and
 * maximum return NaN when either side is NaN, else std::min / std::max (the first
 * argument on ties: minimum(0, -0) is 0). */
#define DEF_FLOAT_OPS(FAM, T, SUF)                                                        \
  static inline T e_add_##FAM(T x, T y, int *z) { (void)z; return x + y; }                \
  static inline T e_sub_##FAM(T x, T y, int *z) { (void)z; return x - y; }                \
  static inline T e_mul_##FAM(T x, T y, int *z) { (void)z; return x * y; }                \
  static inline T e_div_##FAM(T x, T y, int *z) { (void)z; return x / y; }                \
  static inline T e_floor_divide_##FAM(T a, T b, int *z) {                                \
    (void)z;                                                                              \
    if (b == 0) return a / b;                                                             \
    T mod = fmod##SUF(a, b);                                                              \
    T div = (a - mod) / b;                                                                \
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;                                       \
    if (div == 0) return copysign##SUF(0, a / b);                                         \
    T fl = floor##SUF(div);                                                               \
    if (div - fl > (T)0.5) fl += 1;                                                       \
    return fl;                                                                            \
  }                                                                                       \
  static inline T e_remainder_##FAM(T a, T b, int *z) {                                   \
    (void)z;                                                                              \
    T mod = fmod##SUF(a, b);                                                              \
    if (mod != 0 && (b < 0) != (mod < 0)) mod += b;                                       \
    return mod;                                                                           \
  }                                                                                       \
  static inline T e_pow_##FAM(T x, T y, int *z) { (void)z; return pow##SUF(x, y); }       \
  static inline T e_minimum_##FAM(T x, T y, int *z) {                                     \
    (void)z;                                                                              \
    return (x != x || y != y) ? x + y : (y < x ? y : x);                                  \
  }                                                                                       \
  static inline T e_maximum_##FAM(T x, T y, int *z) {                                     \
    (void)z;                                                                              \
    return (x != x || y != y) ? x + y : (x < y ? y : x);                                  \
  }                                                                                       \
  static inline T e_atan2_##FAM(T x, T y, int *z) { (void)z; return atan2##SUF(x, y); }   \
  static inline T e_hypot_##FAM(T x, T y, int *z) { (void)z; return hypot##SUF(x, y); }   \
  static inline T e_copysign_##FAM(T x, T y, int *z) { (void)z; return copysign##SUF(x, y); } \
  static inline T e_fmod_##FAM(T x, T y, int *z) { (void)z; return fmod##SUF(x, y); }     \
  /* torch's: equal infinities give themselves (inf - inf would be NaN), NaN propagates */ \
  static inline T e_logaddexp_##FAM(T x, T y, int *z) {                                   \
    (void)z;                                                                              \
    if (isinf(x) && x == y) return x;                                                     \
    const T m = x < y ? y : x;                                                            \
    return (x != x || y != y) ? x + y : m + log1p##SUF(exp##SUF(-fabs##SUF(x - y)));      \
  }                                                                                       \
  /* torch's: NaN where y is NaN, else 0 where x is 0, else x * log(y) */                  \
  static inline T e_xlogy_##FAM(T x, T y, int *z) {                                       \
    (void)z;                                                                              \
    if (y != y) return y;                                                                 \
    if (x == 0) return 0;                                                                 \
    return x * log##SUF(y);                                                               \
  }

DEF_FLOAT_OPS(FL, float, f)
DEF_FLOAT_OPS(DB, double, )

/* Comparisons, for every family: C's operators already give false for NaN (true for
 * !=), computed in the family type, so int64 against float64 compares as float64. */
#define DEF_CMP(FAM, T)                                                                   \
  static inline uint8_t e_eq_##FAM(T x, T y, int *z) { (void)z; return x == y; }          \
  static inline uint8_t e_ne_##FAM(T x, T y, int *z) { (void)z; return x != y; }          \
  static inline uint8_t e_lt_##FAM(T x, T y, int *z) { (void)z; return x < y; }           \
  static inline uint8_t e_le_##FAM(T x, T y, int *z) { (void)z; return x <= y; }          \
  static inline uint8_t e_gt_##FAM(T x, T y, int *z) { (void)z; return x > y; }           \
  static inline uint8_t e_ge_##FAM(T x, T y, int *z) { (void)z; return x >= y; }
/* Logical ops, for every family: nonzero is true (NaN included), tested in the promoted
 * dtype, as torch does (uint8 tensor and 256: 256 wraps to 0, false). */
#define DEF_LOGICAL(FAM, T)                                                               \
  static inline uint8_t e_logical_and_##FAM(T x, T y, int *z) {                           \
    (void)z;                                                                              \
    return (x != 0) & (y != 0);                                                           \
  }                                                                                       \
  static inline uint8_t e_logical_or_##FAM(T x, T y, int *z) {                            \
    (void)z;                                                                              \
    return (x != 0) | (y != 0);                                                           \
  }                                                                                       \
  static inline uint8_t e_logical_xor_##FAM(T x, T y, int *z) {                           \
    (void)z;                                                                              \
    return (x != 0) ^ (y != 0);                                                           \
  }
#define DEF_CMP_LOGICAL(FAM, T) DEF_CMP(FAM, T) DEF_LOGICAL(FAM, T)
DEF_CMP_LOGICAL(BOOL, uint8_t)
DEF_CMP_LOGICAL(UINT8, uint8_t)
DEF_CMP_LOGICAL(INT8, int8_t)
DEF_CMP_LOGICAL(INT16, int16_t)
DEF_CMP_LOGICAL(INT32, int32_t)
DEF_CMP_LOGICAL(INT64, int64_t)
DEF_CMP_LOGICAL(FL, float)
DEF_CMP_LOGICAL(DB, double)

/* ---- loops ---------------------------------------------------------------------------------- */

#define EW_E(OP, FAM, X, Y) e_##OP##_##FAM(X, Y, &zf)

#define DEF_BIN(ATTR, OP, DN, IT, CT, FAM, LD, OT, ST)                                    \
  ATTR static void bin_##OP##_##DN(char **p, const int64_t *s, int64_t n, void *ctx) {        \
    int zf = 0;                                                                           \
    const int64_t is = (int64_t)sizeof(IT), os = (int64_t)sizeof(OT);                     \
    if (s[0] == os && s[1] == is && s[2] == is) {                                         \
      if (p[0] != p[1] && p[0] != p[2]) {                                                 \
        OT *restrict d = (OT *)p[0];                                                      \
        const IT *restrict x = (const IT *)p[1], *restrict y = (const IT *)p[2];          \
        for (int64_t i = 0; i < n; i++) d[i] = ST(EW_E(OP, FAM, LD(x[i]), LD(y[i])));     \
      } else {                                                                            \
        OT *d = (OT *)p[0];                                                               \
        const IT *x = (const IT *)p[1], *y = (const IT *)p[2];                            \
        EW_IVDEP for (int64_t i = 0; i < n; i++) d[i] = ST(EW_E(OP, FAM, LD(x[i]), LD(y[i]))); \
      }                                                                                   \
    } else if (s[0] == os && s[1] == is && s[2] == 0) {                                   \
      const CT b = LD(*(const IT *)p[2]);                                                 \
      if (p[0] != p[1]) {                                                                 \
        OT *restrict d = (OT *)p[0];                                                      \
        const IT *restrict x = (const IT *)p[1];                                          \
        for (int64_t i = 0; i < n; i++) d[i] = ST(EW_E(OP, FAM, LD(x[i]), b));            \
      } else {                                                                            \
        OT *d = (OT *)p[0];                                                               \
        const IT *x = (const IT *)p[1];                                                   \
        EW_IVDEP for (int64_t i = 0; i < n; i++) d[i] = ST(EW_E(OP, FAM, LD(x[i]), b));   \
      }                                                                                   \
    } else if (s[0] == os && s[1] == 0 && s[2] == is) {                                   \
      const CT a = LD(*(const IT *)p[1]);                                                 \
      if (p[0] != p[2]) {                                                                 \
        OT *restrict d = (OT *)p[0];                                                      \
        const IT *restrict y = (const IT *)p[2];                                          \
        for (int64_t i = 0; i < n; i++) d[i] = ST(EW_E(OP, FAM, a, LD(y[i])));            \
      } else {                                                                            \
        OT *d = (OT *)p[0];                                                               \
        const IT *y = (const IT *)p[2];                                                   \
        EW_IVDEP for (int64_t i = 0; i < n; i++) d[i] = ST(EW_E(OP, FAM, a, LD(y[i])));   \
      }                                                                                   \
    } else {                                                                              \
      char *d = p[0];                                                                     \
      const char *x = p[1], *y = p[2];                                                    \
      for (int64_t i = 0; i < n; i++, d += s[0], x += s[1], y += s[2])                    \
        *(OT *)d = ST(EW_E(OP, FAM, LD(*(const IT *)x), LD(*(const IT *)y)));             \
    }                                                                                     \
    if (zf) td_ew_note_zero_division(ctx);                                                \
  }

/* Arithmetic ops write the input dtype; predicates write bool bytes. The arithmetic
 * the pipelines run most (add, sub, mul, div, minimum, maximum) is compiled for AVX-512
 * and AVX2 too (WIDEST): the baseline's SSE loop ran add_ of 1e5 float32 at 13 us,
 * AVX-512 at 9.9 (torch: 10.6). Each op is one IEEE operation per element (no
 * contraction under -std=c11), so every version gives the same bits. The rest stays
 * baseline, since each clone triples a loop's code (all ops cloned: +1 MB): floor_divide,
 * remainder and pow branch per element, float16 and bfloat16 convert in software, and
 * the predicates' bool stores are the largest loops. */
#define WIDEST_B WIDEST
#define WIDEST_I WIDEST
#define WIDEST_F WIDEST
#define WIDEST_H
#define WIDEST_BF
#define DEF_ARITH(OP, DN, IT, K, CT, FAM, ...) \
  DEF_BIN(WIDEST_##K, OP, DN, IT, CT, FAM, LOAD_##K, IT, STORE_##K)
#define DEF_ARITH_SCALAR(OP, DN, IT, K, CT, FAM, ...) \
  DEF_BIN(, OP, DN, IT, CT, FAM, LOAD_##K, IT, STORE_##K)
#define DEF_PRED(OP, DN, IT, K, CT, FAM, ...) \
  DEF_BIN(, OP, DN, IT, CT, FAM, LOAD_##K, uint8_t, STORE_B)

TD_DTYPES_ALL(DEF_ARITH, add)
TD_DTYPES_NUM(DEF_ARITH, sub)
TD_DTYPES_ALL(DEF_ARITH, mul)
TD_DTYPES_FLOAT(DEF_ARITH, div)
TD_DTYPES_NUM(DEF_ARITH_SCALAR, floor_divide)
TD_DTYPES_NUM(DEF_ARITH_SCALAR, remainder)
TD_DTYPES_NUM(DEF_ARITH_SCALAR, pow)
TD_DTYPES_ALL(DEF_ARITH, minimum)
TD_DTYPES_ALL(DEF_ARITH, maximum)
TD_DTYPES_ALL(DEF_PRED, eq)
TD_DTYPES_ALL(DEF_PRED, ne)
TD_DTYPES_ALL(DEF_PRED, lt)
TD_DTYPES_ALL(DEF_PRED, le)
TD_DTYPES_ALL(DEF_PRED, gt)
TD_DTYPES_ALL(DEF_PRED, ge)
TD_DTYPES_ALL(DEF_PRED, logical_and)
TD_DTYPES_ALL(DEF_PRED, logical_or)
TD_DTYPES_ALL(DEF_PRED, logical_xor)
TD_DTYPES_FLOAT(DEF_ARITH_SCALAR, atan2)
TD_DTYPES_FLOAT(DEF_ARITH_SCALAR, hypot)
TD_DTYPES_FLOAT(DEF_ARITH_SCALAR, logaddexp)
TD_DTYPES_FLOAT(DEF_ARITH_SCALAR, xlogy)
TD_DTYPES_FLOAT(DEF_ARITH, copysign)
TD_DTYPES_NUM(DEF_ARITH_SCALAR, fmod)
TD_DTYPES_INTEGRAL(DEF_ARITH, bitwise_and)
TD_DTYPES_INTEGRAL(DEF_ARITH, bitwise_or)
TD_DTYPES_INTEGRAL(DEF_ARITH, bitwise_xor)
TD_DTYPES_INT(DEF_ARITH, bitwise_left_shift)
TD_DTYPES_INT(DEF_ARITH, bitwise_right_shift)

#define ENTRY(OP, DN, ...) [TD_##DN] = bin_##OP##_##DN,
/* loops[op][dtype] */
static const td_inner_loop loops[TD_BINARY_COUNT][TD_NUM_DTYPES] = {
    [TD_BINARY_ADD] = {TD_DTYPES_ALL(ENTRY, add)},
    [TD_BINARY_SUB] = {TD_DTYPES_NUM(ENTRY, sub)},
    [TD_BINARY_MUL] = {TD_DTYPES_ALL(ENTRY, mul)},
    [TD_BINARY_DIV] = {TD_DTYPES_FLOAT(ENTRY, div)},
    [TD_BINARY_FLOOR_DIVIDE] = {TD_DTYPES_NUM(ENTRY, floor_divide)},
    [TD_BINARY_REMAINDER] = {TD_DTYPES_NUM(ENTRY, remainder)},
    [TD_BINARY_POW] = {TD_DTYPES_NUM(ENTRY, pow)},
    [TD_BINARY_MINIMUM] = {TD_DTYPES_ALL(ENTRY, minimum)},
    [TD_BINARY_MAXIMUM] = {TD_DTYPES_ALL(ENTRY, maximum)},
    [TD_BINARY_EQ] = {TD_DTYPES_ALL(ENTRY, eq)},
    [TD_BINARY_NE] = {TD_DTYPES_ALL(ENTRY, ne)},
    [TD_BINARY_LT] = {TD_DTYPES_ALL(ENTRY, lt)},
    [TD_BINARY_LE] = {TD_DTYPES_ALL(ENTRY, le)},
    [TD_BINARY_GT] = {TD_DTYPES_ALL(ENTRY, gt)},
    [TD_BINARY_GE] = {TD_DTYPES_ALL(ENTRY, ge)},
    [TD_BINARY_LOGICAL_AND] = {TD_DTYPES_ALL(ENTRY, logical_and)},
    [TD_BINARY_LOGICAL_OR] = {TD_DTYPES_ALL(ENTRY, logical_or)},
    [TD_BINARY_LOGICAL_XOR] = {TD_DTYPES_ALL(ENTRY, logical_xor)},
    [TD_BINARY_ATAN2] = {TD_DTYPES_FLOAT(ENTRY, atan2)},
    [TD_BINARY_HYPOT] = {TD_DTYPES_FLOAT(ENTRY, hypot)},
    [TD_BINARY_LOGADDEXP] = {TD_DTYPES_FLOAT(ENTRY, logaddexp)},
    [TD_BINARY_XLOGY] = {TD_DTYPES_FLOAT(ENTRY, xlogy)},
    [TD_BINARY_COPYSIGN] = {TD_DTYPES_FLOAT(ENTRY, copysign)},
    [TD_BINARY_FMOD] = {TD_DTYPES_NUM(ENTRY, fmod)},
    [TD_BINARY_BITWISE_AND] = {TD_DTYPES_INTEGRAL(ENTRY, bitwise_and)},
    [TD_BINARY_BITWISE_OR] = {TD_DTYPES_INTEGRAL(ENTRY, bitwise_or)},
    [TD_BINARY_BITWISE_XOR] = {TD_DTYPES_INTEGRAL(ENTRY, bitwise_xor)},
    [TD_BINARY_BITWISE_LEFT_SHIFT] = {TD_DTYPES_INT(ENTRY, bitwise_left_shift)},
    [TD_BINARY_BITWISE_RIGHT_SHIFT] = {TD_DTYPES_INT(ENTRY, bitwise_right_shift)},
};

td_inner_loop td_ew_binary_loop(int32_t op, int32_t dtype) { return loops[op][dtype]; }

/* ---- pow with a scalar exponent ------------------------------------------------------------
 * torch rewrites x ** e for these exponents (pow_tensor_scalar_optimized_kernel), which
 * differs from pow() at signed zeros and infinities: (-0) ** 0.5 is -0 (sqrt), not +0,
 * and (-inf) ** 0.5 is NaN, not +inf. Only for a scalar exponent, and not for float16,
 * which torch sends through pow(): a tensor exponent, 0-dim included, goes through pow()
 * too. A bool tensor takes a bool exponent: ** False is all true, ** True a copy. */
enum { POW_SQUARE = 1, POW_CUBE, POW_SQRT, POW_RSQRT, POW_RECIPROCAL, POW_RSQUARE, POW_ONES,
       POW_IDENTITY };

#define POW_LOOP(IT, LD, ST, EXPR)                                                        \
  if (s[0] == (int64_t)sizeof(IT) && s[1] == (int64_t)sizeof(IT)) {                       \
    IT *d = (IT *)p[0];                                                                   \
    const IT *a = (const IT *)p[1];                                                       \
    EW_IVDEP for (int64_t i = 0; i < n; i++) {                                            \
      const CT x = LD(a[i]);                                                              \
      (void)x;                                                                            \
      d[i] = ST(EXPR);                                                                    \
    }                                                                                     \
  } else {                                                                                \
    char *d = p[0];                                                                       \
    const char *a = p[1];                                                                 \
    for (int64_t i = 0; i < n; i++, d += s[0], a += s[1]) {                               \
      const CT x = LD(*(const IT *)a);                                                    \
      (void)x;                                                                            \
      *(IT *)d = ST(EXPR);                                                                \
    }                                                                                     \
  }                                                                                       \
  break;

#define DEF_POW_SCALAR(ARG, DN, IT, K, CT_, FAM, ...)                                     \
  static void pow_scalar_##DN(char **p, const int64_t *s, int64_t n, void *ctx) {        \
    typedef CT_ CT;                                                                       \
    switch (((const td_ew_ctx *)ctx)->code) {                                             \
      case POW_SQUARE: POW_LOOP(IT, LOAD_##K, STORE_##K, x * x)                           \
      case POW_CUBE: POW_LOOP(IT, LOAD_##K, STORE_##K, x * x * x)                         \
      case POW_SQRT: POW_LOOP(IT, LOAD_##K, STORE_##K, sqrt_##FAM(x))                     \
      case POW_RSQRT: POW_LOOP(IT, LOAD_##K, STORE_##K, (CT)1 / sqrt_##FAM(x))            \
      case POW_RECIPROCAL: POW_LOOP(IT, LOAD_##K, STORE_##K, (CT)1 / x)                   \
      default: POW_LOOP(IT, LOAD_##K, STORE_##K, (CT)1 / (x * x))                         \
    }                                                                                     \
  }
static inline float sqrt_FL(float x) { return sqrtf(x); }
static inline double sqrt_DB(double x) { return sqrt(x); }
/* Generated for every floating dtype from the table; the lookup below turns float16 away. */
TD_DTYPES_FLOAT(DEF_POW_SCALAR, _)

static void pow_scalar_BOOL(char **p, const int64_t *s, int64_t n, void *ctx) {
  typedef uint8_t CT;
  switch (((const td_ew_ctx *)ctx)->code) {
    case POW_ONES: POW_LOOP(uint8_t, LOAD_B, STORE_B, 1)
    default: POW_LOOP(uint8_t, LOAD_B, STORE_B, x)
  }
}

td_inner_loop td_ew_pow_scalar_loop(int32_t dtype, double exponent, td_ew_ctx *ctx) {
  static const struct {
    double e;
    int32_t code;
  } forms[] = {{2, POW_SQUARE}, {3, POW_CUBE},        {0.5, POW_SQRT},
               {-0.5, POW_RSQRT}, {-1, POW_RECIPROCAL}, {-2, POW_RSQUARE}};
#define POW_ENTRY(_, DN, ...) [TD_##DN] = pow_scalar_##DN,
  static const td_inner_loop loops_by_dtype[TD_NUM_DTYPES] = {
      TD_DTYPES_FLOAT(POW_ENTRY, _)};
  if (dtype == TD_BOOL) {
    ctx->code = exponent != 0 ? POW_IDENTITY : POW_ONES;
    return pow_scalar_BOOL;
  }
  if (dtype == TD_FLOAT16 || !loops_by_dtype[dtype]) return NULL; /* float16: pow() */
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
    if (exponent == forms[i].e) {
      ctx->code = forms[i].code;
      return loops_by_dtype[dtype];
    }
  return NULL;
}

/* ---- float16 / bfloat16 with a float scalar -------------------------------------------------
 * torch's mul, div and floor_divide of a half tensor by a trailing scalar keep the scalar
 * in float (its "opmath" scalar path): x * 0.1 multiplies by 0.1f, not by 0.1 rounded
 * to the half type first. Operand 2 is a 0-dim float32 tensor. */
#define DEF_FLOAT_SCALAR(OP, DN, IT, K, ...)                                              \
  static void fs_##OP##_##DN(char **p, const int64_t *s, int64_t n, void *ctx) {         \
    (void)ctx;                                                                            \
    int zf = 0;                                                                           \
    const float b = *(const float *)p[2];                                                 \
    char *d = p[0];                                                                       \
    const char *x = p[1];                                                                 \
    for (int64_t i = 0; i < n; i++, d += s[0], x += s[1])                                 \
      *(IT *)d = STORE_##K(EW_E(OP, FL, LOAD_##K(*(const IT *)x), b));                    \
  }
TD_DTYPES_HALF(DEF_FLOAT_SCALAR, mul)
TD_DTYPES_HALF(DEF_FLOAT_SCALAR, div)
TD_DTYPES_HALF(DEF_FLOAT_SCALAR, floor_divide)

td_inner_loop td_ew_float_scalar_loop(int32_t op, int32_t dtype) {
#define FS_ENTRY(OP, DN, ...) [TD_##DN] = fs_##OP##_##DN,
  static const td_inner_loop fs[TD_BINARY_FLOOR_DIVIDE + 1][TD_NUM_DTYPES] = {
      [TD_BINARY_MUL] = {TD_DTYPES_HALF(FS_ENTRY, mul)},
      [TD_BINARY_DIV] = {TD_DTYPES_HALF(FS_ENTRY, div)},
      [TD_BINARY_FLOOR_DIVIDE] = {TD_DTYPES_HALF(FS_ENTRY, floor_divide)},
  };
  return op <= TD_BINARY_FLOOR_DIVIDE ? fs[op][dtype] : NULL;
}
