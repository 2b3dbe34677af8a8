/* test_core/store/memmap.c: td_dict_memmap, td_dict_memmap_, td_dict_memmap_like,
 * td_dict_load_memmap and td_dict_sync: round trips of every dtype, layout, nesting and
 * non-tensor value; Python tensordict's exact layout (meta.json bytes, file names of odd
 * keys); the folders Python wrote (tests/fixtures); atomic replacement, existsok, stale
 * temporaries and killed saves; every validation error with its message; read-only
 * mappings; and that everything made is released (run it under valgrind too). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "dicts.h"

/* ---- helpers ------------------------------------------------------------------------ */

static char root[64];              /* a mkdtemp folder for everything written */
static char fixtures[PATH_MAX];    /* tests/fixtures */

/* A path (or any text) formatted into one of 16 rotating buffers. */
static const char *fmt(const char *f, ...) {
  static char bufs[16][1024];
  static int next;
  char *b = bufs[next++ % 16];
  va_list ap;
  va_start(ap, f);
  vsnprintf(b, sizeof bufs[0], f, ap);
  va_end(ap);
  return b;
}

/* The same, in a copy that lives until the end (paths a test holds on to). */
static char *kept[4096];
static int nkept;
static const char *kfmt(const char *f, ...) {
  char b[2048];
  va_list ap;
  va_start(ap, f);
  vsnprintf(b, sizeof b, f, ap);
  va_end(ap);
  return kept[nkept++ % 4096] = strdup(b);
}

static void put_file(const char *path, const char *bytes, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0 && write(fd, bytes, n) == (ssize_t)n);
  if (fd >= 0) close(fd);
}
static void put_text(const char *path, const char *text) { put_file(path, text, strlen(text)); }

static char *slurp(const char *path, size_t *n) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return NULL;
  struct stat st;
  fstat(fd, &st);
  char *b = malloc((size_t)st.st_size + 1);
  ssize_t r = read(fd, b, (size_t)st.st_size);
  close(fd);
  if (r != st.st_size) {
    free(b);
    return NULL;
  }
  b[r] = '\0';
  if (n) *n = (size_t)r;
  return b;
}

/* The file holds exactly text. */
static bool file_is(const char *path, const char *text) {
  char *b = slurp(path, NULL);
  bool ok = b && strcmp(b, text) == 0;
  if (!ok) fprintf(stderr, "  %s holds:\n  %s\n  expected:\n  %s\n", path, b ? b : "(none)", text);
  free(b);
  return ok;
}

static bool exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

static int64_t file_size(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static int rm_one(const char *p, const struct stat *s, int flag, struct FTW *f) {
  (void)s, (void)flag, (void)f;
  return remove(p);
}
static void rmrf(const char *path) { nftw(path, rm_one, 64, FTW_DEPTH | FTW_PHYS); }

/* Entries of dir whose names start with ".<name>.tmp-". */
static int temporaries(const char *dir, const char *name) {
  DIR *dp = opendir(dir);
  if (!dp) return -1;
  char pre[512];
  snprintf(pre, sizeof pre, ".%s.tmp-", name);
  int n = 0;
  for (struct dirent *de; (de = readdir(dp));) n += strncmp(de->d_name, pre, strlen(pre)) == 0;
  closedir(dp);
  return n;
}

/* Every meta.json and .memmap file under a and b is the same, and b has no others. */
static int same_tree(const char *a, const char *b) {
  DIR *dp = opendir(a);
  if (!dp) return 1;
  int diff = 0, na = 0, nb = 0;
  for (struct dirent *de; (de = readdir(dp));) {
    const char *n = de->d_name;
    if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, "README.md")) continue;
    na++;
    char pa[PATH_MAX], pb[PATH_MAX];
    snprintf(pa, sizeof pa, "%s/%s", a, n);
    snprintf(pb, sizeof pb, "%s/%s", b, n);
    struct stat st;
    lstat(pa, &st);
    if (S_ISDIR(st.st_mode)) {
      diff += same_tree(pa, pb);
      continue;
    }
    size_t la = 0, lb = 0;
    char *x = slurp(pa, &la), *y = slurp(pb, &lb);
    if (!x || !y || la != lb || memcmp(x, y, la) != 0) {
      fprintf(stderr, "  differs: %s and %s\n", pa, pb);
      diff++;
    }
    free(x), free(y);
  }
  closedir(dp);
  if ((dp = opendir(b))) {
    for (struct dirent *de; (de = readdir(dp));)
      nb += strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "README.md");
    closedir(dp);
  }
  if (na != nb) fprintf(stderr, "  %s has %d entries, %s has %d\n", a, na, b, nb);
  return diff + (na != nb);
}

/* tests/fixtures, found from the executable (build/tests/...) or the working folder. */
static bool find_fixtures(void) {
  char exe[PATH_MAX - 64];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    for (int up = 0; up < 6; up++) {
      char *s = strrchr(exe, '/');
      if (!s) break;
      *s = '\0';
      snprintf(fixtures, sizeof fixtures, "%s/tests/fixtures", exe);
      if (access(fmt("%s/tensordict-mmap-example/meta.json", fixtures), R_OK) == 0) return true;
    }
  }
  snprintf(fixtures, sizeof fixtures, "tests/fixtures");
  return access("tests/fixtures/tensordict-mmap-example/meta.json", R_OK) == 0;
}

static bool all_storages(td_dict *d, int32_t kind, int32_t writable) {
  bool ok = true;
  for (int32_t i = 0; i < td_dict_head_borrow(d)->nkeys; i++) {
    if (td_dict_kind(d, i) == TD_ENTRY_TENSOR) {
      const td_tensor *t = td_dict_tensor_pin(d, i);
      ok &= td_storage_kind(t->storage) == kind && td_storage_is_writable(t->storage) == writable;
    } else if (td_dict_kind(d, i) == TD_ENTRY_DICT) {
      td_dict *c = td_dict_child(d, i);
      ok &= all_storages(c, kind, writable);
      td_dict_release(c);
    }
  }
  return ok;
}

static bool equal(const td_dict *a, const td_dict *b) {
  int32_t eq = -1;
  return a && b && td_dict_equal(a, b, &eq) == 0 && eq == 1;
}

#define TDTYPE "\"_type\": \"<class 'tensordict._td.TensorDict'>\""
#define TDTAIL TDTYPE ", \"_format_version\": 1, \"_class\": \"tensordict:TensorDict\"}"

/* ---- round trips ---------------------------------------------------------------------- */

static void test_dtypes(void) {
  const int64_t b3 = 3, s32[2] = {3, 2};
  td_dict *d = td_dict_new(1, &b3);
  static const char *names[TD_NUM_DTYPES] = {"bool", "uint8", "int8", "int16", "int32",
                                             "int64", "float16", "bfloat16", "float32",
                                             "float64"};
  for (int k = 0; k < TD_NUM_DTYPES; k++) put(d, names[k], make(2, s32, all_dtypes[k], CONTIGUOUS, k));
  const char *p = kfmt("%s/dtypes", root);
  td_dict *r = td_dict_memmap(d, p, 0, 0);
  CHECK(r != NULL);
  CHECK(equal(d, r));
  const td_dict_head *h = r ? td_dict_head_borrow(r) : NULL;
  CHECK(h && h->locked && h->device_type == TD_DEVICE_CPU && BATCH_IS(r, 3));
  CHECK(r && strcmp(td_dict_prefix_borrow(r), p) == 0);
  CHECK(r && all_storages(r, TD_STORAGE_FILE, 1));
  for (int k = 0; k < TD_NUM_DTYPES; k++)
    CHECK_EQ_I(file_size(fmt("%s/%s.memmap", p, names[k])), 6 * td_dtype_itemsize(all_dtypes[k]));
  /* Python's meta.json for this container, byte for byte */
  char expect[4096] = "{";
  for (int k = 0; k < TD_NUM_DTYPES; k++)
    snprintf(expect + strlen(expect), sizeof expect - strlen(expect),
             "\"%s\": {\"device\": \"cpu\", \"shape\": [3, 2], \"dtype\": \"torch.%s\", "
             "\"is_nested\": false}, ",
             names[k], names[k]);
  strcat(expect, "\"shape\": [3], \"device\": \"cpu\", " TDTAIL);
  CHECK(file_is(fmt("%s/meta.json", p), expect));
  /* the bytes are the leaves' bytes */
  for (int k = 0; k < TD_NUM_DTYPES; k++) {
    size_t n = 0;
    char *b = slurp(fmt("%s/%s.memmap", p, names[k]), &n);
    const td_tensor *t = leaf(d, names[k]);
    CHECK(b && n == (size_t)(6 * t->itemsize) && memcmp(b, td_tensor_data_borrow(t), n) == 0);
    free(b);
  }
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(equal(d, l));
  CHECK(l && td_dict_head_borrow(l)->locked && td_dict_head_borrow(l)->device_type == TD_DEVICE_CPU);
  CHECK(l && all_storages(l, TD_STORAGE_FILE, 0));
  CHECK(l && strcmp(td_dict_prefix_borrow(l), p) == 0);
  /* key order is kept */
  int64_t len;
  for (int k = 0; l && k < TD_NUM_DTYPES; k++) CHECK(!strcmp(td_dict_key_borrow(l, k, &len), names[k]));
  td_dict_release(l);
  td_dict_release(r);
  td_dict_release(d);
}

