/* fuzz_util.h: what the libFuzzer targets share: a scratch folder of their own in
 * /dev/shm (files are written per input, so memory beats disk), writing a file, and
 * touching every element of a container's leaves so a bad view is read by ASan. */
#ifndef TD_FUZZ_UTIL_H
#define TD_FUZZ_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensordict.h"

static inline const char *fuzz_dir(void) {
  static char dir[256];
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/dev/shm/td-fuzz-%d", (int)getpid());
    mkdir(dir, 0700);
  }
  return dir;
}

static inline void fuzz_write(const char *path, const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
}

/* Reads every element of every tensor leaf (nested too) into a contiguous copy, and
 * every non-tensor text, so a bad view or position is read under ASan. */
static inline void fuzz_touch(td_dict *d) {
  int32_t n = td_dict_head_borrow(d)->nkeys;
  for (int32_t i = 0; i < n; i++) {
    int32_t kind = td_dict_kind(d, i);
    if (kind == TD_ENTRY_DICT) {
      td_dict *child = td_dict_child(d, i);
      fuzz_touch(child);
      td_dict_release(child);
    } else if (kind == TD_ENTRY_TENSOR || kind == TD_ENTRY_VALUES) {
      td_tensor *c = td_tensor_contiguous(td_dict_tensor_pin(d, i));
      if (c && kind == TD_ENTRY_VALUES) {
        const int64_t *pos = td_tensor_data_borrow(c);
        for (int64_t k = 0, m = td_tensor_numel(c); k < m; k++)
          if (strlen(td_dict_value_borrow(d, i, pos[k])) == (size_t)-1) abort();
      }
      td_tensor_release(c);
    } else if (strlen(td_dict_value_borrow(d, i, 0)) == (size_t)-1) {
      abort();
    }
  }
}
#endif
