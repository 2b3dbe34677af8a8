/*
 * temp_owner.c: who wrote a temporary and whether that writer is provably gone (see
 * temp_owner.h). Everything read here is best effort: what cannot be read is unknown,
 * and an unknown never proves a writer gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "temp_owner.h"

static uint64_t boot_of_this_kernel(void) {
  char text[64] = {0};
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  /* a UUID: its first 16 hex digits (dashes skipped) are random enough to tell boots */
  uint64_t v = 0;
  int digits = 0;
  for (const char *c = text; *c && digits < 16; c++) {
    int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
    if (d < 0) continue;
    v = v << 4 | (uint64_t)d;
    digits++;
  }
  return digits == 16 ? v : 0;
}

static uint32_t hash_of_host(void) {
  char name[256] = {0};
  if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return 0;
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 16777619u;
  return h ? h : 1; /* 0 means unknown */
}

static uint32_t pid_namespace(void) {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return (uint32_t)st.st_ino;
}

void td_temp_owner_self(td_temp_owner *o) {
  o->boot = boot_of_this_kernel();
  o->host = hash_of_host();
  o->pidns = pid_namespace();
}

void td_temp_owner_format(const td_temp_owner *o, char out[TD_TEMP_OWNER_DIGITS + 1]) {
  snprintf(out, TD_TEMP_OWNER_DIGITS + 1, "%016" PRIx64 "%08" PRIx32 "%08" PRIx32, o->boot,
           o->host, o->pidns);
}

bool td_temp_owner_parse(const char *s, td_temp_owner *o) {
  uint64_t parts[3] = {0, 0, 0};
  const int widths[3] = {16, 8, 8};
  for (int p = 0; p < 3; p++)
    for (int k = 0; k < widths[p]; k++, s++) {
      int d = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;
      if (d < 0) return false;
      parts[p] = parts[p] << 4 | (uint64_t)d;
    }
  if (*s) return false;
  *o = (td_temp_owner){parts[0], (uint32_t)parts[1], (uint32_t)parts[2]};
  return true;
}

/* Open-file-description locks: unlike fcntl's process locks they are not dropped when
 * another descriptor of the file closes, and unlike flock they reach NFS servers. A
 * folder cannot be opened for writing, so it gets a read lock; the test below asks for
 * a write lock, which any lock conflicts with. */
int td_temp_claim(int fd) {
  int mode = fcntl(fd, F_GETFL);
  if (mode < 0) return -1;
  struct flock fl = {.l_type = (mode & O_ACCMODE) == O_RDONLY ? F_RDLCK : F_WRLCK,
                     .l_whence = SEEK_SET};
  return fcntl(fd, F_OFD_SETLK, &fl);
}

/* 1: a process holds the temporary (td_temp_claim), 0: nobody does, -1: unknown (it
 * cannot be opened, or the file system answers no lock question). */
static int held(int parentfd, const char *name) {
  int fd = openat(parentfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  int rc = fcntl(fd, F_OFD_GETLK, &fl);
  close(fd);
  if (rc != 0) return -1;
  return fl.l_type != F_UNLCK;
}

/* Unlocked, and last changed long enough ago that its writer had time to lock it. */
static bool unlocked_and_settled(int parentfd, const char *name) {
  struct stat st;
  if (fstatat(parentfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  struct timespec now;
  if (clock_gettime(CLOCK_REALTIME, &now) != 0) return false;
  if (now.tv_sec - st.st_mtim.tv_sec <= TD_TEMP_SETTLE_SECONDS) return false;
  return held(parentfd, name) == 0;
}

/* Whether process pid of this PID namespace is gone: no such process, or a zombie (it
 * was killed and writes nothing, but its parent has not reaped it yet). Unknown: alive. */
static bool pid_gone_here(long pid) {
  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return true;
  char path[64], text[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  /* "pid (comm) S ...": the state follows the last ')', comm may hold anything */
  const char *paren = strrchr(text, ')');
  return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

bool td_temp_writer_gone(int parentfd, const char *name, long pid, const td_temp_owner *owner) {
  if (!owner) return pid != (long)getpid() && pid_gone_here(pid);
  td_temp_owner me;
  td_temp_owner_self(&me);
  if (owner->boot && owner->boot == me.boot) {
    if (owner->pidns && owner->pidns == me.pidns) {
      if (pid == (long)getpid()) return false; /* this process may be writing it */
      return pid_gone_here(pid) || unlocked_and_settled(parentfd, name);
    }
    return unlocked_and_settled(parentfd, name);
  }
  if (owner->boot && me.boot && owner->host && owner->host == me.host)
    return unlocked_and_settled(parentfd, name);
  return false;
}
