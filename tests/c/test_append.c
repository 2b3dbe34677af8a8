/* test_append.c: checkpoints of an append (td_memmap_append_*, core/store/append.c), the
 * C side of resumable MemmapSink runs: an append killed after a checkpoint (a child
 * process that _exits without cleaning up) is resumed by another append, rows written
 * after the checkpoint are dropped, and the committed folder is byte for byte the folder
 * of an append that never stopped; the staged folder comes back; a checkpoint is refused
 * to a fresh append unless existsok, kept by suspend and free, removed by abort, and
 * locked against a second resumer. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "dicts.h"

/* Batch k of a stream: rows [first, first + n) of x (float32 [n, 3]), id (int64 [n]), a
 * nested container of y (float64 [n, 2]) and a uniform non-tensor value. */
static td_dict *batch(int64_t first, int64_t n) {
  int64_t b[1] = {n}, s3[2] = {n, 3}, s2[2] = {n, 2};
  td_dict *d = td_dict_new(1, b);
  put(d, "x", seq(2, s3, TD_FLOAT32, (double)first * 3));
  put(d, "id", seq(1, b, TD_INT64, (double)first));
  td_dict *inner = td_dict_new(1, b);
  put(inner, "y", seq(2, s2, TD_FLOAT64, (double)first * 2 + 0.5));
  put_dict(d, "inner", inner);
  put_value(d, "tag", "{\"run\": \"a\", \"scale\": 1.5}");
  return d;
}

/* Appends the rows [from, to) in batches of 7. */
static void write_rows(td_memmap_append *a, int64_t from, int64_t to) {
  for (int64_t r = from; r < to; r += 7) {
    td_dict *d = batch(r, r + 7 <= to ? 7 : to - r);
    CHECK_EQ_I(td_memmap_append_write(a, d), 0);
    td_dict_release(d);
  }
}

/* The whole content of a file, malloc'd; NULL when it cannot be read. */
static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)len + 1);
  *n = fread(buf, 1, (size_t)len, f);
  fclose(f);
  buf[*n] = '\0';
  return buf;
}

/* Folders a and b hold the same names, and files of the same bytes, all the way down. */
static bool same_tree(const char *a, const char *b) {
  DIR *da = opendir(a), *db = opendir(b);
  int na = 0, nb = 0;
  bool same = da && db;
  for (struct dirent *e; same && (e = readdir(da));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    na++;
    char pa[1024], pb[1024];
    snprintf(pa, sizeof pa, "%s/%s", a, e->d_name);
    snprintf(pb, sizeof pb, "%s/%s", b, e->d_name);
    struct stat sa, sb;
    if (stat(pa, &sa) != 0 || stat(pb, &sb) != 0 || S_ISDIR(sa.st_mode) != S_ISDIR(sb.st_mode)) {
      fprintf(stderr, "same_tree: %s has no twin %s\n", pa, pb);
      same = false;
    } else if (S_ISDIR(sa.st_mode)) {
      same = same_tree(pa, pb);
    } else {
      size_t la = 0, lb = 0;
      char *ca = slurp(pa, &la), *cb = slurp(pb, &lb);
      same = ca && cb && la == lb && memcmp(ca, cb, la) == 0;
      if (!same) fprintf(stderr, "same_tree: %s and %s differ\n", pa, pb);
      free(ca), free(cb);
    }
  }
  for (struct dirent *e; same && (e = readdir(db));) nb += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  if (same && na != nb) fprintf(stderr, "same_tree: %s has %d entries, %s %d\n", a, na, b, nb);
  if (da) closedir(da);
  if (db) closedir(db);
  return same && na == nb;
}

/* Writes text into the staged folder's file name. */
static void stage_file(td_memmap_append *a, const char *name, const char *text) {
  const char *dir = td_memmap_append_stage(a);
  CHECK(dir != NULL);
  if (!dir) return;
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  CHECK(f != NULL);
  if (f) fputs(text, f), fclose(f);
}

static void test_uninterrupted_reference(void) {
  td_memmap_append *a = td_memmap_append_open(at("ref"), TD_MEMMAP_NO_FSYNC);
  CHECK(a != NULL);
  write_rows(a, 0, 100);
  CHECK_EQ_I(td_memmap_append_commit(a, 1), 0);
  td_memmap_append_free(a);
}

