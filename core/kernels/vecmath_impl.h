/*
 * vecmath_impl.h: the SLEEF loops of elementwise_vecmath*.c, written once and compiled
 * once per instruction set (SSE2, AVX2, AVX-512), each file defining first:
 *   VM_TABLE          the name of the table function it gets
 *   VF, VD, WF, WD    the float and double vector types and their lane counts
 *   LDF, STF, LDD, STD unaligned loads and stores
 *   SLF(f), SLD(f)    SLEEF's function f for those widths (Sleef_expf8_u10, ...), and
 *   SLF15, SLD15      the same at 1.5 ulp, for the functions SLEEF has only so (erfc)
 *   F_ONE, F_ZERO, F_ADD, F_SUB, F_DIV and the D_ forms, for sigmoid
 * Every element goes through the same vector function wherever it lies: the tail of a
 * row and strided rows pass through a small buffer, so results depend neither on the
 * layout nor on how rows are split between threads.
 */
/* ---- erfinv (core/include/special_math.h's method and polynomials) on vectors -----------
 * Written with gcc's vector extensions on VD (arithmetic, comparisons giving lane masks,
 * element access), so one text serves SSE2, AVX2 and AVX-512; log, exp, erf and erfc are
 * SLEEF's. The three fits are evaluated on every lane and picked by w: no branch per
 * element. float32 computes in double, WD lanes at a time, and rounds once, as the scalar
 * td_erfinvf does; float64 takes td_erfinv's Newton step. */
typedef __typeof__(D_ZERO < D_ZERO) vm_maskd;
typedef float vm_halff __attribute__((vector_size(WD * sizeof(float))));
#define VM_PICK(m, a, b) ((VD)(((vm_maskd)(a) & (m)) | ((vm_maskd)(b) & ~(m))))
#define VM_SPLAT(v) (D_ONE * (v))

/* w = -log((1 - a)(1 + a)) of Giles' method. */
static inline VD erfinv_w_vd(VD a) { return -SLD(log)((1.0 - a) * (1.0 + a)); }

/* p1, the central fit's value, corrected where a lane lies in a tail (|y| > 0.9966, or
 * outside the domain): the tails are computed only then, since most data lies in the
 * centre and each fit is a chain of 26 dependent operations. */
static inline VD erfinv_tails_vd(VD w, VD p1) {
  const vm_maskd central = w < VM_SPLAT(5.0);
  bool all = true;
  for (int j = 0; j < WD; j++) all = all && central[j];
  if (all) return p1;
  VD r = w; /* sqrt per lane: one instruction each (no errno: -fno-math-errno) */
  for (int j = 0; j < WD; j++) r[j] = sqrt(w[j]);
  const VD p2 = TD_ERFINV_P2(r - TD_ERFINV_M2), p3 = TD_ERFINV_P3(r - TD_ERFINV_M3);
  return VM_PICK(central, p1, VM_PICK(w < VM_SPLAT(16.0), p2, p3));
}

static inline VD erfinv_ratio_vd(VD a) {
  const VD w = erfinv_w_vd(a);
  return erfinv_tails_vd(w, TD_ERFINV_P1(w - 2.5));
}

/* The edges, as td_erfinv: |y| > 1 and NaN give NaN, +-1 give +-inf. */
static inline VD erfinv_edges_vd(VD y, VD a, VD x) {
  return VM_PICK(a < D_ONE, x, VM_PICK(a == D_ONE, y * INFINITY, VM_SPLAT(NAN)));
}

static inline VD erfinv_rounded_vd(VD y) { /* for float32: the fit alone */
  const VD a = VM_PICK(y < D_ZERO, -y, y);
  return erfinv_edges_vd(y, a, y * erfinv_ratio_vd(a));
}

static inline VD erfinv_vd(VD y) {
  const VD a = VM_PICK(y < D_ZERO, -y, y);
  VD x = a * erfinv_ratio_vd(a);
  const VD slope = 1.1283791670955126 * SLD(exp)(-(x * x));
  x += VM_PICK(a < VM_SPLAT(0.5), a - SLD(erf)(x), SLD15(erfc)(x) - (1.0 - a)) / slope;
  const vm_maskd sign = (vm_maskd)VM_SPLAT(-0.0);
  x = (VD)(((vm_maskd)x & ~sign) | ((vm_maskd)y & sign)); /* y's sign, -0 kept */
  return erfinv_edges_vd(y, a, x);
}

/* float32 through double lanes: WD floats widened, computed, rounded back. Contiguous
 * rows go four vectors at a time, their logs first and then their four polynomial
 * chains side by side, which overlap (a chain alone waits on each multiply and add). */
static void vm_erfinv_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
  (void)ctx;
  const bool contiguous = s[0] == (int64_t)sizeof(float) && s[1] == (int64_t)sizeof(float);
  int64_t i = 0;
  if (contiguous)
    for (; i + 4 * WD <= n; i += 4 * WD) {
      vm_halff h[4], r[4];
      VD y[4], a[4], w[4], c[4];
      memcpy(h, p[1] + i * s[1], sizeof h);
      for (int q = 0; q < 4; q++) { /* the calls first ... */
        y[q] = __builtin_convertvector(h[q], VD);
        a[q] = VM_PICK(y[q] < D_ZERO, -y[q], y[q]);
        w[q] = erfinv_w_vd(a[q]);
      }
      for (int q = 0; q < 4; q++) c[q] = TD_ERFINV_P1(w[q] - 2.5); /* ... then 4 chains */
      for (int q = 0; q < 4; q++) {
        const VD x = erfinv_edges_vd(y[q], a[q], y[q] * erfinv_tails_vd(w[q], c[q]));
        r[q] = __builtin_convertvector(x, vm_halff);
      }
      memcpy(p[0] + i * s[0], r, sizeof r);
    }
  for (; i < n; i += WD) {
    const int64_t k = n - i < WD ? n - i : WD;
    vm_halff h = {0};
    if (contiguous && k == WD) memcpy(&h, p[1] + i * s[1], sizeof h);
    else
      for (int64_t j = 0; j < k; j++) h[j] = *(const float *)(p[1] + (i + j) * s[1]);
    const vm_halff r = __builtin_convertvector(erfinv_rounded_vd(__builtin_convertvector(h, VD)),
                                               vm_halff);
    if (contiguous && k == WD) memcpy(p[0] + i * s[0], &r, sizeof r);
    else
      for (int64_t j = 0; j < k; j++) *(float *)(p[0] + (i + j) * s[0]) = r[j];
  }
}

