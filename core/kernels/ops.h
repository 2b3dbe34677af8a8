/*
 * ops.h: the op table (core/include/op_table.h) by code, for the kernels and the
 * containers at dispatch time (not ABI; td_op_name and td_op_category are its exported
 * face, for the CUDA backend and Lua). Arrays, not calls, because td_binary names its
 * op on every call, small ones included.
 */
#ifndef TD_KERNEL_OPS_H
#define TD_KERNEL_OPS_H

#include <stdint.h>

#include "op_table.h"
#include "tensordict.h"

typedef struct td_op_row {
  const char *name;    /* "add" */
  const char *inplace; /* "add_"; NULL for reductions */
  int32_t category;    /* TD_OPCAT_* */
} td_op_row;

extern const td_op_row td_binary_rows[TD_BINARY_COUNT];
extern const td_op_row td_unary_rows[TD_UNARY_COUNT];
extern const td_op_row td_reduce_rows[TD_RED_COUNT];

/* The row of op in the table of kind (TD_OPS_*), or NULL when there is none. */
const td_op_row *td_op_find(int32_t kind, int32_t op);

#endif
