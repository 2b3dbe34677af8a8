/*
 * select.c: selections along one dim, over the items of sort_rows.h (a key and its
 * position, all different, so every selection is the one the stable sort would make):
 *  - td_topk: the k smallest items (keys inverted for the largest). A small k keeps a
 *    heap of k while it scans the row (a comparison of keys per element; long rows in
 *    fixed chunks on the pool, whose heaps are merged), a large one introselects the
 *    k-th item and sorts the k before it.
 *  - td_kthvalue, td_median (torch's lower median; NaN propagates unless ignored), by
 *    introselect; td_mode by a sort and a scan of its runs; td_quantile by a sort.
 * Rows are split between the pool's threads (sort.c's rule); results never depend on
 * the thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "../src/parallel.h"
#include "dtypes.h"
#include "sort_rows.h"

/* A heap path for topk while k is at most this and a sixteenth of the row. */
enum { HEAP_K = 1024, ROW_GRAIN = 1 << 16, PAR_ROW = 16384 };

typedef struct row_job {
  const td_tensor *src;          /* contiguous, dim last */
  td_tensor *values, *indices;   /* indices may be NULL (quantile) */
  const double *q;               /* quantile's q values */
  int64_t n, k, nq;
  int32_t flag;                  /* topk: largest; median: ignore NaN; quantile: mode */
  int32_t ignore_nan;
  int kind;
  _Atomic int32_t failed;
} row_job;

static void run_rows(int64_t rows, int64_t n, td_range_fn fn, void *job) {
  if (rows <= 0) return;
  if (rows >= 2 * (int64_t)td_get_num_threads() || n < PAR_ROW) {
    const int64_t per = ROW_GRAIN / (n ? n : 1);
    td_parallel_for(rows, per > 0 ? per : 1, fn, job);
  } else {
    fn(0, rows, job);
  }
}

/* Two buffers of n items of kind from the heap cache. */
typedef struct scratch {
  void *a, *b;
  int64_t cap_a, cap_b;
} scratch;

static bool scratch_get(scratch *s, int64_t n, int kind, bool two) {
  const int64_t bytes = (n > 0 ? n : 1) * td_items_size(kind);
  s->a = td_heap_alloc(bytes, &s->cap_a);
  s->b = s->a && two ? td_heap_alloc(bytes, &s->cap_b) : NULL;
  return s->a && (s->b || !two);
}
static void scratch_put(scratch *s) {
  if (s->a) td_heap_free(s->a, s->cap_a);
  if (s->b) td_heap_free(s->b, s->cap_b);
}

/* Writes item j of items (kind) as element `at` of the results: the row's element at
 * the item's position (a key does not give back -0.0 or a NaN's bits) and the position. */
static void put_item(const row_job *job, int kind, const char *row, const void *items,
                     int64_t j, int64_t at) {
  const int64_t isz = job->src->itemsize, pos = td_item_pos(items, kind, j);
  memcpy(td_tensor_ptr(job->values) + at * isz, row + pos * isz, (size_t)isz);
  if (job->indices) ((int64_t *)td_tensor_ptr(job->indices))[at] = pos;
}

/* ---- topk: a heap of k while scanning --------------------------------------------------- */

/* A max-heap of u128 items (key << 64 | position): its root is the worst one kept. */
static void sift_down(td_u128 *h, int64_t i, int64_t n) {
  const td_u128 x = h[i];
  for (int64_t c; (c = 2 * i + 1) < n; i = c) {
    if (c + 1 < n && h[c + 1] > h[c]) c++;
    if (!(h[c] > x)) break;
    h[i] = h[c];
  }
  h[i] = x;
}

/* Offers x to a heap of size *size holding at most k. */
static inline void heap_offer(td_u128 *h, int64_t *size, int64_t k, td_u128 x) {
  if (*size < k) {
    int64_t i = (*size)++;
    while (i > 0 && h[(i - 1) / 2] < x) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = x;
  } else if (x < h[0]) {
    h[0] = x;
    sift_down(h, 0, k);
  }
}

typedef struct scan_job {
  const void *row;
  int32_t dtype;
  int64_t k, grain;
  uint64_t flip;
  td_u128 *heaps;   /* chunk c's heap at c * k */
  int64_t *sizes;
} scan_job;

