/*
 * tensordict_mpi.h: libtensordict_mpi, thin checked wrappers over MPI for the Lua
 * module tensordict.dist (docs/dist.md). A separate library: libtensordict never links
 * MPI; this one links MPI and libtensordict (for the 16-bit float conversions).
 *
 * Plain C, FFI-clean like tensordict.h (scripts/gen_cdefs.lua makes
 * lua/tensordict/cdefs_mpi.lua from it). Conventions:
 * - Every call works on one duplicate of MPI_COMM_WORLD whose error handler is
 *   MPI_ERRORS_RETURN: an MPI error becomes a negative TD_MPI_E* code and a message
 *   (MPI_Error_string's text) read by td_mpi_last_error(), never an abort.
 * - Byte counts are int64; messages past MPI's int counts travel as several messages of
 *   at most 1 GiB on the same tag (MPI keeps their order).
 * - timeout: seconds; < 0 waits for ever. A call with a timeout posts the non-blocking
 *   form and polls MPI_Test until it completes or the deadline passes, so a dead peer
 *   fails the call (TD_MPI_ETIMEOUT) instead of hanging.
 */
#ifndef TENSORDICT_MPI_H
#define TENSORDICT_MPI_H

#include <stdint.h>

#define TD_MPI_ABI_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

enum td_mpi_status {
  TD_MPI_OK = 0,
  TD_MPI_EINVAL = -1,    /* a bad argument (rank out of range, negative size, ...) */
  TD_MPI_ENOMEM = -2,
  TD_MPI_ESTATE = -3,    /* not initialised, or finalised already */
  TD_MPI_ETIMEOUT = -4,  /* the deadline passed before the operation completed */
  TD_MPI_EMPI = -5,      /* MPI reported an error (the message is MPI_Error_string's) */
  TD_MPI_ETRUNCATE = -6  /* a message was larger than the buffer posted for it */
};

/* Reduction operations of td_mpi_allreduce. */
enum td_mpi_op { TD_MPI_SUM = 0, TD_MPI_MAX = 1, TD_MPI_MIN = 2 };

int32_t td_mpi_abi_version(void);
/* The message of the last failed call on this thread ("" when none). */
const char *td_mpi_last_error(void);
/* The MPI library's own version text (MPI_Get_library_version). */
const char *td_mpi_library_version(void);

/* MPI_Init_thread (MPI_THREAD_FUNNELED) unless MPI is initialised already; then makes
 * the communicator. A second call is a no-op. After finalize, init fails (MPI cannot
 * be initialised twice in a process). */
int32_t td_mpi_init(void);
/* 1 between init and finalize, else 0. */
int32_t td_mpi_is_initialized(void);
int32_t td_mpi_finalize(void);
/* This process's rank and the number of ranks; negative when not initialised. */
int32_t td_mpi_rank(void);
int32_t td_mpi_size(void);
/* MPI_Abort of every rank with this exit code (for a host that must stop them all). */
int32_t td_mpi_abort(int32_t code);

int32_t td_mpi_barrier(double timeout);

/* Point to point: nbytes raw bytes with a tag (0 .. td_mpi_tag_max()). */
int32_t td_mpi_tag_max(void);
int32_t td_mpi_send(const void *buf, int64_t nbytes, int32_t dst, int32_t tag, double timeout);
/* Receives exactly nbytes from src (which must send that many). */
int32_t td_mpi_recv(void *buf, int64_t nbytes, int32_t src, int32_t tag, double timeout);

/* A request of isend / irecv: wait (with a timeout) or test it, then free it. Freeing a
 * pending request cancels it (a cancelled send may still have been delivered). */
typedef struct td_mpi_request td_mpi_request;
td_mpi_request *td_mpi_isend(const void *buf, int64_t nbytes, int32_t dst, int32_t tag);
td_mpi_request *td_mpi_irecv(void *buf, int64_t nbytes, int32_t src, int32_t tag);
/* 1 when complete, 0 when still pending, negative on error (then the request is dead). */
int32_t td_mpi_test(td_mpi_request *r);
/* 0 when complete; TD_MPI_ETIMEOUT when the deadline passed (the request stays
 * pending and may be waited on again or freed). */
