/*
 * dict_consolidate.c: a whole container in one file, in Python tensordict's
 * consolidated layout (td.consolidate(filename=...) and TensorDict.from_consolidated
 * of tensordict 0.15: tensordict/_base/serialization.py and _reductions.py).
 *
 * The file:
 *
 *   [payload: P bytes][metadata: M bytes of JSON][M: int64, little-endian]
 *
 * The payload holds the bytes of every tensor leaf (C order, little-endian), depth
 * first in key order (the leaves of a nested container come where the container is),
 * each followed by zero bytes up to a multiple of 8, so every leaf starts 8-byte
 * aligned. The metadata holds one JSON object per container:
 *
 *   {"cls": "TensorDict",
 *    "non_tensors": {key: [data, batch_size, device], ...},
 *    "leaves": {key: [dtype, shape, start, stop, pad], ...},
 *    "cls_metadata": {"device": null | "cpu" | "cuda:N", "names": [name | null, ...],
 *                     "batch_size": [...], "is_locked": false | true},
 *    child_key: {... a nested container or a NonTensorStack ...}, ...}
 *
 * dtype is str(torch.dtype) ("torch.float32"); start and stop are byte offsets in the
 * payload with stop = start + nbytes + pad and pad = (8 - nbytes % 8) % 8; data is the
 * non-tensor value itself (any JSON), batch_size the container's, device its device. A
 * stacked non-tensor value is a child {"cls": "NonTensorStack", "non_tensors": {"0":
 * [data, sub_batch, device], ...}, "leaves": {}, "cls_metadata": {"stack_dim": 0,
 * "stack_dim_name": name | null, "is_locked": bool}, "1": {nested NonTensorStack}, ...}:
 * element i along the stack dim is uniform data (in non_tensors) or a stack itself.
 *
 * The metadata is written exactly as Python's json.dumps writes it (", " and ": "
 * separators, non-ASCII escaped as \uXXXX), so a container holding what a Python one
 * holds gives the same bytes. Number literals of non-tensor values are copied as they
 * are. Loading puts non-tensor values first, then leaves, then children, as Python
 * does; every field is validated before use (errors name the file and the field).
 *
 * The JSON is read and written by the library's JSON layer (core/src/json.h), which
 * takes Python's NaN and Infinity, keys holding NUL bytes (\u0000), integers exactly
 * (shapes, offsets, big non-tensor integers) and keeps non-tensor values' number
 * literals as written.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dict_internal.h"

/* The keys of a container's metadata object that are not children. */
static bool is_reserved_key(const char *key, size_t len) {
  static const char *const reserved[] = {"cls", "non_tensors", "leaves", "cls_metadata",
                                         "size"};
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
    if (strlen(reserved[i]) == len && memcmp(reserved[i], key, len) == 0) return true;
  return false;
}

/* ------------------------------------------------------------------ growable text */

static void buf_i64(td_sbuf *b, int64_t v) {
  char t[24];
  int n = snprintf(t, sizeof t, "%lld", (long long)v);
  td_sb_put(b, t, (size_t)n);
}

/* "[a, b, c]" as Python writes a list of ints. */
static void buf_shape(td_sbuf *b, int32_t ndim, const int64_t *shape) {
  td_sb_putc(b, '[');
  for (int32_t i = 0; i < ndim; i++) {
    if (i) td_sb_puts(b, ", ");
    buf_i64(b, shape[i]);
  }
  td_sb_putc(b, ']');
}

/* ------------------------------------------------------------------------- JSON */

/* The metadata is read and written by the JSON layer (core/src/json.h); what the reader
 * needs of its nodes, by name. */

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

/* ====================================================================== writing */

typedef struct wctx {
  const char *file;
  td_sbuf json;
} wctx;

static int32_t wfail_at(const wctx *w, int32_t status, const td_key_path *p, const char *fmt,
                        ...) TD_PRINTF(4, 5);
static int32_t wfail_at(const wctx *w, int32_t status, const td_key_path *p, const char *fmt,
                        ...) {
  char msg[768], path[TD_PATH_CHARS];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (p)
    return td_fail(status, "consolidate: '%s': key '%s': %s", w->file,
                   td_key_path_text(p, path), msg);
  return td_fail(status, "consolidate: '%s': %s", w->file, msg);
}

static int64_t leaf_nbytes(const td_tensor *t) { return td_tensor_numel(t) * t->itemsize; }
static int64_t pad_of(int64_t n) { return n % 8 ? 8 - n % 8 : 0; }

/* Checks what Python's layout cannot hold and sums the payload (overflow checked).
 * Later passes trust it. */
