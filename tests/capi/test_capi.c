/* The C ABI from C: every exported function with bad input (NULL handles and out-pointers, bad sizes,
 * wrong order) returns the documented error and a message, and leaves out-parameters untouched; then
 * a small working flow. Run under ASan/LSan in CI, which also checks that nothing leaks.
 *
 *   kx_capi_tests [scratch_dir]
 */
/* These tests call the deprecated twins too: they stay part of the ABI. */
#define KX_ALLOW_DEPRECATED
#include <kx/kx.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "expect.h"

/* The call fails with `code` and leaves a non-empty message. */
#define EXPECT_ERR(code, call)                                                                   \
  do {                                                                                           \
    kx_status st_ = (call);                                                                      \
    ++g_checks;                                                                                  \
    if (st_ != (code) || kx_last_error_message()[0] == '\0') {                                   \
      ++g_failures;                                                                              \
      fprintf(stderr, "%s:%d: FAILED: %s returned %d (want %d), message \"%s\"\n", __FILE__,     \
              __LINE__, #call, (int)st_, (int)(code), kx_last_error_message());                  \
    }                                                                                            \
  } while (0)

#define EXPECT_OK(call)                                                                              \
  do {                                                                                               \
    kx_status st_ = (call);                                                                          \
    ++g_checks;                                                                                      \
    if (st_ != KX_OK) {                                                                              \
      ++g_failures;                                                                                  \
      fprintf(stderr, "%s:%d: FAILED: %s returned %d: %s\n", __FILE__, __LINE__, #call, (int)st_,    \
              kx_last_error_message());                                                              \
    }                                                                                                \
  } while (0)

#define SENTINEL ((void*)0x5a5a)

static int32_t stop_after_three_batches(const kx_event* ev, void* user_data) {
  int* batches = (int*)user_data;
  if (ev->kind == KX_EVENT_BATCH_END) ++*batches;
  return *batches >= 3;
}

static void test_library_and_devices(void) {
  char name[16];
  memset(name, 'x', sizeof name);
  EXPECT(kx_version_number() == 100);
  EXPECT(strcmp(kx_version_string(), "0.1.0") == 0);
  kx_free(NULL);
  EXPECT(kx_device_count(KX_DEVICE_CPU) == 1);
  EXPECT(kx_device_count(KX_DEVICE_CUDA) >= 0);
  EXPECT(kx_device_count((kx_device_kind)7) == -1 && kx_last_error_message()[0] != '\0');
  EXPECT_OK(kx_device_name(KX_DEVICE_CPU, 0, name, sizeof name));
  EXPECT(strcmp(name, "cpu") == 0);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_device_name(KX_DEVICE_CPU, 1, name, sizeof name));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_device_name(KX_DEVICE_CPU, -1, name, sizeof name));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_device_name(KX_DEVICE_CPU, 0, NULL, 16));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_device_name(KX_DEVICE_CPU, 0, name, 3)); /* "cpu" + NUL needs 4 */
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_device_name((kx_device_kind)9, 0, name, sizeof name));
  {
    char* text = NULL;
    EXPECT_OK(kx_device_status(KX_DEVICE_CPU, &text));
    EXPECT(text != NULL && strncmp(text, "cpu: ", 5) == 0);
    kx_free(text);
    text = NULL;
    EXPECT_OK(kx_device_status(KX_DEVICE_CUDA, &text)); /* the module and devices, or why there are none */
    EXPECT(text != NULL && strlen(text) > 0);
    kx_free(text);
    text = (char*)SENTINEL;
    EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_device_status((kx_device_kind)9, &text));
    EXPECT(text == (char*)SENTINEL); /* untouched on error */
    EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_device_status(KX_DEVICE_CPU, NULL));
  }
}

static void test_strategies(void) {
  kx_strategy* s = (kx_strategy*)SENTINEL;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_strategy_set_tf32(NULL, 0));
  const char* two_cpus[2] = {"cpu", "cpu"};
  const char* bad[1] = {"tpu:0"};
  const char* gpu[1] = {"cuda:0"};
  const char* null_entry[1] = {NULL};
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_strategy_create_default(NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_strategy_create_mirrored(NULL, 0, NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_strategy_create_mirrored(NULL, 2, &s));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_strategy_create_mirrored(bad, 1, &s));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_strategy_create_mirrored(null_entry, 1, &s));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_strategy_create_mirrored(two_cpus, 0, &s));
  if (kx_device_count(KX_DEVICE_CUDA) == 0) EXPECT_ERR(KX_E_DEVICE, kx_strategy_create_mirrored(gpu, 1, &s));
  EXPECT(s == (kx_strategy*)SENTINEL);
  EXPECT(kx_strategy_num_replicas(NULL) == -1);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_strategy_set_num_threads(NULL, 1));
  EXPECT_OK(kx_strategy_create_mirrored(NULL, 0, &s));
  EXPECT(kx_strategy_num_replicas(s) == 1);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_strategy_set_num_threads(s, -1));
  EXPECT_OK(kx_strategy_set_num_threads(s, 2));
  kx_strategy_destroy(s);
  EXPECT_OK(kx_strategy_create_mirrored(two_cpus, 2, &s));
  EXPECT(kx_strategy_num_replicas(s) == 2);
  kx_strategy_destroy(s);
  kx_strategy_destroy(NULL);
}

