/* reduce_loops_sint.c: the F families of the signed integer dtypes (reduce_loops.h). */
#include "reduce_loops.h"

TD_DTYPES_SINT(GEN_F, _)
TD_DTYPES_SINT(GEN_ARG_F, _)

td_reduce_table td_reduce_loops_sint = {TD_DTYPES_SINT(TAB_F, _)};
