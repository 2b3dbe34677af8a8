/*
 * memmap_format.h: Python tensordict's memmap layout (td.memmap(prefix) and
 * TensorDict.load_memmap of tensordict 0.15: tensordict/_td.py, _lazy.py and
 * tensorclass.py), stated once. memmap.c plans what a save writes, memmap_load.c reads
 * it, memmap_wrapped.c writes the lazy stack's and tensorclass's folders, memmap_add.c
 * adds one leaf to a saved folder and append.c grows one; they name the files and
 * fields through this header, never by writing the strings again.
 *
 * A TensorDict is a folder holding meta.json, a file "<key>.memmap" per tensor leaf
 * (its bytes in C order, nothing else; no file for a leaf without elements) and a
 * sub-folder "<key>" per nested container or non-tensor value. Keys become file names
 * as Python's robust keys do (td_mm_encode_key). Its meta.json, in this order:
 *
 *   {<key>: {"device": "cpu", "shape": [...], "dtype": "torch.float32",
 *            "is_nested": false},                      a tensor leaf
 *    <key>: {"type": "TensorDict" | "NonTensorData" | "NonTensorStack"},  a sub-folder
 *    ...,
 *    "shape": [batch size], "device": "cpu" | "None" | null,
 *    "_type": "<class 'tensordict._td.TensorDict'>",
 *    "_format_version": 1, "_class": "tensordict:TensorDict",
 *    "_names": [name | null, ...]}                       only when dims are named
 *
 * A key named like a container field ("shape", "device", "_type") cannot be saved:
 * Python would lose the entry (td_mm_container_field). The format entries are set only
 * when no key holds their name (Python's setdefault).
 *
 * A NonTensorData folder: {"_type": "<class '...NonTensorData'>", "data": <value>,
 * "_metadata": null, "_is_non_tensor": true}. A NonTensorStack folder, written compact:
 * {"_type", "_format_version", "_class": "tensordict:NonTensorStack", "stack_dim": 0,
 * "device": null, "data": [nested lists of values, batch shaped]}.
 *
 * A LazyStackedTensorDict folder: meta.json {"_type", "_format_version", "_class",
 * "stack_dim": d (0-based), "stack_dim_name": null} and a TensorDict folder "0", "1",
 * ... per member. A tensorclass folder: meta.json {"_type": "<class 'module.Name'>"}
 * beside the TensorDict folder "_tensordict" of its fields; fields Python pickled are
 * in "other.pickle" (a non-tensor value's pickle in "pickle.pkl"), which are refused.
 *
 * Beside the layout, this library's own files start with "%" and a letter that is no hex
 * digit, which no key's file name does (keys encode "%" as %25): "%provenance.json" in
 * a folder tdflow wrote (the run's record, lua/tensordict/flow/memmap.lua), "%ring" in a
 * ReplayBuffer's ring (its counters, lua/tensordict/dict/append.lua), and a checkpointed
 * append's "%checkpoint", "%structure" and "%lock" (append.c; gone once committed).
 * Python's load_memmap reads only what meta.json names (its entries, then the folders of
 * those with a "type"), so it ignores them; so does memmap_load.c.
 */
#ifndef TD_STORE_MEMMAP_FORMAT_H
#define TD_STORE_MEMMAP_FORMAT_H

#include <stdbool.h>
#include <string.h>

enum {
  TD_MM_FORMAT_VERSION = 1, /* Python tensordict's "_format_version" */
  TD_MM_NAME_MAX = 255      /* bytes of one file name */
};

/* Files and folders. */
#define TD_MMF_META "meta.json"
#define TD_MMF_LEAF_SUFFIX ".memmap"
#define TD_MMF_TC_FIELDS "_tensordict"  /* a tensorclass's fields */
#define TD_MMF_TC_PICKLE "other.pickle" /* a tensorclass's pickled fields */
#define TD_MMF_NT_PICKLE "pickle.pkl"   /* a pickled non-tensor value */

/* The fields of a container's meta.json. */
#define TD_MMF_SHAPE "shape"
#define TD_MMF_DEVICE "device"
#define TD_MMF_TYPE "_type"
#define TD_MMF_FORMAT_VERSION "_format_version"
#define TD_MMF_CLASS "_class"
#define TD_MMF_NAMES "_names"
/* The fields of an entry: a tensor leaf's (with "device" and "shape"), a sub-folder's. */
#define TD_MMF_DTYPE "dtype"
#define TD_MMF_IS_NESTED "is_nested"
#define TD_MMF_ENTRY_TYPE "type"
#define TD_MMF_ENTRY_TD "TensorDict"
#define TD_MMF_ENTRY_NTD "NonTensorData"
#define TD_MMF_ENTRY_NTS "NonTensorStack"
/* The fields of non-tensor and lazy stack folders. */
#define TD_MMF_DATA "data"
#define TD_MMF_METADATA "_metadata"
#define TD_MMF_IS_NON_TENSOR "_is_non_tensor"
#define TD_MMF_STACK_DIM "stack_dim"
#define TD_MMF_STACK_DIM_NAME "stack_dim_name"
/* Device values: a file maps to CPU memory; Python writes "None" for no device. */
#define TD_MMF_CPU "cpu"
#define TD_MMF_NO_DEVICE "None"

/* "_type" and "_class" of the classes this library writes and reads. */
#define TD_MM_TYPE_TD "<class 'tensordict._td.TensorDict'>"
#define TD_MM_CLASS_TD "tensordict:TensorDict"
#define TD_MM_TYPE_NTD "<class 'tensordict.tensorclass.NonTensorData'>"
#define TD_MM_CLASS_NTD "tensordict:NonTensorData"
#define TD_MM_TYPE_NTS "<class 'tensordict.tensorclass.NonTensorStack'>"
#define TD_MM_CLASS_NTS "tensordict:NonTensorStack"
#define TD_MM_TYPE_LS "<class 'tensordict._lazy.LazyStackedTensorDict'>"
#define TD_MM_CLASS_LS "tensordict:LazyStackedTensorDict"

/* A field name and its length, for the calls that take both (keys may hold NUL). */
#define TD_MMF_KEY(field) field, sizeof field - 1

/* True when key (len bytes) is a field of the container's own in its meta.json, so an
 * entry of that name cannot be saved. */
static inline bool td_mm_container_field(const char *key, size_t len) {
  static const char *const fields[] = {TD_MMF_SHAPE, TD_MMF_DEVICE, TD_MMF_TYPE};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (strlen(fields[i]) == len && memcmp(fields[i], key, len) == 0) return true;
  return false;
}

#endif
