/*
 * gather.c: index_select, gather, scatter_, index_add_ and index_put_.
 *
 * Each checks its arguments the way torch does, turns the index into byte offsets
 * (td_index_offsets: validated, negatives counted from the end) and hands the move to
 * take.c with views whose stride along the indexed dim is 0. 0-dim tensors are treated
 * as [1], which is torch's rule for these ops too.
 */
#include "take.h"

/* The header of t with shape, and strides whose dim `dim` is 0: the base of each line
 * along dim, which the offsets then move along. */
static void along_dim(const td_tensor *t, int32_t dim, const int64_t *shape, td_tensor *out) {
  int64_t strides[TD_MAX_DIMS];
  for (int32_t d = 0; d < t->ndim; d++) strides[d] = d == dim ? 0 : t->strides[d];
  td_view_set(out, t, t->offset, t->ndim, shape, strides);
}

/* offs (a 0-D or 1-D offsets tensor, one entry per index) seen at every position of
 * shape: varying along dim only. */
static void offsets_along(const td_tensor *offs, int32_t ndim, int32_t dim,
                          const int64_t *shape, td_tensor *out) {
  int64_t strides[TD_MAX_DIMS] = {0};
  strides[dim] = 1;
  td_view_set(out, offs, offs->offset, ndim, shape, strides);
}

static bool check_1d_index(const char *call, const td_tensor *index) {
  if (index->ndim <= 1) return true;
  char buf[TD_SHAPE_STR];
  td_fail(TD_ESHAPE, "%s: index must be 0-D or 1-D, got shape %s", call,
          td_format_shape(buf, sizeof buf, index->ndim, index->shape));
  return false;
}

static bool same_ndim(const char *call, const td_tensor *a, const char *aname,
                      const td_tensor *b, const char *bname) {
  int32_t na = a->ndim > 0 ? a->ndim : 1, nb = b->ndim > 0 ? b->ndim : 1;
  if (na == nb) return true;
  td_fail(TD_ESHAPE, "%s: %s has %d dims but %s has %d", call, bname, (int)b->ndim, aname,
          (int)a->ndim);
  return false;
}

static td_tensor *index_select(const td_tensor *a, int32_t dim, const td_tensor *index, bool one_based) {
  const char *call = "index_select";
  int32_t d;
  if (!a || !index)
    return td_fail_null(TD_EINVAL, "%s: the %s is NULL", call, a ? "index" : "tensor");
  if (!td_check_cpu(call, a, "tensor") || !td_check_cpu(call, index, "index") ||
      !td_wrap_dim(call, dim, a->ndim, &d) || !check_1d_index(call, index))
    return NULL;
  const int64_t n = td_tensor_numel(index);
  if (a->ndim == 0 && n != 1)
    return td_fail_null(TD_ESHAPE, "%s: a 0-dim tensor takes exactly one index, got %lld", call,
                        (long long)n);
  td_tensor a1;
  td_as_1d_at_least(a, &a1);
  td_tensor *offs = one_based ? td_index_offsets_one_based(call, index, a1.shape[d], d + 1, a1.strides[d] * a1.itemsize)
                              : td_index_offsets(call, index, a1.shape[d], d, a1.strides[d] * a1.itemsize);
  if (!offs) return NULL;
  int64_t shape[TD_MAX_DIMS];
  for (int32_t k = 0; k < a1.ndim; k++) shape[k] = k == d ? n : a1.shape[k];
  td_tensor *out = td_tensor_empty(a->ndim, shape, a->dtype);
  if (out) {
    td_tensor out1, src, offv;
    td_as_1d_at_least(out, &out1);
    along_dim(&a1, d, shape, &src);
    offsets_along(offs, a1.ndim, d, shape, &offv);
    td_take_run(&out1, &src, &offv);
  }
  td_tensor_release(offs);
  return out;
}

TD_EXPORT td_tensor *td_index_select(const td_tensor *a, int32_t dim, const td_tensor *index) {
  return index_select(a, dim, index, false);
}

TD_EXPORT td_tensor *td_index_select_one_based(const td_tensor *a, int32_t dim, const td_tensor *index) {
  return index_select(a, dim, index, true);
}

