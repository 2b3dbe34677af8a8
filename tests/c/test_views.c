/* test_views.c: views share storage and compute shapes, strides and offsets right. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static td_tensor *arange_i64(int64_t n, int32_t ndim, const int64_t *shape) {
  td_tensor *flat = td_tensor_arange(0, 1, n, TD_INT64);
  td_tensor *t = td_tensor_view(flat, ndim, shape);
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
  td_tensor *s = td_tensor_select(c, 1, 2);
  CHECK_EQ_I(td_tensor_ndim(s), 2);
  CHECK_EQ_I(td_tensor_size(s, 1), 4);
  CHECK_EQ_I(td_tensor_offset(s), 8);
  CHECK_EQ_I(at(s, (int64_t[]){1, 3}), 23);
  td_tensor_release(s);
  CHECK(td_tensor_select(c, 1, 3) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EINDEX);
  CHECK_ERROR("index 3 is out of range for dim 1 of size 3");
  s = td_tensor_select(c, 2, -1);
  CHECK_EQ_I(at(s, (int64_t[]){0, 0}), 3);
  td_tensor_release(s);

  td_tensor *sl = td_tensor_slice(c, 2, 1, INT64_MAX, 2);
  CHECK_EQ_I(td_tensor_size(sl, 2), 2);
  CHECK_EQ_I(td_tensor_stride(sl, 2), 2);
  CHECK_EQ_I(at(sl, (int64_t[]){1, 2, 1}), 23);
  td_tensor_release(sl);
  sl = td_tensor_slice(c, 0, 5, 9, 1); /* clamped: empty */
  CHECK_EQ_I(td_tensor_size(sl, 0), 0);
  CHECK_EQ_I(td_tensor_numel(sl), 0);
  CHECK(td_tensor_is_contiguous(sl));
  td_tensor_release(sl);
  CHECK(td_tensor_slice(c, 0, 0, 2, 0) == NULL);
  CHECK_ERROR("slice step must be positive, got 0");

  td_index e[3] = {{TD_INDEX_NEWAXIS, 0, 0, 0}, {TD_INDEX_ELLIPSIS, 0, 0, 0},
                   {TD_INDEX_SELECT, -2, 0, 0}};
  td_tensor *ix = td_tensor_index(c, e, 3);
  CHECK_EQ_I(td_tensor_ndim(ix), 3);
  CHECK_EQ_I(td_tensor_size(ix, 0), 1);
  CHECK_EQ_I(td_tensor_size(ix, 2), 3);
  CHECK_EQ_I(at(ix, (int64_t[]){0, 1, 2}), 22);
  td_tensor_release(ix);
  td_index two_ellipses[2] = {{TD_INDEX_ELLIPSIS, 0, 0, 0}, {TD_INDEX_ELLIPSIS, 0, 0, 0}};
  CHECK(td_tensor_index(c, two_ellipses, 2) == NULL);
  CHECK_ERROR("at most one ellipsis");
  td_index bad_kind = {42, 0, 0, 0};
  CHECK(td_tensor_index(c, &bad_kind, 1) == NULL);
  CHECK_ERROR("unknown kind 42");
  td_index many[4] = {{TD_INDEX_SELECT, 0, 0, 0}, {TD_INDEX_SELECT, 0, 0, 0},
                      {TD_INDEX_SELECT, 0, 0, 0}, {TD_INDEX_SELECT, 0, 0, 0}};
  CHECK(td_tensor_index(c, many, 4) == NULL);
  CHECK_ERROR("4 indices for a tensor of 3 dims");
  td_tensor_release(c);
}

