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

/* A leaf's bytes, its storage held (a reference) while messages use them. */
typedef struct span {
  td_storage *storage;
  char *data;
  int64_t nbytes;
} span;

struct td_mpi_transfer {
  int kind;
  int32_t stage; /* enum td_mpi_stage */
  int32_t peer, tag;
  const char *call;
  td_storage *meta;  /* the structure sent or received */
  int64_t meta_bytes;
  td_dict *like;     /* receive: fill this one in place (retained) */
  td_dict *result;   /* receive: the received container, unless it went into like */
  span *held;        /* the leaves' memory the data messages use */
  int64_t nheld;
  MPI_Request *reqs; /* the messages of the current stage */
  int nreqs;
  /* Most transfers fit these, so they allocate no arrays (measured: ~15% of a small
   * container's send and receive went to malloc and free). */
  span held_inline[32];
  MPI_Request reqs_inline[4];
};

/* A failed core call inside ours: its message under our call's name. */
static int32_t core_fail(const char *call) {
  return tdm_fail(td_last_status() == TD_ENOMEM ? TD_MPI_ENOMEM : TD_MPI_EINVAL, "%s: %s", call,
                  td_last_error());
}

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

static void release_held(td_mpi_transfer *x) {
  for (int64_t i = 0; i < x->nheld; i++) td_storage_release(x->held[i].storage);
  if (x->held != x->held_inline) free(x->held);
  x->held = NULL;
  x->nheld = 0;
}

/* Room for n requests of the next stage (the previous stage's are complete). */
static int32_t reserve_reqs(td_mpi_transfer *x, int n) {
  if (x->reqs != x->reqs_inline) free(x->reqs);
  x->nreqs = 0;
  x->reqs = n <= 4 ? x->reqs_inline : malloc(sizeof *x->reqs * (size_t)n);
  if (!x->reqs) return tdm_fail(TD_MPI_ENOMEM, "%s: out of memory for %d requests", x->call, n);
  return TD_MPI_OK;
}

/* The leaves of d in ship order (x->held), as memory we may send from or receive into:
 * d's own leaf's bytes when C-contiguous, else (copy_strided, sending) a contiguous
 * copy's. all_direct (may be NULL): every leaf C-contiguous and writable; has_values
 * (may be NULL): a stack of values among them. */
static int32_t hold_leaves(td_mpi_transfer *x, const td_dict *d, bool copy_strided, bool *all_direct,
                           bool *has_values) {
  enum { ON_STACK = 64 }; /* most containers: one walk and no allocation for the list */
  const td_tensor *leaves_s[ON_STACK];
  int64_t offsets_s[ON_STACK];
  int32_t kinds_s[ON_STACK];
  const td_tensor **leaves = leaves_s;
  int64_t *offsets = offsets_s;
  int32_t *kinds = kinds_s;
  int64_t n = td_ship_leaves(d, leaves, offsets, kinds, ON_STACK);
  if (n < 0) return core_fail(x->call);
  int32_t status = TD_MPI_OK;
  if (n > ON_STACK) {
    leaves = malloc(sizeof *leaves * (size_t)n);
    offsets = malloc(sizeof *offsets * (size_t)n);
    kinds = malloc(sizeof *kinds * (size_t)n);
    if (!leaves || !offsets || !kinds) {
      status = tdm_fail(TD_MPI_ENOMEM, "%s: out of memory for %lld leaves", x->call, (long long)n);
    } else if (td_ship_leaves(d, leaves, offsets, kinds, n) != n) {
      status = core_fail(x->call);
    }
  }
  x->held = n <= 32 ? x->held_inline : calloc((size_t)n, sizeof *x->held);
  if (!status && !x->held) {
    status = tdm_fail(TD_MPI_ENOMEM, "%s: out of memory for %lld leaves", x->call, (long long)n);
  }
  if (all_direct) *all_direct = true;
  if (has_values) *has_values = false;
  for (int64_t i = 0; !status && i < n; i++) {
    const td_tensor *t = leaves[i];
    bool direct = td_tensor_is_contiguous(t) == 1;
    if (all_direct && (!direct || td_tensor_is_writable(t) != 1)) *all_direct = false;
    if (has_values && kinds[i] == TD_ENTRY_VALUES) *has_values = true;
    td_tensor *copy = direct || !copy_strided ? NULL : td_tensor_contiguous(t);
    if (!direct && copy_strided && !copy) {
      status = core_fail(x->call);
      break;
    }
    const td_tensor *from = copy ? copy : t;
    span *h = &x->held[i];
    h->storage = from->storage;
    h->data = td_tensor_data_borrow(from);
    h->nbytes = td_tensor_numel(from) * from->itemsize;
    td_storage_retain(h->storage);
    if (copy) td_tensor_release(copy);
    x->nheld = i + 1;
  }
  if (leaves != leaves_s) {
    free(leaves);
    free(offsets);
    free(kinds);
  }
  return status;
}

