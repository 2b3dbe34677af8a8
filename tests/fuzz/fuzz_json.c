/* fuzz_json.c: the JSON reader recipes and non-tensor values go through (recipes read
 * with TD_JSON_LINES for line and column messages and TD_JSON_UTF8). A text that parses
 * is written back through the writer from its items and must parse again to the same
 * items: what the reader accepts, the writer can say. With TD_JSON_UTF8 every string
 * and key it accepts must be well-formed UTF-8. */
#include "fuzz_util.h"
#include <math.h>

/* Writes items[*at] (and what follows it) back as JSON. */
static void emit(td_json_writer *w, const td_json_item *items, int64_t *at) {
  const td_json_item *it = &items[(*at)++];
  if (it->key) td_json_write_key(w, it->key, it->key_len);
  switch (it->type) {
    case TD_JSON_NULL: td_json_write_raw(w, "null", 4); break;
    case TD_JSON_FALSE: td_json_write_raw(w, "false", 5); break;
    case TD_JSON_TRUE: td_json_write_raw(w, "true", 4); break;
    case TD_JSON_STRING: td_json_write_string(w, it->text, it->text_len); break;
    case TD_JSON_NUMBER: { /* items carry the value; Python's spellings for the rest */
      char num[40];
      double v = it->number;
      int k = v != v ? snprintf(num, sizeof num, "NaN")
              : v == 1.0 / 0.0 ? snprintf(num, sizeof num, "Infinity")
              : v == -1.0 / 0.0 ? snprintf(num, sizeof num, "-Infinity")
              : snprintf(num, sizeof num, "%.17g", v);
      td_json_write_raw(w, num, k);
      break;
    }
    default: {
      int32_t object = it->type == TD_JSON_OBJECT;
      td_json_write_open(w, object);
      for (int32_t i = 0; i < it->count; i++) emit(w, items, at);
      td_json_write_close(w, object);
    }
  }
}

/* Well-formed UTF-8 (RFC 3629), checked here apart from the library's decoder. */
static int utf8_ok(const char *s, int64_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (int64_t i = 0; i < n;) {
    unsigned c = p[i];
    int len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || i + len > n) return 0;
    for (int k = 1; k < len; k++)
      if ((p[i + k] & 0xC0) != 0x80) return 0;
    if ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] > 0x9F) || (c == 0xF0 && p[i + 1] < 0x90) ||
        (c == 0xF4 && p[i + 1] > 0x8F))
      return 0; /* overlong, a surrogate, past U+10FFFF */
    i += len;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static td_json_reader *r, *again;
  static td_json_writer *w;
  if (!r) {
    r = td_json_reader_new();
    again = td_json_reader_new();
    w = td_json_writer_new();
  }
  int64_t n = 0, m = 0;
  int32_t flags = size ? (data[0] & 1 ? TD_JSON_LINES : 0) | (data[0] & 2 ? TD_JSON_UTF8 : 0) : 0;
  const td_json_item *items = td_json_reader_parse(r, (const char *)data, (int64_t)size, flags, &n);
  if (!items) return 0;
  if (flags & TD_JSON_UTF8)
    for (int64_t i = 0; i < n; i++)
      if (!utf8_ok(items[i].key, items[i].key_len) || (items[i].type == TD_JSON_STRING &&
                                                       !utf8_ok(items[i].text, items[i].text_len)))
        abort();
  td_json_writer_reset(w);
  int64_t at = 0;
  emit(w, items, &at);
  int64_t len = 0;
  const char *text = td_json_writer_text(w, &len);
  if (!text) return 0; /* out of memory */
  const td_json_item *back = td_json_reader_parse(again, text, len, 0, &m);
  if (!back || m != n) abort();
  for (int64_t i = 0; i < n; i++)
    if (back[i].type != items[i].type || back[i].count != items[i].count) abort();
  return 0;
}
