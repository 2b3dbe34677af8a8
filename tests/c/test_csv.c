/* test_csv.c: the CSV reader (core/store/csv.c): headers, quotes, line ends, column
 * destinations of several dtypes, records across the 1 MiB read blocks, a record longer
 * than the buffer, row counts, and the error messages for bad cells and bad files. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static char dir[] = "/tmp/td_test_csv_XXXXXX";

static const char *write_file(const char *name, const char *text, size_t len) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  fwrite(text, 1, len, f);
  fclose(f);
  return path;
}
#define WRITE(name, text) write_file(name, text, sizeof(text) - 1)

static td_tensor *vec(int64_t n, int32_t dtype) { return td_tensor_full(1, &n, dtype, -99); }
static float F32(const td_tensor *t, int64_t i) {
  return ((const float *)td_tensor_data_borrow(t))[i];
}
static int64_t I64(const td_tensor *t, int64_t i) {
  return ((const int64_t *)td_tensor_data_borrow(t))[i];
}

static void test_basic(void) {
  const char *p = WRITE("basic.csv", "a, b ,\"c,d\"\n1,2,3\r\n4.5,\"-6\",7e2\n\n8,  9  ,1e-3");
  td_csv *r = td_csv_open(p, ',', 1);
  CHECK(r != NULL);
  CHECK_EQ_I(td_csv_num_columns(r), 3);
  CHECK(strcmp(td_csv_column_name_borrow(r, 0), "a") == 0);
  CHECK(strcmp(td_csv_column_name_borrow(r, 1), "b") == 0);
  CHECK(strcmp(td_csv_column_name_borrow(r, 2), "c,d") == 0);
  CHECK(td_csv_column_name_borrow(r, 3) == NULL);
  CHECK_EQ_I(td_csv_count_rows(r), 3);
  td_tensor *a = vec(2, TD_FLOAT32), *b = vec(2, TD_INT64);
  int64_t shape[2] = {2, 2};
  td_tensor *g = td_tensor_full(2, shape, TD_FLOAT64, -99);
  td_tensor *outs[4] = {a, b, g, g};
  int32_t cols[4] = {0, 1, 2, 0};
  int64_t ocols[4] = {0, 0, 0, 1};
  CHECK_EQ_I(td_csv_read(r, 2, 4, cols, outs, ocols), 2);
  CHECK(F32(a, 0) == 1 && F32(a, 1) == 4.5f);
  CHECK(I64(b, 0) == 2 && I64(b, 1) == -6);
  const double *gd = td_tensor_data_borrow(g);
  CHECK(gd[0] == 3 && gd[1] == 1 && gd[2] == 700 && gd[3] == 4.5);
  CHECK_EQ_I(td_csv_read(r, 2, 4, cols, outs, ocols), 1);
  CHECK(F32(a, 0) == 8 && I64(b, 0) == 9 && gd[0] == 1e-3);
  CHECK_EQ_I(td_csv_read(r, 2, 4, cols, outs, ocols), 0);
  td_csv_close(r);
  td_tensor_release(a);
  td_tensor_release(b);
  td_tensor_release(g);
}

/* Skipping rows (a rank's share under mpirun): records, not lines; cells unparsed. */
static void test_skip(void) {
  const char *p = WRITE("skip.csv", "id,note\n1,\"a\nb\"\n2,x\nbad,\"c,\r\nd\"\n4,y\n");
  td_csv *r = td_csv_open(p, ',', 1);
  CHECK(r != NULL);
  CHECK_EQ_I(td_csv_skip_rows(r, 0), 0);
  CHECK_EQ_I(td_csv_skip_rows(r, 3), 3); /* "bad" is skipped, never parsed */
  td_tensor *a = vec(4, TD_INT64);
  td_tensor *outs[1] = {a};
  int32_t cols[1] = {0};
  int64_t ocols[1] = {0};
  CHECK_EQ_I(td_csv_read(r, 4, 1, cols, outs, ocols), 1);
  CHECK(I64(a, 0) == 4);
  CHECK_EQ_I(td_csv_skip_rows(r, 5), 0); /* at the end */
  CHECK(td_csv_skip_rows(r, -1) < 0);
  CHECK_ERROR("negative");
  CHECK(td_csv_skip_rows(NULL, 1) < 0);
  td_csv_close(r);
  r = td_csv_open(p, ',', 1);
  CHECK_EQ_I(td_csv_skip_rows(r, 10), 4); /* fewer than asked */
  td_csv_close(r);
  td_tensor_release(a);
}

