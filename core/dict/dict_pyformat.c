/*
 * dict_pyformat.c: the pieces of Python tensordict's on-disk formats that both layouts
 * need, the memmap folders (dict_memmap*.c) and the consolidated file
 * (dict_consolidate.c): torch dtype names and the hash of value texts. (Their JSON,
 * written the way Python's json.dumps writes it, is the JSON layer's: core/src/json*.c.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dict_internal.h"

/* ------------------------------------------------------------------ dtype names */

/* str(torch.dtype) for each td_dtype, as tensordict writes them (its
 * _DTYPE_TO_STR_DTYPE); dtype.c's table holds the bare names. */
static const char *const torch_dtypes[TD_NUM_DTYPES] = {
    "torch.bool",    "torch.uint8",   "torch.int8",     "torch.int16",   "torch.int32",
    "torch.int64",   "torch.float16", "torch.bfloat16", "torch.float32", "torch.float64"};

const char *td_py_dtype_name(int32_t dtype) {
  return dtype >= 0 && dtype < TD_NUM_DTYPES ? torch_dtypes[dtype] : NULL;
}

int32_t td_py_dtype_from_name(const char *name) {
  for (int32_t i = 0; i < TD_NUM_DTYPES; i++)
    if (strcmp(name, torch_dtypes[i]) == 0) return i;
  return -1;
}

/* -------------------------------------------------------- NonTensorStack texts */

uint64_t td_py_text_hash(const char *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}
