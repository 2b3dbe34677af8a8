/*
 * csv_internal.h: what the CSV reader's two files share: the reader (csv.c: the
 * buffer, records, opening and options) and the cells (csv_read.c: records into the
 * callers' tensors, by the NA, default and bad-cell rules). Not part of the ABI.
 */
#ifndef TD_CSV_INTERNAL_H
#define TD_CSV_INTERNAL_H

#include <zlib.h>

#include "store_internal.h"

typedef struct csv_span {
  int64_t off, len; /* in the buffer; a quoted field's text without its outer quotes */
  int64_t line;     /* where the field starts */
  int32_t quoted;
} csv_span;

struct td_csv {
  int fd;
  gzFile gz; /* non-NULL when the file is gzip: it owns fd */
  char *path;
  char delim;
  int32_t has_header;
  char comment;          /* 0: none */
  uint8_t stops[256];    /* the bytes that end an unquoted field */
  int32_t on_bad;        /* TD_CSV_BAD_* */
  char **na;             /* n_na missing-value texts */
  int64_t *na_len;
  int32_t n_na;
  int32_t na_numeric;    /* an NA text parses as a number: look before parsing */
  int64_t *skip_lines;   /* sorted, n_skip of them */
  int32_t n_skip;
  char **defaults;       /* ncols texts (NULL: none), or NULL */
  int64_t limit;         /* records td_csv_read may still take; -1: no limit */
  int64_t counts[TD_CSV_NCOUNTS];
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

/* What parsing a record gives: one record (REC_OK), the buffer ends inside it (REC_MORE,
 * refilled and parsed again), no record left (REC_END); errors are negative. */
enum { REC_OK = 1, REC_MORE = 0, REC_END = 2 };

/* The next record into r->spans (consumed unless peek; records on skipped lines are
 * consumed either way): REC_OK, REC_END or an error. */
int32_t td_csv_next_record(td_csv *r, bool peek);
/* A field's text, quotes undone, as a new string (NULL when out of memory). */
char *td_csv_span_text(const td_csv *r, const csv_span *s);

#endif
