/* test_stats.c: td_stats_update, td_stats_merge and td_stats_normalize against a
 * two-pass long double reference from raw element reads, over every dtype, several
 * layouts and shapes (tiles of both kinds: many row chunks, many feature blocks), batch
 * splits and merges, thread-count determinism, and the error messages. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "tensors.h"

typedef long double ld;

/* Reference mean and M2 per feature over the rows of x (batch_dims leading dims). */
static void reference(const td_tensor *x, int32_t bd, ld *mean, ld *m2, int64_t *rows_out) {
  int64_t rows = numel_of(bd, x->shape), feats = numel_of(x->ndim - bd, x->shape + bd);
  for (int64_t f = 0; f < feats; f++) mean[f] = m2[f] = 0;
  *rows_out = rows;
  if (rows == 0 || feats == 0) return;
  int64_t index[TD_MAX_DIMS] = {0};
  for (int64_t i = 0; i < rows * feats; i++) {
    mean[i % feats] += rd(x, index);
    next_index(x->ndim, x->shape, index);
  }
  for (int64_t f = 0; f < feats; f++) mean[f] /= rows;
  memset(index, 0, sizeof index);
  for (int64_t i = 0; i < rows * feats; i++) {
    ld d = rd(x, index) - mean[i % feats];
    m2[i % feats] += d * d;
    next_index(x->ndim, x->shape, index);
  }
}

static td_tensor *f64(int64_t n, double fill) { return td_tensor_full(1, &n, TD_FLOAT64, fill); }
static double *D(const td_tensor *t) { return td_tensor_data_borrow(t); }

static bool close_to_tol(ld a, ld b, ld scale, ld tol) {
  ld diff = a > b ? a - b : b - a;
  return diff <= tol * (scale > 1 ? scale : 1);
}
static bool close_to(ld a, ld b, ld scale) { return close_to_tol(a, b, scale, 1e-12L); }

/* Updates a fresh state with x and compares with the reference. */
/* tol: relative error allowed on M2 (the mean is held to 1e-12). */
static void check_update_tol(const td_tensor *x, int32_t bd, const char *what, ld tol) {
  int64_t feats = numel_of(x->ndim - bd, x->shape + bd), rows;
  ld *rm = calloc((size_t)feats + 1, sizeof *rm), *rq = calloc((size_t)feats + 1, sizeof *rq);
  reference(x, bd, rm, rq, &rows);
  td_tensor *mean = f64(feats, 0), *m2 = f64(feats, 0);
  int64_t count = 0;
  int32_t st = td_stats_update(x, bd, &count, mean, m2);
  CHECK_EQ_I(st, 0);
  CHECK_EQ_I(count, rows);
  int bad = 0;
  for (int64_t f = 0; f < feats && rows > 0; f++) {
    ld scale = rm[f] < 0 ? -rm[f] : rm[f];
    if (!close_to(D(mean)[f], rm[f], scale) || !close_to_tol(D(m2)[f], rq[f], rq[f], tol)) {
      if (!bad++)
        fprintf(stderr, "%s (%s): feature %lld: mean %.17g vs %.17Lg, m2 %.17g vs %.17Lg\n", what,
                td_dtype_name(x->dtype), (long long)f, D(mean)[f], rm[f], D(m2)[f], rq[f]);
    }
  }
  CHECK(bad == 0);
  td_tensor_release(mean);
  td_tensor_release(m2);
  free(rm);
  free(rq);
}

static void check_update(const td_tensor *x, int32_t bd, const char *what) {
  check_update_tol(x, bd, what, 1e-12L);
}

