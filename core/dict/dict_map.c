/*
 * dict_map.c: the walk every batch operation uses (td_dict_map, td_dict_visit) and the
 * operations that are a plain walk: the index grammar, shape ops, copies and casts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dict_internal.h"


void td_shape_header(td_tensor *h, int32_t ndim, const int64_t *shape) {
  memset(h, 0, sizeof *h);
  h->ndim = ndim;
  h->itemsize = 1;
  h->dtype = TD_UINT8;
  int64_t stride = 1;
  for (int32_t i = ndim - 1; i >= 0; i--) {
    h->shape[i] = shape[i];
    h->strides[i] = stride;
    stride *= shape[i] > 0 ? shape[i] : 1;
  }
}

/* How a walk treats stacked values' positions: transformed by the op like a tensor
 * leaf (index and shape ops), or copied whole for operations on values (copies, casts:
 * the op is not for them), or made contiguous (contiguous: shared when they are). */
enum { VALUES_FOLLOW, VALUES_COPY, VALUES_CONTIGUOUS };

/* Positions of a stacked value for VALUES_COPY or VALUES_CONTIGUOUS, into o->t. */
static int32_t copied_positions(const td_entry *e, td_entry *o, int values) {
  if (values == VALUES_CONTIGUOUS && td_tensor_is_contiguous(&e->t)) {
    td_hold_view(&o->t, &e->t);
    return 0;
  }
  return td_take_owned(&o->t, td_tensor_clone(&e->t));
}

static td_dict *map_level(const td_dict *d, const td_leaf_op *op, int32_t new_ndim,
                          const int64_t *new_batch, int values, const td_key_path *parent) {
  int32_t extra = d->head.ndim - op->op_ndim;
  int32_t ndim = new_ndim + extra;
  if (ndim > TD_MAX_DIMS)
    return td_fail_null(TD_ESHAPE, "%s: the result would have %d batch dims, at most %d", op->call,
                        (int)ndim, TD_MAX_DIMS);
  int64_t shape[TD_MAX_DIMS];
  memcpy(shape, new_batch, sizeof *shape * (size_t)new_ndim);
  memcpy(shape + new_ndim, d->head.shape + op->op_ndim, sizeof *shape * (size_t)extra);
  td_dict *r = td_dict_like(d, ndim, shape);
  if (!r) return NULL;
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    td_entry *o = &r->entries[i];
    if (e->kind == TD_ENTRY_VALUE) { /* never written in place: shared */
      td_entry_share(o, e);
      continue;
    }
    td_key_path here = {parent, td_dict_key(d, i)};
    if (e->kind == TD_ENTRY_DICT) {
      o->kind = TD_ENTRY_DICT;
      o->child = map_level(e->child, op, new_ndim, new_batch, values, &here);
      if (!o->child) goto fail;
      continue;
    }
    o->kind = e->kind;
    int32_t st = e->kind == TD_ENTRY_VALUES && values != VALUES_FOLLOW
                     ? copied_positions(e, o, values)
                     : op->fn(op, &e->t, &o->t);
    if (st == TD_LEAF_VIEW) {
      st = 0;
      if (!r->held) r->held = td_dict_lent(d);
      if (r->held && i < r->held->n && r->held->s[i] == o->t.storage)
        o->borrowed = 1;
      else
        td_storage_retain(o->t.storage);
    }
    if (st) {
      memset(&o->t, 0, sizeof o->t);
      td_dict_fail_at(st, op->call, &here);
      goto fail;
    }
    if (e->kind == TD_ENTRY_VALUES && (st = td_entry_take_values(o, e))) {
      td_dict_fail_at(st, op->call, &here);
      goto fail;
    }
  }
  return r;
fail:
  td_dict_release(r);
  return NULL;
}

td_dict *td_dict_map(const td_dict *d, const td_leaf_op *op, int32_t new_ndim,
                     const int64_t *new_batch) {
  return map_level(d, op, new_ndim, new_batch, VALUES_FOLLOW, NULL);
}

/* The same walk for operations on values (copies, casts): stacked values' positions
 * are not the op's to transform; the result, a new container, gets its own copy of
 * them (contiguous: kept where already contiguous, as its tensor leaves are). The batch
 * size is kept. */
static td_dict *map_values(const td_dict *d, const td_leaf_op *op, int values) {
  td_leaf_op whole = *op;
  whole.op_ndim = d->head.ndim;
  return map_level(d, &whole, d->head.ndim, d->head.shape, values, NULL);
}

static int32_t visit_level(td_dict *d, const td_leaf_op *op, const td_key_path *parent) {
  for (int32_t i = 0; i < d->keys->n; i++) {
    td_entry *e = &d->entries[i];
    if (e->kind != TD_ENTRY_TENSOR && e->kind != TD_ENTRY_DICT) continue;
    td_key_path here = {parent, td_dict_key(d, i)};
    int32_t st = e->kind == TD_ENTRY_DICT ? visit_level(e->child, op, &here)
                                          : op->fn(op, &e->t, NULL);
    if (st && e->kind == TD_ENTRY_TENSOR) td_dict_fail_at(st, op->call, &here);
    if (st) return st;
  }
  return 0;
}

