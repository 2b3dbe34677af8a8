/*
 * reduce_engine.c: walks a tensor for a reduction described by a td_reduce_desc.
 *
 * Two strided iterators split the input: `ki` over the kept dims (operands: input,
 * outputs) and `ri` over the reduced dims (operand: input, rebased per output). Then
 * one of two layouts:
 *  - inner: the reduced dims hold the input's smallest stride (reducing a contiguous
 *    row, or everything). Each output folds its elements with a row kernel. A reduction
 *    longer than RED_GRAIN is cut into pieces of at most RED_GRAIN elements, all of
 *    nearly one length, folded separately.
 *  - outer: a kept dim has the smallest stride (reducing dim 0 of a matrix). Outputs
 *    are handled a block of columns at a time: each row of the reduction is folded into
 *    all the columns' states at once, a contiguous vectorised pass, never a column
 *    walk with huge strides. Rows are cut into pieces when there are too few column
 *    blocks to keep the threads busy.
 * Pieces are fixed by the shapes alone; their partial states are merged in piece
 * order, so results are bit-identical for every thread count. They are cut to nearly
 * equal lengths (even_piece): with 100K elements, pieces of 32K, 32K, 32K and 2K gave
 * one of two threads 64K to fold and made 2 threads barely faster than 1.
 */
#include <stdlib.h>
#include <string.h>

#include "../src/parallel.h"
#include "reduce.h"

enum {
  RED_GRAIN = 32768,        /* elements per piece of an inner reduction (L2-sized) */
  COL_BLOCK = 2048,         /* columns folded together in an outer reduction: rows of
                               8 KiB of float32 are runs the prefetchers follow (on
                               4096 x 4096, 512 was much slower, 1024 to 4096 alike) */
  COL_BLOCK_2P = 1024,      /* the same for two-pass ops, whose pieces must stay cached:
                               narrower blocks allow more rows per piece, so fewer pieces */
  MIN_TASKS = 32,           /* outer reductions cut rows until there are this many tasks */
  TWO_PASS_ELEMS = 1 << 18, /* two-pass pieces stay small enough to re-read from cache */
  COMBINE_GRAIN = 16384,    /* partial states merged per combine task */
  PIECE_ALIGN = 64          /* inner pieces start on whole 256-byte runs of float32 */
};

typedef struct plan {
  const td_reduce_desc *d;
  td_iter ki, ri;
  int64_t O, R;            /* outputs; elements per reduction */
  int32_t nouts;
  int64_t piece;           /* elements (inner) or rows (outer) per piece */
  int64_t npieces;
  td_reduce_acc *partials; /* [O][npieces] when npieces > 1 */
  int64_t ncols, ncb;      /* outer: columns (ki's innermost dim), column blocks */
  int64_t cbw;             /* outer: columns per block */
} plan;

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The length of the pieces that cut n items into as few as pieces of at most `most`
 * allow, all nearly equal: a multiple of `align` (whole cache lines of float32 for
 * `most` a multiple of it too), the last piece the shortest. Depends on n alone. */
static int64_t even_piece(int64_t n, int64_t most, int64_t align) {
  const int64_t pieces = ceil_div(n, most);
  return min64(most, ceil_div(ceil_div(n, pieces), align) * align);
}

/* Pointers of every operand at position pos of it (row-major over its shape). */
static void iter_at(const td_iter *it, int64_t pos, char **ptrs) {
  for (int32_t k = 0; k < it->nops; k++) ptrs[k] = it->data[k];
  for (int32_t d = it->ndim - 1; d >= 0; d--) {
    const int64_t c = pos % it->shape[d];
    pos /= it->shape[d];
    for (int32_t k = 0; k < it->nops; k++) ptrs[k] += c * it->strides[k][d];
  }
}

/* An iterator over t's dims in index order (size-1 dims dropped, neighbours merged
 * when contiguous), for argmin/argmax whose positions count in that order. */
static void logical_iter(td_iter *it, const td_tensor *t) {
  it->nops = 1;
  it->ndim = 0;
  it->numel = 1;
  it->data[0] = td_tensor_ptr(t);
  for (int32_t d = 0; d < t->ndim; d++) {
    it->numel *= t->shape[d];
    if (t->shape[d] == 1) continue;
    const int64_t s = t->strides[d] * t->itemsize;
    const int32_t last = it->ndim - 1;
    if (last >= 0 && it->strides[0][last] == s * t->shape[d]) {
      it->shape[last] *= t->shape[d];
      it->strides[0][last] = s;
    } else {
      it->shape[last + 1] = t->shape[d];
      it->strides[0][last + 1] = s;
      it->ndim++;
    }
  }
  if (it->numel == 0 || it->ndim == 0) {
    it->ndim = 1;
    it->shape[0] = it->numel;
    it->strides[0][0] = t->itemsize;
  }
}

