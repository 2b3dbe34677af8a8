/* test_sum_tree.c: td_sum_tree against a linear scan: totals and minima after batches
 * of updates (duplicates, zeros, a capacity that is not a power of two), draws at and
 * around every prefix-sum boundary and at the end of [0, 1), capacities around the
 * tree's block of 16, the importance weights' formula, leaves written
 * through to the caller's tensor and read back by a new tree, no drift over a million
 * updates, and every refusal's message (nothing changes after one). */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

static td_tensor *vec(int64_t n, int32_t dtype) { return td_tensor_full(1, &n, dtype, 0); }
static double *F(const td_tensor *t) { return td_tensor_data_borrow(t); }
static int64_t *I(const td_tensor *t) { return td_tensor_data_borrow(t); }

/* The leaf a linear scan finds for mass: the first whose running sum passes it. */
static int64_t scan(const double *p, int64_t n, double mass) {
  double run = 0;
  for (int64_t i = 0; i < n; i++) {
    run += p[i];
    if (p[i] > 0 && mass < run) return i;
  }
  for (int64_t i = n - 1; i >= 0; i--)
    if (p[i] > 0) return i;
  return -1;
}

static void check_against_scan(td_sum_tree *t, const double *p, int64_t n) {
  double total = 0, mn = INFINITY;
  for (int64_t i = 0; i < n; i++) {
    total += p[i];
    if (p[i] > 0 && p[i] < mn) mn = p[i];
  }
  CHECK(fabs(td_sum_tree_total(t) - total) <= 1e-12 * total);
  CHECK(td_sum_tree_min_positive(t) == mn);
  /* draws just inside every leaf's interval */
  td_tensor *u = vec(2 * n, TD_FLOAT64), *idx = vec(2 * n, TD_INT64), *w = vec(2 * n, TD_FLOAT64);
  double run = 0;
  for (int64_t i = 0; i < n; i++) {
    F(u)[2 * i] = p[i] > 0 ? (run + p[i] * 0.25) / total : 0; /* a leaf of 0 has no interval */
    F(u)[2 * i + 1] = p[i] > 0 ? (run + p[i] * 0.75) / total : 0;
    run += p[i];
  }
  CHECK_EQ_I(td_sum_tree_find(t, u, 0.5, idx, w), 0);
  int bad = 0;
  for (int64_t i = 0; i < 2 * n; i++) {
    int64_t want = scan(p, n, F(u)[i] * total);
    if (I(idx)[i] != want && !bad++)
      fprintf(stderr, "draw %lld (u %.17g): leaf %lld, the scan says %lld\n", (long long)i, F(u)[i],
              (long long)I(idx)[i], (long long)want);
    if (fabs(F(w)[i] - pow(p[I(idx)[i]] / mn, -0.5)) > 1e-15) bad++;
  }
  CHECK_EQ_I(bad, 0);
  td_tensor_release(u);
  td_tensor_release(idx);
  td_tensor_release(w);
}

