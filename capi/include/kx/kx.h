/*
 * kx.h — the stable C ABI of kx, a training SDK for deep-learning models.
 *
 * Conventions that hold for every function below:
 *
 *  Errors    Every fallible function returns kx_status: KX_OK (0) on success, KX_STOPPED (1) when a
 *            user callback asked kx_fit to stop, a negative KX_E_* code on failure. After a failure,
 *            kx_last_error_message() returns a one-line description for the calling thread.
 *            Out-parameters are left untouched when a function fails. No exception, abort() or
 *            assert ever escapes the library, whatever the input.
 *  Ownership Objects made by kx_*_create / kx_*_from_* / kx_*_load belong to the caller and are
 *            released with the matching kx_*_destroy, which accepts NULL. Strings that kx allocates
 *            for the caller are released with kx_free. Functions that take a handle only borrow it
 *            for the duration of the call, unless said otherwise.
 *  Threading A handle may be used by one thread at a time. Different handles may be used on
 *            different threads at the same time. kx_last_error_message is per thread.
 *  Options   Option structs start with struct_size and are initialised with kx_X_options_init(&o,
 *            sizeof o). A zero field means "the default" (given per field); where zero is also a
 *            value a user may mean (Adam's beta1 ...), the struct's zero_is_value bits say so.
 *  Numerics  Training follows Keras 3 (3.x): the same formulas, defaults and float32 rounding of
 *            optimizer constants (Adam's rate and 1 - beta computed as Keras 3 computes them).
 *  Strings   UTF-8, NUL-terminated.
 *  Callbacks A callback kx_fit calls runs on the thread that called kx_fit, between steps. On the
 *            model being fit it may call kx_evaluate, kx_predict, kx_model_get_weights and the other
 *            reading calls, and kx_model_save: they see the state after the step, and the fit goes on
 *            exactly as without them. kx_evaluate and kx_predict there are KX_E_MISUSE under a
 *            multi-worker or parameter-server strategy (only the chief runs callbacks). Calls that
 *            train or rebuild that model (kx_fit, kx_model_train_on_batch / test_on_batch,
 *            kx_model_compile, kx_model_add_*) are KX_E_MISUSE there. Other models and handles may be
 *            used freely. kx's own threads (the replicas' workers, the parameter-server and
 *            multi-worker service threads) never call user code.
 *  Growth    The ABI only grows within a major version: functions, enum values and struct members
 *            are added, never changed or removed. A function likely to grow takes an options struct
 *            (struct_size first) from its first version; one that must change otherwise gets a
 *            successor with a suffix saying what it adds (_flags, _options), and the older is marked
 *            KX_DEPRECATED with the name to use instead, but kept. A new layer needs no new function:
 *            kx_model_add_layer takes every layer kx has by its Keras config.
 *  Checking  Every kx_status function is KX_MUST_CHECK: ignoring its result is a compiler warning.
 */
#ifndef KX_KX_H
#define KX_KX_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(KX_BUILDING_LIBRARY)
#    define KX_API __declspec(dllexport)
#  else
#    define KX_API __declspec(dllimport)
#  endif
#else
#  define KX_API __attribute__((visibility("default")))
#endif

/* KX_MUST_CHECK: ignoring a kx_status is a compiler warning (GCC, Clang). KX_DEPRECATED: a function
 * kept for old callers, with what to call instead; define KX_ALLOW_DEPRECATED before including kx.h to
 * call such functions without the warning. Neither changes the ABI. */
#if defined(__GNUC__) || defined(__clang__)
#  define KX_MUST_CHECK __attribute__((warn_unused_result))
#  if defined(KX_ALLOW_DEPRECATED)
#    define KX_DEPRECATED(instead)
#  else
#    define KX_DEPRECATED(instead) __attribute__((deprecated("use " instead)))
#  endif
#else
#  define KX_MUST_CHECK
#  define KX_DEPRECATED(instead)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Status codes and library information                                                           */
/* ---------------------------------------------------------------------------------------------- */

/* The version of this header. A program can compare it with kx_version_number() of the library it
 * loaded: the same MAJOR keeps every function and struct of this header working. */
#define KX_VERSION_MAJOR 0
#define KX_VERSION_MINOR 1
#define KX_VERSION_PATCH 0
#define KX_VERSION_NUMBER (KX_VERSION_MAJOR * 10000 + KX_VERSION_MINOR * 100 + KX_VERSION_PATCH)

typedef int32_t kx_status;

#define KX_OK 0
#define KX_STOPPED 1                 /* a callback returned non-zero and kx_fit stopped early */
#define KX_E_INVALID_ARGUMENT (-1)   /* NULL pointer, bad size, bad shape, unknown name ...  */
#define KX_E_MISUSE (-2)             /* call out of order: fit before compile, add after compile */
#define KX_E_OUT_OF_MEMORY (-3)
#define KX_E_DEVICE (-4)             /* a device is missing or failed */
#define KX_E_IO (-5)                 /* a file could not be opened, read or written */
#define KX_E_CORRUPT (-6)            /* a file is malformed, truncated or fails its checksum */
#define KX_E_UNSUPPORTED (-7)        /* valid request that this build of kx cannot do (yet) */
#define KX_E_DIVERGED (-8)           /* training produced NaN or infinity */
#define KX_E_COMM (-9)               /* a collective with another replica or worker failed */
#define KX_E_INTERNAL (-100)         /* a bug in kx: please report it with the message */

/* The name of a status code as written in this header ("KX_OK", "KX_E_CORRUPT" ...), for logs and
 * bindings; "KX_UNKNOWN_STATUS" for a value this library does not define. Static storage, never NULL,
 * never freed. Thread-safe; sets no error. */
KX_API const char* kx_status_name(kx_status st);

/* The message of the last failed kx call on this thread ("" if none). The pointer stays valid until
 * the next kx call on this thread. Never NULL. */
KX_API const char* kx_last_error_message(void);

/* MAJOR*10000 + MINOR*100 + PATCH of the library that is loaded (may differ from KX_VERSION_*). */
KX_API uint32_t kx_version_number(void);
/* "MAJOR.MINOR.PATCH"; static storage, never freed. */
KX_API const char* kx_version_string(void);

/* Frees a string or buffer that kx allocated for the caller (e.g. kx_model_to_json). NULL is fine. */
KX_API void kx_free(void* p);

/* ---------------------------------------------------------------------------------------------- */
/* Devices                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

typedef enum kx_device_kind { KX_DEVICE_CPU = 0, KX_DEVICE_CUDA = 1 } kx_device_kind;

/* Number of devices of a kind: 1 for the CPU, 0 for CUDA when no GPU, driver or CUDA module is
 * present. Returns -1 (and sets the error message) for an unknown kind. */
KX_API int32_t kx_device_count(kx_device_kind kind);

/* Writes the device's name ("cpu", "cuda:0" ...) into buf, NUL-terminated. Errors:
 * KX_E_INVALID_ARGUMENT for a bad kind, index out of range, NULL buf or a buf_len too small. */
KX_API KX_MUST_CHECK kx_status kx_device_name(kx_device_kind kind, int32_t index, char* buf, size_t buf_len);

/* What kx found for a kind of device, as text for people (one fact per line): for CUDA, where the
 * CUDA backend module was loaded from and each GPU (name, memory, compute capability), or why there
 * is none (module not installed, no driver, no GPU). *out_text is allocated; free it with kx_free.
 * Errors: KX_E_INVALID_ARGUMENT for a bad kind or NULL out_text. */
KX_API KX_MUST_CHECK kx_status kx_device_status(kx_device_kind kind, char** out_text);

/* ---------------------------------------------------------------------------------------------- */
/* Strategies: which devices train and how replicas stay in sync                                  */
/* ---------------------------------------------------------------------------------------------- */

typedef struct kx_strategy kx_strategy;

/* The first GPU if there is one, else the CPU. */
KX_API KX_MUST_CHECK kx_status kx_strategy_create_default(kx_strategy** out);

/* Synchronous replicas on the named devices ("cpu", "cuda:0", ...; a name may repeat to make several
 * logical replicas on one device, as TensorFlow's logical devices do: {"cpu", "cpu"} is two CPU
 * replicas). devices == NULL and n_devices == 0 means every GPU, or one CPU replica when there is
 * none. The devices array is copied. Every step splits the global batch as evenly as possible between
 * the replicas, sums their gradients in replica order (a run is bitwise repeatable) and applies the
 * same update on each, so N replicas train like one device on the same global batch. CPU replicas
 * share the strategy's threads (kx_strategy_set_num_threads) between them.
 * Replicas that share one device sum in process; replicas each on a GPU of its own sum through NCCL,
 * whose libnccl.so.2 is opened when such a model is compiled (kx_model_compile is KX_E_UNSUPPORTED
 * without it). A model on both kinds at once ({"cuda:0", "cuda:0", "cuda:1"}) is KX_E_UNSUPPORTED.
 * Errors: KX_E_INVALID_ARGUMENT for an unknown name, a NULL entry or CPU and GPU replicas mixed,
 * KX_E_DEVICE for a device that is not present. */
KX_API KX_MUST_CHECK kx_status kx_strategy_create_mirrored(const char* const* devices, size_t n_devices,
                                             kx_strategy** out);

/* Number of replicas that train in sync (TensorFlow's num_replicas_in_sync: every worker's with a
 * multi-worker strategy); -1 for NULL. */
KX_API int32_t kx_strategy_num_replicas(const kx_strategy* s);

/* CPU threads used by the kernels of models created from s afterwards: 0 = every core (the
 * default). Independent of OMP_NUM_THREADS. Errors: NULL s, negative n. */
KX_API KX_MUST_CHECK kx_status kx_strategy_set_num_threads(kx_strategy* s, int32_t n);

