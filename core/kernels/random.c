/*
 * random.c: generators and the random fills (uniform_, normal_, bernoulli_, randint_,
 * randperm), all drawn from Philox4x32-10 (philox.h).
 *
 * Philox is counter based: every element's bits are a pure function of (seed, offset,
 * element index), so a fill splits across threads at any boundary and gives the same
 * tensor with any thread count, and a strided tensor gets the same values as a
 * contiguous one of its shape.
 *
 * ---- The exact stream mapping (enough to reproduce our numbers elsewhere) ----------
 * A generator is (seed, offset), both uint64; manual_seed sets the seed and offset 0.
 *   key        {seed & 0xffffffff, seed >> 32}
 *   W(b, w)    philox4x32_10(counter {b & 0xffffffff, b >> 32, w, 0}, key): the 4 words
 *              of block b, "word" w (the 128-bit counter b + w * 2^64)
 * A call on a tensor of numel elements takes base = offset, then sets
 * offset = base + ceil(numel / 4) (mod 2^64). Element i, counted in row-major order of
 * the tensor's shape whatever its strides, uses block b = base + floor(i / 4) (mod 2^64)
 * and lane l = i % 4:
 *   x32(i)     W(b, 0)[l]
 *   x64(i)     W(b, 1)[l] * 2^32 + W(b, 0)[l]
 * uniform_     float64: u = (x64 >> 11) * 2^-53; float32, float16, bfloat16:
 *              u = (x32 >> 8) * 2^-24. v = low + (high - low) * u in double, then
 *              min(v, top), top being the largest value of the dtype below high (low
 *              when there is none), then rounded to the dtype: never high.
 * normal_      Box-Muller on lane pairs (0, 1) and (2, 3) of a block: u1 from the even
 *              lane, u2 from the odd one, r = sqrt(-2 ln u1), the even lane gets
 *              r cos(2 pi u2) and the odd lane r sin(2 pi u2); value mean + std * z in
 *              double, rounded to the dtype. float64: u1 = ((x64 >> 11) + 1) * 2^-53,
 *              u2 = (x64 >> 11) * 2^-53; others: u1 = (x32 + 1) * 2^-32, u2 = x32 * 2^-32.
 *              (Bit-exact only where log, sqrt, sin and cos round alike: the CPU
 *              takes SLEEF's vector log, sin and cos, within an ulp like libm's.)
 * bernoulli_   1 when x32 * 2^-32 < p, else 0, for every output dtype.
 * randint_     r = high - low as uint64; Lemire's method: m = x * r (128-bit), starting
 *              from x = x64(i); while (m mod 2^64) < (2^64 - r) mod r, retry with attempt
 *              a = 1, 2, ...: x = W(b, 2a + 1)[l] * 2^32 + W(b, 2a)[l]. The value is
 *              low + floor(m / 2^64): exactly uniform, the same for every dtype.
 * randperm(n)  perm = 0 .. n-1; for k = 0 .. n-2: i = n-1-k, j = randint draw k with
 *              low 0 and high i + 1, swap perm[i] and perm[j]; offset advances by
 *              ceil(n / 4), as for randint_ on n elements.
 *
 * Thread safety: a call reads and advances its generator without a lock, so one
 * generator (the default one included) must not be used from two threads at once;
 * give each thread its own generator. Forked workers inherit a copy of the state.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/parallel.h"
#include "dtypes.h"
#include "elementwise.h"
#include "float_below.h"
#include "iter.h"
#include "philox.h"
#include "widest.h"

struct td_generator {
  uint64_t seed;
  uint64_t offset; /* the next unused block */
};

static td_generator default_generator = {0, 0};

/* ---- generators ------------------------------------------------------------------- */

TD_EXPORT td_generator *td_generator_new(uint64_t seed) {
  td_generator *g = malloc(sizeof *g);
  if (!g) return td_fail_null(TD_ENOMEM, "generator_new: out of memory");
  g->seed = seed;
  g->offset = 0;
  return g;
}

/* Generators are owned by whoever made them (no refcount); the default one is static. */
TD_EXPORT void td_generator_release(td_generator *g) {
  if (g && g != &default_generator) free(g);
}

TD_EXPORT td_generator *td_default_generator(void) { return &default_generator; }

TD_EXPORT void td_generator_manual_seed(td_generator *g, uint64_t seed) {
  if (!g) g = &default_generator;
  g->seed = seed;
  g->offset = 0;
}

TD_EXPORT uint64_t td_generator_seed(const td_generator *g) {
  return (g ? g : &default_generator)->seed;
}

TD_EXPORT uint64_t td_generator_offset(const td_generator *g) {
  return (g ? g : &default_generator)->offset;
}

