/* error.c: the thread-local last error that every fallible call sets. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char last_message[1024];
static _Thread_local int32_t last_status;

static void record(int32_t status, const char *fmt, va_list ap) {
  vsnprintf(last_message, sizeof last_message, fmt, ap);
  last_status = status;
}

int32_t td_fail(int32_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(status, fmt, ap);
  va_end(ap);
  return status;
}

void *td_fail_null(int32_t status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(status, fmt, ap);
  va_end(ap);
  return NULL;
}

TD_EXPORT const char *td_last_error(void) { return last_message; }
TD_EXPORT int32_t td_last_status(void) { return last_status; }

TD_EXPORT void td_set_error(int32_t status, const char *message) {
  td_fail(status, "%s", message ? message : "");
}

TD_EXPORT void td_clear_error(void) {
  last_message[0] = '\0';
  last_status = TD_OK;
}

const char *td_format_shape(char *buf, size_t len, int32_t ndim, const int64_t *shape) {
  size_t used = 0;
  used += (size_t)snprintf(buf, len, "[");
  for (int32_t i = 0; i < ndim && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (used < len) snprintf(buf + used, len - used, "]");
  return buf;
}

TD_EXPORT int32_t td_abi_version(void) { return TD_ABI_VERSION; }
TD_EXPORT const char *td_version_string(void) { return "0.1.0"; }
