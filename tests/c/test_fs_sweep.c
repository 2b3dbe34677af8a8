/* test_fs_sweep.c: the sweep of stale temporaries (core/store/fs.c, temp_owner.c)
 * removes only what is provably dead. A writer forked and killed but not reaped (a
 * zombie) is dead; a live one's temporary stays. Temporaries whose names say they
 * were written elsewhere are forged from a real one's owner: another machine's stay
 * whatever their lock says; this host's before a reboot, and this kernel's in another
 * PID namespace, go when nobody holds them locked and they have settled, and stay while
 * locked or fresh. Names from before owners were written keep the old rule. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "dicts.h"

static int rm_one(const char *p, const struct stat *s, int flag, struct FTW *f) {
  (void)s, (void)flag, (void)f;
  return remove(p);
}
static void rmrf(const char *path) { nftw(path, rm_one, 64, FTW_DEPTH | FTW_PHYS); }

/* The one entry of root whose name starts with prefix, copied to out; false if none. */
static bool find_entry(const char *prefix, char *out, size_t cap) {
  DIR *dp = opendir(root);
  bool found = false;
  for (struct dirent *de; dp && (de = readdir(dp));)
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
      snprintf(out, cap, "%s", de->d_name);
      found = true;
    }
  if (dp) closedir(dp);
  return found;
}

/* A save of a small container to root/out (EXISTSOK), which sweeps first. */
static void save_out(void) {
  const int64_t n = 2;
  td_dict *d = td_dict_new(1, &n);
  put(d, "x", td_tensor_full(1, &n, TD_FLOAT32, 1));
  td_dict *r = td_dict_memmap(d, at("out"), TD_MEMMAP_EXISTSOK, 0);
  CHECK(r != NULL);
  td_dict_release(r), td_dict_release(d);
}

/* Makes the folder name in root, last changed `age` seconds ago; its path (kept for
 * the test's length). */
static const char *forge(const char *name, int age) {
  static char paths[16][640];
  static int next;
  char *p = paths[next++ % 16];
  snprintf(p, sizeof paths[0], "%s/%s", root, name);
  CHECK(mkdir(p, 0755) == 0);
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= age;
  t[1] = t[0];
  CHECK(utimensat(AT_FDCWD, p, t, AT_SYMLINK_NOFOLLOW) == 0);
  return p;
}

/* Holds name locked as a live writer does (an open-file-description lock); the
 * descriptor to close. */
static int lock_it(const char *p) {
  int fd = open(p, O_RDONLY | O_DIRECTORY);
  struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
  CHECK(fd >= 0 && fcntl(fd, F_OFD_SETLK, &fl) == 0);
  return fd;
}

/* The process state letter of pid ('Z' for a zombie), from /proc. */
static char state_of(pid_t pid) {
  char path[64], text[512] = {0};
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return '?';
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  const char *paren = n > 0 ? strrchr(text, ')') : NULL;
  return paren ? paren[2] : '?';
}

/* The owner digits of the temporaries this machine writes (a real writer's name). */
static char owner[64];

