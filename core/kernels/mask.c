/*
 * mask.c: masked_select, nonzero, mask_rows and mask_rows_put_.
 *
 * All four select positions in row-major order, in two parallel passes: count the
 * selected positions of each chunk of TD_GRAIN positions, turn the counts into each
 * chunk's first output slot (a prefix sum), then let every chunk fill its own slots.
 * Chunk boundaries depend on the position count only, so the output is the same with
 * any number of threads.
 *
 * Row-major order comes from the one iterator: operand 0 is a position counter, a
 * contiguous byte layout of the walked shape that is never dereferenced. The iterator
 * orders dims by operand 0, so it walks row-major, and p[0] minus the counter's base is
 * the row-major position of the element at hand.
 */
#include <stdlib.h>
#include <string.h>

#include "../src/parallel.h"
#include "dtypes.h"
#include "take.h"

typedef struct sel_ctx {
  char *cursor;         /* write pass: the next output slot */
  int64_t count;        /* count pass: positions selected so far */
  const char *pos_base; /* the position counter's base (nonzero) */
  const char *src_base; /* operand 2's first element (row offsets) */
  int32_t ndim;         /* nonzero: coordinates per position */
  const int64_t *shape;
} sel_ctx;

/* Non-zero tests by kind: a half or bfloat16 is zero when every bit but the sign is;
 * NaN is non-zero, as in torch. */
#define NZ_B(x) ((x) != 0)
#define NZ_I(x) ((x) != 0)
#define NZ_H(x) (((x) & 0x7fff) != 0)
#define NZ_BF(x) (((x) & 0x7fff) != 0)
#define NZ_F(x) ((x) != 0)

/* ---- count pass: operand 1 selects ------------------------------------------------ */

#define DEF_COUNT(_, DN, DT, DK, ...)                                              \
  static void count_##DN(char **p, const int64_t *s, int64_t n, void *vctx) {      \
    sel_ctx *c = vctx;                                                             \
    const char *m = p[1];                                                          \
    int64_t cnt = 0;                                                               \
    if (s[1] == 0) {                                                               \
      cnt = NZ_##DK(*(const DT *)m) ? n : 0;                                       \
    } else if (s[1] == (int64_t)sizeof(DT)) {                                      \
      const DT *mm = (const DT *)m;                                                \
      for (int64_t k = 0; k < n; k++) cnt += NZ_##DK(mm[k]);                       \
    } else {                                                                       \
      for (int64_t k = 0; k < n; k++) cnt += NZ_##DK(*(const DT *)(m + k * s[1])); \
    }                                                                              \
    c->count += cnt;                                                               \
  }
TD_DTYPES_ALL(DEF_COUNT, _)

/* ---- write passes ------------------------------------------------------------------ */

/* masked_select: the elements of operand 2 where the bool operand 1 is set. */
enum { SELECT_BLOCK = 256 };
#define DEF_SELECT(B, T)                                                           \
  static void select_##B(char **p, const int64_t *s, int64_t n, void *vctx) {      \
    sel_ctx *c = vctx;                                                             \
    const uint8_t *m = (const uint8_t *)p[1];                                      \
    const char *a = p[2];                                                          \
    char *w = c->cursor;                                                           \
    if (s[1] == 0) { /* one mask value for the row: all of it or nothing */        \
      if (*m) {                                                                    \
        if (s[2] == B) {                                                           \
          memcpy(w, a, (size_t)n * B);                                             \
        } else {                                                                   \
          for (int64_t k = 0; k < n; k++)                                          \
            *(T *)(w + k * B) = *(const T *)(a + k * s[2]);                        \
        }                                                                          \
        w += n * B;                                                                \
      }                                                                            \
    } else { /* branchless through a block on the stack (a random mask would        \
                mispredict every other element); only the kept part is copied out,     \
                so nothing is written past this row's share of the output */           \
      T buf[SELECT_BLOCK];                                                         \
      for (int64_t k0 = 0; k0 < n; k0 += SELECT_BLOCK) {                           \
        int64_t len = n - k0 < SELECT_BLOCK ? n - k0 : SELECT_BLOCK, j = 0;        \
        for (int64_t k = k0; k < k0 + len; k++) {                                  \
          buf[j] = *(const T *)(a + k * s[2]);                                     \
          j += m[k * s[1]] != 0;                                                   \
        }                                                                          \
        memcpy(w, buf, (size_t)j * B);                                             \
        w += j * B;                                                                \
      }                                                                            \
    }                                                                              \
    c->cursor = w;                                                                 \
  }