/* ---- inner layout ---------------------------------------------------------------------- */

typedef struct fold_ctx {
  td_reduce_row_fn row;
  td_reduce_acc *acc;
  int64_t pos;
  double prm;
} fold_ctx;

static void fold_loop(char **ptrs, const int64_t *strides, int64_t n, void *vctx) {
  fold_ctx *c = vctx;
  c->row(c->acc, ptrs[0], strides[0], n, c->pos, c->prm);
  c->pos += n;
}

/* Folds elements [b, e) of the reduction based at `base` with row into acc; ri is the
 * caller's private copy of the plan's ri. */
static void fold_range(const plan *pl, td_iter *ri, char *base, int64_t b, int64_t e,
                       td_reduce_row_fn row, td_reduce_acc *acc) {
  if (ri->ndim == 1) {
    const int64_t s = ri->strides[0][0];
    row(acc, base + b * s, s, e - b, b, pl->d->param);
    return;
  }
  ri->data[0] = base;
  fold_ctx c = {row, acc, b, pl->d->param};
  td_iter_run_range(ri, b, e, fold_loop, &c);
}

/* One piece, every pass: acc starts from the identity. */
static void fold_piece(const plan *pl, td_iter *ri, char *base, int64_t b, int64_t e,
                       td_reduce_acc *acc) {
  const td_reduce_desc *d = pl->d;
  *acc = d->init;
  fold_range(pl, ri, base, b, e, d->k[0].row, acc);
  if (d->family[1] >= 0) {
    td_reduce_mid_acc(d, acc, e - b);
    fold_range(pl, ri, base, b, e, d->k[1].row, acc);
  }
}

typedef struct out_ctx {
  const plan *pl;
  td_iter *ri;
} out_ctx;

static void whole_loop(char **ptrs, const int64_t *strides, int64_t n, void *vctx) {
  const out_ctx *c = vctx;
  const plan *pl = c->pl;
  for (int64_t i = 0; i < n; i++) {
    td_reduce_acc acc;
    fold_piece(pl, c->ri, ptrs[0] + i * strides[0], 0, pl->R, &acc);
    char *outs[2] = {ptrs[1] + i * strides[1], pl->nouts > 1 ? ptrs[2] + i * strides[2] : NULL};
    td_reduce_store(pl->d, outs, &acc, pl->R);
  }
}

/* Outputs [b, e) in ki order, each reduced whole (one piece). */
static void inner_whole(int64_t b, int64_t e, void *vpl) {
  const plan *pl = vpl;
  td_iter ri = pl->ri;
  out_ctx c = {pl, &ri};
  td_iter_run_range(&pl->ki, b, e, whole_loop, &c);
}

/* Tasks [b, e): task t is piece t % npieces of output t / npieces. */
static void inner_pieces(int64_t b, int64_t e, void *vpl) {
  const plan *pl = vpl;
  td_iter ri = pl->ri;
  for (int64_t t = b; t < e; t++) {
    const int64_t o = t / pl->npieces, c = t % pl->npieces;
    char *ptrs[TD_ITER_MAX_OPS];
    iter_at(&pl->ki, o, ptrs);
    const int64_t lo = c * pl->piece;
    fold_piece(pl, &ri, ptrs[0], lo, min64(pl->R, lo + pl->piece), &pl->partials[t]);
  }
}

/* ---- outer layout ---------------------------------------------------------------------- */

typedef struct block_ctx {
  td_reduce_block_fn block;
  const td_reduce_cols *cols;
  int64_t sc, w, pos;
  double prm;
} block_ctx;

static void block_loop(char **ptrs, const int64_t *strides, int64_t n, void *vctx) {
  block_ctx *c = vctx;
  c->block(c->cols, ptrs[0], c->sc, c->w, strides[0], n, c->pos, c->prm);
  c->pos += n;
}

static void fold_rows(const plan *pl, td_iter *ri, char *base, int64_t lo, int64_t hi,
                      td_reduce_block_fn block, const td_reduce_cols *cols, int64_t w) {
  const int64_t sc = pl->ki.strides[0][pl->ki.ndim - 1];
  if (ri->ndim == 1) {
    const int64_t sr = ri->strides[0][0];
    block(cols, base + lo * sr, sc, w, sr, hi - lo, lo, pl->d->param);
    return;
  }
  ri->data[0] = base;
  block_ctx c = {block, cols, sc, w, lo, pl->d->param};
  td_iter_run_range(ri, lo, hi, block_loop, &c);
}

static inline td_reduce_acc col_get(const td_reduce_cols *c, int64_t j) {
  return (td_reduce_acc){c->a[j], c->b[j], c->i[j], c->idx[j]};
}

