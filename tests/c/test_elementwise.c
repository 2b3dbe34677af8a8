/*
 * test_elementwise.c: binary and unary ops, clamp, where and masked_fill against a
 * reference written here: promotion by the rules in words, integer ops in int64 with
 * explicit wrapping, floating ops in double rounded the way the compute type rounds.
 * Every op on every dtype (pair) it accepts, scalars of every kind in both positions,
 * in-place forms and their refusals, layouts (transposed, sliced, expanded, 0-size,
 * size-1, 0-dim, broadcast), NaN / Inf, integer division by zero, overlap, and the same
 * bits for 1 and 4 threads.
 */
#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

/* ---- values --------------------------------------------------------------------------- */

/* An element as an exact integer (bool and integer dtypes) or a double (floating). */
typedef struct val {
  bool is_int;
  int64_t i;
  double f;
} val;

static val VI(int64_t i) { return (val){true, i, 0}; }
static val VF(double f) { return (val){false, 0, f}; }
static bool isfl(int32_t dt) { return dt >= TD_FLOAT16; }
static int cat(int32_t dt) { return dt == TD_BOOL ? 0 : isfl(dt) ? 2 : 1; }
static double as_f(val v) { return v.is_int ? (double)v.i : v.f; }

static char *elem(const td_tensor *t, const int64_t *idx) {
  char *p = td_tensor_data_borrow(t);
  for (int32_t d = 0; d < t->ndim; d++) p += idx[d] * t->strides[d] * t->itemsize;
  return p;
}

static val load(const td_tensor *t, const int64_t *idx) {
  const char *p = elem(t, idx);
  switch (t->dtype) {
    case TD_BOOL: return VI(*(const uint8_t *)p != 0);
    case TD_UINT8: return VI(*(const uint8_t *)p);
    case TD_INT8: return VI(*(const int8_t *)p);
    case TD_INT16: return VI(*(const int16_t *)p);
    case TD_INT32: return VI(*(const int32_t *)p);
    case TD_INT64: return VI(*(const int64_t *)p);
    case TD_FLOAT16: return VF(td_half_to_float(*(const uint16_t *)p));
    case TD_BFLOAT16: return VF(td_bfloat16_to_float(*(const uint16_t *)p));
    case TD_FLOAT32: return VF(*(const float *)p);
    default: return VF(*(const double *)p);
  }
}

static double at1(const td_tensor *t, int64_t i) {
  double v = NAN;
  td_tensor_read_f64(t, &i, &v);
  return v;
}

static double at2(const td_tensor *t, int64_t i, int64_t j) {
  int64_t idx[2] = {i, j};
  double v = NAN;
  td_tensor_read_f64(t, idx, &v);
  return v;
}

static int64_t wrap(int32_t dt, int64_t x) {
  switch (dt) {
    case TD_BOOL: return x != 0;
    case TD_UINT8: return (uint8_t)(uint64_t)x;
    case TD_INT8: return (int8_t)(uint8_t)(uint64_t)x;
    case TD_INT16: return (int16_t)(uint16_t)(uint64_t)x;
    case TD_INT32: return (int32_t)(uint32_t)(uint64_t)x;
    default: return x;
  }
}

/* double -> the float a float16 / bfloat16 / float32 element holds. */
static double round_to(int32_t dt, double f) {
  switch (dt) {
    case TD_FLOAT16: return td_half_to_float(td_float_to_half((float)f));
    case TD_BFLOAT16: return td_bfloat16_to_float(td_float_to_bfloat16((float)f));
    case TD_FLOAT32: return (float)f;
    default: return f;
  }
}

/* The library's cast rules (tested in test_copy.c): integers wrap, floats round; float
 * to integer truncates and saturates (only reached for in-place results of bool ops). */
static val conv(int32_t dt, val v) {
  if (dt == TD_BOOL) return VI(v.is_int ? v.i != 0 : v.f != 0);
  if (!isfl(dt)) {
    if (v.is_int) return VI(wrap(dt, v.i));
    if (v.f != v.f) return VI(0);
    static const double lo[] = {0, 0, -128.0, -32768.0, -0x1p31, -0x1p63};
    static const double hi[] = {1, 255, 127, 32767, 0x1p31 - 1, 0x1p63};
    if (v.f <= lo[dt]) return VI((int64_t)lo[dt]);
    if (v.f >= hi[dt]) return VI(dt == TD_INT64 ? INT64_MAX : (int64_t)hi[dt]);
    return VI((int64_t)v.f);
  }
  return VF(round_to(dt, as_f(v)));
}

static void store(td_tensor *t, const int64_t *idx, val v) {
  char *p = elem(t, idx);
  v = conv(t->dtype, v);
  switch (t->dtype) {
    case TD_BOOL: case TD_UINT8: *(uint8_t *)p = (uint8_t)v.i; break;
    case TD_INT8: *(int8_t *)p = (int8_t)v.i; break;
    case TD_INT16: *(int16_t *)p = (int16_t)v.i; break;
    case TD_INT32: *(int32_t *)p = (int32_t)v.i; break;
    case TD_INT64: *(int64_t *)p = v.i; break;
    case TD_FLOAT16: *(uint16_t *)p = td_float_to_half((float)v.f); break;
    case TD_BFLOAT16: *(uint16_t *)p = td_float_to_bfloat16((float)v.f); break;
    case TD_FLOAT32: *(float *)p = (float)v.f; break;
    default: *(double *)p = v.f; break;
  }
}

static bool same(val a, val b) {
  if (a.is_int != b.is_int) return false;
  if (a.is_int) return a.i == b.i;
  return (isnan(a.f) && isnan(b.f)) || (a.f == b.f && signbit(a.f) == signbit(b.f));
}

/* Within a few units in the last place of dtype (for libm functions, which need not be
 * correctly rounded): NaN and infinities must match exactly. */
static bool near(int32_t dt, val got, val want) {
  if (same(got, want)) return true;
  double g = got.f, w = want.f;
  if (isnan(g) || isnan(w) || isinf(g) || isinf(w)) return false;
  static const int bits[] = {[TD_FLOAT16] = 11, [TD_BFLOAT16] = 8, [TD_FLOAT32] = 24,
                             [TD_FLOAT64] = 53};
  static const double tiny[] = {[TD_FLOAT16] = 0x1p-24, [TD_BFLOAT16] = 0x1p-133,
                                [TD_FLOAT32] = 0x1p-149, [TD_FLOAT64] = 0x1p-1074};
  return fabs(g - w) <= ldexp(fabs(w), 2 - bits[dt]) + 4 * tiny[dt];
}

/* Each dtype's test values: limits, signs, zeros, NaN / Inf for floats. */
static const int64_t vals_u8[] = {0, 1, 2, 3, 7, 100, 200, 255};
static const int64_t vals_i8[] = {0, 1, -1, 2, -2, 3, 7, -7, 127, -128, 100, -100};
static const int64_t vals_i16[] = {0, 1, -1, 2, -3, 7, -7, 32767, -32768, 1000, -300, 255};
static const int64_t vals_i32[] = {0,  1,         -1,        2,     -2,     3,
                                   -7, INT32_MAX, INT32_MIN, 65536, -100000, 46341};
static const int64_t vals_i64[] = {0,  1,         -1,        2,  -2, 3, 7, -7, INT64_MAX,
                                   INT64_MIN, (1LL << 53) + 1, -(1LL << 40)};
static const double vals_f[] = {0,     -0.0, 1,   -1,       0.5,       -2.5,   3,     7,
                                -7,    1e-3, 100.25, 6e4,   NAN,       INFINITY, -INFINITY,
                                1e30,  2.5,  -0.75};

static int nvals(int32_t dt) {
  switch (dt) {
    case TD_BOOL: return 2;
    case TD_UINT8: return sizeof vals_u8 / 8;
    case TD_INT8: return sizeof vals_i8 / 8;
    case TD_INT16: return sizeof vals_i16 / 8;
    case TD_INT32: return sizeof vals_i32 / 8;
    case TD_INT64: return sizeof vals_i64 / 8;
    default: return sizeof vals_f / 8;
  }
}

static val value_at(int32_t dt, int k) {
  k %= nvals(dt);
  switch (dt) {
    case TD_BOOL: return VI(k);
    case TD_UINT8: return VI(vals_u8[k]);
    case TD_INT8: return VI(vals_i8[k]);
    case TD_INT16: return VI(vals_i16[k]);
    case TD_INT32: return VI(vals_i32[k]);
    case TD_INT64: return VI(vals_i64[k]);
    default: return VF(vals_f[k]);
  }
}

/* Steps index through shape like an odometer; false after the last index. */
static bool next_index(int32_t ndim, const int64_t *shape, int64_t *index) {
  for (int32_t d = ndim - 1; d >= 0; d--) {
    if (++index[d] < shape[d]) return true;
    index[d] = 0;
  }
  return false;
}

