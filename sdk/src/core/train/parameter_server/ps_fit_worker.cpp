// A parameter-server worker's fit: it asks the chief for a batch, pulls the current weights from the ps
// tasks, computes the batch's gradient on its own replicas and pushes it to the ps tasks, which apply
// it at once (asynchronous training: no worker waits for another), until the chief says training is
// over. Each batch's loss sums go back to the chief with the next ask. (Pulling at the start of each
// step rather than taking the weights a push is answered with keeps the gradients fresher: with the
// latter the two-worker MLP lost about 0.01 of test accuracy.)
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "config/test_hooks.hpp"
#include "core/model/model_impl.hpp"
#include "core/train/parameter_server/ps_cluster.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

using distribute::PsHeader;
using distribute::PsKind;

// The tests' hold file (config/test_hooks.hpp): while it exists, the worker waits before it asks for a batch.
void wait_while_held(const std::string& hold) {
  if (hold.empty()) return;
  std::error_code ec;
  while (std::filesystem::exists(hold, ec)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace

Status Model::Impl::fit_as_ps_worker(Dataset& train, const core::SampleWeights& weights, int64_t steps,
                                     int64_t pass_steps, History* history) {
  require(!optimizer.use_ema, Status::Unsupported, "use_ema with the parameter-server strategy");
  // The ps tasks' shards update with Adam or SGD only.
  require(optimizer.kind == OptimizerKind::Adam || optimizer.kind == OptimizerKind::Sgd, Status::Unsupported,
          "the parameter-server strategy trains with Adam or SGD, not AdamW or RMSprop");
  distribute::PsCluster& c = *strategy.parameter_servers();
  stage_dataset(train, weights);
  take_loss_sums();  // nothing left over from a call that failed

  // The chief answers once the ps tasks hold its state; a worker that trains something else is refused.
  PsHeader hello;
  hello.kind = static_cast<uint32_t>(PsKind::Hello);
  const std::string fingerprint = training_fingerprint(train, weights, steps);
  hello.payload = fingerprint.size();
  c.call(0, hello, fingerprint.data(), nullptr, distribute::ClusterPeers::Wait::Idle);

  const std::chrono::milliseconds delay = config::test_hooks().ps_step_delay;  // a slow worker (tests, benches)
  const std::string hold = config::test_hooks().ps_hold_file;
  std::map<uint64_t, std::vector<int64_t>> orders;  // the passes over the data this worker has read
  std::vector<float> params, grads;
  int64_t done = 0;
  PsHeader ask;
  ask.kind = static_cast<uint32_t>(PsKind::Next);
  ask.a = -1;
  double weight_sum = 0;  // of the batch just done: the payload of the next ask
  for (;;) {
    wait_while_held(hold);
    // The chief may hold the answer (staleness, the end of an epoch): as long as it lives.
    const PsHeader given = c.call(0, ask, &weight_sum, nullptr, distribute::ClusterPeers::Wait::Idle);
    if (given.kind == static_cast<uint32_t>(PsKind::End)) break;
    require(given.kind == static_cast<uint32_t>(PsKind::Batch), Status::Internal, "the chief sent no batch");
    const int64_t batch = given.a;
    require(batch >= 0, Status::Internal, "the chief sent a negative batch index");
    // Global batch g of the stream of passes over the data: pass g / pass_steps, batch g % pass_steps.
    const auto pass = static_cast<uint64_t>(batch / pass_steps);
    const int64_t first = (batch % pass_steps) * train.batch_size();
    const int64_t rows = std::min(train.batch_size(), train.num_samples() - first);
    auto order = orders.find(pass);
    if (order == orders.end()) {
      if (orders.size() > 2) orders.erase(orders.begin());
      order = orders.emplace(pass, train.order(pass)).first;
    }
    pull_params_from_ps(params);
    steps_.gradients(*this, order->second.data() + first, rows, batch + 1);
    grads = host_slot(&Replica::grads);
    push_gradients_to_ps(grads, given.x);
    const backend::LossSums sums = take_loss_sums();
    ask.a = batch;
    ask.b = rows;
    ask.x = sums.loss;
    ask.y = sums.correct;
    ask.payload = sizeof weight_sum;
    weight_sum = sums.weight;
    ++done;
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
  }
  // The weights training ended with, for predict / get_weights here too.
  pull_params_from_ps(params);
  say_goodbye_to_ps();
  if (history) {
    history->record("ps_steps", static_cast<double>(done));
    history->finish_epoch(0);
  }
  return Status::Ok;
}

}  // namespace kx
