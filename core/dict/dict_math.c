/*
 * dict_math.c: arithmetic, comparison and reductions over every tensor leaf of a
 * container (td_dict_unary .. td_dict_allclose). One C call per operation loops over the
 * leaves, nested containers included, and hands each leaf to the kernels of core/kernels.
 *
 * Behaviours decided here (Python tensordict 0.15 is the reference):
 * - Non-tensor values, uniform and stacked, are carried over unchanged (shared) by the
 *   operations on values. With a container operand, a non-tensor key must hold a
 *   non-tensor value on both sides; the result keeps the first container's.
 * - A container operand is aligned by key: the key sets must be equal at every level
 *   (a key missing on either side is an error naming its dotted path), and each key must
 *   be a tensor, a container or a non-tensor value on both sides. Leaves combine with
 *   torch's broadcasting.
 * - A tensor operand with no more dims than the batch, and every mask, is aligned to the
 *   LEFT, on the leading batch dims, as Python tensordict does for a tensor shaped like
 *   the batch size: it is viewed as shape ++ [1, ...] up to each leaf's ndim before the
 *   kernel broadcasts, so a [3] tensor adds one number to each row of a batch-[3]
 *   container whose leaves are [3, 4]. Its sizes must equal the batch's or be 1 (checked
 *   before any leaf is touched; the message names both shapes). A tensor operand with
 *   more dims than the batch broadcasts against each leaf by torch's rule (aligned right).
 * - Results keep a's batch size: a leaf that broadcasting would make larger than the
 *   batch is an error naming the key and both shapes.
 * - scalar_first puts the other operand (scalar, tensor or container leaf) first.
 * - In-place forms check every leaf before writing any (writable, broadcast to the leaf,
 *   result dtype not above the leaf's category, the kernel's own refusals, learnt by
 *   running it on an empty view; a scalar operand meets one element, so an integer
 *   division by a zero scalar is caught too), so a refused call leaves a unchanged. A
 *   failure only the data reveals (an integer division by a zero element of a tensor
 *   operand) stops at that leaf, whose value is kept; the leaves before it keep their
 *   new values.
 * - reduce: dims are batch dims of the top level, applied to nested containers too;
 *   ndims 0 reduces each leaf over all its elements (every level's batch becomes [], or
 *   all ones with keepdim). Names of the kept dims follow. A stacked non-tensor value is
 *   kept when its texts are equal along the reduced dims (its positions become the
 *   first position of each group) and refused otherwise.
 * - reduce_all copies every leaf once into one float64 (bool for all / any) buffer and
 *   reduces it. With no tensor leaf: sum and norm give 0, prod 1, all true, any false;
 *   the others are an error. argmin / argmax are refused (no meaning across leaves).
 * - equal / allclose answer 0 (no error) for different key sets, kinds, batch sizes or
 *   leaf shapes. Values compare after promotion (int 1 equals float 1.0); allclose uses
 *   torch.isclose's rule in float64 when either leaf is floating (equal, or a finite
 *   |a - b| <= atol + rtol * |b|), exact equality otherwise; NaNs are unequal.
 *   Non-tensor values compare their JSON texts position by position (a uniform value
 *   equals a stacked one whose texts are all its text).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dict_internal.h"
#include "../kernels/elementwise.h"
#include "../kernels/ops.h"


static const char *shape_str(char *buf, int32_t ndim, const int64_t *shape) {
  return td_format_shape(buf, TD_SHAPE_STR, ndim, shape);
}

/* Tensors, containers and non-tensor values (uniform or stacked) pair with their own. */
static int32_t entry_class(int32_t kind) {
  return kind == TD_ENTRY_VALUES ? TD_ENTRY_VALUE : kind;
}
static const char *class_name(int32_t kind) {
  switch (entry_class(kind)) {
    case TD_ENTRY_TENSOR: return "tensor";
    case TD_ENTRY_DICT: return "TensorDict";
    default: return "non-tensor value";
  }
}

static bool check_dict(const char *call, const td_dict *d, const char *what) {
  if (d) return true;
  td_fail(TD_EINVAL, "%s: the %s is NULL", call, what);
  return false;
}

static bool check_tensor_arg(const char *call, const td_tensor *t, const char *what) {
  if (t && t->storage) return true;
  td_fail(TD_EINVAL, "%s: the %s is NULL", call, what);
  return false;
}

static bool check_scalar_kind(const char *call, int32_t kind) {
  if (kind >= TD_SCALAR_BOOL && kind <= TD_SCALAR_FLOAT) return true;
  td_fail(TD_EINVAL, "%s: unknown scalar kind %d", call, (int)kind);
  return false;
}

static bool check_mask(const char *call, const td_tensor *mask) {
  if (!check_tensor_arg(call, mask, "mask")) return false;
  if (mask->dtype == TD_BOOL) return true;
  td_fail(TD_EDTYPE, "%s: the mask must be a bool tensor, got %s", call,
          td_dtype_name(mask->dtype) ? td_dtype_name(mask->dtype) : "an unknown dtype");
  return false;
}

/* t (a mask or a tensor operand) over the leading batch dims of a: no more dims than the
 * batch, and each size equal to the batch's (or 1, unless exact). */
