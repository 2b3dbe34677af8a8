/* test_sort.c: the radix sort (td_sort) against a reference, a stable comparison sort of
 * positions by torch.sort's order (NaN greatest, -0.0 == 0.0, ties by position), on random
 * data of every dtype: short rows (insertion), 8-bit and 11-bit digits, rows long enough
 * for the pool's chunks, ascending and descending, several rows along either dim; the same
 * results for 1, 2 and 3 threads. Then the selections and counts built on it (topk,
 * kthvalue, median, mode, unique, searchsorted, histc, bincount) against references of
 * their own, and the error messages. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "tensors.h"

/* ---- a reference order ------------------------------------------------------------------ */

/* Element i of a contiguous 1-D buffer as (NaN?, value): exact for every dtype (int64
 * compared through the int64 itself). */
typedef struct ref_ctx {
  const td_tensor *t;
  int desc;
} ref_ctx;

static bool is_nan_at(const td_tensor *t, int64_t i) {
  int64_t idx[1] = {i};
  double v = rd(t, idx);
  return v != v;
}

static int cmp_values(const td_tensor *t, int64_t a, int64_t b) {
  const bool an = is_nan_at(t, a), bn = is_nan_at(t, b);
  if (an || bn) return an - bn;
  if (t->dtype == TD_INT64) {
    const int64_t *p = td_tensor_data_borrow(t);
    return (p[a] > p[b]) - (p[a] < p[b]);
  }
  int64_t ia[1] = {a}, ib[1] = {b};
  const double x = rd(t, ia), y = rd(t, ib);
  return (x > y) - (x < y);
}

static int cmp_ref(const void *pa, const void *pb, void *arg) {
  const ref_ctx *c = arg;
  const int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  int r = cmp_values(c->t, a, b);
  if (c->desc) r = -r;
  return r ? r : (a > b) - (a < b);
}

/* The stable order of a contiguous 1-D t. */
static int64_t *ref_order(const td_tensor *t, int desc) {
  const int64_t n = t->shape[0];
  int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
  for (int64_t i = 0; i < n; i++) order[i] = i;
  ref_ctx c = {t, desc};
  qsort_r(order, (size_t)n, sizeof *order, cmp_ref, &c);
  return order;
}

/* ---- random data ------------------------------------------------------------------------- */

/* n random elements of dtype: raw bits (every value, NaN among them for the floats), or
 * (few = true) a handful of values with many ties, NaN of both signs, -0.0 and 0.0. */
static td_tensor *random_tensor(int32_t dtype, int64_t n, bool few) {
  td_tensor *t = td_tensor_empty(1, &n, dtype);
  char *p = td_tensor_data_borrow(t);
  const int64_t isz = t->itemsize;
  static const double pool[] = {0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e30, -1e-30, 7.0, 100.0};
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rnd();
    if (dtype == TD_BOOL) {
      p[i] = (char)(r & 1);
    } else if (!few) {
      memcpy(p + i * isz, &r, (size_t)isz);
    } else {
      const int pick = (int)(r % 12);
      int64_t idx[1] = {i};
      if (!td_dtype_is_floating(dtype)) {
        wr(t, idx, (double)(int64_t)(r % 5) - (dtype == TD_UINT8 ? 0 : 2));
      } else if (pick < 10) {
        wr(t, idx, pool[pick]);
      } else {
        wr(t, idx, pick == 10 ? NAN : -NAN);
      }
    }
  }
  return t;
}

/* ---- sort -------------------------------------------------------------------------------- */

static bool same_bits(const td_tensor *t, int64_t i, const td_tensor *u, int64_t j) {
  return memcmp((const char *)td_tensor_data_borrow(t) + i * t->itemsize,
                (const char *)td_tensor_data_borrow(u) + j * u->itemsize, (size_t)t->itemsize) == 0;
}

