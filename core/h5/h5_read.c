/* h5_read.c: datasets read through hyperslabs of their leading dim (libtensordict_h5). */
#include <stdlib.h>
#include <string.h>

#include "h5_internal.h"

TDH_EXPORT int64_t td_h5_dataset_open(int64_t file, const char *path) {
  tdh_init();
  hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
  hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
  if (d < 0) {
    H5Pclose(dapl);
    return tdh_fail("dataset", "%s cannot be opened", path);
  }
  /* A chunked dataset gets a cache of two rows of chunks (at least HDF5's 1 MiB): a
   * chunk that straddles two consecutive reads is decompressed once. */
  hid_t dcpl = H5Dget_create_plist(d);
  if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
    hsize_t chunk[TD_H5_MAX_DIMS], shape[TD_H5_MAX_DIMS];
    int n = H5Pget_chunk(dcpl, TD_H5_MAX_DIMS, chunk);
    hid_t space = H5Dget_space(d), type = H5Dget_type(d);
    int32_t ndim = 0;
    if (n > 0 && space >= 0 && type >= 0 && tdh_space_dims(space, &ndim, shape) >= 0 && ndim == n) {
      double per_chunk = (double)H5Tget_size(type), across = 1;
      for (int i = 0; i < n; i++) per_chunk *= (double)chunk[i];
      for (int i = 1; i < n; i++) across *= chunk[i] ? (double)((shape[i] + chunk[i] - 1) / chunk[i]) : 1;
      double bytes = 2 * per_chunk * across;
      if (bytes > 1 << 20 && bytes < (double)(1LL << 31)) {
        H5Dclose(d);
        H5Pset_chunk_cache(dapl, 10007, (size_t)bytes, 1.0);
        d = H5Dopen2(file, path, dapl);
      }
    }
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
  }
  if (dcpl >= 0) H5Pclose(dcpl);
  H5Pclose(dapl);
  if (d < 0) return tdh_fail("dataset", "%s cannot be opened", path);
  return d;
}

TDH_EXPORT int32_t td_h5_dataset_close(int64_t dset) {
  tdh_init();
  if (H5Dclose(dset) < 0) return tdh_fail("dataset", "closing failed");
  return 0;
}

static int has_str_marker(hid_t d) {
  htri_t yes = H5Aexists(d, TDH_STR_ATTR);
  return yes > 0;
}

TDH_EXPORT int32_t td_h5_dataset_info(int64_t dset, td_h5_info *out) {
  tdh_init();
  memset(out, 0, sizeof *out);
  hid_t space = H5Dget_space(dset), type = H5Dget_type(dset), dcpl = H5Dget_create_plist(dset);
  int32_t rc = 0;
  hsize_t dims[TD_H5_MAX_DIMS];
  if (space < 0 || type < 0 || dcpl < 0) {
    rc = tdh_fail("dataset", "its header cannot be read");
    goto done;
  }
  if (H5Sget_simple_extent_type(space) == H5S_NULL) {
    rc = tdh_fail("dataset", "it has a null dataspace (no shape)");
    goto done;
  }
  if (tdh_space_dims(space, &out->ndim, dims) < 0) {
    rc = tdh_fail("dataset", "its dataspace has more than %d dims", TD_H5_MAX_DIMS);
    goto done;
  }
  for (int i = 0; i < out->ndim; i++) out->shape[i] = (int64_t)dims[i];
  if (H5Tget_class(type) == H5T_STRING) {
    out->content = TD_H5_STRING;
  } else {
    out->content = TD_H5_TENSOR;
    out->dtype = tdh_dtype_of(type, "dataset");
    if (out->dtype < 0) {
      rc = -1;
      goto done;
    }
  }
  if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
    out->chunked = 1;
    H5Pget_chunk(dcpl, TD_H5_MAX_DIMS, dims);
    for (int i = 0; i < out->ndim; i++) out->chunk[i] = (int64_t)dims[i];
  }
  out->filtered = H5Pget_nfilters(dcpl) > 0;
  out->str_marker = has_str_marker(dset);
done:
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  if (dcpl >= 0) H5Pclose(dcpl);
  H5Eclear2(H5E_DEFAULT);
  return rc;
}