/* Non-contiguous leaves (transposed, sliced, expanded; large ones gathered in blocks)
 * are written in C order. */
static void test_layouts(void) {
  const int64_t b4 = 4, s435[3] = {4, 3, 5};
  td_dict *d = td_dict_new(1, &b4);
  static const char *lay[NUM_LAYOUTS] = {"contiguous", "transposed", "sliced", "expanded"};
  for (int L = 0; L < NUM_LAYOUTS; L++)
    for (int k = 0; k < TD_NUM_DTYPES; k += 3)
      put(d, fmt("%s_%d", lay[L], k), make(3, s435, all_dtypes[k], L, k + L));
  /* 12 MiB transposed (gathered in blocks of rows), rows of 12 MiB (one at a time) */
  const int64_t big[3] = {4, 1024, 768}, wide[2] = {4, 3145728};
  put(d, "big", make(3, big, TD_FLOAT32, TRANSPOSED, 1));
  put(d, "wide", make(2, wide, TD_FLOAT32, EXPANDED, 2));
  for (int threads = 0; threads <= 1; threads++) {
    const char *p = kfmt("%s/layouts%d", root, threads);
    td_dict *r = td_dict_memmap(d, p, TD_MEMMAP_NO_FSYNC, threads);
    CHECK(equal(d, r));
    int64_t bad = 0;
    for (int32_t i = 0; r && i < td_dict_head_borrow(r)->nkeys; i++) {
      const td_tensor *src = td_dict_tensor_pin(d, i), *dst = td_dict_tensor_pin(r, i);
      td_tensor *c = td_tensor_clone(src);
      bad += !same_bytes(c, dst) || !td_tensor_is_contiguous(dst);
      td_tensor_release(c);
    }
    CHECK_EQ_I(bad, 0);
    td_dict_release(r);
  }
  CHECK(same_tree(fmt("%s/layouts0", root), fmt("%s/layouts1", root)) == 0);
  td_dict_release(d);
  /* 12 MiB of one strided dim, no batch dims */
  d = td_dict_new(0, NULL);
  const int64_t n = 3000000;
  put(d, "v", make(1, &n, TD_FLOAT32, SLICED, 3));
  td_dict *r = td_dict_memmap(d, fmt("%s/layouts-1d", root), TD_MEMMAP_NO_FSYNC, 0);
  CHECK(equal(d, r) && file_size(fmt("%s/layouts-1d/v.memmap", root)) == 4 * n);
  td_dict_release(r), td_dict_release(d);
}

static void test_nesting_and_values(void) {
  const int64_t b2 = 2, b23[2] = {2, 3}, s234[3] = {2, 3, 4}, s2[1] = {2};
  td_dict *d = td_dict_new(1, &b2);
  put(d, "obs", seq(1, s2, TD_FLOAT32, 1));
  td_dict *inner = td_dict_new(2, b23); /* a longer batch size than its parent's */
  put(inner, "x", seq(3, s234, TD_INT32, 0));
  td_dict *deep = td_dict_new(2, b23);
  put(deep, "y", seq(2, b23, TD_FLOAT64, 10));
  put_value(deep, "tag", "{\"k\": [1, 2.5, \"\\u00e9\"]}");
  put_dict(inner, "deep", deep);
  put_dict(d, "next", inner);
  put_value(d, "text", "\"caf\xc3\xa9 \xe2\x9c\x93\""); /* UTF-8 in the value */
  put_value(d, "none", "null");
  static const char *const lbl[2] = {"\"a\"", "{\"b\":1}"};
  put_values(d, "labels", 2, lbl, (const int64_t[]){1, 0});
  CHECK(td_dict_set_names(d, (const char *const[]){"env"}) == 0);
  const char *p = kfmt("%s/nested", root);
  td_dict *r = td_dict_memmap(d, p, 0, 1);
  CHECK(equal(d, r));
  td_dict *rn = kid(r, "next"), *rd = kid(rn, "deep");
  CHECK(rn && strcmp(td_dict_prefix_borrow(rn), fmt("%s/next", p)) == 0);
  CHECK(rd && strcmp(td_dict_prefix_borrow(rd), fmt("%s/next/deep", p)) == 0);
  CHECK(rd && td_dict_head_borrow(rd)->locked && BATCH_IS(rd, 2, 3));
  CHECK(r && kind(r, "labels") == TD_ENTRY_VALUES && ntexts(r, "labels") == 2);
  td_dict_release(rn), td_dict_release(rd);
  /* Python's layout: the value folders, compact stacks, names, \u escapes */
  CHECK(file_is(fmt("%s/text/meta.json", p),
                "{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", \"data\": "
                "\"caf\\u00e9 \\u2713\", \"_metadata\": null, \"_is_non_tensor\": true}"));
  CHECK(file_is(fmt("%s/labels/meta.json", p),
                "{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\","
                "\"_format_version\":1,\"_class\":\"tensordict:NonTensorStack\",\"stack_dim\":0,"
                "\"device\":null,\"data\":[{\"b\":1},\"a\"]}"));
  CHECK(file_is(fmt("%s/next/deep/tag/meta.json", p),
                "{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", \"data\": "
                "{\"k\": [1, 2.5, \"\\u00e9\"]}, \"_metadata\": null, \"_is_non_tensor\": true}"));
  CHECK(file_is(fmt("%s/meta.json", p),
                "{\"obs\": {\"device\": \"cpu\", \"shape\": [2], \"dtype\": \"torch.float32\", "
                "\"is_nested\": false}, \"next\": {\"type\": \"TensorDict\"}, \"text\": {\"type\": "
                "\"NonTensorData\"}, \"none\": {\"type\": \"NonTensorData\"}, \"labels\": {\"type\": "
                "\"NonTensorStack\"}, \"shape\": [2], \"device\": \"cpu\", " TDTYPE
                ", \"_format_version\": 1, \"_class\": \"tensordict:TensorDict\", \"_names\": "
                "[\"env\"]}"));
  CHECK(file_is(fmt("%s/next/meta.json", p),
                "{\"x\": {\"device\": \"cpu\", \"shape\": [2, 3, 4], \"dtype\": \"torch.int32\", "
                "\"is_nested\": false}, \"deep\": {\"type\": \"TensorDict\"}, \"shape\": [2, 3], "
                "\"device\": \"cpu\", " TDTYPE ", \"_format_version\": 1, \"_class\": "
                "\"tensordict:TensorDict\", \"_names\": [\"env\", null]}"));
  /* loaded values are the compact text of the same JSON: equal, as values */
  td_dict *canon = td_dict_copy(d, TD_COPY_CLONE), *cn = kid(canon, "next"), *cd = kid(cn, "deep");
  put_value(cd, "tag", "{\"k\":[1,2.5,\"\xc3\xa9\"]}");
  td_dict_release(cd), td_dict_release(cn);
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(equal(canon, l) && equal(d, l));
  td_dict_release(canon);
  CHECK(l && !strcmp(text(l, "text", 0), "\"caf\xc3\xa9 \xe2\x9c\x93\""));
  CHECK(l && !strcmp(text(l, "none", 0), "null"));
  CHECK(l && td_dict_name_borrow(l, 0) && !strcmp(td_dict_name_borrow(l, 0), "env"));
  td_dict *ln = kid(l, "next"), *ld = kid(ln, "deep");
  CHECK(ld && !strcmp(text(ld, "tag", 0), "{\"k\":[1,2.5,\"\xc3\xa9\"]}"));
  /* the stacked value: texts deduplicated, positions as saved */
  const td_tensor *pos = leaf(l, "labels");
  CHECK(pos && pos->dtype == TD_INT64 && SHAPE_IS(pos, 2));
  CHECK(pos && !strcmp(text(l, "labels", (int64_t)EL(pos, 0)), "{\"b\":1}") &&
        !strcmp(text(l, "labels", (int64_t)EL(pos, 1)), "\"a\""));
  /* a sub-folder alone is that nested container */
  td_dict *sub = td_dict_load_memmap(fmt("%s/next/", p), TD_MAP_READ);
  CHECK(equal(sub, ln) && sub && td_dict_head_borrow(sub)->locked);
  CHECK(sub && !strcmp(td_dict_prefix_borrow(sub), fmt("%s/next", p)));
  td_dict_release(sub), td_dict_release(ln), td_dict_release(ld);
  td_dict_release(l);
  td_dict_release(r);
  td_dict_release(d);
}

