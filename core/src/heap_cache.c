/*
 * heap_cache.c: heap blocks for storages, with large ones kept for reuse.
 *
 * A fresh multi-megabyte block costs a page fault per 4 KiB on first touch, which
 * dominates an op that writes its result once (a 256 MiB index_select spends ~150 ms
 * faulting in 23 ms of copying). Pipelines allocate the same sizes batch after batch,
 * so freed large blocks wait in a small cache (at most TD_CACHE_BYTES, default 1 GiB,
 * and a quarter of physical memory) and the next request that fits takes one back.
 * New large blocks are 2 MiB aligned and advised as transparent huge pages, which
 * makes the first touch several times cheaper where the kernel allows it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

enum { SMALL_ALIGN = 64, CACHE_SLOTS = 64 };
#define LARGE_BLOCK ((int64_t)1 << 20) /* from here on blocks are cached */
#define HUGE_PAGE ((int64_t)2 << 20)

typedef struct block {
  void *data;
  int64_t capacity;
} block;

static struct {
  pthread_mutex_t lock;
  block slots[CACHE_SLOTS];
  int32_t count;
  int64_t bytes, limit;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER, .limit = -1};

static pthread_once_t limit_once = PTHREAD_ONCE_INIT;

static void reset_lock_in_child(void) { pthread_mutex_init(&cache.lock, NULL); }

static void read_limit(void) {
  const char *env = getenv("TD_CACHE_BYTES");
  int64_t limit = env ? strtoll(env, NULL, 10) : (int64_t)1 << 30;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && limit > (int64_t)pages * page / 4) limit = (int64_t)pages * page / 4;
  cache.limit = limit < 0 ? 0 : limit;
  pthread_atfork(NULL, NULL, reset_lock_in_child);
}

/* Forking code calls this first: the child's lock reset is registered with the limit,
 * lazily, and a fork before the first large block must not go without it. */
void td_heap_cache_before_fork(void) { pthread_once(&limit_once, read_limit); }

void *td_heap_alloc(int64_t nbytes, int64_t *capacity) {
  void *p = NULL;
  if (nbytes < LARGE_BLOCK) {
    int64_t rounded = (nbytes + SMALL_ALIGN - 1) / SMALL_ALIGN * SMALL_ALIGN;
    if (rounded == 0) rounded = SMALL_ALIGN;
    if (posix_memalign(&p, SMALL_ALIGN, (size_t)rounded) != 0) return NULL;
    *capacity = rounded;
    return p;
  }
  int64_t rounded = (nbytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
  pthread_once(&limit_once, read_limit);
  pthread_mutex_lock(&cache.lock);
  int32_t best = -1; /* the smallest cached block that fits without wasting half */
  for (int32_t i = 0; i < cache.count; i++) {
    int64_t c = cache.slots[i].capacity;
    if (c >= rounded && c <= 2 * rounded && (best < 0 || c < cache.slots[best].capacity)) best = i;
  }
  if (best >= 0) {
    block b = cache.slots[best];
    cache.slots[best] = cache.slots[--cache.count];
    cache.bytes -= b.capacity;
    pthread_mutex_unlock(&cache.lock);
    *capacity = b.capacity;
    return b.data;
  }
  pthread_mutex_unlock(&cache.lock);
  if (posix_memalign(&p, (size_t)HUGE_PAGE, (size_t)rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
  madvise(p, (size_t)rounded, MADV_HUGEPAGE); /* advice only: failure changes nothing */
#endif
  *capacity = rounded;
  return p;
}

void td_heap_free(void *data, int64_t capacity) {
  if (!data) return;
  if (capacity >= LARGE_BLOCK) {
    pthread_once(&limit_once, read_limit);
    pthread_mutex_lock(&cache.lock);
    if (cache.count < CACHE_SLOTS && cache.bytes + capacity <= cache.limit) {
      cache.slots[cache.count++] = (block){data, capacity};
      cache.bytes += capacity;
      pthread_mutex_unlock(&cache.lock);
      return;
    }
    pthread_mutex_unlock(&cache.lock);
  }
  free(data);
}

TD_EXPORT int64_t td_release_cached_memory(void) {
  pthread_mutex_lock(&cache.lock);
  int64_t freed = cache.bytes;
  for (int32_t i = 0; i < cache.count; i++) free(cache.slots[i].data);
  cache.count = 0;
  cache.bytes = 0;
  pthread_mutex_unlock(&cache.lock);
  return freed;
}

TD_EXPORT int64_t td_cached_bytes(void) {
  pthread_mutex_lock(&cache.lock);
  int64_t bytes = cache.bytes;
  pthread_mutex_unlock(&cache.lock);
  return bytes;
}
