/*
 * json_read.c: JSON text (RFC 8259, plus Python's NaN, Infinity and -Infinity) into a
 * cJSON tree of td_json_ext nodes (json.h).
 *
 * cJSON's own parser cannot be used: it refuses Python's NaN and Infinity, cuts strings
 * at \u0000, keeps a number only as a double (losing 3.0 against 3 and digits past
 * 2^53), and says where it stopped but not why. Errors here name the problem and the
 * byte, in the words json.decode has always used ("expected ',' or ']' but found '2'").
 * Nesting is limited to TD_JSON_MAX_DEPTH levels.
 *
 * Each node is one block holding its key and its string or literal too: cJSON leaves
 * such a node's key alone (cJSON_StringIsConst) and, as it has no children, its
 * valuestring (cJSON_IsReference), so cJSON_Delete frees the block once. A tree only
 * walked and dropped (Lua's json.decode) takes its blocks from an arena instead, freed
 * at once: malloc and free were half the time of reading a small text.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

typedef struct reader {
  const char *start, *end;
  int flags;
  int depth;
  td_json_error *err;
  td_json_arena *arena;      /* NULL: nodes are malloc'd */
  td_sbuf key_buf, text_buf; /* keys and strings with escapes, decoded */
} reader;

/* Bytes and length of a decoded key or string. */
typedef struct span {
  const char *s;
  size_t n;
} span;

/* Records the first error; returns NULL so that callers can return its result. */
static cJSON *fail(reader *r, const char *p, const char *what) {
  if (!r->err->what) {
    r->err->what = what;
    r->err->at = (size_t)(p - r->start);
  }
  return NULL;
}

/* "expected <what> but found 'x'", or "unexpected end of input" at the end. */
static cJSON *unexpected(reader *r, const char *p, const char *expected) {
  if (p >= r->end) return fail(r, p, "unexpected end of input");
  unsigned char c = (unsigned char)*p;
  td_json_error *e = r->err;
  if (c >= 32 && c < 127)
    snprintf(e->what_buf, sizeof e->what_buf, "expected %s but found '%c'", expected, c);
  else
    snprintf(e->what_buf, sizeof e->what_buf, "expected %s but found byte 0x%02x", expected, c);
  return fail(r, p, e->what_buf);
}

