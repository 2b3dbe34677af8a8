/* test_random.c: Philox4x32-10 known answers, the documented stream mapping, the
 * statistics of each fill (seeded, so deterministic), thread and stride independence,
 * randperm, and the errors. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "philox.h"
#include "check.h"

/* ---- helpers ---------------------------------------------------------------------- */

static td_tensor *make(int64_t n, int32_t dtype) { return td_tensor_empty(1, &n, dtype); }

static double at(const td_tensor *t, int64_t i) { /* element i of a 1-D tensor */
  double v = NAN;
  td_tensor_read_f64(t, &i, &v);
  return v;
}

static double at2(const td_tensor *t, int64_t i, int64_t j) {
  const int64_t idx[2] = {i, j};
  double v = NAN;
  td_tensor_read_f64(t, idx, &v);
  return v;
}

static bool same(const td_tensor *a, const td_tensor *b) {
  const int64_t n = td_tensor_numel(a);
  if (n != td_tensor_numel(b) || a->dtype != b->dtype) return false;
  return memcmp(td_tensor_data_borrow(a), td_tensor_data_borrow(b),
                (size_t)(n * td_dtype_itemsize(a->dtype))) == 0;
}

/* The documented mapping, recomputed from philox.h. */
static void words(uint64_t seed, uint64_t block, uint32_t word, uint32_t out[4]) {
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), word, 0};
  td_philox4x32_10(ctr, key, out);
}
static uint32_t x32(uint64_t seed, uint64_t base, int64_t i) {
  uint32_t w[4];
  words(seed, base + (uint64_t)i / 4, 0, w);
  return w[i % 4];
}
static uint64_t x64(uint64_t seed, uint64_t base, int64_t i) {
  uint32_t lo[4], hi[4];
  words(seed, base + (uint64_t)i / 4, 0, lo);
  words(seed, base + (uint64_t)i / 4, 1, hi);
  return (uint64_t)hi[i % 4] << 32 | lo[i % 4];
}

typedef struct stats {
  double min, max, mean, var;
} stats;

static stats stats_of(const td_tensor *t) {
  const int64_t n = td_tensor_numel(t);
  stats s = {INFINITY, -INFINITY, 0, 0};
  long double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; i++) {
    const double v = at(t, i);
    s.min = v < s.min ? v : s.min;
    s.max = v > s.max ? v : s.max;
    sum += v;
    sq += (long double)v * v;
  }
  s.mean = (double)(sum / n);
  s.var = (double)(sq / n - (sum / n) * (sum / n));
  return s;
}

/* ---- Philox known answers (Random123 kat_vectors, philox4x32 10) -------------------- */

static void test_philox_kat(void) {
  static const struct {
    uint32_t ctr[4], key[2], out[4];
  } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
    uint32_t out[4];
    td_philox4x32_10(kat[k].ctr, kat[k].key, out);
    for (int l = 0; l < 4; l++) CHECK_EQ_I(out[l], kat[k].out[l]);
  }
}

/* ---- the documented mapping ------------------------------------------------------------ */

