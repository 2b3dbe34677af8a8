/*
 * unique.c: td_unique (torch.unique of the flattened tensor, and unique_consecutive) and
 * td_unique_dim (the same over slices along a dim).
 *
 * Sorted unique values come from one of two roads:
 *  - counting, for integers whose range is small (bool, 8-bit always; wider ones when
 *    max - min is at most a few times the count): a count per value, the values present
 *    in order, the inverse from a table of their ranks;
 *  - sorting, otherwise: sort_rows.h's radix sort of the keys (with positions when the
 *    inverse is wanted, or where a key does not give a value back: -0.0 and 0.0 are one
 *    value, shown as the first of them; every NaN is its own value, last), then runs of
 *    equal keys.
 * Both are cut into fixed chunks on the pool (counts are integers and the sorted order
 * is unique), so results never depend on the thread count.
 */
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "../src/parallel.h"
#include "dtypes.h"
#include "sort_rows.h"

enum { UNIQUE_GRAIN = 1 << 16, COUNT_MAX_RANGE = 1 << 24 };

static int64_t grain_of(int64_t n) {
  return td_get_num_threads() > 1 && n > UNIQUE_GRAIN ? td_parallel_even_grain(n) : UNIQUE_GRAIN;
}

/* ---- results ---------------------------------------------------------------------------- */

typedef struct outs {
  td_tensor *values, *inverse, *counts;
} outs;

static void outs_release(outs *o) {
  td_tensor_release(o->values);
  td_tensor_release(o->inverse);
  td_tensor_release(o->counts);
  o->values = o->inverse = o->counts = NULL;
}

/* values (1-D of u, dtype), inverse (shape of t) and counts (1-D of u) as asked. */
static bool outs_make(outs *o, int64_t u, int32_t dtype, const td_tensor *t, bool inv,
                      bool cnt) {
  o->values = td_tensor_empty(1, &u, dtype);
  o->inverse = o->values && inv ? td_tensor_empty(t->ndim, t->shape, TD_INT64) : NULL;
  o->counts = o->values && cnt ? td_tensor_empty(1, &u, TD_INT64) : NULL;
  if (!o->values || (inv && !o->inverse) || (cnt && !o->counts)) {
    outs_release(o);
    return false;
  }
  return true;
}

/* ---- integers: counting ---------------------------------------------------------------- */

typedef struct count_job {
  const void *src;
  int32_t dtype;
  int64_t lo, range, grain;  /* values lo .. lo + range - 1 */
  int64_t *counts;           /* one histogram per chunk, range each */
  int64_t *rank;             /* value - lo -> its slot among the values present */
  int64_t *inverse;
  _Atomic int64_t min_seen, max_seen;
} count_job;


#define STOREI(ARG, DN, DT, DK, ...) \
  case TD_##DN: ((DT *)p)[k] = (DT)v; return;
static inline void store_int(int32_t dtype, void *p, int64_t k, int64_t v) {
  switch (dtype) {
    TD_DTYPES_INTEGRAL(STOREI, _)
    default: return;
  }
}
#undef STOREI

#define MINMAX_ROW(ARG, DN, DT, DK, ...)                                               \
  static void minmax_##DN(const DT *x, int64_t b, int64_t e, int64_t *lo, int64_t *hi) { \
    int64_t l = (int64_t)LOAD_##DK(x[b]), h = l;                                       \
    for (int64_t i = b + 1; i < e; i++) {                                              \
      const int64_t v = (int64_t)LOAD_##DK(x[i]);                                      \
      l = v < l ? v : l;                                                               \
      h = v > h ? v : h;                                                               \
    }                                                                                  \
    *lo = l, *hi = h;                                                                  \
  }
TD_DTYPES_INTEGRAL(MINMAX_ROW, _)
#undef MINMAX_ROW

