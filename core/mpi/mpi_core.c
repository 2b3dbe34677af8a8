/*
 * mpi_core.c: libtensordict_mpi's state, errors and waiting (tensordict_mpi.h).
 * MPI errors are returned, not fatal: the library's communicators carry
 * MPI_ERRORS_RETURN, and every code is turned into a message with MPI_Error_string.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi_internal.h"

int64_t tdm_chunk = (int64_t)1 << 30;
int64_t tdm_int_limit = INT_MAX;
MPI_Comm tdm_comm = MPI_COMM_NULL;
MPI_Comm tdm_own_comm = MPI_COMM_NULL;

static int we_initialised; /* MPI_Init was ours, so MPI_Finalize is too */
static int ready;          /* between td_mpi_init and td_mpi_finalize */
static int finalised;
static int tag_max = 32767; /* MPI's guaranteed minimum, until MPI says more */

static _Thread_local char last_message[1024];

int32_t tdm_fail(int32_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_message, sizeof last_message, fmt, ap);
  va_end(ap);
  return status;
}

TDM_EXPORT const char *td_mpi_last_error(void) { return last_message; }
TDM_EXPORT int32_t td_mpi_abi_version(void) { return TD_MPI_ABI_VERSION; }

TDM_EXPORT const char *td_mpi_library_version(void) {
  static char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "";
  return text;
}

int32_t tdm_check(int code, const char *call) {
  if (code == MPI_SUCCESS) return TD_MPI_OK;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", code);
  return tdm_fail(TD_MPI_EMPI, "%s: %s", call, text);
}

int32_t tdm_require_init(const char *call) {
  if (ready) return TD_MPI_OK;
  return tdm_fail(TD_MPI_ESTATE, finalised ? "%s: MPI was finalized already"
                                           : "%s: MPI is not initialized (call init first)", call);
}

int32_t tdm_check_rank(const char *call, const char *what, int32_t rank) {
  int size = 0;
  MPI_Comm_size(tdm_comm, &size);
  if (rank >= 0 && rank < size) return TD_MPI_OK;
  return tdm_fail(TD_MPI_EINVAL, "%s: %s %d is out of range (ranks 0..%d)", call, what, rank, size - 1);
}

int32_t tdm_check_tag(const char *call, int32_t tag) {
  if (tag >= 0 && tag <= tag_max) return TD_MPI_OK;
  return tdm_fail(TD_MPI_EINVAL, "%s: tag %d is out of range (0..%d)", call, tag, tag_max);
}

TDM_EXPORT int32_t td_mpi_tag_max(void) { return tag_max; }

TDM_EXPORT int32_t td_mpi_init(void) {
  if (ready) return TD_MPI_OK;
  if (finalised) return tdm_fail(TD_MPI_ESTATE, "init: MPI was finalized already and cannot start again");
  int flag = 0, status;
  MPI_Initialized(&flag);
  if (!flag) {
    int provided = 0;
    status = tdm_check(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided), "init");
    if (status) return status;
    we_initialised = 1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if ((status = tdm_check(MPI_Comm_dup(MPI_COMM_WORLD, &tdm_comm), "init"))) return status;
  if ((status = tdm_check(MPI_Comm_dup(MPI_COMM_WORLD, &tdm_own_comm), "init"))) return status;
  MPI_Comm_set_errhandler(tdm_comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(tdm_own_comm, MPI_ERRORS_RETURN);
  int *ub = NULL;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS && flag && ub) tag_max = *ub;
  if ((status = tdm_ops_create())) return status;
  const char *chunk = getenv("TD_MPI_CHUNK_BYTES");
  if (chunk && atoll(chunk) >= 64 && atoll(chunk) < tdm_chunk) tdm_chunk = tdm_int_limit = atoll(chunk);
  ready = 1;
  return TD_MPI_OK;
}

TDM_EXPORT int32_t td_mpi_is_initialized(void) { return ready; }

