/*
 * take.c: the offset-driven data movers of take.h, and the checks the gathering,
 * masking and writing ops share.
 *
 * Both movers run on the strided iterator with three operands (data, data, offsets).
 * Their inner loops branch once per row on the layout: when the offset is constant
 * along the row (a whole row picked by one index, e.g. index_select along dim 0) the
 * row is one memcpy; otherwise a typed loop per element size reads through the offsets.
 */
#include <stdlib.h>
#include <string.h>

#include "../src/parallel.h"
#include "dtypes.h"
#include "take.h"

/* ---- index -> byte offsets ---------------------------------------------------------- */

typedef struct offs_ctx {
  int64_t size, stride; /* the dim's size, bytes per step along it */
  int64_t bad_value;    /* the first value out of range, when bad */
  bool bad;
  int64_t hi, lo;       /* one-based: the extreme values and whether 0 was seen, */
  bool zero;            /* for td_index_from_one_based's message */
} offs_ctx;

/* Out-of-range values are recorded (the first only) and written as offset 0, so the
 * loop has no early exit and the compiler keeps it simple. */
#define DEF_OFFS(NAME, IT)                                                         \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {            \
    offs_ctx *c = vctx;                                                            \
    const int64_t size = c->size, stride = c->stride;                              \
    for (int64_t k = 0; k < n; k++) {                                              \
      int64_t v = *(const IT *)(p[1] + k * s[1]);                                  \
      int64_t w = v < 0 ? v + size : v;                                            \
      if ((uint64_t)w >= (uint64_t)size) {                                         \
        if (!c->bad) c->bad_value = v;                                             \
        c->bad = true;                                                             \
        w = 0;                                                                     \
      }                                                                            \
      *(int64_t *)(p[0] + k * s[0]) = w * stride;                                  \
    }                                                                              \
  }
DEF_OFFS(offs_from_i64, int64_t)
DEF_OFFS(offs_from_i32, int32_t)

/* Lua's 1-based values (negative from the end) in the same pass: 0 and values out of
 * range are bad; the extremes are kept so the message names the value
 * td_index_from_one_based would. */
#define DEF_OFFS1(NAME, IT)                                                        \
  static void NAME(char **p, const int64_t *s, int64_t n, void *vctx) {            \
    offs_ctx *c = vctx;                                                            \
    const int64_t size = c->size, stride = c->stride;                              \
    int64_t hi = c->hi, lo = c->lo;                                                \
    bool bad = false;                                                              \
    for (int64_t k = 0; k < n; k++) {                                              \
      int64_t v = *(const IT *)(p[1] + k * s[1]);                                  \
      hi = v > hi ? v : hi;                                                        \
      lo = v < lo ? v : lo;                                                        \
      int64_t w = v > 0 ? v - 1 : v + size;                                        \
      bool out = (uint64_t)w >= (uint64_t)size || v == 0;                          \
      bad |= out;                                                                  \
      *(int64_t *)(p[0] + k * s[0]) = out ? 0 : w * stride;                        \
    }                                                                              \
    c->hi = hi;                                                                    \
    c->lo = lo;                                                                    \
    c->bad |= bad;                                                                 \
  }
DEF_OFFS1(offs1_from_i64, int64_t)
DEF_OFFS1(offs1_from_i32, int32_t)

typedef struct offs_job {
  const td_iter *it;
  td_inner_loop loop;
  offs_ctx *chunks; /* one per chunk: the first bad value is the first bad chunk's */
} offs_job;

static void offs_chunk(int64_t begin, int64_t end, void *arg) {
  offs_job *j = arg;
  td_iter_run_range(j->it, begin, end, j->loop, &j->chunks[begin / TD_GRAIN]);
}

/* A bad 1-based index, as td_index_from_one_based says it: the largest value past the
 * end, else the smallest before the start, else the 0. */
static int32_t one_based_error(const char *call, int64_t hi, int64_t lo, int64_t size, int32_t dim1) {
  int64_t worst = hi > size ? hi : lo < -size ? lo : 0;
  if (worst != 0)
    return td_fail(TD_EINDEX,
                   "%s: index %lld is out of range for dim %d of size %lld (valid: 1..%lld or -%lld..-1)",
                   call, (long long)worst, (int)dim1, (long long)size, (long long)size, (long long)size);
  return td_fail(TD_EINDEX, "%s: index 0 in dim %d: indices are 1-based (negative from the end)", call,
                 (int)dim1);
}