static void test_mapping(void) {
  const uint64_t seed = 0x0123456789abcdefULL;
  td_generator *g = td_generator_new(seed);
  CHECK(td_generator_seed(g) == seed);
  /* A first call of 10 elements takes blocks 0..2; the second starts at block 3. */
  td_tensor *f = make(10, TD_FLOAT32), *d = make(7, TD_FLOAT64);
  CHECK_EQ_I(td_uniform_(f, -1.0, 3.0, g), 0);
  CHECK_EQ_I(td_uniform_(d, 0.0, 1.0, g), 0);
  bool ok = true;
  for (int64_t i = 0; i < 10; i++)
    ok &= at(f, i) == (double)(float)(-1.0 + 4.0 * (double)(x32(seed, 0, i) >> 8) * 0x1p-24);
  CHECK(ok);
  ok = true;
  for (int64_t i = 0; i < 7; i++) ok &= at(d, i) == (double)(x64(seed, 3, i) >> 11) * 0x1p-53;
  CHECK(ok);

  /* bernoulli_ at block 5 (after 2 more), randint_ at block 8. */
  td_tensor *b = make(9, TD_INT64), *r = make(9, TD_INT64);
  CHECK_EQ_I(td_bernoulli_(b, 0.5, g), 0);
  CHECK_EQ_I(td_randint_(r, -5, 1000, g), 0);
  ok = true;
  for (int64_t i = 0; i < 9; i++) {
    ok &= at(b, i) == ((double)x32(seed, 5, i) * 0x1p-32 < 0.5 ? 1.0 : 0.0);
    /* r = 1005: the low product word is >= r (no retry) for these draws, as checked. */
    const uint64_t x = x64(seed, 8, i);
    const unsigned __int128 m = (unsigned __int128)x * 1005u;
    ok &= (uint64_t)m >= 1005u && at(r, i) == (double)(-5 + (int64_t)(m >> 64));
  }
  CHECK(ok);

  /* normal_: Box-Muller on lane pairs, float32 from 32-bit uniforms. */
  td_tensor *nrm = make(6, TD_FLOAT32);
  td_generator_manual_seed(g, seed); /* back to offset 0 */
  CHECK_EQ_I(td_normal_(nrm, 1.0, 2.0, g), 0);
  ok = true;
  for (int64_t i = 0; i < 6; i++) {
    const int64_t e = i & ~(int64_t)1; /* the pair's even element */
    const double u1 = ((double)x32(seed, 0, e) + 1.0) * 0x1p-32;
    const double u2 = (double)x32(seed, 0, e + 1) * 0x1p-32;
    const double rr = sqrt(-2.0 * log(u1)), t = 6.283185307179586 * u2;
    const double z = i % 2 ? rr * sin(t) : rr * cos(t);
    ok &= fabs(at(nrm, i) - (double)(float)(1.0 + 2.0 * z)) <= 1e-6 * (1 + fabs(z));
  }
  CHECK(ok);
  /* The same seed gives the same numbers; manual_seed resets the offset. */
  td_tensor *f2 = make(10, TD_FLOAT32);
  td_generator_manual_seed(g, seed);
  CHECK_EQ_I(td_uniform_(f2, -1.0, 3.0, g), 0);
  CHECK(same(f, f2));

  td_tensor_release(f);
  td_tensor_release(f2);
  td_tensor_release(d);
  td_tensor_release(b);
  td_tensor_release(r);
  td_tensor_release(nrm);
  td_generator_release(g);
}

/* Elements of one call do not depend on the call's length; consecutive calls continue
 * the stream at the next whole block. */
static void test_offsets(void) {
  td_generator *g = td_generator_new(7);
  td_tensor *big = make(12, TD_FLOAT32), *a = make(5, TD_FLOAT32), *c = make(4, TD_FLOAT32);
  td_uniform_(big, 0, 1, g);
  td_generator_manual_seed(g, 7);
  td_uniform_(a, 0, 1, g); /* blocks 0, 1 */
  td_uniform_(c, 0, 1, g); /* block 2 */
  bool ok = true;
  for (int64_t i = 0; i < 5; i++) ok &= at(a, i) == at(big, i);
  for (int64_t i = 0; i < 4; i++) ok &= at(c, i) == at(big, 8 + i);
  CHECK(ok);
  /* The default generator: seeded 0 at start, manual_seed resets it. */
  td_generator *g0 = td_generator_new(0);
  td_generator_manual_seed(td_default_generator(), 0);
  CHECK(td_generator_seed(td_default_generator()) == 0);
  td_uniform_(a, 0, 1, NULL);
  td_uniform_(c, 0, 1, g0);
  ok = true;
  for (int64_t i = 0; i < 4; i++) ok &= at(a, i) == at(c, i);
  CHECK(ok);
  td_generator_release(td_default_generator()); /* a no-op: the default one is static */
  td_generator_release(NULL);
  CHECK(td_default_generator() != NULL);
  td_tensor_release(big);
  td_tensor_release(a);
  td_tensor_release(c);
  td_generator_release(g);
  td_generator_release(g0);
}

/* ---- threads and strides ------------------------------------------------------------------ */

