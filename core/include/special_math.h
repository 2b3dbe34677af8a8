/*
 * special_math.h: erfinv and digamma, which neither libm nor SLEEF has (not ABI: no FFI
 * declarations, not installed). The CPU loops (core/kernels/elementwise_unary.c) and the
 * CUDA backend (core/cuda/elementwise.cu, which defines TD_SPECIAL_FN as a device
 * function first) compile the same code, so both backends give the same values. Written
 * from the published methods; torch 2.x is the reference for the values at the edges.
 *
 * erfinv (Giles, "Approximating the erfinv function", GPU Computing Gems, 2011): with
 * w = -log((1 - y)(1 + y)), erfinv(y) / y is smooth in w near 0 and in sqrt(w) in the
 * tail. The polynomials below are our own least-squares fits (degree 13, 13 and 11 on
 * w < 5, 5 <= w < 16 and w >= 16; w reaches 37.4 at the double below 1) to erfinv
 * computed at 40 digits; their relative error is below 1.6e-11. float32 and the 16-bit
 * floats round that double value (a misrounding needs the exact value within 1e-11 of a
 * rounding boundary). float64 takes one Newton step on erf(x) = y (on erfc(x) = 1 - |y|
 * for |y| >= 0.5, where 1 - |y| is exact and erf would cancel): the error after it is
 * ~x^2 (1.6e-11)^2, so what is left is erf's or erfc's own rounding, about 1 ulp.
 * |y| > 1 and NaN give NaN, +-1 give +-inf, +-0 give +-0 (torch's values).
 *
 * digamma: for x >= 10 the asymptotic series log(x) - 1/(2x) - sum B_2k / (2k x^2k),
 * taken to x^-14, exact to 3e-17 relative (the next term is 4.4e-17 at x = 10). Below,
 * the recurrence psi(x + 1) = psi(x) + 1/x takes x into [1, 2] (downwards from (2, 10),
 * adding positive terms; upwards once from (0, 1)), where psi(x) = (x - x0) P(x - 1.5)
 * with x0 the zero at 1.4616 and P our degree-22 least-squares fit of psi(x) / (x - x0),
 * 5e-17 relative: the recurrence up to 10 that cephes and torch use cancels there, and
 * gave 13 ulp at 1.92 and a 1e-16 absolute error next to the zero. Negative x reflect:
 * psi(x) = psi(1 - x) - pi cot(pi x), with cot's argument reduced exactly to
 * x - round(x) (so large and tiny |x| keep their precision). Measured against mpmath:
 * at most 3 ulp for x > 0; for x < 0 the same, except next to the zeros between the
 * poles, where the two terms cancel and the error is ~1e-16 absolute. Values at the
 * edges are torch's: psi(+0) = -inf, psi(-0) = +inf, negative integers and -inf give
 * NaN, +inf gives +inf. float32 and the 16-bit floats compute in double and round once.
 */
#ifndef TD_SPECIAL_MATH_H
#define TD_SPECIAL_MATH_H

#include <math.h>

#ifndef TD_SPECIAL_FN
#define TD_SPECIAL_FN static inline
#endif

/* The three fits of erfinv(a) / a (see above), as expressions of u, so that the vector
 * loops (core/kernels/vecmath_impl.h) evaluate the same polynomials. */
#define TD_ERFINV_P1(u)                                                                 \
  (1.5014093511299214 + (u) *                                                           \
  (0.24664027668618629 + (u) *                                                          \
  (-0.0041773180293304879 + (u) *                                                       \
  (-0.0012527076278418033 + (u) *                                                       \
  (0.00021825105696262907 + (u) *                                                       \
  (-4.9964759712731433e-06 + (u) *                                                      \
  (-3.4173926441607767e-06 + (u) *                                                      \
  (4.7897562140015198e-07 + (u) *                                                       \
  (1.3776900467739635e-08 + (u) *                                                       \
  (-1.0943589811396129e-08 + (u) *                                                      \
  (8.2057609535361428e-10 + (u) *                                                       \
  (1.3454710028722962e-10 + (u) *                                                       \
  (-2.0557932211701743e-11 + (u) *                                                      \
  (-5.7118011644699737e-13))))))))))))))
#define TD_ERFINV_P2(u)                                                                 \
  (2.9513285783322631 + (u) *                                                           \
  (1.0036197238559512 + (u) *                                                           \
  (0.0071597797457775029 + (u) *                                                        \
  (-0.0054079789469238214 + (u) *                                                       \
  (0.0038830836817392686 + (u) *                                                        \
  (-0.0025727866889894459 + (u) *                                                       \
  (0.0012767493737207503 + (u) *                                                        \
  (-0.00032413569276229943 + (u) *                                                      \
  (-9.8769287024313052e-05 + (u) *                                                      \
  (0.00014233719134236866 + (u) *                                                       \
  (-5.8275888461503498e-05 + (u) *                                                      \
  (-2.2345512554001964e-06 + (u) *                                                      \
  (1.1986304968584469e-05 + (u) *                                                       \
  (-3.5596453938372747e-06))))))))))))))
#define TD_ERFINV_P3(u)                                                                 \
  (4.8917136602561175 + (u) *                                                           \
  (1.0102879007352099 + (u) *                                                           \
  (-0.00016464637752892217 + (u) *                                                      \
  (-0.0002027825225834095 + (u) *                                                       \
  (7.2031154007713119e-05 + (u) *                                                       \
  (-1.8587537664778836e-05 + (u) *                                                      \
  (4.2708103737188626e-06 + (u) *                                                       \
  (-9.3615435288273913e-07 + (u) *                                                      \
  (1.6880623771830495e-07 + (u) *                                                       \
  (-3.6175788214587483e-08 + (u) *                                                      \
  (5.0678389186068509e-08 + (u) *                                                       \
  (-2.5138868849632172e-08))))))))))))
