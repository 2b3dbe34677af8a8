/*
 * consolidate_load.c: td_dict_from_consolidated: a file in Python tensordict's
 * consolidated layout (consolidate.h) mapped back into a container, whoever wrote
 * it (this library or Python). The leaves are views of one mapping of the file.
 *
 * Nothing in the file is trusted: every field is validated before use, and errors name
 * the file and the field ("b.leaves.c"). A container loads in Python's order (load_level):
 * its own metadata is read and checked first, before any work; then its non-tensor
 * values, its leaves and its children (nested containers and NonTensorStacks) are
 * loaded; names, device and lock are applied last.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "consolidate.h"

/* ---- the JSON nodes ---- */

/* The metadata is read by the JSON layer (core/src/json.h); what the reader needs of
 * its nodes, by name. */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* A member's key: its bytes and length (keys may hold NUL bytes). */
typedef struct jkey {
  const char *s;
  size_t n;
} jkey;

static jkey key_of(const cJSON *member) {
  jkey k = {"", 0};
  const char *s = td_json_key_of(member, &k.n);
  if (s) k.s = s;
  return k;
}

/* A string node holding exactly the C string text (no NUL inside). */
static bool is_text(const cJSON *v, const char *text) {
  size_t n;
  const char *s = cJSON_IsString(v) ? td_json_text_of(v, &n) : NULL;
  return s && n == strlen(text) && memcmp(s, text, n) == 0;
}

/* A string node whose bytes hold no NUL (a C string as it is). */
static bool is_plain_string(const cJSON *v) {
  size_t n;
  const char *s = cJSON_IsString(v) ? td_json_text_of(v, &n) : NULL;
  return s && strlen(s) == n;
}


/* ---- the load, its errors and the checked fields ---- */

typedef struct rctx {
  const char *file;
  td_storage *s;
  int64_t payload; /* bytes before the metadata */
} rctx;

enum { WHERE_CHARS = TD_PATH_CHARS + 64 };

static int32_t rfail(const rctx *r, int32_t status, const char *where, const char *fmt, ...)
    TD_PRINTF(4, 5);
static int32_t rfail(const rctx *r, int32_t status, const char *where, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return td_fail(status, "from_consolidated: '%s': %s%s%s", r->file, where, *where ? ": " : "",
                 msg);
}

/* where = prefix + field (+ key): "b.leaves.c". */
static const char *where_of(char *out, const char *prefix, const char *field, const char *key) {
  /* a long path is cut: it only names a place in a message (the result is used, so gcc
   * knows the cut is meant) */
  if (snprintf(out, WHERE_CHARS, "%s%s%s%s", prefix, field, key ? "." : "", key ? key : "") < 0)
    out[0] = '\0';
  return out;
}

static int32_t get_int(const rctx *r, const char *where, const char *what, const cJSON *v,
                       int64_t *out) {
  if (!v) return rfail(r, TD_EINVAL, where, "%s is missing", what);
  if (!cJSON_IsNumber(v))
    return rfail(r, TD_EINVAL, where, "%s must be an integer, got %s", what,
                 td_json_kind_name(v));
  int kind = td_json_int64(v, out);
  if (kind == 1) return 0;
  size_t n = 0;
  const char *lit = td_json_text_of(v, &n);
  if (!lit) lit = "?", n = 1;
  if (kind < 0)
    return rfail(r, TD_EINVAL, where, "%s %.*s does not fit in 64 bits", what, (int)n, lit);
  return rfail(r, TD_EINVAL, where, "%s must be an integer, got %.*s", what, (int)n, lit);
}

/* A list of sizes: at most TD_MAX_DIMS, none negative, the element count within
 * int64 as bytes of the widest dtype. */
static int32_t get_shape(const rctx *r, const char *where, const char *what, const cJSON *v,
                         int32_t *ndim, int64_t *shape) {
  if (!v) return rfail(r, TD_EINVAL, where, "%s is missing", what);
  if (!cJSON_IsArray(v))
    return rfail(r, TD_ESHAPE, where, "%s must be a list of sizes, got %s", what,
                 td_json_kind_name(v));
  int32_t n = cJSON_GetArraySize(v);
  if (n > TD_MAX_DIMS)
    return rfail(r, TD_ESHAPE, where, "%s has %d dims, at most %d are supported", what, (int)n,
                 TD_MAX_DIMS);
  int64_t numel = 1;
  const cJSON *x = v->child;
  for (int32_t k = 0; k < n; k++, x = x->next) {
    int32_t st = get_int(r, where, what, x, &shape[k]);
    if (st) return st;
    if (shape[k] < 0)
      return rfail(r, TD_ESHAPE, where, "%s has a negative size %lld", what,
                   (long long)shape[k]);
  }
  for (int32_t k = 0; k < n; k++)
    if (__builtin_mul_overflow(numel, shape[k], &numel) || numel > INT64_MAX / 8) {
      char s[TD_SHAPE_STR];
      return rfail(r, TD_ESHAPE, where, "%s %s has too many elements", what,
                   td_format_shape(s, sizeof s, n, shape));
    }
  *ndim = n;
  return 0;
}

