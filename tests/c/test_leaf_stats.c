/* test_leaf_stats.c: td_leaf_stats_add against a long double reference from raw element
 * reads, over every dtype and layout, many chunks; NaN and infinity counts; distinct
 * values on both roads (bitmap and set) at and past TD_LEAF_DISTINCT_MAX, inside a chunk
 * and across chunks and calls; 1e8 float32 values near 1e4 to float32 precision; the same
 * bits for any thread count; the error messages. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "tensors.h"

typedef long double ld;

static td_leaf_stats st;

static bool close_rel(ld a, ld b, ld tol) {
  ld d = a > b ? a - b : b - a, s = b < 0 ? -b : b;
  return d <= tol * (s > 1 ? s : 1);
}

/* Every statistic of x (every element finite) against a two-pass reference. */
static void check_reference(const td_tensor *x, const char *what) {
  int64_t n = numel_of(x->ndim, x->shape), index[TD_MAX_DIMS] = {0};
  ld sum = 0, m2 = 0, lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < n; i++, next_index(x->ndim, x->shape, index)) {
    ld v = rd(x, index);
    sum += v, lo = v < lo ? v : lo, hi = v > hi ? v : hi;
  }
  ld mean = sum / n;
  memset(index, 0, sizeof index);
  for (int64_t i = 0; i < n; i++, next_index(x->ndim, x->shape, index)) m2 += (rd(x, index) - mean) * (rd(x, index) - mean);
  td_leaf_stats_init(&st, x->dtype);
  CHECK_EQ_I(td_leaf_stats_add(&st, x), TD_OK);
  bool ok = st.count == n && st.finite == n && st.nan == 0 && st.inf == 0 && st.min == lo && st.max == hi &&
            close_rel(st.mean, mean, 1e-12L) && close_rel(st.m2, m2, 1e-10L);
  if (!ok)
    fprintf(stderr, "%s (%s): count %lld min %g max %g mean %.17g vs %.17Lg m2 %.17g vs %.17Lg\n", what,
            td_dtype_name(x->dtype), (long long)st.count, st.min, st.max, st.mean, mean, st.m2, m2);
  CHECK(ok);
}

static void test_every_dtype_and_layout(void) {
  const int64_t shapes[][2] = {{3, 5}, {700, 400}, {1, 1}};
  for (int d = 0; d < TD_NUM_DTYPES; d++)
    for (int s = 0; s < 3; s++)
      for (int layout = 0; layout < 4; layout++) {
        td_tensor *x = make(2, shapes[s], all_dtypes[d], layout, s);
        check_reference(x, "pattern");
        /* the pattern's 23 values (bool: 2), on the bitmap road */
        if (!td_dtype_is_floating(x->dtype) && x->shape[0] * x->shape[1] >= 23)
          CHECK_EQ_I(st.distinct, x->dtype == TD_BOOL ? 2 : 23);
        if (td_dtype_is_floating(x->dtype)) CHECK_EQ_I(st.distinct, -1);
        td_tensor_release(x);
      }
}

static td_tensor *vec(int64_t n, int32_t dtype) { return td_tensor_empty(1, &n, dtype); }