/* The chunks' extremes and whether any saw a bad value. */
static bool merge_chunks(const offs_ctx *chunks, int64_t n, int64_t *hi, int64_t *lo) {
  bool bad = false;
  *hi = INT64_MIN;
  *lo = INT64_MAX;
  for (int64_t c = 0; c < n; c++) {
    *hi = chunks[c].hi > *hi ? chunks[c].hi : *hi;
    *lo = chunks[c].lo < *lo ? chunks[c].lo : *lo;
    bad |= chunks[c].bad;
  }
  return bad;
}

static td_tensor *index_offsets(const char *call, const td_tensor *index, int64_t size,
                                int32_t dim, int64_t stride_bytes, bool one_based) {
  if (index->dtype != TD_INT64 && index->dtype != TD_INT32)
    return td_fail_null(TD_EDTYPE, "%s: index dtype %s is not int64 or int32", call,
                        td_dtype_name(index->dtype));
  td_tensor *out = td_tensor_empty(index->ndim, index->shape, TD_INT64);
  if (!out) return NULL;
  const td_tensor *ops[2] = {out, index};
  td_iter it;
  td_iter_init(&it, 2, ops); /* out is contiguous: walked row-major */
  int64_t nchunks = td_parallel_chunks(it.numel, TD_GRAIN);
  offs_ctx *chunks = calloc((size_t)(nchunks > 0 ? nchunks : 1), sizeof *chunks);
  if (!chunks) {
    td_tensor_release(out);
    return td_fail_null(TD_ENOMEM, "%s: out of memory", call);
  }
  for (int64_t c = 0; c < nchunks; c++) chunks[c] = (offs_ctx){size, stride_bytes, 0, false, INT64_MIN, INT64_MAX, false};
  td_inner_loop loop = one_based ? (index->dtype == TD_INT64 ? offs1_from_i64 : offs1_from_i32)
                                 : (index->dtype == TD_INT64 ? offs_from_i64 : offs_from_i32);
  offs_job job = {&it, loop, chunks};
  td_parallel_for(it.numel, TD_GRAIN, offs_chunk, &job);
  int64_t hi, lo;
  bool bad = merge_chunks(chunks, nchunks, &hi, &lo);
  for (int64_t c = 0; c < nchunks && !one_based; c++) {
    if (!chunks[c].bad) continue;
    td_fail(TD_EINDEX, "%s: index %lld is out of range for dim %d of size %lld", call,
            (long long)chunks[c].bad_value, (int)dim, (long long)size);
    td_tensor_release(out);
    out = NULL;
    break;
  }
  free(chunks);
  if (one_based && bad) {
    td_tensor_release(out);
    return one_based_error(call, hi, lo, size, dim), NULL;
  }
  return out;
}

td_tensor *td_index_offsets(const char *call, const td_tensor *index, int64_t size,
                            int32_t dim, int64_t stride_bytes) {
  return index_offsets(call, index, size, dim, stride_bytes, false);
}

td_tensor *td_index_offsets_one_based(const char *call, const td_tensor *index, int64_t size,
                                      int32_t dim1, int64_t stride_bytes) {
  return index_offsets(call, index, size, dim1, stride_bytes, true);
}

/* ---- gather along a 1-D source from 1-based values, in one pass ---------------------
 * out[k] = src[index[k]] with the check and the shift done as each value is read: no
 * offsets tensor, one pass over the index (gather of a 1-D tensor, the common case). */

typedef struct take1_job {
  char *out;
  const char *src, *index;
  int64_t src_stride, size; /* bytes per step, elements */
  offs_ctx *chunks;
  void (*loop)(const struct take1_job *j, int64_t begin, int64_t end, offs_ctx *c);
} take1_job;