static bool starts_with(int32_t ndim, const int64_t *shape, int32_t bndim,
                        const int64_t *batch) {
  if (ndim < bndim) return false;
  for (int32_t k = 0; k < bndim; k++)
    if (shape[k] != batch[k]) return false;
  return true;
}

static int32_t check_leading(const rctx *r, const char *where, const char *what, int32_t ndim,
                             const int64_t *shape, const td_dict *d) {
  if (starts_with(ndim, shape, d->head.ndim, d->head.shape)) return 0;
  char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
  return rfail(r, TD_ESHAPE, where, "%s %s does not start with the batch size %s", what,
               td_format_shape(a, sizeof a, ndim, shape),
               td_format_shape(b, sizeof b, d->head.ndim, d->head.shape));
}

static int32_t check_new_key(const rctx *r, const char *where, const td_dict *d, jkey key) {
  if (td_dict_find(d, key.s, (int64_t)key.n) >= 0)
    return rfail(r, TD_EINVAL, where, "the key appears twice in the container");
  return 0;
}

/* "cpu", "cuda", "cuda:N" or null. */
static int32_t get_device(const rctx *r, const char *where, const cJSON *v, int32_t *type,
                          int32_t *index) {
  *type = TD_DEVICE_NONE;
  *index = 0;
  if (!v || cJSON_IsNull(v)) return 0;
  if (!cJSON_IsString(v))
    return rfail(r, TD_EINVAL, where, "device must be a string or null, got %s",
                 td_json_kind_name(v));
  if (is_text(v, "cpu")) {
    *type = TD_DEVICE_CPU;
    return 0;
  }
  if (strncmp(v->valuestring, "cuda", 4) == 0 && is_plain_string(v)) {
    const char *q = v->valuestring + 4;
    long idx = 0;
    if (*q == ':') {
      q++;
      if (!is_digit(*q) || strlen(q) > 6) q = "x";
      for (; is_digit(*q); q++) idx = idx * 10 + (*q - '0');
    }
    if (*q == '\0') {
      *type = TD_DEVICE_CUDA;
      *index = (int32_t)idx;
      return 0;
    }
  }
  return rfail(r, TD_EINVAL, where, "unknown device '%s'", v->valuestring);
}

/* [data, batch_size, device] (Python also reads [data, batch_size]): the data's text
 * and its batch size. */
static int32_t get_non_tensor(const rctx *r, const char *where, const cJSON *v, char **text,
                              int32_t *ndim, int64_t *shape) {
  int32_t n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
  if (n < 2 || n > 3)
    return rfail(r, TD_EINVAL, where, "a non-tensor entry must be [data, batch_size, device]");
  const cJSON *data = v->child;
  int32_t st = get_shape(r, where, "batch_size", data->next, ndim, shape);
  int32_t type, index;
  if (!st && n == 3) st = get_device(r, where, data->next->next, &type, &index);
  if (st) return st;
  bool bad_utf8;
  if (!(*text = td_json_print(data, TD_JSON_COMPACT, NULL, &bad_utf8)))
    return rfail(r, TD_ENOMEM, where, "out of memory");
  return 0;
}

/* ---- a NonTensorStack into texts and positions ---- */

typedef struct stack_load {
  char **texts;
  int64_t n, cap;
  int64_t *table; /* open addressing: text index + 1, 0 empty */
  int64_t table_cap;
  int64_t *pos; /* contiguous over the container's batch */
} stack_load;

/* The index of text among the stack's texts (taking it, or freeing a duplicate). */
static int64_t intern_text(stack_load *k, char *text) {
  if (2 * (k->n + 1) > k->table_cap) {
    int64_t cap = k->table_cap ? 2 * k->table_cap : 16;
    int64_t *table = calloc((size_t)cap, sizeof *table);
    if (!table) return free(text), -1;
    for (int64_t j = 0; j < k->n; j++) {
      int64_t s = (int64_t)(td_py_text_hash(k->texts[j]) & (uint64_t)(cap - 1));
      while (table[s]) s = (s + 1) & (cap - 1);
      table[s] = j + 1;
    }
    free(k->table);
    k->table = table;
    k->table_cap = cap;
  }
  int64_t s = (int64_t)(td_py_text_hash(text) & (uint64_t)(k->table_cap - 1));
  for (; k->table[s]; s = (s + 1) & (k->table_cap - 1))
    if (strcmp(k->texts[k->table[s] - 1], text) == 0) {
      free(text);
      return k->table[s] - 1;
    }
  if (k->n == k->cap) {
    int64_t cap = k->cap ? 2 * k->cap : 8;
    char **texts = realloc(k->texts, sizeof *texts * (size_t)cap);
    if (!texts) return free(text), -1;
    k->texts = texts;
    k->cap = cap;
  }
  k->texts[k->n] = text;
  k->table[s] = k->n + 1;
  return k->n++;
}

