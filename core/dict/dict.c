/*
 * dict.c: the container itself: lifetime, the shared ordered key set, setting,
 * finding, deleting and renaming entries, lock, names, device and batch size.
 * Batch operations over the leaves are in dict_map.c and the files beside it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dict_internal.h"

/* Handles compare a container's version only with itself, so a per-container count is
 * enough (no shared atomic counter). A double counts exactly to 2^53 changes. */
void td_dict_touch(td_dict *d) {
  d->head.version += 1;
  /* Views made from now on borrow the new leaves: the old set stays with the views
   * already made. */
  if (atomic_load_explicit(&d->lent, memory_order_relaxed))
    td_leaf_refs_release(atomic_exchange(&d->lent, NULL));
}

/* ------------------------------------------------------------- lent references */

void td_leaf_refs_release(td_leaf_refs *r) {
  if (!r || atomic_fetch_sub(&r->refcount, 1) != 1) return;
  for (int32_t i = 0; i < r->n; i++)
    if (r->s[i]) td_storage_release(r->s[i]);
  free(r);
}

/* The set is a cache of what d holds, so d stays logically const: concurrent readers
 * may both make one; the first installed stays and the other serves its own caller. */
td_leaf_refs *td_dict_lent(const td_dict *cd) {
  td_dict *d = (td_dict *)cd;
  td_leaf_refs *r = atomic_load_explicit(&d->lent, memory_order_acquire);
  if (r) {
    atomic_fetch_add_explicit(&r->refcount, 1, memory_order_relaxed);
    return r;
  }
  int32_t n = d->keys->n;
  r = malloc(sizeof *r + sizeof *r->s * (size_t)n);
  if (!r) return NULL;
  r->n = n;
  for (int32_t i = 0; i < n; i++) {
    r->s[i] = d->entries[i].t.storage; /* NULL for containers and single values */
    td_storage_retain(r->s[i]);
  }
  atomic_init(&r->refcount, 2); /* d's and the caller's */
  td_leaf_refs *none = NULL;
  if (!atomic_compare_exchange_strong(&d->lent, &none, r))
    atomic_store_explicit(&r->refcount, 1, memory_order_relaxed);
  return r;
}

/* ------------------------------------------------------------------------- key sets */

static uint64_t hash_key(const char *key, int64_t len) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (int64_t i = 0; i < len; i++) h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
  return h;
}

static void keys_free(td_keys *k) {
  free(k->meta), free(k->table), free(k->arena), free(k);
}

/* The first table slot for a hash: FNV's low bits cluster for keys that differ only in
 * their last characters ("k1".."k256"), so mix the whole hash in first. */
static inline uint32_t home_slot(uint64_t h, uint32_t mask) {
  return (uint32_t)((h * 0x9E3779B97F4A7C15ULL) >> 40) & mask;
}

static td_keys *keys_new(int32_t cap, int64_t arena_cap) {
  td_keys *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  atomic_init(&k->refcount, 1);
  if (cap < 4) cap = 4;
  if (arena_cap < 64) arena_cap = 64;
  int32_t tcap = 8;
  while (tcap < 2 * cap) tcap *= 2;
  k->cap = cap;
  k->table_cap = tcap;
  k->arena_cap = arena_cap;
  k->meta = malloc(sizeof *k->meta * (size_t)cap);
  k->table = calloc((size_t)tcap, sizeof *k->table);
  k->arena = malloc((size_t)arena_cap);
  if (!k->meta || !k->table || !k->arena) {
    keys_free(k);
    return NULL;
  }
  return k;
}

static void keys_release(td_keys *k) {
  if (!k || atomic_fetch_sub(&k->refcount, 1) != 1) return;
  keys_free(k);
}

static int32_t keys_find(const td_keys *k, const char *key, int64_t len, uint64_t h) {
  uint32_t mask = (uint32_t)k->table_cap - 1;
  for (uint32_t s = home_slot(h, mask);; s = (s + 1) & mask) {
    int32_t e = k->table[s];
    if (e == 0) return -1;
    const td_key_meta *m = &k->meta[e - 1];
    if (m->hash == h && m->len == len && memcmp(k->arena + m->off, key, (size_t)len) == 0)
      return e - 1;
  }
}

static void keys_reindex(td_keys *k) {
  memset(k->table, 0, sizeof *k->table * (size_t)k->table_cap);
  uint32_t mask = (uint32_t)k->table_cap - 1;
  for (int32_t i = 0; i < k->n; i++) {
    uint32_t s = home_slot(k->meta[i].hash, mask);
    while (k->table[s]) s = (s + 1) & mask;
    k->table[s] = i + 1;
  }
}

/* Room for need keys: grows the metadata and the table (which is then rebuilt). */
static bool keys_reserve(td_keys *k, int32_t need) {
  if (need <= k->cap) return true;
  int32_t cap = k->cap * 2;
  while (cap < need) cap *= 2;
  td_key_meta *meta = realloc(k->meta, sizeof *meta * (size_t)cap);
  if (!meta) return false;
  k->meta = meta;
  k->cap = cap; /* before anything else can fail: meta's size is cap's */
  int32_t tcap = k->table_cap;
  while (tcap < 2 * cap) tcap *= 2;
  if (tcap != k->table_cap) {
    int32_t *table = calloc((size_t)tcap, sizeof *table);
    if (!table) return false;
    free(k->table);
    k->table = table;
    k->table_cap = tcap;
  }
  k->cap = cap;
  keys_reindex(k);
  return true;
}

/* Room for extra more bytes of names (a constructor reserves all of its names at once). */
static bool keys_reserve_names(td_keys *k, int64_t extra) {
  if (k->arena_len + extra <= k->arena_cap) return true;
  int64_t cap = k->arena_cap * 2;
  while (cap < k->arena_len + extra) cap *= 2;
  char *a = realloc(k->arena, (size_t)cap);
  if (!a) return false;
  k->arena = a;
  k->arena_cap = cap;
  return true;
}

