/*
 * reduce.cu: sum, mean, prod, min, max, argmin, argmax, std and var over all dims or the
 * dims listed, and min / max along one dim with their indices.
 *
 * The CPU library plans the call: td_reduce on a host twin of a's dtype with every size
 * 1 checks the op, the dtype and the dims with the CPU's messages and gives the result
 * dtype. The device then splits a's dims into kept ones (one output each) and reduced
 * ones (walked by the strided layout), accumulating in double for floating dtypes and
 * int64 otherwise. Long reductions split across blocks (partials, then a second pass);
 * short ones (32 elements or fewer per output) take one thread per output.
 * argmin / argmax (and the indices of min / max) take one block per output, each thread
 * keeping its best (value, position), merged so the first extreme wins, a NaN first of
 * all, as on the CPU. std and var are two passes of the kernels here (the mean, then the
 * sum of squared deviations from it, in float64) divided by max(0, n - correction), as
 * the CPU's (core/kernels/reduce_ops.c); its single pass merges pieces differently, so
 * the last bits may differ.
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

/* ---- argmin, argmax and the indices of min / max ---- */

/* Whether (v at position vi) replaces (best at bi): more extreme, or as extreme and
 * earlier; a NaN beats any number, the first NaN any later one. bi < 0: nothing yet. */
template <class Acc>
__device__ __forceinline__ bool arg_wins(bool max, Acc v, int64_t vi, Acc best, int64_t bi) {
  if (vi < 0) return false;
  if (bi < 0) return true;
  const bool vn = v != v, bn = best != best;
  if (vn || bn) return vn && (!bn || vi < bi);
  if (v == best) return vi < bi;
  return max ? v > best : v < best;
}

/* Block x takes outputs x, x + gridDim.x, ...: values (when not NULL) and indices. */
template <class T, class Acc>
__global__ void arg_reduce(T *values, int64_t *indices, const T *in, tdc_layout kl,
                           tdc_layout rl, int64_t nout, int64_t nred, int32_t max) {
  __shared__ Acc best_v[RED_THREADS];
  __shared__ int64_t best_i[RED_THREADS];
  for (int64_t o = blockIdx.x; o < nout; o += gridDim.x) {
    const T *base = in + tdc_offset(kl, o);
    Acc best = 0;
    int64_t bi = -1;
    for (int64_t r = threadIdx.x; r < nred; r += blockDim.x) {
      const Acc v = tdc_cast<Acc>(base[tdc_offset(rl, r)]);
      if (arg_wins<Acc>(max, v, r, best, bi)) best = v, bi = r;
    }
    best_v[threadIdx.x] = best;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
      const int t = threadIdx.x;
      if (t < w && arg_wins<Acc>(max, best_v[t + w], best_i[t + w], best_v[t], best_i[t]))
        best_v[t] = best_v[t + w], best_i[t] = best_i[t + w];
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (values) values[o] = tdc_cast<T>(best_v[0]);
      indices[o] = best_i[0];
    }
    __syncthreads();
  }
}

template <class T, class Acc>
static bool launch_arg(const char *call, bool max, td_tensor *values, td_tensor *indices,
                       const td_tensor *a, tdc_layout kl, tdc_layout rl, int64_t nout,
                       int64_t nred) {
  const int threads = nred <= 64 ? 32 : RED_THREADS; /* powers of two for the merge */
  const unsigned gx = (unsigned)(nout < 65535 * 16 ? nout : 65535 * 16);
  arg_reduce<T, Acc><<<gx, threads, 0, tdc_stream()>>>(
      values ? (T *)tdc_ptr(values) : NULL, (int64_t *)tdc_ptr(indices), (const T *)tdc_ptr(a),
      kl, rl, nout, nred, max);
  return tdc_launched(call);
}

/* The op's name from the CPU library's op table (those without a CUDA kernel are named
 * for their refusal); "reduce" for an unknown op. */
static const char *red_name(int32_t op) {
  const char *name = td_op_name(TD_OPS_REDUCE, op, 0);
  return name ? name : "reduce";
}

/* The reductions with a CUDA kernel: the codes up to var. */
static bool has_kernel(int32_t op) { return op >= 0 && op <= TD_RED_VAR; }

