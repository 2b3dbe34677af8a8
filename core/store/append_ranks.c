/*
 * append_ranks.c: the ranks of a data-parallel run writing one memmap folder together
 * (flow.MemmapSink under mpirun, docs/dist.md). One rank owns the append (its temporary
 * folder, the commit); the others join it. Each writes its rows straight into the
 * folder's leaf files from its own row on (td_memmap_append_share, _join), rows that
 * must move are copied by the rank that wrote them (td_memmap_append_copy_rows), and the
 * owner commits the folder with every rank's row count (td_memmap_append_set_total):
 * files trimmed to the total, meta.json written, the folder renamed over the prefix as
 * every save is. No rank reads or copies another's rows.
 *
 * POSIX is all it assumes of the file system: a file's bytes written by one process at
 * offsets no other writes are there for every process once the writer has synced them,
 * which each rank does for its own writes before the owner commits.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "append_internal.h"

int32_t td_append_make_dirs_shared(td_memmap_append *a) {
  td_mm_save *S = &a->stage;
  for (int32_t k = 1; k < S->ndirs; k++) /* parents come first in the plan */
    if (mkdirat(S->rootfd, S->dirs[k].rel, 0777) != 0 && errno != EEXIST)
      return td_fail(TD_EIO, "%s: cannot create the folder '%s': %s", S->call, S->dirs[k].path,
                     strerror(errno));
  return 0;
}

int32_t td_append_commit_joined(td_memmap_append *a) {
  int32_t st = 0;
  for (int32_t i = 0; i < a->nleaves && !st; i++)
    if (a->leaves[i].fd >= 0 && td_fs_sync(a->leaves[i].fd, a->stage.flags) != 0)
      st = td_fail(TD_EIO, "commit: cannot sync a file of '%s': %s", a->path, strerror(errno));
  td_append_close_leaves(a);
  td_mm_cancel(&a->stage); /* closes the folder; the owner's, so it stays */
  a->state = APPEND_DONE;
  return st;
}

TD_EXPORT int32_t td_memmap_append_share(td_memmap_append *a, int64_t row_offset) {
  if (!a) return td_fail(TD_EINVAL, "share: NULL argument");
  if (a->state != APPEND_OPEN) return td_append_refuse_state(a, "share");
  if (a->first || a->ckpt_rows >= 0)
    return td_fail(TD_EINVAL, "share: '%s' has rows already; share it before the first batch",
                   a->prefix);
  if (row_offset < 0)
    return td_fail(TD_EINVAL, "share: row_offset must be >= 0, got %lld", (long long)row_offset);
  a->shared = true;
  a->offset = row_offset;
  return 0;
}

TD_EXPORT td_memmap_append *td_memmap_append_join(const char *folder, const char *prefix,
                                                  int64_t row_offset, int32_t flags) {
  if (!folder || !prefix) return td_fail_null(TD_EINVAL, "join: NULL argument");
  if (flags & ~TD_MEMMAP_NO_FSYNC) return td_fail_null(TD_EINVAL, "join: unknown flags %d", (int)flags);
  if (row_offset < 0)
    return td_fail_null(TD_EINVAL, "join: row_offset must be >= 0, got %lld", (long long)row_offset);
  td_memmap_append *a = calloc(1, sizeof *a);
  if (!a) return td_fail_null(TD_ENOMEM, "join: out of memory");
  a->stage = (td_mm_save){.call = "append", .flags = flags, .rootfd = -1};
  a->stage.place.parentfd = -1; /* made stays false: cancel never removes the owner's folder */
  a->ckpt_rows = -1;
  a->lockfd = -1;
  a->shared = a->joined = true;
  a->offset = row_offset;
  if (!(a->prefix = td_mm_clean_prefix("join", prefix)) || !(a->path = strdup(folder))) {
    if (a->prefix) td_fail(TD_ENOMEM, "join: out of memory");
    td_memmap_append_free(a);
    return NULL;
  }
  a->stage.rootfd = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (a->stage.rootfd < 0) {
    td_fail(TD_EIO, "join: cannot open the folder '%s' of '%s': %s", folder, prefix,
            strerror(errno));
    td_memmap_append_free(a);
    return NULL;
  }
  return a;
}

/* ------------------------------------------------------------------- row copies */


/* bytes from src at soff to dst at doff: copy_file_range (in the kernel; a reflink or a
 * server-side copy where the file system has one), else read and write. */
