/*
 * elementwise_unary.c: unary ops (td_unary, td_unary_): typed loops and entry points.
 *
 * Behaviours (torch 2.x):
 * - exp .. sigmoid compute integers and bool in float32; float16 / bfloat16 in float,
 *   rounded once on store. rsqrt is 1 / sqrt(x), sigmoid 1 / (1 + exp(-x)).
 * - neg, abs, relu, floor, ceil, round refuse bool (torch: not implemented for 'Bool');
 *   neg wraps on integers (-(-128) is -128 in int8, neg of uint8 wraps), so does abs.
 * - floor, ceil, round leave integers unchanged; round is half to even (nearbyint under
 *   the default rounding mode). relu keeps -0 and NaN. sign gives 0 for NaN and -0, and
 *   leaves bool unchanged.
 * - tan .. lgamma (the rest of torch's float functions) are as exp: integers and bool in
 *   float32; lgamma is log |gamma(x)|, as torch's.
 * - trunc leaves integers unchanged; frac (x - trunc(x), the sign of x kept) refuses
 *   integers and bool, as torch ("not implemented for 'Long'").
 * - bitwise_not takes bool and integers only (floats refused, as torch); of bool it is
 *   logical not. erfinv and digamma are as exp (core/include/special_math.h: the methods
 *   and their accuracy).
 * - logical_not, isnan, isinf give bool; isnan and isinf of integers and bool are false,
 *   isfinite true. signbit gives bool: the sign bit of floats (true for -0.0 and a
 *   negative NaN), x < 0 for integers, false for uint8 and bool.
 * - In place, the result is cast into a's dtype, refused when its category is above a's
 *   (exp_ of an integer tensor); logical_not_ of a float tensor writes 0.0 / 1.0.
 */
#include <math.h>

#include "elementwise.h"
#include "ops.h"
#include "special_math.h"
#include "widest.h"

/* ---- element functions ---------------------------------------------------------------- */

#define DEF_SINT_UN(FAM, T, UT)                                                           \
  static inline T u_neg_##FAM(T x) { return (T)(0 - (UT)x); }                             \
  static inline T u_abs_##FAM(T x) { return x < 0 ? (T)(0 - (UT)x) : x; }                \
  static inline T u_relu_##FAM(T x) { return x < 0 ? 0 : x; }                             \
  static inline T u_sign_##FAM(T x) { return (T)((x > 0) - (x < 0)); }                    \
  static inline uint8_t u_signbit_##FAM(T x) { return x < 0; }                            \
  static inline uint8_t u_logical_not_##FAM(T x) { return x == 0; }
DEF_SINT_UN(INT8, int8_t, uint32_t)
DEF_SINT_UN(INT16, int16_t, uint32_t)
DEF_SINT_UN(INT32, int32_t, uint32_t)
DEF_SINT_UN(INT64, int64_t, uint64_t)

static inline uint8_t u_neg_UINT8(uint8_t x) { return (uint8_t)(0u - x); }
static inline uint8_t u_sign_UINT8(uint8_t x) { return x > 0; }
static inline uint8_t u_logical_not_UINT8(uint8_t x) { return x == 0; }
static inline uint8_t u_logical_not_BOOL(uint8_t x) { return x == 0; }
static inline uint8_t u_bitwise_not_BOOL(uint8_t x) { return x ^ 1; } /* loads as 0 or 1 */

#define DEF_BITWISE_UN(_, DN, DT, ...) \
  static inline DT u_bitwise_not_##DN(DT x) { return (DT)~x; }
TD_DTYPES_INT(DEF_BITWISE_UN, _)

