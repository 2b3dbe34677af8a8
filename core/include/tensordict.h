/*
 * tensordict.h: the one public declaration of libtensordict's ABI.
 *
 * The Lua cdefs are generated from this file at build time (scripts/gen_cdefs.lua):
 * keep it FFI-clean. Fixed-width types only, enums with explicit values, no macros
 * inside declarations. Preprocessor lines are dropped by the generator, except
 * TD_ABI_VERSION, which it reads so the Lua loader can check the library it opens.
 *
 * Conventions (see docs/c-api.md):
 * - 0-based dims and indices, half-open ranges, shapes and strides in int64_t,
 *   strides counted in elements.
 * - A fallible function returns int (0 ok, negative TD_E* code) or a pointer (NULL on
 *   error), and sets a thread-local message read by td_last_error().
 * - Every function returning an object returns a new reference; release it with the
 *   matching *_release. Results named *_borrow are not references.
 */
#ifndef TENSORDICT_H
#define TENSORDICT_H

#include <stddef.h>
#include <stdint.h>

#define TD_ABI_VERSION 4

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions and errors ------------------------------------------------------- */

int32_t td_abi_version(void);
const char *td_version_string(void);

enum td_status {
  TD_OK = 0,
  TD_EINVAL = -1,    /* an argument is malformed */
  TD_ENOMEM = -2,    /* an allocation failed */
  TD_EINDEX = -3,    /* an index or dim is out of range */
  TD_ESHAPE = -4,    /* shapes do not match or do not broadcast */
  TD_EDTYPE = -5,    /* a dtype is unknown or refused */
  TD_EIO = -6,       /* a file operation failed */
  TD_EREADONLY = -7  /* a write into read-only memory */
};

/* The message of the last failed call on this thread ("" when none). */
const char *td_last_error(void);
/* The status code of the last failed call on this thread (TD_OK when none). */
int32_t td_last_status(void);
void td_clear_error(void);
/* Records an error for td_last_error(), as the library's own calls do: for companion
 * libraries (the CUDA backend) whose failures the same callers read. */
void td_set_error(int32_t status, const char *message);

/* ---- dtypes ---------------------------------------------------------------------- */

enum td_dtype {
  TD_BOOL = 0,
  TD_UINT8 = 1,
  TD_INT8 = 2,
  TD_INT16 = 3,
  TD_INT32 = 4,
  TD_INT64 = 5,
  TD_FLOAT16 = 6,
  TD_BFLOAT16 = 7,
  TD_FLOAT32 = 8,
  TD_FLOAT64 = 9
};

enum td_limits { TD_NUM_DTYPES = 10, TD_MAX_DIMS = 16 };

/* "float32", "torch.float32" and torch's aliases ("float", "long", "half", ...):
 * the dtype code, or TD_EDTYPE with a message naming the string. */
int32_t td_dtype_from_name(const char *name);
/* Canonical name ("float32"); NULL for an unknown code. */
const char *td_dtype_name(int32_t dtype);
/* Bytes per element; 0 for an unknown code. */
int64_t td_dtype_itemsize(int32_t dtype);
int32_t td_dtype_is_floating(int32_t dtype);
/* The largest value of a dtype (the largest finite one of a floating dtype: 65504 for
 * float16), from the dtype table; 0 for an unknown code. */
double td_dtype_max(int32_t dtype);

/* IEEE half and bfloat16 bit patterns, round-to-nearest-even, NaN and Inf kept. */
uint16_t td_float_to_half(float value);
float td_half_to_float(uint16_t bits);
uint16_t td_float_to_bfloat16(float value);
float td_bfloat16_to_float(uint16_t bits);

/* ---- storage --------------------------------------------------------------------- */

typedef struct td_storage td_storage;

enum td_storage_kind {
  TD_STORAGE_HEAP = 0,    /* malloc'd, 64-byte aligned */
  TD_STORAGE_FILE = 1,    /* a shared mapping of a file */
  TD_STORAGE_SHARED = 2,  /* anonymous shared memory, inherited by forked workers */
  TD_STORAGE_DEVICE = 3,  /* accelerator memory (the CUDA backend) */
  TD_STORAGE_PINNED = 4   /* page-locked host memory (the CUDA backend) */
};

enum td_device_type { TD_DEVICE_CPU = 0, TD_DEVICE_CUDA = 1 };

enum td_map_mode {
  TD_MAP_READ = 0,       /* existing file, read-only mapping */
  TD_MAP_READWRITE = 1,  /* existing file, writes reach the file */
  TD_MAP_CREATE = 2      /* create or truncate the file to nbytes, read-write */
};

td_storage *td_storage_new_heap(int64_t nbytes);
td_storage *td_storage_new_shared(int64_t nbytes);
/* Maps nbytes of the file at path. A file longer than nbytes is fine (the rest is not
 * mapped); a shorter one is an error naming both sizes. */
td_storage *td_storage_map_file(const char *path, int64_t nbytes, int32_t mode);
/* Memory someone else allocated, handed over with the call that frees it: release
 * calls free_fn(data, ctx) once the last reference goes. kind is TD_STORAGE_DEVICE
 * (device_type TD_DEVICE_CUDA, device memory that CPU kernels refuse) or
 * TD_STORAGE_PINNED (device_type TD_DEVICE_CPU, host memory). The CUDA backend's
 * caching allocator makes its storages so. */
typedef void (*td_storage_free_fn)(void *data, void *ctx);
td_storage *td_storage_new_external(int32_t kind, void *data, int64_t nbytes,
                                    int32_t device_type, int32_t device_index,
                                    td_storage_free_fn free_fn, void *ctx);
void td_storage_retain(td_storage *s);
void td_storage_release(td_storage *s);
int64_t td_storage_nbytes(const td_storage *s);
void *td_storage_data_borrow(const td_storage *s);
int32_t td_storage_kind(const td_storage *s);
int32_t td_storage_is_writable(const td_storage *s);
int32_t td_storage_device_type(const td_storage *s);
int32_t td_storage_device_index(const td_storage *s);
/* Flushes a file mapping to disk (msync); a no-op for memory kinds. */
int32_t td_storage_sync(td_storage *s);
/* Bytes held right now by heap and shared storages of this process. */
int64_t td_live_bytes(void);
/* Freed large heap blocks are kept for reuse (at most TD_CACHE_BYTES, 1 GiB by
 * default): how many bytes wait there, and a call that returns them to the system.
 * Small storages (a block under 64 KiB holding storage, header and data) also wait in
 * free lists, at most a sixteenth of that limit; td_cached_bytes leaves them out (they
 * are the allocator's working set), td_release_cached_memory returns them too. */
int64_t td_cached_bytes(void);
int64_t td_release_cached_memory(void);
/* Joins the library's worker threads and returns its cached blocks; both come back on
 * demand. Unloading the library does the same (a host closing its Lua state). */
void td_shutdown(void);

/* ---- tensors --------------------------------------------------------------------- */

/*
 * A tensor is a header: a strided view of one storage. The struct is public so that
 * callers, Lua included, can hold headers by value and read shapes without a call.
 * Headers come in two kinds:
 *  - owned headers, returned by pointer from the functions that create tensors
 *    (td_tensor_empty, clone, reshape, ...): refcount >= 1, they hold one reference
 *    to their storage, and td_tensor_retain / td_tensor_release manage them;
 *  - caller-owned headers, which the view functions write into memory the caller
 *    provides: refcount 0 and no storage reference, so the caller keeps the viewed
 *    tensor alive while it uses them; retain and release do nothing to them.
 *    td_tensor_share makes an owned header from either kind.
 * Treat the fields as read-only; the functions below keep them consistent.
 */
typedef struct td_tensor {
  int64_t refcount;     /* owned: the reference count; caller-owned: 0 */
  td_storage *storage;
  int64_t offset;       /* of element [0, ..., 0], in elements */
  int64_t itemsize;     /* bytes per element */
  int32_t ndim;
  int32_t dtype;        /* enum td_dtype */
  int64_t shape[TD_MAX_DIMS];
  int64_t strides[TD_MAX_DIMS]; /* in elements, >= 0 */
} td_tensor;

/* New contiguous owned tensors; ndim 0 is a scalar, 0-size dims are allowed. */
td_tensor *td_tensor_empty(int32_t ndim, const int64_t *shape, int32_t dtype);
td_tensor *td_tensor_empty_shared(int32_t ndim, const int64_t *shape, int32_t dtype);
td_tensor *td_tensor_full(int32_t ndim, const int64_t *shape, int32_t dtype, double value);
/* n values start, start + step, ... cast to dtype. */
td_tensor *td_tensor_arange(double start, double step, int64_t n, int32_t dtype);
/* steps values from start to stop, both included, evenly spaced (torch.linspace: the
 * first half counts up from start, the second down from stop, so both ends are exact),
 * computed in double and cast to dtype. */
td_tensor *td_tensor_linspace(double start, double stop, int64_t steps, int32_t dtype);
/* A copy of t with the elements off a triangle of its last two dims zeroed: lower keeps
 * column - row <= k (torch.tril), otherwise column - row >= k (torch.triu). */
td_tensor *td_tensor_triangle(const td_tensor *t, int64_t k, int32_t lower);
/* An owned tensor over existing storage; strides NULL means contiguous. Every
 * reachable element must lie inside the storage. */
td_tensor *td_tensor_from_storage(td_storage *s, int64_t offset, int32_t ndim,
                                  const int64_t *shape, const int64_t *strides,
                                  int32_t dtype);
/* An owned header equal to t (t itself, retained, when t is owned). */
td_tensor *td_tensor_share(const td_tensor *t);

void td_tensor_retain(td_tensor *t);
void td_tensor_release(td_tensor *t);
/* Releases ts[slots[i]] for i in [0, n) and sets those entries to NULL: how the Lua
 * layer returns the tensors of the handles one GC cycle found dead, in one call. */
void td_tensor_release_slots(td_tensor **ts, const int32_t *slots, int64_t n);

/* Size and stride of dim d; -1 when d is out of range. */
int64_t td_tensor_size(const td_tensor *t, int32_t d);
int64_t td_tensor_stride(const td_tensor *t, int32_t d);
int64_t td_tensor_numel(const td_tensor *t);
/* Address of element [0, ..., 0]. */
void *td_tensor_data_borrow(const td_tensor *t);
int32_t td_tensor_is_contiguous(const td_tensor *t);
int32_t td_tensor_is_writable(const td_tensor *t);
int32_t td_tensor_device_type(const td_tensor *t);
int32_t td_tensor_device_index(const td_tensor *t);

