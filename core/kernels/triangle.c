/*
 * triangle.c: td_tensor_triangle, torch.tril and torch.triu in one pass: each row of the
 * last two dims (of a contiguous copy when the input is not contiguous) is a run of kept
 * elements, copied, and a run of zeros (all-zero bytes are zero in every dtype). Rows
 * are split between the pool's threads; no row depends on another.
 */
#include <string.h>

#include "../src/internal.h"
#include "../src/parallel.h"

typedef struct triangle_job {
  const char *src;
  char *out;
  int64_t rows, cols, itemsize, k; /* rows: of one matrix (the second-to-last dim) */
  bool lower;
} triangle_job;

static int64_t clamp(int64_t v, int64_t hi) { return v < 0 ? 0 : v > hi ? hi : v; }

static void triangle_rows(int64_t begin, int64_t end, void *arg) {
  const triangle_job *j = arg;
  const int64_t bytes = j->cols * j->itemsize;
  for (int64_t r = begin; r < end; r++) {
    const int64_t i = r % j->rows; /* the row within its matrix */
    const char *in = j->src + r * bytes;
    char *out = j->out + r * bytes;
    if (j->lower) { /* columns 0 .. i + k kept */
      const int64_t keep = clamp(i + j->k + 1, j->cols) * j->itemsize;
      memcpy(out, in, (size_t)keep);
      memset(out + keep, 0, (size_t)(bytes - keep));
    } else { /* columns i + k .. cols - 1 kept */
      const int64_t zero = clamp(i + j->k, j->cols) * j->itemsize;
      memset(out, 0, (size_t)zero);
      memcpy(out + zero, in + zero, (size_t)(bytes - zero));
    }
  }
}

TD_EXPORT td_tensor *td_tensor_triangle(const td_tensor *t, int64_t k, int32_t lower) {
  const char *call = lower ? "tril" : "triu";
  if (!t) return td_fail_null(TD_EINVAL, "%s: NULL tensor", call);
  if (!td_check_cpu(call, t, "tensor")) return NULL;
  if (t->ndim < 2)
    return td_fail_null(TD_ESHAPE, "%s: expected a tensor of 2 or more dims, got %d", call, (int)t->ndim);
  td_tensor *src = td_tensor_contiguous(t);
  td_tensor *out = src ? td_tensor_empty(t->ndim, t->shape, t->dtype) : NULL;
  if (out) {
    const int64_t rows = t->shape[t->ndim - 2], cols = t->shape[t->ndim - 1];
    const int64_t numel = td_tensor_numel(t);
    if (numel > 0) {
      triangle_job job = {td_tensor_ptr(src), td_tensor_ptr(out), rows, cols, t->itemsize, k, lower != 0};
      const int64_t grain = TD_GRAIN / cols > 0 ? TD_GRAIN / cols : 1;
      td_parallel_for(numel / cols, grain, triangle_rows, &job);
    }
  }
  td_tensor_release(src);
  return out;
}
