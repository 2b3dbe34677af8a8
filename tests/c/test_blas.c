/* test_blas.c: dot, mv, mm, bmm and matmul against a naive long double reference with
 * torch.matmul's rules: every shape rule, transposed, sliced and expanded operands, the
 * dtypes (float32, float64, float16, bfloat16, int32, int64, uint8), empty dims, errors. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

/* ---- helpers ---------------------------------------------------------------------- */

static uint64_t lcg_state = 12345;

/* Small values exact in every dtype: quarters in [-2, 2] for floats, [-8, 8] for ints. */
static double next_value(int32_t dtype) {
  lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
  const int64_t r = (int64_t)((lcg_state >> 33) % 17) - 8;
  if (dtype == TD_UINT8) return (double)(r + 8);
  return td_dtype_is_floating(dtype) ? (double)r / 4.0 : (double)r;
}

static td_tensor *filled(int32_t ndim, const int64_t *shape, int32_t dtype) {
  td_tensor *t = td_tensor_empty(ndim, shape, dtype);
  const int64_t n = td_tensor_numel(t);
  int64_t idx[TD_MAX_DIMS] = {0};
  for (int64_t e = 0; e < n; e++) {
    td_tensor_write_f64(t, idx, next_value(dtype));
    for (int32_t d = ndim - 1; d >= 0 && ++idx[d] == shape[d]; d--) idx[d] = 0;
  }
  return t;
}

static long double get(const td_tensor *t, const int64_t *idx) {
  double v = NAN;
  td_tensor_read_f64(t, idx, &v);
  return v;
}

/* The expected result of matmul(a, b), computed from scratch with torch's rules. */
typedef struct expect {
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS];
  long double *val;   /* row-major */
  long double *scale; /* sum of |a_ik b_kj|, for float tolerances */
} expect;

static expect reference(const td_tensor *a, const td_tensor *b) {
  expect e = {0};
  const bool av = a->ndim == 1, bv = b->ndim == 1;
  const int64_t m = av ? 1 : a->shape[a->ndim - 2], k = a->shape[a->ndim - 1];
  const int64_t n = bv ? 1 : b->shape[b->ndim - 1];
  const int32_t anb = a->ndim > 2 ? a->ndim - 2 : 0, bnb = b->ndim > 2 ? b->ndim - 2 : 0;
  const int32_t nb = anb > bnb ? anb : bnb;
  int64_t batch[TD_MAX_DIMS], count = 1;
  for (int32_t d = 0; d < nb; d++) {
    const int32_t da = d - (nb - anb), db = d - (nb - bnb);
    const int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
    batch[d] = x == 1 ? y : x;
    e.shape[e.ndim++] = batch[d];
    count *= batch[d];
  }
  if (!av) e.shape[e.ndim++] = m;
  if (!bv) e.shape[e.ndim++] = n;
  e.val = calloc((size_t)(count * m * n + 1), sizeof *e.val);
  e.scale = calloc((size_t)(count * m * n + 1), sizeof *e.scale);
  int64_t bi[TD_MAX_DIMS] = {0};
  for (int64_t c = 0; c < count; c++) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        long double s = 0, sc = 0;
        for (int64_t p = 0; p < k; p++) {
          int64_t ia[TD_MAX_DIMS], ib[TD_MAX_DIMS];
          for (int32_t d = 0; d < anb; d++) {
            const int64_t x = bi[d + nb - anb];
            ia[d] = a->shape[d] == 1 ? 0 : x;
          }
          for (int32_t d = 0; d < bnb; d++) {
            const int64_t x = bi[d + nb - bnb];
            ib[d] = b->shape[d] == 1 ? 0 : x;
          }
          if (av) {
            ia[0] = p;
          } else {
            ia[anb] = i;
            ia[anb + 1] = p;
          }
          if (bv) {
            ib[0] = p;
          } else {
            ib[bnb] = p;
            ib[bnb + 1] = j;
          }
          const long double x = get(a, ia), y = get(b, ib);
          s += x * y;
          sc += fabsl(x * y);
        }
        e.val[(c * m + i) * n + j] = s;
        e.scale[(c * m + i) * n + j] = sc;
      }
    for (int32_t d = nb - 1; d >= 0 && ++bi[d] == batch[d]; d--) bi[d] = 0;
  }
  return e;
}