#define DEF_TAKE1(NAME, T, IT)                                                     \
  static void NAME(const take1_job *j, int64_t begin, int64_t end, offs_ctx *c) {  \
    T *restrict out = (T *)j->out;                                                 \
    const IT *restrict ix = (const IT *)j->index;                                  \
    const char *src = j->src;                                                      \
    const int64_t size = j->size, step = j->src_stride;                            \
    int64_t hi = c->hi, lo = c->lo;                                                \
    bool bad = false;                                                              \
    for (int64_t k = begin; k < end; k++) {                                        \
      int64_t v = ix[k];                                                           \
      hi = v > hi ? v : hi;                                                        \
      lo = v < lo ? v : lo;                                                        \
      int64_t w = v > 0 ? v - 1 : v + size;                                        \
      bool wrong = (uint64_t)w >= (uint64_t)size || v == 0;                        \
      bad |= wrong;                                                                \
      out[k] = *(const T *)(src + (wrong ? 0 : w) * step);                         \
    }                                                                              \
    c->hi = hi;                                                                    \
    c->lo = lo;                                                                    \
    c->bad |= bad;                                                                 \
  }
DEF_TAKE1(take1_1_i64, uint8_t, int64_t)
DEF_TAKE1(take1_2_i64, uint16_t, int64_t)
DEF_TAKE1(take1_4_i64, uint32_t, int64_t)
DEF_TAKE1(take1_8_i64, uint64_t, int64_t)
DEF_TAKE1(take1_1_i32, uint8_t, int32_t)
DEF_TAKE1(take1_2_i32, uint16_t, int32_t)
DEF_TAKE1(take1_4_i32, uint32_t, int32_t)
DEF_TAKE1(take1_8_i32, uint64_t, int32_t)

static void take1_chunk(int64_t begin, int64_t end, void *arg) {
  const take1_job *j = arg;
  j->loop(j, begin, end, &j->chunks[begin / TD_GRAIN]);
}

bool td_take_1d_one_based_fits(const td_tensor *src, const td_tensor *index) {
  return src->ndim == 1 && src->shape[0] > 0 && (index->dtype == TD_INT64 || index->dtype == TD_INT32) &&
         td_tensor_is_contiguous(index) == 1;
}

td_tensor *td_take_1d_one_based(const char *call, const td_tensor *src, const td_tensor *index, int32_t dim1) {
  td_tensor *out = td_tensor_empty(index->ndim, index->shape, src->dtype);
  if (!out) return NULL;
  int64_t n = td_tensor_numel(index);
  int64_t nchunks = td_parallel_chunks(n, TD_GRAIN);
  offs_ctx *chunks = calloc((size_t)(nchunks > 0 ? nchunks : 1), sizeof *chunks);
  if (!chunks) {
    td_tensor_release(out);
    return td_fail_null(TD_ENOMEM, "%s: out of memory", call);
  }
  for (int64_t c = 0; c < nchunks; c++) chunks[c] = (offs_ctx){.hi = INT64_MIN, .lo = INT64_MAX};
  bool i64 = index->dtype == TD_INT64;
  static void (*const loops[2][4])(const take1_job *, int64_t, int64_t, offs_ctx *) = {
      {take1_1_i32, take1_2_i32, take1_4_i32, take1_8_i32},
      {take1_1_i64, take1_2_i64, take1_4_i64, take1_8_i64}};
  int which = src->itemsize == 1 ? 0 : src->itemsize == 2 ? 1 : src->itemsize == 4 ? 2 : 3;
  take1_job job = {td_tensor_ptr(out), td_tensor_ptr(src), td_tensor_ptr(index),
                   src->strides[0] * src->itemsize, src->shape[0], chunks, loops[i64][which]};
  td_parallel_for(n, TD_GRAIN, take1_chunk, &job);
  int64_t hi, lo;
  bool bad = merge_chunks(chunks, nchunks, &hi, &lo);
  free(chunks);
  if (bad) {
    td_tensor_release(out);
    return one_based_error(call, hi, lo, src->shape[0], dim1), NULL;
  }
  return out;
}

/* ---- take: out[p] = *(src + offs[p]) ------------------------------------------------ */