static void fill_block(int64_t *pos, int64_t off, int32_t nd, const int64_t *shape,
                       const int64_t *strides, int64_t value) {
  int64_t idx[TD_MAX_DIMS] = {0};
  for (int32_t k = 0; k < nd; k++)
    if (shape[k] == 0) return;
  for (;;) {
    int64_t o = off;
    for (int32_t k = 0; k < nd; k++) o += idx[k] * strides[k];
    pos[o] = value;
    int32_t k = nd - 1;
    while (k >= 0 && ++idx[k] == shape[k]) idx[k--] = 0;
    if (k < 0) return;
  }
}

/* "0", "1", ... as an element index below n, or -1. */
static int64_t element_index(jkey key, int64_t n) {
  if (key.n == 0 || key.n > 18 || (key.n > 1 && key.s[0] == '0')) return -1;
  int64_t v = 0;
  for (size_t k = 0; k < key.n; k++) {
    if (!is_digit(key.s[k])) return -1;
    v = v * 10 + (key.s[k] - '0');
  }
  return v < n ? v : -1;
}

/* A NonTensorStack's own fields, checked: its non_tensors object and the dim it stacks
 * along among the nd dims of its block. */
static int32_t stack_fields(const rctx *r, const cJSON *m, const char *where, int32_t nd,
                            const cJSON **nt_out, int32_t *sd_out) {
  char w2[WHERE_CHARS];
  if (!cJSON_IsObject(m))
    return rfail(r, TD_EINVAL, where, "a NonTensorStack must be an object, got %s",
                 td_json_kind_name(m));
  const cJSON *cls = td_json_get(m, "cls"), *nt = td_json_get(m, "non_tensors"),
              *leaves = td_json_get(m, "leaves"), *cm = td_json_get(m, "cls_metadata");
  if (!cls || !cJSON_IsString(cls) || strcmp(cls->valuestring, "NonTensorStack") != 0)
    return rfail(r, TD_EINVAL, where_of(w2, where, ".cls", NULL),
                 "an element of a NonTensorStack must be a NonTensorStack or non-tensor data");
  if (!cJSON_IsObject(nt))
    return rfail(r, TD_EINVAL, where_of(w2, where, ".non_tensors", NULL), "must be an object");
  if (!cJSON_IsObject(leaves) || leaves->child)
    return rfail(r, TD_EINVAL, where_of(w2, where, ".leaves", NULL),
                 "a NonTensorStack holds no tensors: must be {}");
  if (!cJSON_IsObject(cm))
    return rfail(r, TD_EINVAL, where_of(w2, where, ".cls_metadata", NULL), "must be an object");
  where_of(w2, where, ".cls_metadata.stack_dim", NULL);
  int64_t sd;
  int32_t st = get_int(r, w2, "stack_dim", td_json_get(cm, "stack_dim"), &sd);
  if (st) return st;
  if (nd == 0)
    return rfail(r, TD_ESHAPE, where, "a NonTensorStack needs a batch dim to stack along");
  if (sd < 0) sd += nd;
  if (sd < 0 || sd >= nd)
    return rfail(r, TD_EINDEX, w2, "stack_dim is outside the %d batch dims", (int)nd);
  *nt_out = nt;
  *sd_out = (int32_t)sd;
  return 0;
}

/* The elements of a stack of n by their keys "0", "1", ...: data[e] from non_tensors,
 * kids[e] (a nested stack) from the object's other members; each given once. */
static int32_t stack_elements(const rctx *r, const cJSON *m, const cJSON *nt,
                              const char *where, int64_t n, const cJSON **data,
                              const cJSON **kids) {
  char w2[WHERE_CHARS];
  int32_t st = 0;
  for (const cJSON *c = nt->child; c && !st; c = c->next) {
    int64_t e = element_index(key_of(c), n);
    if (e < 0 || data[e])
      st = rfail(r, TD_EINDEX, where_of(w2, where, ".non_tensors", key_of(c).s),
                 "not an element of a stack of %lld (or given twice)", (long long)n);
    else
      data[e] = c;
  }
  for (const cJSON *c = m->child; c && !st; c = c->next) {
    jkey key = key_of(c);
    if (td_cons_reserved_key(key.s, key.n)) continue;
    int64_t e = element_index(key, n);
    if (e < 0 || data[e] || kids[e]) {
      snprintf(w2, sizeof w2, "%s.%s", where, key.s);
      st = rfail(r, TD_EINDEX, w2, "not an element of a stack of %lld (or given twice)",
                 (long long)n);
    } else {
      kids[e] = c;
    }
  }
  return st;
}

/* One element given as data ([data, batch_size, device]) over the block (off, nd,
 * shape, strides): its text interned, its positions filled. */
