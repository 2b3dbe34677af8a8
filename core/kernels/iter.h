/*
 * iter.h: the one strided-iteration module that every CPU kernel uses.
 *
 * A kernel hands it up to TD_ITER_MAX_OPS tensors of one shape (operand 0 is the
 * output; inputs were already expanded to that shape). td_iter_init drops size-1
 * dims, orders dims so operand 0 is walked in memory order, and merges dims that are
 * contiguous in every operand, so a contiguous case becomes one flat loop. td_iter_run
 * then calls the kernel's inner loop once per innermost row with byte strides.
 */
#ifndef TD_ITER_H
#define TD_ITER_H

#include "../src/internal.h"

enum { TD_ITER_MAX_OPS = 4 };

typedef struct td_iter {
  int32_t nops;
  int32_t ndim; /* >= 1 after init; dim ndim-1 is the innermost */
  int64_t numel;
  int64_t shape[TD_MAX_DIMS];
  int64_t strides[TD_ITER_MAX_OPS][TD_MAX_DIMS]; /* in bytes */
  char *data[TD_ITER_MAX_OPS];
} td_iter;

/* ptrs[k] and strides[k] (bytes) for operand k; n elements along the row. */
typedef void (*td_inner_loop)(char **ptrs, const int64_t *strides, int64_t n, void *ctx);

void td_iter_init(td_iter *it, int32_t nops, const td_tensor *const *ops);
void td_iter_run(const td_iter *it, td_inner_loop loop, void *ctx);
/* Elements [begin, end) in iteration order (row-major over it->shape): partial rows at
 * either end are handed to the loop like whole ones. */
void td_iter_run_range(const td_iter *it, int64_t begin, int64_t end, td_inner_loop loop,
                       void *ctx);
/* td_iter_run split across the thread pool in chunks of td_parallel_even_grain elements
 * (they depend on the thread count). Only for loops whose elements are independent
 * (each writes its own output element, the same bits wherever a chunk starts). */
void td_iter_run_parallel(const td_iter *it, td_inner_loop loop, void *ctx);

#endif
