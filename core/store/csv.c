/*
 * csv.c: a streaming reader of numeric CSV (RFC 4180) for flow.CsvSource.
 *
 * The file is read with read() in blocks of 1 MiB into one buffer; a record that
 * straddles the end of the buffer is parsed again once the buffer has been refilled
 * (the unread tail moved to the front, the buffer doubled when one record fills it).
 * Parsing a record yields field spans (offsets into the buffer); td_csv_read then turns
 * the requested fields into numbers and stores them into the callers' tensors.
 *
 * Accepted: fields quoted with '"' (a doubled "" inside is a quote; delimiters and line
 * ends inside quotes are data), line ends \n, \r\n and a lone \r, a UTF-8 byte order
 * mark, blank lines (skipped), records up to 256 MiB. Numbers may have spaces or tabs
 * around them; they are parsed exactly whatever the locale (core/src/number.c),
 * integers with a range check for the destination dtype.
 *
 * It lives on the store floor with the other file formats: it reads a file into the
 * caller's tensors, and nothing below it reads files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtype_table.h"
#include "store_internal.h"

/* CSV_MAX_RECORD: a record (one row, quotes and all) longer than this is refused: the
 * buffer doubles while a record does not fit, and a file that is no CSV (/dev/zero, a
 * binary file without line ends) would otherwise grow it until the machine runs out of
 * memory (issue 28). */
enum { CSV_BLOCK = 1 << 20, CSV_SHOW = 48, CSV_MAX_RECORD = 1 << 28 };

/* The first buffer's size (store_internal.h). */
int64_t td_csv_block_bytes = CSV_BLOCK;

typedef struct csv_span {
  int64_t off, len; /* in the buffer; a quoted field's text without its outer quotes */
  int64_t line;     /* where the field starts */
  int32_t quoted;
} csv_span;

struct td_csv {
  int fd;
  char *path;
  char delim;
  int32_t has_header;
  char *buf;
  int64_t cap, pos, end; /* unread data is buf[pos, end) */
  int32_t eof;
  int64_t line; /* line number of buf[pos], 1-based */
  int32_t ncols;
  char **names; /* ncols names, or NULL without a header */
  csv_span *spans;
  int32_t nspans, span_cap;
  int64_t rec_line; /* first line of the last record parsed */
};

/* ---- buffer --------------------------------------------------------------------- */

static int32_t refill(td_csv *r) {
  if (r->pos > 0) {
    memmove(r->buf, r->buf + r->pos, (size_t)(r->end - r->pos));
    r->end -= r->pos;
    r->pos = 0;
  }
  if (r->end == r->cap) {
    if (r->cap >= CSV_MAX_RECORD)
      return td_fail(TD_EINVAL,
                     "csv: %s: line %lld starts a record of more than %lld bytes (%d MiB): not a CSV "
                     "file, or a quote left open",
                     r->path, (long long)r->line, (long long)r->cap, CSV_MAX_RECORD >> 20);
    char *nb = realloc(r->buf, (size_t)r->cap * 2);
    if (!nb)
      return td_fail(TD_ENOMEM, "csv: %s: out of memory for a record over %lld bytes", r->path,
                     (long long)r->cap);
    r->buf = nb;
    r->cap *= 2;
  }
  for (;;) {
    ssize_t n = read(r->fd, r->buf + r->end, (size_t)(r->cap - r->end));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return td_fail(TD_EIO, "csv: %s: read failed: %s", r->path, strerror(errno));
    if (n == 0) r->eof = 1;
    r->end += n;
    return TD_OK;
  }
}

static int32_t add_span(td_csv *r, int64_t off, int64_t len, int64_t line, int32_t quoted) {
  if (r->nspans == r->span_cap) {
    int32_t cap = r->span_cap ? r->span_cap * 2 : 64;
    csv_span *ns = realloc(r->spans, (size_t)cap * sizeof *ns);
    if (!ns) return td_fail(TD_ENOMEM, "csv: %s: out of memory", r->path);
    r->spans = ns;
    r->span_cap = cap;
  }
  r->spans[r->nspans++] = (csv_span){off, len, line, quoted};
  return TD_OK;
}

/* ---- records -------------------------------------------------------------------- */

enum { REC_OK = 1, REC_MORE = 0, REC_END = 2 };

/* Parses the record at r->pos into r->spans without consuming it. Returns REC_OK (with
 * *next and *next_line where the following record starts), REC_MORE (the buffer ends
 * inside the record and more data may come), REC_END (no record left), or a TD_E*
 * code. Blank lines before the record are skipped. */
