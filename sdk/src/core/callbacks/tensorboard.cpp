// TensorBoard: Keras's callback of that name. Scalars of each epoch go to log_dir/train ("epoch_loss",
// "epoch_accuracy", "epoch_learning_rate") and log_dir/validation ("epoch_loss", "epoch_accuracy" of
// the validation data), at step = epoch; with update_freq N, "batch_<metric>" scalars every N batches
// at step = the global batch count; with histogram_freq N, the weights' histograms every N epochs.
#include <cmath>
#include <optional>

#include "core/callbacks/builtin_callbacks.hpp"
#include "io/event_file.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class TensorBoard final : public Callback {
 public:
  TensorBoard(std::string log_dir, int64_t update_freq, int32_t histogram_freq)
      : log_dir_(std::move(log_dir)), update_freq_(update_freq), histogram_freq_(histogram_freq) {}

  // Batch scalars are the running means of the epoch: read only when they are written.
  bool reads_batch_metrics() const override { return update_freq_ > 0; }

  bool on_event(const Event& e, TrainingControl& control) override {
    switch (e.kind) {
      case EventKind::TrainBegin:
        // Each fit writes new files, as Keras's writers do for each run.
        train_.emplace(log_dir_ + "/train");
        validation_.reset();
        if (control.has_validation()) validation_.emplace(log_dir_ + "/validation");
        break;
      case EventKind::BatchEnd:
        if (train_ && update_freq_ > 0 && e.global_step > 0 && e.global_step % update_freq_ == 0) {
          write_metrics(*train_, "batch_", e.loss, e.accuracy, control, e.global_step);
          train_->scalar("batch_learning_rate", control.learning_rate(), e.global_step);
          train_->flush();
        }
        break;
      case EventKind::EpochEnd:
        if (!train_) break;
        write_metrics(*train_, "epoch_", e.loss, e.accuracy, control, e.epoch);
        train_->scalar("epoch_learning_rate", control.learning_rate(), e.epoch);
        if (histogram_freq_ > 0 && e.epoch % histogram_freq_ == 0)
          for (const auto& w : control.named_weights())
            train_->histogram(w.name + "/histogram", w.values.data(), w.values.size(), e.epoch);
        train_->flush();
        if (validation_) {
          write_metrics(*validation_, "epoch_", e.val_loss, e.val_accuracy, control, e.epoch);
          validation_->flush();
        }
        break;
      case EventKind::TrainEnd:
        train_.reset();
        validation_.reset();
        break;
      default:
        break;
    }
    return false;
  }

 private:
  static void write_metrics(io::EventFile& f, const std::string& prefix, double loss, double accuracy,
                            const TrainingControl& control, int64_t step) {
    if (!std::isnan(loss)) f.scalar(prefix + "loss", loss, step);
    if (control.has_accuracy() && !std::isnan(accuracy)) f.scalar(prefix + "accuracy", accuracy, step);
  }

  std::string log_dir_;
  int64_t update_freq_;
  int32_t histogram_freq_;
  std::optional<io::EventFile> train_, validation_;
};

}  // namespace

std::shared_ptr<Callback> make_tensorboard(const std::string& log_dir, int64_t update_freq, int32_t histogram_freq) {
  require(!log_dir.empty(), Status::InvalidArgument, "TensorBoard: the log directory is empty");
  require(update_freq >= 0, Status::InvalidArgument,
          "TensorBoard: update_freq must be >= 0 (0: once per epoch), got " + std::to_string(update_freq));
  require(histogram_freq >= 0, Status::InvalidArgument,
          "TensorBoard: histogram_freq must be >= 0 (0: no histograms), got " + std::to_string(histogram_freq));
  return std::make_shared<TensorBoard>(log_dir, update_freq, histogram_freq);
}

}  // namespace kx::core
