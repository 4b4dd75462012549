/* Fine-tunes MobileNetV2 on an image folder with kx's C ABI, as Keras's transfer-learning guide does:
 *
 *   base = MobileNetV2(input_shape=(96, 96, 3), include_top=False, pooling="avg")   (Keras's layers)
 *   base.load_weights(weights_file); base.trainable = False                 (when a file is given)
 *   Dropout 0.2, Dense <classes> softmax                                     (the new head)
 *   Adam 1e-3, sparse categorical cross-entropy, batch 16, the validation folder after each epoch
 *
 * then, with a weights file, a second phase that unfreezes the base (but its BatchNormalization
 * layers, as the guide keeps them in inference mode) and trains it with the head at a tenth
 * of the learning rate (a LearningRateScheduler: a compiled model keeps its optimizer), its epochs
 * numbered on from the first phase's. Each folder holds one subfolder per class of .jpg/.png files
 * (Keras's image_dataset_from_directory layout, the cats-vs-dogs layout; the same class folders in
 * both). The weights file is any file of Keras's MobileNetV2 weights kx_model_load_weights reads:
 * Keras Applications' mobilenet_v2_weights_..._96_no_top.h5, or a .weights.h5 / .keras of the user's
 * own Keras model. kx's image folders give pixels in [0, 1], where Keras's ImageNet weights saw
 * [-1, 1] (preprocess_input): the features still transfer, and phase two adapts the base to them.
 *
 *   mobilenet_finetune <train_folder> <validation_folder> [epochs] [weights_file|-] [checkpoint_dir]
 *                      (defaults: 3 epochs per phase, no weights, no checkpoints)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kx/kx.h"

enum { SIDE = 96 };

static int check(kx_status s, const char* what) {
  if (s == KX_OK) return 1;
  fprintf(stderr, "%s failed (status %d): %s\n", what, (int)s, kx_last_error_message());
  return 0;
}

/* MobileNetV2's BatchNormalization layers: bn_Conv1, block_<i>_expand_BN, ..., Conv_1_bn. */
static int is_batch_norm(const char* name) {
  const size_t n = strlen(name);
  return strncmp(name, "bn_", 3) == 0 || (n > 3 && (strcmp(name + n - 3, "_BN") == 0 || strcmp(name + n - 3, "_bn") == 0));
}

/* Freezes every layer of the base (all but the head's two), or unfreezes all but its
 * BatchNormalization layers: those stay frozen, normalising with their moving statistics, as Keras's
 * fine-tuning guide keeps them (base(x, training=False)) so that small batches do not undo them. */
static int set_base_trainable(kx_model* m, int64_t base_layers, int32_t trainable) {
  int64_t i;
  for (i = 0; i < base_layers; ++i) {
    char* name = NULL;
    int ok = check(kx_model_layer_name(m, i, &name), "kx_model_layer_name") &&
             check(kx_model_set_trainable(m, name, trainable && !is_batch_norm(name)), "kx_model_set_trainable");
    kx_free(name);
    if (!ok) return 0;
  }
  return 1;
}

static int train(kx_model* m, kx_dataset* data, kx_dataset* validation, int32_t first_epoch, int32_t epochs,
                 kx_callbacks* cb) {
  kx_fit_options fo;
  kx_fit_options_init(&fo, sizeof fo);
  fo.initial_epoch = first_epoch;
  fo.epochs = first_epoch + epochs;
  fo.validation = validation;
  fo.verbose = 2;
  return check(kx_fit(m, data, &fo, cb, NULL), "kx_fit");
}

/* Phase two's rate, from its first epoch on. */
static double tenth_of_the_rate(int32_t epoch, double lr, void* user_data) {
  (void)epoch;
  (void)lr;
  return *(const double*)user_data / 10;
}

static int compile(kx_model* m, double learning_rate) {
  kx_compile_options co;
  kx_compile_options_init(&co, sizeof co);
  co.optimizer = KX_OPTIMIZER_ADAM;
  co.learning_rate = learning_rate;
  co.loss = KX_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
  co.metrics = KX_METRIC_ACCURACY;
  return check(kx_model_compile(m, &co), "kx_model_compile");
}

