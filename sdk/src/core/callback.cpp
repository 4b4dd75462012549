#include "kx/callback.hpp"

#include "kx/error.hpp"

namespace kx {

bool Callbacks::dispatch(const Event& e) const {
  bool stop = false;
  for (const auto& fn : fns_) stop = fn(e) || stop;  // every callback sees every event
  return stop;
}

double History::get(const std::string& name, int32_t index) const {
  auto it = values_.find(name);
  require(it != values_.end(), Status::InvalidArgument, "history has no \"" + name + "\"");
  require(index >= 0 && index < static_cast<int32_t>(it->second.size()), Status::InvalidArgument,
          "history epoch index " + std::to_string(index) + " out of range [0, " + std::to_string(it->second.size()) +
              ")");
  return it->second[static_cast<size_t>(index)];
}

}  // namespace kx
