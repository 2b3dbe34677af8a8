/*
 * csv_read.c: the CSV reader's cells (td_csv_read): the requested fields of each record
 * turned into numbers in the callers' tensors, exactly whatever the locale
 * (core/src/number.c), integers with a range check for the destination dtype; a cell
 * equal to an NA text is missing (its column's default, else NaN), a cell that does not
 * parse fails, is taken as missing or drops its row (on_bad_cell), with counts of each.
 * The records come from csv.c (td_csv_next_record).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_internal.h"
#include "dtype_table.h"

enum { CSV_SHOW = 48 }; /* the characters of a bad cell a message shows */

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

TD_EXPORT int32_t td_csv_set_default(td_csv *r, int32_t col, const char *text) {
  if (!r) return td_fail(TD_EINVAL, "csv_set_default: the reader is NULL");
  if (col < 0 || col >= r->ncols)
    return td_fail(TD_EINDEX, "csv_set_default: column %d is out of range (the file has %d columns)",
                   (int)col + 1, (int)r->ncols);
  if (!r->defaults) {
    r->defaults = calloc((size_t)r->ncols, sizeof *r->defaults);
    if (!r->defaults) return td_fail(TD_ENOMEM, "csv_set_default: out of memory");
  }
  char *copy = text ? strdup(text) : NULL;
  if (text && !copy) return td_fail(TD_ENOMEM, "csv_set_default: out of memory");
  free(r->defaults[col]);
  r->defaults[col] = copy;
  return TD_OK;
}

TD_EXPORT int32_t td_csv_limit_records(td_csv *r, int64_t n) {
  if (!r) return td_fail(TD_EINVAL, "csv_limit_records: the reader is NULL");
  r->limit = n < 0 ? -1 : n;
  return TD_OK;
}

TD_EXPORT int32_t td_csv_counts(const td_csv *r, int64_t *out) {
  if (!r || !out) return td_fail(TD_EINVAL, "csv_counts: the reader or out is NULL");
  memcpy(out, r->counts, sizeof r->counts);
  return TD_OK;
}