/* The relative tolerance of a float dtype's result (of its rounding and of float32 sums). */
static long double tolerance(int32_t dtype) {
  switch (dtype) {
    case TD_FLOAT64: return 1e-13L;
    case TD_FLOAT32: return 1e-5L;
    case TD_FLOAT16: return 2e-3L;
    case TD_BFLOAT16: return 1.6e-2L;
    default: return 0; /* integers: exact */
  }
}

/* Wraps an exact integer as dtype does. */
static long double wrap(int32_t dtype, long double x) {
  const int64_t v = (int64_t)x;
  switch (dtype) {
    case TD_UINT8: return (uint8_t)(uint64_t)v;
    case TD_INT32: return (int32_t)(uint32_t)(uint64_t)v;
    default: return v;
  }
}

/* r must equal the reference of a @ b: shape, dtype and values. */
static bool matches(const td_tensor *r, const td_tensor *a, const td_tensor *b) {
  if (!r) return false;
  expect e = reference(a, b);
  bool ok = r->ndim == e.ndim && r->dtype == a->dtype;
  for (int32_t d = 0; ok && d < e.ndim; d++) ok = r->shape[d] == e.shape[d];
  const int64_t n = ok ? td_tensor_numel(r) : 0;
  const long double tol = tolerance(a->dtype);
  int64_t idx[TD_MAX_DIMS] = {0};
  for (int64_t i = 0; ok && i < n; i++) {
    const long double got = get(r, idx);
    if (td_dtype_is_floating(a->dtype))
      ok = fabsl(got - e.val[i]) <= tol * (e.scale[i] + fabsl(e.val[i])) + 1e-30L;
    else
      ok = got == wrap(a->dtype, e.val[i]);
    if (!ok)
      fprintf(stderr, "  element %lld: got %Lg, expected %Lg\n", (long long)i, got, e.val[i]);
    for (int32_t d = r->ndim - 1; d >= 0 && ++idx[d] == r->shape[d]; d--) idx[d] = 0;
  }
  free(e.val);
  free(e.scale);
  return ok;
}

/* matmul(a, b) matches the reference; the result is released. */
static bool check_matmul(const td_tensor *a, const td_tensor *b) {
  td_tensor *r = td_matmul(a, b);
  const bool ok = matches(r, a, b);
  td_tensor_release(r);
  return ok;
}

/* A new tensor of shape (ndim, shape) and dtype, matmul'd with a new one of bshape. */
static bool check_shapes(int32_t dtype, int32_t an, const int64_t *as, int32_t bn,
                         const int64_t *bs) {
  td_tensor *a = filled(an, as, dtype), *b = filled(bn, bs, dtype);
  const bool ok = check_matmul(a, b);
  td_tensor_release(a);
  td_tensor_release(b);
  return ok;
}

/* ---- shape rules ------------------------------------------------------------------ */

static const int32_t all_dtypes[] = {TD_FLOAT32, TD_FLOAT64, TD_FLOAT16, TD_BFLOAT16,
                                     TD_INT32, TD_INT64, TD_UINT8, TD_INT16};
enum { NDTYPES = sizeof all_dtypes / sizeof all_dtypes[0] };

static void test_rules(void) {
  static const struct {
    int32_t an, bn;
    int64_t as[4], bs[4];
    int32_t out_ndim;
  } cases[] = {
      {1, 1, {5}, {5}, 0},                          /* dot */
      {2, 1, {3, 4}, {4}, 1},                       /* mv */
      {1, 2, {4}, {4, 5}, 1},                       /* row vector @ matrix */
      {2, 2, {3, 4}, {4, 5}, 2},                    /* mm */
      {2, 2, {1, 4}, {4, 5}, 2},                    /* m = 1 */
      {2, 2, {3, 4}, {4, 1}, 2},                    /* n = 1 */
      {2, 2, {1, 4}, {4, 1}, 2},                    /* m = n = 1 */
      {3, 3, {2, 3, 4}, {2, 4, 5}, 3},              /* bmm */
      {4, 3, {2, 1, 3, 4}, {5, 4, 6}, 4},           /* broadcast batch dims */
      {3, 2, {6, 3, 4}, {4, 5}, 3},                 /* batch folds into m */
      {3, 2, {6, 1, 4}, {4, 5}, 3},                 /* folds with m = 1 */
      {2, 3, {3, 4}, {6, 4, 5}, 3},                 /* left broadcast over a batch */
      {3, 1, {2, 3, 4}, {4}, 2},                    /* batched mv */
      {1, 3, {4}, {2, 4, 5}, 2},                    /* vector @ batch */
      {4, 4, {2, 1, 3, 4}, {1, 3, 4, 2}, 4},        /* both broadcast */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int d = 0; d < NDTYPES; d++) {
      const bool ok = check_shapes(all_dtypes[d], cases[c].an, cases[c].as, cases[c].bn,
                                   cases[c].bs);
      if (!ok) fprintf(stderr, "  case %zu, dtype %s\n", c, td_dtype_name(all_dtypes[d]));
      CHECK(ok);
    }
  /* The result shape of the example in the docs. */
  const int64_t as[4] = {2, 1, 3, 4}, bs[3] = {5, 4, 6};
  td_tensor *a = filled(4, as, TD_FLOAT32), *b = filled(3, bs, TD_FLOAT32);
  td_tensor *r = td_matmul(a, b);
  CHECK(r && r->ndim == 4 && r->shape[0] == 2 && r->shape[1] == 5 && r->shape[2] == 3 &&
        r->shape[3] == 6);
  td_tensor_release(r);
  td_tensor_release(a);
  td_tensor_release(b);
}