#define DEF_TAKE(B, T)                                                             \
  static void take_##B(char **p, const int64_t *s, int64_t n, void *ctx) {         \
    (void)ctx;                                                                     \
    char *d = p[0];                                                                \
    const char *a = p[1], *o = p[2];                                               \
    if (s[2] == 0) { /* one offset for the row: a row copy */                      \
      const char *src = a + *(const int64_t *)o;                                   \
      if (s[0] == B && s[1] == B) {                                                \
        memcpy(d, src, (size_t)n * B);                                             \
      } else {                                                                     \
        for (int64_t k = 0; k < n; k++)                                            \
          *(T *)(d + k * s[0]) = *(const T *)(src + k * s[1]);                     \
      }                                                                            \
    } else if (s[0] == B && s[1] == 0 && s[2] == 8) { /* a gather along the row */ \
      T *restrict dd = (T *)d;                                                     \
      const int64_t *restrict oo = (const int64_t *)o;                             \
      for (int64_t k = 0; k < n; k++) dd[k] = *(const T *)(a + oo[k]);             \
    } else {                                                                       \
      for (int64_t k = 0; k < n; k++)                                              \
        *(T *)(d + k * s[0]) =                                                     \
            *(const T *)(a + k * s[1] + *(const int64_t *)(o + k * s[2]));         \
    }                                                                              \
  }
DEF_TAKE(1, uint8_t)
DEF_TAKE(2, uint16_t)
DEF_TAKE(4, uint32_t)
DEF_TAKE(8, uint64_t)

static td_inner_loop take_loop(int64_t itemsize) {
  switch (itemsize) {
    case 1: return take_1;
    case 2: return take_2;
    case 4: return take_4;
    default: return take_8;
  }
}

/* ---- take of whole blocks -------------------------------------------------------------
 * When the innermost dims are laid out alike in out and src and the offset does not vary
 * over them (index_select or mask_rows of contiguous rows), each offset picks a block of
 * bytes: the iterator walks the outer dims only and the loop copies blocks. It prefetches
 * the block a few offsets ahead, since picked rows are usually far apart: without the
 * hint each row waits for its own cache and TLB misses, one after the other. */

enum { PREFETCH_AHEAD = 16, PREFETCH_BYTES = 512, CACHE_LINE = 64 };

typedef struct block_ctx {
  int64_t bytes; /* per block */
} block_ctx;

static void take_blocks(char **p, const int64_t *s, int64_t n, void *vctx) {
  const int64_t bytes = ((const block_ctx *)vctx)->bytes;
  const int64_t ahead = bytes < PREFETCH_BYTES ? bytes : PREFETCH_BYTES;
  char *d = p[0];
  const char *a = p[1], *o = p[2];
  for (int64_t k = 0; k < n; k++) {
    if (k + PREFETCH_AHEAD < n) {
      const int64_t j = k + PREFETCH_AHEAD;
      const char *next = a + j * s[1] + *(const int64_t *)(o + j * s[2]);
      for (int64_t c = 0; c < ahead; c += CACHE_LINE) __builtin_prefetch(next + c);
    }
    memcpy(d + k * s[0], a + k * s[1] + *(const int64_t *)(o + k * s[2]), (size_t)bytes);
  }
}

typedef struct take_job {
  const td_iter *it;
  td_inner_loop loop;
  void *ctx;
} take_job;

static void take_chunk(int64_t begin, int64_t end, void *arg) {
  const take_job *j = arg;
  td_iter_run_range(j->it, begin, end, j->loop, j->ctx);
}

/* Elements per block: the trailing dims that out and src step through alike (out's
 * row-major layout) while offs stays put; *outer gets the count of dims left. */
static int64_t block_elems(const td_tensor *out, const td_tensor *src, const td_tensor *offs,
                           int32_t *outer) {
  int64_t block = 1;
  int32_t nd = out->ndim;
  for (; nd > 0; nd--) {
    const int32_t d = nd - 1;
    if (out->shape[d] != 1 &&
        (out->strides[d] != block || src->strides[d] != block || offs->strides[d] != 0))
      break;
    block *= out->shape[d];
  }
  *outer = nd;
  return block;
}

void td_take_run(const td_tensor *out, const td_tensor *src, const td_tensor *offs) {
  if (td_tensor_numel(out) == 0) return;
  int32_t outer;
  const int64_t block = block_elems(out, src, offs, &outer);
  td_tensor heads[3] = {*out, *src, *offs}; /* the outer dims only, for blocks */
  for (int k = 0; k < 3; k++) {
    heads[k].refcount = 0;
    if (block > 1) heads[k].ndim = outer;
  }
  const td_tensor *ops[3] = {&heads[0], &heads[1], &heads[2]};
  td_iter it;
  td_iter_init(&it, 3, ops);
  block_ctx bc = {block * out->itemsize};
  take_job job = {&it, block > 1 ? take_blocks : take_loop(out->itemsize), &bc};
  td_parallel_for(it.numel, block > 1 ? (TD_GRAIN + block - 1) / block : TD_GRAIN, take_chunk,
                  &job);
}

