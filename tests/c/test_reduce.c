/* test_reduce.c: td_reduce, td_reduce_with_index and td_cumsum against references
 * computed here in long double / int64 from raw element reads, over every dtype an op
 * accepts, many layouts and dim lists; plus NaN/Inf, thread-count determinism and the
 * error messages. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "rng.h"

typedef long double ld;

/* ---- raw element access (no kernels involved) ------------------------------------------ */

static const char *elem_ptr(const td_tensor *t, const int64_t *index) {
  const char *p = td_tensor_data_borrow(t);
  for (int32_t d = 0; d < t->ndim; d++) p += index[d] * t->strides[d] * t->itemsize;
  return p;
}

static bool is_float(int32_t dtype) { return td_dtype_is_floating(dtype) != 0; }

static ld raw_f(int32_t dtype, const char *p) {
  switch (dtype) {
    case TD_BOOL: case TD_UINT8: return *(const uint8_t *)p;
    case TD_INT8: return *(const int8_t *)p;
    case TD_INT16: return *(const int16_t *)p;
    case TD_INT32: return *(const int32_t *)p;
    case TD_INT64: return (ld) * (const int64_t *)p;
    case TD_FLOAT16: return td_half_to_float(*(const uint16_t *)p);
    case TD_BFLOAT16: return td_bfloat16_to_float(*(const uint16_t *)p);
    case TD_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
  }
}

static int64_t raw_i(int32_t dtype, const char *p) {
  switch (dtype) {
    case TD_BOOL: case TD_UINT8: return *(const uint8_t *)p;
    case TD_INT8: return *(const int8_t *)p;
    case TD_INT16: return *(const int16_t *)p;
    case TD_INT32: return *(const int32_t *)p;
    case TD_INT64: return *(const int64_t *)p;
    default: return (int64_t)raw_f(dtype, p);
  }
}

static bool next_index(int32_t ndim, const int64_t *shape, int64_t *index) {
  for (int32_t d = ndim - 1; d >= 0; d--) {
    if (++index[d] < shape[d]) return true;
    index[d] = 0;
  }
  return false;
}

/* ---- values ------------------------------------------------------------------------------ */


/* A value exactly representable in dtype: floats are multiples of 1/8 in [-8, 8) (ties
 * are common, which exercises first-occurrence rules); int64 reaches 2^62 so sums wrap. */
static double gen(int32_t dtype) {
  uint64_t r = rnd() >> 11;
  switch (dtype) {
    case TD_BOOL: return (double)(r & 1);
    case TD_UINT8: return (double)(r % 256);
    case TD_INT8: return (double)((int64_t)(r % 256) - 128);
    case TD_INT16: return (double)((int64_t)(r % 6001) - 3000);
    case TD_INT32: return (double)((int64_t)(r % 2000000001) - 1000000000);
    case TD_INT64: return ldexp((double)((int64_t)(r % (1u << 22)) - (1 << 21)), 41);
    default: return (double)((int64_t)(r % 128) - 64) / 8.0;
  }
}

static void fill_gen(td_tensor *t) {
  int64_t idx[TD_MAX_DIMS] = {0};
  if (td_tensor_numel(t) == 0) return;
  do td_tensor_write_f64(t, idx, gen(t->dtype));
  while (next_index(t->ndim, t->shape, idx));
}

static td_tensor *make(int32_t ndim, const int64_t *shape, int32_t dtype) {
  td_tensor *t = td_tensor_empty(ndim, shape, dtype);
  CHECK(t != NULL);
  fill_gen(t);
  return t;
}

/* ---- reference reductions ------------------------------------------------------------------- */

typedef struct refv {
  bool is_int;
  int64_t i;
  ld f;
} refv;

static bool is_nan(ld x) { return x != x; }

/* The expected result of op over the n values (f as long double, iv exact for integer
 * dtypes) in reduction order; *mag is a scale for rounding slack in float results. */
static refv ref_op(int32_t op, int32_t dtype, const ld *f, const int64_t *iv, int64_t n,
                   double param, ld *mag) {
  refv r = {false, 0, 0};
  const bool fl = is_float(dtype);
  ld amax = 0;
  for (int64_t k = 0; k < n; k++)
    if (fabsl(f[k]) > amax && !isinf(f[k])) amax = fabsl(f[k]);
  *mag = (ld)n * (1 + amax) * (1 + amax);
  switch (op) {
    case TD_RED_SUM: case TD_RED_MEAN: {
      if (!fl) {
        uint64_t s = 0;
        for (int64_t k = 0; k < n; k++) s += (uint64_t)iv[k];
        r.is_int = true;
        r.i = (int64_t)s;
        return r;
      }
      ld s = 0;
      for (int64_t k = 0; k < n; k++) s += f[k];
      r.f = op == TD_RED_MEAN ? s / (ld)n : s;
      return r;
    }
    case TD_RED_PROD: {
      if (!fl) {
        uint64_t p = 1;
        for (int64_t k = 0; k < n; k++) p *= (uint64_t)iv[k];
        r.is_int = true;
        r.i = (int64_t)p;
        return r;
      }
      ld p = 1;
      for (int64_t k = 0; k < n; k++) p *= f[k];
      r.f = p;
      *mag = 10 * (ld)n * fabsl(p);
      return r;
    }
    case TD_RED_MIN: case TD_RED_MAX: case TD_RED_ARGMIN: case TD_RED_ARGMAX: {
      const bool mx = op == TD_RED_MAX || op == TD_RED_ARGMAX;
      int64_t best = 0;
      for (int64_t k = 1; k < n; k++) {
        if (fl) {
          if (is_nan(f[best])) break;
          if (is_nan(f[k]) || (mx ? f[k] > f[best] : f[k] < f[best])) best = k;
        } else if (mx ? iv[k] > iv[best] : iv[k] < iv[best]) {
          best = k;
        }
      }
      if (op == TD_RED_ARGMIN || op == TD_RED_ARGMAX) {
        r.is_int = true;
        r.i = best;
      } else if (fl) {
        r.f = f[best];
      } else {
        r.is_int = true;
        r.i = iv[best];
      }
      return r;
    }
    case TD_RED_STD: case TD_RED_VAR: {
      ld s = 0, m2 = 0;
      for (int64_t k = 0; k < n; k++) s += f[k];
      const ld mean = s / (ld)n;
      for (int64_t k = 0; k < n; k++) m2 += (f[k] - mean) * (f[k] - mean);
      const ld div = (ld)n > param ? (ld)n - param : 0;
      r.f = m2 / div;
      if (op == TD_RED_STD) r.f = sqrtl(r.f);
      return r;
    }
    case TD_RED_NORM: {
      ld acc = param == INFINITY ? 0 : param == -INFINITY ? INFINITY : 0;
      for (int64_t k = 0; k < n; k++) {
        const ld a = fabsl(f[k]);
        if (isinf(param)) { /* NaN propagates */
          if (!is_nan(acc) && (is_nan(a) || (param > 0 ? a > acc : a < acc))) acc = a;
        } else if (param == 0) acc += f[k] != 0;
        else if (param == 2) acc += a * a;
        else if (param == 1) acc += a;
        else acc += (ld)pow((double)a, param); /* powl is slow; double is plenty */
      }
      if (param == 2) acc = sqrtl(acc);
      else if (param != 1 && param != 0 && !isinf(param)) acc = powl(acc, 1.0L / param);
      r.f = acc;
      if (param != 1 && param != 2) *mag = (ld)n * 1e-2L * (1 + fabsl(acc));
      return r;
    }
    case TD_RED_ALL: case TD_RED_ANY: {
      bool all = true, any = false;
      for (int64_t k = 0; k < n; k++) {
        const bool nz = fl ? f[k] != 0 : iv[k] != 0;
        all = all && nz;
        any = any || nz;
      }
      r.is_int = true;
      r.i = op == TD_RED_ALL ? all : any;
      return r;
    }
    default: { /* logsumexp: torch's formula with the max shifted out */
      ld m = -INFINITY;
      for (int64_t k = 0; k < n; k++) {
        if (is_nan(f[k])) { m = f[k]; break; }
        if (f[k] > m) m = f[k];
      }
      if (is_nan(m)) { r.f = m; return r; }
      const ld shift = isinf(m) ? 0 : m;
      ld s = 0;
      for (int64_t k = 0; k < n; k++) s += expl(f[k] - shift);
      r.f = logl(s) + shift;
      *mag = (ld)n * 1e-2L * (1 + fabsl(r.f));
      return r;
    }
  }
}

