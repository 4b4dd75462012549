#include "core/train/batch_decoder.hpp"

#include "kx/error.hpp"

namespace kx::core {

BatchDecoder::BatchDecoder(Dataset data, Plan plan, int32_t depth)
    : data_(std::move(data)), plan_(std::move(plan)), depth_(depth), sample_floats_(num_elements(data_.x_shape())) {
  if (depth_ > 0) thread_ = std::jthread([this](std::stop_token stop) { produce(stop); });
}

BatchDecoder::~BatchDecoder() {
  if (!thread_.joinable()) return;
  thread_.request_stop();  // wakes a producer waiting for room (condition_variable_any with the token)
  thread_.join();
}

void BatchDecoder::decode(const Planned& p, DecodedRows& out) const {
  const auto rows = static_cast<int64_t>(p.idx.size());
  out.first = p.first;
  out.rows = rows;
  out.x.resize(static_cast<size_t>(rows * sample_floats_));
  std::exception_ptr first_error;
  int64_t failed_row = rows;
  std::mutex error_mutex;
#pragma omp parallel for schedule(dynamic) if (rows > 1)
  for (int64_t i = 0; i < rows; ++i) {
    try {
      data_.read_sample(p.idx[static_cast<size_t>(i)], p.pass, out.x.data() + i * sample_floats_);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (i < failed_row) {  // the same error whichever thread meets it first
        failed_row = i;
        first_error = std::current_exception();
      }
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

void BatchDecoder::produce(std::stop_token stop) {
  for (;;) {
    DecodedRows buffer;
    {
      std::unique_lock lock(mutex_);
      if (!changed_.wait(lock, stop, [&] { return static_cast<int32_t>(ready_.size()) < depth_; })) return;
      if (!spare_.empty()) {
        buffer = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    Item item{std::move(buffer), nullptr};
    try {
      decode(plan_(), item.rows);
    } catch (...) {
      item.error = std::current_exception();
    }
    const bool failed = item.error != nullptr;
    {
      std::lock_guard lock(mutex_);
      ready_.push_back(std::move(item));
    }
    changed_.notify_all();
    if (failed || stop.stop_requested()) return;  // the consumer meets the error at that batch
  }
}

const DecodedRows& BatchDecoder::next() {
  if (failed_) std::rethrow_exception(failed_);
  if (depth_ == 0) {
    decode(plan_(), current_);
    return current_;
  }
  Item item;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty(); });
    item = std::move(ready_.front());
    ready_.pop_front();
    spare_.push_back(std::move(current_));
  }
  changed_.notify_all();
  if (item.error) {
    failed_ = item.error;
    std::rethrow_exception(failed_);
  }
  current_ = std::move(item.rows);
  return current_;
}

}  // namespace kx::core
