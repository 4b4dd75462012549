// kx_fit, kx_history_*, kx_evaluate (and _verbose), train_on_batch / test_on_batch, kx_predict;
// the callbacks a fit calls are callbacks.cpp's.
#include <cmath>
#include <string>

#include "capi/src/handles.hpp"

using kx::capi::guarded;
using kx::capi::require_arg;

namespace {

// train_on_batch and test_on_batch: x and y checked, then the model's own checks.
template <class Step>
kx_status on_batch(const char* function, kx_model* m, const float* x, const float* y, int64_t n_samples, double* loss,
                   double* accuracy, Step step) {
  return guarded([&] {
    require_arg(m, "m", function);
    require_arg(x, "x", function);
    require_arg(y, "y", function);
    const kx::EvalResult r = step(m->model, x, y, n_samples);
    if (loss) *loss = r.loss;
    if (accuracy) *accuracy = r.accuracy;
    return KX_OK;
  });
}

}  // namespace

extern "C" {

void kx_fit_options_init(kx_fit_options* o, size_t struct_size) { kx::capi::init_options(o, struct_size); }

kx_status kx_fit(kx_model* m, kx_dataset* train, const kx_fit_options* o, kx_callbacks* cb, kx_history** out) {
  return guarded([&] {
    require_arg(m, "m", "kx_fit");
    require_arg(train, "train", "kx_fit");
    const kx_fit_options opt = kx::capi::read_options(o, "kx_fit");
    kx::FitOptions f;
    f.epochs = opt.epochs == 0 ? 1 : opt.epochs;
    f.initial_epoch = opt.initial_epoch;
    f.steps_per_epoch = opt.steps_per_epoch;
    f.validation = opt.validation ? &opt.validation->dataset : nullptr;
    f.validation_steps = opt.validation_steps;
    f.verbose = opt.verbose;
    if (opt.resume_from) f.resume_from = opt.resume_from;
    f.validation_split = opt.validation_split;
    kx::require(opt.class_weight != nullptr || opt.n_class_weight == 0, kx::Status::InvalidArgument,
                "kx_fit: n_class_weight is " + std::to_string(opt.n_class_weight) + " but class_weight is NULL");
    if (opt.class_weight) f.class_weight.assign(opt.class_weight, opt.class_weight + opt.n_class_weight);
    auto history = std::make_unique<kx_history>();
    const kx::Status s = m->model.fit(train->dataset, f, cb ? &cb->callbacks : nullptr, &history->history);
    if (out) *out = history.release();
    return static_cast<kx_status>(s);
  });
}

int32_t kx_history_epochs(const kx_history* h) {
  return kx::capi::guarded_value<int32_t>(-1, [&] {
    kx::capi::require_arg(h, "h", "kx_history_epochs");
    return static_cast<int32_t>(h->history.num_epochs());
  });
}

kx_status kx_history_get(const kx_history* h, const char* name, int32_t epoch, double* out) {
  return guarded([&] {
    require_arg(h, "h", "kx_history_get");
    require_arg(name, "name", "kx_history_get");
    require_arg(out, "out", "kx_history_get");
    *out = h->history.get(name, epoch);
    return KX_OK;
  });
}

void kx_history_destroy(kx_history* h) { std::unique_ptr<kx_history> owned(h); }

kx_status kx_evaluate(kx_model* m, kx_dataset* d, double* loss, double* accuracy) {
  return guarded([&] {
    require_arg(m, "m", "kx_evaluate");
    require_arg(d, "d", "kx_evaluate");
    const kx::EvalResult r = m->model.evaluate(d->dataset);
    if (loss) *loss = r.loss;
    if (accuracy) *accuracy = r.accuracy;
    return KX_OK;
  });
}

kx_status kx_evaluate_verbose(kx_model* m, kx_dataset* d, int32_t verbose, double* loss, double* accuracy) {
  return guarded([&] {
    require_arg(m, "m", "kx_evaluate_verbose");
    require_arg(d, "d", "kx_evaluate_verbose");
    const kx::EvalResult r = m->model.evaluate(d->dataset, verbose);
    if (loss) *loss = r.loss;
    if (accuracy) *accuracy = r.accuracy;
    return KX_OK;
  });
}

kx_status kx_model_train_on_batch(kx_model* m, const float* x, const float* y, int64_t n_samples, double* loss,
                                  double* accuracy) {
  return on_batch("kx_model_train_on_batch", m, x, y, n_samples, loss, accuracy,
                  [](kx::Model& model, const float* xs, const float* ys, int64_t n) { return model.train_on_batch(xs, ys, n); });
}

kx_status kx_model_test_on_batch(kx_model* m, const float* x, const float* y, int64_t n_samples, double* loss,
                                 double* accuracy) {
  return on_batch("kx_model_test_on_batch", m, x, y, n_samples, loss, accuracy,
                  [](kx::Model& model, const float* xs, const float* ys, int64_t n) { return model.test_on_batch(xs, ys, n); });
}

kx_status kx_predict(kx_model* m, const float* x, int64_t n_samples, float* out, size_t out_len) {
  return guarded([&] {
    require_arg(m, "m", "kx_predict");
    require_arg(x, "x", "kx_predict");
    require_arg(out, "out", "kx_predict");
    kx::require(n_samples > 0, kx::Status::InvalidArgument,
                "kx_predict: n_samples must be positive, got " + std::to_string(n_samples));
    kx::require(m->model.compiled(), kx::Status::Misuse, "kx_predict: the model is not compiled");
    const int64_t per = kx::num_elements(m->model.output_shape());
    kx::require(static_cast<uint64_t>(n_samples) <= out_len / static_cast<uint64_t>(per), kx::Status::InvalidArgument,
                "kx_predict: out_len " + std::to_string(out_len) + " is less than n_samples * " + std::to_string(per));
    m->model.predict_into(x, n_samples, out);
    return KX_OK;
  });
}

}  // extern "C"