/* Appends a NUL-terminated copy of key to the arena; *off receives where. Names are
 * never freed one by one (a deleted or renamed key leaves its bytes until the key set
 * goes), so adding a key is one copy, not a malloc. */
static bool keys_store_name(td_keys *k, const char *key, int64_t len, int64_t *off) {
  if (!keys_reserve_names(k, len + 1)) return false;
  *off = k->arena_len;
  memcpy(k->arena + k->arena_len, key, (size_t)len);
  k->arena[k->arena_len + len] = '\0';
  k->arena_len += len + 1;
  return true;
}

static td_keys *keys_copy(const td_keys *src) {
  td_keys *k = keys_new(src->cap, src->arena_cap);
  if (!k) return NULL;
  memcpy(k->meta, src->meta, sizeof *k->meta * (size_t)src->n);
  memcpy(k->arena, src->arena, (size_t)src->arena_len);
  k->arena_len = src->arena_len;
  k->n = src->n;
  keys_reindex(k);
  return k;
}

/* Make d's key set its own before changing it. */
static bool own_keys(td_dict *d) {
  if (atomic_load(&d->keys->refcount) == 1) return true;
  td_keys *k = keys_copy(d->keys);
  if (!k) return false;
  keys_release(d->keys);
  d->keys = k;
  return true;
}

/* --------------------------------------------------------------------- lifetime */

/* Marks entries [from, to) empty. Only the fields td_entry_clear reads are set: zeroing
 * 320-byte entries would cost more than the rest of td[i] on small containers. */
static void entries_init(td_entry *e, int32_t from, int32_t to) {
  for (int32_t i = from; i < to; i++) {
    e[i].kind = TD_ENTRY_TENSOR;
    e[i].pinned = 0;
    e[i].borrowed = 0;
    e[i].t.storage = NULL;
    e[i].t.ndim = 0;
    e[i].child = NULL;
    e[i].values = NULL;
  }
}

/* The entries of a container made with its size known (td_dict_like: td[i], stacks,
 * maps) live in the container's own block, right after the struct: one malloc and one
 * free per container instead of two. Growing past them moves the entries to a block
 * of their own (entries_reserve); inline_entries tells the two apart. */
static td_entry *inline_entries(const td_dict *d) { return (td_entry *)(void *)(d + 1); }

_Static_assert(sizeof(td_dict) % _Alignof(td_entry) == 0, "entries after td_dict stay aligned");

/* A container with room for cap entries (none until the first set when 0: every byte
 * here is memory a dead container holds until the GC finalises its handle). */
static td_dict *dict_alloc(int32_t cap) {
  td_dict *d = malloc(sizeof *d + sizeof(td_entry) * (size_t)cap);
  if (!d) return NULL;
  memset(d, 0, sizeof *d);
  atomic_init(&d->refcount, 1);
  atomic_init(&d->lent, NULL);
  d->entries = cap > 0 ? inline_entries(d) : NULL;
  entries_init(d->entries, 0, cap);
  d->cap = cap;
  d->head.device_type = TD_DEVICE_NONE;
  td_dict_touch(d);
  return d;
}

static bool batch_is_valid(const char *call, int32_t ndim, const int64_t *batch) {
  return td_shape_is_valid(call, ndim, batch, NULL);
}

TD_EXPORT td_dict *td_dict_new(int32_t ndim, const int64_t *batch) {
  if (!batch_is_valid("TensorDict", ndim, batch)) return NULL;
  td_dict *d = dict_alloc(0);
  if (!d || !(d->keys = keys_new(4, 64))) {
    if (d) free(d->entries), free(d);
    return td_fail_null(TD_ENOMEM, "TensorDict: out of memory");
  }
  d->head.ndim = ndim;
  if (ndim) memcpy(d->head.shape, batch, sizeof *batch * (size_t)ndim);
  return d;
}

td_dict *td_dict_like(const td_dict *src, int32_t ndim, const int64_t *batch) {
  td_dict *d = dict_alloc(src->keys->n);
  if (!d) return td_fail_null(TD_ENOMEM, "TensorDict: out of memory");
  d->keys = src->keys;
  atomic_fetch_add(&d->keys->refcount, 1);
  d->head.nkeys = src->head.nkeys;
  d->head.locked = src->head.locked;
  d->head.device_type = src->head.device_type;
  d->head.device_index = src->head.device_index;
  if (batch) {
    d->head.ndim = ndim;
    if (ndim) memcpy(d->head.shape, batch, sizeof *batch * (size_t)ndim);
  } else {
    d->head.ndim = src->head.ndim;
    memcpy(d->head.shape, src->head.shape, sizeof d->head.shape);
  }
  /* Names follow while the batch keeps its rank (shape ops that change it drop them;
   * the Lua layer recomputes names where the op defines them). */
  if (src->head.has_names && d->head.ndim == src->head.ndim) {
    for (int32_t i = 0; i < d->head.ndim; i++)
      if (src->names[i]) d->names[i] = strdup(src->names[i]);
    d->head.has_names = 1;
  }
  return d;
}

TD_EXPORT void td_dict_retain(td_dict *d) {
  if (d) atomic_fetch_add(&d->refcount, 1);
}

TD_EXPORT void td_dict_release(td_dict *d) {
  if (!d || atomic_fetch_sub(&d->refcount, 1) != 1) return;
  for (int32_t i = 0; i < d->keys->n; i++) { /* dying: nothing borrows any more */
    td_entry *e = &d->entries[i];
    if (e->t.storage && !e->borrowed) td_storage_release(e->t.storage);
    if (e->child) td_dict_release(e->child);
    if (e->values) td_values_release(e->values);
  }
  for (int32_t i = 0; i < d->nretired; i++) td_storage_release(d->retired[i]);
  td_leaf_refs_release(d->held);
  td_leaf_refs_release(atomic_load_explicit(&d->lent, memory_order_relaxed));
  if (d->head.has_names)
    for (int32_t i = 0; i < TD_MAX_DIMS; i++) free(d->names[i]);
  keys_release(d->keys);
  free(d->retired);
  free(d->prefix);
  if (d->entries != inline_entries(d)) free(d->entries);
  free(d);
}

