/*
 * parallel.c: a small thread pool (see parallel.h).
 *
 * One job at a time (submit_lock). The submitting thread writes the job into the pool,
 * opens it and bumps `wake`; the chunks are cut into one contiguous share per thread,
 * each handed out through its own atomic counter, and the submitting thread works too
 * (run_chunks). Handing a job over costs a cache line, not a system call, as long as
 * the workers are awake: after each job a worker watches `wake` for SPIN_NS (tens of
 * microseconds, with the CPU's pause hint) before it sleeps on it with a futex, so
 * back-to-back ops do not pay a wake-up (with workers that slept between jobs, 60% of
 * a loop of 1e5-element adds on 2 threads went to futex wakes and waits, and the op
 * took longer than on one thread), and an idle pool burns no core for longer than
 * that. The submitter makes the wake system call only when a worker sleeps, and waits
 * for the workers that joined the same way: a short spin, then a futex.
 *
 * The pool starts lazily, is rebuilt when td_set_num_threads changes its size, and is
 * forgotten in a forked child (its threads do not exist there), which starts its own
 * on first use.
 */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "parallel.h"

/* OpenBLAS's own knob; declared here to avoid depending on its header's location. */
void openblas_set_num_threads(int num_threads);

enum { TD_MAX_THREADS = 256 };

/* How long an idle worker, or a submitter waiting for its workers, spins before it
 * sleeps: longer than the gap between two ops of a loop (a few microseconds of Lua),
 * shorter than anything a user would call a core burnt while idle. A spinner that finds
 * it was descheduled for PREEMPTED_NS (the pauses between two looks at the clock take
 * under a microsecond) learns that other threads want the cores: the machine is
 * oversubscribed (MPI ranks, Map workers, other programs), where a spinning pool only
 * takes CPU from them and from its own submitter, so nobody spins for BACKOFF_NS and
 * every job wakes the workers it needs with a futex, as an idle pool does. */
enum { SPIN_NS = 50000, PREEMPTED_NS = 20000, BACKOFF_NS = 10000000 };

/* A participant's share of a job's chunks: [next, end) left to hand out. Each on its
 * own cache line, so that threads taking chunks of their own shares do not contend. */
typedef struct share {
  _Alignas(64) atomic_int_fast64_t next;
  int64_t end;
} share;

static struct {
  /* The job: written by the submitter before it opens the job, read by the workers
   * that joined it (they count themselves in `active` first). */
  td_range_fn fn;
  void *ctx;
  int64_t n, grain;
  int32_t nshares;
  share shares[TD_MAX_THREADS];
  /* The number of the job workers may join, 0 while none may. 64 bits: a worker
   * that read a number long ago can never mistake a later job for its own. */
  atomic_uint_fast64_t open;
  uint64_t jobs;          /* numbers given out; the submitter's own */
  atomic_uint active;     /* workers inside the open job: a futex word */
  atomic_uint submitter_sleeps;
  atomic_uint wake;       /* bumped for every job and to stop: the workers' futex word */
  atomic_uint sleepers;   /* workers asleep on `wake`, or about to be */
  atomic_uint stopping;
  pthread_t threads[TD_MAX_THREADS];
  unsigned wake_at_start[TD_MAX_THREADS]; /* `wake` when each worker was created */
  int32_t started; /* worker threads running (threads - 1 when up); under submit_lock */
  int32_t wanted;  /* td_get_num_threads() */
} pool;

static _Thread_local int inside_chunk; /* nested calls run inline */
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t submit_lock = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */

