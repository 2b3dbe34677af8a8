/*
 * append.c: memmap folders that grow by appended batches (flow.MemmapSink) and
 * preallocated ones of a batch's structure with another row count (flow.ReplayBuffer).
 *
 * An append is a save (memmap.c, memmap_disk.c) stretched over many calls:
 *  - open: td_mm_begin checks the prefix (existsok), removes stale temporaries of dead
 *    processes and makes the empty temporary sibling `.<name>.tmp-<pid>-<n>-<owner>`;
 *  - the first batch fixes the structure: its folders and leaf files are planned from a
 *    one-row copy of its shape and made in the temporary folder, each file kept open;
 *  - every batch is checked whole against the first (keys, dtypes, dims after the first)
 *    before any byte moves, then each leaf's bytes go to the end of its file with write()
 *    (the plain sequential write a raw writer would do). Files grow by doubling a
 *    capacity in rows with ftruncate (sparse, so it costs no writes);
 *  - commit plans the same structure with the final row count (so meta.json is what
 *    td_dict_memmap writes for such a container), trims each file to its size, syncs
 *    it, writes the meta.json files and ends the save: folders synced, renamed over the
 *    prefix as every save is.
 * Until commit the temporary folder has no meta.json: nothing claims to be complete, and
 * the next open of the prefix in any process removes it once its process is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_internal.h"

enum { APPEND_OPEN = 0, APPEND_BROKEN = 1, APPEND_DONE = 2 };

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
};

/* ------------------------------------------------------------ structure copies */

/* A leaf of d's structure with `rows` along dim 0: a zero-stride view over the same
 * storage. Only shapes and dtypes are read from it (a save plan, a memmap_like): it
 * never reaches Lua. */
static int32_t rows_view(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  td_header_copy(out, in);
  out->shape[0] = *(const int64_t *)op->ctx;
  out->strides[0] = 0;
  return TD_LEAF_VIEW;
}

/* Stacked non-tensor values (one per row) have no place in a growing file. */
static int32_t check_values(const char *call, const td_dict *d, const td_key_path *at) {
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    td_key_path here = {at, td_dict_key(d, i)};
    char buf[TD_PATH_CHARS];
    if (e->kind == TD_ENTRY_VALUES)
      return td_fail(TD_EINVAL,
                     "%s: key '%s' holds one non-tensor value per row (a NonTensorStack), "
                     "which cannot be appended; drop it or make it a tensor",
                     call, td_key_path_text(&here, buf));
    if (e->kind == TD_ENTRY_DICT) {
      int32_t st = check_values(call, e->child, &here);
      if (st) return st;
    }
  }
  return 0;
}

static td_dict *with_rows(const char *call, const td_dict *d, int64_t rows) {
  if (d->head.ndim < 1)
    return td_fail_null(TD_ESHAPE, "%s: a batch needs at least one batch dim (rows), got "
                        "batch size []", call);
  if (check_values(call, d, NULL)) return NULL;
  td_leaf_op op = {.call = call, .fn = rows_view, .op_ndim = 1, .ctx = &rows};
  return td_dict_map(d, &op, 1, &rows);
}

TD_EXPORT td_dict *td_dict_memmap_rows_like(const td_dict *d, int64_t rows, const char *prefix,
                                            int32_t flags, int32_t num_threads) {
  if (!d) return td_fail_null(TD_EINVAL, "memmap_like: the TensorDict is NULL");
  if (rows < 0)
    return td_fail_null(TD_EINVAL, "memmap_like: rows must be >= 0, got %lld", (long long)rows);
  td_dict *shape = with_rows("memmap_like", d, rows);
  if (!shape) return NULL;
  td_dict *r = td_dict_memmap_like(shape, prefix, flags, num_threads);
  td_dict_release(shape);
  return r;
}

/* ------------------------------------------------------------------------ open */

