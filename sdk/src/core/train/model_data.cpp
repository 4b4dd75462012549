// The model's side of the data it reads: whether a dataset fits the model and its loss, and every
// replica made ready to read it (step plans large enough, the dataset staged on each replica's feed).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/model/model_impl.hpp"
#include "core/train/batch_stream.hpp"
#include "kx/error.hpp"

namespace kx {

namespace {
bool is_integral(float v) { return std::isfinite(v) && v == std::floor(v); }
}  // namespace

void Model::Impl::check_dataset(const Dataset& d, const char* role) const {
  const std::string who = std::string(role) + " dataset";
  // Keras leaves the positions a mask hides out of the loss and the metrics (a sequence labeller after
  // Embedding(mask_zero=True)): a weight per loss position, so one mask step per position.
  if (const int mask = net.mask_source.back(); mask > 0) {
    const std::string masked = "the model's output carries the Keras mask of layer \"" +
                               net.layers[static_cast<size_t>(mask - 1)]->name() + "\"";
    require(net.output_mask_steps() == loss_positions, Status::Unsupported,
            masked + " of " + std::to_string(net.output_mask_steps()) + " steps per sample, but " +
                loss_name(loss_spec.kind) + " sees " + std::to_string(loss_positions) +
                " positions per sample; kx masks a loss with one position per step");
    // The loss is normalised by the unmasked positions of each global batch, which kx counts across
    // one process's replicas only.
    require(!multi_worker() && !strategy.parameter_servers(), Status::Unsupported,
            masked + ": its masked loss trains and evaluates on one worker process only");
  }
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
    // Keras: one class index per position of the output's axes before the last ([N, H, W] or
    // [N, H, W, 1] labels for [N, H, W, C] outputs); one per sample for a rank-1 output.
    const int64_t classes = output_classes();
    require(y_size == loss_positions, Status::InvalidArgument,
            who + ": sparse categorical cross-entropy needs one integer label per " +
                (loss_positions == 1 ? std::string("sample")
                                     : "position of the output " + to_string(net.shapes.back()) + " without its last axis (" +
                                           std::to_string(loss_positions) + " per sample)") +
                ", labels have shape " + to_string(d.y_shape()));
    for (int64_t i : idx)
      for (int64_t j = 0; j < y_size; ++j) {
        const float label = s.y[static_cast<size_t>(i * y_size + j)];
        require(is_integral(label) && label >= 0 && label < static_cast<float>(classes), Status::InvalidArgument,
                who + ": label " + std::to_string(label) + " of sample " + std::to_string(i) +
                    (y_size > 1 ? " at position " + std::to_string(j) : std::string()) + " is not a class in [0, " +
                    std::to_string(classes) + ")");
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

core::Slice Model::Impl::local_slice(int64_t rows) const {
  const core::Slice first = slice(0, rows), last = slice(static_cast<int>(replicas.size()) - 1, rows);
  return {first.first, last.first + last.rows - first.first};
}

std::unique_ptr<core::BatchDecoder> Model::Impl::training_decoder(const Dataset& d, uint64_t pass,
                                                                  int64_t position) const {
  if (!d.decoded()) return nullptr;
  // The decoder's own stream of the same batches as fit's, from the same place: each worker decodes
  // only its replicas' rows of each global batch.
  auto stream = std::make_shared<core::BatchStream>(d, pass, position);
  auto plan = [this, stream] {
    const core::BatchStream::Batch b = stream->next();
    const core::Slice mine = local_slice(b.rows);
    return core::BatchDecoder::Planned{{b.idx + mine.first, b.idx + mine.first + mine.rows}, mine.first, b.pass};
  };
  return std::make_unique<core::BatchDecoder>(d, std::move(plan), d.prefetch_batches());
}

void Model::Impl::use_rows(const core::DecodedRows& rows) {
  for (Replica& r : replicas) r.feed.use_rows(&rows);
}

void Model::Impl::reserve_plans(int64_t global_rows) {
  const int64_t n = total_replicas;
  const int64_t per_replica = (global_rows + n - 1) / n;
  for (Replica& r : replicas) r.plan.reserve(*r.be, net, std::max(r.plan.capacity(), per_replica), label_size());
}

void Model::Impl::stage_dataset(const Dataset& data, const core::SampleWeights& weights) {
  const core::ReplicaFeed::RowSizes row{net.input_size(), label_size()};
  for (Replica& r : replicas)
    r.feed.stage(*r.be, data.shared_storage(), weights, row, r.plan.capacity(), always_stream_, data.decoded());
}

}  // namespace kx
