// Learning-rate schedules, as Keras's LearningRateScheduler (step decay per epoch) and CosineDecay
// (per global step). Both are functions of the position alone, so a resumed fit continues them.
#include <cmath>

#include "core/callbacks/builtin_callbacks.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class StepDecaySchedule final : public Callback {
 public:
  explicit StepDecaySchedule(StepDecay s) : s_(s) {}
  bool reads_batch_metrics() const override { return false; }  // epochs and step counts only
  bool on_event(const Event& e, TrainingControl& control) override {
    if (e.kind == EventKind::EpochBegin)
      control.set_learning_rate(control.initial_learning_rate() * std::pow(s_.factor, e.epoch / s_.every_epochs));
    return false;
  }

 private:
  StepDecay s_;
};

class CosineDecaySchedule final : public Callback {
 public:
  explicit CosineDecaySchedule(CosineDecay c) : c_(c) {}
  bool reads_batch_metrics() const override { return false; }  // epochs and step counts only
  bool on_event(const Event& e, TrainingControl& control) override {
    // The rate of the next step: set before the first one, then after each.
    if (e.kind != EventKind::TrainBegin && e.kind != EventKind::BatchEnd) return false;
    const double step = static_cast<double>(std::min(std::max<int64_t>(e.global_step, 0), c_.decay_steps));
    const double cosine = 0.5 * (1 + std::cos(M_PI * step / static_cast<double>(c_.decay_steps)));
    control.set_learning_rate(control.initial_learning_rate() * ((1 - c_.alpha) * cosine + c_.alpha));
    return false;
  }

 private:
  CosineDecay c_;
};

}  // namespace

std::shared_ptr<Callback> make_step_decay(const StepDecay& s) {
  require(std::isfinite(s.factor) && s.factor > 0 && s.factor <= 1, Status::InvalidArgument,
          "step decay: factor must be in (0, 1]");
  require(s.every_epochs > 0, Status::InvalidArgument, "step decay: every_epochs must be > 0");
  return std::make_shared<StepDecaySchedule>(s);
}

std::shared_ptr<Callback> make_cosine_decay(const CosineDecay& c) {
  require(c.decay_steps > 0, Status::InvalidArgument, "cosine decay: decay_steps must be > 0");
  require(std::isfinite(c.alpha) && c.alpha >= 0 && c.alpha <= 1, Status::InvalidArgument,
          "cosine decay: alpha must be in [0, 1]");
  return std::make_shared<CosineDecaySchedule>(c);
}

}  // namespace kx::core