static void minmax_range(int64_t b, int64_t e, void *arg) {
  count_job *j = arg;
  int64_t lo = 0, hi = 0;
#define MINMAX_CASE(ARG, DN, ...) \
  case TD_##DN: minmax_##DN(j->src, b, e, &lo, &hi); break;
  switch (j->dtype) {
    TD_DTYPES_INTEGRAL(MINMAX_CASE, _)
    default: break;
  }
#undef MINMAX_CASE
  int64_t cur = atomic_load(&j->min_seen);
  while (lo < cur && !atomic_compare_exchange_weak(&j->min_seen, &cur, lo)) {}
  cur = atomic_load(&j->max_seen);
  while (hi > cur && !atomic_compare_exchange_weak(&j->max_seen, &cur, hi)) {}
}

#define COUNT_ROW(ARG, DN, DT, DK, ...)                                                  \
  static void count_##DN(const DT *x, int64_t b, int64_t e, int64_t lo, int64_t *c) {   \
    for (int64_t i = b; i < e; i++) c[(int64_t)LOAD_##DK(x[i]) - lo]++;                \
  }                                                                                      \
  static void rank_##DN(const DT *x, int64_t b, int64_t e, int64_t lo, const int64_t *r, \
                        int64_t *inv) {                                                  \
    for (int64_t i = b; i < e; i++) inv[i] = r[(int64_t)LOAD_##DK(x[i]) - lo];          \
  }
TD_DTYPES_INTEGRAL(COUNT_ROW, _)
#undef COUNT_ROW

static void count_range(int64_t b, int64_t e, void *arg) {
  count_job *j = arg;
  int64_t *c = j->counts + b / j->grain * j->range;
  memset(c, 0, (size_t)j->range * sizeof *c);
#define COUNT_CASE(ARG, DN, ...) \
  case TD_##DN: count_##DN(j->src, b, e, j->lo, c); break;
  switch (j->dtype) {
    TD_DTYPES_INTEGRAL(COUNT_CASE, _)
    default: break;
  }
#undef COUNT_CASE
}

static void rank_range(int64_t b, int64_t e, void *arg) {
  count_job *j = arg;
#define RANK_CASE(ARG, DN, ...) \
  case TD_##DN: rank_##DN(j->src, b, e, j->lo, j->rank, j->inverse); break;
  switch (j->dtype) {
    TD_DTYPES_INTEGRAL(RANK_CASE, _)
    default: break;
  }
#undef RANK_CASE
}

/* The counting road, or false (nothing made, no error) when the range is too wide. */
static bool unique_counting(const td_tensor *t, const td_tensor *src, int64_t n, bool inv,
                            bool cnt, outs *o, bool *failed) {
  count_job j = {.src = td_tensor_ptr(src), .dtype = src->dtype, .min_seen = INT64_MAX,
                 .max_seen = INT64_MIN};
  const int64_t grain = grain_of(n);
  td_parallel_for(n, grain, minmax_range, &j);
  const int64_t lo = j.min_seen, hi = j.max_seen;
  /* the range, unless it is too wide to count (or overflows) */
  const uint64_t span = (uint64_t)hi - (uint64_t)lo; /* no overflow for any int64 pair */
  if (span >= COUNT_MAX_RANGE || (span > 65536 && span > 4 * (uint64_t)n)) return false;
  j.lo = lo, j.range = (int64_t)span + 1;
  /* per-chunk histograms while they are small next to the data; one otherwise */
  j.grain = j.range <= n / 4 / td_parallel_chunks(n, grain) ? grain : n;
  const int64_t chunks = td_parallel_chunks(n, j.grain);
  j.counts = malloc((size_t)(chunks * j.range) * sizeof *j.counts);
  j.rank = inv ? malloc((size_t)j.range * sizeof *j.rank) : NULL;
  if (!j.counts || (inv && !j.rank)) {
    free(j.counts), free(j.rank);
    td_fail(TD_ENOMEM, "unique: out of memory");
    *failed = true;
    return true;
  }
  td_parallel_for(n, j.grain, count_range, &j);
  for (int64_t c = 1; c < chunks; c++)
    for (int64_t v = 0; v < j.range; v++) j.counts[v] += j.counts[c * j.range + v];
  int64_t u = 0;
  for (int64_t v = 0; v < j.range; v++) {
    if (j.rank) j.rank[v] = u;
    u += j.counts[v] != 0;
  }
  if (!outs_make(o, u, src->dtype, t, inv, cnt)) {
    *failed = true;
  } else {
    char *vals = td_tensor_ptr(o->values);
    int64_t *cs = o->counts ? (int64_t *)td_tensor_ptr(o->counts) : NULL;
    for (int64_t v = 0, k = 0; v < j.range; v++) {
      if (!j.counts[v]) continue;
      if (cs) cs[k] = j.counts[v];
      store_int(src->dtype, vals, k++, lo + v);
    }
    if (inv) {
      j.inverse = (int64_t *)td_tensor_ptr(o->inverse);
      td_parallel_for(n, grain, rank_range, &j);
    }
  }
  free(j.counts);
  free(j.rank);
  return true;
}

/* ---- sorting ---------------------------------------------------------------------------- */

typedef struct runs_job {
  const void *items;
  int kind;
  bool floating, positions;
  uint64_t nan_key;
  int64_t n, grain;
  int64_t *starts_per_chunk; /* run starts counted per chunk, then their first slot */
  const char *src;           /* the flattened input (values read by position) */
  int32_t dtype;
  int64_t isz;
  char *values;
  int64_t *inverse, *starts;
} runs_job;

static inline bool run_starts(const runs_job *j, int64_t i) {
  if (i == 0) return true;
  const uint64_t k = td_item_key(j->items, j->kind, i);
  return k != td_item_key(j->items, j->kind, i - 1) || (j->floating && k == j->nan_key);
}

static void runs_count(int64_t b, int64_t e, void *arg) {
  runs_job *j = arg;
  int64_t c = 0;
  for (int64_t i = b; i < e; i++) c += run_starts(j, i);
  j->starts_per_chunk[b / j->grain] = c;
}

static void runs_fill(int64_t b, int64_t e, void *arg) {
  runs_job *j = arg;
  int64_t u = j->starts_per_chunk[b / j->grain] - 1; /* the run of item b - 1 */
  for (int64_t i = b; i < e; i++) {
    if (run_starts(j, i)) {
      u++;
      if (j->starts) j->starts[u] = i;
      char *dst = j->values + u * j->isz;
      if (j->positions) {
        memcpy(dst, j->src + td_item_pos(j->items, j->kind, i) * j->isz, (size_t)j->isz);
      } else {
        td_key_store(j->dtype, td_item_key(j->items, j->kind, i), dst);
      }
    }
    if (j->inverse) j->inverse[td_item_pos(j->items, j->kind, i)] = u;
  }
}

static bool unique_sorting(const td_tensor *t, const td_tensor *src, int64_t n, bool inv,
                           bool cnt, outs *o) {
  const int32_t dtype = src->dtype;
  int kind = td_items_kind(dtype, n, inv);
  int64_t cap_a = 0, cap_b = 0;
  const int64_t bytes = (n ? n : 1) * td_items_size(td_items_kind(dtype, n, true));
  void *a = td_heap_alloc(bytes, &cap_a), *b = a ? td_heap_alloc(bytes, &cap_b) : NULL;
  int64_t *per = NULL, *starts = NULL;
  bool ok = false;
  if (!a || !b) goto oom;
  const char *p = td_tensor_ptr(src);
  int flags = td_items_build(p, dtype, n, false, kind, a);
  if (flags && !inv) { /* values read back by position */
    kind = td_items_kind(dtype, n, true);
    td_items_build(p, dtype, n, false, kind, a);
  }
  const void *sorted = td_items_sort(a, b, n, kind, td_key_bytes(dtype));
  const int64_t grain = grain_of(n), chunks = td_parallel_chunks(n, grain);
  per = malloc((size_t)(chunks ? chunks : 1) * sizeof *per);
  if (!sorted || !per) goto oom;
  runs_job j = {.items = sorted, .kind = kind, .floating = td_dtype_is_floating(dtype),
                .positions = kind == TD_ITEMS_K32I || kind == TD_ITEMS_K64I,
                .nan_key = td_key_all(dtype), .n = n, .grain = grain, .starts_per_chunk = per,
                .src = p, .dtype = dtype, .isz = src->itemsize};
  td_parallel_for(n, grain, runs_count, &j);
  int64_t u = 0;
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t here = per[c];
    per[c] = u, u += here;
  }
  if (cnt) starts = malloc((size_t)(u ? u : 1) * sizeof *starts);
  if (cnt && !starts) goto oom;
  if (!outs_make(o, u, dtype, t, inv, cnt)) goto done;
  j.values = td_tensor_ptr(o->values);
  j.inverse = inv ? (int64_t *)td_tensor_ptr(o->inverse) : NULL;
  j.starts = starts;
  td_parallel_for(n, grain, runs_fill, &j);
  if (cnt) {
    int64_t *cs = (int64_t *)td_tensor_ptr(o->counts);
    for (int64_t k = 0; k < u; k++) cs[k] = (k + 1 < u ? starts[k + 1] : n) - starts[k];
  }
  ok = true;
  goto done;
oom:
  td_fail(TD_ENOMEM, "unique: out of memory");
done:
  if (a) td_heap_free(a, cap_a);
  if (b) td_heap_free(b, cap_b);
  free(per);
  free(starts);
  if (!ok) outs_release(o);
  return ok;
}