DEF_SELECT(1, uint8_t)
DEF_SELECT(2, uint16_t)
DEF_SELECT(4, uint32_t)
DEF_SELECT(8, uint64_t)

static td_inner_loop select_loop(int64_t itemsize) {
  switch (itemsize) {
    case 1: return select_1;
    case 2: return select_2;
    case 4: return select_4;
    default: return select_8;
  }
}

/* mask_rows: the byte offsets (from src_base) of operand 2 where operand 1 is set. */
static void select_offsets(char **p, const int64_t *s, int64_t n, void *vctx) {
  sel_ctx *c = vctx;
  const uint8_t *m = (const uint8_t *)p[1];
  int64_t *w = (int64_t *)c->cursor, buf[SELECT_BLOCK];
  const int64_t first = (int64_t)(p[2] - c->src_base);
  for (int64_t k0 = 0; k0 < n; k0 += SELECT_BLOCK) { /* branchless, as select_<B> */
    int64_t len = n - k0 < SELECT_BLOCK ? n - k0 : SELECT_BLOCK, j = 0;
    for (int64_t k = k0; k < k0 + len; k++) {
      buf[j] = first + k * s[2];
      j += m[k * s[1]] != 0;
    }
    memcpy(w, buf, (size_t)j * sizeof *w);
    w += j;
  }
  c->cursor = (char *)w;
}

/* nonzero: the coordinates of each non-zero element, unravelled from its position. */
#define DEF_NONZERO(_, DN, DT, DK, ...)                                            \
  static void nonzero_##DN(char **p, const int64_t *s, int64_t n, void *vctx) {    \
    sel_ctx *c = vctx;                                                             \
    const char *x = p[1];                                                          \
    const int32_t nd = c->ndim;                                                    \
    const int64_t pos = (int64_t)(p[0] - c->pos_base);                             \
    int64_t *w = (int64_t *)c->cursor;                                             \
    for (int64_t k = 0; k < n; k++) {                                              \
      if (!NZ_##DK(*(const DT *)(x + k * s[1]))) continue;                         \
      int64_t q = pos + k * s[0];                                                  \
      for (int32_t d = nd - 1; d >= 0; d--) {                                      \
        w[d] = q % c->shape[d];                                                    \
        q /= c->shape[d];                                                          \
      }                                                                            \
      w += nd;                                                                     \
    }                                                                              \
    c->cursor = (char *)w;                                                         \
  }
TD_DTYPES_ALL(DEF_NONZERO, _)

#define LOOP_ENTRY(PREFIX, DN) [TD_##DN] = PREFIX##_##DN,
#define COUNT_ENTRY(_, DN, ...) LOOP_ENTRY(count, DN)
#define NONZERO_ENTRY(_, DN, ...) LOOP_ENTRY(nonzero, DN)
static const td_inner_loop count_loops[TD_NUM_DTYPES] = {TD_DTYPES_ALL(COUNT_ENTRY, _)};
static const td_inner_loop nonzero_loops[TD_NUM_DTYPES] = {TD_DTYPES_ALL(NONZERO_ENTRY, _)};

/* ---- the two-pass driver ----------------------------------------------------------- */

typedef struct sel_job {
  const td_iter *it;
  td_inner_loop loop;
  const sel_ctx *proto;
  int64_t *first; /* per chunk: its count, then its first output slot */
  char *out;
  int64_t slot;   /* output bytes per selected position */
} sel_job;

static void count_chunk(int64_t begin, int64_t end, void *arg) {
  sel_job *j = arg;
  sel_ctx c = *j->proto;
  c.count = 0;
  td_iter_run_range(j->it, begin, end, j->loop, &c);
  j->first[begin / TD_GRAIN] = c.count;
}

static void write_chunk(int64_t begin, int64_t end, void *arg) {
  sel_job *j = arg;
  sel_ctx c = *j->proto;
  c.cursor = j->out + j->first[begin / TD_GRAIN] * j->slot;
  td_iter_run_range(j->it, begin, end, j->loop, &c);
}

/* The count pass: the number of selected positions, or -1 after td_fail. job->first
 * is allocated here (each chunk's first slot) and freed by the caller. */
static int64_t count_pass(const char *call, sel_job *job) {
  int64_t chunks = td_parallel_chunks(job->it->numel, TD_GRAIN);
  job->first = malloc((size_t)(chunks > 0 ? chunks : 1) * sizeof *job->first);
  if (!job->first) {
    td_fail(TD_ENOMEM, "%s: out of memory", call);
    return -1;
  }
  td_parallel_for(job->it->numel, TD_GRAIN, count_chunk, job);
  int64_t total = 0;
  for (int64_t c = 0; c < chunks; c++) {
    int64_t n = job->first[c];
    job->first[c] = total;
    total += n;
  }
  return total;
}

