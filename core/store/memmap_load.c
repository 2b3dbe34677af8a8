/*
 * memmap_load.c: td_dict_load_memmap: a folder in Python tensordict's memmap
 * layout mapped back into a container, whoever wrote it (this library or Python).
 *
 * Nothing in a folder is trusted: meta.json is read with a size cap and parsed by
 * the JSON layer (core/src/json.h: Python's NaN and Infinity, keys and strings holding
 * \u0000, number literals kept as written), every field is checked for its type and
 * range before use, files and sub-folders are opened relative to their folder with
 * O_NOFOLLOW (a link is refused, so no key can reach outside the folder), and a leaf
 * file must hold numel x itemsize bytes. Each error names the file and the field. The
 * cost does not depend on the size of the data: leaves are mappings, nothing is read.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_internal.h"

enum { MM_META_MAX = 64 << 20 }; /* bytes a meta.json may hold */

/* "load_memmap: <file>: <what>" */
static int32_t lfail(int32_t status, const char *file, const char *fmt, ...) TD_PRINTF(3, 4);
static int32_t lfail(int32_t status, const char *file, const char *fmt, ...) {
  char what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return td_fail(status, "load_memmap: %s: %s", file, what);
}

/* The parsed meta.json of the folder dirfd (its path is file, for messages). */
cJSON *td_mm_read_meta(int dirfd, const char *file) {
  /* O_NONBLOCK: a FIFO in its place is refused below instead of blocking the open */
  int fd = openat(dirfd, TD_MMF_META, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) lfail(TD_EIO, file, "is a symlink; refusing to follow it");
    else lfail(TD_EIO, file, "cannot open: %s", strerror(errno));
    return NULL;
  }
  struct stat st;
  char *buf = NULL;
  cJSON *root = NULL;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    lfail(TD_EIO, file, "not a regular file");
    goto done;
  }
  if (st.st_size > MM_META_MAX) {
    lfail(TD_EINVAL, file, "holds %lld bytes, more than the %d MiB a meta.json may hold",
          (long long)st.st_size, MM_META_MAX >> 20);
    goto done;
  }
  size_t cap = (size_t)st.st_size + 1, n = 0;
  if (!(buf = malloc(cap + 1))) {
    td_fail(TD_ENOMEM, "load_memmap: out of memory");
    goto done;
  }
  for (;;) { /* up to one byte more than fstat said: a file that grew is refused */
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      lfail(TD_EIO, file, "cannot read: %s", strerror(errno));
      goto done;
    }
    if (r == 0) break;
    n += (size_t)r;
    if (n == cap) {
      lfail(TD_EIO, file, "changed while it was read");
      goto done;
    }
  }
  buf[n] = '\0';
  if (memchr(buf, 0, n)) {
    lfail(TD_EINVAL, file, "holds a NUL byte: not JSON text");
    goto done;
  }
  td_json_error e;
  root = td_json_read(buf, n, TD_JSON_KEEP_SURROGATES, &e);
  if (!root && !strcmp(e.what, "out of memory")) {
    td_fail(TD_ENOMEM, "load_memmap: out of memory");
  } else if (!root) {
    lfail(TD_EINVAL, file, "not valid JSON: %s at byte %zu", e.what, e.at + 1);
  } else if (!cJSON_IsObject(root)) {
    lfail(TD_EINVAL, file, "must hold a JSON object");
    cJSON_Delete(root);
    root = NULL;
  }
done:
  free(buf);
  close(fd);
  return root;
}

static const cJSON *field(const cJSON *obj, const char *name) { return td_json_get(obj, name); }

/* A list of non-negative integers into out: 0, 1 (not such a list), 2 (too many). */
static int parse_shape(const cJSON *a, int32_t *ndim, int64_t *out) {
  if (!cJSON_IsArray(a)) return 1;
  int32_t n = 0;
  for (const cJSON *x = a->child; x; x = x->next) {
    if (!cJSON_IsNumber(x)) return 1;
    /* An integer literal is read exactly, past 2^53 too: td_dict_memmap writes a dim of
     * an empty leaf as large as int64 holds, and what it writes must load. */
    int64_t dim;
    int exact = td_json_int64(x, &dim);
    if (exact < 0 || (exact == 1 && dim < 0)) return 1;
    if (exact == 0) { /* 3.0, 1e3: whole numbers a double holds exactly */
      double v = x->valuedouble;
      if (!(v >= 0) || v != floor(v) || v > 9007199254740992.0) return 1;
      dim = (int64_t)v;
    }
    if (n == TD_MAX_DIMS) return 2;
    out[n++] = dim;
  }
  *ndim = n;
  return 0;
}

