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
    default:
      return NULL;
  }
}
