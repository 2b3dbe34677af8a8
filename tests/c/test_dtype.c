/* test_dtype.c: dtype names and sizes; half and bfloat16 conversions, exhaustively. */
#include <float.h>
#include <stdbool.h>
#include <stdint.h>

#include "check.h"

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static void test_names(void) {
  static const char *names[] = {"bool",  "uint8",   "int8",     "int16",   "int32",
                                "int64", "float16", "bfloat16", "float32", "float64"};
  static const int64_t sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  char buf[64];
  for (int32_t d = 0; d < TD_NUM_DTYPES; d++) {
    CHECK_EQ_I(td_dtype_from_name(names[d]), d);
    snprintf(buf, sizeof buf, "torch.%s", names[d]);
    CHECK_EQ_I(td_dtype_from_name(buf), d);
    CHECK(td_dtype_name(d) && strcmp(td_dtype_name(d), names[d]) == 0);
    CHECK_EQ_I(td_dtype_itemsize(d), sizes[d]);
    CHECK_EQ_I(td_dtype_is_floating(d), d >= TD_FLOAT16);
  }
  static const struct {
    const char *name;
    int32_t dtype;
  } aliases[] = {{"float", TD_FLOAT32}, {"double", TD_FLOAT64}, {"half", TD_FLOAT16},
                 {"long", TD_INT64},    {"int", TD_INT32},      {"short", TD_INT16}};
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
    CHECK_EQ_I(td_dtype_from_name(aliases[i].name), aliases[i].dtype);
    snprintf(buf, sizeof buf, "torch.%s", aliases[i].name);
    CHECK_EQ_I(td_dtype_from_name(buf), aliases[i].dtype);
  }

  td_clear_error();
  CHECK_EQ_I(td_dtype_from_name("xyz"), TD_EDTYPE);
  CHECK_EQ_I(td_last_status(), TD_EDTYPE);
  CHECK_ERROR("unknown dtype 'xyz' (expected one of bool, uint8, int8");
  CHECK_ERROR("float64)");
  CHECK_EQ_I(td_dtype_from_name("torch.xyz"), TD_EDTYPE);
  CHECK_ERROR("'torch.xyz'");
  CHECK_EQ_I(td_dtype_from_name("Float32"), TD_EDTYPE); /* names are case-sensitive */
  CHECK_EQ_I(td_dtype_from_name(""), TD_EDTYPE);
  CHECK_EQ_I(td_dtype_from_name("torch."), TD_EDTYPE);
  CHECK_EQ_I(td_dtype_from_name("float32 "), TD_EDTYPE);
  CHECK_EQ_I(td_dtype_from_name(NULL), TD_EINVAL);

  CHECK(td_dtype_name(-1) == NULL);
  CHECK(td_dtype_name(TD_NUM_DTYPES) == NULL);
  CHECK_EQ_I(td_dtype_itemsize(-1), 0);
  CHECK_EQ_I(td_dtype_itemsize(TD_NUM_DTYPES), 0);
  CHECK_EQ_I(td_dtype_is_floating(42), 0);
}

/* Reference: round |x| to a binary format with `mant` stored bits, minimum normal
 * exponent emin and overflow threshold, in double arithmetic (exact for these sizes). */
static double ref_round(double x, int mant, int emin, double overflow) {
  double a = fabs(x);
  if (a >= overflow) return copysign(INFINITY, x);
  int e;
  frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
  e -= 1;
  if (e < emin) e = emin;
  double ulp = ldexp(1.0, e - mant);
  double r = nearbyint(a / ulp) * ulp; /* default rounding: to nearest, ties to even */
  return copysign(r, x);
}

/* Conversions through a 16-bit format: to16 and from16 and its layout. */
typedef struct fmt16 {
  const char *name;
  uint16_t (*to16)(float);
  float (*from16)(uint16_t);
  int mant;        /* stored mantissa bits */
  int emin;        /* exponent of the smallest normal */
  uint16_t inf;    /* bits of +Inf */
  uint16_t quiet;  /* the quiet-NaN bit */
  double overflow; /* smallest magnitude that rounds to Inf */
} fmt16;

