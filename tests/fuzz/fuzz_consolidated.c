/* fuzz_consolidated.c: T.from_consolidated's reader on a fuzzed file (leaves, then the
 * JSON metadata, then its length as an int64, as tensordict writes it). Every loaded
 * container is read in full. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  snprintf(path, sizeof path, "%s/input.td", fuzz_dir());
  fuzz_write(path, data, size);
  td_dict *d = td_dict_from_consolidated(path, TD_MAP_READ);
  if (d) {
    fuzz_touch(d);
    td_dict_release(d);
  }
  return 0;
}
