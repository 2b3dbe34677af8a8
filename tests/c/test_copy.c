/* test_copy.c: copy_, casts, fill_, arange, clone and element access. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

/* ---- helpers ---------------------------------------------------------------------- */

/* An element as an exact integer (bool and integer dtypes) or a double (floating). */
typedef struct val {
  bool is_int;
  int64_t i;
  double f;
} val;

static val load(const td_tensor *t, const int64_t *index) {
  const char *p = td_tensor_data_borrow(t);
  for (int32_t d = 0; d < t->ndim; d++)
    p += index[d] * t->strides[d] * td_dtype_itemsize(t->dtype);
  val v = {true, 0, 0};
  switch (t->dtype) {
    case TD_BOOL: case TD_UINT8: v.i = *(const uint8_t *)p; break;
    case TD_INT8: v.i = *(const int8_t *)p; break;
    case TD_INT16: v.i = *(const int16_t *)p; break;
    case TD_INT32: v.i = *(const int32_t *)p; break;
    case TD_INT64: v.i = *(const int64_t *)p; break;
    case TD_FLOAT16: v.is_int = false; v.f = td_half_to_float(*(const uint16_t *)p); break;
    case TD_BFLOAT16: v.is_int = false; v.f = td_bfloat16_to_float(*(const uint16_t *)p); break;
    case TD_FLOAT32: v.is_int = false; v.f = *(const float *)p; break;
    default: v.is_int = false; v.f = *(const double *)p; break;
  }
  return v;
}

static bool val_eq(val a, val b) {
  if (a.is_int != b.is_int) return false;
  if (a.is_int) return a.i == b.i;
  return (isnan(a.f) && isnan(b.f)) || (a.f == b.f && signbit(a.f) == signbit(b.f));
}

static int64_t wrap(int32_t dtype, int64_t x) {
  switch (dtype) {
    case TD_UINT8: return (uint8_t)(uint64_t)x;
    case TD_INT8: return (int8_t)(uint8_t)(uint64_t)x;
    case TD_INT16: return (int16_t)(uint16_t)(uint64_t)x;
    case TD_INT32: return (int32_t)(uint32_t)(uint64_t)x;
    default: return x;
  }
}

static int64_t saturate(int32_t dtype, double x) {
  static const double lo[] = {0, 0, -128.0, -32768.0, -2147483648.0, -0x1p63};
  static const int64_t ilo[] = {0, 0, INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN};
  static const int64_t ihi[] = {1, UINT8_MAX, INT8_MAX, INT16_MAX, INT32_MAX, INT64_MAX};
  if (isnan(x)) return 0;
  if (x <= lo[dtype]) return ilo[dtype];
  if (x >= (double)ihi[dtype]) return ihi[dtype];
  return (int64_t)x;
}

/* The documented cast rules, written independently of the library's loops. */
static val expect(int32_t dst, val v) {
  val r = {true, 0, 0};
  if (dst == TD_BOOL) {
    r.i = v.is_int ? v.i != 0 : v.f != 0;
  } else if (dst <= TD_INT64) {
    r.i = v.is_int ? wrap(dst, v.i) : saturate(dst, v.f);
  } else {
    r.is_int = false;
    float f = v.is_int ? (float)v.i : (float)v.f;
    if (dst == TD_FLOAT16) r.f = td_half_to_float(td_float_to_half(f));
    else if (dst == TD_BFLOAT16) r.f = td_bfloat16_to_float(td_float_to_bfloat16(f));
    else if (dst == TD_FLOAT32) r.f = f;
    else r.f = v.is_int ? (double)v.i : v.f;
  }
  return r;
}

/* Steps index through shape like an odometer; false after the last index. */
static bool next_index(int32_t ndim, const int64_t *shape, int64_t *index) {
  for (int32_t d = ndim - 1; d >= 0; d--) {
    if (++index[d] < shape[d]) return true;
    index[d] = 0;
  }
  return false;
}

/* Elements of a and b (one shape, one dtype) that differ, read without the kernels. */
static int64_t mismatches(const td_tensor *a, const td_tensor *b) {
  int32_t nd = a->ndim;
  if (nd != b->ndim) return -1;
  const int64_t *shape = a->shape;
  for (int32_t d = 0; d < nd; d++)
    if (shape[d] != b->shape[d]) return -1;
  if (td_tensor_numel(a) == 0) return 0;
  int64_t index[TD_MAX_DIMS] = {0}, bad = 0;
  do {
    if (!val_eq(load(a, index), load(b, index))) bad++;
  } while (next_index(nd, shape, index));
  return bad;
}

static double get(const td_tensor *t, int64_t i0, int64_t i1) {
  int64_t idx[2] = {i0, i1};
  double v = NAN;
  td_tensor_read_f64(t, idx, &v);
  return v;
}

/* ---- casts between every pair --------------------------------------------------------- */

