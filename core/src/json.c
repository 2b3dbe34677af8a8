/*
 * json.c: the nodes of the JSON layer (json.h) and the documents Lua walks through the
 * FFI (tensordict.h).
 *
 * C never calls Lua, so Lua's json.decode reads a parsed tree as a flat list of items
 * (td_json_reader_parse) and builds its tables from it in a loop. A parse error names
 * the problem and the byte ("json: expected ',' or ']' but found '2' at byte 4"), or for
 * texts people write (recipes) the line and column with a short excerpt, because their
 * author needs to find the mistake, not an offset.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* ------------------------------------------------------------------------- nodes */

static const td_json_ext *ext(const cJSON *n) {
  return n && (n->type & TD_JSON_EXT) ? (const td_json_ext *)n : NULL;
}

const char *td_json_key_of(const cJSON *n, size_t *len) {
  if (!n->string) return NULL;
  *len = ext(n) ? ext(n)->key_len : strlen(n->string);
  return n->string;
}

const char *td_json_text_of(const cJSON *n, size_t *len) {
  if (!n->valuestring) return NULL;
  if (cJSON_IsNumber(n) && !ext(n)) return NULL; /* cJSON's own: no literal */
  *len = ext(n) ? ext(n)->text_len : strlen(n->valuestring);
  return n->valuestring;
}

/* The first member of obj named key[0, n). */
static const cJSON *member(const cJSON *obj, const char *key, size_t n) {
  size_t len;
  for (const cJSON *c = obj ? obj->child : NULL; c; c = c->next) {
    const char *k = td_json_key_of(c, &len);
    if (k && len == n && memcmp(k, key, n) == 0) return c;
  }
  return NULL;
}

const cJSON *td_json_get(const cJSON *obj, const char *key) {
  return member(obj, key, strlen(key));
}

int td_json_int64(const cJSON *n, int64_t *out) {
  size_t len;
  const char *s = cJSON_IsNumber(n) ? td_json_text_of(n, &len) : NULL;
  if (!s) { /* a number made from a double */
    double v = cJSON_IsNumber(n) ? n->valuedouble : NAN;
    if (!(v == floor(v))) return 0;
    if (!(fabs(v) < 9223372036854775808.0)) return -1;
    *out = (int64_t)v;
    return 1;
  }
  size_t k = s[0] == '-';
  if (k == len) return 0;
  for (size_t j = k; j < len; j++)
    if (s[j] < '0' || s[j] > '9') return 0; /* a fraction, an exponent, NaN, Infinity */
  /* Accumulate as a negative number: its range holds INT64_MIN. */
  int64_t acc = 0;
  for (size_t j = k; j < len; j++) {
    int64_t digit = s[j] - '0';
    if (acc < (INT64_MIN + digit) / 10) return -1;
    acc = acc * 10 - digit;
  }
  if (!k && acc == INT64_MIN) return -1;
  *out = k ? acc : -acc;
  return 1;
}

const char *td_json_kind_name(const cJSON *n) {
  switch (n->type & 0xFF) {
    case cJSON_NULL: return "null";
    case cJSON_False:
    case cJSON_True: return "a boolean";
    case cJSON_Number: return "a number";
    case cJSON_String: return "a string";
    case cJSON_Array: return "a list";
    case cJSON_Object: return "an object";
    default: return "a JSON text";
  }
}

int32_t td_json_type_of(const cJSON *n) {
  switch (n->type & 0xFF) {
    case cJSON_NULL: return TD_JSON_NULL;
    case cJSON_False: return TD_JSON_FALSE;
    case cJSON_True: return TD_JSON_TRUE;
    case cJSON_Number: return TD_JSON_NUMBER;
    case cJSON_String: return TD_JSON_STRING;
    case cJSON_Array: return TD_JSON_ARRAY;
    default: return TD_JSON_OBJECT;
  }
}

static td_json_ext *new_ext(int type) {
  td_json_ext *x = calloc(1, sizeof *x);
  if (x) x->node.type = type | TD_JSON_EXT;
  return x;
}

cJSON *td_json_new(int type) {
  td_json_ext *x = new_ext(type);
  return x ? &x->node : NULL;
}

cJSON *td_json_new_string(const char *s, size_t n) {
  td_json_ext *x = new_ext(cJSON_String);
  char *copy = x ? malloc(n + 1) : NULL;
  if (!copy) return free(x), NULL;
  memcpy(copy, s, n);
  copy[n] = '\0';
  x->node.valuestring = copy;
  x->text_len = n;
  return &x->node;
}

