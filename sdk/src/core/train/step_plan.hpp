// The static plan of one replica's step: every activation and gradient buffer for up to `capacity`
// samples, allocated once in one arena where buffers whose lifetimes do not overlap share memory
// (step_arena.hpp), and the forward and backward passes over them. Parameters and their gradients
// live in two flat arenas with the same offsets.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "backend/seed_mix.hpp"
#include "core/layers/layer.hpp"
#include "core/model/network.hpp"
#include "core/train/step_arena.hpp"
#include "kx/tensor.hpp"

namespace kx::core {

// Mixed precision in one pass: the 16-bit type every tensor between layers is rounded to, and the
// parameters rounded to it once per step (read by the layers that autocast their weights). Float32:
// None and null.
struct PassPrecision {
  backend::Rounding rounding = backend::Rounding::None;
  const float* rounded_params = nullptr;
};

class StepPlan {
 public:
  // (Re)allocates for up to max_rows samples in be's memory; a no-op when the capacity already suffices.
  void reserve(backend::Backend& be, const Network& net, int64_t max_rows, int64_t label_size);
  int64_t capacity() const { return capacity_; }
  // Changes whenever reserve reallocates (every buffer then moves).
  uint64_t generation() const { return generation_; }
  // The bytes of the arena reserve allocated last (0 before).
  int64_t arena_bytes() const { return static_cast<int64_t>(arena_.bytes()); }
  // The bytes of a batch's labels, storage indices and sample weights, for `rows` samples.
  static int64_t batch_bytes(int64_t rows, int64_t label_size);

  float* input() { return act_.front(); }
  float* labels() { return labels_.data(); }
  // The sample weights of the batch (one per sample), where the step gathers them when there are any.
  float* weights() { return weights_.data(); }
  // The storage index of every sample of the batch, in be's memory, where the step reads it.
  int64_t* batch_index() { return batch_index_.data<int64_t>(); }
  float* output() { return act_.back(); }
  // The Keras mask the output carries, [rows, steps] (in a scratch), or null: the loss leaves its masked
  // steps out. With it, mask_weights() holds each step's sample weight times its mask, and
  // mask_counts() four floats: this replica's unmasked steps, the global batch's (summed across the
  // replicas), that + a tiny epsilon, and the gradient's factor (StepRunner).
  const float* output_mask() const { return output_mask_; }
  float* mask_weights() { return mask_weights_.data(); }
  float* mask_counts() { return mask_counts_.data(); }
  float* output_grad() { return grad_.back(); }

  // rows samples that start at first_row of the global batch (0 unless replicas split it).
  // step_seed: the step's seed in be's memory (read by dropout in training).
  // The input is rounded to mp's type first, and so is every layer's output.
  void forward(backend::Backend& be, const Network& net, const float* params, int64_t rows, bool training,
               const uint64_t* step_seed, int64_t first_row = 0, const PassPrecision& mp = {});
  // Needs output_grad() filled with dL/d(output) (rounded to mp's type) and the buffers of the forward
  // pass just before. batch_share: rows / the global batch's rows.
  void backward(backend::Backend& be, const Network& net, const float* params, float* grads, int64_t rows,
                float batch_share = 1.0f, const PassPrecision& mp = {});

 private:
  // The parameters layer i reads: rounded ones when it autocasts them under a mixed policy.
  static const float* layer_params(const Network& net, size_t i, const float* params, const PassPrecision& mp);
  // Where layer i writes its output's column moments (Network::share_moments): the scratch of the
  // BatchNormalization reading it, when that takes batch statistics in this pass; else null.
  float* shared_moments(const Network& net, size_t i, bool training) const;
  // grad[t] += extra, after the first consumer of tensor t ran backward (the other consumers wrote
  // their share into extra buffers before).
  struct PendingSum {
    int tensor;
    float* extra;
  };
  int64_t capacity_ = 0;
  int64_t label_size_ = 0;
  uint64_t revision_ = 0;
  uint64_t generation_ = 0;
  backend::DeviceBuffer arena_;
  std::vector<backend::DeviceBuffer> scratch_storage_;
  std::vector<float*> act_;                    // act_[t]: tensor t
  std::vector<float*> grad_;                   // grad_[t]: dL/d tensor t, null where nothing needs it
  std::vector<std::vector<float*>> edge_grad_; // edge_grad_[i][k]: where layer i writes dL/d input k
  std::vector<std::vector<PendingSum>> sums_after_;  // per layer, run after its backward
  std::vector<float*> scratch_;                // per layer
  std::vector<std::vector<const float*>> masks_;  // masks_[i][k]: input k's mask (in a scratch), or null
  std::vector<float*> forward_workspace_, backward_workspace_;  // per layer
  // The test hook zero_dead_buffers: per layer, what dies with its forward and with its backward.
  struct DeadSpan {
    float* at;
    size_t bytes;
  };
  std::vector<std::vector<DeadSpan>> dead_after_forward_, dead_after_backward_;
  void zero(backend::Backend& be, const std::vector<DeadSpan>& spans) const;
  backend::DeviceBuffer labels_, batch_index_, weights_, mask_weights_, mask_counts_;
  const float* output_mask_ = nullptr;
};

// A counter-based 64-bit mix, the root of every seed kx derives (shared with the device kernels).
using backend::mix_seed;

}  // namespace kx::core
