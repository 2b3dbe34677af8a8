/*
 * take.h: the two data movers behind the gathering and masking ops (take.c), and the
 * index checks they share.
 *
 * Every such op reduces to byte offsets. A gathering op reads out[p] from
 * src_view + offs[p], where src_view is the source with stride 0 along the indexed
 * dim(s); a writing op writes dst_view + offs[p] from src[p]. offs is an int64 tensor
 * of the operands' shape (usually a 1-D or index-shaped buffer viewed with stride 0
 * along the dims it does not vary on). One kernel per direction then serves
 * index_select, gather, mask_rows (take) and scatter_, index_add_, index_put_,
 * mask_rows_put_ (put), whatever the layouts.
 */
#ifndef TD_KERNEL_TAKE_H
#define TD_KERNEL_TAKE_H

#include <stdbool.h>

#include "../src/internal.h"

/* A new contiguous int64 tensor of index's shape: each value v (int64 or int32, in
 * [-size, size)) becomes ((v < 0 ? v + size : v) * stride_bytes). On a wrong dtype or
 * an out-of-range value it fails naming call, the value, dim and size, and returns
 * NULL. The first bad value in row-major order is the one named. */
td_tensor *td_index_offsets(const char *call, const td_tensor *index, int64_t size,
                            int32_t dim, int64_t stride_bytes);
/* The same from Lua's 1-based values (negative from the end; 0 is an error), in one
 * pass: the messages are td_index_from_one_based's, naming the 1-based dim1. */
td_tensor *td_index_offsets_one_based(const char *call, const td_tensor *index, int64_t size,
                                      int32_t dim1, int64_t stride_bytes);

/* gather of a 1-D src (size > 0) by a contiguous int64 or int32 index of Lua's 1-based
 * values, checked and shifted as they are read, in one pass: a new tensor of index's
 * shape, or NULL with td_index_offsets_one_based's message. _fits: whether it applies. */
bool td_take_1d_one_based_fits(const td_tensor *src, const td_tensor *index);
td_tensor *td_take_1d_one_based(const char *call, const td_tensor *src, const td_tensor *index, int32_t dim1);

/* out[p] = *(src + offs[p]) for every p of out's shape; src (same dtype as out) and
 * offs (int64) already have out's shape. Split over the thread pool. */
void td_take_run(const td_tensor *out, const td_tensor *src, const td_tensor *offs);

/* *(dst + offs[p]) = src[p] (or reduced into it: mode is a TD_SCATTER_* of tensordict.h) for every p of src's shape; dst
 * (src's dtype) and offs have src's shape, dst with stride 0 along dim. Positions
 * that may land on one element must differ only along dim: they are applied in
 * increasing order along dim (last write wins; sums in a fixed order), and the other
 * dims are split over the thread pool, so results never depend on the thread count. */
void td_put_run(const td_tensor *dst, const td_tensor *src, const td_tensor *offs,
                int32_t dim, int32_t mode);

/* Shared argument checks; each sets the error (naming call) and returns false. */
/* Writes are refused into read-only storage and into broadcast tensors (a stride-0
 * dim of size > 1), where several positions are one element, as torch refuses them. */
bool td_check_write_target(const char *call, const td_tensor *t);
/* A dim in [-ndim, ndim) (0-dim tensors accept 0 and -1), wrapped into *out. */
bool td_wrap_dim(const char *call, int32_t dim, int32_t ndim, int32_t *out);

/* t as a caller-owned header with at least one dim (a 0-dim tensor becomes [1]). */
void td_as_1d_at_least(const td_tensor *t, td_tensor *out);

/* src ready to be read while dst is written: cast to dtype and snapshotted when it
 * shares dst's storage. A new owned tensor (or src itself, retained), NULL on error. */
td_tensor *td_source_for(const td_tensor *dst, const td_tensor *src, int32_t dtype);

#endif
