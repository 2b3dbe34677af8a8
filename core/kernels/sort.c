/*
 * sort.c: td_sort, the values of a tensor sorted along one dim and where each came from
 * (int64, 0-based), torch.sort's semantics: NaN is greater than everything (last when
 * ascending, first when descending), equal values keep their order (the sort is always
 * stable: ties are broken by position), -0.0 equals 0.0.
 *
 * The engine of sort_rows.h lives here too: order-preserving keys, items (a key and its
 * position), an LSD radix sort over them and a selection. Each row is sorted on its own;
 * many rows are split between the pool's threads, a few long ones are sorted one after
 * the other with the radix passes themselves on the pool. Items are all different, so
 * the result is the one stable order whatever the thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "../src/parallel.h"
#include "dtypes.h"
#include "sort_rows.h"

/* ---- keys (sort_rows.h) ----------------------------------------------------------- */

int td_key_bytes(int32_t dtype) { return (int)td_dtype_itemsize(dtype); }

uint64_t td_key_all(int32_t dtype) { return ~(uint64_t)0 >> (64 - 8 * td_key_bytes(dtype)); }

int64_t td_items_size(int kind) {
  return kind == TD_ITEMS_K64I ? 16 : kind == TD_ITEMS_K32 ? 4 : 8;
}

int td_items_kind(int32_t dtype, int64_t n, bool positions) {
  const bool wide = td_key_bytes(dtype) > 4;
  if (!positions) return wide ? TD_ITEMS_K64 : TD_ITEMS_K32;
  return wide || n > (int64_t)UINT32_MAX ? TD_ITEMS_K64I : TD_ITEMS_K32I;
}

void td_key_store(int32_t dtype, uint64_t key, void *dst) {
#define STORE_KEY(ARG, DN, DT, DK, CT, FAM, NAME, ALIAS, METHOD, LO, ...) \
  case TD_##DN:                                                          \
    *(DT *)dst = UNKEY_##DK(DT, LO, key);                                \
    return;
  switch (dtype) {
    TD_DTYPES_ALL(STORE_KEY, _)
    default: return;
  }
#undef STORE_KEY
}

double td_load_f64(int32_t dtype, const void *src, int64_t i) {
#define LOAD_ONE(ARG, DN, DT, DK, ...) \
  case TD_##DN: return (double)LOAD_##DK(((const DT *)src)[i]);
  switch (dtype) {
    TD_DTYPES_ALL(LOAD_ONE, _)
    default: return 0;
  }
#undef LOAD_ONE
}

/* ---- items ----------------------------------------------------------------------------- */

/* Rows at least this long are built, sorted and written out on the pool. */
enum { PAR_MIN = 16384, SMALL_ROW = 32 };

static bool on_pool(int64_t n) { return n >= PAR_MIN && td_get_num_threads() > 1; }
static int64_t grain_for(int64_t n) { return on_pool(n) ? td_parallel_even_grain(n) : (n > 0 ? n : 1); }

typedef struct build_job {
  const void *src;
  int32_t dtype;
  int kind;
  uint64_t flip;
  void *items;
  _Atomic int flags;
} build_job;

