/*
 * clamp.cu: clamp and clamp_ on the device (clamp_min / clamp_max are clamp with one
 * bound, as on the CPU).
 *
 * The CPU library plans the call, so both backends promote, convert and refuse alike
 * (core/kernels/elementwise_clamp.c): td_clamp on a 0-dim host twin of a's dtype gives
 * the result dtype r and the refusals (no bound, a bound outside r's range, clamp_ into
 * a dtype that is not r); then td_clamp_ on a host tensor of r holding r's lowest and
 * highest values gives the two bounds exactly as r stores them. Clamping is monotone,
 * so clamping x into [clamp(lowest), clamp(highest)] is clamping x itself, min > max
 * included (both become max). A NaN bound makes every element NaN, as on the CPU.
 */
#include <limits>
#include <math.h>
#include <string.h>

#include "cuda_internal.h"

/* x < lo gives lo, then x > hi gives hi, as the CPU compares: a NaN element stays NaN
 * and ties keep x (clamp(-0, 0) is -0). */
template <class T>
__global__ void clamp_kernel(T *out, const T *x, tdc_layout xl, T lo, T hi, int64_t n) {
  typedef typename tdc_acc<T>::type A;
  const A l = tdc_cast<A>(lo), h = tdc_cast<A>(hi);
  TDC_LOOP(i, n) {
    A v = tdc_cast<A>(x[tdc_offset(xl, i)]);
    v = v < l ? l : v;
    out[i] = tdc_cast<T>(h < v ? h : v);
  }
}

/* The result dtype of clamping a (the CPU's checks, messages naming call), or -1. */
static int32_t clamp_dtype(const char *call, const td_tensor *a, double min, double max,
                           int32_t has_min, int32_t has_max) {
  td_tensor *twin = td_tensor_full(0, NULL, a->dtype, 0);
  if (!twin) return -1;
  int32_t r = -1;
  if (strcmp(call, "clamp_") == 0) {
    if (td_clamp_(twin, min, max, has_min, has_max) == TD_OK) r = a->dtype;
  } else {
    td_tensor *planned = td_clamp(twin, min, max, has_min, has_max);
    if (planned) r = planned->dtype;
    td_tensor_release(planned);
  }
  td_tensor_release(twin);
  return r;
}

/* The two effective bounds in dtype r, as raw bytes (see the top of the file). */
static bool clamp_bounds(int32_t r, double min, double max, int32_t has_min, int32_t has_max,
                         void *lo, void *hi) {
  const int64_t two = 2;
  td_tensor *ends = td_tensor_empty(1, &two, r);
  if (!ends) return false;
  const bool floating = td_dtype_is_floating(r);
  const double inf = floating ? INFINITY : 0; /* a variable: no constant inf to integers */
  TDC_DISPATCH(r, T, {
    T *v = (T *)td_tensor_data_borrow(ends);
    v[0] = floating ? tdc_cast<T>(-inf) : std::numeric_limits<T>::lowest();
    v[1] = floating ? tdc_cast<T>(inf) : std::numeric_limits<T>::max();
  });
  const bool ok = td_clamp_(ends, min, max, has_min, has_max) == TD_OK;
  if (ok) {
    const size_t size = (size_t)td_dtype_itemsize(r);
    memcpy(lo, td_tensor_data_borrow(ends), size);
    memcpy(hi, (const char *)td_tensor_data_borrow(ends) + size, size);
  }
  td_tensor_release(ends);
  return ok;
}

static td_tensor *clamp_new(const char *call, const td_tensor *a, double min, double max,
                            int32_t has_min, int32_t has_max) {
  if (!tdc_on_its_device(call, a)) return NULL;
  const int32_t device = td_tensor_device_index(a);
  const int32_t r = clamp_dtype(call, a, min, max, has_min, has_max);
  if (r < 0) return NULL;
  td_tensor *out = tdc_empty(call, device, a->ndim, a->shape, r);
  if (!out) return NULL;
  const int64_t n = td_tensor_numel(a);
  if ((has_min && isnan(min)) || (has_max && isnan(max))) { /* r is floating here */
    if (td_cuda_fill_(out, NAN) == TD_OK) return out;
    td_tensor_release(out);
    return NULL;
  }
  td_tensor *x = n > 0 ? tdc_contiguous_or_same(call, a, r) : NULL;
  bool ok = n == 0 || x != NULL;
  if (ok && n > 0) {
    TDC_DISPATCH(r, T, {
      T lo, hi;
      ok = clamp_bounds(r, min, max, has_min, has_max, &lo, &hi);
      if (ok)
        clamp_kernel<T><<<tdc_blocks(n, TDC_THREADS), TDC_THREADS, 0, tdc_stream()>>>(
            (T *)tdc_ptr(out), (const T *)tdc_ptr(x), tdc_layout_of(x), lo, hi, n);
    });
    ok = ok && tdc_launched(call);
  }
  td_tensor_release(x);
  if (!ok) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

TDC_EXPORT td_tensor *td_cuda_clamp(const td_tensor *a, double min, double max, int32_t has_min,
                                    int32_t has_max) {
  return clamp_new("clamp", a, min, max, has_min, has_max);
}

TDC_EXPORT int32_t td_cuda_clamp_(td_tensor *a, double min, double max, int32_t has_min,
                                  int32_t has_max) {
  if (!a) return tdc_fail(TD_EINVAL, "clamp_: the tensor is NULL");
  return tdc_into("clamp_", a, clamp_new("clamp_", a, min, max, has_min, has_max));
}
