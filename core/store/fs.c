/*
 * fs.c: file writing written once, for memmap saves and appends
 * (memmap_disk.c, append.c) and consolidated files (consolidate_*.c).
 * See fs.h for each function's contract.
 *
 * Every save writes into a temporary sibling `.<name>.tmp-<pid>-<n>-<owner>` of its
 * target and commits it once synced: td_fs_commit_file for a file, td_fs_commit_dir for
 * a folder, the only places where a written temporary takes its final name. The pid and
 * the owner (the machine it ran on, temp_owner.h) in the name, and the lock the writer
 * holds on it, let the next save of the target, in any process, remove what a killed
 * one left, and only that (td_fs_remove_stale).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "temp_owner.h"

/* ------------------------------------------------------------------ the writes */

bool td_fs_read_at(int fd, void *p, int64_t n, int64_t at) {
  char *c = p;
  while (n > 0) {
    const ssize_t r = pread(fd, c, (size_t)(n < (1 << 30) ? n : (1 << 30)), (off_t)at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO; /* the file ended first */
      return false;
    }
    c += r, n -= r, at += r;
  }
  return true;
}

bool td_fs_write_all(int fd, const void *p, int64_t n) {
  const char *c = p;
  while (n > 0) {
    size_t k = n > (1 << 30) ? (size_t)1 << 30 : (size_t)n;
    ssize_t w = write(fd, c, k);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = ENOSPC;
      return false;
    }
    c += w;
    n -= w;
  }
  return true;
}

int32_t td_fs_gather(const td_tensor *t, td_storage *dst, int64_t at) {
  td_tensor d = {.storage = dst, .offset = at / t->itemsize, .itemsize = t->itemsize,
                 .ndim = t->ndim, .dtype = t->dtype};
  memcpy(d.shape, t->shape, sizeof d.shape);
  (void)td_contiguous_strides(t->ndim, t->shape, d.strides); /* t's shape is valid */
  return td_tensor_copy_(&d, t);
}

/* A block of whole rows at a time (or one row, recursively) when t is larger than a
 * chunk: every piece gathered is at most TD_FS_CHUNK bytes. */
bool td_fs_write_tensor(int fd, const td_tensor *t, td_storage **buf, int32_t *status) {
  int64_t bytes = td_tensor_numel(t) * t->itemsize;
  if (bytes == 0) return true;
  if (!td_check_cpu("write", t, "leaf")) { /* device memory: the caller moves it first */
    *status = TD_EINVAL;
    return false;
  }
  if (td_tensor_is_contiguous(t)) return td_fs_write_all(fd, td_tensor_ptr(t), bytes);
  if (bytes <= TD_FS_CHUNK) {
    if (!*buf && !(*buf = td_storage_new_heap(TD_FS_CHUNK))) {
      *status = td_last_status();
      return false;
    }
    int32_t st = td_fs_gather(t, *buf, 0);
    if (st) return *status = st, false;
    return td_fs_write_all(fd, (*buf)->data, bytes);
  }
  int64_t rows = t->shape[0], row_bytes = bytes / rows;
  td_tensor v;
  if (row_bytes <= TD_FS_CHUNK) {
    int64_t k = TD_FS_CHUNK / row_bytes;
    for (int64_t r = 0; r < rows; r += k) {
      int32_t st = td_tensor_slice(t, 0, r, r + k, 1, &v);
      if (st) return *status = st, false;
      if (!td_fs_write_tensor(fd, &v, buf, status)) return false;
    }
    return true;
  }
  for (int64_t r = 0; r < rows; r++) {
    int32_t st = td_tensor_select(t, 0, r, &v);
    if (st) return *status = st, false;
    if (!td_fs_write_tensor(fd, &v, buf, status)) return false;
  }
  return true;
}

/* ------------------------------------------------------------- the temporaries */

static atomic_uint temp_counter;

bool td_fs_temp_name(char *out, size_t cap, const char *path) {
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  td_temp_owner me;
  td_temp_owner_self(&me);
  char owner[TD_TEMP_OWNER_DIGITS + 1];
  td_temp_owner_format(&me, owner);
  int n = snprintf(out, cap, "%.*s.%s.tmp-%ld-%u-%s", (int)(name - path), path, name,
                   (long)getpid(), atomic_fetch_add(&temp_counter, 1u), owner);
  if (n >= 0 && (size_t)n < cap) return true;
  errno = ENAMETOOLONG;
  return false;
}

