/* ParameterServerStrategy from C: the Fashion-MNIST MLP trained asynchronously by worker processes
 * that pull weights from and push gradients to ps processes, coordinated by a chief. Start every task
 * of the cluster with its own TF_CONFIG (the same "cluster", its own "task"), e.g. on one machine:
 *
 *   C='"chief": ["localhost:2222"], "worker": ["localhost:2223", "localhost:2224"], "ps": ["localhost:2225"]'
 *   TF_CONFIG="{\"cluster\": {$C}, \"task\": {\"type\": \"ps\", \"index\": 0}}" ./parameter_server &
 *   TF_CONFIG="{\"cluster\": {$C}, \"task\": {\"type\": \"worker\", \"index\": 0}}" ./parameter_server &
 *   TF_CONFIG="{\"cluster\": {$C}, \"task\": {\"type\": \"worker\", \"index\": 1}}" ./parameter_server &
 *   TF_CONFIG="{\"cluster\": {$C}, \"task\": {\"type\": \"chief\", \"index\": 0}}" ./parameter_server
 *
 * Each worker step is one batch of the dataset (batch=N) on that worker. The chief prints each epoch's
 * figures (loss, samples trained, batches per worker, the largest step gap between workers) and the
 * test accuracy; with strategy=mirrored the same model trains in one process on replicas=N replicas
 * (the synchronous reference), with no TF_CONFIG.
 *
 *   parameter_server [key=value ...]: data=DIR epochs=N steps=N (per epoch; 0 = a whole pass)
 *     batch=N samples=N (of the training set) seed=N checkpoints=DIR (written each epoch by the chief,
 *     resumed from) weights=FILE (raw float32 weights, written by the chief at the end) timeout_ms=N
 *     verbose=N threads=N staleness=N optimizer=adam|sgd strategy=parameter_server|mirrored replicas=N
 * Exit: 0 done, 3 KX_E_COMM (a lost ps or chief), 1 another error.
 */
