/*
 * mpi_dict.c: a TensorDict from one rank to another (td_mpi_isend_dict,
 * td_mpi_irecv_dict; docs/dist.md). A container travels as
 *   1. its structure (td_ship_pack_meta): keys, batch size, dim names, non-tensor
 *      values, every leaf's dtype, shape and byte offset in the data. The receiver
 *      learns its size by probing (MPI_Improbe, then MPI_Imrecv of that message);
 *   2. its leaves' bytes, concatenated in ship order and cut at multiples of
 *      tdm_chunk, each piece one message whose MPI datatype (hindexed bytes) lists the
 *      spans of the leaves' own memory it covers. The sender reads straight from its
 *      leaves; the receiver writes straight into its targets: like's leaves when like
 *      has the message's structure (its packed structure is byte-equal), else one new
 *      storage that the received container's leaves view. Each side builds its own
 *      datatypes over its own addresses; both cut at the same byte positions, so
 *      message i carries the same bytes.
 * The structure, the spans and the datatypes of a container are its plan
 * (mpi_plan.c), kept between transfers for small containers.
 * Why (tests/bench/bench_dist.lua; a C ping-pong of 25 leaves on one node): one
 * hindexed message is faster than a message per leaf at every size (4 KiB leaves: 22
 * vs 77 us; 4 MiB: 28 vs 48 ms) and than packing into one buffer (a copy per byte on
 * each side), and it is as fast as a raw send of one contiguous buffer or faster.
 * MPI keeps the order of messages from one rank on one tag, so a receive must post its
 * data receives before the next receive from that (source, tag) probes: the next one
 * would match this one's data as its structure. tensordict.dist queues receives
 * (td_mpi_transfer_stage tells when a receive's data is posted).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tensordict.h"
#include "mpi_internal.h"

enum { SEND = 0, RECV = 1, BCAST = 2 }; /* BCAST: peer is the root */

struct td_mpi_transfer {
  int kind;
  int32_t stage; /* enum td_mpi_stage */
  int32_t peer, tag;
  const char *call;
  td_storage *meta;  /* receive: the structure received */
  int64_t meta_bytes;
  td_dict *like;     /* receive: fill this one in place (retained) */
  td_dict *result;   /* receive: the received container, unless it went into like */
  tdm_plan *plan;    /* the leaves the data messages use (and a send's structure) */
  MPI_Request *reqs; /* the messages of the current stage */
  MPI_Status *statuses; /* theirs, once complete (an error in one of them is named) */
  int nreqs;
  int matching;      /* receive: the structure is in, its data messages are being matched */
  MPI_Request reqs_inline[4]; /* most transfers: no array to allocate */
  MPI_Status statuses_inline[4];
};

static int32_t check_peer(const char *call, const char *what, int32_t peer, int32_t tag) {
  int32_t status = tdm_require_init(call);
  if (!status) status = tdm_check_rank(call, what, peer);
  if (!status) status = tdm_check_tag(call, tag);
  return status;
}

static td_mpi_transfer *transfer_new(int kind, int32_t peer, int32_t tag, const char *call) {
  td_mpi_transfer *x = calloc(1, sizeof *x);
  if (!x) { tdm_fail(TD_MPI_ENOMEM, "%s: out of memory", call); return NULL; }
  x->kind = kind;
  x->peer = peer;
  x->tag = tag;
  x->call = call;
  return x;
}

/* Room for n requests of the next stage, and their statuses (the previous stage's are
 * complete). */
static void free_reqs(td_mpi_transfer *x) {
  if (x->reqs != x->reqs_inline) free(x->reqs);
  if (x->statuses != x->statuses_inline) free(x->statuses);
  x->reqs = NULL;
  x->statuses = NULL;
}

static int32_t reserve_reqs(td_mpi_transfer *x, int n) {
  free_reqs(x);
  x->nreqs = 0;
  x->reqs = n <= 4 ? x->reqs_inline : malloc(sizeof *x->reqs * (size_t)n);
  x->statuses = n <= 4 ? x->statuses_inline : malloc(sizeof *x->statuses * (size_t)n);
  if (!x->reqs || !x->statuses)
    return tdm_fail(TD_MPI_ENOMEM, "%s: out of memory for %d requests", x->call, n);
  /* MPI sets a status's error only when a completion call returns MPI_ERR_IN_STATUS:
   * cleared here, a message that failed can be told from the others (data_failed). */
  for (int i = 0; i < n; i++) x->statuses[i].MPI_ERROR = MPI_SUCCESS;
  return TD_MPI_OK;
}

