/*
 * json_write.c: JSON text from trees (json.h) and, through a writer, from Lua's encoder.
 *
 * Two ways to write, one set of rules:
 *   - compact ("," and ":", UTF-8 passed through, only '"', '\' and control characters
 *     escaped): the texts of non-tensor values, whoever writes them (json.encode in Lua,
 *     the loaders in C), so that one value always has one text;
 *   - Python's json.dumps (", " and ": ", every character outside printable ASCII as
 *     \u00e9): the metadata of the memmap and consolidated layouts, byte for byte what
 *     Python tensordict writes.
 * Numbers are written as literals: those read from text as written (json.h keeps them),
 * Lua's as json.lua formats them (LuaJIT formats doubles several times faster than
 * printf), integers made here in decimal.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* ------------------------------------------------------------------------ strings */

/* One UTF-16 code unit (or ASCII character) inside a string, as Python's
 * json.dumps(ensure_ascii=True) writes it: \" \\ \b \f \n \r \t, printable ASCII as
 * itself, everything else \u00e9 (lowercase, as Python). */
static void put_unit(td_sbuf *b, uint32_t u) {
  static const char hex[] = "0123456789abcdef";
  switch (u) {
    case '"': td_sb_puts(b, "\\\""); return;
    case '\\': td_sb_puts(b, "\\\\"); return;
    case '\b': td_sb_puts(b, "\\b"); return;
    case '\f': td_sb_puts(b, "\\f"); return;
    case '\n': td_sb_puts(b, "\\n"); return;
    case '\r': td_sb_puts(b, "\\r"); return;
    case '\t': td_sb_puts(b, "\\t"); return;
    default: break;
  }
  if (u >= 0x20 && u < 0x7F) {
    td_sb_putc(b, (char)u);
    return;
  }
  char t[6] = {'\\', 'u', hex[(u >> 12) & 15], hex[(u >> 8) & 15], hex[(u >> 4) & 15],
               hex[u & 15]};
  td_sb_put(b, t, 6);
}

/* A code point: past U+FFFF as a surrogate pair of escapes. */
static void put_code_point(td_sbuf *b, uint32_t cp) {
  if (cp < 0x10000) {
    put_unit(b, cp);
  } else {
    cp -= 0x10000;
    put_unit(b, 0xD800 + (cp >> 10));
    put_unit(b, 0xDC00 + (cp & 0x3FF));
  }
}

bool td_json_put_string(td_sbuf *b, const char *str, size_t n, int style) {
  const unsigned char *s = (const unsigned char *)str;
  bool ascii = style != TD_JSON_COMPACT;
  td_sb_putc(b, '"');
  size_t k = 0;
  while (k < n) {
    size_t run = k;
    while (run < n && s[run] >= 0x20 && s[run] != '"' && s[run] != '\\' &&
           (!ascii || s[run] < 0x7F))
      run++;
    td_sb_put(b, s + k, run - k);
    k = run;
    if (k == n) break;
    if (!ascii || s[k] < 0x80) { /* '"', '\', a control character or DEL */
      put_unit(b, s[k++]);
      continue;
    }
    uint32_t cp; /* lone surrogates read from Python's files are written back as such */
    size_t len = td_utf8_decode(s + k, n - k, &cp, true);
    if (!len) return false;
    k += len;
    put_code_point(b, cp);
  }
  td_sb_putc(b, '"');
  return true;
}

/* -------------------------------------------------------------------------- trees */

/* A number without a literal (cJSON_CreateNumber's: this layer makes none) in 17
 * significant digits, which read back exactly; Python's names for the others. */
static void put_double(td_sbuf *b, double v) {
  char t[32];
  if (isnan(v))
    td_sb_puts(b, "NaN");
  else if (isinf(v))
    td_sb_puts(b, v > 0 ? "Infinity" : "-Infinity");
  else
    td_sb_put(b, t, (size_t)snprintf(t, sizeof t, "%.17g", v));
}

