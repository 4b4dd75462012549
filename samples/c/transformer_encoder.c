/* A small transformer encoder with kx's C ABI, on sequences of float features:
 *
 *   input [16, 4] (a sinusoidal position term added to the features), Dense 32 per step
 *   2 blocks: MultiHeadAttention (4 heads, key_dim 8) + residual Add + LayerNormalization,
 *             Dense 64 relu + Dense 32 + residual Add + LayerNormalization
 *   Flatten, Dense 2 softmax; sparse categorical cross-entropy, Adam 1e-3, batch 32
 *
 * The task needs attention and positions: each sequence is noise with two marked steps, one with
 * feature 0 high and one with feature 1 high; the label says which comes first. The sample makes
 * the data itself (a fixed generator), trains, and reports the validation accuracy; given a minimum
 * it exits with 1 below it.
 *
 *   transformer_encoder [samples] [epochs] [min_accuracy]   (defaults: 1024, 8, none)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kx/kx.h"

enum { STEPS = 16, FEATURES = 4, D_MODEL = 32 };

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

static float uniform(uint32_t* state) { return (float)(next_random(state) % 10000u) / 10000.0f; }

/* x[i, t, f] = noise + marks + sin/cos of the step (the position term); y[i] = 1 when the feature-1 mark
 * comes before the feature-0 mark. */
static void make_sequences(float* x, int32_t* y, int64_t n, uint32_t seed) {
  int64_t i;
  for (i = 0; i < n; ++i) {
    float* s = x + i * STEPS * FEATURES;
    const int first = (int)(next_random(&seed) % (STEPS - 1));
    const int second = first + 1 + (int)(next_random(&seed) % (STEPS - 1 - first));
    const int label = (int)(next_random(&seed) % 2);
    int t, f;
    for (t = 0; t < STEPS * FEATURES; ++t) s[t] = 0.3f * (uniform(&seed) - 0.5f);
    s[first * FEATURES + (label ? 1 : 0)] += 2.0f;
    s[second * FEATURES + (label ? 0 : 1)] += 2.0f;
    for (t = 0; t < STEPS; ++t)
      for (f = 0; f < FEATURES; ++f) {
        const double rate = pow(100.0, -(double)(f / 2 * 2) / FEATURES);
        s[t * FEATURES + f] += (float)(f % 2 == 0 ? sin(t * rate) : cos(t * rate));
      }
    y[i] = label;
  }
}

/* Adds a layer from its Keras config reading the named inputs; its name goes to name_out (size 64). */
static int add(kx_model* m, const char* json, const char* in0, const char* in1, char* name_out) {
  const char* inputs[2];
  char* name = NULL;
  size_t n = 0;
  if (in0) inputs[n++] = in0;
  if (in1) inputs[n++] = in1;
  if (!check(kx_model_add_layer(m, json, inputs, n, &name), json)) return 0;
  snprintf(name_out, 64, "%s", name);
  kx_free(name);
  return 1;
}

