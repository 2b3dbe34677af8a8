/*
 * memmap.c: containers on disk in Python tensordict's memmap layout: what a save
 * writes, and the calls that save (td_dict_memmap, td_dict_memmap_, td_dict_memmap_like)
 * and sync (td_dict_sync). Also what the loader (memmap_load.c) shares: file names
 * of keys, mappings of open files, joined paths. (What the consolidated layout shares
 * too, dtype names and Python's JSON escapes, is in pyformat.c.)
 *
 * A save is planned in memory first: every check (keys, devices, values) and the text
 * of every meta.json, so that a refused container touches no file. memmap_disk.c
 * then writes the plan into a temporary sibling folder and swaps it in at prefix; the
 * result is built from the mapped files by walking the container again in plan order.
 *
 * meta.json is built as a tree of the JSON layer (core/src/json.h) and written the way
 * Python's json.dumps writes it (", " and ": "; "," and ":" for NonTensorStack folders;
 * non-ASCII as \uXXXX; non-tensor values with their number literals as read), with the
 * fields in Python's order, so a folder written here is byte for byte the folder Python
 * tensordict 0.15 writes for the same container.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store_internal.h"

/* ------------------------------------------------------ shared with the loader */

/* Python's _FS_UNSAFE_CHARS: / < > : " | ? * \ space % NUL, control characters, DEL. */
static bool fs_unsafe(unsigned char c) {
  return c < 32 || c == 127 || (c != 0 && strchr("/<>:\"|?*\\ %", c) != NULL);
}

char *td_mm_encode_key(const char *key, int64_t len, const char *suffix) {
  size_t sl = strlen(suffix);
  char *out = malloc((size_t)len * 3 + sl + 8);
  if (!out) return NULL;
  size_t o = 0;
  if (len == 0) {
    out[o++] = '%';
  } else if ((len == 1 && key[0] == '.') || (len == 2 && key[0] == '.' && key[1] == '.')) {
    for (int64_t i = 0; i < len; i++, o += 3) memcpy(out + o, "%2E", 3);
  } else {
    static const char hex[] = "0123456789ABCDEF";
    for (int64_t i = 0; i < len; i++) {
      unsigned char c = (unsigned char)key[i];
      if (fs_unsafe(c)) {
        out[o++] = '%';
        out[o++] = hex[c >> 4];
        out[o++] = hex[c & 15];
      } else {
        out[o++] = (char)c;
      }
    }
  }
  memcpy(out + o, suffix, sl + 1);
  return out;
}

char *td_mm_path_join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (!p) return NULL;
  memcpy(p, dir, a);
  p[a] = '/';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

/* ----------------------------------------------------------- JSON text, Python's way */

/* Keys become meta.json keys, which Python reads as UTF-8 text. */
static bool utf8_valid(const char *s, int64_t n) {
  uint32_t cp;
  for (int64_t i = 0; i < n;) {
    size_t k = td_utf8_decode((const unsigned char *)s + i, (size_t)(n - i), &cp, false);
    if (!k) return false;
    i += (int64_t)k;
  }
  return true;
}

/* The meta.json text of a tree, as Python writes it; NULL on invalid UTF-8 (with
 * *bad_utf8 set) or when out of memory. The caller frees it. */
static char *meta_text(const cJSON *root, bool compact, size_t *len, bool *bad_utf8) {
  *bad_utf8 = false;
  if (!root) return NULL;
  return td_json_print(root, compact ? TD_JSON_PYTHON_COMPACT : TD_JSON_PYTHON, len, bad_utf8);
}

/* A JSON list of integers, written from the int64 values (no trip through doubles). */
static cJSON *int_list(int32_t n, const int64_t *v) {
  cJSON *a = cJSON_CreateArray();
  for (int32_t i = 0; a && i < n; i++) {
    if (!cJSON_AddItemToArray(a, td_json_new_int(v[i]))) {
      cJSON_Delete(a);
      return NULL;
    }
  }
  return a;
}

/* Adds item under key; on failure deletes item and clears *ok. */
static void add(cJSON *obj, const char *key, cJSON *item, bool *ok) {
  if (!td_json_add(obj, key, strlen(key), item)) *ok = false;
}

