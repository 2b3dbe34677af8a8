/*
 * copy.cu: moving tensors between host and device, casting copies on the device, fills,
 * and the checks every device entry point shares.
 *
 * A cast goes through one wide value (int64 for bool and integers, double for floating
 * types), so one kernel serves every pair of dtypes; the switch on the dtypes is the
 * same for every thread, so warps never diverge on it.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

bool tdc_on_device(const td_tensor *t) {
  return td_tensor_device_type(t) == TD_DEVICE_CUDA;
}

static void device_name(const td_tensor *t, char *buf, size_t n) {
  if (tdc_on_device(t)) snprintf(buf, n, "cuda:%d", (int)td_tensor_device_index(t));
  else snprintf(buf, n, "cpu");
}

bool tdc_check_on(const char *call, const td_tensor *t, const char *what, int32_t device) {
  if (!t) {
    tdc_fail(TD_EINVAL, "%s: the %s is NULL", call, what);
    return false;
  }
  if (tdc_on_device(t) && td_tensor_device_index(t) == device) return true;
  char buf[32];
  device_name(t, buf, sizeof buf);
  tdc_fail(TD_EINVAL, "%s: expected all tensors on one device, but the %s is on %s and the "
           "first tensor on cuda:%d", call, what, buf, (int)device);
  return false;
}

tdc_layout tdc_layout_of(const td_tensor *t) {
  tdc_layout l;
  memset(&l, 0, sizeof l);
  l.ndim = t->ndim;
  l.contiguous = td_tensor_is_contiguous(t);
  for (int32_t d = 0; d < t->ndim; d++) {
    l.shape[d] = t->shape[d];
    l.strides[d] = t->strides[d];
  }
  return l;
}

/* ---- the casting copy ---- */

struct wide {
  double f;
  int64_t i;
  bool is_int;
};

/* A stored element widened: bool and integers into i, floating types into f. */
template <class T> __device__ __forceinline__ wide widen(T v) { return wide{0, (int64_t)v, true}; }
__device__ __forceinline__ wide widen(__half v) { return wide{__half2float(v), 0, false}; }
__device__ __forceinline__ wide widen(__nv_bfloat16 v) {
  return wide{__bfloat162float(v), 0, false};
}
__device__ __forceinline__ wide widen(float v) { return wide{v, 0, false}; }
__device__ __forceinline__ wide widen(double v) { return wide{v, 0, false}; }

/* A wide value as a stored element. One-byte integers take a floating value through
 * int64 (wrapping); wider types convert it directly (the device saturates). */
template <class T> __device__ __forceinline__ T narrow(wide w) {
  if (sizeof(T) == 1) return w.is_int ? (T)w.i : (T)(int64_t)w.f;
  return w.is_int ? (T)w.i : (T)w.f;
}
template <> __device__ __forceinline__ bool narrow<bool>(wide w) {
  return w.is_int ? w.i != 0 : w.f != 0.0;
}
template <> __device__ __forceinline__ __half narrow<__half>(wide w) {
  return __double2half(w.is_int ? (double)w.i : w.f);
}
template <> __device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(wide w) {
  return __double2bfloat16(w.is_int ? (double)w.i : w.f);
}

__device__ __forceinline__ wide load_wide(const char *p, int32_t dt) {
  wide w = {0, 0, true};
  TDC_DISPATCH(dt, T, w = widen(*(const T *)p));
  return w;
}

__device__ __forceinline__ void store_wide(char *p, int32_t dt, wide w) {
  TDC_DISPATCH(dt, T, *(T *)p = narrow<T>(w));
}

__global__ void copy_kernel(char *dst, tdc_layout dl, int32_t ddt, int64_t dsize,
                            const char *src, tdc_layout sl, int32_t sdt, int64_t ssize,
                            int64_t n) {
  TDC_LOOP(i, n) {
    store_wide(dst + tdc_offset(dl, i) * dsize, ddt, load_wide(src + tdc_offset(sl, i) * ssize, sdt));
  }
}

