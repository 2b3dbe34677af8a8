/*
 * philox.h: the Philox4x32-10 block function (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC'11), bit-exact with Random123's philox4x32_R(10, ...).
 *
 * It maps a 128-bit counter and a 64-bit key to 128 random bits, with no state: any
 * element of a stream can be computed on its own, which is what makes the results of
 * random.c independent of threads and chunking. Header-only so that tests can check it
 * against Random123's known-answer vectors.
 */
#ifndef TD_PHILOX_H
#define TD_PHILOX_H

#include <stdint.h>

enum {
  TD_PHILOX_ROUNDS = 10
};

/* Random123's constants: the round multipliers and the Weyl key increments. */
#define TD_PHILOX_M0 UINT32_C(0xD2511F53)
#define TD_PHILOX_M1 UINT32_C(0xCD9E8D57)
#define TD_PHILOX_W0 UINT32_C(0x9E3779B9)
#define TD_PHILOX_W1 UINT32_C(0xBB67AE85)

/* The CUDA backend compiles the same function for the device (core/cuda/random.cu). */
#ifndef TD_PHILOX_FN
#define TD_PHILOX_FN static inline
#endif

/* out = philox4x32_10(ctr, key). The first round uses the key as given; the key is
 * bumped by (W0, W1) before each later round. */
TD_PHILOX_FN void td_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                    uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < TD_PHILOX_ROUNDS; r++) {
    if (r > 0) {
      k0 += TD_PHILOX_W0;
      k1 += TD_PHILOX_W1;
    }
    const uint64_t p0 = (uint64_t)TD_PHILOX_M0 * c0, p1 = (uint64_t)TD_PHILOX_M1 * c2;
    const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

#endif
