/*
 * scan.c: the running scans that carry more than a sum: td_cummax / td_cummin (the
 * running extreme and where it was, torch.cummax's semantics) and td_logcumsumexp.
 *
 * As td_sort does, the scanned dim is moved last and made contiguous, so each row is one
 * run of memory; rows are split between the pool's threads and each is scanned in index
 * order by one thread, so results never depend on the thread count. Keys are read as
 * double (exact for every dtype but int64) or as int64.
 *
 * cummax/cummin: an element equal to the running extreme takes its place (the index is
 * the latest of equal values, as torch's), and NaN, once met, stays the extreme (with
 * the index of the latest NaN). Values are copied from the input, so every dtype keeps
 * its bits. logcumsumexp (floating dtypes): log(sum(exp(x[0..i]))) accumulated in double as
 * m + log(exp(a - m) + exp(b - m)) with m the larger, exact at infinities.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "../src/parallel.h"
#include "dtypes.h"
#include "row_keys.h"

typedef struct scan_job {
  const td_tensor *src; /* contiguous, dim last */
  td_tensor *values, *indices; /* indices: NULL for logcumsumexp */
  int64_t n;                   /* the row length */
  int32_t minimum;             /* cummin rather than cummax */
  _Atomic int32_t failed;
} scan_job;


/* The running extreme of one row, in the row's own type (LOAD_<kind> gives a value that
 * compares exactly: int64 as int64, float16 as float): x takes the extreme's place when
 * it is NaN, or when the extreme is not NaN and x >= it (<= for the minimum). */
#define DEF_EXTREME(ARG, DN, IT, K, ...)                                                     \
  static void extreme_##DN(const char *row, char *out, int64_t *where, int64_t n, bool minimum) { \
    const IT *x = (const IT *)(const void *)row;                                           \
    IT *y = (IT *)(void *)out;                                                             \
    int64_t at = 0;                                                                        \
    for (int64_t j = 0; j < n; j++) {                                                      \
      const __typeof__(LOAD_##K(x[0])) v = LOAD_##K(x[j]), best = LOAD_##K(x[at]);        \
      if (v != v || (best == best && (minimum ? v <= best : v >= best))) at = j;           \
      y[j] = x[at];                                                                        \
      where[j] = at;                                                                       \
    }                                                                                      \
  }
TD_DTYPES_ALL(DEF_EXTREME, _)
#define EXTREME_ENTRY(ARG, DN, ...) [TD_##DN] = extreme_##DN,
typedef void (*extreme_fn)(const char *, char *, int64_t *, int64_t, bool);
static const extreme_fn extreme_loops[TD_NUM_DTYPES] = {TD_DTYPES_ALL(EXTREME_ENTRY, _)};

static void extreme_rows(int64_t begin, int64_t end, void *arg) {
  scan_job *job = arg;
  const int64_t n = job->n, isz = job->src->itemsize;
  const extreme_fn loop = extreme_loops[job->src->dtype];
  const char *src = td_tensor_ptr(job->src);
  char *vals = td_tensor_ptr(job->values);
  int64_t *idx = (int64_t *)td_tensor_ptr(job->indices);
  for (int64_t r = begin; r < end; r++)
    loop(src + r * n * isz, vals + r * n * isz, idx + r * n, n, job->minimum != 0);
}

/* log(exp(a) + exp(b)), exact when either is infinite or both are the same infinity. */
static inline double log_add_exp(double a, double b) {
  if (a != a || b != b) return a + b;
  const double m = a > b ? a : b;
  if (m == -INFINITY || m == INFINITY) return m;
  return m + log1p(exp(-fabs(a - b)));
}

static void logcumsumexp_rows(int64_t begin, int64_t end, void *arg) {
  scan_job *job = arg;
  const int64_t n = job->n;
  double *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
  if (!keys) {
    job->failed = 1;
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    td_row_keys(job->src, r, n, keys, (int64_t *)(void *)keys); /* floating: never read as int64 */
    double acc = -INFINITY;
    for (int64_t j = 0; j < n; j++) keys[j] = acc = log_add_exp(acc, keys[j]);
    char *out = (char *)td_tensor_ptr(job->values) + r * n * job->values->itemsize;
#define STORE_ROW(ARG, DN, IT, K, ...)                                                   \
  case TD_##DN:                                                                          \
    for (int64_t j = 0; j < n; j++) ((IT *)(void *)out)[j] = CONV_##K(DN, IT, keys[j]); \
    break;
    switch (job->values->dtype) {
      TD_DTYPES_FLOAT(STORE_ROW, _)
      default: break;
    }
#undef STORE_ROW
  }
  free(keys);
}