static void test_dtypes_layouts(void) {
  static const struct {
    int32_t ndim, bd;
    int64_t shape[3];
  } cases[] = {
      {2, 1, {7, 3, 0}},      {3, 1, {5, 4, 2}}, {3, 2, {5, 4, 2}},
      {1, 1, {6, 0, 0}},      {1, 0, {3, 0, 0}}, {2, 1, {0, 3, 0}},
      {2, 1, {4, 0, 0}},      {3, 0, {2, 3, 2}}, {2, 1, {70001, 3, 0}}, /* several row chunks */
      {2, 1, {131, 1300, 0}}, /* several feature blocks and row chunks */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int d = 0; d < TD_NUM_DTYPES; d++)
      for (int layout = 0; layout < NUM_LAYOUTS; layout++) {
        if (c >= 8 && layout != CONTIGUOUS && layout != TRANSPOSED) continue;
        td_tensor *x = make(cases[c].ndim, cases[c].shape, all_dtypes[d], layout, (int)c);
        CHECK(x != NULL);
        if (!x) continue;
        char what[64];
        snprintf(what, sizeof what, "case %d layout %d", (int)c, layout);
        check_update(x, cases[c].bd, what);
        td_tensor_release(x);
      }
}

/* Values with a large offset: the naive sum-of-squares formula would lose them all. */
static td_tensor *offset_data(int64_t rows, int64_t feats, double offset, unsigned seed) {
  int64_t shape[2] = {rows, feats};
  td_tensor *x = td_tensor_empty(2, shape, TD_FLOAT64);
  srand(seed);
  for (int64_t i = 0; i < rows * feats; i++)
    D(x)[i] = offset + (double)(i % feats) + (double)rand() / RAND_MAX - 0.5;
  return x;
}

static void test_stability_and_merge(void) {
  td_tensor *x = offset_data(50000, 4, 1e9, 1);
  /* Data 1e9 +- 0.5: condition number ~1e19, where E[x^2] - E[x]^2 would keep no digit;
   * Welford keeps about 8 here. */
  check_update_tol(x, 1, "offset 1e9", 1e-6L);
  td_tensor *y = offset_data(50000, 4, 1e4, 4);
  check_update_tol(y, 1, "offset 1e4", 1e-9L);
  td_tensor_release(y);
  /* The same rows in uneven batches, and as two states merged, agree with one pass. */
  td_tensor *m1 = f64(4, 0), *q1 = f64(4, 0), *m2 = f64(4, 0), *q2 = f64(4, 0), *m3 = f64(4, 0),
            *q3 = f64(4, 0);
  int64_t c1 = 0, c2 = 0, c3 = 0;
  CHECK_EQ_I(td_stats_update(x, 1, &c1, m1, q1), 0);
  int64_t cuts[] = {0, 1, 2, 100, 33333, 33334, 50000};
  for (int i = 0; i + 1 < 7; i++) {
    td_tensor part;
    CHECK_EQ_I(td_tensor_slice(x, 0, cuts[i], cuts[i + 1], 1, &part), 0);
    CHECK_EQ_I(td_stats_update(&part, 1, i < 3 ? &c2 : &c3, i < 3 ? m2 : m3, i < 3 ? q2 : q3), 0);
  }
  CHECK_EQ_I(td_stats_merge(&c2, m2, q2, c3, m3, q3), 0);
  CHECK_EQ_I(c1, 50000);
  CHECK_EQ_I(c2, 50000);
  for (int f = 0; f < 4; f++) {
    CHECK(close_to(D(m1)[f], D(m2)[f], 1e9));
    CHECK(fabs(D(q1)[f] - D(q2)[f]) <= 1e-6 * D(q1)[f]);
  }
  /* Merging an empty state changes nothing; merging into an empty one copies. */
  td_tensor *e = f64(4, 12345), *eq = f64(4, 777);
  int64_t c = 0, before = c2;
  double keep = D(m2)[1];
  CHECK_EQ_I(td_stats_merge(&c2, m2, q2, 0, e, eq), 0);
  CHECK_EQ_I(c2, before);
  CHECK(D(m2)[1] == keep);
  CHECK_EQ_I(td_stats_merge(&c, e, eq, c2, m2, q2), 0);
  CHECK(c == c2 && D(e)[1] == keep && D(eq)[2] == D(q2)[2]);
  td_tensor *all[] = {x, m1, q1, m2, q2, m3, q3, e, eq};
  for (int i = 0; i < 9; i++) td_tensor_release(all[i]);
}

