/*
 * dict_pyformat.c: the pieces of Python tensordict's on-disk formats that both layouts
 * need, the memmap folders (dict_memmap*.c) and the consolidated file
 * (dict_consolidate.c): torch dtype names, JSON text escaped as Python's json.dumps
 * escapes it, UTF-8 decoding, and the growable text both write JSON into.
 *
 * One copy, because both layouts promise the bytes Python writes: two copies of the
 * escaping rules could drift apart, and then one layout would no longer match.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dict_internal.h"

/* ------------------------------------------------------------------ dtype names */

/* str(torch.dtype) for each td_dtype, as tensordict writes them (its
 * _DTYPE_TO_STR_DTYPE); dtype.c's table holds the bare names. */
static const char *const torch_dtypes[TD_NUM_DTYPES] = {
    "torch.bool",    "torch.uint8",   "torch.int8",     "torch.int16",   "torch.int32",
    "torch.int64",   "torch.float16", "torch.bfloat16", "torch.float32", "torch.float64"};

const char *td_py_dtype_name(int32_t dtype) {
  return dtype >= 0 && dtype < TD_NUM_DTYPES ? torch_dtypes[dtype] : NULL;
}

int32_t td_py_dtype_from_name(const char *name) {
  for (int32_t i = 0; i < TD_NUM_DTYPES; i++)
    if (strcmp(name, torch_dtypes[i]) == 0) return i;
  return -1;
}

/* --------------------------------------------------------------- growable text */

void td_sb_put(td_sbuf *b, const void *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

void td_sb_puts(td_sbuf *b, const char *s) { td_sb_put(b, s, strlen(s)); }
void td_sb_putc(td_sbuf *b, char c) { td_sb_put(b, &c, 1); }

/* ------------------------------------------------------------------ UTF-8, JSON */

size_t td_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp, bool surrogates) {
  unsigned char c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint32_t v, min;
  if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, v = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, v = c & 0x07, min = 0x10000;
  else return 0;
  if (n < len) return 0;
  for (size_t k = 1; k < len; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (s[k] & 0x3F);
  }
  if (v < min || v > 0x10FFFF) return 0;
  if (!surrogates && v >= 0xD800 && v <= 0xDFFF) return 0;
  *cp = v;
  return len;
}

int td_hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int td_json_unescape(char e) {
  switch (e) {
    case '"':
    case '\\':
    case '/': return e;
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return -1;
  }
}

void td_py_put_unit(td_sbuf *b, uint32_t u) {
  static const char hex[] = "0123456789abcdef"; /* Python writes \u00e9, not \u00E9 */
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

void td_py_put_code_point(td_sbuf *b, uint32_t cp) {
  if (cp < 0x10000) {
    td_py_put_unit(b, cp);
  } else {
    cp -= 0x10000;
    td_py_put_unit(b, 0xD800 + (cp >> 10));
    td_py_put_unit(b, 0xDC00 + (cp & 0x3FF));
  }
}

/* -------------------------------------------------------- NonTensorStack texts */

uint64_t td_py_text_hash(const char *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}