/* ---- views: caller-owned headers over the same storage, written into out -------------
 * Each returns 0, or a negative TD_E* code leaving out untouched. out may be t itself
 * when t is caller-owned. */

int32_t td_tensor_select(const td_tensor *t, int32_t dim, int64_t index, td_tensor *out);
/* Python slice semantics: negative start/stop count from the end, both are clamped
 * to [0, size], step > 0. */
int32_t td_tensor_slice(const td_tensor *t, int32_t dim, int64_t start, int64_t stop,
                        int64_t step, td_tensor *out);
int32_t td_tensor_unsqueeze(const td_tensor *t, int32_t dim, td_tensor *out);
/* Removes dim if its size is 1 (otherwise the same shape). */
int32_t td_tensor_squeeze(const td_tensor *t, int32_t dim, td_tensor *out);
/* Removes every dim of size 1. */
int32_t td_tensor_squeeze_all(const td_tensor *t, td_tensor *out);
int32_t td_tensor_permute(const td_tensor *t, const int32_t *dims, td_tensor *out);
int32_t td_tensor_transpose(const td_tensor *t, int32_t dim0, int32_t dim1, td_tensor *out);
/* Broadcast to shape (stride 0 on expanded dims); -1 keeps a size; new leading dims
 * are allowed. */
int32_t td_tensor_expand(const td_tensor *t, int32_t ndim, const int64_t *shape,
                         td_tensor *out);
/* Same elements, new shape, no copy; one size may be -1. Fails when the strides
 * forbid it. */
int32_t td_tensor_view(const td_tensor *t, int32_t ndim, const int64_t *shape,
                       td_tensor *out);
/* The elements [.., i, .., i + offset, ..] of dims dim1 and dim2 (distinct; offset > 0
 * above the main diagonal, < 0 below) as the last dim, the other dims in their order:
 * torch.diagonal's view (empty when the offset passes the matrix). */
int32_t td_tensor_diagonal(const td_tensor *t, int64_t offset, int32_t dim1, int32_t dim2,
                           td_tensor *out);
/* Splits dim into n dims of the given sizes (one may be -1). */
int32_t td_tensor_unflatten(const td_tensor *t, int32_t dim, int32_t n, const int64_t *sizes,
                            td_tensor *out);

/* One entry of an index expression, already resolved to 0-based values. */
enum td_index_kind {
  TD_INDEX_SELECT = 0,    /* start: the position (negative counts from the end) */
  TD_INDEX_SLICE = 1,     /* start, stop, step as in td_tensor_slice */
  TD_INDEX_NEWAXIS = 2,   /* a new dim of size 1 */
  TD_INDEX_ELLIPSIS = 3   /* as many whole dims as needed */
};

typedef struct td_index {
  int32_t kind;
  int64_t start;
  int64_t stop;
  int64_t step;
} td_index;

/* Applies entries left to right; dims left over are kept whole. */
int32_t td_tensor_index(const td_tensor *t, const td_index *entries, int32_t n,
                        td_tensor *out);

/* New owned tensors that share t's storage when the strides allow, else copy:
 * reshape (one size may be -1) and flatten (merges dims start..end inclusive). */
td_tensor *td_tensor_reshape(const td_tensor *t, int32_t ndim, const int64_t *shape);
td_tensor *td_tensor_flatten(const td_tensor *t, int32_t start_dim, int32_t end_dim);

/* ---- copies ------------------------------------------------------------------------ */

/* Copies src into dst, broadcasting src to dst's shape and casting its dtype. */
int32_t td_tensor_copy_(td_tensor *dst, const td_tensor *src);
int32_t td_tensor_fill_(td_tensor *dst, double value);
/* An owned tensor sharing t's storage when t is already contiguous, else a copy. */
td_tensor *td_tensor_contiguous(const td_tensor *t);
td_tensor *td_tensor_clone(const td_tensor *t);
/* An owned tensor sharing t's storage when t has that dtype already, else a cast copy. */
td_tensor *td_tensor_to_dtype(const td_tensor *t, int32_t dtype);

/* One element as a double: index has ndim entries (ignored for ndim 0). */
int32_t td_tensor_read_f64(const td_tensor *t, const int64_t *index, double *out);
/* Every NaN of a contiguous float64 tensor becomes the one quiet NaN: LuaJIT keeps its
 * own values in NaN bits, so doubles handed to Lua must not carry other payloads
 * (td_tensor_read_f64 does the same for its one value). */
int32_t td_tensor_canonicalize_nan_(td_tensor *t);
int32_t td_tensor_write_f64(td_tensor *t, const int64_t *index, double value);

/* ---- threads ------------------------------------------------------------------------ */

/* Threads for large kernels, ours and OpenBLAS's alike (n >= 1). The default is the
 * TD_NUM_THREADS environment variable, else the number of online CPUs. Results do not
 * depend on the thread count: work splits at fixed element counts. */
int32_t td_set_num_threads(int32_t n);
int32_t td_get_num_threads(void);

/* ---- type promotion --------------------------------------------------------------------
 * torch's rules: categories bool < integer < floating. Tensors with dims decide the
 * dtype within a category; 0-dim tensors and scalars only raise the category (to int64
 * or float32 for scalars, to their own dtype for 0-dim tensors). */

enum td_scalar_kind { TD_SCALAR_BOOL = 0, TD_SCALAR_INT = 1, TD_SCALAR_FLOAT = 2 };

int32_t td_result_type(const td_tensor *a, const td_tensor *b);
int32_t td_result_type_scalar(const td_tensor *a, int32_t scalar_kind);

/* ---- elementwise ------------------------------------------------------------------------ */

enum td_binary_op {
  TD_BINARY_ADD = 0,
  TD_BINARY_SUB = 1,
  TD_BINARY_MUL = 2,
  TD_BINARY_DIV = 3,          /* true division: integers give float32 */
  TD_BINARY_FLOOR_DIVIDE = 4,
  TD_BINARY_REMAINDER = 5,    /* the sign of the divisor, like Python and torch */
  TD_BINARY_POW = 6,
  TD_BINARY_MINIMUM = 7,      /* NaN propagates */
  TD_BINARY_MAXIMUM = 8,
  TD_BINARY_EQ = 9,           /* comparisons give bool; NaN compares false (ne: true) */
  TD_BINARY_NE = 10,
  TD_BINARY_LT = 11,
  TD_BINARY_LE = 12,
  TD_BINARY_GT = 13,
  TD_BINARY_GE = 14,
  TD_BINARY_LOGICAL_AND = 15, /* logical ops give bool */
  TD_BINARY_LOGICAL_OR = 16,
  TD_BINARY_LOGICAL_XOR = 17,
  TD_BINARY_ATAN2 = 18,       /* atan2 .. copysign: integers give float32; hypot and */
  TD_BINARY_HYPOT = 19,       /* logaddexp refuse them (torch: not implemented for 'Int') */
  TD_BINARY_LOGADDEXP = 20,
  TD_BINARY_XLOGY = 21,       /* x * log(y), 0 where x is 0 (NaN where y is NaN) */
  TD_BINARY_COPYSIGN = 22,
  TD_BINARY_FMOD = 23,        /* C's truncated remainder; integer zero division raises */
  TD_BINARY_BITWISE_AND = 24, /* bitwise ops: bool and integers only (floats refused); */
  TD_BINARY_BITWISE_OR = 25,  /* and, or, xor of bool are logical */
  TD_BINARY_BITWISE_XOR = 26,
  TD_BINARY_BITWISE_LEFT_SHIFT = 27,  /* shifts refuse bool; a count < 0 or >= the bit */
  TD_BINARY_BITWISE_RIGHT_SHIFT = 28, /* width gives 0 (right, signed: the sign, 0 or -1) */
  TD_BINARY_COUNT = 29        /* how many there are (new ops take the next codes) */
};

/* a op b with broadcasting and promotion: a new tensor. */
td_tensor *td_binary(int32_t op, const td_tensor *a, const td_tensor *b);
/* a op s, or s op a when scalar_first; s is a Lua number of the given td_scalar_kind. */
td_tensor *td_binary_scalar(int32_t op, const td_tensor *a, double s, int32_t scalar_kind,
                            int32_t scalar_first);
/* In place: a = a op b (b broadcasts to a). Refused when the result type's category
 * is above a's dtype (float into an integer tensor), as torch refuses it. */
int32_t td_binary_(int32_t op, td_tensor *a, const td_tensor *b);
int32_t td_binary_scalar_(int32_t op, td_tensor *a, double s, int32_t scalar_kind);
/* The dtypes op computes in and gives for these operands, after its refusals (bool
 * subtraction, ...), as td_binary plans them: b NULL stands for the scalar (s of
 * scalar_kind), first when scalar_first. The CUDA backend plans with it. */
int32_t td_binary_dtypes(int32_t op, const td_tensor *a, const td_tensor *b, double s,
                         int32_t scalar_kind, int32_t scalar_first, int32_t *compute,
                         int32_t *result);

/* t sorted along dim (0-based; a 0-dim tensor as one element), ascending unless
 * descending, as torch.sort: NaN greatest, ties in their first order (stable), every
 * dtype; *indices receives where each value came from (int64, 0-based). Both results are
 * new contiguous tensors of t's shape. (core/kernels/sort.c) */
td_tensor *td_sort(const td_tensor *t, int32_t dim, int32_t descending, td_tensor **indices);
/* The k largest (smallest unless largest) values along dim in order and their indices,
 * the stable sort's first k (equal values: the lower index first); results of t's shape
 * with dim of size k. (core/kernels/select.c, as the rest of this group but unique,
 * unique_consecutive: unique.c; histc, bincount: histogram.c; searchsorted: search.c) */
td_tensor *td_topk(const td_tensor *t, int64_t k, int32_t dim, int32_t largest,
                   td_tensor **indices);
/* The k-th smallest value along dim (k 1-based: the stable sort's k-th) and its index;
 * t's shape without dim. */
td_tensor *td_kthvalue(const td_tensor *t, int64_t k, int32_t dim, td_tensor **indices);
/* torch.median along dim: the lower median (the stable sort's element (n - 1) / 2) and its
 * index; a NaN in the row gives NaN at its first NaN. ignore_nan: torch.nanmedian, the
 * median of the other values (NaN, index 0, for a row of NaN). Refuses bool and dims of
 * size 0. */
td_tensor *td_median(const td_tensor *t, int32_t dim, int32_t ignore_nan, td_tensor **indices);
/* torch.mode along dim: the most frequent value (the smallest of equally frequent ones;
 * NaN never equals NaN) and the index of its last occurrence. */