static void test_threads(void) {
  td_tensor *x = offset_data(40000, 700, 3.5, 2);
  int32_t saved = td_get_num_threads();
  double first_m = 0, first_q = 0;
  for (int32_t n = 1; n <= 4; n++) {
    td_set_num_threads(n);
    td_tensor *m = f64(700, 0), *q = f64(700, 0);
    int64_t c = 0;
    CHECK_EQ_I(td_stats_update(x, 1, &c, m, q), 0);
    double sm = 0, sq = 0;
    for (int f = 0; f < 700; f++) sm += D(m)[f] * (f + 1), sq += D(q)[f] * (f + 1);
    if (n == 1) first_m = sm, first_q = sq;
    CHECK(sm == first_m && sq == first_q); /* bit-identical for any thread count */
    td_tensor_release(m);
    td_tensor_release(q);
  }
  td_set_num_threads(saved);
  td_tensor_release(x);
}

static void test_normalize(void) {
  static const int32_t outs[] = {TD_FLOAT32, TD_FLOAT64, TD_FLOAT16, TD_BFLOAT16};
  int64_t shape[3] = {6, 2, 3};
  for (int d = 0; d < TD_NUM_DTYPES; d++)
    for (int o = 0; o < 4; o++)
      for (int layout = 0; layout < NUM_LAYOUTS; layout++) {
        td_tensor *x = make(3, shape, all_dtypes[d], layout, 3);
        td_tensor *mean = f64(6, 0), *var = f64(6, 0);
        for (int f = 0; f < 6; f++) D(mean)[f] = f * 0.5 - 1, D(var)[f] = f + 0.25;
        td_tensor *out = td_tensor_empty(3, shape, outs[o]);
        CHECK_EQ_I(td_stats_normalize(x, 1, mean, var, 1e-5, out), 0);
        int64_t index[3] = {0}, bad = 0;
        for (int64_t i = 0; i < 36; i++) {
          int f = (int)(i % 6);
          double want = (rd(x, index) - D(mean)[f]) / sqrt(D(var)[f] + 1e-5);
          if (rd(out, index) != as_dtype(outs[o], want) &&
              fabs(rd(out, index) - want) > 1e-2 * (fabs(want) + 1))
            bad++;
          next_index(3, shape, index);
        }
        CHECK_EQ_I(bad, 0);
        td_tensor_release(x);
        td_tensor_release(mean);
        td_tensor_release(var);
        td_tensor_release(out);
      }
  /* In place, many rows (parallel tiles), exact float64 formula. */
  td_tensor *x = offset_data(30000, 5, 10, 3), *copy = td_tensor_clone(x);
  td_tensor *mean = f64(5, 0), *m2 = f64(5, 0), *var = f64(5, 0);
  int64_t c = 0;
  CHECK_EQ_I(td_stats_update(x, 1, &c, mean, m2), 0);
  for (int f = 0; f < 5; f++) D(var)[f] = D(m2)[f] / (double)c;
  CHECK_EQ_I(td_stats_normalize(x, 1, mean, var, 0, x), 0);
  int bad = 0;
  for (int64_t i = 0; i < 150000; i++) {
    int f = (int)(i % 5);
    if (D(x)[i] != (D(copy)[i] - D(mean)[f]) * (1.0 / sqrt(D(var)[f]))) bad++;
  }
  CHECK_EQ_I(bad, 0);
  /* The normalised data has mean ~0 and variance ~1. */
  int64_t c2 = 0;
  td_tensor *mm = f64(5, 0), *qq = f64(5, 0);
  CHECK_EQ_I(td_stats_update(x, 1, &c2, mm, qq), 0);
  for (int f = 0; f < 5; f++) CHECK(fabs(D(mm)[f]) < 1e-9 && fabs(D(qq)[f] / c2 - 1) < 1e-9);
  td_tensor *all[] = {x, copy, mean, m2, var, mm, qq};
  for (int i = 0; i < 7; i++) td_tensor_release(all[i]);
}