/* Reads the selection fsel of the dataset into a buffer of nrows rows. */
static int32_t read_selection(hid_t dset, int32_t dtype, hid_t fspace, int32_t ndim, const hsize_t *dims,
                              int64_t nrows, void *out, const char *call) {
  hid_t mtype = tdh_type_of(dtype);
  if (mtype < 0) return tdh_fail(call, "dtype code %d is not a dtype", dtype);
  hsize_t mdims[TD_H5_MAX_DIMS];
  for (int i = 0; i < ndim; i++) mdims[i] = dims[i];
  if (ndim > 0) mdims[0] = (hsize_t)nrows;
  hid_t mspace = ndim > 0 ? H5Screate_simple(ndim, mdims, NULL) : H5Screate(H5S_SCALAR);
  herr_t r = H5Dread(dset, mtype, mspace, fspace, H5P_DEFAULT, out);
  H5Sclose(mspace);
  H5Tclose(mtype);
  if (r < 0) return tdh_fail(call, "reading failed (a damaged or truncated file?)");
  return 0;
}

/* The dataset's dataspace with its dims and row size (elements after the leading dim). */
static hid_t open_space(int64_t dset, hsize_t *dims, int32_t *ndim, int64_t *row) {
  hid_t space = H5Dget_space(dset);
  if (space < 0) return tdh_fail("read", "no dataspace");
  *row = tdh_space_dims(space, ndim, dims);
  if (*row < 0) {
    H5Sclose(space);
    return tdh_fail("read", "a dataspace of more than %d dims", TD_H5_MAX_DIMS);
  }
  return space;
}

TDH_EXPORT int32_t td_h5_read_rows(int64_t dset, int32_t dtype, int64_t row0, int64_t nrows, void *out) {
  tdh_init();
  hsize_t dims[TD_H5_MAX_DIMS];
  int32_t ndim = 0;
  int64_t row = 0;
  hid_t space = open_space(dset, dims, &ndim, &row);
  if (space < 0) return -1;
  int32_t rc = 0;
  if (ndim > 0 && (row0 < 0 || nrows < 0 || (hsize_t)(row0 + nrows) > dims[0])) {
    rc = tdh_fail("read", "rows [%lld, %lld) outside the %llu rows", (long long)row0, (long long)(row0 + nrows),
                  (unsigned long long)dims[0]);
  } else if (ndim > 0 && (nrows == 0 || row == 0)) {
    rc = 0; /* nothing to read */
  } else {
    if (ndim > 0) {
      hsize_t start[TD_H5_MAX_DIMS] = { 0 }, count[TD_H5_MAX_DIMS];
      for (int i = 0; i < ndim; i++) count[i] = dims[i];
      start[0] = (hsize_t)row0;
      count[0] = (hsize_t)nrows;
      H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    }
    rc = read_selection(dset, dtype, space, ndim, dims, nrows, out, "read");
  }
  H5Sclose(space);
  return rc;
}

struct pos { int64_t row, at; };

static int by_row(const void *a, const void *b) {
  const struct pos *x = a, *y = b;
  return x->row < y->row ? -1 : x->row > y->row;
}

