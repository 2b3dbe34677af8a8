/* test_gather.c: index_select, gather, scatter_, index_add_, index_put_, masked_select,
 * nonzero, mask_rows and mask_rows_put_, each against a plain loop written here. */
#include "tensors.h"

/* index value v for a dim of this size, 0-based. */
static int64_t norm(int64_t v, int64_t size) { return v < 0 ? v + size : v; }

/* Indices for a dim of size n: the ends, both signs, duplicates. */
static int64_t some_indices(int64_t size, int64_t *out) {
  int64_t k = 0;
  out[k++] = size - 1;
  out[k++] = -1;
  out[k++] = 0;
  out[k++] = size / 2;
  out[k++] = size / 2;
  out[k++] = -size;
  out[k++] = (size + 1) / 3;
  return k;
}

/* ---- index_select ------------------------------------------------------------------- */

/* out == a with dim picked through idx (n values), element by element. */
static int64_t index_select_mismatches(const td_tensor *a, int32_t dim, const int64_t *idx,
                                       int64_t n, const td_tensor *out) {
  int64_t shape[TD_MAX_DIMS];
  for (int32_t d = 0; d < a->ndim; d++) shape[d] = d == dim ? n : a->shape[d];
  if (!same_shape(out, a->ndim, shape) || out->dtype != a->dtype) return -1;
  if (numel_of(a->ndim, shape) == 0) return 0;
  int64_t o[TD_MAX_DIMS] = {0}, s[TD_MAX_DIMS], bad = 0;
  do {
    for (int32_t d = 0; d < a->ndim; d++) s[d] = d == dim ? norm(idx[o[d]], a->shape[d]) : o[d];
    if (rd(out, o) != rd(a, s)) bad++;
  } while (next_index(a->ndim, shape, o));
  return bad;
}

static void test_index_select(void) {
  const int64_t shape[3] = {5, 4, 3};
  int64_t bad = 0, failed = 0;
  for (int di = 0; di < TD_NUM_DTYPES; di++)
    for (int lay = 0; lay < NUM_LAYOUTS; lay++)
      for (int32_t dim = -1; dim < 3; dim++) {
        const int32_t dtype = all_dtypes[di], d = dim < 0 ? dim + 3 : dim;
        td_tensor *a = make(3, shape, dtype, lay, di);
        int64_t idx[8];
        int64_t n = some_indices(shape[d], idx);
        for (int32_t it = 0; it < 2; it++) { /* int64, then int32 indices */
          td_tensor *index = index_of(it ? TD_INT32 : TD_INT64, n, idx);
          td_tensor *out = td_index_select(a, dim, index);
          if (!out) failed++;
          else bad += index_select_mismatches(a, d, idx, n, out) != 0;
          td_tensor_release(out);
          td_tensor_release(index);
        }
        td_tensor_release(a);
      }
  CHECK_EQ_I(failed, 0);
  CHECK_EQ_I(bad, 0);

  /* 1-D (a gather along the row), a 0-dim index, size-1 and 0-size dims. */
  const int64_t n1 = 9, idx1[5] = {8, 0, -9, 3, 3};
  td_tensor *a1 = make(1, &n1, TD_FLOAT32, SLICED, 3);
  td_tensor *i1 = index_of(TD_INT64, 5, idx1);
  td_tensor *o1 = td_index_select(a1, 0, i1);
  CHECK_EQ_I(index_select_mismatches(a1, 0, idx1, 5, o1), 0);
  td_tensor_release(o1);
  td_tensor i0;
  td_tensor_select(i1, 0, 3, &i0); /* 0-dim index 3: keeps the dim, size 1 */
  o1 = td_index_select(a1, 0, &i0);
  CHECK_EQ_I(index_select_mismatches(a1, 0, idx1 + 3, 1, o1), 0);
  td_tensor_release(o1);
  td_tensor scalar;
  td_tensor_select(a1, 0, 4, &scalar); /* 0-dim input: one index, 0-dim result */
  td_tensor_select(i1, 0, 2, &i0);     /* -9 is out of range for the 0-dim tensor ([1]) */
  CHECK(td_index_select(&scalar, 0, &i0) == NULL);
  CHECK_ERROR("index_select: index -9 is out of range for dim 0 of size 1");
  const int64_t zero_idx = -1;
  td_tensor *iz = index_of(TD_INT64, 1, &zero_idx);
  o1 = td_index_select(&scalar, -1, iz);
  CHECK(o1 && o1->ndim == 0 && rd(o1, NULL) == rd(&scalar, NULL));
  td_tensor_release(o1);
  CHECK(td_index_select(&scalar, 0, i1) == NULL);
  CHECK_ERROR("a 0-dim tensor takes exactly one index, got 5");
  td_tensor_release(iz);

  const int64_t s01[3] = {3, 1, 0}, s10[2] = {0, 4}, none = 0;
  td_tensor *e = make(3, s01, TD_INT16, CONTIGUOUS, 1);
  td_tensor *empty_idx = td_tensor_empty(1, &none, TD_INT64);
  const int64_t ix[2] = {0, -1};
  td_tensor *i2 = index_of(TD_INT64, 2, ix);
  o1 = td_index_select(e, 1, i2); /* picks from a size-1 dim, into a 0-size result */
  const int64_t want_e[3] = {3, 2, 0};
  CHECK(same_shape(o1, 3, want_e));
  td_tensor_release(o1);
  o1 = td_index_select(e, 0, empty_idx);
  const int64_t want_e0[3] = {0, 1, 0};
  CHECK(same_shape(o1, 3, want_e0));
  td_tensor_release(o1);
  td_tensor *f = make(2, s10, TD_FLOAT64, CONTIGUOUS, 1);
  o1 = td_index_select(f, 0, empty_idx);
  CHECK(same_shape(o1, 2, s10));
  td_tensor_release(o1);
  CHECK(td_index_select(f, 0, i2) == NULL);
  CHECK_ERROR("index_select: index 0 is out of range for dim 0 of size 0");
  td_tensor_release(f);
  td_tensor_release(e);
  td_tensor_release(empty_idx);

  /* Errors name the value, the dim, the size, the dtype. */
  const int64_t five[2] = {5, 4};
  td_tensor *b = make(2, five, TD_FLOAT32, CONTIGUOUS, 0);
  const int64_t bad_idx[3] = {1, 7, 9};
  td_tensor *ib = index_of(TD_INT64, 3, bad_idx);
  td_clear_error();
  CHECK(td_index_select(b, 0, ib) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EINDEX);
  CHECK_ERROR("index_select: index 7 is out of range for dim 0 of size 5");
  td_tensor_release(ib);
  const int64_t neg_idx[2] = {-5, -6};
  ib = index_of(TD_INT32, 2, neg_idx);
  CHECK(td_index_select(b, 0, ib) == NULL);
  CHECK_ERROR("index_select: index -6 is out of range for dim 0 of size 5");
  td_tensor_release(ib);
  td_tensor *fidx = td_tensor_full(1, &n1, TD_FLOAT32, 0);
  CHECK(td_index_select(b, 0, fidx) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EDTYPE);
  CHECK_ERROR("index_select: index dtype float32 is not int64 or int32");
  td_tensor_release(fidx);
  td_tensor *bidx = td_tensor_full(1, &n1, TD_BOOL, 0);
  CHECK(td_index_select(b, 0, bidx) == NULL);
  CHECK_ERROR("index dtype bool is not int64 or int32");
  td_tensor_release(bidx);
  CHECK(td_index_select(b, 2, i2) == NULL);
  CHECK_ERROR("index_select: dim 2 is out of range for a 2-dim tensor");
  CHECK(td_index_select(b, -3, i2) == NULL);
  CHECK_ERROR("dim -3 is out of range");
  td_tensor *i2d = td_tensor_full(2, five, TD_INT64, 0);
  CHECK(td_index_select(b, 0, i2d) == NULL);
  CHECK_ERROR("index_select: index must be 0-D or 1-D, got shape [5, 4]");
  td_tensor_release(i2d);
  CHECK(td_index_select(NULL, 0, i2) == NULL);
  CHECK_ERROR("index_select: the tensor is NULL");
  CHECK(td_index_select(b, 0, NULL) == NULL);
  td_tensor_release(b);
  td_tensor_release(i2);
  td_tensor_release(i1);
  td_tensor_release(a1);
}

