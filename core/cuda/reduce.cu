/*
 * reduce.cu: sum, mean, prod, min and max over all dims or the dims listed.
 *
 * The CPU library plans the call: td_reduce on a host twin of a's dtype with every size
 * 1 checks the op, the dtype and the dims with the CPU's messages and gives the result
 * dtype. The device then splits a's dims into kept ones (one output each) and reduced
 * ones (walked by the strided layout), accumulating in double for floating dtypes and
 * int64 otherwise. Long reductions split across blocks (partials, then a second pass);
 * short ones (32 elements or fewer per output) take one thread per output.
 */
#include <math.h>
#include <string.h>

#include "cuda_internal.h"

static const int RED_THREADS = 256;
static const int64_t SMALL_REDUCTION = 32, MAX_SPLITS = 1024;

template <class Acc> __device__ __forceinline__ Acc red_identity(int32_t op);
template <> __device__ __forceinline__ double red_identity<double>(int32_t op) {
  return op == TD_RED_PROD ? 1.0 : op == TD_RED_MIN ? INFINITY : op == TD_RED_MAX ? -INFINITY : 0.0;
}
template <> __device__ __forceinline__ int64_t red_identity<int64_t>(int32_t op) {
  return op == TD_RED_PROD ? 1 : op == TD_RED_MIN ? INT64_MAX : op == TD_RED_MAX ? INT64_MIN : 0;
}

template <class Acc> __device__ __forceinline__ Acc red_combine(int32_t op, Acc a, Acc b) {
  switch (op) {
    case TD_RED_PROD: return a * b;
    case TD_RED_MIN: return (a != a || b != b) ? a + b : (b < a ? b : a); /* NaN propagates */
    case TD_RED_MAX: return (a != a || b != b) ? a + b : (b > a ? b : a);
    default: return a + b; /* SUM, MEAN */
  }
}

/* The finished value of one output: mean divides; stored as the output dtype. */
template <class T, class Acc>
__device__ __forceinline__ void red_store(char *out, int64_t o, int32_t out_int64, int32_t op,
                                          Acc v, int64_t nred) {
  if (op == TD_RED_MEAN) v = v / (Acc)nred;
  if (out_int64) ((int64_t *)out)[o] = (int64_t)v;
  else ((T *)out)[o] = tdc_cast<T>(v);
}

template <class T, class Acc>
__global__ void reduce_small(char *out, int32_t out_int64, const T *in, tdc_layout kl,
                             tdc_layout rl, int64_t nout, int64_t nred, int32_t op) {
  TDC_LOOP(o, nout) {
    const T *base = in + tdc_offset(kl, o);
    Acc acc = red_identity<Acc>(op);
    for (int64_t r = 0; r < nred; r++)
      acc = red_combine<Acc>(op, acc, tdc_cast<Acc>(base[tdc_offset(rl, r)]));
    red_store<T, Acc>(out, o, out_int64, op, acc, nred);
  }
}

/* Block (x: output, y: split) reduces its share of one output's elements; with one
 * split it stores the result, else a partial. */
template <class T, class Acc>
__global__ void reduce_blocks(char *out, int32_t out_int64, Acc *partial, const T *in,
                              tdc_layout kl, tdc_layout rl, int64_t nout, int64_t nred,
                              int32_t op) {
  __shared__ Acc shared[RED_THREADS];
  const int64_t splits = gridDim.y, chunk = (nred + splits - 1) / splits;
  const int64_t begin = blockIdx.y * chunk, end = begin + chunk < nred ? begin + chunk : nred;
  for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    const T *base = in + tdc_offset(kl, o);
    Acc acc = red_identity<Acc>(op);
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x)
      acc = red_combine<Acc>(op, acc, tdc_cast<Acc>(base[tdc_offset(rl, r)]));
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
      if ((int)threadIdx.x < w) shared[threadIdx.x] = red_combine<Acc>(op, shared[threadIdx.x], shared[threadIdx.x + w]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (splits == 1) red_store<T, Acc>(out, o, out_int64, op, shared[0], nred);
      else partial[o * splits + blockIdx.y] = shared[0];
    }
    __syncthreads();
  }
}

template <class T, class Acc>
__global__ void reduce_partials(char *out, int32_t out_int64, const Acc *partial, int64_t splits,
                                int64_t nout, int64_t nred, int32_t op) {
  TDC_LOOP(o, nout) {
    Acc acc = red_identity<Acc>(op);
    for (int64_t s = 0; s < splits; s++) acc = red_combine<Acc>(op, acc, partial[o * splits + s]);
    red_store<T, Acc>(out, o, out_int64, op, acc, nred);
  }
}

