/* A Keras user's first day through the C ABI (issue 20): model.summary() text, validation_split,
 * class and sample weights, ReduceLROnPlateau, LearningRateScheduler and BackupAndRestore.
 *
 *   kx_first_day_tests WORK_DIR
 */
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

int main(int argc, char** argv) {
  kx_strategy* s = NULL;
  if (argc > 1) g_dir = argv[1];
  EXPECT_OK(kx_strategy_create_mirrored(NULL, 0, &s));
  if (!s) return 1;
  test_summary(s);
  kx_strategy_destroy(s);
  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
