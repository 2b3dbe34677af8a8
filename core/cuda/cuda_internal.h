/*
 * cuda_internal.h: what the files of libtensordict_cuda share: error reporting into
 * libtensordict's error state, device checks, the dtype switch, element conversions and
 * the strided walk every kernel uses. Nothing here is ABI (core/include/tensordict_cuda.h).
 */
#ifndef TD_CUDA_INTERNAL_H
#define TD_CUDA_INTERNAL_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "dtype_table.h"
#include "op_table.h"
#include "tensordict.h"
#include "tensordict_cuda.h"

#define TDC_EXPORT extern "C" __attribute__((visibility("default")))

/* ---- errors (runtime.cu) ---- */
/* Records "<printf text>" for td_last_error(); returns status. */
int32_t tdc_fail(int32_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* False after recording "<call>: CUDA error: <CUDA's message>" when e is an error
 * (out of memory maps to TD_ENOMEM). A sticky error (a kernel fault) leaves the
 * context unusable, as CUDA does; the message says so. */
bool tdc_check(cudaError_t e, const char *call);
/* The launch status of the kernel just queued. */
bool tdc_launched(const char *call);

/* ---- devices and streams (runtime.cu) ---- */
/* The library's stream on the current device (made on first use). */
cudaStream_t tdc_stream(void);
/* Makes device current; false after an error. */
bool tdc_use_device(const char *call, int32_t device);

/* ---- memory (allocator.cu) ---- */
/* A device block of nbytes on device (the cache first); NULL after an error. */
void *tdc_alloc(const char *call, int32_t device, int64_t nbytes);
void tdc_free_block(void *data, void *ctx);
/* A contiguous pinned host tensor (uninitialised). */
td_tensor *tdc_empty_pinned(const char *call, int32_t ndim, const int64_t *shape, int32_t dtype);
/* A new contiguous device tensor on device. */
td_tensor *tdc_empty(const char *call, int32_t device, int32_t ndim, const int64_t *shape,
                     int32_t dtype);

/* ---- tensor checks (copy.cu) ---- */
bool tdc_on_device(const td_tensor *t);
/* False with "<call>: the <what> is on cpu but ... cuda:N" unless t is on device. */
bool tdc_check_on(const char *call, const td_tensor *t, const char *what, int32_t device);
/* dst = src (src already expanded to dst's shape), casting, both on one device. */
bool tdc_copy_same_shape(const char *call, td_tensor *dst, const td_tensor *src);
/* A contiguous device copy of t cast to dtype (t itself, retained, when it already is). */
td_tensor *tdc_contiguous_as(const char *call, const td_tensor *t, int32_t dtype);
/* t itself (a new reference) when it has dtype, else a contiguous cast copy. */
td_tensor *tdc_contiguous_or_same(const char *call, const td_tensor *t, int32_t dtype);
/* A scalar as a 0-dim device tensor of dtype on device. */
td_tensor *tdc_scalar_tensor(const char *call, int32_t device, double s, int32_t kind,
                             int32_t dtype);
/* Copies r (a new result, released here) into a after the CPU's in-place checks (writable,
 * same shape, no float into an integer tensor, nothing but bool into bool); the status
 * (r NULL: the error already recorded). elementwise.cu. */
int32_t tdc_into(const char *call, td_tensor *a, td_tensor *r);
/* Reads one int32 flag written by a kernel (synchronizes). */
bool tdc_read_flag(const char *call, const int32_t *dflag, int32_t *out);

/* ---- the strided walk ---- */
struct tdc_layout {
  int32_t ndim;
  int32_t contiguous; /* element i is at i */
  int64_t shape[TD_MAX_DIMS];
  int64_t strides[TD_MAX_DIMS];
};

tdc_layout tdc_layout_of(const td_tensor *t);
/* t's data pointer (element [0, ...]). */
static inline char *tdc_ptr(const td_tensor *t) {
  return (char *)td_tensor_data_borrow(t);
}

/* The element offset of row-major element i. */
__device__ __forceinline__ int64_t tdc_offset(const tdc_layout &l, int64_t i) {
  if (l.contiguous) return i;
  int64_t off = 0;
  for (int32_t d = l.ndim - 1; d >= 0; d--) {
    const int64_t n = l.shape[d];
    const int64_t q = i / n;
    off += (i - q * n) * l.strides[d];
    i = q;
  }
  return off;
}

/* a's dims split into kept ones (kl: one output each, in row-major order) and reduced
 * ones (rl); shape and nd: the output's shape (keepdim: size 1 at reduced dims). With
 * one dim reduced, rl walks one line and kl the starts of the lines. reduce.cu. */
struct tdc_split {
  tdc_layout kl, rl;
  int64_t shape[TD_MAX_DIMS];
  int32_t nd;
  int64_t nout, nred;
};
tdc_split tdc_split_dims(const td_tensor *a, const bool *reduced, int32_t keepdim);
/* A host tensor of a's dtype and ndim with every size 1: the CPU library plans a device
 * call on it (its checks, messages and result dtype) without touching device memory. */
td_tensor *tdc_host_twin(const td_tensor *a);
/* False after an error unless a (not NULL) is on a device, which is made current. */
bool tdc_on_its_device(const char *call, const td_tensor *a);

/* Blocks for a grid-stride loop over n elements. */
static inline unsigned tdc_blocks(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b > 65535LL * 16) b = 65535LL * 16;
  return (unsigned)(b < 1 ? 1 : b);
}
#define TDC_THREADS 256
#define TDC_LOOP(i, n) \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (int64_t)gridDim.x * blockDim.x)

