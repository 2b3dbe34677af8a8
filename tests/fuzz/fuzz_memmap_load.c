/* fuzz_memmap_load.c: T.load_memmap's reader on a fuzzed folder. The input is meta.json,
 * then (after the first NUL byte, if any) the bytes of the leaf file a.memmap, so the
 * fuzzer mutates both the metadata (keys, shapes, dtypes, non-tensor values, nesting)
 * and the sizes of the data it maps. Every loaded container is read in full. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  const char *dir = fuzz_dir();
  const uint8_t *nul = memchr(data, 0, size);
  size_t meta = nul ? (size_t)(nul - data) : size;
  snprintf(path, sizeof path, "%s/meta.json", dir);
  fuzz_write(path, data, meta);
  snprintf(path, sizeof path, "%s/a.memmap", dir);
  if (nul) fuzz_write(path, nul + 1, size - meta - 1);
  else unlink(path);
  td_dict *d = td_dict_load_memmap(dir, TD_MAP_READ);
  if (d) {
    fuzz_touch(d);
    td_dict_release(d);
  }
  return 0;
}