/* TF32 tensor cores for float32 matrix products on GPUs that have them (Ampere and later), for models
 * created from s afterwards. On by default, as in TensorFlow: about 10 bits of mantissa in the
 * products, sums in float32. kx_strategy_set_tf32(s, 0) gives full float32 products. No effect on
 * the CPU. Errors: NULL s. */
KX_API KX_MUST_CHECK kx_status kx_strategy_set_tf32(kx_strategy* s, int32_t enabled);

/* Whether each training step is recorded once and replayed as a CUDA graph. AUTO (the default):
 * where the devices and the collective can. OFF: every step runs directly (to compare figures).
 * EMULATE: devices that record nothing themselves (the CPU) are wrapped in a recorder that replays
 * with graph semantics, which is how the tests check the recorded path without a GPU.
 * The environment variable KX_STEP_GRAPHS=0|emulate overrides this setting, for debugging.
 * Applies to models created from s afterwards. Errors: NULL s, an unknown mode. */
typedef enum kx_step_graphs {
  KX_STEP_GRAPHS_AUTO = 0,
  KX_STEP_GRAPHS_OFF = 1,
  KX_STEP_GRAPHS_EMULATE = 2
} kx_step_graphs;
KX_API KX_MUST_CHECK kx_status kx_strategy_set_step_graphs(kx_strategy* s, kx_step_graphs mode);

/* How a dataset reaches a GPU. AUTO (the default): copied whole into device memory when it fits,
 * else streamed batch by batch through page-locked buffers beside the compute. ALWAYS: streamed even
 * when it would fit (to test that path; the CPU runs the same code path). KX_DATA_STREAMING=always
 * overrides this setting. Applies to models created from s afterwards. Errors: NULL s, an unknown mode. */
typedef enum kx_data_streaming { KX_DATA_STREAMING_AUTO = 0, KX_DATA_STREAMING_ALWAYS = 1 } kx_data_streaming;
KX_API KX_MUST_CHECK kx_status kx_strategy_set_data_streaming(kx_strategy* s, kx_data_streaming mode);

/* cuDNN for convolutions on GPUs where libcudnn.so.9 is installed (on by default); 0: im2col and
 * cuBLASLt GEMMs instead. KX_CUDNN=0 overrides it. No effect on the CPU. Applies to models created from
 * s afterwards. Errors: NULL s. */
KX_API KX_MUST_CHECK kx_status kx_strategy_set_cudnn(kx_strategy* s, int32_t enabled);

/* MultiWorkerMirroredStrategy: synchronous training across processes (and hosts). Every worker process
 * calls it with its own replica devices (as kx_strategy_create_mirrored; every worker must have the
 * same number). The cluster comes from the launcher: mpirun's environment (Open MPI), else TF_CONFIG
 * ({"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": i}}; worker 0, or a
 * "chief" task, is the chief). Returns once every worker has joined. Each step splits the global batch
 * across every replica of every worker and sums the gradients locally, then across workers, in a
 * fixed order, so N workers train like one device on the same global batch. The chief alone shows the
 * progress bar and runs callbacks (its checkpoints are everyone's weights); history, evaluate and
 * validation are computed over every worker's samples. Collective calls: every worker makes the same
 * kx_model_compile, kx_fit, kx_evaluate and kx_model_train_on_batch / test_on_batch calls, with the
 * same data, in the same order (kx_predict is each worker's own). The models of one multi-worker
 * strategy share its connection to the other workers: use them from one thread at a time, and call
 * kx_strategy_set_timeout while none of them trains. A worker that dies, hangs or stops
 * makes every collective fail with KX_E_COMM on the survivors within the timeout
 * (kx_strategy_set_timeout).
 * Errors: KX_E_INVALID_ARGUMENT when neither mpirun nor TF_CONFIG describes a cluster (or it is
 * malformed, or this task is no worker); KX_E_UNSUPPORTED when libkx_workers.so (the Gloo engine
 * module) is missing; KX_E_COMM when the workers do not all join within 60 s. */
KX_API KX_MUST_CHECK kx_status kx_strategy_create_multi_worker(const char* const* local_devices, size_t n_local, kx_strategy** out);
/* Worker processes training in sync (1 for single-process strategies), and this one's index (0: the
 * chief); -1 for NULL. */
KX_API int32_t kx_strategy_num_workers(const kx_strategy* s);
KX_API int32_t kx_strategy_worker_index(const kx_strategy* s);
/* How long a collective with other workers may wait (default 60000 ms) before it fails with KX_E_COMM
 * naming the worker that did not answer; applies to every model of s, at once. Errors: NULL s,
 * milliseconds <= 0. */
KX_API KX_MUST_CHECK kx_status kx_strategy_set_timeout(kx_strategy* s, int32_t milliseconds);

/* ParameterServerStrategy: asynchronous training by the "worker" tasks of a TF_CONFIG cluster with a
 * "chief", "worker" and "ps" jobs ({"cluster": {"chief": ["h:2222"], "worker": ["h:2223", "h:2224"],
 * "ps": ["h:2225"]}, "task": {"type": "worker", "index": 0}}). Every task calls it with its own
 * replica devices; it returns once every task has joined (KX_E_COMM when they do not within 60 s).
 * Then a ps task calls kx_strategy_serve, and the chief and the workers call kx_fit on the same model
 * with the same data: each worker takes batches from the chief as it is ready for them (a whole batch
 * of the dataset per step, split between its own replicas), pulls the current weights from the ps
 * tasks, and pushes its gradient, which the ps tasks apply at once (Adam or SGD, on their contiguous
 * shard of the weights and optimizer slots). No worker waits for another, unless
 * kx_strategy_set_staleness bounds how far ahead one may run. The chief trains nothing: it hands out
 * the batches of each epoch (every batch once; a lost worker's unfinished batches go to the others),
 * shows the progress bar, runs the callbacks and validation, and writes the checkpoints (the state of
 * the ps tasks: weights, slots, step count); resume_from on the chief restores the ps tasks. A
 * checkpoint written within an epoch resumes at the start of that epoch. The chief's history also
 * records, per epoch, "ps_samples" (samples trained), "ps_steps_worker_<i>" (batches worker i did) and
 * "ps_max_step_gap" (the most batches one live worker was handed ahead of another so far); a worker's
 * kx_fit returns a history with "ps_steps" (its batches in all). After kx_fit every task's model holds
 * the final weights. A lost worker is dropped (the chief's progress bar says so); a lost ps or chief
 * ends kx_fit / kx_strategy_serve with KX_E_COMM on every task within about the timeout
 * (kx_strategy_set_timeout), after which a restart of the whole job with resume_from goes on from the
 * last checkpoint. kx_strategy_num_workers gives the number of "worker" tasks, kx_strategy_worker_index
 * this task's rank (the chief 0, worker i 1 + i, ps j 1 + workers + j). Not supported: use_ema.
 * Errors: KX_E_INVALID_ARGUMENT when TF_CONFIG is missing or has no chief, worker or ps task;
 * KX_E_UNSUPPORTED without the engine module libkx_workers.so. */
KX_API KX_MUST_CHECK kx_status kx_strategy_create_parameter_server(const char* const* local_devices, size_t n_local, kx_strategy** out);
/* A ps task: serves its shard until the chief's kx_fit ends and every worker is done (KX_OK), or the
 * chief is lost (KX_E_COMM). One kx_fit of the chief per call. Errors: KX_E_INVALID_ARGUMENT on a task
 * that is no ps. */
KX_API KX_MUST_CHECK kx_status kx_strategy_serve(kx_strategy* s);
/* A worker may run at most max_steps_ahead batches ahead of the slowest live worker (0: unbounded, the
 * default, as TensorFlow). Set it on the chief, before kx_fit. Errors: NULL s, a negative value, a
 * strategy that is not a parameter-server one. */
KX_API KX_MUST_CHECK kx_status kx_strategy_set_staleness(kx_strategy* s, int32_t max_steps_ahead);

/* A model keeps its own reference to the strategy's devices: s may be destroyed before the models
 * made from it. */
KX_API void kx_strategy_destroy(kx_strategy* s);

/* ---------------------------------------------------------------------------------------------- */
/* Models: building, layers, compile, weights, files                                              */
/* ---------------------------------------------------------------------------------------------- */

typedef struct kx_model kx_model;

typedef enum kx_activation {
  KX_ACT_NONE = 0,
  KX_ACT_RELU = 1,
  KX_ACT_SIGMOID = 2,
  KX_ACT_TANH = 3,
  KX_ACT_SOFTMAX = 4
} kx_activation;

typedef enum kx_padding { KX_PADDING_VALID = 0, KX_PADDING_SAME = 1 } kx_padding;

/* A Sequential model on strategy s whose samples have the shape input_shape[0..rank) (no batch
 * dimension; e.g. {784} or {28, 28}). */
KX_API KX_MUST_CHECK kx_status kx_model_create_sequential(kx_strategy* s, const int64_t* input_shape, size_t rank,
                                            kx_model** out);

/* A Functional model on strategy s: its input has the shape input_shape[0..rank) (no batch
 * dimension) and the name input_name (Keras's Input(name=...); NULL: "input_layer"). Layers are added
 * with kx_model_add_layer, each reading the input or layers added before it by name; the last layer
 * added is the output. Errors: KX_E_INVALID_ARGUMENT (NULL s or out, rank not 1..8, a dimension < 1,
 * an empty input_name). */
KX_API KX_MUST_CHECK kx_status kx_model_create_functional(kx_strategy* s, const int64_t* input_shape, size_t rank,
                                            const char* input_name, kx_model** out);

