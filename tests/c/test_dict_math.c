/* test_dict_math.c: arithmetic, comparisons and reductions over containers (td_dict_unary
 * .. td_dict_allclose): values, dtypes and shapes read back from the leaves, nested
 * containers, non-tensor values carried over, scalars / tensors / containers as the
 * other operand, masks accepted and refused, in-place forms that refuse before writing,
 * the error messages, and that everything made is released. */
#include "dicts.h"

/* ---- helpers ---------------------------------------------------------------------- */

/* A new tensor of shape and dtype holding the n values given (row-major). */
static td_tensor *vals(int32_t ndim, const int64_t *shape, int32_t dtype, const double *v) {
  td_tensor *t = td_tensor_empty(ndim, shape, dtype);
  int64_t ix[TD_MAX_DIMS] = {0}, n = numel_of(ndim, shape);
  for (int64_t i = 0; t && i < n; i++) {
    td_tensor_write_f64(t, ix, v[i]);
    next_index(ndim, shape, ix);
  }
  return t;
}
#define VALS(dtype, shape_list, ...)                                                   \
  vals((int32_t)(sizeof((const int64_t[])shape_list) / sizeof(int64_t)),              \
       (const int64_t[])shape_list, (dtype), (const double[]){__VA_ARGS__})
#define S(...) {__VA_ARGS__}

#define EL0(t) el((t), NULL)

/* Every element of t equals f(index) (3 dims at most, unused indices 0). */
#define ALL_EQ(t, n0, n1, n2, expr)                                              \
  do {                                                                           \
    int64_t bad_ = 0;                                                            \
    const td_tensor *t_ = (t);                                                   \
    for (int64_t i = 0; i < (n0); i++)                                           \
      for (int64_t j = 0; j < (n1); j++)                                         \
        for (int64_t k = 0; k < (n2); k++) {                                     \
          const int64_t ix_[3] = {i, j, k};                                      \
          double want_ = (expr), got_ = el(t_, ix_);                             \
          if (!(got_ == want_)) {                                                \
            if (bad_++ < 3)                                                      \
              fprintf(stderr, "  [%lld,%lld,%lld]: got %g want %g\n", (long long)i, \
                      (long long)j, (long long)k, got_, want_);                  \
          }                                                                      \
        }                                                                        \
    CHECK_EQ_I(bad_, 0);                                                         \
  } while (0)

/*
 * The test container, batch [3]:
 *   a: float32 [3, 2] = 2i + j        b: int64 [3] = i
 *   child (batch [3, 4]): x: float64 [3, 4] = 4i + k
 *   u: uniform value "\"hi\""         s: stacked value, texts "p", "q", positions 0 1 0
 */
static td_dict *sample(void) {
  const int64_t b3 = 3;
  td_dict *d = td_dict_new(1, &b3);
  put(d, "a", seq(2, (const int64_t[]){3, 2}, TD_FLOAT32, 0));
  put(d, "b", seq(1, &b3, TD_INT64, 0));
  td_dict *c = td_dict_new(2, (const int64_t[]){3, 4});
  put(c, "x", seq(2, (const int64_t[]){3, 4}, TD_FLOAT64, 0));
  put_dict(d, "child", c);
  put_value(d, "u", "\"hi\"");
  put_values(d, "s", 2, (const char *const[]){"\"p\"", "\"q\""}, (const int64_t[]){0, 1, 0});
  return d;
}

/* The structure every value op keeps: keys, kinds, batch sizes and the non-tensor values
 * of the input; a stacked one is a copy (its positions in storage of its own: writes
 * into the result must not reach the input, issue 27 item 2), with the same ids. */
static void check_structure(td_dict *r, td_dict *d) {
  CHECK(r && td_dict_head_borrow(r)->nkeys == td_dict_head_borrow(d)->nkeys);
  CHECK(BATCH_IS(r, 3));
  CHECK(kind(r, "a") == TD_ENTRY_TENSOR && kind(r, "child") == TD_ENTRY_DICT);
  CHECK(kind(r, "u") == TD_ENTRY_VALUE && strcmp(text(r, "u", 0), "\"hi\"") == 0);
  CHECK(kind(r, "s") == TD_ENTRY_VALUES && strcmp(text(r, "s", 1), "\"q\"") == 0);
  CHECK(r && leaf(r, "s") && leaf(d, "s") && leaf(r, "s")->storage != leaf(d, "s")->storage);
  CHECK(r && leaf(r, "s") && SHAPE_IS(leaf(r, "s"), 3) && EL(leaf(r, "s"), 0) == 0 &&
        EL(leaf(r, "s"), 1) == 1 && EL(leaf(r, "s"), 2) == 0);
  td_dict *c = kid(r, "child");
  CHECK(BATCH_IS(c, 3, 4));
  td_dict_release(c);
}

/* ---- unary and clamp ------------------------------------------------------------------ */

static void test_unary(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = sample();

  td_dict *r = td_dict_unary(TD_UNARY_NEG, d);
  check_structure(r, d);
  CHECK(leaf(r, "a")->dtype == TD_FLOAT32 && SHAPE_IS(leaf(r, "a"), 3, 2));
  ALL_EQ(leaf(r, "a"), 3, 2, 1, -(2.0 * i + j));
  CHECK(leaf(r, "b")->dtype == TD_INT64);
  ALL_EQ(leaf(r, "b"), 3, 1, 1, -(double)i);
  td_dict *c = kid(r, "child");
  ALL_EQ(leaf(c, "x"), 3, 4, 1, -(4.0 * i + j));
  td_dict_release(c);
  ALL_EQ(leaf(d, "a"), 3, 2, 1, 2.0 * i + j); /* the input is untouched */
  td_dict_release(r);

  /* exp: integers give float32 */
  r = td_dict_unary(TD_UNARY_EXP, d);
  CHECK(r && leaf(r, "b")->dtype == TD_FLOAT32 && fabs(EL(leaf(r, "b"), 2) - exp(2.0)) < 1e-5);
  td_dict_release(r);

  /* isnan gives bool leaves */
  r = td_dict_unary(TD_UNARY_ISNAN, d);
  CHECK(r && leaf(r, "a")->dtype == TD_BOOL && leaf(r, "b")->dtype == TD_BOOL);
  td_dict_release(r);

  /* in place: every leaf written, the values untouched */
  CHECK(td_dict_unary_(TD_UNARY_NEG, d) == 0);
  ALL_EQ(leaf(d, "a"), 3, 2, 1, -(2.0 * i + j));
  ALL_EQ(leaf(d, "b"), 3, 1, 1, -(double)i);
  c = kid(d, "child");
  ALL_EQ(leaf(c, "x"), 3, 4, 1, -(4.0 * i + j));
  td_dict_release(c);
  CHECK(td_dict_unary_(TD_UNARY_ABS, d) == 0);
  ALL_EQ(leaf(d, "a"), 3, 2, 1, 2.0 * i + j);

  /* exp_ cannot write float32 into the int64 leaf b: refused before a is written */
  CHECK(td_dict_unary_(TD_UNARY_EXP, d) == TD_EDTYPE);
  CHECK_MSG("exp_: key 'b': exp_: result type float32 can't be cast to the desired output "
            "type int64");
  ALL_EQ(leaf(d, "a"), 3, 2, 1, 2.0 * i + j);

  /* a kernel refusal on a nested leaf, with its dotted path */
  td_dict *bools = td_dict_new(1, (const int64_t[]){2});
  td_dict *inner = td_dict_new(1, (const int64_t[]){2});
  put(inner, "m", td_tensor_full(1, (const int64_t[]){2}, TD_BOOL, 1));
  put_dict(bools, "in", inner);
  CHECK(td_dict_unary(TD_UNARY_NEG, bools) == NULL);
  CHECK_ERROR("neg: key 'in.m': ");
  CHECK_ERROR("bool");
  td_dict_release(bools);

  CHECK(td_dict_unary(99, d) == NULL);
  CHECK_MSG("unary: unknown unary op 99");
  CHECK(td_dict_unary_(-1, d) == TD_EINVAL);
  CHECK(td_dict_unary(TD_UNARY_NEG, NULL) == NULL);
  CHECK_MSG("neg: the TensorDict is NULL");
  td_dict_release(d);

  /* a read-only leaf: unary_ refuses it before writing the writable one */
  ro_file f;
  CHECK(ro_open(&f, 3));
  td_dict *ro = td_dict_new(1, (const int64_t[]){3});
  put(ro, "w", seq(1, (const int64_t[]){3}, TD_FLOAT32, 1));
  CHECK(td_dict_set_tensor(ro, "r", 1, f.t) >= 0);
  CHECK(td_dict_unary_(TD_UNARY_NEG, ro) == TD_EREADONLY);
  CHECK_ERROR("neg_: key 'r': ");
  CHECK(EL(leaf(ro, "w"), 0) == 1);
  r = td_dict_unary(TD_UNARY_NEG, ro); /* out of place reads it fine */
  CHECK(r && EL(leaf(r, "r"), 2) == -2);
  td_dict_release(r);
  td_dict_release(ro);
  ro_close(&f);
  CHECK_EQ_I(td_live_bytes(), before);
}

