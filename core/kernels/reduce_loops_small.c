/* reduce_loops_small.c: the F families of bool and uint8, and the I families of every
 * integral dtype (reduce_loops.h). */
#include "reduce_loops.h"

TD_DTYPES_BOOL(GEN_F, _)
TD_DTYPES_UINT(GEN_F, _)
TD_DTYPES_BOOL(GEN_ARG_F, _)
TD_DTYPES_UINT(GEN_ARG_F, _)
TD_DTYPES_INTEGRAL(GEN_I, _)
TD_DTYPES_INTEGRAL(GEN_ARG_I, _)

td_reduce_table td_reduce_loops_small = {TD_DTYPES_BOOL(TAB_F, _) TD_DTYPES_UINT(TAB_F, _)
                                             TD_DTYPES_INTEGRAL(TAB_I, _)};
