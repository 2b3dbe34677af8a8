/*
 * dict_join.c: joins over containers: stack, cat, split and pad.
 *
 * stack and cat walk the inputs level by level in two passes: the first checks
 * everything a user can get wrong (batch sizes, key sets, kinds, leaf shapes), naming
 * the keys by their dotted paths, so that no work is done for a call that will fail;
 * the second builds the result, each tensor leaf with td_stack / td_cat. Non-tensor
 * values equal in every input stay uniform (shared); others become a stacked value
 * whose texts are every input's texts in order and whose positions are the inputs'
 * positions (a uniform input: its one text everywhere) offset and joined like a leaf.
 * Key paths are formatted only for a message. An input holding its keys in the first's
 * order (a shared key set, or names laid out alike) is read at the first's entry
 * indices; for the others the first pass maps each key once and the second reuses it.
 *
 * split is td_dict_index with a slice on dim (views); pad is td_dict_map with td_pad.
 *
 * Messages count TensorDicts of the list and dims from 1 (what a Lua user wrote), like
 * the other container messages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dict_internal.h"

enum { LIST_KEYS = 4, SMALL_N = 16 };

static const char *shape_str(char *buf, int32_t ndim, const int64_t *shape) {
  return td_format_shape(buf, TD_SHAPE_STR, ndim, shape);
}

static const char *kind_name(int32_t kind) {
  switch (kind) {
  case TD_ENTRY_TENSOR: return "tensor";
  case TD_ENTRY_DICT: return "TensorDict";
  default: return "non-tensor value";
  }
}

/* Tensor, container and non-tensor (uniform or stacked) are the kinds that must match. */
static int32_t kind_class(int32_t kind) {
  return kind == TD_ENTRY_VALUES ? TD_ENTRY_VALUE : kind;
}

/* The result is new data: unlocked and without names at every level (the Lua layer
 * computes names). */
static void make_plain(td_dict *d) {
  d->head.locked = 0;
  td_dict_set_names(d, NULL);
  for (int32_t i = 0; i < d->keys->n; i++)
    if (d->entries[i].kind == TD_ENTRY_DICT && d->entries[i].child)
      make_plain(d->entries[i].child);
}

/* ================================================================ stack and cat */

/* The key map of a level: for each input j, the entry of every key of the first input
 * (row j, in the first's key order). Only levels where some input orders its keys
 * differently have one; elsewhere entry i of every input holds the first's key i. */
typedef struct level_map {
  int32_t level; /* the level's number in the order the walks enter them */
  int32_t *at;   /* n rows of the first's key count */
} level_map;

typedef struct join_ctx {
  const char *call;
  bool cat;
  int32_t dim;
  int32_t n;
  int32_t level;   /* levels entered so far by the current pass */
  level_map *maps; /* made by the first pass in level order, read by the second */
  int32_t nmaps, maps_cap, next;
} join_ctx;

static inline int32_t key_at(const int32_t *map, int32_t nkeys, int32_t j, int32_t i) {
  return map ? map[(size_t)j * (size_t)nkeys + (size_t)i] : i;
}

/* The batch size of a level of the result: n inserted at dim (stack) or the sizes
 * along dim summed (cat). */
static void joined_batch(const join_ctx *c, const td_dict *const *lv, int32_t *ndim,
                         int64_t *shape) {
  const td_dict *r = lv[0];
  if (c->cat) {
    *ndim = r->head.ndim;
    memcpy(shape, r->head.shape, sizeof *shape * (size_t)r->head.ndim);
    for (int32_t j = 1; j < c->n; j++) shape[c->dim] += lv[j]->head.shape[c->dim];
  } else {
    *ndim = r->head.ndim + 1;
    for (int32_t k = 0, s = 0; k < *ndim; k++) shape[k] = k == c->dim ? c->n : r->head.shape[s++];
  }
}

/* Shapes a (input j) and b (the first) agree: equal for stack, equal except in dim for
 * cat. */
