/*
 * elementwise_where.c: td_where, td_masked_fill, td_masked_fill_: selections by a bool
 * mask. Both move element bits (loops by element size), so NaN payloads survive.
 *
 * Behaviours (torch 2.x):
 * - The mask must be bool (torch refuses uint8 masks for masked_fill and deprecates them
 *   for where).
 * - where: mask, a and b broadcast together; a and b promote like a binary op's operands
 *   (Lua scalars as wrapped numbers: where(m, int8 tensor, 2.5) is float32, where(m, 1, 2)
 *   int64). A scalar is converted with torch's check for integer results (300 into int8
 *   is refused, -1 into uint8 wraps to 255); a floating result rounds it (1e6 into
 *   float16 is inf, as torch gives).
 * - masked_fill keeps a's dtype; the mask broadcasts to a's shape (the header's rule: a
 *   never grows, for the new-tensor form too). The value follows torch's checked
 *   conversion (elementwise_util.c): 2.7 into an integer tensor truncates to 2, 300 into
 *   uint8 or NaN into an integer tensor is refused, any value into bool is value != 0.
 * - masked_fill_ reads a mask that overlaps a from a snapshot, as torch's result shows.
 */
#include <math.h>
#include <string.h>

#include "elementwise.h"

#define DEF_WHERE(BYTES, T)                                                               \
  static void where_##BYTES(char **p, const int64_t *s, int64_t n, void *ctx) {          \
    (void)ctx;                                                                            \
    if (s[0] == BYTES && s[1] == 1 && s[2] == BYTES && s[3] == BYTES) {                   \
      T *restrict d = (T *)p[0];                                                          \
      const uint8_t *restrict m = (const uint8_t *)p[1];                                  \
      const T *restrict a = (const T *)p[2], *restrict b = (const T *)p[3];               \
      /* branchless: a random mask would mispredict every other element */              \
      for (int64_t i = 0; i < n; i++) {                                                   \
        T pick = (T)0 - (T)(m[i] != 0);                                                   \
        d[i] = (a[i] & pick) | (b[i] & (T)~pick);                                         \
      }                                                                                   \
    } else {                                                                              \
      char *d = p[0];                                                                     \
      const char *m = p[1], *a = p[2], *b = p[3];                                         \
      for (int64_t i = 0; i < n; i++, d += s[0], m += s[1], a += s[2], b += s[3])         \
        *(T *)d = *(const uint8_t *)m ? *(const T *)a : *(const T *)b;                    \
    }                                                                                     \
  }

/* Writes every element (the old value where the mask is false): a select vectorises,
 * a conditional store does not. */
#define DEF_FILL(BYTES, T)                                                                \
  static void fill_##BYTES(char **p, const int64_t *s, int64_t n, void *vctx) {          \
    T v;                                                                                  \
    memcpy(&v, &((const td_ew_ctx *)vctx)->bits, BYTES);                                  \
    if (s[0] == BYTES && s[1] == 1) {                                                     \
      T *restrict d = (T *)p[0];                                                          \
      const uint8_t *restrict m = (const uint8_t *)p[1];                                  \
      for (int64_t i = 0; i < n; i++) d[i] = m[i] ? v : d[i];                             \
    } else {                                                                              \
      char *d = p[0];                                                                     \
      const char *m = p[1];                                                               \
      for (int64_t i = 0; i < n; i++, d += s[0], m += s[1])                               \
        if (*(const uint8_t *)m) *(T *)d = v;                                             \
    }                                                                                     \
  }

DEF_WHERE(1, uint8_t)
DEF_WHERE(2, uint16_t)
DEF_WHERE(4, uint32_t)
DEF_WHERE(8, uint64_t)
DEF_FILL(1, uint8_t)
DEF_FILL(2, uint16_t)
DEF_FILL(4, uint32_t)
DEF_FILL(8, uint64_t)

static td_inner_loop by_size(int64_t itemsize, bool where) {
  switch (itemsize) {
    case 1: return where ? where_1 : fill_1;
    case 2: return where ? where_2 : fill_2;
    case 4: return where ? where_4 : fill_4;
    default: return where ? where_8 : fill_8;
  }
}

static bool check_mask(const char *call, const td_tensor *mask) {
  if (!td_ew_check_tensor(call, mask, "mask")) return false;
  if (mask->dtype == TD_BOOL) return true;
  td_fail(TD_EDTYPE, "%s: the mask must be bool, got %s", call, td_dtype_name(mask->dtype));
  return false;
}

/* ---- where -------------------------------------------------------------------------------- */

/* An operand of where as dtype r: tensors cast, scalars checked into r's bytes. */
static bool where_operand(const char *call, td_operand x, int32_t r, td_ew_arg *arg) {
  if (x.t) return td_ew_arg_init(arg, call, x, r);
  uint64_t bits;
  double v = x.s;
  if (x.kind == TD_SCALAR_BOOL) v = v != 0;
  else if (x.kind == TD_SCALAR_INT) v = trunc(v);
  if (!td_ew_fill_value(call, v, r, true, &bits)) return false;
  td_ew_arg_bits(arg, r, bits);
  return true;
}

