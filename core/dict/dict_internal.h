/*
 * dict_internal.h: the layout of containers and the helpers the files of core/dict
 * share. Nothing here is part of the ABI (see td_dict in core/include/tensordict.h).
 */
#ifndef TD_DICT_INTERNAL_H
#define TD_DICT_INTERNAL_H

#include "../src/internal.h"
#include "../src/json.h"
#include "dict_fs.h"

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

/* ---- Python tensordict's formats (dict_pyformat.c): what the memmap folders and the
 * consolidated file (dict_consolidate.c) share, so both write the bytes Python writes ---- */
/* "torch.float32" for TD_FLOAT32 (NULL outside the dtypes); the dtype of such a name, or -1. */
const char *td_py_dtype_name(int32_t dtype);
int32_t td_py_dtype_from_name(const char *name);
/* "torch.bool, torch.uint8, ... or torch.float64" (every such name) written into buf of
 * n bytes (cut short if it does not fit): for messages. Returns buf. */
const char *td_py_dtype_list(char *buf, size_t n);
/* FNV-1a of a NUL-terminated text: both loaders dedupe a NonTensorStack's texts. */
uint64_t td_py_text_hash(const char *s);

/* ---- memmap (dict_memmap.c, dict_memmap_load.c): what saving and loading share ---- */
enum {
  TD_MM_MAX_DEPTH = 256,           /* nested folders, either way */
  TD_MM_FORMAT_VERSION = 1,        /* Python tensordict's "_format_version" */
  TD_MM_NAME_MAX = 255             /* bytes of one file name */
};
#define TD_MM_TYPE_TD "<class 'tensordict._td.TensorDict'>"
#define TD_MM_CLASS_TD "tensordict:TensorDict"
#define TD_MM_TYPE_NTD "<class 'tensordict.tensorclass.NonTensorData'>"
#define TD_MM_TYPE_NTS "<class 'tensordict.tensorclass.NonTensorStack'>"
#define TD_MM_CLASS_NTS "tensordict:NonTensorStack"
#define TD_MM_TYPE_LS "<class 'tensordict._lazy.LazyStackedTensorDict'>"
#define TD_MM_CLASS_LS "tensordict:LazyStackedTensorDict"
/* The file-name form of a key, as Python tensordict writes it (%XX for / < > : " | ? *
 * \ space % and control characters, "%" for the empty key, "%2E" for each dot of "."
 * and ".."), followed by suffix: a malloc'd string, NULL when out of memory. */
char *td_mm_encode_key(const char *key, int64_t len, const char *suffix);
/* The raw (legacy, robust_key=False) file name of a key, key + suffix, malloc'd, where
 * Python's loader would try it (dict_pyformat.c says when); NULL where it would not, or
 * with *oom set when out of memory. folder: the name of a sub-folder (no suffix). */
char *td_mm_legacy_name(const char *key, int64_t len, const char *suffix, bool folder,
                        bool *oom);
/* A file storage of nbytes mapped from an open file (shared mapping; writable or
 * read-only, as the storage reports); nbytes 0 maps nothing. On failure returns NULL
 * and writes a reason (strerror) into why. The caller closes fd. */
td_storage *td_mm_map_fd(int fd, int64_t nbytes, int32_t writable, char *why, size_t why_len);
/* The parsed meta.json of folder dirfd (file: its path, for messages), read with a size
 * cap and checked to be a JSON object; NULL with the error set ("load_memmap: ..."). */
cJSON *td_mm_read_meta(int dirfd, const char *file);
/* dir + "/" + name, malloc'd; NULL when out of memory. */
char *td_mm_path_join(const char *dir, const char *name);

/* A save: planned in memory by dict_memmap.c (folders, files, meta.json texts), then
 * written by dict_memmap_disk.c. Folder 0 is the root (prefix itself). */
typedef struct td_mm_dir {
  int32_t parent; /* -1: the root (the temporary folder) */
  char *name;     /* in the parent folder */
  char *rel;      /* from the root ("." for the root itself) */
  char *path;     /* the final path: messages and memmap prefixes */
} td_mm_dir;

typedef struct td_mm_job {
  int32_t dir;
  char *name;
  char *path;           /* final path, for messages */
  const td_tensor *leaf; /* NULL: a meta.json of text */
  char *text;
  size_t text_len;
  int64_t nbytes;
  td_storage *mapped;   /* a leaf's file, mapped read-write once written */
  int32_t status;
  char *msg;
} td_mm_job;

/* What the walk met, in walk order: for a tensor leaf its job (-1: no file, zero
 * elements), for a nested container its folder. The result is built by walking again. */
