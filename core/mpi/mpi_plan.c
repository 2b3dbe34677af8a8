/*
 * mpi_plan.c: a container's transfer plan (mpi_internal.h), and the cache that keeps
 * the plans of small containers between transfers.
 *
 * A plan is what sending a container, or receiving into it, needs beyond the bytes:
 * its packed structure, its leaves' spans (each storage held), and the data messages
 * over them (one MPI datatype per message). Building one costs ~2 us for 25 leaves
 * (structure 0.4, leaf walk 0.3, references 0.4, datatype 0.6, checks 0.3; measured
 * one rank at a time), which is what kept a ping-pong of 25 x 4 KiB leaves at 0.67x a
 * raw send: four plans sit on each round trip's critical path (docs/dist.md).
 *
 * Containers send and receive the same containers again and again (a model's state,
 * a batch buffer), so the plans of small ones (data up to TDM_PLAN_CACHE_BYTES) are
 * kept: a plan stays valid while its container's version and those of every container
 * nested in it are unchanged (every change to keys, leaves, batch size or names
 * touches the container it is made on: dict.c). The cache holds a reference on each
 * container it keeps, so a freed container's address cannot come back as another with
 * the same version; it keeps at most TDM_PLAN_CACHE_SIZE of them (their data bounded by
 * the size limit), drops the least recently used one first, and empties at finalize.
 * Plans are reference counted: a transfer in flight keeps its plan (and so its leaves'
 * storages) even after the cache dropped it. MPI is initialised FUNNELED: one thread
 * makes every call, so the counts are plain.
 */
#include <stdlib.h>
#include <string.h>

#include "tensordict.h"
#include "mpi_internal.h"

enum { TDM_PLAN_CACHE_SIZE = 8, TDM_PLAN_CACHE_BYTES = 1 << 20 };

static tdm_plan *cache[TDM_PLAN_CACHE_SIZE]; /* most recently used first */

/* A failed core call inside ours: its message under our call's name. */
int32_t tdm_core_fail(const char *call) {
  return tdm_fail(td_last_status() == TD_ENOMEM ? TD_MPI_ENOMEM : TD_MPI_EINVAL, "%s: %s", call,
                  td_last_error());
}

static int32_t no_memory(const char *call, const char *what, int64_t n) {
  return tdm_fail(TD_MPI_ENOMEM, "%s: out of memory for %lld %s", call, (long long)n, what);
}

void tdm_plan_release(tdm_plan *p) {
  if (!p || --p->refs > 0) return;
  for (int64_t i = 0; i < p->nspans; i++) td_storage_release(p->spans[i].storage);
  /* After finalize MPI frees nothing more (and may not be called). */
  if (td_mpi_is_initialized())
    for (int i = 0; i < p->nmsgs; i++)
      if (p->msgs[i].type != MPI_BYTE) MPI_Type_free(&p->msgs[i].type);
  if (p->spans != p->spans_inline) free(p->spans);
  if (p->msgs != p->msgs_inline) free(p->msgs);
  free(p->nested);
  if (p->meta) td_storage_release(p->meta);
  if (p->dict) td_dict_release(p->dict);
  free(p);
}

/* p->meta: d's structure (one message: at most tdm_int_limit bytes). */
static int32_t pack_structure(tdm_plan *p, const td_dict *d, const char *call) {
  /* Packed into a guess first, so that most containers take one walk. */
  enum { GUESS = 4096 };
  if (!(p->meta = td_storage_new_heap(GUESS))) return tdm_core_fail(call);
  int64_t size = td_ship_pack_meta(d, p->meta);
  if (size < 0) {
    int64_t need = td_ship_meta_size(d);
    if (need <= GUESS) return tdm_core_fail(call); /* not a matter of room */
    td_storage_release(p->meta);
    if (!(p->meta = td_storage_new_heap(need)) || (size = td_ship_pack_meta(d, p->meta)) != need) {
      return tdm_core_fail(call);
    }
  }
  p->meta_bytes = size;
  if (size > tdm_int_limit) {
    return tdm_fail(TD_MPI_EINVAL, "%s: the structure takes %lld bytes (more than %lld)", call,
                    (long long)size, (long long)tdm_int_limit);
  }
  return TD_MPI_OK;
}

/* p->spans: the leaves of d in ship order, as memory to send from or receive into: a
 * leaf's own bytes when C-contiguous, else (copy_strided, sending) a contiguous copy's.
 * Sets p->contiguous, p->writable and p->values. */