/* ------------------------------------------------------------------------ the plan */

/* Room for one more element in arr (n used of cap); ok becomes false when out of memory. */
#define GROW(arr, n, cap, ok)                                                    \
  do {                                                                           \
    if ((n) >= (cap)) {                                                          \
      int32_t grow_cap_ = (cap) ? 2 * (cap) : 16;                                \
      void *grow_p_ = realloc((arr), sizeof *(arr) * (size_t)grow_cap_);         \
      if (grow_p_) {                                                             \
        (arr) = grow_p_;                                                         \
        (cap) = grow_cap_;                                                       \
      } else {                                                                   \
        (ok) = false;                                                            \
      }                                                                          \
    }                                                                            \
  } while (0)

int32_t td_mm_oom(const td_mm_save *S) { return td_fail(TD_ENOMEM, "%s: out of memory", S->call); }

/* A new folder (name is taken over); its index or a negative code. */
int32_t td_mm_add_dir(td_mm_save *S, int32_t parent, char *name) {
  bool ok = true;
  char *path = name ? td_mm_path_join(S->dirs[parent].path, name) : NULL;
  char *rel = !name        ? NULL
              : parent == 0 ? strdup(name)
                            : td_mm_path_join(S->dirs[parent].rel, name);
  if (path && rel) GROW(S->dirs, S->ndirs, S->dcap, ok);
  if (!path || !rel || !ok) {
    free(name), free(path), free(rel);
    return td_mm_oom(S);
  }
  S->dirs[S->ndirs] = (td_mm_dir){parent, name, rel, path};
  return S->ndirs++;
}

/* A new file job (name and text are taken over). */
static int32_t add_job(td_mm_save *S, int32_t dir, char *name, const td_tensor *leaf, char *text,
                       size_t text_len, int64_t nbytes) {
  bool ok = true;
  char *path = name ? td_mm_path_join(S->dirs[dir].path, name) : NULL;
  if (path) GROW(S->jobs, S->njobs, S->jcap, ok);
  if (!path || !ok) {
    free(name), free(path), free(text);
    return td_mm_oom(S);
  }
  S->jobs[S->njobs] = (td_mm_job){.dir = dir, .name = name, .path = path, .leaf = leaf,
                               .text = text, .text_len = text_len, .nbytes = nbytes};
  return S->njobs++;
}

static int32_t add_mark(td_mm_save *S, int32_t index) {
  bool ok = true;
  GROW(S->marks, S->nmarks, S->mcap, ok);
  if (!ok) return td_mm_oom(S);
  S->marks[S->nmarks++] = (td_mm_mark){index, NULL};
  return 0;
}

/* A meta.json job for folder dir from a cJSON tree (deleted here). */
int32_t td_mm_add_meta(td_mm_save *S, int32_t dir, cJSON *root, bool compact, const char *what) {
  size_t len = 0;
  bool bad_utf8;
  char *text = meta_text(root, compact, &len, &bad_utf8);
  cJSON_Delete(root);
  if (!text && bad_utf8)
    return td_fail(TD_EINVAL, "%s: %s is not valid UTF-8 (meta.json is UTF-8)", S->call, what);
  if (!text) return td_mm_oom(S);
  char *name = strdup(TD_MMF_META);
  if (!name) {
    free(text);
    return td_mm_oom(S);
  }
  return add_job(S, dir, name, NULL, text, len, 0) < 0 ? td_last_status() : 0;
}

/* The tree of a value's text (valid JSON: the containers hold nothing else). */
static cJSON *value_tree(const char *text) {
  td_json_error e;
  return td_json_read(text, strlen(text), TD_JSON_KEEP_SURROGATES, &e);
}

/* The nested list of a stacked value's texts, shaped like the batch (positions p). */
static bool stack_list(td_sbuf *b, const td_tensor *p, const td_values *v, int32_t dim,
                       int64_t off) {
  if (dim == p->ndim) {
    int64_t k = ((const int64_t *)(const void *)p->storage->data)[off];
    if (k < 0 || k >= v->n) return false;
    td_sb_puts(b, v->texts[k]);
    return true;
  }
  td_sb_putc(b, '[');
  for (int64_t i = 0; i < p->shape[dim]; i++) {
    if (i) td_sb_putc(b, ',');
    if (!stack_list(b, p, v, dim + 1, off + i * p->strides[dim])) return false;
  }
  td_sb_putc(b, ']');
  return true;
}

