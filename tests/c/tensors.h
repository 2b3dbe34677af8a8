/*
 * tensors.h: what test_gather.c and test_join.c share: reading and writing elements
 * without the kernels, an odometer over shapes, and inputs of every dtype in several
 * layouts (contiguous, transposed, sliced with steps, expanded), filled with small
 * integers that every dtype holds exactly.
 */
#ifndef TD_TEST_TENSORS_H
#define TD_TEST_TENSORS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static const int32_t all_dtypes[TD_NUM_DTYPES] = {
    TD_BOOL, TD_UINT8, TD_INT8, TD_INT16, TD_INT32,
    TD_INT64, TD_FLOAT16, TD_BFLOAT16, TD_FLOAT32, TD_FLOAT64};

enum layout { CONTIGUOUS, TRANSPOSED, SLICED, EXPANDED, NUM_LAYOUTS };

static inline char *elem_ptr(const td_tensor *t, const int64_t *index) {
  char *p = td_tensor_data_borrow(t);
  for (int32_t d = 0; d < t->ndim; d++) p += index[d] * t->strides[d] * t->itemsize;
  return p;
}

/* An element as a double (every value the tests use is exact in every dtype). */
static inline double rd(const td_tensor *t, const int64_t *index) {
  const char *p = elem_ptr(t, index);
  switch (t->dtype) {
    case TD_BOOL: return *(const uint8_t *)p != 0;
    case TD_UINT8: return *(const uint8_t *)p;
    case TD_INT8: return *(const int8_t *)p;
    case TD_INT16: return *(const int16_t *)p;
    case TD_INT32: return *(const int32_t *)p;
    case TD_INT64: return (double)*(const int64_t *)p;
    case TD_FLOAT16: return td_half_to_float(*(const uint16_t *)p);
    case TD_BFLOAT16: return td_bfloat16_to_float(*(const uint16_t *)p);
    case TD_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
  }
}