int32_t td_dict_visit(td_dict *d, const td_leaf_op *op) { return visit_level(d, op, NULL); }

/* ------------------------------------------------------------------- the index */

/* One resolved entry of a basic index: the same for every leaf, since leaves share
 * the batch dims it covers. */
typedef struct plan_step {
  int32_t kind;        /* SELECT (pos), SLICE (pos = start, len, step), NEWAXIS */
  int64_t pos, len, step;
} plan_step;

typedef struct index_ctx {
  td_index entries[2 * TD_MAX_DIMS + 1];
  int32_t n;
  plan_step plan[2 * TD_MAX_DIMS + 1];
  const td_tensor *adv;
  int32_t adv_dim;
} index_ctx;

static int64_t clamp_bound(int64_t v, int64_t size) {
  if (v < 0) v += size;
  return v < 0 ? 0 : v > size ? size : v;
}

/* Resolves the (ellipsis-free) entries against the batch shape into c->plan. */
static int32_t make_plan(const char *call, const td_dict *d, index_ctx *c) {
  int32_t in = 0;
  for (int32_t k = 0; k < c->n; k++) {
    const td_index *e = &c->entries[k];
    plan_step *p = &c->plan[k];
    p->kind = e->kind;
    if (e->kind == TD_INDEX_NEWAXIS) continue;
    int64_t size = d->head.shape[in++];
    if (e->kind == TD_INDEX_SELECT) {
      if (e->start < -size || e->start >= size)
        return td_fail(TD_EINDEX, "%s: index %lld is out of range for batch dim %d of size %lld",
                       call, (long long)(e->start < 0 ? e->start : e->start + 1), (int)in,
                       (long long)size);
      p->pos = e->start < 0 ? e->start + size : e->start;
    } else {
      if (e->step <= 0)
        return td_fail(TD_EINVAL, "%s: slice step must be positive, got %lld", call,
                       (long long)e->step);
      int64_t start = clamp_bound(e->start, size), stop = clamp_bound(e->stop, size);
      p->len = stop > start ? (stop - start - 1) / e->step + 1 : 0;
      p->pos = p->len > 0 ? start : 0;
      p->step = e->step;
    }
  }
  return 0;
}

/* The view of in selected by the plan, written straight into out (no storage ref). */
static void run_plan(const index_ctx *c, const td_tensor *in, td_tensor *out) {
  int64_t offset = in->offset;
  int32_t src = 0, dst = 0;
  int64_t shape[TD_MAX_DIMS], strides[TD_MAX_DIMS];
  for (int32_t k = 0; k < c->n; k++) {
    const plan_step *p = &c->plan[k];
    if (p->kind == TD_INDEX_SELECT) {
      offset += p->pos * in->strides[src++];
    } else if (p->kind == TD_INDEX_SLICE) {
      offset += p->pos * in->strides[src];
      shape[dst] = p->len;
      strides[dst++] = td_slice_stride(in->strides[src++], p->step, p->len);
    } else {
      shape[dst] = 1;
      strides[dst++] = 1;
    }
  }
  for (; src < in->ndim; src++, dst++) {
    shape[dst] = in->shape[src];
    strides[dst] = in->strides[src];
  }
  out->refcount = 0;
  out->storage = in->storage;
  out->offset = offset;
  out->itemsize = in->itemsize;
  out->ndim = dst;
  out->dtype = in->dtype;
  for (int32_t i = 0; i < dst; i++) { /* the tail past ndim is never read */
    out->shape[i] = shape[i];
    out->strides[i] = strides[i];
  }
}

/* Replace an ellipsis by the whole-dim entries it stands for over ndim batch dims, so
 * the entries mean the same for leaves with trailing dims. */
static int32_t normalize(const char *call, const td_index *entries, int32_t n, int32_t ndim,
                         index_ctx *c) {
  int32_t consumed = 0;
  for (int32_t k = 0; k < n; k++)
    if (entries[k].kind == TD_INDEX_SELECT || entries[k].kind == TD_INDEX_SLICE) consumed++;
  if (consumed > ndim)
    return td_fail(TD_EINDEX, "%s: %d indices for %d batch dims", call, (int)consumed,
                   (int)ndim);
  c->n = 0;
  for (int32_t k = 0; k < n; k++) {
    if (entries[k].kind != TD_INDEX_ELLIPSIS) {
      if (c->n >= 2 * TD_MAX_DIMS + 1) return td_fail(TD_EINDEX, "%s: too many entries", call);
      c->entries[c->n++] = entries[k];
      continue;
    }
    for (int32_t j = 0; j < ndim - consumed; j++) {
      if (c->n >= 2 * TD_MAX_DIMS + 1) return td_fail(TD_EINDEX, "%s: too many entries", call);
      c->entries[c->n++] = (td_index){TD_INDEX_SLICE, 0, INT64_MAX, 1};
    }
  }
  return 0;
}