/* The sub-folder of a non-tensor value: NonTensorData (uniform) or NonTensorStack. */
static int32_t plan_value(td_mm_save *S, const td_entry *e, int32_t dir, const char *key,
                          bool *stacked) {
  const td_values *v = e->values;
  char what[TD_PATH_CHARS + 32];
  snprintf(what, sizeof what, "the value of key '%s'", key);
  for (int64_t k = 0; k < v->n; k++) {
    td_json_error err;
    cJSON *tree = td_json_read(v->texts[k], strlen(v->texts[k]), TD_JSON_KEEP_SURROGATES, &err);
    cJSON_Delete(tree);
    if (!tree)
      return td_fail(TD_EINVAL, "%s: key '%s': the value is not valid JSON: %.60s", S->call,
                     key, v->texts[k]);
  }
  bool ok = true;
  cJSON *root = cJSON_CreateObject();
  *stacked = e->kind == TD_ENTRY_VALUES && e->t.ndim > 0;
  if (!*stacked) {
    /* A uniform value; a stacked one over a 0-dim batch holds one element. */
    const char *text = v->texts[0];
    if (e->kind == TD_ENTRY_VALUES) {
      int64_t k = ((const int64_t *)(const void *)e->t.storage->data)[e->t.offset];
      if (k < 0 || k >= v->n)
        return cJSON_Delete(root),
               td_fail(TD_EINVAL, "%s: key '%s': position %lld out of range", S->call, key,
                       (long long)k);
      text = v->texts[k];
    }
    add(root, TD_MMF_TYPE, cJSON_CreateString(TD_MM_TYPE_NTD), &ok);
    add(root, TD_MMF_DATA, value_tree(text), &ok);
    add(root, TD_MMF_METADATA, cJSON_CreateNull(), &ok);
    add(root, TD_MMF_IS_NON_TENSOR, cJSON_CreateTrue(), &ok);
    if (!ok) return cJSON_Delete(root), td_mm_oom(S);
    return td_mm_add_meta(S, dir, root, false, what);
  }
  td_sbuf list = {0};
  if (!stack_list(&list, &e->t, v, 0, e->t.offset)) {
    free(list.p);
    cJSON_Delete(root);
    return td_fail(TD_EINVAL, "%s: key '%s': a position is out of range", S->call, key);
  }
  add(root, TD_MMF_TYPE, cJSON_CreateString(TD_MM_TYPE_NTS), &ok);
  add(root, TD_MMF_FORMAT_VERSION, td_json_new_int(TD_MM_FORMAT_VERSION), &ok);
  add(root, TD_MMF_CLASS, cJSON_CreateString(TD_MM_CLASS_NTS), &ok);
  add(root, TD_MMF_STACK_DIM, td_json_new_int(0), &ok);
  add(root, TD_MMF_DEVICE, cJSON_CreateNull(), &ok); /* the stack's own: none, as Python's */
  add(root, TD_MMF_DATA, list.oom ? NULL : value_tree(list.p), &ok);
  free(list.p);
  if (!ok) return cJSON_Delete(root), td_mm_oom(S);
  return td_mm_add_meta(S, dir, root, true, what); /* Python writes stacks compact */
}

typedef struct name_key {
  const char *name, *key;
} name_key;

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const name_key *)a)->name, ((const name_key *)b)->name);
}

/* Two keys of one folder must not map to one file name ("a" and "a.memmap" as a
 * nested container, or a nested container named "meta.json"). */
