// The chief's hand-out of an epoch's batches to parameter-server workers: each worker asks for its
// next batch when it is done with the last, so fast workers take more (no worker waits for the
// slowest), unless the staleness bound k holds a worker back: it may be at most k batches ahead of the
// slowest live worker. A worker that is lost gives its unfinished batches back to the others, so every
// batch of the epoch is done exactly once by some worker. Thread-safe: the chief's main thread
// drives epochs; one thread per worker asks on its behalf.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "kx/error.hpp"

namespace kx::core {

class BatchCoordinator {
 public:
  // workers: how many; staleness: k (0 = unbounded). Every worker counts as live from the start.
  BatchCoordinator(int workers, int staleness);

  // ---- the chief's main thread
  // Batches [first, first + count) are to be done; lr goes with each of them.
  void begin_epoch(int64_t first, int64_t count, double learning_rate);
  void set_learning_rate(double learning_rate);
  struct Done {
    int worker = 0;
    int64_t batch = 0, rows = 0;
    backend::LossSums sums;  // the batch's weighted loss, correct and weight sums
  };
  struct Events {
    std::vector<Done> done;
    std::vector<std::string> lost;  // why each worker lost since the last call was lost
    // Every batch of the epoch is done (or was never handed out, after stop_epoch), and this is the
    // last of the epoch's Done: the chief's loop ends on it, never on a separate epoch_complete(),
    // which a worker may make true between a wait and that check, its Done still untaken.
    bool epoch_complete = false;
  };
  // What happened since the last call; waits up to `wait` for something to happen, or for the epoch
  // to be complete.
  Events wait(std::chrono::milliseconds wait);
  // Every batch of the epoch is done (a worker's view; see Events::epoch_complete for the chief's).
  bool epoch_complete() const;
  // Hands out no more batches of this epoch (a callback stopped training); those handed out finish.
  void stop_epoch();
  int live_workers() const;
  // Every worker's next ask is answered End.
  void finish();
  // Every worker's next ask is answered with this error, and check() throws it.
  void fail(Status status, const std::string& message);
  void check() const;
  // Batches handed to each worker in all; the largest gap (in batches handed out) seen between the
  // most and the least advanced live worker.
  std::vector<int64_t> handed_out() const;
  int64_t max_gap() const;

  // ---- the thread of one worker
  struct Assignment {
    enum class Kind { Batch, End, Error } kind = Kind::End;
    int64_t batch = -1;
    double learning_rate = 0;
    Status status = Status::Ok;
    std::string message;
  };
  // Blocks until this worker may take a batch, training ends or fails.
  Assignment next(int worker);
  // The worker finished this batch (its rows and loss sums). A batch it no longer holds (handed to
  // another after it was thought lost) is ignored.
  void done(int worker, int64_t batch, int64_t rows, const backend::LossSums& sums);
  // The worker is gone: its unfinished batches go back to the queue.
  void lost(int worker, const std::string& why);

 private:
  Assignment take(int worker);
  bool may_take(int worker) const;  // under mutex_
  std::pair<int64_t, int64_t> live_range() const;  // least and most handed out among live workers

  mutable std::mutex mutex_;
  std::condition_variable workers_cv_, main_cv_;
  const int staleness_;
  std::deque<int64_t> queue_;
  std::vector<std::set<int64_t>> holding_;
  std::vector<bool> live_;
  std::vector<int64_t> handed_;
  int64_t remaining_ = 0;  // batches of the epoch not done yet
  double learning_rate_ = 0;
  int64_t max_gap_ = 0;
  bool finished_ = false;
  std::optional<std::pair<Status, std::string>> failure_;
  Events events_;
};

}  // namespace kx::core