/* Every character Python encodes, and the names it cannot take. */
static void test_odd_keys(void) {
  const int64_t b2 = 2;
  static const char *const keys[] = {"/",  "<",  ">",  ":",  "\"", "|",      "?",      "*",
                                     "\\", " ",  "%",  "\t", "\x01", "\x7f", "",       ".",
                                     "..", "\xc3\xa9", "\xf0\x9f\x98\x80", "a.memmap.x", "%2E",
                                     "x\ny", "../up", "/abs/path"};
  static const char *const files[] = {
      "%2F",  "%3C",  "%3E",  "%3A",  "%22", "%7C",      "%3F",      "%2A",
      "%5C",  "%20",  "%25",  "%09",  "%01", "%7F",      "%",        "%2E",
      "%2E%2E", "\xc3\xa9", "\xf0\x9f\x98\x80", "a.memmap.x", "%252E", "x%0Ay", "..%2Fup",
      "%2Fabs%2Fpath"};
  int n = (int)(sizeof keys / sizeof *keys);
  td_dict *d = td_dict_new(1, &b2);
  for (int k = 0; k < n; k++) put(d, keys[k], td_tensor_full(1, &b2, TD_FLOAT32, k));
  td_dict *c = td_dict_new(1, &b2);
  put(c, "v", td_tensor_full(2, (const int64_t[]){2, 1}, TD_FLOAT32, 1));
  put_dict(d, "sub dir/x", c);
  put_value(d, "note: *", "\"odd\"");
  const char *p = kfmt("%s/odd", root);
  td_dict *r = td_dict_memmap(d, p, 0, 0);
  CHECK(r != NULL);
  for (int k = 0; k < n; k++) CHECK(exists(fmt("%s/%s.memmap", p, files[k])));
  CHECK(exists(fmt("%s/sub%%20dir%%2Fx/v.memmap", p)) && exists(fmt("%s/note%%3A%%20%%2A/meta.json", p)));
  CHECK(!exists(fmt("%s/up.memmap", root)) && !exists("/abs"));
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(equal(d, l));
  for (int k = 0; l && k < n; k++) CHECK(EL(leaf(l, keys[k]), 0) == k);
  td_dict_release(l), td_dict_release(r);
  /* Python's own folder of such keys: the same files, the same meta.json text */
  l = td_dict_load_memmap(fmt("%s/python-odd-keys", fixtures), TD_MAP_READ);
  CHECK(l && td_dict_head_borrow(l)->nkeys == 24);
  for (int k = 0; l && k < 22; k++) CHECK(EL(leaf(l, keys[k]), 0) == k && EL(leaf(l, keys[k]), 1) == k);
  td_dict *lc = kid(l, "sub dir/x");
  CHECK(lc && SHAPE_IS(leaf(lc, "v"), 2, 1) && EL(leaf(lc, "v"), 1, 0) == 1);
  CHECK(l && !strcmp(text(l, "note: *", 0), "\"odd \xe2\x9c\x93\""));
  td_dict_release(lc);
  p = kfmt("%s/odd-python", root);
  r = td_dict_memmap(l, p, 0, 0);
  CHECK(r && same_tree(fmt("%s/python-odd-keys", fixtures), p) == 0);
  td_dict_release(r), td_dict_release(l), td_dict_release(d);
}

static void refused(td_dict *d, const char *prefix, const char *msg) {
  td_dict *r = td_dict_memmap(d, prefix, 0, 0);
  CHECK(r == NULL);
  CHECK_MSG(msg);
  CHECK(!exists(prefix) && temporaries(root, strrchr(prefix, '/') + 1) == 0);
  td_dict_release(r);
}

static void test_refused_keys(void) {
  const int64_t b2 = 2;
  const char *p = kfmt("%s/refused", root);
  static const char *const own[3] = {"shape", "device", "_type"};
  for (int k = 0; k < 3; k++) {
    td_dict *d = td_dict_new(1, &b2);
    put(d, own[k], td_tensor_full(1, &b2, TD_FLOAT32, 0));
    refused(d, p, fmt("memmap: key '%s' cannot be saved: meta.json uses \"%s\" for the container "
                      "itself (Python tensordict would lose the entry); rename it", own[k], own[k]));
    td_dict_release(d);
  }
  /* a key holding a NUL byte is saved as Python saves it ("a\u0000b", a%00b.memmap) */
  td_dict *d = td_dict_new(1, &b2);
  td_tensor *t = td_tensor_full(1, &b2, TD_FLOAT32, 0);
  CHECK(td_dict_set_tensor(d, "a\0b", 3, t) >= 0);
  td_tensor_release(t);
  const char *pn = kfmt("%s/nul-key", root);
  td_dict *saved = td_dict_memmap(d, pn, 0, 0), *loaded = td_dict_load_memmap(pn, TD_MAP_READ);
  CHECK(saved && exists(fmt("%s/a%%00b.memmap", pn)));
  CHECK(loaded && td_dict_find(loaded, "a\0b", 3) >= 0 && td_dict_find(loaded, "a", 1) < 0);
  td_dict_release(saved), td_dict_release(loaded), td_dict_release(d);
  d = td_dict_new(1, &b2);
  put(d, "bad\xff", td_tensor_full(1, &b2, TD_FLOAT32, 0));
  refused(d, p, "memmap: key 'bad\xff' is not valid UTF-8 (meta.json is UTF-8)");
  td_dict_release(d);
  /* two keys, one file name */
  d = td_dict_new(1, &b2);
  put(d, "a", td_tensor_full(1, &b2, TD_FLOAT32, 0));
  put_dict(d, "a.memmap", td_dict_new(1, &b2));
  refused(d, p, fmt("memmap: %s: keys 'a' and 'a.memmap' would both be stored as 'a.memmap'", p));
  td_dict_release(d);
  d = td_dict_new(1, &b2);
  put_value(d, "meta.json", "1");
  refused(d, p, fmt("memmap: %s: key 'meta.json' would be stored as 'meta.json', the file of the "
                    "folder's own metadata", p));
  td_dict_release(d);
  char longkey[200];
  memset(longkey, '/', sizeof longkey - 1);
  longkey[sizeof longkey - 1] = '\0';
  d = td_dict_new(1, &b2);
  put(d, longkey, td_tensor_full(1, &b2, TD_FLOAT32, 0));
  refused(d, p, fmt("memmap: key '%s' is too long for a file name (604 bytes, at most 255)", longkey));
  td_dict_release(d);
  /* values that are not JSON, dim names that are not UTF-8 */
  d = td_dict_new(1, &b2);
  put_value(d, "v", "{not json");
  refused(d, p, "memmap: key 'v': the value is not valid JSON: {not json");
  td_dict_release(d);
  d = td_dict_new(1, &b2);
  put_value(d, "v", "\"\xc3\x28\"");
  refused(d, p, "memmap: the value of key 'v' is not valid UTF-8 (meta.json is UTF-8)");
  td_dict_release(d);
  d = td_dict_new(1, &b2);
  CHECK(td_dict_set_names(d, (const char *const[]){"\xff"}) == 0);
  refused(d, p, "memmap: a dim name is not valid UTF-8 (meta.json is UTF-8)");
  /* prefixes and flags */
  refused(d, fmt("%s/x", root), "memmap: a dim name is not valid UTF-8 (meta.json is UTF-8)");
  CHECK(td_dict_memmap(d, "", 0, 0) == NULL);
  CHECK_MSG("memmap: the prefix is empty");
  CHECK(td_dict_memmap(d, "/", 0, 0) == NULL);
  CHECK_MSG("memmap: '/' does not name a folder");
  CHECK(td_dict_memmap(d, fmt("%s/..", root), 0, 0) == NULL);
  CHECK_MSG(fmt("memmap: '%s/..' does not name a folder", root));
  CHECK(td_dict_memmap(d, p, 8, 0) == NULL);
  CHECK_MSG("memmap: unknown flags 8");
  CHECK(td_dict_memmap(NULL, p, 0, 0) == NULL);
  CHECK_MSG("memmap: the TensorDict is NULL");
  CHECK(td_dict_memmap_(NULL, p, 0, 0) == TD_EINVAL);
  CHECK_MSG("memmap_: the TensorDict is NULL");
  td_dict_release(d);
}

/* Zero-element leaves have no file (as Python writes them) and load from meta.json. */
static void test_zero_elements(void) {
  const int64_t b0 = 0, b3 = 3, s30[2] = {3, 0}, s02[2] = {0, 2};
  td_dict *d = td_dict_new(1, &b3);
  put(d, "z", td_tensor_full(2, s30, TD_FLOAT32, 0));
  put(d, "a", td_tensor_full(1, &b3, TD_INT8, 1));
  const char *p = kfmt("%s/zero", root);
  td_dict *r = td_dict_memmap(d, p, 0, 0);
  CHECK(equal(d, r) && !exists(fmt("%s/z.memmap", p)) && exists(fmt("%s/a.memmap", p)));
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(equal(d, l) && l && SHAPE_IS(leaf(l, "z"), 3, 0));
  CHECK(l && all_storages(l, TD_STORAGE_FILE, 0));
  td_dict_release(l), td_dict_release(r), td_dict_release(d);
  d = td_dict_new(1, &b0); /* an empty batch */
  put(d, "e", td_tensor_full(2, s02, TD_FLOAT64, 0));
  p = kfmt("%s/zero-batch", root);
  r = td_dict_memmap_like(d, p, 0, 0);
  l = td_dict_load_memmap(p, TD_MAP_READWRITE);
  CHECK(equal(d, r) && equal(d, l) && l && all_storages(l, TD_STORAGE_FILE, 1));
  td_dict_release(l), td_dict_release(r), td_dict_release(d);
}