static int32_t stack_element_data(const rctx *r, stack_load *k, const cJSON *v,
                                  const char *where, int64_t off, int32_t nd,
                                  const int64_t *shape, const int64_t *strides) {
  char *text;
  int32_t bnd;
  int64_t bshape[TD_MAX_DIMS];
  int32_t st = get_non_tensor(r, where, v, &text, &bnd, bshape);
  if (st) return st;
  bool same = bnd == nd;
  for (int32_t j = 0; same && j < nd; j++) same = bshape[j] == shape[j];
  if (!same) {
    free(text);
    char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
    return rfail(r, TD_ESHAPE, where, "batch_size %s is not the element's %s",
                 td_format_shape(a, sizeof a, bnd, bshape),
                 td_format_shape(b, sizeof b, nd, shape));
  }
  int64_t idx = intern_text(k, text);
  if (idx < 0) return rfail(r, TD_ENOMEM, where, "out of memory");
  fill_block(k->pos, off, nd, shape, strides, idx);
  return 0;
}

/* Fills the block (off, nd, shape, strides) of the positions from a NonTensorStack. */
static int32_t load_stack(const rctx *r, stack_load *k, const cJSON *m, const char *where,
                          int64_t off, int32_t nd, const int64_t *shape,
                          const int64_t *strides) {
  const cJSON *nt = NULL;
  int32_t sd = 0;
  int32_t st = stack_fields(r, m, where, nd, &nt, &sd);
  if (st) return st;
  int64_t n = shape[sd];
  const cJSON **data = calloc((size_t)(n ? n : 1), sizeof *data);
  const cJSON **kids = calloc((size_t)(n ? n : 1), sizeof *kids);
  if (!data || !kids) {
    free(data), free(kids);
    return rfail(r, TD_ENOMEM, where, "out of memory");
  }
  st = stack_elements(r, m, nt, where, n, data, kids);
  /* an element's block: the stack's without the stack dim */
  int32_t snd = nd - 1;
  int64_t sshape[TD_MAX_DIMS], sstrides[TD_MAX_DIMS];
  for (int32_t j = 0, o = 0; j < nd; j++)
    if (j != sd) sshape[o] = shape[j], sstrides[o++] = strides[j];
  for (int64_t e = 0; e < n && !st; e++) {
    char key[24], w2[WHERE_CHARS];
    snprintf(key, sizeof key, "%lld", (long long)e);
    int64_t eoff = off + e * strides[sd];
    if (kids[e]) {
      if (snprintf(w2, sizeof w2, "%s.%s", where, key) < 0) w2[0] = '\0'; /* a message's place */
      st = load_stack(r, k, kids[e], w2, eoff, snd, sshape, sstrides);
    } else if (!data[e]) {
      st = rfail(r, TD_EINVAL, where, "element %lld of the stack is missing", (long long)e);
    } else {
      st = stack_element_data(r, k, data[e], where_of(w2, where, ".non_tensors", key), eoff,
                              snd, sshape, sstrides);
    }
  }
  free(data);
  free(kids);
  return st;
}

/* The elements of a NonTensorStack at the top of its own block: its non_tensors members
 * and its nested stacks. */
static int64_t stack_count(const cJSON *m) {
  int64_t n = 0;
  const cJSON *nt = td_json_get(m, "non_tensors");
  for (const cJSON *c = cJSON_IsObject(nt) ? nt->child : NULL; c; c = c->next) n++;
  for (const cJSON *c = cJSON_IsObject(m) ? m->child : NULL; c; c = c->next) {
    jkey key = key_of(c);
    if (!td_cons_reserved_key(key.s, key.n)) n++;
  }
  return n;
}

/* A NonTensorStack in a container of batch size [] (Python allows it: the stack has a
 * batch dim of its own) is the list of its elements, as the memmap loader reads the
 * same container: a plain value, [e0, e1, ...]. */
static int32_t load_stack_as_list(const rctx *r, td_dict *d, jkey key, const cJSON *m,
                                  const char *where) {
  int64_t n = stack_count(m), one = 1;
  stack_load k = {0};
  td_tensor *pos = td_tensor_empty(1, &n, TD_INT64);
  if (!pos) return rfail(r, td_last_status(), where, "%s", td_last_error());
  k.pos = td_tensor_data_borrow(pos);
  int32_t st = load_stack(r, &k, m, where, 0, 1, &n, &one);
  td_sbuf list = {0};
  td_sb_putc(&list, '[');
  for (int64_t e = 0; !st && e < n; e++) {
    if (e) td_sb_putc(&list, ',');
    td_sb_puts(&list, k.texts[k.pos[e]]);
  }
  td_sb_putc(&list, ']');
  td_sb_putc(&list, '\0');
  if (!st && list.oom) st = rfail(r, TD_ENOMEM, where, "out of memory");
  if (!st && td_dict_set_value(d, key.s, (int64_t)key.n, list.p) < 0)
    st = rfail(r, td_last_status(), where, "%s", td_last_error());
  free(list.p);
  for (int64_t j = 0; j < k.n; j++) free(k.texts[j]);
  free(k.texts);
  free(k.table);
  td_tensor_release(pos);
  return st;
}

