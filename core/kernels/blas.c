/*
 * blas.c: dot, mv, mm, bmm and matmul, with torch.matmul's shape rules.
 *
 * Every call becomes one problem: out[batch..., m, n] = A[batch..., m, k] @ B[batch...,
 * k, n], where a 1-D left operand is a [1, k] row and a 1-D right operand a [k, 1]
 * column (the size-1 dim is left out of the result, as torch does), and the batch dims
 * broadcast. Then, by dtype:
 *  - float32 / float64 go to cblas on the caller's memory: a matrix whose strides are
 *    row-major or column-major with a valid leading dimension is passed as it is
 *    (CblasTrans for the column-major one); only other layouts (a stride 0, or no unit
 *    stride) are copied, once per operand. m == 1 or n == 1 use gemv (both: dot). Batch
 *    dims that the right operand broadcasts over and the left one steps through evenly
 *    fold into m, so [64, 128, 128] @ [128, 128] is one gemm; the others loop, one
 *    gemm per matrix (OpenBLAS threads each call).
 *  - float16 / bfloat16 compute in float32 and round the result back.
 *  - integers compute exactly in int64 (wrapping like the narrower dtype would), in a
 *    plain blocked loop on the thread pool, and are cast back to their dtype.
 *  - bool is refused, as torch refuses it; so are mixed dtypes.
 */
#include <cblas.h>
#include <limits.h>

#include "../src/parallel.h"
#include "dtype_table.h"
#include "iter.h"

/* The problem after torch's rules. */
typedef struct plan {
  int64_t m, k, n;
  int32_t nb; /* broadcast batch dims */
  int64_t batch[TD_MAX_DIMS];
  int32_t out_ndim;
  int64_t out_shape[TD_MAX_DIMS];
} plan;

/* One operand as a batch of matrices: element (batch..., i, j) lies at
 * data + (sum bs[d] * index[d] + i * rs + j * cs) * itemsize. */
typedef struct mat {
  const char *data;
  int64_t rs, cs;
  int64_t bs[TD_MAX_DIMS]; /* per plan batch dim; 0 where this operand broadcasts */
} mat;

/* ---- argument checks and shape rules ------------------------------------------------- */

static bool check_pair(const char *call, const td_tensor *a, const td_tensor *b) {
  if (!a || !b) {
    td_fail(TD_EINVAL, "%s: the %s tensor is NULL", call, a ? "second" : "first");
    return false;
  }
  return td_check_cpu(call, a, "first tensor") && td_check_cpu(call, b, "second tensor");
}

static bool check_dtypes(const char *call, const td_tensor *a, const td_tensor *b) {
  if (a->dtype != b->dtype) {
    td_fail(TD_EDTYPE, "%s: expected m1 and m2 to have the same dtype, but got: %s != %s", call,
            td_dtype_name(a->dtype), td_dtype_name(b->dtype));
    return false;
  }
  if (a->dtype == TD_BOOL) {
    td_fail(TD_EDTYPE, "%s: bool tensors are not supported (cast to an integer or floating "
            "dtype first)", call);
    return false;
  }
  return true;
}

static bool check_ndims(const char *call, const td_tensor *a, const td_tensor *b,
                        int32_t a_ndim, int32_t b_ndim) {
  if (a->ndim == a_ndim && b->ndim == b_ndim) return true;
  char sa[TD_SHAPE_STR], sb[TD_SHAPE_STR];
  td_fail(TD_ESHAPE, "%s: expected %d-D and %d-D tensors, but got shapes %s and %s", call,
          (int)a_ndim, (int)b_ndim, td_format_shape(sa, sizeof sa, a->ndim, a->shape),
          td_format_shape(sb, sizeof sb, b->ndim, b->shape));
  return false;
}