static void test_clamp(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = sample();
  td_dict *r = td_dict_clamp(d, 1, 4, 1, 1);
  check_structure(r, d);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, clamp(2.0 * i + j, 1, 4));
  CHECK(leaf(r, "b")->dtype == TD_INT64);
  ALL_EQ(leaf(r, "b"), 3, 1, 1, clamp((double)i, 1, 4));
  td_dict *c = kid(r, "child");
  ALL_EQ(leaf(c, "x"), 3, 4, 1, clamp(4.0 * i + j, 1, 4));
  td_dict_release(c);
  td_dict_release(r);

  /* only a max; a fractional bound makes the int64 leaf float32 (the kernel's rule) */
  r = td_dict_clamp(d, 0, 2.5, 0, 1);
  CHECK(r && leaf(r, "b")->dtype == TD_FLOAT32 && leaf(r, "a")->dtype == TD_FLOAT32);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, fmin(2.0 * i + j, 2.5));
  td_dict_release(r);

  /* neither bound: the kernel's refusal, with the key */
  CHECK(td_dict_clamp(d, 0, 0, 0, 0) == NULL);
  CHECK_MSG("clamp: key 'a': clamp: at least one of min and max must be given");
  td_dict_release(d);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- binary: scalars -------------------------------------------------------------------- */

static void test_binary_scalar(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = sample();

  /* an int scalar keeps every dtype */
  td_dict *r = td_dict_binary(TD_BINARY_ADD, d, NULL, NULL, 10, TD_SCALAR_INT, 0);
  check_structure(r, d);
  CHECK(leaf(r, "a")->dtype == TD_FLOAT32 && leaf(r, "b")->dtype == TD_INT64);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 2.0 * i + j + 10);
  ALL_EQ(leaf(r, "b"), 3, 1, 1, i + 10.0);
  td_dict *c = kid(r, "child");
  CHECK(leaf(c, "x")->dtype == TD_FLOAT64);
  ALL_EQ(leaf(c, "x"), 3, 4, 1, 4.0 * i + j + 10);
  td_dict_release(c);
  td_dict_release(r);

  /* a float scalar raises integers to float32 */
  r = td_dict_binary(TD_BINARY_MUL, d, NULL, NULL, 0.5, TD_SCALAR_FLOAT, 0);
  CHECK(r && leaf(r, "b")->dtype == TD_FLOAT32 && leaf(r, "a")->dtype == TD_FLOAT32);
  ALL_EQ(leaf(r, "b"), 3, 1, 1, 0.5 * i);
  td_dict_release(r);

  /* scalar first: 10 - x */
  r = td_dict_binary(TD_BINARY_SUB, d, NULL, NULL, 10, TD_SCALAR_INT, 1);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 10 - (2.0 * i + j));
  ALL_EQ(leaf(r, "b"), 3, 1, 1, 10.0 - i);
  td_dict_release(r);

  /* true division of integers gives float32; comparisons give bool */
  r = td_dict_binary(TD_BINARY_DIV, d, NULL, NULL, 2, TD_SCALAR_INT, 0);
  CHECK(r && leaf(r, "b")->dtype == TD_FLOAT32 && EL(leaf(r, "b"), 1) == 0.5);
  td_dict_release(r);
  r = td_dict_binary(TD_BINARY_GT, d, NULL, NULL, 2, TD_SCALAR_INT, 0);
  CHECK(r && leaf(r, "a")->dtype == TD_BOOL && leaf(r, "b")->dtype == TD_BOOL);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 2.0 * i + j > 2);
  c = kid(r, "child");
  CHECK(c && leaf(c, "x")->dtype == TD_BOOL);
  ALL_EQ(leaf(c, "x"), 3, 4, 1, 4.0 * i + j > 2);
  td_dict_release(c);
  td_dict_release(r);

  /* in place */
  CHECK(td_dict_binary_(TD_BINARY_MUL, d, NULL, NULL, 3, TD_SCALAR_INT) == 0);
  ALL_EQ(leaf(d, "a"), 3, 2, 1, 3 * (2.0 * i + j));
  ALL_EQ(leaf(d, "b"), 3, 1, 1, 3.0 * i);
  c = kid(d, "child");
  ALL_EQ(leaf(c, "x"), 3, 4, 1, 3 * (4.0 * i + j));
  td_dict_release(c);
  CHECK(strcmp(text(d, "u", 0), "\"hi\"") == 0);

  /* div_ would write float32 into int64 b: refused, a (visited first) unchanged */
  CHECK(td_dict_binary_(TD_BINARY_DIV, d, NULL, NULL, 2, TD_SCALAR_INT) == TD_EDTYPE);
  CHECK_MSG("div_: key 'b': div_: result type float32 can't be cast to the desired output "
            "type int64");
  ALL_EQ(leaf(d, "a"), 3, 2, 1, 3 * (2.0 * i + j));
  /* add_ of a float scalar: the same refusal */
  CHECK(td_dict_binary_(TD_BINARY_ADD, d, NULL, NULL, 0.5, TD_SCALAR_FLOAT) == TD_EDTYPE);
  ALL_EQ(leaf(d, "a"), 3, 2, 1, 3 * (2.0 * i + j));
  /* an integer division by a zero scalar is refused before a is written */
  CHECK(td_dict_binary_(TD_BINARY_FLOOR_DIVIDE, d, NULL, NULL, 0, TD_SCALAR_INT) == TD_EINVAL);
  CHECK_MSG("floor_divide_: key 'b': floor_divide: integer division by zero");
  ALL_EQ(leaf(d, "a"), 3, 2, 1, 3 * (2.0 * i + j));
  CHECK(td_dict_binary(TD_BINARY_REMAINDER, d, NULL, NULL, 0, TD_SCALAR_INT, 0) == NULL);
  CHECK_MSG("remainder: key 'b': remainder: integer division by zero");
  /* comparisons in place write 0 / 1 in the leaf's dtype */
  CHECK(td_dict_binary_(TD_BINARY_GE, d, NULL, NULL, 3, TD_SCALAR_INT) == 0);
  CHECK(leaf(d, "b")->dtype == TD_INT64);
  ALL_EQ(leaf(d, "b"), 3, 1, 1, 3.0 * i >= 3);

  /* errors */
  CHECK(td_dict_binary(42, d, NULL, NULL, 1, TD_SCALAR_INT, 0) == NULL);
  CHECK_MSG("binary: unknown binary op 42");
  CHECK(td_dict_binary(TD_BINARY_ADD, d, NULL, NULL, 1, 7, 0) == NULL);
  CHECK_MSG("add: unknown scalar kind 7");
  CHECK(td_dict_binary_(TD_BINARY_ADD, NULL, NULL, NULL, 1, TD_SCALAR_INT) == TD_EINVAL);
  CHECK_MSG("add_: the TensorDict is NULL");
  /* sub with a bool leaf: the kernel's refusal names the key */
  td_dict *m = td_dict_new(0, NULL);
  put(m, "ok", td_tensor_full(0, NULL, TD_FLOAT32, 1));
  put(m, "flag", td_tensor_full(0, NULL, TD_BOOL, 1));
  CHECK(td_dict_binary(TD_BINARY_SUB, m, NULL, NULL, 1, TD_SCALAR_INT, 0) == NULL);
  CHECK_ERROR("sub: key 'flag': sub: subtraction with a bool tensor is not supported");
  CHECK(td_dict_binary_(TD_BINARY_SUB, m, NULL, NULL, 1, TD_SCALAR_INT) != 0);
  CHECK_ERROR("sub_: key 'flag': ");
  CHECK(EL0(leaf(m, "ok")) == 1); /* checked before writing */
  td_dict_release(m);
  td_dict_release(d);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- binary: containers ------------------------------------------------------------------ */

/* sample()'s keys in another order, other dtypes and values: a float64 = 100 + 2i + j,
 * b int32 = 10 i, child.x float32 = 1, u and s other non-tensor values. */
static td_dict *other(void) {
  const int64_t b3 = 3;
  td_dict *d = td_dict_new(1, &b3);
  td_dict *c = td_dict_new(2, (const int64_t[]){3, 4});
  put(c, "x", td_tensor_full(2, (const int64_t[]){3, 4}, TD_FLOAT32, 1));
  put_dict(d, "child", c);
  put_value(d, "s", "\"other\"");
  put(d, "b", VALS(TD_INT32, S(3), 0, 10, 20));
  put(d, "a", seq(2, (const int64_t[]){3, 2}, TD_FLOAT64, 100));
  put_values(d, "u", 1, (const char *const[]){"\"z\""}, (const int64_t[]){0, 0, 0});
  return d;
}

