/* Seed 002's model with kx's C ABI: a binary image classifier on 150x150x3 inputs.
 *
 *   Conv2D 32 3x3 relu, MaxPooling2D 2
 *   Conv2D 64 3x3 relu, MaxPooling2D 2
 *   Conv2D 128 3x3 relu, MaxPooling2D 2
 *   Conv2D 128 3x3 relu, MaxPooling2D 2
 *   Flatten, Dropout 0.5, Dense 512 relu, Dense 1 sigmoid
 *   binary cross-entropy, Adam 1e-4, batch 20 (3,453,121 parameters)
 *
 * kx reads no image files: a host program decodes its images (cats and dogs, say) into a uint8 array
 * of shape (n, 150, 150, 3) and hands it to kx_dataset_from_arrays, which scales it to [0, 1]. This
 * sample makes such an array itself: each image is noise with one bright square, in the left half for
 * class 0 and in the right half for class 1.
 *
 *   image_cnn [samples] [epochs] [checkpoint_dir]   (defaults: 200, 3, no checkpoints)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kx/kx.h"

enum { SIDE = 150, CHANNELS = 3, SQUARE = 24 };

static int check(kx_status s, const char* what) {
  if (s == KX_OK) return 1;
  fprintf(stderr, "%s failed (status %d): %s\n", what, (int)s, kx_last_error_message());
  return 0;
}

/* A small linear congruential generator: the sample's data repeat from run to run. */
static uint32_t next_random(uint32_t* state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

static void make_images(uint8_t* x, int32_t* y, int64_t n, uint32_t seed) {
  int64_t i;
  for (i = 0; i < n; ++i) {
    uint8_t* img = x + i * SIDE * SIDE * CHANNELS;
    const int label = (int)(next_random(&seed) % 2);
    const int top = (int)(next_random(&seed) % (SIDE - SQUARE));
    const int left = (int)(next_random(&seed) % (SIDE / 2 - SQUARE)) + (label ? SIDE / 2 : 0);
    int r, c, k;
    for (r = 0; r < SIDE * SIDE * CHANNELS; ++r) img[r] = (uint8_t)(next_random(&seed) % 96);
    for (r = top; r < top + SQUARE; ++r)
      for (c = left; c < left + SQUARE; ++c)
        for (k = 0; k < CHANNELS; ++k) img[(r * SIDE + c) * CHANNELS + k] = 255;
    y[i] = label;
  }
}

static int build(kx_model* m) {
  const int32_t filters[4] = {32, 64, 128, 128};
  int b;
  for (b = 0; b < 4; ++b) {
    if (!check(kx_model_add_conv2d_flags(m, filters[b], 3, 3, 1, KX_PADDING_VALID, KX_ACT_RELU, 0), "conv2d")) return 0;
    if (!check(kx_model_add_max_pool2d(m, 2, 2), "max_pool2d")) return 0;
  }
  return check(kx_model_add_flatten(m), "flatten") && check(kx_model_add_dropout(m, 0.5f), "dropout") &&
         check(kx_model_add_dense_flags(m, 512, KX_ACT_RELU, 0), "dense") &&
         check(kx_model_add_dense_flags(m, 1, KX_ACT_SIGMOID, 0), "dense");
}

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? atoll(argv[1]) : 200;
  const int32_t epochs = argc > 2 ? atoi(argv[2]) : 3;
  const char* checkpoints = argc > 3 ? argv[3] : NULL;
  const int64_t input_shape[3] = {SIDE, SIDE, CHANNELS};
  const int64_t n_val = n / 5 > 0 ? n / 5 : 1;
  const int64_t x_shape[4] = {n, SIDE, SIDE, CHANNELS}, y_shape[2] = {n, 1};
  const int64_t vx_shape[4] = {n_val, SIDE, SIDE, CHANNELS}, vy_shape[2] = {n_val, 1};
  uint8_t *x = NULL, *vx = NULL;
  int32_t *y = NULL, *vy = NULL;
  kx_strategy* s = NULL;
  kx_model* m = NULL;
  kx_dataset *train = NULL, *val = NULL;
  kx_callbacks* cb = NULL;
  kx_compile_options co;
  kx_fit_options fo;
  double loss = 0, accuracy = 0;
  int ok = 0;
  if (n < 1 || epochs < 1) {
    fprintf(stderr, "usage: image_cnn [samples >= 1] [epochs >= 1] [checkpoint_dir]\n");
    return 2;
  }
  x = malloc((size_t)n * SIDE * SIDE * CHANNELS);
  vx = malloc((size_t)n_val * SIDE * SIDE * CHANNELS);
  y = malloc((size_t)n * sizeof *y);
  vy = malloc((size_t)n_val * sizeof *vy);
  if (!x || !vx || !y || !vy) {
    fprintf(stderr, "out of memory\n");
    goto done;
  }
  make_images(x, y, n, 1);
  make_images(vx, vy, n_val, 2);

  if (!check(kx_strategy_create_default(&s), "kx_strategy_create_default")) goto done;
  if (!check(kx_dataset_from_arrays(x, KX_DTYPE_U8, x_shape, 4, y, KX_DTYPE_I32, y_shape, 2, &train), "training data") ||
      !check(kx_dataset_from_arrays(vx, KX_DTYPE_U8, vx_shape, 4, vy, KX_DTYPE_I32, vy_shape, 2, &val), "validation data"))
    goto done;
  if (!check(kx_dataset_shuffle(train, n, 7), "shuffle") || !check(kx_dataset_batch(train, 20, 0), "batch")) goto done;
  if (!check(kx_model_create_sequential(s, input_shape, 3, &m), "kx_model_create_sequential") || !build(m)) goto done;
  printf("model: %lld parameters\n", (long long)kx_model_num_params(m));

  kx_compile_options_init(&co, sizeof co);
  co.optimizer = KX_OPTIMIZER_ADAM;
  co.learning_rate = 1e-4;
  co.loss = KX_LOSS_BINARY_CROSSENTROPY;
  co.metrics = KX_METRIC_ACCURACY;
  if (!check(kx_model_compile(m, &co), "kx_model_compile")) goto done;
  if (!check(kx_callbacks_create(&cb), "kx_callbacks_create")) goto done;
  if (checkpoints) {
    char path[4096];
    snprintf(path, sizeof path, "%s/image_cnn-{epoch:02d}.kx", checkpoints);
    if (!check(kx_callbacks_add_model_checkpoint(cb, path, 0, 2), "checkpoints")) goto done;
  }

  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = epochs;
  fo.validation = val;
  fo.verbose = 2;
  if (!check(kx_fit(m, train, &fo, cb, NULL), "kx_fit")) goto done;
  if (!check(kx_evaluate(m, val, &loss, &accuracy), "kx_evaluate")) goto done;
  printf("validation loss: %.4f\nvalidation accuracy: %.4f\n", loss, accuracy);
  ok = 1;

done:
  kx_callbacks_destroy(cb);
  kx_model_destroy(m);
  kx_dataset_destroy(train);
  kx_dataset_destroy(val);
  kx_strategy_destroy(s);
  free(x);
  free(vx);
  free(y);
  free(vy);
  return ok ? 0 : 1;
}
