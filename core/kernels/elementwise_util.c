/*
 * elementwise_util.c: the checks and operand preparation every elementwise entry point
 * shares: scalars as 0-dim tensors, torch's checked conversion of fill values, overlap
 * detection for in-place ops, broadcasting and in-place shape/dtype checks.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "dtypes.h"
#include "elementwise.h"

void td_ew_ctx_init(td_ew_ctx *c) {
  memset(c, 0, sizeof *c);
  atomic_init(&c->zero_division, 0);
}

void td_ew_note_zero_division(void *ctx) {
  atomic_store_explicit(&((td_ew_ctx *)ctx)->zero_division, 1, memory_order_relaxed);
}

bool td_ew_check_tensor(const char *call, const td_tensor *t, const char *what) {
  if (!t) {
    td_fail(TD_EINVAL, "%s: the %s is NULL", call, what);
    return false;
  }
  return td_check_dtype(call, t->dtype) && td_check_cpu(call, t, what);
}

bool td_ew_check_kind(const char *call, int32_t kind) {
  if (kind >= TD_SCALAR_BOOL && kind <= TD_SCALAR_FLOAT) return true;
  td_fail(TD_EINVAL, "%s: unknown scalar kind %d (0 bool, 1 int, 2 float)", call, (int)kind);
  return false;
}

/* ---- operands ----------------------------------------------------------------------------- */

void td_ew_arg_bits(td_ew_arg *arg, int32_t dtype, uint64_t bits) {
  arg->owned = NULL;
  arg->scalar_bits = bits;
  td_storage *s = &arg->scalar_storage;
  memset(s, 0, sizeof *s);
  atomic_init(&s->refcount, 1); /* never released: the storage dies with the arg */
  s->data = (char *)&arg->scalar_bits;
  s->nbytes = s->mapped_bytes = (int64_t)sizeof arg->scalar_bits;
  s->kind = TD_STORAGE_HEAP;
  s->device_type = TD_DEVICE_CPU;
  td_tensor *t = &arg->scalar;
  memset(t, 0, sizeof *t); /* 0-dim, offset 0, refcount 0: caller-owned */
  t->storage = s;
  t->dtype = dtype;
  t->itemsize = td_itemsizes[dtype];
  arg->t = t;
}

/* The Lua scalar s of kind as dtype's stored bytes, as torch wraps it. */
static bool scalar_bits(const char *call, double s, int32_t kind, int32_t dtype, uint64_t *bits) {
  int32_t src_dtype = TD_FLOAT64;
  const void *src = &s;
  uint8_t b;
  int64_t i;
  if (kind == TD_SCALAR_BOOL) {
    b = s != 0;
    src_dtype = TD_BOOL, src = &b;
  } else if (kind == TD_SCALAR_INT) {
    /* A Python int beyond int64 is an OverflowError in torch; an INT value with a
     * fraction is truncated (the Lua layer decides the kind). */
    if (!(s >= -0x1p63 && s < 0x1p63)) {
      td_fail(TD_EINVAL, "%s: integer scalar %g is outside the int64 range", call, s);
      return false;
    }
    i = (int64_t)s;
    src_dtype = TD_INT64, src = &i; /* int64 -> narrower integers wraps, like torch */
  }
  *bits = 0;
  char *ptrs[2] = {(char *)bits, (char *)src};
  const int64_t strides[2] = {td_itemsizes[dtype], td_itemsizes[src_dtype]};
  td_cast_loop(dtype, src_dtype)(ptrs, strides, 1, NULL);
  return true;
}

bool td_ew_arg_init(td_ew_arg *arg, const char *call, td_operand x, int32_t dtype) {
  if (x.t) {
    arg->t = td_as_dtype(x.t, dtype, &arg->owned);
    return arg->t != NULL;
  }
  uint64_t bits;
  if (!scalar_bits(call, x.s, x.kind, dtype, &bits)) return false;
  td_ew_arg_bits(arg, dtype, bits);
  return true;
}

void td_ew_arg_done(td_ew_arg *arg) {
  td_tensor_release(arg->owned);
  arg->owned = NULL;
}

/* ---- checked fill values -------------------------------------------------------------- */

static bool overflow(const char *call, double v, int32_t dtype) {
  td_fail(TD_EINVAL, "%s: value %.17g cannot be converted to %s without overflow", call, v,
          td_dtype_name(dtype));
  return false;
}

