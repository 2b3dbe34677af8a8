/* test_dict_join.c: td_dict_stack, td_dict_cat, td_dict_split and td_dict_pad: shapes,
 * dtypes and element values read back, nested containers, non-tensor values (uniform
 * and stacked), the error messages, and that everything made is released. */
#include "dicts.h"

/* ---- helpers (shared ones in dicts.h) -------------------------------------------- */


/* {a: float32 [3, 2] from start, b: int64 [3] from 10 * start} with batch [3]. */
static td_dict *simple(double start, int32_t a_dtype, int32_t b_dtype) {
  const int64_t b3 = 3, s32[2] = {3, 2};
  td_dict *d = td_dict_new(1, &b3);
  put(d, "a", seq(2, s32, a_dtype, start));
  put(d, "b", seq(1, &b3, b_dtype, 10 * start));
  return d;
}

/* ---- stack ------------------------------------------------------------------------ */

static void test_stack(void) {
  const int64_t before = td_live_bytes();
  td_dict *d1 = simple(0, TD_FLOAT32, TD_INT64);
  td_dict *d2 = td_dict_new(1, (const int64_t[]){3}); /* keys in another order */
  put(d2, "b", seq(1, (const int64_t[]){3}, TD_INT32, 100));
  put(d2, "a", seq(2, (const int64_t[]){3, 2}, TD_FLOAT64, 100));
  td_dict *ds[2] = {d1, d2};

  td_dict *r = td_dict_stack(ds, 2, 0);
  CHECK(BATCH_IS(r, 2, 3));
  CHECK(r && td_dict_head_borrow(r)->nkeys == 2);
  int64_t klen;
  CHECK(r && strcmp(td_dict_key_borrow(r, 0, &klen), "a") == 0); /* the first's order */
  const td_tensor *a = leaf(r, "a"), *b = leaf(r, "b");
  CHECK(SHAPE_IS(a, 2, 3, 2) && a->dtype == TD_FLOAT64);          /* float32 + float64 */
  CHECK(SHAPE_IS(b, 2, 3) && b->dtype == TD_INT64);               /* int64 + int32 */
  int64_t bad = 0;
  for (int64_t s = 0; s < 2; s++)
    for (int64_t i = 0; i < 3; i++) {
      for (int64_t k = 0; k < 2; k++) bad += EL(a, s, i, k) != 100.0 * s + 2 * i + k;
      bad += EL(b, s, i) != 100.0 * s + i + (s ? 0 : 0);
    }
  /* b: d1 has 0, 1, 2 (10 * 0 start), d2 has 100, 101, 102 */
  CHECK_EQ_I(bad, 0);
  td_dict_release(r);

  /* dim 1 (= the batch ndim): the new dim goes after the batch dims */
  r = td_dict_stack(ds, 2, 1);
  CHECK(BATCH_IS(r, 3, 2));
  a = leaf(r, "a");
  CHECK(SHAPE_IS(a, 3, 2, 2));
  bad = 0;
  for (int64_t i = 0; i < 3; i++)
    for (int64_t s = 0; s < 2; s++)
      for (int64_t k = 0; k < 2; k++) bad += EL(a, i, s, k) != 100.0 * s + 2 * i + k;
  CHECK_EQ_I(bad, 0);
  td_dict_release(r);

  /* one input; three inputs with integer promotion (int8 + uint8 -> int16) */
  r = td_dict_stack(ds, 1, 0);
  CHECK(BATCH_IS(r, 1, 3) && SHAPE_IS(leaf(r, "a"), 1, 3, 2) &&
        leaf(r, "a")->dtype == TD_FLOAT32);
  td_dict_release(r);
  td_dict *e1 = simple(1, TD_INT8, TD_INT8), *e2 = simple(2, TD_UINT8, TD_BOOL),
          *e3 = simple(3, TD_INT8, TD_INT8);
  td_dict *es[3] = {e1, e2, e3};
  r = td_dict_stack(es, 3, 0);
  CHECK(r && leaf(r, "a")->dtype == TD_INT16 && leaf(r, "b")->dtype == TD_INT8);
  CHECK(r && EL(leaf(r, "a"), 2, 2, 1) == 3 + 5 && EL(leaf(r, "b"), 1, 0) == 1);
  td_dict_release(r);

  /* the result is unlocked and unnamed; the device is kept when all agree */
  td_dict_set_locked(d1, 1);
  CHECK(td_dict_set_names(d1, (const char *const[]){"time"}) == 0);
  CHECK(td_dict_set_device(d1, TD_DEVICE_CPU, 0) == 0);
  r = td_dict_stack(ds, 2, 0);
  CHECK(r && !td_dict_head_borrow(r)->locked && !td_dict_head_borrow(r)->has_names);
  CHECK(r && td_dict_head_borrow(r)->device_type == TD_DEVICE_NONE); /* d2 has none */
  td_dict_release(r);
  CHECK(td_dict_set_device(d2, TD_DEVICE_CPU, 0) == 0);
  r = td_dict_stack(ds, 2, 1);
  CHECK(r && td_dict_head_borrow(r)->device_type == TD_DEVICE_CPU);
  CHECK(r && td_dict_set_tensor(r, "new", 3, leaf(r, "b")) >= 0); /* not locked */
  td_dict_release(r);
  CHECK(td_dict_head_borrow(d1)->locked && td_dict_head_borrow(d1)->has_names); /* inputs kept */

  /* batch size [] stacks into [n] */
  td_dict *z1 = td_dict_new(0, NULL), *z2 = td_dict_new(0, NULL);
  put(z1, "x", td_tensor_full(0, NULL, TD_FLOAT32, 1.5));
  put(z2, "x", td_tensor_full(0, NULL, TD_FLOAT32, 2.5));
  td_dict *zs[2] = {z1, z2};
  r = td_dict_stack(zs, 2, 0);
  CHECK(BATCH_IS(r, 2) && EL(leaf(r, "x"), 1) == 2.5);
  td_dict_release(r);
  td_dict_release(z1), td_dict_release(z2);

  td_dict_release(d1), td_dict_release(d2);
  td_dict_release(e1), td_dict_release(e2), td_dict_release(e3);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* {a: [3], next: {obs: [3, 4, 2], deep: {x: [3, 4]}} batch [3, 4]} batch [3]. */
static td_dict *nested(double start, int64_t inner) {
  const int64_t b3 = 3;
  td_dict *d = td_dict_new(1, &b3);
  put(d, "a", seq(1, &b3, TD_FLOAT32, start));
  td_dict *next = td_dict_new(2, (const int64_t[]){3, inner});
  put(next, "obs", seq(3, (const int64_t[]){3, inner, 2}, TD_FLOAT32, start));
  td_dict *deep = td_dict_new(2, (const int64_t[]){3, inner});
  put(deep, "x", seq(2, (const int64_t[]){3, inner}, TD_INT32, start));
  put_dict(next, "deep", deep);
  put_dict(d, "next", next);
  return d;
}

static void test_stack_nested(void) {
  const int64_t before = td_live_bytes();
  td_dict *d1 = nested(0, 4), *d2 = nested(1000, 4);
  td_dict *ds[2] = {d1, d2};
  for (int32_t dim = 0; dim <= 1; dim++) {
    td_dict *r = td_dict_stack(ds, 2, dim);
    CHECK(dim == 0 ? BATCH_IS(r, 2, 3) : BATCH_IS(r, 3, 2));
    CHECK_EQ_I(kind(r, "next"), TD_ENTRY_DICT);
    td_dict *next = kid(r, "next");
    CHECK(dim == 0 ? BATCH_IS(next, 2, 3, 4) : BATCH_IS(next, 3, 2, 4));
    CHECK(next && !td_dict_head_borrow(next)->locked);
    const td_tensor *obs = leaf(next, "obs");
    CHECK(dim == 0 ? SHAPE_IS(obs, 2, 3, 4, 2) : SHAPE_IS(obs, 3, 2, 4, 2));
    int64_t bad = 0;
    for (int64_t s = 0; s < 2; s++)
      for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 4; j++)
          for (int64_t k = 0; k < 2; k++) {
            double want = 1000.0 * s + 8 * i + 2 * j + k;
            bad += (dim == 0 ? EL(obs, s, i, j, k) : EL(obs, i, s, j, k)) != want;
          }
    CHECK_EQ_I(bad, 0);
    td_dict *deep = kid(next, "deep");
    CHECK(dim == 0 ? BATCH_IS(deep, 2, 3, 4) : BATCH_IS(deep, 3, 2, 4));
    const td_tensor *x = leaf(deep, "x");
    CHECK(x && x->dtype == TD_INT32);
    CHECK(dim == 0 ? EL(x, 1, 2, 3) == 1000 + 11 : EL(x, 2, 1, 3) == 1000 + 11);
    td_dict_release(deep);
    td_dict_release(next);
    td_dict_release(r);
  }

  /* nested batch sizes must agree too */
  td_dict *d3 = nested(0, 5);
  td_dict *bad_ds[3] = {d1, d2, d3};
  CHECK(td_dict_stack(bad_ds, 3, 0) == NULL);
  CHECK_MSG("stack: key 'next' (a TensorDict) has batch size [3, 5] in TensorDict 3 but "
            "[3, 4] in the first");
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  td_dict_release(d3);

  td_dict_release(d1), td_dict_release(d2);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- errors of stack and cat -------------------------------------------------------- */

static void test_join_errors(void) {
  const int64_t before = td_live_bytes();
  const int64_t b3 = 3, b2 = 2;
  td_dict *d1 = simple(0, TD_FLOAT32, TD_INT64);
  td_dict *d2 = td_dict_new(1, &b3);
  put(d2, "a", seq(2, (const int64_t[]){3, 2}, TD_FLOAT32, 0));
  put(d2, "c", seq(1, &b3, TD_FLOAT32, 0));
  td_dict *ds[3] = {d1, d2, NULL};

  CHECK(td_dict_stack(ds, 2, 0) == NULL);
  CHECK_MSG("stack: the key sets differ: TensorDict 2 lacks 'b' and has 'c' not in the first");
  CHECK_EQ_I(td_last_status(), TD_EINVAL);
  ds[1] = d1, ds[2] = d2;
  CHECK(td_dict_cat(ds, 3, 0) == NULL);
  CHECK_MSG("cat: the key sets differ: TensorDict 3 lacks 'b' and has 'c' not in the first");

  /* only missing, only extra, many */
  td_dict *only_a = td_dict_new(1, &b3);
  put(only_a, "a", seq(2, (const int64_t[]){3, 2}, TD_FLOAT32, 0));
  td_dict *pair[2] = {d1, only_a};
  CHECK(td_dict_stack(pair, 2, 0) == NULL);
  CHECK_MSG("stack: the key sets differ: TensorDict 2 lacks 'b'");
  pair[0] = only_a, pair[1] = d1;
  CHECK(td_dict_stack(pair, 2, 0) == NULL);
  CHECK_MSG("stack: the key sets differ: TensorDict 2 has 'b' not in the first");
  td_dict *many = td_dict_new(1, &b3);
  const char *names[7] = {"k1", "k2", "k3", "k4", "k5", "k6", "a"};
  for (int i = 0; i < 7; i++) put(many, names[i], seq(1, &b3, TD_FLOAT32, 0));
  pair[0] = only_a, pair[1] = many;
  CHECK(td_dict_stack(pair, 2, 0) == NULL);
  CHECK_MSG("stack: the key sets differ: TensorDict 2 has 'k1', 'k2', 'k3', 'k4' and 2 more "
            "not in the first");
  td_dict_release(many);

  /* nested keys as dotted paths */
  td_dict *n1 = nested(0, 4), *n2 = nested(0, 4);
  td_dict *next = kid(n2, "next");
  td_dict *deep = kid(next, "deep");
  put(deep, "y", seq(2, (const int64_t[]){3, 4}, TD_FLOAT32, 0));
  CHECK(td_dict_del(next, find(next, "obs")) == 0);
  td_dict *np[2] = {n1, n2};
  CHECK(td_dict_stack(np, 2, 0) == NULL);
  CHECK_MSG("stack: the key sets differ: TensorDict 2 lacks 'next.obs'");
  put(next, "obs", seq(3, (const int64_t[]){3, 4, 2}, TD_FLOAT32, 0));
  CHECK(td_dict_stack(np, 2, 0) == NULL);
  CHECK_MSG("stack: the key sets differ: TensorDict 2 has 'next.deep.y' not in the first");
  CHECK(td_dict_del(deep, find(deep, "y")) == 0);
  /* kinds must match */
  put(next, "obs", seq(2, (const int64_t[]){3, 4}, TD_FLOAT32, 0));
  CHECK(td_dict_set_value(deep, "x", 1, "\"text\"") >= 0);
  CHECK(td_dict_stack(np, 2, 0) == NULL);
  CHECK_MSG("stack: key 'next.obs' has shape [3, 4] in TensorDict 2 but [3, 4, 2] in the "
            "first");
  put(next, "obs", seq(3, (const int64_t[]){3, 4, 2}, TD_FLOAT32, 0));
  CHECK(td_dict_stack(np, 2, 0) == NULL);
  CHECK_MSG("stack: key 'next.deep.x' is a tensor in the first TensorDict but a non-tensor "
            "value in TensorDict 2");
  td_dict *sub = td_dict_new(2, (const int64_t[]){3, 4});
  put_dict(deep, "x", sub);
  CHECK(td_dict_cat(np, 2, 0) == NULL);
  CHECK_MSG("cat: key 'next.deep.x' is a tensor in the first TensorDict but a TensorDict in "
            "TensorDict 2");
  td_dict_release(deep), td_dict_release(next);
  td_dict_release(n1), td_dict_release(n2);

  /* batch sizes */
  td_dict *short1 = td_dict_new(1, &b2);
  put(short1, "a", seq(2, (const int64_t[]){2, 2}, TD_FLOAT32, 0));
  put(short1, "b", seq(1, &b2, TD_INT64, 0));
  td_dict *three[3] = {d1, d1, short1};
  CHECK(td_dict_stack(three, 3, 0) == NULL);
  CHECK_MSG("stack: TensorDict 3 has batch size [2] but the first has [3]");
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  td_dict *c = td_dict_cat(three, 3, 0); /* cat along dim 0: [3] + [3] + [2] is fine */
  CHECK(BATCH_IS(c, 8));
  td_dict_release(c);

  /* leaf shapes past the batch */
  td_dict *wide = td_dict_new(1, &b3);
  put(wide, "a", seq(2, (const int64_t[]){3, 5}, TD_FLOAT32, 0));
  put(wide, "b", seq(1, &b3, TD_INT64, 0));
  pair[0] = d1, pair[1] = wide;
  CHECK(td_dict_stack(pair, 2, 0) == NULL);
  CHECK_MSG("stack: key 'a' has shape [3, 5] in TensorDict 2 but [3, 2] in the first");
  CHECK(td_dict_cat(pair, 2, 0) == NULL);
  CHECK_MSG("cat: key 'a' has shape [3, 5] in TensorDict 2 but [3, 2] in the first (sizes "
            "must match except in dim 1)");
  td_dict_release(wide);

  /* arguments */
  CHECK(td_dict_stack(pair, 0, 0) == NULL);
  CHECK_MSG("stack: expected a non-empty list of TensorDicts, got 0");
  CHECK(td_dict_stack(NULL, 2, 0) == NULL);
  CHECK_ERROR("non-empty list");
  td_dict *with_null[2] = {d1, NULL};
  CHECK(td_dict_cat(with_null, 2, 0) == NULL);
  CHECK_MSG("cat: TensorDict 2 of the list is NULL");
  pair[0] = d1, pair[1] = d1;
  CHECK(td_dict_stack(pair, 2, 2) == NULL);
  CHECK_MSG("stack: dim 3 is out of range for batch size [3] (dims 1..2)");
  CHECK_EQ_I(td_last_status(), TD_EINDEX);
  CHECK(td_dict_stack(pair, 2, -1) == NULL);
  CHECK_ERROR("dim 0 is out of range");
  CHECK(td_dict_cat(pair, 2, 1) == NULL);
  CHECK_MSG("cat: dim 2 is out of range for batch size [3] (dims 1..1)");
  td_dict *z = td_dict_new(0, NULL), *zs[2] = {z, z};
  CHECK(td_dict_cat(zs, 2, 0) == NULL);
  CHECK_ERROR("cannot be concatenated");
  td_dict_release(z);

  /* 16 batch dims cannot take one more */
  int64_t ones[TD_MAX_DIMS];
  for (int i = 0; i < TD_MAX_DIMS; i++) ones[i] = 1;
  td_dict *full = td_dict_new(TD_MAX_DIMS, ones), *fs[2] = {full, full};
  CHECK(td_dict_stack(fs, 2, 0) == NULL);
  CHECK_ERROR("already has 16 dims");
  td_dict *fc = td_dict_cat(fs, 2, 3);
  CHECK(fc && td_dict_head_borrow(fc)->shape[3] == 2);
  td_dict_release(fc);
  td_dict_release(full);

  td_dict_release(only_a), td_dict_release(short1);
  td_dict_release(d1), td_dict_release(d2);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* A leaf failing after others were joined: what was made is released. */
static void test_partial_failure(void) {
  const int64_t before = td_live_bytes();
  const int64_t b2 = 2;
  td_dict *d = td_dict_new(1, &b2);
  put(d, "a", seq(1, &b2, TD_FLOAT32, 0));
  td_dict *child = td_dict_new(1, &b2);
  put(child, "v", seq(1, &b2, TD_FLOAT32, 0));
  put_value(child, "u", "1");
  put_values(child, "w", 2, (const char *const[]){"\"p\"", "\"q\""}, (const int64_t[]){0, 1});
  put_dict(d, "child", child);
  /* a huge leaf that is a stride-0 view of 2^59 elements (a view may not hold more: its
   * byte count must fit): joining two needs 2^60 */
  td_tensor *one = td_tensor_full(1, (const int64_t[]){1}, TD_FLOAT32, 0), big;
  CHECK(td_tensor_expand(one, 3, (const int64_t[]){2, 1 << 29, 1 << 29}, &big) == 0);
  CHECK(td_dict_set_tensor(d, "z", 1, &big) >= 0);
  td_tensor_release(one);
  /* child.w (a stacked value) is joined into a new one before z fails: dropped */
  td_dict *ds[2] = {d, d};
  CHECK(td_dict_stack(ds, 2, 0) == NULL);
  CHECK_ERROR("stack: key 'z': ");
  CHECK_ERROR("too many elements");
  CHECK(td_dict_cat(ds, 2, 0) == NULL);
  CHECK_ERROR("cat: key 'z': ");
  CHECK(td_dict_pad(d, (const int64_t[]){1, 0}, 2, 0) == NULL); /* checked before any work */
  CHECK_MSG("pad: cannot pad the stacked non-tensor value 'child.w'");
  /* growing z by 3 rows: 5 * 2^58 elements, more than a tensor holds; a is padded first */
  td_dict *plain = td_dict_new(1, &b2);
  put(plain, "a", seq(1, &b2, TD_FLOAT32, 0));
  CHECK(td_dict_set_tensor(plain, "z", 1, &big) >= 0);
  CHECK(td_dict_pad(plain, (const int64_t[]){0, 3}, 2, 0) == NULL);
  CHECK_ERROR("pad: key 'z': ");
  CHECK_ERROR("too many elements");
  td_dict_release(plain);
  td_dict_release(d);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- non-tensor values ------------------------------------------------------------- */

static void test_values_stack(void) {
  const int64_t before = td_live_bytes();
  const int64_t b3 = 3;
  td_dict *d1 = td_dict_new(1, &b3), *d2 = td_dict_new(1, &b3), *d3 = td_dict_new(1, &b3);
  put_value(d1, "same", "\"x\""), put_value(d2, "same", "\"x\""), put_value(d3, "same", "\"x\"");
  put_value(d1, "diff", "\"x\""), put_value(d2, "diff", "\"y\""), put_value(d3, "diff", "\"x\"");
  put_value(d1, "mix", "\"x\"");
  put_values(d2, "mix", 2, (const char *const[]){"\"p\"", "\"q\""}, (const int64_t[]){1, 0, 1});
  put_value(d3, "mix", "\"x\"");
  td_dict *ds[3] = {d1, d2, d3};

  td_dict *r = td_dict_stack(ds, 3, 0);
  CHECK(BATCH_IS(r, 3, 3));
  /* equal everywhere: uniform, the text shared with the first */
  CHECK_EQ_I(kind(r, "same"), TD_ENTRY_VALUE);
  CHECK(r && text(r, "same", 0) == text(d1, "same", 0));
  CHECK(leaf(r, "same") == NULL);
  /* uniform but different: stacked, one text per input, positions by row */
  CHECK_EQ_I(kind(r, "diff"), TD_ENTRY_VALUES);
  CHECK_EQ_I(ntexts(r, "diff"), 3);
  CHECK(strcmp(text(r, "diff", 0), "\"x\"") == 0 && strcmp(text(r, "diff", 1), "\"y\"") == 0 &&
        strcmp(text(r, "diff", 2), "\"x\"") == 0);
  const td_tensor *p = leaf(r, "diff");
  CHECK(SHAPE_IS(p, 3, 3) && p->dtype == TD_INT64);
  int64_t bad = 0;
  for (int64_t s = 0; s < 3; s++)
    for (int64_t i = 0; i < 3; i++) bad += EL(p, s, i) != (double)s;
  CHECK_EQ_I(bad, 0);
  /* uniform, stacked, uniform: texts x, p, q, x; the stacked one's positions offset by 1 */
  CHECK_EQ_I(kind(r, "mix"), TD_ENTRY_VALUES);
  CHECK_EQ_I(ntexts(r, "mix"), 4);
  CHECK(strcmp(text(r, "mix", 1), "\"p\"") == 0 && strcmp(text(r, "mix", 2), "\"q\"") == 0 &&
        strcmp(text(r, "mix", 3), "\"x\"") == 0);
  p = leaf(r, "mix");
  const double want_mix[3][3] = {{0, 0, 0}, {2, 1, 2}, {3, 3, 3}};
  bad = 0;
  for (int64_t s = 0; s < 3; s++)
    for (int64_t i = 0; i < 3; i++) bad += EL(p, s, i) != want_mix[s][i];
  CHECK_EQ_I(bad, 0);
  /* the text of each element reads back */
  CHECK(strcmp(text(r, "mix", (int64_t)EL(p, 1, 0)), "\"q\"") == 0);
  td_dict_release(r);

  /* along dim 1 */
  r = td_dict_stack(ds, 3, 1);
  p = leaf(r, "mix");
  CHECK(BATCH_IS(r, 3, 3) && SHAPE_IS(p, 3, 3));
  bad = 0;
  for (int64_t s = 0; s < 3; s++)
    for (int64_t i = 0; i < 3; i++) bad += EL(p, i, s) != want_mix[s][i];
  CHECK_EQ_I(bad, 0);
  /* stacking the result again keeps working: positions of stacked values follow */
  td_dict *again[2] = {r, r};
  td_dict *rr = td_dict_stack(again, 2, 0);
  CHECK(BATCH_IS(rr, 2, 3, 3));
  CHECK_EQ_I(ntexts(rr, "mix"), 8);
  CHECK(EL(leaf(rr, "mix"), 1, 1, 2) == 4 + want_mix[2][1]);
  CHECK_EQ_I(kind(rr, "same"), TD_ENTRY_VALUE);
  td_dict_release(rr);
  td_dict_release(r);

  /* a non-tensor value in a nested container */
  td_dict *n1 = nested(0, 4), *n2 = nested(0, 4);
  td_dict *x1 = kid(n1, "next"), *x2 = kid(n2, "next");
  put_value(x1, "tag", "1"), put_value(x2, "tag", "2");
  td_dict *np[2] = {n1, n2};
  r = td_dict_stack(np, 2, 1);
  td_dict *rn = kid(r, "next");
  CHECK_EQ_I(kind(rn, "tag"), TD_ENTRY_VALUES);
  p = leaf(rn, "tag");
  CHECK(SHAPE_IS(p, 3, 2, 4) && EL(p, 2, 1, 3) == 1 && EL(p, 0, 0, 1) == 0);
  td_dict_release(rn), td_dict_release(r);
  td_dict_release(x1), td_dict_release(x2);
  td_dict_release(n1), td_dict_release(n2);

  td_dict_release(d1), td_dict_release(d2), td_dict_release(d3);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- cat ---------------------------------------------------------------------------- */

static void test_cat(void) {
  const int64_t before = td_live_bytes();
  /* dim 0: batch [2, 3] + [1, 3] */
  td_dict *d1 = td_dict_new(2, (const int64_t[]){2, 3}), *d2 = td_dict_new(2, (const int64_t[]){1, 3});
  put(d1, "a", seq(3, (const int64_t[]){2, 3, 2}, TD_FLOAT32, 0));
  put(d2, "a", seq(3, (const int64_t[]){1, 3, 2}, TD_FLOAT16, 100));
  put(d1, "m", seq(2, (const int64_t[]){2, 3}, TD_BOOL, 0));
  put(d2, "m", seq(2, (const int64_t[]){1, 3}, TD_BOOL, 1));
  td_dict *c1 = td_dict_new(3, (const int64_t[]){2, 3, 5}), *c2 = td_dict_new(3, (const int64_t[]){1, 3, 5});
  put(c1, "x", seq(3, (const int64_t[]){2, 3, 5}, TD_INT16, 0));
  put(c2, "x", seq(3, (const int64_t[]){1, 3, 5}, TD_INT16, 1000));
  put_dict(d1, "child", c1), put_dict(d2, "child", c2);
  put_values(d1, "v", 2, (const char *const[]){"\"a\"", "\"b\""},
             (const int64_t[]){0, 1, 1, 0, 0, 1});
  put_values(d2, "v", 1, (const char *const[]){"\"c\""}, (const int64_t[]){0, 0, 0});
  put_value(d1, "u", "true"), put_value(d2, "u", "true");
  put_value(d1, "w", "1"), put_value(d2, "w", "2");
  td_dict *ds[2] = {d1, d2};

  td_dict *r = td_dict_cat(ds, 2, 0);
  CHECK(BATCH_IS(r, 3, 3));
  const td_tensor *a = leaf(r, "a");
  CHECK(SHAPE_IS(a, 3, 3, 2) && a->dtype == TD_FLOAT32);
  int64_t bad = 0;
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 3; j++)
      for (int64_t k = 0; k < 2; k++)
        bad += EL(a, i, j, k) != (i < 2 ? 6.0 * i + 2 * j + k : 100.0 + 2 * j + k);
  CHECK_EQ_I(bad, 0);
  CHECK(leaf(r, "m")->dtype == TD_BOOL && EL(leaf(r, "m"), 2, 0) == 1 && EL(leaf(r, "m"), 0, 0) == 0);
  td_dict *rc = kid(r, "child");
  CHECK(BATCH_IS(rc, 3, 3, 5));
  CHECK(EL(leaf(rc, "x"), 2, 1, 4) == 1000 + 9 && EL(leaf(rc, "x"), 1, 2, 3) == 15 + 13);
  td_dict_release(rc);
  /* stacked + stacked: the second's positions offset by the first's 2 texts */
  CHECK_EQ_I(kind(r, "v"), TD_ENTRY_VALUES);
  CHECK_EQ_I(ntexts(r, "v"), 3);
  CHECK(strcmp(text(r, "v", 2), "\"c\"") == 0);
  const td_tensor *p = leaf(r, "v");
  const double want_v[3][3] = {{0, 1, 1}, {0, 0, 1}, {2, 2, 2}};
  bad = 0;
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 3; j++) bad += EL(p, i, j) != want_v[i][j];
  CHECK(SHAPE_IS(p, 3, 3));
  CHECK_EQ_I(bad, 0);
  CHECK_EQ_I(kind(r, "u"), TD_ENTRY_VALUE);
  CHECK(strcmp(text(r, "u", 0), "true") == 0);
  CHECK_EQ_I(kind(r, "w"), TD_ENTRY_VALUES);
  CHECK(EL(leaf(r, "w"), 2, 2) == 1 && EL(leaf(r, "w"), 1, 2) == 0);
  td_dict_release(r);

  /* dim 1 needs equal dim 0 */
  CHECK(td_dict_cat(ds, 2, 1) == NULL);
  CHECK_MSG("cat: TensorDict 2 has batch size [1, 3] but the first has [2, 3] (sizes must "
            "match except in dim 2)");
  td_dict *e2 = td_dict_new(2, (const int64_t[]){2, 1});
  put(e2, "a", seq(3, (const int64_t[]){2, 1, 2}, TD_FLOAT64, 50));
  put(e2, "m", seq(2, (const int64_t[]){2, 1}, TD_BOOL, 0));
  td_dict *ec = td_dict_new(3, (const int64_t[]){2, 1, 5});
  put(ec, "x", seq(3, (const int64_t[]){2, 1, 5}, TD_INT16, 0));
  put_dict(e2, "child", ec);
  put_value(e2, "v", "\"e\"");
  put_value(e2, "u", "true");
  put_value(e2, "w", "1");
  ds[1] = e2;
  r = td_dict_cat(ds, 2, 1);
  CHECK(BATCH_IS(r, 2, 4));
  a = leaf(r, "a");
  CHECK(SHAPE_IS(a, 2, 4, 2) && a->dtype == TD_FLOAT64);
  CHECK(EL(a, 1, 3, 1) == 50 + 3 && EL(a, 1, 2, 1) == 6 + 4 + 1);
  p = leaf(r, "v"); /* a uniform input after a stacked one: its text's index, 2 */
  CHECK_EQ_I(ntexts(r, "v"), 3);
  CHECK(SHAPE_IS(p, 2, 4) && EL(p, 0, 3) == 2 && EL(p, 1, 3) == 2 && EL(p, 1, 1) == 0);
  CHECK_EQ_I(kind(r, "w"), TD_ENTRY_VALUE);
  td_dict_release(r);

  /* one input: a copy, not the same leaves */
  r = td_dict_cat(ds, 1, 0);
  CHECK(BATCH_IS(r, 2, 3) && leaf(r, "a") && leaf(r, "a")->storage != leaf(d1, "a")->storage);
  td_dict_release(r);

  /* nested mismatch in cat: the message names the dim */
  td_dict *f2 = td_dict_new(2, (const int64_t[]){1, 3});
  put(f2, "a", seq(3, (const int64_t[]){1, 3, 2}, TD_FLOAT32, 0));
  put(f2, "m", seq(2, (const int64_t[]){1, 3}, TD_BOOL, 0));
  put_dict(f2, "child", td_dict_new(3, (const int64_t[]){1, 3, 4}));
  put_value(f2, "v", "0"), put_value(f2, "u", "true"), put_value(f2, "w", "1");
  ds[1] = f2;
  CHECK(td_dict_cat(ds, 2, 0) == NULL);
  CHECK_MSG("cat: key 'child' (a TensorDict) has batch size [1, 3, 4] in TensorDict 2 but "
            "[2, 3, 5] in the first (sizes must match except in dim 1)");
  td_dict_release(f2);

  td_dict_release(e2);
  td_dict_release(d1), td_dict_release(d2);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- split -------------------------------------------------------------------------- */

static void test_split(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = td_dict_new(2, (const int64_t[]){5, 2});
  put(d, "a", seq(3, (const int64_t[]){5, 2, 3}, TD_FLOAT32, 0));
  td_dict *c = td_dict_new(3, (const int64_t[]){5, 2, 4});
  put(c, "x", seq(3, (const int64_t[]){5, 2, 4}, TD_INT32, 0));
  put_dict(d, "child", c);
  put_values(d, "v", 5, (const char *const[]){"0", "1", "2", "3", "4"},
             (const int64_t[]){0, 0, 1, 1, 2, 2, 3, 3, 4, 4});
  put_value(d, "u", "null");
  const td_tensor *da = leaf(d, "a");

  td_dict *out[3] = {NULL, NULL, NULL};
  CHECK(td_dict_split(d, 0, 3, (const int64_t[]){2, 0, 3}, out) == 0);
  CHECK(BATCH_IS(out[0], 2, 2) && BATCH_IS(out[1], 0, 2) && BATCH_IS(out[2], 3, 2));
  const td_tensor *a2 = leaf(out[2], "a");
  CHECK(SHAPE_IS(a2, 3, 2, 3) && a2->storage == da->storage); /* a view */
  CHECK(EL(a2, 0, 1, 2) == 12 + 3 + 2);
  CHECK(td_tensor_write_f64((td_tensor *)a2, (const int64_t[]){0, 0, 0}, -7) == 0);
  CHECK(EL(da, 2, 0, 0) == -7); /* writes through the piece reach d */
  CHECK(SHAPE_IS(leaf(out[1], "a"), 0, 2, 3));
  td_dict *pc = kid(out[2], "child");
  CHECK(BATCH_IS(pc, 3, 2, 4) && EL(leaf(pc, "x"), 2, 1, 3) == 32 + 4 + 3);
  td_dict_release(pc);
  CHECK_EQ_I(kind(out[2], "v"), TD_ENTRY_VALUES);
  const td_tensor *pv = leaf(out[2], "v");
  CHECK(SHAPE_IS(pv, 3, 2) && EL(pv, 0, 1) == 2 && EL(pv, 2, 0) == 4);
  CHECK(strcmp(text(out[2], "v", (int64_t)EL(pv, 1, 1)), "3") == 0);
  CHECK_EQ_I(kind(out[0], "u"), TD_ENTRY_VALUE);
  for (int k = 0; k < 3; k++) td_dict_release(out[k]);

  /* along dim 1, and a piece holding the storage after d is gone */
  td_dict *o2[2] = {NULL, NULL};
  CHECK(td_dict_split(d, 1, 2, (const int64_t[]){1, 1}, o2) == 0);
  CHECK(BATCH_IS(o2[0], 5, 1) && BATCH_IS(o2[1], 5, 1));
  CHECK(EL(leaf(o2[1], "a"), 4, 0, 1) == 24 + 3 + 1);
  /* the join of the pieces is d again */
  td_dict *r = td_dict_cat(o2, 2, 1);
  CHECK(BATCH_IS(r, 5, 2));
  const td_tensor *ra = leaf(r, "a");
  int64_t bad = 0;
  for (int64_t i = 0; i < 5; i++)
    for (int64_t j = 0; j < 2; j++)
      for (int64_t k = 0; k < 3; k++) bad += EL(ra, i, j, k) != EL(da, i, j, k);
  CHECK_EQ_I(bad, 0);
  /* the second piece's positions are offset by the first piece's 5 texts */
  CHECK_EQ_I(ntexts(r, "v"), 10);
  CHECK(EL(leaf(r, "v"), 3, 1) == 5 + 3 && EL(leaf(r, "v"), 3, 0) == 3);
  CHECK(strcmp(text(r, "v", (int64_t)EL(leaf(r, "v"), 3, 1)), "3") == 0);
  td_dict_release(r);

  /* errors: out[] is left NULL */
  td_dict *junk = (td_dict *)1;
  td_dict *e[2] = {junk, junk};
  CHECK(td_dict_split(d, 0, 2, (const int64_t[]){2, 2}, e) == TD_EINVAL);
  CHECK_MSG("split: sizes [2, 2] must sum to 5, the size of dim 1 of batch size [5, 2]");
  CHECK(e[0] == NULL && e[1] == NULL);
  CHECK(td_dict_split(d, 0, 2, (const int64_t[]){6, -1}, e) == TD_EINVAL);
  CHECK_MSG("split: sizes [6, -1] has the negative size -1 (piece 2)");
  CHECK(td_dict_split(d, 2, 2, (const int64_t[]){1, 1}, e) == TD_EINDEX);
  CHECK_MSG("split: dim 3 is out of range for batch size [5, 2] (dims 1..2)");
  CHECK(td_dict_split(d, 1, 0, NULL, NULL) == TD_EINVAL);
  CHECK_ERROR("must sum to 2");
  td_dict *z = td_dict_new(0, NULL);
  CHECK(td_dict_split(z, 0, 1, (const int64_t[]){1}, e) == TD_EINDEX);
  CHECK_ERROR("no batch dims");
  td_dict_release(z);
  int64_t big[12];
  for (int i = 0; i < 12; i++) big[i] = 1;
  td_dict *many[12];
  CHECK(td_dict_split(d, 0, 12, big, many) == TD_EINVAL);
  CHECK_ERROR("sizes [1, 1, 1, 1, 1, 1, 1, 1, ...] must sum to 5");

  for (int k = 0; k < 2; k++) td_dict_release(o2[k]);
  td_dict_release(d);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- pad ---------------------------------------------------------------------------- */

static void test_pad(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = td_dict_new(2, (const int64_t[]){3, 2});
  put(d, "a", seq(3, (const int64_t[]){3, 2, 2}, TD_FLOAT32, 1));
  put(d, "i", seq(2, (const int64_t[]){3, 2}, TD_INT64, 1));
  td_dict *c = td_dict_new(3, (const int64_t[]){3, 2, 5});
  put(c, "x", seq(3, (const int64_t[]){3, 2, 5}, TD_FLOAT64, 1));
  put_dict(d, "child", c);
  put_value(d, "u", "\"same\"");
  td_dict_set_locked(d, 1);

  /* dim 0 by (1, 0) and dim 1 by (0, 2): batch [4, 4]; trailing dims untouched */
  td_dict *r = td_dict_pad(d, (const int64_t[]){1, 0, 0, 2}, 4, -1);
  CHECK(BATCH_IS(r, 4, 4));
  CHECK(r && !td_dict_head_borrow(r)->locked);
  const td_tensor *a = leaf(r, "a");
  CHECK(SHAPE_IS(a, 4, 4, 2) && a->dtype == TD_FLOAT32);
  int64_t bad = 0;
  for (int64_t i = 0; i < 4; i++)
    for (int64_t j = 0; j < 4; j++)
      for (int64_t k = 0; k < 2; k++) {
        double want = (i == 0 || j >= 2) ? -1 : 1 + 4.0 * (i - 1) + 2 * j + k;
        bad += EL(a, i, j, k) != want;
      }
  CHECK_EQ_I(bad, 0);
  const td_tensor *it = leaf(r, "i");
  CHECK(SHAPE_IS(it, 4, 4) && it->dtype == TD_INT64 && EL(it, 0, 1) == -1 && EL(it, 3, 1) == 6);
  td_dict *rc = kid(r, "child");
  CHECK(BATCH_IS(rc, 4, 4, 5));
  const td_tensor *x = leaf(rc, "x");
  CHECK(SHAPE_IS(x, 4, 4, 5) && EL(x, 3, 1, 4) == 1 + 20 + 5 + 4 && EL(x, 3, 2, 4) == -1);
  CHECK(rc && !td_dict_head_borrow(rc)->locked);
  td_dict_release(rc);
  CHECK_EQ_I(kind(r, "u"), TD_ENTRY_VALUE);
  CHECK(text(r, "u", 0) == text(d, "u", 0));
  td_dict_release(r);

  /* only dim 0, cropping: a copy of rows 1..2 */
  r = td_dict_pad(d, (const int64_t[]){-1, 0}, 2, 0);
  CHECK(BATCH_IS(r, 2, 2));
  a = leaf(r, "a");
  CHECK(SHAPE_IS(a, 2, 2, 2) && a->storage != leaf(d, "a")->storage);
  bad = 0;
  for (int64_t i = 0; i < 2; i++)
    for (int64_t j = 0; j < 2; j++)
      for (int64_t k = 0; k < 2; k++) bad += EL(a, i, j, k) != 1 + 4.0 * (i + 1) + 2 * j + k;
  CHECK_EQ_I(bad, 0);
  td_dict_release(r);

  /* pad and crop at once; no pads at all is a copy */
  r = td_dict_pad(d, (const int64_t[]){2, -3, -1, 1}, 4, 9);
  CHECK(BATCH_IS(r, 2, 2));
  CHECK(r && EL(leaf(r, "i"), 1, 0) == 9 && EL(leaf(r, "i"), 0, 1) == 9 &&
        EL(leaf(r, "i"), 0, 0) == 9);
  td_dict_release(r);
  r = td_dict_pad(d, NULL, 0, 0);
  CHECK(BATCH_IS(r, 3, 2) && EL(leaf(r, "a"), 2, 1, 1) == 12);
  CHECK(r && leaf(r, "a")->storage != leaf(d, "a")->storage);
  td_dict_release(r);

  /* a padding value cast to integer dtypes */
  r = td_dict_pad(d, (const int64_t[]){0, 1}, 2, 7.0);
  CHECK(r && EL(leaf(r, "i"), 3, 0) == 7);
  td_dict_release(r);

  /* stacked values: padding refused, cropping fine */
  td_dict_set_locked(d, 0);
  put_values(d, "v", 2, (const char *const[]){"\"p\"", "\"q\""},
             (const int64_t[]){0, 1, 1, 0, 0, 1});
  CHECK(td_dict_pad(d, (const int64_t[]){0, 1}, 2, 0) == NULL);
  CHECK_ERROR("pad: cannot pad the stacked non-tensor value 'v'");
  CHECK_EQ_I(td_last_status(), TD_EINVAL);
  r = td_dict_pad(d, (const int64_t[]){0, -1, -1, 0}, 4, 0);
  CHECK(BATCH_IS(r, 2, 1));
  const td_tensor *pv = leaf(r, "v");
  CHECK(SHAPE_IS(pv, 2, 1) && EL(pv, 0, 0) == 1 && EL(pv, 1, 0) == 0 && ntexts(r, "v") == 2);
  td_dict_release(r);
  CHECK(td_dict_del(d, find(d, "v")) == 0);
  c = kid(d, "child");
  put_values(c, "w", 1, (const char *const[]){"0"}, (const int64_t[30]){0});
  CHECK(td_dict_pad(d, (const int64_t[]){0, 0, 1, 0}, 4, 0) == NULL);
  CHECK_ERROR("pad: cannot pad the stacked non-tensor value 'child.w'");
  td_dict_release(c);

  /* errors */
  CHECK(td_dict_pad(d, (const int64_t[]){1, 1, 1}, 3, 0) == NULL);
  CHECK_MSG("pad: pads has 3 entries; it needs an even count (before and after for each "
            "batch dim)");
  CHECK(td_dict_pad(d, (const int64_t[]){1, 1, 1, 1, 1, 1}, 6, 0) == NULL);
  CHECK_MSG("pad: 6 pads cover 3 batch dims but batch size [3, 2] has 2");
  CHECK(td_dict_pad(d, (const int64_t[]){0, 0, -2, -1}, 4, 0) == NULL);
  CHECK_MSG("pad: batch dim 2 of size 2 padded by (-2, -1) leaves a negative size");
  CHECK_EQ_I(td_last_status(), TD_ESHAPE);
  CHECK(td_dict_pad(d, (const int64_t[]){-4, 5}, 2, 0) == NULL); /* crops past the start */
  CHECK_ERROR("leaves a negative size");
  CHECK(td_dict_pad(d, (const int64_t[]){INT64_MAX, 0}, 2, 0) == NULL);
  CHECK_ERROR("a size out of range");
  CHECK(td_dict_pad(d, NULL, 2, 0) == NULL);
  CHECK_ERROR("pads array is NULL");

  td_dict_release(d);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- key orders ------------------------------------------------------------------- */

/* Puts the n keys of names, holding vals (tensors or, at NULL, containers in kids), in
 * the order given; with holes, a key is set and deleted first (names then sit at other
 * places in the key store). */
static void put_ordered(td_dict *d, int n, const char *const *names, td_tensor **vals,
                        td_dict **kids, const int *order, bool holes) {
  if (holes) {
    put(d, "gone", seq(1, (const int64_t[]){2}, TD_FLOAT32, 0));
    CHECK(td_dict_del(d, find(d, "gone")) == 0);
  }
  for (int k = 0; k < n; k++) {
    const int i = order[k];
    if (vals[i]) put(d, names[i], vals[i]);
    else put_dict(d, names[i], kids[i]);
  }
}

/* {a: [2] from 100 s, v: "s", n: {p: [2, 3] from 100 s, q: [2] from 100 s + 50,
 * m: {x: [2] from 100 s + 10, y: [2] from 100 s + 20}}}, batch [2] everywhere, the keys
 * of each level in the order variant picks: 0 as written, 1 the top and m reversed, 2 n
 * reversed, 3 as written after a deleted key at each level. z: m has z for y. */
static td_dict *ordered(int variant, int s, bool z) {
  const int64_t b2 = 2;
  static const int fwd[3] = {0, 1, 2}, rev[3] = {2, 1, 0};
  const bool holes = variant == 3;
  td_dict *m = td_dict_new(1, &b2), *n = td_dict_new(1, &b2), *d = td_dict_new(1, &b2);
  td_tensor *mv[2] = {seq(1, &b2, TD_FLOAT32, 100 * s + 10), seq(1, &b2, TD_FLOAT32, 100 * s + 20)};
  put_ordered(m, 2, (const char *const[]){"x", z ? "z" : "y"}, mv, NULL,
              variant == 1 ? (const int[]){1, 0} : fwd, holes);
  td_tensor *nv[3] = {seq(2, (const int64_t[]){2, 3}, TD_FLOAT32, 100 * s),
                      seq(1, &b2, TD_FLOAT32, 100 * s + 50), NULL};
  td_dict *nk[3] = {NULL, NULL, m};
  put_ordered(n, 3, (const char *const[]){"p", "q", "m"}, nv, nk, variant == 2 ? rev : fwd,
              holes);
  td_tensor *dv[3] = {seq(1, &b2, TD_FLOAT32, 100 * s), NULL, NULL};
  td_dict *dk[3] = {NULL, NULL, n};
  const int *order = variant == 1 ? rev : fwd;
  if (holes) put_ordered(d, 0, NULL, NULL, NULL, NULL, true);
  for (int k = 0; k < 3; k++) {
    const int i = order[k];
    if (i == 1) {
      char json[16];
      snprintf(json, sizeof json, "\"%d\"", s);
      put_value(d, "v", json);
    } else {
      put_ordered(d, 1, (const char *const[]){i == 0 ? "a" : "n"}, &dv[i], &dk[i],
                  (const int[]){0}, false);
    }
  }
  return d;
}

/* Every element of the stacked (or, cat, concatenated) result of ds[0..n) (ordered(., s)
 * for input s) where it should be: the inputs' keys found by name at every level. */
static int64_t misplaced(td_dict *r, int n, bool cat) {
  td_dict *nn = kid(r, "n"), *m = kid(nn, "m");
  const td_tensor *a = leaf(r, "a"), *v = leaf(r, "v"), *p = leaf(nn, "p"), *q = leaf(nn, "q"),
                  *x = leaf(m, "x"), *y = leaf(m, "y");
  /* one input: its value stays uniform (no positions) */
  int64_t bad = !a || !v != (n == 1) || !p || !q || !x || !y || ntexts(r, "v") != n;
  for (int s = 0; s < n && !bad; s++) {
    char json[16];
    snprintf(json, sizeof json, "\"%d\"", s);
    bad += strcmp(text(r, "v", s), json) != 0;
    for (int64_t i = 0; i < 2; i++) {
      const int64_t u = cat ? 2 * s + i : s, w = cat ? -1 : i; /* w < 0: one index */
#define AT(t, ...) (w < 0 ? EL(t, u, ##__VA_ARGS__) : EL(t, u, w, ##__VA_ARGS__))
      bad += AT(a) != 100.0 * s + i;
      bad += v && AT(v) != s;
      bad += AT(q) != 100.0 * s + 50 + i;
      bad += AT(x) != 100.0 * s + 10 + i;
      bad += AT(y) != 100.0 * s + 20 + i;
      for (int64_t k = 0; k < 3; k++) bad += AT(p, k) != 100.0 * s + 3 * i + k;
#undef AT
    }
  }
  td_dict_release(m), td_dict_release(nn);
  return bad;
}

static void test_key_orders(void) {
  const int64_t before = td_live_bytes();
  enum { N = 20 }; /* more inputs than join's small buffers hold */
  td_dict *ds[N];
  for (int s = 0; s < N; s++) ds[s] = ordered(s % 4, s, false);
  int64_t klen;
  for (int n = 1; n <= N; n += n < 5 ? 1 : N - 5) {
    td_dict *r = td_dict_stack(ds, n, 0);
    CHECK(BATCH_IS(r, n, 2));
    CHECK(r && strcmp(td_dict_key_borrow(r, 2, &klen), "n") == 0); /* the first's order */
    CHECK_EQ_I(misplaced(r, n, false), 0);
    td_dict_release(r);
    r = td_dict_cat(ds, n, 0);
    CHECK(BATCH_IS(r, 2 * n));
    CHECK_EQ_I(misplaced(r, n, true), 0);
    td_dict_release(r);
  }
  /* the first reordered: the result takes its order */
  td_dict *r = td_dict_stack(ds + 1, 3, 0);
  CHECK(r && strcmp(td_dict_key_borrow(r, 0, &klen), "n") == 0);
  td_dict *nn = kid(r, "n"), *m = kid(nn, "m");
  CHECK(m && strcmp(td_dict_key_borrow(m, 0, &klen), "y") == 0);
  CHECK(EL(leaf(m, "x"), 2, 1) == 311 && EL(leaf(nn, "p"), 1, 1, 2) == 205);
  td_dict_release(m), td_dict_release(nn), td_dict_release(r);

  /* errors at keys found by name, named by their paths */
  td_dict *odd = ordered(1, 1, true), *pair[2] = {ds[0], odd};
  CHECK(td_dict_stack(pair, 2, 0) == NULL);
  CHECK_MSG("stack: the key sets differ: TensorDict 2 lacks 'n.m.y' and has 'n.m.z' not in "
            "the first");
  td_dict_release(odd);
  odd = ordered(2, 1, false);
  nn = kid(odd, "n");
  put(nn, "q", seq(2, (const int64_t[]){2, 2}, TD_FLOAT32, 0));
  pair[1] = odd;
  CHECK(td_dict_stack(pair, 2, 0) == NULL);
  CHECK_MSG("stack: key 'n.q' has shape [2, 2] in TensorDict 2 but [2] in the first");
  put_value(nn, "q", "1");
  CHECK(td_dict_cat(pair, 2, 0) == NULL);
  CHECK_MSG("cat: key 'n.q' is a tensor in the first TensorDict but a non-tensor value in "
            "TensorDict 2");
  td_dict_release(nn), td_dict_release(odd);

  for (int s = 0; s < N; s++) td_dict_release(ds[s]);
  CHECK_EQ_I(td_live_bytes(), before);
}

int main(void) {
  test_stack();
  test_stack_nested();
  test_join_errors();
  test_partial_failure();
  test_values_stack();
  test_cat();
  test_split();
  test_pad();
  test_key_orders();
  CHECK_EQ_I(td_live_bytes(), 0);
  CHECK_SUMMARY();
}