static const double values[] = {
    0,     1,      -1,         2.5,        -2.5,          0.1,           127,
    128,   -128,   -129,       255,        256,           300,           -300,
    32767, 32768,  65504,      65520,      70000,         -70000,        2147483647.0,
    2147483648.0,  -2147483649.0, 1e10,    -1e10,         1099511627781.0, 9.3e18,
    -9.3e18, 1e300, -1e300,    INFINITY,   -INFINITY,     NAN,           -0.0,
    1e-8,  0.5,    -0.7,       3.0e38,     1e-300};
enum { NV = sizeof values / sizeof values[0] };

static void test_cast_pairs(void) {
  const int64_t n = NV, n2 = 2 * NV;
  int64_t bad_contig = 0, bad_strided = 0, bad_bcast = 0, bad_dst_strided = 0;
  for (int32_t s = 0; s < TD_NUM_DTYPES; s++) {
    td_tensor *src = td_tensor_empty(1, &n, s);
    td_tensor *wide = td_tensor_full(1, &n2, s, 7);
    td_tensor strided_v, *strided = &strided_v; /* caller-owned views of owned tensors */
    CHECK_EQ_I(td_tensor_slice(wide, 0, 1, n2, 2, strided), TD_OK);
    for (int64_t k = 0; k < n; k++) {
      CHECK_EQ_I(td_tensor_write_f64(src, &k, values[k]), TD_OK);
      CHECK_EQ_I(td_tensor_write_f64(strided, &k, values[k]), TD_OK);
    }
    for (int32_t d = 0; d < TD_NUM_DTYPES; d++) {
      td_tensor *dst = td_tensor_empty(1, &n, d);
      td_tensor *dwide = td_tensor_full(1, &n2, d, 0);
      td_tensor dview_v, *dview = &dview_v;
      CHECK_EQ_I(td_tensor_slice(dwide, 0, 0, n2, 2, dview), TD_OK);
      CHECK_EQ_I(td_tensor_copy_(dst, src), TD_OK);
      for (int64_t k = 0; k < n; k++)
        if (!val_eq(load(dst, &k), expect(d, load(src, &k)))) {
          if (!bad_contig++)
            fprintf(stderr, "cast %s -> %s of %g wrong\n", td_dtype_name(s), td_dtype_name(d),
                    values[k]);
        }
      td_tensor_fill_(dst, 0);
      CHECK_EQ_I(td_tensor_copy_(dst, strided), TD_OK);
      for (int64_t k = 0; k < n; k++)
        if (!val_eq(load(dst, &k), expect(d, load(src, &k)))) bad_strided++;
      CHECK_EQ_I(td_tensor_copy_(dview, src), TD_OK);
      for (int64_t k = 0; k < n; k++)
        if (!val_eq(load(dview, &k), expect(d, load(src, &k)))) bad_dst_strided++;
      for (int64_t k = 0; k < n; k += 5) { /* a 0-dim source broadcast over dst */
        td_tensor one;
        CHECK_EQ_I(td_tensor_select(src, 0, k, &one), TD_OK);
        CHECK_EQ_I(one.ndim, 0);
        CHECK_EQ_I(td_tensor_copy_(dst, &one), TD_OK);
        for (int64_t j = 0; j < n; j++)
          if (!val_eq(load(dst, &j), expect(d, load(src, &k)))) bad_bcast++;
      }
      td_tensor_release(dwide);
      td_tensor_release(dst);
    }
    td_tensor_release(wide);
    td_tensor_release(src);
  }
  CHECK_EQ_I(bad_contig, 0);
  CHECK_EQ_I(bad_strided, 0);
  CHECK_EQ_I(bad_dst_strided, 0);
  CHECK_EQ_I(bad_bcast, 0);
}