static int32_t load_stacked_entry(const rctx *r, td_dict *d, jkey key, const cJSON *m,
                                  const char *where) {
  if (d->head.ndim == 0) return load_stack_as_list(r, d, key, m, where);
  stack_load k = {0};
  td_tensor *pos = td_tensor_empty(d->head.ndim, d->head.shape, TD_INT64);
  if (!pos) return rfail(r, td_last_status(), where, "%s", td_last_error());
  k.pos = td_tensor_data_borrow(pos);
  int64_t strides[TD_MAX_DIMS];
  for (int32_t j = 0; j < pos->ndim; j++) strides[j] = pos->strides[j];
  int32_t st = load_stack(r, &k, m, where, 0, d->head.ndim, d->head.shape, strides);
  if (!st && td_dict_set_values(d, key.s, (int64_t)key.n, k.n,
                                (const char *const *)k.texts, pos) < 0)
    st = rfail(r, td_last_status(), where, "%s", td_last_error());
  for (int64_t j = 0; j < k.n; j++) free(k.texts[j]);
  free(k.texts);
  free(k.table);
  td_tensor_release(pos);
  return st;
}

/* ---- containers ---- */

static int32_t load_leaf(const rctx *r, td_dict *d, jkey key, const cJSON *v,
                         const char *where) {
  int32_t n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
  if ((key.n >= 4 && memcmp(key.s, "<NJT", 4) == 0) || n == 6)
    return rfail(r, TD_EINVAL, where, "nested (jagged) tensors are not supported");
  if (n != 5) return rfail(r, TD_EINVAL, where, "a leaf must be [dtype, shape, start, stop, pad]");
  const cJSON *dt = v->child;
  if (!cJSON_IsString(dt)) return rfail(r, TD_EDTYPE, where, "dtype must be a string");
  /* a name with a NUL inside (\u0000) names no dtype */
  int32_t dtype = is_plain_string(dt) ? td_py_dtype_from_name(dt->valuestring) : -1;
  if (dtype < 0) return rfail(r, TD_EDTYPE, where, "unknown dtype '%s'", dt->valuestring);
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS], start, stop, pad;
  const cJSON *f = dt->next; /* shape, start, stop, pad */
  int32_t st = get_shape(r, where, "shape", f, &ndim, shape);
  if (!st) st = check_leading(r, where, "shape", ndim, shape, d);
  if (!st) st = get_int(r, where, "start", f = f->next, &start);
  if (!st) st = get_int(r, where, "stop", f = f->next, &stop);
  if (!st) st = get_int(r, where, "pad", f->next, &pad);
  if (st) return st;
  int64_t itemsize = td_itemsizes[dtype], numel = 1;
  for (int32_t k = 0; k < ndim; k++) numel *= shape[k];
  int64_t nbytes = numel * itemsize;
  if (start < 0 || stop < start || stop > r->payload)
    return rfail(r, TD_EINDEX, where, "bytes [%lld, %lld) are not inside the payload of %lld bytes",
                 (long long)start, (long long)stop, (long long)r->payload);
  if (pad < 0) return rfail(r, TD_EINVAL, where, "pad %lld is negative", (long long)pad);
  if (stop - start < nbytes || (pad == 0 && stop - start != nbytes)) {
    char s[TD_SHAPE_STR];
    return rfail(r, TD_ESHAPE, where,
                 "bytes [%lld, %lld) (pad %lld) do not hold a %s %s leaf of %lld bytes",
                 (long long)start, (long long)stop, (long long)pad, dt->valuestring,
                 td_format_shape(s, sizeof s, ndim, shape), (long long)nbytes);
  }
  if (start % itemsize)
    return rfail(r, TD_EINVAL, where, "start %lld is not a multiple of the %s item size %lld",
                 (long long)start, dt->valuestring, (long long)itemsize);
  if ((st = check_new_key(r, where, d, key))) return st;
  td_tensor *t = td_tensor_from_storage(r->s, start / itemsize, ndim, shape, NULL, dtype);
  if (!t) return rfail(r, td_last_status(), where, "%s", td_last_error());
  if (td_dict_set_tensor(d, key.s, (int64_t)key.n, t) < 0)
    st = rfail(r, td_last_status(), where, "%s", td_last_error());
  td_tensor_release(t);
  return st;
}

/* A container's metadata object, read and checked before anything is built. */
typedef struct level {
  const cJSON *cls_metadata, *non_tensors, *leaves, *names, *locked;
  int32_t ndim;
  int64_t batch[TD_MAX_DIMS];
  int32_t dev_type, dev_index;
} level;

/* Step 1: m is an object of class TensorDict with the objects cls_metadata,
 * non_tensors and leaves. */