static void test_memmap_like(void) {
  const int64_t b4 = 4, s45[2] = {4, 5};
  td_dict *d = td_dict_new(1, &b4);
  put(d, "a", seq(2, s45, TD_FLOAT32, 1));
  td_dict *c = td_dict_new(1, &b4);
  put(c, "b", make(2, s45, TD_INT16, TRANSPOSED, 3));
  put_dict(d, "c", c);
  put_value(d, "v", "[1, 2]");
  const char *p1 = kfmt("%s/like-full", root), *p2 = kfmt("%s/like", root);
  td_dict *full = td_dict_memmap(d, p1, 0, 0), *z = td_dict_memmap_like(d, p2, 0, 0);
  td_dict *zeros = td_dict_copy(d, TD_COPY_ZEROS);
  CHECK(equal(z, zeros) && z && td_dict_head_borrow(z)->locked && all_storages(z, TD_STORAGE_FILE, 1));
  CHECK(z && !strcmp(text(z, "v", 0), "[1, 2]"));
  size_t n1 = 0, n2 = 0; /* the data differs ... */
  char *f1 = slurp(fmt("%s/c/b.memmap", p1), &n1), *f2 = slurp(fmt("%s/c/b.memmap", p2), &n2);
  CHECK(f1 && f2 && n1 == 40 && n2 == 40 && memcmp(f1, f2, 40) != 0);
  free(f1), free(f2);
  char *meta = slurp(fmt("%s/meta.json", p1), NULL);
  CHECK(meta && file_is(fmt("%s/meta.json", p2), meta)); /* ... the layout does not */
  free(meta);
  CHECK(file_size(fmt("%s/a.memmap", p2)) == 80 && file_size(fmt("%s/c/b.memmap", p2)) == 40);
  /* writes reach the files */
  CHECK(td_tensor_fill_((td_tensor *)leaf(z, "a"), 7) == 0 && td_dict_sync(z) == 0);
  td_dict *l = td_dict_load_memmap(p2, TD_MAP_READ);
  CHECK(l && EL(leaf(l, "a"), 3, 4) == 7);
  td_dict_release(l), td_dict_release(zeros), td_dict_release(full), td_dict_release(z);
  td_dict_release(d);
}

/* memmap_ swaps the leaves in place; a pinned leaf's old storage outlives the swap. */
static void test_memmap_inplace(void) {
  const int64_t b4 = 4, s42[2] = {4, 2};
  td_dict *d = td_dict_new(1, &b4);
  put(d, "a", seq(2, s42, TD_FLOAT32, 0));
  td_dict *c = td_dict_new(1, &b4);
  put(c, "b", seq(1, &b4, TD_INT64, 5));
  put_dict(d, "c", c);
  put_value(d, "v", "true");
  td_dict *before = td_dict_copy(d, TD_COPY_CLONE);
  const td_tensor *pa = leaf(d, "a"); /* pinned */
  td_storage *old = pa->storage;
  td_tensor view;
  CHECK(td_tensor_select(pa, 0, 3, &view) == 0); /* borrows the old storage */
  double version = td_dict_head_borrow(d)->version;
  const char *p = kfmt("%s/inplace", root);
  CHECK(td_dict_memmap_(d, p, 0, 0) == 0);
  CHECK(pa->storage != old && td_storage_kind(pa->storage) == TD_STORAGE_FILE);
  CHECK(EL(&view, 0) == 6 && EL(&view, 1) == 7); /* still readable (valgrind) */
  const td_dict_head *h = td_dict_head_borrow(d);
  CHECK(h->version != version && h->locked && h->device_type == TD_DEVICE_CPU);
  CHECK(!strcmp(td_dict_prefix_borrow(d), p) && all_storages(d, TD_STORAGE_FILE, 1));
  td_dict *dc = kid(d, "c");
  CHECK(dc && !strcmp(td_dict_prefix_borrow(dc), fmt("%s/c", p)) && td_dict_head_borrow(dc)->locked);
  td_dict_release(dc);
  CHECK(equal(d, before));
  /* writes through the swapped leaf reach the file */
  CHECK(td_tensor_write_f64((td_tensor *)pa, (const int64_t[]){0, 0}, 42) == 0);
  CHECK(td_dict_sync(d) == 0);
  float f = 0;
  int fd = open(fmt("%s/a.memmap", p), O_RDONLY);
  CHECK(fd >= 0 && read(fd, &f, 4) == 4 && f == 42);
  if (fd >= 0) close(fd);
  /* again, over itself: the leaves it reads are the files it replaces */
  CHECK(td_dict_memmap_(d, p, 0, 0) == TD_EIO);
  CHECK_MSG(fmt("memmap_: '%s' exists (pass existsok)", p));
  CHECK(td_dict_memmap_(d, p, TD_MEMMAP_EXISTSOK, 0) == 0);
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(equal(d, l) && l && EL(leaf(l, "a"), 0, 0) == 42);
  CHECK(temporaries(root, "inplace") == 0);
  td_dict_release(l), td_dict_release(before), td_dict_release(d);
}

static td_dict *one(double v) {
  const int64_t b2 = 2;
  td_dict *d = td_dict_new(1, &b2);
  put(d, "x", td_tensor_full(1, &b2, TD_FLOAT64, v));
  return d;
}

static void test_existsok(void) {
  td_dict *a = one(1), *b = one(2);
  const char *p = kfmt("%s/exists", root);
  td_dict *ra = td_dict_memmap(a, p, 0, 0);
  CHECK(ra != NULL);
  CHECK(td_dict_memmap(b, p, 0, 0) == NULL);
  CHECK_MSG(fmt("memmap: '%s' exists (pass existsok)", p));
  td_dict *rb = td_dict_memmap(b, fmt("%s/", p), TD_MEMMAP_EXISTSOK, 0); /* trailing slash */
  CHECK(rb && !strcmp(td_dict_prefix_borrow(rb), p));
  CHECK(ra && EL(leaf(ra, "x"), 1) == 1); /* the old mapping outlives its folder */
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(equal(l, b) && temporaries(root, "exists") == 0);
  td_dict_release(l), td_dict_release(ra), td_dict_release(rb);
  /* existsok replaces only empty folders and memmap folders */
  const char *q = kfmt("%s/notmm", root);
  mkdir(q, 0755);
  put_text(fmt("%s/keep.txt", q), "mine");
  CHECK(td_dict_memmap(a, q, TD_MEMMAP_EXISTSOK, 0) == NULL);
  CHECK_MSG(fmt("memmap: '%s' exists and is not a memmap folder (no meta.json); refusing to "
                "replace it", q));
  CHECK(exists(fmt("%s/keep.txt", q)));
  q = kfmt("%s/emptydir", root);
  mkdir(q, 0755);
  ra = td_dict_memmap(a, q, TD_MEMMAP_EXISTSOK, 0);
  CHECK(ra != NULL);
  td_dict_release(ra);
  q = kfmt("%s/afile", root);
  put_text(q, "x");
  CHECK(td_dict_memmap(a, q, TD_MEMMAP_EXISTSOK, 0) == NULL);
  CHECK_MSG(fmt("memmap: '%s' exists and is not a folder", q));
  /* a link at prefix: the folder it names is replaced, the link stays */
  q = kfmt("%s/link", root);
  CHECK(symlink(fmt("%s/exists", root), q) == 0);
  ra = td_dict_memmap(a, q, TD_MEMMAP_EXISTSOK, 0);
  struct stat st;
  CHECK(ra && lstat(q, &st) == 0 && S_ISLNK(st.st_mode));
  l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(equal(l, a));
  td_dict_release(l), td_dict_release(ra);
  /* missing parents are made */
  q = kfmt("%s/deep/er/folder", root);
  ra = td_dict_memmap(a, q, 0, 0);
  CHECK(ra && exists(fmt("%s/meta.json", q)));
  td_dict_release(ra);
  td_dict_release(a), td_dict_release(b);
}

/* Temporaries of dead processes go; those of live ones and other names stay. */
static void test_stale(void) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  const char *dead = kfmt("%s/.stale.tmp-%d-0", root, (int)child);
  const char *live = kfmt("%s/.stale.tmp-%d-3", root, (int)getppid());
  const char *mine = kfmt("%s/.stale.tmp-%d-9", root, (int)getpid());
  const char *other = kfmt("%s/.stale.tmp-junk", root);
  mkdir(dead, 0755), mkdir(fmt("%s/sub", dead), 0755), put_text(fmt("%s/sub/f", dead), "x");
  mkdir(live, 0755), mkdir(mine, 0755), mkdir(other, 0755);
  td_dict *a = one(3);
  td_dict *r = td_dict_memmap(a, fmt("%s/stale", root), 0, 0);
  CHECK(r && !exists(dead) && exists(live) && exists(mine) && exists(other));
  rmrf(live), rmrf(mine), rmrf(other);
  td_dict_release(r), td_dict_release(a);
}

