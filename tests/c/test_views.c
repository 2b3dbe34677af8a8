/* test_views.c: views share storage and compute shapes, strides and offsets right. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

/* An owned tensor 0, 1, ..., n - 1 of the given shape: a view of an arange made owned
 * with share, so that it outlives the arange. */
static td_tensor *arange_i64(int64_t n, int32_t ndim, const int64_t *shape) {
  td_tensor *flat = td_tensor_arange(0, 1, n, TD_INT64);
  td_tensor v, *t = NULL;
  CHECK(flat != NULL);
  if (flat && td_tensor_view(flat, ndim, shape, &v) == TD_OK) t = td_tensor_share(&v);
  CHECK(t != NULL && t->refcount == 1);
  td_tensor_release(flat);
  return t;
}

static int64_t at(const td_tensor *t, const int64_t *idx) {
  double v = -1;
  if (td_tensor_read_f64(t, idx, &v) != 0) return -1;
  return (int64_t)v;
}

static void test_select_slice_index(void) {
  int64_t shape[3] = {2, 3, 4};
  td_tensor *c = arange_i64(24, 3, shape);
  td_tensor s;
  CHECK_EQ_I(td_tensor_select(c, 1, 2, &s), TD_OK);
  CHECK_EQ_I(s.ndim, 2);
  CHECK_EQ_I(td_tensor_size(&s, 1), 4);
  CHECK_EQ_I(s.offset, 8);
  CHECK_EQ_I(at(&s, (int64_t[]){1, 3}), 23);
  CHECK_EQ_I(td_tensor_select(c, 1, 3, &s), TD_EINDEX);
  CHECK_EQ_I(td_last_status(), TD_EINDEX);
  CHECK_ERROR("index 3 is out of range for dim 1 of size 3");
  CHECK_EQ_I(td_tensor_select(c, 2, -1, &s), TD_OK);
  CHECK_EQ_I(at(&s, (int64_t[]){0, 0}), 3);

  td_tensor sl;
  CHECK_EQ_I(td_tensor_slice(c, 2, 1, INT64_MAX, 2, &sl), TD_OK);
  CHECK_EQ_I(td_tensor_size(&sl, 2), 2);
  CHECK_EQ_I(td_tensor_stride(&sl, 2), 2);
  CHECK_EQ_I(at(&sl, (int64_t[]){1, 2, 1}), 23);
  CHECK_EQ_I(td_tensor_slice(c, 0, 5, 9, 1, &sl), TD_OK); /* clamped: empty */
  CHECK_EQ_I(td_tensor_size(&sl, 0), 0);
  CHECK_EQ_I(td_tensor_numel(&sl), 0);
  CHECK(td_tensor_is_contiguous(&sl));
  CHECK_EQ_I(td_tensor_slice(c, 0, 0, 2, 0, &sl), TD_EINVAL);
  CHECK_ERROR("slice step must be positive, got 0");

  td_index e[3] = {{TD_INDEX_NEWAXIS, 0, 0, 0}, {TD_INDEX_ELLIPSIS, 0, 0, 0},
                   {TD_INDEX_SELECT, -2, 0, 0}};
  td_tensor ix;
  CHECK_EQ_I(td_tensor_index(c, e, 3, &ix), TD_OK);
  CHECK_EQ_I(ix.ndim, 3);
  CHECK_EQ_I(td_tensor_size(&ix, 0), 1);
  CHECK_EQ_I(td_tensor_size(&ix, 2), 3);
  CHECK_EQ_I(at(&ix, (int64_t[]){0, 1, 2}), 22);
  td_index two_ellipses[2] = {{TD_INDEX_ELLIPSIS, 0, 0, 0}, {TD_INDEX_ELLIPSIS, 0, 0, 0}};
  CHECK_EQ_I(td_tensor_index(c, two_ellipses, 2, &ix), TD_EINVAL);
  CHECK_ERROR("at most one ellipsis");
  td_index bad_kind = {42, 0, 0, 0};
  CHECK_EQ_I(td_tensor_index(c, &bad_kind, 1, &ix), TD_EINVAL);
  CHECK_ERROR("unknown kind 42");
  td_index many[4] = {{TD_INDEX_SELECT, 0, 0, 0}, {TD_INDEX_SELECT, 0, 0, 0},
                      {TD_INDEX_SELECT, 0, 0, 0}, {TD_INDEX_SELECT, 0, 0, 0}};
  CHECK_EQ_I(td_tensor_index(c, many, 4, &ix), TD_EINDEX);
  CHECK_ERROR("4 indices for a tensor of 3 dims");
  td_tensor_release(c);
}

