/*
 * reduce_ops.c: what each reduction op means: which dtypes it takes and gives, which
 * kernel families fold it, how partial states merge, and how a final state becomes
 * the output element. The engine (reduce_engine.c) knows none of this.
 */
#include <math.h>
#include <string.h>

#include "dtypes.h"
#include "ops.h"
#include "reduce.h"

const char *td_reduce_op_name(int32_t op) {
  return op >= 0 && op < TD_RED_COUNT ? td_reduce_rows[op].name : "reduce";
}

bool td_reduce_check_input(const char *name, const td_tensor *t) {
  if (!t) {
    td_fail(TD_EINVAL, "%s: the tensor is NULL", name);
    return false;
  }
  if (!td_check_dtype(name, t->dtype)) return false;
  if (t->ndim < 0 || t->ndim > TD_MAX_DIMS) {
    td_fail(TD_EINVAL, "%s: the tensor has %d dims (0..%d)", name, (int)t->ndim, TD_MAX_DIMS);
    return false;
  }
  return td_check_cpu(name, t, "tensor");
}

/* The identity state of a pass-1 family (the kernels' lane identities agree). */
static td_reduce_acc identity(int32_t family) {
  td_reduce_acc s = {0.0, 0.0, 0, -1};
  switch (family) {
    case RF_F_PROD: s.a = 1.0; break;
    case RF_F_MIN: case RF_F_MINABS: s.a = INFINITY; break;
    case RF_F_MAX: s.a = -INFINITY; break;
    case RF_I_PROD: case RF_ALL: s.i = 1; break;
    case RF_I_MIN: s.i = INT64_MAX; break;
    case RF_I_MAX: s.i = INT64_MIN; break;
    default: break;
  }
  return s;
}

static int32_t refuse(int32_t op, int32_t dtype, const char *why) {
  return td_fail(TD_EDTYPE, "%s: %s. Got: %s", td_reduce_op_name(op), why, td_dtype_name(dtype));
}

