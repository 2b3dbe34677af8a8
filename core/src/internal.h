/*
 * internal.h: layouts and helpers shared by the files of libtensordict.
 * Nothing here is part of the ABI; the public header is core/include/tensordict.h.
 */
#ifndef TD_INTERNAL_H
#define TD_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "tensordict.h"

#if defined(__GNUC__)
#define TD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TD_EXPORT __attribute__((visibility("default")))
#else
#define TD_PRINTF(a, b)
#define TD_EXPORT
#endif

struct td_storage {
  atomic_int_fast64_t refcount;
  char *data;
  int64_t nbytes;       /* bytes usable through data */
  int64_t mapped_bytes; /* heap: the block's capacity; mappings: bytes to munmap */
  int32_t kind;         /* enum td_storage_kind */
  int32_t writable;
  int32_t device_type;  /* enum td_device_type */
  int32_t device_index;
  td_storage_free_fn free_fn; /* external kinds: frees data (td_storage_new_external) */
  void *free_ctx;
  int64_t small_block;  /* a small heap storage: its block's capacity (td_small_block); else 0 */
};

/* A small heap storage is one block: the storage, room for the header of the tensor
 * made with it (td_tensor_empty), and the data, 64-byte aligned like every heap
 * block. One allocation instead of three for a small result; the header lives as long
 * as the storage (it holds a reference to it). */
typedef struct td_small_block {
  _Alignas(64) td_storage storage;
  _Alignas(64) td_tensor header;
  _Alignas(64) char data[];
} td_small_block;
/* The largest small block (storage, header and data). */
#define TD_SMALL_BLOCK ((int64_t)64 << 10)
/* True when t is the header inside its own storage's block (freed with the storage). */
static inline bool td_header_is_inline(const td_tensor *t) {
  return t->storage->small_block && t == &((const td_small_block *)t->storage)->header;
}

/* ---- heap blocks (heap_cache.c) ---- */
/* A block of at least nbytes, 64-byte aligned (large ones 2 MiB aligned and maybe
 * reused); *capacity receives its real size, which td_heap_free needs back. */
void *td_heap_alloc(int64_t nbytes, int64_t *capacity);
void td_heap_free(void *data, int64_t capacity);
/* A heap storage of nbytes; *header receives the room for a header inside its block
 * when it is small, else NULL (storage.c). */
td_storage *td_storage_new_heap_with_header(int64_t nbytes, td_tensor **header);
/* A file storage of nbytes mapped from an open file (shared mapping; writable or
 * read-only, as the storage reports); nbytes 0 maps nothing. On failure returns NULL
 * and writes a reason (strerror) into why. The caller closes fd. */
td_storage *td_storage_map_fd(int fd, int64_t nbytes, int32_t writable, char *why, size_t why_len);
/* A block of nbytes (at most TD_SMALL_BLOCK) for a small storage, 64-byte aligned,
 * maybe reused; *capacity its real size, which td_small_free needs back. */
void *td_small_alloc(int64_t nbytes, int64_t *capacity);
void td_small_free(void *block, int64_t capacity);
/* Registers the cache's fork handler now (call before any fork). */
void td_heap_cache_before_fork(void);

/* ---- errors (error.c) ---- */
/* Records status and a printf-style message for td_last_error(); returns status. */
int32_t td_fail(int32_t status, const char *fmt, ...) TD_PRINTF(2, 3);
/* td_fail for the calls that return a pointer: records the error, returns NULL, so a
 * refusal is one line. */
void *td_fail_null(int32_t status, const char *fmt, ...) TD_PRINTF(2, 3);
/* Writes "[a, b, c]" into buf. */
const char *td_format_shape(char *buf, size_t len, int32_t ndim, const int64_t *shape);
enum { TD_SHAPE_STR = 16 * 22 + 4 };

/* ---- tensors (tensor.c) ---- */
/* A new owned header over s (retained), no bounds check: callers computed it.
 * strides NULL means contiguous. */
td_tensor *td_tensor_wrap(td_storage *s, int64_t offset, int32_t ndim, const int64_t *shape,
                          const int64_t *strides, int32_t dtype);
/* The C-order strides of shape (sizes 0 count as 1, so an empty tensor still gets
 * strides); false when they overflow int64. A shape td_shape_is_valid accepts never
 * overflows. */
bool td_contiguous_strides(int32_t ndim, const int64_t *shape, int64_t *strides);
/* Writes a caller-owned header over t's storage into out (out may alias t). */
void td_view_set(td_tensor *out, const td_tensor *t, int64_t offset, int32_t ndim,
                 const int64_t *shape, const int64_t *strides);