static void check_sort_1d(const td_tensor *t, int desc) {
  td_tensor *idx = NULL, *v = td_sort(t, 0, desc, &idx);
  CHECK(v && idx);
  if (!v || !idx) return;
  int64_t *order = ref_order(t, desc);
  const int64_t *got = td_tensor_data_borrow(idx), n = t->shape[0];
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (got[i] != order[i] || !same_bits(v, i, t, order[i])) bad = i;
  if (bad >= 0)
    fprintf(stderr, "  sort of %lld %s (desc %d): position %lld holds index %lld, expected %lld\n",
            (long long)n, td_dtype_name(t->dtype), desc, (long long)bad, (long long)got[bad],
            (long long)order[bad]);
  CHECK_EQ_I(bad, -1);
  free(order);
  td_tensor_release(v);
  td_tensor_release(idx);
}

/* Under valgrind (scripts/run-valgrind.sh) the long rows are left to two dtypes. */
static bool slow(void) { return getenv("TD_VALGRIND") != NULL; }

static void test_sort_random(void) {
  static const int64_t lengths[] = {0, 1, 2, 5, 31, 32, 33, 200, 1000, 65535, 65536, 70001};
  for (int d = 0; d < TD_NUM_DTYPES; d++) {
    for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
      /* every key width gets 11-bit digits: int16, int32, float32, int64, float16 */
      const int32_t dt = all_dtypes[d];
      if (lengths[l] > 1000 && (slow() ? dt != TD_FLOAT32 && dt != TD_INT64
                                       : dt == TD_UINT8 || dt == TD_INT8 || dt == TD_BFLOAT16))
        continue;
      for (int few = 0; few < 2; few++) {
        td_tensor *t = random_tensor(all_dtypes[d], lengths[l], few);
        check_sort_1d(t, 0);
        check_sort_1d(t, 1);
        td_tensor_release(t);
      }
    }
  }
}

/* The same values and indices for 1, 2 and 3 threads, on rows long enough for the pool. */
static void test_sort_threads(void) {
  const int32_t saved = td_get_num_threads();
  static const int32_t dtypes[] = {TD_FLOAT32, TD_INT64, TD_FLOAT64, TD_INT16};
  for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
    td_tensor *t = random_tensor(dtypes[d], slow() ? 40001 : 300001, d % 2 == 1);
    td_tensor *vals[3], *idx[3];
    for (int th = 1; th <= 3; th++) {
      td_set_num_threads(th);
      vals[th - 1] = td_sort(t, 0, th == 2, &idx[th - 1]);
      CHECK(vals[th - 1] != NULL);
    }
    td_set_num_threads(2);
    td_tensor *i2 = NULL, *v2 = td_sort(t, 0, 0, &i2);
    td_set_num_threads(1);
    const int64_t n = t->shape[0];
    CHECK(memcmp(td_tensor_data_borrow(vals[0]), td_tensor_data_borrow(v2), (size_t)(n * t->itemsize)) == 0);
    CHECK(memcmp(td_tensor_data_borrow(idx[0]), td_tensor_data_borrow(i2), (size_t)n * 8) == 0);
    CHECK(memcmp(td_tensor_data_borrow(vals[0]), td_tensor_data_borrow(vals[2]), (size_t)(n * t->itemsize)) == 0);
    CHECK(memcmp(td_tensor_data_borrow(idx[0]), td_tensor_data_borrow(idx[2]), (size_t)n * 8) == 0);
    td_set_num_threads(2);
    check_sort_1d(t, 0); /* the pool's chunks against the reference */
    check_sort_1d(t, 1);
    td_set_num_threads(1);
    for (int k = 0; k < 3; k++) td_tensor_release(vals[k]), td_tensor_release(idx[k]);
    td_tensor_release(v2), td_tensor_release(i2);
    td_tensor_release(t);
  }
  td_set_num_threads(saved);
}

/* Rows along either dim of a 2-D tensor: each row (column) as its own 1-D sort; a few
 * long rows (sorted one after the other, each on the pool) with 2 threads. */
