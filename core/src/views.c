/*
 * views.c: every operation that makes a new header over the same storage: select,
 * slice, index, (un)squeeze, permute, transpose, expand, view, unflatten write a
 * caller-owned header into out. None of them touches element data. reshape and flatten,
 * which copy when the strides forbid a view, live in core/kernels/reshape.c; the shape
 * arithmetic they share with these is in shape.c.
 */
#include <string.h>

#include "internal.h"

static int32_t derive(td_tensor *out, const td_tensor *t, int64_t offset, int32_t ndim,
                      const int64_t *shape, const int64_t *strides) {
  td_view_set(out, t, offset, ndim, shape, strides);
  return TD_OK;
}

/* Entries selecting dim whole dims, then e: how select, slice and unsqueeze reach index. */
static int32_t index_at_dim(const td_tensor *t, int32_t dim, td_index e, td_tensor *out) {
  td_index entries[TD_MAX_DIMS + 1];
  for (int32_t i = 0; i < dim; i++) entries[i] = (td_index){TD_INDEX_SLICE, 0, INT64_MAX, 1};
  entries[dim] = e;
  return td_tensor_index(t, entries, dim + 1, out);
}

TD_EXPORT int32_t td_tensor_select(const td_tensor *t, int32_t dim, int64_t index,
                                   td_tensor *out) {
  if (!td_check_dim("select", t, dim, t->ndim)) return TD_EINDEX;
  return index_at_dim(t, dim, (td_index){TD_INDEX_SELECT, index, 0, 0}, out);
}

TD_EXPORT int32_t td_tensor_slice(const td_tensor *t, int32_t dim, int64_t start, int64_t stop,
                                  int64_t step, td_tensor *out) {
  if (!td_check_dim("slice", t, dim, t->ndim)) return TD_EINDEX;
  return index_at_dim(t, dim, (td_index){TD_INDEX_SLICE, start, stop, step}, out);
}

/* Python's rule: negative bounds count from the end, then clamp into [0, size]. */
static int64_t clamp_bound(int64_t v, int64_t size) {
  if (v < 0) v += size;
  return v < 0 ? 0 : v > size ? size : v;
}

TD_EXPORT int32_t td_tensor_index(const td_tensor *t, const td_index *entries, int32_t n,
                                  td_tensor *out) {
  int32_t consuming = 0, selects = 0, ellipses = 0, newaxes = 0;
  if (n < 0 || (n > 0 && !entries))
    return td_fail(TD_EINVAL, "index: %d entries at %p", (int)n, (const void *)entries);
  for (int32_t k = 0; k < n; k++) {
    switch (entries[k].kind) {
      case TD_INDEX_SELECT: selects++; consuming++; break;
      case TD_INDEX_SLICE: consuming++; break;
      case TD_INDEX_NEWAXIS: newaxes++; break;
      case TD_INDEX_ELLIPSIS: ellipses++; break;
      default:
        return td_fail(TD_EINVAL, "index: entry %d has unknown kind %d", (int)k,
                       (int)entries[k].kind);
    }
  }
  if (ellipses > 1) return td_fail(TD_EINVAL, "index: at most one ellipsis, got %d", (int)ellipses);
  if (consuming > t->ndim)
    return td_fail(TD_EINDEX, "index: %d indices for a tensor of %d dims", (int)consuming,
                   (int)t->ndim);
  int32_t out_ndim = t->ndim - selects + newaxes; /* slices keep their dim */
  if (out_ndim > TD_MAX_DIMS)
    return td_fail(TD_ESHAPE, "index: the result would have %d dims, at most %d supported",
                   (int)out_ndim, TD_MAX_DIMS);
  int64_t shape[TD_MAX_DIMS], strides[TD_MAX_DIMS], offset = t->offset;
  int32_t in = 0, k_out = 0;
  for (int32_t k = 0; k < n; k++) {
    const td_index *e = &entries[k];
    if (e->kind == TD_INDEX_SELECT) {
      int64_t size = t->shape[in], i = e->start;
      if (i < -size || i >= size)
        return td_fail(TD_EINDEX, "index: index %lld is out of range for dim %d of size %lld",
                       (long long)i, (int)in, (long long)size);
      offset += (i < 0 ? i + size : i) * t->strides[in];
      in++;
    } else if (e->kind == TD_INDEX_SLICE) {
      int64_t size = t->shape[in];
      if (e->step <= 0)
        return td_fail(TD_EINVAL, "index: slice step must be positive, got %lld",
                       (long long)e->step);
      int64_t start = clamp_bound(e->start, size), stop = clamp_bound(e->stop, size);
      int64_t len = stop > start ? (stop - start - 1) / e->step + 1 : 0;
      if (len > 0) offset += start * t->strides[in];
      shape[k_out] = len;
      strides[k_out++] = td_slice_stride(t->strides[in], e->step, len);
      in++;
    } else if (e->kind == TD_INDEX_NEWAXIS) {
      shape[k_out] = 1;
      strides[k_out++] = 1;
    } else { /* the ellipsis stands for every dim no other entry consumes */
      for (int32_t j = 0; j < t->ndim - consuming; j++) {
        shape[k_out] = t->shape[in];
        strides[k_out++] = t->strides[in++];
      }
    }
  }
  while (in < t->ndim) {
    shape[k_out] = t->shape[in];
    strides[k_out++] = t->strides[in++];
  }
  return derive(out, t, offset, k_out, shape, strides);
}