/* t with dim moved last, contiguous (a new reference), and the permutation back. */
static td_tensor *rows_of(const td_tensor *t, int32_t dim, int32_t *back) {
  td_tensor moved = *t;
  if (t->ndim > 0) {
    int32_t perm[TD_MAX_DIMS];
    for (int32_t k = 0, j = 0; k < t->ndim; k++)
      if (k != dim) perm[j++] = k;
    perm[t->ndim - 1] = dim;
    for (int32_t k = 0; k < t->ndim; k++) back[perm[k]] = k;
    if (td_tensor_permute(t, perm, &moved) < 0) return NULL;
  }
  return td_tensor_contiguous(&moved);
}

/* out (rows of the moved layout) back in t's order of dims, contiguous. */
static td_tensor *restored(const td_tensor *t, td_tensor *out, const int32_t *back) {
  if (t->ndim == 0) {
    td_tensor_retain(out);
    return out;
  }
  td_tensor view;
  if (td_tensor_permute(out, back, &view) != TD_OK) return NULL;
  return td_tensor_contiguous(&view);
}

static td_tensor *scan(const char *call, const td_tensor *t, int32_t dim, int32_t minimum,
                       td_tensor **indices) {
  if (!t) return td_fail_null(TD_EINVAL, "%s: NULL tensor", call);
  if (indices) *indices = NULL;
  if (!td_check_cpu(call, t, "tensor")) return NULL;
  const int32_t nd = t->ndim ? t->ndim : 1;
  if (dim < 0 || dim >= nd)
    return td_fail_null(TD_EINVAL, "%s: dim %d is out of range for %d dims", call, (int)dim, (int)t->ndim);
  if (!indices && !td_dtype_is_floating(t->dtype)) /* as torch: not implemented for 'Long' */
    return td_fail_null(TD_EDTYPE, "%s: not supported for %s tensors (it takes floating point ones)",
                        call, td_dtype_name(t->dtype));
  const int32_t out_dtype = t->dtype;
  int32_t back[TD_MAX_DIMS];
  td_tensor *src = rows_of(t, dim, back);
  td_tensor *vals = src ? td_tensor_empty(src->ndim, src->shape, out_dtype) : NULL;
  td_tensor *idx = vals && indices ? td_tensor_empty(src->ndim, src->shape, TD_INT64) : NULL;
  td_tensor *out_v = NULL, *out_i = NULL;
  if (vals && (idx || !indices)) {
    const int64_t n = t->ndim ? t->shape[dim] : 1, total = td_tensor_numel(src);
    scan_job job = {.src = src, .values = vals, .indices = idx, .n = n, .minimum = minimum};
    if (total > 0) {
      const int64_t rows = total / n, per = (1 << 16) / (n ? n : 1);
      td_parallel_for(rows, per > 0 ? per : 1, indices ? extreme_rows : logcumsumexp_rows, &job);
    }
    if (job.failed) {
      td_fail(TD_ENOMEM, "%s: out of memory", call);
    } else {
      out_v = restored(t, vals, back);
      out_i = out_v && idx ? restored(t, idx, back) : NULL;
    }
  }
  td_tensor_release(src);
  td_tensor_release(vals);
  td_tensor_release(idx);
  if (!out_v || (indices && !out_i)) {
    td_tensor_release(out_v);
    td_tensor_release(out_i);
    return NULL;
  }
  if (indices) *indices = out_i;
  return out_v;
}

TD_EXPORT td_tensor *td_cummax(const td_tensor *t, int32_t dim, td_tensor **indices) {
  if (!indices) return td_fail_null(TD_EINVAL, "cummax: NULL indices");
  return scan("cummax", t, dim, 0, indices);
}

TD_EXPORT td_tensor *td_cummin(const td_tensor *t, int32_t dim, td_tensor **indices) {
  if (!indices) return td_fail_null(TD_EINVAL, "cummin: NULL indices");
  return scan("cummin", t, dim, 1, indices);
}

TD_EXPORT td_tensor *td_logcumsumexp(const td_tensor *t, int32_t dim) {
  return scan("logcumsumexp", t, dim, 0, NULL);
}