/* One message of the transfer's kind. */
static int32_t post(td_mpi_transfer *x, void *buf, int count, MPI_Datatype type, MPI_Request *r) {
  int code = x->kind == SEND   ? MPI_Isend(buf, count, type, x->peer, x->tag, tdm_comm, r)
             : x->kind == RECV ? MPI_Irecv(buf, count, type, x->peer, x->tag, tdm_comm, r)
                               : MPI_Ibcast(buf, count, type, x->peer, tdm_comm, r);
  return tdm_check(code, x->call);
}

static int64_t data_bytes(const td_mpi_transfer *x) {
  int64_t total = 0;
  for (int64_t i = 0; i < x->nheld; i++) total += x->held[i].nbytes;
  return total;
}

/* The data messages of x->held's bytes. */
static int data_messages(const td_mpi_transfer *x) {
  int64_t total = data_bytes(x);
  return total ? tdm_chunks(total) : 0;
}

/* Posts the data messages over x->held: their bytes in order, cut every tdm_chunk
 * bytes, one hindexed datatype per message (a plain byte message when it is one span). */
static int32_t post_data(td_mpi_transfer *x) {
  int64_t total = data_bytes(x), n = x->nheld;
  int nmsg = data_messages(x);
  int first = x->kind == SEND ? 1 : 0; /* a send's slot 0 is its structure */
  enum { ON_STACK = 64 };
  int lens_s[ON_STACK];
  MPI_Aint disps_s[ON_STACK];
  int *lens = n <= ON_STACK ? lens_s : malloc(sizeof *lens * (size_t)n);
  MPI_Aint *disps = n <= ON_STACK ? disps_s : malloc(sizeof *disps * (size_t)n);
  if (!lens || !disps) {
    if (lens != lens_s) free(lens);
    if (disps != disps_s) free(disps);
    return tdm_fail(TD_MPI_ENOMEM, "%s: out of memory for %lld leaves", x->call, (long long)n);
  }
  int32_t status = TD_MPI_OK;
  int64_t leaf = 0, at = 0; /* the next byte to place: leaf's byte at */
  for (int m = 0; m < nmsg && !status; m++) {
    int64_t want = total - (int64_t)m * tdm_chunk < tdm_chunk ? total - (int64_t)m * tdm_chunk : tdm_chunk;
    int nb = 0;
    char *start = NULL;
    while (want > 0) {
      int64_t size = x->held[leaf].nbytes;
      if (at == size) { leaf++; at = 0; continue; } /* an empty leaf, or one used up */
      int64_t take = size - at < want ? size - at : want;
      char *p = x->held[leaf].data + at;
      if (nb == 0) start = p;
      MPI_Get_address(p, &disps[nb]);
      lens[nb++] = (int)take;
      at += take;
      want -= take;
    }
    MPI_Request *r = &x->reqs[first + m];
    if (nb == 1) {
      status = post(x, start, lens[0], MPI_BYTE, r);
    } else {
      MPI_Datatype type;
      status = tdm_check(MPI_Type_create_hindexed(nb, lens, disps, MPI_BYTE, &type), x->call);
      if (!status) status = tdm_check(MPI_Type_commit(&type), x->call);
      if (!status) {
        status = post(x, MPI_BOTTOM, 1, type, r);
        MPI_Type_free(&type); /* MPI keeps it until the message completes */
      }
    }
    if (!status) x->nreqs = first + m + 1;
  }
  if (lens != lens_s) free(lens);
  if (disps != disps_s) free(disps);
  return status;
}

/* ------------------------------------------------------------------ sending */

/* x->meta: d's structure (one message: at most tdm_int_limit bytes). */
static int32_t pack_structure(td_mpi_transfer *x, const td_dict *d) {
  /* Packed into a guess first, so that most containers take one walk. */
  enum { GUESS = 4096 };
  if (!(x->meta = td_storage_new_heap(GUESS))) return core_fail(x->call);
  int64_t size = td_ship_pack_meta(d, x->meta);
  if (size < 0) {
    int64_t need = td_ship_meta_size(d);
    if (need <= GUESS) return core_fail(x->call); /* not a matter of room */
    td_storage_release(x->meta);
    if (!(x->meta = td_storage_new_heap(need)) || (size = td_ship_pack_meta(d, x->meta)) != need) {
      return core_fail(x->call);
    }
  }
  x->meta_bytes = size;
  if (size > tdm_int_limit) {
    return tdm_fail(TD_MPI_EINVAL, "%s: the structure takes %lld bytes (more than %lld)", x->call,
                    (long long)size, (long long)tdm_int_limit);
  }
  return TD_MPI_OK;
}

