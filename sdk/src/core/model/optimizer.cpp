// Optimizer settings: the learning rate's default and range checks.
#include "kx/optimizer.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "kx/error.hpp"

namespace kx {

OptimizerConfig OptimizerConfig::resolved() const {
  OptimizerConfig r = *this;
  const int k = static_cast<int>(kind);
  require(k >= 0 && k <= 3, Status::InvalidArgument, "unknown optimizer " + std::to_string(k));
  auto check = [](double v, const char* name, bool below_one) {
    require(std::isfinite(v) && v >= 0 && (!below_one || v < 1), Status::InvalidArgument,
            std::string(name) + (below_one ? " must be in [0, 1)" : " must be finite and >= 0") + ", got " +
                std::to_string(v));
  };
  if (!r.learning_rate) r.learning_rate = kind == OptimizerKind::Sgd ? 1e-2 : 1e-3;
  check(*r.learning_rate, "learning_rate", false);
  check(beta1, "beta1", true);
  check(beta2, "beta2", true);
  // The kernels compute in float32 (as Keras): a beta that rounds to 1.0f there would divide by zero.
  for (const auto& [beta, name] : {std::pair{beta1, "beta1"}, std::pair{beta2, "beta2"}})
    require(static_cast<float>(beta) < 1.0f, Status::InvalidArgument,
            std::string(name) + " " + std::to_string(beta) + " rounds to 1 in float32; use a value below 0.99999997");
  check(epsilon, "epsilon", false);
  check(momentum, "momentum", true);
  check(ema_momentum, "ema_momentum", true);
  check(weight_decay, "weight_decay", false);
  check(rho, "rho", true);
  return r;
}

bool OptimizerConfig::uses_slot_m() const { return adam_family() || momentum != 0; }
bool OptimizerConfig::uses_slot_v() const { return adam_family() || kind == OptimizerKind::RmsProp; }
bool OptimizerConfig::uses_slot_a() const { return kind == OptimizerKind::RmsProp && centered; }

}  // namespace kx
