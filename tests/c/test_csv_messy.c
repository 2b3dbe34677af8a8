/* test_csv_messy.c: the CSV reader's options for messy files (td_csv_open_opts): NA
 * texts (numeric ones too), column defaults, the three on_bad_cell modes and their
 * counts, record limits, comment lines and tails, skipped lines (the header's
 * included), gzip input (whole, cut short) and the options' checks. Tiny read buffers
 * (records across the buffer's end) are tests/fuzz/fuzz_csv.c's: the buffer size is
 * not in the ABI. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"

static char dir[] = "/tmp/td_test_csv_messy_XXXXXX";

static const char *write_file(const char *name, const char *text, size_t len) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  fwrite(text, 1, len, f);
  fclose(f);
  return path;
}
#define WRITE(name, text) write_file(name, text, sizeof(text) - 1)

/* text gzip-compressed into dir/name (keep: bytes of the compressed file kept, 0: all). */
static const char *write_gz(const char *name, const char *text, long keep) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  gzFile g = gzopen(path, "wb");
  gzwrite(g, text, (unsigned)strlen(text));
  gzclose(g);
  if (keep > 0 && truncate(path, keep) != 0) perror("truncate");
  return path;
}

static td_tensor *vec(int64_t n, int32_t dtype) { return td_tensor_full(1, &n, dtype, -99); }
static double F64(const td_tensor *t, int64_t i) { return ((const double *)td_tensor_data_borrow(t))[i]; }
static int64_t I64(const td_tensor *t, int64_t i) { return ((const int64_t *)td_tensor_data_borrow(t))[i]; }

static const char *const NA[] = {"", "NA", "NaN", "nan", "null"};

static td_csv_options opts(int32_t on_bad) {
  return (td_csv_options){.delimiter = ',', .has_header = 1, .on_bad_cell = on_bad, .n_na = 5, .na_values = NA};
}

/* Reads columns 0 (float64) and 1 (int64) of r: the rows stored. */
static int64_t read2(td_csv *r, int64_t max, td_tensor *x, td_tensor *n) {
  int32_t cols[2] = {0, 1};
  int64_t ocols[2] = {0, 0};
  td_tensor *outs[2] = {x, n};
  return td_csv_read(r, max, 2, cols, outs, ocols);
}

static void test_na_and_defaults(void) {
  const char *p = WRITE("na.csv", "x,n\n1.5,1\nNA,2\n,null\n nan ,4\n-999,5\n");
  td_csv_options o = opts(TD_CSV_BAD_ERROR);
  td_csv *r = td_csv_open_opts(p, &o);
  CHECK(r != NULL);
  td_tensor *x = vec(8, TD_FLOAT64), *n = vec(8, TD_INT64);
  CHECK_EQ_I(read2(r, 8, x, n), TD_EINVAL); /* the missing int at line 4 */
  CHECK_ERROR("na.csv: line 4, column 2 ('n'): cannot parse 'null' as int64: a missing value in an integer "
              "column without a default (give it a default, or skip such rows)");
  td_csv_close(r);
  r = td_csv_open_opts(p, &o);
  CHECK_EQ_I(td_csv_set_default(r, 1, "-1"), TD_OK);
  CHECK_EQ_I(read2(r, 8, x, n), 5);
  CHECK(F64(x, 0) == 1.5 && isnan(F64(x, 1)) && isnan(F64(x, 2)) && isnan(F64(x, 3)) && F64(x, 4) == -999);
  CHECK(I64(n, 2) == -1 && I64(n, 4) == 5);
  int64_t c[TD_CSV_NCOUNTS];
  CHECK_EQ_I(td_csv_counts(r, c), TD_OK);
  CHECK(c[TD_CSV_COUNT_RECORDS] == 5 && c[TD_CSV_COUNT_MISSING] == 4 && c[TD_CSV_COUNT_REPLACED] == 0 &&
        c[TD_CSV_COUNT_SKIPPED_ROWS] == 0);
  td_csv_close(r);
  /* a numeric NA text is looked for before parsing; a default fills float columns too */
  const char *const sentinel[] = {"-999"};
  o.na_values = sentinel, o.n_na = 1;
  r = td_csv_open_opts(p, &o);
  CHECK_EQ_I(td_csv_set_default(r, 0, "0.25"), TD_OK);
  CHECK_EQ_I(read2(r, 8, x, n), TD_EINVAL);
  CHECK_ERROR("line 3, column 1 ('x'): cannot parse 'NA' as float64");
  td_csv_close(r);
  p = WRITE("sentinel.csv", "x,n\n-999,1\n2,2\n");
  r = td_csv_open_opts(p, &o);
  CHECK_EQ_I(td_csv_set_default(r, 0, "0.25"), TD_OK);
  CHECK_EQ_I(read2(r, 8, x, n), 2);
  CHECK(F64(x, 0) == 0.25 && F64(x, 1) == 2);
  CHECK_EQ_I(td_csv_set_default(r, 2, "1"), TD_EINDEX);
  CHECK_ERROR("csv_set_default: column 3 is out of range (the file has 2 columns)");
  td_csv_close(r);
  td_tensor_release(x);
  td_tensor_release(n);
}

