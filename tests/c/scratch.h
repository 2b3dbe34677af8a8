/* scratch.h: what the tests that write files share: root, the mkdtemp folder each test's
 * main makes for everything it writes; at(name), a path inside it (eight rotating
 * buffers, so a call may take several); exists(path), without following a last link. */
#ifndef TD_TEST_SCRATCH_H
#define TD_TEST_SCRATCH_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>

static char root[64];

static inline const char *at(const char *name) {
  static char bufs[8][640];
  static int next;
  char *b = bufs[next++ % 8];
  snprintf(b, sizeof bufs[0], "%s/%s", root, name);
  return b;
}

static inline bool exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

#endif
