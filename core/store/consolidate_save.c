/*
 * consolidate_save.c: td_dict_consolidate: a container into one file in Python
 * tensordict's consolidated layout (consolidate.h).
 *
 * Four passes: measure checks what the layout cannot hold and sums the payload; the
 * metadata is built in memory (put_level and the writers below it); the payload, the
 * metadata and its length go to a temporary file beside the target (write_file); the
 * temporary then takes the target's name (move_into_place).
 *
 * The metadata is written exactly as Python's json.dumps writes it (", " and ": "
 * separators, non-ASCII escaped as \uXXXX), so a container holding what a Python one
 * holds gives the same bytes. Number literals of non-tensor values are copied as they
 * are.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "consolidate.h"

/* ---- growable text ---- */

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

/* ---- the save and its errors ---- */

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

/* ---- the payload's size ---- */

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
      if (td_cons_reserved_key(key, klen))
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

/* ---- the metadata ---- */

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

/* The "non_tensors" object of d: its values, and those stacked values whose positions
 * all hold one text (the others are NonTensorStack children, put_children). */
static int32_t put_non_tensors(wctx *w, const td_dict *d, const td_key_path *parent) {
  td_sbuf *b = &w->json;
  int32_t st = 0;
  td_sb_putc(b, '{');
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
  td_sb_putc(b, '}');
  return 0;
}

/* The "leaves" object of d, whose payload starts at offset start: each leaf's dtype,
 * shape and bytes [start, stop) with its pad. A child's leaves come where it is. */
static int32_t put_leaves(wctx *w, const td_dict *d, int64_t start, const td_key_path *parent) {
  td_sbuf *b = &w->json;
  td_sb_putc(b, '{');
  bool first = true;
  int64_t off = start;
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_DICT) off += subtree_bytes(e->child);
    if (e->kind != TD_ENTRY_TENSOR) continue;
    td_key_path p = {parent, td_dict_key(d, i)};
    int64_t n = leaf_nbytes(&e->t), pad = pad_of(n);
    if (!first) td_sb_puts(b, ", ");
    first = false;
    int32_t st = put_key(w, d, i, &p);
    if (st) return st;
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
  td_sb_putc(b, '}');
  return 0;
}

/* The "cls_metadata" object of d: device, names, batch_size, is_locked. */
static int32_t put_cls_metadata(wctx *w, const td_dict *d, const td_key_path *parent) {
  td_sbuf *b = &w->json;
  td_sb_puts(b, "{\"device\": ");
  put_device(b, d);
  td_sb_puts(b, ", \"names\": [");
  for (int32_t k = 0; k < d->head.ndim; k++) {
    if (k) td_sb_puts(b, ", ");
    int32_t st = put_name(w, d, k, parent);
    if (st) return st;
  }
  td_sb_puts(b, "], \"batch_size\": ");
  buf_shape(b, d->head.ndim, d->head.shape);
  td_sb_puts(b, ", \"is_locked\": ");
  td_sb_puts(b, d->head.locked ? "true}" : "false}");
  return 0;
}

/* ", key: {NonTensorStack}" for a stacked value whose positions differ; nothing for
 * one they all share (put_non_tensors wrote it). */
static int32_t put_stack_child(wctx *w, const td_dict *d, int32_t i, const td_key_path *p) {
  const td_entry *e = &d->entries[i];
  stacked s;
  int32_t st = stacked_prepare(w, e, p, &s);
  if (st) return st;
  if (s.uniform == -1) {
    td_sb_puts(&w->json, ", ");
    st = put_key(w, d, i, p);
    td_sb_puts(&w->json, ": ");
    int64_t strides[TD_MAX_DIMS];
    td_contiguous_strides(s.pos->ndim, s.pos->shape, strides); /* a valid shape: no overflow */
    if (!st) st = put_stack(w, d, e->values, s.at, 0, s.pos->ndim, s.pos->shape, strides, 0, p);
  }
  td_tensor_release(s.pos);
  return st;
}

static int32_t put_level(wctx *w, const td_dict *d, int64_t start, const td_key_path *parent);

/* The children of d, whose payload starts at offset start, each as ", key: {...}":
 * nested containers and NonTensorStacks, in key order. */
static int32_t put_children(wctx *w, const td_dict *d, int64_t start,
                            const td_key_path *parent) {
  int64_t off = start;
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    td_key_path p = {parent, td_dict_key(d, i)};
    int32_t st = 0;
    if (e->kind == TD_ENTRY_TENSOR) {
      off += leaf_nbytes(&e->t) + pad_of(leaf_nbytes(&e->t));
    } else if (e->kind == TD_ENTRY_DICT) {
      td_sb_puts(&w->json, ", ");
      if (!(st = put_key(w, d, i, &p))) {
        td_sb_puts(&w->json, ": ");
        st = put_level(w, e->child, off, &p);
      }
      off += subtree_bytes(e->child);
    } else if (e->kind == TD_ENTRY_VALUES) {
      st = put_stack_child(w, d, i, &p);
    }
    if (st) return st;
  }
  return 0;
}

