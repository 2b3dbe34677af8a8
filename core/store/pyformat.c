/*
 * pyformat.c: the pieces of Python tensordict's on-disk formats that both layouts
 * need, the memmap folders (memmap*.c) and the consolidated file
 * (consolidate_*.c): torch dtype names, the hash of value texts and the legacy
 * (robust_key=False) file names the memmap loader falls back to. (Their JSON,
 * written the way Python's json.dumps writes it, is the JSON layer's: core/src/json*.c.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype_table.h"
#include "store_internal.h"

/* ------------------------------------------------------------------ dtype names */

/* str(torch.dtype) for each td_dtype, as tensordict writes them (its
 * _DTYPE_TO_STR_DTYPE): "torch." and the dtype table's name. */
#define TORCH_NAME(_, DN, DT, DK, CT, FAM, NAME, ...) [TD_##DN] = "torch." NAME,
static const char *const torch_dtypes[TD_NUM_DTYPES] = {TD_DTYPES_ALL(TORCH_NAME, _)};

const char *td_py_dtype_name(int32_t dtype) {
  return dtype >= 0 && dtype < TD_NUM_DTYPES ? torch_dtypes[dtype] : NULL;
}

int32_t td_py_dtype_from_name(const char *name) {
  for (int32_t i = 0; i < TD_NUM_DTYPES; i++)
    if (strcmp(name, torch_dtypes[i]) == 0) return i;
  return -1;
}

const char *td_py_dtype_list(char *buf, size_t n) {
  size_t at = 0;
  buf[0] = '\0';
  for (int32_t i = 0; i < TD_NUM_DTYPES && at < n; i++) {
    const char *sep = i == 0 ? "" : i + 1 < TD_NUM_DTYPES ? ", " : " or ";
    const int w = snprintf(buf + at, n - at, "%s%s", sep, torch_dtypes[i]);
    at += w > 0 ? (size_t)w : 0;
  }
  return buf;
}

/* -------------------------------------------------------- NonTensorStack texts */

uint64_t td_py_text_hash(const char *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* ------------------------------------------------------ legacy file names */

/* Python's _is_safe_legacy_key: a raw key stays inside its folder (no '/' or '\\', no
 * Windows drive prefix such as "C:x"; a folder also not "", "." or ".."). Python tests
 * str.isalpha() on the first character; a non-ASCII first character followed by ':' is
 * refused too, which errs on the side of loading less. A key holding NUL or too long to
 * be a file name never names a file. */
char *td_mm_legacy_name(const char *key, int64_t len, const char *suffix, bool folder,
                        bool *oom) {
  *oom = false;
  size_t sl = strlen(suffix);
  if ((size_t)len + sl > TD_MM_NAME_MAX || memchr(key, '\0', (size_t)len) ||
      memchr(key, '/', (size_t)len) || memchr(key, '\\', (size_t)len))
    return NULL;
  if (len >= 2) {
    unsigned char c = (unsigned char)key[0];
    int64_t next = 1; /* the byte after the first character */
    if (c >= 0x80)
      while (next < len && ((unsigned char)key[next] & 0xC0) == 0x80) next++;
    bool letter = c >= 0x80 || (unsigned)((c | 0x20) - 'a') < 26u;
    if (letter && next < len && key[next] == ':') return NULL;
  }
  if (folder && (len == 0 || (len == 1 && key[0] == '.') ||
                 (len == 2 && key[0] == '.' && key[1] == '.')))
    return NULL;
  char *name = malloc((size_t)len + sl + 1);
  if (!name) {
    *oom = true;
    return NULL;
  }
  memcpy(name, key, (size_t)len);
  memcpy(name + len, suffix, sl + 1);
  return name;
}
