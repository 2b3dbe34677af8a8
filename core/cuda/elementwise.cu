/*
 * elementwise.cu: binary and unary ops, where and masked_fill on the device.
 *
 * Dtypes are planned by the CPU library (td_binary_dtypes, td_unary_dtypes), so both
 * backends refuse and promote alike; operands are cast to the compute dtype first (a
 * copy only when their dtype differs), and the kernel runs in that dtype (float for
 * float16 and bfloat16) over the broadcast shape, strided operands included. Scalars
 * are converted on the host by the CPU library's rules and passed by value.
 * In-place forms compute a new tensor and copy it in, after the CPU's checks (shape,
 * and no float result into an integer tensor).
 */
#include <math.h>
#include <string.h>

#include "cuda_internal.h"

/* erfinv and digamma: the CPU's code, compiled for the device (same values). */
#define TD_SPECIAL_FN static __device__ inline
#include "special_math.h"

/* ---- per-element ops ---- */

template <class A> __device__ __forceinline__ bool is_nan(A v) { return v != v; }

/* v < 0, which is never true (and a warning) for uint8. */
template <class A> __device__ __forceinline__ bool is_neg(A v) { return v < 0; }
template <> __device__ __forceinline__ bool is_neg<uint8_t>(uint8_t) { return false; }

/* signbit: floats' sign bit (-0.0 and negative NaN included), v < 0 for integers. */
template <class A> __device__ __forceinline__ bool sign_bit(A v) { return is_neg(v); }
template <> __device__ __forceinline__ bool sign_bit<float>(float v) { return signbit(v); }
template <> __device__ __forceinline__ bool sign_bit<double>(double v) { return signbit(v); }
template <> __device__ __forceinline__ bool sign_bit<bool>(bool) { return false; }

template <class A>
__device__ __forceinline__ A int_floor_div(A a, A b, int32_t *zero) {
  if (b == 0) {
    *zero = 1;
    return 0;
  }
  A q = a / b;
  if ((a % b != 0) && (is_neg(a) != is_neg(b))) q--;
  return q;
}

template <class A> __device__ __forceinline__ A int_rem(A a, A b, int32_t *zero) {
  if (b == 0) {
    *zero = 1;
    return 0;
  }
  A r = a % b;
  if (r != 0 && (is_neg(r) != is_neg(b))) r += b;
  return r;
}

template <class A> __device__ __forceinline__ A int_pow(A a, A b) {
  if (is_neg(b)) return a == 1 ? 1 : a == (A)-1 ? ((b & 1) ? (A)-1 : 1) : 0;
  A r = 1;
  while (b) {
    if (b & 1) r = (A)(r * a);
    a = (A)(a * a);
    b >>= 1;
  }
  return r;
}

/* Floating ops, in float or double. */
template <class A> __device__ A float_binary(int32_t op, A a, A b) {
  switch (op) {
    case TD_BINARY_ADD: return a + b;
    case TD_BINARY_SUB: return a - b;
    case TD_BINARY_MUL: return a * b;
    case TD_BINARY_DIV: return a / b;
    case TD_BINARY_FLOOR_DIVIDE: {
      if (b == 0) return a / b;
      const A m = fmod(a, b);
      A div = (a - m) / b;
      if (m != 0 && ((b < 0) != (m < 0))) div -= 1;
      if (div == 0) return copysign((A)0, a / b);
      A f = floor(div);
      if (div - f > (A)0.5) f += 1;
      return f;
    }
    case TD_BINARY_REMAINDER: {
      A m = fmod(a, b);
      if (m != 0 && ((b < 0) != (m < 0))) m += b;
      return m;
    }
    case TD_BINARY_POW: return pow(a, b);
    case TD_BINARY_MINIMUM: return (is_nan(a) || is_nan(b)) ? a + b : (a < b ? a : b);
    case TD_BINARY_ATAN2: return atan2(a, b);
    case TD_BINARY_HYPOT: return hypot(a, b);
    case TD_BINARY_COPYSIGN: return copysign(a, b);
    case TD_BINARY_FMOD: return fmod(a, b);
    case TD_BINARY_LOGADDEXP:
      if (isinf(a) && a == b) return a;
      return (is_nan(a) || is_nan(b)) ? a + b : (a > b ? a : b) + log1p(exp(-fabs(a - b)));
    case TD_BINARY_XLOGY: return is_nan(b) ? b : a == 0 ? (A)0 : a * log(b);
    /* td_binary_dtypes refuses floats for the bitwise ops: never reached */
    case TD_BINARY_BITWISE_AND: case TD_BINARY_BITWISE_OR: case TD_BINARY_BITWISE_XOR:
    case TD_BINARY_BITWISE_LEFT_SHIFT: case TD_BINARY_BITWISE_RIGHT_SHIFT: return (A)NAN;
    default: return (is_nan(a) || is_nan(b)) ? a + b : (a > b ? a : b); /* MAXIMUM */
  }
}

