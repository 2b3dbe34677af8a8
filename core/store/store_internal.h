/*
 * store_internal.h: what the files of core/store share: Python tensordict's formats
 * (pyformat.c) and the plan of a memmap save (memmap.c, memmap_disk.c,
 * memmap_wrapped.c). The store floor sits above the containers (core/dict): it saves
 * and loads them; nothing below it reads or writes files. Not part of the ABI.
 */
#ifndef TD_STORE_INTERNAL_H
#define TD_STORE_INTERNAL_H

#include "../dict/dict_internal.h"
#include "fs.h"
#include "memmap_format.h"
#include "temp_owner.h"

/* ---- Python tensordict's formats (pyformat.c): what the memmap folders and the
 * consolidated file (consolidate_*.c) share, so both write the bytes Python writes ---- */
/* "torch.float32" for TD_FLOAT32 (NULL outside the dtypes); the dtype of such a name, or -1. */
const char *td_py_dtype_name(int32_t dtype);
int32_t td_py_dtype_from_name(const char *name);
/* "torch.bool, torch.uint8, ... or torch.float64" (every such name) written into buf of
 * n bytes (cut short if it does not fit): for messages. Returns buf. */
const char *td_py_dtype_list(char *buf, size_t n);
/* FNV-1a of a NUL-terminated text: both loaders dedupe a NonTensorStack's texts. */
uint64_t td_py_text_hash(const char *s);

/* ---- CSV (csv.c; the reader's own internals: csv_internal.h) ---- */
/* The size of a reader's first buffer, 1 MiB: the fuzz target (tests/fuzz/fuzz_csv.c)
 * lowers it so that records cross the buffer's end (a refill, a record parsed again)
 * in inputs of a few bytes. Nothing else changes it. */
extern int64_t td_csv_block_bytes;

/* ---- memmap (memmap.c, memmap_load.c): what saving and loading share ---- */
/* The file-name form of a key, as Python tensordict writes it (%XX for / < > : " | ? *
 * \ space % and control characters, "%" for the empty key, "%2E" for each dot of "."
 * and ".."), followed by suffix: a malloc'd string, NULL when out of memory. */
char *td_mm_encode_key(const char *key, int64_t len, const char *suffix);
/* The raw (legacy, robust_key=False) file name of a key, key + suffix, malloc'd, where
 * Python's loader would try it (pyformat.c says when); NULL where it would not, or
 * with *oom set when out of memory. folder: the name of a sub-folder (no suffix). */
char *td_mm_legacy_name(const char *key, int64_t len, const char *suffix, bool folder,
                        bool *oom);
/* The parsed meta.json of folder dirfd (file: its path, for messages), read with a size
 * cap and checked to be a JSON object; NULL with the error set ("load_memmap: ..."). */
cJSON *td_mm_read_meta(int dirfd, const char *file);
/* dir + "/" + name, malloc'd; NULL when out of memory. */
char *td_mm_path_join(const char *dir, const char *name);

/* A save: planned in memory by memmap.c (folders, files, meta.json texts), then
 * written by memmap_disk.c. Folder 0 is the root (prefix itself). */
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
/* The first part of begin alone: prefix checked (existsok, what is there), its parent
 * made and opened (P->parentfd, P->name), nothing made beside it: for an append that
 * reopens a folder it left there (append.c). 0 or the error, the place released. */
int32_t td_mm_locate(td_mm_save *S, const char *prefix);
int32_t td_mm_make_dirs(td_mm_save *S, int32_t from);
int32_t td_mm_end(td_mm_save *S, int32_t num_threads);
void td_mm_cancel(td_mm_save *S);
/* The plan of a save of d at prefix (a path from td_mm_clean_prefix) into S: folders,
 * leaf files, meta.json texts (d NULL: the root folder only, to plan into). */
int32_t td_mm_plan(td_mm_save *S, const td_dict *d, const char *prefix);
/* Plan pieces (memmap.c), shared with the saves of lazy stacks and tensorclasses
 * (memmap_wrapped.c). add_dir: a new folder under parent (name taken over): its
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
/* A lazy stack's members (memmap_wrapped.c): at least one, the same number of batch
 * dims, stack_dim in [0, ndim]. 0 or the error, naming call. */
int32_t td_mm_check_stack(const char *call, td_dict *const *members, int32_t n,
                          int32_t stack_dim);
/* What the plain loaders return from a *_any load (memmap_wrapped.c): d when it is
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