static void test_models(kx_strategy* s) {
  kx_model* m = (kx_model*)SENTINEL;
  char* json = (char*)SENTINEL;
  const int64_t shape[1] = {4};
  const int64_t zero_shape[1] = {0};
  kx_compile_options co;
  float w[64];
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_create_sequential(NULL, shape, 1, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_create_sequential(s, NULL, 1, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_create_sequential(s, shape, 0, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_create_sequential(s, zero_shape, 1, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_create_sequential(s, shape, 1, NULL));
  EXPECT(m == (kx_model*)SENTINEL);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_dense(NULL, 3, KX_ACT_RELU));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_conv2d(NULL, 8, 3, 3, 1, KX_PADDING_SAME, KX_ACT_RELU));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_max_pool2d(NULL, 2, 2));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_flatten(NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_dropout(NULL, 0.5f));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_from_json(NULL, "{}", &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_from_json(s, NULL, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_from_json(s, "{}", NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_from_json(s, "{\"class_name\": ", &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_to_json(NULL, &json));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_compile(NULL, NULL));
  EXPECT(kx_model_num_params(NULL) == -1);
  EXPECT(kx_model_output_size(NULL) == -1);
  EXPECT(kx_model_input_size(NULL) == -1);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_get_weights(NULL, w, 64));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_set_weights(NULL, w, 64));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_save(NULL, "m.kx"));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_load(NULL, "m.kx", &m));
  EXPECT(m == (kx_model*)SENTINEL && json == (char*)SENTINEL);
  kx_model_destroy(NULL);
  kx_compile_options_init(NULL, sizeof co);

  EXPECT_OK(kx_model_create_sequential(s, shape, 1, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_dense(m, 0, KX_ACT_RELU));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_dense(m, 3, (kx_activation)42));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_dropout(m, 1.0f));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_dropout(m, -0.5f));
  /* Conv2D and MaxPooling2D need (height, width, channels) samples; this model's are {4}. */
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_conv2d(m, 8, 3, 3, 1, KX_PADDING_SAME, KX_ACT_RELU));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_max_pool2d(m, 2, 2));
  EXPECT_ERR(KX_E_MISUSE, kx_model_compile(m, NULL)); /* no layers yet */
  EXPECT_ERR(KX_E_MISUSE, kx_model_get_weights(m, w, 64));
  EXPECT_OK(kx_model_add_dense(m, 5, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_dropout(m, 0.2f));
  EXPECT_OK(kx_model_add_dense(m, 3, KX_ACT_SOFTMAX));
  EXPECT(kx_model_num_params(m) == 4 * 5 + 5 + 5 * 3 + 3);
  EXPECT(kx_model_output_size(m) == 3);
  EXPECT(kx_model_input_size(m) == 4);

  kx_compile_options_init(&co, sizeof co);
  co.struct_size = 0;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_compile(m, &co));
  kx_compile_options_init(&co, sizeof co);
  co.loss = (kx_loss)17;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_compile(m, &co));
  co.loss = KX_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
  co.optimizer = (kx_optimizer)5;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_compile(m, &co));
  co.optimizer = KX_OPTIMIZER_ADAM;
  co.learning_rate = -1;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_compile(m, &co));
  co.learning_rate = 0;
  co.metrics = 0x80;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_compile(m, &co));
  co.metrics = KX_METRIC_ACCURACY;
  EXPECT_OK(kx_model_compile(m, &co));
  EXPECT_ERR(KX_E_MISUSE, kx_model_compile(m, &co));
  EXPECT_ERR(KX_E_MISUSE, kx_model_add_dense(m, 3, KX_ACT_NONE));
  EXPECT_ERR(KX_E_MISUSE, kx_model_add_flatten(m));
  EXPECT_ERR(KX_E_MISUSE, kx_model_add_dropout(m, 0.1f));

  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_get_weights(m, NULL, 64));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_get_weights(m, w, 10));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_set_weights(m, w, 10));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_set_weights(m, NULL, 43));
  EXPECT_OK(kx_model_get_weights(m, w, 64));
  EXPECT_OK(kx_model_set_weights(m, w, 43));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_to_json(m, NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_save(m, NULL));
  EXPECT_OK(kx_model_to_json(m, &json));
  if (json != (char*)SENTINEL) {
    kx_model* copy = NULL;
    EXPECT(strstr(json, "\"Dense\"") != NULL);
    EXPECT_OK(kx_model_from_json(s, json, &copy));
    EXPECT(kx_model_num_params(copy) == kx_model_num_params(m));
    kx_model_destroy(copy);
    kx_free(json);
  }
  kx_model_destroy(m);
}

static void test_datasets(const char* dir) {
  kx_dataset* d = (kx_dataset*)SENTINEL;
  kx_dataset* part = (kx_dataset*)SENTINEL;
  float x[12] = {0};
  int32_t y[3] = {0, 1, 2};
  const int64_t xs[2] = {3, 4}, ys[1] = {3}, ys_bad[1] = {2}, xs_zero[2] = {3, 0};
  char images[1024], labels[1024];
  gzFile f;
  static const unsigned char truncated_images[] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3};
  static const unsigned char labels3[] = {0, 0, 8, 1, 0, 0, 0, 3, 0, 1, 2};

  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_arrays(NULL, KX_DTYPE_F32, xs, 2, y, KX_DTYPE_I32, ys, 1, &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_arrays(x, KX_DTYPE_F32, NULL, 2, y, KX_DTYPE_I32, ys, 1, &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, NULL, KX_DTYPE_I32, ys, 1, &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, y, KX_DTYPE_I32, ys, 1, NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 0, y, KX_DTYPE_I32, ys, 1, &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_arrays(x, KX_DTYPE_F32, xs_zero, 2, y, KX_DTYPE_I32, ys, 1, &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, y, KX_DTYPE_I32, ys_bad, 1, &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_arrays(x, (kx_dtype)8, xs, 2, y, KX_DTYPE_I32, ys, 1, &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_idx(NULL, "l", &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_idx("i", NULL, &d));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_idx("i", "l", NULL));
  EXPECT_ERR(KX_E_IO, kx_dataset_from_idx("/nonexistent/images.gz", "/nonexistent/labels.gz", &d));
  snprintf(images, sizeof images, "%s/capi_truncated_images.gz", dir);
  snprintf(labels, sizeof labels, "%s/capi_labels.gz", dir);
  f = gzopen(images, "wb");
  gzwrite(f, truncated_images, sizeof truncated_images);
  gzclose(f);
  f = gzopen(labels, "wb");
  gzwrite(f, labels3, sizeof labels3);
  gzclose(f);
  EXPECT_ERR(KX_E_CORRUPT, kx_dataset_from_idx(images, labels, &d));
  EXPECT_ERR(KX_E_CORRUPT, kx_dataset_from_idx(labels, labels, &d)); /* rank 1 where images need 3 */
  remove(images);
  remove(labels);
  EXPECT(d == (kx_dataset*)SENTINEL);

  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_take(NULL, 1, &part));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_skip(NULL, 1, &part));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_shuffle(NULL, 10, 1));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_batch(NULL, 10, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_cache(NULL, NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_prefetch(NULL, 1));
  EXPECT(kx_dataset_num_samples(NULL) == -1);
  kx_dataset_destroy(NULL);

  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, y, KX_DTYPE_I32, ys, 1, &d));
  EXPECT(kx_dataset_num_samples(d) == 3);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_take(d, -1, &part));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_take(d, 1, NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_skip(d, -1, &part));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_shuffle(d, 0, 1));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_batch(d, 0, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_batch(d, -4, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_cache(d, ""));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_prefetch(d, -1));
  EXPECT(part == (kx_dataset*)SENTINEL);
  EXPECT_OK(kx_dataset_take(d, 2, &part));
  EXPECT(kx_dataset_num_samples(part) == 2);
  kx_dataset_destroy(d); /* part shares the storage and outlives d */
  EXPECT(kx_dataset_num_samples(part) == 2);
  EXPECT_OK(kx_dataset_cache(part, NULL));
  EXPECT_OK(kx_dataset_prefetch(part, 2));
  kx_dataset_destroy(part);
}

