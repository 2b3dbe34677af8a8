/*
 * gather.cu: index_select, gather, scatter_ and masked_select on the device.
 *
 * Index values are 0-based, negative ones count from the end, as in the CPU library.
 * An index out of range sets a flag the host reads after the kernel (one synchronizing
 * read), and the call fails naming the dim and its size; a scatter_ that failed so may
 * have written the in-range elements. masked_select counts with a CUB prefix sum.
 */
#include <string.h>

#include <cub/device/device_scan.cuh>

#include "cuda_internal.h"

/* The checked index value (flag set and 0 used when out of range). */
__device__ __forceinline__ int64_t fix_index(int64_t v, int64_t size, int32_t *bad) {
  if (v < 0) v += size;
  if (v < 0 || v >= size) {
    *bad = 1;
    return 0;
  }
  return v;
}

/* Element i of out (contiguous, out_layout's shape) from a, the coordinate in dim taken
 * through the index. mode 0: index_select (index 1-D over dim); 1: gather (index of
 * out's shape). */
__global__ void take_kernel(char *out, const char *a, tdc_layout al, const int64_t *index,
                            tdc_layout il, tdc_layout ol, int32_t dim, int32_t mode,
                            int64_t itemsize, int64_t n, int32_t *bad) {
  TDC_LOOP(i, n) {
    int64_t rest = i, off = 0, coord_dim = 0;
    for (int32_t d = ol.ndim - 1; d >= 0; d--) {
      const int64_t c = rest % ol.shape[d];
      rest /= ol.shape[d];
      if (d == dim) coord_dim = c;
      else off += c * al.strides[d];
    }
    const int64_t raw = mode == 0 ? index[tdc_offset(il, coord_dim)] : index[tdc_offset(il, i)];
    off += fix_index(raw, al.shape[dim], bad) * al.strides[dim];
    memcpy(out + i * itemsize, a + off * itemsize, itemsize);
  }
}

/* a[..., index[j], ...] = src[j] along dim, for j over index's shape. */
__global__ void scatter_kernel(char *a, tdc_layout al, const int64_t *index, tdc_layout il,
                               const char *src, tdc_layout sl, int32_t dim, int64_t itemsize,
                               int64_t n, int32_t *bad) {
  TDC_LOOP(j, n) {
    int64_t rest = j, off = 0;
    for (int32_t d = il.ndim - 1; d >= 0; d--) {
      const int64_t c = rest % il.shape[d];
      rest /= il.shape[d];
      if (d != dim) off += c * al.strides[d];
    }
    off += fix_index(index[tdc_offset(il, j)], al.shape[dim], bad) * al.strides[dim];
    memcpy(a + off * itemsize, src + tdc_offset(sl, j) * itemsize, itemsize);
  }
}

static bool check_index(const char *call, const td_tensor *index, int32_t device) {
  if (!tdc_check_on(call, index, "index", device)) return false;
  if (index->dtype != TD_INT64) {
    tdc_fail(TD_EDTYPE, "%s: the index must be int64, got %s", call, td_dtype_name(index->dtype));
    return false;
  }
  return true;
}

static bool check_dim(const char *call, const td_tensor *a, int32_t *dim) {
  const int32_t n = a->ndim ? a->ndim : 1;
  if (*dim < -n || *dim >= n) {
    tdc_fail(TD_EINDEX, "%s: dim %d is out of range for a %d-dim tensor", call, (int)*dim, (int)a->ndim);
    return false;
  }
  if (*dim < 0) *dim += n;
  return true;
}

/* Reads the out-of-range flag; false with the message when it is set. */
static bool index_ok(const char *call, td_tensor *flag, const td_tensor *a, int32_t dim) {
  int32_t bad = 0;
  const bool ok = tdc_read_flag(call, (const int32_t *)tdc_ptr(flag), &bad);
  td_tensor_release(flag);
  if (!ok) return false;
  if (bad) {
    tdc_fail(TD_EINDEX, "%s: an index is out of range for dim %d of size %lld", call, (int)dim,
             (long long)(a->ndim ? a->shape[dim] : 1));
    return false;
  }
  return true;
}

static td_tensor *new_flag(const char *call, int32_t device) {
  td_tensor *flag = tdc_empty(call, device, 0, NULL, TD_INT32);
  if (flag && !tdc_check(cudaMemsetAsync(tdc_ptr(flag), 0, 4, tdc_stream()), call)) {
    td_tensor_release(flag);
    return NULL;
  }
  return flag;
}

