/*
 * append_internal.h: an append's state, shared by append.c (one process's append, its
 * checkpoints and resume) and append_ranks.c (the ranks of a data-parallel run writing
 * one folder together).
 */
#ifndef TD_APPEND_INTERNAL_H
#define TD_APPEND_INTERNAL_H

#include "store_internal.h"

enum { APPEND_OPEN = 0, APPEND_BROKEN = 1, APPEND_DONE = 2 };

/* A checkpointed append's entries (tensordict.h): "%" and a letter that is no hex digit
 * begin no key's file name. */
#define CKPT_SUFFIX ".checkpoint"        /* the folder: `.<name>.checkpoint` */
#define CKPT_RECORD "%checkpoint"        /* the last checkpoint */
#define CKPT_NEXT "%checkpoint.next"     /* the one being staged */
#define CKPT_OLD "%checkpoint.old"       /* the spare name of a swap */
#define CKPT_STRUCTURE "%structure"      /* the first batch's structure, 0 rows */
#define CKPT_LOCK "%lock"                /* flocked while the append is open */
#define CKPT_ROWS "append.json"          /* in a checkpoint: {"rows": n} */

typedef struct append_leaf {
  int fd;            /* -1: no file (a leaf without elements per row) */
  int64_t row_bytes;
} append_leaf;

struct td_memmap_append {
  td_mm_save stage;  /* the staging plan; its place is the temporary folder */
  char *prefix;      /* cleaned */
  td_dict *first;    /* the first batch: structure, dtypes, trailing shapes */
  append_leaf *leaves;
  int32_t nleaves;
  int64_t rows, cap; /* rows written; rows the files hold room for */
  int32_t state;
  td_storage *buf;   /* gathering block for strided leaves */
  int64_t ckpt_rows; /* the last checkpoint's rows; -1 before the first */
  int lockfd;        /* "%lock", flocked while a checkpointed append is open; -1 */
  char *path;        /* the temporary folder (renamed at the first checkpoint) */
  char *stage_path, *ckpt_path;
  /* Data-parallel (append_ranks.c): shared, the folder's files are written by several
   * processes, each at its own rows (from row `offset` on): folders and files are made
   * when missing and never cut, so no rank's ftruncate drops another's bytes. joined:
   * the folder is another process's append (the owner commits it; this one only syncs
   * its own writes). */
  bool shared, joined;
  int64_t offset;
};

/* append.c's pieces that append_ranks.c uses. start: the first batch fixes the structure
 * (keep >= 0: resume's files cut back to keep rows). check_like: what td_dict_check_rows_like
 * checks. close_leaves: every leaf file closed. reserve: below. refuse_state: the error of a call on an
 * append that is done or broken. */
int32_t td_append_start(td_memmap_append *a, const td_dict *batch, int64_t keep);
int32_t td_append_check_like(const td_dict *f, const td_dict *b, const td_key_path *at,
                             const char *what);
void td_append_close_leaves(td_memmap_append *a);
/* The tensor leaves of d's entries before entry j (walk order: an append's leaf index). */
int32_t td_append_leaves_before(const td_dict *d, int32_t j);
/* Room in the files for rows rows (capacity doubles; a shared append's files grow by
 * its writes). */
int32_t td_append_reserve(td_memmap_append *a, int64_t rows);
int32_t td_append_refuse_state(const td_memmap_append *a, const char *call);
/* The planned folders of a shared append, made where no other rank made them yet. */
int32_t td_append_make_dirs_shared(td_memmap_append *a);
/* A joined append's commit (append_ranks.c): its leaf files synced and closed. */
int32_t td_append_commit_joined(td_memmap_append *a);

#endif
