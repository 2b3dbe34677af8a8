/*
 * iter.c: strided iteration over up to TD_ITER_MAX_OPS operands of one shape.
 *
 * init reduces the problem once (drop size-1 dims, order by operand 0's memory
 * layout, merge dims that are contiguous in every operand) so that run only has to
 * step a counter over the outer dims and hand each innermost row to the kernel.
 */
#include "iter.h"
#include "../src/parallel.h"

/* True when dim a should be walked outside dim b: operand 0's stride is larger, with
 * operand 1 breaking ties (so a broadcast output still follows its input's layout). */
static bool outer_of(const td_iter *it, int32_t a, int32_t b) {
  for (int32_t k = 0; k < it->nops && k < 2; k++) {
    int64_t sa = it->strides[k][a], sb = it->strides[k][b];
    sa = sa < 0 ? -sa : sa;
    sb = sb < 0 ? -sb : sb;
    if (sa != sb) return sa > sb;
  }
  return false;
}

static void swap_dims(td_iter *it, int32_t a, int32_t b) {
  int64_t s = it->shape[a];
  it->shape[a] = it->shape[b];
  it->shape[b] = s;
  for (int32_t k = 0; k < it->nops; k++) {
    int64_t t = it->strides[k][a];
    it->strides[k][a] = it->strides[k][b];
    it->strides[k][b] = t;
  }
}

void td_iter_init(td_iter *it, int32_t nops, const td_tensor *const *ops) {
  const td_tensor *out = ops[0];
  it->nops = nops;
  it->ndim = 0;
  it->numel = 1;
  for (int32_t k = 0; k < nops; k++) it->data[k] = td_tensor_ptr(ops[k]);
  for (int32_t d = 0; d < out->ndim; d++) {
    it->numel *= out->shape[d];
    if (out->shape[d] == 1) continue;
    it->shape[it->ndim] = out->shape[d];
    for (int32_t k = 0; k < nops; k++)
      it->strides[k][it->ndim] = ops[k]->strides[d] * ops[k]->itemsize;
    it->ndim++;
  }
  if (it->numel == 0 || it->ndim == 0) { /* nothing to walk, or a single element */
    it->ndim = 1;
    it->shape[0] = it->numel;
    for (int32_t k = 0; k < nops; k++) it->strides[k][0] = ops[k]->itemsize;
    return;
  }

  /* Insertion sort: stable and cheap for at most TD_MAX_DIMS dims. */
  for (int32_t i = 1; i < it->ndim; i++)
    for (int32_t j = i; j > 0 && outer_of(it, j, j - 1); j--) swap_dims(it, j, j - 1);

  /* Merge inner dim into the one outside it where every operand steps evenly. */
  int32_t nd = 0; /* dims kept so far, the last one being the one being extended */
  for (int32_t d = 1; d < it->ndim; d++) {
    bool merge = true;
    for (int32_t k = 0; k < nops && merge; k++)
      merge = it->strides[k][nd] == it->strides[k][d] * it->shape[d];
    if (merge) {
      it->shape[nd] *= it->shape[d];
      for (int32_t k = 0; k < nops; k++) it->strides[k][nd] = it->strides[k][d];
    } else {
      nd++;
      it->shape[nd] = it->shape[d];
      for (int32_t k = 0; k < nops; k++) it->strides[k][nd] = it->strides[k][d];
    }
  }
  it->ndim = nd + 1;
}

void td_iter_run_range(const td_iter *it, int64_t begin, int64_t end, td_inner_loop loop,
                       void *ctx) {
  if (begin >= end) return;
  const int32_t nops = it->nops, inner = it->ndim - 1;
  const int64_t row = it->shape[inner];
  int64_t inner_strides[TD_ITER_MAX_OPS], count[TD_MAX_DIMS] = {0};
  char *base[TD_ITER_MAX_OPS], *ptrs[TD_ITER_MAX_OPS];
  /* Position of element begin: its row's multi-index (odometer) and its column. */
  int64_t r = begin / row, col = begin % row;
  for (int32_t k = 0; k < nops; k++) {
    inner_strides[k] = it->strides[k][inner];
    base[k] = it->data[k];
  }
  for (int32_t d = inner - 1; d >= 0; d--) {
    count[d] = r % it->shape[d];
    r /= it->shape[d];
    for (int32_t k = 0; k < nops; k++) base[k] += count[d] * it->strides[k][d];
  }
  int64_t left = end - begin;
  for (;;) {
    int64_t n = row - col < left ? row - col : left;
    for (int32_t k = 0; k < nops; k++) ptrs[k] = base[k] + col * inner_strides[k];
    loop(ptrs, inner_strides, n, ctx); /* the loop may advance ptrs */
    left -= n;
    if (left == 0) return;
    col = 0;
    for (int32_t d = inner - 1; d >= 0; d--) { /* odometer step: carry outwards */
      for (int32_t k = 0; k < nops; k++) base[k] += it->strides[k][d];
      if (++count[d] < it->shape[d]) break;
      for (int32_t k = 0; k < nops; k++) base[k] -= it->strides[k][d] * it->shape[d];
      count[d] = 0;
    }
  }
}

void td_iter_run(const td_iter *it, td_inner_loop loop, void *ctx) {
  td_iter_run_range(it, 0, it->numel, loop, ctx);
}

typedef struct parallel_job {
  const td_iter *it;
  td_inner_loop loop;
  void *ctx;
} parallel_job;

static void run_chunk(int64_t begin, int64_t end, void *arg) {
  const parallel_job *j = arg;
  td_iter_run_range(j->it, begin, end, j->loop, j->ctx);
}

void td_iter_run_parallel(const td_iter *it, td_inner_loop loop, void *ctx) {
  parallel_job j = {it, loop, ctx};
  td_parallel_for(it->numel, td_parallel_even_grain(it->numel), run_chunk, &j);
}