/* "sum, mean, ... and var": the names of the ops has_kernel takes, for its refusal. */
static const char *kernel_names(char *buf, size_t n) {
  size_t at = 0;
  buf[0] = '\0';
  for (int32_t op = 0; has_kernel(op) && at < n; op++) {
    const char *sep = op == 0 ? "" : has_kernel(op + 1) ? ", " : " and ";
    const int w = snprintf(buf + at, n - at, "%s%s", sep, red_name(op));
    at += w > 0 ? (size_t)w : 0;
  }
  return buf;
}

tdc_split tdc_split_dims(const td_tensor *a, const bool *reduced, int32_t keepdim) {
  tdc_split s = tdc_split{};
  s.nout = s.nred = 1;
  for (int32_t d = 0; d < a->ndim; d++) {
    tdc_layout &l = reduced[d] ? s.rl : s.kl;
    l.shape[l.ndim] = a->shape[d];
    l.strides[l.ndim] = a->strides[d];
    l.ndim++;
    if (reduced[d]) s.nred *= a->shape[d];
    else s.nout *= a->shape[d];
    if (!reduced[d] || keepdim) s.shape[s.nd++] = reduced[d] ? 1 : a->shape[d];
  }
  return s;
}

bool tdc_on_its_device(const char *call, const td_tensor *a) {
  if (!a) {
    tdc_fail(TD_EINVAL, "%s: the tensor is NULL", call);
    return false;
  }
  return tdc_check_on(call, a, "tensor", td_tensor_device_index(a)) &&
         tdc_use_device(call, td_tensor_device_index(a));
}

td_tensor *tdc_host_twin(const td_tensor *a) {
  int64_t ones[TD_MAX_DIMS];
  for (int32_t d = 0; d < TD_MAX_DIMS; d++) ones[d] = 1;
  return td_tensor_full(a->ndim, ones, a->dtype, 1);
}

static bool extreme_of_empty(const char *call, const tdc_split &s) {
  if (s.nred == 0 && s.nout > 0) {
    tdc_fail(TD_EINVAL, "%s: cannot reduce over a dim of size 0 (no identity)", call);
    return true;
  }
  return false;
}

/* std / var: mean, squared deviations, their sum, / max(0, n - correction), in float64
 * (see the top of the file), then cast to the planned dtype. */
static td_tensor *spread(int32_t op, const td_tensor *a, const int32_t *dims, int32_t ndims,
                         int32_t keepdim, double correction, int64_t nred, int32_t out_dtype) {
  const char *call = red_name(op);
  td_tensor *x = tdc_contiguous_as(call, a, TD_FLOAT64);
  td_tensor *mean = x ? td_cuda_reduce(TD_RED_MEAN, x, dims, ndims, 1, 0) : NULL;
  td_tensor *dev = mean ? td_cuda_binary(TD_BINARY_SUB, x, mean) : NULL;
  td_tensor *sq = dev ? td_cuda_binary(TD_BINARY_MUL, dev, dev) : NULL;
  td_tensor *ss = sq ? td_cuda_reduce(TD_RED_SUM, sq, dims, ndims, keepdim, 0) : NULL;
  const double n = (double)nred, div = n > correction ? n - correction : 0.0;
  td_tensor *var = ss ? td_cuda_binary_scalar(TD_BINARY_DIV, ss, div, TD_SCALAR_FLOAT, 0) : NULL;
  td_tensor *res = var && op == TD_RED_STD ? td_cuda_unary(TD_UNARY_SQRT, var) : NULL;
  const td_tensor *value = op == TD_RED_STD ? res : var;
  td_tensor *out = value ? tdc_contiguous_as(call, value, out_dtype) : NULL;
  td_tensor *temps[] = {x, mean, dev, sq, ss, var, res};
  for (td_tensor *t : temps) td_tensor_release(t);
  return out;
}

