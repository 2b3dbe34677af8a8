/* fuzz_npy.c: NumPy's readers on fuzzed files: the input is a .npy file, read by the
 * header parser, loaded into memory and mapped (td_npy_load), and the same bytes read as
 * an .npz archive (td_npz_names, then td_npz_read of each key), so the fuzzer mutates
 * headers (versions, lengths, dicts, dtypes, shapes) and zip records (directories, ZIP64
 * records, sizes, deflate streams, CRCs). Every loaded array is read in full. */
#include "fuzz_util.h"

static void touch(td_tensor *t) {
  if (!t) return;
  td_tensor *c = td_tensor_contiguous(t);
  td_tensor_release(c);
  td_tensor_release(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  snprintf(path, sizeof path, "%s/a.npy", fuzz_dir());
  fuzz_write(path, data, size);
  td_npy_header h;
  (void)td_npy_parse_header((const char *)data, (int64_t)size, &h);
  touch(td_npy_load(path, 0));
  touch(td_npy_load(path, 1));
  char names[4096];
  const int64_t n = td_npz_names(path, names, sizeof names);
  if (n > 0 && n < (int64_t)sizeof names) {
    for (char *key = names, *end; (end = strchr(key, '\n')); key = end + 1) {
      *end = '\0';
      touch(td_npz_read(path, key));
    }
  }
  return 0;
}
