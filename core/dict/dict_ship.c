/*
 * dict_ship.c: a container packed into one flat byte region and unpacked in another
 * process as views of that region (the worker engine's transport, core/dict/dict_workers.c).
 *
 * Layout (all integers int64, little-endian as the machine writes them: both ends are
 * the same machine):
 *   [0]  magic, version, meta words, data bytes        (the header, 32 bytes)
 *   [32] meta: the structure, depth first, as int64 words; strings are a byte count
 *        followed by their bytes and a NUL, padded to 8
 *   then, 64-byte aligned: the leaf data, each leaf C-contiguous and 64-byte aligned.
 * A dict record: ndim, batch[ndim], one name per dim (-1 when unnamed, else a string),
 * nkeys, then per key: its string, its kind and the entry's record. A tensor record:
 * dtype, ndim, shape[ndim], where (0: copied into this region's data at a byte offset;
 * 1: a leaf that already lives in the `ref` storage, described by offset and strides,
 * not copied). A uniform value: its JSON text. Stacked values: count, texts, then the
 * positions as a tensor record. Unpacking checks every count and offset against the
 * region, so a corrupt region is an error, never a wild read.
 */
#include <stdlib.h>
#include <string.h>

#include "dict_internal.h"

enum { SHIP_MAGIC = 0x50494853, SHIP_VERSION = 1, SHIP_HEADER = 32, SHIP_ALIGN = 64 };
enum { WHERE_DATA = 0, WHERE_REF = 1 };

static int64_t align_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

/* ------------------------------------------------------------------ packing */

typedef struct packer {
  char *meta;        /* NULL while measuring */
  int64_t room;      /* words meta can hold (writes past it are dropped and counted) */
  int64_t words;     /* meta bytes / 8 so far */
  int64_t data;      /* data bytes so far */
  char *data_base;   /* where the data starts (writing only) */
  int64_t data_off;  /* byte offset of data_base in the region */
  td_storage *region;
  const td_storage *ref;
  int32_t status;
  bool meta_only;          /* the structure alone: offsets assigned, no data copied */
  int32_t kind;            /* the entry kind of the tensor being packed */
  const td_tensor **leaves; /* td_ship_leaves: where the data leaves go (cap of them) */
  int64_t *offsets;
  int32_t *kinds;
  int64_t nleaves, cap;
} packer;

static void put(packer *p, int64_t v) {
  if (p->meta && p->words < p->room) memcpy(p->meta + p->words * 8, &v, 8);
  p->words++;
}

static void put_str(packer *p, const char *s, int64_t len) {
  put(p, len);
  int64_t padded = align_up(len + 1, 8);
  if (p->meta && p->words + padded / 8 <= p->room) {
    char *dst = p->meta + p->words * 8;
    memcpy(dst, s, (size_t)len);
    memset(dst + len, 0, (size_t)(padded - len));
  }
  p->words += padded / 8;
}

static int32_t pack_tensor(packer *p, const td_tensor *t) {
  if (!td_check_cpu("ship", t, "leaf")) return TD_EINVAL;
  put(p, t->dtype);
  put(p, t->ndim);
  for (int32_t i = 0; i < t->ndim; i++) put(p, t->shape[i]);
  if (p->ref && t->storage == p->ref) {
    put(p, WHERE_REF);
    put(p, t->offset);
    for (int32_t i = 0; i < t->ndim; i++) put(p, t->strides[i]);
    return 0;
  }
  int64_t numel = 1;
  for (int32_t i = 0; i < t->ndim; i++) numel *= t->shape[i];
  int64_t at = align_up(p->data, SHIP_ALIGN);
  put(p, WHERE_DATA);
  put(p, at);
  p->data = at + numel * t->itemsize;
  if (p->nleaves < p->cap) {
    p->leaves[p->nleaves] = t;
    p->offsets[p->nleaves] = at;
    p->kinds[p->nleaves] = p->kind;
  }
  p->nleaves++;
  if (!p->meta || p->meta_only || numel == 0) return 0;
  td_tensor dst = {0};
  dst.storage = p->region;
  dst.itemsize = t->itemsize;
  dst.offset = (p->data_off + at) / t->itemsize;
  dst.ndim = t->ndim;
  dst.dtype = t->dtype;
  int64_t stride = 1;
  for (int32_t i = t->ndim - 1; i >= 0; i--) {
    dst.shape[i] = t->shape[i];
    dst.strides[i] = stride;
    stride *= t->shape[i];
  }
  return td_tensor_copy_(&dst, t);
}