static int32_t hold_leaves(tdm_plan *p, const td_dict *d, bool copy_strided, const char *call) {
  enum { ON_STACK = 64 }; /* most containers: one walk and no allocation for the list */
  const td_tensor *leaves_s[ON_STACK];
  int64_t offsets_s[ON_STACK];
  int32_t kinds_s[ON_STACK];
  const td_tensor **leaves = leaves_s;
  int64_t *offsets = offsets_s;
  int32_t *kinds = kinds_s;
  int64_t n = td_ship_leaves(d, leaves, offsets, kinds, ON_STACK);
  if (n < 0) return tdm_core_fail(call);
  int32_t status = TD_MPI_OK;
  if (n > ON_STACK) {
    leaves = malloc(sizeof *leaves * (size_t)n);
    offsets = malloc(sizeof *offsets * (size_t)n);
    kinds = malloc(sizeof *kinds * (size_t)n);
    if (!leaves || !offsets || !kinds) {
      status = no_memory(call, "leaves", n);
    } else if (td_ship_leaves(d, leaves, offsets, kinds, n) != n) {
      status = tdm_core_fail(call);
    }
  }
  p->spans = n <= (int64_t)(sizeof p->spans_inline / sizeof *p->spans_inline)
                 ? p->spans_inline
                 : calloc((size_t)n, sizeof *p->spans);
  if (!status && !p->spans) status = no_memory(call, "leaves", n);
  p->contiguous = p->writable = true;
  p->values = false;
  for (int64_t i = 0; !status && i < n; i++) {
    const td_tensor *t = leaves[i];
    bool direct = td_tensor_is_contiguous(t) == 1;
    if (!direct) p->contiguous = false;
    if (td_tensor_is_writable(t) != 1) p->writable = false;
    if (kinds[i] == TD_ENTRY_VALUES) p->values = true;
    td_tensor *copy = direct || !copy_strided ? NULL : td_tensor_contiguous(t);
    if (!direct && copy_strided && !copy) {
      status = tdm_core_fail(call);
      break;
    }
    const td_tensor *from = copy ? copy : t;
    tdm_span *s = &p->spans[i];
    s->storage = from->storage;
    s->data = td_tensor_data_borrow(from);
    s->nbytes = td_tensor_numel(from) * from->itemsize;
    p->data_bytes += s->nbytes;
    td_storage_retain(s->storage);
    if (copy) td_tensor_release(copy);
    p->nspans = i + 1;
  }
  if (leaves != leaves_s) {
    free(leaves);
    free(offsets);
    free(kinds);
  }
  return status;
}

/* p->msgs: the spans' bytes in order, cut every tdm_chunk bytes, one message each: a
 * plain byte message when it is one span, else one hindexed datatype over its spans. */
static int32_t plan_messages(tdm_plan *p, const char *call) {
  int64_t total = p->data_bytes, n = p->nspans;
  int nmsg = total ? tdm_chunks(total) : 0;
  p->msgs = nmsg <= 1 ? p->msgs_inline : calloc((size_t)nmsg, sizeof *p->msgs);
  if (!p->msgs) return no_memory(call, "messages", nmsg);
  enum { ON_STACK = 64 };
  int lens_s[ON_STACK];
  MPI_Aint disps_s[ON_STACK];
  int *lens = n <= ON_STACK ? lens_s : malloc(sizeof *lens * (size_t)n);
  MPI_Aint *disps = n <= ON_STACK ? disps_s : malloc(sizeof *disps * (size_t)n);
  int32_t status = TD_MPI_OK;
  if (!lens || !disps) status = no_memory(call, "leaves", n);
  int64_t leaf = 0, at = 0; /* the next byte to place: leaf's byte at */
  for (int m = 0; m < nmsg && !status; m++) {
    int64_t want = total - (int64_t)m * tdm_chunk < tdm_chunk ? total - (int64_t)m * tdm_chunk : tdm_chunk;
    int nb = 0;
    char *start = NULL;
    while (want > 0) {
      int64_t size = p->spans[leaf].nbytes;
      if (at == size) { leaf++; at = 0; continue; } /* an empty leaf, or one used up */
      int64_t take = size - at < want ? size - at : want;
      char *q = p->spans[leaf].data + at;
      if (nb == 0) start = q;
      MPI_Get_address(q, &disps[nb]);
      lens[nb++] = (int)take;
      at += take;
      want -= take;
    }
    tdm_msg *msg = &p->msgs[m];
    if (nb == 1) {
      *msg = (tdm_msg){start, lens[0], MPI_BYTE};
    } else {
      MPI_Datatype type;
      status = tdm_check(MPI_Type_create_hindexed(nb, lens, disps, MPI_BYTE, &type), call);
      if (!status && (status = tdm_check(MPI_Type_commit(&type), call))) MPI_Type_free(&type);
      if (!status) *msg = (tdm_msg){MPI_BOTTOM, 1, type};
    }
    if (!status) p->nmsgs = m + 1;
  }
  if (lens != lens_s) free(lens);
  if (disps != disps_s) free(disps);
  return status;
}