static int32_t out_dtype_of(int32_t op, int32_t dtype) {
  switch (op) {
    case TD_RED_SUM: case TD_RED_PROD: return is_float(dtype) ? dtype : TD_INT64;
    case TD_RED_ARGMIN: case TD_RED_ARGMAX: return TD_INT64;
    case TD_RED_ALL: case TD_RED_ANY: return TD_BOOL;
    case TD_RED_LOGSUMEXP: return is_float(dtype) ? dtype : TD_FLOAT32;
    default: return dtype;
  }
}

static bool op_accepts(int32_t op, int32_t dtype) {
  if (op == TD_RED_MEAN || op == TD_RED_STD || op == TD_RED_VAR || op == TD_RED_NORM)
    return is_float(dtype);
  return true;
}

/* A long double rounded the way the library stores a double into dtype. */
static ld round_to(int32_t dtype, ld v) {
  double d = (double)v;
  switch (dtype) {
    case TD_FLOAT16: return td_half_to_float(td_float_to_half((float)d));
    case TD_BFLOAT16: return td_bfloat16_to_float(td_float_to_bfloat16((float)d));
    case TD_FLOAT32: return (float)d;
    default: return d;
  }
}

static ld eps_of(int32_t dtype) {
  switch (dtype) {
    case TD_FLOAT16: return 0x1p-10L;
    case TD_BFLOAT16: return 0x1p-7L;
    case TD_FLOAT32: return 0x1p-23L;
    default: return 0x1p-52L;
  }
}

/* got (a float output element) against the reference value. */
static bool float_close(int32_t out_dtype, ld got, ld want, ld mag) {
  if (is_nan(want)) return is_nan(got);
  if (isinf(want)) return got == want;
  const ld w = round_to(out_dtype, want);
  if (isinf(w)) return got == w;
  const ld tol = 4 * eps_of(out_dtype) * fabsl(w) + 1e-13L * mag;
  return fabsl(got - w) <= tol;
}

/* ---- checking one td_reduce call ------------------------------------------------------------ */

static const char *const op_names[] = {"sum", "mean", "prod", "min", "max", "argmin", "argmax",
                                       "std", "var", "norm", "all", "any", "logsumexp"};

static int64_t failures_reported;

/* Values of x grouped per output (kept dims row-major) in reduction order (reduced dims
 * row-major); returns false when allocation fails. */
static bool group_values(const td_tensor *x, const bool *reduced, int64_t O, int64_t R, ld **pf,
                         int64_t **pi) {
  const int64_t total = O * R;
  *pf = malloc(sizeof(ld) * (size_t)(total ? total : 1));
  *pi = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
  if (!*pf || !*pi) return false;
  if (total == 0) return true;
  int64_t idx[TD_MAX_DIMS] = {0};
  do {
    int64_t o = 0, r = 0;
    for (int32_t d = 0; d < x->ndim; d++) {
      if (reduced[d]) r = r * x->shape[d] + idx[d];
      else o = o * x->shape[d] + idx[d];
    }
    const char *p = elem_ptr(x, idx);
    (*pf)[o * R + r] = raw_f(x->dtype, p);
    (*pi)[o * R + r] = raw_i(x->dtype, p);
  } while (next_index(x->ndim, x->shape, idx));
  return true;
}

static void flags_of(const td_tensor *x, const int32_t *dims, int32_t ndims, bool *reduced,
                     int64_t *O, int64_t *R) {
  *O = *R = 1;
  for (int32_t d = 0; d < x->ndim; d++) reduced[d] = ndims == 0;
  for (int32_t k = 0; k < ndims; k++)
    if (dims[k] < x->ndim) reduced[dims[k]] = true;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (reduced[d]) *R *= x->shape[d];
    else *O *= x->shape[d];
  }
}

static bool shape_ok(const td_tensor *x, const td_tensor *out, const bool *reduced,
                     int32_t keepdim) {
  int32_t nd = 0;
  for (int32_t d = 0; d < x->ndim; d++) {
    if (reduced[d] && !keepdim) continue;
    if (nd >= out->ndim || out->shape[nd] != (reduced[d] ? 1 : x->shape[d])) return false;
    nd++;
  }
  return nd == out->ndim;
}