/* The named entry points agree with matmul on their shapes. */
static void test_named(void) {
  for (int d = 0; d < NDTYPES; d++) {
    const int32_t dt = all_dtypes[d];
    const int64_t s34[2] = {3, 4}, s45[2] = {4, 5}, s4[1] = {4}, s234[3] = {2, 3, 4},
                  s245[3] = {2, 4, 5};
    td_tensor *m34 = filled(2, s34, dt), *m45 = filled(2, s45, dt), *v4 = filled(1, s4, dt),
              *w4 = filled(1, s4, dt), *b234 = filled(3, s234, dt), *b245 = filled(3, s245, dt);
    td_tensor *r = td_mm(m34, m45);
    CHECK(matches(r, m34, m45));
    td_tensor_release(r);
    r = td_mv(m34, v4);
    CHECK(matches(r, m34, v4));
    td_tensor_release(r);
    r = td_dot(v4, w4);
    CHECK(matches(r, v4, w4) && r->ndim == 0);
    td_tensor_release(r);
    r = td_bmm(b234, b245);
    CHECK(matches(r, b234, b245));
    td_tensor_release(r);
    td_tensor_release(m34);
    td_tensor_release(m45);
    td_tensor_release(v4);
    td_tensor_release(w4);
    td_tensor_release(b234);
    td_tensor_release(b245);
  }
}

/* ---- layouts: transposed, sliced, expanded ---------------------------------------- */

static void test_layouts(void) {
  static const int32_t dts[] = {TD_FLOAT32, TD_FLOAT64, TD_INT64, TD_FLOAT16};
  for (int d = 0; d < 4; d++) {
    const int32_t dt = dts[d];
    const int64_t s54[2] = {5, 4}, s65[2] = {6, 5}, s4_12[2] = {4, 12}, s9_10[2] = {9, 10},
                  s41[2] = {4, 1}, s8[1] = {8}, s1[1] = {1}, sb[3] = {3, 4, 5};
    const int64_t s45[2] = {4, 5}, s4[1] = {4}, s345[3] = {3, 4, 5};
    td_tensor *at = filled(2, s54, dt), *bt = filled(2, s65, dt), *wide = filled(2, s4_12, dt);
    td_tensor *big = filled(2, s9_10, dt), *col = filled(2, s41, dt), *v8 = filled(1, s8, dt);
    td_tensor *v1 = filled(1, s1, dt), *batch = filled(3, sb, dt);
    td_tensor a, b, aT, sl, st, sq, ex, vs, ve, bp, bx;
    td_tensor_transpose(at, 0, 1, &a); /* [4, 5] column-major */
    td_tensor_transpose(bt, 0, 1, &b); /* [5, 6] column-major */
    td_tensor_transpose(&a, 0, 1, &aT); /* [5, 4] row-major again */
    CHECK(check_matmul(&a, &b)); /* both CblasTrans */
    CHECK(check_matmul(&aT, &a)); /* one of each */
    td_tensor_slice(wide, 1, 2, 7, 1, &sl); /* [4, 5] rows with leading dim 12 */
    CHECK(check_matmul(&sl, &b));
    td_tensor_slice(big, 1, 0, 10, 2, &st); /* [9, 5] strides (10, 2): no unit stride */
    td_tensor_slice(&st, 0, 0, 9, 2, &sq);  /* [5, 5] strides (20, 2): copied */
    CHECK(check_matmul(&a, &sq));
    CHECK(check_matmul(&sq, &b));
    td_tensor_expand(col, 2, s45, &ex); /* [4, 5] with column stride 0: copied */
    CHECK(check_matmul(&ex, &b));
    td_tensor_slice(v8, 0, 0, 8, 2, &vs); /* [4] with stride 2 */
    CHECK(check_matmul(&vs, &a));  /* vector @ column-major matrix: gemv on its transpose */
    CHECK(check_matmul(&vs, &sl)); /* vector @ matrix with leading dim 12 */
    CHECK(check_matmul(&aT, &vs)); /* strided vector in gemv */
    CHECK(check_matmul(&b, &a) == false); /* [5, 6] @ [4, 5]: refused */
    CHECK(check_matmul(&vs, &vs)); /* strided dot */
    td_tensor_expand(v1, 1, s4, &ve); /* [4] with stride 0: copied */
    CHECK(check_matmul(&ve, &vs));
    CHECK(check_matmul(&aT, &ve));
    CHECK(check_matmul(&ve, &a));
    /* Batches: column-major matrices (no folding), a batch expanded from one matrix
     * (batch stride 0), and their mix. */
    td_tensor_permute(batch, (const int32_t[]){0, 2, 1}, &bp); /* [3, 5, 4] */
    CHECK(check_matmul(&bp, &a));
    td_tensor_expand(&a, 3, s345, &bx); /* [3, 4, 5] */
    CHECK(check_matmul(&bp, &bx));
    CHECK(check_matmul(&bx, &b));
    CHECK(check_matmul(&vs, &bx));
    td_tensor_release(at);
    td_tensor_release(bt);
    td_tensor_release(wide);
    td_tensor_release(big);
    td_tensor_release(col);
    td_tensor_release(v8);
    td_tensor_release(v1);
    td_tensor_release(batch);
  }
}