/* The rules spelled out on a few values, so a wrong reference cannot hide a bug. */
static void test_cast_rules(void) {
  const int64_t n = 1, i0 = 0;
  struct {
    int32_t dtype;
    double in, out;
  } cases[] = {
      {TD_INT32, 1e10, 2147483647.0},   {TD_INT32, -1e10, -2147483648.0},
      {TD_INT64, NAN, 0},               {TD_INT64, -1e300, -0x1p63},
      {TD_UINT8, -1, 0},                {TD_UINT8, 300, 255},
      {TD_UINT8, 255.9, 255},           {TD_INT8, 2.9, 2},
      {TD_INT8, -2.9, -2},              {TD_INT16, INFINITY, 32767},
      {TD_BOOL, 0.5, 1},                {TD_BOOL, NAN, 1},
      {TD_BOOL, -0.0, 0},               {TD_FLOAT16, 70000, INFINITY},
      {TD_FLOAT16, 65519, 65504},       {TD_BFLOAT16, 3.4e38, INFINITY},
      {TD_FLOAT32, 1e300, INFINITY},    {TD_FLOAT16, 1e-8, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    td_tensor *t = td_tensor_full(1, &n, cases[c].dtype, cases[c].in);
    double v = -42;
    CHECK_EQ_I(td_tensor_read_f64(t, &i0, &v), TD_OK);
    if (!(v == cases[c].out))
      fprintf(stderr, "full(%s, %g) read %g, want %g\n", td_dtype_name(cases[c].dtype),
              cases[c].in, v, cases[c].out);
    CHECK(v == cases[c].out);
    td_tensor_release(t);
  }
  /* int64 saturation is exact, not just close in double. */
  td_tensor *big = td_tensor_full(1, &n, TD_INT64, 1e30);
  CHECK(*(const int64_t *)td_tensor_data_borrow(big) == INT64_MAX);
  td_tensor_release(big);
  /* Integer narrowing wraps. */
  td_tensor *a = td_tensor_full(1, &n, TD_INT32, 300), *b = td_tensor_empty(1, &n, TD_INT8);
  td_tensor_copy_(b, a);
  CHECK_EQ_I(*(const int8_t *)td_tensor_data_borrow(b), 44);
  td_tensor_release(a);
  td_tensor_release(b);
  a = td_tensor_full(1, &n, TD_INT16, -1);
  b = td_tensor_empty(1, &n, TD_UINT8);
  td_tensor_copy_(b, a);
  CHECK_EQ_I(*(const uint8_t *)td_tensor_data_borrow(b), 255);
  td_tensor_release(a);
  td_tensor_release(b);
  /* A NaN payload survives a same-dtype copy bit for bit. */
  a = td_tensor_empty(1, &n, TD_FLOAT16);
  b = td_tensor_empty(1, &n, TD_FLOAT16);
  *(uint16_t *)td_tensor_data_borrow(a) = 0x7d01; /* a signalling half NaN */
  td_tensor_copy_(b, a);
  CHECK_EQ_I(*(const uint16_t *)td_tensor_data_borrow(b), 0x7d01);
  td_tensor_release(a);
  td_tensor_release(b);
}

/* ---- layouts ---------------------------------------------------------------------------- */

/* An owned r x c tensor 0, 1, 2, ...: a view of an arange, made owned with share so
 * that it outlives the arange it views. */
static td_tensor *arange2(int64_t r, int64_t c, int32_t dtype) {
  td_tensor *flat = td_tensor_arange(0, 1, r * c, dtype);
  int64_t shape[2] = {r, c};
  td_tensor v, *t = NULL;
  CHECK(flat != NULL);
  if (flat && td_tensor_view(flat, 2, shape, &v) == TD_OK) t = td_tensor_share(&v);
  CHECK(t != NULL && t->refcount == 1 && t->storage == flat->storage);
  td_tensor_release(flat);
  return t;
}

/* r x c distinct-looking values below 2039 (exact in every dtype but the 8-bit ones,
 * which wrap them), so a misplaced element shows. */
static td_tensor *pattern2(int64_t r, int64_t c, int32_t dtype) {
  td_tensor *p = arange2(r, c, TD_INT64);
  int64_t *v = td_tensor_data_borrow(p);
  for (int64_t k = 0; k < r * c; k++) v[k] = k * 7919 % 2039;
  td_tensor *t = td_tensor_to_dtype(p, dtype);
  td_tensor_release(p);
  return t;
}

static void test_transposed(void) {
  /* Every element size, sizes that are not multiples of the tile or micro-block, and
   * big enough to cross the tile blocks. */
  const int64_t dims[][2] = {{130, 70}, {300, 520}, {5, 200}, {200, 3}, {1, 100}};
  const int32_t dtypes[] = {TD_UINT8, TD_INT16, TD_FLOAT32, TD_FLOAT64, TD_INT64, TD_FLOAT16};
  for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
    for (size_t q = 0; q < sizeof dtypes / sizeof dtypes[0]; q++) {
      td_tensor *base = pattern2(dims[k][0], dims[k][1], dtypes[q]);
      td_tensor tv, *t = &tv;
      CHECK_EQ_I(td_tensor_transpose(base, 0, 1, t), TD_OK);
      td_tensor *c = td_tensor_contiguous(t);
      CHECK(c && td_tensor_is_contiguous(c));
      CHECK_EQ_I(mismatches(c, t), 0);
      /* Into a strided destination, too. */
      int64_t wshape[2] = {dims[k][1], dims[k][0] + 9};
      td_tensor *wide = td_tensor_full(2, wshape, dtypes[q], 0);
      td_tensor part_v, *part = &part_v;
      CHECK_EQ_I(td_tensor_slice(wide, 1, 4, 4 + dims[k][0], 1, part), TD_OK);
      CHECK_EQ_I(td_tensor_copy_(part, t), TD_OK);
      CHECK_EQ_I(mismatches(part, t), 0);
      CHECK(get(wide, 0, 3) == 0 && get(wide, dims[k][1] - 1, dims[k][0] + 4) == 0);
      CHECK(get(part, 1, 0) == get(base, 0, 1));
      td_tensor_release(wide);
      td_tensor_release(c);
      td_tensor_release(base);
    }
  /* 3-D permutations: the source's unit-stride dim is not next to the innermost. */
  const int32_t perms[][3] = {{2, 0, 1}, {1, 2, 0}, {2, 1, 0}, {0, 2, 1}, {1, 0, 2}};
  td_tensor *flat = td_tensor_arange(0, 1, 7 * 67 * 71, TD_FLOAT32);
  const int64_t shape3[3] = {7, 67, 71};
  td_tensor base_v, *base = &base_v;
  CHECK_EQ_I(td_tensor_view(flat, 3, shape3, base), TD_OK);
  for (size_t k = 0; k < sizeof perms / sizeof perms[0]; k++) {
    td_tensor pv, *p = &pv;
    CHECK_EQ_I(td_tensor_permute(base, perms[k], p), TD_OK);
    td_tensor *c = td_tensor_clone(p);
    CHECK(c && td_tensor_is_contiguous(c));
    CHECK_EQ_I(mismatches(c, p), 0);
    td_tensor_release(c);
  }
  td_tensor_release(flat);
}

static void test_sliced_and_expanded(void) {
  td_tensor *base = arange2(10, 12, TD_INT32);
  td_tensor rows_v, *rows = &rows_v, s_v, *s = &s_v;
  CHECK_EQ_I(td_tensor_slice(base, 0, 1, 10, 3, rows), TD_OK); /* rows 1, 4, 7 */
  CHECK_EQ_I(td_tensor_slice(rows, 1, 2, -1, 4, s), TD_OK);    /* cols 2, 6, 10 */
  td_tensor *c = td_tensor_contiguous(s);
  CHECK_EQ_I(td_tensor_size(c, 0), 3);
  CHECK_EQ_I(td_tensor_size(c, 1), 3); /* 2, 6, 10 */
  CHECK(get(c, 0, 0) == 14 && get(c, 1, 1) == 54 && get(c, 2, 2) == 94);
  CHECK_EQ_I(mismatches(c, s), 0);
  td_tensor_release(c);

  /* An expanded (stride 0) source, and copy_'s own broadcasting. */
  td_tensor *row = td_tensor_arange(0, 1, 5, TD_FLOAT64);
  const int64_t shape[2] = {4, 5};
  td_tensor ex_v, *ex = &ex_v;
  CHECK_EQ_I(td_tensor_expand(row, 2, shape, ex), TD_OK);
  CHECK_EQ_I(td_tensor_stride(ex, 0), 0);
  td_tensor *dst = td_tensor_empty(2, shape, TD_FLOAT32);
  CHECK_EQ_I(td_tensor_copy_(dst, ex), TD_OK);
  CHECK_EQ_I(mismatches(dst, ex), 0);
  CHECK(get(dst, 3, 4) == 4 && get(dst, 0, 2) == 2 && get(dst, 2, 0) == 0);
  td_tensor_fill_(dst, -1);
  CHECK_EQ_I(td_tensor_copy_(dst, row), TD_OK);
  CHECK(get(dst, 3, 4) == 4 && get(dst, 1, 1) == 1);
  const int64_t colshape[2] = {4, 1};
  td_tensor *col = td_tensor_full(2, colshape, TD_INT8, 3);
  CHECK_EQ_I(td_tensor_copy_(dst, col), TD_OK);
  CHECK(get(dst, 3, 4) == 3 && get(dst, 0, 0) == 3);
  td_tensor *cl = td_tensor_clone(ex); /* materialises the repeats */
  CHECK(cl && td_tensor_is_contiguous(cl) && td_tensor_stride(cl, 0) == 5);
  CHECK_EQ_I(mismatches(cl, ex), 0);
  td_tensor_release(cl);
  td_tensor_release(col);
  td_tensor_release(dst);
  td_tensor_release(row);

  /* The broadcast error names both shapes. */
  const int64_t s43[2] = {4, 3}, s32[2] = {3, 2};
  td_tensor *a = td_tensor_empty(2, s43, TD_FLOAT32), *b = td_tensor_empty(2, s32, TD_FLOAT32);
  CHECK_EQ_I(td_tensor_copy_(a, b), TD_ESHAPE);
  CHECK_ERROR("copy_: source shape [3, 2] does not broadcast to destination shape [4, 3]");
  const int64_t s143[3] = {1, 4, 3};
  td_tensor *c3 = td_tensor_empty(3, s143, TD_FLOAT32);
  CHECK_EQ_I(td_tensor_copy_(a, c3), TD_ESHAPE); /* more dims than the destination */
  CHECK_ERROR("[1, 4, 3]");
  CHECK_EQ_I(td_tensor_copy_(NULL, a), TD_EINVAL);
  CHECK_EQ_I(td_tensor_copy_(a, NULL), TD_EINVAL);
  td_tensor_release(c3);
  td_tensor_release(a);
  td_tensor_release(b);
  td_tensor_release(base);
}

/* Random shapes, permutations, steps and expansions, into permuted destinations:
 * exercises the iterator's dim dropping, ordering and merging. */
static void test_random_layouts(void) {
  uint64_t seed = 0x9e3779b97f4a7c15u;
#define RND(n) ((int64_t)((seed = seed * 6364136223846793005u + 1442695040888963407u) >> 33) % (n))
  int64_t bad = 0;
  for (int iter = 0; iter < 300; iter++) {
    int32_t nd = (int32_t)RND(5) + 1, perm[5], dperm[5];
    int64_t shape[5], full_shape[5];
    for (int32_t d = 0; d < nd; d++) {
      shape[d] = RND(4) + 1;
      full_shape[d] = shape[d] * 2 + 1;
      perm[d] = dperm[d] = d;
    }
    for (int32_t d = nd - 1; d > 0; d--) { /* shuffles */
      int32_t j = (int32_t)RND(d + 1), t = perm[d];
      perm[d] = perm[j];
      perm[j] = t;
      j = (int32_t)RND(d + 1);
      t = dperm[d];
      dperm[d] = dperm[j];
      dperm[j] = t;
    }
    int64_t total = 1;
    for (int32_t d = 0; d < nd; d++) total *= full_shape[d];
    int32_t dt = (int32_t)RND(TD_NUM_DTYPES);
    td_tensor *flat = td_tensor_arange(1, 1, total, dt);
    /* src is one caller-owned header, rewritten in place (out aliasing t) at each step. */
    td_tensor src_v, *src = &src_v;
    if (td_tensor_view(flat, nd, full_shape, src) != TD_OK) bad++;
    for (int32_t d = 0; d < nd; d++) { /* step 1 or 2 slices, sometimes size 1 expanded */
      int64_t step = RND(2) + 1, start = RND(2);
      if (td_tensor_slice(src, d, start, start + shape[d] * step, step, src) != TD_OK) bad++;
      if (RND(4) == 0) {
        if (td_tensor_slice(src, d, 0, 1, 1, src) != TD_OK) bad++;
        int64_t es[5];
        for (int32_t e = 0; e < nd; e++) es[e] = -1;
        es[d] = shape[d];
        if (td_tensor_expand(src, nd, es, src) != TD_OK) bad++;
      }
    }
    td_tensor pv, *p = &pv;
    if (td_tensor_permute(src, perm, p) != TD_OK) bad++;
    int64_t pshape[5], dshape[5];
    for (int32_t d = 0; d < nd; d++) pshape[d] = td_tensor_size(p, d);
    for (int32_t d = 0; d < nd; d++) dshape[dperm[d]] = pshape[d];
    td_tensor *dbase = td_tensor_full(nd, dshape, dt, 0);
    td_tensor dst_v, *dst = &dst_v; /* a destination in another order */
    if (td_tensor_permute(dbase, dperm, dst) != TD_OK) bad++;
    int32_t rc = td_tensor_copy_(dst, p);
    if (rc != TD_OK || mismatches(dst, p) != 0) bad++;
    td_tensor *c = td_tensor_contiguous(p);
    if (!c || mismatches(c, p) != 0) bad++;
    td_tensor_release(c);
    td_tensor_release(dbase);
    td_tensor_release(flat);
  }
#undef RND
  CHECK_EQ_I(bad, 0);
}

static void test_overlap(void) {
  /* Shift right by one within the same storage: a naive forward loop smears x[0]. */
  td_tensor *x = td_tensor_arange(0, 1, 10, TD_FLOAT32);
  td_tensor hi_v, *hi = &hi_v, lo_v, *lo = &lo_v;
  CHECK_EQ_I(td_tensor_slice(x, 0, 1, 10, 1, hi), TD_OK);
  CHECK_EQ_I(td_tensor_slice(x, 0, 0, 9, 1, lo), TD_OK);
  CHECK_EQ_I(td_tensor_copy_(hi, lo), TD_OK);
  int64_t k = 0;
  double v;
  bool ok = true;
  for (k = 0; k < 10; k++) {
    td_tensor_read_f64(x, &k, &v);
    ok = ok && v == (k == 0 ? 0 : k - 1);
  }
  CHECK(ok);
  CHECK_EQ_I(td_tensor_copy_(lo, hi), TD_OK); /* and back left */
  ok = true;
  for (k = 0; k < 9; k++) {
    td_tensor_read_f64(x, &k, &v);
    ok = ok && v == k;
  }
  CHECK(ok);
  CHECK_EQ_I(td_tensor_copy_(x, x), TD_OK);
  td_tensor_release(x);

  /* In-place transpose of a square matrix. */
  td_tensor *m = arange2(33, 33, TD_INT64);
  td_tensor mt;
  CHECK_EQ_I(td_tensor_transpose(m, 0, 1, &mt), TD_OK);
  CHECK_EQ_I(td_tensor_copy_(m, &mt), TD_OK);
  CHECK(get(m, 0, 1) == 33 && get(m, 1, 0) == 1 && get(m, 32, 31) == 31 * 33 + 32);
  td_tensor_release(m);

  /* Two dtypes over the same bytes: int32 values cast into float32 in place. */
  td_tensor *ints = td_tensor_arange(-5, 1, 11, TD_INT32);
  td_storage *s = ints->storage;
  const int64_t n = 11;
  td_tensor *floats = td_tensor_from_storage(s, 0, 1, &n, NULL, TD_FLOAT32);
  CHECK_EQ_I(td_tensor_copy_(floats, ints), TD_OK);
  ok = true;
  for (k = 0; k < n; k++) ok = ok && ((const float *)td_tensor_data_borrow(floats))[k] == k - 5;
  CHECK(ok);
  td_tensor_release(floats);
  td_tensor_release(ints);
}

static void test_fill(void) {
  const int64_t shape[2] = {3, 4};
  for (int32_t d = 0; d < TD_NUM_DTYPES; d++) {
    td_tensor *t = td_tensor_empty(2, shape, d);
    CHECK_EQ_I(td_tensor_fill_(t, 2.5), TD_OK);
    double want = d == TD_BOOL ? 1 : d <= TD_INT64 ? 2 : 2.5;
    bool ok = true;
    for (int64_t i = 0; i < 3; i++)
      for (int64_t j = 0; j < 4; j++) ok = ok && get(t, i, j) == want;
    CHECK(ok);
    td_tensor_release(t);
  }
  /* Filling a strided view touches only its elements. */
  td_tensor *t = td_tensor_full(2, shape, TD_INT16, 7);
  td_tensor col;
  CHECK_EQ_I(td_tensor_select(t, 1, 2, &col), TD_OK);
  CHECK_EQ_I(td_tensor_fill_(&col, -3), TD_OK);
  CHECK(get(t, 0, 2) == -3 && get(t, 2, 2) == -3 && get(t, 1, 1) == 7 && get(t, 1, 3) == 7);
  td_tensor sc, el;
  CHECK_EQ_I(td_tensor_select(t, 0, 1, &sc), TD_OK);
  CHECK_EQ_I(td_tensor_select(&sc, 0, 0, &el), TD_OK); /* 0-dim */
  CHECK_EQ_I(el.ndim, 0);
  CHECK_EQ_I(td_tensor_fill_(&el, 11), TD_OK);
  CHECK(get(t, 1, 0) == 11 && get(t, 0, 0) == 7);
  td_tensor_release(t);
  CHECK_EQ_I(td_tensor_fill_(NULL, 1), TD_EINVAL);

  td_tensor *f = td_tensor_full(2, shape, TD_BFLOAT16, 0.1);
  CHECK(f && get(f, 2, 3) == td_bfloat16_to_float(td_float_to_bfloat16(0.1f)));
  td_tensor_release(f);
  CHECK(td_tensor_full(2, shape, 99, 0) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EDTYPE);
  CHECK_ERROR("full");
  const int64_t neg[2] = {3, -1};
  CHECK(td_tensor_full(2, neg, TD_FLOAT32, 0) == NULL);
  CHECK_ERROR("full");
}

static void test_arange(void) {
  td_tensor *t = td_tensor_arange(0, 1, 10, TD_INT64);
  CHECK(t && t->ndim == 1 && td_tensor_size(t, 0) == 10);
  bool ok = true;
  for (int64_t k = 0; k < 10; k++) ok = ok && ((const int64_t *)td_tensor_data_borrow(t))[k] == k;
  CHECK(ok);
  td_tensor_release(t);
  t = td_tensor_arange(1.5, -0.5, 7, TD_FLOAT32);
  ok = true;
  for (int64_t k = 0; k < 7; k++) ok = ok && ((const float *)td_tensor_data_borrow(t))[k] == 1.5f - 0.5f * (float)k;
  CHECK(ok);
  td_tensor_release(t);
  /* Longer than one internal chunk, values exact in double. */
  t = td_tensor_arange(-1000, 0.25, 3001, TD_FLOAT64);
  ok = true;
  for (int64_t k = 0; k < 3001; k++) ok = ok && ((const double *)td_tensor_data_borrow(t))[k] == -1000 + 0.25 * (double)k;
  CHECK(ok);
  td_tensor_release(t);
  t = td_tensor_arange(250, 3, 4, TD_UINT8); /* 250, 253, 255 (saturated), 255 */
  const uint8_t *u = td_tensor_data_borrow(t);
  CHECK(u[0] == 250 && u[1] == 253 && u[2] == 255 && u[3] == 255);
  td_tensor_release(t);
  t = td_tensor_arange(0, 1, 0, TD_FLOAT32);
  CHECK(t && td_tensor_numel(t) == 0 && t->ndim == 1);
  td_tensor_release(t);
  CHECK(td_tensor_arange(0, 1, -1, TD_FLOAT32) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EINVAL);
  CHECK_ERROR("arange: count -1");
  CHECK(td_tensor_arange(INFINITY, 1, 3, TD_FLOAT32) == NULL);
  CHECK_ERROR("arange");
  CHECK(td_tensor_arange(0, 1, 3, -1) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EDTYPE);
}

static void test_clone_contiguous_to_dtype(void) {
  td_tensor *a = arange2(3, 4, TD_FLOAT32);
  td_tensor *b = td_tensor_clone(a);
  CHECK(b && b != a && td_tensor_data_borrow(b) != td_tensor_data_borrow(a));
  int64_t idx[2] = {1, 2};
  td_tensor_write_f64(b, idx, 100);
  CHECK(get(a, 1, 2) == 6 && get(b, 1, 2) == 100);
  td_tensor_write_f64(a, idx, -5);
  CHECK(get(b, 1, 2) == 100);

  td_tensor *c = td_tensor_contiguous(a);
  CHECK(c == a); /* already contiguous: the same tensor, a new reference */
  td_tensor_release(c);
  td_tensor at_v, *at = &at_v;
  CHECK_EQ_I(td_tensor_transpose(a, 0, 1, at), TD_OK);
  c = td_tensor_contiguous(at);
  CHECK(c && c != at && td_tensor_is_contiguous(c) && get(c, 2, 1) == -5);
  CHECK(c && c->refcount == 1 && c->storage != a->storage); /* a copy, owned */
  td_tensor_release(c);
  /* A caller-owned contiguous view: an owned header over the same storage, no copy. */
  td_tensor row;
  CHECK_EQ_I(td_tensor_select(a, 0, 2, &row), TD_OK);
  c = td_tensor_contiguous(&row);
  CHECK(c && c != &row && c->refcount == 1 && c->storage == a->storage);
  CHECK(c && td_tensor_data_borrow(c) == td_tensor_data_borrow(&row));
  td_tensor_release(c);
  c = td_tensor_to_dtype(&row, TD_FLOAT32);
  CHECK(c && c != &row && c->refcount == 1 && c->storage == a->storage);
  CHECK(c && c->offset == row.offset && c->ndim == 1 && c->shape[0] == 4);
  td_tensor_release(c);

  td_tensor *same = td_tensor_to_dtype(a, TD_FLOAT32);
  CHECK(same == a);
  td_tensor_release(same);
  td_tensor *i8 = td_tensor_to_dtype(at, TD_INT8);
  CHECK(i8 && i8->dtype == TD_INT8 && td_tensor_is_contiguous(i8));
  CHECK(get(i8, 2, 1) == -5 && get(i8, 3, 2) == 11);
  td_tensor_release(i8);
  CHECK(td_tensor_to_dtype(a, 10) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EDTYPE);
  CHECK_ERROR("to_dtype");
  CHECK(td_tensor_clone(NULL) == NULL);
  CHECK(td_tensor_contiguous(NULL) == NULL);
  CHECK_ERROR("contiguous: the tensor is NULL");
  CHECK(td_tensor_to_dtype(NULL, TD_FLOAT32) == NULL);
  td_tensor_release(b);
  td_tensor_release(a);

  /* A scalar (0-dim) clones to a scalar. */
  td_tensor *s = td_tensor_full(0, NULL, TD_FLOAT64, 3.25);
  td_tensor *s2 = td_tensor_clone(s);
  double v = 0;
  CHECK(s2 && s2->ndim == 0);
  CHECK_EQ_I(td_tensor_read_f64(s2, NULL, &v), TD_OK);
  CHECK(v == 3.25);
  td_tensor_release(s2);
  td_tensor_release(s);
}

static void test_empty_dims(void) {
  const int64_t s03[2] = {0, 3}, s3[1] = {3}, s20[2] = {2, 0};
  td_tensor *a = td_tensor_empty(2, s03, TD_FLOAT32), *b = td_tensor_full(2, s03, TD_INT32, 1);
  td_tensor *r = td_tensor_full(1, s3, TD_FLOAT64, 2);
  CHECK(b != NULL);
  CHECK_EQ_I(td_tensor_copy_(a, b), TD_OK);
  CHECK_EQ_I(td_tensor_copy_(a, r), TD_OK); /* [3] broadcasts to [0, 3] */
  CHECK_EQ_I(td_tensor_fill_(a, 5), TD_OK);
  td_tensor *c = td_tensor_clone(a);
  CHECK(c && td_tensor_numel(c) == 0 && td_tensor_size(c, 1) == 3);
  td_tensor_release(c);
  CHECK_EQ_I(td_tensor_copy_(r, a), TD_ESHAPE); /* [0, 3] does not fit in [3] */
  td_tensor *z = td_tensor_empty(2, s20, TD_UINT8);
  td_tensor zt_v, *zt = &zt_v;
  CHECK_EQ_I(td_tensor_transpose(z, 0, 1, zt), TD_OK);
  c = td_tensor_contiguous(zt);
  CHECK(c && td_tensor_numel(c) == 0 && td_tensor_size(c, 0) == 0 && td_tensor_size(c, 1) == 2);
  td_tensor_release(c);
  td_tensor *i = td_tensor_to_dtype(zt, TD_FLOAT16);
  CHECK(i && td_tensor_numel(i) == 0);
  td_tensor_release(i);
  int64_t idx[2] = {0, 0};
  double v;
  CHECK_EQ_I(td_tensor_read_f64(z, idx, &v), TD_EINDEX);
  td_tensor_release(z);
  td_tensor_release(r);
  td_tensor_release(b);
  td_tensor_release(a);
}

static void test_read_only(void) {
  char path[] = "/tmp/td_test_copy_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  float data[16];
  for (int k = 0; k < 16; k++) data[k] = (float)k;
  CHECK(write(fd, data, sizeof data) == (ssize_t)sizeof data);
  close(fd);
  td_storage *s = td_storage_map_file(path, sizeof data, TD_MAP_READ);
  CHECK(s != NULL);
  if (!s) {
    unlink(path);
    return;
  }
  const int64_t n = 16;
  td_tensor *ro = td_tensor_from_storage(s, 0, 1, &n, NULL, TD_FLOAT32);
  td_tensor *src = td_tensor_full(1, &n, TD_FLOAT32, -1);
  CHECK(!td_tensor_is_writable(ro));
  td_clear_error();
  CHECK_EQ_I(td_tensor_copy_(ro, src), TD_EREADONLY);
  CHECK_ERROR("copy_");
  CHECK_ERROR("read-only");
  CHECK_EQ_I(td_tensor_fill_(ro, 0), TD_EREADONLY);
  CHECK_ERROR("fill_");
  int64_t k = 3;
  CHECK_EQ_I(td_tensor_write_f64(ro, &k, 9), TD_EREADONLY);
  CHECK_ERROR("write_f64");
  double v = 0;
  CHECK_EQ_I(td_tensor_read_f64(ro, &k, &v), TD_OK);
  CHECK(v == 3);
  /* Reading from a read-only tensor is fine. */
  CHECK_EQ_I(td_tensor_copy_(src, ro), TD_OK);
  td_tensor_read_f64(src, &k, &v);
  CHECK(v == 3);
  td_tensor *cl = td_tensor_clone(ro);
  CHECK(cl && td_tensor_is_writable(cl));
  td_tensor_release(cl);
  td_tensor_release(src);
  td_tensor_release(ro);
  td_storage_release(s);
  unlink(path);
}

static void test_element_access(void) {
  td_tensor *t = arange2(2, 3, TD_INT64);
  int64_t idx[2] = {1, 2};
  double v = 0;
  CHECK_EQ_I(td_tensor_read_f64(t, idx, &v), TD_OK);
  CHECK(v == 5);
  CHECK_EQ_I(td_tensor_write_f64(t, idx, -7.9), TD_OK);
  CHECK(get(t, 1, 2) == -7);
  idx[1] = 3;
  CHECK_EQ_I(td_tensor_read_f64(t, idx, &v), TD_EINDEX);
  CHECK_ERROR("read_f64: index 3 is out of range for dim 1 of size 3");
  CHECK_EQ_I(td_tensor_write_f64(t, idx, 0), TD_EINDEX);
  CHECK_ERROR("write_f64: index 3 is out of range for dim 1 of size 3");
  idx[0] = -1;
  idx[1] = 0;
  CHECK_EQ_I(td_tensor_read_f64(t, idx, &v), TD_EINDEX);
  CHECK_ERROR("index -1 is out of range for dim 0 of size 2");
  CHECK_EQ_I(td_tensor_read_f64(t, NULL, &v), TD_EINVAL);
  CHECK_EQ_I(td_tensor_read_f64(t, idx, NULL), TD_EINVAL);
  CHECK_EQ_I(td_tensor_read_f64(NULL, idx, &v), TD_EINVAL);
  CHECK_EQ_I(td_tensor_write_f64(NULL, idx, 0), TD_EINVAL);
  /* Through a transposed view. */
  td_tensor tt;
  CHECK_EQ_I(td_tensor_transpose(t, 0, 1, &tt), TD_OK);
  CHECK(get(&tt, 2, 1) == -7 && get(&tt, 1, 0) == 1);
  td_tensor_release(t);
}

int main(void) {
  test_cast_pairs();
  test_cast_rules();
  test_transposed();
  test_sliced_and_expanded();
  test_random_layouts();
  test_overlap();
  test_fill();
  test_arange();
  test_clone_contiguous_to_dtype();
  test_empty_dims();
  test_read_only();
  test_element_access();
  CHECK_SUMMARY();
}
