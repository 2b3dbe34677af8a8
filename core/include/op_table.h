/*
 * op_table.h: the one table of the elementwise and reduction ops, as X-macros (LuaJIT's
 * IRDEF / ERRDEF pattern, as dtype_table.h is for dtypes). Not ABI: no FFI declarations,
 * not installed. libtensordict derives its arrays and td_op_name / td_op_category from
 * it (core/kernels/ops.c); the CUDA backend and the Lua layer ask those two calls.
 *
 * One row per op, X(ARG, suffix, name, category):
 *  - suffix:   the code's name after TD_BINARY_, TD_UNARY_ or TD_RED_ (tensordict.h keeps
 *              the codes themselves, with explicit values, and the counts TD_*_COUNT,
 *              as LuaJIT's FFI wants them; ops.c's static asserts tie every row to its
 *              code);
 *  - name:     the op's name in messages, in Lua (t:add, td:sum) and in torch; the
 *              in-place form's is name "_" (joined by the compiler, no second column);
 *  - category: TD_OPCAT_<category> (tensordict.h): what the op gives, which the kernels
 *              plan by and the Lua layer makes its methods by.
 * ARG... comes first, unchanged (write _ when unused: C11 wants one for the "...").
 *
 * Rows are in code order. Codes only grow (the ABI keeps old ones), so a new op's row
 * goes at the end of its table: docs/c-api.md, "Adding an op".
 */
#ifndef TD_OP_TABLE_H
#define TD_OP_TABLE_H

#define TD_BINARY_OPS(X, ...)                             \
  X(__VA_ARGS__, ADD, "add", ARITH)                       \
  X(__VA_ARGS__, SUB, "sub", ARITH)                       \
  X(__VA_ARGS__, MUL, "mul", ARITH)                       \
  X(__VA_ARGS__, DIV, "div", FLOAT)                       \
  X(__VA_ARGS__, FLOOR_DIVIDE, "floor_divide", ARITH)     \
  X(__VA_ARGS__, REMAINDER, "remainder", ARITH)           \
  X(__VA_ARGS__, POW, "pow", ARITH)                       \
  X(__VA_ARGS__, MINIMUM, "minimum", ARITH)               \
  X(__VA_ARGS__, MAXIMUM, "maximum", ARITH)               \
  X(__VA_ARGS__, EQ, "eq", COMPARE)                       \
  X(__VA_ARGS__, NE, "ne", COMPARE)                       \
  X(__VA_ARGS__, LT, "lt", COMPARE)                       \
  X(__VA_ARGS__, LE, "le", COMPARE)                       \
  X(__VA_ARGS__, GT, "gt", COMPARE)                       \
  X(__VA_ARGS__, GE, "ge", COMPARE)                       \
  X(__VA_ARGS__, LOGICAL_AND, "logical_and", LOGICAL)     \
  X(__VA_ARGS__, LOGICAL_OR, "logical_or", LOGICAL)       \
  X(__VA_ARGS__, LOGICAL_XOR, "logical_xor", LOGICAL)     \
  X(__VA_ARGS__, ATAN2, "atan2", FLOAT)                   \
  X(__VA_ARGS__, HYPOT, "hypot", FLOAT)                   \
  X(__VA_ARGS__, LOGADDEXP, "logaddexp", FLOAT)           \
  X(__VA_ARGS__, XLOGY, "xlogy", FLOAT)                   \
  X(__VA_ARGS__, COPYSIGN, "copysign", FLOAT)             \
  X(__VA_ARGS__, FMOD, "fmod", ARITH)                     \
  X(__VA_ARGS__, BITWISE_AND, "bitwise_and", BITWISE)     \
  X(__VA_ARGS__, BITWISE_OR, "bitwise_or", BITWISE)       \
  X(__VA_ARGS__, BITWISE_XOR, "bitwise_xor", BITWISE)     \
  X(__VA_ARGS__, BITWISE_LEFT_SHIFT, "bitwise_left_shift", BITWISE) \
  X(__VA_ARGS__, BITWISE_RIGHT_SHIFT, "bitwise_right_shift", BITWISE)