static void describe(const char *what, int32_t op, const td_tensor *x, const int32_t *dims,
                     int32_t ndims, int32_t keepdim, double param) {
  if (failures_reported++ > 20) return;
  fprintf(stderr, "  in %s: %s(%s, dims {", what, op_names[op], td_dtype_name(x->dtype));
  for (int32_t k = 0; k < ndims; k++) fprintf(stderr, k ? ", %d" : "%d", (int)dims[k]);
  fprintf(stderr, "}, keepdim %d, param %g) shape [", (int)keepdim, param);
  for (int32_t d = 0; d < x->ndim; d++) fprintf(stderr, d ? ", %lld" : "%lld", (long long)x->shape[d]);
  fprintf(stderr, "]\n");
}

/* One td_reduce call checked against the reference: its shape, dtype and every value
 * (or the refusal an empty extreme must give). Counts one CHECK. */
static void check_reduce(const char *what, const td_tensor *x, int32_t op, const int32_t *dims,
                         int32_t ndims, int32_t keepdim, double param) {
  bool reduced[TD_MAX_DIMS];
  int64_t O, R;
  flags_of(x, dims, ndims, reduced, &O, &R);
  if (x->ndim == 0) O = R = 1;
  const bool no_identity = op == TD_RED_MIN || op == TD_RED_MAX || op == TD_RED_ARGMIN ||
                           op == TD_RED_ARGMAX || (op == TD_RED_NORM && param < 0);
  td_tensor *out = td_reduce(op, x, dims, ndims, keepdim, param);
  if (R == 0 && no_identity) {
    bool ok = out == NULL && td_last_status() == TD_EINVAL;
    CHECK(ok);
    if (!ok) describe(what, op, x, dims, ndims, keepdim, param);
    td_tensor_release(out);
    return;
  }
  const int32_t odt = out_dtype_of(op, x->dtype);
  bool ok = out != NULL && out->dtype == odt &&
            (x->ndim == 0 ? out->ndim == 0 : shape_ok(x, out, reduced, keepdim));
  ld *f = NULL;
  int64_t *iv = NULL;
  ok = ok && group_values(x, reduced, O, R, &f, &iv);
  const char *data = out ? td_tensor_data_borrow(out) : NULL;
  for (int64_t o = 0; ok && o < O; o++) {
    ld mag;
    refv want = ref_op(op, x->dtype, f + o * R, iv + o * R, R, param, &mag);
    const char *p = data + o * td_dtype_itemsize(odt);
    if (want.is_int) {
      ok = raw_i(odt, p) == want.i;
      if (!ok && failures_reported < 20)
        fprintf(stderr, "  output %lld: got %lld want %lld\n", (long long)o,
                (long long)raw_i(odt, p), (long long)want.i);
    } else {
      ok = float_close(odt, raw_f(odt, p), want.f, mag);
      if (!ok && failures_reported < 20)
        fprintf(stderr, "  output %lld: got %.17Lg want %.17Lg\n", (long long)o, raw_f(odt, p),
                want.f);
    }
  }
  CHECK(ok);
  if (!ok) describe(what, op, x, dims, ndims, keepdim, param);
  free(f);
  free(iv);
  td_tensor_release(out);
}

/* Every op (and param) x accepts, over each dim list given; keepdim both ways. */
static const double norm_ps[] = {2, 1, INFINITY, -INFINITY, 0, 3, 0.5, -1};
static const double corrections[] = {1, 0, 2, 0.5};

static void check_all_ops(const char *what, const td_tensor *x, const int32_t (*dimsets)[4],
                          const int32_t *ndimsets, int32_t nsets) {
  for (int32_t op = TD_RED_SUM; op <= TD_RED_LOGSUMEXP; op++) {
    if (!op_accepts(op, x->dtype)) continue;
    const double *params = op == TD_RED_NORM ? norm_ps : corrections;
    const int32_t nparams = op == TD_RED_NORM ? 8 : (op == TD_RED_STD || op == TD_RED_VAR) ? 4 : 1;
    for (int32_t pi = 0; pi < nparams; pi++)
      for (int32_t s = 0; s < nsets; s++)
        for (int32_t keep = 0; keep < 2; keep++)
          check_reduce(what, x, op, dimsets[s], ndimsets[s], keep, params[pi]);
  }
}

/* ---- layouts ------------------------------------------------------------------------------ */

static const int32_t sets3[][4] = {{0}, {0}, {1}, {2}, {0, 2}, {2, 1}, {0, 1, 2}};
static const int32_t nsets3[] = {0, 1, 1, 1, 2, 2, 3};
static const int32_t sets1[][4] = {{0}, {0}};
static const int32_t nsets1[] = {0, 1};

/* Every dtype through every op on contiguous, transposed, expanded, sliced, size-1,
 * size-0, 1-dim and 0-dim inputs. */
static void test_layouts(void) {
  for (int32_t dt = 0; dt < TD_NUM_DTYPES; dt++) {
    const int64_t s345[3] = {3, 4, 5}, s543[3] = {5, 4, 3}, s315[3] = {3, 1, 5};
    const int64_t s6410[3] = {6, 4, 10}, s305[3] = {3, 0, 5}, s7 = 7;
    td_tensor *c = make(3, s345, dt);
    check_all_ops("contiguous", c, sets3, nsets3, 7);

    td_tensor *b = make(3, s543, dt), tv;
    CHECK_EQ_I(td_tensor_transpose(b, 0, 2, &tv), TD_OK);
    check_all_ops("transposed", &tv, sets3, nsets3, 7);

    td_tensor *e = make(3, s315, dt), ev;
    CHECK_EQ_I(td_tensor_expand(e, 3, s345, &ev), TD_OK);
    CHECK_EQ_I(ev.strides[1], 0);
    check_all_ops("expanded", &ev, sets3, nsets3, 7);
    check_all_ops("size-1 dim", e, sets3, nsets3, 7);

    td_tensor *w = make(3, s6410, dt), sv;
    CHECK_EQ_I(td_tensor_slice(w, 0, 1, 6, 2, &sv), TD_OK);
    CHECK_EQ_I(td_tensor_slice(&sv, 2, 0, 10, 2, &sv), TD_OK);
    check_all_ops("sliced", &sv, sets3, nsets3, 7);

    td_tensor *z = make(3, s305, dt);
    check_all_ops("size-0 dim", z, sets3, nsets3, 7);

    td_tensor *v = make(1, &s7, dt);
    check_all_ops("1-dim", v, sets1, nsets1, 2);
    td_tensor *sc = make(0, NULL, dt);
    check_all_ops("0-dim", sc, sets1, nsets1, 2);

    td_tensor *list[] = {c, b, e, w, z, v, sc};
    for (size_t k = 0; k < sizeof list / sizeof list[0]; k++) td_tensor_release(list[k]);
  }
}

