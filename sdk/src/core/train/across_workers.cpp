// What a multi-worker fit shares between its worker processes besides the gradients: the metrics'
// sums, the chief's decision to stop, and a check that every worker trains the same thing.
#include <functional>
#include <string>
#include <vector>

#include "core/model/model_impl.hpp"
#include "distribute/worker_group.hpp"
#include "kx/error.hpp"

namespace kx {

bool Model::Impl::multi_worker() const { return strategy.num_workers() > 1; }

int64_t Model::Impl::local_rows(int64_t rows) const {
  int64_t here = 0;
  for (int k = 0; k < static_cast<int>(replicas.size()); ++k) here += slice(k, rows).rows;
  return here;
}

backend::LossSums Model::Impl::sum_across_workers(backend::LossSums sums, int64_t* seen) const {
  if (!multi_worker()) return sums;
  double values[3] = {sums.loss, sums.correct, seen ? static_cast<double>(*seen) : 0.0};
  strategy.worker_group()->all_reduce_sum(values, 3);
  if (seen) *seen = static_cast<int64_t>(values[2]);
  return {values[0], values[1]};
}

bool Model::Impl::chief_decides(bool stop) const {
  if (!multi_worker()) return stop;
  int32_t flag = stop ? 1 : 0;
  strategy.worker_group()->broadcast(&flag, sizeof flag, 0);
  return flag != 0;
}

void Model::Impl::require_same_training_on_every_worker(const Dataset& train, int64_t steps) const {
  if (!multi_worker()) return;
  // What must agree, in words, so that the error can say what differs.
  const std::vector<std::pair<std::string, std::string>> mine = {
      {"model", std::to_string(std::hash<std::string>{}(to_json()))},
      {"parameters", std::to_string(net.num_params)},
      {"local replicas", std::to_string(replicas.size())},
      {"global batch", std::to_string(train.batch_size())},
      {"samples", std::to_string(train.num_samples())},
      {"steps per epoch", std::to_string(steps)},
  };
  std::string blob;
  for (const auto& [key, value] : mine) blob += key + "=" + value + "\n";
  const std::vector<std::string> all = strategy.worker_group()->all_gather(blob);
  for (size_t w = 1; w < all.size(); ++w) {
    if (all[w] == all[0]) continue;
    // The first line that differs.
    size_t a = 0, b = 0;
    while (a < all[0].size() && b < all[w].size()) {
      const size_t ea = all[0].find('\n', a), eb = all[w].find('\n', b);
      const std::string la = all[0].substr(a, ea - a), lb = all[w].substr(b, eb - b);
      if (la != lb)
        fail(Status::InvalidArgument, "the workers do not train the same thing: " +
                                          strategy.worker_group()->describe_worker(static_cast<int>(w)) + " has " +
                                          lb + ", the chief " + la);
      a = ea + 1;
      b = eb + 1;
    }
  }
}

}  // namespace kx
