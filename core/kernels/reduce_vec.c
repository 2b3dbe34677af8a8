/*
 * reduce_vec.c: row kernels for min, max, argmin and argmax of float32 and float64,
 * written with GCC/clang vector extensions; and the choice of the float32 sum's
 * AVX2 kernel (reduce_sum_avx2.c) where the CPU has AVX2.
 *
 * Compilers do not vectorise a NaN-propagating extreme by themselves (it is not an
 * IEEE min/max, so all they make of it is a scalar select chain), yet these are among
 * the reductions most run over long rows. A compare and a bitwise select per vector do
 * it: a lane takes the new value when it is more extreme or NaN, so a NaN, once in,
 * stays. argmin/argmax find the row's extreme that way, then the first position that
 * holds it (or the first NaN): a second, short look at a row that is still cached.
 * Strided rows take the scalar path; results equal the generic kernels' exactly.
 */
#include <math.h>
#include <string.h>

#include "reduce.h"

typedef float vf32 __attribute__((vector_size(16)));
typedef int32_t vi32 __attribute__((vector_size(16)));
typedef double vf64 __attribute__((vector_size(16)));
typedef int64_t vi64 __attribute__((vector_size(16)));

/* The NaN-propagating extreme of m and x[0 .. n): U vectors of lanes, then the lanes
 * and the tail one by one. CMP is > for max, < for min. */
#define DEF_EXTREME(NAME, T, VT, VI, CMP, PICK)                                    \
  static T NAME(const T *x, int64_t n, T m) {                                      \
    enum { W = (int)(sizeof(VT) / sizeof(T)), U = 4 };                             \
    int64_t i = 0;                                                                 \
    if (n >= 2 * U * W) {                                                          \
      VT acc[U];                                                                   \
      memcpy(acc, x, sizeof acc);                                                  \
      for (i = U * W; i + U * W <= n; i += U * W)                                  \
        for (int k = 0; k < U; k++) {                                              \
          VT v;                                                                    \
          memcpy(&v, x + i + k * W, sizeof v);                                     \
          const VI c = (v CMP acc[k]) | (v != v);                                  \
          acc[k] = (VT)(((VI)v & c) | ((VI)acc[k] & ~c));                          \
        }                                                                          \
      for (int k = 0; k < U; k++)                                                  \
        for (int l = 0; l < W; l++) m = PICK(m, acc[k][l]);                        \
    }                                                                              \
    for (; i < n; i++) m = PICK(m, x[i]);                                          \
    return m;                                                                      \
  }
DEF_EXTREME(max_f32, float, vf32, vi32, >, TD_REDUCE_NMAX)
DEF_EXTREME(min_f32, float, vf32, vi32, <, TD_REDUCE_NMIN)
DEF_EXTREME(max_f64, double, vf64, vi64, >, TD_REDUCE_NMAX)
DEF_EXTREME(min_f64, double, vf64, vi64, <, TD_REDUCE_NMIN)

/* v replaces best when strictly more extreme, or NaN where best is not. */
#define BETTER_MAX(v, b) ((v) != (v) ? (b) == (b) : (v) > (b))
#define BETTER_MIN(v, b) ((v) != (v) ? (b) == (b) : (v) < (b))

#define DEF_ROWS(DN, T, EXT, PICK, IDENT, BETTER)                                  \
  static void row_##EXT##_##DN(td_reduce_acc *acc, const char *p, int64_t s,       \
                               int64_t n, int64_t pos, double prm) {               \
    (void)pos, (void)prm;                                                          \
    T m = IDENT;                                                                   \
    if (s == (int64_t)sizeof(T)) {                                                 \
      m = EXT##_##DN((const T *)(const void *)p, n, m);                            \
    } else {                                                                       \
      for (int64_t i = 0; i < n; i++) m = PICK(m, *(const T *)(const void *)(p + i * s)); \
    }                                                                              \
    acc->a = PICK(acc->a, (double)m);                                              \
  }                                                                                \
  static void row_arg##EXT##_##DN(td_reduce_acc *acc, const char *p, int64_t s,    \
                                  int64_t n, int64_t pos, double prm) {            \
    (void)prm;                                                                     \
    if (n <= 0) return;                                                            \
    if (s != (int64_t)sizeof(T)) {                                                 \
      for (int64_t i = 0; i < n; i++) {                                            \
        const double v = *(const T *)(const void *)(p + i * s);                    \
        if (acc->idx < 0 || BETTER(v, acc->a)) {                                   \
          acc->a = v;                                                              \
          acc->idx = pos + i;                                                      \
        }                                                                          \
      }                                                                            \
      return;                                                                      \
    }                                                                              \
    const T *x = (const T *)(const void *)p;                                       \
    const T m = EXT##_##DN(x, n, x[0]); /* one of the elements, or NaN if any */   \
    if (acc->idx >= 0 && !BETTER((double)m, acc->a)) return;                       \
    int64_t i = 0;                                                                 \
    if (m != m) {                                                                  \
      while (x[i] == x[i]) i++;                                                    \
    } else {                                                                       \
      while (x[i] != m) i++;                                                       \
    }                                                                              \
    acc->a = x[i];                                                                 \
    acc->idx = pos + i;                                                            \
  }
DEF_ROWS(f32, float, max, TD_REDUCE_NMAX, -INFINITY, BETTER_MAX)
DEF_ROWS(f32, float, min, TD_REDUCE_NMIN, INFINITY, BETTER_MIN)
DEF_ROWS(f64, double, max, TD_REDUCE_NMAX, -INFINITY, BETTER_MAX)
DEF_ROWS(f64, double, min, TD_REDUCE_NMIN, INFINITY, BETTER_MIN)

td_reduce_row_fn td_reduce_vec_row(int32_t family, int32_t dtype) {
  const bool f32 = dtype == TD_FLOAT32;
  if (!f32 && dtype != TD_FLOAT64) return NULL;
  switch (family) {
#if defined(__x86_64__) || defined(__i386__)
    case RF_F_SUM: return f32 && __builtin_cpu_supports("avx2") ? td_reduce_sum_f32_avx2 : NULL;
#endif
    case RF_F_MAX: return f32 ? row_max_f32 : row_max_f64;
    case RF_F_MIN: return f32 ? row_min_f32 : row_min_f64;
    case RF_F_ARGMAX: return f32 ? row_argmax_f32 : row_argmax_f64;
    case RF_F_ARGMIN: return f32 ? row_argmin_f32 : row_argmin_f64;
    default: return NULL;
  }
}
