/*
 * mpi_p2p.c: sends and receives of raw bytes (tensordict_mpi.h). A buffer larger than
 * tdm_chunk travels as several messages on the same tag; MPI delivers messages between
 * two ranks on one tag in the order they were posted, so the pieces arrive in place.
 */
#include <stdlib.h>

#include "mpi_internal.h"

struct td_mpi_request {
  int n;
  int done;
  MPI_Request reqs[];
};

int tdm_chunks(int64_t nbytes) {
  return nbytes <= tdm_chunk ? 1 : (int)((nbytes + tdm_chunk - 1) / tdm_chunk);
}

int32_t tdm_post_send(MPI_Comm comm, const void *buf, int64_t nbytes, int32_t dst, int32_t tag,
                      MPI_Request *reqs, const char *call) {
  int n = tdm_chunks(nbytes);
  for (int i = 0; i < n; i++) {
    int64_t at = (int64_t)i * tdm_chunk, len = nbytes - at < tdm_chunk ? nbytes - at : tdm_chunk;
    int32_t status = tdm_check(MPI_Isend((const char *)buf + at, (int)len, MPI_BYTE, dst, tag, comm, &reqs[i]), call);
    if (status) { tdm_abandon(reqs, i); return status; }
  }
  return TD_MPI_OK;
}

int32_t tdm_post_recv(MPI_Comm comm, void *buf, int64_t nbytes, int32_t src, int32_t tag,
                      MPI_Request *reqs, const char *call) {
  int n = tdm_chunks(nbytes);
  for (int i = 0; i < n; i++) {
    int64_t at = (int64_t)i * tdm_chunk, len = nbytes - at < tdm_chunk ? nbytes - at : tdm_chunk;
    int32_t status = tdm_check(MPI_Irecv((char *)buf + at, (int)len, MPI_BYTE, src, tag, comm, &reqs[i]), call);
    if (status) { tdm_abandon(reqs, i); return status; }
  }
  return TD_MPI_OK;
}

static int32_t check_p2p(const char *call, const void *buf, int64_t nbytes, const char *what,
                         int32_t peer, int32_t tag) {
  int32_t status = tdm_require_init(call);
  if (status) return status;
  if (nbytes < 0) return tdm_fail(TD_MPI_EINVAL, "%s: negative byte count %lld", call, (long long)nbytes);
  if (!buf && nbytes > 0) return tdm_fail(TD_MPI_EINVAL, "%s: NULL buffer for %lld bytes", call, (long long)nbytes);
  if ((status = tdm_check_rank(call, what, peer))) return status;
  return tdm_check_tag(call, tag);
}

static td_mpi_request *request_new(int64_t nbytes) {
  int n = tdm_chunks(nbytes);
  td_mpi_request *r = malloc(sizeof *r + (size_t)n * sizeof(MPI_Request));
  if (!r) { tdm_fail(TD_MPI_ENOMEM, "out of memory for a request"); return NULL; }
  r->n = n;
  r->done = 0;
  for (int i = 0; i < n; i++) r->reqs[i] = MPI_REQUEST_NULL;
  return r;
}

TDM_EXPORT td_mpi_request *td_mpi_isend(const void *buf, int64_t nbytes, int32_t dst, int32_t tag) {
  if (check_p2p("isend", buf, nbytes, "destination", dst, tag)) return NULL;
  td_mpi_request *r = request_new(nbytes);
  if (r && tdm_post_send(tdm_comm, buf, nbytes, dst, tag, r->reqs, "isend")) { free(r); return NULL; }
  return r;
}

TDM_EXPORT td_mpi_request *td_mpi_irecv(void *buf, int64_t nbytes, int32_t src, int32_t tag) {
  if (check_p2p("irecv", buf, nbytes, "source", src, tag)) return NULL;
  td_mpi_request *r = request_new(nbytes);
  if (r && tdm_post_recv(tdm_comm, buf, nbytes, src, tag, r->reqs, "irecv")) { free(r); return NULL; }
  return r;
}

TDM_EXPORT int32_t td_mpi_test(td_mpi_request *r) {
  if (!r) return tdm_fail(TD_MPI_EINVAL, "test: NULL request");
  if (r->done) return 1;
  int flag = 0;
  int32_t status = tdm_check(MPI_Testall(r->n, r->reqs, &flag, MPI_STATUSES_IGNORE), "test");
  if (status) return status;
  r->done = flag;
  return flag;
}

TDM_EXPORT int32_t td_mpi_wait(td_mpi_request *r, double timeout) {
  if (!r) return tdm_fail(TD_MPI_EINVAL, "wait: NULL request");
  if (r->done) return TD_MPI_OK;
  int32_t status = tdm_wait_all(r->reqs, r->n, timeout, "wait");
  if (!status) r->done = 1;
  return status;
}

TDM_EXPORT void td_mpi_request_free(td_mpi_request *r) {
  if (!r) return;
  if (!r->done && td_mpi_is_initialized()) tdm_abandon(r->reqs, r->n);
  free(r);
}

/* The blocking forms: post, then wait with the deadline; on failure nothing stays posted. */
static int32_t finish(MPI_Request *reqs, int n, double timeout, const char *call) {
  int32_t status = tdm_wait_all(reqs, n, timeout, call);
  if (status) tdm_abandon(reqs, n);
  return status;
}

TDM_EXPORT int32_t td_mpi_send(const void *buf, int64_t nbytes, int32_t dst, int32_t tag, double timeout) {
  int32_t status = check_p2p("send", buf, nbytes, "destination", dst, tag);
  if (status) return status;
  if (timeout < 0 && nbytes <= tdm_chunk) {
    return tdm_check(MPI_Send(buf, (int)nbytes, MPI_BYTE, dst, tag, tdm_comm), "send");
  }
  td_mpi_request *r = request_new(nbytes);
  if (!r) return TD_MPI_ENOMEM;
  status = tdm_post_send(tdm_comm, buf, nbytes, dst, tag, r->reqs, "send");
  if (!status) status = finish(r->reqs, r->n, timeout, "send");
  free(r);
  return status;
}

TDM_EXPORT int32_t td_mpi_recv(void *buf, int64_t nbytes, int32_t src, int32_t tag, double timeout) {
  int32_t status = check_p2p("recv", buf, nbytes, "source", src, tag);
  if (status) return status;
  if (timeout < 0 && nbytes <= tdm_chunk) {
    return tdm_check(MPI_Recv(buf, (int)nbytes, MPI_BYTE, src, tag, tdm_comm, MPI_STATUS_IGNORE), "recv");
  }
  td_mpi_request *r = request_new(nbytes);
  if (!r) return TD_MPI_ENOMEM;
  status = tdm_post_recv(tdm_comm, buf, nbytes, src, tag, r->reqs, "recv");
  if (!status) status = finish(r->reqs, r->n, timeout, "recv");
  free(r);
  return status;
}
