/*
 * json.c: JSON documents read through cJSON, walked from Lua through the FFI.
 *
 * C never calls Lua, so the Lua side walks the parsed tree with a handful of
 * accessors instead of receiving a converted value. A parse error names the line and
 * column where cJSON stopped, with a short excerpt of the text there, because a
 * recipe's author needs to find the mistake, not an offset.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct td_json {
  cJSON *root;
};

/* Line and column (1-based, columns in bytes) of offset in text. */
static void line_col(const char *text, int64_t offset, int64_t *line, int64_t *col) {
  *line = 1;
  *col = 1;
  for (int64_t i = 0; i < offset; i++) {
    if (text[i] == '\n') {
      ++*line;
      *col = 1;
    } else {
      ++*col;
    }
  }
}

/* The offset of a "\u0000" escape outside any earlier escape, or -1: cJSON would cut
 * the string there, silently losing the rest. */
static int64_t find_nul_escape(const char *text, int64_t len) {
  for (int64_t i = 0; i + 5 < len; i++) {
    if (text[i] != '\\') continue;
    if (memcmp(text + i + 1, "u0000", 5) == 0) return i;
    i++; /* skip the escaped character, so "\\u0000" is not taken for one */
  }
  return -1;
}

static void fail_at(const char *text, int64_t len, int64_t offset, const char *what) {
  int64_t line, col;
  if (offset > len) offset = len;
  line_col(text, offset, &line, &col);
  char excerpt[24];
  int64_t n = 0;
  for (int64_t i = offset; i < len && n < (int64_t)sizeof excerpt - 1 && text[i] != '\n'; i++)
    excerpt[n++] = text[i];
  excerpt[n] = '\0';
  if (n == 0)
    td_fail(TD_EINVAL, "line %lld, column %lld: %s at the end of the text", (long long)line,
            (long long)col, what);
  else
    td_fail(TD_EINVAL, "line %lld, column %lld: %s near '%s'", (long long)line, (long long)col,
            what, excerpt);
}

TD_EXPORT td_json *td_json_parse(const char *text, int64_t len) {
  if (!text || len < 0) return td_fail_null(TD_EINVAL, "json: no text given");
  int64_t nul = find_nul_escape(text, len);
  if (nul >= 0) {
    fail_at(text, len, nul, "\\u0000 (a NUL character) is not supported in strings");
    return NULL;
  }
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)len, &end, 0);
  if (!root) {
    int64_t offset = end ? (int64_t)(end - text) : len;
    fail_at(text, len, offset, "invalid JSON");
    return NULL;
  }
  /* only whitespace may follow the value */
  int64_t pos = (int64_t)(end - text);
  while (pos < len && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' ||
                       text[pos] == '\r'))
    pos++;
  if (pos < len && text[pos] != '\0') {
    cJSON_Delete(root);
    fail_at(text, len, pos, "text after the JSON value");
    return NULL;
  }
  td_json *doc = malloc(sizeof *doc);
  if (!doc) {
    cJSON_Delete(root);
    return td_fail_null(TD_ENOMEM, "json: out of memory");
  }
  doc->root = root;
  return doc;
}

TD_EXPORT void td_json_free(td_json *doc) {
  if (!doc) return;
  cJSON_Delete(doc->root);
  free(doc);
}

TD_EXPORT const td_json_node *td_json_root(const td_json *doc) {
  return (const td_json_node *)doc->root;
}

TD_EXPORT int32_t td_json_type(const td_json_node *node) {
  const cJSON *n = (const cJSON *)node;
  if (cJSON_IsNull(n)) return TD_JSON_NULL;
  if (cJSON_IsFalse(n)) return TD_JSON_FALSE;
  if (cJSON_IsTrue(n)) return TD_JSON_TRUE;
  if (cJSON_IsNumber(n)) return TD_JSON_NUMBER;
  if (cJSON_IsString(n)) return TD_JSON_STRING;
  if (cJSON_IsArray(n)) return TD_JSON_ARRAY;
  return TD_JSON_OBJECT;
}

TD_EXPORT const td_json_node *td_json_child(const td_json_node *node) {
  return (const td_json_node *)((const cJSON *)node)->child;
}

TD_EXPORT const td_json_node *td_json_next(const td_json_node *node) {
  return (const td_json_node *)((const cJSON *)node)->next;
}

TD_EXPORT const char *td_json_key(const td_json_node *node) {
  return ((const cJSON *)node)->string;
}

TD_EXPORT double td_json_number(const td_json_node *node) {
  return ((const cJSON *)node)->valuedouble;
}

TD_EXPORT const char *td_json_string(const td_json_node *node) {
  return ((const cJSON *)node)->valuestring;
}
