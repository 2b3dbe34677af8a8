/*
 * reduce_cumsum.c: td_cumsum and td_cumprod, the running sum and product along one dim.
 *
 * Floating inputs accumulate in double and round each output to the input dtype;
 * bool and integers accumulate in int64 (wrapping) and give int64, like torch. Each
 * line along dim is summed in index order by one thread, so results never depend on
 * the thread count. Layouts as in the reductions: when dim is the input's fastest dim
 * each line is a strided row; otherwise COL_BLOCK lines advance together, one
 * contiguous row of running sums per step along dim.
 */
#include <stdint.h>
#include <string.h>

#include "../src/parallel.h"
#include "dtypes.h"
#include "reduce.h"

enum { CUM_GRAIN = 32768, COL_BLOCK = 1024 };

/* One line of n elements: input stride si, output stride so (bytes). */
typedef void (*cum_line_fn)(const char *in, int64_t si, char *out, int64_t so, int64_t n);
/* One step of w lines: acc[j] += in[j * sci]; out[j * sco] = acc[j]. acc is double for
 * floating inputs, uint64_t otherwise. */
typedef void (*cum_step_fn)(void *acc, const char *in, int64_t sci, char *out, int64_t sco,
                            int64_t w);

#define CPTR(p) ((const void *)(p))
#define OUT_F(DN, DT, DK, v) CONV_##DK(DN, DT, v)
#define OUT_I(DN, DT, DK, v) ((int64_t)(v))
#define ADD_F(acc, DK, x) ((acc) + (double)LOAD_##DK(x))
#define ADD_I(acc, DK, x) ((acc) + (uint64_t)(int64_t)LOAD_##DK(x))
#define MUL_F(acc, DK, x) ((acc) * (double)LOAD_##DK(x))
#define MUL_I(acc, DK, x) ((acc) * (uint64_t)(int64_t)LOAD_##DK(x)) /* wraps, as int64 */

/* The kernels of one dtype for one op (OPN sum or prod, ID its identity). */
#define DEF_CUM(OPN, ID, DN, DT, DK, AT, OT, ADD, OUT)                                   \
  static void line_##OPN##_##DN(const char *in, int64_t si, char *out, int64_t so,      \
                                int64_t n) {                                             \
    AT acc = ID;                                                                         \
    for (int64_t i = 0; i < n; i++) {                                                    \
      acc = ADD(acc, DK, *(const DT *)CPTR(in + i * si));                                \
      *(OT *)(void *)(out + i * so) = OUT(DN, DT, DK, acc);                              \
    }                                                                                    \
  }                                                                                      \
  static void step_##OPN##_##DN(void *vacc, const char *in, int64_t sci, char *out, int64_t sco, \
                        int64_t w) {                                                     \
    AT *restrict acc = vacc;                                                             \
    if (sci == (int64_t)sizeof(DT) && sco == (int64_t)sizeof(OT)) {                      \
      const DT *restrict x = CPTR(in);                                                   \
      OT *restrict y = (OT *)(void *)out;                                                \
      for (int64_t j = 0; j < w; j++) {                                                  \
        acc[j] = ADD(acc[j], DK, x[j]);                                                  \
        y[j] = OUT(DN, DT, DK, acc[j]);                                                  \
      }                                                                                  \
    } else {                                                                             \
      for (int64_t j = 0; j < w; j++) {                                                  \
        acc[j] = ADD(acc[j], DK, *(const DT *)CPTR(in + j * sci));                       \
        *(OT *)(void *)(out + j * sco) = OUT(DN, DT, DK, acc[j]);                        \
      }                                                                                  \
    }                                                                                    \
  }

#define GEN_CUM(_, DN, DT, DK, ...) \
  GEN_CUM_##DK(sum, 0, ADD, DN, DT) GEN_CUM_##DK(prod, 1, MUL, DN, DT)
#define GEN_CUM_F(OPN, ID, OP, DN, DT) DEF_CUM(OPN, ID, DN, DT, F, double, DT, OP##_F, OUT_F)
#define GEN_CUM_H(OPN, ID, OP, DN, DT) DEF_CUM(OPN, ID, DN, DT, H, double, DT, OP##_F, OUT_F)
#define GEN_CUM_BF(OPN, ID, OP, DN, DT) DEF_CUM(OPN, ID, DN, DT, BF, double, DT, OP##_F, OUT_F)
#define GEN_CUM_I(OPN, ID, OP, DN, DT) DEF_CUM(OPN, ID, DN, DT, I, uint64_t, int64_t, OP##_I, OUT_I)
#define GEN_CUM_B(OPN, ID, OP, DN, DT) DEF_CUM(OPN, ID, DN, DT, B, uint64_t, int64_t, OP##_I, OUT_I)
TD_DTYPES_ALL(GEN_CUM, _)

typedef struct cum_kernel {
  cum_line_fn line;
  cum_step_fn step;
} cum_kernel;
#define CUM_SUM_ENTRY(_, DN, ...) [TD_##DN] = {line_sum_##DN, step_sum_##DN},
#define CUM_PROD_ENTRY(_, DN, ...) [TD_##DN] = {line_prod_##DN, step_prod_##DN},
static const cum_kernel cum_sum_kernels[TD_NUM_DTYPES] = {TD_DTYPES_ALL(CUM_SUM_ENTRY, _)};
static const cum_kernel cum_prod_kernels[TD_NUM_DTYPES] = {TD_DTYPES_ALL(CUM_PROD_ENTRY, _)};

