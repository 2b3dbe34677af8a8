/*
 * stats.c: running per-feature statistics (count, mean, M2) and the standardisation
 * that uses them, for flow.Normalize and RunningStats.
 *
 * A tensor's leading batch_dims dims index rows; the remaining dims, flattened
 * row-major, are features. One pass over the data:
 *  - the rows x features plane is cut into tiles: row chunks of R rows and feature
 *    blocks of W features, both fixed by the shape alone (never by the thread count);
 *  - each tile runs Welford's update over its rows into its own partial (mean, M2) per
 *    feature, in float64 whatever the input dtype;
 *  - the partials are merged into the running state with Chan et al.'s formula, row
 *    chunk after row chunk in order, so the result is bit-identical for any
 *    T.set_num_threads(n).
 * Rows are walked with the strided iterator (iter.h) over the batch dims, features with
 * a second iterator whose operand 0 is the contiguous float64 state, so feature f of
 * the walk is element f of mean and M2 whatever x's strides are.
 *
 * Non-finite values (Normalize's nan policy, flow/stats.lua):
 *  - td_stats_update_strict folds x in only when every partial state is finite: a NaN
 *    or an infinity poisons the partial of its tile, so the check reads the partials
 *    (rows / R x features values), not x, and costs nothing on the common path. When
 *    one is not finite, x's NaNs and infinities are counted and the state is untouched.
 *  - td_stats_update_finite skips non-finite values, feature by feature, with a count
 *    per feature (int64, the feature shape): the same tiles, partial counts beside the
 *    partial states, merged with Chan's formula per feature. Same bits for any thread
 *    count, as the plain update.
 *  - td_stats_normalize_counted counts them while it normalises (statistics given, not
 *    updated): each row block is counted right after it is read, while it is in cache.
 *  - td_stats_count_nonfinite counts them alone.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/parallel.h"
#include "dtypes.h"

/* Feature block width and the rows a tile takes: a tile is about TD_GRAIN elements,
 * and partial states (rows / R x features x 16 bytes) stay under a quarter of the
 * element count in bytes. */
enum { STATS_FEAT_BLOCK = 512, STATS_MIN_ROWS = 64 };

/* ---- typed inner loops ------------------------------------------------------------ */

/* Welford's step for one row: operands mean, M2 (float64), x; ctx is 1 / k for the
 * row's rank k within its tile. */
#define DEF_WELFORD(_, N, T, K, ...)                                             \
  static void welford_##N(char **p, const int64_t *s, int64_t n, void *ctx) {    \
    const double inv = *(const double *)ctx;                                     \
    for (int64_t i = 0; i < n; i++) {                                            \
      double *m = (double *)(p[0] + i * s[0]), *q = (double *)(p[1] + i * s[1]); \
      double v = (double)LOAD_##K(*(const T *)(p[2] + i * s[2]));                \
      double d = v - *m;                                                         \
      *m += d * inv;                                                             \
      *q += d * (v - *m);                                                        \
    }                                                                            \
  }
TD_DTYPES_ALL(DEF_WELFORD, _)

/* The same over a block of nr rows (byte stride rs) of nf features (byte stride fs),
 * into contiguous states: the common case, one call per run of rows, with a
 * contiguous-features loop the compiler can keep in registers. rank: rows already in
 * the states. */
typedef void (*welford_block_fn)(const char *x, int64_t rs, int64_t fs, int64_t nr, int64_t nf,
                                 double *restrict m, double *restrict q, int64_t rank);
#define DEF_WELFORD_BLOCK(_, N, T, K, ...)                                              \
  static void wblock_##N(const char *x, int64_t rs, int64_t fs, int64_t nr, int64_t nf, \
                         double *restrict m, double *restrict q, int64_t rank) {        \
    for (int64_t r = 0; r < nr; r++) {                                                  \
      const double inv = 1.0 / (double)(rank + r + 1);                                  \
      const char *row = x + r * rs;                                                     \
      if (fs == (int64_t)sizeof(T)) {                                                   \
        const T *xr = (const T *)row;                                                   \
        for (int64_t f = 0; f < nf; f++) {                                              \
          double v = (double)LOAD_##K(xr[f]);                                           \
          double d = v - m[f];                                                          \
          m[f] += d * inv;                                                              \
          q[f] += d * (v - m[f]);                                                       \
        }                                                                               \
      } else {                                                                          \
        for (int64_t f = 0; f < nf; f++) {                                              \
          double v = (double)LOAD_##K(*(const T *)(row + f * fs));                      \
          double d = v - m[f];                                                          \
          m[f] += d * inv;                                                              \
          q[f] += d * (v - m[f]);                                                       \
        }                                                                               \
      }                                                                                 \
    }                                                                                   \
  }
TD_DTYPES_ALL(DEF_WELFORD_BLOCK, _)

/* The same skipping non-finite values, with a count per feature: operands mean, M2,
 * x, count (int64). The division by the feature's own count replaces the shared 1 / k:
 * counts differ between features once a value is skipped. */
#define DEF_WELFORD_FIN(_, N, T, K, ...)                                                 \
  static void welford_fin_##N(char **p, const int64_t *s, int64_t n, void *ctx) {        \
    (void)ctx;                                                                           \
    for (int64_t i = 0; i < n; i++) {                                                    \
      double v = (double)LOAD_##K(*(const T *)(p[2] + i * s[2]));                        \
      if (!isfinite(v)) continue;                                                        \
      double *m = (double *)(p[0] + i * s[0]), *q = (double *)(p[1] + i * s[1]);         \
      int64_t *c = (int64_t *)(p[3] + i * s[3]);                                         \
      double d = v - *m;                                                                 \
      *m += d / (double)++*c;                                                            \
      *q += d * (v - *m);                                                                \
    }                                                                                    \
  }
