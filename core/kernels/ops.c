/*
 * ops.c: the op table (core/include/op_table.h) as arrays by code, the static asserts
 * that tie its rows to the codes of tensordict.h, and td_op_name / td_op_category.
 */
#include "ops.h"

#include "../src/internal.h"

/* Every row sits at its code and every code has a row: a row's position (ROW_<kind>_<op>,
 * counted by the enums below) equals its code, and the counts agree. */
#define POSITION(KIND, SUFFIX, ...) ROW_##KIND##_##SUFFIX,
enum { TD_BINARY_OPS(POSITION, BINARY) ROWS_BINARY };
enum { TD_UNARY_OPS(POSITION, UNARY) ROWS_UNARY };
enum { TD_REDUCE_OPS(POSITION, RED) ROWS_RED };
_Static_assert((int)ROWS_BINARY == (int)TD_BINARY_COUNT, "op_table.h: a row per binary op");
_Static_assert((int)ROWS_UNARY == (int)TD_UNARY_COUNT, "op_table.h: a row per unary op");
_Static_assert((int)ROWS_RED == (int)TD_RED_COUNT, "op_table.h: a row per reduction");
#define AT_CODE(KIND, SUFFIX, ...)                                       \
  _Static_assert((int)ROW_##KIND##_##SUFFIX == (int)TD_##KIND##_##SUFFIX, \
                 "op_table.h: " #SUFFIX "'s row is at its code");
TD_BINARY_OPS(AT_CODE, BINARY)
TD_UNARY_OPS(AT_CODE, UNARY)
TD_REDUCE_OPS(AT_CODE, RED)

#define ROW(KIND, SUFFIX, NAME, CATEGORY) \
  [TD_##KIND##_##SUFFIX] = {NAME, NAME "_", TD_OPCAT_##CATEGORY},
#define REDUCE_ROW(KIND, SUFFIX, NAME, CATEGORY) \
  [TD_##KIND##_##SUFFIX] = {NAME, NULL, TD_OPCAT_##CATEGORY},
const td_op_row td_binary_rows[TD_BINARY_COUNT] = {TD_BINARY_OPS(ROW, BINARY)};
const td_op_row td_unary_rows[TD_UNARY_COUNT] = {TD_UNARY_OPS(ROW, UNARY)};
const td_op_row td_reduce_rows[TD_RED_COUNT] = {TD_REDUCE_OPS(REDUCE_ROW, RED)};

const td_op_row *td_op_find(int32_t kind, int32_t op) {
  switch (kind) {
    case TD_OPS_BINARY: return op >= 0 && op < TD_BINARY_COUNT ? &td_binary_rows[op] : NULL;
    case TD_OPS_UNARY: return op >= 0 && op < TD_UNARY_COUNT ? &td_unary_rows[op] : NULL;
    case TD_OPS_REDUCE: return op >= 0 && op < TD_RED_COUNT ? &td_reduce_rows[op] : NULL;
    default: return NULL;
  }
}

TD_EXPORT const char *td_op_name(int32_t kind, int32_t op, int32_t inplace) {
  const td_op_row *r = td_op_find(kind, op);
  return !r ? NULL : inplace ? r->inplace : r->name;
}

TD_EXPORT int32_t td_op_category(int32_t kind, int32_t op) {
  const td_op_row *r = td_op_find(kind, op);
  return r ? r->category : -1;
}