static bool shapes_agree(const join_ctx *c, int32_t an, const int64_t *a, int32_t bn,
                         const int64_t *b) {
  if (an != bn) return false;
  for (int32_t k = 0; k < an; k++)
    if (a[k] != b[k] && !(c->cat && k == c->dim)) return false;
  return true;
}

/* Appends "'p.k1', 'p.k2' and 3 more" for the keys of d (at path) that other lacks. */
static int32_t list_missing(char *buf, size_t cap, size_t *len, const td_dict *d,
                            const td_dict *other, const char *path) {
  int32_t count = 0;
  for (int32_t i = 0; i < d->keys->n; i++) {
    int64_t klen;
    const char *key = td_dict_key_borrow(d, i, &klen);
    if (td_dict_find(other, key, klen) >= 0) continue;
    if (count < LIST_KEYS && *len < cap) {
      int w = snprintf(buf + *len, cap - *len, "%s'%s%s%s'", count ? ", " : "", path,
                       path[0] ? "." : "", key);
      if (w > 0) *len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
    }
    count++;
  }
  if (count > LIST_KEYS && *len < cap) {
    int w = snprintf(buf + *len, cap - *len, " and %d more", (int)(count - LIST_KEYS));
    if (w > 0) *len = *len + (size_t)w < cap ? *len + (size_t)w : cap - 1;
  }
  return count;
}

static int32_t fail_keys(const join_ctx *c, const td_dict *first, const td_dict *other,
                         int32_t j, const td_key_path *at) {
  char path[TD_PATH_CHARS], lacks[512] = "", has[512] = "";
  size_t ll = 0, hl = 0;
  td_key_path_text(at, path);
  int32_t nl = list_missing(lacks, sizeof lacks, &ll, first, other, path);
  int32_t nh = list_missing(has, sizeof has, &hl, other, first, path);
  return td_fail(TD_EINVAL, "%s: the key sets differ: TensorDict %d %s%s%s%s%s%s", c->call,
                 (int)j + 1, nl ? "lacks " : "", lacks, nl && nh ? " and " : "",
                 nh ? "has " : "", has, nh ? " not in the first" : "");
}

/* b has a's keys in a's order: the same key set, or equal names at equal places (one
 * comparison of the name arenas when they are laid out alike). */
static bool same_order(const td_keys *a, const td_keys *b) {
  if (a == b) return true;
  if (a->n != b->n || a->arena_len != b->arena_len) return false;
  for (int32_t i = 0; i < a->n; i++)
    if (a->meta[i].off != b->meta[i].off || a->meta[i].len != b->meta[i].len) return false;
  return memcmp(a->arena, b->arena, (size_t)a->arena_len) == 0;
}

/* A new key map for the level, every row the identity, kept in c (NULL after td_fail). */
static int32_t *new_map(join_ctx *c, int32_t level, int32_t nkeys) {
  if (c->nmaps == c->maps_cap) {
    int32_t cap = c->maps_cap ? 2 * c->maps_cap : 4;
    level_map *m = realloc(c->maps, sizeof *m * (size_t)cap);
    if (!m) goto oom;
    c->maps = m;
    c->maps_cap = cap;
  }
  int32_t *at = malloc(sizeof *at * (size_t)c->n * (size_t)nkeys);
  if (!at) goto oom;
  for (int32_t j = 0; j < c->n; j++)
    for (int32_t i = 0; i < nkeys; i++) at[(size_t)j * (size_t)nkeys + (size_t)i] = i;
  c->maps[c->nmaps++] = (level_map){level, at};
  return at;
oom:
  return td_fail_null(TD_ENOMEM, "%s: out of memory", c->call);
}

/* Row j of the level's key map (*map, made at the first input that needs one): where
 * input j holds each key of the first. Returns 0, 1 when the key sets differ, or an
 * error status. */
