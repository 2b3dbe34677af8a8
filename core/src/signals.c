/*
 * signals.c: Ctrl-C, SIGTERM and SIGHUP for hosts and runs. A Lua host cannot run Lua
 * from a signal handler, so td_signal_watch (for good) and td_signal_take (for a run,
 * undone by td_signal_restore) install a handler that only counts deliveries; the host
 * or flow.run polls td_signal_count between batches and unwinds cleanly (workers
 * stopped, the sink aborted) instead of dying with a half-written output. The handler is
 * installed without SA_RESTART, so a blocking wait (a worker's poll, a read at a
 * prompt) returns EINTR at once. Linux gives a signal sent to the process to its main
 * thread first, where Lua runs, so the kernel pool's threads do not hide it.
 */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

enum { MAX_SIGNAL = 65 };
static atomic_int counts[MAX_SIGNAL];
/* td_signal_take's replaced actions; Lua calls these from one thread. */
static struct sigaction replaced[MAX_SIGNAL];
static bool taken[MAX_SIGNAL];

static void count_signal(int signo) {
  if (signo > 0 && signo < MAX_SIGNAL) atomic_fetch_add(&counts[signo], 1);
}

static int32_t check_signo(const char *call, int32_t signo) {
  if (signo <= 0 || signo >= MAX_SIGNAL)
    return td_fail(TD_EINVAL, "%s: signal %d is out of range 1..%d", call, signo, MAX_SIGNAL - 1);
  return TD_OK;
}

static int32_t install(const char *call, int32_t signo, struct sigaction *old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = count_signal;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signo, &sa, old) != 0)
    return td_fail(TD_EINVAL, "%s: cannot watch signal %d", call, signo);
  return TD_OK;
}

TD_EXPORT int32_t td_signal_watch(int32_t signo) {
  int32_t rc = check_signo("signal_watch", signo);
  if (rc) return rc;
  taken[signo] = false; /* for good: a run's restore must not undo it */
  return install("signal_watch", signo, NULL);
}

TD_EXPORT int32_t td_signal_count(int32_t signo) {
  if (signo <= 0 || signo >= MAX_SIGNAL) return 0;
  return atomic_load(&counts[signo]);
}

static bool counts_already(const struct sigaction *sa) {
  return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == count_signal;
}

TD_EXPORT int32_t td_signal_take(int32_t signo) {
  int32_t rc = check_signo("signal_take", signo);
  if (rc) return rc;
  struct sigaction now;
  if (sigaction(signo, NULL, &now) != 0)
    return td_fail(TD_EINVAL, "signal_take: cannot read the action of signal %d", signo);
  if (counts_already(&now)) return TD_SIGNAL_LEFT;
  if (!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN) return TD_SIGNAL_LEFT;
  if ((rc = install("signal_take", signo, &replaced[signo]))) return rc;
  taken[signo] = true;
  return !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL ? TD_SIGNAL_FROM_DEFAULT
                                                                   : TD_SIGNAL_FROM_HANDLER;
}

TD_EXPORT int32_t td_signal_restore(int32_t signo) {
  int32_t rc = check_signo("signal_restore", signo);
  if (rc || !taken[signo]) return rc;
  taken[signo] = false;
  if (sigaction(signo, &replaced[signo], NULL) != 0)
    return td_fail(TD_EINVAL, "signal_restore: cannot restore the action of signal %d", signo);
  return TD_OK;
}

TD_EXPORT int32_t td_signal_raise(int32_t signo) {
  int32_t rc = check_signo("signal_raise", signo);
  if (rc) return rc;
  if (raise(signo) != 0) return td_fail(TD_EINVAL, "signal_raise: cannot send signal %d", signo);
  return TD_OK;
}