#include <kx/kx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                      \
  do {                                                                                                   \
    kx_status st_ = (call);                                                                              \
    if (st_ < 0) {                                                                                       \
      fprintf(stderr, "task error %s in %s: %s\n", kx_status_name(st_), #call, kx_last_error_message()); \
      exit(st_ == KX_E_COMM ? 3 : 1);                                                                    \
    }                                                                                                    \
  } while (0)

static const char* arg(int argc, char** argv, const char* key, const char* fallback) {
  const size_t n = strlen(key);
  int i;
  for (i = 1; i < argc; ++i)
    if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
  return fallback;
}

/* One line per epoch of the chief's history: its own figures and the strategy's. */
static void print_history(const kx_history* h, int workers) {
  int e, w;
  double v;
  for (e = 0; e < kx_history_epochs(h); ++e) {
    printf("epoch %d:", e + 1);
    if (kx_history_get(h, "loss", e, &v) == KX_OK) printf(" loss %.6f", v);
    if (kx_history_get(h, "ps_samples", e, &v) == KX_OK) printf(" samples %.0f", v);
    if (kx_history_get(h, "ps_max_step_gap", e, &v) == KX_OK) printf(" max_step_gap %.0f", v);
    if (workers > 0) printf(" steps_per_worker");
    for (w = 0; w < workers; ++w) {
      char name[64];
      snprintf(name, sizeof name, "ps_steps_worker_%d", w);
      if (kx_history_get(h, name, e, &v) == KX_OK) printf(" %.0f", v);
    }
    printf("\n");
  }
}

int main(int argc, char** argv) {
  const char* dir = arg(argc, argv, "data", "/usr/share/datasets/fashion-mnist");
  const int mirrored = strcmp(arg(argc, argv, "strategy", "parameter_server"), "mirrored") == 0;
  const long batch = atol(arg(argc, argv, "batch", "32"));
  const long samples = atol(arg(argc, argv, "samples", "60000"));
  const char* ckpt_dir = arg(argc, argv, "checkpoints", NULL);
  const char* weights_file = arg(argc, argv, "weights", NULL);
  const int timeout_ms = atoi(arg(argc, argv, "timeout_ms", "0"));
  const char* optimizer = arg(argc, argv, "optimizer", "adam");
  const int replicas = atoi(arg(argc, argv, "replicas", "1"));
  const char* cpus[16];
  char images[1024], labels[1024], ckpt_template[1100];
  kx_strategy* strategy = NULL;
  kx_dataset *all = NULL, *train = NULL, *test = NULL;
  kx_model* model = NULL;
  kx_callbacks* callbacks = NULL;
  kx_history* history = NULL;
  const int64_t input_shape[2] = {28, 28};
  kx_compile_options co;
  kx_fit_options fo;
  int i, rank, workers = 0;
  double v, loss = 0, accuracy = 0;

  if (replicas < 1 || replicas > 16) {
    fprintf(stderr, "replicas must be in [1, 16]\n");
    return 2;
  }
  for (i = 0; i < replicas; ++i) cpus[i] = "cpu";
  if (mirrored) {
    CHECK(kx_strategy_create_mirrored(cpus, (size_t)replicas, &strategy));
    rank = 0;
  } else {
    CHECK(kx_strategy_create_parameter_server(cpus, (size_t)replicas, &strategy));
    workers = kx_strategy_num_workers(strategy);
    rank = kx_strategy_worker_index(strategy);
    if (timeout_ms > 0) CHECK(kx_strategy_set_timeout(strategy, timeout_ms));
    CHECK(kx_strategy_set_staleness(strategy, atoi(arg(argc, argv, "staleness", "0"))));
  }
  CHECK(kx_strategy_set_num_threads(strategy, atoi(arg(argc, argv, "threads", "0"))));
  if (!mirrored && rank > workers) { /* a ps task */
    printf("ps %d: serving\n", rank - workers - 1);
    fflush(stdout);
    CHECK(kx_strategy_serve(strategy));
    printf("ps %d: training is over\n", rank - workers - 1);
    kx_strategy_destroy(strategy);
    return 0;
  }

  snprintf(images, sizeof images, "%s/train-images-idx3-ubyte.gz", dir);
  snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte.gz", dir);
  CHECK(kx_dataset_from_idx(images, labels, &all));
  CHECK(kx_dataset_take(all, samples, &train));
  CHECK(kx_dataset_shuffle(train, samples, 3));
  CHECK(kx_dataset_batch(train, batch, 0));

  CHECK(kx_model_create_sequential(strategy, input_shape, 2, &model));
  CHECK(kx_model_add_flatten(model));
  CHECK(kx_model_add_dense_flags(model, 256, KX_ACT_RELU, 0));
  CHECK(kx_model_add_dense_flags(model, 256, KX_ACT_RELU, 0));
  CHECK(kx_model_add_dense_flags(model, 10, KX_ACT_SOFTMAX, 0));
  kx_compile_options_init(&co, sizeof co);
  co.metrics = KX_METRIC_ACCURACY;
  co.seed = (uint64_t)atol(arg(argc, argv, "seed", "7"));
  if (strcmp(optimizer, "sgd") == 0) {
    co.optimizer = KX_OPTIMIZER_SGD;
    co.momentum = 0.9;
  } else if (strcmp(optimizer, "adam") != 0) {
    fprintf(stderr, "optimizer=%s: expected adam or sgd\n", optimizer);
    return 2;
  }
  CHECK(kx_model_compile(model, &co));

  CHECK(kx_callbacks_create(&callbacks));
  kx_fit_options_init(&fo, sizeof fo);
  fo.epochs = atoi(arg(argc, argv, "epochs", "1"));
  fo.steps_per_epoch = atol(arg(argc, argv, "steps", "0"));
  fo.verbose = atoi(arg(argc, argv, "verbose", "2")); /* the chief shows it */
  if (ckpt_dir) {
    snprintf(ckpt_template, sizeof ckpt_template, "%s/epoch-{epoch:02d}.kx", ckpt_dir);
    CHECK(kx_callbacks_add_model_checkpoint(callbacks, ckpt_template, 0, 0)); /* the chief writes */
    fo.resume_from = ckpt_dir;                                              /* the chief reads */
  }
  CHECK(kx_fit(model, train, &fo, callbacks, &history));
  if (rank > 0) {
    if (kx_history_get(history, "ps_steps", 0, &v) == KX_OK) printf("worker %d: %.0f steps\n", rank - 1, v);
  } else {
    print_history(history, workers);
    snprintf(images, sizeof images, "%s/t10k-images-idx3-ubyte.gz", dir);
    snprintf(labels, sizeof labels, "%s/t10k-labels-idx1-ubyte.gz", dir);
    CHECK(kx_dataset_from_idx(images, labels, &test));
    CHECK(kx_dataset_batch(test, 1000, 0));
    CHECK(kx_evaluate(model, test, &loss, &accuracy));
    printf("test loss %.6f accuracy %.6f\n", loss, accuracy);
  }
  if (weights_file && rank == 0) {
    const int64_t n = kx_model_num_params(model);
    float* w = malloc((size_t)n * sizeof *w);
    FILE* f = fopen(weights_file, "wb");
    if (!w || !f) return 1;
    CHECK(kx_model_get_weights(model, w, (size_t)n));
    if (fwrite(w, sizeof *w, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    free(w);
  }
  kx_dataset_destroy(test);
  kx_history_destroy(history);
  kx_callbacks_destroy(callbacks);
  kx_model_destroy(model);
  kx_dataset_destroy(train);
  kx_dataset_destroy(all);
  kx_strategy_destroy(strategy);
  return 0;
}
