/*
 * elementwise.c: the binary ops' entry points (td_binary, td_binary_scalar and their
 * in-place forms): promotion, the op's own refusals, operand preparation, the run.
 * The typed loops are in elementwise_binary.c; unary ops, clamp, where and masked_fill
 * have their own elementwise_*.c files; shared helpers are in elementwise_util.c.
 *
 * Behaviours decided here (torch 2.x is the reference; checked against it):
 * - Result dtype: torch's type promotion (promote.c). A Lua scalar is a "wrapped number":
 *   it only raises the category (INT scalar: int64, FLOAT: float32, BOOL: bool).
 * - Compute dtype: the promoted dtype, except div and the floating unary ops, which
 *   compute integers and bool in float32. float16 / bfloat16 compute in float and round
 *   once per element on store (torch's floor_divide rounds its intermediates to the half
 *   type, and is then off by one at some large quotients; ours is the floor of the float
 *   quotient). A scalar is first converted to the compute dtype, as torch wraps it in a
 *   tensor: an INT scalar wraps into narrow integers (int8 tensor < 300 compares with
 *   44, as in torch), a FLOAT scalar is rounded, to the half types too, except for a
 *   trailing scalar of mul, div and floor_divide on float16 / bfloat16, which stays a
 *   float as in torch (x * 0.1 multiplies by 0.1f). INT scalars beyond int64 are refused
 *   (torch: OverflowError); INT scalars with a fraction are truncated.
 * - sub refuses any bool operand, tensor or scalar, like torch ("two bool tensors" /
 *   "a bool tensor"); neg refuses bool.
 * - bitwise_* (and, or, xor, left and right shifts) take bool and integers only: floats
 *   are refused (torch: not implemented for 'Float'), shifts refuse bool too. A shift
 *   count < 0 or >= the bit width gives 0 (right shift of a negative signed value: -1),
 *   torch's values; the count is in the compute dtype (an int8 tensor << an int32 one
 *   shifts in int32).
 * - floor_divide, remainder and pow refuse bool as the compute dtype (torch: "not
 *   implemented for 'Bool'"), except bool ** a bool scalar (** False is all true,
 *   ** True a copy, as torch); bool with an integer tensor or scalar computes in int64.
 * - Integer floor_divide / remainder by zero: torch raises ZeroDivisionError, so do we
 *   (TD_EINVAL "integer division by zero"); the loops never divide by zero (no SIGFPE).
 *   The in-place forms compute into a temporary first, so a refused call leaves a
 *   unchanged. MIN // -1 gives MIN and MIN % -1 gives 0 (torch's wrapped results).
 * - Integer pow: a negative scalar exponent is refused ("integers to negative integer
 *   powers are not allowed", torch's scalar check); a negative exponent inside a tensor
 *   gives torch's values: 1 for base 1, +-1 for base -1, else 0. A scalar exponent must
 *   fit the compute dtype (torch's checked conversion: int8 ** 300, float16 ** 1e10 are
 *   refused).
 * - Float pow with a scalar exponent of 2, 3, 0.5, -0.5, -1 or -2 uses torch's rewrites
 *   (x*x, sqrt, 1/x, ...), which differ from pow() at -0 and -inf; not for float16,
 *   which torch sends through pow().
 * - minimum / maximum propagate NaN; on ties they return the first operand (so
 *   minimum(0, -0) is 0), like torch's CPU kernel.
 * - Comparisons compute in the promoted dtype (int64 vs float64 compares as float64).
 *   Logical ops too: nonzero (NaN included) is true in the promoted dtype, so a uint8
 *   tensor and the scalar 256 (0 in uint8) is false, as in torch.
 * - In place: the op computes in the promoted dtype and the result is cast into a's
 *   dtype (int8.add_(int64) wraps); refused when the result's category is above a's
 *   ("result type float32 can't be cast to the desired output type int64"), so
 *   comparisons and logical ops (bool results) are always accepted. b must broadcast to
 *   a's shape: a never grows. When b overlaps a other than element for element, b is
 *   read from a snapshot (torch refuses partial overlap; a copy is friendlier). A target
 *   with a stride-0 dim (an expanded view) is refused, as torch's internal-overlap check
 *   does: the result would depend on the order of the writes.
 * - Results are new row-major tensors (torch would keep a permuted input's layout).
 *   Chunks are fixed-size and every element is written once, so any thread count gives
 *   the same bits; an input read across the grain (a transpose) is walked in tiles.
 *
 * Decided in the other files, listed here so they are in one place:
 * - unary (elementwise_unary.c): exp .. sigmoid give float32 for integers and bool;
 *   neg, abs, relu, floor, ceil, round refuse bool; abs and neg wrap on integers
 *   (abs(int8 -128) is -128); floor / ceil / round leave integers as they are; round is
 *   half to even; relu keeps -0 and NaN; sign(NaN) is 0; isnan / isinf of integers false.
 * - clamp (elementwise_clamp.c): the double bounds carry no kind, so an integral finite
 *   bound counts as an INT scalar and any other as FLOAT (an integer tensor clamped by
 *   0.5 is float32, a bool tensor clamped by integers int64); clamp_ refuses any change
 *   of dtype. A NaN bound gives all NaN. Integer results refuse a min above the dtype's
 *   range or a max below it and saturate other bounds; floating results refuse finite
 *   bounds beyond the dtype's range (1e6 for float16). min > max gives max everywhere.
 * - where (elementwise_where.c): the mask must be bool; a and b promote as operands of a
 *   binary op; a scalar is checked into an integer result (300 into int8 is refused, -1
 *   into uint8 is 255) and rounded into a floating one (1e6 into float16 is inf).
 * - masked_fill (elementwise_where.c): keeps a's dtype; the mask broadcasts to a's shape
 *   (the header's rule; torch's new-tensor form would broadcast a too). The value goes
 *   through torch's checked conversion: 2.7 into an integer tensor truncates to 2, NaN,
 *   infinities and out-of-range values into integers are refused, finite values past a
 *   float dtype's largest (65519 for float16) too. The value carries no kind either:
 *   integral values count as ints, so -1 into uint8 is 255 (torch refuses -1.0).
 *   A mask overlapping a is read from a snapshot.
 */