static void test_bad_cells(void) {
  const char *p = WRITE("bad.csv", "x,n\n1,1\nx1,2\n3,y\n4,4\n5,300000000000000000000\n");
  td_tensor *x = vec(8, TD_FLOAT64), *n = vec(8, TD_INT64);
  td_csv_options o = opts(TD_CSV_BAD_MISSING);
  td_csv *r = td_csv_open_opts(p, &o);
  CHECK_EQ_I(td_csv_set_default(r, 1, "0"), TD_OK);
  CHECK_EQ_I(read2(r, 8, x, n), 5);
  CHECK(isnan(F64(x, 1)) && I64(n, 2) == 0 && I64(n, 4) == 0 && F64(x, 3) == 4);
  int64_t c[TD_CSV_NCOUNTS];
  td_csv_counts(r, c);
  CHECK(c[TD_CSV_COUNT_REPLACED] == 3 && c[TD_CSV_COUNT_MISSING] == 0);
  td_csv_close(r);
  o = opts(TD_CSV_BAD_SKIP_ROW);
  r = td_csv_open_opts(p, &o);
  CHECK_EQ_I(read2(r, 2, x, n), 2); /* a batch is filled past a dropped row */
  CHECK(F64(x, 0) == 1 && F64(x, 1) == 4 && I64(n, 1) == 4);
  CHECK_EQ_I(read2(r, 2, x, n), 0);
  td_csv_counts(r, c);
  CHECK(c[TD_CSV_COUNT_RECORDS] == 5 && c[TD_CSV_COUNT_SKIPPED_ROWS] == 3);
  td_csv_close(r);
  /* a limit of records counts the dropped ones */
  r = td_csv_open_opts(p, &o);
  CHECK_EQ_I(td_csv_limit_records(r, 3), TD_OK);
  CHECK_EQ_I(read2(r, 8, x, n), 1);
  CHECK_EQ_I(read2(r, 8, x, n), 0);
  td_csv_close(r);
  o = opts(TD_CSV_BAD_ERROR);
  r = td_csv_open_opts(p, &o);
  CHECK_EQ_I(read2(r, 8, x, n), TD_EINVAL);
  CHECK_ERROR("bad.csv: line 3, column 1 ('x'): cannot parse 'x1' as float64");
  td_csv_close(r);
  td_tensor_release(x);
  td_tensor_release(n);
}