/* Adds any layer kx has, from its Keras config as JSON: {"class_name": "Dense", "config": {"units":
 * 10, "activation": "relu"}}, as keras.layers.serialize() and model.to_json() write a layer (extra keys
 * such as "module" are ignored; settings left out take Keras's defaults; "name" in the config names the
 * layer, else it is named as Keras names it: "dense", "dense_1" ...; "kwargs" holds the call's keyword
 * arguments, as a functional config's inbound node does: {"use_causal_mask": true} for
 * MultiHeadAttention). The layer reads inputs[0..
 * num_inputs): the names of layers added before it or the model's input (a functional call
 * layer(inputs)); with num_inputs 0 (inputs may then be NULL) it reads the last layer added, or the
 * input (a Sequential model's add). When name is not NULL, *name receives the layer's name (free it
 * with kx_free). New layers come to kx through this function alone: kx_layer_class_name lists them.
 * Errors: KX_E_INVALID_ARGUMENT (NULL m or layer_json, bad JSON, an unknown class, a setting of the
 * wrong type or value, an unknown or later input name, a duplicate layer name, input shapes the layer
 * does not take), KX_E_UNSUPPORTED (a setting kx lacks), KX_E_MISUSE (the model is compiled). On error
 * the model is unchanged. */
KX_API KX_MUST_CHECK kx_status kx_model_add_layer(kx_model* m, const char* layer_json, const char* const* inputs, size_t num_inputs,
                                    char** name);
/* The Keras class name of kx's layer number index (0, 1, ... in a fixed order), or NULL past the last:
 * the classes kx_model_add_layer and kx_model_from_json know. The string is static. Never fails. */
KX_API const char* kx_layer_class_name(size_t index);

/* Layers are appended in order; each returns KX_E_MISUSE once the model is compiled. */
/* Dense: y = act(x W + b) over the last axis of x (each step of a sequence alike). Glorot-uniform W,
 * zero b, as Keras. */
KX_API KX_MUST_CHECK KX_DEPRECATED("kx_model_add_dense_flags (or kx_model_add_layer)") kx_status kx_model_add_dense(kx_model* m, int64_t units, kx_activation act);
KX_API KX_MUST_CHECK KX_DEPRECATED("kx_model_add_conv2d_flags (or kx_model_add_layer)") kx_status kx_model_add_conv2d(kx_model* m, int64_t filters, int32_t kernel_h, int32_t kernel_w,
                                     int32_t stride, kx_padding padding, kx_activation act);
KX_API KX_MUST_CHECK kx_status kx_model_add_max_pool2d(kx_model* m, int32_t pool_h, int32_t pool_w);
/* Flatten: reshapes each sample to rank 1 (no copy). */
KX_API KX_MUST_CHECK kx_status kx_model_add_flatten(kx_model* m);
/* Dropout: during training zeroes each value with probability rate (0 <= rate < 1) and scales the
 * rest by 1/(1-rate); the identity in evaluate and predict. */
KX_API KX_MUST_CHECK kx_status kx_model_add_dropout(kx_model* m, float rate);
/* Flags of kx_model_add_dense_flags and kx_model_add_conv2d_flags, or-ed together (0: the layer as
 * kx_model_add_dense and kx_model_add_conv2d make it). */
#define KX_LAYER_NO_BIAS 1u /* no bias (Keras's use_bias=False): y = act(x W); e.g. before a batch norm */
/* Dense and Conv2D with flags (KX_LAYER_*). Errors: those of kx_model_add_dense and
 * kx_model_add_conv2d, and KX_E_INVALID_ARGUMENT for a flag bit kx does not know. */
KX_API KX_MUST_CHECK kx_status kx_model_add_dense_flags(kx_model* m, int64_t units, kx_activation act, uint32_t flags);
KX_API KX_MUST_CHECK kx_status kx_model_add_conv2d_flags(kx_model* m, int64_t filters, int32_t kernel_h, int32_t kernel_w,
                                           int32_t stride, kx_padding padding, kx_activation act, uint32_t flags);

/* A model from a JSON config: a "Sequential" one, or a "Functional" graph as Keras's model.to_json()
 * writes it (layers with their inbound layers, Keras 2 or Keras 3 notation; one input, one output,
 * each layer called once). Layers: every class kx_layer_class_name lists; "trainable": false in a layer's config freezes it. Errors: KX_E_INVALID_ARGUMENT (bad JSON,
 * unknown layer or inbound name, a cycle, a layer that does not lead to the output, shapes that do
 * not fit), KX_E_UNSUPPORTED (several inputs or outputs, shared layers, settings kx lacks). */
KX_API KX_MUST_CHECK kx_status kx_model_from_json(kx_strategy* s, const char* json, kx_model** out);
/* The model's architecture as JSON: "Sequential" when each layer reads the one before, else
 * "Functional"; free *out_json with kx_free. */
KX_API KX_MUST_CHECK kx_status kx_model_to_json(const kx_model* m, char** out_json);

/* KX_OPTIMIZER_ADAMW: Keras's AdamW (weight_decay: kx_compile_options.weight_decay, default 0.004);
 * KX_OPTIMIZER_RMSPROP: Keras's RMSprop (rho, centered and momentum: the fields of those names; default
 * rho 0.9, not centered, no momentum). */
typedef enum kx_optimizer {
  KX_OPTIMIZER_ADAM = 0,
  KX_OPTIMIZER_SGD = 1,
  KX_OPTIMIZER_ADAMW = 2,
  KX_OPTIMIZER_RMSPROP = 3
} kx_optimizer;

/* As Keras, softmax and the categorical losses and accuracies work along the output's last axis: an
 * output of shape [H, W, C] per sample is H * W positions of C classes each, and a sample's loss and
 * accuracy are the means over its positions (sparse labels: one class index per position, labels of
 * shape [H, W] or [H, W, 1]). */
typedef enum kx_loss {
  KX_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY = 0, /* y: one integer class index per sample (per position) */
  KX_LOSS_CATEGORICAL_CROSSENTROPY = 1,        /* y: one-hot (or probabilities) per sample (per position) */
  KX_LOSS_BINARY_CROSSENTROPY = 2,             /* y: 0/1 (or probabilities) per output */
  KX_LOSS_MEAN_SQUARED_ERROR = 3,
  KX_LOSS_MEAN_ABSOLUTE_ERROR = 4,             /* Keras's "mae" */
  KX_LOSS_HUBER = 5                            /* Keras's Huber with delta 1 (another delta: a Keras file's
                                                  compile config) */
} kx_loss;

#define KX_METRIC_ACCURACY 1u /* chosen as Keras chooses "accuracy" for the loss and output */

typedef struct kx_compile_options {
  uint32_t struct_size;   /* sizeof(kx_compile_options), set by kx_compile_options_init */
  kx_optimizer optimizer; /* default Adam */
  double learning_rate;   /* default 1e-3 (Adam), 1e-2 (SGD), as Keras */
  double beta1;           /* Adam; default 0.9 */
  double beta2;           /* Adam; default 0.999 */
  double epsilon;         /* Adam; default 1e-7 */
  double momentum;        /* SGD; default 0 (plain SGD) */
  kx_loss loss;           /* default sparse categorical cross-entropy */
  int32_t from_logits;    /* non-zero: the model's output is logits, not probabilities */
  uint32_t metrics;       /* bit set of KX_METRIC_*; default none (loss only) */
  uint64_t seed;          /* weight init and dropout; 0 = a fixed default, so runs repeat */
  /* Keras's use_ema: non-zero keeps a moving average of the trained weights, ema = ema_momentum *
   * ema + (1 - ema_momentum) * weights after each step (the first step copies them), and puts it in
   * place of those weights when kx_fit ends (before TrainEnd callbacks, as Keras). Checkpoints hold
   * it as "optimizer/ema/..." tensors. */
  int32_t use_ema;
  double ema_momentum;    /* in [0, 1); default 0.99 */
  /* A zero field above means its default. To mean the zero itself (Keras accepts beta_1=0, and a
   * learning rate of 0), set the field's bit here: KX_COMPILE_ZERO_* below. Bits of fields that are
   * not zero change nothing. */
  uint32_t zero_is_value;
  /* Keras's dtype policy (kx_precision below): 0 (KX_PRECISION_FLOAT32) computes in float32. Added
   * after zero_is_value; a struct from an older kx.h, initialised by kx_compile_options_init, reads
   * as 0 here. */
  int32_t precision;
  /* Added after precision (a struct from an older kx.h reads these as 0, their defaults): */
  double weight_decay;    /* AdamW: w -= w * weight_decay * learning_rate before each step; default 0.004 */
  double rho;             /* RMSprop: the decay of its average of squared gradients, in [0, 1); default 0.9 */
  int32_t centered;       /* RMSprop: non-zero divides by the gradients' estimated variance (Keras's centered) */
} kx_compile_options;

/* Values of kx_compile_options.precision, Keras's mixed_precision policies. With a mixed policy the
 * layers compute in the 16-bit type (GEMMs, convolutions, activations: every layer output and every
 * gradient between layers is a 16-bit value) while the weights, the optimizer's slots, the loss with
 * its softmax / sigmoid, batch normalisation and the all-reduce stay float32; checkpoints hold float32,
 * so a model trained mixed loads into a float32 one and back. kx_evaluate and kx_predict use the
 * policy too.
 *  KX_PRECISION_MIXED_BFLOAT16  bfloat16. CPUs: AVX512_BF16's dot products on CPUs where they outrun
 *                               float32 FMAs (aarch64: BFDOT where the CPU has BF16), else float32 FMAs
 *                               over the bfloat16 values (the same exact products, float32 sums); GPUs:
 *                               tensor cores.
 *  KX_PRECISION_MIXED_FLOAT16   float16 with Keras's dynamic loss scaling (LossScaleOptimizer: the loss
 *                               is multiplied by a scale, first 2^15; a step whose gradients are not
 *                               finite is skipped and halves it; 2000 finite steps in a row double
 *                               it). The scale is kept in checkpoints. CPUs have no float16 arithmetic
 *                               kx uses: there values are rounded to float16 and computed in float32
 *                               (as exact), for parity with a GPU, not for speed. */
typedef enum kx_precision {
  KX_PRECISION_FLOAT32 = 0,
  KX_PRECISION_MIXED_BFLOAT16 = 1,
  KX_PRECISION_MIXED_FLOAT16 = 2
} kx_precision;

