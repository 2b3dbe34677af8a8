/*
 * temp_owner.h: who wrote a temporary, and whether that writer is provably gone
 * (temp_owner.c), for the sweep of stale temporaries (fs.c, td_fs_remove_stale).
 *
 * A save's temporary is named `.<name>.tmp-<pid>-<n>-<owner>`, where owner is 32 hex
 * digits naming the machine the pid belongs to: the running kernel (16 digits of its
 * boot_id), the host name (8, hashed) and the PID namespace (8). While the save writes,
 * it also holds an open-file-description lock on the temporary (td_temp_claim), which
 * every process of the same kernel sees, whatever its PID namespace, and which is gone
 * the moment the writer dies (a zombie holds none). The sweep removes a temporary only
 * when its writer is proven gone (td_temp_writer_gone says how); a temporary of another
 * machine is never removed. Not part of the ABI.
 */
#ifndef TD_STORE_TEMP_OWNER_H
#define TD_STORE_TEMP_OWNER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct td_temp_owner {
  uint64_t boot;  /* the first 16 hex digits of the kernel's boot_id; 0: unknown */
  uint32_t host;  /* FNV-1a of the host name; 0: unknown */
  uint32_t pidns; /* the inode of this process's PID namespace; 0: unknown */
} td_temp_owner;

/* The hex digits of an owner in a temporary's name. */
enum { TD_TEMP_OWNER_DIGITS = 32 };
/* A temporary judged by its lock alone must be older than this, so a writer caught
 * between making it and locking it (two system calls) is never taken for dead. */
enum { TD_TEMP_SETTLE_SECONDS = 10 };

/* This process's owner, read now (a process may move to another PID namespace). */
void td_temp_owner_self(td_temp_owner *o);
/* The owner as TD_TEMP_OWNER_DIGITS lowercase hex digits and a NUL. */
void td_temp_owner_format(const td_temp_owner *o, char out[TD_TEMP_OWNER_DIGITS + 1]);
/* Reads exactly TD_TEMP_OWNER_DIGITS hex digits (then the end of s); false otherwise. */
bool td_temp_owner_parse(const char *s, td_temp_owner *o);
/* Marks the open temporary fd (a file, or a folder opened read-only) as being written,
 * for as long as fd (or a copy of it, forked children's too) stays open. 0, or -1 with
 * errno where the file system refuses locks: the temporary is then judged by its name. */
int td_temp_claim(int fd);
/* Whether the writer of temporary `name` in parentfd, process pid of owner (NULL: a
 * name from before owners were written, judged by pid here as it always was), is
 * provably gone, so the temporary can be removed:
 *  - same kernel and PID namespace: pid is gone, a zombie, or the temporary unlocked;
 *  - same kernel, another namespace: the temporary is unlocked (and settled);
 *  - same host, another boot: the machine restarted; unlocked (and settled), in case
 *    two machines share a host name;
 *  - another machine, or anything unknown: never (kept). */
bool td_temp_writer_gone(int parentfd, const char *name, long pid, const td_temp_owner *owner);

#endif
