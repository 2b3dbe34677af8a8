/*
 * heap_cache.c: heap blocks for storages, kept for reuse.
 *
 * Small blocks (a storage with its header and data inline, storage.c) wait in free
 * lists by size class. A loop of small ops frees one GC cycle's results together and
 * then makes as many again; glibc's free of thousands of 4 KiB chunks at once
 * consolidates its bins (a quarter of the time of `a + b` on 1000 floats, with
 * malloc itself), where a free list costs a push and a pop.
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
#include "parallel.h"

#if defined(__has_feature) /* clang's way of saying it is under ASan */
#if __has_feature(address_sanitizer)
#define TD_CLANG_ASAN 1
#endif
#endif

enum { SMALL_ALIGN = 64, PAGE = 4096, CACHE_SLOTS = 64 };
#define MEDIUM_BLOCK ((int64_t)64 << 10) /* from here on blocks are cached */
#define LARGE_BLOCK ((int64_t)1 << 20)   /* from here on 2 MiB aligned, huge pages */
#define HUGE_PAGE ((int64_t)2 << 20)

typedef struct block {
  void *data;
  int64_t capacity;
} block;

/* Freed large blocks waiting for reuse. */
typedef struct tier {
  block slots[CACHE_SLOTS];
  int32_t count;
  int64_t bytes, limit;
} tier;

/* medium: requests in [64 KiB, 1 MiB), rounded up to 64 KiB steps (up to 1 MiB), one stack per size (a pipeline's per-batch
 * temporaries: a 512 KiB result otherwise costs 128 page faults, several times the work
 * of an add), at most a sixteenth of the large limit in all; a collection cycle frees
 * hundreds of them at once, so each size keeps up to MEDIUM_SLOTS. large: 1 MiB and
 * more in 2 MiB steps, best fit. */
/* 16 classes: a request just under 1 MiB rounds up to 1 MiB itself, the 16th step (15
 * classes let such a block index past the arrays; found by tests/fuzz/fuzz_ship.c). */
enum { MEDIUM_CLASSES = 16, MEDIUM_SLOTS = 512 };

/* small: blocks of at most TD_SMALL_BLOCK bytes, in classes of 64-byte steps up to
 * 1 KiB, then four per doubling (at most a fifth wasted); each class a stack linked
 * through the free blocks themselves, at most a sixteenth of the large limit in all. */
enum { SMALL_FINE = 1024, SMALL_FINE_CLASSES = SMALL_FINE / SMALL_ALIGN, SMALL_CLASSES = 40 };
typedef struct free_block {
  struct free_block *next;
} free_block;

static struct {
  pthread_mutex_t lock;
  tier large;
  void *medium[MEDIUM_CLASSES][MEDIUM_SLOTS];
  int32_t medium_count[MEDIUM_CLASSES];
  int64_t medium_bytes, medium_limit;
  free_block *small[SMALL_CLASSES];
  int64_t small_bytes, small_limit;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER, .large = {.limit = -1}, .medium_limit = -1,
           .small_limit = -1};

static pthread_once_t limit_once = PTHREAD_ONCE_INIT;

static void reset_lock_in_child(void) { pthread_mutex_init(&cache.lock, NULL); }

static void read_limit(void) {
  const char *env = getenv("TD_CACHE_BYTES");
  int64_t limit = env ? strtoll(env, NULL, 10) : (int64_t)1 << 30;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && limit > (int64_t)pages * page / 4) limit = (int64_t)pages * page / 4;
  cache.large.limit = limit < 0 ? 0 : limit;
  cache.medium_limit = cache.large.limit / 16;
#if defined(__SANITIZE_ADDRESS__) || defined(TD_CLANG_ASAN)
  cache.small_limit = 0; /* under ASan every small block goes back: a use after free shows */
#else
  cache.small_limit = cache.large.limit / 16;
#endif
  pthread_atfork(NULL, NULL, reset_lock_in_child);
}

/* Forking code calls this first: the child's lock reset is registered with the limit,
 * lazily, and a fork before the first cached block must not go without it. */
