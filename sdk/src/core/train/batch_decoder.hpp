// Batches of a decoded dataset (image files, maps) made ready for the step: this process's rows of
// each global batch decoded into memory, on the caller's thread, or with prefetch on a background
// thread that runs `depth` batches ahead. Memory stays bounded by depth + 2 batches, however large
// the data; the decoded values are the same either way (each sample depends only on its index and
// pass).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/train/data_feed.hpp"
#include "kx/dataset.hpp"

namespace kx::core {

class BatchDecoder {
 public:
  // The next batch's rows this process decodes: storage indices of rows [first, first + idx.size())
  // of the global batch, read for pass `pass`.
  struct Planned {
    std::vector<int64_t> idx;
    int64_t first = 0;
    uint64_t pass = 0;
  };
  // Called once per batch, in order, on the decoding thread.
  using Plan = std::function<Planned()>;

  // depth 0: each batch is decoded when next() asks for it; depth n > 0: a thread keeps n batches
  // decoded ahead.
  BatchDecoder(Dataset data, Plan plan, int32_t depth);
  // Stops the thread (a batch being decoded is finished first).
  ~BatchDecoder();
  BatchDecoder(const BatchDecoder&) = delete;
  BatchDecoder& operator=(const BatchDecoder&) = delete;

  // The next batch's rows; valid until the next call. Rethrows the failure that decoding this batch
  // met (its message names the file).
  const DecodedRows& next();

 private:
  struct Item {
    DecodedRows rows;
    std::exception_ptr error;
  };
  // Decodes planned rows into out, the rows side by side (OpenMP); the first failing row's error.
  void decode(const Planned& p, DecodedRows& out) const;
  void produce(std::stop_token stop);

  Dataset data_;
  Plan plan_;
  int32_t depth_;
  int64_t sample_floats_;
  DecodedRows current_;
  std::exception_ptr failed_;  // the failure next() rethrew: every later call rethrows it too
  std::mutex mutex_;
  std::condition_variable_any changed_;
  std::deque<Item> ready_;
  std::vector<DecodedRows> spare_;  // buffers handed back, reused
  std::jthread thread_;             // last: stopped and joined before the members it uses go
};

}  // namespace kx::core
