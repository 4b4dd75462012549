#include "core/train/parameter_server/batch_coordinator.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace kx::core {

BatchCoordinator::BatchCoordinator(int workers, int staleness)
    : staleness_(staleness),
      holding_(static_cast<size_t>(workers)),
      live_(static_cast<size_t>(workers), true),
      handed_(static_cast<size_t>(workers), 0) {
  require(workers > 0 && staleness >= 0, Status::InvalidArgument, "a coordinator needs workers and a staleness >= 0");
}

void BatchCoordinator::begin_epoch(int64_t first, int64_t count, double learning_rate) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.clear();
    for (int64_t b = first; b < first + count; ++b) queue_.push_back(b);
    remaining_ = count;
    learning_rate_ = learning_rate;
  }
  workers_cv_.notify_all();
}

void BatchCoordinator::set_learning_rate(double learning_rate) {
  std::lock_guard<std::mutex> lock(mutex_);
  learning_rate_ = learning_rate;
}

BatchCoordinator::Events BatchCoordinator::wait(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  main_cv_.wait_for(lock, wait,
                    [&] { return !events_.done.empty() || !events_.lost.empty() || failure_ || remaining_ == 0; });
  Events taken = std::exchange(events_, Events{});
  taken.epoch_complete = remaining_ == 0;  // under the lock that done() takes: no Done of the epoch is left
  return taken;
}

bool BatchCoordinator::epoch_complete() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return remaining_ == 0;
}

void BatchCoordinator::stop_epoch() {
  std::lock_guard<std::mutex> lock(mutex_);
  remaining_ -= static_cast<int64_t>(queue_.size());
  queue_.clear();
}

int BatchCoordinator::live_workers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(std::count(live_.begin(), live_.end(), true));
}

void BatchCoordinator::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  workers_cv_.notify_all();
}

void BatchCoordinator::fail(Status status, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_) failure_ = std::make_pair(status, message);
  }
  workers_cv_.notify_all();
  main_cv_.notify_all();
}

void BatchCoordinator::check() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_) kx::fail(failure_->first, failure_->second);
}

std::vector<int64_t> BatchCoordinator::handed_out() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return handed_;
}

int64_t BatchCoordinator::max_gap() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_gap_;
}

std::pair<int64_t, int64_t> BatchCoordinator::live_range() const {
  int64_t least = std::numeric_limits<int64_t>::max(), most = 0;
  for (size_t w = 0; w < live_.size(); ++w) {
    if (!live_[w]) continue;
    least = std::min(least, handed_[w]);
    most = std::max(most, handed_[w]);
  }
  return {least, most};
}

bool BatchCoordinator::may_take(int worker) const {
  if (queue_.empty()) return false;
  if (staleness_ == 0) return true;
  // Taking one more, this worker would be handed_ + 1 batches in; the slowest live one is at least.
  return handed_[static_cast<size_t>(worker)] + 1 - live_range().first <= staleness_;
}

BatchCoordinator::Assignment BatchCoordinator::next(int worker) {
  Assignment a = take(worker);
  // A batch taken by the slowest worker may release one held back by the staleness bound.
  if (a.kind == Assignment::Kind::Batch) workers_cv_.notify_all();
  return a;
}

BatchCoordinator::Assignment BatchCoordinator::take(int worker) {
  std::unique_lock<std::mutex> lock(mutex_);
  workers_cv_.wait(lock, [&] { return failure_ || finished_ || may_take(worker); });
  Assignment a;
  if (failure_) {
    a.kind = Assignment::Kind::Error;
    a.status = failure_->first;
    a.message = failure_->second;
    return a;
  }
  if (finished_) return a;
  a.kind = Assignment::Kind::Batch;
  a.batch = queue_.front();
  a.learning_rate = learning_rate_;
  queue_.pop_front();
  holding_[static_cast<size_t>(worker)].insert(a.batch);
  ++handed_[static_cast<size_t>(worker)];
  const auto [least, most] = live_range();
  max_gap_ = std::max(max_gap_, most - least);
  return a;
}

void BatchCoordinator::done(int worker, int64_t batch, int64_t rows, const backend::LossSums& sums) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (holding_[static_cast<size_t>(worker)].erase(batch) == 0) return;
    --remaining_;
    events_.done.push_back(Done{worker, batch, rows, sums});
  }
  main_cv_.notify_all();
}

void BatchCoordinator::lost(int worker, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!live_[static_cast<size_t>(worker)]) return;
    live_[static_cast<size_t>(worker)] = false;
    std::set<int64_t>& held = holding_[static_cast<size_t>(worker)];
    // Back to the front, in order: they are the oldest batches of the epoch.
    for (auto it = held.rbegin(); it != held.rend(); ++it) queue_.push_front(*it);
    const std::string given = held.size() == 1 ? " (its unfinished batch goes to the others)"
                                                : " (its " + std::to_string(held.size()) + " unfinished batches go to the others)";
    events_.lost.push_back(why + (held.empty() ? "" : given));
    held.clear();
  }
  main_cv_.notify_all();
  workers_cv_.notify_all();
}

}  // namespace kx::core