/* ---- consecutive ------------------------------------------------------------------------ */

typedef struct consec_job {
  const char *src;
  int32_t dtype;
  int64_t isz, grain;
  int64_t *per;  /* starts per chunk, then their first slot */
  char *values;
  int64_t *inverse, *starts;
} consec_job;

/* Element i differs from element i - 1 (NaN differs from everything). */
#define DIFFERS(ARG, DN, DT, DK, ...) \
  case TD_##DN: return LOAD_##DK(((const DT *)p)[i]) != LOAD_##DK(((const DT *)p)[i - 1]);
static inline bool differs(int32_t dtype, const void *p, int64_t i) {
  switch (dtype) {
    TD_DTYPES_ALL(DIFFERS, _)
    default: return true;
  }
}
#undef DIFFERS

static void consec_count(int64_t b, int64_t e, void *arg) {
  consec_job *j = arg;
  int64_t c = 0;
  for (int64_t i = b; i < e; i++) c += i == 0 || differs(j->dtype, j->src, i);
  j->per[b / j->grain] = c;
}

static void consec_fill(int64_t b, int64_t e, void *arg) {
  consec_job *j = arg;
  int64_t u = j->per[b / j->grain] - 1;
  for (int64_t i = b; i < e; i++) {
    if (i == 0 || differs(j->dtype, j->src, i)) {
      u++;
      memcpy(j->values + u * j->isz, j->src + i * j->isz, (size_t)j->isz);
      if (j->starts) j->starts[u] = i;
    }
    if (j->inverse) j->inverse[i] = u;
  }
}