static int32_t pack_dict(packer *p, const td_dict *d, int depth) {
  if (depth > TD_DICT_MAX_DEPTH) return td_fail(TD_EINVAL, "ship: containers nested too deep");
  put(p, d->head.ndim);
  for (int32_t i = 0; i < d->head.ndim; i++) put(p, d->head.shape[i]);
  for (int32_t i = 0; i < d->head.ndim; i++) {
    const char *name = d->names[i];
    if (name) put_str(p, name, (int64_t)strlen(name));
    else put(p, -1);
  }
  int32_t n = d->keys->n;
  put(p, n);
  for (int32_t i = 0; i < n; i++) {
    const td_entry *e = &d->entries[i];
    put_str(p, td_dict_key(d, i), d->keys->meta[i].len);
    put(p, e->kind);
    p->kind = e->kind;
    int32_t rc = 0;
    switch (e->kind) {
      case TD_ENTRY_TENSOR: rc = pack_tensor(p, &e->t); break;
      case TD_ENTRY_DICT: rc = pack_dict(p, e->child, depth + 1); break;
      case TD_ENTRY_VALUE: {
        const char *s = e->values->texts[0];
        put_str(p, s, (int64_t)strlen(s));
        break;
      }
      default: { /* TD_ENTRY_VALUES */
        put(p, e->values->n);
        for (int64_t j = 0; j < e->values->n; j++) {
          const char *s = e->values->texts[j];
          put_str(p, s, (int64_t)strlen(s));
        }
        p->kind = TD_ENTRY_VALUES;
        rc = pack_tensor(p, &e->t);
        break;
      }
    }
    if (rc < 0) return td_dict_fail_key(rc, "ship", td_dict_key(d, i));
  }
  return 0;
}

static int64_t data_start(int64_t words) { return align_up(SHIP_HEADER + words * 8, SHIP_ALIGN); }

TD_EXPORT int64_t td_ship_size(const td_dict *d, const td_storage *ref) {
  if (!d) return td_fail(TD_EINVAL, "ship: container is NULL");
  packer p = {.ref = ref};
  int32_t rc = pack_dict(&p, d, 0);
  if (rc < 0) return rc;
  return data_start(p.words) + p.data;
}

TD_EXPORT int64_t td_ship_pack(const td_dict *d, td_storage *region, const td_storage *ref) {
  if (!d || !region) return td_fail(TD_EINVAL, "ship: container or region is NULL");
  packer m = {.ref = ref};
  int32_t rc = pack_dict(&m, d, 0);
  if (rc < 0) return rc;
  int64_t total = data_start(m.words) + m.data;
  if (total > region->nbytes)
    return td_fail(TD_EINVAL, "ship: the container needs %lld bytes, the region holds %lld",
                   (long long)total, (long long)region->nbytes);
  if (!region->writable) return td_fail(TD_EREADONLY, "ship: the region is read-only");
  packer p = {.meta = region->data + SHIP_HEADER, .room = m.words, .region = region, .ref = ref,
              .data_off = data_start(m.words)};
  p.data_base = region->data + p.data_off;
  rc = pack_dict(&p, d, 0);
  if (rc < 0) return rc;
  int64_t head[4] = {SHIP_MAGIC, SHIP_VERSION, p.words, p.data};
  memcpy(region->data, head, sizeof head);
  return total;
}

/* The structure alone (tensordict.dist's transport: the leaves' bytes travel as
 * messages of their own, from and into the leaves' memory). The same meta as
 * td_ship_pack's, data offsets included, followed by no data. */
static int64_t meta_bytes(int64_t words) { return SHIP_HEADER + words * 8; }

