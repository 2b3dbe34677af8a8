/* dicts.h: helpers the container tests share: build containers from tensors and
 * values, and read entries back by key. Header-only, like tensors.h. */
#ifndef TD_TEST_DICTS_H
#define TD_TEST_DICTS_H

#include "tensors.h"

/* A new tensor of shape holding start, start + 1, ... (row-major). */
static inline td_tensor *seq(int32_t ndim, const int64_t *shape, int32_t dtype, double start) {
  td_tensor *a = td_tensor_arange(start, 1, numel_of(ndim, shape), dtype);
  td_tensor *r = a ? td_tensor_reshape(a, ndim, shape) : NULL;
  td_tensor_release(a);
  return r;
}

/* Sets key to t and releases t (the container holds its own storage reference). */
static inline void put(td_dict *d, const char *key, td_tensor *t) {
  CHECK(t && td_dict_set_tensor(d, key, (int64_t)strlen(key), t) >= 0);
  td_tensor_release(t);
}

static inline void put_dict(td_dict *d, const char *key, td_dict *child) {
  CHECK(td_dict_set_dict(d, key, (int64_t)strlen(key), child) >= 0);
  td_dict_release(child);
}

static inline void put_value(td_dict *d, const char *key, const char *json) {
  CHECK(td_dict_set_value(d, key, (int64_t)strlen(key), json) >= 0);
}

/* A stacked value: n texts and int64 positions of the batch's shape. */
static inline void put_values(td_dict *d, const char *key, int64_t n, const char *const *texts,
                       const int64_t *pos) {
  const td_dict_head *h = td_dict_head_borrow(d);
  td_tensor *p = td_tensor_empty(h->ndim, h->shape, TD_INT64);
  int64_t m = numel_of(h->ndim, h->shape);
  for (int64_t i = 0; i < m; i++) ((int64_t *)td_tensor_data_borrow(p))[i] = pos[i];
  CHECK(td_dict_set_values(d, key, (int64_t)strlen(key), n, texts, p) >= 0);
  td_tensor_release(p);
}

static inline int32_t find(const td_dict *d, const char *key) {
  return d ? td_dict_find(d, key, (int64_t)strlen(key)) : -1;
}

/* The leaf (or a stacked value's positions) of key, or NULL. */
static inline const td_tensor *leaf(td_dict *d, const char *key) {
  int32_t i = find(d, key);
  return i < 0 ? NULL : td_dict_tensor_pin(d, i);
}

static inline int32_t kind(const td_dict *d, const char *key) {
  int32_t i = find(d, key);
  return i < 0 ? -1 : td_dict_kind(d, i);
}

/* A nested container: a new reference, or NULL. */
static inline td_dict *kid(td_dict *d, const char *key) {
  int32_t i = find(d, key);
  return i < 0 ? NULL : td_dict_child(d, i);
}

static inline const char *text(const td_dict *d, const char *key, int64_t pos) {
  int32_t i = find(d, key);
  const char *s = i < 0 ? NULL : td_dict_value_borrow(d, i, pos);
  return s ? s : "(none)";
}

static inline int64_t ntexts(const td_dict *d, const char *key) {
  int32_t i = find(d, key);
  return i < 0 ? -1 : td_dict_value_count(d, i);
}

static inline double el(const td_tensor *t, const int64_t *ix) {
  double v = NAN;
  if (!t || td_tensor_read_f64(t, ix, &v) != TD_OK) return NAN;
  return v;
}
#define EL(t, ...) el((t), (const int64_t[]){__VA_ARGS__})

/* The batch size of d is exactly the given sizes. */
static inline bool batch_is(const td_dict *d, int32_t ndim, const int64_t *shape) {
  if (!d) return false;
  const td_dict_head *h = td_dict_head_borrow(d);
  if (h->ndim != ndim) return false;
  for (int32_t i = 0; i < ndim; i++)
    if (h->shape[i] != shape[i]) return false;
  return true;
}
#define BATCH_IS(d, ...)                                                            \
  batch_is((d), (int32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
           (const int64_t[]){__VA_ARGS__})
#define BATCH_IS0(d) batch_is((d), 0, NULL)
#define SHAPE_IS(t, ...)                                                             \
  same_shape((t), (int32_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
             (const int64_t[]){__VA_ARGS__})

/* The last error is exactly msg. */
#define CHECK_MSG(msg)                                                             \
  do {                                                                             \
    CHECK(strcmp(td_last_error(), (msg)) == 0);                                    \
    if (strcmp(td_last_error(), (msg)) != 0)                                       \
      fprintf(stderr, "  got:      %s\n  expected: %s\n", td_last_error(), (msg)); \
  } while (0)

#endif
