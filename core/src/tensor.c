/*
 * tensor.c: tensor headers: creation over storage, reference counting, accessors,
 * and the shared argument checks. Views live in views.c, copies in kernels/copy.c.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

bool td_check_dtype(const char *call, int32_t dtype) {
  if (dtype >= 0 && dtype < TD_NUM_DTYPES) return true;
  td_fail(TD_EDTYPE, "%s: unknown dtype code %d", call, (int)dtype);
  return false;
}

bool td_shape_is_valid(const char *call, int32_t ndim, const int64_t *shape, int64_t *numel) {
  if (ndim < 0 || ndim > TD_MAX_DIMS) {
    td_fail(TD_ESHAPE, "%s: %d dims requested, at most %d supported", call, (int)ndim,
            TD_MAX_DIMS);
    return false;
  }
  if (ndim > 0 && !shape) {
    td_fail(TD_EINVAL, "%s: shape is NULL", call);
    return false;
  }
  /* n counts elements; span is what the contiguous strides reach (sizes 0 count as 1),
   * which must fit too: an empty tensor still gets strides, and kernels scale them to
   * bytes. */
  int64_t n = 1, span = 1;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      char buf[TD_SHAPE_STR];
      td_fail(TD_ESHAPE, "%s: negative size %lld in shape %s", call, (long long)shape[i],
              td_format_shape(buf, sizeof buf, ndim, shape));
      return false;
    }
    /* Element counts must also fit as byte counts of the widest dtype. */
    if (__builtin_mul_overflow(n, shape[i], &n) || n > INT64_MAX / 8) {
      char buf[TD_SHAPE_STR];
      td_fail(TD_ESHAPE, "%s: shape %s has too many elements", call,
              td_format_shape(buf, sizeof buf, ndim, shape));
      return false;
    }
    if (__builtin_mul_overflow(span, shape[i] > 1 ? shape[i] : 1, &span) || span > INT64_MAX / 8) {
      char buf[TD_SHAPE_STR];
      td_fail(TD_ESHAPE, "%s: shape %s is too large: its strides would overflow (the product "
              "of its nonzero sizes must stay below 2^60)", call,
              td_format_shape(buf, sizeof buf, ndim, shape));
      return false;
    }
  }
  if (numel) *numel = n;
  return true;
}

bool td_check_cpu(const char *call, const td_tensor *t, const char *what) {
  if (t->storage->device_type == TD_DEVICE_CPU) return true;
  td_fail(TD_EINVAL, "%s: the %s is in device memory; this CPU kernel reads host memory only",
          call, what);
  return false;
}

bool td_check_writable(const char *call, const td_tensor *t) {
  if (t->storage->writable) return true;
  td_fail(TD_EREADONLY, "%s: the tensor is read-only (its storage is a read-only mapping)",
          call);
  return false;
}

bool td_contiguous_strides(int32_t ndim, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int32_t i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    if (__builtin_mul_overflow(s, shape[i] > 1 ? shape[i] : 1, &s)) return false;
  }
  return true;
}

/* Fills every field but refcount; shape and strides may alias header's own arrays. The
 * dims past ndim are zeroed, so two headers of one layout are the same bytes. Plain
 * loops: a result's header is written several times per op, and at 1-3 dims a libc
 * memcpy / memset call costs more than the copy. */
static void set_layout(td_tensor *h, td_storage *s, int64_t offset, int32_t ndim,
                       const int64_t *shape, const int64_t *strides, int32_t dtype) {
  int64_t sh[TD_MAX_DIMS], st[TD_MAX_DIMS];
  for (int32_t i = 0; i < ndim; i++) sh[i] = shape[i];
  if (strides) {
    for (int32_t i = 0; i < ndim; i++) st[i] = strides[i];
  } else {
    (void)td_contiguous_strides(ndim, sh, st); /* callers validated the shape */
  }
  h->storage = s;
  h->offset = offset;
  h->ndim = ndim;
  h->dtype = dtype;
  h->itemsize = td_itemsizes[dtype];
  for (int32_t i = 0; i < TD_MAX_DIMS; i++) {
    h->shape[i] = i < ndim ? sh[i] : 0;
    h->strides[i] = i < ndim ? st[i] : 0;
  }
}