static bool unique_consecutive(const td_tensor *t, const td_tensor *src, int64_t n, bool inv,
                               bool cnt, outs *o) {
  const int64_t grain = grain_of(n), chunks = td_parallel_chunks(n, grain);
  consec_job j = {.src = td_tensor_ptr(src), .dtype = src->dtype, .isz = src->itemsize,
                  .grain = grain};
  j.per = malloc((size_t)(chunks ? chunks : 1) * sizeof *j.per);
  if (!j.per) return td_fail(TD_ENOMEM, "unique_consecutive: out of memory"), false;
  td_parallel_for(n, grain, consec_count, &j);
  int64_t u = 0;
  for (int64_t c = 0; c < chunks; c++) {
    const int64_t here = j.per[c];
    j.per[c] = u, u += here;
  }
  bool ok = false;
  if (cnt) j.starts = malloc((size_t)(u ? u : 1) * sizeof *j.starts);
  if (cnt && !j.starts) td_fail(TD_ENOMEM, "unique_consecutive: out of memory");
  if ((!cnt || j.starts) && outs_make(o, u, src->dtype, t, inv, cnt)) {
    j.values = td_tensor_ptr(o->values);
    j.inverse = inv ? (int64_t *)td_tensor_ptr(o->inverse) : NULL;
    td_parallel_for(n, grain, consec_fill, &j);
    if (cnt) {
      int64_t *cs = (int64_t *)td_tensor_ptr(o->counts);
      for (int64_t k = 0; k < u; k++) cs[k] = (k + 1 < u ? j.starts[k + 1] : n) - j.starts[k];
    }
    ok = true;
  }
  free(j.per);
  free(j.starts);
  return ok;
}

