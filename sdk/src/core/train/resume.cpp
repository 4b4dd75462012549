#include "core/train/resume.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <utility>
#include <vector>

#include "core/model/model_impl.hpp"
#include "kx/error.hpp"

namespace kx::core {

std::optional<io::SafetensorsFile> find_checkpoint(const std::string& from, ProgressBar& bar) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(from, ec)) {
    bar.message("No checkpoint at " + from + ": starting fresh");
    return std::nullopt;
  }
  if (!fs::is_directory(from, ec)) {
    io::SafetensorsFile f = io::SafetensorsFile::decode(io::read_file(from), from);
    require(has_position(f), Status::InvalidArgument,
            from + " is a model file, not a checkpoint: load it with kx_model_load, or resume from a checkpoint");
    return f;
  }
  // Newest first by the step each file records; files that are not kx files at all are not candidates.
  std::vector<std::pair<int64_t, std::string>> candidates;
  for (const auto& entry : fs::directory_iterator(from, ec)) {
    const std::string path = entry.path().string();
    if (!entry.is_regular_file(ec) || path.ends_with(".tmp")) continue;
    const int64_t step = peek_global_step(path);
    if (step >= 0) candidates.emplace_back(step, path);
  }
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  for (const auto& [step, path] : candidates) {
    try {
      io::SafetensorsFile f = io::SafetensorsFile::decode(io::read_file(path), path);
      if (!has_position(f)) continue;
      get_position(f);  // a position out of range or inconsistent: Corrupt, and an older file is tried
      return f;
    } catch (const Error& e) {
      if (e.status() != Status::Corrupt && e.status() != Status::Io) throw;
      bar.message(std::string("Skipping checkpoint ") + e.what());
    }
  }
  bar.message("No checkpoint in " + from + ": starting fresh");
  return std::nullopt;
}

FitStart start_of_fit(Model::Impl& m, const FitOptions& o, int64_t steps, int64_t pass_steps, const DataOrder& order,
                      ProgressBar& bar) {
  // Batches come from a stream of passes over the data; with whole-pass epochs, epoch e reads pass e.
  FitStart start;
  start.epoch = o.initial_epoch;
  start.data_pass = o.steps_per_epoch > 0 ? 0 : static_cast<uint64_t>(o.initial_epoch);
  if (o.resume_from.empty()) return start;
  const std::optional<io::SafetensorsFile> f = find_checkpoint(o.resume_from, bar);
  if (!f) return start;
  const TrainPosition p = get_position(*f);
  require(p.steps_per_epoch == steps, Status::InvalidArgument,
          f->source() + " was written with " + std::to_string(p.steps_per_epoch) + " steps per epoch, this fit has " +
              std::to_string(steps));
  const std::string data_diff = get_data_order(*f).difference(order);
  require(data_diff.empty(), Status::InvalidArgument,
          f->source() + " was written for other training data: " + data_diff);
  require(p.data_position <= pass_steps, Status::Corrupt, f->source() + ": data position beyond the pass");
  // The samples of the epoch so far came in step_in_epoch batches of at most data_batch each (the
  // batch size compared equal above).
  require((p.seen + order.batch - 1) / order.batch <= p.step_in_epoch, Status::Corrupt,
          f->source() + ": metadata \"epoch_seen\" is " + std::to_string(p.seen) + ", more than " +
              std::to_string(p.step_in_epoch) + " batches of " + std::to_string(order.batch) + " hold");
  m.restore(*f);  // the position is sound: only now does the model change
  start.data_pass = p.data_pass;
  start.data_position = p.data_position;
  if (p.step_in_epoch == p.steps_per_epoch) {
    start.epoch = p.epoch + 1;
  } else {
    start.epoch = p.epoch;
    start.step = p.step_in_epoch;
    start.sums = {p.loss_sum, p.correct_sum, p.weight_sum};
    start.seen = p.seen;
  }
  bar.message("Resuming from " + f->source() + ": epoch " + std::to_string(start.epoch + 1) + ", batch " +
              std::to_string(start.step) + "/" + std::to_string(steps) + ", step " + std::to_string(m.optimizer_steps));
  if (start.epoch >= o.epochs)
    bar.message("Nothing left to train: all " + std::to_string(o.epochs) + " epochs are done");
  return start;
}

}  // namespace kx::core