/* ---- gather ------------------------------------------------------------------------- */

/* An int64 index of shape whose values cover [-size, size) (size >= 1). */
static td_tensor *index_tensor(int32_t ndim, const int64_t *shape, int64_t size, int layout,
                               int32_t dtype) {
  td_tensor *t = make(ndim, shape, TD_INT64, layout == EXPANDED ? CONTIGUOUS : layout, 0);
  if (dtype != TD_INT64) {
    td_tensor *c = td_tensor_to_dtype(t, dtype);
    td_tensor_release(t);
    t = c;
  }
  int64_t i[TD_MAX_DIMS] = {0}, k = 0;
  if (numel_of(ndim, shape) > 0) do {
      wr(t, i, (double)((k * 7 + 3) % (2 * size) - size));
      k++;
    } while (next_index(ndim, shape, i));
  return t;
}

static int64_t gather_mismatches(const td_tensor *a, int32_t dim, const td_tensor *index,
                                 const td_tensor *out) {
  if (!same_shape(out, index->ndim, index->shape) || out->dtype != a->dtype) return -1;
  if (td_tensor_numel(index) == 0) return 0;
  int64_t o[TD_MAX_DIMS] = {0}, s[TD_MAX_DIMS], bad = 0;
  do {
    for (int32_t d = 0; d < a->ndim; d++)
      s[d] = d == dim ? norm((int64_t)rd(index, o), a->shape[d]) : o[d];
    if (rd(out, o) != rd(a, s)) bad++;
  } while (next_index(index->ndim, index->shape, o));
  return bad;
}

static void test_gather(void) {
  const int64_t shape[3] = {4, 5, 3};
  int64_t bad = 0, failed = 0;
  for (int di = 0; di < TD_NUM_DTYPES; di++)
    for (int lay = 0; lay < NUM_LAYOUTS; lay++)
      for (int32_t dim = 0; dim < 3; dim++) {
        const int32_t dtype = all_dtypes[di];
        td_tensor *a = make(3, shape, dtype, lay, di + 1);
        int64_t ishape[3] = {3, 4, 2};
        ishape[dim] = 7; /* longer than a along dim: fine */
        td_tensor *index = index_tensor(3, ishape, shape[dim], (lay + 1) % NUM_LAYOUTS,
                                        di % 2 ? TD_INT32 : TD_INT64);
        td_tensor *out = td_gather(a, dim, index);
        if (!out) failed++;
        else bad += gather_mismatches(a, dim, index, out) != 0;
        td_tensor_release(out);
        td_tensor_release(index);
        td_tensor_release(a);
      }
  CHECK_EQ_I(failed, 0);
  CHECK_EQ_I(bad, 0);

  /* 0-dim, 1-D and empty. */
  const int64_t n = 6;
  td_tensor *a = make(1, &n, TD_FLOAT16, CONTIGUOUS, 2);
  td_tensor s, is;
  td_tensor *index = index_tensor(1, &n, n, CONTIGUOUS, TD_INT64);
  td_tensor *out = td_gather(a, -1, index);
  CHECK_EQ_I(gather_mismatches(a, 0, index, out), 0);
  td_tensor_release(out);
  td_tensor_select(a, 0, 2, &s);
  td_tensor_select(index, 0, 0, &is);
  CHECK(td_gather(&s, 0, &is) == NULL); /* index value -3 for the [1] of a 0-dim tensor */
  CHECK_ERROR("gather: index -3 is out of range for dim 0 of size 1");
  const int64_t zero = 0;
  td_tensor *iz = td_tensor_full(0, NULL, TD_INT64, -1);
  out = td_gather(&s, 0, iz);
  CHECK(out && out->ndim == 0 && rd(out, NULL) == rd(&s, NULL));
  td_tensor_release(out);
  td_tensor_release(iz);
  td_tensor *empty = td_tensor_empty(1, &zero, TD_INT64);
  out = td_gather(a, 0, empty);
  CHECK(same_shape(out, 1, &zero));
  td_tensor_release(out);
  td_tensor_release(empty);

  /* Errors. */
  const int64_t big[3] = {5, 2, 3}, two[2] = {4, 5};
  td_tensor *b = make(3, shape, TD_INT32, CONTIGUOUS, 0);
  td_tensor *ib = td_tensor_full(3, big, TD_INT64, 0);
  CHECK(td_gather(b, 1, ib) == NULL);
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  CHECK_ERROR("gather: index shape [5, 2, 3] is larger than input shape [4, 5, 3] in dim 0");
  td_tensor_release(ib);
  ib = td_tensor_full(2, two, TD_INT64, 0);
  CHECK(td_gather(b, 1, ib) == NULL);
  CHECK_ERROR("gather: index has 2 dims but the input has 3");
  td_tensor_release(ib);
  ib = td_tensor_full(3, shape, TD_INT64, 5);
  CHECK(td_gather(b, 1, ib) == NULL);
  CHECK_ERROR("gather: index 5 is out of range for dim 1 of size 5");
  CHECK(td_gather(b, 3, ib) == NULL);
  CHECK_ERROR("gather: dim 3 is out of range");
  td_tensor_release(ib);
  ib = td_tensor_full(3, shape, TD_INT16, 0);
  CHECK(td_gather(b, 1, ib) == NULL);
  CHECK_ERROR("gather: index dtype int16 is not int64 or int32");
  td_tensor_release(ib);
  td_tensor_release(b);
  td_tensor_release(index);
  td_tensor_release(a);
}