/* (seed, offset) is the whole state: a stream put back continues block for block. */
TD_EXPORT void td_generator_set_state(td_generator *g, uint64_t seed, uint64_t offset) {
  if (!g) g = &default_generator;
  g->seed = seed;
  g->offset = offset;
}

/* Blocks [base, base + ceil(n / 4)) belong to this call; returns base. */
static uint64_t reserve(td_generator *g, int64_t n) {
  uint64_t base = g->offset;
  g->offset += (uint64_t)(n / 4) + (uint64_t)(n % 4 != 0);
  return base;
}

TD_EXPORT uint64_t td_generator_reserve(td_generator *g, int64_t numel) {
  return reserve(g ? g : &default_generator, numel < 0 ? 0 : numel);
}

/* The bits of a block and their conversions to values are philox.h's (the CUDA backend
 * draws through the same functions). */

/* ---- fills ------------------------------------------------------------------------------ */

enum draw_kind { DRAW_UNIFORM, DRAW_NORMAL, DRAW_BERNOULLI, DRAW_RANDINT };

typedef struct draw_job {
  int32_t kind;
  int32_t wide;       /* float64 output: 53-bit uniforms from x64 */
  int32_t need64;     /* x64 is used: wide, or randint */
  uint32_t key[2];
  uint64_t base;      /* the call's first block */
  double a, b, top;   /* uniform: low, high - low, top; normal: mean, std; bernoulli: p */
  int64_t low;        /* randint: low and high - low */
  uint64_t range;
  td_inner_loop cast; /* buffer element (double or int64) -> the tensor's dtype */
  char *out;          /* the contiguous destination */
  int64_t itemsize;
} draw_job;

enum { DRAW_BUF = 256, DRAW_BLOCKS = DRAW_BUF / 4 + 1 }; /* a buffer's elements may span one more block */

/* Word `word` of the nb blocks from `first` on, in element order: words[4 * k + l] is
 * lane l of block first + k. Blocks do not depend on each other, so the compiler runs
 * this loop on vectors of blocks (WIDEST): 16 at a time with AVX-512, where one block
 * at a time left each round's multiplies waiting on the last. */
WIDEST static void philox_words(const uint32_t key[2], uint64_t first, int64_t nb, uint32_t word,
                                uint32_t *restrict words) {
  const uint32_t lo = (uint32_t)first, hi = (uint32_t)(first >> 32);
  for (int64_t k = 0; k < nb; k++) {
    const uint32_t c0 = lo + (uint32_t)k; /* block first + k: k < 2^32, one carry at most */
    const uint32_t ctr[4] = {c0, hi + (c0 < lo), word, 0};
    td_philox4x32_10(ctr, key, words + 4 * k);
  }
}

/* dst[k] = fn(src[k]) for n doubles: SLEEF's vector log, sin or cos (elementwise_vecmath).
 * src is not const: gcc 12 at -O1 (which inlines less) takes a const pointer argument
 * for a read of the whole array and warns that normal_values' u1 "may be used
 * uninitialized", though only the np elements it filled are read (issue 28). */
static void vec_math(int32_t op, double *dst, double *src, int64_t n) {
  char *p[2] = {(char *)dst, (char *)src};
  const int64_t s[2] = {8, 8};
  td_ew_vecmath_loop(op, TD_FLOAT64)(p, s, n, NULL);
}

/* n normal values into buf from the lane pairs of w0, w1 (element order), the first
 * value being element `skip` of them: Box-Muller on every pair at once, so log, sin and
 * cos run as SLEEF's vector functions (u10: within an ulp, as libm's, which took 21 ns
 * an element one pair at a time). The operations and their order are
 * td_philox_normal4's. */
WIDEST static void normal_values(const draw_job *j, const uint32_t *w0, const uint32_t *w1, int64_t skip,
                          int64_t n, double *buf) {
  enum { PAIRS = 2 * DRAW_BLOCKS };
  double u1[PAIRS], u2[PAIRS], r[PAIRS], c[PAIRS], s[PAIRS], z[2 * PAIRS];
  const int64_t np = (skip + n + 1) / 2;
  for (int64_t p = 0; p < np; p++) {
    td_philox_pair_uniforms(w0[2 * p], w1[2 * p], w0[2 * p + 1], w1[2 * p + 1], j->wide, &u1[p], &u2[p]);
    u2[p] *= TD_PHILOX_TWO_PI;
  }
  vec_math(TD_UNARY_LOG, r, u1, np);
  for (int64_t p = 0; p < np; p++) r[p] = sqrt(-2.0 * r[p]);
  vec_math(TD_UNARY_COS, c, u2, np);
  vec_math(TD_UNARY_SIN, s, u2, np);
  for (int64_t p = 0; p < np; p++) {
    z[2 * p] = r[p] * c[p];
    z[2 * p + 1] = r[p] * s[p];
  }
  for (int64_t e = 0; e < n; e++) buf[e] = j->a + j->b * z[skip + e];
}