template <class T, class Acc>
static bool launch(const char *call, int32_t op, td_tensor *out, const td_tensor *a, tdc_layout kl,
                   tdc_layout rl, int64_t nout, int64_t nred) {
  cudaStream_t s = tdc_stream();
  const int32_t out_int64 = out->dtype == TD_INT64 && a->dtype != TD_INT64;
  char *o = tdc_ptr(out);
  const T *in = (const T *)tdc_ptr(a);
  if (nred <= SMALL_REDUCTION) {
    reduce_small<T, Acc><<<tdc_blocks(nout, TDC_THREADS), TDC_THREADS, 0, s>>>(o, out_int64, in, kl, rl,
                                                                              nout, nred, op);
    return tdc_launched(call);
  }
  int64_t splits = (nred + RED_THREADS * 16 - 1) / (RED_THREADS * 16);
  const int64_t room = MAX_SPLITS / (nout < MAX_SPLITS ? nout : MAX_SPLITS);
  if (splits > room) splits = room;
  if (splits < 1) splits = 1;
  const unsigned gx = (unsigned)(nout < 65535 * 16 ? nout : 65535 * 16);
  if (splits == 1) {
    reduce_blocks<T, Acc><<<dim3(gx, 1), RED_THREADS, 0, s>>>(o, out_int64, NULL, in, kl, rl, nout,
                                                              nred, op);
    return tdc_launched(call);
  }
  const int64_t shape = nout * splits;
  td_tensor *partial = tdc_empty(call, td_tensor_device_index(a), 1, &shape,
                                 sizeof(Acc) == 8 && tdc_is_float<Acc>::value ? TD_FLOAT64 : TD_INT64);
  if (!partial) return false;
  reduce_blocks<T, Acc><<<dim3(gx, (unsigned)splits), RED_THREADS, 0, s>>>(
      o, out_int64, (Acc *)tdc_ptr(partial), in, kl, rl, nout, nred, op);
  bool ok = tdc_launched(call);
  if (ok) {
    reduce_partials<T, Acc><<<tdc_blocks(nout, TDC_THREADS), TDC_THREADS, 0, s>>>(
        o, out_int64, (const Acc *)tdc_ptr(partial), splits, nout, nred, op);
    ok = tdc_launched(call);
  }
  td_tensor_release(partial); /* stream order: reused only after these kernels */
  return ok;
}

static const char *red_name(int32_t op) {
  switch (op) {
    case TD_RED_SUM: return "sum";
    case TD_RED_MEAN: return "mean";
    case TD_RED_PROD: return "prod";
    case TD_RED_MIN: return "min";
    case TD_RED_MAX: return "max";
    default: return "reduce";
  }
}

TDC_EXPORT td_tensor *td_cuda_reduce(int32_t op, const td_tensor *a, const int32_t *dims,
                                     int32_t ndims, int32_t keepdim, double param) {
  const char *call = red_name(op);
  if (!a) {
    tdc_fail(TD_EINVAL, "%s: the tensor is NULL", call);
    return NULL;
  }
  if (op != TD_RED_SUM && op != TD_RED_MEAN && op != TD_RED_PROD && op != TD_RED_MIN &&
      op != TD_RED_MAX) {
    tdc_fail(TD_EINVAL, "reduce: op %d has no CUDA kernel (sum, mean, prod, min and max do); "
             "move the tensor to the CPU with :cpu() for it", (int)op);
    return NULL;
  }
  if (!tdc_check_on(call, a, "tensor", td_tensor_device_index(a)) ||
      !tdc_use_device(call, td_tensor_device_index(a)))
    return NULL;
  /* the CPU's checks and result dtype, from a host twin with every size 1 */
  int64_t ones[TD_MAX_DIMS];
  for (int32_t d = 0; d < TD_MAX_DIMS; d++) ones[d] = 1;
  td_tensor *twin = td_tensor_full(a->ndim, ones, a->dtype, 1);
  td_tensor *planned = twin ? td_reduce(op, twin, dims, ndims, keepdim, param) : NULL;
  td_tensor_release(twin);
  if (!planned) return NULL;
  const int32_t out_dtype = planned->dtype, out_ndim = planned->ndim;
  td_tensor_release(planned);

  bool reduced[TD_MAX_DIMS] = {false};
  for (int32_t i = 0; i < ndims; i++) reduced[dims[i] < 0 ? dims[i] + (a->ndim ? a->ndim : 1) : dims[i]] = true;
  if (ndims == 0)
    for (int32_t d = 0; d < a->ndim; d++) reduced[d] = true;
  tdc_layout kl = tdc_layout{}, rl = tdc_layout{};
  int64_t shape[TD_MAX_DIMS];
  int32_t nd = 0;
  int64_t nout = 1, nred = 1;
  for (int32_t d = 0; d < a->ndim; d++) {
    tdc_layout &l = reduced[d] ? rl : kl;
    l.shape[l.ndim] = a->shape[d];
    l.strides[l.ndim] = a->strides[d];
    l.ndim++;
    if (reduced[d]) nred *= a->shape[d];
    else nout *= a->shape[d];
    if (!reduced[d] || keepdim) shape[nd++] = reduced[d] ? 1 : a->shape[d];
  }
  if (out_ndim == 0) nd = 0; /* every dim reduced: 0-dim, as the CPU gives it */
  if (nred == 0 && (op == TD_RED_MIN || op == TD_RED_MAX) && nout > 0) {
    tdc_fail(TD_EINVAL, "%s: cannot reduce over a dim of size 0 (no identity)", call);
    return NULL;
  }
  td_tensor *out = tdc_empty(call, td_tensor_device_index(a), nd, shape, out_dtype);
  if (!out || nout == 0) return out;
  bool ok = true;
  TDC_DISPATCH(a->dtype, T, {
    if (tdc_is_float<typename tdc_acc<T>::type>::value)
      ok = launch<T, double>(call, op, out, a, kl, rl, nout, nred);
    else
      ok = launch<T, int64_t>(call, op, out, a, kl, rl, nout, nred);
  });
  if (!ok) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}