static int32_t check_level_object(const rctx *r, const cJSON *m, const char *prefix,
                                  level *L) {
  char where[WHERE_CHARS];
  snprintf(where, sizeof where, "%.*s", prefix[0] ? (int)strlen(prefix) - 1 : 0, prefix);
  if (!cJSON_IsObject(m))
    return rfail(r, TD_EINVAL, where[0] ? where : "metadata",
                 "a TensorDict's metadata must be an object, got %s", td_json_kind_name(m));
  const cJSON *cls = td_json_get(m, "cls");
  if (!cJSON_IsString(cls))
    return rfail(r, TD_EINVAL, where_of(where, prefix, "cls", NULL), "must be a class name");
  if (!is_text(cls, "TensorDict"))
    return rfail(
        r, TD_EINVAL, where_of(where, prefix, "cls", NULL),
        "class '%s' is not supported (TensorDict, or NonTensorStack for a non-tensor entry)",
        cls->valuestring);
  L->cls_metadata = td_json_get(m, "cls_metadata");
  L->non_tensors = td_json_get(m, "non_tensors");
  L->leaves = td_json_get(m, "leaves");
  if (!cJSON_IsObject(L->cls_metadata))
    return rfail(r, TD_EINVAL, where_of(where, prefix, "cls_metadata", NULL), "must be an object");
  if (!cJSON_IsObject(L->non_tensors))
    return rfail(r, TD_EINVAL, where_of(where, prefix, "non_tensors", NULL), "must be an object");
  if (!cJSON_IsObject(L->leaves))
    return rfail(r, TD_EINVAL, where_of(where, prefix, "leaves", NULL), "must be an object");
  return 0;
}

/* Step 2: cls_metadata: the batch size (within the parent's), then names, lock and
 * device, read now so their errors come before any work and applied last (step 6). */
static int32_t read_cls_metadata(const rctx *r, const char *prefix, const td_dict *parent,
                                 level *L) {
  const cJSON *cm = L->cls_metadata;
  char where[WHERE_CHARS];
  where_of(where, prefix, "cls_metadata.batch_size", NULL);
  int32_t st = get_shape(r, where, "batch_size", td_json_get(cm, "batch_size"), &L->ndim,
                         L->batch);
  if (st) return st;
  if (parent && !starts_with(L->ndim, L->batch, parent->head.ndim, parent->head.shape)) {
    char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
    return rfail(r, TD_ESHAPE, where, "%s does not start with the parent's batch size %s",
                 td_format_shape(a, sizeof a, L->ndim, L->batch),
                 td_format_shape(b, sizeof b, parent->head.ndim, parent->head.shape));
  }
  L->names = td_json_get(cm, "names");
  L->locked = td_json_get(cm, "is_locked");
  where_of(where, prefix, "cls_metadata.names", NULL);
  if (L->names && !cJSON_IsNull(L->names)) {
    if (!cJSON_IsArray(L->names) || cJSON_GetArraySize(L->names) != L->ndim)
      return rfail(r, TD_EINVAL, where, "must be a list of %d names or nulls", (int)L->ndim);
    int32_t k = 0;
    for (const cJSON *x = L->names->child; x; x = x->next, k++)
      if (!cJSON_IsNull(x) && !is_plain_string(x))
        return rfail(r, TD_EINVAL, where, "name %d must be a string or null", (int)k);
  }
  where_of(where, prefix, "cls_metadata.is_locked", NULL);
  if (L->locked && !cJSON_IsBool(L->locked))
    return rfail(r, TD_EINVAL, where, "must be true or false, got %s",
                 td_json_kind_name(L->locked));
  where_of(where, prefix, "cls_metadata.device", NULL);
  return get_device(r, where, td_json_get(cm, "device"), &L->dev_type, &L->dev_index);
}

/* Step 3: the non-tensor values, each [data, batch_size, device]. */
static int32_t load_non_tensors(const rctx *r, td_dict *d, const cJSON *nt,
                                const char *prefix) {
  char where[WHERE_CHARS];
  int32_t st = 0;
  for (const cJSON *c = nt->child; c && !st; c = c->next) {
    jkey key = key_of(c);
    where_of(where, prefix, "non_tensors", key.s);
    char *text = NULL;
    int32_t bnd;
    int64_t bshape[TD_MAX_DIMS];
    st = check_new_key(r, where, d, key);
    if (!st) st = get_non_tensor(r, where, c, &text, &bnd, bshape);
    if (!st) st = check_leading(r, where, "batch_size", bnd, bshape, d);
    if (!st && td_dict_set_value(d, key.s, (int64_t)key.n, text) < 0)
      st = rfail(r, td_last_status(), where, "%s", td_last_error());
    free(text);
  }
  return st;
}

/* Step 4: the leaves, views of the mapped payload. */
static int32_t load_leaves(const rctx *r, td_dict *d, const cJSON *leaves,
                           const char *prefix) {
  char where[WHERE_CHARS];
  int32_t st = 0;
  for (const cJSON *c = leaves->child; c && !st; c = c->next)
    st = load_leaf(r, d, key_of(c), c, where_of(where, prefix, "leaves", key_of(c).s));
  return st;
}

static int32_t load_level(const rctx *r, const cJSON *m, const char *prefix,
                          const td_dict *parent, td_dict **out);