/* Items [b, e) of one dtype: a loop per kind. */
#define BUILD_ROW(ARG, DN, DT, DK, CT, FAM, NAME, ALIAS, METHOD, LO, ...)              \
  static int build_##DN(const DT *x, int64_t b, int64_t e, uint64_t flip, int kind,    \
                        void *items) {                                                 \
    int odd = 0;                                                                       \
    switch (kind) {                                                                    \
      case TD_ITEMS_K32I: {                                                            \
        uint64_t *it = items;                                                          \
        for (int64_t i = b; i < e; i++) {                                              \
          odd |= ODD_##DK(DT, x[i]);                                                       \
          it[i] = (KEY_##DK(DT, LO, x[i]) ^ flip) << 32 | (uint64_t)i;                 \
        }                                                                              \
        break;                                                                         \
      }                                                                                \
      case TD_ITEMS_K64I: {                                                            \
        td_u128 *it = items;                                                           \
        for (int64_t i = b; i < e; i++) {                                              \
          odd |= ODD_##DK(DT, x[i]);                                                       \
          it[i] = (td_u128)(KEY_##DK(DT, LO, x[i]) ^ flip) << 64 | (td_u128)(uint64_t)i; \
        }                                                                              \
        break;                                                                         \
      }                                                                                \
      case TD_ITEMS_K32: {                                                             \
        uint32_t *it = items;                                                          \
        for (int64_t i = b; i < e; i++) {                                              \
          odd |= ODD_##DK(DT, x[i]);                                                       \
          it[i] = (uint32_t)(KEY_##DK(DT, LO, x[i]) ^ flip);                           \
        }                                                                              \
        break;                                                                         \
      }                                                                                \
      default: {                                                                       \
        uint64_t *it = items;                                                          \
        for (int64_t i = b; i < e; i++) {                                              \
          odd |= ODD_##DK(DT, x[i]);                                                       \
          it[i] = KEY_##DK(DT, LO, x[i]) ^ flip;                                       \
        }                                                                              \
        break;                                                                         \
      }                                                                                \
    }                                                                                  \
    return odd;                                                                        \
  }
TD_DTYPES_ALL(BUILD_ROW, _)
#undef BUILD_ROW

static void build_range(int64_t b, int64_t e, void *arg) {
  build_job *j = arg;
  int odd = 0;
#define BUILD_CASE(ARG, DN, DT, ...) \
  case TD_##DN: odd = build_##DN(j->src, b, e, j->flip, j->kind, j->items); break;
  switch (j->dtype) {
    TD_DTYPES_ALL(BUILD_CASE, _)
    default: break;
  }
#undef BUILD_CASE
  if (odd) atomic_fetch_or(&j->flags, odd);
}

int td_items_build(const void *src, int32_t dtype, int64_t n, bool desc, int kind, void *items) {
  build_job job = {.src = src, .dtype = dtype, .kind = kind, .items = items,
                   .flip = desc ? td_key_all(dtype) : 0};
  td_parallel_for(n, grain_for(n), build_range, &job);
  return job.flags;
}

/* ---- the radix sort -------------------------------------------------------------------- */

/* Digits of 8 bits, of 11 from RADIX11 items on: a pass costs the same either way where
 * memory bounds it (a scatter of 1e7 items: ~85 ms for both here), and 11 bits make 3
 * passes of a 32-bit key instead of 4; below, 2048 buckets cost more than they save. */
enum { RADIX11 = 1 << 16, MAX_BUCKETS = 2048, MAX_DIGITS = 16 };

typedef struct radix_job {
  const void *from;
  void *to;
  int64_t grain;
  int shift, buckets;
  uint64_t mask;
  uint32_t *counts;  /* chunk c's histogram at c * buckets */
  int64_t *offsets;  /* chunk c's first slots at c * buckets */
} radix_job;

/* The chunks of a parallel sort: a few per thread (the result is the same for any). */
static int64_t radix_grain(int64_t n) {
  const int64_t pieces = 4 * (int64_t)td_get_num_threads();
  const int64_t g = (n + pieces - 1) / pieces;
  return g < PAR_MIN ? PAR_MIN : g;
}

/* Every item's first K digits counted into h[d * buckets ...]. */
#define HIST_DIGITS(ITEM, K)                                                              \
  for (int64_t i = 0; i < n; i++) {                                                       \
    const ITEM x = a[i];                                                                  \
    for (int d = 0; d < (K); d++) h[d * buckets + (size_t)((x >> (shift0 + db * d)) & mask)]++; \
  }

/* For one item type: histograms and scatters of chunks, insertion sort for short rows,
 * heapsort for introselect's way out, and the sort and selection themselves. */
#define DEF_ITEMS(ITEM, SUF)                                                              \
  static void hist_##SUF(int64_t b, int64_t e, void *arg) {                               \
    radix_job *j = arg;                                                                   \
    const ITEM *a = j->from;                                                              \
    uint32_t *h = j->counts + b / j->grain * j->buckets;                                  \
    const int s = j->shift;                                                               \
    const uint64_t mask = j->mask;                                                        \
    memset(h, 0, (size_t)j->buckets * sizeof *h);                                         \
    for (int64_t i = b; i < e; i++) h[(size_t)((a[i] >> s) & mask)]++;                    \
  }                                                                                       \
  static void scatter_##SUF(int64_t b, int64_t e, void *arg) {                            \
    radix_job *j = arg;                                                                   \
    const ITEM *a = j->from;                                                              \
    ITEM *to = j->to;                                                                     \
    int64_t off[MAX_BUCKETS];                                                             \
    memcpy(off, j->offsets + b / j->grain * j->buckets, (size_t)j->buckets * sizeof *off); \
    const int s = j->shift;                                                               \
    const uint64_t mask = j->mask;                                                        \
    for (int64_t i = b; i < e; i++) {                                                     \
      const ITEM x = a[i];                                                                \
      to[off[(size_t)((x >> s) & mask)]++] = x;                                           \
    }                                                                                     \
  }                                                                                       \
  static void insertion_##SUF(ITEM *a, int64_t n) {                                       \
    for (int64_t i = 1; i < n; i++) {                                                     \
      const ITEM x = a[i];                                                                \
      int64_t j = i;                                                                      \
      for (; j > 0 && a[j - 1] > x; j--) a[j] = a[j - 1];                                 \
      a[j] = x;                                                                           \
    }                                                                                     \
  }                                                                                       \
  static void sift_##SUF(ITEM *a, int64_t i, int64_t n) {                                 \
    const ITEM x = a[i];                                                                  \
    for (int64_t c; (c = 2 * i + 1) < n; i = c) {                                         \
      if (c + 1 < n && a[c + 1] > a[c]) c++;                                              \
      if (!(a[c] > x)) break;                                                             \
      a[i] = a[c];                                                                        \
    }                                                                                     \
    a[i] = x;                                                                             \
  }                                                                                       \
  static void heapsort_##SUF(ITEM *a, int64_t n) {                                        \
    for (int64_t i = n / 2; i-- > 0;) sift_##SUF(a, i, n);                                \
    for (int64_t e = n - 1; e > 0; e--) {                                                 \
      const ITEM t = a[0];                                                                \
      a[0] = a[e], a[e] = t;                                                              \
      sift_##SUF(a, 0, e);                                                                \
    }                                                                                     \
  }                                                                                       \
  /* One thread: every digit's histogram in one read, then the scatters. */               \
  static ITEM *radix_one_##SUF(ITEM *a, ITEM *b, int64_t n, int shift0, int digits, int db) { \
    const int64_t buckets = (int64_t)1 << db;                                             \
    const uint64_t mask = (uint64_t)buckets - 1;                                          \
    int64_t small[4 * 256];                                                               \
    int64_t *h = digits * buckets <= 4 * 256 ? small : malloc((size_t)(digits * buckets) * sizeof *h); \
    int64_t off_small[256];                                                               \
    int64_t *off = buckets <= 256 ? off_small : malloc((size_t)buckets * sizeof *off);    \
    if (!h || !off) {                                                                     \
      if (h != small) free(h);                                                            \
      if (off != off_small) free(off);                                                    \
      return NULL;                                                                        \
    }                                                                                     \
    memset(h, 0, (size_t)(digits * buckets) * sizeof *h);                                 \
    switch (digits) { /* a loop per count of digits, unrolled */                          \
      case 1: HIST_DIGITS(ITEM, 1); break;                                                \
      case 2: HIST_DIGITS(ITEM, 2); break;                                                \
      case 3: HIST_DIGITS(ITEM, 3); break;                                                \
      case 4: HIST_DIGITS(ITEM, 4); break;                                                \
      case 6: HIST_DIGITS(ITEM, 6); break;                                                \
      case 8: HIST_DIGITS(ITEM, 8); break;                                                \
      default: for (int64_t i = 0; i < n; i++) {                                          \
          const ITEM x = a[i];                                                            \
          for (int d = 0; d < digits; d++) h[d * buckets + (size_t)((x >> (shift0 + db * d)) & mask)]++; \
        }                                                                                 \
    }                                                                                     \
    for (int d = 0; d < digits; d++) {                                                    \
      const int64_t *hd = h + d * buckets;                                                \
      int64_t sum = 0;                                                                    \
      bool trivial = false;                                                               \
      for (int64_t k = 0; k < buckets; k++) {                                             \
        trivial |= hd[k] == n;                                                            \
        off[k] = sum, sum += hd[k];                                                       \
      }                                                                                   \
      if (trivial) continue;                                                              \
      const int s = shift0 + db * d;                                                      \
      for (int64_t i = 0; i < n; i++) {                                                   \
        const ITEM x = a[i];                                                              \
        b[off[(size_t)((x >> s) & mask)]++] = x;                                          \
      }                                                                                   \
      ITEM *t = a;                                                                        \
      a = b, b = t;                                                                       \
    }                                                                                     \
    if (h != small) free(h);                                                              \
    if (off != off_small) free(off);                                                      \
    return a;                                                                             \
  }                                                                                       \
  static ITEM *radix_##SUF(ITEM *a, ITEM *b, int64_t n, int shift0, int key_bytes) {      \
    if (n <= SMALL_ROW) {                                                                 \
      insertion_##SUF(a, n);                                                              \
      return a;                                                                           \
    }                                                                                     \
    const int db = n >= RADIX11 && key_bytes > 1 ? 11 : 8;                                \
    const int digits = (8 * key_bytes + db - 1) / db;                                     \
    if (!on_pool(n)) return radix_one_##SUF(a, b, n, shift0, digits, db);                 \
    const int64_t grain = radix_grain(n), chunks = td_parallel_chunks(n, grain);          \
    const int64_t buckets = (int64_t)1 << db;                                             \
    uint32_t *counts = malloc((size_t)(chunks * buckets) * sizeof *counts);               \
    int64_t *offsets = malloc((size_t)(chunks * buckets) * sizeof *offsets);              \
    if (!counts || !offsets) {                                                            \
      free(counts), free(offsets);                                                        \
      return NULL;                                                                        \
    }                                                                                     \
    radix_job job = {.grain = grain, .counts = counts, .offsets = offsets,                \
                     .buckets = (int)buckets, .mask = (uint64_t)buckets - 1};             \
    for (int d = 0; d < digits; d++) {                                                    \
      job.from = a, job.to = b, job.shift = shift0 + db * d;                              \
      td_parallel_for(n, grain, hist_##SUF, &job);                                        \
      int64_t sum = 0;                                                                    \
      bool trivial = false;                                                               \
      for (int64_t k = 0; k < buckets; k++) {                                             \
        const int64_t before = sum;                                                       \
        for (int64_t c = 0; c < chunks; c++) {                                            \
          offsets[c * buckets + k] = sum;                                                 \
          sum += counts[c * buckets + k];                                                 \
        }                                                                                 \
        trivial |= sum - before == n;                                                     \
      }                                                                                   \
      if (trivial) continue;                                                              \
      td_parallel_for(n, grain, scatter_##SUF, &job);                                     \
      ITEM *t = a;                                                                        \
      a = b, b = t;                                                                       \
    }                                                                                     \
    free(counts);                                                                         \
    free(offsets);                                                                        \
    return a;                                                                             \
  }                                                                                       \
  static void select_##SUF(ITEM *a, int64_t n, int64_t k) {                               \
    int64_t lo = 0, hi = n - 1;                                                           \
    int budget = 16;                                                                      \
    for (int64_t m = n; m > 1; m >>= 1) budget += 2;                                      \
    while (hi - lo > 16) {                                                                \
      if (budget-- == 0) { /* pivots went badly: sort what is left */                    \
        heapsort_##SUF(a + lo, hi - lo + 1);                                              \
        return;                                                                           \
      }                                                                                   \
      const int64_t mid = lo + (hi - lo) / 2;                                             \
      ITEM x = a[lo], y = a[mid], z = a[hi];                                              \
      const ITEM p = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y);   \
      int64_t i = lo, j = hi;                                                             \
      while (i <= j) {                                                                    \
        while (a[i] < p) i++;                                                             \
        while (a[j] > p) j--;                                                             \
        if (i <= j) {                                                                     \
          const ITEM t = a[i];                                                            \
          a[i++] = a[j], a[j--] = t;                                                      \
        }                                                                                 \
      }                                                                                   \
      if (k <= j) {                                                                       \
        hi = j;                                                                           \
      } else if (k >= i) {                                                                \
        lo = i;                                                                           \
      } else {                                                                            \
        return;                                                                           \
      }                                                                                   \
    }                                                                                     \
    insertion_##SUF(a + lo, hi - lo + 1);                                                 \
  }