/* ---- dtypes and values ------------------------------------------------------------ */

static void test_integers(void) {
  /* int32 wraps like int32 arithmetic: 2^30 * 4 overflows. */
  const int64_t s12[2] = {1, 2}, s21[2] = {2, 1};
  td_tensor *a = td_tensor_full(2, s12, TD_INT32, 1 << 30), *b = td_tensor_full(2, s21, TD_INT32, 2);
  td_tensor *r = td_matmul(a, b);
  const int64_t zero[2] = {0, 0};
  double v = 1;
  td_tensor_read_f64(r, zero, &v);
  CHECK(r && r->dtype == TD_INT32 && v == 0); /* 2^31 + 2^31 = 2^32 -> 0 */
  td_tensor_release(r);
  td_tensor_release(a);
  td_tensor_release(b);
  /* int64 stays exact where float64 would round: (2^53 + 1) * 1. */
  td_tensor *x = td_tensor_full(2, s12, TD_INT64, 0), *y = td_tensor_full(2, s21, TD_INT64, 1);
  int64_t *xd = td_tensor_data_borrow(x);
  xd[0] = (INT64_C(1) << 53) + 1;
  xd[1] = 0;
  r = td_matmul(x, y);
  CHECK(r && *(int64_t *)td_tensor_data_borrow(r) == (INT64_C(1) << 53) + 1);
  td_tensor_release(r);
  td_tensor_release(x);
  td_tensor_release(y);
  /* A bigger int product, several chunks on the pool. */
  const int64_t sa[2] = {67, 129}, sb[2] = {129, 71};
  CHECK(check_shapes(TD_INT64, 2, sa, 2, sb));
  CHECK(check_shapes(TD_INT32, 2, sa, 2, sb));
}

static void test_floats(void) {
  /* Large enough for OpenBLAS's blocked kernels and threads. */
  const int64_t sa[2] = {130, 257}, sb[2] = {257, 67}, sv[1] = {257};
  CHECK(check_shapes(TD_FLOAT32, 2, sa, 2, sb));
  CHECK(check_shapes(TD_FLOAT64, 2, sa, 2, sb));
  CHECK(check_shapes(TD_FLOAT64, 2, sa, 1, sv));
  CHECK(check_shapes(TD_BFLOAT16, 2, sa, 2, sb));
}