int32_t td_reduce_describe(int32_t op, int32_t dtype, double param, td_reduce_desc *d) {
  const bool fl = td_dtype_is_floating(dtype);
  memset(d, 0, sizeof *d);
  d->family[1] = -1;
  d->param = param;
  d->out_dtype[0] = dtype;
  d->out_dtype[1] = TD_INT64;
  const char *floating_only = "Expected a floating point input dtype";
  switch (op) {
    case TD_RED_SUM:
    case TD_RED_PROD: {
      const bool sum = op == TD_RED_SUM;
      d->family[0] = fl ? (sum ? RF_F_SUM : RF_F_PROD) : (sum ? RF_I_SUM : RF_I_PROD);
      d->merge = fl ? (sum ? RM_ADD_A : RM_MUL_A) : (sum ? RM_ADD_I : RM_MUL_I);
      d->fin = fl ? RFIN_A : RFIN_I;
      d->out_dtype[0] = fl ? dtype : TD_INT64;
      break;
    }
    case TD_RED_MEAN:
      if (!fl)
        return refuse(op, dtype, "could not infer output dtype. Input dtype must be either "
                                 "a floating point or complex dtype");
      d->family[0] = RF_F_SUM;
      d->merge = RM_ADD_A;
      d->fin = RFIN_MEAN;
      break;
    case TD_RED_MIN:
    case TD_RED_MAX: {
      const bool mx = op == TD_RED_MAX;
      d->family[0] = fl ? (mx ? RF_F_MAX : RF_F_MIN) : (mx ? RF_I_MAX : RF_I_MIN);
      d->merge = fl ? (mx ? RM_MAX_A : RM_MIN_A) : (mx ? RM_MAX_I : RM_MIN_I);
      d->fin = fl ? RFIN_A : RFIN_I;
      break;
    }
    case TD_RED_ARGMIN:
    case TD_RED_ARGMAX: {
      const bool mx = op == TD_RED_ARGMAX;
      d->family[0] = fl ? (mx ? RF_F_ARGMAX : RF_F_ARGMIN) : (mx ? RF_I_ARGMAX : RF_I_ARGMIN);
      d->merge = fl ? (mx ? RM_ARGMAX_A : RM_ARGMIN_A) : (mx ? RM_ARGMAX_I : RM_ARGMIN_I);
      d->fin = RFIN_IDX;
      d->out_dtype[0] = TD_INT64;
      d->logical_order = true;
      break;
    }
    case TD_RED_STD:
    case TD_RED_VAR:
      if (!fl) return refuse(op, dtype, floating_only);
      /* Two passes per piece (the piece's mean, then squared deviations from it),
       * pieces merged with Chan et al.'s formula: no cancellation of large sums. */
      d->family[0] = RF_F_SUM;
      d->family[1] = RF_F_SQDEV;
      d->mid = RMID_MEAN;
      d->merge = RM_VAR;
      d->fin = op == TD_RED_STD ? RFIN_STD : RFIN_VAR;
      break;
    case TD_RED_NORM:
      if (!fl) return refuse(op, dtype, floating_only);
      if (param != param) return td_fail(TD_EINVAL, "norm: p is NaN");
      d->fin = RFIN_A;
      d->merge = RM_ADD_A;
      if (param == 2) {
        d->family[0] = RF_F_SUMSQ;
        d->fin = RFIN_SQRT;
      } else if (param == 1) {
        d->family[0] = RF_F_SUMABS;
      } else if (param == INFINITY) {
        d->family[0] = RF_F_MAXABS;
        d->merge = RM_MAX_A;
      } else if (param == -INFINITY) {
        d->family[0] = RF_F_MINABS;
        d->merge = RM_MIN_A;
      } else if (param == 0) {
        d->family[0] = RF_F_CNTNZ;
      } else {
        d->family[0] = RF_F_SUMPOW;
        d->fin = RFIN_ROOT;
      }
      break;
    case TD_RED_ALL:
    case TD_RED_ANY:
      d->family[0] = op == TD_RED_ALL ? RF_ALL : RF_ANY;
      d->merge = op == TD_RED_ALL ? RM_AND_I : RM_OR_I;
      d->fin = RFIN_I;
      d->out_dtype[0] = TD_BOOL;
      break;
    case TD_RED_LOGSUMEXP:
      /* Pass 1 finds the max, pass 2 sums exp(x - max); pieces merge by rescaling. */
      d->family[0] = RF_F_MAX;
      d->family[1] = RF_F_LSEEXP;
      d->merge = RM_LSE;
      d->fin = RFIN_LSE;
      d->out_dtype[0] = fl ? dtype : TD_FLOAT32;
      break;
    default:
      return td_fail(TD_EINVAL, "reduce: unknown op %d (expected 0..%d)", (int)op,
                     (int)TD_RED_COUNT - 1);
  }
  d->init = identity(d->family[0]);
  for (int32_t p = 0; p < 2; p++) {
    if (d->family[p] < 0) continue;
    d->k[p] = td_reduce_kernel_for(d->family[p], dtype);
    if (!d->k[p].row) return refuse(op, dtype, "no kernel for this input dtype");
  }
  return TD_OK;
}

/* ---- merging partial states (later pieces into earlier ones) -------------------------- */

/* from replaces into when it is strictly more extreme (earlier positions win ties), or
 * when it holds a NaN and into does not (the first NaN wins). */
static bool arg_better(bool max, double v, double best) {
  if (v != v) return best == best;
  return max ? v > best : v < best;
}

