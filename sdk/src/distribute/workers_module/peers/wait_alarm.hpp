// Bounded waits on Gloo's unbound buffers without Gloo's own timeout: when a wait on an unbound buffer
// times out, Gloo closes every connection of the context, which would end a parameter server's service
// to all its workers because one was slow. Instead a wait is given a very long Gloo timeout and this
// alarm aborts it (abortWaitRecv / abortWaitSend) at the caller's deadline, leaving the operation
// posted and every connection open.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#include <gloo/transport/unbound_buffer.h>

namespace kx::workers {

class WaitAlarm {
 public:
  using Clock = std::chrono::steady_clock;
  WaitAlarm();
  ~WaitAlarm();
  WaitAlarm(const WaitAlarm&) = delete;
  WaitAlarm& operator=(const WaitAlarm&) = delete;

  // While alive, the wait on `buffer` (a receive when `recv`, else a send) is aborted at `deadline`.
  class Armed {
   public:
    Armed(WaitAlarm& alarm, gloo::transport::UnboundBuffer* buffer, bool recv, Clock::time_point deadline);
    ~Armed();
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;

   private:
    WaitAlarm& alarm_;
    uint64_t id_;
  };

 private:
  struct Entry {
    Clock::time_point deadline;
    gloo::transport::UnboundBuffer* buffer;
    bool recv;
  };
  void run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> entries_;
  uint64_t next_id_ = 0;
  bool stopping_ = false;
  Clock::time_point sleeping_until_ = Clock::time_point::max();  // when the alarm thread wakes next
  std::thread thread_;  // last: starts once the rest is set
};

}  // namespace kx::workers