/* One message of the transfer's kind. */
static int32_t post(td_mpi_transfer *x, void *buf, int count, MPI_Datatype type, MPI_Request *r) {
  int code = x->kind == SEND   ? MPI_Isend(buf, count, type, x->peer, x->tag, tdm_comm, r)
             : x->kind == RECV ? MPI_Irecv(buf, count, type, x->peer, x->tag, tdm_comm, r)
                               : MPI_Ibcast(buf, count, type, x->peer, tdm_comm, r);
  return tdm_check(code, x->call);
}

/* Posts the plan's data messages after the nreqs already posted (reqs has room). */
static int32_t post_data(td_mpi_transfer *x) {
  for (int m = 0; m < x->plan->nmsgs; m++) {
    const tdm_msg *msg = &x->plan->msgs[m];
    int32_t status = post(x, msg->buf, msg->count, msg->type, &x->reqs[x->nreqs]);
    if (status) return status;
    x->nreqs++;
  }
  return TD_MPI_OK;
}

/* ------------------------------------------------------------------ sending */

TDM_EXPORT td_mpi_transfer *td_mpi_isend_dict(const td_dict *d, int32_t dst, int32_t tag) {
  if (check_peer("isend", "destination", dst, tag)) return NULL;
  if (!d) { tdm_fail(TD_MPI_EINVAL, "isend: container is NULL"); return NULL; }
  td_mpi_transfer *x = transfer_new(SEND, dst, tag, "isend");
  if (!x) return NULL;
  /* The cache keeps a reference on d; sending never changes it. */
  x->plan = tdm_plan_get((td_dict *)d, TDM_PLAN_STRUCTURE | TDM_PLAN_COPY_STRIDED | TDM_PLAN_CACHED, "isend");
  int32_t status = x->plan ? reserve_reqs(x, 1 + x->plan->nmsgs) : TD_MPI_EINVAL;
  if (!status) {
    status = tdm_check(MPI_Isend(td_storage_data_borrow(x->plan->meta), (int)x->plan->meta_bytes, MPI_BYTE,
                                 dst, tag, tdm_comm, &x->reqs[0]), "isend");
    if (!status) x->nreqs = 1;
  }
  if (!status) status = post_data(x);
  if (status) {
    td_mpi_transfer_free(x);
    return NULL;
  }
  x->stage = TD_MPI_STAGE_DATA;
  return x;
}

/* ---------------------------------------------------------------- receiving */

TDM_EXPORT td_mpi_transfer *td_mpi_irecv_dict(int32_t src, int32_t tag, td_dict *like) {
  if (check_peer("irecv", "source", src, tag)) return NULL;
  td_mpi_transfer *x = transfer_new(RECV, src, tag, "irecv");
  if (!x) return NULL;
  if (like) td_dict_retain(like);
  x->like = like;
  x->stage = TD_MPI_STAGE_UNMATCHED;
  return x;
}

/* The structure is matched: receive it. */
static int32_t take_structure(td_mpi_transfer *x, MPI_Message *msg, MPI_Status *st) {
  int count = 0;
  MPI_Get_count(st, MPI_BYTE, &count);
  int32_t status = reserve_reqs(x, 1);
  if (status) return status;
  x->meta = td_storage_new_heap(count > 0 ? count : 1);
  x->meta_bytes = count;
  if (!x->meta) return tdm_core_fail(x->call);
  status = tdm_check(MPI_Imrecv(td_storage_data_borrow(x->meta), count, MPI_BYTE, msg, &x->reqs[0]), x->call);
  if (status) return status;
  x->nreqs = 1;
  x->stage = TD_MPI_STAGE_STRUCTURE;
  return TD_MPI_OK;
}

/* like has the message's structure when its own packs to the same bytes (keys, batch,
 * names, values, dtypes, shapes, hence offsets), holds no stack of values (whose
 * positions would be overwritten in place) and every leaf can be written in place.
 * Then x->plan is like's. */