void td_reduce_merge_acc(const td_reduce_desc *d, td_reduce_acc *into, int64_t n_into,
                         const td_reduce_acc *from, int64_t n_from) {
  switch (d->merge) {
    case RM_ADD_A: into->a += from->a; break;
    case RM_MUL_A: into->a *= from->a; break;
    case RM_MIN_A: into->a = TD_REDUCE_NMIN(into->a, from->a); break;
    case RM_MAX_A: into->a = TD_REDUCE_NMAX(into->a, from->a); break;
    case RM_ADD_I: into->i = (int64_t)((uint64_t)into->i + (uint64_t)from->i); break;
    case RM_MUL_I: into->i = (int64_t)((uint64_t)into->i * (uint64_t)from->i); break;
    case RM_MIN_I: into->i = from->i < into->i ? from->i : into->i; break;
    case RM_MAX_I: into->i = from->i > into->i ? from->i : into->i; break;
    case RM_AND_I: into->i &= from->i; break;
    case RM_OR_I: into->i |= from->i; break;
    case RM_ARGMIN_A:
    case RM_ARGMAX_A:
      if (from->idx >= 0 &&
          (into->idx < 0 || arg_better(d->merge == RM_ARGMAX_A, from->a, into->a))) {
        into->a = from->a;
        into->idx = from->idx;
      }
      break;
    case RM_ARGMIN_I:
    case RM_ARGMAX_I:
      if (from->idx >= 0 &&
          (into->idx < 0 ||
           (d->merge == RM_ARGMAX_I ? from->i > into->i : from->i < into->i))) {
        into->i = from->i;
        into->idx = from->idx;
      }
      break;
    case RM_VAR: { /* Chan, Golub, LeVeque: (n, mean, M2) pairs */
      if (n_from == 0) break;
      if (n_into == 0) {
        *into = *from;
        break;
      }
      const double na = (double)n_into, nb = (double)n_from, n = na + nb;
      const double delta = from->a - into->a;
      into->a += delta * (nb / n);
      into->b += from->b + delta * delta * (na * nb / n);
      break;
    }
    case RM_LSE: { /* sums of exp(x - shift) rescaled to the common shift */
      const double m = TD_REDUCE_NMAX(into->a, from->a), shift = td_reduce_lse_shift(m);
      double s = 0.0;
      if (into->b != 0) s += into->b * exp(td_reduce_lse_shift(into->a) - shift);
      if (from->b != 0) s += from->b * exp(td_reduce_lse_shift(from->a) - shift);
      into->a = m;
      into->b = s;
      break;
    }
    default: break;
  }
}

void td_reduce_mid_acc(const td_reduce_desc *d, td_reduce_acc *acc, int64_t n) {
  if (d->mid == RMID_MEAN) {
    acc->a = n > 0 ? acc->a / (double)n : 0.0;
    acc->b = 0.0;
  }
}

/* ---- final states to output elements -------------------------------------------------- */

#define WRITE_CASE(_, DN, DT, DK, ...) \
  case TD_##DN: *(DT *)(void *)p = CONV_##DK(DN, DT, v); break;

static void write_f(char *p, int32_t dtype, double v) {
  switch (dtype) { TD_DTYPES_ALL(WRITE_CASE, _) default: break; }
}

static void write_i(char *p, int32_t dtype, int64_t v) {
  switch (dtype) { TD_DTYPES_ALL(WRITE_CASE, _) default: break; }
}

void td_reduce_store(const td_reduce_desc *d, char *const *out, const td_reduce_acc *acc,
                     int64_t n) {
  const int32_t dt = d->out_dtype[0];
  switch (d->fin) {
    case RFIN_A: write_f(out[0], dt, acc->a); break;
    case RFIN_I: write_i(out[0], dt, acc->i); break;
    case RFIN_IDX: write_i(out[0], dt, acc->idx); break;
    case RFIN_MEAN: write_f(out[0], dt, acc->a / (double)n); break;
    case RFIN_VAR:
    case RFIN_STD: { /* torch: M2 / max(0, n - correction), so inf or NaN past the end */
      const double div = (double)n > d->param ? (double)n - d->param : 0.0;
      const double var = acc->b / div;
      write_f(out[0], dt, d->fin == RFIN_STD ? sqrt(var) : var);
      break;
    }
    case RFIN_SQRT: write_f(out[0], dt, sqrt(acc->a)); break;
    case RFIN_ROOT: write_f(out[0], dt, pow(acc->a, 1.0 / d->param)); break;
    case RFIN_LSE: {
      const double m = acc->a;
      write_f(out[0], dt, m != m ? m : log(acc->b) + td_reduce_lse_shift(m));
      break;
    }
    case RFIN_VAL_IDX_A:
      write_f(out[0], dt, acc->a);
      write_i(out[1], d->out_dtype[1], acc->idx);
      break;
    case RFIN_VAL_IDX_I:
      write_i(out[0], dt, acc->i);
      write_i(out[1], d->out_dtype[1], acc->idx);
      break;
    default: break;
  }
}
