/*
 * npy.h: what npy.c (NumPy's .npy files) gives npz.c, which reads and writes the same
 * arrays as members of a zip archive.
 */
#ifndef TD_STORE_NPY_H
#define TD_STORE_NPY_H

#include "../src/internal.h"

/* NumPy's kind character of a dtype ('b', 'i', 'u', 'f'), 0 for one NumPy lacks. */
char td_npy_kind(int32_t dtype);
/* A new tensor (Fortran order: a transposed view; big-endian: swapped) of the array
 * whose header is h and whose h->nbytes bytes of data are at data. */
td_tensor *td_npy_from_bytes(const td_npy_header *h, const char *data);
/* The .npy header for t (version 1.0 unless longer, padded to 64 bytes), malloc'd, its
 * length in *n; NULL after td_fail (a dtype NumPy lacks). */
char *td_npy_header_bytes(const td_tensor *t, int64_t *n);

#endif
