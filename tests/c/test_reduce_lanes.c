/* test_reduce_lanes.c: the additive float reductions (sum, norm 1 and 2, count of
 * nonzeros, var) over contiguous rows of lengths around the row kernels' lane widths
 * (8, and 32 for the wide loop) and the engine's piece length (32768), with values
 * of mixed signs and magnitudes so that the order of the additions shows in the bits:
 * each result is within the error bound of double accumulation of a long double
 * reference, bit-identical for 1 to 4 threads, and the same for a row that starts at
 * an odd offset into a wider tensor (lanes count from the row's start). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "rng.h"

typedef long double ld;

/* Uniform in (-1, 1) scaled by 2^-12 .. 2^12; one in 16 is zero (count_nonzero). */
static double value(void) {
  const uint64_t r = rnd();
  if ((r & 15) == 0) return 0;
  const double u = (double)(r >> 11) * 0x1p-53 * 2 - 1;
  return ldexp(u, (int)((r >> 4) % 25) - 12);
}

static td_tensor *filled(int64_t n, int32_t dtype) {
  td_tensor *t = td_tensor_empty(1, &n, dtype);
  CHECK(t != NULL);
  for (int64_t i = 0; i < n; i++) td_tensor_write_f64(t, &i, value());
  return t;
}

static double read0(const td_tensor *t) {
  return t->dtype == TD_FLOAT32 ? *(const float *)td_tensor_data_borrow(t)
                                : *(const double *)td_tensor_data_borrow(t);
}

static bool same_bits(const td_tensor *a, const td_tensor *b) {
  return a && b && a->itemsize == b->itemsize &&
         memcmp(td_tensor_data_borrow(a), td_tensor_data_borrow(b), (size_t)a->itemsize) == 0;
}

enum { SUM, NORM2, NORM1, NORM0, VAR, NUM_CASES };
static const int32_t case_op[NUM_CASES] = {TD_RED_SUM, TD_RED_NORM, TD_RED_NORM, TD_RED_NORM,
                                           TD_RED_VAR};
static const double case_param[NUM_CASES] = {0, 2, 1, 0, 1};

static td_tensor *run(int c, const td_tensor *x) {
  return td_reduce(case_op[c], x, NULL, 0, 0, case_param[c]);
}

/* The reference of case c over x's values (as the dtype holds them), and the bound of
 * the error double accumulation in chains of about n/32 additions may make, plus half
 * an ulp of the output dtype's rounding. */
static void reference(int c, const td_tensor *x, ld *want, ld *tol) {
  const int64_t n = td_tensor_numel(x);
  ld s = 0, sa = 0, sq = 0, nz = 0;
  for (int64_t i = 0; i < n; i++) {
    const ld v = x->dtype == TD_FLOAT32 ? (ld)((const float *)td_tensor_data_borrow(x))[i]
                                        : (ld)((const double *)td_tensor_data_borrow(x))[i];
    s += v;
    sa += fabsl(v);
    sq += v * v;
    nz += v != 0;
  }
  const ld gamma = ((ld)n / 32 + 64) * 0x1p-53L;
  const ld out_half_ulp = x->dtype == TD_FLOAT32 ? 0x1p-24L : 0x1p-53L;
  switch (c) {
    case SUM: *want = s; *tol = gamma * sa + fabsl(s) * out_half_ulp; break;
    case NORM2: *want = sqrtl(sq); *tol = *want * (gamma + out_half_ulp); break;
    case NORM1: *want = sa; *tol = sa * (gamma + out_half_ulp); break;
    case NORM0: *want = nz; *tol = 0; break;
    default: { /* var: squared deviations from the mean, unbiased */
      const ld mean = s / n;
      ld m2 = 0;
      for (int64_t i = 0; i < n; i++) {
        const ld v = x->dtype == TD_FLOAT32 ? (ld)((const float *)td_tensor_data_borrow(x))[i]
                                            : (ld)((const double *)td_tensor_data_borrow(x))[i];
        m2 += (v - mean) * (v - mean);
      }
      *want = m2 / (n - 1);
      /* the mean's error enters squared deviations linearly: bound it by sa's */
      *tol = (gamma * (sq + 2 * sa * sa / n) + m2 * out_half_ulp) / (n - 1) * 4;
    }
  }
}

