/*
 * memmap_disk.c: how a planned save (memmap.c) reaches the disk atomically.
 *
 *  - the folder is written as a temporary sibling `.<name>.tmp-<pid>-<n>-<owner>` of prefix
 *    (missing parents are made, as Python's os.makedirs does); temporaries of that name
 *    left by processes that are gone are removed first;
 *  - the files (leaves and meta.json) are written in parallel over files, each in large
 *    write() calls (a strided leaf is gathered by the copy kernel, a block of rows at a
 *    time), fsynced, and a leaf's file is mapped read-write from its descriptor;
 *  - the folders are fsynced children first, then the folder is committed at prefix
 *    (td_fs_commit_dir, fs.c: renameat2's RENAME_EXCHANGE swaps it in, RENAME_NOREPLACE
 *    when nothing is there; the parent is fsynced and the old folder removed).
 * The steps are also callable apart (td_mm_begin, td_mm_make_dirs, td_mm_end,
 * td_mm_cancel): an append (append.c) writes its leaf files into the temporary
 * folder over many calls, then ends the save with S->adopt set (the files are trimmed
 * and synced where they are, not written).
 * A crash at any moment leaves the old folder or the new one at prefix, never a
 * temporary (only where the file system lacks RENAME_EXCHANGE can the old folder be
 * left beside it: fs.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/parallel.h"
#include "store_internal.h"

/* ------------------------------------------------------------------- the folders */

/* mkdir -p of the folder that will hold prefix (Python's os.makedirs does the same). */
static int32_t make_parents(const td_mm_save *S, const char *parent) {
  char *p = strdup(parent);
  if (!p) return td_mm_oom(S);
  size_t n = strlen(p);
  for (size_t i = 1; i <= n; i++) {
    if (p[i] != '/' && p[i] != '\0') continue;
    char keep = p[i];
    p[i] = '\0';
    if (mkdir(p, 0777) == 0) {
      /* Make the new folder's name durable in its own parent. */
      char *slash = strrchr(p, '/');
      const char *up = slash == p ? "/" : slash ? p : ".";
      if (slash && slash != p) *slash = '\0';
      td_fs_sync_dir(up, S->flags); /* best effort */
      if (slash && slash != p) *slash = '/';
    } else if (errno != EEXIST) {
      int32_t st = td_fail(TD_EIO, "%s: cannot create the folder '%s': %s", S->call, p,
                           strerror(errno));
      free(p);
      return st;
    }
    p[i] = keep;
  }
  free(p);
  return 0;
}

/* -------------------------------------------------------------------- the writes */

static void job_fail(td_mm_save *S, td_mm_job *j, int32_t status, const char *what) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s: %s: %s", S->call, j->path, what);
  j->status = status;
  j->msg = strdup(msg);
  atomic_store(&S->failed, 1);
}

/* Folder k of the temporary tree, opened for *at() calls; close it with close_dir. Only
 * the root stays open through a save: a container of thousands of nested containers
 * or values must not hold thousands of descriptors. */