TD_DTYPES_ALL(DEF_WELFORD_FIN, _)

typedef void (*welford_fin_block_fn)(const char *x, int64_t rs, int64_t fs, int64_t nr,
                                     int64_t nf, double *restrict m, double *restrict q,
                                     int64_t *restrict c);
#define DEF_WELFORD_FIN_BLOCK(_, N, T, K, ...)                                               \
  static void wfblock_##N(const char *x, int64_t rs, int64_t fs, int64_t nr, int64_t nf,     \
                          double *restrict m, double *restrict q, int64_t *restrict c) {     \
    for (int64_t r = 0; r < nr; r++) {                                                       \
      const char *row = x + r * rs;                                                          \
      for (int64_t f = 0; f < nf; f++) {                                                     \
        double v = (double)LOAD_##K(*(const T *)(row + f * fs));                             \
        if (!isfinite(v)) continue;                                                          \
        double d = v - m[f];                                                                 \
        m[f] += d / (double)++c[f];                                                          \
        q[f] += d * (v - m[f]);                                                              \
      }                                                                                      \
    }                                                                                        \
  }
TD_DTYPES_ALL(DEF_WELFORD_FIN_BLOCK, _)

static welford_fin_block_fn welford_fin_block(int32_t dtype) {
  switch (dtype) {
#define CASE(_, N, ...) \
  case TD_##N:          \
    return wfblock_##N;
    TD_DTYPES_ALL(CASE, _)
#undef CASE
  }
  return NULL;
}

static td_inner_loop welford_fin_loop(int32_t dtype) {
  switch (dtype) {
#define CASE(_, N, ...) \
  case TD_##N:          \
    return welford_fin_##N;
    TD_DTYPES_ALL(CASE, _)
#undef CASE
  }
  return NULL;
}

/* NaNs and infinities of a run of n elements (operand 0), into ctx's two counters. */
#define DEF_COUNT_NONFINITE(_, N, T, K, ...)                                           \
  static void nonfinite_##N(char **p, const int64_t *s, int64_t n, void *ctx) {        \
    int64_t *out = ctx, nan = 0, inf = 0;                                              \
    for (int64_t i = 0; i < n; i++) {                                                  \
      double v = (double)LOAD_##K(*(const T *)(p[0] + i * s[0]));                      \
      nan += v != v;                                                                   \
      inf += v - v != v - v && v == v;                                                 \
    }                                                                                  \
    out[0] += nan;                                                                     \
    out[1] += inf;                                                                     \
  }
TD_DTYPES_FLOAT(DEF_COUNT_NONFINITE, _)

/* The non-finite values of a run, together (ctx: one counter), in the compute type:
 * v - v is 0 for a finite v and NaN otherwise, one subtraction and one compare a value,
 * branch-free over a contiguous run so it vectorises (a normalisation counting as it
 * goes re-reads each row block while it is in cache; the rare run that has some is
 * counted again, NaNs apart from infinities, by nonfinite_). Sums in 32 bits, chunk by
 * chunk, keep the vector lanes narrow. */
#define DEF_COUNT_BAD(_, N, T, K, COMP, ...)                                        \
  static void bad_##N(char **p, const int64_t *s, int64_t n, void *ctx) {           \
    int64_t *out = ctx;                                                             \
    for (int64_t i = 0; i < n;) {                                                   \
      int64_t end = n - i > 65536 ? i + 65536 : n;                                  \
      uint32_t bad = 0;                                                             \
      if (s[0] == (int64_t)sizeof(T)) {                                             \
        const T *x = (const T *)p[0];                                               \
        for (; i < end; i++) {                                                      \
          COMP v = LOAD_##K(x[i]), d = v - v;                                       \
          bad += d != d;                                                            \
        }                                                                           \
      } else {                                                                      \
        for (; i < end; i++) {                                                      \
          COMP v = LOAD_##K(*(const T *)(p[0] + i * s[0])), d = v - v;              \
          bad += d != d;                                                            \
        }                                                                           \
      }                                                                             \
      *out += bad;                                                                  \
    }                                                                               \
  }
TD_DTYPES_FLOAT(DEF_COUNT_BAD, _)

static td_inner_loop bad_loop(int32_t dtype) {
  switch (dtype) {
#define CASE(_, N, ...) \
  case TD_##N:          \
    return bad_##N;
    TD_DTYPES_FLOAT(CASE, _)
#undef CASE
  }
  return NULL; /* bool and integers hold only finite values */
}

static td_inner_loop nonfinite_loop(int32_t dtype) {
  switch (dtype) {
#define CASE(_, N, ...) \
  case TD_##N:          \
    return nonfinite_##N;
    TD_DTYPES_FLOAT(CASE, _)
#undef CASE
  }
  return NULL; /* bool and integers hold only finite values */
}

static welford_block_fn welford_block(int32_t dtype) {
  switch (dtype) {
#define CASE(_, N, ...) \
  case TD_##N:          \
    return wblock_##N;
    TD_DTYPES_ALL(CASE, _)
#undef CASE
  }
  return NULL;
}

static td_inner_loop welford_loop(int32_t dtype) {
  switch (dtype) {
#define CASE(_, N, ...) \
  case TD_##N:          \
    return welford_##N;
    TD_DTYPES_ALL(CASE, _)
#undef CASE
  }
  return NULL;
}

