// What a multi-worker fit shares between its worker processes besides the gradients: the metrics'
// sums, what the chief's callbacks decided (stop, a failure, the learning rate, new weights), the
// state every worker starts from, and a check that every worker trains the same thing.
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "core/model/model_impl.hpp"
#include "core/train/resume.hpp"
#include "core/train/train_position.hpp"
#include "core/train/training_fingerprint.hpp"
#include "distribute/worker_group.hpp"
#include "kx/error.hpp"

namespace kx {

bool Model::Impl::multi_worker() const { return strategy.worker_group() && strategy.worker_group()->size() > 1; }

int64_t Model::Impl::local_rows(int64_t rows) const {
  int64_t here = 0;
  for (int k = 0; k < static_cast<int>(replicas.size()); ++k) here += slice(k, rows).rows;
  return here;
}

backend::LossSums Model::Impl::sum_across_workers(backend::LossSums sums, int64_t* seen) const {
  if (!multi_worker()) return sums;
  double values[4] = {sums.loss, sums.correct, sums.weight, seen ? static_cast<double>(*seen) : 0.0};
  strategy.worker_group()->all_reduce_sum(values, 4);
  if (seen) *seen = static_cast<int64_t>(values[3]);
  return {values[0], values[1], values[2]};
}

namespace {

// What the chief's callbacks decided at an event, sent to every worker.
struct ChiefDecision {
  int32_t stop = 0;
  int32_t status = 0;           // a failure on the chief (kx::Status), 0 for none
  int32_t weights_changed = 0;  // a callback replaced weights (EarlyStopping's restore): they follow
  int32_t reserved = 0;
  double learning_rate = 0;     // a schedule may have changed it on the chief
  char message[232] = {};
};
static_assert(sizeof(ChiefDecision) == 256, "sent as raw bytes between workers of one build");

}  // namespace

bool Model::Impl::share_chief_decision(bool stop, bool weights_changed, const std::exception_ptr& failure) {
  const bool chief = strategy.worker_index() == 0;
  ChiefDecision d;
  if (chief) {
    d.stop = stop ? 1 : 0;
    d.weights_changed = weights_changed ? 1 : 0;
    d.learning_rate = learning_rate;
    if (failure) {
      Status status = Status::Internal;
      std::string what = "an unknown failure";
      try {
        std::rethrow_exception(failure);
      } catch (const Error& e) {
        status = e.status();
        what = e.what();
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      d.status = static_cast<int32_t>(status);
      std::snprintf(d.message, sizeof d.message, "%s", what.c_str());
    }
  }
  strategy.worker_group()->broadcast(&d, sizeof d, 0);
  if (d.status != 0) {
    if (failure) std::rethrow_exception(failure);
    d.message[sizeof d.message - 1] = '\0';
    fail(static_cast<Status>(d.status), std::string("the chief stopped training: ") + d.message);
  }
  learning_rate = d.learning_rate;
  if (d.weights_changed) {
    std::vector<float> w = chief ? host_params() : std::vector<float>(static_cast<size_t>(net.num_params));
    strategy.worker_group()->broadcast(w.data(), w.size() * sizeof(float), 0);
    if (!chief) set_params(w.data());
  }
  return d.stop != 0;
}

void Model::Impl::align_workers_at_start(const core::FitStart& start) {
  if (!multi_worker()) return;
  // Every worker resumes where the chief does (a checkpoint directory one of them cannot see would
  // part them silently) ...
  const std::string here = "epoch " + std::to_string(start.epoch + 1) + ", batch " + std::to_string(start.step) +
                           ", optimizer step " + std::to_string(optimizer_steps) + ", data pass " +
                           std::to_string(start.data_pass) + " at batch " + std::to_string(start.data_position);
  const std::vector<std::string> all = strategy.worker_group()->all_gather(here);
  for (size_t w = 1; w < all.size(); ++w)
    require(all[w] == all[0], Status::InvalidArgument,
            "the workers start at different places: " + strategy.worker_group()->describe_worker(static_cast<int>(w)) +
                " at " + all[w] + ", the chief at " + all[0] + " (is the checkpoint directory shared?)");
  // ... and from the chief's weights and optimizer state, as replicas start from replica 0's.
  const bool chief = strategy.worker_index() == 0;
  for (const backend::DeviceBuffer Replica::*buffer : {&Replica::params, &Replica::slot_m, &Replica::slot_v, &Replica::slot_a, &Replica::slot_ema}) {
    const size_t floats = static_cast<size_t>((replicas.front().*buffer).floats());
    if (floats == 0) continue;
    std::vector<float> values = chief ? host_slot(buffer) : std::vector<float>(floats);
    strategy.worker_group()->broadcast(values.data(), floats * sizeof(float), 0);
    if (chief) continue;
    for (Replica& r : replicas) r.be->to_device(values.data(), floats * sizeof(float), (r.*buffer).data());
  }
}

bool Model::Impl::chief_decides(bool stop) const {
  if (!multi_worker()) return stop;
  int32_t flag = stop ? 1 : 0;
  strategy.worker_group()->broadcast(&flag, sizeof flag, 0);
  return flag != 0;
}

void Model::Impl::require_same_training_on_every_worker(const Dataset& train, const core::SampleWeights& weights,
                                                       int64_t steps) const {
  if (!multi_worker()) return;
  // What the parameter-server chief asks of its workers, and the local replicas (a worker's share of
  // the global batch depends on them).
  const std::string mine =
      training_fingerprint(train, weights, steps) + "local replicas=" + std::to_string(replicas.size()) + "\n";
  const std::vector<std::string> all = strategy.worker_group()->all_gather(mine);
  for (size_t w = 1; w < all.size(); ++w)
    require(all[w] == all[0], Status::InvalidArgument,
            "the workers do not train the same thing: " +
                strategy.worker_group()->describe_worker(static_cast<int>(w)) + " has " +
                core::first_difference(all[w], all[0]));
}

}  // namespace kx