#include <math.h>

#include "../src/parallel.h"
#include "elementwise.h"
#include "ops.h"

/* The op's result dtype when it computes in c. */
static int32_t result_dtype(int32_t op, int32_t c) {
  return TD_OPCAT_GIVES_BOOL(td_binary_rows[op].category) ? TD_BOOL : c;
}

static bool is_bool_operand(td_operand x) {
  return x.t ? x.t->dtype == TD_BOOL : x.kind == TD_SCALAR_BOOL;
}

/* The dtype the loop runs in, after the op's own refusals; -1 after td_fail. */
static int32_t compute_dtype(const char *call, int32_t op, td_operand x, td_operand y,
                             int32_t promoted) {
  const bool bx = is_bool_operand(x), by = is_bool_operand(y);
  if (op == TD_BINARY_SUB && (bx || by)) {
    if (bx && by)
      return td_fail(TD_EDTYPE, "%s: subtraction with two bool tensors is not supported; use "
                                "logical_xor instead", call);
    return td_fail(TD_EDTYPE, "%s: subtraction with a bool tensor is not supported; to "
                              "invert a mask use logical_not instead", call);
  }
  if (td_binary_rows[op].category == TD_OPCAT_BITWISE) { /* torch: not implemented for 'Float' */
    if (td_dtype_category(promoted) == TD_CAT_FLOAT)
      return td_fail(TD_EDTYPE, "%s: not supported for %s tensors (it takes integer and bool ones)",
                     call, td_dtype_name(promoted));
    if (promoted == TD_BOOL &&
        (op == TD_BINARY_BITWISE_LEFT_SHIFT || op == TD_BINARY_BITWISE_RIGHT_SHIFT))
      return td_fail(TD_EDTYPE, "%s: not supported for bool tensors", call);
    return promoted;
  }
  if ((op == TD_BINARY_HYPOT || op == TD_BINARY_LOGADDEXP) &&
      td_dtype_category(promoted) != TD_CAT_FLOAT) /* torch: not implemented for 'Int' */
    return td_fail(TD_EDTYPE, "%s: not supported for %s tensors (it takes floating point ones)",
                   call, td_dtype_name(promoted));
  if (td_binary_rows[op].category == TD_OPCAT_FLOAT) /* div: integers give float32 */
    return td_dtype_category(promoted) == TD_CAT_FLOAT ? promoted : TD_FLOAT32;
  /* bool ** a bool scalar is allowed: torch fills or copies before looking at dtypes */
  if ((op == TD_BINARY_FLOOR_DIVIDE || op == TD_BINARY_REMAINDER || op == TD_BINARY_POW ||
       op == TD_BINARY_FMOD) &&
      promoted == TD_BOOL && !(op == TD_BINARY_POW && !y.t))
    return td_fail(TD_EDTYPE, "%s: not supported for bool tensors", call);
  if (op == TD_BINARY_POW && !y.t && promoted != TD_BOOL) {
    if (y.kind == TD_SCALAR_INT && y.s <= -1 && td_dtype_category(promoted) != TD_CAT_FLOAT)
      return td_fail(TD_EINVAL, "%s: integers to negative integer powers are not allowed",
                     call);
    /* torch converts a scalar exponent to the tensor's dtype with its checked conversion:
     * int8 ** 300 and float16 ** 1e10 are refused */
    uint64_t bits;
    const double e = y.kind == TD_SCALAR_INT ? trunc(y.s) : y.kind == TD_SCALAR_BOOL ? y.s != 0 : y.s;
    if (!td_ew_fill_value(call, e, promoted, false, &bits)) return td_last_status();
  }
  return promoted;
}

