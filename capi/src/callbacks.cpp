// kx_callbacks_*: the callbacks a fit calls, Keras's built-in ones (ModelCheckpoint, EarlyStopping,
// CSVLogger, TerminateOnNaN, the learning-rate schedules, ReduceLROnPlateau, BackupAndRestore,
// TensorBoard) and the caller's C functions.
#include <string>

#include "capi/src/handles.hpp"

using kx::capi::guarded;
using kx::capi::require_arg;

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

kx_status kx_callbacks_add_tensorboard(kx_callbacks* c, const char* log_dir, int64_t update_freq,
                                       int32_t histogram_freq) {
  return guarded([&] {
    require_arg(c, "c", "kx_callbacks_add_tensorboard");
    require_arg(log_dir, "log_dir", "kx_callbacks_add_tensorboard");
    c->callbacks.add_tensorboard(log_dir, update_freq, histogram_freq);
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

}  // extern "C"
