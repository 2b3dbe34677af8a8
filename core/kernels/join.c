/*
 * join.c: stack, cat and pad.
 *
 * All three allocate the result and fill it with td_tensor_copy_ (which casts, follows
 * any layout and moves contiguous rows with memcpy) from each input into its slot, a
 * view of the result. stack and cat cut the inputs into pieces of about TD_GRAIN
 * elements along their dim 0 and copy the pieces on the thread pool: pure copies, so
 * the result does not depend on the split.
 */
#include <stdlib.h>
#include <string.h>

#include "../src/parallel.h"
#include "take.h"

/* The dtype all inputs promote to: td_result_type folded left to right, as torch folds
 * result_type over a list. Inputs of stack share a shape and those of cat have dims, so
 * the accumulator's dims (inputs[0]'s) put every input in the same promotion group. */
static bool common_dtype(const td_tensor *const *ts, int32_t n, int32_t *out) {
  td_tensor acc = *ts[0]; /* td_result_type reads the dtype and the dims */
  acc.refcount = 0;
  for (int32_t i = 1; i < n; i++) {
    if (ts[i]->dtype == acc.dtype) continue;
    int32_t r = td_result_type(&acc, ts[i]);
    if (r < 0) return false;
    acc.dtype = r;
  }
  *out = acc.dtype;
  return true;
}

static bool check_list(const char *call, const td_tensor *const *ts, int32_t n) {
  if (!ts || n <= 0) {
    td_fail(TD_EINVAL, "%s: expected a non-empty list of tensors, got %d", call, ts ? (int)n : 0);
    return false;
  }
  for (int32_t i = 0; i < n; i++) {
    if (!ts[i]) {
      td_fail(TD_EINVAL, "%s: tensor %d of the list is NULL", call, (int)i);
      return false;
    }
    if (!td_check_cpu(call, ts[i], "tensor")) return false;
  }
  return true;
}

/* ---- copying inputs into their slots ------------------------------------------------ */

typedef struct piece {
  int32_t input;
  int64_t begin, end; /* along the input's dim 0 (0, 1 for a 0-dim input) */
} piece;

typedef struct join_job {
  const td_tensor *out;
  const td_tensor *const *inputs;
  const int64_t *starts; /* cat: each input's first position along dim; NULL for stack */
  int32_t dim;
  const piece *pieces;
} join_job;

/* The view of out that input i fills: out[.., i, ..] (stack) or its range along dim. */
static void slot_of(const join_job *j, int32_t i, td_tensor *slot) {
  if (j->starts) {
    const int64_t len = j->inputs[i]->shape[j->dim];
    td_tensor_slice(j->out, j->dim, j->starts[i], j->starts[i] + len, 1, slot);
  } else {
    td_tensor_select(j->out, j->dim, i, slot);
  }
}

static void copy_pieces(int64_t begin, int64_t end, void *arg) {
  const join_job *j = arg;
  for (int64_t p = begin; p < end; p++) {
    const piece *pc = &j->pieces[p];
    const td_tensor *in = j->inputs[pc->input];
    td_tensor slot, part = *in;
    part.refcount = 0;
    slot_of(j, pc->input, &slot);
    if (in->ndim > 0 && (pc->begin > 0 || pc->end < in->shape[0])) {
      td_tensor_slice(&slot, 0, pc->begin, pc->end, 1, &slot);
      td_tensor_slice(in, 0, pc->begin, pc->end, 1, &part);
    }
    td_tensor_copy_(&slot, &part); /* cannot fail: shapes, devices and out were checked */
  }
}

