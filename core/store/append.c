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
 *
 * Checkpoints (resumable runs, tensordict.h): the first one renames the temporary folder
 * to `.<name>.checkpoint`, which no sweep removes, and takes the flock of its "%lock";
 * each one syncs the leaf files and swaps a staged folder in as "%checkpoint" (the
 * caller's files, and "append.json" with the row count). Resume reopens that folder:
 * the plan is rebuilt from "%structure" (a 0-row save of the first batch, written with
 * the first checkpoint), files are cut back to the checkpoint's rows, and whatever a
 * killed process left that the plan does not name is removed. The final commit removes
 * the checkpoint's entries, so the committed folder is byte for byte an uninterrupted
 * append's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/json.h"
#include "append_internal.h"

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

/* ----------------------------------------------------------------- checkpoints */

/* `.<name>.checkpoint`, the folder of a checkpointed append beside name; false when the
 * name does not fit in one file name. */
static bool checkpoint_name(char *out, size_t cap, const char *name) {
  int n = snprintf(out, cap, ".%s" CKPT_SUFFIX, name);
  return n >= 0 && (size_t)n < cap && (size_t)n <= TD_MM_NAME_MAX;
}

/* The rows the checkpoint of folder dirfd records; -1 when it records none. */
static int64_t recorded_rows(int dirfd) {
  int fd = openat(dirfd, CKPT_RECORD "/" CKPT_ROWS, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  td_json_error err;
  cJSON *root = td_json_read(buf, (size_t)n, 0, &err);
  const cJSON *r = root ? td_json_get(root, "rows") : NULL;
  int64_t rows = -1;
  if (!r || td_json_int64(r, &rows) != 1 || rows < 0) rows = -1;
  cJSON_Delete(root);
  return rows;
}

/* Takes the lock of checkpoint folder dirfd ("%lock", made when missing) into *lockfd;
 * refuses, naming the prefix, when another open file holds it. */
static int32_t take_lock(int dirfd, const char *call, const char *prefix, int *lockfd) {
  int fd = openat(dirfd, CKPT_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0)
    return td_fail(TD_EIO, "%s: cannot open the checkpoint's lock beside '%s': %s", call,
                   prefix, strerror(errno));
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    int e = errno;
    close(fd);
    if (e == EWOULDBLOCK)
      return td_fail(TD_EIO, "%s: the checkpoint of '%s' is in use by another process (a run "
                     "writing or resuming it)", call, prefix);
    return td_fail(TD_EIO, "%s: cannot lock the checkpoint of '%s': %s", call, prefix,
                   strerror(e));
  }
  *lockfd = fd;
  return 0;
}

/* The temporary folder's path, kept for Lua (it moves at the first checkpoint). */
static int32_t set_path(td_memmap_append *a) {
  const td_mm_place *P = &a->stage.place;
  free(a->path);
  if (!(a->path = td_mm_path_join(P->parent, P->tmp)))
    return td_fail(TD_ENOMEM, "append: out of memory");
  return 0;
}

/* A fresh append and the checkpoint folder of an earlier one beside its prefix: one that
 * another process holds refuses; one with a checkpoint refuses unless existsok, which
 * removes it; one without (its process died before its first checkpoint completed) is
 * removed. The lock is held while it is removed. */
static int32_t clear_checkpoint(td_memmap_append *a) {
  const td_mm_place *P = &a->stage.place;
  char name[TD_MM_NAME_MAX + 64];
  if (!checkpoint_name(name, sizeof name, P->name)) return 0; /* none can exist */
  int dfd = openat(P->parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return 0;
  int lockfd = -1;
  int32_t st = take_lock(dfd, "append", a->prefix, &lockfd);
  int64_t rows = st ? -1 : recorded_rows(dfd);
  close(dfd);
  if (!st && rows >= 0 && !(a->stage.flags & TD_MEMMAP_EXISTSOK))
    st = td_fail(TD_EIO, "append: '%s' has a checkpoint of an unfinished append (%lld rows): "
                 "resume it, or pass existsok to start over", a->prefix, (long long)rows);
  if (!st && td_fs_rm_tree(P->parentfd, name) != 0)
    st = td_fail(TD_EIO, "append: cannot remove the old checkpoint beside '%s': %s", a->prefix,
                 strerror(errno));
  if (lockfd >= 0) close(lockfd);
  return st;
}

TD_EXPORT int64_t td_memmap_append_checkpoint_rows(const char *prefix) {
  char *clean = td_mm_clean_prefix("checkpoint_rows", prefix);
  if (!clean) return td_last_status();
  /* A link at prefix names the folder a commit replaces: the checkpoint is beside it. */
  struct stat st;
  char *target = lstat(clean, &st) == 0 && S_ISLNK(st.st_mode) ? realpath(clean, NULL) : NULL;
  const char *path = target ? target : clean, *slash = strrchr(path, '/');
  char *dir = td_fs_dir_of(path), name[TD_MM_NAME_MAX + 64];
  int64_t rows = -1;
  int pfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (pfd >= 0 && checkpoint_name(name, sizeof name, slash ? slash + 1 : path)) {
    int dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) {
      rows = recorded_rows(dfd);
      close(dfd);
    }
  }
  if (pfd >= 0) close(pfd);
  free(dir);
  free(target);
  free(clean);
  return rows;
}

TD_EXPORT const char *td_memmap_append_path_borrow(const td_memmap_append *a) {
  return a && a->state != APPEND_DONE ? a->path : NULL;
}

TD_EXPORT const char *td_memmap_append_checkpoint_borrow(const td_memmap_append *a) {
  return a && a->ckpt_rows >= 0 && a->state != APPEND_DONE ? a->ckpt_path : NULL;
}

/* ------------------------------------------------------------------------ open */

TD_EXPORT td_memmap_append *td_memmap_append_open(const char *prefix, int32_t flags) {
  if (flags & ~(TD_MEMMAP_EXISTSOK | TD_MEMMAP_NO_FSYNC))
    return td_fail_null(TD_EINVAL, "append: unknown flags %d", (int)flags);
  td_memmap_append *a = calloc(1, sizeof *a);
  if (!a) return td_fail_null(TD_ENOMEM, "append: out of memory");
  a->stage = (td_mm_save){.call = "append", .flags = flags, .rootfd = -1};
  a->stage.place.parentfd = -1;
  a->ckpt_rows = -1;
  a->lockfd = -1;
  if (!(a->prefix = td_mm_clean_prefix("append", prefix)) ||
      td_mm_begin(&a->stage, a->prefix) != 0) {
    free(a->prefix);
    free(a);
    return NULL;
  }
  if (clear_checkpoint(a) != 0 || set_path(a) != 0) {
    td_memmap_append_free(a); /* no checkpoint of its own: the temporary is removed */
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
int32_t td_append_check_like(const td_dict *f, const td_dict *b, const td_key_path *at,
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
      int32_t st = td_append_check_like(fe->child, be->child, &here, what);
      if (st) return st;
    } else if (fe->kind == TD_ENTRY_VALUE) {
      /* by value: a checkpoint's structure holds the value as the loader writes it */
      if (strcmp(fe->values->texts[0], be->values->texts[0]) != 0 &&
          !td_json_same_text(fe->values->texts[0], be->values->texts[0]))
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
  return td_append_check_like(ref, batch, NULL, what ? what : "the reference");
}

/* The tensor leaves of d's entries before entry j, nested ones included, in walk order
 * (j = the key count: all of them). */
int32_t td_append_leaves_before(const td_dict *d, int32_t j) {
  int32_t n = 0;
  for (int32_t i = 0; i < j; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_DICT) n += td_append_leaves_before(e->child, e->child->keys->n);
    else if (e->kind == TD_ENTRY_TENSOR) n++;
  }
  return n;
}

/* The files of the first batch's leaves, made in the temporary folder (walk order). */

/* Walks d as the plan did (its marks: one per nested container and per tensor leaf),
 * opening each leaf's file: a new one, or (resume: keep >= 0) the one a checkpointed
 * append left, cut back to keep rows. */
static int32_t open_leaves(td_memmap_append *a, const td_dict *d, int32_t *mark, int32_t *leaf,
                           int64_t keep) {
  td_mm_save *S = &a->stage;
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_DICT) {
      (*mark)++;
      int32_t st = open_leaves(a, e->child, mark, leaf, keep);
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
      /* shared: another rank may have made the file already */
      int oflags = keep >= 0 ? O_RDWR : a->shared ? O_RDWR | O_CREAT : O_RDWR | O_CREAT | O_EXCL;
      l->fd = dfd < 0 ? -1 : openat(dfd, j->name, oflags | O_CLOEXEC | O_NOFOLLOW, 0666);
      if (dfd >= 0 && dfd != S->rootfd) close(dfd);
      if (l->fd < 0)
        return td_fail(TD_EIO, "%s: %s: cannot %s the file: %s", S->call, j->path,
                       keep >= 0 ? "open" : "create", strerror(errno));
      if (a->shared && lseek(l->fd, a->offset * l->row_bytes, SEEK_SET) < 0) /* its rows' place */
        return td_fail(TD_EIO, "%s: %s: cannot seek to row %lld: %s", S->call, j->path,
                       (long long)a->offset, strerror(errno));
      if (keep >= 0) { /* the rows after the checkpoint go: they were never recorded */
        struct stat st;
        int64_t bytes = keep * l->row_bytes;
        if (fstat(l->fd, &st) != 0 || st.st_size < bytes)
          return td_fail(TD_EIO, "%s: %s holds fewer bytes than the checkpoint's %lld rows: "
                         "the checkpoint is damaged", S->call, j->path, (long long)keep);
        if (ftruncate(l->fd, bytes) != 0 || lseek(l->fd, bytes, SEEK_SET) != bytes)
          return td_fail(TD_EIO, "%s: cannot cut %s back to the checkpoint: %s", S->call,
                         j->path, strerror(errno));
      }
    }
  }
  return 0;
}

