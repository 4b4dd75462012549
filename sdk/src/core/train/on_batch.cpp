// train_on_batch and test_on_batch: Keras's one step (or one evaluation) on arrays the caller gives,
// through the same step runner and feeds as fit, so that a step here is a step of fit.
#include <numeric>
#include <vector>

#include "core/model/model_impl.hpp"
#include "kx/error.hpp"

namespace kx {

namespace {

// The caller's arrays as a dataset of one batch, checked against the model and its loss.
Dataset one_batch(const Model::Impl& m, const float* x, const float* y, int64_t n, const char* what) {
  require(n > 0, Status::InvalidArgument, std::string(what) + ": n_samples must be positive, got " + std::to_string(n));
  require(x != nullptr && y != nullptr, Status::InvalidArgument, std::string(what) + ": x and y are needed");
  Shape x_shape{n};
  for (int64_t d : m.net.shapes.front()) x_shape.push_back(d);
  const Shape y_shape = m.label_size() == 1 ? Shape{n} : Shape{n, m.label_size()};
  Dataset d = Dataset::from_arrays(x, DType::F32, x_shape, y, DType::F32, y_shape);
  d.batch(n, false);
  m.check_dataset(d, what);
  return d;
}

}  // namespace

EvalResult Model::Impl::train_on_batch(const float* x, const float* y, int64_t n) {
  require_compiled("train_on_batch");
  const Dataset d = one_batch(*this, x, y, n, "train_on_batch");
  reserve_plans(n);
  stage_dataset(d, nullptr);
  take_loss_sums();  // nothing left over from a call that failed
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  steps_.run(*this, idx.data(), n);
  const backend::LossSums s = sum_across_workers(take_loss_sums(local_rows(n)), nullptr);  // every worker's share
  const double rows = static_cast<double>(n);
  return {s.loss / rows, options.accuracy ? s.accuracy() : std::nan("")};
}

EvalResult Model::Impl::test_on_batch(const float* x, const float* y, int64_t n) {
  require_compiled("test_on_batch");
  const EvalResult r = evaluate_checked(one_batch(*this, x, y, n, "test_on_batch"));
  return {r.loss, options.accuracy ? r.accuracy : std::nan("")};
}

EvalResult Model::train_on_batch(const float* x, const float* y, int64_t n) {
  impl_->require_not_fitting("train_on_batch");
  return impl_->train_on_batch(x, y, n);
}
EvalResult Model::test_on_batch(const float* x, const float* y, int64_t n) {
  impl_->require_not_fitting("test_on_batch");
  return impl_->test_on_batch(x, y, n);
}

}  // namespace kx