static int64_t numel(int32_t ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* Fills t (any layout) with dt's values in a pattern set by seed; zero values skipped
 * when nonzero (divisors). */
static void fill_pattern(td_tensor *t, int seed, bool nonzero) {
  if (numel(t->ndim, t->shape) == 0) return;
  int64_t idx[TD_MAX_DIMS] = {0};
  int k = seed;
  do {
    val v = value_at(t->dtype, k);
    while (nonzero && as_f(conv(t->dtype, v)) == 0) v = value_at(t->dtype, ++k);
    store(t, idx, v);
    k += 5;
  } while (next_index(t->ndim, t->shape, idx));
}

static td_tensor *pattern(int32_t dt, int32_t ndim, const int64_t *shape, int seed,
                          bool nonzero) {
  td_tensor *t = td_tensor_empty(ndim, shape, dt);
  fill_pattern(t, seed, nonzero);
  return t;
}

/* dt's test values as a [n, 1] column or a [1, n] row, zeros left out when nonzero. */
static td_tensor *values_along(int32_t dt, int dim, bool nonzero) {
  int64_t n = 0;
  val buf[32];
  for (int k = 0; k < nvals(dt); k++) {
    val v = value_at(dt, k);
    if (!(nonzero && as_f(conv(dt, v)) == 0)) buf[n++] = v;
  }
  int64_t shape[2] = {dim == 0 ? n : 1, dim == 0 ? 1 : n};
  td_tensor *t = td_tensor_empty(2, shape, dt);
  for (int64_t k = 0; k < n; k++) {
    int64_t idx[2] = {dim == 0 ? k : 0, dim == 0 ? 0 : k};
    store(t, idx, buf[k]);
  }
  return t;
}

/* ---- the reference -------------------------------------------------------------------- */

/* torch's checked conversion of a fill value, as observed: integral values as Python
 * ints (uint8 also takes -255..-1, wrapping), others truncated within [min, max + 1);
 * floats refuse finite values past their largest; bool takes value != 0. */
static bool ref_fill(int32_t dt, double v, bool round_float, val *out) {
  if (dt == TD_BOOL) {
    *out = VI(v != 0);
    return true;
  }
  if (isfl(dt)) {
    static const double max[] = {[TD_FLOAT16] = 65504, [TD_BFLOAT16] = 0x1.fep127,
                                 [TD_FLOAT32] = FLT_MAX, [TD_FLOAT64] = DBL_MAX};
    if (!round_float && isfinite(v) && fabs(v) > max[dt]) return false;
    *out = VF(round_to(dt, v));
    return true;
  }
  static const double lo[] = {0, 0, -128.0, -32768.0, -0x1p31, -0x1p63};
  static const double hi[] = {0, 256, 128, 32768, 0x1p31, 0x1p63};
  if (!isfinite(v)) return false;
  if (dt == TD_UINT8 && v == trunc(v)) {
    if (v >= 256 || v <= -256) return false;
    *out = VI(wrap(TD_UINT8, (int64_t)v));
    return true;
  }
  if (v < lo[dt] || v >= hi[dt]) return false;
  *out = VI((int64_t)v);
  return true;
}


/* An operand: a tensor, or (t NULL) a Lua scalar of a td_scalar_kind. */
typedef struct operand {
  const td_tensor *t;
  double s;
  int32_t kind;
} operand;

static operand OT(const td_tensor *t) { return (operand){t, 0, 0}; }
static operand OS(double s, int32_t kind) { return (operand){NULL, s, kind}; }

/* Two-dtype promotion, in words: equal stays; bool gives way; floating beats integer;
 * float16 with bfloat16 meet in float32, else the wider float; uint8 with int8 needs
 * int16, uint8 with a wider signed type is that type; signed types take the wider. */
static int32_t ref_promote(int32_t a, int32_t b) {
  if (a == b) return a;
  if (a == TD_BOOL) return b;
  if (b == TD_BOOL) return a;
  if (isfl(a) != isfl(b)) return isfl(a) ? a : b;
  if (isfl(a)) {
    if (a == TD_FLOAT64 || b == TD_FLOAT64) return TD_FLOAT64;
    return TD_FLOAT32; /* float32 with anything, or float16 with bfloat16 */
  }
  if (a == TD_UINT8 || b == TD_UINT8) {
    int32_t o = a == TD_UINT8 ? b : a;
    return o == TD_INT8 ? TD_INT16 : o;
  }
  return a > b ? a : b;
}

/* The result dtype of operands: the first group (dimensioned tensors, then 0-dim
 * tensors, then scalars as bool / int64 / float32) that reaches the highest category
 * among all operands decides, promoting within itself. */
static int32_t ref_result(int n, const operand *ops) {
  static const int32_t kind_dtype[] = {TD_BOOL, TD_INT64, TD_FLOAT32};
  int32_t dts[4];
  int groups[4], top = 0;
  for (int k = 0; k < n; k++) {
    dts[k] = ops[k].t ? ops[k].t->dtype : kind_dtype[ops[k].kind];
    groups[k] = ops[k].t ? (ops[k].t->ndim > 0 ? 0 : 1) : 2;
    if (cat(dts[k]) > top) top = cat(dts[k]);
  }
  for (int g = 0; g < 3; g++) {
    int32_t r = -1;
    bool reaches = false;
    for (int k = 0; k < n; k++)
      if (groups[k] == g) {
        r = r < 0 ? dts[k] : ref_promote(r, dts[k]);
        reaches |= cat(dts[k]) == top;
      }
    if (reaches) return r;
  }
  return -1;
}

static val operand_at(operand x, int32_t ndim, const int64_t *out_idx) {
  if (!x.t) {
    if (x.kind == TD_SCALAR_BOOL) return VI(x.s != 0);
    if (x.kind == TD_SCALAR_INT) return VI((int64_t)x.s);
    return VF(x.s);
  }
  int64_t idx[TD_MAX_DIMS];
  for (int32_t d = 0; d < x.t->ndim; d++)
    idx[d] = x.t->shape[d] == 1 ? 0 : out_idx[ndim - x.t->ndim + d];
  return load(x.t, idx);
}

static bool ref_broadcast(int n, const operand *ops, int32_t *ndim, int64_t *shape) {
  *ndim = 0;
  for (int k = 0; k < n; k++)
    if (ops[k].t && ops[k].t->ndim > *ndim) *ndim = ops[k].t->ndim;
  for (int32_t d = 0; d < *ndim; d++) shape[d] = 1;
  for (int k = 0; k < n; k++) {
    if (!ops[k].t) continue;
    for (int32_t d = 0; d < ops[k].t->ndim; d++) {
      int64_t s = ops[k].t->shape[d], *o = &shape[*ndim - ops[k].t->ndim + d];
      if (s == 1) continue;
      if (*o != 1 && *o != s) return false;
      *o = s;
    }
  }
  return true;
}

enum { NBIN = TD_BINARY_LOGICAL_XOR + 1, NUN = TD_UNARY_COUNT };
static const char *const bin_names[NBIN] = {
    "add",     "sub",     "mul", "div", "floor_divide", "remainder",   "pow",
    "minimum", "maximum", "eq",  "ne",  "lt",           "le",          "gt",
    "ge",      "logical_and",    "logical_or",          "logical_xor"};

static bool is_pred(int op) { return op >= TD_BINARY_EQ; }

/* Expected for binary op: the compute dtype, or -1 with the error text expected. */
static int32_t ref_compute(int op, operand x, operand y, int32_t promoted, const char **err) {
  bool bx = x.t ? x.t->dtype == TD_BOOL : x.kind == TD_SCALAR_BOOL;
  bool by = y.t ? y.t->dtype == TD_BOOL : y.kind == TD_SCALAR_BOOL;
  if (op == TD_BINARY_SUB && (bx || by)) {
    *err = bx && by ? "subtraction with two bool tensors" : "subtraction with a bool tensor";
    return -1;
  }
  if (op == TD_BINARY_DIV) return isfl(promoted) ? promoted : TD_FLOAT32;
  if ((op == TD_BINARY_FLOOR_DIVIDE || op == TD_BINARY_REMAINDER || op == TD_BINARY_POW) &&
      promoted == TD_BOOL && !(op == TD_BINARY_POW && !y.t)) {
    *err = "not supported for bool";
    return -1;
  }
  if (op == TD_BINARY_POW && !y.t && promoted != TD_BOOL) {
    if (y.kind == TD_SCALAR_INT && y.s <= -1 && !isfl(promoted)) {
      *err = "integers to negative integer powers are not allowed";
      return -1;
    }
    val unused; /* the exponent must fit the dtype (torch's checked conversion) */
    double e = y.kind == TD_SCALAR_INT ? trunc(y.s) : y.kind == TD_SCALAR_BOOL ? y.s != 0 : y.s;
    if (!ref_fill(promoted, e, false, &unused)) {
      *err = "without overflow";
      return -1;
    }
  }
  return promoted;
}

/* float16 / bfloat16 mul, div, floor_divide keep a trailing scalar in float (torch). */
static bool float_scalar(int op, operand y, int32_t c) {
  return !y.t && (c == TD_FLOAT16 || c == TD_BFLOAT16) &&
         (op == TD_BINARY_MUL || op == TD_BINARY_DIV || op == TD_BINARY_FLOOR_DIVIDE);
}

/* The rounding of compute type c (float for the half types and float32). */
static double R(int32_t c, double v) { return c == TD_FLOAT64 ? v : (double)(float)v; }

static int64_t ipow(int64_t x, int64_t y, int32_t c) {
  if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
  uint64_t r = 1, b = (uint64_t)x;
  for (uint64_t e = (uint64_t)y; e; e >>= 1) {
    if (e & 1) r *= b;
    b *= b;
  }
  return wrap(c, (int64_t)r);
}

/* op on x, y (already in compute dtype c); *approx when libm may differ by an ulp,
 * *zdiv when an integer divisor is 0. */
static val ref_binary(int op, int32_t c, val x, val y, bool scalar_exponent, bool *approx,
                      bool *zdiv) {
  if (op >= TD_BINARY_EQ && op <= TD_BINARY_GE) {
    bool r;
    if (!isfl(c)) {
      int64_t a = x.i, b = y.i;
      r = op == TD_BINARY_EQ ? a == b : op == TD_BINARY_NE ? a != b : op == TD_BINARY_LT ? a < b
        : op == TD_BINARY_LE ? a <= b : op == TD_BINARY_GT ? a > b : a >= b;
    } else {
      double a = x.f, b = y.f;
      r = op == TD_BINARY_EQ ? a == b : op == TD_BINARY_NE ? a != b : op == TD_BINARY_LT ? a < b
        : op == TD_BINARY_LE ? a <= b : op == TD_BINARY_GT ? a > b : a >= b;
    }
    return VI(r);
  }
  if (op >= TD_BINARY_LOGICAL_AND) { /* nonzero in the promoted dtype */
    bool a = x.is_int ? x.i != 0 : x.f != 0, b = y.is_int ? y.i != 0 : y.f != 0;
    return VI(op == TD_BINARY_LOGICAL_AND  ? (a && b)
              : op == TD_BINARY_LOGICAL_OR ? (a || b)
                                           : a != b);
  }
  if (!isfl(c)) {
    int64_t a = x.i, b = y.i;
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
      case TD_BINARY_ADD: return VI(wrap(c, (int64_t)(ua + ub)));
      case TD_BINARY_SUB: return VI(wrap(c, (int64_t)(ua - ub)));
      case TD_BINARY_MUL: return VI(wrap(c, (int64_t)(ua * ub)));
      case TD_BINARY_MINIMUM: return VI(b < a ? b : a);
      case TD_BINARY_MAXIMUM: return VI(a < b ? b : a);
      case TD_BINARY_POW:
        if (c == TD_BOOL) return VI(b ? a : 1); /* bool ** bool scalar: copy or ones */
        return VI(ipow(a, b, c));
      case TD_BINARY_FLOOR_DIVIDE:
      case TD_BINARY_REMAINDER: {
        if (b == 0) {
          *zdiv = true;
          return VI(0);
        }
        if (b == -1) return VI(op == TD_BINARY_REMAINDER ? 0 : wrap(c, (int64_t)(0 - ua)));
        int64_t q = a / b, r = a - q * b; /* C truncates; Python floors */
        if (r != 0 && ((r < 0) != (b < 0))) {
          q -= 1;
          r += b;
        }
        return VI(op == TD_BINARY_REMAINDER ? r : q);
      }
    }
    return VI(0);
  }
  double a = x.f, b = y.f, r = 0;
  switch (op) {
    case TD_BINARY_ADD: r = a + b; break;
    case TD_BINARY_SUB: r = a - b; break;
    case TD_BINARY_MUL: r = a * b; break;
    case TD_BINARY_DIV: r = a / b; break;
    case TD_BINARY_MINIMUM: r = isnan(a) || isnan(b) ? NAN : b < a ? b : a; break;
    case TD_BINARY_MAXIMUM: r = isnan(a) || isnan(b) ? NAN : a < b ? b : a; break;
    case TD_BINARY_REMAINDER: { /* torch: fmod, then moved to the divisor's sign */
      double m = fmod(a, b);
      r = m != 0 && ((b < 0) != (m < 0)) ? R(c, m + b) : m;
      break;
    }
    case TD_BINARY_FLOOR_DIVIDE: { /* torch's div_floor_floating, step by step */
      if (b == 0) {
        r = a / b;
        break;
      }
      double m = fmod(a, b), d = R(c, R(c, a - m) / b);
      if (m != 0 && ((b < 0) != (m < 0))) d = R(c, d - 1);
      if (d == 0) {
        r = copysign(0, a / b);
      } else {
        double fl = floor(d);
        if (R(c, d - fl) > 0.5) fl = R(c, fl + 1);
        r = fl;
      }
      break;
    }
    case TD_BINARY_POW:
      if (scalar_exponent && c != TD_FLOAT16 &&
          (b == 2 || b == 3 || b == 0.5 || b == -0.5 || b == -1 || b == -2)) {
        /* torch's rewrites for a scalar exponent */
        if (b == 2) r = R(c, a * a);
        else if (b == 3) r = R(c, R(c, a * a) * a);
        else if (b == 0.5) r = R(c, sqrt(a));
        else if (b == -0.5) r = R(c, 1 / R(c, sqrt(a)));
        else if (b == -1) r = R(c, 1 / a);
        else r = R(c, 1 / R(c, a * a));
      } else {
        r = pow(a, b);
        *approx = c != TD_FLOAT64;
      }
      break;
  }
  return VF(round_to(c, R(c, r)));
}

/* ---- the binary driver ----------------------------------------------------------------- */

static int64_t binary_bad; /* mismatching elements over all cases (one CHECK at the end) */
static int64_t cases_run, elements_checked; /* reported at the end */

/* x op y by the library (new tensor, or in place into a copy of x when inplace) against
 * the reference. */
