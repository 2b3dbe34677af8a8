/*
 * join.cu: cat and stack on the device: the result is allocated once and each input is
 * copied (and cast to the common dtype, td_result_type's) into its slice of it.
 */
#include <string.h>

#include "cuda_internal.h"

/* Checks the list: non-empty, every tensor on the first one's device; the common dtype. */
static int32_t check_list(const char *call, const td_tensor *const *ts, int32_t n) {
  if (!ts || n < 1) return tdc_fail(TD_EINVAL, "%s: expected a non-empty list of tensors", call);
  if (!ts[0]) return tdc_fail(TD_EINVAL, "%s: tensor 0 of the list is NULL", call);
  const int32_t device = td_tensor_device_index(ts[0]);
  int32_t dtype = ts[0]->dtype;
  for (int32_t i = 0; i < n; i++) {
    char what[48];
    snprintf(what, sizeof what, "tensor at position %d", (int)i);
    if (!tdc_check_on(call, ts[i], what, device)) return td_last_status();
    if (i > 0) {
      /* promote pairwise as the CPU does for a list (shapes do not matter here) */
      td_tensor probe = *ts[i];
      td_tensor acc = *ts[0];
      acc.dtype = dtype;
      dtype = td_result_type(&acc, &probe);
      if (dtype < 0) return dtype;
    }
  }
  if (!tdc_use_device(call, device)) return td_last_status();
  return dtype;
}

TDC_EXPORT td_tensor *td_cuda_cat(const td_tensor *const *ts, int32_t n, int32_t dim) {
  const char *call = "cat";
  const int32_t dtype = check_list(call, ts, n);
  if (dtype < 0) return NULL;
  const td_tensor *a = ts[0];
  if (a->ndim == 0) {
    tdc_fail(TD_ESHAPE, "%s: zero-dimensional tensor (at position 0) cannot be concatenated", call);
    return NULL;
  }
  if (dim < -a->ndim || dim >= a->ndim) {
    tdc_fail(TD_EINDEX, "%s: dim %d is out of range for %d-dim tensors", call, (int)dim, (int)a->ndim);
    return NULL;
  }
  if (dim < 0) dim += a->ndim;
  int64_t shape[TD_MAX_DIMS];
  memcpy(shape, a->shape, sizeof shape);
  shape[dim] = 0;
  for (int32_t i = 0; i < n; i++) {
    bool same = ts[i]->ndim == a->ndim;
    for (int32_t d = 0; same && d < a->ndim; d++) same = d == dim || ts[i]->shape[d] == a->shape[d];
    if (!same) {
      tdc_fail(TD_ESHAPE, "%s: sizes of tensors must match except in dim %d (tensor at position "
               "%d differs)", call, (int)dim, (int)i);
      return NULL;
    }
    shape[dim] += ts[i]->shape[dim];
  }
  td_tensor *out = tdc_empty(call, td_tensor_device_index(a), a->ndim, shape, dtype);
  if (!out) return NULL;
  int64_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    td_tensor slot;
    td_tensor_slice(out, dim, at, at + ts[i]->shape[dim], 1, &slot);
    at += ts[i]->shape[dim];
    if (!tdc_copy_same_shape(call, &slot, ts[i])) {
      td_tensor_release(out);
      return NULL;
    }
  }
  return out;
}

TDC_EXPORT td_tensor *td_cuda_stack(const td_tensor *const *ts, int32_t n, int32_t dim) {
  const char *call = "stack";
  const int32_t dtype = check_list(call, ts, n);
  if (dtype < 0) return NULL;
  const td_tensor *a = ts[0];
  if (a->ndim + 1 > TD_MAX_DIMS) {
    tdc_fail(TD_ESHAPE, "%s: the result would have %d dims (at most %d)", call, (int)a->ndim + 1,
             TD_MAX_DIMS);
    return NULL;
  }
  if (dim < -(a->ndim + 1) || dim > a->ndim) {
    tdc_fail(TD_EINDEX, "%s: dim %d is out of range for the %d-dim result", call, (int)dim,
             (int)a->ndim + 1);
    return NULL;
  }
  if (dim < 0) dim += a->ndim + 1;
  for (int32_t i = 1; i < n; i++) {
    bool same = ts[i]->ndim == a->ndim;
    for (int32_t d = 0; same && d < a->ndim; d++) same = ts[i]->shape[d] == a->shape[d];
    if (!same) {
      tdc_fail(TD_ESHAPE, "%s: expects each tensor to be equal size (tensor at position %d "
               "differs)", call, (int)i);
      return NULL;
    }
  }
  int64_t shape[TD_MAX_DIMS];
  for (int32_t d = 0, k = 0; d <= a->ndim; d++) shape[d] = d == dim ? n : a->shape[k++];
  td_tensor *out = tdc_empty(call, td_tensor_device_index(a), a->ndim + 1, shape, dtype);
  if (!out) return NULL;
  for (int32_t i = 0; i < n; i++) {
    td_tensor slot;
    td_tensor_select(out, dim, i, &slot);
    if (!tdc_copy_same_shape(call, &slot, ts[i])) {
      td_tensor_release(out);
      return NULL;
    }
  }
  return out;
}
