/*
 * memmap_wrapped.c: containers saved inside a folder of Python tensordict's own
 * classes, whose meta.json names the class and whose members are TensorDict folders:
 *
 * - a LazyStackedTensorDict: one folder per member, "0", "1", ..., beside a meta.json
 *   with the class and the 0-based "stack_dim" (fixtures:
 *   tests/fixtures/make_lazy_stack_fixtures.py). C has no lazy stack: the members come
 *   as an array (the Lua side, lua/tensordict/lazy_stack*.lua, keeps the stack).
 * - a tensorclass: the fields in the TensorDict folder "_tensordict", beside a meta.json
 *   holding only "_type" (the Python class, "<class 'module.Name'>"): what a
 *   @tensorclass's memmap writes (lua/tensordict/record.lua).
 *
 * Each save is one plan of memmap.c written by memmap_disk.c, so it is atomic
 * as a whole: the members and the root meta.json in one temporary folder, renamed into
 * place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* The members agree on their batch dims (sizes may differ: Python's -1) and the stack
 * dim is one of the stack's dims. */
int32_t td_mm_check_stack(const char *call, td_dict *const *members, int32_t n,
                          int32_t stack_dim) {
  if (!members || n < 1) return td_fail(TD_EINVAL, "%s: a lazy stack needs one member or more", call);
  for (int32_t i = 0; i < n; i++) {
    if (!members[i]) return td_fail(TD_EINVAL, "%s: member %d is NULL", call, (int)i);
    if (members[i]->head.ndim != members[0]->head.ndim)
      return td_fail(TD_ESHAPE, "%s: member %d has %d batch dims, member 0 has %d", call,
                     (int)i, (int)members[i]->head.ndim, (int)members[0]->head.ndim);
  }
  if (stack_dim < 0 || stack_dim > members[0]->head.ndim || members[0]->head.ndim >= TD_MAX_DIMS)
    return td_fail(TD_EINVAL, "%s: stack dim %d is outside [0, %d]", call, (int)stack_dim,
                   (int)members[0]->head.ndim);
  return 0;
}

td_dict *td_mm_only_dict(td_dict *d, int32_t stack_dim, const char *call, const char *path) {
  if (!d || stack_dim < 0) return d;
  td_dict_release(d);
  return td_fail_null(TD_EINVAL, "%s: '%s' holds a LazyStackedTensorDict, not a TensorDict "
                      "(td_dict_%s_any loads it)", call, path, call);
}

/* The root meta.json of a lazy stack, in Python's key order. */
static cJSON *stack_meta(int32_t stack_dim) {
  cJSON *m = cJSON_CreateObject();
  if (!m) return NULL;
  /* td_json_add deletes the item when it cannot add it */
  bool ok = td_json_add(m, TD_MMF_KEY(TD_MMF_TYPE), cJSON_CreateString(TD_MM_TYPE_LS)) &&
            td_json_add(m, TD_MMF_KEY(TD_MMF_FORMAT_VERSION), td_json_new_int(TD_MM_FORMAT_VERSION)) &&
            td_json_add(m, TD_MMF_KEY(TD_MMF_CLASS), cJSON_CreateString(TD_MM_CLASS_LS)) &&
            td_json_add(m, TD_MMF_KEY(TD_MMF_STACK_DIM), td_json_new_int(stack_dim)) &&
            td_json_add(m, TD_MMF_KEY(TD_MMF_STACK_DIM_NAME), cJSON_CreateNull());
  if (!ok) {
    cJSON_Delete(m);
    return NULL;
  }
  return m;
}

/* The members saved as the folders names[i] under prefix, with root_meta (deleted here)
 * as prefix's meta.json; out[i] the saved members, locked, their prefix the folder. */
