/*
 * json.h: the library's one JSON layer (json.c, json_read.c, json_write.c), as the rest
 * of the C core uses it. Lua reaches the same code through the FFI (the td_json_* calls
 * in tensordict.h).
 *
 * Trees are cJSON's (cJSON_Delete, cJSON_IsString, cJSON_CreateObject... all work on
 * them), with one extension for what a cJSON node cannot hold: a node made by this layer
 * is a td_json_ext, flagged TD_JSON_EXT in its type, that also knows
 *   - the byte length of its key and of its string, which may hold NUL bytes (\u0000);
 *   - for a number, its literal as written (valuestring), so that Python's NaN, Infinity
 *     and -Infinity, integers past 2^53 and floats such as 3.0 are written back as they
 *     were read. valuedouble holds the number's value as a double all the same.
 * Nodes cJSON made (cJSON_CreateString...) mix freely with these: the accessors below
 * fall back on strlen, and a number without a literal is written in 17 digits.
 */
#ifndef TD_JSON_H
#define TD_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "internal.h"

enum { TD_JSON_EXT = 1 << 12 }; /* above cJSON's type bits, which cJSON masks with 0xFF */

typedef struct td_json_ext {
  cJSON node; /* first: cJSON_Delete frees the whole block */
  size_t key_len;
  size_t text_len; /* of valuestring: a string's bytes or a number's literal */
} td_json_ext;

/* ---- nodes (json.c) ---- */
/* A key's bytes and length (a member of an object; NULL for others). */
const char *td_json_key_of(const cJSON *n, size_t *len);
/* A string's bytes, or a number's literal (NULL for a number made from a double). */
const char *td_json_text_of(const cJSON *n, size_t *len);
/* The member of obj named key exactly (lengths compared, so "a" is not "a\0b"), or NULL. */
const cJSON *td_json_get(const cJSON *obj, const char *key);
/* A number as int64: 1 when its literal is an integer that fits, -1 when an integer that
 * does not, 0 when not an integer (a fraction, an exponent, NaN, or not a number). */
int td_json_int64(const cJSON *n, int64_t *out);
/* The enum td_json_type of a node. */
int32_t td_json_type_of(const cJSON *n);
/* "a number", "a string", "null", ... for messages. */
const char *td_json_kind_name(const cJSON *n);
/* New nodes of this layer: of a cJSON type (cJSON_Object...), a string of n bytes (NUL
 * bytes allowed), an integer (its literal exact). NULL when out of memory. */
cJSON *td_json_new(int type);
cJSON *td_json_new_string(const char *s, size_t n);
cJSON *td_json_new_int(int64_t v);
/* Adds item (NULL: out of memory) to obj under key (key_len bytes, which may hold NUL
 * when item is a node of this layer); false when it cannot (item deleted). */
bool td_json_add(cJSON *obj, const char *key, size_t key_len, cJSON *item);
/* Whether a and b hold the same value: numbers by value (NaN equals NaN), strings by
 * bytes, objects by members whatever their order, arrays element by element. */
bool td_json_same(const cJSON *a, const cJSON *b);
/* td_json_same of two JSON texts (false when either does not parse). */
bool td_json_same_text(const char *a, const char *b);

/* ---- reading (json_read.c) ---- */
enum { TD_JSON_MAX_DEPTH = 1000 }; /* as Python's json, both ways */
enum {
  /* Lone UTF-16 surrogates (\ud800) kept as their 3-byte form (WTF-8), as a file Python
   * wrote may hold them; without it they are an error. */
  TD_JSON_KEEP_SURROGATES = 1,
  /* The raw bytes of every string and key must be well-formed UTF-8 (RFC 8259, 3629):
   * texts people write (recipes), where a stray byte would fail later as a file name. */
  TD_JSON_VALID_UTF8 = 2
};
/* What went wrong and where (a byte offset from 0); what is "out of memory" when so. */
typedef struct td_json_error {
  const char *what;
  size_t at;
  char what_buf[64];
} td_json_error;
/* The tree of text[0, len) (free it with cJSON_Delete), or NULL and *err. */
cJSON *td_json_read(const char *text, size_t len, int flags, td_json_error *err);
/* The same with the nodes in arena: the tree lives until td_json_arena_reset (never
 * cJSON_Delete it). */
typedef struct td_json_arena td_json_arena;
td_json_arena *td_json_arena_new(void);
void td_json_arena_reset(td_json_arena *a);
void td_json_arena_free(td_json_arena *a);
cJSON *td_json_read_in(td_json_arena *arena, const char *text, size_t len, int flags,
                       td_json_error *err);

/* ---- writing (json_write.c) ---- */
enum td_json_style {
  TD_JSON_COMPACT,       /* "," and ":", UTF-8 passed through: the texts of values */
  TD_JSON_PYTHON,        /* json.dumps: ", " and ": ", all but printable ASCII escaped */
  TD_JSON_PYTHON_COMPACT /* json.dumps(separators=(",", ":")), as NonTensorStack folders */
};
/* Appends n as JSON text in style; false on invalid UTF-8 in a Python style (Python's
 * files are UTF-8). A cJSON_Raw node is copied as it is. */
bool td_json_put(td_sbuf *b, const cJSON *n, int style);
bool td_json_put_string(td_sbuf *b, const char *s, size_t n, int style);
/* n's text in style (the caller frees it), or NULL: out of memory, or *bad_utf8. */
char *td_json_print(const cJSON *n, int style, size_t *len, bool *bad_utf8);

#endif