td_tensor *td_tensor_wrap(td_storage *s, int64_t offset, int32_t ndim, const int64_t *shape,
                          const int64_t *strides, int32_t dtype) {
  td_tensor *t = malloc(sizeof *t);
  if (!t) return td_fail_null(TD_ENOMEM, "tensor: out of memory");
  set_layout(t, s, offset, ndim, shape, strides, dtype);
  t->refcount = 1;
  td_storage_retain(s);
  return t;
}

void td_view_set(td_tensor *out, const td_tensor *t, int64_t offset, int32_t ndim,
                 const int64_t *shape, const int64_t *strides) {
  set_layout(out, t->storage, offset, ndim, shape, strides, t->dtype);
  out->refcount = 0;
}

static td_tensor *new_contiguous(const char *call, int32_t ndim, const int64_t *shape,
                                 int32_t dtype, bool shared) {
  int64_t numel;
  if (!td_check_dtype(call, dtype) || !td_shape_is_valid(call, ndim, shape, &numel)) return NULL;
  const int64_t nbytes = numel * td_itemsizes[dtype];
  td_tensor *inline_header = NULL;
  td_storage *s = shared ? td_storage_new_shared(nbytes)
                         : td_storage_new_heap_with_header(nbytes, &inline_header);
  if (!s) return NULL;
  if (inline_header) { /* the header in the storage's block takes its first reference */
    set_layout(inline_header, s, 0, ndim, shape, NULL, dtype);
    inline_header->refcount = 1;
    return inline_header;
  }
  td_tensor *t = td_tensor_wrap(s, 0, ndim, shape, NULL, dtype);
  td_storage_release(s);
  return t;
}

TD_EXPORT td_tensor *td_tensor_empty(int32_t ndim, const int64_t *shape, int32_t dtype) {
  return new_contiguous("empty", ndim, shape, dtype, false);
}

TD_EXPORT td_tensor *td_tensor_empty_shared(int32_t ndim, const int64_t *shape, int32_t dtype) {
  return new_contiguous("empty_shared", ndim, shape, dtype, true);
}

TD_EXPORT td_tensor *td_tensor_from_storage(td_storage *s, int64_t offset, int32_t ndim,
                                            const int64_t *shape, const int64_t *strides,
                                            int32_t dtype) {
  int64_t numel;
  if (!s) return td_fail_null(TD_EINVAL, "from_storage: storage is NULL");
  if (!td_check_dtype("from_storage", dtype) ||
      !td_shape_is_valid("from_storage", ndim, shape, &numel))
    return NULL;
  if (offset < 0)
    return td_fail_null(TD_EINDEX, "from_storage: negative offset %lld", (long long)offset);
  int64_t cstrides[TD_MAX_DIMS];
  if (!strides) {
    (void)td_contiguous_strides(ndim, shape, cstrides); /* td_shape_is_valid checked it */
    strides = cstrides;
  }
  /* The furthest element reachable must lie inside the storage. An empty tensor reaches
   * nothing, but kernels still scale its strides and extents to bytes, so those must fit
   * int64 as a reachable tensor's do (issue 28): the sizes past 0 count for the reach. */
  int64_t last = offset, bytes;
  for (int32_t i = 0; i < ndim; i++) {
    int64_t step;
    if (strides[i] < 0)
      return td_fail_null(TD_EINVAL, "from_storage: negative stride %lld", (long long)strides[i]);
    if (__builtin_mul_overflow(shape[i] > 0 ? shape[i] - 1 : 1, strides[i], &step) ||
        __builtin_add_overflow(last, step, &last) || last > INT64_MAX / td_itemsizes[dtype] - 1) {
      char buf[TD_SHAPE_STR];
      return td_fail_null(TD_EINDEX, "from_storage: strides %s reach past any storage",
                          td_format_shape(buf, sizeof buf, ndim, strides));
    }
  }
  if (numel && (__builtin_add_overflow(last, 1, &last) ||
                __builtin_mul_overflow(last, td_itemsizes[dtype], &bytes) || bytes > s->nbytes)) {
    char buf[TD_SHAPE_STR];
    return td_fail_null(TD_EINDEX,
                        "from_storage: shape %s at offset %lld needs more than the %lld bytes "
                        "of the storage",
                        td_format_shape(buf, sizeof buf, ndim, shape), (long long)offset,
                        (long long)s->nbytes);
  }
  return td_tensor_wrap(s, offset, ndim, shape, strides, dtype);
}

