/*
 * histogram.c: td_histc and td_bincount.
 *
 * histc finds each value's bin as torch does, in the input's own arithmetic (float32,
 * float64, or float16 / bfloat16 rounded after each step, as torch's Half does):
 * (x - min) * bins / (max - min), truncated, the last bin closed on the right. Counts are
 * integers until the end (torch adds 1.0 in the input's dtype, which stops counting at
 * 2^11 in float16 and 2^24 in float32), so a count is exact until it is converted.
 * Chunks keep histograms of their own, added in chunk order: integer sums, the same for
 * any thread count. bincount counts the same way; its weighted sums run in order, in the
 * result's dtype, as torch's loop does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "../src/parallel.h"
#include "dtypes.h"
#include "sort_rows.h"

/* ---- chunked integer histograms ------------------------------------------------------- */

/* The grain for n items counted into bins bins: chunks of their own only while their
 * histograms stay small next to the data. */
static int64_t hist_grain(int64_t n, int64_t bins) {
  if (td_get_num_threads() == 1 || n <= TD_GRAIN) return n > 0 ? n : 1;
  const int64_t grain = td_parallel_even_grain(n);
  return bins <= n / 4 / td_parallel_chunks(n, grain) ? grain : n;
}

/* ---- histc ------------------------------------------------------------------------------ */

static inline float rnd_h(float v) { return td_half_to_float(td_float_to_half(v)); }
static inline float rnd_bf(float v) { return td_bfloat16_to_float(td_float_to_bfloat16(v)); }

typedef struct histc_job {
  const void *src;
  double lo, hi;    /* the edges, already in the input's dtype */
  int64_t bins, grain;
  int64_t *counts;  /* chunk c's at c * bins */
  int32_t dtype;
} histc_job;

/* The bin of x (CT arithmetic, each step rounded by RND), -1 outside [lo, hi] and NaN. */
#define HISTC_ROW(ARG, DN, DT, DK, CT, ...)                                               \
  static void histc_##DN(const histc_job *j, int64_t b, int64_t e, int64_t *c) {         \
    const DT *x = j->src;                                                                 \
    const CT lo = (CT)j->lo, hi = (CT)j->hi;                                              \
    const CT width = HISTC_RND_##DK((CT)(hi - lo)), nb = HISTC_RND_##DK((CT)j->bins);     \
    for (int64_t i = b; i < e; i++) {                                                     \
      const CT v = (CT)LOAD_##DK(x[i]);                                                   \
      if (!(v >= lo && v <= hi)) continue;                                                \
      /* torch truncates the quotient; NaN (inf / inf past the float range) and what     \
       * rounds past the last bin are kept inside it */                                   \
      const CT f = HISTC_RND_##DK(HISTC_RND_##DK(HISTC_RND_##DK((CT)(v - lo)) * nb) / width); \
      const int64_t pos = !(f >= 1) ? 0 : f >= (CT)j->bins ? j->bins - 1 : (int64_t)f;    \
      c[pos]++;                                                                           \
    }                                                                                     \
  }
#define HISTC_RND_H(v) rnd_h(v)
#define HISTC_RND_BF(v) rnd_bf(v)
#define HISTC_RND_F(v) (v)
TD_DTYPES_FLOAT(HISTC_ROW, _)
#undef HISTC_ROW

/* float32 and float64 with up to HISTC_WAYS_BINS bins: the same bins, found for a block
 * at a time with GCC/clang vector extensions (the division is most of the work;
 * compilers leave this loop scalar by themselves: reduce_vec.c says why), then counted
 * into four histograms by turns, so that a run of one bin does not wait on its own last
 * increment; values outside (and NaN) land in a spare bin. */
enum { HISTC_BLOCK = 256, HISTC_WAYS_BINS = 1024 };
typedef float hv_f32 __attribute__((vector_size(16)));
typedef int32_t hv_i32 __attribute__((vector_size(16)));
typedef double hv_f64 __attribute__((vector_size(16)));
typedef int64_t hv_i64 __attribute__((vector_size(16)));
typedef int32_t hv_i32x2 __attribute__((vector_size(8)));

