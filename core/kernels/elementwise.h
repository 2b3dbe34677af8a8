/*
 * elementwise.h: what the elementwise files share (promote.c, elementwise*.c). Not ABI.
 *
 * The split: promote.c decides result dtypes; elementwise_util.c holds the checks and
 * operand preparation every entry point repeats (scalars as 0-dim tensors, overlap
 * snapshots, fill-value conversions); elementwise_run.c walks the operands (threads,
 * tiles); elementwise_binary.c holds the binary typed loops; elementwise.c (binary),
 * elementwise_unary.c (loops and entry points), elementwise_clamp.c and
 * elementwise_where.c hold the public entry points.
 */
#ifndef TD_ELEMENTWISE_H
#define TD_ELEMENTWISE_H

#include <stdatomic.h>

#include "dtypes.h"
#include "iter.h"

/* ---- promotion (promote.c) ---------------------------------------------------------- */

enum td_category { TD_CAT_BOOL = 0, TD_CAT_INT = 1, TD_CAT_FLOAT = 2 };

int32_t td_dtype_category(int32_t dtype);
/* torch.promote_types for two dtypes. */
int32_t td_promote_types(int32_t a, int32_t b);

/* torch's ResultTypeState: the running promotion of operands with dims, 0-dim tensors and
 * wrapped (Lua) scalars, kept apart because the latter two only raise the category. */
typedef struct td_promo {
  int32_t dim, zero, wrapped; /* -1: no operand of that kind yet */
} td_promo;

void td_promo_init(td_promo *p);
void td_promo_tensor(td_promo *p, const td_tensor *t);
void td_promo_scalar(td_promo *p, int32_t kind);
/* The result dtype; TD_INT64 when nothing was added (never happens in practice). */
int32_t td_promo_result(const td_promo *p);

/* ---- shared helpers (elementwise_util.c) ------------------------------------------ */

/* One operand: a tensor, or (t NULL) a Lua scalar s of td_scalar_kind kind. */
typedef struct td_operand {
  const td_tensor *t;
  double s;
  int32_t kind;
} td_operand;

/* Per-call state handed to the inner loops through ctx. */
typedef struct td_ew_ctx {
  atomic_int zero_division; /* set by integer floor_divide / remainder on a zero divisor */
  int32_t code;             /* loop-specific: the special form of pow with a scalar exponent */
  double lo, hi;            /* clamp bounds in the compute type (floats) */
  int64_t ilo, ihi;         /* clamp bounds (integers) */
  uint64_t bits;            /* masked_fill: the value's stored bytes */
} td_ew_ctx;

void td_ew_ctx_init(td_ew_ctx *c);
/* Called by a loop that met a zero integer divisor (once per row at most). */
void td_ew_note_zero_division(void *ctx);

bool td_ew_check_kind(const char *call, int32_t kind);
/* Rejects a NULL tensor, an unknown dtype code or device memory, naming the tensor's
 * role (what) in the message. */
bool td_ew_check_tensor(const char *call, const td_tensor *t, const char *what);

/* An operand as a loop reads it during one call: t, in the compute dtype. A tensor of
 * that dtype is used as it is (no reference, no allocation); another is cast into owned,
 * which td_ew_arg_done releases; a Lua scalar becomes a 0-dim tensor over bytes inside
 * the arg (torch's wrapping: an INT scalar goes through int64, then wraps into narrower
 * integers, a FLOAT one is rounded, a BOOL one is 0 or 1), no allocation either. The arg
 * must stay where it is while t is used (t may point into it). */
typedef struct td_ew_arg {
  const td_tensor *t;
  td_tensor *owned;
  td_tensor scalar;
  td_storage scalar_storage;
  uint64_t scalar_bits;
} td_ew_arg;
/* False after td_fail (an INT scalar beyond int64, a failed cast). */
bool td_ew_arg_init(td_ew_arg *arg, const char *call, td_operand x, int32_t dtype);
/* A 0-dim tensor of dtype over the value's stored bytes (8 at most), inside the arg. */
void td_ew_arg_bits(td_ew_arg *arg, int32_t dtype, uint64_t bits);
void td_ew_arg_done(td_ew_arg *arg);

/* torch's checked conversion of a fill value (masked_fill, where's scalars, clamp
 * bounds) into dtype, written as stored bytes into *bits. Integral values follow
 * Python int rules (a negative value wraps into uint8 when -v <= 255), others Python
 * float rules (truncation toward zero, refused when out of range); float targets
 * refuse finite values beyond their largest finite value unless round_float is set. */