/* NaN and infinities placed so that every rule shows: rows with one or two NaNs, a row
 * with +inf and -inf, a row of -inf only, a row of +inf, and finite rows. */
static void test_nan_inf(void) {
  const int64_t shape[2] = {6, 5};
  const double rows[6][5] = {
      {1, 3, -2, 3, 0},
      {1, NAN, 5, NAN, -7},
      {INFINITY, 2, -INFINITY, 1, 0},
      {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY},
      {INFINITY, 1, INFINITY, 2, 3},
      {-1, -1, -0.5, -1, -0.5}};
  const int32_t sets[][4] = {{0}, {0}, {1}};
  const int32_t nsets[] = {0, 1, 1};
  for (int32_t dt = TD_FLOAT16; dt <= TD_FLOAT64; dt++) {
    td_tensor *t = td_tensor_empty(2, shape, dt), tv;
    for (int64_t i = 0; i < 6; i++)
      for (int64_t j = 0; j < 5; j++) td_tensor_write_f64(t, (int64_t[]){i, j}, rows[i][j]);
    check_all_ops("nan/inf", t, sets, nsets, 3);
    CHECK_EQ_I(td_tensor_transpose(t, 0, 1, &tv), TD_OK);
    check_all_ops("nan/inf transposed", &tv, sets, nsets, 3);
    td_tensor_release(t);
  }
  /* Spot checks of the rules themselves, independent of the reference code. */
  const int64_t n = 5;
  td_tensor *t = td_tensor_empty(1, &n, TD_FLOAT32);
  const double v[5] = {1, NAN, 5, NAN, -7};
  for (int64_t i = 0; i < 5; i++) td_tensor_write_f64(t, &i, v[i]);
  td_tensor *m = td_reduce(TD_RED_MAX, t, NULL, 0, 0, 0);
  td_tensor *am = td_reduce(TD_RED_ARGMAX, t, NULL, 0, 0, 0);
  td_tensor *an = td_reduce(TD_RED_ARGMIN, t, NULL, 0, 0, 0);
  CHECK(m && isnan(*(float *)td_tensor_data_borrow(m)));
  CHECK(am && *(int64_t *)td_tensor_data_borrow(am) == 1);
  CHECK(an && *(int64_t *)td_tensor_data_borrow(an) == 1);
  td_tensor_release(m);
  td_tensor_release(am);
  td_tensor_release(an);
  td_tensor_release(t);
}

static void check_with_index(const char *what, const td_tensor *x, int32_t op, int32_t dim,
                             int32_t keepdim);

/* Rows long enough for the vectorised extremes, with NaN, infinities and ties placed
 * in vector lanes, in the tail, and at the first element. */
static void test_long_rows_special(void) {
  const int64_t shape[2] = {8, 203};
  const int32_t d1[1] = {1};
  for (int32_t dt = TD_FLOAT16; dt <= TD_FLOAT64; dt++) {
    td_tensor *t = make(2, shape, dt), tv;
    const struct { int64_t r, c; double v; } spots[] = {
        {0, 0, NAN},        {1, 37, NAN},       {1, 150, NAN},      {2, 201, NAN},
        {3, 5, INFINITY},   {3, 99, INFINITY},  {4, 7, -INFINITY},  {4, 202, -INFINITY},
        {5, 64, 100},       {5, 65, 100},       {5, 200, 100},      {6, 17, -100},
        {6, 190, -100}};
    for (size_t k = 0; k < sizeof spots / sizeof spots[0]; k++)
      td_tensor_write_f64(t, (int64_t[]){spots[k].r, spots[k].c}, spots[k].v);
    for (int64_t c = 0; c < 203; c++) td_tensor_write_f64(t, (int64_t[]){7, c}, -INFINITY);
    const int32_t ops[] = {TD_RED_MIN, TD_RED_MAX, TD_RED_ARGMIN, TD_RED_ARGMAX,
                           TD_RED_LOGSUMEXP, TD_RED_NORM, TD_RED_SUM};
    CHECK_EQ_I(td_tensor_transpose(t, 0, 1, &tv), TD_OK);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
      check_reduce("long rows", t, ops[k], d1, 1, 0, INFINITY);
      check_reduce("long rows", t, ops[k], NULL, 0, 0, INFINITY);
      check_reduce("long rows transposed", &tv, ops[k], NULL, 0, 0, INFINITY);
    }
    for (int32_t op = TD_RED_MIN; op <= TD_RED_MAX; op++) {
      check_with_index("long rows", t, op, 1, 0);
      check_with_index("long rows transposed", &tv, op, 0, 1);
    }
    td_tensor_release(t);
  }
}

/* ---- larger inputs: pieces, column blocks, multi-dim reduced iterators, threads --------- */

static void check_some_ops(const char *what, const td_tensor *x, const int32_t *dims,
                           int32_t ndims) {
  static const int32_t ops[] = {TD_RED_SUM, TD_RED_MEAN, TD_RED_MIN, TD_RED_MAX,
                                TD_RED_ARGMIN, TD_RED_ARGMAX, TD_RED_STD, TD_RED_VAR,
                                TD_RED_NORM, TD_RED_ALL, TD_RED_ANY, TD_RED_LOGSUMEXP};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    if (!op_accepts(ops[k], x->dtype)) continue;
    check_reduce(what, x, ops[k], dims, ndims, 0, 1);
    if (ops[k] == TD_RED_NORM) {
      check_reduce(what, x, ops[k], dims, ndims, 1, INFINITY);
      check_reduce(what, x, ops[k], dims, ndims, 0, 1.5);
    }
  }
}