static void write_pass(sel_job *job, td_inner_loop loop, char *out, int64_t slot) {
  job->loop = loop;
  job->out = out;
  job->slot = slot;
  td_parallel_for(job->it->numel, TD_GRAIN, write_chunk, job);
}

/* The position counter over shape (see the top of the file); any tensor lends it a
 * storage to point into. */
static void position_counter(const td_tensor *any, int32_t ndim, const int64_t *shape,
                             td_tensor *out) {
  td_view_set(out, any, 0, ndim, shape, NULL);
  out->dtype = TD_BOOL;
  out->itemsize = 1;
}

static bool check_mask(const char *call, const td_tensor *mask) {
  if (!td_check_cpu(call, mask, "mask")) return false;
  if (mask->dtype == TD_BOOL) return true;
  td_fail(TD_EDTYPE, "%s: mask dtype %s is not bool", call, td_dtype_name(mask->dtype));
  return false;
}

/* ---- public ------------------------------------------------------------------------ */

TD_EXPORT td_tensor *td_masked_select(const td_tensor *a, const td_tensor *mask) {
  const char *call = "masked_select";
  if (!a || !mask)
    return td_fail_null(TD_EINVAL, "%s: the %s is NULL", call, a ? "mask" : "tensor");
  int32_t nd;
  int64_t shape[TD_MAX_DIMS];
  if (!td_check_cpu(call, a, "tensor") || !check_mask(call, mask) ||
      !td_broadcast_shapes(call, a->ndim, a->shape, mask->ndim, mask->shape, &nd, shape))
    return NULL;
  td_tensor ax, mx, pos;
  if (td_tensor_expand(a, nd, shape, &ax) != TD_OK || td_tensor_expand(mask, nd, shape, &mx) != TD_OK)
    return NULL; /* cannot happen: the shapes broadcast */
  position_counter(mask, nd, shape, &pos);
  const td_tensor *ops[3] = {&pos, &mx, &ax};
  td_iter it;
  td_iter_init(&it, 3, ops);
  sel_ctx proto = {0};
  sel_job job = {.it = &it, .loop = count_loops[TD_BOOL], .proto = &proto};
  int64_t count = count_pass(call, &job);
  if (count < 0) return NULL;
  td_tensor *out = td_tensor_empty(1, &count, a->dtype);
  if (out) write_pass(&job, select_loop(a->itemsize), td_tensor_ptr(out), a->itemsize);
  free(job.first);
  return out;
}

TD_EXPORT td_tensor *td_nonzero(const td_tensor *a) {
  const char *call = "nonzero";
  if (!a) return td_fail_null(TD_EINVAL, "%s: the tensor is NULL", call);
  if (!td_check_cpu(call, a, "tensor")) return NULL;
  td_tensor pos;
  position_counter(a, a->ndim, a->shape, &pos);
  const td_tensor *ops[2] = {&pos, a};
  td_iter it;
  td_iter_init(&it, 2, ops);
  sel_ctx proto = {.pos_base = td_tensor_ptr(&pos), .ndim = a->ndim, .shape = a->shape};
  sel_job job = {.it = &it, .loop = count_loops[a->dtype], .proto = &proto};
  int64_t count = count_pass(call, &job);
  if (count < 0) return NULL;
  const int64_t shape[2] = {count, a->ndim};
  td_tensor *out = td_tensor_empty(2, shape, TD_INT64);
  if (out && a->ndim > 0)
    write_pass(&job, nonzero_loops[a->dtype], td_tensor_ptr(out), a->ndim * 8);
  free(job.first);
  return out;
}

/* The byte offsets (from a's first element) of the rows mask selects over a's leading
 * dims, in row-major order: a new int64 tensor [count], or NULL after td_fail. */