bool td_json_put(td_sbuf *b, const cJSON *node, int style) {
  size_t len;
  const char *text;
  switch (node->type & 0xFF) {
    case cJSON_NULL: td_sb_puts(b, "null"); return true;
    case cJSON_True: td_sb_puts(b, "true"); return true;
    case cJSON_False: td_sb_puts(b, "false"); return true;
    case cJSON_Raw: td_sb_puts(b, node->valuestring ? node->valuestring : ""); return true;
    case cJSON_String:
      text = td_json_text_of(node, &len);
      return td_json_put_string(b, text ? text : "", text ? len : 0, style);
    case cJSON_Number:
      if ((text = td_json_text_of(node, &len)))
        td_sb_put(b, text, len);
      else
        put_double(b, node->valuedouble);
      return true;
    default: break;
  }
  bool object = (node->type & 0xFF) == cJSON_Object, compact = style != TD_JSON_PYTHON;
  td_sb_putc(b, object ? '{' : '[');
  for (const cJSON *c = node->child; c; c = c->next) {
    if (c != node->child) td_sb_puts(b, compact ? "," : ", ");
    if (object) {
      const char *key = td_json_key_of(c, &len);
      if (!td_json_put_string(b, key ? key : "", key ? len : 0, style)) return false;
      td_sb_puts(b, compact ? ":" : ": ");
    }
    if (!td_json_put(b, c, style)) return false;
  }
  td_sb_putc(b, object ? '}' : ']');
  return true;
}

char *td_json_print(const cJSON *node, int style, size_t *len, bool *bad_utf8) {
  td_sbuf b = {0};
  *bad_utf8 = !td_json_put(&b, node, style);
  if (*bad_utf8 || b.oom || !b.p) {
    free(b.p);
    return NULL;
  }
  if (len) *len = b.n;
  return b.p;
}

/* ------------------------------------------------- the writer of Lua's json.encode */

/* Lua walks its tables (it alone can) and hands every value to C, so that a value's text
 * is the same whether Lua or C wrote it. The writer puts the ',' between values itself:
 * one call per value, which matters where Lua runs interpreted. */
struct td_json_writer {
  td_sbuf b;
  int32_t depth;        /* open arrays and objects */
  bool need_comma;      /* a value or member was written at this depth */
};

TD_EXPORT td_json_writer *td_json_writer_new(void) {
  td_json_writer *w = calloc(1, sizeof *w);
  if (!w) td_fail(TD_ENOMEM, "json: out of memory");
  return w;
}

TD_EXPORT void td_json_writer_free(td_json_writer *w) {
  if (!w) return;
  free(w->b.p);
  free(w);
}

TD_EXPORT void td_json_writer_reset(td_json_writer *w) {
  if (w->b.cap > (1u << 20)) { /* do not keep a large text alive between values */
    free(w->b.p);
    w->b = (td_sbuf){0};
  }
  w->b.n = 0;
  w->b.oom = false;
  w->depth = 0;
  w->need_comma = false;
}

static void separate(td_json_writer *w) {
  if (w->need_comma) td_sb_putc(&w->b, ',');
  w->need_comma = w->depth > 0;
}

TD_EXPORT void td_json_write_open(td_json_writer *w, int32_t object) {
  separate(w);
  td_sb_putc(&w->b, object ? '{' : '[');
  w->depth++;
  w->need_comma = false;
}

TD_EXPORT void td_json_write_close(td_json_writer *w, int32_t object) {
  td_sb_putc(&w->b, object ? '}' : ']');
  w->depth--;
  w->need_comma = w->depth > 0;
}

TD_EXPORT void td_json_write_key(td_json_writer *w, const char *s, int64_t n) {
  separate(w);
  td_json_put_string(&w->b, s, (size_t)n, TD_JSON_COMPACT);
  td_sb_putc(&w->b, ':');
  w->need_comma = false; /* the member's value follows */
}

/* A literal: a number's text, true, false, null, [] or {}. */
TD_EXPORT void td_json_write_raw(td_json_writer *w, const char *s, int64_t n) {
  separate(w);
  td_sb_put(&w->b, s, (size_t)n);
}

TD_EXPORT void td_json_write_string(td_json_writer *w, const char *s, int64_t n) {
  separate(w);
  td_json_put_string(&w->b, s, (size_t)n, TD_JSON_COMPACT);
}

TD_EXPORT const char *td_json_writer_text(const td_json_writer *w, int64_t *len) {
  if (w->b.oom) {
    td_fail(TD_ENOMEM, "json: out of memory");
    return NULL;
  }
  *len = (int64_t)w->b.n;
  return w->b.p ? w->b.p : "";
}
