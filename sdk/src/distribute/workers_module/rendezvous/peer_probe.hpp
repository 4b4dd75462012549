// After an operation failed: which workers are gone (nothing listens at their address any more) or
// silent (they accept but do not answer: stopped or hung), asked of every worker's rendezvous service
// at once, so that every survivor can name the worker at fault.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "distribute/workers_module/rendezvous/rendezvous_protocol.hpp"

namespace kx::workers {

// What a probe of `name` that ended in `r` says of it, e.g. "worker 1 (127.0.0.1:2223) is gone
// (nothing listens at its address: it exited or was killed)"; empty when it answered.
std::string describe_unanswered(const std::string& name, const CallResult& r, std::chrono::milliseconds window);

// One clause per worker other than `self` that is gone or silent, e.g. "worker 1 (127.0.0.1:2223) is
// gone (nothing listens at its address: it exited or was killed)"; empty when every one answers
// within `window`.
std::vector<std::string> find_absent_workers(int self, const std::vector<std::string>& addresses,
                                             std::chrono::milliseconds window);

}  // namespace kx::workers