static int32_t check_names(const td_mm_save *S, name_key *names, int32_t n, const char *path) {
  qsort(names, (size_t)n, sizeof *names, cmp_name);
  for (int32_t i = 1; i < n; i++) {
    const name_key *a = &names[i - 1], *b = &names[i];
    if (strcmp(a->name, b->name) != 0) continue;
    if (!a->key || !b->key)
      return td_fail(TD_EINVAL, "%s: %s: key '%s' would be stored as 'meta.json', the file of "
                     "the folder's own metadata", S->call, path, a->key ? a->key : b->key);
    return td_fail(TD_EINVAL, "%s: %s: keys '%s' and '%s' would both be stored as '%s'",
                   S->call, path, a->key, b->key, b->name);
  }
  return 0;
}

/* One entry of d: its meta.json entry into meta, its file or folder into the plan. */
static int32_t plan_entry(td_mm_save *S, const td_dict *d, int32_t i, int32_t dir,
                          const td_key_path *at, int32_t depth, cJSON *meta, name_key *nk) {
  char pbuf[TD_PATH_CHARS];
  td_key_path here = {at, td_dict_key(d, i)};
  const char *key = td_dict_key(d, i), *kp = td_key_path_text(&here, pbuf);
  int64_t len = d->keys->meta[i].len;
  const td_entry *e = &d->entries[i];
  if (!utf8_valid(key, len))
    return td_fail(TD_EINVAL, "%s: key '%s' is not valid UTF-8 (meta.json is UTF-8)", S->call,
                   kp);
  if (td_mm_container_field(key, (size_t)len))
    return td_fail(TD_EINVAL,
                   "%s: key '%s' cannot be saved: meta.json uses \"%s\" for the container "
                   "itself (Python tensordict would lose the entry); rename it",
                   S->call, kp, key);
  bool ok = true, tensor = e->kind == TD_ENTRY_TENSOR;
  char *name = td_mm_encode_key(key, len, tensor ? TD_MMF_LEAF_SUFFIX : "");
  if (!name) return td_mm_oom(S);
  if (strlen(name) > TD_MM_NAME_MAX) {
    size_t n = strlen(name);
    free(name);
    return td_fail(TD_EINVAL, "%s: key '%s' is too long for a file name (%zu bytes, at most %d)",
                   S->call, kp, n, TD_MM_NAME_MAX);
  }
  cJSON *entry = td_json_new(cJSON_Object); /* ours: its key may hold NUL bytes */
  int32_t st = 0;
  if (tensor) {
    const td_tensor *t = &e->t;
    if (!S->like && t->storage->device_type != TD_DEVICE_CPU) {
      free(name), cJSON_Delete(entry);
      return td_fail(TD_EINVAL, "%s: key '%s' is on cuda:%d: copy it to the CPU first", S->call,
                     kp, (int)t->storage->device_index);
    }
    int64_t numel = td_tensor_numel(t), nbytes;
    if (__builtin_mul_overflow(numel, t->itemsize, &nbytes)) {
      free(name), cJSON_Delete(entry);
      return td_fail(TD_ESHAPE, "%s: key '%s' is too large to save", S->call, kp);
    }
    add(entry, TD_MMF_DEVICE, cJSON_CreateString(TD_MMF_CPU), &ok);
    add(entry, TD_MMF_SHAPE, int_list(t->ndim, t->shape), &ok);
    add(entry, TD_MMF_DTYPE, cJSON_CreateString(td_py_dtype_name(t->dtype)), &ok);
    add(entry, TD_MMF_IS_NESTED, cJSON_CreateFalse(), &ok);
    *nk = (name_key){name, key};
    /* Python writes no file for a leaf without elements; the name stays reserved. */
    int32_t job = -1;
    if (nbytes > 0 && (job = add_job(S, dir, strdup(name), t, NULL, 0, nbytes)) < 0) st = job;
    if (!st) st = add_mark(S, job);
  } else {
    int32_t sub = td_mm_add_dir(S, dir, strdup(name));
    *nk = (name_key){name, key};
    if (sub < 0) {
      st = sub;
    } else if (e->kind == TD_ENTRY_DICT) {
      add(entry, TD_MMF_ENTRY_TYPE, cJSON_CreateString(TD_MMF_ENTRY_TD), &ok);
      st = add_mark(S, sub);
      if (!st) st = td_mm_plan_dict(S, e->child, sub, &here, depth + 1);
    } else {
      bool stacked = false;
      st = plan_value(S, e, sub, kp, &stacked);
      add(entry, TD_MMF_ENTRY_TYPE, cJSON_CreateString(stacked ? TD_MMF_ENTRY_NTS : TD_MMF_ENTRY_NTD), &ok);
    }
  }
  if (!td_json_add(meta, key, (size_t)len, entry)) ok = false;
  if (!st && !ok) st = td_mm_oom(S);
  return st;
}

