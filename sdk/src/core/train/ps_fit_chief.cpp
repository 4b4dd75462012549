// The chief's fit under the parameter-server strategy. It trains nothing itself: it hands each epoch's
// batches to the workers as they ask (BatchCoordinator: the staleness bound, lost workers' batches to
// the others), shows the progress bar from the losses they report, runs the callbacks, and at the end
// of each epoch takes the state back from the ps tasks for validation and checkpoints. It also watches
// the ps tasks: one lost stops the whole job with Comm.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/callbacks/progress_bar.hpp"
#include "core/model/model_impl.hpp"
#include "core/train/batch_coordinator.hpp"
#include "core/train/resume.hpp"
#include "core/train/training_fingerprint.hpp"
#include "core/train/train_position.hpp"
#include "distribute/ps_cluster.hpp"
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

// Callbacks' view of the fit: the chief's model, whose state is taken from the ps tasks when a
// callback needs it (a checkpoint), and given back to them when a callback replaces the weights.
class PsChiefControl final : public TrainingControl {
 public:
  PsChiefControl(Model::Impl& m, const Callbacks* cb, const Dataset& train, bool validation)
      : order(core::DataOrder::of(train)), m_(m), cb_(cb), validation_(validation) {}

  bool emit(const Event& e) { return cb_ && cb_->dispatch(e, *this); }
  void save_checkpoint(const std::string& path) override {
    if (ps_serving) m_.pull_state_from_ps();
    io::write_file_durably(path, m_.encode(&position, &order));
    Event e;
    e.kind = EventKind::CheckpointSaved;
    e.epoch = position.epoch;
    e.step = position.step_in_epoch;
    e.global_step = m_.optimizer_steps;
    e.path = path;
    emit(e);
  }
  std::vector<float> get_weights() const override {
    if (ps_serving) m_.pull_state_from_ps();
    return m_.get_weights();
  }
  void set_weights(const std::vector<float>& w) override {
    if (ps_serving) m_.pull_state_from_ps();  // the slots and step, with the new weights
    m_.set_weights(w);
    if (ps_serving) m_.push_state_to_ps();
  }
  double initial_learning_rate() const override { return m_.optimizer.learning_rate.value_or(0); }
  void set_learning_rate(double lr) override {
    require(std::isfinite(lr) && lr >= 0, Status::InvalidArgument, "learning rate must be finite and >= 0");
    m_.learning_rate = lr;
  }
  double learning_rate() const override { return m_.learning_rate; }
  std::vector<NamedTensor> named_weights() const override {
    const std::vector<float> all = get_weights();
    std::vector<NamedTensor> out;
    for (const WeightInfo& w : m_.tensors_of(m_.net.keras_layer_order())) {
      const auto first = all.begin() + w.offset;
      out.push_back({w.name, std::vector<float>(first, first + num_elements(w.shape))});
    }
    return out;
  }
  bool has_validation() const override { return validation_; }
  bool has_accuracy() const override { return m_.options.accuracy; }

  // What a checkpoint written now records: a checkpoint within an epoch resumes at that epoch's start.
  core::TrainPosition position;
  const core::DataOrder order;
  bool ps_serving = false;  // the ps tasks hold the live state