static int32_t map_row(join_ctx *c, const td_dict *const *lv, int32_t j, int32_t level,
                       int32_t **map) {
  const td_keys *k0 = lv[0]->keys, *kj = lv[j]->keys;
  if (k0->n != kj->n) return 1;
  if (k0->n == 0 || same_order(k0, kj)) return 0;
  if (!*map && !(*map = new_map(c, level, k0->n))) return td_last_status();
  int32_t *row = *map + (size_t)j * (size_t)k0->n;
  for (int32_t i = 0; i < k0->n; i++) {
    const td_key_meta *a = &k0->meta[i], *b = &kj->meta[i];
    const char *key = k0->arena + a->off;
    if (a->hash == b->hash && a->len == b->len &&
        memcmp(key, kj->arena + b->off, (size_t)a->len) == 0)
      continue; /* row[i] is i */
    /* n keys each, all of the first's found: the same set */
    if ((row[i] = td_dict_find(lv[j], key, a->len)) < 0) return 1;
  }
  return 0;
}

/* The first pass: everything that must agree between the inputs of one level. lv[j] is
 * input j's container at the key path at (NULL at the top). */
static int32_t check_level(join_ctx *c, const td_dict *const *lv, const td_key_path *at) {
  const td_dict *first = lv[0];
  const int32_t level = c->level++, nkeys = first->keys->n;
  char path[TD_PATH_CHARS];
  int32_t *map = NULL; /* owned by c */
  for (int32_t j = 1; j < c->n; j++) {
    const td_dict *d = lv[j];
    if (!shapes_agree(c, d->head.ndim, d->head.shape, first->head.ndim, first->head.shape)) {
      char a[TD_SHAPE_STR], b[TD_SHAPE_STR], tail[96] = "";
      if (c->cat)
        snprintf(tail, sizeof tail, " (sizes must match except in dim %d)", (int)c->dim + 1);
      if (!at)
        return td_fail(TD_ESHAPE, "%s: TensorDict %d has batch size %s but the first has %s%s",
                       c->call, (int)j + 1, shape_str(a, d->head.ndim, d->head.shape),
                       shape_str(b, first->head.ndim, first->head.shape), tail);
      return td_fail(TD_ESHAPE,
                     "%s: key '%s' (a TensorDict) has batch size %s in TensorDict %d but %s in "
                     "the first%s",
                     c->call, td_key_path_text(at, path), shape_str(a, d->head.ndim, d->head.shape),
                     (int)j + 1, shape_str(b, first->head.ndim, first->head.shape), tail);
    }
    int32_t st = map_row(c, lv, j, level, &map);
    if (st > 0) return fail_keys(c, first, d, j, at);
    if (st) return st;
  }
  if (!c->cat && first->head.ndim + 1 > TD_MAX_DIMS) {
    char a[TD_SHAPE_STR];
    if (!at)
      return td_fail(TD_ESHAPE, "%s: the batch size %s already has %d dims, the most there is",
                     c->call, shape_str(a, first->head.ndim, first->head.shape), TD_MAX_DIMS);
    return td_fail(TD_ESHAPE, "%s: key '%s' has batch size %s: stacking it would make more "
                   "than %d dims", c->call, td_key_path_text(at, path),
                   shape_str(a, first->head.ndim, first->head.shape), TD_MAX_DIMS);
  }

  const td_dict *kid_buf[SMALL_N], **kids = kid_buf;
  int32_t st = 0;
  for (int32_t i = 0; i < nkeys && !st; i++) {
    const td_entry *e0 = &first->entries[i];
    const td_key_path here = {at, td_dict_key(first, i)};
    if (e0->kind == TD_ENTRY_DICT && kids == kid_buf && c->n > SMALL_N &&
        !(kids = malloc(sizeof *kids * (size_t)c->n))) {
      kids = kid_buf;
      st = td_fail(TD_ENOMEM, "%s: out of memory", c->call);
      break;
    }
    for (int32_t j = 0; j < c->n && !st; j++) {
      const td_entry *e = &lv[j]->entries[key_at(map, nkeys, j, i)];
      if (kind_class(e->kind) != kind_class(e0->kind)) {
        st = td_fail(TD_EINVAL, "%s: key '%s' is a %s in the first TensorDict but a %s in "
                     "TensorDict %d", c->call, td_key_path_text(&here, path),
                     kind_name(e0->kind), kind_name(e->kind), (int)j + 1);
      } else if (e->kind == TD_ENTRY_TENSOR) {
        if (e->t.ndim + (c->cat ? 0 : 1) > TD_MAX_DIMS) {
          char a[TD_SHAPE_STR];
          st = td_fail(TD_ESHAPE, "%s: key '%s' has shape %s: stacking it would make more than "
                       "%d dims", c->call, td_key_path_text(&here, path),
                       shape_str(a, e->t.ndim, e->t.shape), TD_MAX_DIMS);
        } else if (j > 0 && !shapes_agree(c, e->t.ndim, e->t.shape, e0->t.ndim, e0->t.shape)) {
          char a[TD_SHAPE_STR], b[TD_SHAPE_STR], tail[96] = "";
          if (c->cat)
            snprintf(tail, sizeof tail, " (sizes must match except in dim %d)",
                     (int)c->dim + 1);
          st = td_fail(TD_ESHAPE, "%s: key '%s' has shape %s in TensorDict %d but %s in the "
                       "first%s", c->call, td_key_path_text(&here, path),
                       shape_str(a, e->t.ndim, e->t.shape), (int)j + 1,
                       shape_str(b, e0->t.ndim, e0->t.shape), tail);
        }
      } else if (e->kind == TD_ENTRY_DICT) {
        kids[j] = e->child;
      }
    }
    if (!st && e0->kind == TD_ENTRY_DICT) st = check_level(c, kids, &here);
  }
  if (kids != kid_buf) free(kids);
  return st;
}

