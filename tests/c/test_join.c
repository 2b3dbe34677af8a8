/* test_join.c: stack, cat and pad against plain loops written here. */
#include "tensors.h"

/* ---- stack -------------------------------------------------------------------------- */

/* out == inputs stacked along dim, element by element, cast to out's dtype. */
static int64_t stack_mismatches(const td_tensor *const *in, int32_t n, int32_t dim,
                                const td_tensor *out) {
  const td_tensor *r = in[0];
  int64_t shape[TD_MAX_DIMS];
  for (int32_t d = 0, s = 0; d <= r->ndim; d++) shape[d] = d == dim ? n : r->shape[s++];
  if (!same_shape(out, r->ndim + 1, shape)) return -1;
  if (numel_of(out->ndim, shape) == 0) return 0;
  int64_t o[TD_MAX_DIMS] = {0}, i[TD_MAX_DIMS], bad = 0;
  do {
    for (int32_t d = 0, s = 0; d <= r->ndim; d++)
      if (d != dim) i[s++] = o[d];
    bad += rd(out, o) != as_dtype(out->dtype, rd(in[o[dim]], i));
  } while (next_index(out->ndim, shape, o));
  return bad;
}

static void test_stack(void) {
  const int64_t shape[3] = {3, 4, 2};
  int64_t bad = 0, failed = 0;
  for (int di = 0; di < TD_NUM_DTYPES; di++)
    for (int lay = 0; lay < NUM_LAYOUTS; lay++)
      for (int32_t dim = -4; dim <= 3; dim++) {
        td_tensor *in[3];
        for (int k = 0; k < 3; k++) in[k] = make(3, shape, all_dtypes[di], (lay + k) % NUM_LAYOUTS, k);
        td_tensor *out = td_stack((const td_tensor *const *)in, 3, dim);
        if (!out || out->dtype != all_dtypes[di]) failed++;
        else bad += stack_mismatches((const td_tensor *const *)in, 3, dim < 0 ? dim + 4 : dim, out) != 0;
        td_tensor_release(out);
        for (int k = 0; k < 3; k++) td_tensor_release(in[k]);
      }
  CHECK_EQ_I(failed, 0);
  CHECK_EQ_I(bad, 0);

  /* Promotion, torch's pairs: the values cast exactly. */
  struct {
    int32_t a, b, want;
  } pairs[] = {{TD_INT8, TD_UINT8, TD_INT16}, {TD_FLOAT16, TD_BFLOAT16, TD_FLOAT32},
               {TD_BOOL, TD_INT32, TD_INT32}, {TD_INT64, TD_FLOAT16, TD_FLOAT16},
               {TD_FLOAT32, TD_FLOAT64, TD_FLOAT64}, {TD_BOOL, TD_BOOL, TD_BOOL}};
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    td_tensor *in[3] = {make(3, shape, pairs[p].a, CONTIGUOUS, 1),
                        make(3, shape, pairs[p].b, TRANSPOSED, 2),
                        make(3, shape, pairs[p].a, SLICED, 3)};
    td_tensor *out = td_stack((const td_tensor *const *)in, 3, 1);
    CHECK(out && out->dtype == pairs[p].want);
    if (out) CHECK_EQ_I(stack_mismatches((const td_tensor *const *)in, 3, 1, out), 0);
    td_tensor_release(out);
    for (int k = 0; k < 3; k++) td_tensor_release(in[k]);
  }

  /* 0-dim inputs, 0-size and size-1 dims, one input. */
  td_tensor *sc[4];
  for (int k = 0; k < 4; k++) sc[k] = td_tensor_full(0, NULL, k == 2 ? TD_INT32 : TD_INT16, k + 1);
  td_tensor *out = td_stack((const td_tensor *const *)sc, 4, -1);
  const int64_t four = 4;
  CHECK(same_shape(out, 1, &four) && out->dtype == TD_INT32);
  if (out) CHECK_EQ_I(stack_mismatches((const td_tensor *const *)sc, 4, 0, out), 0);
  td_tensor_release(out);
  for (int k = 0; k < 4; k++) td_tensor_release(sc[k]);
  const int64_t s0[2] = {0, 3}, s1[3] = {1, 3, 1};
  td_tensor *z[2] = {td_tensor_empty(2, s0, TD_FLOAT32), td_tensor_empty(2, s0, TD_FLOAT32)};
  out = td_stack((const td_tensor *const *)z, 2, 1);
  const int64_t want_z[3] = {0, 2, 3};
  CHECK(same_shape(out, 3, want_z));
  td_tensor_release(out);
  td_tensor *u[2] = {make(3, s1, TD_FLOAT64, EXPANDED, 0), make(3, s1, TD_FLOAT64, SLICED, 1)};
  out = td_stack((const td_tensor *const *)u, 1, 3);
  const int64_t want_u[4] = {1, 3, 1, 1};
  CHECK(same_shape(out, 4, want_u));
  if (out) CHECK_EQ_I(stack_mismatches((const td_tensor *const *)u, 1, 3, out), 0);
  td_tensor_release(out);
  out = td_stack((const td_tensor *const *)u, 2, 2);
  if (out) CHECK_EQ_I(stack_mismatches((const td_tensor *const *)u, 2, 2, out), 0);
  td_tensor_release(out);

  /* Errors. */
  const int64_t a23[2] = {2, 3}, a32[2] = {3, 2};
  td_tensor *e[3] = {td_tensor_empty(2, a23, TD_FLOAT32), td_tensor_empty(2, a23, TD_FLOAT32),
                     td_tensor_empty(2, a32, TD_FLOAT32)};
  td_clear_error();
  CHECK(td_stack((const td_tensor *const *)e, 3, 0) == NULL);
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  CHECK_ERROR("stack: tensors must have one shape, but tensor 0 has shape [2, 3] and tensor 2 "
              "has shape [3, 2]");
  CHECK(td_stack((const td_tensor *const *)e, 2, 3) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EINDEX);
  CHECK_ERROR("stack: dim 3 is out of range for stacking 2-dim tensors (valid: -3..2)");
  CHECK(td_stack((const td_tensor *const *)e, 2, -4) == NULL);
  CHECK(td_stack((const td_tensor *const *)e, 0, 0) == NULL);
  CHECK_ERROR("stack: expected a non-empty list of tensors, got 0");
  CHECK(td_stack(NULL, 2, 0) == NULL);
  const td_tensor *holes[2] = {e[0], NULL};
  CHECK(td_stack(holes, 2, 0) == NULL);
  CHECK_ERROR("stack: tensor 1 of the list is NULL");
  for (int k = 0; k < 3; k++) td_tensor_release(e[k]);
  for (int k = 0; k < 2; k++) td_tensor_release(u[k]);
  for (int k = 0; k < 2; k++) td_tensor_release(z[k]);
}

