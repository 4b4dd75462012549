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
