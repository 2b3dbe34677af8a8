/*
 * leaf_stats.c: td_leaf_stats_add, the whole-tensor summary `tdflow inspect --stats` and
 * T.describe print: count, NaN and infinity counts, and min, max, mean and M2 over the
 * finite values; for bool and integer dtypes the distinct values while there are at most
 * TD_LEAF_DISTINCT_MAX of them.
 *
 * The elements are cut into chunks of LEAF_GRAIN (fixed by the element count alone) run
 * on the pool. A chunk is read twice while it sits in cache: once for min, max and the sum
 * (eight float64 accumulators; a plain loop the compiler vectorises, with no test per
 * element: a NaN or an infinity shows as a sum that is not finite, and only then is the
 * chunk read again counting them), once for M2 around the chunk's own mean. Chunks merge
 * in order with Chan et al.'s formula, so the result is the same for any thread count and
 * 1e8 float32 values near 1e4 keep their mean and std to float32 precision (a single
 * float32 or even float64 running sum of squares would not). A state spans calls: HDF5
 * datasets are added a slab at a time.
 *
 * Distinct values: a chunk whose values span less than 2^16 marks them in a bitmap (read
 * back in order), a wider one inserts them into a small open-addressing set; either stops
 * at TD_LEAF_DISTINCT_MAX + 1 values and the leaf is then "more than" for good (a flag
 * the other chunks read and skip the work for).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "../src/parallel.h"
#include "dtypes.h"

/* About 1 MiB of float64 or 512 KiB of float32 per chunk: the second read finds it in
 * the core's cache, and the per-chunk distinct buffers (8 KiB each) stay small. */
enum { LEAF_GRAIN = 1 << 17, LEAF_LANES = 8, LEAF_SPAN_BITS = 16, LEAF_SET_SLOTS = 4096 };

typedef struct leaf_part {
  int64_t finite, nan, inf;
  double min, max, mean, m2;
  int64_t ndistinct; /* -1: more than TD_LEAF_DISTINCT_MAX */
} leaf_part;

typedef struct leaf_job {
  const char *src;
  int32_t dtype;
  int64_t itemsize;
  leaf_part *parts;
  int64_t *values;    /* chunk c's sorted distinct values at c * TD_LEAF_DISTINCT_MAX; NULL: none */
  int32_t past_max;   /* set (relaxed) once any chunk saw too many distinct values */
} leaf_job;

/* ---- distinct values of a chunk --------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Values lo..hi (hi - lo < 2^16) marked in a bitmap; out gets them ascending. -1 when more
 * than TD_LEAF_DISTINCT_MAX. */
#define DEF_DISTINCT(_, DN, DT, DK, ...)                                                       \
  static int64_t distinct_##DN(const DT *x, int64_t n, int64_t lo, int64_t hi, int64_t *out) { \
    if ((uint64_t)hi - (uint64_t)lo < ((uint64_t)1 << LEAF_SPAN_BITS)) {                     \
      uint64_t bits[(1 << LEAF_SPAN_BITS) / 64];                                              \
      const int64_t words = (int64_t)(((uint64_t)hi - (uint64_t)lo) / 64 + 1);                \
      memset(bits, 0, (size_t)words * sizeof bits[0]);                                        \
      for (int64_t i = 0; i < n; i++) {                                                       \
        uint64_t k = (uint64_t)(int64_t)LOAD_##DK(x[i]) - (uint64_t)lo;                       \
        bits[k >> 6] |= (uint64_t)1 << (k & 63);                                              \
      }                                                                                       \
      int64_t m = 0;                                                                          \
      for (int64_t w = 0; w < words; w++)                                                     \
        for (uint64_t b = bits[w]; b; b &= b - 1) {                                           \
          if (m == TD_LEAF_DISTINCT_MAX) return -1;                                           \
          out[m++] = (int64_t)((uint64_t)lo + (uint64_t)(w * 64 + __builtin_ctzll(b)));       \
        }                                                                                     \
      return m;                                                                               \
    }                                                                                         \
    /* a wide span: a set of at most TD_LEAF_DISTINCT_MAX values in LEAF_SET_SLOTS slots    \
     * (under a quarter full, so probes stay short); a slot holds value ^ key so that       \
     * 0 marks an empty one, with key a value of the chunk that is never stored */          \
    int64_t slots[LEAF_SET_SLOTS];                                                            \
    memset(slots, 0, sizeof slots);                                                           \
    const uint64_t key = (uint64_t)lo;                                                        \
    int64_t m = 0;                                                                            \
    bool has_lo = false;                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                         \
      const uint64_t v = (uint64_t)(int64_t)LOAD_##DK(x[i]);                                  \
      if (v == key) {                                                                         \
        has_lo = true;                                                                        \
        continue;                                                                             \
      }                                                                                       \
      uint64_t h = (v ^ key) * 0x9E3779B97F4A7C15ull >> (64 - 12);                            \
      while (slots[h] && (uint64_t)slots[h] != (v ^ key)) h = (h + 1) & (LEAF_SET_SLOTS - 1); \
      if (slots[h]) continue;                                                                 \
      if (m + has_lo == TD_LEAF_DISTINCT_MAX) return -1;                                      \
      slots[h] = (int64_t)(v ^ key);                                                          \
      out[m++] = (int64_t)v;                                                                  \
    }                                                                                         \
    if (has_lo) {                                                                             \
      if (m == TD_LEAF_DISTINCT_MAX) return -1;                                               \
      out[m++] = lo;                                                                          \
    }                                                                                         \
    qsort(out, (size_t)m, sizeof *out, cmp_i64);                                              \
    return m;                                                                                 \
  }