static inline double clamp(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The value v (a small number read from any dtype) as dtype stores it, by the
 * library's float-to-integer rule: truncate and saturate. */
static inline double as_dtype(int32_t dtype, double v) {
  switch (dtype) {
    case TD_BOOL: return v != 0;
    case TD_UINT8: return trunc(clamp(v, 0, 255));
    case TD_INT8: return trunc(clamp(v, -128, 127));
    case TD_INT16: return trunc(clamp(v, -32768, 32767));
    case TD_INT32: return trunc(clamp(v, -2147483648.0, 2147483647.0));
    case TD_INT64: return trunc(v);
    case TD_FLOAT16: return td_half_to_float(td_float_to_half((float)v));
    case TD_BFLOAT16: return td_bfloat16_to_float(td_float_to_bfloat16((float)v));
    case TD_FLOAT32: return (float)v;
    default: return v;
  }
}

static inline void wr(const td_tensor *t, const int64_t *index, double v) {
  char *p = elem_ptr(t, index);
  switch (t->dtype) {
    case TD_BOOL: *(uint8_t *)p = v != 0; break;
    case TD_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
    case TD_INT8: *(int8_t *)p = (int8_t)(int64_t)v; break;
    case TD_INT16: *(int16_t *)p = (int16_t)(int64_t)v; break;
    case TD_INT32: *(int32_t *)p = (int32_t)(int64_t)v; break;
    case TD_INT64: *(int64_t *)p = (int64_t)v; break;
    case TD_FLOAT16: *(uint16_t *)p = td_float_to_half((float)v); break;
    case TD_BFLOAT16: *(uint16_t *)p = td_float_to_bfloat16((float)v); break;
    case TD_FLOAT32: *(float *)p = (float)v; break;
    default: *(double *)p = v; break;
  }
}

/* Steps index through shape like an odometer; false after the last index. */
static inline bool next_index(int32_t ndim, const int64_t *shape, int64_t *index) {
  for (int32_t d = ndim - 1; d >= 0; d--) {
    if (++index[d] < shape[d]) return true;
    index[d] = 0;
  }
  return false;
}

static inline int64_t numel_of(int32_t ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

/* The test value at linear position i: small integers, some negative (not for the
 * unsigned dtypes), every third one true for bool. */
static inline double pattern(int32_t dtype, int64_t i, int seed) {
  int64_t v = (i * 37 + seed * 11 + 5) % 23;
  if (dtype == TD_BOOL) return v % 3 == 0;
  if (dtype == TD_UINT8) return (double)v;
  return (double)(v - 7);
}

/* A new owned tensor of shape and dtype in the given layout, holding pattern values
 * (laid out in the backing storage, so each layout sees its own arrangement). */
static inline td_tensor *make(int32_t ndim, const int64_t *shape, int32_t dtype, int layout, int seed) {
  int64_t base_shape[TD_MAX_DIMS] = {0};
  for (int32_t d = 0; d < ndim; d++) base_shape[d] = shape[d];
  if (layout == TRANSPOSED)
    for (int32_t d = 0; d < ndim; d++) base_shape[d] = shape[ndim - 1 - d];
  if (layout == SLICED)
    for (int32_t d = 0; d < ndim; d++) base_shape[d] = 2 * shape[d] + 1;
  if (layout == EXPANDED && ndim > 0) base_shape[0] = 1;
  td_tensor *base = td_tensor_empty(ndim, base_shape, dtype);
  if (!base) return NULL;
  int64_t n = numel_of(ndim, base_shape), index[TD_MAX_DIMS] = {0};
  for (int64_t i = 0; i < n; i++) {
    wr(base, index, pattern(dtype, i, seed));
    next_index(ndim, base_shape, index);
  }
  td_tensor view = *base;
  view.refcount = 0;
  if (layout == TRANSPOSED) {
    int32_t perm[TD_MAX_DIMS];
    for (int32_t d = 0; d < ndim; d++) perm[d] = ndim - 1 - d;
    td_tensor_permute(base, perm, &view);
  } else if (layout == SLICED) {
    for (int32_t d = 0; d < ndim; d++) td_tensor_slice(&view, d, 1, 2 * shape[d] + 1, 2, &view);
  } else if (layout == EXPANDED) {
    td_tensor_expand(base, ndim, shape, &view);
  }
  td_tensor *t = td_tensor_share(&view);
  td_tensor_release(base);
  return t;
}

/* A 1-D index tensor of the given integer dtype. */
static inline td_tensor *index_of(int32_t dtype, int64_t n, const int64_t *values) {
  td_tensor *t = td_tensor_empty(1, &n, dtype);
  for (int64_t i = 0; i < n; i++) wr(t, &i, (double)values[i]);
  return t;
}

static inline bool same_shape(const td_tensor *t, int32_t ndim, const int64_t *shape) {
  if (!t || t->ndim != ndim) return false;
  for (int32_t d = 0; d < ndim; d++)
    if (t->shape[d] != shape[d]) return false;
  return true;
}

/* The raw bytes of two contiguous tensors are equal. */
static inline bool same_bytes(const td_tensor *a, const td_tensor *b) {
  if (!a || !b || a->dtype != b->dtype || !same_shape(b, a->ndim, a->shape)) return false;
  if (!td_tensor_is_contiguous(a) || !td_tensor_is_contiguous(b)) return false;
  return memcmp(td_tensor_data_borrow(a), td_tensor_data_borrow(b),
                (size_t)(td_tensor_numel(a) * a->itemsize)) == 0;
}

/* A read-only float32 tensor of n elements (0, 1, ...) mapped from a temporary file;
 * *storage and the path are released by ro_close. */
typedef struct ro_file {
  char path[64];
  td_storage *storage;
  td_tensor *t;
} ro_file;

static inline bool ro_open(ro_file *f, int64_t n) {
  strcpy(f->path, "/tmp/td_test_ro_XXXXXX");
  f->storage = NULL;
  f->t = NULL;
  int fd = mkstemp(f->path);
  if (fd < 0) return false;
  bool ok = true;
  for (int64_t k = 0; k < n && ok; k++) {
    float v = (float)k;
    ok = write(fd, &v, sizeof v) == (ssize_t)sizeof v;
  }
  close(fd);
  if (ok) f->storage = td_storage_map_file(f->path, n * 4, TD_MAP_READ);
  if (f->storage) f->t = td_tensor_from_storage(f->storage, 0, 1, &n, NULL, TD_FLOAT32);
  return f->t != NULL;
}

static inline void ro_close(ro_file *f) {
  td_tensor_release(f->t);
  td_storage_release(f->storage);
  unlink(f->path);
}

#endif
