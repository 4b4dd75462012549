/* MultiWorkerMirroredStrategy from C: the Fashion-MNIST MLP trained by several worker processes in
 * sync, each with its own CPU replicas. Start one process per worker, with mpirun or TF_CONFIG:
 *
 *   mpirun -np 2 -H hostA:1,hostB:1 ./multi_worker
 *   TF_CONFIG='{"cluster": {"worker": ["hostA:2222", "hostB:2222"]}, "task": {"type": "worker", "index": 0}}' ./multi_worker
 *   (and index 1 on hostB)
 *
 * The global batch is 32 per replica times every worker's replicas (Keras's idiom), split across all
 * of them; checkpoints (written by the chief) go to a directory every worker reads on restart.
 *
 *   multi_worker [key=value ...]: data=DIR epochs=N steps=N (per epoch; 0 = a whole pass)
 *     replicas=N (CPU replicas of this worker) batch=N (per replica) samples=N (of the training set)
 *     seed=N checkpoints=DIR (written each epoch, resumed from) weights=FILE (raw float32 weights,
 *     written by every worker at the end) timeout_ms=N verbose=N threads=N (of this worker; 0 = every core)
 *     cosine_decay=N (steps of Keras's CosineDecay, a callback the chief runs; 0 = none)
 *     optimizer=adam|sgd (Keras's defaults; sgd with momentum=0.9)
 */