static void test_quotes_and_line_ends(void) {
  /* A quoted header spanning two lines, doubled quotes, a lone \r, a BOM. */
  const char *p =
      WRITE("quotes.csv", "\xEF\xBB\xBFx,\"two\nlines \"\"q\"\"\"\r\"1\",2\r3,\"4\"\r\n");
  td_csv *r = td_csv_open(p, ',', 1);
  CHECK(r != NULL);
  CHECK(strcmp(td_csv_column_name_borrow(r, 0), "x") == 0);
  CHECK(strcmp(td_csv_column_name_borrow(r, 1), "two\nlines \"q\"") == 0);
  td_tensor *x = vec(4, TD_INT32), *y = vec(4, TD_FLOAT32);
  td_tensor *outs[2] = {x, y};
  int32_t cols[2] = {0, 1};
  int64_t ocols[2] = {0, 0};
  CHECK_EQ_I(td_csv_read(r, 4, 2, cols, outs, ocols), 2);
  const int32_t *xd = td_tensor_data_borrow(x);
  CHECK(xd[0] == 1 && xd[1] == 3 && F32(y, 0) == 2 && F32(y, 1) == 4);
  td_csv_close(r);
  /* Without a header, tab-delimited, no final line end. */
  p = WRITE("tabs.tsv", "1\t2\n3\t4");
  r = td_csv_open(p, '\t', 0);
  CHECK_EQ_I(td_csv_num_columns(r), 2);
  CHECK(td_csv_column_name_borrow(r, 0) == NULL);
  CHECK_EQ_I(td_csv_count_rows(r), 2);
  CHECK_EQ_I(td_csv_read(r, 4, 2, cols, outs, ocols), 2);
  CHECK(xd[0] == 1 && xd[1] == 3 && F32(y, 1) == 4);
  td_csv_close(r);
  td_tensor_release(x);
  td_tensor_release(y);
}

static void test_empty(void) {
  const char *p = WRITE("empty.csv", "");
  td_csv *r = td_csv_open(p, ',', 1);
  CHECK(r != NULL);
  CHECK_EQ_I(td_csv_num_columns(r), 0);
  CHECK_EQ_I(td_csv_count_rows(r), 0);
  CHECK_EQ_I(td_csv_read(r, 10, 0, NULL, NULL, NULL), 0);
  td_csv_close(r);
  p = WRITE("header_only.csv", "a,b\r\n");
  r = td_csv_open(p, ',', 1);
  CHECK_EQ_I(td_csv_num_columns(r), 2);
  CHECK_EQ_I(td_csv_count_rows(r), 0);
  CHECK_EQ_I(td_csv_read(r, 10, 0, NULL, NULL, NULL), 0);
  td_csv_close(r);
}

/* Many rows across read blocks, then one record longer than the first buffer. */
static void test_large(void) {
  const int64_t n = 200000;
  size_t cap = (size_t)n * 40 + (3u << 20);
  char *text = malloc(cap);
  size_t len = (size_t)sprintf(text, "i,v,s\n");
  for (int64_t i = 0; i < n; i++)
    len += (size_t)sprintf(text + len, "%lld,%.6f,\"t\"\"%lld\"\n", (long long)i, i * 0.25,
                           (long long)i);
  len += (size_t)sprintf(text + len, "%lld,1.5,\"", (long long)n);
  memset(text + len, 'z', 2u << 20);
  len += 2u << 20;
  len += (size_t)sprintf(text + len, "\"\n");
  const char *p = write_file("large.csv", text, len);
  free(text);
  td_csv *r = td_csv_open(p, ',', 1);
  CHECK_EQ_I(td_csv_count_rows(r), n + 1);
  td_tensor *iv = vec(4096, TD_INT64), *v = vec(4096, TD_FLOAT64);
  td_tensor *outs[2] = {iv, v};
  int32_t cols[2] = {0, 1};
  int64_t ocols[2] = {0, 0}, total = 0, bad = 0, got;
  while ((got = td_csv_read(r, 4096, 2, cols, outs, ocols)) > 0) {
    const double *vd = td_tensor_data_borrow(v);
    for (int64_t k = 0; k < got; k++) {
      int64_t i = total + k;
      if (I64(iv, k) != i || vd[k] != (i == n ? 1.5 : i * 0.25)) bad++;
    }
    total += got;
  }
  CHECK_EQ_I(got, 0);
  CHECK_EQ_I(total, n + 1);
  CHECK_EQ_I(bad, 0);
  td_csv_close(r);
  td_tensor_release(iv);
  td_tensor_release(v);
}