int32_t td_mm_plan_dict(td_mm_save *S, const td_dict *d, int32_t dir, const td_key_path *at,
                         int32_t depth) {
  if (depth > TD_DICT_MAX_DEPTH)
    return td_fail(TD_EINVAL, "%s: %s: nested more than %d levels deep", S->call,
                   S->dirs[dir].path, TD_DICT_MAX_DEPTH);
  int32_t n = d->keys->n, st = 0;
  name_key *nk = calloc((size_t)n + 1, sizeof *nk);
  cJSON *meta = cJSON_CreateObject();
  if (!nk || !meta) {
    free(nk), cJSON_Delete(meta);
    return td_mm_oom(S);
  }
  int32_t named = 0;
  for (int32_t i = 0; i < n && !st; i++) {
    st = plan_entry(S, d, i, dir, at, depth, meta, &nk[named]);
    if (nk[named].name) named++;
  }
  nk[named++] = (name_key){TD_MMF_META, NULL}; /* the folder's own file */
  if (!st) st = check_names(S, nk, named, S->dirs[dir].path);
  for (int32_t i = 0; i < named; i++)
    if (nk[i].key) free((char *)nk[i].name);
  free(nk);
  if (st) {
    cJSON_Delete(meta);
    return st;
  }
  /* Python: metadata.update(shape, device, _type), then setdefault of the format
   * entries (a key of that name keeps its entry), then the dim names if any. */
  bool ok = true;
  add(meta, TD_MMF_SHAPE, int_list(d->head.ndim, d->head.shape), &ok);
  add(meta, TD_MMF_DEVICE, cJSON_CreateString(TD_MMF_CPU), &ok);
  add(meta, TD_MMF_TYPE, cJSON_CreateString(TD_MM_TYPE_TD), &ok);
  if (td_dict_find(d, TD_MMF_KEY(TD_MMF_FORMAT_VERSION)) < 0)
    add(meta, TD_MMF_FORMAT_VERSION, td_json_new_int(TD_MM_FORMAT_VERSION), &ok);
  if (td_dict_find(d, TD_MMF_KEY(TD_MMF_CLASS)) < 0) add(meta, TD_MMF_CLASS, cJSON_CreateString(TD_MM_CLASS_TD), &ok);
  if (d->head.has_names && td_dict_find(d, TD_MMF_KEY(TD_MMF_NAMES)) < 0) {
    cJSON *names = cJSON_CreateArray();
    for (int32_t i = 0; names && i < d->head.ndim; i++)
      if (!cJSON_AddItemToArray(names, d->names[i] ? cJSON_CreateString(d->names[i])
                                                   : cJSON_CreateNull()))
        ok = false;
    add(meta, TD_MMF_NAMES, names, &ok);
  }
  if (!ok) {
    cJSON_Delete(meta);
    return td_mm_oom(S);
  }
  return td_mm_add_meta(S, dir, meta, false, "a dim name");
}

/* ------------------------------------------------------------------------- results */

void td_mm_save_free(td_mm_save *S) {
  for (int32_t k = 0; k < S->ndirs; k++)
    free(S->dirs[k].name), free(S->dirs[k].rel), free(S->dirs[k].path);
  for (int32_t k = 0; k < S->njobs; k++) {
    td_mm_job *j = &S->jobs[k];
    free(j->name), free(j->path), free(j->text), free(j->msg);
    td_storage_release(j->mapped);
  }
  for (int32_t k = 0; k < S->nmarks; k++) td_tensor_release(S->marks[k].t);
  free(S->dirs), free(S->jobs), free(S->marks);
}