void td_heap_cache_before_fork(void) { pthread_once(&limit_once, read_limit); }

/* The smallest cached block of t that fits rounded without wasting half, taken out;
 * NULL when none does. Called with the lock held. */
static void *tier_take(tier *t, int64_t rounded, int64_t *capacity) {
  int32_t best = -1;
  for (int32_t i = 0; i < t->count; i++) {
    int64_t c = t->slots[i].capacity;
    if (c >= rounded && c <= 2 * rounded && (best < 0 || c < t->slots[best].capacity)) best = i;
  }
  if (best < 0) return NULL;
  block b = t->slots[best];
  t->slots[best] = t->slots[--t->count];
  t->bytes -= b.capacity;
  *capacity = b.capacity;
  return b.data;
}

/* Keeps a freed block in t when there is room; false otherwise. Lock held. */
static bool tier_put(tier *t, void *data, int64_t capacity) {
  if (t->count >= CACHE_SLOTS || t->bytes + capacity > t->limit) return false;
  t->slots[t->count++] = (block){data, capacity};
  t->bytes += capacity;
  return true;
}

/* A medium block of rounded bytes (a multiple of MEDIUM_BLOCK) from its stack, or
 * NULL; keeping one back. Lock held. */
static void *medium_take(int64_t rounded) {
  int32_t c = (int32_t)(rounded / MEDIUM_BLOCK) - 1;
  if (cache.medium_count[c] == 0) return NULL;
  cache.medium_bytes -= rounded;
  return cache.medium[c][--cache.medium_count[c]];
}

static bool medium_put(void *data, int64_t capacity) {
  int32_t c = (int32_t)(capacity / MEDIUM_BLOCK) - 1;
  if (cache.medium_count[c] >= MEDIUM_SLOTS || cache.medium_bytes + capacity > cache.medium_limit)
    return false;
  cache.medium[c][cache.medium_count[c]++] = data;
  cache.medium_bytes += capacity;
  return true;
}

/* The class of a small block of nbytes (1 .. TD_SMALL_BLOCK), and its capacity. */
static int32_t small_class(int64_t nbytes, int64_t *capacity) {
  if (nbytes <= SMALL_FINE) {
    const int64_t steps = nbytes <= SMALL_ALIGN ? 1 : (nbytes + SMALL_ALIGN - 1) / SMALL_ALIGN;
    *capacity = steps * SMALL_ALIGN;
    return (int32_t)steps - 1;
  }
  /* nbytes in (2^lg, 2^(lg+1)]: rounded up to a quarter of 2^lg, 5 to 8 quarters */
  const int32_t lg = 63 - __builtin_clzll((unsigned long long)(nbytes - 1));
  const int64_t quarter = (int64_t)1 << (lg - 2);
  const int64_t quarters = (nbytes + quarter - 1) / quarter;
  *capacity = quarters * quarter;
  return SMALL_FINE_CLASSES + (lg - 10) * 4 + (int32_t)quarters - 5;
}

_Static_assert(TD_SMALL_BLOCK <= (int64_t)SMALL_FINE << ((SMALL_CLASSES - SMALL_FINE_CLASSES) / 4),
               "the small classes must reach TD_SMALL_BLOCK");

void *td_small_alloc(int64_t nbytes, int64_t *capacity) {
  const int32_t c = small_class(nbytes, capacity);
  pthread_once(&limit_once, read_limit);
  pthread_mutex_lock(&cache.lock);
  free_block *b = cache.small[c];
  if (b) {
    cache.small[c] = b->next;
    cache.small_bytes -= *capacity;
  }
  pthread_mutex_unlock(&cache.lock);
  if (b) return b;
  void *p = NULL;
  return posix_memalign(&p, SMALL_ALIGN, (size_t)*capacity) == 0 ? p : NULL;
}

void td_small_free(void *block, int64_t capacity) {
  int64_t check;
  const int32_t c = small_class(capacity, &check);
  pthread_once(&limit_once, read_limit);
  pthread_mutex_lock(&cache.lock);
  const bool kept = cache.small_bytes + capacity <= cache.small_limit;
  if (kept) {
    free_block *b = block;
    b->next = cache.small[c];
    cache.small[c] = b;
    cache.small_bytes += capacity;
  }
  pthread_mutex_unlock(&cache.lock);
  if (!kept) free(block);
}