#define DEF_FLOAT_UN(FAM, T, SUF)                                                         \
  static inline T u_neg_##FAM(T x) { return -x; }                                         \
  static inline T u_abs_##FAM(T x) { return fabs##SUF(x); }                               \
  static inline T u_exp_##FAM(T x) { return exp##SUF(x); }                                \
  static inline T u_log_##FAM(T x) { return log##SUF(x); }                                \
  static inline T u_log1p_##FAM(T x) { return log1p##SUF(x); }                            \
  static inline T u_expm1_##FAM(T x) { return expm1##SUF(x); }                            \
  static inline T u_sqrt_##FAM(T x) { return sqrt##SUF(x); }                              \
  static inline T u_rsqrt_##FAM(T x) { return (T)1 / sqrt##SUF(x); }                      \
  static inline T u_sin_##FAM(T x) { return sin##SUF(x); }                                \
  static inline T u_cos_##FAM(T x) { return cos##SUF(x); }                                \
  static inline T u_tanh_##FAM(T x) { return tanh##SUF(x); }                              \
  static inline T u_sigmoid_##FAM(T x) { return (T)1 / ((T)1 + exp##SUF(-x)); }           \
  static inline T u_relu_##FAM(T x) { return x < 0 ? 0 : x; }                             \
  static inline T u_floor_##FAM(T x) { return floor##SUF(x); }                            \
  static inline T u_ceil_##FAM(T x) { return ceil##SUF(x); }                              \
  static inline T u_round_##FAM(T x) { return nearbyint##SUF(x); }                        \
  static inline T u_sign_##FAM(T x) { return (T)((x > 0) - (x < 0)); }                    \
  static inline uint8_t u_logical_not_##FAM(T x) { return x == 0; }                       \
  static inline uint8_t u_isnan_##FAM(T x) { return x != x; }                             \
  static inline uint8_t u_isinf_##FAM(T x) { return fabs##SUF(x) == (T)INFINITY; }       \
  static inline uint8_t u_isfinite_##FAM(T x) { return isfinite(x); }                     \
  static inline uint8_t u_signbit_##FAM(T x) { return signbit(x) != 0; }                  \
  static inline T u_trunc_##FAM(T x) { return trunc##SUF(x); }                            \
  static inline T u_frac_##FAM(T x) { return x - trunc##SUF(x); }                         \
  static inline T u_tan_##FAM(T x) { return tan##SUF(x); }                               \
  static inline T u_asin_##FAM(T x) { return asin##SUF(x); }                             \
  static inline T u_acos_##FAM(T x) { return acos##SUF(x); }                             \
  static inline T u_atan_##FAM(T x) { return atan##SUF(x); }                             \
  static inline T u_sinh_##FAM(T x) { return sinh##SUF(x); }                             \
  static inline T u_cosh_##FAM(T x) { return cosh##SUF(x); }                             \
  static inline T u_asinh_##FAM(T x) { return asinh##SUF(x); }                           \
  static inline T u_acosh_##FAM(T x) { return acosh##SUF(x); }                           \
  static inline T u_atanh_##FAM(T x) { return atanh##SUF(x); }                           \
  static inline T u_log2_##FAM(T x) { return log2##SUF(x); }                             \
  static inline T u_log10_##FAM(T x) { return log10##SUF(x); }                           \
  static inline T u_exp2_##FAM(T x) { return exp2##SUF(x); }                             \
  static inline T u_erf_##FAM(T x) { return erf##SUF(x); }                               \
  static inline T u_erfc_##FAM(T x) { return erfc##SUF(x); }                             \
  static inline T u_lgamma_##FAM(T x) { return lgamma##SUF(x); }                         \
  static inline T u_erfinv_##FAM(T x) { return td_erfinv##SUF(x); }                       \
  static inline T u_digamma_##FAM(T x) { return td_digamma##SUF(x); }
DEF_FLOAT_UN(FL, float, f)
DEF_FLOAT_UN(DB, double, )

/* ---- loops ------------------------------------------------------------------------------- */