/* The shape of field name (key NULL: the container's own), with its element count.
 * Errors name the file, the key and the field. */
static int32_t get_shape(const char *file, const char *key, const cJSON *obj, int32_t *ndim,
                         int64_t *shape, int64_t *numel) {
  char who[TD_PATH_CHARS + 16] = "";
  if (key) snprintf(who, sizeof who, "key '%s': ", key);
  const cJSON *s = field(obj, TD_MMF_SHAPE);
  if (!s) return lfail(TD_EINVAL, file, "%s\"shape\" is missing", who);
  int r = parse_shape(s, ndim, shape);
  if (r == 1)
    return lfail(TD_EINVAL, file, "%s\"shape\" must be a list of non-negative integers", who);
  if (r == 2)
    return lfail(TD_EINVAL, file, "%s\"shape\" has more than %d dims", who, TD_MAX_DIMS);
  int64_t n = 1;
  for (int32_t i = 0; i < *ndim; i++) {
    if (__builtin_mul_overflow(n, shape[i], &n) || n > INT64_MAX / 8) {
      char buf[TD_SHAPE_STR];
      return lfail(TD_EINVAL, file, "%s\"shape\" %s has too many elements", who,
                   td_format_shape(buf, sizeof buf, *ndim, shape));
    }
  }
  *numel = n;
  return 0;
}

enum mm_kind { MM_TD, MM_NTD, MM_NTS, MM_TC, MM_LS };

/* A sub-folder of dirfd by that name, not a link. */
static bool has_folder(int dirfd, const char *name) {
  struct stat sb;
  return fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode);
}

/* What folder dirfd holds, from its "_type" (and "_class", written since format 1); any
 * other class with a _tensordict sub-folder is a tensorclass (Python imports the class
 * to know; its memmap writes that layout). */
static int32_t classify(const char *file, int dirfd, const cJSON *meta, int *kind) {
  const cJSON *t = field(meta, TD_MMF_TYPE), *c = field(meta, TD_MMF_CLASS);
  if (!cJSON_IsString(t)) return lfail(TD_EINVAL, file, "\"_type\" must be a string");
  const char *cls = cJSON_IsString(c) ? c->valuestring : "";
  if (strstr(t->valuestring, TD_MMF_ENTRY_NTS) || !strcmp(cls, TD_MM_CLASS_NTS))
    *kind = MM_NTS;
  else if (strstr(t->valuestring, TD_MMF_ENTRY_NTD) || !strcmp(cls, TD_MM_CLASS_NTD))
    *kind = MM_NTD;
  else if (!strcmp(t->valuestring, TD_MM_TYPE_TD) || !strcmp(cls, TD_MM_CLASS_TD))
    *kind = MM_TD;
  else if (strstr(t->valuestring, "LazyStackedTensorDict") || !strcmp(cls, TD_MM_CLASS_LS))
    *kind = MM_LS;
  else if (has_folder(dirfd, TD_MMF_TC_FIELDS))
    *kind = MM_TC;
  else
    return lfail(TD_EINVAL, file,
                 "\"_type\" %s is not supported (TensorDict, LazyStackedTensorDict, "
                 "NonTensorData, NonTensorStack and tensorclass folders are)",
                 t->valuestring);
  const cJSON *v = field(meta, TD_MMF_FORMAT_VERSION);
  if (cJSON_IsNumber(v) && v->valuedouble > TD_MM_FORMAT_VERSION)
    return lfail(TD_EINVAL, file,
                 "\"_format_version\" is %g; this reader reads the versions up to %d",
                 v->valuedouble, TD_MM_FORMAT_VERSION);
  return 0;
}

/* The file name of key in its folder; errors name the file. */
static char *file_name(const char *file, const char *key, int64_t klen, const char *suffix) {
  char *name = td_mm_encode_key(key, klen, suffix);
  if (!name) return td_fail_null(TD_ENOMEM, "load_memmap: out of memory");
  /* The encoding leaves no '/' and no "." or ".." (checked anyway: never outside). */
  if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..")) {
    lfail(TD_EINVAL, file, "key '%s' does not name a file inside the folder", key);
  } else if (strlen(name) > TD_MM_NAME_MAX) {
    lfail(TD_EINVAL, file, "key '%s' is too long for a file name", key);
  } else {
    return name;
  }
  free(name);
  return NULL;
}

/* openat(dirfd, *name): when no such entry exists, the raw key (+ suffix) that Python
 * writes with robust_key=False and its loader falls back to (td_mm_legacy_name says
 * when); *name becomes the name tried last, for messages. errno as openat's. */
