/*
 * blas.cu: torch.matmul on the device through cuBLAS.
 *
 * The operands follow torch.matmul's rules, as core/kernels/blas.c does: a 1-D first
 * operand is a row, a 1-D second one a column (both dims dropped again), batch dims
 * broadcast. Operands are made contiguous (no copy when they are) and expanded to the
 * common batch; row-major C = A B is cuBLAS's column-major C^T = B^T A^T, one strided
 * batched call. float16 and bfloat16 accumulate in float32 (cublasGemmStridedBatchedEx);
 * integers use a plain kernel in wrapping 64-bit arithmetic, as the CPU computes them.
 */
#include <mutex>
#include <string.h>

#include <cublas_v2.h>

#include "cuda_internal.h"

static std::mutex handle_lock;
static cublasHandle_t handles[64];

static const char *cublas_message(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate memory";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was passed to cuBLAS";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the GPU lacks a feature cuBLAS needs";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the cuBLAS kernel failed to run";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the operation is not supported by cuBLAS";
    default: return "cuBLAS error";
  }
}

static bool cublas_ok(cublasStatus_t s, const char *call) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  tdc_fail(s == CUBLAS_STATUS_ALLOC_FAILED ? TD_ENOMEM : TD_EINVAL, "%s: %s (cuBLAS status %d)",
           call, cublas_message(s), (int)s);
  return false;
}

/* The current device's handle, bound to the library's stream. */
static cublasHandle_t handle(const char *call, int32_t device) {
  std::lock_guard<std::mutex> guard(handle_lock);
  if (device < 0 || device >= 64) return NULL;
  if (!handles[device] && !cublas_ok(cublasCreate(&handles[device]), call)) return NULL;
  if (!cublas_ok(cublasSetStream(handles[device], tdc_stream()), call)) return NULL;
  return handles[device];
}

template <class T>
__global__ void int_matmul(T *c, const T *a, const T *b, int64_t batch, int64_t m, int64_t k,
                           int64_t n) {
  const int64_t total = batch * m * n;
  TDC_LOOP(i, total) {
    const int64_t j = i % n, row = (i / n) % m, bi = i / (m * n);
    const T *ar = a + (bi * m + row) * k, *bc = b + bi * k * n + j;
    uint64_t acc = 0; /* wraps like the CPU's int64 accumulation */
    for (int64_t q = 0; q < k; q++) acc += (uint64_t)(int64_t)ar[q] * (uint64_t)(int64_t)bc[q * n];
    c[i] = (T)(int64_t)acc;
  }
}

static bool run_gemm(const char *call, int32_t device, int32_t dtype, const void *A, const void *B,
                     void *Cm, int64_t batch, int64_t m, int64_t k, int64_t n) {
  if (batch == 0 || m == 0 || n == 0) return true;
  if (!td_dtype_is_floating(dtype)) {
    const int64_t total = batch * m * n;
    TDC_DISPATCH(dtype, T, {
      int_matmul<T><<<tdc_blocks(total, TDC_THREADS), TDC_THREADS, 0, tdc_stream()>>>(
          (T *)Cm, (const T *)A, (const T *)B, batch, m, k, n);
    });
    return tdc_launched(call);
  }
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
    tdc_fail(TD_ESHAPE, "%s: a matrix dim above %d is too large for cuBLAS", call, INT32_MAX);
    return false;
  }
  cublasHandle_t h = handle(call, device);
  if (!h) return false;
  const int im = (int)m, ik = (int)k, in = (int)n;
  const int64_t sa = m * k, sb = k * n, sc = m * n;
  if (k == 0) return tdc_check(cudaMemsetAsync(Cm, 0, (size_t)(batch * sc * td_dtype_itemsize(dtype)), tdc_stream()), call);
  if (dtype == TD_FLOAT32) {
    const float one = 1, zero = 0;
    return cublas_ok(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, in, im, ik, &one,
                                               (const float *)B, in, sb, (const float *)A, ik, sa,
                                               &zero, (float *)Cm, in, sc, (int)batch), call);
  }
  if (dtype == TD_FLOAT64) {
    const double one = 1, zero = 0;
    return cublas_ok(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, in, im, ik, &one,
                                               (const double *)B, in, sb, (const double *)A, ik, sa,
                                               &zero, (double *)Cm, in, sc, (int)batch), call);
  }
  const cudaDataType_t t = dtype == TD_FLOAT16 ? CUDA_R_16F : CUDA_R_16BF;
  const float one = 1, zero = 0;
  return cublas_ok(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, in, im, ik, &one, B, t,
                                              in, sb, A, t, ik, sa, &zero, Cm, t, in, sc,
                                              (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   call);
}

