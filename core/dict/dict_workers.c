/*
 * dict_workers.c: forked worker processes and their transport (the engine behind td:map and
 * flow.Map; the Lua side is lua/tensordict/workers.lua).
 *
 * Each worker has a SOCK_SEQPACKET socketpair to the parent (small fixed messages, and
 * an fd when a region is replaced) and two shared regions, memfds made before the fork
 * so both sides hold them: the input region (the parent packs batches there,
 * dict_ship.c's layout, and the worker unpacks views of it) and the output region (the
 * worker packs results or error text; the parent copies results out at once, so it never
 * keeps views of a region). Regions are reused batch after batch, so their pages fault
 * once; the writer grows one with ftruncate and the reader remaps when a message says
 * it grew.
 *
 * A worker's result may keep views of its input region (an identity function): those
 * leaves travel as references, not copies. If anything in the worker still holds the
 * input region when it replies (fn kept a view), the worker moves to a fresh memfd and
 * sends it with the reply, so the next batch cannot overwrite what was kept.
 *
 * A worker's death shows as end-of-file on its socket (siblings close every end that is
 * not theirs, so nobody else keeps it open); waitpid then names the exit status or the
 * signal. Children die with the parent (PR_SET_PDEATHSIG), ignore SIGINT (the parent
 * stops them), take SIGTERM and SIGHUP by the default action and leave through _exit
 * only.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dict_internal.h"

enum { MSG_JOB = 1, MSG_RESULT = 2, MSG_ERROR = 3, MSG_DONE = 4 };
enum { FLAG_NEW_INPUT = 1 };
#define REGION_QUANTUM ((int64_t)64 << 10)

typedef struct msg {
  int32_t type;
  int32_t flags;
  int64_t job;
  int64_t nbytes;       /* payload bytes in the sender's region (0: none) */
  int64_t region_bytes; /* the size of that region now */
} msg;

typedef struct slot {
  pid_t pid;
  int sock[2];        /* [0] the parent's end, [1] the worker's */
  int in_fd, out_fd;  /* memfds: batches to the worker, replies to the parent */
  td_storage *in, *out; /* this process's mappings (NULL until first needed) */
  int32_t busy;       /* parent: a job is out */
  int32_t dead;
  char *message;      /* the last error text or how the worker died */
  msg pending;        /* worker: the reply being prepared */
} slot;

struct td_workers {
  int32_t n;
  int32_t self;       /* -1 in the parent, the worker's index in a child */
  pid_t owner;        /* the parent's pid: only it kills and reaps */
  int32_t forked;
  int32_t next_poll;  /* the slot polled first next time (fairness) */
  slot *slots;
  struct td_workers *next_pool; /* every pool of this process, for children to close */
};

static td_workers *all_pools;

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void set_message(slot *s, const char *text, int64_t len) {
  free(s->message);
  s->message = malloc((size_t)len + 1);
  if (s->message) {
    memcpy(s->message, text, (size_t)len);
    s->message[len] = '\0';
  }
}

static int new_memfd(const char *call) {
  int fd = memfd_create("tensordict-worker", MFD_CLOEXEC);
  if (fd < 0) td_fail(TD_EIO, "%s: cannot create shared memory: %s", call, strerror(errno));
  return fd;
}

/* A mapping of the first bytes of fd (kept by whoever holds the storage). */
static td_storage *map_region(const char *call, int fd, int64_t bytes) {
  char why[128];
  td_storage *s = td_storage_map_fd(fd, bytes, 1, why, sizeof why);
  if (!s) td_fail(TD_EIO, "%s: cannot map %lld bytes of shared memory: %s", call,
                  (long long)bytes, why);
  return s;
}

/* Writer: the region holds at least need bytes (grown geometrically, remapped). */
static int32_t ensure_region(const char *call, int fd, td_storage **region, int64_t need) {
  if (*region && (*region)->nbytes >= need) return 0;
  int64_t size = *region ? (*region)->nbytes * 2 : REGION_QUANTUM;
  if (size < need) size = need;
  size = (size + REGION_QUANTUM - 1) / REGION_QUANTUM * REGION_QUANTUM;
  if (ftruncate(fd, size) != 0)
    return td_fail(TD_ENOMEM, "%s: cannot grow shared memory to %lld bytes: %s", call,
                   (long long)size, strerror(errno));
  td_storage *s = map_region(call, fd, size);
  if (!s) return td_last_status();
  td_storage_release(*region);
  *region = s;
  return 0;
}