TD_EXPORT td_tensor *td_tensor_share(const td_tensor *t) {
  if (!t) return td_fail_null(TD_EINVAL, "share: the tensor is NULL");
  if (t->refcount > 0) {
    td_tensor_retain((td_tensor *)t);
    return (td_tensor *)t;
  }
  return td_tensor_wrap(t->storage, t->offset, t->ndim, t->shape, t->strides, t->dtype);
}

/* Caller-owned headers (refcount 0) are not counted: retain and release skip them. */
TD_EXPORT void td_tensor_retain(td_tensor *t) {
  if (t && __atomic_load_n(&t->refcount, __ATOMIC_RELAXED) > 0)
    __atomic_fetch_add(&t->refcount, 1, __ATOMIC_RELAXED);
}

TD_EXPORT void td_tensor_release(td_tensor *t) {
  if (!t || __atomic_load_n(&t->refcount, __ATOMIC_RELAXED) <= 0) return;
  if (__atomic_fetch_sub(&t->refcount, 1, __ATOMIC_ACQ_REL) != 1) return;
  const bool inline_header = td_header_is_inline(t); /* freed with its storage's block */
  td_storage_release(t->storage);
  if (!inline_header) free(t);
}

TD_EXPORT void td_tensor_release_slots(td_tensor **ts, const int32_t *slots, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    td_tensor_release(ts[slots[i]]);
    ts[slots[i]] = NULL;
  }
}

TD_EXPORT int64_t td_tensor_size(const td_tensor *t, int32_t d) {
  return d >= 0 && d < t->ndim ? t->shape[d] : -1;
}
TD_EXPORT int64_t td_tensor_stride(const td_tensor *t, int32_t d) {
  return d >= 0 && d < t->ndim ? t->strides[d] : -1;
}
TD_EXPORT void *td_tensor_data_borrow(const td_tensor *t) { return td_tensor_ptr(t); }
TD_EXPORT int32_t td_tensor_is_writable(const td_tensor *t) { return t->storage->writable; }
TD_EXPORT int32_t td_tensor_device_type(const td_tensor *t) { return t->storage->device_type; }
TD_EXPORT int32_t td_tensor_device_index(const td_tensor *t) { return t->storage->device_index; }

TD_EXPORT int64_t td_tensor_numel(const td_tensor *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

TD_EXPORT int32_t td_tensor_is_contiguous(const td_tensor *t) {
  for (int32_t i = 0; i < t->ndim; i++)
    if (t->shape[i] == 0) return 1; /* no element, no layout */
  int64_t expected = 1;
  for (int32_t i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] == 1) continue; /* a size-1 dim's stride never matters */
    if (t->strides[i] != expected) return 0;
    expected *= t->shape[i];
  }
  return 1;
}

/* [lo, hi) in bytes covered by t's elements, as integers (the tensors may be unrelated). */
static void byte_range(const td_tensor *t, uintptr_t *lo, uintptr_t *hi) {
  intptr_t l = 0, h = 0;
  for (int32_t d = 0; d < t->ndim; d++) {
    intptr_t ext = (intptr_t)(t->strides[d] * (t->shape[d] - 1) * t->itemsize);
    if (ext < 0) l += ext;
    else h += ext;
  }
  uintptr_t base = (uintptr_t)td_tensor_ptr(t);
  *lo = base + (uintptr_t)l;
  *hi = base + (uintptr_t)h + (uintptr_t)t->itemsize;
}

bool td_same_layout(const td_tensor *a, const td_tensor *b) {
  if (td_tensor_ptr(a) != td_tensor_ptr(b) || a->dtype != b->dtype || a->ndim != b->ndim)
    return false;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->strides[d] != b->strides[d]))
      return false;
  return true;
}

/* Addresses, not storages, are compared: two storages may map the same bytes (two
 * mappings of one file). A conservative test: ranges that interleave without sharing an
 * element still count as overlapping, which costs a copy, never a wrong result. */
bool td_tensors_overlap(const td_tensor *a, const td_tensor *b) {
  if (td_tensor_numel(a) == 0 || td_tensor_numel(b) == 0 || td_same_layout(a, b)) return false;
  uintptr_t alo, ahi, blo, bhi;
  byte_range(a, &alo, &ahi);
  byte_range(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}
