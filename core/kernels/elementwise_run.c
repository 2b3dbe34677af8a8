/*
 * elementwise_run.c: how the elementwise kernels walk their operands: the strided
 * iterator split across the thread pool, in tiles when an input would be read across
 * the grain.
 */
#include "elementwise.h"
#include "../src/parallel.h"

/* Tiling for inputs read across the grain (a transpose against a row-major output):
 * walked row by row, such an input touches a new cache line per element and uses one
 * element of it. Walking tiles of TILE_ROWS x TILE_COLS elements of the iteration's two
 * inner dims instead keeps the TILE_COLS lines a row touches cached while the rows below
 * use the rest of them (16 lines: few enough for the cache sets a power-of-two stride
 * maps them to), and the pages of TILE_ROWS rows in the TLB. Below MIN_NUMEL everything
 * stays cached anyway. The sizes follow copy.c's measured transpose tiles. */
enum { TILE_COLS = 16, TILE_ROWS = 256, TILE_MIN_STRIDE = 64, TILE_MIN_NUMEL = 1 << 16 };

static bool across_grain(const td_iter *it) {
  const int32_t inner = it->ndim - 1;
  if (it->ndim < 2 || it->numel < TILE_MIN_NUMEL || it->shape[inner] <= TILE_COLS) return false;
  for (int32_t k = 1; k < it->nops; k++) {
    int64_t s = it->strides[k][inner];
    if ((s < 0 ? -s : s) >= TILE_MIN_STRIDE) return true;
  }
  return false;
}

typedef struct tile_job {
  const td_iter *it;
  td_inner_loop loop;
  void *ctx;
  int64_t col_tiles;
} tile_job;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Tiles [begin, end), row-block major: each is the whole iteration with its two inner
 * dims cut down to the tile. Elements stay independent, so neither the order nor the
 * thread count changes a result. */
static void run_tiles(int64_t begin, int64_t end, void *arg) {
  const tile_job *j = arg;
  const td_iter *it = j->it;
  const int32_t c = it->ndim - 1, r = c - 1;
  for (int64_t t = begin; t < end; t++) {
    const int64_t i0 = t / j->col_tiles * TILE_ROWS, j0 = t % j->col_tiles * TILE_COLS;
    td_iter tile = *it;
    tile.shape[r] = min64(TILE_ROWS, it->shape[r] - i0);
    tile.shape[c] = min64(TILE_COLS, it->shape[c] - j0);
    tile.numel = it->numel / (it->shape[r] * it->shape[c]) * tile.shape[r] * tile.shape[c];
    for (int32_t k = 0; k < it->nops; k++)
      tile.data[k] += i0 * it->strides[k][r] + j0 * it->strides[k][c];
    td_iter_run(&tile, j->loop, j->ctx);
  }
}

void td_ew_run(int32_t nops, const td_tensor *const *ops, td_inner_loop loop, void *ctx) {
  td_iter it;
  td_iter_init(&it, nops, ops);
  if (!across_grain(&it)) {
    td_iter_run_parallel(&it, loop, ctx);
    return;
  }
  const int32_t c = it.ndim - 1;
  const int64_t col_tiles = (it.shape[c] + TILE_COLS - 1) / TILE_COLS;
  const int64_t row_tiles = (it.shape[c - 1] + TILE_ROWS - 1) / TILE_ROWS;
  const int64_t per_tile = it.numel / (it.shape[c] * it.shape[c - 1]) * TILE_ROWS * TILE_COLS;
  tile_job j = {&it, loop, ctx, col_tiles};
  td_parallel_for(row_tiles * col_tiles, (TD_GRAIN + per_tile - 1) / per_tile, run_tiles, &j);
}