/* Elements [i0, i0 + n) into buf (doubles for uniform and normal, else int64), n at
 * most DRAW_BUF: the words of their blocks first, then one loop per kind. */
WIDEST static void draw_values(const draw_job *j, int64_t i0, int64_t n, void *buf) {
  const int64_t k0 = i0 / 4, nb = (i0 + n - 1) / 4 - k0 + 1, skip = i0 - 4 * k0;
  uint32_t w0[4 * DRAW_BLOCKS], w1[4 * DRAW_BLOCKS];
  philox_words(j->key, j->base + (uint64_t)k0, nb, 0, w0);
  if (j->need64) philox_words(j->key, j->base + (uint64_t)k0, nb, 1, w1);
  else memset(w1, 0, sizeof w1);
  const uint32_t *x0 = w0 + skip, *x1 = w1 + skip;
  double *f = buf;
  int64_t *v = buf;
  switch (j->kind) {
    case DRAW_NORMAL:
      normal_values(j, w0, w1, skip, n, f);
      break;
    case DRAW_UNIFORM:
      for (int64_t e = 0; e < n; e++) {
        const double u = j->a + j->b * td_philox_lane_uniform(x0[e], x1[e], j->wide);
        f[e] = u < j->top ? u : j->top;
      }
      break;
    case DRAW_BERNOULLI:
      for (int64_t e = 0; e < n; e++) v[e] = (double)x0[e] * 0x1p-32 < j->a;
      break;
    default: /* DRAW_RANDINT */
      for (int64_t e = 0; e < n; e++) {
        const int64_t i = i0 + e;
        v[e] = (int64_t)((uint64_t)j->low + td_philox_below(j->key, j->base + (uint64_t)(i / 4), (int)(i % 4),
                                                            td_philox_join(x1[e], x0[e]), j->range));
      }
      break;
  }
}

static void draw_chunk(int64_t begin, int64_t end, void *ctx) {
  const draw_job *j = ctx;
  union {
    double f[DRAW_BUF];
    int64_t i[DRAW_BUF];
  } buf;
  const int64_t strides[2] = {j->itemsize, 8};
  for (int64_t i0 = begin; i0 < end; i0 += DRAW_BUF) {
    const int64_t n = end - i0 < DRAW_BUF ? end - i0 : DRAW_BUF;
    draw_values(j, i0, n, &buf);
    char *ptrs[2] = {j->out + i0 * j->itemsize, (char *)&buf};
    j->cast(ptrs, strides, n, NULL);
  }
}

/* Runs job j over t: straight into t when it is contiguous, else into a contiguous
 * scratch tensor copied into t, so element i is always the i-th in row-major order. */
static int32_t draw(td_tensor *t, draw_job *j, td_generator *g, int32_t buf_dtype) {
  if (!g) g = &default_generator;
  const int64_t numel = td_tensor_numel(t);
  td_tensor *dst = t;
  if (numel > 0 && !td_tensor_is_contiguous(t)) {
    dst = td_tensor_empty(t->ndim, t->shape, t->dtype);
    if (!dst) return td_last_status(); /* the generator is left untouched */
  }
  j->key[0] = (uint32_t)g->seed;
  j->key[1] = (uint32_t)(g->seed >> 32);
  j->base = reserve(g, numel);
  if (numel == 0) return TD_OK;
  j->wide = t->dtype == TD_FLOAT64;
  j->need64 = (j->wide && j->kind != DRAW_BERNOULLI) || j->kind == DRAW_RANDINT;
  j->cast = td_cast_loop(t->dtype, buf_dtype);
  j->out = td_tensor_ptr(dst);
  j->itemsize = t->itemsize;
  td_parallel_for(numel, TD_GRAIN, draw_chunk, j);
  int32_t status = TD_OK;
  if (dst != t) {
    status = td_tensor_copy_(t, dst);
    td_tensor_release(dst);
  }
  return status;
}

/* ---- argument checks ------------------------------------------------------------------ */

static bool check_target(const char *call, const td_tensor *t) {
  if (!t) {
    td_fail(TD_EINVAL, "%s: the tensor is NULL", call);
    return false;
  }
  if (!td_check_writable(call, t)) return false;
  return td_check_cpu(call, t, "tensor");
}

static bool check_floating(const char *call, const td_tensor *t) {
  if (td_dtype_is_floating(t->dtype)) return true;
  td_fail(TD_EDTYPE, "%s: expected a floating dtype (%s), got %s", call,
          td_dtype_floating_names(), td_dtype_name(t->dtype));
  return false;
}

/* ---- public fills ------------------------------------------------------------------------ */

