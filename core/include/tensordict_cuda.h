/*
 * tensordict_cuda.h: the C ABI of libtensordict_cuda, the CUDA backend (core/cuda/).
 *
 * A separate library, built only where nvcc is found, linked to libtensordict (whose
 * tensors, storages and error state it uses) and to the CUDA runtime and cuBLAS; the
 * CPU library never links CUDA. The Lua layer opens it only when a CUDA device is asked
 * for (lua/tensordict/cuda.lua); its cdefs are generated from this file like the main
 * header's (scripts/gen_cdefs.lua): keep it FFI-clean.
 *
 * Device tensors are ordinary td_tensor headers over a storage of kind
 * TD_STORAGE_DEVICE (td_storage_new_external) whose data is device memory from this
 * library's caching allocator; views work on them as on host tensors. The CPU kernels
 * refuse them. Pinned host tensors are TD_STORAGE_PINNED storages: host memory the CPU
 * kernels read as any other.
 *
 * Conventions are libtensordict's: 0 or a negative TD_E* code, NULL on error, and the
 * message in td_last_error() (CUDA's own text included, e.g. "out of memory").
 * Every kernel runs on the current device's stream for this library and returns once
 * it is queued, except calls that return host data or a count, which synchronize.
 */
#ifndef TENSORDICT_CUDA_H
#define TENSORDICT_CUDA_H

#include <stdint.h>

#include "tensordict.h"

#define TD_CUDA_ABI_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

int32_t td_cuda_abi_version(void);

/* ---- devices ------------------------------------------------------------------------ */

/* The number of CUDA devices, or -1 when none can be used; *reason then receives CUDA's
 * message (no driver, no device, driver too old), borrowed. */
int32_t td_cuda_device_count(const char **reason);
int32_t td_cuda_set_device(int32_t device);
int32_t td_cuda_current_device(void);
/* Waits for all work queued on the current device. */
int32_t td_cuda_synchronize(void);

/* ---- memory --------------------------------------------------------------------------- */

typedef struct td_cuda_memory_stats {
  int64_t allocated_bytes;      /* held by live tensors now */
  int64_t reserved_bytes;       /* allocated from CUDA: live plus cached */
  int64_t peak_allocated_bytes;
  int64_t allocations;          /* blocks handed out */
  int64_t cache_hits;           /* of which came from the cache */
  int64_t cuda_mallocs;         /* cudaMalloc calls */
} td_cuda_memory_stats;

/* The caching allocator of device memory (per device, blocks rounded up to 512 bytes,
 * freed blocks kept for reuse); empty_cache returns the cached ones to CUDA. */
int32_t td_cuda_memory_stats_get(int32_t device, td_cuda_memory_stats *out);
int32_t td_cuda_empty_cache(void);

/* A new contiguous tensor in device memory of device (uninitialised). */
td_tensor *td_cuda_empty(int32_t device, int32_t ndim, const int64_t *shape, int32_t dtype);
/* A contiguous copy of t (any device) on device; non_blocking: the copy is queued on the
 * library's stream and the call returns at once (true overlap needs pinned host memory;
 * from pageable memory CUDA copies synchronously). */
td_tensor *td_cuda_to_device(const td_tensor *t, int32_t device, int32_t non_blocking);
/* A contiguous host copy of a device tensor, in pinned memory when pinned is set. */
td_tensor *td_cuda_to_host(const td_tensor *t, int32_t pinned);
/* A contiguous copy of a host tensor in pinned (page-locked) host memory. */
td_tensor *td_cuda_pin(const td_tensor *t);
int32_t td_cuda_is_pinned(const td_tensor *t);
/* dst = src, casting and broadcasting, for any pair of devices (one of them CUDA or both
 * host). */
int32_t td_cuda_copy_(td_tensor *dst, const td_tensor *src);
int32_t td_cuda_fill_(td_tensor *dst, double value);

/* ---- kernels: the CPU functions' semantics, on device tensors ---------------------------
 * Dtypes follow the CPU's rules (td_binary_dtypes, td_unary_dtypes, td_result_type); all
 * operands must be on one device. */

td_tensor *td_cuda_binary(int32_t op, const td_tensor *a, const td_tensor *b);
td_tensor *td_cuda_binary_scalar(int32_t op, const td_tensor *a, double s, int32_t scalar_kind,
                                 int32_t scalar_first);