static void test_large(void) {
  const int32_t d0[1] = {0}, d1[1] = {1}, d2[1] = {2}, d02[2] = {0, 2}, d01[2] = {0, 1};
  const int32_t dts[3] = {TD_FLOAT32, TD_FLOAT64, TD_INT32};
  for (int32_t k = 0; k < 3; k++) {
    const int32_t dt = dts[k];
    /* Inner rows longer than a piece; dim 0 with many column blocks. */
    const int64_t wide[2] = {3, 40000};
    td_tensor *a = make(2, wide, dt);
    check_some_ops("wide", a, NULL, 0);
    check_some_ops("wide", a, d1, 1);
    check_some_ops("wide", a, d0, 1);
    /* Tall: outer layout with row pieces (few columns), and short inner rows. */
    const int64_t tall[2] = {40000, 3};
    td_tensor *b = make(2, tall, dt), bt;
    check_some_ops("tall", b, d0, 1);
    check_some_ops("tall", b, d1, 1);
    CHECK_EQ_I(td_tensor_transpose(b, 0, 1, &bt), TD_OK);
    check_some_ops("tall transposed", &bt, d0, 1);
    check_some_ops("tall transposed", &bt, d1, 1);
    check_some_ops("tall transposed", &bt, NULL, 0);
    /* Matrices: one column block with row pieces; transposed. */
    const int64_t mat[2] = {700, 300};
    td_tensor *c = make(2, mat, dt), ct;
    check_some_ops("700x300", c, d0, 1);
    check_some_ops("700x300", c, d1, 1);
    CHECK_EQ_I(td_tensor_transpose(c, 0, 1, &ct), TD_OK);
    check_some_ops("700x300 transposed", &ct, d0, 1);
    check_some_ops("700x300 transposed", &ct, d1, 1);
    /* 3-D: reduced dims that do not merge, with and without pieces. */
    const int64_t s3[3] = {2, 3, 50000}, c3[3] = {50, 40, 60};
    td_tensor *d = make(3, s3, dt), *e = make(3, c3, dt);
    check_some_ops("2x3x50000", d, d02, 2);
    check_some_ops("50x40x60", e, d01, 2);
    check_some_ops("50x40x60", e, d02, 2);
    check_some_ops("50x40x60", e, d1, 1);
    check_some_ops("50x40x60", e, d2, 1);
    td_tensor *list[] = {a, b, c, d, e};
    for (size_t i = 0; i < 5; i++) td_tensor_release(list[i]);
  }
  /* Products over many elements: values of magnitude 1 keep them finite. */
  const int64_t n = 100000;
  td_tensor *p = td_tensor_empty(1, &n, TD_FLOAT64);
  for (int64_t i = 0; i < n; i++) td_tensor_write_f64(p, &i, (rnd() & 1) ? 1.0 : -1.0);
  check_reduce("prod of +-1", p, TD_RED_PROD, NULL, 0, 0, 0);
  td_tensor_release(p);
  /* argmax ties across pieces: equal maxima in different pieces, the first wins. */
  td_tensor *t = td_tensor_full(1, &n, TD_FLOAT32, 0);
  td_tensor_write_f64(t, (int64_t[]){70000}, 5);
  td_tensor_write_f64(t, (int64_t[]){40000}, 5);
  td_tensor_write_f64(t, (int64_t[]){99999}, 5);
  td_tensor *am = td_reduce(TD_RED_ARGMAX, t, NULL, 0, 0, 0);
  CHECK(am && *(int64_t *)td_tensor_data_borrow(am) == 40000);
  td_tensor *ami = td_reduce(TD_RED_ARGMIN, t, NULL, 0, 0, 0);
  CHECK(ami && *(int64_t *)td_tensor_data_borrow(ami) == 0);
  td_tensor_release(am);
  td_tensor_release(ami);
  td_tensor_release(t);
}

/* float32 sums accumulate in double: 10M copies of 0.1f sum to the correctly rounded
 * value, where a float accumulator would be far off. */
static void test_sum_accuracy(void) {
  const int64_t n = 10000000;
  td_tensor *t = td_tensor_full(1, &n, TD_FLOAT32, 0.1);
  td_tensor *s = td_reduce(TD_RED_SUM, t, NULL, 0, 0, 0);
  const float want = (float)((ld)n * (ld)0.1f);
  CHECK(s && *(float *)td_tensor_data_borrow(s) == want);
  td_tensor *m = td_reduce(TD_RED_MEAN, t, NULL, 0, 0, 0);
  CHECK(m && *(float *)td_tensor_data_borrow(m) == 0.1f);
  td_tensor *v = td_reduce(TD_RED_VAR, t, NULL, 0, 0, 1);
  CHECK(v && *(float *)td_tensor_data_borrow(v) == 0.0f);
  /* Variance of data with a large offset: no catastrophic cancellation. */
  td_tensor *u = td_tensor_empty(1, &n, TD_FLOAT64);
  for (int64_t i = 0; i < n; i++) td_tensor_write_f64(u, &i, 1e9 + (double)(i % 2));
  td_tensor *uv = td_reduce(TD_RED_VAR, u, NULL, 0, 0, 0);
  CHECK(uv && fabs(*(double *)td_tensor_data_borrow(uv) - 0.25) < 1e-9);
  td_tensor *list[] = {t, s, m, v, u, uv};
  for (size_t i = 0; i < 6; i++) td_tensor_release(list[i]);
}

/* The same bits whatever the thread count. */
static bool same_bits(const td_tensor *a, const td_tensor *b) {
  return a && b && td_tensor_numel(a) == td_tensor_numel(b) &&
         memcmp(td_tensor_data_borrow(a), td_tensor_data_borrow(b),
                (size_t)(td_tensor_numel(a) * a->itemsize)) == 0;
}

static void test_threads(void) {
  const int64_t n = 10000000, mat[2] = {3000, 3000};
  td_tensor *big = td_tensor_empty(1, &n, TD_FLOAT32);
  float *p = td_tensor_data_borrow(big);
  for (int64_t i = 0; i < n; i++) p[i] = (float)((double)(rnd() >> 11) * 0x1p-53 * 2 - 1);
  td_tensor *m = make(2, mat, TD_FLOAT32), mt;
  CHECK_EQ_I(td_tensor_transpose(m, 0, 1, &mt), TD_OK);
  const int32_t d0[1] = {0}, d1[1] = {1};
  struct {
    const td_tensor *x;
    int32_t op;
    const int32_t *dims;
    int32_t ndims;
  } cases[] = {{big, TD_RED_SUM, NULL, 0},     {big, TD_RED_VAR, NULL, 0},
               {big, TD_RED_LOGSUMEXP, NULL, 0}, {big, TD_RED_NORM, NULL, 0},
               {m, TD_RED_SUM, d0, 1},          {m, TD_RED_SUM, d1, 1},
               {m, TD_RED_VAR, d0, 1},          {&mt, TD_RED_MEAN, d1, 1},
               {&mt, TD_RED_ARGMAX, d0, 1}};
  const int32_t before = td_get_num_threads();
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    td_set_num_threads(1);
    td_tensor *one = td_reduce(cases[k].op, cases[k].x, cases[k].dims, cases[k].ndims, 0, 2);
    td_set_num_threads(3);
    td_tensor *three = td_reduce(cases[k].op, cases[k].x, cases[k].dims, cases[k].ndims, 0, 2);
    td_set_num_threads(7);
    td_tensor *seven = td_reduce(cases[k].op, cases[k].x, cases[k].dims, cases[k].ndims, 0, 2);
    CHECK(same_bits(one, three) && same_bits(one, seven));
    td_tensor_release(one);
    td_tensor_release(three);
    td_tensor_release(seven);
  }
  td_set_num_threads(1);
  td_tensor *c1 = td_cumsum(m, 0);
  td_set_num_threads(3);
  td_tensor *c3 = td_cumsum(m, 0);
  CHECK(same_bits(c1, c3));
  td_set_num_threads(before);
  td_tensor_release(c1);
  td_tensor_release(c3);
  td_tensor_release(big);
  td_tensor_release(m);
}

