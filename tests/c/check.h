/*
 * check.h: the few assertions the C tests use. Each CHECK counts one pass or one
 * failure (printing where and why); main ends with CHECK_SUMMARY(), which prints
 * "N passed, N failed" and returns non-zero on any failure.
 */
#ifndef TD_CHECK_H
#define TD_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensordict.h"

static int check_passed, check_failed;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (cond) {                                                                  \
      check_passed++;                                                            \
    } else {                                                                     \
      check_failed++;                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__,   \
              __LINE__, #cond, td_last_error());                                 \
    }                                                                            \
  } while (0)

#define CHECK_EQ_I(a, b)                                                         \
  do {                                                                           \
    long long check_a_ = (long long)(a), check_b_ = (long long)(b);              \
    if (check_a_ == check_b_) {                                                  \
      check_passed++;                                                            \
    } else {                                                                     \
      check_failed++;                                                            \
      fprintf(stderr, "%s:%d: %s == %s failed: %lld vs %lld\n", __FILE__,        \
              __LINE__, #a, #b, check_a_, check_b_);                             \
    }                                                                            \
  } while (0)

/* The last error must contain the given text. */
#define CHECK_ERROR(text) CHECK(strstr(td_last_error(), (text)) != NULL)

#define CHECK_SUMMARY()                                                          \
  do {                                                                           \
    printf("%d passed, %d failed\n", check_passed, check_failed);                \
    return check_failed ? 1 : 0;                                                 \
  } while (0)

#endif