static int32_t measure(const wctx *w, const td_dict *d, const td_key_path *parent,
                       int64_t *total) {
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    td_key_path p = {parent, td_dict_key(d, i)};
    const char *key = td_dict_key(d, i);
    size_t klen = (size_t)d->keys->meta[i].len;
    if (e->kind == TD_ENTRY_DICT || e->kind == TD_ENTRY_VALUES) {
      /* both may be written as children, beside the level's own fields */
      if (is_reserved_key(key, klen))
        return wfail_at(w, TD_EINVAL, &p,
                        "a %s cannot have this key: Python's layout uses it for the "
                        "container's own metadata",
                        e->kind == TD_ENTRY_DICT ? "nested TensorDict" : "stacked value");
    }
    if (e->kind == TD_ENTRY_TENSOR && klen >= 4 && memcmp(key, "<NJT", 4) == 0)
      return wfail_at(w, TD_EINVAL, &p,
                      "keys starting with '<NJT' mark nested tensors in Python's layout");
    if (e->kind == TD_ENTRY_TENSOR || e->kind == TD_ENTRY_VALUES) {
      if (e->t.storage->device_type != TD_DEVICE_CPU)
        return wfail_at(w, TD_EINVAL, &p, "the %s is in device memory: copy it to the CPU first",
                        e->kind == TD_ENTRY_TENSOR ? "leaf" : "stacked value's positions");
    }
    if (e->kind == TD_ENTRY_TENSOR) {
      int64_t n = leaf_nbytes(&e->t);
      if (__builtin_add_overflow(*total, n + pad_of(n), total))
        return wfail_at(w, TD_EINVAL, &p, "the payload would pass 2^63 bytes");
    } else if (e->kind == TD_ENTRY_DICT) {
      int32_t st = measure(w, e->child, &p, total);
      if (st) return st;
    }
  }
  return 0;
}

/* Payload bytes of d's leaves and its children's (measure checked the sums). */
static int64_t subtree_bytes(const td_dict *d) {
  int64_t total = 0;
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_TENSOR) total += leaf_nbytes(&e->t) + pad_of(leaf_nbytes(&e->t));
    else if (e->kind == TD_ENTRY_DICT) total += subtree_bytes(e->child);
  }
  return total;
}

static int32_t put_key(wctx *w, const td_dict *d, int32_t i, const td_key_path *p) {
  if (!td_json_put_string(&w->json, td_dict_key(d, i), (size_t)d->keys->meta[i].len,
                          TD_JSON_PYTHON))
    return wfail_at(w, TD_EINVAL, p, "the key is not valid UTF-8 (Python keys are text)");
  return 0;
}

/* A value's JSON text in Python's style. */
static int32_t put_value_text(wctx *w, const char *text, const td_key_path *p) {
  td_json_error e;
  cJSON *v = td_json_read(text, strlen(text), TD_JSON_KEEP_SURROGATES, &e);
  int32_t st = 0;
  if (!v)
    st = wfail_at(w, TD_EINVAL, p, "the value is not valid JSON: %s at byte %zu", e.what,
                  e.at + 1);
  else if (!td_json_put(&w->json, v, TD_JSON_PYTHON))
    st = wfail_at(w, TD_EINVAL, p, "the value is not valid UTF-8");
  cJSON_Delete(v);
  return st;
}

static void put_device(td_sbuf *b, const td_dict *d) {
  if (d->head.device_type == TD_DEVICE_CPU) {
    td_sb_puts(b, "\"cpu\"");
  } else if (d->head.device_type == TD_DEVICE_CUDA) {
    td_sb_puts(b, "\"cuda:");
    buf_i64(b, d->head.device_index);
    td_sb_putc(b, '"');
  } else {
    td_sb_puts(b, "null");
  }
}

static int32_t put_name(wctx *w, const td_dict *d, int32_t dim, const td_key_path *p) {
  const char *name = d->head.has_names && dim < d->head.ndim ? d->names[dim] : NULL;
  if (!name) {
    td_sb_puts(&w->json, "null");
    return 0;
  }
  if (!td_json_put_string(&w->json, name, strlen(name), TD_JSON_PYTHON))
    return wfail_at(w, TD_EINVAL, p, "the name of dim %d is not valid UTF-8", (int)dim);
  return 0;
}

/* A stacked value prepared for writing: contiguous positions, checked. */
typedef struct stacked {
  td_tensor *pos;
  const int64_t *at;
  int64_t numel;
  int64_t uniform; /* the text index every position holds, -1 when they differ */
} stacked;