#define KX_COMPILE_ZERO_LEARNING_RATE 1u
#define KX_COMPILE_ZERO_BETA1 2u
#define KX_COMPILE_ZERO_BETA2 4u
#define KX_COMPILE_ZERO_EPSILON 8u
#define KX_COMPILE_ZERO_EMA_MOMENTUM 16u
#define KX_COMPILE_ZERO_WEIGHT_DECAY 32u
#define KX_COMPILE_ZERO_RHO 64u

/* Zeroes *o and sets o->struct_size. Call it with sizeof *o. Ignores NULL. */
KX_API void kx_compile_options_init(kx_compile_options* o, size_t struct_size);

/* Plans the training step for the model's layers, allocates every buffer once and initialises the
 * weights. o may be NULL for all defaults. Errors: KX_E_MISUSE if already compiled or there are no
 * layers, KX_E_INVALID_ARGUMENT for bad options (an unknown precision included) or a loss that does
 * not fit the output, KX_E_UNSUPPORTED for a precision the strategy's devices cannot run. */
KX_API KX_MUST_CHECK kx_status kx_model_compile(kx_model* m, const kx_compile_options* o);

/* Number of parameters, trainable or not (Keras's "Total params": batch normalisation's moving
 * statistics included), known as soon as layers are added; -1 for NULL. */
KX_API int64_t kx_model_num_params(const kx_model* m);

/* Values per sample of the model's input (what kx_predict reads per sample) and of its output (what
 * kx_predict writes per sample); -1 for NULL. */
KX_API int64_t kx_model_input_size(const kx_model* m);
KX_API int64_t kx_model_output_size(const kx_model* m);

/* Copies all parameters, layer by layer (each layer's weights in Keras's order: kernel, bias; gamma,
 * beta, moving_mean, moving_variance), into out (out_len floats, at least
 * kx_model_num_params). Errors: NULL, out_len too small, KX_E_MISUSE before compile. */
KX_API KX_MUST_CHECK kx_status kx_model_get_weights(const kx_model* m, float* out, size_t out_len);
/* Replaces all parameters from w (w_len == kx_model_num_params floats, same order). */
KX_API KX_MUST_CHECK kx_status kx_model_set_weights(kx_model* m, const float* w, size_t w_len);

/* Saves a compiled model to one file in the safetensors layout (readable by Python's safetensors):
 * every parameter as "<layer>/<kernel|bias>", the optimizer slots as "optimizer/m/...", the model
 * and compile configs as JSON in the metadata, with CRC32s. Written durably: path.tmp, fsync, rename,
 * fsync of the directory, so a crash leaves the old file or the new one. Errors: NULL arguments,
 * KX_E_MISUSE before compile, KX_E_IO. */
KX_API KX_MUST_CHECK kx_status kx_model_save(kx_model* m, const char* path);
/* Loads a file written by kx_model_save (or a checkpoint) into a new compiled model on s, with any
 * number of replicas. *out belongs to the caller. Errors: NULL arguments, KX_E_IO (cannot read),
 * KX_E_CORRUPT (truncated, damaged or not a kx file; the message names the file and the problem). */
KX_API KX_MUST_CHECK kx_status kx_model_load(kx_strategy* s, const char* path, kx_model** out);
/* Opens a Keras model file on s: a .keras file (Keras 3: config.json and model.weights.h5 in a zip)
 * or a legacy full-model .h5 file (model.save("x.h5"), Keras 2 or 3). The model gets the file's
 * architecture, layer names and weights. When Keras compiled it, it is compiled the same way
 * (optimizer, learning rate, loss, accuracy metric, dtype policy) and takes the optimizer's state
 * (step count, Adam's moments, SGD's momentum) where the file holds it, so kx_fit continues where
 * Keras left off; otherwise it is returned uncompiled, holding the file's weights, which
 * kx_model_compile keeps. *out belongs to the caller (kx_model_destroy). The HDF5 part is read by
 * kx-hdf5-reader, a program installed beside libkx ($KX_HDF5_READER names another) that libkx runs
 * for each file (posix_spawn; the file goes to it through an anonymous memory file): it opens
 * libhdf5 1.10 or later at run time ($KX_HDF5_LIBRARY, else libhdf5_serial.so.103, libhdf5.so.103,
 * ...), under limits on its memory and CPU time and a deadline, so a damaged or hostile file that
 * crashes, hangs or bloats libhdf5 ends that process, never the caller's; libkx links no HDF5. The
 * whole file is read into memory. Errors: KX_E_INVALID_ARGUMENT (NULL arguments; a weights-only .h5
 * file, which kx_model_load_weights reads), KX_E_IO (cannot read the file; the reader cannot be
 * started), KX_E_UNSUPPORTED (the reader or libhdf5 is unavailable: the message says where it
 * looked; or the file holds what kx cannot train: the message names the layer class, the op node of
 * a functional graph, or the attribute and its value, e.g. a regularizer, dilation, a learning-rate
 * schedule, an optimizer other than Adam or SGD), KX_E_CORRUPT (damaged, truncated or hostile: the
 * message names the file and what is wrong, including the reader dying with signal N, running out
 * of time, or the file expanding past what its size justifies; weights the config needs are missing
 * or shaped otherwise). */
KX_API KX_MUST_CHECK kx_status kx_model_load_keras(kx_strategy* s, const char* path, kx_model** out);
/* Writes a compiled model as a .keras file that keras.models.load_model (Keras 3.6 or later) opens
 * and that predicts what kx_predict predicts: config.json (Keras 3's Sequential or Functional config,
 * the compile config), model.weights.h5 (the weights, and the optimizer's step count, learning rate
 * and slots) and metadata.json, in an uncompressed zip. Written durably (as kx_model_save). Needs
 * libhdf5 at run time ($KX_HDF5_LIBRARY), which writes kx's own data in this process (no reader
 * program is run). Threading: such writes run one at a time in the process (libhdf5 is not
 * thread-safe). m is only read. Errors: NULL arguments, KX_E_MISUSE before compile,
 * KX_E_UNSUPPORTED (libhdf5 is unavailable; a file over 4 GiB), KX_E_IO. */
KX_API KX_MUST_CHECK kx_status kx_model_save_keras(kx_model* m, const char* path);
KX_API void kx_model_destroy(kx_model* m);

/* More layers for Sequential models; each returns KX_E_MISUSE once the model is compiled. Samples of
 * 2-D layers are channels-last (height, width, channels), as Keras's default. */
/* AveragePooling2D: the mean of each pool_h x pool_w window ("valid" windows); stride 0 = the pool size. */
KX_API KX_MUST_CHECK kx_status kx_model_add_average_pool2d(kx_model* m, int32_t pool_h, int32_t pool_w, int32_t stride_h,
                                             int32_t stride_w);
/* GlobalAveragePooling2D: (height, width, channels) -> (channels). */
KX_API KX_MUST_CHECK kx_status kx_model_add_global_average_pool2d(kx_model* m);
/* ZeroPadding2D: rows and columns of zeros around each sample. Errors: negative padding. */
KX_API KX_MUST_CHECK kx_status kx_model_add_zero_padding2d(kx_model* m, int32_t top, int32_t bottom, int32_t left, int32_t right);
/* BatchNormalization over the last axis (Keras's defaults: momentum 0.99, epsilon 1e-3). In training
 * each replica normalises with its own batch statistics, as Keras does, and the moving statistics
 * follow the mean of the replicas'; evaluate and predict use the moving statistics. Errors: momentum
 * outside [0, 1], epsilon <= 0. */
KX_API KX_MUST_CHECK KX_DEPRECATED("kx_model_add_batch_normalization") kx_status kx_model_add_batch_norm(kx_model* m, float momentum, float epsilon);
/* The same with momentum and epsilon in double, as Keras holds them: 1 - momentum is then rounded as
 * Keras 3 rounds it (float32(1 - 0.99) = 0.01, where the float version gives 1 - float32(0.99)), and
 * the model's JSON holds 0.99 rather than 0.9900000095. Prefer it in new code. */
KX_API KX_MUST_CHECK kx_status kx_model_add_batch_normalization(kx_model* m, double momentum, double epsilon);
/* Normalization with given statistics, as keras.layers.Normalization(mean=..., variance=...): y = (x -
 * mean) / sqrt(variance) over the last axis, with n values per array: one per channel, or n = 1 for
 * every channel (kx_dataset_feature_moments finds them from the training data). A variance of 0
 * divides by 1e-7, as Keras. The arrays are copied; they become the layer's non-trainable weights
 * "mean" and "variance" (saved with the model, counted by kx_model_num_params). Errors: NULL, n = 0,
 * n neither 1 nor the channel count, a negative or non-finite value. */
KX_API KX_MUST_CHECK kx_status kx_model_add_normalization(kx_model* m, const float* mean, const float* variance, size_t n);
/* Activation: y = act(x) as a layer of its own. */
KX_API KX_MUST_CHECK kx_status kx_model_add_activation(kx_model* m, kx_activation act);

/* keras.applications.ResNet50's architecture (names included), uncompiled, on s. input_shape: 3
 * values (height, width, channels), height and width at least 32; NULL means 224 x 224 x 3. With
 * include_top != 0, global average pooling and a softmax Dense of `classes` end it (25,636,712
 * parameters for 1000 classes); without, it ends with the last stage's feature map (23,587,712).
 * Errors: NULL s or out, a bad shape, classes < 1 with the top. */
KX_API KX_MUST_CHECK kx_status kx_model_create_resnet50(kx_strategy* s, const int64_t* input_shape, int32_t include_top,
                                          int64_t classes, kx_model** out);