cJSON *td_json_new_int(int64_t v) {
  td_json_ext *x = new_ext(cJSON_Number);
  char *lit = x ? malloc(24) : NULL;
  if (!lit) return free(x), NULL;
  x->text_len = (size_t)snprintf(lit, 24, "%lld", (long long)v);
  x->node.valuestring = lit;
  x->node.valuedouble = (double)v;
  return &x->node;
}

bool td_json_add(cJSON *obj, const char *key, size_t key_len, cJSON *item) {
  if (item && !(item->type & TD_JSON_EXT) && !memchr(key, 0, key_len)) {
    if (obj && cJSON_AddItemToObject(obj, key, item)) return true;
    cJSON_Delete(item);
    return false;
  }
  /* a node cJSON made has no room for the key's length: keys with NUL need ours */
  char *k = item && (item->type & TD_JSON_EXT) ? malloc(key_len + 1) : NULL;
  if (!obj || !k) {
    free(k);
    cJSON_Delete(item);
    return false;
  }
  memcpy(k, key, key_len);
  k[key_len] = '\0';
  item->string = k;
  ((td_json_ext *)item)->key_len = key_len;
  if (!cJSON_AddItemToArray(obj, item)) { /* appends, keeping the key set above */
    cJSON_Delete(item);
    return false;
  }
  return true;
}

bool td_json_same(const cJSON *a, const cJSON *b) {
  int ta = a->type & 0xFF, tb = b->type & 0xFF;
  if (ta != tb) return false;
  size_t na = 0, nb = 0;
  switch (ta) {
    case cJSON_Number: {
      double x = a->valuedouble, y = b->valuedouble;
      if (x != y) return isnan(x) && isnan(y);
      int64_t i, j; /* integers past 2^53 differ even where their doubles agree */
      int ka = td_json_int64(a, &i), kb = td_json_int64(b, &j);
      if (ka == 1 && kb == 1) return i == j;
      if (ka == -1 || kb == -1) {
        const char *sa = td_json_text_of(a, &na), *sb = td_json_text_of(b, &nb);
        return sa && sb && na == nb && memcmp(sa, sb, na) == 0;
      }
      return true;
    }
    case cJSON_String: {
      const char *sa = td_json_text_of(a, &na), *sb = td_json_text_of(b, &nb);
      return na == nb && memcmp(sa, sb, na) == 0;
    }
    case cJSON_Raw: return strcmp(a->valuestring, b->valuestring) == 0;
    case cJSON_Array:
    case cJSON_Object: break;
    default: return true;
  }
  int count_a = 0, count_b = 0;
  for (const cJSON *c = a->child; c; c = c->next) count_a++;
  for (const cJSON *c = b->child; c; c = c->next) count_b++;
  if (count_a != count_b) return false;
  const cJSON *y = b->child;
  for (const cJSON *x = a->child; x; x = x->next, y = y ? y->next : NULL) {
    if (ta == cJSON_Object) {
      const char *k = td_json_key_of(x, &na);
      y = member(b, k, na); /* objects: members in any order (keys unique after the last) */
    }
    if (!y || !td_json_same(x, y)) return false;
  }
  return true;
}

/* ------------------------------------------------------------ the reader of Lua */

struct td_json_reader {
  td_json_arena *arena; /* the nodes of the last text */
  td_json_item *items;
  int64_t n, cap;
};

/* Appends node and, after it, what it holds; false when out of memory. */
static bool flatten(td_json_reader *doc, const cJSON *node) {
  if (doc->n == doc->cap) {
    int64_t cap = doc->cap ? 2 * doc->cap : 16;
    td_json_item *items = realloc(doc->items, sizeof *items * (size_t)cap);
    if (!items) return false;
    doc->items = items;
    doc->cap = cap;
  }
  td_json_item *it = &doc->items[doc->n++];
  size_t len = 0;
  const char *key = td_json_key_of(node, &len);
  *it = (td_json_item){.type = td_json_type_of(node), .key = key, .key_len = (int64_t)len};
  if (it->type == TD_JSON_NUMBER) {
    it->number = node->valuedouble;
    /* The literal too: a reader of documents tells an integer a double cannot hold
     * exactly (past 2^53) from one it can. */
    it->text = td_json_text_of(node, &len);
    it->text_len = it->text ? (int64_t)len : 0;
  } else if (it->type == TD_JSON_STRING) {
    it->text = td_json_text_of(node, &len);
    it->text_len = (int64_t)len;
  } else if (it->type == TD_JSON_ARRAY || it->type == TD_JSON_OBJECT) {
    int64_t at = doc->n - 1, count = 0;
    for (const cJSON *c = node->child; c; c = c->next, count++)
      if (!flatten(doc, c)) return false;
    doc->items[at].count = (int32_t)count; /* doc->items may have moved */
  }
  return true;
}