static void test_empty(void) {
  for (int d = 0; d < NDTYPES; d++) {
    const int32_t dt = all_dtypes[d];
    const int64_t s30[2] = {3, 0}, s04[2] = {0, 4}, s0[1] = {0}, s05[2] = {0, 5}, s45[2] = {4, 5};
    td_tensor *a = filled(2, s30, dt), *b = filled(2, s04, dt), *v = filled(1, s0, dt);
    td_tensor *m0 = filled(2, s05, dt), *m45 = filled(2, s45, dt);
    td_tensor *r = td_matmul(a, b); /* k = 0: zeros */
    CHECK(matches(r, a, b) && r->shape[0] == 3 && r->shape[1] == 4);
    td_tensor_release(r);
    r = td_dot(v, v);
    CHECK(matches(r, v, v));
    td_tensor_release(r);
    r = td_mv(a, v);
    CHECK(matches(r, a, v) && r->shape[0] == 3);
    td_tensor_release(r);
    td_tensor *sq = td_matmul(b, m45); /* [0, 4] @ [4, 5]: m = 0 */
    CHECK(sq && sq->ndim == 2 && sq->shape[0] == 0 && sq->shape[1] == 5);
    td_tensor_release(sq);
    td_tensor_release(a);
    td_tensor_release(b);
    td_tensor_release(v);
    td_tensor_release(m0);
    td_tensor_release(m45);
  }
}

/* ---- errors ----------------------------------------------------------------------- */

static void test_errors(void) {
  const int64_t s23[2] = {2, 3}, s45[2] = {4, 5}, s3[1] = {3}, s4[1] = {4}, s234[3] = {2, 3, 4},
                s345[3] = {3, 4, 5}, s245[3] = {2, 4, 5};
  td_tensor *a = filled(2, s23, TD_FLOAT32), *b = filled(2, s45, TD_FLOAT32);
  td_tensor *d = filled(2, s45, TD_FLOAT64), *v3 = filled(1, s3, TD_FLOAT32);
  td_tensor *v4 = filled(1, s4, TD_FLOAT32), *b234 = filled(3, s234, TD_FLOAT32);
  td_tensor *b345 = filled(3, s345, TD_FLOAT32), *b245 = filled(3, s245, TD_FLOAT32);
  td_tensor *bo = td_tensor_full(2, s23, TD_BOOL, 1), *s = td_tensor_full(0, NULL, TD_FLOAT32, 1);
  td_tensor *f3 = filled(2, (const int64_t[]){3, 4}, TD_FLOAT32);
  td_tensor *d3 = filled(2, (const int64_t[]){3, 4}, TD_FLOAT64);

  CHECK(td_matmul(a, b) == NULL);
  CHECK_ERROR("matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  CHECK(td_matmul(f3, d) == NULL);
  CHECK_ERROR("expected m1 and m2 to have the same dtype, but got: float32 != float64");
  CHECK_EQ_I(td_last_status(), TD_EDTYPE);
  CHECK(td_mm(d3, b) == NULL);
  CHECK_ERROR("float64 != float32");
  CHECK(td_matmul(bo, v3) == NULL);
  CHECK_ERROR("bool");
  CHECK(td_matmul(s, v3) == NULL);
  CHECK_ERROR("at least 1 dim");
  CHECK(td_mm(v3, a) == NULL);
  CHECK_ERROR("mm: expected 2-D and 2-D tensors, but got shapes [3] and [2, 3]");
  CHECK(td_bmm(b234, b345) == NULL);
  CHECK_ERROR("batch sizes differ");
  CHECK(td_bmm(b234, b) == NULL);
  CHECK_ERROR("3-D");
  CHECK(td_mv(a, v4) == NULL);
  CHECK_ERROR("mv: shapes [2, 3] and [4] cannot be multiplied (3 != 4)");
  CHECK(td_mv(a, a) == NULL);
  CHECK(td_dot(v3, v4) == NULL);
  CHECK_ERROR("dot: shapes [3] and [4] cannot be multiplied (3 != 4)");
  CHECK(td_dot(a, v3) == NULL);
  CHECK(td_matmul(b234, b345) == NULL); /* k 4 vs 4 fine, batch 2 vs 3 does not broadcast */
  CHECK_ERROR("do not broadcast");
  CHECK(td_matmul(NULL, a) == NULL);
  CHECK_ERROR("NULL");
  td_tensor *ok = td_matmul(b234, b245);
  CHECK(ok != NULL);
  td_tensor_release(ok);
  td_tensor *all[] = {a, b, d, v3, v4, b234, b345, b245, bo, s, f3, d3};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) td_tensor_release(all[i]);
}

int main(void) {
  test_rules();
  test_named();
  test_layouts();
  test_integers();
  test_floats();
  test_empty();
  test_errors();
  CHECK_SUMMARY();
}