TD_DTYPES_INTEGRAL(DEF_DISTINCT, _)
#undef DEF_DISTINCT

/* The union of two ascending sets a (na) and b (nb) into out (room for
 * TD_LEAF_DISTINCT_MAX); -1 when it holds more. */
static int64_t union_sets(const int64_t *a, int64_t na, const int64_t *b, int64_t nb, int64_t *out) {
  int64_t i = 0, k = 0, m = 0;
  while (i < na || k < nb) {
    int64_t v;
    if (k == nb || (i < na && a[i] < b[k])) v = a[i++];
    else if (i == na || b[k] < a[i]) v = b[k++];
    else v = a[i++], k++;
    if (m == TD_LEAF_DISTINCT_MAX) return -1;
    out[m++] = v;
  }
  return m;
}

/* ---- one chunk ---------------------------------------------------------------------------- */

/* M2 of the finite values around mean (all finite when all_finite). */
#define DEF_M2(_, DN, DT, DK, CT, ...)                                                    \
  static double m2_##DN(const DT *x, int64_t n, double mean, bool all_finite) {         \
    double acc[LEAF_LANES] = {0};                                                        \
    int64_t i = 0;                                                                       \
    if (all_finite)                                                                      \
      for (; i + LEAF_LANES <= n; i += LEAF_LANES)                                       \
        for (int k = 0; k < LEAF_LANES; k++) {                                           \
          const double d = (double)LOAD_##DK(x[i + k]) - mean;                           \
          acc[k] += d * d;                                                               \
        }                                                                                \
    for (; i < n; i++) {                                                                 \
      const CT v = (CT)LOAD_##DK(x[i]);                                                  \
      const double d = (double)v - mean;                                                 \
      if (all_finite || v - v == 0) acc[0] += d * d;                                     \
    }                                                                                    \
    double s = 0;                                                                        \
    for (int k = 0; k < LEAF_LANES; k++) s += acc[k];                                    \
    return s;                                                                            \
  }
TD_DTYPES_ALL(DEF_M2, _)
#undef DEF_M2

/* min, max, count, mean and M2 of a floating chunk: the fast read assumes every value
 * finite and finds out from the sum; the second counts NaN and infinities and leaves
 * them out. A sum of finite values past the float64 range (float64 data near its
 * limits) falls back to Welford's update, which never overflows on the way. */