static void check_sort_dims(const int64_t *shape, int32_t dtype) {
  td_tensor *flat = random_tensor(dtype, shape[0] * shape[1], true);
  {
    td_tensor view;
    td_tensor_view(flat, 2, shape, &view);
    for (int32_t dim = 0; dim < 2; dim++) {
      td_tensor *idx = NULL, *v = td_sort(&view, dim, 1, &idx);
      CHECK(v && idx && v->shape[0] == shape[0] && v->shape[1] == shape[1]);
      bool ok = true;
      for (int64_t r = 0; ok && r < shape[1 - dim]; r++) {
        td_tensor line, vline, iline;
        td_tensor_select(&view, 1 - dim, r, &line);
        td_tensor_select(v, 1 - dim, r, &vline);
        td_tensor_select(idx, 1 - dim, r, &iline);
        td_tensor *c = td_tensor_contiguous(&line), *vc = td_tensor_contiguous(&vline);
        td_tensor *ic = td_tensor_contiguous(&iline);
        int64_t *order = ref_order(c, 1);
        const int64_t *got = td_tensor_data_borrow(ic);
        for (int64_t i = 0; ok && i < c->shape[0]; i++) ok = got[i] == order[i] && same_bits(vc, i, c, order[i]);
        free(order);
        td_tensor_release(c), td_tensor_release(vc), td_tensor_release(ic);
      }
      CHECK(ok);
      td_tensor_release(v), td_tensor_release(idx);
    }
    td_tensor_release(flat);
  }
}

static void test_sort_dims(void) {
  const int64_t small[2] = {37, 41}, tall[2] = {slow() ? 20000 : 40000, 3};
  for (int d = 0; d < TD_NUM_DTYPES; d++) check_sort_dims(small, all_dtypes[d]);
  const int32_t saved = td_get_num_threads();
  td_set_num_threads(2);
  check_sort_dims(tall, TD_FLOAT32);
  check_sort_dims(tall, TD_INT64);
  td_set_num_threads(saved);
}

/* ---- selections ---------------------------------------------------------------------------- */

static void test_topk_kth(void) {
  const int32_t saved = td_get_num_threads();
  static const int64_t lengths[] = {1, 7, 100, 1000, 50000};
  const size_t nl = slow() ? 4 : 5;
  for (int th = 1; th <= 2; th++) {
    td_set_num_threads(th);
    for (int d = 0; d < TD_NUM_DTYPES; d++) {
      for (size_t l = 0; l < nl; l++) {
        const int64_t n = lengths[l];
        td_tensor *t = random_tensor(all_dtypes[d], n, l % 2 == 0);
        const int64_t ks[] = {1, n < 10 ? n : 10, n / 3 > 0 ? n / 3 : 1, n};
        for (int largest = 0; largest < 2; largest++) {
          int64_t *order = ref_order(t, largest);
          for (int kk = 0; kk < 4; kk++) {
            const int64_t k = ks[kk];
            td_tensor *idx = NULL, *v = td_topk(t, k, 0, largest, &idx);
            CHECK(v && idx && v->shape[0] == k);
            const int64_t *got = td_tensor_data_borrow(idx);
            bool ok = true;
            for (int64_t i = 0; i < k; i++) ok = ok && got[i] == order[i] && same_bits(v, i, t, order[i]);
            if (!ok) fprintf(stderr, "  topk %lld of %lld %s largest %d\n", (long long)k, (long long)n,
                             td_dtype_name(t->dtype), largest);
            CHECK(ok);
            td_tensor_release(v), td_tensor_release(idx);
            if (!largest) {
              v = td_kthvalue(t, k, 0, &idx);
              CHECK(v && idx && v->ndim == 0);
              CHECK_EQ_I(*(int64_t *)td_tensor_data_borrow(idx), order[k - 1]);
              td_tensor_release(v), td_tensor_release(idx);
            }
          }
          if (!largest && all_dtypes[d] != TD_BOOL) { /* median: rank (n - 1) / 2, NaN first */
            td_tensor *idx = NULL, *v = td_median(t, 0, 0, &idx);
            int64_t expect = order[(n - 1) / 2];
            for (int64_t i = 0; i < n; i++)
              if (is_nan_at(t, i)) {
                expect = i;
                break;
              }
            CHECK(v && *(int64_t *)td_tensor_data_borrow(idx) == expect);
            td_tensor_release(v), td_tensor_release(idx);
          }
          free(order);
        }
        td_tensor_release(t);
      }
    }
  }
  td_set_num_threads(saved);
  /* k out of range, the kth k of 0 */
  td_tensor *t = random_tensor(TD_FLOAT32, 5, true), *idx = NULL;
  CHECK(td_topk(t, 6, 0, 1, &idx) == NULL);
  CHECK_ERROR("topk: k 6 is out of range for a dim of size 5");
  CHECK(td_kthvalue(t, 0, 0, &idx) == NULL);
  CHECK_ERROR("kthvalue: k 0 is out of range");
  td_tensor_release(t);
}

