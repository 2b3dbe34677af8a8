/* h5_write.c: datasets written whole or row by row (extendible), libtensordict_h5. */
#include <string.h>

#include "h5_internal.h"

/* A default chunk for an extendible dataset: about 1 MiB of rows (at least one). */
static void default_chunk(int32_t ndim, const hsize_t *dims, size_t esize, hsize_t *chunk) {
  double row = (double)esize;
  for (int i = 1; i < ndim; i++) {
    chunk[i] = dims[i] ? dims[i] : 1;
    row *= (double)chunk[i];
  }
  double rows = (double)(1 << 20) / (row > 0 ? row : 1);
  chunk[0] = rows < 1 ? 1 : (hsize_t)rows;
  if (dims[0] > 0 && chunk[0] > dims[0]) chunk[0] = dims[0];
}

TDH_EXPORT int32_t td_h5_write(int64_t file, const char *path, int32_t dtype, int32_t ndim, const int64_t *shape,
                               const void *data, const int64_t *chunk, int32_t gzip, int32_t extendible) {
  tdh_init();
  if (ndim < 0 || ndim > TD_H5_MAX_DIMS) return tdh_fail("write", "%s: %d dims", path, ndim);
  if (extendible && ndim == 0) return tdh_fail("write", "%s: a 0-dim dataset cannot grow", path);
  hid_t mtype = tdh_type_of(dtype);
  if (mtype < 0) return tdh_fail("write", "%s: dtype code %d is not a dtype", path, dtype);
  hsize_t dims[TD_H5_MAX_DIMS], maxdims[TD_H5_MAX_DIMS], cdims[TD_H5_MAX_DIMS];
  int has_zero = 0;
  for (int i = 0; i < ndim; i++) {
    dims[i] = maxdims[i] = (hsize_t)shape[i];
    has_zero |= shape[i] == 0;
  }
  if (extendible) maxdims[0] = H5S_UNLIMITED;
  hid_t space = ndim > 0 ? H5Screate_simple(ndim, dims, maxdims) : H5Screate(H5S_SCALAR);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  int chunked = ndim > 0 && (chunk || gzip >= 0 || extendible);
  if (chunked) {
    if (chunk) {
      for (int i = 0; i < ndim; i++) cdims[i] = chunk[i] > 0 ? (hsize_t)chunk[i] : 1;
    } else {
      default_chunk(ndim, dims, H5Tget_size(mtype), cdims);
    }
    /* HDF5 needs chunks no larger than fixed dims; an empty dim takes chunks of 1 */
    for (int i = 0; i < ndim; i++)
      if (maxdims[i] != H5S_UNLIMITED && cdims[i] > dims[i]) cdims[i] = dims[i] ? dims[i] : 1;
    H5Pset_chunk(dcpl, ndim, cdims);
    if (gzip >= 0) H5Pset_deflate(dcpl, (unsigned)gzip);
  }
  hid_t lcpl = tdh_lcpl();
  hid_t d = H5Dcreate2(file, path, mtype, space, lcpl, dcpl, H5P_DEFAULT);
  int32_t rc = 0;
  if (d < 0) {
    rc = tdh_fail("write", "%s cannot be created", path);
  } else if (data && !has_zero && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    rc = tdh_fail("write", "%s cannot be written", path);
  }
  if (d >= 0) H5Dclose(d);
  H5Pclose(lcpl);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Tclose(mtype);
  return rc;
}

TDH_EXPORT int32_t td_h5_append(int64_t dset, int32_t dtype, int64_t nrows, const void *data) {
  tdh_init();
  if (nrows < 0) return tdh_fail("append", "%lld rows", (long long)nrows);
  hid_t space = H5Dget_space(dset);
  hsize_t dims[TD_H5_MAX_DIMS];
  int32_t ndim = 0;
  if (space < 0 || tdh_space_dims(space, &ndim, dims) < 0 || ndim < 1) {
    if (space >= 0) H5Sclose(space);
    return tdh_fail("append", "the dataset has no leading dim");
  }
  H5Sclose(space);
  if (nrows == 0) return 0;
  hsize_t start[TD_H5_MAX_DIMS] = { 0 }, count[TD_H5_MAX_DIMS], grown[TD_H5_MAX_DIMS];
  for (int i = 0; i < ndim; i++) count[i] = grown[i] = dims[i];
  start[0] = dims[0];
  count[0] = (hsize_t)nrows;
  grown[0] = dims[0] + (hsize_t)nrows;
  if (H5Dset_extent(dset, grown) < 0) return tdh_fail("append", "the dataset cannot grow (not extendible?)");
  hid_t mtype = tdh_type_of(dtype);
  space = H5Dget_space(dset);
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
  hid_t mspace = H5Screate_simple(ndim, count, NULL);
  int32_t rc = 0;
  if (mtype < 0 || H5Dwrite(dset, mtype, mspace, space, H5P_DEFAULT, data) < 0)
    rc = tdh_fail("append", "writing %lld rows failed", (long long)nrows);
  H5Sclose(mspace);
  H5Sclose(space);
  if (mtype >= 0) H5Tclose(mtype);
  return rc;
}

/* h5py's bool True, for the marker attribute as Python tensordict writes it. */
static int32_t write_marker(hid_t d) {
  hid_t t = tdh_type_of(TD_BOOL), s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(d, TDH_STR_ATTR, t, s, H5P_DEFAULT, H5P_DEFAULT);
  unsigned char yes = 1;
  int32_t rc = a >= 0 && H5Awrite(a, t, &yes) >= 0 ? 0 : -1;
  if (a >= 0) H5Aclose(a);
  H5Sclose(s);
  H5Tclose(t);
  return rc;
}

static hid_t utf8_vlen(void) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

TDH_EXPORT int32_t td_h5_write_string(int64_t file, const char *path, const char *s, int64_t len) {
  tdh_init();
  if (len < 0 || memchr(s, 0, (size_t)len))
    return tdh_fail("write", "%s: HDF5 strings cannot hold a NUL byte", path);
  hid_t t = utf8_vlen(), space = H5Screate(H5S_SCALAR), lcpl = tdh_lcpl();
  hid_t d = H5Dcreate2(file, path, t, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  int32_t rc = 0;
  if (d < 0 || H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &s) < 0 || write_marker(d) < 0)
    rc = tdh_fail("write", "%s cannot be written", path);
  if (d >= 0) H5Dclose(d);
  H5Pclose(lcpl);
  H5Sclose(space);
  H5Tclose(t);
  return rc;
}
