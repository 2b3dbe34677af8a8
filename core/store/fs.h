/*
 * fs.h: the file writing that memmap saves, appends and consolidated files share
 * (fs.c): whole writes, tensors written in C order in bounded memory, the
 * temporaries a save writes before it renames (`.<name>.tmp-<pid>-<n>-<owner>`) and
 * their cleanup, and fsync of files and folders.
 */
#ifndef TD_STORE_FS_H
#define TD_STORE_FS_H

#include <stddef.h>

#include "../src/internal.h"

/* Bytes a strided tensor is gathered in before it is written: the most memory a write
 * of one takes, whatever its size. */
enum { TD_FS_CHUNK = 8 << 20 };
/* Folders td_fs_rm_tree descends at most: four times the deepest save (a stale
 * temporary is ours), and a bound on the recursion whatever a folder holds. */
enum { TD_FS_MAX_DEPTH = 1024 };

/* Reads n bytes at byte offset at of fd (pread), retrying interrupted and short reads.
 * false with errno set (EIO when the file ends first). */
bool td_fs_read_at(int fd, void *p, int64_t n, int64_t at);
/* Writes n bytes at fd's position, retrying interrupted and short writes. false with
 * errno set (ENOSPC when the disk takes nothing). */
bool td_fs_write_all(int fd, const void *p, int64_t n);
/* Copies t's elements in C order into dst's bytes from byte offset at (a multiple of
 * t's itemsize, room checked by the caller) with the copy kernel. 0 or its status. */
int32_t td_fs_gather(const td_tensor *t, td_storage *dst, int64_t at);
/* Writes t's bytes in C order at fd's position: contiguous runs as they are, the rest
 * gathered TD_FS_CHUNK bytes at most at a time through *buf (a heap block made on first
 * need; the caller releases it). false: errno, or *status when a kernel failed. */
bool td_fs_write_tensor(int fd, const td_tensor *t, td_storage **buf, int32_t *status);

/* The temporary sibling of path: path's folder part, then `.<name>.tmp-<pid>-<n>-<owner>`
 * with name path's last part, n from one counter of the process (no two temporaries of
 * a process meet) and owner this machine (temp_owner.h). false when it does not fit in
 * cap bytes. Whoever writes it holds it claimed (td_temp_claim) until it is committed
 * or removed. */
bool td_fs_temp_name(char *out, size_t cap, const char *path);
/* Removes the temporaries `.<name>.tmp-...` (files or folders) in parentfd whose writers
 * are provably gone (td_temp_writer_gone); a live writer's (this process's too) stays,
 * and so does one of another machine. */
void td_fs_remove_stale(int parentfd, const char *name);
/* Creates a new temporary sibling file of path (td_fs_temp_name), mode 0666 less the
 * umask as a plain new file gets, after removing path's stale temporaries; the
 * descriptor holds it claimed, so keep it open until the commit (td_fs_publish does).
 * The open descriptor, its path in *tmp_out (malloc'd), or -1 with errno set. */
int td_fs_open_temp(const char *path, char **tmp_out);
/* The commits: the one way a written temporary becomes durable under its final name
 * (a crash leaves the old content or the new, never a mix, and never a partial file).
 *
 * td_fs_commit_file: the temporary file tmp (written, synced and closed) takes the name
 * path, replacing what is there when replace, else refusing an existing path atomically
 * (link(); errno EEXIST). tmp's name is gone afterwards either way; on success path's
 * folder is synced (best effort). 0 or -1 with errno set. */
int td_fs_commit_file(const char *tmp, const char *path, bool replace, int32_t flags);
/* td_fs_publish: a temporary from td_fs_open_temp finished: fd synced (unless
 * TD_MEMMAP_NO_FSYNC) and closed, then committed over path (td_fs_commit_file with
 * replace). On failure tmp is removed. 0 or -1 with errno set. */
int td_fs_publish(int fd, const char *tmp, const char *path, int32_t flags);
/* td_fs_commit_dir: the temporary folder tmp (its content synced, children first) takes
 * the name name, both in parentfd: atomically exchanged with a folder there when
 * replace (the old one is then removed, via the spare name old where the file system
 * cannot exchange), else refused (errno EEXIST); then parentfd is synced. *moved: tmp
 * is at name now (a failure after it is the sync's). 0 or -1 with errno set. */
int td_fs_commit_dir(int parentfd, const char *tmp, const char *name, const char *old,
                     bool replace, int32_t flags, bool *moved);
/* Removes name under dirfd (a file, a link, or a folder and everything in it) without
 * following links. 0 or -1 (errno set). */
int td_fs_rm_tree(int dirfd, const char *name);

/* fsync of a file, skipped (0) when flags hold TD_MEMMAP_NO_FSYNC. 0 or -1 (errno). */
int td_fs_sync(int fd, int32_t flags);
/* fsync of the folder dir, so the names in it are durable; skipped likewise. */
int td_fs_sync_dir(const char *dir, int32_t flags);
/* The folder of path ("." when it names none, "/" for a name in the root), malloc'd;
 * NULL when out of memory. */
char *td_fs_dir_of(const char *path);

#endif