/* float16 / bfloat16 mul, div, floor_divide by a trailing scalar: torch keeps the scalar
 * in float (elementwise_binary.c), so do we. */
static bool float_scalar(int32_t op, td_operand y, int32_t c) {
  return !y.t && (c == TD_FLOAT16 || c == TD_BFLOAT16) &&
         (op == TD_BINARY_MUL || op == TD_BINARY_DIV || op == TD_BINARY_FLOOR_DIVIDE);
}

/* The compute dtype of x op y: the operands promoted, then the op's rules. */
static int32_t plan_dtype(const char *call, int32_t op, td_operand x, td_operand y) {
  td_promo pr;
  td_promo_init(&pr);
  if (x.t) td_promo_tensor(&pr, x.t);
  else td_promo_scalar(&pr, x.kind);
  if (y.t) td_promo_tensor(&pr, y.t);
  else td_promo_scalar(&pr, y.kind);
  return compute_dtype(call, op, x, y, td_promo_result(&pr));
}

/* x op y into a new tensor (a NULL) or into a (in place). */
static int32_t binary_impl(const char *call, int32_t op, td_operand x, td_operand y,
                           td_tensor *a, td_tensor **result) {
  const int32_t c = plan_dtype(call, op, x, y);
  if (c < 0) return c;
  const int32_t o = result_dtype(op, c);
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS];
  if (!td_ew_broadcast(call, x, y, &ndim, shape)) return td_last_status();
  if (a && !td_ew_check_inplace(call, a, ndim, shape, o)) return td_last_status();

  td_ew_ctx ctx;
  td_ew_ctx_init(&ctx);
  td_inner_loop pow_special =
      op == TD_BINARY_POW && !y.t ? td_ew_pow_scalar_loop(c, y.s, &ctx) : NULL;
  const bool fscalar = float_scalar(op, y, c);
  td_inner_loop loop = pow_special ? pow_special
                       : fscalar   ? td_ew_float_scalar_loop(op, c)
                                   : td_ew_binary_loop(op, c);
  if (!loop)
    return td_fail(TD_EDTYPE, "%s: not supported for dtype %s", call, td_dtype_name(c));

  int32_t status = TD_OK;
  td_ew_arg xa, ya;
  xa.owned = ya.owned = NULL;
  td_tensor *out = NULL;
  if (!td_ew_arg_init(&xa, call, x, c) ||
      !td_ew_arg_init(&ya, call, y, fscalar ? TD_FLOAT32 : c)) {
    status = td_last_status();
    goto done;
  }
  /* Write straight into a when the result has its dtype and nothing can fail midway;
   * otherwise into a temporary, copied (and cast) into a at the end. */
  const bool int_division = (op == TD_BINARY_FLOOR_DIVIDE || op == TD_BINARY_REMAINDER ||
                             op == TD_BINARY_FMOD) &&
                            td_dtype_category(c) != TD_CAT_FLOAT;
  const bool direct = a && o == a->dtype && !int_division;
  out = direct ? a : td_tensor_empty(ndim, shape, o);
  if (!out) {
    status = td_last_status();
    goto done;
  }
  td_tensor xe, ye;
  const td_tensor *xv = td_ew_expanded(xa.t, ndim, shape, &xe);
  const td_tensor *yv = td_ew_expanded(ya.t, ndim, shape, &ye);
  if (direct) { /* inputs that overlap a otherwise than element for element: snapshot */
    td_ew_arg *args[2] = {&xa, &ya};
    const td_tensor **views[2] = {&xv, &yv};
    td_tensor *bufs[2] = {&xe, &ye};
    for (int k = 0; k < 2; k++) {
      if (!td_tensors_overlap(a, *views[k])) continue;
      td_tensor *copy = td_tensor_clone(args[k]->t);
      if (!copy) {
        status = td_last_status();
        goto done;
      }
      td_ew_arg_done(args[k]);
      args[k]->t = args[k]->owned = copy;
      *views[k] = td_ew_expanded(copy, ndim, shape, bufs[k]);
    }
  }
  const td_tensor *ops[3] = {out, xv, yv};
  td_ew_run(pow_special ? 2 : 3, ops, loop, &ctx);
  if (atomic_load(&ctx.zero_division)) {
    status = td_fail(TD_EINVAL, "%s: integer division by zero", call);
    goto done;
  }
  if (a && !direct) status = td_tensor_copy_(a, out);