typedef struct td_mm_mark {
  int32_t index;
  td_tensor *t; /* a tensor leaf's new header over its mapping */
} td_mm_mark;

/* Where a save's temporary folder is (td_mm_begin) and where it goes (td_mm_end). */
typedef struct td_mm_place {
  char *prefix;             /* as given, for messages */
  char *target;             /* the folder that is replaced (a link at prefix resolved);
                               cut into parent and name */
  const char *name, *parent;
  int parentfd;
  bool made;                /* the temporary folder exists and is not swapped in */
  char tmp[TD_MM_NAME_MAX + 64], old[TD_MM_NAME_MAX + 64];
} td_mm_place;

typedef struct td_mm_save {
  const char *call;
  int32_t flags;
  bool like;
  bool adopt; /* leaf files exist in the temporary folder: trim and sync them, no mapping */
  td_mm_dir *dirs;
  int32_t ndirs, dcap;
  td_mm_job *jobs;
  int32_t njobs, jcap;
  td_mm_mark *marks;
  int32_t nmarks, mcap;
  atomic_int failed;
  int rootfd; /* the temporary folder, while it is written */
  td_mm_place place;
} td_mm_save;
/* Writes S's folders and files into a temporary sibling of prefix (a cleaned path),
 * fsyncs them unless TD_MEMMAP_NO_FSYNC, and swaps the result in at prefix; each leaf
 * job's file ends mapped read-write in its `mapped`. 0 or a negative code. */
int32_t td_mm_write(td_mm_save *S, const char *prefix, int32_t num_threads);
/* td_mm_write in steps. begin: the checks of prefix (existsok, what is there), missing
 * parents, stale temporaries removed, the empty temporary folder made and open in
 * S->rootfd. make_dirs: the planned sub-folders from index from (>= 1) on. end: the jobs
 * run, everything synced, the folder swapped in at prefix; the place is released either
 * way. cancel: the temporary folder removed and the place released (idempotent). */
int32_t td_mm_begin(td_mm_save *S, const char *prefix);
int32_t td_mm_make_dirs(td_mm_save *S, int32_t from);
int32_t td_mm_end(td_mm_save *S, int32_t num_threads);
void td_mm_cancel(td_mm_save *S);
/* The plan of a save of d at prefix (a path from td_mm_clean_prefix) into S: folders,
 * leaf files, meta.json texts (d NULL: the root folder only, to plan into). */
int32_t td_mm_plan(td_mm_save *S, const td_dict *d, const char *prefix);
/* Plan pieces (dict_memmap.c), shared with the saves of lazy stacks and tensorclasses
 * (dict_memmap_wrapped.c). add_dir: a new folder under parent (name taken over): its
 * index or a negative code. add_meta: a meta.json job for folder dir from a cJSON tree
 * (deleted). plan_dict: d's folder dir planned (its files, sub-folders and meta.json).
 * make_leaves and build, after the write: the mapped leaves' headers, then a container
 * of d's structure over them, walking in the plan's order from mark *k. */
int32_t td_mm_add_dir(td_mm_save *S, int32_t parent, char *name);
int32_t td_mm_add_meta(td_mm_save *S, int32_t dir, cJSON *root, bool compact, const char *what);
int32_t td_mm_plan_dict(td_mm_save *S, const td_dict *d, int32_t dir, const td_key_path *at,
                        int32_t depth);
int32_t td_mm_make_leaves(td_mm_save *S, const td_dict *d, int32_t *k);
td_dict *td_mm_build(td_mm_save *S, const td_dict *d, int32_t dir, int32_t *k);
/* A lazy stack's members (dict_memmap_wrapped.c): at least one, the same number of batch
 * dims, stack_dim in [0, ndim]. 0 or the error, naming call. */
int32_t td_mm_check_stack(const char *call, td_dict *const *members, int32_t n,
                          int32_t stack_dim);
/* What the plain loaders return from a *_any load (dict_memmap_wrapped.c): d when it is
 * a TensorDict (stack_dim < 0); a lazy stack's holder is released and refused, naming
 * call ("load_memmap", "from_consolidated") and path. */
td_dict *td_mm_only_dict(td_dict *d, int32_t stack_dim, const char *call, const char *path);
/* prefix without trailing slashes, checked (empty, "." and ".." refused): malloc'd, or
 * NULL with the error set. */
char *td_mm_clean_prefix(const char *call, const char *prefix);
void td_mm_save_free(td_mm_save *S);
/* "<call>: out of memory" for a save: planning and writing fail the same way. */
int32_t td_mm_oom(const td_mm_save *S);

#endif