int main(int argc, char** argv) {
  const char* folder = argc > 2 ? argv[1] : NULL;
  const char* validation_folder = argc > 2 ? argv[2] : NULL;
  const int32_t epochs = argc > 3 ? atoi(argv[3]) : 3;
  const char* weights = argc > 4 && strcmp(argv[4], "-") != 0 ? argv[4] : NULL;
  const char* checkpoints = argc > 5 ? argv[5] : NULL;
  kx_strategy* s = NULL;
  kx_model* m = NULL;
  kx_dataset *data = NULL, *validation = NULL;
  kx_callbacks* cb = NULL;
  int64_t classes = 0, base_layers = 0, loaded = 0;
  char head[160];
  double learning_rate = 1e-3;
  double loss = 0, accuracy = 0;
  int ok = 0;
  if (!folder || epochs < 1) {
    fprintf(stderr,
            "usage: mobilenet_finetune <train_folder> <validation_folder> [epochs >= 1] [weights_file|-] "
            "[checkpoint_dir]\n");
    return 2;
  }

  /* The best strategy this machine allows: every GPU kx finds, else the CPU. */
  if (!check(kx_strategy_create_default(&s), "kx_strategy_create_default")) goto done;
  if (!check(kx_dataset_from_image_directory(folder, SIDE, SIDE, 3, &data), "the training folder") ||
      !check(kx_dataset_from_image_directory(validation_folder, SIDE, SIDE, 3, &validation), "the validation folder") ||
      !check(kx_dataset_batch(validation, 16, 0), "batch"))
    goto done;
  classes = kx_dataset_num_classes(data);
  if (classes < 2 || kx_dataset_num_classes(validation) != classes) {
    fprintf(stderr, "need at least two class folders, the same in both folders: %lld in %s, %lld in %s\n",
            (long long)classes, folder, (long long)kx_dataset_num_classes(validation), validation_folder);
    goto done;
  }
  printf("%lld images of %lld classes\n", (long long)kx_dataset_num_samples(data), (long long)classes);
  if (!check(kx_dataset_shuffle(data, kx_dataset_num_samples(data), 7), "shuffle") ||
      !check(kx_dataset_batch(data, 16, 0), "batch") || !check(kx_dataset_prefetch(data, 2), "prefetch"))
    goto done;

  if (!check(kx_model_create_application(s, "MobileNetV2",
                                         "{\"input_shape\": [96, 96, 3], \"include_top\": false, \"pooling\": \"avg\"}",
                                         &m),
             "MobileNetV2"))
    goto done;
  base_layers = kx_model_num_layers(m);
  snprintf(head, sizeof head,
           "{\"class_name\": \"Dense\", \"config\": {\"name\": \"classes\", \"units\": %lld, \"activation\": \"softmax\"}}",
           (long long)classes);
  if (!check(kx_model_add_layer(m, "{\"class_name\": \"Dropout\", \"config\": {\"rate\": 0.2}}", NULL, 0, NULL),
             "Dropout") ||
      !check(kx_model_add_layer(m, head, NULL, 0, NULL), "Dense"))
    goto done;
  if (!compile(m, learning_rate)) goto done;
  if (weights) {
    /* The head is new: its weights are not in the file and keep their initial values. */
    if (!check(kx_model_load_weights(m, weights, KX_LOAD_WEIGHTS_SKIP_MISMATCH, &loaded, NULL), "load_weights"))
      goto done;
    printf("loaded %lld weight tensors from %s\n", (long long)loaded, weights);
    if (!set_base_trainable(m, base_layers, 0)) goto done;
  }
  printf("MobileNetV2 + head: %lld parameters, %lld trainable\n", (long long)kx_model_num_params(m),
         (long long)kx_model_num_trainable_params(m));

  if (!check(kx_callbacks_create(&cb), "kx_callbacks_create")) goto done;
  if (checkpoints) {
    char path[4096];
    snprintf(path, sizeof path, "%s/mobilenet-{epoch:02d}.kx", checkpoints);
    if (!check(kx_callbacks_add_model_checkpoint(cb, path, 0, 2), "checkpoints")) goto done;
  }
  if (!train(m, data, validation, 0, epochs, cb)) goto done;
  if (weights) {
    /* Phase two: the whole network, gently (Keras's guide recompiles with a smaller rate). */
    if (!set_base_trainable(m, base_layers, 1) ||
        !check(kx_callbacks_add_learning_rate_scheduler(cb, tenth_of_the_rate, &learning_rate), "scheduler"))
      goto done;
    printf("fine-tuning %lld parameters\n", (long long)kx_model_num_trainable_params(m));
    if (!train(m, data, validation, epochs, epochs, cb)) goto done;
  }
  if (!check(kx_evaluate(m, validation, &loss, &accuracy), "kx_evaluate")) goto done;
  printf("validation loss: %.4f\nvalidation accuracy: %.4f\n", loss, accuracy);
  ok = 1;

done:
  kx_callbacks_destroy(cb);
  kx_model_destroy(m);
  kx_dataset_destroy(data);
  kx_dataset_destroy(validation);
  kx_strategy_destroy(s);
  return ok ? 0 : 1;
}