static void test_mode(void) {
  /* 3 1 3 1 2: 1 and 3 twice each, 1 the smaller; its last index 3 */
  int64_t n = 5;
  td_tensor *t = td_tensor_empty(1, &n, TD_FLOAT32);
  const float v[] = {3, 1, 3, 1, 2};
  memcpy(td_tensor_data_borrow(t), v, sizeof v);
  td_tensor *idx = NULL, *m = td_mode(t, 0, &idx);
  CHECK(m && *(float *)td_tensor_data_borrow(m) == 1 && *(int64_t *)td_tensor_data_borrow(idx) == 3);
  td_tensor_release(m), td_tensor_release(idx), td_tensor_release(t);
}

/* ---- unique ------------------------------------------------------------------------------ */

/* unique's values, inverse and counts against the reference order: runs of equal values
 * (a NaN alone), each shown as its run's first element. */
static void check_unique(const td_tensor *t) {
  td_tensor *inv = NULL, *cnt = NULL, *u = td_unique(t, 0, &inv, &cnt);
  CHECK(u && inv && cnt);
  if (!u) return;
  const int64_t n = t->shape[0];
  int64_t *order = ref_order(t, 0);
  int64_t k = -1;
  bool ok = true;
  const int64_t *iv = td_tensor_data_borrow(inv), *cv = td_tensor_data_borrow(cnt);
  int64_t run = 0;
  for (int64_t i = 0; i < n && ok; i++) {
    const bool starts = i == 0 || is_nan_at(t, order[i]) || cmp_values(t, order[i - 1], order[i]) != 0;
    if (starts) {
      if (k >= 0) ok = cv[k] == run;
      k++, run = 0;
      ok = ok && k < u->shape[0] && same_bits(u, k, t, order[i]);
    }
    run++;
    ok = ok && iv[order[i]] == k;
  }
  if (ok && n > 0) ok = cv[k] == run && u->shape[0] == k + 1;
  if (!ok) fprintf(stderr, "  unique of %lld %s\n", (long long)n, td_dtype_name(t->dtype));
  CHECK(ok);
  /* without inverse and counts: the same values */
  td_tensor *u2 = td_unique(t, 0, NULL, NULL);
  CHECK(u2 && u2->shape[0] == u->shape[0] &&
        memcmp(td_tensor_data_borrow(u2), td_tensor_data_borrow(u), (size_t)(u->shape[0] * u->itemsize)) == 0);
  td_tensor_release(u2);
  free(order);
  td_tensor_release(u), td_tensor_release(inv), td_tensor_release(cnt);
}

static void test_unique(void) {
  static const int64_t lengths[] = {0, 1, 40, 1000, 100000};
  for (int d = 0; d < TD_NUM_DTYPES; d++) {
    for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
      for (int few = 0; few < 2; few++) {
        td_tensor *t = random_tensor(all_dtypes[d], lengths[l], few);
        check_unique(t);
        td_tensor_release(t);
      }
    }
  }
  /* unique_consecutive: 1 1 2 2 1 -> 1 2 1, inverse 0 0 1 1 2, counts 2 2 1 */
  int64_t n = 5;
  td_tensor *t = td_tensor_empty(1, &n, TD_INT32);
  const int32_t v[] = {1, 1, 2, 2, 1};
  memcpy(td_tensor_data_borrow(t), v, sizeof v);
  td_tensor *inv = NULL, *cnt = NULL, *u = td_unique(t, 1, &inv, &cnt);
  CHECK(u && u->shape[0] == 3);
  const int64_t *iv = td_tensor_data_borrow(inv), *cv = td_tensor_data_borrow(cnt);
  CHECK(iv[0] == 0 && iv[1] == 0 && iv[2] == 1 && iv[3] == 1 && iv[4] == 2);
  CHECK(cv[0] == 2 && cv[1] == 2 && cv[2] == 1);
  td_tensor_release(u), td_tensor_release(inv), td_tensor_release(cnt), td_tensor_release(t);
}

/* ---- searchsorted, histc, bincount ---------------------------------------------------------- */