static int32_t save_wrapped(td_dict *const *members, const char *const *names, int32_t n,
                            cJSON *root_meta, const char *prefix, int32_t flags,
                            int32_t num_threads, td_dict **out) {
  td_mm_save S = {.call = "memmap", .flags = flags, .rootfd = -1};
  int32_t st = 0, *dirs = calloc((size_t)n, sizeof *dirs);
  char *p = td_mm_clean_prefix("memmap", prefix);
  if (!root_meta || !dirs) st = td_mm_oom(&S);
  else if (flags & ~(TD_MEMMAP_EXISTSOK | TD_MEMMAP_NO_FSYNC))
    st = td_fail(TD_EINVAL, "memmap: unknown flags %d", (int)flags);
  else if (!p) st = td_last_status();
  if (!st) st = td_mm_plan(&S, NULL, p);
  for (int32_t i = 0; i < n && !st; i++) {
    char *owned = strdup(names[i]);
    dirs[i] = owned ? td_mm_add_dir(&S, 0, owned) : td_mm_oom(&S);
    if (dirs[i] < 0) st = dirs[i];
    else st = td_mm_plan_dict(&S, members[i], dirs[i], NULL, 1);
  }
  if (!st) {
    st = td_mm_add_meta(&S, 0, root_meta, false, "the class");
    root_meta = NULL;
  }
  cJSON_Delete(root_meta);
  if (!st) st = td_mm_write(&S, p, num_threads);
  int32_t k = 0;
  for (int32_t i = 0; i < n && !st; i++) st = td_mm_make_leaves(&S, members[i], &k);
  k = 0;
  int32_t built = 0;
  for (; built < n && !st; built++) {
    if (!(out[built] = td_mm_build(&S, members[built], dirs[built], &k))) st = td_last_status();
    else td_dict_set_locked(out[built], 1);
  }
  if (st)
    for (int32_t i = 0; i < built; i++) td_dict_release(out[i]), out[i] = NULL;
  td_mm_save_free(&S);
  free(dirs);
  free(p);
  return st;
}

TD_EXPORT int32_t td_dict_memmap_stack(td_dict *const *members, int32_t n, int32_t stack_dim,
                                       const char *prefix, int32_t flags, int32_t num_threads,
                                       td_dict **out) {
  int32_t st = td_mm_check_stack("memmap", members, n, stack_dim);
  if (st) return st;
  if (!out) return td_fail(TD_EINVAL, "memmap: out is NULL");
  char **names = calloc((size_t)n, sizeof *names);
  for (int32_t i = 0; names && i < n && !st; i++) {
    if (!(names[i] = malloc(16))) st = td_fail(TD_ENOMEM, "memmap: out of memory");
    else snprintf(names[i], 16, "%d", (int)i);
  }
  if (!names) st = td_fail(TD_ENOMEM, "memmap: out of memory");
  if (!st) st = save_wrapped(members, (const char *const *)names, n, stack_meta(stack_dim), prefix,
                             flags, num_threads, out);
  for (int32_t i = 0; names && i < n; i++) free(names[i]);
  free(names);
  return st;
}

TD_EXPORT td_dict *td_dict_memmap_tensorclass(const td_dict *d, const char *type_name,
                                              const char *prefix, int32_t flags,
                                              int32_t num_threads) {
  if (!d) return td_fail_null(TD_EINVAL, "memmap: the TensorDict is NULL");
  if (!type_name || !*type_name) return td_fail_null(TD_EINVAL, "memmap: the class name is empty");
  cJSON *meta = cJSON_CreateObject();
  if (meta && !td_json_add(meta, TD_MMF_KEY(TD_MMF_TYPE), cJSON_CreateString(type_name))) {
    cJSON_Delete(meta);
    meta = NULL;
  }
  const char *name = TD_MMF_TC_FIELDS;
  td_dict *member = (td_dict *)d, *out = NULL;
  if (save_wrapped(&member, &name, 1, meta, prefix, flags, num_threads, &out)) return NULL;
  /* its folder is the class's, as a load of it gives (so a refresh maps the same one) */
  char *p = td_mm_clean_prefix("memmap", prefix);
  int32_t st = p ? td_dict_set_prefix(out, p) : td_last_status();
  free(p);
  if (st) {
    td_dict_release(out);
    return NULL;
  }
  return out;
}