/* The metadata object of d, whose leaves start at payload offset start. */
static int32_t put_level(wctx *w, const td_dict *d, int64_t start, const td_key_path *parent) {
  td_sbuf *b = &w->json;
  td_sb_puts(b, "{\"cls\": \"TensorDict\", \"non_tensors\": ");
  int32_t st = put_non_tensors(w, d, parent);
  if (!st) {
    td_sb_puts(b, ", \"leaves\": ");
    st = put_leaves(w, d, start, parent);
  }
  if (!st) {
    td_sb_puts(b, ", \"cls_metadata\": ");
    st = put_cls_metadata(w, d, parent);
  }
  if (!st) st = put_children(w, d, start, parent);
  if (!st) td_sb_putc(b, '}');
  return st;
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
      if (n > 0 && !td_check_cpu("consolidate", &e->t, "leaf")) return TD_EINVAL;
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

/* The payload, the metadata and its length into a new temporary file beside the
 * target (its name in *tmp, malloc'd), synced unless flags hold TD_MEMMAP_NO_FSYNC. Its
 * descriptor stays open in *fd, claiming it until the commit (td_fs_open_temp); on
 * failure the file is closed and removed. */
static int32_t write_file(const wctx *w, const td_dict *d, int32_t flags, char **tmp, int *fd) {
  wfile f = {.fd = td_fs_open_temp(w->file, tmp), .cap = (size_t)1 << 20};
  if (f.fd < 0)
    return td_fail(TD_EIO, "consolidate: cannot create a temporary file beside '%s': %s",
                   w->file, strerror(errno));
  f.tmp = *tmp;
  int32_t st = 0;
  f.buf = td_storage_new_heap((int64_t)f.cap);
  if (!f.buf) st = td_fail(TD_ENOMEM, "consolidate: out of memory");
  if (!st) st = write_payload(&f, w, d, NULL);
  if (!st) st = wfile_write(&f, w, w->json.p, w->json.n);
  if (!st) {
    unsigned char len[8];
    uint64_t m = (uint64_t)w->json.n;
    for (int k = 0; k < 8; k++) len[k] = (unsigned char)(m >> (8 * k));
    st = wfile_write(&f, w, len, 8);
  }
  if (!st) st = wfile_flush(&f, w);
  if (!st && td_fs_sync(f.fd, flags) != 0)
    st = td_fail(TD_EIO, "consolidate: '%s': cannot fsync '%s': %s", w->file, *tmp,
                 strerror(errno));
  td_storage_release(f.buf);
  td_storage_release(f.chunk);
  if (st) {
    close(f.fd);
    unlink(*tmp);
  } else {
    *fd = f.fd;
  }
  return st;
}

/* The written temporary takes the name filename (td_fs_commit_file): replacing what is
 * there with TD_MEMMAP_EXISTSOK, else refusing an existing file. */
static int32_t move_into_place(const char *tmp, const char *filename, int32_t flags) {
  bool replace = flags & TD_MEMMAP_EXISTSOK;
  if (td_fs_commit_file(tmp, filename, replace, flags) == 0) return 0;
  if (errno == EEXIST && !replace)
    return td_fail(TD_EIO, "consolidate: '%s' exists (pass existsok)", filename);
  return td_fail(TD_EIO, "consolidate: cannot rename '%s' to '%s': %s", tmp, filename,
                 strerror(errno));
}

/* The root of a lazy stack (Python's LazyStackedTensorDict): no fields of its own, the
 * stack dim in cls_metadata, then each member under "0", "1", ... (the children of the
 * holder d, a container of batch size [] with the members as its entries). */
static int32_t put_stack_root(wctx *w, const td_dict *d, int32_t stack_dim) {
  td_sbuf *b = &w->json;
  td_sb_puts(b, "{\"cls\": \"LazyStackedTensorDict\", \"non_tensors\": {}, \"leaves\": {}, "
                "\"cls_metadata\": {\"stack_dim\": ");
  buf_i64(b, stack_dim);
  td_sb_puts(b, ", \"stack_dim_name\": null, \"is_locked\": false}");
  int32_t st = put_children(w, d, 0, NULL);
  if (!st) td_sb_putc(b, '}');
  return st;
}

/* d into filename; stack_dim >= 0: d holds a lazy stack's members (put_stack_root). */
static int32_t consolidate(const td_dict *d, const char *filename, int32_t flags,
                           int32_t stack_dim) {
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
  char *tmp = NULL;
  int32_t st = measure(&w, d, NULL, &payload);
  if (!st) st = stack_dim < 0 ? put_level(&w, d, 0, NULL) : put_stack_root(&w, d, stack_dim);
  if (!st && w.json.oom) st = td_fail(TD_ENOMEM, "consolidate: out of memory");
  int fd = -1;
  if (!st) st = write_file(&w, d, flags, &tmp, &fd);
  if (!st) st = move_into_place(tmp, filename, flags);
  if (fd >= 0 && close(fd) != 0 && !st)
    st = td_fail(TD_EIO, "consolidate: '%s': cannot close it after writing: %s", filename,
                 strerror(errno));
  free(tmp);
  free(w.json.p);
  return st;
}

TD_EXPORT int32_t td_dict_consolidate(const td_dict *d, const char *filename, int32_t flags) {
  return consolidate(d, filename, flags, -1);
}

TD_EXPORT int32_t td_dict_consolidate_stack(td_dict *const *members, int32_t n,
                                            int32_t stack_dim, const char *filename,
                                            int32_t flags) {
  int32_t st = td_mm_check_stack("consolidate", members, n, stack_dim);
  if (st) return st;
  td_dict *holder = td_dict_new(0, NULL);
  if (!holder) return td_last_status();
  for (int32_t i = 0; i < n && !st; i++) {
    char key[16];
    int len = snprintf(key, sizeof key, "%d", (int)i);
    if (td_dict_set_dict(holder, key, len, members[i]) < 0) st = td_last_status();
  }
  if (!st) st = consolidate(holder, filename, flags, stack_dim);
  td_dict_release(holder);
  return st;
}