/* Moves dims [d, d + k) of h to the front (mode 0) or dim 0 to position d (mode 1). */
static int32_t move_dims(const td_tensor *h, int32_t d, int32_t k, bool to_front,
                         td_tensor *out) {
  int32_t perm[TD_MAX_DIMS], n = 0;
  if (to_front) {
    for (int32_t i = d; i < d + k; i++) perm[n++] = i;
    for (int32_t i = 0; i < h->ndim; i++)
      if (i < d || i >= d + k) perm[n++] = i;
  } else {
    for (int32_t i = 1; i <= d; i++) perm[n++] = i;
    perm[n++] = 0;
    for (int32_t i = d + 1; i < h->ndim; i++) perm[n++] = i;
  }
  return td_tensor_permute(h, perm, out);
}

static int32_t index_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  const index_ctx *c = op->ctx;
  if (in->ndim - op->op_ndim + c->n > TD_MAX_DIMS)
    return td_fail(TD_ESHAPE, "index: the result would have more than %d dims", TD_MAX_DIMS);
  td_tensor view;
  run_plan(c, in, c->adv ? &view : out);
  if (!c->adv) return TD_LEAF_VIEW;
  if (c->adv->dtype == TD_INT64)
    return td_take_owned(out, td_index_select(&view, c->adv_dim, c->adv));
  td_tensor front, rows_view;
  int32_t st = move_dims(&view, c->adv_dim, c->adv->ndim, true, &front);
  if (st) return st;
  td_tensor *rows = td_mask_rows(&front, c->adv);
  if (!rows) return td_last_status();
  st = move_dims(rows, c->adv_dim, 1, false, &rows_view);
  if (!st) td_hold_view(out, &rows_view);
  td_tensor_release(rows);
  return st;
}

static int64_t count_true(const td_tensor *mask) {
  td_tensor *s = td_reduce(TD_RED_SUM, mask, NULL, 0, 0, 0);
  if (!s) return -1;
  int64_t n = *(const int64_t *)td_tensor_ptr(s);
  td_tensor_release(s);
  return n;
}

/* The batch size after the index: the basic entries run over the batch shape, then the
 * advanced entry's dims replaced by its count (mask) or length (index). */
static int32_t indexed_batch(const td_dict *d, index_ctx *c, int32_t *ndim, int64_t *shape) {
  td_tensor probe, view;
  td_shape_header(&probe, d->head.ndim, d->head.shape);
  int32_t st = td_tensor_index(&probe, c->entries, c->n, &view);
  if (st) return st;
  if (!c->adv) {
    *ndim = view.ndim;
    memcpy(shape, view.shape, sizeof *shape * (size_t)view.ndim);
    return 0;
  }
  const td_tensor *a = c->adv;
  bool mask = a->dtype == TD_BOOL;
  if (!mask && (a->dtype != TD_INT64 || a->ndim != 1))
    return td_fail(TD_EINVAL, "index: an index tensor over batch dims must be 1-D int64");
  int32_t k = mask ? a->ndim : 1;
  if (c->adv_dim < 0 || c->adv_dim + k > view.ndim)
    return td_fail(TD_EINDEX, "index: the %s covers dims past the batch size",
                   mask ? "mask" : "index");
  if (mask) {
    for (int32_t i = 0; i < k; i++)
      if (a->shape[i] != view.shape[c->adv_dim + i]) {
        char m[TD_SHAPE_STR], b[TD_SHAPE_STR];
        return td_fail(TD_ESHAPE, "index: mask of shape %s does not match batch dims %s",
                       td_format_shape(m, sizeof m, a->ndim, a->shape),
                       td_format_shape(b, sizeof b, k, view.shape + c->adv_dim));
      }
  }
  int64_t count = mask ? count_true(a) : a->shape[0];
  if (count < 0) return td_last_status();
  int32_t n = 0;
  for (int32_t i = 0; i < c->adv_dim; i++) shape[n++] = view.shape[i];
  shape[n++] = count;
  for (int32_t i = c->adv_dim + k; i < view.ndim; i++) shape[n++] = view.shape[i];
  *ndim = n;
  return 0;
}

TD_EXPORT td_dict *td_dict_index(const td_dict *d, const td_index *entries, int32_t n,
                                 const td_tensor *adv, int32_t adv_dim) {
  if (d->head.ndim == 0)
    return td_fail_null(TD_EINDEX, "index: the TensorDict has no batch dims (batch size [])");
  index_ctx c = {.adv = adv, .adv_dim = adv_dim};
  if (normalize("index", entries, n, d->head.ndim, &c) || make_plan("index", d, &c)) return NULL;
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS];
  if (indexed_batch(d, &c, &ndim, shape)) return NULL;
  td_leaf_op op = {"index", index_leaf, d->head.ndim, &c};
  return td_dict_map(d, &op, ndim, shape);
}

/* ------------------------------------------------------------------ index put */

typedef struct put_ctx {
  index_ctx ix;
  double value;
} put_ctx;