static bool covers_leading(const char *call, const char *what, const td_tensor *t,
                           const td_dict *a, bool exact) {
  char ts[TD_SHAPE_STR], bs[TD_SHAPE_STR], ls[TD_SHAPE_STR];
  const td_dict_head *h = &a->head;
  if (t->ndim > h->ndim) {
    td_fail(TD_ESHAPE, "%s: %s of shape %s has more dims than the batch size %s", call, what,
            shape_str(ts, t->ndim, t->shape), shape_str(bs, h->ndim, h->shape));
    return false;
  }
  for (int32_t i = 0; i < t->ndim; i++) {
    if (t->shape[i] == h->shape[i] || (!exact && t->shape[i] == 1)) continue;
    td_fail(TD_ESHAPE, "%s: %s of shape %s does not %s the leading batch dims %s (batch size %s)",
            call, what, shape_str(ts, t->ndim, t->shape), exact ? "match" : "broadcast to",
            shape_str(ls, t->ndim, h->shape), shape_str(bs, h->ndim, h->shape));
    return false;
  }
  return true;
}

/* t viewed as t.shape ++ [1, ...] up to ndim dims: a caller-owned header. */
static void align_left(const td_tensor *t, int32_t ndim, td_tensor *out) {
  int64_t shape[TD_MAX_DIMS], strides[TD_MAX_DIMS];
  int32_t n = ndim > t->ndim ? ndim : t->ndim;
  for (int32_t i = 0; i < n; i++) {
    shape[i] = i < t->ndim ? t->shape[i] : 1;
    strides[i] = i < t->ndim ? t->strides[i] : 1;
  }
  td_view_set(out, t, t->offset, n, shape, strides);
}

/* A header that promotes like t but has no element: shape [0] over t's storage, or t
 * itself when 0-dim (one element costs nothing). The in-place forms run the out-of-place
 * kernel on these first, to learn the result dtype and meet the kernel's refusals. */
static void probe_of(const td_tensor *t, td_tensor *out) {
  if (t->ndim == 0) {
    *out = *t;
    out->refcount = 0;
    return;
  }
  const int64_t zero = 0;
  td_view_set(out, t, t->offset, 1, &zero, NULL);
}

/* ---------------------------------------------------------------- the walks */

typedef struct math_ctx math_ctx;
struct math_ctx {
  const char *call;
  /* out of place: a new tensor for leaf x (y: the paired leaf of a container operand) */
  td_tensor *(*fn)(const math_ctx *c, const td_tensor *x, const td_tensor *y);
  /* in place: check only (dry) or write */
  int32_t (*fn_)(const math_ctx *c, td_tensor *x, const td_tensor *y, bool dry);
  int32_t op;
  const td_tensor *t; /* the tensor operand or the mask */
  bool left;          /* t is aligned on the leading dims */
  double s, s2;
  int32_t s_kind, first, has_min, has_max;
};

/* Every key of b is a key of a (the other direction is checked entry by entry). */
static bool no_extra_keys(const char *call, const td_dict *a, const td_dict *b,
                          const td_key_path *parent) {
  for (int32_t j = 0; j < b->keys->n; j++) {
    int64_t len;
    const char *key = td_dict_key_borrow(b, j, &len);
    if (td_dict_find(a, key, len) >= 0) continue;
    td_key_path here = {parent, key};
    char buf[TD_PATH_CHARS];
    td_fail(TD_EINVAL, "%s: key '%s' of the other TensorDict is not in this one", call,
            td_key_path_text(&here, buf));
    return false;
  }
  return true;
}

/* The entry of b paired with entry i of a (NULL without b); false after td_fail. */
static bool pair_entry(const char *call, const td_dict *a, int32_t i, const td_dict *b,
                       const td_key_path *p, const td_entry **out) {
  *out = NULL;
  if (!b) return true;
  int64_t len;
  const char *key = td_dict_key_borrow(a, i, &len);
  int32_t j = td_dict_find(b, key, len);
  char buf[TD_PATH_CHARS];
  if (j < 0) {
    td_fail(TD_EINVAL, "%s: key '%s' is missing from the other TensorDict", call,
            td_key_path_text(p, buf));
    return false;
  }
  const td_entry *e = &a->entries[i], *o = &b->entries[j];
  if (entry_class(e->kind) != entry_class(o->kind)) {
    td_fail(TD_EINVAL, "%s: key '%s' is a %s here and a %s in the other TensorDict", call,
            td_key_path_text(p, buf), class_name(e->kind), class_name(o->kind));
    return false;
  }
  *out = o;
  return true;
}

static bool fits_batch(const char *call, const td_dict *d, const td_tensor *t,
                       const td_key_path *p) {
  bool ok = t->ndim >= d->head.ndim;
  for (int32_t i = 0; ok && i < d->head.ndim; i++) ok = t->shape[i] == d->head.shape[i];
  if (ok) return true;
  char ts[TD_SHAPE_STR], bs[TD_SHAPE_STR], buf[TD_PATH_CHARS];
  td_fail(TD_ESHAPE,
          "%s: key '%s': the result has shape %s, which does not start with the batch size %s "
          "(the other operand broadcasts beyond it)",
          call, td_key_path_text(p, buf), shape_str(ts, t->ndim, t->shape), shape_str(bs, d->head.ndim, d->head.shape));
  return false;
}

static int32_t pending(void) { return td_last_status() ? td_last_status() : TD_ENOMEM; }

/* A new container of a's structure and batch size with every tensor leaf replaced by
 * c->fn's result; non-tensor values carried over (a stacked one copied: td_entry_copy). */