/* Reader: the mapping covers the size the writer announced. */
static int32_t follow_region(const char *call, int fd, td_storage **region, int64_t size) {
  if (*region && (*region)->nbytes >= size) return 0;
  td_storage *s = map_region(call, fd, size);
  if (!s) return td_last_status();
  td_storage_release(*region);
  *region = s;
  return 0;
}

static int32_t send_msg(const char *call, int sock, const msg *m, int fd) {
  struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof *m};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    memset(&ctl, 0, sizeof ctl);
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof ctl.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  for (;;) {
    ssize_t r = sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (r == (ssize_t)sizeof *m) return 0;
    if (r < 0 && errno == EINTR) continue;
    return td_fail(TD_EIO, "%s: cannot send to the other process: %s", call,
                   r < 0 ? strerror(errno) : "short write");
  }
}

/* 1: a message (and *fd an fd that came with it, else -1); 0: the peer is gone. */
static int32_t recv_msg(const char *call, int sock, msg *m, int *fd) {
  struct iovec iov = {.iov_base = m, .iov_len = sizeof *m};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                      .msg_controllen = sizeof ctl.buf};
  *fd = -1;
  for (;;) {
    ssize_t r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 || (r < 0 && (errno == ECONNRESET || errno == EPIPE))) return 0;
    if (r < 0) return td_fail(TD_EIO, "%s: cannot read from the other process: %s", call,
                              strerror(errno));
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        memcpy(fd, CMSG_DATA(c), sizeof *fd);
    if (r != (ssize_t)sizeof *m) return td_fail(TD_EIO, "%s: a truncated message", call);
    return 1;
  }
}

/* ------------------------------------------------------------------ the pool */

TD_EXPORT td_workers *td_workers_new(int32_t n) {
  if (n < 1 || n > 1024) return td_fail_null(TD_EINVAL, "workers: %d workers requested (1..1024)", (int)n);
  td_workers *w = calloc(1, sizeof *w);
  if (!w || !(w->slots = calloc((size_t)n, sizeof *w->slots))) {
    free(w);
    return td_fail_null(TD_ENOMEM, "workers: out of memory");
  }
  w->n = n;
  w->self = -1;
  w->owner = getpid();
  for (int32_t i = 0; i < n; i++) {
    slot *s = &w->slots[i];
    s->sock[0] = s->sock[1] = s->in_fd = s->out_fd = -1;
  }
  for (int32_t i = 0; i < n; i++) {
    slot *s = &w->slots[i];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, s->sock) != 0) {
      td_fail(TD_EIO, "workers: cannot create a socket pair: %s", strerror(errno));
      goto fail;
    }
    if ((s->in_fd = new_memfd("workers")) < 0 || (s->out_fd = new_memfd("workers")) < 0) goto fail;
  }
  w->next_pool = all_pools;
  all_pools = w;
  return w;
fail:
  for (int32_t i = 0; i < n; i++) {
    slot *s = &w->slots[i];
    close_fd(&s->sock[0]), close_fd(&s->sock[1]), close_fd(&s->in_fd), close_fd(&s->out_fd);
  }
  free(w->slots);
  free(w);
  return NULL;
}

static void unlink_pool(td_workers *w) {
  for (td_workers **p = &all_pools; *p; p = &(*p)->next_pool)
    if (*p == w) {
      *p = w->next_pool;
      return;
    }
}

/* In a new child: keep only worker k's end of its own pair and its regions. */
static void become_worker(td_workers *w, int32_t k) {
  for (td_workers *p = all_pools; p; p = p->next_pool) {
    for (int32_t i = 0; i < p->n; i++) {
      slot *s = &p->slots[i];
      close_fd(&s->sock[0]);
      if (p == w && i == k) continue;
      close_fd(&s->sock[1]), close_fd(&s->in_fd), close_fd(&s->out_fd);
      s->pid = 0;
    }
    if (p != w) p->owner = 0; /* another pool's handle: never kills from here */
  }
  w->self = k;
  w->owner = 0;
}

static void kill_and_reap(td_workers *w) {
  for (int32_t i = 0; i < w->n; i++)
    if (w->slots[i].pid > 0) kill(w->slots[i].pid, SIGKILL);
  for (int32_t i = 0; i < w->n; i++) {
    slot *s = &w->slots[i];
    if (s->pid <= 0) continue;
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    s->pid = 0;
  }
}