/* Comments and skipped lines. */
static void test_comments_and_skips(void) {
  const char *p = WRITE("c.csv", "# head\nx,n\n1,1 # one\n#\n\"2#\",2\n3,3#\n4,4\n");
  td_tensor *x = vec(8, TD_FLOAT64), *n = vec(8, TD_INT64);
  {
    td_csv_options o = opts(TD_CSV_BAD_ERROR);
    o.comment = '#';
    td_csv *r = td_csv_open_opts(p, &o);
    CHECK(r != NULL && strcmp(td_csv_column_name_borrow(r, 1), "n") == 0);
    CHECK_EQ_I(td_csv_count_rows(r), 4);
    CHECK_EQ_I(read2(r, 8, x, n), TD_EINVAL); /* "2#" is quoted: text, not a comment */
    CHECK_ERROR("c.csv: line 5, column 1 ('x'): cannot parse '2#' as float64");
    td_csv_close(r);
    const int64_t lines[] = {5, 2};
    o.skip_lines = lines, o.n_skip_lines = 2; /* the header's line too: the next record names */
    r = td_csv_open_opts(p, &o);
    CHECK(r != NULL && strcmp(td_csv_column_name_borrow(r, 0), "1") == 0);
    CHECK_EQ_I(td_csv_count_rows(r), 2);
    CHECK_EQ_I(read2(r, 8, x, n), 2);
    CHECK(F64(x, 0) == 3 && I64(n, 1) == 4);
    td_csv_close(r);
  }
  td_tensor_release(x);
  td_tensor_release(n);
}

static void test_gzip(void) {
  char text[40000] = "x,n\n";
  for (int i = 0; i < 2000; i++) snprintf(text + strlen(text), sizeof text - strlen(text), "%d.5,%d\n", i, i);
  td_tensor *x = vec(4096, TD_FLOAT64), *n = vec(4096, TD_INT64);
  const char *p = write_gz("d.csv.gz", text, 0);
  td_csv_options o = opts(TD_CSV_BAD_ERROR);
  td_csv *r = td_csv_open_opts(p, &o);
  CHECK(r != NULL);
  CHECK_EQ_I(td_csv_count_rows(r), 2000);
  CHECK_EQ_I(td_csv_skip_rows(r, 10), 10);
  CHECK_EQ_I(read2(r, 4096, x, n), 1990);
  CHECK(F64(x, 0) == 10.5 && I64(n, 1989) == 1999);
  td_csv_close(r);
  p = write_gz("cut.csv.gz", text, 900);
  r = td_csv_open_opts(p, &o);
  CHECK(r != NULL);
  CHECK(read2(r, 4096, x, n) == TD_EIO);
  CHECK_ERROR("cut.csv.gz: the gzip stream is corrupt or cut short near line");
  td_csv_close(r);
  td_tensor_release(x);
  td_tensor_release(n);
}

static void test_option_checks(void) {
  const char *p = WRITE("ok.csv", "a\n1\n");
  td_csv_options o = opts(TD_CSV_BAD_ERROR);
  o.comment = ',';
  CHECK(td_csv_open_opts(p, &o) == NULL);
  CHECK_ERROR("csv_open: the comment character must be one ASCII character other than a quote, a line end or "
              "the delimiter, got code 44");
  o = opts(7);
  CHECK(td_csv_open_opts(p, &o) == NULL);
  CHECK_ERROR("csv_open: on_bad_cell 7 is not one of TD_CSV_BAD_*");
  o = opts(TD_CSV_BAD_ERROR);
  o.na_values = NULL;
  CHECK(td_csv_open_opts(p, &o) == NULL);
  CHECK_ERROR("csv_open: a count of NA values or skipped lines without its array");
  CHECK(td_csv_open_opts(p, NULL) == NULL);
  CHECK_ERROR("csv_open: the options are NULL");
  CHECK(td_csv_counts(NULL, NULL) == TD_EINVAL);
  CHECK(td_csv_limit_records(NULL, 1) == TD_EINVAL);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_na_and_defaults();
  test_bad_cells();
  test_comments_and_skips();
  test_gzip();
  test_option_checks();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  CHECK_SUMMARY();
}