done:
  td_ew_arg_done(&xa);
  td_ew_arg_done(&ya);
  if (out != a) {
    if (status == TD_OK && !a) *result = out;
    else td_tensor_release(out);
  }
  return status;
}

static bool check_op(const char *call, int32_t op) {
  if (op >= 0 && op < TD_BINARY_COUNT) return true;
  td_fail(TD_EINVAL, "%s: unknown binary op %d", call, (int)op);
  return false;
}

/* ---- public --------------------------------------------------------------------------- */

/* The common case of a + b on small tensors: the same dtype (which the op computes in),
 * the same shape, both C-contiguous, one chunk of work. The typed loop runs once over
 * the flat data, which is what binary_impl's iterator ends up doing for these operands,
 * without its promotion, broadcast, operand and iterator set-up (~40% of `a + b` on 100
 * floats). Ops that can fail midway or take another loop (pow, integer division) stay
 * on the general path. False: not this case; true: done, *result the result (NULL when
 * it could not be allocated, the error set). */
static bool binary_same_layout(const char *call, int32_t op, const td_tensor *a,
                               const td_tensor *b, td_tensor **result) {
  if (a->dtype != b->dtype || a->ndim != b->ndim || op == TD_BINARY_POW ||
      op == TD_BINARY_FLOOR_DIVIDE || op == TD_BINARY_REMAINDER || op == TD_BINARY_FMOD)
    return false;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  const int64_t n = td_tensor_numel(a);
  if (n > TD_GRAIN || td_tensor_is_contiguous(a) != 1 || td_tensor_is_contiguous(b) != 1) return false;
  if (plan_dtype(call, op, (td_operand){a, 0, 0}, (td_operand){b, 0, 0}) != a->dtype) return false;
  const td_inner_loop loop = td_ew_binary_loop(op, a->dtype);
  if (!loop) return false;
  td_tensor *out = td_tensor_empty(a->ndim, a->shape, result_dtype(op, a->dtype));
  *result = out;
  if (!out || n == 0) return true;
  td_ew_ctx ctx;
  td_ew_ctx_init(&ctx);
  char *ptrs[3] = {td_tensor_ptr(out), td_tensor_ptr(a), td_tensor_ptr(b)};
  const int64_t strides[3] = {out->itemsize, a->itemsize, b->itemsize};
  loop(ptrs, strides, n, &ctx);
  return true;
}