static void test_view_reshape(void) {
  int64_t shape[2] = {4, 6};
  td_tensor *m = arange_i64(24, 2, shape);
  td_tensor v;
  CHECK_EQ_I(td_tensor_view(m, 3, (int64_t[]){2, -1, 3}, &v), TD_OK);
  CHECK_EQ_I(td_tensor_size(&v, 1), 4);
  CHECK(v.storage == m->storage);
  CHECK_EQ_I(td_tensor_view(m, 1, (int64_t[]){25}, &v), TD_ESHAPE);
  CHECK_ERROR("shape [25] is invalid for a tensor of shape [4, 6] (24 elements)");
  CHECK_EQ_I(td_tensor_view(m, 2, (int64_t[]){-1, -1}, &v), TD_ESHAPE);

  /* A column slice [4, 3] of rows of 6: rows can split, not merge. */
  td_tensor cols, split;
  CHECK_EQ_I(td_tensor_slice(m, 1, 0, 3, 1, &cols), TD_OK);
  CHECK_EQ_I(td_tensor_view(&cols, 3, (int64_t[]){2, 2, 3}, &split), TD_OK);
  CHECK_EQ_I(td_tensor_stride(&split, 0), 12);
  CHECK_EQ_I(td_tensor_stride(&split, 1), 6);
  CHECK_EQ_I(td_tensor_view(&cols, 1, (int64_t[]){12}, &split), TD_ESHAPE);
  CHECK_ERROR("without a copy");
  td_tensor *r = td_tensor_reshape(&cols, 1, (int64_t[]){12});
  CHECK(r && td_tensor_is_contiguous(r) && r->refcount == 1);
  CHECK(r && r->storage != m->storage);
  CHECK_EQ_I(at(r, (int64_t[]){3}), 6);
  td_tensor_release(r);
  /* reshape without a copy still returns an owned header over the same storage. */
  r = td_tensor_reshape(&cols, 3, (int64_t[]){2, 2, 3});
  CHECK(r && r->refcount == 1 && r->storage == m->storage && r->strides[0] == 12);
  td_tensor_release(r);

  /* Size-1 dims with odd strides never block a view. */
  td_tensor u, back;
  CHECK_EQ_I(td_tensor_unsqueeze(m, 1, &u), TD_OK);
  CHECK_EQ_I(td_tensor_view(&u, 2, (int64_t[]){6, 4}, &back), TD_OK);

  td_tensor *f = td_tensor_flatten(m, 0, 1);
  CHECK(f && f->ndim == 1 && f->refcount == 1 && f->storage == m->storage);
  td_tensor_release(f);
  td_tensor uf;
  CHECK_EQ_I(td_tensor_unflatten(m, 1, 2, (int64_t[]){3, -1}, &uf), TD_OK);
  CHECK_EQ_I(td_tensor_size(&uf, 2), 2);
  CHECK_EQ_I(td_tensor_unflatten(m, 1, 2, (int64_t[]){4, 2}, &uf), TD_ESHAPE);
  CHECK_ERROR("sizes [4, 2] do not multiply to 6");
  td_tensor_release(m);
}

static void test_permute_expand_squeeze(void) {
  int64_t shape[3] = {2, 1, 3};
  td_tensor *t = arange_i64(6, 3, shape);
  td_tensor p;
  CHECK_EQ_I(td_tensor_permute(t, (int32_t[]){2, 0, 1}, &p), TD_OK);
  CHECK_EQ_I(td_tensor_size(&p, 0), 3);
  CHECK_EQ_I(td_tensor_stride(&p, 0), 1);
  CHECK_EQ_I(at(&p, (int64_t[]){2, 1, 0}), 5);
  CHECK_EQ_I(td_tensor_permute(t, (int32_t[]){0, 0, 1}, &p), TD_EINVAL);
  CHECK_ERROR("appears twice");

  td_tensor e;
  CHECK_EQ_I(td_tensor_expand(t, 4, (int64_t[]){5, 2, 4, -1}, &e), TD_OK);
  CHECK_EQ_I(td_tensor_stride(&e, 0), 0);
  CHECK_EQ_I(td_tensor_stride(&e, 2), 0);
  CHECK_EQ_I(td_tensor_numel(&e), 120);
  CHECK_EQ_I(at(&e, (int64_t[]){4, 1, 3, 2}), 5);
  CHECK_EQ_I(td_tensor_expand(t, 3, (int64_t[]){3, 1, 3}, &e), TD_ESHAPE);
  CHECK_ERROR("cannot expand shape [2, 1, 3] to [3, 1, 3]");

  td_tensor sq;
  CHECK_EQ_I(td_tensor_squeeze_all(t, &sq), TD_OK);
  CHECK_EQ_I(sq.ndim, 2);
  CHECK_EQ_I(td_tensor_squeeze(t, 0, &sq), TD_OK);
  CHECK_EQ_I(sq.ndim, 3);
  CHECK_EQ_I(td_tensor_squeeze(t, 1, &sq), TD_OK);
  CHECK_EQ_I(sq.ndim, 2);
  td_tensor tr;
  CHECK_EQ_I(td_tensor_transpose(t, 0, 3, &tr), TD_EINDEX);
  CHECK_ERROR("dim 3 is out of range for a tensor of 3 dims");
  td_tensor_release(t);
}