/* The new headers of the tensor leaves (walk order), made before anything changes. */
int32_t td_mm_make_leaves(td_mm_save *S, const td_dict *d, int32_t *k) {
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_DICT) {
      (*k)++;
      int32_t st = td_mm_make_leaves(S, e->child, k);
      if (st) return st;
    } else if (e->kind == TD_ENTRY_TENSOR) {
      td_mm_mark *m = &S->marks[(*k)++];
      char why[256];
      td_storage *s = m->index >= 0 ? S->jobs[m->index].mapped : td_storage_map_fd(-1, 0, 1, why, sizeof why);
      if (!s) return td_mm_oom(S);
      m->t = td_tensor_from_storage(s, 0, e->t.ndim, e->t.shape, NULL, e->t.dtype);
      if (m->index < 0) td_storage_release(s);
      if (!m->t) return td_last_status();
    }
  }
  return 0;
}

static int32_t set_names_of(td_dict *r, const td_dict *d) {
  if (!d->head.has_names) return 0;
  const char *names[TD_MAX_DIMS] = {0};
  for (int32_t i = 0; i < d->head.ndim; i++) names[i] = d->names[i];
  return td_dict_set_names(r, names);
}

/* A new container of d's structure over the written files. */
td_dict *td_mm_build(td_mm_save *S, const td_dict *d, int32_t dir, int32_t *k) {
  td_dict *r = td_dict_new(d->head.ndim, d->head.shape);
  int32_t st = r ? 0 : td_last_status();
  if (!st) st = td_dict_set_device(r, TD_DEVICE_CPU, 0);
  if (!st) st = set_names_of(r, d);
  for (int32_t i = 0; i < d->keys->n && !st; i++) {
    const td_entry *e = &d->entries[i];
    const char *key = td_dict_key(d, i);
    int64_t len = d->keys->meta[i].len;
    if (e->kind == TD_ENTRY_TENSOR) {
      st = td_dict_set_tensor(r, key, len, S->marks[(*k)++].t);
    } else if (e->kind == TD_ENTRY_DICT) {
      int32_t sub = S->marks[(*k)++].index;
      td_dict *c = td_mm_build(S, e->child, sub, k);
      st = c ? td_dict_set_dict(r, key, len, c) : td_last_status();
      td_dict_release(c);
    } else {
      st = td_dict_copy_entry(r, key, len, d, i); /* r is a copy: it owns its values */
    }
    if (st > 0) st = 0;
  }
  if (!st) st = td_dict_set_prefix(r, S->dirs[dir].path);
  if (st < 0) {
    td_dict_release(r);
    return NULL;
  }
  return r;
}

/* d's tensor leaves swapped for the written ones, in place. A pinned leaf's old storage
 * is retired (views of it stay valid) and the entry stays pinned. */
static void swap_leaves(td_mm_save *S, td_dict *d, int32_t dir, int32_t *k) {
  for (int32_t i = 0; i < d->keys->n; i++) {
    td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_DICT) {
      int32_t sub = S->marks[(*k)++].index;
      swap_leaves(S, e->child, sub, k);
    } else if (e->kind == TD_ENTRY_TENSOR) {
      td_mm_mark *m = &S->marks[(*k)++];
      int32_t pinned = e->pinned;
      td_entry_clear(d, e);
      e->kind = TD_ENTRY_TENSOR;
      td_take_owned(&e->t, m->t);
      m->t = NULL;
      e->pinned = pinned;
    }
  }
  td_dict_set_prefix(d, S->dirs[dir].path); /* a failed strdup keeps the old prefix */
  td_dict_touch(d);
}

char *td_mm_clean_prefix(const char *call, const char *prefix) {
  if (!prefix || !*prefix) return td_fail_null(TD_EINVAL, "%s: the prefix is empty", call);
  char *p = strdup(prefix);
  if (!p) return td_fail_null(TD_ENOMEM, "%s: out of memory", call);
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
  const char *slash = strrchr(p, '/'), *name = slash ? slash + 1 : p;
  if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
    td_fail(TD_EINVAL, "%s: '%s' does not name a folder", call, prefix);
    free(p);
    return NULL;
  }
  return p;
}