static void check_binary_case(const char *label, int op, operand x, operand y, bool inplace) {
  operand ops[2] = {x, y};
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS];
  const char *err = NULL;
  bool shape_ok = ref_broadcast(2, ops, &ndim, shape);
  int32_t p = ref_result(2, ops), c = ref_compute(op, x, y, p, &err);
  int32_t o = c < 0 ? -1 : is_pred(op) ? TD_BOOL : c;
  /* The in-place target: a copy of x, or x itself when it is a caller-owned view (a
   * transposed or sliced target then keeps its strides). */
  td_tensor *a = NULL, *owned = NULL;
  if (inplace) {
    a = x.t->refcount > 0 ? (owned = td_tensor_clone(x.t)) : (td_tensor *)x.t;
    x.t = a;
    if (shape_ok) { /* a may not grow */
      bool same_shape = ndim == a->ndim;
      for (int32_t d = 0; same_shape && d < ndim; d++) same_shape = shape[d] == a->shape[d];
      if (!same_shape && !err) err = "doesn't match the broadcast shape";
      if (!same_shape) shape_ok = false;
    }
    if (!err && c >= 0 && cat(o) > cat(a->dtype)) err = "can't be cast to the desired output";
  }
  if (!shape_ok && !err) err = "do not broadcast";
  /* Expected values, and whether an integer division by zero makes it an error. */
  int64_t n = shape_ok ? numel(ndim, shape) : 0;
  val *want = calloc((size_t)(n ? n : 1), sizeof *want);
  bool *approx = calloc((size_t)(n ? n : 1), sizeof *approx), zdiv = false;
  if (!err && n) {
    int64_t idx[TD_MAX_DIMS] = {0}, k = 0;
    do {
      val vx = conv(c, operand_at(x, ndim, idx)), vy = conv(c, operand_at(y, ndim, idx));
      if (float_scalar(op, y, c)) vy = VF((float)as_f(operand_at(y, ndim, idx)));
      want[k] = ref_binary(op, c, vx, vy, !y.t, &approx[k], &zdiv);
      if (inplace) want[k] = conv(a->dtype, want[k]);
      k++;
    } while (next_index(ndim, shape, idx));
  }
  if (!err && zdiv) err = "integer division by zero";
  cases_run++;
  elements_checked += n;
  td_tensor *before = inplace ? td_tensor_clone(a) : NULL, *r = NULL;
  int32_t status = TD_OK;
  if (inplace)
    status = y.t ? td_binary_(op, a, y.t) : td_binary_scalar_(op, a, y.s, y.kind);
  else if (x.t && y.t)
    r = td_binary(op, x.t, y.t);
  else
    r = x.t ? td_binary_scalar(op, x.t, y.s, y.kind, 0) : td_binary_scalar(op, y.t, x.s, x.kind, 1);
  const td_tensor *got = inplace ? a : r;
  if (err) {
    bool refused = inplace ? status < 0 : r == NULL;
    bool msg = strstr(td_last_error(), err) && strstr(td_last_error(), bin_names[op]);
    bool untouched = true;
    if (inplace && numel(a->ndim, a->shape)) { /* a refused in-place op leaves a as it was */
      int64_t idx[TD_MAX_DIMS] = {0};
      do untouched &= same(load(a, idx), load(before, idx));
      while (next_index(a->ndim, a->shape, idx));
    }
    if (!refused || !msg || !untouched) {
      fprintf(stderr, "%s %s: expected error '%s', got status %d '%s'\n", label, bin_names[op],
              err, (int)status, td_last_error());
      binary_bad++;
    }
  } else if (!got || (!inplace && (r->dtype != o || r->ndim != ndim)) ||
             (inplace && status != TD_OK)) {
    fprintf(stderr, "%s %s: failed or wrong dtype (%s, want %s): %s\n", label, bin_names[op],
            got && !inplace ? td_dtype_name(r->dtype) : "-", td_dtype_name(o), td_last_error());
    binary_bad++;
  } else if (n) {
    int64_t idx[TD_MAX_DIMS] = {0}, k = 0, bad = 0;
    int32_t dt = got->dtype;
    do {
      val g = load(got, idx);
      bool ok = approx[k] ? near(dt, g, want[k]) : same(g, want[k]);
      if (!ok && bad++ == 0)
        fprintf(stderr, "%s %s %s: element %lld: got %.17g want %.17g\n", label, bin_names[op],
                td_dtype_name(dt), (long long)k, as_f(g), as_f(want[k]));
      k++;
    } while (next_index(ndim, shape, idx));
    binary_bad += bad;
  }
  free(want);
  free(approx);
  td_tensor_release(r);
  td_tensor_release(owned);
  td_tensor_release(before);
}

static bool int_division(int op, int32_t c) {
  return (op == TD_BINARY_FLOOR_DIVIDE || op == TD_BINARY_REMAINDER) && !isfl(c);
}

/* ---- binary: every op on every dtype pair --------------------------------------------- */

/* x's values down a column, y's along a row: the broadcast [nx, ny] result holds every
 * pair of values. Divisors of integer floor_divide / remainder leave out 0 (tested on
 * its own below). In place, x is first expanded to the full [nx, ny]. */
static void test_binary_pairs(void) {
  for (int op = 0; op < NBIN; op++)
    for (int32_t da = 0; da < TD_NUM_DTYPES; da++)
      for (int32_t db = 0; db < TD_NUM_DTYPES; db++) {
        const int32_t c = op == TD_BINARY_DIV && !isfl(ref_promote(da, db)) ? TD_FLOAT32
                                                                        : ref_promote(da, db);
        td_tensor *x = values_along(da, 0, false), *y = values_along(db, 1, int_division(op, c));
        check_binary_case("pairs", op, OT(x), OT(y), false);
        td_tensor xe, *full = NULL;
        const int64_t shape[2] = {x->shape[0], y->shape[1]};
        td_tensor_expand(x, 2, shape, &xe);
        full = td_tensor_clone(&xe);
        check_binary_case("pairs in place", op, OT(full), OT(y), true);
        td_tensor_release(full);
        td_tensor_release(x);
        td_tensor_release(y);
      }
  CHECK_EQ_I(binary_bad, 0);
  binary_bad = 0;
}

/* Every op, every dtype, scalars of each kind on either side and in place. */
static void test_binary_scalars(void) {
  static const struct {
    int32_t kind;
    double s;
  } scalars[] = {
      {TD_SCALAR_BOOL, 0},    {TD_SCALAR_BOOL, 1},     {TD_SCALAR_INT, 0},
      {TD_SCALAR_INT, 1},     {TD_SCALAR_INT, -1},     {TD_SCALAR_INT, 2},
      {TD_SCALAR_INT, 3},     {TD_SCALAR_INT, -7},     {TD_SCALAR_INT, 300},
      {TD_SCALAR_INT, -129},  {TD_SCALAR_INT, 256},    {TD_SCALAR_INT, 1e10},
      {TD_SCALAR_FLOAT, 0.5}, {TD_SCALAR_FLOAT, -2.5}, {TD_SCALAR_FLOAT, 0},
      {TD_SCALAR_FLOAT, NAN}, {TD_SCALAR_FLOAT, INFINITY}, {TD_SCALAR_FLOAT, 1e-3},
      {TD_SCALAR_FLOAT, 2},   {TD_SCALAR_FLOAT, 3},    {TD_SCALAR_FLOAT, -0.5},
      {TD_SCALAR_FLOAT, -1},  {TD_SCALAR_FLOAT, -2},   {TD_SCALAR_FLOAT, 0.1},
  };
  for (int op = 0; op < NBIN; op++)
    for (int32_t da = 0; da < TD_NUM_DTYPES; da++)
      for (size_t k = 0; k < sizeof scalars / sizeof scalars[0]; k++) {
        operand s = OS(scalars[k].s, scalars[k].kind);
        td_tensor *x = values_along(da, 0, false);
        check_binary_case("tensor op scalar", op, OT(x), s, false);
        check_binary_case("tensor op_ scalar", op, OT(x), s, true);
        td_tensor *xd =
            values_along(da, 0, op == TD_BINARY_FLOOR_DIVIDE || op == TD_BINARY_REMAINDER);
        check_binary_case("scalar op tensor", op, s, OT(xd), false);
        td_tensor_release(x);
        td_tensor_release(xd);
      }
  CHECK_EQ_I(binary_bad, 0);
  binary_bad = 0;
}

/* Layouts the iterator must get right, on a few dtype pairs and every op. */
static void test_binary_layouts(void) {
  static const int32_t pairs[][2] = {{TD_FLOAT32, TD_FLOAT32}, {TD_INT32, TD_INT64},
                                     {TD_FLOAT16, TD_FLOAT32}, {TD_UINT8, TD_INT8},
                                     {TD_BOOL, TD_BOOL},       {TD_INT64, TD_FLOAT64},
                                     {TD_BFLOAT16, TD_INT16},  {TD_FLOAT64, TD_FLOAT64}};
  const int64_t s34[2] = {3, 4}, s43[2] = {4, 3}, s38[2] = {3, 8}, s14[2] = {1, 4},
                s31[2] = {3, 1}, s4[1] = {4}, s04[2] = {0, 4}, s30[2] = {3, 0},
                s11[2] = {1, 1}, s1[1] = {1}, s0[1] = {0}, s234[3] = {2, 3, 4};
  for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++)
    for (int op = 0; op < NBIN; op++) {
      const int32_t da = pairs[pi][0], db = pairs[pi][1];
      const int32_t p = ref_promote(da, db);
      const bool nz = int_division(op, op == TD_BINARY_DIV && !isfl(p) ? TD_FLOAT32 : p);
      td_tensor *a = pattern(da, 2, s34, 1, false), *b = pattern(db, 2, s34, 4, nz);
      check_binary_case("contiguous", op, OT(a), OT(b), false);
      check_binary_case("contiguous in place", op, OT(a), OT(b), true);
      /* transposed: [4, 3] viewed as [3, 4] */
      td_tensor *at = pattern(da, 2, s43, 2, false), *bt = pattern(db, 2, s43, 3, nz), atv, btv;
      td_tensor_transpose(at, 0, 1, &atv);
      td_tensor_transpose(bt, 0, 1, &btv);
      check_binary_case("transposed a", op, OT(&atv), OT(b), false);
      check_binary_case("transposed both", op, OT(&atv), OT(&btv), false);
      check_binary_case("transposed b in place", op, OT(a), OT(&btv), true);
      /* sliced (step 2) and expanded (stride 0) */
      td_tensor *as = pattern(da, 2, s38, 3, false), asv;
      td_tensor_slice(as, 1, 1, 8, 2, &asv);
      td_tensor *brow = pattern(db, 2, s14, 5, nz), bex;
      td_tensor_expand(brow, 2, s34, &bex);
      check_binary_case("sliced, expanded", op, OT(&asv), OT(&bex), false);
      check_binary_case("expanded, sliced", op, OT(&bex), OT(&asv), false);
      check_binary_case("sliced in place", op, OT(&asv), OT(&bex), true);
      /* broadcasting pairs */
      td_tensor *col = pattern(da, 2, s31, 6, false), *v4 = pattern(db, 1, s4, 7, nz);
      check_binary_case("[3,1] x [4]", op, OT(col), OT(v4), false);
      check_binary_case("[4] x [3,1]", op, OT(v4), OT(col), false);
      check_binary_case("[3,4] x [4] in place", op, OT(a), OT(v4), true);
      check_binary_case("[4] x [3,4] in place (a would grow)", op, OT(v4), OT(b), true);
      td_tensor *c234 = pattern(db, 3, s234, 8, nz);
      check_binary_case("[3,1] x [2,3,4]", op, OT(col), OT(c234), false);
      /* 0-dim tensors on either side: promotion changes */
      td_tensor *z0 = pattern(db, 0, NULL, 9, nz), *za = pattern(da, 0, NULL, 10, false);
      check_binary_case("[3,4] x 0-dim", op, OT(a), OT(z0), false);
      check_binary_case("0-dim x [3,4]", op, OT(za), OT(b), false);
      check_binary_case("0-dim x 0-dim", op, OT(za), OT(z0), false);
      check_binary_case("[3,4] x 0-dim in place", op, OT(a), OT(z0), true);
      /* 0-size and size-1 dims */
      td_tensor *e04 = pattern(da, 2, s04, 0, false), *e30 = pattern(da, 2, s30, 0, false);
      td_tensor *e0 = pattern(db, 1, s0, 0, nz), *o11 = pattern(da, 2, s11, 3, false);
      td_tensor *o1 = pattern(db, 1, s1, 2, nz);
      check_binary_case("[0,4] x [1,4]", op, OT(e04), OT(brow), false);
      check_binary_case("[0,4] x [4] in place", op, OT(e04), OT(v4), true);
      check_binary_case("[3,0] x [3,1]", op, OT(e30), OT(col), false);
      check_binary_case("[3,0] x [0]", op, OT(e30), OT(e0), false);
      check_binary_case("[1,1] x [1]", op, OT(o11), OT(o1), false);
      check_binary_case("[3,4] x [0] (no broadcast)", op, OT(a), OT(e0), false);
      check_binary_case("[3,1] x [3,4]", op, OT(col), OT(b), false);
      check_binary_case("transposed a in place", op, OT(&atv), OT(b), true); /* last use */
      td_tensor *all[] = {a, b, at, bt, as, brow, col, v4, c234, z0, za, e04, e30, e0, o11, o1};
      for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) td_tensor_release(all[k]);
    }
  CHECK_EQ_I(binary_bad, 0);
  binary_bad = 0;
}

