/*
 * softmax.c: td_softmax, softmax and log_softmax along one dim, fused.
 *
 * Each line along dim takes three passes over memory in one call: its max; exp(x - max)
 * through the SLEEF exp loop of the unary kernels (elementwise_vecmath.c), summed in
 * double; then softmax scales by 1 / sum and log_softmax writes x - max - log(sum). A
 * composition of reductions and broadcasts would make five passes and two temporaries.
 *
 * The input is made contiguous first, so with shape [outer, len, inner] a line is either
 * contiguous (inner == 1) or a column of a [len, inner] block; columns go COL_BLOCK at a
 * time, each step along dim a contiguous row, so exp stays vectorised. Every line is
 * computed by one thread in a fixed order: results never depend on the thread count.
 * float16 and bfloat16 go through float32, as torch computes them.
 */
#include <math.h>

#include "../src/parallel.h"
#include "elementwise.h"
#include "widest.h"

enum { COL_BLOCK = 256, LANES = 8 };

/* The simple passes (max, subtract, sum, scale) are WIDEST (widest.h); exp already
 * dispatches in elementwise_vecmath.c. */

typedef struct softmax_plan {
  const char *x;          /* contiguous input */
  char *y;                /* contiguous output, same shape */
  int64_t len, inner;     /* size of dim; elements after it */
  int64_t ncb;            /* column blocks per outer position */
  bool log;               /* log_softmax */
  td_inner_loop exp_loop; /* y = exp(x) over a row, for the dtype */
} softmax_plan;

/* w lines, element r of line j at index r * rs + j; T float or double. */
#define DEF_SOFTMAX_BLOCK(SUF, T)                                                           \
  static inline void block_##SUF(const softmax_plan *pl, const T *x, T *y, int64_t rs,     \
                                  int64_t w) {                                            \
    T mx[COL_BLOCK];                                                                        \
    double sum[COL_BLOCK];                                                                  \
    const int64_t len = pl->len;                                                            \
    for (int64_t j = 0; j < w; j++) mx[j] = x[j];                                           \
    for (int64_t r = 1; r < len; r++)                                                       \
      for (int64_t j = 0; j < w; j++) mx[j] = x[r * rs + j] > mx[j] ? x[r * rs + j] : mx[j]; \
    for (int64_t j = 0; j < w; j++) sum[j] = 0.0;                                           \
    const int64_t es[2] = {(int64_t)sizeof(T), (int64_t)sizeof(T)};                         \
    for (int64_t r = 0; r < len; r++) {                                                     \
      T *row = y + r * rs;                                                                  \
      for (int64_t j = 0; j < w; j++) row[j] = x[r * rs + j] - mx[j];                       \
      char *p[2] = {(char *)row, (char *)row};                                              \
      pl->exp_loop(p, es, w, NULL);                                                         \
      for (int64_t j = 0; j < w; j++) sum[j] += row[j];                                     \
    }                                                                                       \
    if (pl->log) {                                                                          \
      for (int64_t j = 0; j < w; j++) mx[j] = (T)(mx[j] + (T)log(sum[j]));                  \
      for (int64_t r = 0; r < len; r++)                                                     \
        for (int64_t j = 0; j < w; j++) y[r * rs + j] = x[r * rs + j] - mx[j];              \
    } else {                                                                                \
      T scale[COL_BLOCK];                                                                   \
      for (int64_t j = 0; j < w; j++) scale[j] = (T)(1.0 / sum[j]);                         \
      for (int64_t r = 0; r < len; r++)                                                     \
        for (int64_t j = 0; j < w; j++) y[r * rs + j] *= scale[j];                          \
    }                                                                                       \
  }                                                                                         \
  /* One contiguous line of len elements; max and sum in LANES independent lanes, so     \
   * the compiler can vectorise them (the order is fixed: results stay reproducible). */  \
  static inline void line_##SUF(const softmax_plan *pl, const T *x, T *y) {                 \
    const int64_t len = pl->len, whole = len - len % LANES;                                 \
    T lane_mx[LANES];                                                                       \
    for (int k = 0; k < LANES; k++) lane_mx[k] = x[0];                                      \
    for (int64_t i = 0; i < whole; i += LANES)                                              \
      for (int k = 0; k < LANES; k++) lane_mx[k] = x[i + k] > lane_mx[k] ? x[i + k] : lane_mx[k]; \
    T mx = lane_mx[0];                                                                      \
    for (int k = 1; k < LANES; k++) mx = lane_mx[k] > mx ? lane_mx[k] : mx;                 \
    for (int64_t i = whole; i < len; i++) mx = x[i] > mx ? x[i] : mx;                       \
    for (int64_t i = 0; i < len; i++) y[i] = x[i] - mx;                                     \
    const int64_t es[2] = {(int64_t)sizeof(T), (int64_t)sizeof(T)};                         \
    char *p[2] = {(char *)y, (char *)y};                                                    \
    pl->exp_loop(p, es, len, NULL);                                                         \
    double lane_sum[LANES] = {0};                                                           \
    for (int64_t i = 0; i < whole; i += LANES)                                              \
      for (int k = 0; k < LANES; k++) lane_sum[k] += y[i + k];                              \
    double sum = 0.0;                                                                       \
    for (int k = 0; k < LANES; k++) sum += lane_sum[k];                                     \
    for (int64_t i = whole; i < len; i++) sum += y[i];                                      \
    if (pl->log) {                                                                          \
      const T shift = (T)(mx + (T)log(sum));                                                \
      for (int64_t i = 0; i < len; i++) y[i] = x[i] - shift;                                \
    } else {                                                                                \
      const T scale = (T)(1.0 / sum);                                                       \
      for (int64_t i = 0; i < len; i++) y[i] *= scale;                                      \
    }                                                                                       \
  }                                                                                         \
  /* Tasks [b, e): lines (inner == 1) or column block t % ncb of outer position t / ncb. */ \
  WIDEST static void run_##SUF(int64_t b, int64_t e, void *vpl) {                           \
    const softmax_plan *pl = vpl;                                                           \
    const T *x = (const T *)(const void *)pl->x;                                            \
    T *y = (T *)(void *)pl->y;                                                              \
    for (int64_t t = b; t < e; t++) {                                                       \
      if (pl->inner == 1) {                                                                 \
        line_##SUF(pl, x + t * pl->len, y + t * pl->len);                                   \
        continue;                                                                           \
      }                                                                                     \
      const int64_t c0 = (t % pl->ncb) * COL_BLOCK;                                         \
      const int64_t w = pl->inner - c0 < COL_BLOCK ? pl->inner - c0 : COL_BLOCK;            \
      const int64_t base = (t / pl->ncb) * pl->len * pl->inner + c0;                        \
      block_##SUF(pl, x + base, y + base, pl->inner, w);                                    \
    }                                                                                       \
  }