static int32_t parse_record(td_csv *r, int64_t *next, int64_t *next_line) {
  const char *b = r->buf, d = r->delim;
  int64_t p = r->pos, e = r->end, line = r->line;
  /* Blank lines (and a lone line end) are not records. */
  for (;;) {
    if (p == e) return r->eof ? REC_END : REC_MORE;
    if (b[p] == '\n') {
      p++, line++;
    } else if (b[p] == '\r') {
      if (p + 1 == e && !r->eof) return REC_MORE;
      p += (p + 1 < e && b[p + 1] == '\n') ? 2 : 1;
      line++;
    } else {
      break;
    }
  }
  r->nspans = 0;
  r->rec_line = line;
  for (;;) { /* one field per turn */
    int64_t fline = line;
    if (p < e && b[p] == '"') {
      int64_t start = ++p;
      for (;;) {
        const char *q = memchr(b + p, '"', (size_t)(e - p));
        if (!q) {
          if (!r->eof) return REC_MORE;
          return td_fail(
              TD_EINVAL,
              "csv: %s: line %lld: a quoted field is not closed before the end of the file",
              r->path, (long long)fline);
        }
        for (const char *c = b + p; c < q; c++) /* line ends inside the quotes */
          if (*c == '\n' || (*c == '\r' && !(c + 1 < q && c[1] == '\n'))) line++;
        p = q - b + 1;
        if (p == e && !r->eof) return REC_MORE;
        if (p < e && b[p] == '"') { /* a doubled quote: data */
          p++;
          continue;
        }
        break;
      }
      int32_t st = add_span(r, start, p - 1 - start, fline, 1);
      if (st) return st;
      if (p < e && b[p] != d && b[p] != '\n' && b[p] != '\r')
        return td_fail(TD_EINVAL,
                       "csv: %s: line %lld, column %d: unexpected '%c' after a closing quote",
                       r->path, (long long)line, (int)r->nspans, b[p]);
    } else {
      int64_t start = p;
      while (p < e && b[p] != d && b[p] != '\n' && b[p] != '\r') p++;
      if (p == e && !r->eof) return REC_MORE;
      int32_t st = add_span(r, start, p - start, fline, 0);
      if (st) return st;
    }
    if (p == e) break; /* end of file ends the record */
    if (b[p] == d) {
      p++;
      continue;
    }
    if (b[p] == '\r') { /* \r\n or a lone \r */
      if (p + 1 == e && !r->eof) return REC_MORE;
      p += (p + 1 < e && b[p + 1] == '\n') ? 2 : 1;
    } else {
      p++;
    }
    line++;
    break;
  }
  *next = p;
  *next_line = line;
  return REC_OK;
}

/* The next record into r->spans (consumed unless peek). REC_OK, REC_END or an error. */
static int32_t next_record(td_csv *r, bool peek) {
  for (;;) {
    int64_t next = r->pos, next_line = r->line;
    int32_t st = parse_record(r, &next, &next_line);
    if (st == REC_MORE) {
      st = refill(r);
      if (st) return st;
      continue;
    }
    if (st == REC_OK && !peek) {
      r->pos = next;
      r->line = next_line;
    }
    return st;
  }
}

/* A field's text, quotes undone, as a new string (NULL when out of memory). */
static char *span_text(const td_csv *r, const csv_span *s) {
  char *out = malloc((size_t)s->len + 1);
  if (!out) return NULL;
  const char *src = r->buf + s->off;
  int64_t n = 0;
  for (int64_t i = 0; i < s->len; i++) {
    out[n++] = src[i];
    if (s->quoted && src[i] == '"' && i + 1 < s->len && src[i + 1] == '"') i++;
  }
  out[n] = '\0';
  return out;
}


/* Stores v at p as dtype, by the dtype table's kind: integers (already range-checked)
 * from iv, floating types from fv. */
#define PUT_I(DT) *(DT *)p = (DT)iv
#define PUT_H(DT) *(DT *)p = td_float_to_half((float)fv)
#define PUT_BF(DT) *(DT *)p = td_float_to_bfloat16((float)fv)
#define PUT_F(DT) *(DT *)p = (DT)fv
#define PUT_CASE(_, DN, DT, DK, ...) \
  case TD_##DN:                      \
    PUT_##DK(DT);                    \
    break;
static void store(char *p, int32_t dtype, double fv, int64_t iv) {
  switch (dtype) {
    TD_DTYPES_NUM(PUT_CASE, _)
    default:
      break;
  }
}

/* ---- public entry points ----------------------------------------------------------- */

