/* kx_model_add_layer, kx_model_create_functional and kx_layer_class_name from C: bad input gets its
 * error and changes nothing; every layer kx lists is reached by its Keras config; a functional model
 * built call by call trains, predicts and exports; each layer kind has a case in kLayerCases below
 * (a layer kx lists without one fails this test).
 *
 *   kx_layers_by_config_tests [scratch_dir]
 */
#include <kx/kx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"

#define EXPECT_STATUS(code, call)                                                                  \
  do {                                                                                             \
    kx_status st_ = (call);                                                                        \
    ++g_checks;                                                                                    \
    if (st_ != (code)) {                                                                           \
      ++g_failures;                                                                                \
      fprintf(stderr, "%s:%d: FAILED: %s returned %d (want %d): %s\n", __FILE__, __LINE__, #call, \
              (int)st_, (int)(code), kx_last_error_message());                                     \
    }                                                                                              \
  } while (0)

#define SENTINEL ((char*)0x5a5a)

/* A model for each layer class: the input shape and the layer's Keras config, added to a Sequential
 * model; merge layers go into a functional model reading the input twice. ids: the inputs are token
 * ids below it (an Embedding); no_onnx: the export is refused with KX_E_UNSUPPORTED (no layer
 * today: every class exports). */
typedef struct {
  const char* class_name;
  int64_t shape[3];
  size_t rank;
  const char* json;
  int merge;
  int ids;
  int no_onnx;
} layer_case;