/* The first batch fixes the structure: the plan of its one-row copy, its folders made
 * and its leaf files opened; or (resume: keep >= 0) those an earlier append made. */
int32_t td_append_start(td_memmap_append *a, const td_dict *batch, int64_t keep) {
  td_dict *one = with_rows(a->stage.call, batch, 1);
  if (!one) return td_last_status();
  int32_t st = td_mm_plan(&a->stage, one, a->prefix);
  td_dict_release(one);
  if (!st && keep < 0) st = a->shared ? td_append_make_dirs_shared(a) : td_mm_make_dirs(&a->stage, 1);
  if (st) return st;
  a->nleaves = td_append_leaves_before(batch, batch->keys->n);
  a->leaves = calloc((size_t)a->nleaves + 1, sizeof *a->leaves);
  if (!a->leaves) return td_fail(TD_ENOMEM, "append: out of memory");
  for (int32_t i = 0; i < a->nleaves; i++) a->leaves[i].fd = -1;
  int32_t mark = 0, leaf = 0;
  if ((st = open_leaves(a, batch, &mark, &leaf, keep))) return st;
  td_dict_retain((td_dict *)batch);
  a->first = (td_dict *)batch;
  return 0;
}

/* Room for rows more: capacity doubles (sparse files: ftruncate writes nothing). */
int32_t td_append_reserve(td_memmap_append *a, int64_t rows) {
  if (rows <= a->cap) return 0;
  if (a->shared) { /* writes past the end grow a shared file; a cut could drop another rank's rows */
    a->cap = rows;
    return 0;
  }
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
    /* A folder synced at its commit: the disk starts on these bytes now, while the
     * next batches are made, instead of all of them at the commit's fsync. (Only a
     * start: no wait, and a failure here shows at that fsync.) */
    if (!(a->stage.flags & TD_MEMMAP_NO_FSYNC))
      sync_file_range(l->fd, (a->offset + a->rows) * l->row_bytes, l->row_bytes * be->t.shape[0],
                      SYNC_FILE_RANGE_WRITE);
  }
  return 0;
}