/* Writes src (a tensor broadcastable to the selection, or NULL for the scalar) through
 * the advanced entry (a mask or an index tensor) into dst, a whole leaf: a job. */
static int32_t put_adv(const void *ctx, td_tensor *dst, const td_tensor *src) {
  const put_ctx *c = ctx;
  td_tensor view;
  int32_t st = 0;
  run_plan(&c->ix, dst, &view);
  td_tensor *scalar = NULL;
  if (!src) {
    if (!(scalar = td_tensor_full(0, NULL, dst->dtype, c->value))) return td_last_status();
    src = scalar;
  }
  const td_tensor *a = c->ix.adv;
  if (a->dtype == TD_INT64) {
    st = td_index_put_(&view, c->ix.adv_dim, a, src);
  } else {
    /* The selection is [before.., count, after..]; mask_rows_put_ wants [count, rest..]. */
    td_tensor front, value = *src;
    value.refcount = 0;
    st = move_dims(&view, c->ix.adv_dim, a->ndim, true, &front);
    if (!st && src->ndim > c->ix.adv_dim && src != scalar) {
      /* broadcast src to the selection first so its count dim exists to move */
      int32_t before = c->ix.adv_dim, after = view.ndim - c->ix.adv_dim - a->ndim;
      int64_t sel[TD_MAX_DIMS];
      int32_t n = 0;
      for (int32_t i = 0; i < before; i++) sel[n++] = view.shape[i];
      sel[n++] = count_true(a);
      for (int32_t i = 0; i < after; i++) sel[n++] = view.shape[before + a->ndim + i];
      td_tensor expanded;
      st = td_tensor_expand(src, n, sel, &expanded);
      if (!st) st = move_dims(&expanded, before, 1, true, &value);
    }
    if (!st) st = td_mask_rows_put_(&front, a, &value);
  }
  td_tensor_release(scalar);
  return st;
}

/* Collects (and checks) the writes of dst[index] = src into jobs. */
static int32_t put_level(td_dict *dst, td_dict *src, const put_ctx *c,
                         const td_key_path *parent, td_jobs *jobs) {
  char buf[TD_PATH_CHARS];
  /* Every key of the value must have a place: none is dropped silently. */
  for (int32_t j = 0; src && j < src->keys->n; j++) {
    if (td_dict_find_like(dst, src, j) < 0) {
      td_key_path here = {parent, td_dict_key(src, j)};
      return td_fail(TD_EINVAL, "index assignment: key '%s' of the value is not in the TensorDict",
                     td_key_path_text(&here, buf));
    }
  }
  for (int32_t i = 0; i < dst->keys->n; i++) {
    td_entry *e = &dst->entries[i];
    td_key_path here = {parent, td_dict_key(dst, i)};
    const td_entry *s = NULL;
    if (src) {
      int32_t j = td_dict_find_like(src, dst, i);
      if (j < 0) continue; /* a value with fewer keys writes those, as in Python */
      s = &src->entries[j];
      if ((s->kind == TD_ENTRY_DICT) != (e->kind == TD_ENTRY_DICT) ||
          ((s->kind == TD_ENTRY_TENSOR) != (e->kind == TD_ENTRY_TENSOR)))
        return td_fail(TD_EINVAL,
                       "index assignment: key '%s' is a %s here and a %s in the value",
                       td_key_path_text(&here, buf), e->kind == TD_ENTRY_DICT ? "TensorDict" : "leaf",
                       s->kind == TD_ENTRY_DICT ? "TensorDict" : "leaf");
    }
    int32_t st = 0;
    if (e->kind == TD_ENTRY_DICT) {
      st = put_level(e->child, s ? s->child : NULL, c, &here, jobs);
    } else if (e->kind == TD_ENTRY_TENSOR) {
      const td_tensor *from = s ? &s->t : NULL;
      if (c->ix.adv) {
        st = td_jobs_add(jobs, "index assignment", &e->t, from, put_adv, c);
      } else {
        td_tensor view;
        run_plan(&c->ix, &e->t, &view);
        st = td_jobs_add(jobs, "index assignment", &view, from, NULL, NULL);
      }
      if (st) td_dict_fail_at(st, "index assignment", &here);
    } else if (s && !(s->kind == TD_ENTRY_VALUE && e->kind == TD_ENTRY_VALUE &&
                      strcmp(s->values->texts[0], e->values->texts[0]) == 0)) {
      /* A different non-tensor value: written after the tensors (put_values_level). */
      if (e->kind == TD_ENTRY_VALUES && !td_check_writable("write", &e->t)) st = td_last_status();
      if (st) td_dict_fail_at(st, "index assignment", &here);
      jobs->values++;
    }
    if (st) return st;
  }
  return 0;
}

/* The position of text in v, appended when it is not there. v may be shared with views
 * whose positions are the same storage, so it grows in place: they must see the text. */