static void test_view_reshape(void) {
  int64_t shape[2] = {4, 6};
  td_tensor *m = arange_i64(24, 2, shape);
  td_tensor *v = td_tensor_view(m, 3, (int64_t[]){2, -1, 3});
  CHECK_EQ_I(td_tensor_size(v, 1), 4);
  CHECK(td_tensor_storage_borrow(v) == td_tensor_storage_borrow(m));
  td_tensor_release(v);
  CHECK(td_tensor_view(m, 1, (int64_t[]){25}) == NULL);
  CHECK_ERROR("shape [25] is invalid for a tensor of shape [4, 6] (24 elements)");
  CHECK(td_tensor_view(m, 2, (int64_t[]){-1, -1}) == NULL);

  /* A column slice [4, 3] of rows of 6: rows can split, not merge. */
  td_tensor *cols = td_tensor_slice(m, 1, 0, 3, 1);
  td_tensor *split = td_tensor_view(cols, 3, (int64_t[]){2, 2, 3});
  CHECK(split != NULL);
  CHECK_EQ_I(td_tensor_stride(split, 0), 12);
  CHECK_EQ_I(td_tensor_stride(split, 1), 6);
  td_tensor_release(split);
  CHECK(td_tensor_view(cols, 1, (int64_t[]){12}) == NULL);
  CHECK_ERROR("without a copy");
  td_tensor *r = td_tensor_reshape(cols, 1, (int64_t[]){12});
  CHECK(r && td_tensor_is_contiguous(r));
  CHECK(td_tensor_storage_borrow(r) != td_tensor_storage_borrow(m));
  CHECK_EQ_I(at(r, (int64_t[]){3}), 6);
  td_tensor_release(r);
  td_tensor_release(cols);

  /* Size-1 dims with odd strides never block a view. */
  td_tensor *u = td_tensor_unsqueeze(m, 1);
  td_tensor *back = td_tensor_view(u, 2, (int64_t[]){6, 4});
  CHECK(back != NULL);
  td_tensor_release(back);
  td_tensor_release(u);

  td_tensor *f = td_tensor_flatten(m, 0, 1);
  CHECK_EQ_I(td_tensor_ndim(f), 1);
  td_tensor_release(f);
  td_tensor *uf = td_tensor_unflatten(m, 1, 2, (int64_t[]){3, -1});
  CHECK_EQ_I(td_tensor_size(uf, 2), 2);
  td_tensor_release(uf);
  CHECK(td_tensor_unflatten(m, 1, 2, (int64_t[]){4, 2}) == NULL);
  CHECK_ERROR("sizes [4, 2] do not multiply to 6");
  td_tensor_release(m);
}

static void test_permute_expand_squeeze(void) {
  int64_t shape[3] = {2, 1, 3};
  td_tensor *t = arange_i64(6, 3, shape);
  td_tensor *p = td_tensor_permute(t, (int32_t[]){2, 0, 1});
  CHECK_EQ_I(td_tensor_size(p, 0), 3);
  CHECK_EQ_I(td_tensor_stride(p, 0), 1);
  CHECK_EQ_I(at(p, (int64_t[]){2, 1, 0}), 5);
  td_tensor_release(p);
  CHECK(td_tensor_permute(t, (int32_t[]){0, 0, 1}) == NULL);
  CHECK_ERROR("appears twice");

  td_tensor *e = td_tensor_expand(t, 4, (int64_t[]){5, 2, 4, -1});
  CHECK_EQ_I(td_tensor_stride(e, 0), 0);
  CHECK_EQ_I(td_tensor_stride(e, 2), 0);
  CHECK_EQ_I(td_tensor_numel(e), 120);
  CHECK_EQ_I(at(e, (int64_t[]){4, 1, 3, 2}), 5);
  td_tensor_release(e);
  CHECK(td_tensor_expand(t, 3, (int64_t[]){3, 1, 3}) == NULL);
  CHECK_ERROR("cannot expand shape [2, 1, 3] to [3, 1, 3]");

  td_tensor *sq = td_tensor_squeeze_all(t);
  CHECK_EQ_I(td_tensor_ndim(sq), 2);
  td_tensor_release(sq);
  sq = td_tensor_squeeze(t, 0);
  CHECK_EQ_I(td_tensor_ndim(sq), 3);
  td_tensor_release(sq);
  CHECK(td_tensor_transpose(t, 0, 3) == NULL);
  CHECK_ERROR("dim 3 is out of range for a tensor of 3 dims");
  td_tensor_release(t);
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
  td_storage_release(st);
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

int main(void) {
  test_select_slice_index();
  test_view_reshape();
  test_permute_expand_squeeze();
  test_creation_checks();
  test_from_storage_bounds();
  test_storage_kinds();
  CHECK_SUMMARY();
}
