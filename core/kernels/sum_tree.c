/*
 * sum_tree.c: td_sum_tree, the sum tree (and min tree) of flow.ReplayBuffer's
 * prioritized sampler.
 *
 * Nodes have 16 children, stored level by level (level 0 the root, level depth the
 * leaves): node x of level l has children 16x .. 16x + 15 of level l + 1, one block.
 * What a draw reads of a block is its running sums (run[l]: entry 16x + k is the sum of
 * the block's nodes 0 .. k, added in order), two adjacent cache lines: the child it goes
 * into is the count of running sums its mass reaches (compares, no branch to mispredict
 * nor sum to wait for), and a draw reads depth blocks (5 for a million leaves) instead
 * of the 20 scattered lines of a binary tree. The draws of a batch go down together, so
 * their cache misses overlap. A node's sum is the last running sum of its children's
 * block, so every sum is recomputed from the leaves in one fixed order (no running
 * differences): the same whatever order the leaves got their values in, with no drift.
 * Levels hold their nodes rounded up to whole blocks; padding holds 0 and +inf.
 * The min tree (node minima, min[l]) holds +inf for a leaf of priority 0 as well: such a
 * leaf is never drawn, so it must not set the largest importance weight. The leaves also
 * live in the caller's tensor (a mapped file, in the ReplayBuffer), which is written with
 * each set and read once at creation.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"

enum { FANOUT = 16, MAX_DEPTH = 16 }; /* 16^16 = 2^64 leaves: any capacity */

struct td_sum_tree {
  td_tensor *leaves;          /* owned share of the caller's float64 tensor */
  double *value;              /* the leaves' priorities (level depth) */
  double *run[MAX_DEPTH + 1]; /* levels 1 .. depth: running sums within each block */
  double *min[MAX_DEPTH + 1]; /* levels 0 .. depth: each node's smallest positive leaf */
  int64_t width[MAX_DEPTH + 1]; /* nodes per level, padding included */
  int64_t capacity;
  int32_t depth;
};

static void free_tree(td_sum_tree *t) {
  if (!t) return;
  free(t->value);
  for (int32_t l = 0; l <= MAX_DEPTH; l++) {
    free(t->run[l]);
    free(t->min[l]);
  }
  if (t->leaves) td_tensor_release(t->leaves);
  free(t);
}

TD_EXPORT void td_sum_tree_free(td_sum_tree *t) { free_tree(t); }

static inline double min_value(double p) { return p > 0 ? p : INFINITY; }

/* The sum of node x of level l (0 for padding past the level below). */
static inline double node_sum(const td_sum_tree *t, int32_t l, int64_t x) {
  if (l == t->depth) return t->value[x];
  return x * FANOUT < t->width[l + 1] ? t->run[l + 1][x * FANOUT + FANOUT - 1] : 0;
}

/* Block b of level l >= 1 from its nodes: its running sums, and its parent's minimum. */
static void pull(td_sum_tree *t, int32_t l, int64_t b) {
  double *r = t->run[l] + b * FANOUT, acc = 0, low = INFINITY;
  const double *m = t->min[l] + b * FANOUT;
  for (int k = 0; k < FANOUT; k++) {
    acc += node_sum(t, l, b * FANOUT + k);
    r[k] = acc;
    low = m[k] < low ? m[k] : low;
  }
  t->min[l - 1][b] = low;
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

/* A 64-byte aligned array of n doubles, each fill; NULL when out of memory. */
static double *level_array(int64_t n, double fill) {
  double *a = aligned_alloc(64, ((size_t)n * sizeof(double) + 63) / 64 * 64);
  if (a)
    for (int64_t i = 0; i < n; i++) a[i] = fill;
  return a;
}

/* The levels' arrays for n leaves: widths, allocations, padding. false when out of memory. */
static bool make_levels(td_sum_tree *t, int64_t n) {
  int32_t depth = 0;
  for (int64_t span = 1; span < n; span *= FANOUT) depth++;
  t->depth = depth;
  int64_t nodes = n;
  for (int32_t l = depth; l >= 0; l--) {
    t->width[l] = l == 0 ? 1 : (nodes + FANOUT - 1) / FANOUT * FANOUT;
    if (!(t->min[l] = level_array(t->width[l], INFINITY))) return false;
    if (l > 0 && !(t->run[l] = level_array(t->width[l], 0))) return false;
    nodes = (nodes + FANOUT - 1) / FANOUT;
  }
  return (t->value = level_array(t->width[depth], 0)) != NULL;
}

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
  td_sum_tree *t = calloc(1, sizeof *t);
  if (!t || !make_levels(t, n) || !(t->leaves = td_tensor_share(leaves))) {
    free_tree(t);
    return td_fail_null(TD_ENOMEM, "%s: out of memory for a tree of %lld leaves", call, (long long)n);
  }
  t->capacity = n;
  const int32_t d = t->depth;
  for (int64_t i = 0; i < n; i++) {
    t->value[i] = p[i];
    t->min[d][i] = min_value(p[i]);
  }
  for (int32_t l = d; l >= 1; l--)
    for (int64_t b = 0; b < t->width[l] / FANOUT; b++) pull(t, l, b);
  return t;
}