static int rm_tree(int dirfd, const char *name, int depth) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? 0 : -1;
  if (!S_ISDIR(st.st_mode)) return unlinkat(dirfd, name, 0);
  if (depth > TD_FS_MAX_DEPTH) {
    errno = ELOOP;
    return -1;
  }
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *dp = fd < 0 ? NULL : fdopendir(fd);
  if (!dp) {
    if (fd >= 0) close(fd);
    return -1;
  }
  /* The names first: removing entries while reading a folder may skip some. */
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  for (struct dirent *de; (de = readdir(dp));) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      char **nn = realloc(names, sizeof *nn * cap);
      if (!nn) {
        rc = -1;
        break;
      }
      names = nn;
    }
    if (!(names[n] = strdup(de->d_name))) {
      rc = -1;
      break;
    }
    n++;
  }
  for (size_t i = 0; i < n; i++) {
    if (rm_tree(fd, names[i], depth + 1) != 0) rc = -1;
    free(names[i]);
  }
  free(names);
  closedir(dp);
  if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0) rc = -1;
  return rc;
}

int td_fs_rm_tree(int dirfd, const char *name) { return rm_tree(dirfd, name, 0); }

/* The pid and the owner of a temporary's name after its prefix `.<name>.tmp-`:
 * `<pid>-<n>-<owner>`, or `<pid>-<n>` as versions before owners named them (*has_owner
 * false). false for anything else. */
static bool parse_temp(const char *s, long *pid, td_temp_owner *owner, bool *has_owner) {
  char *end;
  errno = 0;
  long long p = strtoll(s, &end, 10);
  if (errno || end == s || *end != '-' || p <= 0 || p > INT_MAX) return false;
  const char *c = end + 1, *digits = c;
  while (*c >= '0' && *c <= '9') c++;
  if (c == digits) return false;
  *pid = (long)p;
  *has_owner = *c == '-';
  if (!*has_owner) return *c == '\0';
  return td_temp_owner_parse(c + 1, owner);
}

void td_fs_remove_stale(int parentfd, const char *name) {
  size_t plen = strlen(name) + 6;
  char *pre = malloc(plen + 1);
  int fd = dup(parentfd);
  DIR *dp = fd < 0 ? NULL : fdopendir(fd);
  if (!pre || !dp) {
    free(pre);
    if (dp) closedir(dp);
    else if (fd >= 0) close(fd);
    return;
  }
  snprintf(pre, plen + 1, ".%s.tmp-", name);
  char **stale = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *de; (de = readdir(dp));) {
    if (strncmp(de->d_name, pre, plen) != 0) continue;
    long pid;
    td_temp_owner owner;
    bool has_owner;
    if (!parse_temp(de->d_name + plen, &pid, &owner, &has_owner)) continue;
    if (!td_temp_writer_gone(parentfd, de->d_name, pid, has_owner ? &owner : NULL)) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      char **s = realloc(stale, sizeof *s * cap);
      if (!s) break;
      stale = s;
    }
    if ((stale[n] = strdup(de->d_name))) n++;
  }
  closedir(dp);
  for (size_t i = 0; i < n; i++) {
    rm_tree(parentfd, stale[i], 0);
    free(stale[i]);
  }
  free(stale);
  free(pre);
}

int td_fs_open_temp(const char *path, char **tmp_out) {
  size_t cap = strlen(path) + 64;
  char *tmp = malloc(cap);
  if (!tmp) {
    errno = ENOMEM;
    return -1;
  }
  char *dir = td_fs_dir_of(path);
  int dirfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (dirfd >= 0) {
    const char *slash = strrchr(path, '/');
    td_fs_remove_stale(dirfd, slash ? slash + 1 : path);
    close(dirfd);
  }
  free(dir);
  /* Another process may hold a temporary of our name (a pid reused): try the next n. */
  for (int attempt = 0; attempt < 100 && td_fs_temp_name(tmp, cap, path); attempt++) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      td_temp_claim(fd); /* best effort: where locks are refused, the name tells */
      *tmp_out = tmp;
      return fd;
    }
    if (errno != EEXIST) break;
  }
  int saved = errno;
  free(tmp);
  errno = saved;
  return -1;
}

/* ------------------------------------------------------------------ the commits */

/* tmp to path: rename() over what is there when replace, else link(), which refuses an
 * existing path atomically (rename() where the file system has no hard links, after a
 * look that is not atomic there). -1 with errno (EEXIST: path exists). */
static int move_file(const char *tmp, const char *path, bool replace) {
  if (replace) return rename(tmp, path);
  if (link(tmp, path) == 0) return 0;
  if (errno != EPERM && errno != ENOTSUP && errno != ENOSYS) return -1;
  if (access(path, F_OK) == 0) return errno = EEXIST, -1;
  return rename(tmp, path);
}

int td_fs_commit_file(const char *tmp, const char *path, bool replace, int32_t flags) {
  int rc = move_file(tmp, path, replace), err = errno;
  if (rc != 0 || !replace) unlink(tmp); /* after a link, or a failure: the name goes */
  if (rc == 0) {
    char *dir = td_fs_dir_of(path);
    if (dir) td_fs_sync_dir(dir, flags); /* best effort: some file systems refuse it */
    free(dir);
  }
  errno = err;
  return rc;
}

