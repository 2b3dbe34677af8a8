/*
 * test_promote.c: td_result_type and td_result_type_scalar against torch.
 *
 * The tables below are torch's answers, one entry per dtype pair: promote_types, and
 * result_type for every combination of operands with dims, 0-dim tensors and Python
 * scalars (True, 1, 1.5 standing for the BOOL, INT and FLOAT kinds). They were printed
 * by torch 2.x (torch.promote_types / torch.result_type) and match torch's written rules:
 * categories bool < integer < floating; within the highest category, operands with dims
 * decide, then 0-dim tensors, then scalars (int64 / float32 / bool).
 */
#include <stdint.h>

#include "check.h"

enum {
  B = TD_BOOL, U8 = TD_UINT8, I8 = TD_INT8, I16 = TD_INT16, I32 = TD_INT32, I64 = TD_INT64,
  F16 = TD_FLOAT16, BF = TD_BFLOAT16, F32 = TD_FLOAT32, F64 = TD_FLOAT64
};

static const int8_t torch_promote[TD_NUM_DTYPES][TD_NUM_DTYPES] = {
    {B, U8, I8, I16, I32, I64, F16, BF, F32, F64},
    {U8, U8, I16, I16, I32, I64, F16, BF, F32, F64},
    {I8, I16, I8, I16, I32, I64, F16, BF, F32, F64},
    {I16, I16, I16, I16, I32, I64, F16, BF, F32, F64},
    {I32, I32, I32, I32, I32, I64, F16, BF, F32, F64},
    {I64, I64, I64, I64, I64, I64, F16, BF, F32, F64},
    {F16, F16, F16, F16, F16, F16, F16, F32, F32, F64},
    {BF, BF, BF, BF, BF, BF, F32, BF, F32, F64},
    {F32, F32, F32, F32, F32, F32, F32, F32, F32, F64},
    {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64},
};
static const int8_t torch_dim_zero[TD_NUM_DTYPES][TD_NUM_DTYPES] = {
    {B, U8, I8, I16, I32, I64, F16, BF, F32, F64},
    {U8, U8, U8, U8, U8, U8, F16, BF, F32, F64},
    {I8, I8, I8, I8, I8, I8, F16, BF, F32, F64},
    {I16, I16, I16, I16, I16, I16, F16, BF, F32, F64},
    {I32, I32, I32, I32, I32, I32, F16, BF, F32, F64},
    {I64, I64, I64, I64, I64, I64, F16, BF, F32, F64},
    {F16, F16, F16, F16, F16, F16, F16, F16, F16, F16},
    {BF, BF, BF, BF, BF, BF, BF, BF, BF, BF},
    {F32, F32, F32, F32, F32, F32, F32, F32, F32, F32},
    {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64},
};
static const int8_t torch_zero_dim[TD_NUM_DTYPES][TD_NUM_DTYPES] = {
    {B, U8, I8, I16, I32, I64, F16, BF, F32, F64},
    {U8, U8, I8, I16, I32, I64, F16, BF, F32, F64},
    {I8, U8, I8, I16, I32, I64, F16, BF, F32, F64},
    {I16, U8, I8, I16, I32, I64, F16, BF, F32, F64},
    {I32, U8, I8, I16, I32, I64, F16, BF, F32, F64},
    {I64, U8, I8, I16, I32, I64, F16, BF, F32, F64},
    {F16, F16, F16, F16, F16, F16, F16, BF, F32, F64},
    {BF, BF, BF, BF, BF, BF, F16, BF, F32, F64},
    {F32, F32, F32, F32, F32, F32, F16, BF, F32, F64},
    {F64, F64, F64, F64, F64, F64, F16, BF, F32, F64},
};
static const int8_t torch_zero_zero[TD_NUM_DTYPES][TD_NUM_DTYPES] = {
    {B, U8, I8, I16, I32, I64, F16, BF, F32, F64},
    {U8, U8, I16, I16, I32, I64, F16, BF, F32, F64},
    {I8, I16, I8, I16, I32, I64, F16, BF, F32, F64},
    {I16, I16, I16, I16, I32, I64, F16, BF, F32, F64},
    {I32, I32, I32, I32, I32, I64, F16, BF, F32, F64},
    {I64, I64, I64, I64, I64, I64, F16, BF, F32, F64},
    {F16, F16, F16, F16, F16, F16, F16, F32, F32, F64},
    {BF, BF, BF, BF, BF, BF, F32, BF, F32, F64},
    {F32, F32, F32, F32, F32, F32, F32, F32, F32, F64},
    {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64},
};
static const int8_t torch_dim_scalar[TD_NUM_DTYPES][3] = {
    {B, I64, F32},
    {U8, U8, F32},
    {I8, I8, F32},
    {I16, I16, F32},
    {I32, I32, F32},
    {I64, I64, F32},
    {F16, F16, F16},
    {BF, BF, BF},
    {F32, F32, F32},
    {F64, F64, F64},
};
static const int8_t torch_zero_scalar[TD_NUM_DTYPES][3] = {
    {B, I64, F32},
    {U8, U8, F32},
    {I8, I8, F32},
    {I16, I16, F32},
    {I32, I32, F32},
    {I64, I64, F32},
    {F16, F16, F16},
    {BF, BF, BF},
    {F32, F32, F32},
    {F64, F64, F64},
};