TD_EXPORT int32_t td_workers_fork(td_workers *w) {
  if (!w) return td_fail(TD_EINVAL, "workers: pool is NULL");
  if (w->forked || w->owner != getpid())
    return td_fail(TD_EINVAL, "workers: the workers were forked already");
  /* Fork handlers are registered lazily: make sure they are before the first fork. */
  td_heap_cache_before_fork();
  td_get_num_threads();
  fflush(NULL); /* no stdio buffer is written twice */
  w->forked = 1;
  pid_t parent = getpid();
  for (int32_t k = 0; k < w->n; k++) {
    pid_t pid = fork();
    if (pid < 0) {
      int err = errno;
      kill_and_reap(w);
      return td_fail(TD_EIO, "workers: fork of worker %d failed: %s", (int)k + 1, strerror(err));
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1); /* the parent died before prctl */
      signal(SIGINT, SIG_IGN);
      signal(SIGPIPE, SIG_IGN);
      /* The parent may count these for a run (flow.run, tdflow): a worker's counts
       * would be read by nobody, so they end a worker as they end any process. */
      signal(SIGTERM, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      become_worker(w, k);
      return k;
    }
    w->slots[k].pid = pid;
  }
  for (int32_t k = 0; k < w->n; k++) close_fd(&w->slots[k].sock[1]);
  return TD_WORKERS_PARENT;
}

TD_EXPORT int32_t td_workers_count(const td_workers *w) { return w ? w->n : 0; }

TD_EXPORT int64_t td_workers_pid(const td_workers *w, int32_t i) {
  if (!w || i < 0 || i >= w->n) return -1;
  return w->slots[i].pid;
}

TD_EXPORT int32_t td_workers_close(td_workers *w) {
  if (!w) return 0;
  if (w->owner == getpid()) kill_and_reap(w);
  for (int32_t i = 0; i < w->n; i++) {
    slot *s = &w->slots[i];
    close_fd(&s->sock[0]), close_fd(&s->sock[1]), close_fd(&s->in_fd), close_fd(&s->out_fd);
    td_storage_release(s->in);
    td_storage_release(s->out);
    free(s->message);
  }
  unlink_pool(w);
  free(w->slots);
  free(w);
  return 0;
}

/* ---------------------------------------------------------------- the parent */

static int32_t check_parent(const char *call, const td_workers *w) {
  if (!w) return td_fail(TD_EINVAL, "%s: pool is NULL", call);
  if (w->self >= 0 || w->owner != getpid() || !w->forked)
    return td_fail(TD_EINVAL, "%s: only the process that forked the workers talks to them", call);
  return 0;
}

static int32_t parent_slot(const char *call, td_workers *w, int32_t i) {
  int32_t rc = check_parent(call, w);
  if (rc < 0) return rc;
  if (i < 0 || i >= w->n) return td_fail(TD_EINDEX, "%s: worker %d of %d", call, (int)i + 1, (int)w->n);
  if (w->slots[i].dead) return td_fail(TD_EIO, "%s: worker %d is dead", call, (int)i + 1);
  return 0;
}

