// What the workers of one job must agree on to train together, and the words for where two differ.
#include "core/train/training_fingerprint.hpp"

#include <functional>
#include <string>
#include <string_view>

#include "core/model/model_impl.hpp"
#include "core/train/train_position.hpp"

namespace kx {

namespace core {

std::string first_difference(const std::string& theirs, const std::string& ours) {
  size_t a = 0, b = 0;
  while (a < theirs.size() && b < ours.size()) {
    const size_t ea = theirs.find('\n', a), eb = ours.find('\n', b);
    const std::string la = theirs.substr(a, ea - a), lb = ours.substr(b, eb - b);
    if (la != lb) return la + ", the chief " + lb;
    if (ea == std::string::npos || eb == std::string::npos) break;
    a = ea + 1;
    b = eb + 1;
  }
  return "a different description, the chief " + ours;
}

}  // namespace core

std::string Model::Impl::training_fingerprint(const Dataset& train, const core::SampleWeights& weights,
                                              int64_t steps) const {
  const core::DataOrder order = core::DataOrder::of(train);
  const std::string weighed =
      weights ? std::to_string(std::hash<std::string_view>{}(std::string_view(
                    reinterpret_cast<const char*>(weights->data()), weights->size() * sizeof(float))))
              : "none";
  return "model=" + std::to_string(std::hash<std::string>{}(to_json())) +
         "\ncompile settings=" + std::to_string(std::hash<std::string>{}(compile_config().dump())) +
         "\nparameters=" + std::to_string(net.num_params) + "\nbatch=" + std::to_string(train.batch_size()) +
         "\nsamples=" + std::to_string(train.num_samples()) + "\nsteps per epoch=" + std::to_string(steps) +
         "\nshuffle=" + std::to_string(order.shuffle_buffer) + " samples, seed " + std::to_string(order.shuffle_seed) +
         "\ndrop_remainder=" + (order.drop_remainder ? "true" : "false") + "\nsample weights=" + weighed + "\n";
}

}  // namespace kx