/* Lanes of VT: pos = in ? trunc(f >= 1 ? (f < nb ? f : nb - 1) : 0) : spare, as the
 * scalar histc_<dtype> computes it. */
#define HISTC_FAST(T, SUF, VT, VI, PI)                                                    \
  static void histc_fast_##SUF(const histc_job *j, int64_t b, int64_t e, int64_t *c) {   \
    enum { W = (int)(sizeof(VT) / sizeof(T)) };                                           \
    const T *x = j->src;                                                                  \
    const T lo = (T)j->lo, hi = (T)j->hi, width = hi - lo, nb = (T)j->bins;               \
    const int32_t bins = (int32_t)j->bins, spare = bins, stride = bins + 1;               \
    int64_t ways[4 * (HISTC_WAYS_BINS + 1)];                                              \
    int32_t pos[HISTC_BLOCK];                                                             \
    memset(ways, 0, (size_t)(4 * stride) * sizeof *ways);                                 \
    const VT vlo = lo - (VT){0}, vhi = hi - (VT){0}, vw = width - (VT){0};                \
    const VT vnb = nb - (VT){0}, vlast = (nb - 1) - (VT){0}, one = 1 - (VT){0};           \
    const PI vspare = spare - (PI){0};                                                    \
    for (int64_t s = b; s < e; s += HISTC_BLOCK) {                                        \
      const int32_t m = (int32_t)(e - s < HISTC_BLOCK ? e - s : HISTC_BLOCK);             \
      int32_t i = 0;                                                                      \
      for (; i + W <= m; i += W) {                                                        \
        VT v;                                                                             \
        memcpy(&v, x + s + i, sizeof v);                                                  \
        const VT f = (v - vlo) * vnb / vw;                                                \
        const VI below = f < vnb, up = f >= one, in = (v >= vlo) & (v <= vhi);            \
        const VT g = (VT)((((VI)f & below) | ((VI)vlast & ~below)) & up);                 \
        const PI p = __builtin_convertvector(g, PI);                                      \
        const PI inside = __builtin_convertvector(in, PI);                                \
        const PI q = (p & inside) | (vspare & ~inside);                                   \
        memcpy(pos + i, &q, sizeof q);                                                    \
      }                                                                                   \
      for (; i < m; i++) {                                                                \
        const T v = x[s + i];                                                             \
        const T f = (v - lo) * nb / width;                                                \
        const T g = f >= 1 ? (f < nb ? f : nb - 1) : 0;                                  \
        pos[i] = v >= lo && v <= hi ? (int32_t)g : spare;                                 \
      }                                                                                   \
      for (i = 0; i + 4 <= m; i += 4) {                                                   \
        ways[pos[i]]++;                                                                   \
        ways[stride + pos[i + 1]]++;                                                      \
        ways[2 * stride + pos[i + 2]]++;                                                  \
        ways[3 * stride + pos[i + 3]]++;                                                  \
      }                                                                                   \
      for (; i < m; i++) ways[pos[i]]++;                                                  \
    }                                                                                     \
    for (int32_t k = 0; k < bins; k++)                                                    \
      c[k] += ways[k] + ways[stride + k] + ways[2 * stride + k] + ways[3 * stride + k];   \
  }
HISTC_FAST(float, f32, hv_f32, hv_i32, hv_i32)
HISTC_FAST(double, f64, hv_f64, hv_i64, hv_i32x2)
#undef HISTC_FAST

