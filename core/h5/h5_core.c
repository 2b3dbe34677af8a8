/* h5_core.c: errors, files, groups and the dtype <-> HDF5 type mapping of
 * libtensordict_h5. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dtype_table.h"
#include "h5_internal.h"

static _Thread_local char err_msg[2048];
static int initialised;

void tdh_init(void) {
  if (initialised) return;
  initialised = 1;
  H5open();
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

TDH_EXPORT int32_t td_h5_abi_version(void) { return TD_H5_ABI_VERSION; }
TDH_EXPORT const char *td_h5_last_error(void) { return err_msg; }

TDH_EXPORT const char *td_h5_library_version(void) {
  static char text[64];
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  snprintf(text, sizeof text, "HDF5 %u.%u.%u", maj, min, rel);
  return text;
}

/* Walks HDF5's stack from the API call down, keeping the first description (what the
 * caller asked) and the last (the root cause), so one line says both. */
struct walk { char first[256], last[256]; int n; };

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *arg) {
  struct walk *w = arg;
  (void)n;
  const char *desc = e->desc ? e->desc : "";
  if (w->n == 0) snprintf(w->first, sizeof w->first, "%s", desc);
  snprintf(w->last, sizeof w->last, "%s", desc);
  w->n++;
  return 0;
}

int32_t tdh_fail(const char *call, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  struct walk w = { "", "", 0 };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_cb, &w);
  H5Eclear2(H5E_DEFAULT);
  if (w.n == 0) snprintf(err_msg, sizeof err_msg, "%s: %s", call, what);
  else if (w.n == 1 || strcmp(w.first, w.last) == 0)
    snprintf(err_msg, sizeof err_msg, "%s: %s (HDF5: %s)", call, what, w.first);
  else snprintf(err_msg, sizeof err_msg, "%s: %s (HDF5: %s: %s)", call, what, w.first, w.last);
  return -1;
}

/* ---- types ---------------------------------------------------------------------- */

/* h5py's bool: an enum over int8 with FALSE = 0 and TRUE = 1. */
static hid_t bool_type(void) {
  hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
  if (t < 0) return t;
  signed char no = 0, yes = 1;
  H5Tenum_insert(t, "FALSE", &no);
  H5Tenum_insert(t, "TRUE", &yes);
  return t;
}

/* A 16-bit IEEE-like float with esize exponent bits and msize mantissa bits. */
static hid_t float16_type(size_t esize, size_t msize) {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  if (t < 0) return t;
  if (H5Tset_fields(t, 15, msize, esize, 0, msize) < 0 || H5Tset_size(t, 2) < 0 ||
      H5Tset_ebias(t, ((size_t)1 << (esize - 1)) - 1) < 0) {
    H5Tclose(t);
    return -1;
  }
  return t;
}

/* kind is the dtype table's: B bool, I integer, H half, BF bfloat16, F float. */
static hid_t make_type(const char *kind, size_t size, int is_signed) {
  if (strcmp(kind, "B") == 0) return bool_type();
  if (strcmp(kind, "H") == 0) return float16_type(5, 10);
  if (strcmp(kind, "BF") == 0) return float16_type(8, 7);
  if (strcmp(kind, "F") == 0) return H5Tcopy(size == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE);
  hid_t t = H5Tcopy(H5T_NATIVE_INT8);
  if (t < 0) return t;
  if (H5Tset_size(t, size) < 0 || H5Tset_precision(t, size * 8) < 0 ||
      H5Tset_sign(t, is_signed ? H5T_SGN_2 : H5T_SGN_NONE) < 0) {
    H5Tclose(t);
    return -1;
  }
  return t;
}

hid_t tdh_type_of(int32_t dtype) {
  tdh_init();
  switch (dtype) {
#define TDH_TYPE(_, DN, DT, DK, ...) \
  case TD_##DN: return make_type(#DK, sizeof(DT), (DT)-1 < (DT)0);
    TD_DTYPES_ALL(TDH_TYPE, _)
#undef TDH_TYPE
  default: return -1;
  }
}