/* ---- scatter_ ----------------------------------------------------------------------- */

static void test_scatter(void) {
  const int64_t shape[3] = {4, 5, 3}, sshape[3] = {7, 6, 6};
  int64_t bad = 0, failed = 0;
  for (int di = 0; di < TD_NUM_DTYPES; di++)
    for (int lay = 0; lay < EXPANDED; lay++) /* expanded targets are refused: below */
      for (int32_t dim = 0; dim < 3; dim++) {
        const int32_t dtype = all_dtypes[di];
        td_tensor *a = make(3, shape, dtype, lay, di);
        td_tensor *ref = td_tensor_clone(a);
        td_tensor *src = make(3, sshape, di % 3 ? dtype : TD_FLOAT64, (lay + 1) % NUM_LAYOUTS, 5);
        int64_t ishape[3] = {3, 4, 2};
        ishape[dim] = 6; /* more than the dim's size: duplicates, applied in order */
        td_tensor *index = index_tensor(3, ishape, shape[dim], lay, di % 2 ? TD_INT32 : TD_INT64);
        if (td_scatter_(a, dim, index, src) != TD_OK) failed++;
        int64_t o[TD_MAX_DIMS] = {0}, t[TD_MAX_DIMS];
        do { /* row-major order: along dim, later positions win */
          for (int32_t d = 0; d < 3; d++) t[d] = d == dim ? norm((int64_t)rd(index, o), shape[d]) : o[d];
          wr(ref, t, as_dtype(dtype, rd(src, o)));
        } while (next_index(3, ishape, o));
        int64_t i[TD_MAX_DIMS] = {0};
        do bad += rd(a, i) != rd(ref, i);
        while (next_index(3, shape, i));
        td_tensor_release(index);
        td_tensor_release(src);
        td_tensor_release(ref);
        td_tensor_release(a);
      }
  CHECK_EQ_I(failed, 0);
  CHECK_EQ_I(bad, 0);

  /* Empty index: nothing happens; a source sharing the target's storage is read first. */
  const int64_t n = 5, zero = 0, iv[5] = {4, 3, 2, 1, 0};
  td_tensor *a = make(1, &n, TD_INT64, CONTIGUOUS, 0);
  td_tensor *before = td_tensor_clone(a);
  td_tensor *empty = td_tensor_empty(1, &zero, TD_INT64);
  CHECK_EQ_I(td_scatter_(a, 0, empty, a), TD_OK);
  CHECK(same_bytes(a, before));
  td_tensor *rev = index_of(TD_INT64, 5, iv);
  CHECK_EQ_I(td_scatter_(a, 0, rev, a), TD_OK); /* a reversed, not half-overwritten */
  int64_t bad_rev = 0;
  for (int64_t k = 0; k < n; k++) {
    int64_t r = n - 1 - k;
    bad_rev += rd(a, &k) != rd(before, &r);
  }
  CHECK_EQ_I(bad_rev, 0);

  /* Errors: shapes, dims, values, read-only, broadcast targets. */
  const int64_t s2[2] = {2, 5}, s3[2] = {3, 2}, s22[2] = {2, 2};
  td_tensor *m = make(2, s2, TD_FLOAT32, CONTIGUOUS, 0);
  td_tensor *src = make(2, s22, TD_FLOAT32, CONTIGUOUS, 0);
  td_tensor *i3 = td_tensor_full(2, s3, TD_INT64, 0);
  CHECK_EQ_I(td_scatter_(m, 1, i3, src), TD_ESHAPE);
  CHECK_ERROR("scatter_: index shape [3, 2] must be no larger than the tensor's [2, 5] apart from "
              "dim 1, and no larger than the source's [2, 2] (dim 0 differs)");
  td_tensor *i1 = td_tensor_full(1, &n, TD_INT64, 0);
  CHECK_EQ_I(td_scatter_(m, 1, i1, src), TD_ESHAPE);
  CHECK_ERROR("scatter_: index has 1 dims but the tensor has 2");
  td_tensor *i22 = td_tensor_full(2, s22, TD_INT64, -6);
  CHECK_EQ_I(td_scatter_(m, 1, i22, src), TD_EINDEX);
  CHECK_ERROR("scatter_: index -6 is out of range for dim 1 of size 5");
  td_tensor *f22 = td_tensor_full(2, s22, TD_FLOAT64, 0);
  CHECK_EQ_I(td_scatter_(m, 1, f22, src), TD_EDTYPE);
  CHECK_ERROR("scatter_: index dtype float64 is not int64 or int32");
  td_tensor ex;
  td_tensor *row = make(1, &n, TD_FLOAT32, CONTIGUOUS, 0);
  td_tensor_expand(row, 2, s2, &ex);
  td_tensor_fill_(i22, 0);
  CHECK_EQ_I(td_scatter_(&ex, 1, i22, src), TD_EINVAL);
  CHECK_ERROR("scatter_: the tensor of shape [2, 5] is broadcast along dim 0");
  ro_file ro;
  CHECK(ro_open(&ro, 5));
  if (ro.t) {
    td_tensor *src5 = td_tensor_full(1, &n, TD_FLOAT32, 9);
    CHECK_EQ_I(td_scatter_(ro.t, 0, rev, src5), TD_EREADONLY);
    CHECK_ERROR("scatter_: the tensor is read-only");
    int64_t k = 1;
    CHECK(rd(ro.t, &k) == 1);
    td_tensor_release(src5);
  }
  ro_close(&ro);
  CHECK_EQ_I(td_scatter_(NULL, 0, rev, a), TD_EINVAL);
  CHECK_EQ_I(td_scatter_(a, 0, rev, NULL), TD_EINVAL);
  CHECK_ERROR("scatter_: the source is NULL");
  td_tensor_release(row);
  td_tensor_release(f22);
  td_tensor_release(i22);
  td_tensor_release(i1);
  td_tensor_release(i3);
  td_tensor_release(src);
  td_tensor_release(m);
  td_tensor_release(rev);
  td_tensor_release(empty);
  td_tensor_release(before);
  td_tensor_release(a);
}

