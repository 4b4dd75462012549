// What one ps task holds: a contiguous range of the flat parameter arena with its optimizer slots and
// step count, and the optimizer update it applies to each gradient pushed by a worker (the backend's
// own Adam / SGD kernels, as the step runner applies them on a replica).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "kx/optimizer.hpp"

namespace kx::distribute {

struct ShardSpan {
  int64_t first = 0, count = 0;  // within the shard
};

// The state of a shard as it travels between the chief and a ps (Init, PullState) and sits in a ps.
struct ShardState {
  OptimizerKind optimizer = OptimizerKind::Adam;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-7, momentum = 0;
  int64_t step = 0;                     // updates applied so far (Adam's t of the last one)
  std::vector<ShardSpan> trained;       // what the optimizer trains
  std::vector<ShardSpan> state;         // state such as moving statistics: the "gradient" is the step
  std::vector<float> params, m, v;      // m, v: empty when the optimizer keeps no such slot

  std::vector<char> encode() const;
  // InvalidArgument when the bytes are not a ShardState (a build mismatch).
  static ShardState decode(const std::vector<char>& bytes);
};

class PsShard {
 public:
  // threads: the CPU threads of the optimizer update (0 = every core).
  explicit PsShard(int threads);
  // Replaces the whole state (the chief's, at the start of a fit).
  void reset(ShardState s);
  bool ready() const { return ready_; }
  const ShardState& state() const { return s_; }
  // One optimizer step with this gradient (shard-sized) at the given learning rate; returns the step
  // count after it. InvalidArgument when the gradient's size is not the shard's.
  int64_t apply(const float* grad, size_t count, float learning_rate);

 private:
  ShardState s_;
  bool ready_ = false;
  std::unique_ptr<backend::Backend> be_;
};

}  // namespace kx::distribute