bool td_shape_is_valid(const char *call, int32_t ndim, const int64_t *shape, int64_t *numel);
bool td_check_dtype(const char *call, int32_t dtype);
bool td_check_writable(const char *call, const td_tensor *t);
/* CPU kernels refuse tensors in device memory; what names the operand ("source"). */
bool td_check_cpu(const char *call, const td_tensor *t, const char *what);
/* True when a and b are the same elements in the same order (a copy between them is a
 * no-op), and when their bytes may overlap otherwise (read one from a snapshot). */
bool td_same_layout(const td_tensor *a, const td_tensor *b);
bool td_tensors_overlap(const td_tensor *a, const td_tensor *b);
/* t as dtype, to read during one call: t itself when it has that dtype (no reference
 * taken and no allocation: the caller's holds it), else a cast copy, also put in *owned
 * for the caller to release. NULL after td_fail (copy.c). */
const td_tensor *td_as_dtype(const td_tensor *t, int32_t dtype, td_tensor **owned);
static inline char *td_tensor_ptr(const td_tensor *t) {
  return t->storage->data + t->offset * t->itemsize;
}
/* The stride of a slice of len elements with this step over a dim of this stride (the
 * tensor index and the container's index plan). A slice of at most one element never
 * steps to another, so it keeps the dim's own stride: stride * step would be a number
 * no element is reached by, and past 2^62 it overflows, here or where kernels scale
 * strides to bytes (issue 28). With two elements or more, stride * step reaches the
 * second one, inside the storage, so the product fits. */
static inline int64_t td_slice_stride(int64_t stride, int64_t step, int64_t len) {
  return len > 1 ? stride * step : stride;
}

/* ---- shapes (shape.c) ---- */
/* False with "<call>: dim d is out of range ..." unless 0 <= dim < ndim. */
bool td_check_dim(const char *call, const td_tensor *t, int32_t dim, int32_t ndim);
/* Copies shape into out with its one -1 resolved from t's element count; false with an
 * error when the shape is invalid or does not hold exactly t's elements. */
bool td_infer_shape(const char *call, const td_tensor *t, int32_t ndim, const int64_t *shape,
                    int64_t *out);
/* Strides that view t as shape (same element count) without a copy, or false. */
bool td_view_strides(const td_tensor *t, int32_t ndim, const int64_t *shape, int64_t *strides);
/* The broadcast of two shapes (numpy rules) into out_shape / *out_ndim; on failure
 * sets "<call>: shapes [..] and [..] do not broadcast" and returns false. */
bool td_broadcast_shapes(const char *call, int32_t a_ndim, const int64_t *a_shape,
                         int32_t b_ndim, const int64_t *b_shape, int32_t *out_ndim,
                         int64_t *out_shape);

/* ---- dtypes (dtype.c, from core/include/dtype_table.h) ---- */
extern const int64_t td_itemsizes[TD_NUM_DTYPES];
/* The finite range of a valid dtype as doubles (int64's max rounds up to 2^63, so
 * max + 1 is exact for every integer dtype). */
double td_dtype_lowest(int32_t dtype);
double td_dtype_max(int32_t dtype);
/* The integers a valid dtype holds exactly, [*lo, *hi]: an integer dtype's range, bool's
 * [0, 1], +-2^digits for a floating dtype. */
void td_dtype_exact_range(int32_t dtype, int64_t *lo, int64_t *hi);
/* "float16, bfloat16, float32, float64": the floating dtypes, for messages. */
const char *td_dtype_floating_names(void);

/* ---- text (text.c) ---- */
/* Growable NUL-terminated text; oom stays set after a failed growth (later puts do
 * nothing), so a writer checks once at the end. Start from {0}; the caller frees p. */
typedef struct td_sbuf {
  char *p;
  size_t n, cap;
  bool oom;
} td_sbuf;
void td_sb_put(td_sbuf *b, const void *s, size_t n);
void td_sb_puts(td_sbuf *b, const char *s);
void td_sb_putc(td_sbuf *b, char c);
/* The code point of the UTF-8 sequence at s (n > 0 bytes left) into *cp, and its
 * length; 0 when invalid (overlong, past U+10FFFF, or a surrogate unless surrogates:
 * JSON read from Python's files keeps lone \uD800 escapes in their 3-byte form). */
size_t td_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp, bool surrogates);
/* The value of a hex digit, or -1. */
int td_hex_value(char c);
/* ---- number.c: numbers from text (s[0, n), no NUL needed), whatever the locale ---- */
/* Drops the spaces and tabs around s[0, n). */
void td_trim_blanks(const char **s, int64_t *n);
/* Decimal text -> double, correctly rounded; blanks around it are dropped. False when
 * the text is not a number. */
bool td_parse_double(const char *s, int64_t n, double *out);
/* Integer text -> int64; blanks around it are dropped. 1 ok, 0 not an integer, -1 out
 * of int64's range. */
int td_parse_int64(const char *s, int64_t n, int64_t *out);

#endif