static void test_format(const fmt16 *f) {
  int bad_roundtrip = 0, bad_nan = 0, bad_mid = 0, bad_near = 0, bad_ref = 0;
  /* Every pattern: non-NaN values round-trip exactly; NaNs stay NaN, made quiet. */
  for (uint32_t h = 0; h < 65536; h++) {
    float v = f->from16((uint16_t)h);
    uint16_t back = f->to16(v);
    bool is_nan = (h & 0x7fffu) > f->inf;
    if (is_nan) {
      if (!isnan(v) || back != (uint16_t)(h | f->quiet) || !!signbit(v) != !!(h & 0x8000u))
        bad_nan++;
    } else if (back != h) {
      bad_roundtrip++;
    }
  }
  /* Adjacent finite values a < b of each sign: the exact midpoint rounds to the even
   * pattern; a hair above rounds to b, a hair below to a. */
  for (uint32_t h = 0; h + 1 < f->inf; h++) {
    for (uint32_t sign = 0; sign <= 0x8000u; sign += 0x8000u) {
      uint16_t lo = (uint16_t)(h | sign), hi = (uint16_t)((h + 1) | sign);
      double mid = ((double)f->from16(lo) + (double)f->from16(hi)) / 2;
      float m = (float)mid;
      if ((double)m != mid) { bad_mid++; continue; } /* must be exact in float */
      uint16_t even = (h & 1u) ? hi : lo;
      if (f->to16(m) != even) bad_mid++;
      float above = nextafterf(m, sign ? -INFINITY : INFINITY);
      float below = nextafterf(m, sign ? INFINITY : -INFINITY);
      if (f->to16(above) != hi || f->to16(below) != lo) bad_near++;
    }
  }
  /* A sweep of floats of every exponent against the double-arithmetic reference. */
  for (uint64_t u = 0; u <= 0xffffffffu; u += 997) {
    float x = bitsf((uint32_t)u);
    if (isnan(x)) continue;
    double want = ref_round(x, f->mant, f->emin, f->overflow);
    double got = f->from16(f->to16(x));
    if (got != want || signbit(got) != signbit(want)) bad_ref++;
  }
  if (bad_roundtrip + bad_nan + bad_mid + bad_near + bad_ref)
    fprintf(stderr, "%s: roundtrip %d, nan %d, midpoint %d, near %d, reference %d bad\n",
            f->name, bad_roundtrip, bad_nan, bad_mid, bad_near, bad_ref);
  CHECK_EQ_I(bad_roundtrip, 0);
  CHECK_EQ_I(bad_nan, 0);
  CHECK_EQ_I(bad_mid, 0);
  CHECK_EQ_I(bad_near, 0);
  CHECK_EQ_I(bad_ref, 0);

  /* Specials. */
  CHECK_EQ_I(f->to16(INFINITY), f->inf);
  CHECK_EQ_I(f->to16(-INFINITY), f->inf | 0x8000u);
  CHECK(isinf(f->from16(f->inf)) && f->from16(f->inf) > 0);
  CHECK(isinf(f->from16((uint16_t)(f->inf | 0x8000u))) && f->from16((uint16_t)(f->inf | 0x8000u)) < 0);
  uint16_t n = f->to16(NAN);
  CHECK((n & 0x7fffu) > f->inf && (n & f->quiet));
  uint16_t sn = f->to16(bitsf(0x7f800001u)); /* signalling, payload only in low bits */
  CHECK((sn & 0x7fffu) > f->inf && (sn & f->quiet));
  uint16_t negn = f->to16(-NAN);
  CHECK((negn & 0x7fffu) > f->inf && (negn & 0x8000u));
  CHECK(isnan(f->from16((uint16_t)(f->inf + 1)))); /* signalling pattern */
  CHECK(fbits(f->from16((uint16_t)(f->inf + 1))) & 0x400000u);
  CHECK_EQ_I(f->to16(FLT_MAX), f->name[0] == 'h' ? f->inf : 0x7f80);
  CHECK_EQ_I(f->to16(0.0f), 0);
  CHECK_EQ_I(f->to16(-0.0f), 0x8000);
  CHECK(signbit(f->from16(0x8000)) && f->from16(0x8000) == 0);
  CHECK_EQ_I(f->to16(1.0f), f->name[0] == 'h' ? 0x3c00 : 0x3f80);
  CHECK_EQ_I(f->to16(-2.0f), f->name[0] == 'h' ? 0xc000 : 0xc000);
}

