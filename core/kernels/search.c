/*
 * search.c: td_searchsorted, torch.searchsorted's binary search: for each value the
 * first slot of its row of the sequence whose element is >= the value (> when right),
 * probing the same elements torch does (mid = start + (end - start) / 2, "not >=" to go
 * right), so a NaN or an unsorted sequence gives torch's answer too. Values are split
 * between the pool's threads; each result depends on its value alone.
 */
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "../src/parallel.h"
#include "dtypes.h"

typedef struct search_job {
  const void *seq, *vals;
  const int64_t *sorter;
  int64_t len;       /* the sequence's last dim */
  int64_t vlen;      /* the values' last dim (values per row of the sequence) */
  bool rows;         /* a sequence row per values row (else one row for all) */
  bool right, out32;
  int32_t dtype;
  void *out;
  bool *clean;       /* per row of the sequence: sorted, no NaN */
} search_job;

/* Lanes searched side by side: their probes are independent loads, which the CPU
 * overlaps, where one search waits on each of its own. */
enum { LANES = 8 };

/* A row is clean when it is sorted and holds no NaN: then "not >= v" is true on a prefix
 * of it only, so any binary search finds torch's slot, and LANES of them can walk in
 * lockstep (the same halvings for every value: Khuong and Morin's branch-free search). A
 * NaN value goes past the end, as torch's loop sends it. Other rows take torch's own loop. */
#define SEARCH_ROW(ARG, DN, DT, DK, CT, ...)                                                \
  static bool clean_##DN(const DT *bd, const int64_t *so, int64_t len) {                    \
    for (int64_t i = 0; i < len; i++) {                                                     \
      const CT x = (CT)LOAD_##DK(bd[so ? so[i] : i]);                                       \
      if (x != x) return false;                                                             \
      if (i > 0 && x < (CT)LOAD_##DK(bd[so ? so[i - 1] : i - 1])) return false;             \
    }                                                                                       \
    return true;                                                                            \
  }                                                                                         \
  /* torch's loop: start + (end - start) / 2, "not >=" (left) or "not >" (right) */        \
  static int64_t exact_##DN(const DT *bd, const int64_t *so, int64_t len, CT v, bool right) { \
    int64_t start = 0, n = len;                                                             \
    while (n > 0) {                                                                         \
      const int64_t half = n >> 1, mid = start + half;                                      \
      const CT m = (CT)LOAD_##DK(bd[so ? so[mid] : mid]);                                   \
      const bool go = right ? !(m > v) : !(m >= v);                                         \
      start = go ? mid + 1 : start;                                                         \
      n = go ? n - half - 1 : half;                                                         \
    }                                                                                       \
    return start;                                                                           \
  }                                                                                         \
  /* count lanes of a clean row: each the number of elements < v (<= v when right) */       \
  static void lanes_##DN(const DT *bd, int64_t len, const DT *vals, int64_t count,          \
                         bool right, int64_t *out) {                                        \
    int64_t base[LANES];                                                                    \
    CT v[LANES];                                                                            \
    for (int k = 0; k < count; k++) base[k] = 0, v[k] = (CT)LOAD_##DK(vals[k]);             \
    int64_t n = len;                                                                        \
    while (n > 1) {                                                                         \
      const int64_t half = n >> 1;                                                          \
      for (int k = 0; k < count; k++) {                                                     \
        const CT m = (CT)LOAD_##DK(bd[base[k] + half - 1]);                                 \
        base[k] += (right ? m <= v[k] : m < v[k]) ? half : 0;                               \
      }                                                                                     \
      n -= half;                                                                            \
    }                                                                                       \
    for (int k = 0; k < count; k++) {                                                       \
      int64_t r = base[k];                                                                  \
      if (len > 0) {                                                                        \
        const CT m = (CT)LOAD_##DK(bd[r]);                                                  \
        r += (right ? m <= v[k] : m < v[k]) ? 1 : 0;                                        \
      }                                                                                     \
      out[k] = v[k] != v[k] ? len : r;                                                      \
    }                                                                                       \
  }                                                                                         \
  static void search_##DN(const search_job *j, int64_t b, int64_t e) {                     \
    const DT *seq = j->seq, *vals = j->vals;                                               \
    const int64_t len = j->len;                                                            \
    int64_t got[LANES];                                                                     \
    for (int64_t i = b; i < e;) {                                                           \
      const int64_t row = j->rows ? i / j->vlen : 0;                                        \
      const DT *bd = seq + row * len;                                                       \
      const int64_t *so = j->sorter ? j->sorter + row * len : NULL;                         \
      const int64_t row_end = j->rows ? (row + 1) * j->vlen : e;                            \
      const int64_t stop = row_end < e ? row_end : e;                                       \
      if (!so && j->clean[row]) {                                                           \
        for (; i < stop; i += LANES) {                                                      \
          const int64_t count = stop - i < LANES ? stop - i : LANES;                        \
          lanes_##DN(bd, len, vals + i, count, j->right, got);                              \
          for (int64_t k = 0; k < count; k++) put(j, i + k, got[k]);                        \
        }                                                                                   \
      } else {                                                                              \
        for (; i < stop; i++)                                                               \
          put(j, i, exact_##DN(bd, so, len, (CT)LOAD_##DK(vals[i]), j->right));             \
      }                                                                                     \
      i = stop;                                                                             \
    }                                                                                       \
  }