static int64_t text_index(td_values *v, const char *text) {
  for (int64_t j = 0; j < v->n; j++)
    if (strcmp(v->texts[j], text) == 0) return j;
  char *copy = strdup(text);
  char **texts = copy ? realloc(v->texts, sizeof *texts * (size_t)(v->n + 1)) : NULL;
  if (!texts) {
    free(copy);
    return td_fail(TD_ENOMEM, "index assignment: out of memory");
  }
  v->texts = texts;
  v->texts[v->n] = copy;
  return v->n++;
}

/* A one-value entry becomes a stacked one (every position 0) so elements can differ. */
static int32_t stack_value(td_dict *d, td_entry *e) {
  td_values *v = td_values_new(1);
  td_tensor *pos = td_tensor_full(d->head.ndim, d->head.shape, TD_INT64, 0);
  if (!v || !pos || !(v->texts[0] = strdup(e->values->texts[0]))) {
    td_values_release(v);
    td_tensor_release(pos);
    return td_fail(TD_ENOMEM, "index assignment: out of memory");
  }
  td_values_release(e->values);
  e->values = v;
  td_hold_view(&e->t, pos);
  td_tensor_release(pos);
  e->kind = TD_ENTRY_VALUES;
  return 0;
}

/* src's value ids as ids of dst's texts: a 0-dim tensor for one value, else src's
 * positions mapped (same shape). */
static td_tensor *mapped_ids(td_values *dst, const td_entry *s) {
  if (s->kind == TD_ENTRY_VALUE) {
    int64_t id = text_index(dst, s->values->texts[0]);
    return id < 0 ? NULL : td_tensor_full(0, NULL, TD_INT64, (double)id);
  }
  int64_t n = s->values->n;
  int64_t *map = malloc(sizeof *map * (size_t)(n ? n : 1));
  /* a fresh copy: contiguous() would hand back src's own positions when they are dense */
  td_tensor *ids = map ? td_tensor_empty(s->t.ndim, s->t.shape, TD_INT64) : NULL;
  bool ok = ids && td_tensor_copy_(ids, &s->t) == 0;
  for (int64_t j = 0; ok && j < n; j++) ok = (map[j] = text_index(dst, s->values->texts[j])) >= 0;
  if (ok) {
    int64_t *p = (int64_t *)td_tensor_ptr(ids);
    for (int64_t k = 0, m = td_tensor_numel(ids); k < m; k++) p[k] = map[p[k]];
  }
  free(map);
  if (!ok) {
    td_tensor_release(ids);
    if (!map) td_fail(TD_ENOMEM, "index assignment: out of memory");
    return NULL;
  }
  return ids;
}

/* dst[index] = src for the non-tensor entries whose values differ (Python writes them
 * element-wise): dst's entry becomes stacked, src's texts join its texts, and src's ids
 * are written into dst's positions like a tensor leaf. */
static int32_t put_values_level(td_dict *dst, td_dict *src, const put_ctx *c) {
  for (int32_t i = 0; i < dst->keys->n; i++) {
    td_entry *e = &dst->entries[i];
    int32_t j = td_dict_find_like(src, dst, i);
    if (j < 0) continue;
    const td_entry *s = &src->entries[j];
    int32_t st = 0;
    if (e->kind == TD_ENTRY_DICT) {
      st = put_values_level(e->child, s->child, c);
    } else if (e->kind == TD_ENTRY_TENSOR ||
               (s->kind == TD_ENTRY_VALUE && e->kind == TD_ENTRY_VALUE &&
                strcmp(s->values->texts[0], e->values->texts[0]) == 0)) {
      continue;
    } else {
      if (e->kind == TD_ENTRY_VALUE && (st = stack_value(dst, e))) return st;
      td_tensor *ids = mapped_ids(e->values, s);
      if (!ids) return td_last_status();
      if (c->ix.adv) {
        st = put_adv(c, &e->t, ids);
      } else {
        td_tensor view;
        run_plan(&c->ix, &e->t, &view);
        st = td_tensor_copy_(&view, ids);
      }
      td_tensor_release(ids);
      td_dict_touch(dst);
    }
    if (st) return st;
  }
  return 0;
}