static int32_t stacked_prepare(const wctx *w, const td_entry *e, const td_key_path *p,
                               stacked *s) {
  memset(s, 0, sizeof *s);
  s->pos = td_tensor_contiguous(&e->t);
  if (!s->pos) return wfail_at(w, td_last_status(), p, "%s", td_last_error());
  s->at = td_tensor_data_borrow(s->pos);
  s->numel = td_tensor_numel(s->pos);
  int64_t n = e->values->n;
  for (int64_t k = 0; k < s->numel; k++)
    if (s->at[k] < 0 || s->at[k] >= n) {
      td_tensor_release(s->pos);
      s->pos = NULL;
      return wfail_at(w, TD_EINDEX, p, "stacked value position %lld is outside [0, %lld)",
                      (long long)s->at[k], (long long)n);
    }
  s->uniform = s->numel ? s->at[0] : -1;
  for (int64_t k = 1; k < s->numel && s->uniform >= 0; k++)
    if (s->at[k] != s->uniform) s->uniform = -1;
  if (s->numel == 0) s->uniform = -2; /* no element: any text stands for them all */
  return 0;
}

/* The text index every element of a strided block of positions holds, or -1. */
static int64_t block_uniform(const int64_t *at, int64_t off, int32_t nd, const int64_t *shape,
                             const int64_t *strides) {
  int64_t idx[TD_MAX_DIMS] = {0}, first = at[off];
  for (int32_t k = 0; k < nd; k++)
    if (shape[k] == 0) return -1;
  for (;;) {
    int64_t o = off;
    for (int32_t k = 0; k < nd; k++) o += idx[k] * strides[k];
    if (at[o] != first) return -1;
    int32_t k = nd - 1;
    while (k >= 0 && ++idx[k] == shape[k]) idx[k--] = 0;
    if (k < 0) return first;
  }
}

/* One element of non_tensors: [data, batch_size, device]. */
static int32_t put_non_tensor(wctx *w, const td_dict *d, const char *text, int32_t nd,
                              const int64_t *shape, const td_key_path *p) {
  td_sb_putc(&w->json, '[');
  int32_t st = put_value_text(w, text, p);
  if (st) return st;
  td_sb_puts(&w->json, ", ");
  buf_shape(&w->json, nd, shape);
  td_sb_puts(&w->json, ", ");
  put_device(&w->json, d);
  td_sb_putc(&w->json, ']');
  return 0;
}

/* A NonTensorStack over a block of positions (nd >= 1), stacked along its first dim,
 * which is dim `dim` of the container (its name is the stack_dim_name). Elements that
 * are uniform are data; the others stacks, as torch.stack of NonTensorData builds. */
static int32_t put_stack(wctx *w, const td_dict *d, const td_values *v, const int64_t *at,
                         int64_t off, int32_t nd, const int64_t *shape, const int64_t *strides,
                         int32_t dim, const td_key_path *p) {
  td_sbuf *b = &w->json;
  td_sb_puts(b, "{\"cls\": \"NonTensorStack\", \"non_tensors\": {");
  bool first = true;
  for (int64_t k = 0; k < shape[0]; k++) {
    int64_t u = block_uniform(at, off + k * strides[0], nd - 1, shape + 1, strides + 1);
    if (u < 0) continue;
    if (!first) td_sb_puts(b, ", ");
    first = false;
    td_sb_putc(b, '"');
    buf_i64(b, k);
    td_sb_puts(b, "\": ");
    int32_t st = put_non_tensor(w, d, v->texts[u], nd - 1, shape + 1, p);
    if (st) return st;
  }
  td_sb_puts(b, "}, \"leaves\": {}, \"cls_metadata\": {\"stack_dim\": 0, \"stack_dim_name\": ");
  int32_t st = put_name(w, d, dim, p);
  if (st) return st;
  td_sb_puts(b, ", \"is_locked\": ");
  td_sb_puts(b, d->head.locked ? "true}" : "false}");
  for (int64_t k = 0; k < shape[0]; k++) {
    int64_t o = off + k * strides[0];
    if (block_uniform(at, o, nd - 1, shape + 1, strides + 1) >= 0) continue;
    td_sb_puts(b, ", \"");
    buf_i64(b, k);
    td_sb_puts(b, "\": ");
    st = put_stack(w, d, v, at, o, nd - 1, shape + 1, strides + 1, dim + 1, p);
    if (st) return st;
  }
  td_sb_putc(b, '}');
  return 0;
}

