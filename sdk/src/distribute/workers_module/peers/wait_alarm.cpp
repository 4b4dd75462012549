#include "distribute/workers_module/peers/wait_alarm.hpp"

#include <algorithm>

namespace kx::workers {

WaitAlarm::WaitAlarm() : thread_([this] { run(); }) {}

WaitAlarm::~WaitAlarm() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

WaitAlarm::Armed::Armed(WaitAlarm& alarm, gloo::transport::UnboundBuffer* buffer, bool recv, Clock::time_point deadline)
    : alarm_(alarm) {
  bool sooner = false;
  {
    std::lock_guard<std::mutex> lock(alarm_.mutex_);
    id_ = alarm_.next_id_++;
    alarm_.entries_[id_] = Entry{deadline, buffer, recv};
    sooner = deadline < alarm_.sleeping_until_;
  }
  // Most waits end long before their deadline: the alarm thread is woken only when it would sleep past one.
  if (sooner) alarm_.cv_.notify_all();
}

WaitAlarm::Armed::~Armed() {
  // Under the lock: once this returns, the alarm never touches the buffer for this wait.
  std::lock_guard<std::mutex> lock(alarm_.mutex_);
  alarm_.entries_.erase(id_);
}

void WaitAlarm::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.deadline <= now) {
        // An abort that lands after the wait completed only makes the next wait on that buffer return
        // early, which the waiter treats as "not yet" and waits again.
        if (it->second.recv)
          it->second.buffer->abortWaitRecv();
        else
          it->second.buffer->abortWaitSend();
        it = entries_.erase(it);
      } else {
        next = std::min(next, it->second.deadline);
        ++it;
      }
    }
    sleeping_until_ = next;
    if (next == Clock::time_point::max())
      cv_.wait(lock);
    else
      cv_.wait_until(lock, next);
    sleeping_until_ = Clock::time_point::min();  // awake: whatever is armed now is seen before it sleeps
  }
}

}  // namespace kx::workers