/* A save killed at any moment leaves the old folder or the new one at prefix. */
static void test_killed_saves(void) {
  const int64_t b8 = 8, s8[2] = {8, 65536};
  td_dict *v[2];
  for (int k = 0; k < 2; k++) {
    v[k] = td_dict_new(1, &b8);
    put(v[k], "x", td_tensor_full(2, s8, TD_FLOAT32, k + 1));
    put(v[k], "y", td_tensor_full(1, &b8, TD_INT64, 10 * (k + 1)));
    put_value(v[k], "k", k ? "1" : "0");
  }
  const char *p = kfmt("%s/killed", root);
  td_dict *r = td_dict_memmap(v[0], p, 0, 1);
  td_dict_release(r);
  int bad = 0, seen[2] = {0, 0};
  srand(7);
  for (int it = 0; it < 12; it++) {
    pid_t c = fork();
    if (c == 0) {
      for (int k = 1;; k++) { /* the other one first */
        td_dict *x = td_dict_memmap(v[k & 1], p, TD_MEMMAP_EXISTSOK, 1);
        td_dict_release(x);
      }
    }
    struct timespec ts = {0, (long)(rand() % 40000) * 1000};
    nanosleep(&ts, NULL);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
    int which = equal(l, v[0]) ? 0 : equal(l, v[1]) ? 1 : -1;
    if (which < 0) fprintf(stderr, "  after a kill: %s\n", l ? "another container" : td_last_error());
    bad += which < 0;
    if (which >= 0) seen[which]++;
    td_dict_release(l);
  }
  CHECK_EQ_I(bad, 0);
  if (getenv("TD_TEST_VERBOSE")) fprintf(stderr, "  killed saves: old %d, new %d, temporaries %d\n", seen[0], seen[1], temporaries(root, "killed"));
  /* the next save removes what the killed ones left */
  r = td_dict_memmap(v[1], p, TD_MEMMAP_EXISTSOK, 0);
  CHECK(r && temporaries(root, "killed") == 0);
  td_dict_release(r), td_dict_release(v[0]), td_dict_release(v[1]);
}

/* Hundreds of folders (values, nested containers) under a limit of 64 descriptors. */
static void test_many_folders(void) {
  const int64_t b2 = 2;
  td_dict *d = td_dict_new(1, &b2);
  for (int k = 0; k < 300; k++) put_value(d, fmt("v%d", k), fmt("%d", k));
  for (int k = 0; k < 100; k++) {
    td_dict *c = td_dict_new(1, &b2);
    put(c, "x", td_tensor_full(1, &b2, TD_INT32, k));
    put_dict(d, fmt("c%d", k), c);
  }
  struct rlimit old, low;
  getrlimit(RLIMIT_NOFILE, &old);
  low = old;
  low.rlim_cur = 64;
  setrlimit(RLIMIT_NOFILE, &low);
  const char *p = kfmt("%s/many", root);
  td_dict *r = td_dict_memmap(d, p, TD_MEMMAP_NO_FSYNC, 0);
  CHECK(equal(d, r));
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(equal(d, l));
  setrlimit(RLIMIT_NOFILE, &old);
  td_dict_release(l), td_dict_release(r), td_dict_release(d);
}

/* ---- reading what Python wrote ------------------------------------------------------- */

static void test_fixture_example(void) {
  const char *p = kfmt("%s/tensordict-mmap-example", fixtures);
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(l && BATCH_IS(l, 2, 1) && td_dict_head_borrow(l)->locked);
  td_dict *n = kid(l, "nested");
  CHECK(n && BATCH_IS(n, 2, 1) && !strcmp(td_dict_prefix_borrow(n), fmt("%s/nested", p)));
  const td_tensor *i64 = leaf(n, "int64"), *bf = leaf(n, "bfloat16");
  CHECK(i64 && i64->dtype == TD_INT64 && SHAPE_IS(i64, 2, 1) && EL(i64, 0, 0) == 1 && EL(i64, 1, 0) == 2);
  CHECK(bf && bf->dtype == TD_BFLOAT16 && SHAPE_IS(bf, 2, 1) && EL(bf, 0, 0) == 1 && EL(bf, 1, 0) == 1);
  CHECK(n && kind(n, "string") == TD_ENTRY_VALUE && !strcmp(text(n, "string", 0), "[\"a string!\"]"));
  CHECK(all_storages(l, TD_STORAGE_FILE, 0));
  td_dict *alone = td_dict_load_memmap(fmt("%s/nested", p), TD_MAP_READ);
  CHECK(equal(alone, n));
  td_dict_release(alone), td_dict_release(n), td_dict_release(l);
}

static void test_fixture_all_dtypes(void) {
  const char *p = kfmt("%s/python-all-dtypes", fixtures);
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(l && BATCH_IS(l, 2, 3));
  static const char *names[TD_NUM_DTYPES] = {"bool", "uint8", "int8", "int16", "int32",
                                             "int64", "float16", "bfloat16", "float32",
                                             "float64"};
  int64_t bad = 0;
  for (int i = 0; l && i < TD_NUM_DTYPES; i++) {
    const td_tensor *t = leaf(l, names[i]);
    CHECK(t && t->dtype == all_dtypes[i] && SHAPE_IS(t, 2, 3, 2));
    for (int64_t k = 0; t && k < 12; k++) {
      double want = i == 0 ? k % 3 == 0 : i == 1 ? (double)(k % 5 + i) : (double)(k % 5 - 2 + i);
      bad += EL(t, k / 6, (k / 2) % 3, k % 2) != want;
    }
  }
  CHECK_EQ_I(bad, 0);
  const td_tensor *s = leaf(l, "special");
  CHECK(s && EL(s, 0, 0) == 1.5 && EL(s, 0, 1) == 0 && signbit(EL(s, 0, 1)) &&
        isinf(EL(s, 0, 2)) && EL(s, 0, 2) > 0 && isinf(EL(s, 1, 0)) && EL(s, 1, 0) < 0 &&
        isnan(EL(s, 1, 1)) && EL(s, 1, 2) == 3.25);
  td_dict *n = kid(l, "nested"), *deep = kid(n, "deep"), *w = kid(l, "wide");
  CHECK(n && BATCH_IS(n, 2, 3) && SHAPE_IS(leaf(n, "x"), 2, 3, 4) && EL(leaf(n, "x"), 1, 2, 3) == 23);
  CHECK(deep && leaf(deep, "y")->dtype == TD_INT64 && EL(leaf(deep, "y"), 1, 0) == 10);
  CHECK(w && BATCH_IS(w, 2, 3, 5) && leaf(w, "w")->dtype == TD_INT16 && EL(leaf(w, "w"), 1, 2, 4) == 29);
  const td_tensor *odd = leaf(l, "a b/c%d"), *e = leaf(l, "empty");
  CHECK(odd && odd->dtype == TD_FLOAT64 && EL(odd, 1, 1) == 1.0);
  CHECK(e && SHAPE_IS(e, 2, 3, 0) && !exists(fmt("%s/empty.memmap", p)));
  CHECK(!strcmp(text(l, "text", 0), "\"hello w\xc3\xb6rld \xe2\x9c\x93\""));
  CHECK(!strcmp(text(l, "number", 0), "42") && !strcmp(text(l, "ratio", 0), "0.25"));
  CHECK(!strcmp(text(l, "items", 0), "[1,\"two\",null,true]"));
  CHECK(!strcmp(text(l, "config", 0), "{\"lr\":0.5,\"layers\":[64,64]}"));
  /* saved again here: the same bytes Python wrote */
  const char *q = kfmt("%s/all-dtypes-again", root);
  td_dict *r = td_dict_memmap(l, q, 0, 0);
  CHECK(r && same_tree(p, q) == 0);
  td_dict_release(r), td_dict_release(n), td_dict_release(deep), td_dict_release(w);
  td_dict_release(l);
}

static void test_fixture_stacks(void) {
  const char *p = kfmt("%s/python-stack-names", fixtures);
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(l && BATCH_IS(l, 2, 2));
  CHECK(l && !strcmp(td_dict_name_borrow(l, 0), "env") && !strcmp(td_dict_name_borrow(l, 1), "time"));
  CHECK(l && kind(l, "labels") == TD_ENTRY_VALUES && ntexts(l, "labels") == 3);
  const td_tensor *lp = leaf(l, "labels"), *ip = leaf(l, "ids");
  static const char *want[4] = {"\"a\"", "\"b\"", "\"c\"", "\"a\""};
  for (int k = 0; lp && k < 4; k++) CHECK(!strcmp(text(l, "labels", (int64_t)EL(lp, k / 2, k % 2)), want[k]));
  for (int k = 0; ip && k < 4; k++)
    CHECK(!strcmp(text(l, "ids", (int64_t)EL(ip, k / 2, k % 2)), fmt("%d", k + 1)));
  td_dict *info = kid(l, "info");
  CHECK(info && td_dict_name_borrow(info, 1) && !strcmp(td_dict_name_borrow(info, 1), "time"));
  CHECK(info && EL(leaf(info, "r"), 1, 1) == 3.5 && EL(leaf(l, "obs"), 1, 1, 2) == 11);
  const char *q = kfmt("%s/stacks-again", root);
  td_dict *r = td_dict_memmap(l, q, 0, 0);
  CHECK(r && same_tree(p, q) == 0);
  td_dict_release(r), td_dict_release(info), td_dict_release(l);
  /* batch size []: a stack keeps its list as one value */
  l = td_dict_load_memmap(fmt("%s/python-scalar", fixtures), TD_MAP_READ);
  CHECK(l && BATCH_IS0(l) && leaf(l, "pi")->ndim == 0 && leaf(l, "pi")->dtype == TD_FLOAT64);
  CHECK(l && EL(leaf(l, "pi"), 0) == 3.25 && EL(leaf(l, "v"), 2) == 3);
  CHECK(l && kind(l, "names") == TD_ENTRY_VALUE && !strcmp(text(l, "names", 0), "[\"x\",\"y\"]"));
  td_dict_release(l);
}