TDM_EXPORT int32_t td_mpi_finalize(void) {
  if (!ready) return finalised ? TD_MPI_OK : tdm_require_init("finalize");
  tdm_plan_cache_clear(); /* their datatypes, and the containers the cache held */
  tdm_ops_free();
  MPI_Comm_free(&tdm_own_comm);
  MPI_Comm_free(&tdm_comm);
  ready = 0;
  finalised = 1;
  if (we_initialised) return tdm_check(MPI_Finalize(), "finalize");
  return TD_MPI_OK;
}

TDM_EXPORT int32_t td_mpi_rank(void) {
  int32_t status = tdm_require_init("rank");
  if (status) return status;
  int r = 0;
  MPI_Comm_rank(tdm_comm, &r);
  return r;
}

TDM_EXPORT int32_t td_mpi_size(void) {
  int32_t status = tdm_require_init("size");
  if (status) return status;
  int n = 0;
  MPI_Comm_size(tdm_comm, &n);
  return n;
}

TDM_EXPORT int32_t td_mpi_abort(int32_t code) {
  int32_t status = tdm_require_init("abort");
  if (status) return status;
  return tdm_check(MPI_Abort(MPI_COMM_WORLD, code), "abort");
}

/* ------------------------------------------------------------------ waiting */

double tdm_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int32_t tdm_poll(int32_t (*step)(void *arg), void *arg, double timeout, const char *call) {
  double deadline = tdm_now() + timeout;
  /* Spin first (a message in flight on the same node arrives in microseconds), then
   * sleep in growing steps up to 1 ms, so a long wait does not burn a core. */
  long pause_ns = 0;
  for (int spins = 0;; spins++) {
    int32_t status = step(arg);
    if (status < 0) return status;
    if (status > 0) return TD_MPI_OK;
    if (tdm_now() >= deadline) {
      return tdm_fail(TD_MPI_ETIMEOUT, "%s: timed out after %g s (a peer is gone or never "
                      "made the matching call)", call, timeout);
    }
    if (spins >= 2000) {
      pause_ns = pause_ns ? (pause_ns * 2 > 1000000 ? 1000000 : pause_ns * 2) : 10000;
      struct timespec ts = {0, pause_ns};
      nanosleep(&ts, NULL);
    }
  }
}

typedef struct requests {
  MPI_Request *reqs;
  int n;
  MPI_Status *statuses;
  const char *call;
} requests;

static int32_t test_all(void *arg) {
  requests *r = arg;
  int done = 0;
  int32_t status = tdm_check(MPI_Testall(r->n, r->reqs, &done, r->statuses), r->call);
  return status ? status : done;
}

int32_t tdm_wait_all_status(MPI_Request *reqs, int n, MPI_Status *statuses, double timeout, const char *call) {
  if (timeout < 0) return tdm_check(MPI_Waitall(n, reqs, statuses), call);
  requests r = {reqs, n, statuses, call};
  return tdm_poll(test_all, &r, timeout, call);
}

int32_t tdm_wait_all(MPI_Request *reqs, int n, double timeout, const char *call) {
  return tdm_wait_all_status(reqs, n, MPI_STATUSES_IGNORE, timeout, call);
}

void tdm_abandon(MPI_Request *reqs, int n) {
  for (int i = 0; i < n; i++) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    int flag = 0;
    MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
    if (flag || reqs[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&reqs[i]);
    MPI_Request_free(&reqs[i]);
  }
}

TDM_EXPORT int32_t td_mpi_barrier(double timeout) {
  int32_t status = tdm_require_init("barrier");
  if (status) return status;
  if (timeout < 0) return tdm_check(MPI_Barrier(tdm_comm), "barrier");
  MPI_Request r = MPI_REQUEST_NULL;
  if ((status = tdm_check(MPI_Ibarrier(tdm_comm, &r), "barrier"))) return status;
  /* On a timeout the barrier stays posted (MPI forbids cancelling or freeing a
   * collective's request): a late rank's barrier still matches it. */
  return tdm_wait_all(&r, 1, timeout, "barrier");
}