static void test_binary_dict(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = sample(), *o = other();

  td_dict *r = td_dict_binary(TD_BINARY_ADD, d, o, NULL, 0, 0, 0);
  check_structure(r, d); /* a's keys, order and non-tensor values */
  int64_t klen;
  CHECK(r && strcmp(td_dict_key_borrow(r, 0, &klen), "a") == 0);
  CHECK(leaf(r, "a")->dtype == TD_FLOAT64);               /* float32 + float64 */
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 2 * (2.0 * i + j) + 100);
  CHECK(leaf(r, "b")->dtype == TD_INT64);                 /* int64 + int32 */
  ALL_EQ(leaf(r, "b"), 3, 1, 1, 11.0 * i);
  td_dict *c = kid(r, "child");
  CHECK(c && leaf(c, "x")->dtype == TD_FLOAT64);          /* float64 + float32 */
  ALL_EQ(leaf(c, "x"), 3, 4, 1, 4.0 * i + j + 1);
  td_dict_release(c);
  td_dict_release(r);

  /* the other container first: o - d */
  r = td_dict_binary(TD_BINARY_SUB, d, o, NULL, 0, 0, 1);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 100.0);
  ALL_EQ(leaf(r, "b"), 3, 1, 1, 9.0 * i);
  td_dict_release(r);

  /* comparisons give bool leaves */
  r = td_dict_binary(TD_BINARY_LT, d, o, NULL, 0, 0, 0);
  CHECK(r && leaf(r, "b")->dtype == TD_BOOL);
  ALL_EQ(leaf(r, "b"), 3, 1, 1, i < 10.0 * i);
  td_dict_release(r);

  /* a container with batch [] whose leaves broadcast: [2] against a's [3, 2] */
  td_dict *bc = td_dict_new(0, NULL);
  put(bc, "a", VALS(TD_FLOAT32, S(2), 1000, 2000));
  put(bc, "b", td_tensor_full(0, NULL, TD_INT64, 7));
  td_dict *bcc = td_dict_new(0, NULL);
  put(bcc, "x", td_tensor_full(0, NULL, TD_FLOAT64, 0.5));
  put_dict(bc, "child", bcc);
  put_value(bc, "u", "1");
  put_value(bc, "s", "2");
  r = td_dict_binary(TD_BINARY_ADD, d, bc, NULL, 0, 0, 0);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 2.0 * i + j + 1000 * (j + 1));
  ALL_EQ(leaf(r, "b"), 3, 1, 1, i + 7.0);
  td_dict_release(r);

  /* in place: d += bc, then d += d (the operand is d itself) */
  CHECK(td_dict_binary_(TD_BINARY_ADD, d, bc, NULL, 0, 0) == 0);
  ALL_EQ(leaf(d, "a"), 3, 2, 1, 2.0 * i + j + 1000 * (j + 1));
  CHECK(td_dict_binary_(TD_BINARY_MUL, d, d, NULL, 0, 0) == 0);
  ALL_EQ(leaf(d, "b"), 3, 1, 1, (i + 7.0) * (i + 7.0));
  c = kid(d, "child");
  ALL_EQ(leaf(c, "x"), 3, 4, 1, (4.0 * i + j + 0.5) * (4.0 * i + j + 0.5));
  td_dict_release(c);
  td_dict_release(bc);

  /* add_ of o into d: o's float64 a is fine (float32 target), o's int32 b too; but o has
   * float32 child.x into float64: fine. Now make one leaf refuse: a float into int64 b. */
  td_dict *fl = td_dict_binary(TD_BINARY_MUL, o, NULL, NULL, 1.0, TD_SCALAR_FLOAT, 0);
  double a00 = EL(leaf(d, "a"), 0, 0);
  CHECK(td_dict_binary_(TD_BINARY_ADD, d, fl, NULL, 0, 0) == TD_EDTYPE);
  CHECK_MSG("add_: key 'b': add_: result type float32 can't be cast to the desired output "
            "type int64");
  CHECK(EL(leaf(d, "a"), 0, 0) == a00); /* a comes first and was not written */
  td_dict_release(fl);

  td_dict_release(d), td_dict_release(o);
  CHECK_EQ_I(td_live_bytes(), before);
}

