/*
 * consolidate.h: a whole container in one file, in Python tensordict's
 * consolidated layout (td.consolidate(filename=...) and TensorDict.from_consolidated
 * of tensordict 0.15: tensordict/_base/serialization.py and _reductions.py).
 * consolidate_save.c writes it (td_dict_consolidate), consolidate_load.c
 * reads it (td_dict_from_consolidated); this header holds the layout both follow.
 *
 * The file:
 *
 *   [payload: P bytes][metadata: M bytes of JSON][M: int64, little-endian]
 *
 * The payload holds the bytes of every tensor leaf (C order, little-endian), depth
 * first in key order (the leaves of a nested container come where the container is),
 * each followed by zero bytes up to a multiple of 8, so every leaf starts 8-byte
 * aligned. The metadata holds one JSON object per container:
 *
 *   {"cls": "TensorDict",
 *    "non_tensors": {key: [data, batch_size, device], ...},
 *    "leaves": {key: [dtype, shape, start, stop, pad], ...},
 *    "cls_metadata": {"device": null | "cpu" | "cuda:N", "names": [name | null, ...],
 *                     "batch_size": [...], "is_locked": false | true},
 *    child_key: {... a nested container or a NonTensorStack ...}, ...}
 *
 * dtype is str(torch.dtype) ("torch.float32"); start and stop are byte offsets in the
 * payload with stop = start + nbytes + pad and pad = (8 - nbytes % 8) % 8; data is the
 * non-tensor value itself (any JSON), batch_size the container's, device its device. A
 * stacked non-tensor value is a child {"cls": "NonTensorStack", "non_tensors": {"0":
 * [data, sub_batch, device], ...}, "leaves": {}, "cls_metadata": {"stack_dim": 0,
 * "stack_dim_name": name | null, "is_locked": bool}, "1": {nested NonTensorStack}, ...}:
 * element i along the stack dim is uniform data (in non_tensors) or a stack itself.
 *
 * The JSON is read and written by the library's JSON layer (core/src/json.h), which
 * takes Python's NaN and Infinity, keys holding NUL bytes (\u0000), integers exactly
 * (shapes, offsets, big non-tensor integers) and keeps non-tensor values' number
 * literals as written.
 */
#ifndef TD_STORE_CONSOLIDATE_H
#define TD_STORE_CONSOLIDATE_H

#include <string.h>

#include "store_internal.h"

/* The keys of a container's metadata object that are not children: a nested container
 * or a stacked value cannot be saved under one of them. */
static inline bool td_cons_reserved_key(const char *key, size_t len) {
  static const char *const reserved[] = {"cls", "non_tensors", "leaves", "cls_metadata",
                                         "size"};
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
    if (strlen(reserved[i]) == len && memcmp(reserved[i], key, len) == 0) return true;
  return false;
}

#endif