static inline void col_set(const td_reduce_cols *c, int64_t j, td_reduce_acc s) {
  c->a[j] = s.a;
  c->b[j] = s.b;
  c->i[j] = s.i;
  c->idx[j] = s.idx;
}

/* Writes a block's w final column states to its outputs (ptrs: the first output's).
 * A plain double into float32 or float64 (sums and extremes over an outer dim) in one
 * loop, the same conversion td_reduce_store makes; the rest through td_reduce_store. */
static void store_cols(const plan *pl, char **ptrs, const td_reduce_cols *cols, int64_t w) {
  const td_reduce_desc *d = pl->d;
  const int32_t kin = pl->ki.ndim - 1;
  const int64_t so = pl->ki.strides[1][kin];
  const int32_t dt = d->out_dtype[0];
  if (d->fin == RFIN_A && pl->nouts == 1 && dt == TD_FLOAT32) {
    for (int64_t j = 0; j < w; j++) *(float *)(void *)(ptrs[1] + j * so) = (float)cols->a[j];
  } else if (d->fin == RFIN_A && pl->nouts == 1 && dt == TD_FLOAT64) {
    for (int64_t j = 0; j < w; j++) *(double *)(void *)(ptrs[1] + j * so) = cols->a[j];
  } else {
    for (int64_t j = 0; j < w; j++) {
      td_reduce_acc s = col_get(cols, j);
      char *outs[2] = {ptrs[1] + j * so, pl->nouts > 1 ? ptrs[2] + j * pl->ki.strides[2][kin] : NULL};
      td_reduce_store(d, outs, &s, pl->R);
    }
  }
}

/* Tasks [b, e): task t is row piece t % npieces of column block t / npieces (blocks
 * numbered row-major over ki's outer positions, then blocks within a row). */
static void outer_tasks(int64_t b, int64_t e, void *vpl) {
  const plan *pl = vpl;
  const td_reduce_desc *d = pl->d;
  td_iter ri = pl->ri;
  double a[COL_BLOCK], bb[COL_BLOCK]; /* 64 KiB of stack in all */
  int64_t iv[COL_BLOCK], idx[COL_BLOCK];
  const td_reduce_cols cols = {a, bb, iv, idx};
  for (int64_t t = b; t < e; t++) {
    const int64_t c = t % pl->npieces, q = t / pl->npieces;
    const int64_t cb = q % pl->ncb, outer = q / pl->ncb;
    const int64_t col0 = cb * pl->cbw, w = min64(pl->cbw, pl->ncols - col0);
    const int64_t o0 = outer * pl->ncols + col0;
    char *ptrs[TD_ITER_MAX_OPS];
    iter_at(&pl->ki, o0, ptrs);
    const int64_t lo = c * pl->piece, hi = min64(pl->R, lo + pl->piece);
    for (int64_t j = 0; j < w; j++) col_set(&cols, j, d->init);
    fold_rows(pl, &ri, ptrs[0], lo, hi, d->k[0].block, &cols, w);
    if (d->family[1] >= 0) {
      for (int64_t j = 0; j < w; j++) {
        td_reduce_acc s = col_get(&cols, j);
        td_reduce_mid_acc(d, &s, hi - lo);
        col_set(&cols, j, s);
      }
      fold_rows(pl, &ri, ptrs[0], lo, hi, d->k[1].block, &cols, w);
    }
    if (pl->npieces > 1) {
      for (int64_t j = 0; j < w; j++) pl->partials[(o0 + j) * pl->npieces + c] = col_get(&cols, j);
      continue;
    }
    store_cols(pl, ptrs, &cols, w);
  }
}

/* ---- merging pieces -------------------------------------------------------------------- */

typedef struct combine_ctx {
  const plan *pl;
  int64_t o; /* the output the loop is at, in ki order */
} combine_ctx;

static void combine_loop(char **ptrs, const int64_t *strides, int64_t n, void *vctx) {
  combine_ctx *c = vctx;
  const plan *pl = c->pl;
  for (int64_t i = 0; i < n; i++, c->o++) {
    const td_reduce_acc *p = pl->partials + c->o * pl->npieces;
    td_reduce_acc acc = p[0];
    int64_t done = min64(pl->piece, pl->R);
    for (int64_t k = 1; k < pl->npieces; k++) {
      const int64_t len = min64(pl->piece, pl->R - k * pl->piece);
      td_reduce_merge_acc(pl->d, &acc, done, &p[k], len);
      done += len;
    }
    char *outs[2] = {ptrs[1] + i * strides[1], pl->nouts > 1 ? ptrs[2] + i * strides[2] : NULL};
    td_reduce_store(pl->d, outs, &acc, pl->R);
  }
}