template <class A> __device__ A int_binary(int32_t op, A a, A b, int32_t *zero) {
  switch (op) {
    case TD_BINARY_ADD: return (A)(a + b);
    case TD_BINARY_SUB: return (A)(a - b);
    case TD_BINARY_MUL: return (A)(a * b);
    case TD_BINARY_FLOOR_DIVIDE: return int_floor_div<A>(a, b, zero);
    case TD_BINARY_REMAINDER: return int_rem<A>(a, b, zero);
    case TD_BINARY_POW: return int_pow<A>(a, b);
    case TD_BINARY_FMOD:
      if (b == 0) return (A)(*zero = 1, 0);
      return is_neg(b) && b == (A)-1 ? (A)0 : (A)(a % b); /* MIN % -1 traps */
    case TD_BINARY_MINIMUM: return a < b ? a : b;
    case TD_BINARY_BITWISE_AND: return (A)(a & b);
    case TD_BINARY_BITWISE_OR: return (A)(a | b);
    case TD_BINARY_BITWISE_XOR: return (A)(a ^ b);
    case TD_BINARY_BITWISE_LEFT_SHIFT: /* torch's: a count < 0 or >= the width gives 0 */
      return (uint64_t)(int64_t)b >= 8 * sizeof(A) ? (A)0 : (A)((uint64_t)a << b);
    case TD_BINARY_BITWISE_RIGHT_SHIFT: /* ... and the sign for >>, 0 or -1 */
      return (A)(a >> ((uint64_t)(int64_t)b >= 8 * sizeof(A) ? (int)(8 * sizeof(A) - 1) : (int)b));
    default: return a > b ? a : b; /* MAXIMUM; DIV never runs in integers */
  }
}

__device__ __forceinline__ bool bool_binary(int32_t op, bool a, bool b) {
  switch (op) {
    case TD_BINARY_ADD: case TD_BINARY_MAXIMUM: return a || b;
    case TD_BINARY_POW: return a || !b;
    case TD_BINARY_BITWISE_OR: return a || b;
    case TD_BINARY_BITWISE_XOR: return a != b;
    default: return a && b; /* MUL, MINIMUM, BITWISE_AND (bool shifts are refused) */
  }
}

template <class A> struct arith {
  __device__ static A apply(int32_t op, A a, A b, int32_t *zero) { return int_binary<A>(op, a, b, zero); }
};
template <> struct arith<float> {
  __device__ static float apply(int32_t op, float a, float b, int32_t *) { return float_binary<float>(op, a, b); }
};
template <> struct arith<double> {
  __device__ static double apply(int32_t op, double a, double b, int32_t *) { return float_binary<double>(op, a, b); }
};
template <> struct arith<bool> {
  __device__ static bool apply(int32_t op, bool a, bool b, int32_t *) { return bool_binary(op, a, b); }
};

template <class A> __device__ __forceinline__ bool compare(int32_t op, A a, A b) {
  switch (op) {
    case TD_BINARY_EQ: return a == b;
    case TD_BINARY_NE: return a != b;
    case TD_BINARY_LT: return a < b;
    case TD_BINARY_LE: return a <= b;
    case TD_BINARY_GT: return a > b;
    case TD_BINARY_GE: return a >= b;
    case TD_BINARY_LOGICAL_AND: return (a != 0) && (b != 0);
    case TD_BINARY_LOGICAL_OR: return (a != 0) || (b != 0);
    default: return (a != 0) != (b != 0); /* LOGICAL_XOR */
  }
}

/* Scalars come in the arithmetic type A, already converted (see scalar_value). to_bool:
 * op compares or is logical (its category gives bool). */