bool td_ew_fill_value(const char *call, double v, int32_t dtype, bool round_float,
                      uint64_t *bits);


/* The broadcast shape of x and y (a scalar operand counts as 0-dim) into ndim, shape. */
bool td_ew_broadcast(const char *call, td_operand x, td_operand y, int32_t *ndim,
                     int64_t *shape);
/* A tensor an op_ may write: writable storage, and no two elements at one address (a
 * stride-0 dim, as torch's internal-overlap check; results would depend on the order). */
bool td_ew_check_writable(const char *call, const td_tensor *a);
/* In-place checks shared by the binary and unary op_ forms: td_ew_check_writable, the
 * broadcast shape of the operands equal to a's own, and the result dtype's category not
 * above a's. */
bool td_ew_check_inplace(const char *call, const td_tensor *a, int32_t ndim,
                         const int64_t *shape, int32_t result_dtype);

/* Runs loop over ops[0..nops) (ops[0] the output, the others already expanded to its
 * shape) with td_iter_run_parallel, in tiles when an input would be read across the
 * grain (elementwise_run.c). */
void td_ew_run(int32_t nops, const td_tensor *const *ops, td_inner_loop loop, void *ctx);
/* Expands t to shape into *out (a caller-owned view); t must broadcast (checked before). */
void td_ew_expand(const td_tensor *t, int32_t ndim, const int64_t *shape, td_tensor *out);
/* t as an operand of shape: t itself when it has that shape, else its expansion written
 * into *buf. */
const td_tensor *td_ew_expanded(const td_tensor *t, int32_t ndim, const int64_t *shape,
                                td_tensor *buf);


/* ---- typed loops ---------------------------------------------------------------------- */

/* Binary op on inputs of dtype (operands 1 and 2) into operand 0, of dtype or bool for
 * comparisons and logical ops; NULL when the op does not exist for dtype. */
td_inner_loop td_ew_binary_loop(int32_t op, int32_t dtype);
/* pow(x, exponent) for a Lua scalar exponent, operand 1 into operand 0: torch's special
 * forms (x*x, sqrt, 1/x, ...; bool ** False and ** True), with ctx->code set to the one
 * to use; NULL when there is none (then the general binary loop applies). */
td_inner_loop td_ew_pow_scalar_loop(int32_t dtype, double exponent, td_ew_ctx *ctx);
/* mul, div, floor_divide of a float16 / bfloat16 tensor (operand 1) by a 0-dim float32
 * scalar (operand 2), as torch computes them; NULL for other ops and dtypes. */
td_inner_loop td_ew_float_scalar_loop(int32_t op, int32_t dtype);
/* Unary op on operand 1 (dtype) into operand 0 (dtype, or bool for the predicates);
 * NULL when the op is an identity or a constant for dtype, or refused. */
td_inner_loop td_ew_unary_loop(int32_t op, int32_t dtype);
/* exp .. sigmoid of float32 / float64 through SLEEF; NULL for other ops and dtypes. */
td_inner_loop td_ew_vecmath_loop(int32_t op, int32_t dtype);

/* ---- building blocks of the typed loops ------------------------------------------------
 * The loops are generated over the dtype table (core/include/dtype_table.h): every loop
 * computes in its dtype's compute type, loads and stores with LOAD_<kind> / STORE_<kind>
 * (dtypes.h), and calls element functions named e_<op>_<family>; the dtypes each op
 * takes are the table's subsets (TD_DTYPES_ALL, _NUM, _SINT, _FLOAT, _HALF). */

/* A loop where the output may be one of the inputs (in-place ops): every element is read
 * before it is written, so there is no dependence between iterations and the compiler
 * may vectorise without the restrict qualifiers the out-of-place loops use. */
#if defined(__clang__)
#define EW_IVDEP _Pragma("clang loop vectorize(assume_safety)")
/* clang warns where the hint cannot vectorise (half conversions, integer division): the
 * hint only states a fact about the memory, nothing to fix there. */
#pragma clang diagnostic ignored "-Wpass-failed"
#elif defined(__GNUC__)
#define EW_IVDEP _Pragma("GCC ivdep")
#else
#define EW_IVDEP
#endif

#endif
