// Training events, callbacks and the per-epoch history, as Keras's callbacks and History: user
// functions, and the built-in ModelCheckpoint, EarlyStopping, CSVLogger, TerminateOnNaN and
// learning-rate schedules.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kx {

enum class EventKind { TrainBegin = 0, EpochBegin = 1, BatchEnd = 2, EpochEnd = 3, TrainEnd = 4, CheckpointSaved = 5 };

struct Event {
  EventKind kind = EventKind::TrainBegin;
  int32_t epoch = -1;
  int64_t step = -1;
  int64_t steps_per_epoch = -1;
  int64_t global_step = -1;  // batches trained since the start (across resumes)
  double loss = NAN;
  double accuracy = NAN;
  double val_loss = NAN;
  double val_accuracy = NAN;
  std::string path;
  // BatchEnd: this batch's own loss and accuracy (the running means are loss and accuracy), when the
  // step's loss was read for the event (callbacks that read batch metrics); NaN otherwise.
  double batch_loss = NAN;
  double batch_accuracy = NAN;
  // The learning rate of the next step (the compiled rate, or what a schedule or callback set).
  double learning_rate = NAN;
};

// What a built-in callback may do to the fit it watches. Only valid during on_event.
class TrainingControl {
 public:
  virtual ~TrainingControl() = default;
  // Writes a checkpoint of the state right after the current event (durably), then sends
  // CheckpointSaved to every callback.
  virtual void save_checkpoint(const std::string& path) = 0;
  virtual std::vector<float> get_weights() const = 0;
  virtual void set_weights(const std::vector<float>& w) = 0;
  virtual double initial_learning_rate() const = 0;
  // The rate of the next step: the compiled one unless a schedule or callback changed it.
  virtual double learning_rate() const = 0;
  virtual void set_learning_rate(double lr) = 0;
  virtual bool has_validation() const = 0;
  virtual bool has_accuracy() const = 0;
  // Every weight tensor by name ("dense/kernel") with its values, in Keras's model.weights order.
  struct NamedTensor {
    std::string name;
    std::vector<float> values;
  };
  virtual std::vector<NamedTensor> named_weights() const = 0;
};

class Callback {
 public:
  virtual ~Callback() = default;
  // Returns true to stop training; throws kx::Error to fail it.
  virtual bool on_event(const Event& e, TrainingControl& control) = 0;
  // Whether on_event reads the loss and accuracy of BatchEnd events. A GPU step runs ahead of the host:
  // kx waits for its loss only when a callback reads it, the progress bar redraws or the epoch ends.
  // A callback that acts on epochs, or on steps without their metrics, returns false; BatchEnd events
  // then carry the latest loss read, which may be some steps old.
  virtual bool reads_batch_metrics() const { return true; }
  // Whether the epoch's logs carry "learning_rate" (history, progress bar), as Keras's learning-rate
  // callbacks add it.
  virtual bool logs_learning_rate() const { return false; }
  // A checkpoint (file or directory) fit should resume from before anything else: BackupAndRestore's
  // backup of an interrupted fit. Empty for none.
  virtual std::string backup_to_resume() const { return {}; }
};

// Returns true to stop training.
using CallbackFn = std::function<bool(const Event&)>;

// Keras's learning-rate schedules.
struct StepDecay {
  double factor = 0.5;         // lr = initial * factor^floor(epoch / every_epochs)
  int32_t every_epochs = 10;
};
struct CosineDecay {
  int64_t decay_steps = 1000;  // lr = initial * ((1 - alpha) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2 + alpha)
  double alpha = 0.0;
};

// Keras's ReduceLROnPlateau, with its defaults.
struct ReduceLrOnPlateau {
  enum class Mode { Auto = 0, Min = 1, Max = 2 };  // Auto: Max when the monitor's name has "acc"
  std::string monitor = "val_loss";                // loss, accuracy, val_loss or val_accuracy
  double factor = 0.1;                             // new rate = rate * factor, in [0, 1)
  int32_t patience = 10;                           // epochs without improvement before a reduction
  Mode mode = Mode::Auto;
  double min_delta = 1e-4;                         // an improvement beats the best by more than this
  int32_t cooldown = 0;                            // epochs after a reduction before counting again
  double min_lr = 0;                               // the rate never goes below it
};