/* (x - mean) * scale into a floating output: operands mean, scale (float64), x, out. */
#define DEF_NORM(DN, DT, DK, SN, ST, SK, ...)                                                   \
  static void norm_##DN##_##SN(char **p, const int64_t *s, int64_t n, void *ctx) {              \
    (void)ctx;                                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                           \
      double v = (double)LOAD_##SK(*(const ST *)(p[2] + i * s[2]));                             \
      double r = (v - *(const double *)(p[0] + i * s[0])) * *(const double *)(p[1] + i * s[1]); \
      *(DT *)(p[3] + i * s[3]) = CONV_##DK(DN, DT, r);                                          \
    }                                                                                           \
  }
/* Every (floating output, any input) pair. */
#define FLOAT_OUTS(X) TD_DTYPE_PAIRS(TD_DTYPES_FLOAT, X)
FLOAT_OUTS(DEF_NORM)

/* Its block form: nr rows of nf features of x (strides rs, fs) into out (ors, ofs). */
typedef void (*norm_block_fn)(const char *x, int64_t rs, int64_t fs, char *out, int64_t ors,
                              int64_t ofs, int64_t nr, int64_t nf, const double *restrict m,
                              const double *restrict sc);
#define DEF_NORM_BLOCK(DN, DT, DK, SN, ST, SK, ...)                                             \
  static void nblock_##DN##_##SN(const char *x, int64_t rs, int64_t fs, char *out, int64_t ors, \
                                 int64_t ofs, int64_t nr, int64_t nf, const double *restrict m, \
                                 const double *restrict sc) {                                   \
    for (int64_t r = 0; r < nr; r++) {                                                          \
      const char *row = x + r * rs;                                                             \
      char *orow = out + r * ors;                                                               \
      if (fs == (int64_t)sizeof(ST) && ofs == (int64_t)sizeof(DT)) {                            \
        const ST *xr = (const ST *)row;                                                         \
        DT *o = (DT *)orow;                                                                     \
        for (int64_t f = 0; f < nf; f++) {                                                      \
          double r_ = ((double)LOAD_##SK(xr[f]) - m[f]) * sc[f];                                \
          o[f] = CONV_##DK(DN, DT, r_);                                                         \
        }                                                                                       \
      } else {                                                                                  \
        for (int64_t f = 0; f < nf; f++) {                                                      \
          double r_ = ((double)LOAD_##SK(*(const ST *)(row + f * fs)) - m[f]) * sc[f];          \
          *(DT *)(orow + f * ofs) = CONV_##DK(DN, DT, r_);                                      \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
  }
FLOAT_OUTS(DEF_NORM_BLOCK)

static norm_block_fn norm_block(int32_t out_dtype, int32_t in_dtype) {
#define CASE(DN, DT, DK, SN, ...) \
  if (out_dtype == TD_##DN && in_dtype == TD_##SN) return nblock_##DN##_##SN;
  FLOAT_OUTS(CASE)
#undef CASE
  return NULL;
}

static td_inner_loop norm_loop(int32_t out_dtype, int32_t in_dtype) {
#define CASE(DN, DT, DK, SN, ...) \
  if (out_dtype == TD_##DN && in_dtype == TD_##SN) return norm_##DN##_##SN;
  FLOAT_OUTS(CASE)
#undef CASE
  return NULL;
}

/* ---- the rows x features walk ------------------------------------------------------- */

typedef struct walk {
  td_iter rows;  /* over x's batch dims; its elements are the rows */
  td_iter feats; /* over the features: mean-like state, second state, x, (out) */
  int64_t nrows, nfeat, rows_per, feat_per, nfc;
  int32_t nops;            /* operands of feats */
  td_inner_loop loop;      /* per-row inner loop (features not one strided run) */
  welford_block_fn wblock; /* block forms for features that are one strided run */
  welford_fin_block_fn wfblock;
  norm_block_fn nblock;
  /* update: partial states per row chunk, [chunk][feature] (counts: finite updates) */
  double *part_mean, *part_m2;
  int64_t *part_count;
  bool normalize; /* rows also walks the output (operand 1), feats has 4 operands */
  bool finite;    /* an update skipping non-finite values: feats' operand 3 is the count */
  /* normalize counting x's non-finite values: the counting loop, a counter per task */
  td_inner_loop count;
  int64_t *bad;
} walk;

/* A header over x's leading `ndim` dims (first = 0) or its trailing ones. */
static td_tensor sub_header(const td_tensor *x, int32_t first, int32_t ndim) {
  td_tensor h = *x;
  h.ndim = ndim;
  for (int32_t d = 0; d < ndim; d++) {
    h.shape[d] = x->shape[first + d];
    h.strides[d] = x->strides[first + d];
  }
  return h;
}

/* A contiguous float64 (or int64: counts) header over the feature shape of x (data from
 * `like`). */
static td_tensor state_header(const td_tensor *x, int32_t batch_dims, const td_tensor *like,
                              int32_t dtype) {
  td_tensor h = sub_header(x, batch_dims, x->ndim - batch_dims);
  h.storage = like->storage;
  h.offset = like->offset;
  h.itemsize = 8;
  h.dtype = dtype;
  int64_t st = 1;
  for (int32_t d = h.ndim - 1; d >= 0; d--) {
    h.strides[d] = st;
    st *= h.shape[d];
  }
  return h;
}

typedef struct tile_ctx {
  const walk *w;
  td_iter feats;         /* a copy whose data pointers move row by row */
  int64_t f0, f1;        /* feature range */
  int64_t rank;          /* rows seen in this tile (update) */
  char *state0, *state1; /* where feature 0 of the two states lives */
  char *counts;          /* and of the counts (finite updates) */
  int64_t *bad;          /* this task's non-finite values (a counting normalize) */
} tile_ctx;

/* Features [f0, f1) of one row at x_row (and out_row), when they are not one run. */
static void feature_walk(tile_ctx *t, char *x_row, char *out_row, void *loop_ctx) {
  const walk *w = t->w;
  t->feats.data[0] = t->state0;
  t->feats.data[1] = t->state1;
  t->feats.data[2] = x_row;
  if (w->nops == 4) t->feats.data[3] = w->normalize ? out_row : t->counts;
  td_iter_run_range(&t->feats, t->f0, t->f1, w->loop, loop_ctx);
}

/* The counting loop over operand 2 of the feature walk (x), for rows whose features
 * are not one run. */
typedef struct count_op2 {
  td_inner_loop loop;
  int64_t *bad;
} count_op2;
static void count_x(char **p, const int64_t *s, int64_t n, void *ctx) {
  const count_op2 *c = ctx;
  c->loop(p + 2, s + 2, n, c->bad);
}

/* The row iterator's inner loop: n rows from p[0], byte stride s[0] (for normalize
 * the output rows alongside, p[1] and s[1]). */
static void row_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
  tile_ctx *t = vctx;
  const walk *w = t->w;
  if (t->feats.ndim == 1) { /* features are one strided run: one block call */
    int64_t fs = t->feats.strides[2][0], nf = t->f1 - t->f0;
    double *s0 = (double *)t->state0 + t->f0, *s1 = (double *)t->state1 + t->f0;
    if (w->normalize) {
      int64_t ofs = t->feats.strides[3][0];
      w->nblock(p[0] + t->f0 * fs, s[0], fs, p[1] + t->f0 * ofs, s[1], ofs, n, nf, s0, s1);
      if (w->count) { /* the rows just read, still in cache: one run when they touch */
        char *row = p[0] + t->f0 * fs;
        if (s[0] == nf * fs) {
          w->count(&row, &fs, n * nf, t->bad);
        } else {
          for (int64_t r = 0; r < n; r++, row += s[0]) w->count(&row, &fs, nf, t->bad);
        }
      }
    } else if (w->finite) {
      w->wfblock(p[0] + t->f0 * fs, s[0], fs, n, nf, s0, s1, (int64_t *)t->counts + t->f0);
    } else {
      w->wblock(p[0] + t->f0 * fs, s[0], fs, n, nf, s0, s1, t->rank);
      t->rank += n;
    }
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    char *x_row = p[0] + i * s[0];
    if (w->normalize) {
      feature_walk(t, x_row, p[1] + i * s[1], NULL);
      if (w->count) {
        count_op2 c = {w->count, t->bad};
        td_iter_run_range(&t->feats, t->f0, t->f1, count_x, &c);
      }
    } else if (w->finite) {
      feature_walk(t, x_row, NULL, NULL);
    } else {
      t->rank++;
      double inv = 1.0 / (double)t->rank;
      feature_walk(t, x_row, NULL, &inv);
    }
  }
}

static void run_tile(int64_t task, int64_t end, void *arg) {
  const walk *w = arg;
  for (; task < end; task++) {
    int64_t rc = task / w->nfc, fc = task % w->nfc;
    int64_t r0 = rc * w->rows_per, r1 = r0 + w->rows_per < w->nrows ? r0 + w->rows_per : w->nrows;
    tile_ctx t;
    t.w = w;
    t.feats = w->feats;
    t.f0 = fc * w->feat_per;
    t.f1 = t.f0 + w->feat_per < w->nfeat ? t.f0 + w->feat_per : w->nfeat;
    t.rank = 0;
    if (w->normalize) {
      t.state0 = w->feats.data[0];
      t.state1 = w->feats.data[1];
    } else {
      t.state0 = (char *)(w->part_mean + rc * w->nfeat);
      t.state1 = (char *)(w->part_m2 + rc * w->nfeat);
    }
    t.counts = w->finite ? (char *)(w->part_count + rc * w->nfeat) : NULL;
    t.bad = w->bad ? &w->bad[task] : NULL;
    td_iter_run_range(&w->rows, r0, r1, row_loop, &t);
  }
}

/* Sets up the tiles for x (rows = batch dims). ops of the feature walk: state0-like
 * header, state1-like, x's features, and out's features when out is given, or the
 * counts when counts is (an update skipping non-finite values). */
static void walk_init(walk *w, const td_tensor *x, int32_t batch_dims, const td_tensor *s0,
                      const td_tensor *s1, const td_tensor *out, const td_tensor *counts) {
  memset(w, 0, sizeof *w);
  td_tensor xr = sub_header(x, 0, batch_dims);
  td_tensor xf = sub_header(x, batch_dims, x->ndim - batch_dims);
  td_tensor h0 = state_header(x, batch_dims, s0, TD_FLOAT64),
            h1 = state_header(x, batch_dims, s1, TD_FLOAT64);
  if (counts) {
    td_tensor hc = state_header(x, batch_dims, counts, TD_INT64);
    const td_tensor *rops[1] = {&xr};
    td_iter_init(&w->rows, 1, rops);
    const td_tensor *fops[4] = {&h0, &h1, &xf, &hc};
    td_iter_init(&w->feats, 4, fops);
    w->nops = 4;
    w->finite = true;
  } else if (out) {
    td_tensor orow = sub_header(out, 0, batch_dims),
              of = sub_header(out, batch_dims, out->ndim - batch_dims);
    /* Rows are walked in x's memory order with out alongside (operand 1). */
    const td_tensor *rops[2] = {&xr, &orow};
    td_iter_init(&w->rows, 2, rops);
    const td_tensor *fops[4] = {&h0, &h1, &xf, &of};
    td_iter_init(&w->feats, 4, fops);
    w->nops = 4;
    w->normalize = true;
  } else {
    const td_tensor *rops[1] = {&xr};
    td_iter_init(&w->rows, 1, rops);
    const td_tensor *fops[3] = {&h0, &h1, &xf};
    td_iter_init(&w->feats, 3, fops);
    w->nops = 3;
  }
  w->nrows = w->rows.numel;
  w->nfeat = w->feats.numel;
  /* Normalize has no partial states: whole rows, chunks of about TD_GRAIN elements. */
  int64_t block = out ? w->nfeat : STATS_FEAT_BLOCK, min_rows = out ? 1 : STATS_MIN_ROWS;
  w->feat_per = w->nfeat < block ? w->nfeat : block;
  if (w->feat_per < 1) w->feat_per = 1;
  w->rows_per = TD_GRAIN / w->feat_per;
  if (w->rows_per < min_rows) w->rows_per = min_rows;
  w->nfc = (w->nfeat + w->feat_per - 1) / w->feat_per;
}

static int64_t walk_row_chunks(const walk *w) { return (w->nrows + w->rows_per - 1) / w->rows_per; }

/* ---- argument checks ---------------------------------------------------------------- */

static bool check_rows(const char *call, const td_tensor *x, int32_t batch_dims) {
  if (!x) {
    td_fail(TD_EINVAL, "%s: the input tensor is NULL", call);
    return false;
  }
  if (!td_check_dtype(call, x->dtype) || !td_check_cpu(call, x, "input")) return false;
  if (batch_dims < 0 || batch_dims > x->ndim) {
    char buf[TD_SHAPE_STR];
    td_fail(TD_EINDEX, "%s: batch_dims %d is out of range for an input of shape %s (0..%d)", call,
            (int)batch_dims, td_format_shape(buf, sizeof buf, x->ndim, x->shape), (int)x->ndim);
    return false;
  }
  return true;
}

static int64_t features_of(const td_tensor *x, int32_t batch_dims) {
  int64_t f = 1;
  for (int32_t d = batch_dims; d < x->ndim; d++) f *= x->shape[d];
  return f;
}

/* A state tensor of dtype (float64: mean, M2; int64: counts) with nfeat elements,
 * contiguous (and writable when written). */
static bool check_typed(const char *call, const char *what, const td_tensor *s, int64_t nfeat,
                        bool write, int32_t dtype) {
  if (!s) {
    td_fail(TD_EINVAL, "%s: %s is NULL", call, what);
    return false;
  }
  if (s->dtype != dtype) {
    td_fail(TD_EDTYPE, "%s: %s must be %s, got %s", call, what, td_dtype_name(dtype),
            td_dtype_name(s->dtype) ? td_dtype_name(s->dtype) : "an unknown dtype");
    return false;
  }
  if (!td_check_cpu(call, s, what)) return false;
  if (td_tensor_numel(s) != nfeat) {
    td_fail(TD_ESHAPE, "%s: %s has %lld elements, expected %lld (one per feature)", call, what,
            (long long)td_tensor_numel(s), (long long)nfeat);
    return false;
  }
  if (!td_tensor_is_contiguous(s)) {
    td_fail(TD_EINVAL, "%s: %s must be contiguous", call, what);
    return false;
  }
  if (write && !td_check_writable(call, s)) return false;
  return true;
}

static bool check_state(const char *call, const char *what, const td_tensor *s, int64_t nfeat,
                        bool write) {
  return check_typed(call, what, s, nfeat, write, TD_FLOAT64);
}

/* An int64 count per feature, none negative (finite updates and merges). */
static bool check_counts(const char *call, const char *what, const td_tensor *c, int64_t nfeat,
                         bool write) {
  if (!check_typed(call, what, c, nfeat, write, TD_INT64)) return false;
  const int64_t *p = (const int64_t *)td_tensor_ptr(c);
  for (int64_t f = 0; f < nfeat; f++) {
    if (p[f] < 0) {
      td_fail(TD_EINVAL, "%s: %s holds the negative count %lld", call, what, (long long)p[f]);
      return false;
    }
  }
  return true;
}

static bool distinct(const char *call, const td_tensor *a, const char *an, const td_tensor *b,
                     const char *bn) {
  if (td_tensor_numel(a) == 0 || (!td_same_layout(a, b) && !td_tensors_overlap(a, b))) return true;
  td_fail(TD_EINVAL, "%s: %s and %s share memory", call, an, bn);
  return false;
}

/* ---- public entry points ------------------------------------------------------------ */

/* Folds rows [0, nrc) of partial states (row chunk c holding min(R, N - cR) rows) into
 * the running state, in chunk order (mean NULL: only the rows are counted). */
static void merge_parts(const walk *w, int64_t *count, double *mean, double *m2) {
  int64_t nrc = walk_row_chunks(w), na = *count, nf = w->nfeat;
  for (int64_t c = 0; c < nrc; c++) {
    int64_t nb =
        w->nrows - c * w->rows_per < w->rows_per ? w->nrows - c * w->rows_per : w->rows_per;
    const double *pm = w->part_mean + c * nf, *pq = w->part_m2 + c * nf;
    if (!mean) { /* rows only: the states were merged per feature */
    } else if (na == 0) {
      memcpy(mean, pm, (size_t)nf * sizeof *mean);
      memcpy(m2, pq, (size_t)nf * sizeof *m2);
    } else {
      double n = (double)na + (double)nb;
      double wb = (double)nb / n, wab = (double)na * (double)nb / n;
      for (int64_t f = 0; f < nf; f++) {
        double d = pm[f] - mean[f];
        mean[f] += d * wb;
        m2[f] += pq[f] + d * d * wab;
      }
    }
    na += nb;
  }
  *count = na;
}

/* (mean, m2, counts) of nf features becomes the statistics of both its values and
 * (mb, qb, cb): Chan's formula feature by feature (a feature b saw nothing of stays). */
static void merge_counted(int64_t nf, double *ma, double *qa, int64_t *ca, const double *mb,
                          const double *qb, const int64_t *cb) {
  for (int64_t f = 0; f < nf; f++) {
    int64_t na = ca[f], nb = cb[f];
    if (nb == 0) continue;
    if (na == 0) {
      ma[f] = mb[f];
      qa[f] = qb[f];
    } else {
      double n = (double)na + (double)nb, d = mb[f] - ma[f];
      ma[f] += d * ((double)nb / n);
      qa[f] += qb[f] + d * d * ((double)na * (double)nb / n);
    }
    ca[f] = na + nb;
  }
}

/* The partial states of a finite update (counts per feature), in chunk order. */
static void merge_parts_finite(const walk *w, double *mean, double *m2, int64_t *counts) {
  int64_t nf = w->nfeat;
  for (int64_t c = 0, nrc = walk_row_chunks(w); c < nrc; c++)
    merge_counted(nf, mean, m2, counts, w->part_mean + c * nf, w->part_m2 + c * nf,
                  w->part_count + c * nf);
}

/* Counts x's NaNs (out[0]) and infinities (out[1]), in parallel chunks of TD_GRAIN
 * elements: integer sums, the same whatever the thread count. */
typedef struct count_job {
  td_iter it;
  td_inner_loop loop;
  int64_t (*slots)[2];
} count_job;

static void count_chunks(int64_t task, int64_t end, void *arg) {
  count_job *j = arg;
  for (; task < end; task++) {
    int64_t b = task * TD_GRAIN, e = b + TD_GRAIN < j->it.numel ? b + TD_GRAIN : j->it.numel;
    td_iter_run_range(&j->it, b, e, j->loop, j->slots[task]);
  }
}

static int32_t count_nonfinite(const char *call, const td_tensor *x, int64_t *out) {
  out[0] = out[1] = 0;
  count_job j = {.loop = nonfinite_loop(x->dtype)};
  if (!j.loop || td_tensor_numel(x) == 0) return TD_OK;
  const td_tensor *ops[1] = {x};
  td_iter_init(&j.it, 1, ops);
  int64_t tasks = (j.it.numel + TD_GRAIN - 1) / TD_GRAIN;
  j.slots = calloc((size_t)tasks, sizeof *j.slots);
  if (!j.slots) return td_fail(TD_ENOMEM, "%s: out of memory", call);
  td_parallel_for(tasks, 1, count_chunks, &j);
  for (int64_t t = 0; t < tasks; t++) {
    out[0] += j.slots[t][0];
    out[1] += j.slots[t][1];
  }
  free(j.slots);
  return TD_OK;
}

/* Whether every partial state of an update is finite. */
static bool parts_finite(const walk *w) {
  int64_t n = walk_row_chunks(w) * w->nfeat;
  bool ok = true;
  for (int64_t i = 0; i < n; i++) ok &= isfinite(w->part_mean[i]) && isfinite(w->part_m2[i]);
  return ok;
}

enum { UPDATE_PLAIN, UPDATE_STRICT, UPDATE_FINITE };

/* The three updates: plain; strict (nothing folded in when x holds a NaN or an
 * infinity: nonfinite gets their counts); finite (non-finite values skipped, counts
 * per feature in `counts`). */
static int32_t update(const char *call, const td_tensor *x, int32_t batch_dims, int64_t *count,
                      td_tensor *counts, td_tensor *mean, td_tensor *m2, int mode,
                      int64_t *nonfinite) {
  if (!check_rows(call, x, batch_dims)) return td_last_status();
  if (!count) return td_fail(TD_EINVAL, "%s: count is NULL", call);
  if (*count < 0) return td_fail(TD_EINVAL, "%s: count %lld is negative", call, (long long)*count);
  int64_t nfeat = features_of(x, batch_dims);
  if (!check_state(call, "mean", mean, nfeat, true) || !check_state(call, "m2", m2, nfeat, true) ||
      !distinct(call, mean, "mean", m2, "m2"))
    return td_last_status();
  if (mode == UPDATE_FINITE &&
      (!check_counts(call, "counts", counts, nfeat, true) || !distinct(call, mean, "mean", counts, "counts") ||
       !distinct(call, m2, "m2", counts, "counts")))
    return td_last_status();
  if (mode == UPDATE_STRICT) {
    if (!nonfinite) return td_fail(TD_EINVAL, "%s: nonfinite is NULL", call);
    nonfinite[0] = nonfinite[1] = 0;
  }
  int64_t nrows = 1;
  for (int32_t d = 0; d < batch_dims; d++) nrows *= x->shape[d];
  if (nrows == 0 || nfeat == 0) {
    if (nfeat == 0) *count += nrows; /* no feature to update, but the rows were seen */
    return TD_OK;
  }
  walk w;
  walk_init(&w, x, batch_dims, mean, m2, NULL, mode == UPDATE_FINITE ? counts : NULL);
  if (mode == UPDATE_FINITE) {
    w.loop = welford_fin_loop(x->dtype);
    w.wfblock = welford_fin_block(x->dtype);
  } else {
    w.loop = welford_loop(x->dtype);
    w.wblock = welford_block(x->dtype);
  }
  int64_t nrc = walk_row_chunks(&w);
  size_t n = (size_t)nrc * (size_t)nfeat;
  w.part_mean = calloc(n, sizeof(double));
  w.part_m2 = calloc(n, sizeof(double));
  w.part_count = mode == UPDATE_FINITE ? calloc(n, sizeof(int64_t)) : NULL;
  int32_t st = TD_OK;
  if (!w.part_mean || !w.part_m2 || (mode == UPDATE_FINITE && !w.part_count)) {
    st = td_fail(TD_ENOMEM, "%s: out of memory for %lld partial states", call, (long long)n);
    goto done;
  }
  td_parallel_for(nrc * w.nfc, 1, run_tile, &w);
  if (mode == UPDATE_STRICT && !parts_finite(&w)) {
    /* A partial that is not finite came from a NaN or an infinity (or from finite
     * values whose squares overflow: then none is counted and they are folded in). */
    if ((st = count_nonfinite(call, x, nonfinite))) goto done;
    if (nonfinite[0] + nonfinite[1] > 0) goto done;
  }
  if (mode == UPDATE_FINITE)
    merge_parts_finite(&w, (double *)td_tensor_ptr(mean), (double *)td_tensor_ptr(m2),
                       (int64_t *)td_tensor_ptr(counts));
  int64_t rows = *count;
  merge_parts(&w, &rows, mode == UPDATE_FINITE ? NULL : (double *)td_tensor_ptr(mean),
              mode == UPDATE_FINITE ? NULL : (double *)td_tensor_ptr(m2));
  *count = rows;
done:
  free(w.part_mean);
  free(w.part_m2);
  free(w.part_count);
  return st;
}

TD_EXPORT int32_t td_stats_update(const td_tensor *x, int32_t batch_dims, int64_t *count,
                                  td_tensor *mean, td_tensor *m2) {
  return update("stats_update", x, batch_dims, count, NULL, mean, m2, UPDATE_PLAIN, NULL);
}

TD_EXPORT int32_t td_stats_update_strict(const td_tensor *x, int32_t batch_dims, int64_t *count,
                                         td_tensor *mean, td_tensor *m2, int64_t *nonfinite) {
  return update("stats_update_strict", x, batch_dims, count, NULL, mean, m2, UPDATE_STRICT,
                nonfinite);
}

TD_EXPORT int32_t td_stats_update_finite(const td_tensor *x, int32_t batch_dims, int64_t *count,
                                         td_tensor *counts, td_tensor *mean, td_tensor *m2) {
  return update("stats_update_finite", x, batch_dims, count, counts, mean, m2, UPDATE_FINITE,
                NULL);
}

TD_EXPORT int32_t td_stats_count_nonfinite(const td_tensor *x, int64_t *out) {
  const char *call = "stats_count_nonfinite";
  if (!out) return td_fail(TD_EINVAL, "%s: out is NULL", call);
  if (!check_rows(call, x, 0)) return td_last_status();
  return count_nonfinite(call, x, out);
}

TD_EXPORT int32_t td_stats_merge(int64_t *count, td_tensor *mean, td_tensor *m2, int64_t count_b,
                                 const td_tensor *mean_b, const td_tensor *m2_b) {
  const char *call = "stats_merge";
  if (!count) return td_fail(TD_EINVAL, "%s: count is NULL", call);
  if (*count < 0 || count_b < 0)
    return td_fail(TD_EINVAL, "%s: counts must be >= 0, got %lld and %lld", call, (long long)*count,
                   (long long)count_b);
  if (!mean) return td_fail(TD_EINVAL, "%s: mean is NULL", call);
  int64_t nf = td_tensor_numel(mean);
  if (!check_state(call, "mean", mean, nf, true) || !check_state(call, "m2", m2, nf, true) ||
      !check_state(call, "the other mean", mean_b, nf, false) ||
      !check_state(call, "the other m2", m2_b, nf, false) ||
      !distinct(call, mean, "mean", m2, "m2"))
    return td_last_status();
  if (count_b == 0) return TD_OK;
  double *ma = (double *)td_tensor_ptr(mean), *qa = (double *)td_tensor_ptr(m2);
  const double *mb = (const double *)td_tensor_ptr(mean_b),
               *qb = (const double *)td_tensor_ptr(m2_b);
  if (*count == 0) {
    memmove(ma, mb, (size_t)nf * sizeof *ma);
    memmove(qa, qb, (size_t)nf * sizeof *qa);
  } else {
    double n = (double)*count + (double)count_b;
    double wb = (double)count_b / n, wab = (double)*count * (double)count_b / n;
    for (int64_t f = 0; f < nf; f++) {
      double d = mb[f] - ma[f];
      ma[f] += d * wb;
      qa[f] += qb[f] + d * d * wab;
    }
  }
  *count += count_b;
  return TD_OK;
}

TD_EXPORT int32_t td_stats_merge_counts(td_tensor *counts, td_tensor *mean, td_tensor *m2,
                                        const td_tensor *counts_b, const td_tensor *mean_b,
                                        const td_tensor *m2_b) {
  const char *call = "stats_merge_counts";
  if (!mean) return td_fail(TD_EINVAL, "%s: mean is NULL", call);
  int64_t nf = td_tensor_numel(mean);
  if (!check_state(call, "mean", mean, nf, true) || !check_state(call, "m2", m2, nf, true) ||
      !check_counts(call, "counts", counts, nf, true) ||
      !check_state(call, "the other mean", mean_b, nf, false) ||
      !check_state(call, "the other m2", m2_b, nf, false) ||
      !check_counts(call, "the other counts", counts_b, nf, false) ||
      !distinct(call, mean, "mean", m2, "m2") || !distinct(call, mean, "mean", counts, "counts") ||
      !distinct(call, m2, "m2", counts, "counts"))
    return td_last_status();
  merge_counted(nf, (double *)td_tensor_ptr(mean), (double *)td_tensor_ptr(m2),
                (int64_t *)td_tensor_ptr(counts), (const double *)td_tensor_ptr(mean_b),
                (const double *)td_tensor_ptr(m2_b), (const int64_t *)td_tensor_ptr(counts_b));
  return TD_OK;
}

/* td_stats_normalize, counting x's NaNs and infinities into nonfinite when it is not
 * NULL (tasks count their own, summed after: integers, the same for any thread count). */
static int32_t normalize(const char *call, const td_tensor *x, int32_t batch_dims,
                         const td_tensor *mean, const td_tensor *var, double eps, td_tensor *out,
                         int64_t *nonfinite) {
  if (nonfinite) nonfinite[0] = nonfinite[1] = 0;
  if (!check_rows(call, x, batch_dims)) return td_last_status();
  int64_t nfeat = features_of(x, batch_dims);
  if (!check_state(call, "mean", mean, nfeat, false) ||
      !check_state(call, "var", var, nfeat, false))
    return td_last_status();
  if (!out) return td_fail(TD_EINVAL, "%s: out is NULL", call);
  if (!td_check_cpu(call, out, "output") || !td_check_writable(call, out)) return td_last_status();
  if (out->ndim != x->ndim ||
      memcmp(out->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim) != 0) {
    char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
    return td_fail(TD_ESHAPE, "%s: out has shape %s, the input %s", call,
                   td_format_shape(a, sizeof a, out->ndim, out->shape),
                   td_format_shape(b, sizeof b, x->ndim, x->shape));
  }
  td_inner_loop loop = norm_loop(out->dtype, x->dtype);
  if (!loop)
    return td_fail(TD_EDTYPE, "%s: the output must be a floating dtype, got %s", call,
                   td_dtype_name(out->dtype) ? td_dtype_name(out->dtype) : "an unknown dtype");
  if (td_tensors_overlap(out, x))
    return td_fail(TD_EINVAL, "%s: out overlaps the input in a different layout", call);
  if (!(eps >= 0)) return td_fail(TD_EINVAL, "%s: eps must be >= 0, got %g", call, eps);
  if (td_tensor_numel(x) == 0) return TD_OK;
  /* scale = 1 / sqrt(var + eps), once per feature. */
  double *scale = malloc((size_t)nfeat * sizeof *scale);
  if (!scale) return td_fail(TD_ENOMEM, "%s: out of memory", call);
  const double *v = (const double *)td_tensor_ptr(var);
  for (int64_t f = 0; f < nfeat; f++) scale[f] = 1.0 / sqrt(v[f] + eps);
  td_tensor sc = *var;
  walk w;
  walk_init(&w, x, batch_dims, mean, &sc, out, NULL);
  w.feats.data[1] = (char *)scale;
  w.loop = loop;
  w.nblock = norm_block(out->dtype, x->dtype);
  int64_t tasks = walk_row_chunks(&w) * w.nfc;
  w.count = nonfinite ? bad_loop(x->dtype) : NULL;
  if (w.count && !(w.bad = calloc((size_t)tasks, sizeof *w.bad))) {
    free(scale);
    return td_fail(TD_ENOMEM, "%s: out of memory", call);
  }
  td_parallel_for(tasks, 1, run_tile, &w);
  int64_t bad = 0;
  for (int64_t t = 0; w.bad && t < tasks; t++) bad += w.bad[t];
  free(w.bad);
  free(scale);
  /* some: NaNs apart from infinities, for the message (a second pass, rare) */
  return bad > 0 ? count_nonfinite(call, x, nonfinite) : TD_OK;
}

TD_EXPORT int32_t td_stats_normalize(const td_tensor *x, int32_t batch_dims, const td_tensor *mean,
                                     const td_tensor *var, double eps, td_tensor *out) {
  return normalize("stats_normalize", x, batch_dims, mean, var, eps, out, NULL);
}

TD_EXPORT int32_t td_stats_normalize_counted(const td_tensor *x, int32_t batch_dims,
                                             const td_tensor *mean, const td_tensor *var,
                                             double eps, td_tensor *out, int64_t *nonfinite) {
  const char *call = "stats_normalize_counted";
  if (!nonfinite) return td_fail(TD_EINVAL, "%s: nonfinite is NULL", call);
  return normalize(call, x, batch_dims, mean, var, eps, out, nonfinite);
}
