/* Keras's low-level API through the C ABI (issue 23): weights tensor by tensor.
 *
 *   kx_keras_api_tests
 */
#include <kx/kx.h>
#include <stdio.h>
#include <string.h>

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

#define EXPECT_OK(call)                                                                           \
  do {                                                                                            \
    kx_status st_ = (call);                                                                       \
    ++g_checks;                                                                                   \
    if (st_ != KX_OK) {                                                                           \
      ++g_failures;                                                                               \
      fprintf(stderr, "%s:%d: FAILED: %s returned %s: %s\n", __FILE__, __LINE__, #call,           \
              kx_status_name(st_), kx_last_error_message());                                      \
    }                                                                                             \
  } while (0)

#define SENTINEL ((void*)0x5a5a)

static kx_model* mlp(kx_strategy* s) {
  const int64_t shape[] = {28, 28};
  kx_model* m = NULL;
  EXPECT_OK(kx_model_create_sequential(s, shape, 2, &m));
  if (!m) return NULL;
  EXPECT_OK(kx_model_add_flatten(m));
  EXPECT_OK(kx_model_add_dense(m, 256, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_dense(m, 10, KX_ACT_SOFTMAX));
  return m;
}

static void test_weights_by_tensor(kx_strategy* s) {
  static const char* names[] = {"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"};
  static const int64_t sizes[] = {784 * 256, 256, 256 * 10, 10};
  static float flat[784 * 256 + 256 + 256 * 10 + 10];
  static float one[784 * 256];
  kx_model* m = mlp(s);
  int64_t i, offset = 0;
  char* name = (char*)SENTINEL;
  int64_t shape[KX_MAX_RANK];
  size_t rank = 99;
  if (!m) return;
  EXPECT(kx_model_num_weights(m) == 4);
  EXPECT(kx_model_num_weights(NULL) == -1);
  for (i = 0; i < 4; ++i) {
    int64_t off = -1;
    EXPECT_OK(kx_model_weight_info(m, i, &name, shape, &rank));
    EXPECT(name != NULL && strcmp(name, names[i]) == 0);
    EXPECT(rank == (i % 2 == 0 ? 2u : 1u));
    EXPECT(rank == 1 ? shape[0] == sizes[i] : shape[0] * shape[1] == sizes[i]);
    kx_free(name);
    EXPECT_OK(kx_model_weight_offset(m, i, &off));
    EXPECT(off == offset);
    offset += sizes[i];
  }
  EXPECT_OK(kx_model_weight_info(m, 0, NULL, shape, &rank)); /* each output is optional */
  EXPECT(shape[0] == 784 && shape[1] == 256);
  name = (char*)SENTINEL;
  EXPECT(kx_model_weight_info(m, 4, &name, shape, &rank) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_weight_info(m, -1, &name, shape, &rank) == KX_E_INVALID_ARGUMENT);
  EXPECT(name == (char*)SENTINEL); /* untouched on error */
  EXPECT(kx_model_get_weight(m, "dense/bias", flat, 256) == KX_E_MISUSE); /* before compile */

  EXPECT_OK(kx_model_compile(m, NULL));
  EXPECT_OK(kx_model_get_weights(m, flat, sizeof flat / sizeof flat[0]));
  EXPECT_OK(kx_model_get_weight(m, "dense/kernel", one, 784 * 256));
  EXPECT(memcmp(one, flat, sizeof(float) * 784 * 256) == 0);
  EXPECT(kx_model_get_weight(m, "dense/kernel", one, 784 * 256 - 1) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_get_weight(m, "dense_9/kernel", one, 784 * 256) == KX_E_INVALID_ARGUMENT);
  EXPECT(strstr(kx_last_error_message(), "dense_9/kernel") != NULL);
  EXPECT(kx_model_get_weight(m, NULL, one, 10) == KX_E_INVALID_ARGUMENT);
  for (i = 0; i < 10; ++i) one[i] = (float)i;
  EXPECT_OK(kx_model_set_weight(m, "dense_1/bias", one, 10));
  EXPECT(kx_model_set_weight(m, "dense_1/bias", one, 9) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_set_weight(m, "dense_1/bias", NULL, 10) == KX_E_INVALID_ARGUMENT);
  EXPECT_OK(kx_model_get_weights(m, flat, sizeof flat / sizeof flat[0]));
  for (i = 0; i < 10; ++i) EXPECT(flat[784 * 256 + 256 + 256 * 10 + i] == (float)i);
  kx_model_destroy(m);
}

int main(void) {
  kx_strategy* s = NULL;
  EXPECT_OK(kx_strategy_create_mirrored(NULL, 0, &s));
  if (s) test_weights_by_tensor(s);
  kx_strategy_destroy(s);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