/* The metadata object of d, whose leaves start at payload offset start. */
static int32_t put_level(wctx *w, const td_dict *d, int64_t start, const td_key_path *parent) {
  td_sbuf *b = &w->json;
  int32_t st = 0;
  td_sb_puts(b, "{\"cls\": \"TensorDict\", \"non_tensors\": {");
  bool first = true;
  for (int32_t i = 0; i < d->keys->n && !st; i++) {
    const td_entry *e = &d->entries[i];
    td_key_path p = {parent, td_dict_key(d, i)};
    const char *text;
    if (e->kind == TD_ENTRY_VALUE) {
      text = e->values->texts[0];
    } else if (e->kind == TD_ENTRY_VALUES) {
      stacked s;
      if ((st = stacked_prepare(w, e, &p, &s))) break;
      td_tensor_release(s.pos);
      if (s.uniform == -1) continue; /* a NonTensorStack, written with the children */
      text = s.uniform >= 0 ? e->values->texts[s.uniform]
                            : e->values->n ? e->values->texts[0] : "null";
    } else {
      continue;
    }
    if (!first) td_sb_puts(b, ", ");
    first = false;
    if ((st = put_key(w, d, i, &p))) break;
    td_sb_puts(b, ": ");
    st = put_non_tensor(w, d, text, d->head.ndim, d->head.shape, &p);
  }
  if (st) return st;
  td_sb_puts(b, "}, \"leaves\": {");
  first = true;
  int64_t off = start;
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_DICT) off += subtree_bytes(e->child);
    if (e->kind != TD_ENTRY_TENSOR) continue;
    td_key_path p = {parent, td_dict_key(d, i)};
    int64_t n = leaf_nbytes(&e->t), pad = pad_of(n);
    if (!first) td_sb_puts(b, ", ");
    first = false;
    if ((st = put_key(w, d, i, &p))) return st;
    td_sb_puts(b, ": [\"");
    td_sb_puts(b, td_py_dtype_name(e->t.dtype));
    td_sb_puts(b, "\", ");
    buf_shape(b, e->t.ndim, e->t.shape);
    td_sb_puts(b, ", ");
    buf_i64(b, off);
    td_sb_puts(b, ", ");
    buf_i64(b, off + n + pad);
    td_sb_puts(b, ", ");
    buf_i64(b, pad);
    td_sb_putc(b, ']');
    off += n + pad;
  }
  td_sb_puts(b, "}, \"cls_metadata\": {\"device\": ");
  put_device(b, d);
  td_sb_puts(b, ", \"names\": [");
  for (int32_t k = 0; k < d->head.ndim; k++) {
    if (k) td_sb_puts(b, ", ");
    if ((st = put_name(w, d, k, parent))) return st;
  }
  td_sb_puts(b, "], \"batch_size\": ");
  buf_shape(b, d->head.ndim, d->head.shape);
  td_sb_puts(b, ", \"is_locked\": ");
  td_sb_puts(b, d->head.locked ? "true}" : "false}");
  off = start;
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    td_key_path p = {parent, td_dict_key(d, i)};
    if (e->kind == TD_ENTRY_TENSOR) {
      off += leaf_nbytes(&e->t) + pad_of(leaf_nbytes(&e->t));
    } else if (e->kind == TD_ENTRY_DICT) {
      td_sb_puts(b, ", ");
      if ((st = put_key(w, d, i, &p))) return st;
      td_sb_puts(b, ": ");
      if ((st = put_level(w, e->child, off, &p))) return st;
      off += subtree_bytes(e->child);
    } else if (e->kind == TD_ENTRY_VALUES) {
      stacked s;
      if ((st = stacked_prepare(w, e, &p, &s))) return st;
      if (s.uniform == -1) {
        td_sb_puts(b, ", ");
        st = put_key(w, d, i, &p);
        td_sb_puts(b, ": ");
        int64_t strides[TD_MAX_DIMS];
        int64_t acc = 1;
        for (int32_t k = s.pos->ndim - 1; k >= 0; k--) {
          strides[k] = acc;
          acc *= s.pos->shape[k];
        }
        if (!st)
          st = put_stack(w, d, e->values, s.at, 0, s.pos->ndim, s.pos->shape, strides, 0, &p);
      }
      td_tensor_release(s.pos);
      if (st) return st;
    }
  }
  td_sb_putc(b, '}');
  return 0;
}

/* ---- the file ---- */

/* The temporary file, written through a buffer: many small leaves make few system
 * calls, large ones go straight out, and a strided leaf is gathered into the buffer or
 * a chunk at a time (td_fs_write_tensor), never copied whole. */
typedef struct wfile {
  int fd;
  const char *tmp;
  td_storage *buf; /* a storage, so the copy kernel gathers strided leaves into it */
  size_t n, cap;
  td_storage *chunk; /* td_fs_write_tensor's gather block, made on first need */
} wfile;

static int32_t wfile_fail(const wfile *f, const wctx *w) {
  return td_fail(TD_EIO, "consolidate: '%s': cannot write '%s': %s", w->file, f->tmp,
                 strerror(errno));
}