/* A stacked value joining the non-tensor values of key i of every input, into o. */
static int32_t join_values(const join_ctx *c, const td_dict *const *lv, const int32_t *map,
                           int32_t i, td_entry *o) {
  const td_entry **es = malloc(sizeof *es * (size_t)c->n);
  const td_tensor **pos = malloc(sizeof *pos * (size_t)c->n);
  td_tensor **owned = calloc((size_t)c->n, sizeof *owned);
  td_values *v = NULL;
  int32_t st = 0;
  if (!es || !pos || !owned) {
    st = td_fail(TD_ENOMEM, "%s: out of memory", c->call);
    goto done;
  }
  bool uniform = true;
  int64_t total = 0;
  for (int32_t j = 0; j < c->n; j++) {
    es[j] = &lv[j]->entries[key_at(map, lv[0]->keys->n, j, i)];
    total += es[j]->values->n;
    uniform = uniform && es[j]->kind == TD_ENTRY_VALUE &&
              strcmp(es[j]->values->texts[0], es[0]->values->texts[0]) == 0;
  }
  if (uniform) { /* equal everywhere: one text stands for every element */
    td_entry_share(o, es[0]);
    goto done;
  }
  if (!(v = td_values_new(total))) {
    st = td_fail(TD_ENOMEM, "%s: out of memory", c->call);
    goto done;
  }
  int64_t at = 0;
  for (int32_t j = 0; j < c->n && !st; j++) {
    const td_entry *e = es[j];
    const int64_t first = at;
    for (int64_t k = 0; k < e->values->n; k++, at++)
      if (!(v->texts[at] = strdup(e->values->texts[k])))
        st = td_fail(TD_ENOMEM, "%s: out of memory", c->call);
    if (st) break;
    if (e->kind == TD_ENTRY_VALUE) {
      owned[j] = td_tensor_full(lv[j]->head.ndim, lv[j]->head.shape, TD_INT64, (double)first);
    } else if (first == 0) {
      pos[j] = &e->t;
      continue;
    } else {
      owned[j] = td_binary_scalar(TD_BINARY_ADD, &e->t, (double)first, TD_SCALAR_INT, 0);
    }
    if (!owned[j]) st = td_last_status() ? td_last_status() : TD_ENOMEM;
    pos[j] = owned[j];
  }
  if (!st) {
    td_tensor *joined = c->cat ? td_cat(pos, c->n, c->dim) : td_stack(pos, c->n, c->dim);
    st = td_take_owned(&o->t, joined);
  }
  if (!st) {
    o->kind = TD_ENTRY_VALUES;
    o->values = v;
    v = NULL;
  } else {
    memset(&o->t, 0, sizeof o->t);
  }
done:
  td_values_release(v);
  if (owned)
    for (int32_t j = 0; j < c->n; j++) td_tensor_release(owned[j]);
  free(owned);
  free(pos);
  free(es);
  return st;
}