static void test_training(kx_strategy* s) {
  enum { N = 64, IN = 4, CLASSES = 3 };
  float x[N * IN], out[N * CLASSES], out_small[2];
  int64_t y[N];
  int32_t bad_y[N];
  const int64_t xs[2] = {N, IN}, ys[1] = {N}, wide_xs[2] = {N / 2, IN * 2}, in_shape[1] = {IN};
  kx_dataset *d = NULL, *wide = NULL, *bad = NULL;
  kx_model *m = NULL, *fresh = NULL;
  kx_callbacks* cb = (kx_callbacks*)SENTINEL;
  kx_history* h = (kx_history*)SENTINEL;
  kx_fit_options fo;
  kx_compile_options co;
  double loss = -1, acc = -1, v = -1;
  int batches = 0, i;

  for (i = 0; i < N * IN; ++i) x[i] = (float)((i * 37) % 17) / 17.0f;
  for (i = 0; i < N; ++i) {
    y[i] = i % CLASSES;
    bad_y[i] = 7;
  }
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, y, KX_DTYPE_I64, ys, 1, &d));
  /* 32 samples of 8 features against 64 labels: refused. */
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_from_arrays(x, KX_DTYPE_F32, wide_xs, 2, y, KX_DTYPE_I64, ys, 1, &wide));
  {
    const int64_t ws[1] = {N / 2};
    EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, wide_xs, 2, y, KX_DTYPE_I64, ws, 1, &wide));
  }
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, bad_y, KX_DTYPE_I32, ys, 1, &bad));
  EXPECT_OK(kx_dataset_batch(d, 16, 0));
  EXPECT_OK(kx_model_create_sequential(s, in_shape, 1, &m));
  EXPECT_OK(kx_model_add_dense(m, 8, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_dense(m, CLASSES, KX_ACT_SOFTMAX));

  kx_fit_options_init(&fo, sizeof fo);
  kx_fit_options_init(NULL, sizeof fo);
  EXPECT_ERR(KX_E_MISUSE, kx_fit(m, d, &fo, NULL, &h)); /* before compile */
  EXPECT_ERR(KX_E_MISUSE, kx_evaluate(m, d, &loss, &acc));
  EXPECT_ERR(KX_E_MISUSE, kx_predict(m, x, 1, out, sizeof out / sizeof out[0]));
  EXPECT(h == (kx_history*)SENTINEL && loss == -1);

  kx_compile_options_init(&co, sizeof co);
  co.metrics = KX_METRIC_ACCURACY;
  EXPECT_OK(kx_model_compile(m, &co));

  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_create(NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_function(NULL, stop_after_three_batches, NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_model_checkpoint(NULL, "c-{epoch}.kx", 0, 0));
  kx_callbacks_destroy(NULL);
  EXPECT_OK(kx_callbacks_create(&cb));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_function(cb, NULL, NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_function_flags(cb, stop_after_three_batches, NULL, 4u)); /* a flag kx does not know */
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_function_flags(NULL, stop_after_three_batches, NULL, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_function_flags(cb, NULL, NULL, KX_CALLBACK_NO_BATCH_METRICS));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_model_checkpoint(cb, NULL, 0, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_model_checkpoint(cb, "c.kx", -1, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_model_checkpoint(cb, "c-{epch}.kx", 0, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_model_checkpoint(cb, "c-{epoch:.2q}.kx", 0, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_model_checkpoint(cb, "c-{loss:d}.kx", 0, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_model_checkpoint(cb, "ckpt/", 0, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_early_stopping(cb, "val_los", 2, 0.0, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_early_stopping(cb, NULL, -1, 0.0, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_early_stopping(NULL, NULL, 1, 0.0, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_csv_logger(cb, NULL, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_csv_logger(cb, "", 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_terminate_on_nan(NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_step_decay(cb, 0.0, 2));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_step_decay(cb, 0.5, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_cosine_decay(cb, 0, 0.0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_callbacks_add_cosine_decay(cb, 100, 1.5));
  /* It counts batches and reads no metrics: it still sees every event. */
  EXPECT_OK(kx_callbacks_add_function_flags(cb, stop_after_three_batches, &batches, KX_CALLBACK_NO_BATCH_METRICS));

  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_fit(NULL, d, &fo, NULL, &h));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_fit(m, NULL, &fo, NULL, &h));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_fit(m, wide, &fo, NULL, &h)); /* 8 features into a 4-input model */
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_fit(m, bad, &fo, NULL, &h));  /* label 7 of 3 classes */
  fo.epochs = -2;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_fit(m, d, &fo, NULL, &h));
  kx_fit_options_init(&fo, sizeof fo);
  fo.verbose = 5;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_fit(m, d, &fo, NULL, &h));
  kx_fit_options_init(&fo, sizeof fo);
  fo.resume_from = "/dev/null"; /* a file, and not a checkpoint */
  EXPECT_ERR(KX_E_CORRUPT, kx_fit(m, d, &fo, NULL, &h));
  kx_fit_options_init(&fo, sizeof fo);
  fo.validation = wide;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_fit(m, d, &fo, NULL, &h));
  EXPECT(h == (kx_history*)SENTINEL);

  /* A callback stops training after 3 batches: KX_STOPPED, and the history holds the epoch. */
  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = 3;
  fo.validation = d;
  EXPECT(kx_fit(m, d, &fo, cb, &h) == KX_STOPPED);
  EXPECT(batches == 3);
  EXPECT(h != (kx_history*)SENTINEL && kx_history_epochs(h) == 1);
  EXPECT(kx_history_epochs(NULL) == -1);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_history_get(NULL, "loss", 0, &v));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_history_get(h, NULL, 0, &v));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_history_get(h, "loss", 0, NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_history_get(h, "loss", 1, &v));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_history_get(h, "recall", 0, &v));
  EXPECT(v == -1);
  EXPECT_OK(kx_history_get(h, "loss", 0, &v));
  EXPECT(v > 0 && isfinite(v));
  kx_history_destroy(h);
  kx_history_destroy(NULL);

  /* A full fit with no out-pointer for the history. */
  EXPECT_OK(kx_fit(m, d, NULL, NULL, NULL));

  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_evaluate(NULL, d, &loss, &acc));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_evaluate(m, NULL, &loss, &acc));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_evaluate(m, wide, &loss, &acc));
  EXPECT(loss == -1 && acc == -1);
  EXPECT_OK(kx_evaluate(m, d, &loss, NULL));
  EXPECT_OK(kx_evaluate(m, d, NULL, &acc));
  EXPECT(loss > 0 && acc >= 0 && acc <= 1);

  out_small[0] = out_small[1] = 42.0f;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_predict(NULL, x, 1, out, 3));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_predict(m, NULL, 1, out, 3));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_predict(m, x, 1, NULL, 3));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_predict(m, x, 0, out, 3));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_predict(m, x, -5, out, 3));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_predict(m, x, 1, out_small, 2));
  EXPECT(out_small[0] == 42.0f && out_small[1] == 42.0f);
  EXPECT_OK(kx_predict(m, x, N, out, N * CLASSES));
  EXPECT(fabs(out[0] + out[1] + out[2] - 1.0) < 1e-5);

  /* Same model from JSON, fresh weights: fit works on it too. */
  {
    char* json = NULL;
    EXPECT_OK(kx_model_to_json(m, &json));
    EXPECT_OK(kx_model_from_json(s, json, &fresh));
    kx_free(json);
    EXPECT_OK(kx_model_compile(fresh, NULL));
    EXPECT_OK(kx_fit(fresh, d, NULL, NULL, NULL));
    kx_model_destroy(fresh);
  }

  kx_callbacks_destroy(cb);
  kx_model_destroy(m);
  kx_dataset_destroy(d);
  kx_dataset_destroy(wide);
  kx_dataset_destroy(bad);
}

