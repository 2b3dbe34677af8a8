/*
 * dict_jobs.c: the writes of a multi-leaf operation (index assignment, update_),
 * collected and checked first, then run. Checking every leaf before writing any means
 * a refused write leaves the container as it was; running the copies on the pool one
 * leaf per thread beats splitting each leaf, since a container's leaves are often
 * smaller than the size at which waking threads for one copy pays off.
 */
#include <stdlib.h>
#include <string.h>

#include "dict_internal.h"
#include "../src/parallel.h"

/* Leaves together worth at least this many bytes go to the pool. */
enum { JOBS_PARALLEL_BYTES = 1 << 20 };

void td_jobs_free(td_jobs *j) {
  free(j->v);
  memset(j, 0, sizeof *j);
}

static int64_t nbytes(const td_tensor *t) { return td_tensor_numel(t) * t->itemsize; }

int32_t td_jobs_add(td_jobs *j, const char *call, const td_tensor *dst, const td_tensor *src,
                    td_job_fn fn, const void *ctx) {
  /* Messages leave out the call: the caller prefixes "<call>: key '<path>': ". */
  if (!td_check_writable("write", dst)) return td_last_status();
  if (src && !fn) { /* a plain copy: src must broadcast to exactly dst's shape */
    int32_t ndim;
    int64_t shape[TD_MAX_DIMS];
    bool same = td_broadcast_shapes(call, dst->ndim, dst->shape, src->ndim, src->shape, &ndim,
                                    shape) &&
                ndim == dst->ndim;
    for (int32_t i = 0; same && i < ndim; i++) same = shape[i] == dst->shape[i];
    if (!same) {
      char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
      return td_fail(TD_ESHAPE, "a value of shape %s does not broadcast to shape %s",
                     td_format_shape(a, sizeof a, src->ndim, src->shape),
                     td_format_shape(b, sizeof b, dst->ndim, dst->shape));
    }
  }
  if (j->n == j->cap) {
    int32_t cap = j->cap ? 2 * j->cap : 16;
    td_job *v = realloc(j->v, sizeof *v * (size_t)cap);
    if (!v) return td_fail(TD_ENOMEM, "%s: out of memory", call);
    j->v = v;
    j->cap = cap;
  }
  td_job *job = &j->v[j->n++];
  td_header_copy(&job->dst, dst);
  job->src = src;
  job->fn = fn;
  job->ctx = ctx;
  int64_t b = nbytes(dst);
  j->bytes += b;
  if (b > j->largest) j->largest = b;
  return 0;
}

/* Same dtype, same shape, both dense and apart: the bytes move as they are (most
 * leaves of a batch; copy_'s general path costs more than a small leaf's bytes). */
static bool plain_bytes(const td_tensor *dst, const td_tensor *src) {
  if (dst->dtype != src->dtype || dst->ndim != src->ndim) return false;
  for (int32_t d = 0; d < dst->ndim; d++)
    if (dst->shape[d] != src->shape[d]) return false;
  return td_tensor_is_contiguous(dst) && td_tensor_is_contiguous(src) &&
         dst->storage->device_type == TD_DEVICE_CPU &&
         src->storage->device_type == TD_DEVICE_CPU && !td_tensors_overlap(dst, src);
}

static int32_t run_one(td_jobs *j, int64_t i) {
  td_job *job = &j->v[i];
  if (job->fn) return job->fn(job->ctx, &job->dst, job->src);
  if (job->src && plain_bytes(&job->dst, job->src)) {
    memcpy(td_tensor_ptr(&job->dst), td_tensor_ptr(job->src),
           (size_t)(td_tensor_numel(&job->dst) * job->dst.itemsize));
    return 0;
  }
  return job->src ? td_tensor_copy_(&job->dst, job->src) : td_tensor_fill_(&job->dst, j->value);
}

static void run_range(int64_t begin, int64_t end, void *ctx) {
  td_jobs *j = ctx;
  for (int64_t i = begin; i < end; i++) {
    int32_t st = run_one(j, i);
    if (st) { /* the first failing job in order keeps its status */
      int64_t expected = j->failed_at;
      while ((expected < 0 || i < expected) &&
             !__atomic_compare_exchange_n(&j->failed_at, &expected, i, false, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE)) {
      }
    }
  }
}

/* True when no job writes bytes another job reads or writes: only then may they run at
 * once (leaves can share storage: two keys for one tensor, views of each other). */
static bool independent(const td_jobs *j) {
  for (int32_t a = 0; a < j->n; a++)
    for (int32_t b = 0; b < j->n; b++) {
      if (a == b) continue;
      if (td_tensors_overlap(&j->v[a].dst, &j->v[b].dst)) return false;
      if (j->v[b].src && td_tensors_overlap(&j->v[a].dst, j->v[b].src)) return false;
    }
  return true;
}

int32_t td_jobs_run(td_jobs *j, const char *call) {
  j->failed_at = -1;
  /* One leaf per thread when there is enough to share and no leaf dominates (a single
   * big leaf is better split by its own copy). Jobs with a function (masks, index
   * tensors) call kernels that use the pool themselves: those run in order here. */
  bool plain = true;
  for (int32_t i = 0; i < j->n && plain; i++) plain = j->v[i].fn == NULL;
  if (plain && j->n > 1 && j->bytes >= JOBS_PARALLEL_BYTES && 2 * j->largest <= j->bytes &&
      independent(j)) {
    td_parallel_for(j->n, 1, run_range, j);
    if (j->failed_at >= 0) {
      /* Unexpected after the checks (a kernel refusal): redo the failing one here so
       * its message is this thread's. */
      int32_t st = run_one(j, j->failed_at);
      return st ? st : td_fail(TD_EINVAL, "%s: a write failed", call);
    }
    return 0;
  }
  for (int32_t i = 0; i < j->n; i++) {
    int32_t st = run_one(j, i);
    if (st) return st;
  }
  return 0;
}