TD_EXPORT td_memmap_append *td_memmap_append_open(const char *prefix, int32_t flags) {
  if (flags & ~(TD_MEMMAP_EXISTSOK | TD_MEMMAP_NO_FSYNC))
    return td_fail_null(TD_EINVAL, "append: unknown flags %d", (int)flags);
  td_memmap_append *a = calloc(1, sizeof *a);
  if (!a) return td_fail_null(TD_ENOMEM, "append: out of memory");
  a->stage = (td_mm_save){.call = "append", .flags = flags, .rootfd = -1};
  a->stage.place.parentfd = -1;
  if (!(a->prefix = td_mm_clean_prefix("append", prefix)) ||
      td_mm_begin(&a->stage, a->prefix) != 0) {
    free(a->prefix);
    free(a);
    return NULL;
  }
  return a;
}

/* ------------------------------------------------------------------- the batches */

static void shape_text(char *buf, size_t n, const td_tensor *t) {
  size_t o = (size_t)snprintf(buf, n, "[");
  for (int32_t i = 0; i < t->ndim && o < n; i++)
    o += (size_t)snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  if (o < n) snprintf(buf + o, n - o, "]");
}

static void batch_text(char *buf, size_t n, const td_dict *d) {
  size_t o = (size_t)snprintf(buf, n, "[");
  for (int32_t i = 0; i < d->head.ndim && o < n; i++)
    o += (size_t)snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)d->head.shape[i]);
  if (o < n) snprintf(buf + o, n - o, "]");
}

/* Every difference between batch b and f (the first batch, or a buffer: what) that would
 * make them disagree as rows of one container: keys, kinds, dtypes, devices, the dims
 * after the first, values. The messages name the key and both shapes. */
static int32_t check_like(const td_dict *f, const td_dict *b, const td_key_path *at,
                          const char *what) {
  char p[TD_PATH_CHARS], s1[256], s2[256];
  if (b->head.ndim < 1)
    return td_fail(TD_ESHAPE, "a batch needs at least one batch dim (rows), got batch size []");
  if (b->head.ndim != f->head.ndim ||
      memcmp(b->head.shape + 1, f->head.shape + 1, sizeof(int64_t) * (size_t)(f->head.ndim - 1))) {
    batch_text(s1, sizeof s1, b), batch_text(s2, sizeof s2, f);
    if (at)
      return td_fail(TD_ESHAPE, "key '%s': batch size %s does not match %s of %s (the dims "
                     "after the first must be equal)", td_key_path_text(at, p), s1, s2, what);
    return td_fail(TD_ESHAPE, "batch size %s does not match %s of %s (the dims after the "
                   "first must be equal)", s1, s2, what);
  }
  for (int32_t i = 0; i < b->keys->n; i++)
    if (td_dict_find_like(f, b, i) < 0) {
      td_key_path here = {at, td_dict_key(b, i)};
      return td_fail(TD_EINVAL, "key '%s' is not in %s", td_key_path_text(&here, p), what);
    }
  for (int32_t i = 0; i < f->keys->n; i++) {
    td_key_path here = {at, td_dict_key(f, i)};
    int32_t j = td_dict_find_like(b, f, i);
    if (j < 0)
      return td_fail(TD_EINVAL, "key '%s' of %s is missing", td_key_path_text(&here, p), what);
    const td_entry *fe = &f->entries[i], *be = &b->entries[j];
    if (be->kind == TD_ENTRY_VALUES)
      return td_fail(TD_EINVAL,
                     "key '%s' holds one non-tensor value per row (a NonTensorStack), which "
                     "cannot be appended; drop it or make it a tensor",
                     td_key_path_text(&here, p));
    if (fe->kind != be->kind) {
      static const char *kinds[] = {"a tensor", "a TensorDict", "a non-tensor value",
                                    "non-tensor values"};
      return td_fail(TD_EINVAL, "key '%s' is %s here but %s in %s", td_key_path_text(&here, p),
                     kinds[be->kind & 3], kinds[fe->kind & 3], what);
    }
    if (fe->kind == TD_ENTRY_DICT) {
      int32_t st = check_like(fe->child, be->child, &here, what);
      if (st) return st;
    } else if (fe->kind == TD_ENTRY_VALUE) {
      if (strcmp(fe->values->texts[0], be->values->texts[0]) != 0)
        return td_fail(TD_EINVAL, "key '%s': the non-tensor value %.60s differs from %.60s in "
                       "%s (one value is kept per key)", td_key_path_text(&here, p),
                       be->values->texts[0], fe->values->texts[0], what);
    } else {
      const td_tensor *ft = &fe->t, *bt = &be->t;
      if (bt->dtype != ft->dtype)
        return td_fail(TD_EINVAL, "key '%s' is %s but %s in %s", td_key_path_text(&here, p),
                       td_dtype_name(bt->dtype), td_dtype_name(ft->dtype), what);
      if (bt->storage && bt->storage->device_type != TD_DEVICE_CPU)
        return td_fail(TD_EINVAL, "key '%s' is on cuda:%d: copy it to the CPU first",
                       td_key_path_text(&here, p), (int)bt->storage->device_index);
      if (bt->ndim != ft->ndim ||
          memcmp(bt->shape + 1, ft->shape + 1, sizeof(int64_t) * (size_t)(ft->ndim - 1))) {
        shape_text(s1, sizeof s1, bt), shape_text(s2, sizeof s2, ft);
        return td_fail(TD_ESHAPE, "key '%s': shape %s does not match %s of %s (the dims after "
                       "the first must be equal)", td_key_path_text(&here, p), s1, s2, what);
      }
    }
  }
  return 0;
}

