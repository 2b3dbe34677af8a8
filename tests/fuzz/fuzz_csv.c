/* fuzz_csv.c: the CSV reader (core/store/csv.c, flow.CsvSource) on fuzzed files.
 *
 * The first 4 bytes choose how the file is read, the rest is the file:
 *   byte 0: bits 0-1 the delimiter (',' ';' tab '|'), bit 2 a header, bit 3 every column
 *           into one 2-D tensor (else a 1-D tensor per column), bits 4-5 on_bad_cell
 *           (error, missing, skip_row; 3: error), bit 6 '#' comments, bit 7 the messy
 *           options: NA texts (one a number), lines 2 and 4 skipped, column 1's default
 *   byte 1: the reader's buffer size, 8..512 bytes (td_csv_block_bytes), so that records
 *           cross the buffer's end in small inputs as they do past 1 MiB in real files
 *   byte 2: rows per read (low 4 bits + 1), rows skipped first (high 4 bits)
 *   byte 3: the dtypes, column k's being dtype (byte 3 + k) of every dtype
 * The file may be gzip (its magic bytes after the 4): the reader inflates it as it goes.
 * Every column is read; the reader's counts must agree with each other: rows skipped
 * plus records read equal count_rows whenever every call succeeded, and records read
 * are the rows stored plus the rows dropped. */
#include "fuzz_util.h"
#include "../../core/store/store_internal.h"

enum { MAX_COLS = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  static const char delims[] = {',', ';', '\t', '|'};
  const int32_t delim = delims[data[0] & 3], header = (data[0] >> 2) & 1, one_2d = (data[0] >> 3) & 1;
  td_csv_block_bytes = (int64_t)(data[1] % 64 + 1) * 8;
  const int64_t run = (data[2] & 15) + 1, skip = data[2] >> 4;
  char path[512];
  snprintf(path, sizeof path, "%s/in.csv", fuzz_dir());
  fuzz_write(path, data + 4, size - 4);

  static const char *const na[] = {"", "NA", "nan", "-1"};
  static const int64_t skip_lines[] = {4, 2};
  const int32_t messy = data[0] >> 7;
  td_csv_options o = {.delimiter = delim, .has_header = header, .comment = (data[0] >> 6) & 1 ? '#' : 0,
                      .on_bad_cell = ((data[0] >> 4) & 3) % 3, .n_na = messy ? 4 : 0, .na_values = na,
                      .n_skip_lines = messy ? 2 : 0, .skip_lines = skip_lines};
  if (o.comment == delim) o.comment = 0;
  td_csv *r = td_csv_open_opts(path, &o);
  if (!r) return 0;
  if (messy && td_csv_num_columns(r) > 0 && td_csv_set_default(r, 0, "7") != TD_OK) abort();
  const int32_t ncols = td_csv_num_columns(r);
  for (int32_t c = 0; c < ncols; c++) {
    const char *name = td_csv_column_name_borrow(r, c);
    if (header && (!name || strlen(name) == (size_t)-1)) abort();
  }
  const int64_t total = td_csv_count_rows(r);
  int64_t done = total >= 0 ? td_csv_skip_rows(r, skip) : -1;
  const int32_t n = ncols < MAX_COLS ? ncols : MAX_COLS;
  if (done >= 0 && n > 0) {
    int32_t cols[MAX_COLS];
    int64_t out_cols[MAX_COLS];
    td_tensor *outs[MAX_COLS] = {0};
    for (int32_t c = 0; c < n; c++) {
      cols[c] = c;
      out_cols[c] = c;
      int32_t dtype = (data[3] + (one_2d ? 0 : c)) % TD_NUM_DTYPES;
      if (one_2d && c > 0) {
        outs[c] = outs[0];
        td_tensor_retain(outs[c]);
      } else {
        outs[c] = one_2d ? td_tensor_empty(2, (int64_t[]){run, n}, dtype)
                         : td_tensor_empty(1, (int64_t[]){run}, dtype);
      }
      if (!outs[c]) abort();
    }
    int64_t stored = 0;
    for (;;) {
      int64_t got = td_csv_read(r, run, n, cols, outs, one_2d ? out_cols : NULL);
      if (got < 0) {
        done = -1;
        break;
      }
      if (got == 0) break;
      if (got > run) abort();
      stored += got;
      td_tensor *c = td_tensor_contiguous(outs[0]); /* read what was written */
      td_tensor_release(c);
    }
    for (int32_t c = 0; c < n; c++) td_tensor_release(outs[c]);
    int64_t counts[TD_CSV_NCOUNTS];
    if (td_csv_counts(r, counts) != TD_OK) abort();
    if (done >= 0 && (done + counts[TD_CSV_COUNT_RECORDS] != total ||
                      stored + counts[TD_CSV_COUNT_SKIPPED_ROWS] != counts[TD_CSV_COUNT_RECORDS]))
      abort();
  }
  td_csv_close(r);
  return 0;
}
