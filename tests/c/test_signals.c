/* test_signals.c: the counting handler hosts and runs install (core/src/signals.c):
 * watched for good, taken for a run and restored, never taking an ignored signal or
 * one counted already, and a raise that counts where the handler is, or ends a child
 * where the default action is back. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static void (*action_of(int signo))(int) {
  struct sigaction sa;
  sigaction(signo, NULL, &sa);
  return sa.sa_handler;
}

static void test_take_and_restore(void) {
  signal(SIGUSR1, SIG_DFL);
  CHECK_EQ_I(td_signal_take(SIGUSR1), TD_SIGNAL_FROM_DEFAULT);
  CHECK(action_of(SIGUSR1) != SIG_DFL);
  int before = td_signal_count(SIGUSR1);
  CHECK_EQ_I(td_signal_raise(SIGUSR1), 0);
  CHECK_EQ_I(td_signal_count(SIGUSR1), before + 1);
  /* taken already: a nested run leaves it, and only the outer restore undoes it */
  CHECK_EQ_I(td_signal_take(SIGUSR1), TD_SIGNAL_LEFT);
  CHECK_EQ_I(td_signal_restore(SIGUSR1), 0);
  CHECK(action_of(SIGUSR1) == SIG_DFL);
  CHECK_EQ_I(td_signal_restore(SIGUSR1), 0); /* nothing left to restore */
  CHECK(action_of(SIGUSR1) == SIG_DFL);
}

static void other_handler(int signo) { (void)signo; }

static void test_what_is_left_alone(void) {
  signal(SIGUSR2, SIG_IGN); /* nohup, or a background job's SIGINT */
  CHECK_EQ_I(td_signal_take(SIGUSR2), TD_SIGNAL_LEFT);
  CHECK(action_of(SIGUSR2) == SIG_IGN);
  CHECK_EQ_I(td_signal_restore(SIGUSR2), 0);
  CHECK(action_of(SIGUSR2) == SIG_IGN);
  /* another handler (LuaJIT's interrupt hook) is replaced for the run, then put back */
  signal(SIGUSR2, other_handler);
  CHECK_EQ_I(td_signal_take(SIGUSR2), TD_SIGNAL_FROM_HANDLER);
  CHECK_EQ_I(td_signal_restore(SIGUSR2), 0);
  CHECK(action_of(SIGUSR2) == other_handler);
  /* watched for good by a host: a run takes nothing and restores nothing */
  CHECK_EQ_I(td_signal_watch(SIGUSR2), 0);
  CHECK_EQ_I(td_signal_take(SIGUSR2), TD_SIGNAL_LEFT);
  CHECK_EQ_I(td_signal_restore(SIGUSR2), 0);
  int before = td_signal_count(SIGUSR2);
  CHECK_EQ_I(td_signal_raise(SIGUSR2), 0);
  CHECK_EQ_I(td_signal_count(SIGUSR2), before + 1);
  signal(SIGUSR2, SIG_DFL);
}

/* A taken SIGTERM restored to its default and raised again ends the process as SIGTERM
 * (what flow.run does after its clean-up). */
static void test_raise_ends_by_the_signal(void) {
  pid_t child = fork();
  if (child == 0) {
    signal(SIGTERM, SIG_DFL);
    if (td_signal_take(SIGTERM) != TD_SIGNAL_FROM_DEFAULT) _exit(3);
    raise(SIGTERM); /* counted, not fatal */
    if (td_signal_count(SIGTERM) != 1) _exit(4);
    td_signal_restore(SIGTERM);
    td_signal_raise(SIGTERM);
    _exit(5);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
}

static void test_refusals(void) {
  CHECK(td_signal_take(0) == TD_EINVAL);
  CHECK_ERROR("signal_take: signal 0 is out of range 1..64");
  CHECK(td_signal_restore(65) == TD_EINVAL);
  CHECK_ERROR("signal_restore: signal 65 is out of range 1..64");
  CHECK(td_signal_raise(-1) == TD_EINVAL);
  CHECK_ERROR("signal_raise: signal -1 is out of range 1..64");
  CHECK(td_signal_watch(SIGKILL) == TD_EINVAL);
  CHECK_ERROR("signal_watch: cannot watch signal 9");
  CHECK_EQ_I(td_signal_count(99), 0);
}

int main(void) {
  test_take_and_restore();
  test_what_is_left_alone();
  test_raise_ends_by_the_signal();
  test_refusals();
  CHECK_SUMMARY();
}