TD_EXPORT int64_t td_ship_meta_size(const td_dict *d) {
  if (!d) return td_fail(TD_EINVAL, "ship: container is NULL");
  packer p = {.meta_only = true};
  int32_t rc = pack_dict(&p, d, 0);
  return rc < 0 ? rc : meta_bytes(p.words);
}

TD_EXPORT int64_t td_ship_pack_meta(const td_dict *d, td_storage *region) {
  if (!d || !region) return td_fail(TD_EINVAL, "ship: container or region is NULL");
  if (!region->writable) return td_fail(TD_EREADONLY, "ship: the region is read-only");
  /* One walk: what does not fit is counted, not written (a send packs every time). */
  int64_t room = region->nbytes < SHIP_HEADER ? 0 : (region->nbytes - SHIP_HEADER) / 8;
  packer p = {.meta = region->data + SHIP_HEADER, .room = room, .meta_only = true};
  int32_t rc = pack_dict(&p, d, 0);
  if (rc < 0) return rc;
  int64_t total = meta_bytes(p.words);
  if (total > region->nbytes)
    return td_fail(TD_EINVAL, "ship: the structure needs %lld bytes, the region holds %lld",
                   (long long)total, (long long)region->nbytes);
  int64_t head[4] = {SHIP_MAGIC, SHIP_VERSION, p.words, p.data};
  memcpy(region->data, head, sizeof head);
  return total;
}

TD_EXPORT int64_t td_ship_leaves(const td_dict *d, const td_tensor **leaves, int64_t *offsets,
                                 int32_t *kinds, int64_t cap) {
  if (!d) return td_fail(TD_EINVAL, "ship: container is NULL");
  if (cap > 0 && (!leaves || !offsets || !kinds)) return td_fail(TD_EINVAL, "ship: NULL leaf arrays");
  packer p = {.meta_only = true, .leaves = leaves, .offsets = offsets, .kinds = kinds,
              .cap = cap < 0 ? 0 : cap};
  int32_t rc = pack_dict(&p, d, 0);
  return rc < 0 ? rc : p.nleaves;
}

/* ---------------------------------------------------------------- unpacking */

typedef struct reader {
  const char *meta;
  int64_t words, pos;
  td_storage *region, *ref;
  int64_t data_off, data_bytes;
  bool data_later; /* td_ship_unpack_meta: the leaves' bytes are not there yet */
} reader;

static int32_t corrupt(const char *what) {
  return td_fail(TD_EINVAL, "ship: corrupt region (%s)", what);
}

static bool get(reader *r, int64_t *v) {
  if (r->pos >= r->words) return false;
  memcpy(v, r->meta + r->pos * 8, 8);
  r->pos++;
  return true;
}

/* A string's bytes (NUL-terminated in the region) and length. */
static const char *get_str(reader *r, int64_t *len) {
  if (!get(r, len) || *len < 0 || *len >= (r->words - r->pos) * 8) return NULL; /* no overflow below */
  int64_t padded = align_up(*len + 1, 8) / 8;
  if (padded > r->words - r->pos) return NULL;
  const char *s = r->meta + r->pos * 8;
  r->pos += padded;
  return s[*len] == '\0' ? s : NULL;
}

