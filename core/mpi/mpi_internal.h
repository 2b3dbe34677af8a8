/* mpi_internal.h: what the files of libtensordict_mpi share (not installed). */
#ifndef TD_MPI_INTERNAL_H
#define TD_MPI_INTERNAL_H

#include <mpi.h>
#include <stdint.h>

#include "tensordict_mpi.h"

#define TDM_EXPORT __attribute__((visibility("default")))

/* The largest piece one MPI call moves: counts are int, so bigger buffers travel as
 * several messages (or collective calls) of at most tdm_chunk bytes (1 GiB), and a
 * variable gather whose layout passes tdm_int_limit bytes (INT_MAX) goes point to
 * point. TD_MPI_CHUNK_BYTES (>= 64, read at init) lowers both, so the tests take these
 * paths with small buffers. */
extern int64_t tdm_chunk;
extern int64_t tdm_int_limit;

/* The communicators: user traffic, and the library's own (the point-to-point fallback
 * of large gathers) so that neither can match the other's messages. */
extern MPI_Comm tdm_comm;
extern MPI_Comm tdm_own_comm;

int32_t tdm_fail(int32_t status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An MPI return code: 0 when MPI_SUCCESS, else TD_MPI_EMPI with "call: MPI's text". */
int32_t tdm_check(int code, const char *call);
/* TD_MPI_ESTATE with a message unless init ran and finalize did not. */
int32_t tdm_require_init(const char *call);
int32_t tdm_check_rank(const char *call, const char *what, int32_t rank);
int32_t tdm_check_tag(const char *call, int32_t tag);

double tdm_now(void); /* monotonic seconds */
/* Calls step until it returns 1 (then 0) or < 0 (that status), or the deadline passes
 * (TD_MPI_ETIMEOUT): spinning at first, then sleeping in growing steps up to 1 ms. */
int32_t tdm_poll(int32_t (*step)(void *arg), void *arg, double timeout, const char *call);
/* Completes n requests: MPI_Waitall when timeout < 0, else polls MPI_Testall until the
 * deadline (TD_MPI_ETIMEOUT, requests left pending). */
int32_t tdm_wait_all(MPI_Request *reqs, int n, double timeout, const char *call);
/* The same, filling statuses (n of them) when they complete: what a receive checks. */
int32_t tdm_wait_all_status(MPI_Request *reqs, int n, MPI_Status *statuses, double timeout, const char *call);
/* Cancels and frees pending point-to-point requests (after a timeout or error of a
 * blocking call). Never for a collective's: MPI forbids cancelling or freeing those, so
 * a collective that timed out stays posted and the ranks are out of step (docs/dist.md). */
void tdm_abandon(MPI_Request *reqs, int n);

/* The number of TDM_CHUNK pieces of nbytes (at least 1, so a 0-byte message travels). */
int tdm_chunks(int64_t nbytes);
/* Posts the pieces of one message; reqs has tdm_chunks(nbytes) slots. */
int32_t tdm_post_send(MPI_Comm comm, const void *buf, int64_t nbytes, int32_t dst, int32_t tag,
                      MPI_Request *reqs, const char *call);
int32_t tdm_post_recv(MPI_Comm comm, void *buf, int64_t nbytes, int32_t src, int32_t tag,
                      MPI_Request *reqs, const char *call);

/* The 16-bit float ops (made at init, freed at finalize). */
int32_t tdm_ops_create(void);
void tdm_ops_free(void);
/* The MPI datatype and op of a core dtype and a td_mpi_op (mpi_ops.c). */
int32_t tdm_reduction(int32_t dtype, int32_t op, MPI_Datatype *type, MPI_Op *mop, const char *call);

/* ---- transfer plans (mpi_plan.c) ---- */
#include <stdbool.h>

struct td_dict;
struct td_storage;

/* A leaf's bytes, its storage held (a reference) while messages use them. */
typedef struct tdm_span {
  struct td_storage *storage;
  char *data;
  int64_t nbytes;
} tdm_span;

/* One data message: count of type at buf (MPI_BYTE at the span's start, or a committed
 * hindexed datatype at MPI_BOTTOM, owned by the plan). */
typedef struct tdm_msg {
  void *buf;
  int count;
  MPI_Datatype type;
} tdm_msg;

typedef struct tdm_nested {
  struct td_dict *dict;
  double version;
} tdm_nested;

/* What sending a container, or receiving into it, needs besides the bytes. */
typedef struct tdm_plan {
  int refs;
  struct td_storage *meta; /* the packed structure (with TDM_PLAN_STRUCTURE) */
  int64_t meta_bytes;
  tdm_span *spans;         /* the leaves in ship order */
  int64_t nspans, data_bytes;
  tdm_msg *msgs;           /* the data messages over the spans */
  int nmsgs;
  bool contiguous;         /* every leaf's own memory (no copy) */
  bool writable;           /* every leaf may be written */
  bool values;             /* a stack of non-tensor values among the leaves */
  /* a cached plan: its container (held), and the versions that keep it valid */
  struct td_dict *dict;
  double version;
  tdm_nested *nested;
  int32_t nnested;
  tdm_span spans_inline[32];
  tdm_msg msgs_inline[1];
} tdm_plan;

enum {
  TDM_PLAN_STRUCTURE = 1,     /* pack the structure too */
  TDM_PLAN_COPY_STRIDED = 2,  /* a strided leaf travels from a contiguous copy (sending) */
  TDM_PLAN_CACHED = 4         /* from, or into, the cache of small containers' plans */
};
/* d's plan (a reference: tdm_plan_release), or NULL with the error set under call. */
tdm_plan *tdm_plan_get(struct td_dict *d, int flags, const char *call);
void tdm_plan_release(tdm_plan *p);
/* Drops every cached plan (finalize). */
void tdm_plan_cache_clear(void);
/* A failed core call inside ours: its message under call's name. */
int32_t tdm_core_fail(const char *call);

#endif
