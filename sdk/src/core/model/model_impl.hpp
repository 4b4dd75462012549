// The state behind kx::Model: the network, one replica per strategy device (backend, arenas, step
// plan), and the pool and collective that keep the replicas in sync.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.hpp"
#include "core/callbacks/progress_bar.hpp"
#include "core/train/step_graphs.hpp"
#include "core/train/step_plan.hpp"
#include "distribute/collective.hpp"
#include "distribute/replica_pool.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "kx/model.hpp"

namespace kx {

namespace core {
struct TrainPosition;
struct DataOrder;
}  // namespace core

// A dataset's samples and labels copied to a device.
struct CachedDataset {
  std::weak_ptr<const DatasetStorage> storage;
  backend::DeviceBuffer x, y;
};
inline constexpr size_t kCachedDatasets = 2;  // training and validation data

// One copy of the model on one device. Replicas hold equal parameters and optimizer slots at every
// step boundary: they start from replica 0's weights and apply the same summed gradient.
struct Replica {
  std::unique_ptr<backend::Backend> be;  // declared first: destroyed after the memory it owns
  backend::DeviceBuffer params, grads, slot_m, slot_v, slot_ema;
  backend::DeviceBuffer step_values;  // backend::StepValues of the step being taken
  core::StepPlan plan;
  // The samples and labels of the dataset being read, where the backend reads them: the host storage
  // itself on the CPU, else a copy in device memory, kept for the next call that reads the same data.
  const float* x_src = nullptr;
  const float* y_src = nullptr;
  std::vector<CachedDataset> cache;
  // A dataset that does not fit in device memory is read through two rings of page-locked slots
  // instead (samples, labels), each batch gathered on the host and copied beside the compute.
  static constexpr int kRingSlots = 2;
  std::shared_ptr<const DatasetStorage> streamed;  // the dataset read so, if any
  std::unique_ptr<backend::TransferRing> ring_x, ring_y;
  int64_t ring_rows = 0;  // samples per slot
  int next_slot = 0, fed_slot = -1;
  std::vector<int64_t> ring_index;
  core::StepGraphCache graphs;  // last: destroyed before the memory its graphs point at

  const uint64_t* step_seed() const { return &step_values.data<backend::StepValues>()->seed; }
  const float* learning_rate() const { return &step_values.data<backend::StepValues>()->learning_rate; }
  const float* one() const { return &step_values.data<backend::StepValues>()->one; }
};

// Rows [first, first + rows) of a global batch belong to one replica.
struct Slice {
  int64_t first = 0, rows = 0;
};

class Model::Impl {
 public:
  Impl(Strategy s, Shape input);

  void add(LayerSpec spec, const std::vector<std::string>& inbound);
  // The layer called name; InvalidArgument when there is none.
  core::Layer& layer_named(const std::string& name) const;
  void set_trainable(const std::string& layer, bool trainable);
  bool trainable(const std::string& layer) const;
  WeightsReport load_weights(const std::string& path, bool skip_mismatch);
  void compile(const CompileOptions& options);
  void require_compiled(const char* what) const;
  std::string to_json() const;

  Status fit(Dataset& train, const FitOptions& o, const Callbacks* cb, History* history);
  EvalResult evaluate(const Dataset& data);
  void predict(const float* x, int64_t n, float* out);

  // Throws InvalidArgument when the dataset's samples or labels do not fit this model and loss.
  void check_dataset(const Dataset& d, const char* role) const;

  // The safetensors bytes of the model (and of the training position, for a checkpoint).
  std::string encode(const core::TrainPosition* position, const core::DataOrder* order) const;
  // Loads weights, optimizer slots and step count from a file written by encode for the same model
  // (InvalidArgument naming the first difference otherwise); the model is unchanged on any error.
  void restore(const io::SafetensorsFile& f);
  json::Value compile_config() const;
  // The model a decoded file holds, compiled as it was, on `strategy`.
  static Model load_file(const Strategy& strategy, const io::SafetensorsFile& f);
  static CompileOptions compile_options_from(const json::Value& config);