/* Copies every input with use[i] set into its slot; false after td_fail. */
static bool fill_slots(const char *call, join_job *j, int32_t n, const bool *use) {
  int64_t npieces = 0, total = 0;
  for (int32_t i = 0; i < n; i++) {
    const td_tensor *in = j->inputs[i];
    int64_t m = td_tensor_numel(in);
    if (!use[i] || m == 0) continue;
    int64_t rows = in->ndim > 0 ? in->shape[0] : 1, want = (m + TD_GRAIN - 1) / TD_GRAIN;
    npieces += want < rows ? want : rows;
    total += m;
  }
  if (npieces == 0) return true;
  if (total <= TD_GRAIN) {
    /* Small joins (a batch of a few rows per leaf) are dominated by per-call setup: copy
     * each input straight into its slot, with memcpy when both are dense and alike. */
    /* Joining along dim 0 of a dense result, input i's slot is one run of bytes. */
    const bool runs = j->dim == 0 && td_tensor_is_contiguous(j->out);
    const int64_t row = runs && j->out->ndim > 0 ? j->out->strides[0] * j->out->itemsize : 0;
    for (int32_t i = 0; i < n; i++) {
      const td_tensor *in = j->inputs[i];
      int64_t m = td_tensor_numel(in);
      if (!use[i] || m == 0) continue;
      if (runs && in->dtype == j->out->dtype && td_tensor_is_contiguous(in)) {
        char *to = td_tensor_ptr(j->out) + (j->starts ? j->starts[i] : i) * row;
        memcpy(to, td_tensor_ptr(in), (size_t)(m * in->itemsize));
        continue;
      }
      td_tensor slot;
      slot_of(j, i, &slot);
      if (slot.dtype == in->dtype && td_tensor_is_contiguous(&slot) && td_tensor_is_contiguous(in))
        memcpy(td_tensor_ptr(&slot), td_tensor_ptr(in),
               (size_t)(td_tensor_numel(in) * in->itemsize));
      else
        td_tensor_copy_(&slot, in); /* cannot fail: shapes, devices and out were checked */
    }
    return true;
  }
  piece *pieces = malloc((size_t)npieces * sizeof *pieces);
  if (!pieces) {
    td_fail(TD_ENOMEM, "%s: out of memory", call);
    return false;
  }
  int64_t p = 0;
  for (int32_t i = 0; i < n; i++) {
    const td_tensor *in = j->inputs[i];
    int64_t m = td_tensor_numel(in);
    if (!use[i] || m == 0) continue;
    int64_t rows = in->ndim > 0 ? in->shape[0] : 1, want = (m + TD_GRAIN - 1) / TD_GRAIN;
    int64_t k = want < rows ? want : rows;
    const int64_t q = rows / k, r = rows % k; /* k near-equal ranges of rows */
    for (int64_t c = 0; c < k; c++)
      pieces[p++] = (piece){i, c * q + (c < r ? c : r), (c + 1) * q + (c + 1 < r ? c + 1 : r)};
  }
  j->pieces = pieces;
  /* Small inputs share a chunk so that a chunk moves about TD_GRAIN elements. */
  int64_t grain = total / npieces >= TD_GRAIN ? 1 : TD_GRAIN * npieces / total;
  td_parallel_for(npieces, grain, copy_pieces, j);
  free(pieces);
  return true;
}

/* ---- public ------------------------------------------------------------------------ */

