/*
 * csv.c: a streaming reader of numeric CSV (RFC 4180) for flow.CsvSource.
 *
 * The file is read with read() in blocks of 1 MiB into one buffer; a record that
 * straddles the end of the buffer is parsed again once the buffer has been refilled
 * (the unread tail moved to the front, the buffer doubled when one record fills it).
 * Parsing a record yields field spans (offsets into the buffer); td_csv_read
 * (csv_read.c) then turns the requested fields into numbers in the callers' tensors.
 *
 * Accepted: fields quoted with '"' (a doubled "" inside is a quote; delimiters and line
 * ends inside quotes are data), line ends \n, \r\n and a lone \r, a UTF-8 byte order
 * mark, blank lines (skipped), records up to 256 MiB. Numbers may have spaces or tabs
 * around them; they are parsed exactly whatever the locale (core/src/number.c),
 * integers with a range check for the destination dtype.
 *
 * Messy files (td_csv_open_opts): gzip input is inflated as it is read (gzread into the
 * same buffer: never the whole file in memory); comment lines and comment tails are
 * dropped while a record is parsed (a byte table of the characters that end an
 * unquoted field keeps the scan one load per byte); records starting on listed lines
 * are dropped before anyone sees them. What a cell becomes (NA texts, defaults, bad
 * cells) is csv_read.c's.
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
#include <zlib.h>

#include "csv_internal.h"

/* CSV_MAX_RECORD: a record (one row, quotes and all) longer than this is refused: the
 * buffer doubles while a record does not fit, and a file that is no CSV (/dev/zero, a
 * binary file without line ends) would otherwise grow it until the machine runs out of
 * memory (issue 28). */
enum { CSV_BLOCK = 1 << 20, CSV_MAX_RECORD = 1 << 28 };