TD_EXPORT int32_t td_dict_check_rows_like(const td_dict *ref, const td_dict *batch,
                                          const char *what) {
  if (!ref || !batch) return td_fail(TD_EINVAL, "check_rows_like: NULL argument");
  if (ref->head.ndim < 1)
    return td_fail(TD_ESHAPE, "%s has batch size []: no rows", what ? what : "the reference");
  return check_like(ref, batch, NULL, what ? what : "the reference");
}

/* The files of the first batch's leaves, made in the temporary folder (walk order). */
static int32_t count_leaves(const td_dict *d) {
  int32_t n = 0;
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_DICT) n += count_leaves(e->child);
    else if (e->kind == TD_ENTRY_TENSOR) n++;
  }
  return n;
}

/* Walks d as the plan did (its marks: one per nested container and per tensor leaf),
 * opening each leaf's file. */
static int32_t open_leaves(td_memmap_append *a, const td_dict *d, int32_t *mark, int32_t *leaf) {
  td_mm_save *S = &a->stage;
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_DICT) {
      (*mark)++;
      int32_t st = open_leaves(a, e->child, mark, leaf);
      if (st) return st;
    } else if (e->kind == TD_ENTRY_TENSOR) {
      int32_t job = S->marks[(*mark)++].index;
      append_leaf *l = &a->leaves[(*leaf)++];
      l->row_bytes = job < 0 ? 0 : S->jobs[job].nbytes; /* planned with one row */
      if (job < 0) continue;
      td_mm_job *j = &S->jobs[job];
      int dfd = j->dir == 0 ? S->rootfd
                            : openat(S->rootfd, S->dirs[j->dir].rel,
                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      l->fd = dfd < 0 ? -1
                      : openat(dfd, j->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                               0666);
      if (dfd >= 0 && dfd != S->rootfd) close(dfd);
      if (l->fd < 0)
        return td_fail(TD_EIO, "append: %s: cannot create the file: %s", j->path, strerror(errno));
    }
  }
  return 0;
}

