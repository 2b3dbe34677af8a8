/*
 * allocator.cu: the caching allocator of device memory, and pinned host blocks.
 *
 * cudaMalloc and cudaFree synchronize the device and cost tens of microseconds, so a
 * freed block goes to a per-device cache keyed by its rounded size (512-byte steps up
 * to 1 MiB, 2 MiB steps above) and the next request of that size reuses it. All work of
 * this library runs on one stream per device (runtime.cu), so a block reused at once is
 * only touched after the work that freed it. A failed cudaMalloc empties the device's
 * cache and tries once more before reporting CUDA's out-of-memory message.
 *
 * Storages: each device block becomes a TD_STORAGE_DEVICE storage
 * (td_storage_new_external) whose free callback returns it here; pinned host blocks
 * (cudaHostAlloc) become TD_STORAGE_PINNED storages freed with cudaFreeHost.
 */
#include <stdlib.h>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda_internal.h"

namespace {

enum { MAX_DEVICES = 64 };

struct block_info {
  int32_t device;
  int64_t size; /* rounded */
};

struct device_cache {
  std::unordered_map<int64_t, std::vector<void *>> free_blocks;
  td_cuda_memory_stats stats;
};

std::mutex lock;
device_cache caches[MAX_DEVICES];

int64_t rounded(int64_t n) {
  if (n <= 0) return 512;
  if (n <= (1 << 20)) return (n + 511) / 512 * 512;
  const int64_t step = 2 << 20;
  return (n + step - 1) / step * step;
}

/* Frees every cached block of device d (lock held). */
void release_cache(int32_t d) {
  device_cache &c = caches[d];
  for (auto &kv : c.free_blocks) {
    for (void *p : kv.second) {
      cudaFree(p);
      c.stats.reserved_bytes -= kv.first;
    }
  }
  c.free_blocks.clear();
}

}  // namespace

void *tdc_alloc(const char *call, int32_t device, int64_t nbytes) {
  if (device < 0 || device >= MAX_DEVICES) {
    tdc_fail(TD_EINVAL, "%s: device index %d is out of range", call, (int)device);
    return NULL;
  }
  if (!tdc_use_device(call, device)) return NULL;
  const int64_t size = rounded(nbytes);
  std::lock_guard<std::mutex> guard(lock);
  device_cache &c = caches[device];
  void *p = NULL;
  auto it = c.free_blocks.find(size);
  if (it != c.free_blocks.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    c.stats.cache_hits++;
  } else {
    cudaError_t e = cudaMalloc(&p, (size_t)size);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cache(device);
      e = cudaMalloc(&p, (size_t)size);
    }
    if (!tdc_check(e, call)) return NULL;
    c.stats.cuda_mallocs++;
    c.stats.reserved_bytes += size;
  }
  c.stats.allocations++;
  c.stats.allocated_bytes += size;
  if (c.stats.allocated_bytes > c.stats.peak_allocated_bytes)
    c.stats.peak_allocated_bytes = c.stats.allocated_bytes;
  return p;
}

/* The storage free callback: ctx is the block's block_info. */
void tdc_free_block(void *data, void *ctx) {
  block_info *b = (block_info *)ctx;
  {
    std::lock_guard<std::mutex> guard(lock);
    device_cache &c = caches[b->device];
    c.free_blocks[b->size].push_back(data);
    c.stats.allocated_bytes -= b->size;
  }
  free(b);
}

td_tensor *tdc_empty(const char *call, int32_t device, int32_t ndim, const int64_t *shape,
                     int32_t dtype) {
  const int64_t itemsize = td_dtype_itemsize(dtype);
  if (itemsize == 0) {
    tdc_fail(TD_EDTYPE, "%s: unknown dtype %d", call, (int)dtype);
    return NULL;
  }
  if (ndim < 0 || ndim > TD_MAX_DIMS) {
    tdc_fail(TD_EINVAL, "%s: %d dims (0..%d)", call, (int)ndim, TD_MAX_DIMS);
    return NULL;
  }
  int64_t numel = 1;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0 || (shape[i] && numel > INT64_MAX / 8 / shape[i])) {
      tdc_fail(TD_ESHAPE, "%s: invalid or too large shape (dim %d is %lld)", call, (int)i,
               (long long)shape[i]);
      return NULL;
    }
    numel *= shape[i];
  }
  const int64_t nbytes = numel * itemsize;
  block_info *b = (block_info *)malloc(sizeof *b);
  if (!b) {
    tdc_fail(TD_ENOMEM, "%s: out of host memory", call);
    return NULL;
  }
  void *p = tdc_alloc(call, device, nbytes);
  if (!p) {
    free(b);
    return NULL;
  }
  b->device = device;
  b->size = rounded(nbytes);
  td_storage *s = td_storage_new_external(TD_STORAGE_DEVICE, p, nbytes, TD_DEVICE_CUDA, device,
                                          tdc_free_block, b);
  if (!s) {
    tdc_free_block(p, b);
    return NULL;
  }
  td_tensor *t = td_tensor_from_storage(s, 0, ndim, shape, NULL, dtype);
  td_storage_release(s); /* the tensor holds the one reference */
  return t;
}

TDC_EXPORT td_tensor *td_cuda_empty(int32_t device, int32_t ndim, const int64_t *shape,
                                    int32_t dtype) {
  return tdc_empty("empty", device, ndim, shape, dtype);
}

TDC_EXPORT int32_t td_cuda_memory_stats_get(int32_t device, td_cuda_memory_stats *out) {
  if (device < 0 || device >= MAX_DEVICES || !out)
    return tdc_fail(TD_EINVAL, "memory_stats: device index %d is out of range", (int)device);
  std::lock_guard<std::mutex> guard(lock);
  *out = caches[device].stats;
  return TD_OK;
}

TDC_EXPORT int32_t td_cuda_empty_cache(void) {
  std::lock_guard<std::mutex> guard(lock);
  for (int32_t d = 0; d < MAX_DEVICES; d++)
    if (!caches[d].free_blocks.empty()) release_cache(d);
  return TD_OK;
}

/* ---- pinned host memory ---- */

static void free_pinned(void *data, void *) { cudaFreeHost(data); }

/* A contiguous pinned host tensor of t's shape and dtype (uninitialised). */
td_tensor *tdc_empty_pinned(const char *call, int32_t ndim, const int64_t *shape, int32_t dtype) {
  int64_t numel = 1;
  for (int32_t i = 0; i < ndim; i++) numel *= shape[i];
  const int64_t nbytes = numel * td_dtype_itemsize(dtype);
  void *p = NULL;
  if (!tdc_check(cudaHostAlloc(&p, (size_t)(nbytes > 0 ? nbytes : 1), cudaHostAllocPortable),
                 call))
    return NULL;
  td_storage *s = td_storage_new_external(TD_STORAGE_PINNED, p, nbytes, TD_DEVICE_CPU, 0,
                                          free_pinned, NULL);
  if (!s) {
    cudaFreeHost(p);
    return NULL;
  }
  td_tensor *t = td_tensor_from_storage(s, 0, ndim, shape, NULL, dtype);
  td_storage_release(s);
  return t;
}

TDC_EXPORT int32_t td_cuda_is_pinned(const td_tensor *t) {
  return t && td_storage_kind(t->storage) == TD_STORAGE_PINNED;
}