static void test_basics(void) {
  const int64_t n = 13;
  td_tensor *leaves = vec(n, TD_FLOAT64);
  td_sum_tree *t = td_sum_tree_new(leaves);
  CHECK(t != NULL);
  CHECK_EQ_I(td_sum_tree_capacity(t), n);
  CHECK(td_sum_tree_total(t) == 0);
  CHECK(isinf(td_sum_tree_min_positive(t)));
  td_tensor *u = vec(1, TD_FLOAT64), *one = vec(1, TD_INT64);
  CHECK(td_sum_tree_find(t, u, 0, one, NULL) == TD_EINVAL);
  CHECK_ERROR("td_sum_tree_find: every priority is 0 (nothing to draw)");

  /* a batch with a duplicate (the last wins) and zeros left in between */
  double ref[13] = {0};
  int64_t k = 5;
  td_tensor *idx = vec(k, TD_INT64), *pr = vec(k, TD_FLOAT64);
  const int64_t is[5] = {0, 3, 12, 3, 7};
  const double ps[5] = {1.5, 9, 0.25, 2, 4};
  for (int i = 0; i < 5; i++) {
    I(idx)[i] = is[i];
    F(pr)[i] = ps[i];
    ref[is[i]] = ps[i];
  }
  CHECK_EQ_I(td_sum_tree_set(t, idx, pr), 0);
  CHECK(td_sum_tree_total(t) == 1.5 + 2 + 0.25 + 4);
  check_against_scan(t, ref, n);
  /* written through to the leaves, and a new tree over them is the same tree */
  int same = 1;
  for (int64_t i = 0; i < n; i++) same &= F(leaves)[i] == ref[i];
  CHECK(same);
  td_sum_tree *again = td_sum_tree_new(leaves);
  check_against_scan(again, ref, n);
  td_sum_tree_free(again);

  /* one priority for every index; float32 weights */
  td_tensor *p1 = vec(1, TD_FLOAT64);
  F(p1)[0] = 3;
  CHECK_EQ_I(td_sum_tree_set(t, idx, p1), 0);
  for (int i = 0; i < 5; i++) ref[is[i]] = 3;
  check_against_scan(t, ref, n);
  td_tensor *w32 = vec(1, TD_FLOAT32);
  F(u)[0] = 0.999999;
  CHECK_EQ_I(td_sum_tree_find(t, u, 1, one, w32), 0);
  CHECK_EQ_I(I(one)[0], 12);
  CHECK(((float *)td_tensor_data_borrow(w32))[0] == 1.0f);
  /* setting to 0 removes a leaf from draws and from the minimum */
  I(one)[0] = 12;
  F(p1)[0] = 0;
  CHECK_EQ_I(td_sum_tree_set(t, one, p1), 0);
  ref[12] = 0;
  check_against_scan(t, ref, n);
  CHECK_EQ_I(td_sum_tree_find(t, u, 1, one, NULL), 0);
  CHECK_EQ_I(I(one)[0], 7); /* the last positive leaf */
  F(u)[0] = nextafter(1, 0); /* u * total may round to the total: still a leaf that holds something */
  CHECK_EQ_I(td_sum_tree_find(t, u, 1, one, NULL), 0);
  CHECK_EQ_I(I(one)[0], 7);

  /* refusals: nothing changes */
  double before = td_sum_tree_total(t);
  I(idx)[4] = 13;
  CHECK(td_sum_tree_set(t, idx, pr) == TD_EINDEX);
  CHECK_ERROR("td_sum_tree_set: index 13 is out of range [0, 13) (element 4)");
  I(idx)[4] = -1;
  CHECK(td_sum_tree_set(t, idx, pr) == TD_EINDEX);
  CHECK_ERROR("index -1 is out of range [0, 13)");
  I(idx)[4] = 7;
  F(pr)[2] = -1;
  CHECK(td_sum_tree_set(t, idx, pr) == TD_EINVAL);
  CHECK_ERROR("td_sum_tree_set: priority -1 at element 2 (priorities are finite and >= 0)");
  F(pr)[2] = NAN;
  CHECK(td_sum_tree_set(t, idx, pr) == TD_EINVAL);
  CHECK_ERROR("priority nan at element 2");
  F(pr)[2] = INFINITY;
  CHECK(td_sum_tree_set(t, idx, pr) == TD_EINVAL);
  CHECK_ERROR("priority inf at element 2");
  CHECK(td_sum_tree_total(t) == before);
  td_tensor *p2 = vec(2, TD_FLOAT64);
  CHECK(td_sum_tree_set(t, idx, p2) == TD_ESHAPE);
  CHECK_ERROR("td_sum_tree_set: 2 priorities for 5 indices (give one, or one each)");
  CHECK(td_sum_tree_set(t, pr, pr) == TD_EDTYPE);
  CHECK_ERROR("td_sum_tree_set: the index must be int64, got float64");
  F(u)[0] = 1;
  CHECK(td_sum_tree_find(t, u, 1, one, NULL) == TD_EINVAL);
  CHECK_ERROR("td_sum_tree_find: u[0] is 1, not in [0, 1)");
  F(u)[0] = 0;
  CHECK(td_sum_tree_find(t, u, -1, one, NULL) == TD_EINVAL);
  CHECK_ERROR("td_sum_tree_find: beta must be finite and >= 0, got -1");
  CHECK(td_sum_tree_find(t, u, 1, idx, NULL) == TD_ESHAPE);
  CHECK_ERROR("td_sum_tree_find: 1 draws need 1 indices and weights, got 5 and 1");
  CHECK(td_sum_tree_set(NULL, idx, pr) == TD_EINVAL);
  CHECK_ERROR("td_sum_tree_set: the tree is NULL");

  /* leaves the tree refuses */
  CHECK(td_sum_tree_new(NULL) == NULL);
  CHECK_ERROR("td_sum_tree_new: the leaves is NULL");
  CHECK(td_sum_tree_new(idx) == NULL);
  CHECK_ERROR("td_sum_tree_new: the leaves must be float64, got int64");
  F(leaves)[4] = -2;
  CHECK(td_sum_tree_new(leaves) == NULL);
  CHECK_ERROR("td_sum_tree_new: priority 4 is -2 (priorities are finite and >= 0)");
  int64_t zero = 0;
  td_tensor *empty = td_tensor_empty(1, &zero, TD_FLOAT64);
  CHECK(td_sum_tree_new(empty) == NULL);
  CHECK_ERROR("td_sum_tree_new: the leaves must hold at least one priority");

  td_sum_tree_free(t);
  td_sum_tree_free(NULL);
  td_tensor *all[] = {leaves, u, one, idx, pr, p1, w32, p2, empty};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) td_tensor_release(all[i]);
}

