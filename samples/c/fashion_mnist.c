/* Fashion-MNIST with kx from C: MLP 784-256-256-10, Adam 1e-3, global batch 32, 2 epochs, validation
 * on the last 10,000 training images, a checkpoint after every epoch, then test accuracy. Every GPU
 * trains when there are GPUs, else two CPU replicas. Run it again and it resumes from its newest
 * checkpoint (Keras's "make or restore"): killed part-way, it continues; finished, it only evaluates.
 *
 *   fashion_mnist [data_dir] [epochs] [checkpoint_dir]
 *   (defaults: /usr/share/datasets/fashion-mnist, 2, fashion-mnist-checkpoints)
 */
#include <kx/kx.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                           \
  do {                                                                                        \
    kx_status st_ = (call);                                                                   \
    if (st_ < 0) {                                                                            \
      fprintf(stderr, "error %d in %s: %s\n", (int)st_, #call, kx_last_error_message());      \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

static void data_path(char* buf, size_t len, const char* dir, const char* file) {
  snprintf(buf, len, "%s/%s", dir, file);
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const int epochs = argc > 2 ? atoi(argv[2]) : 2;
  const char* ckpt_dir = argc > 3 ? argv[3] : "fashion-mnist-checkpoints";
  char images[1024], labels[1024], ckpt_template[1024];
  kx_callbacks* callbacks = NULL;
  kx_strategy* strategy = NULL;
  kx_dataset *all = NULL, *train = NULL, *val = NULL, *test = NULL;
  kx_model* model = NULL;
  kx_history* history = NULL;
  const int64_t input_shape[2] = {28, 28};
  kx_compile_options co;
  kx_fit_options fo;
  double test_loss = 0, test_accuracy = 0;

  printf("kx %s\n", kx_version_string());
  /* Every GPU when there are GPUs, else two CPU replicas sharing the cores. */
  if (kx_device_count(KX_DEVICE_CUDA) > 0) {
    CHECK(kx_strategy_create_mirrored(NULL, 0, &strategy));
  } else {
    const char* cpus[2] = {"cpu", "cpu"};
    CHECK(kx_strategy_create_mirrored(cpus, 2, &strategy));
  }

  data_path(images, sizeof images, dir, "train-images-idx3-ubyte.gz");
  data_path(labels, sizeof labels, dir, "train-labels-idx1-ubyte.gz");
  CHECK(kx_dataset_from_idx(images, labels, &all));
  CHECK(kx_dataset_take(all, 50000, &train));
  CHECK(kx_dataset_skip(all, 50000, &val));
  CHECK(kx_dataset_shuffle(train, 50000, 42));
  CHECK(kx_dataset_batch(train, 32, 0));
  CHECK(kx_dataset_batch(val, 256, 0));
  data_path(images, sizeof images, dir, "t10k-images-idx3-ubyte.gz");
  data_path(labels, sizeof labels, dir, "t10k-labels-idx1-ubyte.gz");
  CHECK(kx_dataset_from_idx(images, labels, &test));
  CHECK(kx_dataset_batch(test, 256, 0));

  CHECK(kx_model_create_sequential(strategy, input_shape, 2, &model));
  CHECK(kx_model_add_flatten(model));
  CHECK(kx_model_add_dense_flags(model, 256, KX_ACT_RELU, 0));
  CHECK(kx_model_add_dense_flags(model, 256, KX_ACT_RELU, 0));
  CHECK(kx_model_add_dense_flags(model, 10, KX_ACT_SOFTMAX, 0));

  kx_compile_options_init(&co, sizeof co);
  co.optimizer = KX_OPTIMIZER_ADAM;
  co.learning_rate = 1e-3;
  co.loss = KX_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
  co.metrics = KX_METRIC_ACCURACY;
  CHECK(kx_model_compile(model, &co));
  printf("model: %lld parameters, %d replica(s)\n", (long long)kx_model_num_params(model),
         kx_strategy_num_replicas(strategy));

  snprintf(ckpt_template, sizeof ckpt_template, "%s/epoch-{epoch:02d}.kx", ckpt_dir);
  CHECK(kx_callbacks_create(&callbacks));
  CHECK(kx_callbacks_add_model_checkpoint(callbacks, ckpt_template, 0, 2)); /* every epoch, keep 2 */
  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = epochs;
  fo.validation = val;
  fo.verbose = 1;
  fo.resume_from = ckpt_dir;
  CHECK(kx_fit(model, train, &fo, callbacks, &history));

  CHECK(kx_evaluate(model, test, &test_loss, &test_accuracy));
  printf("test loss: %.4f\ntest accuracy: %.4f\n", test_loss, test_accuracy);

  kx_history_destroy(history);
  kx_callbacks_destroy(callbacks);
  kx_model_destroy(model);
  kx_dataset_destroy(test);
  kx_dataset_destroy(val);
  kx_dataset_destroy(train);
  kx_dataset_destroy(all);
  kx_strategy_destroy(strategy);
  return 0;
}