TD_EXPORT int32_t td_dict_index_put_(td_dict *dst, const td_index *entries, int32_t n,
                                     const td_tensor *adv, int32_t adv_dim, td_dict *src,
                                     double value) {
  if (dst->head.ndim == 0 && n > 0)
    return td_fail(TD_EINDEX, "index assignment: the TensorDict has no batch dims");
  put_ctx c = {.ix = {.adv = adv, .adv_dim = adv_dim}, .value = value};
  int32_t st = normalize("index assignment", entries, n, dst->head.ndim, &c.ix);
  if (!st) st = make_plan("index assignment", dst, &c.ix);
  if (st) return st;
  int32_t ndim;
  int64_t shape[TD_MAX_DIMS];
  if ((st = indexed_batch(dst, &c.ix, &ndim, shape))) return st;
  if (src && src->head.ndim > ndim) {
    char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
    return td_fail(TD_ESHAPE,
                   "index assignment: a TensorDict of batch size %s does not fit the "
                   "selection of batch size %s",
                   td_format_shape(a, sizeof a, src->head.ndim, src->head.shape),
                   td_format_shape(b, sizeof b, ndim, shape));
  }
  if (src) {
    /* Leaves broadcast: the value's batch size must broadcast to the selection's. */
    int32_t bn;
    int64_t bs[TD_MAX_DIMS];
    if (!td_broadcast_shapes("index assignment", ndim, shape, src->head.ndim, src->head.shape,
                             &bn, bs))
      return td_last_status();
    bool same = bn == ndim;
    for (int32_t i = 0; same && i < ndim; i++) same = bs[i] == shape[i];
    if (!same) {
      char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
      return td_fail(TD_ESHAPE,
                     "index assignment: a TensorDict of batch size %s does not broadcast to "
                     "the selection of batch size %s",
                     td_format_shape(a, sizeof a, src->head.ndim, src->head.shape),
                     td_format_shape(b, sizeof b, ndim, shape));
    }
  }
  td_jobs jobs = {.value = value};
  st = put_level(dst, src, &c, NULL, &jobs);
  if (!st) st = td_jobs_run(&jobs, "index assignment");
  if (!st && jobs.values) st = put_values_level(dst, src, &c);
  td_jobs_free(&jobs);
  return st;
}

/* ------------------------------------------------------------------- shape ops */

typedef struct shape_ctx {
  int32_t ndim; /* the new batch */
  int64_t shape[TD_MAX_DIMS];
  int32_t dims[TD_MAX_DIMS];
  int32_t a, b;
} shape_ctx;

/* The new batch followed by in's dims past op_ndim. */
static int32_t with_trailing(const td_leaf_op *op, const td_tensor *in, int64_t *shape) {
  const shape_ctx *c = op->ctx;
  int32_t extra = in->ndim - op->op_ndim;
  if (c->ndim + extra > TD_MAX_DIMS)
    return td_fail(TD_ESHAPE, "%s: more than %d dims", op->call, TD_MAX_DIMS);
  memcpy(shape, c->shape, sizeof *shape * (size_t)c->ndim);
  memcpy(shape + c->ndim, in->shape + op->op_ndim, sizeof *shape * (size_t)extra);
  return c->ndim + extra;
}

static int32_t view_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  int64_t shape[TD_MAX_DIMS];
  int32_t n = with_trailing(op, in, shape);
  if (n < 0) return n;
  int32_t st = td_tensor_view(in, n, shape, out);
  return st ? st : TD_LEAF_VIEW;
}

static int32_t reshape_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  int64_t shape[TD_MAX_DIMS];
  int32_t n = with_trailing(op, in, shape);
  if (n < 0) return n;
  return td_take_owned(out, td_tensor_reshape(in, n, shape));
}

static int32_t expand_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  int64_t shape[TD_MAX_DIMS];
  int32_t n = with_trailing(op, in, shape);
  if (n < 0) return n;
  int32_t st = td_tensor_expand(in, n, shape, out);
  return st ? st : TD_LEAF_VIEW;
}

static int32_t permute_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  const shape_ctx *c = op->ctx;
  int32_t perm[TD_MAX_DIMS];
  for (int32_t i = 0; i < in->ndim; i++) perm[i] = i < op->op_ndim ? c->dims[i] : i;
  int32_t st = td_tensor_permute(in, perm, out);
  return st ? st : TD_LEAF_VIEW;
}

static int32_t unsqueeze_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  const shape_ctx *c = op->ctx;
  int32_t st = td_tensor_unsqueeze(in, c->a, out);
  return st ? st : TD_LEAF_VIEW;
}

/* Squeezes the batch dims listed in dims[0..a) (descending, all of size 1). */
static int32_t squeeze_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  const shape_ctx *c = op->ctx;
  td_tensor cur = *in;
  cur.refcount = 0;
  for (int32_t k = 0; k < c->a; k++) {
    int32_t st = td_tensor_squeeze(&cur, c->dims[k], &cur);
    if (st) return st;
  }
  *out = cur;
  return TD_LEAF_VIEW;
}

static int32_t flatten_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  const shape_ctx *c = op->ctx;
  return td_take_owned(out, td_tensor_flatten(in, c->a, c->b));
}

static int32_t unflatten_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  const shape_ctx *c = op->ctx;
  int32_t st = td_tensor_unflatten(in, c->a, c->b, c->shape + c->a, out);
  return st ? st : TD_LEAF_VIEW;
}

static td_dict *run_shape_op(const td_dict *d, const char *call,
                             int32_t (*fn)(const td_leaf_op *, const td_tensor *, td_tensor *),
                             shape_ctx *c) {
  td_leaf_op op = {call, fn, d->head.ndim, c};
  return td_dict_map(d, &op, c->ndim, c->shape);
}

static void take_shape(shape_ctx *c, const td_tensor *h) {
  c->ndim = h->ndim;
  memcpy(c->shape, h->shape, sizeof *c->shape * (size_t)h->ndim);
}