int32_t td_append_refuse_state(const td_memmap_append *a, const char *call) {
  return td_fail(TD_EINVAL, "%s: '%s' is %s", call, a->prefix,
                 a->state == APPEND_DONE ? "committed or aborted already"
                                         : "broken by an earlier failed write (abort it)");
}

TD_EXPORT int32_t td_memmap_append_write(td_memmap_append *a, const td_dict *batch) {
  if (!a || !batch) return td_fail(TD_EINVAL, "append: NULL argument");
  if (a->state != APPEND_OPEN) return td_append_refuse_state(a, "append");
  if (batch->head.ndim < 1)
    return td_fail(TD_ESHAPE, "a batch needs at least one batch dim (rows), got batch size []");
  int32_t st;
  if (!a->first) {
    if ((st = check_values("append", batch, NULL))) return st;
    if ((st = td_append_start(a, batch, -1))) {
      a->state = APPEND_BROKEN;
      return st;
    }
  }
  if ((st = td_append_check_like(a->first, batch, NULL, "the first batch"))) return st; /* nothing moved: still usable */
  int64_t n = batch->head.shape[0];
  if (n == 0) return 0;
  int32_t leaf = 0;
  if ((st = td_append_reserve(a, a->rows + n)) || (st = write_leaves(a, a->first, batch, &leaf, NULL))) {
    a->state = APPEND_BROKEN; /* files hold part of the batch now */
    return st;
  }
  a->rows += n;
  return 0;
}