static void test_options_structs(kx_strategy* s) {
  /* A struct from a newer kx.h with a non-zero unknown field is refused, a zero one is accepted. */
  struct {
    kx_compile_options base;
    uint64_t future;
  } bigger;
  kx_model* m = NULL;
  const int64_t shape[1] = {2};
  EXPECT_OK(kx_model_create_sequential(s, shape, 1, &m));
  EXPECT_OK(kx_model_add_dense(m, 2, KX_ACT_SOFTMAX));
  memset(&bigger, 0, sizeof bigger);
  bigger.base.struct_size = sizeof bigger;
  bigger.future = 1;
  EXPECT_ERR(KX_E_UNSUPPORTED, kx_model_compile(m, &bigger.base));
  bigger.future = 0;
  EXPECT_OK(kx_model_compile(m, &bigger.base));
  kx_model_destroy(m);
  /* A struct from before use_ema (a smaller struct_size) still compiles; a bad EMA momentum does not. */
  EXPECT_OK(kx_model_create_sequential(s, shape, 1, &m));
  EXPECT_OK(kx_model_add_dense(m, 2, KX_ACT_SOFTMAX));
  memset(&bigger, 0, sizeof bigger);
  bigger.base.struct_size = (uint32_t)offsetof(kx_compile_options, use_ema);
  bigger.base.use_ema = 1; /* beyond struct_size: not read */
  bigger.base.ema_momentum = 7.0;
  EXPECT_OK(kx_model_compile(m, &bigger.base));
  kx_model_destroy(m);
  EXPECT_OK(kx_model_create_sequential(s, shape, 1, &m));
  EXPECT_OK(kx_model_add_dense(m, 2, KX_ACT_SOFTMAX));
  kx_compile_options_init(&bigger.base, sizeof bigger.base);
  bigger.base.use_ema = 1;
  bigger.base.ema_momentum = 1.0;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_compile(m, &bigger.base));
  bigger.base.ema_momentum = 0.9;
  EXPECT_OK(kx_model_compile(m, &bigger.base));
  kx_model_destroy(m);
}

/* AdamW's weight_decay and RMSprop's rho and centered set from C: one step of Dense(1) without bias
 * under mean squared error, whose gradient this test computes in double, against Keras's update
 * formulas (AdamW decays w by w * weight_decay * rate before Adam's step; RMSprop divides the rate
 * times g by sqrt(velocity [- average^2] + epsilon)). */
enum { OPT_SAMPLES = 4, OPT_INPUTS = 3 };
static const float kOptX[OPT_SAMPLES * OPT_INPUTS] = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.5f,
                                                      -2.0f, 1.0f, 0.75f, 1.0f, 1.0f, 1.0f};
static const float kOptY[OPT_SAMPLES] = {3.0f, -1.0f, 2.0f, -4.0f};
static const float kOptW0[OPT_INPUTS] = {0.8f, -0.6f, 0.3f};

/* The weights after one step with these options; 0 when a call failed. */
static int optimizer_step(kx_strategy* s, const kx_compile_options* o, float* w1) {
  const int64_t shape[1] = {OPT_INPUTS};
  kx_model* m = NULL;
  int ok = kx_model_create_sequential(s, shape, 1, &m) == KX_OK &&
           kx_model_add_dense_flags(m, 1, KX_ACT_NONE, KX_LAYER_NO_BIAS) == KX_OK && kx_model_compile(m, o) == KX_OK &&
           kx_model_set_weights(m, kOptW0, OPT_INPUTS) == KX_OK &&
           kx_model_train_on_batch(m, kOptX, kOptY, OPT_SAMPLES, NULL, NULL) == KX_OK &&
           kx_model_get_weights(m, w1, OPT_INPUTS) == KX_OK;
  if (!ok) fprintf(stderr, "optimizer_step: %s\n", kx_last_error_message());
  kx_model_destroy(m);
  return ok;
}

/* The weights' gradient at kOptW0: d/dw of mean((x w - y)^2). */
static void optimizer_gradient(double* g) {
  int n, i;
  for (i = 0; i < OPT_INPUTS; ++i) g[i] = 0;
  for (n = 0; n < OPT_SAMPLES; ++n) {
    double err = -kOptY[n];
    for (i = 0; i < OPT_INPUTS; ++i) err += (double)kOptX[n * OPT_INPUTS + i] * kOptW0[i];
    for (i = 0; i < OPT_INPUTS; ++i) g[i] += 2.0 / OPT_SAMPLES * err * kOptX[n * OPT_INPUTS + i];
  }
}

static int close_to(const float* got, const double* want) {
  int i;
  for (i = 0; i < OPT_INPUTS; ++i)
    if (fabs(got[i] - want[i]) > 2e-6 * (1 + fabs(want[i]))) {
      fprintf(stderr, "weight %d: %.9g, want %.9g\n", i, got[i], want[i]);
      return 0;
    }
  return 1;
}

static void test_optimizer_settings(kx_strategy* s) {
  double g[OPT_INPUTS], want[OPT_INPUTS];
  float got[OPT_INPUTS];
  kx_compile_options o;
  int i, k;
  optimizer_gradient(g);
  /* AdamW: weight_decay 0.5, the default 0.004 (field 0, no bit), and 0 (the bit). */
  for (k = 0; k < 3; ++k) {
    const double rate = 0.1, decay = k == 0 ? 0.5 : k == 1 ? 0.004 : 0.0;
    /* Adam's first step: m = 0.1 g, v = 0.001 g^2, rate * sqrt(1 - 0.999) / (1 - 0.9) * m / (sqrt(v) + 1e-7). */
    const double rate_t = rate * sqrt(1 - 0.999) / (1 - 0.9);
    kx_compile_options_init(&o, sizeof o);
    o.optimizer = KX_OPTIMIZER_ADAMW;
    o.loss = KX_LOSS_MEAN_SQUARED_ERROR;
    o.learning_rate = rate;
    o.weight_decay = k == 0 ? 0.5 : 0.0;
    if (k == 2) o.zero_is_value = KX_COMPILE_ZERO_WEIGHT_DECAY;
    for (i = 0; i < OPT_INPUTS; ++i)
      want[i] = kOptW0[i] - kOptW0[i] * decay * rate - rate_t * 0.1 * g[i] / (sqrt(0.001 * g[i] * g[i]) + 1e-7);
    EXPECT(optimizer_step(s, &o, got) && close_to(got, want));
  }
  /* RMSprop: rho 0.5 centered, rho 0.5, the default 0.9, and rho 0 (the bit). */
  for (k = 0; k < 4; ++k) {
    const double rate = 0.01, rho = k < 2 ? 0.5 : k == 2 ? 0.9 : 0.0;
    const int centered = k == 0;
    kx_compile_options_init(&o, sizeof o);
    o.optimizer = KX_OPTIMIZER_RMSPROP;
    o.loss = KX_LOSS_MEAN_SQUARED_ERROR;
    o.learning_rate = rate;
    o.rho = k < 2 ? 0.5 : 0.0;
    o.centered = centered;
    if (k == 3) o.zero_is_value = KX_COMPILE_ZERO_RHO;
    for (i = 0; i < OPT_INPUTS; ++i) {
      const double velocity = (1 - rho) * g[i] * g[i], average = centered ? (1 - rho) * g[i] : 0.0;
      want[i] = kOptW0[i] - rate * g[i] / sqrt(velocity - average * average + 1e-7);
    }
    EXPECT(optimizer_step(s, &o, got) && close_to(got, want));
  }
  /* Out of range: a negative weight decay, rho 1. */
  kx_compile_options_init(&o, sizeof o);
  o.optimizer = KX_OPTIMIZER_ADAMW;
  o.weight_decay = -0.1;
  EXPECT(!optimizer_step(s, &o, got));
  o.optimizer = KX_OPTIMIZER_RMSPROP;
  o.weight_decay = 0;
  o.rho = 1.0;
  EXPECT(!optimizer_step(s, &o, got));
  /* A struct from before these fields (struct_size up to precision) keeps their defaults. */
  kx_compile_options_init(&o, sizeof o);
  o.struct_size = (uint32_t)offsetof(kx_compile_options, weight_decay);
  o.optimizer = KX_OPTIMIZER_ADAMW;
  o.loss = KX_LOSS_MEAN_SQUARED_ERROR;
  o.learning_rate = 0.1;
  o.weight_decay = 0.5; /* beyond struct_size: not read */
  for (i = 0; i < OPT_INPUTS; ++i)
    want[i] = kOptW0[i] - kOptW0[i] * 0.004 * 0.1 -
              0.1 * sqrt(1 - 0.999) / (1 - 0.9) * 0.1 * g[i] / (sqrt(0.001 * g[i] * g[i]) + 1e-7);
  EXPECT(optimizer_step(s, &o, got) && close_to(got, want));
}