TD_EXPORT int64_t td_sum_tree_capacity(const td_sum_tree *t) { return t ? t->capacity : 0; }
TD_EXPORT double td_sum_tree_total(const td_sum_tree *t) { return t ? node_sum(t, 0, 0) : 0; }
TD_EXPORT double td_sum_tree_min_positive(const td_sum_tree *t) { return t ? t->min[0][0] : INFINITY; }

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
  double *leaves = td_tensor_data_borrow(t->leaves);
  const int32_t d = t->depth;
  for (int64_t i = 0; i < n; i++) {
    const double v = p[np == 1 ? 0 : i];
    int64_t x = idx[i];
    leaves[x] = v;
    t->value[x] = v;
    t->min[d][x] = min_value(v);
    for (int32_t l = d; l >= 1; l--) pull(t, l, x /= FANOUT);
  }
  return TD_OK;
}

/* For each u[i] the leaf where the prefix sums pass u[i] * total, into out[i]. A draw
 * goes into the first child whose running sum passes its mass (a child holding
 * something: its running sum is above the one before); when rounding lets it pass every
 * child, into the last child that holds something, near its end. So it never ends on a
 * leaf of priority 0. The draws go down together, a level at a time, in chunks, each
 * level's blocks prefetched first: their cache misses overlap (a tree of a million
 * leaves is 8 MiB of running sums at the leaf level). */
enum { DESCEND_CHUNK = 64 };

static void descend(const td_sum_tree *t, const double *u, double total, int64_t n, int64_t *out) {
  int64_t j[DESCEND_CHUNK];
  double mass[DESCEND_CHUNK];
  for (int64_t b = 0; b < n; b += DESCEND_CHUNK) {
    const int64_t m = n - b < DESCEND_CHUNK ? n - b : DESCEND_CHUNK;
    for (int64_t i = 0; i < m; i++) {
      j[i] = 0;
      mass[i] = u[b + i] * total;
    }
    for (int32_t l = 1; l <= t->depth; l++) {
      const double *level = t->run[l];
      const double *values = l == t->depth ? t->value : NULL; /* what the weights read */
      for (int64_t i = 0; i < m; i++) {
        __builtin_prefetch(level + j[i] * FANOUT);
        __builtin_prefetch(level + j[i] * FANOUT + 8);
        if (values) {
          __builtin_prefetch(values + j[i] * FANOUT);
          __builtin_prefetch(values + j[i] * FANOUT + 8);
        }
      }
      for (int64_t i = 0; i < m; i++) {
        const double *r = level + j[i] * FANOUT, left = mass[i];
        /* c: how many running sums the mass reaches, by halving (4 compares of one
         * block, no branch: which way a random draw goes cannot be predicted) */
        int c = FANOUT;
        if (left < r[FANOUT - 1]) {
          c = (r[7] <= left) * 8;
          c += (r[c + 3] <= left) * 4;
          c += (r[c + 1] <= left) * 2;
          c += r[c] <= left;
        }
        if (c < FANOUT) {
          mass[i] = left - (c > 0 ? r[c - 1] : 0);
        } else { /* rounding: the end of the last child that holds something */
          c = FANOUT - 1;
          while (c > 0 && !(r[c] > r[c - 1])) c--;
          mass[i] = nextafter(node_sum(t, l, j[i] * FANOUT + c), 0);
        }
        j[i] = j[i] * FANOUT + c;
      }
    }
    for (int64_t i = 0; i < m; i++) out[b + i] = j[i];
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
  const double total = node_sum(t, 0, 0), pmin = t->min[0][0];
  if (!(total > 0)) return td_fail(TD_EINVAL, "%s: every priority is 0 (nothing to draw)", call);
  const double *uv = td_tensor_data_borrow(u);
  for (int64_t i = 0; i < n; i++)
    if (!(uv[i] >= 0 && uv[i] < 1))
      return td_fail(TD_EINVAL, "%s: u[%lld] is %g, not in [0, 1)", call, (long long)i, uv[i]);
  int64_t *out = td_tensor_data_borrow(index);
  const double *leaves = t->value; /* what the sums were made of */
  descend(t, uv, total, n, out);
  if (!weight) return TD_OK;
  if (weight->dtype == TD_FLOAT32) {
    float *w = td_tensor_data_borrow(weight);
    /* in float, as the result is: a quarter of the double functions' time, and within
     * 1e-6 of the double result for ratios up to e^10 */
    const float fb = (float)-beta;
    for (int64_t i = 0; i < n; i++) w[i] = expf(fb * logf((float)(leaves[out[i]] / pmin)));
  } else {
    double *w = td_tensor_data_borrow(weight);
    for (int64_t i = 0; i < n; i++) w[i] = exp(-beta * log(leaves[out[i]] / pmin));
  }
  return TD_OK;
}
