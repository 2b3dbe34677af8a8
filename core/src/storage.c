/*
 * storage.c: reference-counted byte buffers of every kind (heap, file mapping,
 * anonymous shared memory, and external memory freed by its owner's callback: the CUDA
 * backend's device and pinned blocks). Tensors are views over one storage each.
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Heap and shared bytes alive now: the Lua layer reads it to pace its GC. */
static atomic_int_fast64_t live_bytes;

TD_EXPORT int64_t td_live_bytes(void) { return (int64_t)atomic_load(&live_bytes); }

/* Physical memory: what a size check compares a request against (sysconf; 0 when the
 * system does not say). */
TD_EXPORT int64_t td_physical_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return (int64_t)pages > INT64_MAX / (int64_t)page ? INT64_MAX : (int64_t)pages * (int64_t)page;
}

static td_storage *storage_header(const char *call, int64_t nbytes) {
  if (nbytes < 0)
    return td_fail_null(TD_EINVAL, "%s: negative byte count %lld", call, (long long)nbytes);
  td_storage *s = calloc(1, sizeof *s);
  if (!s) return td_fail_null(TD_ENOMEM, "%s: out of memory", call);
  atomic_init(&s->refcount, 1);
  s->nbytes = nbytes;
  s->writable = 1;
  s->device_type = TD_DEVICE_CPU;
  return s;
}

/* A small storage in one block with room for a header (internal.h); NULL when nbytes
 * is too large for one, with no error set. */
static td_storage *small_storage(int64_t nbytes) {
  const int64_t data_at = (int64_t)offsetof(td_small_block, data);
  if (nbytes < 0 || nbytes > TD_SMALL_BLOCK - data_at) return NULL;
  int64_t capacity;
  td_small_block *b = td_small_alloc(data_at + nbytes, &capacity);
  if (!b) return NULL;
  td_storage *s = &b->storage;
  memset(s, 0, sizeof *s);
  atomic_init(&s->refcount, 1);
  s->data = b->data;
  s->nbytes = nbytes;
  s->mapped_bytes = capacity - data_at;
  s->small_block = capacity;
  s->kind = TD_STORAGE_HEAP;
  s->writable = 1;
  s->device_type = TD_DEVICE_CPU;
  atomic_fetch_add(&live_bytes, nbytes);
  return s;
}

td_storage *td_storage_new_heap_with_header(int64_t nbytes, td_tensor **header) {
  td_storage *s = small_storage(nbytes);
  if (s) {
    *header = &((td_small_block *)s)->header;
    return s;
  }
  *header = NULL;
  return td_storage_new_heap(nbytes);
}

TD_EXPORT td_storage *td_storage_new_heap(int64_t nbytes) {
  td_storage *s = small_storage(nbytes);
  if (s) return s;
  s = storage_header("storage", nbytes);
  if (!s) return NULL;
  s->kind = TD_STORAGE_HEAP;
  s->data = td_heap_alloc(nbytes, &s->mapped_bytes);
  if (!s->data) {
    free(s);
    return td_fail_null(TD_ENOMEM, "storage: cannot allocate %lld bytes", (long long)nbytes);
  }
  atomic_fetch_add(&live_bytes, nbytes);
  return s;
}

TD_EXPORT td_storage *td_storage_new_shared(int64_t nbytes) {
  td_storage *s = storage_header("shared storage", nbytes);
  if (!s) return NULL;
  s->kind = TD_STORAGE_SHARED;
  s->mapped_bytes = nbytes > 0 ? nbytes : 1;
  void *p = mmap(NULL, (size_t)s->mapped_bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    free(s);
    return td_fail_null(TD_ENOMEM, "shared storage: cannot map %lld bytes: %s", (long long)nbytes,
                        strerror(errno));
  }
  s->data = p;
  atomic_fetch_add(&live_bytes, nbytes);
  return s;
}

static const char *mode_name(int32_t mode) {
  switch (mode) {
    case TD_MAP_READ: return "read";
    case TD_MAP_READWRITE: return "read-write";
    default: return "create";
  }
}

td_storage *td_storage_map_fd(int fd, int64_t nbytes, int32_t writable, char *why, size_t why_len) {
  static char no_bytes[1]; /* an empty leaf needs no memory, only a non-NULL pointer */
  td_storage *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(why, why_len, "out of memory");
    return NULL;
  }
  atomic_init(&s->refcount, 1);
  s->kind = TD_STORAGE_FILE;
  s->nbytes = nbytes;
  s->writable = writable ? 1 : 0;
  s->device_type = TD_DEVICE_CPU;
  if (nbytes == 0) {
    s->data = no_bytes;
    return s;
  }
  void *p = (uint64_t)nbytes > SIZE_MAX ? MAP_FAILED
                                        : mmap(NULL, (size_t)nbytes,
                                               PROT_READ | (writable ? PROT_WRITE : 0),
                                               MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    snprintf(why, why_len, "cannot map %lld bytes: %s", (long long)nbytes, strerror(errno));
    free(s);
    return NULL;
  }
  s->data = p;
  s->mapped_bytes = nbytes;
  return s;
}