/* Large transposed operands go through tiles (elementwise_util.c): ragged edges, more
 * than two dims, in place into a transposed target, and unary ops. */
static void test_large_layouts(void) {
  const int64_t s2[2] = {700, 300}, s3[3] = {3, 150, 200};
  const int32_t perm3[3] = {0, 2, 1};
  static const int ops[] = {TD_BINARY_ADD, TD_BINARY_SUB, TD_BINARY_MAXIMUM, TD_BINARY_LT,
                            TD_BINARY_FLOOR_DIVIDE};
  static const int32_t dts[] = {TD_FLOAT32, TD_INT16, TD_FLOAT64, TD_FLOAT16};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      const bool nz = ops[o] == TD_BINARY_FLOOR_DIVIDE;
      td_tensor *a = pattern(dts[d], 2, s2, 1, false), at;
      td_tensor_transpose(a, 0, 1, &at); /* [300, 700] */
      td_tensor *b = td_tensor_clone(&at);
      fill_pattern(b, 3, nz);
      td_tensor *a3 = pattern(dts[d], 3, s3, 2, false), a3p;
      td_tensor_permute(a3, perm3, &a3p); /* [3, 200, 150] */
      td_tensor *b3 = td_tensor_clone(&a3p);
      fill_pattern(b3, 4, nz);
      check_binary_case("large transposed a", ops[o], OT(&at), OT(b), false);
      check_binary_case("large transposed b", ops[o], OT(b), OT(&at), false);
      check_binary_case("large permuted 3-d", ops[o], OT(&a3p), OT(b3), false);
      check_binary_case("large transposed target", ops[o], OT(&at), OT(b), true);
      td_tensor *all[] = {a, b, a3, b3};
      for (size_t k = 0; k < 4; k++) td_tensor_release(all[k]);
    }
  CHECK_EQ_I(binary_bad, 0);
  binary_bad = 0;
}

/* The rules spelled out on single values, so that a wrong reference cannot hide a bug. */
static double bin1(int op, int32_t dt, double x, double y) {
  const int64_t one = 1, i0 = 0;
  td_tensor *a = td_tensor_full(1, &one, dt, x), *b = td_tensor_full(1, &one, dt, y);
  td_tensor *r = td_binary(op, a, b);
  double v = NAN;
  if (r) td_tensor_read_f64(r, &i0, &v);
  else v = -12345;
  td_tensor_release(a);
  td_tensor_release(b);
  td_tensor_release(r);
  return v;
}