static td_dict *map_level(const td_dict *a, const td_dict *b, const math_ctx *c,
                          const td_key_path *parent) {
  if (b && !no_extra_keys(c->call, a, b, parent)) return NULL;
  td_dict *r = td_dict_like(a, 0, NULL);
  if (!r) return NULL;
  for (int32_t i = 0; i < a->keys->n; i++) {
    const td_entry *e = &a->entries[i], *eb;
    td_entry *o = &r->entries[i];
    td_key_path here = {parent, td_dict_key(a, i)};
    bool ok = pair_entry(c->call, a, i, b, &here, &eb);
    if (ok && e->kind == TD_ENTRY_DICT) {
      o->kind = TD_ENTRY_DICT;
      o->child = map_level(e->child, eb ? eb->child : NULL, c, &here);
      ok = o->child != NULL;
    } else if (ok && e->kind == TD_ENTRY_TENSOR) {
      td_tensor *t = c->fn(c, &e->t, eb ? &eb->t : NULL);
      if (!t) {
        td_dict_fail_at(pending(), c->call, &here);
        ok = false;
      } else if (!fits_batch(c->call, a, t, &here)) {
        td_tensor_release(t);
        ok = false;
      } else {
        o->kind = TD_ENTRY_TENSOR;
        td_take_owned(&o->t, t);
      }
    } else if (ok) { /* a new container: its own copy of a stacked value */
      int32_t st = td_entry_copy(o, e);
      if (st) {
        td_dict_fail_at(st, c->call, &here);
        ok = false;
      }
    }
    if (!ok) {
      td_dict_release(r);
      return NULL;
    }
  }
  return r;
}

static td_dict *map_dict(const td_dict *a, const td_dict *b, const math_ctx *c) {
  return map_level(a, b, c, NULL);
}

static int32_t visit_level(td_dict *a, const td_dict *b, const math_ctx *c, bool dry,
                           const td_key_path *parent) {
  if (b && dry && !no_extra_keys(c->call, a, b, parent)) return td_last_status();
  for (int32_t i = 0; i < a->keys->n; i++) {
    td_entry *e = &a->entries[i];
    const td_entry *eb;
    td_key_path here = {parent, td_dict_key(a, i)};
    int32_t st = pair_entry(c->call, a, i, b, &here, &eb) ? 0 : td_last_status();
    if (!st && e->kind == TD_ENTRY_DICT) {
      st = visit_level(e->child, eb ? eb->child : NULL, c, dry, &here);
    } else if (!st && e->kind == TD_ENTRY_TENSOR) {
      st = c->fn_(c, &e->t, eb ? &eb->t : NULL, dry);
      if (st) td_dict_fail_at(st, c->call, &here);
    }
    if (st) return st;
  }
  return 0;
}

/* Checks every leaf, then writes every leaf. */
static int32_t visit_dict(td_dict *a, const td_dict *b, const math_ctx *c) {
  int32_t st = visit_level(a, b, c, true, NULL);
  return st ? st : visit_level(a, b, c, false, NULL);
}

/* The result dtype of an out-of-place kernel run on probes (NULL after td_fail), then
 * the in-place checks against the real shapes. */
static int32_t check_inplace(const char *call, td_tensor *x, td_tensor *probe_result,
                             const td_tensor *y) {
  if (!probe_result) return td_last_status();
  int32_t dtype = probe_result->dtype;
  td_tensor_release(probe_result);
  int32_t ndim = x->ndim;
  int64_t shape[TD_MAX_DIMS];
  if (y) {
    if (!td_broadcast_shapes(call, x->ndim, x->shape, y->ndim, y->shape, &ndim, shape))
      return td_last_status();
  } else {
    memcpy(shape, x->shape, sizeof *shape * (size_t)x->ndim);
  }
  return td_ew_check_inplace(call, x, ndim, shape, dtype) ? 0 : td_last_status();
}

/* ------------------------------------------------------------- unary, clamp */

static td_tensor *unary_leaf(const math_ctx *c, const td_tensor *x, const td_tensor *y) {
  (void)y;
  return td_unary(c->op, x);
}

static int32_t unary_leaf_(const math_ctx *c, td_tensor *x, const td_tensor *y, bool dry) {
  (void)y;
  if (!dry) return td_unary_(c->op, x);
  td_tensor px;
  probe_of(x, &px);
  return check_inplace(c->call, x, td_unary(c->op, &px), NULL);
}

TD_EXPORT td_dict *td_dict_unary(int32_t op, const td_dict *a) {
  if (op < 0 || op >= TD_UNARY_COUNT)
    return td_fail_null(TD_EINVAL, "unary: unknown unary op %d", (int)op);
  math_ctx c = {.call = td_unary_rows[op].name, .fn = unary_leaf, .op = op};
  return check_dict(c.call, a, "TensorDict") ? map_dict(a, NULL, &c) : NULL;
}

TD_EXPORT int32_t td_dict_unary_(int32_t op, td_dict *a) {
  if (op < 0 || op >= TD_UNARY_COUNT)
    return td_fail(TD_EINVAL, "unary_: unknown unary op %d", (int)op);
  math_ctx c = {.call = td_unary_rows[op].inplace, .fn_ = unary_leaf_, .op = op};
  return check_dict(c.call, a, "TensorDict") ? visit_dict(a, NULL, &c) : td_last_status();
}