bool tdc_copy_same_shape(const char *call, td_tensor *dst, const td_tensor *src) {
  const int64_t n = td_tensor_numel(dst);
  if (n == 0) return true;
  cudaStream_t s = tdc_stream();
  if (dst->dtype == src->dtype && td_tensor_is_contiguous(dst) && td_tensor_is_contiguous(src))
    return tdc_check(cudaMemcpyAsync(tdc_ptr(dst), tdc_ptr(src), (size_t)(n * dst->itemsize),
                                     cudaMemcpyDeviceToDevice, s), call);
  copy_kernel<<<tdc_blocks(n, TDC_THREADS), TDC_THREADS, 0, s>>>(
      tdc_ptr(dst), tdc_layout_of(dst), dst->dtype, dst->itemsize, tdc_ptr(src),
      tdc_layout_of(src), src->dtype, src->itemsize, n);
  return tdc_launched(call);
}

td_tensor *tdc_contiguous_as(const char *call, const td_tensor *t, int32_t dtype) {
  if (t->dtype == dtype && td_tensor_is_contiguous(t)) return td_tensor_share(t);
  td_tensor *out = tdc_empty(call, td_tensor_device_index(t), t->ndim, t->shape, dtype);
  if (out && !tdc_copy_same_shape(call, out, t)) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

td_tensor *tdc_contiguous_or_same(const char *call, const td_tensor *t, int32_t dtype) {
  if (t->dtype == dtype) return td_tensor_share(t);
  return tdc_contiguous_as(call, t, dtype);
}

td_tensor *tdc_scalar_tensor(const char *call, int32_t device, double s, int32_t kind,
                             int32_t dtype) {
  /* the CPU library converts the scalar (its wrap and rounding rules), we move it */
  td_tensor *host = NULL;
  if (kind == TD_SCALAR_FLOAT) {
    host = td_tensor_full(0, NULL, TD_FLOAT64, s);
  } else {
    host = td_tensor_full(0, NULL, kind == TD_SCALAR_BOOL ? TD_BOOL : TD_INT64,
                          kind == TD_SCALAR_BOOL ? (s != 0) : s);
  }
  if (!host) return NULL;
  td_tensor *cast = td_tensor_to_dtype(host, dtype);
  td_tensor_release(host);
  if (!cast) return NULL;
  td_tensor *out = td_cuda_to_device(cast, device, 0);
  td_tensor_release(cast);
  (void)call;
  return out;
}

/* ---- host <-> device ---- */

TDC_EXPORT td_tensor *td_cuda_to_device(const td_tensor *t, int32_t device, int32_t non_blocking) {
  const char *call = "to";
  if (!t) {
    tdc_fail(TD_EINVAL, "%s: the tensor is NULL", call);
    return NULL;
  }
  if (tdc_on_device(t)) {
    if (td_tensor_device_index(t) == device) return tdc_contiguous_as(call, t, t->dtype);
    /* another device: through a contiguous copy and peer memcpy */
    td_tensor *c = tdc_contiguous_as(call, t, t->dtype);
    if (!c) return NULL;
    td_tensor *out = tdc_empty(call, device, t->ndim, t->shape, t->dtype);
    if (out && !tdc_check(cudaMemcpyPeerAsync(tdc_ptr(out), device, tdc_ptr(c),
                                              td_tensor_device_index(c),
                                              (size_t)(td_tensor_numel(c) * c->itemsize),
                                              tdc_stream()), call)) {
      td_tensor_release(out);
      out = NULL;
    }
    td_tensor_release(c);
    return out;
  }
  /* host: a contiguous host source (the CPU library copies a strided one) */
  td_tensor *c = td_tensor_contiguous(t);
  if (!c) return NULL;
  td_tensor *out = tdc_empty(call, device, t->ndim, t->shape, t->dtype);
  if (out) {
    cudaStream_t s = tdc_stream();
    const size_t nbytes = (size_t)(td_tensor_numel(c) * c->itemsize);
    bool ok = nbytes == 0 ||
              tdc_check(cudaMemcpyAsync(tdc_ptr(out), tdc_ptr(c), nbytes, cudaMemcpyHostToDevice, s),
                        call);
    /* pageable memory may be reused by the caller as soon as we return */
    if (ok && (!non_blocking || !td_cuda_is_pinned(c))) ok = tdc_check(cudaStreamSynchronize(s), call);
    if (!ok) {
      td_tensor_release(out);
      out = NULL;
    }
  }
  td_tensor_release(c);
  return out;
}

TDC_EXPORT td_tensor *td_cuda_to_host(const td_tensor *t, int32_t pinned) {
  const char *call = "cpu";
  if (!t) {
    tdc_fail(TD_EINVAL, "%s: the tensor is NULL", call);
    return NULL;
  }
  if (!tdc_on_device(t)) return pinned ? td_cuda_pin(t) : td_tensor_clone(t);
  if (!tdc_use_device(call, td_tensor_device_index(t))) return NULL;
  td_tensor *c = tdc_contiguous_as(call, t, t->dtype);
  if (!c) return NULL;
  td_tensor *out = pinned ? tdc_empty_pinned(call, t->ndim, t->shape, t->dtype)
                          : td_tensor_empty(t->ndim, t->shape, t->dtype);
  if (out) {
    cudaStream_t s = tdc_stream();
    const size_t nbytes = (size_t)(td_tensor_numel(c) * c->itemsize);
    if ((nbytes && !tdc_check(cudaMemcpyAsync(tdc_ptr(out), tdc_ptr(c), nbytes,
                                              cudaMemcpyDeviceToHost, s), call)) ||
        !tdc_check(cudaStreamSynchronize(s), call)) {
      td_tensor_release(out);
      out = NULL;
    }
  }
  td_tensor_release(c);
  return out;
}

TDC_EXPORT td_tensor *td_cuda_pin(const td_tensor *t) {
  const char *call = "pin_memory";
  if (!t) {
    tdc_fail(TD_EINVAL, "%s: the tensor is NULL", call);
    return NULL;
  }
  if (tdc_on_device(t)) {
    tdc_fail(TD_EINVAL, "%s: cannot pin a tensor on cuda:%d: only host tensors can be pinned",
             call, (int)td_tensor_device_index(t));
    return NULL;
  }
  td_tensor *out = tdc_empty_pinned(call, t->ndim, t->shape, t->dtype);
  if (out && td_tensor_copy_(out, t) != TD_OK) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

TDC_EXPORT int32_t td_cuda_copy_(td_tensor *dst, const td_tensor *src) {
  const char *call = "copy_";
  if (!dst || !src) return tdc_fail(TD_EINVAL, "%s: a tensor is NULL", call);
  if (!tdc_on_device(dst) && !tdc_on_device(src)) return td_tensor_copy_(dst, src);
  if (!td_tensor_is_writable(dst)) return tdc_fail(TD_EREADONLY, "%s: the tensor is read-only", call);
  td_tensor se;
  if (td_tensor_expand(src, dst->ndim, dst->shape, &se) != TD_OK) return td_last_status();
  if (tdc_on_device(dst) && tdc_on_device(src) &&
      td_tensor_device_index(dst) == td_tensor_device_index(src)) {
    if (!tdc_use_device(call, td_tensor_device_index(dst))) return td_last_status();
    return tdc_copy_same_shape(call, dst, &se) ? TD_OK : td_last_status();
  }
  if (tdc_on_device(dst)) { /* host or another device -> dst: move, then cast in place */
    td_tensor *moved = td_cuda_to_device(&se, td_tensor_device_index(dst), 0);
    if (!moved) return td_last_status();
    const bool ok = tdc_copy_same_shape(call, dst, moved);
    td_tensor_release(moved);
    return ok ? TD_OK : td_last_status();
  }
  td_tensor *host = td_cuda_to_host(&se, 0); /* device -> host dst */
  if (!host) return td_last_status();
  const int32_t r = td_tensor_copy_(dst, host);
  td_tensor_release(host);
  return r;
}

TDC_EXPORT int32_t td_cuda_fill_(td_tensor *dst, double value) {
  const char *call = "fill_";
  if (!dst) return tdc_fail(TD_EINVAL, "%s: the tensor is NULL", call);
  if (!tdc_on_device(dst)) return td_tensor_fill_(dst, value);
  const int32_t device = td_tensor_device_index(dst);
  if (!tdc_use_device(call, device)) return td_last_status();
  /* the value converts as the CPU converts it (td_tensor_full), then broadcasts */
  td_tensor *one = td_tensor_full(0, NULL, dst->dtype, value);
  if (!one) return td_last_status();
  const int32_t r = td_cuda_copy_(dst, one);
  td_tensor_release(one);
  return r;
}