TD_EXPORT int32_t td_tensor_unsqueeze(const td_tensor *t, int32_t dim, td_tensor *out) {
  if (!td_check_dim("unsqueeze", t, dim, t->ndim + 1)) return TD_EINDEX;
  return index_at_dim(t, dim, (td_index){TD_INDEX_NEWAXIS, 0, 0, 0}, out);
}

TD_EXPORT int32_t td_tensor_squeeze(const td_tensor *t, int32_t dim, td_tensor *out) {
  if (!td_check_dim("squeeze", t, dim, t->ndim)) return TD_EINDEX;
  if (t->shape[dim] != 1) return derive(out, t, t->offset, t->ndim, t->shape, t->strides);
  return td_tensor_select(t, dim, 0, out);
}

TD_EXPORT int32_t td_tensor_squeeze_all(const td_tensor *t, td_tensor *out) {
  int64_t shape[TD_MAX_DIMS], strides[TD_MAX_DIMS];
  int32_t k = 0;
  for (int32_t i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 1) continue;
    shape[k] = t->shape[i];
    strides[k++] = t->strides[i];
  }
  return derive(out, t, t->offset, k, shape, strides);
}

TD_EXPORT int32_t td_tensor_permute(const td_tensor *t, const int32_t *dims, td_tensor *out) {
  int64_t shape[TD_MAX_DIMS], strides[TD_MAX_DIMS];
  bool seen[TD_MAX_DIMS] = {false};
  if (t->ndim > 0 && !dims) return td_fail(TD_EINVAL, "permute: dims is NULL");
  for (int32_t i = 0; i < t->ndim; i++) {
    int32_t d = dims[i];
    if (!td_check_dim("permute", t, d, t->ndim)) return TD_EINDEX;
    if (seen[d]) return td_fail(TD_EINVAL, "permute: dim %d appears twice", (int)d);
    seen[d] = true;
    shape[i] = t->shape[d];
    strides[i] = t->strides[d];
  }
  return derive(out, t, t->offset, t->ndim, shape, strides);
}

TD_EXPORT int32_t td_tensor_transpose(const td_tensor *t, int32_t dim0, int32_t dim1,
                                      td_tensor *out) {
  if (!td_check_dim("transpose", t, dim0, t->ndim) ||
      !td_check_dim("transpose", t, dim1, t->ndim))
    return TD_EINDEX;
  int32_t dims[TD_MAX_DIMS];
  for (int32_t i = 0; i < t->ndim; i++) dims[i] = i;
  dims[dim0] = dim1;
  dims[dim1] = dim0;
  return td_tensor_permute(t, dims, out);
}

TD_EXPORT int32_t td_tensor_diagonal(const td_tensor *t, int64_t offset, int32_t dim1, int32_t dim2,
                                     td_tensor *out) {
  if (!td_check_dim("diagonal", t, dim1, t->ndim) || !td_check_dim("diagonal", t, dim2, t->ndim))
    return TD_EINDEX;
  if (dim1 == dim2) return td_fail(TD_EINVAL, "diagonal: dim1 and dim2 are both %d", (int)dim1);
  int64_t shape[TD_MAX_DIMS], strides[TD_MAX_DIMS];
  int32_t k = 0;
  for (int32_t i = 0; i < t->ndim; i++) {
    if (i == dim1 || i == dim2) continue;
    shape[k] = t->shape[i];
    strides[k++] = t->strides[i];
  }
  const int64_t n1 = t->shape[dim1], n2 = t->shape[dim2];
  int64_t len = offset >= 0 ? (n1 < n2 - offset ? n1 : n2 - offset) : (n1 + offset < n2 ? n1 + offset : n2);
  int64_t start = t->offset;
  if (len <= 0) len = 0; /* an offset past the matrix: an empty diagonal at the start */
  else start += offset >= 0 ? offset * t->strides[dim2] : -offset * t->strides[dim1];
  shape[k] = len;
  strides[k++] = t->strides[dim1] + t->strides[dim2];
  return derive(out, t, start, k, shape, strides);
}