// Keras's LearningRateScheduler: the rate of epoch `epoch` (0-based, counting initial_epoch) from the
// current one (as float32, as Keras reads its variable).
using LearningRateFn = std::function<double(int32_t epoch, double lr)>;

class Callbacks {
 public:
  // reads_batch_metrics false: fn does not read BatchEnd's loss and accuracy (see Callback).
  void add(CallbackFn fn, bool reads_batch_metrics = true);
  void add(std::shared_ptr<Callback> cb);

  // ModelCheckpoint. path_template fields: {epoch} (1-based, as Keras), {step} (global batch count),
  // {loss}, {val_loss}, each with an optional printf-like format: {epoch:02d}, {loss:.4f}.
  // every_n_batches 0 = at the end of every epoch; keep_last 0 = keep every file. Throws
  // InvalidArgument for an unknown field or format.
  void add_model_checkpoint(const std::string& path_template, int64_t every_n_batches, int32_t keep_last);
  // EarlyStopping on "loss", "accuracy", "val_loss" or "val_accuracy" (lower is better for losses,
  // higher for accuracies).
  void add_early_stopping(const std::string& monitor, int32_t patience, double min_delta, bool restore_best_weights);
  // One CSV row per epoch: epoch,<metrics in name order>. append: keep what the file holds.
  void add_csv_logger(const std::string& path, bool append);
  // Keras's TensorBoard: event files under log_dir/train and log_dir/validation with the epoch's
  // "epoch_<metric>" scalars (and "epoch_learning_rate") at step = epoch; update_freq N > 0 adds
  // "batch_<metric>" scalars every N batches at step = global batch count; histogram_freq N > 0 adds a
  // histogram of each weight tensor every N epochs. Throws InvalidArgument for a negative frequency.
  void add_tensorboard(const std::string& log_dir, int64_t update_freq, int32_t histogram_freq);
  // A non-finite batch loss ends fit with Status::Diverged before any callback sees that batch, so the
  // last checkpoint written stays the last good one.
  void add_terminate_on_nan() { terminate_on_nan_ = true; }
  void add_step_decay(const StepDecay& s);
  void add_cosine_decay(const CosineDecay& c);
  void add_reduce_lr_on_plateau(const ReduceLrOnPlateau& r);
  void add_learning_rate_scheduler(LearningRateFn fn);
  // Keras's BackupAndRestore: a checkpoint in backup_dir at each epoch's end (every_n_batches 0) or
  // every N global batches, the older one deleted once the new one is durable; a fit with this
  // callback resumes from it (at the next batch), and a fit that completes (or a callback stops)
  // deletes backup_dir.
  void add_backup_and_restore(const std::string& backup_dir, int64_t every_n_batches = 0);

  // Calls every callback in order; true if any asked to stop.
  bool dispatch(const Event& e, TrainingControl& control) const;
  bool empty() const { return callbacks_.empty(); }
  // True when a callback reads BatchEnd metrics (Callback::reads_batch_metrics), or TerminateOnNaN is on.
  bool reads_batch_metrics() const;
  bool terminate_on_nan() const { return terminate_on_nan_; }
  // Callback::logs_learning_rate of any callback; the first non-empty Callback::backup_to_resume.
  bool logs_learning_rate() const;
  std::string backup_to_resume() const;

 private:
  std::vector<std::shared_ptr<Callback>> callbacks_;
  bool terminate_on_nan_ = false;
};

class History {
 public:
  void record(const std::string& name, double value) { values_[name].push_back(value); }
  void finish_epoch(int32_t epoch) { epochs_.push_back(epoch); }
  int32_t num_epochs() const { return static_cast<int32_t>(epochs_.size()); }
  // Throws InvalidArgument for an unknown name or index.
  double get(const std::string& name, int32_t index) const;
  const std::map<std::string, std::vector<double>>& values() const { return values_; }

 private:
  std::vector<int32_t> epochs_;
  std::map<std::string, std::vector<double>> values_;
};

}  // namespace kx
