/*
 * elementwise_clamp.c: td_clamp, td_clamp_.
 *
 * Behaviours (torch 2.x's clamp with Python-number bounds):
 * - The C bounds are doubles without a kind: an integral finite bound counts as an INT
 *   scalar, any other (fraction, NaN, infinity) as a FLOAT one. The result dtype is then
 *   torch's promotion of a with the given bounds: an integer tensor clamped by 0.5 is
 *   float32, a bool tensor clamped by integers is int64. The in-place form requires that
 *   dtype to be a's own, like torch.
 * - A NaN bound makes every element NaN (torch fills the result with NaN).
 * - Each bound is converted to the result dtype first. Integer results: a min above the
 *   dtype's maximum or a max below its minimum is refused (torch: "outside the
 *   representable range"), other bounds saturate (uint8 clamped to [-1, 300] is a no-op).
 *   Floating results: a finite bound beyond the dtype's range is refused (1e6 for
 *   float16), like torch's checked conversion; infinities pass.
 * - x < min gives min, then x > max gives max, so min > max gives max everywhere and a NaN
 *   element stays NaN; on ties x is kept (clamp(-0, min=0) is -0).
 * - At least one bound must be given.
 */
#include <math.h>

#include "dtypes.h"
#include "elementwise.h"

/* The bound of ctx as the compute type: lo / hi for floats, ilo / ihi for integers. */
#define BOUND(CT, c, which) \
  _Generic((CT)0, float: (float)(c)->which, double: (c)->which, default: (CT)(c)->i##which)

#define DEF_CLAMP(ARG, DN, IT, K, CT, ...)                                                \
  static void clamp_##DN(char **p, const int64_t *s, int64_t n, void *vctx) {            \
    const td_ew_ctx *c = vctx;                                                            \
    const CT lo = BOUND(CT, c, lo), hi = BOUND(CT, c, hi);                                \
    if (s[0] == (int64_t)sizeof(IT) && s[1] == (int64_t)sizeof(IT)) {                     \
      IT *d = (IT *)p[0];                                                                 \
      const IT *a = (const IT *)p[1];                                                     \
      EW_IVDEP for (int64_t i = 0; i < n; i++) {                                          \
        CT v = LOAD_##K(a[i]);                                                            \
        v = v < lo ? lo : v;                                                              \
        d[i] = STORE_##K(hi < v ? hi : v);                                                \
      }                                                                                   \
    } else {                                                                              \
      char *d = p[0];                                                                     \
      const char *a = p[1];                                                               \
      for (int64_t i = 0; i < n; i++, d += s[0], a += s[1]) {                             \
        CT v = LOAD_##K(*(const IT *)a);                                                  \
        v = v < lo ? lo : v;                                                              \
        *(IT *)d = STORE_##K(hi < v ? hi : v);                                            \
      }                                                                                   \
    }                                                                                     \
  }
TD_DTYPES_NUM(DEF_CLAMP, _)

#define ENTRY(ARG, DN, ...) [TD_##DN] = clamp_##DN,
static const td_inner_loop loops[TD_NUM_DTYPES] = {TD_DTYPES_NUM(ENTRY, _)};

static int32_t bound_kind(double v) {
  return isfinite(v) && v == trunc(v) ? TD_SCALAR_INT : TD_SCALAR_FLOAT;
}

/* A bound converted to floating dtype r (refused when out of its range), read back. */
static bool float_bound(const char *call, double v, int32_t r, double *out) {
  uint64_t bits;
  if (!td_ew_fill_value(call, v, r, false, &bits)) return false;
  char *ptrs[2] = {(char *)out, (char *)&bits};
  const int64_t strides[2] = {8, td_dtype_itemsize(r)};
  td_cast_loop(TD_FLOAT64, r)(ptrs, strides, 1, NULL);
  return true;
}