/* fd stays open (its lock held: td_temp_claim) until tmp has its final name, so no
 * sweep takes the finished temporary for a dead one's. */
int td_fs_publish(int fd, const char *tmp, const char *path, int32_t flags) {
  if (td_fs_sync(fd, flags) != 0) {
    int err = errno;
    close(fd);
    unlink(tmp);
    errno = err;
    return -1;
  }
  int rc = td_fs_commit_file(tmp, path, true, flags), err = errno;
  if (close(fd) != 0 && rc == 0) rc = -1, err = errno;
  errno = err;
  return rc;
}

/* The folder tmp to name (both in parentfd): renameat2's RENAME_NOREPLACE when nothing
 * is there, RENAME_EXCHANGE over a folder when replace (*replaced: the old one is at tmp
 * now). Where the file system has neither: a plain rename (it fails over a non-empty
 * folder), or the old folder moved away to old first (a crash between the two renames
 * leaves it at old, not at name). -1 with errno (EEXIST: name exists, replace unset). */
static int move_dir(int parentfd, const char *tmp, const char *name, const char *old,
                    bool replace, bool *replaced) {
  *replaced = false;
  for (int tries = 0; tries < 4; tries++) {
    struct stat st;
    bool exists = fstatat(parentfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && !replace) return errno = EEXIST, -1;
    if (!exists) {
      if (renameat2(parentfd, tmp, parentfd, name, RENAME_NOREPLACE) == 0) return 0;
      if (errno == EEXIST) continue;
      if (errno != EINVAL && errno != ENOSYS) return -1;
      return renameat(parentfd, tmp, parentfd, name);
    }
    if (renameat2(parentfd, tmp, parentfd, name, RENAME_EXCHANGE) == 0) {
      *replaced = true;
      return 0;
    }
    if (errno == ENOENT) continue;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    if (renameat(parentfd, name, parentfd, old) != 0) return -1;
    if (renameat(parentfd, tmp, parentfd, name) != 0) {
      int e = errno;
      renameat(parentfd, old, parentfd, name);
      errno = e;
      return -1;
    }
    *replaced = true;
    return 0;
  }
  return -1;
}

int td_fs_commit_dir(int parentfd, const char *tmp, const char *name, const char *old,
                     bool replace, int32_t flags, bool *moved) {
  bool replaced;
  *moved = move_dir(parentfd, tmp, name, old, replace, &replaced) == 0;
  if (!*moved) return -1;
  int rc = td_fs_sync(parentfd, flags), err = errno;
  if (replaced) { /* the old folder: at tmp (exchanged) or at old (moved away) */
    td_fs_rm_tree(parentfd, tmp);
    td_fs_rm_tree(parentfd, old);
  }
  errno = err;
  return rc;
}

/* ------------------------------------------------------------- whole files */

/* The one public door to the commit above, for files the Lua side writes whole (tdflow's
 * --report, plugins' outputs): the same temporary, fsync and rename as every save. */
TD_EXPORT int32_t td_fs_write_file(const char *path, const char *bytes, int64_t n, int32_t flags) {
  if (!path || !*path || n < 0 || (n > 0 && !bytes))
    return td_fail(TD_EINVAL, "write_file: an empty path, a negative length or NULL bytes");
  if (flags & ~(int32_t)TD_MEMMAP_NO_FSYNC)
    return td_fail(TD_EINVAL, "write_file: unknown flags %d (only TD_MEMMAP_NO_FSYNC)", (int)flags);
  char *tmp = NULL;
  int fd = td_fs_open_temp(path, &tmp);
  if (fd < 0)
    return td_fail(TD_EIO, "write_file: cannot create a temporary beside '%s': %s", path, strerror(errno));
  int32_t st = 0;
  if (!td_fs_write_all(fd, bytes, n)) {
    st = td_fail(TD_EIO, "write_file: cannot write '%s': %s", tmp, strerror(errno));
    close(fd);
    unlink(tmp);
  } else if (td_fs_publish(fd, tmp, path, flags) != 0) {
    st = td_fail(TD_EIO, "write_file: cannot replace '%s': %s", path, strerror(errno));
  }
  free(tmp);
  return st;
}

/* ------------------------------------------------------------------- the syncs */

int td_fs_sync(int fd, int32_t flags) {
  return (flags & TD_MEMMAP_NO_FSYNC) ? 0 : fsync(fd);
}

int td_fs_sync_dir(const char *dir, int32_t flags) {
  if (flags & TD_MEMMAP_NO_FSYNC) return 0;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

char *td_fs_dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}
