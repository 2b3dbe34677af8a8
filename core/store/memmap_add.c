/*
 * memmap_add.c: td_dict_make_memmap_from_tensor, Python's make_memmap_from_tensor:
 * one new tensor leaf in a memory-mapped container's folder without saving the folder
 * again. The leaf's file is written to a temporary and renamed in first, then meta.json
 * is replaced the same way (fs.c), so a crash leaves the folder as it was or with
 * the new leaf: meta.json never names a file that is not there.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store_internal.h"

#define CALL "make_memmap_from_tensor"

/* The folder that holds d's leaves: its prefix, or for a tensorclass folder (loaded as
 * the container of its fields, prefix the class's folder) its "_tensordict". */
static char *leaf_folder(const char *prefix) {
  char *fields = td_mm_path_join(prefix, TD_MMF_TC_FIELDS);
  char *meta = td_mm_path_join(prefix, TD_MMF_META);
  struct stat sb;
  bool tc = false;
  if (fields && meta && stat(fields, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    int fd = open(prefix, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cJSON *m = fd >= 0 ? td_mm_read_meta(fd, meta) : NULL;
    tc = m && !td_json_get(m, TD_MMF_SHAPE); /* a TensorDict's meta.json has its batch size */
    cJSON_Delete(m);
    if (fd >= 0) close(fd);
  }
  free(meta);
  if (tc) return fields;
  free(fields);
  return strdup(prefix);
}

/* The error of a call that failed in the loader's helpers, under this call's name. */
static int32_t as_ours(int32_t status) {
  char msg[1024];
  const char *e = td_last_error();
  const char *pre = "load_memmap: ";
  snprintf(msg, sizeof msg, "%s", strncmp(e, pre, strlen(pre)) ? e : e + strlen(pre));
  return td_fail(status, CALL ": %s", msg);
}

static bool has_key(const cJSON *obj, const char *key, size_t klen) {
  for (const cJSON *c = obj->child; c; c = c->next) {
    size_t n;
    const char *k = td_json_key_of(c, &n);
    if (k && n == klen && !memcmp(k, key, n)) return true;
  }
  return false;
}

/* meta.json of folder dir with key's entry added, as Python's json.dumps writes it. */
static int32_t add_entry(const char *dir, const char *key, int64_t klen, const td_tensor *t,
                         int32_t flags) {
  char *file = td_mm_path_join(dir, TD_MMF_META);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  cJSON *meta = dfd >= 0 && file ? td_mm_read_meta(dfd, file) : NULL;
  int32_t st = 0;
  if (!file) st = td_fail(TD_ENOMEM, CALL ": out of memory");
  else if (dfd < 0) st = td_fail(TD_EIO, CALL ": cannot open the folder '%s': %s", dir, strerror(errno));
  else if (!meta) st = as_ours(td_last_status());
  else if (has_key(meta, key, (size_t)klen))
    st = td_fail(TD_EINVAL, CALL ": %s already has key '%s' (another process added it?)", file, key);
  cJSON *entry = st ? NULL : td_json_new(cJSON_Object), *shape = st ? NULL : cJSON_CreateArray();
  bool ok = entry && shape;
  for (int32_t i = 0; ok && i < t->ndim; i++) ok = cJSON_AddItemToArray(shape, td_json_new_int(t->shape[i]));
  if (ok) {
    ok = td_json_add(entry, TD_MMF_KEY(TD_MMF_DEVICE), cJSON_CreateString(TD_MMF_CPU)) &&
         td_json_add(entry, TD_MMF_KEY(TD_MMF_SHAPE), shape) &&
         td_json_add(entry, TD_MMF_KEY(TD_MMF_DTYPE), cJSON_CreateString(td_py_dtype_name(t->dtype))) &&
         td_json_add(entry, TD_MMF_KEY(TD_MMF_IS_NESTED), cJSON_CreateFalse());
    shape = NULL;
    ok = ok && td_json_add(meta, key, (size_t)klen, entry);
    entry = NULL;
  }
  cJSON_Delete(shape);
  cJSON_Delete(entry);
  if (!st && !ok) st = td_fail(TD_ENOMEM, CALL ": out of memory");
  size_t len = 0;
  bool bad_utf8 = false;
  char *text = st ? NULL : td_json_print(meta, TD_JSON_PYTHON, &len, &bad_utf8);
  if (!st && !text)
    st = bad_utf8 ? td_fail(TD_EINVAL, CALL ": key '%s' is not valid UTF-8 (meta.json is UTF-8)", key)
                  : td_fail(TD_ENOMEM, CALL ": out of memory");
  char *tmp = NULL;
  int fd = st ? -1 : td_fs_open_temp(file, &tmp);
  if (!st && fd < 0)
    st = td_fail(TD_EIO, CALL ": cannot create a temporary beside '%s': %s", file, strerror(errno));
  if (!st && !td_fs_write_all(fd, text, (int64_t)len)) {
    st = td_fail(TD_EIO, CALL ": cannot write '%s': %s", tmp, strerror(errno));
    close(fd);
    unlink(tmp);
  } else if (!st && td_fs_publish(fd, tmp, file, flags) != 0) {
    st = td_fail(TD_EIO, CALL ": cannot replace '%s': %s", file, strerror(errno));
  }
  free(tmp), free(text), free(file);
  cJSON_Delete(meta);
  if (dfd >= 0) close(dfd);
  return st;
}

/* t's bytes (or zeros without copy_data) in a new file at path, renamed in whole. */
static int32_t write_leaf(const char *path, const td_tensor *t, int64_t nbytes, int32_t copy_data,
                          int32_t flags) {
  char *tmp = NULL;
  int fd = td_fs_open_temp(path, &tmp);
  if (fd < 0)
    return td_fail(TD_EIO, CALL ": cannot create a temporary beside '%s': %s", path, strerror(errno));
  td_storage *buf = NULL;
  int32_t status = 0, st = 0;
  bool ok = copy_data ? td_fs_write_tensor(fd, t, &buf, &status) : ftruncate(fd, nbytes) == 0;
  td_storage_release(buf);
  if (!ok) {
    st = status ? status : td_fail(TD_EIO, CALL ": cannot write '%s': %s", tmp, strerror(errno));
    close(fd);
    unlink(tmp);
  } else if (td_fs_publish(fd, tmp, path, flags) != 0) {
    st = td_fail(TD_EIO, CALL ": cannot create '%s': %s", path, strerror(errno));
  }
  free(tmp);
  return st;
}

TD_EXPORT int32_t td_dict_make_memmap_from_tensor(td_dict *d, const char *key, int64_t klen,
                                                  const td_tensor *t, int32_t copy_data,
                                                  int32_t flags) {
  if (!d || !t || !key || klen < 0) return td_fail(TD_EINVAL, CALL ": NULL argument");
  const char *prefix = td_dict_prefix_borrow(d);
  if (!prefix)
    return td_fail(TD_EINVAL, CALL ": the TensorDict is not memory-mapped (save it with memmap "
                   "first: its leaves' folder is where the file goes)");
  if (td_dict_find(d, key, klen) >= 0)
    return td_fail(TD_EINVAL, CALL ": key '%s' exists; delete it first (as Python requires)", key);
  const td_dict_head *h = &d->head;
  bool leads = t->ndim >= h->ndim;
  for (int32_t i = 0; leads && i < h->ndim; i++) leads = t->shape[i] == h->shape[i];
  if (!leads) {
    char a[TD_SHAPE_STR], b[TD_SHAPE_STR];
    return td_fail(TD_ESHAPE, CALL ": key '%s': the tensor's shape %s does not start with the "
                   "batch size %s", key, td_format_shape(a, sizeof a, t->ndim, t->shape),
                   td_format_shape(b, sizeof b, h->ndim, h->shape));
  }
  if (t->storage && t->storage->device_type != TD_DEVICE_CPU)
    return td_fail(TD_EINVAL, CALL ": key '%s' is on cuda: copy it to the CPU first", key);
  int64_t nbytes;
  if (__builtin_mul_overflow(td_tensor_numel(t), t->itemsize, &nbytes))
    return td_fail(TD_ESHAPE, CALL ": key '%s' is too large", key);
  char *dir = leaf_folder(prefix);
  char *name = td_mm_encode_key(key, klen, TD_MMF_LEAF_SUFFIX);
  char *path = dir && name ? td_mm_path_join(dir, name) : NULL;
  int32_t st = path ? 0 : td_fail(TD_ENOMEM, CALL ": out of memory");
  if (!st && strlen(name) > TD_MM_NAME_MAX)
    st = td_fail(TD_EINVAL, CALL ": key '%s' is too long for a file name", key);
  /* Python writes no file for a leaf without elements */
  if (!st && nbytes > 0) st = write_leaf(path, t, nbytes, copy_data, flags);
  if (!st) st = add_entry(dir, key, klen, t, flags);
  td_storage *s = NULL;
  char why[256];
  if (!st) {
    int fd = nbytes > 0 ? open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (nbytes > 0 && fd < 0)
      st = td_fail(TD_EIO, CALL ": cannot open '%s': %s", path, strerror(errno));
    else if (!(s = td_storage_map_fd(fd, nbytes, 1, why, sizeof why)))
      st = td_fail(TD_EIO, CALL ": cannot map '%s': %s", path, why);
    if (fd >= 0) close(fd);
  }
  td_tensor *leaf = s ? td_tensor_from_storage(s, 0, t->ndim, t->shape, NULL, t->dtype) : NULL;
  td_storage_release(s);
  if (!st && !leaf) st = td_last_status();
  if (!st) { /* a memmap's result is locked; the key is on disk now, so it joins */
    int32_t locked = h->locked;
    td_dict_set_locked(d, 0);
    int32_t r = td_dict_set_tensor(d, key, klen, leaf);
    td_dict_set_locked(d, locked);
    if (r < 0) st = r;
  }
  td_tensor_release(leaf);
  free(dir), free(name), free(path);
  return st;
}