static int open_entry(int dirfd, char **name, const char *key, int64_t klen,
                      const char *suffix, int flags) {
  int fd = openat(dirfd, *name, flags);
  if (fd >= 0 || errno != ENOENT) return fd;
  bool oom;
  char *raw = td_mm_legacy_name(key, klen, suffix, !*suffix, &oom);
  if (!raw || !strcmp(raw, *name)) {
    free(raw);
    errno = oom ? ENOMEM : ENOENT;
    return -1;
  }
  fd = openat(dirfd, raw, flags);
  int err = errno;
  if (fd < 0 && err == ENOENT) {
    free(raw); /* neither exists: messages name the robust name */
  } else {
    free(*name);
    *name = raw;
  }
  errno = err;
  return fd;
}

typedef struct mm_load {
  int32_t mode;
} mm_load;

/* A tensor leaf: the meta.json entry item of key, its file in dirfd. */
static int32_t load_leaf(const mm_load *L, td_dict *d, int dirfd, const char *dir,
                         const char *file, const char *key, int64_t klen, const cJSON *item) {
  const cJSON *dt = field(item, TD_MMF_DTYPE), *dev = field(item, TD_MMF_DEVICE),
              *nested = field(item, "is_nested");
  if (!dt) return lfail(TD_EINVAL, file, "key '%s': \"dtype\" is missing", key);
  if (!cJSON_IsString(dt)) return lfail(TD_EINVAL, file, "key '%s': \"dtype\" must be a string", key);
  int32_t dtype = td_py_dtype_from_name(dt->valuestring);
  char names[256];
  if (dtype < 0)
    return lfail(TD_EDTYPE, file, "key '%s': unknown \"dtype\" '%s' (%s)", key, dt->valuestring,
                 td_py_dtype_list(names, sizeof names));
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS], numel;
  int32_t st = get_shape(file, key, item, &ndim, shape, &numel);
  if (st) return st;
  if (dev && !(cJSON_IsString(dev) && !strcmp(dev->valuestring, TD_MMF_CPU)))
    return lfail(TD_EINVAL, file, "key '%s': \"device\" must be \"cpu\" (a file maps to CPU memory)",
                 key);
  if (nested && !cJSON_IsBool(nested))
    return lfail(TD_EINVAL, file, "key '%s': \"is_nested\" must be true or false", key);
  if (cJSON_IsTrue(nested))
    return lfail(TD_EINVAL, file, "key '%s': nested (jagged) tensors are not supported", key);
  const td_dict_head *h = &d->head;
  bool leads = ndim >= h->ndim;
  for (int32_t i = 0; leads && i < h->ndim; i++) leads = shape[i] == h->shape[i];
  if (!leads) {
    char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
    return lfail(TD_ESHAPE, file, "key '%s': \"shape\" %s does not start with the batch size %s",
                 key, td_format_shape(a, sizeof a, ndim, shape),
                 td_format_shape(b, sizeof b, h->ndim, h->shape));
  }
  int64_t nbytes = numel * td_dtype_itemsize(dtype);
  char *name = file_name(file, key, klen, TD_MMF_LEAF_SUFFIX);
  if (!name) return td_last_status();
  int32_t writable = L->mode == TD_MAP_READWRITE;
  td_storage *s = NULL;
  char why[512], *path = NULL;
  if (nbytes == 0) { /* Python writes no file for a leaf without elements */
    if (!(s = td_storage_map_fd(-1, 0, writable, why, sizeof why))) st = lfail(TD_ENOMEM, file, "%s", why);
  } else {
    int fd = open_entry(dirfd, &name, key, klen, TD_MMF_LEAF_SUFFIX,
                        (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (!(path = td_mm_path_join(dir, name)))
      st = td_fail(TD_ENOMEM, "load_memmap: out of memory");
    else if (fd < 0 && errno == ELOOP)
      st = lfail(TD_EIO, path, "is a symlink (key '%s'); refusing to follow it", key);
    else if (fd < 0)
      st = lfail(TD_EIO, path, "cannot open (key '%s'): %s", key, strerror(errno));
    else if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
      st = lfail(TD_EIO, path, "not a regular file (key '%s')", key);
    else if (sb.st_size < nbytes) {
      char a[TD_SHAPE_STR];
      st = lfail(TD_EIO, path, "holds %lld bytes, %lld needed (key '%s': %s %s)",
                 (long long)sb.st_size, (long long)nbytes, key, dt->valuestring,
                 td_format_shape(a, sizeof a, ndim, shape));
    } else if (!(s = td_storage_map_fd(fd, nbytes, writable, why, sizeof why)))
      st = lfail(TD_EIO, path, "%s", why);
    if (fd >= 0) close(fd);
  }
  free(name);
  free(path);
  if (st) return st;
  td_tensor *t = td_tensor_from_storage(s, 0, ndim, shape, NULL, dtype);
  td_storage_release(s);
  st = t ? td_dict_set_tensor(d, key, klen, t) : td_last_status();
  td_tensor_release(t);
  return st < 0 ? st : 0;
}

/* ---- non-tensor values -------------------------------------------------------------- */

/* The distinct JSON texts of a stack's elements, and each element's position. */
typedef struct text_set {
  char **texts;
  int64_t n;
  int64_t *table; /* text index + 1; 0 empty */
  int64_t mask;
  int64_t *pos;
  int64_t npos;
} text_set;

static bool text_add(text_set *ts, const cJSON *elem) {
  bool bad_utf8;
  char *t = td_json_print(elem, TD_JSON_COMPACT, NULL, &bad_utf8);
  if (!t) return false;
  int64_t slot = (int64_t)(td_py_text_hash(t) & (uint64_t)ts->mask);
  for (;; slot = (slot + 1) & ts->mask) {
    int64_t k = ts->table[slot];
    if (k == 0) {
      ts->texts[ts->n] = t;
      ts->table[slot] = ++ts->n;
      ts->pos[ts->npos++] = ts->n - 1;
      return true;
    }
    if (!strcmp(ts->texts[k - 1], t)) {
      free(t);
      ts->pos[ts->npos++] = k - 1;
      return true;
    }
  }
}

/* Nested lists shaped like batch[dim..]: true when they are. */
static bool stack_fits(const cJSON *a, int32_t dim, int32_t ndim, const int64_t *batch) {
  if (dim == ndim) return true;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != batch[dim]) return false;
  for (const cJSON *x = a->child; x; x = x->next)
    if (!stack_fits(x, dim + 1, ndim, batch)) return false;
  return true;
}

