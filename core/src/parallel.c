/*
 * parallel.c: a small pthread pool (see parallel.h).
 *
 * Workers sleep on a condition variable between jobs; a job hands out chunk indices
 * through an atomic counter, and the calling thread works too. The pool starts lazily,
 * is rebuilt when td_set_num_threads changes its size, and is forgotten in a forked
 * child (its threads do not exist there), which starts its own on first use.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"
#include "parallel.h"

/* OpenBLAS's own knob; declared here to avoid depending on its header's location. */
void openblas_set_num_threads(int num_threads);

enum { TD_MAX_THREADS = 256 };

typedef struct job {
  td_range_fn fn;
  void *ctx;
  int64_t n, grain, chunks;
  atomic_int_fast64_t next; /* next chunk to hand out */
  int32_t active;           /* workers inside run_chunks; guarded by pool.lock */
} job;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake, finished;
  pthread_t threads[TD_MAX_THREADS];
  int32_t started;   /* worker threads running (threads - 1 when up) */
  int32_t wanted;    /* td_get_num_threads() */
  int64_t generation; /* bumped for every job, and to stop workers */
  int32_t stopping;
  job *current;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .finished = PTHREAD_COND_INITIALIZER};

static _Thread_local int inside_chunk; /* nested calls run inline */
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t submit_lock = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */

static void run_chunks(job *j) {
  inside_chunk = 1;
  for (;;) {
    int64_t c = atomic_fetch_add(&j->next, 1);
    if (c >= j->chunks) break;
    int64_t begin = c * j->grain, end = begin + j->grain < j->n ? begin + j->grain : j->n;
    j->fn(begin, end, j->ctx);
  }
  inside_chunk = 0;
}

static void *worker(void *arg) {
  (void)arg;
  int64_t seen = 0;
  pthread_mutex_lock(&pool.lock);
  seen = pool.generation;
  for (;;) {
    while (pool.generation == seen && !pool.stopping) pthread_cond_wait(&pool.wake, &pool.lock);
    if (pool.stopping) break;
    seen = pool.generation;
    job *j = pool.current;
    if (!j) continue; /* woke after that job was over */
    /* The caller waits for active to drop back to 0 before its job (on its stack) dies. */
    j->active++;
    pthread_mutex_unlock(&pool.lock);
    run_chunks(j);
    pthread_mutex_lock(&pool.lock);
    if (--j->active == 0) pthread_cond_broadcast(&pool.finished);
  }
  pthread_mutex_unlock(&pool.lock);
  return NULL;
}

static void stop_workers(void) {
  pthread_mutex_lock(&pool.lock);
  pool.stopping = 1;
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
  for (int32_t i = 0; i < pool.started; i++) pthread_join(pool.threads[i], NULL);
  pool.started = 0;
  pool.stopping = 0;
}

/* Runs with submit_lock held. */
static void start_workers(void) {
  int32_t want = pool.wanted - 1;
  for (int32_t i = pool.started; i < want; i++) {
    if (pthread_create(&pool.threads[i], NULL, worker, NULL) != 0) break; /* run with fewer */
    pool.started++;
  }
}

/* A forked child has the parent's memory but none of its threads. */
static void forget_pool_in_child(void) {
  pool.started = 0;
  pool.stopping = 0;
  pool.current = NULL;
  pthread_mutex_init(&pool.lock, NULL);
  pthread_mutex_init(&submit_lock, NULL);
  pthread_cond_init(&pool.wake, NULL);
  pthread_cond_init(&pool.finished, NULL);
}

static void set_defaults(void) {
  const char *env = getenv("TD_NUM_THREADS");
  long n = env ? strtol(env, NULL, 10) : 0;
  if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
  pool.wanted = n < 1 ? 1 : n > TD_MAX_THREADS ? TD_MAX_THREADS : (int32_t)n;
  openblas_set_num_threads(pool.wanted);
  pthread_atfork(NULL, NULL, forget_pool_in_child);
}

/* Stops and joins the workers (they start again on the next parallel call). A host
 * that closes its Lua state unloads this library: threads left sleeping inside it
 * would wake in unmapped code ("The futex facility returned an unexpected error code"),
 * so the destructor below stops them, and td_shutdown does it on request. trylock:
 * at exit a job may still hold the lock (exit called from inside one); then the
 * process is going anyway and nothing is unmapped under the workers. */
void td_parallel_shutdown(void) {
  if (pthread_mutex_trylock(&submit_lock) != 0) return;
  if (pool.started > 0) stop_workers();
  pthread_mutex_unlock(&submit_lock);
}

__attribute__((destructor)) static void stop_pool_at_unload(void) { td_parallel_shutdown(); }

TD_EXPORT int32_t td_get_num_threads(void) {
  pthread_once(&defaults_once, set_defaults);
  return pool.wanted;
}

TD_EXPORT int32_t td_set_num_threads(int32_t n) {
  if (n < 1 || n > TD_MAX_THREADS)
    return td_fail(TD_EINVAL, "set_num_threads: %d threads requested (1..%d)", (int)n,
                   TD_MAX_THREADS);
  pthread_once(&defaults_once, set_defaults);
  pthread_mutex_lock(&submit_lock);
  if (pool.started > n - 1) stop_workers(); /* shrink: restart lazily at the new size */
  pool.wanted = n;
  pthread_mutex_unlock(&submit_lock);
  openblas_set_num_threads(n);
  return TD_OK;
}

int64_t td_parallel_chunks(int64_t n, int64_t grain) {
  if (n <= 0) return 0;
  if (grain < 1) grain = 1;
  return (n + grain - 1) / grain;
}

void td_parallel_for(int64_t n, int64_t grain, td_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t chunks = td_parallel_chunks(n, grain);
  if (chunks == 1 || inside_chunk || td_get_num_threads() == 1) {
    for (int64_t c = 0; c < chunks; c++) { /* same chunks, one thread */
      int64_t begin = c * grain;
      fn(begin, begin + grain < n ? begin + grain : n, ctx);
    }
    return;
  }
  job j = {.fn = fn, .ctx = ctx, .n = n, .grain = grain, .chunks = chunks, .active = 0};
  atomic_init(&j.next, 0);
  pthread_mutex_lock(&submit_lock);
  start_workers();
  pthread_mutex_lock(&pool.lock);
  pool.current = &j;
  pool.generation++;
  pthread_cond_broadcast(&pool.wake);
  pthread_mutex_unlock(&pool.lock);
  run_chunks(&j); /* returns once every chunk is handed out */
  pthread_mutex_lock(&pool.lock);
  pool.current = NULL; /* no worker joins from here on */
  while (j.active > 0) pthread_cond_wait(&pool.finished, &pool.lock);
  pthread_mutex_unlock(&pool.lock);
  pthread_mutex_unlock(&submit_lock);
}
