/*
 * dict_internal.h: the layout of containers and the helpers the files of core/dict
 * share. Nothing here is part of the ABI (see td_dict in core/include/tensordict.h).
 */
#ifndef TD_DICT_INTERNAL_H
#define TD_DICT_INTERNAL_H

#include "../src/internal.h"
#include "../src/json.h"

/* The ordered key set, shared by containers of one structure (td[i] shares its
 * parent's) and copied before the first change when shared. Lookup is open addressing
 * over a power-of-two table of entry indices. */
typedef struct td_key_meta {
  int64_t off;   /* of the NUL-terminated name in the arena */
  int64_t len;   /* bytes, without the NUL (keys may hold NUL bytes) */
  uint64_t hash;
} td_key_meta;

typedef struct td_keys {
  atomic_int_fast64_t refcount;
  int32_t n, cap;
  td_key_meta *meta;
  int32_t *table;    /* entry index + 1; 0 empty */
  int32_t table_cap; /* a power of two, at least twice n */
  char *arena;       /* every name, back to back */
  int64_t arena_len, arena_cap;
} td_keys;

/* JSON texts of a non-tensor value, shared between containers. */
typedef struct td_values {
  atomic_int_fast64_t refcount;
  int64_t n;
  char **texts;
} td_values;

/* The storage references of a container's leaves, taken once and shared by the views
 * made of them (td[i], slices, shape ops): such a view's entries borrow their storages
 * from it instead of taking a reference each (two atomic operations a leaf, a third of
 * td[i] on a small container). s[i] is entry i's storage when the set was made (NULL
 * for entries without one). */
typedef struct td_leaf_refs {
  atomic_int_fast64_t refcount;
  int32_t n;
  td_storage *s[];
} td_leaf_refs;

/* The fields every walk reads (kind, the flags, child, values and the header's storage
 * and rank) share the entry's first cache line; the header's shape and strides follow. */
typedef struct td_entry {
  int32_t kind;      /* enum td_entry_kind */
  int16_t pinned;    /* a header was handed out: keep its storage until the dict dies */
  int16_t borrowed;  /* t's storage is held by the container's `held` set, not by t */
  td_dict *child;    /* DICT */
  td_values *values; /* VALUE, VALUES */
  td_tensor t;       /* TENSOR: the leaf; VALUES: positions. Holds a storage reference
                        unless borrowed. */
} td_entry;

struct td_dict {
  td_dict_head head; /* first: the Lua layer reads it through td_dict_head_borrow */
  atomic_int_fast64_t refcount;
  td_keys *keys;
  td_entry *entries; /* keys->n of them, in key order */
  int32_t cap;
  char *names[TD_MAX_DIMS];
  char *prefix;
  td_storage **retired; /* storages of pinned leaves that were replaced */
  int32_t nretired, retired_cap;
  /* The references of this container's leaves that views of it borrow (made by the
   * first view, dropped by the next change: td_dict_touch). */
  _Atomic(td_leaf_refs *) lent;
  td_leaf_refs *held; /* what this container's borrowed entries live on (a view's) */
};

/* Copies a header's fields and its ndim sizes and strides (not the unused tail: a full
 * 296-byte struct copy costs more than the rest of setting a leaf). The tail of dst is
 * left as it was; nothing reads past ndim. */
static inline void td_header_copy(td_tensor *dst, const td_tensor *src) {
  dst->refcount = 0;
  dst->storage = src->storage;
  dst->offset = src->offset;
  dst->itemsize = src->itemsize;
  dst->ndim = src->ndim;
  dst->dtype = src->dtype;
  if (src->ndim <= 4) {
    /* Fixed sizes compile to a few moves; the loop below becomes two memmove calls,
     * 7% of constructing a 256-leaf container. Slots past ndim carry no meaning. */
    memcpy(dst->shape, src->shape, sizeof dst->shape[0] * 4);
    memcpy(dst->strides, src->strides, sizeof dst->strides[0] * 4);
    return;
  }
  for (int32_t i = 0; i < src->ndim; i++) {
    dst->shape[i] = src->shape[i];
    dst->strides[i] = src->strides[i];
  }
}

/* ---- dict.c ---- */
/* A container with d's batch size, names, device and lock, sharing d's key set, with
 * every entry zeroed (kind TENSOR, no storage): the batch operations fill them. The
 * batch size is replaced by (ndim, batch) when batch is not NULL. */
td_dict *td_dict_like(const td_dict *d, int32_t ndim, const int64_t *batch);
/* Release what an entry holds and zero it (pinned storages go to d's retired list). */
void td_entry_clear(td_dict *d, td_entry *e);
/* Copy src's content into the zeroed entry dst, taking new references. */
void td_entry_share(td_entry *dst, const td_entry *src);
/* A stacked value's texts grow in place (index assignment appends the texts it writes),
 * so they are shared exactly by the entries whose positions share storage (views) and
 * by no others: a copy sharing them would see, and race with, its source's writes.
 * td_entry_copy: src's content into the zeroed dst as a copy makes it (a stacked value
 * gets positions in new storage and its own texts; everything else is shared as
 * td_entry_share does: uniform values are never written in place). */