/* Fills ctx's bounds for result dtype r (a missing bound is open), or fails. */
static bool set_bounds(const char *call, int32_t r, double min, double max, bool has_min,
                       bool has_max, td_ew_ctx *ctx) {
  if (td_dtype_category(r) == TD_CAT_FLOAT) {
    ctx->lo = -INFINITY;
    ctx->hi = INFINITY;
    return (!has_min || float_bound(call, min, r, &ctx->lo)) &&
           (!has_max || float_bound(call, max, r, &ctx->hi));
  }
  /* Integers: both bounds are integral here (a fractional one would have promoted).
   * [lo, hi) is the dtype's range as doubles, hi exclusive (2^63 is not an int64). */
  const double lo = td_dtype_lowest(r), hi = td_dtype_max(r) + 1; /* exact */
  int64_t ilo, ihi;
  td_dtype_exact_range(r, &ilo, &ihi);
  if (has_min && min >= hi) {
    td_fail(TD_EINVAL, "%s: min value %.17g is outside the range of %s", call, min,
            td_dtype_name(r));
    return false;
  }
  if (has_max && max < lo) {
    td_fail(TD_EINVAL, "%s: max value %.17g is outside the range of %s", call, max,
            td_dtype_name(r));
    return false;
  }
  ctx->ilo = !has_min || min <= lo ? ilo : (int64_t)min;
  ctx->ihi = !has_max || max >= hi ? ihi : (int64_t)max;
  return true;
}

/* clamp into out (a new tensor) or into a itself (inplace). */
static int32_t clamp_impl(const char *call, const td_tensor *a, double min, double max,
                          int32_t has_min, int32_t has_max, bool inplace, td_tensor **result) {
  if (!td_ew_check_tensor(call, a, "tensor")) return td_last_status();
  if (!has_min && !has_max)
    return td_fail(TD_EINVAL, "%s: at least one of min and max must be given", call);
  td_promo pr;
  td_promo_init(&pr);
  td_promo_tensor(&pr, a);
  if (has_min) td_promo_scalar(&pr, bound_kind(min));
  if (has_max) td_promo_scalar(&pr, bound_kind(max));
  const int32_t r = td_dtype_category(a->dtype) == TD_CAT_FLOAT ? a->dtype : td_promo_result(&pr);
  if (inplace) {
    if (!td_ew_check_writable(call, a)) return td_last_status();
    if (r != a->dtype)
      return td_fail(TD_EDTYPE, "%s: result type %s can't be cast to the desired output type %s",
                     call, td_dtype_name(r), td_dtype_name(a->dtype));
  }
  if ((has_min && isnan(min)) || (has_max && isnan(max))) { /* r is floating here */
    if (inplace) return td_tensor_fill_((td_tensor *)a, NAN);
    *result = td_tensor_full(a->ndim, a->shape, r, NAN);
    return *result ? TD_OK : td_last_status();
  }
  td_ew_ctx ctx;
  td_ew_ctx_init(&ctx);
  if (!set_bounds(call, r, min, max, has_min, has_max, &ctx)) return td_last_status();
  td_tensor *cast;
  const td_tensor *x = td_as_dtype(a, r, &cast);
  if (!x) return td_last_status();
  td_tensor *out = inplace ? (td_tensor *)a : td_tensor_empty(a->ndim, a->shape, r);
  if (out) {
    const td_tensor *ops[2] = {out, x};
    td_ew_run(2, ops, loops[r], &ctx);
  }
  td_tensor_release(cast);
  if (!out) return td_last_status();
  if (!inplace) *result = out;
  return TD_OK;
}

TD_EXPORT td_tensor *td_clamp(const td_tensor *a, double min, double max, int32_t has_min,
                              int32_t has_max) {
  td_tensor *r = NULL;
  clamp_impl("clamp", a, min, max, has_min, has_max, false, &r);
  return r;
}

TD_EXPORT int32_t td_clamp_(td_tensor *a, double min, double max, int32_t has_min,
                            int32_t has_max) {
  return clamp_impl("clamp_", a, min, max, has_min, has_max, true, NULL);
}
