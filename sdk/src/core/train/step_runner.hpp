// One training step on every replica of a model: the step's values (seed, rate), forward and backward
// of each replica's slice of the batch, the all-reduce of the gradients, the optimizer update and the
// moving average of the weights (EMA); replayed from recorded graphs where the backends can. The
// collective arrives made: which one (in process, NCCL, across processes) is the strategy's choice
// (distribute/collective_factory.hpp), never the step's.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/model/network.hpp"
#include "core/train/data_feed.hpp"
#include "core/train/step_graphs.hpp"
#include "distribute/collective.hpp"
#include "kx/model.hpp"

namespace kx {
struct Replica;
}

namespace kx::core {

class StepRunner {
 public:
  StepRunner() = default;  // before compile: no step can run
  // collective: sums the replicas' gradients, null when there is nothing to sum (one replica).
  // record_graphs: steps may be recorded once and replayed where the backends can.
  StepRunner(std::unique_ptr<distribute::Collective> collective, bool record_graphs);

  // One optimizer step of m on the global batch of `rows` samples gathered by storage index (idx,
  // every replica's feed staged); m.optimizer_steps counts it. Its loss is added to the backends'
  // sums (Model::Impl::take_loss_sums).
  void run(Model::Impl& m, const int64_t* idx, int64_t rows);
  // The gradient of the batch (as run() computes it, summed over the local replicas into every
  // replica's gradient arena) without an update: a parameter-server worker's step. t numbers the
  // batch for its random seeds (dropout).
  void gradients(Model::Impl& m, const int64_t* idx, int64_t rows, int64_t t);
  // use_ema: the trained weights := their moving average (when fit ends).
  void finalize_ema(Model::Impl& m);
  // Once, after a replica's recorded steps fell back to direct ones because a recording failed: a
  // line saying so. "" otherwise.
  std::string take_fallback_notice();

 private:
  // The parts a step is recorded in: all of it with one replica; with several, the forward and
  // backward pass, then the all-reduce and update, so that a replica failing in the first never
  // leaves the others waiting in the all-reduce.
  enum Part : int { kWholeStep, kForwardBackward, kUpdate };

  // The StepValues of step number t (1 for the first).
  backend::StepValues step_values(const Model::Impl& m, int64_t t) const;
  // Forward, loss and backward of one replica's slice; the loss is scaled by 1 / global rows.
  void forward_backward(Model::Impl& m, Replica& r, Slice s, int64_t global_rows) const;
  // The update of step number t of a global batch of global_rows, with the rate of the replica's
  // StepValues.
  void update(Model::Impl& m, Replica& r, int64_t t, int64_t global_rows) const;
  // What a recorded part of the step on replica k depends on.
  StepGraphKey graph_key(Model::Impl& m, int k, Part part, int64_t global_rows) const;
  // Runs part `part` of a step on replica k: replayed from a recorded graph where the backend can.
  template <class Body>
  void run_part(Model::Impl& m, int k, Part part, int64_t global_rows, Body&& body);
  // The arena spans the optimizer updates, for the network's current revision.
  void refresh_spans(const Network& net);
  // Looks for a replica whose recording failed since the last look, once.
  void look_for_fallback(const Model::Impl& m);

  std::unique_ptr<distribute::Collective> collective_;
  bool record_graphs_ = false;
  uint64_t spans_revision_ = ~uint64_t{0};
  std::vector<ArenaSpan> trained_spans_, state_spans_;
  bool fallback_seen_ = false;
  std::string fallback_notice_;
};

// Gathers replica r's slice of the batch (its uploaded indices) from its feed and runs forward and the
// loss, adding to the backend's loss sums; in training also dL/d(output), scaled by grad_scale.
void replica_forward_loss(Model::Impl& m, Replica& r, Slice s, bool training, float grad_scale);

}  // namespace kx::core
