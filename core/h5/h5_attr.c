/* h5_attr.c: attributes of groups and datasets as numbers or strings (libtensordict_h5). */
#include <stdlib.h>
#include <string.h>

#include "h5_internal.h"

static hid_t open_attr(int64_t file, const char *path, const char *name, const char *call) {
  hid_t a = H5Aopen_by_name(file, path, name, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0) tdh_fail(call, "%s: no attribute %s", path, name);
  return a;
}

TDH_EXPORT int32_t td_h5_attr_count(int64_t file, const char *path) {
  tdh_init();
  H5O_info_t info;
  if (H5Oget_info_by_name(file, path, &info, H5P_DEFAULT) < 0) return tdh_fail("attrs", "%s: no object", path);
  return (int32_t)info.num_attrs;
}

TDH_EXPORT int64_t td_h5_attr_name(int64_t file, const char *path, int32_t idx, char *name, int64_t cap) {
  tdh_init();
  ssize_t len = H5Aget_name_by_idx(file, path, H5_INDEX_NAME, H5_ITER_INC, (hsize_t)idx, name, (size_t)cap,
                                   H5P_DEFAULT);
  if (len < 0) return tdh_fail("attrs", "%s: no attribute %d", path, idx);
  return (int64_t)len;
}

TDH_EXPORT int32_t td_h5_attr_info(int64_t file, const char *path, const char *name, int32_t *kind, int64_t *n) {
  tdh_init();
  hid_t a = open_attr(file, path, name, "attrs");
  if (a < 0) return -1;
  hid_t t = H5Aget_type(a), s = H5Aget_space(a);
  H5T_class_t cls = H5Tget_class(t);
  *kind = cls == H5T_STRING ? 1 : (cls == H5T_INTEGER || cls == H5T_FLOAT || cls == H5T_ENUM) ? 0 : 2;
  hssize_t np = H5Sget_simple_extent_npoints(s);
  *n = np < 0 ? 0 : (int64_t)np;
  H5Sclose(s);
  H5Tclose(t);
  H5Aclose(a);
  return 0;
}

TDH_EXPORT int32_t td_h5_attr_numbers(int64_t file, const char *path, const char *name, double *out, int64_t n) {
  tdh_init();
  hid_t a = open_attr(file, path, name, "attrs");
  if (a < 0) return -1;
  hid_t s = H5Aget_space(a), t = H5Aget_type(a);
  int32_t rc = 0;
  if (H5Sget_simple_extent_npoints(s) != n) {
    rc = tdh_fail("attrs", "%s: attribute %s does not hold %lld numbers", path, name, (long long)n);
  } else if (H5Tget_class(t) == H5T_ENUM) {
    /* h5py's bool: its int8 values */
    signed char *v = malloc((size_t)(n ? n : 1));
    hid_t base = H5Tget_super(t);
    if (!v || H5Aread(a, base, v) < 0) rc = tdh_fail("attrs", "%s: reading %s failed", path, name);
    else
      for (int64_t i = 0; i < n; i++) out[i] = v[i];
    H5Tclose(base);
    free(v);
  } else if (H5Aread(a, H5T_NATIVE_DOUBLE, out) < 0) {
    rc = tdh_fail("attrs", "%s: reading %s failed", path, name);
  }
  H5Tclose(t);
  H5Sclose(s);
  H5Aclose(a);
  return rc;
}

TDH_EXPORT int64_t td_h5_attr_string(int64_t file, const char *path, const char *name, int64_t elem, char *buf,
                                     int64_t cap) {
  tdh_init();
  hid_t a = open_attr(file, path, name, "attrs");
  if (a < 0) return -1;
  hid_t t = H5Aget_type(a), s = H5Aget_space(a);
  hssize_t n = H5Sget_simple_extent_npoints(s);
  int64_t rc = -1;
  if (H5Tget_class(t) != H5T_STRING || elem < 0 || elem >= n) {
    rc = tdh_fail("attrs", "%s: attribute %s has no string %lld", path, name, (long long)elem);
  } else if (H5Tis_variable_str(t) > 0) {
    char **all = calloc((size_t)n, sizeof *all);
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, H5T_VARIABLE);
    H5Tset_cset(mt, H5Tget_cset(t));
    if (!all || H5Aread(a, mt, all) < 0) {
      rc = tdh_fail("attrs", "%s: reading %s failed", path, name);
    } else {
      const char *v = all[elem] ? all[elem] : "";
      size_t len = strlen(v);
      rc = tdh_copy_string(buf, cap, v, len);
      H5Dvlen_reclaim(mt, s, H5P_DEFAULT, all);
    }
    H5Tclose(mt);
    free(all);
  } else {
    size_t size = H5Tget_size(t);
    char *all = calloc((size_t)n * size + 1, 1);
    if (!all || H5Aread(a, t, all) < 0) {
      rc = tdh_fail("attrs", "%s: reading %s failed", path, name);
    } else {
      const char *v = all + (size_t)elem * size;
      size_t len = strnlen(v, size);
      rc = tdh_copy_string(buf, cap, v, len);
    }
    free(all);
  }
  H5Sclose(s);
  H5Tclose(t);
  H5Aclose(a);
  return rc;
}

static int32_t write_attr(int64_t file, const char *path, const char *name, hid_t t, const void *v) {
  if (H5Aexists_by_name(file, path, name, H5P_DEFAULT) > 0) H5Adelete_by_name(file, path, name, H5P_DEFAULT);
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate_by_name(file, path, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  int32_t rc = a >= 0 && H5Awrite(a, t, v) >= 0 ? 0 : tdh_fail("attrs", "%s: writing %s failed", path, name);
  if (a >= 0) H5Aclose(a);
  H5Sclose(s);
  return rc;
}

TDH_EXPORT int32_t td_h5_attr_write_number(int64_t file, const char *path, const char *name, double value) {
  tdh_init();
  return write_attr(file, path, name, H5T_NATIVE_DOUBLE, &value);
}

TDH_EXPORT int32_t td_h5_attr_write_string(int64_t file, const char *path, const char *name, const char *s) {
  tdh_init();
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  int32_t rc = write_attr(file, path, name, t, &s);
  H5Tclose(t);
  return rc;
}