td_tensor *td_mode(const td_tensor *t, int32_t dim, td_tensor **indices);

enum td_quantile_mode {
  TD_QUANTILE_LINEAR = 0,
  TD_QUANTILE_LOWER = 1,
  TD_QUANTILE_HIGHER = 2,
  TD_QUANTILE_MIDPOINT = 3,
  TD_QUANTILE_NEAREST = 4
};
/* torch.quantile along dim of float32 / float64 t: q (t's dtype, 0-D or 1-D, values in
 * [0, 1]) gives the result's leading dim when 1-D, then t's shape without dim. A NaN in a
 * row makes its quantiles NaN; ignore_nan (torch.nanquantile) leaves NaN out. */
td_tensor *td_quantile(const td_tensor *t, const td_tensor *q, int32_t dim,
                       int32_t interpolation, int32_t ignore_nan);
/* torch.unique of the flattened t, ascending (NaN last, each NaN its own value), or with
 * consecutive torch.unique_consecutive (runs of equal values, in order). *inverse (t's
 * shape) and *counts (the result's) are int64, inverse 0-based; pass NULL for either
 * to skip it. */
td_tensor *td_unique(const td_tensor *t, int32_t consecutive, td_tensor **inverse,
                     td_tensor **counts);
/* The same over the slices of t along dim (torch.unique(dim =), unique_consecutive(dim =)):
 * slices in lexicographic order, a slice holding a NaN equal to no other. */
td_tensor *td_unique_dim(const td_tensor *t, int32_t dim, int32_t consecutive,
                         td_tensor **inverse, td_tensor **counts);
/* torch.histc: bins equal bins over [min, max] (both 0, or equal: t's own extremes) of a
 * floating t, counted in t's dtype; values outside and NaN are left out. */
td_tensor *td_histc(const td_tensor *t, int64_t bins, double min, double max);
/* torch.bincount of a 1-D integer t of values >= 0: int64 counts, or with weights (1-D,
 * t's length) their sums (float32 weights: float32, any other: float64); at least
 * minlength bins. */
td_tensor *td_bincount(const td_tensor *t, const td_tensor *weights, int64_t minlength);
/* torch.searchsorted: for each value, the 0-based slot of sorted_sequence's last dim
 * (1-D, or the values' leading dims with its own last) where it would go, before equal
 * values (after them when right); sorter (int64, 0-based, the sequence's shape) sorts an
 * unsorted sequence; NULL for none. Both tensors of one dtype; int64 results (int32 when
 * out_int32) of values' shape. */
td_tensor *td_searchsorted(const td_tensor *sorted_sequence, const td_tensor *values,
                           int32_t right, const td_tensor *sorter, int32_t out_int32);

enum td_unary_op {
  TD_UNARY_NEG = 0,
  TD_UNARY_ABS = 1,
  TD_UNARY_EXP = 2,          /* exp .. sigmoid: integers and bool give float32 */
  TD_UNARY_LOG = 3,
  TD_UNARY_LOG1P = 4,
  TD_UNARY_EXPM1 = 5,
  TD_UNARY_SQRT = 6,
  TD_UNARY_RSQRT = 7,
  TD_UNARY_SIN = 8,
  TD_UNARY_COS = 9,
  TD_UNARY_TANH = 10,
  TD_UNARY_SIGMOID = 11,
  TD_UNARY_RELU = 12,
  TD_UNARY_FLOOR = 13,
  TD_UNARY_CEIL = 14,
  TD_UNARY_ROUND = 15,       /* half to even, like torch */
  TD_UNARY_SIGN = 16,
  TD_UNARY_LOGICAL_NOT = 17, /* logical_not, isnan, isinf give bool */
  TD_UNARY_ISNAN = 18,
  TD_UNARY_ISINF = 19,
  TD_UNARY_TAN = 20,         /* tan .. lgamma: as exp (float32 for integers and bool) */
  TD_UNARY_ASIN = 21,
  TD_UNARY_ACOS = 22,
  TD_UNARY_ATAN = 23,
  TD_UNARY_SINH = 24,
  TD_UNARY_COSH = 25,
  TD_UNARY_ASINH = 26,
  TD_UNARY_ACOSH = 27,
  TD_UNARY_ATANH = 28,
  TD_UNARY_LOG2 = 29,
  TD_UNARY_LOG10 = 30,
  TD_UNARY_EXP2 = 31,
  TD_UNARY_ERF = 32,
  TD_UNARY_ERFC = 33,
  TD_UNARY_LGAMMA = 34,
  TD_UNARY_TRUNC = 35,       /* integers unchanged; frac refuses them, as torch */
  TD_UNARY_FRAC = 36,
  TD_UNARY_ISFINITE = 37,    /* isfinite, signbit give bool */
  TD_UNARY_SIGNBIT = 38,
  TD_UNARY_BITWISE_NOT = 39, /* bool and integers only; of bool: logical not */
  TD_UNARY_ERFINV = 40,      /* erfinv, digamma: as exp (float32 for integers and bool) */
  TD_UNARY_DIGAMMA = 41,
  TD_UNARY_COUNT = 42        /* how many there are (new ops take the next codes) */
};

td_tensor *td_unary(int32_t op, const td_tensor *a);
int32_t td_unary_(int32_t op, td_tensor *a);
/* The dtypes op computes in and gives for an input of dtype, after its refusals. */
int32_t td_unary_dtypes(int32_t op, int32_t dtype, int32_t *compute, int32_t *result);

/* Clamps into [min, max]; a bound is ignored unless its has_ flag is set. */
td_tensor *td_clamp(const td_tensor *a, double min, double max, int32_t has_min,
                    int32_t has_max);
int32_t td_clamp_(td_tensor *a, double min, double max, int32_t has_min, int32_t has_max);

/* mask ? a : b, broadcasting all three; a NULL a or b stands for the scalar given
 * with its td_scalar_kind. The mask must be bool. */
td_tensor *td_where(const td_tensor *mask, const td_tensor *a, double a_scalar,
                    int32_t a_kind, const td_tensor *b, double b_scalar, int32_t b_kind);
/* a with value where mask (bool, broadcast to a) is true. */
td_tensor *td_masked_fill(const td_tensor *a, const td_tensor *mask, double value);
int32_t td_masked_fill_(td_tensor *a, const td_tensor *mask, double value);

/* ---- reductions ------------------------------------------------------------------------- */

enum td_reduce_op {
  TD_RED_SUM = 0,         /* bool and integers give int64 */
  TD_RED_MEAN = 1,        /* floating only */
  TD_RED_PROD = 2,        /* bool and integers give int64 */
  TD_RED_MIN = 3,         /* NaN propagates */
  TD_RED_MAX = 4,
  TD_RED_ARGMIN = 5,      /* int64, 0-based; the first extreme; NaN counts as extreme */
  TD_RED_ARGMAX = 6,
  TD_RED_STD = 7,         /* floating only; param is the correction (1: unbiased) */
  TD_RED_VAR = 8,
  TD_RED_NORM = 9,        /* floating only; param is p (inf allowed) */
  TD_RED_ALL = 10,        /* bool */
  TD_RED_ANY = 11,
  TD_RED_LOGSUMEXP = 12,  /* integers give float32 */
  TD_RED_COUNT = 13       /* how many there are (new ops take the next codes) */
};

/* Reduces over the ndims dims listed (ndims 0: every dim, giving a 0-dim tensor). */
td_tensor *td_reduce(int32_t op, const td_tensor *a, const int32_t *dims, int32_t ndims,
                     int32_t keepdim, double param);
/* min or max (TD_RED_MIN / TD_RED_MAX) along one dim: values and 0-based int64 indices. */
int32_t td_reduce_with_index(int32_t op, const td_tensor *a, int32_t dim, int32_t keepdim,
                             td_tensor **values, td_tensor **indices);
/* Running sum along dim (bool and integers give int64). */
td_tensor *td_cumsum(const td_tensor *a, int32_t dim);
/* Running product along dim (bool and integers give int64, wrapping). */
td_tensor *td_cumprod(const td_tensor *a, int32_t dim);
/* The running maximum (minimum) along dim and the 0-based index it came from (int64,
 * into *indices): torch.cummax's semantics (an equal value takes the place, NaN stays
 * once met), values of the input's dtype. */
td_tensor *td_cummax(const td_tensor *t, int32_t dim, td_tensor **indices);
td_tensor *td_cummin(const td_tensor *t, int32_t dim, td_tensor **indices);
/* log(cumsum(exp(t))) along dim of a floating tensor, accumulated in double. */
td_tensor *td_logcumsumexp(const td_tensor *t, int32_t dim);
/* softmax (log = 0) or log_softmax (log = 1) along dim of a floating tensor; the result
 * has a's dtype (float16 and bfloat16 compute in float32). */
td_tensor *td_softmax(const td_tensor *a, int32_t dim, int32_t log);

/* ---- gathering and masking (0-based index values, negative counts from the end) ------- */

/* The elements where mask (bool, broadcast to a) is true, as a 1-D tensor. */
td_tensor *td_masked_select(const td_tensor *a, const td_tensor *mask);
/* [count, ndim] int64 positions of the non-zero elements, in row-major order. */
td_tensor *td_nonzero(const td_tensor *a);
/* Lua's 1-based integer indices (negative from the end) as a new int64 tensor of 0-based
 * ones (negatives kept), checked against a dim of `size`: messages name call and the
 * 1-based dim. */
td_tensor *td_index_from_one_based(const td_tensor *index, int64_t size, const char *call,
                                   int32_t dim1);
td_tensor *td_index_select(const td_tensor *a, int32_t dim, const td_tensor *index);
td_tensor *td_gather(const td_tensor *a, int32_t dim, const td_tensor *index);
/* The same taking Lua's 1-based int64 or int32 values (negative from the end), checked
 * and converted in the pass that makes the offsets (td_index_from_one_based's messages). */
td_tensor *td_index_select_one_based(const td_tensor *a, int32_t dim, const td_tensor *index);
td_tensor *td_gather_one_based(const td_tensor *a, int32_t dim, const td_tensor *index);
int32_t td_scatter_(td_tensor *a, int32_t dim, const td_tensor *index, const td_tensor *src);
/* scatter_ that reduces src into the element at each index instead of overwriting it
 * (mode: sum, product, maximum, minimum, in the stored dtype; float maxima and minima
 * keep NaN), in increasing order along dim, so the result never depends on the thread
 * count. TD_SCATTER_SET is scatter_ itself. */