static bool same_f(double a, double b) {
  return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

static void test_binary_rules(void) {
  static const struct {
    int op;
    int32_t dt;
    double x, y, want;
  } cases[] = {
      {TD_BINARY_FLOOR_DIVIDE, TD_INT32, 7, -2, -4},
      {TD_BINARY_FLOOR_DIVIDE, TD_INT32, -7, 2, -4},
      {TD_BINARY_FLOOR_DIVIDE, TD_INT8, -128, -1, -128},
      {TD_BINARY_REMAINDER, TD_INT8, -128, -1, 0},
      {TD_BINARY_REMAINDER, TD_INT32, -7, 3, 2},
      {TD_BINARY_REMAINDER, TD_INT32, 7, -3, -2},
      {TD_BINARY_REMAINDER, TD_FLOAT32, 5, -3, -1},
      {TD_BINARY_REMAINDER, TD_FLOAT32, -6, 3, -0.0},
      {TD_BINARY_REMAINDER, TD_FLOAT32, -5, INFINITY, INFINITY},
      {TD_BINARY_FLOOR_DIVIDE, TD_FLOAT32, -5, INFINITY, -1},
      {TD_BINARY_FLOOR_DIVIDE, TD_FLOAT32, 5, INFINITY, 0},
      {TD_BINARY_FLOOR_DIVIDE, TD_FLOAT32, 1, 0, INFINITY},
      {TD_BINARY_FLOOR_DIVIDE, TD_FLOAT64, -7.5, 2, -4},
      {TD_BINARY_DIV, TD_INT64, 7, 2, 3.5},
      {TD_BINARY_DIV, TD_INT32, 1, 0, INFINITY},
      {TD_BINARY_DIV, TD_INT32, 0, 0, NAN},
      {TD_BINARY_POW, TD_INT64, 7, -1, 0},
      {TD_BINARY_POW, TD_INT64, -1, -3, -1},
      {TD_BINARY_POW, TD_INT64, 1, -5, 1},
      {TD_BINARY_POW, TD_INT8, 3, 5, -13},
      {TD_BINARY_POW, TD_INT8, 2, 10, 0},
      {TD_BINARY_POW, TD_FLOAT32, NAN, 0, 1},
      {TD_BINARY_MINIMUM, TD_FLOAT32, 1, NAN, NAN},
      {TD_BINARY_MAXIMUM, TD_FLOAT32, -0.0, 0, -0.0},
      {TD_BINARY_MINIMUM, TD_FLOAT32, 0, -0.0, 0},
      {TD_BINARY_EQ, TD_FLOAT32, NAN, NAN, 0},
      {TD_BINARY_NE, TD_FLOAT32, NAN, NAN, 1},
      {TD_BINARY_LOGICAL_AND, TD_FLOAT32, NAN, 1, 1},
      {TD_BINARY_ADD, TD_BOOL, 1, 1, 1},
      {TD_BINARY_ADD, TD_INT8, 100, 100, -56},
      {TD_BINARY_SUB, TD_UINT8, 0, 1, 255},
      {TD_BINARY_MUL, TD_INT64, 0x1p62, 4, 0},
      {TD_BINARY_ADD, TD_FLOAT16, 2048, 1, 2048},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double got = bin1(cases[i].op, cases[i].dt, cases[i].x, cases[i].y);
    if (!same_f(got, cases[i].want))
      fprintf(stderr, "%s(%g, %g) in %s: got %g want %g\n", bin_names[cases[i].op], cases[i].x,
              cases[i].y, td_dtype_name(cases[i].dt), got, cases[i].want);
    CHECK(same_f(got, cases[i].want));
  }
  /* Wrapped scalars: an int8 tensor against 300 compares with 300 - 256 = 44 (torch). */
  const int64_t two = 2, i0 = 0, i1 = 1;
  td_tensor *t = td_tensor_empty(1, &two, TD_INT8);
  td_tensor_write_f64(t, &i0, 100);
  td_tensor_write_f64(t, &i1, -100);
  td_tensor *r = td_binary_scalar(TD_BINARY_LT, t, 300, TD_SCALAR_INT, 0);
  double v0 = -1, v1 = -1;
  td_tensor_read_f64(r, &i0, &v0);
  td_tensor_read_f64(r, &i1, &v1);
  CHECK(v0 == 0 && v1 == 1);
  td_tensor_release(r);
  /* pow with a scalar exponent: torch's rewrites at -0 and -inf */
  td_tensor *f = td_tensor_empty(1, &two, TD_FLOAT32);
  td_tensor_write_f64(f, &i0, -0.0);
  td_tensor_write_f64(f, &i1, -INFINITY);
  r = td_binary_scalar(TD_BINARY_POW, f, 0.5, TD_SCALAR_FLOAT, 0);
  td_tensor_read_f64(r, &i0, &v0);
  td_tensor_read_f64(r, &i1, &v1);
  CHECK(v0 == 0 && signbit(v0) && isnan(v1)); /* sqrt(-0) = -0, sqrt(-inf) = NaN */
  td_tensor_release(r);
  td_tensor *e = td_tensor_full(0, NULL, TD_FLOAT32, 0.5); /* a tensor exponent: pow() */
  r = td_binary(TD_BINARY_POW, f, e);
  td_tensor_read_f64(r, &i0, &v0);
  td_tensor_read_f64(r, &i1, &v1);
  CHECK(v0 == 0 && !signbit(v0) && v1 == INFINITY);
  td_tensor_release(r);
  td_tensor_release(e);
  td_tensor_release(f);
  td_tensor_release(t);
  /* torch's answers for the rest of its scalar rules */
  td_tensor *u8 = td_tensor_full(1, &two, TD_UINT8, 3); /* 256 is 0 in uint8: false */
  r = td_binary_scalar(TD_BINARY_LOGICAL_AND, u8, 256, TD_SCALAR_INT, 0);
  CHECK(r && r->dtype == TD_BOOL && at1(r, 0) == 0);
  td_tensor_release(r);
  CHECK(td_binary_scalar(TD_BINARY_POW, u8, 300, TD_SCALAR_INT, 0) == NULL);
  CHECK_ERROR("pow: value 300 cannot be converted to uint8 without overflow");
  td_tensor *h = td_tensor_full(1, &two, TD_FLOAT16, 3);
  CHECK(td_binary_scalar(TD_BINARY_POW, h, 1e10, TD_SCALAR_INT, 0) == NULL);
  r = td_binary_scalar(TD_BINARY_MUL, h, 0.1, TD_SCALAR_FLOAT, 0); /* 3 * 0.1f, then rounded */
  CHECK(r && at1(r, 0) == 0.300048828125);
  td_tensor_release(r);
  r = td_binary_scalar(TD_BINARY_MUL, h, 0.1, TD_SCALAR_FLOAT, 1); /* scalar first: rounded */
  CHECK(r && at1(r, 0) == 0.2998046875);
  td_tensor_release(r);
  td_tensor_write_f64(h, &i0, -0.0);
  r = td_binary_scalar(TD_BINARY_POW, h, 0.5, TD_SCALAR_FLOAT, 0); /* float16: pow(), +0 */
  CHECK(r && at1(r, 0) == 0 && !signbit(at1(r, 0)));
  td_tensor_release(r);
  td_tensor *bf = td_tensor_full(1, &two, TD_BFLOAT16, -0.0); /* bfloat16: sqrt, -0 */
  r = td_binary_scalar(TD_BINARY_POW, bf, 0.5, TD_SCALAR_FLOAT, 0);
  CHECK(r && at1(r, 0) == 0 && signbit(at1(r, 0)));
  td_tensor_release(r);
  td_tensor *bo = td_tensor_full(1, &two, TD_BOOL, 0); /* bool ** False: all true */
  r = td_binary_scalar(TD_BINARY_POW, bo, 0, TD_SCALAR_BOOL, 0);
  CHECK(r && r->dtype == TD_BOOL && at1(r, 0) == 1 && at1(r, 1) == 1);
  td_tensor_release(r);
  CHECK(td_binary(TD_BINARY_POW, bo, bo) == NULL);
  td_tensor_release(bo);
  td_tensor_release(bf);
  td_tensor_release(h);
  td_tensor_release(u8);
}

/* Integer division by zero: an error, never a crash; in place, a is left unchanged. */
static void test_division_by_zero(void) {
  const int64_t n = 4;
  for (int32_t dt = TD_UINT8; dt <= TD_INT64; dt++)
    for (int op = TD_BINARY_FLOOR_DIVIDE; op <= TD_BINARY_REMAINDER; op++) {
      td_tensor *a = td_tensor_full(1, &n, dt, 7), *z = td_tensor_full(1, &n, dt, 0);
      td_tensor *r = td_binary(op, a, z);
      CHECK(r == NULL);
      CHECK_ERROR("integer division by zero");
      CHECK(td_binary_scalar(op, a, 0, TD_SCALAR_INT, 0) == NULL);
      CHECK(td_binary_scalar(op, z, 5, TD_SCALAR_INT, 1) == NULL);
      CHECK_EQ_I(td_binary_(op, a, z), TD_EINVAL);
      CHECK_EQ_I(td_binary_scalar_(op, a, 0, TD_SCALAR_INT), TD_EINVAL);
      const int64_t i3 = 3;
      double v = 0;
      td_tensor_read_f64(a, &i3, &v);
      CHECK(v == 7);
      /* a zero divisor in a floating compute dtype is IEEE's business */
      r = td_binary_scalar(op, a, 0, TD_SCALAR_FLOAT, 0);
      CHECK(r != NULL && r->dtype == TD_FLOAT32);
      td_tensor_release(r);
      td_tensor_release(a);
      td_tensor_release(z);
    }
  /* large: many chunks, one zero far in */
  const int64_t big = 1 << 20, at = 777777;
  td_tensor *a = td_tensor_full(1, &big, TD_INT32, 9), *b = td_tensor_full(1, &big, TD_INT32, 2);
  td_tensor_write_f64(b, &at, 0);
  CHECK(td_binary(TD_BINARY_FLOOR_DIVIDE, a, b) == NULL);
  CHECK_ERROR("floor_divide: integer division by zero");
  td_tensor_release(a);
  td_tensor_release(b);
}

/* ---- unary ------------------------------------------------------------------------------ */

static const char *const un_names[NUN] = {
    "neg",  "abs",     "exp",  "log",   "log1p", "expm1", "sqrt",
    "rsqrt", "sin",    "cos",  "tanh",  "sigmoid", "relu", "floor",
    "ceil", "round",   "sign", "logical_not", "isnan", "isinf",
    "tan",  "asin",    "acos", "atan",  "sinh",  "cosh",  "asinh",
    "acosh", "atanh",  "log2", "log10", "exp2",  "erf",   "erfc",
    "lgamma", "trunc", "frac", "isfinite", "signbit", "bitwise_not", "erfinv", "digamma"};

static bool is_float_op(int op) {
  return (op >= TD_UNARY_EXP && op <= TD_UNARY_SIGMOID) ||
         (op >= TD_UNARY_TAN && op <= TD_UNARY_LGAMMA) || op == TD_UNARY_ERFINV ||
         op == TD_UNARY_DIGAMMA;
}

/* References for the functions libm lacks, by other methods than special_math.h's, in
 * long double: erfinv by bisection on erfl; digamma by the recurrence up to 30 and the
 * asymptotic series there, reflected for x < 0. */
static double ref_erfinv(double y) {
  if (isnan(y) || fabs(y) > 1) return NAN;
  if (fabs(y) == 1) return copysign(INFINITY, y);
  long double lo = 0, hi = 7, a = fabsl((long double)y);
  for (int i = 0; i < 120; i++) {
    long double mid = (lo + hi) / 2;
    if (erfl(mid) < a) lo = mid;
    else hi = mid;
  }
  return copysign((double)lo, y);
}
static double ref_digamma(double x) {
  if (x == 0) return copysign(INFINITY, -x);
  if (isnan(x) || x == INFINITY) return x;
  if (x < 0 && x == floor(x)) return NAN;
  long double r = 0, v = x;
  if (v < 0) {
    const long double pi = 3.14159265358979323846264338327950288L;
    r = -pi / tanl(pi * (long double)(x - nearbyint(x)));
    v = 1 - v;
  }
  for (; v < 30; v += 1) r -= 1 / v;
  const long double q = 1 / (v * v);
  return (double)(r + logl(v) - 0.5L / v -
                  q * (1.0L / 12 - q * (1.0L / 120 - q * (1.0L / 252 - q * (1.0L / 240)))));
}
static bool is_test_op(int op) {
  return (op >= TD_UNARY_LOGICAL_NOT && op <= TD_UNARY_ISINF) || op == TD_UNARY_ISFINITE ||
         op == TD_UNARY_SIGNBIT;
}

static val ref_unary(int op, int32_t c, val x, bool *approx) {
  if (op == TD_UNARY_LOGICAL_NOT) return VI(x.is_int ? x.i == 0 : x.f == 0);
  if (op == TD_UNARY_ISNAN) return VI(!x.is_int && isnan(x.f));
  if (op == TD_UNARY_ISINF) return VI(!x.is_int && isinf(x.f));
  if (op == TD_UNARY_ISFINITE) return VI(x.is_int || isfinite(x.f));
  if (op == TD_UNARY_SIGNBIT) return VI(x.is_int ? x.i < 0 : signbit(x.f) != 0);
  if (!isfl(c)) {
    int64_t v = x.i;
    switch (op) {
      case TD_UNARY_NEG: return VI(wrap(c, (int64_t)(0 - (uint64_t)v)));
      case TD_UNARY_ABS: return VI(v < 0 ? wrap(c, (int64_t)(0 - (uint64_t)v)) : v);
      case TD_UNARY_RELU: return VI(v < 0 ? 0 : v);
      case TD_UNARY_SIGN: return VI((v > 0) - (v < 0));
      case TD_UNARY_BITWISE_NOT: return VI(c == TD_BOOL ? !v : wrap(c, ~v));
      default: return VI(v); /* floor, ceil, round, trunc */
    }
  }
  double v = x.f, r = 0;
  switch (op) {
    case TD_UNARY_NEG: r = -v; break;
    case TD_UNARY_ABS: r = fabs(v); break;
    case TD_UNARY_SQRT: r = sqrt(v); break;
    case TD_UNARY_RSQRT: r = 1 / R(c, sqrt(v)); break;
    case TD_UNARY_RELU: r = v < 0 ? 0 : v; break;
    case TD_UNARY_FLOOR: r = floor(v); break;
    case TD_UNARY_CEIL: r = ceil(v); break;
    case TD_UNARY_ROUND: r = nearbyint(v); break;
    case TD_UNARY_SIGN: r = (v > 0) - (v < 0); break;
    case TD_UNARY_TRUNC: r = trunc(v); break;
    case TD_UNARY_FRAC: r = v - trunc(v); break;
    default:
      *approx = true;
      switch (op) {
        case TD_UNARY_EXP: r = exp(v); break;
        case TD_UNARY_LOG: r = log(v); break;
        case TD_UNARY_LOG1P: r = log1p(v); break;
        case TD_UNARY_EXPM1: r = expm1(v); break;
        case TD_UNARY_SIN: r = sin(v); break;
        case TD_UNARY_COS: r = cos(v); break;
        case TD_UNARY_TANH: r = tanh(v); break;
        case TD_UNARY_TAN: r = tan(v); break;
        case TD_UNARY_ASIN: r = asin(v); break;
        case TD_UNARY_ACOS: r = acos(v); break;
        case TD_UNARY_ATAN: r = atan(v); break;
        case TD_UNARY_SINH: r = sinh(v); break;
        case TD_UNARY_COSH: r = cosh(v); break;
        case TD_UNARY_ASINH: r = asinh(v); break;
        case TD_UNARY_ACOSH: r = acosh(v); break;
        case TD_UNARY_ATANH: r = atanh(v); break;
        case TD_UNARY_LOG2: r = log2(v); break;
        case TD_UNARY_LOG10: r = log10(v); break;
        case TD_UNARY_EXP2: r = exp2(v); break;
        case TD_UNARY_ERF: r = erf(v); break;
        case TD_UNARY_ERFC: r = erfc(v); break;
        case TD_UNARY_LGAMMA: r = lgamma(v); break;
        case TD_UNARY_ERFINV: r = ref_erfinv(v); break;
        case TD_UNARY_DIGAMMA: r = ref_digamma(v); break;
        default: r = 1 / R(c, 1 + R(c, exp(-v))); break; /* sigmoid, in c's precision */
      }
  }
  return VF(round_to(c, R(c, r)));
}

static int64_t unary_bad;

static void check_unary_case(const char *label, int op, const td_tensor *x, bool inplace) {
  const int32_t dt = x->dtype;
  const char *err = NULL;
  if (dt == TD_BOOL && op == TD_UNARY_NEG) err = "negation of a bool tensor";
  if (dt == TD_BOOL && (op == TD_UNARY_ABS || op == TD_UNARY_RELU || op == TD_UNARY_FLOOR ||
                        op == TD_UNARY_CEIL || op == TD_UNARY_ROUND || op == TD_UNARY_TRUNC))
    err = "not supported for bool";
  if (op == TD_UNARY_FRAC && !isfl(dt)) err = "(it takes floating point ones)";
  if (op == TD_UNARY_BITWISE_NOT && isfl(dt)) err = "(it takes integer and bool ones)";
  const int32_t c = is_float_op(op) && !isfl(dt) ? TD_FLOAT32 : dt;
  const int32_t o = is_test_op(op) ? TD_BOOL : c;
  if (inplace && !err && cat(o) > cat(dt)) err = "can't be cast to the desired output type";
  td_tensor *a = inplace ? td_tensor_clone(x) : NULL, *r = NULL;
  const td_tensor *src = inplace ? a : x;
  int64_t n = numel(x->ndim, x->shape);
  val *want = calloc((size_t)(n ? n : 1), sizeof *want);
  bool *approx = calloc((size_t)(n ? n : 1), sizeof *approx);
  if (n) {
    int64_t idx[TD_MAX_DIMS] = {0}, k = 0;
    do {
      want[k] = ref_unary(op, c, conv(c, load(src, idx)), &approx[k]);
      if (inplace) want[k] = conv(dt, want[k]);
      k++;
    } while (next_index(x->ndim, x->shape, idx));
  }
  int32_t status = TD_OK;
  cases_run++;
  elements_checked += n;
  if (inplace) status = td_unary_(op, a);
  else r = td_unary(op, x);
  const td_tensor *got = inplace ? a : r;
  if (err) {
    if ((inplace ? status >= 0 : r != NULL) || !strstr(td_last_error(), err) ||
        !strstr(td_last_error(), un_names[op])) {
      fprintf(stderr, "%s %s %s: expected error '%s', got '%s'\n", label, un_names[op],
              td_dtype_name(dt), err, td_last_error());
      unary_bad++;
    }
  } else if (!got || status != TD_OK || got->dtype != (inplace ? dt : o)) {
    fprintf(stderr, "%s %s %s: failed or wrong dtype: %s\n", label, un_names[op],
            td_dtype_name(dt), td_last_error());
    unary_bad++;
  } else if (n) {
    int64_t idx[TD_MAX_DIMS] = {0}, k = 0, bad = 0;
    do {
      val g = load(got, idx);
      if (!(approx[k] ? near(got->dtype, g, want[k]) : same(g, want[k])) && bad++ == 0)
        fprintf(stderr, "%s %s %s: element %lld (x = %.17g): got %.17g want %.17g\n", label,
                un_names[op], td_dtype_name(dt), (long long)k, as_f(load(x, idx)), as_f(g),
                as_f(want[k]));
      k++;
    } while (next_index(x->ndim, x->shape, idx));
    unary_bad += bad;
  }
  free(want);
  free(approx);
  td_tensor_release(a);
  td_tensor_release(r);
}

static void test_unary(void) {
  const int64_t s43[2] = {4, 3}, s38[2] = {3, 8}, s14[2] = {1, 4}, s34[2] = {3, 4},
                s04[2] = {0, 4};
  for (int op = 0; op < NUN; op++)
    for (int32_t dt = 0; dt < TD_NUM_DTYPES; dt++) {
      td_tensor *x = values_along(dt, 0, false);
      check_unary_case("values", op, x, false);
      check_unary_case("values in place", op, x, true);
      td_tensor *t = pattern(dt, 2, s43, 3, false), tv;
      td_tensor_transpose(t, 0, 1, &tv);
      check_unary_case("transposed", op, &tv, false);
      td_tensor *sl = pattern(dt, 2, s38, 1, false), slv;
      td_tensor_slice(sl, 1, 0, 8, 3, &slv);
      check_unary_case("sliced", op, &slv, false);
      td_tensor *row = pattern(dt, 2, s14, 2, false), ex;
      td_tensor_expand(row, 2, s34, &ex);
      check_unary_case("expanded", op, &ex, false);
      td_tensor *z = pattern(dt, 0, NULL, 5, false), *e = pattern(dt, 2, s04, 0, false);
      check_unary_case("0-dim", op, z, false);
      check_unary_case("0-size", op, e, false);
      check_unary_case("0-size in place", op, e, true);
      td_tensor *all[] = {x, t, sl, row, z, e};
      for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) td_tensor_release(all[k]);
    }
  const int64_t big[2] = {700, 300}; /* tiles: a transposed input into a new tensor */
  for (int32_t dt = TD_INT32; dt <= TD_FLOAT64; dt += 4) {
    td_tensor *t = pattern(dt, 2, big, 1, false), tv;
    td_tensor_transpose(t, 0, 1, &tv);
    check_unary_case("large transposed", TD_UNARY_NEG, &tv, false);
    check_unary_case("large transposed", TD_UNARY_EXP, &tv, false);
    td_tensor_release(t);
  }
  CHECK_EQ_I(unary_bad, 0);
  /* a few values spelled out */
  const int64_t n = 6;
  const double in[6] = {0.5, 1.5, 2.5, -0.5, -2.5, 2.4999};
  const double rounded[6] = {0, 2, 2, -0.0, -2, 2};
  td_tensor *t = td_tensor_empty(1, &n, TD_FLOAT32);
  for (int64_t i = 0; i < n; i++) td_tensor_write_f64(t, &i, in[i]);
  td_tensor *r = td_unary(TD_UNARY_ROUND, t);
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double v;
    td_tensor_read_f64(r, &i, &v);
    bad += !same_f(v, rounded[i]);
  }
  CHECK_EQ_I(bad, 0);
  td_tensor_release(r);
  td_tensor_release(t);
  t = td_tensor_full(1, &n, TD_INT8, -128); /* abs and neg wrap */
  r = td_unary(TD_UNARY_ABS, t);
  const int64_t i0 = 0;
  double v = 0;
  td_tensor_read_f64(r, &i0, &v);
  CHECK(v == -128);
  td_tensor_release(r);
  td_tensor_release(t);
}