template <class T, class O, class A>
__global__ void binary_kernel(int32_t op, bool to_bool, O *out, tdc_layout ol, const T *x,
                              tdc_layout xl, const T *y, tdc_layout yl, A xs, A ys,
                              int32_t xscalar, int32_t yscalar, int64_t n, int32_t *zero) {
  TDC_LOOP(i, n) {
    const A a = xscalar ? xs : tdc_cast<A>(x[tdc_offset(xl, i)]);
    const A b = yscalar ? ys : tdc_cast<A>(y[tdc_offset(yl, i)]);
    if (to_bool) out[tdc_offset(ol, i)] = tdc_cast<O>(compare<A>(op, a, b));
    else out[tdc_offset(ol, i)] = tdc_cast<O>(arith<A>::apply(op, a, b, zero));
  }
}

/* ---- operands ---- */

struct operand {
  const td_tensor *t; /* NULL: the scalar */
  double s;
  int32_t kind;
};

/* The scalar converted to dtype by the CPU library (its wrapping and rounding), as raw
 * bytes in out (at most 8). */
static bool scalar_bits(double s, int32_t kind, int32_t dtype, void *out) {
  td_tensor *host = kind == TD_SCALAR_FLOAT ? td_tensor_full(0, NULL, TD_FLOAT64, s)
                    : kind == TD_SCALAR_BOOL ? td_tensor_full(0, NULL, TD_BOOL, s != 0)
                                             : td_tensor_full(0, NULL, TD_INT64, trunc(s));
  if (!host) return false;
  td_tensor *cast = td_tensor_to_dtype(host, dtype);
  td_tensor_release(host);
  if (!cast) return false;
  memcpy(out, td_tensor_data_borrow(cast), (size_t)td_dtype_itemsize(dtype));
  td_tensor_release(cast);
  return true;
}

/* Broadcasts (*ndim, shape) with t's shape, in place. */
/* A scalar operand in the kernel's arithmetic type A for compute dtype c: converted to
 * c first, as the CPU does, except a float scalar after a float16 / bfloat16 tensor in
 * mul, div and floor_divide, which the CPU keeps in float32 (torch's rule). */
template <class T, class A>
static bool scalar_value(int32_t op, const operand &x, bool trailing, int32_t c, A *out) {
  const bool keep_float = trailing && (c == TD_FLOAT16 || c == TD_BFLOAT16) &&
                          (op == TD_BINARY_MUL || op == TD_BINARY_DIV || op == TD_BINARY_FLOOR_DIVIDE);
  if (keep_float) {
    float f = 0;
    if (!scalar_bits(x.s, x.kind, TD_FLOAT32, &f)) return false;
    *out = tdc_cast<A>(f);
    return true;
  }
  T v{};
  if (!scalar_bits(x.s, x.kind, c, &v)) return false;
  *out = tdc_cast<A>(v);
  return true;
}

static bool broadcast_with(const char *call, int32_t *ndim, int64_t *shape, const td_tensor *t) {
  const int32_t n = *ndim > t->ndim ? *ndim : t->ndim;
  int64_t out[TD_MAX_DIMS];
  for (int32_t i = 0; i < n; i++) {
    const int32_t ia = i - (n - *ndim), ib = i - (n - t->ndim);
    const int64_t sa = ia >= 0 ? shape[ia] : 1, sb = ib >= 0 ? t->shape[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      tdc_fail(TD_ESHAPE, "%s: shapes do not broadcast (size %lld vs %lld at dim %d)", call,
               (long long)sa, (long long)sb, (int)i);
      return false;
    }
    out[i] = sa == 1 ? sb : sa;
  }
  memcpy(shape, out, sizeof out);
  *ndim = n;
  return true;
}

/* The first tensor operand's device, made current; -1 after an error (mixed devices). */
static int32_t common_device(const char *call, const td_tensor *a, const td_tensor *b,
                             const td_tensor *c) {
  const td_tensor *first = a ? a : b ? b : c;
  if (!first) {
    tdc_fail(TD_EINVAL, "%s: no tensor operand", call);
    return -1;
  }
  const int32_t device = td_tensor_device_index(first);
  if (!tdc_on_device(first)) {
    tdc_check_on(call, first, "first tensor", device); /* names cpu */
    return -1;
  }
  if ((b && !tdc_check_on(call, b, "second tensor", device)) ||
      (c && !tdc_check_on(call, c, "third tensor", device)) || !tdc_use_device(call, device))
    return -1;
  return device;
}

