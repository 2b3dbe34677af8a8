/*
 * test_ship.c: containers packed into a flat region and unpacked as views (dict_ship.c),
 * and a round trip through forked workers (dict_workers.c).
 */
#include <signal.h>
#include <sys/wait.h>

#include "dicts.h"

/* Every dtype in every layout, a nested container, uniform and stacked values, names. */
static td_dict *sample(int64_t rows) {
  int64_t batch[1] = {rows};
  td_dict *d = td_dict_new(1, batch);
  char key[32];
  for (int32_t k = 0; k < TD_NUM_DTYPES; k++)
    for (int layout = 0; layout < NUM_LAYOUTS; layout++) {
      int64_t shape[3] = {rows, 3, 2};
      snprintf(key, sizeof key, "%s_%d", td_dtype_name(all_dtypes[k]), layout);
      put(d, key, make(3, shape, all_dtypes[k], layout, k + layout));
    }
  int64_t inner[2] = {rows, 4};
  td_dict *child = td_dict_new(2, inner);
  put(child, "x", seq(2, inner, TD_FLOAT32, 1));
  put_value(child, "label", "\"hello\"");
  put_dict(d, "nested", child);
  put_value(d, "n", "42");
  const char *texts[2] = {"\"a\"", "{\"b\": [1, 2]}"};
  int64_t pos[64];
  for (int64_t i = 0; i < rows && i < 64; i++) pos[i] = i % 2;
  put_values(d, "tags", 2, texts, pos);
  const char *names[1] = {"rows"};
  CHECK(td_dict_set_names(d, names) == 0);
  return d;
}

static bool equal(const td_dict *a, const td_dict *b) {
  int32_t out = 0;
  return td_dict_equal(a, b, &out) == 0 && out == 1;
}

static void test_round_trip(int64_t rows) {
  td_dict *d = sample(rows);
  int64_t need = td_ship_size(d, NULL);
  CHECK(need > 0);
  td_storage *region = td_storage_new_heap(need);
  CHECK_EQ_I(td_ship_pack(d, region, NULL), need);
  td_dict *u = td_ship_unpack(region, NULL);
  CHECK(u != NULL);
  CHECK(equal(d, u));
  CHECK(strcmp(td_dict_name_borrow(u, 0), "rows") == 0);
  CHECK_EQ_I(kind(u, "tags"), TD_ENTRY_VALUES);
  CHECK_EQ_I(ntexts(u, "tags"), 2);
  CHECK(strcmp(text(u, "n", 0), "42") == 0);
  /* Leaves view the region: no copy. */
  const td_tensor *t = leaf(u, "float32_1");
  CHECK(t && t->storage == region);
  CHECK(t && (((uintptr_t)td_tensor_data_borrow(t)) % 64) == 0);
  td_dict *c = kid(u, "nested");
  CHECK(c && strcmp(text(c, "label", 0), "\"hello\"") == 0);
  td_dict_release(c);
  td_dict_release(u);
  /* A region too small, and corrupt regions, are errors. */
  td_storage *small = td_storage_new_heap(need - 1);
  CHECK(td_ship_pack(d, small, NULL) < 0);
  CHECK_ERROR("region holds");
  td_storage_release(small);
  if (rows > 0) { /* a stacked value's position past its texts */
    const td_tensor *leaves[256];
    int64_t offsets[256];
    int32_t kinds[256];
    int64_t n = td_ship_leaves(d, leaves, offsets, kinds, 256);
    int64_t words = ((int64_t *)td_storage_data_borrow(region))[2];
    int64_t data_off = (32 + words * 8 + 63) / 64 * 64;
    for (int64_t i = 0; i < n && i < 256; i++) {
      if (kinds[i] != TD_ENTRY_VALUES) continue;
      int64_t *pos = (int64_t *)((char *)td_storage_data_borrow(region) + data_off + offsets[i]);
      int64_t keep = pos[0];
      pos[0] = -1;
      CHECK(td_ship_unpack(region, NULL) == NULL);
      CHECK_ERROR("corrupt region (a stacked value's position)");
      pos[0] = keep;
    }
  }
  ((int64_t *)td_storage_data_borrow(region))[0] = 0;
  CHECK(td_ship_unpack(region, NULL) == NULL);
  CHECK_ERROR("corrupt region");
  td_storage_release(region);
  td_dict_release(d);
}