static td_tensor *take(const char *call, const td_tensor *a, int32_t dim, const td_tensor *index,
                       int32_t mode) {
  if (!a || !index) {
    tdc_fail(TD_EINVAL, "%s: a tensor is NULL", call);
    return NULL;
  }
  const int32_t device = td_tensor_device_index(a);
  if (!tdc_check_on(call, a, "tensor", device) || !check_index(call, index, device) ||
      !check_dim(call, a, &dim) || !tdc_use_device(call, device))
    return NULL;
  int64_t shape[TD_MAX_DIMS];
  int32_t nd = a->ndim;
  if (mode == 0) {
    if (index->ndim > 1) {
      tdc_fail(TD_ESHAPE, "%s: index must be 0-D or 1-D, got %d dims", call, (int)index->ndim);
      return NULL;
    }
    memcpy(shape, a->shape, sizeof shape);
    if (nd) shape[dim] = td_tensor_numel(index);
  } else {
    if (index->ndim != a->ndim) {
      tdc_fail(TD_ESHAPE, "%s: index has %d dims but the tensor has %d", call, (int)index->ndim,
               (int)a->ndim);
      return NULL;
    }
    for (int32_t d = 0; d < nd; d++) {
      if (d != dim && index->shape[d] > a->shape[d]) {
        tdc_fail(TD_ESHAPE, "%s: index size %lld at dim %d is larger than the tensor's %lld", call,
                 (long long)index->shape[d], (int)d, (long long)a->shape[d]);
        return NULL;
      }
      shape[d] = index->shape[d];
    }
  }
  td_tensor *out = tdc_empty(call, device, nd, shape, a->dtype);
  const int64_t n = out ? td_tensor_numel(out) : 0;
  if (!out || n == 0) return out;
  td_tensor *flag = new_flag(call, device);
  if (!flag) {
    td_tensor_release(out);
    return NULL;
  }
  /* a 0-dim tensor reads as 1-D of size 1 */
  td_tensor av;
  const int64_t one = 1;
  if (a->ndim == 0) td_tensor_view(a, 1, &one, &av);
  td_tensor ov;
  if (out->ndim == 0) td_tensor_view(out, 1, &one, &ov);
  const td_tensor *ax = a->ndim ? a : &av, *ox = out->ndim ? out : &ov;
  take_kernel<<<tdc_blocks(n, TDC_THREADS), TDC_THREADS, 0, tdc_stream()>>>(
      tdc_ptr(out), tdc_ptr(ax), tdc_layout_of(ax), (const int64_t *)tdc_ptr(index),
      tdc_layout_of(index), tdc_layout_of(ox), dim, mode, a->itemsize, n, (int32_t *)tdc_ptr(flag));
  if (!tdc_launched(call) || !index_ok(call, flag, ax, dim)) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

TDC_EXPORT td_tensor *td_cuda_index_select(const td_tensor *a, int32_t dim, const td_tensor *index) {
  return take("index_select", a, dim, index, 0);
}

TDC_EXPORT td_tensor *td_cuda_gather(const td_tensor *a, int32_t dim, const td_tensor *index) {
  return take("gather", a, dim, index, 1);
}

TDC_EXPORT int32_t td_cuda_scatter_(td_tensor *a, int32_t dim, const td_tensor *index,
                                    const td_tensor *src) {
  const char *call = "scatter_";
  if (!a || !index || !src) return tdc_fail(TD_EINVAL, "%s: a tensor is NULL", call);
  const int32_t device = td_tensor_device_index(a);
  if (!tdc_check_on(call, a, "tensor", device) || !check_index(call, index, device) ||
      !tdc_check_on(call, src, "source", device) || !check_dim(call, a, &dim) ||
      !tdc_use_device(call, device))
    return td_last_status();
  if (!td_tensor_is_writable(a)) return tdc_fail(TD_EREADONLY, "%s: the tensor is read-only", call);
  if (index->ndim != a->ndim || src->ndim != a->ndim)
    return tdc_fail(TD_ESHAPE, "%s: tensor, index and source must have the same number of dims",
                    call);
  for (int32_t d = 0; d < a->ndim; d++)
    if (index->shape[d] > src->shape[d] || (d != dim && index->shape[d] > a->shape[d]))
      return tdc_fail(TD_ESHAPE, "%s: index size %lld at dim %d is larger than the source's or "
                      "the tensor's", call, (long long)index->shape[d], (int)d);
  const int64_t n = td_tensor_numel(index);
  if (n == 0) return TD_OK;
  td_tensor *s = tdc_contiguous_or_same(call, src, a->dtype);
  td_tensor *flag = s ? new_flag(call, device) : NULL;
  if (!flag) {
    td_tensor_release(s);
    return td_last_status();
  }
  /* the source is read over index's shape (a 0-dim one is its one element) */
  td_tensor sv = *s;
  for (int32_t d = 0; d < index->ndim; d++) td_tensor_slice(&sv, d, 0, index->shape[d], 1, &sv);
  scatter_kernel<<<tdc_blocks(n, TDC_THREADS), TDC_THREADS, 0, tdc_stream()>>>(
      tdc_ptr(a), tdc_layout_of(a), (const int64_t *)tdc_ptr(index), tdc_layout_of(index),
      tdc_ptr(&sv), tdc_layout_of(&sv), dim, a->itemsize, n, (int32_t *)tdc_ptr(flag));
  const bool ok = tdc_launched(call) && index_ok(call, flag, a, dim);
  td_tensor_release(s);
  return ok ? TD_OK : td_last_status();
}

/* ---- masked_select ---- */

__global__ void mask_flags(int64_t *flags, const bool *m, tdc_layout ml, int64_t n) {
  TDC_LOOP(i, n) flags[i] = m[tdc_offset(ml, i)] ? 1 : 0;
}

/* pos holds the inclusive prefix sums of the flags: element i goes to pos[i] - 1. */
__global__ void mask_compact(char *out, const char *a, tdc_layout al, const bool *m, tdc_layout ml,
                             const int64_t *pos, int64_t itemsize, int64_t n) {
  TDC_LOOP(i, n) {
    if (m[tdc_offset(ml, i)])
      memcpy(out + (pos[i] - 1) * itemsize, a + tdc_offset(al, i) * itemsize, itemsize);
  }
}

TDC_EXPORT td_tensor *td_cuda_masked_select(const td_tensor *a, const td_tensor *mask) {
  const char *call = "masked_select";
  if (!a || !mask) {
    tdc_fail(TD_EINVAL, "%s: a tensor is NULL", call);
    return NULL;
  }
  const int32_t device = td_tensor_device_index(a);
  if (!tdc_check_on(call, a, "tensor", device) || !tdc_check_on(call, mask, "mask", device) ||
      !tdc_use_device(call, device))
    return NULL;
  if (mask->dtype != TD_BOOL) {
    tdc_fail(TD_EDTYPE, "%s: the mask must be bool, got %s", call, td_dtype_name(mask->dtype));
    return NULL;
  }
  td_tensor me;
  if (td_tensor_expand(mask, a->ndim, a->shape, &me) != TD_OK) return NULL;
  const int64_t n = td_tensor_numel(a);
  td_tensor *flags = tdc_empty(call, device, 1, &n, TD_INT64);
  td_tensor *pos = flags ? tdc_empty(call, device, 1, &n, TD_INT64) : NULL;
  if (!pos) {
    td_tensor_release(flags);
    return NULL;
  }
  cudaStream_t s = tdc_stream();
  td_tensor *out = NULL, *tmp = NULL;
  int64_t count = 0;
  size_t tmp_bytes = 0;
  int64_t *f = (int64_t *)tdc_ptr(flags), *p = (int64_t *)tdc_ptr(pos);
  bool ok = true;
  if (n > 0) {
    mask_flags<<<tdc_blocks(n, TDC_THREADS), TDC_THREADS, 0, s>>>(f, (const bool *)tdc_ptr(&me),
                                                                tdc_layout_of(&me), n);
    ok = tdc_launched(call) &&
         tdc_check(cub::DeviceScan::InclusiveSum(NULL, tmp_bytes, f, p, n, s), call);
    const int64_t tb = (int64_t)tmp_bytes;
    ok = ok && (tmp = tdc_empty(call, device, 1, &tb, TD_UINT8)) != NULL &&
         tdc_check(cub::DeviceScan::InclusiveSum(tdc_ptr(tmp), tmp_bytes, f, p, n, s), call) &&
         tdc_check(cudaMemcpyAsync(&count, p + n - 1, sizeof count, cudaMemcpyDeviceToHost, s), call) &&
         tdc_check(cudaStreamSynchronize(s), call);
  }
  if (ok) ok = (out = tdc_empty(call, device, 1, &count, a->dtype)) != NULL;
  if (ok && count > 0) {
    mask_compact<<<tdc_blocks(n, TDC_THREADS), TDC_THREADS, 0, s>>>(
        tdc_ptr(out), tdc_ptr(a), tdc_layout_of(a), (const bool *)tdc_ptr(&me), tdc_layout_of(&me), p,
        a->itemsize, n);
    ok = tdc_launched(call);
  }
  td_tensor_release(tmp);
  td_tensor_release(flags);
  td_tensor_release(pos);
  if (!ok) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}