/* The tensor record at r as an owned header over the region or ref. */
static td_tensor *get_tensor(reader *r) {
  int64_t dtype, ndim, where;
  int64_t shape[TD_MAX_DIMS] = {0}, strides[TD_MAX_DIMS] = {0};
  if (!get(r, &dtype) || dtype < 0 || dtype >= TD_NUM_DTYPES) return corrupt("dtype"), NULL;
  if (!get(r, &ndim) || ndim < 0 || ndim > TD_MAX_DIMS) return corrupt("ndim"), NULL;
  for (int64_t i = 0; i < ndim; i++)
    if (!get(r, &shape[i]) || shape[i] < 0) return corrupt("shape"), NULL;
  if (!get(r, &where)) return corrupt("leaf"), NULL;
  int64_t at;
  if (!get(r, &at) || at < 0) return corrupt("offset"), NULL;
  if (where == WHERE_REF) {
    if (!r->ref) return corrupt("a leaf refers to a region that is not given"), NULL;
    for (int64_t i = 0; i < ndim; i++)
      if (!get(r, &strides[i]) || strides[i] < 0) return corrupt("strides"), NULL;
    /* td_tensor_from_storage checks every reachable element lies in ref. */
    return td_tensor_from_storage(r->ref, at, (int32_t)ndim, shape, strides, (int32_t)dtype);
  }
  if (where != WHERE_DATA) return corrupt("leaf place"), NULL;
  int64_t itemsize = td_itemsizes[dtype];
  if (at % itemsize || at > r->data_bytes) return corrupt("offset"), NULL;
  int64_t off = (r->data_off + at) / itemsize;
  return td_tensor_from_storage(r->region, off, (int32_t)ndim, shape, NULL, (int32_t)dtype);
}

/* Every position of a stack of values names one of its n texts (a corrupt region must
 * not leave a position that td_dict_value_borrow answers with NULL). */
static int32_t check_positions(const td_tensor *pos, int64_t n) {
  td_tensor *c = td_tensor_contiguous(pos);
  if (!c) return td_last_status();
  const int64_t *p = td_tensor_data_borrow(c);
  int64_t m = td_tensor_numel(c);
  bool ok = true;
  for (int64_t k = 0; k < m; k++) ok &= p[k] >= 0 && p[k] < n;
  td_tensor_release(c);
  return ok ? 0 : corrupt("a stacked value's position");
}

static td_dict *get_dict(reader *r, int depth);

static int32_t get_entry(reader *r, td_dict *d, const char *key, int64_t len, int depth) {
  int64_t kind;
  if (!get(r, &kind)) return corrupt("kind");
  int32_t rc;
  switch (kind) {
    case TD_ENTRY_TENSOR: {
      td_tensor *t = get_tensor(r);
      if (!t) return td_last_status();
      rc = td_dict_set_tensor(d, key, len, t);
      td_tensor_release(t);
      return rc;
    }
    case TD_ENTRY_DICT: {
      td_dict *c = get_dict(r, depth + 1);
      if (!c) return td_last_status();
      rc = td_dict_set_dict(d, key, len, c);
      td_dict_release(c);
      return rc;
    }
    case TD_ENTRY_VALUE: {
      int64_t n;
      const char *s = get_str(r, &n);
      if (!s) return corrupt("value");
      return td_dict_set_value(d, key, len, s);
    }
    case TD_ENTRY_VALUES: {
      int64_t n;
      if (!get(r, &n) || n < 0 || n > r->words) return corrupt("value count");
      const char **texts = malloc(sizeof *texts * (size_t)(n ? n : 1));
      if (!texts) return td_fail(TD_ENOMEM, "ship: out of memory");
      for (int64_t j = 0; j < n; j++) {
        int64_t sl;
        texts[j] = get_str(r, &sl);
        if (!texts[j]) {
          free(texts);
          return corrupt("value");
        }
      }
      td_tensor *pos = get_tensor(r);
      if (!pos) {
        free(texts);
        return td_last_status();
      }
      rc = r->data_later || pos->dtype != TD_INT64 ? 0 : check_positions(pos, n);
      if (rc == 0) rc = td_dict_set_values(d, key, len, n, texts, pos);
      td_tensor_release(pos);
      free(texts);
      return rc;
    }
    default: return corrupt("kind");
  }
}