/* ---- min/max with indices ------------------------------------------------------------------- */

static void check_with_index(const char *what, const td_tensor *x, int32_t op, int32_t dim,
                             int32_t keepdim) {
  bool reduced[TD_MAX_DIMS];
  int64_t O, R;
  flags_of(x, &dim, 1, reduced, &O, &R);
  if (x->ndim == 0) O = R = 1;
  td_tensor *vals = (td_tensor *)&failures_reported, *idx = (td_tensor *)&failures_reported;
  int32_t st = td_reduce_with_index(op, x, dim, keepdim, &vals, &idx);
  if (R == 0) {
    CHECK(st == TD_EINVAL && vals == (td_tensor *)&failures_reported &&
          idx == (td_tensor *)&failures_reported);
    return;
  }
  bool ok = st == TD_OK && vals->dtype == x->dtype && idx->dtype == TD_INT64 &&
            (x->ndim == 0 ? vals->ndim == 0 && idx->ndim == 0
                          : shape_ok(x, vals, reduced, keepdim) && shape_ok(x, idx, reduced, keepdim));
  ld *f = NULL;
  int64_t *iv = NULL;
  ok = ok && group_values(x, reduced, O, R, &f, &iv);
  const int32_t argop = op == TD_RED_MIN ? TD_RED_ARGMIN : TD_RED_ARGMAX;
  for (int64_t o = 0; ok && o < O; o++) {
    ld mag;
    refv wi = ref_op(argop, x->dtype, f + o * R, iv + o * R, R, 0, &mag);
    refv wv = ref_op(op, x->dtype, f + o * R, iv + o * R, R, 0, &mag);
    const char *pv = (const char *)td_tensor_data_borrow(vals) + o * x->itemsize;
    const int64_t gi = ((const int64_t *)td_tensor_data_borrow(idx))[o];
    ok = gi == wi.i &&
         (wv.is_int ? raw_i(x->dtype, pv) == wv.i
                    : (is_nan(wv.f) ? is_nan(raw_f(x->dtype, pv)) : raw_f(x->dtype, pv) == wv.f));
  }
  CHECK(ok);
  if (!ok) describe(what, op, x, &dim, 1, keepdim, 0);
  free(f);
  free(iv);
  if (st == TD_OK) {
    td_tensor_release(vals);
    td_tensor_release(idx);
  }
}

static void test_with_index(void) {
  for (int32_t dt = 0; dt < TD_NUM_DTYPES; dt++) {
    const int64_t s345[3] = {3, 4, 5}, s305[3] = {3, 0, 5}, big[2] = {300, 2000};
    td_tensor *c = make(3, s345, dt), *z = make(3, s305, dt), *sc = make(0, NULL, dt);
    td_tensor *g = make(2, big, dt), tv, gv;
    CHECK_EQ_I(td_tensor_transpose(c, 0, 2, &tv), TD_OK);
    CHECK_EQ_I(td_tensor_transpose(g, 0, 1, &gv), TD_OK);
    for (int32_t op = TD_RED_MIN; op <= TD_RED_MAX; op++)
      for (int32_t keep = 0; keep < 2; keep++) {
        for (int32_t d = 0; d < 3; d++) {
          check_with_index("contiguous", c, op, d, keep);
          check_with_index("transposed", &tv, op, d, keep);
          check_with_index("size-0", z, op, d, keep);
        }
        for (int32_t d = 0; d < 2; d++) {
          check_with_index("300x2000", g, op, d, keep);
          check_with_index("300x2000 transposed", &gv, op, d, keep);
        }
        check_with_index("0-dim", sc, op, 0, keep);
      }
    td_tensor_release(c);
    td_tensor_release(z);
    td_tensor_release(sc);
    td_tensor_release(g);
  }
  /* NaN wins, at its first position. */
  const int64_t shape[2] = {2, 4};
  td_tensor *t = td_tensor_full(2, shape, TD_FLOAT64, 1);
  td_tensor_write_f64(t, (int64_t[]){1, 2}, NAN);
  td_tensor_write_f64(t, (int64_t[]){1, 3}, NAN);
  td_tensor *v = NULL, *ix = NULL;
  CHECK_EQ_I(td_reduce_with_index(TD_RED_MIN, t, 1, 0, &v, &ix), TD_OK);
  CHECK(v && isnan(((double *)td_tensor_data_borrow(v))[1]));
  CHECK(ix && ((int64_t *)td_tensor_data_borrow(ix))[1] == 2 &&
        ((int64_t *)td_tensor_data_borrow(ix))[0] == 0);
  td_tensor_release(v);
  td_tensor_release(ix);
  td_tensor_release(t);
}

/* ---- cumsum ------------------------------------------------------------------------------------ */

static void check_cumsum(const char *what, const td_tensor *x, int32_t dim) {
  td_tensor *out = td_cumsum(x, dim);
  const int32_t odt = is_float(x->dtype) ? x->dtype : TD_INT64;
  bool ok = out && out->dtype == odt && out->ndim == x->ndim;
  for (int32_t d = 0; ok && d < x->ndim; d++) ok = out->shape[d] == x->shape[d];
  if (ok && td_tensor_numel(x) > 0) {
    int64_t idx[TD_MAX_DIMS] = {0};
    do {
      if (x->ndim > 0 && idx[dim] != 0) continue; /* each line from its start */
      ld s = 0;
      uint64_t si = 0;
      const int64_t len = x->ndim ? x->shape[dim] : 1;
      int64_t j[TD_MAX_DIMS];
      memcpy(j, idx, sizeof j);
      for (int64_t k = 0; ok && k < len; k++) {
        if (x->ndim) j[dim] = k;
        const char *p = elem_ptr(x, j), *q = elem_ptr(out, j);
        if (is_float(x->dtype)) {
          s += raw_f(x->dtype, p);
          ok = float_close(odt, raw_f(odt, q), s, (ld)(k + 1) * 100);
        } else {
          si += (uint64_t)raw_i(x->dtype, p);
          ok = raw_i(TD_INT64, q) == (int64_t)si;
        }
      }
    } while (ok && next_index(x->ndim, x->shape, idx));
  }
  CHECK(ok);
  if (!ok && failures_reported++ < 20)
    fprintf(stderr, "  in %s: cumsum(%s, dim %d)\n", what, td_dtype_name(x->dtype), (int)dim);
  td_tensor_release(out);
}