static void histc_range(int64_t b, int64_t e, void *arg) {
  histc_job *j = arg;
  int64_t *c = j->counts + b / j->grain * j->bins;
  memset(c, 0, (size_t)j->bins * sizeof *c);
  if (j->bins <= HISTC_WAYS_BINS && j->dtype == TD_FLOAT32) {
    histc_fast_f32(j, b, e, c);
  } else if (j->bins <= HISTC_WAYS_BINS && j->dtype == TD_FLOAT64) {
    histc_fast_f64(j, b, e, c);
  } else {
#define HISTC_CASE(ARG, DN, ...) \
  case TD_##DN: histc_##DN(j, b, e, c); break;
    switch (j->dtype) {
      TD_DTYPES_FLOAT(HISTC_CASE, _)
      default: break;
    }
#undef HISTC_CASE
  }
}

/* The smallest and largest element of a contiguous float32 / float64 tensor, NaN when
 * one is NaN (torch's aminmax), in one pass: vector lanes of both extremes and of "a NaN
 * was seen", per chunk on the pool, then the chunks'. Other dtypes take the reductions'
 * min and max. */
typedef struct extremes_job {
  const void *src;
  int32_t dtype;
  int64_t grain;
  double *lo, *hi;  /* per chunk */
} extremes_job;

#define EXTREMES_FAST(T, SUF, VT, VI)                                                     \
  static void extremes_##SUF(const T *x, int64_t n, double *lo, double *hi) {            \
    enum { W = (int)(sizeof(VT) / sizeof(T)) };                                           \
    T l = x[0], h = x[0];                                                                 \
    bool nan = false;                                                                     \
    int64_t i = 0;                                                                        \
    if (n >= 2 * W) {                                                                     \
      VT vl, vh, v;                                                                       \
      VI vnan = (VI){0};                                                                  \
      memcpy(&vl, x, sizeof vl);                                                          \
      vh = vl;                                                                            \
      for (i = 0; i + W <= n; i += W) {                                                   \
        memcpy(&v, x + i, sizeof v);                                                      \
        const VI lt = v < vl, gt = v > vh;                                                \
        vnan |= v != v;                                                                   \
        vl = (VT)(((VI)v & lt) | ((VI)vl & ~lt));                                         \
        vh = (VT)(((VI)v & gt) | ((VI)vh & ~gt));                                         \
      }                                                                                   \
      for (int k = 0; k < W; k++) {                                                       \
        nan |= vnan[k] != 0;                                                              \
        l = vl[k] < l ? vl[k] : l;                                                        \
        h = vh[k] > h ? vh[k] : h;                                                        \
      }                                                                                   \
    }                                                                                     \
    for (; i < n; i++) {                                                                  \
      nan |= x[i] != x[i];                                                                \
      l = x[i] < l ? x[i] : l;                                                            \
      h = x[i] > h ? x[i] : h;                                                            \
    }                                                                                     \
    *lo = nan ? NAN : (double)l, *hi = nan ? NAN : (double)h;                             \
  }
EXTREMES_FAST(float, f32, hv_f32, hv_i32)
EXTREMES_FAST(double, f64, hv_f64, hv_i64)
#undef EXTREMES_FAST

static void extremes_range(int64_t b, int64_t e, void *arg) {
  extremes_job *j = arg;
  const int64_t c = b / j->grain;
  if (j->dtype == TD_FLOAT32) {
    extremes_f32((const float *)j->src + b, e - b, &j->lo[c], &j->hi[c]);
  } else {
    extremes_f64((const double *)j->src + b, e - b, &j->lo[c], &j->hi[c]);
  }
}

