// The chief's fit under the parameter-server strategy. It trains nothing itself: it hands each epoch's
// batches to the workers as they ask (BatchCoordinator: the staleness bound, lost workers' batches to
// the others) and drives the fit session (fit_session.hpp: events, history, validation, the bar) from
// the loss sums they report, taking the state back from the ps tasks at the end of each epoch for
// validation and checkpoints. It also watches the ps tasks: one lost stops the whole job with Comm.
#include <atomic>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "core/model/model_impl.hpp"
#include "core/train/fit_session.hpp"
#include "core/train/parameter_server/batch_coordinator.hpp"
#include "core/train/parameter_server/ps_cluster.hpp"
#include "core/train/resume.hpp"
#include "core/train/train_position.hpp"
#include "core/train/training_fingerprint.hpp"
#include "kx/error.hpp"

namespace kx {
namespace {

using distribute::PsCluster;
using distribute::PsHeader;
using distribute::PsKind;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kPsCheckEvery{1000};

PsHeader reply(PsKind kind) {
  PsHeader h;
  h.kind = static_cast<uint32_t>(kind);
  return h;
}

// The chief's fit session: the ps tasks hold the live state while they serve, so the model's is taken
// from them when a callback needs it (a checkpoint, the weights) and given back to them when a callback
// replaces the weights.
class PsChiefSession final : public core::FitSession {
 public:
  using FitSession::FitSession;

  bool ps_serving = false;  // the ps tasks hold the live state

 protected:
  void fetch_state() const override {
    if (ps_serving) model_.pull_state_from_ps();
  }
  void weights_replaced() override {
    if (ps_serving) model_.push_state_to_ps();
  }
  // A checkpoint within an epoch resumes at that epoch's start: it records no running sums.
  core::TrainPosition checkpoint_position() override { return position; }
};

// The threads that answer the workers on the chief's behalf, stopped and joined however the fit ends.
class WorkerDesk {
 public:
  WorkerDesk(PsCluster& c, core::BatchCoordinator& coordinator, std::string fingerprint)
      : c_(c), coordinator_(coordinator), fingerprint_(std::move(fingerprint)) {
    for (int i = 0; i < c_.num_workers(); ++i) threads_.emplace_back([this, i] { serve(i); });
  }
  ~WorkerDesk() { close(); }
  // Every worker's next ask is answered End (or the coordinator's failure); returns when all are.
  void close() {
    coordinator_.finish();
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }
  // Ends the threads without waiting for the workers' next asks (the fit failed).
  void abandon(Status status, const std::string& why) {
    coordinator_.fail(status, why);
    abandoned_ = true;
    close();
  }

 private:
  void serve(int i) {
    const int rank = c_.worker_rank(i);
    const auto abandoned = [this] { return abandoned_.load(); };
    try {
      PsHeader request;
      std::vector<char> payload;
      if (!c_.next_request(rank, request, payload, abandoned)) return;
      const std::string theirs(payload.begin(), payload.end());
      if (request.kind != static_cast<uint32_t>(PsKind::Hello) || theirs != fingerprint_) {
        const std::string why = "the chief and " + c_.peers().describe(rank) + " do not train the same thing: it has " +
                                core::first_difference(theirs, fingerprint_);
        c_.reply_error(rank, Status::InvalidArgument, why);
        coordinator_.fail(Status::InvalidArgument, why);
        return;
      }
      c_.reply(rank, reply(PsKind::Ok), nullptr);
      for (;;) {
        if (!c_.next_request(rank, request, payload, abandoned)) return;
        require(request.kind == static_cast<uint32_t>(PsKind::Next), Status::Misuse,
                c_.peers().describe(rank) + " sent the chief a request it does not serve");
        if (request.a >= 0) coordinator_.done(i, request.a, request.b, batch_sums(request, payload, rank));
        const core::BatchCoordinator::Assignment a = coordinator_.next(i);
        if (a.kind == core::BatchCoordinator::Assignment::Kind::Error) {
          c_.reply_error(rank, a.status, "the chief stopped training: " + a.message);
          return;
        }
        if (a.kind == core::BatchCoordinator::Assignment::Kind::End) {
          c_.reply(rank, reply(PsKind::End), nullptr);
          return;
        }
        PsHeader h = reply(PsKind::Batch);
        h.a = a.batch;
        h.x = a.learning_rate;
        c_.reply(rank, h, nullptr);
      }
    } catch (const Error& e) {
      if (e.status() == Status::Comm)
        coordinator_.lost(i, e.what());
      else
        coordinator_.fail(e.status(), e.what());
    }
  }

  // The sums of the batch a worker's Next reports: loss and correct in the header, the weight sum after it.
  backend::LossSums batch_sums(const PsHeader& next, const std::vector<char>& payload, int rank) const {
    require(payload.size() == sizeof(double), Status::Misuse,
            c_.peers().describe(rank) + " reported a batch without its weight sum");
    backend::LossSums sums{next.x, next.y, 0};
    std::memcpy(&sums.weight, payload.data(), sizeof sums.weight);
    return sums;
  }