TD_EXPORT td_dict *td_dict_view(const td_dict *d, int32_t ndim, const int64_t *shape) {
  td_tensor probe, r;
  td_shape_header(&probe, d->head.ndim, d->head.shape);
  if (td_tensor_view(&probe, ndim, shape, &r)) return NULL;
  shape_ctx c;
  take_shape(&c, &r);
  return run_shape_op(d, "view", view_leaf, &c);
}

TD_EXPORT td_dict *td_dict_reshape(const td_dict *d, int32_t ndim, const int64_t *shape) {
  td_tensor probe, r;
  td_shape_header(&probe, d->head.ndim, d->head.shape);
  if (td_tensor_view(&probe, ndim, shape, &r)) return NULL; /* resolves -1, checks numel */
  shape_ctx c;
  take_shape(&c, &r);
  return run_shape_op(d, "reshape", reshape_leaf, &c);
}

TD_EXPORT td_dict *td_dict_expand(const td_dict *d, int32_t ndim, const int64_t *shape) {
  td_tensor probe, r;
  td_shape_header(&probe, d->head.ndim, d->head.shape);
  if (td_tensor_expand(&probe, ndim, shape, &r)) return NULL;
  shape_ctx c;
  take_shape(&c, &r);
  return run_shape_op(d, "expand", expand_leaf, &c);
}

TD_EXPORT td_dict *td_dict_permute(const td_dict *d, const int32_t *dims) {
  td_tensor probe, r;
  td_shape_header(&probe, d->head.ndim, d->head.shape);
  if (td_tensor_permute(&probe, dims, &r)) return NULL;
  shape_ctx c;
  take_shape(&c, &r);
  memcpy(c.dims, dims, sizeof *dims * (size_t)d->head.ndim);
  return run_shape_op(d, "permute", permute_leaf, &c);
}

TD_EXPORT td_dict *td_dict_transpose(const td_dict *d, int32_t dim0, int32_t dim1) {
  int32_t n = d->head.ndim;
  if (dim0 < 0 || dim0 >= n || dim1 < 0 || dim1 >= n)
    return td_fail_null(TD_EINDEX, "transpose: dims %d and %d for %d batch dims", (int)dim0 + 1,
                        (int)dim1 + 1, (int)n);
  int32_t dims[TD_MAX_DIMS];
  for (int32_t i = 0; i < n; i++) dims[i] = i;
  dims[dim0] = dim1;
  dims[dim1] = dim0;
  return td_dict_permute(d, dims);
}

TD_EXPORT td_dict *td_dict_unsqueeze(const td_dict *d, int32_t dim) {
  td_tensor probe, r;
  td_shape_header(&probe, d->head.ndim, d->head.shape);
  if (td_tensor_unsqueeze(&probe, dim, &r)) return NULL;
  shape_ctx c;
  take_shape(&c, &r);
  c.a = dim;
  return run_shape_op(d, "unsqueeze", unsqueeze_leaf, &c);
}

TD_EXPORT td_dict *td_dict_squeeze(const td_dict *d, int32_t dim) {
  shape_ctx c = {0};
  int32_t n = d->head.ndim;
  if (dim >= n || dim < -1)
    return td_fail_null(TD_EINDEX, "squeeze: dim %d for %d batch dims", (int)dim + 1, (int)n);
  for (int32_t i = n - 1; i >= 0; i--) /* descending, so earlier dims keep their place */
    if ((dim == -1 || dim == i) && d->head.shape[i] == 1) c.dims[c.a++] = i;
  for (int32_t i = 0; i < n; i++) {
    bool gone = false;
    for (int32_t k = 0; k < c.a; k++) gone |= c.dims[k] == i;
    if (!gone) c.shape[c.ndim++] = d->head.shape[i];
  }
  return run_shape_op(d, "squeeze", squeeze_leaf, &c);
}

TD_EXPORT td_dict *td_dict_flatten(const td_dict *d, int32_t start_dim, int32_t end_dim) {
  int32_t n = d->head.ndim;
  if (start_dim < 0 || end_dim >= n || start_dim > end_dim)
    return td_fail_null(TD_EINDEX, "flatten: dims %d..%d for %d batch dims", (int)start_dim + 1,
                        (int)end_dim + 1, (int)n);
  shape_ctx c = {.a = start_dim, .b = end_dim};
  int64_t merged = 1;
  for (int32_t i = 0; i < n; i++) {
    if (i < start_dim || i > end_dim) c.shape[c.ndim++] = d->head.shape[i];
    else merged *= d->head.shape[i];
    if (i == end_dim) c.shape[c.ndim++] = merged;
  }
  return run_shape_op(d, "flatten", flatten_leaf, &c);
}

TD_EXPORT td_dict *td_dict_unflatten(const td_dict *d, int32_t dim, int32_t n,
                                     const int64_t *sizes) {
  td_tensor probe, r;
  td_shape_header(&probe, d->head.ndim, d->head.shape);
  if (td_tensor_unflatten(&probe, dim, n, sizes, &r)) return NULL;
  shape_ctx c;
  take_shape(&c, &r);
  c.a = dim;
  c.b = n;
  return run_shape_op(d, "unflatten", unflatten_leaf, &c);
}