TD_EXPORT td_tensor *td_binary(int32_t op, const td_tensor *a, const td_tensor *b) {
  if (!check_op("binary", op)) return NULL;
  const char *call = td_binary_rows[op].name;
  if (!td_ew_check_tensor(call, a, "first tensor") || !td_ew_check_tensor(call, b, "second tensor"))
    return NULL;
  td_tensor *r = NULL;
  if (binary_same_layout(call, op, a, b, &r)) return r;
  binary_impl(call, op, (td_operand){a, 0, 0}, (td_operand){b, 0, 0}, NULL, &r);
  return r;
}

TD_EXPORT td_tensor *td_binary_scalar(int32_t op, const td_tensor *a, double s,
                                      int32_t scalar_kind, int32_t scalar_first) {
  if (!check_op("binary_scalar", op)) return NULL;
  const char *call = td_binary_rows[op].name;
  if (!td_ew_check_tensor(call, a, "tensor") || !td_ew_check_kind(call, scalar_kind))
    return NULL;
  td_operand t = {a, 0, 0}, k = {NULL, s, scalar_kind};
  td_tensor *r = NULL;
  binary_impl(call, op, scalar_first ? k : t, scalar_first ? t : k, NULL, &r);
  return r;
}

TD_EXPORT int32_t td_binary_dtypes(int32_t op, const td_tensor *a, const td_tensor *b, double s,
                                   int32_t scalar_kind, int32_t scalar_first, int32_t *compute,
                                   int32_t *result) {
  if (!check_op("binary_dtypes", op)) return td_last_status();
  const char *call = td_binary_rows[op].name;
  if (!a || (!b && !td_ew_check_kind(call, scalar_kind)))
    return td_fail(TD_EINVAL, "%s: the tensor is NULL", call);
  td_operand t = {a, 0, 0}, y = b ? (td_operand){b, 0, 0} : (td_operand){NULL, s, scalar_kind};
  td_operand x = scalar_first && !b ? y : t;
  if (scalar_first && !b) y = t;
  const int32_t c = plan_dtype(call, op, x, y);
  if (c < 0) return c;
  *compute = c;
  *result = result_dtype(op, c);
  return TD_OK;
}

TD_EXPORT int32_t td_binary_(int32_t op, td_tensor *a, const td_tensor *b) {
  if (!check_op("binary_", op)) return td_last_status();
  const char *call = td_binary_rows[op].inplace;
  if (!td_ew_check_tensor(call, a, "tensor") || !td_ew_check_tensor(call, b, "second tensor"))
    return td_last_status();
  return binary_impl(call, op, (td_operand){a, 0, 0}, (td_operand){b, 0, 0}, a, NULL);
}

TD_EXPORT int32_t td_binary_scalar_(int32_t op, td_tensor *a, double s, int32_t scalar_kind) {
  if (!check_op("binary_scalar_", op)) return td_last_status();
  const char *call = td_binary_rows[op].inplace;
  if (!td_ew_check_tensor(call, a, "tensor") || !td_ew_check_kind(call, scalar_kind))
    return td_last_status();
  return binary_impl(call, op, (td_operand){a, 0, 0}, (td_operand){NULL, s, scalar_kind}, a,
                     NULL);
}