static const char *skip(const reader *r, const char *p) {
  while (p < r->end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

static bool starts(const reader *r, const char *p, const char *lit) {
  size_t n = strlen(lit);
  return (size_t)(r->end - p) >= n && memcmp(p, lit, n) == 0;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* ------------------------------------------------------------------------- arenas */

typedef struct chunk {
  struct chunk *next;
  size_t used, cap;
  max_align_t data[];
} chunk;

struct td_json_arena {
  chunk *head; /* the chunk being filled; older ones follow */
};

td_json_arena *td_json_arena_new(void) { return calloc(1, sizeof(td_json_arena)); }

void td_json_arena_reset(td_json_arena *a) {
  chunk *c = a->head;
  if (!c) return;
  for (chunk *old = c->next, *next; old; old = next) { /* keep the newest, largest chunk */
    next = old->next;
    free(old);
  }
  c->next = NULL;
  c->used = 0;
  if (c->cap > (1u << 20)) { /* unless a large text grew it: not kept between texts */
    free(c);
    a->head = NULL;
  }
}

void td_json_arena_free(td_json_arena *a) {
  if (!a) return;
  td_json_arena_reset(a);
  free(a->head);
  free(a);
}

static void *arena_alloc(td_json_arena *a, size_t n) {
  n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  chunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    size_t cap = c ? 2 * c->cap : 4096;
    while (cap < n) cap *= 2;
    chunk *fresh = malloc(sizeof *fresh + cap);
    if (!fresh) return NULL;
    *fresh = (chunk){.next = c, .used = 0, .cap = cap};
    a->head = c = fresh;
  }
  void *p = (char *)c->data + c->used;
  c->used += n;
  return p;
}

/* Drops a partly read tree (an arena's goes with the arena). */
static void drop(const reader *r, cJSON *node) {
  if (!r->arena) cJSON_Delete(node);
}

/* -------------------------------------------------------------------------- nodes */

/* A node of type under key (key.s NULL: none) holding text (text.s NULL: none), in one
 * block. */
static cJSON *new_node(reader *r, const char *p, int type, span key, span text) {
  size_t kn = key.s ? key.n + 1 : 0, tn = text.s ? text.n + 1 : 0;
  size_t bytes = sizeof(td_json_ext) + kn + tn;
  td_json_ext *x = r->arena ? arena_alloc(r->arena, bytes) : malloc(bytes);
  if (!x) return fail(r, p, "out of memory");
  memset(x, 0, sizeof *x);
  char *tail = (char *)(x + 1);
  x->node.type = type | TD_JSON_EXT;
  if (key.s) {
    memcpy(tail, key.s, key.n);
    tail[key.n] = '\0';
    x->node.string = tail;
    x->node.type |= cJSON_StringIsConst;
    x->key_len = key.n;
    tail += kn;
  }
  if (text.s) {
    memcpy(tail, text.s, text.n);
    tail[text.n] = '\0';
    x->node.valuestring = tail;
    x->node.type |= cJSON_IsReference; /* a leaf: no children to keep either */
    x->text_len = text.n;
  }
  return &x->node;
}

/* A number node keeping its literal p[0, n) and its value. */
static cJSON *number(reader *r, const char *p, size_t n, double v, span key) {
  cJSON *node = new_node(r, p, cJSON_Number, key, (span){p, n});
  if (!node) return NULL;
  node->valuedouble = v;
  node->valueint = v >= INT32_MAX ? INT32_MAX : v <= INT32_MIN ? INT32_MIN : isnan(v) ? 0 : (int)v;
  return node;
}

/* The number at *pp (a '-' or a digit); *pp moves past it. */
static cJSON *read_number(reader *r, const char **pp, span key) {
  const char *s = *pp, *p = s;
  if (*p == '-') p++;
  if (p < r->end && *p == '0') {
    p++;
    if (p < r->end && is_digit(*p)) return fail(r, s, "leading zero in number");
  } else if (p < r->end && *p >= '1' && *p <= '9') {
    while (p < r->end && is_digit(*p)) p++;
  } else {
    return fail(r, s, "invalid number");
  }
  if (p < r->end && *p == '.') {
    const char *q = ++p;
    while (p < r->end && is_digit(*p)) p++;
    if (p == q) return fail(r, s, "invalid number");
  }
  if (p < r->end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < r->end && (*p == '+' || *p == '-')) p++;
    const char *q = p;
    while (p < r->end && is_digit(*p)) p++;
    if (p == q) return fail(r, s, "invalid number");
  }
  double v = 0;
  if (!td_parse_double(s, p - s, &v)) return fail(r, s, "invalid number");
  *pp = p;
  return number(r, s, (size_t)(p - s), v, key);
}

static int hex4(const reader *r, const char *p) {
  if (r->end - p < 4) return -1;
  int v = 0;
  for (int k = 0; k < 4; k++) {
    int h = td_hex_value(p[k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

/* A code point as UTF-8 (a lone surrogate as its 3-byte form, as WTF-8 does). */
static void put_utf8(td_sbuf *b, uint32_t cp) {
  char t[4];
  size_t n;
  if (cp < 0x80) {
    t[0] = (char)cp, n = 1;
  } else if (cp < 0x800) {
    t[0] = (char)(0xC0 | (cp >> 6)), t[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
  } else if (cp < 0x10000) {
    t[0] = (char)(0xE0 | (cp >> 12)), t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    t[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
  } else {
    t[0] = (char)(0xF0 | (cp >> 18)), t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    t[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), t[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
  }
  td_sb_put(b, t, n);
}

/* The \u escape whose backslash is at bs into b; the position after it, or NULL. */
static const char *unicode_escape(reader *r, const char *bs, td_sbuf *b) {
  int cp = hex4(r, bs + 2);
  if (cp < 0) return fail(r, bs, "invalid \\u escape"), NULL;
  const char *after = bs + 6;
  if (cp >= 0xD800 && cp <= 0xDFFF) {
    int lo = cp <= 0xDBFF && r->end - after >= 2 && after[0] == '\\' && after[1] == 'u'
                 ? hex4(r, after + 2)
                 : -1;
    if (lo >= 0xDC00 && lo <= 0xDFFF) {
      put_utf8(b, 0x10000 + (((uint32_t)cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00));
      return after + 6;
    }
    if (!(r->flags & TD_JSON_KEEP_SURROGATES)) return fail(r, bs, "unpaired surrogate"), NULL;
  }
  put_utf8(b, (uint32_t)cp);
  return after;
}

static int unescape(char e) {
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

/* With TD_JSON_VALID_UTF8: false, and the error at the first byte of the raw run
 * [s, e) that does not start a well-formed UTF-8 sequence (escapes are checked apart:
 * they decode to well-formed UTF-8, lone surrogates aside). */
static bool valid_run(reader *r, const char *s, const char *e) {
  if (!(r->flags & TD_JSON_VALID_UTF8)) return true;
  for (const char *p = s; p < e;) {
    if ((unsigned char)*p < 0x80) {
      p++;
      continue;
    }
    uint32_t cp;
    size_t len = td_utf8_decode((const unsigned char *)p, (size_t)(e - p), &cp, false);
    if (len == 0) {
      snprintf(r->err->what_buf, sizeof r->err->what_buf, "invalid UTF-8 in a string (byte 0x%02x)",
               (unsigned char)*p);
      return fail(r, p, r->err->what_buf), false;
    }
    p += len;
  }
  return true;
}

/* The string whose opening quote is at *pp: its bytes in the text itself when it holds
 * no escape (most do), else decoded into b. *pp moves past it. */
static bool read_string(reader *r, const char **pp, td_sbuf *b, span *out) {
  const char *open = *pp, *p = open + 1;
  while (p < r->end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
  if (!valid_run(r, open + 1, p)) return false;
  if (p < r->end && *p == '"') {
    *out = (span){open + 1, (size_t)(p - open - 1)};
    *pp = p + 1;
    return true;
  }
  b->n = 0;
  td_sb_put(b, open + 1, (size_t)(p - open - 1));
  for (;;) {
    if (p >= r->end) return fail(r, open, "unterminated string"), false;
    if (*p == '"') break;
    if (*p != '\\') return fail(r, p, "control character in string"), false;
    if (p + 1 >= r->end) return fail(r, open, "unterminated string"), false;
    unsigned char e = (unsigned char)p[1];
    int c = unescape((char)e);
    if (c >= 0) {
      td_sb_putc(b, (char)c);
      p += 2;
    } else if (e == 'u') {
      if (!(p = unicode_escape(r, p, b))) return false;
    } else if (e > 32 && e < 127) {
      snprintf(r->err->what_buf, sizeof r->err->what_buf, "invalid escape '\\%c'", e);
      return fail(r, p, r->err->what_buf), false;
    } else {
      return fail(r, p, "invalid escape"), false;
    }
    const char *run = p;
    while (p < r->end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
    if (!valid_run(r, run, p)) return false;
    td_sb_put(b, run, (size_t)(p - run));
  }
  if (b->oom) return fail(r, open, "out of memory"), false;
  *out = (span){b->p ? b->p : "", b->n};
  *pp = p + 1;
  return true;
}

static cJSON *read_value(reader *r, const char **pp, span key);

/* Appends item after *last under parent. */
static void link(cJSON *parent, cJSON **last, cJSON *item) {
  if (*last) {
    (*last)->next = item;
    item->prev = *last;
  } else {
    parent->child = item;
  }
  *last = item;
  parent->child->prev = item; /* cJSON keeps the last element in the first one's prev */
}

/* An array or object whose bracket is at *pp; *pp moves past its end. */
static cJSON *read_container(reader *r, const char **pp, span key, bool object) {
  const char *p = *pp;
  if (++r->depth > TD_JSON_MAX_DEPTH) {
    snprintf(r->err->what_buf, sizeof r->err->what_buf, "nesting deeper than %d levels",
             TD_JSON_MAX_DEPTH);
    return fail(r, p, r->err->what_buf);
  }
  char close = object ? '}' : ']';
  cJSON *node = new_node(r, p, object ? cJSON_Object : cJSON_Array, key, (span){0}), *last = NULL;
  if (!node) return NULL;
  p = skip(r, p + 1);
  if (p < r->end && *p == close) {
    *pp = p + 1;
    r->depth--;
    return node;
  }
  for (;;) {
    span member = {0};
    if (object) {
      if (p >= r->end || *p != '"') {
        unexpected(r, p, "a string key");
        break;
      }
      if (!read_string(r, &p, &r->key_buf, &member)) break;
      p = skip(r, p);
      if (p >= r->end || *p != ':') {
        unexpected(r, p, "':'");
        break;
      }
      p = skip(r, p + 1);
    }
    cJSON *item = read_value(r, &p, member);
    if (!item) break;
    link(node, &last, item);
    p = skip(r, p);
    if (p < r->end && *p == close) {
      *pp = p + 1;
      r->depth--;
      return node;
    }
    if (p >= r->end || *p != ',') {
      unexpected(r, p, object ? "',' or '}'" : "',' or ']'");
      break;
    }
    p = skip(r, p + 1);
  }
  drop(r, node);
  return NULL;
}

static cJSON *literal(reader *r, const char **pp, span key, const char *lit, int type, double v) {
  const char *p = *pp;
  if (!starts(r, p, lit)) return unexpected(r, p, "a value");
  *pp = p + strlen(lit);
  if (type == cJSON_Number) return number(r, p, strlen(lit), v, key);
  return new_node(r, p, type, key, (span){0});
}

/* The value at *pp (not whitespace) under key; *pp moves past it. */
static cJSON *read_value(reader *r, const char **pp, span key) {
  const char *p = *pp;
  if (p >= r->end) return unexpected(r, p, "a value");
  switch (*p) {
    case '"': {
      span text;
      if (!read_string(r, pp, &r->text_buf, &text)) return NULL;
      return new_node(r, p, cJSON_String, key, text);
    }
    case '{': return read_container(r, pp, key, true);
    case '[': return read_container(r, pp, key, false);
    case 't': return literal(r, pp, key, "true", cJSON_True, 0);
    case 'f': return literal(r, pp, key, "false", cJSON_False, 0);
    case 'n': return literal(r, pp, key, "null", cJSON_NULL, 0);
    case 'N': return literal(r, pp, key, "NaN", cJSON_Number, NAN);
    case 'I': return literal(r, pp, key, "Infinity", cJSON_Number, INFINITY);
    case '-':
      if (starts(r, p, "-Infinity"))
        return literal(r, pp, key, "-Infinity", cJSON_Number, -INFINITY);
      return read_number(r, pp, key);
    default:
      if (is_digit(*p)) return read_number(r, pp, key);
      return unexpected(r, p, "a value");
  }
}

cJSON *td_json_read(const char *text, size_t len, int flags, td_json_error *err) {
  return td_json_read_in(NULL, text, len, flags, err);
}

cJSON *td_json_read_in(td_json_arena *arena, const char *text, size_t len, int flags,
                       td_json_error *err) {
  memset(err, 0, sizeof *err);
  reader r = {.start = text, .end = text + len, .flags = flags, .err = err, .arena = arena};
  const char *p = skip(&r, text);
  cJSON *root = read_value(&r, &p, (span){0});
  if (root && (p = skip(&r, p)) < r.end) {
    drop(&r, root);
    root = fail(&r, p, "trailing garbage");
  }
  free(r.key_buf.p);
  free(r.text_buf.p);
  return root;
}
