/* reduce_loops_float.c: the reduction kernels of the floating dtypes (reduce_loops.h). */
#include "reduce_loops.h"

TD_DTYPES_FLOAT(GEN_F, _)
TD_DTYPES_FLOAT(GEN_ARG_F, _)

td_reduce_table td_reduce_loops_float = {TD_DTYPES_FLOAT(TAB_F, _)};
