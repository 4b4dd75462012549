/* A Keras user's first day through the C ABI (issue 20): model.summary() text, validation_split,
 * class and sample weights, ReduceLROnPlateau, LearningRateScheduler and BackupAndRestore.
 *
 *   kx_first_day_tests WORK_DIR
 */
/* These tests call the deprecated twins too: they stay part of the ABI. */
#define KX_ALLOW_DEPRECATED
#include <kx/kx.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

#define SENTINEL ((char*)0x5a5a)

static const char* g_dir = ".";

/* Compares two texts and prints the first line that differs. */
static void expect_text(const char* got, const char* want, const char* what) {
  ++g_checks;
  if (got && strcmp(got, want) == 0) return;
  ++g_failures;
  fprintf(stderr, "FAILED: %s differs from Keras's text\n--- got:\n%s--- want:\n%s", what, got ? got : "(null)", want);
}

/* ---- model.summary() ---------------------------------------------------------------------------- */

/* Keras 3 prints this for the MLP of TensorFlow's Fashion-MNIST tutorial (keras.Sequential of
 * Input((28, 28)), Flatten, Dense(128, relu), Dropout(0.2), Dense(10)) without a terminal: a table
 * 76 characters wide, columns 33 / 24 / 15 with their padding (Keras's positions 0.45 / 0.80 / 1.0
 * of 76, each column plus 2 of padding, then rich's even reduction of 10 = 3 + 4 + 3 to fit the
 * borders). 101,770 parameters of 4 bytes: 407,080 B = 397.54 KB. */
static const char* const kMlpSummary =
    "Model: \"sequential\"\n"
    "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┓\n"
    "┃ Layer (type)                    ┃ Output Shape           ┃       Param # ┃\n"
    "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━┩\n"
    "│ flatten (Flatten)               │ (None, 784)            │             0 │\n"
    "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
    "│ dense (Dense)                   │ (None, 128)            │       100,480 │\n"
    "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
    "│ dropout (Dropout)               │ (None, 128)            │             0 │\n"
    "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
    "│ dense_1 (Dense)                 │ (None, 10)             │         1,290 │\n"
    "└─────────────────────────────────┴────────────────────────┴───────────────┘\n"
    " Total params: 101,770 (397.54 KB)\n"
    " Trainable params: 101,770 (397.54 KB)\n"
    " Non-trainable params: 0 (0.00 B)\n";

/* keras.io's "Simple MNIST convnet" (Conv2D 32, MaxPooling2D, Conv2D 64, MaxPooling2D, Flatten,
 * Dropout(0.5), Dense(10)), whose summary keras.io shows as below. */
static const char* const kCnnSummary =
    "Model: \"sequential\"\n"
    "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┓\n"
    "┃ Layer (type)                    ┃ Output Shape           ┃       Param # ┃\n"
    "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━┩\n"
    "│ conv2d (Conv2D)                 │ (None, 26, 26, 32)     │           320 │\n"
    "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
    "│ max_pooling2d (MaxPooling2D)    │ (None, 13, 13, 32)     │             0 │\n"
    "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
    "│ conv2d_1 (Conv2D)               │ (None, 11, 11, 64)     │        18,496 │\n"
    "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
    "│ max_pooling2d_1 (MaxPooling2D)  │ (None, 5, 5, 64)       │             0 │\n"
    "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
    "│ flatten (Flatten)               │ (None, 1600)           │             0 │\n"
    "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
    "│ dropout (Dropout)               │ (None, 1600)           │             0 │\n"
    "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
    "│ dense (Dense)                   │ (None, 10)             │        16,010 │\n"
    "└─────────────────────────────────┴────────────────────────┴───────────────┘\n"
    " Total params: 34,826 (136.04 KB)\n"
    " Trainable params: 34,826 (136.04 KB)\n"
    " Non-trainable params: 0 (0.00 B)\n";

