/*
 * mpi_ops.c: the MPI datatype and operation of a core dtype for td_mpi_allreduce.
 * Integers and float32/64 map onto MPI's own types and ops. bool (one byte, 0 or 1)
 * reduces with logical or (sum, max) and logical and (min), so it stays 0 or 1.
 * float16 and bfloat16 have no MPI type: they travel as MPI_UINT16_T with ops of our
 * own that widen both operands to float (libtensordict's conversions), combine, and
 * round back, as a float16 tensor op does. max/min compare as MPI's float ops do.
 */
#include "dtype_table.h"
#include "mpi_internal.h"
#include "tensordict.h"

static MPI_Op half_ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
static MPI_Op bf16_ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

static inline float combine(float a, float b, int op) {
  switch (op) {
    case TD_MPI_SUM: return a + b;
    case TD_MPI_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}

/* MPI calls an op as inout[i] = in[i] (op) inout[i]. */
#define DEFINE_OP(name, to_float, from_float, op)                                   \
  static void name(void *in, void *inout, int *len, MPI_Datatype *type) {          \
    (void)type;                                                                     \
    const uint16_t *a = in;                                                         \
    uint16_t *b = inout;                                                            \
    for (int i = 0; i < *len; i++) b[i] = from_float(combine(to_float(a[i]), to_float(b[i]), op)); \
  }
DEFINE_OP(half_sum, td_half_to_float, td_float_to_half, TD_MPI_SUM)
DEFINE_OP(half_max, td_half_to_float, td_float_to_half, TD_MPI_MAX)
DEFINE_OP(half_min, td_half_to_float, td_float_to_half, TD_MPI_MIN)
DEFINE_OP(bf16_sum, td_bfloat16_to_float, td_float_to_bfloat16, TD_MPI_SUM)
DEFINE_OP(bf16_max, td_bfloat16_to_float, td_float_to_bfloat16, TD_MPI_MAX)
DEFINE_OP(bf16_min, td_bfloat16_to_float, td_float_to_bfloat16, TD_MPI_MIN)

int32_t tdm_ops_create(void) {
  MPI_User_function *half_fn[3] = {half_sum, half_max, half_min};
  MPI_User_function *bf16_fn[3] = {bf16_sum, bf16_max, bf16_min};
  for (int i = 0; i < 3; i++) {
    int32_t status = tdm_check(MPI_Op_create(half_fn[i], 1, &half_ops[i]), "init");
    if (!status) status = tdm_check(MPI_Op_create(bf16_fn[i], 1, &bf16_ops[i]), "init");
    if (status) { tdm_ops_free(); return status; }
  }
  return TD_MPI_OK;
}

void tdm_ops_free(void) {
  for (int i = 0; i < 3; i++) {
    if (half_ops[i] != MPI_OP_NULL) MPI_Op_free(&half_ops[i]);
    if (bf16_ops[i] != MPI_OP_NULL) MPI_Op_free(&bf16_ops[i]);
  }
}

/* Each dtype's MPI type and op, by the dtype table's kind: integers are MPI's sized
 * types (MPI_INT8_T for INT8), float and double MPI_FLOAT and MPI_DOUBLE, bool a byte
 * reduced logically, the 16-bit floats 16-bit words reduced by our ops. */
#define MPI_TYPE_B(DN, DT) MPI_UINT8_T
#define MPI_TYPE_I(DN, DT) MPI_##DN##_T
#define MPI_TYPE_H(DN, DT) MPI_UINT16_T
#define MPI_TYPE_BF(DN, DT) MPI_UINT16_T
#define MPI_TYPE_F(DN, DT) (sizeof(DT) == sizeof(float) ? MPI_FLOAT : MPI_DOUBLE)
#define MPI_OP_B(op) (op == TD_MPI_MIN ? MPI_LAND : MPI_LOR)
#define MPI_OP_I(op) builtin[op]
#define MPI_OP_H(op) half_ops[op]
#define MPI_OP_BF(op) bf16_ops[op]
#define MPI_OP_F(op) builtin[op]
#define MPI_CASE(_, DN, DT, DK, ...) \
  case TD_##DN: *type = MPI_TYPE_##DK(DN, DT); *mop = MPI_OP_##DK(op); return TD_MPI_OK;

/* The type and op of (dtype, op); TD_MPI_EINVAL for a code outside the enums. */
int32_t tdm_reduction(int32_t dtype, int32_t op, MPI_Datatype *type, MPI_Op *mop, const char *call) {
  static const MPI_Op builtin[3] = {MPI_SUM, MPI_MAX, MPI_MIN};
  if (op < TD_MPI_SUM || op > TD_MPI_MIN) return tdm_fail(TD_MPI_EINVAL, "%s: unknown op %d", call, op);
  switch (dtype) {
    TD_DTYPES_ALL(MPI_CASE, _)
    default: return tdm_fail(TD_MPI_EINVAL, "%s: unknown dtype %d", call, dtype);
  }
}
