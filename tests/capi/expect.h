/* The checks the C tests share: EXPECT(cond), and the counters main() reports. One test program per
 * translation unit includes it. */
#ifndef KX_TESTS_CAPI_EXPECT_H
#define KX_TESTS_CAPI_EXPECT_H
#include <stdio.h>

static int g_failures = 0;
static int g_checks = 0;

#define EXPECT(cond)                                                     \
  do {                                                                   \
    ++g_checks;                                                          \
    if (!(cond)) {                                                       \
      ++g_failures;                                                      \
      fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                    \
  } while (0)

#endif