static void test_nonfinite(void) {
  td_tensor *x = vec(300001, TD_FLOAT32);
  float *p = td_tensor_data_borrow(x);
  for (int64_t i = 0; i < 300001; i++) p[i] = (float)(i % 10);
  p[5] = NAN, p[200000] = INFINITY, p[299999] = -INFINITY, p[7] = NAN;
  td_leaf_stats_init(&st, TD_FLOAT32);
  CHECK_EQ_I(td_leaf_stats_add(&st, x), TD_OK);
  CHECK_EQ_I(st.count, 300001);
  CHECK_EQ_I(st.nan, 2);
  CHECK_EQ_I(st.inf, 2);
  CHECK_EQ_I(st.finite, 299997);
  CHECK(st.min == 0 && st.max == 9);
  /* 30001 zeros .. 30000 nines, less a 5, a 7, a 0 (200000) and a 9 (299999) */
  ld sum = 0;
  for (int64_t i = 0; i < 300001; i++) sum += (p[i] - p[i] == 0) ? p[i] : 0;
  CHECK(close_rel(st.mean, sum / 299997, 1e-14L));
  /* nothing finite: min, max and mean stay NaN */
  for (int64_t i = 0; i < 300001; i++) p[i] = i % 2 ? NAN : -INFINITY;
  td_leaf_stats_init(&st, TD_FLOAT32);
  CHECK_EQ_I(td_leaf_stats_add(&st, x), TD_OK);
  CHECK_EQ_I(st.nan, 150000);
  CHECK_EQ_I(st.inf, 150001);
  CHECK(isnan(st.min) && isnan(st.max) && isnan(st.mean));
  td_tensor_release(x);
  /* float64 near its limit: the sum overflows, Welford does not */
  td_tensor *y = vec(4, TD_FLOAT64);
  double *q = td_tensor_data_borrow(y);
  q[0] = q[1] = q[2] = q[3] = 1.5e308;
  td_leaf_stats_init(&st, TD_FLOAT64);
  CHECK_EQ_I(td_leaf_stats_add(&st, y), TD_OK);
  CHECK(st.mean == 1.5e308 && st.m2 == 0 && st.finite == 4 && st.inf == 0);
  td_tensor_release(y);
}

/* n int64 values: i % modulo scaled by step (step 1e6: the wide road). */
static int64_t distinct_of(int64_t n, int64_t modulo, int64_t step, int32_t dtype) {
  td_tensor *x = vec(n, TD_INT64);
  int64_t *p = td_tensor_data_borrow(x);
  for (int64_t i = 0; i < n; i++) p[i] = (i * 7919 % modulo) * step - 3;
  td_tensor *y = td_tensor_to_dtype(x, dtype);
  td_leaf_stats_init(&st, dtype);
  CHECK_EQ_I(td_leaf_stats_add(&st, y), TD_OK);
  td_tensor_release(x);
  td_tensor_release(y);
  return st.distinct;
}

static void test_distinct(void) {
  CHECK_EQ_I(distinct_of(5000, 1000, 1, TD_INT32), 1000);
  CHECK_EQ_I(distinct_of(5000, 1001, 1, TD_INT32), -1);
  CHECK_EQ_I(distinct_of(5000, 1000, 1000000, TD_INT64), 1000);
  CHECK_EQ_I(distinct_of(5000, 1001, 1000000, TD_INT64), -1);
  /* values ascending, the first and last as expected */
  CHECK_EQ_I(distinct_of(5000, 1000, 1000000, TD_INT64), 1000);
  CHECK_EQ_I(st.values[0], -3);
  CHECK_EQ_I(st.values[999], 999 * 1000000LL - 3);
  /* 600 distinct values in each of two chunks (1 << 17 each), 1200 together */
  td_tensor *x = vec(1 << 18, TD_INT16);
  int16_t *p = td_tensor_data_borrow(x);
  for (int64_t i = 0; i < (1 << 18); i++) p[i] = (int16_t)(i % 600 + (i >= (1 << 17) ? 600 : 0));
  td_leaf_stats_init(&st, TD_INT16);
  CHECK_EQ_I(td_leaf_stats_add(&st, x), TD_OK);
  CHECK_EQ_I(st.distinct, -1);
  /* the same halves in two calls: 600 after the first, past the limit after the second */
  td_tensor half = *x;
  half.refcount = 0;
  CHECK_EQ_I(td_tensor_slice(x, 0, 0, 1 << 17, 1, &half), TD_OK);
  td_leaf_stats_init(&st, TD_INT16);
  CHECK_EQ_I(td_leaf_stats_add(&st, &half), TD_OK);
  CHECK_EQ_I(st.distinct, 600);
  CHECK_EQ_I(td_tensor_slice(x, 0, 1 << 17, 1 << 18, 1, &half), TD_OK);
  CHECK_EQ_I(td_leaf_stats_add(&st, &half), TD_OK);
  CHECK_EQ_I(st.distinct, -1);
  CHECK_EQ_I(st.count, 1 << 18);
  td_tensor_release(x);
  /* int64 extremes: the span overflows int64 but not the unsigned difference */
  td_tensor *e = vec(3, TD_INT64);
  int64_t *q = td_tensor_data_borrow(e);
  q[0] = INT64_MIN, q[1] = INT64_MAX, q[2] = 0;
  td_leaf_stats_init(&st, TD_INT64);
  CHECK_EQ_I(td_leaf_stats_add(&st, e), TD_OK);
  CHECK_EQ_I(st.distinct, 3);
  CHECK(st.values[0] == INT64_MIN && st.values[1] == 0 && st.values[2] == INT64_MAX);
  td_tensor_release(e);
}

