// evaluate and predict: the model's forward pass over a dataset or an array, without training.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/callbacks/progress_bar.hpp"
#include "core/checked_size.hpp"
#include "core/model/model_impl.hpp"
#include "core/train/step_runner.hpp"
#include "kx/error.hpp"

namespace kx {

backend::LossSums Model::Impl::take_loss_sums(int64_t batch_rows) {
  backend::LossSums total;
  double unmasked = 0;  // of a masked output: the batch's unmasked positions
  for (Replica& r : replicas) {  // in replica order: repeatable sums
    total += r.be->take_loss_sums();
    if (r.plan.output_mask()) {
      float count = 0;
      r.be->to_host(r.plan.mask_counts(), sizeof count, &count);
      r.be->fill_zero(sizeof count, r.plan.mask_counts());
      unmasked += count;
    }
  }
  // The backends summed over positions (loss_positions rows per sample): per sample, their means.
  if (loss_positions > 1) {
    total.loss /= static_cast<double>(loss_positions);
    total.correct /= static_cast<double>(loss_positions);
    total.weight /= static_cast<double>(loss_positions);
  }
  // Keras's masked mean (apply_mask, divide_no_nan): the batch's loss is over its unmasked positions,
  // and each of its rows counts it once, as fit's and evaluate's means weigh a batch by its rows.
  if (net.output_masked())
    total.loss = unmasked > 0 ? total.loss * static_cast<double>(batch_rows * loss_positions) / unmasked : 0.0;
  return total;
}

EvalResult Model::Impl::evaluate(const Dataset& data, int verbose) {
  require_compiled("evaluate");
  require(verbose >= 0 && verbose <= 2, Status::InvalidArgument, "verbose must be 0, 1 or 2");
  check_dataset(data, "evaluation");
  // Keras's evaluate shows its bar on the chief alone, without an epoch line.
  core::ProgressBar bar(strategy.worker_index() == 0 ? verbose : 0, stdout);
  return evaluate_checked(data, verbose > 0 ? &bar : nullptr);
}

namespace {

// From a callback of fit: each backend's running sums of the fit's steps, taken for the evaluate and
// put back as they were when it ends or fails, so that the fit's epoch loss is bitwise that of a fit
// without the evaluate. Otherwise: what a call that failed left over, dropped.
class FitSumsHeld {
 public:
  FitSumsHeld(std::vector<Replica>& replicas, bool fitting) : replicas_(replicas) {
    for (Replica& r : replicas_) {
      const backend::LossSums s = r.be->take_loss_sums();
      if (fitting) held_.push_back(s);
    }
  }
  // At the evaluate's end: a device that fails to take them back fails the evaluate.
  void put_back() {
    const std::vector<backend::LossSums> held = std::exchange(held_, {});
    for (size_t i = 0; i < held.size(); ++i) replicas_[i].be->put_back_loss_sums(held[i]);
  }
  // When the evaluate failed: its error is the one the caller sees.
  ~FitSumsHeld() {
    try {
      put_back();
    } catch (...) {
    }
  }
  FitSumsHeld(const FitSumsHeld&) = delete;
  FitSumsHeld& operator=(const FitSumsHeld&) = delete;