/* ---- clamp -------------------------------------------------------------------------------- */

static int64_t clamp_bad;

static int32_t bound_kind(double v) {
  return isfinite(v) && v == trunc(v) ? TD_SCALAR_INT : TD_SCALAR_FLOAT;
}

static void check_clamp_case(const td_tensor *x, double lo, double hi, int has_lo, int has_hi,
                             bool inplace) {
  const int32_t dt = x->dtype;
  operand ops[3] = {OT(x), OS(lo, bound_kind(lo)), OS(hi, bound_kind(hi))};
  if (!has_lo) ops[1] = ops[2];
  int32_t r = isfl(dt) ? dt : ref_result(1 + has_lo + has_hi, ops);
  const char *err = NULL;
  if (!has_lo && !has_hi) err = "at least one of min and max";
  else if (inplace && r != dt) err = "can't be cast to the desired output type";
  bool fill_nan = (has_lo && isnan(lo)) || (has_hi && isnan(hi));
  double blo = -INFINITY, bhi = INFINITY;
  if (!err && !fill_nan && isfl(r)) {
    static const double max[] = {[TD_FLOAT16] = 65504, [TD_BFLOAT16] = 0x1.fep127,
                                 [TD_FLOAT32] = FLT_MAX, [TD_FLOAT64] = DBL_MAX};
    if ((has_lo && isfinite(lo) && fabs(lo) > max[r]) || (has_hi && isfinite(hi) && fabs(hi) > max[r]))
      err = "without overflow";
    if (has_lo) blo = round_to(r, lo);
    if (has_hi) bhi = round_to(r, hi);
  } else if (!err && !fill_nan) {
    static const double tlo[] = {0, 0, -0x1p7, -0x1p15, -0x1p31, -0x1p63};
    static const double thi[] = {1, 0x1p8, 0x1p7, 0x1p15, 0x1p31, 0x1p63}; /* exclusive */
    if ((has_lo && lo >= thi[r]) || (has_hi && hi < tlo[r])) err = "is outside the range of";
    if (has_lo) blo = lo;
    if (has_hi) bhi = hi;
  }
  td_tensor *a = inplace ? td_tensor_clone(x) : NULL, *res = NULL;
  int32_t status = TD_OK;
  cases_run++;
  elements_checked += numel(x->ndim, x->shape);
  if (inplace) status = td_clamp_(a, lo, hi, has_lo, has_hi);
  else res = td_clamp(x, lo, hi, has_lo, has_hi);
  const td_tensor *got = inplace ? a : res;
  if (err) {
    if ((inplace ? status >= 0 : res != NULL) || !strstr(td_last_error(), err)) {
      fprintf(stderr, "clamp %s [%g, %g] (%d, %d): expected error '%s', got '%s'\n",
              td_dtype_name(dt), lo, hi, has_lo, has_hi, err, td_last_error());
      clamp_bad++;
    }
  } else if (!got || status != TD_OK || got->dtype != r) {
    fprintf(stderr, "clamp %s [%g, %g]: failed or wrong dtype (want %s): %s\n", td_dtype_name(dt),
            lo, hi, td_dtype_name(r), td_last_error());
    clamp_bad++;
  } else if (numel(x->ndim, x->shape)) {
    int64_t idx[TD_MAX_DIMS] = {0}, bad = 0;
    do {
      val v = conv(r, load(x, idx)), want;
      if (fill_nan) {
        want = VF(NAN);
      } else if (isfl(r)) {
        double f = v.f < blo ? blo : v.f;
        want = VF(bhi < f ? bhi : f);
      } else {
        int64_t l = blo <= -0x1p63 ? INT64_MIN : (int64_t)blo;
        int64_t h = bhi >= 0x1p63 ? INT64_MAX : (int64_t)bhi, i = v.i < l ? l : v.i;
        want = VI(h < i ? h : i);
      }
      val g = load(got, idx);
      if (!same(g, want) && bad++ == 0)
        fprintf(stderr, "clamp %s [%g, %g] (%d, %d): x %.17g got %.17g want %.17g\n",
                td_dtype_name(dt), lo, hi, has_lo, has_hi, as_f(load(x, idx)), as_f(g), as_f(want));
    } while (next_index(x->ndim, x->shape, idx));
    clamp_bad += bad;
  }
  td_tensor_release(a);
  td_tensor_release(res);
}

static void test_clamp(void) {
  static const struct {
    double lo, hi;
    int has_lo, has_hi;
  } bounds[] = {
      {-1, 0, 1, 0},      {0, 3, 0, 1},       {-1, 3, 1, 1},        {5, 2, 1, 1},
      {0.5, 0, 1, 0},     {0, -2.5, 0, 1},    {-0.5, 2.5, 1, 1},    {NAN, 0, 1, 0},
      {0, NAN, 0, 1},     {NAN, 2, 1, 1},     {-1000, 1000, 1, 1},  {200, 0, 1, 0},
      {0, -200, 0, 1},    {-1, 300, 1, 1},    {1e6, 0, 1, 0},       {-INFINITY, INFINITY, 1, 1},
      {0x1p62, 0, 1, 0},  {-0x1p63, 0x1p63, 1, 1}, {0, 0, 0, 0},    {1e39, 0, 1, 0},
      {0, -0.0, 0, 1},    {-0.0, 0, 1, 0},    {100, 100, 1, 1},     {-129, 128, 1, 1},
  };
  const int64_t s43[2] = {4, 3};
  for (int32_t dt = 0; dt < TD_NUM_DTYPES; dt++) {
    td_tensor *x = values_along(dt, 0, false), *t = pattern(dt, 2, s43, 2, false), tv;
    td_tensor_transpose(t, 0, 1, &tv);
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
      check_clamp_case(x, bounds[k].lo, bounds[k].hi, bounds[k].has_lo, bounds[k].has_hi, false);
      check_clamp_case(x, bounds[k].lo, bounds[k].hi, bounds[k].has_lo, bounds[k].has_hi, true);
      check_clamp_case(&tv, bounds[k].lo, bounds[k].hi, bounds[k].has_lo, bounds[k].has_hi, false);
    }
    td_tensor_release(x);
    td_tensor_release(t);
  }
  CHECK_EQ_I(clamp_bad, 0);
}

/* ---- where and masked_fill ------------------------------------------------------------- */

static int64_t select_bad;

static void check_where_case(const char *label, const td_tensor *mask, operand x, operand y) {
  operand all[3] = {OT(mask), x, y};
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS];
  const char *err = NULL;
  int32_t r = ref_result(2, all + 1);
  val sx = {0}, sy = {0};
  if (mask->dtype != TD_BOOL) err = "the mask must be bool";
  else if (!ref_broadcast(3, all, &ndim, shape)) err = "do not broadcast";
  else if (!x.t && !ref_fill(r, x.kind == TD_SCALAR_INT ? trunc(x.s) : x.kind == TD_SCALAR_BOOL ? x.s != 0 : x.s, true, &sx))
    err = "without overflow";
  else if (!y.t && !ref_fill(r, y.kind == TD_SCALAR_INT ? trunc(y.s) : y.kind == TD_SCALAR_BOOL ? y.s != 0 : y.s, true, &sy))
    err = "without overflow";
  td_tensor *res = td_where(mask, x.t, x.s, x.kind, y.t, y.s, y.kind);
  cases_run++;
  elements_checked += err ? 0 : numel(ndim, shape);
  if (err) {
    if (res || !strstr(td_last_error(), err) || !strstr(td_last_error(), "where")) {
      fprintf(stderr, "%s: expected error '%s', got '%s'\n", label, err, td_last_error());
      select_bad++;
    }
  } else if (!res || res->dtype != r || res->ndim != ndim) {
    fprintf(stderr, "%s: failed or wrong dtype (want %s): %s\n", label, td_dtype_name(r),
            td_last_error());
    select_bad++;
  } else if (numel(ndim, shape)) {
    int64_t idx[TD_MAX_DIMS] = {0}, bad = 0;
    do {
      bool m = operand_at(all[0], ndim, idx).i != 0;
      val want = m ? (x.t ? conv(r, operand_at(x, ndim, idx)) : sx)
                   : (y.t ? conv(r, operand_at(y, ndim, idx)) : sy);
      val g = load(res, idx);
      if (!same(g, want) && bad++ == 0)
        fprintf(stderr, "%s: got %.17g want %.17g\n", label, as_f(g), as_f(want));
    } while (next_index(ndim, shape, idx));
    select_bad += bad;
  }
  td_tensor_release(res);
}