/* Step 5: the children, every member that is not one of the container's own fields:
 * NonTensorStacks (stacked values) and nested containers. */
static int32_t load_children(const rctx *r, td_dict *d, const cJSON *m, const char *prefix) {
  char where[WHERE_CHARS];
  int32_t st = 0;
  for (const cJSON *child = m->child; child && !st; child = child->next) {
    jkey key = key_of(child);
    if (td_cons_reserved_key(key.s, key.n)) continue;
    where_of(where, prefix, key.s, NULL);
    if ((st = check_new_key(r, where, d, key))) break;
    const cJSON *ccls = cJSON_IsObject(child) ? td_json_get(child, "cls") : NULL;
    if (cJSON_IsString(ccls) && strcmp(ccls->valuestring, "NonTensorStack") == 0) {
      st = load_stacked_entry(r, d, key, child, where);
      continue;
    }
    char child_prefix[WHERE_CHARS + 2];
    snprintf(child_prefix, sizeof child_prefix, "%s.", where);
    td_dict *c;
    if ((st = load_level(r, child, child_prefix, d, &c))) break;
    if (td_dict_set_dict(d, key.s, (int64_t)key.n, c) < 0)
      st = rfail(r, td_last_status(), where, "%s", td_last_error());
    td_dict_release(c);
  }
  return st;
}

/* Step 6: the names, device and lock step 2 read. */
static int32_t apply_cls_metadata(const rctx *r, td_dict *d, const level *L,
                                  const char *prefix) {
  char where[WHERE_CHARS];
  if (cJSON_IsArray(L->names)) {
    const char *list[TD_MAX_DIMS] = {0};
    bool any = false;
    int32_t k = 0;
    for (const cJSON *x = L->names->child; x; x = x->next, k++)
      if (cJSON_IsString(x)) list[k] = x->valuestring, any = true;
    if (any && td_dict_set_names(d, list) != 0)
      return rfail(r, td_last_status(), where_of(where, prefix, "cls_metadata.names", NULL),
                   "%s", td_last_error());
  }
  if (L->dev_type != TD_DEVICE_NONE && td_dict_set_device(d, L->dev_type, L->dev_index) != 0)
    return rfail(r, td_last_status(), where_of(where, prefix, "cls_metadata.device", NULL),
                 "%s", td_last_error());
  if (cJSON_IsTrue(L->locked)) td_dict_set_locked(d, 1);
  return 0;
}

/* The metadata object m (a TensorDict) into a new container *out, in Python's order:
 * the container's own fields checked (steps 1-2), then its non-tensor values, leaves
 * and children (3-5), then names, device and lock applied (6). prefix names it in
 * messages ("" at the top, "b." for the child b). */
static int32_t load_level(const rctx *r, const cJSON *m, const char *prefix,
                          const td_dict *parent, td_dict **out) {
  level L = {0};
  int32_t st = check_level_object(r, m, prefix, &L);
  if (!st) st = read_cls_metadata(r, prefix, parent, &L);
  if (st) return st;
  td_dict *d = td_dict_new(L.ndim, L.batch);
  if (!d) {
    char where[WHERE_CHARS];
    return rfail(r, td_last_status(), where_of(where, prefix, "cls_metadata.batch_size", NULL),
                 "%s", td_last_error());
  }
  st = load_non_tensors(r, d, L.non_tensors, prefix);
  if (!st) st = load_leaves(r, d, L.leaves, prefix);
  if (!st) st = load_children(r, d, m, prefix);
  if (!st) st = apply_cls_metadata(r, d, &L, prefix);
  if (st) {
    td_dict_release(d);
    return st;
  }
  *out = d;
  return 0;
}

/* A lazy stack's root m (Python's LazyStackedTensorDict: the members under "0", "1",
 * ... in order, the stack dim in cls_metadata) into a container of batch size [] whose
 * entries "0", "1", ... are the members; *stack_dim its dim. */
