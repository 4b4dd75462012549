// The state behind kx::Model: the network, one replica per strategy device (backend, arenas, step
// plan, data feed), the pool that runs the replicas side by side and the step runner that trains them.
#pragma once
#include <exception>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "core/train/batch_decoder.hpp"
#include "core/train/data_feed.hpp"
#include "core/train/step_graphs.hpp"
#include "core/train/step_plan.hpp"
#include "core/train/step_runner.hpp"
#include "distribute/replica_pool.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "kx/model.hpp"

namespace kx {

namespace core {
class ProgressBar;
struct FitStart;
struct TrainPosition;
struct DataOrder;
}  // namespace core

// One copy of the model on one device. Replicas hold equal parameters and optimizer slots at every
// step boundary: they start from replica 0's weights and apply the same summed gradient.
struct Replica {
  std::unique_ptr<backend::Backend> be;  // declared first: destroyed after the memory it owns
  backend::DeviceBuffer params, grads, slot_m, slot_v, slot_a, slot_ema;
  backend::DeviceBuffer step_values;  // backend::StepValues of the step being taken
  // Mixed precision: the parameters rounded to the 16-bit type once per step (and per evaluate or
  // predict), which layers that autocast their weights read; and with float16, Keras's dynamic loss
  // scale (backend::LossScaleState). Empty in float32.
  backend::DeviceBuffer rounded_params, loss_scale;
  core::StepPlan plan;
  core::ReplicaFeed feed;       // where its step reads the batches of the dataset being read
  core::StepGraphCache graphs;  // last: destroyed before the memory its graphs point at

  const uint64_t* step_seed() const { return &step_values.data<backend::StepValues>()->seed; }
  const float* learning_rate() const { return &step_values.data<backend::StepValues>()->learning_rate; }
  const float* one() const { return &step_values.data<backend::StepValues>()->one; }
  const float* base_learning_rate() const { return &step_values.data<backend::StepValues>()->base_learning_rate; }
  backend::LossScaleState* loss_scale_state() const { return loss_scale.data<backend::LossScaleState>(); }
};

class Model::Impl {
 public:
  Impl(Strategy s, Shape input);
  // Destroys the replicas' recorded steps before the collective (see release_step_graphs).
  ~Impl();

  // Returns the layer's name (generated when spec has none).
  std::string add(LayerSpec spec, const std::vector<std::string>& inbound);
  // The layer called name; InvalidArgument when there is none.
  core::Layer& layer_named(const std::string& name) const;
  void set_trainable(const std::string& layer, bool trainable);
  bool trainable(const std::string& layer) const;
  WeightsReport load_weights(const std::string& path, bool skip_mismatch);
  void compile(const CompileOptions& options);
  void require_compiled(const char* what) const;
  std::string to_json() const;
  std::string summary(int line_length) const;  // as Model::summary
  TrainingMemory training_memory(int64_t batch) const;  // as Model::training_memory

  Status fit(Dataset& train, const FitOptions& o, const Callbacks* cb, History* history);
  EvalResult evaluate(const Dataset& data, int verbose = 0);
  EvalResult train_on_batch(const float* x, const float* y, int64_t n);
  EvalResult test_on_batch(const float* x, const float* y, int64_t n);
  void predict(const float* x, int64_t n, float* out);

  // Throws InvalidArgument when the dataset's samples or labels do not fit this model and loss.
  void check_dataset(const Dataset& d, const char* role) const;

  // The safetensors bytes of the model (and of the training position, for a checkpoint).
  // With finite_only (a checkpoint during fit), Diverged naming the first weight or optimizer slot
  // that holds a NaN or an infinity: such a state is never written, so the newest checkpoint stays
  // one to resume from.
  std::string encode(const core::TrainPosition* position, const core::DataOrder* order, bool finite_only = false) const;
  // Loads weights, optimizer slots and step count from a file written by encode for the same model
  // (InvalidArgument naming the first difference otherwise); the model is unchanged on any error.
  void restore(const io::SafetensorsFile& f);
  json::Value compile_config() const;
  // The model a decoded file holds, compiled as it was, on `strategy`.
  static Model load_file(const Strategy& strategy, const io::SafetensorsFile& f);
  static CompileOptions compile_options_from(const json::Value& config);