TD_EXPORT td_tensor *td_where(const td_tensor *mask, const td_tensor *a, double a_scalar,
                              int32_t a_kind, const td_tensor *b, double b_scalar,
                              int32_t b_kind) {
  const char *call = "where";
  if (!check_mask(call, mask)) return NULL;
  if (a ? !td_ew_check_tensor(call, a, "first tensor") : !td_ew_check_kind(call, a_kind))
    return NULL;
  if (b ? !td_ew_check_tensor(call, b, "second tensor") : !td_ew_check_kind(call, b_kind))
    return NULL;
  td_operand x = {a, a_scalar, a_kind}, y = {b, b_scalar, b_kind};
  td_promo pr;
  td_promo_init(&pr);
  if (a) td_promo_tensor(&pr, a);
  else td_promo_scalar(&pr, a_kind);
  if (b) td_promo_tensor(&pr, b);
  else td_promo_scalar(&pr, b_kind);
  const int32_t r = td_promo_result(&pr);
  int32_t n1, ndim;
  int64_t s1[TD_MAX_DIMS], shape[TD_MAX_DIMS];
  if (!td_broadcast_shapes(call, mask->ndim, mask->shape, a ? a->ndim : 0, a ? a->shape : NULL,
                           &n1, s1) ||
      !td_broadcast_shapes(call, n1, s1, b ? b->ndim : 0, b ? b->shape : NULL, &ndim, shape))
    return NULL;
  td_ew_arg xa, ya;
  xa.owned = ya.owned = NULL;
  td_tensor *out = where_operand(call, x, r, &xa) && where_operand(call, y, r, &ya)
                       ? td_tensor_empty(ndim, shape, r)
                       : NULL;
  if (out) {
    td_tensor me, xe, ye;
    const td_tensor *ops[4] = {out, td_ew_expanded(mask, ndim, shape, &me),
                               td_ew_expanded(xa.t, ndim, shape, &xe),
                               td_ew_expanded(ya.t, ndim, shape, &ye)};
    td_ew_run(4, ops, by_size(out->itemsize, true), NULL);
  }
  td_ew_arg_done(&xa);
  td_ew_arg_done(&ya);
  return out;
}

/* ---- masked_fill -------------------------------------------------------------------------- */

/* Checks that mask suits a; the value as a's stored bytes. */
static bool fill_prepare(const char *call, const td_tensor *a, const td_tensor *mask,
                         double value, td_ew_ctx *ctx) {
  if (!td_ew_check_tensor(call, a, "tensor") || !check_mask(call, mask)) return false;
  td_tensor me;
  if (td_tensor_expand(mask, a->ndim, a->shape, &me) != TD_OK) {
    char s1[TD_SHAPE_STR], s2[TD_SHAPE_STR];
    td_fail(TD_ESHAPE, "%s: mask shape %s does not broadcast to the tensor's shape %s", call,
            td_format_shape(s1, sizeof s1, mask->ndim, mask->shape),
            td_format_shape(s2, sizeof s2, a->ndim, a->shape));
    return false;
  }
  td_ew_ctx_init(ctx);
  return td_ew_fill_value(call, value, a->dtype, false, &ctx->bits);
}

/* a is writable and checked; mask broadcasts to it. */
static int32_t fill_run(td_tensor *a, const td_tensor *mask, td_ew_ctx *ctx) {
  td_tensor me;
  td_ew_expand(mask, a->ndim, a->shape, &me);
  td_tensor *snapshot = NULL;
  if (td_tensors_overlap(a, &me)) {
    if (!(snapshot = td_tensor_clone(mask))) return td_last_status();
    td_ew_expand(snapshot, a->ndim, a->shape, &me);
  }
  const td_tensor *ops[2] = {a, &me};
  td_ew_run(2, ops, by_size(a->itemsize, false), ctx);
  td_tensor_release(snapshot);
  return TD_OK;
}

TD_EXPORT td_tensor *td_masked_fill(const td_tensor *a, const td_tensor *mask, double value) {
  td_ew_ctx ctx;
  if (!fill_prepare("masked_fill", a, mask, value, &ctx)) return NULL;
  td_tensor *out = td_tensor_clone(a);
  if (out && fill_run(out, mask, &ctx) != TD_OK) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

TD_EXPORT int32_t td_masked_fill_(td_tensor *a, const td_tensor *mask, double value) {
  td_ew_ctx ctx;
  if (!fill_prepare("masked_fill_", a, mask, value, &ctx)) return td_last_status();
  if (!td_ew_check_writable("masked_fill_", a)) return td_last_status();
  return fill_run(a, mask, &ctx);
}
