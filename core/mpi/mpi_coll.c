/*
 * mpi_coll.c: the collectives of tensordict_mpi.h. With a timeout each posts MPI's
 * non-blocking form and polls it (tdm_wait_all). Buffers past MPI's int counts go in
 * pieces: bcast and allreduce piece by piece; gatherv and allgatherv, whose byte
 * displacements are ints too, fall back to point-to-point pieces on the library's own
 * communicator when the total passes INT_MAX.
 */
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"
#include "tensordict.h"

/* One collective on its non-blocking request, or the blocking call when timeout < 0.
 * A timed-out collective stays posted (MPI allows neither cancelling nor freeing it). */
static int32_t complete(int code, MPI_Request *r, double timeout, const char *call) {
  int32_t status = tdm_check(code, call);
  if (status || timeout < 0) return status;
  return tdm_wait_all(r, 1, timeout, call);
}

static int32_t check_root(const char *call, int32_t root) {
  int32_t status = tdm_require_init(call);
  return status ? status : tdm_check_rank(call, "root", root);
}

TDM_EXPORT int32_t td_mpi_bcast(void *buf, int64_t nbytes, int32_t root, double timeout) {
  int32_t status = check_root("bcast", root);
  if (status) return status;
  if (nbytes < 0 || (!buf && nbytes > 0)) return tdm_fail(TD_MPI_EINVAL, "bcast: bad buffer of %lld bytes", (long long)nbytes);
  for (int64_t at = 0; at < nbytes && !status; at += tdm_chunk) {
    int len = (int)(nbytes - at < tdm_chunk ? nbytes - at : tdm_chunk);
    MPI_Request r = MPI_REQUEST_NULL;
    char *p = (char *)buf + at;
    status = complete(timeout < 0 ? MPI_Bcast(p, len, MPI_BYTE, root, tdm_comm)
                                  : MPI_Ibcast(p, len, MPI_BYTE, root, tdm_comm, &r), &r, timeout, "bcast");
  }
  return status;
}

TDM_EXPORT int32_t td_mpi_allreduce(void *buf, int64_t count, int32_t dtype, int32_t op, double timeout) {
  int32_t status = tdm_require_init("allreduce");
  if (status) return status;
  MPI_Datatype type;
  MPI_Op mop;
  if ((status = tdm_reduction(dtype, op, &type, &mop, "allreduce"))) return status;
  if (count < 0 || (!buf && count > 0)) return tdm_fail(TD_MPI_EINVAL, "allreduce: bad buffer of %lld elements", (long long)count);
  int64_t itemsize = td_dtype_itemsize(dtype), piece = tdm_chunk / itemsize;
  for (int64_t at = 0; at < count && !status; at += piece) {
    int len = (int)(count - at < piece ? count - at : piece);
    MPI_Request r = MPI_REQUEST_NULL;
    char *p = (char *)buf + at * itemsize;
    status = complete(timeout < 0 ? MPI_Allreduce(MPI_IN_PLACE, p, len, type, mop, tdm_comm)
                                  : MPI_Iallreduce(MPI_IN_PLACE, p, len, type, mop, tdm_comm, &r),
                      &r, timeout, "allreduce");
  }
  return status;
}

TDM_EXPORT int32_t td_mpi_allgather_int64(int64_t value, int64_t *out, double timeout) {
  int32_t status = tdm_require_init("allgather");
  if (status) return status;
  if (!out) return tdm_fail(TD_MPI_EINVAL, "allgather: NULL output");
  MPI_Request r = MPI_REQUEST_NULL;
  return complete(timeout < 0 ? MPI_Allgather(&value, 1, MPI_INT64_T, out, 1, MPI_INT64_T, tdm_comm)
                              : MPI_Iallgather(&value, 1, MPI_INT64_T, out, 1, MPI_INT64_T, tdm_comm, &r),
                  &r, timeout, "allgather");
}

TDM_EXPORT int32_t td_mpi_gather_int64(int64_t value, int64_t *out, int32_t root, double timeout) {
  int32_t status = check_root("gather", root);
  if (status) return status;
  if (!out && td_mpi_rank() == root) return tdm_fail(TD_MPI_EINVAL, "gather: NULL output at the root");
  MPI_Request r = MPI_REQUEST_NULL;
  return complete(timeout < 0 ? MPI_Gather(&value, 1, MPI_INT64_T, out, 1, MPI_INT64_T, root, tdm_comm)
                              : MPI_Igather(&value, 1, MPI_INT64_T, out, 1, MPI_INT64_T, root, tdm_comm, &r),
                  &r, timeout, "gather");
}

/* int counts and displacements of a variable gather; 0 when the total passes INT_MAX. */
static int int_layout(const int64_t *counts, int n, int *icounts, int *displs) {
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    icounts[i] = (int)counts[i];
    displs[i] = (int)total;
    total += counts[i];
    if (total > tdm_int_limit) return 0;
  }
  return 1;
}