/* The second pass: the joined container of one level (checked by check_level). */
static td_dict *join_level(join_ctx *c, const td_dict *const *lv, const td_key_path *at) {
  const td_dict *first = lv[0];
  const int32_t level = c->level++, nkeys = first->keys->n;
  const int32_t *map = NULL;
  if (c->next < c->nmaps && c->maps[c->next].level == level) map = c->maps[c->next++].at;
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS];
  joined_batch(c, lv, &ndim, shape);
  td_dict *r = td_dict_like(first, ndim, shape);
  const td_tensor *ts_buf[SMALL_N], **ts = ts_buf;
  const td_dict *kid_buf[SMALL_N], **kids = kid_buf;
  if (c->n > SMALL_N) {
    ts = malloc(sizeof *ts * (size_t)c->n);
    kids = malloc(sizeof *kids * (size_t)c->n);
  }
  if (!r || !ts || !kids) {
    if (r) td_fail(TD_ENOMEM, "%s: out of memory", c->call);
    goto fail;
  }
  r->head.locked = 0;
  if (r->head.has_names) td_dict_set_names(r, NULL);
  for (int32_t j = 1; j < c->n; j++)
    if (lv[j]->head.device_type != first->head.device_type ||
        lv[j]->head.device_index != first->head.device_index) {
      r->head.device_type = TD_DEVICE_NONE;
      r->head.device_index = 0;
      break;
    }

  for (int32_t i = 0; i < nkeys; i++) {
    const td_entry *e0 = &first->entries[i];
    td_entry *o = &r->entries[i];
    const td_key_path here = {at, td_dict_key(first, i)};
    int32_t st = 0;
    if (e0->kind == TD_ENTRY_DICT) {
      for (int32_t j = 0; j < c->n; j++)
        kids[j] = lv[j]->entries[key_at(map, nkeys, j, i)].child;
      o->kind = TD_ENTRY_DICT;
      o->child = join_level(c, kids, &here);
      if (!o->child) st = td_last_status() ? td_last_status() : TD_ENOMEM;
    } else if (e0->kind == TD_ENTRY_TENSOR) {
      for (int32_t j = 0; j < c->n; j++) ts[j] = &lv[j]->entries[key_at(map, nkeys, j, i)].t;
      td_tensor *joined = c->cat ? td_cat(ts, c->n, c->dim) : td_stack(ts, c->n, c->dim);
      st = td_take_owned(&o->t, joined);
      if (st) {
        memset(&o->t, 0, sizeof o->t);
        td_dict_fail_at(st, c->call, &here);
      }
    } else {
      st = join_values(c, lv, map, i, o);
      if (st) td_dict_fail_at(st, c->call, &here);
    }
    if (st) goto fail;
  }
  if (ts != ts_buf) free(ts);
  if (kids != kid_buf) free(kids);
  return r;
fail:
  td_dict_release(r);
  if (ts != ts_buf) free(ts);
  if (kids != kid_buf) free(kids);
  return NULL;
}

static td_dict *join(const char *call, bool cat, td_dict *const *ds, int32_t n, int32_t dim) {
  if (!ds || n < 1)
    return td_fail_null(TD_EINVAL, "%s: expected a non-empty list of TensorDicts, got %d", call,
                        ds ? (int)n : 0);
  for (int32_t j = 0; j < n; j++)
    if (!ds[j])
      return td_fail_null(TD_EINVAL, "%s: TensorDict %d of the list is NULL", call, (int)j + 1);
  const td_dict *first = ds[0];
  const int32_t ndim = first->head.ndim;
  char a[TD_SHAPE_STR];
  if (cat && ndim == 0)
    return td_fail_null(TD_ESHAPE,
                        "%s: TensorDicts with batch size [] cannot be concatenated (no batch "
                        "dims)",
                        call);
  const int32_t hi = cat ? ndim - 1 : ndim;
  if (dim < 0 || dim > hi)
    return td_fail_null(TD_EINDEX, "%s: dim %d is out of range for batch size %s (dims 1..%d)",
                        call, (int)dim + 1, shape_str(a, ndim, first->head.shape), (int)hi + 1);
  join_ctx c = {.call = call, .cat = cat, .dim = dim, .n = n};
  const td_dict *const *lv = (const td_dict *const *)ds;
  td_dict *r = NULL;
  if (check_level(&c, lv, NULL) == 0) {
    c.level = 0;
    r = join_level(&c, lv, NULL);
  }
  for (int32_t m = 0; m < c.nmaps; m++) free(c.maps[m].at);
  free(c.maps);
  return r;
}