typedef int32_t (*fill_fn)(td_tensor *t, td_generator *g);
static int32_t f_uniform(td_tensor *t, td_generator *g) { return td_uniform_(t, -2, 2, g); }
static int32_t f_normal(td_tensor *t, td_generator *g) { return td_normal_(t, 0, 1, g); }
static int32_t f_bernoulli(td_tensor *t, td_generator *g) { return td_bernoulli_(t, 0.25, g); }
static int32_t f_randint(td_tensor *t, td_generator *g) { return td_randint_(t, -9, 100, g); }

static void test_threads(void) {
  static const fill_fn fills[] = {f_uniform, f_normal, f_bernoulli, f_randint};
  static const int32_t dtypes[] = {TD_FLOAT32, TD_FLOAT64, TD_FLOAT16, TD_INT32};
  const int32_t saved = td_get_num_threads();
  const int64_t n = 300001; /* ten chunks of the pool's grain, and a ragged block */
  for (int f = 0; f < 4; f++)
    for (int d = 0; d < 4; d++) {
      if (f < 2 && dtypes[d] == TD_INT32) continue;
      td_tensor *one = make(n, dtypes[d]), *four = make(n, dtypes[d]);
      td_generator *g = td_generator_new(42);
      td_set_num_threads(1);
      CHECK_EQ_I(fills[f](one, g), 0);
      td_generator_manual_seed(g, 42);
      td_set_num_threads(4);
      CHECK_EQ_I(fills[f](four, g), 0);
      CHECK(same(one, four));
      /* Another seed gives another tensor. */
      td_generator_manual_seed(g, 43);
      fills[f](four, g);
      CHECK(!same(one, four));
      td_tensor_release(one);
      td_tensor_release(four);
      td_generator_release(g);
    }
  td_set_num_threads(saved);
}

static void test_strided(void) {
  const int64_t shape[2] = {3, 4}, tshape[2] = {4, 3};
  td_tensor *base = td_tensor_empty(2, tshape, TD_FLOAT32), *ref = td_tensor_empty(2, shape, TD_FLOAT32);
  td_tensor tv; /* [3, 4] transposed view of a [4, 3] tensor */
  CHECK_EQ_I(td_tensor_transpose(base, 0, 1, &tv), 0);
  CHECK(!td_tensor_is_contiguous(&tv));
  td_generator *g = td_generator_new(5);
  CHECK_EQ_I(td_normal_(&tv, 0, 1, g), 0);
  td_generator_manual_seed(g, 5);
  CHECK_EQ_I(td_normal_(ref, 0, 1, g), 0);
  bool ok = true;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++) ok &= at2(&tv, i, j) == at2(ref, i, j);
  CHECK(ok); /* element (i, j) of the view is the (4i + j)-th draw */

  /* A sliced view (every other column) takes randint_ in row-major order too. */
  const int64_t wshape[2] = {3, 8};
  td_tensor *wide = td_tensor_full(2, wshape, TD_INT64, -1), *ri = td_tensor_empty(2, shape, TD_INT64);
  td_tensor sv;
  CHECK_EQ_I(td_tensor_slice(wide, 1, 0, 8, 2, &sv), 0);
  td_generator_manual_seed(g, 9);
  CHECK_EQ_I(td_randint_(&sv, 0, 1000000, g), 0);
  td_generator_manual_seed(g, 9);
  CHECK_EQ_I(td_randint_(ri, 0, 1000000, g), 0);
  ok = true;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 4; j++)
      ok &= at2(&sv, i, j) == at2(ri, i, j) && at2(wide, i, 2 * j + 1) == -1;
  CHECK(ok); /* and the columns in between are untouched */
  td_tensor_release(base);
  td_tensor_release(ref);
  td_tensor_release(wide);
  td_tensor_release(ri);
  td_generator_release(g);
}

/* ---- statistics (fixed seeds: these numbers never change) -------------------------------- */