/* ---- cat ---------------------------------------------------------------------------- */

static int64_t cat_mismatches(const td_tensor *const *in, int32_t n, int32_t dim,
                              const td_tensor *out) {
  int64_t bad = 0, at = 0;
  for (int32_t k = 0; k < n; k++) {
    const td_tensor *t = in[k];
    if (t->ndim == 1 && t->shape[0] == 0) continue;
    if (t->ndim != out->ndim) return -1;
    if (td_tensor_numel(t) > 0) {
      int64_t i[TD_MAX_DIMS] = {0}, o[TD_MAX_DIMS];
      do {
        for (int32_t d = 0; d < t->ndim; d++) o[d] = d == dim ? i[d] + at : i[d];
        bad += rd(out, o) != as_dtype(out->dtype, rd(t, i));
      } while (next_index(t->ndim, t->shape, i));
    }
    at += t->shape[dim];
  }
  return at == out->shape[dim] ? bad : -1;
}

static void test_cat(void) {
  int64_t bad = 0, failed = 0;
  for (int di = 0; di < TD_NUM_DTYPES; di++)
    for (int lay = 0; lay < NUM_LAYOUTS; lay++)
      for (int32_t dim = -3; dim < 3; dim++) {
        const int32_t d = dim < 0 ? dim + 3 : dim;
        td_tensor *in[3];
        for (int k = 0; k < 3; k++) {
          int64_t shape[3] = {3, 4, 2};
          shape[d] = k == 1 ? 0 : k + 1; /* a 0-size piece in the middle */
          in[k] = make(3, shape, all_dtypes[di], (lay + k) % NUM_LAYOUTS, k);
        }
        td_tensor *out = td_cat((const td_tensor *const *)in, 3, dim);
        if (!out || out->dtype != all_dtypes[di]) failed++;
        else bad += cat_mismatches((const td_tensor *const *)in, 3, d, out) != 0;
        td_tensor_release(out);
        for (int k = 0; k < 3; k++) td_tensor_release(in[k]);
      }
  CHECK_EQ_I(failed, 0);
  CHECK_EQ_I(bad, 0);

  /* torch's legacy rule: 1-D empty tensors are skipped, but they still promote. */
  const int64_t a23[2] = {2, 3}, a13[2] = {1, 3}, zero = 0, a24[2] = {2, 4}, a331[3] = {3, 3, 1};
  td_tensor *l[4] = {make(2, a23, TD_INT32, TRANSPOSED, 0), td_tensor_empty(1, &zero, TD_FLOAT64),
                     make(2, a13, TD_UINT8, CONTIGUOUS, 1), td_tensor_empty(1, &zero, TD_INT8)};
  td_tensor *out = td_cat((const td_tensor *const *)l, 4, 0);
  const int64_t want[2] = {3, 3};
  CHECK(same_shape(out, 2, want) && out->dtype == TD_FLOAT64);
  if (out) CHECK_EQ_I(cat_mismatches((const td_tensor *const *)l, 4, 0, out), 0);
  td_tensor_release(out);
  out = td_cat((const td_tensor *const *)l + 1, 1, 0); /* only skipped ones */
  CHECK(same_shape(out, 1, &zero) && out->dtype == TD_FLOAT64);
  td_tensor_release(out);
  td_tensor *pair[2] = {l[1], l[3]};
  out = td_cat((const td_tensor *const *)pair, 2, -1);
  CHECK(same_shape(out, 1, &zero) && out->dtype == TD_FLOAT64);
  td_tensor_release(out);
  /* 1-D pieces, a single input. */
  const int64_t n5 = 5, n2 = 2;
  td_tensor *v[2] = {make(1, &n5, TD_BFLOAT16, SLICED, 0), make(1, &n2, TD_BFLOAT16, EXPANDED, 1)};
  out = td_cat((const td_tensor *const *)v, 2, 0);
  if (out) CHECK_EQ_I(cat_mismatches((const td_tensor *const *)v, 2, 0, out), 0);
  CHECK(out != NULL);
  td_tensor_release(out);
  out = td_cat((const td_tensor *const *)v, 1, 0);
  CHECK(out && same_bytes(out, out) && out->shape[0] == 5);
  td_tensor_release(out);

  /* Errors. */
  td_tensor *s = td_tensor_full(0, NULL, TD_FLOAT32, 1);
  td_tensor *e[4] = {l[0], s, td_tensor_empty(2, a24, TD_INT32), td_tensor_empty(3, a331, TD_INT32)};
  td_clear_error();
  CHECK(td_cat((const td_tensor *const *)e, 2, 0) == NULL);
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  CHECK_ERROR("cat: zero-dimensional tensor (at position 1) cannot be concatenated");
  const td_tensor *mismatch[2] = {l[0], e[2]};
  CHECK(td_cat(mismatch, 2, 0) == NULL);
  CHECK_ERROR("cat: sizes must match except in dim 0, but tensor 0 has shape [2, 3] and tensor 1 "
              "has shape [2, 4]");
  out = td_cat(mismatch, 2, 1);
  const int64_t want27[2] = {2, 7};
  CHECK(same_shape(out, 2, want27));
  td_tensor_release(out);
  const td_tensor *ndims[3] = {l[1], l[0], e[3]};
  CHECK(td_cat(ndims, 3, 0) == NULL);
  CHECK_ERROR("cat: sizes must match except in dim 0, but tensor 1 has shape [2, 3] and tensor 2 "
              "has shape [3, 3, 1]");
  CHECK(td_cat(mismatch, 2, 2) == NULL);
  CHECK_EQ_I(td_last_status(), TD_EINDEX);
  CHECK_ERROR("cat: dim 2 is out of range for a 2-dim tensor");
  CHECK(td_cat(mismatch, -1, 0) == NULL);
  CHECK_ERROR("cat: expected a non-empty list of tensors, got -1");
  const td_tensor *holes[2] = {NULL, l[0]};
  CHECK(td_cat(holes, 2, 0) == NULL);
  CHECK_ERROR("cat: tensor 0 of the list is NULL");
  td_tensor_release(e[2]);
  td_tensor_release(e[3]);
  td_tensor_release(s);
  for (int k = 0; k < 2; k++) td_tensor_release(v[k]);
  for (int k = 0; k < 4; k++) td_tensor_release(l[k]);
}