int32_t td_mpi_wait(td_mpi_request *r, double timeout);
void td_mpi_request_free(td_mpi_request *r);

/* A TensorDict from one rank to another (mpi_dict.c): its structure in one message,
 * then its leaves' bytes straight from the sender's leaves into the receiver's (like's
 * leaves when like has the message's structure and C-contiguous writable leaves, else
 * one new storage the received container views). isend posts every message at once;
 * irecv posts nothing until tested or waited on, then goes through the stages below.
 * Receives from one (source, tag) must take the structure in the order they were
 * made: start the next only once this one's stage reaches TD_MPI_STAGE_DATA. */
typedef struct td_mpi_transfer td_mpi_transfer;
struct td_dict; /* tensordict.h's container */
enum td_mpi_stage {
  TD_MPI_STAGE_UNMATCHED = 0, /* receive: its structure not probed yet */
  TD_MPI_STAGE_STRUCTURE = 1, /* receive: the structure's message is posted */
  TD_MPI_STAGE_DATA = 2,      /* the data messages are posted */
  TD_MPI_STAGE_DONE = 3
};
td_mpi_transfer *td_mpi_isend_dict(const struct td_dict *d, int32_t dst, int32_t tag);
td_mpi_transfer *td_mpi_irecv_dict(int32_t src, int32_t tag, struct td_dict *like);
/* 1 when done, 0 when not yet, negative on error (the transfer is then dead). */
int32_t td_mpi_transfer_test(td_mpi_transfer *x);
/* 0 when done; TD_MPI_ETIMEOUT when the deadline passed (wait again, or free it). */
int32_t td_mpi_transfer_wait(td_mpi_transfer *x, double timeout);
int32_t td_mpi_transfer_stage(const td_mpi_transfer *x);
/* root's container d on every rank (blocking; a collective). Elsewhere d is NULL or a
 * container to fill in place (used when it has the message's structure; else the
 * result is a new container). *out: the done transfer (free it), NULL on error. */
int32_t td_mpi_bcast_dict(struct td_dict *d, int32_t root, double timeout, td_mpi_transfer **out);
/* A done receive's container (a new reference), or NULL when it went into like. */
struct td_dict *td_mpi_transfer_result(td_mpi_transfer *x);
/* Frees x; what is still posted is cancelled (a cancelled send may still arrive). */
void td_mpi_transfer_free(td_mpi_transfer *x);

/* Collectives (every rank calls them in the same order). */
int32_t td_mpi_bcast(void *buf, int64_t nbytes, int32_t root, double timeout);
/* In place: count elements of a td_dtype (tensordict.h's enum). sum, max and min on
 * every dtype: integers and float32/64 with MPI's own ops; bool with logical or (sum
 * and max) and logical and (min); float16 and bfloat16 with this library's ops, which
 * compute in float and round once per pair of operands (as a float16 tensor add does). */
int32_t td_mpi_allreduce(void *buf, int64_t count, int32_t dtype, int32_t op, double timeout);
/* Every rank's value: out[size] (all ranks) or out at root only (gather). */
int32_t td_mpi_allgather_int64(int64_t value, int64_t *out, double timeout);
int32_t td_mpi_gather_int64(int64_t value, int64_t *out, int32_t root, double timeout);
/* Variable-size byte gathers: rank i contributes counts[i] bytes; every rank passes all
 * the counts (td_mpi_allgather_int64 gives them), so all take the same path; out holds
 * the pieces in rank order. gatherv: out only at root (may be NULL elsewhere). */
int32_t td_mpi_gatherv(const void *buf, int64_t nbytes, void *out, const int64_t *counts,
                       int32_t root, double timeout);
int32_t td_mpi_allgatherv(const void *buf, int64_t nbytes, void *out, const int64_t *counts,
                          double timeout);

#ifdef __cplusplus
}
#endif

#endif /* TENSORDICT_MPI_H */