TD_EXPORT int64_t td_memmap_append_rows(const td_memmap_append *a) { return a ? a->rows : 0; }

/* ----------------------------------------------------------------------- the end */

void td_append_close_leaves(td_memmap_append *a) {
  for (int32_t i = 0; i < a->nleaves; i++)
    if (a->leaves[i].fd >= 0) close(a->leaves[i].fd), a->leaves[i].fd = -1;
}

static void unlock(td_memmap_append *a) {
  if (a->lockfd >= 0) close(a->lockfd);
  a->lockfd = -1;
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

/* The checkpoint's entries leave the folder before it is committed: what is renamed over
 * the prefix is what an append without checkpoints commits. */
static int32_t drop_checkpoint(td_memmap_append *a) {
  static const char *const names[] = {CKPT_RECORD, CKPT_NEXT, CKPT_OLD, CKPT_STRUCTURE, CKPT_LOCK};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (td_fs_rm_tree(a->stage.rootfd, names[i]) != 0)
      return td_fail(TD_EIO, "commit: cannot remove the checkpoint's %s in '%s': %s", names[i],
                     a->path, strerror(errno));
  return 0;
}

TD_EXPORT int32_t td_memmap_append_commit(td_memmap_append *a, int32_t num_threads) {
  if (!a) return td_fail(TD_EINVAL, "commit: NULL argument");
  if (a->state != APPEND_OPEN) return td_append_refuse_state(a, "commit");
  if (a->joined) return td_append_commit_joined(a);
  td_append_close_leaves(a);
  /* The final plan: the first batch's structure with every row written (no batch: an
   * empty container of batch size [0]). */
  int64_t zero = 0;
  td_dict *shape = a->first ? with_rows("commit", a->first, a->rows) : td_dict_new(1, &zero);
  td_mm_save F = {.call = "commit", .flags = a->stage.flags, .like = true, .adopt = true,
                  .rootfd = -1};
  int32_t st = shape ? td_mm_plan(&F, shape, a->prefix) : td_last_status();
  if (!st && a->ckpt_rows >= 0) st = drop_checkpoint(a);
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
  unlock(a);
  td_mm_save_free(&F);
  td_dict_release(shape); /* after the jobs: they point at its leaves */
  a->state = APPEND_DONE;
  return st;
}

TD_EXPORT void td_memmap_append_abort(td_memmap_append *a) {
  if (!a) return;
  td_append_close_leaves(a);
  td_mm_cancel(&a->stage); /* the checkpoint folder too, when the temporary is it */
  unlock(a);
  a->state = APPEND_DONE;
}

TD_EXPORT void td_memmap_append_suspend(td_memmap_append *a) {
  if (!a || a->state == APPEND_DONE) return;
  if (a->ckpt_rows < 0) return td_memmap_append_abort(a);
  td_append_close_leaves(a);
  a->stage.place.made = false; /* cancel closes the descriptors and leaves the folder */
  td_mm_cancel(&a->stage);
  unlock(a);
  a->state = APPEND_DONE;
}

TD_EXPORT void td_memmap_append_free(td_memmap_append *a) {
  if (!a) return;
  if (a->ckpt_rows >= 0) td_memmap_append_suspend(a); /* never lose a checkpoint unasked */
  td_memmap_append_abort(a);
  td_mm_save_free(&a->stage);
  td_dict_release(a->first);
  td_storage_release(a->buf);
  free(a->leaves);
  free(a->prefix);
  free(a->path);
  free(a->stage_path);
  free(a->ckpt_path);
  free(a);
}

/* ------------------------------------------------------------ checkpoint, resume */

/* "<temporary>/<name>", malloc'd into *out (freed first). */
static int32_t inner_path(td_memmap_append *a, const char *name, char **out) {
  free(*out);
  if (!(*out = td_mm_path_join(a->path, name))) return td_fail(TD_ENOMEM, "append: out of memory");
  return 0;
}

TD_EXPORT const char *td_memmap_append_stage(td_memmap_append *a) {
  if (!a) return td_fail_null(TD_EINVAL, "checkpoint: NULL argument");
  if (a->state != APPEND_OPEN) return td_append_refuse_state(a, "checkpoint"), NULL;
  if (a->shared)
    return td_fail_null(TD_EINVAL, "checkpoint: '%s' is written by several ranks, which do not "
                        "checkpoint", a->prefix);
  int rootfd = a->stage.rootfd;
  if (td_fs_rm_tree(rootfd, CKPT_NEXT) != 0 || mkdirat(rootfd, CKPT_NEXT, 0777) != 0)
    return td_fail_null(TD_EIO, "checkpoint: cannot make the folder '%s/%s': %s", a->path,
                        CKPT_NEXT, strerror(errno));
  if (inner_path(a, CKPT_NEXT, &a->stage_path)) return NULL;
  return a->stage_path;
}

/* Every leaf file's bytes durable. */
static int32_t sync_leaves(td_memmap_append *a) {
  for (int32_t i = 0; i < a->nleaves; i++)
    if (a->leaves[i].fd >= 0 && td_fs_sync(a->leaves[i].fd, a->stage.flags) != 0)
      return td_fail(TD_EIO, "checkpoint: cannot sync a file of '%s': %s", a->path,
                     strerror(errno));
  return 0;
}

/* The first checkpoint: the structure saved (0 rows), the lock taken, and the temporary
 * folder renamed to its checkpoint name, which a later process finds and no sweep of
 * dead processes' temporaries removes. */
static int32_t settle(td_memmap_append *a) {
  td_mm_place *P = &a->stage.place;
  char name[TD_MM_NAME_MAX + 64];
  if (!checkpoint_name(name, sizeof name, P->name))
    return td_fail(TD_EINVAL, "checkpoint: the name '%s' is too long for a checkpoint beside it",
                   P->name);
  int32_t st = take_lock(a->stage.rootfd, "checkpoint", a->prefix, &a->lockfd);
  if (!st && a->first) {
    char *where = NULL;
    td_dict *zero = with_rows("checkpoint", a->first, 0);
    td_dict *saved = NULL;
    if (!zero || inner_path(a, CKPT_STRUCTURE, &where) ||
        !(saved = td_dict_memmap_like(zero, where, TD_MEMMAP_EXISTSOK | (a->stage.flags & TD_MEMMAP_NO_FSYNC), 1)))
      st = td_last_status();
    td_dict_release(saved);
    td_dict_release(zero);
    free(where);
  }
  if (!st && renameat2(P->parentfd, P->tmp, P->parentfd, name, RENAME_NOREPLACE) != 0)
    st = td_fail(TD_EIO, "checkpoint: cannot rename '%s' to '%s' beside it: %s", a->path, name,
                 strerror(errno));
  if (st) {
    unlock(a);
    return st;
  }
  snprintf(P->tmp, sizeof P->tmp, "%s", name); /* fits: checked above */
  td_fs_sync(P->parentfd, a->stage.flags);
  return set_path(a);
}

TD_EXPORT int32_t td_memmap_append_checkpoint(td_memmap_append *a) {
  if (!a) return td_fail(TD_EINVAL, "checkpoint: NULL argument");
  if (a->state != APPEND_OPEN) return td_append_refuse_state(a, "checkpoint");
  if (a->shared)
    return td_fail(TD_EINVAL, "checkpoint: '%s' is written by several ranks, which do not "
                   "checkpoint", a->prefix);
  int rootfd = a->stage.rootfd;
  struct stat sst;
  if (fstatat(rootfd, CKPT_NEXT, &sst, AT_SYMLINK_NOFOLLOW) != 0 && !td_memmap_append_stage(a))
    return td_last_status();
  int32_t st = sync_leaves(a);
  if (!st && a->ckpt_rows < 0) st = settle(a);
  if (st) return st;
  rootfd = a->stage.rootfd;
  char text[64];
  int n = snprintf(text, sizeof text, "{\"rows\": %lld}\n", (long long)a->rows);
  int sfd = openat(rootfd, CKPT_NEXT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int fd = sfd < 0 ? -1 : openat(sfd, CKPT_ROWS, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
  bool ok = fd >= 0 && td_fs_write_all(fd, text, n) && td_fs_sync(fd, a->stage.flags) == 0;
  if (fd >= 0) close(fd);
  ok = ok && td_fs_sync(sfd, a->stage.flags) == 0;
  if (sfd >= 0) close(sfd);
  bool moved = false;
  if (!ok || td_fs_commit_dir(rootfd, CKPT_NEXT, CKPT_RECORD, CKPT_OLD, true, a->stage.flags,
                              &moved) != 0) {
    if (!moved)
      return td_fail(TD_EIO, "checkpoint: cannot record the checkpoint in '%s': %s", a->path,
                     strerror(errno));
  }
  a->ckpt_rows = a->rows;
  return inner_path(a, CKPT_RECORD, &a->ckpt_path);
}

/* What a killed process may have left in the folder beside the plan's names (a staged
 * checkpoint, a file's temporary, meta.json files of a commit cut short) goes: the
 * folder then holds what the checkpoint's append held. */
static void sweep(td_memmap_append *a) {
  td_mm_save *S = &a->stage;
  static const char *const kept[] = {CKPT_RECORD, CKPT_STRUCTURE, CKPT_LOCK};
  int fd = dup(S->rootfd);
  DIR *dp = fd < 0 ? NULL : fdopendir(fd);
  if (!dp) {
    if (fd >= 0) close(fd);
    return;
  }
  char **gone = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *de; (de = readdir(dp));) {
    const char *e = de->d_name;
    bool keep = !strcmp(e, ".") || !strcmp(e, "..");
    for (size_t i = 0; i < sizeof kept / sizeof *kept && !keep; i++) keep = !strcmp(e, kept[i]);
    for (int32_t k = 0; k < S->njobs && !keep; k++)
      keep = S->jobs[k].leaf && S->jobs[k].dir == 0 && !strcmp(S->jobs[k].name, e);
    for (int32_t k = 1; k < S->ndirs && !keep; k++)
      keep = S->dirs[k].parent == 0 && !strcmp(S->dirs[k].name, e);
    if (keep) continue;
    if (n == cap) {
      char **g = realloc(gone, sizeof *g * (cap = cap ? 2 * cap : 8));
      if (!g) break;
      gone = g;
    }
    if ((gone[n] = strdup(e))) n++;
  }
  closedir(dp);
  for (size_t i = 0; i < n; i++) td_fs_rm_tree(S->rootfd, gone[i]), free(gone[i]);
  free(gone);
  /* a commit cut short wrote meta.json files into the planned folders */
  for (int32_t k = 0; k < S->ndirs; k++) {
    int dfd = k == 0 ? S->rootfd : openat(S->rootfd, S->dirs[k].rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) unlinkat(dfd, TD_MMF_META, 0);
    if (dfd >= 0 && dfd != S->rootfd) close(dfd);
  }
}

/* Resume's second half: the checkpoint's structure loaded and planned, its files cut back
 * to the checkpoint's rows, leftovers swept. */
static int32_t reopen(td_memmap_append *a, int64_t rows) {
  struct stat st;
  if (fstatat(a->stage.rootfd, CKPT_STRUCTURE, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    char *where = NULL;
    if (inner_path(a, CKPT_STRUCTURE, &where)) return td_last_status();
    td_dict *first = td_dict_load_memmap(where, TD_MAP_READ);
    free(where);
    if (!first) return td_last_status();
    int32_t rc = td_append_start(a, first, rows);
    td_dict_release(first); /* start retained it */
    if (rc) return rc;
    a->cap = rows;
  } else if (rows > 0) {
    return td_fail(TD_EIO, "resume: '%s' records %lld rows but no structure: the checkpoint is "
                   "damaged", a->path, (long long)rows);
  }
  sweep(a);
  a->rows = a->ckpt_rows = rows;
  return inner_path(a, CKPT_RECORD, &a->ckpt_path);
}

TD_EXPORT td_memmap_append *td_memmap_append_resume(const char *prefix, int32_t flags) {
  if (flags & ~(TD_MEMMAP_EXISTSOK | TD_MEMMAP_NO_FSYNC))
    return td_fail_null(TD_EINVAL, "resume: unknown flags %d", (int)flags);
  td_memmap_append *a = calloc(1, sizeof *a);
  if (!a) return td_fail_null(TD_ENOMEM, "resume: out of memory");
  a->stage = (td_mm_save){.call = "resume", .flags = flags, .rootfd = -1};
  a->stage.place.parentfd = -1;
  a->ckpt_rows = -1;
  a->lockfd = -1;
  if (!(a->prefix = td_mm_clean_prefix("resume", prefix)) ||
      td_mm_locate(&a->stage, a->prefix) != 0) {
    free(a->prefix);
    free(a);
    return NULL;
  }
  td_mm_place *P = &a->stage.place;
  int32_t st = 0;
  if (!checkpoint_name(P->tmp, sizeof P->tmp, P->name) ||
      !td_fs_temp_name(P->old, sizeof P->old, P->name))
    st = td_fail(TD_EINVAL, "resume: the name '%s' is too long for a checkpoint beside it", P->name);
  else if ((a->stage.rootfd = openat(P->parentfd, P->tmp,
                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    st = errno == ENOENT ? td_fail(TD_EIO, "resume: '%s' has no checkpoint to resume", a->prefix)
                         : td_fail(TD_EIO, "resume: cannot open the checkpoint of '%s': %s",
                                   a->prefix, strerror(errno));
  /* From here an abort removes the folder (the locked checkpoint is this append's). */
  if (!st) st = take_lock(a->stage.rootfd, "resume", a->prefix, &a->lockfd);
  if (!st) P->made = true;
  int64_t rows = st ? -1 : recorded_rows(a->stage.rootfd);
  if (!st && rows < 0)
    st = td_fail(TD_EIO, "resume: '%s' has no checkpoint to resume (its run stopped before the "
                 "first one was recorded)", a->prefix);
  if (!st) st = set_path(a);
  if (!st) st = reopen(a, rows);
  if (st) {
    P->made = false; /* a refused resume leaves the checkpoint as it found it */
    a->ckpt_rows = -1;
    td_memmap_append_free(a); /* closes and unlocks; keeps the error */
    return NULL;
  }
  a->stage.call = "append";
  return a;
}