void *td_heap_alloc(int64_t nbytes, int64_t *capacity) {
  void *p = NULL;
  if (nbytes < MEDIUM_BLOCK) {
    int64_t rounded = (nbytes + SMALL_ALIGN - 1) / SMALL_ALIGN * SMALL_ALIGN;
    if (rounded == 0) rounded = SMALL_ALIGN;
    if (posix_memalign(&p, SMALL_ALIGN, (size_t)rounded) != 0) return NULL;
    *capacity = rounded;
    return p;
  }
  bool large = nbytes >= LARGE_BLOCK;
  int64_t step = large ? HUGE_PAGE : MEDIUM_BLOCK;
  int64_t rounded = (nbytes + step - 1) / step * step;
  pthread_once(&limit_once, read_limit);
  pthread_mutex_lock(&cache.lock);
  if (large) {
    p = tier_take(&cache.large, rounded, capacity);
  } else if ((p = medium_take(rounded)) != NULL) {
    *capacity = rounded;
  }
  pthread_mutex_unlock(&cache.lock);
  if (p) return p;
  if (posix_memalign(&p, (size_t)(large ? HUGE_PAGE : PAGE), (size_t)rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
  if (large) madvise(p, (size_t)rounded, MADV_HUGEPAGE); /* advice only: failure changes nothing */
#endif
  *capacity = rounded;
  return p;
}

void td_heap_free(void *data, int64_t capacity) {
  if (!data) return;
  if (capacity >= MEDIUM_BLOCK) {
    pthread_once(&limit_once, read_limit);
    pthread_mutex_lock(&cache.lock);
    /* Large blocks are whole 2 MiB steps; a medium one may be 1 MiB itself. */
    bool kept = capacity >= HUGE_PAGE ? tier_put(&cache.large, data, capacity)
                                      : medium_put(data, capacity);
    pthread_mutex_unlock(&cache.lock);
    if (kept) return;
  }
  free(data);
}

static int64_t tier_release(tier *t) {
  int64_t freed = t->bytes;
  for (int32_t i = 0; i < t->count; i++) free(t->slots[i].data);
  t->count = 0;
  t->bytes = 0;
  return freed;
}

TD_EXPORT int64_t td_release_cached_memory(void) {
  pthread_mutex_lock(&cache.lock);
  int64_t freed = tier_release(&cache.large) + cache.medium_bytes;
  for (int32_t c = 0; c < MEDIUM_CLASSES; c++) {
    for (int32_t i = 0; i < cache.medium_count[c]; i++) free(cache.medium[c][i]);
    cache.medium_count[c] = 0;
  }
  cache.medium_bytes = 0;
  freed += cache.small_bytes;
  for (int32_t c = 0; c < SMALL_CLASSES; c++) {
    while (cache.small[c]) {
      free_block *b = cache.small[c];
      cache.small[c] = b->next;
      free(b);
    }
  }
  cache.small_bytes = 0;
  pthread_mutex_unlock(&cache.lock);
  return freed;
}

/* A host that closes its Lua state unloads the library: the cached blocks would leak
 * (64 MiB of RSS per state), so they go back to the system then. */
__attribute__((destructor)) static void release_cache_at_unload(void) { td_release_cached_memory(); }

/* td_shutdown: what a host calls before closing its last Lua state, or whenever it
 * wants the library idle: threads joined, cached blocks returned. Both come back on
 * demand. */
TD_EXPORT void td_shutdown(void) {
  td_parallel_shutdown();
  td_release_cached_memory();
}

TD_EXPORT int64_t td_cached_bytes(void) {
  pthread_mutex_lock(&cache.lock);
  int64_t bytes = cache.medium_bytes + cache.large.bytes; /* small lists: not counted */
  pthread_mutex_unlock(&cache.lock);
  return bytes;
}