static bool extremes(const td_tensor *t, double *lo, double *hi) {
  if (t->dtype == TD_FLOAT32 || t->dtype == TD_FLOAT64) {
    const int64_t n = td_tensor_numel(t);
    const int64_t grain = td_parallel_even_grain(n), chunks = td_parallel_chunks(n, grain);
    double *buf = malloc((size_t)chunks * 2 * sizeof *buf);
    if (!buf) return td_fail(TD_ENOMEM, "histc: out of memory"), false;
    extremes_job j = {.src = td_tensor_ptr(t), .dtype = t->dtype, .grain = grain, .lo = buf,
                      .hi = buf + chunks};
    td_parallel_for(n, grain, extremes_range, &j);
    *lo = j.lo[0], *hi = j.hi[0];
    for (int64_t c = 1; c < chunks; c++) {
      if (isnan(j.lo[c]) || isnan(*lo)) {
        *lo = *hi = NAN;
        break;
      }
      *lo = fmin(*lo, j.lo[c]), *hi = fmax(*hi, j.hi[c]);
    }
    free(buf);
    return true;
  }
  td_tensor *mn = td_reduce(TD_RED_MIN, t, NULL, 0, 0, 0);
  td_tensor *mx = mn ? td_reduce(TD_RED_MAX, t, NULL, 0, 0, 0) : NULL;
  if (mx) {
    *lo = td_load_f64(mn->dtype, td_tensor_ptr(mn), 0);
    *hi = td_load_f64(mx->dtype, td_tensor_ptr(mx), 0);
  }
  td_tensor_release(mn);
  td_tensor_release(mx);
  return mx != NULL;
}

/* A double as dtype and back (the edges torch's linspace gives in the input's dtype). */
static double as_dtype(int32_t dtype, double v) {
  td_tensor *one = td_tensor_full(0, NULL, dtype, v);
  const double r = one ? td_load_f64(dtype, td_tensor_data_borrow(one), 0) : v;
  td_tensor_release(one);
  return r;
}

TD_EXPORT td_tensor *td_histc(const td_tensor *t, int64_t bins, double min, double max) {
  if (!t) return td_fail_null(TD_EINVAL, "histc: NULL argument");
  if (!td_check_cpu("histc", t, "tensor")) return NULL;
  if (!td_dtype_is_floating(t->dtype))
    return td_fail_null(TD_EDTYPE, "histc: the input must be floating (%s), got %s",
                        td_dtype_floating_names(), td_dtype_name(t->dtype));
  if (bins <= 0) return td_fail_null(TD_EINVAL, "histc: bins must be > 0, got %lld", (long long)bins);
  td_tensor *src = td_tensor_contiguous(t);
  if (!src) return NULL;
  const int64_t n = td_tensor_numel(src);
  double lo = min, hi = max;
  if (lo == hi && n > 0 && !extremes(src, &lo, &hi)) {
    td_tensor_release(src);
    return NULL;
  }
  if (lo == hi) lo -= 1, hi += 1;
  if (!isfinite(lo) || !isfinite(hi)) {
    td_tensor_release(src);
    return td_fail_null(TD_EINVAL, "histc: range of [%g, %g] is not finite", isnan(lo) ? fabs(lo) : lo,
                        isnan(hi) ? fabs(hi) : hi);
  }
  if (!(lo < hi)) {
    td_tensor_release(src);
    return td_fail_null(TD_EINVAL, "histc: max must be larger than min (got min %g, max %g)", lo, hi);
  }
  const int64_t grain = hist_grain(n, bins), chunks = td_parallel_chunks(n, grain);
  histc_job j = {.src = td_tensor_ptr(src), .lo = as_dtype(t->dtype, lo),
                 .hi = as_dtype(t->dtype, hi), .bins = bins, .grain = grain, .dtype = t->dtype};
  /* the result first: it refuses a bins no memory holds; chunks * bins <= max(n, bins) */
  td_tensor *out = td_tensor_empty(1, &bins, t->dtype);
  j.counts = out ? calloc((size_t)(chunks ? chunks : 1) * (size_t)bins, sizeof *j.counts) : NULL;
  if (out && !j.counts) {
    td_fail(TD_ENOMEM, "histc: out of memory");
    td_tensor_release(out);
    out = NULL;
  }
  if (out) {
    td_parallel_for(n, grain, histc_range, &j);
    for (int64_t c = 1; c < chunks; c++)
      for (int64_t k = 0; k < bins; k++) j.counts[k] += j.counts[c * bins + k];
    char *o = td_tensor_ptr(out);
#define HISTC_OUT(ARG, DN, DT, DK, ...)                                                   \
  case TD_##DN:                                                                         \
    for (int64_t k = 0; k < bins; k++) ((DT *)o)[k] = CONV_##DK(DN, DT, (double)j.counts[k]); \
    break;
    switch (t->dtype) {
      TD_DTYPES_FLOAT(HISTC_OUT, _)
      default: break;
    }
#undef HISTC_OUT
  }
  free(j.counts);
  td_tensor_release(src);
  return out;
}