static td_tensor *clamp_leaf(const math_ctx *c, const td_tensor *x, const td_tensor *y) {
  (void)y;
  return td_clamp(x, c->s, c->s2, c->has_min, c->has_max);
}

TD_EXPORT td_dict *td_dict_clamp(const td_dict *a, double min, double max, int32_t has_min,
                                 int32_t has_max) {
  math_ctx c = {.call = "clamp", .fn = clamp_leaf, .s = min, .s2 = max, .has_min = has_min,
                .has_max = has_max};
  return check_dict(c.call, a, "TensorDict") ? map_dict(a, NULL, &c) : NULL;
}

/* ------------------------------------------------------------------ binary */

/* The tensor operand as leaf x sees it (aligned left when it covers batch dims). */
static const td_tensor *operand_for(const math_ctx *c, const td_tensor *x, const td_tensor *y,
                                    td_tensor *view) {
  if (y || !c->t) return y;
  /* A 0-dim tensor broadcasts as it is, so it promotes like a scalar (torch's rule). */
  if (!c->left || c->t->ndim == 0) return c->t;
  align_left(c->t, x->ndim, view);
  return view;
}

static td_tensor *binary_leaf(const math_ctx *c, const td_tensor *x, const td_tensor *y) {
  td_tensor view;
  y = operand_for(c, x, y, &view);
  if (!y) return td_binary_scalar(c->op, x, c->s, c->s_kind, c->first);
  return c->first ? td_binary(c->op, y, x) : td_binary(c->op, x, y);
}

static int32_t binary_leaf_(const math_ctx *c, td_tensor *x, const td_tensor *y, bool dry) {
  td_tensor view;
  y = operand_for(c, x, y, &view);
  if (!dry) return y ? td_binary_(c->op, x, y) : td_binary_scalar_(c->op, x, c->s, c->s_kind);
  td_tensor px, py, *r;
  probe_of(x, &px);
  if (y) {
    probe_of(y, &py);
    r = td_binary(c->op, &px, &py);
  } else {
    /* A scalar meets one element 1 of x's dtype (the same promotion as x): an integer
     * division by a zero scalar is refused here, before any leaf is written. */
    td_tensor *one = td_tensor_full(1, (const int64_t[]){1}, x->dtype, 1);
    r = one ? td_binary_scalar(c->op, one, c->s, c->s_kind, 0) : NULL;
    td_tensor_release(one);
  }
  return check_inplace(c->call, x, r, y);
}

/* The checks td_dict_binary and its in-place form share; fills c. */
static bool binary_setup(math_ctx *c, int32_t op, const td_dict *a, const td_dict *b,
                         const td_tensor *bt, double s, int32_t s_kind, bool inplace) {
  if (op < 0 || op >= TD_BINARY_COUNT) {
    td_fail(TD_EINVAL, "%s: unknown binary op %d", inplace ? "binary_" : "binary", (int)op);
    return false;
  }
  c->call = inplace ? td_binary_rows[op].inplace : td_binary_rows[op].name;
  c->op = op;
  c->t = bt;
  c->s = s;
  c->s_kind = s_kind;
  if (!check_dict(c->call, a, "TensorDict")) return false;
  if (b && bt) {
    td_fail(TD_EINVAL, "%s: the other operand is a TensorDict or a tensor, not both", c->call);
    return false;
  }
  if (!b && !bt && !check_scalar_kind(c->call, s_kind)) return false;
  if (bt) {
    if (!check_tensor_arg(c->call, bt, "tensor")) return false;
    c->left = bt->ndim <= a->head.ndim;
    if (c->left && !covers_leading(c->call, "a tensor", bt, a, false)) return false;
  }
  return true;
}

TD_EXPORT td_dict *td_dict_binary(int32_t op, const td_dict *a, const td_dict *b,
                                  const td_tensor *bt, double s, int32_t s_kind,
                                  int32_t scalar_first) {
  math_ctx c = {.fn = binary_leaf, .first = scalar_first != 0};
  if (!binary_setup(&c, op, a, b, bt, s, s_kind, false)) return NULL;
  return map_dict(a, b, &c);
}

TD_EXPORT int32_t td_dict_binary_(int32_t op, td_dict *a, const td_dict *b, const td_tensor *bt,
                                  double s, int32_t s_kind) {
  math_ctx c = {.fn_ = binary_leaf_};
  if (!binary_setup(&c, op, a, b, bt, s, s_kind, true)) return td_last_status();
  return visit_dict(a, b, &c);
}

/* ------------------------------------------------------- masks and where */

static td_tensor *masked_fill_leaf(const math_ctx *c, const td_tensor *x, const td_tensor *y) {
  (void)y;
  td_tensor mv;
  align_left(c->t, x->ndim, &mv);
  return td_masked_fill(x, &mv, c->s);
}

static int32_t masked_fill_leaf_(const math_ctx *c, td_tensor *x, const td_tensor *y, bool dry) {
  (void)y;
  td_tensor mv;
  align_left(c->t, x->ndim, &mv);
  if (!dry) return td_masked_fill_(x, &mv, c->s);
  td_tensor px, pm;
  probe_of(x, &px);
  probe_of(&mv, &pm);
  td_tensor *r = td_masked_fill(&px, &pm, c->s);
  if (!r) return td_last_status();
  td_tensor_release(r);
  return td_ew_check_writable(c->call, x) ? 0 : td_last_status();
}