/* The first buffer's size (store_internal.h). */
int64_t td_csv_block_bytes = CSV_BLOCK;

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
  if (r->gz) {
    int64_t want = r->cap - r->end;
    int n = gzread(r->gz, r->buf + r->end, (unsigned)(want > (1 << 30) ? (1 << 30) : want));
    int zerr = Z_OK;
    const char *zmsg = n <= 0 ? gzerror(r->gz, &zerr) : NULL;
    if (n < 0 || (n == 0 && zerr != Z_OK))
      return td_fail(TD_EIO, "csv: %s: the gzip stream is corrupt or cut short near line %lld: %s", r->path,
                     (long long)r->line, zmsg && *zmsg ? zmsg : "read failed");
    if (n == 0) r->eof = 1;
    r->end += n;
    return TD_OK;
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

/* From p (a comment character) to the end of its line: the offset of the line end (e
 * at the end of the file), or -1 when the buffer ends first and more data may come. */
static int64_t comment_end(const td_csv *r, int64_t p) {
  const char *b = r->buf;
  int64_t e = r->end;
  while (p < e && b[p] != '\n' && b[p] != '\r') p++;
  return p == e && !r->eof ? -1 : p;
}

/* Parses the record at r->pos into r->spans without consuming it. Returns REC_OK (with
 * *next and *next_line where the following record starts), REC_MORE (the buffer ends
 * inside the record and more data may come), REC_END (no record left), or a TD_E*
 * code. Blank lines and comment lines before the record are skipped. */
static int32_t parse_record(td_csv *r, int64_t *next, int64_t *next_line) {
  const char *b = r->buf, d = r->delim, cm = r->comment;
  const uint8_t *stops = r->stops;
  int64_t p = r->pos, e = r->end, line = r->line;
  /* Blank lines (and a lone line end) are not records, nor are comment lines. */
  for (;;) {
    if (p == e) return r->eof ? REC_END : REC_MORE;
    if (b[p] == '\n') {
      p++, line++;
    } else if (b[p] == '\r') {
      if (p + 1 == e && !r->eof) return REC_MORE;
      p += (p + 1 < e && b[p + 1] == '\n') ? 2 : 1;
      line++;
    } else if (cm && b[p] == cm) {
      p = comment_end(r, p);
      if (p < 0) return REC_MORE;
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
      if (p < e && b[p] != d && b[p] != '\n' && b[p] != '\r' && !(cm && b[p] == cm))
        return td_fail(TD_EINVAL,
                       "csv: %s: line %lld, column %d: unexpected '%c' after a closing quote",
                       r->path, (long long)line, (int)r->nspans, b[p]);
    } else {
      int64_t start = p;
      while (p < e && !stops[(uint8_t)b[p]]) p++;
      if (p == e && !r->eof) return REC_MORE;
      int32_t st = add_span(r, start, p - start, fline, 0);
      if (st) return st;
    }
    if (cm && p < e && b[p] == cm) { /* the rest of the line is a comment */
      p = comment_end(r, p);
      if (p < 0) return REC_MORE;
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

/* Whether the record starting on line is one the options skip (binary search). */
static bool skipped_line(const td_csv *r, int64_t line) {
  int32_t lo = 0, hi = r->n_skip;
  while (lo < hi) {
    int32_t mid = lo + (hi - lo) / 2;
    if (r->skip_lines[mid] < line) lo = mid + 1;
    else hi = mid;
  }
  return lo < r->n_skip && r->skip_lines[lo] == line;
}

int32_t td_csv_next_record(td_csv *r, bool peek) {
  for (;;) {
    int64_t next = r->pos, next_line = r->line;
    int32_t st = parse_record(r, &next, &next_line);
    if (st == REC_MORE) {
      st = refill(r);
      if (st) return st;
      continue;
    }
    if (st == REC_OK && r->n_skip > 0 && skipped_line(r, r->rec_line)) { /* as if absent */
      r->pos = next;
      r->line = next_line;
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
char *td_csv_span_text(const td_csv *r, const csv_span *s) {
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


/* ---- public entry points ----------------------------------------------------------- */

static void free_texts(char **texts, int32_t n) {
  if (!texts) return;
  for (int32_t i = 0; i < n; i++) free(texts[i]);
  free(texts);
}

TD_EXPORT void td_csv_close(td_csv *r) {
  if (!r) return;
  if (r->gz) gzclose(r->gz);
  else if (r->fd >= 0) close(r->fd);
  free_texts(r->names, r->ncols);
  free_texts(r->na, r->n_na);
  free_texts(r->defaults, r->ncols);
  free(r->na_len);
  free(r->skip_lines);
  free(r->spans);
  free(r->buf);
  free(r->path);
  free(r);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Takes the options into r (copies: the caller's arrays may go). TD_OK or an error. */
static int32_t take_options(td_csv *r, const td_csv_options *o) {
  const char *call = "csv_open";
  int32_t c = o->comment;
  if (c < 0 || c > 127 || c == '"' || c == '\n' || c == '\r' || c == r->delim)
    return td_fail(TD_EINVAL,
                   "%s: the comment character must be one ASCII character other than a quote, a line end "
                   "or the delimiter, got code %d",
                   call, (int)c);
  if (o->on_bad_cell < TD_CSV_BAD_ERROR || o->on_bad_cell > TD_CSV_BAD_SKIP_ROW)
    return td_fail(TD_EINVAL, "%s: on_bad_cell %d is not one of TD_CSV_BAD_*", call, (int)o->on_bad_cell);
  if (o->n_na < 0 || (o->n_na > 0 && !o->na_values) || o->n_skip_lines < 0 ||
      (o->n_skip_lines > 0 && !o->skip_lines))
    return td_fail(TD_EINVAL, "%s: a count of NA values or skipped lines without its array", call);
  r->comment = (char)c;
  r->on_bad = o->on_bad_cell;
  r->stops[(uint8_t)r->delim] = r->stops['\n'] = r->stops['\r'] = 1;
  if (c) r->stops[(uint8_t)c] = 1;
  if (o->n_na > 0) {
    r->na = calloc((size_t)o->n_na, sizeof *r->na);
    r->na_len = calloc((size_t)o->n_na, sizeof *r->na_len);
    if (!r->na || !r->na_len) return td_fail(TD_ENOMEM, "%s: out of memory", call);
    for (int32_t i = 0; i < o->n_na; i++) {
      if (!o->na_values[i]) return td_fail(TD_EINVAL, "%s: NA value %d is NULL", call, (int)i + 1);
      r->na[i] = strdup(o->na_values[i]);
      r->n_na = i + 1;
      if (!r->na[i]) return td_fail(TD_ENOMEM, "%s: out of memory", call);
      r->na_len[i] = (int64_t)strlen(r->na[i]);
      double v; /* "NaN" parses as NaN: only a number (-999) must be looked for first */
      if (td_parse_double(r->na[i], r->na_len[i], &v) && v == v) r->na_numeric = 1;
    }
  }
  if (o->n_skip_lines > 0) {
    r->skip_lines = malloc((size_t)o->n_skip_lines * sizeof *r->skip_lines);
    if (!r->skip_lines) return td_fail(TD_ENOMEM, "%s: out of memory", call);
    memcpy(r->skip_lines, o->skip_lines, (size_t)o->n_skip_lines * sizeof *r->skip_lines);
    r->n_skip = o->n_skip_lines;
    qsort(r->skip_lines, (size_t)r->n_skip, sizeof *r->skip_lines, cmp_i64);
  }
  return TD_OK;
}

/* The options r was opened with, for a second reader of the same file (count_rows). */
static td_csv_options options_of(const td_csv *r) {
  return (td_csv_options){.delimiter = r->delim, .has_header = r->has_header, .comment = r->comment,
                          .on_bad_cell = r->on_bad, .n_na = r->n_na, .na_values = (const char *const *)r->na,
                          .n_skip_lines = r->n_skip, .skip_lines = r->skip_lines};
}

/* Opens the file, plain or gzip (by its first two bytes, whatever its name). */
static int32_t open_file(td_csv *r) {
  r->fd = open(r->path, O_RDONLY | O_CLOEXEC);
  if (r->fd < 0) return td_fail(TD_EIO, "csv_open: cannot open '%s': %s", r->path, strerror(errno));
  unsigned char magic[2];
  ssize_t n;
  do n = pread(r->fd, magic, 2, 0);
  while (n < 0 && errno == EINTR);
  if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    r->gz = gzdopen(r->fd, "rb");
    if (!r->gz) return td_fail(TD_ENOMEM, "csv_open: %s: cannot start inflating the gzip file", r->path);
    gzbuffer(r->gz, 1 << 18);
  }
  return TD_OK;
}

static td_csv *open_reader(const char *path, const td_csv_options *o) {
  if (!path) return td_fail_null(TD_EINVAL, "csv_open: path is NULL");
  if (!o) return td_fail_null(TD_EINVAL, "csv_open: the options are NULL");
  int32_t delimiter = o->delimiter;
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
  r->has_header = o->has_header != 0;
  r->line = 1;
  r->limit = -1;
  r->cap = td_csv_block_bytes > 0 ? td_csv_block_bytes : CSV_BLOCK;
  r->path = strdup(path);
  r->buf = malloc((size_t)r->cap);
  if (!r->path || !r->buf) {
    td_csv_close(r);
    return td_fail_null(TD_ENOMEM, "csv_open: out of memory");
  }
  if (take_options(r, o) || open_file(r) || refill(r)) {
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

TD_EXPORT td_csv *td_csv_open_opts(const char *path, const td_csv_options *opts) {
  td_csv *r = open_reader(path, opts);
  if (!r) return NULL;
  int32_t st = td_csv_next_record(r, !r->has_header);
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
      r->names[i] = td_csv_span_text(r, &s);
      if (!r->names[i]) {
        td_csv_close(r);
        return td_fail_null(TD_ENOMEM, "csv_open: out of memory");
      }
    }
  }
  return r;
}

TD_EXPORT td_csv *td_csv_open(const char *path, int32_t delimiter, int32_t has_header) {
  td_csv_options o = {.delimiter = delimiter, .has_header = has_header};
  return td_csv_open_opts(path, &o);
}

TD_EXPORT int32_t td_csv_num_columns(const td_csv *r) { return r ? r->ncols : 0; }

TD_EXPORT const char *td_csv_column_name_borrow(const td_csv *r, int32_t col) {
  if (!r || !r->names || col < 0 || col >= r->ncols) return NULL;
  return r->names[col];
}

TD_EXPORT int64_t td_csv_line(const td_csv *r) { return r ? r->line : 0; }

TD_EXPORT int64_t td_csv_count_rows(const td_csv *r) {
  if (!r) return td_fail(TD_EINVAL, "csv_count_rows: the reader is NULL");
  td_csv_options o = options_of(r);
  td_csv *c = open_reader(r->path, &o);
  if (!c) return td_last_status();
  int64_t rows = 0;
  for (;;) {
    int32_t st = td_csv_next_record(c, false);
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
    int32_t st = td_csv_next_record(r, false);
    if (st < 0) return st;
    if (st == REC_END) break;
    rows++;
  }
  return rows;
}