/* ---- index_add_ and index_put_ ------------------------------------------------------ */

/* The expected a after writing (add: adding) src's slices i at index[i] along dim, in
 * increasing i; ref starts as a copy of a. */
static void index_write_ref(td_tensor *ref, int32_t dim, const int64_t *idx, int64_t n,
                            const td_tensor *src, bool add) {
  int64_t shape[TD_MAX_DIMS];
  for (int32_t d = 0; d < ref->ndim; d++) shape[d] = d == dim ? n : ref->shape[d];
  if (numel_of(ref->ndim, shape) == 0) return;
  for (int64_t i = 0; i < n; i++) {
    int64_t o[TD_MAX_DIMS] = {0}, t[TD_MAX_DIMS];
    do {
      if (o[dim] != i) continue;
      for (int32_t d = 0; d < ref->ndim; d++) t[d] = d == dim ? norm(idx[i], ref->shape[d]) : o[d];
      double v = as_dtype(ref->dtype, rd(src, o));
      if (add) v = ref->dtype == TD_BOOL ? (rd(ref, t) != 0 || v != 0) : rd(ref, t) + v;
      wr(ref, t, v);
    } while (next_index(ref->ndim, shape, o));
  }
}

static int64_t diff_count(const td_tensor *a, const td_tensor *b) {
  if (!same_shape(b, a->ndim, a->shape)) return -1;
  if (td_tensor_numel(a) == 0) return 0;
  int64_t i[TD_MAX_DIMS] = {0}, bad = 0;
  do bad += rd(a, i) != rd(b, i);
  while (next_index(a->ndim, a->shape, i));
  return bad;
}