  // Keras's files (keras_file.cpp): a .keras or legacy .h5 model, the model as a .keras file, and
  // the weights of a Keras .weights.h5 / .h5 / .keras file (bytes: the file's) for load_weights.
  static Model load_keras(const Strategy& strategy, const std::string& path);
  void save_keras(const std::string& path) const;
  WeightsReport load_keras_weights(const std::string& bytes, const std::string& path, bool skip_mismatch);
  // Weights a model gets before it is compiled (one opened from a Keras file that Keras never
  // compiled): compile starts from them instead of initialising. Empty otherwise.
  std::vector<float> initial_params;

  // The weight tensors of these layers, in this order, each layer's in its own order ("dense_1/kernel",
  // shape, offset in the parameter arena; not trainable: state the optimizer never trains, no slots).
  std::vector<WeightInfo> tensors_of(const std::vector<int>& layers) const;
  // Every weight tensor in arena order: what files hold.
  std::vector<WeightInfo> named_params() const;

  // All parameters, as Model::get_weights / set_weights (set_weights checks the count).
  std::vector<float> get_weights() const;
  void set_weights(const float* w, size_t n);
  void set_weights(const std::vector<float>& w) { set_weights(w.data(), w.size()); }

  // Replica 0's parameters (which every replica equals between steps) and optimizer slots, on the host.
  std::vector<float> host_params() const;
  std::vector<float> host_slot(const backend::DeviceBuffer Replica::*slot) const;
  // Every replica's parameters := w (host memory, num_params values).
  void set_params(const float* w);

  Strategy strategy;
  core::Network net;
  CompileOptions options;
  OptimizerConfig optimizer;  // resolved
  backend::LossSpec loss_spec;
  // The backend's loss sees each sample as loss_positions rows of output_size / loss_positions values,
  // and the sample's loss and accuracy are their means: Keras takes categorical losses and accuracies
  // over the last axis at every position of the others ([H, W, C]: H * W positions). 1 where it makes
  // no difference (a rank-1 output; binary accuracy and its losses, means over every output).
  int64_t loss_positions = 1;
  bool compiled = false;
  // fit is running: a callback of it may not train, rebuild or run this model again (the step plans
  // and buffers are the fit's); Misuse naming `what` then.
  bool fitting = false;
  void require_not_fitting(const char* what) const;
  // evaluate and predict may run from a callback of the fit (as Keras allows): what they change there
  // is handed back. evaluate hands each backend's running sums of the fit's steps back as they were
  // (FitSumsHeld); the replicas' feeds may point at another dataset now (the fit stages its own again
  // before its next step).
  bool feeds_moved_by_nested_call = false;
  // Misuse where a call from a callback cannot run beside the fit: a multi-worker fit (evaluate is
  // collective, and only the chief runs callbacks) or a parameter-server one (the state is the ps
  // tasks').
  void require_nested_call_possible(const char* what) const;
  std::vector<Replica> replicas;
  int64_t optimizer_steps = 0;
  // This process's replicas among every worker's: local replica k is global replica replica_offset + k
  // of total_replicas (one worker: 0 and the local count).
  int replica_offset = 0;
  int total_replicas = 1;

  // The rows of a global batch of `rows` that this process's replicas hold.
  int64_t local_rows(int64_t rows) const;
  // Multi-worker (across_workers.cpp): true with more than one worker process.
  bool multi_worker() const;
  // sums (and *seen) summed over the workers, in rank order; unchanged with one worker. Collective:
  // every worker calls it at the same point.
  backend::LossSums sum_across_workers(backend::LossSums sums, int64_t* seen) const;
  // The chief's stop, on every worker (collective).
  bool chief_decides(bool stop) const;
  // What the chief's callbacks did at an event, on every worker (collective): returns the chief's stop;
  // takes its learning rate and, when weights_changed, its weights; a failure on the chief (failure)
  // fails every worker with its status.
  bool share_chief_decision(bool stop, bool weights_changed, const std::exception_ptr& failure);
  // At the start of a fit: InvalidArgument unless every worker starts at the chief's place; then
  // every worker takes the chief's weights and optimizer state (collective).
  void align_workers_at_start(const core::FitStart& start);
  // InvalidArgument on every worker, naming the worker and what differs, unless every worker trains the
  // same model with the same data layout and sample weights (collective).
  void require_same_training_on_every_worker(const Dataset& train, const core::SampleWeights& weights,
                                             int64_t steps) const;
  double learning_rate = 0;  // of the next step: the compiled one unless a schedule changes it