static void test_errors(void) {
  int64_t shape[2] = {4, 3}, c = 0;
  td_tensor *x = td_tensor_full(2, shape, TD_FLOAT32, 1);
  td_tensor *m = f64(3, 0), *q = f64(3, 0), *small = f64(2, 0);
  td_tensor *m32 = td_tensor_full(1, &shape[1], TD_FLOAT32, 0);
  CHECK(td_stats_update(x, 3, &c, m, q) == TD_EINDEX);
  CHECK_ERROR("batch_dims 3 is out of range for an input of shape [4, 3] (0..2)");
  CHECK(td_stats_update(x, 1, &c, small, q) == TD_ESHAPE);
  CHECK_ERROR("stats_update: mean has 2 elements, expected 3 (one per feature)");
  CHECK(td_stats_update(x, 1, &c, m32, q) == TD_EDTYPE);
  CHECK_ERROR("stats_update: mean must be float64, got float32");
  CHECK(td_stats_update(x, 1, &c, m, m) == TD_EINVAL);
  CHECK_ERROR("mean and m2 share memory");
  c = -1;
  CHECK(td_stats_update(x, 1, &c, m, q) == TD_EINVAL);
  CHECK_ERROR("count -1 is negative");
  c = 0;
  CHECK(td_stats_update(NULL, 1, &c, m, q) == TD_EINVAL);
  CHECK(td_stats_merge(&c, m, q, -2, m, q) == TD_EINVAL);
  CHECK_ERROR("counts must be >= 0");
  CHECK(td_stats_merge(&c, m, q, 1, small, q) == TD_ESHAPE);
  CHECK_ERROR("the other mean has 2 elements, expected 3");
  td_tensor *out_i = td_tensor_empty(2, shape, TD_INT32);
  CHECK(td_stats_normalize(x, 1, m, q, 1e-5, out_i) == TD_EDTYPE);
  CHECK_ERROR("stats_normalize: the output must be a floating dtype, got int32");
  int64_t other[2] = {3, 4};
  td_tensor *out_s = td_tensor_empty(2, other, TD_FLOAT32);
  CHECK(td_stats_normalize(x, 1, m, q, 1e-5, out_s) == TD_ESHAPE);
  CHECK_ERROR("out has shape [3, 4], the input [4, 3]");
  CHECK(td_stats_normalize(x, 1, m, q, -1, x) == TD_EINVAL);
  CHECK_ERROR("eps must be >= 0");
  td_tensor tr;
  td_tensor_transpose(x, 0, 1, &tr);
  td_tensor *sq = td_tensor_full(2, shape, TD_FLOAT32, 1);
  td_tensor sqt;
  int64_t sq_shape[2] = {3, 3};
  td_tensor *sq33 = td_tensor_full(2, sq_shape, TD_FLOAT32, 1);
  td_tensor_transpose(sq33, 0, 1, &sqt);
  CHECK(td_stats_normalize(sq33, 1, m, q, 1e-5, &sqt) == TD_EINVAL);
  CHECK_ERROR("out overlaps the input in a different layout");
  td_tensor *all[] = {x, m, q, small, m32, out_i, out_s, sq, sq33};
  for (int i = 0; i < 9; i++) td_tensor_release(all[i]);
}

/* Non-finite values: strict updates refuse them (state untouched, counts given), finite
 * updates skip them per feature and match an update over the finite rows alone; both
 * for float32 (block path) and a transposed float16 view (strided features); counts of
 * NaNs and infinities; merges with counts; the errors of the new calls. */