static const layer_case kLayerCases[] = {
    {"Dense", {4}, 1, "{\"class_name\": \"Dense\", \"config\": {\"units\": 3, \"activation\": \"relu\"}}", 0, 0, 0},
    {"Flatten", {2, 3}, 2, "{\"class_name\": \"Flatten\", \"config\": {}}", 0, 0, 0},
    {"Dropout", {4}, 1, "{\"class_name\": \"Dropout\", \"config\": {\"rate\": 0.5}}", 0, 0, 0},
    {"Conv2D", {5, 5, 2}, 3,
     "{\"class_name\": \"Conv2D\", \"config\": {\"filters\": 3, \"kernel_size\": [3, 3], \"padding\": \"same\"}}", 0, 0, 0},
    {"MaxPooling2D", {4, 4, 2}, 3, "{\"class_name\": \"MaxPooling2D\", \"config\": {\"pool_size\": 2}}", 0, 0, 0},
    {"AveragePooling2D", {4, 4, 2}, 3, "{\"class_name\": \"AveragePooling2D\", \"config\": {\"pool_size\": [2, 2]}}", 0, 0, 0},
    {"GlobalAveragePooling2D", {4, 4, 2}, 3, "{\"class_name\": \"GlobalAveragePooling2D\", \"config\": {}}", 0, 0, 0},
    {"ZeroPadding2D", {3, 3, 1}, 3, "{\"class_name\": \"ZeroPadding2D\", \"config\": {\"padding\": [[1, 0], [0, 2]]}}", 0, 0, 0},
    {"Normalization", {3}, 1,
     "{\"class_name\": \"Normalization\", \"config\": {\"mean\": [1, 2, 3], \"variance\": [1, 4, 9]}}", 0, 0, 0},
    {"BatchNormalization", {3}, 1, "{\"class_name\": \"BatchNormalization\", \"config\": {\"epsilon\": 0.001}}", 0, 0, 0},
    {"Add", {4}, 1, "{\"class_name\": \"Add\", \"config\": {}}", 1, 0, 0},
    {"Concatenate", {4}, 1, "{\"class_name\": \"Concatenate\", \"config\": {\"axis\": -1}}", 1, 0, 0},
    {"Activation", {4}, 1, "{\"class_name\": \"Activation\", \"config\": {\"activation\": \"tanh\"}}", 0, 0, 0},
    {"ReLU", {2, 3}, 2, "{\"class_name\": \"ReLU\", \"config\": {\"max_value\": 6.0}}", 0, 0, 0},
    {"DepthwiseConv2D", {5, 5, 2}, 3,
     "{\"class_name\": \"DepthwiseConv2D\", \"config\": {\"kernel_size\": 3, \"padding\": \"same\", "
     "\"depth_multiplier\": 2}}",
     0, 0, 0},
    {"Rescaling", {4}, 1, "{\"class_name\": \"Rescaling\", \"config\": {\"scale\": 0.5, \"offset\": -1.0}}", 0, 0, 0},
    {"Reshape", {6}, 1, "{\"class_name\": \"Reshape\", \"config\": {\"target_shape\": [2, -1]}}", 0, 0, 0},
    {"LeakyReLU", {2, 3}, 2, "{\"class_name\": \"LeakyReLU\", \"config\": {\"negative_slope\": 0.1}}", 0, 0, 0},
    {"GlobalMaxPooling2D", {4, 3, 2}, 3, "{\"class_name\": \"GlobalMaxPooling2D\", \"config\": {}}", 0, 0, 0},
    {"Embedding", {5}, 1,
     "{\"class_name\": \"Embedding\", \"config\": {\"input_dim\": 6, \"output_dim\": 3, \"mask_zero\": true}}", 0, 6,
     0},
    {"LayerNormalization", {2, 3}, 2, "{\"class_name\": \"LayerNormalization\", \"config\": {\"epsilon\": 1e-6}}", 0, 0, 0},
    {"MultiHeadAttention", {4, 3}, 2,
     "{\"class_name\": \"MultiHeadAttention\", \"config\": {\"num_heads\": 2, \"key_dim\": 2}}", 1, 0, 0},
    {"Conv1D", {6, 2}, 2,
     "{\"class_name\": \"Conv1D\", \"config\": {\"filters\": 3, \"kernel_size\": 3, \"padding\": \"causal\"}}", 0, 0, 0},
    {"MaxPooling1D", {6, 2}, 2, "{\"class_name\": \"MaxPooling1D\", \"config\": {\"pool_size\": 2}}", 0, 0, 0},
    {"AveragePooling1D", {6, 2}, 2, "{\"class_name\": \"AveragePooling1D\", \"config\": {\"pool_size\": 3}}", 0, 0, 0},
    {"GlobalAveragePooling1D", {6, 2}, 2, "{\"class_name\": \"GlobalAveragePooling1D\", \"config\": {}}", 0, 0, 0},
    {"SeparableConv2D", {5, 5, 2}, 3,
     "{\"class_name\": \"SeparableConv2D\", \"config\": {\"filters\": 3, \"kernel_size\": 3, \"padding\": \"same\"}}",
     0, 0, 0},
    {"Conv2DTranspose", {3, 3, 2}, 3,
     "{\"class_name\": \"Conv2DTranspose\", \"config\": {\"filters\": 2, \"kernel_size\": 3, \"strides\": 2}}", 0, 0, 0},
    {"UpSampling2D", {3, 3, 2}, 3,
     "{\"class_name\": \"UpSampling2D\", \"config\": {\"interpolation\": \"bilinear\"}}", 0, 0, 0},
    {"Multiply", {4}, 1, "{\"class_name\": \"Multiply\", \"config\": {}}", 1, 0, 0},
    {"TensorOperation", {4}, 1,
     "{\"class_name\": \"TensorOperation\", \"config\": {\"operation\": \"Multiply\", \"arguments\": [null, 2.0]}}", 0, 0, 0},
    {"LSTM", {4, 3}, 2, "{\"class_name\": \"LSTM\", \"config\": {\"units\": 2, \"return_sequences\": true}}", 0, 0, 0},
    {"GRU", {4, 3}, 2, "{\"class_name\": \"GRU\", \"config\": {\"units\": 2}}", 0, 0, 0},
    {"Bidirectional", {4, 3}, 2,
     "{\"class_name\": \"Bidirectional\", \"config\": {\"layer\": {\"class_name\": \"LSTM\", \"config\": "
     "{\"units\": 2}}}}",
     0, 0, 0},
    {"Masking", {4, 3}, 2, "{\"class_name\": \"Masking\", \"config\": {\"mask_value\": 0.5}}", 0, 0, 0},
};
#define NUM_CASES (sizeof kLayerCases / sizeof kLayerCases[0])