static int count_saved(const kx_event* ev, void* user_data) {
  if (ev->kind == KX_EVENT_CHECKPOINT_SAVED && ev->path != NULL) ++*(int*)user_data;
  return 0;
}

/* A small CNN through the C ABI: argument checks, then a fit that lowers the loss. */
static void test_cnn(kx_strategy* s) {
  enum { N = 32 };
  float x[N * 6 * 6];
  int32_t y[N];
  const int64_t xs[4] = {N, 6, 6, 1}, ys[1] = {N}, shape[3] = {6, 6, 1};
  kx_dataset* d = NULL;
  kx_model* m = NULL;
  kx_compile_options co;
  kx_fit_options fo;
  kx_history* h = NULL;
  double first = 0, last = 0;
  int i;
  for (i = 0; i < N * 36; ++i) x[i] = (float)((i * 13) % 7) / 7.0f;
  for (i = 0; i < N; ++i) y[i] = x[i * 36 + 14] > 0.5f;
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 4, y, KX_DTYPE_I32, ys, 1, &d));
  EXPECT_OK(kx_model_create_sequential(s, shape, 3, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_conv2d(m, 0, 3, 3, 1, KX_PADDING_VALID, KX_ACT_RELU));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_conv2d(m, 4, 3, 3, 0, KX_PADDING_VALID, KX_ACT_RELU));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_conv2d(m, 4, 3, 3, 1, (kx_padding)7, KX_ACT_RELU));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_conv2d(m, 4, 7, 7, 1, KX_PADDING_VALID, KX_ACT_RELU));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_max_pool2d(m, 0, 2));
  EXPECT_OK(kx_model_add_conv2d(m, 4, 3, 3, 1, KX_PADDING_SAME, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_max_pool2d(m, 2, 2));
  EXPECT_OK(kx_model_add_flatten(m));
  EXPECT_OK(kx_model_add_dense(m, 2, KX_ACT_SOFTMAX));
  EXPECT(kx_model_num_params(m) == 3 * 3 * 4 + 4 + 3 * 3 * 4 * 2 + 2);
  kx_compile_options_init(&co, sizeof co);
  co.learning_rate = 0.01;
  EXPECT_OK(kx_model_compile(m, &co));
  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = 20;
  EXPECT_OK(kx_fit(m, d, &fo, NULL, &h));
  EXPECT_OK(kx_history_get(h, "loss", 0, &first));
  EXPECT_OK(kx_history_get(h, "loss", 19, &last));
  EXPECT(last < first);
  kx_history_destroy(h);
  kx_model_destroy(m);
  kx_dataset_destroy(d);
}

/* The layers of convolutional models, ResNet50, frozen layers and weights loaded by name. */
static void test_cnn_layers_and_transfer(kx_strategy* s, const char* dir) {
  enum { N = 16 };
  float x[N * 8 * 8 * 2];
  int32_t y[N];
  const int64_t xs[4] = {N, 8, 8, 2}, ys[1] = {N}, shape[3] = {8, 8, 2}, small[3] = {16, 16, 3};
  char path[1024], *name = NULL;
  kx_dataset* d = NULL;
  kx_model *m = NULL, *other = NULL, *resnet = NULL;
  kx_compile_options co;
  int64_t loaded = -1, skipped = -1;
  int32_t trainable = -1;
  int i;
  for (i = 0; i < N * 128; ++i) x[i] = (float)((i * 7) % 11) / 11.0f;
  for (i = 0; i < N; ++i) y[i] = i % 3;
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 4, y, KX_DTYPE_I32, ys, 1, &d));
  EXPECT_OK(kx_model_create_sequential(s, shape, 3, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_zero_padding2d(m, -1, 0, 0, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_batch_norm(m, 1.5f, 1e-3f));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_batch_norm(m, 0.99f, 0.0f));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_activation(m, (kx_activation)9));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_average_pool2d(m, 0, 2, 0, 0));
  EXPECT_OK(kx_model_add_zero_padding2d(m, 1, 1, 1, 1));
  EXPECT_OK(kx_model_add_conv2d(m, 4, 3, 3, 1, KX_PADDING_VALID, KX_ACT_NONE));
  EXPECT_OK(kx_model_add_batch_norm(m, 0.99f, 1e-3f));
  EXPECT_OK(kx_model_add_activation(m, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_average_pool2d(m, 2, 2, 0, 0));
  EXPECT_OK(kx_model_add_global_average_pool2d(m));
  EXPECT_OK(kx_model_add_dense(m, 3, KX_ACT_SOFTMAX));
  EXPECT(kx_model_num_layers(m) == 7);
  EXPECT_OK(kx_model_layer_name(m, 2, &name));
  EXPECT(name && strcmp(name, "batch_normalization") == 0);
  kx_free(name);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_layer_name(m, 7, &name));
  EXPECT(kx_model_num_params(m) == 2 * 9 * 4 + 4 + 4 * 4 + 4 * 3 + 3);
  EXPECT(kx_model_num_trainable_params(m) == kx_model_num_params(m) - 8);
  EXPECT_OK(kx_model_set_trainable(m, "conv2d", 0));
  EXPECT_OK(kx_model_get_trainable(m, "conv2d", &trainable));
  EXPECT(trainable == 0);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_set_trainable(m, "nope", 0));
  EXPECT(kx_model_num_trainable_params(m) == 4 * 2 + 4 * 3 + 3);
  EXPECT_ERR(KX_E_MISUSE, kx_model_load_weights(m, "x.kx", 0, NULL, NULL));
  kx_compile_options_init(&co, sizeof co);
  EXPECT_OK(kx_model_compile(m, &co));
  EXPECT_OK(kx_fit(m, d, NULL, NULL, NULL));
  snprintf(path, sizeof path, "%s/transfer.kx", dir);
  EXPECT_OK(kx_model_save(m, path));

  /* The same base with another head: the base loads, the head is skipped when asked. */
  EXPECT_OK(kx_model_create_sequential(s, shape, 3, &other));
  EXPECT_OK(kx_model_add_zero_padding2d(other, 1, 1, 1, 1));
  EXPECT_OK(kx_model_add_conv2d(other, 4, 3, 3, 1, KX_PADDING_VALID, KX_ACT_NONE));
  EXPECT_OK(kx_model_add_batch_norm(other, 0.99f, 1e-3f));
  EXPECT_OK(kx_model_add_activation(other, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_average_pool2d(other, 2, 2, 0, 0));
  EXPECT_OK(kx_model_add_global_average_pool2d(other));
  EXPECT_OK(kx_model_add_dense(other, 5, KX_ACT_SOFTMAX));
  EXPECT_OK(kx_model_compile(other, &co));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_load_weights(other, path, 0, &loaded, &skipped));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_load_weights(other, path, 8u, &loaded, &skipped));
  EXPECT_OK(kx_model_load_weights(other, path, KX_LOAD_WEIGHTS_SKIP_MISMATCH, &loaded, &skipped));
  EXPECT(loaded == 6 && skipped == 2);
  EXPECT_ERR(KX_E_IO, kx_model_load_weights(other, "/nonexistent/kx.kx", KX_LOAD_WEIGHTS_SKIP_MISMATCH, NULL, NULL));

  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_create_resnet50(s, small, 1, 10, &resnet));
  EXPECT_OK(kx_model_create_resnet50(s, NULL, 1, 1000, &resnet));
  EXPECT(kx_model_num_params(resnet) == 25636712);
  kx_model_destroy(resnet);
  EXPECT_OK(kx_model_create_resnet50(s, NULL, 0, 0, &resnet));
  EXPECT(kx_model_num_params(resnet) == 23587712);
  kx_model_destroy(resnet);
  kx_model_destroy(other);
  kx_model_destroy(m);
  kx_dataset_destroy(d);
}

