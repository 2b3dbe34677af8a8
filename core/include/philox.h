/*
 * philox.h: the Philox4x32-10 block function (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC'11), bit-exact with Random123's philox4x32_R(10, ...).
 *
 * It maps a 128-bit counter and a 64-bit key to 128 random bits, with no state: any
 * element of a stream can be computed on its own, which is what makes the results of
 * random.c independent of threads and chunking. Header-only so that tests can check it
 * against Random123's known-answer vectors. It lives in core/include, beside the ABI but
 * not part of it (not installed, no FFI declarations), because the CPU kernels
 * (core/kernels/random.c) and the CUDA backend (core/cuda/random.cu) both compile it.
 */
#ifndef TD_PHILOX_H
#define TD_PHILOX_H

#include <math.h>
#include <stdint.h>

enum {
  TD_PHILOX_ROUNDS = 10
};

/* Random123's constants: the round multipliers and the Weyl key increments. */
#define TD_PHILOX_M0 UINT32_C(0xD2511F53)
#define TD_PHILOX_M1 UINT32_C(0xCD9E8D57)
#define TD_PHILOX_W0 UINT32_C(0x9E3779B9)
#define TD_PHILOX_W1 UINT32_C(0xBB67AE85)

/* The CUDA backend compiles the same functions for the device (core/cuda/random.cu), so
 * a seed gives the same numbers there. */
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

/* ---- the stream's conversions (random.c documents the mapping) ---- */

/* Word `word` (four lanes) of element block `block` of the stream keyed by key. */
TD_PHILOX_FN void td_philox_block(const uint32_t key[2], uint64_t block, uint32_t word,
                                  uint32_t out[4]) {
  const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), word, 0};
  td_philox4x32_10(ctr, key, out);
}

TD_PHILOX_FN uint64_t td_philox_join(uint32_t hi, uint32_t lo) { return (uint64_t)hi << 32 | lo; }

/* The high 64 bits of a * b, the low ones in *lo (portable 128-bit product). */
TD_PHILOX_FN uint64_t td_philox_mul_hi(uint64_t a, uint64_t b, uint64_t *lo) {
  const uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
  const uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
  *lo = mid << 32 | (uint32_t)p00;
  return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

/* A uniform integer in [0, r), r >= 1, from x (lane `lane` of block `block`): Lemire's
 * multiply-shift with rejection, the retries drawn from the block's later words so the
 * result stays a pure function of the element. A retry happens with probability
 * below r / 2^64. */
TD_PHILOX_FN uint64_t td_philox_below(const uint32_t key[2], uint64_t block, int lane,
                                      uint64_t x, uint64_t r) {
  uint64_t lo, hi = td_philox_mul_hi(x, r, &lo);
  if (lo < r) {
    const uint64_t t = (0 - r) % r; /* 2^64 mod r */
    for (uint32_t a = 1; lo < t; a++) {
      uint32_t wlo[4], whi[4];
      td_philox_block(key, block, 2 * a, wlo);
      td_philox_block(key, block, 2 * a + 1, whi);
      hi = td_philox_mul_hi(td_philox_join(whi[lane], wlo[lane]), r, &lo);
    }
  }
  return hi;
}

/* A lane whose word 0 is x0 and word 1 is x1 as a uniform in [0, 1): 53 bits of both
 * (wide), else 24 of x0. */
TD_PHILOX_FN double td_philox_lane_uniform(uint32_t x0, uint32_t x1, int wide) {
  return wide ? (double)(td_philox_join(x1, x0) >> 11) * 0x1p-53 : (double)(x0 >> 8) * 0x1p-24;
}

/* Lane l of a block whose words are w0, w1 as a uniform in [0, 1). */
TD_PHILOX_FN double td_philox_uniform(const uint32_t w0[4], const uint32_t w1[4], int l,
                                      int wide) {
  return td_philox_lane_uniform(w0[l], w1[l], wide);
}

/* Box-Muller's two uniforms from a lane pair: u1 in (0, 1] from the even lane (words
 * e0, e1), u2 in [0, 1) from the odd one (o0, o1). */
TD_PHILOX_FN void td_philox_pair_uniforms(uint32_t e0, uint32_t e1, uint32_t o0, uint32_t o1,
                                          int wide, double *u1, double *u2) {
  if (wide) {
    *u1 = (double)((td_philox_join(e1, e0) >> 11) + 1) * 0x1p-53;
    *u2 = (double)(td_philox_join(o1, o0) >> 11) * 0x1p-53;
  } else {
    *u1 = ((double)e0 + 1.0) * 0x1p-32;
    *u2 = (double)o0 * 0x1p-32;
  }
}

#define TD_PHILOX_TWO_PI 6.283185307179586476925286766559

/* The four normal values of a block, mean a and std b (Box-Muller on lane pairs). */
TD_PHILOX_FN void td_philox_normal4(const uint32_t w0[4], const uint32_t w1[4], int wide,
                                    double a, double b, double z[4]) {
  for (int p = 0; p < 4; p += 2) {
    double u1, u2;
    td_philox_pair_uniforms(w0[p], w1[p], w0[p + 1], w1[p + 1], wide, &u1, &u2);
    const double r = sqrt(-2.0 * log(u1)), t = TD_PHILOX_TWO_PI * u2;
    z[p] = a + b * (r * cos(t));
    z[p + 1] = a + b * (r * sin(t));
  }
}

#endif