static void test_uniform(void) {
  td_generator *g = td_generator_new(1234);
  const int64_t n = 1 << 20;
  td_tensor *f = make(n, TD_FLOAT32), *d = make(n, TD_FLOAT64);
  CHECK_EQ_I(td_uniform_(f, 2.0, 5.0, g), 0);
  CHECK_EQ_I(td_uniform_(d, -1.0, 1.0, g), 0);
  stats s = stats_of(f);
  CHECK(s.min >= 2.0 && s.max < 5.0);
  CHECK(fabs(s.mean - 3.5) < 0.01 && fabs(s.var - 0.75) < 0.01);
  s = stats_of(d);
  CHECK(s.min >= -1.0 && s.max < 1.0);
  CHECK(fabs(s.mean) < 0.01 && fabs(s.var - 1.0 / 3.0) < 0.01);
  /* 16-bit floats: 24-bit uniforms near 1 round up to 1.0 in these dtypes, yet the
   * result stays below high. */
  int32_t small[] = {TD_FLOAT16, TD_BFLOAT16};
  for (int k = 0; k < 2; k++) {
    td_tensor *h = make(n, small[k]);
    CHECK_EQ_I(td_uniform_(h, 0.0, 1.0, g), 0);
    s = stats_of(h);
    CHECK(s.min >= 0.0 && s.max < 1.0);
    CHECK(fabs(s.mean - 0.5) < 0.01);
    td_tensor_release(h);
  }
  /* float32 with high just above low: rounding would give high without the clamp. */
  td_tensor *t = make(4096, TD_FLOAT32);
  CHECK_EQ_I(td_uniform_(t, 1.0, 1.0000001, g), 0);
  s = stats_of(t);
  CHECK(s.min >= 1.0 && s.max < 1.0000001);
  CHECK_EQ_I(td_uniform_(t, 3.0, 3.0, g), 0); /* an empty range gives low */
  s = stats_of(t);
  CHECK(s.min == 3.0 && s.max == 3.0);
  td_tensor_release(t);
  td_tensor_release(f);
  td_tensor_release(d);
  td_generator_release(g);
}

static void test_normal(void) {
  td_generator *g = td_generator_new(99);
  const int64_t n = 1 << 20;
  td_tensor *d = make(n, TD_FLOAT64), *f = make(n + 3, TD_FLOAT32);
  CHECK_EQ_I(td_normal_(d, 0.0, 1.0, g), 0);
  stats s = stats_of(d);
  CHECK(fabs(s.mean) < 0.01 && fabs(sqrt(s.var) - 1.0) < 0.01);
  CHECK(s.min > -7 && s.max < 7 && isfinite(s.min));
  CHECK_EQ_I(td_normal_(f, 3.0, 2.0, g), 0);
  s = stats_of(f);
  CHECK(fabs(s.mean - 3.0) < 0.02 && fabs(sqrt(s.var) - 2.0) < 0.02);
  td_tensor *h = make(1000, TD_BFLOAT16);
  CHECK_EQ_I(td_normal_(h, -1.5, 0.0, g), 0); /* std 0: every element is the mean */
  s = stats_of(h);
  CHECK(s.min == -1.5 && s.max == -1.5);
  td_tensor_release(h);
  td_tensor_release(d);
  td_tensor_release(f);
  td_generator_release(g);
}

static void test_bernoulli(void) {
  td_generator *g = td_generator_new(3);
  const int64_t n = 1 << 20;
  td_tensor *b = make(n, TD_BOOL), *f = make(n, TD_FLOAT16), *i = make(n, TD_INT64);
  CHECK_EQ_I(td_bernoulli_(b, 0.3, g), 0);
  const uint8_t *bytes = td_tensor_data_borrow(b);
  int64_t ones = 0;
  bool only01 = true;
  for (int64_t k = 0; k < n; k++) {
    ones += bytes[k];
    only01 &= bytes[k] <= 1;
  }
  CHECK(only01);
  CHECK(fabs((double)ones / n - 0.3) < 0.005);
  /* The same draws give the same 0/1 pattern in any dtype. */
  td_generator_manual_seed(g, 3);
  CHECK_EQ_I(td_bernoulli_(f, 0.3, g), 0);
  bool ok = true;
  for (int64_t k = 0; k < n; k += 997) ok &= at(f, k) == bytes[k];
  CHECK(ok);
  CHECK_EQ_I(td_bernoulli_(i, 0.0, g), 0);
  stats s = stats_of(i);
  CHECK(s.min == 0 && s.max == 0);
  CHECK_EQ_I(td_bernoulli_(i, 1.0, g), 0);
  s = stats_of(i);
  CHECK(s.min == 1 && s.max == 1);
  td_tensor_release(b);
  td_tensor_release(f);
  td_tensor_release(i);
  td_generator_release(g);
}