enum { TD_SCATTER_SET = 0, TD_SCATTER_SUM = 1, TD_SCATTER_PROD = 2, TD_SCATTER_AMAX = 3, TD_SCATTER_AMIN = 4 };
int32_t td_scatter_reduce_(td_tensor *a, int32_t dim, const td_tensor *index, const td_tensor *src,
                           int32_t mode);
int32_t td_index_add_(td_tensor *a, int32_t dim, const td_tensor *index, const td_tensor *src);
/* A bool mask over a's leading mask->ndim dims: the rows where it is true, as a
 * copy of shape [count, rest...]; the _put_ form writes value (broadcast) there. */
td_tensor *td_mask_rows(const td_tensor *a, const td_tensor *mask);
int32_t td_mask_rows_put_(td_tensor *a, const td_tensor *mask, const td_tensor *value);
/* index_select's writing form: a[..., index[i], ...] = value[..., i, ...] along dim,
 * value broadcast to the selection's shape. */
int32_t td_index_put_(td_tensor *a, int32_t dim, const td_tensor *index,
                      const td_tensor *value);

/* ---- joins ------------------------------------------------------------------------------ */

/* n tensors of one shape stacked along a new dim (promoted to a common dtype). */
td_tensor *td_stack(const td_tensor *const *tensors, int32_t n, int32_t dim);
/* n tensors equal but in dim, joined along it. */
td_tensor *td_cat(const td_tensor *const *tensors, int32_t n, int32_t dim);
/* Pads the last npads / 2 dims: pads = {last_before, last_after, prev_before, ...},
 * like torch.nn.functional.pad; negative pads crop. */
td_tensor *td_pad(const td_tensor *a, const int64_t *pads, int32_t npads, double value);

/* ---- random numbers ----------------------------------------------------------------------
 * Philox4x32-10, counter based: element i of a call (row-major order, whatever the
 * strides) uses counter block (offset + i / 4), lane i % 4, under the generator's key
 * (its seed); a call advances offset by ceil(numel / 4). 64-bit draws and rejection
 * retries use the counter's third word. Results are reproducible whatever the thread
 * count; the exact mapping is in core/kernels/random.c. A generator must not be used
 * from two threads at once. */

typedef struct td_generator td_generator;

td_generator *td_generator_new(uint64_t seed);
void td_generator_release(td_generator *g);
/* The process-wide generator (seeded 0 at start), borrowed. */
td_generator *td_default_generator(void);
void td_generator_manual_seed(td_generator *g, uint64_t seed);
uint64_t td_generator_seed(const td_generator *g);
/* Takes the counter blocks of a call over numel elements, as the fills above do:
 * returns the first block (base) and advances g's offset by ceil(numel / 4); for
 * generating the same stream elsewhere (the CUDA backend). g NULL: the default one. */
uint64_t td_generator_reserve(td_generator *g, int64_t numel);

/* Each fills t in place; g NULL means the default generator. */
int32_t td_uniform_(td_tensor *t, double low, double high, td_generator *g);
int32_t td_normal_(td_tensor *t, double mean, double std, td_generator *g);
int32_t td_bernoulli_(td_tensor *t, double p, td_generator *g);
/* Integers uniform in [low, high). */
int32_t td_randint_(td_tensor *t, int64_t low, int64_t high, td_generator *g);
/* A random permutation of 0 .. n-1. */
td_tensor *td_randperm(int64_t n, int32_t dtype, td_generator *g);

/* ---- linear algebra (OpenBLAS) ---------------------------------------------------------- */

/* torch.matmul: 1-D x 1-D dot, 2-D x 2-D, 1-D promoted to a matrix and back, and
 * batched with broadcast batch dims. float32 and float64 go to cblas as they are
 * (no copy when the strides allow; a transposed operand passes as CblasTrans);
 * float16 and bfloat16 compute in float32 and round back; integers compute exactly in
 * int64 and wrap like their dtype; bool and mixed dtypes are refused. */
td_tensor *td_matmul(const td_tensor *a, const td_tensor *b);
td_tensor *td_mm(const td_tensor *a, const td_tensor *b);
td_tensor *td_bmm(const td_tensor *a, const td_tensor *b);
td_tensor *td_mv(const td_tensor *a, const td_tensor *v);
td_tensor *td_dot(const td_tensor *a, const td_tensor *b);

/* ---- containers (core/dict/) ------------------------------------------------------------ *
 * A td_dict is a batched container: ordered string keys (hashed lookup, insertion order
 * kept) mapping to tensor leaves, nested containers, or non-tensor values (JSON text).
 * Every tensor leaf's leading dims equal the batch size; a nested container's batch size
 * starts with its parent's. Containers are reference counted; the key set is shared
 * between containers of the same structure (td[i] does not copy keys) and copied on
 * the first write.
 *
 * Non-tensor values: a "uniform" value is one JSON text standing for every batch
 * element; a "stacked" value (from stacking containers whose values differ) is a table
 * of JSON texts plus an int64 tensor of positions shaped like the batch, which batch
 * operations transform exactly like a tensor leaf.
 *
 * Batch operations (index, shape ops, joins, arithmetic) are one call each, looping over
 * every leaf in C, recursing into nested containers. Dims are 0-based here.
 *
 * Leaf headers handed to the caller are pinned: replacing or deleting a pinned leaf
 * keeps its storage alive until the container is released, so a caller may hold views
 * that borrow the container's reference. */

typedef struct td_dict td_dict;

enum td_entry_kind {
  TD_ENTRY_TENSOR = 0,
  TD_ENTRY_DICT = 1,
  TD_ENTRY_VALUE = 2,   /* a uniform non-tensor value */
  TD_ENTRY_VALUES = 3   /* a stacked non-tensor value */
};

enum { TD_DEVICE_NONE = -1 }; /* a container without a device */

/* The public prefix of a container, read directly by the Lua layer. Its address is
 * stable for the container's life. version changes whenever a key is added, removed or
 * renamed, or a leaf is replaced (not when leaf data is written). */
typedef struct td_dict_head {
  int32_t ndim;                 /* batch dims */
  int32_t nkeys;
  int64_t shape[TD_MAX_DIMS];   /* the batch size */
  double version;
  int32_t locked;
  int32_t has_names;
  int32_t device_type;          /* enum td_device_type, or TD_DEVICE_NONE */
  int32_t device_index;
} td_dict_head;

td_dict *td_dict_new(int32_t ndim, const int64_t *batch);
void td_dict_retain(td_dict *d);
void td_dict_release(td_dict *d);
/* Releases ds[slots[i]] for i in [0, n) and sets those entries to NULL: the containers
 * of the handles one GC cycle found dead, in one call (as td_tensor_release_slots). */
void td_dict_release_slots(td_dict **ds, const int32_t *slots, int64_t n);
const td_dict_head *td_dict_head_borrow(const td_dict *d);

/* The entry index of key (len bytes), or -1. */
int32_t td_dict_find(const td_dict *d, const char *key, int64_t len);
const char *td_dict_key_borrow(const td_dict *d, int32_t i, int64_t *len);
int32_t td_dict_kind(const td_dict *d, int32_t i);
/* A tensor leaf (or a stacked value's positions), pinned; NULL for other kinds. */
const td_tensor *td_dict_tensor_pin(td_dict *d, int32_t i);
/* A nested container: a new reference; NULL for other kinds. */
td_dict *td_dict_child(td_dict *d, int32_t i);
/* A non-tensor value's JSON text: uniform values have one (pos 0), stacked values
 * td_dict_value_count of them, addressed by the positions tensor. */
const char *td_dict_value_borrow(const td_dict *d, int32_t i, int64_t pos);
int64_t td_dict_value_count(const td_dict *d, int32_t i);

/* Set key to a tensor (its leading dims must equal the batch size; the container takes
 * a storage reference), a container (its batch size must start with this one's; it is
 * retained, not copied), or a uniform JSON value. A new key appends; an existing key is
 * replaced. A locked container refuses new keys. Each returns the entry index or a
 * negative TD_E* code. */
int32_t td_dict_set_tensor(td_dict *d, const char *key, int64_t len, const td_tensor *t);
int32_t td_dict_set_dict(td_dict *d, const char *key, int64_t len, td_dict *child);
int32_t td_dict_set_value(td_dict *d, const char *key, int64_t len, const char *json);
/* A stacked value from n JSON texts and positions (int64, leading dims = batch). */
int32_t td_dict_set_values(td_dict *d, const char *key, int64_t len, int64_t n,
                           const char *const *texts, const td_tensor *positions);
/* Set key to entry i of src, whatever its kind (tensors share storage, containers and
 * values are shared). */
int32_t td_dict_set_entry(td_dict *d, const char *key, int64_t len, td_dict *src, int32_t i);
/* Delete entry i; rename entry i to key (it moves to the end, as in Python). Refused
 * when locked. */
int32_t td_dict_del(td_dict *d, int32_t i);
int32_t td_dict_rename(td_dict *d, int32_t i, const char *key, int64_t len);

/* Many tensors at once (the constructor's fast path): every tensor is checked like
 * td_dict_set_tensor first, then the keys are inserted in sorted (byte) order, which is
 * the order the Lua layer gives keys of a Lua table (it has none of its own). */
int32_t td_dict_set_tensors(td_dict *d, int32_t n, const char *const *keys,
                            const int64_t *lens, const td_tensor *const *tensors);

/* Lock or unlock d and every nested container. */
int32_t td_dict_set_locked(td_dict *d, int32_t locked);
/* Dim names: names[i] NULL leaves dim i unnamed; names NULL removes them all. */
int32_t td_dict_set_names(td_dict *d, const char *const *names);
const char *td_dict_name_borrow(const td_dict *d, int32_t dim);
/* A device for every leaf (checked now and on every later set), or TD_DEVICE_NONE. */
int32_t td_dict_set_device(td_dict *d, int32_t device_type, int32_t device_index);
/* Replace the batch size by one that every leaf and child still starts with (used by
 * batch_size assignment and auto-sizing). */
int32_t td_dict_set_batch(td_dict *d, int32_t ndim, const int64_t *batch);
/* The memmap prefix (a folder), or NULL. */
int32_t td_dict_set_prefix(td_dict *d, const char *prefix);
const char *td_dict_prefix_borrow(const td_dict *d);

/* ---- batch operations: each returns a new container (NULL on error) -------------------- */

/* The index grammar over batch dims (entries as td_tensor_index; an ellipsis covers
 * batch dims only). adv, when not NULL, is a bool mask over dims adv_dim.. of the
 * indexed view or an int64 index tensor (0-based) for dim adv_dim: a copy. */
td_dict *td_dict_index(const td_dict *d, const td_index *entries, int32_t n,
                       const td_tensor *adv, int32_t adv_dim);