static kx_model* tutorial_mlp(kx_strategy* s) {
  const int64_t shape[] = {28, 28};
  kx_model* m = NULL;
  EXPECT_OK(kx_model_create_sequential(s, shape, 2, &m));
  if (!m) return NULL;
  EXPECT_OK(kx_model_add_flatten(m));
  EXPECT_OK(kx_model_add_dense(m, 128, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_dropout(m, 0.2f));
  EXPECT_OK(kx_model_add_dense(m, 10, KX_ACT_SOFTMAX));
  return m;
}

static void test_summary(kx_strategy* s) {
  const int64_t image[] = {28, 28, 1};
  kx_model* mlp = tutorial_mlp(s);
  kx_model* cnn = NULL;
  char* text = SENTINEL;
  if (!mlp) return;
  EXPECT_OK(kx_model_summary(mlp, &text)); /* before compile too */
  expect_text(text, kMlpSummary, "the MLP's summary");
  kx_free(text);
  EXPECT_OK(kx_model_compile(mlp, NULL));
  EXPECT_OK(kx_model_summary(mlp, &text));
  expect_text(text, kMlpSummary, "the compiled MLP's summary");
  kx_free(text);
  EXPECT(kx_model_num_params(mlp) == 101770);

  /* Keras's default width for a Sequential model on a wide terminal: 88 (columns 38 / 29 / 17). */
  EXPECT_OK(kx_model_summary_width(mlp, 0, &text));
  EXPECT(text && strstr(text, "┃ Layer (type)                         ┃ Output Shape                ┃         Param # ┃\n"));
  EXPECT(text && strstr(text, "│ dense (Dense)                        │ (None, 128)                 │         100,480 │\n"));
  kx_free(text);

  text = SENTINEL;
  EXPECT(kx_model_summary(NULL, &text) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_summary(mlp, NULL) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_summary_width(mlp, -1, &text) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_model_summary_width(mlp, 8, &text) == KX_E_INVALID_ARGUMENT); /* columns under 4 */
  EXPECT(text == SENTINEL);

  EXPECT_OK(kx_model_create_sequential(s, image, 3, &cnn));
  if (cnn) {
    EXPECT_OK(kx_model_add_conv2d(cnn, 32, 3, 3, 1, KX_PADDING_VALID, KX_ACT_RELU));
    EXPECT_OK(kx_model_add_max_pool2d(cnn, 2, 2));
    EXPECT_OK(kx_model_add_conv2d(cnn, 64, 3, 3, 1, KX_PADDING_VALID, KX_ACT_RELU));
    EXPECT_OK(kx_model_add_max_pool2d(cnn, 2, 2));
    EXPECT_OK(kx_model_add_flatten(cnn));
    EXPECT_OK(kx_model_add_dropout(cnn, 0.5f));
    EXPECT_OK(kx_model_add_dense(cnn, 10, KX_ACT_SOFTMAX));
    EXPECT_OK(kx_model_summary(cnn, &text));
    expect_text(text, kCnnSummary, "the CNN's summary");
    kx_free(text);
    EXPECT(kx_model_num_params(cnn) == 34826);
  }
  kx_model_destroy(cnn);
  kx_model_destroy(mlp);
}

/* ---- fit options and callbacks ------------------------------------------------------------------ */

#define N 48
#define IN 4

static float g_x[N * IN], g_y[N];

static void make_data(void) {
  int i;
  unsigned s = 12345u;
  for (i = 0; i < N * IN; ++i) {
    s = s * 1103515245u + 12345u;
    g_x[i] = (float)((s >> 8) & 0xffff) / 65535.0f - 0.5f;
  }
  for (i = 0; i < N; ++i) g_y[i] = g_x[i * IN] > 0 ? 1.0f : 0.0f;
}

static kx_dataset* data_range(int first, int n, int shuffle) {
  const int64_t xs[] = {n, IN}, ys[] = {n};
  kx_dataset* d = NULL;
  EXPECT_OK(kx_dataset_from_arrays(g_x + first * IN, KX_DTYPE_F32, xs, 2, g_y + first, KX_DTYPE_F32, ys, 1, &d));
  if (d && shuffle) EXPECT_OK(kx_dataset_shuffle(d, n, 5));
  if (d) EXPECT_OK(kx_dataset_batch(d, 8, 0));
  return d;
}

static kx_model* tiny(kx_strategy* s) {
  const int64_t shape[] = {IN};
  kx_model* m = NULL;
  kx_compile_options co;
  EXPECT_OK(kx_model_create_sequential(s, shape, 1, &m));
  if (!m) return NULL;
  EXPECT_OK(kx_model_add_dense(m, 6, KX_ACT_RELU));
  EXPECT_OK(kx_model_add_dense(m, 2, KX_ACT_SOFTMAX));
  kx_compile_options_init(&co, sizeof co);
  co.optimizer = KX_OPTIMIZER_SGD;
  co.learning_rate = 0.1;
  co.metrics = KX_METRIC_ACCURACY;
  EXPECT_OK(kx_model_compile(m, &co));
  return m;
}

static int same_weights(kx_model* a, kx_model* b) {
  static float wa[64], wb[64];
  const int64_t n = kx_model_num_params(a);
  if (n > 64 || kx_model_get_weights(a, wa, 64) != KX_OK || kx_model_get_weights(b, wb, 64) != KX_OK) return 0;
  return memcmp(wa, wb, sizeof(float) * (size_t)n) == 0;
}

/* Keras 3: split_at = int(floor(n * (1.0 - split))): 0.3 of 48 holds out the last 15 (33.6 -> 33). */
static void test_validation_split(kx_strategy* s) {
  kx_model *a = tiny(s), *b = tiny(s);
  kx_dataset *all = data_range(0, N, 1), *first = data_range(0, 33, 1), *last = data_range(33, N - 33, 0);
  kx_history *ha = NULL, *hb = NULL;
  kx_fit_options o;
  double va = 0, vb = 1;
  if (!a || !b || !all || !first || !last) return;
  kx_fit_options_init(&o, sizeof o);
  o.epochs = 2;
  o.validation_split = 0.3;
  EXPECT_OK(kx_fit(a, all, &o, NULL, &ha));
  kx_fit_options_init(&o, sizeof o);
  o.epochs = 2;
  o.validation = last;
  EXPECT_OK(kx_fit(b, first, &o, NULL, &hb));
  EXPECT_OK(kx_history_get(ha, "val_loss", 1, &va));
  EXPECT_OK(kx_history_get(hb, "val_loss", 1, &vb));
  EXPECT(va == vb);
  EXPECT(same_weights(a, b));
  kx_fit_options_init(&o, sizeof o);
  o.validation_split = 1.5;
  EXPECT(kx_fit(a, all, &o, NULL, NULL) == KX_E_INVALID_ARGUMENT);
  kx_history_destroy(ha);
  kx_history_destroy(hb);
  kx_dataset_destroy(all);
  kx_dataset_destroy(first);
  kx_dataset_destroy(last);
  kx_model_destroy(a);
  kx_model_destroy(b);
}

/* ---- class_weight and sample weights ------------------------------------------------------------ */

#define WN 12 /* samples of the one-step batch */

/* Dense(2, softmax) on IN inputs, plain SGD at 0.5: its step is easy to compute by hand. */
static kx_model* softmax_regression(kx_strategy* s) {
  const int64_t shape[] = {IN};
  kx_model* m = NULL;
  kx_compile_options co;
  EXPECT_OK(kx_model_create_sequential(s, shape, 1, &m));
  if (!m) return NULL;
  EXPECT_OK(kx_model_add_dense(m, 2, KX_ACT_SOFTMAX));
  kx_compile_options_init(&co, sizeof co);
  co.optimizer = KX_OPTIMIZER_SGD;
  co.learning_rate = 0.5;
  co.metrics = KX_METRIC_ACCURACY;
  co.seed = 9;
  EXPECT_OK(kx_model_compile(m, &co));
  return m;
}

/* In double, from weights w (kernel [IN][2], then bias [2]): Keras's weighted loss sum(sw * l) / n and
 * accuracy sum(sw * hit) / sum(sw) over the first WN samples, and w after one SGD step. */
static void step_by_hand(double w[IN * 2 + 2], const double* sw, double* loss, double* accuracy) {
  double grad[IN * 2 + 2] = {0}, hits = 0, weights = 0;
  int i, k, c;
  *loss = 0;
  for (i = 0; i < WN; ++i) {
    double z[2], mx, se = 0;
    const int label = (int)g_y[i];
    for (c = 0; c < 2; ++c) {
      z[c] = w[IN * 2 + c];
      for (k = 0; k < IN; ++k) z[c] += g_x[i * IN + k] * w[k * 2 + c];
    }
    mx = z[0] > z[1] ? z[0] : z[1];
    for (c = 0; c < 2; ++c) se += exp(z[c] - mx);
    *loss += sw[i] * -(z[label] - mx - log(se)) / WN;
    hits += sw[i] * (((z[1] > z[0]) ? 1 : 0) == label ? 1.0 : 0.0);
    weights += sw[i];
    for (c = 0; c < 2; ++c) {
      const double dz = sw[i] * (exp(z[c] - mx) / se - (c == label ? 1.0 : 0.0)) / WN;
      for (k = 0; k < IN; ++k) grad[k * 2 + c] += g_x[i * IN + k] * dz;
      grad[IN * 2 + c] += dz;
    }
  }
  *accuracy = weights > 0 ? hits / weights : 0;
  for (k = 0; k < IN * 2 + 2; ++k) w[k] -= 0.5 * grad[k];
}

/* One kx_fit step on the first WN samples, weighted by class_weight (cw, n_cw) or by the dataset's
 * sample weights (sw_data); checks it against the hand computation with per-sample weights sw. */
static void check_weighted_step(kx_strategy* s, const float* cw, size_t n_cw, const float* sw_data, const double* sw,
                                float after[IN * 2 + 2]) {
  kx_model* m = softmax_regression(s);
  const int64_t xs[] = {WN, IN}, ys[] = {WN};
  kx_dataset* d = NULL;
  kx_history* h = NULL;
  kx_fit_options o;
  float w0[IN * 2 + 2];
  double ref[IN * 2 + 2], loss = 0, accuracy = 0, got_loss = -1, got_accuracy = -1, worst = 0;
  int k;
  if (!m) return;
  EXPECT_OK(kx_dataset_from_arrays_weighted(g_x, KX_DTYPE_F32, xs, 2, g_y, KX_DTYPE_F32, ys, 1, sw_data, &d));
  if (!d) return;
  EXPECT_OK(kx_dataset_batch(d, WN, 0));
  EXPECT_OK(kx_model_get_weights(m, w0, IN * 2 + 2));
  for (k = 0; k < IN * 2 + 2; ++k) ref[k] = w0[k];
  step_by_hand(ref, sw, &loss, &accuracy);
  kx_fit_options_init(&o, sizeof o);
  o.class_weight = cw;
  o.n_class_weight = n_cw;
  EXPECT_OK(kx_fit(m, d, &o, NULL, &h));
  EXPECT_OK(kx_model_get_weights(m, after, IN * 2 + 2));
  /* (Not fmax in the loop: aarch64 GCC 12 crashes vectorising that reduction.) */
  for (k = 0; k < IN * 2 + 2; ++k)
    if (fabs(after[k] - ref[k]) > worst) worst = fabs(after[k] - ref[k]);
  EXPECT(worst <= 2e-6);
  EXPECT_OK(kx_history_get(h, "loss", 0, &got_loss));
  EXPECT_OK(kx_history_get(h, "accuracy", 0, &got_accuracy));
  EXPECT(fabs(got_loss - loss) <= 1e-6);
  EXPECT(fabs(got_accuracy - accuracy) <= 1e-12);
  kx_history_destroy(h);
  kx_dataset_destroy(d);
  kx_model_destroy(m);
}

static void test_class_and_sample_weights(kx_strategy* s) {
  const float cw[] = {2.5f, 0.5f};
  const float bad_cw[] = {1.0f, -2.0f};
  const int64_t xs[] = {WN, IN}, ys[] = {WN};
  float sw_data[WN], by_class[IN * 2 + 2], by_sample[IN * 2 + 2], plain[IN * 2 + 2];
  double sw[WN], ones[WN];
  kx_dataset *d = NULL, *bad = (kx_dataset*)SENTINEL;
  kx_model* m = softmax_regression(s);
  kx_fit_options o;
  int i, differs = 0;
  for (i = 0; i < WN; ++i) {
    sw_data[i] = cw[(int)g_y[i]];
    sw[i] = sw_data[i];
    ones[i] = 1;
  }
  check_weighted_step(s, cw, 2, NULL, sw, by_class);
  check_weighted_step(s, NULL, 0, sw_data, sw, by_sample);
  check_weighted_step(s, NULL, 0, NULL, ones, plain);
  EXPECT(memcmp(by_class, by_sample, sizeof by_class) == 0); /* the same step, bit for bit */
  for (i = 0; i < IN * 2 + 2; ++i) differs |= fabs(by_class[i] - plain[i]) > 1e-3;
  EXPECT(differs); /* the weights matter */
  /* Errors: a negative or NaN weight, class_weight with sample weights (as Keras), a NULL class_weight
   * with a count. */
  sw_data[3] = -1.0f;
  EXPECT(kx_dataset_from_arrays_weighted(g_x, KX_DTYPE_F32, xs, 2, g_y, KX_DTYPE_F32, ys, 1, sw_data, &bad) ==
         KX_E_INVALID_ARGUMENT);
  EXPECT(bad == (kx_dataset*)SENTINEL);
  sw_data[3] = NAN;
  EXPECT(kx_dataset_from_arrays_weighted(g_x, KX_DTYPE_F32, xs, 2, g_y, KX_DTYPE_F32, ys, 1, sw_data, &bad) ==
         KX_E_INVALID_ARGUMENT);
  sw_data[3] = 1.0f;
  EXPECT_OK(kx_dataset_from_arrays_weighted(g_x, KX_DTYPE_F32, xs, 2, g_y, KX_DTYPE_F32, ys, 1, sw_data, &d));
  if (!m || !d) return;
  kx_fit_options_init(&o, sizeof o);
  o.class_weight = cw;
  o.n_class_weight = 2;
  EXPECT(kx_fit(m, d, &o, NULL, NULL) == KX_E_INVALID_ARGUMENT);
  EXPECT(strstr(kx_last_error_message(), "class_weight") != NULL);
  kx_dataset_destroy(d);
  d = data_range(0, WN, 0);
  o.class_weight = bad_cw;
  EXPECT(kx_fit(m, d, &o, NULL, NULL) == KX_E_INVALID_ARGUMENT);
  o.class_weight = NULL;
  EXPECT(kx_fit(m, d, &o, NULL, NULL) == KX_E_INVALID_ARGUMENT);
  kx_dataset_destroy(d);
  kx_model_destroy(m);
}

static double halve_after_first(int32_t epoch, double lr, void* user_data) {
  ++*(int*)user_data;
  return epoch == 0 ? lr : lr * 0.5;
}

static void test_learning_rate_callbacks(kx_strategy* s) {
  kx_model* m = tiny(s);
  kx_dataset* d = data_range(0, N, 0);
  kx_callbacks* c = NULL;
  kx_history* h = NULL;
  kx_fit_options o;
  kx_reduce_lr_options r;
  int calls = 0;
  double lr = 0;
  const double lr0 = (double)(float)0.1;
  if (!m || !d) return;
  EXPECT_OK(kx_callbacks_create(&c));
  EXPECT_OK(kx_callbacks_add_learning_rate_scheduler(c, halve_after_first, &calls));
  kx_fit_options_init(&o, sizeof o);
  o.epochs = 3;
  EXPECT_OK(kx_fit(m, d, &o, c, &h));
  EXPECT(calls == 3);
  EXPECT_OK(kx_history_get(h, "learning_rate", 0, &lr));
  EXPECT(lr == lr0);
  EXPECT_OK(kx_history_get(h, "learning_rate", 2, &lr));
  EXPECT(lr == (double)(float)((double)(float)(lr0 * 0.5) * 0.5));
  kx_history_destroy(h);
  kx_callbacks_destroy(c);

  /* ReduceLROnPlateau on "loss" with min_delta 10 (never improves after the first epoch), patience 1,
   * cooldown 2: the rate halves at the end of epoch 2 (index 1); epoch 3 cools down (2 -> 1); epoch 4
   * counts down to 0 and, out of cooldown, waits 1 = patience: halves again. Each epoch logs the rate
   * it trained with. */
  EXPECT_OK(kx_callbacks_create(&c));
  kx_reduce_lr_options_init(&r, sizeof r);
  r.monitor = "loss";
  r.factor = 0.5;
  r.patience = 1;
  r.min_delta = 10;
  r.cooldown = 2;
  EXPECT_OK(kx_callbacks_add_reduce_lr_on_plateau_options(c, &r));
  kx_fit_options_init(&o, sizeof o);
  o.epochs = 5;
  EXPECT_OK(kx_fit(m, d, &o, c, &h));
  {
    const double half = (double)(float)(lr0 * 0.5), quarter = (double)(float)(half * 0.5);
    const double want[5] = {lr0, lr0, half, half, quarter};
    int e;
    for (e = 0; e < 5; ++e) {
      EXPECT_OK(kx_history_get(h, "learning_rate", e, &lr));
      EXPECT(lr == want[e]);
    }
  }
  kx_history_destroy(h);
  EXPECT(kx_callbacks_add_reduce_lr_on_plateau(c, "val_los", 0.5, 1, 0) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_callbacks_add_reduce_lr_on_plateau(c, NULL, 1.0, 1, 0) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_callbacks_add_learning_rate_scheduler(c, NULL, NULL) == KX_E_INVALID_ARGUMENT);
  r.mode = (kx_monitor_mode)7;
  EXPECT(kx_callbacks_add_reduce_lr_on_plateau_options(c, &r) == KX_E_INVALID_ARGUMENT);
  kx_callbacks_destroy(c);
  /* val_loss without validation data: the fit says so. */
  EXPECT_OK(kx_callbacks_create(&c));
  EXPECT_OK(kx_callbacks_add_reduce_lr_on_plateau(c, NULL, 0.5, 1, 0));
  EXPECT(kx_fit(m, d, NULL, c, NULL) == KX_E_INVALID_ARGUMENT);
  kx_callbacks_destroy(c);
  kx_dataset_destroy(d);
  kx_model_destroy(m);
}

static int32_t fail_at_epoch_2(const kx_event* ev, void* user_data) {
  (void)user_data;
  return ev->kind == KX_EVENT_EPOCH_BEGIN && ev->epoch == 2 ? KX_E_IO : 0;
}

static int dir_exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Keras's example: a fit of 5 epochs fails as epoch 3 begins; a new fit with the same callback runs
 * epochs 3 to 5 only and ends bitwise where an uninterrupted fit ends; the backup is gone after. */
static void test_backup_and_restore(kx_strategy* s) {
  kx_model *straight = tiny(s), *m = tiny(s);
  kx_dataset* d = data_range(0, N, 1);
  kx_callbacks *c = NULL, *again = NULL;
  kx_history* h = NULL;
  kx_fit_options o;
  char dir[512];
  if (!straight || !m || !d) return;
  snprintf(dir, sizeof dir, "%s/backup", g_dir);
  kx_fit_options_init(&o, sizeof o);
  o.epochs = 5;
  EXPECT_OK(kx_fit(straight, d, &o, NULL, NULL));
  EXPECT_OK(kx_callbacks_create(&c));
  EXPECT_OK(kx_callbacks_add_backup_and_restore(c, dir));
  EXPECT_OK(kx_callbacks_add_function_flags(c, fail_at_epoch_2, NULL, KX_CALLBACK_MAY_FAIL));
  EXPECT(kx_fit(m, d, &o, c, NULL) == KX_E_IO);
  EXPECT(dir_exists(dir));
  EXPECT_OK(kx_callbacks_create(&again));
  EXPECT_OK(kx_callbacks_add_backup_and_restore(again, dir));
  EXPECT_OK(kx_fit(m, d, &o, again, &h));
  EXPECT(kx_history_epochs(h) == 3);
  EXPECT(same_weights(m, straight));
  EXPECT(!dir_exists(dir));
  EXPECT(kx_callbacks_add_backup_and_restore(again, "") == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_callbacks_add_backup_and_restore_every(again, dir, -1) == KX_E_INVALID_ARGUMENT);
  EXPECT(kx_callbacks_add_backup_and_restore(again, NULL) == KX_E_INVALID_ARGUMENT);
  kx_history_destroy(h);
  kx_callbacks_destroy(c);
  kx_callbacks_destroy(again);
  kx_dataset_destroy(d);
  kx_model_destroy(m);
  kx_model_destroy(straight);
}

int main(int argc, char** argv) {
  kx_strategy* s = NULL;
  if (argc > 1) g_dir = argv[1];
  mkdir(g_dir, 0755);
  EXPECT_OK(kx_strategy_create_mirrored(NULL, 0, &s));
  if (!s) return 1;
  test_summary(s);
  make_data();
  test_validation_split(s);
  test_class_and_sample_weights(s);
  test_learning_rate_callbacks(s);
  test_backup_and_restore(s);
  kx_strategy_destroy(s);
  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