 private:
  std::vector<Replica>& replicas_;
  std::vector<backend::LossSums> held_;
};

}  // namespace

EvalResult Model::Impl::evaluate_checked(const Dataset& data, core::ProgressBar* bar) {
  const int64_t batch = std::min(data.batch_size(), data.num_samples());
  reserve_plans(batch);
  stage_dataset(data, data.sample_weights());  // weighted when the data carries weights (Keras)
  FitSumsHeld fit_sums(replicas, fitting);
  if (fitting) feeds_moved_by_nested_call = true;
  const std::vector<int64_t> idx = data.in_storage_order();  // evaluation does not depend on shuffling
  const int64_t batches = (data.num_samples() + batch - 1) / batch;
  if (bar) bar->begin(batches);
  backend::LossSums sums;
  int64_t seen = 0, read = 0;
  core::Metrics m;
  // The running means of what was read, as the bar shows them.
  const auto read_sums = [&] {
    sums += take_loss_sums(seen - read);
    read = seen;
    m.clear();
    if (options.accuracy) m.emplace_back("accuracy", sums.accuracy());
    m.emplace_back("loss", sums.loss / static_cast<double>(read));
  };
  std::unique_ptr<core::BatchDecoder> decoder;
  if (data.decoded()) {  // this process's rows of each batch, in storage order, read as pass 0
    auto next_first = std::make_shared<int64_t>(0);
    decoder = std::make_unique<core::BatchDecoder>(
        data,
        [this, &idx, next_first, batch, n = data.num_samples()] {
          const int64_t first = *next_first;
          *next_first += batch;
          if (first >= n) return core::BatchDecoder::Planned{};  // prefetch looking past the end
          const core::Slice mine = local_slice(std::min(batch, n - first));
          const int64_t* b = idx.data() + first;
          return core::BatchDecoder::Planned{{b + mine.first, b + mine.first + mine.rows}, mine.first, 0};
        },
        data.prefetch_batches());
  }
  for_each_replica([&](int k) { round_params(replicas[static_cast<size_t>(k)]); });  // the policy's weights
  for (int64_t first = 0; first < data.num_samples(); first += batch) {
    const int64_t rows = std::min(batch, data.num_samples() - first);
    if (decoder) use_rows(decoder->next());
    for_each_replica([&](int k) {
      Replica& r = replicas[static_cast<size_t>(k)];
      const core::Slice part = slice(k, rows);
      if (part.rows == 0) return;
      r.feed.feed(*r.be, idx.data() + first, part, r.plan.batch_index());
      core::replica_forward_loss(*this, r, part, false, 0.0f);
      r.feed.release();
    });
    seen += local_rows(rows);
    const int64_t step = first / batch + 1;
    if (bar) bar->step_done(step);
    const bool redraw = bar && bar->due(step);
    if (redraw || net.output_masked()) read_sums();  // a masked loss: batch by batch
    if (redraw) bar->update(step, m);
  }
  read_sums();
  // Each worker evaluated its share of every batch: the sums are the workers' together. Keras: the
  // loss is the weighted sum over the number of samples, the accuracy the weighted mean.
  sums = sum_across_workers(sums, nullptr);
  const double n = static_cast<double>(data.num_samples());
  const EvalResult result{sums.loss / n, sums.accuracy()};
  if (bar) {
    m.clear();
    if (options.accuracy) m.emplace_back("accuracy", result.accuracy);
    m.emplace_back("loss", result.loss);
    bar->end_epoch(m);
  }
  fit_sums.put_back();
  return result;
}

void Model::Impl::predict(const float* x, int64_t n, float* out) {
  require_compiled("predict");
  require(n >= 0, Status::InvalidArgument, "predict needs n_samples >= 0");
  require(n == 0 || (x && out), Status::InvalidArgument, "predict needs input and output buffers");
  const int64_t in = net.input_size(), outs = net.output_size();
  // No caller holds more samples than kx could index: refused before anything is read or written.
  core::checked_product({n, in}, "predict's input of " + std::to_string(n) + " samples");
  core::checked_product({n, outs}, "predict's output of " + std::to_string(n) + " samples");
  Replica& r = replicas.front();
  const int64_t batch = std::max<int64_t>(r.plan.capacity(), Dataset::kDefaultBatch);
  r.plan.reserve(*r.be, net, batch, label_size());
  round_params(r);
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t rows = std::min(batch, n - first);
    r.be->to_device(x + first * in, static_cast<size_t>(rows * in) * sizeof(float), r.plan.input());
    r.plan.forward(*r.be, net, r.params.data(), rows, false, r.step_seed(), 0, pass_precision(r));
    // A softmax/sigmoid folded into the loss for training is applied here (in float32, as the loss
    // computes it under a mixed policy): predict gives probabilities (softmax over the last axis, as Keras).
    const int64_t classes = output_classes();
    r.be->activation_forward(net.folded_activation(), rows * (outs / classes), classes, r.plan.output());
    r.be->to_host(r.plan.output(), static_cast<size_t>(rows * outs) * sizeof(float), out + first * outs);
  }
}

}  // namespace kx