/* torch.matmul of a and b, errors naming call (mm, bmm, ... run it too). */
static td_tensor *matmul_as(const char *call, const td_tensor *a, const td_tensor *b) {
  if (!a || !b) {
    tdc_fail(TD_EINVAL, "%s: a tensor is NULL", call);
    return NULL;
  }
  const int32_t device = td_tensor_device_index(a);
  if (!tdc_check_on(call, a, "first tensor", device) || !tdc_check_on(call, b, "second tensor", device) ||
      !tdc_use_device(call, device))
    return NULL;
  if (a->dtype != b->dtype) {
    tdc_fail(TD_EDTYPE, "%s: expected m1 and m2 to have the same dtype, but got: %s != %s", call,
             td_dtype_name(a->dtype), td_dtype_name(b->dtype));
    return NULL;
  }
  if (a->dtype == TD_BOOL) {
    tdc_fail(TD_EDTYPE, "%s: bool tensors are not supported (cast to an integer or floating dtype "
             "first)", call);
    return NULL;
  }
  if (a->ndim == 0 || b->ndim == 0) {
    tdc_fail(TD_ESHAPE, "%s: both arguments need at least 1 dim, got %d and %d dims", call,
             (int)a->ndim, (int)b->ndim);
    return NULL;
  }
  const bool a_vec = a->ndim == 1, b_vec = b->ndim == 1;
  const int64_t m = a_vec ? 1 : a->shape[a->ndim - 2], k = a->shape[a->ndim - 1];
  const int64_t kb = b_vec ? b->shape[0] : b->shape[b->ndim - 2], n = b_vec ? 1 : b->shape[b->ndim - 1];
  if (k != kb) {
    tdc_fail(TD_ESHAPE, "%s: shapes cannot be multiplied (%lld != %lld)", call, (long long)k, (long long)kb);
    return NULL;
  }
  const int32_t anb = a->ndim > 2 ? a->ndim - 2 : 0, bnb = b->ndim > 2 ? b->ndim - 2 : 0;
  const int32_t nb = anb > bnb ? anb : bnb;
  int64_t batch_shape[TD_MAX_DIMS], batch = 1;
  for (int32_t d = 0; d < nb; d++) {
    const int32_t da = d - (nb - anb), db = d - (nb - bnb);
    const int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
    if (x != y && x != 1 && y != 1) {
      tdc_fail(TD_ESHAPE, "%s: the batch dims do not broadcast (%lld vs %lld)", call, (long long)x,
               (long long)y);
      return NULL;
    }
    batch_shape[d] = x == 1 ? y : x;
    batch *= batch_shape[d];
  }
  /* A as [batch..., m, k], B as [batch..., k, n], contiguous */
  int64_t as[TD_MAX_DIMS], bs[TD_MAX_DIMS];
  memcpy(as, batch_shape, sizeof(int64_t) * nb);
  memcpy(bs, batch_shape, sizeof(int64_t) * nb);
  as[nb] = m, as[nb + 1] = k, bs[nb] = k, bs[nb + 1] = n;
  td_tensor av, bv, ae, be;
  const int64_t a2[2] = {1, k}, b2[2] = {k, 1};
  const td_tensor *ax = a, *bx = b;
  if (a_vec) { td_tensor_view(a, 2, a2, &av); ax = &av; }
  if (b_vec) { td_tensor_view(b, 2, b2, &bv); bx = &bv; }
  if (td_tensor_expand(ax, nb + 2, as, &ae) != TD_OK || td_tensor_expand(bx, nb + 2, bs, &be) != TD_OK)
    return NULL;
  td_tensor *ac = tdc_contiguous_as(call, &ae, a->dtype);
  td_tensor *bc = ac ? tdc_contiguous_as(call, &be, b->dtype) : NULL;
  /* the result drops the dims of 1-D operands */
  int64_t cs[TD_MAX_DIMS];
  int32_t cnd = nb;
  memcpy(cs, batch_shape, sizeof(int64_t) * nb);
  if (!a_vec) cs[cnd++] = m;
  if (!b_vec) cs[cnd++] = n;
  td_tensor *out = bc ? tdc_empty(call, device, cnd, cs, a->dtype) : NULL;
  const bool ok = out && run_gemm(call, device, a->dtype, tdc_ptr(ac), tdc_ptr(bc), tdc_ptr(out), batch, m, k, n);
  td_tensor_release(ac);
  td_tensor_release(bc);
  if (!ok) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

TDC_EXPORT td_tensor *td_cuda_matmul(const td_tensor *a, const td_tensor *b) {
  return matmul_as("matmul", a, b);
}

/* ---- mm, bmm, mv, dot: matmul with fixed ranks, refused as the CPU refuses ---- */

static void shape_text(char *buf, size_t len, const td_tensor *t) {
  size_t used = (size_t)snprintf(buf, len, "[");
  for (int32_t d = 0; d < t->ndim && used < len; d++)
    used += (size_t)snprintf(buf + used, len - used, d ? ", %lld" : "%lld", (long long)t->shape[d]);
  if (used < len) snprintf(buf + used, len - used, "]");
}

static td_tensor *fixed_ranks(const char *call, const td_tensor *a, const td_tensor *b,
                              int32_t a_ndim, int32_t b_ndim) {
  if (!a || !b) {
    tdc_fail(TD_EINVAL, "%s: the %s tensor is NULL", call, a ? "second" : "first");
    return NULL;
  }
  char sa[TD_MAX_DIMS * 22 + 4], sb[TD_MAX_DIMS * 22 + 4];
  shape_text(sa, sizeof sa, a);
  shape_text(sb, sizeof sb, b);
  if (a->ndim != a_ndim || b->ndim != b_ndim) {
    tdc_fail(TD_ESHAPE, "%s: expected %d-D and %d-D tensors, but got shapes %s and %s", call,
             (int)a_ndim, (int)b_ndim, sa, sb);
    return NULL;
  }
  if (a_ndim == 3 && a->shape[0] != b->shape[0]) {
    tdc_fail(TD_ESHAPE, "%s: batch sizes differ: shapes %s and %s", call, sa, sb);
    return NULL;
  }
  return matmul_as(call, a, b);
}

TDC_EXPORT td_tensor *td_cuda_mm(const td_tensor *a, const td_tensor *b) {
  return fixed_ranks("mm", a, b, 2, 2);
}
TDC_EXPORT td_tensor *td_cuda_bmm(const td_tensor *a, const td_tensor *b) {
  return fixed_ranks("bmm", a, b, 3, 3);
}
TDC_EXPORT td_tensor *td_cuda_mv(const td_tensor *a, const td_tensor *v) {
  return fixed_ranks("mv", a, v, 2, 1);
}
TDC_EXPORT td_tensor *td_cuda_dot(const td_tensor *a, const td_tensor *b) {
  return fixed_ranks("dot", a, b, 1, 1);
}