/* 1e8 float32 values near 1e4 (10000 + k / 8 for k = i % 7: exact in float32): the mean
 * and std to float32 precision, the same bits for 1 and 4 threads. */
static void test_large_float32(void) {
  const int64_t n = 100000000;
  td_tensor *x = vec(n, TD_FLOAT32);
  if (!x) {
    CHECK(!"1e8 float32 values: out of memory");
    return;
  }
  float *p = td_tensor_data_borrow(x);
  for (int64_t i = 0; i < n; i++) p[i] = 10000.0f + (float)(i % 7) * 0.125f;
  ld sum = 0, m2 = 0;
  int64_t per[7] = {0};
  for (int64_t i = 0; i < n; i++) per[i % 7]++;
  for (int k = 0; k < 7; k++) sum += per[k] * (10000.0L + k * 0.125L);
  ld mean = sum / n;
  for (int k = 0; k < 7; k++) m2 += per[k] * (10000.0L + k * 0.125L - mean) * (10000.0L + k * 0.125L - mean);
  ld std = sqrtl(m2 / (n - 1));
  td_set_num_threads(1);
  td_leaf_stats_init(&st, TD_FLOAT32);
  CHECK_EQ_I(td_leaf_stats_add(&st, x), TD_OK);
  td_leaf_stats one = st;
  td_set_num_threads(4);
  td_leaf_stats_init(&st, TD_FLOAT32);
  CHECK_EQ_I(td_leaf_stats_add(&st, x), TD_OK);
  CHECK(memcmp(&one, &st, sizeof st) == 0);
  CHECK(close_rel(st.mean, mean, 1e-12L));
  ld got_std = sqrtl((ld)st.m2 / (n - 1));
  if (!close_rel(got_std, std, 1e-7L)) fprintf(stderr, "std %.17Lg vs %.17Lg\n", got_std, std);
  CHECK(close_rel(got_std, std, 1e-7L));
  CHECK(st.min == 10000 && st.max == 10000.75);
  td_tensor_release(x);
}

static void test_errors(void) {
  td_tensor *x = vec(3, TD_FLOAT32);
  td_leaf_stats_init(&st, TD_INT32);
  CHECK(td_leaf_stats_add(&st, x) == TD_EDTYPE);
  CHECK_ERROR("leaf_stats: the state counts int32 values, got a float32 tensor");
  CHECK(td_leaf_stats_add(NULL, x) == TD_EINVAL);
  CHECK_ERROR("leaf_stats: NULL argument");
  /* an empty tensor adds nothing */
  td_tensor *e = vec(0, TD_INT32);
  CHECK_EQ_I(td_leaf_stats_add(&st, e), TD_OK);
  CHECK(st.count == 0 && st.distinct == 0 && isnan(st.mean));
  td_tensor_release(x);
  td_tensor_release(e);
}

int main(void) {
  test_every_dtype_and_layout();
  test_nonfinite();
  test_distinct();
  test_errors();
  test_large_float32();
  CHECK_SUMMARY();
}