/* ---- td_unique -------------------------------------------------------------------------- */

static td_tensor *hand_out(outs *o, td_tensor **inverse, td_tensor **counts) {
  if (inverse) *inverse = o->inverse;
  if (counts) *counts = o->counts;
  return o->values;
}

TD_EXPORT td_tensor *td_unique(const td_tensor *t, int32_t consecutive, td_tensor **inverse,
                               td_tensor **counts) {
  const char *call = consecutive ? "unique_consecutive" : "unique";
  if (inverse) *inverse = NULL;
  if (counts) *counts = NULL;
  if (!t) return td_fail_null(TD_EINVAL, "%s: NULL argument", call);
  if (!td_check_cpu(call, t, "tensor")) return NULL;
  td_tensor *src = td_tensor_contiguous(t);
  if (!src) return NULL;
  const int64_t n = td_tensor_numel(src);
  const bool inv = inverse != NULL, cnt = counts != NULL;
  outs o = {0};
  bool ok, failed = false;
  if (consecutive) {
    ok = unique_consecutive(t, src, n, inv, cnt, &o);
  } else if (n > 0 && !td_dtype_is_floating(src->dtype) &&
             unique_counting(t, src, n, inv, cnt, &o, &failed)) {
    ok = !failed;
  } else {
    ok = unique_sorting(t, src, n, inv, cnt, &o);
  }
  td_tensor_release(src);
  if (!ok) {
    outs_release(&o);
    return NULL;
  }
  return hand_out(&o, inverse, counts);
}

/* ---- td_unique_dim ---------------------------------------------------------------------- */

typedef struct slices {
  const uint64_t *keys;  /* m slices of len keys each */
  const uint8_t *nan;    /* slice i holds a NaN */
  int64_t len;
} slices;

static int cmp_slices(const void *pa, const void *pb, void *arg) {
  const slices *s = arg;
  const int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  const uint64_t *ka = s->keys + a * s->len, *kb = s->keys + b * s->len;
  for (int64_t i = 0; i < s->len; i++)
    if (ka[i] != kb[i]) return ka[i] < kb[i] ? -1 : 1;
  return (a > b) - (a < b);
}

static bool same_slice(const slices *s, int64_t a, int64_t b) {
  if (s->nan[a] || s->nan[b]) return false;
  return memcmp(s->keys + a * s->len, s->keys + b * s->len, (size_t)s->len * 8) == 0;
}