static void test_where(void) {
  const int64_t s31[2] = {3, 1}, s14[2] = {1, 4}, s34[2] = {3, 4}, s4[1] = {4}, s2[1] = {2};
  td_tensor *m31 = pattern(TD_BOOL, 2, s31, 1, false), *m34 = pattern(TD_BOOL, 2, s34, 0, false);
  td_tensor *m0 = pattern(TD_BOOL, 0, NULL, 1, false);
  for (int32_t da = 0; da < TD_NUM_DTYPES; da++)
    for (int32_t db = 0; db < TD_NUM_DTYPES; db++) {
      td_tensor *a = pattern(da, 2, s14, 1, false), *b = pattern(db, 2, s34, 3, false);
      td_tensor *a0 = pattern(da, 0, NULL, 2, false), at, *a43 = pattern(da, 2, (int64_t[]){4, 3}, 4, false);
      td_tensor_transpose(a43, 0, 1, &at);
      check_where_case("where [3,1] [1,4] [3,4]", m31, OT(a), OT(b));
      check_where_case("where [3,4] transposed [3,4]", m34, OT(&at), OT(b));
      check_where_case("where 0-dim mask, 0-dim a", m0, OT(a0), OT(b));
      td_tensor_release(a);
      td_tensor_release(b);
      td_tensor_release(a0);
      td_tensor_release(a43);
    }
  static const struct {
    int32_t kind;
    double s;
  } scalars[] = {{TD_SCALAR_BOOL, 1},  {TD_SCALAR_INT, 5},       {TD_SCALAR_INT, -1},
                 {TD_SCALAR_INT, 300}, {TD_SCALAR_INT, -129},    {TD_SCALAR_FLOAT, 2.5},
                 {TD_SCALAR_FLOAT, 1e6}, {TD_SCALAR_FLOAT, NAN}, {TD_SCALAR_INT, 0x1p62}};
  const size_t ns = sizeof scalars / sizeof scalars[0];
  for (int32_t da = 0; da < TD_NUM_DTYPES; da++) {
    td_tensor *a = pattern(da, 1, s4, 1, false);
    for (size_t k = 0; k < ns; k++) {
      operand s = OS(scalars[k].s, scalars[k].kind);
      check_where_case("where tensor, scalar", m31, OT(a), s);
      check_where_case("where scalar, tensor", m31, s, OT(a));
    }
    td_tensor_release(a);
  }
  for (size_t k = 0; k < ns; k++)
    for (size_t j = 0; j < ns; j++)
      check_where_case("where scalar, scalar", m34, OS(scalars[k].s, scalars[k].kind),
                       OS(scalars[j].s, scalars[j].kind));
  td_tensor *u8 = pattern(TD_UINT8, 1, s4, 0, false), *f = pattern(TD_FLOAT32, 1, s4, 0, false);
  check_where_case("where uint8 mask", u8, OT(f), OT(f));
  td_tensor *v2 = pattern(TD_FLOAT32, 1, s2, 0, false);
  check_where_case("where [3,4] [2]", m34, OT(v2), OT(f));
  td_tensor_release(u8);
  td_tensor_release(f);
  td_tensor_release(v2);
  td_tensor_release(m31);
  td_tensor_release(m34);
  td_tensor_release(m0);
  CHECK_EQ_I(select_bad, 0);
  select_bad = 0;
}

static void check_fill_case(const char *label, const td_tensor *x, const td_tensor *mask,
                            double value, bool inplace) {
  const char *err = NULL;
  val v = {0};
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS];
  operand all[2] = {OT(x), OT(mask)};
  bool fits = ref_broadcast(2, all, &ndim, shape) && ndim == x->ndim;
  for (int32_t d = 0; fits && d < ndim; d++) fits = shape[d] == x->shape[d];
  if (mask->dtype != TD_BOOL) err = "the mask must be bool";
  else if (!fits) err = "does not broadcast to the tensor's shape";
  else if (!ref_fill(x->dtype, value, false, &v)) err = "without overflow";
  td_tensor *a = inplace ? td_tensor_clone(x) : NULL, *res = NULL;
  int32_t status = TD_OK;
  cases_run++;
  elements_checked += numel(x->ndim, x->shape);
  if (inplace) status = td_masked_fill_(a, mask, value);
  else res = td_masked_fill(x, mask, value);
  const td_tensor *got = inplace ? a : res;
  if (err) {
    if ((inplace ? status >= 0 : res != NULL) || !strstr(td_last_error(), err) ||
        !strstr(td_last_error(), "masked_fill")) {
      fprintf(stderr, "%s %s %g: expected error '%s', got '%s'\n", label,
              td_dtype_name(x->dtype), value, err, td_last_error());
      select_bad++;
    }
  } else if (!got || status != TD_OK || got->dtype != x->dtype) {
    fprintf(stderr, "%s: failed: %s\n", label, td_last_error());
    select_bad++;
  } else if (numel(x->ndim, x->shape)) {
    int64_t idx[TD_MAX_DIMS] = {0}, bad = 0;
    do {
      val want = operand_at(all[1], ndim, idx).i ? v : load(x, idx), g = load(got, idx);
      if (!same(g, want) && bad++ == 0)
        fprintf(stderr, "%s %s %g: got %.17g want %.17g\n", label, td_dtype_name(x->dtype),
                value, as_f(g), as_f(want));
    } while (next_index(x->ndim, x->shape, idx));
    select_bad += bad;
  }
  td_tensor_release(a);
  td_tensor_release(res);
}

static void test_masked_fill(void) {
  static const double values[] = {2.7,   -2.7,  300,   -1,      -255,    -256,     255.5,
                                  -0.5,  127.999, 128, -128.001, NAN,    INFINITY, 1e39,
                                  65519, 0.5,   0x1p63, -0x1p63, 2147483647.5, -2147483648.5,
                                  0};
  const int64_t s34[2] = {3, 4}, s4[1] = {4}, s31[2] = {3, 1}, s134[3] = {1, 3, 4};
  td_tensor *m34 = pattern(TD_BOOL, 2, s34, 1, false), *m4 = pattern(TD_BOOL, 1, s4, 0, false);
  td_tensor *m0 = pattern(TD_BOOL, 0, NULL, 1, false), *m134 = pattern(TD_BOOL, 3, s134, 0, false);
  td_tensor *m31u8 = pattern(TD_UINT8, 2, s31, 1, false);
  for (int32_t dt = 0; dt < TD_NUM_DTYPES; dt++) {
    td_tensor *x = pattern(dt, 2, s34, 2, false), *t = pattern(dt, 2, (int64_t[]){4, 3}, 1, false), tv;
    td_tensor_transpose(t, 0, 1, &tv);
    for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
      check_fill_case("masked_fill", x, m34, values[k], false);
      check_fill_case("masked_fill_", x, m4, values[k], true);
    }
    check_fill_case("masked_fill transposed", &tv, m34, 3, false);
    check_fill_case("masked_fill 0-dim mask", x, m0, 1, true);
    check_fill_case("masked_fill mask would grow a", x, m134, 1, false);
    check_fill_case("masked_fill uint8 mask", x, m31u8, 1, true);
    td_tensor_release(x);
    td_tensor_release(t);
  }
  /* torch's answers, spelled out */
  static const struct {
    int32_t dt;
    double v;
    bool ok;
    double want;
  } torch_cases[] = {
      {TD_INT64, 2.7, true, 2},       {TD_INT64, -2.7, true, -2},    {TD_UINT8, 300, false, 0},
      {TD_UINT8, -1, true, 255},      {TD_UINT8, -255, true, 1},     {TD_UINT8, -256, false, 0},
      {TD_UINT8, 255.5, true, 255},   {TD_UINT8, -0.5, false, 0},    {TD_INT8, 127.999, true, 127},
      {TD_INT8, 128, false, 0},       {TD_INT8, -128.001, false, 0}, {TD_INT64, NAN, false, 0},
      {TD_INT32, INFINITY, false, 0}, {TD_INT32, 2147483647.5, true, 2147483647},
      {TD_INT32, -2147483648.5, false, 0}, {TD_INT64, 0x1p63, false, 0},
      {TD_INT64, -0x1p63, true, -0x1p63}, {TD_FLOAT16, 65519, false, 0},
      {TD_FLOAT16, 70000, false, 0},  {TD_FLOAT32, 1e39, false, 0},  {TD_FLOAT32, INFINITY, true, INFINITY},
      {TD_BOOL, NAN, true, 1},        {TD_BOOL, 0.5, true, 1},       {TD_BOOL, -1, true, 1},
  };
  const int64_t one = 1, i0 = 0;
  td_tensor *m1 = td_tensor_full(1, &one, TD_BOOL, 1);
  for (size_t k = 0; k < sizeof torch_cases / sizeof torch_cases[0]; k++) {
    td_tensor *x = td_tensor_full(1, &one, torch_cases[k].dt, 1);
    td_tensor *r = td_masked_fill(x, m1, torch_cases[k].v);
    double got = NAN;
    if (r) td_tensor_read_f64(r, &i0, &got);
    bool ok = torch_cases[k].ok ? r && got == torch_cases[k].want : !r;
    if (!ok)
      fprintf(stderr, "masked_fill(%s, %.17g): %s\n", td_dtype_name(torch_cases[k].dt),
              torch_cases[k].v, r ? "wrong value" : td_last_error());
    CHECK(ok);
    td_tensor_release(r);
    td_tensor_release(x);
  }
  td_tensor_release(m1);
  td_tensor_release(m34);
  td_tensor_release(m4);
  td_tensor_release(m0);
  td_tensor_release(m134);
  td_tensor_release(m31u8);
  CHECK_EQ_I(select_bad, 0);
}

/* ---- overlap, read-only, expanded targets ------------------------------------------------- */

static void test_overlap(void) {
  /* b a shifted view of a's storage: each side of the shift */
  for (int dir = 0; dir < 2; dir++) {
    td_tensor *base = td_tensor_arange(1, 1, 1001, TD_FLOAT32), a, b;
    td_tensor_slice(base, 0, dir ? 1 : 0, dir ? 1001 : 1000, 1, &a);
    td_tensor_slice(base, 0, dir ? 0 : 1, dir ? 1000 : 1001, 1, &b);
    CHECK_EQ_I(td_binary_(TD_BINARY_ADD, &a, &b), TD_OK);
    int bad = 0;
    for (int64_t i = 0; i < 1000; i++) /* values 1..1001: a[i] was i+1+dir, b[i] i+2-dir */
      bad += at1(&a, i) != (double)(i + 1 + dir) + (double)(i + 2 - dir);
    CHECK_EQ_I(bad, 0);
    td_tensor_release(base);
  }
  /* a += a^T, a *= a (same layout: no snapshot needed), on [64, 64] */
  const int64_t s[2] = {64, 64};
  td_tensor *a = pattern(TD_FLOAT64, 2, s, 1, false), *orig = td_tensor_clone(a), at;
  for (int64_t i = 0; i < 64; i++)
    for (int64_t j = 0; j < 64; j++) {
      int64_t idx[2] = {i, j};
      td_tensor_write_f64(a, idx, (double)(i * 64 + j));
    }
  td_tensor_copy_(orig, a);
  td_tensor_transpose(a, 0, 1, &at);
  CHECK_EQ_I(td_binary_(TD_BINARY_ADD, a, &at), TD_OK);
  int bad = 0;
  for (int64_t i = 0; i < 64; i++)
    for (int64_t j = 0; j < 64; j++) bad += at2(a, i, j) != at2(orig, i, j) + at2(orig, j, i);
  CHECK_EQ_I(bad, 0);
  td_tensor_copy_(a, orig);
  CHECK_EQ_I(td_binary_(TD_BINARY_MUL, a, a), TD_OK);
  bad = 0;
  for (int64_t i = 0; i < 64; i++)
    for (int64_t j = 0; j < 64; j++) bad += at2(a, i, j) != at2(orig, i, j) * at2(orig, i, j);
  CHECK_EQ_I(bad, 0);
  /* in place through a transposed target reading the untransposed tensor */
  td_tensor_copy_(a, orig);
  CHECK_EQ_I(td_binary_(TD_BINARY_SUB, &at, a), TD_OK); /* a^T -= a: a[j][i] = o[j][i] - o[i][j] */
  bad = 0;
  for (int64_t i = 0; i < 64; i++)
    for (int64_t j = 0; j < 64; j++) bad += at2(a, j, i) != at2(orig, j, i) - at2(orig, i, j);
  CHECK_EQ_I(bad, 0);
  td_tensor_release(a);
  td_tensor_release(orig);
  /* masked_fill_ with the mask a view of the target itself */
  td_tensor *m = pattern(TD_BOOL, 2, s, 3, false), *mo = td_tensor_clone(m), mt;
  td_tensor_transpose(m, 0, 1, &mt);
  CHECK_EQ_I(td_masked_fill_(m, &mt, 0), TD_OK);
  bad = 0;
  for (int64_t i = 0; i < 64; i++)
    for (int64_t j = 0; j < 64; j++)
      bad += at2(m, i, j) != (at2(mo, j, i) != 0 ? 0 : at2(mo, i, j));
  CHECK_EQ_I(bad, 0);
  td_tensor_release(m);
  td_tensor_release(mo);
}