#define DEF_UN(ATTR, OP, DN, IT, FAM, LD, OT, ST)                                         \
  ATTR static void un_##OP##_##DN(char **p, const int64_t *s, int64_t n, void *ctx) {         \
    (void)ctx;                                                                            \
    if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(IT)) {                     \
      if (p[0] != p[1]) {                                                                 \
        OT *restrict d = (OT *)p[0];                                                      \
        const IT *restrict x = (const IT *)p[1];                                          \
        for (int64_t i = 0; i < n; i++) d[i] = ST(u_##OP##_##FAM(LD(x[i])));              \
      } else {                                                                            \
        OT *d = (OT *)p[0];                                                               \
        const IT *x = (const IT *)p[1];                                                   \
        EW_IVDEP for (int64_t i = 0; i < n; i++) d[i] = ST(u_##OP##_##FAM(LD(x[i])));     \
      }                                                                                   \
    } else {                                                                              \
      char *d = p[0];                                                                     \
      const char *x = p[1];                                                               \
      for (int64_t i = 0; i < n; i++, d += s[0], x += s[1])                               \
        *(OT *)d = ST(u_##OP##_##FAM(LD(*(const IT *)x)));                                \
    }                                                                                     \
  }
/* The ops that are one exact or correctly rounded instruction per element (neg, abs,
 * sqrt, rsqrt, relu, floor, ceil, round, sign) are compiled for AVX-512 and AVX2 too
 * (WIDEST; same bits in every version), on the dtypes held natively: float16 and
 * bfloat16 convert in software, where the clones only add code. The transcendentals
 * of float32 and float64 go through SLEEF (elementwise_vecmath.c), with its own
 * AVX2 and AVX-512 builds. */
#define WIDEST_B WIDEST
#define WIDEST_I WIDEST
#define WIDEST_F WIDEST
#define WIDEST_H
#define WIDEST_BF
#define DEF_SAME(OP, DN, IT, K, CT, FAM, ...) DEF_UN(, OP, DN, IT, FAM, LOAD_##K, IT, STORE_##K)
#define DEF_FAST(OP, DN, IT, K, CT, FAM, ...) \
  DEF_UN(WIDEST_##K, OP, DN, IT, FAM, LOAD_##K, IT, STORE_##K)
#define DEF_PRED(OP, DN, IT, K, CT, FAM, ...) DEF_UN(, OP, DN, IT, FAM, LOAD_##K, uint8_t, STORE_B)

TD_DTYPES_NUM(DEF_FAST, neg)
TD_DTYPES_SINT(DEF_FAST, abs)
TD_DTYPES_FLOAT(DEF_FAST, abs)
TD_DTYPES_FLOAT(DEF_SAME, exp)
TD_DTYPES_FLOAT(DEF_SAME, log)
TD_DTYPES_FLOAT(DEF_SAME, log1p)
TD_DTYPES_FLOAT(DEF_SAME, expm1)
TD_DTYPES_FLOAT(DEF_FAST, sqrt)
TD_DTYPES_FLOAT(DEF_FAST, rsqrt)
TD_DTYPES_FLOAT(DEF_SAME, sin)
TD_DTYPES_FLOAT(DEF_SAME, cos)
TD_DTYPES_FLOAT(DEF_SAME, tanh)
TD_DTYPES_FLOAT(DEF_SAME, sigmoid)
TD_DTYPES_SINT(DEF_FAST, relu)
TD_DTYPES_FLOAT(DEF_FAST, relu)
TD_DTYPES_FLOAT(DEF_FAST, floor)
TD_DTYPES_FLOAT(DEF_FAST, ceil)
TD_DTYPES_FLOAT(DEF_FAST, round)
TD_DTYPES_NUM(DEF_FAST, sign)
TD_DTYPES_ALL(DEF_PRED, logical_not)
TD_DTYPES_FLOAT(DEF_PRED, isnan)
TD_DTYPES_FLOAT(DEF_PRED, isinf)
TD_DTYPES_FLOAT(DEF_SAME, tan)
TD_DTYPES_FLOAT(DEF_SAME, asin)
TD_DTYPES_FLOAT(DEF_SAME, acos)
TD_DTYPES_FLOAT(DEF_SAME, atan)
TD_DTYPES_FLOAT(DEF_SAME, sinh)
TD_DTYPES_FLOAT(DEF_SAME, cosh)
TD_DTYPES_FLOAT(DEF_SAME, asinh)
TD_DTYPES_FLOAT(DEF_SAME, acosh)
TD_DTYPES_FLOAT(DEF_SAME, atanh)
TD_DTYPES_FLOAT(DEF_SAME, log2)
TD_DTYPES_FLOAT(DEF_SAME, log10)
TD_DTYPES_FLOAT(DEF_SAME, exp2)
TD_DTYPES_FLOAT(DEF_SAME, erf)
TD_DTYPES_FLOAT(DEF_SAME, erfc)
TD_DTYPES_FLOAT(DEF_SAME, lgamma)
TD_DTYPES_FLOAT(DEF_FAST, trunc)
TD_DTYPES_FLOAT(DEF_FAST, frac)
TD_DTYPES_FLOAT(DEF_PRED, isfinite)
TD_DTYPES_FLOAT(DEF_PRED, signbit)
TD_DTYPES_SINT(DEF_PRED, signbit)
TD_DTYPES_INTEGRAL(DEF_FAST, bitwise_not)
TD_DTYPES_FLOAT(DEF_SAME, erfinv)
TD_DTYPES_FLOAT(DEF_SAME, digamma)

#define ENTRY(OP, DN, ...) [TD_##DN] = un_##OP##_##DN,
/* loops[op][dtype]; a missing entry is an identity (abs of uint8, floor of integers,
 * sign of bool, ...), a constant false (isnan of integers) or a refusal. */
static const td_inner_loop loops[TD_UNARY_COUNT][TD_NUM_DTYPES] = {
    [TD_UNARY_NEG] = {TD_DTYPES_NUM(ENTRY, neg)},
    [TD_UNARY_ABS] = {TD_DTYPES_SINT(ENTRY, abs) TD_DTYPES_FLOAT(ENTRY, abs)},
    [TD_UNARY_EXP] = {TD_DTYPES_FLOAT(ENTRY, exp)},
    [TD_UNARY_LOG] = {TD_DTYPES_FLOAT(ENTRY, log)},
    [TD_UNARY_LOG1P] = {TD_DTYPES_FLOAT(ENTRY, log1p)},
    [TD_UNARY_EXPM1] = {TD_DTYPES_FLOAT(ENTRY, expm1)},
    [TD_UNARY_SQRT] = {TD_DTYPES_FLOAT(ENTRY, sqrt)},
    [TD_UNARY_RSQRT] = {TD_DTYPES_FLOAT(ENTRY, rsqrt)},
    [TD_UNARY_SIN] = {TD_DTYPES_FLOAT(ENTRY, sin)},
    [TD_UNARY_COS] = {TD_DTYPES_FLOAT(ENTRY, cos)},
    [TD_UNARY_TANH] = {TD_DTYPES_FLOAT(ENTRY, tanh)},
    [TD_UNARY_SIGMOID] = {TD_DTYPES_FLOAT(ENTRY, sigmoid)},
    [TD_UNARY_RELU] = {TD_DTYPES_SINT(ENTRY, relu) TD_DTYPES_FLOAT(ENTRY, relu)},
    [TD_UNARY_FLOOR] = {TD_DTYPES_FLOAT(ENTRY, floor)},
    [TD_UNARY_CEIL] = {TD_DTYPES_FLOAT(ENTRY, ceil)},
    [TD_UNARY_ROUND] = {TD_DTYPES_FLOAT(ENTRY, round)},
    [TD_UNARY_SIGN] = {TD_DTYPES_NUM(ENTRY, sign)},
    [TD_UNARY_LOGICAL_NOT] = {TD_DTYPES_ALL(ENTRY, logical_not)},
    [TD_UNARY_ISNAN] = {TD_DTYPES_FLOAT(ENTRY, isnan)},
    [TD_UNARY_ISINF] = {TD_DTYPES_FLOAT(ENTRY, isinf)},
    [TD_UNARY_TAN] = {TD_DTYPES_FLOAT(ENTRY, tan)},
    [TD_UNARY_ASIN] = {TD_DTYPES_FLOAT(ENTRY, asin)},
    [TD_UNARY_ACOS] = {TD_DTYPES_FLOAT(ENTRY, acos)},
    [TD_UNARY_ATAN] = {TD_DTYPES_FLOAT(ENTRY, atan)},
    [TD_UNARY_SINH] = {TD_DTYPES_FLOAT(ENTRY, sinh)},
    [TD_UNARY_COSH] = {TD_DTYPES_FLOAT(ENTRY, cosh)},
    [TD_UNARY_ASINH] = {TD_DTYPES_FLOAT(ENTRY, asinh)},
    [TD_UNARY_ACOSH] = {TD_DTYPES_FLOAT(ENTRY, acosh)},
    [TD_UNARY_ATANH] = {TD_DTYPES_FLOAT(ENTRY, atanh)},
    [TD_UNARY_LOG2] = {TD_DTYPES_FLOAT(ENTRY, log2)},
    [TD_UNARY_LOG10] = {TD_DTYPES_FLOAT(ENTRY, log10)},
    [TD_UNARY_EXP2] = {TD_DTYPES_FLOAT(ENTRY, exp2)},
    [TD_UNARY_ERF] = {TD_DTYPES_FLOAT(ENTRY, erf)},
    [TD_UNARY_ERFC] = {TD_DTYPES_FLOAT(ENTRY, erfc)},
    [TD_UNARY_LGAMMA] = {TD_DTYPES_FLOAT(ENTRY, lgamma)},
    [TD_UNARY_TRUNC] = {TD_DTYPES_FLOAT(ENTRY, trunc)},
    [TD_UNARY_FRAC] = {TD_DTYPES_FLOAT(ENTRY, frac)},
    [TD_UNARY_ISFINITE] = {TD_DTYPES_FLOAT(ENTRY, isfinite)},
    [TD_UNARY_SIGNBIT] = {TD_DTYPES_FLOAT(ENTRY, signbit) TD_DTYPES_SINT(ENTRY, signbit)},
    [TD_UNARY_BITWISE_NOT] = {TD_DTYPES_INTEGRAL(ENTRY, bitwise_not)},
    [TD_UNARY_ERFINV] = {TD_DTYPES_FLOAT(ENTRY, erfinv)},
    [TD_UNARY_DIGAMMA] = {TD_DTYPES_FLOAT(ENTRY, digamma)},
};

/* Transcendentals of float32 / float64 go through SLEEF (elementwise_vecmath.c). */
td_inner_loop td_ew_unary_loop(int32_t op, int32_t dtype) {
  td_inner_loop vec = td_ew_vecmath_loop(op, dtype);
  return vec ? vec : loops[op][dtype];
}

/* ---- entry points ------------------------------------------------------------------------- */

enum plan { RUN_LOOP, RUN_IDENTITY, RUN_FALSE, RUN_TRUE };

/* How op runs on dtype a: the compute dtype *c, the result dtype *o and the plan;
 * -1 after td_fail for a refused combination. */
static int32_t plan_for(const char *call, int32_t op, int32_t a, int32_t *c, int32_t *o) {
  *c = *o = a;
  const int32_t category = td_unary_rows[op].category;
  if (category == TD_OPCAT_FLOAT) {
    *c = *o = td_dtype_category(a) == TD_CAT_FLOAT ? a : TD_FLOAT32;
    return RUN_LOOP;
  }
  if (a == TD_BOOL && op == TD_UNARY_NEG)
    return td_fail(TD_EDTYPE, "%s: negation of a bool tensor is not supported; to invert a "
                              "mask use logical_not instead", call);
  if (a == TD_BOOL && (op == TD_UNARY_ABS || op == TD_UNARY_RELU || op == TD_UNARY_FLOOR ||
                       op == TD_UNARY_CEIL || op == TD_UNARY_ROUND || op == TD_UNARY_TRUNC))
    return td_fail(TD_EDTYPE, "%s: not supported for bool tensors", call);
  if (category == TD_OPCAT_BITWISE && td_dtype_category(a) == TD_CAT_FLOAT)
    return td_fail(TD_EDTYPE, "%s: not supported for %s tensors (it takes integer and bool ones)",
                   call, td_dtype_name(a));
  if (op == TD_UNARY_FRAC && td_dtype_category(a) != TD_CAT_FLOAT)
    return td_fail(TD_EDTYPE, "%s: not supported for %s tensors (it takes floating point ones)",
                   call, td_dtype_name(a));
  const bool gives_bool = TD_OPCAT_GIVES_BOOL(category);
  if (gives_bool) *o = TD_BOOL;
  if (loops[op][a]) return RUN_LOOP;
  if (op == TD_UNARY_ISFINITE) return RUN_TRUE; /* an integer or bool is finite */
  return gives_bool ? RUN_FALSE : RUN_IDENTITY;
}

static td_tensor *unary_new(const char *call, int32_t op, const td_tensor *a) {
  int32_t c, o;
  const int32_t plan = plan_for(call, op, a->dtype, &c, &o);
  if (plan < 0) return NULL;
  if (plan == RUN_IDENTITY) return td_tensor_clone(a);
  if (plan == RUN_FALSE || plan == RUN_TRUE)
    return td_tensor_full(a->ndim, a->shape, TD_BOOL, plan == RUN_TRUE);
  td_tensor *cast;
  const td_tensor *x = td_as_dtype(a, c, &cast);
  if (!x) return NULL;
  td_tensor *out = td_tensor_empty(a->ndim, a->shape, o);
  if (out) {
    const td_tensor *ops[2] = {out, x};
    td_ew_run(2, ops, td_ew_unary_loop(op, c), NULL);
  }
  td_tensor_release(cast);
  return out;
}

static bool check_op(const char *call, int32_t op) {
  if (op >= 0 && op < TD_UNARY_COUNT) return true;
  td_fail(TD_EINVAL, "%s: unknown unary op %d", call, (int)op);
  return false;
}

TD_EXPORT td_tensor *td_unary(int32_t op, const td_tensor *a) {
  if (!check_op("unary", op)) return NULL;
  const char *call = td_unary_rows[op].name;
  if (!td_ew_check_tensor(call, a, "tensor")) return NULL;
  return unary_new(call, op, a);
}

TD_EXPORT int32_t td_unary_dtypes(int32_t op, int32_t dtype, int32_t *compute, int32_t *result) {
  if (!check_op("unary_dtypes", op)) return td_last_status();
  const char *call = td_unary_rows[op].name;
  if (!td_check_dtype(call, dtype)) return td_last_status();
  const int32_t plan = plan_for(call, op, dtype, compute, result);
  return plan < 0 ? plan : TD_OK;
}

TD_EXPORT int32_t td_unary_(int32_t op, td_tensor *a) {
  if (!check_op("unary_", op)) return td_last_status();
  const char *call = td_unary_rows[op].inplace;
  if (!td_ew_check_tensor(call, a, "tensor")) return td_last_status();
  int32_t c, o;
  const int32_t plan = plan_for(call, op, a->dtype, &c, &o);
  if (plan < 0) return plan;
  if (!td_ew_check_inplace(call, a, a->ndim, a->shape, o)) return td_last_status();
  if (plan == RUN_IDENTITY) return TD_OK;
  if (plan == RUN_FALSE || plan == RUN_TRUE) return td_tensor_fill_(a, plan == RUN_TRUE);
  if (c == a->dtype && o == a->dtype) { /* element i read, then written: no snapshot */
    const td_tensor *ops[2] = {a, a};
    td_ew_run(2, ops, td_ew_unary_loop(op, c), NULL);
    return TD_OK;
  }
  td_tensor *r = unary_new(call, op, a); /* another dtype: compute, then cast into a */
  if (!r) return td_last_status();
  int32_t status = td_tensor_copy_(a, r);
  td_tensor_release(r);
  return status;
}