/* Whether a file type and a dtype's type hold the same numbers: the same class, size,
 * signedness (integers) and mantissa width (floats: float16 vs bfloat16); byte order
 * is HDF5's to convert. An enum matches only h5py's bool. */
static int same_numbers(hid_t file, hid_t mem) {
  H5T_class_t cls = H5Tget_class(file);
  if (cls != H5Tget_class(mem) || H5Tget_size(file) != H5Tget_size(mem)) return 0;
  if (cls == H5T_INTEGER) return H5Tget_sign(file) == H5Tget_sign(mem);
  if (cls == H5T_FLOAT) {
    size_t fs, fe, fes, fm, fms, ms, me, mes, mm, mms;
    H5Tget_fields(file, &fs, &fe, &fes, &fm, &fms);
    H5Tget_fields(mem, &ms, &me, &mes, &mm, &mms);
    return fes == mes && fms == mms;
  }
  if (cls == H5T_ENUM) {
    if (H5Tget_nmembers(file) != 2) return 0;
    hid_t base = H5Tget_super(file);
    int ok = base >= 0 && H5Tget_class(base) == H5T_INTEGER && H5Tget_size(base) == 1;
    if (base >= 0) H5Tclose(base);
    signed char v = 0;
    return ok && H5Tenum_valueof(file, "FALSE", &v) >= 0 && v == 0 && H5Tenum_valueof(file, "TRUE", &v) >= 0 &&
           v == 1;
  }
  return 0;
}

static const char *class_text(H5T_class_t cls) {
  switch (cls) {
  case H5T_INTEGER: return "integer";
  case H5T_FLOAT: return "float";
  case H5T_TIME: return "time";
  case H5T_STRING: return "string";
  case H5T_BITFIELD: return "bitfield";
  case H5T_OPAQUE: return "opaque (Python tensordict's pickled non-tensor data)";
  case H5T_COMPOUND: return "compound";
  case H5T_REFERENCE: return "reference";
  case H5T_ENUM: return "enum";
  case H5T_VLEN: return "variable-length array";
  case H5T_ARRAY: return "array";
  default: return "unknown";
  }
}

int32_t tdh_dtype_of(hid_t type, const char *call) {
  for (int32_t d = 0; d < TD_NUM_DTYPES; d++) {
    hid_t mem = tdh_type_of(d);
    if (mem < 0) continue;
    int same = same_numbers(type, mem);
    H5Tclose(mem);
    if (same) return d;
  }
  H5T_class_t cls = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  if (cls == H5T_INTEGER)
    return tdh_fail(call, "%s %zu-bit integer type has no tensordict dtype (dtypes: %s)",
                    H5Tget_sign(type) == H5T_SGN_NONE ? "an unsigned" : "a signed", size * 8,
                    &(TD_DTYPES_ALL(TD_DTYPE_LISTED, _))[2]);
  if (cls == H5T_COMPOUND)
    return tdh_fail(call, "a compound type (%d fields) has no tensordict dtype: a container cannot hold it",
                    H5Tget_nmembers(type));
  return tdh_fail(call, "a %zu-byte %s type has no tensordict dtype: a container cannot hold it", size,
                  class_text(cls));
}

int64_t tdh_space_dims(hid_t space, int32_t *ndim, hsize_t *shape) {
  int n = H5Sget_simple_extent_ndims(space);
  if (n < 0) return -1;
  if (n > TD_H5_MAX_DIMS) return -1;
  H5Sget_simple_extent_dims(space, shape, NULL);
  *ndim = n;
  int64_t row = 1;
  for (int i = 1; i < n; i++) row *= (int64_t)shape[i];
  return row;
}

/* ---- files and groups ------------------------------------------------------------- */

/* Closing the file closes what is open in it (a dataset the Lua side still holds). */
static hid_t strong_close_fapl(void) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl >= 0) H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
  return fapl;
}