/* The large-gather fallback: every rank sends its bytes to root in pieces. */
static int32_t gather_p2p(const void *buf, int64_t nbytes, void *out, const int64_t *counts,
                          int32_t root, double timeout, const char *call) {
  int rank = td_mpi_rank(), size = td_mpi_size(), nreq = 0, cap = 0;
  if (rank != root) cap = tdm_chunks(nbytes);
  else for (int i = 0; i < size; i++) cap += i == root ? 0 : tdm_chunks(counts[i]);
  MPI_Request *reqs = calloc((size_t)(cap ? cap : 1), sizeof *reqs);
  if (!reqs) return tdm_fail(TD_MPI_ENOMEM, "%s: out of memory", call);
  int32_t status = TD_MPI_OK;
  if (rank != root) {
    status = tdm_post_send(tdm_own_comm, buf, nbytes, root, 1, reqs, call);
    nreq = cap;
  } else {
    int64_t at = 0;
    for (int i = 0; i < size && !status; i++) {
      if (i == root) memcpy((char *)out + at, buf, (size_t)nbytes);
      else {
        status = tdm_post_recv(tdm_own_comm, (char *)out + at, counts[i], i, 1, reqs + nreq, call);
        if (!status) nreq += tdm_chunks(counts[i]);
      }
      at += counts[i];
    }
  }
  if (!status) status = tdm_wait_all(reqs, nreq, timeout, call);
  if (status) tdm_abandon(reqs, nreq);
  free(reqs);
  return status;
}

static int32_t check_gatherv(const char *call, const void *buf, int64_t nbytes, const int64_t *counts) {
  if (!counts) return tdm_fail(TD_MPI_EINVAL, "%s: NULL counts", call);
  if (nbytes < 0 || (!buf && nbytes > 0)) return tdm_fail(TD_MPI_EINVAL, "%s: bad buffer of %lld bytes", call, (long long)nbytes);
  if (counts[td_mpi_rank()] != nbytes) {
    return tdm_fail(TD_MPI_EINVAL, "%s: this rank sends %lld bytes but counts says %lld", call,
                    (long long)nbytes, (long long)counts[td_mpi_rank()]);
  }
  return TD_MPI_OK;
}

/* gatherv (root >= 0) and allgatherv (root < 0): MPI's own call when the layout fits
 * int displacements, else point-to-point pieces to root (then a bcast, for all). */
static int32_t gather_bytes(const char *call, const void *buf, int64_t nbytes, void *out,
                            const int64_t *counts, int32_t root, double timeout) {
  int32_t status = root >= 0 ? check_root(call, root) : tdm_require_init(call);
  if (!status) status = check_gatherv(call, buf, nbytes, counts);
  if (status) return status;
  int size = td_mpi_size();
  int *icounts = malloc(2 * (size_t)size * sizeof(int));
  if (!icounts) return tdm_fail(TD_MPI_ENOMEM, "%s: out of memory", call);
  int *displs = icounts + size;
  if (int_layout(counts, size, icounts, displs)) {
    MPI_Request r = MPI_REQUEST_NULL;
    int n = (int)nbytes, code;
    if (root >= 0) {
      code = timeout < 0 ? MPI_Gatherv(buf, n, MPI_BYTE, out, icounts, displs, MPI_BYTE, root, tdm_comm)
                         : MPI_Igatherv(buf, n, MPI_BYTE, out, icounts, displs, MPI_BYTE, root, tdm_comm, &r);
    } else {
      code = timeout < 0 ? MPI_Allgatherv(buf, n, MPI_BYTE, out, icounts, displs, MPI_BYTE, tdm_comm)
                         : MPI_Iallgatherv(buf, n, MPI_BYTE, out, icounts, displs, MPI_BYTE, tdm_comm, &r);
    }
    status = complete(code, &r, timeout, call);
  } else {
    status = gather_p2p(buf, nbytes, out, counts, root >= 0 ? root : 0, timeout, call);
    if (!status && root < 0) {
      int64_t total = 0;
      for (int i = 0; i < size; i++) total += counts[i];
      status = td_mpi_bcast(out, total, 0, timeout);
    }
  }
  free(icounts);
  return status;
}

TDM_EXPORT int32_t td_mpi_gatherv(const void *buf, int64_t nbytes, void *out, const int64_t *counts,
                                  int32_t root, double timeout) {
  if (root < 0) return tdm_fail(TD_MPI_EINVAL, "gatherv: root %d is out of range", root);
  return gather_bytes("gatherv", buf, nbytes, out, counts, root, timeout);
}

TDM_EXPORT int32_t td_mpi_allgatherv(const void *buf, int64_t nbytes, void *out, const int64_t *counts,
                                     double timeout) {
  return gather_bytes("allgatherv", buf, nbytes, out, counts, -1, timeout);
}