static int32_t wfile_flush(wfile *f, const wctx *w) {
  bool ok = td_fs_write_all(f->fd, f->buf->data, (int64_t)f->n);
  f->n = 0;
  return ok ? 0 : wfile_fail(f, w);
}

static int32_t wfile_write(wfile *f, const wctx *w, const void *p, size_t n) {
  if (f->n + n <= f->cap) {
    memcpy(f->buf->data + f->n, p, n);
    f->n += n;
    return 0;
  }
  int32_t st = wfile_flush(f, w);
  if (st) return st;
  if (n >= f->cap) return td_fs_write_all(f->fd, p, (int64_t)n) ? 0 : wfile_fail(f, w);
  memcpy(f->buf->data, p, n);
  f->n = n;
  return 0;
}

/* A strided leaf of n bytes in C order. */
static int32_t wfile_write_strided(wfile *f, const wctx *w, const td_tensor *t, int64_t n,
                                   const td_key_path *p) {
  int32_t st;
  if ((size_t)n <= f->cap) { /* into the buffer, beside the small leaves around it */
    bool room = f->n % (size_t)t->itemsize == 0 && f->n + (size_t)n <= f->cap;
    if (!room && (st = wfile_flush(f, w))) return st;
    if ((st = td_fs_gather(t, f->buf, (int64_t)f->n)))
      return wfail_at(w, st, p, "%s", td_last_error());
    f->n += (size_t)n;
    return 0;
  }
  if ((st = wfile_flush(f, w))) return st;
  int32_t status = TD_EIO;
  if (td_fs_write_tensor(f->fd, t, &f->chunk, &status)) return 0;
  return status == TD_EIO ? wfile_fail(f, w) : wfail_at(w, status, p, "%s", td_last_error());
}

static int32_t write_payload(wfile *f, const wctx *w, const td_dict *d,
                             const td_key_path *parent) {
  static const char zeros[8];
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    td_key_path p = {parent, td_dict_key(d, i)};
    int32_t st = 0;
    if (e->kind == TD_ENTRY_DICT) {
      st = write_payload(f, w, e->child, &p);
    } else if (e->kind == TD_ENTRY_TENSOR) {
      int64_t n = leaf_nbytes(&e->t);
      if (n > 0)
        st = td_tensor_is_contiguous(&e->t)
                 ? wfile_write(f, w, td_tensor_data_borrow(&e->t), (size_t)n)
                 : wfile_write_strided(f, w, &e->t, n, &p);
      if (!st && pad_of(n)) st = wfile_write(f, w, zeros, (size_t)pad_of(n));
    }
    if (st) return st;
  }
  return 0;
}

TD_EXPORT int32_t td_dict_consolidate(const td_dict *d, const char *filename, int32_t flags) {
  if (!d) return td_fail(TD_EINVAL, "consolidate: the TensorDict is NULL");
  if (!filename || !*filename) return td_fail(TD_EINVAL, "consolidate: the filename is empty");
  if (flags & ~(TD_MEMMAP_EXISTSOK | TD_MEMMAP_NO_FSYNC))
    return td_fail(TD_EINVAL, "consolidate: unknown flags %d", (int)flags);
  struct stat st_old;
  bool exists = lstat(filename, &st_old) == 0;
  if (exists && !(flags & TD_MEMMAP_EXISTSOK))
    return td_fail(TD_EIO, "consolidate: '%s' exists (pass existsok)", filename);
  if (exists && S_ISDIR(st_old.st_mode))
    return td_fail(TD_EIO, "consolidate: '%s' is a folder, not a file", filename);

  wctx w = {filename, {0}};
  int64_t payload = 0;
  int32_t st = measure(&w, d, NULL, &payload);
  if (!st) st = put_level(&w, d, 0, NULL);
  if (!st && w.json.oom) st = td_fail(TD_ENOMEM, "consolidate: out of memory");
  if (st) {
    free(w.json.p);
    return st;
  }

  char *tmp = NULL;
  wfile f = {.fd = td_fs_open_temp(filename, &tmp), .cap = (size_t)1 << 20};
  if (f.fd < 0) {
    st = td_fail(TD_EIO, "consolidate: cannot create a temporary file beside '%s': %s",
                 filename, strerror(errno));
    free(w.json.p);
    return st;
  }
  f.tmp = tmp;
  f.buf = td_storage_new_heap((int64_t)f.cap);
  if (!f.buf) st = td_fail(TD_ENOMEM, "consolidate: out of memory");
  if (!st) st = write_payload(&f, &w, d, NULL);
  if (!st) st = wfile_write(&f, &w, w.json.p, w.json.n);
  if (!st) {
    unsigned char len[8];
    uint64_t m = (uint64_t)w.json.n;
    for (int k = 0; k < 8; k++) len[k] = (unsigned char)(m >> (8 * k));
    st = wfile_write(&f, &w, len, 8);
  }
  if (!st) st = wfile_flush(&f, &w);
  if (!st && td_fs_sync(f.fd, flags) != 0)
    st = td_fail(TD_EIO, "consolidate: '%s': cannot fsync '%s': %s", filename, tmp,
                 strerror(errno));
  if (close(f.fd) != 0 && !st)
    st = td_fail(TD_EIO, "consolidate: '%s': cannot close '%s': %s", filename, tmp,
                 strerror(errno));
  td_storage_release(f.buf);
  td_storage_release(f.chunk);
  free(w.json.p);
  if (!st) {
    if (flags & TD_MEMMAP_EXISTSOK) {
      if (rename(tmp, filename) != 0)
        st = td_fail(TD_EIO, "consolidate: cannot rename '%s' to '%s': %s", tmp, filename,
                     strerror(errno));
    } else if (link(tmp, filename) != 0) {
      /* link() refuses an existing target atomically; rename() is the fallback where the
       * file system has no hard links. */
      int err = errno;
      bool no_links = err == EPERM || err == ENOTSUP || err == ENOSYS;
      if (err == EEXIST || (no_links && access(filename, F_OK) == 0))
        st = td_fail(TD_EIO, "consolidate: '%s' exists (pass existsok)", filename);
      else if (!no_links)
        st = td_fail(TD_EIO, "consolidate: cannot create '%s': %s", filename, strerror(err));
      else if (rename(tmp, filename) != 0)
        st = td_fail(TD_EIO, "consolidate: cannot rename '%s' to '%s': %s", tmp, filename,
                     strerror(errno));
    }
  }
  if (st || !(flags & TD_MEMMAP_EXISTSOK)) unlink(tmp); /* gone already after a rename */
  if (!st) {
    char *dir = td_fs_dir_of(filename);
    if (dir) td_fs_sync_dir(dir, flags); /* best effort: some file systems refuse it */
    free(dir);
  }
  free(tmp);
  return st;
}