static void test_search_and_counts(void) {
  /* searchsorted against a linear count, both sides */
  int64_t n = 1000, m = 5000;
  td_tensor *seq = td_tensor_empty(1, &n, TD_FLOAT64), *vals = td_tensor_empty(1, &m, TD_FLOAT64);
  double *s = td_tensor_data_borrow(seq), *v = td_tensor_data_borrow(vals);
  for (int64_t i = 0; i < n; i++) s[i] = (double)(i / 3); /* ties */
  for (int64_t i = 0; i < m; i++) v[i] = (double)(rnd() % 4000) / 10 - 20;
  for (int right = 0; right < 2; right++) {
    td_tensor *r = td_searchsorted(seq, vals, right, NULL, 0);
    CHECK(r != NULL);
    const int64_t *rp = td_tensor_data_borrow(r);
    bool ok = true;
    for (int64_t i = 0; i < m && ok; i++) {
      int64_t expect = 0;
      while (expect < n && (right ? s[expect] <= v[i] : s[expect] < v[i])) expect++;
      ok = rp[i] == expect;
    }
    CHECK(ok);
    td_tensor_release(r);
  }
  td_tensor_release(seq), td_tensor_release(vals);

  /* histc of float64 against the formula; bincount against a loop */
  int64_t k = 100000;
  td_tensor *x = td_tensor_empty(1, &k, TD_FLOAT64);
  double *xp = td_tensor_data_borrow(x);
  for (int64_t i = 0; i < k; i++) xp[i] = (double)(rnd() % 100000) / 1000 - 10;
  td_tensor *h = td_histc(x, 37, -5, 80);
  CHECK(h && h->shape[0] == 37);
  int64_t ref[37] = {0};
  for (int64_t i = 0; i < k; i++) {
    if (!(xp[i] >= -5 && xp[i] <= 80)) continue;
    int64_t pos = (int64_t)((xp[i] + 5) * 37 / 85.0);
    ref[pos == 37 ? 36 : pos]++;
  }
  bool ok = true;
  for (int b = 0; b < 37; b++) ok = ok && ((double *)td_tensor_data_borrow(h))[b] == (double)ref[b];
  CHECK(ok);
  td_tensor_release(h);
  td_tensor_release(x);
  td_tensor *ints = td_tensor_empty(1, &k, TD_INT64);
  int64_t *ip = td_tensor_data_borrow(ints), counts[500] = {0};
  for (int64_t i = 0; i < k; i++) counts[ip[i] = (int64_t)(rnd() % 500)]++;
  for (int th = 1; th <= 2; th++) {
    td_set_num_threads(th);
    td_tensor *bc = td_bincount(ints, NULL, 600);
    CHECK(bc && bc->shape[0] == 600);
    ok = true;
    for (int b = 0; b < 600; b++) ok = ok && ((int64_t *)td_tensor_data_borrow(bc))[b] == (b < 500 ? counts[b] : 0);
    CHECK(ok);
    td_tensor_release(bc);
  }
  td_set_num_threads(1);
  /* values past the one-pass counts (4096): the second road */
  int64_t *wide = calloc(20000, sizeof *wide);
  for (int64_t i = 0; i < k; i++) wide[ip[i] = (int64_t)(rnd() % 20000)]++;
  for (int th = 1; th <= 2; th++) {
    td_set_num_threads(th);
    td_tensor *bc = td_bincount(ints, NULL, 0);
    CHECK(bc != NULL);
    ok = bc != NULL;
    for (int64_t b = 0; ok && b < bc->shape[0]; b++) ok = ((int64_t *)td_tensor_data_borrow(bc))[b] == wide[b];
    CHECK(ok);
    td_tensor_release(bc);
  }
  free(wide);
  td_set_num_threads(1);
  ip[7] = -2;
  CHECK(td_bincount(ints, NULL, 0) == NULL);
  CHECK_ERROR("bincount: the input must hold integers >= 0, got -2");
  td_tensor_release(ints);
}

int main(void) {
  td_set_num_threads(1);
  test_sort_random();
  test_sort_threads();
  test_sort_dims();
  test_topk_kth();
  test_mode();
  test_unique();
  test_search_and_counts();
  CHECK_SUMMARY();
}