static bool like_takes_it(td_mpi_transfer *x) {
  tdm_plan *p = tdm_plan_get(x->like, TDM_PLAN_STRUCTURE | TDM_PLAN_CACHED, x->call);
  if (p && p->meta_bytes == x->meta_bytes && p->contiguous && p->writable && !p->values &&
      memcmp(td_storage_data_borrow(p->meta), td_storage_data_borrow(x->meta), (size_t)x->meta_bytes) == 0) {
    x->plan = p;
    return true;
  }
  tdm_plan_release(p); /* a failure here only means like is not filled directly */
  return false;
}

/* The structure arrived: where its leaves go (x->plan): like's leaves, or those of a
 * new container (x->result) viewing one new storage. */
static int32_t choose_targets(td_mpi_transfer *x) {
  int64_t data = td_ship_data_bytes(x->meta);
  if (data < 0) return tdm_core_fail(x->call);
  if (x->like && like_takes_it(x)) return TD_MPI_OK;
  td_storage *s = td_storage_new_heap(data > 0 ? data : 1);
  if (!s) return tdm_core_fail(x->call);
  x->result = td_ship_unpack_meta(x->meta, s);
  td_storage_release(s); /* the result's leaves hold it */
  if (!x->result) return tdm_core_fail(x->call);
  x->plan = tdm_plan_get(x->result, 0, x->call);
  return x->plan ? TD_MPI_OK : TD_MPI_EINVAL;
}

/* The bytes data message m carries: its share of the leaves' bytes, which the plan cuts
 * every tdm_chunk bytes (mpi_plan.c). */
static int64_t message_bytes(const tdm_plan *p, int m) {
  const int64_t at = (int64_t)m * tdm_chunk;
  return p->data_bytes - at < tdm_chunk ? p->data_bytes - at : tdm_chunk;
}

/* Data message m, matched, does not carry what the structure declares (a peer of
 * another version, or a broken one): it is taken off the wire into a buffer of its own
 * size, never into the targets, and the transfer fails naming both counts. */
static int32_t refuse_message(td_mpi_transfer *x, int m, MPI_Message *msg, MPI_Count got, int64_t want) {
  void *scratch = malloc(got > 0 ? (size_t)got : 1);
  if (scratch) MPI_Mrecv(scratch, (int)got, MPI_BYTE, msg, MPI_STATUS_IGNORE);
  free(scratch);
  return tdm_fail(TD_MPI_EINVAL,
                  "%s: data message %d of %d from rank %d (tag %d) carried %lld bytes where the structure "
                  "declares %lld (a peer of another version, or a broken one)",
                  x->call, m + 1, x->plan->nmsgs, (int)x->peer, (int)x->tag, (long long)got, (long long)want);
}

/* Matches the structure's data messages in order, each probed before its receive is
 * posted so that its size is checked first (issue 28): MPI completes a receive with
 * fewer bytes than it has room for, which would leave bytes nobody sent in the
 * container, and OpenMPI 4's single-copy path writes a message longer than the posted
 * receive past its end (while reporting the truncation). block: wait for each (no
 * timeout). 1 when every message is matched and its receive posted (stage DATA), 0
 * when the next one has not arrived yet. */
static int32_t match_data(td_mpi_transfer *x, bool block) {
  while (x->nreqs < x->plan->nmsgs) {
    const int m = x->nreqs;
    int flag = 1;
    MPI_Message msg;
    MPI_Status st;
    int32_t status = block ? tdm_check(MPI_Mprobe(x->peer, x->tag, tdm_comm, &msg, &st), x->call)
                           : tdm_check(MPI_Improbe(x->peer, x->tag, tdm_comm, &flag, &msg, &st), x->call);
    if (status || !flag) return status;
    MPI_Count got = 0;
    if ((status = tdm_check(MPI_Get_elements_x(&st, MPI_BYTE, &got), x->call))) return status;
    const int64_t want = message_bytes(x->plan, m);
    if (got != want) return refuse_message(x, m, &msg, got, want);
    const tdm_msg *data = &x->plan->msgs[m];
    status = tdm_check(MPI_Imrecv(data->buf, data->count, data->type, &msg, &x->reqs[m]), x->call);
    if (status) return status;
    x->nreqs++;
  }
  x->matching = 0;
  x->stage = TD_MPI_STAGE_DATA;
  return 1;
}