  struct NamedSlice {
    std::string name;  // "dense_1/kernel"
    Shape shape;
    int64_t offset;    // in the parameter arena
    bool trainable;    // false for state the optimizer never trains (moving statistics): no slots
  };
  std::vector<NamedSlice> named_params() const;

  // All parameters, as Model::get_weights / set_weights (set_weights checks the count).
  std::vector<float> get_weights() const;
  void set_weights(const std::vector<float>& w);

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
  bool compiled = false;
  std::vector<Replica> replicas;
  int64_t optimizer_steps = 0;
  double learning_rate = 0;  // of the next step: the compiled one unless a schedule changes it

 private:
  // The checkpoint to resume from: the file, or the newest that loads cleanly in a directory; nullopt
  // (and a message) when there is none.
  std::optional<io::SafetensorsFile> find_checkpoint(const std::string& from, core::ProgressBar& bar);
  // evaluate() without check_dataset, for data that fit has already checked.
  EvalResult evaluate_checked(const Dataset& data);
  // One optimizer step on the global batch of `rows` samples gathered by storage index. Its loss is
  // added to the backends' sums, read with take_loss_sums.
  void train_step(const int64_t* idx, int64_t rows);
  // Points every replica at the dataset's samples and labels, copying them to device memory first
  // where the backend cannot read the host's.
  void stage_dataset(const Dataset& data);
  // Makes one replica's slice of the batch (storage indices idx + s.first ...) readable by its step:
  // the indices copied to its plan, and for a streamed dataset the samples copied to a ring slot.
  void feed_batch(Replica& r, const int64_t* idx, Slice s);
  // After the step that read the batch fed last is queued: its ring slot may be refilled.
  void release_batch(Replica& r);
  // Stages data on r through rings (streaming) instead of a device copy.
  void stream_dataset(Replica& r, const std::shared_ptr<const DatasetStorage>& storage);
  // Gathers one replica's slice of the batch (its uploaded indices) from the staged dataset and runs
  // forward and the loss, adding to the backend's loss sums; in training also dL/d(output), scaled by
  // grad_scale.
  void replica_forward_loss(Replica& r, Slice s, bool training, float grad_scale);
  // Forward, loss and backward of one replica's slice; the loss is scaled by 1 / global rows.
  void replica_forward_backward(Replica& r, Slice s, int64_t global_rows);
  // The loss sums of every replica, added in replica order; each backend's sums are then zero.
  backend::LossSums take_loss_sums();
  // The update of step number t (1 for the first), with the rate of the replica's StepValues.
  void replica_optimizer(Replica& r, int64_t t);
  // The StepValues of step number t.
  backend::StepValues step_values(int64_t t) const;
  // Runs part `part` of a step on replica k: replayed from a recorded graph where the backend can.
  template <class Body>
  void run_step_part(int k, int part, int64_t global_rows, Body&& body);
  // use_ema: the trained weights := their moving average (when fit ends).
  void finalize_ema();
  // The arena spans the optimizer updates, for the network's current revision.
  void refresh_spans();
  uint64_t spans_revision_ = ~uint64_t{0};
  std::vector<core::ArenaSpan> trained_spans_, state_spans_;
  // Runs task(k) on every replica k: concurrently when there are several.
  template <class Task>
  void for_each_replica(Task task) {
    if (pool_)
      pool_->run(task);
    else
      task(0);
  }
  Slice slice(int replica, int64_t rows) const;
  void reserve_plans(int64_t global_rows);
  void init_weights(uint64_t seed);
  int64_t label_size() const;

  std::unique_ptr<distribute::ReplicaPool> pool_;
  std::unique_ptr<distribute::Collective> collective_;
  bool step_graphs_ = true;  // record steps as graphs where the backends and the collective can
  bool always_stream_ = false;  // KX_DATA_STREAMING=always: stream datasets even where they would fit
};

}  // namespace kx