/* A keras.applications model by its Keras class name, "ResNet50", "MobileNetV2", "MobileNetV3Small",
 * "MobileNetV3Large" or "EfficientNetB0" (its Normalization's statistics are weights), with its keyword
 * arguments as a JSON object (NULL or "" for Keras's defaults), e.g. "MobileNetV2" with
 * {"alpha": 0.35, "input_shape": [96, 96, 3], "include_top": true, "pooling": null, "classes": 10}:
 * Keras's layers and layer names, so Keras's weight files load by name (kx_model_load_weights);
 * uncompiled, on s. "weights" may only be null. Errors: NULL s, name or out; KX_E_INVALID_ARGUMENT for
 * an unknown application or argument, malformed JSON, a bad shape or value (MobileNetV2's pooling other
 * than null, "avg" or "max"). */
KX_API KX_MUST_CHECK kx_status kx_model_create_application(kx_strategy* s, const char* name, const char* options_json,
                                                           kx_model** out);

/* Layers in order (the input is not one); -1 for NULL. */
KX_API int64_t kx_model_num_layers(const kx_model* m);
/* The name of layer `index` into *out_name (free with kx_free). Errors: NULL, index out of range. */
KX_API KX_MUST_CHECK kx_status kx_model_layer_name(const kx_model* m, int64_t index, char** out_name);

/* Freezes (trainable = 0) or unfreezes a layer by name, before or after compile; it takes effect at
 * the next training step. A frozen layer's weights do not change, and a frozen BatchNormalization
 * normalises with its moving statistics, as in Keras. Errors: NULL, no such layer. */
KX_API KX_MUST_CHECK kx_status kx_model_set_trainable(kx_model* m, const char* layer, int32_t trainable);
KX_API KX_MUST_CHECK kx_status kx_model_get_trainable(const kx_model* m, const char* layer, int32_t* out_trainable);
/* Parameters the optimizer trains now (those of unfrozen layers, moving statistics excluded); -1 for NULL. */
KX_API int64_t kx_model_num_trainable_params(const kx_model* m);

#define KX_LOAD_WEIGHTS_SKIP_MISMATCH 1u /* leave tensors that are absent or shaped differently as they are */

/* Weights tensor by tensor, in the order of Keras's model.weights (layers as Keras orders a
 * functional model's, a Sequential's in order; each layer's kernel, bias; gamma, beta, moving_mean,
 * moving_variance), named "<layer>/<weight>". The flat array of kx_model_get_weights holds the
 * layers in the order they were added: tensor i starts at kx_model_weight_offset(i) there. */
#define KX_MAX_RANK 8 /* the most dimensions a weight has: size the shape array of kx_model_weight_info so */
/* The number of weight tensors; -1 for NULL. Available before compile. */
KX_API int64_t kx_model_num_weights(const kx_model* m);
/* Tensor `index`: its name (a string to release with kx_free), its shape (up to KX_MAX_RANK values
 * written to shape, Keras's layout: Dense kernel [in, units], Conv2D kernel [kh, kw, in, filters]) and
 * rank. Each out-parameter may be NULL when not wanted. Errors: NULL m, index out of range. */
KX_API KX_MUST_CHECK kx_status kx_model_weight_info(const kx_model* m, int64_t index, char** out_name, int64_t* shape, size_t* rank);
/* Where tensor `index` starts in kx_model_get_weights' flat array. Errors: NULL m or out_offset, index. */
KX_API KX_MUST_CHECK kx_status kx_model_weight_offset(const kx_model* m, int64_t index, int64_t* out_offset);
/* Copies one tensor by name into out (row-major, out_len >= its element count). Errors: NULL
 * arguments, an unknown name, out_len too small, KX_E_MISUSE before compile. */
KX_API KX_MUST_CHECK kx_status kx_model_get_weight(const kx_model* m, const char* name, float* out, size_t out_len);
/* Replaces one tensor by name on every replica; n must equal its element count. Takes effect at the
 * next step. Errors: NULL arguments, an unknown name, a wrong n, KX_E_MISUSE before compile. */
KX_API KX_MUST_CHECK kx_status kx_model_set_weight(kx_model* m, const char* name, const float* values, size_t n);

/* Loads weights by name ("<layer>/<weight>", e.g. "conv1_conv/kernel") from a safetensors file: one
 * written by kx_model_save or a checkpoint, or any safetensors file of float32 tensors with those
 * names (e.g. converted from Keras). Tensors of the file the model lacks are ignored. Keras's weight
 * files are read too, by their HDF5 or zip signature (by kx-hdf5-reader, as kx_model_load_keras):
 * a Keras 3 .weights.h5 (by the layer name each group carries, or before Keras 3.6 by Keras's group
 * names), a legacy .h5 from save_weights or model.save and Keras Applications' weight files (by
 * layer name, each layer's weights in order) and a .keras file's weights. Without
 * KX_LOAD_WEIGHTS_SKIP_MISMATCH, a model weight that the file lacks or holds with another shape is
 * KX_E_INVALID_ARGUMENT and nothing changes; with it, such weights keep their values. loaded and
 * skipped (either may be NULL) receive the counts of weights. Errors: NULL m or path, KX_E_MISUSE
 * before compile, KX_E_IO, KX_E_CORRUPT (damaged or hostile, as kx_model_load_keras: never a crash
 * or a hang of the caller), KX_E_UNSUPPORTED (a Keras file where kx-hdf5-reader or libhdf5 is
 * unavailable). */
KX_API KX_MUST_CHECK kx_status kx_model_load_weights(kx_model* m, const char* path, uint32_t flags, int64_t* loaded,
                                       int64_t* skipped);

/* Writes the model as an ONNX file for inference (opset 13, IR version 7) that ONNX runtimes run
 * with the outputs of kx_predict: one input named as the model's input, of shape [N, <input shape>]
 * (channels last, as kx and Keras hold images) with a symbolic batch N, and one output "output" of
 * shape [N, <output shape>], probabilities for softmax and sigmoid outputs. Inside, images are NCHW
 * as ONNX operators want them (a Transpose where kx's channels-last order matters: at the input, at
 * Flatten and at an image output). Dense is Gemm (MatMul without bias), BatchNormalization uses the
 * moving statistics, Dropout is left out. Weights are those of now. Written durably (as
 * kx_model_save). Errors: NULL arguments, KX_E_MISUSE before compile, KX_E_IO. */
KX_API KX_MUST_CHECK kx_status kx_model_export_onnx(const kx_model* m, const char* path);

/* Keras 3's model.summary() text, as Keras prints it to a pipe or an 80-column terminal (its table then
 * 76 characters wide): the line Model: "sequential" (or "functional"), a table of the layers drawn
 * with box-drawing characters (layer name and class, output shape with the batch as None, parameter
 * count; for a model whose layers are not one chain, the input first and a "Connected to" column,
 * layers in Keras's order), then " Total params: 101,770 (397.54 KB)", " Trainable params: ...",
 * " Non-trainable params: ...", and once the model has trained, " Optimizer params: ..." (Keras's
 * optimizer variables: iteration count, learning rate and a slot per trained value for each moment,
 * counted in the total as Keras does). UTF-8, one '\n' after each line; *out_text is allocated, free
 * it with kx_free. Available before compile. Errors: NULL m or out_text. */
KX_API KX_MUST_CHECK kx_status kx_model_summary(const kx_model* m, char** out_text);
/* The same with the table line_length characters wide, as Keras's summary(line_length=...); 0 is
 * Keras's default for the layout: 88, or 108 with the "Connected to" column (Keras itself takes the
 * smaller of that and the terminal's width minus 4). Errors: NULL m or out_text, line_length < 0,
 * above 4096 or too small for the columns (a column under 4 characters, as Keras refuses). */
KX_API KX_MUST_CHECK kx_status kx_model_summary_width(const kx_model* m, int32_t line_length, char** out_text);

/* The dynamic loss scale of a model compiled with KX_PRECISION_MIXED_FLOAT16 into *out_scale (the
 * one the next step multiplies the loss by); 1 for other precisions. Errors: NULL arguments,
 * KX_E_MISUSE before compile. */
KX_API KX_MUST_CHECK kx_status kx_model_loss_scale(const kx_model* m, double* out_scale);

/* What one replica's training holds in its device's memory for a global batch, in bytes: to size a
 * device before training (kx_model_training_memory). The dataset is not counted: the CPU reads it
 * where it is; a GPU holds a copy of it when it fits in its memory and streams it otherwise. */
typedef struct kx_training_memory {
  uint32_t struct_size;     /* set by the caller to sizeof(kx_training_memory); kx sets it to what it filled */
  int64_t batch;            /* the global batch asked about */
  int64_t rows;             /* the rows of it one replica holds (the largest share) */
  int64_t weights;          /* the weights, and their 16-bit copy under a mixed precision */
  int64_t weight_gradients; /* one per weight */
  int64_t optimizer_slots;  /* Adam's two moments, SGD's momentum, the moving average of the weights */
  /* The step's arena: every activation, every gradient between layers and every layer's workspace
   * (a convolution's columns), where buffers whose lifetimes in the step do not overlap share memory. */
  int64_t step_arena;
  /* For comparison: what those buffers add up to each apart, and that sum by kind. */
  int64_t step_arena_without_reuse;
  int64_t activations;
  int64_t layer_gradients;
  int64_t workspace;
  int64_t scratch;          /* layers' state kept from forward to backward (statistics, dropout masks) */
  int64_t batch_buffers;    /* the batch's labels, sample weights and indices */
  /* weights + weight_gradients + optimizer_slots + step_arena + scratch + batch_buffers */
  int64_t total;
} kx_training_memory;

/* Fills *out with the memory one replica of the compiled model holds to train with global batches of
 * `batch` samples, as planned: nothing is allocated, and a fit with that batch allocates exactly this
 * (kx_evaluate and kx_predict with larger batches, at least 32 for kx_predict, make the step's
 * buffers that large; kx's code, threads and the dataset come on top). Set out->struct_size
 * to sizeof *out first: kx fills at most that many bytes (fields of a newer kx.h than the library's
 * are left as they are) and sets struct_size to the bytes it filled. Errors: NULL arguments,
 * out->struct_size below this first version's size, batch < 1 (KX_E_INVALID_ARGUMENT), KX_E_MISUSE
 * before compile. */
