/* fuzz_ship.c: the shipping format's readers on fuzzed regions: td_ship_unpack (a whole
 * region: structure then data, the Map workers' transport) and td_ship_unpack_meta (a
 * structure whose leaves' bytes arrive apart, tensordict.dist's transport: what a rank
 * unpacks from a peer's message). The first byte picks the reader; every container
 * unpacked is read in full. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int whole = data[0] & 1;
  data++;
  size--;
  td_storage *region = td_storage_new_heap((int64_t)size);
  if (!region) return 0;
  if (size) memcpy(td_storage_data_borrow(region), data, size);
  td_dict *d = NULL;
  if (whole) {
    d = td_ship_unpack(region, NULL);
  } else {
    int64_t bytes = td_ship_data_bytes(region);
    if (bytes >= 0 && bytes <= ((int64_t)1 << 20)) { /* a sane size to allocate */
      td_storage *leaves = td_storage_new_heap(bytes > 0 ? bytes : 1);
      if (leaves) {
        memset(td_storage_data_borrow(leaves), 0x5a, (size_t)(bytes > 0 ? bytes : 1));
        d = td_ship_unpack_meta(region, leaves);
        td_storage_release(leaves);
        if (d && td_ship_check(d) < 0) { /* what a receiver checks once the bytes are in */
          td_dict_release(d);
          d = NULL;
        }
      }
    }
  }
  if (d) {
    fuzz_touch(d);
    td_dict_release(d);
  }
  td_storage_release(region);
  return 0;
}