static void test_cumsum(void) {
  for (int32_t dt = 0; dt < TD_NUM_DTYPES; dt++) {
    const int64_t s345[3] = {3, 4, 5}, s315[3] = {3, 1, 5}, s305[3] = {3, 0, 5};
    const int64_t tall[2] = {3000, 50}, wide[2] = {50, 3000};
    td_tensor *c = make(3, s345, dt), *e = make(3, s315, dt), *z = make(3, s305, dt);
    td_tensor *sc = make(0, NULL, dt), *t = make(2, tall, dt), *w = make(2, wide, dt);
    td_tensor tv, ev, ttv;
    CHECK_EQ_I(td_tensor_transpose(c, 0, 2, &tv), TD_OK);
    CHECK_EQ_I(td_tensor_expand(e, 3, s345, &ev), TD_OK);
    CHECK_EQ_I(td_tensor_transpose(t, 0, 1, &ttv), TD_OK);
    for (int32_t d = 0; d < 3; d++) {
      check_cumsum("contiguous", c, d);
      check_cumsum("transposed", &tv, d);
      check_cumsum("expanded", &ev, d);
      check_cumsum("size-0", z, d);
    }
    for (int32_t d = 0; d < 2; d++) {
      check_cumsum("3000x50", t, d);
      check_cumsum("50x3000", w, d);
      check_cumsum("3000x50 transposed", &ttv, d);
    }
    check_cumsum("0-dim", sc, 0);
    td_tensor *list[] = {c, e, z, sc, t, w};
    for (size_t k = 0; k < 6; k++) td_tensor_release(list[k]);
  }
}

/* ---- errors ------------------------------------------------------------------------------------- */

/* A refused call returns NULL, sets status and a message containing text, and
 * allocates nothing. */
#define CHECK_REFUSED(call, status, text)                                         \
  do {                                                                            \
    td_clear_error();                                                             \
    const int64_t live_ = td_live_bytes();                                        \
    td_tensor *r_ = (call);                                                       \
    CHECK(r_ == NULL && td_last_status() == (status) && td_live_bytes() == live_); \
    CHECK_ERROR(text);                                                            \
    td_tensor_release(r_);                                                        \
  } while (0)

static void test_errors(void) {
  const int64_t s345[3] = {3, 4, 5}, s305[3] = {3, 0, 5}, zero = 0;
  td_tensor *f = make(3, s345, TD_FLOAT32), *i = make(3, s345, TD_INT64);
  td_tensor *z = make(3, s305, TD_FLOAT32), *e = td_tensor_empty(1, &zero, TD_FLOAT64);
  const int32_t d3[1] = {3}, dneg[1] = {-1}, d11[2] = {1, 1}, d1[1] = {1}, d02[2] = {0, 2};
  CHECK_REFUSED(td_reduce(TD_RED_SUM, f, d3, 1, 0, 0), TD_EINDEX,
                "sum: dim 3 is out of range for a tensor of 3 dims");
  CHECK_REFUSED(td_reduce(TD_RED_MAX, f, dneg, 1, 0, 0), TD_EINDEX,
                "max: dim -1 is out of range for a tensor of 3 dims");
  CHECK_REFUSED(td_reduce(TD_RED_SUM, f, d11, 2, 0, 0), TD_EINVAL,
                "sum: dim 1 appears multiple times in the list of dims");
  CHECK_REFUSED(td_reduce(TD_RED_MEAN, i, NULL, 0, 0, 0), TD_EDTYPE,
                "mean: could not infer output dtype. Input dtype must be either a floating "
                "point or complex dtype. Got: int64");
  CHECK_REFUSED(td_reduce(TD_RED_VAR, i, d1, 1, 0, 1), TD_EDTYPE, "var: ");
  CHECK_ERROR("Got: int64");
  CHECK_REFUSED(td_reduce(TD_RED_STD, i, d1, 1, 0, 1), TD_EDTYPE, "std: ");
  CHECK_REFUSED(td_reduce(TD_RED_NORM, i, d1, 1, 0, 2), TD_EDTYPE, "norm: ");
  CHECK_REFUSED(td_reduce(TD_RED_NORM, f, d1, 1, 0, NAN), TD_EINVAL, "norm: p is NaN");
  CHECK_REFUSED(td_reduce(TD_RED_MAX, z, NULL, 0, 0, 0), TD_EINVAL,
                "max: Expected reduction dim to be specified for input.numel() == 0");
  CHECK_REFUSED(td_reduce(TD_RED_ARGMIN, e, NULL, 0, 0, 0), TD_EINVAL,
                "argmin: Expected reduction dim to be specified for input.numel() == 0");
  CHECK_REFUSED(td_reduce(TD_RED_MIN, z, d1, 1, 1, 0), TD_EINVAL,
                "min: Expected reduction dim 1 to have non-zero size");
  CHECK_ERROR("cannot reduce over a zero-size dimension");
  CHECK_REFUSED(td_reduce(TD_RED_NORM, e, NULL, 0, 0, -INFINITY), TD_EINVAL,
                "norm: cannot compute the -inf norm on an empty tensor");
  CHECK_REFUSED(td_reduce(99, f, NULL, 0, 0, 0), TD_EINVAL, "reduce: unknown op 99");
  CHECK_REFUSED(td_reduce(TD_RED_SUM, NULL, NULL, 0, 0, 0), TD_EINVAL, "sum: the tensor is NULL");
  CHECK_REFUSED(td_reduce(TD_RED_SUM, f, NULL, 2, 0, 0), TD_EINVAL, "sum: dims is NULL");
  CHECK_REFUSED(td_reduce(TD_RED_SUM, f, d02, -1, 0, 0), TD_EINVAL, "sum: -1 dims given");
  CHECK_REFUSED(td_cumsum(f, 3), TD_EINDEX, "cumsum: dim 3 is out of range for a tensor of 3 dims");
  CHECK_REFUSED(td_cumsum(NULL, 0), TD_EINVAL, "cumsum: the tensor is NULL");
  /* Empty reductions with an identity are fine: inf norm of nothing is 0. */
  td_tensor *n0 = td_reduce(TD_RED_NORM, e, NULL, 0, 0, INFINITY);
  CHECK(n0 && *(double *)td_tensor_data_borrow(n0) == 0);
  td_tensor_release(n0);

  /* with_index leaves the outputs alone when it refuses. */
  td_tensor *sentinel = f, *v = sentinel, *ix = sentinel;
  const int64_t live = td_live_bytes();
  CHECK_EQ_I(td_reduce_with_index(TD_RED_SUM, f, 0, 0, &v, &ix), TD_EINVAL);
  CHECK_ERROR("reduce_with_index: op 0 is not min");
  CHECK_EQ_I(td_reduce_with_index(TD_RED_MAX, f, 3, 0, &v, &ix), TD_EINDEX);
  CHECK_ERROR("max: dim 3 is out of range for a tensor of 3 dims");
  CHECK_EQ_I(td_reduce_with_index(TD_RED_MAX, z, 1, 0, &v, &ix), TD_EINVAL);
  CHECK_ERROR("max: Expected reduction dim 1 to have non-zero size");
  CHECK_EQ_I(td_reduce_with_index(TD_RED_MIN, f, 0, 0, NULL, &ix), TD_EINVAL);
  CHECK_ERROR("min: the values output pointer is NULL");
  CHECK_EQ_I(td_reduce_with_index(TD_RED_MIN, NULL, 0, 0, &v, &ix), TD_EINVAL);
  CHECK(v == sentinel && ix == sentinel && td_live_bytes() == live);
  td_tensor *list[] = {f, i, z, e};
  for (size_t k = 0; k < 4; k++) td_tensor_release(list[k]);
}