int32_t td_mm_plan(td_mm_save *S, const td_dict *d, const char *prefix) {
  char *root_path = strdup(prefix), *root_rel = strdup(".");
  int32_t st = root_path && root_rel ? 0 : td_mm_oom(S);
  bool ok = true;
  if (!st) GROW(S->dirs, S->ndirs, S->dcap, ok);
  if (!st && !ok) st = td_mm_oom(S);
  if (!st) {
    S->dirs[S->ndirs++] = (td_mm_dir){-1, NULL, root_rel, root_path};
    root_path = root_rel = NULL;
    st = d ? td_mm_plan_dict(S, d, 0, NULL, 0) : 0; /* NULL: the root folder only */
  }
  free(root_path), free(root_rel);
  return st;
}

/* Plans and writes d under prefix; S holds the mapped files afterwards. */
static int32_t save(td_mm_save *S, const td_dict *d, const char *prefix, int32_t num_threads) {
  if (!d) return td_fail(TD_EINVAL, "%s: the TensorDict is NULL", S->call);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
  return td_fail(TD_EINVAL, "%s: the memmap layout is little-endian; this host is not", S->call);
#endif
  if (S->flags & ~(TD_MEMMAP_EXISTSOK | TD_MEMMAP_NO_FSYNC))
    return td_fail(TD_EINVAL, "%s: unknown flags %d", S->call, (int)S->flags);
  char *p = td_mm_clean_prefix(S->call, prefix);
  if (!p) return td_last_status();
  int32_t st = td_mm_plan(S, d, p);
  if (!st) st = td_mm_write(S, p, num_threads);
  int32_t k = 0;
  if (!st) st = td_mm_make_leaves(S, d, &k);
  free(p);
  return st;
}

static td_dict *save_new(const char *call, const td_dict *d, const char *prefix, int32_t flags,
                         int32_t num_threads, bool like) {
  td_mm_save S = {.call = call, .flags = flags, .like = like, .rootfd = -1};
  td_dict *r = NULL;
  if (save(&S, d, prefix, num_threads) == 0) {
    int32_t k = 0;
    if ((r = td_mm_build(&S, d, 0, &k))) td_dict_set_locked(r, 1);
  }
  td_mm_save_free(&S);
  return r;
}

TD_EXPORT td_dict *td_dict_memmap(const td_dict *d, const char *prefix, int32_t flags,
                                  int32_t num_threads) {
  return save_new("memmap", d, prefix, flags, num_threads, false);
}

TD_EXPORT td_dict *td_dict_memmap_like(const td_dict *d, const char *prefix, int32_t flags,
                                       int32_t num_threads) {
  return save_new("memmap_like", d, prefix, flags, num_threads, true);
}

TD_EXPORT int32_t td_dict_memmap_(td_dict *d, const char *prefix, int32_t flags,
                                  int32_t num_threads) {
  td_mm_save S = {.call = "memmap_", .flags = flags, .rootfd = -1};
  int32_t st = save(&S, d, prefix, num_threads);
  if (!st) {
    int32_t k = 0;
    swap_leaves(&S, d, 0, &k);
    td_dict_set_device(d, TD_DEVICE_CPU, 0); /* every leaf is a CPU mapping now */
    td_dict_set_locked(d, 1);                /* as Python's memmap_ locks */
  }
  td_mm_save_free(&S);
  return st;
}

/* ------------------------------------------------------------------------------ sync */

static int32_t sync_dict(td_dict *d, const td_key_path *at) {
  for (int32_t i = 0; i < d->keys->n; i++) {
    td_entry *e = &d->entries[i];
    td_key_path here = {at, td_dict_key(d, i)};
    if (e->kind == TD_ENTRY_DICT) {
      int32_t st = sync_dict(e->child, &here);
      if (st) return st;
    } else if (e->kind == TD_ENTRY_TENSOR && e->t.storage &&
               e->t.storage->kind == TD_STORAGE_FILE) {
      int32_t st = td_storage_sync(e->t.storage);
      if (st) return td_dict_fail_at(st, "sync", &here);
    }
  }
  return 0;
}

TD_EXPORT int32_t td_dict_sync(td_dict *d) {
  if (!d) return td_fail(TD_EINVAL, "sync: the TensorDict is NULL");
  return sync_dict(d, NULL);
}
