// Factories of the built-in callbacks (Keras's ModelCheckpoint, EarlyStopping, CSVLogger and
// learning-rate schedules). Each checks its arguments and throws InvalidArgument.
#pragma once
#include <memory>
#include <string>

#include "kx/callback.hpp"

namespace kx::core {

std::shared_ptr<Callback> make_model_checkpoint(const std::string& path_template, int64_t every_n_batches,
                                                int32_t keep_last);
std::shared_ptr<Callback> make_early_stopping(const std::string& monitor, int32_t patience, double min_delta,
                                              bool restore_best_weights);
std::shared_ptr<Callback> make_csv_logger(const std::string& path, bool append);
std::shared_ptr<Callback> make_tensorboard(const std::string& log_dir, int64_t update_freq, int32_t histogram_freq);
std::shared_ptr<Callback> make_step_decay(const StepDecay& s);
std::shared_ptr<Callback> make_cosine_decay(const CosineDecay& c);
std::shared_ptr<Callback> make_reduce_lr_on_plateau(const ReduceLrOnPlateau& r);
std::shared_ptr<Callback> make_learning_rate_scheduler(LearningRateFn fn);
std::shared_ptr<Callback> make_backup_and_restore(const std::string& backup_dir, int64_t every_n_batches);

}  // namespace kx::core