/* Leaves living in ref travel as references. */
static void test_ref(void) {
  int64_t batch[1] = {5}, shape[2] = {5, 3};
  td_tensor *t = seq(2, shape, TD_FLOAT64, 0);
  td_storage *ref = t->storage;
  td_dict *d = td_dict_new(1, batch);
  td_tensor view;
  CHECK(td_tensor_transpose(t, 0, 1, &view) == 0);
  int64_t batch3[1] = {3};
  td_dict *e = td_dict_new(1, batch3);
  CHECK(td_dict_set_tensor(e, "tr", 2, &view) >= 0);
  put(d, "a", t);
  int64_t need = td_ship_size(d, ref);
  int64_t full = td_ship_size(d, NULL);
  CHECK(need < full);
  td_storage *region = td_storage_new_heap(need);
  CHECK(td_ship_pack(d, region, ref) == need);
  CHECK(td_ship_unpack(region, NULL) == NULL);
  CHECK_ERROR("not given");
  td_dict *u = td_ship_unpack(region, ref);
  CHECK(u && equal(d, u));
  CHECK(u && leaf(u, "a")->storage == ref);
  td_dict_release(u);
  td_storage_release(region);
  /* Strided references keep their strides. */
  need = td_ship_size(e, ref);
  region = td_storage_new_heap(need);
  CHECK(td_ship_pack(e, region, ref) == need);
  u = td_ship_unpack(region, ref);
  CHECK(u && equal(e, u));
  td_dict_release(u);
  td_storage_release(region);
  td_dict_release(e);
  td_dict_release(d);
}

/* The structure alone, its leaves' bytes moved separately (tensordict.dist's transport). */
static void test_split(void) {
  td_dict *d = sample(6);
  int64_t size = td_ship_meta_size(d);
  CHECK(size > 32);
  td_storage *meta = td_storage_new_heap(size);
  CHECK_EQ_I(td_ship_pack_meta(d, meta), size);
  /* The same structure as td_ship_pack's, without the data. */
  int64_t whole = td_ship_size(d, NULL);
  int64_t data = td_ship_data_bytes(meta);
  CHECK(data > 0 && data < whole && size < whole);
  int64_t n = td_ship_leaves(d, NULL, NULL, NULL, 0);
  CHECK(n > 2);
  const td_tensor *leaves[256];
  int64_t offsets[256];
  int32_t kinds[256];
  CHECK(n <= 256);
  CHECK_EQ_I(td_ship_leaves(d, leaves, offsets, kinds, n), n);
  int values = 0;
  td_storage *bytes = td_storage_new_heap(data);
  for (int64_t i = 0; i < n; i++) {
    CHECK(offsets[i] % 64 == 0 && offsets[i] < data);
    if (i > 0) CHECK(offsets[i] > offsets[i - 1] || td_tensor_numel(leaves[i - 1]) == 0);
    values += kinds[i] == TD_ENTRY_VALUES;
    CHECK(kinds[i] == TD_ENTRY_TENSOR || kinds[i] == TD_ENTRY_VALUES);
    /* The leaf's bytes, C order, where the structure says they go. */
    td_tensor *c = td_tensor_contiguous(leaves[i]);
    memcpy((char *)td_storage_data_borrow(bytes) + offsets[i], td_tensor_data_borrow(c),
           (size_t)(td_tensor_numel(c) * c->itemsize));
    td_tensor_release(c);
  }
  CHECK_EQ_I(values, 1); /* "tags": its positions travel as data */
  td_dict *u = td_ship_unpack_meta(meta, bytes);
  CHECK(u != NULL);
  CHECK(u && td_ship_check(u) == 0);
  CHECK(u && equal(d, u));
  CHECK(u && leaf(u, "float32_1")->storage == bytes);
  CHECK(u && strcmp(text(u, "n", 0), "42") == 0);
  if (u) td_dict_release(u);
  /* A position past the stack's texts arriving with the bytes: td_ship_check says so. */
  for (int64_t i = 0; i < n; i++) {
    if (kinds[i] != TD_ENTRY_VALUES) continue;
    int64_t *pos = (int64_t *)((char *)td_storage_data_borrow(bytes) + offsets[i]);
    int64_t keep = pos[0];
    pos[0] = 2; /* "tags" has 2 texts: 0 and 1 */
    td_dict *v = td_ship_unpack_meta(meta, bytes);
    CHECK(v != NULL);
    CHECK(v && td_ship_check(v) < 0);
    CHECK_ERROR("corrupt region (a stacked value's position)");
    if (v) td_dict_release(v);
    pos[0] = keep;
  }
  /* Fewer leaves than there are: a count, and the first cap filled. */
  CHECK_EQ_I(td_ship_leaves(d, leaves, offsets, kinds, 1), n);
  /* Too small a region, too little data, a corrupt structure: errors. */
  td_storage *small = td_storage_new_heap(size - 8);
  CHECK(td_ship_pack_meta(d, small) < 0);
  CHECK_ERROR("region holds");
  td_storage_release(small);
  td_storage *few = td_storage_new_heap(data - 1);
  CHECK(td_ship_unpack_meta(meta, few) == NULL);
  CHECK_ERROR("data region holds");
  td_storage_release(few);
  ((int64_t *)td_storage_data_borrow(meta))[1] = 99;
  CHECK(td_ship_data_bytes(meta) < 0);
  CHECK_ERROR("corrupt region");
  CHECK(td_ship_unpack_meta(meta, bytes) == NULL);
  td_storage_release(bytes);
  td_storage_release(meta);
  td_dict_release(d);
}