#define TD_ERFINV_M2 3.1180339887498949 /* the centres of the two tails, in sqrt(w) */
#define TD_ERFINV_M3 5.0413812651491092

/* erfinv(a) / a for 0 <= a < 1, to 1.6e-11 relative: the three fits in w (see above). */
TD_SPECIAL_FN double td_erfinv_ratio(double a) {
  const double w = -log((1.0 - a) * (1.0 + a));
  if (w < 5.0) return TD_ERFINV_P1(w - 2.5);
  if (w < 16.0) return TD_ERFINV_P2(sqrt(w) - TD_ERFINV_M2);
  return TD_ERFINV_P3(sqrt(w) - TD_ERFINV_M3);
}

/* erfinv of float32 and the 16-bit floats (given as float): the fit, rounded once. */
TD_SPECIAL_FN float td_erfinvf(float y) {
  const double a = fabs((double)y);
  if (!(a < 1.0)) return a == 1.0 ? copysignf(INFINITY, y) : NAN; /* NaN: not < 1 */
  return (float)((double)y * td_erfinv_ratio(a));
}

TD_SPECIAL_FN double td_erfinv(double y) {
  const double a = fabs(y);
  if (!(a < 1.0)) return a == 1.0 ? copysign(INFINITY, y) : NAN;
  if (a == 0.0) return y; /* keeps -0 */
  double x = a * td_erfinv_ratio(a);
  /* one Newton step; erf'(x) = 2/sqrt(pi) exp(-x^2) */
  const double slope = 1.1283791670955126 * exp(-x * x);
  if (a < 0.5) x -= (erf(x) - a) / slope;
  else x += (erfc(x) - (1.0 - a)) / slope;
  return copysign(x, y);
}

/* pi cot(pi x) for finite x not an integer, with pi x reduced exactly first; past a
 * quarter period as tan(pi (1/2 - |t|)), so that cot(pi / 2) is 0, not pi / tan(pi / 2
 * rounded) = 1.9e-16 (which was psi(-0.5)'s whole error). */
TD_SPECIAL_FN double td_pi_cot_pi(double x) {
  const double pi = 3.141592653589793;
  const double t = x - nearbyint(x); /* exact, in [-0.5, 0.5] */
  if (fabs(t) > 0.25) return copysign(pi * tan(pi * (0.5 - fabs(t))), t); /* 0.5 - |t| exact */
  return pi / tan(pi * t);
}

/* psi(x) for 1 <= x <= 2: (x - x0) P(x - 1.5), x0 the zero (as hi + lo, so that x - x0
 * keeps its digits next to it) and P our fit of psi(x) / (x - x0), degree 22, 5e-17. */
TD_SPECIAL_FN double td_digamma_1_2(double x) {
  const double u = x - 1.5;
  const double p = 0.95105587603183284 + u * (-0.42362742128146058 + u * (0.24054248424078697 +
      u * (-0.14840492305388092 + u * (0.094988724452890388 + u * (-0.06192213327548831 +
      u * (0.040760833940846085 + u * (-0.026975796659787055 + u * (0.017907248317313294 +
      u * (-0.011908220105959716 + u * (0.0079270217968681542 + u * (-0.005279937255532708 +
      u * (0.0035181065638024722 + u * (-0.0023454947397380833 + u * (0.0015633696313653504 +
      u * (-0.0010364584817312839 + u * (0.00069092557612829861 +
      u * (-0.00048595039220036254 + u * (0.00032395945401345196 +
      u * (-0.00014480643368061614 + u * (9.6536462614100617e-05 +
      u * (-0.00017821885488559231 + u * (0.00011881232908510335))))))))))))))))))))));
  return ((x - 1.4616321449683622) - 9.5499954299656974e-17) * p;
}

TD_SPECIAL_FN double td_digamma(double x) {
  if (x == 0.0) return copysign(INFINITY, -x); /* torch: psi(+0) = -inf, psi(-0) = +inf */
  if (x != x || x == INFINITY) return x;
  double reflected = 0.0;
  if (x < 0.0) {
    if (x == floor(x)) return NAN; /* the poles, and -inf */
    reflected = -td_pi_cot_pi(x);
    x = 1.0 - x;
  }
  if (x < 1.0) /* psi(x) = psi(x + 1) - 1 / x */
    return (td_digamma_1_2(x + 1.0) - 1.0 / x) + reflected;
  if (x < 10.0) { /* down to [1, 2]: psi(x) = psi(x - 1) + 1 / (x - 1), each x - 1 exact */
    double steps = 0.0;
    while (x > 2.0) {
      x -= 1.0;
      steps += 1.0 / x;
    }
    return (td_digamma_1_2(x) + steps) + reflected;
  }
  const double r = 1.0 / (x * x);
  /* B_2k / (2k) for k = 1..7: 1/12, -1/120, 1/252, -1/240, 1/132, -691/32760, 1/12 */
  const double tail = r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 -
                      r * (1.0 / 132 - r * (691.0 / 32760 - r * (1.0 / 12)))))));
  return (log(x) - 0.5 / x - tail) + reflected;
}

TD_SPECIAL_FN float td_digammaf(float x) { return (float)td_digamma((double)x); }

#endif