TD_EXPORT td_tensor *td_stack(const td_tensor *const *tensors, int32_t n, int32_t dim) {
  const char *call = "stack";
  if (!check_list(call, tensors, n)) return NULL;
  const td_tensor *ref = tensors[0];
  for (int32_t i = 1; i < n; i++) {
    const td_tensor *t = tensors[i];
    bool same = t->ndim == ref->ndim;
    for (int32_t d = 0; d < t->ndim && same; d++) same = t->shape[d] == ref->shape[d];
    if (same) continue;
    char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
    return td_fail_null(TD_ESHAPE,
                        "%s: tensors must have one shape, but tensor 0 has shape %s and "
                        "tensor %d has shape %s",
                        call, td_format_shape(a, sizeof a, ref->ndim, ref->shape), (int)i,
                        td_format_shape(b, sizeof b, t->ndim, t->shape));
  }
  const int32_t nd = ref->ndim + 1;
  if (nd > TD_MAX_DIMS)
    return td_fail_null(TD_ESHAPE, "%s: the result would have %d dims (at most %d)", call, (int)nd,
                        TD_MAX_DIMS);
  if (dim < -nd || dim >= nd)
    return td_fail_null(TD_EINDEX,
                        "%s: dim %d is out of range for stacking %d-dim tensors (valid: %d..%d)",
                        call, (int)dim, (int)ref->ndim, (int)-nd, (int)nd - 1);
  const int32_t d = dim < 0 ? dim + nd : dim;
  int32_t dtype;
  if (!common_dtype(tensors, n, &dtype)) return NULL;
  int64_t shape[TD_MAX_DIMS];
  for (int32_t k = 0, s = 0; k < nd; k++) shape[k] = k == d ? n : ref->shape[s++];
  td_tensor *out = td_tensor_empty(nd, shape, dtype);
  bool *use = malloc((size_t)n * sizeof *use);
  if (!out || !use) {
    if (!use) td_fail(TD_ENOMEM, "%s: out of memory", call);
    td_tensor_release(out);
    free(use);
    return NULL;
  }
  for (int32_t i = 0; i < n; i++) use[i] = true;
  join_job j = {.out = out, .inputs = tensors, .starts = NULL, .dim = d};
  if (!fill_slots(call, &j, n, use)) {
    td_tensor_release(out);
    out = NULL;
  }
  free(use);
  return out;
}

TD_EXPORT td_tensor *td_cat(const td_tensor *const *tensors, int32_t n, int32_t dim) {
  const char *call = "cat";
  if (!check_list(call, tensors, n)) return NULL;
  bool *use = malloc((size_t)n * sizeof *use);
  int64_t *starts = malloc((size_t)n * sizeof *starts);
  td_tensor *out = NULL;
  int32_t ref = -1, d = 0, dtype;
  if (!use || !starts) {
    td_fail(TD_ENOMEM, "%s: out of memory", call);
    goto done;
  }
  /* torch's legacy rule: 1-D tensors of size 0 are skipped (they still promote). */
  for (int32_t i = 0; i < n; i++) {
    const td_tensor *t = tensors[i];
    if (t->ndim == 0) {
      td_fail(TD_ESHAPE, "%s: zero-dimensional tensor (at position %d) cannot be concatenated",
              call, (int)i);
      goto done;
    }
    use[i] = !(t->ndim == 1 && t->shape[0] == 0);
    if (use[i] && ref < 0) ref = i;
  }
  if (!common_dtype(tensors, n, &dtype)) goto done;
  if (ref < 0) { /* every input is an empty 1-D tensor */
    const int64_t zero = 0;
    out = td_tensor_empty(1, &zero, dtype);
    goto done;
  }
  const td_tensor *r = tensors[ref];
  if (!td_wrap_dim(call, dim, r->ndim, &d)) goto done;
  int64_t shape[TD_MAX_DIMS], total = 0;
  for (int32_t i = 0; i < n; i++) {
    const td_tensor *t = tensors[i];
    if (!use[i]) continue;
    bool same = t->ndim == r->ndim;
    for (int32_t k = 0; k < t->ndim && same; k++) same = k == d || t->shape[k] == r->shape[k];
    if (!same) {
      char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
      td_fail(TD_ESHAPE, "%s: sizes must match except in dim %d, but tensor %d has shape %s "
              "and tensor %d has shape %s", call, (int)d, (int)ref,
              td_format_shape(a, sizeof a, r->ndim, r->shape), (int)i,
              td_format_shape(b, sizeof b, t->ndim, t->shape));
      goto done;
    }
    starts[i] = total;
    total += t->shape[d];
  }
  for (int32_t k = 0; k < r->ndim; k++) shape[k] = k == d ? total : r->shape[k];
  out = td_tensor_empty(r->ndim, shape, dtype);
  if (out) {
    join_job j = {.out = out, .inputs = tensors, .starts = starts, .dim = d};
    if (!fill_slots(call, &j, n, use)) {
      td_tensor_release(out);
      out = NULL;
    }
  }
done:
  free(use);
  free(starts);
  return out;
}

