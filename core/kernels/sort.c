/*
 * sort.c: td_sort, the values of a tensor sorted along one dim and where each came from
 * (int64, 0-based), torch.sort's semantics: NaN is greater than everything (last when
 * ascending, first when descending), equal values keep their order (the sort is always
 * stable: ties are broken by position), -0.0 equals 0.0.
 *
 * Each row along dim is sorted on its own (rows split between the pool's threads, so
 * the result does not depend on the thread count): its keys are loaded once, as double
 * (exact for every dtype but int64) or as int64, and an index array is sorted by them.
 */
#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"
#include "../src/parallel.h"
#include "dtypes.h"
#include "row_keys.h"

typedef struct sort_job {
  const td_tensor *src; /* contiguous, dim last */
  td_tensor *values, *indices;
  int64_t n;            /* the row length */
  int32_t desc;
  _Atomic int32_t failed;
} sort_job;

typedef struct key_ctx {
  const double *d;
  const int64_t *i;
  int32_t desc;
} key_ctx;

static int cmp_double(const void *pa, const void *pb, void *arg) {
  const key_ctx *c = arg;
  const int64_t ia = *(const int64_t *)pa, ib = *(const int64_t *)pb;
  const double a = c->d[ia], b = c->d[ib];
  const int an = a != a, bn = b != b;
  int r = (an || bn) ? an - bn : (a > b) - (a < b); /* NaN is the greatest */
  if (c->desc) r = -r;
  return r ? r : (ia > ib) - (ia < ib);
}

static int cmp_int64(const void *pa, const void *pb, void *arg) {
  const key_ctx *c = arg;
  const int64_t ia = *(const int64_t *)pa, ib = *(const int64_t *)pb;
  const int64_t a = c->i[ia], b = c->i[ib];
  int r = (a > b) - (a < b);
  if (c->desc) r = -r;
  return r ? r : (ia > ib) - (ia < ib);
}


static void sort_rows(int64_t begin, int64_t end, void *arg) {
  sort_job *job = arg;
  const int64_t n = job->n, isz = job->src->itemsize;
  const bool ints = job->src->dtype == TD_INT64;
  void *keys = malloc((size_t)(n ? n : 1) * 8);
  int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
  if (!keys || !order) {
    job->failed = 1;
    free(keys), free(order);
    return;
  }
  key_ctx c = {.d = keys, .i = keys, .desc = job->desc};
  const char *src = td_tensor_ptr(job->src);
  char *vals = td_tensor_ptr(job->values);
  int64_t *idx = (int64_t *)td_tensor_ptr(job->indices);
  for (int64_t r = begin; r < end; r++) {
    td_row_keys(job->src, r, n, keys, keys);
    for (int64_t j = 0; j < n; j++) order[j] = j;
    qsort_r(order, (size_t)n, sizeof *order, ints ? cmp_int64 : cmp_double, &c);
    const char *row = src + r * n * isz;
    char *out = vals + r * n * isz;
    for (int64_t j = 0; j < n; j++) memcpy(out + j * isz, row + order[j] * isz, (size_t)isz);
    memcpy(idx + r * n, order, (size_t)n * sizeof *order);
  }
  free(keys);
  free(order);
}

TD_EXPORT td_tensor *td_sort(const td_tensor *t, int32_t dim, int32_t descending,
                             td_tensor **indices) {
  if (!t || !indices) return td_fail_null(TD_EINVAL, "sort: NULL argument");
  *indices = NULL;
  if (!td_check_cpu("sort", t, "tensor")) return NULL;
  const int32_t nd = t->ndim ? t->ndim : 1;
  if (dim < 0 || dim >= nd)
    return td_fail_null(TD_EINVAL, "sort: dim %d is out of range for %d dims", (int)dim, (int)t->ndim);
  /* dim last, contiguous: each row one run of memory */
  td_tensor moved = *t;
  int32_t perm[TD_MAX_DIMS], back[TD_MAX_DIMS];
  if (t->ndim > 0) {
    for (int32_t k = 0, j = 0; k < t->ndim; k++)
      if (k != dim) perm[j++] = k;
    perm[t->ndim - 1] = dim;
    for (int32_t k = 0; k < t->ndim; k++) back[perm[k]] = k;
    if (td_tensor_permute(t, perm, &moved) < 0) return NULL;
  }
  td_tensor *src = td_tensor_contiguous(&moved);
  td_tensor *vals = src ? td_tensor_empty(src->ndim, src->shape, src->dtype) : NULL;
  td_tensor *idx = vals ? td_tensor_empty(src->ndim, src->shape, TD_INT64) : NULL;
  td_tensor *out_v = NULL, *out_i = NULL;
  if (idx) {
    const int64_t n = t->ndim ? t->shape[dim] : 1, total = td_tensor_numel(src);
    sort_job job = {.src = src, .values = vals, .indices = idx, .n = n, .desc = descending != 0};
    if (total > 0) {
      const int64_t rows = total / n, per = rows > 0 ? (1 << 16) / (n ? n : 1) : 1;
      td_parallel_for(rows, per > 0 ? per : 1, sort_rows, &job);
    }
    if (job.failed) {
      td_fail(TD_ENOMEM, "sort: out of memory");
    } else if (t->ndim == 0) {
      out_v = vals, out_i = idx, vals = idx = NULL;
    } else { /* back to t's order of dims, contiguous as torch's results */
      td_tensor vb, ib;
      if (td_tensor_permute(vals, back, &vb) == 0 && td_tensor_permute(idx, back, &ib) == 0) {
        out_v = td_tensor_contiguous(&vb);
        out_i = out_v ? td_tensor_contiguous(&ib) : NULL;
      }
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