static void test_randint(void) {
  td_generator *g = td_generator_new(11);
  const int64_t n = 70000;
  td_tensor *t = make(n, TD_INT8);
  CHECK_EQ_I(td_randint_(t, -3, 4, g), 0);
  int64_t counts[7] = {0};
  bool in_range = true;
  const int8_t *v = td_tensor_data_borrow(t);
  for (int64_t k = 0; k < n; k++) {
    in_range &= v[k] >= -3 && v[k] < 4;
    if (v[k] >= -3 && v[k] < 4) counts[v[k] + 3]++;
  }
  CHECK(in_range);
  bool even = true;
  for (int k = 0; k < 7; k++) even &= counts[k] > 9000 && counts[k] < 11000;
  CHECK(even); /* every value hit, about n / 7 times each */

  /* Other dtypes: bool, float32, the widest int64 range. */
  td_tensor *b = make(1000, TD_BOOL), *f = make(1000, TD_FLOAT32), *w = make(1000, TD_INT64);
  CHECK_EQ_I(td_randint_(b, 0, 2, g), 0);
  stats s = stats_of(b);
  CHECK(s.min == 0 && s.max == 1);
  CHECK_EQ_I(td_randint_(f, 10, 13, g), 0);
  s = stats_of(f);
  CHECK(s.min == 10 && s.max == 12);
  bool integral = true;
  for (int64_t k = 0; k < 1000; k++) integral &= at(f, k) == floor(at(f, k));
  CHECK(integral);
  CHECK_EQ_I(td_randint_(w, INT64_MIN, INT64_MAX, g), 0);
  const int64_t *wv = td_tensor_data_borrow(w);
  int64_t neg = 0;
  for (int64_t k = 0; k < 1000; k++) neg += wv[k] < 0;
  CHECK(neg > 400 && neg < 600 && wv[0] != wv[1]);
  CHECK_EQ_I(td_randint_(w, 5, 6, g), 0); /* a range of one value */
  s = stats_of(w);
  CHECK(s.min == 5 && s.max == 5);
  /* A range just past half of 2^64 rejects often: still in range, still reproducible. */
  const int64_t lo = -(INT64_C(1) << 62) - 1, hi = INT64_C(1) << 62;
  CHECK_EQ_I(td_randint_(w, lo, hi, g), 0);
  bool ok = true;
  for (int64_t k = 0; k < 1000; k++) ok &= wv[k] >= lo && wv[k] < hi;
  CHECK(ok);
  td_tensor_release(t);
  td_tensor_release(b);
  td_tensor_release(f);
  td_tensor_release(w);
  td_generator_release(g);
}

static bool is_perm(const td_tensor *p, int64_t n) {
  if (!p || p->ndim != 1 || p->shape[0] != n) return false;
  char *seen = calloc((size_t)n + 1, 1);
  bool ok = true;
  for (int64_t i = 0; i < n && ok; i++) {
    const double v = at(p, i);
    ok = v >= 0 && v < n && v == floor(v) && !seen[(int64_t)v];
    if (ok) seen[(int64_t)v] = 1;
  }
  free(seen);
  return ok;
}