/* The failing cell, for messages: its text (shortened), its column's name. */
static int32_t cell_error(const td_csv *r, const csv_span *s, int32_t col, const char *what) {
  char *text = td_csv_span_text(r, s);
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

/* What became of a cell: stored as parsed, stored as missing (NA text) or replaced (a
 * bad cell under TD_CSV_BAD_MISSING), or its row is dropped. Errors are negative. */
enum { CELL_STORED = 0, CELL_MISSING = 1, CELL_REPLACED = 2, CELL_SKIP_ROW = 3 };

/* Whether the cell's text (blanks around it trimmed) is one of the NA values. */
static bool is_na(const td_csv *r, const csv_span *s) {
  const char *t = r->buf + s->off;
  int64_t n = s->len;
  td_trim_blanks(&t, &n);
  for (int32_t i = 0; i < r->n_na; i++)
    if (r->na_len[i] == n && memcmp(r->na[i], t, (size_t)n) == 0) return true;
  return false;
}

/* Parses text[0, n) for dtype into dst: 1 stored, 0 not a number, -1 out of range. */
static int parse_store(const char *text, int64_t n, int32_t dtype, char *dst) {
  if (td_dtype_is_floating(dtype)) {
    double v;
    if (!td_parse_double(text, n, &v)) return 0;
    store(dst, dtype, v, 0);
    return 1;
  }
  int64_t v = 0, lo, hi;
  int ok = td_parse_int64(text, n, &v);
  td_dtype_exact_range(dtype, &lo, &hi);
  if (ok == 0) return 0;
  if (ok < 0 || v < lo || v > hi) return -1;
  store(dst, dtype, 0, v);
  return 1;
}

/* A missing cell (an NA text, or a bad cell taken as missing): its column's default,
 * else NaN in a floating column; an integer column without a default drops the row
 * under TD_CSV_BAD_SKIP_ROW and is an error otherwise (an integer has no NaN). */
static int32_t fill_missing(const td_csv *r, const csv_span *s, int32_t col, int32_t dtype, char *dst,
                            int32_t outcome) {
  const char *dflt = r->defaults ? r->defaults[col] : NULL;
  if (dflt) {
    if (parse_store(dflt, (int64_t)strlen(dflt), dtype, dst) == 1) return outcome;
    char what[96];
    snprintf(what, sizeof what, "%s, nor its column's default '%.40s'", td_dtype_name(dtype), dflt);
    return cell_error(r, s, col, what);
  }
  if (td_dtype_is_floating(dtype)) {
    store(dst, dtype, NAN, 0);
    return outcome;
  }
  if (r->on_bad == TD_CSV_BAD_SKIP_ROW) return CELL_SKIP_ROW;
  char what[160];
  snprintf(what, sizeof what,
           "%s: %s in an integer column without a default (give it a default, or skip such rows)",
           td_dtype_name(dtype), outcome == CELL_MISSING ? "a missing value" : "a bad cell");
  return cell_error(r, s, col, what);
}

/* Reads one cell into dst by the reader's rules: a CELL_* outcome or an error. NA texts
 * are looked for only where parsing fails or gives NaN, unless one of them is a number
 * (-999): the plain path stays one parse per cell. */
static int32_t read_cell(const td_csv *r, const csv_span *s, int32_t col, int32_t dtype, char *dst) {
  const char *text = r->buf + s->off;
  if (r->na_numeric && is_na(r, s)) return fill_missing(r, s, col, dtype, dst, CELL_MISSING);
  int ok = 0;
  if (td_dtype_is_floating(dtype)) {
    double v;
    if (td_parse_double(text, s->len, &v)) {
      if (v != v && r->n_na > 0 && is_na(r, s)) return fill_missing(r, s, col, dtype, dst, CELL_MISSING);
      store(dst, dtype, v, 0);
      return CELL_STORED;
    }
  } else {
    ok = parse_store(text, s->len, dtype, dst);
    if (ok == 1) return CELL_STORED;
  }
  if (r->n_na > 0 && !r->na_numeric && is_na(r, s)) return fill_missing(r, s, col, dtype, dst, CELL_MISSING);
  if (r->on_bad == TD_CSV_BAD_SKIP_ROW) return CELL_SKIP_ROW;
  if (r->on_bad == TD_CSV_BAD_MISSING) return fill_missing(r, s, col, dtype, dst, CELL_REPLACED);
  if (ok == 0) return cell_error(r, s, col, td_dtype_name(dtype));
  char what[64];
  snprintf(what, sizeof what, "%s (out of range)", td_dtype_name(dtype));
  return cell_error(r, s, col, what);
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
  while (rows < max_rows && r->limit != 0) {
    int32_t st = td_csv_next_record(r, false);
    if (st < 0) return st;
    if (st == REC_END) break;
    if (r->limit > 0) r->limit--;
    r->counts[TD_CSV_COUNT_RECORDS]++;
    if (r->nspans != r->ncols)
      return td_fail(TD_EINVAL, "csv: %s: line %lld has %d fields, expected %d%s", r->path,
                     (long long)r->rec_line, (int)r->nspans, (int)r->ncols,
                     r->has_header ? " (as in the header)" : " (as in the first line)");
    int64_t missing = 0, replaced = 0;
    int32_t kept = CELL_STORED;
    for (int32_t i = 0; i < ndest && kept == CELL_STORED; i++) {
      const td_tensor *t = outs[i];
      const csv_span *s = &r->spans[columns[i]];
      char *dst =
          td_tensor_ptr(t) +
          (rows * t->strides[0] + (t->ndim == 2 ? out_cols[i] * t->strides[1] : 0)) * t->itemsize;
      kept = read_cell(r, s, columns[i], t->dtype, dst);
      if (kept == CELL_MISSING || kept == CELL_REPLACED) {
        if (kept == CELL_MISSING) missing++;
        else replaced++;
        kept = CELL_STORED;
      }
    }
    if (kept < 0) return kept;
    if (kept == CELL_SKIP_ROW) {
      r->counts[TD_CSV_COUNT_SKIPPED_ROWS]++;
      continue; /* the next record overwrites what this one stored */
    }
    r->counts[TD_CSV_COUNT_MISSING] += missing;
    r->counts[TD_CSV_COUNT_REPLACED] += replaced;
    rows++;
  }
  return rows;
}
