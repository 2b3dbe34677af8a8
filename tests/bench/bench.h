/*
 * bench.h: the timing helpers the benchmarks share. Figures are the best of N runs
 * (the least disturbed one on a shared machine), each reported next to a reference
 * measured in the same process.
 */
#ifndef TD_BENCH_H
#define TD_BENCH_H

#include <stdint.h>
#include <string.h>
#include <time.h>

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds taken by the fastest of n calls of fn(ctx). */
static inline double bench_best(int n, void (*fn)(void *), void *ctx) {
  double best = 1e300;
  for (int i = 0; i < n; i++) {
    double t0 = bench_now();
    fn(ctx);
    double dt = bench_now() - t0;
    if (dt < best) best = dt;
  }
  return best;
}

/* Best-of-n seconds of fn_a and fn_b, run alternately so that a noisy neighbour
 * slows both alike and their ratio stays meaningful. */
static inline void bench_pair(int n, void (*fn_a)(void *), void *ctx_a, void (*fn_b)(void *),
                              void *ctx_b, double *best_a, double *best_b) {
  *best_a = *best_b = 1e300;
  for (int i = 0; i < n; i++) {
    double a = bench_best(1, fn_a, ctx_a), b = bench_best(1, fn_b, ctx_b);
    if (a < *best_a) *best_a = a;
    if (b < *best_b) *best_b = b;
  }
}

/* Makes the bytes at p look used, so a copy into a buffer nobody reads survives -O3. */
static inline void bench_clobber(void *p) { __asm__ __volatile__("" : : "r"(p) : "memory"); }

/* Writes every page so the first timed run does not pay for page faults. */
static inline void bench_touch(void *p, size_t nbytes) { memset(p, 1, nbytes); }

static inline double bench_gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }

#endif