DEF_ITEMS(uint32_t, u32)
DEF_ITEMS(uint64_t, u64)
DEF_ITEMS(td_u128, u128)
#undef DEF_ITEMS

void *td_items_sort(void *items, void *tmp, int64_t n, int kind, int key_bytes) {
  switch (kind) {
    case TD_ITEMS_K32I: return radix_u64(items, tmp, n, 32, key_bytes);
    case TD_ITEMS_K64I: return radix_u128(items, tmp, n, 64, key_bytes);
    case TD_ITEMS_K32: return radix_u32(items, tmp, n, 0, key_bytes);
    default: return radix_u64(items, tmp, n, 0, key_bytes);
  }
}

void *td_items_sort_full(void *items, void *tmp, int64_t n, int kind) {
  switch (kind) {
    case TD_ITEMS_K32I: return radix_u64(items, tmp, n, 0, 8);
    case TD_ITEMS_K64I: return radix_u128(items, tmp, n, 0, 16);
    case TD_ITEMS_K32: return radix_u32(items, tmp, n, 0, 4);
    default: return radix_u64(items, tmp, n, 0, 8);
  }
}

void td_items_select(void *items, int64_t n, int64_t k, int kind) {
  if (n <= 1) return;
  switch (kind) {
    case TD_ITEMS_K64I: select_u128(items, n, k); return;
    case TD_ITEMS_K32: select_u32(items, n, k); return;
    default: select_u64(items, n, k); return;
  }
}