static bool copy_bytes(int dst, int64_t doff, int src, int64_t soff, int64_t bytes) {
  loff_t so = soff, dof = doff;
  while (bytes > 0) {
    ssize_t k = copy_file_range(src, &so, dst, &dof, (size_t)(bytes < (1 << 30) ? bytes : (1 << 30)), 0);
    if (k > 0) {
      bytes -= k;
      continue;
    }
    if (k == 0) return errno = ENODATA, false; /* the source ends before its rows */
    if (errno == EINTR) continue;
    if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return false;
    enum { CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    if (!buf) return errno = ENOMEM, false;
    while (bytes > 0) {
      ssize_t r = pread(src, buf, (size_t)(bytes < CHUNK ? bytes : CHUNK), so);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        if (r == 0) errno = ENODATA;
        free(buf);
        return false;
      }
      for (ssize_t w = 0; w < r;) {
        ssize_t k2 = pwrite(dst, buf + w, (size_t)(r - w), dof + w);
        if (k2 < 0 && errno == EINTR) continue;
        if (k2 < 0) {
          free(buf);
          return false;
        }
        w += k2;
      }
      so += r, dof += r, bytes -= r;
    }
    free(buf);
  }
  return true;
}

static int32_t copy_leaves(td_memmap_append *dst, const td_dict *dd, int32_t dbase,
                           const td_memmap_append *src, const td_dict *sd, int32_t sbase,
                           int64_t dst_row, int64_t src_row, int64_t rows) {
  for (int32_t i = 0; i < dd->keys->n; i++) {
    const td_entry *e = &dd->entries[i];
    if (e->kind != TD_ENTRY_DICT && e->kind != TD_ENTRY_TENSOR) continue;
    int32_t j = td_dict_find_like(sd, dd, i); /* present: check_like passed */
    int32_t sl = sbase + td_append_leaves_before(sd, j);
    if (e->kind == TD_ENTRY_DICT) {
      int32_t st = copy_leaves(dst, e->child, dbase + td_append_leaves_before(dd, i), src,
                               sd->entries[j].child, sl, dst_row, src_row, rows);
      if (st) return st;
      continue;
    }
    append_leaf *dl = &dst->leaves[dbase + td_append_leaves_before(dd, i)];
    const append_leaf *s = &src->leaves[sl];
    if (dl->fd < 0 || s->fd < 0) continue;
    if (!copy_bytes(dl->fd, dst_row * dl->row_bytes, s->fd, src_row * s->row_bytes,
                    rows * dl->row_bytes))
      return td_fail(TD_EIO, "copy_rows: key '%s': cannot copy %lld rows from '%s' to '%s': %s",
                     td_dict_key(dd, i), (long long)rows, src->path, dst->path, strerror(errno));
  }
  return 0;
}

TD_EXPORT int32_t td_memmap_append_copy_rows(td_memmap_append *dst, int64_t dst_row,
                                             const td_memmap_append *src, int64_t src_row,
                                             int64_t rows) {
  if (!dst || !src) return td_fail(TD_EINVAL, "copy_rows: NULL argument");
  if (dst->state != APPEND_OPEN) return td_append_refuse_state(dst, "copy_rows");
  if (src->state != APPEND_OPEN) return td_append_refuse_state(src, "copy_rows");
  if (dst_row < 0 || src_row < 0 || rows < 0)
    return td_fail(TD_EINVAL, "copy_rows: rows and positions must be >= 0, got %lld rows "
                   "from row %lld to row %lld", (long long)rows, (long long)src_row,
                   (long long)dst_row);
  if (rows == 0) return 0;
  if (!src->first)
    return td_fail(TD_EINVAL, "copy_rows: '%s' has no rows yet (its first batch fixes its "
                   "files)", src->prefix);
  int32_t st = dst->first ? 0 : td_append_start(dst, src->first, -1); /* src's structure */
  if (st) return st;
  if ((st = td_append_check_like(dst->first, src->first, NULL, "the rows copied into"))) return st;
  if ((st = td_append_reserve(dst, dst_row + rows))) return st; /* files grown to hold them */
  return copy_leaves(dst, dst->first, 0, src, src->first, 0, dst_row, src_row, rows);
}

TD_EXPORT td_dict *td_memmap_append_structure(const td_memmap_append *a) {
  if (!a) return td_fail_null(TD_EINVAL, "structure: NULL argument");
  if (!a->first) return NULL;
  td_dict_retain(a->first);
  return a->first;
}

/* --------------------------------------------------------------------- the commit */

TD_EXPORT int32_t td_memmap_append_set_total(td_memmap_append *a, const td_dict *structure,
                                             int64_t rows) {
  if (!a) return td_fail(TD_EINVAL, "set_total: NULL argument");
  if (a->state != APPEND_OPEN) return td_append_refuse_state(a, "set_total");
  if (!a->shared || a->joined)
    return td_fail(TD_EINVAL, "set_total: '%s' is not the shared append of a data-parallel "
                   "run's owner", a->prefix);
  if (rows < 0) return td_fail(TD_EINVAL, "set_total: rows must be >= 0, got %lld", (long long)rows);
  if (rows > 0 && !a->first && !structure)
    return td_fail(TD_EINVAL, "set_total: %lld rows but no structure for them", (long long)rows);
  int32_t st = 0;
  if (structure && !a->first) st = td_append_start(a, structure, -1); /* the leaf files it names */
  else if (structure) st = td_append_check_like(a->first, structure, NULL, "the owner's rows");
  if (st) return st;
  a->rows = a->cap = rows;
  return 0;
}