/* ====================================================================== loading */

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
  snprintf(out, WHERE_CHARS, "%s%s%s%s", prefix, field, key ? "." : "", key ? key : "");
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

/* Fills the block (off, nd, shape, strides) of the positions from a NonTensorStack. */
static int32_t load_stack(const rctx *r, stack_load *k, const cJSON *m, const char *where,
                          int64_t off, int32_t nd, const int64_t *shape,
                          const int64_t *strides) {
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
  int64_t n = shape[sd];
  const cJSON **data = calloc((size_t)(n ? n : 1), sizeof *data);
  const cJSON **kids = calloc((size_t)(n ? n : 1), sizeof *kids);
  if (!data || !kids) {
    free(data), free(kids);
    return rfail(r, TD_ENOMEM, where, "out of memory");
  }
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
    if (is_reserved_key(key.s, key.n)) continue;
    int64_t e = element_index(key, n);
    if (e < 0 || data[e] || kids[e]) {
      snprintf(w2, sizeof w2, "%s.%s", where, key.s);
      st = rfail(r, TD_EINDEX, w2, "not an element of a stack of %lld (or given twice)",
                 (long long)n);
    } else {
      kids[e] = c;
    }
  }
  int32_t snd = nd - 1;
  int64_t sshape[TD_MAX_DIMS], sstrides[TD_MAX_DIMS];
  for (int32_t j = 0, o = 0; j < nd; j++)
    if (j != sd) sshape[o] = shape[j], sstrides[o++] = strides[j];
  for (int64_t e = 0; e < n && !st; e++) {
    char key[24];
    snprintf(key, sizeof key, "%lld", (long long)e);
    int64_t eoff = off + e * strides[sd];
    if (kids[e]) {
      snprintf(w2, sizeof w2, "%s.%s", where, key);
      st = load_stack(r, k, kids[e], w2, eoff, snd, sshape, sstrides);
      continue;
    }
    if (!data[e]) {
      st = rfail(r, TD_EINVAL, where, "element %lld of the stack is missing", (long long)e);
      break;
    }
    where_of(w2, where, ".non_tensors", key);
    char *text;
    int32_t bnd;
    int64_t bshape[TD_MAX_DIMS];
    if ((st = get_non_tensor(r, w2, data[e], &text, &bnd, bshape))) break;
    bool same = bnd == snd;
    for (int32_t j = 0; same && j < snd; j++) same = bshape[j] == sshape[j];
    if (!same) {
      free(text);
      char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
      st = rfail(r, TD_ESHAPE, w2, "batch_size %s is not the element's %s",
                 td_format_shape(a, sizeof a, bnd, bshape),
                 td_format_shape(b, sizeof b, snd, sshape));
      break;
    }
    int64_t idx = intern_text(k, text);
    if (idx < 0) {
      st = rfail(r, TD_ENOMEM, w2, "out of memory");
      break;
    }
    fill_block(k->pos, eoff, snd, sshape, sstrides, idx);
  }
  free(data);
  free(kids);
  return st;
}