static void test_half_specifics(void) {
  /* Overflow: 65504 is the largest half; 65520 is the tie with 2^16 and goes to Inf. */
  CHECK_EQ_I(td_float_to_half(65504.0f), 0x7bff);
  CHECK_EQ_I(td_float_to_half(65519.996f), 0x7bff);
  CHECK_EQ_I(td_float_to_half(65520.0f), 0x7c00);
  CHECK_EQ_I(td_float_to_half(-65520.0f), 0xfc00);
  CHECK_EQ_I(td_float_to_half(1e10f), 0x7c00);
  CHECK(td_half_to_float(0x7bff) == 65504.0f);
  /* Subnormals: 2^-24 is the smallest; 2^-25 ties to 0; 3 * 2^-25 ties to 2 * 2^-24. */
  CHECK_EQ_I(td_float_to_half(0x1p-24f), 0x0001);
  CHECK_EQ_I(td_float_to_half(0x1p-25f), 0x0000);
  CHECK_EQ_I(td_float_to_half(-0x1p-25f), 0x8000);
  CHECK_EQ_I(td_float_to_half(0x1.0002p-25f), 0x0001);
  CHECK_EQ_I(td_float_to_half(0x3p-25f), 0x0002);
  CHECK_EQ_I(td_float_to_half(0x1p-14f), 0x0400);           /* smallest normal */
  CHECK_EQ_I(td_float_to_half(0x1p-14f - 0x1p-25f), 0x0400); /* ties up to the even 0x400 */
  CHECK_EQ_I(td_float_to_half(0x1p-14f - 0x1p-24f), 0x03ff);
  CHECK_EQ_I(td_float_to_half(FLT_MIN), 0x0000);
  CHECK_EQ_I(td_float_to_half(0x1p-149f), 0x0000); /* float subnormal */
  CHECK(td_half_to_float(0x0001) == 0x1p-24f);
  CHECK(td_half_to_float(0x03ff) == 0x3ffp-24f);
  CHECK(td_half_to_float(0x8200) == -0x1p-15f);
  /* 1 + 2^-11 ties to 1; 1 + 3 * 2^-11 ties up to 1 + 2^-9. */
  CHECK_EQ_I(td_float_to_half(1.0f + 0x1p-11f), 0x3c00);
  CHECK_EQ_I(td_float_to_half(1.0f + 0x3p-11f), 0x3c02);
  CHECK_EQ_I(td_float_to_half(0.1f), 0x2e66);
}

static void test_bfloat16_specifics(void) {
  CHECK_EQ_I(td_float_to_bfloat16(3.0f), 0x4040);
  CHECK_EQ_I(td_float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80);  /* tie to even (down) */
  CHECK_EQ_I(td_float_to_bfloat16(1.0f + 0x3p-8f), 0x3f82);  /* tie to even (up) */
  CHECK_EQ_I(td_float_to_bfloat16(0x1.fep127f), 0x7f7f);     /* largest bfloat16 */
  CHECK_EQ_I(td_float_to_bfloat16(0x1.ffp127f), 0x7f80);     /* tie with 2^128: Inf */
  CHECK_EQ_I(td_float_to_bfloat16(0x1p-133f), 0x0001);       /* smallest subnormal */
  CHECK_EQ_I(td_float_to_bfloat16(0x1p-134f), 0x0000);       /* tie to 0 */
  CHECK_EQ_I(td_float_to_bfloat16(0x3p-134f), 0x0002);       /* tie to even 2 */
  CHECK(td_bfloat16_to_float(0x0001) == 0x1p-133f);
  CHECK(td_bfloat16_to_float(0xbf80) == -1.0f);
}

int main(void) {
  test_names();
  const fmt16 half = {"half", td_float_to_half, td_half_to_float, 10, -14, 0x7c00, 0x0200,
                      65520.0};
  const fmt16 bf16 = {"bfloat16", td_float_to_bfloat16, td_bfloat16_to_float, 7, -126,
                      0x7f80, 0x0040, 0x1.ffp127};
  test_format(&half);
  test_format(&bf16);
  test_half_specifics();
  test_bfloat16_specifics();
  CHECK_SUMMARY();
}
