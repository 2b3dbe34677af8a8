/*
 * sum_tree.c: td_sum_tree, the sum tree (and min tree) of flow.ReplayBuffer's
 * prioritized sampler.
 *
 * Both trees are complete binary trees in arrays of 2 * size doubles (size the power of
 * two at or above capacity): node k has children 2k and 2k + 1, leaf i is node size + i,
 * leaves past capacity hold 0 (sum) and +inf (min). The min tree holds +inf for a leaf
 * of priority 0 as well: such a leaf is never drawn, so it must not set the largest
 * importance weight. Every parent is recomputed from its two children (no running
 * differences), so the sums are the same however the leaves got their values.
 * The leaves themselves also live in the caller's tensor (a mapped file, in the
 * ReplayBuffer), which is written with each set and read once at creation.
 */
#include <math.h>
#include <stdlib.h>

#include "../src/internal.h"

struct td_sum_tree {
  td_tensor *leaves; /* owned share of the caller's float64 tensor */
  double *sum, *min; /* 2 * size nodes each; node 0 unused */
  int64_t capacity, size;
};

static double *leaf_data(const td_sum_tree *t) { return td_tensor_data_borrow(t->leaves); }

static void free_tree(td_sum_tree *t) {
  if (!t) return;
  free(t->sum);
  free(t->min);
  if (t->leaves) td_tensor_release(t->leaves);
  free(t);
}

TD_EXPORT void td_sum_tree_free(td_sum_tree *t) { free_tree(t); }

static inline double min_value(double p) { return p > 0 ? p : INFINITY; }

/* Node k from its children. */
static inline void pull(td_sum_tree *t, int64_t k) {
  t->sum[k] = t->sum[2 * k] + t->sum[2 * k + 1];
  const double a = t->min[2 * k], b = t->min[2 * k + 1];
  t->min[k] = a < b ? a : b;
}

/* A 1-D contiguous CPU tensor of dtype, or an error naming call and what. */
static int32_t check_vector(const char *call, const char *what, const td_tensor *x, int32_t dtype) {
  if (!x) return td_fail(TD_EINVAL, "%s: %s is NULL", call, what);
  if (x->dtype != dtype)
    return td_fail(TD_EDTYPE, "%s: %s must be %s, got %s", call, what, td_dtype_name(dtype),
                   td_dtype_name(x->dtype));
  if (td_tensor_device_type(x) != TD_DEVICE_CPU)
    return td_fail(TD_EINVAL, "%s: %s must be on the CPU", call, what);
  if (x->ndim != 1 || !td_tensor_is_contiguous(x))
    return td_fail(TD_ESHAPE, "%s: %s must be a contiguous 1-D tensor (%d dims)", call, what, x->ndim);
  return TD_OK;
}

/* A priority the trees take: finite and >= 0. */
static inline int bad_priority(double p) { return !(p >= 0) || isinf(p); }

TD_EXPORT td_sum_tree *td_sum_tree_new(const td_tensor *leaves) {
  static const char call[] = "td_sum_tree_new";
  if (check_vector(call, "the leaves", leaves, TD_FLOAT64) < 0) return NULL;
  const int64_t n = leaves->shape[0];
  if (n < 1) return td_fail_null(TD_ESHAPE, "%s: the leaves must hold at least one priority", call);
  if (!td_tensor_is_writable(leaves)) return td_fail_null(TD_EREADONLY, "%s: the leaves are read-only", call);
  const double *p = td_tensor_data_borrow(leaves);
  for (int64_t i = 0; i < n; i++)
    if (bad_priority(p[i]))
      return td_fail_null(TD_EINVAL, "%s: priority %lld is %g (priorities are finite and >= 0)", call,
                          (long long)i, p[i]);
  int64_t size = 1;
  while (size < n) size *= 2;
  td_sum_tree *t = calloc(1, sizeof *t);
  if (t) {
    t->sum = malloc((size_t)(2 * size) * sizeof *t->sum);
    t->min = malloc((size_t)(2 * size) * sizeof *t->min);
    t->leaves = td_tensor_share(leaves);
  }
  if (!t || !t->sum || !t->min || !t->leaves) {
    free_tree(t);
    return td_fail_null(TD_ENOMEM, "%s: out of memory for a tree of %lld leaves", call, (long long)n);
  }
  t->capacity = n;
  t->size = size;
  for (int64_t i = 0; i < size; i++) {
    t->sum[size + i] = i < n ? p[i] : 0;
    t->min[size + i] = i < n ? min_value(p[i]) : INFINITY;
  }
  t->sum[0] = t->min[0] = 0;
  for (int64_t k = size - 1; k >= 1; k--) pull(t, k);
  return t;
}

TD_EXPORT int64_t td_sum_tree_capacity(const td_sum_tree *t) { return t ? t->capacity : 0; }
TD_EXPORT double td_sum_tree_total(const td_sum_tree *t) { return t ? t->sum[1] : 0; }
TD_EXPORT double td_sum_tree_min_positive(const td_sum_tree *t) { return t ? t->min[1] : INFINITY; }