/* ---- element types ---- */
/* The arithmetic type of a stored type: float16 and bfloat16 compute in float. */
template <class T> struct tdc_acc { typedef T type; };
template <> struct tdc_acc<__half> { typedef float type; };
template <> struct tdc_acc<__nv_bfloat16> { typedef float type; };

template <class T> struct tdc_is_float { static const bool value = false; };
template <> struct tdc_is_float<float> { static const bool value = true; };
template <> struct tdc_is_float<double> { static const bool value = true; };

/* Conversions between stored types, as the CPU casts: to bool is != 0; floating to
 * integer truncates; 16-bit floats round to nearest even. */
template <class D> struct tdc_conv {
  template <class S> __host__ __device__ static D from(S v) { return (D)v; }
  __host__ __device__ static D from(__half v) { return (D)__half2float(v); }
  __host__ __device__ static D from(__nv_bfloat16 v) { return (D)__bfloat162float(v); }
};
template <> struct tdc_conv<bool> {
  template <class S> __host__ __device__ static bool from(S v) { return v != (S)0; }
  __host__ __device__ static bool from(__half v) { return __half2float(v) != 0.0f; }
  __host__ __device__ static bool from(__nv_bfloat16 v) { return __bfloat162float(v) != 0.0f; }
};
template <> struct tdc_conv<__half> {
  template <class S> __host__ __device__ static __half from(S v) { return __double2half((double)v); }
  __host__ __device__ static __half from(float v) { return __float2half_rn(v); }
  __host__ __device__ static __half from(__half v) { return v; }
  __host__ __device__ static __half from(__nv_bfloat16 v) {
    return __float2half_rn(__bfloat162float(v));
  }
};
template <> struct tdc_conv<__nv_bfloat16> {
  template <class S> __host__ __device__ static __nv_bfloat16 from(S v) {
    return __double2bfloat16((double)v);
  }
  __host__ __device__ static __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
  __host__ __device__ static __nv_bfloat16 from(__nv_bfloat16 v) { return v; }
  __host__ __device__ static __nv_bfloat16 from(__half v) {
    return __float2bfloat16_rn(__half2float(v));
  }
};
template <class D, class S> __host__ __device__ __forceinline__ D tdc_cast(S v) {
  return tdc_conv<D>::from(v);
}

/* The device type of a stored element, by the dtype table's kind: bool for B, CUDA's
 * own 16-bit float types for H and BF, the stored type itself otherwise. */
#define TDC_TYPE_B(DT) bool
#define TDC_TYPE_I(DT) DT
#define TDC_TYPE_H(DT) __half
#define TDC_TYPE_BF(DT) __nv_bfloat16
#define TDC_TYPE_F(DT) DT
#define TDC_UNPAREN(...) __VA_ARGS__
#define TDC_DISPATCH_CASE(T, BODY, DN, DT, DK, ...) \
  case TD_##DN: {                                   \
    typedef TDC_TYPE_##DK(DT) T;                    \
    TDC_UNPAREN BODY;                               \
  } break;

/* Runs the code given with T the device type of dtype DT: a switch with a case per row
 * of the dtype table (the code travels through the table in parentheses, commas and
 * all). Every dtype reaching a kernel is valid: another code runs nothing. */
#define TDC_DISPATCH(DT, T, ...) \
  switch (DT) {                  \
    TD_DTYPES_ALL(TDC_DISPATCH_CASE, T, (__VA_ARGS__)) \
    default: break;              \
  }

#endif