/* ---- lazy stacks, tensorclasses, one leaf added (core/store/memmap_wrapped.c, core/store/memmap_add.c) -- */

static void test_wrapped(void) {
  int32_t sd = -2;
  const char *p = kfmt("%s/python-lazy-stack", fixtures);
  td_dict *h = td_dict_load_memmap_any(p, TD_MAP_READ, &sd);
  CHECK(h && sd == 0 && td_dict_find(h, "1", 1) >= 0 && td_dict_find(h, "2", 1) < 0);
  td_dict *m1 = h ? kid(h, "1") : NULL;
  CHECK(m1 && leaf(m1, "obs")->shape[0] == 5 && EL(leaf(m1, "obs"), 4) == 40);
  td_dict_release(m1), td_dict_release(h);
  CHECK(!td_dict_load_memmap(p, TD_MAP_READ));
  CHECK_ERROR("holds a LazyStackedTensorDict, not a TensorDict (td_dict_load_memmap_any loads it)");
  h = td_dict_load_memmap_any(kfmt("%s/python-legacy-keys", fixtures), TD_MAP_READ, &sd);
  CHECK(h && sd == -1);
  td_dict_release(h);

  td_dict *members[2] = {one(1), one(2)}, *out[2] = {NULL, NULL};
  const char *q = kfmt("%s/lazy", root);
  CHECK(td_dict_memmap_stack(members, 2, 1, q, 0, 0, out) == 0 && out[0] && out[1]);
  CHECK(file_is(fmt("%s/meta.json", q), "{\"_type\": \"<class 'tensordict._lazy.LazyStackedTensorDict'>\", "
                "\"_format_version\": 1, \"_class\": \"tensordict:LazyStackedTensorDict\", "
                "\"stack_dim\": 1, \"stack_dim_name\": null}"));
  CHECK(out[1] && !strcmp(td_dict_prefix_borrow(out[1]), fmt("%s/1", q)) && EL(leaf(out[1], "x"), 0) == 2);
  CHECK(td_dict_memmap_stack(members, 2, 2, q, 0, 0, out + 1) < 0);
  CHECK_ERROR("memmap: stack dim 2 is outside [0, 1]");
  h = td_dict_load_memmap_any(q, TD_MAP_READ, &sd);
  CHECK(h && sd == 1);
  td_dict_release(h);
  CHECK(td_dict_consolidate_stack(members, 2, 0, fmt("%s/lazy.td", root), 0) == 0);
  h = td_dict_from_consolidated_any(fmt("%s/lazy.td", root), TD_MAP_READ, &sd);
  CHECK(h && sd == 0 && td_dict_find(h, "1", 1) >= 0);
  td_dict_release(h);
  CHECK(!td_dict_from_consolidated(fmt("%s/lazy.td", root), TD_MAP_READ));
  CHECK_ERROR("holds a LazyStackedTensorDict");

  /* one leaf added to a saved member, in place */
  const int64_t shp[2] = {2, 3};
  td_tensor *y = td_tensor_full(2, shp, TD_INT32, 7);
  CHECK(td_dict_make_memmap_from_tensor(out[0], "y", 1, y, 1, 0) == 0);
  CHECK(file_size(fmt("%s/0/y.memmap", q)) == 24 && EL(leaf(out[0], "y"), 1, 2) == 7);
  CHECK(td_dict_make_memmap_from_tensor(out[0], "y", 1, y, 1, 0) < 0);
  CHECK_ERROR("key 'y' exists");
  CHECK(td_dict_make_memmap_from_tensor(members[0], "z", 1, y, 1, 0) < 0);
  CHECK_ERROR("the TensorDict is not memory-mapped");
  const int64_t bad = 3;
  td_tensor *w = td_tensor_full(1, &bad, TD_INT32, 1);
  CHECK(td_dict_make_memmap_from_tensor(out[0], "w", 1, w, 1, 0) < 0 && !exists(fmt("%s/0/w.memmap", q)));
  CHECK(temporaries(fmt("%s/0", q), "y.memmap") == 0 && temporaries(fmt("%s/0", q), "meta.json") == 0);
  h = td_dict_load_memmap(fmt("%s/0", q), TD_MAP_READ);
  CHECK(h && EL(leaf(h, "y"), 0, 0) == 7);
  td_dict_release(h);
  td_tensor_release(y), td_tensor_release(w);

  /* a tensorclass folder */
  const char *c = kfmt("%s/tc", root);
  h = td_dict_memmap_tensorclass(members[0], "<class '__main__.X'>", c, 0, 0);
  CHECK(h && !strcmp(td_dict_prefix_borrow(h), c));
  CHECK(file_is(fmt("%s/meta.json", c), "{\"_type\": \"<class '__main__.X'>\"}"));
  td_dict_release(h);
  h = td_dict_load_memmap(c, TD_MAP_READ);
  CHECK(h && EL(leaf(h, "x"), 1) == 1);
  td_dict_release(h);
  for (int k = 0; k < 2; k++) td_dict_release(members[k]), td_dict_release(out[k]);
}

/* ---- validation -------------------------------------------------------------------------- */

static int nbad;

/* A new folder holding meta.json = meta. */
static const char *bad_folder(const char *meta) {
  const char *p = kfmt("%s/bad%d", root, nbad++);
  mkdir(p, 0755);
  if (meta) put_text(fmt("%s/meta.json", p), meta);
  return p;
}

/* Loading p fails with exactly msg (when msg starts with '~': contains the rest). */
static void load_fails(const char *p, const char *msg) {
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(l == NULL);
  if (msg[0] == '~') {
    CHECK_ERROR(msg + 1);
    if (!strstr(td_last_error(), msg + 1))
      fprintf(stderr, "  got: %s\n  expected it to contain: %s\n", td_last_error(), msg + 1);
  } else {
    CHECK_MSG(msg);
  }
  td_dict_release(l);
}

#define HEAD "\"shape\": [2], \"device\": \"cpu\", " TDTYPE
#define LEAF(extra) "{\"x\": {" extra "}, " HEAD "}"
#define F32 "\"device\": \"cpu\", \"shape\": [2], \"dtype\": \"torch.float32\", \"is_nested\": false"