static void test_index_add_put(void) {
  const int64_t shape[3] = {5, 4, 3};
  int64_t bad_add = 0, bad_put = 0, failed = 0;
  for (int di = 0; di < TD_NUM_DTYPES; di++)
    for (int lay = 0; lay < EXPANDED; lay++)
      for (int32_t dim = 0; dim < 3; dim++) {
        const int32_t dtype = all_dtypes[di];
        int64_t idx[8];
        int64_t n = some_indices(shape[dim], idx), sshape[3] = {5, 4, 3};
        sshape[dim] = n;
        td_tensor *index = index_of(di % 2 ? TD_INT32 : TD_INT64, n, idx);
        /* index_add_: the source has the selection's shape, in another layout */
        td_tensor *a = make(3, shape, dtype, lay, di);
        td_tensor *ref = td_tensor_clone(a);
        td_tensor *src = make(3, sshape, dtype, (lay * 3 + dim) % NUM_LAYOUTS, 4);
        if (td_index_add_(a, dim, index, src) != TD_OK) failed++;
        index_write_ref(ref, dim, idx, n, src, true);
        bad_add += diff_count(a, ref) != 0;
        td_tensor_release(src);
        td_tensor_release(ref);
        td_tensor_release(a);
        /* index_put_: full-shape, broadcast row and 0-dim values, of another dtype */
        for (int v = 0; v < 3; v++) {
          a = make(3, shape, dtype, lay, di);
          ref = td_tensor_clone(a);
          int64_t vshape[3] = {sshape[0], sshape[1], sshape[2]};
          if (v == 1) vshape[0] = vshape[1] = 1;
          td_tensor *val = make(v == 1 ? 2 : v == 2 ? 0 : 3, v == 1 ? vshape + 1 : vshape,
                                v == 0 ? dtype : TD_FLOAT64, lay, 7);
          td_tensor valx;
          td_tensor_expand(val, 3, sshape, &valx);
          if (td_index_put_(a, dim, index, val) != TD_OK) failed++;
          index_write_ref(ref, dim, idx, n, &valx, false);
          bad_put += diff_count(a, ref) != 0;
          td_tensor_release(val);
          td_tensor_release(ref);
          td_tensor_release(a);
        }
        td_tensor_release(index);
      }
  CHECK_EQ_I(failed, 0);
  CHECK_EQ_I(bad_add, 0);
  CHECK_EQ_I(bad_put, 0);

  /* 0-dim targets, empty indices, 0-size dims. */
  td_tensor *s = td_tensor_full(0, NULL, TD_FLOAT32, 2);
  td_tensor *i0 = td_tensor_full(0, NULL, TD_INT64, -1);
  td_tensor *v = td_tensor_full(0, NULL, TD_FLOAT32, 5);
  CHECK_EQ_I(td_index_add_(s, 0, i0, v), TD_OK);
  CHECK(rd(s, NULL) == 7);
  CHECK_EQ_I(td_index_put_(s, -1, i0, v), TD_OK);
  CHECK(rd(s, NULL) == 5);
  const int64_t zero = 0, s40[2] = {4, 0}, s03[2] = {0, 3};
  td_tensor *empty = td_tensor_empty(1, &zero, TD_INT64);
  td_tensor *e = td_tensor_full(2, s40, TD_INT8, 0);
  td_tensor *ev = td_tensor_full(2, s40, TD_INT8, 0);
  const int64_t all4[4] = {0, 1, 2, 3};
  td_tensor *i4 = index_of(TD_INT64, 4, all4);
  CHECK_EQ_I(td_index_add_(e, 0, i4, ev), TD_OK);
  CHECK_EQ_I(td_index_put_(e, 0, i4, v), TD_OK);
  td_tensor *src03 = td_tensor_full(2, s03, TD_FLOAT64, 1);
  td_tensor *m2 = td_tensor_full(2, (int64_t[2]){4, 3}, TD_FLOAT64, 1);
  CHECK_EQ_I(td_index_add_(m2, 0, empty, src03), TD_OK);
  CHECK_EQ_I(td_index_put_(m2, 0, empty, v), TD_OK);
  int64_t k00[2] = {0, 0};
  CHECK(rd(m2, k00) == 1);

  /* Errors. */
  td_tensor *src43 = td_tensor_full(2, (int64_t[2]){3, 3}, TD_FLOAT64, 1);
  CHECK_EQ_I(td_index_add_(m2, 0, i4, src43), TD_ESHAPE);
  CHECK_ERROR("index_add_: source shape [3, 3] does not match tensor shape [4, 3] with dim 0 of "
              "size 4");
  CHECK_EQ_I(td_index_put_(m2, 1, i4, src43), TD_ESHAPE);
  CHECK_ERROR("index_put_: value shape [3, 3] does not broadcast to the selection's shape [4, 4]");
  CHECK_EQ_I(td_index_put_(m2, 1, i4, v), TD_EINDEX);
  CHECK_ERROR("index_put_: index 3 is out of range for dim 1 of size 3");
  CHECK_EQ_I(td_index_add_(m2, 2, i4, src43), TD_EINDEX);
  CHECK_ERROR("index_add_: dim 2 is out of range for a 2-dim tensor");
  td_tensor *f4 = td_tensor_full(1, (int64_t[1]){4}, TD_FLOAT32, 0);
  CHECK_EQ_I(td_index_put_(m2, 0, f4, v), TD_EDTYPE);
  CHECK_ERROR("index_put_: index dtype float32 is not int64 or int32");
  CHECK_EQ_I(td_index_put_(s, 0, i4, v), TD_ESHAPE);
  CHECK_ERROR("index_put_: a 0-dim tensor takes exactly one index, got 4");
  td_tensor row, ex;
  td_tensor_select(m2, 0, 0, &row);
  td_tensor_expand(&row, 2, (int64_t[2]){4, 3}, &ex);
  CHECK_EQ_I(td_index_put_(&ex, 0, i4, v), TD_EINVAL);
  CHECK_ERROR("index_put_: the tensor of shape [4, 3] is broadcast along dim 0");
  ro_file ro;
  CHECK(ro_open(&ro, 6));
  if (ro.t) {
    const int64_t one = 1;
    td_tensor *i1 = index_of(TD_INT64, 1, &one);
    td_tensor *s1 = td_tensor_full(1, &one, TD_FLOAT32, 3);
    CHECK_EQ_I(td_index_add_(ro.t, 0, i1, s1), TD_EREADONLY);
    CHECK_ERROR("index_add_: the tensor is read-only");
    CHECK_EQ_I(td_index_put_(ro.t, 0, i1, s1), TD_EREADONLY);
    CHECK_ERROR("index_put_: the tensor is read-only");
    CHECK(rd(ro.t, &one) == 1);
    td_tensor_release(s1);
    td_tensor_release(i1);
  }
  ro_close(&ro);
  CHECK_EQ_I(td_index_add_(m2, 0, NULL, v), TD_EINVAL);
  CHECK_ERROR("index_add_: the index is NULL");
  CHECK_EQ_I(td_index_put_(m2, 0, i4, NULL), TD_EINVAL);
  CHECK_ERROR("index_put_: the value is NULL");
  td_tensor_release(f4);
  td_tensor_release(src43);
  td_tensor_release(m2);
  td_tensor_release(src03);
  td_tensor_release(i4);
  td_tensor_release(ev);
  td_tensor_release(e);
  td_tensor_release(empty);
  td_tensor_release(v);
  td_tensor_release(i0);
  td_tensor_release(s);
}

/* ---- masked_select and nonzero ------------------------------------------------------- */

static void test_masked_select(void) {
  struct {
    int32_t and, mnd;
    int64_t ashape[3], mshape[3];
  } cases[] = {
      {3, 3, {4, 5, 3}, {4, 5, 3}}, {3, 2, {4, 5, 3}, {5, 1}}, {2, 3, {5, 1}, {4, 5, 3}},
      {3, 1, {4, 5, 3}, {3}},       {3, 0, {4, 5, 3}, {0}},   {1, 1, {0}, {1}},
      {3, 3, {4, 1, 3}, {4, 1, 3}},
  };
  int64_t bad = 0, failed = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int di = 0; di < TD_NUM_DTYPES; di++)
      for (int lay = 0; lay < NUM_LAYOUTS; lay++) {
        td_tensor *a = make(cases[c].and, cases[c].ashape, all_dtypes[di], lay, di);
        td_tensor *mask = make(cases[c].mnd, cases[c].mshape, TD_BOOL, (lay + c) % NUM_LAYOUTS,
                               (int)c);
        td_tensor *out = td_masked_select(a, mask);
        if (!out) {
          failed++;
        } else {
          int32_t nd = cases[c].and > cases[c].mnd ? cases[c].and : cases[c].mnd;
          int64_t shape[3];
          td_tensor ax, mx;
          for (int32_t d = 0; d < nd; d++) {
            int32_t ia = d - (nd - cases[c].and), im = d - (nd - cases[c].mnd);
            int64_t sa = ia >= 0 ? cases[c].ashape[ia] : 1, sm = im >= 0 ? cases[c].mshape[im] : 1;
            shape[d] = sa == 1 ? sm : sa;
          }
          td_tensor_expand(a, nd, shape, &ax);
          td_tensor_expand(mask, nd, shape, &mx);
          int64_t i[3] = {0, 0, 0}, k = 0;
          if (numel_of(nd, shape) > 0) do {
              if (rd(&mx, i) == 0) continue;
              bad += k >= out->shape[0] || rd(out, &k) != rd(&ax, i);
              k++;
            } while (next_index(nd, shape, i));
          bad += out->ndim != 1 || k != out->shape[0] || out->dtype != a->dtype;
        }
        td_tensor_release(out);
        td_tensor_release(mask);
        td_tensor_release(a);
      }
  CHECK_EQ_I(failed, 0);
  CHECK_EQ_I(bad, 0);

  const int64_t s2[2] = {2, 3}, s3[1] = {2};
  td_tensor *a = make(2, s2, TD_FLOAT32, CONTIGUOUS, 0);
  td_tensor *m = td_tensor_full(1, s3, TD_BOOL, 1);
  CHECK(td_masked_select(a, m) == NULL);
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  CHECK_ERROR("masked_select: shapes [2, 3] and [2] do not broadcast");
  td_tensor *mi = td_tensor_full(2, s2, TD_UINT8, 1);
  CHECK(td_masked_select(a, mi) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EDTYPE);
  CHECK_ERROR("masked_select: mask dtype uint8 is not bool");
  CHECK(td_masked_select(a, NULL) == NULL);
  CHECK_ERROR("masked_select: the mask is NULL");
  td_tensor_release(mi);
  td_tensor_release(m);
  td_tensor_release(a);
}

