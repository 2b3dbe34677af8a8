/* test_core/store/consolidate_*.c: td_dict_consolidate and td_dict_from_consolidated: round
 * trips of every dtype, nesting, non-tensor values (uniform and stacked), zero-element
 * and non-contiguous leaves, read-only and read-write mappings, existsok and atomic
 * replacement, every validation error on corrupted files (written into a mkdtemp
 * folder), and interop with files Python tensordict wrote
 * (tests/fixtures/python-consolidated, see its README.md): they load, and the same
 * containers built here are written byte for byte as Python wrote them. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "dicts.h"

/* ---- files ------------------------------------------------------------------------ */

static char tmpdir[256];
static char fixtures[512];

/* tmpdir/name, in one of a few rotating buffers. */
static const char *tmp_path(const char *name) {
  static char bufs[8][512];
  static int next;
  char *b = bufs[next++ % 8];
  snprintf(b, sizeof bufs[0], "%s/%s", tmpdir, name);
  return b;
}

static const char *fixture_path(const char *name) {
  static char bufs[4][768];
  static int next;
  char *b = bufs[next++ % 4];
  snprintf(b, sizeof bufs[0], "%s/%s", fixtures, name);
  return b;
}

/* The whole file (malloc'd), or NULL. */
static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
  if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
    free(p);
    p = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return p;
}

static void spit(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (!f) return;
  CHECK(fwrite(data, 1, len, f) == len);
  fclose(f);
}

/* A consolidated file by hand: plen payload bytes (0, 1, 2, ...), the JSON, then its
 * length as a little-endian int64 (or the given length when it is not -1). */
static void write_td_file(const char *path, size_t plen, const char *json, int64_t mlen) {
  size_t jlen = strlen(json);
  unsigned char *b = malloc(plen + jlen + 8);
  for (size_t i = 0; i < plen; i++) b[i] = (unsigned char)i;
  memcpy(b + plen, json, jlen);
  uint64_t m = mlen == -1 ? (uint64_t)jlen : (uint64_t)mlen;
  for (int k = 0; k < 8; k++) b[plen + jlen + (size_t)k] = (unsigned char)(m >> (8 * k));
  spit(path, b, plen + jlen + 8);
  free(b);
}

static bool same_file(const char *a, const char *b) {
  size_t la, lb;
  unsigned char *pa = slurp(a, &la), *pb = slurp(b, &lb);
  bool same = pa && pb && la == lb && memcmp(pa, pb, la) == 0;
  if (!same && pa && pb) {
    size_t i = 0;
    while (i < la && i < lb && pa[i] == pb[i]) i++;
    fprintf(stderr, "  %s (%zu bytes) and %s (%zu bytes) differ at byte %zu\n", a, la, b, lb,
            i);
  }
  free(pa);
  free(pb);
  return same;
}