  // Mixed precision (core/train/mixed_precision.cpp). The type tensors are rounded to (None in float32).
  backend::Rounding rounding() const;
  // With float16: steps scale the loss and skip updates whose gradients overflow.
  bool loss_scaling() const { return options.precision == Precision::MixedFloat16; }
  // Queues the rounding of replica r's parameters into r.rounded_params (nothing in float32).
  void round_params(Replica& r) const;
  // How replica r's passes compute: its rounding and rounded parameters.
  core::PassPrecision pass_precision(const Replica& r) const;
  // Every replica's loss scale := scale, with good_steps finite steps behind it (loss scaling only).
  void set_loss_scale(double scale, int64_t good_steps);
  // Replica 0's loss scale state, on the host (every replica's is the same between steps).
  backend::LossScaleState host_loss_scale() const;
  std::vector<core::ArenaSpan> autocast_spans;  // the parameters that round_params rounds

  // The state moved between this model and the ps tasks (ps_state.cpp, parameter-server strategy): the whole state (weights,
  // optimizer slots, step count) out to them and back, the weights in (into every replica), a
  // gradient out, and the end of their service.
  void push_state_to_ps();
  void pull_state_from_ps();
  void pull_params_from_ps(std::vector<float>& params);
  void push_gradients_to_ps(const std::vector<float>& grads, double learning_rate);
  void say_goodbye_to_ps();
  void end_ps_service();
  // What the chief and a worker must agree on to train together, one "name=value" line each (weights:
  // the training samples' weights, from class_weight or the data).
  std::string training_fingerprint(const Dataset& train, const core::SampleWeights& weights, int64_t steps) const;

  // For the training code (core/train/): the replicas, run side by side.
  // Runs task(k) on every replica k: concurrently when there are several.
  template <class Task>
  void for_each_replica(Task task) {
    if (pool_)
      pool_->run(task);
    else
      task(0);
  }
  // Replica k's share of a global batch of `rows` rows.
  core::Slice slice(int replica, int64_t rows) const;
  // The rows of a global batch of `rows` that this process's replicas read, together (contiguous).
  core::Slice local_slice(int64_t rows) const;
  // For a decoded dataset (Dataset::decoded), the decoder of this process's rows of each batch, in the
  // order fit takes them from (pass, position); null for data in memory.
  std::unique_ptr<core::BatchDecoder> training_decoder(const Dataset& d, uint64_t pass, int64_t position) const;
  // Every replica's feed takes the next batch's samples from rows.
  void use_rows(const core::DecodedRows& rows);
  // The floats of one label: a class index per loss position for sparse categorical cross-entropy,
  // else the output's.
  int64_t label_size() const;
  // The size of the output's last axis: Keras's softmax, categorical losses and accuracies work along it.
  int64_t output_classes() const;
  // The loss sums of every replica, added in replica order; each backend's sums are then zero. Under a
  // masked output, the sums of one batch of batch_rows (this process's rows), taken after each batch.
  backend::LossSums take_loss_sums(int64_t batch_rows = 0);
  // evaluate() without check_dataset, for data that fit has already checked; bar: shows its progress.
  EvalResult evaluate_checked(const Dataset& data, core::ProgressBar* bar = nullptr);

 private:
  // The parameter-server strategy: the chief coordinates the fit (ps_fit_chief.cpp), the workers
  // train (ps_fit_worker.cpp); steps: batches per epoch, pass_steps: per pass over the data; weights:
  // the training samples' weights (class_weight or the data's), null for none.
  Status fit_as_ps_chief(Dataset& train, const core::SampleWeights& weights, const FitOptions& o, const Callbacks* cb,
                         History* history, int64_t steps, int64_t pass_steps);
  Status fit_as_ps_worker(Dataset& train, const core::SampleWeights& weights, int64_t steps, int64_t pass_steps,
                          History* history);

  // Points every replica's feed at the dataset's samples and labels, and at weights (one per stored
  // sample; null: none) when given (see core::ReplicaFeed::stage).
  void stage_dataset(const Dataset& data, const core::SampleWeights& weights);
  // Step plans for global batches of up to global_rows rows.
  void reserve_plans(int64_t global_rows);
  void init_weights(uint64_t seed);
  // Destroys every replica's recorded steps. A recorded update holds the NCCL collective's operations,
  // and NCCL's ncclCommDestroy waits until no graph holds them any more: a communicator destroyed
  // before its graphs never returns. So this runs before steps_ (which owns the collective) goes or
  // is replaced, although the replicas (declared first) would outlive it otherwise.
  void release_step_graphs() noexcept;

  std::unique_ptr<distribute::ReplicaPool> pool_;
  core::StepRunner steps_;
  bool always_stream_ = false;  // DataStreaming::Always: stream datasets even where they would fit
};

}  // namespace kx
