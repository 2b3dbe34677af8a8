/* rng.h: the C tests' reproducible random numbers (xorshift64*). A test that wants
 * its own sequence sets rng_state before its first rnd(). */
#ifndef TD_TEST_RNG_H
#define TD_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static inline uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

#endif
