/*
 * dtype_table.h: the one table of what each dtype is, as X-macros (not ABI: no FFI
 * declarations, not installed). It sits in core/include because every C library of the
 * project walks it: libtensordict's src, kernels and dict, and the CUDA (core/cuda) and
 * MPI (core/mpi) backends, which reach nothing else of libtensordict but its ABI.
 *
 * One row per dtype,
 *   X(ARG, suffix, stored, kind, compute, family, name, alias, method, lowest, max, digits):
 *  - suffix:  the enum name after TD_ (tensordict.h keeps the codes themselves as a plain
 *             enum, which LuaJIT's FFI reads);
 *  - stored:  the C type of one element in memory (float16 / bfloat16 as their bits);
 *  - kind:    how an element loads and stores (kernels/dtypes.h: LOAD_<kind>,
 *             STORE_<kind>, CONV_<kind>; the CUDA and MPI backends map kinds to their
 *             own types): B bool, I integer, H half, BF bfloat16, F float and double;
 *  - compute: the type elementwise loops compute in (float for the 16-bit floats);
 *  - family:  the suffix of elementwise element functions, one per compute type
 *             (e_add_FL for float, e_add_DB for double, e_add_INT8, ...);
 *  - name:    the canonical name (td_dtype_name); torch's is "torch." name;
 *  - alias:   torch's other spelling of the dtype (torch.float is float32), "" for none;
 *  - method:  torch's Tensor method that casts to it (t:float(), t:byte());
 *  - lowest, max: the finite range (std::numeric_limits' lowest() and max());
 *  - digits:  the binary digits of exact integers (numeric_limits' digits): floating
 *             types hold every integer up to 2^digits in magnitude.
 * ARG... comes first, unchanged: an op name, or a row's own columns when one table is
 * walked inside another (kernels/dtypes.h's TD_DTYPE_PAIRS).
 *
 * The rows are grouped by category, in enum order; every subset a kernel needs is a
 * union of groups (below). Adding a dtype is one row in its group and its code in the
 * enum. Pass at least one ARG (write _ when unused): C11 wants one for the "...".
 * Everything that lists dtypes derives from these rows (scripts/check_tables.sh fails on
 * a list written by hand elsewhere).
 */
#ifndef TD_DTYPE_TABLE_H
#define TD_DTYPE_TABLE_H

#include <float.h>
#include <stdint.h>

#define TD_DTYPES_BOOL(X, ...) \
  X(__VA_ARGS__, BOOL, uint8_t, B, uint8_t, BOOL, "bool", "", "bool", 0, 1, 1)
#define TD_DTYPES_UINT(X, ...) \
  X(__VA_ARGS__, UINT8, uint8_t, I, uint8_t, UINT8, "uint8", "", "byte", 0, UINT8_MAX, 8)
#define TD_DTYPES_SINT(X, ...)                                                               \
  X(__VA_ARGS__, INT8, int8_t, I, int8_t, INT8, "int8", "", "char", INT8_MIN, INT8_MAX, 7)   \
  X(__VA_ARGS__, INT16, int16_t, I, int16_t, INT16, "int16", "short", "short", INT16_MIN,    \
    INT16_MAX, 15)                                                                           \
  X(__VA_ARGS__, INT32, int32_t, I, int32_t, INT32, "int32", "int", "int", INT32_MIN,        \
    INT32_MAX, 31)                                                                           \
  X(__VA_ARGS__, INT64, int64_t, I, int64_t, INT64, "int64", "long", "long", INT64_MIN,      \
    INT64_MAX, 63)
/* The 16-bit floats: stored as bits, computed in float. */
#define TD_DTYPES_HALF(X, ...)                                                               \
  X(__VA_ARGS__, FLOAT16, uint16_t, H, float, FL, "float16", "half", "half", -65504.0,       \
    65504.0, 11)                                                                             \
  X(__VA_ARGS__, BFLOAT16, uint16_t, BF, float, FL, "bfloat16", "", "bfloat16", -0x1.FEp127, \
    0x1.FEp127, 8)
#define TD_DTYPES_CFLOAT(X, ...)                                                             \
  X(__VA_ARGS__, FLOAT32, float, F, float, FL, "float32", "float", "float", -FLT_MAX,        \
    FLT_MAX, FLT_MANT_DIG)                                                                   \
  X(__VA_ARGS__, FLOAT64, double, F, double, DB, "float64", "double", "double", -DBL_MAX,    \
    DBL_MAX, DBL_MANT_DIG)

/* ---- subsets ------------------------------------------------------------------------ */

#define TD_DTYPES_FLOAT(X, ...) TD_DTYPES_HALF(X, __VA_ARGS__) TD_DTYPES_CFLOAT(X, __VA_ARGS__)
#define TD_DTYPES_INT(X, ...) TD_DTYPES_UINT(X, __VA_ARGS__) TD_DTYPES_SINT(X, __VA_ARGS__)
/* bool and the integers: what folds exactly in int64 */
#define TD_DTYPES_INTEGRAL(X, ...) TD_DTYPES_BOOL(X, __VA_ARGS__) TD_DTYPES_INT(X, __VA_ARGS__)
/* every dtype but bool */
#define TD_DTYPES_NUM(X, ...) TD_DTYPES_INT(X, __VA_ARGS__) TD_DTYPES_FLOAT(X, __VA_ARGS__)
#define TD_DTYPES_ALL(X, ...) TD_DTYPES_BOOL(X, __VA_ARGS__) TD_DTYPES_NUM(X, __VA_ARGS__)

/* ---- walkers ------------------------------------------------------------------------ */

/* A row's name after ", ", for lists in messages: a subset's names joined are
 * TD_DTYPES_FLOAT(TD_DTYPE_LISTED, _) + 2 ("float16, bfloat16, float32, float64"). */
#define TD_DTYPE_LISTED(_, DN, DT, DK, CT, FAM, NAME, ...) ", " NAME

#endif