/* A child appends 40 rows, checkpoints (staging a file), appends 25 more and dies
 * without a word; the parent resumes, finds 40 rows and the staged file, appends the
 * rest and commits: the same bytes as the reference. */
static void test_killed_then_resumed(void) {
  const char *out = at("out");
  CHECK_EQ_I(td_memmap_append_checkpoint_rows(out), -1);
  pid_t pid = fork();
  if (pid == 0) {
    td_memmap_append *a = td_memmap_append_open(out, TD_MEMMAP_NO_FSYNC);
    if (!a) _exit(3);
    write_rows(a, 0, 35);
    stage_file(a, "state.json", "{\"source\": 35}");
    if (td_memmap_append_checkpoint(a) != 0) _exit(4);
    write_rows(a, 35, 40);
    if (td_memmap_append_checkpoint(a) != 0) _exit(5); /* a second one, nothing staged */
    stage_file(a, "state.json", "{\"source\": 40}");
    if (td_memmap_append_checkpoint(a) != 0) _exit(6);
    write_rows(a, 40, 65); /* lost: after the last checkpoint */
    _exit(0);              /* killed: nothing closed, nothing removed */
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(!exists(out));
  CHECK(exists(at(".out.checkpoint/%checkpoint/append.json")));
  CHECK_EQ_I(td_memmap_append_checkpoint_rows(out), 40);

  /* a fresh append refuses to drop it */
  CHECK(td_memmap_append_open(out, TD_MEMMAP_NO_FSYNC) == NULL);
  CHECK_ERROR("append: '");
  CHECK_ERROR("out' has a checkpoint of an unfinished append (40 rows): resume it, or pass "
              "existsok to start over");

  td_memmap_append *a = td_memmap_append_resume(out, TD_MEMMAP_NO_FSYNC);
  CHECK(a != NULL);
  if (!a) return;
  CHECK_EQ_I(td_memmap_append_rows(a), 40);
  const char *ck = td_memmap_append_checkpoint_borrow(a);
  CHECK(ck != NULL);
  if (ck) {
    char p[1024];
    size_t n;
    snprintf(p, sizeof p, "%s/state.json", ck);
    char *text = slurp(p, &n);
    CHECK(text && !strcmp(text, "{\"source\": 40}"));
    free(text);
  }
  /* a second resumer is locked out while this one runs */
  CHECK(td_memmap_append_resume(out, TD_MEMMAP_NO_FSYNC) == NULL);
  CHECK_ERROR("the checkpoint of '");
  CHECK_ERROR("out' is in use by another process");
  CHECK(td_memmap_append_open(out, TD_MEMMAP_NO_FSYNC | TD_MEMMAP_EXISTSOK) == NULL);
  CHECK_ERROR("is in use by another process");

  /* a batch that does not match the checkpoint's structure is refused whole */
  int64_t b[1] = {2};
  td_dict *bad = td_dict_new(1, b);
  put(bad, "x", seq(1, b, TD_FLOAT32, 0));
  CHECK(td_memmap_append_write(a, bad) < 0);
  CHECK_ERROR("key 'x': shape [2] does not match [0, 3] of the first batch (the dims after the "
              "first must be equal)");
  td_dict_release(bad);

  write_rows(a, 40, 100);
  CHECK_EQ_I(td_memmap_append_rows(a), 100);
  CHECK_EQ_I(td_memmap_append_commit(a, 1), 0);
  td_memmap_append_free(a);
  CHECK(!exists(at(".out.checkpoint")));
  CHECK(same_tree(at("ref"), out));
  CHECK_EQ_I(td_memmap_append_checkpoint_rows(out), -1);
}

/* Resumed twice (suspend keeps the checkpoint, free keeps it too), checkpointing on the
 * way: still the reference's bytes. */
static void test_suspend_and_free_keep_it(void) {
  const char *out = at("twice");
  td_memmap_append *a = td_memmap_append_open(out, TD_MEMMAP_NO_FSYNC);
  write_rows(a, 0, 14);
  CHECK_EQ_I(td_memmap_append_checkpoint(a), 0);
  CHECK(td_memmap_append_checkpoint_borrow(a) != NULL);
  write_rows(a, 14, 21);
  td_memmap_append_suspend(a);
  CHECK(td_memmap_append_path_borrow(a) == NULL);
  td_memmap_append_suspend(a); /* idempotent */
  CHECK(td_memmap_append_write(a, NULL) < 0);
  td_memmap_append_free(a);
  CHECK_EQ_I(td_memmap_append_checkpoint_rows(out), 14);

  a = td_memmap_append_resume(out, TD_MEMMAP_NO_FSYNC);
  CHECK(a != NULL);
  CHECK_EQ_I(td_memmap_append_rows(a), 14);
  write_rows(a, 14, 70);
  CHECK_EQ_I(td_memmap_append_checkpoint(a), 0);
  write_rows(a, 70, 77);
  td_memmap_append_free(a); /* the GC's way out: the checkpoint stays */
  CHECK_EQ_I(td_memmap_append_checkpoint_rows(out), 70);

  a = td_memmap_append_resume(out, TD_MEMMAP_NO_FSYNC);
  CHECK_EQ_I(td_memmap_append_rows(a), 70);
  write_rows(a, 70, 100);
  CHECK_EQ_I(td_memmap_append_commit(a, 1), 0);
  td_memmap_append_free(a);
  CHECK(same_tree(at("ref"), out));
}

/* A checkpoint before any row resumes with no structure; the first batch after it fixes
 * it. abort removes a checkpoint; existsok starts over. */
static void test_empty_checkpoint_abort_and_existsok(void) {
  const char *out = at("empty");
  td_memmap_append *a = td_memmap_append_open(out, 0);
  CHECK_EQ_I(td_memmap_append_checkpoint(a), 0);
  td_memmap_append_free(a);
  CHECK_EQ_I(td_memmap_append_checkpoint_rows(out), 0);
  a = td_memmap_append_resume(out, 0);
  CHECK(a != NULL);
  CHECK_EQ_I(td_memmap_append_rows(a), 0);
  write_rows(a, 0, 100);
  CHECK_EQ_I(td_memmap_append_commit(a, 1), 0);
  td_memmap_append_free(a);
  CHECK(same_tree(at("ref"), out));

  const char *gone = at("gone");
  a = td_memmap_append_open(gone, TD_MEMMAP_NO_FSYNC);
  write_rows(a, 0, 7);
  CHECK_EQ_I(td_memmap_append_checkpoint(a), 0);
  td_memmap_append_abort(a);
  td_memmap_append_free(a);
  CHECK(!exists(at(".gone.checkpoint")));
  CHECK(td_memmap_append_resume(gone, 0) == NULL);
  CHECK_ERROR("resume: '");
  CHECK_ERROR("gone' has no checkpoint to resume");

  a = td_memmap_append_open(gone, TD_MEMMAP_NO_FSYNC);
  write_rows(a, 0, 7);
  CHECK_EQ_I(td_memmap_append_checkpoint(a), 0);
  td_memmap_append_suspend(a);
  td_memmap_append_free(a);
  a = td_memmap_append_open(gone, TD_MEMMAP_NO_FSYNC | TD_MEMMAP_EXISTSOK);
  CHECK(a != NULL);
  CHECK(!exists(at(".gone.checkpoint")));
  CHECK_EQ_I(td_memmap_append_checkpoint_rows(gone), -1);
  td_memmap_append_free(a);
}

/* What a killed commit or checkpoint leaves (a staged folder, a meta.json, a stray file)
 * is swept at resume; a resume refuses a prefix that exists without existsok. */
static void test_leftovers_and_refusals(void) {
  const char *out = at("left");
  td_memmap_append *a = td_memmap_append_open(out, TD_MEMMAP_NO_FSYNC);
  write_rows(a, 0, 21);
  CHECK_EQ_I(td_memmap_append_checkpoint(a), 0);
  CHECK(td_memmap_append_stage(a) != NULL); /* staged, never recorded */
  td_memmap_append_suspend(a);
  td_memmap_append_free(a);
  FILE *f = fopen(at(".left.checkpoint/meta.json"), "w");
  if (f) fputs("{}", f), fclose(f);
  f = fopen(at(".left.checkpoint/inner/meta.json"), "w");
  if (f) fputs("{}", f), fclose(f);
  f = fopen(at(".left.checkpoint/.x.memmap.tmp-1-1"), "w");
  if (f) fclose(f);
  CHECK(exists(at(".left.checkpoint/%checkpoint.next")));

  mkdir(out, 0777); /* something took the prefix meanwhile */
  CHECK(td_memmap_append_resume(out, TD_MEMMAP_NO_FSYNC) == NULL);
  CHECK_ERROR("exists (pass existsok)");
  rmdir(out);

  a = td_memmap_append_resume(out, TD_MEMMAP_NO_FSYNC);
  CHECK(a != NULL);
  CHECK(!exists(at(".left.checkpoint/%checkpoint.next")));
  CHECK(!exists(at(".left.checkpoint/meta.json")));
  CHECK(!exists(at(".left.checkpoint/.x.memmap.tmp-1-1")));
  write_rows(a, 21, 100);
  CHECK_EQ_I(td_memmap_append_commit(a, 1), 0);
  td_memmap_append_free(a);
  CHECK(same_tree(at("ref"), out));

  CHECK(td_memmap_append_resume(NULL, 0) == NULL);
  CHECK(td_memmap_append_resume(out, 64) == NULL);
  CHECK_ERROR("resume: unknown flags 64");
  CHECK(td_memmap_append_checkpoint(NULL) < 0);
  CHECK(td_memmap_append_stage(NULL) == NULL);
  CHECK(td_memmap_append_checkpoint_borrow(NULL) == NULL);
  CHECK(td_memmap_append_path_borrow(NULL) == NULL);
  td_memmap_append_suspend(NULL);
  CHECK(td_memmap_append_checkpoint_rows("") < 0);
}

/* A file added to the temporary folder (tdflow's provenance) is committed with it. */
static void test_added_file_is_committed(void) {
  const char *out = at("extra");
  td_memmap_append *a = td_memmap_append_open(out, TD_MEMMAP_NO_FSYNC);
  write_rows(a, 0, 7);
  CHECK_EQ_I(td_memmap_append_checkpoint(a), 0);
  const char *dir = td_memmap_append_path_borrow(a);
  CHECK(dir && strstr(dir, ".extra.checkpoint") != NULL);
  char p[1024];
  snprintf(p, sizeof p, "%s/%%provenance.json", dir ? dir : root);
  CHECK_EQ_I(td_fs_write_file(p, "{}", 2, TD_MEMMAP_NO_FSYNC), 0);
  CHECK_EQ_I(td_memmap_append_commit(a, 1), 0);
  CHECK(td_memmap_append_path_borrow(a) == NULL);
  td_memmap_append_free(a);
  CHECK(exists(at("extra/%provenance.json")));
  CHECK(!exists(at("extra/%lock")) && !exists(at("extra/%checkpoint")) &&
        !exists(at("extra/%structure")));
  td_dict *d = td_dict_load_memmap(out, TD_MAP_READ);
  CHECK(d != NULL);
  td_dict_release(d);
}

static void test_generator_state(void) {
  td_generator *g = td_generator_new(7);
  int64_t n = 10;
  td_tensor *a = td_tensor_empty(1, &n, TD_FLOAT64), *b = td_tensor_empty(1, &n, TD_FLOAT64);
  CHECK_EQ_I(td_uniform_(a, 0, 1, g), 0);
  uint64_t seed = td_generator_seed(g), offset = td_generator_offset(g);
  CHECK_EQ_I(offset, 3);
  CHECK_EQ_I(td_uniform_(a, 0, 1, g), 0);
  td_generator_manual_seed(g, 99);
  td_generator_set_state(g, seed, offset);
  CHECK_EQ_I(td_uniform_(b, 0, 1, g), 0);
  CHECK(same_bytes(a, b));
  td_generator_set_state(NULL, 5, 11);
  CHECK_EQ_I(td_generator_seed(NULL), 5);
  CHECK_EQ_I(td_generator_offset(NULL), 11);
  td_generator_manual_seed(NULL, 0);
  td_tensor_release(a), td_tensor_release(b);
  td_generator_release(g);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/td_append_XXXXXX");
  if (!mkdtemp(root)) return 2;
  test_uninterrupted_reference();
  test_killed_then_resumed();
  test_suspend_and_free_keep_it();
  test_empty_checkpoint_abort_and_existsok();
  test_leftovers_and_refusals();
  test_added_file_is_committed();
  test_generator_state();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  CHECK_SUMMARY();
}