static void test_binary_dict_errors(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = sample();

  /* a key missing from the other container, nested: the dotted path */
  td_dict *o = other();
  td_dict *oc = kid(o, "child");
  put(oc, "y", td_tensor_full(2, (const int64_t[]){3, 4}, TD_FLOAT32, 1));
  CHECK(td_dict_binary(TD_BINARY_ADD, d, o, NULL, 0, 0, 0) == NULL);
  CHECK_MSG("add: key 'child.y' of the other TensorDict is not in this one");
  CHECK(td_dict_binary_(TD_BINARY_ADD, d, o, NULL, 0, 0) == TD_EINVAL);
  CHECK_MSG("add_: key 'child.y' of the other TensorDict is not in this one");
  CHECK(td_dict_del(oc, find(oc, "y")) == 0);
  CHECK(td_dict_del(oc, find(oc, "x")) == 0);
  CHECK(td_dict_binary(TD_BINARY_ADD, d, o, NULL, 0, 0, 0) == NULL);
  CHECK_MSG("add: key 'child.x' is missing from the other TensorDict");
  td_dict_release(oc);
  td_dict_release(o);

  /* a key of another kind */
  o = other();
  CHECK(td_dict_del(o, find(o, "child")) == 0);
  put(o, "child", td_tensor_full(1, (const int64_t[]){3}, TD_FLOAT32, 1));
  CHECK(td_dict_binary(TD_BINARY_MUL, d, o, NULL, 0, 0, 0) == NULL);
  CHECK_MSG("mul: key 'child' is a TensorDict here and a tensor in the other TensorDict");
  CHECK(td_dict_del(o, find(o, "child")) == 0);
  td_dict *c = td_dict_new(2, (const int64_t[]){3, 4});
  put(c, "x", td_tensor_full(2, (const int64_t[]){3, 4}, TD_FLOAT32, 1));
  put_dict(o, "child", c);
  CHECK(td_dict_del(o, find(o, "u")) == 0);
  put(o, "u", td_tensor_full(1, (const int64_t[]){3}, TD_FLOAT32, 1));
  CHECK(td_dict_binary(TD_BINARY_MUL, d, o, NULL, 0, 0, 0) == NULL);
  CHECK_MSG("mul: key 'u' is a non-tensor value here and a tensor in the other TensorDict");
  td_dict_release(o);

  /* leaves that broadcast beyond the batch size */
  td_dict *small = td_dict_new(1, (const int64_t[]){1});
  put(small, "v", td_tensor_full(2, (const int64_t[]){1, 2}, TD_FLOAT32, 1));
  td_dict *big = td_dict_new(1, (const int64_t[]){3});
  put(big, "v", td_tensor_full(2, (const int64_t[]){3, 2}, TD_FLOAT32, 1));
  CHECK(td_dict_binary(TD_BINARY_ADD, small, big, NULL, 0, 0, 0) == NULL);
  CHECK_MSG("add: key 'v': the result has shape [3, 2], which does not start with the batch "
            "size [1] (the other operand broadcasts beyond it)");
  CHECK(td_dict_binary_(TD_BINARY_ADD, small, big, NULL, 0, 0) == TD_ESHAPE);
  CHECK_ERROR("add_: key 'v': add_: output with shape [1, 2] doesn't match the broadcast "
              "shape [3, 2]");
  /* leaves that do not broadcast at all */
  td_dict *odd = td_dict_new(1, (const int64_t[]){3});
  put(odd, "v", td_tensor_full(2, (const int64_t[]){3, 5}, TD_FLOAT32, 1));
  CHECK(td_dict_binary(TD_BINARY_ADD, big, odd, NULL, 0, 0, 0) == NULL);
  CHECK_ERROR("add: key 'v': ");
  CHECK_ERROR("[3, 2] and [3, 5]");

  /* a tensor and a container at once */
  td_tensor *t = td_tensor_full(0, NULL, TD_FLOAT32, 1);
  CHECK(td_dict_binary(TD_BINARY_ADD, big, big, t, 0, 0, 0) == NULL);
  CHECK_MSG("add: the other operand is a TensorDict or a tensor, not both");
  td_tensor_release(t);
  td_dict_release(small), td_dict_release(big), td_dict_release(odd);
  td_dict_release(d);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- binary: tensors ---------------------------------------------------------------------- */

static void test_binary_tensor(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = sample();

  /* a tensor shaped like the batch aligns LEFT: bt[i] meets every a[i, :] and x[i, :] */
  td_tensor *bt = VALS(TD_FLOAT32, S(3), 10, 20, 30);
  td_dict *r = td_dict_binary(TD_BINARY_ADD, d, NULL, bt, 0, 0, 0);
  check_structure(r, d);
  CHECK(leaf(r, "a")->dtype == TD_FLOAT32 && SHAPE_IS(leaf(r, "a"), 3, 2));
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 2.0 * i + j + 10 * (i + 1));
  CHECK(leaf(r, "b")->dtype == TD_FLOAT32);  /* int64 + float32 tensor */
  ALL_EQ(leaf(r, "b"), 3, 1, 1, i + 10.0 * (i + 1));
  td_dict *c = kid(r, "child");
  CHECK(c && leaf(c, "x")->dtype == TD_FLOAT64 && SHAPE_IS(leaf(c, "x"), 3, 4));
  ALL_EQ(leaf(c, "x"), 3, 4, 1, 4.0 * i + j + 10 * (i + 1));
  td_dict_release(c);
  td_dict_release(r);

  /* the tensor first: bt - leaf */
  r = td_dict_binary(TD_BINARY_SUB, d, NULL, bt, 0, 0, 1);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 10 * (i + 1) - (2.0 * i + j));
  td_dict_release(r);

  /* a size-1 tensor and a 0-dim tensor broadcast everywhere */
  td_tensor *one = VALS(TD_INT64, S(1), 5);
  r = td_dict_binary(TD_BINARY_MUL, d, NULL, one, 0, 0, 0);
  CHECK(r && leaf(r, "b")->dtype == TD_INT64 && leaf(r, "a")->dtype == TD_FLOAT32);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 5 * (2.0 * i + j));
  td_dict_release(r);
  td_tensor *zero_dim = td_tensor_full(0, NULL, TD_INT64, 2);
  r = td_dict_binary(TD_BINARY_POW, d, NULL, zero_dim, 0, 0, 0);
  /* a 0-dim tensor only raises the category: float32 stays float32 */
  CHECK(r && leaf(r, "b")->dtype == TD_INT64 && leaf(r, "a")->dtype == TD_FLOAT32);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, (2.0 * i + j) * (2.0 * i + j));
  ALL_EQ(leaf(r, "b"), 3, 1, 1, (double)i * i);
  td_dict_release(r);

  /* a tensor that does not match the leading batch dims */
  td_tensor *two = VALS(TD_FLOAT32, S(2), 1, 2);
  CHECK(td_dict_binary(TD_BINARY_ADD, d, NULL, two, 0, 0, 0) == NULL);
  CHECK_MSG("add: a tensor of shape [2] does not broadcast to the leading batch dims [3] "
            "(batch size [3])");
  CHECK(td_dict_binary_(TD_BINARY_ADD, d, NULL, two, 0, 0) == TD_ESHAPE);
  CHECK_MSG("add_: a tensor of shape [2] does not broadcast to the leading batch dims [3] "
            "(batch size [3])");

  /* in place: float32 bt into the int64 leaf b is refused before anything is written */
  CHECK(td_dict_binary_(TD_BINARY_ADD, d, NULL, bt, 0, 0) == TD_EDTYPE);
  CHECK_ERROR("add_: key 'b': ");
  ALL_EQ(leaf(d, "a"), 3, 2, 1, 2.0 * i + j);
  /* an int64 tensor is accepted everywhere */
  CHECK(td_dict_binary_(TD_BINARY_ADD, d, NULL, one, 0, 0) == 0);
  ALL_EQ(leaf(d, "a"), 3, 2, 1, 2.0 * i + j + 5);
  ALL_EQ(leaf(d, "b"), 3, 1, 1, i + 5.0);
  td_tensor *ib = VALS(TD_INT64, S(3), 100, 200, 300);
  CHECK(td_dict_binary_(TD_BINARY_SUB, d, NULL, ib, 0, 0) == 0);
  ALL_EQ(leaf(d, "b"), 3, 1, 1, i + 5.0 - 100 * (i + 1));
  c = kid(d, "child");
  ALL_EQ(leaf(c, "x"), 3, 4, 1, 4.0 * i + j + 5 - 100 * (i + 1));
  td_dict_release(c);
  td_dict_release(d);

  /* a tensor with more dims than the batch broadcasts by torch's rule (aligned right) */
  td_dict *e = td_dict_new(0, NULL);
  put(e, "v", seq(1, (const int64_t[]){4}, TD_FLOAT32, 0));
  put(e, "m", seq(2, (const int64_t[]){2, 4}, TD_FLOAT32, 0));
  td_tensor *row = VALS(TD_FLOAT32, S(4), 0, 10, 20, 30);
  r = td_dict_binary(TD_BINARY_ADD, e, NULL, row, 0, 0, 0);
  CHECK(r && SHAPE_IS(leaf(r, "v"), 4) && SHAPE_IS(leaf(r, "m"), 2, 4));
  ALL_EQ(leaf(r, "v"), 4, 1, 1, 11.0 * i);
  ALL_EQ(leaf(r, "m"), 2, 4, 1, 4.0 * i + 11 * j);
  td_dict_release(r);
  CHECK(td_dict_binary_(TD_BINARY_ADD, e, NULL, row, 0, 0) == 0);
  ALL_EQ(leaf(e, "m"), 2, 4, 1, 4.0 * i + 11 * j);
  td_dict_release(e);
  /* ... and may not grow a leaf past the batch size */
  td_dict *f = td_dict_new(1, (const int64_t[]){3});
  put(f, "v", td_tensor_full(2, (const int64_t[]){3, 4}, TD_FLOAT32, 1));
  td_tensor *big = td_tensor_full(3, (const int64_t[]){2, 3, 4}, TD_FLOAT32, 1);
  CHECK(td_dict_binary(TD_BINARY_ADD, f, NULL, big, 0, 0, 0) == NULL);
  CHECK_MSG("add: key 'v': the result has shape [2, 3, 4], which does not start with the "
            "batch size [3] (the other operand broadcasts beyond it)");
  td_dict_release(f);

  td_tensor_release(bt), td_tensor_release(one), td_tensor_release(zero_dim);
  td_tensor_release(two), td_tensor_release(ib), td_tensor_release(row);
  td_tensor_release(big);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- reductions ----------------------------------------------------------------------------- */

/*
 * Batch [3, 4]:
 *   a: float32 [3, 4, 2] = 8i + 2j + k     b: int64 [3, 4] = 4i + j
 *   child (batch [3, 4, 5]): x: float64 [3, 4, 5] = 20i + 5j + m
 *   u: uniform value; s: stacked, texts "r0" "r1" "r2", position i (equal along dim 1)
 */
static td_dict *grid(void) {
  td_dict *d = td_dict_new(2, (const int64_t[]){3, 4});
  put(d, "a", seq(3, (const int64_t[]){3, 4, 2}, TD_FLOAT32, 0));
  put(d, "b", seq(2, (const int64_t[]){3, 4}, TD_INT64, 0));
  td_dict *c = td_dict_new(3, (const int64_t[]){3, 4, 5});
  put(c, "x", seq(3, (const int64_t[]){3, 4, 5}, TD_FLOAT64, 0));
  put_dict(d, "child", c);
  put_value(d, "u", "[1, 2]");
  int64_t pos[12];
  for (int i = 0; i < 12; i++) pos[i] = i / 4;
  put_values(d, "s", 3, (const char *const[]){"\"r0\"", "\"r1\"", "\"r2\""}, pos);
  return d;
}

