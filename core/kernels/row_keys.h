/*
 * row_keys.h: one row of a contiguous tensor loaded as sort keys, for the kernels that
 * compare elements along a dim (sort.c, scan.c): as double, exact for every dtype but
 * int64, or, for int64, as int64 (a double would merge neighbours above 2^53).
 */
#ifndef TD_KERNEL_ROW_KEYS_H
#define TD_KERNEL_ROW_KEYS_H

#include <string.h>

#include "../src/internal.h"
#include "dtypes.h"

/* Row r (n elements) of contiguous t into d (every dtype but int64) or i (int64). */
static inline void td_row_keys(const td_tensor *t, int64_t r, int64_t n, double *d, int64_t *i) {
  const char *row = td_tensor_ptr(t) + r * n * t->itemsize;
#define TD_ROW_KEYS_CASE(ARG, DN, IT, K, ...)                                      \
  case TD_##DN:                                                                    \
    for (int64_t j = 0; j < n; j++) d[j] = (double)LOAD_##K(((const IT *)row)[j]); \
    return;
  if (t->dtype == TD_INT64) {
    memcpy(i, row, (size_t)n * sizeof *i);
    return;
  }
  switch (t->dtype) {
    TD_DTYPES_ALL(TD_ROW_KEYS_CASE, _)
    default: break;
  }
#undef TD_ROW_KEYS_CASE
}

#endif
