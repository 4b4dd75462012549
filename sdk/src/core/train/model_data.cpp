// The model's side of the data it reads: whether a dataset fits the model and its loss, and every
// replica made ready to read it (step plans large enough, the dataset staged on each replica's feed).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/model/model_impl.hpp"
#include "kx/error.hpp"

namespace kx {

namespace {
bool is_integral(float v) { return std::isfinite(v) && v == std::floor(v); }
}  // namespace

void Model::Impl::check_dataset(const Dataset& d, const char* role) const {
  const std::string who = std::string(role) + " dataset";
  require(d.num_samples() > 0, Status::InvalidArgument, who + " is empty");
  const int64_t in = net.input_size();
  require(num_elements(d.x_shape()) == in, Status::InvalidArgument,
          who + " samples have shape " + to_string(d.x_shape()) + " (" + std::to_string(num_elements(d.x_shape())) +
              " values) but the model's input is " + to_string(net.shapes.front()) + " (" + std::to_string(in) +
              " values)");
  const int64_t outputs = net.output_size();
  const int64_t y_size = num_elements(d.y_shape());
  const DatasetStorage& s = d.storage();
  const std::vector<int64_t> idx = d.in_storage_order();
  if (loss_spec.kind == LossKind::SparseCategoricalCrossentropy) {
    require(y_size == 1, Status::InvalidArgument,
            who + ": sparse categorical cross-entropy needs one integer label per sample, labels have shape " +
                to_string(d.y_shape()));
    for (int64_t i : idx) {
      const float label = s.y[static_cast<size_t>(i)];
      require(is_integral(label) && label >= 0 && label < static_cast<float>(outputs), Status::InvalidArgument,
              who + ": label " + std::to_string(label) + " of sample " + std::to_string(i) + " is not a class in [0, " +
                  std::to_string(outputs) + ")");
    }
  } else {
    require(y_size == outputs, Status::InvalidArgument,
            who + ": " + loss_name(loss_spec.kind) + " needs " + std::to_string(outputs) +
                " target values per sample (the model's output), labels have shape " + to_string(d.y_shape()));
    for (int64_t i : idx)
      for (int64_t j = 0; j < y_size; ++j)
        require(std::isfinite(s.y[static_cast<size_t>(i * y_size + j)]), Status::InvalidArgument,
                who + ": sample " + std::to_string(i) + " has a non-finite target");
  }
}

core::Slice Model::Impl::slice(int replica, int64_t rows) const {
  // Local replica k is replica offset + k of every worker's: each worker takes its share of the global
  // batch (TensorFlow's AutoShardPolicy.DATA), rows in the global batch's numbering.
  return core::replica_slice(replica_offset + replica, total_replicas, rows);
}

void Model::Impl::reserve_plans(int64_t global_rows) {
  const int64_t n = total_replicas;
  const int64_t per_replica = (global_rows + n - 1) / n;
  for (Replica& r : replicas) r.plan.reserve(*r.be, net, std::max(r.plan.capacity(), per_replica), label_size());
}

void Model::Impl::stage_dataset(const Dataset& data, const core::SampleWeights& weights) {
  const core::ReplicaFeed::RowSizes row{net.input_size(), label_size()};
  for (Replica& r : replicas)
    r.feed.stage(*r.be, data.shared_storage(), weights, row, r.plan.capacity(), always_stream_);
}

}  // namespace kx