static int32_t load_lazy_root(const rctx *r, const cJSON *m, td_dict **out, int32_t *stack_dim) {
  const cJSON *cm = td_json_get(m, "cls_metadata");
  const cJSON *sd = cJSON_IsObject(cm) ? td_json_get(cm, "stack_dim") : NULL;
  int64_t dim;
  if (!sd || td_json_int64(sd, &dim) != 1 || dim < 0 || dim >= TD_MAX_DIMS)
    return rfail(r, TD_EINVAL, "cls_metadata.stack_dim", "must be a non-negative integer");
  td_dict *holder = td_dict_new(0, NULL);
  if (!holder) return td_last_status();
  int32_t st = 0, n = 0, ndim = -1;
  for (const cJSON *child = m->child; child && !st; child = child->next) {
    jkey key = key_of(child);
    if (td_cons_reserved_key(key.s, key.n)) continue;
    char name[16], prefix[24];
    snprintf(name, sizeof name, "%d", (int)n);
    snprintf(prefix, sizeof prefix, "%d.", (int)n);
    td_dict *c = NULL;
    if (key.n != strlen(name) || memcmp(key.s, name, key.n) != 0)
      st = rfail(r, TD_EINVAL, key.s, "a lazy stack's members are \"0\", \"1\", ... in order; "
                 "expected \"%s\"", name);
    else if ((st = load_level(r, child, prefix, NULL, &c))) {
    } else if (ndim >= 0 && c->head.ndim != ndim)
      st = rfail(r, TD_ESHAPE, name, "member %d has %d batch dims, member 0 has %d", (int)n,
                 (int)c->head.ndim, (int)ndim);
    else if (dim > c->head.ndim)
      st = rfail(r, TD_EINVAL, "cls_metadata.stack_dim", "%lld is past the %d batch dims of "
                 "the members", (long long)dim, (int)c->head.ndim);
    else if (td_dict_set_dict(holder, name, (int64_t)strlen(name), c) < 0)
      st = rfail(r, td_last_status(), name, "%s", td_last_error());
    if (c) ndim = c->head.ndim;
    td_dict_release(c);
    n++;
  }
  if (!st && n == 0) st = rfail(r, TD_EINVAL, "metadata", "the lazy stack has no members");
  if (st) {
    td_dict_release(holder);
    return st;
  }
  *out = holder;
  *stack_dim = (int32_t)dim;
  return 0;
}

/* The metadata at the end of the mapped file (its length in the last 8 bytes) parsed
 * and loaded into *out; a lazy stack's root is loaded by load_lazy_root. */
static int32_t load_metadata(rctx *r, const unsigned char *data, int64_t size, td_dict **out,
                             int32_t *stack_dim) {
  uint64_t mlen = 0;
  for (int k = 7; k >= 0; k--) mlen = (mlen << 8) | data[size - 8 + k];
  if (mlen == 0 || mlen > (uint64_t)(size - 8))
    return rfail(r, TD_EIO, "metadata length",
                 "%lld is out of range: the file holds %lld bytes, so it must lie in [1, %lld]",
                 (long long)mlen, (long long)size, (long long)(size - 8));
  r->payload = size - 8 - (int64_t)mlen;
  td_json_error e;
  cJSON *m =
      td_json_read((const char *)data + r->payload, (size_t)mlen, TD_JSON_KEEP_SURROGATES, &e);
  if (!m)
    return rfail(r, strcmp(e.what, "out of memory") == 0 ? TD_ENOMEM : TD_EIO, "metadata",
                 "not valid JSON: %s at byte %zu", e.what, e.at + 1);
  const cJSON *cls = cJSON_IsObject(m) ? td_json_get(m, "cls") : NULL;
  int32_t st = is_text(cls, "LazyStackedTensorDict") ? load_lazy_root(r, m, out, stack_dim)
                                                      : load_level(r, m, "", NULL, out);
  cJSON_Delete(m);
  return st;
}

TD_EXPORT td_dict *td_dict_from_consolidated(const char *filename, int32_t mode) {
  int32_t stack_dim;
  td_dict *d = td_dict_from_consolidated_any(filename, mode, &stack_dim);
  return td_mm_only_dict(d, stack_dim, "from_consolidated", filename);
}

TD_EXPORT td_dict *td_dict_from_consolidated_any(const char *filename, int32_t mode,
                                                 int32_t *stack_dim) {
  if (!stack_dim) return td_fail_null(TD_EINVAL, "from_consolidated: stack_dim is NULL");
  *stack_dim = -1;
  if (!filename || !*filename)
    return td_fail_null(TD_EINVAL, "from_consolidated: the filename is empty");
  if (mode != TD_MAP_READ && mode != TD_MAP_READWRITE)
    return td_fail_null(TD_EINVAL,
                        "from_consolidated: mode must be TD_MAP_READ or TD_MAP_READWRITE, got %d",
                        (int)mode);
  struct stat st;
  if (stat(filename, &st) != 0)
    return td_fail_null(TD_EIO, "from_consolidated: cannot open '%s': %s", filename,
                        strerror(errno));
  if (!S_ISREG(st.st_mode))
    return td_fail_null(TD_EIO, "from_consolidated: '%s' is not a regular file", filename);
  int64_t size = (int64_t)st.st_size;
  if (size < 8)
    return td_fail_null(
        TD_EIO,
        "from_consolidated: '%s': the file holds %lld bytes, too few for the 8-byte metadata "
        "length at its end",
        filename, (long long)size);
  rctx r = {filename, td_storage_map_file(filename, size, mode), 0};
  if (!r.s) {
    char msg[1024]; /* td_fail_null overwrites the message it quotes */
    snprintf(msg, sizeof msg, "%s", td_last_error());
    return td_fail_null(td_last_status(), "from_consolidated: %s", msg);
  }
  td_dict *d = NULL;
  int32_t status = load_metadata(&r, td_storage_data_borrow(r.s), size, &d, stack_dim);
  td_storage_release(r.s); /* the leaves hold their own references */
  return status ? NULL : d;
}
