/*
 * tensordict_h5.h: libtensordict_h5, thin checked wrappers over HDF5's C library for the
 * Lua module tensordict.h5 (docs/h5.md). A separate library, as libtensordict_mpi is:
 * libtensordict never links HDF5; this one links HDF5 only and works on raw buffers, so
 * the Lua side makes the tensors and HDF5's own types never reach the FFI.
 *
 * Plain C, FFI-clean (scripts/gen_cdefs.lua makes lua/tensordict/cdefs_h5.lua from it).
 * Conventions:
 * - Ids are HDF5's hid_t (int64). A negative return is a failure; td_h5_last_error()
 *   then holds one message made of HDF5's error stack (HDF5 itself never prints).
 * - dtype arguments are td_dtype codes (tensordict.h); the HDF5 type of each is derived
 *   from the dtype table (bool as h5py's enum, float16 / bfloat16 as 16-bit floats).
 * - Rows are 0-based indices of the leading dim; buffers are C-contiguous.
 */
#ifndef TENSORDICT_H5_H
#define TENSORDICT_H5_H

#include <stdint.h>

#define TD_H5_ABI_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

enum { TD_H5_MAX_DIMS = 32 };

/* What a link of a group leads to. */
enum td_h5_kind { TD_H5_GROUP = 0, TD_H5_DATASET = 1, TD_H5_OTHER = 2 };

/* What a dataset holds: a tensor of a td dtype, strings, or something a container
 * cannot hold (td_h5_dataset_info fails for it, naming the type). */
enum td_h5_content { TD_H5_TENSOR = 0, TD_H5_STRING = 1 };

typedef struct td_h5_info {
  int32_t content;    /* td_h5_content */
  int32_t dtype;      /* td_dtype, for TD_H5_TENSOR */
  int32_t ndim;
  int32_t chunked;    /* 1: chunk[] holds the chunk dims */
  int32_t filtered;   /* 1: a filter (compression) is in its pipeline */
  int32_t str_marker; /* 1: Python tensordict's "__tensordict_str__" attribute is set */
  int64_t shape[TD_H5_MAX_DIMS];
  int64_t chunk[TD_H5_MAX_DIMS];
} td_h5_info;

int32_t td_h5_abi_version(void);
const char *td_h5_last_error(void);
const char *td_h5_library_version(void);

/* Files. open: an existing file, read-only or read-write; create: a new one, replacing
 * what is at path. Closing a file closes every object opened in it. commit: closes a
 * file made by create, fsyncs it and renames tmp to path (the atomic save). */
int64_t td_h5_open(const char *path, int32_t writable);
int64_t td_h5_create(const char *path);
int32_t td_h5_close(int64_t file);
int32_t td_h5_commit(int64_t file, const char *tmp, const char *path);

/* Groups: the number of links under group (a path, "/" the root), and the idx-th
 * (0-based, in name order) with its kind. name gets at most cap bytes with the NUL;
 * the return is the name's length (call again with more room when >= cap). */
int64_t td_h5_child_count(int64_t file, const char *group);
int64_t td_h5_child(int64_t file, const char *group, int64_t idx, char *name, int64_t cap, int32_t *kind);
int32_t td_h5_create_group(int64_t file, const char *path);

/* Datasets. open: an id for the reads below (with a chunk cache of two rows of chunks,
 * so that consecutive row ranges decompress each chunk once); close it, or the file. */
int64_t td_h5_dataset_open(int64_t file, const char *path);
int32_t td_h5_dataset_close(int64_t dset);
int32_t td_h5_dataset_info(int64_t dset, td_h5_info *out);
/* Rows [row0, row0 + nrows) of the leading dim as dtype (all of a 0-dim dataset when
 * nrows is 1 and row0 0), through a hyperslab: only those rows are read. */
int32_t td_h5_read_rows(int64_t dset, int32_t dtype, int64_t row0, int64_t nrows, void *out);
/* The listed rows, in any order, repeats allowed: one read of their sorted union, then
 * each row copied to its place. */
int32_t td_h5_read_index(int64_t dset, int32_t dtype, const int64_t *rows, int64_t n, void *out);
/* The elem-th string (0 for a scalar) of a string dataset, as UTF-8 bytes: at most cap
 * bytes are written; the return is the full length. */
int64_t td_h5_read_string(int64_t dset, int64_t elem, char *buf, int64_t cap);

/* Writes a dataset (intermediate groups made). chunk: NULL for HDF5's choice (contiguous
 * unless compressed or extendible); gzip: -1 for none, else the level 0-9. extendible:
 * the leading dim may grow (td_h5_append); shape[0] is its initial size. */
int32_t td_h5_write(int64_t file, const char *path, int32_t dtype, int32_t ndim, const int64_t *shape,
                    const void *data, const int64_t *chunk, int32_t gzip, int32_t extendible);
/* Appends nrows rows to an extendible dataset (an id from td_h5_dataset_open). */
int32_t td_h5_append(int64_t dset, int32_t dtype, int64_t nrows, const void *data);
/* A scalar UTF-8 string dataset with Python tensordict's "__tensordict_str__" marker. */
int32_t td_h5_write_string(int64_t file, const char *path, const char *s, int64_t len);

/* Attributes of the object at path (the marker above excluded from none: the caller
 * skips it). kind of an attribute: 0 numbers (n of them, read with attr_numbers),
 * 1 strings (n of them, read with attr_string), 2 another type (not read). */
int32_t td_h5_attr_count(int64_t file, const char *path);
int64_t td_h5_attr_name(int64_t file, const char *path, int32_t idx, char *name, int64_t cap);
int32_t td_h5_attr_info(int64_t file, const char *path, const char *name, int32_t *kind, int64_t *n);
int32_t td_h5_attr_numbers(int64_t file, const char *path, const char *name, double *out, int64_t n);
int64_t td_h5_attr_string(int64_t file, const char *path, const char *name, int64_t elem, char *buf, int64_t cap);
int32_t td_h5_attr_write_number(int64_t file, const char *path, const char *name, double value);
int32_t td_h5_attr_write_string(int64_t file, const char *path, const char *name, const char *s);

#ifdef __cplusplus
}
#endif

#endif