/* ---- pad ---------------------------------------------------------------------------- */

static int64_t pad_mismatches(const td_tensor *a, const int64_t *pads, int32_t npads,
                              double value, const td_tensor *out) {
  int64_t before[TD_MAX_DIMS] = {0}, shape[TD_MAX_DIMS];
  for (int32_t d = 0; d < a->ndim; d++) shape[d] = a->shape[d];
  for (int32_t i = 0; i < npads / 2; i++) {
    int32_t d = a->ndim - 1 - i;
    before[d] = pads[2 * i];
    shape[d] += pads[2 * i] + pads[2 * i + 1];
  }
  if (!same_shape(out, a->ndim, shape) || out->dtype != a->dtype) return -1;
  if (numel_of(a->ndim, shape) == 0) return 0;
  int64_t o[TD_MAX_DIMS] = {0}, i[TD_MAX_DIMS], bad = 0;
  do {
    bool inside = true;
    for (int32_t d = 0; d < a->ndim; d++) {
      i[d] = o[d] - before[d];
      inside = inside && i[d] >= 0 && i[d] < a->shape[d];
    }
    bad += rd(out, o) != (inside ? rd(a, i) : as_dtype(a->dtype, value));
  } while (next_index(a->ndim, shape, o));
  return bad;
}

static void test_pad(void) {
  const int64_t shape[3] = {3, 4, 5};
  const int64_t padsets[][6] = {
      {1, 2, 0, 0, 0, 0}, {0, 0, 2, 1, 1, 0}, {-1, -2, 1, 1, 0, 0}, {2, -3, -4, 1, 1, 1},
      {-5, 0, 0, 0, 0, 0}, {-2, -3, 0, 0, 0, 0}, {3, 3, 3, 3, 3, 3},
  };
  const int32_t counts[] = {2, 4, 4, 6, 2, 2, 6};
  int64_t bad = 0, failed = 0;
  for (int di = 0; di < TD_NUM_DTYPES; di++)
    for (int lay = 0; lay < NUM_LAYOUTS; lay++)
      for (size_t p = 0; p < sizeof counts / sizeof counts[0]; p++) {
        td_tensor *a = make(3, shape, all_dtypes[di], lay, di);
        td_tensor *out = td_pad(a, padsets[p], counts[p], -3);
        if (!out) failed++;
        else bad += pad_mismatches(a, padsets[p], counts[p], -3, out) != 0;
        td_tensor_release(out);
        td_tensor_release(a);
      }
  CHECK_EQ_I(failed, 0);
  CHECK_EQ_I(bad, 0);

  /* No pads is a copy; 0-size inputs; 0-dim. */
  td_tensor *a = make(3, shape, TD_INT16, TRANSPOSED, 0);
  td_tensor *out = td_pad(a, NULL, 0, 1);
  CHECK(out && pad_mismatches(a, NULL, 0, 1, out) == 0);
  CHECK(out && out->storage != a->storage);
  td_tensor_release(out);
  const int64_t s0[2] = {0, 2}, p0[4] = {1, 1, 2, 0};
  td_tensor *z = td_tensor_empty(2, s0, TD_FLOAT32);
  out = td_pad(z, p0, 4, 2.5);
  CHECK(out && pad_mismatches(z, p0, 4, 2.5, out) == 0 && out->shape[0] == 2);
  td_tensor_release(out);
  td_tensor *s = td_tensor_full(0, NULL, TD_BOOL, 1);
  out = td_pad(s, NULL, 0, 0);
  CHECK(out && out->ndim == 0 && rd(out, NULL) == 1);
  td_tensor_release(out);

  /* Errors. */
  const int64_t crop[2] = {-3, -3}, huge[2] = {INT64_MAX, 1};
  td_clear_error();
  CHECK(td_pad(a, p0, 3, 0) == NULL);
  CHECK_ERROR("pad: pads has 3 entries; it needs an even count");
  CHECK(td_pad(a, padsets[0], 8, 0) == NULL);
  CHECK_ERROR("pad: 8 pads cover 4 dims but the tensor has 3");
  CHECK(td_pad(s, p0, 2, 0) == NULL);
  CHECK_ERROR("pad: 2 pads cover 1 dims but the tensor has 0");
  CHECK(td_pad(a, crop, 2, 0) == NULL);
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  CHECK_ERROR("pad: dim 2 of size 5 padded by (-3, -3) leaves a negative size after cropping");
  CHECK(td_pad(a, huge, 2, 0) == NULL);
  CHECK(td_pad(a, NULL, 2, 0) == NULL);
  CHECK_ERROR("pad: the pads array is NULL");
  CHECK(td_pad(NULL, p0, 2, 0) == NULL);
  CHECK_ERROR("pad: the tensor is NULL");
  td_tensor_release(s);
  td_tensor_release(z);
  td_tensor_release(a);
}

