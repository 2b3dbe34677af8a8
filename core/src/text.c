/*
 * text.c: growable text and UTF-8 decoding, for the writers of JSON, CSV reports and
 * messages.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

/* ------------------------------------------------------------------------ UTF-8 */

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