/* Model files, checkpoints, resume and the built-in callbacks through the C ABI. */
static void test_files_and_checkpoints(kx_strategy* s, const char* dir) {
  enum { N = 60, IN = 4, CLASSES = 3 };
  float x[N * IN], w1[128], w2[128];
  int64_t y[N];
  const int64_t xs[2] = {N, IN}, ys[1] = {N}, in_shape[1] = {IN};
  char model_path[1024], ckpt_template[1024], ckpt_dir[1024], csv_path[1024], garbage[1024];
  kx_dataset* d = NULL;
  kx_model *m = NULL, *loaded = (kx_model*)SENTINEL;
  kx_callbacks* cb = NULL;
  kx_fit_options fo;
  kx_compile_options co;
  FILE* f;
  int i, saved = 0;

  snprintf(model_path, sizeof model_path, "%s/capi_model.kx", dir);
  snprintf(ckpt_dir, sizeof ckpt_dir, "%s/capi_ckpt", dir);
  snprintf(ckpt_template, sizeof ckpt_template, "%s/capi_ckpt/ckpt-{epoch:02d}-{loss:.3f}.kx", dir);
  snprintf(csv_path, sizeof csv_path, "%s/capi_log.csv", dir);
  snprintf(garbage, sizeof garbage, "%s/capi_garbage.kx", dir);
  remove(csv_path);
  for (i = 0; i < N * IN; ++i) x[i] = (float)((i * 29) % 13) / 13.0f;
  for (i = 0; i < N; ++i) y[i] = i % CLASSES;
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, y, KX_DTYPE_I64, ys, 1, &d));
  EXPECT_OK(kx_dataset_batch(d, 8, 0));
  EXPECT_OK(kx_dataset_shuffle(d, N, 5));
  EXPECT_OK(kx_model_create_sequential(s, in_shape, 1, &m));
  EXPECT_OK(kx_model_add_dense(m, 8, KX_ACT_TANH));
  EXPECT_OK(kx_model_add_dense(m, CLASSES, KX_ACT_SOFTMAX));
  EXPECT_ERR(KX_E_MISUSE, kx_model_save(m, model_path)); /* nothing to save before compile */
  kx_compile_options_init(&co, sizeof co);
  co.metrics = KX_METRIC_ACCURACY;
  EXPECT_OK(kx_model_compile(m, &co));

  /* Save and load: the same weights, in a new model. */
  EXPECT_OK(kx_model_save(m, model_path));
  EXPECT_ERR(KX_E_IO, kx_model_save(m, "/nonexistent-dir/m.kx"));
  EXPECT_ERR(KX_E_IO, kx_model_load(s, "/nonexistent-dir/m.kx", &loaded));
  f = fopen(garbage, "wb");
  if (f) {
    fputs("definitely not safetensors", f);
    fclose(f);
  }
  EXPECT_ERR(KX_E_CORRUPT, kx_model_load(s, garbage, &loaded));
  EXPECT(loaded == (kx_model*)SENTINEL);
  EXPECT_OK(kx_model_load(s, model_path, &loaded));
  if (loaded != (kx_model*)SENTINEL) {
    EXPECT(kx_model_num_params(loaded) == kx_model_num_params(m));
    EXPECT_OK(kx_model_get_weights(m, w1, 128));
    EXPECT_OK(kx_model_get_weights(loaded, w2, 128));
    EXPECT(memcmp(w1, w2, (size_t)kx_model_num_params(m) * sizeof(float)) == 0);
    kx_model_destroy(loaded);
  }

  /* A checkpoint every epoch, keeping the newest 2, a CSV log, the events. */
  EXPECT_OK(kx_callbacks_create(&cb));
  EXPECT_OK(kx_callbacks_add_model_checkpoint(cb, ckpt_template, 0, 2));
  EXPECT_OK(kx_callbacks_add_csv_logger(cb, csv_path, 0));
  EXPECT_OK(kx_callbacks_add_terminate_on_nan(cb));
  EXPECT_OK(kx_callbacks_add_cosine_decay(cb, 100, 0.1));
  EXPECT_OK(kx_callbacks_add_function(cb, count_saved, &saved));
  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = 3;
  EXPECT_OK(kx_fit(m, d, &fo, cb, NULL));
  EXPECT(saved == 3);
  f = fopen(csv_path, "r");
  EXPECT(f != NULL);
  if (f) {
    char line[256];
    int rows = 0;
    EXPECT(fgets(line, sizeof line, f) != NULL && strcmp(line, "epoch,accuracy,loss\n") == 0);
    while (fgets(line, sizeof line, f)) ++rows;
    EXPECT(rows == 3);
    fclose(f);
  }
  kx_callbacks_destroy(cb);

  /* Resume from the directory: all 3 epochs are done, so a fit of 4 epochs trains one more. */
  EXPECT_OK(kx_model_get_weights(m, w1, 128));
  {
    kx_model* again = NULL;
    kx_history* h = NULL;
    EXPECT_OK(kx_model_create_sequential(s, in_shape, 1, &again));
    EXPECT_OK(kx_model_add_dense(again, 8, KX_ACT_TANH));
    EXPECT_OK(kx_model_add_dense(again, CLASSES, KX_ACT_SOFTMAX));
    EXPECT_OK(kx_model_compile(again, &co));
    kx_fit_options_init(&fo, sizeof fo);
    fo.epochs = 3;
    fo.resume_from = ckpt_dir;
    EXPECT_OK(kx_fit(again, d, &fo, NULL, &h));
    EXPECT(kx_history_epochs(h) == 0); /* nothing left */
    kx_history_destroy(h);
    EXPECT_OK(kx_model_get_weights(again, w2, 128));
    EXPECT(memcmp(w1, w2, (size_t)kx_model_num_params(m) * sizeof(float)) == 0);
    fo.epochs = 4;
    EXPECT_OK(kx_fit(again, d, &fo, NULL, &h));
    EXPECT(kx_history_epochs(h) == 1);
    kx_history_destroy(h);
    /* Another model cannot resume from these checkpoints. */
    kx_model_destroy(again);
    EXPECT_OK(kx_model_create_sequential(s, in_shape, 1, &again));
    EXPECT_OK(kx_model_add_dense(again, 9, KX_ACT_TANH));
    EXPECT_OK(kx_model_add_dense(again, CLASSES, KX_ACT_SOFTMAX));
    EXPECT_OK(kx_model_compile(again, &co));
    fo.epochs = 3;
    EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_fit(again, d, &fo, NULL, NULL));
    EXPECT(strstr(kx_last_error_message(), "units") != NULL);
    kx_model_destroy(again);
  }
  kx_model_destroy(m);
  kx_dataset_destroy(d);
}