static td_dict *get_dict(reader *r, int depth) {
  if (depth > TD_DICT_MAX_DEPTH) return corrupt("nesting"), NULL;
  int64_t ndim, batch[TD_MAX_DIMS] = {0};
  if (!get(r, &ndim) || ndim < 0 || ndim > TD_MAX_DIMS) return corrupt("batch dims"), NULL;
  for (int64_t i = 0; i < ndim; i++)
    if (!get(r, &batch[i]) || batch[i] < 0) return corrupt("batch size"), NULL;
  const char *names[TD_MAX_DIMS];
  bool named = false;
  for (int64_t i = 0; i < ndim; i++) {
    int64_t mark;
    if (r->pos >= r->words) return corrupt("names"), NULL;
    memcpy(&mark, r->meta + r->pos * 8, 8);
    if (mark == -1) {
      r->pos++;
      names[i] = NULL;
      continue;
    }
    int64_t len;
    names[i] = get_str(r, &len);
    if (!names[i]) return corrupt("names"), NULL;
    named = true;
  }
  td_dict *d = td_dict_new((int32_t)ndim, batch);
  if (!d) return NULL;
  if (named && td_dict_set_names(d, names) < 0) goto fail;
  int64_t n;
  if (!get(r, &n) || n < 0 || n > r->words) {
    corrupt("key count");
    goto fail;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t len;
    const char *key = get_str(r, &len);
    if (!key) {
      corrupt("key");
      goto fail;
    }
    if (get_entry(r, d, key, len, depth) < 0) goto fail;
  }
  return d;
fail:
  td_dict_release(d);
  return NULL;
}

/* The header of region: its meta words and data bytes, checked against what region
 * holds of meta (the data may lie elsewhere). */
static int32_t read_head(const td_storage *region, int64_t *words, int64_t *data) {
  int64_t head[4];
  if (region->nbytes < SHIP_HEADER) return corrupt("too small");
  memcpy(head, region->data, sizeof head);
  if (head[0] != SHIP_MAGIC || head[1] != SHIP_VERSION) return corrupt("magic");
  if (head[2] < 0 || head[3] < 0 || head[2] > (region->nbytes - SHIP_HEADER) / 8)
    return corrupt("sizes");
  *words = head[2];
  *data = head[3];
  return 0;
}

TD_EXPORT int64_t td_ship_data_bytes(const td_storage *meta) {
  if (!meta) return td_fail(TD_EINVAL, "ship: region is NULL");
  int64_t words = 0, data = 0;
  int32_t rc = read_head(meta, &words, &data);
  return rc < 0 ? rc : data;
}

TD_EXPORT td_dict *td_ship_unpack_meta(td_storage *meta, td_storage *data) {
  if (!meta || !data) return td_fail_null(TD_EINVAL, "ship: structure or data region is NULL");
  int64_t words = 0, bytes = 0;
  if (read_head(meta, &words, &bytes) < 0) return NULL;
  if (bytes > data->nbytes)
    return td_fail_null(TD_EINVAL, "ship: the structure's leaves need %lld bytes, the data region "
                        "holds %lld", (long long)bytes, (long long)data->nbytes);
  reader r = {.meta = meta->data + SHIP_HEADER, .words = words, .region = data,
              .data_off = 0, .data_bytes = bytes, .data_later = true};
  return get_dict(&r, 0);
}

static int32_t check_dict(const td_dict *d, int depth) {
  if (depth > TD_DICT_MAX_DEPTH) return corrupt("nesting");
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    int32_t rc = 0;
    if (e->kind == TD_ENTRY_VALUES) rc = check_positions(&e->t, e->values->n);
    else if (e->kind == TD_ENTRY_DICT) rc = check_dict(e->child, depth + 1);
    if (rc < 0) return rc;
  }
  return 0;
}

TD_EXPORT int32_t td_ship_check(const td_dict *d) {
  if (!d) return td_fail(TD_EINVAL, "ship: container is NULL");
  return check_dict(d, 0);
}

TD_EXPORT td_dict *td_ship_unpack(td_storage *region, td_storage *ref) {
  if (!region) return td_fail_null(TD_EINVAL, "ship: region is NULL");
  int64_t words = 0, bytes = 0;
  if (read_head(region, &words, &bytes) < 0) return NULL;
  reader r = {.meta = region->data + SHIP_HEADER, .words = words, .region = region,
              .ref = ref, .data_off = data_start(words), .data_bytes = bytes};
  if (r.data_off > region->nbytes || bytes > region->nbytes - r.data_off)
    return corrupt("sizes"), NULL;
  return get_dict(&r, 0);
}