int32_t td_entry_copy(td_entry *dst, const td_entry *src);
/* o's positions are set (from src's): o shares src's texts when its positions share
 * src's storage, else it gets its own copy of them. */
int32_t td_entry_take_values(td_entry *o, const td_entry *src);
td_values *td_values_copy(const td_values *v);
/* The key of entry i as a C string (for messages). */
static inline const char *td_dict_key(const td_dict *d, int32_t i) {
  return d->keys->arena + d->keys->meta[i].off;
}
void td_dict_touch(td_dict *d); /* a new version */
/* The entry of d with the key of other's entry i, or -1: no hashing or lookup when
 * the two share their key set or hold that key at the same position (containers of
 * one structure, the common case for update_, index assignment and joins). */
int32_t td_dict_find_like(const td_dict *d, const td_dict *other, int32_t i);
td_values *td_values_new(int64_t n);
void td_values_retain(td_values *v);
void td_values_release(td_values *v);
/* Take an owned header's storage reference into out (a caller-owned header) and release
 * the owned header. Returns 0, or the pending error when owned is NULL. */
int32_t td_take_owned(td_tensor *out, td_tensor *owned);
/* Copy a caller-owned view into out and give out its own storage reference. */
void td_hold_view(td_tensor *out, const td_tensor *view);

/* Prefix the current error message with "<call>: key '<path>': ". */
int32_t td_dict_fail_key(int32_t status, const char *call, const char *path);

/* The key path of the entry a walk is visiting, as a chain of parents on the C stack:
 * formatted ("obs.pixels") only when an error message needs it, never on the way down. */
enum { TD_PATH_CHARS = 512 };
/* Containers nested in containers: what recursive walks, shipping, saves and loads
 * accept (a memmap folder nests as deep as its container). */
enum { TD_DICT_MAX_DEPTH = 256 };
typedef struct td_key_path {
  const struct td_key_path *parent;
  const char *key;
} td_key_path;
/* Writes the dotted path into buf (TD_PATH_CHARS bytes) and returns buf. */
const char *td_key_path_text(const td_key_path *p, char *buf);
/* td_dict_fail_key with the path of p. */
int32_t td_dict_fail_at(int32_t status, const char *call, const td_key_path *p);

/* d's leaf references for views of d to borrow, made on first use and kept until d
 * changes; retained for the caller. NULL when out of memory (views then hold their own). */
td_leaf_refs *td_dict_lent(const td_dict *d);
void td_leaf_refs_release(td_leaf_refs *r);

/* ---- dict_map.c: the walk every batch operation uses ---- */
/* A leaf operation: in is a tensor whose dims [0, op_ndim) are the top-level batch dims
 * the operation refers to (the rest are trailing: nested batch dims and feature dims).
 * It writes the result into out holding a storage reference (td_take_owned or
 * td_hold_view) and returns 0, or writes a view of in's storage without a reference and
 * returns TD_LEAF_VIEW (the walk then borrows it from in's container, or takes one). */
enum { TD_LEAF_VIEW = 1 };
typedef struct td_leaf_op td_leaf_op;
struct td_leaf_op {
  const char *call;
  int32_t (*fn)(const td_leaf_op *op, const td_tensor *in, td_tensor *out);
  int32_t op_ndim;
  void *ctx;
};
/* A new container of d's structure with every tensor leaf (and stacked positions)
 * transformed by op and the batch size of each level turned into
 * new_batch ++ (that level's dims past op_ndim). Uniform values are shared. */
td_dict *td_dict_map(const td_dict *d, const td_leaf_op *op, int32_t new_ndim,
                     const int64_t *new_batch);
/* Visit every tensor leaf of d in place (nested too): fn's out is unused (NULL). */
int32_t td_dict_visit(td_dict *d, const td_leaf_op *op);
/* A caller-owned header of the given shape with contiguous strides and no storage: the
 * batch shape run through view operations to learn the new batch size. */
void td_shape_header(td_tensor *h, int32_t ndim, const int64_t *shape);

/* ---- dict_jobs.c: the writes of a multi-leaf operation, checked then run ---- */
typedef int32_t (*td_job_fn)(const void *ctx, td_tensor *dst, const td_tensor *src);
typedef struct td_job {
  td_tensor dst;        /* the target (a view, borrowed storage) */
  const td_tensor *src; /* NULL: fill with the jobs' value */
  td_job_fn fn;         /* NULL: copy_ / fill_ */
  const void *ctx;
} td_job;
typedef struct td_jobs {
  td_job *v;
  int32_t n, cap;
  int64_t bytes, largest;
  double value;
  int64_t failed_at;
  int32_t values; /* non-tensor entries met (update_ applies them after the copies) */
} td_jobs;
/* Checks dst is writable and (for a plain copy) that src broadcasts to its shape, then
 * records the job. */
int32_t td_jobs_add(td_jobs *j, const char *call, const td_tensor *dst, const td_tensor *src,
                    td_job_fn fn, const void *ctx);
int32_t td_jobs_run(td_jobs *j, const char *call);
void td_jobs_free(td_jobs *j);

#endif
