/* fuzz_index.c: the index grammar (td_tensor_index) on a small tensor whose shape and
 * strides (a transposed or expanded view) come from the input too. A view that
 * succeeds is read in full, so a wrong offset or stride shows as an ASan read. */
#include "fuzz_util.h"

static int64_t take(const uint8_t **p, const uint8_t *end, int bytes) {
  uint64_t v = 0; /* unsigned: the shifts wrap, as the bytes mean them to */
  for (int i = 0; i < bytes; i++) v = (v << 8) | (*p < end ? *(*p)++ : 0);
  return (int64_t)v;
}

/* Small values mostly (-128..127), and sometimes any int64 (the bounds, huge steps). */
static int64_t number(const uint8_t **p, const uint8_t *end) {
  if (take(p, end, 1) < 224) return (int8_t)take(p, end, 1);
  return (int64_t)take(p, end, 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *p = data, *end = data + size;
  int32_t ndim = (int32_t)(take(&p, end, 1) % 5);
  int64_t shape[4];
  for (int32_t i = 0; i < ndim; i++) shape[i] = take(&p, end, 1) % 6;
  td_tensor *t = td_tensor_full(ndim, shape, TD_FLOAT32, 1.0);
  if (!t) return 0;
  td_tensor base = *t, view;
  base.refcount = 0;
  if (ndim >= 2 && (take(&p, end, 1) & 1) && td_tensor_transpose(t, 0, ndim - 1, &view) == 0)
    base = view;
  td_index entries[9];
  int32_t n = (int32_t)(take(&p, end, 1) % 10);
  for (int32_t i = 0; i < n; i++) {
    entries[i].kind = (int32_t)(take(&p, end, 1) % 4);
    entries[i].start = number(&p, end);
    entries[i].stop = number(&p, end);
    entries[i].step = number(&p, end);
  }
  if (td_tensor_index(&base, entries, n, &view) == 0) {
    td_tensor *c = td_tensor_contiguous(&view);
    td_tensor_release(c);
  }
  td_tensor_release(t);
  return 0;
}