static int32_t match_step(void *arg) { return match_data(arg, false); }

/* The structure arrived: where its leaves go, then their messages, as they come. */
static int32_t place_leaves(td_mpi_transfer *x) {
  int32_t status = choose_targets(x);
  if (!status) status = reserve_reqs(x, x->plan->nmsgs);
  if (status) return status;
  x->matching = 1;
  status = match_data(x, false);
  return status < 0 ? status : TD_MPI_OK;
}

/* A completion call failed on the received data: when one message's status holds the
 * error (MPI_ERR_IN_STATUS), it is named with its own error, instead of MPI's "error
 * code in status". */
static int32_t data_failed(td_mpi_transfer *x, int32_t status) {
  if (x->kind != RECV || x->stage != TD_MPI_STAGE_DATA) return status;
  for (int m = 0; m < x->nreqs; m++) {
    int code = x->statuses[m].MPI_ERROR;
    if (code == MPI_SUCCESS || code == MPI_ERR_PENDING) continue;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, text, &len);
    return tdm_fail(TD_MPI_EMPI, "%s: data message %d of %d from rank %d (tag %d): %s", x->call, m + 1,
                    x->nreqs, (int)x->peer, (int)x->tag, text);
  }
  return status;
}

/* The current stage's messages are complete: go to the next. A received container is
 * checked once its bytes are in (a stacked value's positions travel as data). */
static int32_t advance(td_mpi_transfer *x) {
  if (x->stage == TD_MPI_STAGE_STRUCTURE) return place_leaves(x);
  x->stage = TD_MPI_STAGE_DONE;
  tdm_plan_release(x->plan); /* the cache may keep it */
  x->plan = NULL;
  if (x->result && td_ship_check(x->result) < 0) {
    td_dict_release(x->result);
    x->result = NULL;
    return tdm_core_fail(x->call);
  }
  return TD_MPI_OK;
}

/* One probe for the structure: 1 when matched (its receive posted), 0 when not yet. */
static int32_t probe(td_mpi_transfer *x) {
  int flag = 0;
  MPI_Message msg;
  MPI_Status st;
  int32_t status = tdm_check(MPI_Improbe(x->peer, x->tag, tdm_comm, &flag, &msg, &st), x->call);
  if (status || !flag) return status;
  status = take_structure(x, &msg, &st);
  return status ? status : 1;
}

TDM_EXPORT int32_t td_mpi_transfer_test(td_mpi_transfer *x) {
  if (!x) return tdm_fail(TD_MPI_EINVAL, "test: NULL transfer");
  while (x->stage != TD_MPI_STAGE_DONE) {
    if (x->stage == TD_MPI_STAGE_UNMATCHED || x->matching) {
      int32_t status = x->matching ? match_data(x, false) : probe(x);
      if (status <= 0) return status;
      continue;
    }
    int done = 0;
    int32_t status = tdm_check(MPI_Testall(x->nreqs, x->reqs, &done, x->statuses), x->call);
    if (status) return data_failed(x, status);
    if (!done) return 0;
    if ((status = advance(x))) return status;
  }
  return 1;
}

static int32_t probe_step(void *arg) { return probe(arg); }

TDM_EXPORT int32_t td_mpi_transfer_wait(td_mpi_transfer *x, double timeout) {
  if (!x) return tdm_fail(TD_MPI_EINVAL, "wait: NULL transfer");
  double deadline = timeout < 0 ? 0 : tdm_now() + timeout;
  while (x->stage != TD_MPI_STAGE_DONE) {
    double left = timeout < 0 ? -1 : deadline - tdm_now();
    if (timeout >= 0 && left < 0) left = 0;
    int32_t status;
    if (x->stage == TD_MPI_STAGE_UNMATCHED) {
      if (timeout < 0) {
        MPI_Message msg;
        MPI_Status st;
        status = tdm_check(MPI_Mprobe(x->peer, x->tag, tdm_comm, &msg, &st), x->call);
        if (!status) status = take_structure(x, &msg, &st);
      } else {
        status = tdm_poll(probe_step, x, left, x->call);
      }
    } else if (x->matching) {
      status = timeout < 0 ? match_data(x, true) : tdm_poll(match_step, x, left, x->call);
      if (status > 0) status = TD_MPI_OK;
    } else {
      status = tdm_wait_all_status(x->reqs, x->nreqs, x->statuses, left, x->call);
      if (status && status != TD_MPI_ETIMEOUT) status = data_failed(x, status);
      if (!status) status = advance(x);
    }
    if (status) return status;
  }
  return TD_MPI_OK;
}