/* torch.matmul's rules on two tensors of >= 1 dims; the error names both shapes. */
static bool make_plan(const char *call, const td_tensor *a, const td_tensor *b, plan *p) {
  char sa[TD_SHAPE_STR], sb[TD_SHAPE_STR];
  const bool a_vec = a->ndim == 1, b_vec = b->ndim == 1;
  const int64_t ka = a->shape[a->ndim - 1], kb = b_vec ? b->shape[0] : b->shape[b->ndim - 2];
  if (ka != kb) {
    td_fail(TD_ESHAPE, "%s: shapes %s and %s cannot be multiplied (%lld != %lld)", call,
            td_format_shape(sa, sizeof sa, a->ndim, a->shape),
            td_format_shape(sb, sizeof sb, b->ndim, b->shape), (long long)ka, (long long)kb);
    return false;
  }
  p->m = a_vec ? 1 : a->shape[a->ndim - 2];
  p->k = ka;
  p->n = b_vec ? 1 : b->shape[b->ndim - 1];
  const int32_t anb = a->ndim > 2 ? a->ndim - 2 : 0, bnb = b->ndim > 2 ? b->ndim - 2 : 0;
  p->nb = anb > bnb ? anb : bnb;
  for (int32_t d = 0; d < p->nb; d++) { /* batch dims align from the right */
    const int32_t da = d - (p->nb - anb), db = d - (p->nb - bnb);
    const int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
    if (x != y && x != 1 && y != 1) {
      td_fail(TD_ESHAPE, "%s: the batch dims of shapes %s and %s do not broadcast (%lld vs "
              "%lld)", call, td_format_shape(sa, sizeof sa, a->ndim, a->shape),
              td_format_shape(sb, sizeof sb, b->ndim, b->shape), (long long)x, (long long)y);
      return false;
    }
    p->batch[d] = x == 1 ? y : x;
  }
  p->out_ndim = 0;
  for (int32_t d = 0; d < p->nb; d++) p->out_shape[p->out_ndim++] = p->batch[d];
  if (!a_vec) p->out_shape[p->out_ndim++] = p->m;
  if (!b_vec) p->out_shape[p->out_ndim++] = p->n;
  return true;
}

/* t as operand A (left) or B (right) of plan p. */
static void make_mat(const plan *p, const td_tensor *t, bool left, mat *x) {
  x->data = td_tensor_ptr(t);
  if (t->ndim == 1) { /* a row [1, k] or a column [k, 1]: the other stride never matters */
    x->rs = left ? 0 : t->strides[0];
    x->cs = left ? t->strides[0] : 0;
  } else {
    x->rs = t->strides[t->ndim - 2];
    x->cs = t->strides[t->ndim - 1];
  }
  const int32_t tnb = t->ndim > 2 ? t->ndim - 2 : 0;
  for (int32_t d = 0; d < p->nb; d++) {
    const int32_t dt = d - (p->nb - tnb);
    x->bs[d] = dt >= 0 && t->shape[dt] != 1 ? t->strides[dt] : 0;
  }
}

/* Drops batch dims of size 1 (they index nothing) from p and both operands. */
static void drop_unit_batch_dims(plan *p, mat *a, mat *b) {
  int32_t nb = 0;
  for (int32_t d = 0; d < p->nb; d++) {
    if (p->batch[d] == 1) continue;
    p->batch[nb] = p->batch[d];
    a->bs[nb] = a->bs[d];
    b->bs[nb] = b->bs[d];
    nb++;
  }
  p->nb = nb;
}

/* ---- BLAS layouts ---------------------------------------------------------------------- */

static int64_t max1(int64_t x) { return x > 1 ? x : 1; }

/* Whether an r x c matrix with strides (rs, cs) can go to cblas (row-major order) as it
 * is: row-major with leading dim rs (*trans false), or column-major with leading dim cs
 * (*trans true, passed as the transpose of a row-major matrix). The stride of a size-1
 * dim never matters. */
static bool blas_layout(int64_t r, int64_t c, int64_t rs, int64_t cs, bool *trans,
                        int64_t *ld) {
  *trans = false;
  *ld = 1;
  if ((c == 1 || cs == 1) && (r == 1 || rs >= max1(c))) {
    *ld = r == 1 ? max1(c) : rs;
  } else if ((r == 1 || rs == 1) && (c == 1 || cs >= max1(r))) {
    *trans = true;
    *ld = c == 1 ? max1(r) : cs;
  } else {
    return false;
  }
  return *ld <= INT_MAX;
}

static bool fits(int64_t r, int64_t c, const mat *x) {
  bool trans;
  int64_t ld;
  return blas_layout(r, c, x->rs, x->cs, &trans, &ld);
}

