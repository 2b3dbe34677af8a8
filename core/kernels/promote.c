/*
 * promote.c: result dtypes, by torch's rules.
 *
 * Two dtypes promote through torch's promoteTypes table (below, literally). Several
 * operands follow torch's ResultTypeState: operands with dims, 0-dim tensors and wrapped
 * scalars (Lua numbers) are promoted in three separate groups, then combined so that the
 * later groups only count when their category (bool < integer < floating) is above
 * everything before them. A FLOAT scalar stands for the default dtype (float32), an INT
 * one for int64, a BOOL one for bool.
 */
#include "elementwise.h"

enum {
  B = TD_BOOL, U8 = TD_UINT8, I8 = TD_INT8, I16 = TD_INT16, I32 = TD_INT32, I64 = TD_INT64,
  F16 = TD_FLOAT16, BF = TD_BFLOAT16, F32 = TD_FLOAT32, F64 = TD_FLOAT64
};

/* torch.promote_types(row, column), rows and columns in enum order. The notable entries:
 * uint8 with int8 gives int16 (neither holds the other), float16 with bfloat16 gives
 * float32, and any floating dtype beats any integer one whatever their sizes. */
static const int8_t promote_table[TD_NUM_DTYPES][TD_NUM_DTYPES] = {
    /*         B    U8   I8   I16  I32  I64  F16  BF   F32  F64 */
    /* B   */ {B,   U8,  I8,  I16, I32, I64, F16, BF,  F32, F64},
    /* U8  */ {U8,  U8,  I16, I16, I32, I64, F16, BF,  F32, F64},
    /* I8  */ {I8,  I16, I8,  I16, I32, I64, F16, BF,  F32, F64},
    /* I16 */ {I16, I16, I16, I16, I32, I64, F16, BF,  F32, F64},
    /* I32 */ {I32, I32, I32, I32, I32, I64, F16, BF,  F32, F64},
    /* I64 */ {I64, I64, I64, I64, I64, I64, F16, BF,  F32, F64},
    /* F16 */ {F16, F16, F16, F16, F16, F16, F16, F32, F32, F64},
    /* BF  */ {BF,  BF,  BF,  BF,  BF,  BF,  F32, BF,  F32, F64},
    /* F32 */ {F32, F32, F32, F32, F32, F32, F32, F32, F32, F64},
    /* F64 */ {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64},
};

int32_t td_dtype_category(int32_t dtype) {
  if (dtype == TD_BOOL) return TD_CAT_BOOL;
  return td_dtype_is_floating(dtype) ? TD_CAT_FLOAT : TD_CAT_INT;
}

int32_t td_promote_types(int32_t a, int32_t b) { return promote_table[a][b]; }

/* -1 (no operand yet) promotes to the other side. */
static int32_t promote_skip_none(int32_t a, int32_t b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return promote_table[a][b];
}

/* torch's combine_categories: the higher-priority group wins unless the lower one is of
 * a higher category (floating over integer or bool, integer over bool). */
static int32_t combine(int32_t higher, int32_t lower) {
  if (higher >= 0 && td_dtype_category(higher) == TD_CAT_FLOAT) return higher;
  if (higher == TD_BOOL || (lower >= 0 && td_dtype_category(lower) == TD_CAT_FLOAT))
    return promote_skip_none(higher, lower);
  return higher >= 0 ? higher : lower;
}

void td_promo_init(td_promo *p) { p->dim = p->zero = p->wrapped = -1; }

void td_promo_tensor(td_promo *p, const td_tensor *t) {
  if (t->ndim > 0) p->dim = promote_skip_none(p->dim, t->dtype);
  else p->zero = promote_skip_none(p->zero, t->dtype);
}

void td_promo_scalar(td_promo *p, int32_t kind) {
  static const int32_t as_dtype[] = {TD_BOOL, TD_INT64, TD_FLOAT32};
  p->wrapped = promote_skip_none(p->wrapped, as_dtype[kind]);
}

int32_t td_promo_result(const td_promo *p) {
  int32_t r = combine(p->dim, combine(p->zero, p->wrapped));
  return r >= 0 ? r : TD_INT64;
}

/* ---- public --------------------------------------------------------------------------- */

TD_EXPORT int32_t td_result_type(const td_tensor *a, const td_tensor *b) {
  if (!a || !b) return td_fail(TD_EINVAL, "result_type: the %s tensor is NULL", a ? "second" : "first");
  if (!td_check_dtype("result_type", a->dtype) || !td_check_dtype("result_type", b->dtype))
    return td_last_status();
  td_promo p;
  td_promo_init(&p);
  td_promo_tensor(&p, a);
  td_promo_tensor(&p, b);
  return td_promo_result(&p);
}

TD_EXPORT int32_t td_result_type_scalar(const td_tensor *a, int32_t scalar_kind) {
  if (!a) return td_fail(TD_EINVAL, "result_type_scalar: the tensor is NULL");
  if (!td_check_dtype("result_type_scalar", a->dtype)) return td_last_status();
  if (!td_ew_check_kind("result_type_scalar", scalar_kind)) return td_last_status();
  td_promo p;
  td_promo_init(&p);
  td_promo_tensor(&p, a);
  td_promo_scalar(&p, scalar_kind);
  return td_promo_result(&p);
}