/* ---- bincount --------------------------------------------------------------------------- */

/* Values below this are counted in the same pass that looks for the others. */
enum { FAST_BINS = 4096 };

typedef struct bincount_job {
  const void *src;
  int32_t dtype;
  int64_t grain, bins;
  int64_t *lo, *hi;     /* per chunk: the extremes (of the values past FAST_BINS) */
  bool *outside;        /* per chunk: a value outside 0 .. FAST_BINS - 1 */
  int64_t *counts;      /* chunk c's at c * bins */
} bincount_job;

#define BINCOUNT_ROW(ARG, DN, DT, DK, ...)                                                  \
  static void bc_extremes_##DN(const DT *x, int64_t b, int64_t e, int64_t *lo, int64_t *hi) { \
    int64_t l = (int64_t)x[b], h = l;                                                       \
    for (int64_t i = b + 1; i < e; i++) {                                                   \
      const int64_t v = (int64_t)x[i];                                                      \
      l = v < l ? v : l;                                                                    \
      h = v > h ? v : h;                                                                    \
    }                                                                                       \
    *lo = l, *hi = h;                                                                       \
  }                                                                                         \
  static void bc_count_##DN(const DT *x, int64_t b, int64_t e, int64_t *c) {               \
    for (int64_t i = b; i < e; i++) c[(int64_t)x[i]]++;                                     \
  }                                                                                         \
  /* counts of 0 .. FAST_BINS - 1, and the extremes of the values outside them */           \
  static bool bc_fast_##DN(const DT *x, int64_t b, int64_t e, int64_t *c, int64_t *lo,     \
                           int64_t *hi) {                                                   \
    int64_t l = INT64_MAX, h = INT64_MIN;                                                   \
    bool outside = false;                                                                   \
    for (int64_t i = b; i < e; i++) {                                                       \
      const int64_t v = (int64_t)x[i];                                                      \
      if ((uint64_t)v < FAST_BINS) {                                                        \
        c[v]++;                                                                             \
      } else {                                                                              \
        outside = true;                                                                     \
        l = v < l ? v : l;                                                                  \
        h = v > h ? v : h;                                                                  \
      }                                                                                     \
    }                                                                                       \
    *lo = l, *hi = h;                                                                       \
    return outside;                                                                         \
  }                                                                                         \
  static void bc_weigh_##DN(const DT *x, int64_t n, const void *w, int32_t wdtype, void *out) { \
    if (wdtype == TD_FLOAT32) {                                                             \
      for (int64_t i = 0; i < n; i++) ((float *)out)[(int64_t)x[i]] += ((const float *)w)[i]; \
    } else {                                                                                \
      for (int64_t i = 0; i < n; i++) ((double *)out)[(int64_t)x[i]] += ((const double *)w)[i]; \
    }                                                                                       \
  }
TD_DTYPES_INT(BINCOUNT_ROW, _)
#undef BINCOUNT_ROW

static void bc_extremes_range(int64_t b, int64_t e, void *arg) {
  bincount_job *j = arg;
  const int64_t c = b / j->grain;
#define BC_CASE(ARG, DN, ...) \
  case TD_##DN: bc_extremes_##DN(j->src, b, e, &j->lo[c], &j->hi[c]); break;
  switch (j->dtype) {
    TD_DTYPES_INT(BC_CASE, _)
    default: break;
  }
#undef BC_CASE
}