TDM_EXPORT int32_t td_mpi_transfer_stage(const td_mpi_transfer *x) { return x ? x->stage : -1; }

TDM_EXPORT td_dict *td_mpi_transfer_result(td_mpi_transfer *x) {
  if (!x || x->stage != TD_MPI_STAGE_DONE || !x->result) return NULL;
  td_dict_retain(x->result);
  return x->result;
}

/* ---------------------------------------------------------------- broadcast */

TDM_EXPORT int32_t td_mpi_bcast_dict(struct td_dict *d, int32_t root, double timeout, td_mpi_transfer **out) {
  if (!out) return tdm_fail(TD_MPI_EINVAL, "broadcast: NULL out");
  *out = NULL;
  int32_t status = tdm_require_init("broadcast");
  if (!status) status = tdm_check_rank("broadcast", "root", root);
  if (status) return status;
  int is_root = td_mpi_rank() == root;
  if (is_root && !d) return tdm_fail(TD_MPI_EINVAL, "broadcast: the root's container is NULL");
  td_mpi_transfer *x = transfer_new(BCAST, root, 0, "broadcast");
  if (!x) return TD_MPI_ENOMEM;
  double deadline = tdm_now() + timeout;
#define LEFT (timeout < 0 ? -1 : (deadline > tdm_now() ? deadline - tdm_now() : 0))
  int64_t size = 0;
  if (is_root) {
    x->plan = tdm_plan_get(d, TDM_PLAN_STRUCTURE | TDM_PLAN_COPY_STRIDED | TDM_PLAN_CACHED, "broadcast");
    if (!x->plan) status = TD_MPI_EINVAL;
    else td_storage_retain(x->meta = x->plan->meta), x->meta_bytes = x->plan->meta_bytes;
  }
  if (!status) size = x->meta_bytes;
  if (!status) status = td_mpi_bcast(&size, sizeof size, root, LEFT);
  if (!status && !is_root) {
    if (size < 32 || size > tdm_int_limit) {
      status = tdm_fail(TD_MPI_EINVAL, "broadcast: the root announced a %lld-byte structure", (long long)size);
    } else if (!(x->meta = td_storage_new_heap(size))) {
      status = tdm_core_fail("broadcast");
    }
    x->meta_bytes = size;
    if (d) td_dict_retain(d);
    x->like = d;
  }
  if (!status) status = td_mpi_bcast(td_storage_data_borrow(x->meta), size, root, LEFT);
  if (!status && !is_root) status = choose_targets(x);
  if (!status) status = reserve_reqs(x, x->plan->nmsgs);
  if (!status) status = post_data(x);
  if (!status) x->stage = TD_MPI_STAGE_DATA;
  if (!status) status = tdm_wait_all(x->reqs, x->nreqs, LEFT, "broadcast");
#undef LEFT
  if (!status) status = advance(x);
  if (status) {
    td_mpi_transfer_free(x);
    return status;
  }
  *out = x;
  return TD_MPI_OK;
}

TDM_EXPORT void td_mpi_transfer_free(td_mpi_transfer *x) {
  if (!x) return;
  /* A collective that failed may still be posted (MPI can neither cancel nor free it):
   * its buffers must outlive it, so they are left allocated. */
  if (x->kind == BCAST && x->stage != TD_MPI_STAGE_DONE && x->nreqs) return;
  if (x->stage != TD_MPI_STAGE_DONE && x->nreqs && td_mpi_is_initialized()) tdm_abandon(x->reqs, x->nreqs);
  tdm_plan_release(x->plan);
  free_reqs(x);
  if (x->meta) td_storage_release(x->meta);
  if (x->like) td_dict_release(x->like);
  if (x->result) td_dict_release(x->result);
  free(x);
}