static void test_nonzero(void) {
  const int64_t shape[3] = {4, 5, 3};
  int64_t bad = 0, failed = 0;
  for (int di = 0; di < TD_NUM_DTYPES; di++)
    for (int lay = 0; lay < NUM_LAYOUTS; lay++) {
      td_tensor *a = make(3, shape, all_dtypes[di], lay, di);
      td_tensor *out = td_nonzero(a);
      if (!out) {
        failed++;
      } else {
        int64_t i[3] = {0, 0, 0}, k = 0;
        do {
          if (rd(a, i) == 0) continue;
          for (int32_t d = 0; d < 3; d++) {
            int64_t at[2] = {k, d};
            bad += k >= out->shape[0] || rd(out, at) != (double)i[d];
          }
          k++;
        } while (next_index(3, shape, i));
        bad += out->ndim != 2 || out->shape[0] != k || out->shape[1] != 3 || out->dtype != TD_INT64;
      }
      td_tensor_release(out);
      td_tensor_release(a);
    }
  CHECK_EQ_I(failed, 0);
  CHECK_EQ_I(bad, 0);

  /* Floating zeros and NaN: -0 is zero, NaN is not, for every floating dtype. */
  const int32_t floats[4] = {TD_FLOAT16, TD_BFLOAT16, TD_FLOAT32, TD_FLOAT64};
  const double vals[5] = {0.0, -0.0, NAN, 1e-3, -INFINITY};
  const int64_t five = 5;
  for (int f = 0; f < 4; f++) {
    td_tensor *t = td_tensor_empty(1, &five, floats[f]);
    for (int64_t k = 0; k < 5; k++) wr(t, &k, vals[k]);
    td_tensor *nz = td_nonzero(t);
    int64_t p0[2] = {0, 0}, p1[2] = {1, 0}, p2[2] = {2, 0};
    CHECK(nz && nz->shape[0] == 3 && rd(nz, p0) == 2 && rd(nz, p1) == 3 && rd(nz, p2) == 4);
    td_tensor_release(nz);
    td_tensor_release(t);
  }
  /* 0-dim: [count, 0]; 0-size: [0, ndim]. */
  td_tensor *s = td_tensor_full(0, NULL, TD_INT32, 3);
  td_tensor *nz = td_nonzero(s);
  CHECK(nz && nz->ndim == 2 && nz->shape[0] == 1 && nz->shape[1] == 0);
  td_tensor_release(nz);
  td_tensor_fill_(s, 0);
  nz = td_nonzero(s);
  CHECK(nz && nz->shape[0] == 0 && nz->shape[1] == 0);
  td_tensor_release(nz);
  const int64_t s0[2] = {3, 0};
  td_tensor *e = td_tensor_empty(2, s0, TD_FLOAT32);
  nz = td_nonzero(e);
  CHECK(nz && nz->shape[0] == 0 && nz->shape[1] == 2);
  td_tensor_release(nz);
  td_tensor_release(e);
  td_tensor_release(s);
  CHECK(td_nonzero(NULL) == NULL);
  CHECK_ERROR("nonzero: the tensor is NULL");
}

/* ---- mask_rows and mask_rows_put_ ---------------------------------------------------- */

