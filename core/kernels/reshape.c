/*
 * reshape.c: the shape ops that may copy. reshape and flatten return an owned tensor: a
 * view when the strides allow one (the rule views.c's view follows), else a contiguous
 * copy, which is why they live with the kernels and not with the views in core/src.
 */
#include "../src/internal.h"

TD_EXPORT td_tensor *td_tensor_reshape(const td_tensor *t, int32_t ndim, const int64_t *shape) {
  int64_t resolved[TD_MAX_DIMS], strides[TD_MAX_DIMS];
  if (!td_infer_shape("reshape", t, ndim, shape, resolved)) return NULL;
  if (td_view_strides(t, ndim, resolved, strides))
    return td_tensor_wrap(t->storage, t->offset, ndim, resolved, strides, t->dtype);
  td_tensor *c = td_tensor_contiguous(t);
  if (!c) return NULL;
  td_tensor *r = td_tensor_wrap(c->storage, c->offset, ndim, resolved, NULL, c->dtype);
  td_tensor_release(c);
  return r;
}

TD_EXPORT td_tensor *td_tensor_flatten(const td_tensor *t, int32_t start_dim, int32_t end_dim) {
  if (t->ndim == 0) {
    int64_t one = 1;
    return td_tensor_reshape(t, 1, &one);
  }
  if (!td_check_dim("flatten", t, start_dim, t->ndim) ||
      !td_check_dim("flatten", t, end_dim, t->ndim))
    return NULL;
  if (start_dim > end_dim)
    return td_fail_null(TD_EINVAL, "flatten: start dim %d comes after end dim %d", (int)start_dim,
                        (int)end_dim);
  int64_t shape[TD_MAX_DIMS];
  int32_t k = 0;
  for (int32_t i = 0; i < start_dim; i++) shape[k++] = t->shape[i];
  shape[k] = 1;
  for (int32_t i = start_dim; i <= end_dim; i++) shape[k] *= t->shape[i];
  k++;
  for (int32_t i = end_dim + 1; i < t->ndim; i++) shape[k++] = t->shape[i];
  return td_tensor_reshape(t, k, shape);
}
