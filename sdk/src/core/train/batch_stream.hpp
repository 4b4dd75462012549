// The training batches: a stream of passes over the data, pass p shuffled with the seed of p, so that
// the order depends only on the dataset and how many batches came before (what resume relies on).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kx/dataset.hpp"

namespace kx::core {

class BatchStream {
 public:
  BatchStream(const Dataset& data, uint64_t pass, int64_t position)
      : data_(data), pass_steps_(data.batches_per_pass()), pass_(pass), position_(position), order_(data.order(pass)) {}

  struct Batch {
    const int64_t* idx;  // storage indices
    int64_t rows;
    uint64_t pass;  // the pass it belongs to
  };
  Batch next() {
    if (position_ == pass_steps_) {
      order_ = data_.order(++pass_);
      position_ = 0;
    }
    const int64_t first = position_++ * data_.batch_size();
    return {order_.data() + first, std::min(data_.batch_size(), data_.num_samples() - first), pass_};
  }
  // Where the next batch comes from.
  uint64_t pass() const { return pass_; }
  int64_t position() const { return position_; }

 private:
  Dataset data_;  // a copy (it shares the storage): the stream may outlive the caller's dataset
  int64_t pass_steps_;
  uint64_t pass_;
  int64_t position_;  // batches of the pass taken
  std::vector<int64_t> order_;
};

}  // namespace kx::core