int32_t td_cuda_binary_(int32_t op, td_tensor *a, const td_tensor *b);
int32_t td_cuda_binary_scalar_(int32_t op, td_tensor *a, double s, int32_t scalar_kind);
td_tensor *td_cuda_unary(int32_t op, const td_tensor *a);
int32_t td_cuda_unary_(int32_t op, td_tensor *a);
td_tensor *td_cuda_where(const td_tensor *mask, const td_tensor *a, double a_scalar,
                         int32_t a_kind, const td_tensor *b, double b_scalar, int32_t b_kind);
td_tensor *td_cuda_masked_fill(const td_tensor *a, const td_tensor *mask, double value);
int32_t td_cuda_masked_fill_(td_tensor *a, const td_tensor *mask, double value);
td_tensor *td_cuda_masked_select(const td_tensor *a, const td_tensor *mask);
/* A bound is ignored unless its has_ flag is set; the CPU plans dtype and bounds. */
td_tensor *td_cuda_clamp(const td_tensor *a, double min, double max, int32_t has_min,
                         int32_t has_max);
int32_t td_cuda_clamp_(td_tensor *a, double min, double max, int32_t has_min, int32_t has_max);

/* sum, mean, prod, min, max, argmin, argmax, std, var over the ndims dims listed (0:
 * all); param: std and var's correction. Other ops are refused (move to the CPU). */
td_tensor *td_cuda_reduce(int32_t op, const td_tensor *a, const int32_t *dims, int32_t ndims,
                          int32_t keepdim, double param);
/* min or max along one dim with 0-based int64 indices (the first extreme; NaN first). */
int32_t td_cuda_reduce_with_index(int32_t op, const td_tensor *a, int32_t dim, int32_t keepdim,
                                  td_tensor **values, td_tensor **indices);
/* Running sum / product along dim (floating in double, the rest in int64, as the CPU). */
td_tensor *td_cuda_cumsum(const td_tensor *a, int32_t dim);
td_tensor *td_cuda_cumprod(const td_tensor *a, int32_t dim);
/* softmax (log 0) or log_softmax (log 1) along dim of a floating tensor. */
td_tensor *td_cuda_softmax(const td_tensor *a, int32_t dim, int32_t log);

/* 0-based index values (negative count from the end), int64 index tensors. */
td_tensor *td_cuda_index_select(const td_tensor *a, int32_t dim, const td_tensor *index);
td_tensor *td_cuda_gather(const td_tensor *a, int32_t dim, const td_tensor *index);
int32_t td_cuda_scatter_(td_tensor *a, int32_t dim, const td_tensor *index, const td_tensor *src);

td_tensor *td_cuda_stack(const td_tensor *const *tensors, int32_t n, int32_t dim);
td_tensor *td_cuda_cat(const td_tensor *const *tensors, int32_t n, int32_t dim);

/* The CPU generator's Philox4x32-10 stream (core/kernels/random.c), element for element:
 * the same seed gives the same tensor on the device as on the CPU (normal_ up to the
 * last bits of log, sqrt, sin and cos). g NULL: the default generator. */
int32_t td_cuda_uniform_(td_tensor *t, double low, double high, td_generator *g);
int32_t td_cuda_normal_(td_tensor *t, double mean, double std, td_generator *g);
int32_t td_cuda_bernoulli_(td_tensor *t, double p, td_generator *g);
int32_t td_cuda_randint_(td_tensor *t, int64_t low, int64_t high, td_generator *g);

/* torch.matmul through cuBLAS (float32, float64, float16, bfloat16; float16 and bfloat16
 * accumulate in float32); integers by a plain kernel in int64, wrapping like the CPU. */
td_tensor *td_cuda_matmul(const td_tensor *a, const td_tensor *b);
/* td_mm (2-D x 2-D), td_bmm (3-D x 3-D, equal batches), td_mv (2-D x 1-D) and td_dot
 * (1-D x 1-D, a 0-dim result): the CPU's checks, then td_cuda_matmul. */
td_tensor *td_cuda_mm(const td_tensor *a, const td_tensor *b);
td_tensor *td_cuda_bmm(const td_tensor *a, const td_tensor *b);
td_tensor *td_cuda_mv(const td_tensor *a, const td_tensor *v);
td_tensor *td_cuda_dot(const td_tensor *a, const td_tensor *b);

#ifdef __cplusplus
}
#endif

#endif