static void test_mask_rows(void) {
  const int64_t shape[3] = {6, 4, 3};
  int64_t bad = 0, bad_put = 0, failed = 0;
  for (int di = 0; di < TD_NUM_DTYPES; di++)
    for (int lay = 0; lay < NUM_LAYOUTS; lay++)
      for (int32_t k = 0; k <= 3; k++) {
        const int32_t dtype = all_dtypes[di];
        td_tensor *a = make(3, shape, dtype, lay, di);
        td_tensor *mask = make(k, shape, TD_BOOL, (lay + k) % NUM_LAYOUTS, k);
        td_tensor *out = td_mask_rows(a, mask);
        int64_t rows = numel_of(k, shape), rest = numel_of(3 - k, shape + k), count = 0;
        if (!out) {
          failed++;
        } else { /* row r of a (row-major over the mask) lands at out row count */
          int64_t mi[3] = {0, 0, 0};
          for (int64_t r = 0; r < rows; r++, next_index(k, shape, mi)) {
            if (!rd(mask, mi)) continue;
            int64_t ri[3] = {0, 0, 0};
            for (int64_t e = 0; e < rest; e++, next_index(3 - k, shape + k, ri)) {
              int64_t ai[3], oi[4] = {count};
              for (int32_t d = 0; d < 3; d++) ai[d] = d < k ? mi[d] : ri[d - k];
              for (int32_t d = 0; d < 3 - k; d++) oi[d + 1] = ri[d];
              bad += rd(out, oi) != rd(a, ai);
            }
            count++;
          }
          bad += out->ndim != 4 - k || out->shape[0] != count || out->dtype != dtype;
        }
        td_tensor_release(out);
        if (lay != EXPANDED) { /* put: a full value, then a broadcast row */
          for (int v = 0; v < 2; v++) {
            td_tensor *ref = td_tensor_clone(a);
            int64_t vshape[4] = {count};
            for (int32_t d = 0; d < 3 - k; d++) vshape[d + 1] = shape[k + d];
            td_tensor *val = v == 0 ? make(4 - k, vshape, dtype, (lay + 1) % NUM_LAYOUTS, 9)
                                    : make(3 - k, vshape + 1, TD_FLOAT32, CONTIGUOUS, 9);
            td_tensor valx;
            td_tensor_expand(val, 4 - k, vshape, &valx);
            if (td_mask_rows_put_(a, mask, val) != TD_OK) failed++;
            int64_t mi[3] = {0, 0, 0}, c = 0;
            for (int64_t r = 0; r < rows; r++, next_index(k, shape, mi)) {
              if (!rd(mask, mi)) continue;
              int64_t ri[3] = {0, 0, 0};
              for (int64_t e = 0; e < rest; e++, next_index(3 - k, shape + k, ri)) {
                int64_t ai[3], vi[4] = {c};
                for (int32_t d = 0; d < 3; d++) ai[d] = d < k ? mi[d] : ri[d - k];
                for (int32_t d = 0; d < 3 - k; d++) vi[d + 1] = ri[d];
                wr(ref, ai, as_dtype(dtype, rd(&valx, vi)));
              }
              c++;
            }
            bad_put += diff_count(a, ref) != 0;
            td_tensor_release(val);
            td_tensor_release(ref);
          }
        }
        td_tensor_release(mask);
        td_tensor_release(a);
      }
  CHECK_EQ_I(failed, 0);
  CHECK_EQ_I(bad, 0);
  CHECK_EQ_I(bad_put, 0);

  /* A 0-dim mask: a new leading dim of 1 or 0; all-false masks; 0-size rows. */
  const int64_t s2[2] = {3, 2}, s0[2] = {0, 2}, three = 3;
  td_tensor *a = make(2, s2, TD_INT64, CONTIGUOUS, 0);
  td_tensor *yes = td_tensor_full(0, NULL, TD_BOOL, 1), *no = td_tensor_full(0, NULL, TD_BOOL, 0);
  td_tensor *out = td_mask_rows(a, yes);
  const int64_t want1[3] = {1, 3, 2}, want0[3] = {0, 3, 2}, want_e[2] = {0, 2};
  CHECK(same_shape(out, 3, want1));
  td_tensor_release(out);
  out = td_mask_rows(a, no);
  CHECK(same_shape(out, 3, want0));
  td_tensor_release(out);
  td_tensor *none = td_tensor_full(1, &three, TD_BOOL, 0);
  out = td_mask_rows(a, none);
  CHECK(same_shape(out, 2, want_e));
  td_tensor_release(out);
  td_tensor *e = td_tensor_empty(2, s0, TD_FLOAT32);
  td_tensor *m0 = td_tensor_empty(1, s0, TD_BOOL);
  out = td_mask_rows(e, m0);
  CHECK(same_shape(out, 2, want_e));
  td_tensor_release(out);
  td_tensor *v0 = td_tensor_full(0, NULL, TD_FLOAT32, 1);
  CHECK_EQ_I(td_mask_rows_put_(e, m0, v0), TD_OK);

  /* Errors. */
  const int64_t s32[2] = {3, 3};
  td_tensor *m33 = td_tensor_full(2, s32, TD_BOOL, 1);
  CHECK(td_mask_rows(a, m33) == NULL);
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  CHECK_ERROR("mask_rows: mask shape [3, 3] does not match the leading dims of tensor shape [3, 2]");
  td_tensor *m3 = td_tensor_full(1, &three, TD_INT64, 1);
  CHECK(td_mask_rows(a, m3) == NULL);
  CHECK_ERROR("mask_rows: mask dtype int64 is not bool");
  CHECK_EQ_I(td_mask_rows_put_(a, m3, v0), TD_EDTYPE);
  CHECK_ERROR("mask_rows_put_: mask dtype int64 is not bool");
  td_tensor *all = td_tensor_full(1, &three, TD_BOOL, 1);
  td_tensor *v3 = td_tensor_full(1, &three, TD_FLOAT32, 1);
  CHECK_EQ_I(td_mask_rows_put_(a, all, v3), TD_ESHAPE);
  CHECK_ERROR("mask_rows_put_: value shape [3] does not broadcast to the selected rows' shape [3, 2]");
  CHECK_EQ_I(td_mask_rows_put_(a, m33, v3), TD_ESHAPE);
  CHECK_ERROR("mask_rows_put_: mask shape [3, 3] does not match");
  ro_file ro;
  CHECK(ro_open(&ro, 3));
  if (ro.t) {
    CHECK_EQ_I(td_mask_rows_put_(ro.t, all, v0), TD_EREADONLY);
    CHECK_ERROR("mask_rows_put_: the tensor is read-only");
    int64_t k = 2;
    CHECK(rd(ro.t, &k) == 2);
    out = td_mask_rows(ro.t, all); /* reading is fine */
    CHECK(out && rd(out, &k) == 2);
    td_tensor_release(out);
  }
  ro_close(&ro);
  CHECK(td_mask_rows(NULL, all) == NULL);
  CHECK_EQ_I(td_mask_rows_put_(a, all, NULL), TD_EINVAL);
  CHECK_ERROR("mask_rows_put_: the value is NULL");
  td_tensor_release(v3);
  td_tensor_release(all);
  td_tensor_release(m3);
  td_tensor_release(m33);
  td_tensor_release(v0);
  td_tensor_release(m0);
  td_tensor_release(e);
  td_tensor_release(none);
  td_tensor_release(no);
  td_tensor_release(yes);
  td_tensor_release(a);
}

/* ---- thread counts ------------------------------------------------------------------ */

/* Every op on inputs of several TD_GRAIN chunks, with 1 and then 3 threads: the same
 * bytes. index_add_ gets float values whose sums depend on the order. */
typedef struct results {
  td_tensor *t[10];
} results;