#define DEF_FLOAT_CHUNK(_, DN, DT, DK, CT, ...)                                             \
  static void chunk_##DN(const DT *x, int64_t n, leaf_part *p) {                           \
    CT mn[LEAF_LANES], mx[LEAF_LANES];                                                     \
    double s[LEAF_LANES] = {0};                                                            \
    for (int k = 0; k < LEAF_LANES; k++) mn[k] = (CT)INFINITY, mx[k] = (CT)-INFINITY;      \
    int64_t i = 0;                                                                         \
    for (; i + LEAF_LANES <= n; i += LEAF_LANES)                                           \
      for (int k = 0; k < LEAF_LANES; k++) {                                               \
        const CT v = (CT)LOAD_##DK(x[i + k]);                                              \
        mn[k] = v < mn[k] ? v : mn[k];                                                     \
        mx[k] = v > mx[k] ? v : mx[k];                                                     \
        s[k] += (double)v;                                                                 \
      }                                                                                    \
    for (; i < n; i++) {                                                                   \
      const CT v = (CT)LOAD_##DK(x[i]);                                                    \
      mn[0] = v < mn[0] ? v : mn[0];                                                       \
      mx[0] = v > mx[0] ? v : mx[0];                                                       \
      s[0] += (double)v;                                                                   \
    }                                                                                      \
    double sum = 0;                                                                        \
    p->min = INFINITY, p->max = -INFINITY;                                                 \
    for (int k = 0; k < LEAF_LANES; k++) {                                                 \
      sum += s[k];                                                                         \
      p->min = mn[k] < p->min ? mn[k] : p->min;                                            \
      p->max = mx[k] > p->max ? mx[k] : p->max;                                            \
    }                                                                                      \
    bool all_finite = sum - sum == 0;                                                      \
    p->finite = n;                                                                         \
    if (!all_finite) {                                                                     \
      sum = 0, p->finite = 0, p->min = INFINITY, p->max = -INFINITY;                       \
      for (i = 0; i < n; i++) {                                                            \
        const CT v = (CT)LOAD_##DK(x[i]);                                                  \
        if (v - v == 0) {                                                                  \
          p->finite++, sum += (double)v;                                                   \
          p->min = v < p->min ? v : p->min;                                                \
          p->max = v > p->max ? v : p->max;                                                \
        } else if (v != v) {                                                               \
          p->nan++;                                                                        \
        } else {                                                                           \
          p->inf++;                                                                        \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
    if (p->finite == 0) return;                                                            \
    if (sum - sum == 0) {                                                                  \
      p->mean = sum / (double)p->finite;                                                   \
      p->m2 = m2_##DN(x, n, p->mean, all_finite);                                          \
      return;                                                                              \
    }                                                                                      \
    double mean = 0, m2 = 0, k = 0;                                                        \
    for (i = 0; i < n; i++) {                                                              \
      const CT v = (CT)LOAD_##DK(x[i]);                                                    \
      if (!(v - v == 0)) continue;                                                         \
      const double d = (double)v - mean;                                                   \
      mean += d / ++k;                                                                     \
      m2 += d * ((double)v - mean);                                                        \
    }                                                                                      \
    p->mean = mean, p->m2 = m2;                                                            \
  }
TD_DTYPES_FLOAT(DEF_FLOAT_CHUNK, _)
#undef DEF_FLOAT_CHUNK

/* The same for bool and integers (every value finite), then the distinct values unless
 * another chunk already found too many. */
#define DEF_INT_CHUNK(_, DN, DT, DK, CT, ...)                                                  \
  static void chunk_##DN(leaf_job *j, const DT *x, int64_t n, leaf_part *p, int64_t *vals) { \
    int64_t mn[LEAF_LANES], mx[LEAF_LANES];                                                    \
    double s[LEAF_LANES] = {0};                                                                \
    for (int k = 0; k < LEAF_LANES; k++) mn[k] = INT64_MAX, mx[k] = INT64_MIN;                 \
    int64_t i = 0;                                                                             \
    for (; i + LEAF_LANES <= n; i += LEAF_LANES)                                               \
      for (int k = 0; k < LEAF_LANES; k++) {                                                   \
        const int64_t v = (int64_t)LOAD_##DK(x[i + k]);                                        \
        mn[k] = v < mn[k] ? v : mn[k];                                                         \
        mx[k] = v > mx[k] ? v : mx[k];                                                         \
        s[k] += (double)v;                                                                     \
      }                                                                                        \
    for (; i < n; i++) {                                                                       \
      const int64_t v = (int64_t)LOAD_##DK(x[i]);                                              \
      mn[0] = v < mn[0] ? v : mn[0];                                                           \
      mx[0] = v > mx[0] ? v : mx[0];                                                           \
      s[0] += (double)v;                                                                       \
    }                                                                                          \
    int64_t lo = INT64_MAX, hi = INT64_MIN;                                                    \
    double sum = 0;                                                                            \
    for (int k = 0; k < LEAF_LANES; k++) {                                                     \
      sum += s[k];                                                                             \
      lo = mn[k] < lo ? mn[k] : lo;                                                            \
      hi = mx[k] > hi ? mx[k] : hi;                                                            \
    }                                                                                          \
    p->finite = n, p->min = (double)lo, p->max = (double)hi;                                   \
    p->mean = sum / (double)n;                                                                 \
    p->m2 = m2_##DN(x, n, p->mean, true);                                                      \
    p->ndistinct = -1;                                                                         \
    if (vals && !__atomic_load_n(&j->past_max, __ATOMIC_RELAXED)) {                            \
      p->ndistinct = distinct_##DN(x, n, lo, hi, vals);                                        \
      if (p->ndistinct < 0) __atomic_store_n(&j->past_max, 1, __ATOMIC_RELAXED);               \
    }                                                                                          \
  }
TD_DTYPES_INTEGRAL(DEF_INT_CHUNK, _)
#undef DEF_INT_CHUNK

static void leaf_range(int64_t b, int64_t e, void *ctx) {
  leaf_job *j = ctx;
  const int64_t c = b / LEAF_GRAIN;
  leaf_part *p = &j->parts[c];
  memset(p, 0, sizeof *p);
  const char *x = j->src + b * j->itemsize;
  int64_t *vals = j->values ? j->values + c * TD_LEAF_DISTINCT_MAX : NULL;
  switch (j->dtype) {
#define FLOAT_CASE(_, DN, DT, ...) \
  case TD_##DN: chunk_##DN((const DT *)x, e - b, p); break;
    TD_DTYPES_FLOAT(FLOAT_CASE, _)
#undef FLOAT_CASE
#define INT_CASE(_, DN, DT, ...) \
  case TD_##DN: chunk_##DN(j, (const DT *)x, e - b, p, vals); break;
    TD_DTYPES_INTEGRAL(INT_CASE, _)
#undef INT_CASE
    default: break;
  }
}

/* ---- the state ---------------------------------------------------------------------------- */

/* Chan et al.: the finite values of p folded into s. */
static void merge_part(td_leaf_stats *s, const leaf_part *p) {
  s->nan += p->nan, s->inf += p->inf;
  if (p->finite == 0) return;
  if (s->finite == 0) {
    s->min = p->min, s->max = p->max, s->mean = p->mean, s->m2 = p->m2, s->finite = p->finite;
    return;
  }
  const double na = (double)s->finite, nb = (double)p->finite, n = na + nb, d = p->mean - s->mean;
  s->mean += d * (nb / n);
  s->m2 += p->m2 + d * d * (na * nb / n);
  s->finite += p->finite;
  s->min = p->min < s->min ? p->min : s->min;
  s->max = p->max > s->max ? p->max : s->max;
}

TD_EXPORT void td_leaf_stats_init(td_leaf_stats *s, int32_t dtype) {
  if (!s) return;
  memset(s, 0, sizeof *s);
  s->dtype = dtype;
  s->min = s->max = s->mean = NAN;
  s->distinct = td_dtype_is_floating(dtype) ? -1 : 0;
}

TD_EXPORT int32_t td_leaf_stats_add(td_leaf_stats *s, const td_tensor *t) {
  if (!s || !t) return td_fail(TD_EINVAL, "leaf_stats: NULL argument");
  if (!td_check_cpu("leaf_stats", t, "tensor")) return td_last_status();
  if (t->dtype != s->dtype)
    return td_fail(TD_EDTYPE, "leaf_stats: the state counts %s values, got a %s tensor",
                   td_dtype_name(s->dtype), td_dtype_name(t->dtype));
  int64_t n = 1;
  for (int32_t d = 0; d < t->ndim; d++) n *= t->shape[d];
  if (n == 0) return TD_OK;
  td_tensor *src = td_tensor_contiguous(t);
  if (!src) return td_last_status();
  const int64_t chunks = td_parallel_chunks(n, LEAF_GRAIN);
  const bool distinct = !td_dtype_is_floating(t->dtype) && s->distinct >= 0;
  leaf_job j = {.src = td_tensor_ptr(src), .dtype = t->dtype, .itemsize = src->itemsize};
  j.parts = malloc((size_t)chunks * sizeof *j.parts);
  j.values = distinct ? malloc((size_t)chunks * TD_LEAF_DISTINCT_MAX * sizeof *j.values) : NULL;
  if (!j.parts || (distinct && !j.values)) {
    free(j.parts), free(j.values);
    td_tensor_release(src);
    return td_fail(TD_ENOMEM, "leaf_stats: out of memory for %lld chunks", (long long)chunks);
  }
  td_parallel_for(n, LEAF_GRAIN, leaf_range, &j);
  s->count += n;
  for (int64_t c = 0; c < chunks; c++) merge_part(s, &j.parts[c]);
  if (distinct) {
    int64_t merged[TD_LEAF_DISTINCT_MAX];
    for (int64_t c = 0; c < chunks && s->distinct >= 0; c++) {
      const int64_t nd = j.past_max ? -1 : j.parts[c].ndistinct;
      s->distinct = nd < 0 ? -1
                           : union_sets(s->values, s->distinct, j.values + c * TD_LEAF_DISTINCT_MAX, nd, merged);
      if (s->distinct > 0) memcpy(s->values, merged, (size_t)s->distinct * sizeof *merged);
    }
  }
  free(j.parts), free(j.values);
  td_tensor_release(src);
  return TD_OK;
}
