#include "core/train/epoch_metrics.hpp"

namespace kx::core {

void EpochMetrics::begin(const backend::LossSums& sums, int64_t seen) {
  sums_ = sums;
  seen_ = seen;
  loss_ = acc_ = std::nan("");
}

void EpochMetrics::add(const backend::LossSums& sums, int64_t rows) {
  sums_ += sums;
  seen_ += rows;
  loss_ = sums_.loss / static_cast<double>(seen_);
  acc_ = accuracy_ ? sums_.accuracy() : std::nan("");
}

void EpochMetrics::set_totals(const backend::LossSums& sums, int64_t seen) {
  sums_ = sums;
  seen_ = seen;
  loss_ = mean_loss();
  acc_ = mean_accuracy();
}

double EpochMetrics::mean_loss() const {
  return seen_ > 0 ? sums_.loss / static_cast<double>(seen_) : std::nan("");
}

double EpochMetrics::mean_accuracy() const { return accuracy_ && seen_ > 0 ? sums_.accuracy() : std::nan(""); }

void EpochMetrics::write_metrics(Metrics& m) const {
  m.clear();
  if (accuracy_) m.emplace_back("accuracy", acc_);
  m.emplace_back("loss", loss_);
}

void EpochMetrics::write_sums(TrainPosition& p) const {
  p.loss_sum = sums_.loss;
  p.correct_sum = sums_.correct;
  p.weight_sum = sums_.weight;
  p.seen = seen_;
}

}  // namespace kx::core