#define TD_UNARY_OPS(X, ...)                              \
  X(__VA_ARGS__, NEG, "neg", ARITH)                       \
  X(__VA_ARGS__, ABS, "abs", ARITH)                       \
  X(__VA_ARGS__, EXP, "exp", FLOAT)                       \
  X(__VA_ARGS__, LOG, "log", FLOAT)                       \
  X(__VA_ARGS__, LOG1P, "log1p", FLOAT)                   \
  X(__VA_ARGS__, EXPM1, "expm1", FLOAT)                   \
  X(__VA_ARGS__, SQRT, "sqrt", FLOAT)                     \
  X(__VA_ARGS__, RSQRT, "rsqrt", FLOAT)                   \
  X(__VA_ARGS__, SIN, "sin", FLOAT)                       \
  X(__VA_ARGS__, COS, "cos", FLOAT)                       \
  X(__VA_ARGS__, TANH, "tanh", FLOAT)                     \
  X(__VA_ARGS__, SIGMOID, "sigmoid", FLOAT)               \
  X(__VA_ARGS__, RELU, "relu", ARITH)                     \
  X(__VA_ARGS__, FLOOR, "floor", ARITH)                   \
  X(__VA_ARGS__, CEIL, "ceil", ARITH)                     \
  X(__VA_ARGS__, ROUND, "round", ARITH)                   \
  X(__VA_ARGS__, SIGN, "sign", ARITH)                     \
  X(__VA_ARGS__, LOGICAL_NOT, "logical_not", LOGICAL)     \
  X(__VA_ARGS__, ISNAN, "isnan", TEST)                    \
  X(__VA_ARGS__, ISINF, "isinf", TEST)                    \
  X(__VA_ARGS__, TAN, "tan", FLOAT)                       \
  X(__VA_ARGS__, ASIN, "asin", FLOAT)                     \
  X(__VA_ARGS__, ACOS, "acos", FLOAT)                     \
  X(__VA_ARGS__, ATAN, "atan", FLOAT)                     \
  X(__VA_ARGS__, SINH, "sinh", FLOAT)                     \
  X(__VA_ARGS__, COSH, "cosh", FLOAT)                     \
  X(__VA_ARGS__, ASINH, "asinh", FLOAT)                   \
  X(__VA_ARGS__, ACOSH, "acosh", FLOAT)                   \
  X(__VA_ARGS__, ATANH, "atanh", FLOAT)                   \
  X(__VA_ARGS__, LOG2, "log2", FLOAT)                     \
  X(__VA_ARGS__, LOG10, "log10", FLOAT)                   \
  X(__VA_ARGS__, EXP2, "exp2", FLOAT)                     \
  X(__VA_ARGS__, ERF, "erf", FLOAT)                       \
  X(__VA_ARGS__, ERFC, "erfc", FLOAT)                     \
  X(__VA_ARGS__, LGAMMA, "lgamma", FLOAT)                 \
  X(__VA_ARGS__, TRUNC, "trunc", ARITH)                   \
  X(__VA_ARGS__, FRAC, "frac", ARITH)                     \
  X(__VA_ARGS__, ISFINITE, "isfinite", TEST)              \
  X(__VA_ARGS__, SIGNBIT, "signbit", TEST)               \
  X(__VA_ARGS__, BITWISE_NOT, "bitwise_not", BITWISE)     \
  X(__VA_ARGS__, ERFINV, "erfinv", FLOAT)                 \
  X(__VA_ARGS__, DIGAMMA, "digamma", FLOAT)

#define TD_REDUCE_OPS(X, ...)                             \
  X(__VA_ARGS__, SUM, "sum", ARITH)                       \
  X(__VA_ARGS__, MEAN, "mean", ARITH)                     \
  X(__VA_ARGS__, PROD, "prod", ARITH)                     \
  X(__VA_ARGS__, MIN, "min", EXTREME)                     \
  X(__VA_ARGS__, MAX, "max", EXTREME)                     \
  X(__VA_ARGS__, ARGMIN, "argmin", INDEX)                 \
  X(__VA_ARGS__, ARGMAX, "argmax", INDEX)                 \
  X(__VA_ARGS__, STD, "std", SPREAD)                      \
  X(__VA_ARGS__, VAR, "var", SPREAD)                      \
  X(__VA_ARGS__, NORM, "norm", NORM)                      \
  X(__VA_ARGS__, ALL, "all", LOGICAL)                     \
  X(__VA_ARGS__, ANY, "any", LOGICAL)                     \
  X(__VA_ARGS__, LOGSUMEXP, "logsumexp", FLOAT)

/* Whether ops of a category give bool whatever their operands (include tensordict.h). */
#define TD_OPCAT_GIVES_BOOL(category)                                   \
  ((category) == TD_OPCAT_COMPARE || (category) == TD_OPCAT_LOGICAL ||  \
   (category) == TD_OPCAT_TEST)

#endif