/* Normalization from the training data's moments (Keras's adapt), and the errors of both calls. */
static void test_normalization(kx_strategy* s) {
  enum { N = 5 };
  float x[N * 2 * 2], y[N] = {0, 1, 0, 1, 0}, mean[2] = {-1, -1}, var[2] = {-1, -1};
  const float zero = 0.0f, negative = -1.0f, three[3] = {0.0f, 1.0f, 2.0f};
  const int64_t xs[4] = {N, 2, 2}, ys[1] = {N}, shape[2] = {2, 2};
  double want_mean[2] = {0, 0}, want_var[2] = {0, 0};
  kx_dataset* d = NULL;
  kx_model* m = NULL;
  int i;
  for (i = 0; i < N * 4; ++i) x[i] = (float)((i * 5) % 7) + (i % 2 ? 10.0f : 0.0f);
  for (i = 0; i < N * 4; ++i) want_mean[i % 2] += x[i] / (2.0 * N);
  for (i = 0; i < N * 4; ++i) want_var[i % 2] += (x[i] - want_mean[i % 2]) * (x[i] - want_mean[i % 2]) / (2.0 * N);
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 3, y, KX_DTYPE_F32, ys, 1, &d));
  EXPECT_OK(kx_dataset_feature_moments(d, mean, var, 2));
  for (i = 0; i < 2; ++i) EXPECT(fabs(mean[i] - want_mean[i]) < 1e-5 && fabs(var[i] - want_var[i]) < 1e-4);
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_feature_moments(d, mean, var, 3));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_feature_moments(NULL, mean, var, 2));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_dataset_feature_moments(d, NULL, var, 2));
  EXPECT_OK(kx_model_create_sequential(s, shape, 2, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_normalization(m, NULL, var, 2));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_normalization(m, mean, var, 0));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_normalization(m, three, three, 3)); /* 2 channels */
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_normalization(m, &zero, &negative, 1));
  EXPECT(kx_model_num_layers(m) == 0);
  EXPECT_OK(kx_model_add_normalization(m, mean, var, 2));
  EXPECT_OK(kx_model_add_flatten(m));
  EXPECT_OK(kx_model_add_dense(m, 2, KX_ACT_SOFTMAX));
  EXPECT(kx_model_num_params(m) == 4 + 4 * 2 + 2);
  EXPECT(kx_model_num_trainable_params(m) == 4 * 2 + 2);
  EXPECT_OK(kx_model_compile(m, NULL));
  EXPECT_OK(kx_fit(m, d, NULL, NULL, NULL));
  kx_model_destroy(m);
  kx_dataset_destroy(d);
}

/* KX_LAYER_NO_BIAS: Dense and Conv2D without a bias, counted as Keras counts them, through JSON and fit. */
static void test_layers_without_bias(kx_strategy* s) {
  enum { N = 8 };
  const int64_t flat[1] = {784}, image[3] = {6, 6, 1}, xs[4] = {N, 6, 6, 1}, ys[1] = {N};
  float x[N * 36], y[N];
  kx_model* m = NULL;
  kx_dataset* d = NULL;
  char* json = NULL;
  int i;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_dense_flags(NULL, 10, KX_ACT_SOFTMAX, KX_LAYER_NO_BIAS));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT,
             kx_model_add_conv2d_flags(NULL, 4, 3, 3, 1, KX_PADDING_SAME, KX_ACT_RELU, KX_LAYER_NO_BIAS));

  EXPECT_OK(kx_model_create_sequential(s, flat, 1, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_dense_flags(m, 10, KX_ACT_SOFTMAX, 2u)); /* unknown bit */
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_dense_flags(m, 10, (kx_activation)42, KX_LAYER_NO_BIAS));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_dense_flags(m, 0, KX_ACT_SOFTMAX, KX_LAYER_NO_BIAS));
  EXPECT(kx_model_num_layers(m) == 0);
  EXPECT_OK(kx_model_add_dense_flags(m, 10, KX_ACT_SOFTMAX, KX_LAYER_NO_BIAS));
  EXPECT(kx_model_num_params(m) == 7840); /* Keras: Dense(10, use_bias=False) on 784 inputs */
  EXPECT_OK(kx_model_to_json(m, &json));
  if (json) {
    kx_model* copy = NULL;
    EXPECT(strstr(json, "\"use_bias\": false") != NULL);
    EXPECT_OK(kx_model_from_json(s, json, &copy));
    EXPECT(kx_model_num_params(copy) == 7840);
    kx_model_destroy(copy);
    kx_free(json);
  }
  kx_model_destroy(m);

  /* Conv2D without a bias before a BatchNormalization, as Keras's conv -> BN blocks. */
  for (i = 0; i < N * 36; ++i) x[i] = (float)((i * 11) % 5) / 5.0f;
  for (i = 0; i < N; ++i) y[i] = (float)(i % 2);
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 4, y, KX_DTYPE_F32, ys, 1, &d));
  EXPECT_OK(kx_model_create_sequential(s, image, 3, &m));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_conv2d_flags(m, 4, 3, 3, 1, KX_PADDING_SAME, KX_ACT_NONE, 0x10u));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_add_conv2d_flags(m, 4, 3, 3, 1, (kx_padding)7, KX_ACT_NONE, 0));
  EXPECT_OK(kx_model_add_conv2d_flags(m, 4, 3, 3, 1, KX_PADDING_SAME, KX_ACT_NONE, KX_LAYER_NO_BIAS));
  EXPECT_OK(kx_model_add_batch_norm(m, 0.99f, 1e-3f));
  EXPECT_OK(kx_model_add_flatten(m));
  EXPECT_OK(kx_model_add_dense_flags(m, 2, KX_ACT_SOFTMAX, 0));
  EXPECT(kx_model_num_params(m) == 3 * 3 * 4 + 4 * 4 + 6 * 6 * 4 * 2 + 2);
  EXPECT_OK(kx_model_compile(m, NULL));
  EXPECT_ERR(KX_E_MISUSE, kx_model_add_dense_flags(m, 2, KX_ACT_NONE, KX_LAYER_NO_BIAS));
  EXPECT_ERR(KX_E_MISUSE, kx_model_add_conv2d_flags(m, 4, 3, 3, 1, KX_PADDING_SAME, KX_ACT_NONE, KX_LAYER_NO_BIAS));
  EXPECT_OK(kx_fit(m, d, NULL, NULL, NULL));
  kx_model_destroy(m);
  kx_dataset_destroy(d);
}