static void test_reduce(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = grid();

  /* sum over batch dim 1 */
  td_dict *r = td_dict_reduce(TD_RED_SUM, d, (const int32_t[]){1}, 1, 0, 0);
  CHECK(BATCH_IS(r, 3));
  CHECK(SHAPE_IS(leaf(r, "a"), 3, 2) && leaf(r, "a")->dtype == TD_FLOAT32);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 32.0 * i + 12 + 4 * j);
  CHECK(SHAPE_IS(leaf(r, "b"), 3) && leaf(r, "b")->dtype == TD_INT64);
  ALL_EQ(leaf(r, "b"), 3, 1, 1, 16.0 * i + 6);
  td_dict *c = kid(r, "child");
  CHECK(BATCH_IS(c, 3, 5) && SHAPE_IS(leaf(c, "x"), 3, 5));
  ALL_EQ(leaf(c, "x"), 3, 5, 1, 80.0 * i + 30 + 4 * j);
  td_dict_release(c);
  CHECK(kind(r, "u") == TD_ENTRY_VALUE && strcmp(text(r, "u", 0), "[1, 2]") == 0);
  /* the stacked value is equal along dim 1: kept, one position per row */
  CHECK(kind(r, "s") == TD_ENTRY_VALUES && SHAPE_IS(leaf(r, "s"), 3));
  ALL_EQ(leaf(r, "s"), 3, 1, 1, (double)i);
  td_dict_release(r);

  /* keepdim */
  r = td_dict_reduce(TD_RED_MAX, d, (const int32_t[]){1}, 1, 1, 0);
  CHECK(BATCH_IS(r, 3, 1) && SHAPE_IS(leaf(r, "a"), 3, 1, 2));
  ALL_EQ(leaf(r, "a"), 3, 1, 2, 8.0 * i + 6 + k);
  c = kid(r, "child");
  CHECK(BATCH_IS(c, 3, 1, 5) && SHAPE_IS(leaf(c, "x"), 3, 1, 5));
  td_dict_release(c);
  CHECK(SHAPE_IS(leaf(r, "s"), 3, 1));
  td_dict_release(r);

  /* the stacked value differs along dim 0: refused, naming the key */
  CHECK(td_dict_reduce(TD_RED_SUM, d, (const int32_t[]){0}, 1, 0, 0) == NULL);
  CHECK_MSG("sum: key 's': the non-tensor values differ along the reduced dims, so they "
            "cannot be reduced (drop the key first)");
  CHECK(td_dict_del(d, find(d, "s")) == 0);

  /* two dims, mean (floating leaves only: int64 b is refused with the kernel's message) */
  CHECK(td_dict_reduce(TD_RED_MEAN, d, (const int32_t[]){1, 0}, 2, 0, 0) == NULL);
  CHECK_ERROR("mean: key 'b': mean: ");
  CHECK_ERROR("Got: int64");
  td_dict *f = td_dict_to_dtype(d, TD_FLOAT64, 0);
  r = td_dict_reduce(TD_RED_MEAN, f, (const int32_t[]){1, 0}, 2, 0, 0);
  CHECK(BATCH_IS0(r) && SHAPE_IS(leaf(r, "a"), 2) && SHAPE_IS(leaf(r, "b")));
  ALL_EQ(leaf(r, "a"), 2, 1, 1, 11.0 + i);  /* mean of 8i + 2j + k over i, j */
  CHECK(EL0(leaf(r, "b")) == 5.5);
  c = kid(r, "child");
  CHECK(BATCH_IS(c, 5) && SHAPE_IS(leaf(c, "x"), 5));
  ALL_EQ(leaf(c, "x"), 5, 1, 1, 27.5 + i);
  td_dict_release(c);
  td_dict_release(r);
  r = td_dict_reduce(TD_RED_MEAN, f, (const int32_t[]){0, 1}, 2, 1, 0);
  CHECK(BATCH_IS(r, 1, 1) && SHAPE_IS(leaf(r, "a"), 1, 1, 2));
  td_dict_release(r);

  /* std with correction 0 over dim 0 of b (4i + j): values 0, 4, 8 -> sqrt(32/3) */
  r = td_dict_reduce(TD_RED_STD, f, (const int32_t[]){0}, 1, 0, 0);
  CHECK(r && fabs(EL(leaf(r, "b"), 2) - sqrt(32.0 / 3)) < 1e-12);
  td_dict_release(r);
  r = td_dict_reduce(TD_RED_STD, f, (const int32_t[]){0}, 1, 0, 1);
  CHECK(r && fabs(EL(leaf(r, "b"), 2) - 4.0) < 1e-12);
  td_dict_release(r);
  td_dict_release(f);

  /* argmax along dim 1 gives int64 positions */
  r = td_dict_reduce(TD_RED_ARGMAX, d, (const int32_t[]){1}, 1, 0, 0);
  CHECK(r && leaf(r, "a")->dtype == TD_INT64 && SHAPE_IS(leaf(r, "a"), 3, 2));
  ALL_EQ(leaf(r, "a"), 3, 2, 1, 3.0);
  td_dict_release(r);

  /* ndims 0: every leaf over all its elements, batch [] at every level */
  r = td_dict_reduce(TD_RED_SUM, d, NULL, 0, 0, 0);
  CHECK(BATCH_IS0(r) && SHAPE_IS(leaf(r, "a")) && SHAPE_IS(leaf(r, "b")));
  CHECK(EL0(leaf(r, "a")) == 276 && EL0(leaf(r, "b")) == 66);
  CHECK(leaf(r, "b")->dtype == TD_INT64);
  c = kid(r, "child");
  CHECK(BATCH_IS0(c) && EL0(leaf(c, "x")) == 1770);
  td_dict_release(c);
  CHECK(kind(r, "u") == TD_ENTRY_VALUE);
  td_dict_release(r);
  r = td_dict_reduce(TD_RED_ANY, d, NULL, 0, 1, 0);
  CHECK(BATCH_IS(r, 1, 1) && SHAPE_IS(leaf(r, "a"), 1, 1, 1) && leaf(r, "a")->dtype == TD_BOOL);
  c = kid(r, "child");
  CHECK(BATCH_IS(c, 1, 1, 1));
  td_dict_release(c);
  td_dict_release(r);

  /* names of the kept dims follow */
  CHECK(td_dict_set_names(d, (const char *const[]){"env", "time"}) == 0);
  r = td_dict_reduce(TD_RED_MIN, d, (const int32_t[]){0}, 1, 0, 0);
  CHECK(BATCH_IS(r, 4) && td_dict_head_borrow(r)->has_names);
  CHECK(r && td_dict_name_borrow(r, 0) && strcmp(td_dict_name_borrow(r, 0), "time") == 0);
  ALL_EQ(leaf(r, "b"), 4, 1, 1, (double)i);
  td_dict_release(r);
  r = td_dict_reduce(TD_RED_MIN, d, (const int32_t[]){0}, 1, 1, 0);
  CHECK(r && strcmp(td_dict_name_borrow(r, 0), "env") == 0);
  td_dict_release(r);

  /* dims refused */
  CHECK(td_dict_reduce(TD_RED_SUM, d, (const int32_t[]){2}, 1, 0, 0) == NULL);
  CHECK_MSG("sum: dim 2 is out of range for batch size [3, 4] (dims are 0-based)");
  CHECK(td_dict_reduce(TD_RED_SUM, d, (const int32_t[]){-1}, 1, 0, 0) == NULL);
  CHECK_MSG("sum: dim -1 is out of range for batch size [3, 4] (dims are 0-based)");
  CHECK(td_dict_reduce(TD_RED_PROD, d, (const int32_t[]){1, 1}, 2, 0, 0) == NULL);
  CHECK_MSG("prod: dim 1 appears more than once in the dims");
  CHECK(td_dict_reduce(TD_RED_SUM, d, NULL, 1, 0, 0) == NULL);
  CHECK_MSG("sum: 1 dims given for batch size [3, 4] but the list is NULL");
  CHECK(td_dict_reduce(77, d, NULL, 0, 0, 0) == NULL);
  CHECK_MSG("reduce: unknown reduction op 77");
  td_dict_release(d);

  /* texts equal along the reduced dim but at different positions: kept */
  td_dict *g = td_dict_new(2, (const int64_t[]){2, 3});
  put(g, "t", seq(2, (const int64_t[]){2, 3}, TD_FLOAT32, 0));
  put_values(g, "s", 4, (const char *const[]){"\"x\"", "\"y\"", "\"x\"", "\"y\""},
             (const int64_t[]){0, 2, 0, 1, 3, 1});
  r = td_dict_reduce(TD_RED_SUM, g, (const int32_t[]){1}, 1, 0, 0);
  CHECK(r && kind(r, "s") == TD_ENTRY_VALUES && SHAPE_IS(leaf(r, "s"), 2));
  CHECK(r && strcmp(text(r, "s", (int64_t)EL(leaf(r, "s"), 0)), "\"x\"") == 0);
  CHECK(r && strcmp(text(r, "s", (int64_t)EL(leaf(r, "s"), 1)), "\"y\"") == 0);
  td_dict_release(r);
  r = td_dict_reduce(TD_RED_SUM, g, NULL, 0, 0, 0); /* over everything: x and y differ */
  CHECK(r == NULL);
  CHECK_ERROR("sum: key 's': the non-tensor values differ");
  td_dict_release(g);

  /* an empty reduced dim: sum is 0, min is refused with the key */
  td_dict *z = td_dict_new(2, (const int64_t[]){2, 0});
  put(z, "t", td_tensor_empty(3, (const int64_t[]){2, 0, 3}, TD_FLOAT32));
  r = td_dict_reduce(TD_RED_SUM, z, (const int32_t[]){1}, 1, 0, 0);
  CHECK(BATCH_IS(r, 2) && SHAPE_IS(leaf(r, "t"), 2, 3));
  ALL_EQ(leaf(r, "t"), 2, 3, 1, 0.0);
  td_dict_release(r);
  CHECK(td_dict_reduce(TD_RED_MIN, z, (const int32_t[]){1}, 1, 0, 0) == NULL);
  CHECK_ERROR("min: key 't': min: Expected reduction dim 1 to have non-zero size");
  td_dict_release(z);
  CHECK_EQ_I(td_live_bytes(), before);
}