static td_tensor *gather(const td_tensor *a, int32_t dim, const td_tensor *index, bool one_based) {
  const char *call = "gather";
  int32_t d;
  if (!a || !index)
    return td_fail_null(TD_EINVAL, "%s: the %s is NULL", call, a ? "index" : "tensor");
  if (!td_check_cpu(call, a, "tensor") || !td_check_cpu(call, index, "index") ||
      !td_wrap_dim(call, dim, a->ndim, &d) || !same_ndim(call, a, "the input", index, "index"))
    return NULL;
  td_tensor a1, i1;
  td_as_1d_at_least(a, &a1);
  td_as_1d_at_least(index, &i1);
  for (int32_t k = 0; k < a1.ndim; k++) {
    if (k == d || i1.shape[k] <= a1.shape[k]) continue;
    char si[TD_SHAPE_STR], sa[TD_SHAPE_STR];
    return td_fail_null(TD_ESHAPE,
                        "%s: index shape %s is larger than input shape %s in dim %d (only "
                        "dim %d may be larger)",
                        call, td_format_shape(si, sizeof si, index->ndim, index->shape),
                        td_format_shape(sa, sizeof sa, a->ndim, a->shape), (int)k, (int)d);
  }
  if (one_based && td_take_1d_one_based_fits(&a1, index)) return td_take_1d_one_based(call, &a1, index, d + 1);
  td_tensor *offs = one_based ? td_index_offsets_one_based(call, index, a1.shape[d], d + 1, a1.strides[d] * a1.itemsize)
                              : td_index_offsets(call, index, a1.shape[d], d, a1.strides[d] * a1.itemsize);
  if (!offs) return NULL;
  td_tensor *out = td_tensor_empty(index->ndim, index->shape, a->dtype);
  if (out) {
    td_tensor out1, src, offv;
    td_as_1d_at_least(out, &out1);
    td_as_1d_at_least(offs, &offv);
    along_dim(&a1, d, i1.shape, &src);
    td_take_run(&out1, &src, &offv);
  }
  td_tensor_release(offs);
  return out;
}

TD_EXPORT td_tensor *td_gather(const td_tensor *a, int32_t dim, const td_tensor *index) {
  return gather(a, dim, index, false);
}

TD_EXPORT td_tensor *td_gather_one_based(const td_tensor *a, int32_t dim, const td_tensor *index) {
  return gather(a, dim, index, true);
}

TD_EXPORT int32_t td_scatter_reduce_(td_tensor *a, int32_t dim, const td_tensor *index,
                                     const td_tensor *src, int32_t mode) {
  const char *call = mode == TD_SCATTER_SET ? "scatter_" : "scatter_reduce_";
  int32_t d;
  if (mode < TD_SCATTER_SET || mode > TD_SCATTER_AMIN)
    return td_fail(TD_EINVAL, "%s: unknown mode %d (TD_SCATTER_SET..TD_SCATTER_AMIN)", call, (int)mode);
  if (!a || !index || !src)
    return td_fail(TD_EINVAL, "%s: the %s is NULL", call, !a ? "tensor" : !index ? "index" : "source");
  if (!td_check_cpu(call, a, "tensor") || !td_check_cpu(call, index, "index") ||
      !td_check_cpu(call, src, "source") || !td_check_write_target(call, a) ||
      !td_wrap_dim(call, dim, a->ndim, &d) || !same_ndim(call, a, "the tensor", index, "index") ||
      !same_ndim(call, a, "the tensor", src, "the source"))
    return td_last_status();
  td_tensor a1, i1, s1;
  td_as_1d_at_least(a, &a1);
  td_as_1d_at_least(index, &i1);
  td_as_1d_at_least(src, &s1);
  for (int32_t k = 0; k < a1.ndim; k++) {
    if (i1.shape[k] <= s1.shape[k] && (k == d || i1.shape[k] <= a1.shape[k])) continue;
    char si[TD_SHAPE_STR], sa[TD_SHAPE_STR], ss[TD_SHAPE_STR];
    return td_fail(TD_ESHAPE, "%s: index shape %s must be no larger than the tensor's %s "
                   "apart from dim %d, and no larger than the source's %s (dim %d differs)", call,
                   td_format_shape(si, sizeof si, index->ndim, index->shape),
                   td_format_shape(sa, sizeof sa, a->ndim, a->shape), (int)d,
                   td_format_shape(ss, sizeof ss, src->ndim, src->shape), (int)k);
  }
  td_tensor *offs = td_index_offsets(call, index, a1.shape[d], d, a1.strides[d] * a1.itemsize);
  if (!offs) return td_last_status();
  td_tensor *source = td_source_for(a, src, a->dtype);
  if (!source) {
    td_tensor_release(offs);
    return td_last_status();
  }
  td_tensor dst, srcv, offv;
  along_dim(&a1, d, i1.shape, &dst);
  td_as_1d_at_least(source, &srcv);
  td_view_set(&srcv, &srcv, srcv.offset, srcv.ndim, i1.shape, srcv.strides); /* index's extent */
  td_as_1d_at_least(offs, &offv);
  td_put_run(&dst, &srcv, &offv, d, mode);
  td_tensor_release(source);
  td_tensor_release(offs);
  return TD_OK;
}