TDH_EXPORT int64_t td_h5_open(const char *path, int32_t writable) {
  tdh_init();
  if (!path) return tdh_fail("open", "no path");
  if (H5Fis_hdf5(path) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    if (access(path, R_OK) != 0) return tdh_fail("open", "%s: no such readable file", path);
    return tdh_fail("open", "%s is not an HDF5 file (no HDF5 signature)", path);
  }
  hid_t fapl = strong_close_fapl();
  hid_t f = H5Fopen(path, writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  if (f < 0) return tdh_fail("open", "%s cannot be opened (truncated or damaged?)", path);
  return f;
}

TDH_EXPORT int64_t td_h5_create(const char *path) {
  tdh_init();
  if (!path) return tdh_fail("create", "no path");
  hid_t fapl = strong_close_fapl();
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (f < 0) return tdh_fail("create", "%s cannot be created", path);
  return f;
}

TDH_EXPORT int32_t td_h5_close(int64_t file) {
  tdh_init();
  if (H5Fclose(file) < 0) return tdh_fail("close", "closing the file failed");
  return 0;
}

TDH_EXPORT int32_t td_h5_commit(int64_t file, const char *tmp, const char *path) {
  tdh_init();
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0 || H5Fclose(file) < 0) {
    H5Fclose(file);
    return tdh_fail("commit", "writing %s failed", tmp);
  }
  int fd = open(tmp, O_RDONLY);
  if (fd < 0 || fsync(fd) != 0) {
    if (fd >= 0) close(fd);
    return tdh_fail("commit", "fsync of %s failed", tmp);
  }
  close(fd);
  if (rename(tmp, path) != 0) return tdh_fail("commit", "renaming %s to %s failed", tmp, path);
  return 0;
}

TDH_EXPORT int64_t td_h5_child_count(int64_t file, const char *group) {
  tdh_init();
  H5G_info_t info;
  if (H5Gget_info_by_name(file, group, &info, H5P_DEFAULT) < 0)
    return tdh_fail("group", "%s is not a group", group);
  return (int64_t)info.nlinks;
}

TDH_EXPORT int64_t td_h5_child(int64_t file, const char *group, int64_t idx, char *name, int64_t cap,
                               int32_t *kind) {
  tdh_init();
  ssize_t len = H5Lget_name_by_idx(file, group, H5_INDEX_NAME, H5_ITER_INC, (hsize_t)idx, name, (size_t)cap,
                                   H5P_DEFAULT);
  if (len < 0) return tdh_fail("group", "%s: no link %lld", group, (long long)idx);
  *kind = TD_H5_OTHER;
  if (len < cap) {
    H5O_info_t info;
    /* a link to nothing (a dangling soft link) stays OTHER */
    hid_t g = H5Gopen2(file, group, H5P_DEFAULT);
    if (g >= 0) {
      if (H5Oget_info_by_name(g, name, &info, H5P_DEFAULT) >= 0) {
        if (info.type == H5O_TYPE_GROUP) *kind = TD_H5_GROUP;
        else if (info.type == H5O_TYPE_DATASET) *kind = TD_H5_DATASET;
      }
      H5Gclose(g);
    }
    H5Eclear2(H5E_DEFAULT);
  }
  return (int64_t)len;
}

static hid_t intermediate_lcpl(void) {
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  if (lcpl >= 0) H5Pset_create_intermediate_group(lcpl, 1);
  return lcpl;
}

TDH_EXPORT int32_t td_h5_create_group(int64_t file, const char *path) {
  tdh_init();
  hid_t lcpl = intermediate_lcpl();
  hid_t g = H5Gcreate2(file, path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  H5Pclose(lcpl);
  if (g < 0) return tdh_fail("create_group", "%s cannot be created", path);
  H5Gclose(g);
  return 0;
}

hid_t tdh_lcpl(void) { return intermediate_lcpl(); }

int64_t tdh_copy_string(char *buf, int64_t cap, const char *s, size_t len) {
  if (cap > 0 && len > 0) memcpy(buf, s, len < (size_t)cap ? len : (size_t)cap);
  return (int64_t)len;
}