/* y[r] = M[r, c] @ x for M with strides (rs, cs) that fit cblas. */
static void gemv(int32_t dtype, int64_t r, int64_t c, const char *m, int64_t rs, int64_t cs,
                 const char *x, int64_t incx, char *y) {
  bool trans;
  int64_t ld;
  blas_layout(r, c, rs, cs, &trans, &ld);
  /* Column-major M is the transpose of a row-major c x r matrix. */
  const enum CBLAS_TRANSPOSE op = trans ? CblasTrans : CblasNoTrans;
  const int rows = (int)(trans ? c : r), cols = (int)(trans ? r : c);
  if (dtype == TD_FLOAT32)
    cblas_sgemv(CblasRowMajor, op, rows, cols, 1.0f, (const float *)m, (int)ld,
                (const float *)x, (int)incx, 0.0f, (float *)y, 1);
  else
    cblas_dgemv(CblasRowMajor, op, rows, cols, 1.0, (const double *)m, (int)ld,
                (const double *)x, (int)incx, 0.0, (double *)y, 1);
}

/* c[m, n] (contiguous) = a[m, k] @ b[k, n] for one matrix pair, k >= 1. The operands
 * passed fits(); a vector's increment is its stride, which fits() made >= 1. */
static void blas_one(int32_t dtype, const plan *p, const char *a, const mat *am, const char *b,
                     const mat *bm, char *c) {
  const int64_t m = p->m, k = p->k, n = p->n;
  const int64_t a_inc = k == 1 ? 1 : am->cs, b_inc = k == 1 ? 1 : bm->rs;
  if (m == 1 && n == 1) {
    if (dtype == TD_FLOAT32)
      *(float *)c = cblas_sdot((int)k, (const float *)a, (int)a_inc, (const float *)b, (int)b_inc);
    else
      *(double *)c = cblas_ddot((int)k, (const double *)a, (int)a_inc, (const double *)b,
                                (int)b_inc);
  } else if (n == 1) {
    gemv(dtype, m, k, a, am->rs, am->cs, b, b_inc, c);
  } else if (m == 1) { /* c = b^T a */
    gemv(dtype, n, k, b, bm->cs, bm->rs, a, a_inc, c);
  } else {
    bool ta, tb;
    int64_t lda, ldb;
    blas_layout(m, k, am->rs, am->cs, &ta, &lda);
    blas_layout(k, n, bm->rs, bm->cs, &tb, &ldb);
    const enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
    const enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
    if (dtype == TD_FLOAT32)
      cblas_sgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)k, 1.0f, (const float *)a,
                  (int)lda, (const float *)b, (int)ldb, 0.0f, (float *)c, (int)n);
    else
      cblas_dgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)k, 1.0, (const double *)a,
                  (int)lda, (const double *)b, (int)ldb, 0.0, (double *)c, (int)n);
  }
}

/* Folds innermost batch dims into m while B broadcasts over them and A's rows continue
 * evenly into them (A stays row-major), so one gemm covers them. */
static void fold_batches(plan *p, mat *a, const mat *b) {
  while (p->nb > 0) {
    const int32_t d = p->nb - 1;
    if (b->bs[d] != 0 || (p->m > 1 && a->bs[d] != a->rs * p->m)) return;
    const int64_t rs = p->m > 1 ? a->rs : a->bs[d];
    bool trans;
    int64_t ld, m;
    if (__builtin_mul_overflow(p->m, p->batch[d], &m) || m > INT_MAX ||
        !blas_layout(m, p->k, rs, a->cs, &trans, &ld) || trans)
      return;
    p->m = m;
    a->rs = rs;
    p->nb--;
  }
}

/* Offsets in elements of batch number idx (row-major over p's batch dims). */
static void batch_offsets(const plan *p, int64_t idx, const mat *a, const mat *b, int64_t *ao,
                          int64_t *bo) {
  *ao = *bo = 0;
  for (int32_t d = p->nb - 1; d >= 0; d--) {
    const int64_t i = idx % p->batch[d];
    idx /= p->batch[d];
    *ao += i * a->bs[d];
    *bo += i * b->bs[d];
  }
}

/* The batch loop over operands that fit cblas; out is contiguous and k >= 1. */
static void blas_batches(plan p, mat am, mat bm, td_tensor *out) {
  drop_unit_batch_dims(&p, &am, &bm);
  fold_batches(&p, &am, &bm);
  int64_t count = 1;
  for (int32_t d = 0; d < p.nb; d++) count *= p.batch[d];
  const int64_t isz = out->itemsize, csize = p.m * p.n * isz;
  char *c = td_tensor_ptr(out);
  for (int64_t i = 0; i < count; i++) {
    int64_t ao, bo;
    batch_offsets(&p, i, &am, &bm, &ao, &bo);
    blas_one(out->dtype, &p, am.data + ao * isz, &am, bm.data + bo * isz, &bm, c + i * csize);
  }
}

