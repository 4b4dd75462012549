// One fit as its callbacks, its history and its progress bar see it, whichever strategy runs the
// steps: the events (every one with the learning rate and the steps per epoch), the epoch's running
// loss and accuracy, TerminateOnNaN, the end of an epoch (the history's loss and accuracy, validation,
// the learning rate logged, the bar's epoch line) and checkpoints. Keras's CallbackList adds History
// and ProgbarLogger to every fit; here every loop drives one session: fit_loop.cpp for the strategies
// whose steps run in this process's replicas, ps_fit_chief.cpp for the parameter-server chief, whose
// workers report their batches' loss sums. Each loop's subclass says where the live model state is.
#pragma once
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/callbacks/progress_bar.hpp"
#include "core/train/epoch_metrics.hpp"
#include "core/train/train_position.hpp"
#include "kx/callback.hpp"
#include "kx/model.hpp"

namespace kx::core {

// The loss sums of one batch of `rows` samples, for its BatchEnd event.
struct BatchSums {
  backend::LossSums sums;
  int64_t rows = 0;
};

class FitSession : public TrainingControl {
 public:
  // callbacks: null where this process runs none (a worker that is not the chief); history: null for
  // none; verbose: the bar's (0 where this process shows none); steps: batches per epoch.
  FitSession(Model::Impl& model, const Callbacks* callbacks, History* history, const Dataset& train,
             const FitOptions& options, int64_t steps, int verbose);

  ProgressBar& bar() { return bar_; }
  bool has_callbacks() const { return callbacks_ && !callbacks_->empty(); }

  // An event of this fit: its kind and place, with the steps per epoch, the global step and the
  // learning rate of the next step.
  Event event(EventKind kind, int32_t epoch = -1, int64_t step = -1) const;
  // Sends e to every callback; true if one asked to stop.
  bool emit(const Event& e);

  // A new epoch's running figures (a checkpoint's sums when it resumes part-way), then its bar.
  void begin_epoch(const backend::LossSums& sums, int64_t seen);
  void show_epoch_begin(int32_t epoch, int64_t first_step);
  // The running figures as of `step`, on the bar when it is due to redraw.
  void show_progress(int64_t step);
  // TerminateOnNaN's failure when it is on and the loss sum just read is not finite; null otherwise.
  std::exception_ptr divergence(double loss_sum, int32_t epoch, int64_t step) const;
  // BatchEnd at `step`, with the running figures and, when known, the batch's own.
  Event batch_end(int32_t epoch, int64_t step, const std::optional<BatchSums>& batch) const;
  // The end of an epoch from its figures: the history (with `history_extras`, a strategy's own keys),
  // validation unless training was stopped, the learning rate where a callback logs it, the bar's
  // line. Returns the EpochEnd event for the callbacks.
  Event end_epoch(int32_t epoch, bool stopped, const Metrics& history_extras = {});

  // TrainingControl
  void save_checkpoint(const std::string& path) override;
  std::vector<float> get_weights() const override;
  void set_weights(const std::vector<float>& w) override;
  double initial_learning_rate() const override;
  double learning_rate() const override;
  void set_learning_rate(double lr) override;
  std::vector<NamedTensor> named_weights() const override;
  bool has_validation() const override;
  bool has_accuracy() const override;

  // Kept current by the loop: what a checkpoint written now records.
  TrainPosition position;
  EpochMetrics metrics;
  const DataOrder order;

 protected:
  // The model's state is brought up to date before it is read (weights, a checkpoint).
  virtual void fetch_state() const {}
  // A callback replaced the weights of the model.
  virtual void weights_replaced() {}
  // What a checkpoint written now records: the position, with the epoch's running sums.
  virtual TrainPosition checkpoint_position();

  Model::Impl& model_;

 private:
  const Callbacks* callbacks_;
  History* history_;
  const FitOptions& options_;
  const int64_t steps_;
  ProgressBar bar_;
  Metrics shown_;  // the bar's figures as of the last progress shown, and then the epoch's line
};

}  // namespace kx::core