DEF_SOFTMAX_BLOCK(f32, float)
DEF_SOFTMAX_BLOCK(f64, double)

/* float16 and bfloat16: through float32 and back (torch computes them in float32). */
static td_tensor *via_float32(const td_tensor *a, int32_t dim, int32_t log) {
  td_tensor *x = td_tensor_to_dtype(a, TD_FLOAT32);
  td_tensor *r = x ? td_softmax(x, dim, log) : NULL;
  td_tensor *out = r ? td_tensor_to_dtype(r, a->dtype) : NULL;
  if (x) td_tensor_release(x);
  if (r) td_tensor_release(r);
  return out;
}

TD_EXPORT td_tensor *td_softmax(const td_tensor *a, int32_t dim, int32_t log) {
  const char *name = log ? "log_softmax" : "softmax";
  if (!td_ew_check_tensor(name, a, "tensor")) return NULL;
  if (!td_dtype_is_floating(a->dtype))
    return td_fail_null(TD_EDTYPE, "%s: expected a floating tensor (%s), got %s", name,
                        td_dtype_floating_names(), td_dtype_name(a->dtype));
  const int32_t nd = a->ndim > 0 ? a->ndim : 1;
  if (dim < 0 || dim >= nd)
    return td_fail_null(TD_EINDEX,
                        "%s: dim %d is out of range for a tensor of %d dims (dims are 0-based)",
                        name, (int)dim, (int)a->ndim);
  if (a->dtype != TD_FLOAT32 && a->dtype != TD_FLOAT64) return via_float32(a, dim, log);
  td_tensor *out = td_tensor_empty(a->ndim, a->shape, a->dtype);
  if (!out) return NULL;
  const int64_t numel = td_tensor_numel(a);
  if (numel == 0) return out;
  td_tensor *x = td_tensor_contiguous(a);
  if (!x) {
    td_tensor_release(out);
    return NULL;
  }
  softmax_plan pl;
  pl.x = td_tensor_data_borrow(x);
  pl.y = td_tensor_data_borrow(out);
  pl.len = a->ndim > 0 ? a->shape[dim] : 1;
  pl.inner = 1;
  for (int32_t d = dim + 1; d < a->ndim; d++) pl.inner *= a->shape[d];
  pl.ncb = (pl.inner + COL_BLOCK - 1) / COL_BLOCK;
  pl.log = log != 0;
  pl.exp_loop = td_ew_vecmath_loop(TD_UNARY_EXP, a->dtype);
  const int64_t outer = numel / (pl.len * pl.inner);
  const int64_t tasks = pl.inner == 1 ? outer : outer * pl.ncb;
  const int64_t per_task = pl.len * (pl.inner < COL_BLOCK ? pl.inner : COL_BLOCK);
  const int64_t grain = TD_GRAIN / per_task > 1 ? TD_GRAIN / per_task : 1;
  td_parallel_for(tasks, grain, a->dtype == TD_FLOAT32 ? run_f32 : run_f64, &pl);
  td_tensor_release(x);
  return out;
}
