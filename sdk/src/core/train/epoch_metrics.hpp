// The running loss and accuracy of the epoch in progress, from the loss sums of its batches however
// they arrive: read from this process's replicas (fit_loop.cpp) or reported by parameter-server
// workers (ps_fit_chief.cpp). As Keras: the loss is the weighted sum over the samples seen, the
// accuracy the weighted mean (the correct sum over the weight sum).
#pragma once
#include <cmath>
#include <cstdint>

#include "backend/backend.hpp"
#include "core/callbacks/progress_bar.hpp"
#include "core/train/train_position.hpp"

namespace kx::core {

class EpochMetrics {
 public:
  explicit EpochMetrics(bool accuracy) : accuracy_(accuracy) {}

  // A new epoch, from these sums (a checkpoint's, when it resumes part-way).
  void begin(const backend::LossSums& sums, int64_t seen);
  // The sums of `rows` more samples.
  void add(const backend::LossSums& sums, int64_t rows);
  // The epoch's sums become these (every worker's, say), and the running means theirs.
  void set_totals(const backend::LossSums& sums, int64_t seen);

  const backend::LossSums& sums() const { return sums_; }
  int64_t seen() const { return seen_; }
  // The means as of the last add (NaN before the first), as BatchEnd events and the bar show them.
  double loss() const { return loss_; }
  double accuracy() const { return acc_; }
  // The epoch's means over what was added (NaN when nothing was).
  double mean_loss() const;
  double mean_accuracy() const;
  // The running means as the progress bar lists them.
  void write_metrics(Metrics& m) const;
  // Into a training position, as a checkpoint records it.
  void write_sums(TrainPosition& p) const;

 private:
  bool accuracy_;
  backend::LossSums sums_;
  int64_t seen_ = 0;
  double loss_ = std::nan(""), acc_ = std::nan("");
};

}  // namespace kx::core