static bool stack_collect(text_set *ts, const cJSON *a, int32_t dim, int32_t ndim) {
  if (dim == ndim) return text_add(ts, a);
  for (const cJSON *x = a->child; x; x = x->next)
    if (!stack_collect(ts, x, dim + 1, ndim)) return false;
  return true;
}

/* A NonTensorStack's "data": one JSON value per batch element, as nested lists. */
static int32_t load_stack(td_dict *d, const char *key, int64_t klen, int subfd,
                          const char *file, const cJSON *data) {
  if (!data || cJSON_IsNull(data))
    return lfail(TD_EINVAL, file, "\"data\" is missing (a stack saved as sub-folders is not "
                 "supported)");
  if (cJSON_IsString(data)) {
    struct stat sb;
    if (fstatat(subfd, TD_MMF_NT_PICKLE, &sb, AT_SYMLINK_NOFOLLOW) == 0)
      return lfail(TD_EINVAL, file, "the values are pickled (pickle.pkl), which this reader "
                   "cannot load");
  }
  int32_t ndim = d->head.ndim;
  const int64_t *batch = d->head.shape;
  if (ndim == 0) { /* no batch dims to stack along: the whole list is the value */
    bool bad_utf8;
    char *t = td_json_print(data, TD_JSON_COMPACT, NULL, &bad_utf8);
    int32_t st = t ? td_dict_set_value(d, key, klen, t)
                   : td_fail(TD_ENOMEM, "load_memmap: out of memory");
    free(t);
    return st < 0 ? st : 0;
  }
  if (!stack_fits(data, 0, ndim, batch)) {
    char b[TD_SHAPE_STR];
    return lfail(TD_EINVAL, file, "\"data\" must be nested lists shaped like the batch size %s",
                 td_format_shape(b, sizeof b, ndim, batch));
  }
  int64_t numel = 1, tcap = 16;
  for (int32_t i = 0; i < ndim; i++) numel *= batch[i]; /* <= the items in the file */
  while (tcap < 2 * numel) tcap *= 2;
  text_set ts = {.texts = malloc(sizeof(char *) * (size_t)(numel + 1)),
                 .table = calloc((size_t)tcap, sizeof(int64_t)),
                 .mask = tcap - 1};
  td_tensor *pos = td_tensor_empty(ndim, batch, TD_INT64);
  int32_t st = 0;
  if (!ts.texts || !ts.table || !pos) {
    st = td_fail(TD_ENOMEM, "load_memmap: out of memory");
  } else {
    ts.pos = td_tensor_data_borrow(pos);
    if (!stack_collect(&ts, data, 0, ndim)) st = td_fail(TD_ENOMEM, "load_memmap: out of memory");
  }
  if (!st) {
    st = td_dict_set_values(d, key, klen, ts.n, (const char *const *)ts.texts, pos);
    if (st > 0) st = 0;
  }
  for (int64_t i = 0; i < ts.n; i++) free(ts.texts[i]);
  free(ts.texts);
  free(ts.table);
  td_tensor_release(pos);
  return st;
}

