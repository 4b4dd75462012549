// Training events, user callbacks and the per-epoch history, as Keras's callbacks and History.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kx {

enum class EventKind { TrainBegin = 0, EpochBegin = 1, BatchEnd = 2, EpochEnd = 3, TrainEnd = 4, CheckpointSaved = 5 };

struct Event {
  EventKind kind = EventKind::TrainBegin;
  int32_t epoch = -1;
  int64_t step = -1;
  int64_t steps_per_epoch = -1;
  double loss = NAN;
  double accuracy = NAN;
  double val_loss = NAN;
  double val_accuracy = NAN;
  std::string path;
};

// Returns true to stop training.
using CallbackFn = std::function<bool(const Event&)>;

class Callbacks {
 public:
  void add(CallbackFn fn) { fns_.push_back(std::move(fn)); }
  // Calls every function in order; true if any asked to stop.
  bool dispatch(const Event& e) const;
  bool empty() const { return fns_.empty(); }

 private:
  std::vector<CallbackFn> fns_;
};

class History {
 public:
  void record(const std::string& name, double value) { values_[name].push_back(value); }
  void finish_epoch(int32_t epoch) { epochs_.push_back(epoch); }
  int32_t num_epochs() const { return static_cast<int32_t>(epochs_.size()); }
  // Throws InvalidArgument for an unknown name or index.
  double get(const std::string& name, int32_t index) const;
  const std::map<std::string, std::vector<double>>& values() const { return values_; }

 private:
  std::vector<int32_t> epochs_;
  std::map<std::string, std::vector<double>> values_;
};

}  // namespace kx