TDM_EXPORT td_mpi_transfer *td_mpi_isend_dict(const td_dict *d, int32_t dst, int32_t tag) {
  if (check_peer("isend", "destination", dst, tag)) return NULL;
  if (!d) { tdm_fail(TD_MPI_EINVAL, "isend: container is NULL"); return NULL; }
  td_mpi_transfer *x = transfer_new(SEND, dst, tag, "isend");
  if (!x) return NULL;
  int32_t status = pack_structure(x, d);
  if (!status) status = hold_leaves(x, d, true, NULL, NULL);
  if (!status) status = reserve_reqs(x, 1 + data_messages(x));
  if (!status) {
    status = tdm_check(MPI_Isend(td_storage_data_borrow(x->meta), (int)x->meta_bytes, MPI_BYTE, dst, tag,
                                 tdm_comm, &x->reqs[0]), "isend");
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
  if (!x->meta) return core_fail(x->call);
  status = tdm_check(MPI_Imrecv(td_storage_data_borrow(x->meta), count, MPI_BYTE, msg, &x->reqs[0]), x->call);
  if (status) return status;
  x->nreqs = 1;
  x->stage = TD_MPI_STAGE_STRUCTURE;
  return TD_MPI_OK;
}

/* like has the message's structure when its own packs to the same bytes (keys, batch,
 * names, values, dtypes, shapes, hence offsets), holds no stack of values (whose
 * positions would be overwritten in place) and every leaf can be written in place. */
static bool like_takes_it(td_mpi_transfer *x) {
  td_storage *mine = td_storage_new_heap(x->meta_bytes);
  if (!mine) return false;
  bool same = td_ship_pack_meta(x->like, mine) == x->meta_bytes &&
              memcmp(td_storage_data_borrow(mine), td_storage_data_borrow(x->meta), (size_t)x->meta_bytes) == 0;
  td_storage_release(mine);
  if (!same) return false;
  bool direct, values;
  if (hold_leaves(x, x->like, false, &direct, &values) == TD_MPI_OK && direct && !values) return true;
  release_held(x);
  return false;
}

/* The structure arrived: where its leaves go (x->held): like's leaves, or those of a
 * new container (x->result) viewing one new storage. */
static int32_t choose_targets(td_mpi_transfer *x) {
  int64_t data = td_ship_data_bytes(x->meta);
  if (data < 0) return core_fail(x->call);
  if (x->like && like_takes_it(x)) return TD_MPI_OK;
  td_storage *s = td_storage_new_heap(data > 0 ? data : 1);
  if (!s) return core_fail(x->call);
  x->result = td_ship_unpack_meta(x->meta, s);
  td_storage_release(s); /* the result's leaves hold it */
  if (!x->result) return core_fail(x->call);
  return hold_leaves(x, x->result, false, NULL, NULL);
}

/* The structure arrived: post the leaves' messages. */
static int32_t place_leaves(td_mpi_transfer *x) {
  int32_t status = choose_targets(x);
  if (!status) status = reserve_reqs(x, data_messages(x));
  if (!status) status = post_data(x);
  if (!status) x->stage = TD_MPI_STAGE_DATA;
  return status;
}

/* The current stage's messages are complete: go to the next. A received container is
 * checked once its bytes are in (a stacked value's positions travel as data). */
static int32_t advance(td_mpi_transfer *x) {
  if (x->stage == TD_MPI_STAGE_STRUCTURE) return place_leaves(x);
  x->stage = TD_MPI_STAGE_DONE;
  release_held(x);
  if (x->result && td_ship_check(x->result) < 0) {
    td_dict_release(x->result);
    x->result = NULL;
    return core_fail(x->call);
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
    if (x->stage == TD_MPI_STAGE_UNMATCHED) {
      int32_t status = probe(x);
      if (status <= 0) return status;
      continue;
    }
    int done = 0;
    int32_t status = tdm_check(MPI_Testall(x->nreqs, x->reqs, &done, MPI_STATUSES_IGNORE), x->call);
    if (status) return status;
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
    } else {
      status = tdm_wait_all(x->reqs, x->nreqs, left, x->call);
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
  if (is_root) status = pack_structure(x, d);
  if (!status) size = x->meta_bytes;
  if (!status) status = td_mpi_bcast(&size, sizeof size, root, LEFT);
  if (!status && !is_root) {
    if (size < 32 || size > tdm_int_limit) {
      status = tdm_fail(TD_MPI_EINVAL, "broadcast: the root announced a %lld-byte structure", (long long)size);
    } else if (!(x->meta = td_storage_new_heap(size))) {
      status = core_fail("broadcast");
    }
    x->meta_bytes = size;
    if (d) td_dict_retain(d);
    x->like = d;
  }
  if (!status) status = td_mpi_bcast(td_storage_data_borrow(x->meta), size, root, LEFT);
  if (!status) status = is_root ? hold_leaves(x, d, true, NULL, NULL) : choose_targets(x);
  if (!status) status = reserve_reqs(x, data_messages(x));
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
  release_held(x);
  if (x->reqs != x->reqs_inline) free(x->reqs);
  if (x->meta) td_storage_release(x->meta);
  if (x->like) td_dict_release(x->like);
  if (x->result) td_dict_release(x->result);
  free(x);
}