/* ---- rows: dim last, contiguous ---------------------------------------------------------- */

static void perm_last(int32_t nd, int32_t dim, int32_t *perm, int32_t *back) {
  for (int32_t k = 0, j = 0; k < nd; k++)
    if (k != dim) perm[j++] = k;
  perm[nd - 1] = dim;
  for (int32_t k = 0; k < nd; k++) back[perm[k]] = k;
}

td_tensor *td_rows_of(const td_tensor *t, int32_t dim, const char *call) {
  if (!td_check_cpu(call, t, "tensor")) return NULL;
  const int32_t nd = t->ndim ? t->ndim : 1;
  if (dim < 0 || dim >= nd)
    return td_fail_null(TD_EINVAL, "%s: dim %d is out of range for %d dims", call, (int)dim,
                        (int)t->ndim);
  td_tensor moved = *t;
  if (t->ndim > 0) {
    int32_t perm[TD_MAX_DIMS], back[TD_MAX_DIMS];
    perm_last(t->ndim, dim, perm, back);
    if (td_tensor_permute(t, perm, &moved) < 0) return NULL;
  }
  return td_tensor_contiguous(&moved);
}

td_tensor *td_rows_back(td_tensor *moved, const td_tensor *t, int32_t dim) {
  if (!moved) return NULL;
  if (t->ndim == 0 || dim == t->ndim - 1) return moved;
  int32_t perm[TD_MAX_DIMS], back[TD_MAX_DIMS];
  perm_last(t->ndim, dim, perm, back);
  td_tensor v;
  td_tensor *out = td_tensor_permute(moved, back, &v) == 0 ? td_tensor_contiguous(&v) : NULL;
  td_tensor_release(moved);
  return out;
}