/* float32 / float64 through cblas, copying an operand only when its layout does not
 * fit; out is contiguous and k >= 1. */
static int32_t run_blas(const char *call, const plan *p, const td_tensor *a,
                        const td_tensor *b, td_tensor *out) {
  if (p->m > INT_MAX || p->n > INT_MAX || p->k > INT_MAX)
    return td_fail(TD_ESHAPE, "%s: a matrix dim above %d (m %lld, k %lld, n %lld) is too "
                   "large for BLAS", call, INT_MAX, (long long)p->m, (long long)p->k,
                   (long long)p->n);
  td_tensor *ac = NULL, *bc = NULL;
  mat am, bm;
  make_mat(p, a, true, &am);
  make_mat(p, b, false, &bm);
  if (!fits(p->m, p->k, &am)) {
    if (!(ac = td_tensor_contiguous(a))) return td_last_status();
    make_mat(p, ac, true, &am);
  }
  if (!fits(p->k, p->n, &bm)) {
    if (!(bc = td_tensor_contiguous(b))) {
      td_tensor_release(ac);
      return td_last_status();
    }
    make_mat(p, bc, false, &bm);
  }
  blas_batches(*p, am, bm, out);
  td_tensor_release(ac);
  td_tensor_release(bc);
  return TD_OK;
}

/* ---- integers: exact int64 ------------------------------------------------------------- */

typedef struct int_job {
  const plan *p;
  const mat *a, *b;
  uint64_t *c; /* the int64 output; unsigned so that overflow wraps */
} int_job;

enum { INT_KBLOCK = 64 };

/* Output rows [begin, end) of the flattened [batch * m, n] result: for each block of k,
 * every row of the range, so the block's rows of B stay in cache. B's rows have unit
 * stride (run_int copies it otherwise; with n == 1 only column 0 is read). */
static void int_rows(int64_t begin, int64_t end, void *ctx) {
  const int_job *j = ctx;
  const plan *p = j->p;
  const int64_t m = p->m, k = p->k, n = p->n;
  for (int64_t r = begin; r < end; r++)
    for (int64_t q = 0; q < n; q++) j->c[r * n + q] = 0;
  for (int64_t k0 = 0; k0 < k; k0 += INT_KBLOCK) {
    const int64_t k1 = k - k0 < INT_KBLOCK ? k : k0 + INT_KBLOCK;
    for (int64_t r = begin; r < end; r++) {
      int64_t ao, bo;
      batch_offsets(p, r / m, j->a, j->b, &ao, &bo);
      const int64_t *a = (const int64_t *)j->a->data + ao + (r % m) * j->a->rs;
      const int64_t *b = (const int64_t *)j->b->data + bo;
      uint64_t *c = j->c + r * n;
      for (int64_t q = k0; q < k1; q++) {
        const uint64_t x = (uint64_t)a[q * j->a->cs];
        if (x == 0) continue;
        const int64_t *brow = b + q * j->b->rs;
        for (int64_t col = 0; col < n; col++) c[col] += x * (uint64_t)brow[col];
      }
    }
  }
}

/* int64 operands; out is int64, contiguous, and k >= 1. */
static int32_t run_int(plan p, const td_tensor *a, const td_tensor *b, td_tensor *out) {
  td_tensor *bc = NULL;
  mat am, bm;
  make_mat(&p, a, true, &am);
  make_mat(&p, b, false, &bm);
  if (p.n > 1 && bm.cs != 1) { /* the inner loop walks rows of B with unit stride */
    if (!(bc = td_tensor_contiguous(b))) return td_last_status();
    make_mat(&p, bc, false, &bm);
  }
  int64_t rows = p.m;
  for (int32_t d = 0; d < p.nb; d++) rows *= p.batch[d];
  int_job j = {&p, &am, &bm, (uint64_t *)(void *)td_tensor_ptr(out)};
  const int64_t work = p.k * p.n, grain = work >= (1 << 16) ? 1 : (1 << 16) / work;
  td_parallel_for(rows, grain, int_rows, &j);
  td_tensor_release(bc);
  return TD_OK;
}

