/*
 * signals.c: Ctrl-C for hosts. A Lua host cannot run Lua from a signal handler, so
 * td_signal_watch installs a handler that only counts deliveries; the host polls
 * td_signal_count between batches and unwinds cleanly (workers stopped, the sink
 * aborted) instead of dying with a half-written output. The handler is installed
 * without SA_RESTART, so a blocking wait (a worker's poll) returns EINTR at once.
 */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

enum { MAX_SIGNAL = 65 };
static atomic_int counts[MAX_SIGNAL];

static void count_signal(int signo) {
  if (signo > 0 && signo < MAX_SIGNAL) atomic_fetch_add(&counts[signo], 1);
}

TD_EXPORT int32_t td_signal_watch(int32_t signo) {
  if (signo <= 0 || signo >= MAX_SIGNAL)
    return td_fail(TD_EINVAL, "signal_watch: signal %d is out of range 1..%d", signo, MAX_SIGNAL - 1);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = count_signal;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signo, &sa, NULL) != 0)
    return td_fail(TD_EINVAL, "signal_watch: cannot watch signal %d", signo);
  return TD_OK;
}

TD_EXPORT int32_t td_signal_count(int32_t signo) {
  if (signo <= 0 || signo >= MAX_SIGNAL) return 0;
  return atomic_load(&counts[signo]);
}