/* dst[index] = src, broadcast: src a container with dst's keys, or NULL and value used. */
int32_t td_dict_index_put_(td_dict *dst, const td_index *entries, int32_t n,
                           const td_tensor *adv, int32_t adv_dim, td_dict *src,
                           double value);

td_dict *td_dict_view(const td_dict *d, int32_t ndim, const int64_t *shape);
td_dict *td_dict_reshape(const td_dict *d, int32_t ndim, const int64_t *shape);
td_dict *td_dict_permute(const td_dict *d, const int32_t *dims);
td_dict *td_dict_transpose(const td_dict *d, int32_t dim0, int32_t dim1);
td_dict *td_dict_unsqueeze(const td_dict *d, int32_t dim);
/* dim -1: every batch dim of size 1. */
td_dict *td_dict_squeeze(const td_dict *d, int32_t dim);
td_dict *td_dict_expand(const td_dict *d, int32_t ndim, const int64_t *shape);
td_dict *td_dict_flatten(const td_dict *d, int32_t start_dim, int32_t end_dim);
td_dict *td_dict_unflatten(const td_dict *d, int32_t dim, int32_t n, const int64_t *sizes);

enum td_dict_copy_mode {
  TD_COPY_CLONE = 0,       /* new storage, same strides order, same values */
  TD_COPY_CONTIGUOUS = 1,  /* shares leaves that are contiguous already */
  TD_COPY_EMPTY = 2,       /* same shapes and dtypes, uninitialised */
  TD_COPY_ZEROS = 3
};
td_dict *td_dict_copy(const td_dict *d, int32_t mode);
/* Same structure, floating leaves cast to dtype (all leaves when floating_only is 0). */
td_dict *td_dict_to_dtype(const td_dict *d, int32_t dtype, int32_t floating_only);
/* Copy src's leaves into dst's leaves of the same keys (casting, broadcasting); keys of
 * src missing in dst are an error naming the key. */
int32_t td_dict_update_(td_dict *dst, const td_dict *src);

/* ---- joins over containers (core/dict/dict_join.c) ---- */
/* Key sets must match (the error names the keys that differ), batch sizes must be equal;
 * non-tensor values that are equal everywhere stay uniform, others become stacked. */
td_dict *td_dict_stack(td_dict *const *ds, int32_t n, int32_t dim);
td_dict *td_dict_cat(td_dict *const *ds, int32_t n, int32_t dim);
/* n consecutive pieces of dim with the given sizes (summing to its size) into out[]:
 * views, new references. */
int32_t td_dict_split(const td_dict *d, int32_t dim, int32_t n, const int64_t *sizes,
                      td_dict **out);
/* pads[2k], pads[2k+1]: before/after amounts for batch dim k (negative crops). */
td_dict *td_dict_pad(const td_dict *d, const int64_t *pads, int32_t npads, double value);

/* ---- arithmetic, comparison and reductions over leaves (core/dict/dict_math.c) ---- */
/* The other operand of a binary op: a container aligned by key (keys must match), a
 * tensor broadcast against every leaf, or a scalar. Exactly one of b, bt is non-NULL,
 * or neither for the scalar. Non-tensor values are carried over unchanged. */
td_dict *td_dict_unary(int32_t op, const td_dict *a);
int32_t td_dict_unary_(int32_t op, td_dict *a);
td_dict *td_dict_binary(int32_t op, const td_dict *a, const td_dict *b, const td_tensor *bt,
                        double s, int32_t s_kind, int32_t scalar_first);
int32_t td_dict_binary_(int32_t op, td_dict *a, const td_dict *b, const td_tensor *bt,
                        double s, int32_t s_kind);
td_dict *td_dict_clamp(const td_dict *a, double min, double max, int32_t has_min,
                       int32_t has_max);
/* Reduce over the listed batch dims of every leaf (ndims 0: over every element of each
 * leaf, giving a container of 0-dim leaves and batch size []). */
td_dict *td_dict_reduce(int32_t op, const td_dict *a, const int32_t *dims, int32_t ndims,
                        int32_t keepdim, double param);
/* One tensor: op over every element of every tensor leaf (sum, mean, prod, min, max,
 * all, any, std, var, norm), computed in float64 (bool for all/any). */
td_tensor *td_dict_reduce_all(int32_t op, const td_dict *a, double param);
/* mask covers the leading batch dims (expanded to each leaf's trailing dims). */
td_dict *td_dict_masked_fill(const td_dict *a, const td_tensor *mask, double value);
int32_t td_dict_masked_fill_(td_dict *a, const td_tensor *mask, double value);
/* Rows where mask (over the leading batch dims) is true: batch [count, rest..]. */
td_dict *td_dict_masked_select(const td_dict *a, const td_tensor *mask);
/* where(mask, a, b | scalar): mask over leading batch dims. */
td_dict *td_dict_where(const td_tensor *mask, const td_dict *a, const td_dict *b, double s,
                       int32_t s_kind);
/* 1 when both have the same keys, kinds, shapes and values (0 otherwise); allclose
 * compares |a - b| <= atol + rtol * |b| over floating leaves, equal values elsewhere.
 * NaNs compare unequal. *out receives the answer. */
int32_t td_dict_equal(const td_dict *a, const td_dict *b, int32_t *out);
int32_t td_dict_allclose(const td_dict *a, const td_dict *b, double rtol, double atol,
                         int32_t *out);

/* ---- memmap: containers on disk in Python tensordict's layout (core/store/memmap.c) -- *
 * A container is a folder with meta.json; each tensor leaf is <key>.memmap (raw C-order
 * little-endian bytes, numel x itemsize; trailing bytes tolerated; no file for zero
 * elements); each nested container and each non-tensor value is a sub-folder. Keys with
 * / < > : " | ? * \ space % or control characters are %XX-encoded in file names (meta.json
 * keeps the raw key). Saves are atomic: everything is written into a temporary sibling
 * folder, fsynced (files and folders) unless TD_MEMMAP_NO_FSYNC, then renamed over the
 * prefix; stale temporaries of that prefix are removed by the next save. */
enum td_memmap_flags {
  TD_MEMMAP_EXISTSOK = 1,  /* replace an existing folder at prefix (else an error) */
  TD_MEMMAP_NO_FSYNC = 2   /* skip the fsyncs (faster, not crash-safe) */
};
/* Writes d under prefix; returns a new container of d's structure whose leaves map the
 * written files read-write, locked, with its memmap prefix set. num_threads <= 0: the
 * pool's thread count. */
td_dict *td_dict_memmap(const td_dict *d, const char *prefix, int32_t flags,
                        int32_t num_threads);
/* Writes d under prefix and swaps d's leaves for the mapped ones (in place). */
int32_t td_dict_memmap_(td_dict *d, const char *prefix, int32_t flags, int32_t num_threads);
/* The structure, shapes and dtypes of d on disk, zero-filled, mapped read-write. */
td_dict *td_dict_memmap_like(const td_dict *d, const char *prefix, int32_t flags,
                             int32_t num_threads);
/* Maps a folder (mode TD_MAP_READ or TD_MAP_READWRITE): cost independent of the data
 * size. Every field and file is validated; errors name the file and the field. */
td_dict *td_dict_load_memmap(const char *prefix, int32_t mode);
/* msync every file-backed leaf (nested too). */
int32_t td_dict_sync(td_dict *d);
/* Python's LazyStackedTensorDict on disk (core/store/memmap_wrapped.c): C has no lazy
 * stack; its members (the same number of batch dims, sizes may differ) travel as an
 * array and stack_dim is 0-based. The folder holds a TensorDict folder per member, "0",
 * "1", ..., and a meta.json with the class and stack_dim; saved atomically as a whole.
 * out receives n new containers over the written files (as td_dict_memmap's). */
int32_t td_dict_memmap_stack(td_dict *const *members, int32_t n, int32_t stack_dim,
                             const char *prefix, int32_t flags, int32_t num_threads,
                             td_dict **out);
/* d saved as a tensorclass folder (what a Python @tensorclass's memmap writes): the
 * TensorDict folder _tensordict under prefix, and prefix/meta.json holding only "_type":
 * type_name ("<class 'module.Name'>"). Returns d's container over the written files,
 * locked, its memmap prefix the class folder (as td_dict_load_memmap gives it). */
td_dict *td_dict_memmap_tensorclass(const td_dict *d, const char *type_name,
                                    const char *prefix, int32_t flags, int32_t num_threads);
/* Python's make_memmap_from_tensor: t (or zeros, copy_data 0) written as the new leaf
 * key of the memory-mapped d, in d's folder: the file renamed in whole, then meta.json
 * replaced atomically; d takes the mapped leaf (a locked d too, as in Python). The key
 * must be new and t's shape start with d's batch size. flags: TD_MEMMAP_NO_FSYNC. */
int32_t td_dict_make_memmap_from_tensor(td_dict *d, const char *key, int64_t klen,
                                        const td_tensor *t, int32_t copy_data, int32_t flags);
/* td_dict_load_memmap that also loads a lazy stack's folder: then *stack_dim >= 0 and the
 * result holds the members as entries "0", "1", ... under batch size [] (else -1 and the
 * container). td_dict_load_memmap refuses a lazy stack's folder. */
td_dict *td_dict_load_memmap_any(const char *prefix, int32_t mode, int32_t *stack_dim);

/* ---- one file for a whole container: tensordict's consolidated layout ---- */
int32_t td_dict_consolidate(const td_dict *d, const char *filename, int32_t flags);
/* Maps the file (mode TD_MAP_READ or TD_MAP_READWRITE); leaves view it. */
td_dict *td_dict_from_consolidated(const char *filename, int32_t mode);
/* A lazy stack's members in one consolidated file (root class LazyStackedTensorDict),
 * and the load that takes either kind (as td_dict_load_memmap_any). */
int32_t td_dict_consolidate_stack(td_dict *const *members, int32_t n, int32_t stack_dim,
                                  const char *filename, int32_t flags);
td_dict *td_dict_from_consolidated_any(const char *filename, int32_t mode, int32_t *stack_dim);

/* ---- files written whole, atomically (core/store/fs.c) ---- *
 * n bytes become the whole content of the file at path: written into a temporary sibling
 * `.<name>.tmp-<pid>-<n>-<owner>` (first removing those whose writers are provably
 * gone: docs/reliability.md), fsynced unless flags
 * hold TD_MEMMAP_NO_FSYNC, renamed over path, and path's folder synced: the commit every
 * save uses. Readers see the old file or the whole new one; after an error or a crash
 * path keeps what it held. */