static void test_randperm(void) {
  td_generator *g = td_generator_new(2024);
  td_tensor *p = td_randperm(1000, TD_INT64, g);
  CHECK(is_perm(p, 1000));
  int64_t fixed = 0;
  for (int64_t i = 0; i < 1000; i++) fixed += at(p, i) == i;
  CHECK(fixed < 10); /* shuffled, not the identity */
  td_generator_manual_seed(g, 2024);
  td_tensor *q = td_randperm(1000, TD_INT64, g);
  CHECK(same(p, q));
  td_tensor *r = td_randperm(1000, TD_INT64, g); /* the generator moved on */
  CHECK(is_perm(r, 1000) && !same(p, r));
  td_generator_manual_seed(g, 2024);
  td_tensor *s = td_randperm(1000, TD_INT16, g); /* the same order in another dtype */
  bool ok = is_perm(s, 1000);
  for (int64_t i = 0; i < 1000 && ok; i++) ok = at(s, i) == at(p, i);
  CHECK(ok);
  td_tensor *e = td_randperm(0, TD_INT64, g), *one = td_randperm(1, TD_FLOAT32, g);
  CHECK(e && e->shape[0] == 0);
  CHECK(is_perm(one, 1));
  td_tensor *h = td_randperm(2049, TD_FLOAT16, g); /* 2048 is float16's last exact integer */
  CHECK(is_perm(h, 2049));
  CHECK(td_randperm(200, TD_INT8, g) == NULL);
  CHECK_ERROR("int8");
  CHECK(td_randperm(2, TD_BOOL, g) == NULL);
  CHECK(td_randperm(-1, TD_INT64, g) == NULL);
  CHECK_ERROR("negative");
  CHECK(td_randperm(3, 77, g) == NULL);
  td_tensor_release(p);
  td_tensor_release(q);
  td_tensor_release(r);
  td_tensor_release(s);
  td_tensor_release(e);
  td_tensor_release(one);
  td_tensor_release(h);
  td_generator_release(g);
}

static void test_errors(void) {
  td_tensor *i = make(4, TD_INT32), *f = make(4, TD_FLOAT32), *h = make(4, TD_FLOAT16);
  CHECK_EQ_I(td_uniform_(i, 0, 1, NULL), TD_EDTYPE);
  CHECK_ERROR("floating dtype");
  CHECK_EQ_I(td_normal_(i, 0, 1, NULL), TD_EDTYPE);
  CHECK_ERROR("int32");
  CHECK_EQ_I(td_uniform_(f, 2, 1, NULL), TD_EINVAL);
  CHECK_ERROR("low 2 > high 1");
  CHECK_EQ_I(td_uniform_(f, 0, INFINITY, NULL), TD_EINVAL);
  CHECK_EQ_I(td_uniform_(h, 0, 1e6, NULL), TD_EINVAL);
  CHECK_ERROR("float16");
  CHECK_EQ_I(td_normal_(f, 0, -1, NULL), TD_EINVAL);
  CHECK_ERROR("std -1");
  CHECK_EQ_I(td_normal_(f, 0, NAN, NULL), TD_EINVAL);
  CHECK_EQ_I(td_bernoulli_(f, 1.5, NULL), TD_EINVAL);
  CHECK_ERROR("p 1.5");
  CHECK_EQ_I(td_bernoulli_(f, NAN, NULL), TD_EINVAL);
  CHECK_EQ_I(td_randint_(i, 5, 5, NULL), TD_EINVAL);
  CHECK_ERROR("low 5, high 5");
  td_tensor *b = make(4, TD_INT8);
  CHECK_EQ_I(td_randint_(b, 0, 300, NULL), TD_EINVAL);
  CHECK_ERROR("int8");
  CHECK_EQ_I(td_randint_(h, 0, 5000, NULL), TD_EINVAL);
  CHECK_EQ_I(td_uniform_(NULL, 0, 1, NULL), TD_EINVAL);
  CHECK_ERROR("NULL");
  /* An empty tensor is fine and draws nothing. */
  td_tensor *e = make(0, TD_FLOAT32);
  CHECK_EQ_I(td_uniform_(e, 0, 1, NULL), 0);
  td_tensor_release(e);
  td_tensor_release(b);
  td_tensor_release(i);
  td_tensor_release(f);
  td_tensor_release(h);
}

int main(void) {
  test_philox_kat();
  test_mapping();
  test_offsets();
  test_threads();
  test_strided();
  test_uniform();
  test_normal();
  test_bernoulli();
  test_randint();
  test_randperm();
  test_errors();
  CHECK_SUMMARY();
}