TD_EXPORT td_tensor *td_unique_dim(const td_tensor *t, int32_t dim, int32_t consecutive,
                                   td_tensor **inverse, td_tensor **counts) {
  const char *call = consecutive ? "unique_consecutive" : "unique";
  if (inverse) *inverse = NULL;
  if (counts) *counts = NULL;
  if (!t) return td_fail_null(TD_EINVAL, "%s: NULL argument", call);
  if (!td_check_cpu(call, t, "tensor")) return NULL;
  if (dim < 0 || dim >= t->ndim)
    return td_fail_null(TD_EINVAL, "%s: dim %d is out of range for %d dims", call, (int)dim,
                        (int)t->ndim);
  const int64_t m = t->shape[dim], total = td_tensor_numel(t);
  if (m > 0 && total == 0)
    return td_fail_null(TD_ESHAPE, "%s: the slices along dim %d are empty (a dim of size 0 "
                        "that is not the one selected)", call, (int)dim);
  /* dim first, contiguous: slice i is one run */
  int32_t perm[TD_MAX_DIMS], back[TD_MAX_DIMS];
  perm[0] = dim;
  for (int32_t k = 0, j = 1; k < t->ndim; k++)
    if (k != dim) perm[j++] = k;
  for (int32_t k = 0; k < t->ndim; k++) back[perm[k]] = k;
  td_tensor moved;
  if (td_tensor_permute(t, perm, &moved) < 0) return NULL;
  td_tensor *src = td_tensor_contiguous(&moved);
  if (!src) return NULL;
  const int64_t len = m ? total / m : 0, isz = src->itemsize;
  uint64_t *keys = malloc((size_t)(total ? total : 1) * sizeof *keys);
  uint8_t *nan = malloc((size_t)(m ? m : 1));
  int64_t *order = malloc((size_t)(m ? m : 1) * sizeof *order);
  int64_t *group = malloc((size_t)(m ? m : 1) * sizeof *group);
  td_tensor *vals = NULL, *inv = NULL, *cnt = NULL, *out = NULL;
  if (!keys || !nan || !order || !group) {
    td_fail(TD_ENOMEM, "%s: out of memory", call);
    goto done;
  }
  td_items_build(td_tensor_ptr(src), src->dtype, total, false, TD_ITEMS_K64, keys);
  const bool floating = td_dtype_is_floating(src->dtype);
  const uint64_t nan_key = td_key_all(src->dtype);
  for (int64_t i = 0; i < m; i++) {
    nan[i] = 0;
    for (int64_t k = 0; floating && k < len; k++) nan[i] |= keys[i * len + k] == nan_key;
    order[i] = i;
  }
  slices s = {.keys = keys, .nan = nan, .len = len};
  if (!consecutive) qsort_r(order, (size_t)m, sizeof *order, cmp_slices, &s);
  int64_t u = 0;
  for (int64_t i = 0; i < m; i++) {
    if (i == 0 || !same_slice(&s, order[i - 1], order[i])) u++;
    group[i] = u - 1;
  }
  int64_t shape[TD_MAX_DIMS];
  memcpy(shape, src->shape, sizeof shape);
  shape[0] = u;
  vals = td_tensor_empty(src->ndim, shape, src->dtype);
  inv = vals && inverse ? td_tensor_empty(1, &m, TD_INT64) : NULL;
  cnt = vals && counts ? td_tensor_empty(1, &u, TD_INT64) : NULL;
  if (!vals || (inverse && !inv) || (counts && !cnt)) goto done;
  if (cnt) memset(td_tensor_ptr(cnt), 0, (size_t)u * 8);
  for (int64_t i = 0; i < m; i++) {
    if (i == 0 || group[i] != group[i - 1])
      memcpy(td_tensor_ptr(vals) + group[i] * len * isz, td_tensor_ptr(src) + order[i] * len * isz,
             (size_t)(len * isz));
    if (inv) ((int64_t *)td_tensor_ptr(inv))[order[i]] = group[i];
    if (cnt) ((int64_t *)td_tensor_ptr(cnt))[group[i]]++;
  }
  td_tensor bv;
  if (td_tensor_permute(vals, back, &bv) == 0) out = td_tensor_contiguous(&bv);
done:
  free(keys), free(nan), free(order), free(group);
  td_tensor_release(src);
  td_tensor_release(vals);
  if (!out) {
    td_tensor_release(inv), td_tensor_release(cnt);
    return NULL;
  }
  if (inverse) *inverse = inv;
  if (counts) *counts = cnt;
  return out;
}