/* out = x op y over out's shape; x and y (dtype c when tensors) expanded already. */
static bool run_binary(const char *call, int32_t op, int32_t c, td_tensor *out,
                       const td_tensor *x, const td_tensor *y, const operand &xo,
                       const operand &yo) {
  const int64_t n = td_tensor_numel(out);
  if (n == 0) return true;
  td_tensor *flag = NULL; /* set by a kernel that divided an integer by zero */
  int32_t *zero = NULL;
  const bool int_division = (op == TD_BINARY_FLOOR_DIVIDE || op == TD_BINARY_REMAINDER ||
                             op == TD_BINARY_FMOD) &&
                            !td_dtype_is_floating(c);
  if (int_division) {
    flag = tdc_empty(call, td_tensor_device_index(out), 0, NULL, TD_INT32);
    if (!flag) return false;
    zero = (int32_t *)tdc_ptr(flag);
    if (!tdc_check(cudaMemsetAsync(zero, 0, sizeof *zero, tdc_stream()), call)) {
      td_tensor_release(flag);
      return false;
    }
  }
  cudaStream_t s = tdc_stream();
  const unsigned blocks = tdc_blocks(n, TDC_THREADS);
  const tdc_layout ol = tdc_layout_of(out), none = tdc_layout{};
  const bool to_bool = TD_OPCAT_GIVES_BOOL(td_op_category(TD_OPS_BINARY, op));
  TDC_DISPATCH(c, T, {
    typedef typename tdc_acc<T>::type A;
    A xs{}, ys{};
    if ((!xo.t && !scalar_value<T, A>(op, xo, false, c, &xs)) ||
        (!yo.t && !scalar_value<T, A>(op, yo, true, c, &ys))) {
      td_tensor_release(flag);
      return false;
    }
    const T *xp = x ? (const T *)tdc_ptr(x) : NULL, *yp = y ? (const T *)tdc_ptr(y) : NULL;
    const tdc_layout xl = x ? tdc_layout_of(x) : none, yl = y ? tdc_layout_of(y) : none;
    if (out->dtype == TD_BOOL)
      binary_kernel<T, bool, A><<<blocks, TDC_THREADS, 0, s>>>(
          op, to_bool, (bool *)tdc_ptr(out), ol, xp, xl, yp, yl, xs, ys, !x, !y, n, zero);
    else
      binary_kernel<T, T, A><<<blocks, TDC_THREADS, 0, s>>>(
          op, to_bool, (T *)tdc_ptr(out), ol, xp, xl, yp, yl, xs, ys, !x, !y, n, zero);
  });
  if (!tdc_launched(call)) {
    td_tensor_release(flag);
    return false;
  }
  if (zero) {
    int32_t hit = 0;
    const bool ok = tdc_read_flag(call, zero, &hit);
    td_tensor_release(flag);
    if (!ok) return false;
    if (hit) {
      tdc_fail(TD_EINVAL, "%s: integer division by zero", call);
      return false;
    }
  }
  return true;
}

/* An op's name for messages, in place or not, from the CPU library's op table;
 * otherwise "<fallback>" (an unknown op, refused by the caller or by the CPU's plan). */
static const char *op_call(int32_t kind, int32_t op, int32_t inplace, const char *fallback) {
  const char *name = td_op_name(kind, op, inplace);
  return name ? name : fallback;
}