TD_EXPORT td_storage *td_storage_map_file(const char *path, int64_t nbytes, int32_t mode) {
  if (!path) return td_fail_null(TD_EINVAL, "map_file: path is NULL");
  if (mode != TD_MAP_READ && mode != TD_MAP_READWRITE && mode != TD_MAP_CREATE)
    return td_fail_null(TD_EINVAL, "map_file: unknown mode %d for '%s'", (int)mode, path);
  if (nbytes < 0)
    return td_fail_null(TD_EINVAL, "map_file: negative byte count %lld", (long long)nbytes);
  int flags = mode == TD_MAP_READ ? O_RDONLY : mode == TD_MAP_READWRITE ? O_RDWR
                                                                       : O_RDWR | O_CREAT | O_TRUNC;
  /* O_NONBLOCK: a FIFO at path would block the open forever; it is refused below */
  int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0)
    return td_fail_null(TD_EIO, "map_file: cannot open '%s' for %s: %s", path, mode_name(mode),
                        strerror(errno));
  td_storage *s = NULL;
  struct stat st;
  char why[128];
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    td_fail(TD_EIO, "map_file: '%s' is not a regular file", path);
  else if (mode == TD_MAP_CREATE && ftruncate(fd, nbytes) != 0)
    td_fail(TD_EIO, "map_file: cannot size '%s' to %lld bytes: %s", path, (long long)nbytes,
            strerror(errno));
  else if (mode != TD_MAP_CREATE && st.st_size < nbytes)
    td_fail(TD_EIO, "map_file: '%s' holds %lld bytes, %lld needed", path,
            (long long)st.st_size, (long long)nbytes);
  else if (!(s = td_storage_map_fd(fd, nbytes, mode != TD_MAP_READ, why, sizeof why)))
    td_fail(TD_EIO, "map_file: '%s': %s", path, why);
  close(fd);
  return s;
}

TD_EXPORT td_storage *td_storage_new_external(int32_t kind, void *data, int64_t nbytes,
                                              int32_t device_type, int32_t device_index,
                                              td_storage_free_fn free_fn, void *ctx) {
  const bool device = kind == TD_STORAGE_DEVICE && device_type == TD_DEVICE_CUDA;
  const bool pinned = kind == TD_STORAGE_PINNED && device_type == TD_DEVICE_CPU;
  if (!device && !pinned)
    return td_fail_null(TD_EINVAL, "external storage: kind %d with device type %d (expected "
                        "device memory on cuda or pinned memory on cpu)", (int)kind,
                        (int)device_type);
  if (!data || !free_fn || device_index < 0)
    return td_fail_null(TD_EINVAL, "external storage: NULL data or free function, or a "
                        "negative device index");
  td_storage *s = storage_header("external storage", nbytes);
  if (!s) return NULL;
  s->kind = kind;
  s->data = data;
  s->device_type = device_type;
  s->device_index = device_index;
  s->free_fn = free_fn;
  s->free_ctx = ctx;
  return s;
}

TD_EXPORT void td_storage_retain(td_storage *s) {
  if (s) atomic_fetch_add_explicit(&s->refcount, 1, memory_order_relaxed);
}

TD_EXPORT void td_storage_release(td_storage *s) {
  if (!s || atomic_fetch_sub_explicit(&s->refcount, 1, memory_order_acq_rel) != 1) return;
  switch (s->kind) {
    case TD_STORAGE_HEAP:
      atomic_fetch_sub(&live_bytes, s->nbytes);
      if (s->small_block) {
        td_small_free(s, s->small_block); /* the storage itself is in the block */
        return;
      }
      td_heap_free(s->data, s->mapped_bytes);
      break;
    case TD_STORAGE_SHARED:
      atomic_fetch_sub(&live_bytes, s->nbytes);
      munmap(s->data, (size_t)s->mapped_bytes);
      break;
    case TD_STORAGE_FILE:
      if (s->mapped_bytes) munmap(s->data, (size_t)s->mapped_bytes);
      break;
    case TD_STORAGE_DEVICE:
    case TD_STORAGE_PINNED:
      s->free_fn(s->data, s->free_ctx);
      break;
    default:
      break;
  }
  free(s);
}

TD_EXPORT int64_t td_storage_nbytes(const td_storage *s) { return s->nbytes; }
TD_EXPORT void *td_storage_data_borrow(const td_storage *s) { return s->data; }
TD_EXPORT int32_t td_storage_kind(const td_storage *s) { return s->kind; }
TD_EXPORT int32_t td_storage_is_writable(const td_storage *s) { return s->writable; }
TD_EXPORT int32_t td_storage_device_type(const td_storage *s) { return s->device_type; }
TD_EXPORT int32_t td_storage_device_index(const td_storage *s) { return s->device_index; }

TD_EXPORT int32_t td_storage_sync(td_storage *s) {
  if (s->kind != TD_STORAGE_FILE || !s->mapped_bytes || !s->writable) return TD_OK;
  if (msync(s->data, (size_t)s->mapped_bytes, MS_SYNC) != 0)
    return td_fail(TD_EIO, "sync: msync of %lld bytes failed: %s", (long long)s->mapped_bytes,
                   strerror(errno));
  return TD_OK;
}