/* ---- thread counts ------------------------------------------------------------------ */

static void test_threads(void) {
  const int64_t shape[2] = {300, 500};
  td_tensor *in[5];
  for (int k = 0; k < 5; k++) in[k] = make(2, shape, k == 3 ? TD_FLOAT64 : TD_FLOAT32, k % 3, k);
  const int64_t pads[4] = {3, -2, -1, 7};
  td_tensor *r1[5], *r3[5];
  int32_t saved = td_get_num_threads();
  for (int round = 0; round < 2; round++) {
    td_set_num_threads(round ? 3 : 1);
    td_tensor **r = round ? r3 : r1;
    r[0] = td_stack((const td_tensor *const *)in, 5, 0);
    r[1] = td_stack((const td_tensor *const *)in, 5, 2);
    r[2] = td_cat((const td_tensor *const *)in, 5, 0);
    r[3] = td_cat((const td_tensor *const *)in, 5, 1);
    r[4] = td_pad(in[1], pads, 4, 9);
  }
  td_set_num_threads(saved);
  /* Several pieces per input: the split must not show in the values either. */
  CHECK(r1[0] && stack_mismatches((const td_tensor *const *)in, 5, 0, r1[0]) == 0);
  CHECK(r1[1] && stack_mismatches((const td_tensor *const *)in, 5, 2, r1[1]) == 0);
  CHECK(r1[3] && cat_mismatches((const td_tensor *const *)in, 5, 1, r1[3]) == 0);
  CHECK(r3[2] && cat_mismatches((const td_tensor *const *)in, 5, 0, r3[2]) == 0);
  CHECK(r3[4] && pad_mismatches(in[1], pads, 4, 9, r3[4]) == 0);
  int64_t differ = 0;
  for (int k = 0; k < 5; k++) {
    differ += !same_bytes(r1[k], r3[k]);
    td_tensor_release(r1[k]);
    td_tensor_release(r3[k]);
  }
  CHECK_EQ_I(differ, 0);
  for (int k = 0; k < 5; k++) td_tensor_release(in[k]);
}

/* Joins only read their inputs: read-only ones are fine. */
static void test_read_only_inputs(void) {
  ro_file ro;
  CHECK(ro_open(&ro, 4));
  if (ro.t) {
    const td_tensor *two[2] = {ro.t, ro.t};
    td_tensor *out = td_stack(two, 2, 0);
    int64_t at[2] = {1, 3};
    CHECK(out && td_tensor_is_writable(out) && rd(out, at) == 3);
    td_tensor_release(out);
    out = td_cat(two, 2, 0);
    CHECK(out && out->shape[0] == 8);
    td_tensor_release(out);
    const int64_t pads[2] = {1, 0};
    out = td_pad(ro.t, pads, 2, 0);
    int64_t k = 4;
    CHECK(out && rd(out, &k) == 3);
    td_tensor_release(out);
  }
  ro_close(&ro);
}

int main(void) {
  test_stack();
  test_cat();
  test_pad();
  test_read_only_inputs();
  test_threads();
  CHECK_SUMMARY();
}