static void test_killed_writer(void) {
  int ready[2];
  CHECK(pipe(ready) == 0);
  pid_t child = fork();
  if (child == 0) { /* a MemmapSink's open: the temporary folder, then a long run */
    td_memmap_append *a = td_memmap_append_open(at("out"), TD_MEMMAP_EXISTSOK);
    char c = a ? 1 : 0;
    if (write(ready[1], &c, 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char c = 0;
  CHECK(read(ready[0], &c, 1) == 1 && c == 1);
  close(ready[0]), close(ready[1]);
  char name[512], prefix[64];
  snprintf(prefix, sizeof prefix, ".out.tmp-%d-", (int)child);
  CHECK(find_entry(prefix, name, sizeof name));
  /* `.out.tmp-<pid>-<n>-<owner>`: the owner is 32 hex digits after the counter */
  const char *o = strrchr(name, '-');
  CHECK(o && strlen(o + 1) == 32);
  if (o) snprintf(owner, sizeof owner, "%s", o + 1);
  save_out(); /* the writer lives: its temporary stays */
  CHECK(exists(at(name)));
  kill(child, SIGKILL);
  for (int i = 0; i < 2000 && state_of(child) != 'Z'; i++) usleep(1000);
  CHECK_EQ_I(state_of(child), 'Z'); /* killed, not reaped */
  save_out();
  CHECK(!exists(at(name)));
  waitpid(child, NULL, 0);
}

/* owner with the boot digits (0-15), the host's (16-23) or the namespace's (24-31)
 * changed. */
static const char *changed(bool boot, bool host, bool ns) {
  static char bufs[4][64];
  static int next;
  char *b = bufs[next++ % 4];
  snprintf(b, 64, "%s", owner);
  if (boot) b[0] = b[0] == 'a' ? 'b' : 'a';
  if (host) b[16] = b[16] == 'a' ? 'b' : 'a';
  if (ns) b[24] = b[24] == 'a' ? 'b' : 'a';
  return b;
}

static void test_forged_owners(void) {
  char n[512];
  int me = (int)getpid();
  /* another machine: kept, unlocked and old as it is */
  snprintf(n, sizeof n, ".out.tmp-%d-1-%s", me, changed(true, true, false));
  const char *foreign = forge(n, 3600);
  /* this host before a reboot: gone, unless locked (two machines share the name) */
  snprintf(n, sizeof n, ".out.tmp-%d-2-%s", me, changed(true, false, false));
  const char *rebooted = forge(n, 3600);
  snprintf(n, sizeof n, ".out.tmp-%d-3-%s", me, changed(true, false, false));
  const char *twin = forge(n, 3600);
  /* this kernel, another PID namespace (its pid 1 means nothing here) */
  snprintf(n, sizeof n, ".out.tmp-1-4-%s", changed(false, false, true));
  const char *ns_dead = forge(n, 3600);
  snprintf(n, sizeof n, ".out.tmp-1-5-%s", changed(false, false, true));
  const char *ns_live = forge(n, 3600);
  snprintf(n, sizeof n, ".out.tmp-1-6-%s", changed(false, false, true));
  const char *ns_fresh = forge(n, 0); /* maybe made a moment ago, not locked yet */
  /* this namespace: a live pid whose temporary nobody holds (the pid was reused) */
  snprintf(n, sizeof n, ".out.tmp-%d-7-%s", (int)getppid(), owner);
  const char *reused = forge(n, 3600);
  /* not an owner: kept */
  snprintf(n, sizeof n, ".out.tmp-%d-8-%.31s", me, owner);
  const char *short_owner = forge(n, 3600);
  snprintf(n, sizeof n, ".out.tmp-%d-9-%sX", me, owner);
  const char *long_owner = forge(n, 3600);
  int held[2] = {lock_it(twin), lock_it(ns_live)};
  save_out();
  CHECK(exists(foreign));
  CHECK(!exists(rebooted));
  CHECK(exists(twin));
  CHECK(!exists(ns_dead));
  CHECK(exists(ns_live));
  CHECK(exists(ns_fresh));
  CHECK(!exists(reused));
  CHECK(exists(short_owner) && exists(long_owner));
  /* released, the locked ones go at the next save */
  close(held[0]), close(held[1]);
  save_out();
  CHECK(!exists(twin) && !exists(ns_live));
  CHECK(exists(foreign) && exists(ns_fresh));
  rmrf(foreign), rmrf(ns_fresh), rmrf(short_owner), rmrf(long_owner);
}

/* Names without an owner (written by versions before owners): a dead pid's go, a live
 * one's stay, as those versions judged them. */
static void test_old_names(void) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  char n[128];
  snprintf(n, sizeof n, ".out.tmp-%d-0", (int)child);
  const char *dead = forge(n, 0);
  snprintf(n, sizeof n, ".out.tmp-%d-0", (int)getppid());
  const char *live = forge(n, 0);
  save_out();
  CHECK(!exists(dead));
  CHECK(exists(live));
  rmrf(live);
}

/* This process's own live temporaries stay while it writes them. */
static void test_own_writer(void) {
  td_memmap_append *a = td_memmap_append_open(at("out"), TD_MEMMAP_EXISTSOK);
  CHECK(a != NULL);
  char name[512], prefix[64];
  snprintf(prefix, sizeof prefix, ".out.tmp-%d-", (int)getpid());
  CHECK(find_entry(prefix, name, sizeof name));
  save_out();
  CHECK(exists(at(name)));
  td_memmap_append_free(a); /* aborts: the temporary goes */
  CHECK(!exists(at(name)));
}

int main(void) {
  strcpy(root, "/tmp/td_test_sweep_XXXXXX");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  test_killed_writer();
  if (strlen(owner) == 32) test_forged_owners();
  test_old_names();
  test_own_writer();
  rmrf(root);
  CHECK_SUMMARY();
}
