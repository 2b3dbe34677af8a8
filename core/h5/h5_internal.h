/* h5_internal.h: what the files of libtensordict_h5 share (not installed). */
#ifndef TD_H5_INTERNAL_H
#define TD_H5_INTERNAL_H

#include <hdf5.h>
#include <stdint.h>

#include "tensordict.h"
#include "tensordict_h5.h"

#define TDH_EXPORT __attribute__((visibility("default")))

/* Python tensordict's attribute on the string datasets it writes. */
#define TDH_STR_ATTR "__tensordict_str__"

/* Silences HDF5's printing of its error stack (once per process): failures are read
 * back with tdh_fail instead. */
void tdh_init(void);
/* Records "call: what" plus HDF5's current error stack (then cleared) as the message
 * of td_h5_last_error, and returns -1. */
int32_t tdh_fail(const char *call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The HDF5 type (a copy: close it) that holds one element of dtype, derived from the
 * dtype table; negative for a code that is not a dtype. */
hid_t tdh_type_of(int32_t dtype);
/* The dtype of a file's element type, or -1 with a message naming the type when no
 * dtype holds it (a compound, a variable-length array, a 64-bit unsigned, ...). */
int32_t tdh_dtype_of(hid_t type, const char *call);
/* The size of one row of a dataset's space (elements after the leading dim), in
 * elements; shape gets the dims. Negative on failure. */
int64_t tdh_space_dims(hid_t space, int32_t *ndim, hsize_t *shape);

/* Copies the string s of len bytes into buf (at most cap bytes, no NUL) and returns len:
 * the callers' contract of returning the full length. */
int64_t tdh_copy_string(char *buf, int64_t cap, const char *s, size_t len);

/* Link creation properties that make the missing groups of a path. */
hid_t tdh_lcpl(void);

#endif
