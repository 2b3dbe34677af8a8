/*
 * shape.c: the arithmetic on shapes and strides that views, copying shape ops and kernels
 * share: checking a dim, resolving a -1 in a requested shape, finding strides that view
 * a tensor as another shape without a copy, and broadcasting two shapes.
 */
#include "internal.h"

bool td_check_dim(const char *call, const td_tensor *t, int32_t dim, int32_t ndim) {
  if (dim >= 0 && dim < ndim) return true;
  td_fail(TD_EINDEX, "%s: dim %d is out of range for a tensor of %d dims", call, (int)dim,
          (int)t->ndim);
  return false;
}

/* Resolves one -1 in shape from numel; checks the element count matches. */
bool td_infer_shape(const char *call, const td_tensor *t, int32_t ndim, const int64_t *shape,
                    int64_t *out) {
  int64_t numel = td_tensor_numel(t), known = 1;
  int32_t infer = -1;
  char have[TD_SHAPE_STR], want[TD_SHAPE_STR];
  if (ndim < 0 || ndim > TD_MAX_DIMS || (ndim > 0 && !shape)) {
    td_fail(TD_ESHAPE, "%s: %d dims requested, at most %d supported", call, (int)ndim,
            TD_MAX_DIMS);
    return false;
  }
  for (int32_t i = 0; i < ndim; i++) {
    out[i] = shape[i];
    if (shape[i] == -1 && infer < 0) {
      infer = i;
    } else if (shape[i] < 0) {
      td_fail(TD_ESHAPE, "%s: invalid shape %s (one size may be -1, none negative)", call,
              td_format_shape(want, sizeof want, ndim, shape));
      return false;
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      known = -1;
      break;
    }
  }
  if (infer >= 0 && known > 0 && numel % known == 0) out[infer] = numel / known;
  if ((infer >= 0 && (known <= 0 || numel % known != 0)) || (infer < 0 && known != numel)) {
    td_fail(TD_ESHAPE, "%s: shape %s is invalid for a tensor of shape %s (%lld elements)", call,
            td_format_shape(want, sizeof want, ndim, shape),
            td_format_shape(have, sizeof have, t->ndim, t->shape), (long long)numel);
    return false;
  }
  /* An empty tensor takes any sizes with a 0 among them: they must still be sizes a
   * tensor can have, since kernels scale its strides to bytes (issue 28). */
  return td_shape_is_valid(call, ndim, out, NULL);
}

/*
 * Strides for viewing t as shape, or false when no strides exist. Dims of t group
 * into chunks that are contiguous with each other; every run of new dims must
 * multiply to exactly one chunk, and takes its strides from that chunk's innermost.
 */
bool td_view_strides(const td_tensor *t, int32_t ndim, const int64_t *shape, int64_t *strides) {
  if (td_tensor_numel(t) == 0 || t->ndim == 0) return td_contiguous_strides(ndim, shape, strides);
  int32_t vd = ndim - 1;
  int64_t base = t->strides[t->ndim - 1], tn = 1, vn = 1;
  for (int32_t td = t->ndim - 1; td >= 0; td--) {
    tn *= t->shape[td];
    bool chunk_ends = td == 0 || (t->shape[td - 1] != 1 && t->strides[td - 1] != tn * base);
    if (!chunk_ends) continue;
    while (vd >= 0 && (vn < tn || shape[vd] == 1)) {
      strides[vd] = vn * base;
      vn *= shape[vd];
      vd--;
    }
    if (vn != tn) return false;
    if (td > 0) {
      base = t->strides[td - 1];
      tn = vn = 1;
    }
  }
  return vd == -1;
}

bool td_broadcast_shapes(const char *call, int32_t a_ndim, const int64_t *a_shape,
                         int32_t b_ndim, const int64_t *b_shape, int32_t *out_ndim,
                         int64_t *out_shape) {
  int32_t n = a_ndim > b_ndim ? a_ndim : b_ndim;
  int64_t shape[TD_MAX_DIMS];
  for (int32_t i = 0; i < n; i++) { /* align from the right */
    int32_t ia = a_ndim - n + i, ib = b_ndim - n + i;
    int64_t sa = ia >= 0 ? a_shape[ia] : 1, sb = ib >= 0 ? b_shape[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
      td_fail(TD_ESHAPE, "%s: shapes %s and %s do not broadcast", call,
              td_format_shape(a, sizeof a, a_ndim, a_shape),
              td_format_shape(b, sizeof b, b_ndim, b_shape));
      return false;
    }
    shape[i] = sa == 1 ? sb : sa;
  }
  for (int32_t i = 0; i < n; i++) out_shape[i] = shape[i];
  *out_ndim = n;
  return true;
}