TD_EXPORT void td_csv_close(td_csv *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  if (r->names)
    for (int32_t i = 0; i < r->ncols; i++) free(r->names[i]);
  free(r->names);
  free(r->spans);
  free(r->buf);
  free(r->path);
  free(r);
}

static td_csv *open_reader(const char *path, int32_t delimiter) {
  if (!path) return td_fail_null(TD_EINVAL, "csv_open: path is NULL");
  if (delimiter <= 0 || delimiter > 127 || delimiter == '"' || delimiter == '\n' ||
      delimiter == '\r')
    return td_fail_null(
        TD_EINVAL,
        "csv_open: the delimiter must be one ASCII character other than a quote or a line end, "
        "got code %d",
        (int)delimiter);
  td_csv *r = calloc(1, sizeof *r);
  if (!r) return td_fail_null(TD_ENOMEM, "csv_open: out of memory");
  r->fd = -1;
  r->delim = (char)delimiter;
  r->line = 1;
  r->cap = td_csv_block_bytes > 0 ? td_csv_block_bytes : CSV_BLOCK;
  r->path = strdup(path);
  r->buf = malloc((size_t)r->cap);
  if (!r->path || !r->buf) {
    td_csv_close(r);
    return td_fail_null(TD_ENOMEM, "csv_open: out of memory");
  }
  r->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (r->fd < 0) {
    td_fail(TD_EIO, "csv_open: cannot open '%s': %s", path, strerror(errno));
    td_csv_close(r);
    return NULL;
  }
  if (refill(r)) {
    td_csv_close(r);
    return NULL;
  }
  while (r->end < 3 && !r->eof)
    if (refill(r)) {
      td_csv_close(r);
      return NULL;
    }
  if (r->end >= 3 && memcmp(r->buf, "\xEF\xBB\xBF", 3) == 0) r->pos = 3;
  return r;
}

TD_EXPORT td_csv *td_csv_open(const char *path, int32_t delimiter, int32_t has_header) {
  td_csv *r = open_reader(path, delimiter);
  if (!r) return NULL;
  r->has_header = has_header != 0;
  int32_t st = next_record(r, !r->has_header);
  if (st < 0) {
    td_csv_close(r);
    return NULL;
  }
  if (st == REC_END) return r; /* an empty file: no columns, no rows */
  r->ncols = r->nspans;
  if (r->has_header) {
    r->names = calloc((size_t)r->ncols, sizeof *r->names);
    if (!r->names) {
      td_csv_close(r);
      return td_fail_null(TD_ENOMEM, "csv_open: out of memory");
    }
    for (int32_t i = 0; i < r->ncols; i++) {
      csv_span s = r->spans[i];
      if (!s.quoted) { /* spaces around an unquoted name are not part of it */
        const char *t = r->buf + s.off;
        td_trim_blanks(&t, &s.len);
        s.off = t - r->buf;
      }
      r->names[i] = span_text(r, &s);
      if (!r->names[i]) {
        td_csv_close(r);
        return td_fail_null(TD_ENOMEM, "csv_open: out of memory");
      }
    }
  }
  return r;
}

TD_EXPORT int32_t td_csv_num_columns(const td_csv *r) { return r ? r->ncols : 0; }

TD_EXPORT const char *td_csv_column_name_borrow(const td_csv *r, int32_t col) {
  if (!r || !r->names || col < 0 || col >= r->ncols) return NULL;
  return r->names[col];
}

TD_EXPORT int64_t td_csv_line(const td_csv *r) { return r ? r->line : 0; }

TD_EXPORT int64_t td_csv_count_rows(const td_csv *r) {
  if (!r) return td_fail(TD_EINVAL, "csv_count_rows: the reader is NULL");
  td_csv *c = open_reader(r->path, r->delim);
  if (!c) return td_last_status();
  int64_t rows = 0;
  for (;;) {
    int32_t st = next_record(c, false);
    if (st < 0) {
      td_csv_close(c);
      return st;
    }
    if (st == REC_END) break;
    rows++;
  }
  td_csv_close(c);
  return r->has_header && rows > 0 ? rows - 1 : rows;
}

TD_EXPORT int64_t td_csv_skip_rows(td_csv *r, int64_t n) {
  if (!r) return td_fail(TD_EINVAL, "csv_skip_rows: the reader is NULL");
  if (n < 0) return td_fail(TD_EINVAL, "csv_skip_rows: %lld rows is negative", (long long)n);
  int64_t rows = 0;
  while (rows < n) {
    int32_t st = next_record(r, false);
    if (st < 0) return st;
    if (st == REC_END) break;
    rows++;
  }
  return rows;
}

