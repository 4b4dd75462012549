/* Keras's low-level API through the C ABI (issue 23): weights tensor by tensor, zeros that are meant, train_on_batch,
 * BatchNormalization's settings in double.
 *
 *   kx_keras_api_tests
 */
/* These tests call the deprecated twins too: they stay part of the ABI. */
#define KX_ALLOW_DEPRECATED
#include <kx/kx.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"

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

/* Trains a small MLP 20 steps with the given options and returns its weights in w (4*8+8+8*3+3 floats). */
static void train_small(kx_strategy* s, const kx_compile_options* co, float* w) {
  enum { kSamples = 64 };
  static float x[kSamples * 4], y[kSamples];
  const int64_t in_shape[] = {4}, x_shape[] = {kSamples, 4}, y_shape[] = {kSamples};
  kx_model* m = NULL;
  kx_dataset* d = NULL;
  kx_fit_options fo;
  int i;
  for (i = 0; i < kSamples * 4; ++i) x[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
  for (i = 0; i < kSamples; ++i) y[i] = (float)(i % 3);
  EXPECT_OK(kx_model_create_sequential(s, in_shape, 1, &m));
  EXPECT_OK(kx_model_add_dense(m, 8, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_dense(m, 3, KX_ACT_SOFTMAX));
  EXPECT_OK(kx_model_compile(m, co));
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, x_shape, 2, y, KX_DTYPE_F32, y_shape, 1, &d));
  EXPECT_OK(kx_dataset_batch(d, 16, 0));
  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = 5;
  EXPECT_OK(kx_fit(m, d, &fo, NULL, NULL));
  EXPECT_OK(kx_model_get_weights(m, w, 4 * 8 + 8 + 8 * 3 + 3));
  kx_dataset_destroy(d);
  kx_model_destroy(m);
}

/* A zero marked as meant is the value itself: beta1 = 0 trains exactly as a beta1 too small to change
 * any float32 (1e-30), while an unmarked zero still means Keras's default 0.9. */
static void test_explicit_zeros(kx_strategy* s) {
  enum { kWeights = 4 * 8 + 8 + 8 * 3 + 3 };
  float zero[kWeights], tiny[kWeights], unmarked[kWeights], defaults[kWeights];
  kx_compile_options co;
  kx_compile_options_init(&co, sizeof co);
  co.learning_rate = 0.05;
  train_small(s, &co, defaults);
  co.beta1 = 0;
  train_small(s, &co, unmarked);
  EXPECT(memcmp(unmarked, defaults, sizeof defaults) == 0);
  co.zero_is_value = KX_COMPILE_ZERO_BETA1;
  train_small(s, &co, zero);
  EXPECT(memcmp(zero, defaults, sizeof defaults) != 0);
  co.beta1 = 1e-30;
  train_small(s, &co, tiny);
  EXPECT(memcmp(zero, tiny, sizeof tiny) == 0);
  /* A learning rate of 0 leaves the weights as initialised. */
  {
    kx_compile_options still;
    float before[kWeights];
    kx_model* m = NULL;
    const int64_t in_shape[] = {4};
    kx_compile_options_init(&still, sizeof still);
    still.zero_is_value = KX_COMPILE_ZERO_LEARNING_RATE;
    EXPECT_OK(kx_model_create_sequential(s, in_shape, 1, &m));
    EXPECT_OK(kx_model_add_dense(m, 8, KX_ACT_RELU));
    EXPECT_OK(kx_model_add_dense(m, 3, KX_ACT_SOFTMAX));
    EXPECT_OK(kx_model_compile(m, &still));
    EXPECT_OK(kx_model_get_weights(m, before, kWeights));
    kx_model_destroy(m);
    train_small(s, &still, zero);
    EXPECT(memcmp(zero, before, sizeof before) == 0);
  }
  co.zero_is_value = 1024u; /* not a KX_COMPILE_ZERO_* bit */
  {
    kx_model* m = NULL;
    const int64_t in_shape[] = {4};
    EXPECT_OK(kx_model_create_sequential(s, in_shape, 1, &m));
    EXPECT_OK(kx_model_add_dense(m, 3, KX_ACT_SOFTMAX));
    EXPECT(kx_model_compile(m, &co) == KX_E_INVALID_ARGUMENT);
    kx_model_destroy(m);
  }
}