/* Spot values written out by hand (torch's answers), so the reference code is not the
 * only judge. */
static void test_known_values(void) {
  const int64_t shape[2] = {2, 3};
  td_tensor *t = td_tensor_empty(2, shape, TD_FLOAT64);
  const double v[6] = {1, 2, 3, 4, 5, 6};
  for (int64_t k = 0; k < 6; k++) td_tensor_write_f64(t, (int64_t[]){k / 3, k % 3}, v[k]);
  const int32_t d0[1] = {0}, d1[1] = {1};
  td_tensor *s0 = td_reduce(TD_RED_SUM, t, d0, 1, 0, 0);
  td_tensor *s1 = td_reduce(TD_RED_SUM, t, d1, 1, 1, 0);
  td_tensor *va = td_reduce(TD_RED_VAR, t, NULL, 0, 0, 1);
  td_tensor *sd = td_reduce(TD_RED_STD, t, d1, 1, 0, 0);
  td_tensor *nm = td_reduce(TD_RED_NORM, t, NULL, 0, 0, 2);
  td_tensor *ls = td_reduce(TD_RED_LOGSUMEXP, t, d1, 1, 0, 0);
  td_tensor *am = td_reduce(TD_RED_ARGMAX, t, NULL, 0, 1, 0);
  const double *p;
  CHECK(s0 && s0->ndim == 1 && s0->shape[0] == 3);
  p = td_tensor_data_borrow(s0);
  CHECK(p[0] == 5 && p[1] == 7 && p[2] == 9);
  CHECK(s1 && s1->ndim == 2 && s1->shape[0] == 2 && s1->shape[1] == 1);
  p = td_tensor_data_borrow(s1);
  CHECK(p[0] == 6 && p[1] == 15);
  CHECK(va && va->ndim == 0 && fabs(*(double *)td_tensor_data_borrow(va) - 3.5) < 1e-15);
  p = td_tensor_data_borrow(sd);
  CHECK(fabs(p[0] - sqrt(2.0 / 3.0)) < 1e-15 && fabs(p[1] - sqrt(2.0 / 3.0)) < 1e-15);
  CHECK(fabs(*(double *)td_tensor_data_borrow(nm) - sqrt(91.0)) < 1e-14);
  p = td_tensor_data_borrow(ls);
  CHECK(fabs(p[0] - 3.40760596444438) < 1e-13 && fabs(p[1] - 6.40760596444438) < 1e-13);
  CHECK(am && am->ndim == 2 && am->shape[0] == 1 && *(int64_t *)td_tensor_data_borrow(am) == 5);
  td_tensor *list[] = {t, s0, s1, va, sd, nm, ls, am};
  for (size_t k = 0; k < 8; k++) td_tensor_release(list[k]);

  /* int sums wrap like torch's int64; bool sums count. */
  const int64_t two = 2;
  td_tensor *big = td_tensor_empty(1, &two, TD_INT64);
  ((int64_t *)td_tensor_data_borrow(big))[0] = INT64_MAX;
  ((int64_t *)td_tensor_data_borrow(big))[1] = 1;
  td_tensor *ws = td_reduce(TD_RED_SUM, big, NULL, 0, 0, 0);
  CHECK(ws && ws->dtype == TD_INT64 && *(int64_t *)td_tensor_data_borrow(ws) == INT64_MIN);
  td_tensor *bl = td_tensor_full(1, &two, TD_BOOL, 1);
  td_tensor *bs = td_reduce(TD_RED_SUM, bl, NULL, 0, 0, 0);
  CHECK(bs && bs->dtype == TD_INT64 && *(int64_t *)td_tensor_data_borrow(bs) == 2);
  td_tensor *li = td_reduce(TD_RED_LOGSUMEXP, bl, NULL, 0, 0, 0);
  CHECK(li && li->dtype == TD_FLOAT32 &&
        fabsf(*(float *)td_tensor_data_borrow(li) - (float)(1 + log(2.0))) < 1e-6f);
  td_tensor *list2[] = {big, ws, bl, bs, li};
  for (size_t k = 0; k < 5; k++) td_tensor_release(list2[k]);
}

int main(void) {
  td_set_num_threads(3); /* the pool runs even on a small machine */
  test_known_values();
  test_layouts();
  test_nan_inf();
  test_long_rows_special();
  test_large();
  test_sum_accuracy();
  test_threads();
  test_with_index();
  test_cumsum();
  test_errors();
  CHECK_SUMMARY();
}
