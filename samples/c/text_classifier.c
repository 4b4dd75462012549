/* A small text classifier with kx's C ABI, layers by their Keras configs:
 *
 *   Embedding(32, 16, mask_zero=True) -> Bidirectional(LSTM(16)) -> Dense(3, softmax)
 *   sparse categorical cross-entropy, Adam 1e-2, batch 32
 *
 * The data are made here: "sentences" of 6 to 20 token ids (ids 0 pad them to 20 at the end), of
 * filler words 4..31 and one keyword, 1, 2 or 3, somewhere among them; the class is the keyword. The
 * ids reach kx as int32 (kx_dataset_from_arrays with KX_DTYPE_I32), the Embedding's mask makes the
 * LSTMs skip the padding. Chance is 1/3; the model should reach well above 0.9 in a few epochs.
 *
 *   text_classifier [samples] [epochs]   (defaults: 2000, 4)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kx/kx.h"

enum { STEPS = 20, VOCAB = 32, MIN_WORDS = 6, CLASSES = 3 };

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

static void make_sentences(int32_t* x, int32_t* y, int64_t n, uint32_t seed) {
  int64_t i;
  for (i = 0; i < n; ++i) {
    int32_t* ids = x + i * STEPS;
    const int words = MIN_WORDS + (int)(next_random(&seed) % (STEPS - MIN_WORDS + 1));
    const int label = (int)(next_random(&seed) % CLASSES);
    const int at = (int)(next_random(&seed) % (uint32_t)words);
    int t;
    for (t = 0; t < STEPS; ++t) ids[t] = t < words ? 4 + (int32_t)(next_random(&seed) % (VOCAB - 4)) : 0;
    ids[at] = 1 + label;
    y[i] = label;
  }
}

static int build(kx_model* m) {
  static const char* const layers[] = {
      "{\"class_name\": \"Embedding\", \"config\": {\"input_dim\": 32, \"output_dim\": 16, \"mask_zero\": true}}",
      "{\"class_name\": \"Bidirectional\", \"config\": {\"layer\": {\"class_name\": \"LSTM\", \"config\": "
      "{\"units\": 16}}}}",
      "{\"class_name\": \"Dense\", \"config\": {\"units\": 3, \"activation\": \"softmax\"}}",
  };
  size_t i;
  for (i = 0; i < sizeof layers / sizeof layers[0]; ++i)
    if (!check(kx_model_add_layer(m, layers[i], NULL, 0, NULL), "kx_model_add_layer")) return 0;
  return 1;
}

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? atoll(argv[1]) : 2000;
  const int32_t epochs = argc > 2 ? atoi(argv[2]) : 4;
  const int64_t n_val = n / 4 > 0 ? n / 4 : 1;
  const int64_t input_shape[1] = {STEPS};
  const int64_t x_shape[2] = {n, STEPS}, y_shape[2] = {n, 1};
  const int64_t vx_shape[2] = {n_val, STEPS}, vy_shape[2] = {n_val, 1};
  int32_t *x = NULL, *y = NULL, *vx = NULL, *vy = NULL;
  kx_strategy* s = NULL;
  kx_model* m = NULL;
  kx_dataset *train = NULL, *val = NULL;
  kx_compile_options co;
  kx_fit_options fo;
  double loss = 0, accuracy = 0;
  int ok = 0;
  if (n < 1 || epochs < 1) {
    fprintf(stderr, "usage: text_classifier [samples >= 1] [epochs >= 1]\n");
    return 2;
  }
  x = malloc((size_t)n * STEPS * sizeof *x);
  vx = malloc((size_t)n_val * STEPS * sizeof *vx);
  y = malloc((size_t)n * sizeof *y);
  vy = malloc((size_t)n_val * sizeof *vy);
  if (!x || !vx || !y || !vy) {
    fprintf(stderr, "out of memory\n");
    goto done;
  }
  make_sentences(x, y, n, 1);
  make_sentences(vx, vy, n_val, 2);

  if (!check(kx_strategy_create_default(&s), "kx_strategy_create_default")) goto done;
  if (!check(kx_dataset_from_arrays(x, KX_DTYPE_I32, x_shape, 2, y, KX_DTYPE_I32, y_shape, 2, &train), "training data") ||
      !check(kx_dataset_from_arrays(vx, KX_DTYPE_I32, vx_shape, 2, vy, KX_DTYPE_I32, vy_shape, 2, &val), "validation data"))
    goto done;
  if (!check(kx_dataset_shuffle(train, n, 7), "shuffle") || !check(kx_dataset_batch(train, 32, 0), "batch")) goto done;
  if (!check(kx_model_create_sequential(s, input_shape, 1, &m), "kx_model_create_sequential") || !build(m)) goto done;
  printf("model: %lld parameters\n", (long long)kx_model_num_params(m));

  kx_compile_options_init(&co, sizeof co);
  co.optimizer = KX_OPTIMIZER_ADAM;
  co.learning_rate = 1e-2;
  co.loss = KX_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
  co.metrics = KX_METRIC_ACCURACY;
  co.seed = 5;
  if (!check(kx_model_compile(m, &co), "kx_model_compile")) goto done;

  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = epochs;
  fo.validation = val;
  fo.verbose = 2;
  if (!check(kx_fit(m, train, &fo, NULL, NULL), "kx_fit")) goto done;
  if (!check(kx_evaluate(m, val, &loss, &accuracy), "kx_evaluate")) goto done;
  printf("validation loss: %.4f\nvalidation accuracy: %.4f\n", loss, accuracy);
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
