// kx_callbacks_*, kx_fit, kx_history_*, kx_evaluate, kx_predict.
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

kx_status kx_callbacks_create(kx_callbacks** out) {
  return guarded([&] {
    require_arg(out, "out", "kx_callbacks_create");
    return kx::capi::hand_out(std::make_unique<kx_callbacks>(), out);
  });
}

kx_status kx_callbacks_add_model_checkpoint(kx_callbacks* c, const char* path_template, int64_t every_n_batches,
                                            int32_t keep_last) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_model_checkpoint");
    require_arg(path_template, "path_template", "kx_callbacks_add_model_checkpoint");
    c->callbacks.add_model_checkpoint(path_template, every_n_batches, keep_last);
    return KX_OK;
  });
}

kx_status kx_callbacks_add_early_stopping(kx_callbacks* c, const char* monitor, int32_t patience, double min_delta,
                                          int32_t restore_best_weights) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_early_stopping");
    c->callbacks.add_early_stopping(monitor ? monitor : "val_loss", patience, min_delta, restore_best_weights != 0);
    return KX_OK;
  });
}

kx_status kx_callbacks_add_csv_logger(kx_callbacks* c, const char* path, int32_t append) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_csv_logger");
    require_arg(path, "path", "kx_callbacks_add_csv_logger");
    c->callbacks.add_csv_logger(path, append != 0);
    return KX_OK;
  });
}

kx_status kx_callbacks_add_terminate_on_nan(kx_callbacks* c) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_terminate_on_nan");
    c->callbacks.add_terminate_on_nan();
    return KX_OK;
  });
}

kx_status kx_callbacks_add_step_decay(kx_callbacks* c, double factor, int32_t every_epochs) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_step_decay");
    c->callbacks.add_step_decay({factor, every_epochs});
    return KX_OK;
  });
}

kx_status kx_callbacks_add_cosine_decay(kx_callbacks* c, int64_t decay_steps, double alpha) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_cosine_decay");
    c->callbacks.add_cosine_decay({decay_steps, alpha});
    return KX_OK;
  });
}

kx_status kx_callbacks_add_function_flags(kx_callbacks* c, kx_callback_fn fn, void* user_data, uint32_t flags) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_function_flags");
    kx::require(fn != nullptr, kx::Status::InvalidArgument, "kx_callbacks_add_function_flags: fn is NULL");
    kx::require((flags & ~(KX_CALLBACK_NO_BATCH_METRICS | KX_CALLBACK_MAY_FAIL)) == 0, kx::Status::InvalidArgument,
                "kx_callbacks_add_function_flags: unknown flags " + std::to_string(flags));
    const bool reads_batch_metrics = (flags & KX_CALLBACK_NO_BATCH_METRICS) == 0;
    const bool may_fail = (flags & KX_CALLBACK_MAY_FAIL) != 0;
    c->callbacks.add(
        [fn, user_data, may_fail](const kx::Event& e) {
          kx_event ev;
          ev.struct_size = sizeof ev;
          ev.kind = static_cast<kx_event_kind>(e.kind);
          ev.epoch = e.epoch;
          ev.step = e.step;
          ev.loss = e.loss;
          ev.accuracy = e.accuracy;
          ev.val_loss = e.val_loss;
          ev.val_accuracy = e.val_accuracy;
          ev.path = e.path.empty() ? nullptr : e.path.c_str();
          ev.steps_per_epoch = e.steps_per_epoch;
          ev.global_step = e.global_step;
          ev.batch_loss = e.batch_loss;
          ev.batch_accuracy = e.batch_accuracy;
          ev.learning_rate = e.learning_rate;
          const int32_t r = fn(&ev, user_data);
          if (may_fail && r < 0) {
            const bool known = std::string(kx_status_name(r)) != "KX_UNKNOWN_STATUS";
            throw kx::Error(static_cast<kx::Status>(known ? r : KX_E_INTERNAL),
                            std::string("a callback failed the fit: it returned ") + std::to_string(r));
          }
          return r != 0;
        },
        reads_batch_metrics);
    return KX_OK;
  });
}

kx_status kx_callbacks_add_function(kx_callbacks* c, kx_callback_fn fn, void* user_data) {
  return kx_callbacks_add_function_flags(c, fn, user_data, 0);
}

void kx_callbacks_destroy(kx_callbacks* c) { std::unique_ptr<kx_callbacks> owned(c); }

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

kx_status kx_callbacks_add_tensorboard(kx_callbacks* c, const char* log_dir, int64_t update_freq,
                                       int32_t histogram_freq) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_tensorboard");
    require_arg(log_dir, "log_dir", "kx_callbacks_add_tensorboard");
    c->callbacks.add_tensorboard(log_dir, update_freq, histogram_freq);
    return KX_OK;
  });
}

}  // extern "C"