TD_EXPORT td_dict *td_dict_masked_fill(const td_dict *a, const td_tensor *mask, double value) {
  math_ctx c = {.call = "masked_fill", .fn = masked_fill_leaf, .t = mask, .s = value};
  if (!check_dict(c.call, a, "TensorDict") || !check_mask(c.call, mask) ||
      !covers_leading(c.call, "mask", mask, a, false))
    return NULL;
  return map_dict(a, NULL, &c);
}

TD_EXPORT int32_t td_dict_masked_fill_(td_dict *a, const td_tensor *mask, double value) {
  math_ctx c = {.call = "masked_fill_", .fn_ = masked_fill_leaf_, .t = mask, .s = value};
  if (!check_dict(c.call, a, "TensorDict") || !check_mask(c.call, mask) ||
      !covers_leading(c.call, "mask", mask, a, false))
    return td_last_status();
  return visit_dict(a, NULL, &c);
}

static int32_t mask_rows_leaf(const td_leaf_op *op, const td_tensor *in, td_tensor *out) {
  return td_take_owned(out, td_mask_rows(in, op->ctx));
}

TD_EXPORT td_dict *td_dict_masked_select(const td_dict *a, const td_tensor *mask) {
  const char *call = "masked_select";
  if (!check_dict(call, a, "TensorDict") || !check_mask(call, mask)) return NULL;
  if (mask->ndim == 0)
    return td_fail_null(TD_ESHAPE, "%s: the mask has no dims; it must cover leading batch dims",
                        call);
  if (!covers_leading(call, "mask", mask, a, true)) return NULL;
  td_tensor *n = td_reduce(TD_RED_SUM, mask, NULL, 0, 0, 0);
  if (!n) return NULL;
  int64_t shape[TD_MAX_DIMS];
  shape[0] = *(const int64_t *)td_tensor_data_borrow(n);
  td_tensor_release(n);
  int32_t ndim = 1;
  for (int32_t i = mask->ndim; i < a->head.ndim; i++) shape[ndim++] = a->head.shape[i];
  td_leaf_op op = {call, mask_rows_leaf, a->head.ndim, (void *)mask};
  return td_dict_map(a, &op, ndim, shape);
}

static td_tensor *where_leaf(const math_ctx *c, const td_tensor *x, const td_tensor *y) {
  td_tensor mv;
  align_left(c->t, x->ndim, &mv);
  return td_where(&mv, x, 0, TD_SCALAR_FLOAT, y, c->s, c->s_kind);
}

TD_EXPORT td_dict *td_dict_where(const td_tensor *mask, const td_dict *a, const td_dict *b,
                                 double s, int32_t s_kind) {
  math_ctx c = {.call = "where", .fn = where_leaf, .t = mask, .s = s, .s_kind = s_kind};
  if (!check_dict(c.call, a, "TensorDict") || !check_mask(c.call, mask) ||
      !covers_leading(c.call, "mask", mask, a, false) ||
      (!b && !check_scalar_kind(c.call, s_kind)))
    return NULL;
  return map_dict(a, b, &c);
}

/* --------------------------------------------------------------- reductions */

typedef struct red_ctx {
  const char *call;
  int32_t op, ndims, keepdim, top; /* top: the top level's batch ndim */
  const int32_t *dims;
  double param;
  bool reduced[TD_MAX_DIMS];
} red_ctx;

/* The batch of a level after the reduction; keep[k] is the old dim of new dim k. */
static int32_t reduced_batch(const red_ctx *c, const td_dict *d, int64_t *shape, int32_t *keep) {
  int32_t n = 0;
  for (int32_t i = 0; i < d->head.ndim; i++) {
    bool red = c->ndims == 0 || (i < c->top && c->reduced[i]);
    if (red && !c->keepdim) continue;
    keep[n] = i;
    shape[n++] = red ? 1 : d->head.shape[i];
  }
  return n;
}

typedef struct text_ix {
  const char *text;
  int64_t i;
} text_ix;

static int cmp_text_ix(const void *x, const void *y) {
  const text_ix *a = x, *b = y;
  int r = strcmp(a->text, b->text);
  return r ? r : (a->i > b->i) - (a->i < b->i);
}

/* int64 [n]: for each text, the first index holding an equal text. */
static td_tensor *canonical_ids(const td_values *v) {
  int64_t n = v->n;
  td_tensor *ids = td_tensor_empty(1, &n, TD_INT64);
  text_ix *ix = n ? malloc(sizeof *ix * (size_t)n) : NULL;
  if (!ids || (n && !ix)) {
    td_tensor_release(ids);
    free(ix);
    return td_fail_null(TD_ENOMEM, "reduce: out of memory");
  }
  for (int64_t k = 0; k < n; k++) ix[k] = (text_ix){v->texts[k], k};
  if (n) qsort(ix, (size_t)n, sizeof *ix, cmp_text_ix);
  int64_t *out = td_tensor_data_borrow(ids), first = 0;
  for (int64_t k = 0; k < n; k++) {
    if (k == 0 || strcmp(ix[k].text, ix[k - 1].text) != 0) first = ix[k].i;
    out[ix[k].i] = first;
  }
  free(ix);
  return ids;
}

/* The positions of a stacked value after the reduction: one position per group when the
 * texts of the group are equal, else an error. */