TD_EXPORT td_tensor *td_pad(const td_tensor *a, const int64_t *pads, int32_t npads,
                            double value) {
  const char *call = "pad";
  if (!a || (!pads && npads > 0))
    return td_fail_null(TD_EINVAL, "%s: the %s is NULL", call, a ? "pads array" : "tensor");
  if (!td_check_cpu(call, a, "tensor")) return NULL;
  if (npads < 0 || npads % 2 != 0)
    return td_fail_null(TD_EINVAL,
                        "%s: pads has %d entries; it needs an even count (before, after per dim)",
                        call, (int)npads);
  if (npads / 2 > a->ndim)
    return td_fail_null(TD_EINVAL, "%s: %d pads cover %d dims but the tensor has %d", call,
                        (int)npads, (int)(npads / 2), (int)a->ndim);
  /* Per dim: the result's size, and which range of a lands where in it. */
  int64_t shape[TD_MAX_DIMS], before[TD_MAX_DIMS] = {0}, after[TD_MAX_DIMS] = {0};
  for (int32_t k = 0; k < a->ndim; k++) shape[k] = a->shape[k];
  for (int32_t i = 0; i < npads / 2; i++) {
    const int32_t k = a->ndim - 1 - i;
    const int64_t b = pads[2 * i], e = pads[2 * i + 1], s = a->shape[k];
    int64_t kept = s, size = 0;
    /* INT64_MIN / 2 .. INT64_MAX / 2 keeps every sum below from overflowing. */
    bool ok = b > INT64_MIN / 2 && b < INT64_MAX / 2 && e > INT64_MIN / 2 && e < INT64_MAX / 2;
    if (ok) {
      kept = s + (b < 0 ? b : 0) + (e < 0 ? e : 0);
      size = s + b + e;
    }
    if (!ok || kept < 0)
      return td_fail_null(TD_ESHAPE, "%s: dim %d of size %lld padded by (%lld, %lld) leaves %s",
                          call, (int)k, (long long)s, (long long)b, (long long)e,
                          ok ? "a negative size after cropping" : "a size out of range");
    shape[k] = size;
    before[k] = b;
    after[k] = e;
  }
  td_tensor *out = td_tensor_empty(a->ndim, shape, a->dtype);
  if (!out) return NULL;
  /* The borders: slabs before and after each padded dim (corners get filled twice). */
  for (int32_t k = 0; k < a->ndim; k++) {
    td_tensor slab;
    if (before[k] > 0 && td_tensor_slice(out, k, 0, before[k], 1, &slab) == TD_OK)
      td_tensor_fill_(&slab, value);
    if (after[k] > 0 && td_tensor_slice(out, k, shape[k] - after[k], shape[k], 1, &slab) == TD_OK)
      td_tensor_fill_(&slab, value);
  }
  /* The inside: a minus its cropped edges, at its place in out. */
  td_tensor src = *a, dst = *out;
  src.refcount = dst.refcount = 0;
  for (int32_t k = 0; k < a->ndim; k++) {
    const int64_t b = before[k], e = after[k], s = a->shape[k];
    const int64_t lo = b < 0 ? -b : 0, hi = s - (e < 0 ? -e : 0), at = b > 0 ? b : 0;
    td_tensor_slice(&src, k, lo, hi, 1, &src);
    td_tensor_slice(&dst, k, at, at + (hi - lo), 1, &dst);
  }
  if (td_tensor_copy_(&dst, &src) != TD_OK) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}