TD_EXPORT td_dict *td_dict_stack(td_dict *const *ds, int32_t n, int32_t dim) {
  return join("stack", false, ds, n, dim);
}

TD_EXPORT td_dict *td_dict_cat(td_dict *const *ds, int32_t n, int32_t dim) {
  return join("cat", true, ds, n, dim);
}

/* ======================================================================= split */

TD_EXPORT int32_t td_dict_split(const td_dict *d, int32_t dim, int32_t n,
                                const int64_t *sizes, td_dict **out) {
  const char *call = "split";
  if (!d) return td_fail(TD_EINVAL, "%s: the TensorDict is NULL", call);
  if (n < 0 || (n > 0 && (!sizes || !out)))
    return td_fail(TD_EINVAL, "%s: %d sizes, or a NULL sizes or out array", call, (int)n);
  for (int32_t k = 0; k < n; k++) out[k] = NULL;
  char a[TD_SHAPE_STR];
  const int32_t ndim = d->head.ndim;
  if (dim < 0 || dim >= ndim) {
    if (ndim == 0)
      return td_fail(TD_EINDEX, "%s: the TensorDict has no batch dims (batch size [])", call);
    return td_fail(TD_EINDEX, "%s: dim %d is out of range for batch size %s (dims 1..%d)", call,
                   (int)dim + 1, shape_str(a, ndim, d->head.shape), (int)ndim);
  }
  const int64_t size = d->head.shape[dim];
  int64_t total = 0;
  bool ok = true;
  for (int32_t k = 0; k < n && ok; k++) {
    ok = sizes[k] >= 0 && sizes[k] <= size;
    if (ok) total += sizes[k]; /* each <= size: no overflow while total <= size */
    ok = ok && total <= size;
  }
  if (!ok || total != size) {
    char list[256];
    size_t len = 0;
    list[0] = '\0';
    for (int32_t k = 0; k < n && len < sizeof list; k++) {
      int w = k < 8 ? snprintf(list + len, sizeof list - len, "%s%lld", k ? ", " : "",
                               (long long)sizes[k])
                    : snprintf(list + len, sizeof list - len, ", ...");
      if (w > 0) len = len + (size_t)w < sizeof list ? len + (size_t)w : sizeof list - 1;
      if (k >= 8) break;
    }
    for (int32_t k = 0; k < n; k++)
      if (sizes[k] < 0)
        return td_fail(TD_EINVAL, "%s: sizes [%s] has the negative size %lld (piece %d)", call,
                       list, (long long)sizes[k], (int)k + 1);
    return td_fail(TD_EINVAL, "%s: sizes [%s] must sum to %lld, the size of dim %d of batch "
                   "size %s", call, list, (long long)size, (int)dim + 1,
                   shape_str(a, ndim, d->head.shape));
  }
  td_index entries[TD_MAX_DIMS];
  for (int32_t k = 0; k < dim; k++) entries[k] = (td_index){TD_INDEX_SLICE, 0, INT64_MAX, 1};
  int64_t start = 0;
  for (int32_t k = 0; k < n; k++) {
    entries[dim] = (td_index){TD_INDEX_SLICE, start, start + sizes[k], 1};
    start += sizes[k];
    if (!(out[k] = td_dict_index(d, entries, dim + 1, NULL, 0))) {
      int32_t st = td_last_status() ? td_last_status() : TD_ENOMEM;
      for (int32_t m = 0; m <= k; m++) {
        td_dict_release(out[m]);
        out[m] = NULL;
      }
      return st;
    }
  }
  return 0;
}