static int32_t reduce_positions(const red_ctx *c, const td_entry *e, td_tensor *out,
                                const td_key_path *p) {
  const td_tensor *pos = &e->t;
  if (td_tensor_numel(pos) == 0) /* empty groups: sum gives zeros of the right shape */
    return td_take_owned(out, td_reduce(TD_RED_SUM, pos, c->dims, c->ndims, c->keepdim, 0));
  int32_t st = 0;
  const int64_t all = -1;
  td_tensor *canon = canonical_ids(e->values), *flat = NULL, *ids = NULL, *lo = NULL,
            *hi = NULL, *ne = NULL, *any = NULL;
  td_tensor idv;
  if (!canon || !(flat = td_tensor_reshape(pos, 1, &all)) ||
      !(ids = td_index_select(canon, 0, flat)) ||
      (st = td_tensor_view(ids, pos->ndim, pos->shape, &idv)) ||
      !(lo = td_reduce(TD_RED_MIN, &idv, c->dims, c->ndims, c->keepdim, 0)) ||
      !(hi = td_reduce(TD_RED_MAX, &idv, c->dims, c->ndims, c->keepdim, 0)) ||
      !(ne = td_binary(TD_BINARY_NE, lo, hi)) ||
      !(any = td_reduce(TD_RED_ANY, ne, NULL, 0, 0, 0))) {
    st = td_dict_fail_at(st ? st : pending(), c->call, p);
  } else if (*(const uint8_t *)td_tensor_data_borrow(any)) {
    char buf[TD_PATH_CHARS];
    st = td_fail(TD_EINVAL,
                 "%s: key '%s': the non-tensor values differ along the reduced dims, so they "
                 "cannot be reduced (drop the key first)",
                 c->call, td_key_path_text(p, buf));
  } else {
    st = td_take_owned(out, lo);
    lo = NULL;
  }
  td_tensor_release(canon);
  td_tensor_release(flat);
  td_tensor_release(ids);
  td_tensor_release(lo);
  td_tensor_release(hi);
  td_tensor_release(ne);
  td_tensor_release(any);
  return st;
}

static td_dict *reduce_level(const td_dict *d, const red_ctx *c, const td_key_path *parent) {
  int64_t shape[TD_MAX_DIMS];
  int32_t keep[TD_MAX_DIMS];
  int32_t n = reduced_batch(c, d, shape, keep);
  td_dict *r = td_dict_like(d, n, shape);
  if (!r) return NULL;
  if (d->head.has_names && n != d->head.ndim && n > 0) { /* names of the kept dims follow */
    const char *names[TD_MAX_DIMS];
    for (int32_t k = 0; k < n; k++) names[k] = d->names[keep[k]];
    if (td_dict_set_names(r, names)) goto fail;
  }
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    td_entry *o = &r->entries[i];
    td_key_path here = {parent, td_dict_key(d, i)};
    int32_t st = 0;
    if (e->kind == TD_ENTRY_DICT) {
      o->kind = TD_ENTRY_DICT;
      o->child = reduce_level(e->child, c, &here);
      st = o->child ? 0 : pending();
    } else if (e->kind == TD_ENTRY_TENSOR) {
      st = td_take_owned(&o->t, td_reduce(c->op, &e->t, c->dims, c->ndims, c->keepdim, c->param));
      if (st) {
        memset(&o->t, 0, sizeof o->t);
        td_dict_fail_at(st, c->call, &here);
      }
    } else if (e->kind == TD_ENTRY_VALUES) {
      st = reduce_positions(c, e, &o->t, &here);
      if (st) {
        memset(&o->t, 0, sizeof o->t);
      } else if ((st = td_entry_take_values(o, e))) {
        td_dict_fail_at(st, c->call, &here);
      } else {
        o->kind = TD_ENTRY_VALUES;
      }
    } else {
      td_entry_share(o, e);
    }
    if (st) goto fail;
  }
  return r;
fail:
  td_dict_release(r);
  return NULL;
}

TD_EXPORT td_dict *td_dict_reduce(int32_t op, const td_dict *a, const int32_t *dims,
                                  int32_t ndims, int32_t keepdim, double param) {
  if (op < 0 || op >= TD_RED_COUNT)
    return td_fail_null(TD_EINVAL, "reduce: unknown reduction op %d", (int)op);
  red_ctx c = {.call = td_reduce_rows[op].name, .op = op, .dims = dims, .ndims = ndims,
               .keepdim = keepdim != 0, .param = param};
  if (!check_dict(c.call, a, "TensorDict")) return NULL;
  c.top = a->head.ndim;
  if (ndims < 0 || ndims > a->head.ndim || (ndims > 0 && !dims)) {
    char bs[TD_SHAPE_STR];
    return td_fail_null(TD_EINVAL, "%s: %d dims given for batch size %s%s", c.call, (int)ndims,
                        shape_str(bs, a->head.ndim, a->head.shape),
                        ndims > 0 && !dims ? " but the list is NULL" : "");
  }
  for (int32_t k = 0; k < ndims; k++) {
    int32_t dim = dims[k];
    if (dim < 0 || dim >= a->head.ndim) {
      char bs[TD_SHAPE_STR];
      return td_fail_null(TD_EINDEX,
                          "%s: dim %d is out of range for batch size %s (dims are 0-based)", c.call,
                          (int)dim, shape_str(bs, a->head.ndim, a->head.shape));
    }
    if (c.reduced[dim])
      return td_fail_null(TD_EINVAL, "%s: dim %d appears more than once in the dims", c.call,
                          (int)dim);
    c.reduced[dim] = true;
  }
  return reduce_level(a, &c, NULL);
}