KX_API KX_MUST_CHECK kx_status kx_model_training_memory(const kx_model* m, int64_t batch, kx_training_memory* out);

/* ---------------------------------------------------------------------------------------------- */
/* Datasets                                                                                       */
/* ---------------------------------------------------------------------------------------------- */

typedef struct kx_dataset kx_dataset;

typedef enum kx_dtype {
  KX_DTYPE_F32 = 0,
  KX_DTYPE_I32 = 1,
  KX_DTYPE_I64 = 2,
  KX_DTYPE_U8 = 3,
  KX_DTYPE_F64 = 4 /* converted to float32, rounded to nearest */
} kx_dtype;

/* A dataset of (x, y) pairs, copied from the caller's arrays (row-major, shape[0] = samples; x and y
 * must have the same number of samples). u8 x is scaled to [0, 1]; other x and all y are converted to
 * float32 (integers must be exactly representable: |v| <= 2^24). Token ids for an Embedding layer
 * are int32 (or int64) x, held exactly. Errors: NULL pointers, rank 0, zero or
 * negative dimensions, mismatched sample counts, unknown dtype. */
KX_API KX_MUST_CHECK kx_status kx_dataset_from_arrays(const void* x, kx_dtype x_dtype, const int64_t* x_shape, size_t x_rank,
                                        const void* y, kx_dtype y_dtype, const int64_t* y_shape, size_t y_rank,
                                        kx_dataset** out);
/* kx_dataset_from_arrays with Keras's sample_weight: sample_weight holds x_shape[0] floats, copied, one
 * per sample. A sample weighs sample_weight[i] in the loss, its gradient and the accuracy, as in Keras 3:
 * a batch's loss is sum(w * loss) / (samples in the batch) (not divided by the sum of the weights), the
 * accuracy sum(w * correct) / sum(w) (0 when the weights sum to 0). Used by kx_fit (training and
 * validation data), kx_evaluate and the datasets made from it by take/skip/shuffle/batch (and
 * validation_split). NULL sample_weight: every sample weighs 1 (as kx_dataset_from_arrays). Errors:
 * those of kx_dataset_from_arrays, a weight that is negative or not finite (KX_E_INVALID_ARGUMENT). */
KX_API KX_MUST_CHECK kx_status kx_dataset_from_arrays_weighted(const void* x, kx_dtype x_dtype, const int64_t* x_shape,
                                                 size_t x_rank, const void* y, kx_dtype y_dtype,
                                                 const int64_t* y_shape, size_t y_rank, const float* sample_weight,
                                                 kx_dataset** out);

/* Images and labels from IDX files (MNIST's format), gzip-compressed or not; images are scaled to
 * [0, 1]. A header that claims more data than its file can hold is refused before that much memory is
 * taken. Errors: KX_E_IO (cannot open/read), KX_E_CORRUPT (bad magic, truncated, a header claiming
 * more data than the file holds, counts differ), KX_E_INVALID_ARGUMENT (dimensions whose product is
 * beyond what kx holds); the message names the file. */
KX_API KX_MUST_CHECK kx_status kx_dataset_from_idx(const char* images_path, const char* labels_path, kx_dataset** out);

/* The first n samples of d (in storage order), or all but the first n. The result shares d's storage
 * (d may be destroyed first) and copies d's shuffle and batch settings. n larger than the dataset is
 * clipped, as tf.data does. Errors: NULL, n < 0. */
KX_API KX_MUST_CHECK kx_status kx_dataset_take(const kx_dataset* d, int64_t n, kx_dataset** out);
KX_API KX_MUST_CHECK kx_status kx_dataset_skip(const kx_dataset* d, int64_t n, kx_dataset** out);

/* Shuffles sample order with a buffer of buffer_size samples (>= the sample count = a uniform
 * shuffle), reshuffled every epoch from seed; the same seed repeats the same orders. */
KX_API KX_MUST_CHECK kx_status kx_dataset_shuffle(kx_dataset* d, int64_t buffer_size, uint64_t seed);
/* Groups samples into batches of global_batch_size (split across replicas by kx_fit). The last
 * partial batch is kept unless drop_remainder is non-zero. Without this call, kx_fit uses 32. */
KX_API KX_MUST_CHECK kx_status kx_dataset_batch(kx_dataset* d, int64_t global_batch_size, int32_t drop_remainder);
/* tf.data's cache for datasets decoded from files (kx_dataset_from_image_directory): each sample is
 * kept after its first decode and read from there afterwards (before the maps: augmentation still
 * varies per epoch). path_or_null NULL keeps them in memory (the whole decoded dataset: only for data
 * that fits); a path keeps them in that file, which a later run (or dataset) reuses when its header
 * says it holds every sample of the same files (paths, sizes, modification times) decoded at the same
 * size, and rewrites otherwise. Workers of a multi-worker job need one path each. Datasets held in
 * memory are cached already: nothing to do. Errors: NULL d, an empty path, KX_E_IO (cannot create). */
KX_API KX_MUST_CHECK kx_status kx_dataset_cache(kx_dataset* d, const char* path_or_null);
/* Batches to prepare ahead of the step (0 = none, the default): a decoded dataset (image folder, or
 * one with maps) is decoded on a background thread that many batches ahead of kx_fit's step (and of
 * kx_evaluate's), so decoding overlaps training; memory holds at most batches + 2 decoded batches.
 * The batches are the same with or without it. A decoding error fails kx_fit at the batch it belongs
 * to, naming the file. In-memory datasets need no decoding (on a GPU the next batch's copy already
 * overlaps the step): nothing to do. Errors: NULL d, negative batches. */
KX_API KX_MUST_CHECK kx_status kx_dataset_prefetch(kx_dataset* d, int32_t batches);
/* What Keras's Normalization.adapt() computes, for kx_model_add_normalization: the mean and the
 * biased variance of d's x over all of d's samples and every position of a sample, per channel (n =
 * the size of x's last axis) or over all values (n = 1), summed in float64. mean and variance receive
 * n floats each (caller-owned). Errors: NULL, another n, an empty dataset. */
KX_API KX_MUST_CHECK kx_status kx_dataset_feature_moments(const kx_dataset* d, float* mean, float* variance, size_t n);
/* Samples in d; -1 for NULL. */
KX_API int64_t kx_dataset_num_samples(const kx_dataset* d);
KX_API void kx_dataset_destroy(kx_dataset* d);

/* ---- Data from files: numpy, CSV, image folders (the data pipeline) ---- */

/* x and y from numpy .npy files (format versions 1, 2 and 3; little-endian float32 '<f4', float64
 * '<f8', uint8 '|u1', int32 '<i4', int64 '<i8'; C order; shape[0] = samples in both), converted as
 * kx_dataset_from_arrays converts (u8 x scaled to [0, 1]). Both files are read whole into memory.
 * Errors: KX_E_IO (cannot open/read); KX_E_INVALID_ARGUMENT naming the file and why for another dtype,
 * big-endian data, Fortran order, a 0-d array or sample counts that differ; KX_E_CORRUPT for a file
 * that is not .npy or is truncated. */
KX_API KX_MUST_CHECK kx_status kx_dataset_from_npy(const char* x_path, const char* y_path, kx_dataset** out);
/* A CSV file: a header row naming the columns, then one sample per line, every cell a finite number
 * (cells may be double-quoted; blank lines are skipped). The column named label_column is y (one
 * scalar per sample), every other column is x, in file order, as float32. Errors: KX_E_IO;
 * KX_E_INVALID_ARGUMENT for a bad cell (the message names the line, counting the header as line 1,
 * and the column by number and name), a row of another width, no such column, or no data rows. */
KX_API KX_MUST_CHECK kx_status kx_dataset_from_csv(const char* path, const char* label_column, kx_dataset** out);
/* Keras's image_dataset_from_directory (labels "inferred", label_mode "int", no shuffle here: call
 * kx_dataset_shuffle): each subfolder of dir is a class, labels 0, 1, ... in sorted folder-name order;
 * its .jpg/.jpeg/.png files (searched recursively, case-insensitive extensions, sorted by path) are the
 * samples, class by class. Pixels are decoded by libjpeg-turbo and libpng when a batch needs them
 * (never the whole folder at once), converted to `channels` (1 grayscale, 3 RGB, 4 RGBA; the
 * libraries' own conversions, alpha dropped), resized to height x width with tf.image.resize's
 * bilinear interpolation (half-pixel centers, antialias=False) and scaled to [0, 1] (unlike Keras,
 * which leaves 0..255 to a Rescaling layer). Each file's header is read now: a file whose header does
 * not decode is skipped with a warning on stderr naming it (kx_dataset_num_skipped counts them); a
 * file that fails later, in the middle of its data, fails kx_fit with KX_E_CORRUPT naming it.
 * Errors: KX_E_INVALID_ARGUMENT (bad size or channels, no class folders, no decodable images),
 * KX_E_IO (dir missing or unreadable), KX_E_UNSUPPORTED (kx built without libjpeg/libpng). */
KX_API KX_MUST_CHECK kx_status kx_dataset_from_image_directory(const char* dir, int64_t height, int64_t width, int64_t channels,
                                                 kx_dataset** out);
/* The classes of an image-folder dataset (0 for other datasets; -1 for NULL), and the name of class i
 * (its folder's name; *name is owned by d and valid until d is destroyed). Errors: NULL, i out of range. */