static void test_bad_meta(void) {
  const char *p = kfmt("%s/none", root);
  load_fails(p, fmt("load_memmap: cannot open the folder '%s': No such file or directory", p));
  p = bad_folder(NULL);
  load_fails(p, fmt("load_memmap: %s/meta.json: cannot open: No such file or directory", p));
  p = bad_folder("{\"a\": ");
  load_fails(p, fmt("load_memmap: %s/meta.json: not valid JSON: unexpected end of input at byte 7",
                    p));
  p = bad_folder("{} x");
  load_fails(p, fmt("~load_memmap: %s/meta.json: not valid JSON", p));
  p = bad_folder("{\"a\": NaN}"); /* NaN is read (Python writes it): what is missing is the rest */
  load_fails(p, fmt("load_memmap: %s/meta.json: \"_type\" must be a string", p));
  p = bad_folder("[1, 2]");
  load_fails(p, fmt("load_memmap: %s/meta.json: must hold a JSON object", p));
  p = bad_folder(NULL);
  put_file(fmt("%s/meta.json", p), "{\"a\0\": 1}", 9);
  load_fails(p, fmt("load_memmap: %s/meta.json: holds a NUL byte: not JSON text", p));
  p = bad_folder("{\"a\\u0000b\": {}, " HEAD "}"); /* a key with \u0000 is read: not a leaf */
  load_fails(p, fmt("load_memmap: %s/meta.json: key 'a': \"dtype\" is missing", p));
  p = bad_folder(NULL);
  int fd = open(fmt("%s/meta.json", p), O_WRONLY | O_CREAT, 0644);
  CHECK(fd >= 0 && ftruncate(fd, (64 << 20) + 1) == 0);
  close(fd);
  load_fails(p, fmt("load_memmap: %s/meta.json: holds 67108865 bytes, more than the 64 MiB a "
                    "meta.json may hold", p));
  p = bad_folder(NULL);
  mkdir(fmt("%s/meta.json", p), 0755);
  load_fails(p, fmt("load_memmap: %s/meta.json: not a regular file", p));
  p = bad_folder(NULL);
  put_text(fmt("%s/../elsewhere.json", p), "{" HEAD "}");
  CHECK(symlink("../elsewhere.json", fmt("%s/meta.json", p)) == 0);
  load_fails(p, fmt("load_memmap: %s/meta.json: is a symlink; refusing to follow it", p));
  /* the container's own fields */
  p = bad_folder("{\"shape\": [2]}");
  load_fails(p, fmt("load_memmap: %s/meta.json: \"_type\" must be a string", p));
  p = bad_folder("{\"shape\": [2], \"_type\": 3}");
  load_fails(p, fmt("load_memmap: %s/meta.json: \"_type\" must be a string", p));
  p = bad_folder("{\"shape\": [2], \"_type\": \"<class 'my.Thing'>\"}");
  load_fails(p, fmt("load_memmap: %s/meta.json: \"_type\" <class 'my.Thing'> is not supported "
                    "(TensorDict, LazyStackedTensorDict, NonTensorData, NonTensorStack and "
                    "tensorclass folders are)",
                    p));
  p = bad_folder("{" HEAD ", \"_format_version\": 2}");
  load_fails(p, fmt("load_memmap: %s/meta.json: \"_format_version\" is 2; this reader reads the "
                    "versions up to 1", p));
  static const char *shapes[] = {"\"device\": \"cpu\"", "\"shape\": \"2\"", "\"shape\": [-1]",
                                 "\"shape\": [1.5]", "\"shape\": [true]", "\"shape\": {}"};
  for (int k = 0; k < 6; k++) {
    p = bad_folder(fmt("{%s, " TDTYPE "}", shapes[k]));
    load_fails(p, fmt(k ? "load_memmap: %s/meta.json: \"shape\" must be a list of non-negative "
                          "integers" : "load_memmap: %s/meta.json: \"shape\" is missing", p));
  }
  p = bad_folder("{\"shape\": [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1], " TDTYPE "}");
  load_fails(p, fmt("load_memmap: %s/meta.json: \"shape\" has more than 16 dims", p));
  p = bad_folder("{\"shape\": [1099511627776, 1099511627776], " TDTYPE "}");
  load_fails(p, fmt("load_memmap: %s/meta.json: \"shape\" [1099511627776, 1099511627776] has too "
                    "many elements", p));
  p = bad_folder("{\"shape\": [2], \"device\": \"cuda:0\", " TDTYPE "}");
  load_fails(p, fmt("load_memmap: %s/meta.json: \"device\" is 'cuda:0': a CUDA TensorDict cannot "
                    "be mapped from files (files map to CPU memory)", p));
  p = bad_folder("{\"shape\": [2], \"device\": 0, " TDTYPE "}");
  load_fails(p, fmt("load_memmap: %s/meta.json: \"device\" must be a string", p));
  p = bad_folder("{\"shape\": [2], \"device\": \"tpu\", " TDTYPE "}");
  load_fails(p, fmt("load_memmap: %s/meta.json: \"device\" 'tpu' is unknown (\"cpu\" or \"None\")", p));
  p = bad_folder("{" HEAD ", \"_names\": [\"a\", \"b\"]}");
  load_fails(p, fmt("load_memmap: %s/meta.json: \"_names\" must list 1 names (strings or null)", p));
  p = bad_folder("{\"x\": {" F32 "}, \"x\": {" F32 "}, " HEAD "}");
  put_file(fmt("%s/x.memmap", p), "12345678", 8);
  load_fails(p, fmt("load_memmap: %s/meta.json: key 'x' appears twice", p));
  p = kfmt("%s/bad-mode", root);
  CHECK(td_dict_load_memmap(p, TD_MAP_CREATE) == NULL);
  CHECK_MSG("load_memmap: mode 2: TD_MAP_READ or TD_MAP_READWRITE");
  CHECK(td_dict_load_memmap(NULL, TD_MAP_READ) == NULL);
  CHECK_MSG("load_memmap: the prefix is empty");
}