TD_EXPORT int32_t td_sum_tree_set(td_sum_tree *t, const td_tensor *index, const td_tensor *priority) {
  static const char call[] = "td_sum_tree_set";
  if (!t) return td_fail(TD_EINVAL, "%s: the tree is NULL", call);
  int32_t st = check_vector(call, "the index", index, TD_INT64);
  if (st == TD_OK) st = check_vector(call, "the priorities", priority, TD_FLOAT64);
  if (st < 0) return st;
  const int64_t n = index->shape[0], np = priority->shape[0];
  if (np != n && np != 1)
    return td_fail(TD_ESHAPE, "%s: %lld priorities for %lld indices (give one, or one each)", call,
                   (long long)np, (long long)n);
  const int64_t *idx = td_tensor_data_borrow(index);
  const double *p = td_tensor_data_borrow(priority);
  for (int64_t i = 0; i < n; i++) {
    if (idx[i] < 0 || idx[i] >= t->capacity)
      return td_fail(TD_EINDEX, "%s: index %lld is out of range [0, %lld) (element %lld)", call,
                     (long long)idx[i], (long long)t->capacity, (long long)i);
    const double v = p[np == 1 ? 0 : i];
    if (bad_priority(v))
      return td_fail(TD_EINVAL, "%s: priority %g at element %lld (priorities are finite and >= 0)", call, v,
                     (long long)i);
  }
  double *leaves = leaf_data(t);
  for (int64_t i = 0; i < n; i++) {
    const double v = p[np == 1 ? 0 : i];
    int64_t k = t->size + idx[i];
    leaves[idx[i]] = v;
    t->sum[k] = v;
    t->min[k] = min_value(v);
    for (k /= 2; k >= 1; k /= 2) pull(t, k);
  }
  return TD_OK;
}

/* For each mass[i] the leaf where the prefix sums pass it, into out[i]: right only where
 * the mass reaches past the left child and the right one holds something, so rounding
 * can never end on a leaf of priority 0 (every node descended into has a positive sum).
 * The draws go down together, a level at a time, in chunks: the loads of one level are
 * independent of each other, so their cache misses overlap (a tree of a million leaves
 * is 16 MiB of sums, and one draw alone would wait for each of its misses in turn). */
enum { DESCEND_CHUNK = 64 };
static void descend(const td_sum_tree *t, const double *u, double total, int64_t n, int64_t *out) {
  int64_t k[DESCEND_CHUNK];
  double mass[DESCEND_CHUNK];
  for (int64_t b = 0; b < n; b += DESCEND_CHUNK) {
    const int64_t m = n - b < DESCEND_CHUNK ? n - b : DESCEND_CHUNK;
    for (int64_t i = 0; i < m; i++) {
      k[i] = 1;
      mass[i] = u[b + i] * total;
    }
    for (int64_t level = 1; level < t->size; level *= 2) {
      for (int64_t i = 0; i < m; i++) {
        const double left = t->sum[2 * k[i]], right = t->sum[2 * k[i] + 1];
        const int go_right = mass[i] >= left && right > 0;
        mass[i] -= go_right ? left : 0;
        k[i] = 2 * k[i] + go_right;
      }
    }
    for (int64_t i = 0; i < m; i++) out[b + i] = k[i] - t->size;
  }
}

TD_EXPORT int32_t td_sum_tree_find(const td_sum_tree *t, const td_tensor *u, double beta, td_tensor *index,
                         td_tensor *weight) {
  static const char call[] = "td_sum_tree_find";
  if (!t) return td_fail(TD_EINVAL, "%s: the tree is NULL", call);
  int32_t st = check_vector(call, "u", u, TD_FLOAT64);
  if (st == TD_OK) st = check_vector(call, "the index", index, TD_INT64);
  if (st == TD_OK && weight)
    st = check_vector(call, "the weights", weight, weight->dtype == TD_FLOAT32 ? TD_FLOAT32 : TD_FLOAT64);
  if (st < 0) return st;
  const int64_t n = u->shape[0];
  if (index->shape[0] != n || (weight && weight->shape[0] != n))
    return td_fail(TD_ESHAPE, "%s: %lld draws need %lld indices and weights, got %lld and %lld", call,
                   (long long)n, (long long)n, (long long)index->shape[0],
                   (long long)(weight ? weight->shape[0] : n));
  if (!(beta >= 0) || isinf(beta)) return td_fail(TD_EINVAL, "%s: beta must be finite and >= 0, got %g", call, beta);
  const double total = t->sum[1], pmin = t->min[1];
  if (!(total > 0)) return td_fail(TD_EINVAL, "%s: every priority is 0 (nothing to draw)", call);
  const double *uv = td_tensor_data_borrow(u);
  for (int64_t i = 0; i < n; i++)
    if (!(uv[i] >= 0 && uv[i] < 1))
      return td_fail(TD_EINVAL, "%s: u[%lld] is %g, not in [0, 1)", call, (long long)i, uv[i]);
  int64_t *out = td_tensor_data_borrow(index);
  const double *leaves = t->sum + t->size; /* the leaf level: what the sums were made of */
  descend(t, uv, total, n, out);
  if (!weight) return TD_OK;
  if (weight->dtype == TD_FLOAT32) {
    float *w = td_tensor_data_borrow(weight);
    for (int64_t i = 0; i < n; i++) w[i] = (float)pow(leaves[out[i]] / pmin, -beta);
  } else {
    double *w = td_tensor_data_borrow(weight);
    for (int64_t i = 0; i < n; i++) w[i] = pow(leaves[out[i]] / pmin, -beta);
  }
  return TD_OK;
}
