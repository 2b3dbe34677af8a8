/*
 * random.cu: uniform_, normal_, bernoulli_ and randint_ on the device, drawing the CPU
 * generator's stream (core/kernels/random.c documents the mapping): the same Philox4x32-10
 * block function (philox.h, compiled here for the device), the same key from the seed,
 * the same blocks reserved from the generator (td_generator_reserve), the same lanes and
 * the same conversions to uniforms, Box-Muller pairs and Lemire's bounded integers. So a
 * seed gives the same tensor on the device as on the CPU, and CPU and device calls can
 * interleave on one generator. Values are drawn in double (uniform, normal) or int64
 * (bernoulli, randint) for element i in row-major order, then cast into the tensor, as
 * the CPU does. The CPU function checks the arguments, on an empty host tensor of the
 * same dtype, so both give the same messages.
 */
#include <math.h>

#include "cuda_internal.h"
#include "float_below.h"

#define TD_PHILOX_FN static __host__ __device__ __forceinline__
#include "philox.h"

enum { DRAW_UNIFORM, DRAW_NORMAL, DRAW_BERNOULLI, DRAW_RANDINT };

struct draw_params {
  int32_t kind;
  int32_t wide; /* float64 output: 53-bit uniforms */
  uint32_t key[2];
  uint64_t base;
  double a, b, top;
  double low_arg, high_arg; /* uniform_'s arguments as given, for the check */
  int64_t low;
  uint64_t range;
};

/* One thread per block of four elements; doubles (uniform, normal) or int64 into buf. */
__global__ void draw_kernel(draw_params p, double *fbuf, int64_t *ibuf, int64_t n) {
  const int64_t nblocks = (n + 3) / 4;
  TDC_LOOP(k, nblocks) {
    const uint64_t block = p.base + (uint64_t)k;
    uint32_t w0[4], w1[4] = {0, 0, 0, 0};
    td_philox_block(p.key, block, 0, w0);
    if ((p.wide && p.kind != DRAW_BERNOULLI) || p.kind == DRAW_RANDINT) td_philox_block(p.key, block, 1, w1);
    double z[4];
    if (p.kind == DRAW_NORMAL) td_philox_normal4(w0, w1, p.wide, p.a, p.b, z);
    for (int l = 0; l < 4; l++) {
      const int64_t i = k * 4 + l;
      if (i >= n) break;
      switch (p.kind) {
        case DRAW_NORMAL: fbuf[i] = z[l]; break;
        case DRAW_UNIFORM: {
          const double v = p.a + p.b * td_philox_uniform(w0, w1, l, p.wide);
          fbuf[i] = v < p.top ? v : p.top;
          break;
        }
        case DRAW_BERNOULLI: ibuf[i] = (double)w0[l] * 0x1p-32 < p.a; break;
        default:
          ibuf[i] = (int64_t)((uint64_t)p.low + td_philox_below(p.key, block, l,
                                                                td_philox_join(w1[l], w0[l]), p.range));
          break;
      }
    }
  }
}

/* Checks with the CPU function on an empty twin, then draws into t. */
static int32_t draw(const char *call, td_tensor *t, draw_params p, td_generator *g,
                    int32_t (*check)(td_tensor *, draw_params *, td_generator *)) {
  if (!t) return tdc_fail(TD_EINVAL, "%s: the tensor is NULL", call);
  const int32_t device = td_tensor_device_index(t);
  if (!tdc_check_on(call, t, "tensor", device) || !tdc_use_device(call, device)) return td_last_status();
  if (!td_tensor_is_writable(t)) return tdc_fail(TD_EREADONLY, "%s: the tensor is read-only", call);
  const int64_t zero = 0;
  td_tensor *twin = td_tensor_empty(1, &zero, t->dtype);
  if (!twin) return td_last_status();
  const int32_t status = check(twin, &p, g);
  td_tensor_release(twin);
  if (status != TD_OK) return status;
  const int64_t n = td_tensor_numel(t);
  const uint64_t seed = td_generator_seed(g);
  p.key[0] = (uint32_t)seed;
  p.key[1] = (uint32_t)(seed >> 32);
  p.base = td_generator_reserve(g, n);
  p.wide = t->dtype == TD_FLOAT64;
  if (n == 0) return TD_OK;
  const bool floats = p.kind == DRAW_UNIFORM || p.kind == DRAW_NORMAL;
  td_tensor *buf = tdc_empty(call, device, t->ndim, t->shape, floats ? TD_FLOAT64 : TD_INT64);
  if (!buf) return td_last_status();
  draw_kernel<<<tdc_blocks((n + 3) / 4, TDC_THREADS), TDC_THREADS, 0, tdc_stream()>>>(
      p, floats ? (double *)tdc_ptr(buf) : NULL, floats ? NULL : (int64_t *)tdc_ptr(buf), n);
  const bool ok = tdc_launched(call) && tdc_copy_same_shape(call, t, buf);
  td_tensor_release(buf);
  return ok ? TD_OK : td_last_status();
}

static int32_t check_uniform(td_tensor *twin, draw_params *p, td_generator *g) {
  const int32_t s = td_uniform_(twin, p->low_arg, p->high_arg, g);
  if (s == TD_OK) {
    const double top = td_float_below(twin->dtype, p->high_arg); /* the CPU's clamp */
    p->top = top < p->a ? p->a : top;
  }
  return s;
}
static int32_t check_normal(td_tensor *twin, draw_params *p, td_generator *g) {
  return td_normal_(twin, p->a, p->b, g);
}
static int32_t check_bernoulli(td_tensor *twin, draw_params *p, td_generator *g) {
  return td_bernoulli_(twin, p->a, g);
}
static int32_t check_randint(td_tensor *twin, draw_params *p, td_generator *g) {
  return td_randint_(twin, p->low, p->low + (int64_t)p->range, g);
}

/* A draw of kind with its two parameters (a, b as in draw_params). */
static draw_params params(int32_t kind, double a, double b) {
  draw_params p = {};
  p.kind = kind;
  p.a = a;
  p.b = b;
  return p;
}

TDC_EXPORT int32_t td_cuda_uniform_(td_tensor *t, double low, double high, td_generator *g) {
  draw_params p = params(DRAW_UNIFORM, low, high - low);
  p.low_arg = low;
  p.high_arg = high;
  return draw("uniform_", t, p, g, check_uniform);
}

TDC_EXPORT int32_t td_cuda_normal_(td_tensor *t, double mean, double std, td_generator *g) {
  return draw("normal_", t, params(DRAW_NORMAL, mean, std), g, check_normal);
}

TDC_EXPORT int32_t td_cuda_bernoulli_(td_tensor *t, double prob, td_generator *g) {
  return draw("bernoulli_", t, params(DRAW_BERNOULLI, prob, 0), g, check_bernoulli);
}

TDC_EXPORT int32_t td_cuda_randint_(td_tensor *t, int64_t low, int64_t high, td_generator *g) {
  draw_params p = params(DRAW_RANDINT, 0, 0);
  p.low = low;
  p.range = (uint64_t)high - (uint64_t)low;
  if (high <= low) { /* the CPU check refuses it; keep its numbers */
    const int64_t zero = 0;
    td_tensor *twin = td_tensor_empty(1, &zero, t ? t->dtype : TD_INT64);
    const int32_t s = twin ? td_randint_(twin, low, high, g) : td_last_status();
    td_tensor_release(twin);
    return s;
  }
  return draw("randint_", t, p, g, check_randint);
}
