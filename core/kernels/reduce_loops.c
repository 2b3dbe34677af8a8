/*
 * reduce_loops.c: finds the kernels of a reduction family for an input dtype in the
 * tables of the units that instantiate them (reduce_loops.h), preferring the hand
 * vectorised row kernels of reduce_vec.c.
 */
#include <stddef.h>

#include "reduce_loops.h"

td_reduce_kernel td_reduce_kernel_for(int32_t family, int32_t dtype) {
  if (family < 0 || family >= RF_COUNT || dtype < 0 || dtype >= TD_NUM_DTYPES)
    return (td_reduce_kernel){NULL, NULL};
  static td_reduce_table *const units[] = {&td_reduce_loops_float, &td_reduce_loops_sint,
                                           &td_reduce_loops_small};
  td_reduce_kernel k = {NULL, NULL};
  for (size_t u = 0; u < sizeof units / sizeof units[0] && !k.row; u++)
    k = (*units[u])[family][dtype];
  const td_reduce_row_fn fast = td_reduce_vec_row(family, dtype);
  if (fast) k.row = fast;
  return k;
}