static int build(kx_model* m) {
  char x[64], a[64], sum[64], ff[64], ff2[64];
  int b;
  if (!add(m, "{\"class_name\": \"Dense\", \"config\": {\"units\": 32}}", "input_layer", NULL, x)) return 0;
  for (b = 0; b < 2; ++b) {
    if (!add(m, "{\"class_name\": \"MultiHeadAttention\", \"config\": {\"num_heads\": 4, \"key_dim\": 8}}", x, x, a) ||
        !add(m, "{\"class_name\": \"Add\", \"config\": {}}", x, a, sum) ||
        !add(m, "{\"class_name\": \"LayerNormalization\", \"config\": {\"epsilon\": 1e-6}}", sum, NULL, x) ||
        !add(m, "{\"class_name\": \"Dense\", \"config\": {\"units\": 64, \"activation\": \"relu\"}}", x, NULL, ff) ||
        !add(m, "{\"class_name\": \"Dense\", \"config\": {\"units\": 32}}", ff, NULL, ff2) ||
        !add(m, "{\"class_name\": \"Add\", \"config\": {}}", x, ff2, sum) ||
        !add(m, "{\"class_name\": \"LayerNormalization\", \"config\": {\"epsilon\": 1e-6}}", sum, NULL, x))
      return 0;
  }
  return add(m, "{\"class_name\": \"Flatten\", \"config\": {}}", x, NULL, a) &&
         add(m, "{\"class_name\": \"Dense\", \"config\": {\"units\": 2, \"activation\": \"softmax\"}}", a, NULL, x);
}

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? atoll(argv[1]) : 1024;
  const int32_t epochs = argc > 2 ? atoi(argv[2]) : 8;
  const double min_accuracy = argc > 3 ? atof(argv[3]) : -1.0;
  const int64_t input_shape[2] = {STEPS, FEATURES};
  const int64_t n_val = n / 4 > 0 ? n / 4 : 1;
  const int64_t x_shape[3] = {n, STEPS, FEATURES}, y_shape[2] = {n, 1};
  const int64_t vx_shape[3] = {n_val, STEPS, FEATURES}, vy_shape[2] = {n_val, 1};
  float *x = NULL, *vx = NULL;
  int32_t *y = NULL, *vy = NULL;
  kx_strategy* s = NULL;
  kx_model* m = NULL;
  kx_dataset *train = NULL, *val = NULL;
  kx_compile_options co;
  kx_fit_options fo;
  double loss = 0, accuracy = 0;
  int ok = 0;
  if (n < 1 || epochs < 1) {
    fprintf(stderr, "usage: transformer_encoder [samples >= 1] [epochs >= 1] [min_accuracy]\n");
    return 2;
  }
  x = malloc((size_t)n * STEPS * FEATURES * sizeof *x);
  vx = malloc((size_t)n_val * STEPS * FEATURES * sizeof *vx);
  y = malloc((size_t)n * sizeof *y);
  vy = malloc((size_t)n_val * sizeof *vy);
  if (!x || !vx || !y || !vy) {
    fprintf(stderr, "out of memory\n");
    goto done;
  }
  make_sequences(x, y, n, 1);
  make_sequences(vx, vy, n_val, 2);

  if (!check(kx_strategy_create_default(&s), "kx_strategy_create_default")) goto done;
  if (!check(kx_dataset_from_arrays(x, KX_DTYPE_F32, x_shape, 3, y, KX_DTYPE_I32, y_shape, 2, &train), "training data") ||
      !check(kx_dataset_from_arrays(vx, KX_DTYPE_F32, vx_shape, 3, vy, KX_DTYPE_I32, vy_shape, 2, &val),
             "validation data"))
    goto done;
  if (!check(kx_dataset_shuffle(train, n, 7), "shuffle") || !check(kx_dataset_batch(train, 32, 0), "batch")) goto done;
  if (!check(kx_model_create_functional(s, input_shape, 2, NULL, &m), "kx_model_create_functional") || !build(m))
    goto done;
  printf("model: %lld parameters\n", (long long)kx_model_num_params(m));

  kx_compile_options_init(&co, sizeof co);
  co.optimizer = KX_OPTIMIZER_ADAM;
  co.learning_rate = 1e-3;
  co.loss = KX_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
  co.metrics = KX_METRIC_ACCURACY;
  if (!check(kx_model_compile(m, &co), "kx_model_compile")) goto done;

  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = epochs;
  fo.validation = val;
  fo.verbose = 2;
  if (!check(kx_fit(m, train, &fo, NULL, NULL), "kx_fit")) goto done;
  if (!check(kx_evaluate(m, val, &loss, &accuracy), "kx_evaluate")) goto done;
  printf("validation loss: %.4f\nvalidation accuracy: %.4f\n", loss, accuracy);
  if (accuracy < min_accuracy) {
    fprintf(stderr, "validation accuracy %.4f is below %.4f\n", accuracy, min_accuracy);
    goto done;
  }
  ok = 1;

done:
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