  PsCluster& c_;
  core::BatchCoordinator& coordinator_;
  const std::string fingerprint_;
  std::atomic<bool> abandoned_{false};
  std::vector<std::thread> threads_;  // last: started once the rest is set
};

}  // namespace

Status Model::Impl::fit_as_ps_chief(Dataset& train, const core::SampleWeights& weights, const FitOptions& o,
                                    const Callbacks* cb, History* history, int64_t steps, int64_t pass_steps) {
  require(!optimizer.use_ema, Status::Unsupported, "use_ema with the parameter-server strategy");
  // The ps tasks' shards update with Adam or SGD only.
  require(optimizer.kind == OptimizerKind::Adam || optimizer.kind == OptimizerKind::Sgd, Status::Unsupported,
          "the parameter-server strategy trains with Adam or SGD, not AdamW or RMSprop");
  PsCluster& c = *strategy.parameter_servers();
  PsChiefSession session(*this, cb, history, train, o, steps, o.verbose);
  learning_rate = optimizer.learning_rate.value_or(0);
  const core::FitStart start = core::start_of_fit(*this, o, steps, pass_steps, session.order, session.bar());
  const auto place = [&](int epoch, int64_t step) {
    const int64_t g = static_cast<int64_t>(epoch) * steps;
    session.position = {epoch, step, steps, static_cast<uint64_t>(g / pass_steps), g % pass_steps};
  };
  push_state_to_ps();
  session.ps_serving = true;
  core::BatchCoordinator coordinator(c.num_workers(), c.staleness());
  WorkerDesk desk(c, coordinator, training_fingerprint(train, weights, steps));
  // Comm naming the first ps task that is gone or silent.
  const auto check_ps = [&] {
    for (int j = 0; j < c.num_ps(); ++j) c.peers().probe(c.ps_rank(j));
  };
  bool stop = false;
  try {
    stop = session.emit(session.event(EventKind::TrainBegin));
    std::vector<std::string> lost;
    for (int epoch = start.epoch; epoch < o.epochs && !stop; ++epoch) {
      place(epoch, 0);
      session.begin_epoch({}, 0);
      stop = session.emit(session.event(EventKind::EpochBegin, epoch, 0));
      session.show_epoch_begin(epoch, 0);
      int64_t done = 0;
      std::vector<int64_t> by_worker(static_cast<size_t>(c.num_workers()), 0);
      coordinator.begin_epoch(static_cast<int64_t>(epoch) * steps, stop ? 0 : steps, learning_rate);
      Clock::time_point last_check = Clock::now();
      for (bool complete = false; !complete;) {
        const core::BatchCoordinator::Events events = coordinator.wait(std::chrono::milliseconds(200));
        complete = events.epoch_complete;
        coordinator.check();
        for (const std::string& why : events.lost) {
          session.bar().message("Lost " + why);
          lost.push_back(why);
        }
        for (const core::BatchCoordinator::Done& d : events.done) {
          session.metrics.add(d.sums, d.rows);
          ++done;
          ++by_worker[static_cast<size_t>(d.worker)];
          session.bar().step_done(done);
          if (const std::exception_ptr diverged = session.divergence(d.sums.loss, epoch, done))
            std::rethrow_exception(diverged);
          session.show_progress(done);
          if (session.has_callbacks() && !stop) {
            if (session.emit(session.batch_end(epoch, done, core::BatchSums{d.sums, d.rows}))) {
              stop = true;
              coordinator.stop_epoch();
            }
            coordinator.set_learning_rate(learning_rate);
          }
        }
        if (coordinator.live_workers() == 0) {
          check_ps();  // the workers may have gone because a ps did
          std::string why;
          for (const std::string& l : lost) why += (why.empty() ? "" : "; ") + l;
          fail(Status::Comm, "every worker is lost: " + why);
        }
        if (Clock::now() - last_check >= kPsCheckEvery) {
          check_ps();
          last_check = Clock::now();
        }
      }
      pull_state_from_ps();
      core::Metrics extras{{"ps_samples", static_cast<double>(session.metrics.seen())},
                           {"ps_max_step_gap", static_cast<double>(coordinator.max_gap())}};
      for (size_t w = 0; w < by_worker.size(); ++w)
        extras.emplace_back("ps_steps_worker_" + std::to_string(w), static_cast<double>(by_worker[w]));
      const Event end = session.end_epoch(epoch, stop, extras);
      place(epoch, steps);
      stop = session.emit(end) || stop;
    }
    desk.close();  // every worker told; they say goodbye to the ps tasks on their own
    end_ps_service();
    session.ps_serving = false;
  } catch (const Error& e) {
    desk.abandon(e.status(), e.what());
    throw;
  }
  session.emit(session.event(EventKind::TrainEnd));
  return stop ? Status::Stopped : Status::Ok;
}

}  // namespace kx
