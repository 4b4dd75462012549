/* Sizes beyond reason from a C caller: each is KX_E_INVALID_ARGUMENT with a message, nothing is read
 * past the caller's buffer (ASan would stop this test), and the model is unchanged.
 *
 *   kx_sizes_tests
 */
#include <kx/kx.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"

#define EXPECT_INVALID(call)                                                                         \
  do {                                                                                               \
    kx_status st_ = (call);                                                                          \
    ++g_checks;                                                                                      \
    if (st_ != KX_E_INVALID_ARGUMENT || kx_last_error_message()[0] == '\0') {                       \
      ++g_failures;                                                                                  \
      fprintf(stderr, "%s:%d: FAILED: %s returned %d: %s\n", __FILE__, __LINE__, #call, (int)st_,    \
              kx_last_error_message());                                                              \
    }                                                                                                \
  } while (0)

int main(void) {
  kx_strategy* s = NULL;
  kx_model* m = NULL;
  const int64_t shape[1] = {4};
  float three[3] = {1, 2, 3};
  float before[64], after[64];
  if (kx_strategy_create_default(&s) != KX_OK || kx_model_create_sequential(s, shape, 1, &m) != KX_OK) {
    fprintf(stderr, "setup: %s\n", kx_last_error_message());
    return 1;
  }
  EXPECT_INVALID(kx_model_add_normalization(m, three, three, SIZE_MAX));
  EXPECT_INVALID(kx_model_add_normalization(m, three, three, (size_t)1 << 50));
  EXPECT(kx_model_num_layers(m) == 0);
  EXPECT(kx_model_add_dense_flags(m, 5, KX_ACT_RELU, 0) == KX_OK);
  EXPECT(kx_model_compile(m, NULL) == KX_OK);
  EXPECT(kx_model_num_params(m) == 25);
  EXPECT(kx_model_get_weights(m, before, 64) == KX_OK);
  EXPECT_INVALID(kx_model_set_weights(m, three, SIZE_MAX));
  /* A count larger than the 3-float buffer: refused before the buffer is read. */
  EXPECT_INVALID(kx_model_set_weights(m, three, 40));
  EXPECT_INVALID(kx_model_set_weights(m, three, 3));
  EXPECT(kx_model_get_weights(m, after, 64) == KX_OK);
  EXPECT(memcmp(before, after, 25 * sizeof(float)) == 0);
  kx_model_destroy(m);
  kx_strategy_destroy(s);
  printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
  return g_failures == 0 ? 0 : 1;
}