/* The atomics above are plain 32-bit words underneath, which is what a futex is. */
static void futex_wait(atomic_uint *word, unsigned expected) {
  syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *word, int count) {
  syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static atomic_int_fast64_t no_spin_until; /* now_ns() time; see BACKOFF_NS */

/* Spins until *word differs from `value` or SPIN_NS pass; returns whether it changed. */
static int spin_while_equal(atomic_uint *word, unsigned value) {
  int64_t start = now_ns(), last = start;
  if (start < atomic_load_explicit(&no_spin_until, memory_order_relaxed))
    return atomic_load(word) != value;
  for (int i = 1;; i++) {
    if (atomic_load_explicit(word, memory_order_acquire) != value) return 1;
    cpu_relax();
    if ((i & 31) == 0) { /* the clock every ~32 pauses (~0.6 us): cheap next to them */
      int64_t t = now_ns();
      if (t - last > PREEMPTED_NS) {
        atomic_store_explicit(&no_spin_until, t + BACKOFF_NS, memory_order_relaxed);
        return 0;
      }
      if (t - start >= SPIN_NS) return 0;
      last = t;
    }
  }
}

/* Participant `self` (0: the submitter, 1..: the workers) runs the chunks of its own
 * share, in order, then takes what is left of the others'. The same participant gets
 * the same share in every job of the same size, so a loop over the same tensors finds
 * each part in the cache of the core that touched it last; taking from the others
 * keeps every thread busy when one starts late or is descheduled. */
static void run_chunks(int32_t self) {
  inside_chunk = 1;
  const int32_t nshares = pool.nshares;
  for (int32_t k = 0; k < nshares; k++) {
    share *sh = &pool.shares[(self + k) % nshares];
    for (;;) {
      int64_t c = atomic_fetch_add(&sh->next, 1);
      if (c >= sh->end) break;
      int64_t begin = c * pool.grain;
      pool.fn(begin, begin + pool.grain < pool.n ? begin + pool.grain : pool.n, pool.ctx);
    }
  }
  inside_chunk = 0;
}

static void leave_job(void) {
  /* seq_cst pairs with the submitter's store of submitter_sleeps before it reads
   * `active`: either it sees 0 or this sees it asleep and wakes it. */
  if (atomic_fetch_sub(&pool.active, 1) == 1 && atomic_load(&pool.submitter_sleeps))
    futex_wake(&pool.active, 1);
}

static void *worker(void *arg) {
  const int32_t self = (int32_t)(intptr_t)arg;
  /* Not `wake` now: a job or a stop may have bumped it since pthread_create. */
  unsigned seen = pool.wake_at_start[self];
  for (;;) {
    if (!spin_while_equal(&pool.wake, seen)) {
      /* Counted before the last look at `wake` (seq_cst both sides): a submitter that
       * bumps it afterwards sees the count and wakes us; futex_wait itself returns at
       * once if it was bumped in between. */
      atomic_fetch_add(&pool.sleepers, 1);
      while (atomic_load(&pool.wake) == seen) futex_wait(&pool.wake, seen);
      atomic_fetch_sub(&pool.sleepers, 1);
    }
    seen = atomic_load(&pool.wake);
    if (atomic_load(&pool.stopping)) break;
    uint64_t job = atomic_load(&pool.open);
    if (job == 0) continue; /* woke after that job was closed */
    /* Join, then check the job is still the one we saw: the submitter closes it
     * before it reads `active`, so it either waits for us or we back off here
     * without touching the job's fields. */
    atomic_fetch_add(&pool.active, 1);
    if (atomic_load(&pool.open) == job) run_chunks(self);
    leave_job();
  }
  return NULL;
}

/* Runs with submit_lock held. */
static void stop_workers(void) {
  atomic_store(&pool.stopping, 1);
  atomic_fetch_add(&pool.wake, 1);
  futex_wake(&pool.wake, INT_MAX);
  for (int32_t i = 0; i < pool.started; i++) pthread_join(pool.threads[i], NULL);
  pool.started = 0;
  atomic_store(&pool.stopping, 0);
}

/* Runs with submit_lock held. */
static void start_workers(void) {
  int32_t want = pool.wanted - 1;
  for (int32_t i = pool.started; i < want; i++) {
    pool.wake_at_start[i + 1] = atomic_load(&pool.wake);
    if (pthread_create(&pool.threads[i], NULL, worker, (void *)(intptr_t)(i + 1)) != 0)
      break; /* run with fewer */
    pool.started++;
  }
}

/* A forked child has the parent's memory but none of its threads. */
static void forget_pool_in_child(void) {
  pool.started = 0;
  atomic_store(&pool.stopping, 0);
  atomic_store(&pool.open, 0);
  atomic_store(&pool.active, 0);
  atomic_store(&pool.sleepers, 0);
  atomic_store(&pool.submitter_sleeps, 0);
  pthread_mutex_init(&submit_lock, NULL);
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

/* Chunks per thread: enough that a thread that finishes first can take some of a late
 * one's; few enough that handing them out stays cheap. 64: whole cache lines. */
enum { EVEN_CHUNKS_PER_THREAD = 4, EVEN_MIN_GRAIN = 4096, EVEN_ALIGN = 64 };

int64_t td_parallel_even_grain(int64_t n) {
  const int64_t threads = td_get_num_threads();
  if (n <= TD_GRAIN || threads == 1) return TD_GRAIN;
  const int64_t pieces = threads * EVEN_CHUNKS_PER_THREAD;
  int64_t grain = (n + pieces - 1) / pieces;
  grain = (grain + EVEN_ALIGN - 1) / EVEN_ALIGN * EVEN_ALIGN;
  return grain < EVEN_MIN_GRAIN ? EVEN_MIN_GRAIN : grain > TD_GRAIN ? TD_GRAIN : grain;
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
  pthread_mutex_lock(&submit_lock);
  start_workers();
  pool.fn = fn;
  pool.ctx = ctx;
  pool.n = n;
  pool.grain = grain;
  /* Contiguous shares, one per thread that can have a chunk. */
  const int32_t nshares = pool.started + 1 < chunks ? pool.started + 1 : (int32_t)chunks;
  pool.nshares = nshares;
  for (int32_t t = 0; t < nshares; t++) {
    atomic_store_explicit(&pool.shares[t].next, chunks * t / nshares, memory_order_relaxed);
    pool.shares[t].end = chunks * (t + 1) / nshares;
  }
  atomic_store(&pool.open, ++pool.jobs); /* publishes the fields above */
  atomic_fetch_add(&pool.wake, 1);
  /* Only sleeping workers need the system call; no more of them than there are
   * chunks for (this thread takes one). */
  unsigned asleep = atomic_load(&pool.sleepers);
  if (asleep > 0) futex_wake(&pool.wake, chunks - 1 < (int64_t)asleep ? (int)(chunks - 1) : (int)asleep);
  run_chunks(0); /* returns once every chunk is handed out */
  atomic_store(&pool.open, 0); /* no worker joins from here on */
  unsigned busy = atomic_load(&pool.active);
  while (busy != 0) { /* workers still inside their last chunk */
    if (!spin_while_equal(&pool.active, busy)) {
      atomic_store(&pool.submitter_sleeps, 1);
      while ((busy = atomic_load(&pool.active)) != 0) futex_wait(&pool.active, busy);
      atomic_store(&pool.submitter_sleeps, 0);
    }
    busy = atomic_load(&pool.active);
  }
  pthread_mutex_unlock(&submit_lock);
}