static int32_t start(td_memmap_append *a, const td_dict *batch) {
  td_dict *one = with_rows("append", batch, 1);
  if (!one) return td_last_status();
  int32_t st = td_mm_plan(&a->stage, one, a->prefix);
  td_dict_release(one);
  if (!st) st = td_mm_make_dirs(&a->stage, 1);
  if (st) return st;
  a->nleaves = count_leaves(batch);
  a->leaves = calloc((size_t)a->nleaves + 1, sizeof *a->leaves);
  if (!a->leaves) return td_fail(TD_ENOMEM, "append: out of memory");
  for (int32_t i = 0; i < a->nleaves; i++) a->leaves[i].fd = -1;
  int32_t mark = 0, leaf = 0;
  if ((st = open_leaves(a, batch, &mark, &leaf))) return st;
  td_dict_retain((td_dict *)batch);
  a->first = (td_dict *)batch;
  return 0;
}

/* Room for rows more: capacity doubles (sparse files: ftruncate writes nothing). */
static int32_t reserve(td_memmap_append *a, int64_t rows) {
  if (rows <= a->cap) return 0;
  int64_t cap = a->cap ? a->cap : 16;
  while (cap < rows) cap = cap > INT64_MAX / 2 ? rows : 2 * cap;
  for (int32_t i = 0; i < a->nleaves; i++) {
    append_leaf *l = &a->leaves[i];
    int64_t bytes;
    if (l->fd < 0) continue;
    if (__builtin_mul_overflow(cap, l->row_bytes, &bytes))
      return td_fail(TD_ESHAPE, "append: %lld rows are too many for a file", (long long)cap);
    if (ftruncate(l->fd, bytes) != 0)
      return td_fail(TD_EIO, "append: cannot grow a file of '%s' to %lld bytes: %s", a->prefix,
                     (long long)bytes, strerror(errno));
  }
  a->cap = cap;
  return 0;
}

static int32_t write_leaves(td_memmap_append *a, const td_dict *f, const td_dict *b,
                            int32_t *leaf, const td_key_path *at) {
  for (int32_t i = 0; i < f->keys->n; i++) {
    const td_entry *fe = &f->entries[i];
    if (fe->kind != TD_ENTRY_DICT && fe->kind != TD_ENTRY_TENSOR) continue;
    const td_entry *be = &b->entries[td_dict_find_like(b, f, i)];
    td_key_path here = {at, td_dict_key(f, i)};
    if (fe->kind == TD_ENTRY_DICT) {
      int32_t st = write_leaves(a, fe->child, be->child, leaf, &here);
      if (st) return st;
      continue;
    }
    append_leaf *l = &a->leaves[(*leaf)++];
    if (l->fd < 0) continue;
    int32_t status = TD_EIO;
    td_clear_error();
    if (!td_fs_write_tensor(l->fd, &be->t, &a->buf, &status)) {
      char p[TD_PATH_CHARS];
      if (status != TD_EIO) return td_dict_fail_at(status, "append", &here);
      return td_fail(TD_EIO, "append: key '%s': cannot write %lld bytes: %s",
                     td_key_path_text(&here, p), (long long)(l->row_bytes * be->t.shape[0]),
                     strerror(errno));
    }
  }
  return 0;
}

static int32_t refuse_state(const td_memmap_append *a, const char *call) {
  return td_fail(TD_EINVAL, "%s: '%s' is %s", call, a->prefix,
                 a->state == APPEND_DONE ? "committed or aborted already"
                                         : "broken by an earlier failed write (abort it)");
}