static void test_refusals(void) {
  /* a read-only mapping: every in-place form refuses, the others work */
  char path[] = "/tmp/td_test_elementwise_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  float zeros[16] = {0};
  CHECK(write(fd, zeros, sizeof zeros) == (ssize_t)sizeof zeros);
  close(fd);
  td_storage *st = td_storage_map_file(path, sizeof zeros, TD_MAP_READ);
  CHECK(st != NULL);
  const int64_t n16 = 16;
  td_tensor *ro = td_tensor_from_storage(st, 0, 1, &n16, NULL, TD_FLOAT32);
  td_tensor *mask = td_tensor_full(1, &n16, TD_BOOL, 1);
  CHECK_EQ_I(td_binary_(TD_BINARY_ADD, ro, ro), TD_EREADONLY);
  CHECK_ERROR("add_: the tensor is read-only");
  CHECK_EQ_I(td_binary_scalar_(TD_BINARY_MUL, ro, 2, TD_SCALAR_INT), TD_EREADONLY);
  CHECK_EQ_I(td_unary_(TD_UNARY_EXP, ro), TD_EREADONLY);
  CHECK_EQ_I(td_unary_(TD_UNARY_ISNAN, ro), TD_EREADONLY);
  CHECK_EQ_I(td_clamp_(ro, 0, 1, 1, 1), TD_EREADONLY);
  CHECK_EQ_I(td_masked_fill_(ro, mask, 1), TD_EREADONLY);
  td_tensor *r = td_binary_scalar(TD_BINARY_ADD, ro, 1, TD_SCALAR_INT, 0);
  CHECK(r && at1(r, 3) == 1);
  td_tensor_release(r);
  r = td_masked_fill(ro, mask, 5);
  CHECK(r && at1(r, 3) == 5);
  td_tensor_release(r);
  td_tensor_release(ro);
  td_storage_release(st);
  unlink(path);
  /* an expanded target: several elements share an address */
  const int64_t s1[2] = {1, 4}, s34[2] = {3, 4};
  td_tensor *row = td_tensor_full(2, s1, TD_FLOAT32, 1), ex;
  td_tensor *b = td_tensor_full(2, s34, TD_FLOAT32, 2);
  td_tensor_expand(row, 2, s34, &ex);
  CHECK_EQ_I(td_binary_(TD_BINARY_ADD, &ex, b), TD_EINVAL);
  CHECK_ERROR("more than one element of the written-to tensor");
  CHECK_EQ_I(td_unary_(TD_UNARY_NEG, &ex), TD_EINVAL);
  CHECK_EQ_I(td_clamp_(&ex, 0, 1, 1, 1), TD_EINVAL);
  CHECK_EQ_I(td_masked_fill_(&ex, mask, 1) < 0, 1);
  td_tensor_release(row);
  td_tensor_release(b);
  td_tensor_release(mask);
}

/* Messages name the op and the values. */
static void test_messages(void) {
  const int64_t s23[2] = {2, 3}, s4[1] = {4}, s1[1] = {1}, s2[1] = {2};
  td_tensor *a = td_tensor_full(2, s23, TD_FLOAT32, 1), *b = td_tensor_full(1, s4, TD_FLOAT32, 1);
  CHECK(td_binary(TD_BINARY_ADD, a, b) == NULL);
  CHECK_ERROR("add: shapes [2, 3] and [4] do not broadcast");
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  td_tensor *i = td_tensor_full(1, s4, TD_INT64, 2);
  CHECK(td_binary_scalar(TD_BINARY_POW, i, -2, TD_SCALAR_INT, 0) == NULL);
  CHECK_ERROR("pow: integers to negative integer powers are not allowed");
  CHECK_EQ_I(td_binary_scalar_(TD_BINARY_ADD, i, 0.5, TD_SCALAR_FLOAT), TD_EDTYPE);
  CHECK_ERROR("add_: result type float32 can't be cast to the desired output type int64");
  CHECK_EQ_I(td_binary_(TD_BINARY_DIV, i, i), TD_EDTYPE);
  CHECK_ERROR("div_: result type float32 can't be cast to the desired output type int64");
  td_tensor *bo = td_tensor_full(1, s4, TD_BOOL, 1);
  CHECK(td_binary(TD_BINARY_SUB, bo, bo) == NULL);
  CHECK_ERROR("sub: subtraction with two bool tensors is not supported");
  CHECK(td_binary_scalar(TD_BINARY_SUB, bo, 1, TD_SCALAR_INT, 1) == NULL);
  CHECK_ERROR("sub: subtraction with a bool tensor is not supported");
  CHECK(td_unary(TD_UNARY_NEG, bo) == NULL);
  CHECK_ERROR("neg: negation of a bool tensor is not supported");
  td_tensor *one = td_tensor_full(1, s1, TD_FLOAT32, 1), *two = td_tensor_full(1, s2, TD_FLOAT32, 1);
  CHECK_EQ_I(td_binary_(TD_BINARY_ADD, one, two), TD_ESHAPE);
  CHECK_ERROR("add_: output with shape [1] doesn't match the broadcast shape [2]");
  CHECK(td_binary(99, a, b) == NULL);
  CHECK_ERROR("unknown binary op 99");
  CHECK(td_binary(TD_BINARY_ADD, NULL, b) == NULL);
  CHECK_ERROR("add: the first tensor is NULL");
  CHECK(td_binary_scalar(TD_BINARY_ADD, a, 1, 7, 0) == NULL);
  CHECK_ERROR("unknown scalar kind 7");
  CHECK(td_unary(42, a) == NULL);
  CHECK_ERROR("unknown unary op 42");
  CHECK(td_unary(TD_UNARY_EXP, NULL) == NULL);
  CHECK(td_clamp(a, 0, 0, 0, 0) == NULL);
  CHECK_ERROR("clamp: at least one of min and max must be given");
  td_tensor *i8 = td_tensor_full(1, s4, TD_INT8, 1);
  CHECK(td_clamp(i8, 200, 0, 1, 0) == NULL);
  CHECK_ERROR("clamp: min value 200 is outside the range of int8");
  CHECK(td_where(NULL, a, 0, 0, a, 0, 0) == NULL);
  CHECK_ERROR("where: the mask is NULL");
  CHECK(td_where(bo, i8, 0, 0, NULL, 300, TD_SCALAR_INT) == NULL);
  CHECK_ERROR("where: value 300 cannot be converted to int8 without overflow");
  CHECK(td_masked_fill(a, NULL, 1) == NULL);
  CHECK(td_masked_fill(i8, bo, 300) == NULL);
  CHECK_ERROR("masked_fill: value 300 cannot be converted to int8 without overflow");
  CHECK(td_binary_scalar(TD_BINARY_ADD, i, 1e20, TD_SCALAR_INT, 0) == NULL);
  CHECK_ERROR("add: integer scalar 1e+20 is outside the int64 range");
  td_tensor *all[] = {a, b, i, bo, one, two, i8};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) td_tensor_release(all[k]);
}

/* ---- threads: the same bits with 1 and 4 threads ---------------------------------------- */

typedef td_tensor *(*make_fn)(td_tensor *const *in);

static td_tensor *t_add(td_tensor *const *in) { return td_binary(TD_BINARY_ADD, in[0], in[1]); }
static td_tensor *t_mul_b(td_tensor *const *in) { return td_binary(TD_BINARY_MUL, in[0], in[3]); }
static td_tensor *t_exp(td_tensor *const *in) { return td_unary(TD_UNARY_EXP, in[0]); }
static td_tensor *t_fdiv(td_tensor *const *in) {
  return td_binary(TD_BINARY_FLOOR_DIVIDE, in[2], in[4]);
}
static td_tensor *t_rem(td_tensor *const *in) {
  return td_binary(TD_BINARY_REMAINDER, in[0], in[1]);
}
static td_tensor *t_lt(td_tensor *const *in) { return td_binary(TD_BINARY_LT, in[0], in[1]); }
static td_tensor *t_half(td_tensor *const *in) { return td_binary(TD_BINARY_ADD, in[5], in[5]); }
static td_tensor *t_sig(td_tensor *const *in) { return td_unary(TD_UNARY_SIGMOID, in[0]); }
static td_tensor *t_clamp(td_tensor *const *in) { return td_clamp(in[0], -0.5, 0.5, 1, 1); }
static td_tensor *t_where(td_tensor *const *in) {
  td_tensor *m = td_binary_scalar(TD_BINARY_GT, in[0], 0, TD_SCALAR_INT, 0);
  td_tensor *r = td_where(m, in[0], 0, 0, in[1], 0, 0);
  td_tensor_release(m);
  return r;
}
static td_tensor *t_fill(td_tensor *const *in) {
  td_tensor *m = td_binary_scalar(TD_BINARY_GT, in[1], 0, TD_SCALAR_INT, 0);
  td_tensor *r = td_masked_fill(in[0], m, 7);
  td_tensor_release(m);
  return r;
}
static td_tensor *t_inplace(td_tensor *const *in) {
  td_tensor *r = td_tensor_clone(in[0]);
  td_binary_(TD_BINARY_SUB, r, in[1]);
  td_unary_(TD_UNARY_TANH, r);
  return r;
}
static td_tensor *t_transposed(td_tensor *const *in) {
  td_tensor tv;
  td_tensor_transpose(in[6], 0, 1, &tv);
  return td_binary(TD_BINARY_MAXIMUM, &tv, in[6]);
}

static void test_threads(void) {
  const int64_t n = 1 << 20, row[2] = {1, 1024}, sq[2] = {1024, 1024};
  const int64_t shape[2] = {1024, 1024};
  td_tensor *in[7];
  in[0] = pattern(TD_FLOAT32, 2, shape, 1, false);
  in[1] = pattern(TD_FLOAT32, 2, shape, 4, false);
  in[2] = pattern(TD_INT32, 1, &n, 2, false);
  in[3] = pattern(TD_FLOAT32, 2, row, 3, false);
  in[4] = pattern(TD_INT32, 1, &n, 5, true);
  in[5] = pattern(TD_FLOAT16, 2, shape, 6, false);
  in[6] = pattern(TD_FLOAT64, 2, sq, 7, false);
  const make_fn fns[] = {t_add, t_mul_b, t_exp, t_fdiv, t_rem, t_lt, t_half, t_sig,
                         t_clamp, t_where, t_fill, t_inplace, t_transposed};
  const int32_t saved = td_get_num_threads();
  int bad = 0;
  for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
    CHECK_EQ_I(td_set_num_threads(1), TD_OK);
    td_tensor *one = fns[f](in);
    CHECK_EQ_I(td_set_num_threads(4), TD_OK);
    CHECK_EQ_I(td_get_num_threads(), 4);
    td_tensor *four = fns[f](in);
    if (!one || !four || td_tensor_numel(one) != td_tensor_numel(four) ||
        memcmp(td_tensor_data_borrow(one), td_tensor_data_borrow(four),
               (size_t)(td_tensor_numel(one) * one->itemsize)) != 0) {
      fprintf(stderr, "threads: case %zu differs between 1 and 4 threads\n", f);
      bad++;
    }
    td_tensor_release(one);
    td_tensor_release(four);
  }
  CHECK_EQ_I(bad, 0);
  td_set_num_threads(saved);
  for (int k = 0; k < 7; k++) td_tensor_release(in[k]);
}

int main(void) {
  test_binary_rules();
  test_division_by_zero();
  test_binary_pairs();
  test_binary_scalars();
  test_binary_layouts();
  test_large_layouts();
  test_unary();
  test_clamp();
  test_where();
  test_masked_fill();
  test_overlap();
  test_refusals();
  test_messages();
  test_threads();
  printf("%lld op calls checked against the reference, %lld elements\n", (long long)cases_run,
         (long long)elements_checked);
  CHECK_SUMMARY();
}