/* Line and column (1-based, columns in bytes) of offset in text. */
static void line_col(const char *text, size_t offset, int64_t *line, int64_t *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < offset; i++) {
    if (text[i] == '\n') {
      ++*line;
      *col = 1;
    } else {
      ++*col;
    }
  }
}

/* "line 3, column 14: invalid JSON near '...'" (the wording recipes have always had). */
static void fail_at_line(const char *text, size_t len, const td_json_error *e) {
  size_t offset = e->at > len ? len : e->at;
  int64_t line, col;
  line_col(text, offset, &line, &col);
  if (strncmp(e->what, "invalid UTF-8", 13) == 0) { /* no excerpt: it would hold the byte */
    td_fail(TD_EINVAL, "line %lld, column %lld: %s", (long long)line, (long long)col, e->what);
    return;
  }
  const char *what = strcmp(e->what, "trailing garbage") == 0 ? "text after the JSON value"
                     : strcmp(e->what, "out of memory") == 0 ? e->what
                                                              : "invalid JSON";
  char excerpt[24];
  size_t n = 0;
  for (size_t i = offset; i < len && n < sizeof excerpt - 1 && text[i] != '\n'; i++)
    excerpt[n++] = text[i];
  excerpt[n] = '\0';
  if (n == 0)
    td_fail(TD_EINVAL, "line %lld, column %lld: %s at the end of the text", (long long)line,
            (long long)col, what);
  else
    td_fail(TD_EINVAL, "line %lld, column %lld: %s near '%s'", (long long)line, (long long)col,
            what, excerpt);
}

TD_EXPORT td_json_reader *td_json_reader_new(void) {
  td_json_reader *r = calloc(1, sizeof *r);
  if (r && !(r->arena = td_json_arena_new())) free(r), r = NULL;
  if (!r) td_fail(TD_ENOMEM, "json: out of memory");
  return r;
}

TD_EXPORT void td_json_reader_clear(td_json_reader *r) {
  td_json_arena_reset(r->arena);
  r->n = 0;
  if (r->cap > 4096) { /* do not keep a large text's items alive between texts */
    free(r->items);
    r->items = NULL;
    r->cap = 0;
  }
}

TD_EXPORT void td_json_reader_free(td_json_reader *r) {
  if (!r) return;
  td_json_reader_clear(r);
  td_json_arena_free(r->arena);
  free(r->items);
  free(r);
}

TD_EXPORT const td_json_item *td_json_reader_parse(td_json_reader *r, const char *text,
                                                   int64_t len, int32_t flags, int64_t *count) {
  td_json_reader_clear(r);
  if (!text || len < 0) {
    td_fail(TD_EINVAL, "json: no text given");
    return NULL;
  }
  td_json_error e;
  int read_flags = flags & TD_JSON_UTF8 ? TD_JSON_VALID_UTF8 : 0;
  cJSON *root = td_json_read_in(r->arena, text, (size_t)len, read_flags, &e);
  if (!root) {
    if (strcmp(e.what, "out of memory") == 0)
      td_fail(TD_ENOMEM, "json: out of memory");
    else if (flags & TD_JSON_LINES)
      fail_at_line(text, (size_t)len, &e);
    else
      td_fail(TD_EINVAL, "%s at byte %lld", e.what, (long long)e.at + 1);
    return NULL;
  }
  if (!flatten(r, root)) {
    td_json_reader_clear(r);
    td_fail(TD_ENOMEM, "json: out of memory");
    return NULL;
  }
  *count = r->n;
  return r->items;
}

bool td_json_same_text(const char *a, const char *b) {
  td_json_error e;
  cJSON *x = td_json_read(a, strlen(a), TD_JSON_KEEP_SURROGATES, &e);
  cJSON *y = x ? td_json_read(b, strlen(b), TD_JSON_KEEP_SURROGATES, &e) : NULL;
  bool same = x && y && td_json_same(x, y);
  cJSON_Delete(x);
  cJSON_Delete(y);
  return same;
}