/* ---------------------------------------------------------------- the cache */

/* The containers nested in d, depth first, with their versions (a cached plan's
 * validity). Each is alive while d is unchanged: d holds it. */
static int32_t note_nested(tdm_plan *p, td_dict *d, int32_t *cap, const char *call) {
  int32_t n = td_dict_head_borrow(d)->nkeys;
  for (int32_t i = 0; i < n; i++) {
    if (td_dict_kind(d, i) != TD_ENTRY_DICT) continue;
    td_dict *child = td_dict_child(d, i);
    td_dict_release(child); /* d holds it */
    if (p->nnested == *cap) {
      int32_t grown = *cap ? 2 * *cap : 4;
      tdm_nested *more = realloc(p->nested, sizeof *more * (size_t)grown);
      if (!more) return no_memory(call, "nested containers", grown);
      p->nested = more;
      *cap = grown;
    }
    p->nested[p->nnested++] = (tdm_nested){child, td_dict_head_borrow(child)->version};
    int32_t status = note_nested(p, child, cap, call);
    if (status) return status;
  }
  return TD_MPI_OK;
}

static bool still_valid(const tdm_plan *p) {
  if (td_dict_head_borrow(p->dict)->version != p->version) return false;
  /* In order: a container's children are checked after it was found unchanged. */
  for (int32_t i = 0; i < p->nnested; i++)
    if (td_dict_head_borrow(p->nested[i].dict)->version != p->nested[i].version) return false;
  return true;
}

static void cache_remove(int at) {
  tdm_plan *p = cache[at];
  memmove(cache + at, cache + at + 1, sizeof *cache * (size_t)(TDM_PLAN_CACHE_SIZE - 1 - at));
  cache[TDM_PLAN_CACHE_SIZE - 1] = NULL;
  tdm_plan_release(p);
}

/* d's cached plan, moved to the front; NULL when none or stale (then dropped). */
static tdm_plan *cache_find(const td_dict *d) {
  for (int i = 0; i < TDM_PLAN_CACHE_SIZE && cache[i]; i++) {
    if (cache[i]->dict != d) continue;
    tdm_plan *p = cache[i];
    if (!still_valid(p)) {
      cache_remove(i);
      return NULL;
    }
    memmove(cache + 1, cache, sizeof *cache * (size_t)i);
    cache[0] = p;
    return p;
  }
  return NULL;
}

/* Keeps p (a plan of its own container, with its structure) when it is small and
 * needs no copies; a failure to note its nested containers only leaves it uncached. */
static void cache_keep(tdm_plan *p, td_dict *d, const char *call) {
  if (!p->contiguous || p->data_bytes > TDM_PLAN_CACHE_BYTES) return;
  int32_t cap = 0;
  if (note_nested(p, d, &cap, call)) {
    free(p->nested);
    p->nested = NULL;
    p->nnested = 0;
    return;
  }
  td_dict_retain(d);
  p->dict = d;
  p->version = td_dict_head_borrow(d)->version;
  if (cache[TDM_PLAN_CACHE_SIZE - 1]) cache_remove(TDM_PLAN_CACHE_SIZE - 1);
  memmove(cache + 1, cache, sizeof *cache * (TDM_PLAN_CACHE_SIZE - 1));
  cache[0] = p;
  p->refs++;
}

void tdm_plan_cache_clear(void) {
  while (cache[0]) cache_remove(0);
}

/* ------------------------------------------------------------------ plans */

tdm_plan *tdm_plan_get(td_dict *d, int flags, const char *call) {
  if (flags & TDM_PLAN_CACHED) {
    tdm_plan *hit = cache_find(d);
    if (hit) {
      hit->refs++;
      return hit;
    }
  }
  tdm_plan *p = calloc(1, sizeof *p);
  if (!p) {
    no_memory(call, "a transfer plan", 1);
    return NULL;
  }
  p->refs = 1;
  p->spans = p->spans_inline;
  p->msgs = p->msgs_inline;
  int32_t status = flags & (TDM_PLAN_STRUCTURE | TDM_PLAN_CACHED) ? pack_structure(p, d, call) : TD_MPI_OK;
  if (!status) status = hold_leaves(p, d, flags & TDM_PLAN_COPY_STRIDED, call);
  if (!status) status = plan_messages(p, call);
  if (status) {
    tdm_plan_release(p);
    return NULL;
  }
  if (flags & TDM_PLAN_CACHED) cache_keep(p, d, call);
  return p;
}