/* ---- put: *(dst + offs[p]) = src[p], or reduced into it ------------------------------------------
 * The iterator walks the dims other than the put dim (lines); the inner loop applies a
 * line's len positions in order for n neighbouring lines at once, so a put along an
 * outer dim still moves whole rows. */

typedef struct put_ctx {
  int64_t len;       /* positions along the put dim */
  int64_t src_step;  /* bytes between them in src */
  int64_t offs_step; /* and in offs */
} put_ctx;

#define DEF_PUT(B, T)                                                              \
  static void put_##B(char **p, const int64_t *s, int64_t n, void *vctx) {         \
    const put_ctx *c = vctx;                                                       \
    for (int64_t i = 0; i < c->len; i++) {                                         \
      const char *a = p[1] + i * c->src_step, *o = p[2] + i * c->offs_step;        \
      if (s[2] == 0) {                                                             \
        char *d = p[0] + *(const int64_t *)o;                                      \
        if (s[0] == B && s[1] == B) {                                              \
          memcpy(d, a, (size_t)n * B);                                             \
        } else {                                                                   \
          for (int64_t k = 0; k < n; k++)                                          \
            *(T *)(d + k * s[0]) = *(const T *)(a + k * s[1]);                     \
        }                                                                          \
      } else {                                                                     \
        for (int64_t k = 0; k < n; k++)                                            \
          *(T *)(p[0] + k * s[0] + *(const int64_t *)(o + k * s[2])) =             \
              *(const T *)(a + k * s[1]);                                          \
      }                                                                            \
    }                                                                              \
  }
DEF_PUT(1, uint8_t)
DEF_PUT(2, uint16_t)
DEF_PUT(4, uint32_t)
DEF_PUT(8, uint64_t)

/* Reductions in the stored type, as torch does: integers wrap (added and multiplied as
 * unsigned, which is defined), half and bfloat16 round once per step; bool sums and
 * maxima OR, products and minima AND. Maxima and minima of floats keep NaN (torch's
 * scatter_reduce amax/amin propagate it). */
#define SUM_B(DT, x, y) ((uint8_t)(((x) | (y)) != 0))
#define SUM_I(DT, x, y) ((DT)((uint64_t)(x) + (uint64_t)(y)))
#define SUM_H(DT, x, y) td_float_to_half(td_half_to_float(x) + td_half_to_float(y))
#define SUM_BF(DT, x, y) td_float_to_bfloat16(td_bfloat16_to_float(x) + td_bfloat16_to_float(y))
#define SUM_F(DT, x, y) ((x) + (y))
#define PROD_B(DT, x, y) ((uint8_t)((x) != 0 && (y) != 0))
#define PROD_I(DT, x, y) ((DT)((uint64_t)(x) * (uint64_t)(y)))
#define PROD_H(DT, x, y) td_float_to_half(td_half_to_float(x) * td_half_to_float(y))
#define PROD_BF(DT, x, y) td_float_to_bfloat16(td_bfloat16_to_float(x) * td_bfloat16_to_float(y))
#define PROD_F(DT, x, y) ((x) * (y))
#define NAN_OR(x, y, pick) ((x) != (x) ? (x) : (y) != (y) ? (y) : (pick))
#define AMAX_B(DT, x, y) SUM_B(DT, x, y)
#define AMAX_I(DT, x, y) ((x) > (y) ? (x) : (y))
#define AMAX_F(DT, x, y) NAN_OR(x, y, (x) > (y) ? (x) : (y))
#define AMAX_H(DT, x, y) (td_half_to_float(x) != td_half_to_float(x) || \
                          td_half_to_float(x) > td_half_to_float(y) ? (x) : (y))
#define AMAX_BF(DT, x, y) (td_bfloat16_to_float(x) != td_bfloat16_to_float(x) || \
                           td_bfloat16_to_float(x) > td_bfloat16_to_float(y) ? (x) : (y))
