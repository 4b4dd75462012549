// CSVLogger: one row per epoch, "epoch,<metrics in name order>", as Keras writes it.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/callbacks/builtin_callbacks.hpp"
#include "kx/error.hpp"

namespace kx::core {
namespace {

class CsvLogger final : public Callback {
 public:
  CsvLogger(std::string path, bool append) : path_(std::move(path)), append_(append) {}

  bool reads_batch_metrics() const override { return false; }  // epochs only
  bool on_event(const Event& e, TrainingControl& control) override {
    if (e.kind == EventKind::TrainBegin) {
      std::error_code ec;
      const bool has_rows = append_ && std::filesystem::file_size(path_, ec) > 0 && !ec;
      out_.open(path_, append_ ? std::ios::app : std::ios::trunc);
      require(out_.is_open(), Status::Io, "CSVLogger cannot open " + path_);
      header_written_ = has_rows;
      columns_.clear();
      if (control.has_accuracy()) columns_.push_back("accuracy");
      columns_.push_back("loss");
      if (control.has_validation()) {
        if (control.has_accuracy()) columns_.push_back("val_accuracy");
        columns_.push_back("val_loss");
      }
      return false;
    }
    if (e.kind == EventKind::TrainEnd) {
      out_.close();
      return false;
    }
    if (e.kind != EventKind::EpochEnd || !out_.is_open()) return false;
    if (!header_written_) {
      out_ << "epoch";
      for (const auto& c : columns_) out_ << ',' << c;
      out_ << '\n';
      header_written_ = true;
    }
    const std::map<std::string, double> values = {
        {"accuracy", e.accuracy}, {"loss", e.loss}, {"val_accuracy", e.val_accuracy}, {"val_loss", e.val_loss}};
    out_ << e.epoch;
    char buf[40];
    for (const auto& c : columns_) {
      std::snprintf(buf, sizeof buf, "%.17g", values.at(c));
      out_ << ',' << buf;
    }
    out_ << '\n';
    out_.flush();
    require(out_.good(), Status::Io, "CSVLogger cannot write " + path_);
    return false;
  }

 private:
  std::string path_;
  bool append_;
  std::ofstream out_;
  bool header_written_ = false;
  std::vector<std::string> columns_;  // name order, as Keras sorts them
};

}  // namespace

std::shared_ptr<Callback> make_csv_logger(const std::string& path, bool append) {
  require(!path.empty(), Status::InvalidArgument, "CSVLogger: the path is empty");
  return std::make_shared<CsvLogger>(path, append);
}

}  // namespace kx::core