/* "killed by signal SIGKILL" / "exited with status 3": how pid ended (reaped here). */
static void describe_death(slot *s, int32_t index) {
  int status = 0;
  pid_t r;
  while ((r = waitpid(s->pid, &status, 0)) < 0 && errno == EINTR) {
  }
  char buf[256];
  if (r < 0) {
    snprintf(buf, sizeof buf, "worker %d (pid %d) is gone", (int)index + 1, (int)s->pid);
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
      snprintf(buf, sizeof buf, "worker %d (pid %d) was killed by signal SIG%s", (int)index + 1,
               (int)s->pid, abbrev);
    else
      snprintf(buf, sizeof buf, "worker %d (pid %d) was killed by signal %d", (int)index + 1,
               (int)s->pid, sig);
  } else {
    snprintf(buf, sizeof buf, "worker %d (pid %d) exited with status %d", (int)index + 1,
             (int)s->pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  s->pid = 0;
  s->dead = 1;
  s->busy = 0;
  set_message(s, buf, (int64_t)strlen(buf));
}

/* True when worker i has exited (it is a zombie, not yet reaped): then it is reaped and
 * its message says how it died. */
static bool reap_if_dead(slot *s, int32_t i) {
  siginfo_t info;
  memset(&info, 0, sizeof info);
  if (waitid(P_PID, (id_t)s->pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != s->pid) return false;
  describe_death(s, i);
  return true;
}

TD_EXPORT int32_t td_workers_send(td_workers *w, int32_t i, int64_t job, const td_dict *d) {
  int32_t rc = parent_slot("workers: send", w, i);
  if (rc < 0) return rc;
  slot *s = &w->slots[i];
  if (s->busy) return td_fail(TD_EINVAL, "workers: send: worker %d is busy", (int)i + 1);
  msg m = {.type = MSG_JOB, .job = job};
  if (d) {
    int64_t need = td_ship_size(d, NULL);
    if (need < 0) return (int32_t)need;
    if ((rc = ensure_region("workers: send", s->in_fd, &s->in, need)) < 0) return rc;
    int64_t used = td_ship_pack(d, s->in, NULL);
    if (used < 0) return (int32_t)used;
    m.nbytes = used;
    m.region_bytes = s->in->nbytes;
  }
  if ((rc = send_msg("workers: send", s->sock[0], &m, -1)) < 0) {
    /* A worker that died while idle: say how, not just that the socket broke. */
    if (reap_if_dead(s, i)) return td_fail(TD_EIO, "%s", s->message ? s->message : "a worker died");
    return rc;
  }
  s->busy = 1;
  return 0;
}

TD_EXPORT int32_t td_workers_wait(td_workers *w, int32_t timeout_ms) {
  int32_t rc = check_parent("workers: wait", w);
  if (rc < 0) return rc;
  struct pollfd fds[1024];
  int32_t who[1024], nfds = 0;
  for (int32_t j = 0; j < w->n; j++) {
    int32_t i = (w->next_poll + j) % w->n;
    if (!w->slots[i].busy || w->slots[i].dead) continue;
    fds[nfds] = (struct pollfd){.fd = w->slots[i].sock[0], .events = POLLIN};
    who[nfds++] = i;
  }
  if (nfds == 0) return td_fail(TD_EINVAL, "workers: wait: no job is out");
  int r = poll(fds, (nfds_t)nfds, timeout_ms);
  if (r < 0 && errno == EINTR) {
    td_fail(TD_EIO, "interrupted");
    return TD_WORKERS_INTERRUPTED;
  }
  if (r < 0) return td_fail(TD_EIO, "workers: wait: poll failed: %s", strerror(errno));
  if (r == 0) return TD_WORKERS_TIMEOUT;
  for (int32_t j = 0; j < nfds; j++)
    if (fds[j].revents) {
      w->next_poll = (who[j] + 1) % w->n;
      return who[j];
    }
  return TD_WORKERS_TIMEOUT;
}

TD_EXPORT td_dict *td_workers_recv(td_workers *w, int32_t i, int32_t *kind, int64_t *job) {
  *kind = TD_REPLY_NONE;
  *job = -1;
  if (parent_slot("workers: recv", w, i) < 0) return NULL;
  slot *s = &w->slots[i];
  msg m;
  int fd;
  int32_t got = recv_msg("workers: recv", s->sock[0], &m, &fd);
  if (got < 0) return NULL;
  if (got == 0) {
    describe_death(s, i);
    *kind = TD_REPLY_DIED;
    return td_fail_null(TD_EIO, "%s", s->message ? s->message : "a worker died");
  }
  s->busy = 0;
  *job = m.job;
  td_dict *result = NULL;
  if ((m.type == MSG_RESULT || m.type == MSG_ERROR) &&
      follow_region("workers: recv", s->out_fd, &s->out, m.region_bytes) < 0)
    goto done;
  if (m.type == MSG_RESULT) {
    *kind = TD_REPLY_RESULT;
    td_dict *view = td_ship_unpack(s->out, s->in);
    if (view) {
      /* Copied out now: the regions are rewritten by the next batch. */
      result = td_dict_copy(view, TD_COPY_CLONE);
      td_dict_release(view);
    }
  } else if (m.type == MSG_ERROR) {
    *kind = TD_REPLY_ERROR;
    int64_t len = m.nbytes <= s->out->nbytes ? m.nbytes : s->out->nbytes;
    set_message(s, s->out->data, len);
    td_fail(TD_EIO, "workers: worker %d failed", (int)i + 1);
  } else {
    *kind = TD_REPLY_DONE;
  }
done:
  if (fd >= 0) {
    /* The worker kept views of its input region: batches go to a fresh one. */
    close_fd(&s->in_fd);
    s->in_fd = fd;
    td_storage_release(s->in);
    s->in = NULL;
  }
  return result;
}

TD_EXPORT const char *td_workers_message_borrow(const td_workers *w, int32_t i) {
  if (!w || i < 0 || i >= w->n || !w->slots[i].message) return "";
  return w->slots[i].message;
}

/* ---------------------------------------------------------------- a worker */

static slot *worker_slot(const char *call, td_workers *w) {
  if (!w || w->self < 0) return td_fail_null(TD_EINVAL, "%s: not in a worker process", call);
  return &w->slots[w->self];
}

TD_EXPORT td_dict *td_worker_next(td_workers *w, int32_t *kind, int64_t *job) {
  *kind = TD_REPLY_NONE;
  *job = -1;
  slot *s = worker_slot("worker: next", w);
  if (!s) return NULL;
  msg m;
  int fd;
  int32_t got = recv_msg("worker: next", s->sock[1], &m, &fd);
  if (got <= 0) return NULL; /* the parent is gone (kind NONE): the worker leaves */
  if (fd >= 0) close(fd);
  *job = m.job;
  *kind = TD_REPLY_JOB;
  memset(&s->pending, 0, sizeof s->pending);
  s->pending.job = m.job;
  if (m.nbytes == 0) return NULL;
  if (follow_region("worker: next", s->in_fd, &s->in, m.region_bytes) < 0) {
    *kind = TD_REPLY_NONE;
    return NULL;
  }
  td_dict *d = td_ship_unpack(s->in, NULL);
  if (!d) *kind = TD_REPLY_NONE;
  return d;
}

TD_EXPORT int32_t td_worker_reply_result(td_workers *w, const td_dict *d) {
  slot *s = worker_slot("worker: reply", w);
  if (!s) return td_last_status();
  int64_t need = td_ship_size(d, s->in);
  if (need < 0) return (int32_t)need;
  int32_t rc = ensure_region("worker: reply", s->out_fd, &s->out, need);
  if (rc < 0) return rc;
  int64_t used = td_ship_pack(d, s->out, s->in);
  if (used < 0) return (int32_t)used;
  s->pending.type = MSG_RESULT;
  s->pending.nbytes = used;
  s->pending.region_bytes = s->out->nbytes;
  return 0;
}

TD_EXPORT int32_t td_worker_reply_error(td_workers *w, const char *text, int64_t len) {
  slot *s = worker_slot("worker: reply", w);
  if (!s) return td_last_status();
  int32_t rc = ensure_region("worker: reply", s->out_fd, &s->out, len + 1);
  if (rc < 0) return rc;
  memcpy(s->out->data, text, (size_t)len);
  s->pending.type = MSG_ERROR;
  s->pending.nbytes = len;
  s->pending.region_bytes = s->out->nbytes;
  return 0;
}

TD_EXPORT int32_t td_worker_reply_done(td_workers *w) {
  slot *s = worker_slot("worker: reply", w);
  if (!s) return td_last_status();
  s->pending.type = MSG_DONE;
  s->pending.nbytes = 0;
  return 0;
}

TD_EXPORT int32_t td_worker_input_busy(td_workers *w) {
  slot *s = worker_slot("worker: input_busy", w);
  if (!s) return td_last_status();
  return s->in && atomic_load(&s->in->refcount) > 1;
}

TD_EXPORT int32_t td_worker_send(td_workers *w) {
  slot *s = worker_slot("worker: send", w);
  if (!s) return td_last_status();
  int fresh = -1;
  if (s->in && atomic_load(&s->in->refcount) > 1) {
    /* Something kept views of this batch: the next one goes to a new region. */
    fresh = new_memfd("worker: send");
    if (fresh < 0) return td_last_status();
    td_storage_release(s->in); /* the mapping lives on while the views do */
    s->in = NULL;
    close_fd(&s->in_fd);
    s->in_fd = fresh;
    s->pending.flags |= FLAG_NEW_INPUT;
  }
  if (s->pending.type == 0) s->pending.type = MSG_DONE;
  return send_msg("worker: send", s->sock[1], &s->pending, fresh);
}

TD_EXPORT void td_worker_exit(int32_t code) { _exit(code); }