static void test_reduce_all(void) {
  const int64_t before = td_live_bytes();
  /* a: [2, 2] = 1..4, b: int64 [3]... no: batch [], a: float32 [2, 2] = 1..4,
   * b: int64 [3] = 5..7, child.x: float64 [2] = 8, 9, plus a non-tensor value */
  td_dict *d = td_dict_new(0, NULL);
  put(d, "a", seq(2, (const int64_t[]){2, 2}, TD_FLOAT32, 1));
  put(d, "b", seq(1, (const int64_t[]){3}, TD_INT64, 5));
  td_dict *c = td_dict_new(0, NULL);
  put(c, "x", seq(1, (const int64_t[]){2}, TD_FLOAT64, 8));
  put_dict(d, "child", c);
  put_value(d, "note", "\"ignored\"");

  td_tensor *t = td_dict_reduce_all(TD_RED_SUM, d, 0);
  CHECK(t && t->ndim == 0 && t->dtype == TD_FLOAT64 && EL0(t) == 45);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_MEAN, d, 0);
  CHECK(t && EL0(t) == 5);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_PROD, d, 0);
  CHECK(t && EL0(t) == 362880);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_MIN, d, 0);
  CHECK(t && EL0(t) == 1 && t->dtype == TD_FLOAT64);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_MAX, d, 0);
  CHECK(t && EL0(t) == 9);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_VAR, d, 1);
  CHECK(t && fabs(EL0(t) - 7.5) < 1e-12);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_STD, d, 0);
  CHECK(t && fabs(EL0(t) - sqrt(60.0 / 9)) < 1e-12);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_NORM, d, 2);
  CHECK(t && fabs(EL0(t) - sqrt(285.0)) < 1e-12);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_NORM, d, INFINITY);
  CHECK(t && EL0(t) == 9);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_ALL, d, 0);
  CHECK(t && t->dtype == TD_BOOL && EL0(t) == 1);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_ANY, d, 0);
  CHECK(t && t->dtype == TD_BOOL && EL0(t) == 1);
  td_tensor_release(t);

  /* one zero anywhere makes all false */
  c = kid(d, "child");
  put(c, "zero", td_tensor_full(0, NULL, TD_INT8, 0));
  t = td_dict_reduce_all(TD_RED_ALL, d, 0);
  CHECK(t && EL0(t) == 0);
  td_tensor_release(t);
  t = td_dict_reduce_all(TD_RED_PROD, d, 0);
  CHECK(t && EL0(t) == 0);
  td_tensor_release(t);
  td_dict_release(c);

  CHECK(td_dict_reduce_all(TD_RED_ARGMAX, d, 0) == NULL);
  CHECK_MSG("argmax: an index over every leaf of a TensorDict has no meaning; reduce each "
            "leaf instead");
  CHECK(td_dict_reduce_all(-3, d, 0) == NULL);
  CHECK_MSG("reduce_all: unknown reduction op -3");
  td_dict_release(d);

  /* no tensor leaves (a nested container and a value only) */
  td_dict *e = td_dict_new(1, (const int64_t[]){2});
  put_dict(e, "empty", td_dict_new(1, (const int64_t[]){2}));
  put_value(e, "v", "1");
  struct { int32_t op; int32_t dtype; double v; } ok[] = {
      {TD_RED_SUM, TD_FLOAT64, 0}, {TD_RED_PROD, TD_FLOAT64, 1}, {TD_RED_NORM, TD_FLOAT64, 0},
      {TD_RED_ALL, TD_BOOL, 1},    {TD_RED_ANY, TD_BOOL, 0}};
  for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
    t = td_dict_reduce_all(ok[k].op, e, 2);
    CHECK(t && t->ndim == 0 && t->dtype == ok[k].dtype && EL0(t) == ok[k].v);
    td_tensor_release(t);
  }
  CHECK(td_dict_reduce_all(TD_RED_MEAN, e, 0) == NULL);
  CHECK_MSG("mean: the TensorDict has no tensor leaves to reduce");
  CHECK(td_dict_reduce_all(TD_RED_MIN, e, 0) == NULL);
  CHECK_MSG("min: the TensorDict has no tensor leaves to reduce");
  CHECK(td_dict_reduce_all(TD_RED_MAX, e, 0) == NULL);
  td_dict_release(e);

  /* leaves with no elements: min is refused by the kernel, sum is 0 */
  td_dict *z = td_dict_new(1, (const int64_t[]){0});
  put(z, "t", td_tensor_empty(2, (const int64_t[]){0, 3}, TD_FLOAT32));
  t = td_dict_reduce_all(TD_RED_SUM, z, 0);
  CHECK(t && EL0(t) == 0);
  td_tensor_release(t);
  CHECK(td_dict_reduce_all(TD_RED_MIN, z, 0) == NULL);
  CHECK_ERROR("min: ");
  td_dict_release(z);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- masks and where ------------------------------------------------------------------------ */

static void test_masked_fill(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = grid();

  /* a mask over the first batch dim: rows 0 and 2 */
  td_tensor *m3 = VALS(TD_BOOL, S(3), 1, 0, 1);
  td_dict *r = td_dict_masked_fill(d, m3, -1);
  CHECK(BATCH_IS(r, 3, 4) && SHAPE_IS(leaf(r, "a"), 3, 4, 2) && leaf(r, "a")->dtype == TD_FLOAT32);
  ALL_EQ(leaf(r, "a"), 3, 4, 2, i != 1 ? -1 : 8.0 * i + 2 * j + k);
  CHECK(leaf(r, "b")->dtype == TD_INT64);
  ALL_EQ(leaf(r, "b"), 3, 4, 1, i != 1 ? -1 : 4.0 * i + j);
  td_dict *c = kid(r, "child");
  ALL_EQ(leaf(c, "x"), 3, 4, 5, i != 1 ? -1 : 20.0 * i + 5 * j + k);
  td_dict_release(c);
  CHECK(kind(r, "s") == TD_ENTRY_VALUES && kind(r, "u") == TD_ENTRY_VALUE);
  ALL_EQ(leaf(d, "b"), 3, 4, 1, 4.0 * i + j); /* the input is untouched */
  td_dict_release(r);

  /* the full batch shape, and [1, 4] broadcast over rows */
  td_tensor *m34 = td_tensor_empty(2, (const int64_t[]){3, 4}, TD_BOOL);
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 4; j++) wr(m34, (const int64_t[]){i, j}, (i + j) % 2);
  r = td_dict_masked_fill(d, m34, 7);
  ALL_EQ(leaf(r, "a"), 3, 4, 2, (i + j) % 2 ? 7 : 8.0 * i + 2 * j + k);
  td_dict_release(r);
  td_tensor *m14 = VALS(TD_BOOL, S(1, 4), 0, 0, 0, 1);
  r = td_dict_masked_fill(d, m14, 0.5);
  ALL_EQ(leaf(r, "a"), 3, 4, 2, j == 3 ? 0.5 : 8.0 * i + 2 * j + k);
  ALL_EQ(leaf(r, "b"), 3, 4, 1, j == 3 ? 0 : 4.0 * i + j); /* 0.5 truncates into int64 */
  td_dict_release(r);

  /* refused masks name both shapes */
  td_tensor *m4 = VALS(TD_BOOL, S(4), 1, 0, 1, 0);
  CHECK(td_dict_masked_fill(d, m4, 0) == NULL);
  CHECK_MSG("masked_fill: mask of shape [4] does not broadcast to the leading batch dims [3] "
            "(batch size [3, 4])");
  td_tensor *m342 = td_tensor_full(3, (const int64_t[]){3, 4, 2}, TD_BOOL, 1);
  CHECK(td_dict_masked_fill(d, m342, 0) == NULL);
  CHECK_MSG("masked_fill: mask of shape [3, 4, 2] has more dims than the batch size [3, 4]");
  td_tensor *mi = VALS(TD_INT64, S(3), 1, 0, 1);
  CHECK(td_dict_masked_fill(d, mi, 0) == NULL);
  CHECK_MSG("masked_fill: the mask must be a bool tensor, got int64");
  CHECK(td_dict_masked_fill(d, NULL, 0) == NULL);
  CHECK_MSG("masked_fill: the mask is NULL");

  /* in place */
  CHECK(td_dict_masked_fill_(d, m3, 100) == 0);
  ALL_EQ(leaf(d, "a"), 3, 4, 2, i != 1 ? 100 : 8.0 * i + 2 * j + k);
  c = kid(d, "child");
  ALL_EQ(leaf(c, "x"), 3, 4, 5, i != 1 ? 100 : 20.0 * i + 5 * j + k);
  td_dict_release(c);
  CHECK(td_dict_masked_fill_(d, m4, 0) == TD_ESHAPE);
  CHECK_MSG("masked_fill_: mask of shape [4] does not broadcast to the leading batch dims [3] "
            "(batch size [3, 4])");
  /* NaN cannot go into the int64 leaf b: refused before a is written */
  CHECK(td_dict_masked_fill_(d, m14, NAN) != 0);
  CHECK_ERROR("masked_fill_: key 'b': ");
  ALL_EQ(leaf(d, "a"), 3, 4, 2, i != 1 ? 100 : 8.0 * i + 2 * j + k);
  td_dict_release(d);

  /* batch [] takes a 0-dim mask */
  td_dict *e = td_dict_new(0, NULL);
  put(e, "v", seq(1, (const int64_t[]){3}, TD_FLOAT32, 0));
  td_tensor *yes = td_tensor_full(0, NULL, TD_BOOL, 1);
  r = td_dict_masked_fill(e, yes, 9);
  ALL_EQ(leaf(r, "v"), 3, 1, 1, 9.0);
  td_dict_release(r);
  td_dict_release(e);

  td_tensor_release(m3), td_tensor_release(m34), td_tensor_release(m14);
  td_tensor_release(m4), td_tensor_release(m342), td_tensor_release(mi);
  td_tensor_release(yes);
  CHECK_EQ_I(td_live_bytes(), before);
}