static const layer_case* case_of(const char* class_name) {
  size_t i;
  for (i = 0; i < NUM_CASES; ++i)
    if (strcmp(kLayerCases[i].class_name, class_name) == 0) return &kLayerCases[i];
  return NULL;
}

/* The case's model compiled, predicting two samples, as JSON and back, and as ONNX. */
static void check_case(kx_strategy* s, const layer_case* c, const char* dir) {
  kx_model* m = NULL;
  char* name = SENTINEL;
  char* json = NULL;
  char path[512];
  float x[256], y[256];
  kx_compile_options co;
  int64_t i, n;
  const char* both[2] = {"input_layer", "input_layer"};
  if (c->merge) {
    EXPECT_STATUS(KX_OK, kx_model_create_functional(s, c->shape, c->rank, NULL, &m));
    EXPECT_STATUS(KX_OK, kx_model_add_layer(m, c->json, both, 2, &name));
  } else {
    EXPECT_STATUS(KX_OK, kx_model_create_sequential(s, c->shape, c->rank, &m));
    EXPECT_STATUS(KX_OK, kx_model_add_layer(m, c->json, NULL, 0, &name));
  }
  if (!m) return;
  EXPECT(name != SENTINEL && name != NULL);
  if (name != SENTINEL && name) kx_free(name);
  EXPECT(kx_model_num_layers(m) == 1);
  kx_compile_options_init(&co, sizeof co);
  co.loss = KX_LOSS_MEAN_SQUARED_ERROR; /* any output shape */
  EXPECT_STATUS(KX_OK, kx_model_compile(m, &co));
  n = kx_model_input_size(m);
  EXPECT(n > 0 && n * 2 <= 256 && kx_model_output_size(m) * 2 <= 256);
  for (i = 0; i < 2 * n && i < 256; ++i) x[i] = c->ids ? (float)((i * 7) % c->ids) : (float)((i * 7) % 5) - 2.0f;
  EXPECT_STATUS(KX_OK, kx_predict(m, x, 2, y, 256));
  EXPECT_STATUS(KX_OK, kx_model_to_json(m, &json));
  if (json) {
    kx_model* copy = NULL;
    EXPECT(strstr(json, c->class_name) != NULL);
    EXPECT_STATUS(KX_OK, kx_model_from_json(s, json, &copy));
    EXPECT(copy && kx_model_num_params(copy) == kx_model_num_params(m));
    kx_model_destroy(copy);
    kx_free(json);
  }
  snprintf(path, sizeof path, "%s/layer_%s.onnx", dir, c->class_name);
  {
    EXPECT_STATUS(c->no_onnx ? KX_E_UNSUPPORTED : KX_OK, kx_model_export_onnx(m, path));
  }
  remove(path);
  kx_model_destroy(m);
}

