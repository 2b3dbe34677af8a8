/*
 * number.c: numbers from text, exactly and whatever the locale, for the CSV reader
 * (core/store/csv.c) and the JSON reader (json_read.c). See internal.h.
 *
 * Floats take a fast exact path (at most 19 digits, exponent within 10^+-22: one
 * multiplication or division of exact doubles, correctly rounded) and otherwise strtod
 * in the C locale. Integers are parsed exactly, with overflow reported.
 */
#include <locale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

void td_trim_blanks(const char **s, int64_t *n) {
  while (*n > 0 && is_blank(**s)) (*s)++, (*n)--;
  while (*n > 0 && is_blank((*s)[*n - 1])) (*n)--;
}

bool td_parse_double(const char *s, int64_t n, double *out) {
  td_trim_blanks(&s, &n);
  if (n == 0) return false;
  /* Fast path: [+-]digits[.digits][(e|E)[+-]digits] with few digits. */
  int64_t i = 0;
  bool neg = false;
  if (s[i] == '+' || s[i] == '-') neg = s[i++] == '-';
  uint64_t m = 0;
  int digits = 0, frac = 0, seen = 0;
  while (i < n && s[i] >= '0' && s[i] <= '9') {
    if (m || s[i] != '0') digits++;
    m = m * 10 + (uint64_t)(s[i++] - '0');
    seen++;
    if (digits > 19) goto slow;
  }
  if (i < n && s[i] == '.') {
    i++;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      if (m || s[i] != '0') digits++;
      if (digits > 19) goto slow;
      m = m * 10 + (uint64_t)(s[i++] - '0');
      frac++;
      seen++;
    }
  }
  if (!seen) goto slow; /* "inf", "nan", ".", hex: strtod decides */
  int64_t ex = 0;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    bool eneg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
    if (i == n || s[i] < '0' || s[i] > '9') return false;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      if (ex < 100000) ex = ex * 10 + (s[i] - '0');
      i++;
    }
    if (eneg) ex = -ex;
  }
  if (i != n) return false;
  ex -= frac;
  if (m <= (1ull << 53) && ex >= -22 && ex <= 22) {
    double v = (double)m;
    v = ex < 0 ? v / pow10_exact[-ex] : v * pow10_exact[ex];
    *out = neg ? -v : v;
    return true;
  }
slow:;
  char small[128], *tmp = n < (int64_t)sizeof small ? small : malloc((size_t)n + 1);
  if (!tmp) return false;
  memcpy(tmp, s, (size_t)n);
  tmp[n] = '\0';
  pthread_once(&c_locale_once, make_c_locale);
  char *end;
  double v = c_locale ? strtod_l(tmp, &end, c_locale) : strtod(tmp, &end);
  bool ok = end == tmp + n && n > 0;
  if (tmp != small) free(tmp);
  if (ok) *out = v;
  return ok;
}

int td_parse_int64(const char *s, int64_t n, int64_t *out) {
  td_trim_blanks(&s, &n);
  int64_t i = 0;
  bool neg = false;
  if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i == n) return 0;
  uint64_t m = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  bool over = false;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return 0;
    uint64_t dgt = (uint64_t)(s[i] - '0');
    if (m > (limit - dgt) / 10)
      over = true;
    else
      m = m * 10 + dgt;
  }
  if (over) return -1;
  *out = neg ? (int64_t)(0 - m) : (int64_t)m;
  return 1;
}