static void test_nonfinite(void) {
  int64_t shape[2] = {3000, 4}, c = 0, nf[2] = {7, 7};
  td_tensor *x = td_tensor_empty(2, shape, TD_FLOAT32);
  float *px = td_tensor_data_borrow(x);
  for (int64_t i = 0; i < 12000; i++) px[i] = (float)((i * 37) % 101) * 0.25f - 3.0f;
  td_tensor *m = f64(4, 0), *q = f64(4, 0);
  /* clean: strict is the plain update, bit for bit */
  td_tensor *pm = f64(4, 0), *pq = f64(4, 0);
  int64_t pc = 0;
  CHECK_EQ_I(td_stats_update_strict(x, 1, &c, m, q, nf), 0);
  CHECK_EQ_I(nf[0] + nf[1], 0);
  CHECK_EQ_I(td_stats_update(x, 1, &pc, pm, pq), 0);
  CHECK_EQ_I(c, pc);
  CHECK(memcmp(D(m), D(pm), 32) == 0 && memcmp(D(q), D(pq), 32) == 0);
  /* dirty: nothing folded in */
  px[5 * 4 + 1] = NAN;
  px[2900 * 4 + 1] = NAN;
  px[7 * 4 + 3] = -INFINITY;
  CHECK_EQ_I(td_stats_update_strict(x, 1, &c, m, q, nf), 0);
  CHECK_EQ_I(nf[0], 2);
  CHECK_EQ_I(nf[1], 1);
  CHECK_EQ_I(c, 3000);
  CHECK(memcmp(D(m), D(pm), 32) == 0 && memcmp(D(q), D(pq), 32) == 0);
  int64_t counted[2];
  CHECK_EQ_I(td_stats_count_nonfinite(x, counted), 0);
  CHECK(counted[0] == 2 && counted[1] == 1);
  /* normalising while counting: the plain result, and the counts (the transposed view
   * walks its features one by one) */
  td_tensor *o1 = td_tensor_empty(2, shape, TD_FLOAT32), *o2 = td_tensor_empty(2, shape, TD_FLOAT32);
  td_tensor *one = f64(4, 1);
  int64_t seen[2] = {9, 9};
  CHECK_EQ_I(td_stats_normalize(x, 1, pm, one, 0, o1), 0);
  CHECK_EQ_I(td_stats_normalize_counted(x, 1, pm, one, 0, o2, seen), 0);
  CHECK(seen[0] == 2 && seen[1] == 1);
  CHECK(memcmp(td_tensor_data_borrow(o1), td_tensor_data_borrow(o2), 12000 * sizeof(float)) == 0);
  td_tensor ot1, ot2;
  td_tensor_transpose(x, 0, 1, &ot1);
  td_tensor *o3 = td_tensor_empty(2, (int64_t[]){4, 3000}, TD_FLOAT32);
  td_tensor_transpose(o3, 0, 1, &ot2);
  td_tensor *col = f64(3000, 0), *col1 = f64(3000, 1);
  CHECK_EQ_I(td_stats_normalize_counted(&ot1, 1, col, col1, 0, o3, seen), 0);
  CHECK(seen[0] == 2 && seen[1] == 1);
  /* features [2, 2] transposed: not one run, so each row walks them (count_x) */
  td_tensor v3, vt;
  CHECK_EQ_I(td_tensor_view(x, 3, (int64_t[]){3000, 2, 2}, &v3), 0);
  td_tensor_transpose(&v3, 1, 2, &vt);
  td_tensor *o4 = td_tensor_empty(3, (int64_t[]){3000, 2, 2}, TD_FLOAT32);
  CHECK_EQ_I(td_stats_normalize_counted(&vt, 1, pm, one, 0, o4, seen), 0);
  CHECK(seen[0] == 2 && seen[1] == 1);
  td_tensor_release(o4);
  td_tensor *clean = td_tensor_full(2, shape, TD_FLOAT32, 2);
  CHECK_EQ_I(td_stats_normalize_counted(clean, 1, pm, one, 0, o2, seen), 0);
  CHECK(seen[0] == 0 && seen[1] == 0);
  CHECK(td_stats_normalize_counted(clean, 1, pm, one, 0, o2, NULL) == TD_EINVAL);
  CHECK_ERROR("stats_normalize_counted: nonfinite is NULL");
  td_tensor *more[] = {o1, o2, one, o3, col, col1, clean};
  for (size_t i = 0; i < sizeof more / sizeof *more; i++) td_tensor_release(more[i]);
  /* finite: per-feature counts, and the same statistics as the finite rows alone */
  int64_t rows = 0;
  td_tensor *cnt = td_tensor_full(1, &shape[1], TD_INT64, 0);
  td_tensor *fm = f64(4, 0), *fq = f64(4, 0);
  CHECK_EQ_I(td_stats_update_finite(x, 1, &rows, cnt, fm, fq), 0);
  CHECK_EQ_I(rows, 3000);
  const int64_t *pcnt = td_tensor_data_borrow(cnt);
  CHECK(pcnt[0] == 3000 && pcnt[1] == 2998 && pcnt[2] == 3000 && pcnt[3] == 2999);
  for (int f = 0; f < 4; f++) {
    ld s = 0, ss = 0;
    int64_t n = 0;
    for (int64_t r = 0; r < 3000; r++) {
      float v = px[r * 4 + f];
      if (isfinite(v)) s += v, n++;
    }
    ld mean = s / n;
    for (int64_t r = 0; r < 3000; r++) {
      float v = px[r * 4 + f];
      if (isfinite(v)) ss += (v - mean) * (v - mean);
    }
    CHECK(close_to(D(fm)[f], mean, 1) && close_to(D(fq)[f], ss, ss));
  }
  /* the strided path (features not one run) gives the same counts and statistics */
  td_tensor t1, tv;
  td_tensor_transpose(x, 0, 1, &t1);
  td_tensor *xt = td_tensor_contiguous(&t1); /* [4, 3000] */
  td_tensor_transpose(xt, 0, 1, &tv);        /* [3000, 4], strides (1, 3000) */
  td_tensor *cnt2 = td_tensor_full(1, &shape[1], TD_INT64, 0), *sm = f64(4, 0), *sq = f64(4, 0);
  int64_t rows2 = 0;
  CHECK_EQ_I(td_stats_update_finite(&tv, 1, &rows2, cnt2, sm, sq), 0);
  CHECK(memcmp(td_tensor_data_borrow(cnt2), pcnt, 32) == 0);
  CHECK(memcmp(D(sm), D(fm), 32) == 0 && memcmp(D(sq), D(fq), 32) == 0);
  /* merging two finite halves equals one finite pass within rounding */
  td_tensor a, b;
  td_tensor_slice(x, 0, 0, 1500, 1, &a);
  td_tensor_slice(x, 0, 1500, 3000, 1, &b);
  td_tensor *ca = td_tensor_full(1, &shape[1], TD_INT64, 0), *cb = td_tensor_full(1, &shape[1], TD_INT64, 0);
  td_tensor *ma = f64(4, 0), *qa = f64(4, 0), *mb = f64(4, 0), *qb = f64(4, 0);
  int64_t ra = 0, rb = 0;
  CHECK_EQ_I(td_stats_update_finite(&a, 1, &ra, ca, ma, qa), 0);
  CHECK_EQ_I(td_stats_update_finite(&b, 1, &rb, cb, mb, qb), 0);
  CHECK_EQ_I(td_stats_merge_counts(ca, ma, qa, cb, mb, qb), 0);
  CHECK(memcmp(td_tensor_data_borrow(ca), pcnt, 32) == 0);
  for (int f = 0; f < 4; f++) CHECK(close_to(D(ma)[f], D(fm)[f], 1) && close_to(D(qa)[f], D(fq)[f], D(fq)[f]));
  /* errors */
  td_tensor *c32 = td_tensor_full(1, &shape[1], TD_INT32, 0), *c3 = td_tensor_full(1, &shape[0], TD_INT64, 0);
  CHECK(td_stats_update_finite(x, 1, &rows, c32, fm, fq) == TD_EDTYPE);
  CHECK_ERROR("stats_update_finite: counts must be int64, got int32");
  CHECK(td_stats_update_finite(x, 1, &rows, c3, fm, fq) == TD_ESHAPE);
  CHECK_ERROR("stats_update_finite: counts has 3000 elements, expected 4 (one per feature)");
  int64_t *neg = td_tensor_data_borrow(cb);
  neg[2] = -1;
  CHECK(td_stats_merge_counts(ca, ma, qa, cb, mb, qb) == TD_EINVAL);
  CHECK_ERROR("stats_merge_counts: the other counts holds the negative count -1");
  CHECK(td_stats_update_strict(x, 1, &c, m, q, NULL) == TD_EINVAL);
  CHECK_ERROR("stats_update_strict: nonfinite is NULL");
  CHECK(td_stats_count_nonfinite(x, NULL) == TD_EINVAL);
  td_tensor *all[] = {x, m, q, pm, pq, cnt, fm, fq, xt, cnt2, sm, sq, ca, cb, ma, qa, mb, qb, c32, c3};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) td_tensor_release(all[i]);
}

int main(void) {
  test_nonfinite();
  test_dtypes_layouts();
  test_stability_and_merge();
  test_threads();
  test_normalize();
  test_errors();
  CHECK_SUMMARY();
}
