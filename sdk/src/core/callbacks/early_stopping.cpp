// EarlyStopping: stops when the monitored metric has not improved by more than min_delta for
// `patience` epochs; optionally puts back the weights of the best epoch.
#include <cmath>
#include <vector>

#include "core/callbacks/builtin_callbacks.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class EarlyStopping final : public Callback {
 public:
  EarlyStopping(std::string monitor, int32_t patience, double min_delta, bool restore)
      : monitor_(std::move(monitor)), patience_(patience), min_delta_(std::fabs(min_delta)), restore_(restore),
        higher_is_better_(monitor_.find("accuracy") != std::string::npos) {}

  bool reads_batch_metrics() const override { return false; }  // epochs only
  bool on_event(const Event& e, TrainingControl& control) override {
    if (e.kind == EventKind::TrainBegin) {
      const bool val = monitor_.rfind("val_", 0) == 0;
      require(!val || control.has_validation(), Status::InvalidArgument,
              "EarlyStopping monitors \"" + monitor_ + "\" but fit has no validation data");
      require(!higher_is_better_ || control.has_accuracy(), Status::InvalidArgument,
              "EarlyStopping monitors \"" + monitor_ + "\" but the model was compiled without the accuracy metric");
      wait_ = 0;
      best_ = higher_is_better_ ? -INFINITY : INFINITY;
      best_weights_.clear();
      return false;
    }
    if (e.kind != EventKind::EpochEnd) return false;
    const double value = monitor_ == "loss"       ? e.loss
                         : monitor_ == "accuracy" ? e.accuracy
                         : monitor_ == "val_loss" ? e.val_loss
                                                  : e.val_accuracy;
    const bool improved = higher_is_better_ ? value - min_delta_ > best_ : value + min_delta_ < best_;
    if (improved) {
      best_ = value;
      wait_ = 0;
      if (restore_) best_weights_ = control.get_weights();
      return false;
    }
    if (++wait_ < patience_) return false;
    if (restore_ && !best_weights_.empty()) control.set_weights(best_weights_);
    return true;
  }

 private:
  std::string monitor_;
  int32_t patience_;
  double min_delta_;
  bool restore_;
  bool higher_is_better_;
  int32_t wait_ = 0;
  double best_ = INFINITY;
  std::vector<float> best_weights_;
};

}  // namespace

std::shared_ptr<Callback> make_early_stopping(const std::string& monitor, int32_t patience, double min_delta,
                                              bool restore_best_weights) {
  require(monitor == "loss" || monitor == "accuracy" || monitor == "val_loss" || monitor == "val_accuracy",
          Status::InvalidArgument,
          "EarlyStopping: unknown monitor \"" + monitor + "\" (loss, accuracy, val_loss or val_accuracy)");
  require(patience >= 0, Status::InvalidArgument, "EarlyStopping: patience must be >= 0");
  require(std::isfinite(min_delta), Status::InvalidArgument, "EarlyStopping: min_delta must be finite");
  return std::make_shared<EarlyStopping>(monitor, patience, min_delta, restore_best_weights);
}

}  // namespace kx::core