static results run_all(const td_tensor *a, const td_tensor *index, const td_tensor *index2,
                       const td_tensor *rowmask, const td_tensor *mask, const td_tensor *src) {
  results r;
  r.t[0] = td_index_select(a, 0, index);
  r.t[1] = td_index_select(a, 1, index2);
  r.t[2] = td_mask_rows(a, rowmask);
  r.t[3] = td_masked_select(a, mask);
  r.t[4] = td_nonzero(mask);
  r.t[5] = td_tensor_clone(a);
  td_index_add_(r.t[5], 0, index, src);
  r.t[6] = td_tensor_clone(a);
  td_index_put_(r.t[6], 0, index, src);
  r.t[7] = td_tensor_clone(a);
  td_mask_rows_put_(r.t[7], rowmask, r.t[2]);
  td_tensor *gi = td_tensor_empty(a->ndim, a->shape, TD_INT64);
  int64_t i[2] = {0, 0}, k = 0;
  do wr(gi, i, (double)((k++ * 7919) % a->shape[1]));
  while (next_index(2, a->shape, i));
  r.t[8] = td_gather(a, 1, gi);
  r.t[9] = td_tensor_clone(a);
  td_scatter_(r.t[9], 1, gi, a);
  td_tensor_release(gi);
  return r;
}

static void test_threads(void) {
  const int64_t shape[2] = {3000, 40}, n = 5000;
  td_tensor *a = td_tensor_empty(2, shape, TD_FLOAT32);
  int64_t i[2] = {0, 0}, k = 0;
  do wr(a, i, 0.1 * (double)((k++ * 31) % 1000));
  while (next_index(2, shape, i));
  td_tensor *index = td_tensor_empty(1, &n, TD_INT64);
  for (int64_t j = 0; j < n; j++) wr(index, &j, (double)((j * 7919) % 3000 - 1500));
  const int64_t n2 = 100;
  td_tensor *index2 = td_tensor_empty(1, &n2, TD_INT32);
  for (int64_t j = 0; j < n2; j++) wr(index2, &j, (double)((j * 13) % 40));
  td_tensor *rowmask = td_tensor_empty(1, shape, TD_BOOL);
  for (int64_t j = 0; j < shape[0]; j++) wr(rowmask, &j, (double)(j % 7 < 3));
  td_tensor *mask = td_tensor_empty(2, shape, TD_BOOL);
  k = 0;
  do wr(mask, i, (double)((k++ * 13) % 5 < 2));
  while (next_index(2, shape, i));
  const int64_t sshape[2] = {n, 40};
  td_tensor *src = td_tensor_empty(2, sshape, TD_FLOAT32);
  k = 0;
  do wr(src, i, 0.01 * (double)(k++ % 977));
  while (next_index(2, sshape, i));

  int32_t saved = td_get_num_threads();
  td_set_num_threads(1);
  results one = run_all(a, index, index2, rowmask, mask, src);
  td_set_num_threads(3);
  results three = run_all(a, index, index2, rowmask, mask, src);
  td_set_num_threads(saved);
  int64_t differ = 0;
  for (int r = 0; r < 10; r++) {
    if (!same_bytes(one.t[r], three.t[r])) {
      differ++;
      fprintf(stderr, "threads: result %d differs between 1 and 3 threads\n", r);
    }
    td_tensor_release(one.t[r]);
    td_tensor_release(three.t[r]);
  }
  CHECK_EQ_I(differ, 0);
  td_tensor_release(src);
  td_tensor_release(mask);
  td_tensor_release(rowmask);
  td_tensor_release(index2);
  td_tensor_release(index);
  td_tensor_release(a);
}

/* Whether the 1-based form of op (index_select or gather) equals the 0-based one on a
 * along dim d, with some_indices for int64 and int32 index tensors. */
static bool one_based_matches(const td_tensor *a, int32_t d, bool gather) {
  int64_t idx0[8], idx1[8];
  int64_t n = some_indices(a->shape[d], idx0);
  for (int64_t k = 0; k < n; k++) idx1[k] = idx0[k] >= 0 ? idx0[k] + 1 : idx0[k];
  bool ok = true;
  for (int32_t it = 0; it < 2; it++) {
    td_tensor *i0 = index_of(it ? TD_INT32 : TD_INT64, n, idx0);
    td_tensor *i1 = index_of(it ? TD_INT32 : TD_INT64, n, idx1);
    td_tensor *want = gather ? td_gather(a, d, i0) : td_index_select(a, d, i0);
    td_tensor *got = gather ? td_gather_one_based(a, d, i1) : td_index_select_one_based(a, d, i1);
    ok = ok && want && got && same_bytes(want, got);
    td_tensor_release(want);
    td_tensor_release(got);
    td_tensor_release(i0);
    td_tensor_release(i1);
  }
  return ok;
}

/* The 1-based forms equal the 0-based ones on every dtype, layout and dim (gather of a
 * 1-D tensor takes the one-pass path), and name bad values in 1-based terms. */
static void test_one_based(void) {
  const int64_t shape[3] = {5, 4, 3}, n1 = 9;
  int64_t bad = 0;
  for (int di = 0; di < TD_NUM_DTYPES; di++)
    for (int lay = 0; lay < NUM_LAYOUTS; lay++) {
      td_tensor *a = make(3, shape, all_dtypes[di], lay, di);
      for (int32_t d = 0; d < 3; d++) bad += !one_based_matches(a, d, false);
      td_tensor_release(a);
      a = make(1, &n1, all_dtypes[di], lay, di);
      bad += !one_based_matches(a, 0, true);
      td_tensor_release(a);
    }
  CHECK_EQ_I(bad, 0);
  const int64_t n6 = 6, wrong[3] = {2, 9, -8}, zero[2] = {1, 0};
  td_tensor *a = make(1, &n6, TD_FLOAT32, 0, 1);
  td_tensor *iw = index_of(TD_INT64, 3, wrong), *iz = index_of(TD_INT32, 2, zero);
  CHECK(td_gather_one_based(a, 0, iw) == NULL);
  CHECK_ERROR("gather: index 9 is out of range for dim 1 of size 6 (valid: 1..6 or -6..-1)");
  CHECK(td_index_select_one_based(a, 0, iz) == NULL);
  CHECK_ERROR("index_select: index 0 in dim 1: indices are 1-based");
  td_tensor_release(a);
  td_tensor_release(iw);
  td_tensor_release(iz);
}

int main(void) {
  test_index_select();
  test_gather();
  test_scatter();
  test_index_add_put();
  test_masked_select();
  test_nonzero();
  test_mask_rows();
  test_threads();
  test_one_based();
  CHECK_SUMMARY();
}