/* One kx_model_train_on_batch is one step of kx_fit on that batch: same loss, same weights. */
static void test_train_on_batch(kx_strategy* s) {
  enum { kSamples = 24, kWeights = 4 * 8 + 8 + 8 * 3 + 3 };
  static float x[kSamples * 4], y[kSamples];
  float by_fit[kWeights], by_batch[kWeights];
  const int64_t in_shape[] = {4}, x_shape[] = {kSamples, 4}, y_shape[] = {kSamples};
  kx_model* models[2] = {NULL, NULL};
  kx_compile_options co;
  kx_fit_options fo;
  kx_dataset* d = NULL;
  kx_history* h = NULL;
  double fit_loss = 0, loss = -1, accuracy = -1, test_loss = -1;
  int i;
  for (i = 0; i < kSamples * 4; ++i) x[i] = (float)((i * 29) % 13) / 13.0f - 0.5f;
  for (i = 0; i < kSamples; ++i) y[i] = (float)(i % 3);
  kx_compile_options_init(&co, sizeof co);
  co.metrics = KX_METRIC_ACCURACY;
  for (i = 0; i < 2; ++i) {
    EXPECT_OK(kx_model_create_sequential(s, in_shape, 1, &models[i]));
    if (!models[i]) return;
    EXPECT_OK(kx_model_add_dense(models[i], 8, KX_ACT_RELU));
    EXPECT_OK(kx_model_add_dense(models[i], 3, KX_ACT_SOFTMAX));
    EXPECT_OK(kx_model_compile(models[i], &co));
  }
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, x_shape, 2, y, KX_DTYPE_F32, y_shape, 1, &d));
  EXPECT_OK(kx_dataset_batch(d, kSamples, 0));
  kx_fit_options_init(&fo, sizeof fo);
  EXPECT_OK(kx_fit(models[0], d, &fo, NULL, &h));
  EXPECT_OK(kx_history_get(h, "loss", 0, &fit_loss));
  EXPECT_OK(kx_model_test_on_batch(models[1], x, y, kSamples, &test_loss, NULL));
  EXPECT_OK(kx_model_train_on_batch(models[1], x, y, kSamples, &loss, &accuracy));
  EXPECT(loss == fit_loss && loss == test_loss);
  EXPECT(accuracy >= 0 && accuracy <= 1);
  EXPECT_OK(kx_model_get_weights(models[0], by_fit, kWeights));
  EXPECT_OK(kx_model_get_weights(models[1], by_batch, kWeights));
  EXPECT(memcmp(by_fit, by_batch, sizeof by_fit) == 0);
  loss = -1;
  EXPECT(kx_model_train_on_batch(models[1], x, NULL, kSamples, &loss, NULL) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_train_on_batch(models[1], x, y, 0, &loss, NULL) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_test_on_batch(NULL, x, y, kSamples, &loss, NULL) == KX_E_INVALID_ARGUMENT);
  EXPECT(loss == -1); /* untouched on error */
  kx_history_destroy(h);
  kx_dataset_destroy(d);
  kx_model_destroy(models[0]);
  kx_model_destroy(models[1]);
}

/* BatchNormalization's momentum in double: the moving mean after one step from zero is mean * float32(1 -
 * 0.99) = mean * 0.01f exactly, as Keras 3 computes moving * momentum + mean * (1 - momentum); and the
 * model's JSON holds 0.99. Every sample equal makes the batch mean exact. */
static void test_batch_norm_momentum_in_double(kx_strategy* s) {
  enum { kSamples = 16 };
  static const float column[4] = {0.75f, -1.5f, 3.0f, 0.3f};
  static float x[kSamples * 4], y[kSamples * 4];
  const int64_t in_shape[] = {4}, x_shape[] = {kSamples, 4}, y_shape[] = {kSamples, 4};
  float moving_mean[4];
  kx_model* m = NULL;
  kx_dataset* d = NULL;
  kx_compile_options co;
  kx_fit_options fo;
  char* json = NULL;
  int i;
  for (i = 0; i < kSamples * 4; ++i) x[i] = column[i % 4], y[i] = 0;
  EXPECT_OK(kx_model_create_sequential(s, in_shape, 1, &m));
  if (!m) return;
  EXPECT_OK(kx_model_add_batch_normalization(m, 0.99, 1e-3));
  EXPECT(kx_model_add_batch_normalization(m, 1.5, 1e-3) == KX_E_INVALID_ARGUMENT);
  kx_compile_options_init(&co, sizeof co);
  co.loss = KX_LOSS_MEAN_SQUARED_ERROR;
  co.optimizer = KX_OPTIMIZER_SGD;
  EXPECT_OK(kx_model_compile(m, &co));
  EXPECT_OK(kx_model_to_json(m, &json));
  EXPECT(json != NULL && strstr(json, "\"momentum\": 0.99,") != NULL);
  kx_free(json);
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, x_shape, 2, y, KX_DTYPE_F32, y_shape, 2, &d));
  EXPECT_OK(kx_dataset_batch(d, kSamples, 0));
  kx_fit_options_init(&fo, sizeof fo);
  EXPECT_OK(kx_fit(m, d, &fo, NULL, NULL));
  EXPECT_OK(kx_model_get_weight(m, "batch_normalization/moving_mean", moving_mean, 4));
  for (i = 0; i < 4; ++i) EXPECT(moving_mean[i] == column[i] * 0.01f);
  kx_dataset_destroy(d);
  kx_model_destroy(m);
}

int main(void) {
  kx_strategy* s = NULL;
  EXPECT_OK(kx_strategy_create_mirrored(NULL, 0, &s));
  if (s) test_weights_by_tensor(s);
  if (s) test_explicit_zeros(s);
  if (s) test_train_on_batch(s);
  if (s) test_batch_norm_momentum_in_double(s);
  kx_strategy_destroy(s);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