/* ---- dispatch -------------------------------------------------------------------------- */

/* The dtype the product is computed in: a floating dtype's compute family's (float32 for
 * the 16-bit floats), int64 for the others. */
#define FAMILY_DTYPE_FL TD_FLOAT32
#define FAMILY_DTYPE_DB TD_FLOAT64
#define COMPUTE_CASE(_, DN, DT, DK, CT, FAM, ...) case TD_##DN: return FAMILY_DTYPE_##FAM;
static int32_t compute_dtype(int32_t dtype) {
  switch (dtype) {
    TD_DTYPES_FLOAT(COMPUTE_CASE, _)
    default: return TD_INT64;
  }
}

/* a and b (already checked for the call's ndims and dtypes) multiplied by p's rules, in
 * compute dtype cd. */
static td_tensor *run_in(const char *call, const plan *p, const td_tensor *a,
                         const td_tensor *b, int32_t cd) {
  td_tensor *out = td_tensor_empty(p->out_ndim, p->out_shape, cd);
  if (!out) return NULL;
  int32_t status = TD_OK;
  if (td_tensor_numel(out) == 0) return out;
  if (p->k == 0) /* an empty sum */
    status = td_tensor_fill_(out, 0.0);
  else if (cd == TD_INT64)
    status = run_int(*p, a, b, out);
  else
    status = run_blas(call, p, a, b, out);
  if (status != TD_OK) {
    td_tensor_release(out);
    return NULL;
  }
  return out;
}

static td_tensor *run(const char *call, const td_tensor *a, const td_tensor *b) {
  plan p;
  if (!check_dtypes(call, a, b) || !make_plan(call, a, b, &p)) return NULL;
  const int32_t dtype = a->dtype, cd = compute_dtype(dtype);
  if (cd == dtype) return run_in(call, &p, a, b, cd);
  td_tensor *ac = td_tensor_to_dtype(a, cd), *bc = ac ? td_tensor_to_dtype(b, cd) : NULL;
  td_tensor *r = bc ? run_in(call, &p, ac, bc, cd) : NULL;
  td_tensor_release(ac);
  td_tensor_release(bc);
  if (!r) return NULL;
  td_tensor *out = td_tensor_to_dtype(r, dtype); /* rounds float32 back, wraps integers */
  td_tensor_release(r);
  return out;
}

/* ---- public ---------------------------------------------------------------------------- */

TD_EXPORT td_tensor *td_matmul(const td_tensor *a, const td_tensor *b) {
  if (!check_pair("matmul", a, b)) return NULL;
  if (a->ndim == 0 || b->ndim == 0)
    return td_fail_null(TD_ESHAPE,
                        "matmul: both arguments need at least 1 dim, but they have %d and %d",
                        (int)a->ndim, (int)b->ndim);
  return run("matmul", a, b);
}

TD_EXPORT td_tensor *td_mm(const td_tensor *a, const td_tensor *b) {
  if (!check_pair("mm", a, b) || !check_ndims("mm", a, b, 2, 2)) return NULL;
  return run("mm", a, b);
}

TD_EXPORT td_tensor *td_bmm(const td_tensor *a, const td_tensor *b) {
  if (!check_pair("bmm", a, b) || !check_ndims("bmm", a, b, 3, 3)) return NULL;
  if (a->shape[0] != b->shape[0]) {
    char sa[TD_SHAPE_STR], sb[TD_SHAPE_STR];
    return td_fail_null(TD_ESHAPE, "bmm: batch sizes differ: shapes %s and %s",
                        td_format_shape(sa, sizeof sa, a->ndim, a->shape),
                        td_format_shape(sb, sizeof sb, b->ndim, b->shape));
  }
  return run("bmm", a, b);
}

TD_EXPORT td_tensor *td_mv(const td_tensor *a, const td_tensor *v) {
  if (!check_pair("mv", a, v) || !check_ndims("mv", a, v, 2, 1)) return NULL;
  return run("mv", a, v);
}

TD_EXPORT td_tensor *td_dot(const td_tensor *a, const td_tensor *b) {
  if (!check_pair("dot", a, b) || !check_ndims("dot", a, b, 1, 1)) return NULL;
  return run("dot", a, b);
}