int32_t td_fs_write_file(const char *path, const char *bytes, int64_t n, int32_t flags);

/* ---- NumPy's files (core/store/npy.c, npz.c) ---- */
/* A .npy header read: the array's dtype, shape, order and byte order, and where its
 * nbytes of data start. */
typedef struct td_npy_header {
  int32_t dtype;
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS];
  int32_t fortran;     /* column-major data */
  int32_t swapped;     /* big-endian data (swapped when read) */
  int64_t data_offset; /* bytes before the data */
  int64_t nbytes;      /* of the data */
} td_npy_header;
enum { TD_NPY_MAX_HEADER = 1 << 20 };
/* Parses the first n bytes of a .npy file (at least through the header). TD_OK, or an
 * error naming what is wrong ("npy: ..."). */
int32_t td_npy_parse_header(const char *bytes, int64_t n, td_npy_header *h);
/* The array of a .npy file: mmap != 0 maps it read-only (O(1); refused for big-endian
 * data), else reads it into memory. Fortran-order arrays come back as transposed views. */
td_tensor *td_npy_load(const char *path, int32_t mmap);
/* t as a .npy file (C order), written into a temporary renamed over path (fsynced
 * unless flags hold TD_MEMMAP_NO_FSYNC). */
int32_t td_npy_save(const td_tensor *t, const char *path, int32_t flags);
/* The member names of an .npz archive (NumPy's keys: the names less ".npy"), each ended
 * by '\n', into buf (cap bytes, NUL-terminated when it fits): the length they need, or
 * -1 after td_fail. */
int64_t td_npz_names(const char *path, char *buf, int64_t cap);
/* The array stored under key in an .npz archive (stored or deflated), read into memory
 * and checked against its CRC-32. */
td_tensor *td_npz_read(const char *path, const char *key);
/* n arrays as an .npz archive (key i as member "<key>.npy"), deflated when compressed
 * (np.savez_compressed) else stored (np.savez), into a temporary renamed over path. */
int32_t td_npz_save(const char *path, const char *const *keys, const td_tensor *const *arrays, int32_t n,
                    int32_t compressed, int32_t flags);

/* ---- running statistics and CSV reading (core/kernels/stats.c, core/store/csv.c) ---- */
/* x's leading batch_dims dims index rows; the other dims, flattened row-major, are
 * features. A running state is a row count and two contiguous float64 tensors of one
 * element per feature: the mean and M2 (the sum of squared deviations from the mean).
 * Any dtype and strides; float64 accumulation; one pass (Welford within fixed-size
 * tiles, Chan's formula between them, merged in a fixed order), so the result is the
 * same for any thread count. NaN propagates. */
int32_t td_stats_update(const td_tensor *x, int32_t batch_dims, int64_t *count,
                        td_tensor *mean, td_tensor *m2);
/* Merges the state (count_b, mean_b, m2_b) into (count, mean, m2) (Chan et al.). */
int32_t td_stats_merge(int64_t *count, td_tensor *mean, td_tensor *m2, int64_t count_b,
                       const td_tensor *mean_b, const td_tensor *m2_b);
/* out = (x - mean) / sqrt(var + eps) per feature, computed in float64; out has x's
 * shape and a floating dtype (it may be x itself). */
int32_t td_stats_normalize(const td_tensor *x, int32_t batch_dims, const td_tensor *mean,
                           const td_tensor *var, double eps, td_tensor *out);

/* ---- a leaf's summary (core/kernels/leaf_stats.c) ---- */
/* What `tdflow inspect --stats` and T.describe show of a tensor, over all its elements:
 * min, max, mean and M2 (the sum of squared deviations) of the finite values, in float64,
 * merged over fixed-size chunks in order (the same for any thread count); for bool and
 * integer dtypes the distinct values, ascending, while there are at most
 * TD_LEAF_DISTINCT_MAX (distinct -1 past it, and always for floating dtypes). */
enum { TD_LEAF_DISTINCT_MAX = 1000 };
typedef struct td_leaf_stats {
  int32_t dtype;
  int64_t count;  /* elements added */
  int64_t finite; /* of them finite (all, for bool and integers) */
  int64_t nan;
  int64_t inf;    /* +inf and -inf */
  double min, max, mean, m2; /* NaN until a finite value is added */
  int64_t distinct;
  int64_t values[TD_LEAF_DISTINCT_MAX];
} td_leaf_stats;
/* An empty state for tensors of dtype. */
void td_leaf_stats_init(td_leaf_stats *s, int32_t dtype);
/* Adds t's elements (any strides; t's dtype must be the state's) to s. */
int32_t td_leaf_stats_add(td_leaf_stats *s, const td_tensor *t);

/* A streaming reader of numeric CSV (RFC 4180 quotes, \n, \r\n or \r line ends). */
typedef struct td_csv td_csv;
/* Opens path; with has_header the first record names the columns. An empty file gives
 * a reader of 0 columns and 0 rows. */
td_csv *td_csv_open(const char *path, int32_t delimiter, int32_t has_header);
void td_csv_close(td_csv *r);
int32_t td_csv_num_columns(const td_csv *r);
/* The header's name of column col (0-based), borrowed; NULL without a header. */
const char *td_csv_column_name_borrow(const td_csv *r, int32_t col);
/* The line number (1-based) where the next record starts. */
int64_t td_csv_line(const td_csv *r);
/* Data rows in the whole file (one scan of its own; the reader does not move). */
int64_t td_csv_count_rows(const td_csv *r);
/* Moves past up to n data rows without parsing their cells (quotes still respected);
 * returns the rows skipped (fewer at the end of the file) or a negative TD_E* code. */
int64_t td_csv_skip_rows(td_csv *r, int64_t n);
/* Parses up to max_rows records; field columns[i] (0-based) of row k goes to
 * outs[i][k] (1-D) or outs[i][k, out_cols[i]] (2-D), parsed for that tensor's dtype
 * (floats, or integers exactly with a range check). Returns the rows read (0 at the
 * end) or a negative TD_E* code; a bad cell's message names the file, the line, the
 * column (number and header name) and the cell's text. */
int64_t td_csv_read(td_csv *r, int64_t max_rows, int32_t ndest, const int32_t *columns,
                    td_tensor *const *outs, const int64_t *out_cols);
/* Messy files: what a reader opened with td_csv_open_opts does beyond td_csv_open's.
 * Input whose first bytes are gzip's magic is inflated as it is read (streamed). */
enum { TD_CSV_BAD_ERROR = 0, TD_CSV_BAD_MISSING = 1, TD_CSV_BAD_SKIP_ROW = 2 };
typedef struct td_csv_options {
  int32_t delimiter;   /* one ASCII character */
  int32_t has_header;
  int32_t comment;     /* 0, or a character: from it to the line end (outside quotes) is ignored */
  int32_t on_bad_cell; /* a cell that does not parse: TD_CSV_BAD_ERROR (fail), _MISSING (taken
                          as missing), _SKIP_ROW (its row is dropped) */
  int32_t n_na;        /* cells equal to one of these (blanks around trimmed) are missing: */
  const char *const *na_values; /* their column's default, else NaN (an integer column without a
                          default: the row is dropped under _SKIP_ROW, else an error) */
  int32_t n_skip_lines;
  const int64_t *skip_lines; /* 1-based lines of the file: records starting there are skipped */
} td_csv_options;
td_csv *td_csv_open_opts(const char *path, const td_csv_options *opts);
/* The text that fills missing cells of column col (0-based), parsed for the destination's
 * dtype when used; NULL: none. */
int32_t td_csv_set_default(td_csv *r, int32_t col, const char *text);
/* td_csv_read takes at most n more records (stored or dropped); negative: no limit. */
int32_t td_csv_limit_records(td_csv *r, int64_t n);
/* Counts since open, into out[TD_CSV_NCOUNTS]: records td_csv_read consumed, missing
 * cells stored (NaN or default), bad cells replaced, rows dropped. */
enum { TD_CSV_COUNT_RECORDS = 0, TD_CSV_COUNT_MISSING = 1, TD_CSV_COUNT_REPLACED = 2,
       TD_CSV_COUNT_SKIPPED_ROWS = 3, TD_CSV_NCOUNTS = 4 };
int32_t td_csv_counts(const td_csv *r, int64_t *out);

/* ---- growing memmap folders: flow.MemmapSink, flow.ReplayBuffer (core/store/append.c) ----
 * An append writes batches (rows along batch dim 0) into a temporary sibling of prefix
 * and commits like td_dict_memmap (trimmed files, meta.json, fsync, rename over prefix):
 * until then, and after abort or a crash, prefix holds what it held before. */
typedef struct td_memmap_append td_memmap_append;
/* Checks prefix (it must not exist unless TD_MEMMAP_EXISTSOK; a folder there must be a
 * memmap folder or empty), removes temporaries of dead processes beside it, makes the
 * temporary folder. flags: TD_MEMMAP_EXISTSOK, TD_MEMMAP_NO_FSYNC. NULL on error. */
td_memmap_append *td_memmap_append_open(const char *prefix, int32_t flags);
/* Appends batch's rows. The first batch fixes the keys, dtypes and the dims after the
 * first; a batch that differs is refused whole (nothing written, the append stays
 * usable). A failed write leaves the append refusing everything but abort. */
int32_t td_memmap_append_write(td_memmap_append *a, const td_dict *batch);
/* Rows appended so far. */
int64_t td_memmap_append_rows(const td_memmap_append *a);
/* Commits: the folder at prefix holds every row (no batch: an empty container of batch
 * size [0]). The append is done afterwards, whatever the result. */
int32_t td_memmap_append_commit(td_memmap_append *a, int32_t num_threads);
/* Removes the temporary folder; prefix keeps what it held. Idempotent. */
void td_memmap_append_abort(td_memmap_append *a);
/* Aborts unless committed, then frees. */
void td_memmap_append_free(td_memmap_append *a);
/* td_dict_memmap_like of d's structure with rows along batch dim 0 (d's own row count
 * does not matter, 0 included): a preallocated, zero-filled buffer on disk. */
td_dict *td_dict_memmap_rows_like(const td_dict *d, int64_t rows, const char *prefix,
                                  int32_t flags, int32_t num_threads);
/* Data-parallel appends (core/store/append_ranks.c, docs/dist.md): the ranks of a run
 * write one folder together, each its own rows at its own row offset, straight into the
 * folder's leaf files. The owner (one rank) opens an append as usual and shares it
 * before its first batch; the others join its temporary folder (td_memmap_append_path
 * gives it); folders and files are made by whichever rank needs them first and are
 * never cut, so no rank drops another's bytes. A joined append's commit syncs its own
 * writes and closes; its abort leaves the folder (the owner's). Once every rank has
 * committed (a barrier), the owner sets the total and commits: files trimmed to the
 * total, meta.json, rename. Checkpoints are refused. */