/* --------------------------------------------------------------- copies, casts */

typedef struct copy_ctx {
  int32_t mode, dtype, floating_only;
} copy_ctx;

static int32_t copy_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  const copy_ctx *c = op->ctx;
  switch (c->mode) {
  case TD_COPY_CLONE: return td_take_owned(out, td_tensor_clone(in));
  case TD_COPY_CONTIGUOUS: return td_take_owned(out, td_tensor_contiguous(in));
  case TD_COPY_EMPTY: return td_take_owned(out, td_tensor_empty(in->ndim, in->shape, in->dtype));
  default: return td_take_owned(out, td_tensor_full(in->ndim, in->shape, in->dtype, 0));
  }
}

TD_EXPORT td_dict *td_dict_copy(const td_dict *d, int32_t mode) {
  if (mode < TD_COPY_CLONE || mode > TD_COPY_ZEROS)
    return td_fail_null(TD_EINVAL, "copy: unknown mode %d", (int)mode);
  copy_ctx c = {.mode = mode};
  td_leaf_op op = {mode == TD_COPY_CLONE ? "clone" : mode == TD_COPY_CONTIGUOUS ? "contiguous"
                                                   : mode == TD_COPY_EMPTY    ? "empty"
                                                                              : "zeros_like",
                   copy_leaf, 0, &c};
  return map_values(d, &op, mode == TD_COPY_CONTIGUOUS ? VALUES_CONTIGUOUS : VALUES_COPY);
}

static int32_t cast_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  const copy_ctx *c = op->ctx;
  if (c->floating_only && !td_dtype_is_floating(in->dtype)) {
    td_header_copy(out, in);
    return TD_LEAF_VIEW;
  }
  return td_take_owned(out, td_tensor_to_dtype(in, c->dtype));
}

TD_EXPORT td_dict *td_dict_to_dtype(const td_dict *d, int32_t dtype, int32_t floating_only) {
  if (!td_check_dtype("to", dtype)) return NULL;
  copy_ctx c = {.dtype = dtype, .floating_only = floating_only};
  td_leaf_op op = {"to", cast_leaf, 0, &c};
  return map_values(d, &op, VALUES_COPY);
}

/* ------------------------------------------------------------------- update_ */

static const char *kind_name(int32_t kind) {
  return kind == TD_ENTRY_DICT ? "TensorDict" : kind == TD_ENTRY_TENSOR ? "tensor"
                                                                       : "non-tensor value";
}

/* Collects the copies of update_ (checked) and applies the value replacements, which
 * cannot fail, only once every copy passed its checks. */
static int32_t update_level(td_dict *dst, const td_dict *src, const td_key_path *parent,
                            td_jobs *jobs, bool apply_values) {
  char buf[TD_PATH_CHARS];
  for (int32_t i = 0; i < src->keys->n; i++) {
    const td_entry *s = &src->entries[i];
    const char *key = td_dict_key(src, i);
    td_key_path here = {parent, key};
    int32_t j = td_dict_find_like(dst, src, i), st = 0;
    if (j < 0)
      return td_fail(TD_EINVAL, "update_: key '%s' is not in the TensorDict",
                     td_key_path_text(&here, buf));
    td_entry *e = &dst->entries[j];
    if (s->kind == TD_ENTRY_DICT && e->kind == TD_ENTRY_DICT) {
      st = update_level(e->child, s->child, &here, jobs, apply_values);
    } else if (s->kind == TD_ENTRY_TENSOR && e->kind == TD_ENTRY_TENSOR) {
      if (!apply_values) {
        st = td_jobs_add(jobs, "update_", &e->t, &s->t, NULL, NULL);
        if (st) td_dict_fail_at(st, "update_", &here);
      }
    } else if (s->kind != TD_ENTRY_DICT && e->kind != TD_ENTRY_DICT &&
               s->kind != TD_ENTRY_TENSOR && e->kind != TD_ENTRY_TENSOR) {
      jobs->values++;
      if (apply_values) { /* non-tensor to non-tensor: a copy of the source's value */
        td_entry copy;
        if ((st = td_entry_copy(&copy, s))) return td_dict_fail_at(st, "update_", &here);
        td_entry_clear(dst, e);
        *e = copy;
        td_dict_touch(dst);
      }
    } else {
      st = td_fail(TD_EINVAL, "update_: key '%s' is a %s here and a %s in the source",
                   td_key_path_text(&here, buf), kind_name(e->kind), kind_name(s->kind));
    }
    if (st) return st;
  }
  return 0;
}

TD_EXPORT int32_t td_dict_update_(td_dict *dst, const td_dict *src) {
  td_jobs jobs = {0};
  int32_t st = update_level(dst, src, NULL, &jobs, false);
  if (!st) st = td_jobs_run(&jobs, "update_");
  if (!st && jobs.values) st = update_level(dst, src, NULL, &jobs, true);
  td_jobs_free(&jobs);
  return st;
}