static inline void put(const search_job *j, int64_t i, int64_t slot) {
  if (j->out32) {
    ((int32_t *)j->out)[i] = (int32_t)slot;
  } else {
    ((int64_t *)j->out)[i] = slot;
  }
}
TD_DTYPES_NUM(SEARCH_ROW, _)
#undef SEARCH_ROW

static void clean_range(int64_t b, int64_t e, void *arg) {
  search_job *j = arg;
  for (int64_t r = b; r < e; r++) {
    const int64_t *so = j->sorter ? j->sorter + r * j->len : NULL;
#define CLEAN_CASE(ARG, DN, DT, ...) \
  case TD_##DN: j->clean[r] = clean_##DN((const DT *)j->seq + r * j->len, so, j->len); break;
    switch (j->dtype) {
      TD_DTYPES_NUM(CLEAN_CASE, _)
      default: j->clean[r] = false; break;
    }
#undef CLEAN_CASE
  }
}

static void search_range(int64_t b, int64_t e, void *arg) {
  const search_job *j = arg;
#define SEARCH_CASE(ARG, DN, ...) \
  case TD_##DN: search_##DN(j, b, e); break;
  switch (j->dtype) {
    TD_DTYPES_NUM(SEARCH_CASE, _)
    default: break;
  }
#undef SEARCH_CASE
}

TD_EXPORT td_tensor *td_searchsorted(const td_tensor *seq, const td_tensor *values, int32_t right,
                                     const td_tensor *sorter, int32_t out_int32) {
  const char *call = "searchsorted";
  if (!seq || !values) return td_fail_null(TD_EINVAL, "%s: NULL argument", call);
  if (!td_check_cpu(call, seq, "sorted_sequence") || !td_check_cpu(call, values, "values") ||
      (sorter && !td_check_cpu(call, sorter, "sorter")))
    return NULL;
  if (seq->ndim == 0)
    return td_fail_null(TD_ESHAPE, "%s: the sorted sequence must have at least one dim", call);
  if (seq->dtype != values->dtype)
    return td_fail_null(TD_EDTYPE, "%s: the sequence (%s) and the values (%s) must have one dtype",
                        call, td_dtype_name(seq->dtype), td_dtype_name(values->dtype));
  if (seq->dtype == TD_BOOL)
    return td_fail_null(TD_EDTYPE, "%s: bool sequences are not searched (torch refuses them too)",
                        call);
  bool rows = seq->ndim > 1;
  if (rows) {
    bool same = values->ndim == seq->ndim;
    for (int32_t d = 0; same && d < seq->ndim - 1; d++) same = seq->shape[d] == values->shape[d];
    if (!same) {
      char a[160], b[160];
      return td_fail_null(TD_ESHAPE, "%s: a sequence of %d dims needs values with the same leading "
                          "dims: sequence %s, values %s", call, (int)seq->ndim,
                          td_format_shape(a, sizeof a, seq->ndim, seq->shape),
                          td_format_shape(b, sizeof b, values->ndim, values->shape));
    }
  }
  const int64_t len = seq->shape[seq->ndim - 1];
  if (sorter) {
    bool same = sorter->ndim == seq->ndim && sorter->dtype == TD_INT64;
    for (int32_t d = 0; same && d < seq->ndim; d++) same = seq->shape[d] == sorter->shape[d];
    if (!same)
      return td_fail_null(TD_ESHAPE, "%s: sorter must be an int64 tensor of the sequence's shape",
                          call);
  }
  td_tensor *s = td_tensor_contiguous(seq), *v = td_tensor_contiguous(values);
  td_tensor *so = sorter ? td_tensor_contiguous(sorter) : NULL;
  td_tensor *out = s && v && (so || !sorter)
                       ? td_tensor_empty(values->ndim, values->shape, out_int32 ? TD_INT32 : TD_INT64)
                       : NULL;
  if (out && so) {
    const int64_t *p = (const int64_t *)td_tensor_ptr(so), m = td_tensor_numel(so);
    for (int64_t i = 0; i < m; i++) {
      if (p[i] < 0 || p[i] >= len) {
        td_fail(TD_EINDEX, "%s: sorter index %lld is out of range for a dim of size %lld", call,
                (long long)p[i], (long long)len);
        td_tensor_release(out);
        out = NULL;
        break;
      }
    }
  }
  const int64_t seq_rows = len ? td_tensor_numel(seq) / len : 0;
  bool *clean = out ? malloc((size_t)(seq_rows ? seq_rows : 1)) : NULL;
  if (out && !clean) {
    td_fail(TD_ENOMEM, "%s: out of memory", call);
    td_tensor_release(out);
    out = NULL;
  }
  if (out) {
    const int64_t n = td_tensor_numel(v);
    search_job j = {.seq = td_tensor_ptr(s), .vals = td_tensor_ptr(v),
                    .sorter = so ? (const int64_t *)td_tensor_ptr(so) : NULL, .len = len,
                    .vlen = values->ndim ? values->shape[values->ndim - 1] : 1, .rows = rows,
                    .right = right != 0, .out32 = out_int32 != 0, .dtype = seq->dtype,
                    .out = td_tensor_ptr(out), .clean = clean};
    if (seq_rows > 0) td_parallel_for(seq_rows, 1 + TD_GRAIN / (len ? len : 1), clean_range, &j);
    else clean[0] = true;
    /* grain: each value costs a search, not a copy */
    td_parallel_for(n, td_parallel_even_grain(n) / 4 + LANES, search_range, &j);
  }
  free(clean);
  td_tensor_release(s);
  td_tensor_release(v);
  td_tensor_release(so);
  return out;
}