/* ---- td_sort --------------------------------------------------------------------------- */

typedef struct sort_job {
  const td_tensor *src; /* contiguous, dim last */
  td_tensor *values, *indices;
  int64_t n;            /* the row length */
  int32_t desc;
  int kind;
  _Atomic int32_t failed;
} sort_job;

typedef struct out_job {
  const void *items;
  int kind;
  int32_t dtype;
  uint64_t flip;
  bool gather;          /* values read from the row by position (a NaN, -0.0 in it) */
  const char *row;
  char *vals;
  int64_t *idx;
} out_job;

#define OUT_ROW(ARG, DN, DT, DK, CT, FAM, NAME, ALIAS, METHOD, LO, ...)                      \
  static void out_##DN(const out_job *o, int64_t b, int64_t e) {                           \
    const DT *row = (const DT *)o->row;                                                    \
    DT *v = (DT *)o->vals;                                                                 \
    if (o->kind == TD_ITEMS_K32I) {                                                        \
      const uint64_t *it = o->items;                                                       \
      if (o->gather) {                                                                     \
        for (int64_t j = b; j < e; j++) {                                                  \
          const int64_t p = (int64_t)(it[j] & 0xffffffffu);                                \
          v[j] = row[p], o->idx[j] = p;                                                    \
        }                                                                                  \
      } else {                                                                             \
        for (int64_t j = b; j < e; j++) {                                                  \
          v[j] = UNKEY_##DK(DT, LO, (it[j] >> 32) ^ o->flip);                              \
          o->idx[j] = (int64_t)(it[j] & 0xffffffffu);                                      \
        }                                                                                  \
      }                                                                                    \
    } else {                                                                               \
      const td_u128 *it = o->items;                                                        \
      for (int64_t j = b; j < e; j++) {                                                    \
        const int64_t p = (int64_t)(uint64_t)it[j];                                        \
        v[j] = o->gather ? row[p] : UNKEY_##DK(DT, LO, (uint64_t)(it[j] >> 64) ^ o->flip); \
        o->idx[j] = p;                                                                     \
      }                                                                                    \
    }                                                                                      \
  }