#define SCAN_ROW(ARG, DN, DT, DK, CT, FAM, NAME, ALIAS, METHOD, LO, ...)                  \
  static int64_t scan_##DN(const DT *x, int64_t b, int64_t e, uint64_t flip, int64_t k,  \
                           td_u128 *h) {                                                \
    int64_t size = 0, i = b;                                                            \
    for (; i < e && size < k; i++)                                                      \
      heap_offer(h, &size, k, (td_u128)(KEY_##DK(DT, LO, x[i]) ^ flip) << 64 | (uint64_t)i); \
    if (size < k) return size;                                                          \
    uint64_t worst = (uint64_t)(h[0] >> 64);                                            \
    for (; i < e; i++) {                                                                \
      const uint64_t key = KEY_##DK(DT, LO, x[i]) ^ flip;                               \
      if (key < worst) { /* a later position never wins a tie */                        \
        h[0] = (td_u128)key << 64 | (uint64_t)i;                                        \
        sift_down(h, 0, k);                                                             \
        worst = (uint64_t)(h[0] >> 64);                                                 \
      }                                                                                 \
    }                                                                                   \
    return size;                                                                        \
  }
TD_DTYPES_ALL(SCAN_ROW, _)
#undef SCAN_ROW

static void scan_range(int64_t b, int64_t e, void *arg) {
  scan_job *j = arg;
  const int64_t c = b / j->grain;
#define SCAN_CASE(ARG, DN, DT, ...) \
  case TD_##DN: j->sizes[c] = scan_##DN(j->row, b, e, j->flip, j->k, j->heaps + c * j->k); break;
  switch (j->dtype) {
    TD_DTYPES_ALL(SCAN_CASE, _)
    default: break;
  }
#undef SCAN_CASE
}

/* The k smallest items of a row into h (k of them), sorted. */
static bool topk_heap(const void *row, int32_t dtype, int64_t n, int64_t k, uint64_t flip,
                      td_u128 *h) {
  const bool par = n >= PAR_ROW && td_get_num_threads() > 1;
  const int64_t grain = par ? td_parallel_even_grain(n) : n;
  const int64_t chunks = td_parallel_chunks(n, grain);
  scan_job job = {.row = row, .dtype = dtype, .k = k, .grain = grain, .flip = flip};
  int64_t one_size;
  td_u128 *heaps = h;
  if (chunks > 1) {
    heaps = malloc((size_t)(chunks * k) * sizeof *heaps);
    job.sizes = malloc((size_t)chunks * sizeof *job.sizes);
    if (!heaps || !job.sizes) {
      free(heaps), free(job.sizes);
      return false;
    }
  } else {
    job.sizes = &one_size;
  }
  job.heaps = heaps;
  td_parallel_for(n, grain, scan_range, &job);
  if (chunks > 1) { /* the chunks' winners through one more heap, in chunk order */
    int64_t size = 0;
    for (int64_t c = 0; c < chunks; c++)
      for (int64_t i = 0; i < job.sizes[c]; i++) heap_offer(h, &size, k, heaps[c * k + i]);
    free(heaps);
    free(job.sizes);
  }
  for (int64_t e = k - 1; e > 0; e--) { /* heapsort: ascending */
    const td_u128 t = h[0];
    h[0] = h[e], h[e] = t;
    sift_down(h, 0, e);
  }
  return true;
}

static void topk_rows(int64_t begin, int64_t end, void *arg) {
  row_job *job = arg;
  const int64_t n = job->n, k = job->k, isz = job->src->itemsize;
  const int32_t dtype = job->src->dtype;
  const uint64_t flip = job->flag ? td_key_all(dtype) : 0;
  const bool heap = k <= HEAP_K && k * 16 <= n;
  scratch s = {0};
  if (!scratch_get(&s, heap ? k : n, heap ? TD_ITEMS_K64I : job->kind, !heap)) {
    job->failed = 1;
    scratch_put(&s);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    const char *row = td_tensor_ptr(job->src) + r * n * isz;
    if (heap) {
      if (!topk_heap(row, dtype, n, k, flip, s.a)) {
        job->failed = 1;
        break;
      }
      for (int64_t j = 0; j < k; j++) put_item(job, TD_ITEMS_K64I, row, s.a, j, r * k + j);
      continue;
    }
    td_items_build(row, dtype, n, job->flag != 0, job->kind, s.a);
    td_items_select(s.a, n, k - 1, job->kind);
    const void *sorted = td_items_sort_full(s.a, s.b, k, job->kind);
    if (!sorted) {
      job->failed = 1;
      break;
    }
    for (int64_t j = 0; j < k; j++) put_item(job, job->kind, row, sorted, j, r * k + j);
  }
  scratch_put(&s);
}

/* Results of shape t's with dim's size set to k (dim last, before td_rows_back). */
static bool rows_results(const td_tensor *src, int64_t k, bool with_indices, td_tensor **v,
                         td_tensor **i) {
  int64_t shape[TD_MAX_DIMS];
  memcpy(shape, src->shape, sizeof shape);
  if (src->ndim > 0) shape[src->ndim - 1] = k;
  *v = td_tensor_empty(src->ndim, shape, src->dtype);
  *i = *v && with_indices ? td_tensor_empty(src->ndim, shape, TD_INT64) : NULL;
  return *v && (*i || !with_indices);
}

TD_EXPORT td_tensor *td_topk(const td_tensor *t, int64_t k, int32_t dim, int32_t largest,
                             td_tensor **indices) {
  if (!t || !indices) return td_fail_null(TD_EINVAL, "topk: NULL argument");
  *indices = NULL;
  td_tensor *src = td_rows_of(t, dim, "topk");
  if (!src) return NULL;
  const int64_t n = t->ndim ? t->shape[dim] : 1;
  if (k < 0 || k > n) {
    td_tensor_release(src);
    return td_fail_null(TD_EINDEX, "topk: k %lld is out of range for a dim of size %lld",
                        (long long)k, (long long)n);
  }
  td_tensor *v = NULL, *i = NULL;
  if (rows_results(src, k, true, &v, &i)) {
    row_job job = {.src = src, .values = v, .indices = i, .n = n, .k = k, .flag = largest != 0,
                   .kind = td_items_kind(src->dtype, n, true)};
    const int64_t total = td_tensor_numel(src);
    if (total > 0 && k > 0) run_rows(total / n, n, topk_rows, &job);
    if (job.failed) {
      td_fail(TD_ENOMEM, "topk: out of memory");
      td_tensor_release(v), td_tensor_release(i);
      v = i = NULL;
    } else {
      v = td_rows_back(v, t, dim);
      if (v) {
        i = td_rows_back(i, t, dim);
      } else {
        td_tensor_release(i);
        i = NULL;
      }
    }
  } else {
    td_tensor_release(v), td_tensor_release(i);
    v = i = NULL;
  }
  td_tensor_release(src);
  if (!v || !i) {
    td_tensor_release(v), td_tensor_release(i);
    return NULL;
  }
  *indices = i;
  return v;
}

/* ---- kthvalue, median ------------------------------------------------------------------- */

/* Position of the first NaN key among n items built in position order (-1: none). */
static int64_t first_nan(const void *items, int kind, int64_t n, uint64_t nan_key) {
  for (int64_t j = 0; j < n; j++)
    if (td_item_key(items, kind, j) == nan_key) return j;
  return -1;
}

/* flag: 0 kthvalue (rank k - 1), 1 median, 2 nanmedian. */
static void kth_rows(int64_t begin, int64_t end, void *arg) {
  row_job *job = arg;
  const int64_t n = job->n, isz = job->src->itemsize;
  const int32_t dtype = job->src->dtype;
  const uint64_t nan_key = td_key_all(dtype);
  const bool floating = td_dtype_is_floating(dtype);
  scratch s = {0};
  if (!scratch_get(&s, n, job->kind, false)) {
    job->failed = 1;
    scratch_put(&s);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    const char *row = td_tensor_ptr(job->src) + r * n * isz;
    const int flags = td_items_build(row, dtype, n, false, job->kind, s.a);
    int64_t rank = job->k - 1;
    if (job->flag && floating && (flags & TD_ROW_NAN)) {
      const int64_t at = first_nan(s.a, job->kind, n, nan_key);
      if (job->flag == 1) { /* median: NaN propagates, at the first NaN */
        put_item(job, job->kind, row, s.a, at, r);
        continue;
      }
      int64_t nans = 0;
      for (int64_t j = at; j < n; j++) nans += td_item_key(s.a, job->kind, j) == nan_key;
      if (nans == n) {
        put_item(job, job->kind, row, s.a, 0, r);
        continue;
      }
      rank = (n - nans - 1) / 2;
    } else if (job->flag) {
      rank = (n - 1) / 2;
    }
    td_items_select(s.a, n, rank, job->kind);
    put_item(job, job->kind, row, s.a, rank, r);
  }
  scratch_put(&s);
}

/* Results of t's shape without dim (dim last: its rows' count). */
static bool reduced_results(const td_tensor *src, const td_tensor *t, int32_t dim,
                            bool with_indices, int32_t dtype, int64_t lead, int64_t lead_n,
                            td_tensor **v, td_tensor **i) {
  int64_t shape[TD_MAX_DIMS];
  int32_t nd = 0;
  if (lead) shape[nd++] = lead_n;
  for (int32_t d = 0; d < t->ndim; d++)
    if (d != dim) shape[nd++] = t->shape[d];
  (void)src;
  *v = td_tensor_empty(nd, shape, dtype);
  *i = *v && with_indices ? td_tensor_empty(nd, shape, TD_INT64) : NULL;
  return *v && (*i || !with_indices);
}

static td_tensor *kth_common(const char *call, const td_tensor *t, int64_t k, int32_t dim,
                             int32_t flag, td_tensor **indices) {
  if (!t || !indices) return td_fail_null(TD_EINVAL, "%s: NULL argument", call);
  *indices = NULL;
  td_tensor *src = td_rows_of(t, dim, call);
  if (!src) return NULL;
  const int64_t n = t->ndim ? t->shape[dim] : 1;
  if (flag == 0 && (k < 1 || k > n)) {
    td_tensor_release(src);
    return td_fail_null(TD_EINDEX, "%s: k %lld is out of range for a dim of size %lld", call,
                        (long long)k, (long long)n);
  }
  if (flag && n == 0) {
    td_tensor_release(src);
    return td_fail_null(TD_EINDEX, "%s: cannot reduce over dim %d of size 0", call, (int)dim);
  }
  if (flag && t->dtype == TD_BOOL) {
    td_tensor_release(src);
    return td_fail_null(TD_EDTYPE, "%s: bool tensors have no median (torch refuses them too)",
                        call);
  }
  td_tensor *v = NULL, *i = NULL;
  if (reduced_results(src, t, dim, true, t->dtype, 0, 0, &v, &i)) {
    row_job job = {.src = src, .values = v, .indices = i, .n = n, .k = k, .flag = flag,
                   .kind = td_items_kind(src->dtype, n, true)};
    const int64_t total = td_tensor_numel(src);
    if (total > 0) run_rows(total / n, n, kth_rows, &job);
    if (job.failed) td_fail(TD_ENOMEM, "%s: out of memory", call);
    if (job.failed) {
      td_tensor_release(v), td_tensor_release(i);
      v = i = NULL;
    }
  }
  td_tensor_release(src);
  if (!v || !i) {
    td_tensor_release(v), td_tensor_release(i);
    return NULL;
  }
  *indices = i;
  return v;
}

TD_EXPORT td_tensor *td_kthvalue(const td_tensor *t, int64_t k, int32_t dim,
                                 td_tensor **indices) {
  return kth_common("kthvalue", t, k, dim, 0, indices);
}

TD_EXPORT td_tensor *td_median(const td_tensor *t, int32_t dim, int32_t ignore_nan,
                               td_tensor **indices) {
  return kth_common(ignore_nan ? "nanmedian" : "median", t, 0, dim, ignore_nan ? 2 : 1, indices);
}

/* ---- mode ------------------------------------------------------------------------------- */

static void mode_rows(int64_t begin, int64_t end, void *arg) {
  row_job *job = arg;
  const int64_t n = job->n, isz = job->src->itemsize;
  const int32_t dtype = job->src->dtype;
  const uint64_t nan_key = td_key_all(dtype);
  const bool floating = td_dtype_is_floating(dtype);
  scratch s = {0};
  if (!scratch_get(&s, n, job->kind, true)) {
    job->failed = 1;
    scratch_put(&s);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    const char *row = td_tensor_ptr(job->src) + r * n * isz;
    td_items_build(row, dtype, n, false, job->kind, s.a);
    const void *sorted = td_items_sort(s.a, s.b, n, job->kind, td_key_bytes(dtype));
    if (!sorted) {
      job->failed = 1;
      break;
    }
    /* runs of equal keys (each NaN a run of its own: NaN != NaN); the first longest wins,
     * at its last position */
    int64_t best = -1, best_count = 0, count = 0;
    for (int64_t j = 0; j < n; j++) {
      const uint64_t key = td_item_key(sorted, job->kind, j);
      count++;
      if (j == n - 1 || (floating && key == nan_key) || td_item_key(sorted, job->kind, j + 1) != key) {
        if (count > best_count) best = j, best_count = count;
        count = 0;
      }
    }
    put_item(job, job->kind, row, sorted, best, r);
  }
  scratch_put(&s);
}

TD_EXPORT td_tensor *td_mode(const td_tensor *t, int32_t dim, td_tensor **indices) {
  if (!t || !indices) return td_fail_null(TD_EINVAL, "mode: NULL argument");
  *indices = NULL;
  td_tensor *src = td_rows_of(t, dim, "mode");
  if (!src) return NULL;
  const int64_t n = t->ndim ? t->shape[dim] : 1;
  if (n == 0) {
    td_tensor_release(src);
    return td_fail_null(TD_EINDEX, "mode: cannot reduce over dim %d of size 0", (int)dim);
  }
  td_tensor *v = NULL, *i = NULL;
  if (reduced_results(src, t, dim, true, t->dtype, 0, 0, &v, &i)) {
    row_job job = {.src = src, .values = v, .indices = i, .n = n,
                   .kind = td_items_kind(src->dtype, n, true)};
    const int64_t total = td_tensor_numel(src);
    if (total > 0) run_rows(total / n, n, mode_rows, &job);
    if (job.failed) {
      td_fail(TD_ENOMEM, "mode: out of memory");
      td_tensor_release(v), td_tensor_release(i);
      v = i = NULL;
    }
  }
  td_tensor_release(src);
  if (!v || !i) {
    td_tensor_release(v), td_tensor_release(i);
    return NULL;
  }
  *indices = i;
  return v;
}

/* ---- quantile --------------------------------------------------------------------------- */

/* torch's quantile in the input's own precision T: ranks q * (n - 1) (q * (count - 1)
 * over the non-NaN values when ignoring NaN; the last rank, a NaN, when not and one is
 * there), rounded as the interpolation says, then torch's lerp between the neighbours. */
#define QUANTILE_ROW(T, SUF, FLOOR, CEIL, RINT, FABS)                                     \
  static void quantile_##SUF(const T *sorted, int64_t n, int64_t nans, const double *q,  \
                             int64_t nq, int32_t mode, int32_t ignore_nan, T *out,       \
                             int64_t stride) {                                           \
    for (int64_t j = 0; j < nq; j++) {                                                    \
      const T qj = (T)q[j];                                                               \
      T rank;                                                                             \
      if (ignore_nan) {                                                                   \
        rank = qj * (T)(n - nans - 1);                                                    \
        if (rank < 0) rank = 0;                                                           \
      } else {                                                                            \
        rank = nans ? (T)(n - 1) : qj * (T)(n - 1);                                       \
      }                                                                                   \
      if (mode == TD_QUANTILE_LOWER) rank = FLOOR(rank);                                  \
      if (mode == TD_QUANTILE_HIGHER) rank = CEIL(rank);                                  \
      if (mode == TD_QUANTILE_NEAREST) rank = RINT(rank);                                 \
      const int64_t below = (int64_t)rank;                                                \
      T v = sorted[below];                                                                \
      if (mode == TD_QUANTILE_LINEAR || mode == TD_QUANTILE_MIDPOINT) {                   \
        const T w = mode == TD_QUANTILE_MIDPOINT ? (T)0.5 : rank - (T)below;              \
        const T above = sorted[(int64_t)CEIL(rank)];                                      \
        v = FABS(w) < (T)0.5 ? v + w * (above - v) : above - (above - v) * ((T)1 - w);    \
      }                                                                                   \
      out[j * stride] = v;                                                                \
    }                                                                                     \
  }
QUANTILE_ROW(float, f32, floorf, ceilf, rintf, fabsf)
QUANTILE_ROW(double, f64, floor, ceil, rint, fabs)
#undef QUANTILE_ROW

static void quantile_rows(int64_t begin, int64_t end, void *arg) {
  row_job *job = arg;
  const int64_t n = job->n, isz = job->src->itemsize;
  const int64_t rows = td_tensor_numel(job->src) / n;
  const int32_t dtype = job->src->dtype;
  const uint64_t nan_key = td_key_all(dtype);
  scratch s = {0};
  void *vals = NULL;
  if (!scratch_get(&s, n, job->kind, true) || !(vals = malloc((size_t)(n * isz)))) {
    job->failed = 1;
    scratch_put(&s);
    free(vals);
    return;
  }
  for (int64_t r = begin; r < end; r++) {
    const char *row = td_tensor_ptr(job->src) + r * n * isz;
    td_items_build(row, dtype, n, false, job->kind, s.a);
    const void *sorted = td_items_sort(s.a, s.b, n, job->kind, td_key_bytes(dtype));
    if (!sorted) {
      job->failed = 1;
      break;
    }
    int64_t nans = 0;
    while (nans < n && td_item_key(sorted, job->kind, n - 1 - nans) == nan_key) nans++;
    for (int64_t j = 0; j < n; j++)
      td_key_store(dtype, td_item_key(sorted, job->kind, j), (char *)vals + j * isz);
    char *out = td_tensor_ptr(job->values);
    if (dtype == TD_FLOAT32) {
      quantile_f32(vals, n, nans, job->q, job->nq, job->flag, job->ignore_nan, (float *)out + r,
                   rows);
    } else {
      quantile_f64(vals, n, nans, job->q, job->nq, job->flag, job->ignore_nan, (double *)out + r,
                   rows);
    }
  }
  free(vals);
  scratch_put(&s);
}

TD_EXPORT td_tensor *td_quantile(const td_tensor *t, const td_tensor *q, int32_t dim,
                                 int32_t interpolation, int32_t ignore_nan) {
  const char *call = ignore_nan ? "nanquantile" : "quantile";
  if (!t || !q) return td_fail_null(TD_EINVAL, "%s: NULL argument", call);
  if (!td_check_cpu(call, t, "tensor") || !td_check_cpu(call, q, "q")) return NULL;
  if (t->dtype != TD_FLOAT32 && t->dtype != TD_FLOAT64)
    return td_fail_null(TD_EDTYPE, "%s: the input must be float32 or float64, got %s", call,
                        td_dtype_name(t->dtype));
  if (q->dtype != t->dtype)
    return td_fail_null(TD_EDTYPE, "%s: q must have the input's dtype %s, got %s", call,
                        td_dtype_name(t->dtype), td_dtype_name(q->dtype));
  if (q->ndim > 1)
    return td_fail_null(TD_ESHAPE, "%s: q must be a number or a 0-D or 1-D tensor, got %d dims",
                        call, (int)q->ndim);
  if (interpolation < TD_QUANTILE_LINEAR || interpolation > TD_QUANTILE_NEAREST)
    return td_fail_null(TD_EINVAL, "%s: unknown interpolation %d", call, (int)interpolation);
  if (td_tensor_numel(t) == 0) return td_fail_null(TD_ESHAPE, "%s: the input is empty", call);
  const int32_t nd = t->ndim ? t->ndim : 1;
  if (dim < 0 || dim >= nd)
    return td_fail_null(TD_EINVAL, "%s: dim %d is out of range for %d dims", call, (int)dim,
                        (int)t->ndim);
  const int64_t n = t->ndim ? t->shape[dim] : 1;
  if (n > ((int64_t)1 << 24))
    return td_fail_null(TD_ESHAPE, "%s: the dim has %lld elements, more than 2^24 (torch's limit)",
                        call, (long long)n);
  const int64_t nq = td_tensor_numel(q);
  double *qs = malloc((size_t)(nq ? nq : 1) * sizeof *qs);
  if (!qs) return td_fail_null(TD_ENOMEM, "%s: out of memory", call);
  td_tensor *qc = td_tensor_contiguous(q);
  for (int64_t j = 0; qc && j < nq; j++) {
    qs[j] = td_load_f64(q->dtype, td_tensor_ptr(qc), j);
    if (!(qs[j] >= 0 && qs[j] <= 1)) {
      td_fail(TD_EINVAL, "%s: q must be in [0, 1], got %g", call, isnan(qs[j]) ? fabs(qs[j]) : qs[j]);
      td_tensor_release(qc);
      qc = NULL;
    }
  }
  td_tensor *src = qc ? td_rows_of(t, dim, call) : NULL;
  td_tensor *v = NULL, *unused = NULL;
  if (src && reduced_results(src, t, dim, false, t->dtype, q->ndim, nq, &v, &unused)) {
    row_job job = {.src = src, .values = v, .q = qs, .nq = nq, .n = n, .flag = interpolation,
                   .ignore_nan = ignore_nan != 0, .kind = td_items_kind(src->dtype, n, false)};
    run_rows(td_tensor_numel(src) / n, n, quantile_rows, &job);
    if (job.failed) {
      td_fail(TD_ENOMEM, "%s: out of memory", call);
      td_tensor_release(v);
      v = NULL;
    }
  }
  td_tensor_release(src);
  td_tensor_release(qc);
  free(qs);
  return v;
}