static inline VF sigmoid_vf(VF x) { return F_DIV(F_ONE, F_ADD(F_ONE, SLF(exp)(F_SUB(F_ZERO, x)))); }
static inline VD sigmoid_vd(VD x) { return D_DIV(D_ONE, D_ADD(D_ONE, SLD(exp)(D_SUB(D_ZERO, x)))); }

#define VM_LOOP(NAME, T, W, LDV, STV, FN)                                                 \
  static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {                  \
    (void)ctx;                                                                           \
    char *d = p[0];                                                                      \
    const char *x = p[1];                                                                \
    int64_t i = 0;                                                                       \
    if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {                      \
      for (; i + W <= n; i += W) STV((T *)d + i, FN(LDV((const T *)x + i)));             \
      d += i * (int64_t)sizeof(T);                                                       \
      x += i * (int64_t)sizeof(T);                                                       \
    }                                                                                    \
    while (i < n) {                                                                      \
      T in[W] = {0}, out[W];                                                             \
      int64_t k = n - i < W ? n - i : W;                                                 \
      for (int64_t j = 0; j < k; j++) in[j] = *(const T *)(x + j * s[1]);                \
      STV(out, FN(LDV(in)));                                                             \
      for (int64_t j = 0; j < k; j++) *(T *)(d + j * s[0]) = out[j];                     \
      i += k;                                                                            \
      d += k * s[0];                                                                     \
      x += k * s[1];                                                                     \
    }                                                                                    \
  }

#define VM_PAIR(OP, FNF, FND)                        \
  VM_LOOP(vm_##OP##_f32, float, WF, LDF, STF, FNF)   \
  VM_LOOP(vm_##OP##_f64, double, WD, LDD, STD, FND)

VM_PAIR(exp, SLF(exp), SLD(exp))
VM_PAIR(log, SLF(log), SLD(log))
VM_PAIR(log1p, SLF(log1p), SLD(log1p))
VM_PAIR(expm1, SLF(expm1), SLD(expm1))
VM_PAIR(sin, SLF(sin), SLD(sin))
VM_PAIR(cos, SLF(cos), SLD(cos))
VM_PAIR(tanh, SLF(tanh), SLD(tanh))
VM_PAIR(sigmoid, sigmoid_vf, sigmoid_vd)
VM_PAIR(tan, SLF(tan), SLD(tan))
VM_PAIR(asin, SLF(asin), SLD(asin))
VM_PAIR(acos, SLF(acos), SLD(acos))
VM_PAIR(atan, SLF(atan), SLD(atan))
VM_PAIR(sinh, SLF(sinh), SLD(sinh))
VM_PAIR(cosh, SLF(cosh), SLD(cosh))
VM_PAIR(atanh, SLF(atanh), SLD(atanh))
VM_PAIR(log2, SLF(log2), SLD(log2))
VM_PAIR(log10, SLF(log10), SLD(log10))
VM_PAIR(exp2, SLF(exp2), SLD(exp2))
VM_PAIR(erf, SLF(erf), SLD(erf))
VM_PAIR(lgamma, SLF(lgamma), SLD(lgamma))
VM_PAIR(erfc, SLF15(erfc), SLD15(erfc))
VM_LOOP(vm_erfinv_f64, double, WD, LDD, STD, erfinv_vd)

#define VM_CASE(OP, NAME) \
  case TD_UNARY_##OP:     \
    return dtype == TD_FLOAT32 ? vm_##NAME##_f32 : vm_##NAME##_f64;

td_inner_loop VM_TABLE(int32_t op, int32_t dtype);
td_inner_loop VM_TABLE(int32_t op, int32_t dtype) {
  if (dtype != TD_FLOAT32 && dtype != TD_FLOAT64) return NULL;
  switch (op) {
    VM_CASE(EXP, exp)
    VM_CASE(LOG, log)
    VM_CASE(LOG1P, log1p)
    VM_CASE(EXPM1, expm1)
    VM_CASE(SIN, sin)
    VM_CASE(COS, cos)
    VM_CASE(TANH, tanh)
    VM_CASE(SIGMOID, sigmoid)
    VM_CASE(TAN, tan)
    VM_CASE(ASIN, asin)
    VM_CASE(ACOS, acos)
    VM_CASE(ATAN, atan)
    VM_CASE(SINH, sinh)
    VM_CASE(COSH, cosh)
    VM_CASE(ATANH, atanh)
    VM_CASE(LOG2, log2)
    VM_CASE(LOG10, log10)
    VM_CASE(EXP2, exp2)
    VM_CASE(ERF, erf)
    VM_CASE(LGAMMA, lgamma)
    VM_CASE(ERFC, erfc)
    VM_CASE(ERFINV, erfinv)
    default:
      return NULL;
  }
}