static int64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* Entries of tmpdir other than . and .. */
static int count_tmpdir(void) {
  DIR *dir = opendir(tmpdir);
  int n = 0;
  for (struct dirent *e; dir && (e = readdir(dir));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  if (dir) closedir(dir);
  return n;
}

static void empty_tmpdir(void) {
  DIR *dir = opendir(tmpdir);
  for (struct dirent *e; dir && (e = readdir(dir));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    const char *p = tmp_path(e->d_name);
    if (unlink(p) != 0) rmdir(p);
  }
  if (dir) closedir(dir);
}

/* ---- tensors ------------------------------------------------------------------------ */

/* A contiguous tensor holding vals (row-major). */
static td_tensor *from_values(int32_t ndim, const int64_t *shape, int32_t dtype,
                              const double *vals) {
  td_tensor *t = td_tensor_empty(ndim, shape, dtype);
  int64_t idx[TD_MAX_DIMS] = {0}, n = numel_of(ndim, shape);
  for (int64_t i = 0; t && i < n; i++) {
    wr(t, idx, vals[i]);
    next_index(ndim, shape, idx);
  }
  return t;
}

/* Same dtype, shape and elements. */
static bool same_tensor(const td_tensor *a, const td_tensor *b) {
  if (!a || !b || a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int32_t k = 0; k < a->ndim; k++)
    if (a->shape[k] != b->shape[k]) return false;
  int64_t idx[TD_MAX_DIMS] = {0}, n = numel_of(a->ndim, a->shape);
  for (int64_t i = 0; i < n; i++) {
    if (rd(a, idx) != rd(b, idx)) return false;
    next_index(a->ndim, a->shape, idx);
  }
  return true;
}

/* The elements of t, row-major, are vals. */
static bool holds(const td_tensor *t, const double *vals) {
  if (!t) return false;
  int64_t idx[TD_MAX_DIMS] = {0}, n = numel_of(t->ndim, t->shape);
  for (int64_t i = 0; i < n; i++) {
    if (rd(t, idx) != vals[i]) return false;
    next_index(t->ndim, t->shape, idx);
  }
  return true;
}

static const char *key_at(const td_dict *d, int32_t i) {
  const char *k = td_dict_key_borrow(d, i, NULL);
  return k ? k : "(none)";
}

/* The keys of d in order, joined by spaces. */
static const char *key_list(const td_dict *d) {
  static char b[512];
  b[0] = '\0';
  for (int32_t i = 0; d && i < td_dict_head_borrow(d)->nkeys; i++) {
    if (i) strcat(b, " ");
    strcat(b, key_at(d, i));
  }
  return b;
}

#define CHECK_KEYS(d, expected)                                                     \
  do {                                                                              \
    CHECK(strcmp(key_list(d), (expected)) == 0);                                   \
    if (strcmp(key_list(d), (expected)) != 0)                                      \
      fprintf(stderr, "  keys: '%s', expected '%s'\n", key_list(d), (expected));    \
  } while (0)

#define CHECK_TEXT(d, key, pos, expected)                                           \
  do {                                                                              \
    CHECK(strcmp(text((d), (key), (pos)), (expected)) == 0);                       \
    if (strcmp(text((d), (key), (pos)), (expected)) != 0)                          \
      fprintf(stderr, "  text of %s: %s, expected %s\n", (key), text((d), (key), (pos)), \
              (expected));                                                          \
  } while (0)

/* ---- round trips ---------------------------------------------------------------------- */

static void test_every_dtype(void) {
  const int64_t b2 = 2, s23[2] = {2, 3};
  td_dict *d = td_dict_new(1, &b2);
  for (int k = 0; k < TD_NUM_DTYPES; k++)
    put(d, td_dtype_name(all_dtypes[k]), make(2, s23, all_dtypes[k], CONTIGUOUS, k));
  const char *f = tmp_path("dtypes.td");
  CHECK(td_dict_consolidate(d, f, 0) == 0);

  td_dict *r = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(r != NULL);
  CHECK(BATCH_IS(r, 2));
  CHECK_KEYS(r, "bool uint8 int8 int16 int32 int64 float16 bfloat16 float32 float64");
  const td_dict_head *h = r ? td_dict_head_borrow(r) : NULL;
  CHECK(h && !h->locked && !h->has_names && h->device_type == TD_DEVICE_NONE);
  /* every leaf views one read-only file storage, 8-byte aligned, padded to 8 bytes */
  td_storage *s = NULL;
  int64_t expect_off = 0;
  for (int k = 0; r && k < TD_NUM_DTYPES; k++) {
    const char *key = td_dtype_name(all_dtypes[k]);
    const td_tensor *a = leaf(d, key), *b = leaf(r, key);
    CHECK(same_tensor(a, b));
    if (!b) continue;
    if (!s) s = b->storage;
    CHECK(b->storage == s);
    CHECK(td_tensor_is_contiguous(b));
    CHECK_EQ_I(b->offset * b->itemsize, expect_off);
    int64_t n = 6 * b->itemsize;
    expect_off += n + (n % 8 ? 8 - n % 8 : 0);
  }
  CHECK(s && td_storage_kind(s) == TD_STORAGE_FILE && !td_storage_is_writable(s));
  CHECK_EQ_I(expect_off, 216); /* as Python's dtypes.td: 8+8+8+16+24+48+16+16+24+48 */
  CHECK(s && td_storage_nbytes(s) == file_size(f));

  /* writing what was loaded gives the same bytes */
  CHECK(td_dict_consolidate(r, tmp_path("dtypes2.td"), TD_MEMMAP_NO_FSYNC) == 0);
  CHECK(same_file(f, tmp_path("dtypes2.td")));
  td_dict_release(r);
  td_dict_release(d);
  empty_tmpdir();
}

static void test_nesting_and_values(void) {
  const int64_t b2 = 2, b23[2] = {2, 3}, s24[2] = {2, 4}, s232[3] = {2, 3, 2};
  td_dict *d = td_dict_new(1, &b2);
  put(d, "a", seq(2, s24, TD_FLOAT32, 0.5));
  td_dict *kidd = td_dict_new(2, b23);
  put(kidd, "b", seq(3, s232, TD_INT16, -5));
  td_dict *grand = td_dict_new(2, b23);
  put(grand, "c", seq(2, b23, TD_FLOAT64, 100));
  put_dict(kidd, "grand", grand);
  put_value(kidd, "v", "{\"k\":[1,2.5,null],\"s\":\"\xc3\xa9\\n\\u0001\"}");
  put_dict(d, "kid", kidd);
  put_value(d, "str", "\"hello\"");
  put_value(d, "num", "12345678901234567890");
  put_value(d, "nan", "NaN");
  const char *st_texts[3] = {"\"x\"", "\"y\"", "{\"a\":1}"};
  put_values(d, "st", 3, st_texts, (const int64_t[]){2, 0});
  const char *su_texts[2] = {"1", "\"u\""};
  put_values(d, "su", 2, su_texts, (const int64_t[]){1, 1}); /* uniform: one value */
  put_value(d, "key with \"quotes\" and \xe2\x98\x83", "[]");
  CHECK(td_dict_set_names(d, (const char *const[]){"env"}) == 0);
  CHECK(td_dict_set_device(d, TD_DEVICE_CPU, 0) == 0);
  td_dict_set_locked(d, 1);

  const char *f = tmp_path("nested.td");
  CHECK(td_dict_consolidate(d, f, 0) == 0);
  td_dict *r = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(r != NULL);
  /* Python's order: non-tensor values, leaves, then nested containers and stacks */
  CHECK_KEYS(r, "str num nan su key with \"quotes\" and \xe2\x98\x83 a kid st");
  CHECK(BATCH_IS(r, 2));
  const td_dict_head *h = r ? td_dict_head_borrow(r) : NULL;
  CHECK(h && h->locked && h->device_type == TD_DEVICE_CPU);
  CHECK(r && td_dict_name_borrow(r, 0) && strcmp(td_dict_name_borrow(r, 0), "env") == 0);
  CHECK(same_tensor(leaf(d, "a"), leaf(r, "a")));
  CHECK_TEXT(r, "str", 0, "\"hello\"");
  CHECK_TEXT(r, "num", 0, "12345678901234567890");
  CHECK_TEXT(r, "nan", 0, "NaN");
  CHECK_TEXT(r, "key with \"quotes\" and \xe2\x98\x83", 0, "[]");
  CHECK(kind(r, "su") == TD_ENTRY_VALUE);
  CHECK_TEXT(r, "su", 0, "\"u\"");
  CHECK(kind(r, "st") == TD_ENTRY_VALUES);
  CHECK_EQ_I(ntexts(r, "st"), 2); /* the unused "y" is not written */
  CHECK_TEXT(r, "st", 0, "{\"a\":1}");
  CHECK_TEXT(r, "st", 1, "\"x\"");
  CHECK(holds(leaf(r, "st"), (const double[]){0, 1}));

  td_dict *rk = kid(r, "kid");
  CHECK(BATCH_IS(rk, 2, 3));
  CHECK_KEYS(rk, "v b grand");
  CHECK_TEXT(rk, "v", 0, "{\"k\":[1,2.5,null],\"s\":\"\xc3\xa9\\n\\u0001\"}");
  td_dict *ok = kid(d, "kid");
  CHECK(same_tensor(leaf(ok, "b"), leaf(rk, "b")));
  td_dict *rg = kid(rk, "grand"), *og = kid(ok, "grand");
  CHECK(BATCH_IS(rg, 2, 3));
  CHECK(same_tensor(leaf(og, "c"), leaf(rg, "c")));
  CHECK(rk && td_dict_head_borrow(rk)->locked && rg && td_dict_head_borrow(rg)->locked);
  CHECK(rk && td_dict_head_borrow(rk)->device_type == TD_DEVICE_CPU);
  CHECK(rk && td_dict_name_borrow(rk, 0) && strcmp(td_dict_name_borrow(rk, 0), "env") == 0 &&
        td_dict_name_borrow(rk, 1) == NULL);
  /* one storage for the leaves of every level */
  CHECK(leaf(r, "a") && leaf(rg, "c") && leaf(r, "a")->storage == leaf(rg, "c")->storage);
  /* locked: no new keys */
  td_tensor *t = seq(1, &b2, TD_FLOAT32, 0);
  CHECK(r && td_dict_set_tensor(r, "new", 3, t) < 0);
  CHECK_ERROR("locked");
  td_tensor_release(t);

  /* the same content compares equal (su aside: it became a uniform value) */
  int32_t eq = 0;
  CHECK(td_dict_set_locked(d, 0) == 0 && td_dict_del(d, find(d, "su")) == 0);
  CHECK(td_dict_set_locked(r, 0) == 0 && td_dict_del(r, find(r, "su")) == 0);
  CHECK(td_dict_equal(d, r, &eq) == 0 && eq == 1);

  td_dict_release(rg), td_dict_release(og), td_dict_release(rk), td_dict_release(ok);
  td_dict_release(r);
  td_dict_release(d);
  empty_tmpdir();
}

static void test_empty_and_strided(void) {
  /* zero-element leaves and batch dims: no payload at all */
  const int64_t b0 = 0, s03[2] = {0, 3};
  td_dict *d = td_dict_new(1, &b0);
  put(d, "e", td_tensor_empty(2, s03, TD_FLOAT32));
  td_dict *n = td_dict_new(1, &b0);
  put(n, "m", td_tensor_empty(1, &b0, TD_INT16));
  put_dict(d, "n", n);
  put_value(d, "v", "\"x\"");
  const char *texts[1] = {"7"};
  put_values(d, "stk", 1, texts, NULL); /* no element: written as a uniform value */
  const char *f = tmp_path("empty.td");
  CHECK(td_dict_consolidate(d, f, 0) == 0);
  td_dict *r = td_dict_from_consolidated(f, TD_MAP_READWRITE);
  CHECK(BATCH_IS(r, 0));
  CHECK_KEYS(r, "v stk e n");
  CHECK(SHAPE_IS(leaf(r, "e"), 0, 3) && leaf(r, "e")->dtype == TD_FLOAT32);
  td_dict *rn = kid(r, "n");
  CHECK(SHAPE_IS(leaf(rn, "m"), 0) && leaf(rn, "m")->dtype == TD_INT16);
  CHECK_TEXT(r, "stk", 0, "7");
  size_t len;
  unsigned char *raw = slurp(f, &len);
  int64_t mlen = 0;
  for (int k = 7; raw && k >= 0; k--) mlen = mlen * 256 + raw[len - 8 + (size_t)k];
  CHECK_EQ_I(mlen + 8, (int64_t)len); /* payload 0 bytes */
  free(raw);
  td_dict_release(rn);
  td_dict_release(r);
  td_dict_release(d);

  /* non-contiguous leaves (transposed, sliced with steps, expanded) and a 0-dim one */
  const int64_t b3 = 3, s34[2] = {3, 4};
  d = td_dict_new(1, &b3);
  const int32_t dts[4] = {TD_FLOAT32, TD_INT8, TD_BFLOAT16, TD_FLOAT64};
  const char *names[3] = {"transposed", "sliced", "expanded"};
  const int layouts[3] = {TRANSPOSED, SLICED, EXPANDED};
  char key[64];
  for (int l = 0; l < 3; l++)
    for (int k = 0; k < 4; k++) {
      snprintf(key, sizeof key, "%s_%s", names[l], td_dtype_name(dts[k]));
      td_tensor *t = make(2, s34, dts[k], layouts[l], k + 1);
      CHECK(t && !td_tensor_is_contiguous(t));
      put(d, key, t);
    }
  CHECK(td_dict_consolidate(d, f, TD_MEMMAP_EXISTSOK) == 0);
  r = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(r && td_dict_head_borrow(r)->nkeys == 12);
  int bad = 0;
  for (int32_t i = 0; r && i < 12; i++) {
    const td_tensor *a = leaf(d, key_at(r, i)), *b = leaf(r, key_at(r, i));
    bad += !same_tensor(a, b) || !td_tensor_is_contiguous(b);
  }
  CHECK_EQ_I(bad, 0);
  td_dict_release(r);
  td_dict_release(d);

  /* batch []: 0-dim leaves, a nested container with a batch of its own */
  d = td_dict_new(0, NULL);
  put(d, "scalar", td_tensor_full(0, NULL, TD_INT64, -42));
  td_dict *z = td_dict_new(1, &b3);
  put(z, "v", seq(1, &b3, TD_FLOAT16, -1));
  put_dict(d, "z", z);
  CHECK(td_dict_consolidate(d, f, TD_MEMMAP_EXISTSOK) == 0);
  r = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(BATCH_IS0(r) && leaf(r, "scalar") && leaf(r, "scalar")->ndim == 0 &&
        EL(leaf(r, "scalar"), 0) == -42);
  td_dict *rz = kid(r, "z");
  CHECK(BATCH_IS(rz, 3) && holds(leaf(rz, "v"), (const double[]){-1, 0, 1}));
  td_dict_release(rz);
  td_dict_release(r);
  td_dict_release(d);
  empty_tmpdir();
}

static void test_modes(void) {
  const int64_t b3 = 3;
  td_dict *d = td_dict_new(1, &b3);
  put(d, "x", seq(1, &b3, TD_FLOAT32, 1));
  put(d, "y", seq(1, &b3, TD_INT64, 10));
  const char *f = tmp_path("modes.td");
  CHECK(td_dict_consolidate(d, f, 0) == 0);

  /* read-only: the leaves refuse writes */
  td_dict *r = td_dict_from_consolidated(f, TD_MAP_READ);
  const td_tensor *x = leaf(r, "x");
  CHECK(x && !td_tensor_is_writable(x));
  td_tensor view;
  CHECK(x && td_tensor_select(x, 0, 1, &view) == 0);
  CHECK(x && td_tensor_write_f64(&view, NULL, 5) == TD_EREADONLY);
  CHECK(x && td_tensor_fill_((td_tensor *)x, 0) == TD_EREADONLY);
  CHECK(r && td_dict_binary_(TD_BINARY_ADD, r, NULL, NULL, 1, TD_SCALAR_INT) < 0);
  CHECK(holds(x, (const double[]){1, 2, 3}));
  td_dict_release(r);

  /* read-write: writes reach the file */
  r = td_dict_from_consolidated(f, TD_MAP_READWRITE);
  x = leaf(r, "x");
  CHECK(x && td_tensor_is_writable(x));
  CHECK(x && td_tensor_write_f64((td_tensor *)x, (const int64_t[]){2}, 30) == 0);
  CHECK(r && td_dict_binary_(TD_BINARY_ADD, r, NULL, NULL, 1, TD_SCALAR_INT) == 0);
  td_dict_release(r);
  r = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(holds(leaf(r, "x"), (const double[]){2, 3, 31}));
  CHECK(holds(leaf(r, "y"), (const double[]){11, 12, 13}));
  td_dict_release(r);

  /* arguments */
  CHECK(td_dict_from_consolidated(f, TD_MAP_CREATE) == NULL);
  CHECK_ERROR("from_consolidated: mode must be TD_MAP_READ or TD_MAP_READWRITE, got 2");
  CHECK(td_dict_from_consolidated(NULL, TD_MAP_READ) == NULL);
  CHECK_ERROR("from_consolidated: the filename is empty");
  CHECK(td_dict_from_consolidated(tmp_path("missing.td"), TD_MAP_READ) == NULL);
  CHECK_ERROR("from_consolidated: cannot open '");
  CHECK_ERROR("missing.td': No such file or directory");
  CHECK(td_dict_from_consolidated(tmpdir, TD_MAP_READ) == NULL);
  CHECK_ERROR("is not a regular file");
  CHECK(td_dict_consolidate(NULL, f, 0) == TD_EINVAL);
  CHECK(td_dict_consolidate(d, "", 0) == TD_EINVAL);
  CHECK_MSG("consolidate: the filename is empty");
  CHECK(td_dict_consolidate(d, f, 8) == TD_EINVAL);
  CHECK_MSG("consolidate: unknown flags 8");
  td_dict_release(d);
  empty_tmpdir();
}

static void test_existsok(void) {
  const int64_t b2 = 2;
  td_dict *d1 = td_dict_new(1, &b2), *d2 = td_dict_new(1, &b2);
  put(d1, "x", seq(1, &b2, TD_FLOAT64, 1));
  put(d2, "x", seq(1, &b2, TD_FLOAT64, 100));
  put(d2, "extra", seq(1, &b2, TD_UINT8, 7));
  const char *f = tmp_path("a.td");
  CHECK(td_dict_consolidate(d1, f, 0) == 0);
  CHECK(td_dict_consolidate(d2, f, 0) == TD_EIO);
  char msg[700];
  snprintf(msg, sizeof msg, "consolidate: '%s' exists (pass existsok)", f);
  CHECK_MSG(msg);

  /* replaced atomically: a container mapping the old file keeps its data */
  td_dict *old = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(td_dict_consolidate(d2, f, TD_MEMMAP_EXISTSOK) == 0);
  td_dict *now = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(holds(leaf(old, "x"), (const double[]){1, 2}) && find(old, "extra") < 0);
  CHECK(holds(leaf(now, "x"), (const double[]){100, 101}));
  CHECK(holds(leaf(now, "extra"), (const double[]){7, 8}));
  CHECK(td_dict_consolidate(d1, f, TD_MEMMAP_EXISTSOK | TD_MEMMAP_NO_FSYNC) == 0);
  td_dict_release(old);
  td_dict_release(now);
  now = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(holds(leaf(now, "x"), (const double[]){1, 2}) && find(now, "extra") < 0);
  td_dict_release(now);
  /* writing a container over the file its own leaves map */
  now = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(td_dict_consolidate(now, f, TD_MEMMAP_EXISTSOK) == 0);
  td_dict_release(now);
  now = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(holds(leaf(now, "x"), (const double[]){1, 2}));
  td_dict_release(now);
  CHECK_EQ_I(count_tmpdir(), 1); /* no temporary left behind */

  /* a folder at the path; a missing folder */
  CHECK(mkdir(tmp_path("dir.td"), 0755) == 0);
  CHECK(td_dict_consolidate(d1, tmp_path("dir.td"), TD_MEMMAP_EXISTSOK) == TD_EIO);
  CHECK_ERROR("dir.td' is a folder, not a file");
  CHECK(td_dict_consolidate(d1, tmp_path("no/such/dir.td"), 0) == TD_EIO);
  CHECK_ERROR("consolidate: cannot create a temporary file beside '");
  CHECK_ERROR("No such file or directory");

  /* what Python's layout cannot hold is refused before anything is written */
  td_dict *bad = td_dict_new(1, &b2);
  put_value(bad, "v", "{\"a\": }");
  CHECK(td_dict_consolidate(bad, tmp_path("bad.td"), 0) == TD_EINVAL);
  CHECK_ERROR("bad.td': key 'v': the value is not valid JSON: expected a value but found '}' at byte 7");
  td_dict_release(bad);
  bad = td_dict_new(1, &b2);
  put_value(bad, "v", "\"\xff\"");
  CHECK(td_dict_consolidate(bad, tmp_path("bad.td"), 0) == TD_EINVAL);
  CHECK_ERROR("key 'v': the value is not valid UTF-8");
  td_dict_release(bad);
  bad = td_dict_new(1, &b2);
  put(bad, "k\xc3", seq(1, &b2, TD_FLOAT32, 0));
  CHECK(td_dict_consolidate(bad, tmp_path("bad.td"), 0) == TD_EINVAL);
  CHECK_ERROR("the key is not valid UTF-8");
  td_dict_release(bad);
  bad = td_dict_new(1, &b2);
  put_dict(bad, "leaves", td_dict_new(1, &b2));
  CHECK(td_dict_consolidate(bad, tmp_path("bad.td"), 0) == TD_EINVAL);
  CHECK_ERROR("key 'leaves': a nested TensorDict cannot have this key");
  td_dict_release(bad);
  bad = td_dict_new(1, &b2);
  put(bad, "<NJT_VALUES>x", seq(1, &b2, TD_FLOAT32, 0));
  CHECK(td_dict_consolidate(bad, tmp_path("bad.td"), 0) == TD_EINVAL);
  CHECK_ERROR("keys starting with '<NJT' mark nested tensors");
  td_dict_release(bad);
  bad = td_dict_new(1, &b2);
  put_values(bad, "s", 2, (const char *const[]){"1", "2"}, (const int64_t[]){0, 5});
  CHECK(td_dict_consolidate(bad, tmp_path("bad.td"), 0) == TD_EINDEX);
  CHECK_ERROR("key 's': stacked value position 5 is outside [0, 2)");
  td_dict_release(bad);
  CHECK(file_size(tmp_path("bad.td")) == -1);
  CHECK_EQ_I(count_tmpdir(), 2); /* a.td and dir.td */

  td_dict_release(d1);
  td_dict_release(d2);
  empty_tmpdir();
}

/* ---- validation of what is loaded -------------------------------------------------------- */

/* A valid metadata: float32 "a" [2] at bytes [0, 8) of a 16-byte payload, batch [2]. */
#define META_HEAD "{\"cls\": \"TensorDict\", \"non_tensors\": {}, "
#define META_CM "\"cls_metadata\": {\"device\": null, \"names\": [null], \"batch_size\": [2], \"is_locked\": false}"
#define LEAF_A "\"leaves\": {\"a\": [\"torch.float32\", [2], 0, 8, 0]}, "

static int bad_count;

/* Writes the file, loads it: NULL, an error naming the file and containing expected. */
static void expect_bad(size_t plen, const char *json, int64_t mlen, const char *expected) {
  char name[32];
  snprintf(name, sizeof name, "bad%d.td", ++bad_count);
  const char *f = tmp_path(name);
  write_td_file(f, plen, json, mlen);
  td_dict *d = td_dict_from_consolidated(f, TD_MAP_READ);
  CHECK(d == NULL);
  char prefix[600];
  snprintf(prefix, sizeof prefix, "from_consolidated: '%s': ", f);
  CHECK(strncmp(td_last_error(), prefix, strlen(prefix)) == 0);
  CHECK(strstr(td_last_error(), expected) != NULL);
  if (!strstr(td_last_error(), expected))
    fprintf(stderr, "  case %d: got '%s'\n  expected '%s'\n", bad_count, td_last_error(),
            expected);
  td_dict_release(d);
}

static void expect_bad_meta(const char *json, const char *expected) {
  expect_bad(16, json, -1, expected);
}

static void test_validation(void) {
  /* the baseline loads */
  const char *good = META_HEAD LEAF_A META_CM "}";
  write_td_file(tmp_path("good.td"), 16, good, -1);
  td_dict *d = td_dict_from_consolidated(tmp_path("good.td"), TD_MAP_READ);
  CHECK(d && SHAPE_IS(leaf(d, "a"), 2));
  td_dict_release(d);
  /* a "size" field is ignored, as Python ignores it; so is unknown whitespace */
  write_td_file(tmp_path("good.td"), 16,
                " {\"size\": 16,\n\t\"cls\":\"TensorDict\",\"non_tensors\":{}," LEAF_A META_CM
                "}\r\n",
                -1);
  d = td_dict_from_consolidated(tmp_path("good.td"), TD_MAP_READ);
  CHECK(d && SHAPE_IS(leaf(d, "a"), 2));
  td_dict_release(d);

  /* the file and the metadata length */
  spit(tmp_path("short.td"), "abc", 3);
  CHECK(td_dict_from_consolidated(tmp_path("short.td"), TD_MAP_READ) == NULL);
  CHECK_ERROR("short.td': the file holds 3 bytes, too few for the 8-byte metadata length");
  spit(tmp_path("empty.td"), "", 0);
  CHECK(td_dict_from_consolidated(tmp_path("empty.td"), TD_MAP_READ) == NULL);
  CHECK_ERROR("the file holds 0 bytes");
  expect_bad(0, "", 0, "metadata length: 0 is out of range: the file holds 8 bytes");
  expect_bad(16, good, 100000, "metadata length: 100000 is out of range");
  expect_bad(16, good, INT64_MIN, "metadata length: -9223372036854775808 is out of range");
  expect_bad(16, good, (int64_t)strlen(good) + 17, "out of range: the file holds");
  /* a length that points into the payload: the JSON starts mid-way */
  expect_bad(16, good, (int64_t)strlen(good) + 3, "metadata: not valid JSON");

  /* JSON */
  expect_bad_meta("{\"cls\": \"TensorDict\", ",
                  "metadata: not valid JSON: unexpected end of input at byte 23");
  expect_bad_meta("{\"cls\": ", "metadata: not valid JSON: unexpected end of input at byte 9");
  expect_bad_meta("{\"cls\": \"TensorDict\"} x", "trailing garbage at byte 23");
  expect_bad_meta("{\"cls\": \"Tensor\\qDict\"}", "invalid escape '\\q' at byte 16");
  expect_bad_meta("{\"cls\": \"a\nb\"}", "control character in string at byte 11");
  expect_bad_meta("{\"cls\": 01}", "leading zero in number at byte 9");
  expect_bad_meta("{\"cls\": -}", "invalid number at byte 9");
  expect_bad_meta("{\"cls\": 1.}", "invalid number at byte 9");
  expect_bad_meta("{cls: 1}", "expected a string key but found 'c' at byte 2");
  expect_bad_meta("{\"cls\" 1}", "expected ':' but found '1' at byte 8");
  expect_bad_meta("[1, 2", "unexpected end of input at byte 6");
  expect_bad_meta("\"\\u12\"", "invalid \\u escape at byte 2");
  char deep[1100];
  memset(deep, '[', 1001);
  deep[1001] = '\0';
  expect_bad_meta(deep, "nesting deeper than 1000 levels at byte 1001");
  expect_bad_meta("[]", "metadata: a TensorDict's metadata must be an object, got a list");

  /* containers */
  expect_bad_meta("{\"cls\": \"LazyStackedTensorDict\", \"non_tensors\": {}}",
                  "cls_metadata.stack_dim: must be a non-negative integer");
  expect_bad_meta("{\"cls\": \"Foo\", \"non_tensors\": {}}", "cls: class 'Foo' is not supported");
  expect_bad_meta("{\"non_tensors\": {}}", ": cls: must be a class name");
  expect_bad_meta(META_HEAD LEAF_A "\"x\": 1}", ": cls_metadata: must be an object");
  expect_bad_meta("{\"cls\": \"TensorDict\", " LEAF_A META_CM "}", ": non_tensors: must be an object");
  expect_bad_meta(META_HEAD "\"leaves\": [], " META_CM "}", ": leaves: must be an object");
  expect_bad_meta(META_HEAD LEAF_A "\"cls_metadata\": {}}",
                  ": cls_metadata.batch_size: batch_size is missing");
  expect_bad_meta(META_HEAD LEAF_A "\"cls_metadata\": {\"batch_size\": [2, -3]}}",
                  ": cls_metadata.batch_size: batch_size has a negative size -3");
  expect_bad_meta(META_HEAD LEAF_A "\"cls_metadata\": {\"batch_size\": 2}}",
                  "batch_size must be a list of sizes, got a number");
  expect_bad_meta(META_HEAD LEAF_A
                  "\"cls_metadata\": {\"batch_size\": [2], \"names\": [\"a\", \"b\"]}}",
                  ": cls_metadata.names: must be a list of 1 names or nulls");
  expect_bad_meta(META_HEAD "\"leaves\": {}, "
                  "\"cls_metadata\": {\"batch_size\": [2, 2], \"names\": [\"a\", \"a\"]}}",
                  ": cls_metadata.names: names: 'a' names dims 1 and 2");
  expect_bad_meta(META_HEAD LEAF_A "\"cls_metadata\": {\"batch_size\": [2], \"names\": [3]}}",
                  ": cls_metadata.names: name 0 must be a string or null");
  expect_bad_meta(META_HEAD LEAF_A "\"cls_metadata\": {\"batch_size\": [2], \"device\": \"tpu\"}}",
                  ": cls_metadata.device: unknown device 'tpu'");
  expect_bad_meta(META_HEAD LEAF_A "\"cls_metadata\": {\"batch_size\": [2], \"device\": 0}}",
                  ": cls_metadata.device: device must be a string or null, got a number");
  expect_bad_meta(META_HEAD LEAF_A
                  "\"cls_metadata\": {\"batch_size\": [2], \"device\": \"cuda:0\"}}",
                  ": cls_metadata.device: device: 'a' is on cpu:0 but the TensorDict's device is "
                  "cuda:0");
  expect_bad_meta(META_HEAD LEAF_A
                  "\"cls_metadata\": {\"batch_size\": [2], \"is_locked\": \"yes\"}}",
                  ": cls_metadata.is_locked: must be true or false, got a string");
  expect_bad_meta(META_HEAD LEAF_A META_CM ", \"k\": {\"cls\": \"TensorDict\", "
                  "\"non_tensors\": {}, \"leaves\": {}, \"cls_metadata\": {\"batch_size\": [3]}}}",
                  ": k.cls_metadata.batch_size: [3] does not start with the parent's batch size [2]");
  expect_bad_meta(META_HEAD LEAF_A META_CM ", \"k\": {\"cls\": \"TensorDict\", "
                  "\"non_tensors\": {}, \"leaves\": {\"z\": [\"torch.int7\", [2], 0, 2, 6]}, "
                  "\"cls_metadata\": {\"batch_size\": [2]}}}",
                  ": k.leaves.z: unknown dtype 'torch.int7'");
  expect_bad_meta(META_HEAD LEAF_A META_CM ", \"k\": 5}",
                  ": k: a TensorDict's metadata must be an object, got a number");
  expect_bad_meta("{\"cls\": \"TensorDict\", \"non_tensors\": {\"a\": [1, [2], null]}, " LEAF_A
                  META_CM "}",
                  ": leaves.a: the key appears twice in the container");
  expect_bad_meta(META_HEAD LEAF_A META_CM ", \"a\": {}}", ": a: the key appears twice");

  /* leaves */
  const char *leaf_cases[][2] = {
      {"[\"torch.complex64\", [2], 0, 16, 0]", "leaves.a: unknown dtype 'torch.complex64'"},
      {"[\"float32\", [2], 0, 8, 0]", "leaves.a: unknown dtype 'float32'"},
      {"[5, [2], 0, 8, 0]", "leaves.a: dtype must be a string"},
      {"[\"torch.float32\", [2, -1], 0, 8, 0]", "leaves.a: shape has a negative size -1"},
      {"[\"torch.float32\", [2, 4611686018427387904, 4], 0, 8, 0]",
       "leaves.a: shape [2, 4611686018427387904, 4] has too many elements"},
      {"[\"torch.float32\", [2,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], 0, 8, 0]",
       "leaves.a: shape has 17 dims, at most 16 are supported"},
      {"[\"torch.float32\", [2, 1.5], 0, 8, 0]", "leaves.a: shape must be an integer, got 1.5"},
      {"[\"torch.float32\", [2, null], 0, 8, 0]", "leaves.a: shape must be an integer, got null"},
      {"[\"torch.float32\", [2], 99999999999999999999, 8, 0]",
       "leaves.a: start 99999999999999999999 does not fit in 64 bits"},
      {"[\"torch.float32\", [2], 0, 8, true]", "leaves.a: pad must be an integer, got a boolean"},
      {"[\"torch.float32\", [2], 8, 24, 8]",
       "leaves.a: bytes [8, 24) are not inside the payload of 16 bytes"},
      {"[\"torch.float32\", [2], -8, 0, 0]", "bytes [-8, 0) are not inside the payload"},
      {"[\"torch.float32\", [2], 8, 0, 0]", "bytes [8, 0) are not inside the payload"},
      {"[\"torch.float32\", [2], 0, 4, 0]",
       "leaves.a: bytes [0, 4) (pad 0) do not hold a torch.float32 [2] leaf of 8 bytes"},
      {"[\"torch.float32\", [2], 0, 16, 0]", "bytes [0, 16) (pad 0) do not hold"},
      {"[\"torch.float32\", [2], 0, 8, -1]", "leaves.a: pad -1 is negative"},
      {"[\"torch.int16\", [2], 1, 5, 0]",
       "leaves.a: start 1 is not a multiple of the torch.int16 item size 2"},
      {"[\"torch.float32\", [3], 0, 12, 0]",
       "leaves.a: shape [3] does not start with the batch size [2]"},
      {"[\"torch.float32\", [], 0, 4, 4]", "shape [] does not start with the batch size [2]"},
      {"[\"torch.float32\", [2], 0, 8]", "leaves.a: a leaf must be [dtype, shape, start, stop, pad]"},
      {"[\"torch.float32\", [2], 0, 8, 0, 1]", "leaves.a: nested (jagged) tensors are not supported"},
  };
  char json[1024];
  for (size_t k = 0; k < sizeof leaf_cases / sizeof leaf_cases[0]; k++) {
    snprintf(json, sizeof json, META_HEAD "\"leaves\": {\"a\": %s}, " META_CM "}",
             leaf_cases[k][0]);
    expect_bad_meta(json, leaf_cases[k][1]);
  }
  expect_bad_meta(META_HEAD "\"leaves\": {\"<NJT_VALUES>a\": [\"torch.float32\", [2], 0, 8, 0]}, "
                  META_CM "}",
                  "leaves.<NJT_VALUES>a: nested (jagged) tensors are not supported");
  /* padding that Python accepts: more bytes than needed when pad says so */
  snprintf(json, sizeof json, META_HEAD "\"leaves\": {\"a\": [\"torch.int8\", [2], 8, 16, 6]}, "
           META_CM "}");
  write_td_file(tmp_path("good.td"), 16, json, -1);
  d = td_dict_from_consolidated(tmp_path("good.td"), TD_MAP_READ);
  CHECK(d && holds(leaf(d, "a"), (const double[]){8, 9}));
  td_dict_release(d);

  /* non-tensor values */
  const char *value_cases[][2] = {
      {"\"x\"", "non_tensors.v: a non-tensor entry must be [data, batch_size, device]"},
      {"[\"x\"]", "non_tensors.v: a non-tensor entry must be [data, batch_size, device]"},
      {"[\"x\", [5], null]", "non_tensors.v: batch_size [5] does not start with the batch size [2]"},
      {"[\"x\", [2, -1], null]", "non_tensors.v: batch_size has a negative size -1"},
      {"[\"x\", [2], \"gpu\"]", "non_tensors.v: unknown device 'gpu'"},
  };
  for (size_t k = 0; k < sizeof value_cases / sizeof value_cases[0]; k++) {
    snprintf(json, sizeof json,
             "{\"cls\": \"TensorDict\", \"non_tensors\": {\"v\": %s}, " LEAF_A META_CM "}",
             value_cases[k][0]);
    expect_bad_meta(json, value_cases[k][1]);
  }
  /* older files write [data, batch_size]; extra batch dims are fine for a uniform value */
  write_td_file(tmp_path("good.td"), 16,
                "{\"cls\": \"TensorDict\", \"non_tensors\": {\"v\": [ {\"b\" : [ 1 , 2 ] } , [2]], "
                "\"w\": [\"\\u00e9\\ud83d\\ude00\\ud800\\/\", [2, 7], \"cuda:1\"]}, " LEAF_A META_CM "}",
                -1);
  d = td_dict_from_consolidated(tmp_path("good.td"), TD_MAP_READ);
  CHECK_TEXT(d, "v", 0, "{\"b\":[1,2]}");
  CHECK_TEXT(d, "w", 0, "\"\xc3\xa9\xf0\x9f\x98\x80\xed\xa0\x80/\"");
  td_dict_release(d);

  /* stacks */
  const char *stack_cases[][2] = {
      /* element 1 missing */
      {"{\"cls\": \"NonTensorStack\", \"non_tensors\": {\"0\": [1, [], null]}, \"leaves\": {}, "
       "\"cls_metadata\": {\"stack_dim\": 0}}",
       ": s: element 1 of the stack is missing"},
      {"{\"cls\": \"NonTensorStack\", \"non_tensors\": {\"0\": [1, [], null], \"01\": [1, [], "
       "null]}, \"leaves\": {}, \"cls_metadata\": {\"stack_dim\": 0}}",
       ": s.non_tensors.01: not an element of a stack of 2"},
      {"{\"cls\": \"NonTensorStack\", \"non_tensors\": {\"0\": [1, [], null], \"1\": [1, [], "
       "null]}, \"leaves\": {}, \"cls_metadata\": {\"stack_dim\": 0}, \"1\": {}}",
       ": s.1: not an element of a stack of 2 (or given twice)"},
      {"{\"cls\": \"NonTensorStack\", \"non_tensors\": {\"0\": [1, [], null], \"1\": [1, [], "
       "null]}, \"leaves\": {}, \"cls_metadata\": {\"stack_dim\": 3}}",
       ": s.cls_metadata.stack_dim: stack_dim is outside the 1 batch dims"},
      {"{\"cls\": \"NonTensorStack\", \"non_tensors\": {\"0\": [1, [], null], \"1\": [1, [], "
       "null]}, \"leaves\": {}, \"cls_metadata\": {}}",
       ": s.cls_metadata.stack_dim: stack_dim is missing"},
      {"{\"cls\": \"NonTensorStack\", \"non_tensors\": {\"0\": [1, [3], null], \"1\": [1, [], "
       "null]}, \"leaves\": {}, \"cls_metadata\": {\"stack_dim\": 0}}",
       ": s.non_tensors.0: batch_size [3] is not the element's []"},
      {"{\"cls\": \"NonTensorStack\", \"non_tensors\": {}, \"leaves\": {\"t\": 1}, "
       "\"cls_metadata\": {\"stack_dim\": 0}}",
       ": s.leaves: a NonTensorStack holds no tensors"},
      {"{\"cls\": \"NonTensorStack\", \"non_tensors\": {\"0\": [1, [], null]}, \"leaves\": {}, "
       "\"cls_metadata\": {\"stack_dim\": 0}, \"1\": {\"cls\": \"TensorDict\"}}",
       ": s.1.cls: an element of a NonTensorStack must be a NonTensorStack or non-tensor data"},
      {"{\"cls\": \"NonTensorStack\", \"non_tensors\": {\"0\": [1, [], null]}, \"leaves\": {}, "
       "\"cls_metadata\": {\"stack_dim\": 0}, \"1\": {\"cls\": \"NonTensorStack\", "
       "\"non_tensors\": {}, \"leaves\": {}, \"cls_metadata\": {\"stack_dim\": 0}}}",
       ": s.1: a NonTensorStack needs a batch dim to stack along"},
  };
  for (size_t k = 0; k < sizeof stack_cases / sizeof stack_cases[0]; k++) {
    snprintf(json, sizeof json, META_HEAD LEAF_A META_CM ", \"s\": %s}", stack_cases[k][0]);
    expect_bad_meta(json, stack_cases[k][1]);
  }
  /* a stack along dim 1 of a [2, 2] batch, elements uniform along dim 0 */
  write_td_file(tmp_path("good.td"), 0,
                "{\"cls\": \"TensorDict\", \"non_tensors\": {}, \"leaves\": {}, \"cls_metadata\": "
                "{\"batch_size\": [2, 2]}, \"s\": {\"cls\": \"NonTensorStack\", \"non_tensors\": "
                "{\"0\": [\"p\", [2], null], \"1\": [\"q\", [2], null]}, \"leaves\": {}, "
                "\"cls_metadata\": {\"stack_dim\": -1}}}",
                -1);
  d = td_dict_from_consolidated(tmp_path("good.td"), TD_MAP_READ);
  CHECK(d && kind(d, "s") == TD_ENTRY_VALUES && ntexts(d, "s") == 2);
  CHECK(holds(leaf(d, "s"), (const double[]){0, 1, 0, 1}));
  td_dict_release(d);
  empty_tmpdir();
}

/* ---- files Python wrote -------------------------------------------------------------------- */

/* dtypes.td: batch [2], one [2, 3] leaf per dtype, i = 0..5 row-major: bool i % 2 == 0,
 * uint8 50 i, int64 (i - 2) 2^40, floats (i - 2) / 2, other integers 3 (i - 2). */
static double dtypes_value(int32_t dtype, int64_t i) {
  switch (dtype) {
    case TD_BOOL: return i % 2 == 0;
    case TD_UINT8: return 50.0 * (double)i;
    case TD_INT64: return (double)(i - 2) * 1099511627776.0;
    case TD_FLOAT16: case TD_BFLOAT16: case TD_FLOAT32: case TD_FLOAT64: return (double)(i - 2) / 2;
    default: return 3.0 * (double)(i - 2);
  }
}

static void test_python_dtypes(void) {
  const int64_t b2 = 2, s23[2] = {2, 3};
  td_dict *r = td_dict_from_consolidated(fixture_path("dtypes.td"), TD_MAP_READ);
  CHECK(r != NULL);
  CHECK_KEYS(r, "bool uint8 int8 int16 int32 int64 float16 bfloat16 float32 float64");
  td_dict *d = td_dict_new(1, &b2);
  for (int k = 0; k < TD_NUM_DTYPES; k++) {
    double vals[6];
    for (int64_t i = 0; i < 6; i++) vals[i] = dtypes_value(all_dtypes[k], i);
    const td_tensor *t = leaf(r, td_dtype_name(all_dtypes[k]));
    CHECK(t && t->dtype == all_dtypes[k] && SHAPE_IS(t, 2, 3) && holds(t, vals));
    put(d, td_dtype_name(all_dtypes[k]), from_values(2, s23, all_dtypes[k], vals));
  }
  CHECK(td_dict_consolidate(d, tmp_path("dtypes.td"), 0) == 0);
  CHECK(same_file(tmp_path("dtypes.td"), fixture_path("dtypes.td")));
  td_dict_release(d);
  td_dict_release(r);
}

/* nested.td: see the README. */
static void test_python_nested(void) {
  const int64_t b3 = 3, s32[2] = {3, 2}, s322[3] = {3, 2, 2}, s30[2] = {3, 0};
  td_dict *r = td_dict_from_consolidated(fixture_path("nested.td"), TD_MAP_READ);
  CHECK(r != NULL);
  CHECK(BATCH_IS(r, 3));
  CHECK_KEYS(r, "label cfg obs empty mask info");
  const td_dict_head *h = r ? td_dict_head_borrow(r) : NULL;
  CHECK(h && h->locked && h->device_type == TD_DEVICE_CPU);
  CHECK(r && td_dict_name_borrow(r, 0) && strcmp(td_dict_name_borrow(r, 0), "t") == 0);
  CHECK_TEXT(r, "label", 0, "\"\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80\"");
  CHECK_TEXT(r, "cfg", 0, "{\"lr\":0.001,\"layers\":[64,64],\"ok\":true,\"none\":null}");
  CHECK(holds(leaf(r, "obs"), (const double[]){0, 1, 2, 3, 4, 5}) &&
        leaf(r, "obs")->dtype == TD_FLOAT32 && SHAPE_IS(leaf(r, "obs"), 3, 2));
  CHECK(SHAPE_IS(leaf(r, "empty"), 3, 0) && leaf(r, "empty")->dtype == TD_FLOAT32);
  CHECK(holds(leaf(r, "mask"), (const double[]){1, 0, 1}) && leaf(r, "mask")->dtype == TD_BOOL);
  td_dict *info = kid(r, "info");
  CHECK(BATCH_IS(info, 3));
  CHECK_KEYS(info, "note step deep");
  CHECK(info && td_dict_head_borrow(info)->locked);
  CHECK_TEXT(info, "note", 0, "\"hi\"");
  CHECK(holds(leaf(info, "step"), (const double[]){10, 20, 30}) &&
        leaf(info, "step")->dtype == TD_INT64);
  td_dict *deep = kid(info, "deep");
  CHECK(BATCH_IS(deep, 3, 2));
  double x[12];
  for (int i = 0; i < 12; i++) x[i] = 0.25 * i;
  CHECK(holds(leaf(deep, "x"), x) && leaf(deep, "x")->dtype == TD_FLOAT64 &&
        SHAPE_IS(leaf(deep, "x"), 3, 2, 2));
  CHECK(deep && td_dict_name_borrow(deep, 0) && td_dict_name_borrow(deep, 1) == NULL);
  td_dict_release(deep);
  td_dict_release(info);
  td_dict_release(r);

  /* the same container built here: the same bytes */
  td_dict *d = td_dict_new(1, &b3);
  put(d, "obs", seq(2, s32, TD_FLOAT32, 0));
  info = td_dict_new(1, &b3);
  put(info, "step", from_values(1, &b3, TD_INT64, (const double[]){10, 20, 30}));
  deep = td_dict_new(2, s32);
  put(deep, "x", from_values(3, s322, TD_FLOAT64, x));
  put_dict(info, "deep", deep);
  put_value(info, "note", "\"hi\"");
  put_dict(d, "info", info);
  put_value(d, "label", "\"\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80\"");
  put_value(d, "cfg", "{\"lr\":0.001,\"layers\":[64,64],\"ok\":true,\"none\":null}");
  put(d, "empty", td_tensor_empty(2, s30, TD_FLOAT32));
  put(d, "mask", from_values(1, &b3, TD_BOOL, (const double[]){1, 0, 1}));
  CHECK(td_dict_set_names(d, (const char *const[]){"t"}) == 0);
  CHECK(td_dict_set_device(d, TD_DEVICE_CPU, 0) == 0);
  td_dict_set_locked(d, 1);
  CHECK(td_dict_consolidate(d, tmp_path("nested.td"), 0) == 0);
  CHECK(same_file(tmp_path("nested.td"), fixture_path("nested.td")));
  td_dict_release(d);
}

/* stacked.td: batch [3, 3] named (a, b), x = 0..8 float32, s a NonTensorStack. */
static void test_python_stacked(void) {
  const int64_t b33[2] = {3, 3};
  td_dict *r = td_dict_from_consolidated(fixture_path("stacked.td"), TD_MAP_READ);
  CHECK(r != NULL);
  CHECK(BATCH_IS(r, 3, 3));
  CHECK_KEYS(r, "x s");
  CHECK(holds(leaf(r, "x"), (const double[]){0, 1, 2, 3, 4, 5, 6, 7, 8}));
  CHECK(kind(r, "s") == TD_ENTRY_VALUES && ntexts(r, "s") == 6);
  const char *texts[6] = {"\"v00\"", "\"v02\"", "\"v10\"", "\"v11\"", "\"v12\"", "\"same\""};
  for (int k = 0; k < 6; k++) CHECK_TEXT(r, "s", k, texts[k]);
  const int64_t pos[9] = {0, 0, 1, 2, 3, 4, 5, 5, 5};
  CHECK(holds(leaf(r, "s"), (const double[]){0, 0, 1, 2, 3, 4, 5, 5, 5}));
  CHECK(r && td_dict_head_borrow(r)->locked && td_dict_name_borrow(r, 1) &&
        strcmp(td_dict_name_borrow(r, 1), "b") == 0);
  td_dict_release(r);

  td_dict *d = td_dict_new(2, b33);
  put(d, "x", seq(2, b33, TD_FLOAT32, 0));
  put_values(d, "s", 6, texts, pos);
  CHECK(td_dict_set_names(d, (const char *const[]){"a", "b"}) == 0);
  CHECK(td_dict_set_device(d, TD_DEVICE_CPU, 0) == 0);
  td_dict_set_locked(d, 1);
  CHECK(td_dict_consolidate(d, tmp_path("stacked.td"), 0) == 0);
  CHECK(same_file(tmp_path("stacked.td"), fixture_path("stacked.td")));
  td_dict_release(d);
}

/* scalars.td: batch [], 0-dim leaves, NaN and an integer past 64 bits as values. */
static void test_python_scalars(void) {
  td_dict *r = td_dict_from_consolidated(fixture_path("scalars.td"), TD_MAP_READ);
  CHECK(r != NULL);
  CHECK(BATCH_IS0(r));
  CHECK_KEYS(r, "nan big neg s a n");
  CHECK(r && !td_dict_head_borrow(r)->locked &&
        td_dict_head_borrow(r)->device_type == TD_DEVICE_NONE);
  CHECK(leaf(r, "a") && leaf(r, "a")->ndim == 0 && leaf(r, "a")->dtype == TD_FLOAT64 &&
        EL(leaf(r, "a"), 0) == 3.25);
  CHECK(leaf(r, "n") && leaf(r, "n")->ndim == 0 && leaf(r, "n")->dtype == TD_INT32 &&
        EL(leaf(r, "n"), 0) == 7);
  CHECK_TEXT(r, "nan", 0, "NaN");
  CHECK_TEXT(r, "big", 0, "1000000000000000000000000000000");
  CHECK_TEXT(r, "neg", 0, "-1.5e-07");
  CHECK_TEXT(r, "s", 0, "\"tab\\tquote\\\"back\\\\\"");
  /* written back: the same bytes (key order aside, which Python's loader sets) */
  td_dict *d = td_dict_new(0, NULL);
  put(d, "a", td_tensor_full(0, NULL, TD_FLOAT64, 3.25));
  put(d, "n", td_tensor_full(0, NULL, TD_INT32, 7));
  put_value(d, "nan", "NaN");
  put_value(d, "big", "1000000000000000000000000000000");
  put_value(d, "neg", "-1.5e-07");
  put_value(d, "s", "\"tab\\tquote\\\"back\\\\\"");
  CHECK(td_dict_consolidate(d, tmp_path("scalars.td"), 0) == 0);
  CHECK(same_file(tmp_path("scalars.td"), fixture_path("scalars.td")));
  CHECK(td_dict_consolidate(r, tmp_path("scalars2.td"), 0) == 0);
  CHECK(same_file(tmp_path("scalars2.td"), fixture_path("scalars.td")));
  td_dict_release(d);
  td_dict_release(r);
  empty_tmpdir();
}

/* The fixtures folder: from the current folder (the repository root, as make test runs
 * the tests) or from the test binary's place (build[/x]/tests/). */
static bool find_fixtures(const char *argv0) {
  const char *rel = "tests/fixtures/python-consolidated";
  char probe[900];
  snprintf(fixtures, sizeof fixtures, "%s", rel);
  snprintf(probe, sizeof probe, "%s/dtypes.td", fixtures);
  if (access(probe, R_OK) == 0) return true;
  const char *slash = strrchr(argv0, '/');
  for (int up = 2; slash && up <= 3; up++) {
    snprintf(fixtures, sizeof fixtures, "%.*s/%s%s", (int)(slash - argv0), argv0,
             up == 2 ? "../../" : "../../../", rel);
    snprintf(probe, sizeof probe, "%s/dtypes.td", fixtures);
    if (access(probe, R_OK) == 0) return true;
  }
  return false;
}

int main(int argc, char **argv) {
  (void)argc;
  snprintf(tmpdir, sizeof tmpdir, "%s/td_consolidate_XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  const int64_t live = td_live_bytes();
  test_every_dtype();
  test_nesting_and_values();
  test_empty_and_strided();
  test_modes();
  test_existsok();
  test_validation();
  CHECK(find_fixtures(argv[0]));
  if (check_failed == 0 || access(fixture_path("dtypes.td"), R_OK) == 0) {
    test_python_dtypes();
    test_python_nested();
    test_python_stacked();
    test_python_scalars();
  }
  CHECK_EQ_I(td_live_bytes(), live); /* every heap storage made here was released */
  empty_tmpdir();
  CHECK(rmdir(tmpdir) == 0);
  CHECK_SUMMARY();
}