/* A million random updates in batches: the tree's sums stay those of a fresh tree. */
static void test_no_drift(void) {
  const int64_t n = 1000, batch = 1000;
  td_tensor *leaves = vec(n, TD_FLOAT64), *idx = vec(batch, TD_INT64), *pr = vec(batch, TD_FLOAT64);
  td_sum_tree *t = td_sum_tree_new(leaves);
  uint64_t s = 12345;
  for (int round = 0; round < 1000; round++) {
    for (int64_t i = 0; i < batch; i++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      I(idx)[i] = (int64_t)((s >> 33) % (uint64_t)n);
      F(pr)[i] = (0.5 + (double)(s >> 11) / 9007199254740992.0) * (round % 7 == 0 ? 1e6 : 1e-3);
    }
    CHECK(td_sum_tree_set(t, idx, pr) == 0);
  }
  td_sum_tree *fresh = td_sum_tree_new(leaves);
  CHECK(td_sum_tree_total(t) == td_sum_tree_total(fresh));
  CHECK(td_sum_tree_min_positive(t) == td_sum_tree_min_positive(fresh));
  check_against_scan(t, F(leaves), n);
  td_sum_tree_free(fresh);
  td_sum_tree_free(t);
  td_tensor_release(leaves);
  td_tensor_release(idx);
  td_tensor_release(pr);
}

/* Capacities around the block size and its powers: one leaf, 16, 17, 257, 4097. */
static void test_capacities(void) {
  const int64_t caps[] = {1, 16, 17, 257, 4097};
  for (size_t c = 0; c < sizeof caps / sizeof *caps; c++) {
    const int64_t n = caps[c];
    td_tensor *leaves = vec(n, TD_FLOAT64);
    for (int64_t i = 0; i < n; i++) F(leaves)[i] = (double)(i % 5); /* zeros among them */
    if (n == 1) F(leaves)[0] = 2;
    td_sum_tree *t = td_sum_tree_new(leaves);
    CHECK(t != NULL);
    check_against_scan(t, F(leaves), n);
    td_sum_tree_free(t);
    td_tensor_release(leaves);
  }
}

int main(void) {
  test_basics();
  test_capacities();
  test_no_drift();
  CHECK_SUMMARY();
}