 private:
  Model::Impl& m_;
  const Callbacks* cb_;
  bool validation_;
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
        if (request.a >= 0) coordinator_.done(i, request.a, request.b, request.x, request.y);
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
  PsCluster& c = *strategy.parameter_servers();
  core::ProgressBar bar(o.verbose, stdout);
  PsChiefControl control(*this, cb, train, o.validation != nullptr);
  learning_rate = optimizer.learning_rate.value_or(0);
  const core::FitStart start = core::start_of_fit(*this, o, steps, pass_steps, control.order, bar);
  const auto place = [&](int epoch, int64_t step) {
    const int64_t g = static_cast<int64_t>(epoch) * steps;
    control.position = {epoch, step, steps, static_cast<uint64_t>(g / pass_steps), g % pass_steps};
  };
  push_state_to_ps();
  control.ps_serving = true;
  core::BatchCoordinator coordinator(c.num_workers(), c.staleness());
  WorkerDesk desk(c, coordinator, training_fingerprint(train, weights, steps));
  const auto event = [&](EventKind kind, int32_t epoch = -1, int64_t step = -1) {
    Event e;
    e.kind = kind;
    e.epoch = epoch;
    e.step = step;
    e.steps_per_epoch = steps;
    e.global_step = optimizer_steps;
    return e;
  };
  // Comm naming the first ps task that is gone or silent.
  const auto check_ps = [&] {
    for (int j = 0; j < c.num_ps(); ++j) c.peers().probe(c.ps_rank(j));
  };
  bool stop = false;
  try {
    stop = control.emit(event(EventKind::TrainBegin));
    std::vector<std::string> lost;
    for (int epoch = start.epoch; epoch < o.epochs && !stop; ++epoch) {
      place(epoch, 0);
      stop = control.emit(event(EventKind::EpochBegin, epoch, 0));
      bar.begin_epoch(epoch, o.epochs, steps);
      backend::LossSums sums;
      int64_t seen = 0, done = 0;
      std::vector<int64_t> by_worker(static_cast<size_t>(c.num_workers()), 0);
      core::Metrics metrics;
      coordinator.begin_epoch(static_cast<int64_t>(epoch) * steps, stop ? 0 : steps, learning_rate);
      Clock::time_point last_check = Clock::now();
      for (bool complete = false; !complete;) {
        const core::BatchCoordinator::Events events = coordinator.wait(std::chrono::milliseconds(200));
        complete = events.epoch_complete;
        coordinator.check();
        for (const std::string& why : events.lost) {
          bar.message("Lost " + why);
          lost.push_back(why);
        }
        for (const core::BatchCoordinator::Done& d : events.done) {
          sums.loss += d.loss;
          sums.correct += d.correct;
          seen += d.rows;
          ++done;
          ++by_worker[static_cast<size_t>(d.worker)];
          if (cb && cb->terminate_on_nan() && !std::isfinite(d.loss))
            fail(Status::Diverged, "the loss became " + std::to_string(d.loss) + " at epoch " + std::to_string(epoch + 1) +
                                       ", batch " + std::to_string(done) + " (TerminateOnNaN)");
          metrics.clear();
          const double loss = sums.loss / static_cast<double>(seen);
          const double accuracy = options.accuracy ? sums.correct / static_cast<double>(seen) : std::nan("");
          if (options.accuracy) metrics.emplace_back("accuracy", accuracy);
          metrics.emplace_back("loss", loss);
          if (bar.due(done) || done == steps) bar.update(done, metrics);
          if (cb && !cb->empty() && !stop) {
            Event e = event(EventKind::BatchEnd, epoch, done);
            e.loss = loss;
            e.accuracy = accuracy;
            e.batch_loss = d.loss / static_cast<double>(d.rows);
            e.batch_accuracy = options.accuracy ? d.correct / static_cast<double>(d.rows) : std::nan("");
            if (control.emit(e)) {
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
      Event end = event(EventKind::EpochEnd, epoch, steps);
      end.loss = seen > 0 ? sums.loss / static_cast<double>(seen) : std::nan("");
      end.accuracy = options.accuracy && seen > 0 ? sums.correct / static_cast<double>(seen) : std::nan("");
      if (history) {
        history->record("loss", end.loss);
        if (options.accuracy) history->record("accuracy", end.accuracy);
        history->record("ps_samples", static_cast<double>(seen));
        history->record("ps_max_step_gap", static_cast<double>(coordinator.max_gap()));
        for (size_t w = 0; w < by_worker.size(); ++w)
          history->record("ps_steps_worker_" + std::to_string(w), static_cast<double>(by_worker[w]));
      }
      if (o.validation && !stop) {
        Dataset val = o.validation_steps > 0 ? o.validation->take(o.validation_steps * o.validation->batch_size())
                                             : *o.validation;
        const EvalResult r = evaluate_checked(val);
        end.val_loss = r.loss;
        end.val_accuracy = r.accuracy;
        if (options.accuracy) metrics.emplace_back("val_accuracy", r.accuracy);
        metrics.emplace_back("val_loss", r.loss);
        if (history) {
          history->record("val_loss", r.loss);
          if (options.accuracy) history->record("val_accuracy", r.accuracy);
        }
      }
      if (history) history->finish_epoch(epoch);
      bar.end_epoch(metrics);
      place(epoch, steps);
      stop = control.emit(end) || stop;
    }
    desk.close();  // every worker told; they say goodbye to the ps tasks on their own
    end_ps_service();
    control.ps_serving = false;
  } catch (const Error& e) {
    desk.abandon(e.status(), e.what());
    throw;
  }
  control.emit(event(EventKind::TrainEnd));
  return stop ? Status::Stopped : Status::Ok;
}

}  // namespace kx