/* One call per GC cycle: a call from the sweep (a finaliser, so interpreted Lua) cost
 * ~0.2 us per container, as much as the rest of the cycle's work for it. */
TD_EXPORT void td_dict_release_slots(td_dict **ds, const int32_t *slots, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    td_dict_release(ds[slots[i]]);
    ds[slots[i]] = NULL;
  }
}

TD_EXPORT const td_dict_head *td_dict_head_borrow(const td_dict *d) { return &d->head; }

/* ---------------------------------------------------------------------- entries */

td_values *td_values_new(int64_t n) {
  td_values *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  v->texts = calloc((size_t)(n ? n : 1), sizeof *v->texts);
  if (!v->texts) {
    free(v);
    return NULL;
  }
  atomic_init(&v->refcount, 1);
  v->n = n;
  return v;
}
void td_values_retain(td_values *v) {
  if (v) atomic_fetch_add(&v->refcount, 1);
}
void td_values_release(td_values *v) {
  if (!v || atomic_fetch_sub(&v->refcount, 1) != 1) return;
  for (int64_t i = 0; i < v->n; i++) free(v->texts[i]);
  free(v->texts);
  free(v);
}

td_values *td_values_copy(const td_values *v) {
  td_values *c = td_values_new(v->n);
  for (int64_t i = 0; c && i < v->n; i++) {
    if (!(c->texts[i] = strdup(v->texts[i]))) {
      td_values_release(c); /* frees the texts copied so far (the rest are NULL) */
      c = NULL;
    }
  }
  return c ? c : td_fail_null(TD_ENOMEM, "copy: out of memory for %lld non-tensor values",
                              (long long)v->n);
}

int32_t td_entry_take_values(td_entry *o, const td_entry *src) {
  if (o->t.storage == src->t.storage) {
    o->values = src->values;
    td_values_retain(o->values);
    return 0;
  }
  o->values = td_values_copy(src->values);
  return o->values ? 0 : td_last_status();
}

int32_t td_entry_copy(td_entry *dst, const td_entry *src) {
  if (src->kind != TD_ENTRY_VALUES) {
    td_entry_share(dst, src);
    return 0;
  }
  memset(dst, 0, sizeof *dst);
  int32_t st = td_take_owned(&dst->t, td_tensor_clone(&src->t));
  if (st) {
    memset(&dst->t, 0, sizeof dst->t);
    return st;
  }
  if ((st = td_entry_take_values(dst, src))) {
    td_storage_release(dst->t.storage);
    memset(&dst->t, 0, sizeof dst->t);
    return st;
  }
  dst->kind = TD_ENTRY_VALUES;
  return 0;
}

static void retire(td_dict *d, td_storage *s) {
  if (d->nretired == d->retired_cap) {
    int32_t cap = d->retired_cap ? 2 * d->retired_cap : 4;
    td_storage **r = realloc(d->retired, sizeof *r * (size_t)cap);
    if (!r) return; /* cannot record it: leak the reference rather than free early */
    d->retired = r;
    d->retired_cap = cap;
  }
  d->retired[d->nretired++] = s;
}

void td_entry_clear(td_dict *d, td_entry *e) {
  /* A borrowed storage stays with d->held until d dies, pinned or not. */
  if (e->t.storage && !e->borrowed) {
    if (e->pinned)
      retire(d, e->t.storage);
    else
      td_storage_release(e->t.storage);
  }
  td_dict_release(e->child);
  td_values_release(e->values);
  e->kind = TD_ENTRY_TENSOR;
  e->pinned = 0;
  e->borrowed = 0;
  e->t.storage = NULL;
  e->t.ndim = 0;
  e->child = NULL;
  e->values = NULL;
}

void td_entry_share(td_entry *dst, const td_entry *src) {
  dst->kind = src->kind;
  if (src->t.storage) {
    td_header_copy(&dst->t, &src->t);
  } else {
    dst->t.storage = NULL;
    dst->t.ndim = 0;
  }
  dst->child = src->child;
  dst->values = src->values;
  dst->pinned = 0;
  dst->borrowed = 0;
  if (dst->t.storage) td_storage_retain(dst->t.storage);
  td_dict_retain(dst->child);
  td_values_retain(dst->values);
}

/* A header that nothing else holds (refcount 1: a kernel's fresh result) hands its
 * storage reference over as it is: no retain and release pair, two atomic operations a
 * leaf on the joins' and maps' path. Its own memory goes now, or with the storage when
 * it is the header inside a small block (zeroed there, so no release can reach it). */
int32_t td_take_owned(td_tensor *out, td_tensor *owned) {
  if (!owned) return td_last_status() ? td_last_status() : TD_ENOMEM;
  td_header_copy(out, owned);
  if (__atomic_load_n(&owned->refcount, __ATOMIC_ACQUIRE) != 1) {
    td_storage_retain(out->storage);
    td_tensor_release(owned);
  } else if (td_header_is_inline(owned)) {
    owned->refcount = 0;
  } else {
    free(owned);
  }
  return 0;
}

void td_hold_view(td_tensor *out, const td_tensor *view) {
  if (out != view) td_header_copy(out, view);
  out->refcount = 0;
  td_storage_retain(out->storage);
}

int32_t td_dict_fail_key(int32_t status, const char *call, const char *path) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", td_last_error());
  /* Messages of the kernels start with their own call name: keep them whole. */
  return td_fail(status, "%s: key '%s': %s", call, path, msg);
}