typedef struct cum_plan {
  td_iter ki;          /* every dim but dim: operands input, output */
  int64_t len;         /* size of dim */
  int64_t sdi, sdo;    /* byte strides along dim */
  int64_t ncols, ncb;  /* column mode: ki's innermost dim, its blocks */
  const cum_kernel *kernel; /* the input dtype's, for the op */
  bool prod;                /* accumulators start at 1, not 0 */
  bool float_acc;           /* accumulators are doubles (floating input), else uint64 */
} cum_plan;

static void line_loop(char **ptrs, const int64_t *strides, int64_t n, void *vpl) {
  const cum_plan *pl = vpl;
  const cum_line_fn line = pl->kernel->line;
  for (int64_t i = 0; i < n; i++)
    line(ptrs[0] + i * strides[0], pl->sdi, ptrs[1] + i * strides[1], pl->sdo, pl->len);
}

static void lines(int64_t b, int64_t e, void *vpl) {
  const cum_plan *pl = vpl;
  td_iter_run_range(&pl->ki, b, e, line_loop, (void *)vpl);
}

/* Tasks [b, e): column block t % ncb of ki's outer position t / ncb. */
static void column_blocks(int64_t b, int64_t e, void *vpl) {
  const cum_plan *pl = vpl;
  const int32_t kin = pl->ki.ndim - 1;
  const cum_step_fn step = pl->kernel->step;
  union {
    double f[COL_BLOCK];
    uint64_t i[COL_BLOCK];
  } acc;
  for (int64_t t = b; t < e; t++) {
    const int64_t col0 = (t % pl->ncb) * COL_BLOCK, w = pl->ncols - col0 < COL_BLOCK
                                                          ? pl->ncols - col0 : COL_BLOCK;
    int64_t pos = (t / pl->ncb) * pl->ncols + col0;
    char *p[2] = {pl->ki.data[0], pl->ki.data[1]};
    for (int32_t d = kin; d >= 0; d--) { /* position -> pointers */
      const int64_t c = pos % pl->ki.shape[d];
      pos /= pl->ki.shape[d];
      p[0] += c * pl->ki.strides[0][d];
      p[1] += c * pl->ki.strides[1][d];
    }
    if (!pl->prod) {
      memset(&acc, 0, (size_t)w * sizeof acc.i[0]); /* 0.0 and 0 alike */
    } else if (pl->float_acc) {
      for (int64_t j = 0; j < w; j++) acc.f[j] = 1.0;
    } else {
      for (int64_t j = 0; j < w; j++) acc.i[j] = 1;
    }
    for (int64_t r = 0; r < pl->len; r++)
      step(&acc, p[0] + r * pl->sdi, pl->ki.strides[0][kin], p[1] + r * pl->sdo,
           pl->ki.strides[1][kin], w);
  }
}

static td_tensor *cumulative(const char *name, bool prod, const td_tensor *a, int32_t dim) {
  if (!td_reduce_check_input(name, a)) return NULL;
  const int32_t nd = a->ndim > 0 ? a->ndim : 1;
  if (dim < 0 || dim >= nd)
    return td_fail_null(TD_EINDEX,
                        "%s: dim %d is out of range for a tensor of %d dims (dims are 0-based)",
                        name, (int)dim, (int)a->ndim);
  const int32_t odt = td_dtype_is_floating(a->dtype) ? a->dtype : TD_INT64;
  td_tensor *out = td_tensor_empty(a->ndim, a->shape, odt);
  if (!out) return NULL;
  td_tensor in = *a, ov = *out; /* headers; a 0-dim tensor walks as [1] */
  if (a->ndim == 0) {
    in.ndim = ov.ndim = 1;
    in.shape[0] = ov.shape[0] = 1;
    in.strides[0] = ov.strides[0] = 1;
  }
  cum_plan pl;
  pl.kernel = &(prod ? cum_prod_kernels : cum_sum_kernels)[a->dtype];
  pl.prod = prod;
  pl.float_acc = td_dtype_is_floating(a->dtype);
  pl.len = in.shape[dim];
  pl.sdi = in.strides[dim] * in.itemsize;
  pl.sdo = ov.strides[dim] * ov.itemsize;
  in.shape[dim] = ov.shape[dim] = 1;
  const td_tensor *ops[2] = {&in, &ov};
  td_iter_init(&pl.ki, 2, ops);
  if (pl.ki.numel == 0 || pl.len == 0) return out;
  const int32_t kin = pl.ki.ndim - 1;
  const int64_t ks = pl.ki.strides[0][kin];
  const bool columns = pl.ki.numel > 1 && (ks < pl.sdi || (pl.len < 16 && pl.ki.shape[kin] >= pl.len));
  if (!columns) {
    const int64_t grain = CUM_GRAIN / pl.len > 1 ? CUM_GRAIN / pl.len : 1;
    td_parallel_for(pl.ki.numel, grain, lines, &pl);
    return out;
  }
  pl.ncols = pl.ki.shape[kin];
  pl.ncb = (pl.ncols + COL_BLOCK - 1) / COL_BLOCK;
  const int64_t w = pl.ncols < COL_BLOCK ? pl.ncols : COL_BLOCK;
  const int64_t per_task = pl.len * w, grain = CUM_GRAIN / per_task > 1 ? CUM_GRAIN / per_task : 1;
  td_parallel_for((pl.ki.numel / pl.ncols) * pl.ncb, grain, column_blocks, &pl);
  return out;
}

TD_EXPORT td_tensor *td_cumsum(const td_tensor *a, int32_t dim) {
  return cumulative("cumsum", false, a, dim);
}

TD_EXPORT td_tensor *td_cumprod(const td_tensor *a, int32_t dim) {
  return cumulative("cumprod", true, a, dim);
}