static int32_t load_stacked_entry(const rctx *r, td_dict *d, jkey key, const cJSON *m,
                                  const char *where) {
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

static td_dict *load_level(const rctx *r, const cJSON *m, const char *prefix,
                           const td_dict *parent);

/* The metadata object m (a TensorDict) into a container. prefix names it in messages
 * ("" at the top, "b." for the child b). */
static td_dict *load_level(const rctx *r, const cJSON *m, const char *prefix,
                           const td_dict *parent) {
  char where[WHERE_CHARS];
  snprintf(where, sizeof where, "%.*s", prefix[0] ? (int)strlen(prefix) - 1 : 0, prefix);
  if (!cJSON_IsObject(m)) {
    rfail(r, TD_EINVAL, where[0] ? where : "metadata",
          "a TensorDict's metadata must be an object, got %s", td_json_kind_name(m));
    return NULL;
  }
  const cJSON *cls = td_json_get(m, "cls");
  if (!cJSON_IsString(cls)) {
    rfail(r, TD_EINVAL, where_of(where, prefix, "cls", NULL), "must be a class name");
    return NULL;
  }
  if (!is_text(cls, "TensorDict")) {
    rfail(r, TD_EINVAL, where_of(where, prefix, "cls", NULL),
          "class '%s' is not supported (TensorDict, or NonTensorStack for a non-tensor entry)",
          cls->valuestring);
    return NULL;
  }
  const cJSON *cm = td_json_get(m, "cls_metadata"), *nt = td_json_get(m, "non_tensors"),
              *leaves = td_json_get(m, "leaves");
  if (!cJSON_IsObject(cm)) {
    rfail(r, TD_EINVAL, where_of(where, prefix, "cls_metadata", NULL), "must be an object");
    return NULL;
  }
  if (!cJSON_IsObject(nt)) {
    rfail(r, TD_EINVAL, where_of(where, prefix, "non_tensors", NULL), "must be an object");
    return NULL;
  }
  if (!cJSON_IsObject(leaves)) {
    rfail(r, TD_EINVAL, where_of(where, prefix, "leaves", NULL), "must be an object");
    return NULL;
  }
  int32_t ndim;
  int64_t batch[TD_MAX_DIMS];
  where_of(where, prefix, "cls_metadata.batch_size", NULL);
  if (get_shape(r, where, "batch_size", td_json_get(cm, "batch_size"), &ndim, batch)) return NULL;
  if (parent && !starts_with(ndim, batch, parent->head.ndim, parent->head.shape)) {
    char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
    rfail(r, TD_ESHAPE, where, "%s does not start with the parent's batch size %s",
          td_format_shape(a, sizeof a, ndim, batch),
          td_format_shape(b, sizeof b, parent->head.ndim, parent->head.shape));
    return NULL;
  }
  /* names, device and lock are read now (errors before any work), applied last */
  const cJSON *names = td_json_get(cm, "names"), *locked = td_json_get(cm, "is_locked");
  where_of(where, prefix, "cls_metadata.names", NULL);
  if (names && !cJSON_IsNull(names)) {
    if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) != ndim) {
      rfail(r, TD_EINVAL, where, "must be a list of %d names or nulls", (int)ndim);
      return NULL;
    }
    int32_t k = 0;
    for (const cJSON *x = names->child; x; x = x->next, k++)
      if (!cJSON_IsNull(x) && !is_plain_string(x)) {
        rfail(r, TD_EINVAL, where, "name %d must be a string or null", (int)k);
        return NULL;
      }
  }
  where_of(where, prefix, "cls_metadata.is_locked", NULL);
  if (locked && !cJSON_IsBool(locked)) {
    rfail(r, TD_EINVAL, where, "must be true or false, got %s", td_json_kind_name(locked));
    return NULL;
  }
  int32_t dev_type, dev_index;
  where_of(where, prefix, "cls_metadata.device", NULL);
  if (get_device(r, where, td_json_get(cm, "device"), &dev_type, &dev_index)) return NULL;

  td_dict *d = td_dict_new(ndim, batch);
  if (!d) {
    rfail(r, td_last_status(), where_of(where, prefix, "cls_metadata.batch_size", NULL), "%s",
          td_last_error());
    return NULL;
  }
  int32_t st = 0;
  /* Python's order: non-tensor values, leaves, then nested containers */
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
  for (const cJSON *c = leaves->child; c && !st; c = c->next)
    st = load_leaf(r, d, key_of(c), c, where_of(where, prefix, "leaves", key_of(c).s));
  for (const cJSON *child = m->child; child && !st; child = child->next) {
    jkey key = key_of(child);
    if (is_reserved_key(key.s, key.n)) continue;
    where_of(where, prefix, key.s, NULL);
    if ((st = check_new_key(r, where, d, key))) break;
    const cJSON *ccls = cJSON_IsObject(child) ? td_json_get(child, "cls") : NULL;
    if (cJSON_IsString(ccls) && strcmp(ccls->valuestring, "NonTensorStack") == 0) {
      st = load_stacked_entry(r, d, key, child, where);
      continue;
    }
    char child_prefix[WHERE_CHARS + 2];
    snprintf(child_prefix, sizeof child_prefix, "%s.", where);
    td_dict *c = load_level(r, child, child_prefix, d);
    if (!c) {
      st = td_last_status();
      break;
    }
    if (td_dict_set_dict(d, key.s, (int64_t)key.n, c) < 0)
      st = rfail(r, td_last_status(), where, "%s", td_last_error());
    td_dict_release(c);
  }
  if (!st && cJSON_IsArray(names)) {
    const char *list[TD_MAX_DIMS] = {0};
    bool any = false;
    int32_t k = 0;
    for (const cJSON *x = names->child; x; x = x->next, k++)
      if (cJSON_IsString(x)) list[k] = x->valuestring, any = true;
    if (any && td_dict_set_names(d, list) != 0)
      st = rfail(r, td_last_status(), where_of(where, prefix, "cls_metadata.names", NULL), "%s",
                 td_last_error());
  }
  if (!st && dev_type != TD_DEVICE_NONE && td_dict_set_device(d, dev_type, dev_index) != 0)
    st = rfail(r, td_last_status(), where_of(where, prefix, "cls_metadata.device", NULL), "%s",
               td_last_error());
  if (!st && cJSON_IsTrue(locked)) td_dict_set_locked(d, 1);
  if (st) {
    td_dict_release(d);
    return NULL;
  }
  return d;
}