#include <kx/kx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                        \
  do {                                                                                                     \
    kx_status st_ = (call);                                                                                \
    if (st_ < 0) {                                                                                         \
      fprintf(stderr, "worker error %s in %s: %s\n", kx_status_name(st_), #call, kx_last_error_message()); \
      exit(st_ == KX_E_COMM ? 3 : 1);                                                                      \
    }                                                                                                      \
  } while (0)

/* The value of key=... among the arguments, or fallback. */
static const char* arg(int argc, char** argv, const char* key, const char* fallback) {
  const size_t n = strlen(key);
  int i;
  for (i = 1; i < argc; ++i)
    if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
  return fallback;
}

int main(int argc, char** argv) {
  const char* dir = arg(argc, argv, "data", "/usr/share/datasets/fashion-mnist");
  const int epochs = atoi(arg(argc, argv, "epochs", "1"));
  const long steps = atol(arg(argc, argv, "steps", "0"));
  const int local = atoi(arg(argc, argv, "replicas", "1"));
  const long per_replica = atol(arg(argc, argv, "batch", "32"));
  const long samples = atol(arg(argc, argv, "samples", "60000"));
  const char* ckpt_dir = arg(argc, argv, "checkpoints", NULL);
  const char* weights_file = arg(argc, argv, "weights", NULL);
  const int timeout_ms = atoi(arg(argc, argv, "timeout_ms", "0"));
  const char* cpus[16];
  char images[1024], labels[1024], ckpt_template[1100];
  kx_strategy* strategy = NULL;
  kx_dataset *all = NULL, *train = NULL;
  kx_model* model = NULL;
  kx_callbacks* callbacks = NULL;
  kx_history* history = NULL;
  const int64_t input_shape[2] = {28, 28};
  kx_compile_options co;
  kx_fit_options fo;
  double loss = 0, accuracy = 0;
  float class_weight[16];
  size_t n_class_weight = 0;
  const char* class_weight_arg = arg(argc, argv, "class_weight", NULL); /* "2,0.5,1": Keras's class_weight */
  int i;

  if (local < 1 || local > 16) {
    fprintf(stderr, "replicas must be in [1, 16]\n");
    return 2;
  }
  for (i = 0; i < local; ++i) cpus[i] = "cpu";
  CHECK(kx_strategy_create_multi_worker(cpus, (size_t)local, &strategy));
  if (timeout_ms > 0) CHECK(kx_strategy_set_timeout(strategy, timeout_ms));
  CHECK(kx_strategy_set_num_threads(strategy, atoi(arg(argc, argv, "threads", "0"))));
  printf("worker %d of %d, %d replicas in sync\n", kx_strategy_worker_index(strategy),
         kx_strategy_num_workers(strategy), kx_strategy_num_replicas(strategy));

  /* Every worker opens the same data; each step, each replica takes its share of the global batch. */
  snprintf(images, sizeof images, "%s/train-images-idx3-ubyte.gz", dir);
  snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte.gz", dir);
  CHECK(kx_dataset_from_idx(images, labels, &all));
  CHECK(kx_dataset_take(all, samples, &train));
  CHECK(kx_dataset_shuffle(train, samples, 3));
  CHECK(kx_dataset_batch(train, per_replica * kx_strategy_num_replicas(strategy), 0));

  CHECK(kx_model_create_sequential(strategy, input_shape, 2, &model));
  CHECK(kx_model_add_flatten(model));
  CHECK(kx_model_add_dense_flags(model, 256, KX_ACT_RELU, 0));
  CHECK(kx_model_add_dense_flags(model, 256, KX_ACT_RELU, 0));
  CHECK(kx_model_add_dense_flags(model, 10, KX_ACT_SOFTMAX, 0));
  kx_compile_options_init(&co, sizeof co);
  co.metrics = KX_METRIC_ACCURACY;
  co.seed = (uint64_t)atol(arg(argc, argv, "seed", "7"));
  if (strcmp(arg(argc, argv, "optimizer", "adam"), "sgd") == 0) {
    co.optimizer = KX_OPTIMIZER_SGD;
    co.momentum = 0.9;
  } else if (strcmp(arg(argc, argv, "optimizer", "adam"), "adam") != 0) {
    fprintf(stderr, "optimizer=%s: expected adam or sgd\n", arg(argc, argv, "optimizer", "adam"));
    return 2;
  }
  CHECK(kx_model_compile(model, &co));

  CHECK(kx_callbacks_create(&callbacks));
  if (atol(arg(argc, argv, "cosine_decay", "0")) > 0)
    CHECK(kx_callbacks_add_cosine_decay(callbacks, atol(arg(argc, argv, "cosine_decay", "0")), 0.0));
  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = epochs;
  fo.steps_per_epoch = steps;
  fo.verbose = atoi(arg(argc, argv, "verbose", "2")); /* the chief shows it; the others are silent */
  for (; class_weight_arg && *class_weight_arg && n_class_weight < 16; ++n_class_weight) {
    char* end = NULL;
    class_weight[n_class_weight] = strtof(class_weight_arg, &end);
    class_weight_arg = *end == ',' ? end + 1 : end;
  }
  if (n_class_weight > 0) {
    fo.class_weight = class_weight;
    fo.n_class_weight = n_class_weight;
  }
  if (ckpt_dir) {
    snprintf(ckpt_template, sizeof ckpt_template, "%s/epoch-{epoch:02d}.kx", ckpt_dir);
    CHECK(kx_callbacks_add_model_checkpoint(callbacks, ckpt_template, 0, 0)); /* the chief writes */
    fo.resume_from = ckpt_dir;                                              /* every worker reads */
  }
  CHECK(kx_fit(model, train, &fo, callbacks, &history));
  if (kx_history_epochs(history) > 0) {
    CHECK(kx_history_get(history, "loss", kx_history_epochs(history) - 1, &loss));
    CHECK(kx_history_get(history, "accuracy", kx_history_epochs(history) - 1, &accuracy));
    printf("worker %d: last epoch loss %.9f accuracy %.9f\n", kx_strategy_worker_index(strategy), loss, accuracy);
  }

  if (weights_file) {
    const int64_t n = kx_model_num_params(model);
    float* w = malloc((size_t)n * sizeof *w);
    FILE* f = fopen(weights_file, "wb");
    if (!w || !f) return 1;
    CHECK(kx_model_get_weights(model, w, (size_t)n));
    if (fwrite(w, sizeof *w, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    free(w);
  }
  kx_history_destroy(history);
  kx_callbacks_destroy(callbacks);
  kx_model_destroy(model);
  kx_dataset_destroy(train);
  kx_dataset_destroy(all);
  kx_strategy_destroy(strategy);
  return 0;
}