KX_API int64_t kx_dataset_num_classes(const kx_dataset* d);
KX_API KX_MUST_CHECK kx_status kx_dataset_class_name(const kx_dataset* d, int64_t i, const char** name);
/* Files an image-folder dataset skipped because they did not decode (0 for others; -1 for NULL). */
KX_API int64_t kx_dataset_num_skipped(const kx_dataset* d);
/* Augmentation as dataset maps over image samples (height, width, channels), Keras's
 * RandomFlip("horizontal", seed=seed) and RandomCrop(height, width, seed=seed): applied to each
 * sample as kx_fit and kx_evaluate read it (after kx_dataset_cache), drawn from (seed, the pass over
 * the data, the sample's index) alone, so the same seed gives the same samples in every run, with or
 * without prefetch, and a fit resumed mid-epoch sees what the uninterrupted one saw. The flip mirrors
 * left-right with probability 1/2; the crop takes a height x width window at a uniform position (the
 * samples' shape becomes height x width x channels). Both also apply in kx_evaluate (unlike Keras's
 * layers, which do nothing at inference): evaluate a dataset without them. A dataset with maps is
 * decoded batch by batch as an image folder is (kx_dataset_prefetch applies). Errors: NULL d, samples
 * that are not images, a crop larger than the images or not positive. */
KX_API KX_MUST_CHECK kx_status kx_dataset_random_flip(kx_dataset* d, uint64_t seed);
KX_API KX_MUST_CHECK kx_status kx_dataset_random_crop(kx_dataset* d, int64_t height, int64_t width, uint64_t seed);

/* ---------------------------------------------------------------------------------------------- */
/* Training: fit, evaluate, predict, and callbacks                                                */
/* ---------------------------------------------------------------------------------------------- */

typedef struct kx_callbacks kx_callbacks;
typedef struct kx_history kx_history;

typedef enum kx_event_kind {
  KX_EVENT_TRAIN_BEGIN = 0,
  KX_EVENT_EPOCH_BEGIN = 1,
  KX_EVENT_BATCH_END = 2,
  KX_EVENT_EPOCH_END = 3,
  KX_EVENT_TRAIN_END = 4,
  KX_EVENT_CHECKPOINT_SAVED = 5
} kx_event_kind;

/* What a callback sees. Values not known at that event are NaN (metrics) or -1 (counters). */
typedef struct kx_event {
  uint32_t struct_size;
  kx_event_kind kind;
  int32_t epoch;        /* 0-based */
  int64_t step;         /* batches done in this epoch (BATCH_END: including this one) */
  double loss;          /* running mean over the epoch so far */
  double accuracy;      /* running mean, NaN without KX_METRIC_ACCURACY */
  double val_loss;      /* EPOCH_END with validation data */
  double val_accuracy;
  const char* path;     /* CHECKPOINT_SAVED: the file written; else NULL */
  int64_t steps_per_epoch;
  int64_t global_step;  /* batches trained since the first fit (continues across resumes) */
  /* BATCH_END: this batch's own loss and accuracy (Keras's train_on_batch figures), where the step's
   * loss was read for it: always for callbacks that read batch metrics; NaN otherwise. */
  double batch_loss;
  double batch_accuracy;
  /* The learning rate of the next step: the compiled one, or what a schedule or callback set. (Read it
   * only when struct_size > offsetof(kx_event, learning_rate): older libraries do not fill it.) */
  double learning_rate;
} kx_event;

/* Called on the thread that called kx_fit. Return 0 to go on, non-zero to stop (kx_fit then returns
 * KX_STOPPED). The event is valid only during the call. */
typedef int32_t (*kx_callback_fn)(const kx_event* ev, void* user_data);

/* An empty callback list; it may be given to several fits in turn (not at the same time). */
KX_API KX_MUST_CHECK kx_status kx_callbacks_create(kx_callbacks** out);
/* Keras's ModelCheckpoint. Every every_n_batches global batches (0 = at the end of every epoch,
 * after validation) kx_fit writes a checkpoint: weights, optimizer state, step count, epoch and
 * position within it, RNG and data-order state, so kx_fit_options.resume_from continues at the exact
 * next batch. path_template fields: {epoch} (1-based, as Keras), {step} (global batch count), {loss},
 * {val_loss}, with optional formats {epoch:02d}, {loss:.4f}; missing directories are created.
 * keep_last > 0 keeps that many newest files of this template in the directory, deleting older ones
 * only after the new one is durable (0 keeps all). A CHECKPOINT_SAVED event follows each write. A
 * failed write stops kx_fit with KX_E_IO. Errors: NULL, negative counts, unknown field or format. */
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_model_checkpoint(kx_callbacks* c, const char* path_template,
                                                   int64_t every_n_batches, int32_t keep_last);
/* Keras's EarlyStopping: stops fit (KX_STOPPED) when monitor ("val_loss" when NULL, "loss",
 * "accuracy", "val_accuracy") has not improved by more than min_delta for patience epochs; with
 * restore_best_weights the weights of the best epoch are put back. kx_fit fails with
 * KX_E_INVALID_ARGUMENT when the monitored value does not exist (no validation data, no accuracy). */
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_early_stopping(kx_callbacks* c, const char* monitor, int32_t patience,
                                                 double min_delta, int32_t restore_best_weights);
/* Keras's CSVLogger: one row per epoch, "epoch,accuracy,loss,val_accuracy,val_loss" (the columns
 * that exist). append != 0 keeps the file's rows (and its header). Errors: NULL; KX_E_IO from kx_fit. */
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_csv_logger(kx_callbacks* c, const char* path, int32_t append);
/* Keras's TerminateOnNaN: a NaN or infinite batch loss makes kx_fit return KX_E_DIVERGED before any
 * callback sees that batch, so the last checkpoint written is the last good one. */
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_terminate_on_nan(kx_callbacks* c);
/* Learning-rate schedules from the compiled rate lr0. Step decay: lr0 * factor^floor(epoch /
 * every_epochs), factor in (0, 1]. Cosine decay (per global step, as keras.optimizers.schedules
 * .CosineDecay): lr0 * ((1 - alpha) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2 + alpha).
 * Both depend only on the position, so a resumed fit continues them. */
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_step_decay(kx_callbacks* c, double factor, int32_t every_epochs);
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_cosine_decay(kx_callbacks* c, int64_t decay_steps, double alpha);
/* fn is called for every event, in the order functions were added; user_data is passed through.
 * Errors: NULL c or fn. */
KX_API KX_MUST_CHECK KX_DEPRECATED("kx_callbacks_add_function_flags") kx_status kx_callbacks_add_function(kx_callbacks* c, kx_callback_fn fn, void* user_data);
/* fn does not read the loss or accuracy of BATCH_END events (it acts on epochs, or counts steps). */
#define KX_CALLBACK_NO_BATCH_METRICS 1u
/* fn may fail kx_fit, as an exception in a Keras callback does: a negative return value (a KX_E_* code;
 * other negative values mean KX_E_INTERNAL) makes kx_fit fail with it at once, without the
 * TRAIN_END event, so that BackupAndRestore keeps its backup for the next kx_fit. Without this flag
 * every non-zero value stops training (KX_STOPPED). */
#define KX_CALLBACK_MAY_FAIL 2u
/* As kx_callbacks_add_function, with flags (0, KX_CALLBACK_NO_BATCH_METRICS, KX_CALLBACK_MAY_FAIL). On a GPU each step
 * runs ahead of the host and kx_fit reads its loss from the device only when something needs it: the
 * progress bar when it redraws, the end of an epoch, TerminateOnNaN, or a function callback, unless
 * added with KX_CALLBACK_NO_BATCH_METRICS. Such a function's BATCH_END events carry the latest values
 * read, which may be some batches old. Errors: NULL c or fn, an unknown flag. */
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_function_flags(kx_callbacks* c, kx_callback_fn fn, void* user_data, uint32_t flags);
KX_API void kx_callbacks_destroy(kx_callbacks* c);

typedef struct kx_fit_options {
  uint32_t struct_size;
  int32_t epochs;             /* default 1 */
  int32_t initial_epoch;      /* epoch to start counting from (default 0) */
  int64_t steps_per_epoch;    /* default: one pass over the dataset */
  kx_dataset* validation;     /* evaluated after each epoch; borrowed */
  int64_t validation_steps;   /* default: the whole validation dataset */
  int32_t verbose;            /* 0 silent (default), 1 progress bar, 2 one line per epoch */
  const char* resume_from;    /* checkpoint file, or a directory: its newest checkpoint that loads
                                 cleanly (damaged files, and files whose training position is out
                                 of range, are skipped, and said so with verbose > 0).
                                 Nothing there: training starts fresh (and says so). */
  /* Keras's validation_split, in [0, 1): without `validation`, the last fraction of train (in storage
   * order, before any shuffle) is held out and evaluated after each epoch. The first
   * floor(n * (1.0 - validation_split)) samples (in float64, as Keras 3) train, the rest validate;
   * kx_fit fails with KX_E_INVALID_ARGUMENT when either part would be empty. Ignored when
   * `validation` is given (as Keras). 0: none. */
  double validation_split;
  /* Keras's class_weight: class_weight[c] weighs the loss and the accuracy of each training sample of
   * class c, for c < n_class_weight (other classes, negative ones included, weigh 1, as Keras's
   * dict.get(c, 1.0)); the class of a sample is its label rounded to an integer when it has one value
   * (sparse labels, one binary output), else the argmax of its target (one-hot). As the sample weights
   * of kx_dataset_from_arrays_weighted: the loss is sum(w * loss) / samples, the accuracy
   * sum(w * correct) / sum(w). Training data only: validation is not weighted by it. kx_fit fails with
   * KX_E_INVALID_ARGUMENT when a weight is negative or not finite, or when train has sample weights
   * (Keras refuses both together). NULL: none. */
  const float* class_weight;
  size_t n_class_weight;
} kx_fit_options;

KX_API void kx_fit_options_init(kx_fit_options* o, size_t struct_size);