/* The failing cell, for messages: its text (shortened), its column's name. */
static int32_t cell_error(const td_csv *r, const csv_span *s, int32_t col, const char *what) {
  char *text = span_text(r, s);
  char shown[CSV_SHOW + 4];
  if (text && strlen(text) > CSV_SHOW) {
    memcpy(shown, text, CSV_SHOW);
    strcpy(shown + CSV_SHOW, "...");
  } else {
    snprintf(shown, sizeof shown, "%s", text ? text : "");
  }
  free(text);
  char name[96] = "";
  if (r->names) snprintf(name, sizeof name, " ('%s')", r->names[col]);
  return td_fail(TD_EINVAL, "csv: %s: line %lld, column %d%s: cannot parse '%s' as %s", r->path,
                 (long long)s->line, (int)col + 1, name, shown, what);
}

TD_EXPORT int64_t td_csv_read(td_csv *r, int64_t max_rows, int32_t ndest, const int32_t *columns,
                              td_tensor *const *outs, const int64_t *out_cols) {
  const char *call = "csv_read";
  if (!r) return td_fail(TD_EINVAL, "%s: the reader is NULL", call);
  if (max_rows < 0)
    return td_fail(TD_EINVAL, "%s: max_rows %lld is negative", call, (long long)max_rows);
  if (ndest < 0 || (ndest > 0 && (!columns || !outs || !out_cols)))
    return td_fail(TD_EINVAL, "%s: %d destinations without their arrays", call, (int)ndest);
  for (int32_t i = 0; i < ndest; i++) {
    const td_tensor *t = outs[i];
    if (columns[i] < 0 || columns[i] >= r->ncols)
      return td_fail(TD_EINDEX, "%s: column %d is out of range (the file has %d columns)", call,
                     (int)columns[i] + 1, (int)r->ncols);
    if (!t) return td_fail(TD_EINVAL, "%s: destination %d is NULL", call, (int)i);
    if (!td_check_cpu(call, t, "destination") || !td_check_writable(call, t))
      return td_last_status();
    if (t->dtype == TD_BOOL || !td_check_dtype(call, t->dtype))
      return td_fail(TD_EDTYPE, "%s: destination %d has dtype %s; expected a numeric dtype", call,
                     (int)i, td_dtype_name(t->dtype) ? td_dtype_name(t->dtype) : "unknown");
    if (t->ndim < 1 || t->ndim > 2 || t->shape[0] < max_rows)
      return td_fail(TD_ESHAPE, "%s: destination %d needs 1 or 2 dims and at least %lld rows", call,
                     (int)i, (long long)max_rows);
    int64_t width = t->ndim == 2 ? t->shape[1] : 1;
    if (out_cols[i] < 0 || out_cols[i] >= width)
      return td_fail(TD_EINDEX, "%s: destination %d: column %lld is out of range (width %lld)",
                     call, (int)i, (long long)out_cols[i], (long long)width);
  }
  int64_t rows = 0;
  while (rows < max_rows) {
    int32_t st = next_record(r, false);
    if (st < 0) return st;
    if (st == REC_END) break;
    if (r->nspans != r->ncols)
      return td_fail(TD_EINVAL, "csv: %s: line %lld has %d fields, expected %d%s", r->path,
                     (long long)r->rec_line, (int)r->nspans, (int)r->ncols,
                     r->has_header ? " (as in the header)" : " (as in the first line)");
    for (int32_t i = 0; i < ndest; i++) {
      const td_tensor *t = outs[i];
      const csv_span *s = &r->spans[columns[i]];
      const char *text = r->buf + s->off;
      char *dst =
          td_tensor_ptr(t) +
          (rows * t->strides[0] + (t->ndim == 2 ? out_cols[i] * t->strides[1] : 0)) * t->itemsize;
      if (td_dtype_is_floating(t->dtype)) {
        double v;
        if (!td_parse_double(text, s->len, &v))
          return cell_error(r, s, columns[i], td_dtype_name(t->dtype));
        store(dst, t->dtype, v, 0);
      } else {
        int64_t v = 0, lo, hi;
        int ok = td_parse_int64(text, s->len, &v);
        td_dtype_exact_range(t->dtype, &lo, &hi);
        if (ok == 0) return cell_error(r, s, columns[i], td_dtype_name(t->dtype));
        if (ok < 0 || v < lo || v > hi) {
          char what[64];
          snprintf(what, sizeof what, "%s (out of range)", td_dtype_name(t->dtype));
          return cell_error(r, s, columns[i], what);
        }
        store(dst, t->dtype, 0, v);
      }
    }
    rows++;
  }
  return rows;
}