int32_t td_memmap_append_share(td_memmap_append *a, int64_t row_offset);
td_memmap_append *td_memmap_append_join(const char *folder, const char *prefix,
                                        int64_t row_offset, int32_t flags);
/* rows rows of src from its row src_row to dst's row dst_row (absolute rows of their
 * files), leaf by leaf; src must have had a batch, dst one of the same structure (or none:
 * it takes src's, its files made). The copy
 * stays in the kernel (copy_file_range) where it can. Neither append's row count
 * changes. */
int32_t td_memmap_append_copy_rows(td_memmap_append *dst, int64_t dst_row,
                                   const td_memmap_append *src, int64_t src_row, int64_t rows);
/* A new reference to the batch that fixed a's structure (its first, or a resumed
 * checkpoint's 0-row structure), NULL when a has had none (no error set). */
td_dict *td_memmap_append_structure(const td_memmap_append *a);
/* The owner's total before its commit: rows over every rank, and structure (a batch of
 * any rank, 0 rows will do; NULL when no rank had one) for an owner that wrote none. */
int32_t td_memmap_append_set_total(td_memmap_append *a, const td_dict *structure, int64_t rows);
/* 0 when batch can be rows of ref: the same keys and kinds, dtypes, CPU leaves, dims
 * after the first, non-tensor values. Else an error naming the key and both shapes
 * ("key 'obs': shape [5, 4] does not match [2, 3] of <what>"). */
int32_t td_dict_check_rows_like(const td_dict *ref, const td_dict *batch, const char *what);

/* ---- JSON (core/src/json*.c): the one codec of non-tensor values, memmap and
 * consolidated metadata and recipes ----
 * C never calls Lua, so Lua's json.decode reads a parsed text as a flat list of items
 * and json.encode hands its pieces to a writer. Python's NaN, Infinity and
 * -Infinity are read; strings and keys may hold NUL bytes (lengths are given).
 * A parse error's message names the problem and the byte ("expected ',' or ']' but found
 * '2' at byte 4", bytes from 1), or with TD_JSON_LINES the line and column, for texts
 * people write ("line 3, column 14: invalid JSON near '...'"). */
enum td_json_type {
  TD_JSON_NULL = 0,
  TD_JSON_FALSE = 1,
  TD_JSON_TRUE = 2,
  TD_JSON_NUMBER = 3,
  TD_JSON_STRING = 4,
  TD_JSON_ARRAY = 5,
  TD_JSON_OBJECT = 6
};
enum td_json_flags {
  TD_JSON_LINES = 1,
  /* strings and keys must be well-formed UTF-8: a raw invalid byte is an error at its
   * position ("invalid UTF-8 in a string (byte 0xff)") */
  TD_JSON_UTF8 = 2
};
/* One value of a text. Items come in the text's order: an array or object is followed
 * by its count elements or members (each followed by its own), so Lua rebuilds the
 * tables with a loop and a stack. */
typedef struct td_json_item {
  int32_t type;     /* enum td_json_type */
  int32_t count;    /* arrays and objects: elements or members */
  const char *key;  /* a member's name (NULL otherwise): key_len bytes */
  int64_t key_len;
  const char *text; /* a string's bytes, or a number's literal: text_len of them */
  int64_t text_len;
  double number;    /* a number's value */
} td_json_item;
/* A reader keeps the items of the last text it parsed (and their strings): parse
 * replaces them and returns the first item (*count in all), or NULL (td_last_error says
 * why); clear releases them. Items stay valid until the next parse or clear. */
typedef struct td_json_reader td_json_reader;
td_json_reader *td_json_reader_new(void);
void td_json_reader_free(td_json_reader *r);
const td_json_item *td_json_reader_parse(td_json_reader *r, const char *text, int64_t len,
                                         int32_t flags, int64_t *count);
void td_json_reader_clear(td_json_reader *r);
/* A text written value by value: the writer puts the ',' between values and members.
 * open/close: an array (object 0) or object (1); key: an object member's name, whose value
 * comes next; raw: a literal (a number's text, true, false, null, [] ...) as given;
 * strings escaped (only '"', '\\' and control characters; UTF-8 passes). text: NULL when
 * out of memory; valid until the next write or reset. */
typedef struct td_json_writer td_json_writer;
td_json_writer *td_json_writer_new(void);
void td_json_writer_free(td_json_writer *w);
void td_json_writer_reset(td_json_writer *w);
void td_json_write_open(td_json_writer *w, int32_t object);
void td_json_write_close(td_json_writer *w, int32_t object);
void td_json_write_key(td_json_writer *w, const char *s, int64_t n);
void td_json_write_raw(td_json_writer *w, const char *s, int64_t n);
void td_json_write_string(td_json_writer *w, const char *s, int64_t n);
const char *td_json_writer_text(const td_json_writer *w, int64_t *len);

/* ---- worker processes and shipping containers (core/dict/dict_workers.c, dict_ship.c) ---- */
/* A container packed into one flat region (structure, then each leaf C-contiguous and
 * 64-byte aligned) and unpacked elsewhere as views of it. Leaves that live in ref (may
 * be NULL) are not copied: the region refers to them by offset, and unpacking needs the
 * same bytes as ref. size: the bytes pack needs; pack: the bytes written (negative on
 * error); unpack: a new container viewing region (and ref), checked against its size. */
int64_t td_ship_size(const td_dict *d, const td_storage *ref);
int64_t td_ship_pack(const td_dict *d, td_storage *region, const td_storage *ref);
td_dict *td_ship_unpack(td_storage *region, td_storage *ref);
/* The structure alone, for transports that move the leaves' bytes themselves
 * (tensordict.dist): the same meta as td_ship_pack's, data offsets included, with no
 * data after it; its header counts the data bytes the leaves take.
 * meta_size: the bytes pack_meta writes. leaves: the tensors whose bytes td_ship_pack
 * would copy, in that order, with their byte offsets in the data and their entries'
 * kinds (TD_ENTRY_TENSOR, or TD_ENTRY_VALUES for a stack of values' positions); fills
 * up to cap and returns how many there are. data_bytes: the data bytes a structure
 * region's leaves need (checked). unpack_meta: a new container whose leaves view data,
 * a storage of at least data_bytes bytes (their bytes arrive there separately). */
int64_t td_ship_meta_size(const td_dict *d);
int64_t td_ship_pack_meta(const td_dict *d, td_storage *region);
int64_t td_ship_leaves(const td_dict *d, const td_tensor **leaves, int64_t *offsets,
                       int32_t *kinds, int64_t cap);
int64_t td_ship_data_bytes(const td_storage *meta);
td_dict *td_ship_unpack_meta(td_storage *meta, td_storage *data);
/* Once an unpack_meta container's bytes have arrived: what only they can tell (every
 * stacked value's position names one of its texts); 0, or an error (corrupt region). */
int32_t td_ship_check(const td_dict *d);

/* A pool of forked workers, each with a socket to the parent and two shared regions
 * (memfds made before the fork). The Lua engine (lua/tensordict/workers.lua) drives it. */
typedef struct td_workers td_workers;

enum td_workers_code {
  TD_WORKERS_PARENT = -100,      /* td_workers_fork in the parent */
  TD_WORKERS_TIMEOUT = -101,     /* td_workers_wait: nothing ready in time */
  TD_WORKERS_INTERRUPTED = -102  /* td_workers_wait: a signal came (Ctrl-C) */
};

enum td_reply_kind {
  TD_REPLY_NONE = 0,    /* nothing (an error, or the parent went away) */
  TD_REPLY_JOB = 1,     /* worker: a job came */
  TD_REPLY_RESULT = 2,  /* parent: a container came back */
  TD_REPLY_ERROR = 3,   /* parent: the worker's error text (td_workers_message_borrow) */
  TD_REPLY_DONE = 4,    /* parent: the job finished without a container */
  TD_REPLY_DIED = 5     /* parent: the worker died (how: td_workers_message_borrow) */
};

td_workers *td_workers_new(int32_t n);
/* Forks the n workers: returns the worker's index (0-based) in each child and
 * TD_WORKERS_PARENT in the parent. Children die with the parent and ignore SIGINT. */
int32_t td_workers_fork(td_workers *w);
int32_t td_workers_count(const td_workers *w);
int64_t td_workers_pid(const td_workers *w, int32_t i);
/* Parent: kills (SIGKILL) and reaps every worker, then frees. In a child: frees only. */
int32_t td_workers_close(td_workers *w);
/* Parent: job (any number; the caller's batch number) to idle worker i, with d (may be
 * NULL) packed into its input region. */
int32_t td_workers_send(td_workers *w, int32_t i, int64_t job, const td_dict *d);
/* Parent: the index of a busy worker with a reply (or that died), TD_WORKERS_TIMEOUT
 * after timeout_ms (-1: no limit), TD_WORKERS_INTERRUPTED on a signal. */
int32_t td_workers_wait(td_workers *w, int32_t timeout_ms);
/* Parent: worker i's reply: *kind says what came; a RESULT returns a new container
 * (copied out of shared memory), the other kinds NULL. */
td_dict *td_workers_recv(td_workers *w, int32_t i, int32_t *kind, int64_t *job);
/* The last error text or death of worker i ("" when none). */
const char *td_workers_message_borrow(const td_workers *w, int32_t i);
/* Worker: the next job (*kind TD_REPLY_JOB, its container viewing the input region, or
 * NULL when none came with it), or *kind TD_REPLY_NONE when the parent is gone. */
td_dict *td_worker_next(td_workers *w, int32_t *kind, int64_t *job);
/* Worker: prepare the reply (a container, an error text, or done), then send it. */
int32_t td_worker_reply_result(td_workers *w, const td_dict *d);
int32_t td_worker_reply_error(td_workers *w, const char *text, int64_t len);
int32_t td_worker_reply_done(td_workers *w);
/* Worker: 1 when something besides the engine still references the input region. */
int32_t td_worker_input_busy(td_workers *w);
int32_t td_worker_send(td_workers *w);
/* Worker: leaves the process at once (_exit: no atexit handlers, no finalisers). */
void td_worker_exit(int32_t code);

/* ---- Ctrl-C for hosts (core/src/signals.c) ---- *
 * td_signal_watch installs a handler that counts deliveries of signo (no SA_RESTART:
 * blocking waits return EINTR); td_signal_count tells how many came so far. */