/* Trains m on train. o and cb may be NULL. On KX_OK or KX_STOPPED, *out (if out is not NULL)
 * receives the per-epoch history (of the epochs run by this call). Errors: KX_E_MISUSE before
 * compile; KX_E_INVALID_ARGUMENT when the dataset does not fit the model (sample shape, label range),
 * options are bad, or resume_from holds a checkpoint of another model (the message names the first
 * difference), other training data or another steps_per_epoch; KX_E_CORRUPT for a damaged
 * resume_from file, or one whose metadata holds a value out of its field's range (a negative or
 * absurd step, epoch or count, a sum that is not finite: the message names the field); KX_E_IO when a checkpoint cannot be written; KX_E_DIVERGED (TerminateOnNaN). */
KX_API KX_MUST_CHECK kx_status kx_fit(kx_model* m, kx_dataset* train, const kx_fit_options* o, kx_callbacks* cb,
                        kx_history** out);

/* Epochs recorded; -1 for NULL. */
KX_API int32_t kx_history_epochs(const kx_history* h);
/* One value ("loss", "accuracy", "val_loss", "val_accuracy") of the epoch-th recorded epoch.
 * Errors: unknown name, name not recorded, epoch out of range. */
KX_API KX_MUST_CHECK kx_status kx_history_get(const kx_history* h, const char* name, int32_t epoch, double* out);
KX_API void kx_history_destroy(kx_history* h);

/* Mean loss and accuracy over d (in storage order, its batch size or 32). Either out-pointer may be
 * NULL; accuracy is computed whether or not KX_METRIC_ACCURACY was compiled. When d has sample weights
 * (kx_dataset_from_arrays_weighted): the loss is sum(w * loss) / samples, the accuracy
 * sum(w * correct) / sum(w), as Keras's evaluate with sample_weight. When the model's output carries a
 * Keras mask (Embedding mask_zero, a labeller per step), masked positions are left out as Keras does:
 * a batch's loss is sum(w * mask * loss) / (its unmasked positions), 0 when it has none, and the
 * accuracy sum(w * mask * correct) / sum(w * mask); kx_fit and the on-batch calls likewise (the gradient
 * too). Such a model is KX_E_UNSUPPORTED with several worker processes or parameter servers. */
KX_API KX_MUST_CHECK kx_status kx_evaluate(kx_model* m, kx_dataset* d, double* loss, double* accuracy);

/* Model outputs for n_samples inputs x (row-major, float32, each sample the model's input shape)
 * into out (out_len floats, at least n_samples * outputs per sample). */
KX_API KX_MUST_CHECK kx_status kx_predict(kx_model* m, const float* x, int64_t n_samples, float* out, size_t out_len);

/* Keras's train_on_batch: one optimizer step on these n_samples as one global batch (split across the
 * replicas), exactly the step kx_fit takes on that batch. x holds n_samples inputs (float32, the
 * model's input shape); y n_samples class indices for sparse categorical cross-entropy (one per
 * position of a multi-axis output: see kx_loss), else n_samples * the output size targets. loss and accuracy (either may be NULL) receive the batch's
 * loss and accuracy before the update (NaN without KX_METRIC_ACCURACY). Errors: NULL m, x or y,
 * n_samples <= 0, labels that are not classes, KX_E_MISUSE before compile. */
KX_API KX_MUST_CHECK kx_status kx_model_train_on_batch(kx_model* m, const float* x, const float* y, int64_t n_samples,
                                         double* loss, double* accuracy);
/* Keras's test_on_batch: the loss and accuracy of these samples, without training. Same arguments and
 * errors as kx_model_train_on_batch. */
KX_API KX_MUST_CHECK kx_status kx_model_test_on_batch(kx_model* m, const float* x, const float* y, int64_t n_samples,
                                        double* loss, double* accuracy);

/* kx_evaluate with Keras's progress output on stdout: verbose 1 a bar (redrawn on a terminal, one line
 * at the end otherwise), "313/313 ━━━━━━━━━━━━━━━━━━━━ 1s 2ms/step - accuracy: 0.8765 - loss: 0.3456",
 * verbose 2 "313/313 - 1s - 2ms/step - ...", 0 nothing (kx_evaluate). Errors: those of kx_evaluate,
 * verbose outside 0..2. */
KX_API KX_MUST_CHECK kx_status kx_evaluate_verbose(kx_model* m, kx_dataset* d, int32_t verbose, double* loss, double* accuracy);

/* Keras's TensorBoard callback: kx_fit writes TensorBoard event files (TFRecord files of Event
 * protobufs, read by `tensorboard --logdir <log_dir>`) into log_dir/train and, with validation data,
 * log_dir/validation, creating the directories; each fit starts new files. At the end of each epoch:
 * "epoch_loss", "epoch_accuracy" (when compiled with it) and, under train, "epoch_learning_rate", at
 * step = epoch (0-based, as Keras). update_freq N > 0 adds "batch_loss", "batch_accuracy" (the
 * epoch's running means) and "batch_learning_rate" every N batches, at step = the global batch count
 * (0: epochs only). histogram_freq N > 0 adds a histogram of every weight tensor,
 * "<layer>/<weight>/histogram", every N epochs (0: none). Errors: NULL c or log_dir, an empty
 * log_dir, negative frequencies; KX_E_IO from kx_fit when a file cannot be created or written. */
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_tensorboard(kx_callbacks* c, const char* log_dir, int64_t update_freq,
                                              int32_t histogram_freq);

/* Keras's ReduceLROnPlateau: at the end of each epoch, when monitor ("val_loss" when NULL, "loss",
 * "accuracy", "val_accuracy") has not improved for patience epochs, the learning rate becomes
 * max(rate * factor, min_lr) (the rate read as the float32 Keras keeps), as Keras 3 does: mode "auto"
 * (higher is better for accuracies), min_delta 1e-4, cooldown 0. The epochs' history and progress
 * line then carry "learning_rate" (the rate of each epoch), as in Keras. Errors: NULL c, an unknown
 * monitor, factor outside [0, 1), patience < 0, min_lr < 0 or not finite; kx_fit fails with
 * KX_E_INVALID_ARGUMENT when the monitored value does not exist (no validation data, no accuracy). */
KX_API KX_MUST_CHECK KX_DEPRECATED("kx_callbacks_add_reduce_lr_on_plateau_options") kx_status kx_callbacks_add_reduce_lr_on_plateau(kx_callbacks* c, const char* monitor, double factor,
                                                       int32_t patience, double min_lr);
typedef enum kx_monitor_mode { KX_MODE_AUTO = 0, KX_MODE_MIN = 1, KX_MODE_MAX = 2 } kx_monitor_mode;
/* Every setting of ReduceLROnPlateau; a zero field means Keras's default. */
typedef struct kx_reduce_lr_options {
  uint32_t struct_size;
  const char* monitor;   /* default "val_loss" */
  double factor;         /* default 0.1; in (0, 1) */
  int32_t patience;      /* default 10 (KX_REDUCE_LR_ZERO_PATIENCE: 0) */
  kx_monitor_mode mode;  /* default auto */
  double min_delta;      /* default 1e-4 (KX_REDUCE_LR_ZERO_MIN_DELTA: 0); an improvement beats the best by more */
  int32_t cooldown;      /* default 0: epochs after a reduction before waiting again */
  double min_lr;         /* default 0 */
  uint32_t zero_is_value;
} kx_reduce_lr_options;
#define KX_REDUCE_LR_ZERO_PATIENCE 1u
#define KX_REDUCE_LR_ZERO_MIN_DELTA 2u
/* Zeroes *o and sets o->struct_size. Call it with sizeof *o. Ignores NULL. */
KX_API void kx_reduce_lr_options_init(kx_reduce_lr_options* o, size_t struct_size);
/* ReduceLROnPlateau with every setting. Errors: those of kx_callbacks_add_reduce_lr_on_plateau, NULL o,
 * a bad struct_size, an unknown mode, cooldown < 0, min_delta not finite. */
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_reduce_lr_on_plateau_options(kx_callbacks* c, const kx_reduce_lr_options* o);

/* A learning-rate schedule of the user's: returns the rate of epoch `epoch` (0-based, initial_epoch
 * included) from the current rate lr. Called on the thread that called kx_fit. */
typedef double (*kx_lr_schedule_fn)(int32_t epoch, double lr, void* user_data);
/* Keras's LearningRateScheduler: at the start of each epoch the rate becomes fn(epoch, lr, user_data),
 * lr read as Keras's float32 variable. The history and progress line carry "learning_rate". kx_fit
 * fails with KX_E_INVALID_ARGUMENT when fn returns a negative or non-finite rate. Errors: NULL c or fn. */
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_learning_rate_scheduler(kx_callbacks* c, kx_lr_schedule_fn fn, void* user_data);

/* Keras's BackupAndRestore: kx_fit backs the training up into backup_dir (created if missing; keep it
 * for this use alone) at the end of every epoch: a checkpoint as ModelCheckpoint writes, the previous
 * backup deleted once the new one is durable. A kx_fit given this callback and finding a backup there
 * resumes from it, at the exact next batch (before resume_from, which it then ignores), so an
 * interrupted run ends as an uninterrupted one would. When kx_fit ends without an error (all epochs
 * done, or a callback stopped it), backup_dir is deleted; after an error or a crash it stays for the
 * next kx_fit. Backups are checkpoints: a CHECKPOINT_SAVED event follows each. Errors: NULL or empty
 * backup_dir; from kx_fit, KX_E_IO when the backup cannot be written or deleted, and those of
 * resume_from (a backup of another model or other data). */
KX_API KX_MUST_CHECK KX_DEPRECATED("kx_callbacks_add_backup_and_restore_every") kx_status kx_callbacks_add_backup_and_restore(kx_callbacks* c, const char* backup_dir);
/* The same, backing up every every_n_batches global batches instead (Keras's save_freq=N); 0 is every
 * epoch. Errors: those above, every_n_batches < 0. */
KX_API KX_MUST_CHECK kx_status kx_callbacks_add_backup_and_restore_every(kx_callbacks* c, const char* backup_dir,
                                                           int64_t every_n_batches);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KX_KX_H */