#define AMIN_B(DT, x, y) PROD_B(DT, x, y)
#define AMIN_I(DT, x, y) ((x) < (y) ? (x) : (y))
#define AMIN_F(DT, x, y) NAN_OR(x, y, (x) < (y) ? (x) : (y))
#define AMIN_H(DT, x, y) (td_half_to_float(x) != td_half_to_float(x) || \
                          td_half_to_float(x) < td_half_to_float(y) ? (x) : (y))
#define AMIN_BF(DT, x, y) (td_bfloat16_to_float(x) != td_bfloat16_to_float(x) || \
                           td_bfloat16_to_float(x) < td_bfloat16_to_float(y) ? (x) : (y))

/* One loop per reduction and dtype: *(dst + offs[p]) = RED(*(dst + offs[p]), src[p]). */
#define DEF_REDUCE(RED, DN, DT, DK, ...)                                           \
  static void RED##_##DN(char **p, const int64_t *s, int64_t n, void *vctx) {      \
    const put_ctx *c = vctx;                                                       \
    for (int64_t i = 0; i < c->len; i++) {                                         \
      const char *a = p[1] + i * c->src_step, *o = p[2] + i * c->offs_step;        \
      if (s[2] == 0 && s[0] == sizeof(DT) && s[1] == sizeof(DT)) {                 \
        DT *restrict dd = (DT *)(p[0] + *(const int64_t *)o);                      \
        const DT *restrict aa = (const DT *)a;                                     \
        for (int64_t k = 0; k < n; k++) dd[k] = RED##_##DK(DT, dd[k], aa[k]);      \
      } else {                                                                     \
        for (int64_t k = 0; k < n; k++) {                                          \
          DT *q = (DT *)(p[0] + k * s[0] + *(const int64_t *)(o + k * s[2]));      \
          *q = RED##_##DK(DT, *q, *(const DT *)(a + k * s[1]));                    \
        }                                                                          \
      }                                                                            \
    }                                                                              \
  }
TD_DTYPES_ALL(DEF_REDUCE, SUM)
TD_DTYPES_ALL(DEF_REDUCE, PROD)
TD_DTYPES_ALL(DEF_REDUCE, AMAX)
TD_DTYPES_ALL(DEF_REDUCE, AMIN)

#define REDUCE_ENTRY(RED, DN, ...) [TD_##DN] = RED##_##DN,
/* reduce_loops[mode][dtype], TD_SCATTER_SUM.. (TD_SCATTER_SET takes put_loop) */
static const td_inner_loop reduce_loops[TD_SCATTER_AMIN + 1][TD_NUM_DTYPES] = {
    [TD_SCATTER_SUM] = {TD_DTYPES_ALL(REDUCE_ENTRY, SUM)},
    [TD_SCATTER_PROD] = {TD_DTYPES_ALL(REDUCE_ENTRY, PROD)},
    [TD_SCATTER_AMAX] = {TD_DTYPES_ALL(REDUCE_ENTRY, AMAX)},
    [TD_SCATTER_AMIN] = {TD_DTYPES_ALL(REDUCE_ENTRY, AMIN)},
};

static td_inner_loop put_loop(int64_t itemsize) {
  switch (itemsize) {
    case 1: return put_1;
    case 2: return put_2;
    case 4: return put_4;
    default: return put_8;
  }
}

typedef struct put_job {
  const td_iter *it;
  td_inner_loop loop;
  put_ctx ctx;
} put_job;

static void put_chunk(int64_t begin, int64_t end, void *arg) {
  put_job *j = arg;
  td_iter_run_range(j->it, begin, end, j->loop, &j->ctx);
}