/* ========================================================================= pad */

typedef struct pad_ctx {
  const int64_t *pads;
  int32_t npads;
  double value;
} pad_ctx;

/* td_pad counts pads from the last dim: batch dim k of a leaf of L dims is its pair
 * L - 1 - k; the dims past the padded batch dims get none. */
static int32_t pad_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  const pad_ctx *c = op->ctx;
  int64_t tp[2 * TD_MAX_DIMS] = {0};
  const int32_t L = in->ndim;
  for (int32_t k = 0; k < c->npads / 2; k++) {
    tp[2 * (L - 1 - k)] = c->pads[2 * k];
    tp[2 * (L - 1 - k) + 1] = c->pads[2 * k + 1];
  }
  return td_take_owned(out, td_pad(in, tp, c->npads ? 2 * L : 0, c->value));
}

/* The first stacked value at or below d (at the key path parent) whose batch dims get
 * padded (cropping only is fine: its positions crop like a tensor); its path in path
 * (TD_PATH_CHARS bytes). */
static bool find_stacked(const td_dict *d, const td_key_path *parent, char *path) {
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind != TD_ENTRY_VALUES && e->kind != TD_ENTRY_DICT) continue;
    const td_key_path here = {parent, td_dict_key(d, i)};
    if (e->kind == TD_ENTRY_VALUES) {
      td_key_path_text(&here, path);
      return true;
    }
    if (find_stacked(e->child, &here, path)) return true;
  }
  return false;
}

TD_EXPORT td_dict *td_dict_pad(const td_dict *d, const int64_t *pads, int32_t npads,
                               double value) {
  const char *call = "pad";
  char a[TD_SHAPE_STR];
  if (!d || (!pads && npads > 0))
    return td_fail_null(TD_EINVAL, "%s: the %s is NULL", call, d ? "pads array" : "TensorDict");
  const int32_t ndim = d->head.ndim;
  if (npads < 0 || npads % 2 != 0)
    return td_fail_null(TD_EINVAL,
                        "%s: pads has %d entries; it needs an even count (before and after for "
                        "each batch dim)",
                        call, (int)npads);
  if (npads / 2 > ndim)
    return td_fail_null(TD_EINVAL, "%s: %d pads cover %d batch dims but batch size %s has %d", call,
                        (int)npads, (int)(npads / 2), shape_str(a, ndim, d->head.shape), (int)ndim);
  int64_t shape[TD_MAX_DIMS];
  bool grows = false;
  memcpy(shape, d->head.shape, sizeof *shape * (size_t)ndim);
  for (int32_t k = 0; k < npads / 2; k++) {
    const int64_t b = pads[2 * k], e = pads[2 * k + 1], s = shape[k];
    /* INT64_MIN / 2 .. INT64_MAX / 2 keeps the sums from overflowing. */
    bool ok = b > INT64_MIN / 2 && b < INT64_MAX / 2 && e > INT64_MIN / 2 && e < INT64_MAX / 2;
    if (!ok || s + b + e < 0 || s + (b < 0 ? b : 0) + (e < 0 ? e : 0) < 0)
      return td_fail_null(TD_ESHAPE,
                          "%s: batch dim %d of size %lld padded by (%lld, %lld) leaves %s", call,
                          (int)k + 1, (long long)s, (long long)b, (long long)e,
                          ok ? "a negative size" : "a size out of range");
    shape[k] = s + b + e;
    grows = grows || b > 0 || e > 0;
  }
  char path[TD_PATH_CHARS];
  if (grows && find_stacked(d, NULL, path))
    return td_fail_null(TD_EINVAL, "%s: cannot pad the stacked non-tensor value '%s'", call, path);
  pad_ctx c = {pads, npads, value};
  td_leaf_op op = {call, pad_leaf, ndim, &c};
  td_dict *r = td_dict_map(d, &op, ndim, shape);
  if (r) make_plain(r);
  return r;
}