static void test_bad_input(kx_strategy* s) {
  const int64_t shape[1] = {4};
  const char* dense = "{\"class_name\": \"Dense\", \"config\": {\"units\": 3}}";
  const char* unknown_input[1] = {"nowhere"};
  const char* null_input[1] = {NULL};
  kx_model* m = (kx_model*)SENTINEL;
  char* name = SENTINEL;
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_create_functional(NULL, shape, 1, NULL, &m));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_create_functional(s, NULL, 1, NULL, &m));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_create_functional(s, shape, 0, NULL, &m));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_create_functional(s, shape, 1, "", &m));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_create_functional(s, shape, 1, NULL, NULL));
  EXPECT(m == (kx_model*)SENTINEL);
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_add_layer(NULL, dense, NULL, 0, &name));

  EXPECT_STATUS(KX_OK, kx_model_create_functional(s, shape, 1, "x", &m));
  if (m == (kx_model*)SENTINEL) return;
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_add_layer(m, NULL, NULL, 0, &name));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_add_layer(m, "{\"class_name\": ", NULL, 0, &name));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_add_layer(m, "{\"class_name\": \"Dense\"}", NULL, 0, &name));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT,
                kx_model_add_layer(m, "{\"class_name\": \"NoSuchLayer\", \"config\": {}}", NULL, 0, &name));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT,
                kx_model_add_layer(m, "{\"class_name\": \"Dense\", \"config\": {\"units\": \"three\"}}", NULL, 0, &name));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_add_layer(m, dense, unknown_input, 1, &name));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_add_layer(m, dense, null_input, 1, &name));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT, kx_model_add_layer(m, dense, NULL, 1, &name));
  EXPECT(name == SENTINEL);
  EXPECT(kx_model_num_layers(m) == 0);
  /* The name is optional; a duplicate name is refused and leaves the model as it was. */
  EXPECT_STATUS(KX_OK, kx_model_add_layer(m, "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 3}}",
                                          NULL, 0, NULL));
  EXPECT_STATUS(KX_E_INVALID_ARGUMENT,
                kx_model_add_layer(m, "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 3}}", NULL, 0,
                                   &name));
  EXPECT(name == SENTINEL && kx_model_num_layers(m) == 1);
  EXPECT_STATUS(KX_OK, kx_model_compile(m, NULL));
  EXPECT_STATUS(KX_E_MISUSE, kx_model_add_layer(m, dense, NULL, 0, &name));
  EXPECT(name == SENTINEL && kx_model_num_layers(m) == 1);
  kx_model_destroy(m);
}

/* Every class kx lists has a case here, and each case's layer works end to end. */
static void test_every_layer(kx_strategy* s, const char* dir) {
  size_t i;
  const char* cls;
  for (i = 0; (cls = kx_layer_class_name(i)) != NULL; ++i) {
    const layer_case* c = case_of(cls);
    if (!c) {
      ++g_checks;
      ++g_failures;
      fprintf(stderr, "FAILED: layer class %s has no case in kLayerCases\n", cls);
      continue;
    }
    check_case(s, c, dir);
  }
  EXPECT(i == NUM_CASES);
}

/* A residual block called layer by layer, as keras.Model(inputs, outputs) builds it: named by the
 * generated names kx returns, trained a step, its architecture written as a Functional graph. */
static void test_functional_calls(kx_strategy* s) {
  const int64_t shape[1] = {6};
  kx_model* m = NULL;
  char* a = NULL;
  char* b = NULL;
  char* sum = NULL;
  char* json = NULL;
  const char* x[1] = {"pixels"};
  float xs[12], ys[2] = {0, 1};
  int i;
  EXPECT_STATUS(KX_OK, kx_model_create_functional(s, shape, 1, "pixels", &m));
  if (!m) return;
  EXPECT_STATUS(KX_OK, kx_model_add_layer(m, "{\"class_name\": \"Dense\", \"config\": {\"units\": 6}}", x, 1, &a));
  EXPECT_STATUS(KX_OK, kx_model_add_layer(m, "{\"class_name\": \"Dense\", \"config\": {\"units\": 6}}", x, 1, &b));
  EXPECT(a && b && strcmp(a, "dense") == 0 && strcmp(b, "dense_1") == 0);
  if (a && b) {
    const char* parts[2];
    parts[0] = a;
    parts[1] = b;
    EXPECT_STATUS(KX_OK, kx_model_add_layer(m, "{\"class_name\": \"Add\", \"config\": {}}", parts, 2, &sum));
  }
  EXPECT(sum && strcmp(sum, "add") == 0);
  EXPECT_STATUS(KX_OK, kx_model_add_layer(
                           m, "{\"class_name\": \"Dense\", \"config\": {\"units\": 2, \"activation\": \"softmax\"}}",
                           NULL, 0, NULL));
  EXPECT(kx_model_num_params(m) == 2 * (6 * 6 + 6) + 6 * 2 + 2);
  EXPECT_STATUS(KX_OK, kx_model_compile(m, NULL));
  for (i = 0; i < 12; ++i) xs[i] = (float)i / 12.0f;
  EXPECT_STATUS(KX_OK, kx_model_train_on_batch(m, xs, ys, 2, NULL, NULL));
  EXPECT_STATUS(KX_OK, kx_model_to_json(m, &json));
  EXPECT(json && strstr(json, "\"Functional\"") && strstr(json, "\"pixels\""));
  kx_free(json);
  kx_free(a);
  kx_free(b);
  kx_free(sum);
  kx_model_destroy(m);
}