/* Mixed precision: the policy is a compile option; kx_model_loss_scale reads float16's scale. */
static void test_mixed_precision(kx_strategy* s) {
  enum { N = 16 };
  const int64_t in[1] = {4}, xs[2] = {N, 4}, ys[1] = {N};
  float x[N * 4], y[N];
  kx_model* m = NULL;
  kx_dataset* d = NULL;
  kx_compile_options co;
  double scale = -1;
  int i, p;
  for (i = 0; i < N * 4; ++i) x[i] = (float)((i * 7) % 9) / 9.0f;
  for (i = 0; i < N; ++i) y[i] = (float)(i % 3);
  EXPECT_OK(kx_dataset_from_arrays(x, KX_DTYPE_F32, xs, 2, y, KX_DTYPE_F32, ys, 1, &d));
  EXPECT_OK(kx_dataset_batch(d, 8, 0));
  for (p = KX_PRECISION_FLOAT32; p <= KX_PRECISION_MIXED_FLOAT16; ++p) {
    EXPECT_OK(kx_model_create_sequential(s, in, 1, &m));
    EXPECT_OK(kx_model_add_dense(m, 8, KX_ACT_RELU));
    EXPECT_OK(kx_model_add_dense(m, 3, KX_ACT_SOFTMAX));
    scale = -1;
    EXPECT_ERR(KX_E_MISUSE, kx_model_loss_scale(m, &scale));
    EXPECT(scale == -1); /* untouched on error */
    kx_compile_options_init(&co, sizeof co);
    co.precision = 3;
    EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_compile(m, &co));
    co.precision = p;
    EXPECT_OK(kx_model_compile(m, &co));
    EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_loss_scale(m, NULL));
    EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_loss_scale(NULL, &scale));
    EXPECT_OK(kx_fit(m, d, NULL, NULL, NULL));
    EXPECT_OK(kx_model_loss_scale(m, &scale));
    EXPECT(scale == (p == KX_PRECISION_MIXED_FLOAT16 ? 32768.0 : 1.0));
    kx_model_destroy(m);
  }
  kx_dataset_destroy(d);
}

/* kx_model_training_memory: the plan of a step before training, and the struct_size contract. */
static void test_training_memory(kx_strategy* s) {
  const int64_t in[3] = {8, 8, 1};
  kx_model* m = NULL;
  kx_training_memory r, at64;
  const int64_t weights = 4 * ((9 * 4 + 4) + (6 * 6 * 4 * 3 + 3));
  EXPECT_OK(kx_model_create_sequential(s, in, 3, &m));
  EXPECT_OK(kx_model_add_conv2d(m, 4, 3, 3, 1, KX_PADDING_VALID, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_flatten(m));
  EXPECT_OK(kx_model_add_dense(m, 3, KX_ACT_SOFTMAX));
  memset(&r, 0x5a, sizeof r);
  r.struct_size = sizeof r;
  EXPECT_ERR(KX_E_MISUSE, kx_model_training_memory(m, 16, &r));
  EXPECT(r.struct_size == sizeof r && r.batch == (int64_t)0x5a5a5a5a5a5a5a5aLL); /* untouched on error */
  EXPECT_OK(kx_model_compile(m, NULL)); /* Adam */
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_training_memory(NULL, 16, &r));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_training_memory(m, 16, NULL));
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_training_memory(m, 0, &r));
  r.struct_size = 4;
  EXPECT_ERR(KX_E_INVALID_ARGUMENT, kx_model_training_memory(m, 16, &r));
  EXPECT(r.batch == (int64_t)0x5a5a5a5a5a5a5a5aLL);
  r.struct_size = sizeof r;
  EXPECT_OK(kx_model_training_memory(m, 16, &r));
  EXPECT(r.struct_size == sizeof r);
  EXPECT(r.batch == 16 && r.rows == 16);
  EXPECT(r.weights == weights && r.weight_gradients == weights && r.optimizer_slots == 2 * weights);
  EXPECT(r.step_arena > 0 && r.step_arena <= r.step_arena_without_reuse);
  EXPECT(r.step_arena_without_reuse == r.activations + r.layer_gradients + r.workspace);
  EXPECT(r.workspace >= 16 * 36 * 9 * 4); /* the convolution's columns */
  EXPECT(r.total == r.weights + r.weight_gradients + r.optimizer_slots + r.step_arena + r.scratch + r.batch_buffers);
  /* A caller whose kx.h has a struct that is larger: fields beyond kx's stay as they were. */
  {
    unsigned char newer[sizeof r + 16];
    memset(newer, 0x5a, sizeof newer);
    ((kx_training_memory*)newer)->struct_size = (uint32_t)sizeof newer;
    EXPECT_OK(kx_model_training_memory(m, 16, (kx_training_memory*)newer));
    EXPECT(((kx_training_memory*)newer)->struct_size == sizeof r);
    EXPECT(((kx_training_memory*)newer)->total == r.total);
    EXPECT(newer[sizeof r] == 0x5a && newer[sizeof newer - 1] == 0x5a);
  }
  memset(&at64, 0, sizeof at64);
  at64.struct_size = sizeof at64;
  EXPECT_OK(kx_model_training_memory(m, 64, &at64));
  EXPECT(at64.step_arena > r.step_arena); /* a larger batch */
  kx_model_destroy(m);
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : ".";
  kx_strategy* s = NULL;
  test_library_and_devices();
  test_strategies();
  if (kx_strategy_create_default(&s) != KX_OK) {
    fprintf(stderr, "cannot create the default strategy: %s\n", kx_last_error_message());
    return 1;
  }
  test_models(s);
  test_datasets(dir);
  test_training(s);
  test_options_structs(s);
  test_optimizer_settings(s);
  test_files_and_checkpoints(s, dir);
  test_cnn(s);
  test_cnn_layers_and_transfer(s, dir);
  test_normalization(s);
  test_layers_without_bias(s);
  test_mixed_precision(s);
  test_training_memory(s);
  kx_strategy_destroy(s);
  printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
  return g_failures == 0 ? 0 : 1;
}
