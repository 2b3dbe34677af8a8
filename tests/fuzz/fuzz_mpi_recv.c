/* fuzz_mpi_recv.c: what a rank does with a peer's messages (dist.recv: core/mpi/
 * mpi_dict.c), on a structure and data messages of any length. MPI runs as a singleton
 * (MPI_Init without mpirun) and the "peer" is this rank: the input's messages are sent
 * to itself on one tag, then received as a container with td_mpi_irecv_dict, into a new
 * one or into a like.
 *
 * Input: byte 0: bits 0-2 the number of data messages (0..7), bit 3 a like; then for
 * the structure and each data message but the last a 2-byte little-endian length (cut
 * to what is left), then the messages' bytes in order, the last taking the rest.
 * Messages are cut at 64 bytes (TD_MPI_CHUNK_BYTES), so a container of more than 64
 * data bytes takes several.
 *
 * The oracle: a receive that succeeds must have received exactly the data its structure
 * declares, in the number of messages it needs (no malformed transfer accepted); what it
 * received is read in full. Every message left over is taken off the wire after each
 * input, so inputs do not see each other's. */
#include <sanitizer/lsan_interface.h>

#include "fuzz_util.h"
#include "tensordict_mpi.h"
#include "../../core/mpi/mpi_internal.h"

enum { TAG = 7, CHUNK = 64, MAX_MSGS = 8 };

static td_dict *like;

/* MPI_Finalize when libFuzzer exits: a singleton that leaves without it keeps its
 * session folder under /tmp. What it allocates on the way out is MPI's, as at init. */
static void finish(void) {
  __lsan_disable();
  td_mpi_finalize();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  setenv("TD_MPI_CHUNK_BYTES", "64", 1);
  setenv("OMPI_MCA_opal_signal", "", 1); /* libFuzzer's crash handlers, not OpenMPI's */
  /* What MPI_Init allocates and keeps (OpenMPI, PMIx, hwloc) is not the library's leak:
   * LeakSanitizer ignores it, and still checks every input's allocations. */
  __lsan_disable();
  int32_t started = td_mpi_init();
  __lsan_enable();
  if (started >= 0) atexit(finish);
  if (started < 0) {
    fprintf(stderr, "fuzz_mpi_recv: %s\n", td_mpi_last_error());
    abort();
  }
  /* The like: two float32 leaves of 5 and 20 rows' worth (100 data bytes, 2 messages). */
  like = td_dict_new(0, NULL);
  td_tensor *a = td_tensor_full(1, (int64_t[]){5}, TD_FLOAT32, 1.0);
  td_tensor *b = td_tensor_full(1, (int64_t[]){20}, TD_FLOAT32, 2.0);
  if (!like || !a || !b || td_dict_set_tensor(like, "a", 1, a) < 0 || td_dict_set_tensor(like, "b", 1, b) < 0)
    abort();
  td_tensor_release(a);
  td_tensor_release(b);
  return 0;
}

/* The data bytes a structure's transfer carries: its leaves' bytes back to back (the
 * wire holds no padding; td_ship_data_bytes counts the aligned layout the leaves view).
 * -1 when the structure does not unpack, -2 when it declares more than a sane size. */
static int64_t wire_bytes(const uint8_t *s, size_t n) {
  td_storage *meta = td_storage_new_heap(n > 0 ? (int64_t)n : 1);
  if (!meta) abort();
  if (n) memcpy(td_storage_data_borrow(meta), s, n);
  int64_t layout = td_ship_data_bytes(meta), total = -1;
  if (layout > ((int64_t)1 << 20)) total = -2;
  td_storage *data = layout >= 0 && total != -2 ? td_storage_new_heap(layout > 0 ? layout : 1) : NULL;
  td_dict *d = data ? td_ship_unpack_meta(meta, data) : NULL;
  int64_t nleaves = d ? td_ship_leaves(d, NULL, NULL, NULL, 0) : -1;
  if (nleaves >= 0) {
    const td_tensor **leaves = calloc((size_t)nleaves + 1, sizeof *leaves);
    int64_t *offsets = calloc((size_t)nleaves + 1, sizeof *offsets);
    int32_t *kinds = calloc((size_t)nleaves + 1, sizeof *kinds);
    if (!leaves || !offsets || !kinds) abort();
    td_ship_leaves(d, leaves, offsets, kinds, nleaves);
    total = 0;
    for (int64_t i = 0; i < nleaves; i++) total += td_tensor_numel(leaves[i]) * leaves[i]->itemsize;
    free(leaves), free(offsets), free(kinds);
  }
  td_dict_release(d);
  td_storage_release(data);
  td_storage_release(meta);
  return total;
}

/* Takes every message still queued on TAG off the wire. */
static void drain(void) {
  static char sink[1 << 16];
  for (;;) {
    int flag = 0;
    MPI_Message msg;
    MPI_Status st;
    if (MPI_Improbe(0, TAG, tdm_comm, &flag, &msg, &st) != MPI_SUCCESS || !flag) return;
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count > (int)sizeof sink) abort();
    MPI_Mrecv(sink, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 60000) return 0;
  const int nmsgs = 1 + (data[0] & 7), use_like = (data[0] >> 3) & 1;
  size_t at = 1, lens[MAX_MSGS];
  for (int m = 0; m < nmsgs - 1; m++) {
    size_t want = at + 2 <= size ? (size_t)(data[at] | data[at + 1] << 8) : 0;
    at = at + 2 <= size ? at + 2 : size;
    lens[m] = want;
  }
  const uint8_t *p = data + at;
  size_t left = size - at;
  for (int m = 0; m < nmsgs - 1; m++) {
    if (lens[m] > left) lens[m] = left;
    left -= lens[m];
  }
  lens[nmsgs - 1] = left;

  /* A structure may declare any size; the receiver allocates what it declares, which
   * past a sane size is a test of malloc, not of the reader (as in fuzz_ship). */
  const int64_t declared = wire_bytes(p, lens[0]);
  if (declared == -2) return 0;

  MPI_Request reqs[MAX_MSGS];
  const uint8_t *q = p;
  for (int m = 0; m < nmsgs; m++) {
    if (MPI_Isend(q, (int)lens[m], MPI_BYTE, 0, TAG, tdm_comm, &reqs[m]) != MPI_SUCCESS) abort();
    q += lens[m];
  }
  td_mpi_transfer *x = td_mpi_irecv_dict(0, TAG, use_like ? like : NULL);
  if (!x) abort();
  int32_t status = td_mpi_transfer_wait(x, 0.001);
  if (status == TD_MPI_OK) {
    /* Accepted: the data messages it took (the first ones; any after them are the next
     * transfer's, for all a receiver can tell) carried exactly the structure's declared
     * bytes, each its 64-byte piece. */
    const int64_t pieces = declared > 0 ? (declared + CHUNK - 1) / CHUNK : 0;
    if (declared < 0 || pieces > nmsgs - 1) abort(); /* accepted what does not unpack */
    for (int64_t m = 0; m < pieces; m++) {
      const int64_t want = declared - m * CHUNK < CHUNK ? declared - m * CHUNK : CHUNK;
      if ((int64_t)lens[m + 1] != want) abort();
    }
    td_dict *d = td_mpi_transfer_result(x);
    if (d) {
      fuzz_touch(d);
      td_dict_release(d);
    } else if (!use_like) {
      abort(); /* a receive without like gives a container */
    }
  }
  td_mpi_transfer_free(x);
  drain();
  if (MPI_Waitall(nmsgs, reqs, MPI_STATUSES_IGNORE) != MPI_SUCCESS) abort();
  return 0;
}