TDC_EXPORT td_tensor *td_cuda_reduce(int32_t op, const td_tensor *a, const int32_t *dims,
                                     int32_t ndims, int32_t keepdim, double param) {
  const char *call = red_name(op);
  if (!has_kernel(op)) {
    char names[128];
    tdc_fail(TD_EINVAL, "%s: op %d has no CUDA kernel (%s do); move the tensor to the CPU with "
             ":cpu() for it", call, (int)op, kernel_names(names, sizeof names));
    return NULL;
  }
  if (!tdc_on_its_device(call, a)) return NULL;
  /* the CPU's checks and result dtype, from a host twin with every size 1 */
  td_tensor *twin = tdc_host_twin(a);
  td_tensor *planned = twin ? td_reduce(op, twin, dims, ndims, keepdim, param) : NULL;
  td_tensor_release(twin);
  if (!planned) return NULL;
  const int32_t out_dtype = planned->dtype, out_ndim = planned->ndim;
  td_tensor_release(planned);

  bool reduced[TD_MAX_DIMS] = {false};
  for (int32_t i = 0; i < ndims; i++) reduced[dims[i] < 0 ? dims[i] + (a->ndim ? a->ndim : 1) : dims[i]] = true;
  if (ndims == 0)
    for (int32_t d = 0; d < a->ndim; d++) reduced[d] = true;
  tdc_split s = tdc_split_dims(a, reduced, keepdim);
  if (out_ndim == 0) s.nd = 0; /* every dim reduced: 0-dim, as the CPU gives it */
  const bool extreme = op == TD_RED_MIN || op == TD_RED_MAX || op == TD_RED_ARGMIN || op == TD_RED_ARGMAX;
  if (extreme && extreme_of_empty(call, s)) return NULL;
  if (op == TD_RED_STD || op == TD_RED_VAR)
    return spread(op, a, dims, ndims, keepdim, param, s.nred, out_dtype);
  td_tensor *out = tdc_empty(call, td_tensor_device_index(a), s.nd, s.shape, out_dtype);
  if (!out || s.nout == 0) return out;
  bool ok = true;
  TDC_DISPATCH(a->dtype, T, {
    const bool fl = tdc_is_float<typename tdc_acc<T>::type>::value;
    if (op == TD_RED_ARGMIN || op == TD_RED_ARGMAX)
      ok = fl ? launch_arg<T, double>(call, op == TD_RED_ARGMAX, NULL, out, a, s.kl, s.rl, s.nout, s.nred)
              : launch_arg<T, int64_t>(call, op == TD_RED_ARGMAX, NULL, out, a, s.kl, s.rl, s.nout, s.nred);
    else if (fl)
      ok = launch<T, double>(call, op, out, a, s.kl, s.rl, s.nout, s.nred);
    else
      ok = launch<T, int64_t>(call, op, out, a, s.kl, s.rl, s.nout, s.nred);
  });
  if (!ok) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

TDC_EXPORT int32_t td_cuda_reduce_with_index(int32_t op, const td_tensor *a, int32_t dim,
                                             int32_t keepdim, td_tensor **values,
                                             td_tensor **indices) {
  const char *call = red_name(op);
  if (!values || !indices)
    return tdc_fail(TD_EINVAL, "%s: the %s output pointer is NULL", call, values ? "indices" : "values");
  if (!tdc_on_its_device(call, a)) return td_last_status();
  /* the CPU's checks (op, dim) and shapes, from a host twin */
  td_tensor *twin = tdc_host_twin(a), *pv = NULL, *pi = NULL;
  const int32_t status = twin ? td_reduce_with_index(op, twin, dim, keepdim, &pv, &pi) : td_last_status();
  td_tensor_release(twin);
  if (status != TD_OK) return status;
  const int32_t out_ndim = pv->ndim;
  td_tensor_release(pv);
  td_tensor_release(pi);
  bool reduced[TD_MAX_DIMS] = {false};
  if (a->ndim > 0) reduced[dim] = true;
  tdc_split s = tdc_split_dims(a, reduced, keepdim);
  if (out_ndim == 0) s.nd = 0;
  if (extreme_of_empty(call, s)) return td_last_status();
  const int32_t device = td_tensor_device_index(a);
  td_tensor *v = tdc_empty(call, device, s.nd, s.shape, a->dtype);
  td_tensor *ix = v ? tdc_empty(call, device, s.nd, s.shape, TD_INT64) : NULL;
  bool ok = ix != NULL;
  if (ok && s.nout > 0) {
    TDC_DISPATCH(a->dtype, T, {
      if (tdc_is_float<typename tdc_acc<T>::type>::value)
        ok = launch_arg<T, double>(call, op == TD_RED_MAX, v, ix, a, s.kl, s.rl, s.nout, s.nred);
      else
        ok = launch_arg<T, int64_t>(call, op == TD_RED_MAX, v, ix, a, s.kl, s.rl, s.nout, s.nred);
    });
  }
  if (!ok) {
    td_tensor_release(v);
    td_tensor_release(ix);
    return td_last_status();
  }
  *values = v;
  *indices = ix;
  return TD_OK;
}