static void bc_fast_range(int64_t b, int64_t e, void *arg) {
  bincount_job *j = arg;
  const int64_t c = b / j->grain;
  int64_t *counts = j->counts + c * FAST_BINS;
  memset(counts, 0, FAST_BINS * sizeof *counts);
#define BC_CASE(ARG, DN, ...) \
  case TD_##DN: j->outside[c] = bc_fast_##DN(j->src, b, e, counts, &j->lo[c], &j->hi[c]); break;
  switch (j->dtype) {
    TD_DTYPES_INT(BC_CASE, _)
    default: break;
  }
#undef BC_CASE
}

static void bc_count_range(int64_t b, int64_t e, void *arg) {
  bincount_job *j = arg;
  int64_t *c = j->counts + b / j->grain * j->bins;
  memset(c, 0, (size_t)j->bins * sizeof *c);
#define BC_CASE(ARG, DN, ...) \
  case TD_##DN: bc_count_##DN(j->src, b, e, c); break;
  switch (j->dtype) {
    TD_DTYPES_INT(BC_CASE, _)
    default: break;
  }
#undef BC_CASE
}

TD_EXPORT td_tensor *td_bincount(const td_tensor *t, const td_tensor *weights, int64_t minlength) {
  if (!t) return td_fail_null(TD_EINVAL, "bincount: NULL argument");
  if (!td_check_cpu("bincount", t, "tensor")) return NULL;
  if (weights && !td_check_cpu("bincount", weights, "weights")) return NULL;
  if (t->ndim != 1 || !(t->dtype != TD_BOOL && !td_dtype_is_floating(t->dtype)))
    return td_fail_null(TD_EINVAL, "bincount: the input must be a 1-D tensor of integers, got %d "
                        "dims of %s", (int)t->ndim, td_dtype_name(t->dtype));
  if (weights && (weights->ndim != 1 || weights->shape[0] != t->shape[0]))
    return td_fail_null(TD_ESHAPE, "bincount: weights must be 1-D and as long as the input (%lld)",
                        (long long)t->shape[0]);
  if (minlength < 0)
    return td_fail_null(TD_EINVAL, "bincount: minlength must be >= 0, got %lld", (long long)minlength);
  const int64_t n = t->shape[0];
  td_tensor *src = td_tensor_contiguous(t), *w = NULL, *out = NULL;
  if (!src) return NULL;
  const int32_t wdtype = weights && weights->dtype == TD_FLOAT32 ? TD_FLOAT32 : TD_FLOAT64;
  if (weights) {
    td_tensor *cast = td_tensor_to_dtype(weights, wdtype);
    w = cast ? td_tensor_contiguous(cast) : NULL;
    td_tensor_release(cast);
    if (!w) goto done;
  }
  bincount_job j = {.src = td_tensor_ptr(src), .dtype = src->dtype};
  int64_t bins = minlength;
  bool known = false; /* the extremes found by the fast pass */
  int64_t lo = 0, hi = 0;
  if (n > 0 && !w) { /* counts of small values in one pass, the only one when all are */
    const int64_t pieces = 4 * (int64_t)td_get_num_threads();
    j.grain = (n + pieces - 1) / pieces < 16384 ? 16384 : (n + pieces - 1) / pieces;
    const int64_t chunks = td_parallel_chunks(n, j.grain);
    j.counts = malloc((size_t)(chunks * FAST_BINS) * sizeof *j.counts);
    j.lo = malloc((size_t)chunks * 2 * sizeof *j.lo);
    j.outside = malloc((size_t)chunks);
    if (!j.counts || !j.lo || !j.outside) {
      free(j.counts), free(j.lo), free(j.outside);
      td_fail(TD_ENOMEM, "bincount: out of memory");
      goto done;
    }
    j.hi = j.lo + chunks;
    td_parallel_for(n, j.grain, bc_fast_range, &j);
    bool outside = false;
    lo = INT64_MAX, hi = INT64_MIN;
    for (int64_t c = 0; c < chunks; c++) {
      if (!j.outside[c]) continue;
      outside = true;
      lo = j.lo[c] < lo ? j.lo[c] : lo, hi = j.hi[c] > hi ? j.hi[c] : hi;
    }
    if (!outside) {
      for (int64_t c = 1; c < chunks; c++)
        for (int64_t k = 0; k < FAST_BINS; k++) j.counts[k] += j.counts[c * FAST_BINS + k];
      int64_t top = FAST_BINS;
      while (top > 0 && j.counts[top - 1] == 0) top--;
      bins = top > bins ? top : bins;
      out = td_tensor_empty(1, &bins, TD_INT64);
      if (out) {
        int64_t *o = (int64_t *)td_tensor_ptr(out);
        memcpy(o, j.counts, (size_t)top * sizeof *o);
        memset(o + top, 0, (size_t)(bins - top) * sizeof *o);
      }
    }
    free(j.counts), free(j.lo), free(j.outside);
    j.counts = NULL;
    if (!outside) goto done;
    known = true; /* a value past FAST_BINS or below 0: the general road, extremes known */
  }
  if (n > 0 && !known) {
    j.grain = td_parallel_even_grain(n);
    const int64_t chunks = td_parallel_chunks(n, j.grain);
    j.lo = malloc((size_t)chunks * 2 * sizeof *j.lo);
    if (!j.lo) {
      td_fail(TD_ENOMEM, "bincount: out of memory");
      goto done;
    }
    j.hi = j.lo + chunks;
    td_parallel_for(n, j.grain, bc_extremes_range, &j);
    lo = j.lo[0], hi = j.hi[0];
    for (int64_t c = 1; c < chunks; c++) lo = j.lo[c] < lo ? j.lo[c] : lo, hi = j.hi[c] > hi ? j.hi[c] : hi;
    free(j.lo);
  }
  if (n > 0) {
    if (lo < 0) {
      td_fail(TD_EINVAL, "bincount: the input must hold integers >= 0, got %lld", (long long)lo);
      goto done;
    }
    if (hi == INT64_MAX) {
      td_fail(TD_ENOMEM, "bincount: %lld bins do not fit in memory", (long long)hi);
      goto done;
    }
    if (hi + 1 > bins) bins = hi + 1;
  }
  out = td_tensor_empty(1, &bins, weights ? wdtype : TD_INT64);
  if (!out) goto done;
  memset(td_tensor_ptr(out), 0, (size_t)(bins * out->itemsize));
  if (n == 0) goto done;
  if (w) {
#define BC_CASE(ARG, DN, ...) \
  case TD_##DN: bc_weigh_##DN(j.src, n, td_tensor_ptr(w), wdtype, td_tensor_ptr(out)); break;
    switch (src->dtype) {
      TD_DTYPES_INT(BC_CASE, _)
      default: break;
    }
#undef BC_CASE
    goto done;
  }
  j.bins = bins;
  j.grain = hist_grain(n, bins);
  const int64_t chunks = td_parallel_chunks(n, j.grain);
  if (chunks == 1) {
    j.counts = (int64_t *)td_tensor_ptr(out);
    td_parallel_for(n, j.grain, bc_count_range, &j);
    goto done;
  }
  j.counts = malloc((size_t)(chunks * bins) * sizeof *j.counts);
  if (!j.counts) {
    td_fail(TD_ENOMEM, "bincount: out of memory");
    td_tensor_release(out);
    out = NULL;
    goto done;
  }
  td_parallel_for(n, j.grain, bc_count_range, &j);
  int64_t *o = (int64_t *)td_tensor_ptr(out);
  for (int64_t c = 0; c < chunks; c++)
    for (int64_t k = 0; k < bins; k++) o[k] += j.counts[c * bins + k];
  free(j.counts);
done:
  td_tensor_release(src);
  td_tensor_release(w);
  return out;
}