TD_EXPORT int32_t td_uniform_(td_tensor *t, double low, double high, td_generator *g) {
  if (!check_target("uniform_", t) || !check_floating("uniform_", t)) return td_last_status();
  const double max = td_dtype_max(t->dtype);
  if (!(low >= -max && low <= max && high >= -max && high <= max))
    return td_fail(TD_EINVAL, "uniform_: low %g and high %g must be finite and within the "
                   "range of %s", low, high, td_dtype_name(t->dtype));
  if (low > high)
    return td_fail(TD_EINVAL, "uniform_: expects a [low, high) range, but low %g > high %g",
                   low, high);
  if (!isfinite(high - low))
    return td_fail(TD_EINVAL, "uniform_: high - low overflows (low %g, high %g)", low, high);
  const double top = td_float_below(t->dtype, high);
  draw_job j = {.kind = DRAW_UNIFORM, .a = low, .b = high - low, .top = top < low ? low : top};
  return draw(t, &j, g, TD_FLOAT64);
}

TD_EXPORT int32_t td_normal_(td_tensor *t, double mean, double std, td_generator *g) {
  if (!check_target("normal_", t) || !check_floating("normal_", t)) return td_last_status();
  if (!(std >= 0.0))
    return td_fail(TD_EINVAL, "normal_: expects std >= 0, but got std %g", std);
  draw_job j = {.kind = DRAW_NORMAL, .a = mean, .b = std};
  return draw(t, &j, g, TD_FLOAT64);
}

TD_EXPORT int32_t td_bernoulli_(td_tensor *t, double p, td_generator *g) {
  if (!check_target("bernoulli_", t)) return td_last_status();
  if (!(p >= 0.0 && p <= 1.0))
    return td_fail(TD_EINVAL, "bernoulli_: expects p in [0, 1], but got p %g", p);
  draw_job j = {.kind = DRAW_BERNOULLI, .a = p};
  return draw(t, &j, g, TD_INT64);
}

TD_EXPORT int32_t td_randint_(td_tensor *t, int64_t low, int64_t high, td_generator *g) {
  if (!check_target("randint_", t)) return td_last_status();
  if (high <= low)
    return td_fail(TD_EINVAL, "randint_: expects low < high, but got low %lld, high %lld",
                   (long long)low, (long long)high);
  int64_t lo, hi;
  td_dtype_exact_range(t->dtype, &lo, &hi);
  if (low < lo || high - 1 > hi)
    return td_fail(TD_EINVAL, "randint_: range [%lld, %lld) does not fit dtype %s (%lld .. %lld)",
                   (long long)low, (long long)high, td_dtype_name(t->dtype), (long long)lo,
                   (long long)hi);
  draw_job j = {.kind = DRAW_RANDINT, .low = low, .range = (uint64_t)high - (uint64_t)low};
  return draw(t, &j, g, TD_INT64);
}

TD_EXPORT td_tensor *td_randperm(int64_t n, int32_t dtype, td_generator *g) {
  if (!td_check_dtype("randperm", dtype)) return NULL;
  if (n < 0) return td_fail_null(TD_EINVAL, "randperm: n %lld is negative", (long long)n);
  int64_t lo, hi;
  td_dtype_exact_range(dtype, &lo, &hi);
  if (dtype == TD_BOOL || n - 1 > hi)
    return td_fail_null(TD_EDTYPE, "randperm: dtype %s cannot hold values up to %lld",
                        td_dtype_name(dtype), (long long)(n - 1));
  td_tensor *perm = td_tensor_empty(1, &n, TD_INT64);
  if (!perm) return NULL;
  if (!g) g = &default_generator;
  int64_t *v = (int64_t *)td_tensor_ptr(perm);
  for (int64_t i = 0; i < n; i++) v[i] = i;
  const uint32_t key[2] = {(uint32_t)g->seed, (uint32_t)(g->seed >> 32)};
  const uint64_t base = reserve(g, n);
  uint32_t w0[4], w1[4];
  /* Fisher-Yates from the top: draw k picks the partner of position n-1-k. */
  for (int64_t k = 0; k + 1 < n; k++) {
    const uint64_t block = base + (uint64_t)(k / 4);
    const int l = (int)(k % 4);
    if (l == 0) {
      td_philox_block(key, block, 0, w0);
      td_philox_block(key, block, 1, w1);
    }
    const int64_t i = n - 1 - k;
    const int64_t j =
        (int64_t)td_philox_below(key, block, l, td_philox_join(w1[l], w0[l]), (uint64_t)i + 1);
    const int64_t tmp = v[i];
    v[i] = v[j];
    v[j] = tmp;
  }
  if (dtype == TD_INT64) return perm;
  td_tensor *out = td_tensor_to_dtype(perm, dtype);
  td_tensor_release(perm);
  return out;
}
