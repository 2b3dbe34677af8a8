/*
 * lines.cu: the ops that run along one dim, line by line: cumsum, cumprod, softmax and
 * log_softmax.
 *
 * The CPU library plans each call on a host twin (its checks, messages and result
 * dtype). Each line along dim is computed by one thread in index order, as the CPU
 * computes it, so a line's result never depends on the launch: cumsum and cumprod
 * accumulate in double (floating) or wrapping 64-bit integers; softmax computes in the
 * dtype (float32 for float16 and bfloat16) with its sum in double. Neighbouring threads
 * take neighbouring lines, which are adjacent in memory unless dim is the last one.
 * A few long lines use few threads: fine for the batch-of-rows shapes these ops see.
 */
#include <math.h>

#include "cuda_internal.h"

/* Where a's lines start (kl of the split) and their length and stride along dim. */
struct lines {
  tdc_layout starts;
  int64_t count, len, stride;
};

static lines lines_of(const td_tensor *t, int32_t dim) {
  bool along[TD_MAX_DIMS] = {false};
  if (t->ndim > 0) along[dim] = true;
  const tdc_split s = tdc_split_dims(t, along, 0);
  return lines{s.kl, s.nout, s.nred, t->ndim > 0 ? t->strides[dim] : 1};
}

/* Running sums or products: Acc double for floating T, uint64_t (wrapping) otherwise. */
template <class T, class O, class Acc>
__global__ void cumulative_lines(O *out, lines ol, const T *in, lines il, int32_t prod) {
  TDC_LOOP(l, il.count) {
    const T *x = in + tdc_offset(il.starts, l);
    O *y = out + tdc_offset(ol.starts, l);
    Acc acc = prod ? 1 : 0;
    for (int64_t r = 0; r < il.len; r++) {
      const Acc v = tdc_cast<Acc>(x[r * il.stride]);
      acc = prod ? acc * v : acc + v;
      y[r * ol.stride] = tdc_cast<O>(acc);
    }
  }
}

/* The line's max, exp(x - max) summed in double, then x - max - log(sum) or
 * exp(x - max) / sum, in A (float or double), as core/kernels/softmax.c. */
template <class T>
__global__ void softmax_lines(T *out, lines ol, const T *in, lines il, int32_t take_log) {
  typedef typename tdc_acc<T>::type A;
  TDC_LOOP(l, il.count) {
    const T *x = in + tdc_offset(il.starts, l);
    T *y = out + tdc_offset(ol.starts, l);
    A mx = tdc_cast<A>(x[0]);
    for (int64_t r = 1; r < il.len; r++) {
      const A v = tdc_cast<A>(x[r * il.stride]);
      mx = v > mx ? v : mx;
    }
    double sum = 0;
    for (int64_t r = 0; r < il.len; r++) sum += (double)exp(tdc_cast<A>(x[r * il.stride]) - mx);
    const A shift = (A)(mx + (A)log(sum)), scale = (A)(1.0 / sum);
    for (int64_t r = 0; r < il.len; r++) {
      const A v = tdc_cast<A>(x[r * il.stride]);
      y[r * ol.stride] = tdc_cast<T>(take_log ? v - shift : (A)exp(v - mx) * scale);
    }
  }
}

/* kind: 0 cumsum, 1 cumprod, 2 softmax, 3 log_softmax. A template, so that the branch
 * of the other kind of dtype is never instantiated (softmax of integers is refused by
 * the plan; integers run in wrapping 64-bit arithmetic and give int64). */
template <class T>
static void launch_lines(td_tensor *out, const lines &ol, const T *x, const lines &il, int32_t kind) {
  const unsigned blocks = tdc_blocks(il.count, TDC_THREADS);
  cudaStream_t s = tdc_stream();
  if constexpr (tdc_is_float<typename tdc_acc<T>::type>::value) {
    if (kind >= 2)
      softmax_lines<T><<<blocks, TDC_THREADS, 0, s>>>((T *)tdc_ptr(out), ol, x, il, kind == 3);
    else
      cumulative_lines<T, T, double><<<blocks, TDC_THREADS, 0, s>>>((T *)tdc_ptr(out), ol, x, il, kind);
  } else {
    cumulative_lines<T, int64_t, uint64_t><<<blocks, TDC_THREADS, 0, s>>>((int64_t *)tdc_ptr(out), ol,
                                                                          x, il, kind);
  }
}

/* The CPU's plan of the op on a host twin: the result dtype, or -1 after its error. */
static int32_t planned_dtype(const td_tensor *a, int32_t dim, int32_t kind) {
  td_tensor *twin = tdc_host_twin(a);
  td_tensor *r = !twin ? NULL : kind == 0 ? td_cumsum(twin, dim) : kind == 1 ? td_cumprod(twin, dim)
                                          : td_softmax(twin, dim, kind == 3);
  td_tensor_release(twin);
  const int32_t dtype = r ? r->dtype : -1;
  td_tensor_release(r);
  return dtype;
}

static td_tensor *along_dim(const char *call, const td_tensor *a, int32_t dim, int32_t kind) {
  if (!tdc_on_its_device(call, a)) return NULL;
  const int32_t dtype = planned_dtype(a, dim, kind);
  if (dtype < 0) return NULL;
  td_tensor *out = tdc_empty(call, td_tensor_device_index(a), a->ndim, a->shape, dtype);
  if (!out || td_tensor_numel(a) == 0) return out;
  const lines il = lines_of(a, dim), ol = lines_of(out, dim);
  TDC_DISPATCH(a->dtype, T, launch_lines<T>(out, ol, (const T *)tdc_ptr(a), il, kind));
  if (!tdc_launched(call)) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

TDC_EXPORT td_tensor *td_cuda_cumsum(const td_tensor *a, int32_t dim) {
  return along_dim("cumsum", a, dim, 0);
}

TDC_EXPORT td_tensor *td_cuda_cumprod(const td_tensor *a, int32_t dim) {
  return along_dim("cumprod", a, dim, 1);
}

TDC_EXPORT td_tensor *td_cuda_softmax(const td_tensor *a, int32_t dim, int32_t log) {
  return along_dim(log ? "log_softmax" : "softmax", a, dim, log ? 3 : 2);
}