static td_tensor *binary_new(int32_t op, operand xo, operand yo) {
  const char *call = td_op_name(TD_OPS_BINARY, op, 0);
  if (!call) {
    tdc_fail(TD_EINVAL, "binary: unknown op %d", (int)op);
    return NULL;
  }
  const td_tensor *a = xo.t ? xo.t : yo.t;
  const int32_t device = common_device(call, xo.t, yo.t, NULL);
  if (device < 0) return NULL;
  int32_t c, o;
  const td_tensor *other = xo.t && yo.t ? yo.t : NULL;
  const operand &sc = xo.t ? yo : xo;
  if (td_binary_dtypes(op, a, other, sc.s, sc.kind, !xo.t, &c, &o) != TD_OK) return NULL;
  int32_t ndim = a->ndim;
  int64_t shape[TD_MAX_DIMS];
  memcpy(shape, a->shape, sizeof shape);
  if (xo.t && yo.t && !broadcast_with(call, &ndim, shape, xo.t == a ? yo.t : xo.t)) return NULL;
  td_tensor *xc = NULL, *yc = NULL, *out = NULL;
  td_tensor xe, ye;
  bool ok = true;
  if (xo.t) ok = (xc = tdc_contiguous_or_same(call, xo.t, c)) != NULL &&
                 td_tensor_expand(xc, ndim, shape, &xe) == TD_OK;
  if (ok && yo.t) ok = (yc = tdc_contiguous_or_same(call, yo.t, c)) != NULL &&
                       td_tensor_expand(yc, ndim, shape, &ye) == TD_OK;
  if (ok) ok = (out = tdc_empty(call, device, ndim, shape, o)) != NULL;
  if (ok) ok = run_binary(call, op, c, out, xo.t ? &xe : NULL, yo.t ? &ye : NULL, xo, yo);
  td_tensor_release(xc);
  td_tensor_release(yc);
  if (!ok) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

int32_t tdc_into(const char *call, td_tensor *a, td_tensor *r) {
  if (!r) return td_last_status();
  int32_t status = TD_OK;
  bool same = r->ndim == a->ndim;
  for (int32_t d = 0; same && d < a->ndim; d++) same = r->shape[d] == a->shape[d];
  if (!td_tensor_is_writable(a)) {
    status = tdc_fail(TD_EREADONLY, "%s: the tensor is read-only", call);
  } else if (!same) {
    status = tdc_fail(TD_ESHAPE, "%s: output shape doesn't match the broadcast shape", call);
  } else if (td_dtype_is_floating(r->dtype) && !td_dtype_is_floating(a->dtype)) {
    status = tdc_fail(TD_EDTYPE, "%s: result type %s can't be cast to the desired output type %s",
                      call, td_dtype_name(r->dtype), td_dtype_name(a->dtype));
  } else if (r->dtype != TD_BOOL && a->dtype == TD_BOOL) {
    status = tdc_fail(TD_EDTYPE, "%s: result type %s can't be cast to the desired output type %s",
                      call, td_dtype_name(r->dtype), td_dtype_name(a->dtype));
  } else if (!tdc_copy_same_shape(call, a, r)) {
    status = td_last_status();
  }
  td_tensor_release(r);
  return status;
}

TDC_EXPORT td_tensor *td_cuda_binary(int32_t op, const td_tensor *a, const td_tensor *b) {
  if (!a || !b) {
    tdc_fail(TD_EINVAL, "binary: a tensor is NULL");
    return NULL;
  }
  return binary_new(op, operand{a, 0, 0}, operand{b, 0, 0});
}

TDC_EXPORT td_tensor *td_cuda_binary_scalar(int32_t op, const td_tensor *a, double s,
                                            int32_t scalar_kind, int32_t scalar_first) {
  if (!a) {
    tdc_fail(TD_EINVAL, "binary: the tensor is NULL");
    return NULL;
  }
  const operand t{a, 0, 0}, k{NULL, s, scalar_kind};
  return scalar_first ? binary_new(op, k, t) : binary_new(op, t, k);
}

TDC_EXPORT int32_t td_cuda_binary_(int32_t op, td_tensor *a, const td_tensor *b) {
  return tdc_into(op_call(TD_OPS_BINARY, op, 1, "binary_"), a, td_cuda_binary(op, a, b));
}

TDC_EXPORT int32_t td_cuda_binary_scalar_(int32_t op, td_tensor *a, double s, int32_t scalar_kind) {
  return tdc_into(op_call(TD_OPS_BINARY, op, 1, "binary_"), a,
                  td_cuda_binary_scalar(op, a, s, scalar_kind, 0));
}

/* ---- unary ---- */

template <class A> __device__ A float_unary(int32_t op, A a) {
  switch (op) {
    case TD_UNARY_NEG: return -a;
    case TD_UNARY_ABS: return fabs(a);
    case TD_UNARY_EXP: return exp(a);
    case TD_UNARY_LOG: return log(a);
    case TD_UNARY_LOG1P: return log1p(a);
    case TD_UNARY_EXPM1: return expm1(a);
    case TD_UNARY_SQRT: return sqrt(a);
    case TD_UNARY_RSQRT: return (A)1 / sqrt(a);
    case TD_UNARY_SIN: return sin(a);
    case TD_UNARY_COS: return cos(a);
    case TD_UNARY_TANH: return tanh(a);
    case TD_UNARY_SIGMOID: return (A)1 / ((A)1 + exp(-a));
    case TD_UNARY_RELU: return is_nan(a) ? a : (a > 0 ? a : (A)0);
    case TD_UNARY_FLOOR: return floor(a);
    case TD_UNARY_CEIL: return ceil(a);
    case TD_UNARY_ROUND: return rint(a);
    case TD_UNARY_TAN: return tan(a);
    case TD_UNARY_ASIN: return asin(a);
    case TD_UNARY_ACOS: return acos(a);
    case TD_UNARY_ATAN: return atan(a);
    case TD_UNARY_SINH: return sinh(a);
    case TD_UNARY_COSH: return cosh(a);
    case TD_UNARY_ASINH: return asinh(a);
    case TD_UNARY_ACOSH: return acosh(a);
    case TD_UNARY_ATANH: return atanh(a);
    case TD_UNARY_LOG2: return log2(a);
    case TD_UNARY_LOG10: return log10(a);
    case TD_UNARY_EXP2: return exp2(a);
    case TD_UNARY_ERF: return erf(a);
    case TD_UNARY_ERFC: return erfc(a);
    case TD_UNARY_LGAMMA: return lgamma(a);
    case TD_UNARY_TRUNC: return trunc(a);
    case TD_UNARY_FRAC: return a - trunc(a);
    case TD_UNARY_ERFINV: return sizeof(A) == sizeof(float) ? (A)td_erfinvf((float)a) : (A)td_erfinv(a);
    case TD_UNARY_DIGAMMA: return (A)td_digamma((double)a);
    case TD_UNARY_BITWISE_NOT: return (A)NAN; /* floats are refused (td_unary_dtypes) */
    default: return is_nan(a) ? a : (A)((a > 0) - (a < 0)); /* SIGN */
  }
}

template <class A> __device__ A int_unary(int32_t op, A a) {
  switch (op) {
    case TD_UNARY_NEG: return (A)-a;
    case TD_UNARY_ABS: return is_neg(a) ? (A)-a : a;
    case TD_UNARY_RELU: return a > 0 ? a : (A)0;
    case TD_UNARY_SIGN: return (A)((a > 0) - is_neg(a));
    case TD_UNARY_BITWISE_NOT: return (A)~a;
    default: return a; /* floor, ceil, round, trunc of an integer */
  }
}

template <class A> struct unary_arith {
  __device__ static A apply(int32_t op, A a) { return int_unary<A>(op, a); }
};
template <> struct unary_arith<float> {
  __device__ static float apply(int32_t op, float a) { return float_unary<float>(op, a); }
};
template <> struct unary_arith<double> {
  __device__ static double apply(int32_t op, double a) { return float_unary<double>(op, a); }
};
template <> struct unary_arith<bool> {
  __device__ static bool apply(int32_t op, bool a) { return op == TD_UNARY_BITWISE_NOT ? !a : a; }
};

template <class A> __device__ __forceinline__ bool unary_test(int32_t op, A a) {
  if (op == TD_UNARY_LOGICAL_NOT) return a == (A)0;
  if (op == TD_UNARY_ISNAN) return is_nan(a);
  if (op == TD_UNARY_ISFINITE) return a - a == a - a; /* NaN for inf and NaN */
  if (op == TD_UNARY_SIGNBIT) return sign_bit<A>(a);
  return a - a != a - a && !is_nan(a); /* ISINF: inf - inf is NaN */
}

/* test: op is logical_not or a test (its category gives bool). */
template <class T, class O>
__global__ void unary_kernel(int32_t op, bool test, O *out, tdc_layout ol, const T *x,
                             tdc_layout xl, int64_t n) {
  typedef typename tdc_acc<T>::type A;
  TDC_LOOP(i, n) {
    const A a = tdc_cast<A>(x[tdc_offset(xl, i)]);
    if (test) out[tdc_offset(ol, i)] = tdc_cast<O>(unary_test<A>(op, a));
    else out[tdc_offset(ol, i)] = tdc_cast<O>(unary_arith<A>::apply(op, a));
  }
}

TDC_EXPORT td_tensor *td_cuda_unary(int32_t op, const td_tensor *a) {
  const char *call = td_op_name(TD_OPS_UNARY, op, 0);
  if (!call) {
    tdc_fail(TD_EINVAL, "unary: unknown op %d", (int)op);
    return NULL;
  }
  const int32_t device = common_device(call, a, NULL, NULL);
  if (device < 0) return NULL;
  int32_t c, o;
  if (td_unary_dtypes(op, a->dtype, &c, &o) != TD_OK) return NULL;
  td_tensor *x = tdc_contiguous_or_same(call, a, c);
  if (!x) return NULL;
  td_tensor *out = tdc_empty(call, device, a->ndim, a->shape, o);
  const int64_t n = td_tensor_numel(a);
  if (out && n > 0) {
    cudaStream_t s = tdc_stream();
    const unsigned blocks = tdc_blocks(n, TDC_THREADS);
    const tdc_layout ol = tdc_layout_of(out), xl = tdc_layout_of(x);
    const bool test = TD_OPCAT_GIVES_BOOL(td_op_category(TD_OPS_UNARY, op));
    TDC_DISPATCH(c, T, {
      if (o == TD_BOOL)
        unary_kernel<T, bool><<<blocks, TDC_THREADS, 0, s>>>(op, test, (bool *)tdc_ptr(out), ol,
                                                             (const T *)tdc_ptr(x), xl, n);
      else
        unary_kernel<T, T><<<blocks, TDC_THREADS, 0, s>>>(op, test, (T *)tdc_ptr(out), ol,
                                                          (const T *)tdc_ptr(x), xl, n);
    });
    if (!tdc_launched(call)) {
      td_tensor_release(out);
      out = NULL;
    }
  }
  td_tensor_release(x);
  return out;
}

TDC_EXPORT int32_t td_cuda_unary_(int32_t op, td_tensor *a) {
  const char *call = op_call(TD_OPS_UNARY, op, 1, "unary_");
  if (!a) return tdc_fail(TD_EINVAL, "%s: the tensor is NULL", call);
  return tdc_into(call, a, td_cuda_unary(op, a));
}

/* ---- where and masked_fill ---- */

template <class T>
__global__ void where_kernel(T *out, const bool *m, tdc_layout ml, const T *x, tdc_layout xl,
                             const T *y, tdc_layout yl, T xs, T ys, int64_t n) {
  TDC_LOOP(i, n) {
    const bool take = m[tdc_offset(ml, i)];
    out[i] = take ? (x ? x[tdc_offset(xl, i)] : xs) : (y ? y[tdc_offset(yl, i)] : ys);
  }
}

/* The dtype where(mask, x, y) gives: x and y promote as a binary op's operands. */
static int32_t where_dtype(const operand &x, const operand &y) {
  int32_t c = -1, o;
  if (x.t || y.t) {
    const td_tensor *t = x.t ? x.t : y.t;
    const operand &other = x.t ? y : x;
    if (td_binary_dtypes(TD_BINARY_MAXIMUM, t, other.t, other.s, other.kind, !x.t, &c, &o) != TD_OK)
      return -1;
    return c;
  }
  const int32_t k = x.kind > y.kind ? x.kind : y.kind;
  return k == TD_SCALAR_FLOAT ? TD_FLOAT32 : k == TD_SCALAR_INT ? TD_INT64 : TD_BOOL;
}

static td_tensor *where_new(const char *call, const td_tensor *mask, operand xo, operand yo) {
  const int32_t device = common_device(call, mask, xo.t, yo.t);
  if (device < 0) return NULL;
  if (mask->dtype != TD_BOOL) {
    tdc_fail(TD_EDTYPE, "%s: the mask must be bool, got %s", call, td_dtype_name(mask->dtype));
    return NULL;
  }
  const int32_t c = where_dtype(xo, yo);
  if (c < 0) return NULL;
  int32_t ndim = mask->ndim;
  int64_t shape[TD_MAX_DIMS];
  memcpy(shape, mask->shape, sizeof shape);
  if ((xo.t && !broadcast_with(call, &ndim, shape, xo.t)) ||
      (yo.t && !broadcast_with(call, &ndim, shape, yo.t)))
    return NULL;
  td_tensor *xc = NULL, *yc = NULL, *out = NULL;
  td_tensor me, xe, ye;
  bool ok = td_tensor_expand(mask, ndim, shape, &me) == TD_OK;
  if (ok && xo.t) ok = (xc = tdc_contiguous_or_same(call, xo.t, c)) && td_tensor_expand(xc, ndim, shape, &xe) == TD_OK;
  if (ok && yo.t) ok = (yc = tdc_contiguous_or_same(call, yo.t, c)) && td_tensor_expand(yc, ndim, shape, &ye) == TD_OK;
  if (ok) ok = (out = tdc_empty(call, device, ndim, shape, c)) != NULL;
  const int64_t n = ok ? td_tensor_numel(out) : 0;
  if (ok && n > 0) {
    cudaStream_t s = tdc_stream();
    const tdc_layout none = tdc_layout{};
    TDC_DISPATCH(c, T, {
      T xs{}, ys{};
      if (!xo.t) ok = ok && scalar_bits(xo.s, xo.kind, c, &xs);
      if (!yo.t) ok = ok && scalar_bits(yo.s, yo.kind, c, &ys);
      if (ok)
        where_kernel<T><<<tdc_blocks(n, TDC_THREADS), TDC_THREADS, 0, s>>>(
            (T *)tdc_ptr(out), (const bool *)tdc_ptr(&me), tdc_layout_of(&me),
            xo.t ? (const T *)tdc_ptr(&xe) : NULL, xo.t ? tdc_layout_of(&xe) : none,
            yo.t ? (const T *)tdc_ptr(&ye) : NULL, yo.t ? tdc_layout_of(&ye) : none, xs, ys, n);
    });
    ok = ok && tdc_launched(call);
  }
  td_tensor_release(xc);
  td_tensor_release(yc);
  if (!ok) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

TDC_EXPORT td_tensor *td_cuda_where(const td_tensor *mask, const td_tensor *a, double a_scalar,
                                    int32_t a_kind, const td_tensor *b, double b_scalar,
                                    int32_t b_kind) {
  if (!mask) {
    tdc_fail(TD_EINVAL, "where: the mask is NULL");
    return NULL;
  }
  return where_new("where", mask, operand{a, a_scalar, a_kind}, operand{b, b_scalar, b_kind});
}

/* The fill value in a's dtype, converted and checked by the CPU's masked_fill rules. */
static bool fill_value(const char *call, int32_t dtype, double value, double *out, int32_t *kind) {
  td_tensor *zero = td_tensor_full(0, NULL, dtype, 0), *yes = td_tensor_full(0, NULL, TD_BOOL, 1);
  td_tensor *filled = zero && yes ? td_masked_fill(zero, yes, value) : NULL;
  bool ok = filled != NULL;
  if (ok) {
    const int64_t idx = 0;
    ok = td_tensor_read_f64(filled, &idx, out) == TD_OK;
    *kind = td_dtype_is_floating(dtype) ? TD_SCALAR_FLOAT : dtype == TD_BOOL ? TD_SCALAR_BOOL : TD_SCALAR_INT;
  }
  td_tensor_release(zero);
  td_tensor_release(yes);
  td_tensor_release(filled);
  (void)call;
  return ok;
}

TDC_EXPORT td_tensor *td_cuda_masked_fill(const td_tensor *a, const td_tensor *mask, double value) {
  const char *call = "masked_fill";
  if (!a || !mask) {
    tdc_fail(TD_EINVAL, "%s: a tensor is NULL", call);
    return NULL;
  }
  double v;
  int32_t kind;
  if (!fill_value(call, a->dtype, value, &v, &kind)) return NULL;
  td_tensor me;
  if (td_tensor_expand(mask, a->ndim, a->shape, &me) != TD_OK) return NULL;
  td_tensor *r = where_new(call, &me, operand{NULL, v, kind}, operand{a, 0, 0});
  if (r && r->dtype != a->dtype) { /* a scalar of a higher kind promoted: back to a's */
    td_tensor *c = tdc_contiguous_as(call, r, a->dtype);
    td_tensor_release(r);
    r = c;
  }
  return r;
}

TDC_EXPORT int32_t td_cuda_masked_fill_(td_tensor *a, const td_tensor *mask, double value) {
  if (!a) return tdc_fail(TD_EINVAL, "masked_fill_: the tensor is NULL");
  return tdc_into("masked_fill_", a, td_cuda_masked_fill(a, mask, value));
}