static void test_errors(void) {
  const char *p = WRITE("bad.csv", "a,b\n1,2\n3,\"x y\"\n");
  td_csv *r = td_csv_open(p, ',', 1);
  td_tensor *a = vec(4, TD_FLOAT32), *b = vec(4, TD_FLOAT32);
  td_tensor *outs[2] = {a, b};
  int32_t cols[2] = {0, 1};
  int64_t ocols[2] = {0, 0};
  CHECK(td_csv_read(r, 4, 2, cols, outs, ocols) == TD_EINVAL);
  CHECK_ERROR("bad.csv: line 3, column 2 ('b'): cannot parse 'x y' as float32");
  td_csv_close(r);

  p = WRITE("badint.csv", "n\n1\n2.5\n");
  r = td_csv_open(p, ',', 1);
  td_tensor *n = vec(4, TD_INT64), *n8 = vec(4, TD_INT8);
  td_tensor *o1[1] = {n}, *o8[1] = {n8};
  CHECK(td_csv_read(r, 4, 1, cols, o1, ocols) == TD_EINVAL);
  CHECK_ERROR("line 3, column 1 ('n'): cannot parse '2.5' as int64");
  td_csv_close(r);
  p = WRITE("range.csv", "100\n300\n");
  r = td_csv_open(p, ',', 0);
  CHECK(td_csv_read(r, 4, 1, cols, o8, ocols) == TD_EINVAL);
  CHECK_ERROR("line 2, column 1: cannot parse '300' as int8 (out of range)");
  td_csv_close(r);
  p = WRITE("empty_cell.csv", "a,b\n1,\n");
  r = td_csv_open(p, ',', 1);
  CHECK(td_csv_read(r, 4, 2, cols, outs, ocols) == TD_EINVAL);
  CHECK_ERROR("line 2, column 2 ('b'): cannot parse '' as float32");
  td_csv_close(r);

  p = WRITE("ragged.csv", "a,b\n1,2\n3\n");
  r = td_csv_open(p, ',', 1);
  CHECK(td_csv_read(r, 4, 2, cols, outs, ocols) == TD_EINVAL);
  CHECK_ERROR("ragged.csv: line 3 has 1 fields, expected 2 (as in the header)");
  td_csv_close(r);

  p = WRITE("open.csv", "a\n\"1\n2\n");
  r = td_csv_open(p, ',', 1);
  CHECK(td_csv_read(r, 4, 1, cols, outs, ocols) == TD_EINVAL);
  CHECK_ERROR("line 2: a quoted field is not closed before the end of the file");
  CHECK(td_csv_count_rows(r) == TD_EINVAL);
  td_csv_close(r);

  p = WRITE("after.csv", "a\n\"1\"x\n");
  r = td_csv_open(p, ',', 1);
  CHECK(td_csv_read(r, 4, 1, cols, outs, ocols) == TD_EINVAL);
  CHECK_ERROR("line 2, column 1: unexpected 'x' after a closing quote");
  td_csv_close(r);

  CHECK(td_csv_open("/nonexistent/x.csv", ',', 1) == NULL);
  CHECK_ERROR("csv_open: cannot open '/nonexistent/x.csv': No such file or directory");
  CHECK(td_csv_open(p, '"', 1) == NULL);
  CHECK_ERROR("the delimiter must be one ASCII character");

  p = WRITE("ok.csv", "a,b\n1,2\n");
  r = td_csv_open(p, ',', 1);
  int32_t far[1] = {5};
  CHECK(td_csv_read(r, 4, 1, far, outs, ocols) == TD_EINDEX);
  CHECK_ERROR("column 6 is out of range (the file has 2 columns)");
  CHECK(td_csv_read(r, 5, 1, cols, outs, ocols) == TD_ESHAPE);
  CHECK_ERROR("destination 0 needs 1 or 2 dims and at least 5 rows");
  td_tensor *bl = vec(4, TD_BOOL), *ob[1] = {bl};
  CHECK(td_csv_read(r, 4, 1, cols, ob, ocols) == TD_EDTYPE);
  td_csv_close(r);
  td_tensor *all[] = {a, b, n, n8, bl};
  for (int i = 0; i < 5; i++) td_tensor_release(all[i]);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_basic();
  test_quotes_and_line_ends();
  test_empty();
  test_large();
  test_errors();
  test_skip();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  CHECK_SUMMARY();
}