TD_DTYPES_ALL(OUT_ROW, _)
#undef OUT_ROW

static void out_range(int64_t b, int64_t e, void *arg) {
  const out_job *o = arg;
#define OUT_CASE(ARG, DN, ...) \
  case TD_##DN: out_##DN(o, b, e); break;
  switch (o->dtype) {
    TD_DTYPES_ALL(OUT_CASE, _)
    default: break;
  }
#undef OUT_CASE
}

/* Sorts row r into the results; a and b hold n items each. */
static bool sort_row(sort_job *job, int64_t r, void *a, void *b) {
  const int64_t n = job->n, isz = job->src->itemsize;
  const int32_t dtype = job->src->dtype;
  const char *row = td_tensor_ptr(job->src) + r * n * isz;
  const int odd = td_items_build(row, dtype, n, job->desc, job->kind, a);
  const void *sorted = td_items_sort(a, b, n, job->kind, td_key_bytes(dtype));
  if (!sorted) return false;
  out_job o = {.items = sorted, .kind = job->kind, .dtype = dtype, .row = row,
               .flip = job->desc ? td_key_all(dtype) : 0, .gather = odd != 0,
               .vals = td_tensor_ptr(job->values) + r * n * isz,
               .idx = (int64_t *)td_tensor_ptr(job->indices) + r * n};
  td_parallel_for(n, grain_for(n), out_range, &o);
  return true;
}

/* Rows of up to this many bytes of items (1024 of 8 bytes) sort in buffers on the stack. */
enum { STACK_ITEMS = 8192 };

static void sort_rows(int64_t begin, int64_t end, void *arg) {
  sort_job *job = arg;
  const int64_t bytes = job->n * td_items_size(job->kind);
  _Alignas(64) char stack_a[STACK_ITEMS], stack_b[STACK_ITEMS];
  int64_t cap_a = 0, cap_b = 0;
  const bool heap = bytes > STACK_ITEMS;
  void *a = heap ? td_heap_alloc(bytes, &cap_a) : stack_a;
  void *b = !a ? NULL : heap ? td_heap_alloc(bytes, &cap_b) : stack_b;
  for (int64_t r = begin; b && r < end; r++)
    if (!sort_row(job, r, a, b)) break;
  if (!a || !b || job->failed) job->failed = 1;
  if (heap && a) td_heap_free(a, cap_a);
  if (heap && b) td_heap_free(b, cap_b);
}

/* Rows split between threads when there are enough of them; else one row at a time with
 * the passes on the pool. */
static void run_rows(int64_t rows, int64_t n, td_range_fn fn, void *job) {
  if (rows <= 0) return;
  if (rows >= 2 * (int64_t)td_get_num_threads() || n < PAR_MIN) {
    const int64_t per = (1 << 16) / (n ? n : 1);
    td_parallel_for(rows, per > 0 ? per : 1, fn, job);
  } else {
    fn(0, rows, job);
  }
}

TD_EXPORT td_tensor *td_sort(const td_tensor *t, int32_t dim, int32_t descending,
                             td_tensor **indices) {
  if (!t || !indices) return td_fail_null(TD_EINVAL, "sort: NULL argument");
  *indices = NULL;
  td_tensor *src = td_rows_of(t, dim, "sort");
  td_tensor *vals = src ? td_tensor_empty(src->ndim, src->shape, src->dtype) : NULL;
  td_tensor *idx = vals ? td_tensor_empty(src->ndim, src->shape, TD_INT64) : NULL;
  td_tensor *out_v = NULL, *out_i = NULL;
  if (idx) {
    const int64_t n = t->ndim ? t->shape[dim] : 1, total = td_tensor_numel(src);
    sort_job job = {.src = src, .values = vals, .indices = idx, .n = n, .desc = descending != 0,
                    .kind = td_items_kind(src->dtype, n, true)};
    if (total > 0) run_rows(total / n, n, sort_rows, &job);
    if (job.failed) {
      td_fail(TD_ENOMEM, "sort: out of memory");
    } else {
      out_v = td_rows_back(vals, t, dim);
      vals = NULL;
      if (out_v) out_i = td_rows_back(idx, t, dim), idx = NULL;
    }
  }
  td_tensor_release(src);
  td_tensor_release(vals);
  td_tensor_release(idx);
  if (!out_v || !out_i) {
    td_tensor_release(out_v);
    td_tensor_release(out_i);
    return NULL;
  }
  *indices = out_i;
  return out_v;
}
