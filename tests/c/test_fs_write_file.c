/* test_fs_write_file.c: td_fs_write_file, the commit of files written whole (tdflow's
 * --report, plugins' outputs through flow.kit): the bytes land whole, an old file is
 * replaced, no temporary is left, a dead process's temporary is swept, and every refusal
 * leaves the path as it was with a message naming it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"

/* The file holds exactly n bytes of text. */
static bool holds(const char *path, const char *text, size_t n) {
  char buf[256];
  int fd = open(path, O_RDONLY);
  if (fd < 0) return false;
  ssize_t r = read(fd, buf, sizeof buf);
  close(fd);
  return r == (ssize_t)n && memcmp(buf, text, n) == 0;
}

/* Entries of root (without . and ..). */
static int entries(void) {
  DIR *dp = opendir(root);
  int n = 0;
  for (struct dirent *de; dp && (de = readdir(dp));) n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
  if (dp) closedir(dp);
  return n;
}

static void test_writes_and_replaces(void) {
  const char *p = at("report.json");
  CHECK_EQ_I(td_fs_write_file(p, "{\"a\": 1}\n", 9, 0), 0);
  CHECK(holds(p, "{\"a\": 1}\n", 9));
  CHECK_EQ_I(td_fs_write_file(p, "b\0c", 3, TD_MEMMAP_NO_FSYNC), 0); /* any bytes, NUL too */
  CHECK(holds(p, "b\0c", 3));
  CHECK_EQ_I(td_fs_write_file(p, NULL, 0, 0), 0); /* empty */
  CHECK(holds(p, "", 0));
  CHECK_EQ_I(entries(), 1); /* no temporary left */
  unlink(p);
}

static void test_sweeps_dead_temporaries(void) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  char dead[512];
  snprintf(dead, sizeof dead, "%s/.out.csv.tmp-%d-0", root, (int)child);
  int fd = open(dead, O_WRONLY | O_CREAT, 0644);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  CHECK_EQ_I(td_fs_write_file(at("out.csv"), "x\n", 2, 0), 0);
  CHECK(access(dead, F_OK) != 0);
  CHECK_EQ_I(entries(), 1);
  unlink(at("out.csv"));
}

static void test_refusals(void) {
  CHECK_EQ_I(td_fs_write_file(at("missing/out.csv"), "x", 1, 0), TD_EIO);
  CHECK_ERROR("write_file: cannot create a temporary beside '");
  CHECK_ERROR("missing/out.csv': No such file or directory");
  CHECK(mkdir(at("folder"), 0755) == 0);
  CHECK_EQ_I(td_fs_write_file(at("folder"), "x", 1, 0), TD_EIO);
  CHECK_ERROR("folder': Is a directory");
  CHECK_EQ_I(entries(), 1); /* the folder, and no temporary */
  rmdir(at("folder"));
  CHECK_EQ_I(td_fs_write_file(at("x"), "x", -1, 0), TD_EINVAL);
  CHECK_EQ_I(td_fs_write_file(at("x"), NULL, 1, 0), TD_EINVAL);
  CHECK_EQ_I(td_fs_write_file("", "x", 1, 0), TD_EINVAL);
  CHECK_EQ_I(td_fs_write_file(at("x"), "x", 1, TD_MEMMAP_EXISTSOK), TD_EINVAL);
  CHECK_ERROR("write_file: unknown flags 1 (only TD_MEMMAP_NO_FSYNC)");
  CHECK_EQ_I(entries(), 0);
}

int main(void) {
  strcpy(root, "/tmp/td_test_fs_XXXXXX");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  test_writes_and_replaces();
  test_sweeps_dead_temporaries();
  test_refusals();
  rmdir(root);
  CHECK_SUMMARY();
}