/* Counts the elements of every tensor leaf (buf NULL), or copies them into buf from *off
 * on, each leaf's elements in row-major order. */
static int32_t gather_leaves(const char *call, const td_dict *d, td_tensor *buf, int64_t *off,
                             int64_t *nleaves, const td_key_path *parent) {
  for (int32_t i = 0; i < d->keys->n; i++) {
    const td_entry *e = &d->entries[i];
    if (e->kind != TD_ENTRY_TENSOR && e->kind != TD_ENTRY_DICT) continue;
    td_key_path here = {parent, td_dict_key(d, i)};
    int32_t st = 0;
    if (e->kind == TD_ENTRY_DICT) {
      st = gather_leaves(call, e->child, buf, off, nleaves, &here);
    } else {
      int64_t n = td_tensor_numel(&e->t);
      if (buf) {
        td_tensor dst;
        td_view_set(&dst, buf, buf->offset + *off, e->t.ndim, e->t.shape, NULL);
        st = td_tensor_copy_(&dst, &e->t);
        if (st) td_dict_fail_at(st, call, &here);
      }
      *off += n;
      (*nleaves)++;
    }
    if (st) return st;
  }
  return 0;
}

TD_EXPORT td_tensor *td_dict_reduce_all(int32_t op, const td_dict *a, double param) {
  if (op < 0 || op >= TD_RED_COUNT)
    return td_fail_null(TD_EINVAL, "reduce_all: unknown reduction op %d", (int)op);
  const char *call = td_reduce_rows[op].name;
  const int32_t category = td_reduce_rows[op].category;
  if (!check_dict(call, a, "TensorDict")) return NULL;
  if (category == TD_OPCAT_INDEX) /* argmin, argmax */
    return td_fail_null(
        TD_EINVAL,
        "%s: an index over every leaf of a TensorDict has no meaning; reduce each leaf "
        "instead",
        call);
  int64_t total = 0, nleaves = 0;
  gather_leaves(call, a, NULL, &total, &nleaves, NULL);
  const bool logical = category == TD_OPCAT_LOGICAL; /* all, any */
  const int32_t dtype = logical ? TD_BOOL : TD_FLOAT64;
  if (nleaves == 0) {
    switch (op) {
      case TD_RED_SUM: case TD_RED_NORM: return td_tensor_full(0, NULL, dtype, 0);
      case TD_RED_PROD: case TD_RED_ALL: return td_tensor_full(0, NULL, dtype, 1);
      case TD_RED_ANY: return td_tensor_full(0, NULL, dtype, 0);
      default:
        return td_fail_null(TD_EINVAL, "%s: the TensorDict has no tensor leaves to reduce", call);
    }
  }
  td_tensor *buf = td_tensor_empty(1, &total, dtype);
  if (!buf) return NULL;
  int64_t off = 0;
  nleaves = 0;
  td_tensor *r = NULL;
  if (!gather_leaves(call, a, buf, &off, &nleaves, NULL))
    r = td_reduce(op, buf, NULL, 0, 0, param);
  td_tensor_release(buf);
  return r;
}

/* --------------------------------------------------------------- comparisons */

typedef struct cmp_ctx {
  const char *call;
  bool close;
  double rtol, atol;
} cmp_ctx;

static bool same_shape(int32_t n1, const int64_t *s1, int32_t n2, const int64_t *s2) {
  if (n1 != n2) return false;
  for (int32_t i = 0; i < n1; i++)
    if (s1[i] != s2[i]) return false;
  return true;
}

/* 1 when the 0-dim bool t is true, 0 when false, negative (the pending error) for NULL. */
static int32_t truth(td_tensor *t) {
  if (!t) return pending();
  int32_t r = *(const uint8_t *)td_tensor_data_borrow(t) != 0;
  td_tensor_release(t);
  return r;
}

/* torch.isclose in float64, all of it: a == b, or a finite |a - b| <= atol + rtol * |b|. */
static int32_t close_tensors(const cmp_ctx *c, const td_tensor *x, const td_tensor *y) {
  td_tensor *xf = td_tensor_to_dtype(x, TD_FLOAT64), *yf = NULL, *eq = NULL, *diff = NULL,
            *tol = NULL, *le = NULL, *fin = NULL;
  int32_t r = -1;
  if (xf && (yf = td_tensor_to_dtype(y, TD_FLOAT64)) && (eq = td_binary(TD_BINARY_EQ, xf, yf)) &&
      (diff = td_binary(TD_BINARY_SUB, xf, yf)) && !td_unary_(TD_UNARY_ABS, diff) &&
      (tol = td_unary(TD_UNARY_ABS, yf)) &&
      !td_binary_scalar_(TD_BINARY_MUL, tol, c->rtol, TD_SCALAR_FLOAT) &&
      !td_binary_scalar_(TD_BINARY_ADD, tol, c->atol, TD_SCALAR_FLOAT) &&
      (le = td_binary(TD_BINARY_LE, diff, tol)) &&
      (fin = td_binary_scalar(TD_BINARY_LT, diff, INFINITY, TD_SCALAR_FLOAT, 0)) &&
      !td_binary_(TD_BINARY_LOGICAL_AND, le, fin) && !td_binary_(TD_BINARY_LOGICAL_OR, eq, le))
    r = truth(td_reduce(TD_RED_ALL, eq, NULL, 0, 0, 0));
  if (r < 0) r = pending();
  td_tensor_release(xf);
  td_tensor_release(yf);
  td_tensor_release(eq);
  td_tensor_release(diff);
  td_tensor_release(tol);
  td_tensor_release(le);
  td_tensor_release(fin);
  return r;
}