/* Same layout over the same storage (refcount and unused dims not compared). */
static int same_layout(const td_tensor *a, const td_tensor *b) {
  if (a->storage != b->storage || a->offset != b->offset || a->itemsize != b->itemsize ||
      a->ndim != b->ndim || a->dtype != b->dtype)
    return 0;
  for (int32_t d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d] || a->strides[d] != b->strides[d]) return 0;
  return 1;
}

/* Owned and caller-owned headers: who holds the storage, and what retain, release,
 * share and contiguous do with each kind. */
static void test_ownership(void) {
  int64_t before = td_live_bytes();
  int64_t shape[3] = {2, 3, 4};
  td_tensor *t = arange_i64(24, 3, shape);
  CHECK(t && t->refcount == 1);
  CHECK_EQ_I(td_live_bytes(), before + 24 * 8);

  /* A view is caller-owned: refcount 0, t's storage, and no reference taken on t. */
  td_tensor v;
  CHECK_EQ_I(td_tensor_select(t, 0, 1, &v), TD_OK); /* [3, 4] at offset 12 */
  CHECK_EQ_I(v.refcount, 0);
  CHECK(v.storage == t->storage);
  CHECK_EQ_I(v.offset, 12);
  CHECK_EQ_I(v.itemsize, 8);
  CHECK_EQ_I(v.dtype, TD_INT64);
  CHECK_EQ_I(t->refcount, 1);

  /* retain and release do nothing to a caller-owned header (freeing this stack header
   * would also abort under ASan). */
  td_tensor saved = v;
  td_tensor_retain(&v);
  CHECK(memcmp(&v, &saved, sizeof v) == 0);
  td_tensor_release(&v);
  td_tensor_release(&v);
  CHECK(memcmp(&v, &saved, sizeof v) == 0);
  CHECK_EQ_I(t->refcount, 1);
  CHECK_EQ_I(td_live_bytes(), before + 24 * 8);
  CHECK_EQ_I(at(&v, (int64_t[]){2, 3}), 23);

  /* share of an owned header is that header, retained. */
  td_tensor *t2 = td_tensor_share(t);
  CHECK(t2 == t);
  CHECK_EQ_I(t->refcount, 2);
  td_tensor_release(t2);
  CHECK_EQ_I(t->refcount, 1);

  /* share of a caller-owned view is a new owned header holding the storage. */
  td_tensor *sh = td_tensor_share(&v);
  CHECK(sh && sh != &v && sh != t);
  CHECK(sh && sh->refcount == 1 && same_layout(sh, &v));
  CHECK(memcmp(&v, &saved, sizeof v) == 0); /* the view itself is unchanged */
  CHECK_EQ_I(t->refcount, 1);
  td_tensor_release(t); /* the original owner goes; the storage stays for sh */
  CHECK_EQ_I(td_live_bytes(), before + 24 * 8);
  CHECK_EQ_I(at(sh, (int64_t[]){0, 0}), 12);
  CHECK_EQ_I(at(sh, (int64_t[]){2, 3}), 23);
  /* A view of sh, shared in turn, outlives sh. */
  td_tensor w;
  CHECK_EQ_I(td_tensor_transpose(sh, 0, 1, &w), TD_OK);
  td_tensor *sh2 = td_tensor_share(&w);
  CHECK(sh2 && sh2->refcount == 1 && sh2->storage == sh->storage);
  td_tensor_release(sh);
  CHECK_EQ_I(td_live_bytes(), before + 24 * 8);
  CHECK_EQ_I(at(sh2, (int64_t[]){3, 2}), 23);
  CHECK_EQ_I(at(sh2, (int64_t[]){1, 0}), 13);
  td_tensor_release(sh2);
  CHECK_EQ_I(td_live_bytes(), before);

  /* contiguous of a contiguous view: owned, same storage, no copy. */
  t = arange_i64(24, 3, shape);
  CHECK_EQ_I(td_tensor_select(t, 0, 1, &v), TD_OK);
  CHECK(td_tensor_is_contiguous(&v));
  td_tensor *c = td_tensor_contiguous(&v);
  CHECK(c && c != &v && c != t);
  CHECK(c && c->refcount == 1 && c->storage == t->storage && same_layout(c, &v));
  CHECK_EQ_I(td_live_bytes(), before + 24 * 8); /* nothing allocated */
  /* to_dtype to the same dtype: likewise. */
  td_tensor *same = td_tensor_to_dtype(&v, TD_INT64);
  CHECK(same && same != &v && same->refcount == 1 && same_layout(same, &v));
  /* reshape of a view that needs no copy: owned, same storage. */
  td_tensor *rs = td_tensor_reshape(&v, 1, (int64_t[]){12});
  CHECK(rs && rs->refcount == 1 && rs->storage == t->storage && rs->offset == 12);
  td_tensor_release(t);
  CHECK_EQ_I(at(c, (int64_t[]){1, 2}), 18);
  CHECK_EQ_I(at(same, (int64_t[]){2, 0}), 20);
  CHECK_EQ_I(at(rs, (int64_t[]){11}), 23);
  td_tensor_release(rs);
  td_tensor_release(same);
  td_tensor_release(c);
  CHECK_EQ_I(td_live_bytes(), before);
  /* contiguous of a non-contiguous view: an owned copy. */
  t = arange_i64(24, 3, shape);
  CHECK_EQ_I(td_tensor_transpose(t, 1, 2, &v), TD_OK);
  c = td_tensor_contiguous(&v);
  CHECK(c && c->refcount == 1 && c->storage != t->storage && td_tensor_is_contiguous(c));
  CHECK_EQ_I(at(c, (int64_t[]){1, 3, 2}), 23);
  td_tensor_release(c);
  td_tensor_release(t);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* A failing view call returns its status, sets the error and leaves out as it was. */
static td_tensor sentinel;
static td_tensor out_;
#define CHECK_UNTOUCHED(call, status)                                \
  do {                                                               \
    out_ = sentinel;                                                 \
    td_clear_error();                                                \
    CHECK_EQ_I((call), (status));                                    \
    CHECK_EQ_I(td_last_status(), (status));                          \
    CHECK(td_last_error()[0] != '\0');                               \
    CHECK(memcmp(&out_, &sentinel, sizeof out_) == 0);               \
  } while (0)

static void test_out_untouched_on_error(void) {
  memset(&sentinel, 0x5a, sizeof sentinel);
  int64_t shape[3] = {2, 3, 4};
  td_tensor *t = arange_i64(24, 3, shape);
  td_tensor *o = &out_;
  CHECK_UNTOUCHED(td_tensor_select(t, 3, 0, o), TD_EINDEX);
  CHECK_UNTOUCHED(td_tensor_select(t, 1, 3, o), TD_EINDEX);
  CHECK_UNTOUCHED(td_tensor_select(t, 1, -4, o), TD_EINDEX);
  CHECK_UNTOUCHED(td_tensor_slice(t, 0, 0, 2, 0, o), TD_EINVAL);
  CHECK_UNTOUCHED(td_tensor_slice(t, -1, 0, 2, 1, o), TD_EINDEX);
  CHECK_UNTOUCHED(td_tensor_unsqueeze(t, 4, o), TD_EINDEX);
  CHECK_UNTOUCHED(td_tensor_unsqueeze(t, -1, o), TD_EINDEX);
  CHECK_UNTOUCHED(td_tensor_squeeze(t, 3, o), TD_EINDEX);
  CHECK_UNTOUCHED(td_tensor_permute(t, (int32_t[]){0, 0, 1}, o), TD_EINVAL);
  CHECK_UNTOUCHED(td_tensor_permute(t, (int32_t[]){0, 1, 3}, o), TD_EINDEX);
  CHECK_UNTOUCHED(td_tensor_transpose(t, 0, 3, o), TD_EINDEX);
  CHECK_UNTOUCHED(td_tensor_transpose(t, -1, 0, o), TD_EINDEX);
  CHECK_UNTOUCHED(td_tensor_expand(t, 3, (int64_t[]){2, 3, 5}, o), TD_ESHAPE);
  CHECK_UNTOUCHED(td_tensor_expand(t, 2, (int64_t[]){3, 4}, o), TD_ESHAPE);
  CHECK_UNTOUCHED(td_tensor_expand(t, 4, (int64_t[]){-1, 2, 3, 4}, o), TD_ESHAPE);
  CHECK_UNTOUCHED(td_tensor_view(t, 1, (int64_t[]){25}, o), TD_ESHAPE);
  CHECK_UNTOUCHED(td_tensor_view(t, 2, (int64_t[]){-1, -1}, o), TD_ESHAPE);
  CHECK_UNTOUCHED(td_tensor_unflatten(t, 1, 2, (int64_t[]){2, 2}, o), TD_ESHAPE);
  CHECK_UNTOUCHED(td_tensor_unflatten(t, 3, 2, (int64_t[]){2, 2}, o), TD_EINDEX);
  td_index many[4] = {{TD_INDEX_SELECT, 0, 0, 0}, {TD_INDEX_SELECT, 0, 0, 0},
                      {TD_INDEX_SELECT, 0, 0, 0}, {TD_INDEX_SELECT, 0, 0, 0}};
  CHECK_UNTOUCHED(td_tensor_index(t, many, 4, o), TD_EINDEX);
  td_index bad_kind = {42, 0, 0, 0};
  CHECK_UNTOUCHED(td_tensor_index(t, &bad_kind, 1, o), TD_EINVAL);
  td_index two_ellipses[2] = {{TD_INDEX_ELLIPSIS, 0, 0, 0}, {TD_INDEX_ELLIPSIS, 0, 0, 0}};
  CHECK_UNTOUCHED(td_tensor_index(t, two_ellipses, 2, o), TD_EINVAL);
  /* Failures after valid entries were already applied. */
  td_index late_select[3] = {{TD_INDEX_SLICE, 0, 1, 1}, {TD_INDEX_NEWAXIS, 0, 0, 0},
                             {TD_INDEX_SELECT, 7, 0, 0}};
  CHECK_UNTOUCHED(td_tensor_index(t, late_select, 3, o), TD_EINDEX);
  td_index late_step[2] = {{TD_INDEX_SELECT, 1, 0, 0}, {TD_INDEX_SLICE, 0, 2, -1}};
  CHECK_UNTOUCHED(td_tensor_index(t, late_step, 2, o), TD_EINVAL);
  CHECK_UNTOUCHED(td_tensor_index(t, NULL, 1, o), TD_EINVAL);
  /* Too many dims: 16 dims plus a new axis. */
  int64_t ones[TD_MAX_DIMS];
  for (int32_t d = 0; d < TD_MAX_DIMS; d++) ones[d] = 1;
  td_tensor *big = td_tensor_empty(TD_MAX_DIMS, ones, TD_FLOAT32);
  CHECK(big != NULL);
  CHECK_UNTOUCHED(td_tensor_unsqueeze(big, 0, o), TD_ESHAPE);
  /* Slices keep their dim: a slice plus a new axis on 16 dims is 17 dims, refused. */
  CHECK_UNTOUCHED(td_tensor_unsqueeze(big, TD_MAX_DIMS, o), TD_ESHAPE);
  td_index slice_newaxis[2] = {{TD_INDEX_SLICE, 0, 1, 1}, {TD_INDEX_NEWAXIS, 0, 0, 0}};
  CHECK_UNTOUCHED(td_tensor_index(big, slice_newaxis, 2, o), TD_ESHAPE);
  CHECK_UNTOUCHED(td_tensor_expand(big, TD_MAX_DIMS + 1, ones, o), TD_ESHAPE);
  CHECK_UNTOUCHED(td_tensor_unflatten(big, 0, 2, (int64_t[]){1, 1}, o), TD_ESHAPE);
  td_tensor_release(big);

  /* Non-contiguous views that cannot be viewed flat. */
  td_tensor tr;
  CHECK_EQ_I(td_tensor_transpose(t, 0, 2, &tr), TD_OK);
  CHECK_UNTOUCHED(td_tensor_view(&tr, 1, (int64_t[]){24}, o), TD_ESHAPE);

  /* With out aliasing a caller-owned t, a failure leaves t itself as it was. */
  td_tensor v, saved;
  CHECK_EQ_I(td_tensor_slice(t, 2, 1, 3, 1, &v), TD_OK);
  saved = v;
  CHECK(td_tensor_transpose(&v, 0, 5, &v) == TD_EINDEX);
  CHECK(td_tensor_view(&v, 1, (int64_t[]){12}, &v) == TD_ESHAPE);
  CHECK(td_tensor_select(&v, 0, 2, &v) == TD_EINDEX);
  CHECK(td_tensor_index(&v, many, 4, &v) == TD_EINDEX);
  CHECK(memcmp(&v, &saved, sizeof v) == 0);
  td_tensor_release(t);
}

/* out may be t itself for a caller-owned t: the result equals the non-aliased one. */
static void test_out_aliases_t(void) {
  int64_t shape[3] = {2, 3, 4};
  td_tensor *t = arange_i64(24, 3, shape);
  td_tensor v, w, ref;
  CHECK_EQ_I(td_tensor_slice(t, 2, 1, 4, 1, &v), TD_OK); /* [2, 3, 3], strides [12, 4, 1] */
  CHECK_EQ_I(v.offset, 1);

  w = v;
  CHECK_EQ_I(td_tensor_transpose(&v, 0, 1, &ref), TD_OK);
  CHECK_EQ_I(td_tensor_transpose(&w, 0, 1, &w), TD_OK);
  CHECK(same_layout(&w, &ref) && w.refcount == 0);
  CHECK_EQ_I(w.shape[0], 3);
  CHECK_EQ_I(w.strides[0], 4);
  CHECK_EQ_I(at(&w, (int64_t[]){2, 1, 0}), at(&v, (int64_t[]){1, 2, 0}));
  CHECK_EQ_I(at(&w, (int64_t[]){2, 1, 0}), 21);
  CHECK_EQ_I(td_tensor_transpose(&w, 1, 0, &w), TD_OK); /* and back */
  CHECK(same_layout(&w, &v));

  w = v;
  CHECK_EQ_I(td_tensor_permute(&v, (int32_t[]){2, 0, 1}, &ref), TD_OK);
  CHECK_EQ_I(td_tensor_permute(&w, (int32_t[]){2, 0, 1}, &w), TD_OK);
  CHECK(same_layout(&w, &ref) && w.refcount == 0);
  CHECK_EQ_I(at(&w, (int64_t[]){2, 1, 0}), 15);

  w = v;
  CHECK_EQ_I(td_tensor_select(&v, 1, -1, &ref), TD_OK);
  CHECK_EQ_I(td_tensor_select(&w, 1, -1, &w), TD_OK);
  CHECK(same_layout(&w, &ref) && w.ndim == 2 && w.offset == 9);

  w = v;
  CHECK_EQ_I(td_tensor_slice(&v, 2, 0, 3, 2, &ref), TD_OK);
  CHECK_EQ_I(td_tensor_slice(&w, 2, 0, 3, 2, &w), TD_OK);
  CHECK(same_layout(&w, &ref) && w.shape[2] == 2 && w.strides[2] == 2);

  w = v;
  CHECK_EQ_I(td_tensor_unsqueeze(&v, 1, &ref), TD_OK);
  CHECK_EQ_I(td_tensor_unsqueeze(&w, 1, &w), TD_OK);
  CHECK(same_layout(&w, &ref) && w.ndim == 4 && w.shape[1] == 1);
  CHECK_EQ_I(td_tensor_squeeze(&w, 1, &w), TD_OK);
  CHECK(same_layout(&w, &v));
  CHECK_EQ_I(td_tensor_unsqueeze(&w, 3, &w), TD_OK);
  CHECK_EQ_I(td_tensor_unsqueeze(&w, 0, &w), TD_OK);
  CHECK_EQ_I(w.ndim, 5);
  CHECK_EQ_I(td_tensor_squeeze_all(&w, &w), TD_OK);
  CHECK(same_layout(&w, &v));

  w = v;
  CHECK_EQ_I(td_tensor_expand(&v, 4, (int64_t[]){5, -1, -1, -1}, &ref), TD_OK);
  CHECK_EQ_I(td_tensor_expand(&w, 4, (int64_t[]){5, -1, -1, -1}, &w), TD_OK);
  CHECK(same_layout(&w, &ref) && w.strides[0] == 0 && w.strides[1] == 12);
  CHECK_EQ_I(at(&w, (int64_t[]){4, 1, 2, 2}), 23);

  w = v;
  CHECK_EQ_I(td_tensor_view(&v, 2, (int64_t[]){6, 3}, &ref), TD_OK);
  CHECK_EQ_I(td_tensor_view(&w, 2, (int64_t[]){6, 3}, &w), TD_OK);
  CHECK(same_layout(&w, &ref) && w.strides[0] == 4);
  CHECK_EQ_I(at(&w, (int64_t[]){5, 2}), 23);

  w = v;
  CHECK_EQ_I(td_tensor_unflatten(&v, 1, 2, (int64_t[]){-1, 1}, &ref), TD_OK);
  CHECK_EQ_I(td_tensor_unflatten(&w, 1, 2, (int64_t[]){-1, 1}, &w), TD_OK);
  CHECK(same_layout(&w, &ref) && w.ndim == 4 && w.shape[1] == 3);

  td_index e[3] = {{TD_INDEX_NEWAXIS, 0, 0, 0}, {TD_INDEX_ELLIPSIS, 0, 0, 0},
                   {TD_INDEX_SELECT, -1, 0, 0}};
  w = v;
  CHECK_EQ_I(td_tensor_index(&v, e, 3, &ref), TD_OK);
  CHECK_EQ_I(td_tensor_index(&w, e, 3, &w), TD_OK);
  CHECK(same_layout(&w, &ref) && w.ndim == 3 && w.shape[0] == 1 && w.offset == 3);
  CHECK_EQ_I(at(&w, (int64_t[]){0, 1, 2}), 23);

  /* An in-place chain, then made owned: it outlives t. */
  w = v;
  CHECK_EQ_I(td_tensor_transpose(&w, 0, 2, &w), TD_OK);
  CHECK_EQ_I(td_tensor_select(&w, 2, 1, &w), TD_OK);
  CHECK_EQ_I(td_tensor_slice(&w, 0, 1, 3, 1, &w), TD_OK); /* [2, 3]: t[1, :, 2:4].T */
  td_tensor *o = td_tensor_share(&w);
  td_tensor_release(t);
  CHECK(o && o->refcount == 1 && o->ndim == 2 && o->shape[0] == 2 && o->shape[1] == 3);
  CHECK_EQ_I(at(o, (int64_t[]){0, 0}), 14);
  CHECK_EQ_I(at(o, (int64_t[]){1, 2}), 23);
  td_tensor_release(o);
}

static void test_creation_checks(void) {
  CHECK(td_tensor_empty(2, (int64_t[]){2, -3}, TD_FLOAT32) == NULL);
  CHECK_ERROR("negative size -3 in shape [2, -3]");
  CHECK(td_tensor_empty(17, (int64_t[17]){0}, TD_FLOAT32) == NULL);
  CHECK_ERROR("17 dims requested, at most 16");
  CHECK(td_tensor_empty(1, (int64_t[]){4}, 99) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EDTYPE);
  CHECK(td_tensor_empty(2, (int64_t[]){INT64_MAX / 2, 4}, TD_FLOAT64) == NULL);
  CHECK_ERROR("too many elements");
  td_tensor *s = td_tensor_empty(0, NULL, TD_FLOAT64);
  CHECK(s != NULL && td_tensor_numel(s) == 1);
  td_tensor_release(s);
}

static void test_from_storage_bounds(void) {
  td_storage *st = td_storage_new_heap(40);
  td_tensor *t = td_tensor_from_storage(st, 2, 2, (int64_t[]){2, 4}, NULL, TD_INT32);
  CHECK(t != NULL);
  td_tensor_release(t);
  CHECK(td_tensor_from_storage(st, 3, 2, (int64_t[]){2, 4}, NULL, TD_INT32) == NULL);
  CHECK_ERROR("needs more than the 40 bytes");
  CHECK(td_tensor_from_storage(st, 0, 1, (int64_t[]){2}, (int64_t[]){-1}, TD_INT32) == NULL);
  CHECK_ERROR("negative stride");
  CHECK(td_tensor_from_storage(st, 0, 1, (int64_t[]){3}, (int64_t[]){INT64_MAX / 2}, TD_INT32) ==
        NULL);
  t = td_tensor_from_storage(st, 10, 1, (int64_t[]){0}, NULL, TD_INT32); /* no element */
  CHECK(t != NULL);
  td_tensor_release(t);
  /* An empty tensor reaches nothing, but its strides in bytes must fit (issue 28). */
  CHECK(td_tensor_from_storage(st, 0, 2, (int64_t[]){0, 2}, (int64_t[]){1, INT64_MAX / 4},
                               TD_INT32) == NULL);
  CHECK_ERROR("from_storage: strides [1, 2305843009213693951] reach past any storage");
  CHECK(td_tensor_from_storage(st, 0, 1, (int64_t[]){0}, (int64_t[]){INT64_MAX / 2}, TD_INT32) ==
        NULL);
  t = td_tensor_from_storage(st, 0, 2, (int64_t[]){0, 2}, (int64_t[]){1, 1000}, TD_INT32);
  CHECK(t != NULL);
  td_tensor_release(t);
  td_storage_release(st);
}

/* Steps near 2^62 (issue 28): a slice of at most one element keeps the dim's stride, so
 * no stride is a product nothing reaches and kernels can scale every stride to bytes. */
static void test_huge_steps_and_sizes(void) {
  td_tensor *t = td_tensor_arange(0, 1, 12, TD_FLOAT64), v, e, x;
  CHECK_EQ_I(td_tensor_view(t, 2, (int64_t[]){4, 3}, &v), TD_OK);
  CHECK_EQ_I(td_tensor_slice(&v, 0, 1, 4, INT64_MAX / 2, &e), TD_OK);
  CHECK_EQ_I(e.shape[0], 1);
  CHECK_EQ_I(e.strides[0], 3);
  CHECK_EQ_I(td_tensor_slice(&v, 0, 2, 1, (int64_t)1 << 61, &e), TD_OK);
  CHECK_EQ_I(e.shape[0], 0);
  CHECK_EQ_I(e.strides[0], 3);
  CHECK_EQ_I(td_tensor_fill_(&e, 1.0), TD_OK);
  CHECK_EQ_I(td_tensor_slice(&v, 0, 0, 4, 3, &e), TD_OK); /* two rows: the product stands */
  CHECK_EQ_I(e.shape[0], 2);
  CHECK_EQ_I(e.strides[0], 9);
  td_tensor one;
  CHECK_EQ_I(td_tensor_view(t, 2, (int64_t[]){1, 12}, &one), TD_OK);
  CHECK_EQ_I(td_tensor_expand(&one, 2, (int64_t[]){(int64_t)1 << 62, 12}, &x), TD_ESHAPE);
  CHECK_ERROR("expand: shape [4611686018427387904, 12] has too many elements");
  CHECK_EQ_I(td_tensor_expand(&one, 3, (int64_t[]){0, (int64_t)1 << 62, 12}, &x), TD_ESHAPE);
  CHECK_ERROR("is too large: its strides would overflow");
  td_tensor *none = td_tensor_empty(1, (int64_t[]){0}, TD_FLOAT32);
  CHECK_EQ_I(td_tensor_view(none, 2, (int64_t[]){(int64_t)1 << 62, 0}, &x), TD_ESHAPE);
  CHECK_ERROR("view: shape [4611686018427387904, 0] has too many elements");
  CHECK(td_tensor_reshape(none, 2, (int64_t[]){0, (int64_t)1 << 62}) == NULL);
  CHECK_ERROR("reshape: shape [0, 4611686018427387904] is too large");
  td_tensor_release(none);
  td_tensor_release(t);
}

static void test_storage_kinds(void) {
  int64_t before = td_live_bytes();
  td_storage *h = td_storage_new_heap(100);
  CHECK(((uintptr_t)td_storage_data_borrow(h) & 63) == 0);
  CHECK_EQ_I(td_storage_kind(h), TD_STORAGE_HEAP);
  CHECK_EQ_I(td_live_bytes(), before + 100);
  td_storage *sh = td_storage_new_shared(4096);
  CHECK_EQ_I(td_storage_kind(sh), TD_STORAGE_SHARED);
  CHECK_EQ_I(td_storage_device_type(sh), TD_DEVICE_CPU);
  td_storage_release(sh);
  td_storage_release(h);
  CHECK_EQ_I(td_live_bytes(), before);
  CHECK(td_storage_new_heap(-1) == NULL);

  char path[] = "/tmp/td_test_storageXXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  td_storage *w = td_storage_map_file(path, 16, TD_MAP_CREATE);
  CHECK(w && td_storage_is_writable(w));
  ((int32_t *)td_storage_data_borrow(w))[3] = 77;
  CHECK_EQ_I(td_storage_sync(w), 0);
  td_storage_release(w);
  td_storage *r = td_storage_map_file(path, 16, TD_MAP_READ);
  CHECK(r && !td_storage_is_writable(r));
  CHECK_EQ_I(((int32_t *)td_storage_data_borrow(r))[3], 77);
  td_tensor *rt = td_tensor_from_storage(r, 0, 1, (int64_t[]){4}, NULL, TD_INT32);
  CHECK(td_tensor_fill_(rt, 1) == TD_EREADONLY);
  CHECK_ERROR("read-only");
  td_tensor_release(rt);
  td_storage_release(r);
  CHECK(td_storage_map_file(path, 17, TD_MAP_READ) == NULL);
  CHECK_ERROR("holds 16 bytes, 17 needed");
  td_storage *empty = td_storage_map_file(path, 0, TD_MAP_READ);
  CHECK(empty != NULL && td_storage_data_borrow(empty) != NULL);
  td_storage_release(empty);
  remove(path);
  CHECK(td_storage_map_file(path, 4, TD_MAP_READWRITE) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EIO);
  CHECK(td_storage_map_file("/tmp", 4, TD_MAP_READ) == NULL);
}

/* Large heap blocks are cached on release and handed back to the next request that
 * fits; the cache can be emptied. */
static void test_heap_cache(void) {
  td_release_cached_memory();
  CHECK_EQ_I(td_cached_bytes(), 0);
  int64_t big = 3 << 20;
  td_storage *a = td_storage_new_heap(big);
  void *first = td_storage_data_borrow(a);
  CHECK(((uintptr_t)first & 63) == 0);
  td_storage_release(a);
  CHECK(td_cached_bytes() >= big);
  td_storage *b = td_storage_new_heap(big - 1000); /* fits the cached block */
  CHECK(td_storage_data_borrow(b) == first);
  CHECK_EQ_I(td_cached_bytes(), 0);
  td_storage *c = td_storage_new_heap(20 << 20); /* larger: a fresh block */
  CHECK(td_storage_data_borrow(c) != first);
  td_storage_release(b);
  td_storage_release(c);
  CHECK(td_cached_bytes() >= big + (20 << 20));
  CHECK(td_release_cached_memory() >= big + (20 << 20));
  CHECK_EQ_I(td_cached_bytes(), 0);
  td_storage *small = td_storage_new_heap(100); /* small blocks go straight back */
  td_storage_release(small);
  CHECK_EQ_I(td_cached_bytes(), 0);
  /* Medium sizes up to just under 1 MiB (rounded up to 1 MiB itself: the last class) are
   * kept and handed back. */
  int64_t sizes[3] = {64 << 10, (1 << 20) - 100, (1 << 20) - 64};
  for (int k = 0; k < 3; k++) {
    td_storage *m = td_storage_new_heap(sizes[k]);
    void *at = td_storage_data_borrow(m);
    td_storage_release(m);
    CHECK(td_cached_bytes() >= sizes[k]);
    m = td_storage_new_heap(sizes[k]);
    CHECK(td_storage_data_borrow(m) == at);
    td_storage_release(m);
  }
  td_release_cached_memory();
  CHECK_EQ_I(td_cached_bytes(), 0);
}

int main(void) {
  test_select_slice_index();
  test_view_reshape();
  test_permute_expand_squeeze();
  test_ownership();
  test_out_untouched_on_error();
  test_out_aliases_t();
  test_creation_checks();
  test_from_storage_bounds();
  test_huge_steps_and_sizes();
  test_storage_kinds();
  test_heap_cache();
  CHECK_SUMMARY();
}
