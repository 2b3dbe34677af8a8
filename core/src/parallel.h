/*
 * parallel.h: the thread pool every large kernel uses.
 *
 * td_parallel_for splits [0, n) into chunks of exactly `grain` items (the last may be
 * shorter) and runs fn on each chunk, on the pool's threads and the caller's. Chunk
 * boundaries depend only on n and grain, never on the thread count, so a kernel that
 * keeps one partial result per chunk (index begin / grain) and combines them in chunk
 * order gets the same answer with any number of threads. Work of at most one chunk
 * runs inline with no synchronisation at all; so does a call made from inside a chunk.
 * Each thread starts on its own contiguous share of the chunks (the same share for the
 * same n, so repeated ops find their data in that core's cache), then helps with the
 * others'; which thread runs a chunk never changes a result.
 */
#ifndef TD_PARALLEL_H
#define TD_PARALLEL_H

#include <stdint.h>

typedef void (*td_range_fn)(int64_t begin, int64_t end, void *ctx);

/* The grain most elementwise kernels use: small enough to balance 2-64 threads,
 * large enough that a chunk's work dwarfs handing it out (~30 us of memory traffic). */
enum { TD_GRAIN = 32768 };

void td_parallel_for(int64_t n, int64_t grain, td_range_fn fn, void *ctx);
/* The grain for work whose items are independent, where no result depends on where the
 * work is cut (td_iter_run_parallel): a few chunks of equal size per thread, so that two
 * threads each get half of 100K elements where TD_GRAIN's chunks give one of them 64K.
 * TD_GRAIN on one thread and for at most TD_GRAIN items (one chunk: run inline). */
int64_t td_parallel_even_grain(int64_t n);
/* How many chunks td_parallel_for makes of n items. */
int64_t td_parallel_chunks(int64_t n, int64_t grain);
/* Stops and joins the worker threads (they restart on the next parallel call). */
void td_parallel_shutdown(void);

#endif