TD_EXPORT int32_t td_scatter_(td_tensor *a, int32_t dim, const td_tensor *index,
                              const td_tensor *src) {
  return td_scatter_reduce_(a, dim, index, src, TD_SCATTER_SET);
}

/* The part index_add_ and index_put_ share: src (already a's dtype, not sharing its
 * storage, of the selection's shape) written or added at index along dim. */
static int32_t put_along(const char *call, td_tensor *a1, int32_t d, const td_tensor *index,
                         const td_tensor *src1, bool accumulate) {
  td_tensor *offs = td_index_offsets(call, index, a1->shape[d], d, a1->strides[d] * a1->itemsize);
  if (!offs) return td_last_status();
  td_tensor dst, offv;
  along_dim(a1, d, src1->shape, &dst);
  offsets_along(offs, a1->ndim, d, src1->shape, &offv);
  td_put_run(&dst, src1, &offv, d, accumulate ? TD_SCATTER_SUM : TD_SCATTER_SET);
  td_tensor_release(offs);
  return TD_OK;
}

TD_EXPORT int32_t td_index_add_(td_tensor *a, int32_t dim, const td_tensor *index,
                                const td_tensor *src) {
  const char *call = "index_add_";
  int32_t d;
  if (!a || !index || !src)
    return td_fail(TD_EINVAL, "%s: the %s is NULL", call, !a ? "tensor" : !index ? "index" : "source");
  if (!td_check_cpu(call, a, "tensor") || !td_check_cpu(call, index, "index") ||
      !td_check_cpu(call, src, "source") || !td_check_write_target(call, a) ||
      !td_wrap_dim(call, dim, a->ndim, &d) || !check_1d_index(call, index))
    return td_last_status();
  td_tensor a1, s1;
  td_as_1d_at_least(a, &a1);
  td_as_1d_at_least(src, &s1);
  const int64_t n = td_tensor_numel(index);
  bool ok = s1.ndim == a1.ndim;
  for (int32_t k = 0; k < a1.ndim && ok; k++) ok = s1.shape[k] == (k == d ? n : a1.shape[k]);
  if (!ok) {
    char ss[TD_SHAPE_STR], sa[TD_SHAPE_STR];
    return td_fail(TD_ESHAPE, "%s: source shape %s does not match tensor shape %s with dim %d "
                   "of size %lld (the index's length)", call,
                   td_format_shape(ss, sizeof ss, src->ndim, src->shape),
                   td_format_shape(sa, sizeof sa, a->ndim, a->shape), (int)d, (long long)n);
  }
  td_tensor *source = td_source_for(a, src, a->dtype);
  if (!source) return td_last_status();
  td_tensor src1;
  td_as_1d_at_least(source, &src1);
  int32_t status = put_along(call, &a1, d, index, &src1, true);
  td_tensor_release(source);
  return status;
}

TD_EXPORT int32_t td_index_put_(td_tensor *a, int32_t dim, const td_tensor *index,
                                const td_tensor *value) {
  const char *call = "index_put_";
  int32_t d;
  if (!a || !index || !value)
    return td_fail(TD_EINVAL, "%s: the %s is NULL", call, !a ? "tensor" : !index ? "index" : "value");
  if (!td_check_cpu(call, a, "tensor") || !td_check_cpu(call, index, "index") ||
      !td_check_cpu(call, value, "value") || !td_check_write_target(call, a) ||
      !td_wrap_dim(call, dim, a->ndim, &d) || !check_1d_index(call, index))
    return td_last_status();
  const int64_t n = td_tensor_numel(index);
  if (a->ndim == 0 && n != 1)
    return td_fail(TD_ESHAPE, "%s: a 0-dim tensor takes exactly one index, got %lld", call,
                   (long long)n);
  td_tensor a1;
  td_as_1d_at_least(a, &a1);
  /* The selection is a's shape with n along dim ([1] for a 0-dim tensor). */
  int64_t shape[TD_MAX_DIMS];
  for (int32_t k = 0; k < a1.ndim; k++) shape[k] = k == d ? n : a1.shape[k];
  td_tensor *source = td_source_for(a, value, a->dtype);
  if (!source) return td_last_status();
  td_tensor valx;
  int32_t status = td_tensor_expand(source, a1.ndim, shape, &valx);
  if (status != TD_OK) {
    char sv[TD_SHAPE_STR], ss[TD_SHAPE_STR];
    status = td_fail(TD_ESHAPE, "%s: value shape %s does not broadcast to the selection's "
                     "shape %s", call, td_format_shape(sv, sizeof sv, value->ndim, value->shape),
                     td_format_shape(ss, sizeof ss, a1.ndim, shape));
  } else {
    td_tensor val1;
    td_as_1d_at_least(&valx, &val1);
    status = put_along(call, &a1, d, index, &val1, false);
  }
  td_tensor_release(source);
  return status;
}