TD_EXPORT int32_t td_tensor_expand(const td_tensor *t, int32_t ndim, const int64_t *shape,
                                   td_tensor *out) {
  char from[TD_SHAPE_STR], to[TD_SHAPE_STR];
  if (ndim < t->ndim || ndim > TD_MAX_DIMS || (ndim > 0 && !shape))
    return td_fail(TD_ESHAPE, "expand: cannot expand shape %s to %d dims",
                   td_format_shape(from, sizeof from, t->ndim, t->shape), (int)ndim);
  int64_t out_shape[TD_MAX_DIMS], out_strides[TD_MAX_DIMS];
  int32_t lead = ndim - t->ndim;
  for (int32_t i = 0; i < ndim; i++) {
    int64_t want = shape[i];
    if (i < lead) { /* a new leading dim repeats the whole tensor */
      if (want < 0)
        return td_fail(TD_ESHAPE, "expand: size %lld is not allowed for new leading dim of %s",
                       (long long)want, td_format_shape(to, sizeof to, ndim, shape));
      out_shape[i] = want;
      out_strides[i] = 0;
      continue;
    }
    int64_t have = t->shape[i - lead];
    if (want == -1 || want == have) {
      out_shape[i] = have;
      out_strides[i] = t->strides[i - lead];
    } else if (have == 1 && want >= 0) {
      out_shape[i] = want;
      out_strides[i] = 0;
    } else {
      return td_fail(TD_ESHAPE, "expand: cannot expand shape %s to %s (only size-1 dims expand)",
                     td_format_shape(from, sizeof from, t->ndim, t->shape),
                     td_format_shape(to, sizeof to, ndim, shape));
    }
  }
  /* No memory is needed, but every header's shape must be one a tensor could have:
   * kernels count its elements and scale its strides to bytes (issue 28). */
  if (!td_shape_is_valid("expand", ndim, out_shape, NULL)) return td_last_status();
  return derive(out, t, t->offset, ndim, out_shape, out_strides);
}

TD_EXPORT int32_t td_tensor_view(const td_tensor *t, int32_t ndim, const int64_t *shape,
                                 td_tensor *out) {
  int64_t resolved[TD_MAX_DIMS], strides[TD_MAX_DIMS];
  if (!td_infer_shape("view", t, ndim, shape, resolved)) return TD_ESHAPE;
  if (!td_view_strides(t, ndim, resolved, strides)) {
    char have[TD_SHAPE_STR], st[TD_SHAPE_STR], want[TD_SHAPE_STR];
    return td_fail(TD_ESHAPE, "view: cannot view shape %s with strides %s as %s without a copy; "
                   "use reshape() or contiguous() first",
                   td_format_shape(have, sizeof have, t->ndim, t->shape),
                   td_format_shape(st, sizeof st, t->ndim, t->strides),
                   td_format_shape(want, sizeof want, ndim, resolved));
  }
  return derive(out, t, t->offset, ndim, resolved, strides);
}

TD_EXPORT int32_t td_tensor_unflatten(const td_tensor *t, int32_t dim, int32_t n,
                                      const int64_t *sizes, td_tensor *out) {
  if (!td_check_dim("unflatten", t, dim, t->ndim)) return TD_EINDEX;
  if (n < 1 || t->ndim - 1 + n > TD_MAX_DIMS || !sizes)
    return td_fail(TD_ESHAPE, "unflatten: cannot split a dim of a %d-dim tensor into %d dims",
                   (int)t->ndim, (int)n);
  int64_t shape[TD_MAX_DIMS];
  int32_t k = 0;
  for (int32_t i = 0; i < dim; i++) shape[k++] = t->shape[i];
  for (int32_t i = 0; i < n; i++) shape[k++] = sizes[i];
  for (int32_t i = dim + 1; i < t->ndim; i++) shape[k++] = t->shape[i];
  /* A -1 here must resolve within the split dim, not across the whole tensor. */
  int64_t known = 1;
  int32_t infer = -1;
  for (int32_t i = 0; i < n; i++) {
    if (sizes[i] == -1 && infer < 0)
      infer = i;
    else if (sizes[i] < 0 || __builtin_mul_overflow(known, sizes[i], &known))
      known = 0;
  }
  if (infer >= 0 && known > 0 && t->shape[dim] % known == 0)
    shape[dim + infer] = t->shape[dim] / known;
  int64_t product = 1;
  bool overflow = false;
  for (int32_t i = 0; i < n; i++)
    overflow |= __builtin_mul_overflow(product, shape[dim + i], &product);
  if (overflow || product != t->shape[dim] || (infer >= 0 && known <= 0)) {
    char buf[TD_SHAPE_STR];
    return td_fail(TD_ESHAPE,
                   "unflatten: sizes %s do not multiply to %lld, the size of the dim split",
                   td_format_shape(buf, sizeof buf, n, sizes), (long long)t->shape[dim]);
  }
  if (!td_shape_is_valid("unflatten", k, shape, NULL)) return td_last_status();
  return td_tensor_view(t, k, shape, out);
}