static void check_row(int64_t n, int32_t dtype) {
  td_tensor *x = filled(n, dtype);
  /* The same values at offset 3 of a longer row: a view whose data is misaligned. */
  const int64_t wide_n = n + 8;
  td_tensor *wide = td_tensor_empty(1, &wide_n, dtype), view;
  CHECK(wide != NULL);
  const size_t bytes = (size_t)(n * x->itemsize);
  memcpy((char *)td_tensor_data_borrow(wide) + 3 * x->itemsize, td_tensor_data_borrow(x), bytes);
  CHECK_EQ_I(td_tensor_slice(wide, 0, 3, 3 + n, 1, &view), TD_OK);
  for (int c = 0; c < NUM_CASES; c++) {
    td_set_num_threads(1);
    td_tensor *one = run(c, x);
    ld want, tol;
    reference(c, x, &want, &tol);
    const ld got = one ? read0(one) : NAN;
    const bool close = fabsl(got - want) <= tol;
    CHECK(close);
    if (!close)
      fprintf(stderr, "  case %d, n %lld, dtype %d: got %.17Lg, want %.17Lg (tolerance %.3Lg)\n",
              c, (long long)n, (int)dtype, got, want, tol);
    bool same = true;
    for (int32_t th = 2; th <= 4; th++) {
      td_set_num_threads(th);
      td_tensor *many = run(c, x);
      same = same && same_bits(one, many);
      td_tensor_release(many);
    }
    td_tensor *shifted = run(c, &view);
    same = same && same_bits(one, shifted);
    CHECK(same);
    if (!same) fprintf(stderr, "  case %d, n %lld, dtype %d: bits differ\n", c, (long long)n, (int)dtype);
    td_tensor_release(shifted);
    td_tensor_release(one);
  }
  td_tensor_release(wide);
  td_tensor_release(x);
}

/* Rows of a matrix folded one output each (sum over the last dim): every row equals
 * the same values reduced alone, whatever the thread count. */
static void check_rows(int64_t rows, int64_t n) {
  const int64_t shape[2] = {rows, n};
  td_tensor *m = td_tensor_empty(2, shape, TD_FLOAT64);
  CHECK(m != NULL);
  double *p = td_tensor_data_borrow(m);
  for (int64_t i = 0; i < rows * n; i++) p[i] = value();
  const int32_t dim = 1;
  td_set_num_threads(1);
  td_tensor *one = td_reduce(TD_RED_SUM, m, &dim, 1, 0, 0);
  td_set_num_threads(3);
  td_tensor *three = td_reduce(TD_RED_SUM, m, &dim, 1, 0, 0);
  CHECK(one && three && memcmp(td_tensor_data_borrow(one), td_tensor_data_borrow(three),
                               (size_t)rows * sizeof(double)) == 0);
  bool rows_ok = one != NULL;
  for (int64_t r = 0; rows_ok && r < rows; r++) {
    td_tensor row;
    CHECK_EQ_I(td_tensor_select(m, 0, r, &row), TD_OK);
    td_tensor *alone = td_reduce(TD_RED_SUM, &row, NULL, 0, 0, 0);
    rows_ok = alone && read0(alone) == ((const double *)td_tensor_data_borrow(one))[r];
    td_tensor_release(alone);
  }
  CHECK(rows_ok);
  td_tensor_release(one);
  td_tensor_release(three);
  td_tensor_release(m);
}

int main(void) {
  rng_state = 0x2545F4914F6CDD1Dull; /* this test's own sequence */
  const int32_t saved = td_get_num_threads();
  const int64_t lengths[] = {7,   8,    31,    32,    33,    39,    40,    63,     64,
                             65,  95,   96,    97,    1000,  32767, 32768, 32769, 65541,
                             100003};
  const int32_t dtypes[] = {TD_FLOAT32, TD_FLOAT64};
  for (size_t d = 0; d < 2; d++)
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) check_row(lengths[k], dtypes[d]);
  check_rows(7, 33);
  check_rows(5, 1001);
  check_rows(3, 40001);
  td_set_num_threads(saved);
  CHECK_SUMMARY();
}