static int32_t cmp_tensors(const cmp_ctx *c, const td_tensor *x, const td_tensor *y) {
  if (!same_shape(x->ndim, x->shape, y->ndim, y->shape)) return 0;
  if (c->close && (td_dtype_is_floating(x->dtype) || td_dtype_is_floating(y->dtype)))
    return close_tensors(c, x, y);
  td_tensor *eq = td_binary(TD_BINARY_EQ, x, y);
  if (!eq) return pending();
  int32_t r = truth(td_reduce(TD_RED_ALL, eq, NULL, 0, 0, 0));
  td_tensor_release(eq);
  return r;
}

/* The text of a non-tensor entry at batch position k (p: its contiguous positions);
 * NULL for a position out of range. */
static const char *text_at(const td_entry *e, const int64_t *p, int64_t k) {
  if (e->kind == TD_ENTRY_VALUE) return e->values->texts[0];
  int64_t pos = p[k];
  return pos >= 0 && pos < e->values->n ? e->values->texts[pos] : NULL;
}

/* Non-tensor values compare as values, not texts (1.0 is 1): equal texts, the usual
 * case, are settled here without parsing. */
static bool same_value(const char *a, const char *b) {
  return strcmp(a, b) == 0 || td_json_same_text(a, b);
}

static int32_t cmp_values(const td_entry *x, const td_entry *y) {
  if (x->kind == TD_ENTRY_VALUE && y->kind == TD_ENTRY_VALUE)
    return same_value(x->values->texts[0], y->values->texts[0]);
  td_tensor *px = x->kind == TD_ENTRY_VALUES ? td_tensor_contiguous(&x->t) : NULL;
  td_tensor *py = y->kind == TD_ENTRY_VALUES ? td_tensor_contiguous(&y->t) : NULL;
  int32_t r = 1;
  if ((x->kind == TD_ENTRY_VALUES && !px) || (y->kind == TD_ENTRY_VALUES && !py)) {
    r = pending();
  } else if (px && py && !same_shape(px->ndim, px->shape, py->ndim, py->shape)) {
    r = 0;
  } else {
    const int64_t *dx = px ? td_tensor_data_borrow(px) : NULL;
    const int64_t *dy = py ? td_tensor_data_borrow(py) : NULL;
    int64_t n = td_tensor_numel(px ? px : py);
    for (int64_t k = 0; k < n && r == 1; k++) {
      const char *tx = text_at(x, dx, k), *ty = text_at(y, dy, k);
      r = tx && ty && same_value(tx, ty);
    }
  }
  td_tensor_release(px);
  td_tensor_release(py);
  return r;
}

/* 1 when a and b hold the same keys, kinds, shapes and values; 0 when not; negative
 * after td_fail. */
static int32_t cmp_level(const td_dict *a, const td_dict *b, const cmp_ctx *c,
                         const td_key_path *parent) {
  if (!same_shape(a->head.ndim, a->head.shape, b->head.ndim, b->head.shape) ||
      a->keys->n != b->keys->n)
    return 0;
  for (int32_t i = 0; i < a->keys->n; i++) {
    int64_t klen;
    const char *key = td_dict_key_borrow(a, i, &klen);
    int32_t j = td_dict_find(b, key, klen);
    if (j < 0) return 0;
    const td_entry *x = &a->entries[i], *y = &b->entries[j];
    if (entry_class(x->kind) != entry_class(y->kind)) return 0;
    td_key_path here = {parent, key};
    int32_t r;
    if (x->kind == TD_ENTRY_DICT) {
      r = cmp_level(x->child, y->child, c, &here);
    } else if (x->kind == TD_ENTRY_TENSOR) {
      r = cmp_tensors(c, &x->t, &y->t);
      if (r < 0) td_dict_fail_at(r, c->call, &here);
    } else {
      r = cmp_values(x, y);
      if (r < 0) td_dict_fail_at(r, c->call, &here);
    }
    if (r <= 0) return r;
  }
  return 1;
}

static int32_t compare(const cmp_ctx *c, const td_dict *a, const td_dict *b, int32_t *out) {
  if (!check_dict(c->call, a, "first TensorDict") || !check_dict(c->call, b, "second TensorDict"))
    return td_last_status();
  if (!out) return td_fail(TD_EINVAL, "%s: the output pointer is NULL", c->call);
  int32_t r = cmp_level(a, b, c, NULL);
  if (r < 0) return r;
  *out = r;
  return 0;
}

TD_EXPORT int32_t td_dict_equal(const td_dict *a, const td_dict *b, int32_t *out) {
  cmp_ctx c = {.call = "equal"};
  return compare(&c, a, b, out);
}

TD_EXPORT int32_t td_dict_allclose(const td_dict *a, const td_dict *b, double rtol, double atol,
                                   int32_t *out) {
  cmp_ctx c = {.call = "allclose", .close = true, .rtol = rtol, .atol = atol};
  if (!(rtol >= 0) || !(atol >= 0))
    return td_fail(TD_EINVAL, "allclose: rtol (%g) and atol (%g) must be >= 0", rtol, atol);
  return compare(&c, a, b, out);
}
