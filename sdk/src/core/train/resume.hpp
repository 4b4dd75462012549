// Resuming a fit: the checkpoint to start from (a file, or the newest good one in a directory), and
// where it puts the fit (the model restored, the epoch, the step and the data position to go on from).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "backend/backend.hpp"
#include "core/callbacks/progress_bar.hpp"
#include "core/train/train_position.hpp"
#include "io/safetensors.hpp"
#include "kx/model.hpp"

namespace kx::core {

// Where a fit starts: its first epoch and the step within it, the position in the stream of passes over
// the data, and the running sums of an epoch resumed part-way.
struct FitStart {
  int32_t epoch = 0;
  int64_t step = 0;
  uint64_t data_pass = 0;
  int64_t data_position = 0;  // the next batch within data_pass
  backend::LossSums sums;
  int64_t seen = 0;
};

// The checkpoint to resume from: the file, or the newest that loads cleanly in a directory; nullopt
// (and a message) when there is none.
std::optional<io::SafetensorsFile> find_checkpoint(const std::string& from, ProgressBar& bar);

// Where fit starts on m: at o.initial_epoch, or where the checkpoint o.resume_from names stopped, with m
// restored from it. steps: batches per epoch; pass_steps: batches per pass over the data; order: the
// training data's (a checkpoint written for other data is InvalidArgument).
FitStart start_of_fit(Model::Impl& m, const FitOptions& o, int64_t steps, int64_t pass_steps, const DataOrder& order,
                      ProgressBar& bar);

}  // namespace kx::core