/* A tensor of dtype with dims ([2]) or without (0-dim). */
static td_tensor *make(int32_t dtype, int dims) {
  const int64_t two = 2;
  return td_tensor_empty(dims ? 1 : 0, &two, dtype);
}

static void check_table(const char *what, int a_dims, int b_dims,
                        const int8_t table[TD_NUM_DTYPES][TD_NUM_DTYPES]) {
  int bad = 0;
  for (int32_t a = 0; a < TD_NUM_DTYPES; a++)
    for (int32_t b = 0; b < TD_NUM_DTYPES; b++) {
      td_tensor *ta = make(a, a_dims), *tb = make(b, b_dims);
      int32_t r = td_result_type(ta, tb);
      if (r != table[a][b] && bad++ < 5)
        fprintf(stderr, "%s: result_type(%s, %s) = %s, torch says %s\n", what, td_dtype_name(a),
                td_dtype_name(b), td_dtype_name(r), td_dtype_name(table[a][b]));
      td_tensor_release(ta);
      td_tensor_release(tb);
    }
  CHECK_EQ_I(bad, 0);
}

static void test_tables(void) {
  check_table("dims, dims", 1, 1, torch_promote);
  check_table("dims, 0-dim", 1, 0, torch_dim_zero);
  check_table("0-dim, dims", 0, 1, torch_zero_dim);
  check_table("0-dim, 0-dim", 0, 0, torch_zero_zero);
  int bad = 0;
  for (int32_t a = 0; a < TD_NUM_DTYPES; a++)
    for (int32_t k = 0; k < 3; k++)
      for (int dims = 0; dims < 2; dims++) {
        td_tensor *t = make(a, dims);
        int32_t want = dims ? torch_dim_scalar[a][k] : torch_zero_scalar[a][k];
        int32_t r = td_result_type_scalar(t, k);
        if (r != want && bad++ < 5)
          fprintf(stderr, "result_type(%s%s, kind %d) = %s, torch says %s\n", td_dtype_name(a),
                  dims ? "" : " 0-dim", k, td_dtype_name(r), td_dtype_name(want));
        td_tensor_release(t);
      }
  CHECK_EQ_I(bad, 0);
}

/* The rules in words, each on one case, so a wrong table cannot hide a wrong rule. */
static void test_rules(void) {
  struct {
    int32_t a, b;
    int a_dims, b_dims;
    int32_t want;
  } cases[] = {
      {U8, I8, 1, 1, I16},    /* neither holds the other */
      {I32, I64, 1, 1, I64},  {F16, BF, 1, 1, F32}, {I64, F16, 1, 1, F16},
      {B, U8, 1, 1, U8},      {U8, I16, 1, 1, I16},
      {F32, F64, 1, 0, F32},  /* a 0-dim float64 does not widen a float32 tensor */
      {I32, F64, 1, 0, F64},  /* but it raises the category, with its own dtype */
      {I8, I64, 1, 0, I8},    {B, I64, 1, 0, I64},  {U8, I8, 1, 0, U8},
      {F16, BF, 0, 1, BF},    /* the dimensioned one decides within a category */
      {I32, I64, 0, 0, I64},  /* two 0-dim tensors: plain promotion */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    td_tensor *a = make(cases[i].a, cases[i].a_dims), *b = make(cases[i].b, cases[i].b_dims);
    CHECK_EQ_I(td_result_type(a, b), cases[i].want);
    td_tensor_release(a);
    td_tensor_release(b);
  }
  struct {
    int32_t a;
    int dims;
    int32_t kind, want;
  } scal[] = {
      {B, 1, TD_SCALAR_INT, I64},   {B, 1, TD_SCALAR_FLOAT, F32}, {B, 1, TD_SCALAR_BOOL, B},
      {U8, 1, TD_SCALAR_INT, U8},   {I32, 1, TD_SCALAR_FLOAT, F32}, {F16, 1, TD_SCALAR_FLOAT, F16},
      {I64, 1, TD_SCALAR_BOOL, I64}, {I32, 0, TD_SCALAR_INT, I32}, {I32, 0, TD_SCALAR_FLOAT, F32},
      {F64, 0, TD_SCALAR_FLOAT, F64},
  };
  for (size_t i = 0; i < sizeof scal / sizeof scal[0]; i++) {
    td_tensor *a = make(scal[i].a, scal[i].dims);
    CHECK_EQ_I(td_result_type_scalar(a, scal[i].kind), scal[i].want);
    td_tensor_release(a);
  }
}

static void test_errors(void) {
  td_tensor *a = make(F32, 1);
  CHECK_EQ_I(td_result_type(NULL, a), TD_EINVAL);
  CHECK_ERROR("result_type: the first tensor is NULL");
  CHECK_EQ_I(td_result_type(a, NULL), TD_EINVAL);
  CHECK_EQ_I(td_result_type_scalar(NULL, TD_SCALAR_INT), TD_EINVAL);
  CHECK_EQ_I(td_result_type_scalar(a, 3), TD_EINVAL);
  CHECK_ERROR("unknown scalar kind 3");
  CHECK_EQ_I(td_result_type_scalar(a, -1), TD_EINVAL);
  td_tensor_release(a);
}

int main(void) {
  test_tables();
  test_rules();
  test_errors();
  CHECK_SUMMARY();
}