TD_EXPORT int32_t td_memmap_append_write(td_memmap_append *a, const td_dict *batch) {
  if (!a || !batch) return td_fail(TD_EINVAL, "append: NULL argument");
  if (a->state != APPEND_OPEN) return refuse_state(a, "append");
  if (batch->head.ndim < 1)
    return td_fail(TD_ESHAPE, "a batch needs at least one batch dim (rows), got batch size []");
  int32_t st;
  if (!a->first) {
    if ((st = check_values("append", batch, NULL))) return st;
    if ((st = start(a, batch))) {
      a->state = APPEND_BROKEN;
      return st;
    }
  }
  if ((st = check_like(a->first, batch, NULL, "the first batch"))) return st; /* nothing moved: still usable */
  int64_t n = batch->head.shape[0];
  if (n == 0) return 0;
  int32_t leaf = 0;
  if ((st = reserve(a, a->rows + n)) || (st = write_leaves(a, a->first, batch, &leaf, NULL))) {
    a->state = APPEND_BROKEN; /* files hold part of the batch now */
    return st;
  }
  a->rows += n;
  return 0;
}

TD_EXPORT int64_t td_memmap_append_rows(const td_memmap_append *a) { return a ? a->rows : 0; }

/* ----------------------------------------------------------------------- the end */

static void close_leaves(td_memmap_append *a) {
  for (int32_t i = 0; i < a->nleaves; i++)
    if (a->leaves[i].fd >= 0) close(a->leaves[i].fd), a->leaves[i].fd = -1;
}

/* Removes the staged leaf files that the final plan has no job for (no rows at all:
 * Python writes no file for a leaf without elements). */
static void drop_empty(td_memmap_append *a, const td_mm_save *F) {
  td_mm_save *S = &a->stage;
  for (int32_t k = 0; k < S->njobs; k++) {
    const td_mm_job *j = &S->jobs[k];
    if (!j->leaf) continue;
    bool kept = false;
    for (int32_t m = 0; m < F->njobs && !kept; m++)
      kept = F->jobs[m].leaf && F->jobs[m].dir == j->dir && !strcmp(F->jobs[m].name, j->name);
    if (kept) continue;
    int dfd = j->dir == 0 ? S->rootfd
                          : openat(S->rootfd, S->dirs[j->dir].rel,
                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) unlinkat(dfd, j->name, 0);
    if (dfd >= 0 && dfd != S->rootfd) close(dfd);
  }
}

TD_EXPORT int32_t td_memmap_append_commit(td_memmap_append *a, int32_t num_threads) {
  if (!a) return td_fail(TD_EINVAL, "commit: NULL argument");
  if (a->state != APPEND_OPEN) return refuse_state(a, "commit");
  close_leaves(a);
  /* The final plan: the first batch's structure with every row written (no batch: an
   * empty container of batch size [0]). */
  int64_t zero = 0;
  td_dict *shape = a->first ? with_rows("commit", a->first, a->rows) : td_dict_new(1, &zero);
  td_mm_save F = {.call = "commit", .flags = a->stage.flags, .like = true, .adopt = true,
                  .rootfd = -1};
  int32_t st = shape ? td_mm_plan(&F, shape, a->prefix) : td_last_status();
  if (!st) {
    drop_empty(a, &F);
    /* The temporary folder moves to the final plan, which ends the save. */
    F.place = a->stage.place;
    F.rootfd = a->stage.rootfd;
    a->stage.place = (td_mm_place){.parentfd = -1};
    a->stage.rootfd = -1;
    st = td_mm_end(&F, num_threads);
  } else {
    td_mm_cancel(&a->stage);
  }
  td_mm_save_free(&F);
  td_dict_release(shape); /* after the jobs: they point at its leaves */
  a->state = APPEND_DONE;
  return st;
}

TD_EXPORT void td_memmap_append_abort(td_memmap_append *a) {
  if (!a) return;
  close_leaves(a);
  td_mm_cancel(&a->stage);
  a->state = APPEND_DONE;
}

TD_EXPORT void td_memmap_append_free(td_memmap_append *a) {
  if (!a) return;
  td_memmap_append_abort(a);
  td_mm_save_free(&a->stage);
  td_dict_release(a->first);
  td_storage_release(a->buf);
  free(a->leaves);
  free(a->prefix);
  free(a);
}