void td_put_run(const td_tensor *dst, const td_tensor *src, const td_tensor *offs,
                int32_t dim, int32_t mode) {
  const int64_t len = src->shape[dim];
  td_tensor lines[3]; /* the operands with the put dim folded away */
  const td_tensor *in[3] = {dst, src, offs};
  for (int32_t k = 0; k < 3; k++) {
    lines[k] = *in[k];
    lines[k].refcount = 0;
    lines[k].shape[dim] = 1;
  }
  const td_tensor *ops[3] = {&lines[0], &lines[1], &lines[2]};
  td_iter it;
  td_iter_init(&it, 3, ops);
  if (it.numel == 0 || len == 0) return;
  put_job job = {&it, mode == TD_SCATTER_SET ? put_loop(dst->itemsize) : reduce_loops[mode][dst->dtype],
                 {len, src->strides[dim] * src->itemsize, offs->strides[dim] * offs->itemsize}};
  /* Lines never share an element, so any split is deterministic. A chunk holds about
   * TD_GRAIN elements, but at least a stretch of neighbouring lines, so that a put along
   * an outer dim keeps moving contiguous row pieces rather than single elements. */
  const int64_t row = it.shape[it.ndim - 1];
  int64_t grain = (TD_GRAIN + len - 1) / len;
  if (grain < (row < 64 ? row : 64)) grain = row < 64 ? row : 64;
  td_parallel_for(it.numel, grain, put_chunk, &job);
}

/* ---- shared checks ------------------------------------------------------------------ */

bool td_check_write_target(const char *call, const td_tensor *t) {
  if (!td_check_writable(call, t)) return false;
  for (int32_t d = 0; d < t->ndim; d++) {
    if (t->strides[d] == 0 && t->shape[d] > 1) {
      char buf[TD_SHAPE_STR];
      td_fail(TD_EINVAL, "%s: the tensor of shape %s is broadcast along dim %d (stride 0), so "
              "several of its elements are one memory location; clone it before writing",
              call, td_format_shape(buf, sizeof buf, t->ndim, t->shape), (int)d);
      return false;
    }
  }
  return true;
}

bool td_wrap_dim(const char *call, int32_t dim, int32_t ndim, int32_t *out) {
  int32_t n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n) {
    td_fail(TD_EINDEX, "%s: dim %d is out of range for a %d-dim tensor (valid: %d..%d)", call,
            (int)dim, (int)ndim, (int)-n, (int)n - 1);
    return false;
  }
  *out = dim < 0 ? dim + n : dim;
  return true;
}

void td_as_1d_at_least(const td_tensor *t, td_tensor *out) {
  *out = *t;
  out->refcount = 0;
  if (out->ndim == 0) {
    out->ndim = 1;
    out->shape[0] = 1;
    out->strides[0] = 1;
  }
}

td_tensor *td_source_for(const td_tensor *dst, const td_tensor *src, int32_t dtype) {
  if (src->dtype != dtype) return td_tensor_to_dtype(src, dtype); /* a fresh copy */
  if (src->storage == dst->storage) return td_tensor_clone(src);
  return td_tensor_share(src);
}

/* ---- Lua's 1-based indices -------------------------------------------------------- */

/* 1-based indices (negative from the end) -> a new int64 tensor of 0-based ones
 * (negatives kept: the movers count them from the end), checked in the same pass as
 * the shift: one copy (which also casts any integer dtype) and one loop, where the Lua
 * layer used to run seven kernels and five temporaries. The messages name the call and
 * the 1-based dim: the largest index past the end, else the smallest before the start,
 * else a 0. */
TD_EXPORT td_tensor *td_index_from_one_based(const td_tensor *index, int64_t size,
                                            const char *call, int32_t dim1) {
  td_tensor *out = td_tensor_empty(index->ndim, index->shape, TD_INT64);
  if (!out) return NULL;
  if (td_tensor_copy_(out, index) != 0) {
    td_tensor_release(out);
    return NULL;
  }
  int64_t *p = (int64_t *)td_tensor_ptr(out), n = td_tensor_numel(out);
  int64_t hi = INT64_MIN, lo = INT64_MAX;
  bool zero = false;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = p[i];
    hi = v > hi ? v : hi;
    lo = v < lo ? v : lo;
    zero |= v == 0;
    p[i] = v > 0 ? v - 1 : v;
  }
  int64_t bad = hi > size ? hi : lo < -size ? lo : 0;
  if (n > 0 && (bad != 0 || zero)) {
    td_tensor_release(out);
    if (bad != 0)
      return td_fail_null(TD_EINDEX,
                          "%s: index %lld is out of range for dim %d of size %lld (valid: "
                          "1..%lld or -%lld..-1)",
                          call, (long long)bad, (int)dim1, (long long)size, (long long)size,
                          (long long)size);
    return td_fail_null(TD_EINDEX, "%s: index 0 in dim %d: indices are 1-based (negative from the end)",
                        call, (int)dim1);
  }
  return out;
}
