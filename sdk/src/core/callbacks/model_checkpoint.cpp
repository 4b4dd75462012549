// ModelCheckpoint: a checkpoint every N global batches or at the end of every epoch, at a path made
// from a template; keeps the newest keep_last files that match the template, deleting older ones only
// once the new file is durable.
#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/callbacks/builtin_callbacks.hpp"
#include "core/train/train_position.hpp"
#include "core/callbacks/path_template.hpp"
#include "io/safetensors.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

namespace fs = std::filesystem;

class ModelCheckpoint final : public Callback {
 public:
  ModelCheckpoint(const std::string& path_template, int64_t every_n_batches, int32_t keep_last)
      : template_(path_template), every_(every_n_batches), keep_last_(keep_last) {}

  bool on_event(const Event& e, TrainingControl& control) override {
    const bool due = every_ > 0 ? e.kind == EventKind::BatchEnd && e.global_step % every_ == 0
                                : e.kind == EventKind::EpochEnd;
    if (!due) return false;
    const std::string path = template_.format({e.epoch + 1, e.global_step, e.loss, e.val_loss});
    const fs::path parent = fs::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty()) fs::create_directories(parent, ec);
    require(!ec, Status::Io, "cannot create the checkpoint directory " + parent.string() + ": " + ec.message());
    control.save_checkpoint(path);
    prune(path);
    return false;
  }
  // Saves every n batches name their files with the batch's loss.
  bool reads_batch_metrics() const override { return every_ > 0; }

 private:
  // Deletes the files of this template in the new file's directory beyond the newest keep_last_ (if
  // set), by the global step recorded in each (files kx cannot read are left alone), and temporary
  // files of this template that a crash left behind.
  void prune(const std::string& newest) const {
    const fs::path dir = fs::path(newest).parent_path().empty() ? fs::path(".") : fs::path(newest).parent_path();
    std::vector<std::pair<int64_t, fs::path>> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".tmp") && template_.matches_file_name(name.substr(0, name.size() - 4))) {
        fs::remove(entry.path(), ec);  // left by a crash mid-write; this process is the only writer
        continue;
      }
      if (keep_last_ == 0 || !entry.is_regular_file(ec) || !template_.matches_file_name(name)) continue;
      const int64_t step = peek_global_step(entry.path().string());
      if (step >= 0) files.emplace_back(step, entry.path());
    }
    if (keep_last_ == 0) return;
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = static_cast<size_t>(keep_last_); i < files.size(); ++i)
      if (!fs::equivalent(files[i].second, newest, ec)) fs::remove(files[i].second, ec);
  }

  PathTemplate template_;
  int64_t every_;
  int32_t keep_last_;
};

}  // namespace

std::shared_ptr<Callback> make_model_checkpoint(const std::string& path_template, int64_t every_n_batches,
                                                int32_t keep_last) {
  require(every_n_batches >= 0, Status::InvalidArgument,
          "ModelCheckpoint: every_n_batches must be >= 0 (0 = every epoch), got " + std::to_string(every_n_batches));
  require(keep_last >= 0, Status::InvalidArgument,
          "ModelCheckpoint: keep_last must be >= 0 (0 = keep all), got " + std::to_string(keep_last));
  return std::make_shared<ModelCheckpoint>(path_template, every_n_batches, keep_last);
}

}  // namespace kx::core