static td_tensor *row_offsets(const char *call, const td_tensor *a, const td_tensor *mask) {
  bool ok = mask->ndim <= a->ndim;
  for (int32_t d = 0; d < mask->ndim && ok; d++) ok = mask->shape[d] == a->shape[d];
  if (!ok) {
    char sm[TD_SHAPE_STR], sa[TD_SHAPE_STR];
    return td_fail_null(TD_ESHAPE,
                        "%s: mask shape %s does not match the leading dims of tensor shape %s",
                        call, td_format_shape(sm, sizeof sm, mask->ndim, mask->shape),
                        td_format_shape(sa, sizeof sa, a->ndim, a->shape));
  }
  if (a->ndim - mask->ndim + 1 > TD_MAX_DIMS)
    return td_fail_null(TD_ESHAPE, "%s: the result would have %d dims (at most %d)", call,
                        (int)(a->ndim - mask->ndim + 1), TD_MAX_DIMS);
  td_tensor lead, pos;
  td_view_set(&lead, a, a->offset, mask->ndim, mask->shape, a->strides);
  position_counter(mask, mask->ndim, mask->shape, &pos);
  const td_tensor *ops[3] = {&pos, mask, &lead};
  td_iter it;
  td_iter_init(&it, 3, ops);
  sel_ctx proto = {.src_base = td_tensor_ptr(a)};
  sel_job job = {.it = &it, .loop = count_loops[TD_BOOL], .proto = &proto};
  int64_t count = count_pass(call, &job);
  if (count < 0) return NULL;
  td_tensor *offs = td_tensor_empty(1, &count, TD_INT64);
  if (offs) write_pass(&job, select_offsets, td_tensor_ptr(offs), 8);
  free(job.first);
  return offs;
}

/* The shape [count, rest...] of the selected rows, and the views the movers need: a's
 * rows (stride 0 along the count dim) and the offsets (varying along it only). */
static int32_t rows_layout(const td_tensor *a, const td_tensor *mask, const td_tensor *offs,
                           int64_t *shape, td_tensor *rows, td_tensor *offv) {
  const int32_t k = mask->ndim, nd = a->ndim - k + 1;
  int64_t strides[TD_MAX_DIMS] = {0}, ostrides[TD_MAX_DIMS] = {0};
  shape[0] = offs->shape[0];
  ostrides[0] = 1;
  for (int32_t d = 1; d < nd; d++) {
    shape[d] = a->shape[k + d - 1];
    strides[d] = a->strides[k + d - 1];
  }
  td_view_set(rows, a, a->offset, nd, shape, strides);
  td_view_set(offv, offs, offs->offset, nd, shape, ostrides);
  return nd;
}

TD_EXPORT td_tensor *td_mask_rows(const td_tensor *a, const td_tensor *mask) {
  const char *call = "mask_rows";
  if (!a || !mask)
    return td_fail_null(TD_EINVAL, "%s: the %s is NULL", call, a ? "mask" : "tensor");
  if (!td_check_cpu(call, a, "tensor") || !check_mask(call, mask)) return NULL;
  td_tensor *offs = row_offsets(call, a, mask);
  if (!offs) return NULL;
  int64_t shape[TD_MAX_DIMS];
  td_tensor rows, offv;
  int32_t nd = rows_layout(a, mask, offs, shape, &rows, &offv);
  td_tensor *out = td_tensor_empty(nd, shape, a->dtype);
  if (out) td_take_run(out, &rows, &offv);
  td_tensor_release(offs);
  return out;
}

TD_EXPORT int32_t td_mask_rows_put_(td_tensor *a, const td_tensor *mask, const td_tensor *value) {
  const char *call = "mask_rows_put_";
  if (!a || !mask || !value)
    return td_fail(TD_EINVAL, "%s: the %s is NULL", call, !a ? "tensor" : !mask ? "mask" : "value");
  if (!td_check_cpu(call, a, "tensor") || !td_check_cpu(call, value, "value") ||
      !check_mask(call, mask) || !td_check_write_target(call, a))
    return td_last_status();
  td_tensor *offs = row_offsets(call, a, mask);
  if (!offs) return td_last_status();
  int64_t shape[TD_MAX_DIMS];
  td_tensor rows, offv, valx;
  int32_t nd = rows_layout(a, mask, offs, shape, &rows, &offv);
  td_tensor *source = td_source_for(a, value, a->dtype);
  int32_t status = source ? TD_OK : td_last_status();
  if (source && td_tensor_expand(source, nd, shape, &valx) != TD_OK) {
    char sv[TD_SHAPE_STR], ss[TD_SHAPE_STR];
    status = td_fail(TD_ESHAPE, "%s: value shape %s does not broadcast to the selected rows' "
                     "shape %s", call, td_format_shape(sv, sizeof sv, value->ndim, value->shape),
                     td_format_shape(ss, sizeof ss, nd, shape));
  } else if (source) {
    td_put_run(&rows, &valx, &offv, 0, TD_SCATTER_SET);
  }
  td_tensor_release(source);
  td_tensor_release(offs);
  return status;
}
