// The C functions of a Keras user's first day: the model summary, sample and class weights, and the
// callbacks ReduceLROnPlateau, LearningRateScheduler and BackupAndRestore.
#include "handles.hpp"

using kx::capi::guarded;
using kx::capi::require_arg;

kx_status kx_model_summary_width(const kx_model* m, int32_t line_length, char** out_text) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_summary_width");
    require_arg(out_text, "out_text", "kx_model_summary_width");
    *out_text = kx::capi::malloc_string(m->model.summary(line_length));
    return KX_OK;
  });
}

kx_status kx_model_summary(const kx_model* m, char** out_text) {
  return guarded([&] {
    require_arg(m, "m", "kx_model_summary");
    require_arg(out_text, "out_text", "kx_model_summary");
    // What Keras prints without a terminal, or on one 80 columns wide: min(default, 80 - 4).
    *out_text = kx::capi::malloc_string(m->model.summary(76));
    return KX_OK;
  });
}

kx_status kx_callbacks_add_reduce_lr_on_plateau(kx_callbacks* c, const char* monitor, double factor, int32_t patience,
                                                double min_lr) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_reduce_lr_on_plateau");
    kx::ReduceLrOnPlateau r;
    if (monitor) r.monitor = monitor;
    r.factor = factor;
    r.patience = patience;
    r.min_lr = min_lr;
    c->callbacks.add_reduce_lr_on_plateau(r);
    return KX_OK;
  });
}

void kx_reduce_lr_options_init(kx_reduce_lr_options* o, size_t struct_size) { kx::capi::init_options(o, struct_size); }

kx_status kx_callbacks_add_reduce_lr_on_plateau_options(kx_callbacks* c, const kx_reduce_lr_options* o) {
  return guarded([&] {
    const char* fn = "kx_callbacks_add_reduce_lr_on_plateau_options";
    require_arg(c, "c", fn);
    require_arg(o, "o", fn);
    const kx_reduce_lr_options opt = kx::capi::read_options(o, fn);
    const int32_t mode = kx::capi::enum_value(opt.mode);
    kx::require(mode >= KX_MODE_AUTO && mode <= KX_MODE_MAX, kx::Status::InvalidArgument,
                std::string(fn) + ": unknown mode " + std::to_string(mode));
    kx::require((opt.zero_is_value & ~(KX_REDUCE_LR_ZERO_PATIENCE | KX_REDUCE_LR_ZERO_MIN_DELTA)) == 0,
                kx::Status::InvalidArgument, std::string(fn) + ": unknown zero_is_value bits");
    kx::ReduceLrOnPlateau r;  // Keras's defaults
    if (opt.monitor) r.monitor = opt.monitor;
    if (opt.factor != 0) r.factor = opt.factor;
    if (opt.patience != 0 || (opt.zero_is_value & KX_REDUCE_LR_ZERO_PATIENCE)) r.patience = opt.patience;
    r.mode = static_cast<kx::ReduceLrOnPlateau::Mode>(mode);
    if (opt.min_delta != 0 || (opt.zero_is_value & KX_REDUCE_LR_ZERO_MIN_DELTA)) r.min_delta = opt.min_delta;
    r.cooldown = opt.cooldown;
    r.min_lr = opt.min_lr;
    c->callbacks.add_reduce_lr_on_plateau(r);
    return KX_OK;
  });
}

kx_status kx_callbacks_add_learning_rate_scheduler(kx_callbacks* c, kx_lr_schedule_fn fn, void* user_data) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_learning_rate_scheduler");
    kx::require(fn != nullptr, kx::Status::InvalidArgument, "kx_callbacks_add_learning_rate_scheduler: fn is NULL");
    c->callbacks.add_learning_rate_scheduler([fn, user_data](int32_t epoch, double lr) { return fn(epoch, lr, user_data); });
    return KX_OK;
  });
}

kx_status kx_callbacks_add_backup_and_restore_every(kx_callbacks* c, const char* backup_dir, int64_t every_n_batches) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_backup_and_restore_every");
    require_arg(backup_dir, "backup_dir", "kx_callbacks_add_backup_and_restore_every");
    c->callbacks.add_backup_and_restore(backup_dir, every_n_batches);
    return KX_OK;
  });
}

kx_status kx_callbacks_add_backup_and_restore(kx_callbacks* c, const char* backup_dir) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_backup_and_restore");
    require_arg(backup_dir, "backup_dir", "kx_callbacks_add_backup_and_restore");
    c->callbacks.add_backup_and_restore(backup_dir, 0);
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