/* attention(x, x, attention_mask=m, use_causal_mask=True), m = relu(Dense(4)(x)): the mask is a tensor
 * passed by keyword, as Keras writes it in a call's kwargs; predict with it, and a tensor by a
 * keyword the layer does not take is KX_E_UNSUPPORTED naming it. */
static void test_attention_mask_by_keyword(kx_strategy* s) {
  const int64_t shape[2] = {4, 3};
  const char* x[2] = {"tokens", "tokens"};
  const char* mha =
      "{\"class_name\": \"MultiHeadAttention\", \"config\": {\"num_heads\": 2, \"key_dim\": 2}, \"kwargs\": "
      "{\"use_causal_mask\": true, \"attention_mask\": {\"class_name\": \"__keras_tensor__\", \"config\": "
      "{\"keras_history\": [\"m\", 0, 0]}}}}";
  const char* dense_with_mask =
      "{\"class_name\": \"Dense\", \"config\": {\"units\": 2}, \"kwargs\": {\"mask\": {\"class_name\": "
      "\"__keras_tensor__\", \"config\": {\"keras_history\": [\"m\", 0, 0]}}}}";
  kx_model* m = NULL;
  char* json = NULL;
  float xs[24], out[24];
  int i;
  EXPECT_STATUS(KX_OK, kx_model_create_functional(s, shape, 2, "tokens", &m));
  if (!m) return;
  EXPECT_STATUS(KX_OK, kx_model_add_layer(
                           m, "{\"class_name\": \"Dense\", \"config\": {\"name\": \"m\", \"units\": 4, \"activation\": \"relu\"}}",
                           x, 1, NULL));
  EXPECT_STATUS(KX_E_UNSUPPORTED, kx_model_add_layer(m, dense_with_mask, x, 1, NULL));
  EXPECT(strstr(kx_last_error_message(), "mask") != NULL);
  EXPECT_STATUS(KX_OK, kx_model_add_layer(m, mha, x, 2, NULL));
  EXPECT_STATUS(KX_OK, kx_model_to_json(m, &json));
  EXPECT(json && strstr(json, "\"attention_mask\"") && strstr(json, "\"use_causal_mask\": true"));
  kx_free(json);
  EXPECT_STATUS(KX_OK, kx_model_compile(m, NULL));
  for (i = 0; i < 24; ++i) xs[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
  EXPECT_STATUS(KX_OK, kx_predict(m, xs, 2, out, 24));
  for (i = 0; i < 24; ++i) EXPECT(out[i] == out[i]); /* no NaN, masked rows included */
  kx_model_destroy(m);
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : ".";
  kx_strategy* s = NULL;
  if (kx_strategy_create_default(&s) != KX_OK) {
    fprintf(stderr, "cannot create the default strategy: %s\n", kx_last_error_message());
    return 1;
  }
  EXPECT(kx_layer_class_name(0) != NULL && strcmp(kx_layer_class_name(0), "Dense") == 0);
  EXPECT(kx_layer_class_name((size_t)-1) == NULL);
  test_bad_input(s);
  test_every_layer(s, dir);
  test_functional_calls(s);
  test_attention_mask_by_keyword(s);
  kx_strategy_destroy(s);
  printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
  return g_failures == 0 ? 0 : 1;
}