static void test_bad_leaves(void) {
  const char *p;
  struct {
    const char *entry, *msg;
  } cases[] = {
      {"\"device\": \"cpu\", \"shape\": [2]", "key 'x': \"dtype\" is missing"},
      {"\"dtype\": 5, \"shape\": [2]", "key 'x': \"dtype\" must be a string"},
      {"\"dtype\": \"torch.complex64\", \"shape\": [2]",
       "key 'x': unknown \"dtype\" 'torch.complex64' (torch.bool, torch.uint8, torch.int8, "
       "torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32 or "
       "torch.float64)"},
      {"\"dtype\": \"float32\", \"shape\": [2]", "key 'x': unknown \"dtype\" 'float32' (torch.bool, "
       "torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, "
       "torch.bfloat16, torch.float32 or torch.float64)"},
      {"\"dtype\": \"torch.float32\"", "key 'x': \"shape\" is missing"},
      {"\"dtype\": \"torch.float32\", \"shape\": [2, -3]",
       "key 'x': \"shape\" must be a list of non-negative integers"},
      /* integer literals are read exactly: past int64 is not a dim, INT64_MAX is too many */
      {"\"dtype\": \"torch.float32\", \"shape\": [2, 9223372036854775808]",
       "key 'x': \"shape\" must be a list of non-negative integers"},
      {"\"dtype\": \"torch.float32\", \"shape\": [2, 9223372036854775807]",
       "key 'x': \"shape\" [2, 9223372036854775807] has too many elements"},
      {"\"dtype\": \"torch.float32\", \"shape\": [2, 9007199254740992, 256]",
       "key 'x': \"shape\" [2, 9007199254740992, 256] has too many elements"},
      {"\"dtype\": \"torch.float32\", \"shape\": [3]",
       "key 'x': \"shape\" [3] does not start with the batch size [2]"},
      {"\"dtype\": \"torch.float32\", \"shape\": []",
       "key 'x': \"shape\" [] does not start with the batch size [2]"},
      {"\"dtype\": \"torch.float32\", \"shape\": [2], \"device\": \"cuda:0\"",
       "key 'x': \"device\" must be \"cpu\" (a file maps to CPU memory)"},
      {"\"dtype\": \"torch.float32\", \"shape\": [2], \"is_nested\": true",
       "key 'x': nested (jagged) tensors are not supported"},
      {"\"dtype\": \"torch.float32\", \"shape\": [2], \"is_nested\": 0",
       "key 'x': \"is_nested\" must be true or false"},
      {"\"type\": 3", "key 'x': \"type\" must be a string"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    p = bad_folder(fmt(LEAF("%s"), cases[k].entry));
    load_fails(p, fmt("load_memmap: %s/meta.json: %s", p, cases[k].msg));
  }
  /* the files */
  p = bad_folder(LEAF(F32));
  load_fails(p, fmt("load_memmap: %s/x.memmap: cannot open (key 'x'): No such file or directory", p));
  put_file(fmt("%s/x.memmap", p), "1234567", 7);
  load_fails(p, fmt("load_memmap: %s/x.memmap: holds 7 bytes, 8 needed (key 'x': torch.float32 [2])", p));
  put_file(fmt("%s/x.memmap", p), "123456789", 9); /* trailing bytes are fine */
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(l && SHAPE_IS(leaf(l, "x"), 2));
  td_dict_release(l);
  p = bad_folder(LEAF(F32));
  put_file(fmt("%s/target", p), "12345678", 8);
  CHECK(symlink("target", fmt("%s/x.memmap", p)) == 0);
  load_fails(p, fmt("load_memmap: %s/x.memmap: is a symlink (key 'x'); refusing to follow it", p));
  p = bad_folder(LEAF(F32));
  mkdir(fmt("%s/x.memmap", p), 0755);
  load_fails(p, fmt("~load_memmap: %s/x.memmap: ", p));
  /* keys cannot reach outside the folder: their names are encoded */
  p = bad_folder("{\"../x\": {" F32 "}, " HEAD "}");
  put_file(fmt("%s/x.memmap", root), "12345678", 8);
  load_fails(p, fmt("load_memmap: %s/..%%2Fx.memmap: cannot open (key '../x'): No such file or "
                    "directory", p));
  p = bad_folder("{\"/etc/passwd\": {" F32 "}, " HEAD "}");
  load_fails(p, fmt("load_memmap: %s/%%2Fetc%%2Fpasswd.memmap: cannot open (key '/etc/passwd'): No "
                    "such file or directory", p));
  p = bad_folder("{\"..\": {\"type\": \"TensorDict\"}, " HEAD "}");
  load_fails(p, fmt("load_memmap: %s/%%2E%%2E: cannot open the folder of key '..': No such file or "
                    "directory", p));
  /* compact and spaced JSON alike */
  p = bad_folder("{\"x\":{\"device\":\"cpu\",\"shape\":[2],\"dtype\":\"torch.int16\"},\"shape\":[2],"
                 "\"device\":\"cpu\",\"_type\":\"<class 'tensordict._td.TensorDict'>\"}");
  put_file(fmt("%s/x.memmap", p), "\1\0\2\0", 4);
  l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(l && EL(leaf(l, "x"), 1) == 2);
  td_dict_release(l);
  p = bad_folder("\n{\n  \"x\" :\t{ \"shape\" : [ 2 ] , \"dtype\" : \"torch.int16\" } ,\n  "
                 "\"shape\" : [ 2 ] ,\n  \"_type\" : \"<class 'tensordict._td.TensorDict'>\"\n}\n");
  put_file(fmt("%s/x.memmap", p), "\1\0\2\0", 4);
  l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(l && EL(leaf(l, "x"), 1) == 2 && td_dict_head_borrow(l)->device_type == TD_DEVICE_NONE);
  td_dict_release(l);
}

static void test_bad_folders(void) {
  const char *p = bad_folder("{\"c\": {\"type\": \"TensorDict\"}, " HEAD "}");
  load_fails(p, fmt("load_memmap: %s/c: cannot open the folder of key 'c': No such file or directory", p));
  mkdir(fmt("%s/c", p), 0755);
  load_fails(p, fmt("load_memmap: %s/c/meta.json: cannot open: No such file or directory", p));
  put_text(fmt("%s/c/meta.json", p), "{\"shape\": [3], " TDTYPE "}");
  load_fails(p, fmt("load_memmap: %s/c/meta.json: \"shape\" [3] does not start with the batch size "
                    "[2] of its parent", p));
  put_text(fmt("%s/c/meta.json", p), "{\"shape\": [2, 4], " TDTYPE "}");
  td_dict *l = td_dict_load_memmap(p, TD_MAP_READ);
  td_dict *c = kid(l, "c");
  CHECK(c && BATCH_IS(c, 2, 4) && !strcmp(td_dict_prefix_borrow(c), fmt("%s/c", p)));
  td_dict_release(c), td_dict_release(l);
  put_text(fmt("%s/c/meta.json", p), "{\"shape\": [2], \"y\": {\"dtype\": 1}, " TDTYPE "}");
  load_fails(p, fmt("load_memmap: %s/c/meta.json: key 'y': \"dtype\" must be a string", p));
  p = bad_folder("{\"c\": {\"type\": \"TensorDict\"}, " HEAD "}");
  mkdir(fmt("%s/real", p), 0755);
  put_text(fmt("%s/real/meta.json", p), "{" HEAD "}");
  CHECK(symlink("real", fmt("%s/c", p)) == 0);
  load_fails(p, fmt("load_memmap: %s/c: is a symlink (key 'c'); refusing to follow it", p));
  /* non-tensor values */
  p = bad_folder("{\"v\": {\"type\": \"NonTensorData\"}, " HEAD "}");
  mkdir(fmt("%s/v", p), 0755);
  put_text(fmt("%s/v/meta.json", p), "{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\"}");
  load_fails(p, fmt("load_memmap: %s/v/meta.json: \"data\" is missing", p));
  put_text(fmt("%s/v/other.pickle", p), "...");
  load_fails(p, fmt("load_memmap: %s/v/other.pickle: key 'v' holds a value Python pickled (it is "
                    "not JSON: a set, a custom object, ...); a pickle is Python code to run, which "
                    "this reader does not do: store it as a JSON-able value (str, numbers, bools, "
                    "lists, dicts)", p));
  load_fails(fmt("%s/v", p), fmt("load_memmap: %s/v/meta.json: holds a non-tensor value "
                                 "(NonTensorData), not a TensorDict; load the folder that holds it", p));
  put_text(fmt("%s/v/meta.json", p), "{\"_type\": \"<class 'tensordict.tensorclass.NonTensorData'>\", "
                                     "\"data\": {\"a\": [1, {}]}}");
  l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(l && kind(l, "v") == TD_ENTRY_VALUE && !strcmp(text(l, "v", 0), "{\"a\":[1,{}]}"));
  td_dict_release(l);
  p = bad_folder("{\"s\": {\"type\": \"NonTensorStack\"}, " HEAD "}");
  mkdir(fmt("%s/s", p), 0755);
  put_text(fmt("%s/s/meta.json", p), "{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\","
                                     "\"data\":[1,2,3]}");
  load_fails(p, fmt("load_memmap: %s/s/meta.json: \"data\" must be nested lists shaped like the "
                    "batch size [2]", p));
  put_text(fmt("%s/s/meta.json", p), "{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\"}");
  load_fails(p, fmt("load_memmap: %s/s/meta.json: \"data\" is missing (a stack saved as sub-folders "
                    "is not supported)", p));
  put_text(fmt("%s/s/meta.json", p), "{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\","
                                     "\"data\":\"pickle.pkl\"}");
  put_text(fmt("%s/s/pickle.pkl", p), "...");
  load_fails(p, fmt("load_memmap: %s/s/meta.json: the values are pickled (pickle.pkl), which this "
                    "reader cannot load", p));
  put_text(fmt("%s/s/meta.json", p), "{\"_type\":\"<class 'tensordict.tensorclass.NonTensorStack'>\","
                                     "\"data\":[[1],[1]]}");
  l = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(l && kind(l, "s") == TD_ENTRY_VALUES && ntexts(l, "s") == 1 && !strcmp(text(l, "s", 0), "[1]"));
  td_dict_release(l);
  /* nested too deep: a chain of 300 folders */
  p = bad_folder(NULL);
  char *chain = malloc(700);
  strcpy(chain, p);
  for (int k = 0; k < 300; k++) {
    put_text(fmt("%s/meta.json", chain), "{\"c\": {\"type\": \"TensorDict\"}, " HEAD "}");
    strcat(chain, "/c");
    mkdir(chain, 0755);
  }
  put_text(fmt("%s/meta.json", chain), "{" HEAD "}");
  load_fails(p, "~nested more than 256 levels deep");
  free(chain);
}

/* ---- read-only and read-write mappings ------------------------------------------------------ */

static void test_modes(void) {
  const int64_t b3 = 3, s32[2] = {3, 2};
  td_dict *d = td_dict_new(1, &b3);
  put(d, "a", seq(2, s32, TD_FLOAT32, 0));
  td_dict *c = td_dict_new(1, &b3);
  put(c, "b", seq(1, &b3, TD_INT32, 0));
  put(c, "z", td_tensor_empty(2, (const int64_t[]){3, 0}, TD_INT8));
  put_dict(d, "c", c);
  const char *p = kfmt("%s/modes", root);
  td_dict *r = td_dict_memmap(d, p, TD_MEMMAP_NO_FSYNC, 0);
  td_dict_release(r);
  td_dict *ro = td_dict_load_memmap(p, TD_MAP_READ);
  CHECK(ro && all_storages(ro, TD_STORAGE_FILE, 0));
  td_tensor *a = (td_tensor *)leaf(ro, "a");
  CHECK(td_tensor_fill_(a, 1) == TD_EREADONLY);
  CHECK(td_tensor_write_f64(a, (const int64_t[]){0, 0}, 1) == TD_EREADONLY);
  CHECK(td_dict_binary_(TD_BINARY_ADD, ro, NULL, NULL, 1, TD_SCALAR_INT) == TD_EREADONLY);
  CHECK(EL(a, 2, 1) == 5 && td_dict_sync(ro) == 0); /* nothing to flush */
  /* locked, like memmap()'s result: no new keys */
  CHECK(td_dict_set_value(ro, "new", 3, "1") == TD_EINVAL);
  td_dict *rw = td_dict_load_memmap(p, TD_MAP_READWRITE);
  CHECK(rw && all_storages(rw, TD_STORAGE_FILE, 1));
  CHECK(td_dict_binary_(TD_BINARY_ADD, rw, NULL, NULL, 10, TD_SCALAR_INT) == 0);
  CHECK(td_dict_sync(rw) == 0);
  CHECK(EL(a, 2, 1) == 15); /* one file, two shared mappings */
  td_dict *again = td_dict_load_memmap(p, TD_MAP_READ), *ac = kid(again, "c");
  CHECK(ac && EL(leaf(ac, "b"), 2) == 12);
  CHECK(td_dict_sync(NULL) == TD_EINVAL);
  td_dict_release(ac), td_dict_release(again), td_dict_release(rw), td_dict_release(ro);
  td_dict_release(d);
}

int main(void) {
  const int64_t live = td_live_bytes();
  strcpy(root, "/tmp/td_test_memmap_XXXXXX");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  CHECK(find_fixtures());
  test_dtypes();
  test_layouts();
  test_nesting_and_values();
  test_odd_keys();
  test_refused_keys();
  test_zero_elements();
  test_memmap_like();
  test_memmap_inplace();
  test_existsok();
  test_stale();
  test_killed_saves();
  test_many_folders();
  test_fixture_example();
  test_fixture_all_dtypes();
  test_fixture_stacks();
  test_wrapped();
  test_bad_meta();
  test_bad_leaves();
  test_bad_folders();
  test_modes();
  rmrf(root);
  for (int k = 0; k < nkept && k < 4096; k++) free(kept[k]);
  td_release_cached_memory();
  CHECK_EQ_I(td_live_bytes(), live);
  CHECK_SUMMARY();
}
