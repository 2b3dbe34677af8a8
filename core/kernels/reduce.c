/*
 * reduce.c: td_reduce and td_reduce_with_index: argument checks, output shapes and
 * allocation; the op semantics live in reduce_ops.c, the walk in reduce_engine.c.
 *
 * Every check runs before the output is allocated, so a refused call writes nothing.
 * A 0-dim input is reduced as a 1-element 1-dim one (dim 0 is accepted for it, as
 * torch accepts dim 0 and -1 on a scalar) and gives a 0-dim result, keepdim or not.
 */
#include <math.h>
#include <string.h>

#include "reduce.h"

/* The input as the engine sees it: a 0-dim tensor becomes a [1] view. */
static void as_engine_input(const td_tensor *a, td_tensor *in) {
  *in = *a;
  in->refcount = 0;
  if (a->ndim == 0) {
    in->ndim = 1;
    in->shape[0] = 1;
    in->strides[0] = 1;
  }
}

/* Flags the dims to reduce (all of them for ndims 0); false after td_fail. */
static bool parse_dims(const char *name, const td_tensor *in, int32_t orig_ndim,
                       const int32_t *dims, int32_t ndims, bool *reduced) {
  if (ndims < 0 || ndims > TD_MAX_DIMS) {
    td_fail(TD_EINVAL, "%s: %d dims given (0..%d)", name, (int)ndims, TD_MAX_DIMS);
    return false;
  }
  if (ndims > 0 && !dims) {
    td_fail(TD_EINVAL, "%s: dims is NULL but ndims is %d", name, (int)ndims);
    return false;
  }
  for (int32_t i = 0; i < in->ndim; i++) reduced[i] = ndims == 0;
  for (int32_t i = 0; i < ndims; i++) {
    const int32_t dim = dims[i];
    if (dim < 0 || dim >= in->ndim) {
      td_fail(TD_EINDEX, "%s: dim %d is out of range for a tensor of %d dims (dims are 0-based)",
              name, (int)dim, (int)orig_ndim);
      return false;
    }
    if (reduced[dim]) {
      td_fail(TD_EINVAL, "%s: dim %d appears multiple times in the list of dims", name, (int)dim);
      return false;
    }
    reduced[dim] = true;
  }
  return true;
}

/* Extremes have no identity: refuse empty reductions as torch does. */
static bool check_nonempty(const char *name, int32_t op, const td_tensor *in, int32_t ndims,
                           const bool *reduced, double param) {
  const bool extreme = op == TD_RED_MIN || op == TD_RED_MAX || op == TD_RED_ARGMIN ||
                       op == TD_RED_ARGMAX;
  const bool neg_norm = op == TD_RED_NORM && param < 0;
  if (!extreme && !neg_norm) return true;
  char shape[TD_SHAPE_STR];
  td_format_shape(shape, sizeof shape, in->ndim, in->shape);
  for (int32_t d = 0; d < in->ndim; d++) {
    if (!reduced[d] || in->shape[d] != 0) continue;
    if (neg_norm)
      td_fail(TD_EINVAL, "norm: cannot compute the %g norm on an empty tensor because the "
              "operation does not have an identity (input shape %s)", param, shape);
    else if (ndims == 0)
      td_fail(TD_EINVAL, "%s: Expected reduction dim to be specified for input.numel() == 0 "
              "(input shape %s)", name, shape);
    else
      td_fail(TD_EINVAL, "%s: Expected reduction dim %d to have non-zero size: cannot "
              "reduce over a zero-size dimension (input shape %s)", name, (int)d, shape);
    return false;
  }
  return true;
}

/* A new tensor of dtype for the kept dims (size 1 at reduced dims with keepdim; 0-dim
 * for a 0-dim input), and in `view` the same memory as a header of in's ndim with
 * size 1 at every reduced dim, which is what the engine writes through. */
static td_tensor *new_output(const td_tensor *in, int32_t orig_ndim, const bool *reduced,
                             int32_t keepdim, int32_t dtype, td_tensor *view) {
  int64_t shape[TD_MAX_DIMS];
  int32_t nd = 0;
  for (int32_t d = 0; d < in->ndim && orig_ndim > 0; d++)
    if (!reduced[d] || keepdim) shape[nd++] = reduced[d] ? 1 : in->shape[d];
  td_tensor *out = td_tensor_empty(nd, shape, dtype);
  if (!out) return NULL;
  *view = *out;
  view->refcount = 0;
  view->ndim = in->ndim;
  int64_t stride = 1;
  for (int32_t d = in->ndim - 1; d >= 0; d--) {
    view->shape[d] = reduced[d] ? 1 : in->shape[d];
    view->strides[d] = stride;
    stride *= view->shape[d];
  }
  return out;
}

TD_EXPORT td_tensor *td_reduce(int32_t op, const td_tensor *a, const int32_t *dims,
                               int32_t ndims, int32_t keepdim, double param) {
  const char *name = td_reduce_op_name(op);
  td_reduce_desc d;
  td_tensor in, view;
  bool reduced[TD_MAX_DIMS];
  if (!td_reduce_check_input(name, a) || td_reduce_describe(op, a->dtype, param, &d) < 0)
    return NULL;
  as_engine_input(a, &in);
  if (!parse_dims(name, &in, a->ndim, dims, ndims, reduced) ||
      !check_nonempty(name, op, &in, ndims, reduced, param))
    return NULL;
  td_tensor *out = new_output(&in, a->ndim, reduced, keepdim, d.out_dtype[0], &view);
  if (!out) return NULL;
  if (td_reduce_run(&d, &in, reduced, &view, NULL) < 0) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

TD_EXPORT int32_t td_reduce_with_index(int32_t op, const td_tensor *a, int32_t dim,
                                       int32_t keepdim, td_tensor **values,
                                       td_tensor **indices) {
  if (op != TD_RED_MIN && op != TD_RED_MAX)
    return td_fail(TD_EINVAL, "reduce_with_index: op %d is not min (%d) or max (%d)", (int)op,
                   (int)TD_RED_MIN, (int)TD_RED_MAX);
  const char *name = td_reduce_op_name(op);
  if (!values || !indices)
    return td_fail(TD_EINVAL, "%s: the %s output pointer is NULL", name,
                   values ? "indices" : "values");
  td_reduce_desc d;
  td_tensor in, vview, iview;
  bool reduced[TD_MAX_DIMS];
  if (!td_reduce_check_input(name, a)) return td_last_status();
  /* argmin/argmax keep the value with the position; only the outputs differ. */
  const int32_t status =
      td_reduce_describe(op == TD_RED_MIN ? TD_RED_ARGMIN : TD_RED_ARGMAX, a->dtype, 0, &d);
  if (status < 0) return status;
  d.fin = td_dtype_is_floating(a->dtype) ? RFIN_VAL_IDX_A : RFIN_VAL_IDX_I;
  d.out_dtype[0] = a->dtype;
  as_engine_input(a, &in);
  if (!parse_dims(name, &in, a->ndim, &dim, 1, reduced) ||
      !check_nonempty(name, op, &in, 1, reduced, 0))
    return td_last_status();
  td_tensor *v = new_output(&in, a->ndim, reduced, keepdim, a->dtype, &vview);
  td_tensor *ix = v ? new_output(&in, a->ndim, reduced, keepdim, TD_INT64, &iview) : NULL;
  if (!ix || td_reduce_run(&d, &in, reduced, &vview, &iview) < 0) {
    td_tensor_release(v);
    td_tensor_release(ix);
    return td_last_status();
  }
  *values = v;
  *indices = ix;
  return TD_OK;
}