static void test_masked_select(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = grid();

  /* rows 0 and 2 of dim 0: batch [2, 4], stacked values follow */
  td_tensor *m3 = VALS(TD_BOOL, S(3), 1, 0, 1);
  td_dict *r = td_dict_masked_select(d, m3);
  CHECK(BATCH_IS(r, 2, 4) && SHAPE_IS(leaf(r, "a"), 2, 4, 2) && leaf(r, "a")->dtype == TD_FLOAT32);
  ALL_EQ(leaf(r, "a"), 2, 4, 2, 8.0 * (2 * i) + 2 * j + k);
  ALL_EQ(leaf(r, "b"), 2, 4, 1, 4.0 * (2 * i) + j);
  td_dict *c = kid(r, "child");
  CHECK(BATCH_IS(c, 2, 4, 5));
  ALL_EQ(leaf(c, "x"), 2, 4, 5, 20.0 * (2 * i) + 5 * j + k);
  td_dict_release(c);
  CHECK(SHAPE_IS(leaf(r, "s"), 2, 4) && strcmp(text(r, "s", (int64_t)EL(leaf(r, "s"), 1, 0)),
                                               "\"r2\"") == 0);
  CHECK(kind(r, "u") == TD_ENTRY_VALUE);
  td_dict_release(r);

  /* a mask over both batch dims: batch [count] */
  td_tensor *m34 = td_tensor_empty(2, (const int64_t[]){3, 4}, TD_BOOL);
  for (int64_t i = 0; i < 3; i++)
    for (int64_t j = 0; j < 4; j++) wr(m34, (const int64_t[]){i, j}, j == 1);
  r = td_dict_masked_select(d, m34);
  CHECK(BATCH_IS(r, 3) && SHAPE_IS(leaf(r, "a"), 3, 2) && SHAPE_IS(leaf(r, "b"), 3));
  ALL_EQ(leaf(r, "b"), 3, 1, 1, 4.0 * i + 1);
  c = kid(r, "child");
  CHECK(BATCH_IS(c, 3, 5) && SHAPE_IS(leaf(c, "x"), 3, 5));
  td_dict_release(c);
  td_dict_release(r);

  /* no row selected */
  td_tensor *none = td_tensor_full(1, (const int64_t[]){3}, TD_BOOL, 0);
  r = td_dict_masked_select(d, none);
  CHECK(BATCH_IS(r, 0, 4) && SHAPE_IS(leaf(r, "a"), 0, 4, 2));
  td_dict_release(r);

  /* masks must match the leading batch dims exactly */
  td_tensor *m14 = td_tensor_full(2, (const int64_t[]){1, 4}, TD_BOOL, 1);
  CHECK(td_dict_masked_select(d, m14) == NULL);
  CHECK_MSG("masked_select: mask of shape [1, 4] does not match the leading batch dims [3, 4] "
            "(batch size [3, 4])");
  td_tensor *m0 = td_tensor_full(0, NULL, TD_BOOL, 1);
  CHECK(td_dict_masked_select(d, m0) == NULL);
  CHECK_MSG("masked_select: the mask has no dims; it must cover leading batch dims");
  td_tensor *mf = td_tensor_full(1, (const int64_t[]){3}, TD_FLOAT32, 1);
  CHECK(td_dict_masked_select(d, mf) == NULL);
  CHECK_MSG("masked_select: the mask must be a bool tensor, got float32");

  td_tensor_release(m3), td_tensor_release(m34), td_tensor_release(none);
  td_tensor_release(m14), td_tensor_release(m0), td_tensor_release(mf);
  td_dict_release(d);
  CHECK_EQ_I(td_live_bytes(), before);
}

static void test_where(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = sample(), *o = other();
  td_tensor *m = VALS(TD_BOOL, S(3), 1, 0, 1);

  /* mask ? d : o, the mask aligned on the batch dim */
  td_dict *r = td_dict_where(m, d, o, 0, 0);
  check_structure(r, d);
  CHECK(leaf(r, "a")->dtype == TD_FLOAT64 && leaf(r, "b")->dtype == TD_INT64);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, i != 1 ? 2.0 * i + j : 100 + 2.0 * i + j);
  ALL_EQ(leaf(r, "b"), 3, 1, 1, i != 1 ? (double)i : 10.0 * i);
  td_dict *c = kid(r, "child");
  ALL_EQ(leaf(c, "x"), 3, 4, 1, i != 1 ? 4.0 * i + j : 1);
  td_dict_release(c);
  td_dict_release(r);

  /* a scalar for the other side: an int keeps dtypes, a float raises integers */
  r = td_dict_where(m, d, NULL, -5, TD_SCALAR_INT);
  CHECK(r && leaf(r, "b")->dtype == TD_INT64);
  ALL_EQ(leaf(r, "b"), 3, 1, 1, i != 1 ? (double)i : -5);
  ALL_EQ(leaf(r, "a"), 3, 2, 1, i != 1 ? 2.0 * i + j : -5);
  td_dict_release(r);
  r = td_dict_where(m, d, NULL, 0.25, TD_SCALAR_FLOAT);
  CHECK(r && leaf(r, "b")->dtype == TD_FLOAT32 && EL(leaf(r, "b"), 1) == 0.25);
  td_dict_release(r);

  /* refusals */
  td_tensor *m2 = VALS(TD_BOOL, S(2), 1, 0);
  CHECK(td_dict_where(m2, d, NULL, 0, TD_SCALAR_INT) == NULL);
  CHECK_MSG("where: mask of shape [2] does not broadcast to the leading batch dims [3] "
            "(batch size [3])");
  CHECK(td_dict_where(m, d, NULL, 0, 9) == NULL);
  CHECK_MSG("where: unknown scalar kind 9");
  td_dict *oc = kid(o, "child");
  CHECK(td_dict_del(oc, find(oc, "x")) == 0);
  CHECK(td_dict_where(m, d, o, 0, 0) == NULL);
  CHECK_MSG("where: key 'child.x' is missing from the other TensorDict");
  td_dict_release(oc);

  td_tensor_release(m), td_tensor_release(m2);
  td_dict_release(d), td_dict_release(o);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- equal and allclose ---------------------------------------------------------------------- */

static int32_t eq(const td_dict *a, const td_dict *b) {
  int32_t out = -1;
  if (td_dict_equal(a, b, &out) != 0) return -2;
  return out;
}

static int32_t close_(const td_dict *a, const td_dict *b, double rtol, double atol) {
  int32_t out = -1;
  if (td_dict_allclose(a, b, rtol, atol, &out) != 0) return -2;
  return out;
}

