/*
 * reduce.h: what the reduction files share (not part of the ABI).
 *
 * A reduction is described by a td_reduce_desc (reduce.c builds it from the op, dtype and
 * param): one or two passes of typed kernels (reduce_loops.c) that fold input elements
 * into a partial state, how two partial states merge, and how a final state becomes the
 * output element. reduce_engine.c walks the tensor: it splits every reduction at fixed
 * sizes, folds each piece with the kernels, and merges the pieces in order, so results
 * do not depend on the thread count.
 *
 * Accumulators: floating inputs (float16 and bfloat16 included) accumulate in double;
 * integers and bool in int64 (sums and products wrap modulo 2^64, like torch's int64).
 */
#ifndef TD_REDUCE_H
#define TD_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "iter.h"

/* One output element's partial state; which fields mean what depends on the op:
 * a: double value (sum, product, extreme, mean of a piece, max for logsumexp)
 * b: second double (sum of squared deviations for var, sum of exp for logsumexp)
 * i: integer value (int sum/product/extreme, all/any flag)
 * idx: position of the extreme for argmin/argmax (-1: none seen yet). */
typedef struct td_reduce_acc {
  double a, b;
  int64_t i, idx;
} td_reduce_acc;

/* The same fields for w output elements side by side, for kernels that fold whole
 * rows of columns at a time (reductions over an outer dim). */
typedef struct td_reduce_cols {
  double *a, *b;
  int64_t *i, *idx;
} td_reduce_cols;

/* Folds n elements at p (byte stride s) into acc; pos is the position of the first
 * within its reduction (argmin/argmax report it); prm is the op's parameter. */
typedef void (*td_reduce_row_fn)(td_reduce_acc *acc, const char *p, int64_t s, int64_t n,
                                 int64_t pos, double prm);
/* Folds nr rows (byte stride sr, positions pos, pos+1, ...) of w columns (byte stride
 * sc) into column states c[0 .. w). */
typedef void (*td_reduce_block_fn)(const td_reduce_cols *c, const char *p, int64_t sc,
                                   int64_t w, int64_t sr, int64_t nr, int64_t pos, double prm);

typedef struct td_reduce_kernel {
  td_reduce_row_fn row;
  td_reduce_block_fn block;
} td_reduce_kernel;

/* Kernel families: the per-element step of a pass. F_* fold values as double (any
 * input dtype), I_* as int64 (bool and integer dtypes only). */
enum td_reduce_family {
  RF_F_SUM, RF_F_PROD, RF_F_MIN, RF_F_MAX,
  RF_F_SUMSQ, RF_F_SUMABS, RF_F_MAXABS, RF_F_MINABS, RF_F_CNTNZ, RF_F_SUMPOW,
  RF_F_SQDEV,   /* pass 2 of var: b += (x - a)^2 */
  RF_F_LSEEXP,  /* pass 2 of logsumexp: b += exp(x - shift(a)) */
  RF_F_ARGMIN, RF_F_ARGMAX,
  RF_I_SUM, RF_I_PROD, RF_I_MIN, RF_I_MAX, RF_I_ARGMIN, RF_I_ARGMAX,
  RF_ALL, RF_ANY,
  RF_COUNT
};

/* The kernels of a family for an input dtype; both NULL when not generated. */
td_reduce_kernel td_reduce_kernel_for(int32_t family, int32_t dtype);

/* NaN-propagating extremes: once m is NaN it stays NaN (torch's min/max rule). */
#define TD_REDUCE_NMAX(m, v) ((v) > (m) || (v) != (v) ? (v) : (m))
#define TD_REDUCE_NMIN(m, v) ((v) < (m) || (v) != (v) ? (v) : (m))

/* Row kernels written with vector extensions for a few hot (family, dtype) pairs
 * (reduce_vec.c); NULL for the others. td_reduce_kernel_for already prefers them. */
td_reduce_row_fn td_reduce_vec_row(int32_t family, int32_t dtype);
/* The float32 sum's row kernel with AVX2 intrinsics (reduce_sum_avx2.c): the generic
 * kernel's bits, faster; call only where the CPU has AVX2. */
void td_reduce_sum_f32_avx2(td_reduce_acc *acc, const char *p, int64_t s, int64_t n,
                            int64_t pos, double prm);

/* The shift logsumexp subtracts: the max, or 0 when it is infinite (torch's rule, so
 * all -inf gives -inf and any +inf gives +inf) or NaN. */
static inline double td_reduce_lse_shift(double m) { return m - m == 0 ? m : 0.0; }

enum td_reduce_merge { RM_ADD_A, RM_MUL_A, RM_MIN_A, RM_MAX_A, RM_ADD_I, RM_MUL_I, RM_MIN_I,
                       RM_MAX_I, RM_AND_I, RM_OR_I, RM_ARGMIN_A, RM_ARGMAX_A, RM_ARGMIN_I,
                       RM_ARGMAX_I, RM_VAR, RM_LSE };
enum td_reduce_mid { RMID_NONE, RMID_MEAN };
/* How a final state (n elements folded) becomes the output element(s). */
enum td_reduce_fin { RFIN_A, RFIN_I, RFIN_IDX, RFIN_MEAN, RFIN_VAR, RFIN_STD, RFIN_SQRT,
                     RFIN_ROOT, RFIN_LSE, RFIN_VAL_IDX_A, RFIN_VAL_IDX_I };

typedef struct td_reduce_desc {
  int32_t family[2];   /* pass 1 and 2; family[1] < 0: one pass */
  td_reduce_kernel k[2];
  td_reduce_acc init;  /* the identity state */
  int32_t merge, mid, fin;
  int32_t out_dtype[2]; /* result, and indices for RFIN_VAL_IDX_* */
  double param;        /* norm's p, var's correction */
  bool logical_order;  /* walk reduced dims in index order (argmin/argmax positions) */
} td_reduce_desc;

/* The op's name for messages ("sum", "logsumexp"); "reduce" for an unknown op. */
const char *td_reduce_op_name(int32_t op);
/* Fills d for op on an input dtype (param: norm's p, var's correction); on a refused
 * dtype or param sets the message (naming op and dtype) and returns a TD_E* code. */
int32_t td_reduce_describe(int32_t op, int32_t dtype, double param, td_reduce_desc *d);
/* False after td_fail when t is NULL or not in host memory. */
bool td_reduce_check_input(const char *name, const td_tensor *t);

/* Merges from (n_from elements, later in the reduction) into into (n_into elements). */
void td_reduce_merge_acc(const td_reduce_desc *d, td_reduce_acc *into, int64_t n_into,
                         const td_reduce_acc *from, int64_t n_from);
/* Between the passes of a two-pass op (n elements folded so far). */
void td_reduce_mid_acc(const td_reduce_desc *d, td_reduce_acc *acc, int64_t n);
/* Writes the output element(s) for a final state of n elements. */
void td_reduce_store(const td_reduce_desc *d, char *const *out, const td_reduce_acc *acc,
                     int64_t n);

/* Runs the reduction of `in` over the dims flagged in reduced[] into out0 (and out1):
 * outputs are headers of in's ndim with size 1 at the reduced dims. Returns TD_OK or
 * TD_ENOMEM (with the message set). */
int32_t td_reduce_run(const td_reduce_desc *d, const td_tensor *in, const bool *reduced,
                      const td_tensor *out0, const td_tensor *out1);

#endif