int32_t td_signal_watch(int32_t signo);
int32_t td_signal_count(int32_t signo);

/* ---- later additions (new calls are appended here) ---- */

/* torch's Tensor method that casts to dtype ("float" for float32, "byte" for uint8: the
 * dtype table's method column); NULL for an unknown code. The Lua layer names its cast
 * methods with it. */
const char *td_dtype_method_name(int32_t dtype);

/* The op tables (core/include/op_table.h): each op's name and category by kind and code,
 * for the CUDA backend's messages and the Lua layer's methods. */
enum td_op_kind { TD_OPS_BINARY = 0, TD_OPS_UNARY = 1, TD_OPS_REDUCE = 2 };
/* What an op gives (its kernels plan by it; the Lua layer makes methods by it). */
enum td_op_category {
  TD_OPCAT_ARITH = 0,    /* values of the operands' (promoted) dtype */
  TD_OPCAT_FLOAT = 1,    /* the same, but bool and integers give float32 (div, exp, ...) */
  TD_OPCAT_COMPARE = 2,  /* bool: eq .. ge */
  TD_OPCAT_LOGICAL = 3,  /* bool, nonzero counting as true: logical_*, all, any */
  TD_OPCAT_TEST = 4,     /* bool: isnan, isinf */
  TD_OPCAT_EXTREME = 5,  /* reductions to the extreme value: min, max */
  TD_OPCAT_INDEX = 6,    /* reductions to its int64 position: argmin, argmax */
  TD_OPCAT_SPREAD = 7,   /* reductions whose param is the correction: std, var */
  TD_OPCAT_NORM = 8,     /* reductions whose param is p: norm */
  TD_OPCAT_BITWISE = 9   /* values of the operands' dtype, bool and integers only: bitwise_* */
};
/* "add", or with inplace "add_" (reductions have no in-place form: NULL); NULL for an
 * unknown kind or code. */
const char *td_op_name(int32_t kind, int32_t op, int32_t inplace);
/* The op's TD_OPCAT_* code; -1 for an unknown kind or code. */
int32_t td_op_category(int32_t kind, int32_t op);

/* A generator's state is (seed, offset): offset is the next unused counter block (what
 * td_generator_reserve would return). td_generator_set_state puts a state read with
 * td_generator_seed and td_generator_offset back, so a stream continues exactly where it
 * was (a resumed pipeline's). g NULL: the default generator. */
uint64_t td_generator_offset(const td_generator *g);
void td_generator_set_state(td_generator *g, uint64_t seed, uint64_t offset);

/* ---- checkpoints of an append (core/store/append.c): resumable flow.MemmapSink runs ----
 * A checkpoint makes the rows appended so far durable and records them with a folder of
 * the caller's (a pipeline's state), so that another process can continue the append
 * after this one is killed. The first checkpoint renames the temporary folder to
 * `.<name>.checkpoint` beside prefix, a name no sweep of temporaries removes, and locks
 * it (flock) while the append is open. Inside it, "%checkpoint" is the last checkpoint
 * (replaced atomically by the next), "%structure" the first batch's structure and
 * "%lock" the lock; the final commit removes them. (Names starting with "%" and a
 * letter that is not a hex digit are never a key's file name: keys encode "%" as %25.) */
/* The folder where the caller puts what the next checkpoint records (made empty by this
 * call, inside the temporary folder); NULL with the error set. Valid until the next
 * call on a. */
const char *td_memmap_append_stage(td_memmap_append *a);
/* Records a checkpoint: every leaf file synced (unless TD_MEMMAP_NO_FSYNC), then the
 * rows appended so far and the staged folder (an empty one when td_memmap_append_stage
 * was not called since the last checkpoint) replace the previous checkpoint atomically.
 * The append goes on. 0, or a negative code with the previous checkpoint kept. */
int32_t td_memmap_append_checkpoint(td_memmap_append *a);
/* The folder of the last checkpoint (what was staged for it), NULL before the first:
 * after td_memmap_append_resume, what the resumed run recorded. Valid until the next
 * call on a. */
const char *td_memmap_append_checkpoint_borrow(const td_memmap_append *a);
/* Reopens the checkpointed append of prefix that a process left (killed, or suspended):
 * locks it, drops the rows written after its checkpoint, and continues at its row count
 * (td_memmap_append_rows). prefix is checked as td_memmap_append_open checks it; flags
 * as there. NULL with the error set: no checkpoint, or one that another process holds. */
td_memmap_append *td_memmap_append_resume(const char *prefix, int32_t flags);
/* Closes the append and keeps its last checkpoint for td_memmap_append_resume (the rows
 * after it are dropped then); an append without a checkpoint is aborted. Idempotent.
 * td_memmap_append_free suspends an append that has a checkpoint, where it aborts others;
 * td_memmap_append_abort removes the checkpoint too. td_memmap_append_open refuses a
 * prefix with a checkpoint unless TD_MEMMAP_EXISTSOK, which removes it. */
void td_memmap_append_suspend(td_memmap_append *a);
/* The rows of prefix's checkpoint, -1 when it has none (negative codes for bad input). */
int64_t td_memmap_append_checkpoint_rows(const char *prefix);
/* The temporary folder the rows are written into (a caller may add files that are then
 * committed with it: tdflow's provenance record); NULL once committed or aborted. */
const char *td_memmap_append_path_borrow(const td_memmap_append *a);

/* Running statistics with non-finite values (core/kernels/stats.c; flow.Normalize's nan
 * policy). td_stats_update_strict is td_stats_update when every value of x is finite;
 * when x holds NaNs or infinities nothing is folded in and nonfinite[0], nonfinite[1]
 * receive their counts (both 0 when x was folded in). td_stats_update_finite skips
 * non-finite values feature by feature: counts (int64, one per feature) counts the
 * values each feature took, count the rows seen. td_stats_merge_counts merges two such
 * states. td_stats_count_nonfinite: x's NaNs (out[0]) and infinities (out[1]). */
int32_t td_stats_update_strict(const td_tensor *x, int32_t batch_dims, int64_t *count,
                               td_tensor *mean, td_tensor *m2, int64_t *nonfinite);
int32_t td_stats_update_finite(const td_tensor *x, int32_t batch_dims, int64_t *count,
                               td_tensor *counts, td_tensor *mean, td_tensor *m2);
int32_t td_stats_merge_counts(td_tensor *counts, td_tensor *mean, td_tensor *m2,
                              const td_tensor *counts_b, const td_tensor *mean_b,
                              const td_tensor *m2_b);
int32_t td_stats_count_nonfinite(const td_tensor *x, int64_t *out);
/* td_stats_normalize that also counts x's NaNs (nonfinite[0]) and infinities
 * (nonfinite[1]) as it reads them. */
int32_t td_stats_normalize_counted(const td_tensor *x, int32_t batch_dims, const td_tensor *mean,
                                   const td_tensor *var, double eps, td_tensor *out,
                                   int64_t *nonfinite);

/* Set key to a copy of entry i of src: td_dict_set_entry for every kind but a stacked
 * non-tensor value, which gets its own positions and texts (a container that is a copy
 * of another never shares what index assignment writes in place). */
int32_t td_dict_copy_entry(td_dict *d, const char *key, int64_t len, const td_dict *src,
                           int32_t i);

/* Bytes of physical memory (0 when the system does not say): what size checks compare
 * a request with. */
int64_t td_physical_memory(void);

/* Signals taken for the length of a run (core/src/signals.c): td_signal_take puts the
 * counting handler of td_signal_watch in place of signo's action, unless that action
 * ignores the signal (nohup, a background job) or counts it already (a host watches
 * it), and keeps the action it replaced for td_signal_restore. */
enum td_signal_taken {
  TD_SIGNAL_LEFT = 0,         /* nothing changed: the signal is ignored, or counted already */
  TD_SIGNAL_FROM_DEFAULT = 1, /* the default action was replaced */
  TD_SIGNAL_FROM_HANDLER = 2  /* another handler was replaced */
};
int32_t td_signal_take(int32_t signo);
/* Puts back the action td_signal_take replaced; nothing when it replaced none. 0 or an
 * error code. */
int32_t td_signal_restore(int32_t signo);
/* Sends signo to this process: once its default action is back, the process ends as
 * the signal asks (status 128 + signo to a shell). 0, or an error code when it cannot
 * be sent. */
int32_t td_signal_raise(int32_t signo);

/* ---- sum trees (core/kernels/sum_tree.c): flow.ReplayBuffer's prioritized sampler ----
 * A sum tree and a min tree over the capacity non-negative priorities of a float64
 * tensor (the leaves: contiguous, 1-D, writable, on the CPU; the tree holds a reference
 * to it and writes the priorities set into it, so a mapped file keeps them). The total,
 * the smallest positive priority and a batch of draws by prefix sum cost O(log capacity)
 * per element; sums are recomputed from both children at every step (never adjusted by
 * differences), so they do not drift however many updates come. A leaf of priority 0 is
 * never drawn. Indices are 0-based. */
typedef struct td_sum_tree td_sum_tree;
/* A tree over leaves (every value finite and >= 0, else an error naming the first bad
 * one); NULL with the error set. */
td_sum_tree *td_sum_tree_new(const td_tensor *leaves);
void td_sum_tree_free(td_sum_tree *t);
int64_t td_sum_tree_capacity(const td_sum_tree *t);
/* The sum of the leaves, and their smallest positive value (+inf when none is). */
double td_sum_tree_total(const td_sum_tree *t);
double td_sum_tree_min_positive(const td_sum_tree *t);
/* Sets leaf index[i] to priority[i] (int64 and float64 tensors of one numel, or a
 * priority of one element for every index; duplicates: the last wins). Everything is
 * checked first (indices in [0, capacity), priorities finite and >= 0): on an error
 * nothing changed. 0 or a negative TD_E* code. */
int32_t td_sum_tree_set(td_sum_tree *t, const td_tensor *index, const td_tensor *priority);
/* For each u[i] in [0, 1) (float64): the leaf where the prefix sums pass u[i] * total,
 * into index[i] (int64), and when weight is not NULL (float32 or float64) the
 * importance weight (p / min_positive) ^ -beta of that leaf, the weight
 * (N P(i)) ^ -beta divided by the largest one. u, index and weight: contiguous, one
 * numel. An empty tree (total 0) is an error. */
int32_t td_sum_tree_find(const td_sum_tree *t, const td_tensor *u, double beta, td_tensor *index,
                         td_tensor *weight);

#ifdef __cplusplus
}
#endif

#endif /* TENSORDICT_H */
