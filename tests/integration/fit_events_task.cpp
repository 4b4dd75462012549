// One task of a small fit whose events and history test_parameter_server.cpp compares across
// strategies: a softmax MLP on synthetic data, with validation data, a ModelCheckpoint at each
// epoch's end, a learning-rate schedule (which logs the rate) and a callback recording every event.
// The chief (or the one process of strategy=mirrored) writes OUT_FILE:
//   history <key> <value per epoch, as %a> ...
//   event <kind> <the names of the fields set> ...     (one line per event, in order)
// Usage: kx_fit_events_task OUT_DIR strategy=parameter_server|mirrored [class_weight=W0,W1,W2]
// (parameter_server: TF_CONFIG names the task; a ps task serves). Exit: 0 done, 1 an error.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kx/kx.hpp"

namespace {

constexpr int64_t kFeatures = 8, kClasses = 3, kBatch = 32;

const char* kind_name(kx::EventKind k) {
  switch (k) {
    case kx::EventKind::TrainBegin: return "TrainBegin";
    case kx::EventKind::EpochBegin: return "EpochBegin";
    case kx::EventKind::BatchEnd: return "BatchEnd";
    case kx::EventKind::EpochEnd: return "EpochEnd";
    case kx::EventKind::TrainEnd: return "TrainEnd";
    case kx::EventKind::CheckpointSaved: return "CheckpointSaved";
  }
  return "?";
}

// Each event as the kind and the names of its fields that carry a value (-1 and NaN carry none).
class EventRecorder final : public kx::Callback {
 public:
  bool on_event(const kx::Event& e, kx::TrainingControl&) override {
    std::string line = std::string("event ") + kind_name(e.kind);
    const auto field = [&](const char* name, bool set) {
      if (set) line += std::string(" ") + name;
    };
    field("epoch", e.epoch >= 0);
    field("step", e.step >= 0);
    field("steps_per_epoch", e.steps_per_epoch > 0);
    field("global_step", e.global_step >= 0);
    field("loss", std::isfinite(e.loss));
    field("accuracy", std::isfinite(e.accuracy));
    field("val_loss", std::isfinite(e.val_loss));
    field("val_accuracy", std::isfinite(e.val_accuracy));
    field("path", !e.path.empty());
    field("batch_loss", std::isfinite(e.batch_loss));
    field("batch_accuracy", std::isfinite(e.batch_accuracy));
    field("learning_rate", std::isfinite(e.learning_rate));
    lines.push_back(line);
    return false;
  }
  std::vector<std::string> lines;
};

// Samples of 8 features, labelled by the largest of three linear scores: learnable, not at once.
kx::Dataset synthetic(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * kFeatures)), y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float* row = &x[static_cast<size_t>(i * kFeatures)];
    double score[kClasses] = {};
    for (int64_t f = 0; f < kFeatures; ++f) {
      row[f] = dist(gen);
      for (int64_t c = 0; c < kClasses; ++c) score[c] += row[f] * std::sin(static_cast<double>(1 + f * kClasses + c));
    }
    int64_t best = 0;
    for (int64_t c = 1; c < kClasses; ++c)
      if (score[c] > score[best]) best = c;
    y[static_cast<size_t>(i)] = static_cast<float>(best);
  }
  kx::Dataset d = kx::Dataset::from_arrays(x.data(), kx::DType::F32, {n, kFeatures}, y.data(), kx::DType::F32, {n});
  d.batch(kBatch, false);
  return d;
}

std::string arg(int argc, char** argv, const std::string& key) {
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind(key + "=", 0) == 0) return a.substr(key.size() + 1);
  }
  return "";
}

std::vector<float> floats(const std::string& list) {
  std::vector<float> out;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stof(item));
  return out;
}

int run(int argc, char** argv) {
  const std::string out_dir = argv[1];
  const bool ps = arg(argc, argv, "strategy") == "parameter_server";
  kx::Strategy strategy = ps ? kx::Strategy::parameter_server({"cpu"}) : kx::Strategy::mirrored({"cpu"});
  strategy.set_num_threads(1);
  if (ps && strategy.parameter_server_rank() > strategy.parameter_server_workers()) {
    strategy.serve();
    return 0;
  }
  const bool chief = !ps || strategy.parameter_server_rank() == 0;

  kx::Dataset train = synthetic(320, 3);
  train.shuffle(320, 5);
  kx::Dataset validation = synthetic(96, 4);
  kx::Model model = kx::Model::sequential(strategy, {kFeatures});
  model.add_dense(16, kx::Activation::Relu);
  model.add_dense(kClasses, kx::Activation::Softmax);
  kx::CompileOptions co;
  co.optimizer.learning_rate = 0.01;
  co.accuracy = true;
  co.seed = 7;
  model.compile(co);

  kx::Callbacks callbacks;
  const auto recorder = std::make_shared<EventRecorder>();
  callbacks.add(recorder);
  callbacks.add_model_checkpoint(out_dir + "/checkpoints/epoch-{epoch:02d}.kx", 0, 0);
  callbacks.add_learning_rate_scheduler([](int32_t epoch, double lr) { return epoch == 0 ? lr : lr * 0.5; });
  kx::FitOptions fo;
  fo.epochs = 2;
  fo.validation = &validation;
  fo.class_weight = floats(arg(argc, argv, "class_weight"));
  kx::History history;
  const kx::Status status = model.fit(train, fo, &callbacks, &history);
  if (status != kx::Status::Ok) {
    std::fprintf(stderr, "fit ended with status %d\n", static_cast<int>(status));
    return 1;
  }
  if (!chief) return 0;
  std::ofstream out(out_dir + "/record.txt");
  for (const auto& [key, values] : history.values()) {
    out << "history " << key;
    for (double v : values) {
      char text[64];
      std::snprintf(text, sizeof text, " %a", v);
      out << text;
    }
    out << "\n";
  }
  for (const std::string& line : recorder->lines) out << line << "\n";
  return out.good() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR strategy=parameter_server|mirrored [class_weight=W0,W1,...]\n", argv[0]);
    return 1;
  }
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "task error: %s\n", e.what());
    return 1;
  }
}