/* Outputs [b, e) in ki order: their pieces merged in order, then stored. */
static void combine(int64_t b, int64_t e, void *vpl) {
  const plan *pl = vpl;
  combine_ctx c = {pl, b};
  td_iter_run_range(&pl->ki, b, e, combine_loop, &c);
}

/* ---- planning ---------------------------------------------------------------------------- */

/* Outer layout when a kept dim has the smallest input stride, or when the reduction's
 * rows are so short that per-output calls would cost more than the work. */
static bool use_outer(const plan *pl) {
  if (pl->O <= 1 || pl->R == 0) return false;
  const int32_t kin = pl->ki.ndim - 1, rin = pl->ri.ndim - 1;
  const int64_t ks = pl->ki.strides[0][kin], rs = pl->ri.strides[0][rin];
  if (ks < rs) return true;
  return pl->ri.shape[rin] < 16 && pl->ki.shape[kin] >= pl->ri.shape[rin];
}

static int32_t alloc_partials(plan *pl) {
  size_t n;
  if (__builtin_mul_overflow((size_t)pl->O, (size_t)pl->npieces, &n) ||
      __builtin_mul_overflow(n, sizeof(td_reduce_acc), &n) || !(pl->partials = malloc(n)))
    return td_fail(TD_ENOMEM, "reduce: out of memory for %lld partial results",
                   (long long)pl->O * (long long)pl->npieces);
  return TD_OK;
}

int32_t td_reduce_run(const td_reduce_desc *d, const td_tensor *in, const bool *reduced,
                      const td_tensor *out0, const td_tensor *out1) {
  plan pl;
  memset(&pl, 0, sizeof pl);
  pl.d = d;
  pl.nouts = out1 ? 2 : 1;
  td_tensor kept = *in, red = *in; /* headers only: sizes 1 where the other set lives */
  for (int32_t i = 0; i < in->ndim; i++) {
    if (reduced[i]) kept.shape[i] = 1;
    else red.shape[i] = 1;
  }
  const td_tensor *kops[3] = {&kept, out0, out1}, *rops[1] = {&red};
  td_iter_init(&pl.ki, 1 + pl.nouts, kops);
  if (d->logical_order) logical_iter(&pl.ri, &red);
  else td_iter_init(&pl.ri, 1, rops);
  pl.O = pl.ki.numel;
  pl.R = pl.ri.numel;
  if (pl.O == 0) return TD_OK;

  if (!use_outer(&pl)) {
    if (pl.R <= RED_GRAIN) {
      td_parallel_for(pl.O, max64(1, RED_GRAIN / max64(pl.R, 1)), inner_whole, &pl);
      return TD_OK;
    }
    pl.piece = even_piece(pl.R, RED_GRAIN, PIECE_ALIGN);
    pl.npieces = ceil_div(pl.R, pl.piece);
    if (alloc_partials(&pl) < 0) return TD_ENOMEM;
    td_parallel_for(pl.O * pl.npieces, 1, inner_pieces, &pl);
  } else {
    const int32_t kin = pl.ki.ndim - 1;
    pl.ncols = pl.ki.shape[kin];
    pl.cbw = d->family[1] >= 0 ? COL_BLOCK_2P : COL_BLOCK;
    pl.ncb = ceil_div(pl.ncols, pl.cbw);
    const int64_t blocks = (pl.O / pl.ncols) * pl.ncb, w = min64(pl.ncols, pl.cbw);
    /* Rows per piece: all of them when the blocks alone make enough tasks; else enough
     * pieces for MIN_TASKS, each at least RED_GRAIN elements; two-pass ops also keep a
     * piece small enough to stay in cache between its passes. */
    int64_t piece = pl.R;
    if (blocks < MIN_TASKS)
      piece = max64(ceil_div(pl.R, ceil_div(MIN_TASKS, blocks)), ceil_div(RED_GRAIN, w));
    if (d->family[1] >= 0) piece = min64(piece, max64(1, TWO_PASS_ELEMS / w));
    pl.piece = even_piece(pl.R, piece, 1);
    pl.npieces = ceil_div(pl.R, pl.piece);
    if (pl.npieces > 1 && alloc_partials(&pl) < 0) return TD_ENOMEM;
    /* Tasks are independent: grouping small ones changes no result. */
    td_parallel_for(blocks * pl.npieces, max64(1, RED_GRAIN / (w * pl.piece)), outer_tasks, &pl);
    if (pl.npieces == 1) return TD_OK;
  }
  td_parallel_for(pl.O, max64(1, COMBINE_GRAIN / pl.npieces), combine, &pl);
  free(pl.partials);
  return TD_OK;
}