TDH_EXPORT int32_t td_h5_read_index(int64_t dset, int32_t dtype, const int64_t *rows, int64_t n, void *out) {
  tdh_init();
  hsize_t dims[TD_H5_MAX_DIMS];
  int32_t ndim = 0;
  int64_t row = 0;
  hid_t space = open_space(dset, dims, &ndim, &row);
  if (space < 0) return -1;
  hid_t mtype = tdh_type_of(dtype);
  size_t esize = mtype >= 0 ? H5Tget_size(mtype) : 0;
  if (mtype >= 0) H5Tclose(mtype);
  if (ndim < 1 || esize == 0) {
    H5Sclose(space);
    return tdh_fail("read", "an index needs a dataset with a leading dim and a dtype");
  }
  for (int64_t i = 0; i < n; i++)
    if (rows[i] < 0 || (hsize_t)rows[i] >= dims[0]) {
      H5Sclose(space);
      return tdh_fail("read", "row %lld outside the %llu rows", (long long)rows[i], (unsigned long long)dims[0]);
    }
  if (n == 0 || row == 0) {
    H5Sclose(space);
    return 0;
  }
  struct pos *p = malloc((size_t)n * sizeof *p);
  if (!p) {
    H5Sclose(space);
    return tdh_fail("read", "out of memory");
  }
  for (int64_t i = 0; i < n; i++) p[i] = (struct pos){ rows[i], i };
  qsort(p, (size_t)n, sizeof *p, by_row);
  /* the union of runs of consecutive distinct rows */
  H5Sselect_none(space);
  int64_t distinct = 0;
  hsize_t start[TD_H5_MAX_DIMS] = { 0 }, count[TD_H5_MAX_DIMS];
  for (int i = 0; i < ndim; i++) count[i] = dims[i];
  for (int64_t i = 0; i < n;) {
    int64_t j = i + 1, last = p[i].row;
    while (j < n && (p[j].row == last || p[j].row == last + 1)) last = p[j++].row;
    start[0] = (hsize_t)p[i].row;
    count[0] = (hsize_t)(last - p[i].row + 1);
    H5Sselect_hyperslab(space, H5S_SELECT_OR, start, NULL, count, NULL);
    distinct += last - p[i].row + 1;
    i = j;
  }
  size_t row_bytes = (size_t)row * esize;
  char *buf = malloc((size_t)distinct * row_bytes);
  int32_t rc = buf ? read_selection(dset, dtype, space, ndim, dims, distinct, buf, "read")
                   : tdh_fail("read", "out of memory");
  if (rc == 0) {
    int64_t k = -1, prev = -1;
    for (int64_t i = 0; i < n; i++) {
      if (p[i].row != prev) k++, prev = p[i].row;
      memcpy((char *)out + (size_t)p[i].at * row_bytes, buf + (size_t)k * row_bytes, row_bytes);
    }
  }
  free(buf);
  free(p);
  H5Sclose(space);
  return rc;
}

TDH_EXPORT int64_t td_h5_read_string(int64_t dset, int64_t elem, char *buf, int64_t cap) {
  tdh_init();
  hid_t type = H5Dget_type(dset), space = H5Dget_space(dset);
  int64_t rc = -1;
  hssize_t total = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
  if (type < 0 || space < 0 || H5Tget_class(type) != H5T_STRING) {
    rc = tdh_fail("read_string", "not a string dataset");
  } else if (elem < 0 || elem >= total) {
    rc = tdh_fail("read_string", "element %lld outside the %lld strings", (long long)elem, (long long)total);
  } else {
    hsize_t coord = (hsize_t)elem;
    if (H5Sget_simple_extent_ndims(space) > 0) {
      /* the elem-th string in row-major order */
      hsize_t dims[TD_H5_MAX_DIMS], at[TD_H5_MAX_DIMS];
      int nd = H5Sget_simple_extent_dims(space, dims, NULL);
      for (int i = nd - 1; i >= 0; i--) at[i] = coord % dims[i], coord /= dims[i];
      H5Sselect_elements(space, H5S_SELECT_SET, 1, at);
    }
    hid_t mspace = H5Screate(H5S_SCALAR);
    if (H5Tis_variable_str(type) > 0) {
      hid_t mtype = H5Tcopy(H5T_C_S1);
      H5Tset_size(mtype, H5T_VARIABLE);
      H5Tset_cset(mtype, H5Tget_cset(type));
      char *s = NULL;
      if (H5Dread(dset, mtype, mspace, space, H5P_DEFAULT, &s) < 0) {
        rc = tdh_fail("read_string", "reading failed");
      } else {
        size_t len = s ? strlen(s) : 0;
        rc = tdh_copy_string(buf, cap, s ? s : "", len);
        H5free_memory(s);
      }
      H5Tclose(mtype);
    } else {
      size_t size = H5Tget_size(type);
      char *s = calloc(size + 1, 1);
      hid_t mtype = H5Tcopy(type);
      H5Tset_strpad(mtype, H5T_STR_NULLPAD);
      if (!s || H5Dread(dset, mtype, mspace, space, H5P_DEFAULT, s) < 0) {
        rc = tdh_fail("read_string", "reading failed");
      } else {
        size_t len = strnlen(s, size);
        rc = tdh_copy_string(buf, cap, s, len);
      }
      H5Tclose(mtype);
      free(s);
    }
    H5Sclose(mspace);
  }
  if (type >= 0) H5Tclose(type);
  if (space >= 0) H5Sclose(space);
  return rc;
}
