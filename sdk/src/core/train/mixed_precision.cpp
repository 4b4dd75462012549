// Mixed precision, as Keras's mixed_bfloat16 / mixed_float16 policies: the weights rounded to the
// 16-bit type once per step, the plan rounding every tensor between layers (step_plan.cpp), and float16's
// dynamic loss scale, kept in each replica's memory and updated by the step's own kernels.
#include <cmath>

#include "core/model/model_impl.hpp"
#include "kx/error.hpp"

namespace kx {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Float32: return "float32";
    case Precision::MixedBfloat16: return "mixed_bfloat16";
    case Precision::MixedFloat16: return "mixed_float16";
  }
  return "unknown";
}

backend::Rounding Model::Impl::rounding() const {
  switch (options.precision) {
    case Precision::MixedBfloat16: return backend::Rounding::BFloat16;
    case Precision::MixedFloat16: return backend::Rounding::Float16;
    default: return backend::Rounding::None;
  }
}

void Model::Impl::round_params(Replica& r) const {
  if (r.rounded_params.empty()) return;
  for (const core::ArenaSpan& s : autocast_spans)
    r.be->round_to(rounding(), s.count, r.params.data() + s.first, r.rounded_params.data() + s.first);
}

core::PassPrecision Model::Impl::pass_precision(const Replica& r) const {
  return {rounding(), r.rounded_params.empty() ? nullptr : r.rounded_params.data()};
}

void Model::Impl::set_loss_scale(double scale, int64_t good_steps) {
  backend::LossScaleState s;
  s.scale = static_cast<float>(scale);
  s.good_steps = good_steps;
  s.growth_steps = options.loss_scale_growth_steps;
  for (Replica& r : replicas) r.be->to_device(&s, sizeof s, r.loss_scale_state());
}

backend::LossScaleState Model::Impl::host_loss_scale() const {
  backend::LossScaleState s;
  const Replica& r = replicas.front();
  r.be->to_host(r.loss_scale_state(), sizeof s, &s);
  return s;
}

double Model::loss_scale() const {
  impl_->require_compiled("loss_scale");
  return impl_->loss_scaling() ? static_cast<double>(impl_->host_loss_scale().scale) : 1.0;
}

}  // namespace kx