static int open_dir(const td_mm_save *S, int32_t k) {
  return k == 0 ? S->rootfd
                : openat(S->rootfd, S->dirs[k].rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static void close_dir(const td_mm_save *S, int fd) {
  if (fd >= 0 && fd != S->rootfd) close(fd);
}

static void run_job(td_mm_save *S, td_mm_job *j) {
  if (atomic_load(&S->failed)) return;
  char why[512];
  int dfd = open_dir(S, j->dir);
  /* An adopted leaf's file is in the folder already (an append wrote it). */
  int oflags = S->adopt && j->leaf ? O_RDWR : O_RDWR | O_CREAT | O_EXCL;
  int fd = dfd < 0 ? -1 : openat(dfd, j->name, oflags | O_CLOEXEC | O_NOFOLLOW, 0666);
  close_dir(S, dfd);
  if (fd < 0) {
    snprintf(why, sizeof why, "cannot create the file: %s", strerror(errno));
    return job_fail(S, j, TD_EIO, why);
  }
  bool ok;
  int32_t status = TD_EIO;
  if (!j->leaf) {
    ok = td_fs_write_all(fd, j->text, (int64_t)j->text_len);
  } else if (S->like || S->adopt) {
    ok = ftruncate(fd, j->nbytes) == 0; /* zeros, without writing them; or a trim */
  } else {
    td_storage *buf = NULL;
    td_clear_error();
    ok = td_fs_write_tensor(fd, j->leaf, &buf, &status);
    td_storage_release(buf);
    if (!ok && status != TD_EIO) {
      close(fd);
      return job_fail(S, j, status, td_last_error());
    }
  }
  if (!ok) snprintf(why, sizeof why, "cannot write %lld bytes: %s",
                    (long long)(j->leaf ? j->nbytes : (int64_t)j->text_len), strerror(errno));
  if (ok && td_fs_sync(fd, S->flags) != 0) {
    ok = false;
    snprintf(why, sizeof why, "cannot sync the file: %s", strerror(errno));
  }
  if (ok && j->leaf && !S->adopt && !(j->mapped = td_storage_map_fd(fd, j->nbytes, 1, why, sizeof why)))
    ok = false;
  close(fd);
  if (!ok) job_fail(S, j, status, why);
}

static void run_jobs(int64_t begin, int64_t end, void *ctx) {
  td_mm_save *S = ctx;
  for (int64_t i = begin; i < end; i++) run_job(S, &S->jobs[i]);
}

/* Empty, or a memmap folder: what existsok may replace. */
static bool replaceable(const char *path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstatat(fd, TD_MMF_META, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    close(fd);
    return true;
  }
  DIR *dp = fdopendir(fd);
  if (!dp) {
    close(fd);
    return false;
  }
  bool empty = true;
  for (struct dirent *de; empty && (de = readdir(dp));)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) empty = false;
  closedir(dp);
  return empty;
}

/* The temporary folder's place is released: the folder removed unless it was swapped
 * in, the descriptors closed. Safe to call twice. */
void td_mm_cancel(td_mm_save *S) {
  td_mm_place *P = &S->place;
  if (S->rootfd >= 0) close(S->rootfd);
  S->rootfd = -1;
  if (P->made && P->parentfd >= 0) td_fs_rm_tree(P->parentfd, P->tmp);
  P->made = false;
  if (P->parentfd >= 0) close(P->parentfd);
  P->parentfd = -1;
  free(P->target), free(P->prefix);
  P->target = P->prefix = NULL;
}

int32_t td_mm_locate(td_mm_save *S, const char *prefix) {
  td_mm_place *P = &S->place;
  *P = (td_mm_place){.parentfd = -1};
  S->rootfd = -1;
  /* Where: a link at prefix is followed (the folder it names is replaced). */
  struct stat st;
  bool exists = lstat(prefix, &st) == 0;
  if (!(P->prefix = strdup(prefix))) return td_mm_oom(S);
  if (exists && S_ISLNK(st.st_mode)) {
    if (!(P->target = realpath(prefix, NULL))) {
      int32_t rc = td_fail(TD_EIO, "%s: '%s' is a link to nothing: %s", S->call, prefix,
                           strerror(errno));
      td_mm_cancel(S);
      return rc;
    }
    exists = stat(P->target, &st) == 0;
  } else if (!(P->target = strdup(prefix))) {
    td_mm_cancel(S);
    return td_mm_oom(S);
  }
  int32_t rc = 0;
  if (exists && !(S->flags & TD_MEMMAP_EXISTSOK))
    rc = td_fail(TD_EIO, "%s: '%s' exists (pass existsok)", S->call, prefix);
  else if (exists && (!S_ISDIR(st.st_mode) || !replaceable(P->target)))
    rc = td_fail(TD_EIO,
                 S_ISDIR(st.st_mode)
                     ? "%s: '%s' exists and is not a memmap folder (no meta.json); refusing "
                       "to replace it"
                     : "%s: '%s' exists and is not a folder",
                 S->call, prefix);
  if (rc) {
    td_mm_cancel(S);
    return rc;
  }
  char *target = P->target, *slash = strrchr(target, '/');
  P->name = slash ? slash + 1 : target;
  P->parent = !slash ? "." : slash == target ? "/" : target;
  if (slash && slash != target) *slash = '\0';
  rc = slash && slash != target ? make_parents(S, P->parent) : 0;
  if (!rc && (P->parentfd = open(P->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    rc = td_fail(TD_EIO, "%s: cannot open the folder '%s': %s", S->call, P->parent,
                 strerror(errno));
  if (rc) td_mm_cancel(S);
  return rc;
}

int32_t td_mm_begin(td_mm_save *S, const char *prefix) {
  td_mm_place *P = &S->place;
  int32_t rc = td_mm_locate(S, prefix); /* on failure the place is released already */
  if (!rc) {
    td_fs_remove_stale(P->parentfd, P->name);
    if (!td_fs_temp_name(P->tmp, sizeof P->tmp, P->name) ||
        !td_fs_temp_name(P->old, sizeof P->old, P->name) || strlen(P->tmp) > TD_MM_NAME_MAX)
      rc = td_fail(TD_EINVAL, "%s: the name '%s' is too long for a temporary beside it",
                   S->call, P->name);
  }
  if (!rc) {
    if (mkdirat(P->parentfd, P->tmp, 0777) != 0)
      rc = td_fail(TD_EIO, "%s: cannot create a folder beside '%s': %s", S->call, prefix,
                   strerror(errno));
    else
      P->made = true;
  }
  if (!rc && (S->rootfd = openat(P->parentfd, P->tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    rc = td_fail(TD_EIO, "%s: cannot open the folder beside '%s': %s", S->call, prefix,
                 strerror(errno));
  /* Held until the commit or cancel closes rootfd: the sweep of other processes tells
   * a live save's folder by it (best effort: where locks are refused, the name tells). */
  if (!rc) td_temp_claim(S->rootfd);
  if (rc) td_mm_cancel(S);
  return rc;
}

int32_t td_mm_make_dirs(td_mm_save *S, int32_t from) {
  /* Parents come first in the plan; each is made relative to the temporary root. */
  for (int32_t k = from > 1 ? from : 1; k < S->ndirs; k++)
    if (mkdirat(S->rootfd, S->dirs[k].rel, 0777) != 0)
      return td_fail(TD_EIO, "%s: cannot create the folder '%s': %s", S->call, S->dirs[k].path,
                     strerror(errno));
  return 0;
}

int32_t td_mm_end(td_mm_save *S, int32_t num_threads) {
  td_mm_place *P = &S->place;
  int32_t rc = 0;
  atomic_store(&S->failed, 0);
  if (num_threads == 1 || S->njobs < 2)
    run_jobs(0, S->njobs, S);
  else
    td_parallel_for(S->njobs, 1, run_jobs, S);
  for (int32_t k = 0; k < S->njobs && !rc; k++)
    if (S->jobs[k].status) rc = td_fail(S->jobs[k].status, "%s", S->jobs[k].msg);
  /* Every folder's entries durable, children before their parents. */
  for (int32_t k = S->ndirs - 1; !rc && !(S->flags & TD_MEMMAP_NO_FSYNC) && k >= 0; k--) {
    int dfd = open_dir(S, k);
    if (dfd < 0 || fsync(dfd) != 0)
      rc = td_fail(TD_EIO, "%s: cannot sync the folder '%s': %s", S->call, S->dirs[k].path,
                   strerror(errno));
    close_dir(S, dfd);
  }
  /* rootfd (its claim) stays open through the rename: closed by td_mm_cancel below */
  bool moved = false;
  if (!rc && td_fs_commit_dir(P->parentfd, P->tmp, P->name, P->old,
                              S->flags & TD_MEMMAP_EXISTSOK, S->flags, &moved) != 0) {
    if (moved)
      rc = td_fail(TD_EIO, "%s: cannot sync the folder '%s': %s", S->call, P->parent,
                   strerror(errno));
    else if (errno == EEXIST && !(S->flags & TD_MEMMAP_EXISTSOK))
      rc = td_fail(TD_EIO, "%s: '%s' exists (pass existsok)", S->call, P->prefix);
    else
      rc = td_fail(TD_EIO, "%s: cannot rename the new folder to '%s': %s", S->call,
                   P->prefix, strerror(errno));
  }
  if (moved) P->made = false; /* what is left at a temporary name is the old folder */
  td_mm_cancel(S);
  return rc;
}

int32_t td_mm_write(td_mm_save *S, const char *prefix, int32_t num_threads) {
  int32_t rc = td_mm_begin(S, prefix);
  if (rc) return rc;
  if ((rc = td_mm_make_dirs(S, 1))) {
    td_mm_cancel(S);
    return rc;
  }
  return td_mm_end(S, num_threads);
}
