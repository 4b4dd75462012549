// BackupAndRestore, Keras's fault-tolerance callback: kx's checkpoints in a directory of their own. A
// backup at each epoch's end (or every N global batches), the one before kept until the new one is
// durable; a fit with the callback resumes from the newest that loads (at the exact next batch, where
// Keras restarts the epoch); a fit that ends without failing deletes the directory, as Keras's
// on_train_end. A fit that fails (an error, a crash) leaves it for the next.
#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/callbacks/builtin_callbacks.hpp"
#include "core/train/train_position.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "backup-";
constexpr const char* kSuffix = ".kx";
constexpr size_t kKeep = 2;  // the newest and the one before it, in case the newest is damaged

class BackupAndRestore final : public Callback {
 public:
  BackupAndRestore(std::string dir, int64_t every) : dir_(std::move(dir)), every_(every) {}

  bool reads_batch_metrics() const override { return false; }  // positions only

  std::string backup_to_resume() const override { return backups().empty() ? std::string() : dir_; }

  bool on_event(const Event& e, TrainingControl& control) override {
    switch (e.kind) {
      case EventKind::EpochEnd:
        if (every_ == 0) save(e, control);
        break;
      case EventKind::BatchEnd:
        if (every_ > 0 && e.global_step % every_ == 0) save(e, control);
        break;
      case EventKind::TrainEnd: {
        std::error_code ec;
        fs::remove_all(dir_, ec);
        require(!ec, Status::Io, "BackupAndRestore: cannot delete the backup directory " + dir_ + ": " + ec.message());
        break;
      }
      default:
        break;
    }
    return false;
  }

 private:
  // The backups in the directory, newest first (by the step each records; unreadable files skipped).
  std::vector<std::pair<int64_t, fs::path>> backups() const {
    std::vector<std::pair<int64_t, fs::path>> files;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (!entry.is_regular_file(ec) || !name.starts_with(kPrefix) || !name.ends_with(kSuffix)) continue;
      files.emplace_back(peek_global_step(entry.path().string()), entry.path());
    }
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    return files;
  }

  void save(const Event& e, TrainingControl& control) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    require(!ec, Status::Io, "BackupAndRestore: cannot create the backup directory " + dir_ + ": " + ec.message());
    const fs::path path = fs::path(dir_) / (kPrefix + std::to_string(e.global_step) + kSuffix);
    control.save_checkpoint(path.string());
    const auto files = backups();
    for (size_t i = kKeep; i < files.size(); ++i)
      if (!fs::equivalent(files[i].second, path, ec)) fs::remove(files[i].second, ec);
  }

  std::string dir_;
  int64_t every_;
};

}  // namespace

std::shared_ptr<Callback> make_backup_and_restore(const std::string& backup_dir, int64_t every_n_batches) {
  require(!backup_dir.empty(), Status::InvalidArgument, "BackupAndRestore: the backup directory is empty");
  require(every_n_batches >= 0, Status::InvalidArgument,
          "BackupAndRestore: every_n_batches must be >= 0 (0 = every epoch), got " + std::to_string(every_n_batches));
  return std::make_shared<BackupAndRestore>(backup_dir, every_n_batches);
}

}  // namespace kx::core