/* Two workers that double every leaf (and one that errors on job 3). */
static void test_workers(void) {
  td_workers *w = td_workers_new(2);
  CHECK(w != NULL);
  int32_t who = td_workers_fork(w);
  if (who >= 0) {
    for (;;) {
      int32_t kind;
      int64_t job;
      td_dict *in = td_worker_next(w, &kind, &job);
      if (kind != TD_REPLY_JOB) td_worker_exit(0);
      if (job == 9) {
        for (;;) pause(); /* killed by the parent */
      } else if (job == 3) {
        td_worker_reply_error(w, "boom", 4);
      } else if (!in) {
        td_worker_reply_done(w);
      } else {
        td_dict *out = td_dict_binary(TD_BINARY_MUL, in, NULL, NULL, 2, TD_SCALAR_INT, 0);
        td_worker_reply_result(w, job == 4 ? in : out);
        td_dict_release(out);
      }
      td_dict_release(in);
      td_worker_send(w);
    }
  }
  CHECK_EQ_I(who, TD_WORKERS_PARENT);
  td_dict *d = sample(7);
  td_dict *twice = td_dict_binary(TD_BINARY_MUL, d, NULL, NULL, 2, TD_SCALAR_INT, 0);
  for (int64_t job = 1; job <= 5; job++) {
    int32_t i = (int32_t)(job % 2);
    CHECK(td_workers_send(w, i, job, job == 5 ? NULL : d) == 0);
    CHECK_EQ_I(td_workers_wait(w, -1), i);
    int32_t kind;
    int64_t got;
    td_dict *r = td_workers_recv(w, i, &kind, &got);
    CHECK_EQ_I(got, job);
    if (job == 3) {
      CHECK_EQ_I(kind, TD_REPLY_ERROR);
      CHECK(strcmp(td_workers_message_borrow(w, i), "boom") == 0);
    } else if (job == 5) {
      CHECK_EQ_I(kind, TD_REPLY_DONE);
    } else {
      CHECK_EQ_I(kind, TD_REPLY_RESULT);
      CHECK(r && equal(r, job == 4 ? d : twice));
    }
    td_dict_release(r);
  }
  /* A worker killed mid-job is reported with its signal. */
  CHECK(td_workers_send(w, 0, 9, d) == 0);
  kill((pid_t)td_workers_pid(w, 0), SIGKILL);
  CHECK_EQ_I(td_workers_wait(w, -1), 0);
  int32_t kind;
  int64_t job;
  CHECK(td_workers_recv(w, 0, &kind, &job) == NULL);
  CHECK_EQ_I(kind, TD_REPLY_DIED);
  CHECK(strstr(td_workers_message_borrow(w, 0), "SIGKILL") != NULL);
  /* An idle worker that died: the next send says how. */
  pid_t other = (pid_t)td_workers_pid(w, 1);
  kill(other, SIGTERM);
  siginfo_t info;
  memset(&info, 0, sizeof info);
  CHECK(waitid(P_PID, (id_t)other, &info, WEXITED | WNOWAIT) == 0);
  CHECK(td_workers_send(w, 1, 10, d) < 0);
  CHECK_ERROR("was killed by signal SIGTERM");
  CHECK(td_workers_close(w) == 0);
  CHECK(waitpid(other, NULL, WNOHANG) < 0); /* reaped already */
  td_dict_release(twice);
  td_dict_release(d);
}

int main(void) {
  test_round_trip(6);
  test_round_trip(0);
  test_ref();
  test_split();
  test_workers();
  CHECK_SUMMARY();
}