const char *td_key_path_text(const td_key_path *p, char *buf) {
  const char *keys[64];
  int n = 0;
  for (; p && n < 64; p = p->parent) keys[n++] = p->key;
  size_t used = 0;
  buf[0] = '\0';
  for (int i = n - 1; i >= 0 && used < TD_PATH_CHARS - 1; i--) {
    int w = snprintf(buf + used, TD_PATH_CHARS - used, i == n - 1 ? "%s" : ".%s", keys[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
  return buf;
}

int32_t td_dict_fail_at(int32_t status, const char *call, const td_key_path *p) {
  char buf[TD_PATH_CHARS];
  return td_dict_fail_key(status, call, td_key_path_text(p, buf));
}

TD_EXPORT int32_t td_dict_find(const td_dict *d, const char *key, int64_t len) {
  return keys_find(d->keys, key, len, hash_key(key, len));
}

int32_t td_dict_find_like(const td_dict *d, const td_dict *other, int32_t i) {
  const td_keys *a = d->keys, *b = other->keys;
  if (a == b) return i;
  if (i < a->n && a->meta[i].hash == b->meta[i].hash && a->meta[i].len == b->meta[i].len &&
      memcmp(a->arena + a->meta[i].off, b->arena + b->meta[i].off, (size_t)b->meta[i].len) == 0)
    return i;
  return keys_find(a, b->arena + b->meta[i].off, b->meta[i].len, b->meta[i].hash);
}

TD_EXPORT const char *td_dict_key_borrow(const td_dict *d, int32_t i, int64_t *len) {
  if (i < 0 || i >= d->keys->n) return NULL;
  if (len) *len = d->keys->meta[i].len;
  return td_dict_key(d, i);
}

TD_EXPORT int32_t td_dict_kind(const td_dict *d, int32_t i) {
  if (i < 0 || i >= d->keys->n) return td_fail(TD_EINDEX, "TensorDict: no entry %d", (int)i);
  return d->entries[i].kind;
}

TD_EXPORT const td_tensor *td_dict_tensor_pin(td_dict *d, int32_t i) {
  if (i < 0 || i >= d->keys->n) return NULL;
  td_entry *e = &d->entries[i];
  if (e->kind != TD_ENTRY_TENSOR && e->kind != TD_ENTRY_VALUES) return NULL;
  e->pinned = 1;
  return &e->t;
}

TD_EXPORT td_dict *td_dict_child(td_dict *d, int32_t i) {
  if (i < 0 || i >= d->keys->n || d->entries[i].kind != TD_ENTRY_DICT) return NULL;
  td_dict_retain(d->entries[i].child);
  return d->entries[i].child;
}

TD_EXPORT const char *td_dict_value_borrow(const td_dict *d, int32_t i, int64_t pos) {
  if (i < 0 || i >= d->keys->n) return NULL;
  const td_values *v = d->entries[i].values;
  if (!v || pos < 0 || pos >= v->n) return NULL;
  return v->texts[pos];
}

TD_EXPORT int64_t td_dict_value_count(const td_dict *d, int32_t i) {
  if (i < 0 || i >= d->keys->n || !d->entries[i].values) return 0;
  return d->entries[i].values->n;
}

/* --------------------------------------------------------------------- setting */

static const char *shape_str(char *buf, int32_t ndim, const int64_t *shape) {
  return td_format_shape(buf, TD_SHAPE_STR, ndim, shape);
}

static bool leads_with_batch(const td_dict *d, int32_t ndim, const int64_t *shape) {
  if (ndim < d->head.ndim) return false;
  for (int32_t i = 0; i < d->head.ndim; i++)
    if (shape[i] != d->head.shape[i]) return false;
  return true;
}

static bool check_tensor(const char *call, const td_dict *d, const char *key,
                         const td_tensor *t) {
  if (!t || !t->storage) {
    td_fail(TD_EINVAL, "%s: the tensor for '%s' is NULL", call, key);
    return false;
  }
  if (!leads_with_batch(d, t->ndim, t->shape)) {
    char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
    td_fail(TD_ESHAPE, "%s: batch size %s does not match the leading dims of '%s' (shape %s)",
            call, shape_str(a, d->head.ndim, d->head.shape), key,
            shape_str(b, t->ndim, t->shape));
    return false;
  }
  if (d->head.device_type != TD_DEVICE_NONE &&
      (t->storage->device_type != d->head.device_type ||
       (t->storage->device_type != TD_DEVICE_CPU &&
        t->storage->device_index != d->head.device_index))) {
    td_fail(TD_EINVAL, "%s: '%s' is on %s:%d but the TensorDict's device is %s:%d", call, key,
            t->storage->device_type == TD_DEVICE_CPU ? "cpu" : "cuda",
            (int)t->storage->device_index,
            d->head.device_type == TD_DEVICE_CPU ? "cpu" : "cuda", (int)d->head.device_index);
    return false;
  }
  return true;
}

/* The entry for key: an existing one (cleared, ready to refill) or a new one appended.
 * Returns its index or a negative code. */
/* Room for need entries: at least need, at least double (at least 4) when growing. An
 * empty container's entries hold nothing to keep, so a fresh block skips realloc's copy
 * of the old one. exact: exactly need, and the new entries are left for the caller to
 * fill (td_dict_set_tensors writes each whole: a second pass over a 256-leaf container's
 * 80 KB of entries cost 10% of its construction). */
static bool entries_reserve(td_dict *d, int32_t need, bool exact) {
  if (need <= d->cap) return true;
  int32_t cap = exact ? need : d->cap < 4 ? 4 : d->cap * 2;
  if (cap < need) cap = need;
  bool fresh = d->keys->n == 0, inline_now = d->entries == inline_entries(d);
  td_entry *e = fresh || inline_now ? malloc(sizeof *e * (size_t)cap)
                                    : realloc(d->entries, sizeof *e * (size_t)cap);
  if (!e) return false;
  if (fresh) {
    if (!inline_now) free(d->entries);
    d->cap = 0;
  } else if (inline_now) {
    memcpy(e, d->entries, sizeof *e * (size_t)d->cap);
  }
  if (!exact) entries_init(e, d->cap, cap);
  d->entries = e;
  d->cap = cap;
  return true;
}

/* Appends key (hash h) to a key set with room for it: its name, metadata and table
 * slot. Returns its index, or -1 when the name cannot be stored. */
static int32_t keys_append(td_keys *k, const char *key, int64_t len, uint64_t h) {
  int64_t off;
  if (!keys_store_name(k, key, len, &off)) return -1;
  int32_t i = k->n++;
  k->meta[i] = (td_key_meta){off, len, h};
  uint32_t mask = (uint32_t)k->table_cap - 1;
  uint32_t s = home_slot(h, mask);
  while (k->table[s]) s = (s + 1) & mask;
  k->table[s] = i + 1;
  return i;
}

static int32_t slot_for(const char *call, td_dict *d, const char *key, int64_t len) {
  if (!key || len < 0) return td_fail(TD_EINVAL, "%s: the key is NULL", call);
  /* Locked: no new keys and no replaced entries (as Python refuses); in-place writes
   * into leaves (set_, update_, index assignment) stay allowed. */
  if (d->head.locked)
    return td_fail(TD_EINVAL,
                   "%s: cannot set key '%.*s': the TensorDict is locked (write in place with "
                   "set_(), or unlock() it first)",
                   call, (int)len, key);
  uint64_t h = hash_key(key, len);
  int32_t i = keys_find(d->keys, key, len, h);
  if (i >= 0) {
    td_entry_clear(d, &d->entries[i]);
    td_dict_touch(d);
    return i;
  }
  if (!own_keys(d) || !keys_reserve(d->keys, d->keys->n + 1) ||
      !entries_reserve(d, d->keys->n + 1, false) || (i = keys_append(d->keys, key, len, h)) < 0)
    return td_fail(TD_ENOMEM, "%s: out of memory", call);
  entries_init(d->entries, i, i + 1);
  d->head.nkeys = d->keys->n;
  td_dict_touch(d);
  return i;
}

static char *key_copy(const char *key, int64_t len) {
  char *s = malloc((size_t)len + 1);
  if (s) {
    memcpy(s, key, (size_t)len);
    s[len] = '\0';
  }
  return s;
}

/* The batch-size check without building a C string for the key (the hot path). */
static bool check_tensor_key(const char *call, const td_dict *d, const char *key, int64_t len,
                             const td_tensor *t) {
  if (t && t->storage && leads_with_batch(d, t->ndim, t->shape) &&
      d->head.device_type == TD_DEVICE_NONE)
    return true;
  char *name = key_copy(key, len);
  if (!name) {
    td_fail(TD_ENOMEM, "%s: out of memory", call);
    return false;
  }
  bool ok = check_tensor(call, d, name, t);
  free(name);
  return ok;
}

TD_EXPORT int32_t td_dict_set_tensor(td_dict *d, const char *key, int64_t len,
                                     const td_tensor *t) {
  if (!key || len < 0) return td_fail(TD_EINVAL, "set: the key is NULL");
  if (!check_tensor_key("set", d, key, len, t)) return td_last_status();
  /* Hold t first: it may be this very entry's header (td.a = td.a) or point into the
   * entries array, which the slot may clear or move. */
  td_tensor held;
  td_hold_view(&held, t);
  int32_t i = slot_for("set", d, key, len);
  if (i < 0) {
    td_storage_release(held.storage);
    return i;
  }
  td_entry *e = &d->entries[i];
  e->kind = TD_ENTRY_TENSOR;
  td_header_copy(&e->t, &held);
  return i;
}

/* Sorting keys for td_dict_set_tensors: (8-byte big-endian prefix, index) pairs, so most
 * comparisons are one integer compare; equal prefixes fall back to the whole key. */
typedef struct sort_item {
  uint64_t prefix;
  int32_t index;
} sort_item;

typedef struct sort_keys {
  const char *const *keys;
  const int64_t *lens;
} sort_keys;

static uint64_t key_prefix(const char *key, int64_t len) {
  uint64_t p = 0;
  for (int64_t i = 0; i < 8; i++) p = (p << 8) | (i < len ? (unsigned char)key[i] : 0);
  return p;
}

static bool key_less(const sort_keys *k, const sort_item *a, const sort_item *b) {
  if (a->prefix != b->prefix) return a->prefix < b->prefix;
  int64_t la = k->lens[a->index], lb = k->lens[b->index];
  int c = memcmp(k->keys[a->index], k->keys[b->index], (size_t)(la < lb ? la : lb));
  return c < 0 || (c == 0 && la < lb);
}

/* A stable merge sort of items[0..n) using tmp[0..n). */
static void sort_items(const sort_keys *k, sort_item *items, sort_item *tmp, int32_t n) {
  if (n <= 16) { /* insertion sort */
    for (int32_t i = 1; i < n; i++) {
      sort_item x = items[i];
      int32_t j = i;
      while (j > 0 && key_less(k, &x, &items[j - 1])) {
        items[j] = items[j - 1];
        j--;
      }
      items[j] = x;
    }
    return;
  }
  int32_t h = n / 2;
  sort_items(k, items, tmp, h);
  sort_items(k, items + h, tmp + h, n - h);
  int32_t i = 0, j = h, o = 0;
  while (i < h && j < n) tmp[o++] = key_less(k, &items[j], &items[i]) ? items[j++] : items[i++];
  while (i < h) tmp[o++] = items[i++];
  while (j < n) tmp[o++] = items[j++];
  memcpy(items, tmp, sizeof *items * (size_t)n);
}

TD_EXPORT int32_t td_dict_set_tensors(td_dict *d, int32_t n, const char *const *keys,
                                      const int64_t *lens, const td_tensor *const *tensors) {
  if (n < 0 || (n > 0 && (!keys || !lens || !tensors)))
    return td_fail(TD_EINVAL, "TensorDict: %d tensors at NULL", (int)n);
  sort_item stack_items[64], stack_tmp[64];
  sort_item *items = n <= 64 ? stack_items : malloc(sizeof *items * (size_t)n);
  sort_item *tmp = n <= 64 ? stack_tmp : malloc(sizeof *tmp * (size_t)n);
  int32_t st = 0;
  if (!items || !tmp) {
    st = td_fail(TD_ENOMEM, "TensorDict: out of memory");
    goto done;
  }
  int64_t name_bytes = 0;
  for (int32_t j = 0; j < n; j++) {
    if (!keys[j] || lens[j] < 0) {
      st = td_fail(TD_EINVAL, "TensorDict: key %d is NULL", (int)j);
      goto done;
    }
    if (!check_tensor_key("TensorDict", d, keys[j], lens[j], tensors[j])) {
      st = td_last_status();
      goto done;
    }
    /* Each storage's count is written below: start bringing its line in now (one
     * miss per leaf, a quarter of the time of a 256-leaf construction unhidden). */
    __builtin_prefetch(tensors[j]->storage, 1);
    items[j] = (sort_item){key_prefix(keys[j], lens[j]), j};
    name_bytes += lens[j] + 1;
  }
  sort_keys sk = {keys, lens};
  sort_items(&sk, items, tmp, n);
  /* Room for every key at once, so the loop below only appends. */
  if (!own_keys(d) || !keys_reserve(d->keys, d->keys->n + n) ||
      !keys_reserve_names(d->keys, name_bytes) || !entries_reserve(d, d->keys->n + n, true)) {
    st = td_fail(TD_ENOMEM, "TensorDict: out of memory");
    goto done;
  }
  /* Every reference first, in a pass of their own: a locked increment waits for the
   * stores before it, and interleaved with the writes of fresh entries each one waited
   * for its entry's cache misses (a quarter of a 256-leaf construction). */
  for (int32_t j = 0; j < n; j++) td_storage_retain(tensors[j]->storage);
  /* Append each key in order: the checks are done, room is reserved, and the tensors
   * cannot alias this container's entries (a caller passing its own pinned headers
   * would go through td_dict_set_tensor). Existing keys take the slow path. */
  td_keys *k = d->keys;
  int32_t j = 0;
  for (; j < n && st >= 0; j++) {
    int32_t src = items[j].index;
    const char *key = keys[src];
    int64_t len = lens[src];
    uint64_t h = hash_key(key, len);
    if (d->head.locked || keys_find(k, key, len, h) >= 0) {
      st = td_dict_set_tensor(d, key, len, tensors[src]); /* takes its own reference */
      td_storage_release(tensors[src]->storage);
      continue;
    }
    int32_t i = keys_append(k, key, len, h);
    if (i < 0) {
      st = td_fail(TD_ENOMEM, "TensorDict: out of memory");
      break;
    }
    td_entry *e = &d->entries[i]; /* reserved, not yet initialised: written whole here */
    entries_init(e, 0, 1);
    td_header_copy(&e->t, tensors[src]); /* with the reference taken above */
  }
  for (; j < n; j++) td_storage_release(tensors[items[j].index]->storage); /* not used */
  d->head.nkeys = k->n;
  td_dict_touch(d);
  if (st > 0) st = 0;
done:
  if (items != stack_items) free(items);
  if (tmp != stack_tmp) free(tmp);
  return st;
}

static void inherit(const td_dict *d, td_dict *child);

static bool child_fits(const char *call, const td_dict *d, const char *key,
                       const td_dict *child) {
  if (leads_with_batch(d, child->head.ndim, child->head.shape)) return true;
  char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
  td_fail(TD_ESHAPE,
          "%s: batch size %s does not match the leading dims of '%s' (a TensorDict with "
          "batch size %s)",
          call, shape_str(a, d->head.ndim, d->head.shape), key,
          shape_str(b, child->head.ndim, child->head.shape));
  return false;
}

/* True when d is c or holds c somewhere below (setting c into d would make a cycle). */
static bool holds(const td_dict *d, const td_dict *c) {
  if (d == c) return true;
  for (int32_t i = 0; i < c->keys->n; i++)
    if (c->entries[i].kind == TD_ENTRY_DICT && holds(d, c->entries[i].child)) return true;
  return false;
}

TD_EXPORT int32_t td_dict_set_dict(td_dict *d, const char *key, int64_t len, td_dict *child) {
  if (!child) return td_fail(TD_EINVAL, "set: the TensorDict is NULL");
  if (!key || len < 0) return td_fail(TD_EINVAL, "set: the key is NULL");
  char *name = key_copy(key, len);
  if (!name) return td_fail(TD_ENOMEM, "set: out of memory");
  bool ok = child_fits("set", d, name, child);
  if (ok && holds(d, child)) {
    td_fail(TD_EINVAL, "set: '%s' would contain the TensorDict itself", name);
    ok = false;
  }
  free(name);
  if (!ok) return td_last_status();
  td_dict_retain(child); /* before the slot is cleared: child may be the old value */
  int32_t i = slot_for("set", d, key, len);
  if (i < 0) {
    td_dict_release(child);
    return i;
  }
  td_entry *e = &d->entries[i];
  e->kind = TD_ENTRY_DICT;
  e->child = child;
  inherit(d, child);
  return i;
}

TD_EXPORT int32_t td_dict_set_value(td_dict *d, const char *key, int64_t len,
                                    const char *json) {
  if (!json) return td_fail(TD_EINVAL, "set: the value is NULL");
  td_values *v = td_values_new(1);
  if (!v || !(v->texts[0] = strdup(json))) {
    td_values_release(v);
    return td_fail(TD_ENOMEM, "set: out of memory");
  }
  int32_t i = slot_for("set", d, key, len);
  if (i < 0) {
    td_values_release(v);
    return i;
  }
  d->entries[i].kind = TD_ENTRY_VALUE;
  d->entries[i].values = v;
  return i;
}

TD_EXPORT int32_t td_dict_set_values(td_dict *d, const char *key, int64_t len, int64_t n,
                                     const char *const *texts, const td_tensor *positions) {
  if (!key || len < 0) return td_fail(TD_EINVAL, "set: the key is NULL");
  if (!positions || positions->dtype != TD_INT64 || !positions->storage)
    return td_fail(TD_EINVAL, "set: stacked values need int64 positions");
  if (positions->ndim != d->head.ndim)
    return td_fail(TD_ESHAPE, "set: stacked values need positions shaped like the batch");
  if (!check_tensor_key("set", d, key, len, positions)) return td_last_status();
  td_values *v = td_values_new(n);
  if (!v) return td_fail(TD_ENOMEM, "set: out of memory");
  for (int64_t j = 0; j < n; j++) {
    if (!texts[j] || !(v->texts[j] = strdup(texts[j]))) {
      td_values_release(v);
      return td_fail(TD_EINVAL, "set: value %lld is NULL", (long long)j);
    }
  }
  td_tensor held; /* before the slot clears or moves: positions may point into it */
  td_hold_view(&held, positions);
  int32_t i = slot_for("set", d, key, len);
  if (i < 0) {
    td_storage_release(held.storage);
    td_values_release(v);
    return i;
  }
  td_entry *e = &d->entries[i];
  e->kind = TD_ENTRY_VALUES;
  e->values = v;
  e->t = held;
  return i;
}

/* td_dict_set_entry, sharing src's entry (shallow) or taking a copy of it (deep). */
static int32_t set_entry(td_dict *d, const char *key, int64_t len, const td_dict *src, int32_t i,
                         bool deep) {
  if (!key || len < 0) return td_fail(TD_EINVAL, "set: the key is NULL");
  if (!src || i < 0 || i >= src->keys->n)
    return td_fail(TD_EINDEX, "set: no entry %d in the source", (int)i);
  char *name = key_copy(key, len);
  if (!name) return td_fail(TD_ENOMEM, "set: out of memory");
  td_entry copy; /* taken before the slot clears: src may be d */
  if (deep) {
    int32_t st = td_entry_copy(&copy, &src->entries[i]);
    if (st) {
      free(name);
      return st;
    }
  } else {
    td_entry_share(&copy, &src->entries[i]);
  }
  bool ok = true;
  if (copy.kind == TD_ENTRY_DICT) ok = child_fits("set", d, name, copy.child);
  else if (copy.t.storage) ok = check_tensor("set", d, name, &copy.t);
  free(name);
  int32_t j = ok ? slot_for("set", d, key, len) : td_last_status();
  if (j < 0) {
    copy.pinned = 0;
    td_entry_clear(d, &copy);
    return j;
  }
  d->entries[j] = copy;
  if (copy.kind == TD_ENTRY_DICT) inherit(d, copy.child);
  return j;
}

TD_EXPORT int32_t td_dict_set_entry(td_dict *d, const char *key, int64_t len, td_dict *src,
                                    int32_t i) {
  return set_entry(d, key, len, src, i, false);
}

TD_EXPORT int32_t td_dict_copy_entry(td_dict *d, const char *key, int64_t len,
                                     const td_dict *src, int32_t i) {
  return set_entry(d, key, len, src, i, true);
}

TD_EXPORT int32_t td_dict_del(td_dict *d, int32_t i) {
  if (i < 0 || i >= d->keys->n) return td_fail(TD_EINDEX, "del: no entry %d", (int)i);
  if (d->head.locked)
    return td_fail(TD_EINVAL, "del: cannot delete '%s': the TensorDict is locked",
                   td_dict_key(d, i));
  if (!own_keys(d)) return td_fail(TD_ENOMEM, "del: out of memory");
  td_entry_clear(d, &d->entries[i]);
  td_keys *k = d->keys;
  int32_t rest = k->n - i - 1;
  memmove(k->meta + i, k->meta + i + 1, sizeof *k->meta * (size_t)rest);
  memmove(d->entries + i, d->entries + i + 1, sizeof *d->entries * (size_t)rest);
  k->n--;
  memset(&d->entries[k->n], 0, sizeof d->entries[k->n]);
  keys_reindex(k);
  d->head.nkeys = k->n;
  td_dict_touch(d);
  return 0;
}

TD_EXPORT int32_t td_dict_rename(td_dict *d, int32_t i, const char *key, int64_t len) {
  if (i < 0 || i >= d->keys->n) return td_fail(TD_EINDEX, "rename_key: no entry %d", (int)i);
  if (d->head.locked)
    return td_fail(TD_EINVAL, "rename_key: cannot rename '%s': the TensorDict is locked",
                   td_dict_key(d, i));
  uint64_t h = hash_key(key, len);
  int32_t j = keys_find(d->keys, key, len, h);
  if (j == i) return 0;
  if (j >= 0)
    return td_fail(TD_EINVAL, "rename_key: '%.*s' exists already", (int)len, key);
  int64_t off;
  if (!own_keys(d) || !keys_store_name(d->keys, key, len, &off))
    return td_fail(TD_ENOMEM, "rename_key: out of memory");
  /* The renamed entry moves to the end, as Python's rename_key_ (a delete then a set),
   * so key order and saved files line up with Python's. */
  td_keys *k = d->keys;
  td_entry e = d->entries[i];
  int32_t rest = k->n - i - 1;
  memmove(k->meta + i, k->meta + i + 1, sizeof *k->meta * (size_t)rest);
  memmove(d->entries + i, d->entries + i + 1, sizeof *d->entries * (size_t)rest);
  k->meta[k->n - 1] = (td_key_meta){off, len, h};
  d->entries[k->n - 1] = e;
  keys_reindex(k);
  td_dict_touch(d);
  return 0;
}

/* ------------------------------------------------------------ lock, names, device */

TD_EXPORT int32_t td_dict_set_locked(td_dict *d, int32_t locked) {
  d->head.locked = locked ? 1 : 0;
  for (int32_t i = 0; i < d->keys->n; i++)
    if (d->entries[i].kind == TD_ENTRY_DICT) td_dict_set_locked(d->entries[i].child, locked);
  return 0;
}

TD_EXPORT int32_t td_dict_set_names(td_dict *d, const char *const *names) {
  char *copies[TD_MAX_DIMS] = {0};
  if (names) {
    for (int32_t i = 0; i < d->head.ndim; i++) {
      if (!names[i]) continue;
      for (int32_t j = 0; j < i; j++)
        if (names[j] && strcmp(names[i], names[j]) == 0) {
          for (int32_t c = 0; c < i; c++) free(copies[c]);
          return td_fail(TD_EINVAL, "names: '%s' names dims %d and %d", names[i], j + 1, i + 1);
        }
      if (!(copies[i] = strdup(names[i]))) {
        for (int32_t c = 0; c < i; c++) free(copies[c]);
        return td_fail(TD_ENOMEM, "names: out of memory");
      }
    }
  }
  for (int32_t i = 0; i < TD_MAX_DIMS; i++) {
    free(d->names[i]);
    d->names[i] = copies[i];
  }
  d->head.has_names = names != NULL;
  td_dict_touch(d); /* names are part of a container's structure (shipped, planned) */
  for (int32_t i = 0; i < d->keys->n; i++) {
    td_dict *child = d->entries[i].kind == TD_ENTRY_DICT ? d->entries[i].child : NULL;
    if (!child) continue;
    if (names) {
      inherit(d, child);
    } else if (child->head.has_names) { /* unnamed parent dims: the child's go too */
      const char *kept[TD_MAX_DIMS] = {0};
      bool any = false;
      for (int32_t j = d->head.ndim; j < child->head.ndim; j++)
        any |= (kept[j] = child->names[j]) != NULL;
      td_dict_set_names(child, any ? kept : NULL);
    }
  }
  return 0;
}

/* A nested container shares its parent's batch dims, so it takes their names (its own
 * extra dims keep theirs) and, when it has none, the parent's device. */
static void inherit(const td_dict *d, td_dict *child) {
  if (d->head.has_names) {
    const char *names[TD_MAX_DIMS] = {0};
    for (int32_t i = 0; i < child->head.ndim; i++)
      names[i] = i < d->head.ndim ? d->names[i] : child->names[i];
    td_dict_set_names(child, names);
  }
  if (d->head.device_type != TD_DEVICE_NONE && child->head.device_type == TD_DEVICE_NONE)
    td_dict_set_device(child, d->head.device_type, d->head.device_index);
}

TD_EXPORT const char *td_dict_name_borrow(const td_dict *d, int32_t dim) {
  if (dim < 0 || dim >= d->head.ndim) return NULL;
  return d->names[dim];
}

static int32_t check_device(td_dict *d, const char *path) {
  for (int32_t i = 0; i < d->keys->n; i++) {
    td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_TENSOR && !check_tensor("device", d, td_dict_key(d, i), &e->t))
      return td_last_status();
    if (e->kind == TD_ENTRY_DICT) {
      e->child->head.device_type = d->head.device_type;
      e->child->head.device_index = d->head.device_index;
      int32_t r = check_device(e->child, path);
      if (r) return r;
    }
  }
  return 0;
}

TD_EXPORT int32_t td_dict_set_device(td_dict *d, int32_t device_type, int32_t device_index) {
  if (device_type != TD_DEVICE_NONE && device_type != TD_DEVICE_CPU &&
      device_type != TD_DEVICE_CUDA)
    return td_fail(TD_EINVAL, "device: unknown device type %d", (int)device_type);
  int32_t old_type = d->head.device_type, old_index = d->head.device_index;
  d->head.device_type = device_type;
  d->head.device_index = device_type == TD_DEVICE_CUDA ? device_index : 0;
  int32_t r = device_type == TD_DEVICE_NONE ? 0 : check_device(d, "");
  if (r) {
    d->head.device_type = old_type;
    d->head.device_index = old_index;
    check_device(d, ""); /* put the children back */
  }
  return r;
}

TD_EXPORT int32_t td_dict_set_batch(td_dict *d, int32_t ndim, const int64_t *batch) {
  if (!batch_is_valid("batch_size", ndim, batch)) return td_last_status();
  td_dict probe = {.head = {.ndim = ndim}};
  if (ndim) memcpy(probe.head.shape, batch, sizeof *batch * (size_t)ndim);
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind == TD_ENTRY_VALUE) continue;
    bool ok = e->kind == TD_ENTRY_DICT
                  ? leads_with_batch(&probe, e->child->head.ndim, e->child->head.shape)
                  : leads_with_batch(&probe, e->t.ndim, e->t.shape);
    if (ok && e->kind == TD_ENTRY_VALUES && e->t.ndim != ndim) ok = false;
    if (!ok) {
      char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
      return td_fail(TD_ESHAPE, "batch_size: %s does not match the leading dims of '%s' (%s)",
                     shape_str(a, ndim, batch), td_dict_key(d, i),
                     e->kind == TD_ENTRY_DICT
                         ? shape_str(b, e->child->head.ndim, e->child->head.shape)
                         : shape_str(b, e->t.ndim, e->t.shape));
    }
  }
  if (ndim != d->head.ndim) td_dict_set_names(d, NULL);
  d->head.ndim = ndim;
  memset(d->head.shape, 0, sizeof d->head.shape);
  if (ndim) memcpy(d->head.shape, batch, sizeof *batch * (size_t)ndim);
  td_dict_touch(d);
  return 0;
}

TD_EXPORT int32_t td_dict_set_prefix(td_dict *d, const char *prefix) {
  char *p = prefix ? strdup(prefix) : NULL;
  if (prefix && !p) return td_fail(TD_ENOMEM, "memmap: out of memory");
  free(d->prefix);
  d->prefix = p;
  return 0;
}

TD_EXPORT const char *td_dict_prefix_borrow(const td_dict *d) { return d->prefix; }