bool td_ew_fill_value(const char *call, double v, int32_t dtype, bool round_float,
                      uint64_t *bits) {
  *bits = 0;
  if (dtype == TD_BOOL) {
    const uint8_t b = v != 0; /* NaN is true, as in torch */
    memcpy(bits, &b, 1);
    return true;
  }
  if (td_dtype_is_floating(dtype)) {
    /* torch refuses a finite value beyond the largest finite one (65519 into float16,
     * although it would round to 65504); infinities and NaN pass. */
    if (!round_float && isfinite(v) && fabs(v) > td_dtype_max(dtype))
      return overflow(call, v, dtype);
    char *ptrs[2] = {(char *)bits, (char *)&v};
    const int64_t strides[2] = {td_itemsizes[dtype], 8};
    td_cast_loop(dtype, TD_FLOAT64)(ptrs, strides, 1, NULL);
    return true;
  }
  /* Integers, as c10's checked_convert sees a Python number. Lua numbers carry no int
   * or float flag, so integral values are taken as ints: then uint8 also accepts
   * -255..-1 (wrapping, torch's allowance for two's complement), signed types their
   * exact range. A value with a fraction is truncated toward zero and must lie in
   * [min, max + 1). */
  if (!isfinite(v)) return overflow(call, v, dtype);
  const double lo = td_dtype_lowest(dtype), hi = td_dtype_max(dtype) + 1; /* exact */
  const bool integral = v == trunc(v);
  const bool bad = (integral && dtype == TD_UINT8) ? (v <= -256.0 || v >= 256.0)
                                                  : (v < lo || v >= hi);
  if (bad) return overflow(call, v, dtype);
  const int64_t i = (int64_t)v;
  char *ptrs[2] = {(char *)bits, (char *)&i};
  const int64_t strides[2] = {td_itemsizes[dtype], 8};
  td_cast_loop(dtype, TD_INT64)(ptrs, strides, 1, NULL); /* wraps -255..-1 into uint8 */
  return true;
}

/* ---- shapes ------------------------------------------------------------------------------ */

bool td_ew_broadcast(const char *call, td_operand x, td_operand y, int32_t *ndim,
                     int64_t *shape) {
  return td_broadcast_shapes(call, x.t ? x.t->ndim : 0, x.t ? x.t->shape : NULL,
                             y.t ? y.t->ndim : 0, y.t ? y.t->shape : NULL, ndim, shape);
}

bool td_ew_check_writable(const char *call, const td_tensor *a) {
  if (!td_check_writable(call, a)) return false;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->strides[d] == 0 && a->shape[d] > 1) {
      td_fail(TD_EINVAL, "%s: more than one element of the written-to tensor refers to a "
                         "single memory location (dim %d has stride 0); clone it first",
              call, (int)d);
      return false;
    }
  return true;
}

bool td_ew_check_inplace(const char *call, const td_tensor *a, int32_t ndim,
                         const int64_t *shape, int32_t result_dtype) {
  if (!td_ew_check_writable(call, a)) return false;
  bool same = ndim == a->ndim;
  for (int32_t d = 0; same && d < ndim; d++) same = shape[d] == a->shape[d];
  if (!same) {
    char s1[TD_SHAPE_STR], s2[TD_SHAPE_STR];
    td_fail(TD_ESHAPE, "%s: output with shape %s doesn't match the broadcast shape %s", call,
            td_format_shape(s1, sizeof s1, a->ndim, a->shape),
            td_format_shape(s2, sizeof s2, ndim, shape));
    return false;
  }
  if (td_dtype_category(result_dtype) > td_dtype_category(a->dtype)) {
    td_fail(TD_EDTYPE, "%s: result type %s can't be cast to the desired output type %s", call,
            td_dtype_name(result_dtype), td_dtype_name(a->dtype));
    return false;
  }
  return true;
}

void td_ew_expand(const td_tensor *t, int32_t ndim, const int64_t *shape, td_tensor *out) {
  int32_t status = td_tensor_expand(t, ndim, shape, out);
  (void)status; /* the shapes were broadcast before: this cannot fail */
  assert(status == TD_OK);
}

const td_tensor *td_ew_expanded(const td_tensor *t, int32_t ndim, const int64_t *shape,
                                td_tensor *buf) {
  bool same = t->ndim == ndim;
  for (int32_t d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
  if (same) return t;
  td_ew_expand(t, ndim, shape, buf);
  return buf;
}