TD_EXPORT td_dict *td_dict_from_consolidated(const char *filename, int32_t mode) {
  if (!filename || !*filename)
    return td_fail_null(TD_EINVAL, "from_consolidated: the filename is empty");
  if (mode != TD_MAP_READ && mode != TD_MAP_READWRITE)
    return td_fail_null(TD_EINVAL,
                        "from_consolidated: mode must be TD_MAP_READ or TD_MAP_READWRITE, got %d",
                        (int)mode);
  rctx r = {filename, NULL, 0};
  struct stat st;
  if (stat(filename, &st) != 0)
    return td_fail_null(TD_EIO, "from_consolidated: cannot open '%s': %s", filename,
                        strerror(errno));
  if (!S_ISREG(st.st_mode))
    return td_fail_null(TD_EIO, "from_consolidated: '%s' is not a regular file", filename);
  int64_t size = (int64_t)st.st_size;
  if (size < 8) {
    rfail(&r, TD_EIO, "",
          "the file holds %lld bytes, too few for the 8-byte metadata length at its end",
          (long long)size);
    return NULL;
  }
  r.s = td_storage_map_file(filename, size, mode);
  if (!r.s) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", td_last_error());
    td_fail(td_last_status(), "from_consolidated: %s", msg);
    return NULL;
  }
  const unsigned char *data = td_storage_data_borrow(r.s);
  uint64_t mlen = 0;
  for (int k = 7; k >= 0; k--) mlen = (mlen << 8) | data[size - 8 + k];
  td_dict *d = NULL;
  if (mlen == 0 || mlen > (uint64_t)(size - 8)) {
    rfail(&r, TD_EIO, "metadata length",
          "%lld is out of range: the file holds %lld bytes, so it must lie in [1, %lld]",
          (long long)mlen, (long long)size, (long long)(size - 8));
  } else {
    r.payload = size - 8 - (int64_t)mlen;
    td_json_error e;
    cJSON *m = td_json_read((const char *)data + r.payload, (size_t)mlen,
                            TD_JSON_KEEP_SURROGATES, &e);
    if (!m)
      rfail(&r, strcmp(e.what, "out of memory") == 0 ? TD_ENOMEM : TD_EIO, "metadata",
            "not valid JSON: %s at byte %zu", e.what, e.at + 1);
    else
      d = load_level(&r, m, "", NULL);
    cJSON_Delete(m);
  }
  td_storage_release(r.s); /* the leaves hold their own references */
  return d;
}
