// evaluate and predict: the model's forward pass over a dataset or an array, without training.
#include <algorithm>
#include <vector>

#include "core/model/model_impl.hpp"
#include "core/train/step_runner.hpp"
#include "kx/error.hpp"

namespace kx {

backend::LossSums Model::Impl::take_loss_sums() {
  backend::LossSums total;
  for (Replica& r : replicas) {  // in replica order: repeatable sums
    const backend::LossSums s = r.be->take_loss_sums();
    total.loss += s.loss;
    total.correct += s.correct;
  }
  return total;
}

EvalResult Model::Impl::evaluate(const Dataset& data) {
  require_compiled("evaluate");
  check_dataset(data, "evaluation");
  return evaluate_checked(data);
}

EvalResult Model::Impl::evaluate_checked(const Dataset& data) {
  const int64_t batch = std::min(data.batch_size(), data.num_samples());
  reserve_plans(batch);
  stage_dataset(data);
  take_loss_sums();  // nothing left over from a call that failed
  const std::vector<int64_t> idx = data.in_storage_order();  // evaluation does not depend on shuffling
  for_each_replica([&](int k) { round_params(replicas[static_cast<size_t>(k)]); });  // the policy's weights
  for (int64_t first = 0; first < data.num_samples(); first += batch) {
    const int64_t rows = std::min(batch, data.num_samples() - first);
    for_each_replica([&](int k) {
      Replica& r = replicas[static_cast<size_t>(k)];
      const core::Slice part = slice(k, rows);
      if (part.rows == 0) return;
      r.feed.feed(*r.be, idx.data() + first, part, r.plan.batch_index());
      core::replica_forward_loss(*this, r, part, false, 0.0f);
      r.feed.release();
    });
  }
  // Each worker evaluated its share of every batch: the sums are the workers' together.
  const backend::LossSums sums = sum_across_workers(take_loss_sums(), nullptr);
  const double n = static_cast<double>(data.num_samples());
  return {sums.loss / n, sums.correct / n};
}

void Model::Impl::predict(const float* x, int64_t n, float* out) {
  require_compiled("predict");
  require(n >= 0, Status::InvalidArgument, "predict needs n_samples >= 0");
  require(n == 0 || (x && out), Status::InvalidArgument, "predict needs input and output buffers");
  const int64_t in = net.input_size(), outs = net.output_size();
  Replica& r = replicas.front();
  const int64_t batch = std::max<int64_t>(r.plan.capacity(), Dataset::kDefaultBatch);
  r.plan.reserve(*r.be, net, batch, label_size());
  round_params(r);
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t rows = std::min(batch, n - first);
    r.be->to_device(x + first * in, static_cast<size_t>(rows * in) * sizeof(float), r.plan.input());
    r.plan.forward(*r.be, net, r.params.data(), rows, false, r.step_seed(), 0, pass_precision(r));
    // A softmax/sigmoid folded into the loss for training is applied here (in float32, as the loss
    // computes it under a mixed policy): predict gives probabilities.
    r.be->activation_forward(net.folded_activation(), rows, outs, r.plan.output());
    r.be->to_host(r.plan.output(), static_cast<size_t>(rows * outs) * sizeof(float), out + first * outs);
  }
}

}  // namespace kx