static td_dict *load_dict(const mm_load *L, int dirfd, const char *dir, const cJSON *meta,
                          int32_t depth);

/* A tensorclass folder (what a @tensorclass's memmap writes): its fields are the
 * TensorDict folder _tensordict (tensor fields as leaves, non-tensor ones as
 * NonTensorData sub-folders); the non-tensor fields Python keeps outside it are the
 * folder's own meta.json keys besides "_type" (JSON values) or pickled in other.pickle.
 * What loads is the container of the fields: the class is Python code. Its prefix is
 * the tensorclass folder, so that a refresh maps the same folder again. */
static td_dict *load_tensorclass(const mm_load *L, int dirfd, const char *dir,
                                 const char *file, const cJSON *meta, int32_t depth) {
  struct stat sb;
  if (fstatat(dirfd, TD_MMF_TC_PICKLE, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
    char *pk = td_mm_path_join(dir, TD_MMF_TC_PICKLE);
    lfail(TD_EINVAL, pk ? pk : file, "the tensorclass's non-tensor fields are pickled here (Python "
          "pickles what is not JSON); a pickle is Python code to run, which this reader does not "
          "do: store those fields as JSON-able values (str, numbers, bools, lists, dicts)");
    free(pk);
    return NULL;
  }
  char *sub = td_mm_path_join(dir, TD_MMF_TC_FIELDS);
  char *sub_file = sub ? td_mm_path_join(sub, TD_MMF_META) : NULL;
  int fd = -1, kind;
  int32_t st = 0;
  cJSON *fields = NULL;
  td_dict *c = NULL;
  if (!sub_file) {
    st = td_fail(TD_ENOMEM, "load_memmap: out of memory");
  } else if ((fd = openat(dirfd, TD_MMF_TC_FIELDS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
    st = lfail(TD_EIO, sub, "cannot open the fields of the tensorclass: %s", strerror(errno));
  } else if (!(fields = td_mm_read_meta(fd, sub_file))) {
    st = td_last_status();
  } else if ((st = classify(sub_file, fd, fields, &kind))) {
  } else if (kind != MM_TD) {
    st = lfail(TD_EINVAL, sub_file, "must hold a TensorDict (the fields of the tensorclass)");
  } else if (!(c = load_dict(L, fd, sub, fields, depth + 1))) {
    st = td_last_status();
  }
  for (const cJSON *item = meta->child; item && !st; item = item->next) {
    size_t klen;
    const char *key = td_json_key_of(item, &klen);
    if ((size_t)klen == strlen(TD_MMF_TYPE) && !memcmp(key, TD_MMF_TYPE, (size_t)klen)) continue;
    if (td_dict_find(c, key, (int64_t)klen) >= 0) {
      st = lfail(TD_EINVAL, file, "key '%s' is both a field in _tensordict and a value here", key);
      break;
    }
    bool bad_utf8;
    char *t = td_json_print(item, TD_JSON_COMPACT, NULL, &bad_utf8);
    st = t ? td_dict_set_value(c, key, (int64_t)klen, t)
           : td_fail(TD_ENOMEM, "load_memmap: out of memory");
    free(t);
    if (st > 0) st = 0;
  }
  if (!st) st = td_dict_set_prefix(c, dir);
  cJSON_Delete(fields);
  if (fd >= 0) close(fd);
  free(sub), free(sub_file);
  if (st) {
    td_dict_release(c);
    return NULL;
  }
  return c;
}

/* An entry with a sub-folder: a nested container, a NonTensorData or a NonTensorStack. */
static int32_t load_sub(const mm_load *L, td_dict *d, int dirfd, const char *dir,
                        const char *file, const char *key, int64_t len, const cJSON *item,
                        int32_t depth) {
  const cJSON *type = field(item, TD_MMF_ENTRY_TYPE);
  if (!cJSON_IsString(type)) return lfail(TD_EINVAL, file, "key '%s': \"type\" must be a string", key);
  char *name = file_name(file, key, len, "");
  if (!name) return td_last_status();
  int32_t st = 0;
  cJSON *meta = NULL;
  int fd = open_entry(dirfd, &name, key, len, "", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int err = errno;
  char *sub = td_mm_path_join(dir, name);
  char *sub_file = sub ? td_mm_path_join(sub, TD_MMF_META) : NULL;
  if (!sub_file) {
    st = td_fail(TD_ENOMEM, "load_memmap: out of memory");
    goto done;
  }
  if (fd < 0) {
    struct stat sb;
    bool link = fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode);
    st = link ? lfail(TD_EIO, sub, "is a symlink (key '%s'); refusing to follow it", key)
              : lfail(TD_EIO, sub, "cannot open the folder of key '%s': %s", key, strerror(err));
    goto done;
  }
  if (!(meta = td_mm_read_meta(fd, sub_file))) {
    st = td_last_status();
    goto done;
  }
  int kind;
  if ((st = classify(sub_file, fd, meta, &kind))) goto done;
  if (kind == MM_LS) {
    st = lfail(TD_EINVAL, sub_file, "key '%s' holds a LazyStackedTensorDict: a TensorDict here "
               "cannot hold a lazy stack (load this folder on its own with T.load_memmap)", key);
  } else if (kind == MM_TD || kind == MM_TC) {
    td_dict *c = kind == MM_TD ? load_dict(L, fd, sub, meta, depth + 1)
                               : load_tensorclass(L, fd, sub, sub_file, meta, depth + 1);
    if (!c) {
      st = td_last_status();
      goto done;
    }
    bool leads = c->head.ndim >= d->head.ndim;
    for (int32_t i = 0; leads && i < d->head.ndim; i++) leads = c->head.shape[i] == d->head.shape[i];
    if (!leads) {
      char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
      st = lfail(TD_ESHAPE, sub_file, "\"shape\" %s does not start with the batch size %s of "
                 "its parent",
                 td_format_shape(a, sizeof a, c->head.ndim, c->head.shape),
                 td_format_shape(b, sizeof b, d->head.ndim, d->head.shape));
    } else {
      st = td_dict_set_dict(d, key, len, c);
    }
    td_dict_release(c);
  } else if (kind == MM_NTD) {
    const cJSON *data = field(meta, TD_MMF_DATA);
    struct stat sb;
    if (!data && fstatat(fd, TD_MMF_TC_PICKLE, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
      char *pk = td_mm_path_join(sub, TD_MMF_TC_PICKLE);
      st = lfail(TD_EINVAL, pk ? pk : sub_file, "key '%s' holds a value Python pickled (it is not "
                 "JSON: a set, a custom object, ...); a pickle is Python code to run, which this "
                 "reader does not do: store it as a JSON-able value (str, numbers, bools, lists, "
                 "dicts)", key);
      free(pk);
    } else if (!data) {
      st = lfail(TD_EINVAL, sub_file, "\"data\" is missing");
    } else {
      bool bad_utf8;
      char *t = td_json_print(data, TD_JSON_COMPACT, NULL, &bad_utf8);
      st = t ? td_dict_set_value(d, key, len, t) : td_fail(TD_ENOMEM, "load_memmap: out of memory");
      free(t);
    }
  } else {
    st = load_stack(d, key, len, fd, sub_file, field(meta, TD_MMF_DATA));
  }
  if (st > 0) st = 0;
done:
  cJSON_Delete(meta);
  if (fd >= 0) close(fd);
  free(name), free(sub), free(sub_file);
  return st;
}

/* The container of folder dirfd (path dir) from its parsed meta.json. */
static td_dict *load_dict(const mm_load *L, int dirfd, const char *dir, const cJSON *meta,
                          int32_t depth) {
  char *file = td_mm_path_join(dir, TD_MMF_META);
  if (!file) return td_fail_null(TD_ENOMEM, "load_memmap: out of memory");
  td_dict *d = NULL;
  int32_t st = 0, ndim = 0;
  int64_t batch[TD_MAX_DIMS], numel;
  if (depth > TD_DICT_MAX_DEPTH) {
    st = lfail(TD_EINVAL, file, "nested more than %d levels deep", TD_DICT_MAX_DEPTH);
    goto done;
  }
  if ((st = get_shape(file, NULL, meta, &ndim, batch, &numel))) goto done;
  /* "device": "cpu", or "None" / null / absent for a container without one. */
  const cJSON *dev = field(meta, TD_MMF_DEVICE);
  bool cpu = cJSON_IsString(dev) && !strcmp(dev->valuestring, TD_MMF_CPU);
  if (dev && !cpu && !cJSON_IsNull(dev) &&
      !(cJSON_IsString(dev) && !strcmp(dev->valuestring, TD_MMF_NO_DEVICE))) {
    st = !cJSON_IsString(dev) ? lfail(TD_EINVAL, file, "\"device\" must be a string")
         : !strncmp(dev->valuestring, "cuda", 4)
             ? lfail(TD_EINVAL, file, "\"device\" is '%s': a CUDA TensorDict cannot be mapped "
                     "from files (files map to CPU memory)", dev->valuestring)
             : lfail(TD_EINVAL, file, "\"device\" '%s' is unknown (\"cpu\" or \"None\")",
                     dev->valuestring);
    goto done;
  }
  /* "_names": a list of ndim strings or nulls (a key of that name is an object). */
  const cJSON *nm = field(meta, TD_MMF_NAMES);
  const char *names[TD_MAX_DIMS] = {0};
  if (cJSON_IsArray(nm)) {
    int32_t k = 0;
    bool ok = cJSON_GetArraySize(nm) == ndim;
    for (const cJSON *x = nm->child; ok && x; x = x->next, k++) {
      if (cJSON_IsString(x)) names[k] = x->valuestring;
      else ok = cJSON_IsNull(x);
    }
    if (!ok) {
      st = lfail(TD_EINVAL, file, "\"_names\" must list %d names (strings or null)", (int)ndim);
      goto done;
    }
  }
  if (!(d = td_dict_new(ndim, batch))) {
    st = td_last_status();
    goto done;
  }
  if (cpu && (st = td_dict_set_device(d, TD_DEVICE_CPU, 0))) goto done;
  for (const cJSON *item = meta->child; item && !st; item = item->next) {
    if (!cJSON_IsObject(item)) continue; /* the container's own fields */
    size_t klen;
    const char *key = td_json_key_of(item, &klen);
    if (td_dict_find(d, key, (int64_t)klen) >= 0) {
      st = lfail(TD_EINVAL, file, "key '%s' appears twice", key);
    } else if (field(item, TD_MMF_ENTRY_TYPE)) {
      st = load_sub(L, d, dirfd, dir, file, key, (int64_t)klen, item, depth);
    } else {
      st = load_leaf(L, d, dirfd, dir, file, key, (int64_t)klen, item);
    }
  }
  if (!st && cJSON_IsArray(nm)) {
    bool any = false;
    for (int32_t i = 0; i < ndim; i++) any |= names[i] != NULL;
    if (any && (st = td_dict_set_names(d, names)))
      st = lfail(st, file, "\"_names\": %s", td_last_error());
  }
  if (!st) st = td_dict_set_prefix(d, dir);
done:
  free(file);
  if (st) {
    td_dict_release(d);
    return NULL;
  }
  return d;
}

/* The error for a prefix that is a file: what it seems to be, and how to load it. */
static void not_a_folder(const char *path) {
  unsigned char magic[4] = {0};
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  bool zip = fd >= 0 && read(fd, magic, 4) == 4 && magic[0] == 'P' && magic[1] == 'K' &&
             ((magic[2] == 3 && magic[3] == 4) || (magic[2] == 5 && magic[3] == 6));
  if (fd >= 0) close(fd);
  if (zip)
    td_fail(TD_EINVAL, "load_memmap: '%s' is a zip archive (Python tensordict's .tdz, from "
            "td.save(\"x.tdz\") or pack_memmap), not a folder: this reader maps folders only; "
            "unpack it into one (unzip x.tdz -d x, or in Python "
            "tensordict.unpack_memmap(\"x.tdz\", \"x\")) and load that", path);
  else
    td_fail(TD_EINVAL, "load_memmap: '%s' is a file, not a memmap folder (a consolidated file "
            "loads with T.from_consolidated)", path);
}

/* A lazy stack's folder dirfd (path dir): its members, folders "0", "1", ... (as many as
 * there are in a row), each a TensorDict, as the entries "0", "1", ... of a container of
 * batch size []; *stack_dim from its meta.json. */
static td_dict *load_lazy_stack(const mm_load *L, int dirfd, const char *dir, const char *file,
                                const cJSON *meta, int32_t *stack_dim) {
  const cJSON *sd = field(meta, TD_MMF_STACK_DIM);
  int64_t dim;
  if (!sd || td_json_int64(sd, &dim) != 1 || dim < 0 || dim >= TD_MAX_DIMS)
    return lfail(TD_EINVAL, file, "\"stack_dim\" must be a non-negative integer"), NULL;
  td_dict *holder = td_dict_new(0, NULL);
  if (!holder) return NULL;
  int32_t st = 0, n = 0, ndim = -1;
  for (;; n++) {
    char name[16];
    snprintf(name, sizeof name, "%d", (int)n);
    if (!has_folder(dirfd, name)) break;
    char *sub = td_mm_path_join(dir, name);
    char *sub_file = sub ? td_mm_path_join(sub, TD_MMF_META) : NULL;
    int fd = -1, kind;
    cJSON *m = NULL;
    td_dict *c = NULL;
    if (!sub_file)
      st = td_fail(TD_ENOMEM, "load_memmap: out of memory");
    else if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
      st = lfail(TD_EIO, sub, "cannot open member %d of the lazy stack: %s", (int)n, strerror(errno));
    else if (!(m = td_mm_read_meta(fd, sub_file)))
      st = td_last_status();
    else if ((st = classify(sub_file, fd, m, &kind))) {
    } else if (kind != MM_TD && kind != MM_TC)
      st = lfail(TD_EINVAL, sub_file, "member %d of the lazy stack must be a TensorDict%s", (int)n,
                 kind == MM_LS ? " (a lazy stack of lazy stacks is not supported)" : "");
    else if (!(c = kind == MM_TD ? load_dict(L, fd, sub, m, 1)
                                 : load_tensorclass(L, fd, sub, sub_file, m, 1)))
      st = td_last_status();
    else if (ndim >= 0 && c->head.ndim != ndim)
      st = lfail(TD_ESHAPE, sub_file, "member %d has %d batch dims, member 0 has %d", (int)n,
                 (int)c->head.ndim, (int)ndim);
    else if (dim > c->head.ndim)
      st = lfail(TD_EINVAL, file, "\"stack_dim\" %lld is past the %d batch dims of the members",
                 (long long)dim, (int)c->head.ndim);
    else if (td_dict_set_dict(holder, name, (int64_t)strlen(name), c) < 0)
      st = td_last_status();
    if (c) {
      ndim = c->head.ndim;
      td_dict_set_locked(c, 1);
    }
    td_dict_release(c);
    cJSON_Delete(m);
    if (fd >= 0) close(fd);
    free(sub), free(sub_file);
    if (st) break;
  }
  if (!st && n == 0) st = lfail(TD_EINVAL, file, "the lazy stack has no member folder \"0\"");
  if (!st) st = td_dict_set_prefix(holder, dir);
  if (st) {
    td_dict_release(holder);
    return NULL;
  }
  *stack_dim = (int32_t)dim;
  return holder;
}

TD_EXPORT td_dict *td_dict_load_memmap(const char *prefix, int32_t mode) {
  int32_t stack_dim;
  td_dict *d = td_dict_load_memmap_any(prefix, mode, &stack_dim);
  return td_mm_only_dict(d, stack_dim, "load_memmap", prefix);
}

TD_EXPORT td_dict *td_dict_load_memmap_any(const char *prefix, int32_t mode, int32_t *stack_dim) {
  if (!stack_dim) return td_fail_null(TD_EINVAL, "load_memmap: stack_dim is NULL");
  *stack_dim = -1;
  if (!prefix || !*prefix) return td_fail_null(TD_EINVAL, "load_memmap: the prefix is empty");
  if (mode != TD_MAP_READ && mode != TD_MAP_READWRITE)
    return td_fail_null(TD_EINVAL, "load_memmap: mode %d: TD_MAP_READ or TD_MAP_READWRITE",
                        (int)mode);
  char *dir = strdup(prefix);
  if (!dir) return td_fail_null(TD_ENOMEM, "load_memmap: out of memory");
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/') dir[--n] = '\0';
  td_dict *d = NULL;
  cJSON *meta = NULL;
  char *file = td_mm_path_join(dir, TD_MMF_META);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* a link here is the caller's */
  if (!file) {
    td_fail(TD_ENOMEM, "load_memmap: out of memory");
  } else if (fd < 0 && errno == ENOTDIR) {
    not_a_folder(dir);
  } else if (fd < 0) {
    td_fail(TD_EIO, "load_memmap: cannot open the folder '%s': %s", dir, strerror(errno));
  } else if ((meta = td_mm_read_meta(fd, file))) {
    int kind;
    const mm_load L = {mode};
    if (classify(file, fd, meta, &kind) == 0) {
      if (kind == MM_NTD || kind == MM_NTS)
        lfail(TD_EINVAL, file, "holds a non-tensor value (%s), not a TensorDict; load the "
              "folder that holds it",
              kind == MM_NTD ? TD_MMF_ENTRY_NTD : TD_MMF_ENTRY_NTS);
      else if (kind == MM_LS)
        d = load_lazy_stack(&L, fd, dir, file, meta, stack_dim);
      else if ((d = kind == MM_TD ? load_dict(&L, fd, dir, meta, 0)
                                  : load_tensorclass(&L, fd, dir, file, meta, 0)))
        td_dict_set_locked(d, 1); /* like memmap()'s result (Python 0.15's load leaves it
                                   * unlocked): keys added now would not be on disk */
    }
  }
  cJSON_Delete(meta);
  if (fd >= 0) close(fd);
  free(file);
  free(dir);
  return d;
}