static void test_equal(void) {
  const int64_t before = td_live_bytes();
  td_dict *d = sample(), *e = sample();
  CHECK_EQ_I(eq(d, e), 1);
  CHECK_EQ_I(eq(d, d), 1);
  CHECK_EQ_I(close_(d, e, 0, 0), 1);

  /* the same content in another key order and other dtypes */
  td_dict *f = td_dict_new(1, (const int64_t[]){3});
  put_values(f, "s", 3, (const char *const[]){"\"p\"", "\"q\"", "\"p\""},
             (const int64_t[]){2, 1, 0}); /* other positions, same texts */
  put_value(f, "u", "\"hi\"");
  td_dict *fc = td_dict_new(2, (const int64_t[]){3, 4});
  put(fc, "x", seq(2, (const int64_t[]){3, 4}, TD_INT32, 0));
  put_dict(f, "child", fc);
  put(f, "b", seq(1, (const int64_t[]){3}, TD_FLOAT64, 0));
  put(f, "a", seq(2, (const int64_t[]){3, 2}, TD_FLOAT64, 0));
  CHECK_EQ_I(eq(d, f), 1);
  CHECK_EQ_I(close_(d, f, 1e-5, 1e-8), 1);

  /* one element differs, deep down */
  td_dict *dc = kid(e, "child");
  CHECK(td_tensor_write_f64((td_tensor *)leaf(dc, "x"), (const int64_t[]){2, 3}, 11.5) == 0);
  CHECK_EQ_I(eq(d, e), 0);
  CHECK_EQ_I(close_(d, e, 0, 0.4), 0);
  CHECK_EQ_I(close_(d, e, 0, 0.5), 1);   /* |11 - 11.5| <= 0.5 */
  CHECK_EQ_I(close_(d, e, 0.05, 0), 1);  /* 0.5 <= 0.05 * 11.5 */
  CHECK_EQ_I(close_(d, e, 0.04, 0), 0);
  CHECK(td_tensor_write_f64((td_tensor *)leaf(dc, "x"), (const int64_t[]){2, 3}, 11) == 0);
  CHECK_EQ_I(eq(d, e), 1);

  /* NaN is unequal, even to itself; infinities equal themselves only */
  CHECK(td_tensor_write_f64((td_tensor *)leaf(dc, "x"), (const int64_t[]){0, 0}, NAN) == 0);
  CHECK_EQ_I(eq(e, e), 0);
  CHECK_EQ_I(close_(e, e, 1, 1), 0);
  CHECK(td_tensor_write_f64((td_tensor *)leaf(dc, "x"), (const int64_t[]){0, 0}, INFINITY) == 0);
  CHECK_EQ_I(eq(e, e), 1);
  CHECK_EQ_I(close_(e, e, 0, 0), 1);
  CHECK_EQ_I(close_(d, e, 1e9, 1e9), 0); /* 0 vs inf: never close */
  CHECK(td_tensor_write_f64((td_tensor *)leaf(dc, "x"), (const int64_t[]){0, 0}, 0) == 0);
  CHECK_EQ_I(eq(d, e), 1);
  td_dict_release(dc);

  /* integers are exact for allclose */
  td_dict *i1 = td_dict_new(0, NULL), *i2 = td_dict_new(0, NULL);
  put(i1, "n", td_tensor_full(1, (const int64_t[]){2}, TD_INT64, 100));
  put(i2, "n", td_tensor_full(1, (const int64_t[]){2}, TD_INT64, 101));
  CHECK_EQ_I(close_(i1, i2, 0.5, 5), 0);
  CHECK_EQ_I(eq(i1, i2), 0);
  td_dict_release(i2);
  i2 = td_dict_new(0, NULL);
  put(i2, "n", td_tensor_full(1, (const int64_t[]){2}, TD_FLOAT32, 100.5)); /* one floating */
  CHECK_EQ_I(close_(i1, i2, 0, 0.5), 1);
  CHECK_EQ_I(eq(i1, i2), 0);
  td_dict_release(i2);

  /* shapes, batch sizes, key sets and kinds that differ: 0, not an error */
  i2 = td_dict_new(0, NULL);
  put(i2, "n", td_tensor_full(1, (const int64_t[]){3}, TD_INT64, 100));
  CHECK_EQ_I(eq(i1, i2), 0);
  CHECK_EQ_I(close_(i1, i2, 1, 1), 0);
  td_dict_release(i2);
  i2 = td_dict_new(1, (const int64_t[]){2});
  put(i2, "n", td_tensor_full(1, (const int64_t[]){2}, TD_INT64, 100));
  CHECK_EQ_I(eq(i1, i2), 0); /* batch [] vs [2] */
  td_dict_release(i2);
  i2 = td_dict_new(0, NULL);
  put(i2, "n", td_tensor_full(1, (const int64_t[]){2}, TD_INT64, 100));
  CHECK_EQ_I(eq(i1, i2), 1);
  put(i2, "extra", td_tensor_full(0, NULL, TD_INT64, 1));
  CHECK_EQ_I(eq(i1, i2), 0);
  CHECK_EQ_I(eq(i2, i1), 0);
  td_dict_release(i2);
  i2 = td_dict_new(0, NULL);
  put_value(i2, "n", "[100, 100]");
  CHECK_EQ_I(eq(i1, i2), 0); /* tensor vs non-tensor */
  td_dict_release(i2);
  td_dict_release(i1);

  /* non-tensor texts */
  td_dict *g = sample();
  put_value(g, "u", "\"HI\"");
  CHECK_EQ_I(eq(d, g), 0);
  CHECK_EQ_I(close_(d, g, 1, 1), 0);
  td_dict_release(g);
  g = sample();
  put_values(g, "s", 2, (const char *const[]){"\"p\"", "\"q\""}, (const int64_t[]){0, 1, 1});
  CHECK_EQ_I(eq(d, g), 0);
  td_dict_release(g);
  /* a uniform value equals a stacked one holding its text everywhere */
  g = sample();
  put_values(g, "u", 2, (const char *const[]){"\"hi\"", "\"hi\""}, (const int64_t[]){0, 1, 0});
  CHECK_EQ_I(eq(d, g), 1);
  CHECK_EQ_I(eq(g, d), 1);
  put_values(g, "u", 2, (const char *const[]){"\"hi\"", "\"ho\""}, (const int64_t[]){0, 1, 0});
  CHECK_EQ_I(eq(g, d), 0);
  td_dict_release(g);

  /* errors */
  int32_t out = 5;
  CHECK(td_dict_equal(d, NULL, &out) == TD_EINVAL && out == 5);
  CHECK_MSG("equal: the second TensorDict is NULL");
  CHECK(td_dict_equal(d, e, NULL) == TD_EINVAL);
  CHECK_MSG("equal: the output pointer is NULL");
  CHECK(td_dict_allclose(d, e, -1, 0, &out) == TD_EINVAL);
  CHECK_MSG("allclose: rtol (-1) and atol (0) must be >= 0");
  CHECK(td_dict_allclose(d, e, 0, NAN, &out) == TD_EINVAL);

  td_dict_release(d), td_dict_release(e), td_dict_release(f);
  CHECK_EQ_I(td_live_bytes(), before);
}

/* ---- partial failures release everything ------------------------------------------------------ */

static void test_partial_failure(void) {
  const int64_t before = td_live_bytes();
  /* many leaves, the last one refuses: the leaves made before it are released */
  td_dict *d = td_dict_new(1, (const int64_t[]){4});
  char key[16];
  for (int k = 0; k < 20; k++) {
    snprintf(key, sizeof key, "k%02d", k);
    put(d, key, td_tensor_full(2, (const int64_t[]){4, 100}, TD_FLOAT32, k));
  }
  td_dict *inner = td_dict_new(1, (const int64_t[]){4});
  put(inner, "ok", td_tensor_full(1, (const int64_t[]){4}, TD_FLOAT32, 1));
  put(inner, "flag", td_tensor_full(1, (const int64_t[]){4}, TD_BOOL, 1));
  put_dict(d, "z", inner);
  CHECK(td_dict_binary(TD_BINARY_SUB, d, NULL, NULL, 1, TD_SCALAR_INT, 0) == NULL);
  CHECK_ERROR("sub: key 'z.flag': ");
  CHECK(td_dict_unary(TD_UNARY_NEG, d) == NULL);
  CHECK_ERROR("neg: key 'z.flag': ");
  td_dict *o = td_dict_copy(d, TD_COPY_CLONE);
  td_dict *oz = kid(o, "z");
  CHECK(td_dict_del(oz, find(oz, "flag")) == 0);
  put(oz, "flag", td_tensor_full(1, (const int64_t[]){4}, TD_INT64, 1));
  CHECK(td_dict_binary(TD_BINARY_SUB, d, o, NULL, 0, 0, 0) == NULL);
  CHECK_ERROR("sub: key 'z.flag': ");
  td_dict_release(oz);
  td_dict_release(o);
  CHECK(td_dict_reduce(TD_RED_MEAN, d, (const int32_t[]){0}, 1, 0, 0) == NULL);
  CHECK_ERROR("mean: key 'z.flag': ");
  td_dict_release(d);
  CHECK_EQ_I(td_live_bytes(), before);
}

int main(void) {
  test_unary();
  test_clamp();
  test_binary_scalar();
  test_binary_dict();
  test_binary_dict_errors();
  test_binary_tensor();
  test_reduce();
  test_reduce_all();
  test_masked_fill();
  test_masked_select();
  test_where();
  test_equal();
  test_partial_failure();
  CHECK_EQ_I(td_live_bytes(), 0);
  CHECK_SUMMARY();
}
