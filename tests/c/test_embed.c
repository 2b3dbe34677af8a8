/*
 * test_embed.c: a C host embedding LuaJIT that opens a Lua state, uses the library
 * with its thread pool, closes the state, and does it again, many times. Closing the
 * state unloads libtensordict.so (ffi.load's handle is collected); the library must
 * leave no thread behind (one woken by a signal inside unmapped code aborted the
 * process with "The futex facility returned an unexpected error code") and give its
 * cached blocks back (resident memory stays flat over the cycles).
 *
 * Not linked with libtensordict on purpose: the Lua code loads it (TENSORDICT_LIB, set
 * by run-tests.sh, or build/libtensordict.so), so closing the state really unloads it.
 * 100 cycles: each must start the pool's threads and end with none left; resident memory
 * after cycle 100 stays within 2 MiB of that after cycle 10.
 * Prints "N passed, N failed" like the other C tests (no check.h: it needs the library).
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ASan's allocator and quarantine (256 MiB) keep growing resident memory over 100
 * states whatever the library does, so the flat-RSS check runs in plain builds only. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_CHECKED 0
#else
#define RSS_CHECKED 1
#endif
#define RSS_BOUND_KB (2 * 1024)

static int passed, failed;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (cond) {                                            \
      passed++;                                            \
    } else {                                               \
      failed++;                                            \
      fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);      \
      fprintf(stderr, __VA_ARGS__);                        \
      fputc('\n', stderr);                                 \
    }                                                      \
  } while (0)

/* A field of /proc/self/status ("Threads", "VmRSS"), as a number. */
static long status_field(const char *name) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t n = strlen(name);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, name, n) == 0 && line[n] == ':') v = strtol(line + n + 1, NULL, 10);
  if (f) fclose(f);
  return v;
}

static void on_signal(int signo) { (void)signo; }

/* Uses the library the way a pipeline does: threads (2), large temporaries (cached
 * blocks), a TensorDict. */
static const char *SCRIPT =
    "package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path\n"
    "local T = require('tensordict')\n"
    "T.set_num_threads(2)\n"
    "local x = T.rand(1000000)\n"
    "for _ = 1, 4 do x = (x + 1):sqrt() end\n"
    "local td = T.TensorDict({ a = x:view(1000, 1000), b = T.zeros(1000) }, { 1000 })\n"
    "assert((td * 2).a:sum() > 0)\n";

int main(void) {
  if (!getenv("TENSORDICT_LIB") && access("build/libtensordict.so", R_OK) == 0)
    setenv("TENSORDICT_LIB", "build/libtensordict.so", 1);
  signal(SIGUSR1, on_signal);
  alarm(300); /* a thread left in unloaded code can hang the process: fail, don't hang */
  long threads_before = status_field("Threads"), rss_early = 0;
  int open_without_pool = 0, threads_left = 0; /* cycles that went wrong, counted */
  /* TD_EMBED_CYCLES: fewer cycles under valgrind (make valgrind), whose own heap makes
   * resident memory meaningless, so the flat-RSS check needs the full 100 */
  const char *env_cycles = getenv("TD_EMBED_CYCLES");
  const int CYCLES = env_cycles ? atoi(env_cycles) : 100;
  for (int cycle = 1; cycle <= CYCLES; cycle++) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    if (luaL_dostring(L, SCRIPT) != 0) {
      CHECK(0, "cycle %d: %s", cycle, lua_tostring(L, -1));
      lua_close(L);
      break;
    }
    /* the pool's workers ran this cycle's kernels: they must exist now, and be gone below */
    long threads_open = status_field("Threads");
    if (threads_open <= threads_before) open_without_pool++;
    lua_close(L); /* unloads libtensordict.so */
    kill(getpid(), SIGUSR1); /* wakes any thread left sleeping in the unloaded code */
    long threads = status_field("Threads");
    if (threads != threads_before) threads_left++;
    if (cycle == 10) rss_early = status_field("VmRSS");
  }
  CHECK(open_without_pool == 0, "%d of %d cycles ran without the pool's threads",
        open_without_pool, CYCLES);
  CHECK(threads_left == 0, "%d of %d cycles left threads behind after closing the state",
        threads_left, CYCLES);
  /* Flat: each cycle maps the library and allocates tens of MiB; 90 cycles that kept even
   * one cached block each would pass the bound many times over. A few hundred kB of
   * allocator and loader bookkeeping are allowed. */
  long rss_late = status_field("VmRSS"); /* kB */
  if (RSS_CHECKED && CYCLES >= 100)
    CHECK(rss_late - rss_early < RSS_BOUND_KB,
          "resident memory grew from %ld kB (cycle 10) to %ld kB (cycle %d)", rss_early,
          rss_late, CYCLES);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
